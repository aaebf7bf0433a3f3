"""Online shop back office: catalog, carts, checkout with wallet payments, shipping and returns."""

import datetime
import uuid
from typing import Optional


class OnlineShop:
    """A small web shop where customers pay from a prepaid wallet.

    Stock is tracked per product as ``on_hand`` (physically in the warehouse) and
    ``reserved`` (promised to placed orders that have not shipped). Checkout reserves
    stock and charges the wallet; shipping consumes the reservation; cancellations and
    approved returns refund the wallet.
    """

    RETURN_REASONS = ("damaged", "wrong_item", "not_as_described", "changed_mind", "too_small", "too_large")

    def __init__(self, init_config: dict):
        self.customers = {}
        self.products = {}
        self.carts = {}
        self.coupons = {}
        self.orders = {}
        self.payments = {}
        self.returns = {}
        self.settings = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _money(value: float) -> float:
        return round(float(value) + 1e-9, 2)

    def _today(self) -> datetime.date:
        return datetime.date.fromisoformat(self.settings.get("business_date", "2025-01-01"))

    def _available(self, sku: str) -> int:
        product = self.products[sku]
        return product["on_hand"] - product["reserved"]

    def _coupon_problem(self, code: str, subtotal: float) -> Optional[str]:
        coupon = self.coupons.get(code)
        if coupon is None:
            return f"Coupon {code} does not exist"
        if not coupon.get("active", False):
            return f"Coupon {code} is not active"
        if datetime.date.fromisoformat(coupon["expires_on"]) < self._today():
            return f"Coupon {code} expired on {coupon['expires_on']}"
        if coupon["uses"] >= coupon["max_uses"]:
            return f"Coupon {code} has reached its usage limit"
        if subtotal < coupon["min_subtotal"]:
            return (f"Coupon {code} requires a subtotal of at least {coupon['min_subtotal']:.2f}; "
                    f"cart subtotal is {subtotal:.2f}")
        return None

    def _discount(self, code: Optional[str], subtotal: float) -> float:
        if not code:
            return 0.0
        coupon = self.coupons[code]
        if coupon["type"] == "percent":
            return self._money(subtotal * coupon["value"] / 100.0)
        return self._money(min(coupon["value"], subtotal))

    def _cart_subtotal(self, items: dict) -> float:
        return self._money(sum(self.products[sku]["price"] * qty for sku, qty in items.items()))

    def _active_customer(self, customer_id: str):
        if not isinstance(customer_id, str) or customer_id not in self.customers:
            return None, {"success": False, "error": f"Customer {customer_id} not found"}
        customer = self.customers[customer_id]
        if customer.get("status") != "active":
            return None, {"success": False, "error": f"Customer {customer_id} is {customer.get('status')}"}
        return customer, None

    # ------------------------------------------------------------------ queries
    def list_products(self, category: Optional[str] = None) -> dict:
        """List active catalog products with the quantity available to sell.

        Args:
            category: Optional category filter (e.g. "audio", "kitchen"). Must be a category
                that exists in the catalog.
        Returns:
            data: list of {sku, name, category, price, available}, sorted by sku.
        """
        if category is not None:
            if not isinstance(category, str) or not category.strip():
                return {"success": False, "error": "category must be a non-empty string"}
            if not any(p["category"] == category for p in self.products.values()):
                return {"success": False, "error": f"Unknown category {category}"}
        rows = []
        for sku in sorted(self.products):
            p = self.products[sku]
            if p["status"] != "active" or (category is not None and p["category"] != category):
                continue
            rows.append({"sku": sku, "name": p["name"], "category": p["category"],
                         "price": p["price"], "available": self._available(sku)})
        return {"success": True, "data": rows}

    def get_customer(self, customer_id: str) -> dict:
        """Show a customer's profile, wallet balance and current cart.

        Args:
            customer_id: Customer id, e.g. "C1001".
        """
        if not isinstance(customer_id, str) or customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        c = self.customers[customer_id]
        cart = self.carts.get(customer_id, {"items": {}, "coupon_code": None})
        return {"success": True, "data": {
            "customer_id": customer_id, "name": c["name"], "email": c["email"], "status": c["status"],
            "wallet_balance": c["wallet_balance"], "order_count": c["order_count"],
            "cart": {"items": dict(cart["items"]), "coupon_code": cart.get("coupon_code"),
                     "subtotal": self._cart_subtotal(cart["items"])}}}

    def get_order(self, order_id: str) -> dict:
        """Show an order with its lines, totals, shipping details and payment status.

        Args:
            order_id: Order id, e.g. "O1004".
        """
        if not isinstance(order_id, str) or order_id not in self.orders:
            return {"success": False, "error": f"Order {order_id} not found"}
        order = self.orders[order_id]
        payment = self.payments.get(order["payment_id"], {})
        data = {"order_id": order_id}
        data.update(order)
        data["ship_to"] = dict(self.customers[order["customer_id"]].get("address", {}))
        data["payment_status"] = payment.get("status")
        data["refunded"] = payment.get("refunded", 0.0)
        return {"success": True, "data": data}

    # ------------------------------------------------------------------ cart
    def add_to_cart(self, customer_id: str, sku: str, qty: int) -> dict:
        """Add units of a product to the customer's cart (creating the cart if needed).

        Args:
            customer_id: Customer id.
            sku: Product SKU.
            qty: Units to add, a positive integer.
        Rules: the customer must be active, the product active, the resulting line quantity
        may not exceed the per-line limit (settings.max_line_qty) nor the available stock.
        """
        customer, err = self._active_customer(customer_id)
        if err:
            return err
        if not isinstance(qty, int) or isinstance(qty, bool) or qty < 1:
            return {"success": False, "error": "qty must be a positive integer"}
        if not isinstance(sku, str) or sku not in self.products:
            return {"success": False, "error": f"Product {sku} not found"}
        product = self.products[sku]
        if product["status"] != "active":
            return {"success": False, "error": f"Product {sku} is {product['status']} and cannot be ordered"}
        cart = self.carts.get(customer_id)
        current = cart["items"].get(sku, 0) if cart else 0
        new_qty = current + qty
        limit = self.settings.get("max_line_qty", 10)
        if new_qty > limit:
            return {"success": False, "error": f"At most {limit} units of {sku} per order (cart would hold {new_qty})"}
        if new_qty > self._available(sku):
            return {"success": False, "error": f"Only {self._available(sku)} units of {sku} available"}
        if cart is None:
            self.carts[customer_id] = {"items": {sku: new_qty}, "coupon_code": None}
        else:
            cart["items"][sku] = new_qty
        return {"success": True, "message": f"Added {qty} x {sku} to cart", "line_qty": new_qty}

    def remove_from_cart(self, customer_id: str, sku: str, qty: Optional[int] = None) -> dict:
        """Remove a product line from the cart, or reduce it by qty units.

        Args:
            customer_id: Customer id.
            sku: Product SKU in the cart.
            qty: Units to remove; omit to remove the whole line. Removing all units deletes the line.
        """
        if not isinstance(customer_id, str) or customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        cart = self.carts.get(customer_id)
        if not cart or not isinstance(sku, str) or sku not in cart["items"]:
            return {"success": False, "error": f"{sku} is not in the cart of {customer_id}"}
        current = cart["items"][sku]
        if qty is None:
            qty = current
        if not isinstance(qty, int) or isinstance(qty, bool) or qty < 1:
            return {"success": False, "error": "qty must be a positive integer"}
        if qty > current:
            return {"success": False, "error": f"Cart holds only {current} units of {sku}"}
        if qty == current:
            del cart["items"][sku]
            return {"success": True, "message": f"Removed {sku} from cart", "line_qty": 0}
        cart["items"][sku] = current - qty
        return {"success": True, "message": f"Removed {qty} x {sku} from cart", "line_qty": current - qty}

    def apply_coupon(self, customer_id: str, code: str) -> dict:
        """Attach a coupon code to the customer's cart.

        Args:
            customer_id: Customer id.
            code: Coupon code (case-insensitive).
        Rules: the cart must not be empty; the coupon must exist, be active, not be expired
        (compared with settings.business_date), have uses left and the cart subtotal must reach
        the coupon's minimum. Only one coupon per cart; applying a new one replaces the old.
        """
        if not isinstance(customer_id, str) or customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        if not isinstance(code, str) or not code.strip():
            return {"success": False, "error": "code must be a non-empty string"}
        code = code.strip().upper()
        cart = self.carts.get(customer_id)
        if not cart or not cart["items"]:
            return {"success": False, "error": "Cart is empty"}
        if cart.get("coupon_code") == code:
            return {"success": False, "error": f"Coupon {code} is already applied"}
        subtotal = self._cart_subtotal(cart["items"])
        problem = self._coupon_problem(code, subtotal)
        if problem:
            return {"success": False, "error": problem}
        cart["coupon_code"] = code
        discount = self._discount(code, subtotal)
        return {"success": True, "message": f"Coupon {code} applied", "discount": discount}

    # ------------------------------------------------------------------ orders
    def checkout(self, customer_id: str) -> dict:
        """Turn the customer's cart into a paid order.

        Args:
            customer_id: Customer id.
        Rules: every line must still be available; a coupon on the cart is re-validated;
        shipping is free when the discounted subtotal reaches settings.free_shipping_threshold,
        otherwise settings.shipping_fee is added; the wallet must cover the total. On success
        stock is reserved, the wallet charged, a wallet payment recorded, the coupon use
        counted, the customer's order count increased and the cart consumed.
        """
        customer, err = self._active_customer(customer_id)
        if err:
            return err
        cart = self.carts.get(customer_id)
        if not cart or not cart["items"]:
            return {"success": False, "error": "Cart is empty"}
        for sku, qty in cart["items"].items():
            product = self.products[sku]
            if product["status"] != "active":
                return {"success": False, "error": f"Product {sku} is no longer sold; remove it from the cart"}
            if qty > self._available(sku):
                return {"success": False, "error": f"Only {self._available(sku)} units of {sku} available"}
        subtotal = self._cart_subtotal(cart["items"])
        code = cart.get("coupon_code")
        if code:
            problem = self._coupon_problem(code, subtotal)
            if problem:
                return {"success": False, "error": problem}
        discount = self._discount(code, subtotal)
        net = self._money(subtotal - discount)
        shipping = 0.0 if net >= self.settings["free_shipping_threshold"] else self.settings["shipping_fee"]
        total = self._money(net + shipping)
        if customer["wallet_balance"] + 1e-9 < total:
            return {"success": False, "error": (f"Insufficient wallet balance: total {total:.2f}, "
                                                f"balance {customer['wallet_balance']:.2f}")}
        number = self.counters["order"] + 1
        order_id = f"O{number}"
        payment_id = f"PAY-{order_id}"
        placed_at = datetime.datetime.now().isoformat(timespec="seconds")
        items = {}
        for sku, qty in cart["items"].items():
            self.products[sku]["reserved"] += qty
            items[sku] = {"qty": qty, "unit_price": self.products[sku]["price"], "returned_qty": 0}
        customer["wallet_balance"] = self._money(customer["wallet_balance"] - total)
        customer["order_count"] += 1
        if code:
            self.coupons[code]["uses"] += 1
        self.orders[order_id] = {
            "customer_id": customer_id, "status": "placed", "items": items,
            "subtotal": subtotal, "discount": discount, "shipping_fee": shipping, "total": total,
            "coupon_code": code, "payment_id": payment_id, "placed_at": placed_at,
            "carrier": None, "tracking_number": None, "shipped_on": None, "delivered_on": None,
            "cancel_reason": None,
        }
        self.payments[payment_id] = {
            "order_id": order_id, "customer_id": customer_id, "method": "wallet", "amount": total,
            "refunded": 0.0, "status": "captured", "reference": "TXN-" + uuid.uuid4().hex[:12].upper(),
        }
        self.counters["order"] = number
        del self.carts[customer_id]
        return {"success": True, "message": f"Order {order_id} placed; {total:.2f} charged to wallet",
                "order_id": order_id, "total": total}

    def cancel_order(self, order_id: str, reason: str) -> dict:
        """Cancel an order that has not shipped yet.

        Args:
            order_id: Order id.
            reason: Why the order is cancelled (free text, required).
        Rules: only orders in status "placed" can be cancelled. Reserved stock is released,
        the full payment is refunded to the wallet and a coupon use is given back.
        """
        if not isinstance(order_id, str) or order_id not in self.orders:
            return {"success": False, "error": f"Order {order_id} not found"}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "A cancellation reason is required"}
        order = self.orders[order_id]
        if order["status"] != "placed":
            return {"success": False, "error": f"Order {order_id} is {order['status']} and can no longer be cancelled"}
        for sku, line in order["items"].items():
            self.products[sku]["reserved"] -= line["qty"]
        payment = self.payments[order["payment_id"]]
        refund = self._money(payment["amount"] - payment["refunded"])
        customer = self.customers[order["customer_id"]]
        customer["wallet_balance"] = self._money(customer["wallet_balance"] + refund)
        payment["refunded"] = payment["amount"]
        payment["status"] = "refunded"
        if order.get("coupon_code") and order["coupon_code"] in self.coupons:
            coupon = self.coupons[order["coupon_code"]]
            coupon["uses"] = max(0, coupon["uses"] - 1)
        order["status"] = "cancelled"
        order["cancel_reason"] = reason.strip()
        return {"success": True, "message": f"Order {order_id} cancelled; {refund:.2f} refunded to wallet",
                "refunded": refund}

    def ship_order(self, order_id: str, carrier: str) -> dict:
        """Hand a placed order to a carrier.

        Args:
            order_id: Order id in status "placed".
            carrier: One of settings.carriers (e.g. "DHL", "UPS", "PostNL", "DPD").
        Rules: the reserved units leave the warehouse (on_hand and reserved both decrease);
        a tracking number is issued and the ship date is the business date.
        """
        if not isinstance(order_id, str) or order_id not in self.orders:
            return {"success": False, "error": f"Order {order_id} not found"}
        carriers = self.settings.get("carriers", [])
        if carrier not in carriers:
            return {"success": False, "error": f"Unknown carrier {carrier}; use one of {', '.join(carriers)}"}
        order = self.orders[order_id]
        if order["status"] != "placed":
            return {"success": False, "error": f"Order {order_id} is {order['status']}; only placed orders can ship"}
        for sku, line in order["items"].items():
            product = self.products[sku]
            if product["on_hand"] < line["qty"]:
                return {"success": False, "error": f"Warehouse holds only {product['on_hand']} units of {sku}"}
        for sku, line in order["items"].items():
            self.products[sku]["on_hand"] -= line["qty"]
            self.products[sku]["reserved"] -= line["qty"]
        digits = "".join(ch for ch in order_id if ch.isdigit())
        tracking = f"{carrier.upper()[:3]}{self.settings['business_date'].replace('-', '')}{digits}"
        order["status"] = "shipped"
        order["carrier"] = carrier
        order["tracking_number"] = tracking
        order["shipped_on"] = self.settings["business_date"]
        return {"success": True, "message": f"Order {order_id} shipped with {carrier}", "tracking_number": tracking}

    def mark_delivered(self, order_id: str) -> dict:
        """Record carrier confirmation that a shipped order was delivered (on the business date).

        Args:
            order_id: Order id in status "shipped".
        """
        if not isinstance(order_id, str) or order_id not in self.orders:
            return {"success": False, "error": f"Order {order_id} not found"}
        order = self.orders[order_id]
        if order["status"] != "shipped":
            return {"success": False, "error": f"Order {order_id} is {order['status']}; only shipped orders can be delivered"}
        order["status"] = "delivered"
        order["delivered_on"] = self.settings["business_date"]
        return {"success": True, "message": f"Order {order_id} delivered on {order['delivered_on']}"}

    # ------------------------------------------------------------------ returns
    def request_return(self, order_id: str, sku: str, qty: int, reason: str) -> dict:
        """Open a return request for units of a delivered order.

        Args:
            order_id: Delivered order id.
            sku: Product SKU on the order.
            qty: Units to return (positive integer).
            reason: One of damaged, wrong_item, not_as_described, changed_mind, too_small, too_large.
        Rules: the request must be made within settings.return_window_days of delivery;
        categories in settings.non_returnable_categories cannot be returned; the quantity may
        not exceed units ordered minus units already returned or awaiting a return decision.
        """
        if not isinstance(order_id, str) or order_id not in self.orders:
            return {"success": False, "error": f"Order {order_id} not found"}
        order = self.orders[order_id]
        if order["status"] != "delivered":
            return {"success": False, "error": f"Order {order_id} is {order['status']}; only delivered orders can be returned"}
        if not isinstance(sku, str) or sku not in order["items"]:
            return {"success": False, "error": f"{sku} is not part of order {order_id}"}
        if not isinstance(qty, int) or isinstance(qty, bool) or qty < 1:
            return {"success": False, "error": "qty must be a positive integer"}
        if reason not in self.RETURN_REASONS:
            return {"success": False, "error": f"Invalid reason {reason}; use one of {', '.join(self.RETURN_REASONS)}"}
        category = self.products[sku]["category"]
        if category in self.settings.get("non_returnable_categories", []):
            return {"success": False, "error": f"Products in category {category} cannot be returned"}
        delivered = datetime.date.fromisoformat(order["delivered_on"])
        days = (self._today() - delivered).days
        window = self.settings["return_window_days"]
        if days > window:
            return {"success": False, "error": f"Return window closed: delivered {days} days ago, limit is {window} days"}
        pending = sum(r["qty"] for r in self.returns.values()
                      if r["order_id"] == order_id and r["sku"] == sku and r["status"] == "requested")
        line = order["items"][sku]
        returnable = line["qty"] - line["returned_qty"] - pending
        if qty > returnable:
            return {"success": False, "error": f"Only {returnable} units of {sku} can still be returned"}
        number = self.counters["return"] + 1
        return_id = f"R{number}"
        self.returns[return_id] = {"order_id": order_id, "sku": sku, "qty": qty, "reason": reason,
                                   "status": "requested", "requested_on": self.settings["business_date"],
                                   "refund_amount": None, "restocked": None,
                                   "processed_on": None}
        self.counters["return"] = number
        return {"success": True, "message": f"Return {return_id} opened for {qty} x {sku}", "return_id": return_id}

    def process_return(self, return_id: str, approve: bool) -> dict:
        """Approve (refund) or reject a requested return.

        Args:
            return_id: Return id in status "requested".
            approve: True to accept the goods and refund, False to reject.
        Rules: the refund is the unit price times quantity reduced by the order's coupon
        discount share; shipping fees are not refunded. Items returned as "damaged" are written
        off, all others go back to stock. The payment's refunded amount and status follow, and
        the order becomes "returned" once every unit is returned.
        """
        if not isinstance(return_id, str) or return_id not in self.returns:
            return {"success": False, "error": f"Return {return_id} not found"}
        if not isinstance(approve, bool):
            return {"success": False, "error": "approve must be true or false"}
        ret = self.returns[return_id]
        if ret["status"] != "requested":
            return {"success": False, "error": f"Return {return_id} is already {ret['status']}"}
        ret["processed_on"] = self.settings["business_date"]
        if not approve:
            ret["status"] = "rejected"
            return {"success": True, "message": f"Return {return_id} rejected"}
        order = self.orders[ret["order_id"]]
        line = order["items"][ret["sku"]]
        gross = line["unit_price"] * ret["qty"]
        share = (order["discount"] / order["subtotal"]) if order["subtotal"] else 0.0
        refund = self._money(gross * (1 - share))
        payment = self.payments[order["payment_id"]]
        refund = min(refund, self._money(payment["amount"] - payment["refunded"]))
        customer = self.customers[order["customer_id"]]
        customer["wallet_balance"] = self._money(customer["wallet_balance"] + refund)
        payment["refunded"] = self._money(payment["refunded"] + refund)
        payment["status"] = "refunded" if payment["refunded"] >= payment["amount"] else "partially_refunded"
        line["returned_qty"] += ret["qty"]
        restock = ret["reason"] != "damaged"
        if restock:
            self.products[ret["sku"]]["on_hand"] += ret["qty"]
        ret["status"] = "refunded"
        ret["refund_amount"] = refund
        ret["restocked"] = restock
        if all(l["returned_qty"] >= l["qty"] for l in order["items"].values()):
            order["status"] = "returned"
        return {"success": True, "message": f"Return {return_id} refunded {refund:.2f} to wallet",
                "refund_amount": refund, "restocked": restock}

    # ------------------------------------------------------------------ wallet
    def top_up_wallet(self, customer_id: str, amount: float) -> dict:
        """Add funds to a customer's wallet.

        Args:
            customer_id: Active customer id.
            amount: Amount to add; must be positive and at most settings.max_top_up.
        """
        customer, err = self._active_customer(customer_id)
        if err:
            return err
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount <= 0:
            return {"success": False, "error": "amount must be a positive number"}
        limit = self.settings.get("max_top_up", 1000.0)
        if amount > limit:
            return {"success": False, "error": f"A single top-up is limited to {limit:.2f}"}
        customer["wallet_balance"] = self._money(customer["wallet_balance"] + amount)
        return {"success": True, "message": f"Wallet of {customer_id} topped up by {amount:.2f}",
                "wallet_balance": customer["wallet_balance"]}
