//! Checkers of a task's final state that hold only what the task determines.
//!
//! A checker made from one execution of a task's reference calls demands every value that run
//! left, including what the environment drew from the call's seed or read from the clock (a
//! payment's `TXN-…` reference, a creation stamp, a generated id): an agent that does the task
//! right under another seed, or a few calls later, fails it. [`StateChecker::from_runs`] takes
//! the final states of the same calls executed under several seeds and clocks and keeps:
//! - `expect`: the values every run left alike, by location (RFC 6901 pointers);
//! - `absent`: the locations every run removed;
//! - `vary`: locations whose value changes from run to run, checked by kind (a string stays a
//!   string) and, where every run agrees on one, by relation (the value at another location,
//!   or the key of a record the task created), each with the reason it varies;
//! - `created`: records added under keys that change from run to run (generated ids), each
//!   met by a record whose key the initial state lacks and whose determined fields hold their
//!   values;
//! - `dropped`: what no check can hold (present under some runs only, a list whose length
//!   changes), with the reason.
//!
//! What the reference calls did not touch is not checked. A checker made from one run
//! ([`StateChecker::from_final`]) is the older form: `expect` and `absent` only.

use crate::diff::fine_diff;
use crate::pointer::JsonPointer;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// A checker of a final state (`{"type": "state_values", …}` in task files).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateChecker {
    /// Always `state_values` (the only kind of checker there is).
    #[serde(rename = "type")]
    pub form: CheckerForm,
    /// Values every run left alike, by pointer.
    pub expect: Map<String, Value>,
    /// Locations every run removed.
    #[serde(default)]
    pub absent: Vec<String>,
    /// Locations whose value changes from run to run: checked by kind and relation.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vary: BTreeMap<String, Varying>,
    /// Records added under keys that change from run to run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created: Vec<CreatedRecord>,
    /// What is not checked, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<Dropped>,
    /// The executions it was made from (1: nothing could be told apart).
    #[serde(default = "one_run", skip_serializing_if = "is_one")]
    pub runs: usize,
}

/// The kinds of checker (`type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckerForm {
    /// Values at locations of the final state.
    #[default]
    StateValues,
}

fn one_run() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// A value that changes from run to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Varying {
    /// The kind every run gave it.
    pub kind: Kind,
    /// What it equals in every run, when something does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Relation>,
    /// Why it is not checked by value.
    #[serde(default)]
    pub why: String,
}

/// The kind of a JSON value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `null`.
    Null,
    /// `true` or `false`.
    Boolean,
    /// A number.
    Number,
    /// A string.
    String,
    /// A list.
    Array,
    /// An object.
    Object,
}

impl Kind {
    /// The kind of `value`.
    pub fn of(value: &Value) -> Kind {
        match value {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Boolean,
            Value::Number(_) => Kind::Number,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Boolean => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Array => "a list",
            Kind::Object => "an object",
        }
    }
}

/// What a varying value equals in every run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Relation {
    /// The value at this location of the final state.
    At(String),
    /// The key of the record that meets `created[i]`.
    CreatedKey(usize),
}

/// A record the task adds under a key that changes from run to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreatedRecord {
    /// The object that holds it (a pointer).
    #[serde(rename = "in")]
    pub within: String,
    /// Why its key is not checked by value.
    #[serde(default)]
    pub why: String,
    /// Its values every run left alike, by pointer relative to the record ("" is the record).
    #[serde(default)]
    pub expect: Map<String, Value>,
    /// Its values that change from run to run, by relative pointer.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vary: BTreeMap<String, Varying>,
}

/// A location no check holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dropped {
    /// The location (`*` stands for a created record's key).
    pub at: String,
    /// Why.
    pub why: String,
}

/// Why a value is not a checker.
#[derive(Debug, thiserror::Error)]
pub enum CheckerError {
    /// Not a checker's shape (the message names the field).
    #[error("{0}")]
    Shape(#[from] serde_json::Error),
    /// A location that is not a JSON Pointer.
    #[error("`{field}`: {pointer:?} is not a JSON Pointer (\"\" or starting with '/')")]
    Pointer {
        /// The field that holds it.
        field: String,
        /// The text.
        pointer: String,
    },
    /// A relation to a created record the checker lacks.
    #[error("`{field}`: created_key {index} names no record (the checker has {count})")]
    Relation {
        /// The field that holds it.
        field: String,
        /// The index given.
        index: usize,
        /// Created records in the checker.
        count: usize,
    },
    /// No run to make a checker from.
    #[error("a checker needs at least one run")]
    NoRuns,
}

/// One execution of the reference calls: what it was run under, and the state it left.
#[derive(Clone, Copy, Debug)]
pub struct Run<'a> {
    /// The seed of its calls.
    pub seed: u64,
    /// How far its clock was moved (seconds).
    pub clock_shift: f64,
    /// Its final state.
    pub state: &'a Value,
}

/// What a final state gets right and wrong against a checker.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// Checks made.
    pub checks: usize,
    /// What is wrong, one line per failed check.
    pub failures: Vec<String>,
}

impl StateChecker {
    /// Reads a checker and checks its locations and relations.
    pub fn parse(value: &Value) -> Result<StateChecker, CheckerError> {
        let checker: StateChecker = serde_json::from_value(value.clone())?;
        checker.validate()?;
        Ok(checker)
    }

    /// Checks its locations and relations (what [`StateChecker::parse`] does after reading).
    pub fn validate(&self) -> Result<(), CheckerError> {
        let pointer = |field: &str, p: &str| {
            if p.is_empty() || p.starts_with('/') {
                Ok(())
            } else {
                Err(CheckerError::Pointer {
                    field: field.to_owned(),
                    pointer: p.to_owned(),
                })
            }
        };
        let relation = |field: &str, v: &Varying| match &v.equals {
            Some(Relation::At(p)) => pointer(field, p),
            Some(Relation::CreatedKey(i)) if *i >= self.created.len() => {
                Err(CheckerError::Relation {
                    field: field.to_owned(),
                    index: *i,
                    count: self.created.len(),
                })
            }
            _ => Ok(()),
        };
        for p in self.expect.keys() {
            pointer("expect", p)?;
        }
        for p in &self.absent {
            pointer("absent", p)?;
        }
        for (p, v) in &self.vary {
            pointer("vary", p)?;
            relation("vary", v)?;
        }
        for (i, c) in self.created.iter().enumerate() {
            let field = format!("created[{i}]");
            pointer(&format!("{field}.in"), &c.within)?;
            for p in c.expect.keys() {
                pointer(&format!("{field}.expect"), p)?;
            }
            for (p, v) in &c.vary {
                pointer(&format!("{field}.vary"), p)?;
                relation(&format!("{field}.vary"), v)?;
            }
        }
        Ok(())
    }

    /// The checker of one run: every location the run changed, by value.
    pub fn from_final(initial: &Value, fin: &Value) -> StateChecker {
        let run = Run {
            seed: 0,
            clock_shift: 0.0,
            state: fin,
        };
        Builder::new(std::slice::from_ref(&run)).build(initial)
    }

    /// The checker of several runs of the same calls from `initial`: what they left alike by
    /// value, what differs by kind and relation, what cannot be checked dropped with the
    /// reason.
    pub fn from_runs(initial: &Value, runs: &[Run<'_>]) -> Result<StateChecker, CheckerError> {
        if runs.is_empty() {
            return Err(CheckerError::NoRuns);
        }
        Ok(Builder::new(runs).build(initial))
    }

    /// Checks made: one per expected value, absent location, varying value and created record.
    pub fn checks(&self) -> usize {
        self.expect.len() + self.absent.len() + self.vary.len() + self.created.len()
    }

    /// What `state` (reached from `initial`) gets wrong.
    pub fn check(&self, initial: &Value, state: &Value) -> Verdict {
        let mut failures = Vec::new();
        for (pointer, value) in &self.expect {
            match state.pointer(pointer) {
                Some(v) if v == value => {}
                Some(v) => failures.push(format!("{pointer}: {v}, expected {value}")),
                None => failures.push(format!("{pointer}: missing, expected {value}")),
            }
        }
        for pointer in &self.absent {
            if state.pointer(pointer).is_some() {
                failures.push(format!("{pointer}: present, expected absent"));
            }
        }
        let assigned = self.assign_created(initial, state);
        for (i, (record, got)) in self.created.iter().zip(&assigned).enumerate() {
            if got.is_none() {
                failures.push(self.unmet(i, record, initial, state));
            }
        }
        for (pointer, varying) in &self.vary {
            match state.pointer(pointer) {
                None => failures.push(format!(
                    "{pointer}: missing, expected {}",
                    varying.kind.name()
                )),
                Some(v) => {
                    if let Err(why) = varying.holds(v, state, &assigned) {
                        failures.push(format!("{pointer}: {why}"));
                    }
                }
            }
        }
        Verdict {
            checks: self.checks(),
            failures,
        }
    }

    /// Per created record, the key of the record that meets it (`None`: none does), chosen
    /// so that as many as possible are met, each by a different record.
    fn assign_created<'s>(&'s self, initial: &Value, state: &'s Value) -> Vec<Option<&'s str>> {
        let candidates: Vec<Vec<&String>> = self
            .created
            .iter()
            .enumerate()
            .map(|(i, c)| self.candidates(i, c, initial, state))
            .collect();
        let mut search = Assignment {
            checker: self,
            state,
            candidates: &candidates,
            current: vec![None; self.created.len()],
            best: vec![None; self.created.len()],
            best_met: 0,
            budget: 100_000,
        };
        search.run(0, 0);
        search.best
    }

    /// Records of `state` that may meet created record `i` on their own: added since
    /// `initial`, its values right, its relations to other locations (not to other created
    /// records) holding.
    fn candidates<'s>(
        &self,
        i: usize,
        record: &CreatedRecord,
        initial: &Value,
        state: &'s Value,
    ) -> Vec<&'s String> {
        let Some(Value::Object(now)) = state.pointer(&record.within) else {
            return Vec::new();
        };
        let before = initial.pointer(&record.within).and_then(Value::as_object);
        let fixed = self.fixed_keys(&record.within);
        now.iter()
            .filter(|(key, _)| {
                !before.is_some_and(|b| b.contains_key(*key)) && !fixed.contains(*key)
            })
            .filter(|(key, value)| {
                record
                    .expect
                    .iter()
                    .all(|(p, want)| value.pointer(p) == Some(want))
                    && record.vary.values().zip(record.vary.keys()).all(|(v, p)| {
                        value.pointer(p).is_some_and(|got| {
                            v.kind == Kind::of(got)
                                && match &v.equals {
                                    Some(Relation::At(at)) => state.pointer(at) == Some(got),
                                    Some(Relation::CreatedKey(j)) if *j == i => {
                                        got.as_str() == Some(key.as_str())
                                    }
                                    _ => true,
                                }
                        })
                    })
            })
            .map(|(key, _)| key)
            .collect()
    }

    /// Keys under `within` that other checks name by value (never a created record's).
    fn fixed_keys(&self, within: &str) -> BTreeSet<String> {
        let prefix = format!("{within}/");
        self.expect
            .keys()
            .chain(self.vary.keys())
            .filter_map(|p| p.strip_prefix(&prefix))
            .map(|rest| {
                let token = rest.split('/').next().unwrap_or(rest);
                token.replace("~1", "/").replace("~0", "~")
            })
            .collect()
    }

    /// Why created record `i` is not met.
    fn unmet(&self, i: usize, record: &CreatedRecord, initial: &Value, state: &Value) -> String {
        let wanted: Vec<String> = record
            .expect
            .iter()
            .map(|(p, v)| format!("{p} = {v}"))
            .chain(
                record
                    .vary
                    .iter()
                    .map(|(p, v)| format!("{p}: {}", v.kind.name())),
            )
            .collect();
        let wanted = if wanted.is_empty() {
            String::new()
        } else {
            format!(" with {}", wanted.join(", "))
        };
        let alone = self.candidates(i, record, initial, state).len();
        if alone > 0 {
            format!(
                "{}: no record added here{wanted} that also relates to the other records as expected",
                record.within
            )
        } else {
            format!("{}: no record added here{wanted}", record.within)
        }
    }
}

impl Varying {
    /// Whether `value` is of the kind and relation expected (`assigned`: the key of the record
    /// that meets each created record, where one does).
    fn holds(&self, value: &Value, state: &Value, assigned: &[Option<&str>]) -> Result<(), String> {
        if Kind::of(value) != self.kind {
            return Err(format!("{value}, expected {}", self.kind.name()));
        }
        match &self.equals {
            None => Ok(()),
            Some(Relation::At(at)) => match state.pointer(at) {
                Some(v) if v == value => Ok(()),
                Some(v) => Err(format!("{value}, expected the value at {at} ({v})")),
                None => Err(format!("{value}, expected the value at {at} (missing)")),
            },
            Some(Relation::CreatedKey(j)) => {
                match assigned.get(*j).copied().flatten() {
                    Some(k) if value.as_str() == Some(k) => Ok(()),
                    Some(k) => Err(format!(
                        "{value}, expected the key of the record added as created[{j}] ({k:?})"
                    )),
                    None => Err(format!(
                        "{value}, expected the key of the record added as created[{j}] (none was added)"
                    )),
                }
            }
        }
    }
}

/// The search for the records that meet the created records.
struct Assignment<'a, 's> {
    checker: &'a StateChecker,
    state: &'s Value,
    candidates: &'a [Vec<&'s String>],
    current: Vec<Option<&'s str>>,
    best: Vec<Option<&'s str>>,
    best_met: usize,
    /// Steps left: a pathological checker gives the best found so far.
    budget: usize,
}

impl Assignment<'_, '_> {
    fn run(&mut self, i: usize, met: usize) {
        if self.budget == 0 {
            return;
        }
        self.budget -= 1;
        if i == self.current.len() {
            if met > self.best_met || self.best_met == 0 && met == 0 {
                self.best_met = met;
                self.best = self.current.clone();
            }
            return;
        }
        // Even meeting every later one cannot beat the best.
        if met + (self.current.len() - i) <= self.best_met && self.best_met > 0 {
            return;
        }
        let within = &self.checker.created[i].within;
        for key in self.candidates[i].iter().map(|k| k.as_str()) {
            let taken = (0..i)
                .any(|j| self.current[j] == Some(key) && &self.checker.created[j].within == within);
            if taken {
                continue;
            }
            self.current[i] = Some(key);
            if self.consistent(i) {
                self.run(i + 1, met + 1);
            }
            self.current[i] = None;
        }
        self.run(i + 1, met);
    }

    /// Whether the relations between created records `0..=i` hold as assigned.
    fn consistent(&self, i: usize) -> bool {
        (0..=i).all(|j| {
            let Some(key) = self.current[j] else {
                return true;
            };
            let record = &self.checker.created[j];
            let Some(value) = self.state.pointer(&record.within).and_then(|c| c.get(key)) else {
                return false;
            };
            record.vary.iter().all(|(p, v)| match &v.equals {
                Some(Relation::CreatedKey(l)) if *l != j && *l <= i => value
                    .pointer(p)
                    .is_some_and(|got| v.holds(got, self.state, &self.current).is_ok()),
                _ => true,
            })
        })
    }
}

/// A part of a checker being made: the whole state's, or a created record's (relative).
#[derive(Default)]
struct Part {
    expect: Map<String, Value>,
    absent: Vec<String>,
    vary: BTreeMap<String, Varying>,
    /// Each varying location's value per run (for relations).
    values: Vec<(String, Vec<Value>)>,
    dropped: Vec<Dropped>,
    created: Vec<Pending>,
}

/// A created record being made.
struct Pending {
    within: String,
    why: String,
    keys: Vec<String>,
    part: Part,
}

struct Builder<'r> {
    runs: &'r [Run<'r>],
}

impl<'r> Builder<'r> {
    fn new(runs: &'r [Run<'r>]) -> Self {
        Builder { runs }
    }

    fn build(&self, initial: &Value) -> StateChecker {
        let mut top = Part::default();
        let finals: Vec<Option<&Value>> = self.runs.iter().map(|r| Some(r.state)).collect();
        self.merge(
            &mut top,
            &JsonPointer::root(),
            Some(initial),
            &finals,
            false,
        );
        // Created records: flattened in order, their index the relation's.
        let keys: Vec<Vec<String>> = top.created.iter().map(|c| c.keys.clone()).collect();
        let relate =
            |values: &[Value], own_fixed: &[(String, Vec<Value>)], before: Option<&str>| {
                if let Some(j) = keys.iter().position(|ks| {
                    ks.len() == values.len()
                        && ks.iter().zip(values).all(|(k, v)| v.as_str() == Some(k))
                }) {
                    return Some(Relation::CreatedKey(j));
                }
                own_fixed
                    .iter()
                    .take_while(|(p, _)| before.is_none_or(|b| p.as_str() != b))
                    .find(|(_, vs)| vs == values)
                    .map(|(p, _)| Relation::At(p.clone()))
            };
        let fixed = std::mem::take(&mut top.values);
        for (pointer, values) in &fixed {
            if let Some(relation) = relate(values, &fixed, Some(pointer)) {
                if let Some(v) = top.vary.get_mut(pointer) {
                    v.equals = Some(relation);
                }
            }
        }
        let mut created = Vec::new();
        for mut pending in std::mem::take(&mut top.created) {
            for (pointer, values) in std::mem::take(&mut pending.part.values) {
                if let Some(relation) = relate(&values, &fixed, None) {
                    if let Some(v) = pending.part.vary.get_mut(&pointer) {
                        v.equals = Some(relation);
                    }
                }
            }
            top.dropped
                .extend(pending.part.dropped.into_iter().map(|d| Dropped {
                    at: format!("{}/*{}", pending.within, d.at),
                    why: d.why,
                }));
            created.push(CreatedRecord {
                within: pending.within,
                why: pending.why,
                expect: pending.part.expect,
                vary: pending.part.vary,
            });
        }
        StateChecker {
            form: CheckerForm::StateValues,
            expect: top.expect,
            absent: top.absent,
            vary: top.vary,
            created,
            dropped: top.dropped,
            runs: self.runs.len(),
        }
    }

    fn merge(
        &self,
        part: &mut Part,
        at: &JsonPointer,
        initial: Option<&Value>,
        finals: &[Option<&Value>],
        nested: bool,
    ) {
        let first = finals[0];
        if finals.iter().all(|f| *f == first) {
            match (initial, first) {
                (Some(before), Some(after)) => {
                    for change in fine_diff(before, after) {
                        let mut full = at.clone();
                        for token in change.pointer.tokens() {
                            full.push(token.clone());
                        }
                        match change.after {
                            Some(v) => {
                                part.expect.insert(full.to_string(), v.clone());
                            }
                            None => part.absent.push(full.to_string()),
                        }
                    }
                }
                (None, Some(after)) => {
                    part.expect.insert(at.to_string(), after.clone());
                }
                (Some(_), None) => part.absent.push(at.to_string()),
                (None, None) => {}
            }
            return;
        }
        let Some(values) = finals.iter().copied().collect::<Option<Vec<&Value>>>() else {
            let present: Vec<Value> = finals.iter().map(|f| Value::Bool(f.is_some())).collect();
            part.dropped.push(Dropped {
                at: at.to_string(),
                why: format!("present under some runs only ({})", self.cause(&present)),
            });
            return;
        };
        if values.iter().all(|v| v.is_object()) {
            self.merge_objects(part, at, initial, &values, nested);
        } else if values.iter().all(|v| v.is_array()) {
            self.merge_lists(part, at, initial, &values, nested);
        } else {
            let kind = Kind::of(values[0]);
            let owned: Vec<Value> = values.iter().map(|v| (*v).clone()).collect();
            if values.iter().all(|v| Kind::of(v) == kind) {
                part.vary.insert(
                    at.to_string(),
                    Varying {
                        kind,
                        equals: None,
                        why: self.cause(&owned),
                    },
                );
                part.values.push((at.to_string(), owned));
            } else {
                part.dropped.push(Dropped {
                    at: at.to_string(),
                    why: format!("its kind changes ({})", self.cause(&owned)),
                });
            }
        }
    }

    fn merge_objects(
        &self,
        part: &mut Part,
        at: &JsonPointer,
        initial: Option<&Value>,
        values: &[&Value],
        nested: bool,
    ) {
        let before = initial.and_then(Value::as_object);
        let objects: Vec<&Map<String, Value>> =
            values.iter().filter_map(|v| v.as_object()).collect();
        let mut keys: Vec<&String> = Vec::new();
        for object in &objects {
            for key in object.keys() {
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
        let in_all = |key: &str| objects.iter().all(|o| o.contains_key(key));
        for key in &keys {
            if in_all(key) {
                let finals: Vec<Option<&Value>> = objects.iter().map(|o| o.get(*key)).collect();
                self.merge(
                    part,
                    &at.child(key.as_str()),
                    before.and_then(|b| b.get(*key)),
                    &finals,
                    nested,
                );
            } else if before.is_some_and(|b| b.contains_key(*key)) {
                let present: Vec<Value> = objects
                    .iter()
                    .map(|o| Value::Bool(o.contains_key(*key)))
                    .collect();
                part.dropped.push(Dropped {
                    at: at.child(key.as_str()).to_string(),
                    why: format!("removed under some runs only ({})", self.cause(&present)),
                });
            }
        }
        if let Some(b) = before {
            for key in b.keys() {
                if !keys.contains(&key) {
                    part.absent.push(at.child(key.as_str()).to_string());
                }
            }
        }
        // Keys added under some runs only: generated ids, when every run added as many.
        let added: Vec<Vec<&String>> = objects
            .iter()
            .map(|o| {
                o.keys()
                    .filter(|k| !in_all(k) && !before.is_some_and(|b| b.contains_key(*k)))
                    .collect()
            })
            .collect();
        if added.iter().all(Vec::is_empty) {
            return;
        }
        let counts: Vec<Value> = added.iter().map(|a| Value::from(a.len())).collect();
        if nested || counts.iter().any(|c| *c != counts[0]) {
            part.dropped.push(Dropped {
                at: at.to_string(),
                why: if nested {
                    "records added under generated keys inside a record added under a generated key".to_owned()
                } else {
                    format!(
                        "records added under keys that differ from run to run, as many as the run decides ({})",
                        self.cause(&counts)
                    )
                },
            });
            return;
        }
        self.created_records(part, at, &objects, &added);
    }

    /// Records added under generated keys, as many in every run: matched across runs (each
    /// of the first run's to the most alike of each other run's), one created record each.
    fn created_records(
        &self,
        part: &mut Part,
        at: &JsonPointer,
        objects: &[&Map<String, Value>],
        added: &[Vec<&String>],
    ) {
        let mut anchors = added[0].clone();
        anchors.sort();
        let mut groups: Vec<Vec<&String>> = anchors.iter().map(|k| vec![*k]).collect();
        for (run, keys) in added.iter().enumerate().skip(1) {
            let mut left: Vec<&String> = keys.clone();
            left.sort();
            for (g, anchor) in anchors.iter().enumerate() {
                let anchor_value = &objects[0][anchor.as_str()];
                let best = (0..left.len())
                    .min_by_key(|&c| fine_diff(anchor_value, &objects[run][left[c].as_str()]).len())
                    .unwrap_or(0);
                groups[g].push(left.remove(best));
            }
        }
        for group in groups {
            let keys: Vec<Value> = group.iter().map(|k| Value::String((*k).clone())).collect();
            let finals: Vec<Option<&Value>> = group
                .iter()
                .zip(objects)
                .map(|(k, o)| o.get(k.as_str()))
                .collect();
            let mut record = Part::default();
            self.merge(&mut record, &JsonPointer::root(), None, &finals, true);
            part.created.push(Pending {
                within: at.to_string(),
                why: format!("its key is generated ({})", self.cause(&keys)),
                keys: group.iter().map(|k| (*k).clone()).collect(),
                part: record,
            });
        }
    }

    fn merge_lists(
        &self,
        part: &mut Part,
        at: &JsonPointer,
        initial: Option<&Value>,
        values: &[&Value],
        nested: bool,
    ) {
        let lists: Vec<&Vec<Value>> = values.iter().filter_map(|v| v.as_array()).collect();
        let before = initial.and_then(Value::as_array);
        let common = lists.iter().map(|l| l.len()).min().unwrap_or(0);
        let longest = lists.iter().map(|l| l.len()).max().unwrap_or(0);
        for i in 0..common {
            let finals: Vec<Option<&Value>> = lists.iter().map(|l| l.get(i)).collect();
            self.merge(
                part,
                &at.child(i.to_string()),
                before.and_then(|b| b.get(i)),
                &finals,
                nested,
            );
        }
        if longest > common {
            let lengths: Vec<Value> = lists.iter().map(|l| Value::from(l.len())).collect();
            part.dropped.push(Dropped {
                at: at.to_string(),
                why: format!(
                    "its length changes ({}): items from index {common} on are not checked",
                    self.cause(&lengths)
                ),
            });
        }
        // Removed from the tail in every run: highest index first, as a diff lists them.
        for i in (longest..before.map_or(0, Vec::len)).rev() {
            part.absent.push(at.child(i.to_string()).to_string());
        }
    }

    /// What a value that changes from run to run changes with (the seed, the clock, both),
    /// with what two runs gave.
    fn cause(&self, values: &[Value]) -> String {
        let (mut seed, mut clock, mut both) = (None, None, None);
        for a in 0..values.len() {
            for b in a + 1..values.len() {
                if values[a] == values[b] {
                    continue;
                }
                let same_seed = self.runs[a].seed == self.runs[b].seed;
                let same_clock = self.runs[a].clock_shift == self.runs[b].clock_shift;
                let slot = match (same_seed, same_clock) {
                    (false, true) => &mut seed,
                    (true, false) => &mut clock,
                    _ => &mut both,
                };
                slot.get_or_insert((a, b));
            }
        }
        let (what, (a, b)) = match (seed, clock, both) {
            (Some(s), Some(_), _) => ("the seed and with the clock", s),
            (Some(s), None, _) => ("the seed", s),
            (None, Some(c), _) => ("the clock", c),
            (None, None, Some(x)) => ("the seed and the clock together", x),
            (None, None, None) => ("nothing", (0, 0)),
        };
        format!(
            "changes with {what}: {} under run {}, {} under run {}",
            short(&values[a]),
            a + 1,
            short(&values[b]),
            b + 1
        )
    }
}

/// A value in a message: at most 40 characters of its JSON.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 40 {
        text
    } else {
        let cut: String = text.chars().take(37).collect();
        format!("{cut}...")
    }
}

#[cfg(test)]
mod tests;
