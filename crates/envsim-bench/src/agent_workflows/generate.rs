//! Agent-style workflows over a package, executed call by call from one of its initial states.
//!
//! A workflow is two or three goals an agent pursues in turn — look a record up, create one and
//! read it back (by its id, and in a listing filtered the way it was created), update a record
//! and verify it, move a record's status and check it (and try the move again), search before
//! and after creating, act on a record that does not exist — each call's arguments taken from
//! the current state (ids of its collections, values of its records), the package's scripted
//! tests (argument values an agent would be given) and earlier answers (the id a create
//! returned). Everything is derived from the tool schemas and the states: a tool is a getter of
//! a collection when its one required argument names that collection's ids (`issue_id` →
//! `issues`, `project_key` → `projects`), and what a call does (create, change, status move,
//! nothing) is read from the true state change, never from its name. A call is kept only when
//! it does what the goal wanted; the others are probes on the same state, never part of the
//! workflow.

use super::plant::{fresh_id, is_status_field, singular};
use super::{
    Counterpart, Effect, ExecutedStep, FieldChange, Purpose, RecordRef, Workflow, WorkflowError,
};
use envsim_core::rng::Rng;
use envsim_exec::package::EnvPackage;
use envsim_exec::{step_seed, Call, ExecError, Executor};
use serde_json::{Map, Value};

/// How many workflows per package, and the seed of every choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenerateConfig {
    /// Workflows per package (fewer when the package's tools cannot make them).
    pub per_env: usize,
    /// Seed.
    pub seed: u64,
}

/// The most calls a workflow makes.
const MAX_STEPS: usize = 12;
/// The fewest: shorter ones are dropped.
const MIN_STEPS: usize = 4;
/// Argument sets tried per tool for one need.
const TRIES_PER_TOOL: usize = 6;
/// Tools tried for one need.
const TOOLS_PER_NEED: usize = 8;

/// One argument of a tool schema.
#[derive(Clone, Debug)]
struct Param {
    name: String,
    required: bool,
    ty: String,
    choices: Vec<Value>,
    example: Option<String>,
}

/// One tool of the manifest.
#[derive(Clone, Debug)]
struct Tool {
    name: String,
    params: Vec<Param>,
}

/// What the package offers an agent: its tools, the argument sets its scripted tests use, and
/// the collections whose ids arguments not named after them take in those tests (`name` of
/// `get_package` takes keys of `packages`).
struct Catalog {
    tools: Vec<Tool>,
    bank: std::collections::BTreeMap<String, Vec<Map<String, Value>>>,
    keyed: std::collections::BTreeMap<(String, String), String>,
}

/// The example a description gives (`"Issue key, e.g. PAY-104"` → `PAY-104`).
fn example_of(description: &str) -> Option<String> {
    let rest = description.split("e.g.").nth(1)?.trim_start();
    let word: String = rest
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != ',' && *c != ')' && *c != ';')
        .collect();
    let word = word.trim_matches(|c: char| c == '\'' || c == '"' || c == '`' || c == '.');
    (!word.is_empty()).then(|| word.to_owned())
}

impl Catalog {
    fn of(package: &EnvPackage) -> Catalog {
        let tools = package
            .manifest
            .tools
            .iter()
            .filter_map(|t| {
                let name = t.pointer("/function/name")?.as_str()?.to_owned();
                let required: Vec<&str> = t
                    .pointer("/function/parameters/required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let params = t
                    .pointer("/function/parameters/properties")
                    .and_then(Value::as_object)
                    .map(|props| {
                        props
                            .iter()
                            .map(|(p, schema)| Param {
                                name: p.clone(),
                                required: required.contains(&p.as_str()),
                                ty: schema
                                    .get("type")
                                    .and_then(Value::as_str)
                                    .unwrap_or_default()
                                    .to_owned(),
                                choices: schema
                                    .get("enum")
                                    .and_then(Value::as_array)
                                    .cloned()
                                    .unwrap_or_default(),
                                example: schema
                                    .get("description")
                                    .and_then(Value::as_str)
                                    .and_then(example_of),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Some(Tool { name, params })
            })
            .collect();
        let mut bank: std::collections::BTreeMap<String, Vec<Map<String, Value>>> =
            Default::default();
        for step in package.tests.iter().flat_map(|case| &case.steps) {
            let entry = bank.entry(step.tool.clone()).or_default();
            if !entry.contains(&step.args) {
                entry.push(step.args.clone());
            }
        }
        let mut keyed = std::collections::BTreeMap::new();
        for (tool, sets) in &bank {
            for (param, value) in sets.iter().flatten() {
                let Some(value) = value.as_str() else {
                    continue;
                };
                let holder = package.states.iter().find_map(|(_, state)| {
                    collections(state)
                        .into_iter()
                        .find(|c| state[c.as_str()].get(value).is_some())
                });
                if let Some(collection) = holder {
                    keyed
                        .entry((tool.clone(), param.clone()))
                        .or_insert(collection);
                }
            }
        }
        Catalog { tools, bank, keyed }
    }

    fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// The state's collections: top-level objects whose values are all objects (records by id).
fn collections(state: &Value) -> Vec<String> {
    state
        .as_object()
        .map(|map| {
            map.iter()
                .filter(|(_, v)| {
                    v.as_object()
                        .is_some_and(|m| m.values().all(Value::is_object))
                })
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The collection whose ids an argument names (`issue_id` → `issues`, `project_key` →
/// `projects`, `lot_id` → `point_lots`), if the state has one.
fn collection_of(param: &str, state: &Value) -> Option<String> {
    let noun = ["_id", "_key", "_code", "_number", "Id"]
        .iter()
        .find_map(|suffix| param.strip_suffix(suffix))?;
    if noun.is_empty() {
        return None;
    }
    let names = collections(state);
    names
        .iter()
        .find(|c| singular(c) == noun || c.as_str() == noun)
        .or_else(|| {
            names
                .iter()
                .find(|c| singular(c).ends_with(&format!("_{noun}")))
        })
        .cloned()
}

fn ids(state: &Value, collection: &str) -> Vec<String> {
    state
        .get(collection)
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// What a call did to the collections, from the state before and after.
fn effect_of(before: &Value, after: &Value) -> Effect {
    let mut effect = Effect::default();
    for collection in collections(before) {
        let (Some(old), Some(new)) = (
            before.get(&collection).and_then(Value::as_object),
            after.get(&collection).and_then(Value::as_object),
        ) else {
            continue;
        };
        let record = |id: &str| RecordRef {
            collection: collection.clone(),
            id: id.to_owned(),
        };
        for (id, was) in old {
            match new.get(id) {
                None => effect.removed.push(record(id)),
                Some(now) if now != was => {
                    let (Some(was), Some(now)) = (was.as_object(), now.as_object()) else {
                        continue;
                    };
                    for (field, value) in now {
                        let before = was.get(field).cloned().unwrap_or(Value::Null);
                        if &before != value {
                            effect.changed.push(FieldChange {
                                record: record(id),
                                field: field.clone(),
                                before,
                                after: value.clone(),
                            });
                        }
                    }
                }
                Some(_) => {}
            }
        }
        for id in new.keys().filter(|id| !old.contains_key(*id)) {
            effect.created.push(record(id));
        }
    }
    effect
}

/// One executed call, not yet part of the workflow.
struct Probe {
    tool: String,
    arguments: Map<String, Value>,
    answer: Value,
    success: bool,
    after: Value,
    effect: Effect,
}

impl Probe {
    /// Whether it was a successful call that changed nothing.
    fn is_read(&self) -> bool {
        self.success && self.effect.is_empty()
    }
}

/// A workflow being built: the state so far and the calls made.
struct Session<'a> {
    executor: &'a Executor,
    package: &'a EnvPackage,
    catalog: &'a Catalog,
    state_name: &'a str,
    state: Value,
    steps: Vec<ExecutedStep>,
    rng: Rng,
    run_seed: u64,
    clock: f64,
    goals: Vec<String>,
}

impl Session<'_> {
    /// The collection whose ids `param` of `tool` takes: by its name, else by the values the
    /// scripted tests give it; only a collection the current state has.
    fn collection_of(&self, tool: &str, param: &str) -> Option<String> {
        collection_of(param, &self.state).or_else(|| {
            let c = self
                .catalog
                .keyed
                .get(&(tool.to_owned(), param.to_owned()))?;
            self.state.get(c).is_some().then(|| c.clone())
        })
    }

    fn room(&self) -> bool {
        self.steps.len() < MAX_STEPS
    }

    /// Executes a call on the current state as the next step would run it (its seed and clock);
    /// `None` when the environment gave no answer (it raised, the call did not fit).
    async fn probe(
        &self,
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> Result<Option<Probe>, WorkflowError> {
        let k = self.steps.len();
        let call = Call {
            seed: step_seed(self.run_seed, k),
            clock: self.clock + k as f64 * envsim_core::clock::DEFAULT_CLOCK_STEP,
            ..Call::new(&self.package.code, tool, arguments, &self.state)
        };
        match self.executor.call(&call).await {
            Ok(outcome) => {
                let success =
                    self.package.outcome.classify(&outcome.observation_json) == Some(true);
                let effect = effect_of(&self.state, &outcome.state_after);
                Ok(Some(Probe {
                    tool: tool.to_owned(),
                    arguments: arguments.clone(),
                    answer: outcome.observation_json,
                    success,
                    after: outcome.state_after,
                    effect,
                }))
            }
            Err(e @ (ExecError::Spawn(_) | ExecError::Protocol(_))) => Err(WorkflowError::Exec {
                env: self.package.manifest.name.clone(),
                state: self.state_name.to_owned(),
                source: e,
            }),
            Err(_) => Ok(None),
        }
    }

    fn commit(
        &mut self,
        probe: Probe,
        purpose: Purpose,
        names: Option<RecordRef>,
        counterpart: Option<Counterpart>,
    ) {
        self.state = probe.after;
        self.steps.push(ExecutedStep {
            tool: probe.tool,
            arguments: probe.arguments,
            answer: probe.answer,
            success: probe.success,
            effect: probe.effect,
            purpose,
            names,
            counterpart,
        });
    }

    /// A value for `param` an agent could give: an id of the collection it names, one of its
    /// choices, a value records hold in a field of that name, the description's example.
    fn value_for(&mut self, tool: &str, param: &Param) -> Option<Value> {
        if let Some(collection) = self.collection_of(tool, &param.name) {
            let ids = ids(&self.state, &collection);
            if let Some(id) = self.rng.pick(&ids) {
                return Some(Value::String(id.clone()));
            }
        }
        if let Some(choice) = self.rng.pick(&param.choices) {
            return Some(choice.clone());
        }
        let seen = field_values(&self.state, &param.name);
        if let Some(v) = self.rng.pick(&seen) {
            return Some(v.clone());
        }
        match param.ty.as_str() {
            "boolean" => Some(Value::Bool(true)),
            "integer" => Some(Value::from(1 + self.rng.below(3))),
            "number" => Some(Value::from(10.0)),
            "array" => Some(Value::Array(Vec::new())),
            "object" => None,
            _ => match &param.example {
                Some(e) => Some(Value::String(e.clone())),
                None if param.name.contains("date") => Some(Value::String(date_of(self.clock))),
                None => Some(Value::String("Follow-up requested by the customer".into())),
            },
        }
    }

    /// Argument sets to try for `tool` with `fixed` arguments: the scripted tests' sets with
    /// `fixed` laid over them (in a seeded order), then sets made from the schema.
    fn arguments_for(&mut self, tool: &str, fixed: &Map<String, Value>) -> Vec<Map<String, Value>> {
        let Some(schema) = self.catalog.tool(tool).cloned() else {
            return Vec::new();
        };
        let mut out: Vec<Map<String, Value>> = Vec::new();
        let mut banked = self.catalog.bank.get(tool).cloned().unwrap_or_default();
        self.rng.shuffle(&mut banked);
        for mut args in banked {
            for (k, v) in fixed {
                args.insert(k.clone(), v.clone());
            }
            if !out.contains(&args) {
                out.push(args);
            }
        }
        for _ in 0..2 {
            let mut args = Map::new();
            for param in &schema.params {
                if let Some(v) = fixed.get(&param.name) {
                    args.insert(param.name.clone(), v.clone());
                } else if param.required {
                    match self.value_for(tool, param) {
                        Some(v) => {
                            args.insert(param.name.clone(), v);
                        }
                        None => break,
                    }
                }
            }
            if !out.contains(&args) {
                out.push(args);
            }
        }
        out.truncate(TRIES_PER_TOOL);
        out
    }

    /// Getters: tools whose only required argument names a collection's ids, with that
    /// argument and collection (from the schema; a call shows whether it reads).
    fn getters(&self) -> Vec<(String, String, String)> {
        self.catalog
            .tools
            .iter()
            .filter_map(|t| {
                let required: Vec<&Param> = t.params.iter().filter(|p| p.required).collect();
                let [param] = required.as_slice() else {
                    return None;
                };
                let collection = self.collection_of(&t.name, &param.name)?;
                Some((t.name.clone(), param.name.clone(), collection))
            })
            .collect()
    }

    fn getter_of(&self, collection: &str) -> Option<(String, String)> {
        self.getters()
            .into_iter()
            .find(|(_, _, c)| c == collection)
            .map(|(t, p, _)| (t, p))
    }

    /// An id of `collection` that no record of the state has.
    fn missing_id(&self, collection: &str) -> Option<String> {
        let ids = ids(&self.state, collection);
        let text = self.state.to_string();
        let model = ids.last().cloned().unwrap_or_else(|| "X-100".into());
        fresh_id(&model, &|id| !text.contains(&format!("\"{id}\"")))
    }

    /// Reads `record` with `getter`: a lookup, with the getter's own not-found answer for a
    /// missing id probed beside it (what a vanished record would be answered).
    async fn read_back(
        &mut self,
        getter: &(String, String),
        record: &RecordRef,
    ) -> Result<bool, WorkflowError> {
        if !self.room() {
            return Ok(false);
        }
        let args = one(&getter.1, Value::String(record.id.clone()));
        let Some(read) = self.probe(&getter.0, &args).await? else {
            return Ok(false);
        };
        if !read.is_read() {
            return Ok(false);
        }
        let mut counterpart = None;
        if let Some(missing) = self.missing_id(&record.collection) {
            let args = one(&getter.1, Value::String(missing.clone()));
            if let Some(p) = self.probe(&getter.0, &args).await? {
                if !p.success && p.effect.is_empty() {
                    counterpart = Some(Counterpart {
                        answer: p.answer,
                        from: missing,
                        to: record.id.clone(),
                    });
                }
            }
        }
        self.commit(read, Purpose::Lookup, Some(record.clone()), counterpart);
        Ok(true)
    }

    /// Goal: look up a record of a collection that has a getter.
    async fn lookup(&mut self) -> Result<bool, WorkflowError> {
        let mut getters = self.getters();
        self.rng.shuffle(&mut getters);
        for (tool, param, collection) in getters.into_iter().take(TOOLS_PER_NEED) {
            let ids = ids(&self.state, &collection);
            let Some(id) = self.rng.pick(&ids).cloned() else {
                continue;
            };
            let record = RecordRef {
                collection: collection.clone(),
                id: id.clone(),
            };
            if self.read_back(&(tool, param), &record).await? {
                self.goals
                    .push(format!("look up {} {id}", singular(&collection)));
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Tools that are not getters, in a seeded order: what may create or change.
    fn actions(&mut self) -> Vec<String> {
        let getters: Vec<String> = self.getters().into_iter().map(|(t, _, _)| t).collect();
        let mut tools: Vec<String> = self
            .catalog
            .tools
            .iter()
            .map(|t| t.name.clone())
            .filter(|t| !getters.contains(t))
            .collect();
        self.rng.shuffle(&mut tools);
        tools
    }

    /// Finds a call that creates a record whose id its answer tells.
    async fn find_create(&mut self) -> Result<Option<(Probe, RecordRef)>, WorkflowError> {
        for tool in self.actions().into_iter().take(2 * TOOLS_PER_NEED) {
            for args in self.arguments_for(&tool, &Map::new()) {
                let Some(p) = self.probe(&tool, &args).await? else {
                    continue;
                };
                if !p.success {
                    continue;
                }
                let told = p
                    .effect
                    .created
                    .iter()
                    .find(|r| p.answer.to_string().contains(&r.id))
                    .cloned();
                if let Some(record) = told {
                    return Ok(Some((p, record)));
                }
            }
        }
        Ok(None)
    }

    /// A listing that holds `record`, made with the arguments `created_with` shares with it
    /// (the listing filtered the way the record was created) or with none.
    async fn find_listing(
        &mut self,
        record: &RecordRef,
        created_with: &Map<String, Value>,
        exclude: &str,
    ) -> Result<Option<Probe>, WorkflowError> {
        let getter = self.getter_of(&record.collection).map(|(t, _)| t);
        let mut tools: Vec<Tool> = self
            .catalog
            .tools
            .iter()
            .filter(|t| Some(&t.name) != getter.as_ref() && t.name != exclude)
            .cloned()
            .collect();
        self.rng.shuffle(&mut tools);
        // Listings that share an argument with the create first.
        tools.sort_by_key(|t| !t.params.iter().any(|p| created_with.contains_key(&p.name)));
        for tool in tools.into_iter().take(TOOLS_PER_NEED) {
            let shared: Map<String, Value> = tool
                .params
                .iter()
                .filter_map(|p| Some((p.name.clone(), created_with.get(&p.name)?.clone())))
                .collect();
            let mut tries = vec![shared.clone()];
            tries.extend(self.arguments_for(&tool.name, &shared).into_iter().take(2));
            for args in tries {
                let Some(p) = self.probe(&tool.name, &args).await? else {
                    continue;
                };
                if p.is_read() && p.answer.to_string().contains(&format!("\"{}\"", record.id)) {
                    return Ok(Some(p));
                }
            }
        }
        Ok(None)
    }

    /// Goal: create a record, then read it back by its id and find it in a listing; with
    /// `search_first`, the listing is made before the create too.
    async fn create_and_check(&mut self, search_first: bool) -> Result<bool, WorkflowError> {
        if self.steps.len() + 3 > MAX_STEPS {
            return Ok(false);
        }
        let Some((found, record)) = self.find_create().await? else {
            return Ok(false);
        };
        let (tool, created_with) = (found.tool.clone(), found.arguments.clone());
        let mut searched = false;
        if search_first {
            // The listing before: filtered by an argument the create shares with it.
            let shared_listing = self.find_listing_before(&created_with, &tool).await?;
            if let Some(p) = shared_listing {
                self.commit(p, Purpose::Listing, None, None);
                searched = true;
            }
        }
        // The create again at its place in the workflow (its seed and clock).
        let Some(p) = self.probe(&tool, &created_with).await? else {
            return Ok(false);
        };
        let record = match p
            .effect
            .created
            .iter()
            .find(|r| r.collection == record.collection && p.answer.to_string().contains(&r.id))
        {
            Some(r) if p.success => r.clone(),
            _ => return Ok(false),
        };
        self.commit(p, Purpose::Create, None, None);
        if let Some(getter) = self.getter_of(&record.collection) {
            self.read_back(&getter, &record).await?;
        }
        if self.room() {
            if let Some(p) = self.find_listing(&record, &created_with, &tool).await? {
                self.commit(p, Purpose::Listing, None, None);
            }
        }
        self.goals.push(format!(
            "{} {} and check that it is there",
            if searched { "search, create" } else { "create" },
            with_article(&singular(&record.collection))
        ));
        Ok(true)
    }

    /// A listing made with an argument `created_with` has: the search an agent makes before
    /// creating.
    async fn find_listing_before(
        &mut self,
        created_with: &Map<String, Value>,
        create: &str,
    ) -> Result<Option<Probe>, WorkflowError> {
        let mut tools: Vec<Tool> = self
            .catalog
            .tools
            .iter()
            .filter(|t| {
                t.name != create && t.params.iter().any(|p| created_with.contains_key(&p.name))
            })
            .cloned()
            .collect();
        self.rng.shuffle(&mut tools);
        for tool in tools.into_iter().take(TOOLS_PER_NEED) {
            let shared: Map<String, Value> = tool
                .params
                .iter()
                .filter_map(|p| Some((p.name.clone(), created_with.get(&p.name)?.clone())))
                .collect();
            let Some(p) = self.probe(&tool.name, &shared).await? else {
                continue;
            };
            if p.is_read() && !self.getters().iter().any(|(t, _, _)| t == &tool.name) {
                return Ok(Some(p));
            }
        }
        Ok(None)
    }

    /// Goal: change a record (a status move with `status`, another field otherwise) and
    /// verify it with its getter; a status move is tried again (refused, when the
    /// environment guards it).
    async fn change_and_verify(&mut self, status: bool) -> Result<bool, WorkflowError> {
        if self.steps.len() + 3 > MAX_STEPS {
            return Ok(false);
        }
        let mut getters = self.getters();
        self.rng.shuffle(&mut getters);
        let actions = self.actions();
        for (getter, param, collection) in getters.into_iter().take(4) {
            // Tools with an argument that names this collection's ids.
            let changers: Vec<(String, String)> = actions
                .iter()
                .filter_map(|t| {
                    let tool = self.catalog.tool(t)?;
                    let p = tool
                        .params
                        .iter()
                        .find(|p| self.collection_of(t, &p.name).as_deref() == Some(&collection))?;
                    Some((t.clone(), p.name.clone()))
                })
                .collect();
            if changers.is_empty() {
                continue;
            }
            let mut ids = ids(&self.state, &collection);
            self.rng.shuffle(&mut ids);
            for id in ids.into_iter().take(3) {
                let record = RecordRef {
                    collection: collection.clone(),
                    id: id.clone(),
                };
                // Probe first at the next step, so the read is made only for a record that
                // some call changes; then read, then change it at its place.
                let Some((tool, args)) = self.find_change(&changers, &record, status).await? else {
                    continue;
                };
                let getter = (getter.clone(), param.clone());
                self.read_back(&getter, &record).await?;
                let Some(p) = self.probe(&tool, &args).await? else {
                    return Ok(true);
                };
                if !(p.success && changes(&p.effect, &record, status)) {
                    return Ok(true);
                }
                let first_answer = p.answer.clone();
                let purpose = if status {
                    Purpose::StatusChange
                } else {
                    Purpose::Update
                };
                self.commit(p, purpose, Some(record.clone()), None);
                self.read_back(&getter, &record).await?;
                if status && self.room() {
                    if let Some(again) = self.probe(&tool, &args).await? {
                        if !again.success && again.effect.is_empty() {
                            let counterpart = Counterpart {
                                answer: first_answer,
                                from: id.clone(),
                                to: id.clone(),
                            };
                            self.commit(
                                again,
                                Purpose::RefusedRepeat,
                                Some(record.clone()),
                                Some(counterpart),
                            );
                            self.read_back(&getter, &record).await?;
                        }
                    }
                }
                self.goals.push(format!(
                    "{} {} {id} with {tool} and check it",
                    if status { "move" } else { "update" },
                    singular(&collection)
                ));
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// A call of one of `changers` that changes `record` as wanted, on the current state.
    async fn find_change(
        &mut self,
        changers: &[(String, String)],
        record: &RecordRef,
        status: bool,
    ) -> Result<Option<(String, Map<String, Value>)>, WorkflowError> {
        for (tool, param) in changers.iter().take(TOOLS_PER_NEED) {
            let fixed = one(param, Value::String(record.id.clone()));
            for args in self.arguments_for(tool, &fixed) {
                if let Some(p) = self.probe(tool, &args).await? {
                    if p.success && changes(&p.effect, record, status) {
                        return Ok(Some((tool.clone(), args)));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Goal: act on a record that does not exist (refused), then look it up (refused too).
    /// Each refusal is stored with the success the same call has on a record that exists.
    async fn refused_on_missing(&mut self) -> Result<bool, WorkflowError> {
        let actions = self.actions();
        for tool in actions.into_iter().take(TOOLS_PER_NEED) {
            if !self.room() {
                return Ok(false);
            }
            let Some(schema) = self.catalog.tool(&tool) else {
                continue;
            };
            let Some((param, collection)) = schema
                .params
                .iter()
                .filter(|p| p.required)
                .find_map(|p| Some((p.name.clone(), self.collection_of(&tool, &p.name)?)))
            else {
                continue;
            };
            let Some(missing) = self.missing_id(&collection) else {
                continue;
            };
            let existing = ids(&self.state, &collection);
            for args in self.arguments_for(&tool, &Map::new()) {
                let Some(real) = args.get(&param).and_then(Value::as_str).map(str::to_owned) else {
                    continue;
                };
                if !existing.contains(&real) {
                    continue;
                }
                let Some(ok) = self.probe(&tool, &args).await? else {
                    continue;
                };
                if !ok.success {
                    continue;
                }
                let mut wrong = args.clone();
                wrong.insert(param.clone(), Value::String(missing.clone()));
                let Some(refused) = self.probe(&tool, &wrong).await? else {
                    continue;
                };
                if refused.success || !refused.effect.is_empty() {
                    continue;
                }
                let record = RecordRef {
                    collection: collection.clone(),
                    id: missing.clone(),
                };
                let counterpart = Counterpart {
                    answer: ok.answer,
                    from: real.clone(),
                    to: missing.clone(),
                };
                self.commit(
                    refused,
                    Purpose::RefusedMissing,
                    Some(record.clone()),
                    Some(counterpart),
                );
                self.refused_lookup(&record, &existing).await?;
                self.goals
                    .push(format!("try {tool} on {} {missing}", singular(&collection)));
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Looks up a missing record with its collection's getter: refused, stored with the
    /// getter's answer for a record that exists.
    async fn refused_lookup(
        &mut self,
        record: &RecordRef,
        existing: &[String],
    ) -> Result<(), WorkflowError> {
        let Some((getter, param)) = self.getter_of(&record.collection) else {
            return Ok(());
        };
        let Some(real) = self.rng.pick(existing).cloned() else {
            return Ok(());
        };
        if !self.room() {
            return Ok(());
        }
        let (Some(ok), Some(refused)) = (
            self.probe(&getter, &one(&param, Value::String(real.clone())))
                .await?,
            self.probe(&getter, &one(&param, Value::String(record.id.clone())))
                .await?,
        ) else {
            return Ok(());
        };
        if ok.is_read() && !refused.success && refused.effect.is_empty() {
            let counterpart = Counterpart {
                answer: ok.answer,
                from: real,
                to: record.id.clone(),
            };
            self.commit(
                refused,
                Purpose::RefusedMissing,
                Some(record.clone()),
                Some(counterpart),
            );
        }
        Ok(())
    }
}

/// Whether `effect` changes `record` the way a goal wants: a status field (`status`), or a
/// scalar field other than a status.
fn changes(effect: &Effect, record: &RecordRef, status: bool) -> bool {
    effect.changed.iter().any(|c| {
        &c.record == record
            && is_status_field(&c.field) == status
            && !c.before.is_object()
            && !c.before.is_array()
            && !c.after.is_object()
            && !c.after.is_array()
    })
}

fn one(name: &str, value: Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(name.to_owned(), value);
    m
}

/// `an issue`, `a ticket`.
fn with_article(noun: &str) -> String {
    let vowel = noun.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {noun}", if vowel { "an" } else { "a" })
}

/// Values records of the state hold in a field named `field` (scalars only).
fn field_values(state: &Value, field: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for collection in collections(state) {
        if let Some(records) = state.get(&collection).and_then(Value::as_object) {
            for record in records.values() {
                if let Some(v) = record.get(field) {
                    if matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
                        && !out.contains(v)
                    {
                        out.push(v.clone());
                    }
                }
            }
        }
    }
    out
}

/// The calendar date (`YYYY-MM-DD`) a week after `clock` (seconds since the epoch).
fn date_of(clock: f64) -> String {
    let days = (clock / 86_400.0).floor() as i64 + 7;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The goals a workflow may pursue.
#[derive(Clone, Copy, Debug)]
enum Goal {
    Lookup,
    Create,
    SearchCreate,
    Update,
    Status,
    Missing,
}

/// Up to `config.per_env` workflows of `package`, executed from its initial states in turn.
/// Deterministic for a seed (the executor's calls are: each step runs with a seed and clock
/// derived from the workflow's).
pub async fn workflows_of(
    executor: &Executor,
    package: &EnvPackage,
    config: &GenerateConfig,
) -> Result<Vec<Workflow>, WorkflowError> {
    let env = package.manifest.name.clone();
    if package.states.is_empty() {
        return Err(WorkflowError::Package {
            env,
            message: "the package has no initial state".into(),
        });
    }
    let catalog = Catalog::of(package);
    let mut out = Vec::new();
    let mut attempt = 0usize;
    // A package whose tools make no workflow is given up after a few tries per workflow.
    while out.len() < config.per_env && attempt < 3 * config.per_env {
        let index = attempt % package.states.len();
        let (state_name, raw) = &package.states[index];
        let clock = package.clock(index).seconds;
        attempt += 1;
        let mut rng = Rng::derive(config.seed, &format!("agent_workflows/{env}/{attempt}"));
        let run_seed = rng.next_u64();
        let initial = match executor.construct(&package.code, raw, 0, clock).await {
            Ok(state) => state,
            Err(e @ (ExecError::Spawn(_) | ExecError::Protocol(_))) => {
                return Err(WorkflowError::Exec {
                    env,
                    state: state_name.clone(),
                    source: e,
                })
            }
            Err(_) => raw.clone(),
        };
        let mut session = Session {
            executor,
            package,
            catalog: &catalog,
            state_name,
            state: initial,
            steps: Vec::new(),
            rng,
            run_seed,
            clock,
            goals: Vec::new(),
        };
        let mut goals = [
            Goal::Create,
            Goal::SearchCreate,
            Goal::Update,
            Goal::Status,
            Goal::Missing,
            Goal::Lookup,
        ];
        session.rng.shuffle(&mut goals);
        let mut met = 0;
        for goal in goals {
            if met == 3 || session.steps.len() >= 8 {
                break;
            }
            let done = match goal {
                Goal::Lookup => session.lookup().await?,
                Goal::Create => session.create_and_check(false).await?,
                Goal::SearchCreate => session.create_and_check(true).await?,
                Goal::Update => session.change_and_verify(false).await?,
                Goal::Status => session.change_and_verify(true).await?,
                Goal::Missing => session.refused_on_missing().await?,
            };
            met += usize::from(done);
        }
        while session.steps.len() < MIN_STEPS {
            if !session.lookup().await? {
                break;
            }
        }
        if session.steps.len() < MIN_STEPS {
            continue;
        }
        let request = format!("Please {}.", session.goals.join(", then "));
        out.push(Workflow {
            env: env.clone(),
            state: state_name.clone(),
            task_id: format!("{env}-{:03}", out.len()),
            request,
            steps: session.steps,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn effects_are_read_from_the_state_change() {
        let before = json!({"issues": {"A-1": {"title": "x", "status": "open"}, "A-2": {"title": "y"}},
                            "settings": {"n": 1}, "seq": 3});
        let after = json!({"issues": {"A-1": {"title": "x", "status": "closed"}, "A-3": {"title": "z"}},
                           "settings": {"n": 2}, "seq": 4});
        let e = effect_of(&before, &after);
        let r = |id: &str| RecordRef {
            collection: "issues".into(),
            id: id.into(),
        };
        assert_eq!(e.created, [r("A-3")]);
        assert_eq!(e.removed, [r("A-2")]);
        assert_eq!(
            e.changed,
            [FieldChange {
                record: r("A-1"),
                field: "status".into(),
                before: json!("open"),
                after: json!("closed")
            }]
        );
        assert!(changes(&e, &r("A-1"), true));
        assert!(!changes(&e, &r("A-1"), false));
        assert!(effect_of(&before, &before).is_empty());
    }

    #[test]
    fn arguments_name_collections_and_descriptions_give_examples() {
        let state =
            json!({"issues": {}, "projects": {"PAY": {}}, "point_lots": {}, "settings": {"a": 1}});
        assert_eq!(collection_of("issue_id", &state).as_deref(), Some("issues"));
        assert_eq!(
            collection_of("project_key", &state).as_deref(),
            Some("projects")
        );
        assert_eq!(
            collection_of("lot_id", &state).as_deref(),
            Some("point_lots")
        );
        assert_eq!(collection_of("setting_id", &state), None);
        assert_eq!(collection_of("title", &state), None);
        assert_eq!(
            example_of("Issue key, e.g. PAY-104"),
            Some("PAY-104".into())
        );
        assert_eq!(
            example_of("Target (e.g. 'in_progress')."),
            Some("in_progress".into())
        );
        assert_eq!(example_of("A title"), None);
        assert_eq!(date_of(1_735_689_600.0), "2025-01-08");
    }
}
