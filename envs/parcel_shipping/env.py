"""Parcel carrier operations system: account shipping, quoting by billable weight, labels,
customs declarations, hub scans with capacity, delivery attempts, customs clearance,
returns and cancellations."""

import copy
import datetime
import math
import re
import time
import uuid

HOME_COUNTRY = "DE"
VOLUMETRIC_DIVISOR = 5000
RETURN_WINDOW_DAYS = 30
MAX_DELIVERY_ATTEMPTS = 3
DUTY_FREE_LIMIT = 150.0
HS_CODE = re.compile(r"^\d{6}(\d{2}){0,2}$")
COUNTRY = re.compile(r"^[A-Z]{2}$")


def _money(x):
    return round(float(x) + 0.0, 2)


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class ParcelShipping:
    def __init__(self, init_config: dict):
        self.services = {}
        self.hubs = {}
        self.accounts = {}
        self.shipments = {}
        self.customs = {}
        self.returns = {}
        self.duty_rates = {}
        self.counters = {}
        self.today = ""

    # ------------------------------------------------------------------ helpers
    def _err(self, msg):
        return {"success": False, "error": msg}

    def _next_id(self, key, prefix):
        value = int(self.counters.get(key, 0)) + 1
        self.counters[key] = value
        return f"{prefix}{value}"

    def _event(self, shipment, etype, location):
        key = str(len(shipment["events"]) + 1)
        while key in shipment["events"]:
            key = str(int(key) + 1)
        shipment["events"][key] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time())),
            "type": etype, "location": location,
        }
        return key

    def _billable(self, weight, l, w, h):
        vol = l * w * h / VOLUMETRIC_DIVISOR
        return math.ceil(max(weight, vol) * 2) / 2.0

    def _validate_parcel(self, service_code, weight, l, w, h, country):
        svc = self.services.get(service_code) if isinstance(service_code, str) else None
        if svc is None:
            return None, f"Unknown service {service_code}"
        for name, v in (("weight_kg", weight), ("length_cm", l), ("width_cm", w), ("height_cm", h)):
            if not _num(v) or v <= 0:
                return None, f"{name} must be a positive number"
        if not isinstance(country, str) or not COUNTRY.match(country):
            return None, "destination country must be a 2-letter ISO code"
        if weight > svc["max_weight_kg"]:
            return None, f"{svc['name']} accepts at most {svc['max_weight_kg']} kg"
        if max(l, w, h) > svc["max_length_cm"]:
            return None, f"{svc['name']} accepts parcels up to {svc['max_length_cm']} cm on the longest side"
        international = country != HOME_COUNTRY
        if international != svc["international"]:
            return None, (f"{svc['name']} is for international parcels only" if svc["international"]
                          else f"{svc['name']} is domestic only; use an international service")
        billable = self._billable(weight, l, w, h)
        price = _money(svc["base_price"] + svc["per_kg"] * billable)
        return (svc, billable, price), None

    def _shipment(self, tracking_no):
        if not isinstance(tracking_no, str) or tracking_no not in self.shipments:
            return None, self._err(f"Shipment {tracking_no} not found")
        return self.shipments[tracking_no], None

    def _today(self):
        try:
            return datetime.date.fromisoformat(self.today)
        except (TypeError, ValueError):
            return datetime.date(2025, 1, 1)

    # ------------------------------------------------------------------ queries
    def list_hubs(self) -> dict:
        """List the network's hubs with type, city, daily capacity and parcels currently on hand."""
        return {"success": True, "data": copy.deepcopy(self.hubs)}

    def get_shipment(self, tracking_no: str) -> dict:
        """Get a shipment's details and status (tracking events excluded; see get_tracking_history).

        Args:
            tracking_no: tracking number, e.g. "PX100001".
        """
        s, err = self._shipment(tracking_no)
        if err:
            return err
        data = {k: copy.deepcopy(v) for k, v in s.items() if k != "events"}
        data["tracking_no"] = tracking_no
        return {"success": True, "data": data}

    def get_tracking_history(self, tracking_no: str) -> dict:
        """List a shipment's tracking events in order.

        Args:
            tracking_no: tracking number.
        """
        s, err = self._shipment(tracking_no)
        if err:
            return err
        events = [dict(e, seq=int(k)) for k, e in sorted(s["events"].items(), key=lambda kv: int(kv[0]))]
        return {"success": True, "data": {"tracking_no": tracking_no, "status": s["status"], "events": events}}

    def get_account(self, account_id: str) -> dict:
        """Get a shipper account with balance due, credit limit, available credit and return fee.

        Args:
            account_id: account id, e.g. "ACC-100".
        """
        a = self.accounts.get(account_id) if isinstance(account_id, str) else None
        if a is None:
            return self._err(f"Account {account_id} not found")
        data = copy.deepcopy(a)
        data["account_id"] = account_id
        data["available_credit"] = _money(a["credit_limit"] - a["balance_due"])
        return {"success": True, "data": data}

    def quote_shipment(self, service: str, weight_kg: float, length_cm: float, width_cm: float, height_cm: float,
                       destination_country: str) -> dict:
        """Quote a parcel: billable weight is the greater of actual and volumetric (L x W x H / 5000),
        rounded up to the next 0.5 kg; price = service base price + per-kg rate x billable weight.

        Args:
            service: service code (STD, EXP, ECO, INTL).
            weight_kg: actual weight in kg.
            length_cm: length in cm.
            width_cm: width in cm.
            height_cm: height in cm.
            destination_country: 2-letter ISO country code; anything other than DE needs INTL.
        """
        res, msg = self._validate_parcel(service, weight_kg, length_cm, width_cm, height_cm, destination_country)
        if msg:
            return self._err(msg)
        svc, billable, price = res
        return {"success": True, "data": {"service": service, "billable_weight_kg": billable, "price": price,
                                          "transit_days": svc["transit_days"]}}

    # ------------------------------------------------------------------ updates
    def create_shipment(self, account_id: str, service: str, recipient_name: str, recipient_street: str,
                        recipient_city: str, recipient_postcode: str, recipient_country: str, weight_kg: float,
                        length_cm: float, width_cm: float, height_cm: float, declared_value: float) -> dict:
        """Create a shipment for an account, billing the quoted price to the account.

        Args:
            account_id: shipper account; its address is the sender.
            service: service code (STD, EXP, ECO, INTL).
            recipient_name: recipient name.
            recipient_street: street and house number.
            recipient_city: city.
            recipient_postcode: postcode.
            recipient_country: 2-letter ISO country code.
            weight_kg: actual weight in kg.
            length_cm: length in cm.
            width_cm: width in cm.
            height_cm: height in cm.
            declared_value: value of the contents (0 to the service's max declared value).
        Rules: the account must be active and the price must fit within its credit limit; weight,
        size and domestic/international must match the service.
        """
        acc = self.accounts.get(account_id) if isinstance(account_id, str) else None
        if acc is None:
            return self._err(f"Account {account_id} not found")
        if acc["status"] != "active":
            return self._err(f"Account {account_id} is {acc['status']}")
        for name, v in (("recipient_name", recipient_name), ("recipient_street", recipient_street),
                        ("recipient_city", recipient_city), ("recipient_postcode", recipient_postcode)):
            if not isinstance(v, str) or not v.strip():
                return self._err(f"{name} is required")
        res, msg = self._validate_parcel(service, weight_kg, length_cm, width_cm, height_cm, recipient_country)
        if msg:
            return self._err(msg)
        svc, billable, price = res
        if not _num(declared_value) or declared_value < 0:
            return self._err("declared_value must be a number >= 0")
        if declared_value > svc["max_declared_value"]:
            return self._err(f"{svc['name']} covers declared values up to {svc['max_declared_value']:.2f}")
        if acc["balance_due"] + price > acc["credit_limit"]:
            return self._err(f"Credit limit exceeded: {acc['credit_limit'] - acc['balance_due']:.2f} available, {price:.2f} needed")
        tn = self._next_id("shipment", "PX")
        self.shipments[tn] = {
            "account_id": account_id, "service": service,
            "sender": copy.deepcopy(acc["address"]),
            "recipient": {"name": recipient_name.strip(), "street": recipient_street.strip(), "city": recipient_city.strip(),
                          "postcode": recipient_postcode.strip(), "country": recipient_country},
            "weight_kg": weight_kg, "dims_cm": {"l": length_cm, "w": width_cm, "h": height_cm},
            "billable_weight_kg": billable, "declared_value": _money(declared_value), "price": price,
            "status": "created", "current_hub": None, "label_id": None, "customs_id": None,
            "delivery_attempts": 0, "delivered_on": None, "signed_by": None, "return_of": None, "return_id": None,
            "events": {},
        }
        self._event(self.shipments[tn], "created", acc["address"]["city"])
        acc["balance_due"] = _money(acc["balance_due"] + price)
        return {"success": True, "message": f"Shipment {tn} created", "tracking_no": tn,
                "billable_weight_kg": billable, "price": price}

    def add_customs_declaration(self, tracking_no: str, items: list) -> dict:
        """Attach a customs declaration (CN23) to an international shipment before its label is printed.

        Args:
            tracking_no: tracking number of an INTL shipment in status created.
            items: list of objects {description, hs_code (6, 8 or 10 digits), quantity (int >= 1),
                unit_value (> 0), origin_country (2-letter code)}.
        Rules: 1-10 items; the items' total value must equal the shipment's declared value (to the cent);
        one declaration per shipment.
        """
        s, err = self._shipment(tracking_no)
        if err:
            return err
        if not self.services[s["service"]]["international"]:
            return self._err("Customs declarations are only needed for international shipments")
        if s["customs_id"] is not None:
            return self._err(f"Shipment already has declaration {s['customs_id']}")
        if s["status"] != "created":
            return self._err(f"Declarations must be added before the label is printed (status {s['status']})")
        if not isinstance(items, list) or not 1 <= len(items) <= 10:
            return self._err("items must be a list of 1 to 10 entries")
        clean = {}
        total = 0.0
        for i, it in enumerate(items, start=1):
            if not isinstance(it, dict):
                return self._err(f"item {i} must be an object")
            desc, hs, qty, val, orig = (it.get("description"), it.get("hs_code"), it.get("quantity"),
                                        it.get("unit_value"), it.get("origin_country"))
            if not isinstance(desc, str) or len(desc.strip()) < 3:
                return self._err(f"item {i}: description must be a meaningful text")
            if not isinstance(hs, str) or not HS_CODE.match(hs):
                return self._err(f"item {i}: hs_code must have 6, 8 or 10 digits")
            if not isinstance(qty, int) or isinstance(qty, bool) or qty < 1:
                return self._err(f"item {i}: quantity must be a positive integer")
            if not _num(val) or val <= 0:
                return self._err(f"item {i}: unit_value must be positive")
            if not isinstance(orig, str) or not COUNTRY.match(orig):
                return self._err(f"item {i}: origin_country must be a 2-letter code")
            clean[str(i)] = {"description": desc.strip(), "hs_code": hs, "quantity": qty,
                             "unit_value": _money(val), "origin_country": orig}
            total += qty * val
        total = _money(total)
        if abs(total - s["declared_value"]) > 0.009:
            return self._err(f"Items total {total:.2f} does not match declared value {s['declared_value']:.2f}")
        cid = self._next_id("customs", "CD-")
        self.customs[cid] = {"tracking_no": tracking_no, "items": clean, "total_value": total,
                             "status": "submitted", "duties_due": None}
        s["customs_id"] = cid
        return {"success": True, "message": f"Customs declaration {cid} submitted", "customs_id": cid, "total_value": total}

    def generate_label(self, tracking_no: str) -> dict:
        """Print the shipping label, making the parcel ready for collection.

        Args:
            tracking_no: tracking number of a shipment in status created.
        Rules: international shipments need a customs declaration first. A unique label id is generated.
        """
        s, err = self._shipment(tracking_no)
        if err:
            return err
        if s["status"] != "created":
            return self._err(f"Label can only be generated for new shipments (status {s['status']})")
        if self.services[s["service"]]["international"] and s["customs_id"] is None:
            return self._err("International shipments need a customs declaration before the label")
        label = "LBL-" + uuid.uuid4().hex[:12].upper()
        s["label_id"] = label
        s["status"] = "label_created"
        self._event(s, "label_created", s["sender"]["city"])
        return {"success": True, "message": f"Label generated for {tracking_no}", "label_id": label}

    def scan_parcel(self, tracking_no: str, hub_id: str, scan_type: str) -> dict:
        """Record a hub arrival or departure scan.

        Args:
            tracking_no: tracking number.
            hub_id: hub where the scan happens.
            scan_type: "arrival" or "departure".
        Rules: arrival needs a printed label and a parcel not already at a hub, and the hub must be
        below capacity; an international parcel arriving at a gateway is held for customs unless its
        declaration is cleared. Departure must be from the hub the parcel is at and not while held.
        """
        s, err = self._shipment(tracking_no)
        if err:
            return err
        hub = self.hubs.get(hub_id) if isinstance(hub_id, str) else None
        if hub is None:
            return self._err(f"Hub {hub_id} not found")
        if scan_type == "arrival":
            if s["status"] not in ("label_created", "in_transit"):
                return self._err(f"Parcel cannot be received at a hub in status {s['status']}")
            if hub["current_load"] >= hub["capacity"]:
                return self._err(f"Hub {hub_id} is at capacity ({hub['capacity']} parcels)")
            held = (self.services[s["service"]]["international"] and hub["type"] == "gateway"
                    and self.customs.get(s["customs_id"], {}).get("status") != "cleared")
            s["status"] = "customs_hold" if held else "at_hub"
            s["current_hub"] = hub_id
            hub["current_load"] += 1
            self._event(s, "customs_hold" if held else "arrived_at_hub", hub["city"])
            if held and s["customs_id"] in self.customs:
                self.customs[s["customs_id"]]["status"] = "under_review"
        elif scan_type == "departure":
            if s["current_hub"] != hub_id:
                return self._err(f"Parcel is not at hub {hub_id}")
            if s["status"] == "customs_hold":
                return self._err("Parcel is held by customs")
            if s["status"] != "at_hub":
                return self._err(f"Parcel cannot depart in status {s['status']}")
            s["status"] = "in_transit"
            s["current_hub"] = None
            hub["current_load"] -= 1
            self._event(s, "departed_hub", hub["city"])
        else:
            return self._err("scan_type must be arrival or departure")
        return {"success": True, "message": f"{scan_type.capitalize()} scan recorded at {hub_id}", "status": s["status"]}

    def clear_customs(self, tracking_no: str, decision: str) -> dict:
        """Customs decision for a parcel held at a gateway.

        Args:
            tracking_no: tracking number of a parcel in customs_hold.
            decision: "release" (duties assessed and billed to the shipper) or "reject" (parcel is
                returned to sender).
        Rules: on release, duties are 0 when the declared total is at most 150.00, otherwise the sum
        of each item's value times the duty rate of its HS chapter (first two digits; default rate
        for unknown chapters); duties are added to the account's balance due.
        """
        s, err = self._shipment(tracking_no)
        if err:
            return err
        if s["status"] != "customs_hold":
            return self._err(f"Parcel is not held by customs (status {s['status']})")
        if decision not in ("release", "reject"):
            return self._err("decision must be release or reject")
        decl = self.customs[s["customs_id"]]
        hub = self.hubs[s["current_hub"]]
        if decision == "reject":
            decl["status"] = "rejected"
            s["status"] = "returned_to_sender"
            s["current_hub"] = None
            hub["current_load"] -= 1
            self._event(s, "customs_rejected", hub["city"])
            return {"success": True, "message": f"{tracking_no} refused by customs", "duties": 0.0}
        duties = 0.0
        if decl["total_value"] > DUTY_FREE_LIMIT:
            for it in decl["items"].values():
                rate = self.duty_rates.get(it["hs_code"][:2], self.duty_rates.get("default", 0.0))
                duties += it["quantity"] * it["unit_value"] * rate
        duties = _money(duties)
        decl["status"] = "cleared"
        decl["duties_due"] = duties
        s["status"] = "at_hub"
        if duties > 0:
            acc = self.accounts[s["account_id"]]
            acc["balance_due"] = _money(acc["balance_due"] + duties)
        self._event(s, "customs_cleared", hub["city"])
        return {"success": True, "message": f"{tracking_no} released by customs", "duties": duties}

    def record_delivery_attempt(self, tracking_no: str, outcome: str, signed_by: str = None) -> dict:
        """Record a delivery attempt from the destination depot.

        Args:
            tracking_no: tracking number of a parcel at a depot.
            outcome: "delivered" or "failed".
            signed_by: name of the person who signed; required for delivered parcels on services with
                signature_required.
        Rules: the parcel must be at_hub in a hub of type depot. A delivery frees the depot slot and
        records the delivery date; delivering a return shipment completes the return and marks the
        original parcel returned. After 3 failed attempts the parcel is held at the depot for pickup.
        """
        s, err = self._shipment(tracking_no)
        if err:
            return err
        if s["status"] != "at_hub" or self.hubs.get(s["current_hub"], {}).get("type") != "depot":
            return self._err("Parcel must be at a delivery depot to attempt delivery")
        if outcome not in ("delivered", "failed"):
            return self._err("outcome must be delivered or failed")
        hub = self.hubs[s["current_hub"]]
        if outcome == "delivered":
            if self.services[s["service"]]["signature_required"] and (not isinstance(signed_by, str) or not signed_by.strip()):
                return self._err("This service requires the recipient's signature")
            s["status"] = "delivered"
            s["delivered_on"] = self._today().isoformat()
            s["signed_by"] = signed_by.strip() if isinstance(signed_by, str) and signed_by.strip() else None
            s["current_hub"] = None
            hub["current_load"] -= 1
            self._event(s, "delivered", s["recipient"]["city"])
            if s["return_of"] is not None and s["return_id"] in self.returns:
                self.returns[s["return_id"]]["status"] = "completed"
                orig = self.shipments.get(s["return_of"])
                if orig is not None:
                    orig["status"] = "returned"
            return {"success": True, "message": f"{tracking_no} delivered"}
        s["delivery_attempts"] += 1
        if s["delivery_attempts"] >= MAX_DELIVERY_ATTEMPTS:
            s["status"] = "held_at_depot"
            self._event(s, "held_at_depot", hub["city"])
        else:
            self._event(s, "delivery_failed", s["recipient"]["city"])
        return {"success": True, "message": f"Delivery attempt {s['delivery_attempts']} failed", "status": s["status"]}

    def create_return(self, tracking_no: str, reason: str) -> dict:
        """Create a return shipment for a delivered parcel, billed at the account's flat return fee.

        Args:
            tracking_no: tracking number of the delivered original parcel.
            reason: one of damaged, wrong_item, not_as_described, no_longer_needed.
        Rules: only delivered parcels, within 30 days of delivery, not sent with Economy (ECO), and only
        one return per parcel; the return travels recipient -> sender with the same weight and size on
        STD (domestic) or INTL; its label is generated immediately.
        """
        s, err = self._shipment(tracking_no)
        if err:
            return err
        if reason not in ("damaged", "wrong_item", "not_as_described", "no_longer_needed"):
            return self._err("reason must be damaged, wrong_item, not_as_described or no_longer_needed")
        if s["status"] != "delivered":
            return self._err(f"Only delivered parcels can be returned (status {s['status']})")
        if s["return_of"] is not None:
            return self._err("A return shipment cannot itself be returned")
        if s["return_id"] is not None:
            return self._err(f"Return {s['return_id']} already exists for {tracking_no}")
        if s["service"] == "ECO":
            return self._err("Economy parcels are not eligible for returns")
        delivered = datetime.date.fromisoformat(s["delivered_on"])
        if (self._today() - delivered).days > RETURN_WINDOW_DAYS:
            return self._err(f"Return window of {RETURN_WINDOW_DAYS} days has passed (delivered {s['delivered_on']})")
        acc = self.accounts[s["account_id"]]
        fee = _money(acc["return_fee"])
        if acc["balance_due"] + fee > acc["credit_limit"]:
            return self._err("Credit limit exceeded for the return fee")
        rid = self._next_id("return", "RT-")
        tn = self._next_id("shipment", "PX")
        service = "INTL" if s["recipient"]["country"] != HOME_COUNTRY else "STD"
        r = s["recipient"]
        self.shipments[tn] = {
            "account_id": s["account_id"], "service": service,
            "sender": {"name": r["name"], "street": r["street"], "city": r["city"], "postcode": r["postcode"], "country": r["country"]},
            "recipient": copy.deepcopy(s["sender"]),
            "weight_kg": s["weight_kg"], "dims_cm": copy.deepcopy(s["dims_cm"]), "billable_weight_kg": s["billable_weight_kg"],
            "declared_value": s["declared_value"], "price": fee, "status": "label_created", "current_hub": None,
            "label_id": "LBL-" + uuid.uuid4().hex[:12].upper(), "customs_id": None, "delivery_attempts": 0,
            "delivered_on": None, "signed_by": None, "return_of": tracking_no, "return_id": rid, "events": {},
        }
        self._event(self.shipments[tn], "label_created", r["city"])
        self.returns[rid] = {"original_tracking_no": tracking_no, "return_tracking_no": tn, "reason": reason,
                             "status": "open", "requested_on": self._today().isoformat(), "fee": fee}
        s["return_id"] = rid
        s["status"] = "return_requested"
        self._event(s, "return_requested", r["city"])
        acc["balance_due"] = _money(acc["balance_due"] + fee)
        return {"success": True, "message": f"Return {rid} created with shipment {tn}", "return_id": rid,
                "return_tracking_no": tn, "fee": fee}

    def cancel_shipment(self, tracking_no: str) -> dict:
        """Cancel a shipment that has not been scanned into the network yet and credit its price.

        Args:
            tracking_no: tracking number in status created or label_created.
        Rules: the label (if any) is voided, a submitted customs declaration is withdrawn and the price
        is credited back to the account. Cancelling a return shipment cancels the return and lets the
        original parcel be returned again.
        """
        s, err = self._shipment(tracking_no)
        if err:
            return err
        if s["status"] not in ("created", "label_created"):
            return self._err(f"Only shipments not yet in the network can be cancelled (status {s['status']})")
        acc = self.accounts[s["account_id"]]
        acc["balance_due"] = _money(acc["balance_due"] - s["price"])
        s["status"] = "cancelled"
        s["label_id"] = None
        if s["customs_id"] in self.customs:
            self.customs[s["customs_id"]]["status"] = "withdrawn"
        if s["return_of"] is not None and s["return_of"] in self.shipments:
            orig = self.shipments[s["return_of"]]
            if orig["status"] == "return_requested":
                orig["status"] = "delivered"
            orig["return_id"] = None
            if s["return_id"] in self.returns:
                self.returns[s["return_id"]]["status"] = "cancelled"
        self._event(s, "cancelled", s["sender"]["city"])
        return {"success": True, "message": f"Shipment {tracking_no} cancelled", "credited": s["price"]}
