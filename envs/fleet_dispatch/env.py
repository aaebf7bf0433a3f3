"""Truckload dispatch system: trucks, drivers with federal hours-of-service limits, loads,
load-to-truck/driver assignment, trips, deliveries, fuel logs and preventive maintenance."""

import copy
import datetime

MAX_DRIVING_MIN = 660        # 11 hours driving per shift
MAX_ON_DUTY_MIN = 840        # 14-hour on-duty window
MAX_CYCLE_MIN = 4200         # 70 hours in 8 days
LOAD_HANDLING_MIN = 60       # pre-trip inspection, loading and unloading
FUEL_RESERVE = 1.10          # 10% reserve on top of the trip's fuel
SERVICE_INTERVAL_MI = 25000
AVG_SPEED_MPH = 50
EQUIPMENT = ("dry_van", "reefer", "flatbed", "tanker")


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class FleetDispatch:
    def __init__(self, init_config: dict):
        self.depots = {}
        self.trucks = {}
        self.drivers = {}
        self.loads = {}
        self.fuel_logs = {}
        self.counters = {}
        self.today = ""

    # ------------------------------------------------------------------ helpers
    def _err(self, msg):
        return {"success": False, "error": msg}

    def _next_id(self, key, prefix):
        value = int(self.counters.get(key, 0)) + 1
        self.counters[key] = value
        return f"{prefix}{value}"

    def _load(self, load_id):
        if not isinstance(load_id, str) or load_id not in self.loads:
            return None, self._err(f"Load {load_id} not found")
        return self.loads[load_id], None

    def _remaining(self, d):
        h = d["hos"]
        return {
            "driving_min": max(MAX_DRIVING_MIN - h["driving_today_min"], 0),
            "on_duty_min": max(MAX_ON_DUTY_MIN - h["on_duty_today_min"], 0),
            "cycle_min": max(MAX_CYCLE_MIN - h["cycle_min"], 0),
        }

    def _active_load_of_driver(self, driver_id):
        for lid, l in self.loads.items():
            if l["driver_id"] == driver_id and l["status"] in ("assigned", "in_transit"):
                return lid
        return None

    # ------------------------------------------------------------------ queries
    def list_pending_loads(self) -> dict:
        """List loads waiting for a truck and driver, oldest pickup date first."""
        out = []
        for lid, l in sorted(self.loads.items(), key=lambda kv: (kv[1]["pickup_date"], kv[0])):
            if l["status"] == "pending":
                out.append({"load_id": lid, "customer": l["customer"], "origin": l["origin"], "destination": l["destination"],
                            "distance_mi": l["distance_mi"], "equipment": l["equipment"], "hazmat": l["hazmat"],
                            "weight_lb": l["weight_lb"], "pickup_date": l["pickup_date"], "rate_usd": l["rate_usd"]})
        return {"success": True, "data": out}

    def get_load(self, load_id: str) -> dict:
        """Get a load with route, equipment, weight, rate, status and assignment.

        Args:
            load_id: load id, e.g. "LD-5001".
        """
        l, err = self._load(load_id)
        if err:
            return err
        return {"success": True, "data": dict(copy.deepcopy(l), load_id=load_id)}

    def get_truck(self, truck_id: str) -> dict:
        """Get a truck with fuel, range, odometer, miles to next service and status.

        Args:
            truck_id: truck id, e.g. "TRK-101".
        """
        t = self.trucks.get(truck_id) if isinstance(truck_id, str) else None
        if t is None:
            return self._err(f"Truck {truck_id} not found")
        data = dict(copy.deepcopy(t), truck_id=truck_id)
        data["range_mi"] = round(t["fuel_gal"] * t["mpg"], 1)
        data["miles_to_service"] = round(t["next_service_mi"] - t["odometer_mi"], 1)
        return {"success": True, "data": data}

    def get_driver(self, driver_id: str) -> dict:
        """Get a driver with licence, endorsements, status, hours used and hours remaining.

        Args:
            driver_id: driver id, e.g. "DRV-01".
        """
        d = self.drivers.get(driver_id) if isinstance(driver_id, str) else None
        if d is None:
            return self._err(f"Driver {driver_id} not found")
        data = dict(copy.deepcopy(d), driver_id=driver_id, remaining=self._remaining(d),
                    active_load_id=self._active_load_of_driver(driver_id))
        return {"success": True, "data": data}

    # ------------------------------------------------------------------ updates
    def create_load(self, customer: str, origin: str, destination: str, distance_mi: float, weight_lb: int,
                    equipment: str, hazmat: bool, rate_usd: float, pickup_date: str) -> dict:
        """Tender a new load for dispatch.

        Args:
            customer: shipper name.
            origin: pickup depot id.
            destination: delivery depot id (different from origin).
            distance_mi: route distance, 10-650 miles (single-shift loads only).
            weight_lb: cargo weight in pounds, 1-48000.
            equipment: dry_van, reefer, flatbed or tanker.
            hazmat: whether the cargo is hazardous material.
            rate_usd: linehaul rate paid by the customer, > 0.
            pickup_date: YYYY-MM-DD, today or later.
        Estimated drive time is distance at 50 mph, rounded to whole minutes.
        """
        if not isinstance(customer, str) or not customer.strip():
            return self._err("customer is required")
        if not isinstance(origin, str) or not isinstance(destination, str) or origin not in self.depots or destination not in self.depots:
            return self._err("origin and destination must be known depots")
        if origin == destination:
            return self._err("origin and destination must differ")
        if not _num(distance_mi) or not 10 <= distance_mi <= 650:
            return self._err("distance_mi must be between 10 and 650 (longer runs need a team or relay)")
        if not isinstance(weight_lb, int) or isinstance(weight_lb, bool) or not 1 <= weight_lb <= 48000:
            return self._err("weight_lb must be an integer from 1 to 48000")
        if equipment not in EQUIPMENT:
            return self._err(f"equipment must be one of {', '.join(EQUIPMENT)}")
        if not isinstance(hazmat, bool):
            return self._err("hazmat must be true or false")
        if not _num(rate_usd) or rate_usd <= 0:
            return self._err("rate_usd must be positive")
        try:
            pickup = datetime.date.fromisoformat(pickup_date) if isinstance(pickup_date, str) else None
        except ValueError:
            pickup = None
        if pickup is None:
            return self._err("pickup_date must be YYYY-MM-DD")
        if pickup_date < self.today:
            return self._err("pickup_date cannot be in the past")
        lid = self._next_id("load", "LD-")
        self.loads[lid] = {
            "customer": customer.strip(), "origin": origin, "destination": destination, "distance_mi": distance_mi,
            "est_drive_min": int(round(distance_mi / AVG_SPEED_MPH * 60)), "weight_lb": weight_lb,
            "equipment": equipment, "hazmat": hazmat, "rate_usd": round(float(rate_usd), 2), "pickup_date": pickup_date,
            "status": "pending", "truck_id": None, "driver_id": None, "assigned_on": None,
            "delivered_on": None, "actual_miles": None, "cancel_reason": None,
        }
        return {"success": True, "message": f"Load {lid} created", "load_id": lid,
                "est_drive_min": self.loads[lid]["est_drive_min"]}

    def assign_load(self, load_id: str, truck_id: str, driver_id: str) -> dict:
        """Dispatch a pending load to a truck and a driver.

        Args:
            load_id: pending load.
            truck_id: available truck.
            driver_id: on-duty driver without another active load.
        Rules: truck equipment must match and its payload cover the weight; fuel range must cover the
        distance plus 10% reserve; the trip must not run past the truck's service mileage. The driver
        needs a class A CDL, the hazmat endorsement for hazmat loads and the tanker endorsement for
        tankers, and enough hours left: 11 h driving, 14 h on duty (trip plus 60 min handling) and the
        70 h / 8-day cycle.
        """
        l, err = self._load(load_id)
        if err:
            return err
        if l["status"] != "pending":
            return self._err(f"Load {load_id} is {l['status']}")
        t = self.trucks.get(truck_id) if isinstance(truck_id, str) else None
        if t is None:
            return self._err(f"Truck {truck_id} not found")
        d = self.drivers.get(driver_id) if isinstance(driver_id, str) else None
        if d is None:
            return self._err(f"Driver {driver_id} not found")
        if t["status"] != "available":
            return self._err(f"Truck {truck_id} is {t['status']}")
        if t["equipment"] != l["equipment"]:
            return self._err(f"Load needs a {l['equipment']} but {truck_id} is a {t['equipment']}")
        if l["weight_lb"] > t["max_payload_lb"]:
            return self._err(f"Load of {l['weight_lb']} lb exceeds {truck_id} payload of {t['max_payload_lb']} lb")
        if t["fuel_gal"] * t["mpg"] < l["distance_mi"] * FUEL_RESERVE:
            return self._err(f"{truck_id} range {t['fuel_gal'] * t['mpg']:.0f} mi is below {l['distance_mi'] * FUEL_RESERVE:.0f} mi needed; refuel first")
        if t["odometer_mi"] + l["distance_mi"] > t["next_service_mi"]:
            return self._err(f"{truck_id} is due for service within this trip")
        if d["status"] != "on_duty":
            return self._err(f"Driver {driver_id} is {d['status']}; they must be on duty and not driving")
        if self._active_load_of_driver(driver_id):
            return self._err(f"Driver {driver_id} already has active load {self._active_load_of_driver(driver_id)}")
        if d["cdl_class"] != "A":
            return self._err(f"Driver {driver_id} holds a class {d['cdl_class']} CDL; class A is required")
        if l["hazmat"] and not d["endorsements"].get("hazmat"):
            return self._err(f"Driver {driver_id} lacks the hazmat endorsement")
        if l["equipment"] == "tanker" and not d["endorsements"].get("tanker"):
            return self._err(f"Driver {driver_id} lacks the tanker endorsement")
        rem = self._remaining(d)
        need = l["est_drive_min"]
        if need > rem["driving_min"]:
            return self._err(f"Driver {driver_id} has {rem['driving_min']} min of driving left, trip needs {need}")
        if need + LOAD_HANDLING_MIN > rem["on_duty_min"]:
            return self._err(f"Driver {driver_id} has {rem['on_duty_min']} min left in the 14-hour window, trip needs {need + LOAD_HANDLING_MIN}")
        if need + LOAD_HANDLING_MIN > rem["cycle_min"]:
            return self._err(f"Driver {driver_id} has {rem['cycle_min']} min left in the 70-hour cycle")
        l["status"] = "assigned"
        l["truck_id"] = truck_id
        l["driver_id"] = driver_id
        l["assigned_on"] = self.today
        t["status"] = "assigned"
        t["current_load_id"] = load_id
        d["current_truck"] = truck_id
        return {"success": True, "message": f"Load {load_id} assigned to {truck_id} with {d['name']}"}

    def start_trip(self, load_id: str) -> dict:
        """Driver departs with an assigned load.

        Args:
            load_id: assigned load.
        Rules: the pickup date must be today or earlier and the driver must still be on duty.
        """
        l, err = self._load(load_id)
        if err:
            return err
        if l["status"] != "assigned":
            return self._err(f"Load {load_id} is {l['status']}; only assigned loads can start")
        if l["pickup_date"] > self.today:
            return self._err(f"Pickup is scheduled for {l['pickup_date']}")
        d = self.drivers[l["driver_id"]]
        if d["status"] != "on_duty":
            return self._err(f"Driver {l['driver_id']} is {d['status']}")
        l["status"] = "in_transit"
        self.trucks[l["truck_id"]]["status"] = "in_transit"
        d["status"] = "driving"
        return {"success": True, "message": f"Load {load_id} in transit to {l['destination']}"}

    def complete_delivery(self, load_id: str, actual_miles: float, drive_minutes: int) -> dict:
        """Record delivery of an in-transit load and settle truck and driver records.

        Args:
            load_id: in-transit load.
            actual_miles: miles driven, between 50% and 150% of the planned distance.
            drive_minutes: driving time logged for the trip, 1 to the driver's remaining driving minutes.
        Rules: odometer and fuel are updated (fuel used = miles / mpg); the driver's driving, on-duty
        (drive + 60 min handling) and cycle minutes increase; the truck becomes available and the driver
        returns to on duty without a truck.
        """
        l, err = self._load(load_id)
        if err:
            return err
        if l["status"] != "in_transit":
            return self._err(f"Load {load_id} is {l['status']}; only in-transit loads can be delivered")
        if not _num(actual_miles) or not 0.5 * l["distance_mi"] <= actual_miles <= 1.5 * l["distance_mi"]:
            return self._err(f"actual_miles must be between {0.5 * l['distance_mi']:g} and {1.5 * l['distance_mi']:g}")
        d = self.drivers[l["driver_id"]]
        t = self.trucks[l["truck_id"]]
        rem = self._remaining(d)
        if not isinstance(drive_minutes, int) or isinstance(drive_minutes, bool) or drive_minutes < 1:
            return self._err("drive_minutes must be a positive integer")
        if drive_minutes > rem["driving_min"]:
            return self._err(f"drive_minutes exceeds the driver's remaining {rem['driving_min']} min; file an HOS exception report instead")
        used = round(actual_miles / t["mpg"], 1)
        if used > t["fuel_gal"]:
            return self._err(f"Fuel used ({used} gal) exceeds fuel on board ({t['fuel_gal']} gal); check the mileage")
        l["status"] = "delivered"
        l["delivered_on"] = self.today
        l["actual_miles"] = actual_miles
        t["odometer_mi"] = round(t["odometer_mi"] + actual_miles, 1)
        t["fuel_gal"] = round(t["fuel_gal"] - used, 1)
        t["status"] = "available"
        t["current_load_id"] = None
        d["hos"]["driving_today_min"] += drive_minutes
        d["hos"]["on_duty_today_min"] += drive_minutes + LOAD_HANDLING_MIN
        d["hos"]["cycle_min"] += drive_minutes + LOAD_HANDLING_MIN
        d["status"] = "on_duty"
        d["current_truck"] = None
        return {"success": True, "message": f"Load {load_id} delivered", "fuel_used_gal": used,
                "revenue_per_mile": round(l["rate_usd"] / actual_miles, 2)}

    def cancel_load(self, load_id: str, reason: str) -> dict:
        """Cancel a load that has not departed, releasing any assigned truck and driver.

        Args:
            load_id: pending or assigned load.
            reason: cancellation reason text.
        """
        l, err = self._load(load_id)
        if err:
            return err
        if l["status"] not in ("pending", "assigned"):
            return self._err(f"Load {load_id} is {l['status']} and cannot be cancelled")
        if not isinstance(reason, str) or len(reason.strip()) < 3:
            return self._err("A cancellation reason is required")
        if l["status"] == "assigned":
            t = self.trucks[l["truck_id"]]
            t["status"] = "available"
            t["current_load_id"] = None
            self.drivers[l["driver_id"]]["current_truck"] = None
        l["status"] = "cancelled"
        l["cancel_reason"] = reason.strip()
        return {"success": True, "message": f"Load {load_id} cancelled"}

    def log_fuel(self, truck_id: str, gallons: float, price_per_gallon: float, location: str) -> dict:
        """Record a diesel purchase for a truck.

        Args:
            truck_id: truck id.
            gallons: gallons pumped, > 0; the tank may not exceed its capacity.
            price_per_gallon: price in USD, 2.00-8.00.
            location: truck stop / city.
        Rules: not while in maintenance. The driver currently paired with the truck, if any, is recorded.
        """
        t = self.trucks.get(truck_id) if isinstance(truck_id, str) else None
        if t is None:
            return self._err(f"Truck {truck_id} not found")
        if t["status"] == "maintenance":
            return self._err(f"Truck {truck_id} is in maintenance")
        if not _num(gallons) or gallons <= 0:
            return self._err("gallons must be positive")
        if t["fuel_gal"] + gallons > t["fuel_capacity_gal"] + 1e-9:
            return self._err(f"Tank holds {t['fuel_capacity_gal']} gal; only {t['fuel_capacity_gal'] - t['fuel_gal']:.1f} gal fit")
        if not _num(price_per_gallon) or not 2.0 <= price_per_gallon <= 8.0:
            return self._err("price_per_gallon must be between 2.00 and 8.00")
        if not isinstance(location, str) or not location.strip():
            return self._err("location is required")
        driver = None
        for did, d in sorted(self.drivers.items()):
            if d["current_truck"] == truck_id:
                driver = did
                break
        fid = self._next_id("fuel_log", "FUEL-")
        total = round(gallons * price_per_gallon, 2)
        self.fuel_logs[fid] = {"truck_id": truck_id, "driver_id": driver, "date": self.today, "gallons": gallons,
                               "price_per_gallon": price_per_gallon, "total_usd": total, "odometer_mi": t["odometer_mi"],
                               "location": location.strip()}
        t["fuel_gal"] = round(t["fuel_gal"] + gallons, 1)
        return {"success": True, "message": f"Fuel logged for {truck_id}", "fuel_log_id": fid, "total_usd": total,
                "fuel_gal": t["fuel_gal"]}

    def start_shift(self, driver_id: str) -> dict:
        """Put an off-duty driver on duty.

        Args:
            driver_id: driver id.
        Rules: not possible once the 70-hour cycle is used up (a 34-hour restart is required).
        """
        d = self.drivers.get(driver_id) if isinstance(driver_id, str) else None
        if d is None:
            return self._err(f"Driver {driver_id} not found")
        if d["status"] != "off_duty":
            return self._err(f"Driver {driver_id} is already {d['status']}")
        if d["hos"]["cycle_min"] >= MAX_CYCLE_MIN:
            return self._err(f"Driver {driver_id} has used the 70-hour cycle; a 34-hour restart is required")
        d["status"] = "on_duty"
        return {"success": True, "message": f"{d['name']} is on duty", "remaining": self._remaining(d)}

    def end_shift(self, driver_id: str) -> dict:
        """End an on-duty driver's shift: goes off duty and the daily driving/on-duty counters reset
        after the mandatory 10-hour break (the cycle total is kept).

        Args:
            driver_id: driver id.
        Rules: not while driving or holding an active load.
        """
        d = self.drivers.get(driver_id) if isinstance(driver_id, str) else None
        if d is None:
            return self._err(f"Driver {driver_id} not found")
        if d["status"] != "on_duty":
            return self._err(f"Driver {driver_id} is {d['status']}")
        active = self._active_load_of_driver(driver_id)
        if active:
            return self._err(f"Driver {driver_id} still holds load {active}")
        d["status"] = "off_duty"
        d["hos"]["driving_today_min"] = 0
        d["hos"]["on_duty_today_min"] = 0
        return {"success": True, "message": f"{d['name']} is off duty", "cycle_min": d["hos"]["cycle_min"]}

    def schedule_maintenance(self, truck_id: str, reason: str) -> dict:
        """Take an available truck out of service for maintenance.

        Args:
            truck_id: truck id.
            reason: work to be done.
        """
        t = self.trucks.get(truck_id) if isinstance(truck_id, str) else None
        if t is None:
            return self._err(f"Truck {truck_id} not found")
        if t["status"] != "available":
            return self._err(f"Truck {truck_id} is {t['status']}; only available trucks can go to the shop")
        if not isinstance(reason, str) or len(reason.strip()) < 3:
            return self._err("A maintenance reason is required")
        t["status"] = "maintenance"
        t["maintenance_note"] = reason.strip()
        return {"success": True, "message": f"Truck {truck_id} sent to maintenance"}

    def complete_maintenance(self, truck_id: str) -> dict:
        """Return a truck from maintenance; the next service is due 25,000 miles later.

        Args:
            truck_id: truck in maintenance.
        """
        t = self.trucks.get(truck_id) if isinstance(truck_id, str) else None
        if t is None:
            return self._err(f"Truck {truck_id} not found")
        if t["status"] != "maintenance":
            return self._err(f"Truck {truck_id} is not in maintenance")
        t["status"] = "available"
        t["maintenance_note"] = None
        t["next_service_mi"] = round(t["odometer_mi"] + SERVICE_INTERVAL_MI, 1)
        return {"success": True, "message": f"Truck {truck_id} back in service",
                "next_service_mi": t["next_service_mi"]}
