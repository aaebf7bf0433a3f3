"""Online auction marketplace: listings, bidding with increments and holds, reserves, closing and seller payouts."""

import datetime
import uuid
from typing import Optional


class AuctionMarketplace:
    """Timed auctions for second-hand watches, cameras, audio and collectibles.

    Buyers bid from a prepaid balance: the leading bid of every auction is held on the
    bidder's balance until they are outbid or the auction closes. The marketplace clock is
    ``settings.now``; auctions end at ``ends_at`` and are closed by the operator. Sold items
    create a pending payout to the seller, net of the category's final-value fee.
    """

    def __init__(self, init_config: dict):
        self.settings = {}
        self.categories = {}
        self.users = {}
        self.listings = {}
        self.bids = {}
        self.payouts = {}
        self.platform = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _money(value: float) -> float:
        return round(float(value) + 1e-9, 2)

    @staticmethod
    def _is_amount(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0

    def _now(self) -> datetime.datetime:
        return datetime.datetime.fromisoformat(self.settings["now"])

    def _increment(self, price: float) -> float:
        for upper, step in self.settings["increments"]:
            if upper is None or price < upper:
                return step
        return self.settings["increments"][-1][1]

    def _min_next_bid(self, listing: dict) -> float:
        if listing["current_bid"] is None:
            return listing["starting_price"]
        return self._money(listing["current_bid"] + self._increment(listing["current_bid"]))

    def _fee(self, category: str, price: float) -> float:
        pct = self.categories[category]["fee_percent"]
        return max(self.settings["min_fee"], self._money(price * pct / 100.0))

    def _leading_bid_id(self, listing_id: str) -> Optional[str]:
        for bid_id, bid in self.bids.items():
            if bid["listing_id"] == listing_id and bid["status"] == "leading":
                return bid_id
        return None

    def _user(self, user_id, role: str):
        if not isinstance(user_id, str) or user_id not in self.users:
            return None, {"success": False, "error": f"User {user_id} not found"}
        user = self.users[user_id]
        if user["status"] != "active":
            return None, {"success": False, "error": f"{role.capitalize()} {user_id} is {user['status']}"}
        return user, None

    def _new_payout(self, listing_id: str, listing: dict, price: float) -> str:
        number = self.counters["payout"] + 1
        payout_id = f"PO-{number}"
        fee = self._fee(listing["category"], price)
        self.payouts[payout_id] = {"listing_id": listing_id, "seller_id": listing["seller_id"], "gross": price,
                                   "fee": fee, "net": self._money(price - fee), "status": "pending",
                                   "created_at": self.settings["now"], "paid_at": None, "transfer_reference": None}
        self.counters["payout"] = number
        return payout_id

    # ------------------------------------------------------------------ queries
    def list_active_listings(self, category: Optional[str] = None) -> dict:
        """List auctions that are still running, with current price and the minimum next bid.

        Args:
            category: Optional category id filter (e.g. "watches", "cameras").
        Returns:
            data: list of {listing_id, title, category, current_bid, min_next_bid, bid_count,
            buy_now_price, ends_at}, soonest ending first.
        """
        if category is not None and (not isinstance(category, str) or category not in self.categories):
            return {"success": False, "error": f"Unknown category {category}"}
        now = self.settings["now"]
        rows = []
        for lid, l in self.listings.items():
            if l["status"] != "active" or l["ends_at"] <= now or (category and l["category"] != category):
                continue
            rows.append({"listing_id": lid, "title": l["title"], "category": l["category"], "current_bid": l["current_bid"],
                         "min_next_bid": self._min_next_bid(l), "bid_count": l["bid_count"],
                         "buy_now_price": l["buy_now_price"] if l["bid_count"] == 0 else None, "ends_at": l["ends_at"]})
        rows.sort(key=lambda r: (r["ends_at"], r["listing_id"]))
        return {"success": True, "data": rows}

    def get_listing(self, listing_id: str) -> dict:
        """Show a listing with its bid history (highest first). The reserve amount is not disclosed,
        only whether it has been met.

        Args:
            listing_id: Listing id, e.g. "L-2002".
        """
        if not isinstance(listing_id, str) or listing_id not in self.listings:
            return {"success": False, "error": f"Listing {listing_id} not found"}
        l = self.listings[listing_id]
        data = {"listing_id": listing_id}
        data.update({k: v for k, v in l.items() if k != "reserve_price"})
        data["has_reserve"] = l["reserve_price"] is not None
        data["reserve_met"] = l["reserve_price"] is None or (l["current_bid"] is not None and l["current_bid"] >= l["reserve_price"])
        data["min_next_bid"] = self._min_next_bid(l) if l["status"] == "active" else None
        history = [{"bid_id": bid_id, "bidder_id": b["bidder_id"], "amount": b["amount"], "status": b["status"], "placed_at": b["placed_at"]}
                   for bid_id, b in self.bids.items() if b["listing_id"] == listing_id]
        history.sort(key=lambda h: (-h["amount"], h["bid_id"]))
        data["bids"] = history
        return {"success": True, "data": data}

    def get_user(self, user_id: str) -> dict:
        """Show a user's account: balance, amount held by leading bids, available funds, rating and sales.

        Args:
            user_id: User id, e.g. "U-1003".
        """
        if not isinstance(user_id, str) or user_id not in self.users:
            return {"success": False, "error": f"User {user_id} not found"}
        u = self.users[user_id]
        data = {"user_id": user_id}
        data.update(u)
        data["available"] = self._money(u["balance"] - u["held"])
        return {"success": True, "data": data}

    def list_user_bids(self, user_id: str) -> dict:
        """List all bids a user has placed, newest first, with the listing title and status.

        Args:
            user_id: User id.
        """
        if not isinstance(user_id, str) or user_id not in self.users:
            return {"success": False, "error": f"User {user_id} not found"}
        rows = [{"bid_id": bid_id, "listing_id": b["listing_id"], "title": self.listings[b["listing_id"]]["title"],
                 "amount": b["amount"], "status": b["status"], "placed_at": b["placed_at"]}
                for bid_id, b in self.bids.items() if b["bidder_id"] == user_id]
        rows.sort(key=lambda r: (r["placed_at"], r["bid_id"]), reverse=True)
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ selling
    def create_listing(self, seller_id: str, title: str, category: str, starting_price: float, duration_days: int,
                       reserve_price: Optional[float] = None, buy_now_price: Optional[float] = None) -> dict:
        """Put an item up for auction starting now.

        Args:
            seller_id: Active, verified seller.
            title: Item title (5-120 characters).
            category: Category id from the categories table.
            starting_price: Opening price, > 0.
            duration_days: Auction length in whole days, between settings.min_duration_days and max_duration_days.
            reserve_price: Optional hidden minimum; must be at least the starting price.
            buy_now_price: Optional instant-purchase price; must exceed the starting price and the reserve.
        """
        seller, err = self._user(seller_id, "seller")
        if err:
            return err
        if not seller["verified_seller"]:
            return {"success": False, "error": f"User {seller_id} is not a verified seller"}
        if not isinstance(title, str) or not 5 <= len(title.strip()) <= 120:
            return {"success": False, "error": "title must be 5-120 characters"}
        if not isinstance(category, str) or category not in self.categories:
            return {"success": False, "error": f"Unknown category {category}"}
        if not self._is_amount(starting_price):
            return {"success": False, "error": "starting_price must be a positive number"}
        lo, hi = self.settings["min_duration_days"], self.settings["max_duration_days"]
        if not isinstance(duration_days, int) or isinstance(duration_days, bool) or not lo <= duration_days <= hi:
            return {"success": False, "error": f"duration_days must be an integer from {lo} to {hi}"}
        if reserve_price is not None:
            if not self._is_amount(reserve_price) or reserve_price < starting_price:
                return {"success": False, "error": "reserve_price must be a number at least equal to the starting price"}
        if buy_now_price is not None:
            floor = max(starting_price, reserve_price or 0)
            if not self._is_amount(buy_now_price) or buy_now_price <= floor:
                return {"success": False, "error": f"buy_now_price must be higher than {floor:.2f}"}
        number = self.counters["listing"] + 1
        listing_id = f"L-{number}"
        ends = (self._now() + datetime.timedelta(days=duration_days)).isoformat(timespec="seconds")
        self.listings[listing_id] = {
            "seller_id": seller_id, "title": title.strip(), "category": category, "starting_price": self._money(starting_price),
            "reserve_price": self._money(reserve_price) if reserve_price is not None else None,
            "buy_now_price": self._money(buy_now_price) if buy_now_price is not None else None,
            "current_bid": None, "high_bidder": None, "bid_count": 0, "status": "active",
            "starts_at": self.settings["now"], "ends_at": ends, "winner_id": None, "final_price": None,
            "payout_id": None, "closed_at": None, "cancel_reason": None,
        }
        self.counters["listing"] = number
        return {"success": True, "message": f"Listing {listing_id} is live until {ends}", "listing_id": listing_id, "ends_at": ends}

    def lower_reserve(self, listing_id: str, new_reserve: float) -> dict:
        """Lower the reserve price of a running auction (reserves can never be raised).

        Args:
            listing_id: Active listing with a reserve.
            new_reserve: New reserve, lower than the current one and not below the starting price.
        """
        if not isinstance(listing_id, str) or listing_id not in self.listings:
            return {"success": False, "error": f"Listing {listing_id} not found"}
        l = self.listings[listing_id]
        if l["status"] != "active":
            return {"success": False, "error": f"Listing {listing_id} is {l['status']}"}
        if l["reserve_price"] is None:
            return {"success": False, "error": f"Listing {listing_id} has no reserve"}
        if not self._is_amount(new_reserve):
            return {"success": False, "error": "new_reserve must be a positive number"}
        if new_reserve >= l["reserve_price"]:
            return {"success": False, "error": f"The reserve can only be lowered (currently {l['reserve_price']:.2f})"}
        if new_reserve < l["starting_price"]:
            return {"success": False, "error": f"The reserve cannot be below the starting price {l['starting_price']:.2f}"}
        l["reserve_price"] = self._money(new_reserve)
        return {"success": True, "message": f"Reserve of {listing_id} lowered to {l['reserve_price']:.2f}"}

    def cancel_listing(self, listing_id: str, reason: str) -> dict:
        """Withdraw a running auction that has not received any bids.

        Args:
            listing_id: Active listing id.
            reason: Why the seller withdraws the item.
        """
        if not isinstance(listing_id, str) or listing_id not in self.listings:
            return {"success": False, "error": f"Listing {listing_id} not found"}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "A reason is required"}
        l = self.listings[listing_id]
        if l["status"] != "active":
            return {"success": False, "error": f"Listing {listing_id} is {l['status']}"}
        if l["bid_count"] > 0:
            return {"success": False, "error": f"Listing {listing_id} has {l['bid_count']} bids and can no longer be withdrawn"}
        l["status"] = "cancelled"
        l["cancel_reason"] = reason.strip()
        l["closed_at"] = self.settings["now"]
        return {"success": True, "message": f"Listing {listing_id} withdrawn"}

    # ------------------------------------------------------------------ buying
    def place_bid(self, listing_id: str, bidder_id: str, amount: float) -> dict:
        """Bid on a running auction.

        Args:
            listing_id: Active listing whose end time has not passed.
            bidder_id: Active user who is not the seller.
            amount: Bid amount; the first bid must reach the starting price, later bids the
                current bid plus the increment for that price level (settings.increments).
        Rules: the amount of the leading bid is held on the bidder's balance (a leader raising
        their own bid only adds the difference); the previous leader's hold is released and
        their bid marked outbid (a leader's own earlier bid becomes superseded). A bid within settings.snipe_window_minutes of the end extends
        the auction to now + that window.
        """
        if not isinstance(listing_id, str) or listing_id not in self.listings:
            return {"success": False, "error": f"Listing {listing_id} not found"}
        l = self.listings[listing_id]
        if l["status"] != "active":
            return {"success": False, "error": f"Listing {listing_id} is {l['status']}"}
        if l["ends_at"] <= self.settings["now"]:
            return {"success": False, "error": f"Auction {listing_id} ended at {l['ends_at']}"}
        bidder, err = self._user(bidder_id, "bidder")
        if err:
            return err
        if bidder_id == l["seller_id"]:
            return {"success": False, "error": "Sellers cannot bid on their own listings"}
        if not self._is_amount(amount):
            return {"success": False, "error": "amount must be a positive number"}
        amount = self._money(amount)
        minimum = self._min_next_bid(l)
        if amount < minimum:
            return {"success": False, "error": f"Bid must be at least {minimum:.2f}"}
        own_raise = l["high_bidder"] == bidder_id
        extra_hold = amount - (l["current_bid"] if own_raise else 0)
        available = self._money(bidder["balance"] - bidder["held"])
        if extra_hold > available + 1e-9:
            return {"success": False, "error": f"Insufficient available funds: need {extra_hold:.2f}, available {available:.2f}"}
        previous_bid_id = self._leading_bid_id(listing_id)
        if previous_bid_id:
            self.bids[previous_bid_id]["status"] = "superseded" if own_raise else "outbid"
        if l["high_bidder"] and not own_raise:
            previous = self.users[l["high_bidder"]]
            previous["held"] = self._money(previous["held"] - l["current_bid"])
        bidder["held"] = self._money(bidder["held"] + extra_hold)
        number = self.counters["bid"] + 1
        bid_id = f"BD-{number}"
        self.bids[bid_id] = {"listing_id": listing_id, "bidder_id": bidder_id, "amount": amount,
                             "placed_at": self.settings["now"], "status": "leading"}
        self.counters["bid"] = number
        l["current_bid"] = amount
        l["high_bidder"] = bidder_id
        l["bid_count"] += 1
        result = {"success": True, "message": f"Bid {bid_id} of {amount:.2f} is leading on {listing_id}", "bid_id": bid_id}
        window = datetime.timedelta(minutes=self.settings["snipe_window_minutes"])
        if datetime.datetime.fromisoformat(l["ends_at"]) - self._now() < window:
            l["ends_at"] = (self._now() + window).isoformat(timespec="seconds")
            result["ends_at"] = l["ends_at"]
        reserve = l["reserve_price"]
        result["reserve_met"] = reserve is None or amount >= reserve
        return result

    def buy_now(self, listing_id: str, buyer_id: str) -> dict:
        """Buy an item instantly at its buy-now price.

        Args:
            listing_id: Active listing with a buy-now price and no bids yet.
            buyer_id: Active user (not the seller) whose available funds cover the price.
        Rules: the price is taken from the buyer's balance, the listing is sold, the seller's
        sale is counted and a pending payout net of the category fee is created.
        """
        if not isinstance(listing_id, str) or listing_id not in self.listings:
            return {"success": False, "error": f"Listing {listing_id} not found"}
        l = self.listings[listing_id]
        if l["status"] != "active" or l["ends_at"] <= self.settings["now"]:
            return {"success": False, "error": f"Listing {listing_id} is not open for purchase"}
        if l["buy_now_price"] is None:
            return {"success": False, "error": f"Listing {listing_id} has no buy-now price"}
        if l["bid_count"] > 0:
            return {"success": False, "error": "Buy-now is no longer available once bidding has started"}
        buyer, err = self._user(buyer_id, "buyer")
        if err:
            return err
        if buyer_id == l["seller_id"]:
            return {"success": False, "error": "Sellers cannot buy their own listings"}
        price = l["buy_now_price"]
        available = self._money(buyer["balance"] - buyer["held"])
        if price > available + 1e-9:
            return {"success": False, "error": f"Insufficient available funds: price {price:.2f}, available {available:.2f}"}
        buyer["balance"] = self._money(buyer["balance"] - price)
        payout_id = self._new_payout(listing_id, l, price)
        l["status"] = "sold"
        l["winner_id"] = buyer_id
        l["final_price"] = price
        l["payout_id"] = payout_id
        l["closed_at"] = self.settings["now"]
        self.users[l["seller_id"]]["completed_sales"] += 1
        return {"success": True, "message": f"{buyer_id} bought {listing_id} for {price:.2f}", "payout_id": payout_id}

    # ------------------------------------------------------------------ closing and payouts
    def close_auction(self, listing_id: str) -> dict:
        """Settle an auction whose end time has passed.

        Args:
            listing_id: Active listing with ends_at at or before settings.now.
        Rules: with no bids, or a leading bid below the reserve, the item is unsold and the
        leader's hold released (their bid marked lost). Otherwise the leading bid wins: the held
        amount is taken from the winner's balance, the bid is marked won, the seller's sale is
        counted and a pending payout net of the category fee is created.
        """
        if not isinstance(listing_id, str) or listing_id not in self.listings:
            return {"success": False, "error": f"Listing {listing_id} not found"}
        l = self.listings[listing_id]
        if l["status"] != "active":
            return {"success": False, "error": f"Listing {listing_id} is already {l['status']}"}
        if l["ends_at"] > self.settings["now"]:
            return {"success": False, "error": f"Auction {listing_id} runs until {l['ends_at']}"}
        l["closed_at"] = self.settings["now"]
        leading = self._leading_bid_id(listing_id)
        if l["current_bid"] is None or leading is None:
            l["status"] = "unsold"
            return {"success": True, "message": f"Auction {listing_id} closed without bids", "outcome": "unsold"}
        winner = self.users[l["high_bidder"]]
        price = l["current_bid"]
        if l["reserve_price"] is not None and price < l["reserve_price"]:
            winner["held"] = self._money(winner["held"] - price)
            self.bids[leading]["status"] = "lost"
            l["status"] = "unsold"
            return {"success": True, "message": f"Auction {listing_id} closed: reserve not met", "outcome": "unsold"}
        winner["held"] = self._money(winner["held"] - price)
        winner["balance"] = self._money(winner["balance"] - price)
        self.bids[leading]["status"] = "won"
        payout_id = self._new_payout(listing_id, l, price)
        l["status"] = "sold"
        l["winner_id"] = l["high_bidder"]
        l["final_price"] = price
        l["payout_id"] = payout_id
        self.users[l["seller_id"]]["completed_sales"] += 1
        return {"success": True, "message": f"Auction {listing_id} sold to {l['winner_id']} for {price:.2f}",
                "outcome": "sold", "payout_id": payout_id}

    def release_payout(self, payout_id: str) -> dict:
        """Pay a pending seller payout into the seller's balance and book the fee as platform revenue.

        Args:
            payout_id: Pending payout id, e.g. "PO-3001".
        Rules: payouts to suspended sellers are frozen.
        """
        if not isinstance(payout_id, str) or payout_id not in self.payouts:
            return {"success": False, "error": f"Payout {payout_id} not found"}
        p = self.payouts[payout_id]
        if p["status"] != "pending":
            return {"success": False, "error": f"Payout {payout_id} is already {p['status']}"}
        seller = self.users[p["seller_id"]]
        if seller["status"] != "active":
            return {"success": False, "error": f"Seller {p['seller_id']} is {seller['status']}; payout frozen"}
        seller["balance"] = self._money(seller["balance"] + p["net"])
        self.platform["fee_revenue"] = self._money(self.platform["fee_revenue"] + p["fee"])
        p["status"] = "paid"
        p["paid_at"] = self.settings["now"]
        p["transfer_reference"] = "TRF-" + uuid.uuid4().hex[:10].upper()
        return {"success": True, "message": f"Payout {payout_id} of {p['net']:.2f} released to {p['seller_id']}"}

    def deposit_funds(self, user_id: str, amount: float) -> dict:
        """Add money to a user's marketplace balance.

        Args:
            user_id: Active user id.
            amount: Positive amount, at most settings.max_deposit per deposit.
        """
        user, err = self._user(user_id, "user")
        if err:
            return err
        if not self._is_amount(amount):
            return {"success": False, "error": "amount must be a positive number"}
        if amount > self.settings["max_deposit"]:
            return {"success": False, "error": f"A single deposit is limited to {self.settings['max_deposit']:.2f}"}
        user["balance"] = self._money(user["balance"] + amount)
        return {"success": True, "message": f"Deposited {amount:.2f} for {user_id}", "balance": user["balance"]}
