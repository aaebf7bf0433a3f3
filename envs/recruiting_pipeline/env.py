"""Applicant tracking: job requisitions, candidates, pipeline stages, interview panels,
scorecards, and offers from extension to acceptance."""

import datetime
import re
import uuid

STAGES = ("applied", "phone_screen", "onsite", "offer", "hired")
CLOSED_STAGES = ("hired", "rejected", "withdrawn")
RECOMMENDATIONS = ("strong_no", "no", "yes", "strong_yes")
EMAIL_PATTERN = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", re.IGNORECASE)
PANEL_SIZE = {"phone_screen": (1, 1), "onsite": (2, 4)}
ADVANCE_THRESHOLD = {"phone_screen": 2.5, "onsite": 3.0}
OFFER_VALID_DAYS = 7
MIN_START_NOTICE_DAYS = 14


class RecruitingPipeline:
    def __init__(self, init_config: dict):
        self.current_date = ""
        self.staff = {}
        self.requisitions = {}
        self.candidates = {}
        self.applications = {}
        self.interviews = {}
        self.offers = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _err(message: str) -> dict:
        return {"success": False, "error": message}

    def _next_id(self, kind: str, prefix: str) -> str:
        value = self.counters.get(kind, 0) + 1
        self.counters[kind] = value
        return f"{prefix}{value}"

    def _add_days(self, days: int) -> str:
        return (datetime.date.fromisoformat(self.current_date) + datetime.timedelta(days=days)).isoformat()

    def _completed_interview(self, application_id: str, kind: str):
        done = [
            i for i in self.interviews.values()
            if i["application_id"] == application_id and i["kind"] == kind and i["status"] == "completed"
        ]
        return max(done, key=lambda i: i["date"]) if done else None

    @staticmethod
    def _average(interview: dict) -> float:
        scores = [s["score"] for s in interview["scorecards"].values()]
        return round(sum(scores) / len(scores), 2) if scores else 0.0

    # ------------------------------------------------------------------ queries
    def list_open_requisitions(self) -> dict:
        """List requisitions that are open, with openings still to fill and the number of
        active applications."""
        rows = []
        for req in self.requisitions.values():
            if req["status"] != "open":
                continue
            active = sum(1 for a in self.applications.values() if a["requisition_id"] == req["requisition_id"] and a["stage"] not in CLOSED_STAGES)
            rows.append({"requisition_id": req["requisition_id"], "title": req["title"], "department": req["department"], "remaining_openings": req["openings"] - req["filled"], "active_applications": active})
        rows.sort(key=lambda r: r["requisition_id"])
        return {"success": True, "data": rows}

    def get_requisition(self, requisition_id: str) -> dict:
        """Return a requisition with its salary band and a count of applications per stage.

        Args:
            requisition_id: Requisition id, e.g. REQ-104.
        """
        if not isinstance(requisition_id, str) or requisition_id not in self.requisitions:
            return self._err(f"Requisition {requisition_id} not found")
        data = dict(self.requisitions[requisition_id])
        pipeline = {}
        for a in self.applications.values():
            if a["requisition_id"] == requisition_id:
                pipeline[a["stage"]] = pipeline.get(a["stage"], 0) + 1
        data["pipeline"] = dict(sorted(pipeline.items()))
        return {"success": True, "data": data}

    def get_application(self, application_id: str) -> dict:
        """Return an application with the candidate's name, its interviews (with average scores)
        and any offer.

        Args:
            application_id: Application id, e.g. APP2004.
        """
        if not isinstance(application_id, str) or application_id not in self.applications:
            return self._err(f"Application {application_id} not found")
        data = dict(self.applications[application_id])
        data["candidate_name"] = self.candidates[data["candidate_id"]]["name"]
        data["interviews"] = [
            {"interview_id": i["interview_id"], "kind": i["kind"], "date": i["date"], "status": i["status"], "scorecards_in": len(i["scorecards"]), "panel_size": len(i["panel"]), "average_score": self._average(i)}
            for i in sorted(self.interviews.values(), key=lambda x: x["interview_id"]) if i["application_id"] == application_id
        ]
        data["offer"] = dict(self.offers[data["offer_id"]]) if data["offer_id"] else None
        return {"success": True, "data": data}

    def list_interviews_for_staff(self, staff_id: str) -> dict:
        """List an interviewer's scheduled interviews and whether their scorecard is still owed.

        Args:
            staff_id: Staff id, e.g. ST03.
        """
        if not isinstance(staff_id, str) or staff_id not in self.staff:
            return self._err(f"Staff member {staff_id} not found")
        rows = [
            {"interview_id": i["interview_id"], "application_id": i["application_id"], "kind": i["kind"], "date": i["date"], "role": i["panel"][staff_id], "scorecard_due": staff_id not in i["scorecards"]}
            for i in self.interviews.values() if i["status"] == "scheduled" and staff_id in i["panel"]
        ]
        rows.sort(key=lambda r: (r["date"], r["interview_id"]))
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ updates
    def add_candidate(self, name: str, email: str, source: str, phone: str = "") -> dict:
        """Create a candidate profile.

        Rules: a valid, unique email is required; source is referral, job_board, agency,
        career_site or sourcing.

        Args:
            name: Candidate's full name.
            email: Email address (unique across candidates).
            source: referral, job_board, agency, career_site or sourcing.
            phone: Phone number (optional).
        """
        if not isinstance(name, str) or not name.strip():
            return self._err("Candidate name is required")
        if not isinstance(email, str) or not EMAIL_PATTERN.match(email.strip()):
            return self._err(f"Invalid email address {email!r}")
        if source not in ("referral", "job_board", "agency", "career_site", "sourcing"):
            return self._err("source must be referral, job_board, agency, career_site or sourcing")
        if not isinstance(phone, str):
            return self._err("phone must be a string")
        key = email.strip().lower()
        for c in self.candidates.values():
            if c["email"].lower() == key:
                return self._err(f"A candidate with email {key} already exists ({c['candidate_id']})")
        candidate_id = self._next_id("candidate", "CAN")
        self.candidates[candidate_id] = {"candidate_id": candidate_id, "name": name.strip(), "email": key, "phone": phone, "source": source, "status": "active", "created_on": self.current_date}
        return {"success": True, "message": f"Candidate {candidate_id} created", "candidate_id": candidate_id}

    def apply_to_requisition(self, candidate_id: str, requisition_id: str) -> dict:
        """Submit a candidate to an open requisition at the applied stage.

        Rules: the requisition must be open; hired candidates cannot apply; a candidate cannot
        have two active applications to the same requisition.

        Args:
            candidate_id: Candidate id.
            requisition_id: Requisition id.
        """
        if not isinstance(candidate_id, str) or candidate_id not in self.candidates:
            return self._err(f"Candidate {candidate_id} not found")
        if not isinstance(requisition_id, str) or requisition_id not in self.requisitions:
            return self._err(f"Requisition {requisition_id} not found")
        req = self.requisitions[requisition_id]
        if req["status"] != "open":
            return self._err(f"Requisition {requisition_id} is {req['status']}")
        if self.candidates[candidate_id]["status"] == "hired":
            return self._err(f"Candidate {candidate_id} has already been hired")
        for a in self.applications.values():
            if a["candidate_id"] == candidate_id and a["requisition_id"] == requisition_id and a["stage"] not in CLOSED_STAGES:
                return self._err(f"Candidate already has active application {a['application_id']} for {requisition_id}")
        application_id = self._next_id("application", "APP")
        self.applications[application_id] = {
            "application_id": application_id,
            "candidate_id": candidate_id,
            "requisition_id": requisition_id,
            "stage": "applied",
            "applied_on": self.current_date,
            "stage_updated_on": self.current_date,
            "rejection_reason": None,
            "offer_id": None,
        }
        return {"success": True, "message": f"Application {application_id} created", "application_id": application_id}

    def advance_stage(self, application_id: str) -> dict:
        """Move an application to the next pipeline stage (applied -> phone_screen -> onsite ->
        offer).

        Rules: the requisition must be open; leaving phone_screen needs a completed phone screen
        averaging at least 2.5; leaving onsite needs a completed onsite averaging at least 3.0
        with no strong_no. Hiring happens only by accepting an offer.

        Args:
            application_id: Application id.
        """
        if not isinstance(application_id, str) or application_id not in self.applications:
            return self._err(f"Application {application_id} not found")
        app = self.applications[application_id]
        if app["stage"] in CLOSED_STAGES or app["stage"] == "offer":
            return self._err(f"Application {application_id} is at {app['stage']} and cannot be advanced")
        req = self.requisitions[app["requisition_id"]]
        if req["status"] != "open":
            return self._err(f"Requisition {req['requisition_id']} is {req['status']}")
        stage = app["stage"]
        if stage in ADVANCE_THRESHOLD:
            interview = self._completed_interview(application_id, stage)
            if interview is None:
                return self._err(f"No completed {stage} interview for {application_id}")
            avg = self._average(interview)
            if avg < ADVANCE_THRESHOLD[stage]:
                return self._err(f"{stage} average {avg:g} is below the {ADVANCE_THRESHOLD[stage]:g} needed to advance")
            if stage == "onsite" and any(s["recommendation"] == "strong_no" for s in interview["scorecards"].values()):
                return self._err("An onsite interviewer recommended strong_no; the hiring manager must reject or re-interview")
        new_stage = STAGES[STAGES.index(stage) + 1]
        app["stage"] = new_stage
        app["stage_updated_on"] = self.current_date
        return {"success": True, "message": f"Application {application_id} moved to {new_stage}", "stage": new_stage}

    def schedule_interview(self, application_id: str, kind: str, date: str, panel_ids: list[str], lead_id: str) -> dict:
        """Schedule a phone screen or onsite interview with a panel.

        Rules: the application must be at the matching stage with no other scheduled interview
        of that kind; the date must be today or later; a phone screen has exactly 1 interviewer
        and an onsite 2-4 distinct interviewers; every panelist must be active and trained to
        interview and have no other interview that day; the lead must be on the panel.

        Args:
            application_id: Application id.
            kind: phone_screen or onsite.
            date: Interview date, YYYY-MM-DD.
            panel_ids: Staff ids of the interviewers.
            lead_id: Staff id of the panel lead (must be in panel_ids).
        """
        if not isinstance(application_id, str) or application_id not in self.applications:
            return self._err(f"Application {application_id} not found")
        if not isinstance(kind, str) or kind not in PANEL_SIZE:
            return self._err("kind must be phone_screen or onsite")
        app = self.applications[application_id]
        if app["stage"] != kind:
            return self._err(f"Application {application_id} is at stage {app['stage']}, not {kind}")
        try:
            datetime.date.fromisoformat(date)
        except (TypeError, ValueError):
            return self._err(f"Invalid date {date!r}")
        if date < self.current_date:
            return self._err("Interview date cannot be in the past")
        if not isinstance(panel_ids, list) or not all(isinstance(p, str) for p in panel_ids):
            return self._err("panel_ids must be a list of staff ids")
        low, high = PANEL_SIZE[kind]
        if len(set(panel_ids)) != len(panel_ids) or not low <= len(panel_ids) <= high:
            label = "An onsite" if kind == "onsite" else "A phone_screen"
            return self._err(f"{label} needs {low}-{high} distinct interviewers" if low != high else f"{label} needs exactly {low} interviewer")
        if lead_id not in panel_ids:
            return self._err(f"Lead {lead_id} must be on the panel")
        for sid in panel_ids:
            member = self.staff.get(sid)
            if member is None:
                return self._err(f"Staff member {sid} not found")
            if not member["active"] or not member["can_interview"]:
                return self._err(f"{member['name']} is not an active trained interviewer")
        for i in self.interviews.values():
            if i["status"] != "scheduled":
                continue
            if i["application_id"] == application_id and i["kind"] == kind:
                return self._err(f"{kind} {i['interview_id']} is already scheduled for {application_id}")
            if i["date"] == date:
                busy = sorted(set(panel_ids) & set(i["panel"]))
                if busy:
                    return self._err(f"{', '.join(busy)} already interviewing on {date} ({i['interview_id']})")
        interview_id = self._next_id("interview", "INT")
        self.interviews[interview_id] = {
            "interview_id": interview_id,
            "application_id": application_id,
            "kind": kind,
            "date": date,
            "panel": {sid: ("lead" if sid == lead_id else "member") for sid in panel_ids},
            "status": "scheduled",
            "scorecards": {},
            "completed_on": None,
        }
        return {"success": True, "message": f"{kind} {interview_id} scheduled on {date}", "interview_id": interview_id}

    def submit_scorecard(self, interview_id: str, staff_id: str, score: int, recommendation: str, notes: str) -> dict:
        """Record a panelist's scorecard. The interview completes when every panelist has
        submitted.

        Rules: the interview must be scheduled and on or before today; the staff member must be
        on the panel and not have submitted yet; score is 1-4; recommendation is strong_no, no,
        yes or strong_yes.

        Args:
            interview_id: Interview id, e.g. INT3002.
            staff_id: Interviewer's staff id.
            score: Overall score 1 (poor) to 4 (excellent).
            recommendation: strong_no, no, yes or strong_yes.
            notes: Evidence supporting the score.
        """
        if not isinstance(interview_id, str) or interview_id not in self.interviews:
            return self._err(f"Interview {interview_id} not found")
        interview = self.interviews[interview_id]
        if interview["status"] != "scheduled":
            return self._err(f"Interview {interview_id} is {interview['status']}")
        if interview["date"] > self.current_date:
            return self._err(f"Interview {interview_id} takes place on {interview['date']}; scorecards open after it")
        if not isinstance(staff_id, str) or staff_id not in interview["panel"]:
            return self._err(f"{staff_id} is not on the panel of {interview_id}")
        if staff_id in interview["scorecards"]:
            return self._err(f"{staff_id} already submitted a scorecard for {interview_id}")
        if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 4:
            return self._err("score must be an integer from 1 to 4")
        if recommendation not in RECOMMENDATIONS:
            return self._err("recommendation must be strong_no, no, yes or strong_yes")
        if not isinstance(notes, str) or not notes.strip():
            return self._err("Notes are required")
        interview["scorecards"][staff_id] = {"score": score, "recommendation": recommendation, "notes": notes.strip(), "submitted_on": self.current_date}
        outstanding = len(interview["panel"]) - len(interview["scorecards"])
        if outstanding == 0:
            interview["status"] = "completed"
            interview["completed_on"] = self.current_date
        return {"success": True, "message": f"Scorecard recorded for {interview_id}", "outstanding_scorecards": outstanding, "interview_status": interview["status"]}

    def reject_application(self, application_id: str, reason: str) -> dict:
        """Reject an application at any open stage; its scheduled interviews are cancelled.

        Rules: an application with an extended offer must have the offer rescinded first.

        Args:
            application_id: Application id.
            reason: Rejection reason recorded for the candidate.
        """
        if not isinstance(application_id, str) or application_id not in self.applications:
            return self._err(f"Application {application_id} not found")
        app = self.applications[application_id]
        if app["stage"] in CLOSED_STAGES:
            return self._err(f"Application {application_id} is already {app['stage']}")
        if app["offer_id"] and self.offers[app["offer_id"]]["status"] == "extended":
            return self._err(f"Offer {app['offer_id']} is outstanding; rescind it first")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A rejection reason is required")
        cancelled = []
        for i in self.interviews.values():
            if i["application_id"] == application_id and i["status"] == "scheduled":
                i["status"] = "cancelled"
                cancelled.append(i["interview_id"])
        app["stage"] = "rejected"
        app["rejection_reason"] = reason.strip()
        app["stage_updated_on"] = self.current_date
        return {"success": True, "message": f"Application {application_id} rejected", "cancelled_interviews": sorted(cancelled)}

    def extend_offer(self, application_id: str, base_salary: int, start_date: str) -> dict:
        """Extend a written offer to an application at the offer stage. The offer letter gets a
        unique reference and expires after 7 days.

        Rules: the requisition must be open with an unfilled opening; the base salary must be
        inside the requisition's band; the start date must be at least 14 days away; only one
        outstanding offer per application.

        Args:
            application_id: Application id at the offer stage.
            base_salary: Annual base salary offered (whole currency units).
            start_date: Proposed start date, YYYY-MM-DD.
        """
        if not isinstance(application_id, str) or application_id not in self.applications:
            return self._err(f"Application {application_id} not found")
        app = self.applications[application_id]
        if app["stage"] != "offer":
            return self._err(f"Application {application_id} is at {app['stage']}, not offer")
        if app["offer_id"] and self.offers[app["offer_id"]]["status"] == "extended":
            return self._err(f"Offer {app['offer_id']} is already outstanding")
        req = self.requisitions[app["requisition_id"]]
        if req["status"] != "open" or req["filled"] >= req["openings"]:
            return self._err(f"Requisition {req['requisition_id']} has no open positions")
        if isinstance(base_salary, bool) or not isinstance(base_salary, int):
            return self._err("base_salary must be an integer")
        band = req["salary_band"]
        if not band["min"] <= base_salary <= band["max"]:
            return self._err(f"Salary {base_salary} is outside the band {band['min']}-{band['max']}")
        try:
            datetime.date.fromisoformat(start_date)
        except (TypeError, ValueError):
            return self._err(f"Invalid start date {start_date!r}")
        if start_date < self._add_days(MIN_START_NOTICE_DAYS):
            return self._err(f"Start date must be on or after {self._add_days(MIN_START_NOTICE_DAYS)}")
        offer_id = self._next_id("offer", "OF")
        reference = f"NWL-{uuid.uuid4().hex[:10].upper()}"
        self.offers[offer_id] = {
            "offer_id": offer_id,
            "application_id": application_id,
            "reference": reference,
            "base_salary": base_salary,
            "start_date": start_date,
            "status": "extended",
            "extended_on": self.current_date,
            "expires_on": self._add_days(OFFER_VALID_DAYS),
            "responded_on": None,
            "rescind_reason": None,
        }
        app["offer_id"] = offer_id
        return {"success": True, "message": f"Offer {offer_id} extended", "offer_id": offer_id, "reference": reference, "expires_on": self._add_days(OFFER_VALID_DAYS)}

    def respond_to_offer(self, offer_id: str, accept: bool) -> dict:
        """Record the candidate's answer to an outstanding offer. Accepting hires the candidate,
        fills an opening and closes the requisition as filled when its last opening is taken;
        declining withdraws the application.

        Rules: the offer must be extended and not past its expiry date.

        Args:
            offer_id: Offer id, e.g. OF4002.
            accept: True if the candidate accepts, False if they decline.
        """
        if not isinstance(offer_id, str) or offer_id not in self.offers:
            return self._err(f"Offer {offer_id} not found")
        if not isinstance(accept, bool):
            return self._err("accept must be true or false")
        offer = self.offers[offer_id]
        if offer["status"] != "extended":
            return self._err(f"Offer {offer_id} is {offer['status']}")
        if self.current_date > offer["expires_on"]:
            return self._err(f"Offer {offer_id} expired on {offer['expires_on']}")
        app = self.applications[offer["application_id"]]
        offer["responded_on"] = self.current_date
        app["stage_updated_on"] = self.current_date
        if not accept:
            offer["status"] = "declined"
            app["stage"] = "withdrawn"
            app["rejection_reason"] = "Candidate declined offer"
            return {"success": True, "message": f"Offer {offer_id} declined"}
        req = self.requisitions[app["requisition_id"]]
        offer["status"] = "accepted"
        app["stage"] = "hired"
        self.candidates[app["candidate_id"]]["status"] = "hired"
        req["filled"] += 1
        if req["filled"] >= req["openings"]:
            req["status"] = "filled"
            req["closed_on"] = self.current_date
        return {"success": True, "message": f"Offer {offer_id} accepted; {app['candidate_id']} hired", "requisition_status": req["status"], "remaining_openings": req["openings"] - req["filled"]}

    def rescind_offer(self, offer_id: str, reason: str) -> dict:
        """Withdraw an outstanding offer; the application stays at the offer stage so a revised
        offer can be made or it can be rejected.

        Args:
            offer_id: Offer id.
            reason: Why the offer is rescinded.
        """
        if not isinstance(offer_id, str) or offer_id not in self.offers:
            return self._err(f"Offer {offer_id} not found")
        offer = self.offers[offer_id]
        if offer["status"] != "extended":
            return self._err(f"Offer {offer_id} is {offer['status']}")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A reason is required")
        offer["status"] = "rescinded"
        offer["rescind_reason"] = reason.strip()
        self.applications[offer["application_id"]]["offer_id"] = None
        return {"success": True, "message": f"Offer {offer_id} rescinded"}

    def set_requisition_status(self, requisition_id: str, status: str, reason: str) -> dict:
        """Put a requisition on hold, reopen it, or close it.

        Rules: allowed moves are open -> on_hold, on_hold -> open, and open/on_hold -> closed;
        filled and closed requisitions are final; a requisition with an outstanding offer cannot
        be put on hold or closed.

        Args:
            requisition_id: Requisition id.
            status: open, on_hold or closed.
            reason: Reason for the change.
        """
        if not isinstance(requisition_id, str) or requisition_id not in self.requisitions:
            return self._err(f"Requisition {requisition_id} not found")
        req = self.requisitions[requisition_id]
        allowed = {"open": ("on_hold", "closed"), "on_hold": ("open", "closed")}
        if status not in ("open", "on_hold", "closed"):
            return self._err("status must be open, on_hold or closed")
        if status not in allowed.get(req["status"], ()):
            return self._err(f"Cannot change requisition {requisition_id} from {req['status']} to {status}")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A reason is required")
        if status != "open":
            for o in self.offers.values():
                if o["status"] == "extended" and self.applications[o["application_id"]]["requisition_id"] == requisition_id:
                    return self._err(f"Offer {o['offer_id']} is outstanding on {requisition_id}")
        req["status"] = status
        req["status_reason"] = reason.strip()
        if status == "closed":
            req["closed_on"] = self.current_date
        return {"success": True, "message": f"Requisition {requisition_id} is now {status}"}
