//! OpenAPI 3.1 documents generated from environment packages: what a user of an API without
//! code (an audit with `--spec`, a simulator given only a description) would be handed.
//!
//! Tools become REST operations whose method and path say what they do, learned by running
//! them (executed walks and the [`Effects`] learned from them), so a reader of the document
//! ([`envsim_core::apispec`]) finds the same effects from its structure:
//!
//! | the tool | operation |
//! |---|---|
//! | creates resources of one type | `POST /things` (nested: `POST /owners/{owner_id}/things`) |
//! | deletes the resource an argument names | `DELETE /things/{thing_id}` |
//! | reads the resource an argument names | `GET /things/{thing_id}` |
//! | only reads, naming none | `GET /tool_name` |
//! | updates the resource an argument names | `PATCH /things/{thing_id}` (`update_*`, `edit_*`, `modify_*`), else the custom method `POST /things/{thing_id}:tool_name` |
//! | changes the state otherwise | the custom method `POST /env_name:tool_name` of the environment as a whole |
//! | creates or deletes, the type never seen | `POST /tool_name` (a remote procedure: its name says what it does) |
//!
//! An argument *names* a resource when its value is the id of a resource of the state the
//! call ran on (dates excepted), twice at least and in a quarter of the tool's calls (half,
//! for an argument not named like an id); a tool acts on the type its name says (`assign_ticket` → `tickets`), else on
//! the type its arguments name most often. A nested type whose parents no argument
//! names is written flat (`/things`). Two tools landing on one method and path: a later
//! creator creates under the resource it acts on (`POST /accounts/{account_id}/transactions`),
//! any other later one becomes the custom method `…:tool_name` of that path. Path arguments are path parameters;
//! the other arguments are query parameters of GET and DELETE and the JSON request body of the
//! rest, with the manifest's schemas and `required`. Responses: `200` with the schema learned
//! from the successful observations ([`SchemaLearner`]; numbers are `number`, a field is
//! required when at least [`REQUIRED_EVIDENCE`] objects all had it), `default` with the
//! schema of the failures, and (when failures were seen) `500`, the text of an exception the
//! code raised.

use envsim_core::audit::observed::{id_noun, role, singular, tool_noun, Role};
use envsim_core::audit::{resources, AuditTrajectory, Effects};
use envsim_core::schema_learn::SchemaLearner;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Objects a response position must have been seen in before a field all of them had is
/// declared required (fewer: nothing there is required).
pub const REQUIRED_EVIDENCE: usize = 3;

/// What running a tool showed.
#[derive(Default)]
struct Seen {
    calls: usize,
    created: BTreeMap<String, usize>,
    deleted: BTreeMap<String, usize>,
    /// (argument, type of the resource its value names) → calls.
    names: BTreeMap<(String, String), usize>,
    successes: SchemaLearner,
    failures: SchemaLearner,
}

impl Seen {
    /// Whether `argument`, naming a resource in `count` calls, names it often enough not to
    /// be a coincidence (a value that happens to be some record's key): twice at least, and in
    /// a quarter of the calls for an argument named like an id (`ticket_id`), half for others.
    fn names_often(&self, argument: &str, count: usize) -> bool {
        let share = if id_noun(argument).is_some() { 4 } else { 2 };
        count >= 2 && count * share >= self.calls
    }

    /// The argument naming a resource of `kind` most often.
    fn argument_naming(&self, kind: &str) -> Option<&str> {
        self.names
            .iter()
            .filter(|((a, k), count)| k == kind && self.names_often(a, **count))
            .max_by_key(|(_, count)| **count)
            .map(|((argument, _), _)| argument.as_str())
    }

    /// The (argument, type) a tool acts on: of the types its arguments name, the one its name
    /// says (`assign_ticket` → tickets), else the one named most often.
    fn acted_on(&self, tool: &str) -> Option<(&str, &str)> {
        let noun = tool_noun(tool);
        let says = |kind: &str| {
            let last = kind.rsplit('/').next().unwrap_or(kind);
            let last = singular(last);
            !last.is_empty() && (noun == last || noun.ends_with(&last))
        };
        let named = || {
            self.names
                .iter()
                .filter(|((a, _), count)| self.names_often(a, **count))
                .map(|((a, k), count)| (a, k, *count))
        };
        named()
            .filter(|(_, k, _)| says(k))
            .max_by_key(|(_, _, count)| *count)
            .or_else(|| named().max_by_key(|(_, _, count)| *count))
            .map(|(a, k, _)| (a.as_str(), k.as_str()))
    }
}

fn most(counts: &BTreeMap<String, usize>) -> Option<&str> {
    counts
        .iter()
        .max_by_key(|(_, count)| **count)
        .map(|(k, _)| k.as_str())
}

/// What the walks show of every tool.
fn observe(runs: &[AuditTrajectory]) -> HashMap<String, Seen> {
    let mut seen: HashMap<String, Seen> = HashMap::new();
    for run in runs {
        let mut before = &run.initial_state;
        let mut held = resources(before);
        let mut ids = id_index(&held);
        for step in &run.steps {
            let s = seen.entry(step.tool.clone()).or_default();
            s.calls += 1;
            for (argument, value) in &step.arguments {
                let text = match value {
                    // A moment (`as_of`) is not a name, even where records are keyed by time.
                    Value::String(text) if looks_like_date(text) => continue,
                    Value::String(text) => text.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => continue,
                };
                for kind in ids.get(text.as_str()).into_iter().flatten() {
                    *s.names
                        .entry((argument.clone(), (*kind).to_owned()))
                        .or_default() += 1;
                }
            }
            match step.success {
                Some(true) => s.successes.add(&step.observation),
                Some(false) => s.failures.add(&step.observation),
                None => {}
            }
            if !std::sync::Arc::ptr_eq(before, &step.state_after) && **before != *step.state_after {
                let after = resources(&step.state_after);
                for key in after.keys().filter(|k| !held.contains_key(*k)) {
                    *s.created.entry(key.0.clone()).or_default() += 1;
                }
                for key in held.keys().filter(|k| !after.contains_key(*k)) {
                    *s.deleted.entry(key.0.clone()).or_default() += 1;
                }
                held = after;
                ids = id_index(&held);
            }
            before = &step.state_after;
        }
    }
    seen
}

/// Whether a text starts like an ISO 8601 date (`2025-06-10`).
fn looks_like_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit)
}

/// Resource types by id.
fn id_index<'s>(
    held: &'s BTreeMap<(String, String), &Value>,
) -> HashMap<&'s str, BTreeSet<&'s str>> {
    let mut out: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for (kind, id) in held.keys() {
        out.entry(id.as_str()).or_default().insert(kind.as_str());
    }
    out
}

/// A tool's method, path segments and path arguments.
struct Route {
    method: &'static str,
    segments: Vec<String>,
}

/// The path segments of a resource type's collection (`accounts/*/cards` with an argument
/// naming the account → `accounts`, `{account_id}`, `cards`; flat `cards` when none does).
fn collection(kind: &str, seen: &Seen, taken: &BTreeSet<&str>) -> Vec<String> {
    let parts: Vec<&str> = kind.split('/').collect();
    let mut segments = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        if *part != "*" {
            segments.push((*part).to_owned());
            continue;
        }
        let parent = parts[..i].join("/");
        match seen.argument_naming(&parent) {
            Some(argument) if !taken.contains(argument) => segments.push(format!("{{{argument}}}")),
            // No argument names the parent: the type is written flat.
            _ => {
                let last = parts.iter().rposition(|p| *p == "*").unwrap_or(0);
                return parts[last + 1..].iter().map(|p| (*p).to_owned()).collect();
            }
        }
    }
    segments
}

/// The item path of the resource `argument` names (`/things/{thing_id}`).
fn item(kind: &str, argument: &str, seen: &Seen) -> Vec<String> {
    let mut segments = collection(kind, seen, &BTreeSet::from([argument]));
    segments.push(format!("{{{argument}}}"));
    segments
}

fn updates_by_name(tool: &str) -> bool {
    let first = tool.split(['_', '-']).next().unwrap_or_default();
    ["update", "edit", "modify", "patch"].contains(&first.to_ascii_lowercase().as_str())
}

fn route(env: &str, tool: &str, effects: &Effects, seen: &Seen) -> Route {
    let rpc = |method| Route {
        method,
        segments: vec![tool.to_owned()],
    };
    // A change of the environment as a whole: a custom method of the environment itself, so
    // the description says it changes the state even where its name suggests a read.
    let whole = || Route {
        method: "POST",
        segments: vec![format!("{env}:{tool}")],
    };
    match role(&effects.of(tool)) {
        Role::Create => match most(&seen.created) {
            Some(kind) => Route {
                method: "POST",
                segments: collection(kind, seen, &BTreeSet::new()),
            },
            None => rpc("POST"),
        },
        Role::Delete => match most(&seen.deleted) {
            Some(kind) => Route {
                method: "DELETE",
                segments: match seen.argument_naming(kind) {
                    Some(argument) => item(kind, argument, seen),
                    None => collection(kind, seen, &BTreeSet::new()),
                },
            },
            None => rpc("POST"),
        },
        Role::Read => match seen.acted_on(tool) {
            Some((argument, kind)) => Route {
                method: "GET",
                segments: item(kind, argument, seen),
            },
            None => rpc("GET"),
        },
        Role::Change => match seen.acted_on(tool) {
            Some((argument, kind)) if updates_by_name(tool) => Route {
                method: "PATCH",
                segments: item(kind, argument, seen),
            },
            Some((argument, kind)) => {
                let mut segments = item(kind, argument, seen);
                custom(&mut segments, tool);
                Route {
                    method: "POST",
                    segments,
                }
            }
            None => whole(),
        },
    }
}

/// Makes a path the custom method `tool` of its last segment.
fn custom(segments: &mut [String], tool: &str) {
    if let Some(last) = segments.last_mut() {
        last.push(':');
        last.push_str(tool);
    }
}

/// The response schema learned from `learner` with the evidence rule of the module doc:
/// numbers as `number`, `required` only where enough objects were seen.
fn response_schema(learner: &SchemaLearner) -> Value {
    let mut schema = learner.schema_with(REQUIRED_EVIDENCE);
    widen(&mut schema);
    schema
}

/// Widens a learned schema where the walks' answers say less than its types would promise:
/// `integer` → `number` (a count seen whole may be fractional next time), and a field only
/// ever seen `null` gets no type at all (τ²'s `status` of a reservation nobody cancelled, a
/// `return_items` of an order nobody returned: null says nothing of what the field holds).
fn widen(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    if map.get("type").is_some_and(|t| t == "null") {
        map.remove("type");
    }
    match map.get_mut("type") {
        Some(Value::String(s)) if s == "integer" => *s = "number".to_owned(),
        Some(Value::Array(types)) => {
            if types.iter().any(|t| t == "number") {
                types.retain(|t| t != "integer");
            }
            for t in types.iter_mut().filter(|t| *t == "integer") {
                *t = json!("number");
            }
        }
        _ => {}
    }
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        properties.values_mut().for_each(widen);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = map.get_mut(key) {
            widen(sub);
        }
    }
}

/// What a description is generated from: an environment's name, what it is, its rules and
/// its tools as OpenAI function schemas (a package manifest's fields of those names).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ApiOutline {
    /// The environment's name (the document's title).
    pub name: String,
    /// What it is.
    #[serde(default)]
    pub description: String,
    /// Its rules, stated in the description.
    #[serde(default)]
    pub rules: Vec<String>,
    /// Its tools.
    #[serde(default)]
    pub tools: Vec<Value>,
}

/// The OpenAPI 3.1 document of an environment (`manifest`: a package's [`ApiOutline`]): its tools as operations (see the module doc),
/// learned from `runs` (executed walks of the package) and the `effects` learned from them.
pub fn describe(manifest: &ApiOutline, runs: &[AuditTrajectory], effects: &Effects) -> Value {
    let seen = observe(runs);
    let nothing = Seen::default();
    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for tool in &manifest.tools {
        let function = tool.get("function").unwrap_or(tool);
        let Some(name) = function.get("name").and_then(Value::as_str) else {
            continue;
        };
        let s = seen.get(name).unwrap_or(&nothing);
        let mut route = route(&manifest.name, name, effects, s);
        let mut path = format!("/{}", route.segments.join("/"));
        let method = route.method.to_ascii_lowercase();
        let taken = |path: &str| paths.get(path).is_some_and(|p| p.contains_key(&method));
        if taken(&path) {
            // A second creator of a type creates it under the resource it acts on
            // (`POST /accounts/{account_id}/transactions`), else is a custom method.
            let nested = match (role(&effects.of(name)), s.acted_on(name)) {
                (Role::Create, Some((argument, kind))) => {
                    let mut segments = item(kind, argument, s);
                    segments.extend(route.segments.last().cloned());
                    Some(segments).filter(|segs| !taken(&format!("/{}", segs.join("/"))))
                }
                _ => None,
            };
            match nested {
                Some(segments) => route.segments = segments,
                None => custom(&mut route.segments, name),
            }
            path = format!("/{}", route.segments.join("/"));
        }
        let operation = operation(name, function, &route, s);
        paths.entry(path).or_default().insert(method, operation);
    }
    let mut description = manifest.description.clone();
    if !manifest.rules.is_empty() {
        description.push_str("\n\nRules:\n");
        for rule in &manifest.rules {
            description.push_str(&format!("- {rule}\n"));
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": manifest.name,
            "version": "1.0.0",
            "description": description,
        },
        "paths": paths,
    })
}

/// The tools whose operation in `doc` reads back (method and path, [`envsim_core::apispec`])
/// as another role than running them showed: (tool, role shown, role read back).
pub fn role_mismatches(doc: &Value, effects: &Effects) -> Vec<(String, Role, Role)> {
    let Ok(spec) = envsim_core::apispec::parse_spec(doc) else {
        return Vec::new();
    };
    let declared: BTreeMap<String, Vec<_>> = spec
        .tools
        .iter()
        .map(|(name, t)| (name.clone(), t.effects()))
        .filter(|(_, e)| !e.is_empty())
        .collect();
    let read = Effects::default().with_annotations(&declared);
    spec.tools
        .keys()
        .map(|name| (name.clone(), role(&effects.of(name)), role(&read.of(name))))
        .filter(|(_, shown, back)| shown != back)
        .collect()
}

/// One operation: parameters, request body and responses.
fn operation(name: &str, function: &Value, route: &Route, seen: &Seen) -> Value {
    let schema = function.get("parameters");
    let properties = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: BTreeSet<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let in_path: BTreeSet<String> = route
        .segments
        .iter()
        .filter_map(|s| {
            let open = s.find('{')?;
            let close = s.find('}')?;
            Some(s[open + 1..close].to_owned())
        })
        .collect();
    let string = json!({"type": "string"});
    let mut parameters: Vec<Value> = in_path
        .iter()
        .map(|p| {
            json!({"name": p, "in": "path", "required": true,
                   "schema": properties.get(p).unwrap_or(&string)})
        })
        .collect();
    let rest: Map<String, Value> = properties
        .iter()
        .filter(|(k, _)| !in_path.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let rest_required: Vec<&str> = required
        .iter()
        .copied()
        .filter(|r| rest.contains_key(*r))
        .collect();
    let mut op = Map::new();
    op.insert("operationId".into(), json!(name));
    if let Some(d) = function.get("description").and_then(Value::as_str) {
        op.insert("description".into(), json!(d));
    }
    if matches!(route.method, "GET" | "DELETE") {
        for (key, value) in &rest {
            parameters.push(json!({"name": key, "in": "query",
                "required": required.contains(key.as_str()), "schema": value}));
        }
    } else if !rest.is_empty() {
        let mut body = json!({"type": "object", "properties": rest});
        if !rest_required.is_empty() {
            body["required"] = json!(rest_required);
        }
        if let Some(extra) = schema.and_then(|s| s.get("additionalProperties")) {
            body["additionalProperties"] = extra.clone();
        }
        op.insert(
            "requestBody".into(),
            json!({"required": !rest_required.is_empty(),
                   "content": {"application/json": {"schema": body}}}),
        );
    }
    if !parameters.is_empty() {
        op.insert("parameters".into(), Value::Array(parameters));
    }
    let answer = |description: &str, learner: &SchemaLearner| {
        if learner.examples() == 0 {
            json!({ "description": description })
        } else {
            json!({"description": description,
                   "content": {"application/json": {"schema": response_schema(learner)}}})
        }
    };
    let mut responses = json!({
        "200": answer("The tool's answer on success.", &seen.successes),
        "default": answer("The tool's answer on failure.", &seen.failures),
    });
    // Where failures have a shape, an exception's text is one more (without one, nothing
    // about failures is declared, and nothing is checked).
    if seen.failures.examples() > 0 {
        responses["500"] = json!({"description": "The tool raised an exception: its text.",
            "content": {"application/json": {"schema": {"type": "string"}}}});
    }
    op.insert("responses".into(), responses);
    Value::Object(op)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envsim_core::apispec::parse_spec;
    use envsim_core::audit::AuditStep;
    use std::sync::Arc;

    fn tool(name: &str, props: Value, required: Value) -> Value {
        json!({"type": "function", "function": {"name": name, "description": format!("{name}."),
               "parameters": {"type": "object", "properties": props, "required": required}}})
    }

    fn manifest(tools: Vec<Value>) -> ApiOutline {
        serde_json::from_value(json!({"name": "desk", "domain": "test",
            "description": "Tickets.", "class_name": "Desk", "rules": ["Be kind."],
            "tools": tools}))
        .unwrap()
    }

    /// A walk from `state` through `steps` (tool, arguments, observation, success, state after).
    fn walk(state: Value, steps: Vec<(&str, Value, Value, bool, Value)>) -> AuditTrajectory {
        AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(state),
            steps: steps
                .into_iter()
                .map(|(tool, args, observation, success, after)| AuditStep {
                    tool: tool.into(),
                    arguments: args.as_object().unwrap().clone(),
                    observation,
                    success: Some(success),
                    state_after: Arc::new(after),
                })
                .collect(),
        }
    }

    fn routes(doc: &Value) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                let id = op["operationId"].as_str().unwrap().to_owned();
                out.push((id, method.to_uppercase(), path.clone()));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn routes_say_what_tools_do_and_read_back_the_same() {
        let id = json!({"ticket_id": {"type": "string"}});
        let tools = vec![
            tool(
                "create_ticket",
                json!({"title": {"type": "string"}}),
                json!(["title"]),
            ),
            tool("get_ticket", id.clone(), json!(["ticket_id"])),
            tool("close_ticket", id.clone(), json!(["ticket_id"])),
            tool(
                "update_ticket",
                json!({"ticket_id": {"type": "string"},
                "title": {"type": "string"}}),
                json!(["ticket_id"]),
            ),
            tool("delete_ticket", id.clone(), json!(["ticket_id"])),
            tool(
                "add_note",
                json!({"ticket_id": {"type": "string"},
                "text": {"type": "string"}}),
                json!(["ticket_id", "text"]),
            ),
            tool(
                "open_ticket",
                json!({"title": {"type": "string"}}),
                json!(["title"]),
            ),
            tool(
                "sweep",
                json!({"as_of": {"type": "string"}}),
                json!(["as_of"]),
            ),
            tool("stats", json!({}), json!([])),
        ];
        let t = |title: &str, status: &str| json!({"title": title, "status": status});
        let s0 = json!({"tickets": {"T1": t("a", "open"), "2024-01-01": t("d", "open")}});
        let mut s1 = s0.clone();
        s1["tickets"]["T2"] = t("b", "open");
        let mut s2 = s1.clone();
        s2["tickets"]["T2"]["status"] = json!("closed");
        let mut s3 = s2.clone();
        s3["tickets"]["T2"]["title"] = json!("c");
        let mut s4 = s3.clone();
        s4["tickets"].as_object_mut().unwrap().remove("T1");
        let mut s5 = s4.clone();
        s5["tickets"]["T2"]["notes"] = json!({"N1": {"text": "hi"}});
        let mut s6 = s5.clone();
        s6["tickets"]["T3"] = t("e", "open");
        let mut s7 = s6.clone();
        s7["swept"] = json!(true);
        let ok = |v: Value| v;
        let run = walk(
            s0.clone(),
            vec![
                (
                    "create_ticket",
                    json!({"title": "b"}),
                    ok(json!({"id": "T2", "n": 1})),
                    true,
                    s1.clone(),
                ),
                (
                    "get_ticket",
                    json!({"ticket_id": "T2"}),
                    json!({"title": "b"}),
                    true,
                    s1.clone(),
                ),
                (
                    "get_ticket",
                    json!({"ticket_id": "T1"}),
                    json!({"title": "a"}),
                    true,
                    s1.clone(),
                ),
                (
                    "get_ticket",
                    json!({"ticket_id": "T9"}),
                    json!({"error": "no T9"}),
                    false,
                    s1.clone(),
                ),
                (
                    "close_ticket",
                    json!({"ticket_id": "T2"}),
                    json!({"ok": true}),
                    true,
                    s2.clone(),
                ),
                (
                    "close_ticket",
                    json!({"ticket_id": "T2"}),
                    json!({"ok": true}),
                    true,
                    s2.clone(),
                ),
                (
                    "update_ticket",
                    json!({"ticket_id": "T2", "title": "c"}),
                    json!({}),
                    true,
                    s3.clone(),
                ),
                (
                    "update_ticket",
                    json!({"ticket_id": "T2", "title": "c"}),
                    json!({}),
                    true,
                    s3.clone(),
                ),
                (
                    "delete_ticket",
                    json!({"ticket_id": "T1"}),
                    json!({}),
                    true,
                    s4.clone(),
                ),
                (
                    "delete_ticket",
                    json!({"ticket_id": "T2"}),
                    json!({"error": "open notes"}),
                    false,
                    s4.clone(),
                ),
                (
                    "add_note",
                    json!({"ticket_id": "T2", "text": "hi"}),
                    json!({}),
                    true,
                    s5.clone(),
                ),
                (
                    "add_note",
                    json!({"ticket_id": "T2", "text": "hi"}),
                    json!({"error": "dup"}),
                    false,
                    s5.clone(),
                ),
                (
                    "open_ticket",
                    json!({"title": "e"}),
                    json!({"id": "T3"}),
                    true,
                    s6.clone(),
                ),
                // A date that is some record's key is not a name.
                (
                    "sweep",
                    json!({"as_of": "2024-01-01"}),
                    json!({}),
                    true,
                    s7.clone(),
                ),
                (
                    "sweep",
                    json!({"as_of": "2024-01-01"}),
                    json!({}),
                    true,
                    s7.clone(),
                ),
                ("stats", json!({}), json!({"open": 2}), true, s7.clone()),
            ],
        );
        let runs = vec![run];
        let effects = Effects::learn(&runs);
        let m = manifest(tools);
        let doc = describe(&m, &runs, &effects);
        let r = |id: &str, method: &str, path: &str| {
            (id.to_owned(), method.to_owned(), path.to_owned())
        };
        assert_eq!(
            routes(&doc),
            vec![
                r("add_note", "POST", "/tickets/{ticket_id}/notes"),
                r("close_ticket", "POST", "/tickets/{ticket_id}:close_ticket"),
                r("create_ticket", "POST", "/tickets"),
                r("delete_ticket", "DELETE", "/tickets/{ticket_id}"),
                r("get_ticket", "GET", "/tickets/{ticket_id}"),
                // The second tool creating tickets gets a custom method of the same path.
                r("open_ticket", "POST", "/tickets:open_ticket"),
                r("stats", "GET", "/stats"),
                r("sweep", "POST", "/desk:sweep"),
                r("update_ticket", "PATCH", "/tickets/{ticket_id}"),
            ]
        );
        assert_eq!(
            doc["info"]["description"],
            "Tickets.\n\nRules:\n- Be kind.\n"
        );
        // Read back, every tool takes the arguments its manifest declares.
        let spec = parse_spec(&doc).unwrap();
        for t in &m.tools {
            let f = &t["function"];
            let name = f["name"].as_str().unwrap();
            let read = &spec.tools[name].parameters;
            let keys = |v: &Value| -> BTreeSet<String> {
                v["properties"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .cloned()
                    .collect()
            };
            let required = |v: &Value| -> BTreeSet<String> {
                v.get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|s| s.as_str().unwrap().to_owned())
                    .collect()
            };
            assert_eq!(keys(read), keys(&f["parameters"]), "{name}");
            assert_eq!(required(read), required(&f["parameters"]), "{name}");
        }
        // ... and does to resources what running it showed (but for the collision).
        let read_role = |name: &str| {
            let declared = BTreeMap::from([(name.to_owned(), spec.tools[name].effects())]);
            role(&Effects::default().with_annotations(&declared).of(name))
        };
        for name in [
            "add_note",
            "close_ticket",
            "create_ticket",
            "delete_ticket",
            "get_ticket",
            "update_ticket",
            "stats",
            "sweep",
        ] {
            assert_eq!(read_role(name), role(&effects.of(name)), "{name}");
        }
        assert_eq!(read_role("open_ticket"), Role::Change);
        assert_eq!(
            role_mismatches(&doc, &effects),
            vec![("open_ticket".to_owned(), Role::Create, Role::Change)]
        );
        // Responses: success schemas learned (numbers widened), failures' schema under default.
        let get = &doc["paths"]["/tickets/{ticket_id}"]["get"];
        assert_eq!(
            get["responses"]["200"]["content"]["application/json"]["schema"],
            json!({"type": "object", "properties": {"title": {"type": "string"}}})
        );
        assert_eq!(
            get["responses"]["default"]["content"]["application/json"]["schema"],
            json!({"type": "object", "properties": {"error": {"type": "string"}}})
        );
        let create = &doc["paths"]["/tickets"]["post"];
        assert_eq!(
            create["responses"]["200"]["content"]["application/json"]["schema"]["properties"]["n"],
            json!({"type": "number"})
        );
        assert_eq!(create["requestBody"]["required"], true);
        assert_eq!(get["parameters"][0]["in"], "path");
    }

    #[test]
    fn nested_types_use_the_argument_naming_the_parent() {
        let s0 = json!({"boards": {"B1": {"cards": {"C1": {"t": "x"}}}}});
        let mut s1 = s0.clone();
        s1["boards"]["B1"]["cards"]["C2"] = json!({"t": "y"});
        let tools = vec![tool(
            "add_card",
            json!({"board_id": {"type": "string"},
            "t": {"type": "string"}}),
            json!(["board_id", "t"]),
        )];
        let runs = vec![walk(
            s0.clone(),
            vec![
                (
                    "add_card",
                    json!({"board_id": "B1", "t": "y"}),
                    json!({}),
                    true,
                    s1.clone(),
                ),
                (
                    "add_card",
                    json!({"board_id": "B1", "t": "y"}),
                    json!({}),
                    true,
                    s1.clone(),
                ),
            ],
        )];
        let doc = describe(&manifest(tools), &runs, &Effects::learn(&runs));
        assert_eq!(
            routes(&doc),
            vec![(
                "add_card".to_owned(),
                "POST".to_owned(),
                "/boards/{board_id}/cards".to_owned()
            )]
        );
        let spec = parse_spec(&doc).unwrap();
        assert_eq!(
            spec.tools["add_card"].resource().as_deref(),
            Some("boards/*/cards")
        );
        // Without an argument naming the board, the type is written flat.
        let tools = vec![tool(
            "add_card",
            json!({"t": {"type": "string"}}),
            json!(["t"]),
        )];
        let runs = vec![walk(
            s0,
            vec![("add_card", json!({"t": "y"}), json!({}), true, s1)],
        )];
        let doc = describe(&manifest(tools), &runs, &Effects::learn(&runs));
        assert!(doc["paths"].get("/cards").is_some(), "{doc}");
    }

    #[test]
    fn a_field_only_seen_null_is_left_untyped_and_integers_widen() {
        let mut learner = envsim_core::schema_learn::SchemaLearner::default();
        for n in 0..3 {
            learner.add(&json!({"status": null, "n": n, "items": [{"note": null, "k": 1}]}));
        }
        let schema = response_schema(&learner);
        let props = &schema["properties"];
        assert_eq!(props["status"], json!({}), "{schema}");
        assert_eq!(props["n"]["type"], "number", "{schema}");
        assert_eq!(
            props["items"]["items"]["properties"]["note"],
            json!({}),
            "{schema}"
        );
        // Null beside another type stays as learned.
        let mut mixed = envsim_core::schema_learn::SchemaLearner::default();
        mixed.add(&json!({"status": null}));
        mixed.add(&json!({"status": "cancelled"}));
        let schema = response_schema(&mixed);
        assert_eq!(
            schema["properties"]["status"]["type"],
            json!(["null", "string"]),
            "{schema}"
        );
    }
}
