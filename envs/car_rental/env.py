"""Car rental counter system: fleet, branches, reservations, pick-up and return charges, damage and repairs."""

import datetime
from typing import Optional


class CarRental:
    """Multi-branch car rental operation.

    Customers reserve a vehicle class at a pick-up branch for a date range. At the counter an
    agent assigns a concrete vehicle (same class or a free upgrade) and holds the class deposit.
    On return the system prices the rental from the rate card: booked or actual days (whichever
    is longer), kilometres above the daily allowance, missing fuel plus a refuelling fee,
    one-way and young-driver fees. Damage found at check-in sends the vehicle to maintenance
    and charges the customer up to the deposit.
    """

    def __init__(self, init_config: dict):
        self.settings = {}
        self.rate_card = {}
        self.branches = {}
        self.vehicles = {}
        self.customers = {}
        self.reservations = {}
        self.damage_reports = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _money(value: float) -> float:
        return round(float(value) + 1e-9, 2)

    @staticmethod
    def _date(value) -> Optional[datetime.date]:
        if not isinstance(value, str):
            return None
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            return None

    def _today(self) -> datetime.date:
        return datetime.date.fromisoformat(self.settings["business_date"])

    @staticmethod
    def _age_on(birth: datetime.date, day: datetime.date) -> int:
        return day.year - birth.year - ((day.month, day.day) < (birth.month, birth.day))

    def _class_fleet(self, branch_id: str, vehicle_class: str) -> int:
        return sum(1 for v in self.vehicles.values()
                   if v["branch_id"] == branch_id and v["class"] == vehicle_class and v["status"] == "available")

    def _overlapping(self, branch_id: str, vehicle_class: str, start: datetime.date, end: datetime.date,
                     exclude: Optional[str] = None) -> int:
        count = 0
        for rid, r in self.reservations.items():
            if rid == exclude or r["status"] != "booked":
                continue
            if r["pickup_branch"] != branch_id or r["vehicle_class"] != vehicle_class:
                continue
            if datetime.date.fromisoformat(r["start_date"]) < end and start < datetime.date.fromisoformat(r["end_date"]):
                count += 1
        return count

    def _reservation(self, reservation_id):
        if not isinstance(reservation_id, str) or reservation_id not in self.reservations:
            return None, {"success": False, "error": f"Reservation {reservation_id} not found"}
        return self.reservations[reservation_id], None

    # ------------------------------------------------------------------ queries
    def list_branches(self) -> dict:
        """List branches with opening status, fleet capacity, vehicles based there and available vehicles per class."""
        rows = []
        for bid, b in sorted(self.branches.items()):
            based = [v for v in self.vehicles.values() if v["branch_id"] == bid]
            available = {}
            for v in based:
                if v["status"] == "available":
                    available[v["class"]] = available.get(v["class"], 0) + 1
            rows.append({"branch_id": bid, "name": b["name"], "open": b["open"], "capacity": b["capacity"],
                         "vehicles": len(based), "available_by_class": available})
        return {"success": True, "data": rows}

    def search_available_vehicles(self, branch_id: str, vehicle_class: Optional[str] = None) -> dict:
        """List vehicles ready to rent at a branch.

        Args:
            branch_id: Branch id, e.g. "BR-AMS".
            vehicle_class: Optional class filter (economy, compact, midsize, suv, van).
        """
        if not isinstance(branch_id, str) or branch_id not in self.branches:
            return {"success": False, "error": f"Branch {branch_id} not found"}
        if vehicle_class is not None and (not isinstance(vehicle_class, str) or vehicle_class not in self.rate_card):
            return {"success": False, "error": f"Unknown vehicle class {vehicle_class}"}
        rows = [{"vehicle_id": vid, "plate": v["plate"], "make": v["make"], "model": v["model"], "class": v["class"],
                 "mileage": v["mileage"], "fuel_eighths": v["fuel_eighths"]}
                for vid, v in sorted(self.vehicles.items())
                if v["branch_id"] == branch_id and v["status"] == "available"
                and (vehicle_class is None or v["class"] == vehicle_class)]
        return {"success": True, "data": rows}

    def get_reservation(self, reservation_id: str) -> dict:
        """Show a reservation with customer name, dates, assigned vehicle and charges.

        Args:
            reservation_id: Reservation id, e.g. "RS-6001".
        """
        r, err = self._reservation(reservation_id)
        if err:
            return err
        data = {"reservation_id": reservation_id, "customer_name": self.customers[r["customer_id"]]["name"]}
        data.update(r)
        return {"success": True, "data": data}

    def get_vehicle(self, vehicle_id: str) -> dict:
        """Show a vehicle with its status, branch, odometer, fuel and open damage reports.

        Args:
            vehicle_id: Vehicle id, e.g. "V-104".
        """
        if not isinstance(vehicle_id, str) or vehicle_id not in self.vehicles:
            return {"success": False, "error": f"Vehicle {vehicle_id} not found"}
        data = {"vehicle_id": vehicle_id}
        data.update(self.vehicles[vehicle_id])
        data["open_damage_reports"] = sorted(did for did, d in self.damage_reports.items()
                                             if d["vehicle_id"] == vehicle_id and d["status"] == "open")
        return {"success": True, "data": data}

    # ------------------------------------------------------------------ reservations
    def create_reservation(self, customer_id: str, vehicle_class: str, pickup_branch: str, return_branch: str,
                           start_date: str, end_date: str) -> dict:
        """Reserve a vehicle class for a date range.

        Args:
            customer_id: Customer id, e.g. "CU-301".
            vehicle_class: economy, compact, midsize, suv or van.
            pickup_branch: Open branch where the rental starts.
            return_branch: Open branch where the car will be returned (different branch = one-way fee).
            start_date: Pick-up date (YYYY-MM-DD), not before the business date.
            end_date: Return date (YYYY-MM-DD), after start_date, at most settings.max_rental_days later.
        Rules: the driver must be at least settings.min_driver_age on the start date, hold a licence
        valid through the end date and not be blacklisted; the pick-up branch must have an available
        vehicle of the class not already promised to an overlapping booking.
        """
        if not isinstance(customer_id, str) or customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        if not isinstance(vehicle_class, str) or vehicle_class not in self.rate_card:
            return {"success": False, "error": f"Unknown vehicle class {vehicle_class}"}
        for label, bid in (("Pick-up", pickup_branch), ("Return", return_branch)):
            if not isinstance(bid, str) or bid not in self.branches:
                return {"success": False, "error": f"{label} branch {bid} not found"}
            if not self.branches[bid]["open"]:
                return {"success": False, "error": f"{label} branch {bid} is closed"}
        start, end = self._date(start_date), self._date(end_date)
        if start is None or end is None:
            return {"success": False, "error": "Dates must be in YYYY-MM-DD format"}
        if start < self._today():
            return {"success": False, "error": f"start_date {start_date} is in the past"}
        if end <= start:
            return {"success": False, "error": "end_date must be after start_date"}
        if (end - start).days > self.settings["max_rental_days"]:
            return {"success": False, "error": f"Rentals are limited to {self.settings['max_rental_days']} days"}
        customer = self.customers[customer_id]
        if customer["blacklisted"]:
            return {"success": False, "error": f"Customer {customer_id} is not allowed to rent"}
        age = self._age_on(datetime.date.fromisoformat(customer["birth_date"]), start)
        if age < self.settings["min_driver_age"]:
            return {"success": False, "error": f"Driver must be at least {self.settings['min_driver_age']} (is {age})"}
        if datetime.date.fromisoformat(customer["license_expiry"]) < end:
            return {"success": False, "error": f"Driving licence expires on {customer['license_expiry']}, before the return date"}
        free = self._class_fleet(pickup_branch, vehicle_class) - self._overlapping(pickup_branch, vehicle_class, start, end)
        if free < 1:
            return {"success": False, "error": f"No {vehicle_class} vehicle available at {pickup_branch} for these dates"}
        number = self.counters["reservation"] + 1
        rid = f"RS-{number}"
        self.reservations[rid] = {
            "customer_id": customer_id, "vehicle_class": vehicle_class, "pickup_branch": pickup_branch,
            "return_branch": return_branch, "start_date": start_date, "end_date": end_date, "status": "booked",
            "vehicle_id": None, "pickup_mileage": None, "pickup_fuel": None, "deposit_held": 0.0, "picked_up_at": None,
            "return_mileage": None, "return_fuel": None, "returned_on": None, "charges": None, "damage_charge": 0.0,
            "total_charged": 0.0, "cancellation_fee": None, "cancelled_on": None,
        }
        self.counters["reservation"] = number
        return {"success": True, "message": f"Reservation {rid} booked: {vehicle_class} {start_date} to {end_date}", "reservation_id": rid}

    def cancel_reservation(self, reservation_id: str) -> dict:
        """Cancel a booked reservation.

        Args:
            reservation_id: Reservation in status "booked".
        Rules: cancelling less than settings.late_cancel_days before the start date costs
        settings.late_cancel_fee; earlier cancellations are free.
        """
        r, err = self._reservation(reservation_id)
        if err:
            return err
        if r["status"] != "booked":
            return {"success": False, "error": f"Reservation {reservation_id} is {r['status']} and cannot be cancelled"}
        days_ahead = (datetime.date.fromisoformat(r["start_date"]) - self._today()).days
        fee = self.settings["late_cancel_fee"] if days_ahead < self.settings["late_cancel_days"] else 0.0
        r["status"] = "cancelled"
        r["cancellation_fee"] = fee
        r["cancelled_on"] = self.settings["business_date"]
        return {"success": True, "message": f"Reservation {reservation_id} cancelled", "cancellation_fee": fee}

    def extend_reservation(self, reservation_id: str, new_end_date: str) -> dict:
        """Move the return date of a booked or active reservation later.

        Args:
            reservation_id: Reservation in status booked or active.
            new_end_date: New return date (YYYY-MM-DD), later than the current one.
        Rules: the total length may not exceed settings.max_rental_days; a booked reservation needs
        class availability for the longer period; the licence must remain valid.
        """
        r, err = self._reservation(reservation_id)
        if err:
            return err
        if r["status"] not in ("booked", "active"):
            return {"success": False, "error": f"Reservation {reservation_id} is {r['status']}"}
        new_end = self._date(new_end_date)
        if new_end is None:
            return {"success": False, "error": "new_end_date must be in YYYY-MM-DD format"}
        start = datetime.date.fromisoformat(r["start_date"])
        if new_end <= datetime.date.fromisoformat(r["end_date"]):
            return {"success": False, "error": f"New end date must be after {r['end_date']}"}
        if (new_end - start).days > self.settings["max_rental_days"]:
            return {"success": False, "error": f"Rentals are limited to {self.settings['max_rental_days']} days"}
        customer = self.customers[r["customer_id"]]
        if datetime.date.fromisoformat(customer["license_expiry"]) < new_end:
            return {"success": False, "error": f"Driving licence expires on {customer['license_expiry']}"}
        if r["status"] == "booked":
            free = (self._class_fleet(r["pickup_branch"], r["vehicle_class"])
                    - self._overlapping(r["pickup_branch"], r["vehicle_class"], start, new_end, exclude=reservation_id))
            if free < 1:
                return {"success": False, "error": f"No {r['vehicle_class']} vehicle available for the extension"}
        r["end_date"] = new_end_date
        return {"success": True, "message": f"Reservation {reservation_id} now ends {new_end_date}"}

    # ------------------------------------------------------------------ counter operations
    def pick_up(self, reservation_id: str, vehicle_id: str) -> dict:
        """Hand over a vehicle for a booked reservation and hold the class deposit.

        Args:
            reservation_id: Booked reservation whose start date has arrived (and end date not passed).
            vehicle_id: Available vehicle at the pick-up branch, of the reserved class or a higher
                class in settings.upgrade_order (free upgrade); vans are never substituted.
        """
        r, err = self._reservation(reservation_id)
        if err:
            return err
        if r["status"] != "booked":
            return {"success": False, "error": f"Reservation {reservation_id} is {r['status']}"}
        today = self._today()
        if today < datetime.date.fromisoformat(r["start_date"]):
            return {"success": False, "error": f"Reservation {reservation_id} starts on {r['start_date']}"}
        if today >= datetime.date.fromisoformat(r["end_date"]):
            return {"success": False, "error": f"Reservation {reservation_id} ended on {r['end_date']}; it can no longer be picked up"}
        if not isinstance(vehicle_id, str) or vehicle_id not in self.vehicles:
            return {"success": False, "error": f"Vehicle {vehicle_id} not found"}
        v = self.vehicles[vehicle_id]
        if v["status"] != "available":
            return {"success": False, "error": f"Vehicle {vehicle_id} is {v['status']}"}
        if v["branch_id"] != r["pickup_branch"]:
            return {"success": False, "error": f"Vehicle {vehicle_id} is at {v['branch_id']}, not {r['pickup_branch']}"}
        if v["class"] != r["vehicle_class"]:
            order = self.settings["upgrade_order"]
            if v["class"] not in order or r["vehicle_class"] not in order or order.index(v["class"]) < order.index(r["vehicle_class"]):
                return {"success": False, "error": f"Vehicle {vehicle_id} is {v['class']}; reservation is for {r['vehicle_class']}"}
        deposit = self.rate_card[r["vehicle_class"]]["deposit"]
        r["status"] = "active"
        r["vehicle_id"] = vehicle_id
        r["pickup_mileage"] = v["mileage"]
        r["pickup_fuel"] = v["fuel_eighths"]
        r["deposit_held"] = deposit
        r["picked_up_at"] = datetime.datetime.now().isoformat(timespec="seconds")
        v["status"] = "rented"
        upgrade = v["class"] != r["vehicle_class"]
        msg = f"{v['make']} {v['model']} ({v['plate']}) handed over for {reservation_id}"
        if upgrade:
            msg += f", free upgrade to {v['class']}"
        return {"success": True, "message": msg, "deposit_held": deposit}

    def return_vehicle(self, reservation_id: str, mileage: int, fuel_eighths: int) -> dict:
        """Check in a rented vehicle at the reservation's return branch and charge the rental.

        Args:
            reservation_id: Active reservation.
            mileage: Odometer reading in km (not below the pick-up reading).
            fuel_eighths: Fuel gauge 0-8 (eighths of a tank).
        Rules: days billed = max(booked days, days since the start date), at least 1; each day
        includes the class's km allowance, extra km cost excess_km_rate; missing fuel is charged per
        litre plus settings.refuel_service_fee; a different return branch adds settings.one_way_fee;
        drivers younger than settings.young_driver_age pay a daily surcharge. The deposit is released,
        the vehicle becomes available at the return branch and the customer's rental count increases.
        """
        r, err = self._reservation(reservation_id)
        if err:
            return err
        if r["status"] != "active":
            return {"success": False, "error": f"Reservation {reservation_id} is {r['status']}, not active"}
        if not isinstance(mileage, int) or isinstance(mileage, bool) or mileage < r["pickup_mileage"]:
            return {"success": False, "error": f"mileage must be an integer of at least {r['pickup_mileage']}"}
        if not isinstance(fuel_eighths, int) or isinstance(fuel_eighths, bool) or not 0 <= fuel_eighths <= 8:
            return {"success": False, "error": "fuel_eighths must be an integer from 0 to 8"}
        if mileage - r["pickup_mileage"] > 5000:
            return {"success": False, "error": "Odometer reading implausible (more than 5000 km driven); check the reading"}
        rates = self.rate_card[r["vehicle_class"]]
        start = datetime.date.fromisoformat(r["start_date"])
        booked_days = (datetime.date.fromisoformat(r["end_date"]) - start).days
        actual_days = (self._today() - start).days
        days = max(1, booked_days, actual_days)
        driven = mileage - r["pickup_mileage"]
        excess_km = max(0, driven - rates["included_km_per_day"] * days)
        vehicle = self.vehicles[r["vehicle_id"]]
        missing = max(0, r["pickup_fuel"] - fuel_eighths)
        fuel = 0.0
        if missing:
            litres = missing * vehicle["tank_litres"] / 8.0
            fuel = self._money(litres * self.settings["fuel_price_per_litre"] + self.settings["refuel_service_fee"])
        customer = self.customers[r["customer_id"]]
        age = self._age_on(datetime.date.fromisoformat(customer["birth_date"]), start)
        charges = {
            "base": self._money(rates["daily_rate"] * days),
            "excess_km": self._money(excess_km * rates["excess_km_rate"]),
            "fuel": fuel,
            "one_way": self.settings["one_way_fee"] if r["return_branch"] != r["pickup_branch"] else 0.0,
            "young_driver": self._money(self.settings["young_driver_fee_per_day"] * days) if age < self.settings["young_driver_age"] else 0.0,
        }
        total = self._money(sum(charges.values()))
        r["status"] = "completed"
        r["return_mileage"] = mileage
        r["return_fuel"] = fuel_eighths
        r["returned_on"] = self.settings["business_date"]
        r["charges"] = charges
        r["total_charged"] = self._money(r["total_charged"] + total)
        r["deposit_held"] = 0.0
        vehicle["status"] = "available"
        vehicle["mileage"] = mileage
        vehicle["fuel_eighths"] = fuel_eighths
        vehicle["branch_id"] = r["return_branch"]
        customer["rentals_completed"] += 1
        day_word = "day" if days == 1 else "days"
        return {"success": True, "message": f"{reservation_id} returned: {days} {day_word}, {driven} km, total {total:.2f}",
                "charges": charges, "total": total}

    # ------------------------------------------------------------------ damage and fleet
    def report_damage(self, reservation_id: str, severity: str, description: str) -> dict:
        """Record damage found when a rental was checked in.

        Args:
            reservation_id: Completed reservation whose vehicle has not been rented out again.
            severity: minor, moderate or severe (estimated cost from settings.damage_costs).
            description: What is damaged.
        Rules: the customer is charged the estimated cost capped at the class deposit; the vehicle
        goes to maintenance until repaired.
        """
        r, err = self._reservation(reservation_id)
        if err:
            return err
        if r["status"] != "completed":
            return {"success": False, "error": f"Reservation {reservation_id} is {r['status']}; damage is recorded at check-in of completed rentals"}
        costs = self.settings["damage_costs"]
        if not isinstance(severity, str) or severity not in costs:
            return {"success": False, "error": f"severity must be one of {', '.join(costs)}"}
        if not isinstance(description, str) or len(description.strip()) < 5:
            return {"success": False, "error": "Describe the damage (at least 5 characters)"}
        vehicle = self.vehicles[r["vehicle_id"]]
        if vehicle["status"] == "rented":
            return {"success": False, "error": f"Vehicle {r['vehicle_id']} is already out on another rental"}
        estimate = costs[severity]
        charge = min(estimate, self.rate_card[r["vehicle_class"]]["deposit"])
        number = self.counters["damage"] + 1
        report_id = f"DR-{number}"
        self.damage_reports[report_id] = {"vehicle_id": r["vehicle_id"], "reservation_id": reservation_id, "severity": severity,
                                          "description": description.strip(), "estimated_cost": estimate, "status": "open",
                                          "reported_on": self.settings["business_date"], "actual_cost": None, "repaired_on": None}
        self.counters["damage"] = number
        r["damage_charge"] = self._money(r["damage_charge"] + charge)
        r["total_charged"] = self._money(r["total_charged"] + charge)
        vehicle["status"] = "maintenance"
        return {"success": True, "message": f"Damage report {report_id} opened; customer charged {charge:.2f}",
                "report_id": report_id, "customer_charge": charge}

    def complete_repair(self, report_id: str, actual_cost: float) -> dict:
        """Close a damage report after the repair; the vehicle returns to service if no other report is open.

        Args:
            report_id: Open damage report id, e.g. "DR-7001".
            actual_cost: Repair invoice amount (>= 0).
        """
        if not isinstance(report_id, str) or report_id not in self.damage_reports:
            return {"success": False, "error": f"Damage report {report_id} not found"}
        report = self.damage_reports[report_id]
        if report["status"] != "open":
            return {"success": False, "error": f"Damage report {report_id} is already {report['status']}"}
        if isinstance(actual_cost, bool) or not isinstance(actual_cost, (int, float)) or actual_cost < 0:
            return {"success": False, "error": "actual_cost must be a number >= 0"}
        report["status"] = "repaired"
        report["actual_cost"] = self._money(actual_cost)
        report["repaired_on"] = self.settings["business_date"]
        others = [d for d, x in self.damage_reports.items()
                  if x["vehicle_id"] == report["vehicle_id"] and x["status"] == "open"]
        vehicle = self.vehicles[report["vehicle_id"]]
        if not others and vehicle["status"] == "maintenance":
            vehicle["status"] = "available"
        return {"success": True, "message": f"Damage report {report_id} closed", "vehicle_status": vehicle["status"]}

    def transfer_vehicle(self, vehicle_id: str, to_branch_id: str) -> dict:
        """Move an available vehicle to another open branch that has room in its fleet capacity.

        Args:
            vehicle_id: Available vehicle id.
            to_branch_id: Destination branch id.
        """
        if not isinstance(vehicle_id, str) or vehicle_id not in self.vehicles:
            return {"success": False, "error": f"Vehicle {vehicle_id} not found"}
        v = self.vehicles[vehicle_id]
        if v["status"] != "available":
            return {"success": False, "error": f"Vehicle {vehicle_id} is {v['status']} and cannot be moved"}
        if not isinstance(to_branch_id, str) or to_branch_id not in self.branches:
            return {"success": False, "error": f"Branch {to_branch_id} not found"}
        if to_branch_id == v["branch_id"]:
            return {"success": False, "error": f"Vehicle {vehicle_id} is already at {to_branch_id}"}
        branch = self.branches[to_branch_id]
        if not branch["open"]:
            return {"success": False, "error": f"Branch {to_branch_id} is closed"}
        based = sum(1 for x in self.vehicles.values() if x["branch_id"] == to_branch_id)
        if based >= branch["capacity"]:
            return {"success": False, "error": f"Branch {to_branch_id} is at capacity ({branch['capacity']} vehicles)"}
        source = v["branch_id"]
        v["branch_id"] = to_branch_id
        return {"success": True, "message": f"Vehicle {vehicle_id} moved from {source} to {to_branch_id}"}
