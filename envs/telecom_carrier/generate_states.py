"""Writes states/*.json for telecom_carrier: deterministic (a fixed seed per state, Python's
own `random.Random`, no clock), standard library only. Run from anywhere:

    python3 envs/telecom_carrier/generate_states.py

The committed states are exactly this script's output; edit the script, not the states.
"""

import json
import os
import random

FIRST = ["Ana", "Bilal", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jonas", "Kaia",
         "Luis", "Mira", "Nils", "Olga", "Pedro", "Qiu", "Rosa", "Sami", "Tove", "Umar", "Vera",
         "Wen", "Xenia", "Yusuf", "Zoe"]
LAST = ["Almeida", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ivanova",
        "Jensen", "Kowalski", "Larsen", "Moreau", "Novak", "Okafor", "Petrov", "Quinn", "Rossi",
        "Sato", "Tanaka", "Umarov", "Varga", "Weber", "Xu", "Yilmaz", "Zhang"]
PLANS = {
    "P-BASIC": {"name": "Basic 5", "data_gb": 5, "monthly_fee": 15.0, "roaming_included": False, "on_sale": True},
    "P-PLUS": {"name": "Plus 20", "data_gb": 20, "monthly_fee": 25.0, "roaming_included": False, "on_sale": True},
    "P-MAX": {"name": "Max 100", "data_gb": 100, "monthly_fee": 45.0, "roaming_included": True, "on_sale": True},
    "P-TRAVEL": {"name": "Travel 40", "data_gb": 40, "monthly_fee": 39.0, "roaming_included": True, "on_sale": True},
    "P-LEGACY": {"name": "Legacy 2", "data_gb": 2, "monthly_fee": 9.0, "roaming_included": False, "on_sale": False},
}
PLAN_IDS = sorted(PLANS)
SUBJECTS = ["No signal at home", "Wrong charge on bill", "Cannot send SMS abroad", "SIM not recognised",
            "Slow mobile data", "Request itemised bill", "Voicemail not working"]
PERIODS = ["2024-11", "2024-12", "2025-01", "2025-02", "2025-03"]


def pick(rng, items):
    return items[int(rng.random() * len(items))]


def money(value):
    return round(value + 1e-9, 2)


def build(seed, customers):
    rng = random.Random(seed)
    data = {
        "customers": {},
        "lines": {},
        "plans": {k: dict(v) for k, v in PLANS.items()},
        "bills": {},
        "tickets": {},
        "meta": {
            "business_date": "2025-03-15",
            "suspension_reasons": ["lost_device", "fraud", "customer_request", "non_payment"],
            "bill_seq": 0,
            "method_seq": 0,
            "ticket_seq": 0,
        },
    }
    meta = data["meta"]
    line_seq = 0
    for c in range(1, customers + 1):
        customer_id = "CU-%05d" % c
        first, last = pick(rng, FIRST), pick(rng, LAST)
        methods = {}
        for _ in range(1 + int(rng.random() * 2)):
            meta["method_seq"] += 1
            method_id = "PM-%05d" % meta["method_seq"]
            if rng.random() < 0.7:
                year = 2024 + int(rng.random() * 4)
                month = 1 + int(rng.random() * 12)
                methods[method_id] = {"kind": "card", "last4": "%04d" % int(rng.random() * 10000),
                                      "expires": "%d-%02d" % (year, month)}
            else:
                methods[method_id] = {"kind": "bank_account", "last4": "%04d" % int(rng.random() * 10000)}
        customer = {
            "name": "%s %s" % (first, last),
            "email": "%s.%s%d@example.net" % (first.lower(), last.lower(), c),
            "status": "active",
            "balance": 0.0,
            "line_ids": [],
            "payment_methods": methods,
            "autopay_method": sorted(methods)[0] if rng.random() < 0.5 else None,
            "open_bill": None,
        }
        data["customers"][customer_id] = customer
        for _ in range(1 + int(rng.random() * rng.random() * 4)):
            line_seq += 1
            line_id = "L-%05d" % line_seq
            plan_id = pick(rng, PLAN_IDS)
            status = "active" if rng.random() < 0.88 else "suspended"
            line = {
                "customer_id": customer_id,
                "number": "+1-555-%04d-%03d" % (line_seq // 1000, line_seq % 1000),
                "plan_id": plan_id,
                "status": status,
                "roaming": PLANS[plan_id]["roaming_included"] and rng.random() < 0.5,
                "data_used_gb": money(rng.random() * PLANS[plan_id]["data_gb"]),
                "history": [{"date": "2024-%02d-%02d" % (1 + int(rng.random() * 12), 1 + int(rng.random() * 28)),
                             "event": "activated on " + plan_id}],
            }
            if status == "suspended":
                line["suspension_reason"] = pick(rng, meta["suspension_reasons"])
                line["history"].append({"date": "2025-02-%02d" % (1 + int(rng.random() * 28)),
                                        "event": "suspended: " + line["suspension_reason"]})
            data["lines"][line_id] = line
            customer["line_ids"].append(line_id)
        first_period = int(rng.random() * 3)
        for period in PERIODS[first_period:]:
            amount = money(sum(PLANS[data["lines"][lid]["plan_id"]]["monthly_fee"] for lid in customer["line_ids"]))
            meta["bill_seq"] += 1
            bill_id = "B-%06d" % meta["bill_seq"]
            current = period == PERIODS[-1]
            paid = not current and rng.random() < 0.85
            bill = {
                "customer_id": customer_id,
                "period": period,
                "items": [{"label": "plans", "amount": amount}],
                "amount": amount,
                "status": "open" if current else ("paid" if paid else "issued"),
                "paid_with": sorted(methods)[0] if paid else None,
            }
            data["bills"][bill_id] = bill
            if not paid:
                customer["balance"] = money(customer["balance"] + amount)
            if current:
                customer["open_bill"] = bill_id
        if rng.random() < 0.3:
            meta["ticket_seq"] += 1
            line_id = pick(rng, customer["line_ids"])
            closed = rng.random() < 0.5
            data["tickets"]["T-%05d" % meta["ticket_seq"]] = {
                "customer_id": customer_id,
                "line_id": line_id,
                "subject": pick(rng, SUBJECTS),
                "status": "closed" if closed else "open",
                "opened_at": "2025-0%d-%02dT%02d:%02d:00" % (1 + int(rng.random() * 3), 1 + int(rng.random() * 28),
                                                             8 + int(rng.random() * 10), int(rng.random() * 60)),
                "resolution": "explained the charge" if closed else None,
            }
    return data


STATES = [
    ("00_small.json", 11, 12),
    ("01_medium.json", 22, 300),
    ("02_large.json", 33, 1800),
]


def main():
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "states")
    os.makedirs(folder, exist_ok=True)
    for name, seed, customers in STATES:
        text = json.dumps(build(seed, customers), indent=1, ensure_ascii=False) + "\n"
        with open(os.path.join(folder, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        print("%s: %d bytes" % (name, len(text.encode("utf-8"))))


if __name__ == "__main__":
    main()
