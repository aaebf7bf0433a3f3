"""Retail pharmacy system: prescriptions and refills, lot-tracked stock with expiry,
first-expiry-first-out dispensing, insurance copays and controlled-substance rules."""

import datetime
import uuid

CONTROLLED = ("II", "III", "IV", "V")
MAX_REFILLS = {None: 11, "II": 0, "III": 5, "IV": 5, "V": 5}
VALIDITY_DAYS = {None: 365, "II": 90, "III": 180, "IV": 180, "V": 180}
RETURN_WINDOW_DAYS = 14


class PharmacySystem:
    def __init__(self, init_config: dict):
        self.current_date = ""
        self.pharmacists = {}
        self.prescribers = {}
        self.plans = {}
        self.patients = {}
        self.drugs = {}
        self.lots = {}
        self.prescriptions = {}
        self.dispenses = {}
        self.controlled_log = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _err(message: str) -> dict:
        return {"success": False, "error": message}

    def _next_id(self, kind: str, prefix: str) -> str:
        value = self.counters.get(kind, 1000) + 1
        self.counters[kind] = value
        return f"{prefix}{value}"

    def _add_days(self, days: int) -> str:
        return (datetime.date.fromisoformat(self.current_date) + datetime.timedelta(days=days)).isoformat()

    @staticmethod
    def _days_between(start: str, end: str) -> int:
        return (datetime.date.fromisoformat(end) - datetime.date.fromisoformat(start)).days

    def _sellable_lots(self, drug_id: str) -> list:
        lots = [
            lot
            for lot in self.lots.values()
            if lot["drug_id"] == drug_id and lot["status"] == "available" and lot["quantity"] > 0 and lot["expiry"] > self.current_date
        ]
        return sorted(lots, key=lambda lot: (lot["expiry"], lot["lot_id"]))

    def _pricing(self, patient: dict, drug: dict, quantity: int) -> dict:
        total = round(drug["unit_price"] * quantity, 2)
        plan = self.plans.get(patient.get("plan_id")) if patient.get("plan_id") else None
        covered = (
            plan is not None
            and plan["active"]
            and drug["drug_id"] not in plan["excluded_drugs"]
            and (drug["schedule"] is None or plan["covers_controlled"])
        )
        if covered:
            patient_pay = round(min(plan["tier_copays"][str(drug["tier"])], total), 2)
            reason = f"{plan['name']} tier {drug['tier']} copay"
        else:
            patient_pay = total
            if plan is None:
                reason = "no insurance on file"
            elif not plan["active"]:
                reason = f"plan {plan['plan_id']} inactive"
            else:
                reason = f"not covered by {plan['name']}"
        return {"total_price": total, "patient_pay": patient_pay, "plan_pay": round(total - patient_pay, 2), "basis": reason}

    # ------------------------------------------------------------------ queries
    def get_prescription(self, rx_id: str) -> dict:
        """Return a prescription with drug name, refills left and fill history.

        Args:
            rx_id: Prescription number, e.g. RX300004.
        """
        if not isinstance(rx_id, str) or rx_id not in self.prescriptions:
            return self._err(f"Prescription {rx_id} not found")
        data = dict(self.prescriptions[rx_id])
        data["drug_name"] = self.drugs.get(data["drug_id"], {}).get("name")
        data["dispenses"] = sorted(d["dispense_id"] for d in self.dispenses.values() if d["rx_id"] == rx_id)
        return {"success": True, "data": data}

    def get_patient_profile(self, patient_id: str) -> dict:
        """Return a patient's insurance, allergies, year-to-date out-of-pocket spend and open
        prescriptions (active or on hold).

        Args:
            patient_id: Patient id, e.g. PT2003.
        """
        if not isinstance(patient_id, str) or patient_id not in self.patients:
            return self._err(f"Patient {patient_id} not found")
        data = dict(self.patients[patient_id])
        data["open_prescriptions"] = sorted(
            rx["rx_id"] for rx in self.prescriptions.values() if rx["patient_id"] == patient_id and rx["status"] in ("active", "on_hold")
        )
        return {"success": True, "data": data}

    def check_stock(self, drug_id: str) -> dict:
        """Report stock for a drug: sellable quantity (available, unexpired lots in FEFO order),
        expired and quarantined quantities, and whether it is below its reorder level.

        Args:
            drug_id: Drug id, e.g. D-ATOR20.
        """
        if not isinstance(drug_id, str) or drug_id not in self.drugs:
            return self._err(f"Drug {drug_id} not found")
        drug = self.drugs[drug_id]
        sellable = self._sellable_lots(drug_id)
        expired = sum(l["quantity"] for l in self.lots.values() if l["drug_id"] == drug_id and l["status"] == "available" and l["expiry"] <= self.current_date)
        held = sum(l["quantity"] for l in self.lots.values() if l["drug_id"] == drug_id and l["status"] in ("quarantined", "recalled"))
        total = sum(l["quantity"] for l in sellable)
        return {
            "success": True,
            "data": {
                "drug_id": drug_id,
                "name": drug["name"],
                "sellable_quantity": total,
                "lots": [{"lot_id": l["lot_id"], "expiry": l["expiry"], "quantity": l["quantity"]} for l in sellable],
                "expired_quantity": expired,
                "quarantined_quantity": held,
                "below_reorder_level": total < drug["reorder_level"],
            },
        }

    def list_expiring_lots(self, days: int) -> dict:
        """List available lots with stock that expire within the given number of days
        (already-expired lots included), soonest first.

        Args:
            days: Look-ahead window in days (0-365).
        """
        if isinstance(days, bool) or not isinstance(days, int) or not 0 <= days <= 365:
            return self._err("days must be an integer from 0 to 365")
        limit = self._add_days(days)
        rows = [
            {"lot_id": l["lot_id"], "drug_id": l["drug_id"], "expiry": l["expiry"], "quantity": l["quantity"], "expired": l["expiry"] <= self.current_date}
            for l in self.lots.values()
            if l["status"] == "available" and l["quantity"] > 0 and l["expiry"] <= limit
        ]
        rows.sort(key=lambda r: (r["expiry"], r["lot_id"]))
        return {"success": True, "data": rows}

    def quote_copay(self, rx_id: str) -> dict:
        """Price the next fill of a prescription and split it between patient and insurance.

        Args:
            rx_id: Prescription number.
        """
        if not isinstance(rx_id, str) or rx_id not in self.prescriptions:
            return self._err(f"Prescription {rx_id} not found")
        rx = self.prescriptions[rx_id]
        quote = self._pricing(self.patients[rx["patient_id"]], self.drugs[rx["drug_id"]], rx["quantity"])
        quote["rx_id"] = rx_id
        quote["quantity"] = rx["quantity"]
        return {"success": True, "data": quote}

    # ------------------------------------------------------------------ updates
    def create_prescription(
        self, patient_id: str, drug_id: str, prescriber_id: str, quantity: int, days_supply: int, refills: int, sig: str
    ) -> dict:
        """Enter a new prescription received from a prescriber.

        Rules: prescriber licence must be active and controlled drugs need a prescriber DEA
        number; refills may not exceed 0 for schedule II, 5 for schedules III-V, 11 otherwise;
        days supply 1-90 (max 30 for schedule II); the patient must not be allergic to the drug.
        Validity is 365 days (180 for III-V, 90 for II) from today.

        Args:
            patient_id: Patient id.
            drug_id: Drug id.
            prescriber_id: Prescriber id, e.g. DR101.
            quantity: Units per fill (positive integer).
            days_supply: Days one fill lasts.
            refills: Number of refills authorised.
            sig: Directions for use, e.g. "Take 1 tablet by mouth daily".
        """
        if not isinstance(patient_id, str) or patient_id not in self.patients:
            return self._err(f"Patient {patient_id} not found")
        if not isinstance(drug_id, str) or drug_id not in self.drugs:
            return self._err(f"Drug {drug_id} not found")
        if not isinstance(prescriber_id, str) or prescriber_id not in self.prescribers:
            return self._err(f"Prescriber {prescriber_id} not found")
        drug = self.drugs[drug_id]
        doc = self.prescribers[prescriber_id]
        if doc["license_status"] != "active":
            return self._err(f"Prescriber {prescriber_id} licence is {doc['license_status']}")
        schedule = drug["schedule"]
        if schedule in CONTROLLED and not doc["dea_number"]:
            return self._err(f"Prescriber {prescriber_id} has no DEA registration for schedule {schedule} drugs")
        for name, value in (("quantity", quantity), ("days_supply", days_supply), ("refills", refills)):
            if isinstance(value, bool) or not isinstance(value, int):
                return self._err(f"{name} must be an integer")
        if quantity <= 0:
            return self._err("quantity must be positive")
        max_days = 30 if schedule == "II" else 90
        if not 1 <= days_supply <= max_days:
            return self._err(f"days_supply must be between 1 and {max_days}")
        if not 0 <= refills <= MAX_REFILLS[schedule]:
            label = f"schedule {schedule}" if schedule else "non-controlled"
            return self._err(f"{label} prescriptions allow at most {MAX_REFILLS[schedule]} refills")
        if not isinstance(sig, str) or not sig.strip():
            return self._err("Directions (sig) are required")
        patient = self.patients[patient_id]
        if drug["name"].lower() in [a.lower() for a in patient["allergies"]]:
            return self._err(f"Patient {patient_id} is allergic to {drug['name']}")
        rx_id = self._next_id("rx", "RX")
        self.prescriptions[rx_id] = {
            "rx_id": rx_id,
            "patient_id": patient_id,
            "drug_id": drug_id,
            "prescriber_id": prescriber_id,
            "quantity": quantity,
            "days_supply": days_supply,
            "sig": sig.strip(),
            "refills_authorized": refills,
            "refills_remaining": refills,
            "fills": 0,
            "status": "active",
            "written_date": self.current_date,
            "expires_on": self._add_days(VALIDITY_DAYS[schedule]),
            "last_fill_date": None,
            "next_fill_eligible": None,
            "status_reason": None,
        }
        return {"success": True, "message": f"Prescription {rx_id} created for {drug['name']}", "rx_id": rx_id}

    def dispense_prescription(self, rx_id: str, pharmacist_id: str) -> dict:
        """Fill a prescription (first fill or refill): picks stock first-expiry-first-out from
        available unexpired lots, prices the fill against the patient's plan, records the
        dispense (with an insurance claim reference) and, for controlled drugs, a controlled
        substance log entry.

        Rules: prescription must be active and not past its expiry date; a refill needs refills
        remaining and today on or after the next eligible date (75% of days supply elapsed, 90%
        for controlled drugs); the pharmacist must be active; stock must cover the full quantity.
        The prescription completes when its last fill is dispensed.

        Args:
            rx_id: Prescription number.
            pharmacist_id: Dispensing pharmacist id, e.g. RPH01.
        """
        if not isinstance(rx_id, str) or rx_id not in self.prescriptions:
            return self._err(f"Prescription {rx_id} not found")
        rx = self.prescriptions[rx_id]
        if not isinstance(pharmacist_id, str) or pharmacist_id not in self.pharmacists:
            return self._err(f"Pharmacist {pharmacist_id} not found")
        if not self.pharmacists[pharmacist_id]["active"]:
            return self._err(f"Pharmacist {pharmacist_id} is not active")
        if rx["status"] != "active":
            return self._err(f"Prescription {rx_id} is {rx['status']}")
        if self.current_date > rx["expires_on"]:
            return self._err(f"Prescription {rx_id} expired on {rx['expires_on']}")
        is_refill = rx["fills"] > 0
        if is_refill and rx["refills_remaining"] <= 0:
            return self._err(f"No refills remaining on {rx_id}")
        if rx["next_fill_eligible"] and self.current_date < rx["next_fill_eligible"]:
            return self._err(f"Too early to refill {rx_id}; eligible on {rx['next_fill_eligible']}")
        drug = self.drugs[rx["drug_id"]]
        lots = self._sellable_lots(rx["drug_id"])
        available = sum(l["quantity"] for l in lots)
        if available < rx["quantity"]:
            return self._err(f"Insufficient stock of {drug['name']}: need {rx['quantity']}, have {available}")
        picked = {}
        needed = rx["quantity"]
        for lot in lots:
            take = min(needed, lot["quantity"])
            lot["quantity"] -= take
            if lot["quantity"] == 0:
                lot["status"] = "depleted"
            picked[lot["lot_id"]] = take
            needed -= take
            if needed == 0:
                break
        patient = self.patients[rx["patient_id"]]
        price = self._pricing(patient, drug, rx["quantity"])
        dispense_id = self._next_id("dispense", "DSP")
        self.dispenses[dispense_id] = {
            "dispense_id": dispense_id,
            "rx_id": rx_id,
            "patient_id": rx["patient_id"],
            "drug_id": rx["drug_id"],
            "quantity": rx["quantity"],
            "lots": picked,
            "fill_number": rx["fills"] + 1,
            "patient_pay": price["patient_pay"],
            "plan_pay": price["plan_pay"],
            "claim_reference": str(uuid.uuid4()) if price["plan_pay"] > 0 else None,
            "pharmacist_id": pharmacist_id,
            "dispensed_on": self.current_date,
            "status": "ready",
            "picked_up_on": None,
            "returned_on": None,
            "previous_fill_date": rx["last_fill_date"],
            "previous_next_eligible": rx["next_fill_eligible"],
        }
        ratio = 0.9 if drug["schedule"] in CONTROLLED else 0.75
        rx["fills"] += 1
        if is_refill:
            rx["refills_remaining"] -= 1
        rx["last_fill_date"] = self.current_date
        rx["next_fill_eligible"] = self._add_days(int(rx["days_supply"] * ratio))
        if rx["refills_remaining"] == 0:
            rx["status"] = "completed"
        patient["out_of_pocket_ytd"] = round(patient["out_of_pocket_ytd"] + price["patient_pay"], 2)
        if drug["schedule"] in CONTROLLED:
            self.controlled_log[dispense_id] = {
                "dispense_id": dispense_id,
                "drug_id": rx["drug_id"],
                "schedule": drug["schedule"],
                "quantity": rx["quantity"],
                "prescriber_dea": self.prescribers[rx["prescriber_id"]]["dea_number"],
                "pharmacist_id": pharmacist_id,
                "date": self.current_date,
                "returned_on": None,
            }
        return {
            "success": True,
            "message": f"Dispensed {rx['quantity']} x {drug['name']} for {rx_id} (fill {rx['fills']})",
            "dispense_id": dispense_id,
            "lots": picked,
            "patient_pay": price["patient_pay"],
            "plan_pay": price["plan_pay"],
        }

    def mark_picked_up(self, dispense_id: str, id_checked: bool = False) -> dict:
        """Record that the patient collected a filled prescription.

        Rules: only dispenses waiting as ready can be picked up; controlled substances require
        the collector's photo ID to have been checked.

        Args:
            dispense_id: Dispense id, e.g. DSP70012.
            id_checked: True when the collector's government photo ID was verified.
        """
        if not isinstance(dispense_id, str) or dispense_id not in self.dispenses:
            return self._err(f"Dispense {dispense_id} not found")
        if not isinstance(id_checked, bool):
            return self._err("id_checked must be true or false")
        d = self.dispenses[dispense_id]
        if d["status"] != "ready":
            return self._err(f"Dispense {dispense_id} is {d['status']}")
        if self.drugs[d["drug_id"]]["schedule"] in CONTROLLED and not id_checked:
            return self._err("Photo ID check is required to release a controlled substance")
        d["status"] = "picked_up"
        d["picked_up_on"] = self.current_date
        return {"success": True, "message": f"Dispense {dispense_id} picked up"}

    def return_to_stock(self, dispense_id: str) -> dict:
        """Reverse a fill that was never collected: puts the units back into their lots, undoes the
        fill on the prescription (fill count, refill, dates, status), refunds the patient's
        year-to-date spend and marks the controlled log entry as returned.

        Rules: only dispenses still ready (not picked up) and at most 14 days old can be returned.

        Args:
            dispense_id: Dispense id.
        """
        if not isinstance(dispense_id, str) or dispense_id not in self.dispenses:
            return self._err(f"Dispense {dispense_id} not found")
        d = self.dispenses[dispense_id]
        if d["status"] != "ready":
            return self._err(f"Dispense {dispense_id} is {d['status']}; only uncollected fills can be returned")
        if self._days_between(d["dispensed_on"], self.current_date) > RETURN_WINDOW_DAYS:
            return self._err(f"Dispense {dispense_id} is older than {RETURN_WINDOW_DAYS} days; destroy per waste policy instead")
        for lot_id, qty in d["lots"].items():
            lot = self.lots[lot_id]
            lot["quantity"] += qty
            if lot["status"] == "depleted":
                lot["status"] = "available"
        rx = self.prescriptions[d["rx_id"]]
        rx["fills"] -= 1
        if d["fill_number"] > 1:
            rx["refills_remaining"] += 1
        rx["last_fill_date"] = d["previous_fill_date"]
        rx["next_fill_eligible"] = d["previous_next_eligible"]
        if rx["status"] == "completed":
            rx["status"] = "active"
        patient = self.patients[d["patient_id"]]
        patient["out_of_pocket_ytd"] = round(patient["out_of_pocket_ytd"] - d["patient_pay"], 2)
        d["status"] = "returned"
        d["returned_on"] = self.current_date
        if dispense_id in self.controlled_log:
            self.controlled_log[dispense_id]["returned_on"] = self.current_date
        return {"success": True, "message": f"Returned {d['quantity']} units from {dispense_id} to stock", "refund": d["patient_pay"]}

    def put_on_hold(self, rx_id: str, reason: str) -> dict:
        """Put an active prescription on hold (e.g. patient asked to fill later, prior
        authorisation pending) so it cannot be dispensed.

        Args:
            rx_id: Prescription number.
            reason: Why the prescription is held.
        """
        if not isinstance(rx_id, str) or rx_id not in self.prescriptions:
            return self._err(f"Prescription {rx_id} not found")
        rx = self.prescriptions[rx_id]
        if rx["status"] != "active":
            return self._err(f"Only active prescriptions can be held; {rx_id} is {rx['status']}")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A hold reason is required")
        rx["status"] = "on_hold"
        rx["status_reason"] = reason.strip()
        return {"success": True, "message": f"{rx_id} placed on hold"}

    def release_hold(self, rx_id: str) -> dict:
        """Return a held prescription to active so it can be dispensed.

        Args:
            rx_id: Prescription number in on_hold status.
        """
        if not isinstance(rx_id, str) or rx_id not in self.prescriptions:
            return self._err(f"Prescription {rx_id} not found")
        rx = self.prescriptions[rx_id]
        if rx["status"] != "on_hold":
            return self._err(f"{rx_id} is not on hold")
        rx["status"] = "active"
        rx["status_reason"] = None
        return {"success": True, "message": f"{rx_id} released from hold"}

    def cancel_prescription(self, rx_id: str, reason: str) -> dict:
        """Cancel an active or held prescription; remaining refills are voided.

        Rules: a prescription with a filled but uncollected dispense cannot be cancelled until
        that fill is returned to stock.

        Args:
            rx_id: Prescription number.
            reason: Cancellation reason (e.g. "therapy changed by prescriber").
        """
        if not isinstance(rx_id, str) or rx_id not in self.prescriptions:
            return self._err(f"Prescription {rx_id} not found")
        rx = self.prescriptions[rx_id]
        if rx["status"] not in ("active", "on_hold"):
            return self._err(f"{rx_id} is {rx['status']} and cannot be cancelled")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A cancellation reason is required")
        pending = [d["dispense_id"] for d in self.dispenses.values() if d["rx_id"] == rx_id and d["status"] == "ready"]
        if pending:
            return self._err(f"{rx_id} has an uncollected fill ({', '.join(sorted(pending))}); return it to stock first")
        rx["status"] = "cancelled"
        rx["status_reason"] = reason.strip()
        rx["refills_remaining"] = 0
        return {"success": True, "message": f"{rx_id} cancelled"}

    def receive_stock(self, drug_id: str, lot_number: str, expiry: str, quantity: int) -> dict:
        """Receive a delivery of one manufacturer lot into inventory.

        Rules: expiry must be an ISO date more than 30 days away (short-dated stock is refused);
        quantity is a positive integer; the same lot number cannot be received twice for a drug.

        Args:
            drug_id: Drug id.
            lot_number: Manufacturer lot number, e.g. "AX4471".
            expiry: Expiry date, YYYY-MM-DD.
            quantity: Units received.
        """
        if not isinstance(drug_id, str) or drug_id not in self.drugs:
            return self._err(f"Drug {drug_id} not found")
        if not isinstance(lot_number, str) or not lot_number.strip():
            return self._err("Lot number is required")
        try:
            datetime.date.fromisoformat(expiry)
        except (TypeError, ValueError):
            return self._err(f"Invalid expiry date {expiry!r}")
        if expiry <= self._add_days(30):
            return self._err(f"Lot expires {expiry}; stock must have more than 30 days of shelf life")
        if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity <= 0:
            return self._err("quantity must be a positive integer")
        for lot in self.lots.values():
            if lot["drug_id"] == drug_id and lot["lot_number"] == lot_number.strip():
                return self._err(f"Lot {lot_number} of {drug_id} already received as {lot['lot_id']}")
        lot_id = self._next_id("lot", "L")
        self.lots[lot_id] = {
            "lot_id": lot_id,
            "drug_id": drug_id,
            "lot_number": lot_number.strip(),
            "expiry": expiry,
            "quantity": quantity,
            "received_on": self.current_date,
            "status": "available",
            "quarantine_reason": None,
        }
        return {"success": True, "message": f"Received {quantity} units of {drug_id} lot {lot_number.strip()}", "lot_id": lot_id}

    def quarantine_lot(self, lot_id: str, reason: str) -> dict:
        """Pull an available lot from sale (damage, temperature excursion, manufacturer recall).

        Args:
            lot_id: Lot id, e.g. L5003.
            reason: Why the lot is quarantined.
        """
        if not isinstance(lot_id, str) or lot_id not in self.lots:
            return self._err(f"Lot {lot_id} not found")
        lot = self.lots[lot_id]
        if lot["status"] != "available":
            return self._err(f"Lot {lot_id} is {lot['status']}")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A quarantine reason is required")
        lot["status"] = "quarantined"
        lot["quarantine_reason"] = reason.strip()
        return {"success": True, "message": f"Lot {lot_id} quarantined ({lot['quantity']} units)"}
