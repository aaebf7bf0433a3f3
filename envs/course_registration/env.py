"""University course registration: courses with prerequisites, sections with capacity and
meeting times, enrollment, waitlists with automatic promotion, withdrawals, grading and
transcripts with GPA."""

BLOCKING_HOLDS = ("financial", "advising", "registration")
MAX_CAPACITY = 300


class CourseRegistration:
    def __init__(self, init_config: dict):
        self.term = {}
        self.grade_points = {}
        self.courses = {}
        self.instructors = {}
        self.sections = {}
        self.students = {}
        self.enrollments = {}
        self.transcripts = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _err(message: str) -> dict:
        return {"success": False, "error": message}

    def _next_id(self) -> str:
        value = self.counters.get("enrollment", 0) + 1
        self.counters["enrollment"] = value
        return f"EN{value}"

    def _today(self) -> str:
        return self.term["current_date"]

    def _add_drop_open(self) -> bool:
        return self.term["registration_open"] and self._today() <= self.term["add_drop_deadline"]

    @staticmethod
    def _minutes(hhmm: str) -> int:
        return int(hhmm[:2]) * 60 + int(hhmm[3:])

    def _overlaps(self, a: dict, b: dict) -> bool:
        ma, mb = a["meeting"], b["meeting"]
        if not set(ma["days"]) & set(mb["days"]):
            return False
        return self._minutes(ma["start"]) < self._minutes(mb["end"]) and self._minutes(mb["start"]) < self._minutes(ma["end"])

    def _active_enrollment(self, student_id: str, section_id: str):
        for e in self.enrollments.values():
            if e["student_id"] == student_id and e["section_id"] == section_id and e["status"] in ("enrolled", "waitlisted"):
                return e
        return None

    def _missing_prereqs(self, student_id: str, course_id: str) -> list:
        course = self.courses[course_id]
        minimum = self.grade_points[course["min_prereq_grade"]]
        record = self.transcripts.get(student_id, {})
        missing = []
        for pre in course["prerequisites"]:
            entry = record.get(pre)
            if entry is None or entry["grade"] not in self.grade_points or self.grade_points[entry["grade"]] < minimum:
                missing.append(pre)
        return missing

    def _eligibility(self, student_id: str, section_id: str, ignore_section: str = "", check_course: bool = True):
        """Error message if the student may not take a seat in the section, else None."""
        student = self.students[student_id]
        if student["status"] != "active":
            return f"Student {student_id} is {student['status']}"
        blocking = sorted(h for h, v in student["holds"].items() if v["type"] in BLOCKING_HOLDS)
        if blocking:
            return f"Student {student_id} has registration hold(s): {', '.join(blocking)}"
        section = self.sections[section_id]
        course = self.courses[section["course_id"]]
        missing = self._missing_prereqs(student_id, course["course_id"])
        if missing:
            return f"Prerequisites not met for {course['course_id']} (need {course['min_prereq_grade']} or better): {', '.join(missing)}"
        if check_course:
            passed = self.transcripts.get(student_id, {}).get(course["course_id"])
            if passed and self.grade_points.get(passed["grade"], 0.0) >= self.grade_points["C-"]:
                return f"Student already passed {course['course_id']} with {passed['grade']}"
            for e in self.enrollments.values():
                if e["student_id"] == student_id and e["status"] in ("enrolled", "waitlisted") and e["section_id"] != ignore_section:
                    if self.sections[e["section_id"]]["course_id"] == course["course_id"]:
                        return f"Student is already {e['status']} in {e['section_id']} for {course['course_id']}"
        credits = student["term_credits"] + course["credits"]
        if ignore_section:
            credits -= self.courses[self.sections[ignore_section]["course_id"]]["credits"]
        if credits > self.term["max_credits"]:
            return f"Enrolling would bring {student_id} to {credits} credits (maximum {self.term['max_credits']})"
        for e in self.enrollments.values():
            if e["student_id"] == student_id and e["status"] == "enrolled" and e["section_id"] not in (ignore_section, section_id):
                other = self.sections[e["section_id"]]
                if self._overlaps(section, other):
                    return f"Time conflict with {other['section_id']} ({other['meeting']['days']} {other['meeting']['start']}-{other['meeting']['end']})"
        return None

    def _promote(self, section_id: str, seats: int) -> list:
        """Move up to `seats` eligible students from the waitlist into the section."""
        section = self.sections[section_id]
        promoted = []
        remaining = list(section["waitlist"])
        for student_id in section["waitlist"]:
            if len(promoted) >= seats:
                break
            entry = self._active_enrollment(student_id, section_id)
            if entry is None or entry["status"] != "waitlisted":
                continue
            if self._eligibility(student_id, section_id, ignore_section="", check_course=False):
                continue
            entry["status"] = "enrolled"
            entry["enrolled_on"] = self._today()
            section["enrolled_count"] += 1
            self.students[student_id]["term_credits"] += self.courses[section["course_id"]]["credits"]
            remaining.remove(student_id)
            promoted.append(student_id)
        if promoted:
            section["waitlist"] = remaining
        return promoted

    def _gpa(self, student: dict) -> float:
        return round(student["quality_points"] / student["credits_attempted"], 2) if student["credits_attempted"] else 0.0

    # ------------------------------------------------------------------ queries
    def list_open_sections(self) -> dict:
        """List sections that are not cancelled, with seats left and waitlist length."""
        rows = [
            {"section_id": s["section_id"], "course_id": s["course_id"], "seats_left": s["capacity"] - s["enrolled_count"], "waitlist_length": len(s["waitlist"]), "meeting": s["meeting"]}
            for s in self.sections.values() if s["status"] == "open"
        ]
        rows.sort(key=lambda r: r["section_id"])
        return {"success": True, "data": rows}

    def get_section(self, section_id: str) -> dict:
        """Return a section with its course title, credits, instructor, seats and waitlist.

        Args:
            section_id: Section id, e.g. CS201-01.
        """
        if not isinstance(section_id, str) or section_id not in self.sections:
            return self._err(f"Section {section_id} not found")
        data = dict(self.sections[section_id])
        course = self.courses[data["course_id"]]
        data.update(title=course["title"], credits=course["credits"], instructor_name=self.instructors[data["instructor_id"]]["name"], seats_left=data["capacity"] - data["enrolled_count"])
        return {"success": True, "data": data}

    def get_student_schedule(self, student_id: str) -> dict:
        """Return a student's enrolled and waitlisted sections for the term with meeting times,
        waitlist positions and term credit load.

        Args:
            student_id: Student id, e.g. S1002.
        """
        if not isinstance(student_id, str) or student_id not in self.students:
            return self._err(f"Student {student_id} not found")
        rows = []
        for e in self.enrollments.values():
            if e["student_id"] == student_id and e["status"] in ("enrolled", "waitlisted"):
                s = self.sections[e["section_id"]]
                row = {"enrollment_id": e["enrollment_id"], "section_id": s["section_id"], "course_id": s["course_id"], "status": e["status"], "meeting": s["meeting"]}
                if e["status"] == "waitlisted":
                    row["waitlist_position"] = s["waitlist"].index(student_id) + 1 if student_id in s["waitlist"] else None
                rows.append(row)
        rows.sort(key=lambda r: r["section_id"])
        return {"success": True, "data": {"student_id": student_id, "term_credits": self.students[student_id]["term_credits"], "sections": rows}}

    def get_transcript(self, student_id: str) -> dict:
        """Return a student's transcript (course, term, grade, credits) with credits earned and
        cumulative GPA.

        Args:
            student_id: Student id.
        """
        if not isinstance(student_id, str) or student_id not in self.students:
            return self._err(f"Student {student_id} not found")
        student = self.students[student_id]
        courses = [dict(course_id=c, **v) for c, v in sorted(self.transcripts.get(student_id, {}).items())]
        return {"success": True, "data": {"student_id": student_id, "name": student["name"], "courses": courses, "credits_earned": student["credits_earned"], "gpa": student["gpa"]}}

    def check_prerequisites(self, student_id: str, course_id: str) -> dict:
        """Check whether a student has completed a course's prerequisites with the minimum grade.

        Args:
            student_id: Student id.
            course_id: Course id, e.g. CS201.
        """
        if not isinstance(student_id, str) or student_id not in self.students:
            return self._err(f"Student {student_id} not found")
        if not isinstance(course_id, str) or course_id not in self.courses:
            return self._err(f"Course {course_id} not found")
        course = self.courses[course_id]
        missing = self._missing_prereqs(student_id, course_id)
        return {"success": True, "data": {"course_id": course_id, "prerequisites": course["prerequisites"], "minimum_grade": course["min_prereq_grade"], "missing": missing, "eligible": not missing}}

    # ------------------------------------------------------------------ updates
    def enroll(self, student_id: str, section_id: str) -> dict:
        """Enroll a student in a section with a free seat.

        Rules: only during add/drop; the student must be active with no financial, advising or
        registration hold; prerequisites passed at the course's minimum grade; the course not
        already passed (C- or better) or taken in another section; the term credit load may not
        exceed the maximum; no meeting-time conflict; the section must be open and not full
        (use join_waitlist when full).

        Args:
            student_id: Student id.
            section_id: Section id.
        """
        if not isinstance(student_id, str) or student_id not in self.students:
            return self._err(f"Student {student_id} not found")
        if not isinstance(section_id, str) or section_id not in self.sections:
            return self._err(f"Section {section_id} not found")
        if not self._add_drop_open():
            return self._err(f"Add/drop for {self.term['code']} is closed")
        section = self.sections[section_id]
        if section["status"] != "open":
            return self._err(f"Section {section_id} is {section['status']}")
        problem = self._eligibility(student_id, section_id)
        if problem:
            return self._err(problem)
        if section["enrolled_count"] >= section["capacity"]:
            return self._err(f"Section {section_id} is full ({section['capacity']} seats); join the waitlist")
        enrollment_id = self._next_id()
        self.enrollments[enrollment_id] = {"enrollment_id": enrollment_id, "student_id": student_id, "section_id": section_id, "status": "enrolled", "grade": None, "enrolled_on": self._today(), "dropped_on": None}
        section["enrolled_count"] += 1
        self.students[student_id]["term_credits"] += self.courses[section["course_id"]]["credits"]
        return {"success": True, "message": f"{student_id} enrolled in {section_id}", "enrollment_id": enrollment_id}

    def join_waitlist(self, student_id: str, section_id: str) -> dict:
        """Add a student to the end of a full section's waitlist.

        Rules: only during add/drop; the section must be open and full; the student must meet
        the same eligibility rules as for enrolling; the waitlist holds at most the section's
        waitlist capacity.

        Args:
            student_id: Student id.
            section_id: Full section id.
        """
        if not isinstance(student_id, str) or student_id not in self.students:
            return self._err(f"Student {student_id} not found")
        if not isinstance(section_id, str) or section_id not in self.sections:
            return self._err(f"Section {section_id} not found")
        if not self._add_drop_open():
            return self._err(f"Add/drop for {self.term['code']} is closed")
        section = self.sections[section_id]
        if section["status"] != "open":
            return self._err(f"Section {section_id} is {section['status']}")
        if section["enrolled_count"] < section["capacity"]:
            return self._err(f"Section {section_id} has open seats; enroll directly")
        if len(section["waitlist"]) >= section["waitlist_capacity"]:
            return self._err(f"Waitlist for {section_id} is full")
        problem = self._eligibility(student_id, section_id)
        if problem:
            return self._err(problem)
        enrollment_id = self._next_id()
        self.enrollments[enrollment_id] = {"enrollment_id": enrollment_id, "student_id": student_id, "section_id": section_id, "status": "waitlisted", "grade": None, "enrolled_on": None, "dropped_on": None}
        section["waitlist"] = section["waitlist"] + [student_id]
        return {"success": True, "message": f"{student_id} is number {len(section['waitlist'])} on the {section_id} waitlist", "enrollment_id": enrollment_id}

    def drop_section(self, student_id: str, section_id: str) -> dict:
        """Drop a section or leave its waitlist. During add/drop the course disappears from the
        record and the freed seat goes to the first eligible waitlisted student; after add/drop and
        up to the withdrawal deadline it is a withdrawal recorded as W on the transcript.

        Args:
            student_id: Student id.
            section_id: Section id.
        """
        if not isinstance(student_id, str) or student_id not in self.students:
            return self._err(f"Student {student_id} not found")
        if not isinstance(section_id, str) or section_id not in self.sections:
            return self._err(f"Section {section_id} not found")
        entry = self._active_enrollment(student_id, section_id)
        if entry is None:
            return self._err(f"{student_id} is not enrolled or waitlisted in {section_id}")
        section = self.sections[section_id]
        course = self.courses[section["course_id"]]
        today = self._today()
        if entry["status"] == "waitlisted":
            entry["status"] = "dropped"
            entry["dropped_on"] = today
            section["waitlist"] = [s for s in section["waitlist"] if s != student_id]
            return {"success": True, "message": f"{student_id} removed from the {section_id} waitlist"}
        if today > self.term["withdraw_deadline"]:
            return self._err(f"The withdrawal deadline ({self.term['withdraw_deadline']}) has passed")
        student = self.students[student_id]
        section["enrolled_count"] -= 1
        student["term_credits"] -= course["credits"]
        entry["dropped_on"] = today
        if self._add_drop_open():
            entry["status"] = "dropped"
            promoted = self._promote(section_id, 1)
            result = {"success": True, "message": f"{student_id} dropped {section_id}"}
            if promoted:
                result["promoted"] = promoted[0]
            return result
        entry["status"] = "withdrawn"
        entry["grade"] = "W"
        self.transcripts.setdefault(student_id, {})[course["course_id"]] = {"term": self.term["code"], "grade": "W", "credits": course["credits"]}
        return {"success": True, "message": f"{student_id} withdrew from {section_id} (W)"}

    def swap_section(self, student_id: str, from_section_id: str, to_section_id: str) -> dict:
        """Atomically move a student from one section of a course to another section of the same
        course with a free seat; the freed seat is offered to the old section's waitlist.

        Rules: only during add/drop; both sections belong to the same course; the student must be
        enrolled in the first; the new section must be open, have a seat, and not conflict with
        the student's other sections.

        Args:
            student_id: Student id.
            from_section_id: Section the student is leaving.
            to_section_id: Section of the same course to join.
        """
        if not isinstance(student_id, str) or student_id not in self.students:
            return self._err(f"Student {student_id} not found")
        for sid in (from_section_id, to_section_id):
            if not isinstance(sid, str) or sid not in self.sections:
                return self._err(f"Section {sid} not found")
        if not self._add_drop_open():
            return self._err(f"Add/drop for {self.term['code']} is closed")
        old, new = self.sections[from_section_id], self.sections[to_section_id]
        if from_section_id == to_section_id or old["course_id"] != new["course_id"]:
            return self._err("Sections must be two different sections of the same course")
        entry = self._active_enrollment(student_id, from_section_id)
        if entry is None or entry["status"] != "enrolled":
            return self._err(f"{student_id} is not enrolled in {from_section_id}")
        if new["status"] != "open":
            return self._err(f"Section {to_section_id} is {new['status']}")
        if new["enrolled_count"] >= new["capacity"]:
            return self._err(f"Section {to_section_id} is full")
        problem = self._eligibility(student_id, to_section_id, ignore_section=from_section_id)
        if problem:
            return self._err(problem)
        today = self._today()
        entry["status"] = "dropped"
        entry["dropped_on"] = today
        old["enrolled_count"] -= 1
        enrollment_id = self._next_id()
        self.enrollments[enrollment_id] = {"enrollment_id": enrollment_id, "student_id": student_id, "section_id": to_section_id, "status": "enrolled", "grade": None, "enrolled_on": today, "dropped_on": None}
        new["enrolled_count"] += 1
        promoted = self._promote(from_section_id, 1)
        result = {"success": True, "message": f"{student_id} moved from {from_section_id} to {to_section_id}", "enrollment_id": enrollment_id}
        if promoted:
            result["promoted"] = promoted[0]
        return result

    def post_grade(self, enrollment_id: str, instructor_id: str, grade: str) -> dict:
        """Post a final grade for an enrolled student. Completes the enrollment, writes the
        transcript entry (replacing an earlier attempt of the course) and updates credits
        attempted, credits earned (any grade but F), quality points and GPA.

        Rules: only from the term's grading open date; only the section's instructor; grade must
        be a letter grade on the scale (A to F).

        Args:
            enrollment_id: Enrollment id, e.g. EN5003.
            instructor_id: Instructor id of the section.
            grade: Letter grade: A, A-, B+, B, B-, C+, C, C-, D, F.
        """
        if not isinstance(enrollment_id, str) or enrollment_id not in self.enrollments:
            return self._err(f"Enrollment {enrollment_id} not found")
        entry = self.enrollments[enrollment_id]
        if entry["status"] != "enrolled":
            return self._err(f"Enrollment {enrollment_id} is {entry['status']}")
        if self._today() < self.term["grading_opens"]:
            return self._err(f"Grading opens on {self.term['grading_opens']}")
        section = self.sections[entry["section_id"]]
        if instructor_id != section["instructor_id"]:
            return self._err(f"{instructor_id} does not teach {section['section_id']}")
        if not isinstance(grade, str) or grade not in self.grade_points:
            return self._err(f"Invalid grade {grade!r}")
        course = self.courses[section["course_id"]]
        student = self.students[entry["student_id"]]
        record = self.transcripts.setdefault(entry["student_id"], {})
        previous = record.get(course["course_id"])
        if previous and previous["grade"] in self.grade_points:
            student["credits_attempted"] -= previous["credits"]
            student["quality_points"] = round(student["quality_points"] - self.grade_points[previous["grade"]] * previous["credits"], 2)
            if previous["grade"] != "F":
                student["credits_earned"] -= previous["credits"]
        record[course["course_id"]] = {"term": self.term["code"], "grade": grade, "credits": course["credits"]}
        student["credits_attempted"] += course["credits"]
        student["quality_points"] = round(student["quality_points"] + self.grade_points[grade] * course["credits"], 2)
        if grade != "F":
            student["credits_earned"] += course["credits"]
        student["gpa"] = self._gpa(student)
        entry["status"] = "completed"
        entry["grade"] = grade
        return {"success": True, "message": f"Posted {grade} for {entry['student_id']} in {section['section_id']}", "gpa": student["gpa"]}

    def release_hold(self, student_id: str, hold_id: str) -> dict:
        """Remove a hold from a student's record once the issue is resolved.

        Args:
            student_id: Student id.
            hold_id: Hold id on the student's record, e.g. H-2291.
        """
        if not isinstance(student_id, str) or student_id not in self.students:
            return self._err(f"Student {student_id} not found")
        holds = self.students[student_id]["holds"]
        if not isinstance(hold_id, str) or hold_id not in holds:
            return self._err(f"Student {student_id} has no hold {hold_id}")
        hold = holds.pop(hold_id)
        return {"success": True, "message": f"Released {hold['type']} hold {hold_id} for {student_id}"}

    def cancel_section(self, section_id: str, reason: str) -> dict:
        """Cancel a section during add/drop: every enrolled and waitlisted student is dropped and
        enrolled students' credit loads are reduced.

        Args:
            section_id: Section id.
            reason: Reason for cancellation (e.g. low enrollment).
        """
        if not isinstance(section_id, str) or section_id not in self.sections:
            return self._err(f"Section {section_id} not found")
        section = self.sections[section_id]
        if section["status"] != "open":
            return self._err(f"Section {section_id} is already {section['status']}")
        if not self._add_drop_open():
            return self._err("Sections can only be cancelled during add/drop")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A reason is required")
        credits = self.courses[section["course_id"]]["credits"]
        affected = []
        for e in self.enrollments.values():
            if e["section_id"] == section_id and e["status"] in ("enrolled", "waitlisted"):
                if e["status"] == "enrolled":
                    self.students[e["student_id"]]["term_credits"] -= credits
                e["status"] = "dropped"
                e["dropped_on"] = self._today()
                affected.append(e["student_id"])
        section["status"] = "cancelled"
        section["cancel_reason"] = reason.strip()
        section["enrolled_count"] = 0
        section["waitlist"] = []
        return {"success": True, "message": f"Section {section_id} cancelled", "affected_students": sorted(affected)}

    def change_capacity(self, section_id: str, new_capacity: int) -> dict:
        """Change a section's seat limit. Raising it during add/drop promotes eligible waitlisted
        students in order into the new seats.

        Rules: 1 to 300 seats, never below the number currently enrolled; the section must be
        open.

        Args:
            section_id: Section id.
            new_capacity: New number of seats.
        """
        if not isinstance(section_id, str) or section_id not in self.sections:
            return self._err(f"Section {section_id} not found")
        section = self.sections[section_id]
        if section["status"] != "open":
            return self._err(f"Section {section_id} is {section['status']}")
        if isinstance(new_capacity, bool) or not isinstance(new_capacity, int) or not 1 <= new_capacity <= MAX_CAPACITY:
            return self._err(f"new_capacity must be an integer from 1 to {MAX_CAPACITY}")
        if new_capacity < section["enrolled_count"]:
            return self._err(f"{section['enrolled_count']} students are enrolled; capacity cannot go below that")
        if new_capacity == section["capacity"]:
            return self._err(f"Capacity is already {new_capacity}")
        section["capacity"] = new_capacity
        promoted = []
        if self._add_drop_open():
            promoted = self._promote(section_id, new_capacity - section["enrolled_count"])
        return {"success": True, "message": f"Capacity of {section_id} set to {new_capacity}", "promoted": promoted}
