"""Intercity rail reservation and ticketing system: timetabled trains on routes, coaches and
seat reservations per journey segment, fare types, railcard discounts, exchanges, refunds by
time before departure, on-board validation and delay compensation."""

import copy
import datetime

TRAVEL_CLASSES = ("standard", "first")
OFF_PEAK_EARLIEST = "09:30"
YOUTH_MIN_FARE = 12.0
YOUTH_MIN_FARE_BEFORE = "10:00"
EXCHANGE_FEE_ADVANCE = 10.0
RAILCARD_RULES = {
    "16-25": {"discount_pct": 34, "min_age": 16, "max_age": 25},
    "senior": {"discount_pct": 34, "min_age": 60, "max_age": None},
    "disabled": {"discount_pct": 34, "min_age": None, "max_age": None},
    "veterans": {"discount_pct": 34, "min_age": None, "max_age": None},
}
DELAY_REPAY = [(120, 100), (60, 100), (30, 50), (15, 25)]


def _money(x):
    return round(float(x) + 0.0, 2)


def _date(value):
    if not isinstance(value, str):
        return None
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        return None


class RailTickets:
    def __init__(self, init_config: dict):
        self.stations = {}
        self.routes = {}
        self.fare_types = {}
        self.class_rates = {}
        self.trains = {}
        self.passengers = {}
        self.railcards = {}
        self.tickets = {}
        self.transactions = {}
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

    def _stops(self, train):
        return self.routes[train["route_id"]]["stops"]

    def _segment(self, train, origin, destination):
        """Return (i_from, i_to) stop indexes or an error message."""
        stops = self._stops(train)
        if origin not in stops:
            return None, f"Train does not call at {origin}"
        if destination not in stops:
            return None, f"Train does not call at {destination}"
        i, j = stops.index(origin), stops.index(destination)
        if i >= j:
            return None, f"{origin} is not before {destination} on this train"
        return (i, j), None

    def _departure_dt(self, train, station):
        return datetime.datetime.fromisoformat(f"{train['date']}T{train['times'][station]}")

    def _seat_free(self, train, coach, seat, seg, ignore=None):
        stops = self._stops(train)
        for tid, r in train["coaches"][coach]["seats"][seat]["reservations"].items():
            if tid == ignore:
                continue
            a, b = stops.index(r["from"]), stops.index(r["to"])
            if a < seg[1] and seg[0] < b:
                return False
        return True

    def _free_seats(self, train, travel_class, seg, ignore=None):
        out = []
        for cid, coach in sorted(train["coaches"].items()):
            if coach["class"] != travel_class:
                continue
            for sno in sorted(coach["seats"], key=lambda s: int(s) if s.isdigit() else 0):
                if self._seat_free(train, cid, sno, seg, ignore):
                    out.append((cid, sno))
        return out

    def _price(self, train, origin, destination, travel_class, fare_type, railcard):
        route = self.routes[train["route_id"]]
        km = abs(route["km"][destination] - route["km"][origin])
        rate = self.class_rates[travel_class]
        base = _money(max(km * rate["per_km"], rate["minimum"]) * self.fare_types[fare_type]["multiplier"]
                      * train.get("price_multiplier", 1.0))
        discount = 0.0
        if railcard is not None:
            discount = _money(base * railcard["discount_pct"] / 100.0)
            if railcard["type"] == "16-25" and train["times"][origin] < YOUTH_MIN_FARE_BEFORE and fare_type == "off_peak":
                discount = _money(max(min(discount, base - YOUTH_MIN_FARE), 0.0))
        return base, discount, _money(base - discount), km

    def _check_railcard(self, passenger_id, railcard_id, train):
        if railcard_id is None:
            return None, None
        rc = self.railcards.get(railcard_id) if isinstance(railcard_id, str) else None
        if rc is None:
            return None, f"Railcard {railcard_id} not found"
        if rc["passenger_id"] != passenger_id:
            return None, f"Railcard {railcard_id} belongs to another passenger"
        if rc["status"] != "active":
            return None, f"Railcard {railcard_id} is {rc['status']}"
        if not rc["valid_from"] <= train["date"] <= rc["valid_until"]:
            return None, f"Railcard {railcard_id} is not valid on {train['date']}"
        return rc, None

    def _check_fare_type(self, train, origin, fare_type):
        if not isinstance(fare_type, str) or fare_type not in self.fare_types:
            return f"Unknown fare type {fare_type}"
        if fare_type == "off_peak":
            weekday = _date(train["date"]).weekday() < 5
            if weekday and train["times"][origin] < OFF_PEAK_EARLIEST:
                return f"Off-peak fares are not valid on weekday trains leaving {origin} before {OFF_PEAK_EARLIEST}"
        return None

    def _add_tx(self, ticket_id, kind, amount):
        txid = self._next_id("transaction", "TX")
        self.transactions[txid] = {"ticket_id": ticket_id, "kind": kind, "amount": _money(amount),
                                   "date": self._now().date().isoformat()}
        return txid

    def _ticket(self, ticket_id):
        if not isinstance(ticket_id, str) or ticket_id not in self.tickets:
            return None, self._err(f"Ticket {ticket_id} not found")
        return self.tickets[ticket_id], None

    # ------------------------------------------------------------------ queries
    def list_stations(self) -> dict:
        """List all stations (code, name, city)."""
        return {"success": True, "data": copy.deepcopy(self.stations)}

    def search_trains(self, origin: str, destination: str, date: str) -> dict:
        """Find trains calling at origin and later at destination on a date.

        Args:
            origin: station code, e.g. "KGX".
            destination: station code, e.g. "YRK".
            date: travel date YYYY-MM-DD.
        Returns departure/arrival times, status and delay for each train (cancelled ones included, flagged).
        """
        if not isinstance(origin, str) or origin not in self.stations:
            return self._err(f"Unknown station {origin}")
        if not isinstance(destination, str) or destination not in self.stations:
            return self._err(f"Unknown station {destination}")
        if _date(date) is None:
            return self._err("date must be YYYY-MM-DD")
        out = []
        for tid, t in sorted(self.trains.items(), key=lambda kv: (kv[1]["date"], kv[1]["times"][self._stops(kv[1])[0]])):
            if t["date"] != date:
                continue
            seg, msg = self._segment(t, origin, destination)
            if msg:
                continue
            out.append({"train_id": tid, "service": t["service"], "departs": t["times"][origin],
                        "arrives": t["times"][destination], "status": t["status"], "delay_minutes": t["delay_minutes"]})
        return {"success": True, "data": out}

    def get_train(self, train_id: str) -> dict:
        """Get a train's route, calling times, status, delay, remaining advance quota and seats per class.

        Args:
            train_id: train id, e.g. "TR-1S07-0601".
        """
        t = self.trains.get(train_id) if isinstance(train_id, str) else None
        if t is None:
            return self._err(f"Train {train_id} not found")
        seats = {}
        for coach in t["coaches"].values():
            seats[coach["class"]] = seats.get(coach["class"], 0) + len(coach["seats"])
        data = {k: copy.deepcopy(v) for k, v in t.items() if k != "coaches"}
        data["train_id"] = train_id
        data["stops"] = list(self._stops(t))
        data["seats_by_class"] = seats
        return {"success": True, "data": data}

    def get_seat_availability(self, train_id: str, origin: str, destination: str, travel_class: str) -> dict:
        """List seats free for the whole segment origin->destination in a travel class.

        Args:
            train_id: train id.
            origin: boarding station code.
            destination: alighting station code.
            travel_class: "standard" or "first".
        """
        t = self.trains.get(train_id) if isinstance(train_id, str) else None
        if t is None:
            return self._err(f"Train {train_id} not found")
        if travel_class not in TRAVEL_CLASSES:
            return self._err("travel_class must be standard or first")
        seg, msg = self._segment(t, origin, destination)
        if msg:
            return self._err(msg)
        free = self._free_seats(t, travel_class, seg)
        return {"success": True, "data": [{"coach": c, "seat": s, "feature": t["coaches"][c]["seats"][s]["feature"]} for c, s in free]}

    def get_ticket(self, ticket_id: str) -> dict:
        """Get a ticket with journey, seat, price breakdown and status.

        Args:
            ticket_id: ticket id, e.g. "T1001".
        """
        tk, err = self._ticket(ticket_id)
        if err:
            return err
        return {"success": True, "data": dict(tk, ticket_id=ticket_id)}

    def get_passenger(self, passenger_id: str) -> dict:
        """Get a passenger with their railcards and ticket ids.

        Args:
            passenger_id: passenger id, e.g. "P001".
        """
        p = self.passengers.get(passenger_id) if isinstance(passenger_id, str) else None
        if p is None:
            return self._err(f"Passenger {passenger_id} not found")
        cards = {rid: dict(rc) for rid, rc in sorted(self.railcards.items()) if rc["passenger_id"] == passenger_id}
        tks = sorted(tid for tid, tk in self.tickets.items() if tk["passenger_id"] == passenger_id)
        return {"success": True, "data": dict(p, passenger_id=passenger_id, railcards=cards, ticket_ids=tks)}

    def quote_fare(self, train_id: str, origin: str, destination: str, travel_class: str, fare_type: str,
                   railcard_id: str = None) -> dict:
        """Price a journey without booking it.

        Args:
            train_id: train id.
            origin: boarding station code.
            destination: alighting station code.
            travel_class: "standard" or "first".
            fare_type: "anytime", "off_peak" or "advance".
            railcard_id: optional railcard to apply (no holder check is made for a quote).
        """
        t = self.trains.get(train_id) if isinstance(train_id, str) else None
        if t is None:
            return self._err(f"Train {train_id} not found")
        seg, msg = self._segment(t, origin, destination)
        if msg:
            return self._err(msg)
        if travel_class not in TRAVEL_CLASSES:
            return self._err("travel_class must be standard or first")
        msg = self._check_fare_type(t, origin, fare_type)
        if msg:
            return self._err(msg)
        rc = None
        if railcard_id is not None:
            rc = self.railcards.get(railcard_id) if isinstance(railcard_id, str) else None
            if rc is None:
                return self._err(f"Railcard {railcard_id} not found")
        base, discount, price, km = self._price(t, origin, destination, travel_class, fare_type, rc)
        return {"success": True, "data": {"distance_km": km, "base_fare": base, "railcard_discount": discount, "price": price}}

    # ------------------------------------------------------------------ updates
    def book_ticket(self, passenger_id: str, train_id: str, origin: str, destination: str, travel_class: str,
                    fare_type: str, railcard_id: str = None, coach: str = None, seat: str = None) -> dict:
        """Buy a ticket with a seat reservation for one passenger.

        Args:
            passenger_id: traveller.
            train_id: train id.
            origin: boarding station code.
            destination: alighting station code (after origin on the route).
            travel_class: "standard" or "first".
            fare_type: "anytime", "off_peak" or "advance".
            railcard_id: optional railcard of this passenger, valid on the travel date.
            coach: optional coach letter; with seat, reserves that seat, otherwise the first free seat is taken.
            seat: optional seat number within the coach.
        Rules: train not cancelled and leaving origin after now; advance fares only until the day before
        travel and while the class's advance quota lasts; off-peak not valid on weekday trains leaving
        before 09:30; the seat must be in the chosen class and free for the whole segment.
        """
        p = self.passengers.get(passenger_id) if isinstance(passenger_id, str) else None
        if p is None:
            return self._err(f"Passenger {passenger_id} not found")
        t = self.trains.get(train_id) if isinstance(train_id, str) else None
        if t is None:
            return self._err(f"Train {train_id} not found")
        if t["status"] == "cancelled":
            return self._err(f"Train {train_id} is cancelled")
        seg, msg = self._segment(t, origin, destination)
        if msg:
            return self._err(msg)
        if travel_class not in TRAVEL_CLASSES:
            return self._err("travel_class must be standard or first")
        if self._departure_dt(t, origin) <= self._now():
            return self._err(f"Train has already left {origin}")
        msg = self._check_fare_type(t, origin, fare_type)
        if msg:
            return self._err(msg)
        if fare_type == "advance":
            if t["date"] <= self._now().date().isoformat():
                return self._err("Advance fares must be bought by the day before travel")
            if t["advance_quota"].get(travel_class, 0) <= 0:
                return self._err(f"No advance fares left in {travel_class} on this train")
        rc, msg = self._check_railcard(passenger_id, railcard_id, t)
        if msg:
            return self._err(msg)
        if (coach is None) != (seat is None):
            return self._err("Give both coach and seat, or neither for automatic allocation")
        if coach is not None:
            if not isinstance(coach, str) or coach not in t["coaches"]:
                return self._err(f"Coach {coach} not on this train")
            if t["coaches"][coach]["class"] != travel_class:
                return self._err(f"Coach {coach} is {t['coaches'][coach]['class']} class")
            if not isinstance(seat, str) or seat not in t["coaches"][coach]["seats"]:
                return self._err(f"Seat {seat} not in coach {coach}")
            if not self._seat_free(t, coach, seat, seg):
                return self._err(f"Seat {coach}{seat} is reserved on part of this journey")
        else:
            free = self._free_seats(t, travel_class, seg)
            if not free:
                return self._err(f"No {travel_class} seats free between {origin} and {destination}")
            coach, seat = free[0]
        base, discount, price, _ = self._price(t, origin, destination, travel_class, fare_type, rc)
        tid = self._next_id("ticket", "T")
        self.tickets[tid] = {
            "passenger_id": passenger_id, "train_id": train_id, "origin": origin, "destination": destination,
            "travel_class": travel_class, "fare_type": fare_type, "railcard_id": railcard_id,
            "coach": coach, "seat": seat, "base_fare": base, "discount": discount, "price": price,
            "status": "booked", "exchanges": 0, "refund_amount": None, "delay_repay_claimed": False,
        }
        t["coaches"][coach]["seats"][seat]["reservations"][tid] = {"from": origin, "to": destination}
        if fare_type == "advance":
            t["advance_quota"][travel_class] -= 1
        self._add_tx(tid, "sale", price)
        return {"success": True, "message": f"Ticket {tid} booked: {origin}-{destination} coach {coach} seat {seat}",
                "ticket_id": tid, "coach": coach, "seat": seat, "price": price}

    def change_seat(self, ticket_id: str, coach: str, seat: str) -> dict:
        """Move a booked ticket's reservation to another seat of the same class.

        Args:
            ticket_id: ticket id.
            coach: coach letter.
            seat: seat number in that coach.
        """
        tk, err = self._ticket(ticket_id)
        if err:
            return err
        if tk["status"] != "booked":
            return self._err(f"Ticket {ticket_id} is {tk['status']}")
        t = self.trains[tk["train_id"]]
        if not isinstance(coach, str) or coach not in t["coaches"]:
            return self._err(f"Coach {coach} not on this train")
        if t["coaches"][coach]["class"] != tk["travel_class"]:
            return self._err(f"Coach {coach} is {t['coaches'][coach]['class']} class but the ticket is {tk['travel_class']}")
        if not isinstance(seat, str) or seat not in t["coaches"][coach]["seats"]:
            return self._err(f"Seat {seat} not in coach {coach}")
        if coach == tk["coach"] and seat == tk["seat"]:
            return self._err("That is already the reserved seat")
        seg, _ = self._segment(t, tk["origin"], tk["destination"])
        if not self._seat_free(t, coach, seat, seg):
            return self._err(f"Seat {coach}{seat} is reserved on part of this journey")
        t["coaches"][tk["coach"]]["seats"][tk["seat"]]["reservations"].pop(ticket_id, None)
        t["coaches"][coach]["seats"][seat]["reservations"][ticket_id] = {"from": tk["origin"], "to": tk["destination"]}
        tk["coach"] = coach
        tk["seat"] = seat
        return {"success": True, "message": f"Ticket {ticket_id} now in coach {coach} seat {seat}"}

    def exchange_ticket(self, ticket_id: str, new_train_id: str) -> dict:
        """Exchange a booked ticket onto another train for the same journey and class.

        Args:
            ticket_id: ticket id.
            new_train_id: train to move to; must call at the same origin and destination.
        Rules: only booked tickets before the original train leaves; the new train must not be
        cancelled and must leave after now; advance tickets pay a 10.00 fee plus any higher fare
        and need advance quota on the new train (the old quota is returned); anytime and off-peak
        tickets pay a higher fare or get a lower one refunded. A free seat is allocated automatically.
        """
        tk, err = self._ticket(ticket_id)
        if err:
            return err
        if tk["status"] != "booked":
            return self._err(f"Ticket {ticket_id} is {tk['status']}")
        old = self.trains[tk["train_id"]]
        if self._departure_dt(old, tk["origin"]) <= self._now() and old["status"] != "cancelled":
            return self._err("The booked train has already left; the ticket cannot be exchanged")
        nt = self.trains.get(new_train_id) if isinstance(new_train_id, str) else None
        if nt is None:
            return self._err(f"Train {new_train_id} not found")
        if new_train_id == tk["train_id"]:
            return self._err("New train must differ from the booked train")
        if nt["status"] == "cancelled":
            return self._err(f"Train {new_train_id} is cancelled")
        seg, msg = self._segment(nt, tk["origin"], tk["destination"])
        if msg:
            return self._err(msg)
        if self._departure_dt(nt, tk["origin"]) <= self._now():
            return self._err(f"Train {new_train_id} has already left {tk['origin']}")
        msg = self._check_fare_type(nt, tk["origin"], tk["fare_type"])
        if msg:
            return self._err(msg)
        cls = tk["travel_class"]
        if tk["fare_type"] == "advance" and nt["advance_quota"].get(cls, 0) <= 0:
            return self._err(f"No advance fares left in {cls} on {new_train_id}")
        rc, msg = self._check_railcard(tk["passenger_id"], tk["railcard_id"], nt)
        if msg:
            return self._err(msg)
        free = self._free_seats(nt, cls, seg)
        if not free:
            return self._err(f"No {cls} seats free on {new_train_id}")
        base, discount, price, _ = self._price(nt, tk["origin"], tk["destination"], cls, tk["fare_type"], rc)
        diff = _money(price - tk["price"])
        if tk["fare_type"] == "advance":
            amount = _money(EXCHANGE_FEE_ADVANCE + max(diff, 0.0))
        else:
            amount = diff
        coach, seat = free[0]
        old["coaches"][tk["coach"]]["seats"][tk["seat"]]["reservations"].pop(ticket_id, None)
        nt["coaches"][coach]["seats"][seat]["reservations"][ticket_id] = {"from": tk["origin"], "to": tk["destination"]}
        if tk["fare_type"] == "advance":
            old["advance_quota"][cls] = old["advance_quota"].get(cls, 0) + 1
            nt["advance_quota"][cls] -= 1
        tk["train_id"] = new_train_id
        tk["coach"] = coach
        tk["seat"] = seat
        if tk["fare_type"] != "advance" or diff > 0:
            tk["base_fare"] = base
            tk["discount"] = discount
            tk["price"] = price
        tk["exchanges"] += 1
        if amount != 0:
            self._add_tx(ticket_id, "exchange", amount)
        return {"success": True, "message": f"Ticket {ticket_id} exchanged to {nt['service']} coach {coach} seat {seat}",
                "amount_charged": max(amount, 0.0), "amount_refunded": max(-amount, 0.0)}

    def cancel_ticket(self, ticket_id: str) -> dict:
        """Cancel a booked ticket and refund according to its fare type's refund tiers.

        Args:
            ticket_id: ticket id.
        Rules: the refund percentage depends on hours left before the train leaves the ticket's origin
        (tiers per fare type); the admin fee is deducted from any refund; nothing is refunded after
        departure. If the train was cancelled by the operator the full price is refunded without fee.
        The seat reservation and any advance quota are released.
        """
        tk, err = self._ticket(ticket_id)
        if err:
            return err
        if tk["status"] != "booked":
            return self._err(f"Ticket {ticket_id} is {tk['status']}")
        t = self.trains[tk["train_id"]]
        ft = self.fare_types[tk["fare_type"]]
        hours = (self._departure_dt(t, tk["origin"]) - self._now()).total_seconds() / 3600.0
        if t["status"] == "cancelled":
            refund = tk["price"]
        else:
            if hours <= 0:
                return self._err("The train has already left; tickets cannot be refunded after departure")
            pct = 0
            for tier in ft["refund_tiers"]:
                if hours >= tier["min_hours_before"]:
                    pct = tier["refund_pct"]
                    break
            refund = _money(max(tk["price"] * pct / 100.0 - (ft["admin_fee"] if pct else 0.0), 0.0))
        t["coaches"][tk["coach"]]["seats"][tk["seat"]]["reservations"].pop(ticket_id, None)
        if tk["fare_type"] == "advance" and t["status"] != "cancelled":
            t["advance_quota"][tk["travel_class"]] = t["advance_quota"].get(tk["travel_class"], 0) + 1
        tk["status"] = "cancelled"
        tk["refund_amount"] = refund
        if refund > 0:
            self._add_tx(ticket_id, "refund", -refund)
        return {"success": True, "message": f"Ticket {ticket_id} cancelled", "refund": refund,
                "hours_before_departure": round(hours, 1)}

    def validate_ticket(self, ticket_id: str, train_id: str) -> dict:
        """On-board ticket inspection: marks a valid ticket as used.

        Args:
            ticket_id: ticket shown by the passenger.
            train_id: train the inspector is on.
        Rules: the ticket must be booked for this train, which must run today and not be cancelled.
        """
        tk, err = self._ticket(ticket_id)
        if err:
            return err
        if not isinstance(train_id, str) or train_id not in self.trains:
            return self._err(f"Train {train_id} not found")
        if tk["status"] == "used":
            return self._err(f"Ticket {ticket_id} has already been used")
        if tk["status"] != "booked":
            return self._err(f"Ticket {ticket_id} is {tk['status']} and not valid for travel")
        if tk["train_id"] != train_id:
            return self._err(f"Ticket {ticket_id} is not valid on this train (booked on {tk['train_id']})")
        t = self.trains[train_id]
        if t["status"] == "cancelled":
            return self._err("Train is cancelled")
        if t["date"] != self._now().date().isoformat():
            return self._err(f"Train {train_id} does not run today")
        tk["status"] = "used"
        return {"success": True, "message": f"Ticket {ticket_id} validated"}

    def record_delay(self, train_id: str, delay_minutes: int) -> dict:
        """Record the arrival delay (minutes) of a train at its final destination.

        Args:
            train_id: train id.
            delay_minutes: delay in whole minutes, 0-600.
        Rules: not for cancelled trains; a delay of 15 minutes or more marks the train "delayed",
        less marks it "on_time".
        """
        t = self.trains.get(train_id) if isinstance(train_id, str) else None
        if t is None:
            return self._err(f"Train {train_id} not found")
        if not isinstance(delay_minutes, int) or isinstance(delay_minutes, bool) or not 0 <= delay_minutes <= 600:
            return self._err("delay_minutes must be an integer from 0 to 600")
        if t["status"] == "cancelled":
            return self._err(f"Train {train_id} is cancelled")
        t["delay_minutes"] = delay_minutes
        t["status"] = "delayed" if delay_minutes >= 15 else "on_time"
        return {"success": True, "message": f"{t['service']} delay recorded as {delay_minutes} min", "status": t["status"]}

    def claim_delay_repay(self, ticket_id: str) -> dict:
        """Claim Delay Repay compensation for a journey on a delayed train.

        Args:
            ticket_id: used or booked ticket on the delayed train.
        Rules: delay of 15-29 min pays 25%, 30-59 min 50%, 60 min or more 100% of the ticket price;
        one claim per ticket; cancelled tickets cannot claim.
        """
        tk, err = self._ticket(ticket_id)
        if err:
            return err
        if tk["status"] not in ("booked", "used"):
            return self._err(f"Ticket {ticket_id} is {tk['status']}")
        if tk["delay_repay_claimed"]:
            return self._err(f"Delay Repay already claimed for {ticket_id}")
        t = self.trains[tk["train_id"]]
        pct = 0
        for minutes, p in DELAY_REPAY:
            if t["delay_minutes"] >= minutes:
                pct = p
                break
        if pct == 0:
            return self._err(f"Train delay of {t['delay_minutes']} min is below the 15 minute threshold")
        amount = _money(tk["price"] * pct / 100.0)
        tk["delay_repay_claimed"] = True
        self._add_tx(ticket_id, "delay_repay", -amount)
        return {"success": True, "message": f"Delay Repay of {amount:.2f} approved ({pct}%)", "amount": amount}

    def add_railcard(self, passenger_id: str, railcard_type: str, valid_from: str) -> dict:
        """Issue a one-year railcard to a passenger.

        Args:
            passenger_id: passenger id.
            railcard_type: "16-25", "senior", "disabled" or "veterans".
            valid_from: first day of validity YYYY-MM-DD (today or later, at most 30 days ahead).
        Rules: 16-25 requires age 16-25 and senior age 60+ on valid_from (from date_of_birth);
        a passenger may hold only one active railcard of each type.
        """
        p = self.passengers.get(passenger_id) if isinstance(passenger_id, str) else None
        if p is None:
            return self._err(f"Passenger {passenger_id} not found")
        rule = RAILCARD_RULES.get(railcard_type) if isinstance(railcard_type, str) else None
        if rule is None:
            return self._err(f"Unknown railcard type {railcard_type}")
        start = _date(valid_from)
        today = self._now().date()
        if start is None:
            return self._err("valid_from must be YYYY-MM-DD")
        if start < today or (start - today).days > 30:
            return self._err("valid_from must be between today and 30 days ahead")
        dob = _date(p["date_of_birth"])
        age = start.year - dob.year - ((start.month, start.day) < (dob.month, dob.day))
        if rule["min_age"] is not None and age < rule["min_age"]:
            return self._err(f"{railcard_type} railcard requires age {rule['min_age']}+ (passenger is {age})")
        if rule["max_age"] is not None and age > rule["max_age"]:
            return self._err(f"{railcard_type} railcard is limited to age {rule['max_age']} (passenger is {age})")
        for rid, rc in self.railcards.items():
            if rc["passenger_id"] == passenger_id and rc["type"] == railcard_type and rc["status"] == "active" and rc["valid_until"] >= valid_from:
                return self._err(f"Passenger already holds active {railcard_type} railcard {rid}")
        try:
            until = start.replace(year=start.year + 1) - datetime.timedelta(days=1)
        except ValueError:
            until = start + datetime.timedelta(days=364)
        rid = self._next_id("railcard", "RC-")
        self.railcards[rid] = {"passenger_id": passenger_id, "type": railcard_type, "discount_pct": rule["discount_pct"],
                               "valid_from": valid_from, "valid_until": until.isoformat(), "status": "active"}
        return {"success": True, "message": f"{railcard_type} railcard {rid} issued", "railcard_id": rid,
                "valid_until": until.isoformat()}
