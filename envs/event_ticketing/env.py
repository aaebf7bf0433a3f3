"""Box-office system for live events: venues, events with priced seat maps, seat holds,
purchases with service fees, ticket transfers, refunds, waitlists and door scanning."""

import copy
import datetime
import time
import uuid

FACILITY_FEE = 2.5
DOORS_OPEN_HOURS = 3
PAYMENT_METHODS = ("card", "paypal", "gift_card")


def _money(x):
    return round(float(x) + 0.0, 2)


class EventTicketing:
    def __init__(self, init_config: dict):
        self.venues = {}
        self.events = {}
        self.customers = {}
        self.holds = {}
        self.orders = {}
        self.tickets = {}
        self.waitlist = {}
        self.counters = {}
        self.now = ""

    # ------------------------------------------------------------------ helpers
    def _err(self, msg):
        return {"success": False, "error": msg}

    def _now(self):
        try:
            return datetime.datetime.fromisoformat(self.now)
        except (TypeError, ValueError):
            return datetime.datetime(2025, 1, 1)

    def _next_id(self, key, prefix):
        value = int(self.counters.get(key, 0)) + 1
        self.counters[key] = value
        return f"{prefix}{value}"

    def _event(self, event_id):
        if not isinstance(event_id, str) or event_id not in self.events:
            return None, self._err(f"Event {event_id} not found")
        return self.events[event_id], None

    def _start(self, ev):
        return datetime.datetime.fromisoformat(ev["start"])

    def _customer_count(self, event_id, customer_id):
        owned = sum(1 for t in self.tickets.values()
                    if t["event_id"] == event_id and t["owner_id"] == customer_id and t["status"] in ("valid", "scanned"))
        held = sum(len(h["seat_ids"]) for h in self.holds.values()
                   if h["event_id"] == event_id and h["customer_id"] == customer_id and h["status"] == "active")
        return owned + held

    def _tier_counts(self, ev):
        counts = {}
        for s in ev["seats"].values():
            c = counts.setdefault(s["tier"], {"available": 0, "held": 0, "sold": 0})
            c[s["status"]] = c.get(s["status"], 0) + 1
        return counts

    # ------------------------------------------------------------------ queries
    def list_events(self) -> dict:
        """List all events with venue, start time, status and seats available."""
        out = []
        for eid, ev in sorted(self.events.items(), key=lambda kv: kv[1]["start"]):
            avail = sum(1 for s in ev["seats"].values() if s["status"] == "available")
            out.append({"event_id": eid, "name": ev["name"], "venue_id": ev["venue_id"], "start": ev["start"],
                        "status": ev["status"], "seats_available": avail})
        return {"success": True, "data": out}

    def get_event(self, event_id: str) -> dict:
        """Get an event's details, price tiers, policies and seat counts per tier (seat map excluded).

        Args:
            event_id: event id, e.g. "EV-101".
        """
        ev, err = self._event(event_id)
        if err:
            return err
        data = {k: copy.deepcopy(v) for k, v in ev.items() if k != "seats"}
        data["event_id"] = event_id
        data["seat_counts"] = self._tier_counts(ev)
        return {"success": True, "data": data}

    def get_available_seats(self, event_id: str, tier: str = None) -> dict:
        """List available seats of an event, optionally for one price tier.

        Args:
            event_id: event id.
            tier: optional price tier code, e.g. "P1".
        """
        ev, err = self._event(event_id)
        if err:
            return err
        if tier is not None and (not isinstance(tier, str) or tier not in ev["price_tiers"]):
            return self._err(f"Unknown price tier {tier}")
        seats = [{"seat_id": sid, "section": s["section"], "row": s["row"], "tier": s["tier"],
                  "price": ev["price_tiers"][s["tier"]]["price"]}
                 for sid, s in ev["seats"].items() if s["status"] == "available" and (tier is None or s["tier"] == tier)]
        return {"success": True, "data": seats}

    def get_order(self, order_id: str) -> dict:
        """Get an order with amounts, status and its tickets.

        Args:
            order_id: order id, e.g. "OR-3001".
        """
        o = self.orders.get(order_id) if isinstance(order_id, str) else None
        if o is None:
            return self._err(f"Order {order_id} not found")
        tickets = {tid: copy.deepcopy(t) for tid, t in sorted(self.tickets.items()) if t["order_id"] == order_id}
        return {"success": True, "data": dict(copy.deepcopy(o), order_id=order_id, tickets=tickets)}

    def get_customer(self, customer_id: str) -> dict:
        """Get a customer with the tickets they currently own, active holds and waitlist entries.

        Args:
            customer_id: customer id, e.g. "CU-01".
        """
        c = self.customers.get(customer_id) if isinstance(customer_id, str) else None
        if c is None:
            return self._err(f"Customer {customer_id} not found")
        tickets = sorted(tid for tid, t in self.tickets.items() if t["owner_id"] == customer_id)
        holds = sorted(hid for hid, h in self.holds.items() if h["customer_id"] == customer_id and h["status"] == "active")
        waits = sorted(wid for wid, w in self.waitlist.items() if w["customer_id"] == customer_id)
        return {"success": True, "data": dict(copy.deepcopy(c), customer_id=customer_id, ticket_ids=tickets,
                                              active_hold_ids=holds, waitlist_ids=waits)}

    # ------------------------------------------------------------------ updates
    def hold_seats(self, event_id: str, customer_id: str, seat_ids: list) -> dict:
        """Hold specific seats for a customer before payment.

        Args:
            event_id: event on sale.
            customer_id: verified customer.
            seat_ids: list of seat ids (at least one, no duplicates).
        Rules: the event must be on sale and not started; every seat must be available; the customer's
        owned tickets plus held seats for the event may not exceed the event's per-customer limit.
        """
        ev, err = self._event(event_id)
        if err:
            return err
        c = self.customers.get(customer_id) if isinstance(customer_id, str) else None
        if c is None:
            return self._err(f"Customer {customer_id} not found")
        if not c["verified"]:
            return self._err(f"Customer {customer_id} must verify their email before buying")
        if ev["status"] != "on_sale":
            return self._err(f"Event {event_id} is {ev['status']}")
        if self._start(ev) <= self._now():
            return self._err("The event has already started")
        if not isinstance(seat_ids, list) or not seat_ids or not all(isinstance(s, str) for s in seat_ids):
            return self._err("seat_ids must be a non-empty list of seat ids")
        if len(set(seat_ids)) != len(seat_ids):
            return self._err("seat_ids contains duplicates")
        for sid in seat_ids:
            if sid not in ev["seats"]:
                return self._err(f"Seat {sid} does not exist for {event_id}")
            if ev["seats"][sid]["status"] != "available":
                return self._err(f"Seat {sid} is {ev['seats'][sid]['status']}")
        limit = ev["max_tickets_per_customer"]
        have = self._customer_count(event_id, customer_id)
        if have + len(seat_ids) > limit:
            return self._err(f"Limit is {limit} tickets per customer; {customer_id} already has {have}")
        hid = self._next_id("hold", "H-")
        self.holds[hid] = {"event_id": event_id, "customer_id": customer_id, "seat_ids": list(seat_ids), "status": "active"}
        for sid in seat_ids:
            ev["seats"][sid]["status"] = "held"
            ev["seats"][sid]["hold_id"] = hid
        total = sum(ev["price_tiers"][ev["seats"][s]["tier"]]["price"] for s in seat_ids)
        return {"success": True, "message": f"{len(seat_ids)} seat(s) held", "hold_id": hid, "subtotal": _money(total)}

    def release_hold(self, hold_id: str) -> dict:
        """Release an active hold, making its seats available again.

        Args:
            hold_id: hold id, e.g. "H-501".
        """
        h = self.holds.get(hold_id) if isinstance(hold_id, str) else None
        if h is None:
            return self._err(f"Hold {hold_id} not found")
        if h["status"] != "active":
            return self._err(f"Hold {hold_id} is {h['status']}")
        ev = self.events[h["event_id"]]
        for sid in h["seat_ids"]:
            ev["seats"][sid]["status"] = "available"
            ev["seats"][sid]["hold_id"] = None
        h["status"] = "released"
        for w in self.waitlist.values():
            if w.get("hold_id") == hold_id and w["status"] == "offered":
                w["status"] = "declined"
        return {"success": True, "message": f"Hold {hold_id} released"}

    def purchase_hold(self, hold_id: str, payment_method: str) -> dict:
        """Pay for an active hold: issues one ticket per seat with a unique barcode.

        Args:
            hold_id: active hold.
            payment_method: card, paypal or gift_card.
        Rules: the event must still be on sale and not started. Total = seat prices + service fee
        (event's percentage of the subtotal) + 2.50 facility fee per ticket. When no seat remains
        available or held the event becomes sold_out.
        """
        h = self.holds.get(hold_id) if isinstance(hold_id, str) else None
        if h is None:
            return self._err(f"Hold {hold_id} not found")
        if h["status"] != "active":
            return self._err(f"Hold {hold_id} is {h['status']}")
        if payment_method not in PAYMENT_METHODS:
            return self._err("payment_method must be card, paypal or gift_card")
        ev = self.events[h["event_id"]]
        if ev["status"] != "on_sale" or self._start(ev) <= self._now():
            return self._err(f"Event {h['event_id']} is no longer on sale")
        subtotal = _money(sum(ev["price_tiers"][ev["seats"][s]["tier"]]["price"] for s in h["seat_ids"]))
        fees = _money(subtotal * ev["service_fee_pct"] / 100.0 + FACILITY_FEE * len(h["seat_ids"]))
        oid = self._next_id("order", "OR-")
        ticket_ids = []
        for n, sid in enumerate(h["seat_ids"], start=1):
            tid = f"{oid}-{n}"
            seat = ev["seats"][sid]
            self.tickets[tid] = {"order_id": oid, "event_id": h["event_id"], "seat_id": sid, "owner_id": h["customer_id"],
                                 "price": ev["price_tiers"][seat["tier"]]["price"], "status": "valid",
                                 "barcode": uuid.uuid4().hex[:16].upper(), "transfer_count": 0}
            seat["status"] = "sold"
            seat["ticket_id"] = tid
            ticket_ids.append(tid)
        self.orders[oid] = {"customer_id": h["customer_id"], "event_id": h["event_id"], "ticket_ids": ticket_ids,
                            "subtotal": subtotal, "fees": fees, "total": _money(subtotal + fees), "refunded_amount": 0.0,
                            "status": "paid", "payment_method": payment_method,
                            "purchased_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time()))}
        h["status"] = "purchased"
        ev["sold_count"] += len(ticket_ids)
        if all(s["status"] == "sold" for s in ev["seats"].values()):
            ev["status"] = "sold_out"
        for w in self.waitlist.values():
            if w.get("hold_id") == hold_id and w["status"] == "offered":
                w["status"] = "fulfilled"
        return {"success": True, "message": f"Order {oid} paid", "order_id": oid, "ticket_ids": list(ticket_ids),
                "subtotal": subtotal, "fees": fees, "total": _money(subtotal + fees)}

    def transfer_ticket(self, ticket_id: str, from_customer_id: str, to_email: str) -> dict:
        """Transfer a ticket to another registered customer; a new barcode is issued.

        Args:
            ticket_id: ticket to transfer.
            from_customer_id: current owner.
            to_email: email of the recipient's account.
        Rules: the event must allow transfers and not have started; the ticket must be valid; the
        recipient must be a different, verified customer within the per-customer limit.
        """
        t = self.tickets.get(ticket_id) if isinstance(ticket_id, str) else None
        if t is None:
            return self._err(f"Ticket {ticket_id} not found")
        if t["owner_id"] != from_customer_id:
            return self._err(f"Ticket {ticket_id} is not owned by {from_customer_id}")
        if t["status"] != "valid":
            return self._err(f"Ticket {ticket_id} is {t['status']}")
        ev = self.events[t["event_id"]]
        if not ev["transfer_allowed"]:
            return self._err(f"Tickets for {t['event_id']} are not transferable")
        if ev["status"] not in ("on_sale", "sold_out") or self._start(ev) <= self._now():
            return self._err("Transfers are closed for this event")
        recipient = None
        if isinstance(to_email, str):
            for cid, c in sorted(self.customers.items()):
                if c["email"].lower() == to_email.strip().lower():
                    recipient = cid
                    break
        if recipient is None:
            return self._err(f"No customer account with email {to_email}")
        if recipient == from_customer_id:
            return self._err("Cannot transfer a ticket to yourself")
        if not self.customers[recipient]["verified"]:
            return self._err("Recipient must verify their email first")
        if self._customer_count(t["event_id"], recipient) + 1 > ev["max_tickets_per_customer"]:
            return self._err(f"Recipient already has the maximum of {ev['max_tickets_per_customer']} tickets")
        t["owner_id"] = recipient
        t["barcode"] = uuid.uuid4().hex[:16].upper()
        t["transfer_count"] += 1
        return {"success": True, "message": f"Ticket {ticket_id} transferred to {self.customers[recipient]['name']}",
                "new_owner_id": recipient}

    def refund_ticket(self, ticket_id: str) -> dict:
        """Refund a ticket and release its seat, offering it to the first waitlisted customer of its tier.

        Args:
            ticket_id: valid ticket.
        Rules: if the event is cancelled the ticket price plus its share of the order fees is refunded;
        otherwise the event's refund policy must allow it (refundable until N days before the start)
        and only the ticket price is refunded. A waiting customer for the same tier receives a hold on
        the released seat; otherwise the seat becomes available and a sold-out event goes back on sale.
        """
        t = self.tickets.get(ticket_id) if isinstance(ticket_id, str) else None
        if t is None:
            return self._err(f"Ticket {ticket_id} not found")
        if t["status"] != "valid":
            return self._err(f"Ticket {ticket_id} is {t['status']}")
        ev = self.events[t["event_id"]]
        o = self.orders[t["order_id"]]
        if ev["status"] == "cancelled":
            amount = _money(t["price"] + o["fees"] / len(o["ticket_ids"]))
        else:
            days = ev["refundable_until_days"]
            if days is None:
                return self._err(f"Tickets for {t['event_id']} are non-refundable")
            if self._now() > self._start(ev) - datetime.timedelta(days=days):
                return self._err(f"Refunds closed {days} days before the event")
            amount = _money(t["price"])
        seat = ev["seats"][t["seat_id"]]
        t["status"] = "refunded"
        o["refunded_amount"] = _money(o["refunded_amount"] + amount)
        o["status"] = "refunded" if o["refunded_amount"] >= o["total"] - 0.005 or all(
            self.tickets[x]["status"] == "refunded" for x in o["ticket_ids"]) else "partially_refunded"
        ev["sold_count"] -= 1
        seat["ticket_id"] = None
        offered_to = None
        if ev["status"] in ("on_sale", "sold_out"):
            waiting = sorted((w["position"], wid) for wid, w in self.waitlist.items()
                             if w["event_id"] == t["event_id"] and w["tier"] == seat["tier"] and w["status"] == "waiting")
            if waiting:
                wid = waiting[0][1]
                w = self.waitlist[wid]
                hid = self._next_id("hold", "H-")
                self.holds[hid] = {"event_id": t["event_id"], "customer_id": w["customer_id"], "seat_ids": [t["seat_id"]], "status": "active"}
                seat["status"] = "held"
                seat["hold_id"] = hid
                w["status"] = "offered"
                w["hold_id"] = hid
                offered_to = w["customer_id"]
            else:
                seat["status"] = "available"
                seat["hold_id"] = None
            if ev["status"] == "sold_out" and offered_to is None:
                ev["status"] = "on_sale"
        else:
            seat["status"] = "available"
            seat["hold_id"] = None
        return {"success": True, "message": f"Ticket {ticket_id} refunded", "amount": amount,
                "seat_offered_to": offered_to}

    def join_waitlist(self, event_id: str, customer_id: str, tier: str) -> dict:
        """Join the waitlist for a price tier that has no available seats.

        Args:
            event_id: event id.
            customer_id: verified customer.
            tier: price tier code.
        Rules: the event must be on sale or sold out and not started; one waitlist entry per customer
        and event; customers at their ticket limit cannot join.
        """
        ev, err = self._event(event_id)
        if err:
            return err
        c = self.customers.get(customer_id) if isinstance(customer_id, str) else None
        if c is None:
            return self._err(f"Customer {customer_id} not found")
        if not c["verified"]:
            return self._err(f"Customer {customer_id} must verify their email first")
        if not isinstance(tier, str) or tier not in ev["price_tiers"]:
            return self._err(f"Unknown price tier {tier}")
        if ev["status"] not in ("on_sale", "sold_out") or self._start(ev) <= self._now():
            return self._err(f"Event {event_id} is {ev['status']}")
        if any(s["status"] == "available" and s["tier"] == tier for s in ev["seats"].values()):
            return self._err(f"Seats in tier {tier} are still available; buy them directly")
        for wid, w in self.waitlist.items():
            if w["event_id"] == event_id and w["customer_id"] == customer_id and w["status"] in ("waiting", "offered"):
                return self._err(f"Customer is already on the waitlist ({wid})")
        if self._customer_count(event_id, customer_id) >= ev["max_tickets_per_customer"]:
            return self._err("Customer already holds the maximum number of tickets")
        position = 1 + max([w["position"] for w in self.waitlist.values() if w["event_id"] == event_id] or [0])
        wid = self._next_id("waitlist", "WL-")
        self.waitlist[wid] = {"event_id": event_id, "customer_id": customer_id, "tier": tier, "position": position,
                              "status": "waiting", "hold_id": None}
        return {"success": True, "message": f"Added to waitlist at position {position}", "waitlist_id": wid,
                "position": position}

    def scan_ticket(self, ticket_id: str, barcode: str) -> dict:
        """Admit a ticket holder at the door.

        Args:
            ticket_id: ticket id.
            barcode: barcode presented; must match the ticket's current barcode.
        Rules: doors open 3 hours before the start on the event day; only valid tickets of events that
        are not cancelled; each ticket admits once.
        """
        t = self.tickets.get(ticket_id) if isinstance(ticket_id, str) else None
        if t is None:
            return self._err(f"Ticket {ticket_id} not found")
        if t["status"] == "scanned":
            return self._err(f"Ticket {ticket_id} was already scanned")
        if t["status"] != "valid":
            return self._err(f"Ticket {ticket_id} is {t['status']}")
        if not isinstance(barcode, str) or barcode.strip().upper() != t["barcode"]:
            return self._err("Barcode does not match; the ticket may have been transferred")
        ev = self.events[t["event_id"]]
        if ev["status"] in ("cancelled", "postponed"):
            return self._err(f"Event is {ev['status']}")
        start = self._start(ev)
        now = self._now()
        if now < start - datetime.timedelta(hours=DOORS_OPEN_HOURS) or now.date() != start.date():
            return self._err("Doors are not open for this event")
        t["status"] = "scanned"
        return {"success": True, "message": f"Welcome! Seat {t['seat_id']}"}
