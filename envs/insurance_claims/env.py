"""Property and casualty claims handling: policies with per-coverage limits and deductibles,
first notice of loss with automatic fraud screening, adjuster assignment, reserves, approval
within adjuster authority, SIU fraud review, payouts and policy cancellation.

Dates follow the insurer's business date held in the state. Claim numbers and payment
references are generated, and filing and payment times are stamped, at call time.
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


class ClaimsSystem:
    """Claims desk of a personal-lines insurer (motor, home and renters policies)."""

    OPEN_STATUSES = ("open", "under_review", "siu_review", "approved")
    PAYMENT_METHODS = ("bank_transfer", "cheque", "direct_to_repairer")
    FRAUD_INDICATORS = ("new_policy", "late_report", "near_limit", "frequent_claimant",
                        "inconsistent_statement", "prior_damage", "staged_accident", "inflated_invoice")

    def __init__(self, init_config: dict):
        self.business_date = ""
        self.fraud_rules = {}
        self.policyholders = {}
        self.policies = {}
        self.adjusters = {}
        self.claims = {}
        self.payments = {}

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

    def _committed(self, policy_id, coverage, exclude_claim=None):
        """Paid to date plus approved-but-unpaid amounts on one coverage."""
        policy = self.policies[policy_id]
        total = policy["coverages"][coverage]["paid_to_date"]
        for claim_id, claim in self.claims.items():
            if claim_id != exclude_claim and claim["policy_id"] == policy_id and claim["coverage"] == coverage \
                    and claim["status"] == "approved":
                total += claim["payable_amount"]
        return round(total, 2)

    def _remaining_limit(self, policy_id, coverage, exclude_claim=None):
        limit = self.policies[policy_id]["coverages"][coverage]["limit"]
        return round(limit - self._committed(policy_id, coverage, exclude_claim), 2)

    def _release_adjuster(self, claim):
        adjuster = self._find(self.adjusters, claim["adjuster_id"])
        if adjuster is not None and adjuster["open_claims"] > 0:
            adjuster["open_claims"] -= 1

    # ------------------------------------------------------------------ queries

    def get_policy(self, policy_id: str) -> dict:
        """Show a policy with its coverages and the limit still available on each coverage.

        Args:
            policy_id: Policy id, e.g. "P5001".

        Returns:
            The policy record plus `remaining_limits` per coverage.
        """
        policy = self._find(self.policies, policy_id)
        if policy is None:
            return {"success": False, "error": f"Policy {policy_id} not found"}
        remaining = {code: self._remaining_limit(policy_id, code) for code in policy["coverages"]}
        return {"success": True, "data": copy.deepcopy(dict(policy, policy_id=policy_id, remaining_limits=remaining))}

    def get_claim(self, claim_id: str) -> dict:
        """Show a claim with its status, amounts, adjuster and fraud indicators.

        Args:
            claim_id: Claim id, e.g. "CL9001".

        Returns:
            The claim record with its id.
        """
        claim = self._find(self.claims, claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found"}
        return {"success": True, "data": copy.deepcopy(dict(claim, claim_id=claim_id))}

    def list_unassigned_claims(self) -> dict:
        """List claims that are still waiting for an adjuster (open or in SIU review without an
        adjuster), oldest report first.

        Returns:
            Claim id, policy, product, coverage, amount claimed and report date.
        """
        rows = []
        for claim_id, claim in self.claims.items():
            if claim["adjuster_id"] is None and claim["status"] in ("open", "siu_review"):
                product = self.policies[claim["policy_id"]]["product"]
                rows.append({"claim_id": claim_id, "policy_id": claim["policy_id"], "product": product,
                             "coverage": claim["coverage"], "claimed_amount": claim["claimed_amount"],
                             "reported_date": claim["reported_date"], "status": claim["status"]})
        rows.sort(key=lambda r: (r["reported_date"], r["claim_id"]))
        return {"success": True, "data": rows}

    def get_adjuster_workload(self, adjuster_id: str) -> dict:
        """Show an adjuster's profile, capacity and the open claims assigned to them.

        Args:
            adjuster_id: Adjuster id, e.g. "AJ101".

        Returns:
            Adjuster record plus `claims` (id, status, coverage, reserve) and `capacity_left`.
        """
        adjuster = self._find(self.adjusters, adjuster_id)
        if adjuster is None:
            return {"success": False, "error": f"Adjuster {adjuster_id} not found"}
        claims = [{"claim_id": cid, "status": c["status"], "coverage": c["coverage"], "reserve": c["reserve"]}
                  for cid, c in sorted(self.claims.items())
                  if c["adjuster_id"] == adjuster_id and c["status"] in self.OPEN_STATUSES]
        data = dict(adjuster, adjuster_id=adjuster_id, claims=claims,
                    capacity_left=adjuster["max_caseload"] - adjuster["open_claims"])
        return {"success": True, "data": copy.deepcopy(data)}

    # ------------------------------------------------------------------ intake and handling

    def file_claim(self, policy_id: str, coverage: str, loss_date: str, claimed_amount: float,
                   description: str) -> dict:
        """Record a first notice of loss on a policy and screen it for fraud indicators.

        Rules: the policy must be active, the loss date must be valid, not in the future, inside
        the policy period and covered by paid premium; the coverage must exist on the policy;
        the description needs at least 10 characters; a second live claim for the same policy,
        coverage and loss date is a duplicate. Automatic indicators: loss within 30 days of
        policy start ("new_policy"), reported more than 30 days after the loss ("late_report"),
        amount at or above 90% of the coverage limit ("near_limit"), and two or more other
        claims by the holder with losses in the previous 365 days ("frequent_claimant"). A
        flagged claim goes to SIU review instead of the open queue. A claim number is generated.

        Args:
            policy_id: Policy id, e.g. "P5001".
            coverage: Coverage code on the policy, e.g. "collision", "contents".
            loss_date: ISO date of the loss.
            claimed_amount: Amount claimed, positive with at most two decimals.
            description: What happened (at least 10 characters).

        Returns:
            The claim id, its status and any fraud indicators raised.
        """
        policy = self._find(self.policies, policy_id)
        if policy is None:
            return {"success": False, "error": f"Policy {policy_id} not found"}
        if policy["status"] != "active":
            return {"success": False, "error": f"Policy {policy_id} is {policy['status']}"}
        if not isinstance(coverage, str) or coverage not in policy["coverages"]:
            return {"success": False, "error": f"Policy {policy_id} has no '{coverage}' coverage"}
        loss = _parse_date(loss_date)
        if loss is None:
            return {"success": False, "error": f"Invalid loss_date: {loss_date!r}"}
        if loss > self._today():
            return {"success": False, "error": "loss_date cannot be in the future"}
        if not _parse_date(policy["effective_date"]) <= loss <= _parse_date(policy["expiry_date"]):
            return {"success": False, "error": "Loss date is outside the policy period"}
        if loss > _parse_date(policy["premium_paid_through"]):
            return {"success": False, "error": f"Premium was only paid through {policy['premium_paid_through']}"}
        if not _is_amount(claimed_amount):
            return {"success": False, "error": "claimed_amount must be a positive number with at most two decimals"}
        if not isinstance(description, str) or len(description.strip()) < 10:
            return {"success": False, "error": "description must be at least 10 characters"}
        for claim_id, claim in self.claims.items():
            if claim["policy_id"] == policy_id and claim["coverage"] == coverage and claim["loss_date"] == loss_date \
                    and claim["status"] != "denied":
                return {"success": False, "error": f"Duplicate of claim {claim_id}"}
        rules = self.fraud_rules
        flags = {}
        if (loss - _parse_date(policy["effective_date"])).days <= rules["new_policy_days"]:
            flags["new_policy"] = "Loss within the first days of cover"
        if (self._today() - loss).days > rules["late_report_days"]:
            flags["late_report"] = f"Reported {(self._today() - loss).days} days after the loss"
        if claimed_amount >= rules["near_limit_ratio"] * policy["coverages"][coverage]["limit"]:
            flags["near_limit"] = "Amount claimed is close to the coverage limit"
        holder = policy["holder_id"]
        recent = 0
        for claim in self.claims.values():
            other = self.policies.get(claim["policy_id"])
            when = _parse_date(claim["loss_date"])
            if other is not None and other["holder_id"] == holder \
                    and 0 <= (loss - when).days <= rules["frequency_window_days"]:
                recent += 1
        if recent >= rules["frequency_threshold"]:
            flags["frequent_claimant"] = f"{recent} other claims in the previous year"
        claim_id = self._next_id(self.claims, "CL")
        status = "siu_review" if flags else "open"
        self.claims[claim_id] = {
            "claim_number": f"CLM-{uuid.uuid4().hex[:8].upper()}",
            "policy_id": policy_id, "coverage": coverage, "loss_date": loss_date,
            "reported_date": self.business_date, "filed_at": datetime.datetime.now().isoformat(timespec="seconds"),
            "description": description.strip(), "claimed_amount": float(claimed_amount), "status": status,
            "adjuster_id": None, "reserve": 0.0, "approved_amount": None, "payable_amount": None,
            "approved_on": None, "paid_amount": 0.0, "fraud_flags": flags, "siu_outcome": None, "denial_reason": None,
            "closed_on": None,
        }
        policy["claims_count"] += 1
        return {"success": True, "message": f"Claim {claim_id} filed", "claim_id": claim_id, "status": status,
                "fraud_flags": sorted(flags)}

    def assign_adjuster(self, claim_id: str, adjuster_id: str) -> dict:
        """Assign (or reassign) an adjuster to a live claim. An open claim moves to
        "under_review"; a claim in SIU review keeps that status.

        Rules: the adjuster must be active, specialised in the policy's product and below their
        maximum caseload; the claim must be open, under review or in SIU review. On reassignment
        the previous adjuster's caseload goes down.

        Args:
            claim_id: Claim id, e.g. "CL9001".
            adjuster_id: Adjuster id, e.g. "AJ101".

        Returns:
            The claim's status and the adjuster's new caseload.
        """
        claim = self._find(self.claims, claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found"}
        adjuster = self._find(self.adjusters, adjuster_id)
        if adjuster is None:
            return {"success": False, "error": f"Adjuster {adjuster_id} not found"}
        if claim["status"] not in ("open", "under_review", "siu_review"):
            return {"success": False, "error": f"Claim {claim_id} is {claim['status']}"}
        if claim["adjuster_id"] == adjuster_id:
            return {"success": False, "error": f"{adjuster_id} is already handling {claim_id}"}
        if adjuster["status"] != "active":
            return {"success": False, "error": f"Adjuster {adjuster_id} is {adjuster['status']}"}
        product = self.policies[claim["policy_id"]]["product"]
        if product not in adjuster["specialties"]:
            return {"success": False, "error": f"Adjuster {adjuster_id} does not handle {product} claims"}
        if adjuster["open_claims"] >= adjuster["max_caseload"]:
            return {"success": False,
                    "error": f"Adjuster {adjuster_id} is at full caseload ({adjuster['max_caseload']})"}
        self._release_adjuster(claim)
        claim["adjuster_id"] = adjuster_id
        adjuster["open_claims"] += 1
        if claim["status"] == "open":
            claim["status"] = "under_review"
        return {"success": True, "message": f"{adjuster['name']} assigned to {claim_id}", "status": claim["status"],
                "adjuster_open_claims": adjuster["open_claims"]}

    def set_reserve(self, claim_id: str, amount: float) -> dict:
        """Set the case reserve (expected cost) of a live claim. The reserve may be zero but not
        more than the limit still available on the claim's coverage.

        Args:
            claim_id: Claim id, e.g. "CL9001".
            amount: Reserve amount, zero or positive with at most two decimals.

        Returns:
            Old and new reserve.
        """
        claim = self._find(self.claims, claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found"}
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(amount) \
                or amount < 0 or round(amount, 2) != amount:
            return {"success": False, "error": "amount must be zero or positive with at most two decimals"}
        if claim["status"] not in ("open", "under_review", "siu_review"):
            return {"success": False,
                    "error": f"Reserves can only change on claims being handled; {claim_id} is {claim['status']}"}
        available = self._remaining_limit(claim["policy_id"], claim["coverage"], claim_id)
        if amount > available:
            return {"success": False, "error": f"Reserve exceeds the {available:.2f} left on the coverage"}
        old = claim["reserve"]
        if old == amount:
            return {"success": False, "error": f"Reserve is already {old:.2f}"}
        claim["reserve"] = float(amount)
        return {"success": True, "message": f"Reserve of {claim_id} set", "old_reserve": old, "new_reserve": float(amount)}

    def flag_fraud(self, claim_id: str, indicator: str, note: str) -> dict:
        """Add a fraud indicator to a live claim and refer it to the Special Investigations
        Unit (status "siu_review").

        Args:
            claim_id: Claim id, e.g. "CL9001".
            indicator: One of "new_policy", "late_report", "near_limit", "frequent_claimant",
                "inconsistent_statement", "prior_damage", "staged_accident", "inflated_invoice".
            note: What the handler observed (at least 10 characters).

        Returns:
            The claim's indicators.
        """
        claim = self._find(self.claims, claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found"}
        if indicator not in self.FRAUD_INDICATORS:
            return {"success": False, "error": f"Unknown fraud indicator {indicator!r}"}
        if not isinstance(note, str) or len(note.strip()) < 10:
            return {"success": False, "error": "note must be at least 10 characters"}
        if claim["status"] not in ("open", "under_review", "siu_review"):
            return {"success": False, "error": f"Claim {claim_id} is {claim['status']}"}
        if indicator in claim["fraud_flags"]:
            return {"success": False, "error": f"Indicator {indicator} is already recorded on {claim_id}"}
        claim["fraud_flags"][indicator] = note.strip()
        claim["status"] = "siu_review"
        claim["siu_outcome"] = None
        return {"success": True, "message": f"{claim_id} referred to SIU", "fraud_flags": sorted(claim["fraud_flags"])}

    def complete_siu_review(self, claim_id: str, finding: str) -> dict:
        """Record the outcome of the SIU investigation of a claim.

        "cleared": the claim returns to "under_review" (or "open" when no adjuster is assigned).
        "confirmed": the claim is denied and closed, its reserve released, the adjuster's
        caseload reduced, and the policy is cancelled for misrepresentation with no refund.

        Args:
            claim_id: Claim id, e.g. "CL9004".
            finding: "cleared" or "confirmed".

        Returns:
            The claim's new status.
        """
        claim = self._find(self.claims, claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found"}
        if finding not in ("cleared", "confirmed"):
            return {"success": False, "error": "finding must be 'cleared' or 'confirmed'"}
        if claim["status"] != "siu_review":
            return {"success": False, "error": f"Claim {claim_id} is not in SIU review"}
        claim["siu_outcome"] = finding
        if finding == "cleared":
            claim["status"] = "under_review" if claim["adjuster_id"] else "open"
            return {"success": True, "message": f"SIU cleared {claim_id}", "status": claim["status"]}
        claim["status"] = "denied"
        claim["denial_reason"] = "Fraud confirmed by SIU"
        claim["closed_on"] = self.business_date
        claim["reserve"] = 0.0
        self._release_adjuster(claim)
        policy = self.policies[claim["policy_id"]]
        if policy["status"] == "active":
            policy["status"] = "cancelled"
            policy["cancelled_on"] = self.business_date
            policy["cancellation_reason"] = "Misrepresentation (SIU)"
            policy["refund_due"] = 0.0
        return {"success": True, "message": f"Fraud confirmed on {claim_id}; claim denied and policy cancelled",
                "status": "denied"}

    # ------------------------------------------------------------------ decisions and payment

    def approve_claim(self, claim_id: str, approved_amount: float) -> dict:
        """Approve a claim for the agreed loss amount. The payable amount is the agreed loss
        minus the coverage deductible, capped at the limit still available; the reserve is set
        to the payable amount.

        Rules: the claim must be under review with an adjuster (not in SIU review); the agreed
        loss cannot exceed the amount claimed; the payable amount must be positive and within the
        assigned adjuster's authority limit.

        Args:
            claim_id: Claim id, e.g. "CL9001".
            approved_amount: Agreed loss before deductible, positive with at most two decimals.

        Returns:
            Agreed loss, deductible applied and payable amount.
        """
        claim = self._find(self.claims, claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found"}
        if not _is_amount(approved_amount):
            return {"success": False, "error": "approved_amount must be a positive number with at most two decimals"}
        if claim["status"] == "siu_review":
            return {"success": False, "error": f"Claim {claim_id} is under SIU review"}
        if claim["status"] != "under_review" or claim["adjuster_id"] is None:
            return {"success": False,
                    "error": f"Claim {claim_id} must be under review by an adjuster (status {claim['status']})"}
        if approved_amount > claim["claimed_amount"]:
            return {"success": False, "error": f"Approved amount exceeds the {claim['claimed_amount']:.2f} claimed"}
        coverage = self.policies[claim["policy_id"]]["coverages"][claim["coverage"]]
        payable = round(min(approved_amount - coverage["deductible"],
                            self._remaining_limit(claim["policy_id"], claim["coverage"], claim_id)), 2)
        if payable <= 0:
            return {"success": False, "error": f"Nothing payable: the loss does not exceed the {coverage['deductible']:.2f} deductible "
                                               "or the coverage limit is exhausted"}
        adjuster = self.adjusters[claim["adjuster_id"]]
        if payable > adjuster["authority_limit"]:
            return {"success": False, "error": f"Payable {payable:.2f} exceeds {claim['adjuster_id']}'s authority of "
                                               f"{adjuster['authority_limit']:.2f}; reassign to a senior adjuster"}
        claim["status"] = "approved"
        claim["approved_amount"] = float(approved_amount)
        claim["payable_amount"] = payable
        claim["approved_on"] = self.business_date
        claim["reserve"] = payable
        return {"success": True, "message": f"Claim {claim_id} approved", "approved_amount": float(approved_amount),
                "deductible": coverage["deductible"], "payable_amount": payable}

    def deny_claim(self, claim_id: str, reason: str) -> dict:
        """Deny a claim that is open or under review: the claim is closed, its reserve released
        and the adjuster's caseload reduced.

        Args:
            claim_id: Claim id, e.g. "CL9001".
            reason: Reason given to the policyholder (at least 10 characters).

        Returns:
            Confirmation message.
        """
        claim = self._find(self.claims, claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found"}
        if not isinstance(reason, str) or len(reason.strip()) < 10:
            return {"success": False, "error": "reason must be at least 10 characters"}
        if claim["status"] not in ("open", "under_review"):
            return {"success": False, "error": f"Claim {claim_id} is {claim['status']} and cannot be denied here"}
        claim["status"] = "denied"
        claim["denial_reason"] = reason.strip()
        claim["closed_on"] = self.business_date
        claim["reserve"] = 0.0
        self._release_adjuster(claim)
        return {"success": True, "message": f"Claim {claim_id} denied"}

    def issue_payout(self, claim_id: str, payee: str, method: str) -> dict:
        """Pay an approved claim in full and close it. The payment gets a generated reference;
        the coverage's paid-to-date grows, the reserve is released and the adjuster's caseload
        goes down.

        Args:
            claim_id: Claim id, e.g. "CL9001".
            payee: Who receives the money (policyholder or repairer name, at least 3 characters).
            method: "bank_transfer", "cheque" or "direct_to_repairer".

        Returns:
            The payment id, amount and reference.
        """
        claim = self._find(self.claims, claim_id)
        if claim is None:
            return {"success": False, "error": f"Claim {claim_id} not found"}
        if claim["status"] != "approved":
            return {"success": False, "error": f"Only approved claims can be paid; {claim_id} is {claim['status']}"}
        if not isinstance(payee, str) or len(payee.strip()) < 3:
            return {"success": False, "error": "payee must be at least 3 characters"}
        if method not in self.PAYMENT_METHODS:
            return {"success": False, "error": f"method must be one of {', '.join(self.PAYMENT_METHODS)}"}
        amount = claim["payable_amount"]
        coverage = self.policies[claim["policy_id"]]["coverages"][claim["coverage"]]
        payment_id = self._next_id(self.payments, "PY")
        reference = f"PAY-{uuid.uuid4().hex[:10].upper()}"
        self.payments[payment_id] = {"claim_id": claim_id, "payee": payee.strip(), "amount": amount, "method": method,
                                     "issued_on": self.business_date, "reference": reference,
                                     "issued_at": datetime.datetime.now().isoformat(timespec="seconds")}
        coverage["paid_to_date"] = round(coverage["paid_to_date"] + amount, 2)
        claim["paid_amount"] = round(claim["paid_amount"] + amount, 2)
        claim["reserve"] = 0.0
        claim["status"] = "closed"
        claim["closed_on"] = self.business_date
        self._release_adjuster(claim)
        return {"success": True, "message": f"Paid {amount:.2f} on {claim_id}", "payment_id": payment_id,
                "amount": amount, "reference": reference}

    # ------------------------------------------------------------------ policy administration

    def cancel_policy(self, policy_id: str, reason: str) -> dict:
        """Cancel an active policy at the holder's request. Unearned premium is refunded pro
        rata: annual premium times the days from today to the paid-through date, over 365.

        Rules: the policy must be active and have no claims still being handled.

        Args:
            policy_id: Policy id, e.g. "P5001".
            reason: Cancellation reason (at least 5 characters).

        Returns:
            The refund due.
        """
        policy = self._find(self.policies, policy_id)
        if policy is None:
            return {"success": False, "error": f"Policy {policy_id} not found"}
        if not isinstance(reason, str) or len(reason.strip()) < 5:
            return {"success": False, "error": "reason must be at least 5 characters"}
        if policy["status"] != "active":
            return {"success": False, "error": f"Policy {policy_id} is {policy['status']}"}
        for claim_id, claim in self.claims.items():
            if claim["policy_id"] == policy_id and claim["status"] in self.OPEN_STATUSES:
                return {"success": False, "error": f"Claim {claim_id} is still {claim['status']} on this policy"}
        days = max(0, (_parse_date(policy["premium_paid_through"]) - self._today()).days)
        refund = round(policy["annual_premium"] * days / 365, 2)
        policy["status"] = "cancelled"
        policy["cancelled_on"] = self.business_date
        policy["cancellation_reason"] = reason.strip()
        policy["refund_due"] = refund
        return {"success": True, "message": f"Policy {policy_id} cancelled", "refund_due": refund}
