"""A company calendar service: users, shared calendars, events with attendees and RSVPs, simple
recurring series, bookable meeting rooms and conflict detection.

All times are local office time written as "YYYY-MM-DDTHH:MM". Recurring series repeat daily or
weekly a fixed number of times; single occurrences can be cancelled through exceptions. Rooms can
never be double-booked; people can, but conflicts are reported.
"""

import datetime


RSVP = ("needs_action", "accepted", "declined", "tentative")
FREQS = ("daily", "weekly")
PERMISSIONS = ("read", "write")
_FMT = "%Y-%m-%dT%H:%M"
MAX_OCCURRENCES = 52
MAX_EXPANSION = 400


class CalendarScheduling:
    """Users, calendars, events, attendees, recurrence rules and rooms."""

    def __init__(self, init_config: dict):
        self.users = {}
        self.calendars = {}
        self.rooms = {}
        self.events = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _fail(msg):
        return {"success": False, "error": msg}

    @staticmethod
    def _require_str(**params):
        """Return a failure for the first argument that is not a string, else None."""
        for name, value in params.items():
            if not isinstance(value, str):
                return {"success": False, "error": f"{name} must be a string"}
        return None

    @staticmethod
    def _parse(value):
        if not isinstance(value, str):
            return None
        try:
            return datetime.datetime.strptime(value, _FMT)
        except ValueError:
            return None

    @staticmethod
    def _fmt(dt):
        return dt.strftime(_FMT)

    def _occurrences(self, ev, lo=None, hi=None):
        """Yield (start, end, date string) of an event's live occurrences overlapping [lo, hi)."""
        if ev["status"] != "confirmed":
            return
        start, end = self._parse(ev["start"]), self._parse(ev["end"])
        rec = ev["recurrence"]
        if rec is None:
            if (lo is None or end > lo) and (hi is None or start < hi):
                yield start, end, start.date().isoformat()
            return
        step = datetime.timedelta(days=rec["interval"] * (7 if rec["freq"] == "weekly" else 1))
        for k in range(min(rec["count"], MAX_EXPANSION)):
            s, e = start + k * step, end + k * step
            if hi is not None and s >= hi:
                break
            day = s.date().isoformat()
            if day in ev["exceptions"]:
                continue
            if lo is None or e > lo:
                yield s, e, day

    def _room_clash(self, room_id, spans, ignore_event=None):
        """Return (event_id, start) of the first confirmed booking of room_id overlapping any span."""
        for eid, ev in self.events.items():
            if eid == ignore_event or ev["room"] != room_id:
                continue
            for s, e in spans:
                for os_, oe, _ in self._occurrences(ev, s, e):
                    return eid, self._fmt(os_)
        return None

    def _busy(self, user_id, s, e, ignore_event=None):
        """Event ids where user_id attends (not declined) an occurrence overlapping [s, e)."""
        out = []
        for eid, ev in sorted(self.events.items()):
            if eid == ignore_event:
                continue
            a = ev["attendees"].get(user_id)
            if a is None or a["rsvp"] == "declined":
                continue
            if any(True for _ in self._occurrences(ev, s, e)):
                out.append(eid)
        return out

    def _check_times(self, start, end):
        s, e = self._parse(start), self._parse(end)
        if s is None or e is None:
            return None, None, "times must look like 2024-06-17T09:30"
        if s.minute % 5 or e.minute % 5:
            return None, None, "times must be on 5-minute boundaries"
        if e <= s:
            return None, None, "end must be after start"
        if s.date() != e.date():
            return None, None, "events must start and end on the same day"
        minutes = (e - s).seconds // 60
        if not (15 <= minutes <= 480):
            return None, None, "events must last between 15 minutes and 8 hours"
        return s, e, None

    def _room_ok(self, room_id, s, e, headcount):
        room = self.rooms.get(room_id)
        if room is None:
            return f"room {room_id} not found"
        if not room["bookable"]:
            return f"room {room_id} is not bookable"
        if room["capacity"] < headcount:
            return f"room {room_id} holds {room['capacity']} people, {headcount} invited"
        if s.strftime("%H:%M") < room["open_from"] or e.strftime("%H:%M") > room["open_until"]:
            return f"room {room_id} can only be booked between {room['open_from']} and {room['open_until']}"
        return None

    def _can_write(self, calendar_id, user_id):
        cal = self.calendars[calendar_id]
        return cal["owner"] == user_id or cal["shared_with"].get(user_id) == "write"

    def _event_for_organizer(self, event_id, actor_id):
        ev = self.events.get(event_id) if isinstance(event_id, str) else None
        if ev is None:
            return None, self._fail(f"event {event_id} not found")
        if ev["organizer"] != actor_id:
            return None, self._fail(f"only the organizer ({ev['organizer']}) can change {event_id}")
        if ev["status"] != "confirmed":
            return None, self._fail(f"event {event_id} is {ev['status']}")
        return ev, None

    # ------------------------------------------------------------------ queries

    def get_event(self, event_id: str) -> dict:
        """Return an event with attendees, RSVPs, room, recurrence and cancelled dates.

        Args:
            event_id: Event id, e.g. "evt-1004".
        """
        err = self._require_str(event_id=event_id)
        if err:
            return err
        ev = self.events.get(event_id)
        if ev is None:
            return self._fail(f"event {event_id} not found")
        return {"success": True, "data": dict(ev, event_id=event_id)}

    def get_agenda(self, user_id: str, date: str) -> dict:
        """List a user's meetings on one day (including recurring occurrences), earliest first.

        Args:
            user_id: User id, e.g. "u-ana".
            date: Day as YYYY-MM-DD.
        Declined events are left out; the user's RSVP is shown for each entry.
        """
        err = self._require_str(user_id=user_id, date=date)
        if err:
            return err
        if user_id not in self.users:
            return self._fail(f"user {user_id} not found")
        try:
            day = datetime.date.fromisoformat(date)
        except (TypeError, ValueError):
            return self._fail("date must be YYYY-MM-DD")
        lo = datetime.datetime.combine(day, datetime.time())
        hi = lo + datetime.timedelta(days=1)
        rows = []
        for eid, ev in self.events.items():
            a = ev["attendees"].get(user_id)
            if a is None or a["rsvp"] == "declined":
                continue
            for s, e, _ in self._occurrences(ev, lo, hi):
                rows.append({"event_id": eid, "title": ev["title"], "start": self._fmt(s), "end": self._fmt(e),
                             "room": ev["room"], "rsvp": a["rsvp"], "organizer": ev["organizer"]})
        rows.sort(key=lambda r: (r["start"], r["event_id"]))
        return {"success": True, "data": {"user_id": user_id, "date": date, "events": rows}}

    def check_conflicts(self, user_id: str, start: str, end: str) -> dict:
        """List a user's non-declined meetings overlapping a time window.

        Args:
            user_id: User id.
            start: Window start, YYYY-MM-DDTHH:MM.
            end: Window end, after start.
        """
        err = self._require_str(user_id=user_id, start=start, end=end)
        if err:
            return err
        if user_id not in self.users:
            return self._fail(f"user {user_id} not found")
        s, e = self._parse(start), self._parse(end)
        if s is None or e is None or e <= s:
            return self._fail("start and end must be YYYY-MM-DDTHH:MM with end after start")
        rows = []
        for eid in self._busy(user_id, s, e):
            ev = self.events[eid]
            for os_, oe, _ in self._occurrences(ev, s, e):
                rows.append({"event_id": eid, "title": ev["title"], "start": self._fmt(os_), "end": self._fmt(oe)})
        rows.sort(key=lambda r: (r["start"], r["event_id"]))
        return {"success": True, "data": {"user_id": user_id, "free": not rows, "conflicts": rows}}

    def find_free_rooms(self, start: str, end: str, min_capacity: int) -> dict:
        """List bookable rooms with at least min_capacity seats that are free for the whole window.

        Args:
            start: YYYY-MM-DDTHH:MM.
            end: YYYY-MM-DDTHH:MM, same day, after start.
            min_capacity: Seats needed (1 or more).
        """
        err = self._require_str(start=start, end=end)
        if err:
            return err
        s, e, err = self._check_times(start, end)
        if err:
            return self._fail(err)
        if not isinstance(min_capacity, int) or isinstance(min_capacity, bool) or min_capacity < 1:
            return self._fail("min_capacity must be a positive integer")
        rows = []
        for rid in sorted(self.rooms):
            if self._room_ok(rid, s, e, min_capacity) is None and self._room_clash(rid, [(s, e)]) is None:
                r = self.rooms[rid]
                rows.append({"room_id": rid, "name": r["name"], "building": r["building"], "capacity": r["capacity"],
                             "equipment": r["equipment"]})
        return {"success": True, "data": rows}

    def list_rooms(self) -> dict:
        """List all meeting rooms with building, capacity, equipment, bookable flag and opening hours."""
        return {"success": True, "data": [dict(r, room_id=rid) for rid, r in sorted(self.rooms.items())]}

    # ------------------------------------------------------------------ updates

    def create_event(self, calendar_id: str, organizer_id: str, title: str, start: str, end: str,
                     attendee_ids: list | None = None, room_id: str = "", recurrence_freq: str = "",
                     recurrence_count: int = 0) -> dict:
        """Create an event (optionally a daily or weekly series) and send invitations.

        Args:
            calendar_id: Calendar that will hold the event.
            organizer_id: Creating user; must own the calendar or have write access to it.
            title: 1 to 120 characters.
            start: YYYY-MM-DDTHH:MM on a 5-minute boundary.
            end: Same day, 15 minutes to 8 hours after start.
            attendee_ids: Other active users to invite (organizer is added automatically).
            room_id: Optional room; must be bookable, large enough for everyone and free for
                every occurrence within its opening hours.
            recurrence_freq: "" (single event), "daily" or "weekly".
            recurrence_count: Number of occurrences for a series, 2-52.
        The organizer is recorded as accepted, everyone else as needs_action. The result lists
        invitees who already have overlapping meetings.
        """
        err = self._require_str(
            calendar_id=calendar_id, organizer_id=organizer_id, title=title, start=start, end=end,
            room_id=room_id, recurrence_freq=recurrence_freq)
        if err:
            return err
        cal = self.calendars.get(calendar_id)
        if cal is None:
            return self._fail(f"calendar {calendar_id} not found")
        org = self.users.get(organizer_id)
        if org is None or not org["active"]:
            return self._fail(f"organizer {organizer_id} is not an active user")
        if not self._can_write(calendar_id, organizer_id):
            return self._fail(f"{organizer_id} has no write access to calendar {calendar_id}")
        if not isinstance(title, str) or not (1 <= len(title.strip()) <= 120):
            return self._fail("title must be 1 to 120 characters")
        s, e, err = self._check_times(start, end)
        if err:
            return self._fail(err)
        attendee_ids = [] if attendee_ids is None else attendee_ids
        if not isinstance(attendee_ids, list) or not all(isinstance(a, str) for a in attendee_ids):
            return self._fail("attendee_ids must be a list of user ids")
        invitees = []
        for a in attendee_ids:
            if a == organizer_id or a in invitees:
                continue
            u = self.users.get(a)
            if u is None:
                return self._fail(f"user {a} not found")
            if not u["active"]:
                return self._fail(f"user {a} is deactivated")
            invitees.append(a)
        if recurrence_freq not in ("",) + FREQS:
            return self._fail("recurrence_freq must be '', 'daily' or 'weekly'")
        if not isinstance(recurrence_count, int) or isinstance(recurrence_count, bool):
            return self._fail("recurrence_count must be an integer")
        if recurrence_freq:
            if not (2 <= recurrence_count <= MAX_OCCURRENCES):
                return self._fail(f"a series needs 2 to {MAX_OCCURRENCES} occurrences")
            rec = {"freq": recurrence_freq, "interval": 1, "count": recurrence_count}
        else:
            if recurrence_count:
                return self._fail("recurrence_count is only used with a recurrence_freq")
            rec = None
        draft = {"status": "confirmed", "start": start, "end": end, "recurrence": rec, "exceptions": {}}
        spans = [(os_, oe) for os_, oe, _ in self._occurrences(draft)]
        if room_id:
            err = self._room_ok(room_id, s, e, len(invitees) + 1)
            if err:
                return self._fail(err)
            clash = self._room_clash(room_id, spans)
            if clash:
                return self._fail(f"room {room_id} is already booked by {clash[0]} at {clash[1]}")
        conflicts = sorted(a for a in invitees if any(self._busy(a, os_, oe) for os_, oe in spans))
        self.counters["event"] += 1
        eid = f"evt-{self.counters['event']}"
        attendees = {organizer_id: {"rsvp": "accepted", "optional": False}}
        for a in invitees:
            attendees[a] = {"rsvp": "needs_action", "optional": False}
        self.events[eid] = {"calendar": calendar_id, "title": title.strip(), "organizer": organizer_id,
                            "start": start, "end": end, "room": room_id or None, "attendees": attendees,
                            "recurrence": rec, "exceptions": {}, "status": "confirmed", "sequence": 0,
                            "created_at": datetime.datetime.now().replace(microsecond=0).isoformat()}
        return {"success": True, "message": f"Created {eid} '{title.strip()}' with {len(invitees)} invitees",
                "event_id": eid, "occurrences": len(spans), "attendee_conflicts": conflicts}

    def respond_to_invite(self, event_id: str, user_id: str, response: str) -> dict:
        """Record an invitee's RSVP.

        Args:
            event_id: Event id.
            user_id: An invited attendee (the organizer is always accepted).
            response: accepted, declined or tentative.
        Accepting reports other meetings that overlap the event's first occurrence.
        """
        err = self._require_str(event_id=event_id, user_id=user_id, response=response)
        if err:
            return err
        ev = self.events.get(event_id)
        if ev is None:
            return self._fail(f"event {event_id} not found")
        if ev["status"] != "confirmed":
            return self._fail(f"event {event_id} is {ev['status']}")
        a = ev["attendees"].get(user_id)
        if a is None:
            return self._fail(f"{user_id} is not invited to {event_id}")
        if user_id == ev["organizer"]:
            return self._fail("the organizer's attendance cannot be changed")
        if response not in ("accepted", "declined", "tentative"):
            return self._fail("response must be accepted, declined or tentative")
        if a["rsvp"] == response:
            return self._fail(f"{user_id} has already answered {response}")
        a["rsvp"] = response
        overlaps = []
        if response == "accepted":
            first = next(self._occurrences(ev), None)
            if first:
                overlaps = self._busy(user_id, first[0], first[1], ignore_event=event_id)
        return {"success": True, "message": f"{user_id} {response} {event_id}", "overlapping_events": overlaps}

    def add_attendee(self, event_id: str, actor_id: str, user_id: str, optional: bool = False) -> dict:
        """Invite one more active user to an event (organizer only).

        Args:
            event_id: Event id.
            actor_id: Must be the organizer.
            user_id: User to invite.
            optional: Mark the invitee as optional.
        Rules: the booked room, if any, must have a seat for the new attendee.
        """
        err = self._require_str(event_id=event_id, actor_id=actor_id, user_id=user_id)
        if err:
            return err
        ev, err = self._event_for_organizer(event_id, actor_id)
        if err:
            return err
        u = self.users.get(user_id)
        if u is None:
            return self._fail(f"user {user_id} not found")
        if not u["active"]:
            return self._fail(f"user {user_id} is deactivated")
        if user_id in ev["attendees"]:
            return self._fail(f"{user_id} is already invited")
        if not isinstance(optional, bool):
            return self._fail("optional must be a boolean")
        if ev["room"] and self.rooms[ev["room"]]["capacity"] < len(ev["attendees"]) + 1:
            return self._fail(f"room {ev['room']} is full ({self.rooms[ev['room']]['capacity']} seats)")
        ev["attendees"][user_id] = {"rsvp": "needs_action", "optional": optional}
        return {"success": True, "message": f"{user_id} invited to {event_id}"}

    def remove_attendee(self, event_id: str, actor_id: str, user_id: str) -> dict:
        """Withdraw an invitation (organizer only; the organizer cannot be removed).

        Args:
            event_id: Event id.
            actor_id: Must be the organizer.
            user_id: Invited user to remove.
        """
        err = self._require_str(event_id=event_id, actor_id=actor_id, user_id=user_id)
        if err:
            return err
        ev, err = self._event_for_organizer(event_id, actor_id)
        if err:
            return err
        if user_id == ev["organizer"]:
            return self._fail("the organizer cannot be removed; cancel the event instead")
        if user_id not in ev["attendees"]:
            return self._fail(f"{user_id} is not invited to {event_id}")
        del ev["attendees"][user_id]
        return {"success": True, "message": f"{user_id} removed from {event_id}"}

    def reschedule_event(self, event_id: str, actor_id: str, new_start: str, new_end: str) -> dict:
        """Move a single (non-recurring) event to a new time (organizer only).

        Args:
            event_id: Event id.
            actor_id: Must be the organizer.
            new_start: YYYY-MM-DDTHH:MM.
            new_end: Same day, 15 minutes to 8 hours after new_start.
        Effects: the booked room must be free and open at the new time; every attendee except
        the organizer must answer again (RSVP reset to needs_action); the sequence number rises.
        Recurring series cannot be moved.
        """
        err = self._require_str(event_id=event_id, actor_id=actor_id, new_start=new_start, new_end=new_end)
        if err:
            return err
        ev, err = self._event_for_organizer(event_id, actor_id)
        if err:
            return err
        if ev["recurrence"] is not None:
            return self._fail(f"{event_id} is a recurring series; cancel occurrences or create a new series instead")
        s, e, err = self._check_times(new_start, new_end)
        if err:
            return self._fail(err)
        if new_start == ev["start"] and new_end == ev["end"]:
            return self._fail(f"{event_id} is already scheduled at that time")
        if ev["room"]:
            err = self._room_ok(ev["room"], s, e, len(ev["attendees"]))
            if err:
                return self._fail(err)
            clash = self._room_clash(ev["room"], [(s, e)], ignore_event=event_id)
            if clash:
                return self._fail(f"room {ev['room']} is already booked by {clash[0]} at {clash[1]}")
        ev["start"], ev["end"] = new_start, new_end
        reset = []
        for uid, a in ev["attendees"].items():
            if uid != ev["organizer"] and a["rsvp"] != "needs_action":
                a["rsvp"] = "needs_action"
                reset.append(uid)
        ev["sequence"] += 1
        return {"success": True, "message": f"{event_id} moved to {new_start}-{new_end[11:]}",
                "rsvps_reset": sorted(reset)}

    def book_room(self, event_id: str, actor_id: str, room_id: str) -> dict:
        """Book (or switch to) a room for every occurrence of an event (organizer only).

        Args:
            event_id: Event id.
            actor_id: Must be the organizer.
            room_id: Bookable room with enough seats for all attendees, free and open for every
                remaining occurrence.
        """
        err = self._require_str(event_id=event_id, actor_id=actor_id, room_id=room_id)
        if err:
            return err
        ev, err = self._event_for_organizer(event_id, actor_id)
        if err:
            return err
        if ev["room"] == room_id:
            return self._fail(f"{event_id} is already in room {room_id}")
        s, e = self._parse(ev["start"]), self._parse(ev["end"])
        err = self._room_ok(room_id, s, e, len(ev["attendees"]))
        if err:
            return self._fail(err)
        spans = [(os_, oe) for os_, oe, _ in self._occurrences(ev)]
        clash = self._room_clash(room_id, spans, ignore_event=event_id)
        if clash:
            return self._fail(f"room {room_id} is already booked by {clash[0]} at {clash[1]}")
        old = ev["room"]
        ev["room"] = room_id
        return {"success": True, "message": f"{event_id} booked in {room_id}" + (f" (released {old})" if old else "")}

    def cancel_event(self, event_id: str, actor_id: str) -> dict:
        """Cancel an event or a whole series (organizer only); its room is released.

        Args:
            event_id: Event id.
            actor_id: Must be the organizer.
        """
        err = self._require_str(event_id=event_id, actor_id=actor_id)
        if err:
            return err
        ev, err = self._event_for_organizer(event_id, actor_id)
        if err:
            return err
        ev["status"] = "cancelled"
        ev["room"] = None
        ev["sequence"] += 1
        return {"success": True, "message": f"{event_id} cancelled"}

    def cancel_occurrence(self, event_id: str, actor_id: str, date: str) -> dict:
        """Cancel a single occurrence of a recurring series (organizer only).

        Args:
            event_id: Recurring event id.
            actor_id: Must be the organizer.
            date: Day of the occurrence to cancel, YYYY-MM-DD.
        Rules: the date must be a live occurrence of the series; at least one occurrence must
        remain (otherwise cancel the whole event).
        """
        err = self._require_str(event_id=event_id, actor_id=actor_id, date=date)
        if err:
            return err
        ev, err = self._event_for_organizer(event_id, actor_id)
        if err:
            return err
        if ev["recurrence"] is None:
            return self._fail(f"{event_id} is not recurring; use cancel_event")
        days = [d for _, _, d in self._occurrences(ev)]
        if date not in days:
            return self._fail(f"{event_id} has no occurrence on {date}")
        if len(days) == 1:
            return self._fail(f"{date} is the last remaining occurrence; cancel the whole event instead")
        ev["exceptions"][date] = "cancelled"
        return {"success": True, "message": f"Occurrence of {event_id} on {date} cancelled",
                "remaining_occurrences": len(days) - 1}

    def share_calendar(self, calendar_id: str, owner_id: str, user_id: str, permission: str) -> dict:
        """Grant, change or revoke another user's access to a calendar (owner only).

        Args:
            calendar_id: Calendar id.
            owner_id: Must be the calendar's owner.
            user_id: User receiving access.
            permission: "read", "write", or "none" to revoke.
        """
        err = self._require_str(
            calendar_id=calendar_id, owner_id=owner_id, user_id=user_id, permission=permission)
        if err:
            return err
        cal = self.calendars.get(calendar_id)
        if cal is None:
            return self._fail(f"calendar {calendar_id} not found")
        if cal["owner"] != owner_id:
            return self._fail(f"only the owner ({cal['owner']}) can share {calendar_id}")
        if user_id not in self.users:
            return self._fail(f"user {user_id} not found")
        if user_id == owner_id:
            return self._fail("owners always have full access to their calendars")
        if permission not in PERMISSIONS + ("none",):
            return self._fail("permission must be read, write or none")
        current = cal["shared_with"].get(user_id)
        if permission == "none":
            if current is None:
                return self._fail(f"{user_id} has no access to revoke")
            del cal["shared_with"][user_id]
            return {"success": True, "message": f"Access of {user_id} to {calendar_id} revoked"}
        if current == permission:
            return self._fail(f"{user_id} already has {permission} access")
        cal["shared_with"][user_id] = permission
        return {"success": True, "message": f"{user_id} now has {permission} access to {calendar_id}"}
