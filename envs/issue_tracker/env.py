"""An issue tracker for software teams: projects with workflows, issues, sprints, labels and comments.

Each project follows one workflow that lists its statuses (each in a category: todo, in_progress
or done) and the allowed transitions between them. Sprint point totals are kept up to date as
issues are estimated, added to sprints and completed.
"""

import datetime
import re


ISSUE_TYPES = ("bug", "story", "task", "epic")
PRIORITIES = ("lowest", "low", "medium", "high", "highest")
RESOLUTIONS = ("fixed", "done", "duplicate", "wont_fix", "cannot_reproduce")
POINT_SCALE = (0, 1, 2, 3, 5, 8, 13, 21)
ASSIGNABLE_ROLES = ("lead", "developer")
MAX_LABELS = 5
MAX_SPRINT_DAYS = 28


class IssueTracker:
    """Projects, issues, workflows, sprints, labels and comments."""

    def __init__(self, init_config: dict):
        self.users = {}
        self.workflows = {}
        self.projects = {}
        self.issues = {}
        self.sprints = {}
        self.comments = {}
        self.comment_seq = 0

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

    def _issue(self, issue_id):
        if not isinstance(issue_id, str) or issue_id not in self.issues:
            return None, self._fail(f"issue {issue_id} not found")
        return self.issues[issue_id], None

    def _category(self, issue):
        wf = self.workflows[self.projects[issue["project"]]["workflow"]]
        return wf["statuses"][issue["status"]]["category"]

    def _member_role(self, project_key, user_id):
        return self.projects[project_key]["members"].get(user_id)

    def _active_member(self, project_key, user_id):
        if not isinstance(user_id, str) or user_id not in self.users:
            return f"user {user_id} not found"
        if not self.users[user_id]["active"]:
            return f"user {user_id} is deactivated"
        if self._member_role(project_key, user_id) is None:
            return f"user {user_id} is not a member of project {project_key}"
        return None

    @staticmethod
    def _date(value):
        if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            return None
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            return None

    def _points(self, issue):
        return issue["story_points"] or 0

    # ------------------------------------------------------------------ queries

    def get_issue(self, issue_id: str) -> dict:
        """Return an issue with its comments (oldest first) and the statuses it may move to next.

        Args:
            issue_id: Issue key, e.g. "PAY-142".
        """
        err = self._require_str(issue_id=issue_id)
        if err:
            return err
        issue, err = self._issue(issue_id)
        if err:
            return err
        comments = [dict(c, comment_id=cid) for cid, c in sorted(self.comments.items())
                    if c["issue"] == issue_id]
        wf = self.workflows[self.projects[issue["project"]]["workflow"]]
        data = dict(issue)
        data["id"] = issue_id
        data["available_transitions"] = list(wf["transitions"].get(issue["status"], []))
        data["comments"] = comments
        return {"success": True, "data": data}

    def search_issues(self, project_key: str, status: str = "", assignee: str = "", label: str = "") -> dict:
        """List a project's issues, optionally filtered by status, assignee or label.

        Args:
            project_key: Project key, e.g. "PAY".
            status: Only issues in this workflow status (empty for all).
            assignee: Only issues assigned to this user id; "unassigned" for issues without one.
            label: Only issues carrying this label.
        Returns id, type, title, status, priority, assignee and story points, sorted by id number.
        """
        err = self._require_str(project_key=project_key, status=status, assignee=assignee, label=label)
        if err:
            return err
        if project_key not in self.projects:
            return self._fail(f"project {project_key} not found")
        wf = self.workflows[self.projects[project_key]["workflow"]]
        if status and status not in wf["statuses"]:
            return self._fail(f"status '{status}' is not part of the {wf['name']} workflow")
        out = []
        for iid, i in self.issues.items():
            if i["project"] != project_key:
                continue
            if status and i["status"] != status:
                continue
            if assignee == "unassigned" and i["assignee"] is not None:
                continue
            if assignee and assignee != "unassigned" and i["assignee"] != assignee:
                continue
            if label and label not in i["labels"]:
                continue
            out.append({"id": iid, "type": i["type"], "title": i["title"], "status": i["status"],
                        "priority": i["priority"], "assignee": i["assignee"], "story_points": i["story_points"]})
        out.sort(key=lambda r: int(r["id"].rsplit("-", 1)[1]))
        return {"success": True, "data": out}

    def get_sprint_board(self, sprint_id: str) -> dict:
        """Return a sprint's issues grouped by status plus its point totals.

        Args:
            sprint_id: Sprint id, e.g. "PAY-S7".
        """
        err = self._require_str(sprint_id=sprint_id)
        if err:
            return err
        sp = self.sprints.get(sprint_id)
        if sp is None:
            return self._fail(f"sprint {sprint_id} not found")
        columns = {}
        for iid in sorted(self.issues, key=lambda k: int(k.rsplit("-", 1)[1])):
            i = self.issues[iid]
            if i["sprint"] == sprint_id:
                columns.setdefault(i["status"], []).append(iid)
        return {"success": True, "data": {"sprint_id": sprint_id, "name": sp["name"], "state": sp["state"],
                                          "goal": sp["goal"], "start_date": sp["start_date"],
                                          "end_date": sp["end_date"], "committed_points": sp["committed_points"],
                                          "completed_points": sp["completed_points"], "columns": columns}}

    def list_projects(self) -> dict:
        """List all projects with their lead, workflow, active sprint and issue counts."""
        out = []
        for key in sorted(self.projects):
            p = self.projects[key]
            counts = {"todo": 0, "in_progress": 0, "done": 0}
            for i in self.issues.values():
                if i["project"] == key:
                    counts[self._category(i)] += 1
            out.append({"key": key, "name": p["name"], "lead": p["lead"], "workflow": p["workflow"],
                        "archived": p["archived"], "active_sprint": p["active_sprint"],
                        "members": len(p["members"]), "issues_by_category": counts})
        return {"success": True, "data": out}

    # ------------------------------------------------------------------ updates

    def create_issue(self, project_key: str, issue_type: str, title: str, reporter_id: str,
                     priority: str = "medium", description: str = "") -> dict:
        """Create a new issue in a project's initial workflow status.

        Args:
            project_key: Project key, e.g. "PAY".
            issue_type: One of bug, story, task, epic.
            title: Summary, 5 to 200 characters.
            reporter_id: User id of the reporter; must be an active project member.
            priority: lowest, low, medium (default), high or highest.
            description: Details; bugs must include a description (steps to reproduce).
        The issue id is the project key plus the project's next issue number.
        """
        err = self._require_str(
            project_key=project_key, issue_type=issue_type, title=title, reporter_id=reporter_id,
            priority=priority, description=description)
        if err:
            return err
        proj = self.projects.get(project_key)
        if proj is None:
            return self._fail(f"project {project_key} not found")
        if proj.get("archived"):
            return self._fail(f"project {project_key} is archived")
        if issue_type not in ISSUE_TYPES:
            return self._fail(f"invalid issue type '{issue_type}'; expected one of {', '.join(ISSUE_TYPES)}")
        if not isinstance(title, str) or not (5 <= len(title.strip()) <= 200):
            return self._fail("title must be 5 to 200 characters")
        if priority not in PRIORITIES:
            return self._fail(f"invalid priority '{priority}'; expected one of {', '.join(PRIORITIES)}")
        if not isinstance(description, str):
            return self._fail("description must be a string")
        if issue_type == "bug" and not description.strip():
            return self._fail("bug reports require a description with steps to reproduce")
        err = self._active_member(project_key, reporter_id)
        if err:
            return self._fail(err)
        number = proj["next_issue_number"]
        issue_id = f"{project_key}-{number}"
        self.issues[issue_id] = {
            "project": project_key, "type": issue_type, "title": title.strip(), "description": description,
            "status": self.workflows[proj["workflow"]]["initial"], "priority": priority, "assignee": None,
            "reporter": reporter_id, "labels": [], "sprint": None, "story_points": None, "resolution": None,
            "comment_count": 0, "created_at": datetime.datetime.now().replace(microsecond=0).isoformat(),
        }
        proj["next_issue_number"] = number + 1
        return {"success": True, "message": f"Created {issue_id}", "issue_id": issue_id}

    def assign_issue(self, issue_id: str, assignee_id: str) -> dict:
        """Assign an issue to a project member, or unassign it with an empty assignee_id.

        Args:
            issue_id: Issue key.
            assignee_id: User id (active member with role lead or developer), or "" to unassign.
        Rules: issues in a done-category status cannot be reassigned; an issue in an
        in-progress status cannot be left unassigned.
        """
        err = self._require_str(issue_id=issue_id, assignee_id=assignee_id)
        if err:
            return err
        issue, err = self._issue(issue_id)
        if err:
            return err
        if self._category(issue) == "done":
            return self._fail(f"{issue_id} is {issue['status']}; reopen it before changing the assignee")
        if assignee_id == "":
            if issue["assignee"] is None:
                return self._fail(f"{issue_id} is already unassigned")
            if self._category(issue) == "in_progress":
                return self._fail(f"{issue_id} is in progress and must keep an assignee")
            issue["assignee"] = None
            return {"success": True, "message": f"{issue_id} unassigned"}
        err = self._active_member(issue["project"], assignee_id)
        if err:
            return self._fail(err)
        role = self._member_role(issue["project"], assignee_id)
        if role not in ASSIGNABLE_ROLES:
            return self._fail(f"user {assignee_id} has role '{role}' and cannot be assigned issues")
        if issue["assignee"] == assignee_id:
            return self._fail(f"{issue_id} is already assigned to {assignee_id}")
        issue["assignee"] = assignee_id
        return {"success": True, "message": f"{issue_id} assigned to {assignee_id}"}

    def transition_issue(self, issue_id: str, to_status: str, resolution: str = "") -> dict:
        """Move an issue to another status along an allowed workflow transition.

        Args:
            issue_id: Issue key.
            to_status: Target status name (see available_transitions in get_issue).
            resolution: Required when entering a done-category status from a non-done one: fixed,
                done, duplicate, wont_fix or cannot_reproduce. Optional between two done statuses
                (replaces the current one); must be empty for any other target.
        Rules: entering an in-progress status needs an assignee. Entering done while the issue
        sits in an active sprint adds its points to the sprint's completed points; reopening
        removes them again and clears the resolution.
        """
        err = self._require_str(issue_id=issue_id, to_status=to_status, resolution=resolution)
        if err:
            return err
        issue, err = self._issue(issue_id)
        if err:
            return err
        wf = self.workflows[self.projects[issue["project"]]["workflow"]]
        if to_status not in wf["statuses"]:
            return self._fail(f"status '{to_status}' is not part of the {wf['name']} workflow")
        if to_status not in wf["transitions"].get(issue["status"], []):
            return self._fail(f"transition {issue['status']} -> {to_status} is not allowed "
                              f"by the {wf['name']} workflow")
        old_cat = wf["statuses"][issue["status"]]["category"]
        new_cat = wf["statuses"][to_status]["category"]
        if new_cat == "done":
            if old_cat != "done" and resolution not in RESOLUTIONS:
                return self._fail(f"a resolution is required to enter '{to_status}'; "
                                  f"expected one of {', '.join(RESOLUTIONS)}")
            if resolution and resolution not in RESOLUTIONS:
                return self._fail(f"invalid resolution '{resolution}'; expected one of {', '.join(RESOLUTIONS)}")
        elif resolution:
            return self._fail("resolution can only be set when entering a done status")
        if new_cat == "in_progress" and issue["assignee"] is None:
            return self._fail(f"{issue_id} must be assigned before it can move to '{to_status}'")
        sp = self.sprints.get(issue["sprint"]) if issue["sprint"] else None
        active = sp is not None and sp["state"] == "active"
        if new_cat == "done" and old_cat != "done":
            issue["resolution"] = resolution
            if active:
                sp["completed_points"] += self._points(issue)
        elif old_cat == "done" and new_cat != "done":
            issue["resolution"] = None
            if active:
                sp["completed_points"] -= self._points(issue)
        elif new_cat == "done" and resolution:
            issue["resolution"] = resolution
        old = issue["status"]
        issue["status"] = to_status
        return {"success": True, "message": f"{issue_id} moved from {old} to {to_status}"}

    def add_label(self, issue_id: str, label: str) -> dict:
        """Attach one of the project's labels to an issue.

        Args:
            issue_id: Issue key.
            label: Label name; must exist in the project's label set.
        Rules: at most 5 labels per issue; no duplicates.
        """
        err = self._require_str(issue_id=issue_id, label=label)
        if err:
            return err
        issue, err = self._issue(issue_id)
        if err:
            return err
        proj = self.projects[issue["project"]]
        if label not in proj["labels"]:
            return self._fail(f"label '{label}' is not defined in project {issue['project']}")
        if label in issue["labels"]:
            return self._fail(f"{issue_id} already has label '{label}'")
        if len(issue["labels"]) >= MAX_LABELS:
            return self._fail(f"{issue_id} already has the maximum of {MAX_LABELS} labels")
        issue["labels"] = issue["labels"] + [label]
        return {"success": True, "message": f"Label '{label}' added to {issue_id}", "labels": issue["labels"]}

    def add_comment(self, issue_id: str, author_id: str, body: str) -> dict:
        """Post a comment on an issue.

        Args:
            issue_id: Issue key.
            author_id: User id; must be an active member of the issue's project.
            body: Comment text, 1 to 5000 characters.
        Comments get sequential ids (C-NNNN) and a creation timestamp.
        """
        err = self._require_str(issue_id=issue_id, author_id=author_id, body=body)
        if err:
            return err
        issue, err = self._issue(issue_id)
        if err:
            return err
        err = self._active_member(issue["project"], author_id)
        if err:
            return self._fail(err)
        if not isinstance(body, str) or not (1 <= len(body.strip()) <= 5000):
            return self._fail("comment body must be 1 to 5000 characters")
        self.comment_seq += 1
        cid = f"C-{self.comment_seq:04d}"
        self.comments[cid] = {"issue": issue_id, "author": author_id, "body": body.strip(),
                              "created_at": datetime.datetime.now().replace(microsecond=0).isoformat()}
        issue["comment_count"] += 1
        return {"success": True, "message": f"Comment {cid} added to {issue_id}", "comment_id": cid}

    def estimate_issue(self, issue_id: str, story_points: int) -> dict:
        """Set an issue's story point estimate.

        Args:
            issue_id: Issue key.
            story_points: One of 0, 1, 2, 3, 5, 8, 13, 21.
        Rules: epics are not estimated; done issues cannot be re-estimated. If the issue is in a
        planned or active sprint, the sprint's committed points change by the difference.
        """
        err = self._require_str(issue_id=issue_id)
        if err:
            return err
        issue, err = self._issue(issue_id)
        if err:
            return err
        if not isinstance(story_points, int) or isinstance(story_points, bool) or story_points not in POINT_SCALE:
            return self._fail(f"story_points must be one of {', '.join(map(str, POINT_SCALE))}")
        if issue["type"] == "epic":
            return self._fail("epics are not estimated; estimate their child issues instead")
        if self._category(issue) == "done":
            return self._fail(f"{issue_id} is already {issue['status']} and cannot be re-estimated")
        if issue["story_points"] == story_points:
            return self._fail(f"{issue_id} is already estimated at {story_points} points")
        diff = story_points - self._points(issue)
        issue["story_points"] = story_points
        sp = self.sprints.get(issue["sprint"]) if issue["sprint"] else None
        if sp is not None and sp["state"] in ("planned", "active"):
            sp["committed_points"] += diff
        return {"success": True, "message": f"{issue_id} estimated at {story_points} points"}

    def move_to_sprint(self, issue_id: str, sprint_id: str) -> dict:
        """Put an issue into a planned or active sprint, or back to the backlog.

        Args:
            issue_id: Issue key.
            sprint_id: Target sprint id of the same project, or "" for the backlog.
        Rules: epics and done issues cannot be scheduled; closed sprints cannot receive issues.
        Committed points move from the old sprint to the new one.
        """
        err = self._require_str(issue_id=issue_id, sprint_id=sprint_id)
        if err:
            return err
        issue, err = self._issue(issue_id)
        if err:
            return err
        if issue["type"] == "epic":
            return self._fail("epics cannot be put into sprints")
        if self._category(issue) == "done":
            return self._fail(f"{issue_id} is already {issue['status']}")
        if sprint_id == "":
            if issue["sprint"] is None:
                return self._fail(f"{issue_id} is already in the backlog")
            target = None
        else:
            target = self.sprints.get(sprint_id)
            if target is None:
                return self._fail(f"sprint {sprint_id} not found")
            if target["project"] != issue["project"]:
                return self._fail(f"sprint {sprint_id} belongs to project {target['project']}, not {issue['project']}")
            if target["state"] == "closed":
                return self._fail(f"sprint {sprint_id} is closed")
            if issue["sprint"] == sprint_id:
                return self._fail(f"{issue_id} is already in sprint {sprint_id}")
        pts = self._points(issue)
        old = self.sprints.get(issue["sprint"]) if issue["sprint"] else None
        if old is not None and old["state"] in ("planned", "active"):
            old["committed_points"] -= pts
        if target is not None:
            target["committed_points"] += pts
        issue["sprint"] = sprint_id or None
        where = f"sprint {sprint_id}" if sprint_id else "the backlog"
        return {"success": True, "message": f"{issue_id} moved to {where}"}

    def start_sprint(self, sprint_id: str, start_date: str, end_date: str) -> dict:
        """Start a planned sprint.

        Args:
            sprint_id: Sprint id.
            start_date: First day, YYYY-MM-DD.
            end_date: Last day, YYYY-MM-DD; 1 to 28 days after start_date.
        Rules: the project may have only one active sprint; the sprint must contain at least one
        issue. Committed and completed points are recomputed from the sprint's issues at start.
        """
        err = self._require_str(sprint_id=sprint_id, start_date=start_date, end_date=end_date)
        if err:
            return err
        sp = self.sprints.get(sprint_id)
        if sp is None:
            return self._fail(f"sprint {sprint_id} not found")
        if sp["state"] != "planned":
            return self._fail(f"sprint {sprint_id} is {sp['state']}, only planned sprints can be started")
        start, end = self._date(start_date), self._date(end_date)
        if start is None or end is None:
            return self._fail("dates must be valid YYYY-MM-DD values")
        days = (end - start).days
        if not (1 <= days <= MAX_SPRINT_DAYS):
            return self._fail(f"sprint length must be 1 to {MAX_SPRINT_DAYS} days, got {days}")
        proj = self.projects[sp["project"]]
        if proj["active_sprint"]:
            return self._fail(f"project {sp['project']} already has active sprint {proj['active_sprint']}")
        members = [i for i in self.issues.values() if i["sprint"] == sprint_id]
        if not members:
            return self._fail(f"sprint {sprint_id} has no issues")
        sp["state"] = "active"
        sp["start_date"] = start_date
        sp["end_date"] = end_date
        sp["committed_points"] = sum(self._points(i) for i in members)
        sp["completed_points"] = sum(self._points(i) for i in members if self._category(i) == "done")
        proj["active_sprint"] = sprint_id
        return {"success": True, "message": f"Sprint {sprint_id} started with {len(members)} issues",
                "committed_points": sp["committed_points"]}

    def close_sprint(self, sprint_id: str, carry_over_to: str = "") -> dict:
        """Close the active sprint, recording velocity and carrying unfinished work over.

        Args:
            sprint_id: The project's active sprint.
            carry_over_to: A planned sprint of the same project that receives unfinished issues;
                empty to send them to the backlog.
        Effects: sprint becomes closed with completed points recomputed from done issues and the
        number of carried issues recorded; the project's velocity history gets an entry; every
        unfinished issue moves to the target (whose committed points grow) or the backlog.
        """
        err = self._require_str(sprint_id=sprint_id, carry_over_to=carry_over_to)
        if err:
            return err
        sp = self.sprints.get(sprint_id)
        if sp is None:
            return self._fail(f"sprint {sprint_id} not found")
        if sp["state"] != "active":
            return self._fail(f"sprint {sprint_id} is {sp['state']}, only the active sprint can be closed")
        target = None
        if carry_over_to:
            target = self.sprints.get(carry_over_to)
            if target is None:
                return self._fail(f"sprint {carry_over_to} not found")
            if target["project"] != sp["project"] or target["state"] != "planned":
                return self._fail(f"sprint {carry_over_to} must be a planned sprint of project {sp['project']}")
        done_pts, carried = 0, []
        for iid, i in self.issues.items():
            if i["sprint"] != sprint_id:
                continue
            if self._category(i) == "done":
                done_pts += self._points(i)
            else:
                carried.append(iid)
        carried_pts = 0
        for iid in carried:
            self.issues[iid]["sprint"] = carry_over_to or None
            carried_pts += self._points(self.issues[iid])
        if target is not None:
            target["committed_points"] += carried_pts
        sp["state"] = "closed"
        sp["completed_points"] = done_pts
        sp["carried_over"] = len(carried)
        proj = self.projects[sp["project"]]
        proj["active_sprint"] = None
        proj["velocity"][sprint_id] = done_pts
        return {"success": True, "message": f"Sprint {sprint_id} closed: {done_pts} points completed, "
                                            f"{len(carried)} issues carried over",
                "completed_points": done_pts, "carried_over": sorted(carried, key=lambda k: int(k.rsplit('-', 1)[1]))}

    def bulk_reassign(self, project_key: str, from_user: str, to_user: str) -> dict:
        """Hand over all of one member's unfinished issues in a project to another member.

        Args:
            project_key: Project key.
            from_user: Current assignee (may be deactivated, e.g. someone who left).
            to_user: New assignee; must be an active member with role lead or developer.
        Rules: only issues not in a done-category status move; at least one must match.
        """
        err = self._require_str(project_key=project_key, from_user=from_user, to_user=to_user)
        if err:
            return err
        if project_key not in self.projects:
            return self._fail(f"project {project_key} not found")
        if from_user not in self.users:
            return self._fail(f"user {from_user} not found")
        if from_user == to_user:
            return self._fail("from_user and to_user must differ")
        err = self._active_member(project_key, to_user)
        if err:
            return self._fail(err)
        if self._member_role(project_key, to_user) not in ASSIGNABLE_ROLES:
            return self._fail(f"user {to_user} cannot be assigned issues in {project_key}")
        moved = []
        for iid, i in self.issues.items():
            if i["project"] == project_key and i["assignee"] == from_user and self._category(i) != "done":
                i["assignee"] = to_user
                moved.append(iid)
        if not moved:
            return self._fail(f"{from_user} has no unfinished issues in {project_key}")
        moved.sort(key=lambda k: int(k.rsplit("-", 1)[1]))
        return {"success": True, "message": f"Reassigned {len(moved)} issues from {from_user} to {to_user}",
                "issues": moved}
