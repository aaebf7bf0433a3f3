"""Greenhouse climate and irrigation controller: growing zones with climate setpoints, sensors,
irrigation valves with a shared daily water budget, threshold alarms and crop batches whose
growth stage drives the zone setpoints.

The controller's clock is held in the state (``current_time``, local ISO time); day setpoints
apply from 06:00 to 19:59, night setpoints otherwise.
"""

import copy
import datetime
import math

SETPOINT_KEYS = ("temp_day", "temp_night", "humidity_min", "humidity_max", "soil_moisture_min")
SETPOINT_RANGES = {"temp_day": (5.0, 40.0), "temp_night": (5.0, 40.0), "humidity_min": (20.0, 98.0),
                   "humidity_max": (20.0, 98.0), "soil_moisture_min": (5.0, 80.0)}
SENSOR_RANGES = {"temperature": (-10.0, 60.0), "humidity": (0.0, 100.0), "soil_moisture": (0.0, 100.0),
                 "co2": (200.0, 5000.0), "light": (0.0, 2500.0)}
ZONE_MODES = ("auto", "manual", "maintenance")


def _parse_time(value):
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value)
    except ValueError:
        return None


def _parse_date(value):
    if not isinstance(value, str):
        return None
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        return None


def _is_number(value):
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


class GreenhouseController:
    """Supervisory controller of a commercial glasshouse site."""

    HIGH_TEMP_MARGIN = 4.0
    CRITICAL_TEMP_MARGIN = 8.0
    LOW_TEMP_MARGIN = 3.0

    def __init__(self, init_config: dict):
        self.current_time = ""
        self.water_budget = {}
        self.operators = {}
        self.crop_profiles = {}
        self.zones = {}
        self.sensors = {}
        self.valves = {}
        self.irrigation_log = {}
        self.alarms = {}
        self.crop_batches = {}

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _find(collection, key):
        """Record stored under `key`, or None for unknown or non-string keys."""
        return collection.get(key) if isinstance(key, str) else None

    def _now(self):
        return _parse_time(self.current_time)

    def _today(self):
        return self._now().date()

    def _next_id(self, collection, prefix):
        highest = 0
        for key in collection:
            digits = key[len(prefix):]
            if key.startswith(prefix) and digits.isdigit():
                highest = max(highest, int(digits))
        return f"{prefix}{highest + 1}"

    def _is_day(self):
        return 6 <= self._now().hour < 20

    def _open_alarm(self, zone_id, kind):
        for alarm_id, alarm in self.alarms.items():
            if alarm["zone_id"] == zone_id and alarm["kind"] == kind and alarm["status"] != "cleared":
                return alarm_id
        return None

    def _raise_alarm(self, zone_id, sensor_id, kind, severity, value, threshold):
        alarm_id = self._next_id(self.alarms, "AL")
        self.alarms[alarm_id] = {"zone_id": zone_id, "sensor_id": sensor_id, "kind": kind, "severity": severity,
                                 "value": value, "threshold": threshold, "raised_at": self.current_time,
                                 "status": "active", "acknowledged_by": None, "acknowledged_at": None,
                                 "cleared_by": None, "cleared_at": None}
        return alarm_id

    def _violation(self, kind, value, setpoints):
        """(alarm kind, severity, threshold) for a sensor value outside the zone setpoints, else None."""
        if kind == "temperature":
            target = setpoints["temp_day"] if self._is_day() else setpoints["temp_night"]
            if value > target + self.CRITICAL_TEMP_MARGIN:
                return "high_temp", "critical", target + self.CRITICAL_TEMP_MARGIN
            if value > target + self.HIGH_TEMP_MARGIN:
                return "high_temp", "warning", target + self.HIGH_TEMP_MARGIN
            if value < target - self.LOW_TEMP_MARGIN:
                return "low_temp", "warning", target - self.LOW_TEMP_MARGIN
        elif kind == "humidity":
            if value > setpoints["humidity_max"]:
                return "high_humidity", "warning", setpoints["humidity_max"]
            if value < setpoints["humidity_min"]:
                return "low_humidity", "warning", setpoints["humidity_min"]
        elif kind == "soil_moisture":
            if value < setpoints["soil_moisture_min"]:
                severity = "critical" if value < setpoints["soil_moisture_min"] - 10 else "warning"
                return "low_moisture", severity, setpoints["soil_moisture_min"]
        return None

    def _operator_error(self, operator_id):
        if self._find(self.operators, operator_id) is None:
            return f"Operator {operator_id} not found"
        return None

    def _apply_profile(self, zone, crop, stage):
        profile = self.crop_profiles[crop]["stages"][stage]
        for key in SETPOINT_KEYS:
            zone["setpoints"][key] = profile[key]
        zone["setpoint_source"] = f"profile:{crop}/{stage}"

    # ------------------------------------------------------------------ queries

    def get_zone_status(self, zone_id: str) -> dict:
        """Show a zone: mode, setpoints, crop batch, latest sensor values, valves and open alarms.

        Args:
            zone_id: Zone id, e.g. "Z1".

        Returns:
            The zone record plus `sensors`, `valves` and `open_alarms`.
        """
        zone = self._find(self.zones, zone_id)
        if zone is None:
            return {"success": False, "error": f"Zone {zone_id} not found"}
        sensors = [{"sensor_id": sid, "kind": s["kind"], "last_value": s["last_value"], "unit": s["unit"],
                    "status": s["status"]} for sid, s in sorted(self.sensors.items()) if s["zone_id"] == zone_id]
        valves = [{"valve_id": vid, "status": v["status"], "flow_lpm": v["flow_lpm"]}
                  for vid, v in sorted(self.valves.items()) if v["zone_id"] == zone_id]
        alarms = [aid for aid, a in sorted(self.alarms.items()) if a["zone_id"] == zone_id and a["status"] != "cleared"]
        data = dict(zone, zone_id=zone_id, sensors=sensors, valves=valves, open_alarms=alarms)
        return {"success": True, "data": copy.deepcopy(data)}

    def list_active_alarms(self) -> dict:
        """List all alarms that are not cleared (active or acknowledged), critical first.

        Returns:
            Alarm id, zone, kind, severity, value, status and when it was raised.
        """
        rows = [{"alarm_id": aid, "zone_id": a["zone_id"], "kind": a["kind"], "severity": a["severity"],
                 "value": a["value"], "status": a["status"], "raised_at": a["raised_at"]}
                for aid, a in self.alarms.items() if a["status"] != "cleared"]
        rows.sort(key=lambda r: (r["severity"] != "critical", r["raised_at"], r["alarm_id"]))
        return {"success": True, "data": rows}

    def get_crop_batch(self, batch_id: str) -> dict:
        """Show a crop batch with its stage, days in stage and the next stage of its crop profile.

        Args:
            batch_id: Batch id, e.g. "B301".

        Returns:
            The batch record plus `days_in_stage` and `next_stage` (null at the final stage).
        """
        batch = self._find(self.crop_batches, batch_id)
        if batch is None:
            return {"success": False, "error": f"Crop batch {batch_id} not found"}
        order = self.crop_profiles[batch["crop"]]["stage_order"]
        index = order.index(batch["stage"]) if batch["stage"] in order else len(order) - 1
        data = dict(batch, batch_id=batch_id,
                    days_in_stage=(self._today() - _parse_date(batch["stage_started"])).days,
                    next_stage=order[index + 1] if batch["status"] == "growing" and index + 1 < len(order) else None)
        return {"success": True, "data": copy.deepcopy(data)}

    # ------------------------------------------------------------------ sensors and alarms

    def record_sensor_reading(self, sensor_id: str, value: float) -> dict:
        """Store a new value from a sensor and check it against the zone setpoints. Temperature
        is compared with the day or night target (high above +4 °C, critical above +8 °C, low
        below -3 °C); humidity with its min/max; soil moisture with its minimum (critical 10
        points below). A violation raises an alarm unless the zone already has an open alarm of
        that kind.

        Args:
            sensor_id: Sensor id, e.g. "S101".
            value: Measured value in the sensor's unit.

        Returns:
            The stored value and any alarm raised.
        """
        sensor = self._find(self.sensors, sensor_id)
        if sensor is None:
            return {"success": False, "error": f"Sensor {sensor_id} not found"}
        if not _is_number(value):
            return {"success": False, "error": "value must be a number"}
        if sensor["status"] != "ok":
            return {"success": False,
                    "error": f"Sensor {sensor_id} is marked {sensor['status']}; repair it before logging values"}
        low, high = SENSOR_RANGES[sensor["kind"]]
        if not low <= value <= high:
            return {"success": False,
                    "error": f"{value} is outside the physical range {low}-{high} of a {sensor['kind']} sensor"}
        sensor["last_value"] = float(value)
        sensor["last_updated"] = self.current_time
        zone = self.zones[sensor["zone_id"]]
        alarm_id = None
        violation = self._violation(sensor["kind"], value, zone["setpoints"])
        if violation and zone["mode"] != "maintenance" and self._open_alarm(sensor["zone_id"], violation[0]) is None:
            kind, severity, threshold = violation
            alarm_id = self._raise_alarm(sensor["zone_id"], sensor_id, kind, severity, float(value), float(threshold))
        return {"success": True, "message": f"{sensor['kind']} {value} {sensor['unit']} recorded for {sensor_id}",
                "alarm_id": alarm_id}

    def mark_sensor_fault(self, sensor_id: str, note: str) -> dict:
        """Take a misbehaving sensor out of service and raise a "sensor_fault" alarm on its zone.

        Args:
            sensor_id: Sensor id, e.g. "S102".
            note: What is wrong (at least 5 characters).

        Returns:
            The alarm raised.
        """
        sensor = self._find(self.sensors, sensor_id)
        if sensor is None:
            return {"success": False, "error": f"Sensor {sensor_id} not found"}
        if not isinstance(note, str) or len(note.strip()) < 5:
            return {"success": False, "error": "note must be at least 5 characters"}
        if sensor["status"] == "fault":
            return {"success": False, "error": f"Sensor {sensor_id} is already marked faulty"}
        sensor["status"] = "fault"
        sensor["fault_note"] = note.strip()
        alarm_id = self._raise_alarm(sensor["zone_id"], sensor_id, "sensor_fault", "warning", None, None)
        return {"success": True, "message": f"Sensor {sensor_id} taken out of service", "alarm_id": alarm_id}

    def acknowledge_alarm(self, alarm_id: str, operator_id: str) -> dict:
        """Acknowledge an active alarm (someone is dealing with it).

        Args:
            alarm_id: Alarm id, e.g. "AL501".
            operator_id: Operator acknowledging, e.g. "OP1".

        Returns:
            Confirmation message.
        """
        alarm = self._find(self.alarms, alarm_id)
        if alarm is None:
            return {"success": False, "error": f"Alarm {alarm_id} not found"}
        error = self._operator_error(operator_id)
        if error:
            return {"success": False, "error": error}
        if alarm["status"] != "active":
            return {"success": False, "error": f"Alarm {alarm_id} is {alarm['status']}"}
        alarm["status"] = "acknowledged"
        alarm["acknowledged_by"] = operator_id
        alarm["acknowledged_at"] = self.current_time
        return {"success": True, "message": f"Alarm {alarm_id} acknowledged by {self.operators[operator_id]['name']}"}

    def clear_alarm(self, alarm_id: str, operator_id: str) -> dict:
        """Clear an alarm once its cause is gone: the sensor's latest value must be back within
        the zone setpoints (for sensor faults, the sensor must be back in service). Clearing a
        critical alarm needs a manager.

        Args:
            alarm_id: Alarm id, e.g. "AL501".
            operator_id: Operator clearing it, e.g. "OP1".

        Returns:
            Confirmation message.
        """
        alarm = self._find(self.alarms, alarm_id)
        if alarm is None:
            return {"success": False, "error": f"Alarm {alarm_id} not found"}
        error = self._operator_error(operator_id)
        if error:
            return {"success": False, "error": error}
        if alarm["status"] == "cleared":
            return {"success": False, "error": f"Alarm {alarm_id} is already cleared"}
        if alarm["severity"] == "critical" and self.operators[operator_id]["role"] != "manager":
            return {"success": False, "error": "Critical alarms can only be cleared by a manager"}
        sensor = self.sensors[alarm["sensor_id"]]
        if alarm["kind"] == "sensor_fault":
            if sensor["status"] != "ok":
                return {"success": False, "error": f"Sensor {alarm['sensor_id']} is still out of service"}
        else:
            violation = self._violation(sensor["kind"], sensor["last_value"], self.zones[alarm["zone_id"]]["setpoints"])
            if violation and violation[0] == alarm["kind"]:
                return {"success": False,
                        "error": f"Condition persists: latest {sensor['kind']} reading is {sensor['last_value']}"}
        alarm["status"] = "cleared"
        alarm["cleared_by"] = operator_id
        alarm["cleared_at"] = self.current_time
        return {"success": True, "message": f"Alarm {alarm_id} cleared"}

    # ------------------------------------------------------------------ climate and irrigation

    def update_setpoints(self, zone_id: str, setpoints: dict) -> dict:
        """Override some of a zone's climate setpoints by hand; the zone's setpoints are then
        marked as manual. Allowed keys: temp_day, temp_night (5-40 °C), humidity_min,
        humidity_max (20-98 %RH), soil_moisture_min (5-80 %). After the change the day
        temperature must not be below the night temperature and humidity_min must stay at least
        5 points below humidity_max. Zones in maintenance cannot be changed.

        Args:
            zone_id: Zone id, e.g. "Z1".
            setpoints: Object with the setpoints to change, e.g. {"temp_day": 23.5, "humidity_max": 78}.

        Returns:
            The zone's new setpoints.
        """
        zone = self._find(self.zones, zone_id)
        if zone is None:
            return {"success": False, "error": f"Zone {zone_id} not found"}
        if zone["mode"] == "maintenance":
            return {"success": False, "error": f"Zone {zone_id} is in maintenance"}
        if not isinstance(setpoints, dict) or not setpoints:
            return {"success": False, "error": "setpoints must be a non-empty object"}
        merged = dict(zone["setpoints"])
        for key, value in setpoints.items():
            if key not in SETPOINT_RANGES:
                return {"success": False, "error": f"Unknown setpoint '{key}'"}
            low, high = SETPOINT_RANGES[key]
            if not _is_number(value) or not low <= value <= high:
                return {"success": False, "error": f"{key} must be a number from {low} to {high}"}
            merged[key] = float(value)
        if merged["temp_day"] < merged["temp_night"]:
            return {"success": False, "error": "temp_day cannot be below temp_night"}
        if merged["humidity_min"] > merged["humidity_max"] - 5:
            return {"success": False, "error": "humidity_min must be at least 5 points below humidity_max"}
        if merged == zone["setpoints"]:
            return {"success": False, "error": "Setpoints are unchanged"}
        zone["setpoints"] = merged
        zone["setpoint_source"] = "manual"
        return {"success": True, "message": f"Setpoints of {zone_id} updated", "setpoints": dict(merged)}

    def set_zone_mode(self, zone_id: str, mode: str) -> dict:
        """Switch a zone between "auto" (setpoints follow the crop profile), "manual" (setpoints
        stay as set by hand) and "maintenance" (cleaning; only when the zone holds no growing
        crop). Leaving maintenance for auto with a crop present re-applies the profile.

        Args:
            zone_id: Zone id, e.g. "Z3".
            mode: "auto", "manual" or "maintenance".

        Returns:
            Confirmation message.
        """
        zone = self._find(self.zones, zone_id)
        if zone is None:
            return {"success": False, "error": f"Zone {zone_id} not found"}
        if mode not in ZONE_MODES:
            return {"success": False, "error": f"mode must be one of {', '.join(ZONE_MODES)}"}
        if zone["mode"] == mode:
            return {"success": False, "error": f"Zone {zone_id} is already in {mode} mode"}
        if mode == "maintenance" and zone["crop_batch_id"] is not None:
            return {"success": False,
                    "error": f"Zone {zone_id} still holds batch {zone['crop_batch_id']}; harvest it first"}
        zone["mode"] = mode
        if mode == "auto" and zone["crop_batch_id"] is not None:
            batch = self.crop_batches[zone["crop_batch_id"]]
            self._apply_profile(zone, batch["crop"], batch["stage"])
        return {"success": True, "message": f"Zone {zone_id} set to {mode}"}

    def run_irrigation(self, valve_id: str, minutes: int, operator_id: str) -> dict:
        """Run an irrigation cycle on a valve and log it. Water used is flow rate x minutes and
        counts against the site's daily water budget.

        Rules: the valve must be in working order; its zone must not be in maintenance and must
        hold a growing crop; minutes is a whole number from 1 to the valve's maximum run time;
        the cycle must fit in the remaining daily budget.

        Args:
            valve_id: Valve id, e.g. "V11".
            minutes: Run time in whole minutes.
            operator_id: Operator starting the cycle, e.g. "OP1".

        Returns:
            The log id, litres used and budget left today.
        """
        valve = self._find(self.valves, valve_id)
        if valve is None:
            return {"success": False, "error": f"Valve {valve_id} not found"}
        error = self._operator_error(operator_id)
        if error:
            return {"success": False, "error": error}
        if isinstance(minutes, bool) or not isinstance(minutes, int) or minutes < 1:
            return {"success": False, "error": "minutes must be a positive integer"}
        if minutes > valve["max_run_minutes"]:
            return {"success": False,
                    "error": f"Valve {valve_id} may run at most {valve['max_run_minutes']} minutes per cycle"}
        if valve["status"] != "ok":
            return {"success": False, "error": f"Valve {valve_id} is {valve['status']}"}
        zone = self.zones[valve["zone_id"]]
        if zone["mode"] == "maintenance":
            return {"success": False, "error": f"Zone {valve['zone_id']} is in maintenance"}
        if zone["crop_batch_id"] is None:
            return {"success": False, "error": f"Zone {valve['zone_id']} has no crop to irrigate"}
        liters = round(valve["flow_lpm"] * minutes, 1)
        left = round(self.water_budget["daily_limit_l"] - self.water_budget["used_today_l"], 1)
        if liters > left:
            return {"success": False,
                    "error": f"Cycle needs {liters} L but only {left} L of today's water budget is left"}
        log_id = self._next_id(self.irrigation_log, "IR")
        self.irrigation_log[log_id] = {"valve_id": valve_id, "zone_id": valve["zone_id"], "started_at": self.current_time,
                                       "minutes": minutes, "liters": liters, "operator_id": operator_id,
                                       "trigger": "manual"}
        valve["total_liters"] = round(valve["total_liters"] + liters, 1)
        valve["last_run_at"] = self.current_time
        self.water_budget["used_today_l"] = round(self.water_budget["used_today_l"] + liters, 1)
        return {"success": True, "message": f"Irrigated {valve['zone_id']} with {liters} L", "log_id": log_id,
                "liters": liters, "budget_left_l": round(left - liters, 1)}

    # ------------------------------------------------------------------ crop batches

    def start_crop_batch(self, zone_id: str, crop: str, variety: str, plant_count: int, sown_date: str) -> dict:
        """Plant a new crop batch in an empty zone. The zone switches to auto and takes the
        setpoints of the crop's first stage.

        Rules: the zone must hold no growing batch and not be in maintenance; the crop must have
        a profile; plant_count is 1 to area x the profile's maximum plants per m²; the sowing
        date may not be in the future or more than 60 days back.

        Args:
            zone_id: Zone id, e.g. "Z2".
            crop: Crop with a profile, e.g. "tomato", "lettuce", "basil", "cucumber".
            variety: Cultivar name (2-40 characters), e.g. "Moneymaker".
            plant_count: Number of plants.
            sown_date: ISO date of sowing or transplanting.

        Returns:
            The new batch id and its expected harvest date.
        """
        zone = self._find(self.zones, zone_id)
        if zone is None:
            return {"success": False, "error": f"Zone {zone_id} not found"}
        if zone["crop_batch_id"] is not None:
            return {"success": False, "error": f"Zone {zone_id} already holds batch {zone['crop_batch_id']}"}
        if zone["mode"] == "maintenance":
            return {"success": False, "error": f"Zone {zone_id} is in maintenance; set it to auto or manual first"}
        profile = self._find(self.crop_profiles, crop)
        if profile is None:
            return {"success": False, "error": f"No crop profile for '{crop}'"}
        if not isinstance(variety, str) or not 2 <= len(variety.strip()) <= 40:
            return {"success": False, "error": "variety must be 2 to 40 characters"}
        capacity = int(zone["area_m2"] * profile["max_plants_per_m2"])
        if isinstance(plant_count, bool) or not isinstance(plant_count, int) or not 1 <= plant_count <= capacity:
            return {"success": False, "error": f"plant_count must be an integer from 1 to {capacity} for this zone"}
        sown = _parse_date(sown_date)
        if sown is None:
            return {"success": False, "error": f"Invalid sown_date: {sown_date!r}"}
        if sown > self._today() or (self._today() - sown).days > 60:
            return {"success": False, "error": "sown_date must be within the last 60 days and not in the future"}
        first = profile["stage_order"][0]
        batch_id = self._next_id(self.crop_batches, "B")
        expected = (sown + datetime.timedelta(days=profile["days_to_harvest"])).isoformat()
        self.crop_batches[batch_id] = {"crop": crop, "variety": variety.strip(), "zone_id": zone_id,
                                       "plant_count": plant_count, "sown_date": sown_date, "stage": first,
                                       "stage_started": sown_date, "expected_harvest": expected, "status": "growing",
                                       "harvested_on": None, "yield_kg": None}
        zone["crop_batch_id"] = batch_id
        zone["mode"] = "auto"
        self._apply_profile(zone, crop, first)
        return {"success": True, "message": f"Batch {batch_id} of {crop} started in {zone_id}", "batch_id": batch_id,
                "expected_harvest": expected}

    def advance_crop_stage(self, batch_id: str) -> dict:
        """Move a growing batch to the next stage of its crop profile once it has spent the
        stage's minimum number of days. If its zone is in auto mode, the zone takes the new
        stage's setpoints; zones in manual mode keep theirs.

        Args:
            batch_id: Batch id, e.g. "B301".

        Returns:
            The new stage and whether setpoints were applied.
        """
        batch = self._find(self.crop_batches, batch_id)
        if batch is None:
            return {"success": False, "error": f"Crop batch {batch_id} not found"}
        if batch["status"] != "growing":
            return {"success": False, "error": f"Batch {batch_id} is {batch['status']}"}
        profile = self.crop_profiles[batch["crop"]]
        order = profile["stage_order"]
        index = order.index(batch["stage"])
        if index + 1 >= len(order):
            return {"success": False, "error": f"Batch {batch_id} is in its final stage ({batch['stage']}); harvest it"}
        days = (self._today() - _parse_date(batch["stage_started"])).days
        needed = profile["stages"][batch["stage"]]["min_days"]
        if days < needed:
            return {"success": False,
                    "error": f"Batch {batch_id} has been {days} days in {batch['stage']}; {needed} are needed"}
        new_stage = order[index + 1]
        batch["stage"] = new_stage
        batch["stage_started"] = self._today().isoformat()
        zone = self.zones[batch["zone_id"]]
        applied = zone["mode"] == "auto"
        if applied:
            self._apply_profile(zone, batch["crop"], new_stage)
        return {"success": True, "message": f"Batch {batch_id} advanced to {new_stage}", "stage": new_stage,
                "setpoints_applied": applied}

    def harvest_batch(self, batch_id: str, yield_kg: float) -> dict:
        """Record the harvest of a batch in its final stage. The zone is emptied and put into
        maintenance for cleaning; its open alarms are cleared.

        Rules: the batch must be growing and in the final stage of its profile; the yield must be
        positive and not above plant_count x the profile's maximum yield per plant.

        Args:
            batch_id: Batch id, e.g. "B302".
            yield_kg: Harvested weight in kg (at most one decimal).

        Returns:
            The yield per plant.
        """
        batch = self._find(self.crop_batches, batch_id)
        if batch is None:
            return {"success": False, "error": f"Crop batch {batch_id} not found"}
        if batch["status"] != "growing":
            return {"success": False, "error": f"Batch {batch_id} is already {batch['status']}"}
        profile = self.crop_profiles[batch["crop"]]
        if batch["stage"] != profile["stage_order"][-1]:
            return {"success": False, "error": f"Batch {batch_id} is only at {batch['stage']}; harvest happens in "
                                               f"{profile['stage_order'][-1]}"}
        limit = round(batch["plant_count"] * profile["max_yield_kg_per_plant"], 1)
        if not _is_number(yield_kg) or yield_kg <= 0 or round(yield_kg, 1) != yield_kg or yield_kg > limit:
            return {"success": False,
                    "error": f"yield_kg must be positive, with one decimal at most, and not above {limit}"}
        batch["status"] = "harvested"
        batch["harvested_on"] = self._today().isoformat()
        batch["yield_kg"] = float(yield_kg)
        zone = self.zones[batch["zone_id"]]
        zone["crop_batch_id"] = None
        zone["mode"] = "maintenance"
        cleared = []
        for alarm_id, alarm in sorted(self.alarms.items()):
            if alarm["zone_id"] == batch["zone_id"] and alarm["status"] != "cleared" and alarm["kind"] != "sensor_fault":
                alarm["status"] = "cleared"
                alarm["cleared_by"] = "system"
                alarm["cleared_at"] = self.current_time
                cleared.append(alarm_id)
        return {"success": True, "message": f"Batch {batch_id} harvested: {float(yield_kg)} kg",
                "yield_per_plant_kg": round(yield_kg / batch["plant_count"], 3), "alarms_cleared": cleared}
