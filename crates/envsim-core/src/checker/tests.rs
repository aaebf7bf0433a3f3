use super::*;
use serde_json::json;

fn run(seed: u64, clock_shift: f64, state: &Value) -> Run<'_> {
    Run {
        seed,
        clock_shift,
        state,
    }
}

fn shop_initial() -> Value {
    json!({"orders": {"O1": {"status": "cart", "total": 30}}, "payments": {"PAY-OLD": {"order_id": "O0", "amount": 30, "reference": "TXN-0"}}})
}

/// The checkout of O1 as the environment runs it: a payment under a generated id naming the
/// order, a reference drawn from the seed, a stamp read from the clock.
fn checkout(payment: &str, reference: &str, placed_at: &str) -> Value {
    let mut state = shop_initial();
    state["orders"]["O1"]["status"] = json!("paid");
    state["orders"]["O1"]["payment_id"] = json!(payment);
    state["orders"]["O1"]["placed_at"] = json!(placed_at);
    state["payments"][payment] =
        json!({"id": payment, "order_id": "O1", "amount": 30, "reference": reference});
    state
}

fn shop_checker() -> StateChecker {
    let initial = shop_initial();
    let a = checkout("PAY-7F", "TXN-A1", "2025-01-01T00:05:00");
    let b = checkout("PAY-1C", "TXN-B2", "2025-01-01T00:05:00");
    let c = checkout("PAY-7F", "TXN-A1", "2025-01-01T00:40:00");
    StateChecker::from_runs(
        &initial,
        &[run(0, 0.0, &a), run(1, 0.0, &b), run(0, 2100.0, &c)],
    )
    .unwrap()
}

#[test]
fn one_run_checks_every_changed_location_by_value() {
    let initial = json!({"orders": {"O1": {"status": "new", "n": 1}, "O2": {"status": "new"}}});
    let done = json!({"orders": {"O1": {"status": "paid", "n": 1}, "O3": {"status": "new"}}});
    let checker = StateChecker::from_final(&initial, &done);
    assert_eq!(
        serde_json::to_value(&checker).unwrap(),
        json!({"type": "state_values",
               "expect": {"/orders/O1/status": "paid", "/orders/O3": {"status": "new"}},
               "absent": ["/orders/O2"]})
    );
    // Runs that agree make the same checker, saying how many they were.
    let same =
        StateChecker::from_runs(&initial, &[run(0, 0.0, &done), run(5, 300.0, &done)]).unwrap();
    assert_eq!(same.runs, 2);
    assert_eq!(StateChecker { runs: 1, ..same }, checker);
    assert!(checker.check(&initial, &done).failures.is_empty());
    let undone = checker.check(&initial, &initial);
    assert_eq!(undone.checks, 3);
    assert_eq!(
        undone.failures,
        [
            "/orders/O1/status: \"new\", expected \"paid\"",
            "/orders/O3: missing, expected {\"status\":\"new\"}",
            "/orders/O2: present, expected absent"
        ]
    );
}

#[test]
fn values_the_seed_or_clock_decide_are_checked_by_kind_and_relation() {
    let checker = shop_checker();
    assert_eq!(
        serde_json::to_value(&checker).unwrap(),
        json!({
            "type": "state_values",
            "expect": {"/orders/O1/status": "paid"},
            "absent": [],
            "vary": {
                "/orders/O1/payment_id": {"kind": "string", "equals": {"created_key": 0},
                    "why": "changes with the seed: \"PAY-7F\" under run 1, \"PAY-1C\" under run 2"},
                "/orders/O1/placed_at": {"kind": "string",
                    "why": "changes with the clock: \"2025-01-01T00:05:00\" under run 1, \"2025-01-01T00:40:00\" under run 3"}
            },
            "created": [{
                "in": "/payments",
                "why": "its key is generated (changes with the seed: \"PAY-7F\" under run 1, \"PAY-1C\" under run 2)",
                "expect": {"/order_id": "O1", "/amount": 30},
                "vary": {
                    "/id": {"kind": "string", "equals": {"created_key": 0},
                        "why": "changes with the seed: \"PAY-7F\" under run 1, \"PAY-1C\" under run 2"},
                    "/reference": {"kind": "string",
                        "why": "changes with the seed: \"TXN-A1\" under run 1, \"TXN-B2\" under run 2"}
                }
            }],
            "runs": 3
        })
    );
    // Another seed and clock, as an agent's episode gives them: every check holds.
    let other = checkout("PAY-99", "TXN-Z9", "2025-01-01T02:00:00");
    let verdict = checker.check(&shop_initial(), &other);
    assert_eq!(verdict.checks, 4);
    assert!(verdict.failures.is_empty(), "{:?}", verdict.failures);
}

#[test]
fn a_wrong_created_record_or_relation_fails_with_its_reason() {
    let checker = shop_checker();
    let initial = shop_initial();
    // The payment for the wrong amount.
    let mut wrong = checkout("PAY-99", "TXN-Z9", "x");
    wrong["payments"]["PAY-99"]["amount"] = json!(25);
    assert_eq!(
        checker.check(&initial, &wrong).failures,
        [
            "/payments: no record added here with /order_id = \"O1\", /amount = 30, /id: a string, /reference: a string",
            "/orders/O1/payment_id: \"PAY-99\", expected the key of the record added as created[0] (none was added)"
        ]
    );
    // The order names another payment than the one added.
    let mut elsewhere = checkout("PAY-99", "TXN-Z9", "x");
    elsewhere["orders"]["O1"]["payment_id"] = json!("PAY-OLD");
    assert_eq!(
        checker.check(&initial, &elsewhere).failures,
        ["/orders/O1/payment_id: \"PAY-OLD\", expected the key of the record added as created[0] (\"PAY-99\")"]
    );
    // A record that was there before the episode does not count as added, even when it fits.
    let mut before = initial.clone();
    before["payments"]["PAY-99"] =
        json!({"id": "PAY-99", "order_id": "O1", "amount": 30, "reference": "TXN-Z9"});
    let verdict = checker.check(&before, &checkout("PAY-99", "TXN-Z9", "x"));
    assert_eq!(verdict.failures.len(), 2, "{:?}", verdict.failures);
    // A stamp of the wrong kind.
    let mut stamp = checkout("PAY-99", "TXN-Z9", "x");
    stamp["orders"]["O1"]["placed_at"] = json!(17);
    assert_eq!(
        checker.check(&initial, &stamp).failures,
        ["/orders/O1/placed_at: 17, expected a string"]
    );
    // Nothing done.
    assert_eq!(checker.check(&initial, &initial).failures.len(), 4);
}

#[test]
fn two_created_records_are_told_apart_by_their_fields_and_relations() {
    // A shipment and its label, both under generated ids, the label naming the shipment.
    let initial = json!({"shipments": {}, "labels": {}});
    let state = |s: &str, l: &str| {
        json!({"shipments": {s: {"to": "Oslo"}},
               "labels": {l: {"shipment": s, "format": "pdf"}, format!("{l}b"): {"shipment": s, "format": "zpl"}}})
    };
    let (a, b) = (state("S-1", "L-1"), state("S-2", "L-2"));
    let checker = StateChecker::from_runs(&initial, &[run(1, 0.0, &a), run(2, 0.0, &b)]).unwrap();
    assert_eq!(checker.created.len(), 3);
    let formats: Vec<&Value> = checker.created[1..]
        .iter()
        .map(|c| &c.expect["/format"])
        .collect();
    assert_eq!(formats, [&json!("pdf"), &json!("zpl")]);
    assert!(checker.created[1..]
        .iter()
        .all(|c| c.vary["/shipment"].equals == Some(Relation::CreatedKey(0))));
    assert!(checker
        .check(&initial, &state("S-X", "L-X"))
        .failures
        .is_empty());
    // Labels naming a shipment that was not added.
    let mut stray = state("S-X", "L-X");
    stray["labels"]["L-X"]["shipment"] = json!("S-OTHER");
    assert_eq!(checker.check(&initial, &stray).failures.len(), 1);
    // One label for both formats is not two labels.
    let mut one = state("S-X", "L-X");
    one["labels"].as_object_mut().unwrap().remove("L-Xb");
    assert_eq!(checker.check(&initial, &one).failures.len(), 1);
}

#[test]
fn what_no_check_can_hold_is_dropped_with_its_reason() {
    let initial = json!({"log": ["start"], "notes": {"N1": "a"}, "tags": {}});
    let a = json!({"log": ["start", "x"], "notes": {"N1": "a"}, "tags": {"t1": 1}, "flag": 1});
    let b =
        json!({"log": ["start", "x", "y"], "notes": {}, "tags": {"t1": 1, "t2": 2}, "flag": "1"});
    let checker = StateChecker::from_runs(&initial, &[run(1, 0.0, &a), run(2, 0.0, &b)]).unwrap();
    assert_eq!(
        checker.dropped,
        [
            Dropped {
                at: "/log".into(),
                why: "its length changes (changes with the seed: 2 under run 1, 3 under run 2): items from index 2 on are not checked".into()
            },
            Dropped {
                at: "/notes/N1".into(),
                why: "removed under some runs only (changes with the seed: true under run 1, false under run 2)".into()
            },
            Dropped {
                at: "/tags".into(),
                why: "records added under keys that differ from run to run, as many as the run decides (changes with the seed: 0 under run 1, 1 under run 2)".into()
            },
            Dropped {
                at: "/flag".into(),
                why: "its kind changes (changes with the seed: 1 under run 1, \"1\" under run 2)".into()
            },
        ]
    );
    // What the runs agree on is still checked: the log's second entry, the tag t1.
    assert_eq!(
        checker.expect,
        json!({"/log/1": "x", "/tags/t1": 1})
            .as_object()
            .unwrap()
            .clone()
    );
    assert!(matches!(
        StateChecker::from_runs(&initial, &[]),
        Err(CheckerError::NoRuns)
    ));
}

#[test]
fn checkers_read_back_and_bad_ones_are_refused_with_the_field() {
    let checker = shop_checker();
    let text = serde_json::to_value(&checker).unwrap();
    assert_eq!(StateChecker::parse(&text).unwrap(), checker);
    // The older form reads as it did.
    let old = json!({"type": "state_values", "expect": {"/a": 1}, "absent": ["/b"]});
    assert_eq!(StateChecker::parse(&old).unwrap().checks(), 2);
    let refused = |value: Value| StateChecker::parse(&value).unwrap_err().to_string();
    assert!(refused(json!({"type": "state_value", "expect": {}})).contains("state_value"));
    assert!(refused(json!({"type": "state_values"})).contains("missing field `expect`"));
    assert!(
        refused(json!({"type": "state_values", "expect": {}, "expects": {}}))
            .contains("unknown field `expects`")
    );
    assert_eq!(
        refused(json!({"type": "state_values", "expect": {"a/b": 1}})),
        "`expect`: \"a/b\" is not a JSON Pointer (\"\" or starting with '/')"
    );
    assert_eq!(
        refused(json!({"type": "state_values", "expect": {},
                       "vary": {"/x": {"kind": "string", "equals": {"created_key": 2}}}})),
        "`vary`: created_key 2 names no record (the checker has 0)"
    );
    assert!(refused(json!({"type": "state_values", "expect": {},
                           "vary": {"/x": {"kind": "text"}}}))
    .contains("unknown variant `text`"));
}

#[test]
fn a_single_run_checker_always_passes_its_own_final_state() {
    // Over the benchmark generator's states: the checker of (s, s') accepts s' from s, and
    // the checker of several equal runs is the one-run checker.
    let mut rng = crate::rng::Rng::new(7);
    for _ in 0..50 {
        let a = random_state(&mut rng, 3);
        let b = random_state(&mut rng, 3);
        let checker = StateChecker::from_final(&a, &b);
        assert!(checker.check(&a, &b).failures.is_empty(), "{a} -> {b}");
        let runs = StateChecker::from_runs(&a, &[run(1, 0.0, &b), run(2, 60.0, &b)]).unwrap();
        assert_eq!(StateChecker { runs: 1, ..runs }, checker);
    }
}

fn random_state(rng: &mut crate::rng::Rng, depth: usize) -> Value {
    let pick = rng.below(if depth == 0 { 3 } else { 5 });
    match pick {
        0 => json!(rng.below(3)),
        1 => json!(["a", "b", "c"][rng.below(3)]),
        2 => Value::Null,
        3 => Value::Array(
            (0..rng.below(3))
                .map(|_| random_state(rng, depth - 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.below(4))
                .map(|k| (format!("k{k}"), random_state(rng, depth - 1)))
                .collect(),
        ),
    }
}
