"""SaaS subscription billing: plans, per-seat subscriptions, proration, renewals, invoices, dunning and cancellation."""

import calendar
import datetime


class SubscriptionBilling:
    """Billing back office of a B2B SaaS product sold per seat.

    Each customer has at most one live subscription. Invoices are charged immediately:
    account credit is applied first and the rest goes to the card on file. A failed charge
    leaves the invoice open and the subscription past_due; dunning retries every
    settings.retry_interval_days until settings.max_dunning_attempts, after which the invoice is
    uncollectible and the subscription is cancelled. ``metrics`` tracks monthly recurring
    revenue (MRR) and subscription counts as they change.
    """

    def __init__(self, init_config: dict):
        self.settings = {}
        self.plans = {}
        self.customers = {}
        self.subscriptions = {}
        self.invoices = {}
        self.credit_notes = {}
        self.metrics = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _money(value: float) -> float:
        return round(float(value) + 1e-9, 2)

    def _today(self) -> datetime.date:
        return datetime.date.fromisoformat(self.settings["business_date"])

    @staticmethod
    def _add_interval(day: datetime.date, interval: str) -> datetime.date:
        if interval == "year":
            year, month = day.year + 1, day.month
        else:
            year, month = (day.year + 1, 1) if day.month == 12 else (day.year, day.month + 1)
        return datetime.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))

    def _monthly_value(self, plan_id: str, seats: int) -> float:
        plan = self.plans[plan_id]
        value = plan["price_per_seat"] * seats
        return value / 12.0 if plan["interval"] == "year" else value

    def _adjust_mrr(self, amount: float) -> None:
        self.metrics["mrr"] = self._money(self.metrics["mrr"] + amount)

    def _card_ok(self, customer: dict) -> bool:
        pm = customer.get("payment_method") or {}
        return pm.get("status") == "valid" and pm.get("exp", "0000-00") >= self.settings["business_date"][:7]

    def _proration_factor(self, sub: dict) -> float:
        start = datetime.date.fromisoformat(sub["current_period_start"])
        end = datetime.date.fromisoformat(sub["current_period_end"])
        remaining = (end - self._today()).days
        return max(0, remaining) / max(1, (end - start).days)

    def _issue_invoice(self, sub_id: str, lines: dict) -> tuple:
        """Create and immediately charge an invoice. Returns (invoice_id, paid)."""
        sub = self.subscriptions[sub_id]
        customer = self.customers[sub["customer_id"]]
        subtotal = self._money(sum(l["amount"] for l in lines.values()))
        tax = self._money(subtotal * customer["tax_rate_percent"] / 100.0)
        total = self._money(subtotal + tax)
        credit = self._money(min(customer["credit_balance"], total))
        if credit:
            customer["credit_balance"] = self._money(customer["credit_balance"] - credit)
        due = self._money(total - credit)
        number = self.counters["invoice"] + 1
        invoice_id = f"INV-{number:04d}"
        today = self.settings["business_date"]
        paid = due == 0 or self._card_ok(customer)
        retry = (self._today() + datetime.timedelta(days=self.settings["retry_interval_days"])).isoformat()
        self.invoices[invoice_id] = {
            "customer_id": sub["customer_id"], "subscription_id": sub_id, "lines": lines, "subtotal": subtotal,
            "tax": tax, "total": total, "credit_applied": credit, "amount_due": 0.0 if paid else due,
            "status": "paid" if paid else "open", "issued_on": today, "paid_on": today if paid else None,
            "attempts": 0 if due == 0 else 1, "next_attempt_on": None if paid else retry,
        }
        self.counters["invoice"] = number
        return invoice_id, paid

    def _sub(self, subscription_id):
        if not isinstance(subscription_id, str) or subscription_id not in self.subscriptions:
            return None, {"success": False, "error": f"Subscription {subscription_id} not found"}
        return self.subscriptions[subscription_id], None

    # ------------------------------------------------------------------ queries
    def list_plans(self) -> dict:
        """List the plans that can be sold, with interval, price per seat and seat limits."""
        rows = [{"plan_id": pid, "name": p["name"], "tier": p["tier"], "interval": p["interval"],
                 "price_per_seat": p["price_per_seat"], "min_seats": p["min_seats"], "max_seats": p["max_seats"]}
                for pid, p in self.plans.items() if p["active"]]
        rows.sort(key=lambda r: (r["interval"], r["tier"]))
        return {"success": True, "data": rows}

    def get_customer(self, customer_id: str) -> dict:
        """Show a customer account: tax rate, credit balance, card on file, subscriptions and unpaid invoices.

        Args:
            customer_id: Customer id, e.g. "CUS-1001".
        """
        if not isinstance(customer_id, str) or customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        data = {"customer_id": customer_id}
        data.update(self.customers[customer_id])
        data["subscriptions"] = sorted(sid for sid, s in self.subscriptions.items() if s["customer_id"] == customer_id)
        data["unpaid_invoices"] = sorted(iid for iid, i in self.invoices.items()
                                         if i["customer_id"] == customer_id and i["status"] in ("open", "uncollectible"))
        return {"success": True, "data": data}

    def get_subscription(self, subscription_id: str) -> dict:
        """Show a subscription with its plan, seats, period, scheduled changes and monthly value.

        Args:
            subscription_id: Subscription id, e.g. "SUB-501".
        """
        sub, err = self._sub(subscription_id)
        if err:
            return err
        data = {"subscription_id": subscription_id}
        data.update(sub)
        data["monthly_value"] = self._money(self._monthly_value(sub["plan_id"], sub["seats"]))
        return {"success": True, "data": data}

    def get_invoice(self, invoice_id: str) -> dict:
        """Show an invoice with lines, tax, credit applied, amount due and dunning state.

        Args:
            invoice_id: Invoice id, e.g. "INV-0108".
        """
        if not isinstance(invoice_id, str) or invoice_id not in self.invoices:
            return {"success": False, "error": f"Invoice {invoice_id} not found"}
        data = {"invoice_id": invoice_id}
        data.update(self.invoices[invoice_id])
        return {"success": True, "data": data}

    # ------------------------------------------------------------------ lifecycle
    def create_subscription(self, customer_id: str, plan_id: str, seats: int, trial_days: int = 0) -> dict:
        """Start a subscription for a customer.

        Args:
            customer_id: Customer without a live (trialing, active or past_due) subscription and without unpaid invoices.
            plan_id: Active plan id.
            seats: Seats within the plan's min_seats..max_seats.
            trial_days: 0 for no trial, else 1..settings.max_trial_days; only customers who never
                subscribed before get a trial.
        Rules: without a trial the first period is invoiced and charged immediately; a failed
        charge makes the new subscription past_due.
        """
        if not isinstance(customer_id, str) or customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        if not isinstance(plan_id, str) or plan_id not in self.plans or not self.plans[plan_id]["active"]:
            return {"success": False, "error": f"Plan {plan_id} is not available"}
        plan = self.plans[plan_id]
        if not isinstance(seats, int) or isinstance(seats, bool) or not plan["min_seats"] <= seats <= plan["max_seats"]:
            return {"success": False, "error": f"{plan['name']} requires {plan['min_seats']}-{plan['max_seats']} seats"}
        if not isinstance(trial_days, int) or isinstance(trial_days, bool) or not 0 <= trial_days <= self.settings["max_trial_days"]:
            return {"success": False, "error": f"trial_days must be an integer from 0 to {self.settings['max_trial_days']}"}
        history = [s for s in self.subscriptions.values() if s["customer_id"] == customer_id]
        live = [sid for sid, s in self.subscriptions.items()
                if s["customer_id"] == customer_id and s["status"] in ("trialing", "active", "past_due")]
        if live:
            return {"success": False, "error": f"Customer {customer_id} already has subscription {live[0]}"}
        unpaid = [iid for iid, i in self.invoices.items() if i["customer_id"] == customer_id and i["status"] in ("open", "uncollectible")]
        if unpaid:
            return {"success": False, "error": f"Customer {customer_id} has unpaid invoice {unpaid[0]}"}
        if trial_days and history:
            return {"success": False, "error": "Trials are only available to first-time customers"}
        today = self._today()
        number = self.counters["subscription"] + 1
        sub_id = f"SUB-{number}"
        if trial_days:
            end = today + datetime.timedelta(days=trial_days)
        else:
            end = self._add_interval(today, plan["interval"])
        self.subscriptions[sub_id] = {
            "customer_id": customer_id, "plan_id": plan_id, "seats": seats,
            "status": "trialing" if trial_days else "active",
            "current_period_start": today.isoformat(), "current_period_end": end.isoformat(),
            "cancel_at_period_end": False, "pending_plan_id": None, "created_on": today.isoformat(), "canceled_at": None,
        }
        self.counters["subscription"] = number
        if trial_days:
            self.metrics["trialing_subscriptions"] += 1
            return {"success": True, "message": f"{sub_id} trialing until {end.isoformat()}", "subscription_id": sub_id}
        lines = {"1": {"description": f"{plan['name']} x {seats} seats ({today.isoformat()} to {end.isoformat()})",
                       "amount": self._money(plan["price_per_seat"] * seats)}}
        invoice_id, paid = self._issue_invoice(sub_id, lines)
        if not paid:
            self.subscriptions[sub_id]["status"] = "past_due"
        self._adjust_mrr(self._monthly_value(plan_id, seats))
        self.metrics["active_subscriptions"] += 1
        return {"success": True, "message": f"{sub_id} started; invoice {invoice_id} {'paid' if paid else 'payment failed'}",
                "subscription_id": sub_id, "invoice_id": invoice_id}

    def change_plan(self, subscription_id: str, new_plan_id: str) -> dict:
        """Move an active subscription to another plan with the same billing interval.

        Args:
            subscription_id: Active subscription id.
            new_plan_id: Active plan with the same interval whose seat limits fit the current seats.
        Rules: upgrades (higher price per seat) apply now and the price difference for the rest of
        the period is invoiced and charged (prorated by days); downgrades are scheduled for the next
        renewal. Choosing the current plan clears a scheduled downgrade.
        """
        sub, err = self._sub(subscription_id)
        if err:
            return err
        if sub["status"] != "active":
            return {"success": False, "error": f"Subscription {subscription_id} is {sub['status']}; only active subscriptions can change plan"}
        if not isinstance(new_plan_id, str) or new_plan_id not in self.plans or not self.plans[new_plan_id]["active"]:
            return {"success": False, "error": f"Plan {new_plan_id} is not available"}
        old, new = self.plans[sub["plan_id"]], self.plans[new_plan_id]
        if new_plan_id == sub["plan_id"]:
            if sub["pending_plan_id"]:
                sub["pending_plan_id"] = None
                return {"success": True, "message": f"Scheduled plan change of {subscription_id} removed"}
            return {"success": False, "error": f"Subscription {subscription_id} is already on {new_plan_id}"}
        if new["interval"] != old["interval"]:
            return {"success": False, "error": "Switching between monthly and annual billing is not supported mid-term"}
        if not new["min_seats"] <= sub["seats"] <= new["max_seats"]:
            return {"success": False, "error": f"{new['name']} requires {new['min_seats']}-{new['max_seats']} seats; subscription has {sub['seats']}"}
        if new["price_per_seat"] <= old["price_per_seat"]:
            sub["pending_plan_id"] = new_plan_id
            return {"success": True, "message": f"Downgrade to {new['name']} scheduled for {sub['current_period_end']}"}
        factor = self._proration_factor(sub)
        amount = self._money((new["price_per_seat"] - old["price_per_seat"]) * sub["seats"] * factor)
        old_value = self._monthly_value(sub["plan_id"], sub["seats"])
        sub["plan_id"] = new_plan_id
        sub["pending_plan_id"] = None
        self._adjust_mrr(self._monthly_value(new_plan_id, sub["seats"]) - old_value)
        invoice_id, paid = None, True
        if amount > 0:
            lines = {"1": {"description": f"Upgrade {old['name']} to {new['name']}, prorated to {sub['current_period_end']}", "amount": amount}}
            invoice_id, paid = self._issue_invoice(subscription_id, lines)
            if not paid:
                sub["status"] = "past_due"
        return {"success": True, "message": f"Upgraded {subscription_id} to {new['name']}; prorated charge {amount:.2f}",
                "invoice_id": invoice_id, "paid": paid}

    def update_seats(self, subscription_id: str, seats: int) -> dict:
        """Change the number of seats of an active subscription, effective immediately.

        Args:
            subscription_id: Active subscription id.
            seats: New seat count within the plan's limits.
        Rules: added seats are invoiced prorated for the rest of the period; removed seats give
        prorated account credit (no refund to the card).
        """
        sub, err = self._sub(subscription_id)
        if err:
            return err
        if sub["status"] != "active":
            return {"success": False, "error": f"Subscription {subscription_id} is {sub['status']}"}
        plan = self.plans[sub["plan_id"]]
        if not isinstance(seats, int) or isinstance(seats, bool) or not plan["min_seats"] <= seats <= plan["max_seats"]:
            return {"success": False, "error": f"{plan['name']} requires {plan['min_seats']}-{plan['max_seats']} seats"}
        if seats == sub["seats"]:
            return {"success": False, "error": f"Subscription {subscription_id} already has {seats} seats"}
        factor = self._proration_factor(sub)
        delta = seats - sub["seats"]
        amount = self._money(abs(delta) * plan["price_per_seat"] * factor)
        old_value = self._monthly_value(sub["plan_id"], sub["seats"])
        sub["seats"] = seats
        self._adjust_mrr(self._monthly_value(sub["plan_id"], seats) - old_value)
        customer = self.customers[sub["customer_id"]]
        if delta < 0:
            if amount:
                customer["credit_balance"] = self._money(customer["credit_balance"] + amount)
            return {"success": True, "message": f"{subscription_id} reduced to {seats} seats; {amount:.2f} credited", "credited": amount}
        invoice_id, paid = None, True
        if amount > 0:
            lines = {"1": {"description": f"{delta} additional {plan['name']} seats, prorated to {sub['current_period_end']}", "amount": amount}}
            invoice_id, paid = self._issue_invoice(subscription_id, lines)
            if not paid:
                sub["status"] = "past_due"
        return {"success": True, "message": f"{subscription_id} increased to {seats} seats; prorated charge {amount:.2f}",
                "invoice_id": invoice_id, "paid": paid}

    def renew_subscription(self, subscription_id: str) -> dict:
        """Run the period-end renewal of a subscription whose current period has ended.

        Args:
            subscription_id: Active or trialing subscription with current_period_end on or before the business date.
        Rules: if cancellation at period end was requested the subscription is cancelled (counted as
        churn). Otherwise a scheduled plan change is applied, a new period starts at the old period
        end, and the period is invoiced and charged; a trial converts to a paid subscription. A failed
        charge sets the subscription past_due.
        """
        sub, err = self._sub(subscription_id)
        if err:
            return err
        if sub["status"] not in ("active", "trialing"):
            return {"success": False, "error": f"Subscription {subscription_id} is {sub['status']} and cannot renew"}
        end = datetime.date.fromisoformat(sub["current_period_end"])
        if end > self._today():
            return {"success": False, "error": f"Subscription {subscription_id} renews on {sub['current_period_end']}"}
        trial = sub["status"] == "trialing"
        if sub["cancel_at_period_end"]:
            if trial:
                self.metrics["trialing_subscriptions"] -= 1
            else:
                self._adjust_mrr(-self._monthly_value(sub["plan_id"], sub["seats"]))
                self.metrics["active_subscriptions"] -= 1
                self.metrics["churned_this_month"] += 1
            sub["status"] = "canceled"
            sub["canceled_at"] = sub["current_period_end"]
            return {"success": True, "message": f"{subscription_id} ended at period end as requested"}
        old_value = 0.0 if trial else self._monthly_value(sub["plan_id"], sub["seats"])
        if sub["pending_plan_id"]:
            pending = self.plans.get(sub["pending_plan_id"])
            if pending and pending["min_seats"] <= sub["seats"] <= pending["max_seats"]:
                sub["plan_id"] = sub["pending_plan_id"]
            sub["pending_plan_id"] = None
        plan = self.plans[sub["plan_id"]]
        new_end = self._add_interval(end, plan["interval"])
        sub["current_period_start"] = end.isoformat()
        sub["current_period_end"] = new_end.isoformat()
        lines = {"1": {"description": f"{plan['name']} x {sub['seats']} seats ({end.isoformat()} to {new_end.isoformat()})",
                       "amount": self._money(plan["price_per_seat"] * sub["seats"])}}
        invoice_id, paid = self._issue_invoice(subscription_id, lines)
        if trial:
            self.metrics["trialing_subscriptions"] -= 1
            self.metrics["active_subscriptions"] += 1
        new_status = "active" if paid else "past_due"
        if sub["status"] != new_status:
            sub["status"] = new_status
        self._adjust_mrr(self._monthly_value(sub["plan_id"], sub["seats"]) - old_value)
        return {"success": True, "message": f"{subscription_id} renewed to {new_end.isoformat()}; invoice {invoice_id} {'paid' if paid else 'payment failed'}",
                "invoice_id": invoice_id, "paid": paid}

    def retry_invoice_payment(self, invoice_id: str) -> dict:
        """Dunning: retry charging an open invoice to the customer's card.

        Args:
            invoice_id: Open invoice whose next_attempt_on is on or before the business date.
        Rules: on success the invoice is paid and a past_due subscription becomes active. On failure
        the attempt is counted and the next retry scheduled settings.retry_interval_days later; when
        settings.max_dunning_attempts is reached the invoice becomes uncollectible and its subscription
        is cancelled (churn).
        """
        if not isinstance(invoice_id, str) or invoice_id not in self.invoices:
            return {"success": False, "error": f"Invoice {invoice_id} not found"}
        inv = self.invoices[invoice_id]
        if inv["status"] != "open":
            return {"success": False, "error": f"Invoice {invoice_id} is {inv['status']}"}
        if inv["next_attempt_on"] and inv["next_attempt_on"] > self.settings["business_date"]:
            return {"success": False, "error": f"Next payment attempt for {invoice_id} is scheduled on {inv['next_attempt_on']}"}
        customer = self.customers[inv["customer_id"]]
        sub = self.subscriptions.get(inv["subscription_id"])
        if self._card_ok(customer):
            inv["status"] = "paid"
            inv["paid_on"] = self.settings["business_date"]
            inv["amount_due"] = 0.0
            inv["attempts"] += 1
            inv["next_attempt_on"] = None
            if sub and sub["status"] == "past_due":
                sub["status"] = "active"
            return {"success": True, "message": f"Invoice {invoice_id} paid", "paid": True}
        inv["attempts"] += 1
        if inv["attempts"] < self.settings["max_dunning_attempts"]:
            inv["next_attempt_on"] = (self._today() + datetime.timedelta(days=self.settings["retry_interval_days"])).isoformat()
            return {"success": True, "message": f"Payment failed (attempt {inv['attempts']}); next attempt {inv['next_attempt_on']}", "paid": False}
        inv["status"] = "uncollectible"
        inv["next_attempt_on"] = None
        if sub and sub["status"] in ("active", "past_due"):
            self._adjust_mrr(-self._monthly_value(sub["plan_id"], sub["seats"]))
            self.metrics["active_subscriptions"] -= 1
            self.metrics["churned_this_month"] += 1
            sub["status"] = "canceled"
            sub["canceled_at"] = self.settings["business_date"]
        return {"success": True, "message": f"Payment failed {inv['attempts']} times; invoice {invoice_id} uncollectible and subscription cancelled",
                "paid": False}

    def cancel_subscription(self, subscription_id: str, immediately: bool = False) -> dict:
        """Cancel a subscription at the end of its period (default) or immediately.

        Args:
            subscription_id: Trialing, active or past_due subscription.
            immediately: True to end it now: open invoices of the subscription are voided and no
                refund is given for the current period.
        """
        sub, err = self._sub(subscription_id)
        if err:
            return err
        if sub["status"] not in ("trialing", "active", "past_due"):
            return {"success": False, "error": f"Subscription {subscription_id} is already {sub['status']}"}
        if not isinstance(immediately, bool):
            return {"success": False, "error": "immediately must be true or false"}
        if not immediately:
            if sub["cancel_at_period_end"]:
                return {"success": False, "error": f"Cancellation of {subscription_id} is already scheduled"}
            sub["cancel_at_period_end"] = True
            return {"success": True, "message": f"{subscription_id} will end on {sub['current_period_end']}"}
        voided = []
        for iid, inv in self.invoices.items():
            if inv["subscription_id"] == subscription_id and inv["status"] == "open":
                inv["status"] = "void"
                voided.append(iid)
        if sub["status"] == "trialing":
            self.metrics["trialing_subscriptions"] -= 1
        else:
            self._adjust_mrr(-self._monthly_value(sub["plan_id"], sub["seats"]))
            self.metrics["active_subscriptions"] -= 1
            self.metrics["churned_this_month"] += 1
        sub["status"] = "canceled"
        sub["canceled_at"] = self.settings["business_date"]
        return {"success": True, "message": f"{subscription_id} cancelled immediately", "voided_invoices": sorted(voided)}

    # ------------------------------------------------------------------ account
    def update_payment_method(self, customer_id: str, brand: str, last4: str, exp_month: int, exp_year: int) -> dict:
        """Replace the card on file.

        Args:
            customer_id: Customer id.
            brand: visa, mastercard or amex.
            last4: Last four digits of the card number.
            exp_month: Expiry month 1-12.
            exp_year: Expiry year (four digits); the card may not be expired in the business month.
        """
        if not isinstance(customer_id, str) or customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        if brand not in ("visa", "mastercard", "amex"):
            return {"success": False, "error": "brand must be visa, mastercard or amex"}
        if not isinstance(last4, str) or len(last4) != 4 or not last4.isdigit():
            return {"success": False, "error": "last4 must be exactly four digits"}
        if (not isinstance(exp_month, int) or isinstance(exp_month, bool) or not 1 <= exp_month <= 12
                or not isinstance(exp_year, int) or isinstance(exp_year, bool) or not 2000 <= exp_year <= 2100):
            return {"success": False, "error": "Invalid expiry month/year"}
        exp = f"{exp_year:04d}-{exp_month:02d}"
        if exp < self.settings["business_date"][:7]:
            return {"success": False, "error": f"Card expired in {exp}"}
        self.customers[customer_id]["payment_method"] = {"brand": brand, "last4": last4, "exp": exp, "status": "valid"}
        return {"success": True, "message": f"{brand} ending {last4} saved for {customer_id}"}

    def apply_credit(self, customer_id: str, amount: float, reason: str) -> dict:
        """Issue a goodwill or SLA credit note that is added to the customer's credit balance.

        Args:
            customer_id: Customer id.
            amount: Credit amount, > 0 and at most settings.max_credit_note.
            reason: Why the credit is granted.
        """
        if not isinstance(customer_id, str) or customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount <= 0:
            return {"success": False, "error": "amount must be a positive number"}
        if amount > self.settings["max_credit_note"]:
            return {"success": False, "error": f"Credit notes above {self.settings['max_credit_note']:.2f} need finance approval"}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "A reason is required"}
        number = self.counters["credit_note"] + 1
        note_id = f"CN-{number:03d}"
        customer = self.customers[customer_id]
        customer["credit_balance"] = self._money(customer["credit_balance"] + amount)
        self.credit_notes[note_id] = {"customer_id": customer_id, "amount": self._money(amount), "reason": reason.strip(),
                                      "issued_on": self.settings["business_date"]}
        self.counters["credit_note"] = number
        return {"success": True, "message": f"Credit note {note_id} of {amount:.2f} issued", "credit_balance": customer["credit_balance"]}
