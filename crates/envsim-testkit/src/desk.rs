//! A small ticket desk written to a folder as an environment package, for tests that run real
//! environment code through the executor, sessions, the CLI and the server. Its tools:
//! `create_ticket(title)`, `close_ticket(ticket_id)` (a closed ticket cannot close again, so
//! every successful close changes the state), `get_ticket(ticket_id)` and `grow(size)`, which
//! adds a ticket with a title of `size` characters (for state-size limits).

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The environment's code.
pub const CODE: &str = r#"
class Desk:
    def __init__(self, init_config: dict):
        self.tickets = init_config.get("tickets", {})
        self.next_id = init_config.get("next_id", 1)

    def create_ticket(self, title: str) -> dict:
        tid = "T%d" % self.next_id
        self.next_id += 1
        self.tickets[tid] = {"title": title, "status": "open"}
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

    def grow(self, size: int) -> dict:
        self.tickets["BIG"] = {"title": "x" * size, "status": "open"}
        return {"success": True}
"#;

/// Its only initial state: ticket T1 open, the next id 2.
pub fn initial_state() -> Value {
    json!({"tickets": {"T1": {"title": "a", "status": "open"}}, "next_id": 2})
}

/// Writes the package `desk` under `root` (code, manifest, one state) and returns its folder.
pub fn write(root: &Path) -> std::io::Result<PathBuf> {
    let pkg = root.join("desk");
    std::fs::create_dir_all(pkg.join("states"))?;
    std::fs::write(pkg.join("env.py"), CODE)?;
    let tool = |name: &str, props: Value, required: Value| {
        json!({"type": "function", "function": {"name": name, "description": format!("{name}."),
               "parameters": {"type": "object", "properties": props, "required": required}}})
    };
    let id = json!({"ticket_id": {"type": "string"}});
    let manifest = json!({"name": "desk", "domain": "test", "description": "Tickets.",
    "class_name": "Desk", "tools": [
        tool("create_ticket", json!({"title": {"type": "string"}}), json!(["title"])),
        tool("close_ticket", id.clone(), json!(["ticket_id"])),
        tool("get_ticket", id, json!(["ticket_id"])),
        tool("grow", json!({"size": {"type": "integer"}}), json!(["size"])),
    ]});
    std::fs::write(pkg.join("manifest.json"), manifest.to_string())?;
    std::fs::write(pkg.join("states/00.json"), initial_state().to_string())?;
    Ok(pkg)
}
