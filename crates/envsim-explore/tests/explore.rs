//! The explorer on a package written for it: an order lifecycle four steps deep, a date format
//! and a taken value, which random walks do not get through and the guided strategy does;
//! determinism, whole paths, the coverage report, scripted seeds and the plateau.

use envsim_exec::package::EnvPackage;
use envsim_exec::{Executor, Limits};
use envsim_explore::plan::{ExplorePlan, Strategy};
use envsim_explore::record::Outcome;
use envsim_explore::report::Stop;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

const CODE: &str = r#"
import re

class Shop:
    def __init__(self, config):
        self.orders = {}
        self.customers = {}
        self.deliveries = {}

    def _order(self, order_id):
        if order_id not in self.orders:
            return None, {"success": False, "error": f"Order {order_id} not found"}
        return self.orders[order_id], None

    def get_order(self, order_id: str) -> dict:
        order, err = self._order(order_id)
        return err or {"success": True, "order": order}

    def pay(self, order_id: str) -> dict:
        order, err = self._order(order_id)
        if err:
            return err
        if order["status"] != "placed":
            return {"success": False, "error": f"Order {order_id} is {order['status']}; only placed orders can be paid"}
        order["status"] = "paid"
        return {"success": True}

    def ship(self, order_id: str) -> dict:
        order, err = self._order(order_id)
        if err:
            return err
        if order["status"] != "paid":
            return {"success": False, "error": f"Order {order_id} is {order['status']}; only paid orders ship"}
        order["status"] = "shipped"
        return {"success": True}

    def deliver(self, order_id: str) -> dict:
        order, err = self._order(order_id)
        if err:
            return err
        if order["status"] != "shipped":
            return {"success": False, "error": f"Order {order_id} is {order['status']}; only shipped orders are delivered"}
        order["status"] = "delivered"
        return {"success": True}

    def refund(self, order_id: str) -> dict:
        order, err = self._order(order_id)
        if err:
            return err
        if order["status"] != "delivered":
            return {"success": False, "error": f"Order {order_id} is {order['status']}; only delivered orders are refunded"}
        order["status"] = "refunded"
        return {"success": True}

    def schedule_delivery(self, order_id: str, day: str) -> dict:
        order, err = self._order(order_id)
        if err:
            return err
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day):
            return {"success": False, "error": "day must be YYYY-MM-DD"}
        self.deliveries[order_id] = day
        return {"success": True}

    def register(self, email: str) -> dict:
        if "@" not in email:
            return {"success": False, "error": "email must be an address"}
        if email in self.customers:
            return {"success": False, "error": f"{email} is already registered"}
        self.customers[email] = {"orders": 0}
        return {"success": True}
"#;

/// A tool of a test manifest whose parameters are all required.
fn tool(name: &str, props: Value) -> Value {
    let required: Vec<&String> = props.as_object().unwrap().keys().collect();
    json!({"type": "function", "function": {"name": name, "description": format!("{name}."),
        "parameters": {"type": "object", "properties": props, "required": required}}})
}

/// A package `name` of class `class` in `root`: its code, tools and one initial state.
fn write_one_state(
    root: &Path,
    (name, class): (&str, &str),
    code: &str,
    tools: Vec<Value>,
    state: Value,
) -> EnvPackage {
    let pkg = root.join(name);
    std::fs::create_dir_all(pkg.join("states")).unwrap();
    std::fs::write(pkg.join("env.py"), code).unwrap();
    let manifest = json!({"name": name, "domain": "test", "description": format!("{name}."),
        "class_name": class, "tools": tools});
    std::fs::write(pkg.join("manifest.json"), manifest.to_string()).unwrap();
    std::fs::write(pkg.join("states/00.json"), state.to_string()).unwrap();
    EnvPackage::load(&pkg).unwrap()
}

fn write_package(root: &Path, tests: Option<Value>) -> EnvPackage {
    let pkg = root.join("shop");
    std::fs::create_dir_all(pkg.join("states")).unwrap();
    std::fs::write(pkg.join("env.py"), CODE).unwrap();
    let id = json!({"order_id": {"type": "string"}});
    let manifest = json!({"name": "shop", "domain": "test", "description": "Orders.",
    "class_name": "Shop", "tools": [
        tool("get_order", id.clone()),
        tool("pay", id.clone()),
        tool("ship", id.clone()),
        tool("deliver", id.clone()),
        tool("refund", id.clone()),
        tool("schedule_delivery", json!({"order_id": {"type": "string"}, "day": {"type": "string"}})),
        tool("register", json!({"email": {"type": "string"}})),
    ]});
    std::fs::write(pkg.join("manifest.json"), manifest.to_string()).unwrap();
    // Twenty placed orders (a random walk rarely moves one order through four steps), one
    // customer, a delivery date the state records.
    let orders: serde_json::Map<String, Value> = (1..=20)
        .map(|i| {
            (
                format!("O{i:02}"),
                json!({"status": "placed", "placed_on": "2025-03-01"}),
            )
        })
        .collect();
    let state = json!({"orders": orders,
        "customers": {"ann@shop.example": {"orders": 3}},
        "deliveries": {"O01": "2025-03-04"}});
    std::fs::write(pkg.join("states/00.json"), state.to_string()).unwrap();
    if let Some(tests) = tests {
        std::fs::write(pkg.join("tests.json"), tests.to_string()).unwrap();
    }
    EnvPackage::load(&pkg).unwrap()
}

async fn explore(package: &EnvPackage, plan: ExplorePlan) -> envsim_explore::PackageExploration {
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));
    envsim_explore::explore(
        executor,
        Arc::new(vec![package.clone()]),
        plan,
        1,
        |_, _| {},
    )
    .await
    .expect("explores")
    .packages
    .remove(0)
}

fn plan(strategy: Strategy) -> ExplorePlan {
    ExplorePlan {
        strategy,
        walks: 12,
        steps: 10,
        seed: 7,
        focus_share: if strategy == Strategy::Random {
            0.0
        } else {
            0.8
        },
        ..ExplorePlan::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guided_strategy_gets_through_what_random_walks_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let package = write_package(dir.path(), None);
    let guided = explore(&package, plan(Strategy::Guided)).await;
    let random = explore(&package, plan(Strategy::Random)).await;
    for explored in [&guided, &random] {
        assert_eq!(explored.report.calls, 120, "{:?}", explored.report.strategy);
        assert_eq!(explored.report.budget, 120);
        assert_eq!(explored.report.stop, Stop::Budget);
    }
    // Refunds need an order paid, shipped and delivered first; the date needs its format;
    // the address must be new.
    assert_eq!(
        guided.report.never_succeeded(),
        Vec::<&str>::new(),
        "{:#?}",
        guided.report.tools
    );
    let missing = random.report.never_succeeded();
    assert!(missing.contains(&"refund"), "{missing:?}");
    assert!(
        guided.report.branches_reached > random.report.branches_reached,
        "{} vs {}",
        guided.report.branches_reached,
        random.report.branches_reached
    );
    // The report adds up.
    let report = &guided.report;
    assert_eq!(
        report.tools.iter().map(|t| t.calls).sum::<usize>(),
        report.calls
    );
    for t in &report.tools {
        assert_eq!(
            t.calls,
            t.successes + t.failures + t.exceptions + t.undetermined
        );
    }
    assert_eq!(
        report.branches_reached + report.unreached.len(),
        report.branches
    );
    assert!(report.lines_reached <= report.lines && report.lines > 0);
    let last = report.curve.last().expect("a curve");
    assert_eq!(
        (last.calls, last.branches_reached, last.tools_succeeding),
        (120, report.branches_reached, 7)
    );
    assert!(report
        .curve
        .windows(2)
        .all(|w| w[0].calls < w[1].calls && w[0].branches_reached <= w[1].branches_reached));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_plan_gives_the_same_exploration_and_paths_chain() {
    let dir = tempfile::tempdir().unwrap();
    let package = write_package(dir.path(), None);
    let first = explore(&package, plan(Strategy::Guided)).await;
    let second = explore(&package, plan(Strategy::Guided)).await;
    let calls = |e: &envsim_explore::PackageExploration| -> Vec<String> {
        e.records()
            .map(|r| format!("{} {} {} {}", r.walk, r.step, r.action, r.observation))
            .collect()
    };
    assert_eq!(calls(&first), calls(&second));
    let other = explore(
        &package,
        ExplorePlan {
            seed: 8,
            ..plan(Strategy::Guided)
        },
    )
    .await;
    assert_ne!(calls(&first), calls(&other));
    // Every walk's whole path starts at the initial state and each call starts where the one
    // before left the state.
    let initial = first.walks[0].records[0].config_before.value();
    for w in 0..first.walks.len() {
        let path = first.path(w);
        assert!(!path.is_empty());
        assert_eq!(path[0].config_before.value(), initial, "walk {w}");
        for pair in path.windows(2) {
            assert_eq!(pair[0].config_after, pair[1].config_before, "walk {w}");
        }
        for (k, r) in path.iter().enumerate() {
            assert_eq!(r.step, k, "walk {w}: steps count from the initial state");
        }
    }
    // As records for whole-path consumers: walk ids renumbered per path, steps from 0.
    let paths = envsim_explore::Exploration {
        packages: vec![first.clone()],
    }
    .into_paths();
    assert_eq!(
        paths.len(),
        (0..first.walks.len())
            .map(|w| first.path(w).len())
            .sum::<usize>()
    );
    assert!(paths.iter().filter(|r| r.step == 0).count() == first.walks.len());
    // Walks of a given shape: per state, the longest paths cut at the steps asked for, none
    // the beginning of another chosen.
    let shaped = envsim_explore::Exploration {
        packages: vec![first.clone()],
    }
    .longest_paths(3, 4);
    let mut walks: std::collections::BTreeMap<
        usize,
        Vec<&envsim_explore::record::TransitionRecord>,
    > = Default::default();
    for r in &shaped {
        walks.entry(r.walk).or_default().push(r);
    }
    assert_eq!(walks.len(), 3);
    let longest = (0..first.walks.len())
        .map(|w| first.path(w).len().min(4))
        .max()
        .unwrap();
    assert_eq!(longest, 4, "the exploration holds paths of 4 calls or more");
    for (w, walk) in &walks {
        assert_eq!(walk.len(), 4, "walk {w}");
        let path = first.path(first.walks.iter().position(|x| x.id == *w).unwrap());
        for (k, r) in walk.iter().enumerate() {
            assert_eq!(
                (r.step, &r.action),
                (k, &path[k].action),
                "walk {w} step {k}"
            );
        }
    }
    let actions: std::collections::BTreeSet<Vec<String>> = walks
        .values()
        .map(|w| w.iter().map(|r| r.action.to_string()).collect())
        .collect();
    assert_eq!(actions.len(), 3, "no walk chosen twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripted_tests_seed_the_exploration_and_a_plateau_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let tests = json!({"cases": [{"name": "the whole lifecycle", "state": 0, "steps": [
        {"tool": "pay", "args": {"order_id": "O05"}, "expect": {"success": true}},
        {"tool": "ship", "args": {"order_id": "O05"}, "expect": {"success": true}},
        {"tool": "deliver", "args": {"order_id": "O05"}, "expect": {"success": true}},
        {"tool": "refund", "args": {"order_id": "O05"}, "expect": {"success": true}}]}]});
    let package = write_package(dir.path(), Some(tests));
    let seeded = explore(
        &package,
        ExplorePlan {
            walks: 2,
            steps: 5,
            ..plan(Strategy::Guided)
        },
    )
    .await;
    assert_eq!(seeded.report.seed_calls, 4);
    let first: Vec<(&str, Outcome)> = seeded.walks[0]
        .records
        .iter()
        .map(|r| (r.action["name"].as_str().unwrap(), r.outcome))
        .collect();
    assert_eq!(
        first,
        [
            ("pay", Outcome::Success),
            ("ship", Outcome::Success),
            ("deliver", Outcome::Success),
            ("refund", Outcome::Success)
        ]
    );
    // Without seeds none of those calls is replayed.
    let unseeded = explore(
        &package,
        ExplorePlan {
            walks: 2,
            steps: 5,
            seeds: false,
            ..plan(Strategy::Guided)
        },
    )
    .await;
    assert_eq!(unseeded.report.seed_calls, 0);
    // A plateau of 3 calls without anything new ends a long budget early.
    let stopped = explore(
        &package,
        ExplorePlan {
            walks: 200,
            plateau: Some(3),
            ..plan(Strategy::Guided)
        },
    )
    .await;
    assert_eq!(stopped.report.stop, Stop::Plateau);
    assert!(stopped.report.calls < stopped.report.budget);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_made_again_on_what_it_changed() {
    // Whether `pay` refuses an order already paid is what a guard is learned from; drawn at
    // random, the same order is seldom paid twice.
    let dir = tempfile::tempdir().unwrap();
    let package = write_package(dir.path(), None);
    let guided = explore(&package, plan(Strategy::Guided)).await;
    let mut repeats = Vec::new();
    for w in 0..guided.walks.len() {
        for pair in guided.path(w).windows(2) {
            let (first, again) = (pair[0], pair[1]);
            if first.outcome == Outcome::Success
                && first.config_after != first.config_before
                && again.action == first.action
            {
                repeats.push((again.action["name"].clone(), again.outcome));
            }
        }
    }
    assert!(
        repeats
            .iter()
            .any(|(_, outcome)| *outcome == Outcome::Failure),
        "{repeats:?}"
    );
}

const NOTES: &str = r#"
class Notes:
    def __init__(self, config):
        self.notes = {}

    def add_note(self, text: str, priority: int) -> dict:
        if not isinstance(text, str) or not 3 <= len(text.strip()) <= 40:
            return {"success": False, "error": "text must be 3-40 characters"}
        if priority > 5:
            return {"success": False, "error": "priority too high"}
        self.notes[str(len(self.notes) + 1)] = {"text": text, "priority": priority}
        return {"success": True}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successful_call_is_made_again_on_both_sides_of_the_bounds_its_code_tests() {
    // Drawn texts are short and drawn numbers seldom 6: the bounds the code tests (a 40-
    // character text, a priority of 5) are where an off-by-one would hide, and probes put the
    // call exactly there.
    let dir = tempfile::tempdir().unwrap();
    let add_note = json!({"type": "function", "function": {
        "name": "add_note", "description": "Adds a note.",
        "parameters": {"type": "object", "required": ["text", "priority"], "properties": {
            "text": {"type": "string"}, "priority": {"type": "integer"}}}}});
    let package = write_one_state(
        dir.path(),
        ("notes", "Notes"),
        NOTES,
        vec![add_note],
        json!({"notes": {"1": {"text": "call the bank", "priority": 2}}}),
    );
    let guided = explore(&package, plan(Strategy::Guided)).await;
    let calls: Vec<(Value, Outcome)> = guided
        .walks
        .iter()
        .flat_map(|w| &w.records)
        .map(|r| (r.action["arguments"].clone(), r.outcome))
        .collect();
    let outcome_where = |test: &dyn Fn(&Value) -> bool| -> Vec<Outcome> {
        calls
            .iter()
            .filter(|(args, _)| test(args))
            .map(|(_, o)| *o)
            .collect()
    };
    // Both sides of each bound were called, and answered as the code says.
    for (n, answered) in [
        (41, Outcome::Failure),
        (40, Outcome::Success),
        (3, Outcome::Success),
        (2, Outcome::Failure),
    ] {
        let of_length = |a: &Value| a["text"].as_str().is_some_and(|t| t.chars().count() == n);
        assert!(
            outcome_where(&of_length).contains(&answered),
            "{n}: {calls:?}"
        );
    }
    assert!(outcome_where(&|a| a["priority"] == 6).contains(&Outcome::Failure));
    assert!(outcome_where(&|a| a["priority"] == 5).contains(&Outcome::Success));
}

const NEWSLETTER: &str = r#"
class Newsletter:
    def __init__(self, config):
        self.subscribers = config.get("subscribers", {})
        self.topics = {}

    def subscribe(self, email: str) -> dict:
        if "@" not in email:
            return {"success": False, "error": "email: value is not a valid email address"}
        self.subscribers[email] = {"verified": False}
        return {"success": True}

    def verify_account(self, email: str, code: int) -> dict:
        # No code is ever right, and every refusal names the next one to try.
        return {"success": False, "error": f"Code {code} is no longer valid; use code {code + 1}."}

    def count_subscribers(self) -> dict:
        return {"success": True, "count": len(self.subscribers)}

    # Twenty more tools, each a topic of its own that takes any name.
    for _k in range(20):
        def _adds(k):
            def add(self, name: str) -> dict:
                self.topics[f"{k}/{name}"] = {"posts": 0}
                return {"success": True}
            return add
        locals()[f"add_topic_{_k}"] = _adds(_k)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_that_lead_nowhere_stop_being_read_after_twice_a_tools_share() {
    // `verify_account` never succeeds and every refusal names another code to try: read for
    // ever, its repairs would take the budget from the other tools.
    let dir = tempfile::tempdir().unwrap();
    let email = json!({"type": "string", "description": "The subscriber's email address."});
    let mut tools = vec![
        tool("subscribe", json!({"email": email})),
        tool(
            "verify_account",
            json!({"email": email, "code": {"type": "integer"}}),
        ),
        tool("count_subscribers", json!({})),
    ];
    tools.extend((0..20).map(|k| {
        tool(
            &format!("add_topic_{k}"),
            json!({"name": {"type": "string"}}),
        )
    }));
    let subscribers: serde_json::Map<String, Value> = (1..=30)
        .map(|i| (format!("reader{i}@mail.example"), json!({"verified": true})))
        .collect();
    let package = write_one_state(
        dir.path(),
        ("newsletter", "Newsletter"),
        NEWSLETTER,
        tools,
        json!({"subscribers": subscribers}),
    );
    let guided = explore(
        &package,
        ExplorePlan {
            walks: 40,
            ..plan(Strategy::Guided)
        },
    )
    .await;
    assert_eq!(
        guided.report.tools_succeeding(),
        22,
        "{:?}",
        guided.report.tools
    );
    // Twice the tool's even share of the budget.
    let cap = 2.0 * guided.report.calls as f64 / 23.0;
    // In the order made: the calls of `verify_account` that follow its own refusal in the
    // same walk (what reading the refusal proposes) once it has had its share.
    let (mut verify, mut followed_after_cap, mut followed_before_cap) = (0usize, 0usize, 0usize);
    for walk in &guided.walks {
        for pair in walk.records.windows(2) {
            if pair[1].action["name"] != "verify_account" {
                continue;
            }
            verify += 1;
            if pair[0].action["name"] == "verify_account" {
                if verify as f64 > cap + 1.0 {
                    followed_after_cap += 1;
                } else {
                    followed_before_cap += 1;
                }
            }
        }
    }
    assert!(
        followed_before_cap >= 3,
        "its refusals were read: {followed_before_cap}"
    );
    // A few proposals read before the cap may still be waiting when it is reached; without the
    // cap, the refusals go on being read (29 such calls at this seed, 73 calls of the tool).
    assert!(
        followed_after_cap <= 3 && (verify as f64) < 1.5 * cap,
        "{verify} calls of the tool that never succeeds, {followed_after_cap} after its own \
         refusal beyond the cap of {cap:.1}"
    );
}
