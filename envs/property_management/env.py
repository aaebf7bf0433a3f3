"""Residential property management office: buildings and units, tenants, leases, rent
payments, maintenance requests and vendors, kept in one JSON database.

Convention "database": every public function below is a tool. It receives the whole database
as ``data`` (tables ``properties``, ``units``, ``tenants``, ``leases``, ``payments``,
``maintenance``, ``vendors`` and ``office``), changes it in place and returns a string for the
agent. Rule violations return a string starting with ``Error:``. Some tools index the tables
directly and parse dates and amounts without checking, so malformed arguments raise, as in
much code of this style.
"""

import datetime

MAX_LEASE_MONTHS = 36


def _money(value):
    return round(float(value) + 1e-9, 2)


def _new_id(data, counter, prefix):
    office = data["office"]
    office[counter] += 1
    return "%s%05d" % (prefix, office[counter])


def _add_months(day, months):
    month = day.month - 1 + months
    year = day.year + month // 12
    month = month % 12 + 1
    return datetime.date(year, month, min(day.day, 28))


def search_vacant_units(data, max_rent: float = None, bedrooms: int = None, property_id: str = None) -> str:
    """Vacant units, cheapest first, optionally filtered by rent ceiling, exact bedroom count
    and building."""
    rows = []
    for unit_id, unit in data["units"].items():
        if unit["status"] != "vacant":
            continue
        if max_rent is not None and unit["rent"] > max_rent:
            continue
        if bedrooms is not None and unit["bedrooms"] != bedrooms:
            continue
        if property_id is not None and unit["property_id"] != property_id:
            continue
        rows.append((unit["rent"], unit_id, unit))
    rows.sort(key=lambda r: (r[0], r[1]))
    if not rows:
        return "No vacant unit matches"
    shown = rows[:10]
    text = "; ".join("%s (%s, %d bd, %.2f)" % (unit_id, data["properties"][u["property_id"]]["name"], u["bedrooms"], rent)
                     for rent, unit_id, u in shown)
    return "%d vacant units: %s%s" % (len(rows), text, "; ..." if len(rows) > len(shown) else "")


def get_tenant(data, tenant_id: str) -> str:
    """A tenant's contact details, balance and leases."""
    tenant = data["tenants"].get(tenant_id)
    if tenant is None:
        return "Error: tenant %s not found" % tenant_id
    leases = ["%s %s %s" % (lid, data["leases"][lid]["unit_id"], data["leases"][lid]["status"]) for lid in tenant["lease_ids"]]
    return "%s <%s>, balance %.2f, leases: %s" % (tenant["name"], tenant["email"], tenant["balance"],
                                                  ", ".join(leases) if leases else "none")


def add_tenant(data, name: str, email: str, phone: str) -> str:
    """Register a prospective tenant; the email must be unique."""
    if "@" not in email:
        return "Error: %s is not an email address" % email
    for tenant in data["tenants"].values():
        if tenant["email"].lower() == email.lower():
            return "Error: a tenant with email %s exists" % email
    tenant_id = _new_id(data, "tenant_seq", "TN-")
    data["tenants"][tenant_id] = {"name": name.strip(), "email": email, "phone": phone, "balance": 0.0, "lease_ids": []}
    return "Registered tenant %s" % tenant_id


def remove_tenant(data, tenant_id: str) -> str:
    """Delete a tenant who has no active lease and owes nothing."""
    tenant = data["tenants"].get(tenant_id)
    if tenant is None:
        return "Error: tenant %s not found" % tenant_id
    if any(data["leases"][lid]["status"] == "active" for lid in tenant["lease_ids"]):
        return "Error: tenant %s has an active lease" % tenant_id
    if tenant["balance"] > 0:
        return "Error: tenant %s owes %.2f" % (tenant_id, tenant["balance"])
    del data["tenants"][tenant_id]
    return "Removed tenant %s" % tenant_id


def create_lease(data, unit_id: str, tenant_id: str, start_date: str, months: int) -> str:
    """Lease a vacant unit to a tenant from start_date (YYYY-MM-DD) for 1 to 36 months at the
    unit's rent; the deposit (office.deposit_months x rent) and the first month's rent are
    charged to the tenant's balance."""
    unit = data["units"][unit_id]
    tenant = data["tenants"].get(tenant_id)
    if tenant is None:
        return "Error: tenant %s not found" % tenant_id
    if unit["status"] != "vacant":
        return "Error: unit %s is %s" % (unit_id, unit["status"])
    if months < 1 or months > MAX_LEASE_MONTHS:
        return "Error: a lease runs 1 to %d months" % MAX_LEASE_MONTHS
    start = datetime.date.fromisoformat(start_date)
    if start < datetime.date.fromisoformat(data["office"]["business_date"]):
        return "Error: a lease cannot start in the past"
    lease_id = _new_id(data, "lease_seq", "LS-")
    deposit = _money(unit["rent"] * data["office"]["deposit_months"])
    data["leases"][lease_id] = {
        "unit_id": unit_id,
        "tenant_id": tenant_id,
        "start": start.isoformat(),
        "end": _add_months(start, months).isoformat(),
        "rent": unit["rent"],
        "deposit": deposit,
        "status": "active",
    }
    unit["status"] = "occupied"
    unit["lease_id"] = lease_id
    tenant["lease_ids"].append(lease_id)
    tenant["balance"] = _money(tenant["balance"] + deposit + unit["rent"])
    return "Lease %s: %s to %s from %s, rent %.2f, deposit %.2f" % (
        lease_id, unit_id, tenant_id, start.isoformat(), unit["rent"], deposit)


def terminate_lease(data, lease_id: str, end_date: str) -> str:
    """End an active lease on end_date; the unit becomes vacant and the deposit is credited
    back to the tenant's balance."""
    lease = data["leases"].get(lease_id)
    if lease is None:
        return "Error: lease %s not found" % lease_id
    if lease["status"] != "active":
        return "Error: lease %s is %s" % (lease_id, lease["status"])
    end = datetime.date.fromisoformat(end_date)
    if end.isoformat() < lease["start"]:
        return "Error: the lease starts on %s" % lease["start"]
    lease["status"] = "terminated"
    lease["end"] = end.isoformat()
    unit = data["units"][lease["unit_id"]]
    unit["status"] = "vacant"
    unit["lease_id"] = None
    tenant = data["tenants"][lease["tenant_id"]]
    tenant["balance"] = _money(tenant["balance"] - lease["deposit"])
    return "Lease %s ends %s; deposit %.2f credited" % (lease_id, end.isoformat(), lease["deposit"])


def record_payment(data, lease_id: str, amount: float, method: str) -> str:
    """Record a rent payment for a lease; it lowers the tenant's balance."""
    lease = data["leases"].get(lease_id)
    if lease is None:
        return "Error: lease %s not found" % lease_id
    if method not in data["office"]["payment_methods"]:
        return "Error: method must be one of %s" % ", ".join(data["office"]["payment_methods"])
    amount = _money(amount)
    if amount <= 0:
        return "Error: the amount must be positive"
    payment_id = _new_id(data, "payment_seq", "PY-")
    data["payments"][payment_id] = {"lease_id": lease_id, "amount": amount, "method": method,
                                    "date": data["office"]["business_date"]}
    tenant = data["tenants"][lease["tenant_id"]]
    tenant["balance"] = _money(tenant["balance"] - amount)
    return "Payment %s of %.2f recorded; balance %.2f" % (payment_id, amount, tenant["balance"])


def payment_history(data, lease_id: str) -> str:
    """All payments of a lease, oldest first, with their total."""
    if lease_id not in data["leases"]:
        return "Error: lease %s not found" % lease_id
    rows = sorted((p["date"], pid, p["amount"]) for pid, p in data["payments"].items() if p["lease_id"] == lease_id)
    if not rows:
        return "No payments for lease %s" % lease_id
    total = _money(sum(amount for _, _, amount in rows))
    return "%d payments, total %.2f: %s" % (len(rows), total, "; ".join("%s %s %.2f" % (pid, day, amount) for day, pid, amount in rows))


def adjust_rent(data, unit_id: str, new_rent: float) -> str:
    """Set a unit's asking rent (vacant units only; leases keep their rent)."""
    unit = data["units"][unit_id]
    if unit["status"] != "vacant":
        return "Error: unit %s is let; its rent changes at the next lease" % unit_id
    new_rent = _money(new_rent)
    if new_rent < data["office"]["min_rent"]:
        return "Error: rent below the minimum of %.2f" % data["office"]["min_rent"]
    old = unit["rent"]
    unit["rent"] = new_rent
    return "Unit %s rent %.2f -> %.2f" % (unit_id, old, new_rent)


def open_maintenance_request(data, unit_id: str, category: str, description: str, priority: str = "normal",
                             visit: str = "morning") -> str:
    """Log a maintenance request for a unit with the tenant's preferred visit slot (morning or
    afternoon); emergencies are assigned at once to the first active vendor of that trade."""
    if unit_id not in data["units"]:
        return "Error: unit %s not found" % unit_id
    if category not in data["office"]["trades"]:
        return "Error: category must be one of %s" % ", ".join(data["office"]["trades"])
    if priority not in ("low", "normal", "emergency"):
        return "Error: priority must be low, normal or emergency"
    if visit not in ("morning", "afternoon"):
        return "Error: visit must be morning or afternoon"
    request_id = _new_id(data, "request_seq", "MR-")
    request = {"unit_id": unit_id, "category": category, "description": description, "priority": priority,
               "status": "open", "vendor_id": None, "cost": None,
               "opened_on": data["office"]["business_date"], "visit": visit}
    if priority == "emergency":
        for vendor_id in sorted(data["vendors"]):
            if data["vendors"][vendor_id]["trade"] == category and data["vendors"][vendor_id]["active"]:
                request["vendor_id"] = vendor_id
                request["status"] = "assigned"
                break
    data["maintenance"][request_id] = request
    suffix = " and assigned to %s" % request["vendor_id"] if request["vendor_id"] else ""
    return "Opened %s%s" % (request_id, suffix)


def assign_vendor(data, request_id: str, vendor_id: str) -> str:
    """Assign an open request to an active vendor of the request's trade."""
    request = data["maintenance"].get(request_id)
    if request is None:
        return "Error: request %s not found" % request_id
    vendor = data["vendors"].get(vendor_id)
    if vendor is None or not vendor["active"]:
        return "Error: vendor %s is not active" % vendor_id
    if vendor["trade"] != request["category"]:
        return "Error: %s is a %s vendor, the request needs %s" % (vendor_id, vendor["trade"], request["category"])
    if request["status"] == "closed":
        return "Error: request %s is closed" % request_id
    request["vendor_id"] = vendor_id
    request["status"] = "assigned"
    return "Request %s assigned to %s" % (request_id, vendor["name"])


def close_maintenance_request(data, request_id: str, cost: float) -> str:
    """Close an assigned request with its cost, added to the vendor's invoiced total."""
    request = data["maintenance"][request_id]
    if request["status"] != "assigned":
        return "Error: request %s is %s; only assigned requests can be closed" % (request_id, request["status"])
    cost = _money(cost)
    if cost < 0:
        return "Error: the cost cannot be negative"
    request["status"] = "closed"
    request["cost"] = cost
    vendor = data["vendors"][request["vendor_id"]]
    vendor["invoiced"] = _money(vendor["invoiced"] + cost)
    return "Closed %s at %.2f" % (request_id, cost)


def list_open_requests(data, property_id: str = None) -> str:
    """Maintenance requests not closed yet, emergencies first, optionally for one building."""
    rank = {"emergency": 0, "normal": 1, "low": 2}
    rows = []
    for request_id, request in data["maintenance"].items():
        if request["status"] == "closed":
            continue
        unit = data["units"][request["unit_id"]]
        if property_id is not None and unit["property_id"] != property_id:
            continue
        rows.append((rank[request["priority"]], request_id, request))
    rows.sort(key=lambda r: (r[0], r[1]))
    if not rows:
        return "No open requests"
    return "%d open: %s" % (len(rows), "; ".join("%s %s %s %s" % (rid, r["unit_id"], r["priority"], r["status"]) for _, rid, r in rows[:15]))
