//! `envsim audit FILE` end to end on a small package written by the test.

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

const DESK: &str = r#"
class Desk:
    def __init__(self, init_config: dict):
        self.tickets = {}
        self.next_id = 1

    def create_ticket(self, title: str) -> dict:
        tid = "T%d" % self.next_id
        self.next_id += 1
        self.tickets[tid] = {"title": title, "status": "open", "owner": "desk"}
        return {"success": True, "ticket_id": tid}

    def close_ticket(self, ticket_id: str) -> dict:
        t = self.tickets.get(ticket_id)
        if t is None:
            return {"success": False, "error": "no ticket " + ticket_id}
        if t["status"] == "closed":
            return {"success": False, "error": "already closed"}
        t["status"] = "closed"
        return {"success": True}

    def get_ticket(self, ticket_id: str) -> dict:
        t = self.tickets.get(ticket_id)
        if t is None:
            return {"success": False, "error": "no ticket " + ticket_id}
        return {"success": True, "data": dict(t)}
"#;

fn write_desk(root: &Path) {
    let pkg = root.join("desk");
    std::fs::create_dir_all(pkg.join("states")).unwrap();
    std::fs::write(pkg.join("env.py"), DESK).unwrap();
    let tool = |name: &str, props: Value, required: Value| {
        json!({"type": "function", "function": {"name": name, "description": name,
               "parameters": {"type": "object", "properties": props, "required": required}}})
    };
    let id = json!({"ticket_id": {"type": "string"}});
    let manifest = json!({"name": "desk", "domain": "test", "description": "Tickets.",
    "class_name": "Desk", "tools": [
        tool("create_ticket", json!({"title": {"type": "string"}}), json!(["title"])),
        tool("close_ticket", id.clone(), json!(["ticket_id"])),
        tool("get_ticket", id, json!(["ticket_id"])),
    ]});
    std::fs::write(pkg.join("manifest.json"), manifest.to_string()).unwrap();
    let state = json!({"tickets": {
        "T1": {"title": "a", "status": "open", "owner": "desk"},
        "T2": {"title": "b", "status": "open", "owner": "desk"},
        "T3": {"title": "c", "status": "closed", "owner": "desk"}}, "next_id": 4});
    std::fs::write(pkg.join("states/00.json"), state.to_string()).unwrap();
}

/// A run on the desk: create T4, close it, read it. `fault` changes it.
fn run(fault: Option<&str>) -> Value {
    let s0 = json!({"tickets": {
        "T1": {"title": "a", "status": "open", "owner": "desk"},
        "T2": {"title": "b", "status": "open", "owner": "desk"},
        "T3": {"title": "c", "status": "closed", "owner": "desk"}}, "next_id": 4});
    let mut s1 = s0.clone();
    s1["tickets"]["T4"] = json!({"title": "d", "status": "open", "owner": "desk"});
    s1["next_id"] = json!(5);
    let mut s2 = s1.clone();
    s2["tickets"]["T4"]["status"] = json!("closed");
    let step = |name: &str, args: Value, obs: &str, after: &Value| json!({"action": {"name": name, "arguments": args}, "observation": obs, "state_after": after});
    let mut steps = vec![
        step(
            "create_ticket",
            json!({"title": "d"}),
            "{'success': True, 'ticket_id': 'T4'}",
            &s1,
        ),
        step(
            "close_ticket",
            json!({"ticket_id": "T4"}),
            "{'success': True}",
            &s2,
        ),
        step(
            "get_ticket",
            json!({"ticket_id": "T4"}),
            "{'success': True, 'data': {'title': 'd', 'status': 'closed', 'owner': 'desk'}}",
            &s2,
        ),
    ];
    match fault {
        // The close is lost: success, and the state stays as it was.
        Some("dropped") => {
            steps[1]["state_after"] = s1.clone();
            steps[2]["state_after"] = s1.clone();
            steps[2]["observation"] = json!(
                "{'success': True, 'data': {'title': 'd', 'status': 'open', 'owner': 'desk'}}"
            );
        }
        // A ticket nobody created appears at the read.
        Some("phantom") => {
            let mut s3 = s2.clone();
            s3["tickets"]["T9"] = json!({"title": "z", "status": "open", "owner": "desk"});
            steps[2]["state_after"] = s3;
        }
        _ => {}
    }
    json!({"env": "desk", "task_id": fault.unwrap_or("clean"), "initial_state": s0, "steps": steps})
}

/// Writes `records` as a trajectory file in `dir` and audits it with `--json --out`: the
/// summary and the violations.
fn audit_records(dir: &Path, records: &[Value], extra: &[&str]) -> (Value, Vec<Value>) {
    let file = dir.join("runs.jsonl");
    let text: String = records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let out_file = dir.join("violations.jsonl");
    let mut args = vec![
        file.to_str().unwrap(),
        "--json",
        "--out",
        out_file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = envsim(dir, &args);
    succeeded(&out);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The printed summary is the typed one: it reads back and writes out the same.
    let typed: envsim_core::audit::AuditSummary =
        serde_json::from_slice(&out.stdout).expect("the summary reads as an AuditSummary");
    assert_eq!(serde_json::to_value(&typed).unwrap(), summary);
    (summary, read_jsonl(&out_file))
}

/// Fails the test with the command's error output unless it succeeded.
fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The records of a JSON Lines file.
fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn envsim(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_envsim"))
        .arg("audit")
        .args(args)
        .arg("--envs")
        .arg(root)
        .output()
        .expect("runs")
}

#[test]
fn the_audit_finds_planted_faults_and_passes_clean_runs() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    let file = dir.path().join("runs.jsonl");
    let lines: Vec<String> = [None, Some("dropped"), Some("phantom")]
        .iter()
        .map(|f| run(*f).to_string())
        .collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let out_file = dir.path().join("violations.jsonl");
    let out = envsim(
        dir.path(),
        &[
            file.to_str().unwrap(),
            "--json",
            "--out",
            out_file.to_str().unwrap(),
        ],
    );
    succeeded(&out);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["trajectories"], 3);
    assert_eq!(summary["steps"], 9);
    assert_eq!(summary["violations"], 2, "{summary}");
    assert_eq!(summary["by_kind"]["success_without_change"], 1);
    assert_eq!(summary["by_kind"]["appeared_without_create"], 1);
    assert_eq!(summary["scs"]["consistent_trajectories"], 1);
    assert_eq!(
        summary["environments"],
        json!([{"env": "desk", "effects": "learned"}])
    );
    // Every call fits its tool's schema.
    assert_eq!(summary["spec"]["violating_steps"], 0);
    assert_eq!(summary["spec"]["spec_cs_mean"], 1.0);
    assert_eq!(summary["spec"]["drift"]["slope"], 0.0);
    let violations: Vec<Value> = read_jsonl(&out_file);
    assert_eq!(violations.len(), 2);
    assert_eq!(violations[0]["trajectory"], "line 2 dropped");
    assert_eq!(
        (violations[0]["step"].clone(), violations[0]["kind"].clone()),
        (json!(1), json!("success_without_change"))
    );
    assert_eq!(violations[1]["resource"], "tickets/T9");
    assert_eq!(violations[1]["step"], 2);

    // For pipelines: a mean SCS under the bar fails the command.
    let out = envsim(
        dir.path(),
        &[file.to_str().unwrap(), "--fail-under", "0.99"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is below --fail-under 0.99"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A record without states is audited from its calls alone.
    let mut record = run(None);
    record.as_object_mut().unwrap().remove("initial_state");
    let (summary, violations) = audit_records(dir.path(), &[record], &[]);
    assert_eq!(summary["inputs"], json!({"calls": 1}));
    assert_eq!(violations, Vec::<Value>::new());
}

/// (fault kind, planted, found) of a validation.
fn faults_of(v: &Value) -> Vec<(String, u64, u64)> {
    v["faults"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, f)| {
            (
                k.clone(),
                f["planted"].as_u64().unwrap(),
                f["found"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The calls-form counts of the pinned validation. Without states every record is held to
/// the package's initial states: each phantom is an id none of them holds, and eight of the
/// eleven flips answer success for such an id (a call refused for a corrupted id) or where a
/// guard the exploration learned applies.
const CALLS_CLEAN: u64 = 29;
const CALLS_FAULTS: [(&str, u64, u64); 10] = [
    ("happy_path_flip", 11, 8),
    ("list_omission", 0, 0),
    ("phantom_copy", 0, 0),
    ("phantom_entity", 8, 8),
    ("resurrected_delete", 0, 0),
    ("reverted_status", 3, 2),
    ("schema_drift", 10, 10),
    ("stale_read", 2, 2),
    ("vanished_create", 4, 4),
    ("wrong_error", 10, 0),
];

/// A validation form's trajectories, clean trajectories and clean trajectories flagged.
fn totals(v: &Value) -> (Value, Value, Value) {
    (
        v["trajectories"].clone(),
        v["clean"].clone(),
        v["clean_flagged"].clone(),
    )
}

/// `audit validate` of the desk under `root` (40 walks of 8 calls, effects from 10), with
/// `more` arguments, as JSON.
fn validate_desk(root: &Path, more: &[&str]) -> Value {
    let mut args = vec![
        "validate",
        "--walks",
        "40",
        "--learn-walks",
        "10",
        "--steps",
        "8",
        "--json",
    ];
    args.extend_from_slice(more);
    let out = envsim(root, &args);
    succeeded(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn validation_on_executed_walks_gives_the_pinned_counts() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    let faults_file = dir.path().join("faults.jsonl");
    let forms = validate_desk(dir.path(), &["--faults", faults_file.to_str().unwrap()]);
    // `--faults` lists every planted fault of every form, found as the counts say, then every
    // flagged clean trajectory (no kind).
    let lines: Vec<Value> = std::fs::read_to_string(&faults_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (planted, alarms): (Vec<Value>, Vec<Value>) =
        lines.into_iter().partition(|l| l.get("kind").is_some());
    for form in forms.as_array().unwrap() {
        let flagged: Vec<&Value> = alarms
            .iter()
            .filter(|a| a["form"] == form["form"])
            .collect();
        assert_eq!(
            flagged.len() as u64,
            form["clean_flagged"].as_u64().unwrap()
        );
        for a in flagged {
            assert!(!a["flags"].as_array().unwrap().is_empty(), "{a}");
        }
        let mine: Vec<&Value> = planted
            .iter()
            .filter(|f| f["form"] == form["form"])
            .collect();
        let (p, f) = form["faults"]
            .as_object()
            .unwrap()
            .values()
            .fold((0, 0), |(p, f), c| {
                (
                    p + c["planted"].as_u64().unwrap(),
                    f + c["found"].as_u64().unwrap(),
                )
            });
        assert_eq!(mine.len() as u64, p, "{}", form["form"]);
        assert_eq!(mine.iter().filter(|x| x["found"] == true).count() as u64, f);
        for x in &mine {
            assert!(
                x["trajectory"].is_string() && x["step"].is_u64() && x["tool"].is_string(),
                "{x}"
            );
            assert_eq!(x["env"], "desk");
        }
    }
    let v = &forms[0];
    assert_eq!(v["form"], "states");
    // Seeded exploration and seeded faults: the same numbers on every machine. The budget
    // of 40 walks of 8 calls is spent as 77 sequences (the whole paths of the kept sequences
    // the explorer extended).
    assert_eq!(
        (
            v["trajectories"].clone(),
            v["clean"].clone(),
            v["clean_flagged"].clone(),
            v["steps"].clone()
        ),
        (json!(77), json!(46), json!(0), json!(535))
    );
    let planted_found = faults_of(v);
    assert_eq!(
        planted_found,
        [
            ("dropped_update".to_owned(), 6, 6),
            ("happy_path_flip".to_owned(), 5, 4),
            ("phantom_entity".to_owned(), 5, 5),
            ("resurrected_delete".to_owned(), 0, 0),
            ("schema_drift".to_owned(), 5, 5),
            ("stale_read".to_owned(), 1, 1),
            ("vanished_create".to_owned(), 5, 5),
            ("wrong_error".to_owned(), 4, 0),
        ]
    );
    // No check fires on a clean trajectory or before a fault.
    for (kind, c) in v["checks"].as_object().unwrap() {
        assert_eq!(c["false_positives"], 0, "{kind}");
    }
    assert_eq!(v["checks"]["success_without_change"]["true_positives"], 10);
    assert_eq!(v["checks"]["response_shape"]["true_positives"], 10);
    // The same walks with their states dropped, faults planted in the observations.
    let v = &forms[1];
    assert_eq!(v["form"], "calls");
    let planted_found = faults_of(v);
    assert_eq!(totals(v), (json!(77), json!(CALLS_CLEAN), json!(0)));
    assert_eq!(
        planted_found,
        CALLS_FAULTS.map(|(k, p, f)| (k.to_owned(), p, f))
    );
    // The same calls and faults with the initial state known: every phantom is an id it never
    // held, and the same flips and reverted statuses are seen as without it (the desk's
    // records all have ids the initial states hold whole).
    let v = &forms[2];
    assert_eq!(v["form"], "calls_initial");
    assert_eq!(totals(v), (json!(77), json!(CALLS_CLEAN), json!(0)));
    assert_eq!(
        faults_of(v),
        [
            ("happy_path_flip".to_owned(), 11, 8),
            ("list_omission".to_owned(), 0, 0),
            ("phantom_copy".to_owned(), 0, 0),
            ("phantom_entity".to_owned(), 8, 8),
            ("resurrected_delete".to_owned(), 0, 0),
            ("reverted_status".to_owned(), 3, 2),
            ("schema_drift".to_owned(), 10, 10),
            ("stale_read".to_owned(), 2, 2),
            ("vanished_create".to_owned(), 4, 4),
            ("wrong_error".to_owned(), 10, 0),
        ]
    );
    // The same calls with only the OpenAPI description generated from the package.
    let v = &forms[3];
    assert_eq!(v["form"], "openapi");
    assert_eq!(totals(v), (json!(77), json!(CALLS_CLEAN), json!(0)));
    assert_eq!(
        faults_of(v),
        [
            ("happy_path_flip".to_owned(), 11, 1),
            ("list_omission".to_owned(), 0, 0),
            ("phantom_copy".to_owned(), 0, 0),
            ("phantom_entity".to_owned(), 8, 0),
            ("resurrected_delete".to_owned(), 0, 0),
            ("reverted_status".to_owned(), 3, 0),
            ("schema_drift".to_owned(), 10, 10),
            ("stale_read".to_owned(), 2, 0),
            ("vanished_create".to_owned(), 4, 4),
            ("wrong_error".to_owned(), 10, 0),
        ]
    );
    // The renamed and retyped fields break the learned response schema or depart from the
    // description's vocabulary (21 violations at faulty steps), and nothing else does. The desk
    // accepts titles that are not strings, which its description refuses: such calls are
    // counted apart, not flagged (these walks send none; seed 45's below do).
    let c = &v["checks"]["response_schema"];
    assert_eq!(
        (
            c["true_positives"].clone(),
            c["false_positives"].clone(),
            c["clean_flagged"].clone()
        ),
        (json!(21), json!(0), json!(0))
    );
    assert!(v["checks"].get("argument_schema").is_none());
    assert_eq!(v["accepted_invalid_calls"], 0);
    // Walks that do send such titles (seed 45's): accepted by the desk, counted apart, never
    // a flag.
    let forms = validate_desk(dir.path(), &["--seed", "45"]);
    let v = &forms[3];
    assert_eq!(v["form"], "openapi");
    assert_eq!(v["accepted_invalid_calls"], 21);
    assert!(v["checks"].get("argument_schema").is_none());
}

#[test]
fn injected_faults_are_labelled_and_the_audit_finds_them_there() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    let clean = dir.path().join("clean.jsonl");
    let lines: Vec<String> = (0..6).map(|_| run(None).to_string()).collect();
    std::fs::write(&clean, lines.join("\n") + "\n").unwrap();
    let faulty = dir.path().join("faulty.jsonl");
    let labels = dir.path().join("labels.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args([
            "audit",
            "inject",
            clean.to_str().unwrap(),
            "--rate",
            "1",
            "--out",
        ])
        .arg(&faulty)
        .arg("--labels")
        .arg(&labels)
        .output()
        .unwrap();
    succeeded(&out);
    let labels: Vec<Value> = read_jsonl(&labels);
    // Kinds in turn, one per trajectory; the run deletes nothing and never fails, so no
    // delete can be resurrected and no failure flipped (those two stay clean).
    let kinds: Vec<&str> = labels.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "dropped_update",
            "vanished_create",
            "phantom_entity",
            "stale_read"
        ]
    );
    let violations = dir.path().join("violations.jsonl");
    let out = envsim(
        dir.path(),
        &[
            faulty.to_str().unwrap(),
            "--json",
            "--out",
            violations.to_str().unwrap(),
        ],
    );
    succeeded(&out);
    let found: Vec<Value> = read_jsonl(&violations);
    for label in &labels {
        assert!(
            found
                .iter()
                .any(|v| v["trajectory"] == label["trajectory"] && v["step"] == label["step"]),
            "{label} not found in {found:?}"
        );
    }
}

#[test]
fn effects_declared_in_the_manifest_stand_in_for_walks() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    let manifest_path = dir.path().join("desk/manifest.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest["effects"] = json!({
        "create_ticket": [{"resource": "tickets", "operation": "create"}],
        "close_ticket": [{"resource": "tickets", "operation": "update", "id_parameter": "ticket_id"}],
        "get_ticket": [{"resource": "tickets", "operation": "read", "id_parameter": "ticket_id"}]
    });
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    // No walks: what the tools do comes from the manifest alone.
    let (_, violations) = audit_records(
        dir.path(),
        &[run(None), run(Some("phantom"))],
        &["--learn-walks", "0"],
    );
    assert_eq!(violations.len(), 1, "{violations:?}");
    let v = &violations[0];
    assert_eq!(
        (v["kind"].clone(), v["step"].clone(), v["guessed"].clone()),
        (json!("appeared_without_create"), json!(2), json!(false))
    );
    // A declaration for a tool the manifest does not have is an error at the manifest.
    manifest["effects"]["reopen"] = json!([{"resource": "tickets", "operation": "update"}]);
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let file = dir.path().join("runs.jsonl");
    let out = envsim(dir.path(), &[file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("field `effects.reopen` names no tool of the manifest"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn calls_that_break_their_schema_are_counted_by_step() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    // The read passes a number for the id; a fourth step calls a tool the desk lacks.
    let mut record = run(None);
    record["steps"][2]["action"]["arguments"]["ticket_id"] = json!(4);
    let mut extra = record["steps"][2].clone();
    extra["action"] = json!({"name": "reopen", "arguments": {}});
    record["steps"].as_array_mut().unwrap().push(extra);
    let (summary, violations) = audit_records(dir.path(), &[record, run(None)], &[]);
    let spec = &summary["spec"];
    assert_eq!(
        (spec["steps"].clone(), spec["violating_steps"].clone()),
        (json!(7), json!(2))
    );
    // Trajectory 1: 2 of 4 steps break it; trajectory 2: none. Mean (0.5 + 1) / 2.
    assert_eq!(spec["spec_cs_mean"], 0.75);
    assert_eq!(
        spec["drift"]["by_index"],
        json!([[2, 0], [2, 0], [2, 1], [1, 1]])
    );
    assert!(spec["drift"]["slope"].as_f64().unwrap() > 0.0);
    let kinds: Vec<Value> = violations
        .into_iter()
        .filter(|v| v["kind"] == "argument_schema" || v["kind"] == "unknown_tool")
        .map(|v| json!([v["step"], v["kind"]]))
        .collect();
    assert_eq!(
        kinds,
        [json!([2, "argument_schema"]), json!([3, "unknown_tool"])]
    );
}

/// An OpenAPI description of a ticket API, in YAML.
const TICKETS_YAML: &str = r##"
openapi: 3.0.3
info: {title: Tickets, version: "1"}
paths:
  /tickets:
    post:
      operationId: create_ticket
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [title]
              properties:
                title: {type: string}
      responses:
        "201":
          description: created
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Ticket"}
  /tickets/{ticket_id}:
    get:
      operationId: get_ticket
      parameters:
        - {name: ticket_id, in: path, required: true, schema: {type: string}}
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Ticket"}
        "404": {description: missing}
    delete:
      operationId: delete_ticket
      parameters:
        - {name: ticket_id, in: path, required: true, schema: {type: string}}
      responses:
        "204": {description: gone}
components:
  schemas:
    Ticket:
      type: object
      required: [ticket_id, title, status]
      properties:
        ticket_id: {type: string}
        title: {type: string}
        status: {type: string, enum: [open, closed]}
"##;

#[test]
fn transcripts_without_states_are_audited_from_their_calls() {
    let dir = tempfile::tempdir().unwrap();
    let call = |id: &str, name: &str, args: Value| {
        json!({"role": "assistant", "tool_calls": [{"id": id, "type": "function",
               "function": {"name": name, "arguments": args.to_string()}}]})
    };
    let answer = |id: &str, content: Value| json!({"role": "tool", "tool_call_id": id, "content": content.to_string()});
    // OpenAI chat: create T1, delete it, read it back (a read after delete whose status is
    // also outside the declared enum).
    let chat = json!({"id": "chat-1", "messages": [
        {"role": "user", "content": "file a ticket, then drop it"},
        call("a", "create_ticket", json!({"title": "Printer"})),
        answer("a", json!({"ticket_id": "T1", "title": "Printer", "status": "open"})),
        call("b", "delete_ticket", json!({"ticket_id": "T1"})),
        answer("b", json!({"deleted": true})),
        call("c", "get_ticket", json!({"ticket_id": "T1"})),
        answer("c", json!({"ticket_id": "T1", "title": "Printer", "status": "opened"})),
    ]});
    // Hermes: T9 is not found, then found with nothing created between.
    let hermes = json!({"id": "hermes-1", "conversations": [
        {"from": "human", "value": "show T9"},
        {"from": "gpt", "value": "<tool_call>\n{\"name\": \"get_ticket\", \"arguments\": {\"ticket_id\": \"T9\"}}\n</tool_call>"},
        {"from": "tool", "value": "<tool_response>\n{\"error\": \"Ticket T9 not found\"}\n</tool_response>"},
        {"from": "gpt", "value": "<tool_call>\n{\"name\": \"get_ticket\", \"arguments\": {\"ticket_id\": \"T9\"}}\n</tool_call>"},
        {"from": "tool", "value": "<tool_response>\n{\"ticket_id\": \"T9\", \"title\": \"x\", \"status\": \"open\"}\n</tool_response>"},
    ]});
    let spec = dir.path().join("tickets.yaml");
    std::fs::write(&spec, TICKETS_YAML).unwrap();
    let (summary, violations) = audit_records(
        dir.path(),
        &[chat, hermes],
        &["--spec", spec.to_str().unwrap()],
    );
    let kinds: Vec<(String, u64, String)> = violations
        .iter()
        .map(|v| {
            (
                v["trajectory"].as_str().unwrap().to_owned(),
                v["step"].as_u64().unwrap(),
                v["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let owned = |t: &str, s: u64, k: &str| (t.to_owned(), s, k.to_owned());
    assert_eq!(
        kinds,
        [
            owned("line 1 chat-1", 2, "read_after_delete"),
            owned("line 1 chat-1", 2, "response_schema"),
            owned("line 2 hermes-1", 1, "contradictory_repeat"),
            owned("line 2 hermes-1", 1, "phantom_id"),
        ]
    );
    // The effects came from the OpenAPI paths, not from guesses.
    assert!(violations
        .iter()
        .all(|v| v.get("guessed") != Some(&json!(true))));
    assert_eq!(summary["inputs"], json!({"openai_chat": 1, "sharegpt": 1}));
    assert_eq!(
        (
            summary["spec"]["steps"].clone(),
            summary["spec"]["violating_steps"].clone()
        ),
        (json!(5), json!(1))
    );
    // A transcript that cannot be read is an error located at its line and field.
    let bad = json!({"messages": [{"role": "assistant", "tool_calls": [{"id": "x", "type": "function",
        "function": {"name": "get_ticket", "arguments": "[1]"}}]}]});
    std::fs::write(dir.path().join("bad.jsonl"), format!("{bad}\n")).unwrap();
    let out = envsim(
        dir.path(),
        &[dir.path().join("bad.jsonl").to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.jsonl: line 1: at /messages/0/tool_calls/0/function/arguments: "),
        "{err}"
    );
    // So is a description that is not one.
    std::fs::write(
        dir.path().join("swagger.json"),
        r#"{"swagger": "2.0", "paths": {}}"#,
    )
    .unwrap();
    let out = envsim(
        dir.path(),
        &[
            dir.path().join("bad.jsonl").to_str().unwrap(),
            "--spec",
            dir.path().join("swagger.json").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("swagger.json: at /swagger: "), "{err}");
}

#[test]
fn outcomes_are_compared_with_the_executor_on_the_same_calls() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    // A simulator that says yes to everything: a read of a ticket nobody has, and a close of a
    // ticket already closed, both reported as successes.
    let state = run(None)["initial_state"].clone();
    let happy = json!({"env": "desk", "task_id": "happy", "initial_state": state, "steps": [
        {"action": {"name": "get_ticket", "arguments": {"ticket_id": "T77"}},
         "observation": "{'success': True, 'data': {'title': 'x', 'status': 'open', 'owner': 'desk'}}"},
        {"action": {"name": "close_ticket", "arguments": {"ticket_id": "T3"}},
         "observation": "{'success': True}"},
    ]});
    let (summary, _) = audit_records(dir.path(), &[run(None), happy.clone()], &[]);
    let bias = &summary["bias"];
    assert_eq!(bias["expected_from"], "the executor, on the same calls");
    // Executed: get_ticket succeeds once (T4) and fails once (no ticket T77); close_ticket
    // succeeds once (T4) and fails once (already closed). The records claim four successes.
    assert_eq!(
        bias["tools"]["get_ticket"]["expected"],
        json!({"error": 0.5, "success": 0.5})
    );
    assert_eq!(
        bias["tools"]["close_ticket"]["expected"],
        json!({"conflict": 0.5, "success": 0.5})
    );
    assert_eq!(bias["tools"]["close_ticket"]["happy_path_excess"], 0.5);
    assert_eq!(bias["overall"]["steps"], 5);
    // Observed 5 of 5 successes; expected 3 of 5 (create, and one of each of the others).
    let excess = bias["overall"]["happy_path_excess"].as_f64().unwrap();
    assert!((excess - 0.4).abs() < 1e-12, "{excess}");
    // The happy run's successes changed nothing: reads, as far as its states say.
    assert_eq!(
        summary["coverage"],
        json!({"create": 1, "read": 3, "update": 1})
    );
    // The clean run alone: what the records say is what the executor does.
    let (summary, _) = audit_records(dir.path(), &[run(None)], &[]);
    assert_eq!(summary["bias"]["overall"]["jsd"], 0.0);
    // A reference dataset instead: the clean run is what is expected.
    let reference = dir.path().join("reference.jsonl");
    std::fs::write(&reference, format!("{}\n", run(None))).unwrap();
    let (summary, _) = audit_records(
        dir.path(),
        &[happy],
        &["--reference-distribution", reference.to_str().unwrap()],
    );
    let bias = &summary["bias"];
    assert!(
        bias["expected_from"]
            .as_str()
            .unwrap()
            .starts_with("reference dataset "),
        "{bias}"
    );
    assert_eq!(
        bias["tools"]["get_ticket"]["expected"],
        json!({"success": 1.0})
    );
    assert_eq!(bias["overall"]["jsd"], 0.0);
}

/// `envsim audit agree ...` with `--json`: the summary.
fn agree(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(["audit", "agree", "--json"])
        .args(args)
        .output()
        .unwrap();
    succeeded(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn simulations_of_the_same_steps_agree_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, records: &[Value]| {
        let path = dir.path().join(name);
        let text: String = records.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let mut dropped = run(Some("dropped"));
    dropped["task_id"] = json!("clean");
    let (a, b, c) = (
        write("a.jsonl", &[run(None)]),
        write("b.jsonl", &[run(None)]),
        write("c.jsonl", &[dropped]),
    );
    // Two agree on all three steps; the third drops the close (its change and its read
    // differ).
    let v = agree(&[&a, &b, &c]);
    assert_eq!(v["records_missing_from_other_files"], 0);
    assert_eq!((v["steps"].clone(), v["k"].clone()), (json!(3), json!(3)));
    let third = 2.0 / 3.0;
    assert_eq!(v["unanimous_steps"], 1);
    assert_eq!(v["tools"]["create_ticket"]["ccr"], 1.0);
    assert_eq!(v["tools"]["close_ticket"]["ccr"], third);
    assert_eq!(v["tools"]["get_ticket"]["ccr"], third);
    assert_eq!(v["ccr"]["observation"], (1.0 + 1.0 + third) / 3.0);
    assert_eq!(v["states"], true);
    // Files that do not simulate the same calls are refused, with the place.
    let mut other = run(None);
    other["steps"][1]["action"]["name"] = json!("get_ticket");
    let d = write("d.jsonl", &[other]);
    let out = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(["audit", "agree", &a, &d])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("d.jsonl: line 1: step 2 calls get_ticket (or other arguments) where"),
        "{err}"
    );
}

#[test]
fn agreement_predicts_correctness_on_a_benchmark() {
    use envsim_testkit::{to_json_array, BenchOptions, NoisySimulator, SyntheticBench};
    let dir = tempfile::tempdir().unwrap();
    let records = SyntheticBench::records(
        20,
        1,
        &BenchOptions {
            users: 10,
            ..BenchOptions::default()
        },
    );
    let bench = dir.path().join("bench.json");
    std::fs::write(&bench, to_json_array(&records)).unwrap();
    let mut files = Vec::new();
    for seed in 1..=3 {
        let mut sim = NoisySimulator::new(seed);
        let lines: String = records
            .iter()
            .enumerate()
            .map(|(i, r)| json!({"sample_id": i, "output": sim.output(r)}).to_string() + "\n")
            .collect();
        let path = dir.path().join(format!("p{seed}.jsonl"));
        std::fs::write(&path, lines).unwrap();
        files.push(path.to_str().unwrap().to_owned());
    }
    let mut args: Vec<&str> = vec!["--bench", bench.to_str().unwrap()];
    args.extend(files.iter().map(String::as_str));
    let v = agree(&args);
    let truth = &v["truth"];
    println!("{}", serde_json::to_string_pretty(&v).unwrap());
    assert_eq!(v["k"], 3);
    assert_eq!(v["steps"], 15);
    assert_eq!(truth["auroc"], 0.839);
    assert_eq!(
        truth["reliability"],
        json!([
            {"agreement": 0.0, "answers": 21, "correct": 3},
            {"agreement": 0.5, "answers": 6, "correct": 2},
            {"agreement": 1.0, "answers": 18, "correct": 15},
        ])
    );
    // The majority is right as often as the best of the three.
    assert_eq!(truth["majority_accuracy"], 8.0 / 15.0);
}

#[test]
fn the_report_comes_as_markdown_or_self_contained_html() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    let file = dir.path().join("runs.jsonl");
    let text: String = [run(None), run(Some("phantom"))]
        .iter()
        .map(|r| format!("{r}\n"))
        .collect();
    std::fs::write(&file, text).unwrap();
    let out = envsim(
        dir.path(),
        &[
            file.to_str().unwrap(),
            "--format",
            "markdown",
            "--no-replay",
        ],
    );
    succeeded(&out);
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(md.starts_with("# envsim audit\n"), "{md}");
    assert!(md.contains("| appeared_without_create | 1 |"), "{md}");
    let out = envsim(
        dir.path(),
        &[file.to_str().unwrap(), "--format", "html", "--no-replay"],
    );
    succeeded(&out);
    let html = String::from_utf8(out.stdout).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script") && !html.contains("https://"));
    // The trajectory with the most violations is drawn: the phantom's lane is there.
    assert!(html.contains("tickets/T9"), "the phantom's lane");
    // One asked for by id, and one that matches nothing.
    let out = envsim(
        dir.path(),
        &[
            file.to_str().unwrap(),
            "--format",
            "html",
            "--draw",
            "clean",
            "--no-replay",
        ],
    );
    let html = String::from_utf8(out.stdout).unwrap();
    assert!(!html.contains("tickets/T9") && html.contains("tickets/T4"));
    let out = envsim(
        dir.path(),
        &[
            file.to_str().unwrap(),
            "--format",
            "html",
            "--draw",
            "nope",
            "--no-replay",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
}

/// The local model as a multi-step simulator, audited: opt-in like every test of the 491 MB
/// model (`ENVSIM_MODEL_TESTS=1`; `.ci/run` sets it).
#[cfg(feature = "local")]
#[test]
fn the_local_model_simulates_walks_and_the_audit_is_compared_with_the_truth() {
    if !matches!(
        std::env::var("ENVSIM_MODEL_TESTS").ok().as_deref(),
        Some("1" | "all")
    ) {
        eprintln!("skipped: set ENVSIM_MODEL_TESTS=1 to run it (it uses the default model)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    let out_file = dir.path().join("sim.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args([
            "audit", "simulate", "--env", "desk", "--walks", "1", "--steps", "2", "--json",
        ])
        .arg("--envs")
        .arg(dir.path())
        .arg("--out")
        .arg(&out_file)
        .output()
        .unwrap();
    succeeded(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["steps"], 2);
    let f = &v["flags"];
    let total: u64 = [
        "flagged_wrong",
        "flagged_right",
        "unflagged_wrong",
        "unflagged_right",
    ]
    .iter()
    .map(|k| f[*k].as_u64().unwrap())
    .sum();
    assert_eq!(total, 2);
    // The simulated trajectories are a file `envsim audit` reads, each step marked right or
    // wrong against the executor.
    let records = read_jsonl(&out_file);
    assert_eq!(records.len(), 1);
    let steps = records[0]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert!(steps
        .iter()
        .all(|s| s["correct"].is_boolean() && s["state_after"].is_object()));
    let right = steps.iter().filter(|s| s["correct"] == true).count();
    assert_eq!(v["right_steps"], right);
    // What a small model answers may be empty or prose of unknown outcome; the default
    // refusal of unreadable files is tested elsewhere, here every answer is counted.
    let (summary, _) = audit_records(dir.path(), &records, &["--no-replay", "--min-read", "0"]);
    assert_eq!(summary["trajectories"], 1);
    let counted: u64 = summary["answers"]
        .as_object()
        .unwrap()
        .values()
        .map(|t| t["answers"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 2);
}

#[test]
fn a_generated_openapi_description_is_an_audit_spec() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    let spec = dir.path().join("desk.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(["env", "openapi", "desk", "--walks", "4", "--out"])
        .arg(&spec)
        .arg("--envs")
        .arg(dir.path())
        .output()
        .unwrap();
    succeeded(&out);
    let doc: Value = yaml_serde::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    let mut routes: Vec<String> = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            routes.push(format!(
                "{} {} {}",
                op["operationId"].as_str().unwrap(),
                method,
                path
            ));
        }
    }
    routes.sort();
    assert_eq!(
        routes,
        [
            "close_ticket post /tickets/{ticket_id}:close_ticket",
            "create_ticket post /tickets",
            "get_ticket get /tickets/{ticket_id}",
        ]
    );
    // The audit reads it: a renamed field of a read breaks the learned response schema, and
    // the effects come from the paths.
    let mut faulty = run(None);
    faulty["steps"][2]["observation"] =
        json!("{'success': True, 'data': {'Title': 'd', 'status': 'closed', 'owner': 'desk'}}");
    let file = dir.path().join("runs.jsonl");
    std::fs::write(&file, format!("{}\n{}\n", run(None), faulty)).unwrap();
    let violations = dir.path().join("v.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args([
            "audit",
            file.to_str().unwrap(),
            "--spec",
            spec.to_str().unwrap(),
            "--out",
        ])
        .arg(&violations)
        .args(["--json", "--learn-walks", "0", "--envs"])
        .arg(dir.path().join("none"))
        .output()
        .unwrap();
    succeeded(&out);
    let found: Vec<Value> = std::fs::read_to_string(&violations)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| json!([v["trajectory"], v["step"], v["kind"]]))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0][1], 2);
    assert_eq!(found[0][2], "response_schema");
}

/// A chat transcript of the desk whose tool answers are what `str(result)` prints.
fn literal_chat(id: &str, answers: &[(&str, Value, &str)]) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "tickets"})];
    for (i, (tool, args, answer)) in answers.iter().enumerate() {
        let call_id = format!("c{i}");
        messages.push(
            json!({"role": "assistant", "tool_calls": [{"id": call_id, "type": "function",
            "function": {"name": tool, "arguments": args.to_string()}}]}),
        );
        messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": answer}));
    }
    json!({"id": id, "env": "desk", "messages": messages})
}

#[test]
fn python_literal_answers_are_read_and_unreadable_files_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    let t4 = json!({"ticket_id": "T4"});
    // Close T4, then read it back open: the desk's walks show close_ticket sets the status.
    let reverted = literal_chat(
        "ticket-9",
        &[
            (
                "create_ticket",
                json!({"title": "x"}),
                "{'success': True, 'ticket_id': 'T4'}",
            ),
            (
                "get_ticket",
                t4.clone(),
                "{'success': True, 'data': {'title': 'x', 'status': 'open', 'owner': 'desk'}}",
            ),
            ("close_ticket", t4.clone(), "Result: {'success': True}"),
            (
                "get_ticket",
                t4.clone(),
                "{'success': True, 'data': {'title': 'x', 'status': 'open', 'owner': 'desk'}}",
            ),
        ],
    );
    // With the initial state named: T3 is closed from the start, and T8 was never there.
    let mut flipped = literal_chat(
        "ticket-10",
        &[
            (
                "close_ticket",
                json!({"ticket_id": "T3"}),
                "{'success': True}",
            ),
            (
                "get_ticket",
                json!({"ticket_id": "T8"}),
                "{'success': True, 'data': {'title': 'q', 'status': 'open', 'owner': 'desk'}}",
            ),
        ],
    );
    flipped["state"] = json!("00");
    let (summary, violations) = audit_records(dir.path(), &[reverted, flipped], &[]);
    let file = dir.path().join("runs.jsonl").display().to_string();
    assert_eq!(
        summary["answers"][&file],
        json!({"answers": 6, "read": 6, "outcome_read": 6, "read_share": 1.0,
               "forms": {"python_literal": 5, "embedded": 1}})
    );
    let got: Vec<(String, u64, String, Value, Value)> = violations
        .iter()
        .map(|v| {
            (
                v["record"].as_str().unwrap().to_owned(),
                v["step"].as_u64().unwrap(),
                v["kind"].as_str().unwrap().to_owned(),
                v["conflicting_step"].clone(),
                v["line"].clone(),
            )
        })
        .collect();
    let row =
        |r: &str, s: u64, k: &str, c: Value, l: u64| (r.to_owned(), s, k.to_owned(), c, json!(l));
    assert_eq!(
        got,
        [
            row("ticket-9", 3, "status_reverted", json!(2), 1),
            row("ticket-10", 0, "precondition_failed", json!(null), 2),
            row("ticket-10", 1, "phantom_id", json!(null), 2),
        ]
    );
    // The desk's effects were learned by running it, and every violation says so.
    assert!(violations.iter().all(|v| v["effects"] == "observed"));
    // A state the package lacks is an error naming it.
    let mut unknown = literal_chat(
        "x",
        &[(
            "get_ticket",
            json!({"ticket_id": "T1"}),
            "{'success': True}",
        )],
    );
    unknown["state"] = json!("99_huge");
    std::fs::write(dir.path().join("unknown.jsonl"), format!("{unknown}\n")).unwrap();
    let out = envsim(
        dir.path(),
        &[dir.path().join("unknown.jsonl").to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 1: desk has no state \"99_huge\" (its states: 00.json)"),
        "{err}"
    );
    // Answers nothing can be read from: refused with the counts, not a clean bill of health.
    let prose = literal_chat(
        "prose",
        &[
            (
                "get_ticket",
                json!({"ticket_id": "T1"}),
                "The ticket is open.",
            ),
            (
                "close_ticket",
                json!({"ticket_id": "T1"}),
                "Closed it for you.",
            ),
            (
                "get_ticket",
                json!({"ticket_id": "T1"}),
                "{'success': True, 'data': {'status': 'closed'}}",
            ),
        ],
    );
    std::fs::write(dir.path().join("prose.jsonl"), format!("{prose}\n")).unwrap();
    let out = envsim(
        dir.path(),
        &[dir.path().join("prose.jsonl").to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("only 33.3% of the tool answers could be read (below --min-read 0.5): 3 tool answers (1 python_literal, 2 text); 1 read (33.3%), 1 with a known outcome"),
        "{err}"
    );
    // --min-read 0 accepts it.
    let out = envsim(
        dir.path(),
        &[
            dir.path().join("prose.jsonl").to_str().unwrap(),
            "--min-read",
            "0",
        ],
    );
    succeeded(&out);
}

#[test]
fn validation_plants_faults_in_workflows_someone_else_wrote() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    // Two agent workflows on the desk, as call-only runs with their initial state (the form
    // `env import-bfcl` writes its ground truth in).
    let s0: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("desk/states/00.json")).unwrap(),
    )
    .unwrap();
    let call = |name: &str, args: Value| json!({"action": {"name": name, "arguments": args}});
    let runs = [
        json!({"env": "desk", "task_id": "w1", "initial_state": s0, "steps": [
            call("create_ticket", json!({"title": "printer"})),
            call("get_ticket", json!({"ticket_id": "T4"})),
            call("close_ticket", json!({"ticket_id": "T4"})),
            call("get_ticket", json!({"ticket_id": "T4"})),
        ]}),
        json!({"env": "desk", "task_id": "w2", "initial_state": s0, "steps": [
            call("get_ticket", json!({"ticket_id": "T1"})),
            call("close_ticket", json!({"ticket_id": "T1"})),
            call("close_ticket", json!({"ticket_id": "T1"})),
            call("get_ticket", json!({"ticket_id": "T1"})),
        ]}),
    ];
    let file = dir.path().join("workflows.jsonl");
    let text: String = runs.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let out = envsim(
        dir.path(),
        &[
            "validate",
            "--workflows",
            file.to_str().unwrap(),
            "--learn-walks",
            "10",
            "--steps",
            "8",
            "--rate",
            "1",
            "--json",
        ],
    );
    succeeded(&out);
    let forms: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = forms
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["form"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["states", "calls", "calls_initial", "openapi"]);
    // Every workflow is audited; at rate 1 each gets the next fault kind in turn that has a
    // place in it (in the states form, the next kind only: the second, a vanished create, has
    // none there, so w2 stays clean), and every planted fault is found.
    for form in forms.as_array().unwrap() {
        assert_eq!(form["trajectories"], 2, "{}", form["form"]);
        // A dropped update ends its trajectory at the dropped step (states form only).
        let steps = form["steps"].as_u64().unwrap();
        if form["form"] == "states" {
            assert!((1..=8).contains(&steps), "{steps}");
        } else {
            assert_eq!(steps, 8, "{}", form["form"]);
        }
        let planted: Vec<(String, u64, u64)> =
            faults_of(form).into_iter().filter(|f| f.1 > 0).collect();
        let expected: &[(&str, u64, u64)] = if form["form"] == "states" {
            &[("dropped_update", 1, 1)]
        } else {
            &[("stale_read", 1, 1), ("vanished_create", 1, 1)]
        };
        let expected: Vec<(String, u64, u64)> = expected
            .iter()
            .map(|(k, p, f)| ((*k).to_owned(), *p, *f))
            .collect();
        assert_eq!(planted, expected, "{}", form["form"]);
    }
    // A workflow of an environment the corpus lacks is refused, naming it.
    std::fs::write(
        &file,
        format!("{}\n", json!({"env": "nope", "task_id": "x", "steps": []})),
    )
    .unwrap();
    let out = envsim(
        dir.path(),
        &["validate", "--workflows", file.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("workflows.jsonl: line 1: environment \"nope\" is not in the corpus"),
        "{err}"
    );
}

/// A value as Python writes it (`repr`): what agent transcripts hold as tool answers.
fn python_literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let escaped = s
                .replace('\\', "\\\\")
                .replace('\'', "\\'")
                .replace('\n', "\\n");
            format!("'{escaped}'")
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(python_literal).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("'{k}': {}", python_literal(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

/// Issue 40's canonical stale read, on the bundled email client and without states: a draft
/// updated through `update_draft(draft_id, subject)` answers success with `changed:
/// ['subject']`, and the next `open_message` of it shows the old subject. Caught at that read,
/// against the update; the transcript with the new subject is clean.
#[test]
fn a_draft_read_back_with_its_old_subject_is_a_stale_read() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../envs/email_client");
    let package = dir.path().join("email_client");
    std::fs::create_dir_all(package.join("states")).unwrap();
    for file in ["manifest.json", "env.py", "tests.json"] {
        std::fs::copy(corpus.join(file), package.join(file)).unwrap();
    }
    for entry in std::fs::read_dir(corpus.join("states")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(
            &path,
            package.join("states").join(path.file_name().unwrap()),
        )
        .unwrap();
    }
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(corpus.join("states/00_small.json")).unwrap(),
    )
    .unwrap();
    let mut draft = state["messages"]["msg-5005"].clone();
    assert_eq!(draft["is_draft"], true, "the small state's draft");
    draft["message_id"] = json!("msg-5005");
    let open = |subject: &str| {
        let mut data = draft.clone();
        data["subject"] = json!(subject);
        json!({"action": {"name": "open_message", "arguments": {"message_id": "msg-5005"}},
               "observation": python_literal(&json!({"success": true, "data": data, "marked_read": false}))})
    };
    let update = json!({"action": {"name": "update_draft", "arguments": {"draft_id": "msg-5005", "subject": "Q3 supplier review"}},
        "observation": python_literal(&json!({"success": true, "message": "Draft msg-5005 updated", "changed": ["subject"]}))});
    let old = draft["subject"].as_str().unwrap().to_owned();
    let records = [
        json!({"id": "stale", "env": "email_client", "steps": [open(&old), update.clone(), open(&old)]}),
        json!({"id": "clean", "env": "email_client", "steps": [open(&old), update, open("Q3 supplier review")]}),
    ];
    let (summary, violations) = audit_records(dir.path(), &records, &[]);
    assert_eq!(summary["trajectories"], 2);
    // Records are named by their line: the stale one is line 1.
    let found: Vec<(u64, u64, &str, u64)> = violations
        .iter()
        .map(|v| {
            (
                v["line"].as_u64().unwrap(),
                v["step"].as_u64().unwrap(),
                v["kind"].as_str().unwrap(),
                v["conflicting_step"].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect();
    assert_eq!(found, [(1, 2, "stale_read", 1)], "{violations:?}");
}

/// Runs `envsim audit ARGS`, with `--envs` the bundled corpus's folder when `corpus`.
fn envsim_with(corpus: bool, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_envsim"));
    command.arg("audit").args(args);
    if corpus {
        command
            .arg("--envs")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../envs"));
    }
    command.output().expect("runs")
}

/// The second validation set (`audit workflows`, written without the injector) on three
/// bundled environments: the planted faults (pinned per kind) and the forms of the answers,
/// the same files for the same seed, and the score of the audit's violations against the
/// labels, recomputed here from the two files (what the audit finds is not pinned: the checks
/// change, the arithmetic must not).
#[test]
fn independent_workflows_are_generated_audited_and_scored() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let generate = |out: &str, labels: &str| {
        let out = envsim_with(
            true,
            &[
                "workflows",
                "--env",
                "issue_tracker",
                "--env",
                "car_rental",
                "--env",
                "email_client",
                "--per-env",
                "5",
                "--seed",
                "7",
                "--out",
                out,
                "--labels",
                labels,
            ],
        );
        succeeded(&out);
    };
    generate(&path("set.jsonl"), &path("labels.jsonl"));
    let transcripts = read_jsonl(&dir.path().join("set.jsonl"));
    let labels = read_jsonl(&dir.path().join("labels.jsonl"));
    assert_eq!((transcripts.len(), labels.len()), (15, 15));
    let mut planted = std::collections::BTreeMap::new();
    for (i, (t, l)) in transcripts.iter().zip(&labels).enumerate() {
        assert_eq!(l["line"], i + 1);
        assert_eq!(
            (&t["task_id"], &t["id"]),
            (&l["trajectory"], &l["trajectory"])
        );
        assert_eq!((&t["env"], &t["state"]), (&l["env"], &l["state"]));
        assert!(t.get("initial_state").is_none(), "call-only");
        let answers: Vec<&str> = t["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(answers.len() as u64, l["steps"].as_u64().unwrap());
        assert!((4..=12).contains(&answers.len()));
        let prefix = match l["style"].as_str().unwrap() {
            "json" => "{\"",
            "python_literal" => "{'",
            "sentence" => "The ",
            other => panic!("style {other}"),
        };
        assert!(answers.iter().all(|a| a.starts_with(prefix)), "{answers:?}");
        if let Some(kind) = l["fault"]["kind"].as_str() {
            *planted.entry(kind).or_insert(0) += 1;
            assert!(l["fault"]["step"].as_u64().unwrap() < answers.len() as u64);
        }
    }
    assert_eq!(
        planted,
        std::collections::BTreeMap::from([
            ("happy_path_flip", 1),
            ("list_omission", 1),
            ("phantom_copy", 1),
            ("schema_drift", 1),
            ("stale_read", 2),
            ("vanished_create", 1),
        ])
    );
    // The same seed writes the same files.
    generate(&path("again.jsonl"), &path("again_labels.jsonl"));
    for (a, b) in [
        ("set.jsonl", "again.jsonl"),
        ("labels.jsonl", "again_labels.jsonl"),
    ] {
        assert_eq!(
            std::fs::read(dir.path().join(a)).unwrap(),
            std::fs::read(dir.path().join(b)).unwrap(),
            "{a}"
        );
    }
    // The audit, then the score.
    let out = envsim_with(
        true,
        &[&path("set.jsonl"), "--json", "--out", &path("v.jsonl")],
    );
    succeeded(&out);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["trajectories"], 15);
    assert_eq!(summary["inputs"], json!({"openai_chat": 15}));
    let score_args = [
        "score".to_owned(),
        path("v.jsonl"),
        "--labels".to_owned(),
        path("labels.jsonl"),
    ];
    let score_args: Vec<&str> = score_args.iter().map(String::as_str).collect();
    let out = envsim_with(false, &[&score_args[..], &["--json"]].concat());
    succeeded(&out);
    let score: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The score's arithmetic, recomputed from the files: found = flagged at the planted step or
    // later in the same trajectory (by the record id the audit writes).
    let violations = read_jsonl(&dir.path().join("v.jsonl"));
    let flagged_steps = |id: &Value| -> Vec<u64> {
        violations
            .iter()
            .filter(|v| &v["record"] == id)
            .map(|v| v["step"].as_u64().unwrap())
            .collect()
    };
    let mut per_kind: std::collections::BTreeMap<&str, [u64; 3]> = Default::default();
    let (mut clean, mut clean_flagged) = (0u64, 0u64);
    for l in &labels {
        let steps = flagged_steps(&l["trajectory"]);
        match (l["fault"]["kind"].as_str(), l["fault"]["step"].as_u64()) {
            (Some(kind), Some(step)) => {
                for key in [kind, "all"] {
                    let entry = per_kind.entry(key).or_default();
                    entry[0] += 1;
                    entry[1] += u64::from(steps.iter().any(|s| *s >= step));
                    entry[2] += u64::from(steps.contains(&step));
                }
            }
            _ => {
                clean += 1;
                clean_flagged += u64::from(!steps.is_empty());
            }
        }
    }
    for (kind, [n, found, at_step]) in &per_kind {
        let s = if *kind == "all" {
            &score["overall"]
        } else {
            &score["per_kind"][kind]
        };
        assert_eq!(
            (&s["planted"], &s["found"], &s["found_at_step"]),
            (&json!(n), &json!(found), &json!(at_step)),
            "{kind}"
        );
        assert_eq!(s["recall"], json!(*found as f64 / *n as f64), "{kind}");
    }
    assert_eq!(per_kind["all"][0], 7);
    assert_eq!(
        score["per_kind"]["resurrection_by_status"]["recall"],
        Value::Null
    );
    assert_eq!(clean, 8);
    assert_eq!(
        (&score["clean"]["total"], &score["clean"]["flagged"]),
        (&json!(clean), &json!(clean_flagged))
    );
    // The table says the same.
    let out = envsim_with(false, &score_args);
    succeeded(&out);
    let table = String::from_utf8_lossy(&out.stdout);
    let line = format!(
        "clean trajectories flagged: {clean_flagged} of {clean} ({:.3})",
        clean_flagged as f64 / clean as f64
    );
    assert!(table.contains(&line), "{table}");
    // Violations of another file do not join these labels; a rate past 1 is refused.
    std::fs::write(
        dir.path().join("other.jsonl"),
        r#"{"record": "elsewhere-1", "line": 40, "step": 0, "kind": "phantom_id"}"#,
    )
    .unwrap();
    let out = envsim_with(
        false,
        &[
            "score",
            &path("other.jsonl"),
            "--labels",
            &path("labels.jsonl"),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("other.jsonl: line 1: the violation names record Some(\"elsewhere-1\")"),
        "{err}"
    );
    let out = envsim_with(
        true,
        &[
            "workflows",
            "--rate",
            "2",
            "--out",
            &path("x"),
            "--labels",
            &path("y"),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rate must be between 0 and 1, got 2"));
}

/// A mailbox-and-tickets transcript of an environment the corpus does not hold: a draft read,
/// updated and read back; a ticket read, triaged and read back. `subject` and `status` are
/// what the read-backs show.
fn unknown_env_chat(n: usize, subject: &str, status: &str) -> Value {
    let (draft, ticket) = (format!("msg-{n}"), format!("T{n}"));
    let message = |subject: &str| {
        python_literal(&json!({"id": draft, "subject": subject, "folder": "drafts"}))
    };
    let record = |status: &str| python_literal(&json!({"ticket_id": ticket, "status": status}));
    let mut chat = literal_chat(
        &format!("run-{n}"),
        &[
            (
                "get_message",
                json!({"message_id": draft}),
                &message("Draft"),
            ),
            (
                "update_draft",
                json!({"draft_id": draft, "subject": format!("Plan {n}")}),
                "{'success': True, 'changed': ['subject']}",
            ),
            (
                "get_message",
                json!({"message_id": draft}),
                &message(subject),
            ),
            ("get_ticket", json!({"ticket_id": ticket}), &record("new")),
            (
                "triage_ticket",
                json!({"ticket_id": ticket}),
                "{'success': True}",
            ),
            ("get_ticket", json!({"ticket_id": ticket}), &record(status)),
        ],
    );
    chat["env"] = json!("helpdesk_mail");
    chat
}

#[test]
fn many_transcripts_of_an_unknown_environment_show_what_its_changes_write() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    // 22 right transcripts, one whose update is not read back, one whose triage is.
    let mut runs: Vec<Value> = (0..22)
        .map(|n| unknown_env_chat(n, &format!("Plan {n}"), "triaged"))
        .collect();
    runs.push(unknown_env_chat(98, "Draft", "triaged"));
    runs.push(unknown_env_chat(99, "Plan 99", "new"));
    let file = dir.path().join("runs.jsonl");
    let write = |runs: &[Value]| {
        let text: Vec<String> = runs.iter().map(Value::to_string).collect();
        std::fs::write(&file, text.join("\n") + "\n").unwrap();
    };
    write(&runs);
    let out = dir.path().join("violations.jsonl");
    let o = envsim(
        dir.path(),
        &[
            file.to_str().unwrap(),
            "--json",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("helpdesk_mail: writes of triage_ticket (24 read back), update_draft (24 read back) taken from what the file's 24 transcripts show"),
        "{stderr}"
    );
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        summary["environments"][0]["writes_from_transcripts"],
        json!(["triage_ticket", "update_draft"])
    );
    let found: Vec<(String, u64, String)> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            (
                v["trajectory"].as_str().unwrap().to_owned(),
                v["step"].as_u64().unwrap(),
                v["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // The update's subject lost (held to the argument's value), and the ticket back at `new`
    // (held to the status most transcripts show triage leaving), each at its read-back.
    assert_eq!(
        found,
        vec![
            ("line 23 run-98".to_owned(), 2, "stale_read".to_owned()),
            ("line 24 run-99".to_owned(), 5, "status_reverted".to_owned()),
        ],
        "{stderr}"
    );
    // Without the transcripts' evidence (or with too few of them) the triage's revert is not
    // found: `triage` is no status verb. The lost subject still is (the read typed the draft
    // as a message, and the guess sets the field its argument names).
    let counts = |summary: &Value| {
        (
            summary["by_kind"]["stale_read"].clone(),
            summary["by_kind"]["status_reverted"].clone(),
        )
    };
    let o = envsim(
        dir.path(),
        &[file.to_str().unwrap(), "--json", "--no-transcript-evidence"],
    );
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(counts(&summary), (json!(1), json!(0)), "{summary}");
    write(&runs[runs.len() - 19..]);
    let o = envsim(dir.path(), &[file.to_str().unwrap(), "--json"]);
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(counts(&summary), (json!(1), json!(0)), "{summary}");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("taken from"));
}
