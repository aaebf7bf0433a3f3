//! The slicer's guarantee on database-convention code, by execution: for every call of a small
//! database-style environment (module-level tools `def tool(data, **kwargs)` over one JSON
//! dict), the static state slice holds every path the call reads, and running the call on the
//! slice gives the same observation and the same changes as on the full state.
//!
//! The calls run in CPython (`$ENVSIM_PYTHON` or `python3`) through a small stdlib harness that
//! wraps the database in dicts and lists recording each key read (a container's own path for
//! iteration and `len`), the way the executor's tracer reads `self.<attr>` values.

use envsim_core::diff::fine_diff;
use envsim_core::pointer::JsonPointer;
use envsim_core::rng::Rng;
use envsim_core::slice::{slice_code_as, slice_covers, slice_state, Convention};
use serde_json::{json, Map, Value};
use std::io::Write;
use std::process::{Command, Stdio};

const SHOP: &str = r#""""A shop over one JSON database."""

import json

FREE_SHIPPING = 50


def _user(data, uid):
    return data["users"].get(uid)


def _order(orders, oid):
    return orders[oid]


def _loop(db, oid, n):
    if n > 0:
        return _loop2(db, oid, n - 1)
    return db["orders"].get(oid)


def _loop2(db, key, n):
    return _loop(db, key, n)


def get_user(data, user_id):
    user = _user(data, user_id)
    if user is None:
        return "Error: user not found"
    return json.dumps(user, sort_keys=True)


def get_order(data, order_id):
    if order_id not in data["orders"]:
        return "Error: order not found"
    order = data["orders"][order_id]
    return ", ".join(order["items"])


def cancel_order(data, order_id, reason):
    orders = data.get("orders", {})
    if order_id not in orders:
        return "Error: order not found"
    order = _order(orders, order_id)
    order["status"] = "cancelled"
    data["log"].append(reason)
    return "cancelled " + order_id


def list_orders(data, user_id):
    orders = data["orders"]
    mine = sorted(k for k, o in orders.items() if o["user_id"] == user_id)
    return f"{len(mine)} of {len(data['users'])}: {mine}"


def buyer_of(data, order_id):
    order = data["orders"][order_id]
    return data["users"][order["user_id"]]["name"]


def product(data, sku, tag):
    if "products" not in data:
        return "Error: no products"
    p = data["products"].get(f"P-{sku}")
    if p is None:
        return "Error: product not found"
    label = data["tags"].get(tag.lower(), "?")
    return p["name"] + label + data["settings"]["currency"]


def add_user(data, user_id, name):
    users = data.setdefault("users", {})
    if str(user_id) in users:
        return "Error: user exists"
    users[str(user_id)] = {"name": name.strip()}
    return "added"


def recursive_status(data, order_id):
    order = _loop(data, order_id, 3)
    return "missing" if order is None else order["status"]


def total(data, order_id):
    db = data
    order = db["orders"][order_id]
    prices = db["products"]
    return sum(prices[i]["price"] for i in order["items"])


def export(data):
    return json.dumps(data, sort_keys=True)[:40]
"#;

const HARNESS: &str = r#"
import json, sys

def esc(k):
    return str(k).replace("~", "~0").replace("/", "~1")

class D(dict):
    __slots__ = ("_p", "_r")
    def _key(self, k):
        self._r.add(self._p + "/" + esc(k))
    def __getitem__(self, k):
        self._key(k); return dict.__getitem__(self, k)
    def get(self, k, d=None):
        self._key(k); return dict.get(self, k, d)
    def __contains__(self, k):
        self._key(k); return dict.__contains__(self, k)
    def setdefault(self, k, d=None):
        self._key(k); return dict.setdefault(self, k, d)
    def pop(self, k, *d):
        self._key(k); return dict.pop(self, k, *d)
    def _all(self):
        self._r.add(self._p)
    def __iter__(self):
        self._all(); return dict.__iter__(self)
    def keys(self):
        self._all(); return dict.keys(self)
    def values(self):
        self._all(); return dict.values(self)
    def items(self):
        self._all(); return dict.items(self)
    def __len__(self):
        self._all(); return dict.__len__(self)

class L(list):
    __slots__ = ("_p", "_r")
    def __getitem__(self, i):
        self._r.add(self._p); return list.__getitem__(self, i)
    def __iter__(self):
        self._r.add(self._p); return list.__iter__(self)
    def __len__(self):
        self._r.add(self._p); return list.__len__(self)

def wrap(v, p, r):
    if isinstance(v, dict):
        out = D()
        for k, x in v.items():
            dict.__setitem__(out, k, wrap(x, p + "/" + esc(k), r))
        out._p, out._r = p, r
        return out
    if isinstance(v, list):
        out = L(wrap(x, "%s/%d" % (p, i), r) for i, x in enumerate(v))
        out._p, out._r = p, r
        return out
    return v

def unwrap(v):
    if isinstance(v, dict):
        return {k: unwrap(x) for k, x in dict.items(v)}
    if isinstance(v, list):
        return [unwrap(x) for x in list.__iter__(v)]
    return v

req = json.load(sys.stdin)
env = {"__name__": "env"}
exec(compile(req["code"], "env.py", "exec"), env)
out = []
for call in req["calls"]:
    reads = set()
    data = wrap(call["state"], "", reads)
    try:
        observation = str(env[call["tool"]](data, **call["args"]))
    except Exception as e:
        observation = "raised %s: %s" % (type(e).__name__, e)
    out.append({"observation": observation, "state_after": unwrap(data), "reads": sorted(reads)})
json.dump(out, sys.stdout)
"#;

struct Run {
    observation: String,
    state_after: Value,
    reads: Vec<JsonPointer>,
}

/// Runs the calls `(tool, arguments, state)` of `code` in CPython.
fn run(code: &str, calls: &[(&str, Value, Value)]) -> Vec<Run> {
    let python = std::env::var_os("ENVSIM_PYTHON").unwrap_or_else(|| "python3".into());
    let mut child = Command::new(&python)
        .args(["-c", HARNESS])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python:?} (set ENVSIM_PYTHON): {e}"));
    let request = json!({
        "code": code,
        "calls": calls
            .iter()
            .map(|(tool, args, state)| json!({"tool": tool, "args": args, "state": state}))
            .collect::<Vec<_>>(),
    });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    runs.into_iter()
        .map(|r| Run {
            observation: r["observation"].as_str().unwrap().to_owned(),
            state_after: r["state_after"].clone(),
            reads: r["reads"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| JsonPointer::parse(p.as_str().unwrap()).unwrap())
                .collect(),
        })
        .collect()
}

fn state() -> Value {
    json!({
        "users": {"U1": {"name": "Ann"}, "U2": {"name": "Bo"}, "7": {"name": "Seven"}},
        "orders": {
            "O1": {"user_id": "U1", "items": ["P-1"], "status": "new"},
            "O2": {"user_id": "U2", "items": ["P-1", "P-2"], "status": "paid"},
        },
        "products": {"P-1": {"name": "pen", "price": 2}, "P-2": {"name": "ink", "price": 5}},
        "tags": {"red": "!", "blue": "?"},
        "settings": {"currency": "EUR", "tax": 0.2},
        "log": ["start"],
        "unrelated": {"x": {"y": 1}},
    })
}

fn calls() -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    for user in [json!("U1"), json!("U9"), json!(7), json!("7")] {
        out.push(("get_user", json!({"user_id": user})));
        out.push(("list_orders", json!({"user_id": user})));
        out.push(("add_user", json!({"user_id": user, "name": " Zed "})));
    }
    for order in [json!("O1"), json!("O2"), json!("O9")] {
        out.push(("get_order", json!({"order_id": order})));
        out.push(("cancel_order", json!({"order_id": order, "reason": "late"})));
        out.push(("buyer_of", json!({"order_id": order})));
        out.push(("recursive_status", json!({"order_id": order})));
        out.push(("total", json!({"order_id": order})));
    }
    for (sku, tag) in [(json!(1), "RED"), (json!("2"), "Blue"), (json!(3), "red")] {
        out.push(("product", json!({"sku": sku, "tag": tag})));
    }
    out.push(("export", json!({})));
    out
}

#[test]
fn database_slices_cover_every_read_and_keep_every_outcome() {
    let calls: Vec<(&str, Value, Value)> = calls()
        .into_iter()
        .map(|(tool, args)| (tool, args, state()))
        .collect();
    // Every call but `export` (which dumps the database) is cut down.
    assert_eq!(check_calls(&calls), calls.len() - 1);
    let full_runs = run(SHOP, &calls);
    // And the calls really exercised the code: found, missing, raised, changed.
    let observations: Vec<&str> = full_runs.iter().map(|r| r.observation.as_str()).collect();
    for expected in [
        "{\"name\": \"Ann\"}",
        "Error: user not found",
        "pen!EUR",
        "Error: product not found",
        "cancelled O1",
        "raised KeyError: 'O9'",
        "1 of 3: ['O1']",
        "added",
        "Error: user exists",
        "paid",
        "missing",
        "7",
    ] {
        assert!(
            observations.contains(&expected),
            "{expected} in {observations:?}"
        );
    }
}

/// Checks each call `(tool, arguments, state)`: the slice covers the traced reads and keeps the
/// observation and the changes. Returns how many slices were cut down.
fn check_calls(calls: &[(&str, Value, Value)]) -> usize {
    let slices: Vec<_> = calls
        .iter()
        .map(|(tool, args, state)| {
            let code = slice_code_as(SHOP, tool, Convention::Database);
            assert_eq!(code.fallback, None, "{tool}");
            slice_state(&code, args.as_object().unwrap(), state)
        })
        .collect();
    let on_slice: Vec<_> = calls
        .iter()
        .zip(&slices)
        .map(|((tool, args, _), s)| (*tool, args.clone(), s.state.clone()))
        .collect();
    let full_runs = run(SHOP, calls);
    let slice_runs = run(SHOP, &on_slice);
    let mut cut = 0;
    for (((tool, args, state), s), (full, sliced)) in calls
        .iter()
        .zip(&slices)
        .zip(full_runs.iter().zip(&slice_runs))
    {
        let what = format!("{tool}({args}) on {state}");
        assert_eq!(
            slice_covers(state, &s.state, &full.reads),
            Ok(()),
            "{what}: slice {}",
            s.state
        );
        assert_eq!(sliced.observation, full.observation, "{what}");
        assert_eq!(
            fine_diff(&s.state, &sliced.state_after),
            fine_diff(state, &full.state_after),
            "{what}"
        );
        cut += usize::from(!s.full);
    }
    cut
}

#[test]
fn database_slices_hold_on_random_states_and_arguments() {
    let mut rng = Rng::new(11);
    let ids = ["U1", "U2", "7", "O1", "O2", "O9", "P-1", "red", ""];
    let mut calls = Vec::new();
    for _ in 0..300 {
        // A random sub-database: each table present or not, each entry present or not.
        let mut state = Map::new();
        for (table, value) in state_tables() {
            if rng.chance(0.85) {
                let value = match value {
                    Value::Object(entries) => {
                        Value::Object(entries.into_iter().filter(|_| rng.chance(0.7)).collect())
                    }
                    other => other,
                };
                state.insert(table, value);
            }
        }
        let which = rng.below(10);
        let mut arg = || match rng.below(4) {
            0 => json!(rng.below(9)),
            _ => json!(rng.pick(&ids).copied().unwrap_or("")),
        };
        let (tool, args) = match which {
            0 => ("get_user", json!({"user_id": arg()})),
            1 => ("list_orders", json!({"user_id": arg()})),
            2 => ("add_user", json!({"user_id": arg(), "name": " Zed "})),
            3 => ("get_order", json!({"order_id": arg()})),
            4 => ("cancel_order", json!({"order_id": arg(), "reason": "late"})),
            5 => ("buyer_of", json!({"order_id": arg()})),
            6 => ("recursive_status", json!({"order_id": arg()})),
            7 => ("total", json!({"order_id": arg()})),
            8 => ("product", json!({"sku": arg(), "tag": "RED"})),
            _ => ("product", json!({"sku": 1, "tag": arg()})),
        };
        calls.push((tool, args, Value::Object(state)));
    }
    let cut = check_calls(&calls);
    assert!(cut > 250, "{cut} of 300 slices cut down");
}

fn state_tables() -> Map<String, Value> {
    state().as_object().unwrap().clone()
}

#[test]
fn database_slices_are_small_and_say_why_tables_stay_whole() {
    let full_state = state();
    let slice = |tool: &str, args: Value| {
        let code = slice_code_as(SHOP, tool, Convention::Database);
        slice_state(&code, args.as_object().unwrap(), &full_state)
    };
    let s = slice("recursive_status", json!({"order_id": "O2"}));
    assert_eq!(
        s.state,
        json!({"orders": {"O2": {"user_id": "U2", "items": ["P-1", "P-2"], "status": "paid"}}})
    );
    let s = slice("add_user", json!({"user_id": 7, "name": "x"}));
    assert_eq!(s.state, json!({"users": {"7": {"name": "Seven"}}}));
    let s = slice("total", json!({"order_id": "O1"}));
    let reasons: Vec<(String, &str)> = s
        .reasons
        .iter()
        .map(|r| (r.table.to_string(), r.reason.as_str()))
        .collect();
    assert_eq!(
        reasons,
        vec![(
            "/products".to_owned(),
            "looked up by i, which does not always hold an argument of the call at line 88 (return sum(prices[i][\"price\"] for i in order[\"items\"]))"
        )]
    );
    let s = slice("list_orders", json!({"user_id": "U1"}));
    let reasons: Vec<String> = s.reasons.iter().map(|r| r.reason.clone()).collect();
    assert_eq!(
        reasons,
        vec![
            "iterated at line 52 (mine = sorted(k for k, o in orders.items() if o[\"user_id\"] == user_id))",
            "its size is read (len) at line 53 (return f\"{len(mine)} of {len(data['users'])}: {mine}\")",
        ]
    );
}
