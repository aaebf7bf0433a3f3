"""Smart-home hub: homes with members and roles, rooms, devices (lights, thermostats, locks,
plugs, cameras, sensors), scenes, mode-triggered automations and keypad access codes.

The hub's local clock is held in the state (``current_time``, ISO local time); it decides
whether an access code is inside its validity window. New access codes are stamped with the
wall-clock creation time.
"""

import copy
import datetime

ROLE_RANK = {"guest": 0, "member": 1, "admin": 2, "owner": 3}
MODES = ("home", "away", "night", "vacation")
THERMOSTAT_MODES = ("heat", "cool", "auto", "off")
ECO_MAX_HEAT_C = 18.0


def _parse_time(value):
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value)
    except ValueError:
        return None


class SmartHome:
    """Cloud hub that the household's app and wall panels talk to."""

    def __init__(self, init_config: dict):
        self.current_time = ""
        self.users = {}
        self.homes = {}
        self.rooms = {}
        self.devices = {}
        self.scenes = {}
        self.automations = {}
        self.access_codes = {}

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _find(collection, key):
        """Record stored under `key`, or None for unknown or non-string keys."""
        return collection.get(key) if isinstance(key, str) else None

    def _next_id(self, collection, prefix):
        highest = 0
        for key in collection:
            digits = key[len(prefix):]
            if key.startswith(prefix) and digits.isdigit():
                highest = max(highest, int(digits))
        return f"{prefix}{highest + 1}"

    def _role(self, home_id, user_id):
        home = self._find(self.homes, home_id)
        if home is None or not isinstance(user_id, str):
            return None
        return home["members"].get(user_id)

    def _authorize(self, home_id, user_id, minimum, action):
        """None when the user holds at least `minimum` role in the home, else an error."""
        if self._find(self.users, user_id) is None:
            return f"User {user_id} not found"
        role = self._role(home_id, user_id)
        if role is None:
            return f"User {user_id} is not a member of home {home_id}"
        if ROLE_RANK[role] < ROLE_RANK[minimum]:
            return f"A {role} cannot {action}; {minimum} role or higher is required"
        return None

    def _device_for(self, device_id, kind, user_id, minimum, action):
        device = self._find(self.devices, device_id)
        if device is None:
            return None, f"Device {device_id} not found"
        if device["type"] != kind:
            return None, f"Device {device_id} is a {device['type']}, not a {kind}"
        error = self._authorize(device["home_id"], user_id, minimum, action)
        if error:
            return None, error
        if not device["online"]:
            return None, f"Device {device_id} ({device['name']}) is offline"
        return device, None

    def _validate_action(self, device, settings):
        """Check one scene action against the device type; returns an error string or None."""
        if not isinstance(settings, dict) or not settings:
            return f"Action for {device['name']} must be a non-empty object"
        kind = device["type"]
        for key, value in settings.items():
            if kind in ("light", "plug") and key == "power":
                if value not in ("on", "off"):
                    return "power must be 'on' or 'off'"
            elif kind == "light" and key == "brightness":
                if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
                    return "brightness must be an integer from 1 to 100"
            elif kind == "light" and key == "color_temp":
                if device["state"].get("color_temp") is None:
                    return f"{device['name']} does not support colour temperature"
                if isinstance(value, bool) or not isinstance(value, int) or not 2200 <= value <= 6500:
                    return "color_temp must be an integer from 2200 to 6500 K"
            elif kind == "thermostat" and key == "mode":
                if value not in THERMOSTAT_MODES:
                    return f"thermostat mode must be one of {', '.join(THERMOSTAT_MODES)}"
            elif kind == "thermostat" and key == "target_c":
                if isinstance(value, bool) or not isinstance(value, (int, float)) \
                        or not device["min_target_c"] <= value <= device["max_target_c"]:
                    return f"target_c must be between {device['min_target_c']} and {device['max_target_c']}"
            elif kind == "lock" and key == "locked":
                if value is not True:
                    return "Scenes may lock doors but never unlock them"
            elif kind == "camera" and key == "recording":
                if not isinstance(value, bool):
                    return "recording must be true or false"
            else:
                return f"'{key}' is not a setting of a {kind}"
        return None

    def _run_scene(self, scene_id):
        """Apply a scene to its online devices; returns (applied device ids, skipped ids)."""
        scene = self.scenes[scene_id]
        applied, skipped = [], []
        for device_id, settings in scene["actions"].items():
            device = self.devices.get(device_id)
            if device is None or not device["online"] or (device["type"] == "lock" and (
                    device["state"]["jammed"] or (device["battery"] is not None and device["battery"] < 5))):
                skipped.append(device_id)
                continue
            for key, value in settings.items():
                device["state"][key] = float(value) if key == "target_c" else value
            applied.append(device_id)
        scene["last_activated"] = self.current_time
        self.homes[scene["home_id"]]["active_scene"] = scene_id
        return applied, skipped

    # ------------------------------------------------------------------ queries

    def get_home(self, home_id: str) -> dict:
        """Show a home with its mode, members, rooms and a one-line summary of every device.

        Args:
            home_id: Home id, e.g. "HM1".

        Returns:
            The home record plus `rooms` and `devices`.
        """
        home = self._find(self.homes, home_id)
        if home is None:
            return {"success": False, "error": f"Home {home_id} not found"}
        rooms = [{"room_id": rid, "name": r["name"], "floor": r["floor"]}
                 for rid, r in sorted(self.rooms.items()) if r["home_id"] == home_id]
        devices = [{"device_id": did, "name": d["name"], "type": d["type"], "room_id": d["room_id"],
                    "online": d["online"]} for did, d in sorted(self.devices.items()) if d["home_id"] == home_id]
        return {"success": True, "data": copy.deepcopy(dict(home, home_id=home_id, rooms=rooms, devices=devices))}

    def get_device(self, device_id: str) -> dict:
        """Show one device with its full current state.

        Args:
            device_id: Device id, e.g. "D1001".

        Returns:
            The device record with its id.
        """
        device = self._find(self.devices, device_id)
        if device is None:
            return {"success": False, "error": f"Device {device_id} not found"}
        return {"success": True, "data": copy.deepcopy(dict(device, device_id=device_id))}

    def list_devices_needing_attention(self) -> dict:
        """List devices that are offline, jammed, or have a battery below 15%, across all homes.

        Returns:
            Device id, home, name, type and the problems found.
        """
        rows = []
        for device_id, device in sorted(self.devices.items()):
            problems = []
            if not device["online"]:
                problems.append("offline")
            if device["battery"] is not None and device["battery"] < 15:
                problems.append(f"battery {device['battery']}%")
            if device["type"] == "lock" and device["state"].get("jammed"):
                problems.append("jammed")
            if problems:
                rows.append({"device_id": device_id, "home_id": device["home_id"], "name": device["name"],
                             "type": device["type"], "problems": problems})
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ device control

    def set_light(self, device_id: str, user_id: str, power: str, brightness: int | None = None,
                  color_temp: int | None = None) -> dict:
        """Switch a light on or off and optionally set brightness and colour temperature.
        Any household member, guests included, may control lights.

        Args:
            device_id: Light device id, e.g. "D1001".
            user_id: User issuing the command, e.g. "U1".
            power: "on" or "off".
            brightness: 1-100 %, only when switching on.
            color_temp: 2200-6500 K, only for tunable-white lights and only when switching on.

        Returns:
            The light's new state.
        """
        device, error = self._device_for(device_id, "light", user_id, "guest", "control lights")
        if error:
            return {"success": False, "error": error}
        if power not in ("on", "off"):
            return {"success": False, "error": "power must be 'on' or 'off'"}
        if power == "off" and (brightness is not None or color_temp is not None):
            return {"success": False, "error": "brightness and color_temp can only be set when switching on"}
        settings = {"power": power}
        if brightness is not None:
            settings["brightness"] = brightness
        if color_temp is not None:
            settings["color_temp"] = color_temp
        error = self._validate_action(device, settings)
        if error:
            return {"success": False, "error": error}
        device["state"].update(settings)
        return {"success": True, "message": f"{device['name']} turned {power}", "state": copy.deepcopy(device["state"])}

    def set_thermostat(self, device_id: str, user_id: str, mode: str, target_c: float) -> dict:
        """Set a thermostat's mode and target temperature. Guests may not change heating.
        While the home is in "away" or "vacation" mode, heating targets are capped at 18 °C (eco).

        Args:
            device_id: Thermostat device id, e.g. "D1004".
            user_id: User issuing the command, e.g. "U1".
            mode: "heat", "cool", "auto" or "off".
            target_c: Target temperature in °C (within the device's range, in 0.5 steps).

        Returns:
            The thermostat's new state.
        """
        device, error = self._device_for(device_id, "thermostat", user_id, "member", "change the heating")
        if error:
            return {"success": False, "error": error}
        error = self._validate_action(device, {"mode": mode, "target_c": target_c})
        if error:
            return {"success": False, "error": error}
        if round(target_c * 2) != target_c * 2:
            return {"success": False, "error": "target_c must be a multiple of 0.5"}
        home = self.homes[device["home_id"]]
        if home["mode"] in ("away", "vacation") and mode == "heat" and target_c > ECO_MAX_HEAT_C:
            return {"success": False,
                    "error": f"Home is in {home['mode']} mode; heating is capped at {ECO_MAX_HEAT_C} °C"}
        device["state"]["mode"] = mode
        device["state"]["target_c"] = float(target_c)
        return {"success": True, "message": f"{device['name']} set to {mode} {float(target_c)} °C",
                "state": copy.deepcopy(device["state"])}

    def set_lock(self, device_id: str, user_id: str, locked: bool) -> dict:
        """Lock or unlock a door lock from the app. Guests may lock but not unlock. A jammed lock
        or one with a battery below 5% refuses to move.

        Args:
            device_id: Lock device id, e.g. "D1005".
            user_id: User issuing the command, e.g. "U1".
            locked: true to lock, false to unlock.

        Returns:
            The lock's new state.
        """
        if not isinstance(locked, bool):
            return {"success": False, "error": "locked must be true or false"}
        device, error = self._device_for(device_id, "lock", user_id, "guest" if locked else "member",
                                         "lock doors" if locked else "unlock doors")
        if error:
            return {"success": False, "error": error}
        if device["state"]["jammed"]:
            return {"success": False, "error": f"{device['name']} is jammed; clear it manually"}
        if device["battery"] is not None and device["battery"] < 5:
            return {"success": False,
                    "error": f"{device['name']} battery at {device['battery']}%; replace the batteries"}
        if device["state"]["locked"] == locked:
            return {"success": False, "error": f"{device['name']} is already {'locked' if locked else 'unlocked'}"}
        device["state"]["locked"] = locked
        device["state"]["last_operated_by"] = user_id
        return {"success": True, "message": f"{device['name']} {'locked' if locked else 'unlocked'}"}

    def enter_keypad_code(self, device_id: str, pin: str) -> dict:
        """Unlock a door from its keypad with an access code. The code must be active, belong to
        the lock's home, include this lock, match the PIN, be inside its validity window at the
        hub's current time and have uses left. A code that reaches its maximum uses becomes
        "exhausted".

        Args:
            device_id: Lock device id, e.g. "D1005".
            pin: The PIN typed on the keypad (4-8 digits).

        Returns:
            Which code opened the door and its remaining uses.
        """
        device = self._find(self.devices, device_id)
        if device is None:
            return {"success": False, "error": f"Device {device_id} not found"}
        if device["type"] != "lock":
            return {"success": False, "error": f"Device {device_id} has no keypad"}
        if not isinstance(pin, str) or not pin.isdigit() or not 4 <= len(pin) <= 8:
            return {"success": False, "error": "pin must be 4 to 8 digits"}
        if not device["online"]:
            return {"success": False, "error": f"{device['name']} is offline"}
        if device["state"]["jammed"]:
            return {"success": False, "error": f"{device['name']} is jammed"}
        now = _parse_time(self.current_time)
        match_id = None
        for code_id, code in sorted(self.access_codes.items()):
            if code["home_id"] == device["home_id"] and code["pin"] == pin and device_id in code["lock_ids"]:
                match_id = code_id
                if code["status"] == "active":
                    break
        if match_id is None:
            return {"success": False, "error": "Wrong code"}
        code = self.access_codes[match_id]
        if code["status"] != "active":
            return {"success": False, "error": f"Code '{code['label']}' is {code['status']}"}
        if now < _parse_time(code["valid_from"]):
            return {"success": False, "error": f"Code '{code['label']}' is not valid before {code['valid_from']}"}
        if now > _parse_time(code["valid_until"]):
            return {"success": False, "error": f"Code '{code['label']}' expired at {code['valid_until']}"}
        if device["battery"] is not None and device["battery"] < 5:
            return {"success": False,
                    "error": f"{device['name']} battery at {device['battery']}%; replace the batteries"}
        code["uses"] += 1
        code["last_used_at"] = self.current_time
        if code["max_uses"] is not None and code["uses"] >= code["max_uses"]:
            code["status"] = "exhausted"
        if device["state"]["locked"]:
            device["state"]["locked"] = False
            device["state"]["last_operated_by"] = f"code:{match_id}"
        left = None if code["max_uses"] is None else code["max_uses"] - code["uses"]
        return {"success": True, "message": f"{device['name']} opened with code '{code['label']}'",
                "code_id": match_id, "uses_left": left}

    # ------------------------------------------------------------------ scenes, modes, automations

    def activate_scene(self, scene_id: str, user_id: str) -> dict:
        """Apply every action of a scene to its devices. Offline devices, jammed locks and locks
        with a battery below 5% are skipped and reported. Needs member role or higher.

        Args:
            scene_id: Scene id, e.g. "SC1".
            user_id: User activating the scene, e.g. "U2".

        Returns:
            The devices changed and the devices skipped.
        """
        scene = self._find(self.scenes, scene_id)
        if scene is None:
            return {"success": False, "error": f"Scene {scene_id} not found"}
        error = self._authorize(scene["home_id"], user_id, "member", "activate scenes")
        if error:
            return {"success": False, "error": error}
        applied, skipped = self._run_scene(scene_id)
        return {"success": True, "message": f"Scene '{scene['name']}' activated", "applied": applied, "skipped": skipped}

    def set_home_mode(self, home_id: str, user_id: str, mode: str) -> dict:
        """Switch a home between "home", "away", "night" and "vacation". Every enabled automation
        of the home triggered by the new mode runs its scene. Needs member role or higher.

        Args:
            home_id: Home id, e.g. "HM1".
            user_id: User switching the mode, e.g. "U2".
            mode: "home", "away", "night" or "vacation".

        Returns:
            The automations that ran.
        """
        home = self._find(self.homes, home_id)
        if home is None:
            return {"success": False, "error": f"Home {home_id} not found"}
        if mode not in MODES:
            return {"success": False, "error": f"mode must be one of {', '.join(MODES)}"}
        error = self._authorize(home_id, user_id, "member", "change the home mode")
        if error:
            return {"success": False, "error": error}
        if home["mode"] == mode:
            return {"success": False, "error": f"Home {home_id} is already in {mode} mode"}
        home["mode"] = mode
        home["mode_changed_at"] = self.current_time
        ran = []
        for auto_id, auto in sorted(self.automations.items()):
            trigger = auto["trigger"]
            if auto["home_id"] == home_id and auto["enabled"] and trigger["type"] == "mode" and trigger["value"] == mode:
                self._run_scene(auto["scene_id"])
                auto["last_run"] = self.current_time
                ran.append(auto_id)
        return {"success": True, "message": f"Home {home_id} switched to {mode} mode", "automations_run": ran}

    def create_scene(self, home_id: str, user_id: str, name: str, actions: dict) -> dict:
        """Create a scene in a home. Needs admin role or higher.

        Rules: the name (2-40 characters) must be unique in the home; actions map device ids of
        this home to settings valid for the device type: lights "power"/"brightness"/"color_temp",
        plugs "power", thermostats "mode"/"target_c", locks only {"locked": true}, cameras
        "recording".

        Args:
            home_id: Home id, e.g. "HM1".
            user_id: User creating the scene, e.g. "U1".
            name: Scene name, e.g. "Dinner".
            actions: Object of device id -> settings, e.g. {"D1001": {"power": "on", "brightness": 60}}.

        Returns:
            The new scene id.
        """
        home = self._find(self.homes, home_id)
        if home is None:
            return {"success": False, "error": f"Home {home_id} not found"}
        error = self._authorize(home_id, user_id, "admin", "create scenes")
        if error:
            return {"success": False, "error": error}
        if not isinstance(name, str) or not 2 <= len(name.strip()) <= 40:
            return {"success": False, "error": "name must be 2 to 40 characters"}
        for scene in self.scenes.values():
            if scene["home_id"] == home_id and scene["name"].lower() == name.strip().lower():
                return {"success": False, "error": f"A scene called '{scene['name']}' already exists"}
        if not isinstance(actions, dict) or not actions:
            return {"success": False, "error": "actions must be a non-empty object"}
        for device_id, settings in actions.items():
            device = self.devices.get(device_id)
            if device is None or device["home_id"] != home_id:
                return {"success": False, "error": f"Device {device_id} is not in home {home_id}"}
            error = self._validate_action(device, settings)
            if error:
                return {"success": False, "error": f"{device_id}: {error}"}
        scene_id = self._next_id(self.scenes, "SC")
        self.scenes[scene_id] = {"home_id": home_id, "name": name.strip(),
                                 "actions": {d: dict(s) for d, s in actions.items()},
                                 "created_by": user_id, "last_activated": None}
        return {"success": True, "message": f"Scene '{name.strip()}' created", "scene_id": scene_id}

    def set_automation_enabled(self, automation_id: str, user_id: str, enabled: bool) -> dict:
        """Enable or disable an automation. Needs admin role or higher.

        Args:
            automation_id: Automation id, e.g. "AM2".
            user_id: User making the change, e.g. "U1".
            enabled: true to enable, false to disable.

        Returns:
            Confirmation message.
        """
        auto = self._find(self.automations, automation_id)
        if auto is None:
            return {"success": False, "error": f"Automation {automation_id} not found"}
        if not isinstance(enabled, bool):
            return {"success": False, "error": "enabled must be true or false"}
        error = self._authorize(auto["home_id"], user_id, "admin", "manage automations")
        if error:
            return {"success": False, "error": error}
        if auto["enabled"] == enabled:
            return {"success": False,
                    "error": f"Automation {automation_id} is already {'enabled' if enabled else 'disabled'}"}
        if enabled and self.scenes.get(auto["scene_id"]) is None:
            return {"success": False, "error": f"Scene {auto['scene_id']} of this automation no longer exists"}
        auto["enabled"] = enabled
        return {"success": True, "message": f"Automation '{auto['name']}' {'enabled' if enabled else 'disabled'}"}

    # ------------------------------------------------------------------ access codes

    def create_access_code(self, home_id: str, user_id: str, label: str, pin: str, lock_ids: list[str],
                           valid_from: str, valid_until: str, max_uses: int | None = None) -> dict:
        """Create a keypad access code for visitors. Needs admin role or higher.

        Rules: PIN of 4-8 digits, not shared with another active code of the home; at least one
        lock, all of them locks of this home; valid_until after valid_from and after the hub's
        current time; the window may not exceed 90 days; max_uses, when given, is 1-100.

        Args:
            home_id: Home id, e.g. "HM1".
            user_id: User creating the code, e.g. "U1".
            label: Who the code is for, e.g. "Window cleaner" (2-40 characters).
            pin: 4-8 digit PIN as a string.
            lock_ids: Lock device ids the code opens, e.g. ["D1005"].
            valid_from: Start of validity, ISO local time "YYYY-MM-DDTHH:MM".
            valid_until: End of validity, ISO local time.
            max_uses: Optional maximum number of entries.

        Returns:
            The new code id.
        """
        home = self._find(self.homes, home_id)
        if home is None:
            return {"success": False, "error": f"Home {home_id} not found"}
        error = self._authorize(home_id, user_id, "admin", "create access codes")
        if error:
            return {"success": False, "error": error}
        if not isinstance(label, str) or not 2 <= len(label.strip()) <= 40:
            return {"success": False, "error": "label must be 2 to 40 characters"}
        if not isinstance(pin, str) or not pin.isdigit() or not 4 <= len(pin) <= 8:
            return {"success": False, "error": "pin must be a string of 4 to 8 digits"}
        if not isinstance(lock_ids, list) or not lock_ids:
            return {"success": False, "error": "lock_ids must be a non-empty list"}
        for lock_id in lock_ids:
            device = self._find(self.devices, lock_id)
            if device is None or device["home_id"] != home_id or device["type"] != "lock":
                return {"success": False, "error": f"{lock_id} is not a lock in home {home_id}"}
        if len(set(lock_ids)) != len(lock_ids):
            return {"success": False, "error": "lock_ids contains duplicates"}
        start, end = _parse_time(valid_from), _parse_time(valid_until)
        if start is None or end is None:
            return {"success": False, "error": "valid_from and valid_until must be ISO date-times"}
        if end <= start:
            return {"success": False, "error": "valid_until must be after valid_from"}
        if end <= _parse_time(self.current_time):
            return {"success": False, "error": "valid_until is already in the past"}
        if (end - start).days > 90:
            return {"success": False, "error": "Access codes may be valid for at most 90 days"}
        if max_uses is not None and (isinstance(max_uses, bool) or not isinstance(max_uses, int) or not 1 <= max_uses <= 100):
            return {"success": False, "error": "max_uses must be an integer from 1 to 100"}
        for code in self.access_codes.values():
            if code["home_id"] == home_id and code["status"] == "active" and code["pin"] == pin:
                return {"success": False, "error": "Another active code of this home already uses that PIN"}
        code_id = self._next_id(self.access_codes, "AC")
        self.access_codes[code_id] = {
            "home_id": home_id, "label": label.strip(), "pin": pin, "lock_ids": list(lock_ids),
            "valid_from": valid_from, "valid_until": valid_until, "max_uses": max_uses, "uses": 0,
            "status": "active", "created_by": user_id,
            "created_at": datetime.datetime.now().isoformat(timespec="seconds"),
            "last_used_at": None, "revoked_by": None, "revoked_at": None,
        }
        return {"success": True, "message": f"Access code '{label.strip()}' created", "code_id": code_id}

    def revoke_access_code(self, code_id: str, user_id: str) -> dict:
        """Revoke an active access code immediately. Needs admin role or higher in the code's home.

        Args:
            code_id: Access code id, e.g. "AC1".
            user_id: User revoking the code, e.g. "U1".

        Returns:
            Confirmation message.
        """
        code = self._find(self.access_codes, code_id)
        if code is None:
            return {"success": False, "error": f"Access code {code_id} not found"}
        error = self._authorize(code["home_id"], user_id, "admin", "revoke access codes")
        if error:
            return {"success": False, "error": error}
        if code["status"] != "active":
            return {"success": False, "error": f"Access code {code_id} is already {code['status']}"}
        code["status"] = "revoked"
        code["revoked_by"] = user_id
        code["revoked_at"] = self.current_time
        return {"success": True, "message": f"Access code '{code['label']}' revoked"}
