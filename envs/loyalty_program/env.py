"""Retail loyalty programme: members, tiers, point lots with expiry, partner earning, rewards and household transfers."""

import datetime
import math
import uuid
from typing import Optional


class LoyaltyProgram:
    """Coalition loyalty programme of a retail group and its travel partners.

    Points are kept in lots: every credit (purchase, adjustment, transfer, refund) creates a
    lot with its own expiry date, and every debit consumes the non-expired lots that expire
    first (FIFO by expiry). ``points_balance`` is the sum of the remaining points of a member's
    lots; points whose lot has expired stay in the balance until the expiry run removes them,
    but they can no longer be spent. Tiers are earned with qualifying spend and multiply the
    points earned per euro.
    """

    def __init__(self, init_config: dict):
        self.settings = {}
        self.tiers = {}
        self.members = {}
        self.point_lots = {}
        self.partners = {}
        self.rewards = {}
        self.redemptions = {}
        self.transactions = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    def _today(self) -> datetime.date:
        return datetime.date.fromisoformat(self.settings["business_date"])

    @staticmethod
    def _is_int(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def _member(self, member_id, must_be_active: bool = True):
        if not isinstance(member_id, str) or member_id not in self.members:
            return None, {"success": False, "error": f"Member {member_id} not found"}
        member = self.members[member_id]
        if must_be_active and member["status"] != "active":
            return None, {"success": False, "error": f"Member {member_id} is {member['status']}"}
        return member, None

    def _usable_lots(self, member_id: str) -> list:
        today = self.settings["business_date"]
        lots = [(lot["expires_on"], lid) for lid, lot in self.point_lots.items()
                if lot["member_id"] == member_id and lot["remaining"] > 0 and lot["expires_on"] >= today]
        return [lid for _, lid in sorted(lots)]

    def _usable_points(self, member_id: str) -> int:
        return sum(self.point_lots[lid]["remaining"] for lid in self._usable_lots(member_id))

    def _consume(self, member_id: str, points: int) -> None:
        for lid in self._usable_lots(member_id):
            if points <= 0:
                break
            lot = self.point_lots[lid]
            take = min(lot["remaining"], points)
            lot["remaining"] -= take
            points -= take

    def _new_lot(self, member_id: str, points: int, source: str, validity_days: int) -> str:
        number = self.counters["lot"] + 1
        lot_id = f"LOT-{number}"
        expires = (self._today() + datetime.timedelta(days=validity_days)).isoformat()
        self.point_lots[lot_id] = {"member_id": member_id, "points": points, "remaining": points, "source": source,
                                   "earned_on": self.settings["business_date"], "expires_on": expires, "expired": False}
        self.counters["lot"] = number
        return lot_id

    def _tx(self, member_id: str, tx_type: str, points: int, reference: str) -> str:
        number = self.counters["tx"] + 1
        tx_id = f"TX-{number}"
        self.transactions[tx_id] = {"member_id": member_id, "type": tx_type, "points": points,
                                    "date": self.settings["business_date"], "reference": reference}
        self.counters["tx"] = number
        return tx_id

    def _tier_for_spend(self, spend: float) -> str:
        best, best_rank = None, -1
        for name, tier in self.tiers.items():
            if spend >= tier["min_spend"] and tier["rank"] > best_rank:
                best, best_rank = name, tier["rank"]
        return best

    # ------------------------------------------------------------------ queries
    def get_member(self, member_id: str) -> dict:
        """Show a member: tier, status, balance, spendable points, lifetime points, qualifying spend,
        and the points that expire within the next 30 days.

        Args:
            member_id: Member id, e.g. "M-10001".
        """
        member, err = self._member(member_id, must_be_active=False)
        if err:
            return err
        horizon = (self._today() + datetime.timedelta(days=30)).isoformat()
        expiring = sum(self.point_lots[lid]["remaining"] for lid in self._usable_lots(member_id)
                       if self.point_lots[lid]["expires_on"] <= horizon)
        data = {"member_id": member_id}
        data.update(member)
        data["spendable_points"] = self._usable_points(member_id)
        data["expiring_within_30_days"] = expiring
        tier = self.tiers[member["tier"]]
        higher = sorted((t["min_spend"], n) for n, t in self.tiers.items() if t["rank"] == tier["rank"] + 1)
        if higher:
            data["next_tier"] = higher[0][1]
            data["spend_to_next_tier"] = round(max(0.0, higher[0][0] - member["qualifying_spend"]), 2)
        return {"success": True, "data": data}

    def list_rewards(self, member_id: Optional[str] = None) -> dict:
        """List active rewards in stock. With a member id, only rewards the member's tier unlocks,
        each flagged with whether the member can afford it now.

        Args:
            member_id: Optional member id to personalise the list.
        """
        member = None
        if member_id is not None:
            member, err = self._member(member_id, must_be_active=False)
            if err:
                return err
        rows = []
        for rid, r in sorted(self.rewards.items()):
            if not r["active"] or r["stock"] <= 0:
                continue
            row = {"reward_id": rid, "name": r["name"], "points_cost": r["points_cost"], "min_tier": r["min_tier"],
                   "partner_id": r["partner_id"], "stock": r["stock"]}
            if member is not None:
                if self.tiers[member["tier"]]["rank"] < self.tiers[r["min_tier"]]["rank"]:
                    continue
                row["affordable"] = self._usable_points(member_id) >= r["points_cost"]
            rows.append(row)
        return {"success": True, "data": rows}

    def get_points_history(self, member_id: str) -> dict:
        """List a member's point transactions, newest first.

        Args:
            member_id: Member id.
        """
        member, err = self._member(member_id, must_be_active=False)
        if err:
            return err
        rows = [{"tx_id": tid, "type": t["type"], "points": t["points"], "date": t["date"], "reference": t["reference"]}
                for tid, t in self.transactions.items() if t["member_id"] == member_id]
        rows.sort(key=lambda r: (r["date"], int(r["tx_id"].split("-")[1])), reverse=True)
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ membership
    def enroll_member(self, name: str, email: str) -> dict:
        """Enrol a new member in the base tier.

        Args:
            name: Full name (2-80 characters).
            email: Email address; must be unique in the programme.
        """
        if not isinstance(name, str) or not 2 <= len(name.strip()) <= 80:
            return {"success": False, "error": "name must be 2-80 characters"}
        if not isinstance(email, str) or email.count("@") != 1 or "." not in email.split("@")[1] or " " in email:
            return {"success": False, "error": f"Invalid email address {email}"}
        email = email.strip().lower()
        for mid, m in self.members.items():
            if m["email"].lower() == email:
                return {"success": False, "error": f"Email already registered to member {mid}"}
        base = min(self.tiers, key=lambda n: self.tiers[n]["rank"])
        number = self.counters["member"] + 1
        member_id = f"M-{number}"
        self.members[member_id] = {"name": name.strip(), "email": email, "tier": base, "status": "active",
                                   "points_balance": 0, "lifetime_points": 0, "qualifying_spend": 0.0,
                                   "household_id": None, "joined_on": self.settings["business_date"], "status_reason": None}
        self.counters["member"] = number
        return {"success": True, "message": f"Welcome to {self.settings['program_name']}, {name.strip()}", "member_id": member_id}

    def set_member_status(self, member_id: str, status: str, reason: str) -> dict:
        """Freeze a member account (e.g. suspected fraud) or reactivate a frozen one.

        Args:
            member_id: Member id.
            status: "frozen" or "active".
            reason: Why the status changes.
        Rules: frozen members cannot earn, redeem, transfer or receive points.
        """
        member, err = self._member(member_id, must_be_active=False)
        if err:
            return err
        if status not in ("active", "frozen"):
            return {"success": False, "error": "status must be active or frozen"}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "A reason is required"}
        if member["status"] == status:
            return {"success": False, "error": f"Member {member_id} is already {status}"}
        member["status"] = status
        member["status_reason"] = reason.strip()
        return {"success": True, "message": f"Member {member_id} is now {status}"}

    # ------------------------------------------------------------------ earning
    def record_purchase(self, member_id: str, amount: float, partner_id: Optional[str] = None) -> dict:
        """Credit points for a purchase in our stores or at a partner.

        Args:
            member_id: Active member id.
            amount: Purchase amount in EUR (> 0, at most settings.max_purchase_amount).
            partner_id: Optional active partner where the purchase was made (uses its earn rate).
        Rules: points = floor(amount x earn rate x tier multiplier), where the earn rate is the
        partner's or settings.base_points_per_eur. The purchase adds to qualifying spend and the
        member moves up to the highest tier whose min_spend is reached (never down). Points
        expire settings.points_validity_days after today.
        """
        member, err = self._member(member_id)
        if err:
            return err
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount <= 0:
            return {"success": False, "error": "amount must be a positive number"}
        if amount > self.settings["max_purchase_amount"]:
            return {"success": False, "error": f"Purchases above {self.settings['max_purchase_amount']:.2f} need manual review"}
        rate = self.settings["base_points_per_eur"]
        source = "purchase"
        if partner_id is not None:
            if not isinstance(partner_id, str) or partner_id not in self.partners:
                return {"success": False, "error": f"Partner {partner_id} not found"}
            partner = self.partners[partner_id]
            if not partner["active"]:
                return {"success": False, "error": f"Partner {partner['name']} no longer awards points"}
            rate = partner["earn_rate"]
            source = f"partner:{partner_id}"
        points = math.floor(amount * rate * self.tiers[member["tier"]]["earn_multiplier"] + 1e-9)
        if points < 1:
            return {"success": False, "error": "Purchase too small to earn points"}
        lot_id = self._new_lot(member_id, points, source, self.settings["points_validity_days"])
        self._tx(member_id, "earn", points, lot_id)
        member["points_balance"] += points
        member["lifetime_points"] += points
        member["qualifying_spend"] = round(member["qualifying_spend"] + amount, 2)
        result = {"success": True, "message": f"{points} points credited to {member_id}", "points": points}
        new_tier = self._tier_for_spend(member["qualifying_spend"])
        if self.tiers[new_tier]["rank"] > self.tiers[member["tier"]]["rank"]:
            member["tier"] = new_tier
            result["message"] += f"; upgraded to {new_tier}"
            result["new_tier"] = new_tier
        return result

    def adjust_points(self, member_id: str, points: int, reason: str) -> dict:
        """Manual goodwill credit (positive) or correction (negative) by customer service.

        Args:
            member_id: Active member id.
            points: Non-zero integer, absolute value at most settings.max_adjustment.
            reason: Why the adjustment is made.
        Rules: credits create a lot valid settings.points_validity_days (not counted as lifetime
        points); debits consume spendable points by earliest expiry and cannot exceed them.
        """
        member, err = self._member(member_id)
        if err:
            return err
        if not self._is_int(points) or points == 0:
            return {"success": False, "error": "points must be a non-zero integer"}
        if abs(points) > self.settings["max_adjustment"]:
            return {"success": False, "error": f"Adjustments are limited to {self.settings['max_adjustment']} points"}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "A reason is required"}
        if points > 0:
            lot_id = self._new_lot(member_id, points, "adjustment", self.settings["points_validity_days"])
            self._tx(member_id, "adjust", points, f"{lot_id}: {reason.strip()}")
        else:
            usable = self._usable_points(member_id)
            if -points > usable:
                return {"success": False, "error": f"Member has only {usable} spendable points"}
            self._consume(member_id, -points)
            self._tx(member_id, "adjust", points, reason.strip())
        member["points_balance"] += points
        return {"success": True, "message": f"Adjusted {member_id} by {points} points", "points_balance": member["points_balance"]}

    # ------------------------------------------------------------------ spending
    def redeem_reward(self, member_id: str, reward_id: str) -> dict:
        """Redeem a reward with points and issue a voucher code.

        Args:
            member_id: Active member id.
            reward_id: Active reward id in stock whose min_tier the member has reached.
        Rules: the cost is taken from spendable (non-expired) points, earliest-expiring lots first.
        """
        member, err = self._member(member_id)
        if err:
            return err
        if not isinstance(reward_id, str) or reward_id not in self.rewards:
            return {"success": False, "error": f"Reward {reward_id} not found"}
        reward = self.rewards[reward_id]
        if not reward["active"]:
            return {"success": False, "error": f"{reward['name']} is no longer offered"}
        if reward["stock"] <= 0:
            return {"success": False, "error": f"{reward['name']} is out of stock"}
        if self.tiers[member["tier"]]["rank"] < self.tiers[reward["min_tier"]]["rank"]:
            return {"success": False, "error": f"{reward['name']} requires {reward['min_tier']} tier"}
        usable = self._usable_points(member_id)
        cost = reward["points_cost"]
        if usable < cost:
            return {"success": False, "error": f"Not enough points: {cost} needed, {usable} spendable"}
        self._consume(member_id, cost)
        member["points_balance"] -= cost
        reward["stock"] -= 1
        number = self.counters["redemption"] + 1
        redemption_id = f"RD-{number}"
        code = "HR-" + uuid.uuid4().hex[:8].upper()
        self.redemptions[redemption_id] = {"member_id": member_id, "reward_id": reward_id, "points": cost, "status": "issued",
                                           "voucher_code": code, "redeemed_on": self.settings["business_date"]}
        self.counters["redemption"] = number
        self._tx(member_id, "redeem", -cost, redemption_id)
        return {"success": True, "message": f"{reward['name']} redeemed for {cost} points", "redemption_id": redemption_id}

    def cancel_redemption(self, redemption_id: str) -> dict:
        """Cancel an unused in-house reward and refund its points.

        Args:
            redemption_id: Issued redemption id.
        Rules: only within settings.cancellation_window_days of redemption and not for partner
        rewards (already transferred to the partner). Refunded points form a new lot valid
        settings.refund_validity_days; the reward goes back in stock.
        """
        if not isinstance(redemption_id, str) or redemption_id not in self.redemptions:
            return {"success": False, "error": f"Redemption {redemption_id} not found"}
        red = self.redemptions[redemption_id]
        if red["status"] != "issued":
            return {"success": False, "error": f"Redemption {redemption_id} is already {red['status']}"}
        reward = self.rewards[red["reward_id"]]
        if reward["partner_id"]:
            return {"success": False, "error": "Partner rewards cannot be cancelled once issued"}
        age = (self._today() - datetime.date.fromisoformat(red["redeemed_on"])).days
        window = self.settings["cancellation_window_days"]
        if age > window:
            return {"success": False, "error": f"Redemptions can only be cancelled within {window} days (this one is {age} days old)"}
        member = self.members[red["member_id"]]
        lot_id = self._new_lot(red["member_id"], red["points"], "refund", self.settings["refund_validity_days"])
        self._tx(red["member_id"], "reversal", red["points"], redemption_id)
        member["points_balance"] += red["points"]
        reward["stock"] += 1
        red["status"] = "cancelled"
        return {"success": True, "message": f"Redemption {redemption_id} cancelled; {red['points']} points refunded", "lot_id": lot_id}

    def transfer_points(self, from_member_id: str, to_member_id: str, points: int) -> dict:
        """Move points between two active members of the same household.

        Args:
            from_member_id: Sending member.
            to_member_id: Receiving member (different, same household_id).
            points: At least settings.min_transfer and a multiple of 100.
        Rules: the sender's spendable points are consumed earliest-expiry first; the receiver gets a
        new lot valid settings.points_validity_days. Transfers do not count as lifetime points.
        """
        sender, err = self._member(from_member_id)
        if err:
            return err
        receiver, err = self._member(to_member_id)
        if err:
            return err
        if from_member_id == to_member_id:
            return {"success": False, "error": "Cannot transfer points to the same member"}
        if not sender["household_id"] or sender["household_id"] != receiver["household_id"]:
            return {"success": False, "error": "Points can only be transferred within the same household"}
        minimum = self.settings["min_transfer"]
        if not self._is_int(points) or points < minimum:
            return {"success": False, "error": f"Transfers must be at least {minimum} points"}
        if points % 100:
            return {"success": False, "error": "Transfers must be in multiples of 100 points"}
        usable = self._usable_points(from_member_id)
        if points > usable:
            return {"success": False, "error": f"Sender has only {usable} spendable points"}
        self._consume(from_member_id, points)
        sender["points_balance"] -= points
        lot_id = self._new_lot(to_member_id, points, f"transfer:{from_member_id}", self.settings["points_validity_days"])
        receiver["points_balance"] += points
        self._tx(from_member_id, "transfer_out", -points, to_member_id)
        self._tx(to_member_id, "transfer_in", points, from_member_id)
        return {"success": True, "message": f"{points} points moved from {from_member_id} to {to_member_id}", "lot_id": lot_id}

    def expire_points(self) -> dict:
        """Nightly job: expire every lot whose expiry date is before the business date.

        Rules: each expired lot's remaining points are removed from the member's balance and one
        "expire" transaction per member is written.
        """
        today = self.settings["business_date"]
        per_member = {}
        lots = 0
        for lid in sorted(self.point_lots):
            lot = self.point_lots[lid]
            if lot["remaining"] > 0 and lot["expires_on"] < today and not lot["expired"]:
                per_member[lot["member_id"]] = per_member.get(lot["member_id"], 0) + lot["remaining"]
                lot["remaining"] = 0
                lot["expired"] = True
                lots += 1
        for member_id in sorted(per_member):
            self.members[member_id]["points_balance"] -= per_member[member_id]
            self._tx(member_id, "expire", -per_member[member_id], f"expiry run {today}")
        return {"success": True, "message": f"Expired {sum(per_member.values())} points in {lots} lots",
                "members": {m: per_member[m] for m in sorted(per_member)}}
