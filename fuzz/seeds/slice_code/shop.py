"""A shop."""

import datetime

TAX = 0.2


def _money(x):
    return round(x, 2)


class Shop:
    """Orders and customers."""

    REASONS = ("damaged", "other")

    def __init__(self, init_config: dict):
        self.orders = {}
        self.customers = {}
        self.settings = {}
        self.log = []

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _fmt(x):
        return f"{x:.2f}"

    def _customer(self, customer_id):
        return self.customers.get(customer_id)

    def _total(self, order):
        return _money(order["total"] * (1 + TAX))

    # ---------------------------------------------------------------- tools
    def get_order(self, order_id: str) -> dict:
        """One order."""
        if order_id not in self.orders:
            return {"success": False, "error": f"Order {order_id} not found"}
        return {"success": True, "data": self.orders[order_id],
                "total": self._fmt(self._total(self.orders[order_id]))}

    def pay(self, order_id: str,
            customer_id: str) -> dict:
        """Pay an order; see self.settings in the docs."""
        # self.log is not touched here
        order = self.orders.get(order_id)
        customer = self._customer(customer_id)
        if order is None or customer is None:
            return {"success": False, "error": "not found"}
        order["status"] = "paid"
        return {"success": True, "message": f"paid {self.settings['currency']}"}

    def count(self) -> dict:
        return {"success": True, "data": len(self.orders)}
