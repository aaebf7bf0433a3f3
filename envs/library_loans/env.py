"""Public library circulation: catalogue items and physical copies, members, loans and
renewals, hold queues with a pickup shelf, overdue and lost-item fines, payments and waivers."""

import datetime


class LibraryLoans:
    def __init__(self, init_config: dict):
        self.current_date = ""
        self.policy = {}
        self.items = {}
        self.copies = {}
        self.members = {}
        self.loans = {}
        self.holds = {}
        self.fines = {}
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

    def _days_late(self, due_date: str) -> int:
        return max(0, (datetime.date.fromisoformat(self.current_date) - datetime.date.fromisoformat(due_date)).days)

    def _member_problem(self, member: dict):
        if member["status"] != "active":
            return f"Member {member['member_id']} is {member['status']}"
        if member["expires_on"] < self.current_date:
            return f"Membership of {member['member_id']} expired on {member['expires_on']}; renew it at the desk"
        if member["fines_owed"] >= self.policy["block_threshold"]:
            return f"Member {member['member_id']} owes {member['fines_owed']:.2f}; borrowing is blocked at {self.policy['block_threshold']:.2f}"
        return None

    def _queue(self, item_id: str) -> list:
        waiting = [h for h in self.holds.values() if h["item_id"] == item_id and h["status"] == "waiting"]
        return sorted(waiting, key=lambda h: (h["placed_on"], h["hold_id"]))

    def _route_copy(self, copy: dict) -> dict:
        """Send a copy that just came free to the next waiting hold, or back to the shelf."""
        queue = self._queue(copy["item_id"])
        copy["loan_id"] = None
        if queue:
            hold = queue[0]
            copy["status"] = "on_hold_shelf"
            copy["hold_id"] = hold["hold_id"]
            hold["status"] = "ready"
            hold["copy_id"] = copy["copy_id"]
            hold["pickup_by"] = self._add_days(self.policy["hold_pickup_days"])
            return {"routed_to_hold": hold["hold_id"], "member_id": hold["member_id"]}
        copy["status"] = "available"
        copy["hold_id"] = None
        return {"routed_to_hold": None}

    def _charge(self, member: dict, loan_id: str, amount: float, reason: str) -> str:
        fine_id = self._next_id("fine", "F")
        amount = round(amount, 2)
        self.fines[fine_id] = {
            "fine_id": fine_id,
            "member_id": member["member_id"],
            "loan_id": loan_id,
            "amount": amount,
            "balance": amount,
            "reason": reason,
            "status": "unpaid",
            "assessed_on": self.current_date,
            "waive_reason": None,
        }
        member["fines_owed"] = round(member["fines_owed"] + amount, 2)
        return fine_id

    # ------------------------------------------------------------------ queries
    def search_catalog(self, query: str) -> dict:
        """Find catalogue items whose title or author contains the query (case-insensitive), with
        the number of copies on the shelf and the hold queue length.

        Args:
            query: At least 3 characters of a title or author name.
        """
        if not isinstance(query, str) or len(query.strip()) < 3:
            return self._err("Search query must be at least 3 characters")
        q = query.strip().lower()
        rows = []
        for item in self.items.values():
            if q in item["title"].lower() or q in item["author"].lower():
                available = sum(1 for c in self.copies.values() if c["item_id"] == item["item_id"] and c["status"] == "available")
                rows.append({"item_id": item["item_id"], "title": item["title"], "author": item["author"], "format": item["format"], "available_copies": available, "holds_waiting": len(self._queue(item["item_id"]))})
        rows.sort(key=lambda r: r["item_id"])
        return {"success": True, "data": rows}

    def get_member_account(self, member_id: str) -> dict:
        """Return a member's status, current loans (with days overdue), holds and unpaid fines.

        Args:
            member_id: Library card / member id, e.g. M203.
        """
        if not isinstance(member_id, str) or member_id not in self.members:
            return self._err(f"Member {member_id} not found")
        data = dict(self.members[member_id])
        data["loans"] = [
            {"loan_id": l["loan_id"], "copy_id": l["copy_id"], "title": self.items[self.copies[l["copy_id"]]["item_id"]]["title"], "due_date": l["due_date"], "renewals": l["renewals"], "days_overdue": self._days_late(l["due_date"])}
            for l in sorted(self.loans.values(), key=lambda x: x["loan_id"]) if l["member_id"] == member_id and l["status"] == "active"
        ]
        data["holds"] = [
            {"hold_id": h["hold_id"], "item_id": h["item_id"], "status": h["status"], "pickup_by": h["pickup_by"]}
            for h in sorted(self.holds.values(), key=lambda x: x["hold_id"]) if h["member_id"] == member_id and h["status"] in ("waiting", "ready")
        ]
        data["unpaid_fines"] = [
            {"fine_id": f["fine_id"], "balance": f["balance"], "reason": f["reason"]}
            for f in sorted(self.fines.values(), key=lambda x: x["fine_id"]) if f["member_id"] == member_id and f["status"] == "unpaid"
        ]
        return {"success": True, "data": data}

    def get_item_availability(self, item_id: str) -> dict:
        """Return every copy of an item with its status and due date, and the hold queue in order.

        Args:
            item_id: Catalogue item id, e.g. ITM004.
        """
        if not isinstance(item_id, str) or item_id not in self.items:
            return self._err(f"Item {item_id} not found")
        copies = []
        for c in sorted(self.copies.values(), key=lambda x: x["copy_id"]):
            if c["item_id"] != item_id:
                continue
            row = {"copy_id": c["copy_id"], "branch": c["branch"], "status": c["status"]}
            if c["loan_id"]:
                row["due_date"] = self.loans[c["loan_id"]]["due_date"]
            copies.append(row)
        queue = [{"hold_id": h["hold_id"], "member_id": h["member_id"], "placed_on": h["placed_on"]} for h in self._queue(item_id)]
        return {"success": True, "data": {"item": dict(self.items[item_id]), "copies": copies, "hold_queue": queue}}

    def list_overdue_loans(self) -> dict:
        """List active loans past their due date, most overdue first, with the fine accrued so far
        (daily rate by format, capped per item)."""
        rows = []
        for l in self.loans.values():
            if l["status"] != "active":
                continue
            late = self._days_late(l["due_date"])
            if late == 0:
                continue
            fmt = self.items[self.copies[l["copy_id"]]["item_id"]]["format"]
            accrued = round(min(late * self.policy["daily_fine"][fmt], self.policy["max_fine_per_item"]), 2)
            rows.append({"loan_id": l["loan_id"], "member_id": l["member_id"], "copy_id": l["copy_id"], "due_date": l["due_date"], "days_overdue": late, "accrued_fine": accrued})
        rows.sort(key=lambda r: (-r["days_overdue"], r["loan_id"]))
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ updates
    def checkout(self, copy_id: str, member_id: str) -> dict:
        """Lend a copy to a member. A copy on the hold shelf can only go to the member whose hold it
        is waiting for, and that hold is fulfilled.

        Rules: the member must be active, unexpired, owe less than the fine block threshold and
        be under the loan limit for their member type; the loan period depends on the format.

        Args:
            copy_id: Copy id / barcode, e.g. C1004.
            member_id: Member id.
        """
        if not isinstance(copy_id, str) or copy_id not in self.copies:
            return self._err(f"Copy {copy_id} not found")
        if not isinstance(member_id, str) or member_id not in self.members:
            return self._err(f"Member {member_id} not found")
        member = self.members[member_id]
        problem = self._member_problem(member)
        if problem:
            return self._err(problem)
        limit = self.policy["max_loans"][member["type"]]
        if member["active_loans"] >= limit:
            return self._err(f"Member {member_id} already has {limit} items on loan")
        copy = self.copies[copy_id]
        hold = None
        if copy["status"] == "on_hold_shelf":
            hold = self.holds[copy["hold_id"]]
            if hold["member_id"] != member_id:
                return self._err(f"Copy {copy_id} is reserved for another member's hold")
        elif copy["status"] != "available":
            return self._err(f"Copy {copy_id} is {copy['status']}")
        item = self.items[copy["item_id"]]
        loan_id = self._next_id("loan", "L")
        due = self._add_days(self.policy["loan_days"][item["format"]])
        self.loans[loan_id] = {"loan_id": loan_id, "copy_id": copy_id, "member_id": member_id, "checkout_date": self.current_date, "due_date": due, "renewals": 0, "status": "active", "returned_date": None}
        copy["status"] = "on_loan"
        copy["loan_id"] = loan_id
        member["active_loans"] += 1
        result = {"success": True, "message": f"{item['title']} checked out to {member_id}", "loan_id": loan_id, "due_date": due}
        if hold is not None:
            copy["hold_id"] = None
            hold["status"] = "fulfilled"
            result["fulfilled_hold"] = hold["hold_id"]
        return result

    def return_copy(self, copy_id: str) -> dict:
        """Check a copy back in. A late return is charged the format's daily fine per day late,
        capped per item. The copy then goes to the next waiting hold for the item (pickup shelf)
        or back on the shelf.

        Args:
            copy_id: Copy id being returned.
        """
        if not isinstance(copy_id, str) or copy_id not in self.copies:
            return self._err(f"Copy {copy_id} not found")
        copy = self.copies[copy_id]
        if copy["status"] != "on_loan" or not copy["loan_id"]:
            return self._err(f"Copy {copy_id} is not on loan ({copy['status']})")
        loan = self.loans[copy["loan_id"]]
        member = self.members[loan["member_id"]]
        item = self.items[copy["item_id"]]
        late = self._days_late(loan["due_date"])
        fine = round(min(late * self.policy["daily_fine"][item["format"]], self.policy["max_fine_per_item"]), 2)
        loan["status"] = "returned"
        loan["returned_date"] = self.current_date
        member["active_loans"] -= 1
        result = {"success": True, "message": f"{item['title']} returned by {loan['member_id']}", "days_late": late, "fine": fine}
        if fine > 0:
            result["fine_id"] = self._charge(member, loan["loan_id"], fine, "overdue")
        result.update(self._route_copy(copy))
        return result

    def renew_loan(self, loan_id: str) -> dict:
        """Extend an active loan by a full loan period from today.

        Rules: at most the policy's maximum renewals; overdue loans cannot be renewed; no renewal
        while other members are waiting for the item; the member must not be blocked by fines.

        Args:
            loan_id: Loan id, e.g. L7001.
        """
        if not isinstance(loan_id, str) or loan_id not in self.loans:
            return self._err(f"Loan {loan_id} not found")
        loan = self.loans[loan_id]
        if loan["status"] != "active":
            return self._err(f"Loan {loan_id} is {loan['status']}")
        if self._days_late(loan["due_date"]) > 0:
            return self._err(f"Loan {loan_id} is overdue since {loan['due_date']}; return the item")
        if loan["renewals"] >= self.policy["max_renewals"]:
            return self._err(f"Loan {loan_id} has reached the maximum of {self.policy['max_renewals']} renewals")
        copy = self.copies[loan["copy_id"]]
        if self._queue(copy["item_id"]):
            return self._err("Other members are waiting for this item; it cannot be renewed")
        member = self.members[loan["member_id"]]
        if member["fines_owed"] >= self.policy["block_threshold"]:
            return self._err(f"Member owes {member['fines_owed']:.2f}; renewals are blocked")
        loan["due_date"] = self._add_days(self.policy["loan_days"][self.items[copy["item_id"]]["format"]])
        loan["renewals"] += 1
        return {"success": True, "message": f"Loan {loan_id} renewed", "due_date": loan["due_date"], "renewals_left": self.policy["max_renewals"] - loan["renewals"]}

    def place_hold(self, item_id: str, member_id: str) -> dict:
        """Join the hold queue for an item that has no copy on the shelf.

        Rules: the member must be in good standing (active, unexpired, under the fine threshold);
        holds are refused when a copy is available to borrow now; a member cannot hold an item
        they already have on loan or already hold.

        Args:
            item_id: Catalogue item id.
            member_id: Member id.
        """
        if not isinstance(item_id, str) or item_id not in self.items:
            return self._err(f"Item {item_id} not found")
        if not isinstance(member_id, str) or member_id not in self.members:
            return self._err(f"Member {member_id} not found")
        problem = self._member_problem(self.members[member_id])
        if problem:
            return self._err(problem)
        if any(c["item_id"] == item_id and c["status"] == "available" for c in self.copies.values()):
            return self._err(f"A copy of {item_id} is on the shelf; check it out instead")
        for h in self.holds.values():
            if h["item_id"] == item_id and h["member_id"] == member_id and h["status"] in ("waiting", "ready"):
                return self._err(f"Member already has hold {h['hold_id']} on {item_id}")
        for l in self.loans.values():
            if l["member_id"] == member_id and l["status"] == "active" and self.copies[l["copy_id"]]["item_id"] == item_id:
                return self._err(f"Member already has {item_id} on loan ({l['loan_id']})")
        hold_id = self._next_id("hold", "H")
        self.holds[hold_id] = {"hold_id": hold_id, "item_id": item_id, "member_id": member_id, "placed_on": self.current_date, "status": "waiting", "copy_id": None, "pickup_by": None}
        return {"success": True, "message": f"Hold {hold_id} placed", "hold_id": hold_id, "queue_position": len(self._queue(item_id))}

    def cancel_hold(self, hold_id: str) -> dict:
        """Cancel a waiting or ready hold. A copy waiting on the pickup shelf for a cancelled hold
        goes to the next member in the queue or back on the shelf.

        Args:
            hold_id: Hold id, e.g. H9002.
        """
        if not isinstance(hold_id, str) or hold_id not in self.holds:
            return self._err(f"Hold {hold_id} not found")
        hold = self.holds[hold_id]
        if hold["status"] not in ("waiting", "ready"):
            return self._err(f"Hold {hold_id} is {hold['status']}")
        was_ready = hold["status"] == "ready"
        hold["status"] = "cancelled"
        result = {"success": True, "message": f"Hold {hold_id} cancelled"}
        if was_ready:
            result.update(self._route_copy(self.copies[hold["copy_id"]]))
        return result

    def pay_fines(self, member_id: str, amount: float) -> dict:
        """Take a payment towards a member's fines, applied to the oldest unpaid fines first.

        Args:
            member_id: Member id.
            amount: Payment amount (positive, at most the total owed).
        """
        if not isinstance(member_id, str) or member_id not in self.members:
            return self._err(f"Member {member_id} not found")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount <= 0:
            return self._err("amount must be a positive number")
        member = self.members[member_id]
        if round(amount, 2) > member["fines_owed"]:
            return self._err(f"Payment {amount:.2f} exceeds the {member['fines_owed']:.2f} owed")
        remaining = round(amount, 2)
        settled = []
        for fine in sorted(self.fines.values(), key=lambda f: (f["assessed_on"], f["fine_id"])):
            if remaining <= 0:
                break
            if fine["member_id"] != member_id or fine["status"] != "unpaid":
                continue
            take = min(remaining, fine["balance"])
            fine["balance"] = round(fine["balance"] - take, 2)
            remaining = round(remaining - take, 2)
            if fine["balance"] == 0:
                fine["status"] = "paid"
                settled.append(fine["fine_id"])
        member["fines_owed"] = round(member["fines_owed"] - round(amount, 2), 2)
        return {"success": True, "message": f"Payment of {amount:.2f} applied", "fines_settled": settled, "balance_owed": member["fines_owed"]}

    def waive_fine(self, fine_id: str, reason: str) -> dict:
        """Waive the unpaid balance of one fine (staff discretion).

        Args:
            fine_id: Fine id, e.g. F8002.
            reason: Justification for the waiver.
        """
        if not isinstance(fine_id, str) or fine_id not in self.fines:
            return self._err(f"Fine {fine_id} not found")
        fine = self.fines[fine_id]
        if fine["status"] != "unpaid":
            return self._err(f"Fine {fine_id} is {fine['status']}")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A reason is required for a waiver")
        member = self.members[fine["member_id"]]
        member["fines_owed"] = round(member["fines_owed"] - fine["balance"], 2)
        waived = fine["balance"]
        fine["balance"] = 0.0
        fine["status"] = "waived"
        fine["waive_reason"] = reason.strip()
        return {"success": True, "message": f"Waived {waived:.2f} on {fine_id}", "balance_owed": member["fines_owed"]}

    def declare_lost(self, loan_id: str) -> dict:
        """Declare an item on loan lost: closes the loan, withdraws the copy and charges the member
        the item's replacement cost plus the lost-item processing fee.

        Args:
            loan_id: Active loan id.
        """
        if not isinstance(loan_id, str) or loan_id not in self.loans:
            return self._err(f"Loan {loan_id} not found")
        loan = self.loans[loan_id]
        if loan["status"] != "active":
            return self._err(f"Loan {loan_id} is {loan['status']}")
        copy = self.copies[loan["copy_id"]]
        item = self.items[copy["item_id"]]
        member = self.members[loan["member_id"]]
        charge = round(item["replacement_cost"] + self.policy["lost_processing_fee"], 2)
        loan["status"] = "lost"
        copy["status"] = "lost"
        copy["loan_id"] = None
        member["active_loans"] -= 1
        fine_id = self._charge(member, loan_id, charge, "lost_item")
        return {"success": True, "message": f"{item['title']} ({copy['copy_id']}) declared lost", "fine_id": fine_id, "charge": charge}

    def expire_holds(self) -> dict:
        """Expire ready holds whose pickup date has passed and pass each copy to the next member in
        the queue or back to the shelf."""
        expired = []
        for hold in sorted(self.holds.values(), key=lambda h: h["hold_id"]):
            if hold["status"] == "ready" and hold["pickup_by"] < self.current_date:
                hold["status"] = "expired"
                self._route_copy(self.copies[hold["copy_id"]])
                expired.append(hold["hold_id"])
        return {"success": True, "message": f"{len(expired)} hold(s) expired", "expired": expired}
