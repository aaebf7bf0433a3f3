"""Mobile carrier customer care: customers, phone lines, plans, monthly bills, payment methods
and support tickets, kept in one JSON database.

Convention "database": every public function below is a tool. It receives the whole database
as ``data`` (a dict with the tables ``customers``, ``lines``, ``plans``, ``bills``,
``tickets`` and ``meta``), changes it in place and returns a string for the agent. Rule
violations return a string starting with ``Error:``. Like much code of this style, some tools
trust their input and raise on malformed arguments (an unknown id where the code indexes the
table directly, a quantity that is not a number).
"""

import datetime
import json

ROAMING_DAILY_FEE = 12.0
TOPUP_PRICE_PER_GB = 5.0
MAX_TOPUP_GB = 50


def _money(value):
    return round(float(value) + 1e-9, 2)


def _next_id(data, counter, prefix, width):
    data["meta"][counter] += 1
    return "%s%0*d" % (prefix, width, data["meta"][counter])


def _line_summary(line_id, line):
    return {
        "line_id": line_id,
        "number": line["number"],
        "plan_id": line["plan_id"],
        "status": line["status"],
        "roaming": line["roaming"],
        "data_used_gb": line["data_used_gb"],
    }


def get_customer(data, customer_id: str) -> str:
    """Profile of one customer with their lines, open balance and payment methods."""
    customer = data["customers"].get(customer_id)
    if customer is None:
        return "Error: customer %s not found" % customer_id
    lines = [_line_summary(lid, data["lines"][lid]) for lid in customer["line_ids"]]
    view = {
        "customer_id": customer_id,
        "name": customer["name"],
        "email": customer["email"],
        "status": customer["status"],
        "balance": customer["balance"],
        "lines": lines,
        "payment_methods": sorted(customer["payment_methods"]),
    }
    return json.dumps(view)


def find_customer_by_number(data, number: str) -> str:
    """The customer who owns a phone number (e.g. +1-555-0100-001)."""
    for line_id, line in data["lines"].items():
        if line["number"] == number:
            owner = data["customers"][line["customer_id"]]
            return "Number %s is line %s of customer %s (%s)" % (
                number, line_id, line["customer_id"], owner["name"])
    return "Error: no line has number %s" % number


def list_plans(data, max_fee: float = None) -> str:
    """Plans on sale, cheapest first; optionally only those at most max_fee a month."""
    rows = []
    for plan_id, plan in data["plans"].items():
        if not plan["on_sale"]:
            continue
        if max_fee is not None and plan["monthly_fee"] > max_fee:
            continue
        rows.append((plan["monthly_fee"], plan_id, plan))
    rows.sort(key=lambda r: (r[0], r[1]))
    if not rows:
        return "No plan matches"
    return "\n".join(
        "%s: %s, %s GB, %.2f/month%s" % (
            plan_id, plan["name"], plan["data_gb"], fee, ", roaming included" if plan["roaming_included"] else "")
        for fee, plan_id, plan in rows)


def change_plan(data, line_id: str, plan_id: str) -> str:
    """Move an active line to another plan on sale; the new fee applies from the next bill."""
    line = data["lines"].get(line_id)
    if line is None:
        return "Error: line %s not found" % line_id
    plan = data["plans"].get(plan_id)
    if plan is None or not plan["on_sale"]:
        return "Error: plan %s is not on sale" % plan_id
    if line["status"] != "active":
        return "Error: line %s is %s; only active lines can change plan" % (line_id, line["status"])
    if line["plan_id"] == plan_id:
        return "Error: line %s is already on %s" % (line_id, plan_id)
    old = line["plan_id"]
    line["plan_id"] = plan_id
    if plan["roaming_included"]:
        line["roaming"] = True
    line["history"].append({"date": data["meta"]["business_date"], "event": "plan %s -> %s" % (old, plan_id)})
    return "Line %s moved from %s to %s" % (line_id, old, plan_id)


def suspend_line(data, line_id: str, reason: str) -> str:
    """Suspend an active line (lost phone, fraud, customer request)."""
    line = data["lines"].get(line_id)
    if line is None:
        return "Error: line %s not found" % line_id
    if reason not in data["meta"]["suspension_reasons"]:
        return "Error: reason must be one of %s" % ", ".join(data["meta"]["suspension_reasons"])
    if line["status"] != "active":
        return "Error: line %s is already %s" % (line_id, line["status"])
    line["status"] = "suspended"
    line["suspension_reason"] = reason
    line["history"].append({"date": data["meta"]["business_date"], "event": "suspended: " + reason})
    return "Line %s suspended (%s)" % (line_id, reason)


def resume_line(data, line_id: str) -> str:
    """Resume a suspended line; lines suspended for non-payment need a zero balance."""
    line = data["lines"].get(line_id)
    if line is None:
        return "Error: line %s not found" % line_id
    if line["status"] != "suspended":
        return "Error: line %s is not suspended" % line_id
    customer = data["customers"][line["customer_id"]]
    if line.get("suspension_reason") == "non_payment" and customer["balance"] > 0:
        return "Error: customer %s still owes %.2f" % (line["customer_id"], customer["balance"])
    line["status"] = "active"
    del line["suspension_reason"]
    line["history"].append({"date": data["meta"]["business_date"], "event": "resumed"})
    return "Line %s is active again" % line_id


def set_roaming(data, line_id: str, enabled: bool, days: int = 0) -> str:
    """Turn roaming on (for a number of days, billed per day unless the plan includes it) or
    off."""
    line = data["lines"][line_id]
    if line["status"] != "active":
        return "Error: line %s is not active" % line_id
    plan = data["plans"][line["plan_id"]]
    if not enabled:
        line["roaming"] = False
        return "Roaming off for line %s" % line_id
    if days < 1 or days > 90:
        return "Error: roaming needs 1 to 90 days"
    line["roaming"] = True
    fee = 0.0 if plan["roaming_included"] else _money(ROAMING_DAILY_FEE * days)
    if fee:
        _charge(data, line["customer_id"], "roaming %s, %d days" % (line_id, days), fee)
    return "Roaming on for line %s for %d days, charged %.2f" % (line_id, days, fee)


def _charge(data, customer_id, label, amount):
    """Adds an item to the customer's open bill of the current period (creating it)."""
    period = data["meta"]["business_date"][:7]
    customer = data["customers"][customer_id]
    bill_id = customer["open_bill"]
    if bill_id is None or data["bills"][bill_id]["period"] != period:
        bill_id = _next_id(data, "bill_seq", "B-", 6)
        data["bills"][bill_id] = {"customer_id": customer_id, "period": period, "items": [],
                                  "amount": 0.0, "status": "open", "paid_with": None}
        customer["open_bill"] = bill_id
    bill = data["bills"][bill_id]
    bill["items"].append({"label": label, "amount": amount})
    bill["amount"] = _money(bill["amount"] + amount)
    customer["balance"] = _money(customer["balance"] + amount)
    return bill_id


def buy_data_topup(data, line_id: str, gigabytes: int) -> str:
    """Add extra data to a line's allowance this month, billed per GB."""
    line = data["lines"].get(line_id)
    if line is None:
        return "Error: line %s not found" % line_id
    if gigabytes <= 0 or gigabytes > MAX_TOPUP_GB:
        return "Error: a top-up is 1 to %d GB" % MAX_TOPUP_GB
    if line["status"] != "active":
        return "Error: line %s is not active" % line_id
    line["extra_data_gb"] = line.get("extra_data_gb", 0) + gigabytes
    bill_id = _charge(data, line["customer_id"], "data top-up %s %d GB" % (line_id, gigabytes),
                      _money(TOPUP_PRICE_PER_GB * gigabytes))
    return "Added %d GB to line %s (bill %s)" % (gigabytes, line_id, bill_id)


def pay_bill(data, bill_id: str, payment_method_id: str) -> str:
    """Pay an issued or open bill in full with one of the customer's payment methods."""
    bill = data["bills"].get(bill_id)
    if bill is None:
        return "Error: bill %s not found" % bill_id
    if bill["status"] == "paid":
        return "Error: bill %s is already paid" % bill_id
    customer = data["customers"][bill["customer_id"]]
    method = customer["payment_methods"].get(payment_method_id)
    if method is None:
        return "Error: %s is not a payment method of %s" % (payment_method_id, bill["customer_id"])
    if method["kind"] == "card" and method["expires"] < data["meta"]["business_date"][:7]:
        return "Error: card %s expired in %s" % (payment_method_id, method["expires"])
    bill["status"] = "paid"
    bill["paid_with"] = payment_method_id
    customer["balance"] = _money(customer["balance"] - bill["amount"])
    if customer["open_bill"] == bill_id:
        customer["open_bill"] = None
    return "Bill %s of %.2f paid with %s" % (bill_id, bill["amount"], payment_method_id)


def list_unpaid_bills(data, customer_id: str) -> str:
    """The customer's bills that are not paid, oldest first, with the total owed."""
    if customer_id not in data["customers"]:
        return "Error: customer %s not found" % customer_id
    unpaid = [(bill["period"], bill_id, bill["amount"]) for bill_id, bill in data["bills"].items()
              if bill["customer_id"] == customer_id and bill["status"] != "paid"]
    unpaid.sort()
    if not unpaid:
        return "Customer %s has no unpaid bills" % customer_id
    total = _money(sum(amount for _, _, amount in unpaid))
    rows = ["%s %s %.2f" % (bill_id, period, amount) for period, bill_id, amount in unpaid]
    return "%d unpaid bills, total %.2f: %s" % (len(unpaid), total, "; ".join(rows))


def add_payment_method(data, customer_id: str, kind: str, last4: str, expires: str = None) -> str:
    """Register a card (needs expires YYYY-MM) or a bank account for a customer."""
    customer = data["customers"].get(customer_id)
    if customer is None:
        return "Error: customer %s not found" % customer_id
    if kind not in ("card", "bank_account"):
        return "Error: kind must be card or bank_account"
    if len(last4) != 4 or not last4.isdigit():
        return "Error: last4 must be 4 digits"
    if kind == "card":
        if expires is None:
            return "Error: a card needs an expiry date"
        datetime.date.fromisoformat(expires + "-01")
    method_id = _next_id(data, "method_seq", "PM-", 5)
    method = {"kind": kind, "last4": last4}
    if kind == "card":
        method["expires"] = expires
    customer["payment_methods"][method_id] = method
    return "Added %s %s ending %s" % (kind, method_id, last4)


def remove_payment_method(data, customer_id: str, payment_method_id: str) -> str:
    """Delete a payment method that no unpaid bill is waiting on (autopay)."""
    customer = data["customers"].get(customer_id)
    if customer is None:
        return "Error: customer %s not found" % customer_id
    if payment_method_id not in customer["payment_methods"]:
        return "Error: %s is not a payment method of %s" % (payment_method_id, customer_id)
    if customer["autopay_method"] == payment_method_id:
        return "Error: %s is the autopay method; change autopay first" % payment_method_id
    del customer["payment_methods"][payment_method_id]
    return "Removed %s" % payment_method_id


def open_ticket(data, customer_id: str, subject: str, line_id: str = None) -> str:
    """Open a support ticket for a customer, optionally about one of their lines."""
    customer = data["customers"].get(customer_id)
    if customer is None:
        return "Error: customer %s not found" % customer_id
    if line_id is not None and line_id not in customer["line_ids"]:
        return "Error: line %s does not belong to %s" % (line_id, customer_id)
    if not subject.strip():
        return "Error: a ticket needs a subject"
    ticket_id = _next_id(data, "ticket_seq", "T-", 5)
    data["tickets"][ticket_id] = {
        "customer_id": customer_id,
        "line_id": line_id,
        "subject": subject.strip(),
        "status": "open",
        "opened_at": datetime.datetime.now().isoformat(timespec="seconds"),
        "resolution": None,
    }
    return "Opened ticket %s" % ticket_id


def close_ticket(data, ticket_id: str, resolution: str) -> str:
    """Close an open ticket with a resolution note."""
    ticket = data["tickets"][ticket_id]
    if ticket["status"] == "closed":
        return "Error: ticket %s is already closed" % ticket_id
    ticket["status"] = "closed"
    ticket["resolution"] = resolution
    return "Closed ticket %s" % ticket_id


def port_out_line(data, line_id: str, confirm_number: str) -> str:
    """A line leaves for another carrier: it is deleted and the customer's open charges stay.
    The agent must repeat the line's number as confirmation."""
    line = data["lines"].get(line_id)
    if line is None:
        return "Error: line %s not found" % line_id
    if confirm_number != line["number"]:
        return "Error: confirmation does not match the number of %s" % line_id
    customer = data["customers"][line["customer_id"]]
    customer["line_ids"].remove(line_id)
    del data["lines"][line_id]
    for ticket in data["tickets"].values():
        if ticket["line_id"] == line_id and ticket["status"] == "open":
            ticket["status"] = "closed"
            ticket["resolution"] = "line ported out"
    if not customer["line_ids"]:
        customer["status"] = "inactive"
    return "Line %s (%s) ported out" % (line_id, confirm_number)
