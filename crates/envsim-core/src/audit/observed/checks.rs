//! The checks of a call-only trajectory, one function per concern, over the history the
//! calls so far make known ([`CallsHistory`]); [`super::audit_calls`] runs each call through
//! them in order and then learns what a success makes known.

use super::*;
use crate::audit::implied::{same, CompleteSource};
use crate::audit::nouns::holds;
use std::collections::BTreeMap;

/// A value a change set: in this field, or (`None`) in a field not known.
pub(super) type SetValue = (Option<String>, Value);

/// What the calls so far imply, and what the checks remember of them.
pub(super) struct CallsHistory {
    /// Existence, field values, complete listings.
    pub(super) st: ImpliedState,
    /// Since the last change: listings by call signature (tool and arguments).
    pub(super) listings: HashMap<String, (usize, BTreeSet<String>)>,
    /// Since the last change: calls by signature, with their outcome and answer.
    pub(super) calls: HashMap<String, (usize, Option<bool>, Value)>,
    /// Successful reads by signature, kept across changes: a read that repeats a pre-change
    /// answer word for word after a change of what it shows is stale.
    pub(super) reads: HashMap<String, (usize, Value)>,
    /// Per resource: the last successful change of it, with the values it set that differ
    /// from what was known.
    pub(super) changed: HashMap<Key, (usize, Vec<SetValue>)>,
}

/// The records of a successful answer: each with its record and whether it sat in a list.
pub(super) type Found<'v> = [(Key, &'v Map<String, Value>, bool)];

/// One call under check: what it is and names, and what its checks found.
pub(super) struct CallCheck<'t, 'e> {
    pub(super) effects: &'e Effects,
    pub(super) k: usize,
    pub(super) step: &'t CallStep,
    pub(super) fx: ToolEffects,
    pub(super) role: Role,
    pub(super) noun: String,
    pub(super) names: Vec<(String, Key)>,
    pub(super) writes: std::borrow::Cow<'e, crate::audit::implied::Writes>,
    /// The resource a change is about: the argument its writes name, else the name's guess.
    pub(super) aim: Option<Key>,
    /// The tool and its arguments: what makes two calls the same call.
    pub(super) signature: String,
    /// What its checks found (apart from the rest, so a check can flag while it reads them).
    pub(super) out: Findings<'t>,
}

/// What a call's checks found: constraints checked, and violations placed at the call.
pub(super) struct Findings<'t> {
    site: crate::audit::Site<'t>,
    pub(super) checked: usize,
    pub(super) violations: Vec<crate::audit::Violation>,
}

impl Findings<'_> {
    /// Records a violation at the call.
    pub(super) fn flag(
        &mut self,
        kind: ViolationKind,
        resource: Option<&Key>,
        field: Option<String>,
        conflicting: Option<usize>,
        explanation: String,
    ) {
        self.violations.push(self.site.violation(
            kind,
            resource.map(show),
            field,
            conflicting,
            explanation,
        ));
    }
}

impl<'t, 'e> CallCheck<'t, 'e> {
    pub(super) fn new(
        trajectory: &'t str,
        k: usize,
        step: &'t CallStep,
        effects: &'e Effects,
    ) -> Self {
        let fx = effects.of(&step.tool);
        let role = role(&fx);
        let noun = tool_noun(&step.tool);
        let names = named(&noun, &step.arguments);
        let writes = effects.writes_of(&step.tool);
        // The record the walks showed the tool changing, typed by the collection they showed it
        // in: `update_draft(draft_id=…)` changes a message, which reads return as a message.
        let aim: Option<Key> = writes
            .target
            .as_ref()
            .and_then(|t| names.iter().find(|(arg, _)| arg == t))
            .map(|(_, key)| match &writes.target_collection {
                Some(collection) if !collection.contains('*') => {
                    (crate::audit::nouns::singular(collection), key.1.clone())
                }
                _ => key.clone(),
            })
            .or_else(|| target(&noun, &names));
        let signature = format!(
            "{}\u{1}{}",
            step.tool,
            Value::Object(step.arguments.clone())
        );
        let site = crate::audit::Site {
            trajectory,
            step: k,
            tool: &step.tool,
            effects: fx.source,
        };
        CallCheck {
            effects,
            k,
            step,
            fx,
            role,
            noun,
            names,
            writes,
            aim,
            signature,
            out: Findings {
                site,
                checked: 0,
                violations: Vec::new(),
            },
        }
    }
}

impl CallCheck<'_, '_> {
    /// The target as this trajectory already knows it ([`settled`]).
    pub(super) fn settle_aim(&mut self, st: &ImpliedState) {
        if let Some(aim) = self.aim.take() {
            self.aim = Some(settled(st, aim));
        }
    }
}

/// A record as this trajectory already knows it: one typed by the collection the walks saw
/// a call change (`put_on_hold(rx_id=…)` changes a prescription), whose record the
/// trajectory's reads returned under another type only (`rx`, from the answer's `rx_id`), is
/// the record the reads returned.
fn settled(st: &ImpliedState, key: Key) -> Key {
    if st.fields.contains_key(&key) {
        return key;
    }
    let mut others = (st.fields.keys()).filter(|other| other.1 == key.1 && other.0 != key.0);
    match (others.next(), others.next()) {
        (Some(one), None) => one.clone(),
        _ => key,
    }
}

/// `key`'s twins ([`ImpliedState::twins`]), each with what is known of it.
fn twins_known(st: &ImpliedState, key: &Key) -> Vec<(Key, BTreeMap<String, Fact>)> {
    (st.twins(key).into_iter())
        .map(|twin| {
            let old = st.fields.get(&twin).cloned().unwrap_or_default();
            (twin, old)
        })
        .collect()
}

/// The same call, with nothing changed since: the same outcome and answer.
pub(super) fn repeated_call(c: &mut CallCheck<'_, '_>, h: &CallsHistory) {
    if let Some((j, outcome, answer)) = h.calls.get(&c.signature) {
        c.out.checked += 1;
        if *outcome != c.step.success || *answer != c.step.observation {
            let what = if *outcome != c.step.success {
                "outcome"
            } else {
                "answer"
            };
            c.out.flag(
                ViolationKind::ContradictoryRepeat,
                None,
                None,
                Some(*j),
                format!(
                    "{} repeats the call of step {j} with nothing changed between, and gets another {what}",
                    c.step.tool
                ),
            );
        }
    }
}

/// A successful answer against the shape learned for the tool (or the environment's
/// vocabulary).
pub(super) fn response_shape(c: &mut CallCheck<'_, '_>) {
    if c.step.success != Some(true) {
        return;
    }
    if let Some(problems) = c.effects.shape_problems(&c.step.tool, &c.step.observation) {
        c.out.checked += 1;
        if !problems.is_empty() {
            c.out.flag(
                ViolationKind::ResponseShape,
                None,
                None,
                None,
                format!("{} responds with {}", c.step.tool, problems.join("; ")),
            );
        }
    }
}

/// The resources a successful call names: not deleted, not reported missing, and held by a
/// complete earlier listing (or the initial state) of their type.
pub(super) fn named_resources(c: &mut CallCheck<'_, '_>, st: &ImpliedState) {
    for (arg, key) in &c.names {
        match st.existence.get(key) {
            Some(Existence::Gone(j)) if c.role != Role::Create => {
                c.out.checked += 1;
                let explanation = format!(
                    "{} succeeds on {}, which step {j} deleted",
                    c.step.tool,
                    show(key)
                );
                c.out.flag(
                    ViolationKind::ReadAfterDelete,
                    Some(key),
                    Some(arg.clone()),
                    Some(*j),
                    explanation,
                );
            }
            Some(Existence::Missing(j)) if c.role != Role::Create => {
                c.out.checked += 1;
                let explanation = format!("{} succeeds on {}, which step {j} reported not found; nothing created it since", c.step.tool, show(key));
                c.out.flag(
                    ViolationKind::PhantomId,
                    Some(key),
                    Some(arg.clone()),
                    Some(*j),
                    explanation,
                );
            }
            Some(Existence::Exists(_)) => c.out.checked += 1,
            _ => {
                if let Some((source, ids)) = st.complete_of(&key.0) {
                    c.out.checked += 1;
                    if !may_make(c, key, st)
                        && !ids.contains(&key.1)
                        && !st.seen_as_another_type(key)
                    {
                        let explanation = format!(
                            "{} succeeds on {}, {}; nothing created it since",
                            c.step.tool,
                            show(key),
                            source.not_held()
                        );
                        c.out.flag(
                            ViolationKind::PhantomId,
                            Some(key),
                            Some(arg.clone()),
                            source.step(),
                            explanation,
                        );
                    }
                }
            }
        }
    }
}

/// Arguments not named like ids that name a record all the same (`update_price(symbol=…)`,
/// where the states key instruments by symbol): a success on a value no complete listing of
/// that collection holds, that nothing made, is a phantom.
pub(super) fn keyed_arguments(c: &mut CallCheck<'_, '_>, st: &ImpliedState) {
    // A read's argument may be a filter's sentinel (`assignee="unassigned"`), unless it is
    // the very record the read is named for (`get_domain(domain=…)`); and only what the
    // package's states hold is known whole (a listing's records may be another view).
    for (arg, value) in &c.step.arguments {
        let (Some(collection), Value::String(text)) = (st.keyed_by.get(arg), value) else {
            continue;
        };
        if c.role == Role::Read && !(arg == collection && c.noun == *collection) {
            continue;
        }
        let key: Key = (collection.clone(), text.clone());
        if st.existence.contains_key(&key) || c.names.iter().any(|(_, n)| n.1 == key.1) {
            continue;
        }
        let Some((source, ids)) = st.complete.get(collection).filter(|(source, _)| {
            matches!(
                source,
                CompleteSource::Initial | CompleteSource::AnyInitial(_)
            )
        }) else {
            continue;
        };
        c.out.checked += 1;
        if !ids.contains(text) && !may_make(c, &key, st) && !st.seen_as_another_type(&key) {
            let explanation = format!(
                "{} succeeds on {arg} = {text:?}, naming {collection}/{text}, {}; nothing created it since",
                c.step.tool,
                source.not_held()
            );
            c.out.flag(
                ViolationKind::PhantomId,
                Some(&key),
                Some(arg.clone()),
                source.step(),
                explanation,
            );
        }
    }
}

/// Whether the call may make what `key` names: a creation, of its own type or of a type its
/// walks saw it create (or of any type, where that is not known). A creation names other
/// things that must exist (`report_damage(reservation_id=…)` makes a damage report about an
/// existing reservation).
fn may_make(c: &CallCheck<'_, '_>, key: &Key, st: &ImpliedState) -> bool {
    let noun = st.aliases.get(&key.0).unwrap_or(&key.0);
    // Where its successes were seen, what they made is known: the "any type" its name lets
    // it make is no evidence (`create_listing` names a seller, who is a user: the walks saw it
    // make listings only).
    let seen = c.fx.source == EffectSource::Observed && c.fx.creates_known;
    c.role == Role::Create
        && (key.0 == c.noun
            || !c.fx.creates_known
            || (c.fx.creates.iter())
                .any(|collection| (collection == "*" && !seen) || holds(collection, noun)))
}

/// Preconditions the tool's walks showed, against what is known of its target.
pub(super) fn preconditions(c: &mut CallCheck<'_, '_>, st: &ImpliedState) {
    let Some(aim) = &c.aim else {
        return;
    };
    let Some(facts) = st.fields.get(aim) else {
        return;
    };
    for guard in &c.writes.guards {
        let broken = match guard {
            Guard::FieldIs { field, value } => facts
                .get(field)
                .map(|fact| (same(&fact.value, value), field, fact)),
            Guard::ExceedsField { argument, field } => {
                let given = c.step.arguments.get(argument).and_then(Value::as_f64);
                facts.get(field).and_then(|fact| {
                    let held = fact.value.as_f64()?;
                    Some((given? > held, field, fact))
                })
            }
        };
        let Some((broken, field, fact)) = broken else {
            continue;
        };
        c.out.checked += 1;
        if broken {
            let when = match fact.source.step() {
                Some(j) => format!("step {j} showed"),
                None => "the initial state holds".to_owned(),
            };
            let rule = match guard {
                Guard::FieldIs { .. } => {
                    format!("it always failed while {field} = {}", fact.value)
                }
                Guard::ExceedsField { argument, .. } => {
                    format!("it always failed when {argument} exceeded {field}")
                }
            };
            let explanation = format!(
                "{} succeeds although {when} {}.{field} = {}; in the environment's walks {rule}",
                c.step.tool,
                show(aim),
                fact.value
            );
            c.out.flag(
                ViolationKind::PreconditionFailed,
                Some(aim),
                Some(field.clone()),
                fact.source.step(),
                explanation,
            );
        }
    }
}

/// Whether a change's answer holds `key` to what was known of it: the record is the change's
/// target, and the walks showed what the change writes there (successes that changed it, at
/// least [`MIN_EVIDENCE`]), so every other field of it is what it was.
fn holds_unwritten_fields(c: &CallCheck<'_, '_>, key: &Key) -> bool {
    c.role == Role::Change
        && c.aim.as_ref() == Some(key)
        && c.writes.source == EffectSource::Observed
        && c.writes.changes_seen >= crate::audit::MIN_EVIDENCE
}

/// Returned records: deleted ones returned, and, for reads, phantoms no complete listing held
/// and fields against what is known (stale reads, statuses moved back). Returns the records
/// found stale.
pub(super) fn returned_records(
    c: &mut CallCheck<'_, '_>,
    st: &ImpliedState,
    found: &Found<'_>,
) -> BTreeSet<Key> {
    let mut stale_here: BTreeSet<Key> = BTreeSet::new();
    for (key, record, _) in found {
        if let Some(Existence::Gone(j)) = st.existence.get(key) {
            // A create may bring the id back; a call naming it was judged above.
            if c.role != Role::Create && !c.names.iter().any(|(_, n)| n == key) {
                c.out.checked += 1;
                let explanation = format!(
                    "{} returns {}, which step {j} deleted",
                    c.step.tool,
                    show(key)
                );
                c.out.flag(
                    ViolationKind::ReadAfterDelete,
                    Some(key),
                    None,
                    Some(*j),
                    explanation,
                );
            }
        }
        // A change's answer shows the state after it: only reads are held to what was known
        // before — and a change's own target, in the fields the walks never saw it write
        // (`open_message` marks a message read; the subject it answers is the subject known).
        let unwritten_only = c.role != Role::Read;
        if unwritten_only && !holds_unwritten_fields(c, key) {
            continue;
        }
        // A record no complete listing (or the initial state) held, that nothing created or
        // showed since: a phantom.
        let named_here = c.names.iter().any(|(_, n)| n == key);
        if !unwritten_only && !named_here && !st.existence.contains_key(key) {
            if let Some((source, ids)) = st.complete.get(&key.0) {
                c.out.checked += 1;
                if !ids.contains(&key.1) && !st.seen_as_another_type(key) {
                    let explanation = format!(
                        "{} returns {}, {}; nothing created it since",
                        c.step.tool,
                        show(key),
                        source.not_held()
                    );
                    c.out.flag(
                        ViolationKind::PhantomId,
                        Some(key),
                        None,
                        source.step(),
                        explanation,
                    );
                }
            }
        }
        let known = st.fields.get(key);
        let moved = st.replaced.get(key);
        for (field, value) in record.iter() {
            if value.is_object() || value.is_array() {
                continue;
            }
            if unwritten_only
                && (c.writes.touches.contains(field) || c.writes.reported_differs.contains(field))
            {
                continue;
            }
            let back = moved
                .and_then(|m| m.get(field))
                .filter(|r| same(&r.value, value));
            let reverted = back.filter(|r| r.status);
            let tool = &c.step.tool;
            match known.and_then(|f| f.get(field)) {
                Some(fact) => {
                    // The initial state may write a value in another type than the answers
                    // do (a number as text); only like is compared.
                    if fact.source == FactSource::Initial
                        && std::mem::discriminant(&fact.value) != std::mem::discriminant(value)
                    {
                        continue;
                    }
                    c.out.checked += 1;
                    if same(&fact.value, value) {
                        continue;
                    }
                    stale_here.insert(key.clone());
                    let (kind, conflicting, explanation) = match (reverted, fact.source) {
                        (Some(r), _) => (
                            ViolationKind::StatusReverted,
                            Some(r.step),
                            format!("{tool} returns {}.{field} = {value}, the value step {} moved it from (to {}); no call since moves it back", show(key), r.step, fact.value),
                        ),
                        (None, FactSource::Set(j)) => (
                            ViolationKind::StaleRead,
                            Some(j),
                            format!("{tool} returns {}.{field} = {value}; step {j} set it to {} and nothing changed it since", show(key), fact.value),
                        ),
                        (None, FactSource::Returned(j)) => (
                            ViolationKind::StaleRead,
                            Some(j),
                            format!("{tool} returns {}.{field} = {value}; step {j} gave {} and nothing changed it since", show(key), fact.value),
                        ),
                        (None, FactSource::Initial) => (
                            ViolationKind::StaleRead,
                            None,
                            format!("{tool} returns {}.{field} = {value}; the initial state holds {} and nothing changed it since", show(key), fact.value),
                        ),
                    };
                    c.out.flag(
                        kind,
                        Some(key),
                        Some(field.clone()),
                        conflicting,
                        explanation,
                    );
                }
                None => {
                    if let Some(r) = back {
                        c.out.checked += 1;
                        stale_here.insert(key.clone());
                        let explanation = format!("{tool} returns {}.{field} = {value}, the value step {} moved it from; no call since moves it back", show(key), r.step);
                        c.out.flag(
                            if r.status {
                                ViolationKind::StatusReverted
                            } else {
                                ViolationKind::StaleRead
                            },
                            Some(key),
                            Some(field.clone()),
                            Some(r.step),
                            explanation,
                        );
                    }
                }
            }
        }
    }
    stale_here
}

/// A word-for-word repeat of a read made before a change of what it names, when the answer
/// holds none of the values the change set.
pub(super) fn repeated_read(
    c: &mut CallCheck<'_, '_>,
    h: &mut CallsHistory,
    stale_here: &BTreeSet<Key>,
) {
    if let Some((j, before)) = h.reads.get(&c.signature) {
        if *before == c.step.observation {
            let text = c.step.observation.to_string();
            for (_, key) in &c.names {
                let Some((changed_at, set)) = h.changed.get(key) else {
                    continue;
                };
                if changed_at <= j || set.is_empty() || stale_here.contains(key) {
                    continue;
                }
                // A read that shows none of the fields the change is known to set is another
                // view of the record (a flight's seat map, an account's history): the same
                // answer is no evidence of anything. A value of unknown field may be anywhere.
                let shown =
                    |field: &Option<String>| field.as_ref().is_none_or(|f| has_field(before, f));
                if !set.iter().any(|(field, _)| shown(field)) {
                    continue;
                }
                c.out.checked += 1;
                if !set
                    .iter()
                    .any(|(_, v)| contains_value(&c.step.observation, v, &text))
                {
                    let explanation = format!("{} repeats word for word its answer of step {j}, from before step {changed_at} changed {}; none of the values step {changed_at} set is in it", c.step.tool, show(key));
                    c.out.flag(
                        ViolationKind::StaleRead,
                        Some(key),
                        None,
                        Some(*changed_at),
                        explanation,
                    );
                }
            }
        }
    }
    h.reads
        .insert(c.signature.clone(), (c.k, c.step.observation.clone()));
}

/// Whether an answer holds a field of this name at any depth.
fn has_field(value: &Value, field: &str) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(k, v)| k == field || has_field(v, field)),
        Value::Array(items) => items.iter().any(|v| has_field(v, field)),
        _ => false,
    }
}

/// Listings: a repeat with nothing changed between lists the same ids, and the resources a
/// listing's filters select are in it; an unfiltered listing is complete.
pub(super) fn listing(c: &mut CallCheck<'_, '_>, h: &mut CallsHistory, found: &Found<'_>) {
    let noun = &c.noun;
    let listed: BTreeSet<String> = found
        .iter()
        .filter(|(key, _, in_array)| *in_array && key.0 == *noun)
        .map(|(key, _, _)| key.1.clone())
        .collect();
    if c.role != Role::Read
        || !(found.iter().any(|(_, _, a)| *a) || is_listing(&c.step.observation, noun))
    {
        return;
    }
    let mut repeat_differs = false;
    if let Some((j, before)) = h.listings.get(&c.signature) {
        c.out.checked += 1;
        repeat_differs = *before != listed;
        if repeat_differs {
            let missing = before.difference(&listed).next();
            let extra = listed.difference(before).next();
            let what = match (missing, extra) {
                (Some(m), _) => format!("{noun}/{m} is missing"),
                (None, Some(e)) => format!("{noun}/{e} is new"),
                _ => String::new(),
            };
            let explanation = format!(
                "{} repeats the listing of step {j} with nothing changed between; {what}",
                c.step.tool
            );
            c.out.flag(
                ViolationKind::ListInconsistent,
                None,
                None,
                Some(*j),
                explanation,
            );
        }
    }
    // Resources the listing's filters select must be in it (once per listing: a repeat that
    // differs said so already).
    let st = &h.st;
    let mut expected: Vec<(&Key, usize)> = st
        .existence
        .keys()
        .filter(|key| key.0 == *noun && !listed.contains(&key.1))
        .filter_map(|key| {
            let created = st.expected_in_listing(key, &c.step.arguments, &c.writes.filters)?;
            Some((key, created))
        })
        .filter(|(key, _)| {
            h.changed.get(*key).is_none_or(|(changed_at, _)| {
                matches!(st.existence.get(*key), Some(Existence::Exists(Some(e))) if e > changed_at)
            })
        })
        .collect();
    expected.sort();
    if repeat_differs {
        expected.clear();
    }
    for (key, created) in expected {
        c.out.checked += 1;
        let explanation = format!("{} lists the {noun}s its arguments select but not {}, known to exist since step {created} and not removed or changed since", c.step.tool, show(key));
        c.out.flag(
            ViolationKind::ListInconsistent,
            Some(key),
            None,
            Some(created),
            explanation,
        );
    }
    if c.step.arguments.is_empty() {
        h.st.complete
            .insert(noun.clone(), (CompleteSource::Listing(c.k), listed.clone()));
    }
    h.listings.insert(c.signature.clone(), (c.k, listed));
}

/// What a successful call makes known: what it deleted, created or changed (a change of
/// unknown reach forgets what it may have changed), and the records it returned.
pub(super) fn learn_success(c: &CallCheck<'_, '_>, h: &mut CallsHistory, found: &Found<'_>) {
    let (k, role, noun, names) = (c.k, c.role, &c.noun, &c.names);
    let st = &mut h.st;
    match role {
        Role::Delete => {
            if let Some(key) = target(noun, names) {
                st.existence.insert(key.clone(), Existence::Gone(k));
                st.fields.remove(&key);
                st.replaced.remove(&key);
                st.last_delete.insert(key.0.clone(), k);
                if let Some((_, ids)) = st.complete.get_mut(&key.0) {
                    ids.remove(&key.1);
                }
            } else {
                st.existence
                    .retain(|_, s| !matches!(s, Existence::Exists(_)));
                st.last_untargeted_change = Some(k);
            }
        }
        Role::Create => {
            // A create may make an id a failure had reported missing.
            let created: Vec<Key> = found
                .iter()
                .filter(|(_, _, in_array)| !in_array)
                .map(|(key, _, _)| key.clone())
                .collect();
            if created.is_empty() {
                st.existence
                    .retain(|_, s| !matches!(s, Existence::Missing(_)));
                keep_ids_it_cannot_create(st, &c.fx);
            } else {
                // What else the walks saw it make, its answer did not name (`create_instance`
                // answers the instance; the boot disk it made is under `boot_disk`): those
                // types' ids are no longer all known.
                let named: BTreeSet<&str> = created.iter().map(|key| key.0.as_str()).collect();
                for collection in c.fx.creates.iter().filter(|c| *c != "*") {
                    let noun = crate::audit::nouns::singular(collection);
                    if !named.contains(noun.as_str()) {
                        st.complete.remove(&noun);
                    }
                }
            }
            for (key, record, in_array) in found {
                if !in_array {
                    let mut scalars: BTreeMap<String, Value> = record
                        .iter()
                        .filter(|(_, v)| !v.is_object() && !v.is_array())
                        .map(|(f, v)| (f.clone(), v.clone()))
                        .collect();
                    // What the walks showed the creation stores from its arguments, where the
                    // answer did not say it.
                    for (field, argument) in &c.writes.created_from {
                        if let Some(value) = c.step.arguments.get(argument) {
                            scalars
                                .entry(field.clone())
                                .or_insert_with(|| value.clone());
                        }
                    }
                    st.created_with.insert(key.clone(), scalars);
                }
            }
            for key in created {
                st.existence.insert(key.clone(), Existence::Exists(Some(k)));
                if let Some((_, ids)) = st.complete.get_mut(&key.0) {
                    ids.insert(key.1.clone());
                }
            }
            for (_, key) in names {
                if matches!(st.existence.get(key), Some(Existence::Missing(_))) {
                    st.existence.remove(key);
                }
            }
        }
        Role::Read | Role::Change => {}
    }
    if role != Role::Read {
        learn_change(c, h);
    }
    let st = &mut h.st;
    if role == Role::Change {
        // A change may make what its answer names by an id the call did not give
        // (`cancel_appointment` answering the `new_appointment_id` it promoted from the
        // waitlist): that exists now, typed by the key's last word.
        for (of, id) in ids_answered(&c.step.observation, &c.step.arguments) {
            if let Some(kind) = words(&of).pop() {
                st.existence
                    .entry((kind, id))
                    .or_insert(Existence::Exists(Some(k)));
            }
        }
    }
    let writes = &c.writes;
    for (key, record, _) in found {
        if role != Role::Delete || target(noun, names).as_ref() != Some(key) {
            if !matches!(st.existence.get(key), Some(Existence::Gone(_))) || role == Role::Create {
                let since = match st.existence.get(key) {
                    Some(Existence::Exists(s)) if role != Role::Create => *s,
                    _ => Some(k),
                };
                st.existence.insert(key.clone(), Existence::Exists(since));
            }
            let known = st.fields.entry(key.clone()).or_default();
            for (field, value) in record.iter() {
                // What a change reports is a fact unless the walks showed its answers report
                // the field otherwise than they store it. Without learned writes, a status a
                // change reports is no fact either: APIs answer a transient one (`pending`)
                // for what they store as another.
                let reported = role != Role::Read
                    && (writes.reported_differs.contains(field)
                        || (writes.source != EffectSource::Observed
                            && crate::audit::implied::is_status_field(field)));
                if !value.is_object() && !value.is_array() && !reported {
                    known.insert(
                        field.clone(),
                        Fact {
                            value: value.clone(),
                            source: FactSource::Returned(k),
                        },
                    );
                }
            }
            if role == Role::Read {
                // What the read shows is now known; nothing is held against it.
                if let Some(moved) = st.replaced.get_mut(key) {
                    moved.retain(|field, _| !record.contains_key(field));
                }
            }
        }
    }
    if role == Role::Read {
        for (_, key) in names {
            st.existence
                .entry(key.clone())
                .or_insert(Existence::Exists(Some(k)));
        }
    }
}

/// What a successful change (not a read) makes known and forgets: the values it set on the
/// resource it names, and, where its reach is unknown, the fields, listings and repeated calls
/// it may have changed.
pub(super) fn learn_change(c: &CallCheck<'_, '_>, h: &mut CallsHistory) {
    let (k, role, writes, aim, step) = (c.k, c.role, &c.writes, &c.aim, c.step);
    h.listings.clear();
    h.calls.clear();
    let st = &mut h.st;
    // What the change set on the resource it names (read before forgetting).
    let old = aim
        .as_ref()
        .and_then(|key| st.fields.get(key))
        .cloned()
        .unwrap_or_default();
    let target_argument = writes.target.clone().or_else(|| {
        c.names
            .iter()
            .find(|(_, key)| Some(key) == aim.as_ref())
            .map(|(a, _)| a.clone())
    });
    let mut set = writes.fields_set(&step.arguments, Some(&old), target_argument.as_deref());
    if role == Role::Create {
        // The ids a creation stored on the record it changed are those of what it made, the
        // next in a sequence the walks always began alike: no constant.
        set.retain(|field, _| id_noun(field).is_none());
    }
    // The other records it always changes, with what was known of them (read before
    // forgetting).
    let sides: Vec<(Key, &BTreeSet<String>, BTreeMap<String, Fact>)> = (writes.side_moves.iter())
        .filter_map(|(argument, (collection, fields))| {
            let id = id_text(step.arguments.get(argument)?)?;
            let key = settled(st, (crate::audit::nouns::singular(collection), id));
            (Some(&key) != aim.as_ref()).then_some((key, fields))
        })
        .flat_map(|(key, fields)| {
            let mut known = twins_known(st, &key);
            let old = st.fields.get(&key).cloned().unwrap_or_default();
            known.push((key, old));
            known.into_iter().map(move |(key, old)| (key, fields, old))
        })
        .collect();
    // The target under the other types the states use for it, with what was known there.
    let aim_twins = aim
        .as_ref()
        .map_or_else(Vec::new, |key| twins_known(st, key));
    let pinned = role == Role::Change && writes.only_target && aim.is_some();
    if !pinned {
        // A change of unknown reach: what was returned may no longer hold. What earlier
        // changes replaced stays (a status moved does not come back by itself), unless the
        // change's code can reach that record and may have moved it back (`post_cycle_count`
        // unblocks the bin `start_cycle_count` blocked).
        st.forget_fields();
        if let Some(reach) = &c.fx.reach {
            let aliases = &st.aliases;
            st.replaced.retain(|key, _| {
                // A part (`member/*/loan`) lies in its top-level record's table.
                let noun = key.0.split('/').next().unwrap_or_default();
                let id = key.1.split('/').next().unwrap_or_default();
                let noun = aliases.get(noun).map_or(noun, String::as_str);
                !reach.can_touch_noun(noun, id, &step.arguments)
            });
        }
    }
    if role == Role::Change && !pinned {
        // It may change what a listing shows (another user's view, say); the ids the
        // initial state holds of a type it cannot create stay all there are.
        keep_ids_it_cannot_create(st, &c.fx);
    }
    // A creation the walks always saw change the record one argument names as well
    // (`deposit_cash` records a transaction and moves the account's balance) sets what a
    // change would on it.
    let creation_changes = role == Role::Create && writes.target.is_some();
    if role == Role::Change || creation_changes {
        match aim {
            Some(key) => {
                // What it may have computed besides what it set (a timestamp, a total) is no
                // longer known of its target, pinned or not.
                st.fields.remove(key);
                let mut news: Vec<SetValue> = set
                    .iter()
                    .filter(|(f, v)| old.get(*f).is_none_or(|fact| fact.value != **v))
                    .map(|(f, v)| (Some(f.clone()), v.clone()))
                    .collect();
                // Without learned writes, any value the call gives that the resource did not
                // hold may be what it set, in a field of any name.
                if writes.source != EffectSource::Observed {
                    news.extend(
                        step.arguments
                            .iter()
                            .filter(|(a, v)| {
                                Some(a.as_str()) != target_argument.as_deref()
                                    && id_noun(a).is_none()
                                    && matches!(v, Value::String(t) if t.len() >= 2)
                                    && !old.values().any(|fact| fact.value == **v)
                            })
                            .map(|(_, v)| (None, v.clone())),
                    );
                }
                h.changed.insert(key.clone(), (k, news));
                for (twin, old) in &aim_twins {
                    st.fields.remove(twin);
                    st.set_fields(twin, k, set.clone(), writes, old);
                }
                st.set_fields(key, k, set, writes, &old);
            }
            None if role == Role::Change => {
                st.replaced.clear();
                st.last_untargeted_change = Some(k);
            }
            None => {}
        }
    }
    for (key, fields, old) in &sides {
        st.move_fields(key, k, fields, old);
    }
    if role == Role::Change && !c.fx.deletes.is_empty() {
        st.existence
            .retain(|_, s| !matches!(s, Existence::Exists(_)));
        st.last_untargeted_change = Some(k);
    }
    if role == Role::Change && !c.fx.creates.is_empty() {
        st.existence
            .retain(|_, s| !matches!(s, Existence::Missing(_)));
        keep_ids_it_cannot_create(st, &c.fx);
    }
}

/// After a change of unknown reach: only the ids known from the initial state of types the
/// tool is known not to create are still all there are — an id appears only by a creation,
/// and a listing may show otherwise after any change. (A `place_bid` that creates bids leaves
/// the listings of the package's states the only listings there are.)
fn keep_ids_it_cannot_create(st: &mut ImpliedState, fx: &ToolEffects) {
    let may_create = |noun: &str| {
        !fx.creates_known
            || (fx.creates.iter()).any(|collection| collection == "*" || holds(collection, noun))
    };
    st.complete.retain(|noun, (source, _)| {
        matches!(
            source,
            CompleteSource::Initial | CompleteSource::AnyInitial(_)
        ) && !may_create(noun)
    });
}

/// A failure that says "not found" of a resource known to exist (nothing deleted it since);
/// the resource is then known missing.
pub(super) fn not_found(c: &mut CallCheck<'_, '_>, st: &mut ImpliedState) {
    if !says_not_found(&c.step.observation) {
        return;
    }
    let text = match &c.step.observation {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    // The resource the failure is about: the one whose id it quotes, else the only one named
    // when the text names its type ("Coupon X does not exist" is not about the customer the
    // call also names).
    let lower = text.to_lowercase();
    let names = &c.names;
    let missing: Vec<Key> = {
        let quoted: Vec<&Key> = names
            .iter()
            .map(|(_, k)| k)
            .filter(|k| mentions(&text, &k.1))
            .collect();
        if quoted.len() == 1 {
            quoted.into_iter().cloned().collect()
        } else if names.len() == 1
            && lower.contains(&names[0].1 .0.replace('_', " "))
            && !quotes_other_argument(&text, &c.step.arguments, &names[0].1 .1)
        {
            vec![names[0].1.clone()]
        } else {
            Vec::new()
        }
    };
    for key in &missing {
        if let Some(Existence::Exists(j)) = st.existence.get(key) {
            c.out.checked += 1;
            let since = match j {
                Some(j) => format!("step {j} showed it"),
                None => "the initial state holds it".to_owned(),
            };
            let explanation = format!(
                "{} reports {} not found; {since} and nothing deleted it since",
                c.step.tool,
                show(key)
            );
            c.out.flag(
                ViolationKind::VanishedWithoutDelete,
                Some(key),
                None,
                *j,
                explanation,
            );
        }
        if !matches!(st.existence.get(key), Some(Existence::Gone(_))) {
            st.existence.insert(key.clone(), Existence::Missing(c.k));
        }
    }
}
