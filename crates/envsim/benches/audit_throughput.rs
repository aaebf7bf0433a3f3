//! `envsim audit` throughput and memory: a generated file of envsim trajectories with their
//! states (a ticket desk: creates, closes, reads, deletes), audited with every state check and
//! the specification check on, the environment's effects from its manifest (`--learn-walks 0`,
//! `--no-replay`: nothing but the audit runs).
//!
//! `cargo bench -p envsim --bench audit_throughput`. Knobs: `ENVSIM_AUDIT_TRAJECTORIES` (3000),
//! `ENVSIM_AUDIT_STEPS` (16 per trajectory), `ENVSIM_AUDIT_TICKETS` (50 in the initial state),
//! `ENVSIM_AUDIT_RUNS` (3), `ENVSIM_AUDIT_DIR` (keep the generated files there). Wall time, MB/s and the command's peak memory (its `VmHWM`, polled).
//!
//! Baseline in the same run: CPython's `json` module only parsing the same file line by line
//! (`python3`, or `ENVSIM_AUDIT_PYTHON`), the least any Python auditor would have to do.
//!
//! Constant memory: with `ENVSIM_AUDIT_SCALE=1`, the same trajectories are also written 10 times
//! over (10× the steps) and the peak memory of both files is compared.

use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const DESK: &str = r#"
class Desk:
    def __init__(self, init_config: dict):
        self.tickets = dict(init_config.get("tickets", {}))
        self.next_id = init_config.get("next_id", 1)

    def create_ticket(self, title: str) -> dict:
        tid = "T%d" % self.next_id
        self.next_id += 1
        self.tickets[tid] = {"title": title, "status": "open", "owner": "desk", "priority": 2}
        return {"success": True, "ticket_id": tid}

    def close_ticket(self, ticket_id: str) -> dict:
        t = self.tickets.get(ticket_id)
        if t is None:
            return {"success": False, "error": "no ticket " + ticket_id}
        t["status"] = "closed"
        return {"success": True}

    def delete_ticket(self, ticket_id: str) -> dict:
        if self.tickets.pop(ticket_id, None) is None:
            return {"success": False, "error": "no ticket " + ticket_id}
        return {"success": True}

    def get_ticket(self, ticket_id: str) -> dict:
        t = self.tickets.get(ticket_id)
        if t is None:
            return {"success": False, "error": "no ticket " + ticket_id}
        return {"success": True, "data": dict(t)}
"#;

/// The desk package, with its effects declared (nothing is walked).
fn write_package(root: &Path) {
    let pkg = root.join("desk");
    std::fs::create_dir_all(pkg.join("states")).unwrap();
    std::fs::write(pkg.join("env.py"), DESK).unwrap();
    let tool = |name: &str, props: Value| {
        json!({"type": "function", "function": {"name": name, "description": name,
               "parameters": {"type": "object", "properties": props}}})
    };
    let id = json!({"ticket_id": {"type": "string"}});
    let manifest = json!({"name": "desk", "domain": "bench", "description": "Tickets.",
        "class_name": "Desk",
        "tools": [tool("create_ticket", json!({"title": {"type": "string"}})),
                  tool("close_ticket", id.clone()), tool("delete_ticket", id.clone()),
                  tool("get_ticket", id)],
        "effects": {
            "create_ticket": [{"resource": "tickets", "operation": "create"}],
            "close_ticket": [{"resource": "tickets", "operation": "update", "id_parameter": "ticket_id"}],
            "delete_ticket": [{"resource": "tickets", "operation": "delete", "id_parameter": "ticket_id"}],
            "get_ticket": [{"resource": "tickets", "operation": "read", "id_parameter": "ticket_id"}]}});
    std::fs::write(pkg.join("manifest.json"), manifest.to_string()).unwrap();
    std::fs::write(
        pkg.join("states/00.json"),
        json!({"tickets": {}, "next_id": 1}).to_string(),
    )
    .unwrap();
}

/// One trajectory: a create, a close, a read and (every fourth step) a delete, in turn; each
/// changed state written whole, as a simulation that applies its Δ to an explicit state would.
fn trajectory(index: usize, steps: usize, tickets: usize) -> Value {
    let mut state = json!({"tickets": {}, "next_id": tickets + 1});
    for t in 1..=tickets {
        state["tickets"][format!("T{t}")] = json!({"title": format!("ticket {t} of run {index}"),
            "status": "open", "owner": "desk", "priority": t % 3});
    }
    let initial = state.clone();
    let mut out = Vec::with_capacity(steps);
    let mut last = tickets;
    for k in 0..steps {
        let step = match k % 4 {
            0 => {
                last += 1;
                let id = format!("T{last}");
                state["tickets"][&id] = json!({"title": format!("new {k}"), "status": "open",
                    "owner": "desk", "priority": 2});
                state["next_id"] = json!(last + 1);
                json!({"action": {"name": "create_ticket", "arguments": {"title": format!("new {k}")}},
                       "observation": format!("{{'success': True, 'ticket_id': '{id}'}}"),
                       "state_after": state})
            }
            1 => {
                let id = format!("T{last}");
                state["tickets"][&id]["status"] = json!("closed");
                json!({"action": {"name": "close_ticket", "arguments": {"ticket_id": id}},
                       "observation": "{'success': True}", "state_after": state})
            }
            2 => {
                let id = format!("T{last}");
                let data = state["tickets"][&id].clone();
                json!({"action": {"name": "get_ticket", "arguments": {"ticket_id": id}},
                       "observation": json!({"success": true, "data": data}).to_string()})
            }
            _ => {
                let id = format!("T{}", 1 + k % tickets.max(1));
                let existed = state["tickets"]
                    .as_object_mut()
                    .and_then(|m| m.shift_remove(&id))
                    .is_some();
                if existed {
                    json!({"action": {"name": "delete_ticket", "arguments": {"ticket_id": id}},
                           "observation": "{'success': True}", "state_after": state})
                } else {
                    json!({"action": {"name": "delete_ticket", "arguments": {"ticket_id": id}},
                           "observation": format!("{{'success': False, 'error': 'no ticket {id}'}}")})
                }
            }
        };
        out.push(step);
    }
    json!({"env": "desk", "task_id": format!("run-{index}"), "initial_state": initial, "steps": out})
}

/// Writes `copies` × `n` trajectories; returns the file's size in bytes.
fn write_file(path: &Path, n: usize, steps: usize, tickets: usize, copies: usize) -> u64 {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let lines: Vec<String> = (0..n)
        .map(|i| trajectory(i, steps, tickets).to_string())
        .collect();
    for _ in 0..copies {
        for line in &lines {
            file.write_all(line.as_bytes()).unwrap();
            file.write_all(b"\n").unwrap();
        }
    }
    file.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// Runs a command to its end; returns its wall time and its peak resident memory in MiB (its
/// `VmHWM`, read every few milliseconds while it runs).
fn measure(command: &mut Command) -> (Duration, f64) {
    let start = Instant::now();
    let mut child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the command starts");
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    loop {
        if let Ok(text) = std::fs::read_to_string(&status_path) {
            if let Some(kib) = text
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
            {
                peak_kib = peak_kib.max(kib);
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            let wall = start.elapsed();
            if !status.success() {
                let mut err = String::new();
                use std::io::Read;
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                panic!("the command failed: {err}");
            }
            return (wall, peak_kib as f64 / 1024.0);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn main() {
    let n = knob("ENVSIM_AUDIT_TRAJECTORIES", 3000);
    let steps = knob("ENVSIM_AUDIT_STEPS", 16);
    let tickets = knob("ENVSIM_AUDIT_TICKETS", 50);
    let runs = knob("ENVSIM_AUDIT_RUNS", 3);
    // `ENVSIM_AUDIT_DIR` keeps the generated files there (for profiling), else a temporary folder.
    let kept = std::env::var_os("ENVSIM_AUDIT_DIR").map(std::path::PathBuf::from);
    let temporary = tempfile::tempdir().unwrap();
    let dir_path = kept.unwrap_or_else(|| temporary.path().to_path_buf());
    std::fs::create_dir_all(&dir_path).unwrap();
    write_package(&dir_path);
    let file = dir_path.join("runs.jsonl");
    let bytes = write_file(&file, n, steps, tickets, 1);
    let mb = bytes as f64 / 1e6;
    println!(
        "{n} trajectories × {steps} steps, {tickets} tickets each: {mb:.1} MB ({} steps)",
        n * steps
    );
    let audit = |path: &Path| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_envsim"));
        c.arg("audit")
            .arg(path)
            .args(["--learn-walks", "0", "--no-replay", "--json", "--envs"])
            .arg(&dir_path);
        c
    };
    let python = std::env::var("ENVSIM_AUDIT_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut best = (Duration::MAX, 0.0f64);
    let mut parse_best = Duration::MAX;
    for _ in 0..runs {
        let (wall, peak) = measure(&mut audit(&file));
        best = (best.0.min(wall), best.1.max(peak));
        let (wall, _) = measure(
            Command::new(&python)
                .arg("-c")
                .arg("import json,sys\nfor line in open(sys.argv[1], 'rb'):\n    json.loads(line)")
                .arg(&file),
        );
        parse_best = parse_best.min(wall);
    }
    let rate = |d: Duration| mb / d.as_secs_f64();
    println!(
        "envsim audit: {:.2} s, {:.1} MB/s, peak {:.0} MiB (best of {runs})",
        best.0.as_secs_f64(),
        rate(best.0),
        best.1
    );
    println!(
        "python json.loads only: {:.2} s, {:.1} MB/s; envsim audit / python parse = {:.2}×",
        parse_best.as_secs_f64(),
        rate(parse_best),
        rate(best.0) / rate(parse_best)
    );
    if knob("ENVSIM_AUDIT_SCALE", 0) == 1 {
        let big = dir_path.join("runs10.jsonl");
        let big_bytes = write_file(&big, n, steps, tickets, 10);
        let (wall, peak) = measure(&mut audit(&big));
        println!(
            "10× the steps ({} steps, {:.1} MB): {:.2} s, {:.1} MB/s, peak {:.0} MiB",
            10 * n * steps,
            big_bytes as f64 / 1e6,
            wall.as_secs_f64(),
            big_bytes as f64 / 1e6 / wall.as_secs_f64(),
            peak
        );
    }
}
