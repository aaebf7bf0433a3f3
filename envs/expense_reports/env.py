"""Employee expense management: expense reports with line items checked against the company
travel and expense policy, receipts, manager approval with approval limits and escalation,
cost-center budgets, and reimbursement runs that pay approved reports.

Policy limits cap the reimbursable amount of each line (per item, per night, or per day for
meals); an approver may override a capped line. Dates follow the business date in the state.
Report creation is stamped with the wall-clock time and each reimbursement run gets a generated
payment reference.
"""

import copy
import datetime
import math
import uuid


def _parse_date(value):
    if not isinstance(value, str):
        return None
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        return None


def _is_amount(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and value > 0 and round(value, 2) == value


class ExpenseSystem:
    """Travel and expense (T&E) tool used by employees, their managers and finance."""

    EDITABLE = ("draft", "rejected")
    MAX_REPORTS_PER_RUN = 10

    def __init__(self, init_config: dict):
        self.business_date = ""
        self.company = {}
        self.policy = {}
        self.cost_centers = {}
        self.employees = {}
        self.receipts = {}
        self.reports = {}
        self.reimbursement_runs = {}

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _find(collection, key):
        """Record stored under `key`, or None for unknown or non-string keys."""
        return collection.get(key) if isinstance(key, str) else None

    def _today(self):
        return _parse_date(self.business_date)

    def _next_id(self, collection, prefix):
        highest = 0
        for key in collection:
            digits = key[len(prefix):]
            if key.startswith(prefix) and digits.isdigit():
                highest = max(highest, int(digits))
        return f"{prefix}{highest + 1}"

    def _recalculate(self, report):
        """Re-apply policy caps to every line in item order and refresh the report totals.
        Meal caps are shared by all meal lines of the same day; overridden lines are paid in full."""
        used_per_day = {}
        total = reimbursable = 0.0
        for item_id in sorted(report["items"], key=lambda k: int(k[1:])):
            item = report["items"][item_id]
            rule = self.policy["categories"][item["category"]]
            if rule["limit_type"] == "per_day":
                left = max(0.0, rule["limit"] - used_per_day.get(item["expense_date"], 0.0))
                capped = round(min(item["amount"], left), 2)
            else:
                capped = round(min(item["amount"], rule["limit"]), 2)
            paid = item["amount"] if item["override_by"] else capped
            if rule["limit_type"] == "per_day":
                used_per_day[item["expense_date"]] = used_per_day.get(item["expense_date"], 0.0) + paid
            if item["reimbursable_amount"] != paid:
                item["reimbursable_amount"] = paid
            over = capped < item["amount"]
            if item["over_limit"] != over:
                item["over_limit"] = over
            total += item["amount"]
            reimbursable += paid
        total, reimbursable = round(total, 2), round(reimbursable, 2)
        if report["total"] != total:
            report["total"] = total
        if report["reimbursable_total"] != reimbursable:
            report["reimbursable_total"] = reimbursable

    def _editable_report(self, report_id):
        report = self._find(self.reports, report_id)
        if report is None:
            return None, f"Report {report_id} not found"
        if report["status"] not in self.EDITABLE:
            return None, f"Report {report_id} is {report['status']} and can no longer be edited"
        return report, None

    def _receipt_error(self, report, receipt_id, amount, expense_date):
        receipt = self._find(self.receipts, receipt_id)
        if receipt is None:
            return f"Receipt {receipt_id} not found"
        if receipt["employee_id"] != report["employee_id"]:
            return f"Receipt {receipt_id} belongs to another employee"
        if receipt["item_id"] is not None:
            return f"Receipt {receipt_id} is already attached to {receipt['report_id']}/{receipt['item_id']}"
        if abs(receipt["amount"] - amount) > 0.005:
            return f"Receipt amount {receipt['amount']:.2f} does not match the line amount {amount:.2f}"
        if receipt["date"] != expense_date:
            return f"Receipt date {receipt['date']} does not match the expense date {expense_date}"
        return None

    # ------------------------------------------------------------------ queries

    def get_report(self, report_id: str) -> dict:
        """Show an expense report with its lines, totals, status and approval trail.

        Args:
            report_id: Report id, e.g. "R2001".

        Returns:
            The report record with its id.
        """
        report = self._find(self.reports, report_id)
        if report is None:
            return {"success": False, "error": f"Report {report_id} not found"}
        return {"success": True, "data": copy.deepcopy(dict(report, report_id=report_id))}

    def get_employee(self, employee_id: str) -> dict:
        """Show an employee: department, cost center, manager, approval limit and reimbursements
        this year.

        Args:
            employee_id: Employee id, e.g. "E103".

        Returns:
            The employee record with its id.
        """
        employee = self._find(self.employees, employee_id)
        if employee is None:
            return {"success": False, "error": f"Employee {employee_id} not found"}
        return {"success": True, "data": copy.deepcopy(dict(employee, employee_id=employee_id))}

    def list_reports_awaiting_approval(self, approver_id: str) -> dict:
        """List submitted reports currently waiting for a given approver, oldest first.

        Args:
            approver_id: Employee id of the approver, e.g. "E102".

        Returns:
            Report id, employee, title, reimbursable total and submission date.
        """
        if self._find(self.employees, approver_id) is None:
            return {"success": False, "error": f"Employee {approver_id} not found"}
        rows = [{"report_id": rid, "employee_id": r["employee_id"], "title": r["title"],
                 "reimbursable_total": r["reimbursable_total"], "submitted_on": r["submitted_on"]}
                for rid, r in self.reports.items() if r["status"] == "submitted" and r["approver_id"] == approver_id]
        rows.sort(key=lambda r: (r["submitted_on"], r["report_id"]))
        return {"success": True, "data": rows}

    def get_expense_policy(self) -> dict:
        """Show the company expense policy: per-category limits, limit basis and receipt
        thresholds, and the maximum age of a claimable expense.

        Returns:
            The policy.
        """
        return {"success": True, "data": copy.deepcopy(self.policy)}

    # ------------------------------------------------------------------ drafting

    def create_report(self, employee_id: str, title: str, purpose: str) -> dict:
        """Open a new draft expense report for an active employee.

        Args:
            employee_id: Employee id, e.g. "E103".
            title: Short title (3-80 characters), e.g. "Client visit Rotterdam".
            purpose: Business purpose (at least 10 characters).

        Returns:
            The new report id.
        """
        employee = self._find(self.employees, employee_id)
        if employee is None:
            return {"success": False, "error": f"Employee {employee_id} not found"}
        if employee["status"] != "active":
            return {"success": False, "error": f"Employee {employee_id} is {employee['status']}"}
        if not isinstance(title, str) or not 3 <= len(title.strip()) <= 80:
            return {"success": False, "error": "title must be 3 to 80 characters"}
        if not isinstance(purpose, str) or len(purpose.strip()) < 10:
            return {"success": False, "error": "purpose must be at least 10 characters"}
        report_id = self._next_id(self.reports, "R")
        self.reports[report_id] = {
            "employee_id": employee_id, "title": title.strip(), "purpose": purpose.strip(), "status": "draft",
            "created_on": self.business_date, "created_at": datetime.datetime.now().isoformat(timespec="seconds"),
            "submitted_on": None, "approver_id": None, "approved_by": None, "approved_on": None,
            "rejection_reason": None, "reimbursement_run_id": None, "total": 0.0, "reimbursable_total": 0.0,
            "items": {},
        }
        return {"success": True, "message": f"Draft report {report_id} created", "report_id": report_id}

    def upload_receipt(self, employee_id: str, merchant: str, amount: float, receipt_date: str, file_name: str) -> dict:
        """Store a scanned receipt for an active employee so it can be attached to expense lines.

        Rules: the amount is positive with two decimals at most; the date may not be in the
        future; the file must be a PDF, JPG or PNG; the same merchant, amount and date uploaded
        twice by the same employee is rejected as a duplicate.

        Args:
            employee_id: Employee id, e.g. "E103".
            merchant: Merchant name printed on the receipt (2-60 characters).
            amount: Receipt total, positive with at most two decimals.
            receipt_date: ISO date printed on the receipt.
            file_name: Uploaded file name, e.g. "hotel_folio.pdf".

        Returns:
            The new receipt id.
        """
        employee = self._find(self.employees, employee_id)
        if employee is None:
            return {"success": False, "error": f"Employee {employee_id} not found"}
        if employee["status"] != "active":
            return {"success": False, "error": f"Employee {employee_id} is {employee['status']}"}
        if not isinstance(merchant, str) or not 2 <= len(merchant.strip()) <= 60:
            return {"success": False, "error": "merchant must be 2 to 60 characters"}
        if not _is_amount(amount):
            return {"success": False, "error": "amount must be a positive number with at most two decimals"}
        day = _parse_date(receipt_date)
        if day is None or day > self._today():
            return {"success": False, "error": "receipt_date must be a valid date that is not in the future"}
        if not isinstance(file_name, str) or not file_name.lower().endswith((".pdf", ".jpg", ".jpeg", ".png")) \
                or len(file_name) > 120:
            return {"success": False, "error": "file_name must be a PDF, JPG or PNG file name"}
        for receipt_id, receipt in self.receipts.items():
            if receipt["employee_id"] == employee_id and receipt["merchant"].lower() == merchant.strip().lower() \
                    and receipt["amount"] == amount and receipt["date"] == receipt_date:
                return {"success": False, "error": f"Duplicate of receipt {receipt_id}"}
        receipt_id = self._next_id(self.receipts, "RC")
        self.receipts[receipt_id] = {"employee_id": employee_id, "merchant": merchant.strip(), "amount": float(amount),
                                     "date": receipt_date, "file_name": file_name, "report_id": None, "item_id": None}
        return {"success": True, "message": f"Receipt {receipt_id} uploaded", "receipt_id": receipt_id}

    def add_line_item(self, report_id: str, category: str, amount: float, expense_date: str, description: str,
                      receipt_id: str | None = None) -> dict:
        """Add an expense line to a draft (or rejected) report and apply the policy cap.

        Rules: the category must exist in the policy; the amount is positive with two decimals
        at most; the expense date may not be in the future or older than the policy's maximum
        age; the description needs at least 3 characters. A receipt, if given, must belong to
        the report's employee, be unattached and match the line's amount and date. The
        reimbursable amount is capped per item, per night (lodging) or per day across all meal
        lines of the same date.

        Args:
            report_id: Report id, e.g. "R2001".
            category: Policy category, e.g. "meals", "lodging", "airfare", "ground_transport".
            amount: Amount spent, positive with at most two decimals.
            expense_date: ISO date of the expense.
            description: What was bought (at least 3 characters).
            receipt_id: Optional receipt id to attach, e.g. "RC4".

        Returns:
            The new line id and its reimbursable amount.
        """
        report, error = self._editable_report(report_id)
        if error:
            return {"success": False, "error": error}
        if not isinstance(category, str) or category not in self.policy["categories"]:
            return {"success": False, "error": f"Unknown expense category {category!r}"}
        if not _is_amount(amount):
            return {"success": False, "error": "amount must be a positive number with at most two decimals"}
        day = _parse_date(expense_date)
        if day is None:
            return {"success": False, "error": f"Invalid expense_date: {expense_date!r}"}
        if day > self._today():
            return {"success": False, "error": "expense_date cannot be in the future"}
        if (self._today() - day).days > self.policy["max_age_days"]:
            return {"success": False,
                    "error": f"Expenses older than {self.policy['max_age_days']} days cannot be claimed"}
        if not isinstance(description, str) or len(description.strip()) < 3:
            return {"success": False, "error": "description must be at least 3 characters"}
        if receipt_id is not None:
            error = self._receipt_error(report, receipt_id, amount, expense_date)
            if error:
                return {"success": False, "error": error}
        item_id = f"L{max([int(k[1:]) for k in report['items']] + [0]) + 1}"
        report["items"][item_id] = {"category": category, "amount": float(amount), "expense_date": expense_date,
                                    "description": description.strip(), "receipt_id": receipt_id,
                                    "reimbursable_amount": 0.0, "over_limit": False, "override_by": None,
                                    "override_note": None}
        if receipt_id is not None:
            self.receipts[receipt_id]["report_id"] = report_id
            self.receipts[receipt_id]["item_id"] = item_id
        self._recalculate(report)
        item = report["items"][item_id]
        return {"success": True, "message": f"Line {item_id} added to {report_id}", "item_id": item_id,
                "reimbursable_amount": item["reimbursable_amount"], "over_limit": item["over_limit"]}

    def remove_line_item(self, report_id: str, item_id: str) -> dict:
        """Delete a line from a draft (or rejected) report; its receipt becomes unattached and
        the policy caps of the remaining lines are recalculated.

        Args:
            report_id: Report id, e.g. "R2001".
            item_id: Line id within the report, e.g. "L2".

        Returns:
            The report's new totals.
        """
        report, error = self._editable_report(report_id)
        if error:
            return {"success": False, "error": error}
        item = self._find(report["items"], item_id)
        if item is None:
            return {"success": False, "error": f"Line {item_id} not found on {report_id}"}
        if item["receipt_id"] is not None and item["receipt_id"] in self.receipts:
            self.receipts[item["receipt_id"]]["report_id"] = None
            self.receipts[item["receipt_id"]]["item_id"] = None
        del report["items"][item_id]
        self._recalculate(report)
        return {"success": True, "message": f"Line {item_id} removed from {report_id}", "total": report["total"],
                "reimbursable_total": report["reimbursable_total"]}

    def attach_receipt(self, report_id: str, item_id: str, receipt_id: str) -> dict:
        """Attach an uploaded receipt to a line of a draft (or rejected) report. The receipt must
        belong to the report's employee, be unattached and match the line's amount and date; the
        line must not already have a receipt.

        Args:
            report_id: Report id, e.g. "R2001".
            item_id: Line id within the report, e.g. "L4".
            receipt_id: Receipt id, e.g. "RC4".

        Returns:
            Confirmation message.
        """
        report, error = self._editable_report(report_id)
        if error:
            return {"success": False, "error": error}
        item = self._find(report["items"], item_id)
        if item is None:
            return {"success": False, "error": f"Line {item_id} not found on {report_id}"}
        if item["receipt_id"] is not None:
            return {"success": False, "error": f"Line {item_id} already has receipt {item['receipt_id']}"}
        error = self._receipt_error(report, receipt_id, item["amount"], item["expense_date"])
        if error:
            return {"success": False, "error": error}
        item["receipt_id"] = receipt_id
        self.receipts[receipt_id]["report_id"] = report_id
        self.receipts[receipt_id]["item_id"] = item_id
        return {"success": True, "message": f"Receipt {receipt_id} attached to {report_id}/{item_id}"}

    # ------------------------------------------------------------------ approval

    def submit_report(self, report_id: str) -> dict:
        """Submit a draft (or rejected) report to the employee's manager for approval.

        Rules: the report needs at least one line; every line above its category's receipt
        threshold needs a receipt; the employee must have a manager.

        Args:
            report_id: Report id, e.g. "R2001".

        Returns:
            The approver the report was routed to.
        """
        report, error = self._editable_report(report_id)
        if error:
            return {"success": False, "error": error}
        if not report["items"]:
            return {"success": False, "error": f"Report {report_id} has no lines"}
        for item_id in sorted(report["items"], key=lambda k: int(k[1:])):
            item = report["items"][item_id]
            threshold = self.policy["categories"][item["category"]]["receipt_required_over"]
            if item["amount"] > threshold and item["receipt_id"] is None:
                return {"success": False,
                        "error": f"Line {item_id} ({item['amount']:.2f} {item['category']}) needs a receipt"}
        manager = self.employees[report["employee_id"]]["manager_id"]
        if manager is None:
            return {"success": False, "error": "Employee has no manager to approve the report; route it via finance"}
        report["status"] = "submitted"
        report["submitted_on"] = self.business_date
        report["approver_id"] = manager
        report["rejection_reason"] = None
        return {"success": True, "message": f"Report {report_id} submitted to {self.employees[manager]['name']}",
                "approver_id": manager}

    def approve_report(self, report_id: str, approver_id: str) -> dict:
        """Approve a submitted report as its current approver. If the reimbursable total is above
        the approver's approval limit, the report is escalated to the approver's own manager
        instead. Approval charges the reimbursable total to the employee's cost center, which may
        not go over budget.

        Args:
            report_id: Report id, e.g. "R2002".
            approver_id: Employee id of the approver, e.g. "E102".

        Returns:
            Whether the report was approved or escalated (and to whom).
        """
        report = self._find(self.reports, report_id)
        if report is None:
            return {"success": False, "error": f"Report {report_id} not found"}
        if self._find(self.employees, approver_id) is None:
            return {"success": False, "error": f"Employee {approver_id} not found"}
        if report["status"] != "submitted":
            return {"success": False, "error": f"Report {report_id} is {report['status']}"}
        if approver_id == report["employee_id"]:
            return {"success": False, "error": "Employees cannot approve their own reports"}
        if report["approver_id"] != approver_id:
            return {"success": False,
                    "error": f"Report {report_id} is waiting for {report['approver_id']}, not {approver_id}"}
        approver = self.employees[approver_id]
        amount = report["reimbursable_total"]
        if approver["approval_limit"] is None or amount > approver["approval_limit"]:
            if approver["manager_id"] is None:
                return {"success": False,
                        "error": "Amount exceeds the approval limit and there is no one to escalate to"}
            report["approver_id"] = approver["manager_id"]
            return {"success": True, "message": f"Report {report_id} escalated to {self.employees[approver['manager_id']]['name']}",
                    "escalated": True, "approver_id": approver["manager_id"]}
        center = self.cost_centers[self.employees[report["employee_id"]]["cost_center"]]
        if center["spent"] + amount > center["budget"]:
            left = round(center["budget"] - center["spent"], 2)
            return {"success": False, "error": f"Cost center {center['name']} has only {left:.2f} of budget left"}
        report["status"] = "approved"
        report["approved_by"] = approver_id
        report["approved_on"] = self.business_date
        center["spent"] = round(center["spent"] + amount, 2)
        return {"success": True, "message": f"Report {report_id} approved", "escalated": False, "approved_amount": amount}

    def reject_report(self, report_id: str, approver_id: str, reason: str) -> dict:
        """Send a submitted report back to the employee with a reason; it can then be edited and
        resubmitted.

        Args:
            report_id: Report id, e.g. "R2002".
            approver_id: Employee id of the current approver, e.g. "E102".
            reason: Why it is rejected (at least 10 characters).

        Returns:
            Confirmation message.
        """
        report = self._find(self.reports, report_id)
        if report is None:
            return {"success": False, "error": f"Report {report_id} not found"}
        if not isinstance(reason, str) or len(reason.strip()) < 10:
            return {"success": False, "error": "reason must be at least 10 characters"}
        if report["status"] != "submitted":
            return {"success": False, "error": f"Report {report_id} is {report['status']}"}
        if report["approver_id"] != approver_id:
            return {"success": False,
                    "error": f"Only the current approver {report['approver_id']} can reject {report_id}"}
        report["status"] = "rejected"
        report["rejection_reason"] = reason.strip()
        return {"success": True, "message": f"Report {report_id} returned to the employee"}

    def override_item_limit(self, report_id: str, item_id: str, approver_id: str, justification: str) -> dict:
        """Let the current approver accept the full amount of a line that was capped by policy.
        The line is then reimbursed in full and the report total is recalculated.

        Args:
            report_id: Report id, e.g. "R2005".
            item_id: Line id, e.g. "L2".
            approver_id: Employee id of the current approver.
            justification: Why the exception is granted (at least 15 characters).

        Returns:
            The line's new reimbursable amount and the report's reimbursable total.
        """
        report = self._find(self.reports, report_id)
        if report is None:
            return {"success": False, "error": f"Report {report_id} not found"}
        if report["status"] != "submitted":
            return {"success": False,
                    "error": f"Overrides are only possible while a report awaits approval; {report_id} is {report['status']}"}
        if report["approver_id"] != approver_id:
            return {"success": False, "error": f"Only the current approver {report['approver_id']} can override limits"}
        item = self._find(report["items"], item_id)
        if item is None:
            return {"success": False, "error": f"Line {item_id} not found on {report_id}"}
        if not item["over_limit"]:
            return {"success": False, "error": f"Line {item_id} is within policy"}
        if item["override_by"] is not None:
            return {"success": False, "error": f"Line {item_id} was already overridden by {item['override_by']}"}
        if not isinstance(justification, str) or len(justification.strip()) < 15:
            return {"success": False, "error": "justification must be at least 15 characters"}
        item["override_by"] = approver_id
        item["override_note"] = justification.strip()
        self._recalculate(report)
        return {"success": True, "message": f"Policy limit overridden on {report_id}/{item_id}",
                "reimbursable_amount": item["reimbursable_amount"], "reimbursable_total": report["reimbursable_total"]}

    # ------------------------------------------------------------------ payment

    def create_reimbursement_run(self, report_ids: list[str]) -> dict:
        """Pay a batch of approved reports in one bank run. Each report becomes "reimbursed" and
        is linked to the run; each employee's year-to-date reimbursements grow. The run gets a
        generated payment reference.

        Rules: 1 to 10 distinct report ids, all approved and not yet paid; every employee needs
        bank details on file (former employees are still paid).

        Args:
            report_ids: Approved report ids, e.g. ["R2003", "R2006"].

        Returns:
            The run id, total paid and the payment reference.
        """
        if not isinstance(report_ids, list) or not report_ids:
            return {"success": False, "error": "report_ids must be a non-empty list"}
        if len(report_ids) > self.MAX_REPORTS_PER_RUN:
            return {"success": False, "error": f"A run can pay at most {self.MAX_REPORTS_PER_RUN} reports"}
        if len(set(map(str, report_ids))) != len(report_ids):
            return {"success": False, "error": "report_ids contains duplicates"}
        for report_id in report_ids:
            report = self._find(self.reports, report_id)
            if report is None:
                return {"success": False, "error": f"Report {report_id} not found"}
            if report["status"] != "approved":
                return {"success": False, "error": f"Report {report_id} is {report['status']}, not approved"}
            employee = self.employees[report["employee_id"]]
            if employee["bank_last4"] is None:
                return {"success": False, "error": f"Employee {report['employee_id']} has no bank details on file"}
        run_id = self._next_id(self.reimbursement_runs, "RUN")
        total = 0.0
        for report_id in report_ids:
            report = self.reports[report_id]
            report["status"] = "reimbursed"
            report["reimbursement_run_id"] = run_id
            employee = self.employees[report["employee_id"]]
            employee["ytd_reimbursed"] = round(employee["ytd_reimbursed"] + report["reimbursable_total"], 2)
            total += report["reimbursable_total"]
        reference = f"EXP-{uuid.uuid4().hex[:12].upper()}"
        self.reimbursement_runs[run_id] = {"run_date": self.business_date, "report_ids": list(report_ids),
                                           "total": round(total, 2), "payment_reference": reference, "status": "paid"}
        return {"success": True, "message": f"Run {run_id} paid {len(report_ids)} report(s)", "run_id": run_id,
                "total": round(total, 2), "payment_reference": reference}
