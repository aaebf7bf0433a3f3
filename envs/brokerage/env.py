"""Retail brokerage back office: cash and margin accounts, positions, market and limit orders,
exchange fills with commissions, T+1 cash settlement of sale proceeds and margin checks.

Prices are per share in USD. Buying power is reserved when an order is placed and released as
it fills or is cancelled; sale proceeds stay unsettled until their settlement date.
"""

import copy
import datetime
import math


def _parse_date(value):
    if not isinstance(value, str):
        return None
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        return None


def _is_price(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and value > 0 and round(value, 4) == value


def _add_business_days(day, count):
    while count > 0:
        day += datetime.timedelta(days=1)
        if day.weekday() < 5:
            count -= 1
    return day


class Brokerage:
    """Order management and account servicing for a retail broker."""

    MARKET_ORDER_COLLAR = 0.05
    INITIAL_MARGIN = 0.5
    MAINTENANCE_MARGIN = 0.25
    CIRCUIT_BREAKER = 0.20
    SETTLEMENT_DAYS = 1
    MARGIN_CALL_DAYS = 2

    def __init__(self, init_config: dict):
        self.business_date = ""
        self.market_status = ""
        self.fee_schedule = {}
        self.instruments = {}
        self.accounts = {}
        self.positions = {}
        self.orders = {}
        self.fills = {}
        self.settlements = {}

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

    def _commission(self, quantity, value):
        fees = self.fee_schedule
        commission = max(fees["min_commission"], quantity * fees["commission_per_share"])
        commission = min(commission, value * fees["max_commission_pct"] / 100)
        return round(max(commission, 0.01), 2)

    def _regulatory_fee(self, value):
        return round(max(0.01, value * self.fee_schedule["sell_regulatory_fee_rate"]), 2)

    def _valuation(self, account_id):
        holdings = self.positions.get(account_id, {})
        market_value = marginable = 0.0
        for symbol, pos in holdings.items():
            value = pos["quantity"] * self.instruments[symbol]["last_price"]
            market_value += value
            if self.instruments[symbol]["marginable"]:
                marginable += value
        account = self.accounts[account_id]
        equity = account["cash_balance"] + market_value
        return round(market_value, 2), round(marginable, 2), round(equity, 2)

    def _buying_power(self, account_id):
        account = self.accounts[account_id]
        if account["account_type"] == "cash":
            return round(account["cash_balance"] - account["unsettled_cash"] - account["reserved_cash"], 2)
        _, marginable, _ = self._valuation(account_id)
        return round(account["cash_balance"] - account["reserved_cash"] + marginable * self.INITIAL_MARGIN, 2)

    def _margin_status(self, account_id):
        market_value, _, equity = self._valuation(account_id)
        requirement = round(market_value * self.MAINTENANCE_MARGIN, 2)
        return market_value, equity, requirement, round(equity - requirement, 2)

    # ------------------------------------------------------------------ queries

    def get_account(self, account_id: str) -> dict:
        """Show an account with cash figures, market value, equity and current buying power.

        Args:
            account_id: Brokerage account id, e.g. "BA1001".

        Returns:
            The account record plus `market_value`, `equity` and `buying_power`.
        """
        account = self._find(self.accounts, account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        market_value, _, equity = self._valuation(account_id)
        data = dict(account, account_id=account_id, market_value=market_value, equity=equity,
                    buying_power=self._buying_power(account_id))
        return {"success": True, "data": copy.deepcopy(data)}

    def get_positions(self, account_id: str) -> dict:
        """List an account's holdings with market value and unrealized profit or loss.

        Args:
            account_id: Brokerage account id, e.g. "BA1001".

        Returns:
            One row per symbol.
        """
        if self._find(self.accounts, account_id) is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        rows = []
        for symbol, pos in sorted(self.positions.get(account_id, {}).items()):
            price = self.instruments[symbol]["last_price"]
            rows.append({"symbol": symbol, "quantity": pos["quantity"], "reserved_qty": pos["reserved_qty"],
                         "avg_cost": pos["avg_cost"], "last_price": price,
                         "market_value": round(pos["quantity"] * price, 2),
                         "unrealized_pnl": round(pos["quantity"] * (price - pos["avg_cost"]), 2)})
        return {"success": True, "data": rows}

    def get_quote(self, symbol: str) -> dict:
        """Show the latest price of an instrument, its change on the day and whether it trades.

        Args:
            symbol: Ticker symbol, e.g. "NVLT".

        Returns:
            Instrument details with `change_pct` against the previous close.
        """
        inst = self._find(self.instruments, symbol)
        if inst is None:
            return {"success": False, "error": f"Unknown symbol {symbol}"}
        change = round((inst["last_price"] / inst["prev_close"] - 1) * 100, 2)
        return {"success": True, "data": copy.deepcopy(dict(inst, symbol=symbol, change_pct=change))}

    def list_open_orders(self) -> dict:
        """List all working orders (open or partially filled) across accounts, oldest first.

        Returns:
            Order id, account, symbol, side, type, quantities and limit price.
        """
        rows = [{"order_id": oid, "account_id": o["account_id"], "symbol": o["symbol"], "side": o["side"],
                 "order_type": o["order_type"], "quantity": o["quantity"], "filled_quantity": o["filled_quantity"],
                 "limit_price": o["limit_price"], "status": o["status"]}
                for oid, o in self.orders.items() if o["status"] in ("open", "partially_filled")]
        rows.sort(key=lambda r: int(r["order_id"][3:]))
        return {"success": True, "data": rows}

    def check_margin(self, account_id: str) -> dict:
        """Compute an account's maintenance margin position: equity against 25% of the long
        market value. A negative excess means the account is below maintenance.

        Args:
            account_id: Brokerage account id, e.g. "BA1002".

        Returns:
            Market value, equity, requirement, excess (or deficit) and any open margin call.
        """
        account = self._find(self.accounts, account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        market_value, equity, requirement, excess = self._margin_status(account_id)
        return {"success": True, "data": {"account_id": account_id, "account_type": account["account_type"],
                                          "market_value": market_value, "equity": equity,
                                          "maintenance_requirement": requirement, "excess": excess,
                                          "margin_call": copy.deepcopy(account["margin_call"])}}

    # ------------------------------------------------------------------ cash

    def deposit_cash(self, account_id: str, amount: float) -> dict:
        """Credit a cash deposit (already cleared) to an account. If the account has an open
        margin call and the deposit restores maintenance margin, the call is met and the
        account's restriction is lifted.

        Args:
            account_id: Brokerage account id, e.g. "BA1001".
            amount: Amount in USD, positive with at most two decimals, at most 250,000.

        Returns:
            The new cash balance and whether a margin call was satisfied.
        """
        account = self._find(self.accounts, account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(amount) \
                or amount <= 0 or round(amount, 2) != amount:
            return {"success": False, "error": "amount must be a positive number with at most two decimals"}
        if amount > 250000:
            return {"success": False, "error": "Deposits above 250,000.00 must be wired and reviewed"}
        if account["status"] == "closed":
            return {"success": False, "error": f"Account {account_id} is closed"}
        account["cash_balance"] = round(account["cash_balance"] + amount, 2)
        call_met = False
        if account["margin_call"] is not None:
            _, _, _, excess = self._margin_status(account_id)
            if excess >= 0:
                account["margin_call"] = None
                account["status"] = "active"
                call_met = True
        return {"success": True, "message": f"Deposited {amount:.2f} to {account_id}",
                "cash_balance": account["cash_balance"], "margin_call_met": call_met}

    def withdraw_cash(self, account_id: str, amount: float) -> dict:
        """Withdraw cash to the client's bank account.

        Rules: the account must be active; only settled cash that is not reserved for open
        orders can be withdrawn, and never more than the cash balance (no withdrawals on margin);
        a margin account must still meet maintenance margin afterwards.

        Args:
            account_id: Brokerage account id, e.g. "BA1001".
            amount: Amount in USD, positive with at most two decimals.

        Returns:
            The new cash balance.
        """
        account = self._find(self.accounts, account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(amount) \
                or amount <= 0 or round(amount, 2) != amount:
            return {"success": False, "error": "amount must be a positive number with at most two decimals"}
        if account["status"] != "active":
            return {"success": False, "error": f"Account {account_id} is {account['status']}"}
        withdrawable = round(account["cash_balance"] - account["unsettled_cash"] - account["reserved_cash"], 2)
        if amount > withdrawable:
            return {"success": False,
                    "error": f"Only {max(withdrawable, 0.0):.2f} of settled, unreserved cash can be withdrawn"}
        if account["account_type"] == "margin":
            _, equity, requirement, _ = self._margin_status(account_id)
            if equity - amount < requirement:
                return {"success": False, "error": "Withdrawal would put the account below maintenance margin"}
        account["cash_balance"] = round(account["cash_balance"] - amount, 2)
        return {"success": True, "message": f"Withdrew {amount:.2f} from {account_id}",
                "cash_balance": account["cash_balance"]}

    def settle_trades(self, account_id: str) -> dict:
        """Settle every pending sale settlement of the account whose settlement date has been
        reached, turning unsettled proceeds into settled cash.

        Args:
            account_id: Brokerage account id, e.g. "BA1001".

        Returns:
            The settlements processed and the amount settled.
        """
        account = self._find(self.accounts, account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        due = [sid for sid, s in sorted(self.settlements.items())
               if s["account_id"] == account_id and s["status"] == "pending"
               and _parse_date(s["settle_date"]) <= self._today()]
        if not due:
            return {"success": False, "error": f"No settlements due for {account_id} on {self.business_date}"}
        total = 0.0
        for sid in due:
            self.settlements[sid]["status"] = "settled"
            total += self.settlements[sid]["amount"]
        account["unsettled_cash"] = round(max(0.0, account["unsettled_cash"] - total), 2)
        return {"success": True, "message": f"Settled {len(due)} trade(s) for {account_id}",
                "settlement_ids": due, "amount_settled": round(total, 2),
                "unsettled_cash": account["unsettled_cash"]}

    # ------------------------------------------------------------------ orders

    def place_order(self, account_id: str, symbol: str, side: str, order_type: str, quantity: int,
                    limit_price: float | None = None, time_in_force: str = "day") -> dict:
        """Place a buy or sell order. Buy orders reserve their estimated cost plus commission
        (market buys are reserved at the last price plus the 5% collar); sell orders reserve the
        shares.

        Rules: the account must be active (restricted accounts may only sell); the instrument
        must be tradable; quantity is a positive whole number; market orders need an open market
        and are day orders; limit orders need a positive limit price; time in force is "day" or
        "gtc". Buys must fit within buying power (settled cash for cash accounts; cash plus 50%
        of marginable holdings for margin accounts). Sells cannot exceed the unreserved shares
        held (no short selling).

        Args:
            account_id: Brokerage account id, e.g. "BA1001".
            symbol: Ticker symbol, e.g. "NVLT".
            side: "buy" or "sell".
            order_type: "market" or "limit".
            quantity: Number of shares, a positive integer.
            limit_price: Limit price per share, required for limit orders, omitted for market orders.
            time_in_force: "day" (default) or "gtc" (good till cancelled, limit orders only).

        Returns:
            The order id and the amount or quantity reserved.
        """
        account = self._find(self.accounts, account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        inst = self._find(self.instruments, symbol)
        if inst is None:
            return {"success": False, "error": f"Unknown symbol {symbol}"}
        if side not in ("buy", "sell"):
            return {"success": False, "error": "side must be 'buy' or 'sell'"}
        if order_type not in ("market", "limit"):
            return {"success": False, "error": "order_type must be 'market' or 'limit'"}
        if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity <= 0:
            return {"success": False, "error": "quantity must be a positive integer"}
        if time_in_force not in ("day", "gtc"):
            return {"success": False, "error": "time_in_force must be 'day' or 'gtc'"}
        if order_type == "limit":
            if not _is_price(limit_price):
                return {"success": False, "error": "Limit orders need a positive limit_price (max 4 decimals)"}
        else:
            if limit_price is not None:
                return {"success": False, "error": "Market orders cannot carry a limit_price"}
            if time_in_force != "day":
                return {"success": False, "error": "Market orders must be day orders"}
            if self.market_status != "open":
                return {"success": False,
                        "error": f"Market orders are not accepted while the market is {self.market_status}"}
        if account["status"] == "closed":
            return {"success": False, "error": f"Account {account_id} is closed"}
        if account["status"] == "restricted" and side == "buy":
            return {"success": False, "error": f"Account {account_id} is restricted; only closing sells are allowed"}
        if not inst["tradable"]:
            return {"success": False, "error": f"{symbol} is halted and cannot be traded"}
        order_id = self._next_id(self.orders, "ORD")
        order = {"account_id": account_id, "symbol": symbol, "side": side, "order_type": order_type,
                 "quantity": quantity, "limit_price": float(limit_price) if limit_price is not None else None,
                 "time_in_force": time_in_force, "status": "open", "filled_quantity": 0, "avg_fill_price": None,
                 "reserved_amount": 0.0, "placed_on": self.business_date,
                 "created_at": datetime.datetime.now().isoformat(timespec="seconds")}
        if side == "buy":
            price = limit_price if order_type == "limit" else inst["last_price"] * (1 + self.MARKET_ORDER_COLLAR)
            value = quantity * price
            reserve = round(value + self._commission(quantity, value), 2)
            power = self._buying_power(account_id)
            if reserve > power:
                return {"success": False,
                        "error": f"Insufficient buying power: {reserve:.2f} needed, {power:.2f} available"}
            order["reserved_amount"] = reserve
            account["reserved_cash"] = round(account["reserved_cash"] + reserve, 2)
            self.orders[order_id] = order
            return {"success": True, "message": f"Buy order {order_id} for {quantity} {symbol} accepted",
                    "order_id": order_id, "reserved_cash": reserve}
        pos = self.positions.get(account_id, {}).get(symbol)
        free = pos["quantity"] - pos["reserved_qty"] if pos else 0
        if quantity > free:
            return {"success": False, "error": f"Only {free} share(s) of {symbol} available to sell"}
        pos["reserved_qty"] += quantity
        self.orders[order_id] = order
        return {"success": True, "message": f"Sell order {order_id} for {quantity} {symbol} accepted",
                "order_id": order_id, "reserved_qty": quantity}

    def cancel_order(self, order_id: str) -> dict:
        """Cancel the unfilled part of a working order and release its reservation.

        Args:
            order_id: Order id, e.g. "ORD5001".

        Returns:
            The quantity cancelled.
        """
        order = self._find(self.orders, order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found"}
        if order["status"] not in ("open", "partially_filled"):
            return {"success": False, "error": f"Order {order_id} is {order['status']} and cannot be cancelled"}
        remaining = order["quantity"] - order["filled_quantity"]
        if order["side"] == "buy":
            account = self.accounts[order["account_id"]]
            account["reserved_cash"] = round(max(0.0, account["reserved_cash"] - order["reserved_amount"]), 2)
            order["reserved_amount"] = 0.0
        else:
            pos = self.positions[order["account_id"]][order["symbol"]]
            pos["reserved_qty"] -= remaining
        order["status"] = "cancelled"
        return {"success": True, "message": f"Order {order_id} cancelled", "cancelled_quantity": remaining}

    def fill_order(self, order_id: str, quantity: int, price: float) -> dict:
        """Book an execution report from the exchange against a working order.

        Rules: the market must be open and the instrument not halted; quantity must not exceed
        the unfilled quantity; buy limit orders fill at or below, sell limit orders at or above
        their limit; market orders fill
        within 5% of the last price. Commission is the larger of the minimum and the per-share
        rate, capped at 1% of the trade value; sells also pay the regulatory fee. A buy debits
        cash, releases the matching share of the reservation and updates the average cost; a
        sell credits unsettled proceeds (settling T+1) and books realized profit. The fill price
        becomes the instrument's last price.

        Args:
            order_id: Order id, e.g. "ORD5001".
            quantity: Shares executed, a positive integer.
            price: Execution price per share.

        Returns:
            The fill id, commission and the order's new status.
        """
        order = self._find(self.orders, order_id)
        if order is None:
            return {"success": False, "error": f"Order {order_id} not found"}
        if order["status"] not in ("open", "partially_filled"):
            return {"success": False, "error": f"Order {order_id} is {order['status']}"}
        if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity <= 0:
            return {"success": False, "error": "quantity must be a positive integer"}
        if not _is_price(price):
            return {"success": False, "error": "price must be positive with at most 4 decimals"}
        if self.market_status != "open":
            return {"success": False, "error": f"No executions while the market is {self.market_status}"}
        remaining = order["quantity"] - order["filled_quantity"]
        if quantity > remaining:
            return {"success": False, "error": f"Only {remaining} share(s) of {order_id} remain unfilled"}
        inst = self.instruments[order["symbol"]]
        if not inst["tradable"]:
            return {"success": False, "error": f"{order['symbol']} is halted; no executions until the halt is lifted"}
        if order["order_type"] == "limit":
            if order["side"] == "buy" and price > order["limit_price"]:
                return {"success": False, "error": f"Fill price {price} is above the buy limit {order['limit_price']}"}
            if order["side"] == "sell" and price < order["limit_price"]:
                return {"success": False, "error": f"Fill price {price} is below the sell limit {order['limit_price']}"}
        elif abs(price - inst["last_price"]) > inst["last_price"] * self.MARKET_ORDER_COLLAR:
            return {"success": False,
                    "error": f"Fill price {price} is outside the 5% collar around {inst['last_price']}"}
        account = self.accounts[order["account_id"]]
        value = round(quantity * price, 2)
        commission = self._commission(quantity, value)
        fees = self._regulatory_fee(value) if order["side"] == "sell" else 0.0
        trade_date = self._today()
        settle_date = _add_business_days(trade_date, self.SETTLEMENT_DAYS).isoformat()
        fill_id = self._next_id(self.fills, "F")
        holdings = self.positions.setdefault(order["account_id"], {})
        symbol = order["symbol"]
        if order["side"] == "buy":
            release = order["reserved_amount"] if quantity == remaining else \
                round(order["reserved_amount"] * quantity / remaining, 2)
            order["reserved_amount"] = round(order["reserved_amount"] - release, 2)
            account["reserved_cash"] = round(max(0.0, account["reserved_cash"] - release), 2)
            account["cash_balance"] = round(account["cash_balance"] - value - commission, 2)
            pos = holdings.get(symbol)
            if pos is None:
                holdings[symbol] = {"quantity": quantity, "avg_cost": float(price), "reserved_qty": 0}
            else:
                total = pos["quantity"] + quantity
                pos["avg_cost"] = round((pos["quantity"] * pos["avg_cost"] + value) / total, 4)
                pos["quantity"] = total
        else:
            pos = holdings[symbol]
            net = round(value - commission - fees, 2)
            account["cash_balance"] = round(account["cash_balance"] + net, 2)
            account["unsettled_cash"] = round(account["unsettled_cash"] + net, 2)
            account["realized_pnl_ytd"] = round(account["realized_pnl_ytd"] + value - quantity * pos["avg_cost"]
                                                - commission - fees, 2)
            if pos["quantity"] == quantity:
                del holdings[symbol]
            else:
                pos["quantity"] -= quantity
                pos["reserved_qty"] -= quantity
            self.settlements[self._next_id(self.settlements, "S")] = {
                "account_id": order["account_id"], "fill_id": fill_id, "amount": net,
                "settle_date": settle_date, "status": "pending"}
        account["commissions_ytd"] = round(account["commissions_ytd"] + commission, 2)
        previous_value = order["filled_quantity"] * (order["avg_fill_price"] or 0.0)
        order["filled_quantity"] += quantity
        order["avg_fill_price"] = round((previous_value + value) / order["filled_quantity"], 4)
        order["status"] = "filled" if order["filled_quantity"] == order["quantity"] else "partially_filled"
        inst["last_price"] = float(price)
        self.fills[fill_id] = {"order_id": order_id, "account_id": order["account_id"], "symbol": symbol,
                               "side": order["side"], "quantity": quantity, "price": float(price),
                               "commission": commission, "fees": fees, "trade_date": trade_date.isoformat(),
                               "settle_date": settle_date}
        return {"success": True, "message": f"Filled {quantity} {symbol} at {price} on {order_id}",
                "fill_id": fill_id, "commission": commission, "fees": fees, "order_status": order["status"],
                "cash_balance": account["cash_balance"]}

    # ------------------------------------------------------------------ market data and risk

    def update_price(self, symbol: str, last_price: float) -> dict:
        """Record a new last-sale price from the market-data feed. A move of more than 20% from
        the previous close trips the circuit breaker and halts the instrument.

        Args:
            symbol: Ticker symbol, e.g. "NVLT".
            last_price: New last price per share.

        Returns:
            The new price and whether trading was halted.
        """
        inst = self._find(self.instruments, symbol)
        if inst is None:
            return {"success": False, "error": f"Unknown symbol {symbol}"}
        if not _is_price(last_price):
            return {"success": False, "error": "last_price must be positive with at most 4 decimals"}
        if not inst["tradable"]:
            return {"success": False, "error": f"{symbol} is halted; prices resume after the halt is lifted"}
        inst["last_price"] = float(last_price)
        halted = abs(last_price / inst["prev_close"] - 1) > self.CIRCUIT_BREAKER
        if halted:
            inst["tradable"] = False
        return {"success": True, "message": f"{symbol} last price {last_price}", "halted": halted}

    def issue_margin_call(self, account_id: str) -> dict:
        """Issue a maintenance margin call on a margin account whose equity has fallen below 25%
        of its long market value. The account is restricted to closing sells until the call is
        met; the call is due two business days later.

        Args:
            account_id: Brokerage account id, e.g. "BA1002".

        Returns:
            The call amount and due date.
        """
        account = self._find(self.accounts, account_id)
        if account is None:
            return {"success": False, "error": f"Account {account_id} not found"}
        if account["account_type"] != "margin":
            return {"success": False, "error": f"Account {account_id} is a cash account"}
        if account["margin_call"] is not None:
            return {"success": False, "error": f"Account {account_id} already has an open margin call"}
        if account["status"] != "active":
            return {"success": False, "error": f"Account {account_id} is {account['status']}"}
        _, _, _, excess = self._margin_status(account_id)
        if excess >= 0:
            return {"success": False, "error": f"Account {account_id} meets maintenance margin (excess {excess:.2f})"}
        due = _add_business_days(self._today(), self.MARGIN_CALL_DAYS).isoformat()
        account["margin_call"] = {"amount": round(-excess, 2), "issued_on": self.business_date, "due_date": due}
        account["status"] = "restricted"
        return {"success": True, "message": f"Margin call of {-excess:.2f} issued to {account_id}",
                "amount": round(-excess, 2), "due_date": due}
