"""HR and payroll: employees, contracts, timesheets, leave balances and requests, monthly
payroll runs with pension, health premiums and progressive income tax, and payslips."""

import datetime
import time

LEAVE_TYPES = ("annual", "sick", "unpaid")
WORKING_DAYS_PER_YEAR = 260


def _money(value: float) -> float:
    return round(value + 0.0, 2)


class HrPayroll:
    def __init__(self, init_config: dict):
        self.company = {}
        self.tax_brackets = []
        self.employees = {}
        self.contracts = {}
        self.benefits = {}
        self.timesheets = {}
        self.leave_balances = {}
        self.leave_requests = {}
        self.payroll_runs = {}
        self.payslips = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _err(message: str) -> dict:
        return {"success": False, "error": message}

    def _next_id(self, kind: str, prefix: str) -> str:
        value = self.counters.get(kind, 0) + 1
        self.counters[kind] = value
        return f"{prefix}{value}"

    @staticmethod
    def _valid_period(period) -> bool:
        if not isinstance(period, str) or len(period) != 7 or period[4] != "-":
            return False
        try:
            datetime.date.fromisoformat(period + "-01")
        except ValueError:
            return False
        return True

    @staticmethod
    def _next_period(period: str) -> str:
        year, month = int(period[:4]), int(period[5:])
        return f"{year + 1}-01" if month == 12 else f"{year}-{month + 1:02d}"

    def _contract(self, employee_id: str):
        emp = self.employees[employee_id]
        return self.contracts.get(emp["contract_id"])

    def _is_manager_of(self, approver_id: str, employee_id: str) -> bool:
        return self.employees[employee_id]["manager_id"] == approver_id

    def _income_tax(self, taxable: float) -> float:
        tax, lower = 0.0, 0.0
        for band in self.tax_brackets:
            upper = band["up_to"]
            if taxable <= lower:
                break
            portion = (min(taxable, upper) if upper is not None else taxable) - lower
            tax += portion * band["rate"]
            if upper is None:
                break
            lower = upper
        return _money(tax)

    def _pending_days(self, employee_id: str, leave_type: str) -> float:
        return sum(
            r["days"] for r in self.leave_requests.values()
            if r["employee_id"] == employee_id and r["leave_type"] == leave_type and r["status"] == "pending"
        )

    # ------------------------------------------------------------------ queries
    def get_employee(self, employee_id: str) -> dict:
        """Return an employee record with contract, benefit elections, leave balances and
        year-to-date pay.

        Args:
            employee_id: Employee id, e.g. E103.
        """
        if not isinstance(employee_id, str) or employee_id not in self.employees:
            return self._err(f"Employee {employee_id} not found")
        data = dict(self.employees[employee_id])
        data["contract"] = self._contract(employee_id)
        data["benefits"] = self.benefits.get(employee_id)
        data["leave_balances"] = self.leave_balances.get(employee_id)
        return {"success": True, "data": data}

    def list_pending_approvals(self) -> dict:
        """List submitted timesheets and pending leave requests awaiting a manager decision."""
        sheets = [
            {"timesheet_id": t["timesheet_id"], "employee_id": t["employee_id"], "period": t["period"], "approver_id": self.employees[t["employee_id"]]["manager_id"]}
            for t in self.timesheets.values() if t["status"] == "submitted"
        ]
        leave = [
            {"request_id": r["request_id"], "employee_id": r["employee_id"], "leave_type": r["leave_type"], "days": r["days"], "approver_id": self.employees[r["employee_id"]]["manager_id"]}
            for r in self.leave_requests.values() if r["status"] == "pending"
        ]
        sheets.sort(key=lambda x: x["timesheet_id"])
        leave.sort(key=lambda x: x["request_id"])
        return {"success": True, "data": {"timesheets": sheets, "leave_requests": leave}}

    def get_payslip(self, payslip_id: str) -> dict:
        """Return one payslip with its full breakdown.

        Args:
            payslip_id: Payslip id, e.g. PS9012.
        """
        if not isinstance(payslip_id, str) or payslip_id not in self.payslips:
            return self._err(f"Payslip {payslip_id} not found")
        return {"success": True, "data": dict(self.payslips[payslip_id])}

    # ------------------------------------------------------------------ updates
    def submit_timesheet(self, employee_id: str, period: str, regular_hours: float, overtime_hours: float) -> dict:
        """Submit (or resubmit after rejection) an hourly employee's timesheet for a month.

        Rules: hourly contracts only; the employee must not be terminated; the period must be the
        current payroll period or earlier; regular hours 0-200, overtime 0-60 and only for
        overtime-eligible contracts; an approved or processed timesheet cannot be replaced.

        Args:
            employee_id: Employee id.
            period: Pay period YYYY-MM.
            regular_hours: Regular hours worked.
            overtime_hours: Overtime hours worked.
        """
        if not isinstance(employee_id, str) or employee_id not in self.employees:
            return self._err(f"Employee {employee_id} not found")
        emp = self.employees[employee_id]
        if emp["status"] == "terminated":
            return self._err(f"Employee {employee_id} is terminated")
        contract = self._contract(employee_id)
        if contract is None or contract["pay_type"] != "hourly":
            return self._err(f"Employee {employee_id} is salaried; timesheets are for hourly staff")
        if not self._valid_period(period):
            return self._err(f"Invalid period {period!r}; use YYYY-MM")
        if period > self.company["current_period"]:
            return self._err(f"Cannot submit a timesheet for future period {period}")
        for name, value, cap in (("regular_hours", regular_hours, 200), ("overtime_hours", overtime_hours, 60)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= cap:
                return self._err(f"{name} must be a number from 0 to {cap}")
        if overtime_hours > 0 and not contract["overtime_eligible"]:
            return self._err(f"Employee {employee_id} is not eligible for overtime")
        timesheet_id = f"TS-{employee_id}-{period}"
        existing = self.timesheets.get(timesheet_id)
        if existing is not None:
            if existing["status"] in ("approved", "processed", "submitted"):
                return self._err(f"Timesheet {timesheet_id} is already {existing['status']}")
            existing["regular_hours"] = regular_hours
            existing["overtime_hours"] = overtime_hours
            existing["status"] = "submitted"
            existing["rejection_reason"] = None
            return {"success": True, "message": f"Timesheet {timesheet_id} resubmitted", "timesheet_id": timesheet_id}
        self.timesheets[timesheet_id] = {
            "timesheet_id": timesheet_id,
            "employee_id": employee_id,
            "period": period,
            "regular_hours": regular_hours,
            "overtime_hours": overtime_hours,
            "status": "submitted",
            "approved_by": None,
            "rejection_reason": None,
        }
        return {"success": True, "message": f"Timesheet {timesheet_id} submitted", "timesheet_id": timesheet_id}

    def review_timesheet(self, timesheet_id: str, approver_id: str, approve: bool, reason: str = "") -> dict:
        """Approve or reject a submitted timesheet.

        Rules: only the employee's direct manager can review; a rejection needs a reason.

        Args:
            timesheet_id: Timesheet id, e.g. TS-E104-2024-05.
            approver_id: Employee id of the reviewing manager.
            approve: True to approve, False to reject.
            reason: Rejection reason (required when rejecting).
        """
        if not isinstance(timesheet_id, str) or timesheet_id not in self.timesheets:
            return self._err(f"Timesheet {timesheet_id} not found")
        if not isinstance(approve, bool):
            return self._err("approve must be true or false")
        ts = self.timesheets[timesheet_id]
        if ts["status"] != "submitted":
            return self._err(f"Timesheet {timesheet_id} is {ts['status']}, not submitted")
        if not isinstance(approver_id, str) or not self._is_manager_of(approver_id, ts["employee_id"]):
            return self._err(f"{approver_id} is not the manager of {ts['employee_id']}")
        if approve:
            ts["status"] = "approved"
            ts["approved_by"] = approver_id
            return {"success": True, "message": f"Timesheet {timesheet_id} approved"}
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A reason is required to reject a timesheet")
        ts["status"] = "rejected"
        ts["rejection_reason"] = reason.strip()
        return {"success": True, "message": f"Timesheet {timesheet_id} rejected"}

    def request_leave(self, employee_id: str, leave_type: str, start_date: str, days: float) -> dict:
        """File a leave request for approval by the employee's manager.

        Rules: leave type annual, sick or unpaid; days in half-day steps from 0.5 to 30; annual
        and sick leave cannot exceed the balance minus days already pending; terminated employees
        cannot request leave; the start date cannot be in a closed payroll period.

        Args:
            employee_id: Employee id.
            leave_type: annual, sick or unpaid.
            start_date: First day of leave, YYYY-MM-DD.
            days: Number of working days (multiple of 0.5).
        """
        if not isinstance(employee_id, str) or employee_id not in self.employees:
            return self._err(f"Employee {employee_id} not found")
        if self.employees[employee_id]["status"] == "terminated":
            return self._err(f"Employee {employee_id} is terminated")
        if leave_type not in LEAVE_TYPES:
            return self._err("leave_type must be annual, sick or unpaid")
        try:
            datetime.date.fromisoformat(start_date)
        except (TypeError, ValueError):
            return self._err(f"Invalid start date {start_date!r}")
        if start_date[:7] < self.company["current_period"]:
            return self._err(f"Payroll period {start_date[:7]} is closed")
        if isinstance(days, bool) or not isinstance(days, (int, float)) or not 0.5 <= days <= 30 or (days * 2) != int(days * 2):
            return self._err("days must be between 0.5 and 30 in half-day steps")
        if leave_type != "unpaid":
            available = self.leave_balances[employee_id][leave_type] - self._pending_days(employee_id, leave_type)
            if days > available:
                return self._err(f"Insufficient {leave_type} leave: requested {days:g}, available {available:g}")
        request_id = self._next_id("leave_request", "LR")
        self.leave_requests[request_id] = {
            "request_id": request_id,
            "employee_id": employee_id,
            "leave_type": leave_type,
            "start_date": start_date,
            "days": days,
            "period": start_date[:7],
            "status": "pending",
            "decided_by": None,
        }
        return {"success": True, "message": f"Leave request {request_id} filed", "request_id": request_id}

    def decide_leave(self, request_id: str, approver_id: str, approve: bool) -> dict:
        """Approve or reject a pending leave request. Approving annual or sick leave deducts the
        days from the employee's balance.

        Rules: only the employee's direct manager decides; the balance must still cover the days.

        Args:
            request_id: Leave request id, e.g. LR403.
            approver_id: Employee id of the manager.
            approve: True to approve, False to reject.
        """
        if not isinstance(request_id, str) or request_id not in self.leave_requests:
            return self._err(f"Leave request {request_id} not found")
        if not isinstance(approve, bool):
            return self._err("approve must be true or false")
        req = self.leave_requests[request_id]
        if req["status"] != "pending":
            return self._err(f"Leave request {request_id} is {req['status']}")
        if not isinstance(approver_id, str) or not self._is_manager_of(approver_id, req["employee_id"]):
            return self._err(f"{approver_id} is not the manager of {req['employee_id']}")
        if not approve:
            req["status"] = "rejected"
            req["decided_by"] = approver_id
            return {"success": True, "message": f"Leave request {request_id} rejected"}
        balances = self.leave_balances[req["employee_id"]]
        if req["leave_type"] != "unpaid":
            if balances[req["leave_type"]] < req["days"]:
                return self._err(f"Insufficient {req['leave_type']} balance ({balances[req['leave_type']]:g} days) for {req['days']:g} days")
            balances[req["leave_type"]] = balances[req["leave_type"]] - req["days"]
        req["status"] = "approved"
        req["decided_by"] = approver_id
        return {"success": True, "message": f"Leave request {request_id} approved", "remaining_balance": balances.get(req["leave_type"])}

    def open_payroll_run(self, period: str) -> dict:
        """Open a draft payroll run for the current payroll period.

        Args:
            period: The company's current pay period, YYYY-MM.
        """
        if not self._valid_period(period):
            return self._err(f"Invalid period {period!r}; use YYYY-MM")
        if period != self.company["current_period"]:
            return self._err(f"Payroll can only be opened for the current period {self.company['current_period']}")
        run_id = f"RUN-{period}"
        if run_id in self.payroll_runs:
            return self._err(f"Payroll run {run_id} already exists ({self.payroll_runs[run_id]['status']})")
        self.payroll_runs[run_id] = {
            "run_id": run_id,
            "period": period,
            "status": "draft",
            "created_at": time.time(),
            "finalized_at": None,
            "totals": {"gross": 0.0, "deductions": 0.0, "tax": 0.0, "net": 0.0},
            "payslip_count": 0,
        }
        return {"success": True, "message": f"Payroll run {run_id} opened", "run_id": run_id}

    def calculate_payslip(self, run_id: str, employee_id: str) -> dict:
        """Calculate an employee's payslip in a draft run and add it to the run totals and the
        employee's year-to-date figures.

        Pay: salaried = annual salary x FTE / 12, less annual salary x FTE / 260 per approved
        unpaid leave day in the period; hourly = regular hours x rate + overtime hours x rate x
        the overtime multiplier, from the approved timesheet (which becomes processed). Pension
        (percentage of gross) and the health premium are deducted before tax; income tax is
        progressive over the monthly brackets; net = gross - deductions - tax.

        Rules: the run must be draft; the employee must not be terminated and must not already
        have a live payslip in the run; hourly staff need an approved timesheet for the period.

        Args:
            run_id: Payroll run id, e.g. RUN-2024-05.
            employee_id: Employee id.
        """
        if not isinstance(run_id, str) or run_id not in self.payroll_runs:
            return self._err(f"Payroll run {run_id} not found")
        run = self.payroll_runs[run_id]
        if run["status"] != "draft":
            return self._err(f"Payroll run {run_id} is {run['status']}")
        if not isinstance(employee_id, str) or employee_id not in self.employees:
            return self._err(f"Employee {employee_id} not found")
        emp = self.employees[employee_id]
        if emp["status"] == "terminated":
            return self._err(f"Employee {employee_id} is terminated")
        for p in self.payslips.values():
            if p["run_id"] == run_id and p["employee_id"] == employee_id and p["status"] != "void":
                return self._err(f"Employee {employee_id} already has payslip {p['payslip_id']} in {run_id}")
        contract = self._contract(employee_id)
        if contract is None or contract["status"] != "active":
            return self._err(f"Employee {employee_id} has no active contract")
        period = run["period"]
        timesheet = None
        unpaid_days = 0.0
        if contract["pay_type"] == "hourly":
            timesheet = self.timesheets.get(f"TS-{employee_id}-{period}")
            if timesheet is None or timesheet["status"] != "approved":
                state = timesheet["status"] if timesheet else "missing"
                return self._err(f"Timesheet for {employee_id} in {period} is {state}; an approved timesheet is required")
            rate = contract["hourly_rate"]
            base = timesheet["regular_hours"] * rate + timesheet["overtime_hours"] * rate * self.company["overtime_multiplier"]
            deduction = 0.0
        else:
            yearly = contract["annual_salary"] * contract["fte"]
            base = yearly / 12
            unpaid_days = sum(
                r["days"] for r in self.leave_requests.values()
                if r["employee_id"] == employee_id and r["leave_type"] == "unpaid" and r["status"] == "approved" and r["period"] == period
            )
            deduction = yearly / WORKING_DAYS_PER_YEAR * unpaid_days
        gross = _money(base - deduction)
        benefits = self.benefits.get(employee_id, {"pension_pct": 0, "health_plan": "none"})
        pension = _money(gross * benefits["pension_pct"] / 100)
        health = _money(self.company["health_premiums"][benefits["health_plan"]])
        taxable = _money(max(gross - pension - health, 0.0))
        tax = self._income_tax(taxable)
        net = _money(gross - pension - health - tax)
        payslip_id = self._next_id("payslip", "PS")
        self.payslips[payslip_id] = {
            "payslip_id": payslip_id,
            "run_id": run_id,
            "employee_id": employee_id,
            "period": period,
            "pay_type": contract["pay_type"],
            "regular_hours": timesheet["regular_hours"] if timesheet else None,
            "overtime_hours": timesheet["overtime_hours"] if timesheet else None,
            "unpaid_leave_days": unpaid_days,
            "unpaid_leave_deduction": _money(deduction),
            "gross": gross,
            "pension": pension,
            "health_premium": health,
            "taxable": taxable,
            "tax": tax,
            "net": net,
            "status": "draft",
            "void_reason": None,
        }
        totals = run["totals"]
        totals["gross"] = _money(totals["gross"] + gross)
        totals["deductions"] = _money(totals["deductions"] + pension + health)
        totals["tax"] = _money(totals["tax"] + tax)
        totals["net"] = _money(totals["net"] + net)
        run["payslip_count"] += 1
        ytd = emp["ytd"]
        ytd["gross"] = _money(ytd["gross"] + gross)
        ytd["tax"] = _money(ytd["tax"] + tax)
        ytd["net"] = _money(ytd["net"] + net)
        if timesheet is not None:
            timesheet["status"] = "processed"
        return {"success": True, "message": f"Payslip {payslip_id} calculated for {employee_id}", "payslip_id": payslip_id, "gross": gross, "tax": tax, "net": net}

    def void_payslip(self, payslip_id: str, reason: str) -> dict:
        """Void a payslip in a draft run so it can be recalculated: removes it from the run
        totals and the employee's year-to-date figures and reopens its timesheet as approved.

        Args:
            payslip_id: Payslip id.
            reason: Why the payslip is voided.
        """
        if not isinstance(payslip_id, str) or payslip_id not in self.payslips:
            return self._err(f"Payslip {payslip_id} not found")
        slip = self.payslips[payslip_id]
        if slip["status"] != "draft":
            return self._err(f"Payslip {payslip_id} is {slip['status']}; only draft payslips can be voided")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A reason is required")
        run = self.payroll_runs[slip["run_id"]]
        totals = run["totals"]
        totals["gross"] = _money(totals["gross"] - slip["gross"])
        totals["deductions"] = _money(totals["deductions"] - slip["pension"] - slip["health_premium"])
        totals["tax"] = _money(totals["tax"] - slip["tax"])
        totals["net"] = _money(totals["net"] - slip["net"])
        run["payslip_count"] -= 1
        ytd = self.employees[slip["employee_id"]]["ytd"]
        ytd["gross"] = _money(ytd["gross"] - slip["gross"])
        ytd["tax"] = _money(ytd["tax"] - slip["tax"])
        ytd["net"] = _money(ytd["net"] - slip["net"])
        ts = self.timesheets.get(f"TS-{slip['employee_id']}-{slip['period']}")
        if slip["pay_type"] == "hourly" and ts is not None and ts["status"] == "processed":
            ts["status"] = "approved"
        slip["status"] = "void"
        slip["void_reason"] = reason.strip()
        return {"success": True, "message": f"Payslip {payslip_id} voided"}

    def finalize_payroll_run(self, run_id: str) -> dict:
        """Finalize a draft run: issues all its draft payslips, stamps the run and moves the
        company to the next pay period.

        Rules: every employee who is not terminated must have a live payslip in the run.

        Args:
            run_id: Draft payroll run id.
        """
        if not isinstance(run_id, str) or run_id not in self.payroll_runs:
            return self._err(f"Payroll run {run_id} not found")
        run = self.payroll_runs[run_id]
        if run["status"] != "draft":
            return self._err(f"Payroll run {run_id} is already {run['status']}")
        paid = {p["employee_id"] for p in self.payslips.values() if p["run_id"] == run_id and p["status"] != "void"}
        missing = sorted(e for e, emp in self.employees.items() if emp["status"] != "terminated" and e not in paid)
        if missing:
            return self._err(f"Missing payslips for: {', '.join(missing)}")
        issued = 0
        for p in self.payslips.values():
            if p["run_id"] == run_id and p["status"] == "draft":
                p["status"] = "issued"
                issued += 1
        run["status"] = "finalized"
        run["finalized_at"] = time.time()
        self.company["current_period"] = self._next_period(run["period"])
        return {"success": True, "message": f"Payroll run {run_id} finalized with {issued} payslips", "net_total": run["totals"]["net"], "next_period": self.company["current_period"]}

    def terminate_employee(self, employee_id: str, termination_date: str, reason: str) -> dict:
        """Terminate an employee: ends the contract and cancels pending leave requests.

        Rules: the employee must not already be terminated; the date must be a valid date on or
        after the hire date and not before the start of the current pay period; managers with
        active direct reports must have them reassigned first.

        Args:
            employee_id: Employee id.
            termination_date: Last working day, YYYY-MM-DD.
            reason: Reason for leaving (resignation, redundancy, dismissal...).
        """
        if not isinstance(employee_id, str) or employee_id not in self.employees:
            return self._err(f"Employee {employee_id} not found")
        emp = self.employees[employee_id]
        if emp["status"] == "terminated":
            return self._err(f"Employee {employee_id} is already terminated")
        try:
            datetime.date.fromisoformat(termination_date)
        except (TypeError, ValueError):
            return self._err(f"Invalid termination date {termination_date!r}")
        if termination_date < emp["hire_date"]:
            return self._err("Termination date is before the hire date")
        if termination_date[:7] < self.company["current_period"]:
            return self._err(f"Termination date falls in closed period {termination_date[:7]}")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A reason is required")
        reports = sorted(e for e, x in self.employees.items() if x["manager_id"] == employee_id and x["status"] != "terminated")
        if reports:
            return self._err(f"Reassign direct reports first: {', '.join(reports)}")
        emp["status"] = "terminated"
        emp["termination_date"] = termination_date
        emp["termination_reason"] = reason.strip()
        contract = self._contract(employee_id)
        if contract is not None:
            contract["status"] = "ended"
            contract["end_date"] = termination_date
        cancelled = []
        for r in self.leave_requests.values():
            if r["employee_id"] == employee_id and r["status"] == "pending":
                r["status"] = "cancelled"
                cancelled.append(r["request_id"])
        return {"success": True, "message": f"Employee {employee_id} terminated effective {termination_date}", "cancelled_leave_requests": sorted(cancelled)}

    def update_salary(self, employee_id: str, new_annual_salary: float) -> dict:
        """Change a salaried employee's annual salary from the current period.

        Rules: salaried active contracts only; the new salary must be positive and within -10% to
        +25% of the current salary (larger changes need a new contract).

        Args:
            employee_id: Employee id.
            new_annual_salary: New full-time annual salary.
        """
        if not isinstance(employee_id, str) or employee_id not in self.employees:
            return self._err(f"Employee {employee_id} not found")
        contract = self._contract(employee_id)
        if contract is None or contract["status"] != "active":
            return self._err(f"Employee {employee_id} has no active contract")
        if contract["pay_type"] != "salaried":
            return self._err(f"Employee {employee_id} is hourly; change the hourly rate by contract amendment")
        if isinstance(new_annual_salary, bool) or not isinstance(new_annual_salary, (int, float)) or new_annual_salary <= 0:
            return self._err("new_annual_salary must be a positive number")
        current = contract["annual_salary"]
        change = (new_annual_salary - current) / current
        if change < -0.10 or change > 0.25:
            return self._err(f"Change of {change * 100:.1f}% is outside the allowed -10% to +25% range")
        contract["annual_salary"] = new_annual_salary
        contract["salary_effective_period"] = self.company["current_period"]
        return {"success": True, "message": f"Salary for {employee_id} set to {new_annual_salary:,.2f} from {self.company['current_period']}"}
