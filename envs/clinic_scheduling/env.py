"""Outpatient clinic scheduling: practitioners, rooms, appointment slots, bookings,
check-in, no-shows with booking blocks, and waitlist promotion into freed slots."""

import datetime

PATIENT_CANCEL = "patient"
CLINIC_CANCEL = "clinic"
MAX_RESCHEDULES = 2


class ClinicScheduling:
    def __init__(self, init_config: dict):
        self.current_date = ""
        self.current_time = ""
        self.policy = {}
        self.visit_types = {}
        self.practitioners = {}
        self.rooms = {}
        self.patients = {}
        self.slots = {}
        self.appointments = {}
        self.waitlist = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _err(message: str) -> dict:
        return {"success": False, "error": message}

    def _next_id(self, kind: str, prefix: str, width: int = 0) -> str:
        value = self.counters.get(kind, 0) + 1
        self.counters[kind] = value
        return f"{prefix}{value:0{width}d}"

    def _now(self) -> datetime.datetime:
        return datetime.datetime.fromisoformat(f"{self.current_date}T{self.current_time}")

    @staticmethod
    def _slot_start(slot: dict) -> datetime.datetime:
        return datetime.datetime.fromisoformat(f"{slot['date']}T{slot['start']}")

    def _slot_problem(self, slot_id, patient_id: str, visit_type: str, ignore_appointment: str = ""):
        """Return an error message if the patient cannot take this slot for this visit type."""
        if not isinstance(slot_id, str) or slot_id not in self.slots:
            return f"Slot {slot_id} not found"
        slot = self.slots[slot_id]
        if slot["status"] != "open":
            return f"Slot {slot_id} is {slot['status']}"
        if self._slot_start(slot) <= self._now():
            return f"Slot {slot_id} ({slot['date']} {slot['start']}) is in the past"
        doc = self.practitioners[slot["practitioner_id"]]
        if doc["status"] != "active":
            return f"{doc['name']} is {doc['status']}"
        if visit_type not in doc["visit_types"]:
            return f"{doc['name']} does not offer {visit_type} visits"
        vt = self.visit_types[visit_type]
        if slot["duration_min"] < vt["duration_min"]:
            return f"A {visit_type} visit needs {vt['duration_min']} minutes; slot {slot_id} has {slot['duration_min']}"
        room = self.rooms[slot["room_id"]]
        if room["status"] != "available":
            return f"Room {room['room_id']} is {room['status']}"
        if room["type"] != vt["room_type"]:
            article = "an" if vt["room_type"][0] in "aeiou" else "a"
            return f"A {visit_type} visit needs {article} {vt['room_type']} room; {room['room_id']} is {room['type']}"
        for appt in self.appointments.values():
            if appt["patient_id"] != patient_id or appt["status"] != "booked" or appt["appointment_id"] == ignore_appointment:
                continue
            other = self.slots[appt["slot_id"]]
            if other["date"] == slot["date"] and other["start"] == slot["start"]:
                return f"Patient already has {appt['appointment_id']} at {slot['date']} {slot['start']}"
        return None

    def _create_appointment(self, patient_id: str, slot_id: str, visit_type: str, reason: str) -> str:
        appointment_id = self._next_id("appointment", "AP")
        slot = self.slots[slot_id]
        self.appointments[appointment_id] = {
            "appointment_id": appointment_id,
            "patient_id": patient_id,
            "slot_id": slot_id,
            "practitioner_id": slot["practitioner_id"],
            "visit_type": visit_type,
            "reason": reason,
            "status": "booked",
            "booked_on": self.current_date,
            "cancelled_reason": None,
            "late_cancel": False,
            "checked_in_at": None,
            "notes": None,
            "reschedule_count": 0,
        }
        slot["status"] = "booked"
        slot["appointment_id"] = appointment_id
        self.patients[patient_id]["active_bookings"] += 1
        return appointment_id

    def _promote_from_waitlist(self, slot_id: str):
        """Give a freed slot to the best waiting entry for its practitioner, if any fits."""
        slot = self.slots[slot_id]
        waiting = [
            w for w in self.waitlist.values() if w["status"] == "waiting" and w["practitioner_id"] == slot["practitioner_id"]
        ]
        waiting.sort(key=lambda w: (w["priority"], w["requested_on"], w["waitlist_id"]))
        limit = self.policy["max_active_bookings_per_patient"]
        for entry in waiting:
            patient = self.patients[entry["patient_id"]]
            if patient["booking_blocked"] or patient["active_bookings"] >= limit:
                continue
            if self._slot_problem(slot_id, entry["patient_id"], entry["visit_type"]):
                continue
            appointment_id = self._create_appointment(entry["patient_id"], slot_id, entry["visit_type"], "Promoted from waitlist")
            entry["status"] = "promoted"
            entry["appointment_id"] = appointment_id
            return entry["waitlist_id"], appointment_id
        return None, None

    # ------------------------------------------------------------------ queries
    def list_open_slots(self, practitioner_id: str) -> dict:
        """List a practitioner's open slots that start after the current date and time.

        Args:
            practitioner_id: Practitioner id, e.g. PR02.
        """
        if not isinstance(practitioner_id, str) or practitioner_id not in self.practitioners:
            return self._err(f"Practitioner {practitioner_id} not found")
        now = self._now()
        rows = [
            {"slot_id": s["slot_id"], "date": s["date"], "start": s["start"], "duration_min": s["duration_min"], "room_id": s["room_id"]}
            for s in self.slots.values()
            if s["practitioner_id"] == practitioner_id and s["status"] == "open" and self._slot_start(s) > now
        ]
        rows.sort(key=lambda r: (r["date"], r["start"]))
        return {"success": True, "data": rows}

    def get_appointment(self, appointment_id: str) -> dict:
        """Return an appointment with its slot date, time and room.

        Args:
            appointment_id: Appointment id, e.g. AP5003.
        """
        if not isinstance(appointment_id, str) or appointment_id not in self.appointments:
            return self._err(f"Appointment {appointment_id} not found")
        data = dict(self.appointments[appointment_id])
        slot = self.slots[data["slot_id"]]
        data.update(date=slot["date"], start=slot["start"], room_id=slot["room_id"])
        return {"success": True, "data": data}

    def get_patient_schedule(self, patient_id: str) -> dict:
        """Return a patient's booking status, booked appointments and waiting list entries.

        Args:
            patient_id: Patient id, e.g. PA104.
        """
        if not isinstance(patient_id, str) or patient_id not in self.patients:
            return self._err(f"Patient {patient_id} not found")
        appts = []
        for a in self.appointments.values():
            if a["patient_id"] == patient_id and a["status"] in ("booked", "checked_in"):
                slot = self.slots[a["slot_id"]]
                appts.append({"appointment_id": a["appointment_id"], "date": slot["date"], "start": slot["start"], "practitioner_id": a["practitioner_id"], "visit_type": a["visit_type"], "status": a["status"]})
        appts.sort(key=lambda r: (r["date"], r["start"]))
        waits = sorted(w["waitlist_id"] for w in self.waitlist.values() if w["patient_id"] == patient_id and w["status"] == "waiting")
        data = dict(self.patients[patient_id])
        data.update(appointments=appts, waitlist=waits)
        return {"success": True, "data": data}

    def list_waitlist(self, practitioner_id: str) -> dict:
        """List waiting entries for a practitioner in promotion order (priority 1 first, then
        earliest request).

        Args:
            practitioner_id: Practitioner id.
        """
        if not isinstance(practitioner_id, str) or practitioner_id not in self.practitioners:
            return self._err(f"Practitioner {practitioner_id} not found")
        rows = [dict(w) for w in self.waitlist.values() if w["practitioner_id"] == practitioner_id and w["status"] == "waiting"]
        rows.sort(key=lambda w: (w["priority"], w["requested_on"], w["waitlist_id"]))
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ updates
    def book_appointment(self, patient_id: str, slot_id: str, visit_type: str, reason: str) -> dict:
        """Book an open future slot for a patient.

        Rules: the patient must not be blocked for no-shows and must have fewer active bookings
        than the clinic maximum; the practitioner must be active and offer the visit type; the
        slot must be long enough and in an available room of the type the visit needs; the
        patient cannot hold two appointments at the same date and time.

        Args:
            patient_id: Patient id.
            slot_id: Open slot id, e.g. SL0142.
            visit_type: new_patient, follow_up, annual_physical or procedure.
            reason: Reason for the visit.
        """
        if not isinstance(patient_id, str) or patient_id not in self.patients:
            return self._err(f"Patient {patient_id} not found")
        if not isinstance(visit_type, str) or visit_type not in self.visit_types:
            return self._err(f"Unknown visit type {visit_type!r}")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A reason for the visit is required")
        patient = self.patients[patient_id]
        if patient["booking_blocked"]:
            return self._err(f"Patient {patient_id} is blocked from booking after {patient['no_show_count']} no-shows")
        limit = self.policy["max_active_bookings_per_patient"]
        if patient["active_bookings"] >= limit:
            return self._err(f"Patient {patient_id} already has {limit} active bookings")
        problem = self._slot_problem(slot_id, patient_id, visit_type)
        if problem:
            return self._err(problem)
        appointment_id = self._create_appointment(patient_id, slot_id, visit_type, reason.strip())
        slot = self.slots[slot_id]
        return {"success": True, "message": f"Booked {patient_id} on {slot['date']} at {slot['start']}", "appointment_id": appointment_id}

    def cancel_appointment(self, appointment_id: str, reason: str, cancelled_by: str) -> dict:
        """Cancel a booked appointment. A patient cancelling less than the policy's notice
        period before the start is flagged as a late cancellation. The freed slot is offered
        automatically to the first eligible waiting entry for that practitioner (priority, then
        request date); if none fits, the slot reopens.

        Args:
            appointment_id: Booked appointment id.
            reason: Cancellation reason.
            cancelled_by: patient or clinic.
        """
        if not isinstance(appointment_id, str) or appointment_id not in self.appointments:
            return self._err(f"Appointment {appointment_id} not found")
        appt = self.appointments[appointment_id]
        if appt["status"] != "booked":
            return self._err(f"Appointment {appointment_id} is {appt['status']} and cannot be cancelled")
        if cancelled_by not in (PATIENT_CANCEL, CLINIC_CANCEL):
            return self._err("cancelled_by must be patient or clinic")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A cancellation reason is required")
        slot = self.slots[appt["slot_id"]]
        hours = (self._slot_start(slot) - self._now()).total_seconds() / 3600
        late = cancelled_by == PATIENT_CANCEL and hours < self.policy["late_cancel_hours"]
        appt["status"] = "cancelled"
        appt["cancelled_reason"] = f"{cancelled_by}: {reason.strip()}"
        appt["late_cancel"] = late
        self.patients[appt["patient_id"]]["active_bookings"] -= 1
        slot["status"] = "open"
        slot["appointment_id"] = None
        waitlist_id, new_appt = (None, None)
        if self._slot_start(slot) > self._now():
            waitlist_id, new_appt = self._promote_from_waitlist(slot["slot_id"])
        result = {"success": True, "message": f"Appointment {appointment_id} cancelled", "late_cancel": late}
        if new_appt:
            result["promoted_waitlist_id"] = waitlist_id
            result["new_appointment_id"] = new_appt
        return result

    def check_in(self, appointment_id: str) -> dict:
        """Check a patient in for today's booked appointment at the current time.

        Args:
            appointment_id: Booked appointment id for today.
        """
        if not isinstance(appointment_id, str) or appointment_id not in self.appointments:
            return self._err(f"Appointment {appointment_id} not found")
        appt = self.appointments[appointment_id]
        if appt["status"] != "booked":
            return self._err(f"Appointment {appointment_id} is {appt['status']}")
        slot = self.slots[appt["slot_id"]]
        if slot["date"] != self.current_date:
            return self._err(f"Appointment {appointment_id} is on {slot['date']}, not today")
        appt["status"] = "checked_in"
        appt["checked_in_at"] = self.current_time
        return {"success": True, "message": f"{appt['patient_id']} checked in at {self.current_time}"}

    def complete_appointment(self, appointment_id: str, notes: str) -> dict:
        """Close a checked-in visit with the practitioner's visit notes.

        Args:
            appointment_id: Checked-in appointment id.
            notes: Visit notes / outcome.
        """
        if not isinstance(appointment_id, str) or appointment_id not in self.appointments:
            return self._err(f"Appointment {appointment_id} not found")
        appt = self.appointments[appointment_id]
        if appt["status"] != "checked_in":
            return self._err(f"Only checked-in appointments can be completed; {appointment_id} is {appt['status']}")
        if not isinstance(notes, str) or not notes.strip():
            return self._err("Visit notes are required")
        appt["status"] = "completed"
        appt["notes"] = notes.strip()
        self.patients[appt["patient_id"]]["active_bookings"] -= 1
        return {"success": True, "message": f"Appointment {appointment_id} completed"}

    def mark_no_show(self, appointment_id: str) -> dict:
        """Record that a patient did not attend a booked appointment whose start time has
        passed. Reaching the policy's no-show threshold blocks the patient from new bookings.

        Args:
            appointment_id: Booked appointment id.
        """
        if not isinstance(appointment_id, str) or appointment_id not in self.appointments:
            return self._err(f"Appointment {appointment_id} not found")
        appt = self.appointments[appointment_id]
        if appt["status"] != "booked":
            return self._err(f"Appointment {appointment_id} is {appt['status']}")
        slot = self.slots[appt["slot_id"]]
        if self._slot_start(slot) > self._now():
            return self._err(f"Appointment {appointment_id} starts {slot['date']} {slot['start']}; it cannot be a no-show yet")
        patient = self.patients[appt["patient_id"]]
        appt["status"] = "no_show"
        patient["no_show_count"] += 1
        patient["active_bookings"] -= 1
        blocked = False
        if patient["no_show_count"] >= self.policy["no_show_block_threshold"] and not patient["booking_blocked"]:
            patient["booking_blocked"] = True
            blocked = True
        return {"success": True, "message": f"No-show recorded for {appt['patient_id']}", "no_show_count": patient["no_show_count"], "booking_blocked": patient["booking_blocked"], "newly_blocked": blocked}

    def reschedule_appointment(self, appointment_id: str, new_slot_id: str) -> dict:
        """Move a booked appointment to another open slot (any practitioner offering the visit
        type). The old slot reopens without waitlist promotion.

        Rules: same checks as booking; an appointment can be rescheduled at most twice.

        Args:
            appointment_id: Booked appointment id.
            new_slot_id: Open slot to move to.
        """
        if not isinstance(appointment_id, str) or appointment_id not in self.appointments:
            return self._err(f"Appointment {appointment_id} not found")
        appt = self.appointments[appointment_id]
        if appt["status"] != "booked":
            return self._err(f"Appointment {appointment_id} is {appt['status']}")
        if appt["reschedule_count"] >= MAX_RESCHEDULES:
            return self._err(f"Appointment {appointment_id} has already been rescheduled {MAX_RESCHEDULES} times; cancel and rebook")
        problem = self._slot_problem(new_slot_id, appt["patient_id"], appt["visit_type"], ignore_appointment=appointment_id)
        if problem:
            return self._err(problem)
        old = self.slots[appt["slot_id"]]
        old["status"] = "open"
        old["appointment_id"] = None
        new = self.slots[new_slot_id]
        new["status"] = "booked"
        new["appointment_id"] = appointment_id
        appt["slot_id"] = new_slot_id
        appt["practitioner_id"] = new["practitioner_id"]
        appt["reschedule_count"] += 1
        return {"success": True, "message": f"Appointment {appointment_id} moved to {new['date']} {new['start']}"}

    def add_to_waitlist(self, patient_id: str, practitioner_id: str, visit_type: str, priority: int) -> dict:
        """Put a patient on a practitioner's waiting list for the next freed slot.

        Rules: priority 1 (urgent) to 3 (routine); the practitioner must offer the visit type;
        one waiting entry per patient and practitioner; blocked patients cannot join.

        Args:
            patient_id: Patient id.
            practitioner_id: Practitioner id.
            visit_type: Visit type wanted.
            priority: 1 urgent, 2 soon, 3 routine.
        """
        if not isinstance(patient_id, str) or patient_id not in self.patients:
            return self._err(f"Patient {patient_id} not found")
        if not isinstance(practitioner_id, str) or practitioner_id not in self.practitioners:
            return self._err(f"Practitioner {practitioner_id} not found")
        if isinstance(priority, bool) or not isinstance(priority, int) or priority not in (1, 2, 3):
            return self._err("priority must be 1, 2 or 3")
        doc = self.practitioners[practitioner_id]
        if visit_type not in doc["visit_types"]:
            return self._err(f"{doc['name']} does not offer {visit_type} visits")
        if self.patients[patient_id]["booking_blocked"]:
            return self._err(f"Patient {patient_id} is blocked from booking")
        for w in self.waitlist.values():
            if w["patient_id"] == patient_id and w["practitioner_id"] == practitioner_id and w["status"] == "waiting":
                return self._err(f"Patient already waiting for {practitioner_id} ({w['waitlist_id']})")
        waitlist_id = self._next_id("waitlist", "WL", 3)
        self.waitlist[waitlist_id] = {
            "waitlist_id": waitlist_id,
            "patient_id": patient_id,
            "practitioner_id": practitioner_id,
            "visit_type": visit_type,
            "priority": priority,
            "requested_on": self.current_date,
            "status": "waiting",
            "appointment_id": None,
        }
        return {"success": True, "message": f"{patient_id} added to {practitioner_id} waitlist", "waitlist_id": waitlist_id}

    def remove_from_waitlist(self, waitlist_id: str) -> dict:
        """Withdraw a waiting entry.

        Args:
            waitlist_id: Waitlist entry id, e.g. WL004.
        """
        if not isinstance(waitlist_id, str) or waitlist_id not in self.waitlist:
            return self._err(f"Waitlist entry {waitlist_id} not found")
        entry = self.waitlist[waitlist_id]
        if entry["status"] != "waiting":
            return self._err(f"Waitlist entry {waitlist_id} is {entry['status']}")
        entry["status"] = "removed"
        return {"success": True, "message": f"Waitlist entry {waitlist_id} removed"}

    def block_practitioner_day(self, practitioner_id: str, date: str, reason: str) -> dict:
        """Block all of a practitioner's slots on a date (sick day, training). Open slots become
        blocked; booked appointments that day are cancelled by the clinic and their slots blocked.

        Rules: the date must be today or later; it fails if a patient is already checked in or
        the practitioner has no unblocked slots that day.

        Args:
            practitioner_id: Practitioner id.
            date: Date to block, YYYY-MM-DD.
            reason: Reason shown to patients.
        """
        if not isinstance(practitioner_id, str) or practitioner_id not in self.practitioners:
            return self._err(f"Practitioner {practitioner_id} not found")
        try:
            datetime.date.fromisoformat(date)
        except (TypeError, ValueError):
            return self._err(f"Invalid date {date!r}")
        if date < self.current_date:
            return self._err("Cannot block a past date")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A reason is required")
        day = [s for s in self.slots.values() if s["practitioner_id"] == practitioner_id and s["date"] == date and s["status"] != "blocked"]
        if not day:
            return self._err(f"No unblocked slots for {practitioner_id} on {date}")
        for s in day:
            if s["appointment_id"] and self.appointments[s["appointment_id"]]["status"] not in ("booked", "cancelled"):
                return self._err(f"Appointment {s['appointment_id']} is already {self.appointments[s['appointment_id']]['status']}")
        cancelled = []
        for s in sorted(day, key=lambda x: x["start"]):
            if s["appointment_id"]:
                appt = self.appointments[s["appointment_id"]]
                appt["status"] = "cancelled"
                appt["cancelled_reason"] = f"clinic: {reason.strip()}"
                self.patients[appt["patient_id"]]["active_bookings"] -= 1
                cancelled.append(appt["appointment_id"])
                s["appointment_id"] = None
            s["status"] = "blocked"
            s["block_reason"] = reason.strip()
        return {"success": True, "message": f"Blocked {len(day)} slot(s) for {practitioner_id} on {date}", "cancelled_appointments": cancelled}

    def lift_booking_block(self, patient_id: str) -> dict:
        """Remove a no-show booking block after the patient has spoken with the practice
        manager; resets the no-show count.

        Args:
            patient_id: Blocked patient id.
        """
        if not isinstance(patient_id, str) or patient_id not in self.patients:
            return self._err(f"Patient {patient_id} not found")
        patient = self.patients[patient_id]
        if not patient["booking_blocked"]:
            return self._err(f"Patient {patient_id} is not blocked")
        patient["booking_blocked"] = False
        patient["no_show_count"] = 0
        return {"success": True, "message": f"Booking block lifted for {patient_id}"}
