//! Consistency audit of trajectories that carry their states: the state constraint graph (SCG)
//! and the state consistency score (SCS) of the SIMCON-DATA proposal, for trajectories whose
//! every step records the state after it (envsim trajectory JSONL, a simulation that applies its
//! predicted Δ to an explicit state).
//!
//! **Resources.** In a state, an object whose values are all objects is a collection; each
//! entry is a resource, typed by the collection's path with resource ids replaced by `*`
//! (`tickets`, `tickets/*/messages`) and named by its key. Arrays are not collections here.
//!
//! **Effects.** What a tool may do to resources: which types it creates and deletes, whether it
//! ever changes the state, whether its successes always do and its failures never do. Learned
//! from executed trajectories of the environment ([`Effects::learn`]: the executor's ground
//! truth), else guessed from the tool's name ([`ToolEffects::guess`]: `create_*`, `delete_*`,
//! `get_*`, …); a violation found with a guessed effect says so.
//!
//! **Checks** (each its own [`ViolationKind`]), at every step against the state before it:
//! a resource that appears under a tool that never creates its type (a phantom, or a deleted one
//! resurrected), one that vanishes under a tool that never deletes its type, a success that
//! changes nothing from a tool whose successes always change the state, a failure that changes
//! the state from a tool whose failures never do, a successful read of a deleted resource or of
//! an id no state ever held, and a read whose returned fields differ from the resource's
//! current ones (a stale read when the value is one the resource had before).
//!
//! SCS of a trajectory = share of its checked constraints that hold.

use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub mod agreement;
pub mod argument_fields;
pub mod bias;
mod drift;
mod effects;
pub mod implied;
mod inject;
mod named;
mod nested;
pub mod nouns;
pub mod observed;
mod summary;
mod timeline;
pub mod transcript_effects;

pub use drift::{drift, Drift, DriftTally};
pub(crate) use effects::{names_of, MIN_EVIDENCE};
pub use effects::{
    EffectAnnotation, EffectSource, Effects, Operation, ResponseShape, ToolEffects, Vocabulary,
};
pub use inject::{inject, inject_calls, FaultKind, FaultLabel, FaultPlan};
pub use summary::{
    AnswerSummary, AuditSummary, BiasSummary, DriftSummary, EffectsOrigin, EnvironmentEffects,
    ScsSummary, SpecSummary, SpecViolation, SummaryTally,
};

/// One step of a trajectory.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditStep {
    /// Tool name.
    pub tool: String,
    /// Arguments.
    pub arguments: Map<String, Value>,
    /// The observation, parsed when it is JSON or a Python literal, else as text.
    pub observation: Value,
    /// Success or failure, when known.
    pub success: Option<bool>,
    /// The state after the step (shared with the step before when it did not change, so an
    /// unchanged state is neither copied nor compared).
    pub state_after: std::sync::Arc<Value>,
}

/// A trajectory with its states.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditTrajectory {
    /// Identifier (for reports).
    pub id: String,
    /// The state before the first step.
    pub initial_state: std::sync::Arc<Value>,
    /// The steps.
    pub steps: Vec<AuditStep>,
}

/// A resource: its type (collection path pattern) and id.
pub type ResourceKey = (String, String);

/// The resources of a state, with their values.
pub fn resources(state: &Value) -> BTreeMap<ResourceKey, &Value> {
    resource_refs(state)
        .into_iter()
        .map(|((kind, id), v)| ((kind.into_owned(), id.to_owned()), v))
        .collect()
}

/// How a resource differs between two states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceChange {
    /// Only in the later state.
    Created,
    /// Only in the earlier state.
    Deleted,
    /// In both, with different values.
    Updated,
}

/// The resources that differ between `before` and `after`, and how.
pub fn resource_changes(before: &Value, after: &Value) -> BTreeMap<ResourceKey, ResourceChange> {
    let (old, new) = (resources(before), resources(after));
    let mut out = BTreeMap::new();
    for (key, value) in &new {
        match old.get(key) {
            None => {
                out.insert(key.clone(), ResourceChange::Created);
            }
            Some(v) if v != value => {
                out.insert(key.clone(), ResourceChange::Updated);
            }
            Some(_) => {}
        }
    }
    for key in old.keys().filter(|k| !new.contains_key(*k)) {
        out.insert(key.clone(), ResourceChange::Deleted);
    }
    out
}

/// A resource as the audit keeps it while it reads a trajectory: its type (borrowed from the
/// state when it is a top-level collection's name) and id, borrowed from the state, so finding
/// the resources of a state allocates nothing per resource.
type KeyRef<'v> = (std::borrow::Cow<'v, str>, &'v str);

/// [`resources`] with borrowed keys.
fn resource_refs(state: &Value) -> BTreeMap<KeyRef<'_>, &Value> {
    let mut out = BTreeMap::new();
    collect_resources(state, &mut Vec::new(), &mut out);
    out
}

/// The fields of `value` (the state, a resource, or a plain nested object): a field holding a
/// non-empty object of objects is a collection whose entries are resources (searched in turn
/// for collections of their own); a field holding another object is searched as part of this
/// one.
fn collect_resources<'v>(
    value: &'v Value,
    pattern: &mut Vec<&'v str>,
    out: &mut BTreeMap<KeyRef<'v>, &'v Value>,
) {
    let Value::Object(map) = value else {
        return;
    };
    for (key, child) in map {
        let Value::Object(entries) = child else {
            continue;
        };
        pattern.push(key);
        if !entries.is_empty() && entries.values().all(Value::is_object) {
            let kind: std::borrow::Cow<'v, str> = match pattern.as_slice() {
                [only] => std::borrow::Cow::Borrowed(only),
                parts => std::borrow::Cow::Owned(parts.join("/")),
            };
            for (id, resource) in entries {
                out.insert((kind.clone(), id.as_str()), resource);
                pattern.push("*");
                collect_resources(resource, pattern, out);
                pattern.pop();
            }
        } else {
            collect_resources(child, pattern, out);
        }
        pattern.pop();
    }
}

/// Kinds of violations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// A resource appeared under a tool that never creates its type.
    AppearedWithoutCreate,
    /// A resource vanished under a tool that never deletes its type.
    VanishedWithoutDelete,
    /// A success that changed nothing, from a tool whose successes always change the state.
    SuccessWithoutChange,
    /// A failure that changed the state, from a tool whose failures never do.
    FailureWithChange,
    /// A successful read of a resource deleted earlier.
    ReadAfterDelete,
    /// A successful call naming an id that no state ever held.
    PhantomId,
    /// A read returned a field value other than the resource's current one.
    StaleRead,
    /// A listing disagrees with the timeline (the same listing with nothing changed between
    /// returns other ids, or a complete listing misses a created resource).
    ListInconsistent,
    /// The same call, with nothing changed between, got another outcome or answer.
    ContradictoryRepeat,
    /// A successful response with a field, or a field type, its tool's responses never had.
    ResponseShape,
    /// A failure says "not found" for a resource the state holds.
    ErrorContradictsState,
    /// A created resource refers (`customer_id`) to a resource of a collection the state has
    /// but that it does not hold.
    DanglingReference,
    /// A read shows a field back at the value a successful change moved it from, with no
    /// call since that moves it (a cancelled reservation read back as confirmed).
    StatusReverted,
    /// A success where an earlier answer or the known initial state shows that the tool's
    /// precondition failed (cancelling what is cancelled, withdrawing above the balance).
    PreconditionFailed,
    /// A successful change left a field of what it names other than its walks always set it
    /// (an update's argument not written, a status not moved).
    WriteNotApplied,
    /// A successful change changed what its walks never saw it change (another resource, or a
    /// field of its target it never touches).
    SpuriousWrite,
}

impl ViolationKind {
    /// Every kind, in report order.
    pub const ALL: [ViolationKind; 16] = [
        ViolationKind::AppearedWithoutCreate,
        ViolationKind::VanishedWithoutDelete,
        ViolationKind::SuccessWithoutChange,
        ViolationKind::FailureWithChange,
        ViolationKind::ReadAfterDelete,
        ViolationKind::PhantomId,
        ViolationKind::StaleRead,
        ViolationKind::ListInconsistent,
        ViolationKind::ContradictoryRepeat,
        ViolationKind::ResponseShape,
        ViolationKind::ErrorContradictsState,
        ViolationKind::DanglingReference,
        ViolationKind::StatusReverted,
        ViolationKind::PreconditionFailed,
        ViolationKind::WriteNotApplied,
        ViolationKind::SpuriousWrite,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::AppearedWithoutCreate => "appeared_without_create",
            ViolationKind::VanishedWithoutDelete => "vanished_without_delete",
            ViolationKind::SuccessWithoutChange => "success_without_change",
            ViolationKind::FailureWithChange => "failure_with_change",
            ViolationKind::ReadAfterDelete => "read_after_delete",
            ViolationKind::PhantomId => "phantom_id",
            ViolationKind::StaleRead => "stale_read",
            ViolationKind::ListInconsistent => "list_inconsistent",
            ViolationKind::ContradictoryRepeat => "contradictory_repeat",
            ViolationKind::ResponseShape => "response_shape",
            ViolationKind::ErrorContradictsState => "error_contradicts_state",
            ViolationKind::DanglingReference => "dangling_reference",
            ViolationKind::StatusReverted => "status_reverted",
            ViolationKind::PreconditionFailed => "precondition_failed",
            ViolationKind::WriteNotApplied => "write_not_applied",
            ViolationKind::SpuriousWrite => "spurious_write",
        }
    }
}

/// One violated constraint.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Violation {
    /// The trajectory.
    pub trajectory: String,
    /// The step (0-based) where it shows.
    pub step: usize,
    /// What kind.
    pub kind: ViolationKind,
    /// The tool of that step.
    pub tool: String,
    /// The resource (`type/id`), when one is involved.
    pub resource: Option<String>,
    /// The field, when one is involved.
    pub field: Option<String>,
    /// The earlier step it conflicts with (`None`: the initial state, or no single step).
    pub conflicting_step: Option<usize>,
    /// Whether the effect it relies on was guessed from the tool's name.
    pub guessed: bool,
    /// Where what the tool does came from: learned from executed walks (`observed`), declared
    /// by a manifest or an API description (`annotated`), or guessed from its name.
    pub effects: EffectSource,
    /// One line.
    pub explanation: String,
}

/// Where a violation shows: a step of a trajectory, its tool, and where what the tool does
/// came from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Site<'a> {
    pub trajectory: &'a str,
    pub step: usize,
    pub tool: &'a str,
    pub effects: EffectSource,
}

impl Site<'_> {
    /// A violation at this site (guessed when the tool's effects were guessed from its name).
    pub(crate) fn violation(
        self,
        kind: ViolationKind,
        resource: Option<String>,
        field: Option<String>,
        conflicting_step: Option<usize>,
        explanation: String,
    ) -> Violation {
        Violation {
            trajectory: self.trajectory.to_owned(),
            step: self.step,
            kind,
            tool: self.tool.to_owned(),
            resource,
            field,
            conflicting_step,
            guessed: self.effects == EffectSource::Guessed,
            effects: self.effects,
            explanation,
        }
    }
}

/// The audit of one trajectory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrajectoryAudit {
    /// The trajectory.
    pub trajectory: String,
    /// Steps.
    pub steps: usize,
    /// Constraints checked.
    pub checked: usize,
    /// The violations, in step order.
    pub violations: Vec<Violation>,
    /// Per step, the kind of transition it made ([`bias::transition_kind`]).
    #[serde(skip)]
    pub transitions: Vec<&'static str>,
}

impl TrajectoryAudit {
    /// State consistency score: the share of checked constraints that hold (1 when none).
    pub fn scs(&self) -> f64 {
        if self.checked == 0 {
            return 1.0;
        }
        1.0 - (self.violations.len().min(self.checked) as f64 / self.checked as f64)
    }
}

fn label((kind, id): &ResourceKey) -> String {
    label_of(kind, id)
}

/// `type/id` (the id alone for a resource without a type).
fn label_of(kind: &str, id: &str) -> String {
    if kind.is_empty() {
        id.to_owned()
    } else {
        format!("{kind}/{id}")
    }
}

/// Scalar fields of an object, by key.
fn scalars(value: &Value) -> BTreeMap<&str, &Value> {
    value
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, v)| !v.is_object() && !v.is_array())
                .map(|(k, v)| (k.as_str(), v))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether an observation holds a record: an object below its top level.
fn returns_record(observation: &Value) -> bool {
    let mut found = Vec::new();
    objects(observation, &mut found);
    found.len() > 1 || (!observation.is_object() && !found.is_empty())
}

/// The objects inside a value (itself included), depth first.
fn objects<'v>(value: &'v Value, out: &mut Vec<&'v Value>) {
    match value {
        Value::Object(map) => {
            out.push(value);
            map.values().for_each(|v| objects(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| objects(v, out)),
        _ => {}
    }
}

/// The keys only `b` has (added) and only `a` has (removed), by walking both sorted key lists
/// once.
fn key_changes<'m, 'v>(
    a: &'m BTreeMap<KeyRef<'v>, &'v Value>,
    b: &'m BTreeMap<KeyRef<'v>, &'v Value>,
) -> (Vec<&'m KeyRef<'v>>, Vec<&'m KeyRef<'v>>) {
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    let (mut x, mut y) = (a.keys().peekable(), b.keys().peekable());
    loop {
        match (x.peek(), y.peek()) {
            (Some(p), Some(q)) => match p.cmp(q) {
                std::cmp::Ordering::Less => removed.extend(x.next()),
                std::cmp::Ordering::Greater => added.extend(y.next()),
                std::cmp::Ordering::Equal => {
                    x.next();
                    y.next();
                }
            },
            (Some(_), None) => removed.extend(x.next()),
            (None, Some(_)) => added.extend(y.next()),
            (None, None) => return (added, removed),
        }
    }
}

/// Whether a call only sets what its target already holds: an argument names a resource of
/// the state before, and every other argument's value is already one of that resource's
/// values, at any depth (an address saved unchanged); an argument naming another resource
/// (the payment method to charge) is a reference, not a value set. Such a success changes nothing by
/// construction, whatever the walks showed of the tool.
pub(crate) fn restates(
    before: &BTreeMap<KeyRef<'_>, &Value>,
    arguments: &Map<String, Value>,
) -> bool {
    fn holds(value: &Value, wanted: &Value) -> bool {
        value == wanted
            || match value {
                Value::Object(map) => map.values().any(|v| holds(v, wanted)),
                Value::Array(items) => items.iter().any(|v| holds(v, wanted)),
                _ => false,
            }
    }
    arguments.iter().any(|(name, id)| {
        let Some(id) = id.as_str() else {
            return false;
        };
        // What the call sets: its other arguments, but for references to other resources of
        // the state (the payment method a change would charge), which set nothing.
        let others: Vec<&Value> = arguments
            .iter()
            .filter(|(other, _)| *other != name)
            .map(|(_, v)| v)
            .filter(|v| {
                !v.as_str()
                    .is_some_and(|r| before.keys().any(|(_, key)| *key == r))
            })
            .collect();
        !others.is_empty()
            && before
                .iter()
                .filter(|((_, key), _)| *key == id)
                .any(|(_, target)| others.iter().all(|v| holds(target, v)))
    })
}

/// Audits one trajectory: its states read once into a [`History`], then every step through
/// each of [`CHECKS`], one function per concern.
pub fn audit(trajectory: &AuditTrajectory, effects: &Effects) -> TrajectoryAudit {
    let mut violations = Vec::new();
    let mut checked = 0usize;
    // Every id any state of the trajectory holds, by type.
    let mut all_ids: HashMap<&str, BTreeSet<std::borrow::Cow<'_, str>>> = HashMap::new();
    // The resources of every state, found once: index 0 is the initial state, k + 1 the state
    // after step k. Unchanged states share the map of the state before.
    let mut found: Vec<std::rc::Rc<BTreeMap<KeyRef<'_>, &Value>>> =
        Vec::with_capacity(trajectory.steps.len() + 1);
    found.push(std::rc::Rc::new(resource_refs(&trajectory.initial_state)));
    // Whether each step changed the state (compared once).
    let mut changes = Vec::with_capacity(trajectory.steps.len());
    let mut previous = &trajectory.initial_state;
    for step in &trajectory.steps {
        let changed = step.state_after != *previous;
        let map = if changed {
            std::rc::Rc::new(resource_refs(&step.state_after))
        } else {
            std::rc::Rc::clone(&found[found.len() - 1])
        };
        changes.push(changed);
        found.push(map);
        previous = &step.state_after;
    }
    // Per step: the resources it added and removed (empty when the state did not change).
    let mut deltas = Vec::with_capacity(trajectory.steps.len());
    for (kind, id) in found[0].keys() {
        all_ids.entry(*id).or_default().insert(kind.clone());
    }
    for k in 0..trajectory.steps.len() {
        let delta = if changes[k] {
            key_changes(&found[k], &found[k + 1])
        } else {
            (Vec::new(), Vec::new())
        };
        for (kind, id) in &delta.0 {
            all_ids.entry(*id).or_default().insert(kind.clone());
        }
        deltas.push(delta);
    }
    let mut transitions = Vec::with_capacity(trajectory.steps.len());
    let mut history = History {
        found: &found,
        deltas: &deltas,
        all_ids: &all_ids,
        removed_at: HashMap::new(),
        changes: &changes,
    };
    let mut last_change: Option<&AuditStep> = None;
    for (k, step) in trajectory.steps.iter().enumerate() {
        let mut c = StepCheck {
            k,
            step,
            last_change,
            fx: effects.of(&step.tool),
            changed: history.changes[k],
            trajectory: &trajectory.id,
            effects,
            checked: 0,
            violations: Vec::new(),
        };
        for check in CHECKS {
            check(&mut c, &mut history);
        }
        checked += c.checked;
        violations.append(&mut c.violations);
        if c.changed {
            last_change = Some(step);
        }
        let (added, removed) = &history.deltas[k];
        transitions.push(bias::transition_kind(
            c.changed,
            !added.is_empty(),
            !removed.is_empty(),
            step.success,
        ));
    }
    TrajectoryAudit {
        trajectory: trajectory.id.clone(),
        steps: trajectory.steps.len(),
        checked,
        violations,
        transitions,
    }
}

/// The checks of one step, in report order.
const CHECKS: [fn(&mut StepCheck<'_, '_>, &mut History<'_, '_>); 7] = [
    outcome,
    response_shape,
    writes,
    error_contradicts_state,
    appear_and_vanish,
    dangling_references,
    reads,
];

/// Resources a step added and removed, borrowed from the states' resource maps.
type Delta<'h, 't> = (Vec<&'h KeyRef<'t>>, Vec<&'h KeyRef<'t>>);

/// What the checks know of a trajectory's states: read once, before any step is checked.
struct History<'h, 't> {
    /// The resources of every state: index 0 is the initial state, k + 1 the state after step
    /// k (unchanged states share the map of the state before).
    found: &'h [std::rc::Rc<BTreeMap<KeyRef<'t>, &'t Value>>],
    /// Per step: the resources it added and removed (empty when the state did not change).
    deltas: &'h [Delta<'h, 't>],
    /// Every id any state of the trajectory holds, by type.
    all_ids: &'h HashMap<&'t str, BTreeSet<std::borrow::Cow<'t, str>>>,
    /// Per resource: the step that last removed it (for resurrections and reads after
    /// delete), filled as the steps are checked.
    removed_at: HashMap<KeyRef<'t>, usize>,
    /// Whether each step changed the state.
    changes: &'h [bool],
}

/// One step under check: what it is, and what its checks found.
struct StepCheck<'s, 't> {
    k: usize,
    step: &'t AuditStep,
    /// The last step before it that changed the state.
    last_change: Option<&'t AuditStep>,
    fx: ToolEffects,
    changed: bool,
    trajectory: &'s str,
    effects: &'s Effects,
    checked: usize,
    violations: Vec<Violation>,
}

impl StepCheck<'_, '_> {
    /// Records a violation at this step.
    fn violation(
        &mut self,
        kind: ViolationKind,
        resource: Option<String>,
        field: Option<String>,
        conflicting_step: Option<usize>,
        explanation: String,
    ) {
        let site = Site {
            trajectory: self.trajectory,
            step: self.k,
            tool: &self.step.tool,
            effects: self.fx.source,
        };
        self.violations
            .push(site.violation(kind, resource, field, conflicting_step, explanation));
    }
}

/// Whether `step` is the same successful call as `last_change`, the last call that changed
/// the state: made again on what it just did, it may change nothing.
pub(crate) fn repeats(last_change: Option<&AuditStep>, step: &AuditStep) -> bool {
    last_change.is_some_and(|last| {
        last.success == Some(true) && last.tool == step.tool && last.arguments == step.arguments
    })
}

/// Outcome and change: a success that changes nothing from a tool whose successes always change the state, a failure that changes it from one whose failures never do.
fn outcome(c: &mut StepCheck<'_, '_>, h: &mut History<'_, '_>) {
    match c.step.success {
        Some(true)
            if c.fx.success_changes
                && !restates(&h.found[c.k], &c.step.arguments)
                && !(c.fx.repeat_keeps && repeats(c.last_change, c.step)) =>
        {
            c.checked += 1;
            if !c.changed {
                c.violation(
                    ViolationKind::SuccessWithoutChange,
                    None,
                    None,
                    None,
                    format!("{} reports success but the state did not change; its successes always change it", c.step.tool),
                );
            }
        }
        Some(false) if c.fx.failure_keeps => {
            c.checked += 1;
            if c.changed {
                c.violation(
                    ViolationKind::FailureWithChange,
                    None,
                    None,
                    None,
                    format!(
                        "{} reports failure but the state changed; its failures never change it",
                        c.step.tool
                    ),
                );
            }
        }
        _ => {}
    }
}

/// The response's shape against the tool's learned successful responses.
fn response_shape(c: &mut StepCheck<'_, '_>, _: &mut History<'_, '_>) {
    if c.step.success == Some(true) {
        if let Some(problems) = c.effects.shape_problems(&c.step.tool, &c.step.observation) {
            c.checked += 1;
            if !problems.is_empty() {
                c.violation(
                    ViolationKind::ResponseShape,
                    None,
                    None,
                    None,
                    format!("{} responds with {}", c.step.tool, problems.join("; ")),
                );
            }
        }
    }
}

/// What a successful change wrote, against what its walks showed it writes: fields it always sets, its answer's report of them, and other resources it never touches.
fn writes(c: &mut StepCheck<'_, '_>, h: &mut History<'_, '_>) {
    if c.step.success == Some(true) && c.changed {
        let writes = c.effects.writes_of(&c.step.tool);
        let target = writes
            .target
            .as_ref()
            .and_then(|a| c.step.arguments.get(a))
            .and_then(implied::id_text)
            .and_then(|id| {
                h.found[c.k + 1]
                    .keys()
                    .find(|key| {
                        !key.0.contains('*')
                            && key.1 == id
                            && writes
                                .target_collection
                                .as_deref()
                                .is_none_or(|c| key.0 == c)
                    })
                    .cloned()
            });
        if let (EffectSource::Observed, Some(tkey)) = (writes.source, &target) {
            let shown = label_of(&tkey.0, tkey.1);
            let after = h.found[c.k + 1].get(tkey).and_then(|v| v.as_object());
            let before = h.found[c.k].get(tkey).and_then(|v| v.as_object());
            if let Some(after) = after {
                for (field, value) in writes.fields_set(&c.step.arguments, None, None) {
                    // A write seen a few times may be a coincidence of the walks (a status
                    // that depends on a condition they never met): only well-evidenced
                    // ones are held to.
                    if writes.write_evidence.get(&field).copied().unwrap_or(0)
                        < implied::ONLY_TARGET_EVIDENCE
                    {
                        continue;
                    }
                    c.checked += 1;
                    if !after.get(&field).is_some_and(|v| implied::same(v, &value)) {
                        let now = after
                            .get(&field)
                            .map_or("nothing".to_owned(), Value::to_string);
                        c.violation(
                            ViolationKind::WriteNotApplied,
                            Some(shown.clone()),
                            Some(field.clone()),
                            None,
                            format!("{} succeeds but {shown}.{field} is {now}; its walks always set it to {value}", c.step.tool),
                        );
                    }
                }
                // The answer reports the c.changed fields with their new values, not the old
                // ones (a stale observation of a right state).
                if let (Some(answer), Some(before)) =
                    (observed::unwrapped(&c.step.observation), before)
                {
                    for (field, reported) in answer {
                        let (Some(stored), Some(old)) = (after.get(field), before.get(field))
                        else {
                            continue;
                        };
                        if reported.is_object()
                            || reported.is_array()
                            || old == stored
                            || writes.reported_differs.contains(field)
                        {
                            continue;
                        }
                        c.checked += 1;
                        if reported == old {
                            c.violation(
                                ViolationKind::StaleRead,
                                Some(shown.clone()),
                                Some(field.clone()),
                                None,
                                format!("{} answers {field} = {reported}, the value it had before; it set {shown}.{field} to {stored}", c.step.tool),
                            );
                        }
                    }
                }
            }
            // Other resources, for a tool that changes nothing but its target.
            if writes.only_target && writes.changes_seen >= implied::ONLY_TARGET_EVIDENCE {
                c.checked += 1;
                let elsewhere = h.found[c.k + 1]
                    .iter()
                    .find(|(key, value)| {
                        !key.0.contains('*')
                            && *key != tkey
                            && h.found[c.k].get(*key) != Some(*value)
                    })
                    .map(|(key, _)| label_of(&key.0, key.1));
                if let Some(other) = elsewhere {
                    c.violation(
                        ViolationKind::SpuriousWrite,
                        Some(other.clone()),
                        None,
                        None,
                        format!("{} changes {other}; its walks only ever changed what it names ({shown})", c.step.tool),
                    );
                }
            }
        }
    }
}

/// A failure that says a resource it names is not found, when the state holds it.
fn error_contradicts_state(c: &mut StepCheck<'_, '_>, h: &mut History<'_, '_>) {
    if c.step.success == Some(false) && observed::says_not_found(&c.step.observation) {
        let text = match &c.step.observation {
            Value::String(t) => t.clone(),
            other => other.to_string(),
        };
        // Only a call that names one id, quoted by the text: with a parent's id too, "not
        // found" may mean "not under that parent".
        let ids: Vec<&str> = c
            .step
            .arguments
            .iter()
            .filter(|(arg, _)| observed::id_noun(arg).is_some())
            .filter_map(|(_, v)| v.as_str())
            .collect();
        let quoted = match ids.as_slice() {
            [id] if observed::mentions(&text, id) => Some(*id),
            _ => None,
        };
        if let Some(id) = quoted {
            c.checked += 1;
            // The resource with that id whose type the text names ("Access code D4 not
            // found" is not about device D4).
            let lower = text.to_lowercase();
            let held = h.all_ids.get(id).and_then(|kinds| {
                // Top-level resources only: a nested one is "not found" under another
                // parent.
                kinds
                    .iter()
                    .filter(|kind| !kind.contains('*'))
                    .find(|kind| {
                        let noun = observed::singular(kind.rsplit('/').next().unwrap_or_default())
                            .replace('_', " ");
                        lower.contains(&noun) && h.found[c.k].contains_key(&((*kind).clone(), id))
                    })
            });
            if let Some(kind) = held {
                c.violation(
                    ViolationKind::ErrorContradictsState,
                    Some(label_of(kind, id)),
                    None,
                    None,
                    format!(
                        "{} says {id} is not found; the state holds {}",
                        c.step.tool,
                        label_of(kind, id)
                    ),
                );
            }
        }
    }
}

/// Resources that appear or vanish (top-level ones) under tools that never create or delete their type.
fn appear_and_vanish(c: &mut StepCheck<'_, '_>, h: &mut History<'_, '_>) {
    if c.changed {
        let (added, removed) = &h.deltas[c.k];
        // Only top-level resources: nested ones come and go with their parents and with
        // updates of them.
        let created = added.iter().filter(|key| !key.0.contains('*')).count();
        for key in added.iter().copied().filter(|key| !key.0.contains('*')) {
            c.checked += 1;
            let may_create = c.fx.may_create(&key.0, key.1, &c.step.arguments);
            if may_create && created > c.fx.max_created {
                c.violation(
                    ViolationKind::AppearedWithoutCreate,
                    Some(label_of(&key.0, key.1)),
                    None,
                    None,
                    format!(
                        "{created} resources appear under {}, which creates at most {}",
                        c.step.tool, c.fx.max_created
                    ),
                );
            } else if !may_create {
                let earlier = h.removed_at.get(key).copied();
                let why = match earlier {
                    Some(j) => format!(
                        "{} reappears after step {j} removed it, under {} which never creates {}",
                        label_of(&key.0, key.1),
                        c.step.tool,
                        key.0
                    ),
                    None => format!(
                        "{} appears under {} which never creates {}",
                        label_of(&key.0, key.1),
                        c.step.tool,
                        key.0
                    ),
                };
                c.violation(
                    ViolationKind::AppearedWithoutCreate,
                    Some(label_of(&key.0, key.1)),
                    None,
                    earlier,
                    why,
                );
            }
        }
        for key in removed.iter().copied() {
            h.removed_at.insert(key.clone(), c.k);
            if key.0.contains('*') {
                continue;
            }
            c.checked += 1;
            let resource = label_of(&key.0, key.1);
            let why = if !c.fx.may_delete(&key.0, key.1, &c.step.arguments) {
                Some(format!(
                    "{resource} vanishes under {} which never deletes {}",
                    c.step.tool, key.0
                ))
            } else if c.fx.deletes_named_only && !names_of(&c.step.arguments, &key.0, key.1) {
                Some(format!(
                    "{resource} vanishes under {}, which deletes only what its arguments name",
                    c.step.tool
                ))
            } else {
                None
            };
            if let Some(why) = why {
                c.violation(
                    ViolationKind::VanishedWithoutDelete,
                    Some(resource),
                    None,
                    None,
                    why,
                );
            }
        }
    }
}

/// Referential integrity: what a created resource refers to by id exists, when the state has a collection of that kind.
fn dangling_references(c: &mut StepCheck<'_, '_>, h: &mut History<'_, '_>) {
    if c.changed && h.deltas[c.k].0.iter().any(|key| !key.0.contains('*')) {
        let after = &h.found[c.k + 1];
        // Top-level collections by the singular of their name (`customers` → `customer`).
        let mut collections: BTreeMap<String, &str> = BTreeMap::new();
        for (kind, _) in after.keys().filter(|key| !key.0.contains('*')) {
            collections
                .entry(observed::singular(kind))
                .or_insert(kind.as_ref());
        }
        for key in h.deltas[c.k].0.iter().filter(|key| !key.0.contains('*')) {
            let Some(Value::Object(fields)) = after.get(*key) else {
                continue;
            };
            for (field, value) in fields {
                let (Some(noun), Some(id)) = (observed::id_noun(field), value.as_str()) else {
                    continue;
                };
                let Some(kind) = collections.get(&noun) else {
                    continue;
                };
                c.checked += 1;
                if !after.contains_key(&(std::borrow::Cow::Borrowed(*kind), id)) {
                    c.violation(
                        ViolationKind::DanglingReference,
                        Some(label_of(&key.0, key.1)),
                        Some(field.clone()),
                        None,
                        format!(
                            "{} creates {} with {field} = {id:?}, and {kind} holds no {id}",
                            c.step.tool,
                            label_of(&key.0, key.1)
                        ),
                    );
                }
            }
        }
    }
}

/// Reads: ids named by the arguments (phantoms, reads after a delete), and the fields the observation returns against the resource's current ones (stale reads).
fn reads(c: &mut StepCheck<'_, '_>, h: &mut History<'_, '_>) {
    if c.step.success == Some(true) && c.fx.read_only {
        let current = &h.found[c.k + 1];
        let mut named: Vec<KeyRef<'_>> = Vec::new();
        for (arg, value) in &c.step.arguments {
            let Some(id) = value.as_str() else { continue };
            let lower = arg.to_lowercase();
            if !(lower == "id" || lower.ends_with("_id") || lower.ends_with("id")) {
                continue;
            }
            c.checked += 1;
            match h.all_ids.get(id) {
                // A phantom only when the call returned a record for it (a list that finds
                // nothing for an unknown id is right).
                None if returns_record(&c.step.observation) => c.violation(
                    ViolationKind::PhantomId,
                    None,
                    Some(arg.clone()),
                    None,
                    format!(
                        "{} succeeds on {arg} = {id:?}, which no state of the trajectory holds",
                        c.step.tool
                    ),
                ),
                None => {}
                Some(kinds) => {
                    let keys: Vec<KeyRef<'_>> =
                        kinds.iter().map(|kind| (kind.clone(), id)).collect();
                    if keys.iter().all(|key| !current.contains_key(key)) {
                        let gone = keys
                            .iter()
                            .find_map(|key| h.removed_at.get(key).map(|s| (key, *s)));
                        if let Some((key, j)) = gone {
                            c.violation(
                                ViolationKind::ReadAfterDelete,
                                Some(label_of(&key.0, key.1)),
                                Some(arg.clone()),
                                Some(j),
                                format!(
                                    "{} succeeds on {}, which step {j} removed",
                                    c.step.tool,
                                    label_of(&key.0, key.1)
                                ),
                            );
                        }
                    }
                    named.extend(keys.into_iter().filter(|key| current.contains_key(key)));
                }
            }
        }
        // The observation object that best matches each named resource, field by field.
        let mut returned = Vec::new();
        objects(&c.step.observation, &mut returned);
        for key in &named {
            let Some(resource) = current.get(key) else {
                continue;
            };
            let truth = scalars(resource);
            // An object describes the resource when at least two of its fields equal the
            // resource's and at least half of its fields are the resource's fields (a
            // folio that quotes a reservation's id is not the reservation).
            let best = returned
                .iter()
                .map(|o| {
                    let seen = scalars(o);
                    let same = seen
                        .iter()
                        .filter(|(f, v)| truth.get(*f) == Some(v))
                        .count();
                    let shared = seen.keys().filter(|f| truth.contains_key(*f)).count();
                    (same, shared, seen)
                })
                .filter(|(same, shared, seen)| *same >= 2 && 2 * shared >= seen.len())
                .max_by_key(|(same, _, _)| *same)
                .map(|(_, _, seen)| seen);
            let Some(seen) = best else { continue };
            for (field, value) in seen {
                let Some(actual) = truth.get(field) else {
                    continue;
                };
                c.checked += 1;
                if *actual == value {
                    continue;
                }
                // The latest earlier state with the returned value, and the step that set
                // it there (`None`: the initial state had it).
                let value_at = |i: usize| h.found[i].get(key).and_then(|r| r.get(field));
                let past = (0..=c.k)
                    .rev()
                    .find(|&i| value_at(i) == Some(value))
                    .map(|i| {
                        let mut start = i;
                        while start > 0 && value_at(start - 1) == Some(value) {
                            start -= 1;
                        }
                        start.checked_sub(1)
                    });
                let (conflict, why) = match past {
                    Some(set) => (
                        set,
                        format!("{} returns {}.{field} = {value}, a value it had before; it is {actual}", c.step.tool, label_of(&key.0, key.1)),
                    ),
                    None => (
                        None,
                        format!("{} returns {}.{field} = {value}; the state holds {actual}", c.step.tool, label_of(&key.0, key.1)),
                    ),
                };
                c.violation(
                    ViolationKind::StaleRead,
                    Some(label_of(&key.0, key.1)),
                    Some(field.to_owned()),
                    conflict,
                    why,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(
        tool: &str,
        args: Value,
        observation: Value,
        success: bool,
        after: impl Into<std::sync::Arc<Value>>,
    ) -> AuditStep {
        AuditStep {
            tool: tool.into(),
            arguments: args.as_object().cloned().unwrap_or_default(),
            observation,
            success: Some(success),
            state_after: after.into(),
        }
    }

    /// A ticket desk: create T2, close it, read it, delete T1.
    fn clean() -> AuditTrajectory {
        let t1 = json!({"status": "open", "title": "a", "owner": "ann"});
        let t2 = json!({"status": "open", "title": "b", "owner": "bob"});
        let t2_closed = json!({"status": "closed", "title": "b", "owner": "bob"});
        let s0 = json!({"tickets": {"T1": t1}, "next": 2});
        let s1 = json!({"tickets": {"T1": t1, "T2": t2}, "next": 3});
        let s2 = json!({"tickets": {"T1": t1, "T2": t2_closed}, "next": 3});
        let s3 = json!({"tickets": {"T2": t2_closed}, "next": 3});
        AuditTrajectory {
            id: "t".into(),
            initial_state: s0.into(),
            steps: vec![
                step(
                    "create_ticket",
                    json!({"title": "b"}),
                    json!({"success": true, "id": "T2"}),
                    true,
                    s1,
                ),
                step(
                    "close_ticket",
                    json!({"ticket_id": "T2"}),
                    json!({"success": true}),
                    true,
                    s2.clone(),
                ),
                step(
                    "get_ticket",
                    json!({"ticket_id": "T2"}),
                    json!({"success": true, "data": {"status": "closed", "title": "b", "owner": "bob"}}),
                    true,
                    s2,
                ),
                step(
                    "delete_ticket",
                    json!({"ticket_id": "T1"}),
                    json!({"success": true}),
                    true,
                    s3,
                ),
            ],
        }
    }

    #[test]
    fn resources_are_the_entries_of_collections() {
        let state = json!({"tickets": {"T1": {"msgs": {"M1": {"t": 1}}}}, "settings": {"now": 1}});
        let keys: Vec<ResourceKey> = resources(&state).into_keys().collect();
        assert_eq!(
            keys,
            [
                ("tickets".to_owned(), "T1".to_owned()),
                ("tickets/*/msgs".to_owned(), "M1".to_owned())
            ]
        );
    }

    #[test]
    fn a_clean_trajectory_holds_every_constraint_under_learned_and_guessed_effects() {
        let t = clean();
        // Rules about all successes need three of them: the fixture three times.
        let learned = Effects::learn(&[t.clone(), t.clone(), t.clone()]);
        // What was seen, and what the name says (any type).
        assert_eq!(
            learned.of("create_ticket").creates,
            BTreeSet::from(["*".to_owned(), "tickets".to_owned()])
        );
        assert!(learned.of("close_ticket").success_changes);
        assert!(
            !Effects::learn(std::slice::from_ref(&t))
                .of("close_ticket")
                .success_changes
        );
        assert!(learned.of("get_ticket").read_only);
        for effects in [learned, Effects::default()] {
            let report = audit(&t, &effects);
            assert_eq!(report.violations, [], "{effects:?}");
            assert!(report.checked >= 6, "{}", report.checked);
            assert_eq!(report.scs(), 1.0);
        }
    }

    #[test]
    fn never_creates_or_deletes_is_claimed_only_on_evidence() {
        // `clear_cart` walked on empty carts, `ping_cart` never succeeding: neither says what
        // it does to entries; `rename_cart` succeeded with an entry present and kept it.
        let empty = json!({"carts": {"C1": {"name": "a"}}, "entries": {}});
        let full = json!({"carts": {"C1": {"name": "a"}}, "entries": {"E1": {"cart": "C1"}}});
        let renamed = json!({"carts": {"C1": {"name": "b"}}, "entries": {"E1": {"cart": "C1"}}});
        let walk = |steps: Vec<AuditStep>, initial: &Value| AuditTrajectory {
            id: "w".into(),
            initial_state: initial.clone().into(),
            steps,
        };
        let ok = json!({"success": true});
        let walks: Vec<AuditTrajectory> = (0..3)
            .map(|_| {
                walk(
                    vec![step(
                        "clear_cart",
                        json!({}),
                        ok.clone(),
                        true,
                        empty.clone(),
                    )],
                    &empty,
                )
            })
            .chain((0..3).map(|_| {
                walk(
                    vec![step(
                        "rename_cart",
                        json!({"name": "b"}),
                        ok.clone(),
                        true,
                        renamed.clone(),
                    )],
                    &full,
                )
            }))
            .chain(std::iter::once(walk(
                vec![step(
                    "ping_cart",
                    json!({}),
                    json!({"success": false}),
                    false,
                    empty.clone(),
                )],
                &empty,
            )))
            .collect();
        let effects = Effects::learn(&walks);
        let cleared = walk(
            vec![step(
                "clear_cart",
                json!({}),
                ok.clone(),
                true,
                empty.clone(),
            )],
            &full,
        );
        assert_eq!(audit(&cleared, &effects).violations, []);
        let pinged = walk(
            vec![step("ping_cart", json!({}), ok.clone(), true, full.clone())],
            &empty,
        );
        assert_eq!(audit(&pinged, &effects).violations, []);
        // Evidence holds: a rename that deletes the entry, or creates one, is flagged.
        // The kinds flagged on a rename from `full` that leaves `after`.
        let renamed_to = |after: Value| -> Vec<ViolationKind> {
            let t = walk(
                vec![step(
                    "rename_cart",
                    json!({"name": "b"}),
                    ok.clone(),
                    true,
                    after,
                )],
                &full,
            );
            audit(&t, &effects)
                .violations
                .iter()
                .map(|v| v.kind)
                .collect()
        };
        assert_eq!(
            renamed_to(json!({"carts": {"C1": {"name": "b"}}, "entries": {}})),
            [ViolationKind::VanishedWithoutDelete]
        );
        let kinds = renamed_to(
            json!({"carts": {"C1": {"name": "b"}}, "entries": {"E1": {"cart": "C1"}, "E2": {"cart": "C1"}}}),
        );
        assert!(
            kinds.contains(&ViolationKind::AppearedWithoutCreate),
            "{kinds:?}"
        );
    }

    #[test]
    fn what_the_code_cannot_reach_is_never_made_or_removed() {
        let code = "class Desk:\n    def scan_ticket(self, ticket_id):\n        t = self.tickets[ticket_id]\n        t['scanned'] = True\n        return {'success': True}\n    def sweep(self):\n        for k in list(self.tickets):\n            del self.tickets[k]\n        return {'success': True}\n";
        // No walk ever got either tool right: only the code bounds them.
        let effects = Effects::default().with_code(
            code,
            crate::slice::Convention::Class,
            ["scan_ticket", "sweep"],
        );
        let before = json!({"tickets": {"T1": {"scanned": false}}});
        let ok = json!({"success": true});
        let one = |tool: &str, args: Value, after: Value| AuditTrajectory {
            id: "t".into(),
            initial_state: before.clone().into(),
            steps: vec![step(tool, args, ok.clone(), true, after)],
        };
        let kinds = |t: &AuditTrajectory| kinds_of(t, &effects);
        // A phantom under a call that names T1.
        let phantom = one(
            "scan_ticket",
            json!({"ticket_id": "T1"}),
            json!({"tickets": {"T1": {"scanned": true}, "PHANTOM-1": {"scanned": false}}}),
        );
        assert_eq!(kinds(&phantom), [ViolationKind::AppearedWithoutCreate]);
        // The entry its argument names may come and go.
        let named = one(
            "scan_ticket",
            json!({"ticket_id": "T2"}),
            json!({"tickets": {"T1": {"scanned": false}, "T2": {"scanned": true}}}),
        );
        assert_eq!(kinds(&named), []);
        // Code that iterates the table may remove any entry.
        let swept = one("sweep", json!({}), json!({"tickets": {}}));
        assert_eq!(kinds(&swept), []);
        // A tool the slicer cannot bound (no such method) stays open.
        let unknown = one(
            "other",
            json!({}),
            json!({"tickets": {"T1": {"scanned": false}, "T9": {}}}),
        );
        assert_eq!(kinds(&unknown), []);
    }

    #[test]
    fn a_guess_claims_only_what_the_name_says() {
        let send = ToolEffects::guess("send_reset_code");
        assert!(
            send.may_create("emails", "X1", &Map::new())
                && send.may_delete("emails", "X1", &Map::new())
        );
        let get = ToolEffects::guess("get_ticket");
        assert!(
            !get.may_create("tickets", "X1", &Map::new())
                && !get.may_delete("tickets", "X1", &Map::new())
        );
        let create = ToolEffects::guess("create_ticket");
        assert!(
            create.may_create("tickets", "X1", &Map::new())
                && !create.may_delete("tickets", "X1", &Map::new())
        );
        let delete = ToolEffects::guess("delete_ticket");
        assert!(
            delete.may_delete("tickets", "X1", &Map::new())
                && !delete.may_create("tickets", "X1", &Map::new())
        );
    }

    #[test]
    fn a_success_that_sets_what_is_there_changes_nothing_by_construction() {
        // `retitle_ticket` always changed the state in the walks (3 of 3).
        let walk = |title: &str| {
            let before = json!({"tickets": {"T1": {"title": "a", "owner": "ann"}}});
            let after = json!({"tickets": {"T1": {"title": title, "owner": "ann"}}});
            AuditTrajectory {
                id: "w".into(),
                initial_state: before.into(),
                steps: vec![step(
                    "retitle_ticket",
                    json!({"ticket_id": "T1", "title": title}),
                    json!({"success": true}),
                    true,
                    after,
                )],
            }
        };
        let effects = Effects::learn(&[walk("b"), walk("c"), walk("d")]);
        assert!(effects.of("retitle_ticket").success_changes);
        // A walk that retitled to the title it had is no evidence against it either; one
        // that retitled to another title and changed nothing is.
        let unchanged = |title: &str| {
            let mut t = walk(title);
            t.steps[0].state_after = t.initial_state.clone();
            t
        };
        let learned = Effects::learn(&[walk("b"), walk("c"), walk("d"), unchanged("a")]);
        assert!(learned.of("retitle_ticket").success_changes);
        let learned = Effects::learn(&[walk("b"), walk("c"), walk("d"), unchanged("q")]);
        assert!(!learned.of("retitle_ticket").success_changes);
        let kinds = |title: &str| -> Vec<ViolationKind> {
            let mut t = walk(title);
            t.steps[0].state_after = t.initial_state.clone();
            audit(&t, &effects)
                .violations
                .iter()
                .map(|v| v.kind)
                .collect()
        };
        // Retitled to the title it has: no change is the right answer.
        assert_eq!(kinds("a"), []);
        // Retitled to another and nothing changed: a dropped update.
        assert_eq!(kinds("z"), [ViolationKind::SuccessWithoutChange]);
    }

    /// The kinds of the violations the audit of `t` with `effects` finds, in order.
    fn kinds_of(t: &AuditTrajectory, effects: &Effects) -> Vec<ViolationKind> {
        audit(t, effects)
            .violations
            .iter()
            .map(|v| v.kind)
            .collect()
    }

    #[test]
    fn the_same_call_made_again_on_what_it_did_may_change_nothing() {
        // `grow(size=4)` makes the ticket BIG; made again, BIG is there and nothing changes.
        let s0 = json!({"tickets": {"T1": {"title": "a"}}});
        let s1 = json!({"tickets": {"T1": {"title": "a"}, "BIG": {"title": "xxxx"}}});
        let grow = |after: &Value| {
            step(
                "grow",
                json!({"size": 4}),
                json!({"success": true}),
                true,
                after.clone(),
            )
        };
        let walk = |steps: Vec<AuditStep>| AuditTrajectory {
            id: "w".into(),
            initial_state: s0.clone().into(),
            steps,
        };
        let walks = [
            walk(vec![grow(&s1), grow(&s1)]),
            walk(vec![grow(&s1)]),
            walk(vec![grow(&s1), grow(&s1)]),
        ];
        let effects = Effects::learn(&walks);
        assert!(effects.of("grow").success_changes && effects.of("grow").repeat_keeps);
        let kinds = |t: &AuditTrajectory| kinds_of(t, &effects);
        assert_eq!(kinds(&walks[0]), []);
        // Walks whose repeats always changed something (each call makes one more) excuse no
        // repeat that changes nothing.
        let once = Effects::learn(&[walks[1].clone(), walks[1].clone(), walks[1].clone()]);
        assert!(once.of("grow").success_changes && !once.of("grow").repeat_keeps);
        assert_eq!(
            kinds_of(&walks[0], &once),
            [ViolationKind::SuccessWithoutChange]
        );
        // The first call changing nothing is a dropped write.
        assert_eq!(
            kinds(&walk(vec![grow(&s0)])),
            [ViolationKind::SuccessWithoutChange]
        );
        // A success that changed nothing after another change is evidence that its successes
        // may change nothing.
        let mut s2 = s1.clone();
        s2["tickets"]["T2"] = json!({"title": "b"});
        let add = step(
            "add_ticket",
            json!({"title": "b"}),
            json!({"success": true}),
            true,
            s2.clone(),
        );
        let learned = Effects::learn(&[
            walks[0].clone(),
            walks[1].clone(),
            walk(vec![grow(&s1), add, grow(&s2)]),
        ]);
        assert!(!learned.of("grow").success_changes);
    }

    /// A reference to another resource (the card a change would charge) is not a value the
    /// call sets; a call that references and sets nothing restates nothing.
    #[test]
    fn references_are_no_values_a_restating_call_sets() {
        let state = json!({"tickets": {"T1": {"title": "a", "bags": 0}},
                           "cards": {"C9": {"last_four": "4242"}}});
        let before = resource_refs(&state);
        let args = |v: Value| v.as_object().cloned().unwrap();
        assert!(restates(
            &before,
            &args(json!({"ticket_id": "T1", "title": "a", "card_id": "C9"}))
        ));
        assert!(restates(
            &before,
            &args(json!({"ticket_id": "T1", "bags": 0, "card_id": "C9"}))
        ));
        assert!(!restates(
            &before,
            &args(json!({"ticket_id": "T1", "title": "z", "card_id": "C9"}))
        ));
        assert!(!restates(
            &before,
            &args(json!({"ticket_id": "T1", "card_id": "C9"}))
        ));
        // A card that is not a resource of the state is a value like any other.
        assert!(!restates(
            &before,
            &args(json!({"ticket_id": "T1", "title": "a", "card_id": "C7"}))
        ));
    }

    #[test]
    fn each_fault_is_found_with_its_kind_step_and_conflict() {
        let effects = Effects::learn(&[clean(), clean(), clean()]);
        let kinds = |t: &AuditTrajectory| -> Vec<(usize, ViolationKind, Option<usize>)> {
            audit(t, &effects)
                .violations
                .iter()
                .map(|v| (v.step, v.kind, v.conflicting_step))
                .collect()
        };
        // The close is dropped: success with no change.
        let mut t = clean();
        t.steps[1].state_after = t.steps[0].state_after.clone();
        t.steps.truncate(2);
        assert_eq!(kinds(&t), [(1, ViolationKind::SuccessWithoutChange, None)]);
        // The read returns the status T2 had before step 1 closed it.
        let mut t = clean();
        t.steps[2].observation =
            json!({"success": true, "data": {"status": "open", "title": "b", "owner": "bob"}});
        assert_eq!(kinds(&t), [(2, ViolationKind::StaleRead, Some(0))]);
        let v = &audit(&t, &effects).violations[0];
        assert_eq!(v.resource.as_deref(), Some("tickets/T2"));
        assert_eq!(v.field.as_deref(), Some("status"));
        assert_eq!(
            v.explanation,
            "get_ticket returns tickets/T2.status = \"open\", a value it had before; it is \"closed\""
        );
        // T2 vanishes at the close.
        let mut t = clean();
        std::sync::Arc::make_mut(&mut t.steps[1].state_after)["tickets"]
            .as_object_mut()
            .unwrap()
            .remove("T2");
        t.steps[2].state_after = t.steps[1].state_after.clone();
        t.steps.truncate(2);
        assert_eq!(kinds(&t), [(1, ViolationKind::VanishedWithoutDelete, None)]);
        // T1 comes back after its delete, under a read; then a read of a deleted one.
        let mut t = clean();
        let mut back = (*t.steps[3].state_after).clone();
        back["tickets"]["T1"] = json!({"status": "open", "title": "a", "owner": "ann"});
        t.steps.push(step(
            "get_ticket",
            json!({"ticket_id": "T1"}),
            json!({"success": true}),
            true,
            back,
        ));
        assert_eq!(
            kinds(&t),
            [(4, ViolationKind::AppearedWithoutCreate, Some(3))]
        );
        let mut t = clean();
        let s3 = t.steps[3].state_after.clone();
        t.steps.push(step(
            "get_ticket",
            json!({"ticket_id": "T1"}),
            json!({"success": true}),
            true,
            s3.clone(),
        ));
        t.steps.push(step(
            "get_ticket",
            json!({"ticket_id": "T9"}),
            json!({"success": true, "data": {"status": "open"}}),
            true,
            s3,
        ));
        assert_eq!(
            kinds(&t),
            [
                (4, ViolationKind::ReadAfterDelete, Some(3)),
                (5, ViolationKind::PhantomId, None)
            ]
        );
        let report = audit(&t, &effects);
        assert!(report.scs() < 1.0 && report.scs() > 0.5, "{}", report.scs());
    }

    #[test]
    fn responses_keep_their_shape() {
        let mut shape = ResponseShape::default();
        for (id, reason) in [
            ("T1", json!(null)),
            ("T2", json!("late")),
            ("T3", json!(null)),
        ] {
            shape.learn(
                &json!({"success": true, "data": {"ticket_id": id, "n": 1, "reason": reason,
                "items": {"A-1": {"qty": 1}, "B-2": {"qty": 2}}, "tags": [{"k": "x"}]}}),
            );
        }
        let ok = json!({"success": true, "data": {"ticket_id": "T9", "n": 2, "reason": null,
            "items": {"C-3": {"qty": 5}, "D-4": {"qty": 1}}, "tags": []}});
        assert_eq!(shape.problems(&ok), Vec::<String>::new());
        let drifted =
            json!({"success": true, "data": {"ticketId": "T9", "n": "2", "tags": [{"k": 1}]}});
        assert_eq!(
            shape.problems(&drifted),
            [
                "field data.ticketId was never in its responses",
                "data.n is a string; it was number",
                "data.tags[].k is a number; it was string",
            ]
        );
        // Too little evidence: nothing to say.
        let mut young = ResponseShape::default();
        young.learn(&ok);
        assert_eq!(young.problems(&drifted), Vec::<String>::new());
    }

    /// τ²-bench's retail orders: each item's `options` is an open map (a keyboard's `switch
    /// type`, a vacuum's `bagged/bagless`), while the item itself is a fixed record. A key never
    /// seen in an open map is no departure; in a fixed record it is, and a departure repeated
    /// in every item is said once.
    #[test]
    fn open_maps_take_any_key_and_fixed_records_do_not() {
        let mut shape = ResponseShape::default();
        for options in [
            json!({"color": "red", "size": "M"}),
            json!({"switch type": "linear", "backlight": "RGB"}),
            json!({"capacity": "1L"}),
        ] {
            shape.learn(&json!({"order_id": "#W1", "items": [
                {"name": "x", "price": 1.5, "options": options},
                {"name": "y", "price": 2.0, "options": {"color": "blue"}}]}));
        }
        let new_option = json!({"order_id": "#W2", "items": [
            {"name": "z", "price": 3.0, "options": {"bagged/bagless": "bagless"}}]});
        assert_eq!(shape.problems(&new_option), Vec::<String>::new());
        let renamed = json!({"order_id": "#W3", "items": [
            {"Name": "z", "price": 3.0, "options": {}},
            {"Name": "w", "price": 1.0, "options": {}}]});
        assert_eq!(
            shape.problems(&renamed),
            ["field items[].Name was never in its responses"]
        );
    }

    /// τ²-bench's airline searches: learned only from searches that found nothing, the shape
    /// knows nothing of a flight, so a list of flights is no departure; once flights were seen,
    /// a renamed field of one is.
    #[test]
    fn entries_of_lists_only_ever_seen_empty_are_not_judged() {
        let mut shape = ResponseShape::default();
        for _ in 0..3 {
            shape.learn(&json!([]));
        }
        let found = json!([{"flight_number": "HAT001", "origin": "JFK"}]);
        assert_eq!(shape.problems(&found), Vec::<String>::new());
        for _ in 0..3 {
            shape.learn(&found);
        }
        assert_eq!(
            shape.problems(&json!([{"flightNumber": "HAT002", "origin": "JFK"}])),
            ["field [].flightNumber was never in its responses"]
        );
    }

    #[test]
    fn every_planted_fault_is_found_at_its_step_and_clean_runs_stay_clean() {
        let mut t = clean();
        let s3 = t.steps[3].state_after.clone();
        t.steps.push(step(
            "get_ticket",
            json!({"ticket_id": "T1"}),
            json!({"success": false, "error": "no T1"}),
            false,
            s3,
        ));
        let effects = Effects::learn(&[t.clone(), t.clone(), t.clone()]);
        assert_eq!(audit(&t, &effects).violations, []);
        let mut planted = BTreeMap::new();
        for seed in 0..40 {
            let mut rng = crate::rng::Rng::new(seed);
            for kind in FaultKind::ALL {
                let Some((faulty, label)) = inject(&t, kind, &mut rng) else {
                    panic!("{kind:?} has a place in the fixture");
                };
                assert_ne!(faulty, t, "{kind:?}");
                let found = audit(&faulty, &effects)
                    .violations
                    .iter()
                    .any(|v| v.step == label.step && kind.found_by().contains(&v.kind));
                *planted.entry((kind, found)).or_insert(0) += 1;
            }
        }
        // Every planted fault is found at its step, except a wrong error text: it shows only
        // when the new text says "not found" for something the state holds, and this
        // fixture's only failure is on a ticket already gone.
        for kind in FaultKind::ALL {
            let missed = planted.get(&(kind, false)).copied().unwrap_or(0);
            let expected = if kind == FaultKind::WrongError { 40 } else { 0 };
            assert_eq!(missed, expected, "{kind:?} missed {missed} of 40");
        }
    }

    #[test]
    fn resource_changes_say_what_was_created_deleted_and_updated() {
        let before =
            json!({"orders": {"O1": {"s": "new"}, "O2": {"s": "new"}}, "carts": {"C1": {"n": 1}}});
        let after =
            json!({"orders": {"O1": {"s": "paid"}, "O3": {"s": "new"}}, "carts": {"C1": {"n": 1}}});
        let changes: Vec<(String, ResourceChange)> = resource_changes(&before, &after)
            .into_iter()
            .map(|((kind, id), c)| (format!("{kind}/{id}"), c))
            .collect();
        assert_eq!(
            changes,
            [
                ("orders/O1".to_string(), ResourceChange::Updated),
                ("orders/O2".to_string(), ResourceChange::Deleted),
                ("orders/O3".to_string(), ResourceChange::Created),
            ]
        );
        assert!(resource_changes(&before, &before).is_empty());
    }

    #[test]
    fn what_a_created_resource_refers_to_exists() {
        let s0 =
            json!({"customers": {"C1": {"name": "ann"}}, "orders": {"O1": {"customer_id": "C1"}}});
        let good = json!({"customers": {"C1": {"name": "ann"}},
            "orders": {"O1": {"customer_id": "C1"}, "O2": {"customer_id": "C1", "note_id": "N9"}}});
        let bad = json!({"customers": {"C1": {"name": "ann"}},
            "orders": {"O1": {"customer_id": "C1"}, "O2": {"customer_id": "C7"}}});
        let t = |after: &Value| AuditTrajectory {
            id: "t".into(),
            initial_state: s0.clone().into(),
            steps: vec![step(
                "place_order",
                json!({"customer_id": "C1"}),
                json!({"success": true}),
                true,
                after.clone(),
            )],
        };
        let effects = Effects::default();
        // A reference to a collection the state does not have (notes) is not checked.
        assert_eq!(audit(&t(&good), &effects).violations, []);
        let report = audit(&t(&bad), &effects);
        let found: Vec<(ViolationKind, Option<&str>, Option<&str>)> = report
            .violations
            .iter()
            .map(|v| (v.kind, v.resource.as_deref(), v.field.as_deref()))
            .collect();
        assert_eq!(
            found,
            [(
                ViolationKind::DanglingReference,
                Some("orders/O2"),
                Some("customer_id")
            )]
        );
    }

    #[test]
    fn a_not_found_for_what_the_state_holds_contradicts_it() {
        let mut t = clean();
        let s2 = t.steps[2].state_after.clone();
        // Closing T2 again: the real answer is a conflict.
        t.steps.insert(
            3,
            step(
                "close_ticket",
                json!({"ticket_id": "T2"}),
                json!({"success": false, "error": "T2 is already closed"}),
                false,
                s2,
            ),
        );
        let effects = Effects::learn(&[t.clone(), t.clone(), t.clone()]);
        assert_eq!(audit(&t, &effects).violations, []);
        let mut wrong = t.clone();
        wrong.steps[3].observation = json!({"success": false, "error": "ticket_id T2 not found"});
        let found_in = |t: &AuditTrajectory| -> Vec<(usize, ViolationKind)> {
            audit(t, &effects)
                .violations
                .iter()
                .map(|v| (v.step, v.kind))
                .collect()
        };
        assert_eq!(
            found_in(&wrong),
            [(3, ViolationKind::ErrorContradictsState)]
        );
        // The injector writes such texts among the kinds it swaps in.
        let mut found = 0;
        for seed in 0..30 {
            let mut rng = crate::rng::Rng::new(seed);
            let (faulty, label) = inject(&t, FaultKind::WrongError, &mut rng).unwrap();
            assert_eq!(label.step, 3);
            found += usize::from(
                audit(&faulty, &effects)
                    .violations
                    .iter()
                    .any(|v| v.step == 3 && v.kind == ViolationKind::ErrorContradictsState),
            );
        }
        // One in three of the swapped kinds is "not found".
        assert_eq!(found, 9, "of 30");
    }

    #[test]
    fn declared_effects_stand_in_for_tools_never_seen() {
        let declared: BTreeMap<String, Vec<EffectAnnotation>> = serde_json::from_value(json!({
            "create_ticket": [{"resource": "tickets", "operation": "create"}],
            "close_ticket": [{"resource": "tickets", "operation": "update", "id_parameter": "ticket_id"}],
            "get_ticket": [{"resource": "tickets", "operation": "read", "id_parameter": "ticket_id"}],
            "delete_ticket": [{"resource": "tickets", "operation": "delete", "id_parameter": "ticket_id"}]
        }))
        .unwrap();
        let effects = Effects::default().with_annotations(&declared);
        let create = effects.of("create_ticket");
        assert_eq!(create.source, EffectSource::Annotated);
        assert_eq!((create.max_created, create.success_changes), (1, true));
        assert!(effects.of("get_ticket").read_only);
        assert!(effects.of("delete_ticket").deletes_named_only);
        assert_eq!(audit(&clean(), &effects).violations, []);
        // Two tickets from one create: more than the declaration allows.
        let mut t = clean();
        std::sync::Arc::make_mut(&mut t.steps[0].state_after)["tickets"]["T7"] =
            json!({"status": "open", "title": "x", "owner": "x"});
        for step in &mut t.steps[1..3] {
            std::sync::Arc::make_mut(&mut step.state_after)["tickets"]["T7"] =
                json!({"status": "open", "title": "x", "owner": "x"});
        }
        t.steps.truncate(3);
        let v = audit(&t, &effects).violations;
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v
            .iter()
            .all(|x| x.kind == ViolationKind::AppearedWithoutCreate && x.step == 0 && !x.guessed));
        // What was learned wins over the declaration.
        let learned = Effects::learn(&[clean(), clean(), clean()]).with_annotations(&declared);
        assert_eq!(learned.of("create_ticket").source, EffectSource::Observed);
        let bad: Result<Vec<EffectAnnotation>, _> =
            serde_json::from_value(json!([{"resource": "t", "operation": "frobnicate"}]));
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("unknown variant `frobnicate`"));
    }

    #[test]
    fn drift_is_the_slope_of_violations_on_the_step_index() {
        // No violations early, all late: a positive slope whose interval excludes 0.
        let growing: Vec<Vec<bool>> = (0..30).map(|_| (0..10).map(|k| k >= 5).collect()).collect();
        let d = drift(&growing, 200, 1);
        assert_eq!(d.by_index[0], (30, 0));
        assert_eq!(d.by_index[9], (30, 30));
        // Least squares of the 0/1 step at 5 on 0..9: Sxy 12.5 over Sxx 82.5.
        assert!((d.slope - 12.5 / 82.5).abs() < 1e-12, "{}", d.slope);
        let ci = d.interval.expect("interval");
        assert!(
            ci.lo > 0.0 && ci.lo <= d.slope && d.slope <= ci.hi,
            "{ci:?}"
        );
        // Flat: slope 0 exactly.
        let flat: Vec<Vec<bool>> = (0..5).map(|t| vec![t % 2 == 0; 6]).collect();
        assert_eq!(drift(&flat, 50, 1).slope, 0.0);
        assert_eq!(drift(&[], 50, 1).interval, None);
    }

    #[test]
    fn changes_write_what_their_walks_showed() {
        // Walks: set_priority(ticket_id, priority) sets priority and nothing else, six times.
        let base = json!({"tickets": {"T1": {"priority": 1, "owner": "ann"}, "T2": {"priority": 1, "owner": "bob"}}, "carts": {"T1": {"items": 0}}});
        let mut steps = Vec::new();
        let mut state = base.clone();
        for (i, id) in ["T1", "T2", "T1", "T2", "T1", "T2"].iter().enumerate() {
            state["tickets"][*id]["priority"] = json!(i + 2);
            steps.push(step(
                "set_priority",
                json!({"ticket_id": id, "priority": i + 2}),
                json!({"success": true, "priority": i + 2, "note": "saved"}),
                true,
                state.clone(),
            ));
        }
        let walks = [AuditTrajectory {
            id: "w".into(),
            initial_state: base.clone().into(),
            steps,
        }];
        let fx = Effects::learn(&walks);
        let writes = fx.writes_of("set_priority");
        assert_eq!(writes.target_collection.as_deref(), Some("tickets"));
        assert_eq!(writes.write_evidence.get("priority"), Some(&6));
        let audit_one = |after: Value, answer: Value| {
            let t = AuditTrajectory {
                id: "t".into(),
                initial_state: base.clone().into(),
                steps: vec![step(
                    "set_priority",
                    json!({"ticket_id": "T1", "priority": 9}),
                    answer,
                    true,
                    after,
                )],
            };
            audit(&t, &fx)
                .violations
                .into_iter()
                .filter(|v| {
                    matches!(
                        v.kind,
                        ViolationKind::WriteNotApplied
                            | ViolationKind::SpuriousWrite
                            | ViolationKind::StaleRead
                    )
                })
                .map(|v| (v.kind.name(), v.resource, v.field))
                .collect::<Vec<_>>()
        };
        let ok = json!({"success": true, "priority": 9, "note": "saved"});
        let mut right = base.clone();
        right["tickets"]["T1"]["priority"] = json!(9);
        assert_eq!(audit_one(right.clone(), ok.clone()), []);
        // The argument not written (another field changed instead).
        let mut missed = base.clone();
        missed["tickets"]["T1"]["owner"] = json!("zed");
        assert_eq!(
            audit_one(missed, ok.clone()),
            [(
                "write_not_applied",
                Some("tickets/T1".into()),
                Some("priority".into())
            )]
        );
        // Something else changed too: the cart keyed by the same id is not the target.
        let mut spurious = right.clone();
        spurious["carts"]["T1"]["items"] = json!(3);
        assert_eq!(
            audit_one(spurious, ok),
            [("spurious_write", Some("carts/T1".into()), None)]
        );
        // A right state answered with the old value.
        assert_eq!(
            audit_one(
                right,
                json!({"success": true, "priority": 1, "note": "saved"})
            ),
            [(
                "stale_read",
                Some("tickets/T1".into()),
                Some("priority".into())
            )]
        );
    }
}
