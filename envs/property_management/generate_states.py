"""Writes states/*.json for property_management: deterministic (a fixed seed per state,
Python's own `random.Random`, no clock), standard library only. Run from anywhere:

    python3 envs/property_management/generate_states.py

The committed states are exactly this script's output; edit the script, not the states.
"""

import json
import os
import random

STREETS = ["Linden", "Harbour", "Maple", "Station", "Orchard", "Canal", "Mill", "Chapel", "Cedar", "Bridge",
           "Market", "Willow", "Quarry", "Garden", "River"]
KINDS = ["Court", "House", "Residences", "Lofts", "Apartments", "Place"]
FIRST = ["Aiko", "Bram", "Chiara", "Dmitri", "Elif", "Femi", "Greta", "Hugo", "Imani", "Jakob", "Kofi", "Lena",
         "Mateo", "Nadia", "Oskar", "Priya", "Rafael", "Sofia", "Tariq", "Ursula", "Viktor", "Wanjiru", "Yara", "Zeno"]
LAST = ["Adeyemi", "Brandt", "Castillo", "Dahl", "Esposito", "Fontaine", "Gruber", "Holm", "Iqbal", "Jovanovic",
        "Kraus", "Lindqvist", "Mbeki", "Nakamura", "Ortega", "Pereira", "Rahman", "Schmidt", "Takahashi", "Ueda",
        "Valdez", "Wojcik", "Yamada", "Zielinski"]
TRADES = ["plumbing", "electrical", "heating", "appliances", "locks", "pest_control"]
ISSUES = {
    "plumbing": ["Leaking kitchen tap", "Blocked shower drain", "Toilet keeps running"],
    "electrical": ["Bathroom light flickers", "Socket in bedroom dead", "Breaker trips at night"],
    "heating": ["Radiator cold", "Boiler pressure low", "Thermostat unresponsive"],
    "appliances": ["Oven does not heat", "Dishwasher leaks", "Fridge too warm"],
    "locks": ["Front door lock sticks", "Lost key fob", "Window latch broken"],
    "pest_control": ["Mice in the basement", "Ants in the kitchen", "Wasps nest on balcony"],
}


def pick(rng, items):
    return items[int(rng.random() * len(items))]


def money(value):
    return round(value + 1e-9, 2)


def build(seed, buildings):
    rng = random.Random(seed)
    office = {
        "business_date": "2025-03-15",
        "deposit_months": 2,
        "min_rent": 400.0,
        "payment_methods": ["bank_transfer", "card", "check"],
        "trades": TRADES,
        "tenant_seq": 0,
        "lease_seq": 0,
        "payment_seq": 0,
        "request_seq": 0,
    }
    data = {"properties": {}, "units": {}, "tenants": {}, "leases": {}, "payments": {}, "maintenance": {},
            "vendors": {}, "office": office}
    for v in range(1, 4 + len(TRADES) * 2):
        trade = TRADES[(v - 1) % len(TRADES)]
        data["vendors"]["V-%03d" % v] = {"name": "%s %s Services" % (pick(rng, LAST), trade.replace("_", " ").title()),
                                         "trade": trade, "active": rng.random() < 0.85, "invoiced": 0.0}
    unit_seq = 0
    for b in range(1, buildings + 1):
        property_id = "PR-%03d" % b
        floors = 2 + int(rng.random() * 6)
        per_floor = 2 + int(rng.random() * 4)
        data["properties"][property_id] = {
            "name": "%s %s" % (pick(rng, STREETS), pick(rng, KINDS)),
            "address": "%d %s Street" % (1 + int(rng.random() * 200), pick(rng, STREETS)),
            "floors": floors,
        }
        base_rent = 600 + int(rng.random() * 900)
        for floor in range(1, floors + 1):
            for door in range(1, per_floor + 1):
                unit_seq += 1
                unit_id = "U-%05d" % unit_seq
                bedrooms = pick(rng, [0, 1, 1, 2, 2, 3, 4])
                unit = {"property_id": property_id, "number": "%d%02d" % (floor, door), "bedrooms": bedrooms,
                        "rent": money(base_rent + bedrooms * 180 + floor * 15), "status": "vacant", "lease_id": None}
                data["units"][unit_id] = unit
                if rng.random() < 0.8:
                    office["tenant_seq"] += 1
                    tenant_id = "TN-%05d" % office["tenant_seq"]
                    first, last = pick(rng, FIRST), pick(rng, LAST)
                    office["lease_seq"] += 1
                    lease_id = "LS-%05d" % office["lease_seq"]
                    start_month = 1 + int(rng.random() * 12)
                    start = "2024-%02d-01" % start_month
                    lease = {"unit_id": unit_id, "tenant_id": tenant_id, "start": start,
                             "end": "%d-%02d-01" % (2025 + (start_month + 11) // 12, (start_month + 11) % 12 + 1),
                             "rent": unit["rent"], "deposit": money(unit["rent"] * 2), "status": "active"}
                    data["leases"][lease_id] = lease
                    unit["status"] = "occupied"
                    unit["lease_id"] = lease_id
                    owed = 0.0
                    for month in range(start_month, 16):
                        if rng.random() < 0.93:
                            office["payment_seq"] += 1
                            year, mon = (2024, month) if month <= 12 else (2025, month - 12)
                            data["payments"]["PY-%05d" % office["payment_seq"]] = {
                                "lease_id": lease_id, "amount": unit["rent"], "method": pick(rng, office["payment_methods"]),
                                "date": "%d-%02d-%02d" % (year, mon, 1 + int(rng.random() * 5))}
                        else:
                            owed += unit["rent"]
                    data["tenants"][tenant_id] = {
                        "name": "%s %s" % (first, last),
                        "email": "%s.%s.%d@mail.example" % (first.lower(), last.lower(), office["tenant_seq"]),
                        "phone": "+44 20 7946 %04d" % office["tenant_seq"],
                        "balance": money(owed),
                        "lease_ids": [lease_id],
                    }
                elif rng.random() < 0.3:
                    unit["status"] = "renovation"
                if rng.random() < 0.2:
                    office["request_seq"] += 1
                    trade = pick(rng, TRADES)
                    status = pick(rng, ["open", "assigned", "closed", "closed"])
                    vendor = None
                    if status != "open":
                        vendor = "V-%03d" % (1 + TRADES.index(trade))
                    cost = money(40 + rng.random() * 400) if status == "closed" else None
                    data["maintenance"]["MR-%05d" % office["request_seq"]] = {
                        "unit_id": unit_id, "category": trade, "description": pick(rng, ISSUES[trade]),
                        "priority": pick(rng, ["low", "normal", "normal", "emergency"]), "status": status,
                        "vendor_id": vendor, "cost": cost,
                        "opened_on": "2025-0%d-%02d" % (1 + int(rng.random() * 2), 1 + int(rng.random() * 28)),
                        "visit": "morning" if rng.random() < 4 / 9 else "afternoon"}
                    if cost is not None:
                        data["vendors"][vendor]["invoiced"] = money(data["vendors"][vendor]["invoiced"] + cost)
    # A prospective tenant without a lease, and a former tenant whose lease has ended.
    for label in ("prospect", "former"):
        office["tenant_seq"] += 1
        tenant_id = "TN-%05d" % office["tenant_seq"]
        data["tenants"][tenant_id] = {
            "name": "%s %s" % (pick(rng, FIRST), pick(rng, LAST)),
            "email": "%s.%d@mail.example" % (label, office["tenant_seq"]),
            "phone": "+44 20 7946 %04d" % office["tenant_seq"], "balance": 0.0, "lease_ids": []}
        if label == "former":
            unit_id = sorted(data["units"])[0]
            rent = data["units"][unit_id]["rent"]
            office["lease_seq"] += 1
            lease_id = "LS-%05d" % office["lease_seq"]
            data["leases"][lease_id] = {"unit_id": unit_id, "tenant_id": tenant_id, "start": "2022-09-01",
                                        "end": "2023-09-01", "rent": money(rent - 60), "deposit": money((rent - 60) * 2),
                                        "status": "ended"}
            data["tenants"][tenant_id]["lease_ids"].append(lease_id)
    return data


STATES = [
    ("00_small.json", 101, 2),
    ("01_medium.json", 202, 25),
    ("02_large.json", 303, 110),
]


def main():
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "states")
    os.makedirs(folder, exist_ok=True)
    for name, seed, buildings in STATES:
        text = json.dumps(build(seed, buildings), indent=1, ensure_ascii=False) + "\n"
        with open(os.path.join(folder, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        print("%s: %d bytes" % (name, len(text.encode("utf-8"))))


if __name__ == "__main__":
    main()
