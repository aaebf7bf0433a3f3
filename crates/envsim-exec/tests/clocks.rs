//! Every initial state runs under its own clock: the manifest's `clocks`, else one derived from
//! the state; `env test` refuses steps that stamp a time before what the state already records.

use envsim_core::clock::{parse_time, ClockRule};
use envsim_exec::package::{ClockSource, EnvPackage};
use envsim_exec::{Executor, Limits};
use serde_json::{json, Value};
use std::time::Duration;

/// A ticket desk: `open_ticket` stamps the ticket with the clock; `backdate` stamps it 400 days
/// in the past (a defect the clock check must catch).
const CODE: &str = r#"
import datetime

class Desk:
    def __init__(self, init_config: dict):
        self.tickets = init_config.get("tickets", {})
        self.meta = init_config.get("meta", {})

    def open_ticket(self, ticket_id: str) -> dict:
        now = datetime.datetime.now().replace(microsecond=0).isoformat()
        self.tickets[ticket_id] = {"created_at": now, "status": "open"}
        return {"success": True, "created_at": now}

    def backdate(self, ticket_id: str) -> dict:
        then = datetime.datetime.now() - datetime.timedelta(days=400)
        self.tickets[ticket_id] = {"created_at": then.replace(microsecond=0).isoformat()}
        return {"success": True}
"#;

fn tool(name: &str) -> Value {
    json!({"type": "function", "function": {"name": name, "description": name,
           "parameters": {"type": "object", "properties": {"ticket_id": {"type": "string"}},
                          "required": ["ticket_id"]}}})
}

/// Writes the package with `manifest_extra` merged into its manifest; the states: one whose
/// latest event is 2024-05-20T08:40, one that says its business date, one with no times.
fn write(manifest_extra: Value, tests: Value) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("desk");
    std::fs::create_dir_all(root.join("states")).unwrap();
    std::fs::write(root.join("env.py"), CODE).unwrap();
    let states = [
        json!({"tickets": {"T1": {"created_at": "2024-05-20T08:40:00", "due_at": "2024-09-01T00:00:00"}}}),
        json!({"meta": {"business_date": "2025-03-15"}, "tickets": {"T1": {"created_at": "2025-03-15T16:29:00"}}}),
        json!({"tickets": {}}),
    ];
    for (i, state) in states.iter().enumerate() {
        std::fs::write(root.join(format!("states/0{i}.json")), state.to_string()).unwrap();
    }
    let mut manifest = json!({"name": "desk", "domain": "test", "description": "Tickets.",
                              "class_name": "Desk", "tools": [tool("open_ticket"), tool("backdate")]});
    for (k, v) in manifest_extra.as_object().unwrap() {
        manifest[k] = v.clone();
    }
    std::fs::write(root.join("manifest.json"), manifest.to_string()).unwrap();
    std::fs::write(root.join("tests.json"), tests.to_string()).unwrap();
    (dir, root)
}

async fn executor() -> Executor {
    let limits = Limits {
        wall: Duration::from_secs(5),
        ..Limits::default()
    };
    Executor::new(1, limits)
        .await
        .expect("python3 is available")
}

fn seconds(text: &str) -> f64 {
    parse_time(text).unwrap()
}

#[test]
fn each_state_gets_its_derived_clock_unless_the_manifest_sets_one() {
    let (_dir, root) = write(json!({}), json!({"cases": []}));
    let p = EnvPackage::load(&root).unwrap();
    // After the latest past event (the due date ahead does not count).
    let c0 = p.clock(0);
    assert_eq!(c0.seconds, seconds("2024-05-20T09:00:00Z"));
    assert!(matches!(&c0.source, ClockSource::Derived(d) if d.rule == ClockRule::AfterLatestEvent));
    // The stated business day, after that day's latest event.
    let c1 = p.clock(1);
    assert_eq!(c1.seconds, seconds("2025-03-15T17:00:00Z"));
    assert!(matches!(&c1.source, ClockSource::Derived(d) if d.rule == ClockRule::StatedNow));
    // Nothing to go by: the default.
    assert_eq!(p.clock(2).seconds, envsim_exec::DEFAULT_CLOCK);
    assert_eq!(p.clock(2).source, ClockSource::Default);
    assert_eq!(
        p.clock(1).describe(),
        "2025-03-15T17:00:00Z (the state's /meta/business_date 2025-03-15)"
    );

    // The manifest wins, by file name or stem.
    let (_dir, root) = write(
        json!({"clocks": {"00.json": "2024-06-01T12:00:00Z", "02": "2023-01-02T03:04:05+01:00"}}),
        json!({"cases": []}),
    );
    let p = EnvPackage::load(&root).unwrap();
    assert_eq!(p.clock(0).seconds, seconds("2024-06-01T12:00:00Z"));
    assert_eq!(p.clock(0).source, ClockSource::Manifest);
    assert_eq!(p.clock(2).seconds, seconds("2023-01-02T02:04:05Z"));
    assert!(matches!(p.clock(1).source, ClockSource::Derived(_)));
}

#[test]
fn a_bad_manifest_clock_is_an_error_at_the_manifest() {
    for (clocks, message) in [
        (
            json!({"07.json": "2024-06-01T12:00:00Z"}),
            "field `clocks.07.json` names no state (the states are [\"00.json\", \"01.json\", \"02.json\"])",
        ),
        (
            json!({"00.json": "June 1st"}),
            "field `clocks.00.json` is \"June 1st\", not a date-time like \"2025-06-10T09:00:00Z\"",
        ),
    ] {
        let (_dir, root) = write(json!({"clocks": clocks}), json!({"cases": []}));
        let error = EnvPackage::load(&root).unwrap_err().to_string();
        assert!(error.contains("manifest.json"), "{error}");
        assert!(error.contains(message), "{error}");
    }
}

#[tokio::test]
async fn scripted_steps_run_at_the_states_clock_and_stamps_before_the_past_fail() {
    let tests = json!({"cases": [
        {"name": "open two", "state": 0, "steps": [
            {"tool": "open_ticket", "args": {"ticket_id": "T2"},
             "expect": {"success": true, "state": {"/tickets/T2/created_at": "2024-05-20T09:00:00"}}},
            {"tool": "open_ticket", "args": {"ticket_id": "T3"},
             "expect": {"state": {"/tickets/T3/created_at": "2024-05-20T09:05:00"}}}
        ]},
        {"name": "backdated", "state": 1, "steps": [
            {"tool": "backdate", "args": {"ticket_id": "T9"}, "expect": {"success": true}}
        ]}
    ]});
    let (_dir, root) = write(json!({}), tests);
    let p = EnvPackage::load(&root).unwrap();
    let ex = executor().await;
    let failures = p.run_tests(&ex).await;
    // The first case passes: each step five minutes after the one before, from the state's
    // clock. The backdated ticket is 400 days before the state's latest event.
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(
        failures[0],
        "desk / case \"backdated\" / step 0 (backdate): /state/tickets/T9/created_at is stamped 2024-02-09T17:00:00Z, before the state's latest event 2025-03-15T16:29:00 at /tickets/T1/created_at (the call ran at 2025-03-15T17:00:00Z)"
    );
}

#[test]
fn states_that_record_events_after_their_own_clock_are_reported() {
    let (_dir, root) = write(
        json!({"clocks": {"00.json": "2024-01-01T00:00:00Z"}}),
        json!({"cases": []}),
    );
    let p = EnvPackage::load(&root).unwrap();
    assert_eq!(
        p.clock_warnings(),
        ["state 00.json records /tickets/T1/created_at 2024-05-20T08:40:00 after its clock 2024-01-01T00:00:00Z (set in the manifest)"]
    );
}
