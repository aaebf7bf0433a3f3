"""Restaurant front-of-house and kitchen: tables, allergen-aware ordering, kitchen tickets, bills, splits and tips."""

import datetime
from typing import Optional


class RestaurantOrders:
    """Point-of-sale for a full-service restaurant.

    A party is seated at a table and gets an open bill. Every order line creates a kitchen
    ticket for the item's station that moves queued -> preparing -> ready -> served. When the
    kitchen has finished, the bill is presented (service charge for large parties, VAT), can be
    split evenly, and is paid in one or more payments; the final payment closes the bill,
    credits the tips to the server and leaves the table for cleaning.
    """

    TICKET_FLOW = ("queued", "preparing", "ready", "served")
    COURSES = ("starter", "main", "dessert", "drink")

    def __init__(self, init_config: dict):
        self.settings = {}
        self.tables = {}
        self.menu = {}
        self.staff = {}
        self.tickets = {}
        self.bills = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _money(value: float) -> float:
        return round(float(value) + 1e-9, 2)

    @staticmethod
    def _is_pos_int(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    def _bill(self, bill_id):
        if not isinstance(bill_id, str) or bill_id not in self.bills:
            return None, {"success": False, "error": f"Bill {bill_id} not found"}
        return self.bills[bill_id], None

    def _totals(self, bill: dict) -> dict:
        subtotal = self._money(sum(l["unit_price"] * l["qty"] for l in bill["lines"].values()))
        service = 0.0
        if bill["party_size"] >= self.settings["large_party_size"]:
            service = self._money(subtotal * self.settings["service_charge_percent"] / 100.0)
        tax = self._money((subtotal + service) * self.settings["tax_rate_percent"] / 100.0)
        return {"subtotal": subtotal, "service_charge": service, "tax": tax,
                "total": self._money(subtotal + service + tax)}

    def _release_table(self, table: dict, status: str) -> None:
        table["status"] = status
        table["party_size"] = 0
        table["server_id"] = None
        table["bill_id"] = None
        table["seated_at"] = None

    # ------------------------------------------------------------------ queries
    def list_free_tables(self, min_seats: int = 1) -> dict:
        """List free tables with at least min_seats seats, smallest first.

        Args:
            min_seats: Minimum number of seats (default 1).
        """
        if not self._is_pos_int(min_seats):
            return {"success": False, "error": "min_seats must be a positive integer"}
        rows = [{"table_id": tid, "seats": t["seats"], "section": t["section"]}
                for tid, t in self.tables.items() if t["status"] == "free" and t["seats"] >= min_seats]
        rows.sort(key=lambda r: (r["seats"], r["table_id"]))
        return {"success": True, "data": rows}

    def get_menu(self, course: Optional[str] = None) -> dict:
        """Show available menu items with price and allergens.

        Args:
            course: Optional filter: starter, main, dessert or drink.
        """
        if course is not None and (not isinstance(course, str) or course not in self.COURSES):
            return {"success": False, "error": f"Unknown course {course}; use starter, main, dessert or drink"}
        rows = [{"item_id": iid, "name": m["name"], "course": m["course"], "price": m["price"], "allergens": list(m["allergens"])}
                for iid, m in self.menu.items() if m["available"] and (course is None or m["course"] == course)]
        return {"success": True, "data": rows}

    def get_bill(self, bill_id: str) -> dict:
        """Show a bill with its lines, kitchen status per line, totals (previewed while open), splits and payments.

        Args:
            bill_id: Bill id, e.g. "BL-4001".
        """
        bill, err = self._bill(bill_id)
        if err:
            return err
        data = {"bill_id": bill_id}
        data.update(bill)
        data["lines"] = {lid: dict(l, name=self.menu[l["item_id"]]["name"], kitchen_status=self.tickets[lid]["status"])
                         for lid, l in bill["lines"].items()}
        if bill["status"] == "open":
            data["preview"] = self._totals(bill)
        else:
            data["outstanding"] = self._money(bill["total"] - bill["paid_amount"])
        return {"success": True, "data": data}

    def get_kitchen_queue(self, station: str) -> dict:
        """List the unfinished tickets (queued, preparing, ready) of a kitchen station in ticket order.

        Args:
            station: Station name: grill, hot, cold, pastry or bar.
        """
        stations = {m["station"] for m in self.menu.values()}
        if not isinstance(station, str) or station not in stations:
            return {"success": False, "error": f"Unknown station {station}; stations are {', '.join(sorted(stations))}"}
        rows = [{"ticket_id": tid, "table_id": self.bills[t["bill_id"]]["table_id"], "item": self.menu[t["item_id"]]["name"],
                 "qty": t["qty"], "notes": t["notes"], "status": t["status"]}
                for tid, t in sorted(self.tickets.items())
                if t["station"] == station and t["status"] in ("queued", "preparing", "ready")]
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ front of house
    def seat_party(self, table_id: str, party_size: int, server_id: str, allergies: Optional[list[str]] = None) -> dict:
        """Seat a party at a free table and open its bill.

        Args:
            table_id: Free table id, e.g. "T03".
            party_size: Number of guests (positive integer) that fits the table.
            server_id: Server on shift who will look after the table.
            allergies: Allergens declared by the party (EU allergen names from settings.allergens).
        Rules: the table must be free and have enough seats, and small parties may not take large
        tables (seats may not exceed max(2, 2 x party size)).
        """
        if not isinstance(table_id, str) or table_id not in self.tables:
            return {"success": False, "error": f"Table {table_id} not found"}
        table = self.tables[table_id]
        if table["status"] != "free":
            return {"success": False, "error": f"Table {table_id} is {table['status']}"}
        if not self._is_pos_int(party_size):
            return {"success": False, "error": "party_size must be a positive integer"}
        if party_size > table["seats"]:
            return {"success": False, "error": f"Table {table_id} seats {table['seats']}, party is {party_size}"}
        if table["seats"] > max(2, 2 * party_size):
            return {"success": False, "error": f"Table {table_id} ({table['seats']} seats) is too large for a party of {party_size}"}
        if not isinstance(server_id, str) or server_id not in self.staff:
            return {"success": False, "error": f"Staff member {server_id} not found"}
        server = self.staff[server_id]
        if server["role"] != "server":
            return {"success": False, "error": f"{server['name']} is a {server['role']}, not a server"}
        if not server["on_shift"]:
            return {"success": False, "error": f"{server['name']} is not on shift"}
        allergies = allergies if allergies is not None else []
        if not isinstance(allergies, list) or not all(isinstance(a, str) for a in allergies):
            return {"success": False, "error": "allergies must be a list of allergen names"}
        allergies = sorted({a.strip().lower() for a in allergies})
        unknown = [a for a in allergies if a not in self.settings["allergens"]]
        if unknown:
            return {"success": False, "error": f"Unknown allergen(s): {', '.join(unknown)}"}
        number = self.counters["bill"] + 1
        bill_id = f"BL-{number}"
        now = datetime.datetime.now().isoformat(timespec="seconds")
        self.bills[bill_id] = {"table_id": table_id, "server_id": server_id, "party_size": party_size, "allergies": allergies,
                               "status": "open", "lines": {}, "subtotal": None, "service_charge": None, "tax": None,
                               "total": None, "paid_amount": 0.0, "tip_total": 0.0, "splits": {}, "payments": {},
                               "opened_at": now, "closed_at": None}
        self.counters["bill"] = number
        table["status"] = "occupied"
        table["party_size"] = party_size
        table["server_id"] = server_id
        table["bill_id"] = bill_id
        table["seated_at"] = now
        return {"success": True, "message": f"Party of {party_size} seated at {table_id}; bill {bill_id} opened", "bill_id": bill_id}

    def place_order(self, bill_id: str, item_id: str, qty: int, notes: str = "") -> dict:
        """Add a menu item to an open bill and send a ticket to the item's kitchen station.

        Args:
            bill_id: Open bill id.
            item_id: Available menu item id, e.g. "MN-STEAK".
            qty: Portions (1-20).
            notes: Optional kitchen notes (e.g. "medium rare").
        Rules: items containing an allergen declared by the party are refused.
        """
        bill, err = self._bill(bill_id)
        if err:
            return err
        if bill["status"] != "open":
            return {"success": False, "error": f"Bill {bill_id} is {bill['status']}; no more orders can be added"}
        if not isinstance(item_id, str) or item_id not in self.menu:
            return {"success": False, "error": f"Menu item {item_id} not found"}
        item = self.menu[item_id]
        if not item["available"]:
            return {"success": False, "error": f"{item['name']} is sold out today"}
        if not self._is_pos_int(qty) or qty > 20:
            return {"success": False, "error": "qty must be an integer from 1 to 20"}
        if not isinstance(notes, str):
            return {"success": False, "error": "notes must be text"}
        conflict = sorted(set(item["allergens"]) & set(bill["allergies"]))
        if conflict:
            return {"success": False, "error": f"{item['name']} contains {', '.join(conflict)}, declared as an allergy for this table"}
        number = self.counters["ticket"] + 1
        ticket_id = f"K-{number}"
        self.tickets[ticket_id] = {"bill_id": bill_id, "item_id": item_id, "qty": qty, "notes": notes.strip(),
                                   "station": item["station"], "status": "queued", "void_reason": None, "voided_by": None}
        bill["lines"][ticket_id] = {"item_id": item_id, "qty": qty, "unit_price": item["price"]}
        self.counters["ticket"] = number
        return {"success": True, "message": f"{qty} x {item['name']} sent to {item['station']} as {ticket_id}", "ticket_id": ticket_id}

    def update_ticket(self, ticket_id: str, status: str) -> dict:
        """Advance a kitchen ticket one step: queued -> preparing -> ready -> served.

        Args:
            ticket_id: Ticket id, e.g. "K-9008".
            status: The next status in the flow.
        """
        if not isinstance(ticket_id, str) or ticket_id not in self.tickets:
            return {"success": False, "error": f"Ticket {ticket_id} not found"}
        ticket = self.tickets[ticket_id]
        if ticket["status"] not in self.TICKET_FLOW or ticket["status"] == "served":
            return {"success": False, "error": f"Ticket {ticket_id} is {ticket['status']} and cannot change"}
        expected = self.TICKET_FLOW[self.TICKET_FLOW.index(ticket["status"]) + 1]
        if status != expected:
            return {"success": False, "error": f"Ticket {ticket_id} is {ticket['status']}; next status must be {expected}"}
        ticket["status"] = status
        return {"success": True, "message": f"Ticket {ticket_id} is {status}"}

    def void_item(self, ticket_id: str, reason: str, manager_id: Optional[str] = None) -> dict:
        """Void an order line that has not been served; removes it from the bill.

        Args:
            ticket_id: Ticket of an open bill, not yet served.
            reason: Why it is voided.
            manager_id: Required once the kitchen has started (preparing or ready): an on-shift manager.
        """
        if not isinstance(ticket_id, str) or ticket_id not in self.tickets:
            return {"success": False, "error": f"Ticket {ticket_id} not found"}
        ticket = self.tickets[ticket_id]
        if ticket["status"] in ("served", "voided"):
            return {"success": False, "error": f"Ticket {ticket_id} is already {ticket['status']}"}
        bill = self.bills[ticket["bill_id"]]
        if bill["status"] != "open":
            return {"success": False, "error": f"Bill {ticket['bill_id']} is {bill['status']}"}
        if not isinstance(reason, str) or not reason.strip():
            return {"success": False, "error": "A void reason is required"}
        if ticket["status"] in ("preparing", "ready"):
            if manager_id is None:
                return {"success": False, "error": f"Ticket {ticket_id} is {ticket['status']}; a manager must approve the void"}
            manager = self.staff.get(manager_id) if isinstance(manager_id, str) else None
            if manager is None or manager["role"] != "manager" or not manager["on_shift"]:
                return {"success": False, "error": f"{manager_id} is not an on-shift manager"}
            ticket["voided_by"] = manager_id
        ticket["status"] = "voided"
        ticket["void_reason"] = reason.strip()
        del bill["lines"][ticket_id]
        return {"success": True, "message": f"Ticket {ticket_id} voided and removed from {ticket['bill_id']}"}

    def transfer_table(self, bill_id: str, new_table_id: str) -> dict:
        """Move a seated party and its bill to another free table; the old table needs cleaning.

        Args:
            bill_id: Bill that is open or presented.
            new_table_id: Free table with enough seats for the party.
        """
        bill, err = self._bill(bill_id)
        if err:
            return err
        if bill["status"] not in ("open", "presented"):
            return {"success": False, "error": f"Bill {bill_id} is {bill['status']}"}
        if not isinstance(new_table_id, str) or new_table_id not in self.tables:
            return {"success": False, "error": f"Table {new_table_id} not found"}
        if new_table_id == bill["table_id"]:
            return {"success": False, "error": f"The party is already at {new_table_id}"}
        new = self.tables[new_table_id]
        if new["status"] != "free":
            return {"success": False, "error": f"Table {new_table_id} is {new['status']}"}
        if new["seats"] < bill["party_size"]:
            return {"success": False, "error": f"Table {new_table_id} seats {new['seats']}, party is {bill['party_size']}"}
        old_id = bill["table_id"]
        old = self.tables[old_id]
        new["status"] = "occupied"
        new["party_size"] = bill["party_size"]
        new["server_id"] = bill["server_id"]
        new["bill_id"] = bill_id
        new["seated_at"] = old["seated_at"]
        self._release_table(old, "needs_cleaning")
        bill["table_id"] = new_table_id
        return {"success": True, "message": f"Bill {bill_id} moved from {old_id} to {new_table_id}"}

    def mark_table_clean(self, table_id: str) -> dict:
        """Mark a table that needed cleaning as free again.

        Args:
            table_id: Table in status needs_cleaning.
        """
        if not isinstance(table_id, str) or table_id not in self.tables:
            return {"success": False, "error": f"Table {table_id} not found"}
        table = self.tables[table_id]
        if table["status"] != "needs_cleaning":
            return {"success": False, "error": f"Table {table_id} is {table['status']}"}
        table["status"] = "free"
        return {"success": True, "message": f"Table {table_id} is ready for guests"}

    # ------------------------------------------------------------------ billing
    def present_bill(self, bill_id: str) -> dict:
        """Finalise the totals of an open bill and present it to the guests.

        Args:
            bill_id: Open bill with at least one line and no unfinished kitchen tickets.
        Rules: parties of settings.large_party_size or more pay a service charge of
        settings.service_charge_percent on the subtotal; VAT (settings.tax_rate_percent) applies
        to subtotal plus service charge.
        """
        bill, err = self._bill(bill_id)
        if err:
            return err
        if bill["status"] != "open":
            return {"success": False, "error": f"Bill {bill_id} is already {bill['status']}"}
        if not bill["lines"]:
            return {"success": False, "error": f"Bill {bill_id} has no items"}
        pending = sorted(tid for tid in bill["lines"] if self.tickets[tid]["status"] != "served")
        if pending:
            return {"success": False, "error": f"Tickets not served yet: {', '.join(pending)}"}
        totals = self._totals(bill)
        bill.update(totals)
        bill["status"] = "presented"
        return {"success": True, "message": f"Bill {bill_id} presented: total {totals['total']:.2f}", **totals}

    def split_bill(self, bill_id: str, ways: int) -> dict:
        """Split a presented bill into equal shares (leftover cents go to share 1).

        Args:
            bill_id: Presented bill with no payments yet.
            ways: Number of shares, from 2 up to the party size (and settings.max_split_ways).
        Rules: splitting again replaces the previous split as long as nothing has been paid.
        """
        bill, err = self._bill(bill_id)
        if err:
            return err
        if bill["status"] != "presented":
            return {"success": False, "error": f"Bill {bill_id} is {bill['status']}; only presented bills can be split"}
        if bill["payments"]:
            return {"success": False, "error": f"Bill {bill_id} already has payments and cannot be split"}
        limit = min(bill["party_size"], self.settings["max_split_ways"])
        if not isinstance(ways, int) or isinstance(ways, bool) or not 2 <= ways <= limit:
            return {"success": False, "error": f"ways must be an integer from 2 to {limit}"}
        cents = int(round(bill["total"] * 100))
        base, rest = divmod(cents, ways)
        bill["splits"] = {str(i + 1): {"amount": (base + (rest if i == 0 else 0)) / 100.0, "paid": False} for i in range(ways)}
        return {"success": True, "message": f"Bill {bill_id} split {ways} ways",
                "shares": [s["amount"] for s in bill["splits"].values()]}

    def pay_bill(self, bill_id: str, amount: float, method: str, tip: float = 0.0, split_no: Optional[int] = None) -> dict:
        """Record a payment on a presented bill; the payment that settles it closes the bill.

        Args:
            bill_id: Presented bill id.
            amount: Amount paid towards the bill (excluding tip); at most the outstanding amount.
            method: card, cash or voucher.
            tip: Optional tip on top of the amount (not allowed with vouchers).
            split_no: Required when the bill is split: the share being paid; amount must equal it.
        Rules: on full payment the bill is closed, the tips are credited to the server and the
        table is released for cleaning.
        """
        bill, err = self._bill(bill_id)
        if err:
            return err
        if bill["status"] != "presented":
            return {"success": False, "error": f"Bill {bill_id} is {bill['status']}; only presented bills can be paid"}
        if method not in self.settings["payment_methods"]:
            return {"success": False, "error": f"Unknown payment method {method}"}
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount <= 0:
            return {"success": False, "error": "amount must be a positive number"}
        if isinstance(tip, bool) or not isinstance(tip, (int, float)) or tip < 0:
            return {"success": False, "error": "tip must be zero or a positive number"}
        if tip > 0 and method == "voucher":
            return {"success": False, "error": "Tips cannot be paid with a voucher"}
        amount, tip = self._money(amount), self._money(tip)
        outstanding = self._money(bill["total"] - bill["paid_amount"])
        share = None
        if bill["splits"]:
            if split_no is None:
                return {"success": False, "error": f"Bill {bill_id} is split; give the split_no being paid"}
            key = str(split_no) if isinstance(split_no, int) and not isinstance(split_no, bool) else None
            if key not in bill["splits"]:
                return {"success": False, "error": f"Bill {bill_id} has no share {split_no}"}
            share = bill["splits"][key]
            if share["paid"]:
                return {"success": False, "error": f"Share {split_no} is already paid"}
            if abs(amount - share["amount"]) > 0.001:
                return {"success": False, "error": f"Share {split_no} is {share['amount']:.2f}"}
        elif split_no is not None:
            return {"success": False, "error": f"Bill {bill_id} is not split"}
        if amount > outstanding + 0.001:
            return {"success": False, "error": f"Amount exceeds the outstanding {outstanding:.2f}"}
        number = str(len(bill["payments"]) + 1)
        bill["payments"][number] = {"method": method, "amount": amount, "tip": tip, "split_no": split_no}
        bill["paid_amount"] = self._money(bill["paid_amount"] + amount)
        if tip:
            bill["tip_total"] = self._money(bill["tip_total"] + tip)
        if share is not None:
            share["paid"] = True
        remaining = self._money(bill["total"] - bill["paid_amount"])
        if remaining > 0:
            return {"success": True, "message": f"Payment of {amount:.2f} recorded on {bill_id}; {remaining:.2f} outstanding",
                    "outstanding": remaining}
        bill["status"] = "paid"
        bill["closed_at"] = datetime.datetime.now().isoformat(timespec="seconds")
        server = self.staff[bill["server_id"]]
        if bill["tip_total"]:
            server["tips_today"] = self._money(server["tips_today"] + bill["tip_total"])
        table = self.tables[bill["table_id"]]
        if table["bill_id"] == bill_id:
            self._release_table(table, "needs_cleaning")
        return {"success": True, "message": f"Bill {bill_id} settled; tips {bill['tip_total']:.2f} to {server['name']}",
                "outstanding": 0.0}
