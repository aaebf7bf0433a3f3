"""Electricity supplier metering and billing: customers, smart and legacy meters with
register readings, flat and time-of-use tariffs, actual and estimated reads, period billing with
standing charges and VAT, payments, and the debt path from disconnection notice to
disconnection and reconnection.

Smart meters have two registers ("peak" and "offpeak"); legacy meters have one ("standard").
A flat tariff charges every register at its single "standard" rate; a time-of-use tariff
charges each register at its own rate and needs a smart meter. Customer balances are amounts
owed (negative = in credit). Everything runs against the supplier's business date.
"""

import copy
import datetime
import math


def _parse_date(value):
    if not isinstance(value, str):
        return None
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        return None


class MeteringBilling:
    """Back office of a retail electricity supplier."""

    PLAUSIBILITY_FACTOR = 5.0
    PLAUSIBILITY_MARGIN_KWH = 10.0
    READ_OVERDUE_DAYS = 90
    ESTIMATE_MIN_GAP_DAYS = 30
    MAX_CONSECUTIVE_ESTIMATES = 2
    TARIFF_SWITCH_READ_DAYS = 7
    PAYMENT_TERMS_DAYS = 14
    PAYMENT_METHODS = ("direct_debit", "card", "bank_transfer", "cash_at_paypoint")

    def __init__(self, init_config: dict):
        self.business_date = ""
        self.settings = {}
        self.tariffs = {}
        self.customers = {}
        self.meters = {}
        self.readings = {}
        self.bills = {}
        self.payments = {}

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _find(collection, key):
        """Record stored under `key`, or None for unknown or non-string keys."""
        return collection.get(key) if isinstance(key, str) else None

    def _today(self):
        return _parse_date(self.business_date)

    def _next_id(self, collection, prefix):
        highest = 0
        for key in collection:
            digits = key[len(prefix):]
            if key.startswith(prefix) and digits.isdigit():
                highest = max(highest, int(digits))
        return f"{prefix}{highest + 1}"

    def _overdue_bills(self, customer_id):
        today = self._today()
        return [bid for bid, b in sorted(self.bills.items())
                if b["customer_id"] == customer_id and b["status"] != "paid" and _parse_date(b["due_date"]) < today]

    def _record_reading(self, meter, meter_id, read_date, registers, kind, source):
        reading_id = self._next_id(self.readings, "RD")
        self.readings[reading_id] = {"meter_id": meter_id, "date": read_date, "registers": dict(registers),
                                     "type": kind, "source": source, "billed": False}
        for band, value in registers.items():
            meter["registers"][band] = value
        meter["last_read_date"] = read_date
        meter["last_read_type"] = kind
        return reading_id

    # ------------------------------------------------------------------ queries

    def get_customer_account(self, customer_id: str) -> dict:
        """Show a customer's account: status, balance, meters and unpaid bills (with overdue flag).

        Args:
            customer_id: Customer id, e.g. "CU101".

        Returns:
            The customer record plus `meters` and `unpaid_bills`.
        """
        customer = self._find(self.customers, customer_id)
        if customer is None:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        meters = [{"meter_id": mid, "serial": m["serial"], "status": m["status"], "tariff_id": m["tariff_id"]}
                  for mid, m in sorted(self.meters.items()) if m["customer_id"] == customer_id]
        overdue = set(self._overdue_bills(customer_id))
        unpaid = [{"bill_id": bid, "outstanding": b["outstanding"], "due_date": b["due_date"], "overdue": bid in overdue}
                  for bid, b in sorted(self.bills.items()) if b["customer_id"] == customer_id and b["status"] != "paid"]
        data = dict(customer, customer_id=customer_id, meters=meters, unpaid_bills=unpaid)
        return {"success": True, "data": copy.deepcopy(data)}

    def get_meter(self, meter_id: str) -> dict:
        """Show a meter with its registers, tariff, reading and billing history markers.

        Args:
            meter_id: Meter id, e.g. "MT5001".

        Returns:
            The meter record with its id.
        """
        meter = self._find(self.meters, meter_id)
        if meter is None:
            return {"success": False, "error": f"Meter {meter_id} not found"}
        return {"success": True, "data": copy.deepcopy(dict(meter, meter_id=meter_id))}

    def get_tariff(self, tariff_id: str) -> dict:
        """Show a tariff's unit rates per register, daily standing charge and VAT rate.

        Args:
            tariff_id: Tariff id, e.g. "T2".

        Returns:
            The tariff record with its id.
        """
        tariff = self._find(self.tariffs, tariff_id)
        if tariff is None:
            return {"success": False, "error": f"Tariff {tariff_id} not found"}
        return {"success": True, "data": copy.deepcopy(dict(tariff, tariff_id=tariff_id))}

    def list_meters_due_for_reading(self) -> dict:
        """List active meters whose last actual reading is more than 90 days old (or that have
        only estimated readings since), longest wait first.

        Returns:
            Meter id, customer, last read date and type, and days since the last actual read.
        """
        today = self._today()
        rows = []
        for meter_id, meter in self.meters.items():
            if meter["status"] != "active":
                continue
            last_actual = meter["last_actual_read_date"]
            days = (today - _parse_date(last_actual)).days if last_actual else None
            if days is None or days > self.READ_OVERDUE_DAYS:
                rows.append({"meter_id": meter_id, "customer_id": meter["customer_id"], "last_read_date": meter["last_read_date"],
                             "last_read_type": meter["last_read_type"], "days_since_actual_read": days})
        rows.sort(key=lambda r: (-(r["days_since_actual_read"] or 10 ** 6), r["meter_id"]))
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ readings

    def submit_reading(self, meter_id: str, read_date: str, registers: dict, source: str = "customer") -> dict:
        """Record an actual meter reading.

        Rules: the meter must be active (not faulty or disconnected); the date must be valid,
        not in the future and after the last reading; registers must name exactly the meter's
        registers, with values (kWh, at most one decimal) not lower than the current ones; the
        implied average daily use may not exceed five times the meter's average plus 10 kWh
        (implausible reads need a site visit). The meter's average daily use is updated
        (70% old average, 30% new period).

        Args:
            meter_id: Meter id, e.g. "MT5001".
            read_date: ISO date the reading was taken.
            registers: Object of register name -> cumulative kWh, e.g. {"peak": 18250.4, "offpeak": 9120.0}.
            source: "customer", "engineer" or "smart_meter".

        Returns:
            The reading id and consumption since the previous reading per register.
        """
        meter = self._find(self.meters, meter_id)
        if meter is None:
            return {"success": False, "error": f"Meter {meter_id} not found"}
        if source not in ("customer", "engineer", "smart_meter"):
            return {"success": False, "error": "source must be 'customer', 'engineer' or 'smart_meter'"}
        if source == "smart_meter" and meter["meter_type"] != "smart":
            return {"success": False, "error": f"Meter {meter_id} is a legacy meter and cannot send readings"}
        if meter["status"] != "active":
            return {"success": False, "error": f"Meter {meter_id} is {meter['status']}; readings are not accepted"}
        day = _parse_date(read_date)
        if day is None:
            return {"success": False, "error": f"Invalid read_date: {read_date!r}"}
        if day > self._today():
            return {"success": False, "error": "read_date cannot be in the future"}
        last = _parse_date(meter["last_read_date"])
        if day <= last:
            return {"success": False, "error": f"read_date must be after the last reading on {meter['last_read_date']}"}
        if not isinstance(registers, dict) or set(registers) != set(meter["registers"]):
            return {"success": False, "error": f"registers must be exactly {sorted(meter['registers'])}"}
        used = {}
        for band, value in registers.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or round(value, 1) != value:
                return {"success": False, "error": f"Register {band} must be a number with at most one decimal"}
            if value < meter["registers"][band]:
                return {"success": False,
                        "error": f"Register {band} reading {value} is below the current {meter['registers'][band]}"}
            used[band] = round(value - meter["registers"][band], 1)
        days = (day - last).days
        daily = sum(used.values()) / days
        if daily > meter["avg_daily_kwh"] * self.PLAUSIBILITY_FACTOR + self.PLAUSIBILITY_MARGIN_KWH:
            return {"success": False, "error": f"Implausible reading: {daily:.1f} kWh/day against an average of "
                                               f"{meter['avg_daily_kwh']} kWh/day; book a site visit"}
        reading_id = self._record_reading(meter, meter_id, read_date, {b: float(v) for b, v in registers.items()},
                                          "actual", source)
        meter["last_actual_read_date"] = read_date
        meter["avg_daily_kwh"] = round(0.7 * meter["avg_daily_kwh"] + 0.3 * daily, 2)
        return {"success": True, "message": f"Reading {reading_id} recorded for {meter_id}", "reading_id": reading_id,
                "consumption_kwh": used}

    def estimate_reading(self, meter_id: str, read_date: str) -> dict:
        """Create an estimated reading from the meter's average daily use, split over the
        registers by the meter's usage profile (kWh rounded to one decimal).

        Rules: the meter must exist and not be disconnected; the date must be valid, not in the
        future and at least 30 days after the last reading of any kind.

        Args:
            meter_id: Meter id, e.g. "MT5005".
            read_date: ISO date to estimate for.

        Returns:
            The reading id and the estimated registers.
        """
        meter = self._find(self.meters, meter_id)
        if meter is None:
            return {"success": False, "error": f"Meter {meter_id} not found"}
        if meter["status"] == "disconnected":
            return {"success": False, "error": f"Meter {meter_id} is disconnected"}
        day = _parse_date(read_date)
        if day is None:
            return {"success": False, "error": f"Invalid read_date: {read_date!r}"}
        if day > self._today():
            return {"success": False, "error": "read_date cannot be in the future"}
        days = (day - _parse_date(meter["last_read_date"])).days
        if days < self.ESTIMATE_MIN_GAP_DAYS:
            return {"success": False, "error": f"Last reading was only {max(days, 0)} days earlier; estimates need a "
                                               f"{self.ESTIMATE_MIN_GAP_DAYS}-day gap"}
        total = meter["avg_daily_kwh"] * days
        estimated = {band: round(meter["registers"][band] + total * share, 1)
                     for band, share in meter["usage_profile"].items()}
        reading_id = self._record_reading(meter, meter_id, read_date, estimated, "estimated", "system")
        return {"success": True, "message": f"Estimated reading {reading_id} created for {meter_id}",
                "reading_id": reading_id, "registers": estimated}

    def mark_meter_faulty(self, meter_id: str, reason: str) -> dict:
        """Mark an active meter as faulty (e.g. display blank, registers not advancing). Faulty
        meters accept no readings until replaced; bills must use estimates.

        Args:
            meter_id: Meter id, e.g. "MT5002".
            reason: Fault description (at least 10 characters).

        Returns:
            Confirmation message.
        """
        meter = self._find(self.meters, meter_id)
        if meter is None:
            return {"success": False, "error": f"Meter {meter_id} not found"}
        if not isinstance(reason, str) or len(reason.strip()) < 10:
            return {"success": False, "error": "reason must be at least 10 characters"}
        if meter["status"] != "active":
            return {"success": False, "error": f"Meter {meter_id} is {meter['status']}"}
        meter["status"] = "faulty"
        meter["fault_reason"] = reason.strip()
        return {"success": True, "message": f"Meter {meter_id} marked faulty"}

    # ------------------------------------------------------------------ billing and payments

    def generate_bill(self, meter_id: str, period_end: str) -> dict:
        """Bill a meter from its last billed reading up to a reading dated `period_end`.

        Energy is charged per register at the tariff's rate (flat tariffs use the "standard"
        rate for every register), plus the daily standing charge for each day of the period,
        plus VAT on both. The bill is due 14 days after issue and is added to the customer's
        balance.

        Rules: a reading must exist on `period_end`, after the last billed date; a bill based on
        an estimated reading is refused when the meter already had two consecutive estimated
        bills (an actual read is needed); closed accounts are not billed.

        Args:
            meter_id: Meter id, e.g. "MT5001".
            period_end: ISO date of the closing reading.

        Returns:
            The bill id and its figures.
        """
        meter = self._find(self.meters, meter_id)
        if meter is None:
            return {"success": False, "error": f"Meter {meter_id} not found"}
        customer = self.customers[meter["customer_id"]]
        if customer["account_status"] == "closed":
            return {"success": False, "error": f"Account {meter['customer_id']} is closed"}
        end = _parse_date(period_end)
        if end is None:
            return {"success": False, "error": f"Invalid period_end: {period_end!r}"}
        start = _parse_date(meter["last_billed_date"])
        if end <= start:
            return {"success": False, "error": f"Meter {meter_id} is already billed up to {meter['last_billed_date']}"}
        reading_id = next((rid for rid, r in sorted(self.readings.items())
                           if r["meter_id"] == meter_id and r["date"] == period_end), None)
        if reading_id is None:
            return {"success": False,
                    "error": f"No reading on {period_end} for meter {meter_id}; submit or estimate one first"}
        reading = self.readings[reading_id]
        estimated = reading["type"] == "estimated"
        if estimated and meter["consecutive_estimated_bills"] >= self.MAX_CONSECUTIVE_ESTIMATES:
            return {"success": False, "error": f"Meter {meter_id} already had {meter['consecutive_estimated_bills']} "
                                               "estimated bills in a row; an actual reading is required"}
        tariff = self.tariffs[meter["tariff_id"]]
        consumption, energy = {}, 0.0
        for band, value in reading["registers"].items():
            kwh = round(value - meter["last_billed_registers"][band], 1)
            consumption[band] = kwh
            rate = tariff["rates"]["standard"] if tariff["type"] == "flat" else tariff["rates"][band]
            energy += kwh * rate
        days = (end - start).days
        energy = round(energy, 2)
        standing = round(days * tariff["standing_charge_per_day"], 2)
        vat = round((energy + standing) * tariff["vat_rate"], 2)
        total = round(energy + standing + vat, 2)
        bill_id = self._next_id(self.bills, "BL")
        self.bills[bill_id] = {
            "customer_id": meter["customer_id"], "meter_id": meter_id, "kind": "energy",
            "period_start": (start + datetime.timedelta(days=1)).isoformat(), "period_end": period_end,
            "consumption_kwh": consumption, "energy_charge": energy, "standing_charge": standing, "vat": vat,
            "total": total, "outstanding": total, "estimated": estimated, "issued_on": self.business_date,
            "due_date": (self._today() + datetime.timedelta(days=self.PAYMENT_TERMS_DAYS)).isoformat(), "status": "unpaid",
        }
        reading["billed"] = True
        meter["last_billed_date"] = period_end
        for band, value in reading["registers"].items():
            meter["last_billed_registers"][band] = value
        meter["consecutive_estimated_bills"] = meter["consecutive_estimated_bills"] + 1 if estimated else 0
        customer["balance"] = round(customer["balance"] + total, 2)
        customer["last_bill_date"] = self.business_date
        return {"success": True, "message": f"Bill {bill_id} issued for {meter_id}", "bill_id": bill_id,
                "consumption_kwh": dict(consumption), "energy_charge": energy, "standing_charge": standing, "vat": vat,
                "total": total, "estimated": estimated}

    def record_payment(self, customer_id: str, amount: float, method: str) -> dict:
        """Record a customer payment. It reduces the balance and is allocated to unpaid bills,
        oldest first; fully covered bills become "paid", partly covered ones "part_paid". Any
        excess stays on the account as credit. An account in arrears whose balance drops to the
        arrears threshold or below becomes active again.

        Args:
            customer_id: Customer id, e.g. "CU102".
            amount: Payment amount, positive with at most two decimals, at most 10,000.
            method: "direct_debit", "card", "bank_transfer" or "cash_at_paypoint".

        Returns:
            The payment id, the bills settled and the new balance.
        """
        customer = self._find(self.customers, customer_id)
        if customer is None:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(amount) \
                or amount <= 0 or round(amount, 2) != amount:
            return {"success": False, "error": "amount must be a positive number with at most two decimals"}
        if amount > 10000:
            return {"success": False, "error": "Payments above 10,000.00 must be processed by the finance team"}
        if method not in self.PAYMENT_METHODS:
            return {"success": False, "error": f"method must be one of {', '.join(self.PAYMENT_METHODS)}"}
        remaining = float(amount)
        settled = []
        for bill_id, bill in sorted(self.bills.items(), key=lambda kv: (kv[1]["issued_on"], kv[0])):
            if remaining <= 0:
                break
            if bill["customer_id"] != customer_id or bill["status"] == "paid":
                continue
            applied = min(remaining, bill["outstanding"])
            bill["outstanding"] = round(bill["outstanding"] - applied, 2)
            bill["status"] = "paid" if bill["outstanding"] == 0 else "part_paid"
            remaining = round(remaining - applied, 2)
            if bill["status"] == "paid":
                settled.append(bill_id)
        payment_id = self._next_id(self.payments, "PM")
        self.payments[payment_id] = {"customer_id": customer_id, "amount": float(amount), "method": method,
                                     "date": self.business_date}
        customer["balance"] = round(customer["balance"] - amount, 2)
        if customer["account_status"] == "in_arrears" and customer["balance"] <= self.settings["arrears_threshold"]:
            customer["account_status"] = "active"
        return {"success": True, "message": f"Payment {payment_id} of {amount:.2f} recorded", "payment_id": payment_id,
                "bills_paid": settled, "balance": customer["balance"]}

    def change_tariff(self, meter_id: str, tariff_id: str) -> dict:
        """Move a meter to another tariff from today.

        Rules: the meter must be active; the tariff must exist, differ from the current one and
        be open to new customers; time-of-use tariffs need a smart meter; the switch needs an
        actual reading from the last 7 days; customers in arrears or disconnected cannot switch.

        Args:
            meter_id: Meter id, e.g. "MT5001".
            tariff_id: Target tariff id, e.g. "T3".

        Returns:
            Old and new tariff.
        """
        meter = self._find(self.meters, meter_id)
        if meter is None:
            return {"success": False, "error": f"Meter {meter_id} not found"}
        tariff = self._find(self.tariffs, tariff_id)
        if tariff is None:
            return {"success": False, "error": f"Tariff {tariff_id} not found"}
        if meter["status"] != "active":
            return {"success": False, "error": f"Meter {meter_id} is {meter['status']}"}
        if meter["tariff_id"] == tariff_id:
            return {"success": False, "error": f"Meter {meter_id} is already on {tariff['name']}"}
        if not tariff["available"]:
            return {"success": False, "error": f"{tariff['name']} is closed to new customers"}
        if tariff["type"] == "tou" and meter["meter_type"] != "smart":
            return {"success": False, "error": f"{tariff['name']} is a time-of-use tariff and needs a smart meter"}
        customer = self.customers[meter["customer_id"]]
        if customer["account_status"] != "active":
            return {"success": False,
                    "error": f"Account {meter['customer_id']} is {customer['account_status']}; tariff switches are blocked"}
        last_actual = _parse_date(meter["last_actual_read_date"])
        if last_actual is None or (self._today() - last_actual).days > self.TARIFF_SWITCH_READ_DAYS:
            return {"success": False,
                    "error": f"A tariff switch needs an actual reading from the last {self.TARIFF_SWITCH_READ_DAYS} days"}
        old = meter["tariff_id"]
        meter["tariff_id"] = tariff_id
        meter["tariff_changed_on"] = self.business_date
        return {"success": True, "message": f"Meter {meter_id} moved to {tariff['name']}", "old_tariff_id": old,
                "new_tariff_id": tariff_id}

    # ------------------------------------------------------------------ debt path

    def issue_disconnection_notice(self, meter_id: str) -> dict:
        """Send the statutory disconnection notice for a meter.

        Rules: the meter must be active without an outstanding notice; the customer must owe
        more than the arrears threshold, have at least one overdue bill, and must not be on the
        priority services register (vulnerable customers are never disconnected). The customer
        enters the "notice" collection stage and the account is marked in arrears.

        Args:
            meter_id: Meter id, e.g. "MT5002".

        Returns:
            The earliest date a disconnection may happen.
        """
        meter = self._find(self.meters, meter_id)
        if meter is None:
            return {"success": False, "error": f"Meter {meter_id} not found"}
        if meter["status"] != "active":
            return {"success": False, "error": f"Meter {meter_id} is {meter['status']}"}
        if meter["disconnection_notice_date"] is not None:
            return {"success": False, "error": f"A notice was already issued on {meter['disconnection_notice_date']}"}
        customer = self.customers[meter["customer_id"]]
        if customer["vulnerable"]:
            return {"success": False,
                    "error": "Customer is on the priority services register and cannot be disconnected"}
        threshold = self.settings["arrears_threshold"]
        if customer["balance"] <= threshold:
            return {"success": False,
                    "error": f"Balance {customer['balance']:.2f} does not exceed the arrears threshold of {threshold:.2f}"}
        if not self._overdue_bills(meter["customer_id"]):
            return {"success": False, "error": "Customer has no overdue bills"}
        meter["disconnection_notice_date"] = self.business_date
        customer["collection_stage"] = "notice"
        customer["account_status"] = "in_arrears"
        earliest = (self._today() + datetime.timedelta(days=self.settings["notice_period_days"])).isoformat()
        return {"success": True, "message": f"Disconnection notice issued for {meter_id}", "earliest_disconnection": earliest}

    def disconnect_meter(self, meter_id: str) -> dict:
        """Disconnect the supply at a meter after an unanswered notice.

        Rules: the meter must be active with a notice at least the notice period old; the
        customer must still owe more than the arrears threshold and not be vulnerable; no
        disconnections during the winter moratorium months.

        Args:
            meter_id: Meter id, e.g. "MT5002".

        Returns:
            Confirmation message.
        """
        meter = self._find(self.meters, meter_id)
        if meter is None:
            return {"success": False, "error": f"Meter {meter_id} not found"}
        if meter["status"] != "active":
            return {"success": False, "error": f"Meter {meter_id} is {meter['status']}"}
        notice = _parse_date(meter["disconnection_notice_date"])
        if notice is None:
            return {"success": False, "error": f"No disconnection notice has been issued for {meter_id}"}
        wait = self.settings["notice_period_days"]
        if (self._today() - notice).days < wait:
            return {"success": False, "error": f"Notice issued {meter['disconnection_notice_date']}; "
                                               f"{wait} days must pass before disconnection"}
        if self._today().month in self.settings["winter_moratorium_months"]:
            return {"success": False, "error": "No disconnections during the winter moratorium"}
        customer = self.customers[meter["customer_id"]]
        if customer["vulnerable"]:
            return {"success": False,
                    "error": "Customer is on the priority services register and cannot be disconnected"}
        if customer["balance"] <= self.settings["arrears_threshold"]:
            return {"success": False, "error": "Arrears are back under the threshold; disconnection cancelled"}
        meter["status"] = "disconnected"
        meter["disconnected_on"] = self.business_date
        customer["account_status"] = "disconnected"
        customer["collection_stage"] = "disconnected"
        return {"success": True, "message": f"Meter {meter_id} disconnected"}

    def reconnect_meter(self, meter_id: str) -> dict:
        """Reconnect a disconnected meter once the customer's debt is cleared. A reconnection
        fee is billed (due in 14 days) and added to the balance; the notice is cleared and the
        account returns to active.

        Rules: the meter must be disconnected and the customer's balance zero or in credit.

        Args:
            meter_id: Meter id, e.g. "MT5004".

        Returns:
            The fee bill id and the new balance.
        """
        meter = self._find(self.meters, meter_id)
        if meter is None:
            return {"success": False, "error": f"Meter {meter_id} not found"}
        if meter["status"] != "disconnected":
            return {"success": False, "error": f"Meter {meter_id} is not disconnected"}
        customer = self.customers[meter["customer_id"]]
        if customer["balance"] > 0:
            return {"success": False,
                    "error": f"Outstanding balance of {customer['balance']:.2f} must be cleared first"}
        fee = self.settings["reconnection_fee"]
        bill_id = self._next_id(self.bills, "BL")
        outstanding = round(max(0.0, fee + min(customer["balance"], 0.0)), 2)
        self.bills[bill_id] = {
            "customer_id": meter["customer_id"], "meter_id": meter_id, "kind": "reconnection_fee",
            "period_start": self.business_date, "period_end": self.business_date, "consumption_kwh": {},
            "energy_charge": 0.0, "standing_charge": 0.0, "vat": 0.0, "total": fee, "outstanding": outstanding,
            "estimated": False, "issued_on": self.business_date,
            "due_date": (self._today() + datetime.timedelta(days=self.PAYMENT_TERMS_DAYS)).isoformat(),
            "status": "paid" if outstanding == 0 else ("part_paid" if outstanding < fee else "unpaid"),
        }
        meter["status"] = "active"
        meter["reconnected_on"] = self.business_date
        meter["disconnection_notice_date"] = None
        customer["balance"] = round(customer["balance"] + fee, 2)
        customer["account_status"] = "active"
        customer["collection_stage"] = "none"
        return {"success": True, "message": f"Meter {meter_id} reconnected", "fee_bill_id": bill_id,
                "balance": customer["balance"]}
