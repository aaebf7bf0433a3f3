"""Ride-hailing dispatch platform: riders and drivers, zone-based surge pricing, trip requests,
driver matching, trip lifecycle, fares with platform commission, cancellation and no-show fees,
and two-way ratings."""

import copy
import time

CATEGORY_SERVES = {"economy": ["economy"], "comfort": ["comfort", "economy"], "xl": ["xl", "economy"]}
MAX_PICKUP_MIN = 15
CANCEL_GRACE_ETA_MIN = 10
DRIVER_SHARE_OF_FEES = 0.8


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _money(x):
    return round(float(x) + 0.0, 2)


class RideHailing:
    def __init__(self, init_config: dict):
        self.settings = {}
        self.zones = {}
        self.travel_times = {}
        self.fare_rules = {}
        self.riders = {}
        self.drivers = {}
        self.trips = {}
        self.payments = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    def _err(self, msg):
        return {"success": False, "error": msg}

    def _next_id(self, key, prefix):
        value = int(self.counters.get(key, 0)) + 1
        self.counters[key] = value
        return f"{prefix}{value}"

    def _leg(self, a, b):
        return self.travel_times.get(a, {}).get(b)

    def _price(self, category, km, minutes, surge):
        r = self.fare_rules[category]
        ride = (r["base"] + r["per_km"] * km + r["per_min"] * minutes) * surge
        ride = max(ride, r["minimum"])
        return _money(ride + r["booking_fee"]), _money(ride)

    def _trip(self, trip_id):
        if not isinstance(trip_id, str) or trip_id not in self.trips:
            return None, self._err(f"Trip {trip_id} not found")
        return self.trips[trip_id], None

    def _zone_counts(self, zone_id):
        drivers = sorted(d for d, v in self.drivers.items() if v["status"] == "available" and v["zone_id"] == zone_id)
        open_requests = sum(1 for t in self.trips.values() if t["status"] == "requested" and t["pickup_zone"] == zone_id)
        return drivers, open_requests

    def _charge(self, trip_id, rider, amount, kind):
        """Take amount from the rider: wallet first for wallet riders, the rest by card."""
        from_wallet = 0.0
        if rider["payment_method"] == "wallet":
            from_wallet = _money(min(rider["wallet_balance"], amount))
            rider["wallet_balance"] = _money(rider["wallet_balance"] - from_wallet)
        pid = self._next_id("payment", "PM-")
        self.payments[pid] = {"trip_id": trip_id, "kind": kind, "amount": _money(amount),
                              "wallet": from_wallet, "card": _money(amount - from_wallet)}
        return pid

    # ------------------------------------------------------------------ queries
    def list_zones(self) -> dict:
        """List service zones with current surge multiplier, available driver ids and open requests."""
        out = {}
        for zid, z in sorted(self.zones.items()):
            drivers, open_requests = self._zone_counts(zid)
            out[zid] = dict(copy.deepcopy(z), available_drivers=drivers, open_requests=open_requests)
        return {"success": True, "data": out}

    def get_fare_estimate(self, pickup_zone: str, dropoff_zone: str, category: str) -> dict:
        """Estimate the fare of a ride at the pickup zone's current surge.

        Args:
            pickup_zone: zone id, e.g. "Z-DTN".
            dropoff_zone: zone id.
            category: "economy", "comfort" or "xl".
        Fare = max((base + per_km x km + per_min x min) x surge, minimum) + booking fee.
        """
        if not isinstance(pickup_zone, str) or pickup_zone not in self.zones:
            return self._err(f"Unknown zone {pickup_zone}")
        if not isinstance(dropoff_zone, str) or dropoff_zone not in self.zones:
            return self._err(f"Unknown zone {dropoff_zone}")
        if not isinstance(category, str) or category not in self.fare_rules:
            return self._err(f"Unknown category {category}")
        leg = self._leg(pickup_zone, dropoff_zone)
        if leg is None:
            return self._err(f"No route from {pickup_zone} to {dropoff_zone}")
        surge = self.zones[pickup_zone]["surge_multiplier"]
        total, _ = self._price(category, leg["km"], leg["min"], surge)
        return {"success": True, "data": {"estimate": total, "surge_multiplier": surge, "distance_km": leg["km"],
                                          "duration_min": leg["min"]}}

    def get_trip(self, trip_id: str) -> dict:
        """Get a trip with status, parties, zones, surge, estimate, fare, fees and ratings.

        Args:
            trip_id: trip id, e.g. "TR-7001".
        """
        t, err = self._trip(trip_id)
        if err:
            return err
        return {"success": True, "data": dict(copy.deepcopy(t), trip_id=trip_id)}

    def get_rider(self, rider_id: str) -> dict:
        """Get a rider profile: rating, payment method, wallet balance, status and active trip.

        Args:
            rider_id: rider id, e.g. "RD-1001".
        """
        r = self.riders.get(rider_id) if isinstance(rider_id, str) else None
        if r is None:
            return self._err(f"Rider {rider_id} not found")
        return {"success": True, "data": dict(copy.deepcopy(r), rider_id=rider_id)}

    def get_driver(self, driver_id: str) -> dict:
        """Get a driver profile: vehicle, status, zone, rating, earnings and active trip.

        Args:
            driver_id: driver id, e.g. "DR-201".
        """
        d = self.drivers.get(driver_id) if isinstance(driver_id, str) else None
        if d is None:
            return self._err(f"Driver {driver_id} not found")
        return {"success": True, "data": dict(copy.deepcopy(d), driver_id=driver_id)}

    # ------------------------------------------------------------------ updates
    def request_trip(self, rider_id: str, pickup_zone: str, dropoff_zone: str, category: str) -> dict:
        """Rider requests a ride; the pickup zone's surge is locked in and an estimate computed.

        Args:
            rider_id: rider id.
            pickup_zone: zone id.
            dropoff_zone: zone id (may equal the pickup zone for short hops).
            category: "economy", "comfort" or "xl".
        Rules: rider must be active without another active trip; wallet riders need a wallet balance
        of at least the estimate. The request time is recorded.
        """
        r = self.riders.get(rider_id) if isinstance(rider_id, str) else None
        if r is None:
            return self._err(f"Rider {rider_id} not found")
        if r["status"] != "active":
            return self._err(f"Rider {rider_id} is {r['status']}")
        if r["active_trip_id"]:
            return self._err(f"Rider {rider_id} already has active trip {r['active_trip_id']}")
        est = self.get_fare_estimate(pickup_zone, dropoff_zone, category)
        if not est["success"]:
            return est
        estimate = est["data"]["estimate"]
        if r["payment_method"] == "wallet" and r["wallet_balance"] < estimate:
            return self._err(f"Wallet balance {r['wallet_balance']:.2f} is below the estimate {estimate:.2f}")
        tid = self._next_id("trip", "TR-")
        self.trips[tid] = {
            "rider_id": rider_id, "driver_id": None, "pickup_zone": pickup_zone, "dropoff_zone": dropoff_zone,
            "category": category, "status": "requested",
            "requested_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time())),
            "surge_multiplier": est["data"]["surge_multiplier"], "estimate": estimate, "eta_min": None,
            "cancelled_by": None, "cancel_fee": 0.0, "rating_of_driver": None, "rating_of_rider": None,
        }
        r["active_trip_id"] = tid
        return {"success": True, "message": f"Trip {tid} requested", "trip_id": tid, "estimate": estimate,
                "surge_multiplier": est["data"]["surge_multiplier"]}

    def match_trip(self, trip_id: str, driver_id: str) -> dict:
        """Match a requested trip with a driver.

        Args:
            trip_id: requested trip.
            driver_id: available driver.
        Rules: the driver's vehicle category must serve the requested category (comfort and xl also
        serve economy) and the driver's zone must be within 15 minutes of the pickup zone; the ETA is
        that travel time.
        """
        t, err = self._trip(trip_id)
        if err:
            return err
        if t["status"] != "requested":
            return self._err(f"Trip {trip_id} is {t['status']}")
        d = self.drivers.get(driver_id) if isinstance(driver_id, str) else None
        if d is None:
            return self._err(f"Driver {driver_id} not found")
        if d["status"] != "available":
            return self._err(f"Driver {driver_id} is {d['status']}")
        if t["category"] not in CATEGORY_SERVES.get(d["vehicle"]["category"], []):
            return self._err(f"A {d['vehicle']['category']} vehicle cannot serve a {t['category']} request")
        leg = self._leg(d["zone_id"], t["pickup_zone"])
        if leg is None or leg["min"] > MAX_PICKUP_MIN:
            return self._err(f"Driver {driver_id} is too far from the pickup zone (more than {MAX_PICKUP_MIN} min)")
        t["status"] = "matched"
        t["driver_id"] = driver_id
        t["eta_min"] = leg["min"]
        d["status"] = "en_route"
        d["active_trip_id"] = trip_id
        return {"success": True, "message": f"{d['name']} is on the way", "eta_min": leg["min"],
                "vehicle": f"{d['vehicle']['make']} {d['vehicle']['model']} {d['vehicle']['plate']}"}

    def mark_arrived(self, trip_id: str) -> dict:
        """Driver reports arrival at the pickup point.

        Args:
            trip_id: matched trip.
        """
        t, err = self._trip(trip_id)
        if err:
            return err
        if t["status"] != "matched":
            return self._err(f"Trip {trip_id} is {t['status']}; only matched trips can be marked arrived")
        t["status"] = "arrived"
        return {"success": True, "message": f"Driver arrived for {trip_id}"}

    def start_trip(self, trip_id: str) -> dict:
        """Rider boards and the ride starts.

        Args:
            trip_id: trip whose driver has arrived.
        """
        t, err = self._trip(trip_id)
        if err:
            return err
        if t["status"] != "arrived":
            return self._err(f"Trip {trip_id} is {t['status']}; the driver must arrive first")
        t["status"] = "in_progress"
        self.drivers[t["driver_id"]]["status"] = "on_trip"
        return {"success": True, "message": f"Trip {trip_id} started"}

    def complete_trip(self, trip_id: str, actual_km: float, actual_min: float) -> dict:
        """Finish a ride: compute the fare, charge the rider, pay the driver and free them in the drop-off zone.

        Args:
            trip_id: in-progress trip.
            actual_km: distance driven, > 0 and at most 300.
            actual_min: ride duration in minutes, > 0 and at most 600.
        Rules: fare uses the surge locked at request; the platform keeps the booking fee plus its
        commission percentage of the rest, the driver earns the remainder. Wallet riders pay from the
        wallet first and the remainder by card.
        """
        t, err = self._trip(trip_id)
        if err:
            return err
        if t["status"] != "in_progress":
            return self._err(f"Trip {trip_id} is {t['status']}; only trips in progress can be completed")
        if not _num(actual_km) or not 0 < actual_km <= 300:
            return self._err("actual_km must be > 0 and at most 300")
        if not _num(actual_min) or not 0 < actual_min <= 600:
            return self._err("actual_min must be > 0 and at most 600")
        total, ride = self._price(t["category"], actual_km, actual_min, t["surge_multiplier"])
        commission = _money(ride * self.settings["commission_pct"] / 100.0)
        earnings = _money(ride - commission)
        rider = self.riders[t["rider_id"]]
        d = self.drivers[t["driver_id"]]
        self._charge(trip_id, rider, total, "fare")
        t["status"] = "completed"
        t["fare"] = {"distance_km": actual_km, "duration_min": actual_min, "total": total,
                     "booking_fee": _money(total - ride), "commission": commission, "driver_earnings": earnings}
        rider["active_trip_id"] = None
        d["status"] = "available"
        d["active_trip_id"] = None
        d["zone_id"] = t["dropoff_zone"]
        d["earnings_balance"] = _money(d["earnings_balance"] + earnings)
        d["completed_trips"] += 1
        return {"success": True, "message": f"Trip {trip_id} completed", "fare": total, "driver_earnings": earnings}

    def cancel_trip(self, trip_id: str, cancelled_by: str, reason: str) -> dict:
        """Cancel a trip that has not started, applying cancellation and no-show fees.

        Args:
            trip_id: trip id.
            cancelled_by: "rider" or "driver".
            reason: free text; a driver cancelling after arrival must give "rider_no_show".
        Rules: rider cancelling a requested trip is free; after matching the category cancel fee
        applies unless the driver's ETA was over 10 minutes; after the driver arrived the no-show fee
        applies. A driver may cancel a matched trip without fee to the rider, or an arrived trip as
        rider_no_show, which charges the rider the no-show fee. The driver receives 80% of any fee.
        """
        t, err = self._trip(trip_id)
        if err:
            return err
        if cancelled_by not in ("rider", "driver"):
            return self._err("cancelled_by must be rider or driver")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A reason is required")
        if t["status"] not in ("requested", "matched", "arrived"):
            return self._err(f"Trip {trip_id} is {t['status']} and cannot be cancelled")
        rules = self.fare_rules[t["category"]]
        fee = 0.0
        if cancelled_by == "rider":
            if t["status"] == "matched" and t["eta_min"] <= CANCEL_GRACE_ETA_MIN:
                fee = rules["cancel_fee"]
            elif t["status"] == "arrived":
                fee = rules["no_show_fee"]
        else:
            if t["status"] == "requested":
                return self._err("No driver is assigned to this trip yet")
            if t["status"] == "arrived":
                if reason.strip() != "rider_no_show":
                    return self._err("After arrival a driver may only cancel with reason rider_no_show")
                fee = rules["no_show_fee"]
        fee = _money(fee)
        rider = self.riders[t["rider_id"]]
        t["status"] = "cancelled"
        t["cancelled_by"] = cancelled_by
        t["cancel_fee"] = fee
        rider["active_trip_id"] = None
        if t["driver_id"]:
            d = self.drivers[t["driver_id"]]
            d["status"] = "available"
            d["active_trip_id"] = None
            if fee > 0:
                d["earnings_balance"] = _money(d["earnings_balance"] + fee * DRIVER_SHARE_OF_FEES)
        if fee > 0:
            self._charge(trip_id, rider, fee, "cancellation_fee")
        return {"success": True, "message": f"Trip {trip_id} cancelled by {cancelled_by}", "fee_charged": fee}

    def rate_trip(self, trip_id: str, rater: str, stars: int) -> dict:
        """Rate the other party of a completed trip (rider rates driver, driver rates rider).

        Args:
            trip_id: completed trip.
            rater: "rider" or "driver".
            stars: integer 1-5.
        Rules: one rating per side per trip; the ratee's average is updated (rounded to 2 decimals).
        """
        t, err = self._trip(trip_id)
        if err:
            return err
        if t["status"] != "completed":
            return self._err("Only completed trips can be rated")
        if rater not in ("rider", "driver"):
            return self._err("rater must be rider or driver")
        if not isinstance(stars, int) or isinstance(stars, bool) or not 1 <= stars <= 5:
            return self._err("stars must be an integer from 1 to 5")
        field = "rating_of_driver" if rater == "rider" else "rating_of_rider"
        if t[field] is not None:
            return self._err(f"The {rater} has already rated this trip")
        ratee = self.drivers[t["driver_id"]] if rater == "rider" else self.riders[t["rider_id"]]
        n = ratee["rating_count"]
        ratee["rating"] = round((ratee["rating"] * n + stars) / (n + 1), 2)
        ratee["rating_count"] = n + 1
        t[field] = stars
        return {"success": True, "message": f"Rated {stars} star(s)", "new_average": ratee["rating"]}

    def set_driver_availability(self, driver_id: str, status: str, zone_id: str) -> dict:
        """Driver goes online (available) in a zone or goes offline.

        Args:
            driver_id: driver id.
            status: "available" or "offline".
            zone_id: zone where the driver is.
        Rules: not while en route or on a trip; suspended drivers cannot go online.
        """
        d = self.drivers.get(driver_id) if isinstance(driver_id, str) else None
        if d is None:
            return self._err(f"Driver {driver_id} not found")
        if status not in ("available", "offline"):
            return self._err("status must be available or offline")
        if not isinstance(zone_id, str) or zone_id not in self.zones:
            return self._err(f"Unknown zone {zone_id}")
        if d["status"] in ("en_route", "on_trip"):
            return self._err(f"Driver {driver_id} is {d['status']} with trip {d['active_trip_id']}")
        if d["status"] == "suspended":
            return self._err(f"Driver {driver_id} is suspended")
        if d["status"] == status and d["zone_id"] == zone_id:
            return self._err(f"Driver {driver_id} is already {status} in {zone_id}")
        d["status"] = status
        d["zone_id"] = zone_id
        return {"success": True, "message": f"Driver {driver_id} is {status} in {zone_id}"}

    def update_surge(self, zone_id: str) -> dict:
        """Recalculate a zone's surge multiplier from open requests and available drivers.

        Args:
            zone_id: zone id.
        Rules: 1.0 when requests do not exceed drivers; otherwise 1 + 0.5 x (requests - drivers) /
        max(drivers, 1), rounded to 0.1 and capped at the platform maximum.
        """
        if not isinstance(zone_id, str) or zone_id not in self.zones:
            return self._err(f"Unknown zone {zone_id}")
        drivers, demand = self._zone_counts(zone_id)
        supply = len(drivers)
        if demand <= supply:
            surge = 1.0
        else:
            surge = min(round(1 + 0.5 * (demand - supply) / max(supply, 1), 1), self.settings["max_surge"])
        old = self.zones[zone_id]["surge_multiplier"]
        self.zones[zone_id]["surge_multiplier"] = surge
        return {"success": True, "message": f"Surge in {zone_id} is {surge}x (was {old}x)", "open_requests": demand,
                "available_drivers": supply, "surge_multiplier": surge}
