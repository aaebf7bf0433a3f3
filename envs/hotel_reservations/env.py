"""Hotel property management system for a small hotel group: room types, rate plans,
reservations with availability control, room assignment, check-in, folio charges and
check-out, and cancellation policies."""

import copy
import datetime

MAX_NIGHTS = 30
ROOM_STATUSES = ["vacant_clean", "vacant_dirty", "occupied", "out_of_order"]
CHARGE_CATEGORIES = ["restaurant", "bar", "minibar", "room_service", "spa", "laundry", "parking"]
MAX_SINGLE_CHARGE = 2000.0
ACTIVE = ("confirmed", "checked_in")


def _date(value):
    if not isinstance(value, str):
        return None
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        return None


def _money(x):
    return round(float(x) + 0.0, 2)


class HotelReservations:
    def __init__(self, init_config: dict):
        self.properties = {}
        self.room_types = {}
        self.rate_plans = {}
        self.rooms = {}
        self.guests = {}
        self.reservations = {}
        self.folios = {}
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

    def _today(self):
        return self._now().date()

    def _next_id(self, key, prefix):
        value = int(self.counters.get(key, 0)) + 1
        self.counters[key] = value
        return f"{prefix}{value}"

    def _nightly_rate(self, room_type, plan, adults):
        rate = room_type["base_rate"] * (1 - plan["discount_pct"] / 100.0)
        if plan["breakfast_included"]:
            rate += plan["breakfast_per_person"] * adults
        return _money(rate)

    def _stay_cost(self, prop, nightly, nights, adults):
        room = _money(nightly * nights)
        tax = _money(room * prop["tax_rate"])
        city = _money(prop["city_tax_per_person_night"] * adults * nights)
        return room, tax, city

    def _rooms_free(self, room_type_id, arrival, departure, exclude=None):
        total = sum(1 for r in self.rooms.values() if r["room_type_id"] == room_type_id and r["status"] != "out_of_order")
        worst = total
        day = arrival
        while day < departure:
            iso = day.isoformat()
            used = sum(1 for rid, r in self.reservations.items()
                       if rid != exclude and r["room_type_id"] == room_type_id and r["status"] in ACTIVE
                       and r["arrival"] <= iso < r["departure"])
            worst = min(worst, total - used)
            day += datetime.timedelta(days=1)
        return worst

    def _folio_balance(self, folio):
        charges = sum(c["amount"] for c in folio["charges"].values())
        paid = sum(p["amount"] for p in folio["payments"].values())
        return _money(charges - paid)

    def _add_line(self, folio, section, prefix, record):
        n = len(folio[section]) + 1
        key = f"{prefix}{n}"
        while key in folio[section]:
            n += 1
            key = f"{prefix}{n}"
        folio[section][key] = record
        return key

    def _res(self, reservation_id):
        if not isinstance(reservation_id, str) or reservation_id not in self.reservations:
            return None, self._err(f"Reservation {reservation_id} not found")
        return self.reservations[reservation_id], None

    def _validate_dates(self, arrival, departure):
        a, d = _date(arrival), _date(departure)
        if a is None or d is None:
            return None, None, "arrival and departure must be dates YYYY-MM-DD"
        if d <= a:
            return None, None, "departure must be after arrival"
        if (d - a).days > MAX_NIGHTS:
            return None, None, f"stays are limited to {MAX_NIGHTS} nights"
        if a < self._today():
            return None, None, "arrival cannot be in the past"
        return a, d, None

    # ------------------------------------------------------------------ queries
    def list_properties(self) -> dict:
        """List the hotels of the group with city, stars, check-in/out times and tax settings."""
        return {"success": True, "data": copy.deepcopy(self.properties)}

    def check_availability(self, property_id: str, arrival: str, departure: str, adults: int = 2) -> dict:
        """Show bookable room types and nightly prices per rate plan for a stay.

        Args:
            property_id: hotel id, e.g. "HTL-CPH".
            arrival: arrival date YYYY-MM-DD (not in the past).
            departure: departure date YYYY-MM-DD (1-30 nights after arrival).
            adults: number of adults (1-4); room types with a lower max occupancy are excluded.
        """
        if not isinstance(property_id, str) or property_id not in self.properties:
            return self._err(f"Property {property_id} not found")
        a, d, msg = self._validate_dates(arrival, departure)
        if msg:
            return self._err(msg)
        if not isinstance(adults, int) or isinstance(adults, bool) or not 1 <= adults <= 4:
            return self._err("adults must be an integer from 1 to 4")
        out = []
        for rtid, rt in sorted(self.room_types.items()):
            if rt["property_id"] != property_id or rt["max_occupancy"] < adults:
                continue
            free = self._rooms_free(rtid, a, d)
            if free <= 0:
                continue
            prices = {pid: self._nightly_rate(rt, p, adults) for pid, p in sorted(self.rate_plans.items())}
            out.append({"room_type_id": rtid, "name": rt["name"], "rooms_left": free, "nightly_rate_by_plan": prices})
        return {"success": True, "data": {"nights": (d - a).days, "room_types": out}}

    def get_reservation(self, reservation_id: str) -> dict:
        """Get a reservation with its stay details, status, room and folio id.

        Args:
            reservation_id: reservation id, e.g. "R5001".
        """
        r, err = self._res(reservation_id)
        if err:
            return err
        return {"success": True, "data": dict(r, reservation_id=reservation_id)}

    def get_folio(self, reservation_id: str) -> dict:
        """Get the guest folio (charges, payments and balance) of a reservation.

        Args:
            reservation_id: reservation id.
        """
        r, err = self._res(reservation_id)
        if err:
            return err
        folio = self.folios.get(r["folio_id"])
        if folio is None:
            return self._err(f"Folio {r['folio_id']} not found")
        return {"success": True, "data": dict(copy.deepcopy(folio), folio_id=r["folio_id"], balance=self._folio_balance(folio))}

    def get_guest(self, guest_id: str) -> dict:
        """Get a guest profile with loyalty tier, completed stays and reservation ids.

        Args:
            guest_id: guest id, e.g. "G001".
        """
        g = self.guests.get(guest_id) if isinstance(guest_id, str) else None
        if g is None:
            return self._err(f"Guest {guest_id} not found")
        ids = sorted(rid for rid, r in self.reservations.items() if r["guest_id"] == guest_id)
        return {"success": True, "data": dict(g, guest_id=guest_id, reservation_ids=ids)}

    # ------------------------------------------------------------------ updates
    def create_reservation(self, guest_id: str, property_id: str, room_type_id: str, rate_plan_id: str,
                           arrival: str, departure: str, adults: int) -> dict:
        """Create a reservation and open its folio.

        Args:
            guest_id: guest making the booking.
            property_id: hotel id.
            room_type_id: room type of that hotel.
            rate_plan_id: rate plan code (e.g. BAR, NRF, BB).
            arrival: arrival date YYYY-MM-DD, not in the past.
            departure: departure date YYYY-MM-DD, 1-30 nights later.
            adults: number of adults, within the room type's max occupancy.
        Rules: a room of the type must be free on every night of the stay. Prepaid rate plans charge
        the full stay (room, tax and city tax) as a deposit when booking.
        """
        g = self.guests.get(guest_id) if isinstance(guest_id, str) else None
        if g is None:
            return self._err(f"Guest {guest_id} not found")
        prop = self.properties.get(property_id) if isinstance(property_id, str) else None
        if prop is None:
            return self._err(f"Property {property_id} not found")
        rt = self.room_types.get(room_type_id) if isinstance(room_type_id, str) else None
        if rt is None or rt["property_id"] != property_id:
            return self._err(f"Room type {room_type_id} does not exist at {property_id}")
        plan = self.rate_plans.get(rate_plan_id) if isinstance(rate_plan_id, str) else None
        if plan is None:
            return self._err(f"Rate plan {rate_plan_id} not found")
        a, d, msg = self._validate_dates(arrival, departure)
        if msg:
            return self._err(msg)
        if not isinstance(adults, int) or isinstance(adults, bool) or adults < 1:
            return self._err("adults must be a positive integer")
        if adults > rt["max_occupancy"]:
            return self._err(f"{rt['name']} sleeps at most {rt['max_occupancy']}")
        if self._rooms_free(room_type_id, a, d) <= 0:
            return self._err(f"No {rt['name']} available for {arrival} to {departure}")
        nights = (d - a).days
        nightly = self._nightly_rate(rt, plan, adults)
        room, tax, city = self._stay_cost(prop, nightly, nights, adults)
        rid = self._next_id("reservation", "R")
        fid = self._next_id("folio", "F")
        deposit = _money(room + tax + city) if plan["prepaid"] else 0.0
        payments = {}
        if deposit > 0:
            payments["P1"] = {"date": self._today().isoformat(), "method": "card", "amount": deposit, "note": "prepaid deposit"}
        self.folios[fid] = {"reservation_id": rid, "status": "open", "charges": {}, "payments": payments}
        self.reservations[rid] = {
            "guest_id": guest_id, "property_id": property_id, "room_type_id": room_type_id,
            "rate_plan_id": rate_plan_id, "arrival": arrival, "departure": departure, "nights": nights,
            "adults": adults, "nightly_rate": nightly, "status": "confirmed", "room_no": None,
            "deposit_paid": deposit, "folio_id": fid, "cancellation_fee": None,
        }
        return {"success": True, "message": f"Reservation {rid} confirmed for {g['name']}",
                "reservation_id": rid, "nightly_rate": nightly, "estimated_total": _money(room + tax + city),
                "deposit_charged": deposit}

    def modify_stay(self, reservation_id: str, arrival: str, departure: str) -> dict:
        """Change the dates of a confirmed reservation (same room type and rate plan).

        Args:
            reservation_id: reservation id.
            arrival: new arrival date YYYY-MM-DD.
            departure: new departure date YYYY-MM-DD.
        Rules: only confirmed (not checked-in) reservations on non-prepaid rate plans; availability is
        rechecked for the new nights; an assigned room is kept if no other active reservation holds it
        on the new dates, otherwise the assignment is cleared.
        """
        r, err = self._res(reservation_id)
        if err:
            return err
        if r["status"] != "confirmed":
            return self._err(f"Reservation {reservation_id} is {r['status']}")
        if self.rate_plans[r["rate_plan_id"]]["prepaid"]:
            return self._err("Prepaid non-refundable reservations cannot be modified")
        a, d, msg = self._validate_dates(arrival, departure)
        if msg:
            return self._err(msg)
        if arrival == r["arrival"] and departure == r["departure"]:
            return self._err("The new dates are the same as the current ones")
        if self._rooms_free(r["room_type_id"], a, d, exclude=reservation_id) <= 0:
            return self._err(f"No {self.room_types[r['room_type_id']]['name']} available for the new dates")
        kept = r["room_no"]
        if kept:
            for oid, o in self.reservations.items():
                if (oid != reservation_id and o["room_no"] == kept and o["status"] in ACTIVE
                        and o["arrival"] < departure and arrival < o["departure"]):
                    kept = None
                    break
        r["arrival"] = arrival
        r["departure"] = departure
        r["nights"] = (d - a).days
        if r["room_no"] != kept:
            r["room_no"] = kept
        return {"success": True, "message": f"Reservation {reservation_id} now {arrival} to {departure}",
                "nights": r["nights"], "room_no": kept}

    def cancel_reservation(self, reservation_id: str) -> dict:
        """Cancel a confirmed reservation applying its rate plan's cancellation policy.

        Args:
            reservation_id: reservation id.
        Rules: free when cancelled at least free_cancel_hours before arrival day's check-in time;
        otherwise penalty_nights (at most the stay length) x nightly rate is charged to the card on file. Prepaid (non-refundable)
        plans keep the deposit in full. The folio is closed.
        """
        r, err = self._res(reservation_id)
        if err:
            return err
        if r["status"] != "confirmed":
            return self._err(f"Only confirmed reservations can be cancelled (status {r['status']})")
        plan = self.rate_plans[r["rate_plan_id"]]
        prop = self.properties[r["property_id"]]
        folio = self.folios[r["folio_id"]]
        checkin_at = datetime.datetime.fromisoformat(f"{r['arrival']}T{prop['check_in_time']}")
        hours_before = (checkin_at - self._now()).total_seconds() / 3600.0
        today = self._today().isoformat()
        if plan["prepaid"]:
            fee = r["deposit_paid"]
            label = "Non-refundable stay retained"
        elif plan["free_cancel_hours"] is not None and hours_before >= plan["free_cancel_hours"]:
            fee = 0.0
            label = None
        else:
            fee = _money(r["nightly_rate"] * min(plan["penalty_nights"], r["nights"]))
            label = "Late cancellation fee"
        if fee > 0:
            self._add_line(folio, "charges", "C", {"date": today, "category": "cancellation", "description": label, "amount": fee})
            if not plan["prepaid"]:
                self._add_line(folio, "payments", "P", {"date": today, "method": "card_on_file", "amount": fee, "note": "cancellation fee"})
        folio["status"] = "closed"
        r["status"] = "cancelled"
        r["room_no"] = None
        r["cancellation_fee"] = fee
        return {"success": True, "message": f"Reservation {reservation_id} cancelled", "cancellation_fee": fee,
                "hours_before_arrival": round(hours_before, 1)}

    def assign_room(self, reservation_id: str, room_no: str) -> dict:
        """Assign a specific room to a confirmed reservation.

        Args:
            reservation_id: reservation id.
            room_no: room number id, e.g. "CPH-204".
        Rules: the room must belong to the reservation's room type and not be out of order, and must
        not be assigned to another active reservation overlapping these dates.
        """
        r, err = self._res(reservation_id)
        if err:
            return err
        if r["status"] != "confirmed":
            return self._err(f"Rooms can only be assigned to confirmed reservations (status {r['status']})")
        room = self.rooms.get(room_no) if isinstance(room_no, str) else None
        if room is None:
            return self._err(f"Room {room_no} not found")
        if room["room_type_id"] != r["room_type_id"]:
            return self._err(f"Room {room_no} is a {self.room_types[room['room_type_id']]['name']}, not the booked room type")
        if room["status"] == "out_of_order":
            return self._err(f"Room {room_no} is out of order")
        for oid, o in self.reservations.items():
            if (oid != reservation_id and o["room_no"] == room_no and o["status"] in ACTIVE
                    and o["arrival"] < r["departure"] and r["arrival"] < o["departure"]):
                return self._err(f"Room {room_no} is already assigned to {oid} for overlapping dates")
        if r["room_no"] == room_no:
            return self._err(f"Room {room_no} is already assigned to {reservation_id}")
        r["room_no"] = room_no
        return {"success": True, "message": f"Room {room_no} assigned to {reservation_id}"}

    def check_in(self, reservation_id: str) -> dict:
        """Check a guest in on the arrival date.

        Args:
            reservation_id: reservation id.
        Rules: reservation confirmed, arrival date equals today's business date, a room assigned, and
        that room vacant and clean. The room becomes occupied by the reservation.
        """
        r, err = self._res(reservation_id)
        if err:
            return err
        if r["status"] != "confirmed":
            return self._err(f"Reservation {reservation_id} is {r['status']}")
        if r["arrival"] != self._today().isoformat():
            return self._err(f"Arrival date is {r['arrival']}; check-in is only possible on the arrival date")
        if not r["room_no"]:
            return self._err("Assign a room before check-in")
        room = self.rooms[r["room_no"]]
        if room["status"] != "vacant_clean":
            return self._err(f"Room {r['room_no']} is {room['status']}")
        r["status"] = "checked_in"
        room["status"] = "occupied"
        room["reservation_id"] = reservation_id
        return {"success": True, "message": f"Checked in to room {r['room_no']}"}

    def post_charge(self, reservation_id: str, category: str, amount: float, description: str) -> dict:
        """Post an incidental charge (restaurant, bar, minibar, spa...) to an in-house guest's folio.

        Args:
            reservation_id: reservation id of a checked-in guest.
            category: one of restaurant, bar, minibar, room_service, spa, laundry, parking.
            amount: positive amount up to 2000.00.
            description: short text shown on the folio.
        """
        r, err = self._res(reservation_id)
        if err:
            return err
        if r["status"] != "checked_in":
            return self._err("Charges can only be posted to checked-in guests")
        if category not in CHARGE_CATEGORIES:
            return self._err(f"Unknown charge category {category}")
        if not isinstance(amount, (int, float)) or isinstance(amount, bool) or amount <= 0:
            return self._err("amount must be a positive number")
        if amount > MAX_SINGLE_CHARGE:
            return self._err(f"Single charges above {MAX_SINGLE_CHARGE:.2f} need manager approval")
        if not isinstance(description, str) or not description.strip():
            return self._err("description is required")
        folio = self.folios[r["folio_id"]]
        key = self._add_line(folio, "charges", "C", {"date": self._today().isoformat(), "category": category,
                                                     "description": description.strip(), "amount": _money(amount)})
        return {"success": True, "message": f"Posted {_money(amount):.2f} {category} to folio {r['folio_id']}",
                "charge_id": key, "balance": self._folio_balance(folio)}

    def check_out(self, reservation_id: str, payment_method: str) -> dict:
        """Check a guest out: post room, VAT and city tax for the nights stayed, settle the balance and close the folio.

        Args:
            reservation_id: reservation id of a checked-in guest.
            payment_method: card, cash or company_invoice (invoice only for guests with a company account).
        Rules: nights charged run from arrival to today (at least one); an early departure shortens the
        stay. The room becomes vacant_dirty and the guest's completed stays increase by one.
        """
        r, err = self._res(reservation_id)
        if err:
            return err
        if r["status"] != "checked_in":
            return self._err(f"Reservation {reservation_id} is not checked in")
        if payment_method not in ("card", "cash", "company_invoice"):
            return self._err("payment_method must be card, cash or company_invoice")
        guest = self.guests[r["guest_id"]]
        if payment_method == "company_invoice" and not guest.get("company_account"):
            return self._err("Guest has no company account for invoicing")
        prop = self.properties[r["property_id"]]
        folio = self.folios[r["folio_id"]]
        today = self._today()
        nights = max((today - _date(r["arrival"])).days, 1)
        room_total, tax, city = self._stay_cost(prop, r["nightly_rate"], nights, r["adults"])
        iso = today.isoformat()
        self._add_line(folio, "charges", "C", {"date": iso, "category": "room", "description": f"Accommodation {nights} night(s)", "amount": room_total})
        self._add_line(folio, "charges", "C", {"date": iso, "category": "tax", "description": f"VAT {prop['tax_rate'] * 100:g}% on accommodation", "amount": tax})
        self._add_line(folio, "charges", "C", {"date": iso, "category": "city_tax", "description": "City tax", "amount": city})
        balance = self._folio_balance(folio)
        if balance > 0:
            self._add_line(folio, "payments", "P", {"date": iso, "method": payment_method, "amount": balance, "note": "settlement at check-out"})
        folio["status"] = "closed"
        if nights != r["nights"]:
            r["departure"] = (_date(r["arrival"]) + datetime.timedelta(days=nights)).isoformat()
            r["nights"] = nights
        r["status"] = "checked_out"
        room = self.rooms[r["room_no"]]
        room["status"] = "vacant_dirty"
        room["reservation_id"] = None
        guest["stays"] = guest.get("stays", 0) + 1
        return {"success": True, "message": f"Checked out of room {r['room_no']}", "nights_charged": nights,
                "amount_settled": max(balance, 0.0), "refund_due": max(-balance, 0.0)}

    def set_room_status(self, room_no: str, status: str) -> dict:
        """Housekeeping/maintenance update of a room's status.

        Args:
            room_no: room id.
            status: vacant_clean, vacant_dirty or out_of_order.
        Rules: occupied rooms cannot be changed here (occupancy is set by check-in/check-out); a room
        assigned to a reservation arriving today cannot be taken out of order.
        """
        room = self.rooms.get(room_no) if isinstance(room_no, str) else None
        if room is None:
            return self._err(f"Room {room_no} not found")
        if status not in ("vacant_clean", "vacant_dirty", "out_of_order"):
            return self._err("status must be vacant_clean, vacant_dirty or out_of_order")
        if room["status"] == "occupied":
            return self._err(f"Room {room_no} is occupied")
        if room["status"] == status:
            return self._err(f"Room {room_no} is already {status}")
        if status == "out_of_order":
            today = self._today().isoformat()
            for rid, r in self.reservations.items():
                if r["room_no"] == room_no and r["status"] == "confirmed" and r["arrival"] == today:
                    return self._err(f"Room {room_no} is assigned to {rid} arriving today; reassign it first")
        room["status"] = status
        return {"success": True, "message": f"Room {room_no} set to {status}"}
