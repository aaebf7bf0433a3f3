"""Course exam grading: exams and questions with answer keys and rubrics, student
submissions with automatic multiple-choice scoring, rubric-based manual grading, grade
publishing, answer-key errata and regrade requests."""

import datetime

MCQ_OPTIONS = ("A", "B", "C", "D", "E")
MIN_REGRADE_REASON = 15


class ExamGrading:
    def __init__(self, init_config: dict):
        self.current_date = ""
        self.course = {}
        self.grade_scale = {}
        self.graders = {}
        self.students = {}
        self.exams = {}
        self.questions = {}
        self.submissions = {}
        self.regrade_requests = {}
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

    def _exam_questions(self, exam_id: str) -> list:
        return sorted((q for q in self.questions.values() if q["exam_id"] == exam_id), key=lambda q: q["number"])

    def _letter(self, percent: float) -> str:
        for letter, minimum in sorted(self.grade_scale.items(), key=lambda kv: -kv[1]):
            if percent >= minimum:
                return letter
        return "F"

    def _refresh_total(self, submission: dict) -> bool:
        """Recompute total, percent and letter when every question is scored; True if graded."""
        questions = self._exam_questions(submission["exam_id"])
        if any(q["question_id"] not in submission["scores"] for q in questions):
            return False
        exam = self.exams[submission["exam_id"]]
        total = round(sum(s["points"] for s in submission["scores"].values()), 2)
        percent = round(total / exam["total_points"] * 100, 1)
        submission["total"] = total
        submission["percent"] = percent
        submission["letter"] = self._letter(percent)
        if submission["status"] == "submitted":
            submission["status"] = "graded"
        return True

    def _can_grade(self, grader_id, exam_id: str):
        if not isinstance(grader_id, str) or grader_id not in self.graders:
            return f"Grader {grader_id} not found"
        if exam_id not in self.graders[grader_id]["exams"]:
            return f"Grader {grader_id} is not assigned to {exam_id}"
        return None

    def _rubric_points(self, question: dict, rubric_item_ids):
        if not isinstance(rubric_item_ids, list) or not all(isinstance(r, str) for r in rubric_item_ids):
            return None, "rubric_item_ids must be a list of rubric item ids"
        if len(set(rubric_item_ids)) != len(rubric_item_ids):
            return None, "rubric items must not repeat"
        unknown = [r for r in rubric_item_ids if r not in question["rubric"]]
        if unknown:
            return None, f"Unknown rubric item(s) for {question['question_id']}: {', '.join(unknown)}"
        points = sum(question["rubric"][r]["points"] for r in rubric_item_ids)
        return min(points, question["points"]), None

    # ------------------------------------------------------------------ queries
    def get_exam(self, exam_id: str) -> dict:
        """Return an exam with its questions (answer keys hidden while the exam is open) and
        submission counts by status.

        Args:
            exam_id: Exam id, e.g. MID1.
        """
        if not isinstance(exam_id, str) or exam_id not in self.exams:
            return self._err(f"Exam {exam_id} not found")
        exam = self.exams[exam_id]
        data = dict(exam)
        data["questions"] = []
        for q in self._exam_questions(exam_id):
            row = {"question_id": q["question_id"], "number": q["number"], "type": q["type"], "points": q["points"]}
            if q["type"] == "mcq" and exam["status"] != "open":
                row["answer_key"] = q["answer_key"]
            if q["rubric"]:
                row["rubric"] = q["rubric"]
            data["questions"].append(row)
        counts = {}
        for s in self.submissions.values():
            if s["exam_id"] == exam_id:
                counts[s["status"]] = counts.get(s["status"], 0) + 1
        data["submission_counts"] = dict(sorted(counts.items()))
        return {"success": True, "data": data}

    def get_submission(self, submission_id: str) -> dict:
        """Return a submission with answers, per-question scores and, once graded, the total,
        percentage and letter.

        Args:
            submission_id: Submission id, e.g. SUB102.
        """
        if not isinstance(submission_id, str) or submission_id not in self.submissions:
            return self._err(f"Submission {submission_id} not found")
        return {"success": True, "data": dict(self.submissions[submission_id])}

    def list_ungraded(self, exam_id: str) -> dict:
        """List an exam's submissions that still have unscored questions, with the questions left.

        Args:
            exam_id: Exam id.
        """
        if not isinstance(exam_id, str) or exam_id not in self.exams:
            return self._err(f"Exam {exam_id} not found")
        qids = [q["question_id"] for q in self._exam_questions(exam_id)]
        rows = []
        for s in sorted(self.submissions.values(), key=lambda x: x["submission_id"]):
            if s["exam_id"] == exam_id:
                left = [q for q in qids if q not in s["scores"]]
                if left:
                    rows.append({"submission_id": s["submission_id"], "student_id": s["student_id"], "unscored": left})
        return {"success": True, "data": rows}

    def exam_statistics(self, exam_id: str) -> dict:
        """Summarise fully graded submissions of an exam: count, mean, median, highest and lowest
        percentage, and the letter-grade distribution.

        Args:
            exam_id: Exam id.
        """
        if not isinstance(exam_id, str) or exam_id not in self.exams:
            return self._err(f"Exam {exam_id} not found")
        graded = sorted(s["percent"] for s in self.submissions.values() if s["exam_id"] == exam_id and s["status"] in ("graded", "published"))
        if not graded:
            return self._err(f"No graded submissions for {exam_id} yet")
        n = len(graded)
        median = graded[n // 2] if n % 2 else round((graded[n // 2 - 1] + graded[n // 2]) / 2, 2)
        dist = {letter: 0 for letter in sorted(self.grade_scale)}
        for s in self.submissions.values():
            if s["exam_id"] == exam_id and s["status"] in ("graded", "published"):
                dist[s["letter"]] += 1
        return {"success": True, "data": {"exam_id": exam_id, "graded": n, "mean": round(sum(graded) / n, 2), "median": median, "high": graded[-1], "low": graded[0], "distribution": dist}}

    # ------------------------------------------------------------------ updates
    def submit_exam(self, exam_id: str, student_id: str, answers: dict) -> dict:
        """Hand in a student's answers. Multiple-choice questions are scored immediately against
        the answer key; the submission is time-stamped.

        Rules: the exam must be open and not past its closing date; the student must be enrolled
        and may submit only once; answers map question ids of this exam to text (multiple-choice
        answers are one of A-E); every question must be answered.

        Args:
            exam_id: Exam id.
            student_id: Student id, e.g. ST03.
            answers: Object mapping question id to the answer, e.g. {"QUIZ3-Q1": "B"}.
        """
        if not isinstance(exam_id, str) or exam_id not in self.exams:
            return self._err(f"Exam {exam_id} not found")
        exam = self.exams[exam_id]
        if exam["status"] != "open" or self.current_date > exam["closes_on"]:
            return self._err(f"Exam {exam_id} is not accepting submissions")
        if not isinstance(student_id, str) or student_id not in self.students:
            return self._err(f"Student {student_id} not found")
        if self.students[student_id]["status"] != "enrolled":
            return self._err(f"Student {student_id} is {self.students[student_id]['status']}")
        for s in self.submissions.values():
            if s["exam_id"] == exam_id and s["student_id"] == student_id:
                return self._err(f"Student {student_id} already submitted ({s['submission_id']})")
        if not isinstance(answers, dict):
            return self._err("answers must be an object keyed by question id")
        questions = {q["question_id"]: q for q in self._exam_questions(exam_id)}
        unknown = sorted(set(answers) - set(questions))
        if unknown:
            return self._err(f"Not questions of {exam_id}: {', '.join(unknown)}")
        missing = sorted(set(questions) - set(answers))
        if missing:
            return self._err(f"Unanswered questions: {', '.join(missing)}")
        for qid, answer in answers.items():
            if not isinstance(answer, str) or not answer.strip():
                return self._err(f"Answer to {qid} must be non-empty text")
            if questions[qid]["type"] == "mcq" and answer.strip().upper() not in MCQ_OPTIONS:
                return self._err(f"Answer to {qid} must be one of A-E")
        scores = {}
        for qid, q in questions.items():
            if q["type"] == "mcq":
                correct = answers[qid].strip().upper() == q["answer_key"]
                scores[qid] = {"points": q["points"] if correct else 0, "rubric_items": [], "grader_id": "auto", "comment": None}
        submission_id = self._next_id("submission", "SUB")
        self.submissions[submission_id] = {
            "submission_id": submission_id,
            "exam_id": exam_id,
            "student_id": student_id,
            "submitted_at": datetime.datetime.now().isoformat(timespec="seconds"),
            "answers": {qid: (a.strip().upper() if questions[qid]["type"] == "mcq" else a.strip()) for qid, a in answers.items()},
            "scores": scores,
            "total": None,
            "percent": None,
            "letter": None,
            "status": "submitted",
        }
        mcq_points = sum(s["points"] for s in scores.values())
        return {"success": True, "message": f"Submission {submission_id} received", "submission_id": submission_id, "auto_scored_points": mcq_points}

    def close_exam(self, exam_id: str) -> dict:
        """Close an open exam to submissions so grading can begin. Reports enrolled students who
        did not submit.

        Args:
            exam_id: Open exam id.
        """
        if not isinstance(exam_id, str) or exam_id not in self.exams:
            return self._err(f"Exam {exam_id} not found")
        exam = self.exams[exam_id]
        if exam["status"] != "open":
            return self._err(f"Exam {exam_id} is {exam['status']}, not open")
        exam["status"] = "closed"
        exam["closed_on"] = self.current_date
        submitted = {s["student_id"] for s in self.submissions.values() if s["exam_id"] == exam_id}
        missing = sorted(sid for sid, st in self.students.items() if st["status"] == "enrolled" and sid not in submitted)
        return {"success": True, "message": f"Exam {exam_id} closed", "no_submission": missing}

    def score_question(self, submission_id: str, question_id: str, grader_id: str, rubric_item_ids: list[str], comment: str = "") -> dict:
        """Score a written question on a submission by selecting the rubric items earned; the
        points are the sum of the items, capped at the question's value. When every question is
        scored the submission becomes graded with total, percentage and letter.

        Rules: the exam must be closed (not open or published); the grader must be assigned to the
        exam; multiple-choice questions are scored automatically and cannot be scored by hand;
        a question may be rescored until grades are published.

        Args:
            submission_id: Submission id.
            question_id: Question id, e.g. MID1-Q4.
            grader_id: Grader id, e.g. G02.
            rubric_item_ids: Rubric item ids earned, e.g. ["R1", "R3"]; empty for zero.
            comment: Feedback for the student.
        """
        if not isinstance(submission_id, str) or submission_id not in self.submissions:
            return self._err(f"Submission {submission_id} not found")
        sub = self.submissions[submission_id]
        exam = self.exams[sub["exam_id"]]
        if exam["status"] != "closed":
            return self._err(f"Exam {exam['exam_id']} is {exam['status']}; scoring happens while it is closed")
        problem = self._can_grade(grader_id, exam["exam_id"])
        if problem:
            return self._err(problem)
        question = self.questions.get(question_id) if isinstance(question_id, str) else None
        if question is None or question["exam_id"] != exam["exam_id"]:
            return self._err(f"Question {question_id} is not on {exam['exam_id']}")
        if question["type"] == "mcq":
            return self._err(f"{question_id} is multiple choice and scored automatically")
        if not isinstance(comment, str):
            return self._err("comment must be a string")
        points, error = self._rubric_points(question, rubric_item_ids)
        if error:
            return self._err(error)
        sub["scores"][question_id] = {"points": points, "rubric_items": list(rubric_item_ids), "grader_id": grader_id, "comment": comment.strip() or None}
        graded = self._refresh_total(sub)
        result = {"success": True, "message": f"{question_id} scored {points:g}/{question['points']:g}", "points": points, "submission_status": sub["status"]}
        if graded:
            result.update(total=sub["total"], letter=sub["letter"])
        return result

    def update_answer_key(self, question_id: str, answer_key: str) -> dict:
        """Correct a multiple-choice answer key (erratum) and rescore that question on every
        submission, updating totals of graded submissions.

        Rules: only before grades are published; the new key must differ from the old one.

        Args:
            question_id: Multiple-choice question id.
            answer_key: Correct option, A-E.
        """
        if not isinstance(question_id, str) or question_id not in self.questions:
            return self._err(f"Question {question_id} not found")
        question = self.questions[question_id]
        if question["type"] != "mcq":
            return self._err(f"{question_id} is not multiple choice")
        if self.exams[question["exam_id"]]["status"] == "published":
            return self._err("Grades are published; use regrade requests instead")
        if answer_key not in MCQ_OPTIONS:
            return self._err("answer_key must be one of A-E")
        if answer_key == question["answer_key"]:
            return self._err(f"{question_id} already has key {answer_key}")
        question["answer_key"] = answer_key
        changed = []
        for sub in sorted(self.submissions.values(), key=lambda s: s["submission_id"]):
            if sub["exam_id"] != question["exam_id"] or question_id not in sub["scores"]:
                continue
            points = question["points"] if sub["answers"].get(question_id) == answer_key else 0
            if sub["scores"][question_id]["points"] != points:
                sub["scores"][question_id]["points"] = points
                changed.append(sub["submission_id"])
                if sub["total"] is not None:
                    self._refresh_total(sub)
        return {"success": True, "message": f"Answer key for {question_id} set to {answer_key}", "rescored_submissions": changed}

    def publish_grades(self, exam_id: str) -> dict:
        """Release a closed exam's grades to students and open the regrade window.

        Rules: every submission must be fully graded; the regrade deadline is the exam's regrade
        window (days) after today.

        Args:
            exam_id: Closed exam id.
        """
        if not isinstance(exam_id, str) or exam_id not in self.exams:
            return self._err(f"Exam {exam_id} not found")
        exam = self.exams[exam_id]
        if exam["status"] != "closed":
            return self._err(f"Exam {exam_id} is {exam['status']}; only closed exams can be published")
        pending = sorted(s["submission_id"] for s in self.submissions.values() if s["exam_id"] == exam_id and s["status"] != "graded")
        if pending:
            return self._err(f"Not fully graded: {', '.join(pending)}")
        count = 0
        for s in self.submissions.values():
            if s["exam_id"] == exam_id:
                s["status"] = "published"
                count += 1
        exam["status"] = "published"
        exam["published_on"] = self.current_date
        exam["regrade_deadline"] = self._add_days(exam["regrade_window_days"])
        return {"success": True, "message": f"Published {count} grades for {exam_id}", "regrade_deadline": exam["regrade_deadline"]}

    def file_regrade_request(self, submission_id: str, question_id: str, reason: str) -> dict:
        """File a student's request to regrade one question of a published submission.

        Rules: only until the exam's regrade deadline; the question must be on the exam; one open
        request per question; the reason must be at least 15 characters.

        Args:
            submission_id: Published submission id.
            question_id: Question to regrade.
            reason: Student's explanation.
        """
        if not isinstance(submission_id, str) or submission_id not in self.submissions:
            return self._err(f"Submission {submission_id} not found")
        sub = self.submissions[submission_id]
        exam = self.exams[sub["exam_id"]]
        if sub["status"] != "published":
            return self._err("Regrades can only be requested on published grades")
        if self.current_date > exam["regrade_deadline"]:
            return self._err(f"The regrade deadline for {exam['exam_id']} was {exam['regrade_deadline']}")
        if not isinstance(question_id, str) or question_id not in sub["scores"]:
            return self._err(f"Question {question_id} is not on {exam['exam_id']}")
        if not isinstance(reason, str) or len(reason.strip()) < MIN_REGRADE_REASON:
            return self._err(f"Please explain the request in at least {MIN_REGRADE_REASON} characters")
        for r in self.regrade_requests.values():
            if r["submission_id"] == submission_id and r["question_id"] == question_id and r["status"] == "open":
                return self._err(f"Request {r['request_id']} for {question_id} is already open")
        request_id = self._next_id("regrade", "RR")
        self.regrade_requests[request_id] = {
            "request_id": request_id,
            "submission_id": submission_id,
            "question_id": question_id,
            "reason": reason.strip(),
            "status": "open",
            "filed_on": self.current_date,
            "resolved_by": None,
            "response": None,
            "old_points": sub["scores"][question_id]["points"],
            "new_points": None,
        }
        return {"success": True, "message": f"Regrade request {request_id} filed", "request_id": request_id}

    def resolve_regrade(self, request_id: str, grader_id: str, accept: bool, rubric_item_ids: list[str], response: str) -> dict:
        """Decide an open regrade request. Accepting rescores the question (rubric items for
        written questions; full marks for a multiple-choice question) and updates the total,
        percentage and letter.

        Rules: the resolver must be assigned to the exam and be the instructor or a grader other
        than the one who scored the question; a response is required.

        Args:
            request_id: Regrade request id, e.g. RR3.
            grader_id: Resolving grader id.
            accept: True to change the score, False to keep it.
            rubric_item_ids: Rubric items earned after regrade (ignored for multiple choice or when rejecting).
            response: Explanation sent to the student.
        """
        if not isinstance(request_id, str) or request_id not in self.regrade_requests:
            return self._err(f"Regrade request {request_id} not found")
        req = self.regrade_requests[request_id]
        if req["status"] != "open":
            return self._err(f"Regrade request {request_id} is already {req['status']}")
        sub = self.submissions[req["submission_id"]]
        problem = self._can_grade(grader_id, sub["exam_id"])
        if problem:
            return self._err(problem)
        score = sub["scores"][req["question_id"]]
        if self.graders[grader_id]["role"] != "instructor" and score["grader_id"] == grader_id:
            return self._err("A regrade must be decided by the instructor or a different grader")
        if not isinstance(accept, bool):
            return self._err("accept must be true or false")
        if not isinstance(response, str) or not response.strip():
            return self._err("A response to the student is required")
        question = self.questions[req["question_id"]]
        if not accept:
            req["status"] = "rejected"
            req["resolved_by"] = grader_id
            req["response"] = response.strip()
            req["new_points"] = req["old_points"]
            return {"success": True, "message": f"Regrade {request_id} rejected; score unchanged"}
        if question["type"] == "mcq":
            points, items = question["points"], []
        else:
            points, error = self._rubric_points(question, rubric_item_ids)
            if error:
                return self._err(error)
            items = list(rubric_item_ids)
        req["resolved_by"] = grader_id
        req["response"] = response.strip()
        req["status"] = "accepted"
        req["new_points"] = points
        score["points"] = points
        score["rubric_items"] = items
        score["grader_id"] = grader_id
        score["comment"] = f"Regrade: {response.strip()}"
        self._refresh_total(sub)
        return {"success": True, "message": f"Regrade {request_id} accepted: {req['old_points']:g} -> {points:g}", "total": sub["total"], "letter": sub["letter"]}

    def assign_grader(self, exam_id: str, grader_id: str) -> dict:
        """Give a grader access to score an exam.

        Args:
            exam_id: Exam id.
            grader_id: Grader id.
        """
        if not isinstance(exam_id, str) or exam_id not in self.exams:
            return self._err(f"Exam {exam_id} not found")
        if not isinstance(grader_id, str) or grader_id not in self.graders:
            return self._err(f"Grader {grader_id} not found")
        grader = self.graders[grader_id]
        if exam_id in grader["exams"]:
            return self._err(f"{grader_id} is already assigned to {exam_id}")
        grader["exams"] = grader["exams"] + [exam_id]
        return {"success": True, "message": f"{grader['name']} assigned to {exam_id}"}
