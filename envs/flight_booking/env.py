"""Airline reservation system: flights with fare classes and seat maps, bookings,
seat selection, baggage, online check-in, rebooking with fare difference and cancellation."""

import copy
import datetime
import time
import uuid

BOOKING_CLOSE_MINUTES = 120
CHECKIN_OPENS_HOURS = 24
CHECKIN_CLOSES_MINUTES = 45
MAX_BAGS = 3
FIRST_EXTRA_BAG_FEE = 40.0
FURTHER_EXTRA_BAG_FEE = 60.0
FLIGHT_STATUSES = ["scheduled", "delayed", "boarding", "departed", "arrived", "cancelled"]
ALLOWED_TRANSITIONS = {
    "scheduled": ["delayed", "boarding", "cancelled"],
    "delayed": ["delayed", "boarding", "cancelled"],
    "boarding": ["departed", "delayed", "cancelled"],
    "departed": ["arrived"],
    "arrived": [],
    "cancelled": [],
}
OPEN_FLIGHT_STATUSES = ("scheduled", "delayed")


def _parse_dt(value):
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value)
    except ValueError:
        return None


def _money(x):
    return round(float(x) + 0.0, 2)


class FlightBooking:
    def __init__(self, init_config: dict):
        self.airports = {}
        self.fare_rules = {}
        self.seat_fees = {}
        self.flights = {}
        self.customers = {}
        self.bookings = {}
        self.payments = {}
        self.counters = {}
        self.now = ""

    # ------------------------------------------------------------------ helpers
    def _err(self, msg):
        return {"success": False, "error": msg}

    def _now(self):
        return _parse_dt(self.now) or datetime.datetime(2025, 1, 1)

    def _next_id(self, key, prefix):
        value = int(self.counters.get(key, 0)) + 1
        self.counters[key] = value
        return f"{prefix}{value}"

    def _add_payment(self, booking_id, kind, amount, method):
        pid = self._next_id("payment", "PAY")
        self.payments[pid] = {
            "booking_id": booking_id,
            "kind": kind,
            "amount": _money(amount),
            "method": method,
        }
        return pid

    def _release_seat(self, booking_id, booking):
        seat_no = booking.get("seat")
        flight = self.flights.get(booking.get("flight_id"), {})
        seat = flight.get("seat_map", {}).get(seat_no) if seat_no else None
        if seat is not None and seat.get("booking_id") == booking_id:
            seat["status"] = "available"
            seat["booking_id"] = None

    def _seat_fee(self, seat):
        if seat["cabin"] == "business":
            return 0.0
        return _money(self.seat_fees.get(seat["feature"], 0.0))

    def _get_booking(self, booking_id):
        if not isinstance(booking_id, str) or booking_id not in self.bookings:
            return None, self._err(f"Booking {booking_id} not found")
        return self.bookings[booking_id], None

    # ------------------------------------------------------------------ queries
    def list_airports(self) -> dict:
        """List every airport served, keyed by IATA code, with name, city, country and timezone."""
        return {"success": True, "data": copy.deepcopy(self.airports)}

    def get_fare_rules(self) -> dict:
        """List the airline's fare families (cabin, refundability, change and cancel fees, free bags,
        free seat selection) and the seat selection fees by seat feature."""
        return {"success": True, "data": copy.deepcopy({"fare_rules": self.fare_rules, "seat_fees": self.seat_fees})}

    def search_flights(self, origin: str, destination: str, date: str) -> dict:
        """Search flights between two airports departing on a date.

        Args:
            origin: IATA code of the departure airport, e.g. "CPH".
            destination: IATA code of the arrival airport.
            date: departure date as YYYY-MM-DD.
        Rules: both airports must exist and differ; cancelled flights are excluded.
        Returns one entry per flight with its status and the lowest fare still on sale.
        """
        if not isinstance(origin, str) or origin not in self.airports:
            return self._err(f"Unknown origin airport {origin}")
        if not isinstance(destination, str) or destination not in self.airports:
            return self._err(f"Unknown destination airport {destination}")
        if origin == destination:
            return self._err("Origin and destination must differ")
        try:
            day = datetime.date.fromisoformat(date) if isinstance(date, str) else None
        except ValueError:
            day = None
        if day is None:
            return self._err("date must be YYYY-MM-DD")
        results = []
        for fid, f in sorted(self.flights.items(), key=lambda kv: kv[1]["departure"]):
            if f["origin"] != origin or f["destination"] != destination or f["status"] == "cancelled":
                continue
            dep = _parse_dt(f["departure"])
            if dep is None or dep.date() != day:
                continue
            open_fares = {c: fc["price"] for c, fc in f["fare_classes"].items() if fc["seats_sold"] < fc["seats_total"]}
            results.append({
                "flight_id": fid,
                "flight_no": f["flight_no"],
                "departure": f["departure"],
                "arrival": f["arrival"],
                "status": f["status"],
                "lowest_fare": min(open_fares.values()) if open_fares else None,
            })
        return {"success": True, "data": results}

    def get_flight(self, flight_id: str) -> dict:
        """Get a flight's schedule, status and fare classes with seats left (seat map excluded).

        Args:
            flight_id: flight id, e.g. "FL-SK1423-0411".
        """
        f = self.flights.get(flight_id) if isinstance(flight_id, str) else None
        if f is None:
            return self._err(f"Flight {flight_id} not found")
        fares = {}
        for code, fc in f["fare_classes"].items():
            fares[code] = dict(self.fare_rules.get(code, {}), **fc, seats_left=fc["seats_total"] - fc["seats_sold"])
        data = {k: v for k, v in f.items() if k not in ("seat_map", "fare_classes")}
        data["flight_id"] = flight_id
        data["fare_classes"] = fares
        return {"success": True, "data": data}

    def get_seat_map(self, flight_id: str, cabin: str = None) -> dict:
        """List the available seats of a flight, optionally only one cabin.

        Args:
            flight_id: flight id.
            cabin: optional cabin filter, "business" or "economy".
        """
        f = self.flights.get(flight_id) if isinstance(flight_id, str) else None
        if f is None:
            return self._err(f"Flight {flight_id} not found")
        if cabin is not None and cabin not in ("business", "economy"):
            return self._err("cabin must be 'business' or 'economy'")
        seats = []
        for no, s in f["seat_map"].items():
            if s["status"] != "available" or (cabin and s["cabin"] != cabin):
                continue
            seats.append({"seat": no, "cabin": s["cabin"], "feature": s["feature"], "seat_fee": self._seat_fee(s)})
        return {"success": True, "data": seats}

    def get_booking(self, booking_id: str) -> dict:
        """Get a booking with its flight summary and total paid so far.

        Args:
            booking_id: booking id, e.g. "BK1001".
        """
        b, err = self._get_booking(booking_id)
        if err:
            return err
        f = self.flights.get(b["flight_id"], {})
        data = dict(b, booking_id=booking_id, total_paid=_money(b["fare_paid"] + b["fees_paid"]),
                    flight={"flight_no": f.get("flight_no"), "origin": f.get("origin"),
                            "destination": f.get("destination"), "departure": f.get("departure"),
                            "status": f.get("status")})
        return {"success": True, "data": data}

    def get_customer(self, customer_id: str) -> dict:
        """Get a customer's profile, loyalty tier, travel credit and booking ids.

        Args:
            customer_id: customer id, e.g. "C001".
        """
        c = self.customers.get(customer_id) if isinstance(customer_id, str) else None
        if c is None:
            return self._err(f"Customer {customer_id} not found")
        ids = sorted(bid for bid, b in self.bookings.items() if b["customer_id"] == customer_id)
        return {"success": True, "data": dict(c, customer_id=customer_id, booking_ids=ids)}

    # ------------------------------------------------------------------ updates
    def create_booking(self, customer_id: str, flight_id: str, fare_class: str, passenger_name: str,
                       use_travel_credit: bool = False) -> dict:
        """Book one passenger on a flight in a fare class and take payment.

        Args:
            customer_id: paying customer.
            flight_id: flight to book.
            fare_class: fare class code on that flight (e.g. "J", "Y", "M", "G").
            passenger_name: full name of the traveller.
            use_travel_credit: apply the customer's travel credit before charging the card.
        Rules: flight must be scheduled or delayed and depart at least 2 hours from now; the fare
        class must have seats left; the same passenger cannot hold two active bookings on one
        flight. A 6-character record locator is generated.
        """
        c = self.customers.get(customer_id) if isinstance(customer_id, str) else None
        if c is None:
            return self._err(f"Customer {customer_id} not found")
        f = self.flights.get(flight_id) if isinstance(flight_id, str) else None
        if f is None:
            return self._err(f"Flight {flight_id} not found")
        if f["status"] not in OPEN_FLIGHT_STATUSES:
            return self._err(f"Flight {flight_id} is {f['status']} and cannot be booked")
        dep = _parse_dt(f["departure"])
        if dep - self._now() < datetime.timedelta(minutes=BOOKING_CLOSE_MINUTES):
            return self._err("Booking closes 2 hours before departure")
        if not isinstance(fare_class, str) or fare_class not in f["fare_classes"]:
            return self._err(f"Fare class {fare_class} not offered on {flight_id}")
        fc = f["fare_classes"][fare_class]
        if fc["seats_sold"] >= fc["seats_total"]:
            return self._err(f"Fare class {fare_class} is sold out on {flight_id}")
        if not isinstance(passenger_name, str) or len(passenger_name.strip()) < 3:
            return self._err("passenger_name must be a full name")
        if not isinstance(use_travel_credit, bool):
            return self._err("use_travel_credit must be a boolean")
        name = " ".join(passenger_name.split())
        for b in self.bookings.values():
            if (b["flight_id"] == flight_id and b["status"] in ("confirmed", "checked_in")
                    and b["passenger_name"].lower() == name.lower()):
                return self._err(f"{name} already holds an active booking on {flight_id}")
        price = _money(fc["price"])
        credit_used = 0.0
        if use_travel_credit:
            credit_used = _money(min(c["travel_credit"], price))
        card_amount = _money(price - credit_used)
        booking_id = self._next_id("booking", "BK")
        locator = uuid.uuid4().hex[:6].upper()
        self.bookings[booking_id] = {
            "customer_id": customer_id,
            "record_locator": locator,
            "passenger_name": name,
            "flight_id": flight_id,
            "fare_class": fare_class,
            "status": "confirmed",
            "seat": None,
            "bags": 0,
            "fare_paid": price,
            "fees_paid": 0.0,
            "changes": 0,
            "boarding_group": None,
            "checked_in_at": None,
            "refund_amount": None,
        }
        fc["seats_sold"] += 1
        if credit_used > 0:
            c["travel_credit"] = _money(c["travel_credit"] - credit_used)
            self._add_payment(booking_id, "fare", credit_used, "travel_credit")
        if card_amount > 0:
            self._add_payment(booking_id, "fare", card_amount, "card")
        return {"success": True, "message": f"Booked {name} on {f['flight_no']} in fare class {fare_class}",
                "booking_id": booking_id, "record_locator": locator,
                "charged_to_card": card_amount, "travel_credit_used": credit_used}

    def select_seat(self, booking_id: str, seat: str) -> dict:
        """Assign or change the seat of a booking.

        Args:
            booking_id: booking id.
            seat: seat number from the seat map, e.g. "14C".
        Rules: booking must be confirmed or checked in and the flight still open; the seat must be
        available and in the cabin of the fare class. Seat fees apply unless the fare class includes
        free seat selection or the customer is gold tier. The previous seat is released.
        """
        b, err = self._get_booking(booking_id)
        if err:
            return err
        if b["status"] not in ("confirmed", "checked_in"):
            return self._err(f"Booking {booking_id} is {b['status']}")
        f = self.flights[b["flight_id"]]
        if f["status"] not in OPEN_FLIGHT_STATUSES:
            return self._err(f"Seat changes are closed: flight is {f['status']}")
        if not isinstance(seat, str) or seat not in f["seat_map"]:
            return self._err(f"Seat {seat} does not exist on {f['flight_no']}")
        s = f["seat_map"][seat]
        if b["seat"] == seat:
            return self._err(f"Seat {seat} is already assigned to this booking")
        if s["status"] != "available":
            return self._err(f"Seat {seat} is not available")
        rule = self.fare_rules[b["fare_class"]]
        if s["cabin"] != rule["cabin"]:
            return self._err(f"Seat {seat} is in {s['cabin']} but the fare is {rule['cabin']}")
        tier = self.customers.get(b["customer_id"], {}).get("loyalty_tier")
        fee = 0.0 if (rule["free_seat_selection"] or tier == "gold") else self._seat_fee(s)
        self._release_seat(booking_id, b)
        s["status"] = "occupied"
        s["booking_id"] = booking_id
        b["seat"] = seat
        if fee > 0:
            b["fees_paid"] = _money(b["fees_paid"] + fee)
            self._add_payment(booking_id, "seat_fee", fee, "card")
        return {"success": True, "message": f"Seat {seat} assigned to {booking_id}", "seat_fee": fee}

    def add_checked_bags(self, booking_id: str, count: int) -> dict:
        """Add checked bags to a booking, charging for bags beyond the fare allowance.

        Args:
            booking_id: booking id.
            count: number of bags to add (1-3).
        Rules: at most 3 checked bags per passenger; allowance is the fare class free_bags plus one
        for gold customers; the first bag over the allowance costs 40.00, each further one 60.00.
        Not possible once the flight is boarding or later, or for cancelled bookings.
        """
        b, err = self._get_booking(booking_id)
        if err:
            return err
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            return self._err("count must be a positive integer")
        if b["status"] not in ("confirmed", "checked_in"):
            return self._err(f"Booking {booking_id} is {b['status']}")
        f = self.flights[b["flight_id"]]
        if f["status"] not in OPEN_FLIGHT_STATUSES:
            return self._err(f"Baggage changes are closed: flight is {f['status']}")
        if b["bags"] + count > MAX_BAGS:
            return self._err(f"At most {MAX_BAGS} checked bags per passenger ({b['bags']} already)")
        allowance = self.fare_rules[b["fare_class"]]["free_bags"]
        if self.customers.get(b["customer_id"], {}).get("loyalty_tier") == "gold":
            allowance += 1
        fee = 0.0
        for n in range(b["bags"] + 1, b["bags"] + count + 1):
            if n > allowance:
                fee += FIRST_EXTRA_BAG_FEE if n == allowance + 1 else FURTHER_EXTRA_BAG_FEE
        fee = _money(fee)
        b["bags"] += count
        if fee > 0:
            b["fees_paid"] = _money(b["fees_paid"] + fee)
            self._add_payment(booking_id, "baggage", fee, "card")
        return {"success": True, "message": f"{count} bag(s) added to {booking_id}", "bags": b["bags"],
                "baggage_fee": fee}

    def check_in(self, booking_id: str) -> dict:
        """Check a passenger in online and assign a boarding group.

        Args:
            booking_id: booking id.
        Rules: booking must be confirmed; flight scheduled or delayed; check-in opens 24 hours and
        closes 45 minutes before departure; a seat must be selected first. Boarding group 1 for
        business, 2 for gold members, 3 otherwise. Records the check-in timestamp.
        """
        b, err = self._get_booking(booking_id)
        if err:
            return err
        if b["status"] == "checked_in":
            return self._err(f"Booking {booking_id} is already checked in")
        if b["status"] != "confirmed":
            return self._err(f"Booking {booking_id} is {b['status']}")
        f = self.flights[b["flight_id"]]
        if f["status"] not in OPEN_FLIGHT_STATUSES:
            return self._err(f"Check-in is closed: flight is {f['status']}")
        dep = _parse_dt(f["departure"])
        now = self._now()
        if dep - now > datetime.timedelta(hours=CHECKIN_OPENS_HOURS):
            return self._err("Online check-in opens 24 hours before departure")
        if dep - now < datetime.timedelta(minutes=CHECKIN_CLOSES_MINUTES):
            return self._err("Online check-in closed 45 minutes before departure")
        if not b["seat"]:
            return self._err("Select a seat before checking in")
        cabin = self.fare_rules[b["fare_class"]]["cabin"]
        tier = self.customers.get(b["customer_id"], {}).get("loyalty_tier")
        group = 1 if cabin == "business" else (2 if tier == "gold" else 3)
        b["status"] = "checked_in"
        b["boarding_group"] = group
        b["checked_in_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time()))
        return {"success": True, "message": f"{b['passenger_name']} checked in on {f['flight_no']} seat {b['seat']}",
                "boarding_group": group}

    def change_flight(self, booking_id: str, new_flight_id: str, new_fare_class: str) -> dict:
        """Rebook a confirmed booking onto another flight on the same route, settling the fare difference.

        Args:
            booking_id: booking to change.
            new_flight_id: flight to move to (same origin and destination).
            new_fare_class: fare class on the new flight.
        Rules: only confirmed (not checked-in) bookings on changeable fares; the new flight must be
        open, depart at least 2 hours from now and have seats in the fare class. The old fare class's
        change fee applies, and a higher fare is charged to the card while a lower fare is returned
        as travel credit. If the original flight was cancelled by the airline the change is free and
        no fare difference is collected. The old seat is released and must be selected again.
        """
        b, err = self._get_booking(booking_id)
        if err:
            return err
        if b["status"] != "confirmed":
            return self._err(f"Only confirmed bookings can be changed (booking is {b['status']})")
        old_f = self.flights[b["flight_id"]]
        old_fc = old_f["fare_classes"][b["fare_class"]]
        old_rule = self.fare_rules[b["fare_class"]]
        disrupted = old_f["status"] == "cancelled"
        if not disrupted and old_f["status"] not in OPEN_FLIGHT_STATUSES:
            return self._err(f"Original flight is {old_f['status']}; it can no longer be changed")
        if not disrupted and not old_rule["changeable"]:
            return self._err(f"Fare class {b['fare_class']} does not allow changes")
        nf = self.flights.get(new_flight_id) if isinstance(new_flight_id, str) else None
        if nf is None:
            return self._err(f"Flight {new_flight_id} not found")
        if new_flight_id == b["flight_id"]:
            return self._err("New flight must differ from the current flight")
        if nf["origin"] != old_f["origin"] or nf["destination"] != old_f["destination"]:
            return self._err("New flight must serve the same origin and destination")
        if nf["status"] not in OPEN_FLIGHT_STATUSES:
            return self._err(f"Flight {new_flight_id} is {nf['status']}")
        if _parse_dt(nf["departure"]) - self._now() < datetime.timedelta(minutes=BOOKING_CLOSE_MINUTES):
            return self._err("New flight departs within 2 hours and is closed for sale")
        if not isinstance(new_fare_class, str) or new_fare_class not in nf["fare_classes"]:
            return self._err(f"Fare class {new_fare_class} not offered on {new_flight_id}")
        nfc = nf["fare_classes"][new_fare_class]
        if nfc["seats_sold"] >= nfc["seats_total"]:
            return self._err(f"Fare class {new_fare_class} is sold out on {new_flight_id}")
        if disrupted:
            fee, diff = 0.0, 0.0
            new_fare_paid = b["fare_paid"]
        else:
            fee = _money(old_rule["change_fee"])
            diff = _money(nfc["price"] - b["fare_paid"])
            new_fare_paid = _money(nfc["price"])
        collected = _money(fee + max(diff, 0.0))
        credit = _money(-diff) if diff < 0 else 0.0
        self._release_seat(booking_id, b)
        old_fc["seats_sold"] -= 1
        nfc["seats_sold"] += 1
        b["flight_id"] = new_flight_id
        b["fare_class"] = new_fare_class
        b["seat"] = None
        b["fare_paid"] = new_fare_paid
        b["changes"] += 1
        if fee > 0:
            b["fees_paid"] = _money(b["fees_paid"] + fee)
        if collected > 0:
            self._add_payment(booking_id, "change", collected, "card")
        if credit > 0:
            cust = self.customers[b["customer_id"]]
            cust["travel_credit"] = _money(cust["travel_credit"] + credit)
        return {"success": True, "message": f"Booking {booking_id} moved to {nf['flight_no']} ({new_fare_class})",
                "change_fee": fee, "fare_difference": diff, "charged": collected, "travel_credit_issued": credit}

    def cancel_booking(self, booking_id: str) -> dict:
        """Cancel a booking before departure and settle the refund.

        Args:
            booking_id: booking to cancel.
        Rules: only confirmed or checked-in bookings whose flight has not departed. If the airline
        cancelled the flight, fare and fees are refunded in full to the card. Otherwise refundable
        fares refund the fare minus the cancel fee to the card; non-refundable fares return the fare
        minus the cancel fee as travel credit (never below zero). Fees are not refunded. The seat and
        the fare-class inventory are released.
        """
        b, err = self._get_booking(booking_id)
        if err:
            return err
        if b["status"] not in ("confirmed", "checked_in"):
            return self._err(f"Booking {booking_id} is already {b['status']}")
        f = self.flights[b["flight_id"]]
        if f["status"] in ("departed", "arrived", "boarding"):
            return self._err(f"Flight is {f['status']}; the booking can no longer be cancelled")
        fc = f["fare_classes"][b["fare_class"]]
        rule = self.fare_rules[b["fare_class"]]
        refund_card, credit = 0.0, 0.0
        if f["status"] == "cancelled":
            refund_card = _money(b["fare_paid"] + b["fees_paid"])
        elif rule["refundable"]:
            refund_card = _money(max(b["fare_paid"] - rule["cancel_fee"], 0.0))
        elif rule["cancel_fee"] is not None:
            credit = _money(max(b["fare_paid"] - rule["cancel_fee"], 0.0))
        self._release_seat(booking_id, b)
        fc["seats_sold"] -= 1
        b["status"] = "cancelled"
        b["refund_amount"] = _money(refund_card + credit)
        if refund_card > 0:
            self._add_payment(booking_id, "refund", -refund_card, "card")
        if credit > 0:
            cust = self.customers[b["customer_id"]]
            cust["travel_credit"] = _money(cust["travel_credit"] + credit)
            self._add_payment(booking_id, "refund", -credit, "travel_credit")
        return {"success": True, "message": f"Booking {booking_id} cancelled",
                "refunded_to_card": refund_card, "travel_credit_issued": credit}

    def update_flight_status(self, flight_id: str, status: str, new_departure: str = None,
                             new_arrival: str = None) -> dict:
        """Operations update of a flight's status (delay, boarding, departure, arrival, cancellation).

        Args:
            flight_id: flight id.
            status: one of scheduled, delayed, boarding, departed, arrived, cancelled.
            new_departure: required for "delayed": new departure time (YYYY-MM-DDTHH:MM), later than the current one.
            new_arrival: optional new arrival time for a delay; must be after the new departure.
        Rules: transitions follow scheduled/delayed -> boarding -> departed -> arrived; cancelled and
        arrived are final.
        """
        f = self.flights.get(flight_id) if isinstance(flight_id, str) else None
        if f is None:
            return self._err(f"Flight {flight_id} not found")
        if status not in FLIGHT_STATUSES:
            return self._err(f"Unknown status {status}")
        if status not in ALLOWED_TRANSITIONS[f["status"]]:
            return self._err(f"Cannot change flight status from {f['status']} to {status}")
        if status == "delayed":
            nd = _parse_dt(new_departure)
            if nd is None:
                return self._err("new_departure (YYYY-MM-DDTHH:MM) is required for a delay")
            if nd <= _parse_dt(f["departure"]):
                return self._err("new_departure must be later than the current departure")
            if new_arrival is not None:
                na = _parse_dt(new_arrival)
                if na is None or na <= nd:
                    return self._err("new_arrival must be a valid time after new_departure")
            else:
                shift = nd - _parse_dt(f["departure"])
                na = _parse_dt(f["arrival"]) + shift
            f["departure"] = nd.strftime("%Y-%m-%dT%H:%M")
            f["arrival"] = na.strftime("%Y-%m-%dT%H:%M")
        f["status"] = status
        return {"success": True, "message": f"Flight {f['flight_no']} is now {status}",
                "departure": f["departure"], "arrival": f["arrival"]}
