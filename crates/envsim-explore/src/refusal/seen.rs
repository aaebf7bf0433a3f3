//! What tools were seen doing in the exploration so far ([`Seen`]): the fields a call that
//! succeeded set on a record its argument named ([`Write`]), the records it created
//! ([`Creation`]), and which collection's keys an argument takes. The refusal reader follows
//! these to meet a precondition: a chain of writes that leads a field to the value asked for,
//! or a creation of a record that starts with it.

use crate::driver::{stem_names, RecordRef, StateIndex};
use envsim_core::diff::fine_diff;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// A change a tool was seen making to one field of a record its argument named.
#[derive(Clone, Debug, PartialEq)]
pub struct Write {
    /// The tool.
    pub tool: String,
    /// The record's collection.
    pub collection: String,
    /// The field set.
    pub field: String,
    /// The argument that named the record.
    pub param: String,
    /// The value it replaced (`null` when the field was new).
    pub from: Value,
    /// The value it set.
    pub to: Value,
}

/// A record a tool was seen creating.
#[derive(Clone, Debug, PartialEq)]
pub struct Creation {
    /// The tool.
    pub tool: String,
    /// The new record's collection.
    pub collection: String,
    /// The arguments that created it.
    pub args: Map<String, Value>,
    /// The new record's own scalar fields (what such a record starts as: an order `placed`).
    pub fields: Map<String, Value>,
}

/// How many writes and creations [`Seen`] keeps (the latest, distinct).
const SEEN_CAP: usize = 256;

/// What tools were seen doing in the exploration so far.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub(super) writes: Vec<Write>,
    creations: Vec<Creation>,
    /// For an argument name, the collection whose key it held in a call that succeeded
    /// (`reporter_id` → `users`): what the argument takes, whatever it is called.
    takes: std::collections::BTreeMap<String, String>,
    /// For a tool, the arguments of its latest call drawn to succeed that did: what a call
    /// made for its answer (a login for the token another tool asks for) is made with.
    succeeded: std::collections::BTreeMap<String, Map<String, Value>>,
}

impl Seen {
    /// Learns from a call of `tool` with `args` that succeeded and turned `before` into
    /// `after`: each field it set on a record an argument names, and
    /// each record it created (a new key of a collection). Returns the records it created and
    /// those it changed that an argument names ([`Touched`]).
    pub fn learn(
        &mut self,
        tool: &str,
        args: &Map<String, Value>,
        before: &Value,
        after: &Value,
    ) -> Touched {
        let named: Vec<(&String, &str)> = args
            .iter()
            .flat_map(|(k, v)| strings(v).into_iter().map(move |s| (k, s)))
            .collect();
        let mut created: BTreeSet<RecordRef> = BTreeSet::new();
        let mut changed: BTreeSet<RecordRef> = BTreeSet::new();
        for change in fine_diff(before, after) {
            let tokens: Vec<&str> = change.pointer.tokens().iter().map(String::as_str).collect();
            // A field of a record an argument names: .../<collection>/<key>/<field>...
            for i in 1..tokens.len().saturating_sub(1) {
                if let Some((param, _)) = named.iter().find(|(_, v)| *v == tokens[i]) {
                    let field = pointer(&tokens[..i + 2]);
                    let write = Write {
                        tool: tool.to_owned(),
                        collection: tokens[i - 1].to_owned(),
                        field: tokens[i + 1].to_owned(),
                        param: (*param).clone(),
                        from: before.pointer(&field).cloned().unwrap_or(Value::Null),
                        to: after.pointer(&field).cloned().unwrap_or(Value::Null),
                    };
                    changed.insert(RecordRef {
                        collection: write.collection.clone(),
                        place: pointer(&tokens[..i]),
                        key: tokens[i].to_owned(),
                    });
                    push_distinct(&mut self.writes, write);
                    break;
                }
            }
            // A new record: a key that was not there, of a collection the index knows.
            let Some((key, parent)) = tokens.split_last() else {
                continue;
            };
            let at = pointer(&tokens);
            let added =
                before.pointer(&at).is_none() && after.pointer(&at).is_some_and(Value::is_object);
            if !added {
                continue;
            }
            // A collection is an object holding records under keys: the added record's parent,
            // named by its own key (the state's root holds no records).
            let Some(collection) = parent.last() else {
                continue;
            };
            {
                let record = RecordRef {
                    collection: (*collection).to_owned(),
                    place: pointer(parent),
                    key: (*key).to_owned(),
                };
                if created.insert(record) {
                    push_distinct(
                        &mut self.creations,
                        Creation {
                            tool: tool.to_owned(),
                            collection: (*collection).to_owned(),
                            args: args.clone(),
                            fields: after
                                .pointer(&at)
                                .and_then(Value::as_object)
                                .map(|m| {
                                    m.iter()
                                        .filter(|(_, v)| !v.is_object() && !v.is_array())
                                        .map(|(k, v)| (k.clone(), v.clone()))
                                        .collect()
                                })
                                .unwrap_or_default(),
                        },
                    );
                }
            }
        }
        Touched {
            created: created.into_iter().collect(),
            changed: changed.into_iter().collect(),
        }
    }

    /// Learns what a call of `tool` drawn to succeed that did shows its arguments take: an
    /// argument that held the key of a record of a collection takes that collection's keys;
    /// and the arguments themselves, as the tool's latest that succeeded.
    pub fn learn_arguments(
        &mut self,
        tool: &str,
        args: &Map<String, Value>,
        state: &Value,
        index: &StateIndex,
    ) {
        self.succeeded.insert(tool.to_owned(), args.clone());
        for (param, value) in args {
            if let Some(record) = strings(value).first().and_then(|s| index.locate(state, s)) {
                self.takes.insert(param.clone(), record.collection);
            }
        }
    }

    /// The arguments of `tool`'s latest call drawn to succeed that did.
    pub fn succeeded_with(&self, tool: &str) -> Option<&Map<String, Value>> {
        self.succeeded.get(tool)
    }

    /// The texts the latest calls drawn to succeed that did took as arguments, each once (by
    /// tool name, then argument name).
    pub fn succeeded_texts(&self) -> impl Iterator<Item = &str> {
        let mut seen = BTreeSet::new();
        self.succeeded
            .values()
            .flat_map(|args| args.values().filter_map(Value::as_str))
            .filter(move |t| seen.insert(*t))
    }

    /// The collection whose keys an argument was seen taking in a call that succeeded.
    pub fn takes(&self, param: &str) -> Option<&str> {
        self.takes.get(param).map(String::as_str)
    }

    /// The first write of a shortest chain of writes seen on `collection`'s `field` that
    /// leads from `from` to a value `goal` accepts (`None` when no chain does).
    pub fn first_step<'s>(
        &'s self,
        collection: &str,
        field: &str,
        from: &'s Value,
        goal: impl Fn(&Value) -> bool,
    ) -> Option<&'s Write> {
        let edges: Vec<&Write> = self
            .writes
            .iter()
            .filter(|w| w.collection == collection && w.field == field && w.from != w.to)
            .collect();
        // Breadth first over values, remembering the first write of the path to each.
        let mut reached: Vec<(&Value, &Write)> = Vec::new();
        let mut frontier: Vec<(&Value, Option<&Write>)> = vec![(from, None)];
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for (value, first) in frontier {
                for edge in edges.iter().filter(|e| e.from == *value) {
                    if edge.to == *from || reached.iter().any(|(v, _)| **v == edge.to) {
                        continue;
                    }
                    let first = first.unwrap_or(edge);
                    if goal(&edge.to) {
                        return Some(first);
                    }
                    reached.push((&edge.to, first));
                    next.push((&edge.to, Some(first)));
                }
            }
            frontier = next;
        }
        None
    }

    /// Writes seen on `collection`.
    pub fn writes_on<'a>(&'a self, collection: &'a str) -> impl Iterator<Item = &'a Write> {
        self.writes
            .iter()
            .filter(move |w| w.collection == collection)
    }

    /// The latest creation seen of a record of `collection` whose `field` started as a value
    /// `wanted` accepts.
    pub fn creation_where(
        &self,
        collection: &str,
        field: &str,
        wanted: impl Fn(&Value) -> bool,
    ) -> Option<&Creation> {
        self.creations
            .iter()
            .rev()
            .find(|c| c.collection == collection && c.fields.get(field).is_some_and(&wanted))
    }

    /// The latest creation seen of a record of the collection an id's stem names (`draft` for
    /// `draft_id`): found by name, since a collection with no record left is no collection
    /// the state's index knows.
    pub fn creation_for(&self, stem: &str) -> Option<&Creation> {
        self.creations
            .iter()
            .rev()
            .find(|c| stem_names(stem, &c.collection))
    }
}

/// The records a call created and changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Touched {
    /// New records.
    pub created: Vec<RecordRef>,
    /// Records an argument named whose fields it set.
    pub changed: Vec<RecordRef>,
}

/// Keeps the latest [`SEEN_CAP`] distinct entries.
fn push_distinct<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if list.contains(&item) {
        return;
    }
    if list.len() == SEEN_CAP {
        list.remove(0);
    }
    list.push(item);
}

/// The strings of a value: itself, or the strings of a list.
pub(super) fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// The JSON pointer of unescaped tokens.
fn pointer(tokens: &[&str]) -> String {
    tokens
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}
