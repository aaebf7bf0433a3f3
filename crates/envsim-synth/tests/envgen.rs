//! The environment-writing loop with a scripted writer (a test double answering from a
//! script): a good writer's package is accepted at once, a repairable one after its repair, a
//! hopeless one never; the gate's simulator is the faulty double reading the good package.

use envsim_exec::package::EnvPackage;
use envsim_exec::{Convention, Executor, Limits};
use envsim_sim::backend::{ExecutorSimulator, Simulator};
use envsim_sim::faulty::FaultySimulator;
use envsim_synth::envgen::check::CheckKind;
use envsim_synth::envgen::files::PackageFiles;
use envsim_synth::envgen::{synthesize, EnvRequest, EnvSource, ScriptedWriter, SynthPlan};
use envsim_synth::gate::environments;
use std::sync::Arc;

const CODE: &str = r#"
class Tally:
    def __init__(self, init_config: dict):
        self.counters = {}
        self.limit = 0

    def get_counter(self, counter_id: str) -> dict:
        if counter_id not in self.counters:
            return {"success": False, "error": f"no counter {counter_id}"}
        return {"success": True, "data": dict(self.counters[counter_id])}

    def add_to_counter(self, counter_id: str, amount: int) -> dict:
        if counter_id not in self.counters:
            return {"success": False, "error": f"no counter {counter_id}"}
        if not isinstance(amount, int) or amount <= 0:
            return {"success": False, "error": "amount must be a positive integer"}
        counter = self.counters[counter_id]
        if counter["value"] + amount > self.limit:
            return {"success": False, "error": f"over the limit of {self.limit}"}
        counter["value"] += amount
        return {"success": True, "message": f"{counter_id} is now {counter['value']}"}

    def reset_counter(self, counter_id: str) -> dict:
        if counter_id not in self.counters:
            return {"success": False, "error": f"no counter {counter_id}"}
        self.counters[counter_id]["value"] = 0
        return {"success": True, "message": f"{counter_id} reset"}
"#;

const MANIFEST: &str = r#"{
  "name": "tally",
  "domain": "test",
  "description": "Named counters that only grow, up to a shared limit, and can be reset.",
  "class_name": "Tally",
  "rules": ["Amounts must be positive.", "A counter may not exceed the limit.", "Unknown counters are refused."],
  "tools": [
    {"type": "function", "function": {"name": "get_counter", "description": "Read a counter.",
      "parameters": {"type": "object", "properties": {"counter_id": {"type": "string", "description": "Counter id, e.g. C1"}}, "required": ["counter_id"]}}},
    {"type": "function", "function": {"name": "add_to_counter", "description": "Add a positive amount to a counter, within the limit.",
      "parameters": {"type": "object", "properties": {"counter_id": {"type": "string", "description": "Counter id"}, "amount": {"type": "integer", "description": "How much to add, 1 to 5"}}, "required": ["counter_id", "amount"]}}},
    {"type": "function", "function": {"name": "reset_counter", "description": "Set a counter's value back to 0.",
      "parameters": {"type": "object", "properties": {"counter_id": {"type": "string", "description": "Counter id"}}, "required": ["counter_id"]}}}
  ]
}"#;

const TESTS: &str = r#"{"cases": [
  {"name": "read, add, refuse, reset", "state": 0, "steps": [
    {"tool": "get_counter", "args": {"counter_id": "C1"}, "expect": {"success": true}},
    {"tool": "get_counter", "args": {"counter_id": "C9"}, "expect": {"success": false}},
    {"tool": "add_to_counter", "args": {"counter_id": "C1", "amount": 2}, "expect": {"success": true, "state": {"/counters/C1/value": 3}}},
    {"tool": "add_to_counter", "args": {"counter_id": "C1", "amount": -1}, "expect": {"success": false}},
    {"tool": "reset_counter", "args": {"counter_id": "C1"}, "expect": {"success": true, "state": {"/counters/C1/value": 0}}},
    {"tool": "reset_counter", "args": {"counter_id": "C9"}, "expect": {"success": false}}
  ]}
]}"#;

const TASKS: &str = r#"{"id": "t1", "instruction": "How much is on counter C1?", "state": "00_small", "tools": ["get_counter"]}
{"id": "t2", "instruction": "Add two to C1.", "state": "00_small", "tools": ["add_to_counter"]}
{"id": "t3", "instruction": "Reset C2.", "state": "01_medium", "tools": ["reset_counter"]}
{"id": "t4", "instruction": "Add 3 to C3, then read it.", "state": "02_large", "tools": ["add_to_counter", "get_counter"]}
{"id": "t5", "instruction": "Reset C1 and add one.", "state": "01_medium", "tools": ["reset_counter", "add_to_counter"]}
"#;

/// A state of `n` counters.
fn state(n: usize) -> String {
    let counters: serde_json::Map<String, serde_json::Value> = (1..=n)
        .map(|i| {
            let id = format!("C{i}");
            (
                id.clone(),
                serde_json::json!({"counter_id": id, "label": format!("counter {i}"), "value": i}),
            )
        })
        .collect();
    serde_json::json!({"counters": counters, "limit": 100}).to_string()
}

/// The files of a package, `code` as its env.py, `tests` as its tests.json.
fn answer(code: &str, tests: Option<&str>) -> String {
    let mut files = PackageFiles::default();
    files.files.insert("env.py".into(), code.into());
    files.files.insert("manifest.json".into(), MANIFEST.into());
    for (name, counters) in [("00_small", 1), ("01_medium", 3), ("02_large", 8)] {
        files
            .files
            .insert(format!("states/{name}.json"), state(counters));
    }
    if let Some(tests) = tests {
        files.files.insert("tests.json".into(), tests.into());
    }
    files.files.insert("tasks.jsonl".into(), TASKS.into());
    format!("Here it is.\n{}", files.render())
}

fn request() -> EnvRequest {
    EnvRequest {
        name: "tally".into(),
        source: EnvSource::Description("Named counters with a limit.".into()),
        convention: Convention::Class,
    }
}

/// The gate's simulator: the good package read perfectly (its code, through the double).
fn reader(executor: Arc<Executor>) -> impl Fn(&EnvPackage) -> Arc<dyn Simulator> + Sync {
    let dir = tempfile::tempdir().unwrap();
    let files = PackageFiles::parse(&answer(CODE, Some(TESTS))).unwrap();
    files.write(&dir.path().join("tally")).unwrap();
    let good = EnvPackage::load(&dir.path().join("tally")).unwrap();
    let (with_code, _) = environments(&good).unwrap();
    move |_: &EnvPackage| {
        Arc::new(FaultySimulator::new(
            ExecutorSimulator::new(Arc::clone(&executor)).knowing(&with_code),
            0.0,
            3,
            "reader",
        )) as Arc<dyn Simulator>
    }
}

async fn run(writer: &ScriptedWriter) -> envsim_synth::envgen::SynthOutcome {
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));
    let scratch = tempfile::tempdir().unwrap();
    let simulator = reader(Arc::clone(&executor));
    synthesize(
        writer,
        executor,
        &simulator,
        &request(),
        &SynthPlan::default(),
        scratch.path(),
        &|_| {},
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_good_writer_is_accepted_in_one_round() {
    let writer = ScriptedWriter::new(vec![answer(CODE, Some(TESTS))]);
    let outcome = run(&writer).await;
    assert!(outcome.accepted, "{:#?}", outcome.rounds);
    assert_eq!(outcome.rounds.len(), 1);
    let gate = outcome.rounds[0].gate.as_ref().expect("the gate judged it");
    assert_eq!(gate.score, 1.0);
    assert!(outcome.writer_usage.prompt_tokens > 0);
    let files = outcome.files.expect("the accepted files");
    assert_eq!(files.files["env.py"], CODE.trim_start().to_owned());
    // The writer was shown the format's documentation.
    assert!(writer.prompts()[0].system.contains("## tests.json"));
}

#[tokio::test]
async fn a_repairable_writer_gets_the_findings_and_is_accepted_after_its_repair() {
    let writer = ScriptedWriter::new(vec![answer(CODE, None), answer(CODE, Some(TESTS))]);
    let outcome = run(&writer).await;
    assert!(outcome.accepted);
    assert_eq!(outcome.rounds.len(), 2);
    let first: Vec<CheckKind> = outcome.rounds[0].findings.iter().map(|f| f.check).collect();
    assert_eq!(first, vec![CheckKind::Tests]);
    let repair = &writer.prompts()[1].user;
    assert!(
        repair
            .contains("It failed these checks in the sandbox:\n- [tests] tests.json has no cases"),
        "{repair}"
    );
    assert!(
        repair.contains("=== FILE: env.py ==="),
        "the draft is shown again"
    );
}

#[tokio::test]
async fn code_that_does_what_the_description_does_not_say_is_sent_back_by_the_gate() {
    // Resetting leaves the counter as it was: the description says it goes back to 0.
    let lazy = CODE.replace("        self.counters[counter_id][\"value\"] = 0\n", "");
    assert_ne!(lazy, CODE);
    let lazy_tests = TESTS.replace(r#", "state": {"/counters/C1/value": 0}"#, "");
    assert_ne!(lazy_tests, TESTS);
    let writer = ScriptedWriter::new(vec![
        answer(&lazy, Some(&lazy_tests)),
        answer(CODE, Some(TESTS)),
    ]);
    let outcome = run(&writer).await;
    assert!(outcome.accepted);
    let first = &outcome.rounds[0];
    let gate = first
        .gate
        .as_ref()
        .expect("the first draft reached the gate");
    assert!(
        !gate.accepted
            || gate
                .tools
                .iter()
                .any(|t| t.tool == "reset_counter" && t.agreeing < t.calls)
    );
    assert!(
        first
            .findings
            .iter()
            .any(|f| f.check == CheckKind::Gate && f.message.starts_with("reset_counter:")),
        "{:#?}",
        first.findings
    );
}

#[tokio::test]
async fn a_hopeless_writer_is_refused_after_every_round() {
    let writer = ScriptedWriter::new(vec![
        "I cannot write code.".to_owned(),
        answer("class Tally(:\n", Some(TESTS)),
    ]);
    let outcome = run(&writer).await;
    assert!(!outcome.accepted);
    assert_eq!(outcome.rounds.len(), 3);
    assert_eq!(outcome.rounds[0].findings[0].check, CheckKind::Files);
    for round in &outcome.rounds[1..] {
        assert_eq!(
            round.findings[0].check,
            CheckKind::Loads,
            "{:?}",
            round.findings
        );
    }
}
