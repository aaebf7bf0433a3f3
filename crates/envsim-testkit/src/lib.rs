//! Deterministic synthetic benchmarks and simulated model outputs for envsim's tests, benchmarks
//! and demo data. Not part of the product: real benchmarks come from executing environment code.
//!
//! [`SyntheticBench`] builds reference-format records over a shop-like state (users, orders,
//! inventory, files) whose size is chosen by the caller, with transitions covering every
//! reference stratum. [`NoisySimulator`] turns a transition into the kind of raw text an LLM
//! simulator produces (prose, fences, Python literals) with a chosen error rate that grows with
//! |Δ|, to exercise the scorer like a real model would.
//!
//! [`messy_outputs`] writes the same answers in every shape (and with every mistake) that the
//! reference evaluator's parsing treats specially, for differential tests of the scoring lanes.
//!
//! [`openai_double`] is a loopback OpenAI-compatible chat-completions test double; [`desk`] a
//! small environment package written to a folder; [`tally`] a package as a writer model answers
//! with it.

pub mod desk;
mod messy;
pub mod openai_double;
pub mod tally;

pub use messy::messy_outputs;

use envsim_core::diff::{changes_to_json, PathStyle};
use envsim_core::python::repr::to_python_repr;
use envsim_core::sample::{Action, Origin, Transition};
use serde_json::{json, Map, Value};

pub use envsim_core::rng::Rng;

/// What kinds of changes the generated transitions may contain.
#[derive(Clone, Copy, Debug)]
pub struct BenchOptions {
    /// Number of users in each state (orders and inventory scale with it; at least 10 so that
    /// |Δ| up to 12 can be built); see the crate tests for the resulting sizes.
    pub users: usize,
    /// Include transitions that remove keys (which the reference scorer cannot credit).
    pub removals: bool,
    /// Include keys that contain dots (which the reference scorer splits).
    pub dotted_keys: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            users: 40,
            removals: true,
            dotted_keys: true,
        }
    }
}

const CITIES: [&str; 6] = ["Lyon", "Osaka", "Quito", "Tartu", "Accra", "Perth"];
const STATUSES: [&str; 4] = ["new", "paid", "shipped", "delivered"];
const ENV_CODE: &str = "class Shop:\n    def __init__(self, init_config: dict):\n        self.users = {}\n        self.orders = {}\n        self.inventory = {}\n        self.files = {}\n\n    def get_order(self, order_id: str) -> dict:\n        if order_id not in self.orders:\n            return {'success': False, 'error': 'Order not found'}\n        return {'success': True, 'data': self.orders[order_id]}\n";

/// A transition for tests: the two states and the observation as given, a call `tool()`
/// without arguments, id `"0"`.
pub fn transition(before: Value, after: Value, observation: Value) -> Transition {
    Transition {
        id: "0".into(),
        origin: Origin {
            record: 0,
            step: None,
        },
        env_id: None,
        task_id: None,
        action: Action {
            name: "tool".into(),
            arguments: Map::new(),
        },
        observation,
        config_before: before,
        config_after: after,
        stored_change_count: None,
        env_code: String::new(),
    }
}

/// Builds a synthetic initial state.
pub fn shop_state(rng: &mut Rng, options: &BenchOptions) -> Value {
    let mut users = Map::new();
    let mut orders = Map::new();
    let mut inventory = Map::new();
    for s in 0..options.users.max(10) {
        inventory.insert(
            format!("SKU{s:04}"),
            json!({"stock": rng.below(50), "price": (rng.below(9000) as f64) / 100.0 + 1.0, "reserved": 0}),
        );
    }
    for u in 0..options.users.max(10) {
        let id = format!("U{u:04}");
        let tier = ["basic", "gold"][rng.below(2)];
        users.insert(
            id.clone(),
            json!({
                "name": format!("user {u}"),
                "email": format!("user{u}@example.org"),
                "balance": rng.below(100_000) as f64 / 100.0,
                "tier": tier,
                "active": true,
                "address": {"city": CITIES[rng.below(CITIES.len())], "zip": format!("{:05}", rng.below(99_999))},
                "tags": ["newsletter"],
            }),
        );
        for k in 0..2 {
            let items: Vec<Value> = (0..1 + rng.below(3))
                .map(|_| json!({"sku": format!("SKU{:04}", rng.below(options.users.max(10))), "qty": 1 + rng.below(4)}))
                .collect();
            orders.insert(
                format!("O{u:04}{k}"),
                json!({"user_id": id, "status": STATUSES[rng.below(4)], "total": rng.below(50_000) as f64 / 100.0, "items": items, "note": null}),
            );
        }
    }
    let mut files = Map::new();
    if options.dotted_keys {
        files.insert("report.txt".into(), json!({"size": 120, "owner": "U0000"}));
        files.insert(
            "data.v2.csv".into(),
            json!({"size": 4096, "owner": "U0001"}),
        );
    } else {
        files.insert("report_txt".into(), json!({"size": 120, "owner": "U0000"}));
    }
    json!({"users": users, "orders": orders, "inventory": inventory, "files": files, "next_order": 1})
}

/// A generated transition: the call, the observation value (before rendering) and the states.
struct Step {
    name: &'static str,
    arguments: Value,
    result: Value,
    after: Value,
}

/// One stratum target: `None` = failure, `Some((0, args))` = no change, `Some((k, _))` = |Δ| k.
type Target = Option<(usize, usize)>;

/// `round` cycles the |Δ| = 1 variants so that every kind appears in small fixtures: a write
/// under a (possibly dotted) file key, a removal (if enabled), a status change, a list append.
fn make_step(
    rng: &mut Rng,
    before: &Value,
    target: Target,
    options: &BenchOptions,
    round: usize,
) -> Step {
    let mut after = before.clone();
    let user_ids: Vec<String> = before["users"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let order_ids: Vec<String> = before["orders"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let pick = |rng: &mut Rng, ids: &[String]| ids[rng.below(ids.len())].clone();
    match target {
        None => {
            let missing = format!("O{}", 90_000 + rng.below(1000));
            Step {
                name: "cancel_order",
                arguments: json!({"order_id": missing}),
                result: json!({"success": false, "error": format!("Order {missing} not found")}),
                after,
            }
        }
        Some((0, 0)) => Step {
            name: "count_users",
            arguments: json!({}),
            result: json!({"success": true, "data": user_ids.len()}),
            after,
        },
        Some((0, _)) => {
            let id = pick(rng, &order_ids);
            Step {
                name: "get_order",
                arguments: json!({"order_id": id}),
                result: json!({"success": true, "data": before["orders"][&id]}),
                after,
            }
        }
        Some((1, _)) => match [2, 3, 0, 1]
            .into_iter()
            .filter(|v| options.removals || *v != 3)
            .cycle()
            .nth(round)
            .unwrap_or(0)
        {
            0 => {
                let id = pick(rng, &order_ids);
                after["orders"][&id]["status"] = json!("cancelled");
                Step {
                    name: "cancel_order",
                    arguments: json!({"order_id": id}),
                    result: json!({"success": true, "message": format!("Order {id} cancelled")}),
                    after,
                }
            }
            1 => {
                let id = pick(rng, &user_ids);
                if let Some(tags) = after["users"][&id]["tags"].as_array_mut() {
                    tags.push(json!("vip"));
                }
                Step {
                    name: "tag_user",
                    arguments: json!({"user_id": id, "tag": "vip"}),
                    result: json!({"success": true, "message": "Tag added"}),
                    after,
                }
            }
            2 => {
                let key = if options.dotted_keys {
                    "report.txt"
                } else {
                    "report_txt"
                };
                after["files"][key]["size"] = json!(512);
                Step {
                    name: "write_file",
                    arguments: json!({"name": key, "size": 512}),
                    result: json!({"success": true, "message": format!("{key} written")}),
                    after,
                }
            }
            _ => {
                let id = pick(rng, &order_ids);
                if let Some(orders) = after["orders"].as_object_mut() {
                    orders.shift_remove(&id);
                }
                Step {
                    name: "delete_order",
                    arguments: json!({"order_id": id}),
                    result: json!({"success": true, "message": format!("Order {id} deleted")}),
                    after,
                }
            }
        },
        Some((2, _)) => {
            let id = pick(rng, &user_ids);
            let current = before["users"][&id]["address"]["city"]
                .as_str()
                .unwrap_or_default();
            let others: Vec<&str> = CITIES.iter().copied().filter(|c| *c != current).collect();
            let city = others[rng.below(others.len())];
            let zip = before["users"][&id]["address"]["zip"]
                .as_str()
                .unwrap_or_default();
            after["users"][&id]["address"]["city"] = json!(city);
            after["users"][&id]["address"]["zip"] = json!(format!("Z{zip}"));
            Step {
                name: "move_user",
                arguments: json!({"user_id": id, "city": city}),
                result: json!({"success": true, "message": "Address updated"}),
                after,
            }
        }
        Some((k, _)) => {
            // k ≥ 3: a checkout creating an order (1) and touching k - 1 other fields.
            let user = pick(rng, &user_ids);
            let new_id = format!("N{:04}", rng.below(10_000));
            let skus: Vec<String> = before["inventory"]
                .as_object()
                .map(|m| m.keys().take(k - 2).cloned().collect())
                .unwrap_or_default();
            for sku in &skus {
                let stock = after["inventory"][sku]["stock"].as_u64().unwrap_or(0);
                after["inventory"][sku]["stock"] = json!(stock + 10);
            }
            let balance = after["users"][&user]["balance"].as_f64().unwrap_or(0.0);
            after["users"][&user]["balance"] = json!(balance + 1.5);
            after["orders"][&new_id] = json!({"user_id": user, "status": "new", "total": 1.5, "items": skus, "note": null});
            Step {
                name: "restock_and_order",
                arguments: json!({"user_id": user, "skus": skus}),
                result: json!({"success": true, "message": format!("Order {new_id} created"), "data": {"order_id": new_id, "restocked": k - 2}}),
                after,
            }
        }
    }
}

/// Generates reference-format benchmark records.
pub struct SyntheticBench;

impl SyntheticBench {
    /// The reference composition, scaled: `per_bucket` samples for each of failure,
    /// no-change/0 args, no-change/1 arg, |Δ| = 1 … 12.
    pub fn records(seed: u64, per_bucket: usize, options: &BenchOptions) -> Vec<Value> {
        let mut rng = Rng::new(seed);
        let mut targets: Vec<Target> = vec![None, Some((0, 0)), Some((0, 1))];
        targets.extend((1..=12).map(|k| Some((k, 1))));
        let mut out = Vec::new();
        for round in 0..per_bucket {
            for target in &targets {
                let before = shop_state(&mut rng, options);
                let step = make_step(&mut rng, &before, *target, options, round);
                let index = out.len();
                out.push(json!({
                    "task_info": {"env_id": format!("env_{}", round % 7), "task_id": format!("t{index}"), "task": "synthetic", "step": 1},
                    "step_detail": {
                        "step": 1,
                        "action": {"name": step.name, "arguments": step.arguments},
                        "observation": {"type": "tool", "content": to_python_repr(&step.result)},
                        "config_before": before,
                        "config_after": step.after,
                    },
                    "env_code": ENV_CODE,
                }));
            }
        }
        out
    }
}

/// Produces raw model-like output for a transition, right or wrong in realistic ways.
pub struct NoisySimulator {
    rng: Rng,
}

impl NoisySimulator {
    /// Seeds the simulator.
    pub fn new(seed: u64) -> Self {
        NoisySimulator {
            rng: Rng::new(seed),
        }
    }

    /// Raw text for a transition given as a reference record (`step_detail` form). The chance of
    /// an error grows with |Δ| (the "cliff"); errors are a missed change, a wrong value, a
    /// spurious write, a wrong feedback or an unparseable (truncated) output.
    pub fn output(&mut self, record: &Value) -> String {
        let step = &record["step_detail"];
        let (before, after) = (&step["config_before"], &step["config_after"]);
        let changes = envsim_core::diff::fine_diff(before, after);
        let style = [PathStyle::Dotted, PathStyle::Keys, PathStyle::Pointer][self.rng.below(3)];
        let mut list = changes_to_json(&changes, style);
        let mut feedback = step["observation"]["content"].clone();
        let n = changes.len();
        let error_rate = (0.05 + 0.12 * n as f64).min(0.9);
        if self.rng.chance(error_rate) {
            match self.rng.below(5) {
                0 if n > 0 => {
                    if let Some(items) = list.as_array_mut() {
                        items.pop();
                    }
                }
                1 if n > 0 => list[0]["value"] = json!("???"),
                2 => {
                    if let Some(items) = list.as_array_mut() {
                        items.push(json!({"type": "modify", "path": "next_order", "value": 99}));
                    }
                }
                3 => feedback = json!("{'success': True}"),
                _ => {
                    let text = json!({"feedback": feedback, "config_changes": list}).to_string();
                    return text[..text.len() / 2].to_owned();
                }
            }
        }
        let body = json!({"feedback": feedback, "config_changes": list});
        match self.rng.below(4) {
            0 => body.to_string(),
            1 => format!(
                "```json\n{}\n```",
                serde_json::to_string_pretty(&body).unwrap_or_default()
            ),
            2 => format!(
                "<think>The call updates the state.</think>\nHere is the result: {body} Done."
            ),
            _ => to_python_repr(&body),
        }
    }
}

/// Serialises records as a JSON array (the reference benchmark's file layout).
pub fn to_json_array(records: &[Value]) -> String {
    serde_json::to_string(&records).unwrap_or_default()
}

/// The demo data shipped in `data/demo/`: a 45-sample benchmark in the reference format and
/// the predictions of a [`NoisySimulator`] as envsim prediction JSONL. Regenerate with
/// `cargo run -p envsim-testkit --example make_demo -- data/demo`; a test keeps the committed
/// files equal to this output.
pub fn demo_files() -> (String, String) {
    let options = BenchOptions {
        users: 10,
        ..BenchOptions::default()
    };
    let records = SyntheticBench::records(2026, 3, &options);
    let mut simulator = NoisySimulator::new(17);
    let mut predictions = String::new();
    for (index, record) in records.iter().enumerate() {
        let output = simulator.output(record);
        let usage =
            json!({"prompt_tokens": 900 + 40 * (index % 9), "completion_tokens": output.len() / 4});
        predictions.push_str(
            &json!({"sample_id": index.to_string(), "output": output, "usage": usage}).to_string(),
        );
        predictions.push('\n');
    }
    let mut bench = to_json_array(&records);
    bench.push('\n');
    (bench, predictions)
}
