//! What tools do to resources: effects learned from executed walks ([`Effects::learn`]),
//! declared in a manifest or an API description ([`EffectAnnotation`]), or guessed from names
//! ([`ToolEffects::guess`]); the learned shape of each tool's successful responses
//! ([`ResponseShape`]); and, through [`super::implied`], what each tool's successes write.

use super::{implied, resource_refs, AuditStep, AuditTrajectory};
use crate::slice::{AttrUse, CodeSlice, KeyPart};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Where what a tool may do came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectSource {
    /// Learned from executed trajectories.
    Observed,
    /// Declared in the package's manifest (`effects`).
    Annotated,
    /// Guessed from the tool's name.
    Guessed,
    /// Read from what many transcripts of a file show (calls read back), for a tool the
    /// walks never saw succeed: weaker than executed evidence
    /// ([`super::transcript_effects`]).
    Transcripts,
}

/// What a manifest declares a tool does to one resource type (`"effects": {"close_ticket":
/// [{"resource": "tickets", "operation": "update", "id_parameter": "ticket_id"}]}`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EffectAnnotation {
    /// The resource type: the collection's path in the state (`tickets`, `accounts/*/cards`).
    pub resource: String,
    /// What the tool does to it.
    pub operation: Operation,
    /// The argument that names the resource, when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_parameter: Option<String>,
}

/// Operations of [`EffectAnnotation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Makes a new resource.
    Create,
    /// Returns one resource.
    Read,
    /// Changes a resource.
    Update,
    /// Removes a resource.
    Delete,
    /// Returns several resources.
    List,
}

/// What a tool may do.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolEffects {
    /// Resource types it creates (`"*"`: any).
    pub creates: BTreeSet<String>,
    /// Resource types it deletes (`"*"`: any).
    pub deletes: BTreeSet<String>,
    /// It never changes the state.
    pub read_only: bool,
    /// Every success changes the state.
    pub success_changes: bool,
    /// No failure changes the state.
    pub failure_keeps: bool,
    /// Every resource it deleted was named by one of its arguments.
    pub deletes_named_only: bool,
    /// The most resources it created in one call.
    pub max_created: usize,
    /// Whether `creates` is all it creates. Learned effects claim that only after a success
    /// ([`NEVER_EVIDENCE`]): a tool the walks never got right (AppWorld's
    /// `send_password_reset_code`, which mails a code only for an account that exists) may
    /// create what they never saw it create.
    pub creates_known: bool,
    /// `None`: `deletes` is all it deletes. `Some(kept)`: it may delete any type but `kept`,
    /// the types the walks saw present and untouched under at least [`NEVER_EVIDENCE`] of its
    /// successes (a `clear_cart` walked only on empty carts is no evidence that it keeps
    /// cart entries).
    pub keeps: Option<BTreeSet<String>>,
    /// The argument, not named like an id, whose value is the key of what it creates, when the
    /// walks showed that for every creation (at least [`MIN_EVIDENCE`] of them):
    /// `touch(file_name="a.txt")` makes the file `a.txt`, so a later "a.txt not found"
    /// contradicts it.
    pub created_named_by: Option<String>,
    /// What its code can reach, where the code was read ([`Effects::with_code`]): bounds
    /// what a guess or missing evidence leaves open (a `scan_ticket` whose code touches
    /// `tickets` only at `self.tickets[ticket_id]` cannot make a ticket its arguments do not
    /// name).
    pub reach: Option<CodeReach>,
    /// Its successes were seen often enough ([`MIN_EVIDENCE`]) and none created anything: what
    /// its name suggests it may create stays allowed, but its calls are changes, not creations
    /// (`open_message` marks a message read; the message it answers is no new one).
    pub never_seen_creating: bool,
    /// Its walks saw it succeed, made again on what it just did, without changing anything
    /// (`grow(size=4)` twice): such a repeat changing nothing is no dropped write.
    pub repeat_keeps: bool,
    /// Where this came from.
    pub source: EffectSource,
}

/// What one tool's code can touch, read from the code itself ([`crate::slice`]): the tables
/// (top-level state keys) it names, and for each the entries it can address.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CodeReach {
    /// Per table: `None`, any entry; `Some(keys)`, only entries keyed by one of these keys
    /// computed from the call's arguments.
    tables: BTreeMap<String, Option<BTreeSet<Vec<KeyPart>>>>,
}

impl CodeReach {
    /// The reach of a code slice; `None` when the slicer could not bound it (a fallback to the
    /// whole code, or a database used other than by table).
    pub fn of(code: &CodeSlice) -> Option<CodeReach> {
        if code.fallback.is_some() || code.database_whole.is_some() {
            return None;
        }
        let tables = code
            .attributes
            .iter()
            .map(|(table, used)| {
                let keys = match used {
                    AttrUse::Whole => None,
                    AttrUse::Keys(parameters) => Some(
                        parameters
                            .iter()
                            .map(|p| vec![KeyPart::Arg(p.clone())])
                            .collect(),
                    ),
                    AttrUse::Entries(keys) => Some(keys.clone()),
                };
                (table.clone(), keys)
            })
            .collect();
        Some(CodeReach { tables })
    }

    /// Whether the code can change a record of the type `noun` names (`bin`: the `bins`
    /// table) keyed `id`, on a call with `arguments`.
    pub fn can_touch_noun(&self, noun: &str, id: &str, arguments: &Map<String, Value>) -> bool {
        (self.tables.keys())
            .filter(|table| super::nouns::holds(table, noun))
            .any(|table| self.can_touch(table, id, arguments))
    }

    /// Whether the code can make or remove the top-level resource `kind`/`id` on a call with
    /// `arguments`: its table is one the code names, and it is any entry there or one keyed by
    /// what the arguments compute (a key whose argument is missing counts as reachable).
    pub fn can_touch(&self, kind: &str, id: &str, arguments: &Map<String, Value>) -> bool {
        let table = kind.split('/').next().unwrap_or(kind);
        match self.tables.get(table) {
            None => false,
            Some(None) => true,
            Some(Some(keys)) => keys
                .iter()
                .any(|parts| key_of(parts, arguments).is_none_or(|key| key == id)),
        }
    }
}

/// The key `parts` compute from `arguments` (`None`: an argument it needs is missing or not
/// text or a whole number).
fn key_of(parts: &[KeyPart], arguments: &Map<String, Value>) -> Option<String> {
    let text = |name: &str| arguments.get(name).and_then(implied::id_text);
    let mut key = String::new();
    for part in parts {
        match part {
            KeyPart::Text(t) => key.push_str(t),
            KeyPart::Arg(p) => key.push_str(&text(p)?),
            KeyPart::Lower(p) => key.push_str(&text(p)?.to_ascii_lowercase()),
            KeyPart::Upper(p) => key.push_str(&text(p)?.to_ascii_uppercase()),
            KeyPart::Strip(p) => key.push_str(text(p)?.trim()),
        }
    }
    Some(key)
}

/// Name prefixes of tools that create, delete or only read.
const CREATE_WORDS: &[&str] = &[
    "create", "add", "new", "register", "open", "book", "place", "insert", "make", "submit",
    "issue", "schedule", "enroll", "post", "upload",
];
const DELETE_WORDS: &[&str] = &["delete", "remove", "drop", "purge", "destroy", "erase"];
const READ_WORDS: &[&str] = &[
    "get", "list", "search", "find", "view", "show", "read", "check", "count", "lookup", "query",
    "describe", "fetch", "browse", "inspect",
];

impl ToolEffects {
    /// The documented guess from a tool's name: its first word (`create_ticket` → creates any
    /// type; `delete_*`/`remove_*` → deletes any type; `get_*`/`list_*`/… → read-only);
    /// anything else may change the state, and what it may create or delete is not known.
    pub fn guess(tool: &str) -> ToolEffects {
        let first = tool
            .split(|c: char| c == '_' || c == '-' || c.is_uppercase())
            .find(|w| !w.is_empty())
            .unwrap_or_default()
            .to_lowercase();
        let any = || BTreeSet::from(["*".to_owned()]);
        let creates = CREATE_WORDS.contains(&first.as_str());
        let deletes = DELETE_WORDS.contains(&first.as_str());
        let read_only = READ_WORDS.contains(&first.as_str());
        ToolEffects {
            creates: if creates { any() } else { BTreeSet::new() },
            deletes: if deletes { any() } else { BTreeSet::new() },
            read_only,
            success_changes: creates || deletes,
            failure_keeps: true,
            deletes_named_only: false,
            max_created: usize::MAX,
            // A name that neither creates, deletes nor reads says nothing of what it makes or
            // removes (`send_password_reset_code` mails a code); one that reads, creates or
            // deletes is taken at its word.
            creates_known: read_only || creates || deletes,
            keeps: (!read_only && !creates && !deletes).then(BTreeSet::new),
            created_named_by: None,
            reach: None,
            never_seen_creating: false,
            repeat_keeps: false,
            source: EffectSource::Guessed,
        }
    }

    /// The effects a manifest declares for a tool: the types it creates and deletes; read-only
    /// when it only reads or lists; its successes always change the state when it creates or
    /// deletes; it deletes only what its arguments name when every delete names its
    /// `id_parameter`; it creates one resource of each declared type at most.
    pub fn annotated(annotations: &[EffectAnnotation]) -> ToolEffects {
        let of = |op: Operation| -> BTreeSet<String> {
            annotations
                .iter()
                .filter(|a| a.operation == op)
                .map(|a| a.resource.clone())
                .collect()
        };
        let (creates, deletes) = (of(Operation::Create), of(Operation::Delete));
        ToolEffects {
            read_only: annotations
                .iter()
                .all(|a| matches!(a.operation, Operation::Read | Operation::List)),
            success_changes: !creates.is_empty() || !deletes.is_empty(),
            failure_keeps: true,
            deletes_named_only: !deletes.is_empty()
                && annotations
                    .iter()
                    .filter(|a| a.operation == Operation::Delete)
                    .all(|a| a.id_parameter.is_some()),
            max_created: creates.len(),
            creates,
            deletes,
            creates_known: true,
            keeps: None,
            created_named_by: None,
            reach: None,
            never_seen_creating: false,
            repeat_keeps: false,
            source: EffectSource::Annotated,
        }
    }

    /// Whether a call with `arguments` may create the top-level resource `kind`/`id`: a type
    /// it was seen (or declared) to create; else, where a guess or missing evidence leaves it
    /// open, what its code can reach.
    pub(crate) fn may_create(&self, kind: &str, id: &str, arguments: &Map<String, Value>) -> bool {
        if self.creates.contains(kind) {
            return true;
        }
        (!self.creates_known || self.creates.contains("*")) && self.reaches(kind, id, arguments)
    }

    /// [`ToolEffects::may_create`] for deleting.
    pub(crate) fn may_delete(&self, kind: &str, id: &str, arguments: &Map<String, Value>) -> bool {
        if self.deletes.contains(kind) {
            return true;
        }
        (self.deletes.contains("*") || self.keeps.as_ref().is_some_and(|kept| !kept.contains(kind)))
            && self.reaches(kind, id, arguments)
    }

    fn reaches(&self, kind: &str, id: &str, arguments: &Map<String, Value>) -> bool {
        self.reach
            .as_ref()
            .is_none_or(|reach| reach.can_touch(kind, id, arguments))
    }
}

/// Calls a learned rule about all successes (or all failures) of a tool needs.
pub(crate) const MIN_EVIDENCE: usize = 3;

/// Successes a learned claim of what a tool never creates, or never deletes of a type present,
/// needs. One: a tool that creates or deletes does so on its successes (AppWorld's
/// `send_password_reset_code` mails a code on every success), so a single success that made
/// nothing is evidence, while none is not.
pub(crate) const NEVER_EVIDENCE: usize = 1;

/// What every tool may do.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Effects {
    tools: BTreeMap<String, ToolEffects>,
    /// The shape of each tool's successful responses, learned with the effects.
    shapes: BTreeMap<String, ResponseShape>,
    /// What each tool's successes do to the fields of what they name, and its guards.
    writes: BTreeMap<String, implied::Writes>,
    /// What each tool's code can reach, where the code was read.
    reach: BTreeMap<String, CodeReach>,
    /// How many successes of each tool the effects were learned from.
    successes: BTreeMap<String, usize>,
    /// Every field name of every tool's successful responses, what judges the answers of a
    /// tool whose own shape is not known ([`Vocabulary`]).
    vocabulary: Vocabulary,
    /// What a trajectory that names none of the package's initial states is held to: the ids
    /// of every one of them ([`Effects::with_initial_states`]).
    any_initial: implied::ImpliedState,
}

/// The field names of an environment's successful responses, across its tools: how often
/// each was seen and with which types. A tool the learning walks never got right answers
/// with the environment's records (an order changed by `exchange_items` is an order that
/// `get_order` also returns), so a field name in another spelling than the environment's
/// (`orderId` where answers say `order_id`), or a field of one type everywhere answered with
/// another, departs from the environment's vocabulary even where the tool's own shape is
/// unknown.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Vocabulary {
    fields: BTreeMap<String, (usize, BTreeSet<&'static str>)>,
    /// Spelling-free form (lowercase, no `_` or `-`) → the spellings seen.
    spellings: BTreeMap<String, BTreeSet<String>>,
}

/// A field name without its spelling: `order_id`, `orderId` and `OrderID` are one name.
fn unspelled(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Calls `each` with every field name (not a key that names a thing: `U46`, `2024-06-25`)
/// of every object in a value, four levels deep, and its value.
fn each_field<'v>(value: &'v Value, depth: usize, each: &mut dyn FnMut(&'v str, &'v Value)) {
    if depth == 4 {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if !names_a_thing(key) {
                    each(key, child);
                }
                each_field(child, depth + 1, each);
            }
        }
        Value::Array(items) => {
            for item in items {
                each_field(item, depth + 1, each);
            }
        }
        _ => {}
    }
}

impl Vocabulary {
    /// Adds one successful response.
    pub fn learn(&mut self, observation: &Value) {
        each_field(observation, 0, &mut |key, child| {
            let slot = self.fields.entry(key.to_owned()).or_default();
            slot.0 += 1;
            slot.1.insert(crate::extract::type_name(child));
            self.spellings
                .entry(unspelled(key))
                .or_default()
                .insert(key.to_owned());
        });
    }

    /// Adds the fields a JSON Schema of a successful response declares (an API description's,
    /// four levels deep), each as if seen [`MIN_EVIDENCE`] times with the types it declares:
    /// what its authors wrote is a claim, not an example (`integer` is a `number`; a field
    /// declared without a type only fixes its spelling).
    pub fn declare(&mut self, schema: &Value) {
        self.declare_at(schema, 0);
    }

    fn declare_at(&mut self, schema: &Value, depth: usize) {
        if depth == 4 {
            return;
        }
        let Some(map) = schema.as_object() else {
            return;
        };
        if let Some(Value::Object(properties)) = map.get("properties") {
            for (key, child) in properties {
                if !names_a_thing(key) {
                    let slot = self.fields.entry(key.clone()).or_default();
                    slot.0 += MIN_EVIDENCE;
                    for t in declared_types(child) {
                        slot.1.insert(t);
                    }
                    self.spellings
                        .entry(unspelled(key))
                        .or_default()
                        .insert(key.clone());
                }
                self.declare_at(child, depth + 1);
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(child) = map.get(key) {
                self.declare_at(child, depth + 1);
            }
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            for child in map.get(key).and_then(Value::as_array).into_iter().flatten() {
                self.declare_at(child, depth);
            }
        }
    }

    /// How a response departs from the vocabulary: a field never seen whose name was seen in
    /// another spelling, at least [`MIN_EVIDENCE`] times; a field seen that often, always
    /// with one type, now of another (`null` fits any field).
    pub fn problems(&self, observation: &Value) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        each_field(observation, 0, &mut |key, child| {
            let problem = match self.fields.get(key) {
                None => self
                    .spellings
                    .get(&unspelled(key))
                    .into_iter()
                    .flatten()
                    .find(|other| self.fields[other.as_str()].0 >= MIN_EVIDENCE)
                    .map(|other| {
                        format!("field {key}, which the environment's answers spell {other}")
                    }),
                Some((seen, types)) => {
                    let kind = crate::extract::type_name(child);
                    (*seen >= MIN_EVIDENCE
                        && kind != "null"
                        && types.len() == 1
                        && !types.contains(kind)
                        && !types.contains("null"))
                    .then(|| {
                        let was: Vec<&str> = types.iter().copied().collect();
                        format!(
                            "{key} as a {kind}; the environment's answers always have a {}",
                            was.join(" or ")
                        )
                    })
                }
            };
            if let Some(problem) = problem {
                if !out.contains(&problem) {
                    out.push(problem);
                }
            }
        });
        out
    }

    /// Whether anything was learned.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// The JSON types a schema declares, in [`crate::extract::type_name`]'s names (`integer` is a
/// `number`; OpenAPI 3.0's `nullable` adds `null`).
fn declared_types(schema: &Value) -> Vec<&'static str> {
    let name = |t: &str| -> Option<&'static str> {
        Some(match t {
            "null" => "null",
            "boolean" => "boolean",
            "integer" | "number" => "number",
            "string" => "string",
            "array" => "array",
            "object" => "object",
            _ => return None,
        })
    };
    let mut out: Vec<&'static str> = match schema.get("type") {
        Some(Value::String(t)) => name(t).into_iter().collect(),
        Some(Value::Array(ts)) => ts.iter().filter_map(|t| name(t.as_str()?)).collect(),
        _ => Vec::new(),
    };
    if schema.get("nullable") == Some(&Value::Bool(true)) && !out.is_empty() {
        out.push("null");
    }
    out
}

/// The shape of a tool's successful responses: every field path (`data.status`, `items.*.qty`
/// for an object of objects, `results[].id` for an array of objects, `by_day.#` for keys with a
/// digit or in capitals only, which name things rather than fields; four levels deep) with the
/// JSON types seen
/// there.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResponseShape {
    successes: usize,
    fields: BTreeMap<String, BTreeSet<&'static str>>,
    /// Per object path, the keys of the first object seen there and whether a later one had
    /// other keys: an object whose keys vary is an open map (a product's `options`: `color`
    /// on one, `switch type` on another), where a key never seen is no departure.
    objects: BTreeMap<String, (BTreeSet<String>, bool)>,
}

/// The field paths of a response and their types.
fn shape_fields(value: &Value, at: &str, depth: usize, out: &mut Vec<(String, &'static str)>) {
    shape_walk(value, at, depth, out, &mut |_, _| {});
}

/// [`shape_fields`], also telling `object` each object's path (as its fields are written
/// under it) and keys.
fn shape_walk(
    value: &Value,
    at: &str,
    depth: usize,
    out: &mut Vec<(String, &'static str)>,
    object: &mut dyn FnMut(&str, &Map<String, Value>),
) {
    if depth == 4 {
        return;
    }
    let join = |key: &str| {
        if at.is_empty() {
            key.to_owned()
        } else {
            format!("{at}.{key}")
        }
    };
    match value {
        Value::Object(map) => {
            // An object of objects is a collection: its keys are ids, not fields.
            if !map.is_empty() && map.values().all(Value::is_object) {
                let path = join("*");
                for entry in map.values() {
                    out.push((path.clone(), "object"));
                    shape_walk(entry, &path, depth + 1, out, object);
                }
                return;
            }
            object(at, map);
            for (key, child) in map {
                // A key that names a thing is not a field: every such key is one field, `#`.
                let path = if names_a_thing(key) {
                    join("#")
                } else {
                    join(key)
                };
                out.push((path.clone(), crate::extract::type_name(child)));
                shape_walk(child, &path, depth + 1, out, object);
            }
        }
        Value::Array(items) => {
            let path = format!("{at}[]");
            for item in items.iter().filter(|i| i.is_object()) {
                shape_walk(item, &path, depth + 1, out, object);
            }
        }
        _ => {}
    }
}

/// Whether an object key names a thing (`U46`, `ACC-CBL`, `2024-06-25`: a digit, or capitals
/// only) rather than a field.
fn names_a_thing(key: &str) -> bool {
    key.chars().any(|c| c.is_ascii_digit())
        || (key.chars().any(char::is_uppercase) && !key.chars().any(char::is_lowercase))
}

/// The path of the object a field path's last key belongs to (`items[].options` for
/// `items[].options.color`, `` for a top-level field).
fn parent_path(path: &str) -> &str {
    path.rsplit_once('.').map_or("", |(parent, _)| parent)
}

impl ResponseShape {
    /// Adds one successful response.
    pub fn learn(&mut self, observation: &Value) {
        self.successes += 1;
        let mut fields = Vec::new();
        let objects = &mut self.objects;
        shape_walk(observation, "", 0, &mut fields, &mut |path, map| {
            let keys: BTreeSet<String> = map.keys().cloned().collect();
            match objects.get_mut(path) {
                Some((first, varies)) => *varies |= *first != keys,
                None => {
                    objects.insert(path.to_owned(), (keys, false));
                }
            }
        });
        for (path, kind) in fields {
            self.fields.entry(path).or_default().insert(kind);
        }
    }

    /// How a successful response departs from the shape: a field never seen, or a field with
    /// a type never seen there (`null` fits any field, and any type fits a field once seen
    /// `null`). Empty without evidence ([`MIN_EVIDENCE`] successes).
    pub fn problems(&self, observation: &Value) -> Vec<String> {
        if self.successes < MIN_EVIDENCE {
            return Vec::new();
        }
        let mut fields = Vec::new();
        shape_fields(observation, "", 0, &mut fields);
        let mut out: Vec<String> = fields
            .into_iter()
            .filter_map(|(path, kind)| match self.fields.get(&path) {
                // An entry keyed by an id (`payments.*`) is data, not a field: a map the
                // walks only saw empty gets entries without departing from anything.
                None if self.in_open_map(&path)
                    || !self.parent_seen(&path)
                    || path == "*"
                    || path.ends_with(".*") =>
                {
                    None
                }
                None => Some(format!("field {path} was never in its responses")),
                Some(seen) if kind != "null" && !seen.contains(kind) && !seen.contains("null") => {
                    let seen: Vec<&str> = seen.iter().copied().collect();
                    Some(format!("{path} is a {kind}; it was {}", seen.join(" or ")))
                }
                Some(_) => None,
            })
            .collect();
        // The same departure in every entry of a list is said once.
        let mut said = BTreeSet::new();
        out.retain(|problem| said.insert(problem.clone()));
        out
    }

    /// Whether the field at `path` is a key of an object whose keys varied between the
    /// responses learned from (an open map).
    fn in_open_map(&self, path: &str) -> bool {
        self.objects
            .get(parent_path(path))
            .is_some_and(|(_, varies)| *varies)
    }

    /// Whether an object was ever seen where the field at `path` sits: a list that was empty
    /// in every learned answer (a search that found nothing) says nothing about its entries.
    fn parent_seen(&self, path: &str) -> bool {
        self.objects.contains_key(parent_path(path))
    }

    /// Whether enough successes were seen to judge a response.
    pub fn is_known(&self) -> bool {
        self.successes >= MIN_EVIDENCE
    }
}

impl Effects {
    /// Learns from executed trajectories (consistent by construction): the types each tool
    /// created and deleted, whether it ever changed the state, whether all its successes
    /// changed it and whether any failure did.
    pub fn learn(trajectories: &[AuditTrajectory]) -> Effects {
        #[derive(Default)]
        struct Seen {
            creates: BTreeSet<String>,
            deletes: BTreeSet<String>,
            changed: bool,
            success_unchanged: bool,
            repeat_unchanged: bool,
            failure_changed: bool,
            unnamed_delete: bool,
            max_created: usize,
            successes: usize,
            failures: usize,
            deleted: usize,
            /// Per type, the successes that found it present and deleted none of it.
            kept: BTreeMap<String, usize>,
            /// Calls that created something, and the arguments whose value was the key of
            /// what each of them created.
            creations: usize,
            named_by: Option<BTreeSet<String>>,
        }
        let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
        let mut shapes: BTreeMap<String, ResponseShape> = BTreeMap::new();
        let mut vocabulary = Vocabulary::default();

        for t in trajectories {
            let mut before = &t.initial_state;
            // The last call that changed the state.
            let mut last_change: Option<&AuditStep> = None;
            for step in &t.steps {
                if step.success == Some(true) {
                    shapes
                        .entry(step.tool.clone())
                        .or_default()
                        .learn(&step.observation);
                    vocabulary.learn(&step.observation);
                }

                let s = seen.entry(step.tool.clone()).or_default();
                let changed = *before != step.state_after;
                s.changed |= changed;
                // Resources with borrowed keys: every success's state before is read for the
                // types it kept.
                let before_resources =
                    (changed || step.success == Some(true)).then(|| resource_refs(before));
                match step.success {
                    Some(true) => {
                        s.successes += 1;
                        // A call that sets only what its target holds changes nothing by
                        // construction (baggage counts saved unchanged): no evidence that the
                        // tool's successes may leave the state as it was.
                        // Nor is the same call made again on what it just did (`grow(size=4)`
                        // twice: the ticket it makes is there).
                        let repeat = super::repeats(last_change, step);
                        s.repeat_unchanged |= !changed && repeat;
                        s.success_unchanged |= !changed
                            && !(before_resources.as_ref())
                                .is_some_and(|a| super::restates(a, &step.arguments))
                            && !repeat;
                    }
                    Some(false) => {
                        s.failures += 1;
                        s.failure_changed |= changed;
                    }
                    None => {}
                }
                let mut deleted_kinds: BTreeSet<&str> = BTreeSet::new();
                if let (true, Some(a)) = (changed, &before_resources) {
                    let b = resource_refs(&step.state_after);
                    let created: Vec<&str> = b
                        .keys()
                        .filter(|k| !a.contains_key(*k))
                        .map(|k| k.0.as_ref())
                        .collect();
                    s.max_created = s.max_created.max(created.len());
                    if !created.is_empty() {
                        let keys: Vec<&str> = b
                            .keys()
                            .filter(|k| !a.contains_key(*k))
                            .map(|k| k.1)
                            .collect();
                        // Names only: an id argument (`customer_id` keying the cart it
                        // opens) is followed by the id-based checks, and keys another thing.
                        let naming: BTreeSet<String> = (step.arguments.iter())
                            .filter(|(arg, _)| super::observed::id_noun(arg).is_none())
                            .filter(|(_, v)| v.as_str().is_some_and(|v| keys.contains(&v)))
                            .map(|(arg, _)| arg.clone())
                            .collect();
                        s.creations += 1;
                        s.named_by = Some(match s.named_by.take() {
                            Some(before) => before.intersection(&naming).cloned().collect(),
                            None => naming,
                        });
                    }
                    s.creates.extend(created.into_iter().map(str::to_owned));
                    for (kind, id) in a.keys().filter(|k| !b.contains_key(*k)) {
                        s.deletes.insert(kind.to_string());
                        deleted_kinds.insert(kind.as_ref());
                        s.deleted += 1;
                        s.unnamed_delete |= !names_of(&step.arguments, kind, id);
                    }
                }
                if let (Some(true), Some(a)) = (step.success, &before_resources) {
                    let present: BTreeSet<&str> = a.keys().map(|k| k.0.as_ref()).collect();
                    for kind in present.difference(&deleted_kinds) {
                        *s.kept.entry((*kind).to_owned()).or_default() += 1;
                    }
                }
                if changed {
                    last_change = Some(step);
                }
                before = &step.state_after;
            }
        }
        Effects {
            vocabulary,
            any_initial: implied::ImpliedState::default(),
            successes: seen
                .iter()
                .map(|(tool, s)| (tool.clone(), s.successes))
                .collect(),
            shapes,
            reach: BTreeMap::new(),
            writes: implied::learn_writes(trajectories),
            tools: seen
                .into_iter()
                .map(|(tool, s)| {
                    // Claims need evidence: what was never seen falls back to the name's guess,
                    // and the types the name suggests are added to those seen.
                    let guess = ToolEffects::guess(&tool);
                    let never_seen_creating = s.successes >= MIN_EVIDENCE && s.creates.is_empty();
                    let mut creates = s.creates;
                    creates.extend(guess.creates.iter().cloned());
                    let mut deletes = s.deletes;
                    deletes.extend(guess.deletes.iter().cloned());
                    // A claim about what it never creates or deletes needs successes too; a
                    // tool its name says only reads is taken at its word.
                    let creates_known = s.successes >= NEVER_EVIDENCE || guess.read_only;
                    let keeps = (!guess.read_only).then(|| {
                        s.kept
                            .iter()
                            .filter(|(_, n)| **n >= NEVER_EVIDENCE)
                            .map(|(kind, _)| kind.clone())
                            .collect()
                    });
                    let created_named_by = (s.creations >= MIN_EVIDENCE)
                        .then(|| s.named_by.as_ref()?.iter().next().cloned())
                        .flatten();
                    let effects = ToolEffects {
                        creates_known,
                        keeps,
                        created_named_by,
                        reach: None,
                        creates,
                        deletes,
                        read_only: if s.successes > 0 {
                            !s.changed
                        } else {
                            guess.read_only
                        },
                        success_changes: s.successes >= MIN_EVIDENCE && !s.success_unchanged,
                        failure_keeps: s.failures >= MIN_EVIDENCE && !s.failure_changed,
                        deletes_named_only: s.deleted > 0 && !s.unnamed_delete,
                        max_created: if !creates_known
                            || (s.max_created == 0 && guess.creates.contains("*"))
                        {
                            usize::MAX
                        } else {
                            s.max_created
                        },
                        never_seen_creating,
                        repeat_keeps: s.repeat_unchanged,
                        source: EffectSource::Observed,
                    };
                    (tool, effects)
                })
                .collect(),
        }
    }

    /// How many successful calls of `tool` its effects were learned from (0 for a tool never
    /// seen succeeding: what it does is then known from its code's reach, annotations and
    /// name only).
    pub fn successes(&self, tool: &str) -> usize {
        self.successes.get(tool).copied().unwrap_or(0)
    }

    /// How a successful response of `tool` departs from the shape learned for it, or, for a
    /// tool without enough successes to know its shape, from the environment's
    /// [`Vocabulary`] (`None`: nothing was learned to judge it by).
    pub fn shape_problems(&self, tool: &str, observation: &Value) -> Option<Vec<String>> {
        match self.shapes.get(tool).filter(|s| s.is_known()) {
            Some(shape) => Some(shape.problems(observation)),
            None if !self.vocabulary.is_empty() => Some(self.vocabulary.problems(observation)),
            None => None,
        }
    }

    /// The effects of `tool`: learned, else declared, else guessed from its name.
    pub fn of(&self, tool: &str) -> ToolEffects {
        let mut effects = self
            .tools
            .get(tool)
            .cloned()
            .unwrap_or_else(|| ToolEffects::guess(tool));
        effects.reach = self.reach.get(tool).cloned();
        effects
    }

    /// Adds what each of `tools` can reach in `code` (the environment's source, read in
    /// `convention` by [`crate::slice`]); a tool the slicer cannot bound stays unbounded.
    pub fn with_code<'a>(
        mut self,
        code: &str,
        convention: crate::slice::Convention,
        tools: impl IntoIterator<Item = &'a str>,
    ) -> Effects {
        for tool in tools {
            let slice = crate::slice::slice_code_as(code, tool, convention);
            if let Some(reach) = CodeReach::of(&slice) {
                self.reach.insert(tool.to_owned(), reach);
            }
        }
        self
    }

    /// What a successful call of `tool` does to fields: learned, else declared (the argument
    /// an update or delete names), else guessed from its name.
    pub fn writes_of(&self, tool: &str) -> std::borrow::Cow<'_, implied::Writes> {
        match self.writes.get(tool) {
            Some(writes) => std::borrow::Cow::Borrowed(writes),
            None => std::borrow::Cow::Owned(implied::Writes::guess(tool)),
        }
    }

    /// Adds the writes a file's transcripts showed ([`super::transcript_effects::learn`]) for
    /// the tools these effects hold no writes learned from walks or declared for; returns the
    /// tools it gave writes to.
    pub fn with_transcript_writes(
        &mut self,
        learned: &BTreeMap<String, super::transcript_effects::TranscriptWrites>,
    ) -> Vec<String> {
        let mut taken = Vec::new();
        for (tool, found) in learned {
            let weaker = self
                .writes
                .get(tool)
                .is_none_or(|w| w.source == EffectSource::Guessed);
            if weaker {
                self.writes.insert(tool.clone(), found.writes.clone());
                taken.push(tool.clone());
            }
        }
        taken
    }

    /// Adds the package's initial states: a trajectory that names none of them (calls only) is
    /// held to all of them — a record whose id is in none, that nothing in it created, is a
    /// phantom. Without states nothing changes.
    pub fn with_initial_states<'a>(
        mut self,
        states: impl IntoIterator<Item = &'a Value>,
    ) -> Effects {
        let states: Vec<&Value> = states.into_iter().collect();
        self.any_initial = implied::ImpliedState::from_any_initial(&states);
        self
    }

    /// What a trajectory that names no initial state starts from: the ids of every initial
    /// state of the package, when these effects know them.
    pub fn any_initial_state(&self) -> implied::ImpliedState {
        self.any_initial.clone()
    }

    /// Adds the effects a manifest declares for the tools these effects know nothing of (what
    /// was learned by running a tool wins over what its manifest says).
    pub fn with_annotations(
        mut self,
        annotations: &BTreeMap<String, Vec<EffectAnnotation>>,
    ) -> Effects {
        for (tool, declared) in annotations {
            self.tools
                .entry(tool.clone())
                .or_insert_with(|| ToolEffects::annotated(declared));
            self.writes.entry(tool.clone()).or_insert_with(|| {
                let mut writes = implied::Writes::guess(tool);
                writes.target = declared
                    .iter()
                    .filter(|a| matches!(a.operation, Operation::Update | Operation::Delete))
                    .find_map(|a| a.id_parameter.clone());
                writes.source = EffectSource::Annotated;
                writes
            });
        }
        self
    }
}

/// Whether one of the arguments names the resource `kind`/`id` (its id as a string value), or,
/// for a nested resource, a resource it belongs to (any argument value that is one of its
/// ancestors' ids cannot be told from the key alone, so nested resources always count as
/// named).
pub(crate) fn names_of(arguments: &Map<String, Value>, kind: &str, id: &str) -> bool {
    kind.contains('*') || arguments.values().any(|v| v.as_str() == Some(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn orders() -> Vocabulary {
        let mut v = Vocabulary::default();
        for (id, total) in [("#W1", 10.5), ("#W2", 3.0), ("#W3", 7.25)] {
            v.learn(
                &json!({"order_id": id, "total": total, "items": [{"item_id": "I1", "qty": 1}],
                            "by_day": {"2024-06-01": 1}}),
            );
        }
        v
    }

    #[test]
    fn a_description_declares_its_vocabulary() {
        let mut v = Vocabulary::default();
        v.declare(&json!({"type": "object", "properties": {
            "order_id": {"type": "string"},
            "total": {"type": "integer"},
            "note": {"type": "string", "nullable": true},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "item_id": {"type": "string"}, "price": {}}}},
            "by_user": {"type": "object", "additionalProperties": {"type": "object",
                "properties": {"U1": {"type": "string"}, "last_seen": {"type": "string"}}}},
        }}));
        // One declaration is claim enough: another spelling and another type depart.
        assert_eq!(
            v.problems(&json!({"orderId": "#W4", "total": "2", "note": null,
                "items": [{"itemId": "I2", "price": "anything"}],
                "by_user": {"U7": {"lastSeen": "today"}}})),
            [
                "field orderId, which the environment's answers spell order_id",
                "total as a string; the environment's answers always have a number",
                "field itemId, which the environment's answers spell item_id",
                "field lastSeen, which the environment's answers spell last_seen",
            ]
        );
        // Fields as declared, a null where null is allowed, a field without a declared type
        // holding anything, and keys naming things: no departure.
        assert!(v
            .problems(&json!({"order_id": "#W4", "total": 2.5, "note": "x",
                "items": [{"item_id": "I2", "price": [1]}], "by_user": {"U9": {}}}))
            .is_empty());
        assert!(v.problems(&json!({"note": null})).is_empty());
    }

    #[test]
    fn a_field_in_another_spelling_departs_from_the_vocabulary() {
        let v = orders();
        assert_eq!(
            v.problems(
                &json!({"orderId": "#W4", "total": 1.0, "items": [{"itemId": "I2", "qty": 2}]})
            ),
            [
                "field orderId, which the environment's answers spell order_id",
                "field itemId, which the environment's answers spell item_id"
            ]
        );
        // New fields of a tool the walks never got right are no departure, nor are keys that
        // name things, nor the environment's own spelling.
        assert!(v
            .problems(
                &json!({"order_id": "#W4", "exchange_items": ["I1"], "by_day": {"2024-07-01": 2}})
            )
            .is_empty());
    }

    #[test]
    fn a_field_of_one_type_everywhere_answered_with_another_departs() {
        let v = orders();
        assert_eq!(
            v.problems(&json!({"order_id": "#W4", "total": "1.0"})),
            ["total as a string; the environment's answers always have a number"]
        );
        assert!(v
            .problems(&json!({"order_id": null, "total": 2}))
            .is_empty());
        // Fewer than three sightings are no evidence.
        let mut young = Vocabulary::default();
        young.learn(&json!({"order_id": "#W1"}));
        young.learn(&json!({"order_id": "#W2"}));
        assert!(young.problems(&json!({"orderId": 5})).is_empty());
        assert!(young.problems(&json!({"order_id": 5})).is_empty());
    }

    #[test]
    fn a_tool_without_a_known_shape_is_judged_by_the_vocabulary() {
        let step = |tool: &str, observation: Value| crate::audit::AuditStep {
            tool: tool.into(),
            arguments: Map::new(),
            success: Some(true),
            observation,
            state_after: std::sync::Arc::new(json!({})),
        };
        let effects = Effects::learn(&[crate::audit::AuditTrajectory {
            id: "w".into(),
            initial_state: std::sync::Arc::new(json!({})),
            steps: (0..3)
                .map(|i| {
                    step(
                        "get_order",
                        json!({"order_id": format!("#W{i}"), "total": 1.5}),
                    )
                })
                .chain([step(
                    "exchange_items",
                    json!({"order_id": "#W0", "total": 2.0}),
                )])
                .collect(),
        }]);
        // Its own shape (one success) is not known; the environment's vocabulary is.
        assert_eq!(
            effects.shape_problems("exchange_items", &json!({"orderId": "#W0", "total": 2.0})),
            Some(vec![
                "field orderId, which the environment's answers spell order_id".to_owned()
            ])
        );
        assert_eq!(
            Effects::default().shape_problems("exchange_items", &json!({})),
            None
        );
    }
}
