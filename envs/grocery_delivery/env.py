"""Grocery delivery operations: stores, delivery slots, baskets, picking with substitutions and riders."""

import datetime


class GroceryDelivery:
    """Online grocery service delivering from local stores in booked delivery windows.

    A basket is built against one store, gets a delivery slot, and is paid from the
    customer's wallet when submitted (stock is taken from the store at that moment).
    On the delivery day pickers work the basket, substituting or dropping items that are
    missing from the shelf, then a rider from the same store delivers it.
    """

    def __init__(self, init_config: dict):
        self.settings = {}
        self.stores = {}
        self.products = {}
        self.stock = {}
        self.customers = {}
        self.slots = {}
        self.baskets = {}
        self.riders = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _money(value: float) -> float:
        return round(float(value) + 1e-9, 2)

    @staticmethod
    def _is_pos_int(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    def _basket(self, basket_id):
        if not isinstance(basket_id, str) or basket_id not in self.baskets:
            return None, {"success": False, "error": f"Basket {basket_id} not found"}
        return self.baskets[basket_id], None

    def _price_subtotal(self, items: dict) -> float:
        return self._money(sum(self.products[sku]["price"] * qty for sku, qty in items.items()))

    def _refund(self, basket: dict, amount: float) -> None:
        if amount > 0:
            customer = self.customers[basket["customer_id"]]
            customer["wallet_balance"] = self._money(customer["wallet_balance"] + amount)

    # ------------------------------------------------------------------ queries
    def list_slots(self, store_id: str) -> dict:
        """List the bookable delivery slots of a store (from the business date on, not full).

        Args:
            store_id: Store id, e.g. "ST-UTR".
        Returns:
            data: list of {slot_id, date, start, end, delivery_fee, remaining}, in time order.
        """
        if not isinstance(store_id, str) or store_id not in self.stores:
            return {"success": False, "error": f"Store {store_id} not found"}
        today = self.settings["business_date"]
        rows = []
        for slot_id, slot in self.slots.items():
            if slot["store_id"] != store_id or slot["date"] < today or slot["booked"] >= slot["capacity"]:
                continue
            rows.append({"slot_id": slot_id, "date": slot["date"], "start": slot["start"], "end": slot["end"],
                         "delivery_fee": slot["delivery_fee"], "remaining": slot["capacity"] - slot["booked"]})
        rows.sort(key=lambda r: (r["date"], r["start"]))
        return {"success": True, "data": rows}

    def get_basket(self, basket_id: str) -> dict:
        """Show a basket: customer, store, status, lines with prices, slot, substitutions and totals.

        Args:
            basket_id: Basket id, e.g. "B-7001".
        """
        basket, err = self._basket(basket_id)
        if err:
            return err
        data = {"basket_id": basket_id}
        data.update(basket)
        data["lines"] = [{"sku": sku, "name": self.products[sku]["name"], "qty": qty,
                          "unit_price": self.products[sku]["price"]} for sku, qty in basket["items"].items()]
        return {"success": True, "data": data}

    def list_available_riders(self) -> dict:
        """List riders who are on shift and free, with their store and vehicle.

        Returns:
            data: list of {rider_id, name, store_id, vehicle, deliveries_today}, sorted by rider id.
        """
        rows = [{"rider_id": rid, "name": r["name"], "store_id": r["store_id"], "vehicle": r["vehicle"],
                 "deliveries_today": r["deliveries_today"]}
                for rid, r in sorted(self.riders.items()) if r["status"] == "available"]
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ basket building
    def create_basket(self, customer_id: str, store_id: str, allow_substitutions: bool = True) -> dict:
        """Start a new basket for a customer at a store.

        Args:
            customer_id: Active customer id, e.g. "CU-502".
            store_id: Open store id.
            allow_substitutions: Whether pickers may replace missing items with a similar product.
        Rules: the customer must be active, the store open, and the customer may not already have
        an open basket at the same store.
        """
        if not isinstance(customer_id, str) or customer_id not in self.customers:
            return {"success": False, "error": f"Customer {customer_id} not found"}
        if self.customers[customer_id]["status"] != "active":
            return {"success": False, "error": f"Customer {customer_id} is {self.customers[customer_id]['status']}"}
        if not isinstance(store_id, str) or store_id not in self.stores:
            return {"success": False, "error": f"Store {store_id} not found"}
        if self.stores[store_id]["status"] != "open":
            return {"success": False, "error": f"Store {store_id} is {self.stores[store_id]['status']} and takes no orders"}
        if not isinstance(allow_substitutions, bool):
            return {"success": False, "error": "allow_substitutions must be true or false"}
        for bid, b in self.baskets.items():
            if b["customer_id"] == customer_id and b["store_id"] == store_id and b["status"] == "open":
                return {"success": False, "error": f"Customer {customer_id} already has open basket {bid} at {store_id}"}
        number = self.counters["basket"] + 1
        basket_id = f"B-{number}"
        self.baskets[basket_id] = {
            "customer_id": customer_id, "store_id": store_id, "status": "open", "items": {},
            "slot_id": None, "allow_substitutions": allow_substitutions, "substitutions": {},
            "subtotal": None, "delivery_fee": None, "service_fee": None, "total": None,
            "rider_id": None, "submitted_at": None, "delivered_at": None, "cancel_reason": None,
        }
        self.counters["basket"] = number
        return {"success": True, "message": f"Basket {basket_id} created at {store_id}", "basket_id": basket_id}

    def add_item(self, basket_id: str, sku: str, qty: int) -> dict:
        """Add units of a product to an open basket.

        Args:
            basket_id: Open basket id.
            sku: Product SKU from the catalog.
            qty: Units to add (positive integer).
        Rules: the store must have enough stock for the resulting line quantity, and a line may
        hold at most settings.max_line_qty units.
        """
        basket, err = self._basket(basket_id)
        if err:
            return err
        if basket["status"] != "open":
            return {"success": False, "error": f"Basket {basket_id} is {basket['status']}; items can only be added to open baskets"}
        if not isinstance(sku, str) or sku not in self.products:
            return {"success": False, "error": f"Product {sku} not found"}
        if not self._is_pos_int(qty):
            return {"success": False, "error": "qty must be a positive integer"}
        new_qty = basket["items"].get(sku, 0) + qty
        limit = self.settings["max_line_qty"]
        if new_qty > limit:
            return {"success": False, "error": f"A basket line may hold at most {limit} units (would be {new_qty})"}
        on_shelf = self.stock.get(basket["store_id"], {}).get(sku, 0)
        if new_qty > on_shelf:
            return {"success": False, "error": f"Store {basket['store_id']} has only {on_shelf} units of {sku}"}
        basket["items"][sku] = new_qty
        return {"success": True, "message": f"Added {qty} x {sku} to {basket_id}", "line_qty": new_qty}

    def book_slot(self, basket_id: str, slot_id: str) -> dict:
        """Book (or change) the delivery slot of an open basket.

        Args:
            basket_id: Open basket id.
            slot_id: Slot id of the basket's store, e.g. "SL-UTR-0521-08".
        Rules: the slot must belong to the basket's store, not lie before the business date and
        have capacity left. A previously booked slot is released.
        """
        basket, err = self._basket(basket_id)
        if err:
            return err
        if basket["status"] != "open":
            return {"success": False, "error": f"Basket {basket_id} is {basket['status']}; the slot can no longer change"}
        if not isinstance(slot_id, str) or slot_id not in self.slots:
            return {"success": False, "error": f"Slot {slot_id} not found"}
        slot = self.slots[slot_id]
        if slot["store_id"] != basket["store_id"]:
            return {"success": False, "error": f"Slot {slot_id} belongs to store {slot['store_id']}, not {basket['store_id']}"}
        if slot["date"] < self.settings["business_date"]:
            return {"success": False, "error": f"Slot {slot_id} is in the past ({slot['date']})"}
        if basket["slot_id"] == slot_id:
            return {"success": False, "error": f"Slot {slot_id} is already booked for {basket_id}"}
        if slot["booked"] >= slot["capacity"]:
            return {"success": False, "error": f"Slot {slot_id} is full"}
        previous = basket["slot_id"]
        if previous and previous in self.slots:
            self.slots[previous]["booked"] = max(0, self.slots[previous]["booked"] - 1)
        slot["booked"] += 1
        basket["slot_id"] = slot_id
        msg = f"Booked {slot['date']} {slot['start']}-{slot['end']} for {basket_id}"
        if previous:
            msg += f" (released {previous})"
        return {"success": True, "message": msg, "delivery_fee": slot["delivery_fee"]}

    def submit_basket(self, basket_id: str) -> dict:
        """Check out an open basket: price it, take the stock and charge the customer's wallet.

        Args:
            basket_id: Open basket id with items and a booked slot.
        Rules: the subtotal must reach settings.min_basket_value; every line must still be in
        stock at the store; delivery is free for plus members or when the subtotal reaches the
        store's free_delivery_from, otherwise the slot's delivery fee applies; the service fee
        is always added; the wallet must cover the total.
        """
        basket, err = self._basket(basket_id)
        if err:
            return err
        if basket["status"] != "open":
            return {"success": False, "error": f"Basket {basket_id} is already {basket['status']}"}
        if not basket["items"]:
            return {"success": False, "error": f"Basket {basket_id} is empty"}
        if not basket["slot_id"]:
            return {"success": False, "error": "Book a delivery slot before submitting"}
        slot = self.slots[basket["slot_id"]]
        if slot["date"] < self.settings["business_date"]:
            return {"success": False, "error": f"Booked slot {basket['slot_id']} has passed; book a new slot"}
        subtotal = self._price_subtotal(basket["items"])
        minimum = self.settings["min_basket_value"]
        if subtotal < minimum:
            return {"success": False, "error": f"Minimum basket value is {minimum:.2f}; basket is {subtotal:.2f}"}
        shelf = self.stock.get(basket["store_id"], {})
        for sku, qty in basket["items"].items():
            if shelf.get(sku, 0) < qty:
                return {"success": False, "error": f"Store now has only {shelf.get(sku, 0)} units of {sku}"}
        customer = self.customers[basket["customer_id"]]
        store = self.stores[basket["store_id"]]
        free = customer["plus_member"] or subtotal >= store["free_delivery_from"]
        delivery_fee = 0.0 if free else slot["delivery_fee"]
        service_fee = self.settings["service_fee"]
        total = self._money(subtotal + delivery_fee + service_fee)
        if customer["wallet_balance"] + 1e-9 < total:
            return {"success": False, "error": f"Insufficient wallet balance: total {total:.2f}, balance {customer['wallet_balance']:.2f}"}
        for sku, qty in basket["items"].items():
            shelf[sku] -= qty
        customer["wallet_balance"] = self._money(customer["wallet_balance"] - total)
        basket["status"] = "submitted"
        basket["subtotal"] = subtotal
        basket["delivery_fee"] = delivery_fee
        basket["service_fee"] = service_fee
        basket["total"] = total
        basket["submitted_at"] = datetime.datetime.now().isoformat(timespec="seconds")
        return {"success": True, "message": f"Basket {basket_id} submitted; {total:.2f} charged",
                "subtotal": subtotal, "delivery_fee": delivery_fee, "total": total}

    # ------------------------------------------------------------------ fulfilment
    def start_picking(self, basket_id: str) -> dict:
        """Release a submitted basket to the store's pickers.

        Args:
            basket_id: Submitted basket id.
        Rules: picking happens on the delivery day only (slot date equals the business date).
        """
        basket, err = self._basket(basket_id)
        if err:
            return err
        if basket["status"] != "submitted":
            return {"success": False, "error": f"Basket {basket_id} is {basket['status']}; only submitted baskets can be picked"}
        slot = self.slots[basket["slot_id"]]
        if slot["date"] != self.settings["business_date"]:
            return {"success": False, "error": f"Basket {basket_id} is due on {slot['date']}; picking starts on the delivery day"}
        basket["status"] = "picking"
        return {"success": True, "message": f"Basket {basket_id} released for picking"}

    def substitute_item(self, basket_id: str, sku: str, replacement_sku: str) -> dict:
        """Replace a line that is missing from the shelf with a similar product during picking.

        Args:
            basket_id: Basket in status "picking" whose customer allows substitutions.
            sku: The missing product in the basket.
            replacement_sku: Product of the same category, not already in the basket, with enough stock.
        Rules: the missing product's store stock is corrected to 0; the replacement's stock is
        reduced; the customer pays the lower of the two unit prices and any difference is
        refunded to the wallet.
        """
        basket, err = self._basket(basket_id)
        if err:
            return err
        if basket["status"] != "picking":
            return {"success": False, "error": f"Basket {basket_id} is {basket['status']}; substitutions happen during picking"}
        if not basket["allow_substitutions"]:
            return {"success": False, "error": f"Customer does not accept substitutions for {basket_id}"}
        if not isinstance(sku, str) or sku not in basket["items"]:
            return {"success": False, "error": f"{sku} is not in basket {basket_id}"}
        if any(sub["replacement"] == sku for sub in basket["substitutions"].values()):
            return {"success": False, "error": f"{sku} is already a substitute and cannot be substituted again"}
        if not isinstance(replacement_sku, str) or replacement_sku not in self.products:
            return {"success": False, "error": f"Product {replacement_sku} not found"}
        if replacement_sku == sku or replacement_sku in basket["items"]:
            return {"success": False, "error": f"{replacement_sku} is already in basket {basket_id}"}
        original, replacement = self.products[sku], self.products[replacement_sku]
        if original["category"] != replacement["category"]:
            return {"success": False, "error": (f"Substitute must be in the same category ({original['category']}); "
                                                f"{replacement_sku} is {replacement['category']}")}
        qty = basket["items"][sku]
        shelf = self.stock[basket["store_id"]]
        if shelf.get(replacement_sku, 0) < qty:
            return {"success": False, "error": f"Store has only {shelf.get(replacement_sku, 0)} units of {replacement_sku}"}
        charged = min(original["price"], replacement["price"])
        refund = self._money((original["price"] - charged) * qty)
        del basket["items"][sku]
        basket["items"][replacement_sku] = qty
        basket["substitutions"][sku] = {"replacement": replacement_sku, "qty": qty, "charged_unit_price": charged}
        shelf[sku] = 0
        shelf[replacement_sku] -= qty
        if refund > 0:
            basket["subtotal"] = self._money(basket["subtotal"] - refund)
            basket["total"] = self._money(basket["total"] - refund)
            self._refund(basket, refund)
        return {"success": True, "message": f"{sku} replaced by {replacement_sku} in {basket_id}", "refunded": refund}

    def mark_item_unavailable(self, basket_id: str, sku: str) -> dict:
        """Drop a line that cannot be picked and refund it.

        Args:
            basket_id: Basket in status "picking".
            sku: Product in the basket that is missing from the shelf.
        Rules: the line is removed, the store stock of the product is corrected to 0 and the
        line value (at the price charged) is refunded; the delivery fee is not recalculated.
        At least one line must remain; cancel the basket instead of emptying it.
        """
        basket, err = self._basket(basket_id)
        if err:
            return err
        if basket["status"] != "picking":
            return {"success": False, "error": f"Basket {basket_id} is {basket['status']}; items are marked unavailable during picking"}
        if not isinstance(sku, str) or sku not in basket["items"]:
            return {"success": False, "error": f"{sku} is not in basket {basket_id}"}
        if len(basket["items"]) == 1:
            return {"success": False, "error": f"{sku} is the last line of {basket_id}; cancel the basket instead"}
        qty = basket["items"][sku]
        unit = self.products[sku]["price"]
        for original, sub in basket["substitutions"].items():
            if sub["replacement"] == sku:
                unit = sub["charged_unit_price"]
        refund = self._money(unit * qty)
        del basket["items"][sku]
        self.stock[basket["store_id"]][sku] = 0
        basket["subtotal"] = self._money(basket["subtotal"] - refund)
        basket["total"] = self._money(basket["total"] - refund)
        self._refund(basket, refund)
        return {"success": True, "message": f"{sku} removed from {basket_id}; {refund:.2f} refunded", "refunded": refund}

    def dispatch_basket(self, basket_id: str, rider_id: str) -> dict:
        """Hand a picked basket to a rider for delivery.

        Args:
            basket_id: Basket in status "picking".
            rider_id: Available rider of the same store.
        Rules: baskets with more than settings.van_threshold_units units need a rider with a van.
        """
        basket, err = self._basket(basket_id)
        if err:
            return err
        if basket["status"] != "picking":
            return {"success": False, "error": f"Basket {basket_id} is {basket['status']}; only picked baskets can be dispatched"}
        if not isinstance(rider_id, str) or rider_id not in self.riders:
            return {"success": False, "error": f"Rider {rider_id} not found"}
        rider = self.riders[rider_id]
        if rider["status"] != "available":
            return {"success": False, "error": f"Rider {rider_id} is {rider['status']}"}
        if rider["store_id"] != basket["store_id"]:
            return {"success": False, "error": f"Rider {rider_id} works for {rider['store_id']}, not {basket['store_id']}"}
        units = sum(basket["items"].values())
        if units > self.settings["van_threshold_units"] and rider["vehicle"] != "van":
            article = "an" if rider["vehicle"][:1] in "aeiou" else "a"
            return {"success": False, "error": f"Basket has {units} units and needs a van; {rider_id} rides {article} {rider['vehicle']}"}
        basket["status"] = "out_for_delivery"
        basket["rider_id"] = rider_id
        rider["status"] = "delivering"
        rider["current_basket"] = basket_id
        return {"success": True, "message": f"Basket {basket_id} out for delivery with {rider['name']}"}

    def complete_delivery(self, basket_id: str) -> dict:
        """Confirm that a basket was handed to the customer; frees the rider.

        Args:
            basket_id: Basket in status "out_for_delivery".
        """
        basket, err = self._basket(basket_id)
        if err:
            return err
        if basket["status"] != "out_for_delivery":
            return {"success": False, "error": f"Basket {basket_id} is {basket['status']}, not out for delivery"}
        rider = self.riders[basket["rider_id"]]
        basket["status"] = "delivered"
        basket["delivered_at"] = datetime.datetime.now().isoformat(timespec="seconds")
        rider["status"] = "available"
        rider["current_basket"] = None
        rider["deliveries_today"] += 1
        self.customers[basket["customer_id"]]["completed_orders"] += 1
        return {"success": True, "message": f"Basket {basket_id} delivered by {rider['name']}"}

    def cancel_basket(self, basket_id: str, reason: str) -> dict:
        """Cancel a basket before it leaves the store.

        Args:
            basket_id: Basket in status open, submitted or picking.
            reason: Why it is cancelled.
        Rules: the booked slot is released; for submitted or picking baskets the remaining lines go
        back to the store stock and the amount paid (total) is refunded to the wallet.
        """
        basket, err = self._basket(basket_id)
        if err:
            return err
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "A cancellation reason is required"}
        if basket["status"] not in ("open", "submitted", "picking"):
            return {"success": False, "error": f"Basket {basket_id} is {basket['status']} and can no longer be cancelled"}
        refund = 0.0
        if basket["status"] in ("submitted", "picking"):
            shelf = self.stock[basket["store_id"]]
            for sku, qty in basket["items"].items():
                shelf[sku] = shelf.get(sku, 0) + qty
            refund = basket["total"]
            self._refund(basket, refund)
        if basket["slot_id"] and basket["slot_id"] in self.slots:
            slot = self.slots[basket["slot_id"]]
            slot["booked"] = max(0, slot["booked"] - 1)
        basket["status"] = "cancelled"
        basket["cancel_reason"] = reason.strip()
        return {"success": True, "message": f"Basket {basket_id} cancelled", "refunded": refund}
