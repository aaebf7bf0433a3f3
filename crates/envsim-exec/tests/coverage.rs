//! Coverage of environment code: the code map's lines and branch outcomes, and what each call
//! reports, in both conventions, for successes, failures and exceptions.

use envsim_exec::coverage::LineArc;
use envsim_exec::{Call, EnvCode, ExecError, Executor, Limits};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

// Line numbers matter: the first line of the string is line 1.
const SHOP: &str = r#"class Shop:
    def __init__(self, init_config):
        self.orders = {}
        if init_config:
            self.note = "configured"

    def pay(self, order_id: str):
        order = self.orders.get(order_id)
        if order is None:
            return {"success": False, "error": "no such order"}
        if order["status"] != "new":
            return {"success": False, "error": "order is " + order["status"]}
        order["status"] = "paid"
        return {"success": True}

    def total(self):
        n = 0
        for o in self.orders.values():
            n += o["qty"]
        return {"success": True, "total": n}

    def crash(self, n: int):
        if n > 0:
            raise ValueError("boom")
        return {"success": True}
"#;

fn arc(from: u32, to: u32) -> LineArc {
    LineArc { from, to }
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

async fn executor() -> Executor {
    Executor::new(1, Limits::default()).await.unwrap()
}

#[tokio::test]
async fn the_code_map_lists_the_functions_lines_and_branch_outcomes() {
    let exec = executor().await;
    let env = EnvCode::new(SHOP, "Shop");
    let map = exec.code_map(&env).await.unwrap();
    // The constructor (lines 3-5) runs outside the trace and is not part of the map.
    let lines: Vec<u32> = map.lines.iter().copied().collect();
    assert_eq!(
        lines,
        [8, 9, 10, 11, 12, 13, 14, 17, 18, 19, 20, 23, 24, 25]
    );
    let branches: BTreeSet<LineArc> = [
        arc(9, 10),
        arc(9, 11),
        arc(11, 12),
        arc(11, 13),
        arc(18, 19),
        arc(18, 20),
        arc(23, 24),
        arc(23, 25),
    ]
    .into_iter()
    .collect();
    assert_eq!(map.branches, branches);
}

const LISTINGS: &str = r#"
def _is_amount(value):
    return isinstance(value, (int, float)) and value > 0


class Listings:
    def __init__(self, init_config):
        self.items = {}

    def create(self, title: str, price: float, tags: list, count: int = 1):
        if not 5 <= len(title.strip()) <= 120:
            return {"success": False, "error": "title must be 5-120 characters"}
        if not _is_amount(price):
            return {"success": False, "error": "price must be positive"}
        names = [t.lower() for t in tags]
        if len(names) > 3 or count == 0 or -1 >= count:
            return {"success": False, "error": "too many tags"}
        kept = [t for t in tags if t]
        if len(kept) < 1 or len(self.items) >= 100 or price < count:
            return {"success": False, "error": "no tags"}
        return {"success": True}
"#;

#[tokio::test]
async fn the_code_map_lists_the_numbers_parameters_are_compared_with() {
    let exec = executor().await;
    let env = EnvCode::new(LISTINGS, "Listings");
    let map = exec.code_map(&env).await.unwrap();
    let got: Vec<(&str, &str, bool, &str, f64)> = map
        .comparisons
        .iter()
        .map(|c| {
            (
                c.function.as_str(),
                c.parameter.as_str(),
                c.length,
                c.operator.as_str(),
                c.number,
            )
        })
        .collect();
    // Read as `parameter operator number`; a local of the same length stands for its
    // parameter, a filtered one does not; a helper's bound counts for the caller that passes
    // it a parameter; a state's size and a comparison of two parameters are not parameters'
    // bounds.
    assert_eq!(
        got,
        [
            ("_is_amount", "value", false, ">", 0.0),
            ("create", "title", true, ">=", 5.0),
            ("create", "title", true, "<=", 120.0),
            ("create", "tags", true, ">", 3.0),
            ("create", "count", false, "==", 0.0),
            ("create", "count", false, "<=", -1.0),
            ("create", "price", false, ">", 0.0),
        ]
    );
}

#[tokio::test]
async fn adapter_regions_are_left_out_of_the_code_map() {
    let exec = executor().await;
    // Shop's `total` and `crash` (lines 16-25) inside an adapter region, and a helper after it
    // that compares its parameter: the region's lines, branches and comparisons go, the rest of
    // the map stays as it was, line numbers unchanged.
    let wrapped = SHOP.replace(
        "    def total(self):",
        "# envsim: adapter begin\n    def total(self):",
    )
        + "# envsim: adapter end\ndef limit(n):\n    if n > 3:\n        return 1\n    return 0\n";
    let map = exec
        .code_map(&EnvCode::new(wrapped.as_str(), "Shop"))
        .await
        .unwrap();
    let lines: Vec<u32> = map.lines.iter().copied().collect();
    assert_eq!(lines, [8, 9, 10, 11, 12, 13, 14, 29, 30, 31]);
    let branches: BTreeSet<LineArc> = [
        arc(9, 10),
        arc(9, 11),
        arc(11, 12),
        arc(11, 13),
        arc(29, 30),
        arc(29, 31),
    ]
    .into_iter()
    .collect();
    assert_eq!(map.branches, branches);
    let compared: Vec<(&str, f64)> = (map.comparisons.iter())
        .map(|c| (c.function.as_str(), c.number))
        .collect();
    assert_eq!(compared, [("limit", 3.0)]);
}

#[tokio::test]
async fn each_call_reports_what_it_ran_whatever_its_outcome() {
    let exec = executor().await;
    let env = EnvCode::new(SHOP, "Shop");
    let map = exec.code_map(&env).await.unwrap();
    let state =
        json!({"orders": {"O1": {"status": "new", "qty": 2}, "O2": {"status": "paid", "qty": 3}}});
    let reached = |c: &envsim_exec::Covered| -> Vec<LineArc> {
        c.coverage.as_ref().unwrap().branches(&map).collect()
    };
    let a = args(json!({"order_id": "O1"}));
    let paid = exec.call_covered(&Call::new(&env, "pay", &a, &state)).await;
    assert_eq!(
        paid.result.as_ref().unwrap().observation_json,
        json!({"success": true})
    );
    assert_eq!(reached(&paid), [arc(9, 11), arc(11, 13)]);
    assert_eq!(paid.coverage.as_ref().unwrap().lines, [8, 9, 11, 13, 14]);
    let a = args(json!({"order_id": "O2"}));
    let refused = exec.call_covered(&Call::new(&env, "pay", &a, &state)).await;
    assert_eq!(reached(&refused), [arc(9, 11), arc(11, 12)]);
    let a = args(json!({"order_id": "O9"}));
    let missing = exec.call_covered(&Call::new(&env, "pay", &a, &state)).await;
    assert_eq!(reached(&missing), [arc(9, 10)]);
    // A loop: entered and left.
    let none = Map::new();
    let total = exec
        .call_covered(&Call::new(&env, "total", &none, &state))
        .await;
    assert_eq!(reached(&total), [arc(18, 19), arc(18, 20)]);
    let empty = json!({"orders": {}});
    let total = exec
        .call_covered(&Call::new(&env, "total", &none, &empty))
        .await;
    assert_eq!(reached(&total), [arc(18, 20)]);
    // An exception's path is coverage too.
    let a = args(json!({"n": 1}));
    let raised = exec
        .call_covered(&Call::new(&env, "crash", &a, &state))
        .await;
    assert!(matches!(raised.result, Err(ExecError::Exception { .. })));
    assert_eq!(reached(&raised), [arc(23, 24)]);
    // A call that never reaches the tool has no coverage.
    let a = args(json!({"nope": 1}));
    let invalid = exec
        .call_covered(&Call::new(&env, "crash", &a, &state))
        .await;
    assert!(matches!(invalid.result, Err(ExecError::InvalidCall(_))));
    assert!(invalid.coverage.is_none());
    // A plain call reports none and is unchanged.
    let a = args(json!({"order_id": "O1"}));
    let plain = exec
        .call(&Call::new(&env, "pay", &a, &state))
        .await
        .unwrap();
    let paid = paid.result.unwrap();
    assert_eq!(
        (plain.observation_json, plain.state_after),
        (paid.observation_json, paid.state_after)
    );
}

#[tokio::test]
async fn a_chained_call_on_the_live_instance_reports_the_same_coverage() {
    let exec = executor().await;
    let env = EnvCode::new(SHOP, "Shop");
    let state = json!({"orders": {"O1": {"status": "new", "qty": 2}}});
    let a = args(json!({"order_id": "O1"}));
    let first = exec.call_covered(&Call::new(&env, "pay", &a, &state)).await;
    let after = first.result.unwrap().state_after;
    // The next call continues on the worker's live instance; the same call from a fresh
    // worker constructs it: both report the same.
    let chained = exec.call_covered(&Call::new(&env, "pay", &a, &after)).await;
    let fresh = executor()
        .await
        .call_covered(&Call::new(&env, "pay", &a, &after))
        .await;
    assert_eq!(chained.coverage, fresh.coverage);
    assert!(chained.coverage.unwrap().lines.contains(&12));
}

#[tokio::test]
async fn database_functions_are_covered_too() {
    let code = "def bump(data, key: str):\n    if key in data['counts']:\n        data['counts'][key] += 1\n    else:\n        data['counts'][key] = 1\n    return {'success': True}\n";
    let exec = executor().await;
    let env = EnvCode::database(code);
    let map = exec.code_map(&env).await.unwrap();
    assert_eq!(
        map.branches,
        [arc(2, 3), arc(2, 5)].into_iter().collect::<BTreeSet<_>>()
    );
    let state = json!({"counts": {"a": 1}});
    let a = args(json!({"key": "b"}));
    let covered = exec
        .call_covered(&Call::new(&env, "bump", &a, &state))
        .await;
    assert_eq!(
        covered.coverage.unwrap().branches(&map).collect::<Vec<_>>(),
        [arc(2, 5)]
    );
}
