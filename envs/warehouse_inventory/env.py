"""Distribution-centre inventory: bins, SKUs, receiving against purchase orders, wave picking, cycle counts and bin transfers."""

import datetime
from typing import Optional


class WarehouseInventory:
    """Warehouse management for a food and household-goods distribution centre.

    Stock is held per bin (``bins[*].contents`` maps SKU to units) and summarised per SKU as
    ``on_hand`` (sum over bins) and ``allocated`` (units promised to released pick waves and not
    yet picked). Inbound goods are received against purchase orders into receiving or reserve
    bins; outbound orders are released in waves that allocate stock, then picked bin by bin.
    Cycle counts block a bin until the count is posted; large variances need a supervisor.
    Every stock movement is written to the ``movements`` journal.
    """

    def __init__(self, init_config: dict):
        self.settings = {}
        self.staff = {}
        self.skus = {}
        self.bins = {}
        self.purchase_orders = {}
        self.orders = {}
        self.waves = {}
        self.cycle_counts = {}
        self.movements = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _is_pos_int(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    def _bin(self, bin_id):
        if not isinstance(bin_id, str) or bin_id not in self.bins:
            return None, {"success": False, "error": f"Bin {bin_id} not found"}
        return self.bins[bin_id], None

    def _sku(self, sku):
        if not isinstance(sku, str) or sku not in self.skus:
            return None, {"success": False, "error": f"SKU {sku} not found"}
        return self.skus[sku], None

    @staticmethod
    def _used(bin_rec: dict) -> int:
        return sum(bin_rec["contents"].values())

    def _storage_problem(self, sku: str, bin_id: str) -> Optional[str]:
        need, has = self.skus[sku]["storage"], self.bins[bin_id]["temperature"]
        if need != has:
            return f"{sku} needs {need} storage; bin {bin_id} is {has}"
        return None

    def _move(self, move_type: str, sku: str, qty: int, from_bin: Optional[str], to_bin: Optional[str], reference: str) -> str:
        number = self.counters["movement"] + 1
        move_id = f"MV-{number}"
        self.movements[move_id] = {"type": move_type, "sku": sku, "qty": qty, "from_bin": from_bin, "to_bin": to_bin,
                                   "reference": reference, "date": self.settings["business_date"]}
        self.counters["movement"] = number
        return move_id

    def _take(self, bin_rec: dict, sku: str, qty: int) -> None:
        left = bin_rec["contents"][sku] - qty
        if left == 0:
            del bin_rec["contents"][sku]
        else:
            bin_rec["contents"][sku] = left

    # ------------------------------------------------------------------ queries
    def get_bin(self, bin_id: str) -> dict:
        """Show a bin: type, temperature zone, block status, contents and free capacity.

        Args:
            bin_id: Bin location code, e.g. "A-01-01".
        """
        b, err = self._bin(bin_id)
        if err:
            return err
        data = {"bin_id": bin_id}
        data.update(b)
        data["free_capacity"] = b["capacity_units"] - self._used(b)
        return {"success": True, "data": data}

    def find_sku(self, sku: str) -> dict:
        """Show a SKU's master data, totals (on hand, allocated, available) and every bin holding it.

        Args:
            sku: SKU code, e.g. "SKU-10041".
        """
        s, err = self._sku(sku)
        if err:
            return err
        data = {"sku": sku}
        data.update(s)
        data["available"] = s["on_hand"] - s["allocated"]
        data["locations"] = [{"bin_id": bid, "qty": b["contents"][sku], "type": b["type"], "blocked": b["blocked"]}
                             for bid, b in sorted(self.bins.items()) if sku in b["contents"]]
        return {"success": True, "data": data}

    def list_open_orders(self) -> dict:
        """List outbound orders that are pending or allocated, express first, then by ship-by date."""
        rows = [{"order_id": oid, "customer": o["customer"], "priority": o["priority"], "status": o["status"],
                 "ship_by": o["ship_by"], "wave_id": o["wave_id"], "units": sum(l["qty"] for l in o["lines"].values())}
                for oid, o in self.orders.items() if o["status"] in ("pending", "allocated")]
        rows.sort(key=lambda r: (r["priority"] != "express", r["ship_by"], r["order_id"]))
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ inbound and moves
    def receive_po_line(self, po_id: str, sku: str, qty: int, bin_id: str) -> dict:
        """Receive units of a purchase-order line into a receiving or reserve bin.

        Args:
            po_id: Purchase order in status open or partially_received.
            sku: SKU on the purchase order.
            qty: Units received now (positive integer).
            bin_id: Unblocked receiving or reserve bin with the right temperature and enough free capacity.
        Rules: cumulative receipts may exceed the ordered quantity by at most
        settings.over_receipt_tolerance_percent (rounded down). The PO becomes partially_received,
        or received once every line is complete.
        """
        if not isinstance(po_id, str) or po_id not in self.purchase_orders:
            return {"success": False, "error": f"Purchase order {po_id} not found"}
        po = self.purchase_orders[po_id]
        if po["status"] not in ("open", "partially_received"):
            return {"success": False, "error": f"Purchase order {po_id} is {po['status']}"}
        if not isinstance(sku, str) or sku not in po["lines"]:
            return {"success": False, "error": f"{sku} is not on purchase order {po_id}"}
        if not self._is_pos_int(qty):
            return {"success": False, "error": "qty must be a positive integer"}
        b, err = self._bin(bin_id)
        if err:
            return err
        if b["type"] not in ("receiving", "reserve"):
            return {"success": False, "error": f"Bin {bin_id} is a {b['type']} bin; receive into receiving or reserve bins"}
        if b["blocked"]:
            return {"success": False, "error": f"Bin {bin_id} is blocked: {b['block_reason']}"}
        problem = self._storage_problem(sku, bin_id)
        if problem:
            return {"success": False, "error": problem}
        line = po["lines"][sku]
        limit = line["ordered"] * (100 + self.settings["over_receipt_tolerance_percent"]) // 100
        if line["received"] + qty > limit:
            return {"success": False, "error": f"Over-receipt: {line['received']} of {line['ordered']} already received, at most {limit} allowed"}
        if self._used(b) + qty > b["capacity_units"]:
            return {"success": False, "error": f"Bin {bin_id} has room for {b['capacity_units'] - self._used(b)} units"}
        line["received"] += qty
        b["contents"][sku] = b["contents"].get(sku, 0) + qty
        self.skus[sku]["on_hand"] += qty
        move_id = self._move("receipt", sku, qty, None, bin_id, po_id)
        complete = all(l["received"] >= l["ordered"] for l in po["lines"].values())
        new_status = "received" if complete else "partially_received"
        if po["status"] != new_status:
            po["status"] = new_status
        return {"success": True, "message": f"Received {qty} x {sku} into {bin_id} ({move_id})", "po_status": po["status"]}

    def transfer_stock(self, sku: str, from_bin: str, to_bin: str, qty: int) -> dict:
        """Move units of a SKU from one bin to another (e.g. replenish a pick face from reserve).

        Args:
            sku: SKU code.
            from_bin: Unblocked source bin holding at least qty units.
            to_bin: Different unblocked destination bin (not a receiving bin) with the right temperature and room.
            qty: Units to move (positive integer).
        """
        s, err = self._sku(sku)
        if err:
            return err
        src, err = self._bin(from_bin)
        if err:
            return err
        dst, err = self._bin(to_bin)
        if err:
            return err
        if from_bin == to_bin:
            return {"success": False, "error": "Source and destination bins must differ"}
        if not self._is_pos_int(qty):
            return {"success": False, "error": "qty must be a positive integer"}
        for bid, b in ((from_bin, src), (to_bin, dst)):
            if b["blocked"]:
                return {"success": False, "error": f"Bin {bid} is blocked: {b['block_reason']}"}
        if dst["type"] == "receiving":
            return {"success": False, "error": f"Cannot put stock away into receiving bin {to_bin}"}
        held = src["contents"].get(sku, 0)
        if held < qty:
            return {"success": False, "error": f"Bin {from_bin} holds only {held} units of {sku}"}
        problem = self._storage_problem(sku, to_bin)
        if problem:
            return {"success": False, "error": problem}
        if self._used(dst) + qty > dst["capacity_units"]:
            return {"success": False, "error": f"Bin {to_bin} has room for {dst['capacity_units'] - self._used(dst)} units"}
        self._take(src, sku, qty)
        dst["contents"][sku] = dst["contents"].get(sku, 0) + qty
        move_id = self._move("transfer", sku, qty, from_bin, to_bin, "replenishment")
        return {"success": True, "message": f"Moved {qty} x {sku} from {from_bin} to {to_bin} ({move_id})"}

    # ------------------------------------------------------------------ outbound
    def create_wave(self, order_ids: list[str]) -> dict:
        """Release pending orders together as a pick wave and allocate their stock.

        Args:
            order_ids: 1 to settings.max_wave_orders distinct pending order ids.
        Rules: for every SKU the total quantity of the wave must be available (on_hand minus
        allocated); otherwise nothing is released.
        """
        if not isinstance(order_ids, list) or not order_ids or not all(isinstance(o, str) for o in order_ids):
            return {"success": False, "error": "order_ids must be a non-empty list of order ids"}
        if len(set(order_ids)) != len(order_ids):
            return {"success": False, "error": "order_ids contains duplicates"}
        limit = self.settings["max_wave_orders"]
        if len(order_ids) > limit:
            return {"success": False, "error": f"A wave holds at most {limit} orders"}
        need = {}
        for oid in order_ids:
            if oid not in self.orders:
                return {"success": False, "error": f"Order {oid} not found"}
            if self.orders[oid]["status"] != "pending":
                return {"success": False, "error": f"Order {oid} is {self.orders[oid]['status']}, not pending"}
            for sku, line in self.orders[oid]["lines"].items():
                need[sku] = need.get(sku, 0) + line["qty"] - line["picked"]
        for sku in sorted(need):
            s = self.skus[sku]
            available = s["on_hand"] - s["allocated"]
            if need[sku] > available:
                return {"success": False, "error": f"Insufficient stock for {sku}: wave needs {need[sku]}, available {available}"}
        number = self.counters["wave"] + 1
        wave_id = f"W-{number}"
        for sku, qty in need.items():
            self.skus[sku]["allocated"] += qty
        for oid in order_ids:
            self.orders[oid]["status"] = "allocated"
            self.orders[oid]["wave_id"] = wave_id
        self.waves[wave_id] = {"status": "released", "order_ids": list(order_ids),
                               "created_at": datetime.datetime.now().isoformat(timespec="seconds"), "completed_at": None}
        self.counters["wave"] = number
        return {"success": True, "message": f"Wave {wave_id} released with {len(order_ids)} orders",
                "wave_id": wave_id, "allocated": {k: need[k] for k in sorted(need)}}

    def confirm_pick(self, order_id: str, sku: str, bin_id: str, qty: int) -> dict:
        """Confirm that a picker took units for an allocated order line from a bin.

        Args:
            order_id: Order in status allocated (part of a released wave).
            sku: SKU on the order.
            bin_id: Unblocked pick or reserve bin holding the units.
            qty: Units picked; at most the units of the line still to pick.
        Rules: the units leave the bin and the SKU's on_hand and allocated; the order becomes
        picked when every line is complete.
        """
        if not isinstance(order_id, str) or order_id not in self.orders:
            return {"success": False, "error": f"Order {order_id} not found"}
        order = self.orders[order_id]
        if order["status"] != "allocated":
            return {"success": False, "error": f"Order {order_id} is {order['status']}; only allocated orders can be picked"}
        if not isinstance(sku, str) or sku not in order["lines"]:
            return {"success": False, "error": f"{sku} is not on order {order_id}"}
        if not self._is_pos_int(qty):
            return {"success": False, "error": "qty must be a positive integer"}
        line = order["lines"][sku]
        remaining = line["qty"] - line["picked"]
        if qty > remaining:
            return {"success": False, "error": f"Only {remaining} units of {sku} remain to pick on {order_id}"}
        b, err = self._bin(bin_id)
        if err:
            return err
        if b["type"] not in ("pick", "reserve"):
            return {"success": False, "error": f"Cannot pick from {b['type']} bin {bin_id}"}
        if b["blocked"]:
            return {"success": False, "error": f"Bin {bin_id} is blocked: {b['block_reason']}"}
        if b["contents"].get(sku, 0) < qty:
            return {"success": False, "error": f"Bin {bin_id} holds only {b['contents'].get(sku, 0)} units of {sku}"}
        self._take(b, sku, qty)
        self.skus[sku]["on_hand"] -= qty
        self.skus[sku]["allocated"] -= qty
        line["picked"] += qty
        move_id = self._move("pick", sku, qty, bin_id, None, order_id)
        done = all(l["picked"] >= l["qty"] for l in order["lines"].values())
        if done:
            order["status"] = "picked"
        return {"success": True, "message": f"Picked {qty} x {sku} from {bin_id} for {order_id} ({move_id})",
                "order_status": order["status"]}

    def complete_wave(self, wave_id: str) -> dict:
        """Close a released wave once all of its orders are picked, shipped or cancelled.

        Args:
            wave_id: Wave id, e.g. "W-301".
        """
        if not isinstance(wave_id, str) or wave_id not in self.waves:
            return {"success": False, "error": f"Wave {wave_id} not found"}
        wave = self.waves[wave_id]
        if wave["status"] != "released":
            return {"success": False, "error": f"Wave {wave_id} is already {wave['status']}"}
        open_orders = [o for o in wave["order_ids"] if self.orders[o]["status"] not in ("picked", "shipped", "cancelled")]
        if open_orders:
            return {"success": False, "error": f"Orders still being picked: {', '.join(open_orders)}"}
        wave["status"] = "completed"
        wave["completed_at"] = datetime.datetime.now().isoformat(timespec="seconds")
        return {"success": True, "message": f"Wave {wave_id} completed"}

    def ship_order(self, order_id: str) -> dict:
        """Load a fully picked order onto the truck (ship date = business date).

        Args:
            order_id: Order in status picked.
        """
        if not isinstance(order_id, str) or order_id not in self.orders:
            return {"success": False, "error": f"Order {order_id} not found"}
        order = self.orders[order_id]
        if order["status"] != "picked":
            return {"success": False, "error": f"Order {order_id} is {order['status']}; only picked orders can ship"}
        order["status"] = "shipped"
        order["shipped_on"] = self.settings["business_date"]
        return {"success": True, "message": f"Order {order_id} shipped to {order['customer']}"}

    # ------------------------------------------------------------------ counting and bin control
    def start_cycle_count(self, bin_id: str, sku: str) -> dict:
        """Open a cycle count for one SKU in a bin; the bin is blocked until the count is posted.

        Args:
            bin_id: Bin that is not blocked and has no open count.
            sku: SKU to count (may currently be recorded as 0 in the bin).
        """
        b, err = self._bin(bin_id)
        if err:
            return err
        s, err = self._sku(sku)
        if err:
            return err
        if b["blocked"]:
            return {"success": False, "error": f"Bin {bin_id} is blocked: {b['block_reason']}"}
        for cid, c in self.cycle_counts.items():
            if c["bin_id"] == bin_id and c["status"] == "open":
                return {"success": False, "error": f"Bin {bin_id} already has open count {cid}"}
        number = self.counters["count"] + 1
        count_id = f"CC-{number}"
        self.cycle_counts[count_id] = {"bin_id": bin_id, "sku": sku, "expected": b["contents"].get(sku, 0), "counted": None,
                                       "variance": None, "status": "open", "opened_on": self.settings["business_date"],
                                       "approved_by": None}
        self.counters["count"] = number
        b["blocked"] = True
        b["block_reason"] = f"Cycle count {count_id}"
        return {"success": True, "message": f"Cycle count {count_id} opened; bin {bin_id} blocked", "count_id": count_id}

    def post_cycle_count(self, count_id: str, counted_qty: int, approved_by: Optional[str] = None) -> dict:
        """Post the result of an open cycle count and unblock the bin.

        Args:
            count_id: Open cycle count id.
            counted_qty: Units physically counted (integer >= 0).
            approved_by: Active supervisor id; required when |variance| exceeds
                settings.count_tolerance_units.
        Rules: a non-zero variance adjusts the bin contents and the SKU's on_hand and is journaled
        as an adjustment movement.
        """
        if not isinstance(count_id, str) or count_id not in self.cycle_counts:
            return {"success": False, "error": f"Cycle count {count_id} not found"}
        c = self.cycle_counts[count_id]
        if c["status"] != "open":
            return {"success": False, "error": f"Cycle count {count_id} is already {c['status']}"}
        if not isinstance(counted_qty, int) or isinstance(counted_qty, bool) or counted_qty < 0:
            return {"success": False, "error": "counted_qty must be an integer >= 0"}
        b = self.bins[c["bin_id"]]
        expected = b["contents"].get(c["sku"], 0)
        variance = counted_qty - expected
        if abs(variance) > self.settings["count_tolerance_units"]:
            if approved_by is None:
                return {"success": False, "error": f"Variance {variance:+d} exceeds tolerance; supervisor approval required"}
            sup = self.staff.get(approved_by) if isinstance(approved_by, str) else None
            if sup is None or sup["role"] != "supervisor" or not sup["active"]:
                return {"success": False, "error": f"{approved_by} is not an active supervisor"}
        if counted_qty + self._used(b) - expected > b["capacity_units"]:
            return {"success": False, "error": f"Counted quantity exceeds the capacity of bin {c['bin_id']}; recount"}
        if abs(variance) > self.settings["count_tolerance_units"]:
            c["approved_by"] = approved_by
        c["counted"] = counted_qty
        c["variance"] = variance
        c["status"] = "posted"
        result = {"success": True, "message": f"Count {count_id} posted with variance {variance:+d}", "variance": variance}
        if variance:
            if counted_qty == 0:
                b["contents"].pop(c["sku"], None)
            else:
                b["contents"][c["sku"]] = counted_qty
            sku = self.skus[c["sku"]]
            sku["on_hand"] += variance
            self._move("adjustment", c["sku"], variance, c["bin_id"], c["bin_id"], count_id)
            if sku["on_hand"] < sku["allocated"]:
                result["warning"] = f"{c['sku']} is now short: on hand {sku['on_hand']}, allocated {sku['allocated']}"
        b["blocked"] = False
        b["block_reason"] = None
        return result

    def set_bin_block(self, bin_id: str, blocked: bool, reason: str = "") -> dict:
        """Block a bin (damage, spill, maintenance) or release a manual block.

        Args:
            bin_id: Bin id.
            blocked: True to block, False to unblock.
            reason: Required when blocking.
        Rules: a bin blocked by an open cycle count can only be released by posting the count.
        """
        b, err = self._bin(bin_id)
        if err:
            return err
        if not isinstance(blocked, bool):
            return {"success": False, "error": "blocked must be true or false"}
        if blocked:
            if b["blocked"]:
                return {"success": False, "error": f"Bin {bin_id} is already blocked: {b['block_reason']}"}
            if not isinstance(reason, str) or not reason.strip():
                return {"success": False, "error": "A reason is required to block a bin"}
            b["blocked"] = True
            b["block_reason"] = reason.strip()
            return {"success": True, "message": f"Bin {bin_id} blocked"}
        if not b["blocked"]:
            return {"success": False, "error": f"Bin {bin_id} is not blocked"}
        if any(c["bin_id"] == bin_id and c["status"] == "open" for c in self.cycle_counts.values()):
            return {"success": False, "error": f"Bin {bin_id} is under an open cycle count; post the count to release it"}
        b["blocked"] = False
        b["block_reason"] = None
        return {"success": True, "message": f"Bin {bin_id} released"}
