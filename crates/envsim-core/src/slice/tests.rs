//! The slicer's tests: code and state slices of small environments in both conventions,
//! fallbacks, footprints and the oracle.

use super::*;
use serde_json::json;

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn ptrs(paths: &[&str]) -> Vec<JsonPointer> {
    paths
        .iter()
        .map(|p| JsonPointer::parse(p).unwrap())
        .collect()
}

const SHOP: &str = r#""""A shop."""

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
"#;

#[test]
fn keeps_the_tool_its_helpers_and_the_shared_prefix() {
    let s = slice_code(SHOP, "get_order");
    assert_eq!(s.fallback, None);
    assert!(!s.full);
    assert_eq!(s.methods, vec!["__init__", "_fmt", "_total", "get_order"]);
    let expected = r#""""A shop."""

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

    def _total(self, order):
        return _money(order["total"] * (1 + TAX))

    # ---------------------------------------------------------------- tools
    def get_order(self, order_id: str) -> dict:
        """One order."""
        if order_id not in self.orders:
            return {"success": False, "error": f"Order {order_id} not found"}
        return {"success": True, "data": self.orders[order_id],
                "total": self._fmt(self._total(self.orders[order_id]))}
"#;
    assert_eq!(s.source, expected);
    assert_eq!(
        s.attributes,
        BTreeMap::from([(
            "orders".to_owned(),
            AttrUse::Keys(BTreeSet::from(["order_id".to_owned()]))
        )])
    );
}

#[test]
fn multi_line_signatures_comments_and_docstrings() {
    let s = slice_code(SHOP, "pay");
    assert_eq!(s.fallback, None);
    assert_eq!(s.methods, vec!["__init__", "_customer", "pay"]);
    assert!(s
        .source
        .contains("    def pay(self, order_id: str,\n            customer_id: str) -> dict:\n"));
    assert!(s.source.contains("    def _customer(self, customer_id):\n        return self.customers.get(customer_id)\n\n    def pay("));
    // `self.settings` in the docstring and `self.log` in the comment are not uses;
    // the one in the f-string is. The helper is called with the tool's `customer_id`.
    assert_eq!(
        s.attributes,
        BTreeMap::from([
            (
                "customers".to_owned(),
                AttrUse::Keys(BTreeSet::from(["customer_id".to_owned()]))
            ),
            (
                "orders".to_owned(),
                AttrUse::Keys(BTreeSet::from(["order_id".to_owned()]))
            ),
            ("settings".to_owned(), AttrUse::Whole),
        ])
    );
    let state = json!({
        "orders": {"O1": {"status": "new"}, "O2": {"status": "new"}},
        "customers": {"C1": {}, "C2": {}},
        "settings": {"currency": "EUR"},
        "log": [1, 2, 3],
    });
    let sliced = slice_state(
        &s,
        &args(json!({"order_id": "O2", "customer_id": "C1"})),
        &state,
    );
    assert_eq!(
        sliced.state,
        json!({
            "orders": {"O2": {"status": "new"}},
            "customers": {"C1": {}},
            "settings": {"currency": "EUR"},
        })
    );
    assert_eq!(
        sliced.kept,
        ptrs(&["/customers/C1", "/orders/O2", "/settings"])
    );
    assert_eq!(sliced.partial, ptrs(&["/customers", "/orders"]));
    assert!(!sliced.full);
    // A missing order stays missing; a non-string argument keeps the object whole.
    let missing = slice_state(&s, &args(json!({"order_id": "O9"})), &state);
    assert_eq!(missing.state["orders"], json!({}));
    let odd = slice_state(&s, &args(json!({"order_id": ["O1"]})), &state);
    assert_eq!(odd.state["orders"], state["orders"]);
    let number = slice_state(
        &s,
        &args(json!({"order_id": 7})),
        &json!({"orders": {"7": 1, "8": 2}}),
    );
    assert_eq!(number.state, json!({"orders": {"7": 1}}));
}

#[test]
fn iteration_or_len_keeps_the_whole_object() {
    let s = slice_code(SHOP, "count");
    assert_eq!(s.methods, vec!["__init__", "count"]);
    assert_eq!(
        s.attributes,
        BTreeMap::from([("orders".to_owned(), AttrUse::Whole)])
    );
    let state = json!({"orders": {"O1": 1}, "customers": {"C1": 2}});
    let sliced = slice_state(&s, &Map::new(), &state);
    assert_eq!(sliced.state, json!({"orders": {"O1": 1}}));
    assert_eq!(sliced.kept, ptrs(&["/orders"]));
}

fn class(body: &str) -> String {
    format!("class E:\n    def __init__(self, init_config):\n        self.x = {{}}\n\n{body}")
}

#[test]
fn dynamic_access_falls_back_to_everything() {
    for body in [
        "    def t(self, k):\n        return getattr(self, k)\n",
        "    def t(self, k):\n        setattr(self, k, 1)\n",
        "    def t(self):\n        return vars(self)\n",
        "    def t(self):\n        return self.__dict__\n",
        "    def t(self):\n        return type(self).__name__\n",
        "    def t(self):\n        return eval('self.x')\n",
        "    def t(this):\n        return this.x\n",
        "    def t(self):\n        return self.hook()\n",
    ] {
        let code = class(body);
        let s = slice_code(&code, "t");
        assert!(s.fallback.is_some() && s.full && s.source == code, "{body}");
        let state = json!({"x": {"a": 1}, "y": 2});
        let sliced = slice_state(&s, &Map::new(), &state);
        assert_eq!(sliced.state, state);
        assert!(sliced.full);
    }
    // Dynamic access in a method the tool does not reach does not matter.
    let code = class(
        "    def t(self):\n        return self.x\n\n    def u(self):\n        return vars(self)\n",
    );
    let s = slice_code(&code, "t");
    assert_eq!(s.fallback, None);
    assert_eq!(s.methods, vec!["__init__", "t"]);
    // setattr in __init__ is the EnvScaler loop: fine.
    let code = "class E:\n    def __init__(self, init_config):\n        for k, v in init_config.items():\n            setattr(self, k, v)\n\n    def t(self):\n        return self.x\n";
    assert_eq!(slice_code(code, "t").fallback, None);
}

#[test]
fn a_class_without_a_name_falls_back_instead_of_hanging() {
    // Found by the `slice_code` fuzz target: the empty class name matched everywhere and
    // the reference scan never advanced (unbounded memory).
    for code in [
            "class ?:\n    def t(self):\n        return 1\n",
            "class :\n    def _h(self):\n        return 1\n\n    def t(self):\n        return self._h()\n",
            "class (object):\n    @classmethod\n    def t(cls):\n        return cls.x\n",
        ] {
            let s = slice_code(code, "t");
            assert!(s.full, "{code}");
            assert_eq!(
                s.fallback.as_deref(),
                Some("the class that defines t has no name")
            );
        }
    let src = Src::scan("x = 1\n").unwrap();
    assert_eq!(name_refs(&src, "", (0, 6)).1, Vec::<usize>::new());
}

#[test]
fn unknown_tools_and_broken_sources_fall_back() {
    assert!(slice_code(SHOP, "nope").fallback.is_some());
    assert!(
        slice_code("class E:\n    def t(self):\n        return 'x\n", "t")
            .fallback
            .is_some()
    );
    assert!(
        slice_code("class E(Base):\n    def t(self):\n        return 1\n", "t")
            .fallback
            .is_some()
    );
    assert!(slice_code(
        "class E:\n    def t(self):\n        return 1\n\n    def t(self):\n        return 2\n",
        "t"
    )
    .fallback
    .is_some());
    assert!(slice_code("", "t").fallback.is_some());
    assert!(
        slice_code("class E:\n    def t(self):\n        return (1\n", "t")
            .fallback
            .is_some()
    );
}

#[test]
fn rebinding_the_key_parameter_keeps_the_object_whole() {
    for body in [
        "        k = k.strip()\n        return self.x[k]\n",
        "        k += '1'\n        return self.x[k]\n",
        "        for k in ['a']:\n            pass\n        return self.x[k]\n",
        "        return [self.x[k] for k in self.x]\n",
        "        k, j = 1, 2\n        return self.x[k]\n",
        "        f = lambda k: self.x[k]\n        return f('a')\n",
        "        with open('f') as k:\n            return self.x[k]\n",
    ] {
        let code = class(&format!("    def t(self, k):\n{body}"));
        let s = slice_code(&code, "t");
        assert_eq!(s.fallback, None, "{body}");
        assert_eq!(s.attributes.get("x"), Some(&AttrUse::Whole), "{body}");
    }
    // Stable: keyword arguments, comparisons, attribute assignment elsewhere.
    let code = class("    def t(self, k):\n        y = dict(k=k)\n        if k == 'a' or k in self.x:\n            self.x[k] = self.x.get(k, 0) + 1\n        del self.x[k]\n        return self.x.pop(k, None)\n");
    let s = slice_code(&code, "t");
    assert_eq!(
        s.attributes.get("x"),
        Some(&AttrUse::Keys(BTreeSet::from(["k".to_owned()])))
    );
}

#[test]
fn helper_parameters_hold_tool_parameters_only_when_every_call_passes_them() {
    let helpers = "    def _get(self, key, strict=True):\n        if key not in self.x:\n            return None\n        return self._deeper(key)\n\n    def _deeper(self, k2):\n        return self.x.get(k2)\n\n";
    let keyed = AttrUse::Keys(BTreeSet::from(["k".to_owned()]));
    for (tool, want) in [
        (
            "    def t(self, k, j):\n        return self._get(k)\n",
            keyed.clone(),
        ),
        (
            "    def t(self, k, j):\n        return self._get(key=k, strict=False)\n",
            keyed.clone(),
        ),
        (
            "    def t(self, k, j):\n        return self._get(k) or self._get(k)\n",
            keyed.clone(),
        ),
        // Another value, another parameter, a rebound one, a non-call reference, unpacking.
        (
            "    def t(self, k, j):\n        return self._get(k) or self._get('a')\n",
            AttrUse::Whole,
        ),
        (
            "    def t(self, k, j):\n        return self._get(k) or self._get(j)\n",
            AttrUse::Whole,
        ),
        (
            "    def t(self, k, j):\n        k = k.upper()\n        return self._get(k)\n",
            AttrUse::Whole,
        ),
        (
            "    def t(self, k, j):\n        f = self._get\n        return f(k)\n",
            AttrUse::Whole,
        ),
        (
            "    def t(self, k, j):\n        return self._get(*[k])\n",
            AttrUse::Whole,
        ),
        // Positions count: here `key` holds `j`.
        (
            "    def t(self, k, j):\n        return self._get(j, k)\n",
            AttrUse::Keys(BTreeSet::from(["j".to_owned()])),
        ),
    ] {
        let code = class(&format!("{helpers}{tool}"));
        let s = slice_code(&code, "t");
        assert_eq!(s.fallback, None, "{tool}");
        assert_eq!(s.attributes.get("x"), Some(&want), "{tool}");
    }
    // A helper that rebinds its parameter.
    let code = class("    def _get(self, key):\n        key = key.strip()\n        return self.x[key]\n\n    def t(self, k):\n        return self._get(k)\n");
    assert_eq!(
        slice_code(&code, "t").attributes.get("x"),
        Some(&AttrUse::Whole)
    );
    // A static helper: no self to skip.
    let code = class("    @staticmethod\n    def _norm(v):\n        return v\n\n    def _get(self, key):\n        return self.x[key]\n\n    def t(self, k):\n        return self._get(k), self._norm(k)\n");
    assert_eq!(slice_code(&code, "t").attributes.get("x"), Some(&keyed));
}

#[test]
fn membership_needs_plain_operands() {
    for (expr, keyed) in [
        ("k in self.x", true),
        ("k not in self.x", true),
        ("(k in self.x)", true),
        ("j + k in self.x", false),
        ("k in self.x + []", false),
        ("k in self.x.values()", false),
        ("k in self.x[k]", true),
        ("self.x", false),
        ("len(self.x)", false),
        ("self.x[k:]", false),
        ("self.x[k][0]", true),
        ("f'{self.x[k]}'", true),
        ("f'{self.x}'", false),
        ("'self.x'", true),
        ("self.x.keys()", false),
    ] {
        let code = class(&format!(
            "    def t(self, k, j):\n        a = self.x.get(k)\n        return {expr}\n"
        ));
        let s = slice_code(&code, "t");
        let want = if keyed {
            AttrUse::Keys(BTreeSet::from(["k".to_owned()]))
        } else {
            AttrUse::Whole
        };
        assert_eq!(s.attributes.get("x"), Some(&want), "{expr}");
    }
}

#[test]
fn decorators_properties_and_class_references_are_followed() {
    let code = "import functools\n\n\nclass E:\n    @property\n    def size(self):\n        return len(self.items)\n\n    @staticmethod\n    def _fmt(x):\n        return str(x)\n\n    @functools.lru_cache(maxsize=None)\n    def unused(self):\n        return self.other\n\n    def __repr__(self):\n        return 'E'\n\n    def t(self):\n        return E._fmt(self.size)\n";
    let s = slice_code(code, "t");
    assert_eq!(s.fallback, None);
    assert_eq!(s.methods, vec!["size", "_fmt", "__repr__", "t"]);
    assert!(s.source.contains("    @property\n    def size(self):"));
    assert!(!s.source.contains("lru_cache"));
    assert_eq!(
        s.attributes,
        BTreeMap::from([("items".to_owned(), AttrUse::Whole)])
    );
}

#[test]
fn everything_reachable_gives_back_the_source() {
    let code = "class E:\n    def __init__(self, c):\n        self.a = {}\n\n    # helper\n    def _h(self):\n        return self.a\n\n    def t(self):\n        return self._h()\n";
    let s = slice_code(code, "t");
    assert!(s.full && s.fallback.is_none());
    assert_eq!(s.source, code);
}

#[test]
fn footprint_slices_and_the_oracle() {
    let state = json!({
        "orders": {"O1": {"s": 1, "t": 2}, "O2": {"s": 3}},
        "items": [{"a": 1}, {"a": 2}],
        "n": 5,
        "unused": {"z": 1},
    });
    // `self.orders[...]["s"]`, `self.items[0]`, `self.n`, a lookup of a missing order.
    let reads = ptrs(&[
        "/orders",
        "/orders/O1",
        "/orders/O1/s",
        "/orders/O9",
        "/items",
        "/items/0/a",
        "/n",
    ]);
    let fp = footprint(&state, &reads);
    assert_eq!(fp.containers, ptrs(&["/orders"]));
    assert_eq!(
        fp.values,
        ptrs(&["/items", "/n", "/orders/O1", "/orders/O9"])
    );
    let slice = slice_with_reads(&state, &reads);
    assert_eq!(
        slice,
        json!({"orders": {"O1": {"s": 1, "t": 2}}, "items": [{"a": 1}, {"a": 2}], "n": 5})
    );
    assert_eq!(slice_covers(&state, &slice, &reads), Ok(()));
    assert_eq!(slice_covers(&state, &state, &reads), Ok(()));
    // Missing a read value, adding a key that is absent, missing the container.
    let bad = json!({"orders": {"O1": {"s": 1}}, "items": [], "n": 5});
    assert_eq!(
        slice_covers(&state, &bad, &reads),
        Err(JsonPointer::parse("/items").unwrap())
    );
    let extra =
        json!({"orders": {"O1": {"s": 1, "t": 2}, "O9": 0}, "items": [{"a": 1}, {"a": 2}], "n": 5});
    assert_eq!(
        slice_covers(&state, &extra, &reads),
        Err(JsonPointer::parse("/orders/O9").unwrap())
    );
    let no_container = json!({"items": [{"a": 1}, {"a": 2}], "n": 5});
    assert_eq!(
        slice_covers(&state, &no_container, &ptrs(&["/orders", "/orders/O9"])),
        Err(JsonPointer::parse("/orders").unwrap())
    );
    // A top-level read with nothing below it (len, iteration) needs the whole value.
    let len = ptrs(&["/orders"]);
    assert_eq!(
        slice_with_reads(&state, &len),
        json!({"orders": state["orders"]})
    );
    assert!(slice_covers(&state, &json!({"orders": {"O1": {"s": 1, "t": 2}}}), &len).is_err());
}

const DB: &str = r#""""A shop over one JSON database."""

import json

CURRENCY = "EUR"


def _user(data, uid):
    return data["users"].get(uid)


def _order(orders, oid):
    return orders[oid]


def get_user(data, user_id):
    user = _user(data, user_id)
    if user is None:
        return "Error: user not found"
    return json.dumps(user)


def get_order(data, order_id):
    if order_id not in data["orders"]:
        return "Error: order not found"
    order = data["orders"][order_id]
    return ", ".join(order["items"])


def cancel_order(data, order_id, reason):
    orders = data.get("orders", {})
    order = _order(orders, order_id)
    order["status"] = "cancelled"
    data["log"].append(reason)
    return "ok"


def list_orders(data, user_id):
    orders = data["orders"]
    mine = [o for o in orders.values() if o["user_id"] == user_id]
    return f"{len(mine)} of {len(data['users'])} users"


def buyer_of(data, order_id):
    order = data["orders"][order_id]
    return data["users"][order["user_id"]]["name"]


def product(data, sku, tag):
    if "products" not in data:
        return "Error: no products"
    p = data["products"][f"P-{sku}"]
    return p["name"] + data["tags"][tag.lower()] + data["settings"]["currency"]


def dump(data):
    return json.dumps(data)


def by_table(data, table, key):
    return data[table][key]
"#;

fn db_state() -> Value {
    json!({
        "users": {"U1": {"name": "Ann"}, "U2": {"name": "Bo"}},
        "orders": {"O1": {"user_id": "U1", "items": ["a"], "status": "new"}, "O2": {"user_id": "U2", "items": [], "status": "new"}},
        "log": ["x"],
        "products": {"P-7": {"name": "pen"}, "P-8": {"name": "ink"}},
        "tags": {"red": "!", "blue": "?"},
        "settings": {"currency": "EUR", "tax": 0.2},
        "other": {"z": 1},
    })
}

fn reason(table: &str, reason: &str) -> TableReason {
    TableReason {
        table: JsonPointer::parse(table).unwrap(),
        reason: reason.to_owned(),
    }
}

fn keys(params: &[&str]) -> AttrUse {
    AttrUse::Keys(params.iter().map(|p| (*p).to_owned()).collect())
}

const DB_ARGS: &str = r#"{"user_id": "U1", "order_id": "O1", "reason": "r", "sku": 7,
        "tag": "RED", "table": "users", "key": "U1"}"#;

fn db_slice(tool: &str) -> (CodeSlice, StateSlice) {
    let code = slice_code(DB, tool);
    let call: Value = serde_json::from_str(DB_ARGS).unwrap();
    let state = slice_state(&code, &args(call), &db_state());
    (code, state)
}

#[test]
fn database_lookups_through_helpers_and_aliases_keep_only_the_entries() {
    // data["users"].get(uid) in a helper called with (data, user_id).
    let (code, state) = db_slice("get_user");
    assert_eq!(code.convention, Convention::Database);
    assert_eq!(code.fallback, None);
    assert_eq!(code.methods, vec!["_user", "get_user"]);
    assert_eq!(
        code.attributes,
        BTreeMap::from([("users".to_owned(), keys(&["user_id"]))])
    );
    assert_eq!(state.state, json!({"users": {"U1": {"name": "Ann"}}}));
    assert_eq!(state.kept, ptrs(&["/users/U1"]));
    assert_eq!(state.partial, ptrs(&["/users"]));
    assert_eq!(state.reasons, vec![]);
    assert!(!state.full);
    // `in` with the key, then an entry alias: `order = data["orders"][order_id]`.
    let (code, state) = db_slice("get_order");
    assert_eq!(code.methods, vec!["get_order"]);
    assert_eq!(
            code.source,
            "\"\"\"A shop over one JSON database.\"\"\"\n\nimport json\n\nCURRENCY = \"EUR\"\n\ndef get_order(data, order_id):\n    if order_id not in data[\"orders\"]:\n        return \"Error: order not found\"\n    order = data[\"orders\"][order_id]\n    return \", \".join(order[\"items\"])\n"
        );
    assert_eq!(
        state.state,
        json!({"orders": {"O1": {"user_id": "U1", "items": ["a"], "status": "new"}}})
    );
    // A table alias from data.get("orders", {}) passed to a helper that looks it up; a
    // method called on a table keeps it whole.
    let (code, state) = db_slice("cancel_order");
    assert_eq!(code.methods, vec!["_order", "cancel_order"]);
    assert_eq!(
        code.attributes,
        BTreeMap::from([
            ("log".to_owned(), AttrUse::Whole),
            ("orders".to_owned(), keys(&["order_id"])),
        ])
    );
    let append = "its method append() is called at line 34 (data[\"log\"].append(reason))";
    assert_eq!(code.whole_reasons["log"], append);
    assert_eq!(
        state.state,
        json!({"orders": {"O1": {"user_id": "U1", "items": ["a"], "status": "new"}}, "log": ["x"]})
    );
    assert_eq!(state.reasons, vec![reason("/log", append)]);
}

#[test]
fn database_tables_stay_whole_only_when_the_code_needs_them_whole() {
    // Iteration through an alias, len() inside an f-string.
    let (code, state) = db_slice("list_orders");
    let iterated =
        "iterated at line 40 (mine = [o for o in orders.values() if o[\"user_id\"] == user_id])";
    let len =
        "its size is read (len) at line 41 (return f\"{len(mine)} of {len(data['users'])} users\")";
    assert_eq!(
        code.whole_reasons,
        BTreeMap::from([
            ("orders".to_owned(), iterated.to_owned()),
            ("users".to_owned(), len.to_owned()),
        ])
    );
    assert!(!state.full);
    assert_eq!(
        state.reasons,
        vec![reason("/orders", iterated), reason("/users", len)]
    );
    assert_eq!(state.state["orders"], db_state()["orders"]);
    // A key read from another value.
    let (code, state) = db_slice("buyer_of");
    assert_eq!(code.attributes["orders"], keys(&["order_id"]));
    let computed = "looked up with a key the slicer cannot compute at line 46 (return data[\"users\"][order[\"user_id\"]][\"name\"])";
    assert_eq!(state.reasons, vec![reason("/users", computed)]);
    assert_eq!(state.state["users"], db_state()["users"]);
    assert_eq!(state.kept, ptrs(&["/orders/O1", "/users"]));
    // The database itself passed on, or a table chosen by an argument: everything.
    for (tool, why) in [
            ("dump", "passed to json.dumps() at line 57 (return json.dumps(data))"),
            (
                "by_table",
                "a table chosen by a key the slicer cannot compute at line 61 (return data[table][key])",
            ),
        ] {
            let (code, state) = db_slice(tool);
            assert_eq!(code.database_whole.as_deref(), Some(why));
            assert_eq!(state.state, db_state());
            assert!(state.full);
            let expected: Vec<TableReason> = db_state()
                .as_object()
                .unwrap()
                .keys()
                .map(|k| TableReason {
                    table: JsonPointer::from_tokens([k.as_str()]),
                    reason: format!("the database is used whole: {why}"),
                })
                .collect();
            assert_eq!(state.reasons, expected);
        }
}

#[test]
fn database_keys_computed_from_arguments_and_literal_keys() {
    let (code, state) = db_slice("product");
    assert_eq!(
        code.attributes,
        BTreeMap::from([
            (
                "products".to_owned(),
                AttrUse::Entries(BTreeSet::from([vec![
                    KeyPart::Text("P-".into()),
                    KeyPart::Arg("sku".into())
                ]]))
            ),
            (
                "settings".to_owned(),
                AttrUse::Entries(BTreeSet::from([vec![KeyPart::Text("currency".into())]]))
            ),
            (
                "tags".to_owned(),
                AttrUse::Entries(BTreeSet::from([vec![KeyPart::Lower("tag".into())]]))
            ),
        ])
    );
    // sku 7 is "P-7"; "RED".lower() is "red"; `"products" not in data` needs no more.
    assert_eq!(
        state.state,
        json!({"products": {"P-7": {"name": "pen"}}, "tags": {"red": "!"}, "settings": {"currency": "EUR"}})
    );
    assert_eq!(state.reasons, vec![]);
    // Arguments the key cannot be computed from keep the table whole, saying why.
    let code = slice_code(DB, "product");
    let odd = slice_state(
        &code,
        &args(json!({"sku": true, "tag": "ROUGE\u{e9}"})),
        &db_state(),
    );
    assert_eq!(
        odd.reasons,
        vec![
            reason(
                "/products",
                "the argument sku is not a string or an integer"
            ),
            reason(
                "/tags",
                "the argument tag is not ASCII text (tag.lower() is computed for ASCII text only)"
            ),
        ]
    );
    let missing = slice_state(&code, &Map::new(), &db_state());
    assert_eq!(
        missing.reasons[0],
        reason("/products", "the argument sku is not given")
    );
    // A keyed table whose value is not an object stays whole.
    let listed = slice_state(
        &code,
        &args(json!({"sku": "7", "tag": "x"})),
        &json!({"products": [1], "tags": {}, "settings": {}}),
    );
    assert_eq!(
        listed.reasons,
        vec![reason(
            "/products",
            "looked up by key, but the value is a list (only objects are cut)"
        )]
    );
}

#[test]
fn database_existence_checks_keep_an_empty_table() {
    let code = "def has_users(data):\n    return 'users' in data\n";
    let s = slice_code(code, "has_users");
    assert_eq!(
        s.attributes,
        BTreeMap::from([("users".to_owned(), keys(&[]))])
    );
    let state = slice_state(&s, &Map::new(), &json!({"users": {"U1": 1}, "x": 2}));
    assert_eq!(state.state, json!({"users": {}}));
}

#[test]
fn database_helpers_recursion_aliases_and_rebinding() {
    // Mutual recursion between helpers that pass the database and the key along.
    let code = "def _a(db, k, n):\n    if n:\n        return _b(db, k, n - 1)\n    return db['users'][k]\n\n\ndef _b(d, key, n):\n    return _a(d, key, n)\n\n\ndef t(data, user_id):\n    return _a(data, user_id, 3)\n";
    let s = slice_code(code, "t");
    assert_eq!(s.fallback, None);
    assert_eq!(s.methods, vec!["_a", "_b", "t"]);
    assert_eq!(
        s.attributes,
        BTreeMap::from([("users".to_owned(), keys(&["user_id"]))])
    );
    // A helper called with another key somewhere: the key is not the argument.
    let code = "def _get(data, k):\n    return data['users'][k]\n\n\ndef t(data, user_id):\n    return _get(data, user_id), _get(data, 'admin')\n";
    let s = slice_code(code, "t");
    assert_eq!(s.attributes["users"], AttrUse::Whole);
    assert_eq!(
            s.whole_reasons["users"],
            "looked up by k, which does not always hold an argument of the call at line 2 (return data['users'][k])"
        );
    // Keyword arguments and an alias of the database.
    let code = "def _get(k, data=None):\n    return data['users'][k]\n\n\ndef t(data, user_id):\n    db = data\n    return _get(k=user_id, data=db)\n";
    assert_eq!(
        slice_code(code, "t").attributes["users"],
        keys(&["user_id"])
    );
    // An alias bound twice, a database parameter bound again, a helper that binds its
    // table parameter again.
    let code = "def t(data, user_id):\n    users = data['users']\n    if not users:\n        users = {}\n    return users[user_id]\n";
    let s = slice_code(code, "t");
    assert_eq!(
        s.whole_reasons["users"],
        "assigned to users, which is bound elsewhere in t at line 2 (users = data['users'])"
    );
    let code = "def t(data, user_id):\n    data = dict(data)\n    return data['users'][user_id]\n";
    assert_eq!(
        slice_code(code, "t").database_whole.as_deref(),
        Some("the database parameter data is bound again in t")
    );
    let code = "def _h(users, k):\n    users = sorted(users)\n    return users[0]\n\n\ndef t(data, user_id):\n    return _h(data['users'], user_id)\n";
    assert_eq!(
        slice_code(code, "t").whole_reasons["users"],
        "passed to _h(), which binds users again at line 7 (return _h(data['users'], user_id))"
    );
    // `... or {}` keeps the alias; a table alias passed on to an unknown function does not.
    let code = "def t(data, user_id):\n    users = data.get('users') or {}\n    return users.get(user_id)\n";
    assert_eq!(
        slice_code(code, "t").attributes["users"],
        keys(&["user_id"])
    );
    let code = "def t(data):\n    users = data['users']\n    return sorted(users)\n";
    assert_eq!(
        slice_code(code, "t").whole_reasons["users"],
        "passed to sorted() at line 3 (return sorted(users))"
    );
    // Writes: a new entry is an entry; replacing or deleting the table needs it.
    let code = "def t(data, user_id, name):\n    data['users'][user_id] = {'name': name}\n    data['log'] = []\n    del data['old']\n    return 'ok'\n";
    let s = slice_code(code, "t");
    assert_eq!(s.attributes["users"], keys(&["user_id"]));
    assert_eq!(
        s.whole_reasons["log"],
        "assigned at line 3 (data['log'] = [])"
    );
    assert_eq!(
        s.whole_reasons["old"],
        "deleted at line 4 (del data['old'])"
    );
}

#[test]
fn the_declared_convention_decides_when_both_define_the_tool() {
    let code = "class E:\n    def __init__(self, init_config):\n        self.users = {}\n\n    def t(self, k):\n        return self.users[k]\n\n\ndef t(data, k):\n    return data['orders'][k]\n";
    let class = slice_code_as(code, "t", Convention::Class);
    assert_eq!(class.convention, Convention::Class);
    assert_eq!(
        class.attributes,
        BTreeMap::from([("users".to_owned(), keys(&["k"]))])
    );
    let db = slice_code_as(code, "t", Convention::Database);
    assert_eq!(db.convention, Convention::Database);
    assert_eq!(
        db.attributes,
        BTreeMap::from([("orders".to_owned(), keys(&["k"]))])
    );
    // A class package whose tool only a class defines, declared as database: read as class.
    let s = slice_code_as(SHOP, "get_order", Convention::Database);
    assert_eq!(s.convention, Convention::Class);
    assert_eq!(s, slice_code(SHOP, "get_order"));
    // Neither defines it: the declared convention's reason.
    assert_eq!(
        slice_code_as(SHOP, "nope", Convention::Database)
            .fallback
            .as_deref(),
        Some("no module-level function defines nope")
    );
    assert_eq!(
        slice_code(SHOP, "nope").fallback.as_deref(),
        Some("no class defines nope")
    );
    assert_eq!(Convention::parse("database"), Some(Convention::Database));
    assert_eq!(
        Convention::parse(Convention::Class.as_str()),
        Some(Convention::Class)
    );
    assert_eq!(Convention::parse("Class"), None);
    assert_eq!(
        serde_json::from_value::<Convention>(json!("database")).unwrap(),
        Convention::Database
    );
    assert_eq!(Convention::default(), Convention::Class);
}

#[test]
fn database_fallbacks() {
    for (code, why) in [
        ("def t(data):\n    return eval('data')\n", "t calls eval()"),
        (
            "def _h(data):\n    return globals()['x']\n\n\ndef t(data):\n    return _h(data)\n",
            "_h calls globals()",
        ),
        ("def t():\n    return 1\n", "t has no database parameter"),
        (
            "def t(*args):\n    return 1\n",
            "t has no database parameter",
        ),
        (
            "def t(data):\n    return 1\n\n\ndef t(data):\n    return 2\n",
            "function t is defined twice",
        ),
        (
            "import functools\n\n@functools.wraps\ndef t(data):\n    return 1\n",
            "t is decorated (@functools.wraps)",
        ),
        (
            "def t(data):\n    return (1\n",
            "the source does not scan (string or brackets)",
        ),
    ] {
        let s = slice_code_as(code, "t", Convention::Database);
        assert_eq!(s.fallback.as_deref(), Some(why), "{code}");
        assert!(s.full && s.source == code);
        let state = slice_state(&s, &Map::new(), &json!({"a": {"b": 1}}));
        assert_eq!(
            state.reasons,
            vec![reason("/a", &format!("the code slicer fell back: {why}"))]
        );
    }
    // Not an object: the root, whole.
    let s = slice_code(DB, "get_user");
    let state = slice_state(&s, &Map::new(), &json!([1]));
    assert_eq!(
        state.reasons,
        vec![reason("", "the state is not a JSON object")]
    );
}

#[test]
fn class_style_gains_computed_keys_aliases_and_table_helpers() {
    for (body, want) in [
            ("        orders = self.x\n        return orders[k]\n", keys(&["k"])),
            ("        return self.x[str(k)]\n", keys(&["k"])),
            ("        return str(k) in self.x\n", keys(&["k"])),
            ("        return k.upper() not in self.x\n", AttrUse::Entries(BTreeSet::from([vec![KeyPart::Upper("k".into())]]))),
            ("        return len(k) in self.x\n", AttrUse::Whole),
            ("        return self.x.get(k.strip())\n", AttrUse::Entries(BTreeSet::from([vec![KeyPart::Strip("k".into())]]))),
            ("        return self.x[f'O-{k}']\n", AttrUse::Entries(BTreeSet::from([vec![KeyPart::Text("O-".into()), KeyPart::Arg("k".into())]]))),
            ("        return self._h(self.x, k)\n\n    def _h(self, table, key):\n        return table[key]\n", keys(&["k"])),
            // Literal keys stay whole in the class style (unchanged).
            ("        return self.x['a']\n", AttrUse::Whole),
            ("        return self.x[f'O-1']\n", AttrUse::Whole),
        ] {
            let code = class(&format!("    def t(self, k):\n{body}"));
            let s = slice_code(&code, "t");
            assert_eq!(s.fallback, None, "{body}");
            assert_eq!(s.attributes.get("x"), Some(&want), "{body}");
        }
    let code = class("    def t(self, k):\n        orders = self.x\n        return [o for o in orders.values()]\n");
    assert_eq!(
        slice_code(&code, "t").whole_reasons["x"],
        "iterated at line 7 (return [o for o in orders.values()])"
    );
    let s = slice_code(SHOP, "count");
    assert_eq!(
            s.whole_reasons["orders"],
            "its size is read (len) at line 54 (return {\"success\": True, \"data\": len(self.orders)})"
        );
    let state = slice_state(&s, &Map::new(), &json!({"orders": {"O1": 1}}));
    assert_eq!(
            state.reasons,
            vec![reason(
                "/orders",
                "its size is read (len) at line 54 (return {\"success\": True, \"data\": len(self.orders)})"
            )]
        );
}

#[test]
fn adversarial_database_sources_never_panic() {
    for code in [
        "def t(data",
        "def t(data):\n    return data[",
        "def t(data):\n    return data['users'\n",
        "def t(data):\n    return data[]\n",
        "def t(data):\n    return data.get(\n",
        "def t(data):\n    return data.get()\n",
        "def t(data):\n    return data.setdefault('x'\n",
        "def t(data):\n    return f'{data[\"u\"][k]}'\n",
        "def t(data):\n    return f'{data}'\n",
        "def t(data):\n    x = data\n    data = x\n    return x['a']\n",
        "def t(data):\n    a = b = data\n    return a['u']\n",
        "def t(data):\n    a = data['u']\n    b = a\n    a = b\n    return b[1]\n",
        "def t(data, k):\n    return t(data, k) or data['u'][k]\n",
        "def _h(data):\n    return _h(data)\n\n\ndef t(data):\n    return _h(data)\n",
        "def t(data):\n    return _missing(data)\n",
        "def t(data):\n    return (lambda data: data)(data)\n",
        "def t(data):\n    'users' in data\n    in data\n",
        "def t(data):\n    = data['u']\n",
        "def t(data):\n    u = data['u'] or {}\n    return u[\n",
        "def t(data, **kw):\n    return data['u'][kw['k']]\n",
        "def t(data, k):\n    return data['u'][f'{k']\n",
        "def t(data, k):\n    return data['u'][f'{k}}']\n",
        "def t(data, k):\n    return data['u'][u'']\n",
        "def t(data, k):\n    return data[\"\"][\"\"]\n",
        "def t(data):\n\treturn data['é']['ключ']\n",
        "def t(data):\r\n    return data['u']\r\n",
        "@\ndef t(data):\n    return 1\n",
        "def t(data):\n    return data['u'](data)\n",
        "def t(data, k):\n    return k in data['u'] in data\n",
    ] {
        for convention in [Convention::Class, Convention::Database] {
            let s = slice_code_as(code, "t", convention);
            let state = json!({"u": {"a": 1}, "users": {"k": 2}, "": {"": 3}});
            let sliced = slice_state(&s, &args(json!({"k": "a"})), &state);
            for kept in &sliced.kept {
                assert_eq!(kept.get(&sliced.state), kept.get(&state), "{code}");
            }
        }
    }
    // Recursion between helpers ends.
    let s = slice_code(
            "def _h(db, k):\n    return _g(db, k)\n\n\ndef _g(db, k):\n    return _h(db, k) or db['u'][k]\n\n\ndef t(data, k):\n    return _h(data, k)\n",
            "t",
        );
    assert_eq!(
        s.attributes,
        BTreeMap::from([("u".to_owned(), keys(&["k"]))])
    );
}

proptest::proptest! {
    #[test]
    fn never_panics_on_arbitrary_or_truncated_sources(
        code in "[a-z_ ():.\\[\\]{}'\"#\\\\@=,\n\tfkéself]{0,300}",
        cut in 0usize..2200,
    ) {
        let state = json!({"x": {"a": 1}, "orders": {"O1": {}}});
        let s = slice_code(&code, "t");
        let _ = slice_state(&s, &args(json!({"k": "a"})), &state);
        let truncated: String = SHOP.chars().take(cut).collect();
        for tool in ["pay", "get_order", "count", "t"] {
            let s = slice_code(&truncated, tool);
            proptest::prop_assert!(s.source.len() <= truncated.len());
            let _ = slice_state(&s, &args(json!({"order_id": "O1"})), &state);
        }
    }
}

proptest::proptest! {
    #[test]
    fn never_panics_on_database_style_sources(
        code in "(def t\\(data, k\\):\n    |[a-z_ ():.\\[\\]{}'\"#=,\n\tfk]|data|users|\\['u'\\]|\\.get\\(| in |for ){0,80}",
        cut in 0usize..1400,
    ) {
        let state = json!({"u": {"a": 1}, "users": {"U1": {}}, "orders": {"O1": {}}});
        for convention in [Convention::Class, Convention::Database] {
            let s = slice_code_as(&code, "t", convention);
            let sliced = slice_state(&s, &args(json!({"k": "a"})), &state);
            for kept in &sliced.kept {
                proptest::prop_assert_eq!(kept.get(&sliced.state), kept.get(&state));
            }
            // A reason for exactly the tables kept whole.
            let whole: Vec<&JsonPointer> =
                sliced.kept.iter().filter(|p| p.tokens().len() <= 1).collect();
            let explained: Vec<&JsonPointer> = sliced.reasons.iter().map(|r| &r.table).collect();
            proptest::prop_assert_eq!(whole, explained);
        }
        let truncated: String = DB.chars().take(cut).collect();
        for tool in ["get_user", "cancel_order", "product", "t"] {
            let s = slice_code(&truncated, tool);
            proptest::prop_assert!(s.source.len() <= truncated.len());
            let _ = slice_state(&s, &args(json!({"user_id": "U1", "sku": 1})), &db_state());
        }
    }
}

#[test]
fn never_panics_on_odd_sources() {
    for code in [
        "",
        "\n\n",
        "class",
        "class E",
        "class E:\n",
        "class E:\n    def",
        "class E:\n    def t",
        "class E:\n    def t(self",
        "class E:\n  def t(self):\n    return self.\n",
        "class E:\n    def t(self): return self.x[",
        "class E:\n    def t(self):\n        return f'{self.x'\n",
        "class E:\n    def t(self):\n        return '''",
        "class E:\n    def t(self):\n        return 1 \\",
        "class E:\n\tdef t(self):\n\t\treturn self.x[k]\n",
        "class E:\r\n    def t(self, k):\r\n        return self.x[k]\r\n",
        "class É:\n    def t(self, ключ):\n        return self.x[ключ]\n",
        "@dec\n",
        "class E:\n    @dec\n",
        ")",
    ] {
        let s = slice_code(code, "t");
        let _ = slice_state(&s, &Map::new(), &json!({"x": {"a": 1}}));
    }
    let s = slice_code(
        "class E:\r\n    def t(self, k):\r\n        return self.x[k]\r\n",
        "t",
    );
    assert_eq!(
        s.attributes.get("x"),
        Some(&AttrUse::Keys(BTreeSet::from(["k".to_owned()])))
    );
}
