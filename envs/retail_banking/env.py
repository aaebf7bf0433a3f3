"""Retail banking core: customers, current and savings accounts, transfers, standing orders
and statements for a small European retail bank.

All money is in the account currency with two decimals. The bank works on a business date held
in the state (``business_date``); transfers are stamped with a wall-clock posting time and an
end-to-end reference generated at call time.
"""

import copy
import datetime
import math
import uuid


def _parse_date(value):
    """ISO date string -> date, or None when the value is not a valid date."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        return None


def _is_amount(value):
    """A positive, finite number with at most two decimals."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if not math.isfinite(value) or value <= 0:
        return False
    return round(value, 2) == value


def _add_months(day, months):
    """Same day-of-month `months` later, clamped to the month's last day."""
    month_index = day.month - 1 + months
    year = day.year + month_index // 12
    month = month_index % 12 + 1
    for candidate in (day.day, 30, 29, 28):
        try:
            return datetime.date(year, month, min(day.day, candidate))
        except ValueError:
            continue
    return datetime.date(year, month, 28)


class RetailBanking:
    """Core banking operations for tellers and the customer-service desk."""

    MAX_CASH_DEPOSIT = 10000.0
    MAX_REFERENCE_LENGTH = 140

    def __init__(self, init_config: dict):
        self.business_date = ""
        self.bank_ledger = {}
        self.products = {}
        self.customers = {}
        self.accounts = {}
        self.transactions = {}
        self.standing_orders = {}
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

    def _post(self, account_id, kind, amount, counterparty, description, extra=None):
        """Apply a signed amount to an account and book the matching transaction."""
        account = self.accounts[account_id]
        amount = round(float(amount), 2)
        account["balance"] = round(account["balance"] + amount, 2)
        txn_id = self._next_id(self.transactions, "T")
        record = {
            "account_id": account_id,
            "date": self.business_date,
            "type": kind,
            "amount": amount,
            "balance_after": account["balance"],
            "counterparty": counterparty,
            "description": description,
        }
        if extra:
            record.update(extra)
        self.transactions[txn_id] = record
        return txn_id

    def _usable_account(self, account_id, role):
        account = self._find(self.accounts, account_id)
        if account is None:
            return None, f"{role} account {account_id} not found"
        if account["status"] == "closed":
            return None, f"{role} account {account_id} is closed"
        if account["status"] == "frozen":
            return None, f"{role} account {account_id} is frozen"
        return account, None

    def _customer_can_transact(self, customer_id):
        customer = self._find(self.customers, customer_id)
        if customer is None:
            return f"Customer {customer_id} not found"
        if customer["status"] != "active":
            return f"Customer {customer_id} is {customer['status']} and cannot send payments"
        if customer["kyc_status"] != "verified":
            return f"Customer {customer_id} has KYC status '{customer['kyc_status']}'; outgoing payments need verified KYC"
        return None

    # ------------------------------------------------------------------ queries

    def get_customer(self, customer_id: str) -> dict:
        """Look up a customer profile together with a summary of each of their accounts.

        Args:
            customer_id: Customer id, e.g. "C1001".

        Returns:
            The customer record plus an `accounts` list (id, product, balance, status).
        """
        customer = self._find(self.customers, customer_id)
        if customer is None:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        summary = []
        for account_id in customer["account_ids"]:
            account = self._find(self.accounts, account_id)
            if account is not None:
                summary.append({"account_id": account_id, "product": account["product"],
                                "balance": account["balance"], "status": account["status"]})
        data = dict(customer)
        data["customer_id"] = customer_id
        data["accounts"] = summary
        return {"success": True, "data": copy.deepcopy(data)}

    def get_account(self, account_id: str) -> dict:
        """Show an account with its available funds (balance plus arranged overdraft) and the
        remaining daily transfer allowance.

        Args:
            account_id: Account id, e.g. "A3001".

        Returns:
            The account record plus `available_funds` and `daily_allowance_left`.
        """
        account = self._find(self.accounts, account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        product = self.products[account["product"]]
        data = dict(account)
        data["account_id"] = account_id
        data["available_funds"] = round(account["balance"] + account["overdraft_limit"], 2)
        data["daily_allowance_left"] = round(product["daily_transfer_limit"] - account["transferred_today"], 2)
        return {"success": True, "data": copy.deepcopy(data)}

    def get_transaction_history(self, account_id: str, limit: int = 10) -> dict:
        """List the most recent transactions of an account, newest first.

        Args:
            account_id: Account id, e.g. "A3001".
            limit: How many transactions to return, 1 to 100 (default 10).

        Returns:
            A list of transactions with their ids.
        """
        if self._find(self.accounts, account_id) is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
            return {"success": False, "error": "limit must be an integer between 1 and 100"}
        rows = [dict(txn, transaction_id=txn_id) for txn_id, txn in self.transactions.items()
                if txn["account_id"] == account_id]
        rows.sort(key=lambda r: (r["date"], int(r["transaction_id"][1:])), reverse=True)
        return {"success": True, "data": rows[:limit]}

    def list_overdrawn_accounts(self) -> dict:
        """List every open or frozen account with a negative balance, most overdrawn first.

        Returns:
            Account id, customer, balance, arranged overdraft and remaining headroom for each.
        """
        rows = []
        for account_id, account in self.accounts.items():
            if account["status"] != "closed" and account["balance"] < 0:
                rows.append({"account_id": account_id, "customer_id": account["customer_id"],
                             "balance": account["balance"], "overdraft_limit": account["overdraft_limit"],
                             "headroom": round(account["overdraft_limit"] + account["balance"], 2)})
        rows.sort(key=lambda r: (r["balance"], r["account_id"]))
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ customer and account admin

    def update_customer_contact(self, customer_id: str, email: str | None = None,
                                phone: str | None = None, address: str | None = None) -> dict:
        """Change a customer's contact details. Only the fields given are changed.

        Args:
            customer_id: Customer id, e.g. "C1001".
            email: New e-mail address; must contain a single "@" and a dot in the domain.
            phone: New phone number in international format, starting with "+" (8 to 15 digits).
            address: New postal address, at least 10 characters.

        Returns:
            The list of fields that changed.
        """
        customer = self._find(self.customers, customer_id)
        if customer is None:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        if email is None and phone is None and address is None:
            return {"success": False, "error": "Provide at least one of email, phone or address"}
        updates = {}
        if email is not None:
            if not isinstance(email, str) or email.count("@") != 1 or "." not in email.split("@")[1] \
                    or email.startswith("@"):
                return {"success": False, "error": f"Invalid e-mail address: {email!r}"}
            updates["email"] = email.strip().lower()
        if phone is not None:
            digits = phone[1:].replace(" ", "") if isinstance(phone, str) else ""
            if not isinstance(phone, str) or not phone.startswith("+") or not digits.isdigit() \
                    or not 8 <= len(digits) <= 15:
                return {"success": False, "error": f"Invalid phone number: {phone!r}"}
            updates["phone"] = phone
        if address is not None:
            if not isinstance(address, str) or len(address.strip()) < 10:
                return {"success": False, "error": "Address must be at least 10 characters"}
            updates["address"] = address.strip()
        changed = [field for field, value in updates.items() if customer.get(field) != value]
        if not changed:
            return {"success": False, "error": "The new contact details are identical to the current ones"}
        for field in changed:
            customer[field] = updates[field]
        return {"success": True, "message": f"Updated contact details of {customer_id}", "changed": changed}

    def set_overdraft_limit(self, account_id: str, new_limit: float) -> dict:
        """Set the arranged overdraft of a current account.

        Rules: the product must offer an overdraft and the limit may not exceed the product
        maximum; the customer must be KYC-verified; the account must be open; an overdrawn
        account cannot get a limit smaller than what it currently owes.

        Args:
            account_id: Account id, e.g. "A3001".
            new_limit: New arranged overdraft in account currency (0 removes it).

        Returns:
            The old and new limit.
        """
        account = self._find(self.accounts, account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        if isinstance(new_limit, bool) or not isinstance(new_limit, (int, float)) or new_limit < 0 \
                or round(new_limit, 2) != new_limit:
            return {"success": False, "error": "new_limit must be a non-negative amount with at most two decimals"}
        if account["status"] != "open":
            return {"success": False, "error": f"Account {account_id} is {account['status']}"}
        product = self.products[account["product"]]
        if not product["overdraft_allowed"]:
            return {"success": False, "error": f"Product '{product['name']}' does not offer an overdraft"}
        if new_limit > product["max_overdraft"]:
            return {"success": False,
                    "error": f"Limit {new_limit:.2f} exceeds the product maximum of {product['max_overdraft']:.2f}"}
        customer = self.customers[account["customer_id"]]
        if customer["kyc_status"] != "verified":
            return {"success": False, "error": f"Customer {account['customer_id']} is not KYC-verified"}
        if account["balance"] < 0 and new_limit < -account["balance"]:
            return {"success": False,
                    "error": f"Account is overdrawn by {-account['balance']:.2f}; the limit cannot be set below that"}
        old = account["overdraft_limit"]
        if old == new_limit:
            return {"success": False, "error": f"Overdraft limit is already {old:.2f}"}
        account["overdraft_limit"] = float(new_limit)
        return {"success": True, "message": f"Overdraft limit of {account_id} changed",
                "old_limit": old, "new_limit": float(new_limit)}

    def freeze_account(self, account_id: str, reason: str) -> dict:
        """Freeze an open account (suspected fraud, lost card, legal order). A frozen account can
        neither send nor receive payments until it is unfrozen by back office.

        Args:
            account_id: Account id, e.g. "A3001".
            reason: Why the account is frozen (at least 5 characters).

        Returns:
            Confirmation message.
        """
        account = self._find(self.accounts, account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        if not isinstance(reason, str) or len(reason.strip()) < 5:
            return {"success": False, "error": "A freeze reason of at least 5 characters is required"}
        if account["status"] != "open":
            return {"success": False, "error": f"Only open accounts can be frozen; {account_id} is {account['status']}"}
        account["status"] = "frozen"
        account["freeze_reason"] = reason.strip()
        return {"success": True, "message": f"Account {account_id} frozen"}

    # ------------------------------------------------------------------ money movement

    def deposit_cash(self, account_id: str, amount: float) -> dict:
        """Pay cash into an account at a branch counter.

        Rules: the account must be open; a single deposit may not exceed 10,000.00 (larger
        amounts go through the compliance desk). The cash is added to the teller's drawer.

        Args:
            account_id: Account id, e.g. "A3001".
            amount: Cash amount, positive with at most two decimals.

        Returns:
            The new balance and the transaction id.
        """
        if not _is_amount(amount):
            return {"success": False, "error": "amount must be a positive number with at most two decimals"}
        account, error = self._usable_account(account_id, "Destination")
        if error:
            return {"success": False, "error": error}
        if amount > self.MAX_CASH_DEPOSIT:
            return {"success": False,
                    "error": f"Cash deposits above {self.MAX_CASH_DEPOSIT:.2f} must be handled by the compliance desk"}
        txn_id = self._post(account_id, "cash_deposit", amount, None, "Cash deposit at branch")
        self.bank_ledger["teller_cash"] = round(self.bank_ledger["teller_cash"] + float(amount), 2)
        return {"success": True, "message": f"Deposited {amount:.2f} {account['currency']} into {account_id}",
                "transaction_id": txn_id, "new_balance": account["balance"]}

    def transfer_funds(self, from_account_id: str, to_account_id: str, amount: float,
                       reference: str = "") -> dict:
        """Transfer money from one account to another account at the bank.

        Rules: both accounts open (not frozen or closed) and in the same currency; the sender
        must be an active, KYC-verified customer; amount plus fee must fit within balance plus
        arranged overdraft. Transfers to another customer count against the product's daily
        transfer limit and cost the product's transfer fee, booked as bank fee income.
        Savings accounts may only pay the same customer's accounts and allow a limited number
        of withdrawals per month. Each transfer gets a generated end-to-end id.

        Args:
            from_account_id: Account debited, e.g. "A3001".
            to_account_id: Account credited, e.g. "A3002".
            amount: Amount to send, positive with at most two decimals.
            reference: Payment reference shown to both parties (max 140 characters).

        Returns:
            Transaction ids, fee charged, sender's new balance and the end-to-end id.
        """
        if not _is_amount(amount):
            return {"success": False, "error": "amount must be a positive number with at most two decimals"}
        if not isinstance(reference, str) or len(reference) > self.MAX_REFERENCE_LENGTH:
            return {"success": False, "error": "reference must be a string of at most 140 characters"}
        if from_account_id == to_account_id:
            return {"success": False, "error": "Cannot transfer to the same account"}
        source, error = self._usable_account(from_account_id, "Source")
        if error:
            return {"success": False, "error": error}
        target, error = self._usable_account(to_account_id, "Destination")
        if error:
            return {"success": False, "error": error}
        error = self._customer_can_transact(source["customer_id"])
        if error:
            return {"success": False, "error": error}
        if source["currency"] != target["currency"]:
            return {"success": False, "error": f"Currency mismatch: {source['currency']} to {target['currency']}"}
        product = self.products[source["product"]]
        own_transfer = source["customer_id"] == target["customer_id"]
        if product["type"] == "savings":
            if not own_transfer:
                return {"success": False, "error": "Savings accounts can only transfer to the holder's own accounts"}
            limit = product["monthly_withdrawal_limit"]
            if limit is not None and source["withdrawals_this_month"] >= limit:
                return {"success": False, "error": f"Monthly withdrawal limit of {limit} reached for {from_account_id}"}
        fee = 0.0 if own_transfer else product["transfer_fee"]
        if not own_transfer and source["transferred_today"] + amount > product["daily_transfer_limit"]:
            left = round(product["daily_transfer_limit"] - source["transferred_today"], 2)
            return {"success": False, "error": f"Daily transfer limit exceeded; {left:.2f} left today"}
        available = round(source["balance"] + source["overdraft_limit"], 2)
        if amount + fee > available:
            return {"success": False,
                    "error": f"Insufficient funds: {amount + fee:.2f} needed, {available:.2f} available"}
        end_to_end = uuid.uuid4().hex[:16].upper()
        posted_at = datetime.datetime.now().isoformat(timespec="seconds")
        extra = {"end_to_end_id": end_to_end, "posted_at": posted_at, "reference": reference}
        debit_id = self._post(from_account_id, "transfer_out", -amount, to_account_id,
                              f"Transfer to {to_account_id}", extra)
        credit_id = self._post(to_account_id, "transfer_in", amount, from_account_id,
                               f"Transfer from {from_account_id}", extra)
        fee_id = None
        if fee > 0:
            fee_id = self._post(from_account_id, "fee", -fee, None, "Transfer fee",
                                {"related_transaction": debit_id})
            self.bank_ledger["fee_income"] = round(self.bank_ledger["fee_income"] + fee, 2)
        if not own_transfer:
            source["transferred_today"] = round(source["transferred_today"] + amount, 2)
        if product["type"] == "savings":
            source["withdrawals_this_month"] += 1
        return {"success": True,
                "message": f"Transferred {amount:.2f} {source['currency']} from {from_account_id} to {to_account_id}",
                "debit_transaction_id": debit_id, "credit_transaction_id": credit_id,
                "fee_transaction_id": fee_id, "fee": fee, "new_balance": source["balance"],
                "end_to_end_id": end_to_end}

    # ------------------------------------------------------------------ standing orders

    def create_standing_order(self, from_account_id: str, to_account_id: str, amount: float,
                              frequency: str, first_execution_date: str, reference: str,
                              end_date: str | None = None) -> dict:
        """Set up a recurring payment from a current account.

        Rules: only current accounts (not savings) can pay standing orders; the source must be
        open and its holder KYC-verified; the destination must exist and not be closed; the
        first execution may not be before the business date; frequency is "weekly" or
        "monthly"; an identical active order (same accounts, amount and frequency) is refused.

        Args:
            from_account_id: Paying current account, e.g. "A3001".
            to_account_id: Receiving account, e.g. "A3002".
            amount: Amount per execution, positive with at most two decimals.
            frequency: "weekly" or "monthly".
            first_execution_date: ISO date of the first payment, e.g. "2024-04-01".
            reference: Payment reference (1 to 140 characters).
            end_date: Optional ISO date after which no more payments are made.

        Returns:
            The new standing order id.
        """
        if not _is_amount(amount):
            return {"success": False, "error": "amount must be a positive number with at most two decimals"}
        if frequency not in ("weekly", "monthly"):
            return {"success": False, "error": "frequency must be 'weekly' or 'monthly'"}
        if not isinstance(reference, str) or not 1 <= len(reference.strip()) <= self.MAX_REFERENCE_LENGTH:
            return {"success": False, "error": "reference must be 1 to 140 characters"}
        first = _parse_date(first_execution_date)
        if first is None:
            return {"success": False, "error": f"Invalid first_execution_date: {first_execution_date!r}"}
        if first < self._today():
            return {"success": False, "error": "first_execution_date cannot be before the business date"}
        if end_date is not None:
            last = _parse_date(end_date)
            if last is None:
                return {"success": False, "error": f"Invalid end_date: {end_date!r}"}
            if last < first:
                return {"success": False, "error": "end_date cannot be before first_execution_date"}
        if from_account_id == to_account_id:
            return {"success": False, "error": "Source and destination must differ"}
        source, error = self._usable_account(from_account_id, "Source")
        if error:
            return {"success": False, "error": error}
        if self.products[source["product"]]["type"] != "current":
            return {"success": False, "error": "Standing orders can only be paid from current accounts"}
        error = self._customer_can_transact(source["customer_id"])
        if error:
            return {"success": False, "error": error}
        target = self._find(self.accounts, to_account_id)
        if target is None:
            return {"success": False, "error": f"Destination account {to_account_id} not found"}
        if target["status"] == "closed":
            return {"success": False, "error": f"Destination account {to_account_id} is closed"}
        for so_id, order in self.standing_orders.items():
            if order["status"] == "active" and order["from_account_id"] == from_account_id \
                    and order["to_account_id"] == to_account_id and order["amount"] == amount \
                    and order["frequency"] == frequency:
                return {"success": False, "error": f"An identical active standing order already exists ({so_id})"}
        so_id = self._next_id(self.standing_orders, "SO")
        self.standing_orders[so_id] = {
            "from_account_id": from_account_id,
            "to_account_id": to_account_id,
            "amount": float(amount),
            "frequency": frequency,
            "next_execution_date": first.isoformat(),
            "end_date": end_date,
            "reference": reference.strip(),
            "status": "active",
            "executions": 0,
            "last_executed_on": None,
            "created_on": self.business_date,
            "cancelled_on": None,
        }
        return {"success": True, "message": f"Standing order {so_id} created", "standing_order_id": so_id}

    def cancel_standing_order(self, standing_order_id: str) -> dict:
        """Cancel an active standing order so that no further payments are made.

        Args:
            standing_order_id: Standing order id, e.g. "SO701".

        Returns:
            Confirmation message.
        """
        order = self._find(self.standing_orders, standing_order_id)
        if order is None:
            return {"success": False, "error": f"Standing order {standing_order_id} not found"}
        if order["status"] != "active":
            return {"success": False, "error": f"Standing order {standing_order_id} is already {order['status']}"}
        order["status"] = "cancelled"
        order["cancelled_on"] = self.business_date
        return {"success": True, "message": f"Standing order {standing_order_id} cancelled"}

    def execute_standing_order(self, standing_order_id: str) -> dict:
        """Run one due standing order: pay the amount, book both transactions and schedule the
        next execution (one week or one calendar month later). When the next date falls after
        the end date the order is marked completed.

        Rules: the order must be active and its next execution date on or before the business
        date; both accounts must be open; the payment must fit within balance plus arranged
        overdraft. Standing orders carry no fee and do not count against the daily limit.

        Args:
            standing_order_id: Standing order id, e.g. "SO701".

        Returns:
            Transaction ids, the payer's new balance and the next execution date (or null).
        """
        order = self._find(self.standing_orders, standing_order_id)
        if order is None:
            return {"success": False, "error": f"Standing order {standing_order_id} not found"}
        if order["status"] != "active":
            return {"success": False, "error": f"Standing order {standing_order_id} is {order['status']}"}
        due = _parse_date(order["next_execution_date"])
        if due > self._today():
            return {"success": False,
                    "error": f"Standing order {standing_order_id} is not due until {order['next_execution_date']}"}
        source, error = self._usable_account(order["from_account_id"], "Source")
        if error:
            return {"success": False, "error": error}
        _, error = self._usable_account(order["to_account_id"], "Destination")
        if error:
            return {"success": False, "error": error}
        amount = order["amount"]
        available = round(source["balance"] + source["overdraft_limit"], 2)
        if amount > available:
            return {"success": False, "error": f"Insufficient funds: {amount:.2f} needed, {available:.2f} available"}
        extra = {"reference": order["reference"], "standing_order_id": standing_order_id}
        debit_id = self._post(order["from_account_id"], "standing_order_out", -amount, order["to_account_id"],
                              f"Standing order {standing_order_id}", extra)
        credit_id = self._post(order["to_account_id"], "standing_order_in", amount, order["from_account_id"],
                               f"Standing order {standing_order_id}", extra)
        nxt = due + datetime.timedelta(days=7) if order["frequency"] == "weekly" else _add_months(due, 1)
        order["executions"] += 1
        order["last_executed_on"] = self.business_date
        order["next_execution_date"] = nxt.isoformat()
        next_date = nxt.isoformat()
        if order["end_date"] is not None and nxt > _parse_date(order["end_date"]):
            order["status"] = "completed"
            next_date = None
        return {"success": True, "message": f"Standing order {standing_order_id} executed",
                "debit_transaction_id": debit_id, "credit_transaction_id": credit_id,
                "new_balance": source["balance"], "next_execution_date": next_date}

    # ------------------------------------------------------------------ statements and closure

    def generate_statement(self, account_id: str, period_start: str, period_end: str) -> dict:
        """Issue a statement for an account over a date range (inclusive).

        Rules: dates must be valid with start <= end <= business date; the period must begin
        after the end of the last statement issued for the account. Opening and closing balances
        are derived from the booked transactions.

        Args:
            account_id: Account id, e.g. "A3001".
            period_start: First day of the period, ISO date.
            period_end: Last day of the period, ISO date.

        Returns:
            The statement id and its figures.
        """
        account = self._find(self.accounts, account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        start, end = _parse_date(period_start), _parse_date(period_end)
        if start is None or end is None:
            return {"success": False, "error": "period_start and period_end must be ISO dates"}
        if start > end:
            return {"success": False, "error": "period_start is after period_end"}
        if end > self._today():
            return {"success": False, "error": "period_end cannot be after the business date"}
        last = _parse_date(account["last_statement_date"])
        if last is not None and start <= last:
            return {"success": False,
                    "error": f"Period overlaps the previous statement, which ended {account['last_statement_date']}"}
        credits = debits = later = 0.0
        count = 0
        for txn in self.transactions.values():
            if txn["account_id"] != account_id:
                continue
            when = _parse_date(txn["date"])
            if when > end:
                later += txn["amount"]
            elif when >= start:
                count += 1
                if txn["amount"] >= 0:
                    credits += txn["amount"]
                else:
                    debits -= txn["amount"]
        closing = round(account["balance"] - later, 2)
        opening = round(closing - credits + debits, 2)
        statement_id = self._next_id(self.statements, "ST")
        statement = {
            "account_id": account_id,
            "period_start": period_start,
            "period_end": period_end,
            "opening_balance": opening,
            "closing_balance": closing,
            "total_credits": round(credits, 2),
            "total_debits": round(debits, 2),
            "transaction_count": count,
            "generated_on": self.business_date,
        }
        self.statements[statement_id] = statement
        account["last_statement_date"] = period_end
        return {"success": True, "message": f"Statement {statement_id} generated",
                "statement_id": statement_id, "statement": copy.deepcopy(statement)}

    def close_account(self, account_id: str, payout_account_id: str) -> dict:
        """Close an account, moving any remaining balance to another open account of the same
        customer. The arranged overdraft is removed.

        Rules: the account must be open (not frozen); it cannot be overdrawn; no active standing
        order may pay from or into it; the payout account must be a different open account held
        by the same customer.

        Args:
            account_id: Account to close, e.g. "A3004".
            payout_account_id: Account of the same customer receiving the balance.

        Returns:
            The amount paid out.
        """
        account = self._find(self.accounts, account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        if account["status"] != "open":
            return {"success": False, "error": f"Account {account_id} is {account['status']} and cannot be closed"}
        if account["balance"] < 0:
            return {"success": False, "error": f"Account {account_id} is overdrawn by {-account['balance']:.2f}"}
        for so_id, order in self.standing_orders.items():
            if order["status"] == "active" and account_id in (order["from_account_id"], order["to_account_id"]):
                return {"success": False, "error": f"Active standing order {so_id} still uses {account_id}"}
        if payout_account_id == account_id:
            return {"success": False, "error": "Payout account must differ from the account being closed"}
        payout, error = self._usable_account(payout_account_id, "Payout")
        if error:
            return {"success": False, "error": error}
        if payout["customer_id"] != account["customer_id"]:
            return {"success": False, "error": "Payout account belongs to a different customer"}
        paid_out = account["balance"]
        if paid_out > 0:
            self._post(account_id, "closing_transfer_out", -paid_out, payout_account_id, "Account closure payout")
            self._post(payout_account_id, "closing_transfer_in", paid_out, account_id,
                       f"Balance of closed account {account_id}")
        account["status"] = "closed"
        account["closed_on"] = self.business_date
        if account["overdraft_limit"]:
            account["overdraft_limit"] = 0.0
        return {"success": True, "message": f"Account {account_id} closed",
                "paid_out": paid_out, "payout_account_id": payout_account_id}
