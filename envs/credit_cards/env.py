"""Credit card issuer processing: card accounts, authorizations and holds, settlement,
payments, disputes with provisional credit, credit-limit changes and monthly statement cycles.

Balances are amounts owed by the cardholder (positive = debt). Each card keeps its
open-to-buy as ``available_credit = credit_limit - posted_balance - pending_holds``. Dates follow
the issuer's business date held in the state; authorization timestamps and approval codes are
generated when the authorization is made.
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


def _add_month(day):
    month = day.month % 12 + 1
    year = day.year + (1 if day.month == 12 else 0)
    for dd in (day.day, 30, 29, 28):
        try:
            return datetime.date(year, month, min(day.day, dd))
        except ValueError:
            continue
    return datetime.date(year, month, 28)


class CreditCardIssuer:
    """Card issuing and processing desk of a consumer credit card issuer."""

    DISPUTE_WINDOW_DAYS = 120
    MIN_DISPUTE_AMOUNT = 10.0
    LATE_FEE = 25.0
    MIN_PAYMENT_FLOOR = 25.0
    MIN_PAYMENT_RATE = 0.01
    PAYMENT_GRACE_DAYS = 25
    LIMIT_CHANGE_COOLDOWN_DAYS = 180
    MAX_LIMIT_TO_INCOME = 0.4
    TIP_TOLERANCE = {"restaurant": 0.20}
    DISPUTE_REASONS = ("fraud", "not_received", "defective", "duplicate", "amount_differs")
    BLOCK_REASONS = ("lost", "stolen", "suspected_fraud", "customer_request")

    def __init__(self, init_config: dict):
        self.business_date = ""
        self.products = {}
        self.cardholders = {}
        self.merchants = {}
        self.cards = {}
        self.authorizations = {}
        self.transactions = {}
        self.disputes = {}
        self.statements = {}

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

    def _refresh_available(self, card):
        card["available_credit"] = round(card["credit_limit"] - card["posted_balance"] - card["pending_holds"], 2)

    def _book(self, card_id, kind, amount, **fields):
        """Post a signed amount (positive = charge) to the card and record the transaction."""
        card = self.cards[card_id]
        amount = round(float(amount), 2)
        card["posted_balance"] = round(card["posted_balance"] + amount, 2)
        self._refresh_available(card)
        txn_id = self._next_id(self.transactions, "TX")
        record = {"card_id": card_id, "type": kind, "amount": amount, "posted_date": self.business_date,
                  "merchant_id": None, "status": "posted", "dispute_id": None}
        record.update(fields)
        self.transactions[txn_id] = record
        return txn_id

    def _expired(self, card):
        year, month = (int(part) for part in card["expiry"].split("-"))
        today = self._today()
        return (year, month) < (today.year, today.month)

    # ------------------------------------------------------------------ queries

    def get_card(self, card_id: str) -> dict:
        """Show a card account: limit, posted balance, holds, open-to-buy, statement figures and status.

        Args:
            card_id: Card account id, e.g. "K4001".

        Returns:
            The card record with its id.
        """
        card = self._find(self.cards, card_id)
        if card is None:
            return {"success": False, "error": f"Card {card_id} not found"}
        return {"success": True, "data": copy.deepcopy(dict(card, card_id=card_id))}

    def get_cardholder(self, cardholder_id: str) -> dict:
        """Show a cardholder's profile, credit score and the cards they hold.

        Args:
            cardholder_id: Cardholder id, e.g. "CH101".

        Returns:
            The cardholder record with a short summary of each card.
        """
        holder = self._find(self.cardholders, cardholder_id)
        if holder is None:
            return {"success": False, "error": f"Cardholder {cardholder_id} not found"}
        cards = [{"card_id": cid, "product": self.cards[cid]["product"], "last4": self.cards[cid]["last4"],
                  "status": self.cards[cid]["status"]} for cid in holder["card_ids"] if cid in self.cards]
        return {"success": True, "data": copy.deepcopy(dict(holder, cardholder_id=cardholder_id, cards=cards))}

    def list_pending_authorizations(self, card_id: str) -> dict:
        """List the authorizations still holding credit on a card (status "pending").

        Args:
            card_id: Card account id, e.g. "K4001".

        Returns:
            Pending authorizations with merchant name and amount.
        """
        if self._find(self.cards, card_id) is None:
            return {"success": False, "error": f"Card {card_id} not found"}
        rows = []
        for auth_id, auth in sorted(self.authorizations.items()):
            if auth["card_id"] == card_id and auth["status"] == "pending":
                merchant = self.merchants.get(auth["merchant_id"], {})
                rows.append({"auth_id": auth_id, "merchant": merchant.get("name"), "amount": auth["amount"],
                             "auth_date": auth["auth_date"]})
        return {"success": True, "data": rows}

    def list_open_disputes(self) -> dict:
        """List all disputes that are still open, oldest first.

        Returns:
            Dispute id, card, transaction, reason and amount for each open dispute.
        """
        rows = [{"dispute_id": did, "card_id": d["card_id"], "transaction_id": d["transaction_id"],
                 "reason_code": d["reason_code"], "amount": d["amount"], "opened_on": d["opened_on"]}
                for did, d in self.disputes.items() if d["status"] == "open"]
        rows.sort(key=lambda r: (r["opened_on"], r["dispute_id"]))
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ authorization and settlement

    def authorize_purchase(self, card_id: str, merchant_id: str, amount: float) -> dict:
        """Authorize a purchase and place a hold on the card's open-to-buy.

        Rules: the card must be active and not past its expiry month; the merchant must exist
        and not be on the issuer's block list; the amount must not exceed the available credit.
        A 6-character approval code is generated for each authorization.

        Args:
            card_id: Card account id, e.g. "K4001".
            merchant_id: Merchant id, e.g. "M501".
            amount: Amount requested, positive with at most two decimals.

        Returns:
            The authorization id, approval code and remaining available credit.
        """
        if not _is_amount(amount):
            return {"success": False, "error": "amount must be a positive number with at most two decimals"}
        card = self._find(self.cards, card_id)
        if card is None:
            return {"success": False, "error": f"Card {card_id} not found"}
        if card["status"] != "active":
            return {"success": False, "error": f"Declined: card {card_id} is {card['status']}"}
        if self._expired(card):
            return {"success": False, "error": f"Declined: card {card_id} expired at the end of {card['expiry']}"}
        merchant = self._find(self.merchants, merchant_id)
        if merchant is None:
            return {"success": False, "error": f"Merchant {merchant_id} not found"}
        if merchant["blocked"]:
            return {"success": False, "error": f"Declined: merchant {merchant['name']} is on the block list"}
        if amount > card["available_credit"]:
            return {"success": False,
                    "error": f"Declined: insufficient credit ({card['available_credit']:.2f} available)"}
        auth_id = self._next_id(self.authorizations, "AU")
        code = uuid.uuid4().hex[:6].upper()
        self.authorizations[auth_id] = {
            "card_id": card_id, "merchant_id": merchant_id, "amount": float(amount), "status": "pending",
            "auth_code": code, "auth_date": self.business_date,
            "created_at": datetime.datetime.now().isoformat(timespec="seconds"),
            "settled_amount": None, "transaction_id": None, "closed_on": None,
        }
        card["pending_holds"] = round(card["pending_holds"] + amount, 2)
        self._refresh_available(card)
        return {"success": True, "message": f"Approved {amount:.2f} at {merchant['name']}", "auth_id": auth_id,
                "auth_code": code, "available_credit": card["available_credit"]}

    def reverse_authorization(self, auth_id: str) -> dict:
        """Cancel a pending authorization (merchant void) and release its hold.

        Args:
            auth_id: Authorization id, e.g. "AU9001".

        Returns:
            The card's available credit after the release.
        """
        auth = self._find(self.authorizations, auth_id)
        if auth is None:
            return {"success": False, "error": f"Authorization {auth_id} not found"}
        if auth["status"] != "pending":
            return {"success": False, "error": f"Authorization {auth_id} is already {auth['status']}"}
        card = self.cards[auth["card_id"]]
        auth["status"] = "reversed"
        auth["closed_on"] = self.business_date
        card["pending_holds"] = round(card["pending_holds"] - auth["amount"], 2)
        self._refresh_available(card)
        return {"success": True, "message": f"Authorization {auth_id} reversed",
                "available_credit": card["available_credit"]}

    def settle_authorization(self, auth_id: str, final_amount: float) -> dict:
        """Settle (capture) a pending authorization: release the hold and post the purchase.

        Rules: the authorization must be pending; the final amount may not exceed the authorized
        amount, except at restaurants where up to 20% more is accepted for the tip. Settlement is
        allowed even if the card was blocked after the authorization.

        Args:
            auth_id: Authorization id, e.g. "AU9001".
            final_amount: Amount captured by the merchant, positive with at most two decimals.

        Returns:
            The posted transaction id and the card's new balance.
        """
        auth = self._find(self.authorizations, auth_id)
        if auth is None:
            return {"success": False, "error": f"Authorization {auth_id} not found"}
        if not _is_amount(final_amount):
            return {"success": False, "error": "final_amount must be a positive number with at most two decimals"}
        if auth["status"] != "pending":
            return {"success": False, "error": f"Authorization {auth_id} is {auth['status']}"}
        merchant = self.merchants[auth["merchant_id"]]
        tolerance = self.TIP_TOLERANCE.get(merchant["category"], 0.0)
        ceiling = round(auth["amount"] * (1 + tolerance), 2)
        if final_amount > ceiling:
            return {"success": False,
                    "error": f"Final amount {final_amount:.2f} exceeds the allowed {ceiling:.2f} for this authorization"}
        card = self.cards[auth["card_id"]]
        card["pending_holds"] = round(card["pending_holds"] - auth["amount"], 2)
        txn_id = self._book(auth["card_id"], "purchase", final_amount, merchant_id=auth["merchant_id"])
        auth["status"] = "settled"
        auth["settled_amount"] = float(final_amount)
        auth["transaction_id"] = txn_id
        auth["closed_on"] = self.business_date
        return {"success": True, "message": f"Authorization {auth_id} settled for {final_amount:.2f}",
                "transaction_id": txn_id, "posted_balance": card["posted_balance"],
                "available_credit": card["available_credit"]}

    # ------------------------------------------------------------------ payments and limits

    def post_payment(self, card_id: str, amount: float) -> dict:
        """Apply a cardholder payment to the card balance.

        Rules: the card must not be closed; the payment must be positive and may not exceed the
        posted balance. Payments count towards the statement balance and reduce the minimum still due.

        Args:
            card_id: Card account id, e.g. "K4001".
            amount: Payment amount, positive with at most two decimals.

        Returns:
            New balance, available credit and remaining minimum due.
        """
        card = self._find(self.cards, card_id)
        if card is None:
            return {"success": False, "error": f"Card {card_id} not found"}
        if not _is_amount(amount):
            return {"success": False, "error": "amount must be a positive number with at most two decimals"}
        if card["status"] == "closed":
            return {"success": False, "error": f"Card {card_id} is closed"}
        if amount > card["posted_balance"]:
            return {"success": False,
                    "error": f"Payment {amount:.2f} exceeds the posted balance of {card['posted_balance']:.2f}"}
        txn_id = self._book(card_id, "payment", -amount)
        card["paid_since_statement"] = round(card["paid_since_statement"] + amount, 2)
        if card["minimum_due"] > 0:
            card["minimum_due"] = round(max(0.0, card["minimum_due"] - amount), 2)
        return {"success": True, "message": f"Payment of {amount:.2f} applied to {card_id}", "transaction_id": txn_id,
                "posted_balance": card["posted_balance"], "available_credit": card["available_credit"],
                "minimum_due": card["minimum_due"]}

    def change_credit_limit(self, card_id: str, new_limit: float) -> dict:
        """Raise or lower the credit limit of an active card.

        Rules: increases need a credit score at or above the product's threshold, must stay within
        the product maximum and 40% of the cardholder's annual income, and are allowed only 180
        days after the previous limit change. A decrease may not go below balance plus holds.

        Args:
            card_id: Card account id, e.g. "K4001".
            new_limit: New credit limit, a positive whole number of currency units.

        Returns:
            Old and new limit and the new available credit.
        """
        card = self._find(self.cards, card_id)
        if card is None:
            return {"success": False, "error": f"Card {card_id} not found"}
        if isinstance(new_limit, bool) or not isinstance(new_limit, (int, float)) \
                or not math.isfinite(new_limit) or new_limit <= 0 or new_limit != int(new_limit):
            return {"success": False, "error": "new_limit must be a positive whole amount"}
        if card["status"] != "active":
            return {"success": False, "error": f"Card {card_id} is {card['status']}"}
        old = card["credit_limit"]
        if new_limit == old:
            return {"success": False, "error": f"Credit limit is already {old:.2f}"}
        product = self.products[card["product"]]
        holder = self.cardholders[card["cardholder_id"]]
        if new_limit > old:
            if holder["credit_score"] < product["min_score_for_increase"]:
                return {"success": False, "error": f"Credit score {holder['credit_score']} is below the "
                                                   f"{product['min_score_for_increase']} needed for an increase"}
            if new_limit > product["max_credit_limit"]:
                return {"success": False,
                        "error": f"{product['name']} allows at most {product['max_credit_limit']:.2f}"}
            if new_limit > holder["annual_income"] * self.MAX_LIMIT_TO_INCOME:
                return {"success": False, "error": "Limit would exceed 40% of the cardholder's annual income"}
            last = _parse_date(card["limit_changed_on"])
            if last is not None and (self._today() - last).days < self.LIMIT_CHANGE_COOLDOWN_DAYS:
                return {"success": False, "error": f"Limit was changed on {card['limit_changed_on']}; "
                                                   f"increases need {self.LIMIT_CHANGE_COOLDOWN_DAYS} days between changes"}
        else:
            used = round(card["posted_balance"] + card["pending_holds"], 2)
            if new_limit < used:
                return {"success": False, "error": f"New limit is below the balance plus holds of {used:.2f}"}
        card["credit_limit"] = float(new_limit)
        card["limit_changed_on"] = self.business_date
        self._refresh_available(card)
        return {"success": True, "message": f"Credit limit of {card_id} changed", "old_limit": old,
                "new_limit": float(new_limit), "available_credit": card["available_credit"]}

    def block_card(self, card_id: str, reason: str) -> dict:
        """Block an active card. Lost or stolen cards get status "lost", other reasons "blocked".
        Pending authorizations stay and may still settle.

        Args:
            card_id: Card account id, e.g. "K4001".
            reason: One of "lost", "stolen", "suspected_fraud", "customer_request".

        Returns:
            The new card status.
        """
        card = self._find(self.cards, card_id)
        if card is None:
            return {"success": False, "error": f"Card {card_id} not found"}
        if reason not in self.BLOCK_REASONS:
            return {"success": False, "error": f"reason must be one of {', '.join(self.BLOCK_REASONS)}"}
        if card["status"] != "active":
            return {"success": False, "error": f"Card {card_id} is already {card['status']}"}
        card["status"] = "lost" if reason in ("lost", "stolen") else "blocked"
        card["block_reason"] = reason
        card["blocked_on"] = self.business_date
        return {"success": True, "message": f"Card {card_id} is now {card['status']}", "status": card["status"]}

    # ------------------------------------------------------------------ disputes

    def open_dispute(self, transaction_id: str, reason_code: str) -> dict:
        """Open a chargeback dispute on a posted purchase and grant provisional credit for the
        full amount. A "fraud" dispute also blocks the card.

        Rules: only purchases can be disputed, once, within 120 days of posting, for at least
        10.00, and not on a closed card.

        Args:
            transaction_id: Purchase transaction id, e.g. "TX70012".
            reason_code: One of "fraud", "not_received", "defective", "duplicate", "amount_differs".

        Returns:
            The dispute id and the provisional credit transaction id.
        """
        txn = self._find(self.transactions, transaction_id)
        if txn is None:
            return {"success": False, "error": f"Transaction {transaction_id} not found"}
        if reason_code not in self.DISPUTE_REASONS:
            return {"success": False, "error": f"reason_code must be one of {', '.join(self.DISPUTE_REASONS)}"}
        if txn["type"] != "purchase":
            return {"success": False, "error": f"Only purchases can be disputed; {transaction_id} is a {txn['type']}"}
        if txn["dispute_id"] is not None:
            return {"success": False,
                    "error": f"Transaction {transaction_id} is already under dispute {txn['dispute_id']}"}
        age = (self._today() - _parse_date(txn["posted_date"])).days
        if age > self.DISPUTE_WINDOW_DAYS:
            return {"success": False,
                    "error": f"Dispute window closed: posted {age} days ago (limit {self.DISPUTE_WINDOW_DAYS})"}
        if txn["amount"] < self.MIN_DISPUTE_AMOUNT:
            return {"success": False, "error": f"Purchases under {self.MIN_DISPUTE_AMOUNT:.2f} cannot be disputed"}
        card = self.cards[txn["card_id"]]
        if card["status"] == "closed":
            return {"success": False, "error": f"Card {txn['card_id']} is closed"}
        dispute_id = self._next_id(self.disputes, "DP")
        credit_id = self._book(txn["card_id"], "provisional_credit", -txn["amount"], merchant_id=txn["merchant_id"],
                               dispute_id=dispute_id)
        self.disputes[dispute_id] = {
            "transaction_id": transaction_id, "card_id": txn["card_id"], "reason_code": reason_code,
            "amount": txn["amount"], "status": "open", "opened_on": self.business_date, "resolved_on": None,
            "provisional_credit_txn": credit_id,
        }
        txn["dispute_id"] = dispute_id
        txn["status"] = "disputed"
        card["open_disputes"] += 1
        if reason_code == "fraud" and card["status"] == "active":
            card["status"] = "blocked"
            card["block_reason"] = "suspected_fraud"
            card["blocked_on"] = self.business_date
        return {"success": True, "message": f"Dispute {dispute_id} opened", "dispute_id": dispute_id,
                "provisional_credit_transaction_id": credit_id, "card_status": card["status"]}

    def resolve_dispute(self, dispute_id: str, outcome: str) -> dict:
        """Close an open dispute. "won": the chargeback stands and the provisional credit becomes
        final. "lost": the provisional credit is reversed and the amount is charged again.

        Args:
            dispute_id: Dispute id, e.g. "DP301".
            outcome: "won" or "lost".

        Returns:
            The outcome and the card's balance.
        """
        dispute = self._find(self.disputes, dispute_id)
        if dispute is None:
            return {"success": False, "error": f"Dispute {dispute_id} not found"}
        if outcome not in ("won", "lost"):
            return {"success": False, "error": "outcome must be 'won' or 'lost'"}
        if dispute["status"] != "open":
            return {"success": False, "error": f"Dispute {dispute_id} is already {dispute['status']}"}
        card = self.cards[dispute["card_id"]]
        txn = self.transactions[dispute["transaction_id"]]
        dispute["status"] = outcome
        dispute["resolved_on"] = self.business_date
        card["open_disputes"] -= 1
        if outcome == "won":
            txn["status"] = "charged_back"
        else:
            txn["status"] = "posted"
            self._book(dispute["card_id"], "credit_reversal", dispute["amount"], merchant_id=txn["merchant_id"],
                       dispute_id=dispute_id)
        return {"success": True, "message": f"Dispute {dispute_id} {outcome}", "posted_balance": card["posted_balance"],
                "available_credit": card["available_credit"]}

    # ------------------------------------------------------------------ statement cycle

    def close_statement_cycle(self, card_id: str) -> dict:
        """Close the card's monthly billing cycle and issue the statement.

        The cycle runs from the day after the previous statement to the same day one month later
        and can be closed once that day has been reached; transactions posted after the cycle end
        belong to the next statement. Before the statement is cut: interest
        at APR/12 is charged on any part of the previous statement balance not paid since; a late
        fee of 25.00 is charged if the payments received by the previous statement's due date
        were less than its minimum payment. The new
        minimum due is 1% of the new balance plus the interest and fees, at least 25.00 and never
        more than the balance; payment is due 25 days after the cycle end.

        Args:
            card_id: Card account id, e.g. "K4001".

        Returns:
            The statement id and its figures.
        """
        card = self._find(self.cards, card_id)
        if card is None:
            return {"success": False, "error": f"Card {card_id} not found"}
        if card["status"] == "closed":
            return {"success": False, "error": f"Card {card_id} is closed"}
        last = _parse_date(card["last_statement_date"])
        period_end = _add_month(last)
        if period_end > self._today():
            return {"success": False, "error": f"The current cycle of {card_id} ends on {period_end.isoformat()}"}
        interest = 0.0
        unpaid = round(card["statement_balance"] - card["paid_since_statement"], 2)
        if unpaid > 0:
            interest = round(unpaid * self.products[card["product"]]["apr"] / 100 / 12, 2)
        late_fee = 0.0
        due = _parse_date(card["payment_due_date"])
        previous = next((st for st in self.statements.values() if st["card_id"] == card_id
                         and st["period_end"] == card["last_statement_date"]), None)
        if previous is not None and previous["minimum_due"] > 0 and due is not None and due <= period_end:
            paid_by_due = -sum(txn["amount"] for txn in self.transactions.values()
                               if txn["card_id"] == card_id and txn["type"] == "payment"
                               and last < _parse_date(txn["posted_date"]) <= due)
            if paid_by_due < previous["minimum_due"]:
                late_fee = self.LATE_FEE
        if interest > 0:
            self._book(card_id, "interest", interest, posted_date=period_end.isoformat())
        if late_fee > 0:
            self._book(card_id, "late_fee", late_fee, posted_date=period_end.isoformat())
        purchases = credits = in_cycle = paid_after = 0.0
        for txn in self.transactions.values():
            if txn["card_id"] != card_id:
                continue
            posted = _parse_date(txn["posted_date"])
            if posted <= last:
                continue
            if posted > period_end:
                if txn["type"] == "payment":
                    paid_after -= txn["amount"]
                continue
            in_cycle += txn["amount"]
            if txn["type"] in ("interest", "late_fee"):
                continue
            if txn["amount"] >= 0:
                purchases += txn["amount"]
            else:
                credits -= txn["amount"]
        new_balance = round(card["statement_balance"] + in_cycle, 2)
        if new_balance <= 0:
            minimum = 0.0
        else:
            minimum = max(self.MIN_PAYMENT_FLOOR, round(new_balance * self.MIN_PAYMENT_RATE + interest + late_fee, 2))
            minimum = round(min(minimum, new_balance), 2)
        due_date = (period_end + datetime.timedelta(days=self.PAYMENT_GRACE_DAYS)).isoformat()
        statement_id = self._next_id(self.statements, "SM")
        statement = {
            "card_id": card_id, "period_start": (last + datetime.timedelta(days=1)).isoformat(),
            "period_end": period_end.isoformat(), "previous_balance": card["statement_balance"],
            "purchases": round(purchases, 2), "payments_and_credits": round(credits, 2),
            "interest": interest, "fees": late_fee, "new_balance": new_balance, "minimum_due": minimum,
            "due_date": due_date,
        }
        self.statements[statement_id] = statement
        card["statement_balance"] = new_balance
        card["minimum_due"] = round(max(0.0, minimum - paid_after), 2)
        card["payment_due_date"] = due_date
        card["paid_since_statement"] = round(paid_after, 2)
        card["last_statement_date"] = period_end.isoformat()
        return {"success": True, "message": f"Statement {statement_id} issued for {card_id}",
                "statement_id": statement_id, "statement": copy.deepcopy(statement)}
