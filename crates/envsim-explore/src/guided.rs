//! The guided strategy: a fuzzer's loop on calls.
//!
//! The exploration keeps *nodes*: states it reached by a call that brought something new (a
//! branch outcome of the environment's code, a line, a tool's first success, an outcome or a
//! size of change a tool had not shown), each with the path of calls that leads there from an
//! initial state. It starts from the initial states and from the package's own call sequences
//! (scripted tests, tasks' planned calls), then, until the budget is spent or nothing new comes
//! for the plan's plateau, picks a node — the more it brought and the less it was extended, the
//! likelier — and extends it by a few calls: tools that have not succeeded yet drawn more often,
//! arguments drawn from the state's records (around records it created itself, often) and from
//! earlier answers. A call drawn to succeed and refused is read ([`crate::refusal`]) and, for a
//! tool that has rarely succeeded, what the answer asks for is tried next. A tool's first
//! success is made again with a parameter on each side of the numbers its code compares it
//! with ([`crate::boundary`]).

use crate::driver::{
    arguments_explored, id_stem, kind_of, stem_names, Intent, RecordRef, StateIndex, ToolSpec,
};
use crate::record::{execute, Outcome, Position, StateCache, StateText, TransitionRecord};
use crate::refusal::{self, Next, Refused, Seen, Then};
use crate::report::Stop;
use crate::{Context, Origin, Walk};
use envsim_core::rng::Rng;
use envsim_exec::{Call, ExecError};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, VecDeque};

/// A state worth extending from.
struct Node {
    /// The initial state its path starts from.
    state: usize,
    /// Its path: `None` for the initial state itself.
    origin: Option<Origin>,
    /// Calls from the initial state.
    steps: usize,
    /// The state.
    text: StateText,
    /// What the call that reached it brought.
    score: f64,
    /// How often it was extended.
    picks: u32,
    /// The call that reached it and the state it was made in (`None` for an initial state):
    /// what a mutation changes and where it makes the changed call.
    reached_by: Option<(usize, Map<String, Value>, StateText)>,
}

impl Node {
    /// Where the call that reached it was made: its path's origin and steps one call shorter
    /// (what a mutation or a probe of that call starts from).
    fn before_its_call(&self) -> (Option<Origin>, usize) {
        let steps = self.steps.saturating_sub(1);
        let origin = self
            .origin
            .filter(|_| steps > 0)
            .map(|o| Origin { steps, ..o });
        (origin, steps)
    }
}

/// A call decided on.
struct Planned {
    tool: usize,
    args: Map<String, Value>,
    intent: Intent,
    /// An argument taken from what the call before did.
    created: Option<Taken>,
    /// How many refusals led to it (0: drawn; a call of the package's own sequences counts as
    /// [`REPAIR_DEPTH`], so that its refusals, meant or not, are not read).
    depth: u8,
}

/// An argument a planned call takes from the call before it.
enum Taken {
    /// The key of the record that call created.
    Created(String),
    /// The field of that name in its answer.
    Answered(String),
}

/// How many earlier answers arguments may be drawn from.
const ANSWERS_KEPT: usize = 16;
/// How many of the latest values answers gave under one field name are kept beyond those.
const ANSWERED_PER_NAME: usize = 4;
/// Field names whose answered values are kept.
const ANSWERED_NAMES: usize = 256;
/// How many records the exploration created or changed it keeps to draw calls around.
const FRESH_KEPT: usize = 32;
/// How often a coherent call is drawn around a record the exploration created or changed
/// (an agent acts on what it just made or moved: the trip it matched is the one to start).
const FRESH_SHARE: f64 = 0.5;
/// Under how many successes a tool's refusals are read.
const READ_BELOW_SUCCESSES: usize = 3;
/// How many even shares of the budget (the budget divided among the tools) a tool's calls may
/// take before its refusals are no longer read: repairs that have led nowhere by then give
/// their calls to the tools not yet tried beyond a first refusal (on a package of 65 tools,
/// chains of repairs of a few tools had left most of the rest at one call each).
const READ_WITHIN_SHARES: f64 = 2.0;
/// How many proposals of one refusal are tried.
const PROPOSALS_TRIED: usize = 3;
/// How many refusals in a chain are read (a repair refused is read again, up to a lifecycle of
/// a few steps: requested → matched → arrived → in progress).
const REPAIR_DEPTH: u8 = 4;
/// Most calls waiting to try what refusals proposed.
const QUEUE_MOST: usize = 8;
/// Calls a segment may add beyond its drawn length to try what refusals propose.
const REPAIR_ALLOWANCE: usize = 12;
/// How often an extension starts with a mutation of the call that reached its node, made from
/// the state that call was made in.
const MUTATION_SHARE: f64 = 0.35;
/// Successes under which a tool that has succeeded is drawn three times as often as one seen
/// succeeding more: what learns from walks takes three successes for evidence.
const FEW_SUCCESSES: f64 = 3.0;
/// How often an extension of a node a change reached (not starting with a mutation) starts
/// with that change again.
const REPEAT_SHARE: f64 = 0.1;
/// Share of the budget the package's own sequences may take.
const SEED_SHARE: f64 = 0.5;
/// Share of the budget boundary probes may take ([`crate::boundary`]).
const PROBE_SHARE: f64 = 0.2;

/// A walk being made.
struct Making {
    state: usize,
    id: usize,
    from: Option<Origin>,
    /// Calls before its first, from the initial state.
    first_step: usize,
    records: Vec<TransitionRecord>,
}

struct Guided<'c, 'a> {
    cx: &'c mut Context<'a>,
    budget: usize,
    rng: Rng,
    nodes: Vec<Node>,
    walks: Vec<Walk>,
    seen: Seen,
    answers: VecDeque<Value>,
    /// Answers kept so far (what tells a cached index that an answer came since).
    answers_added: usize,
    /// The latest values answers gave under each field name ([`ANSWERED_PER_NAME`], for at
    /// most [`ANSWERED_NAMES`] names): offered where the state holds nothing of the name, long
    /// after the answer left `answers` (a login's token for every later call that asks).
    answered: BTreeMap<String, Vec<Value>>,
    fresh: VecDeque<RecordRef>,
    /// The last record a call created (what a planned call after a creation takes).
    last_created: Option<RecordRef>,
    /// The answer of the last call that succeeded, when it was an object.
    last_answer: Option<Value>,
    /// The kinds of records ([`kind_of`]) each tool was drawn on, by collection.
    kinds: std::collections::HashSet<(usize, String, String)>,
    /// Calls in a row that brought nothing new.
    since_new: usize,
    cache: StateCache,
    specs: Vec<ToolSpec>,
    /// Per tool, the boundary probes not yet made.
    probes: Vec<VecDeque<crate::boundary::Probe>>,
    /// Per tool, the node a call of it drawn to succeed reached by succeeding: where its
    /// probes are made from.
    probe_base: Vec<Option<usize>>,
    /// Calls spent on probes.
    probe_calls: usize,
    /// The tool whose probe comes next (tools take turns).
    probe_turn: usize,
}

/// Explores the context's package with `budget` calls.
pub(crate) async fn explore(
    cx: &mut Context<'_>,
    budget: usize,
) -> Result<(Vec<Walk>, Stop), ExecError> {
    let rng = Rng::derive(
        cx.plan.seed,
        &format!("guided/{}", cx.package.manifest.name),
    );
    let nodes = cx
        .starts
        .iter()
        .enumerate()
        .map(|(state, start)| Node {
            state,
            origin: None,
            steps: 0,
            text: start.text.clone(),
            score: 1.0,
            picks: 0,
            reached_by: None,
        })
        .collect();
    let specs: Vec<ToolSpec> = cx.tools.iter().map(|(spec, _)| spec.clone()).collect();
    let probes = specs
        .iter()
        .map(|t| crate::boundary::probes_of(t, cx.tally.comparisons(), &specs).into())
        .collect();
    let probe_base = vec![None; specs.len()];
    let mut g = Guided {
        cx,
        budget,
        rng,
        nodes,
        walks: Vec::new(),
        seen: Seen::default(),
        answers: VecDeque::new(),
        answers_added: 0,
        answered: BTreeMap::new(),
        fresh: VecDeque::new(),
        last_created: None,
        last_answer: None,
        kinds: Default::default(),
        since_new: 0,
        cache: StateCache::default(),
        specs,
        probes,
        probe_base,
        probe_calls: 0,
        probe_turn: 0,
    };
    if g.cx.plan.seeds {
        g.seeds().await?;
    }
    let stop = g.extend().await?;
    Ok((g.walks, stop))
}

impl Guided<'_, '_> {
    fn spent(&self) -> usize {
        self.cx.tally.calls
    }

    /// Whether every tool has been called.
    fn warmed_up(&self) -> bool {
        self.specs
            .iter()
            .all(|t| self.cx.tally.calls_of(&t.name) > 0)
    }

    fn plateaued(&self) -> bool {
        self.cx.plan.plateau.is_some_and(|n| self.since_new >= n)
    }

    /// The package's own call sequences — its scripted tests, its tasks' planned calls — each
    /// from its initial state, within [`SEED_SHARE`] of the budget.
    async fn seeds(&mut self) -> Result<(), ExecError> {
        let limit = (self.budget as f64 * SEED_SHARE) as usize;
        for (state, calls) in package_sequences(self.cx) {
            if state >= self.cx.starts.len() {
                continue;
            }
            let mut making = self.start(state, None, 0);
            let mut value = self.cx.starts[state].value.as_ref().clone();
            let mut text = self.cx.starts[state].text.clone();
            for (tool, args) in calls {
                if self.spent() >= limit {
                    break;
                }
                let Some(tool) = self.cx.tools.iter().position(|(t, _)| t.name == tool) else {
                    continue;
                };
                let planned = repair(tool, args, None, REPAIR_DEPTH);
                self.call(&mut making, planned, &mut value, &mut text, None)
                    .await?;
                self.cx.tally.seed_calls += 1;
            }
            self.finish(making);
            if self.spent() >= limit {
                break;
            }
        }
        Ok(())
    }

    /// Extends nodes until the budget is spent or nothing new comes.
    async fn extend(&mut self) -> Result<Stop, ExecError> {
        while self.spent() < self.budget {
            if self.plateaued() {
                return Ok(Stop::Plateau);
            }
            if let Some(tool) = self.next_probe() {
                self.probe(tool).await?;
                continue;
            }
            let Some(pick) = self.pick() else {
                break;
            };
            self.extend_node(pick).await?;
        }
        Ok(Stop::Budget)
    }

    /// The tool whose boundary probe comes next: tools take turns among those with probes left
    /// and a success to make them from, within [`PROBE_SHARE`] of the budget.
    fn next_probe(&mut self) -> Option<usize> {
        if self.probe_calls as f64 >= PROBE_SHARE * self.budget as f64 {
            return None;
        }
        let n = self.specs.len();
        let tool = (0..n)
            .map(|k| (self.probe_turn + k) % n)
            .find(|&t| self.probe_base[t].is_some() && !self.probes[t].is_empty())?;
        self.probe_turn = (tool + 1) % n;
        Some(tool)
    }

    /// One boundary probe of `tool`: the call that first reached a node by succeeding, made
    /// again from the state it was made in with one parameter at a bound its code compares
    /// with. Its refusal is not read: a refusal is what one side of a bound is.
    async fn probe(&mut self, tool: usize) -> Result<(), ExecError> {
        let Some(probe) = self.probes[tool].pop_front() else {
            return Ok(());
        };
        let Some(base) = self.probe_base[tool] else {
            return Ok(());
        };
        let node = &self.nodes[base];
        let Some((_, args, before)) = &node.reached_by else {
            return Ok(());
        };
        let Some(args) = crate::boundary::applied(&probe, args) else {
            return Ok(());
        };
        let state = node.state;
        let (origin, steps) = node.before_its_call();
        let mut text = before.clone();
        let mut value = self.cache.value(&text);
        let mut making = self.start(state, origin, steps);
        let planned = repair(tool, args, None, REPAIR_DEPTH);
        self.probe_calls += 1;
        self.call(&mut making, planned, &mut value, &mut text, None)
            .await?;
        self.finish(making);
        Ok(())
    }

    /// A node to extend: the more it brought and the less it was extended, the likelier.
    fn pick(&mut self) -> Option<usize> {
        let weights: Vec<f64> = self
            .nodes
            .iter()
            .map(|n| (1.0 + n.score) / (1.0 + f64::from(n.picks)).powf(1.5))
            .collect();
        let pick = self.rng.weighted(&weights)?;
        self.nodes[pick].picks += 1;
        Some(pick)
    }

    /// One extension of a node: a few calls from its state — or, now and then, a mutation of
    /// the call that reached it, made from the state that call was made in, then calls — and
    /// whatever the refusals among them ask for.
    async fn extend_node(&mut self, pick: usize) -> Result<(), ExecError> {
        let node = &self.nodes[pick];
        let mut queue: VecDeque<Planned> = VecDeque::new();
        let mutation = match &node.reached_by {
            Some((tool, args, before)) if self.rng.chance(MUTATION_SHARE) => {
                Some((*tool, args.clone(), before.clone()))
            }
            // The change that reached it, made again on what it changed: whether a tool
            // refuses to move a record where it already is (a line suspended twice) is what
            // a guard is learned from, and random draws seldom try it.
            Some((tool, args, before)) if *before != node.text && self.rng.chance(REPEAT_SHARE) => {
                queue.push_back(Planned {
                    tool: *tool,
                    args: args.clone(),
                    intent: Intent::Valid,
                    created: None,
                    depth: 0,
                });
                None
            }
            _ => None,
        };
        let (state, mut origin, mut steps) = (node.state, node.origin, node.steps);
        let mut text = node.text.clone();
        if let Some((tool, args, before)) = mutation {
            (origin, steps) = node.before_its_call();
            text = before;
            let value = self.cache.value(&text);
            let index = StateIndex::new(&value);
            let (args, intent) =
                crate::driver::mutate(&self.specs[tool], &args, &index, &mut self.rng);
            queue.push_back(Planned {
                tool,
                args,
                intent,
                created: None,
                depth: 0,
            });
        }
        let mut value = self.cache.value(&text);
        let mut making = self.start(state, origin, steps);
        let length = 1 + self.rng.below(self.cx.plan.steps.max(1));
        // Repairs already made in this extension since the state last changed, not made
        // again (the same call in the same state would answer the same).
        let mut tried: std::collections::HashSet<(usize, String)> = Default::default();
        // The index of the state with the answers absorbed, kept while neither changes.
        let mut cached: Option<StateIndex> = None;
        let mut made = 0;
        while self.spent() < self.budget && (made < length || !queue.is_empty()) {
            if made >= length + REPAIR_ALLOWANCE || self.plateaued() {
                break;
            }
            let queued = queue.pop_front();
            if let Some(planned) = &queued {
                let key = (
                    planned.tool,
                    Value::Object(planned.args.clone()).to_string(),
                );
                if planned.created.is_none() && !tried.insert(key) {
                    continue;
                }
            }
            let index = cached.get_or_insert_with(|| {
                let mut index = StateIndex::new(&value);
                index.absorb_unheld(&self.answered);
                for answer in &self.answers {
                    index.absorb(answer);
                }
                index
            });
            let planned = match queued {
                Some(planned) => planned,
                None => self.propose(&value, index),
            };
            let depth = planned.depth;
            let name = &self.specs[planned.tool].name;
            let share = self.budget as f64 / self.specs.len().max(1) as f64;
            let read = depth < REPAIR_DEPTH
                && self.warmed_up()
                && planned.intent == Intent::Valid
                && self.cx.tally.successes(name) < READ_BELOW_SUCCESSES
                && (self.cx.tally.calls_of(name) as f64) < READ_WITHIN_SHARES * share;
            let answers = self.answers_added;
            let record = self
                .call(&mut making, planned, &mut value, &mut text, Some(index))
                .await?;
            made += 1;
            let Some(record) = record else {
                continue;
            };
            let changed = record.config_after != record.config_before;
            if read {
                // A refusal rarely changes the state: the state before is the state.
                let before = if changed {
                    std::borrow::Cow::Owned(record.config_before.value())
                } else {
                    std::borrow::Cow::Borrowed(&value)
                };
                // Depth first: what this refusal asks for comes before the rest of what the
                // refusal before it asked for.
                let proposals = self.proposals(&record, &before, index, depth + 1);
                for planned in proposals.into_iter().rev() {
                    queue.push_front(planned);
                }
                queue.truncate(QUEUE_MOST);
            }
            if changed {
                tried.clear();
            }
            if changed || self.answers_added != answers {
                cached = None;
            }
        }
        self.finish(making);
        Ok(())
    }

    /// A walk from a node.
    fn start(&mut self, state: usize, from: Option<Origin>, first_step: usize) -> Making {
        Making {
            state,
            id: self.walks.len(),
            from,
            first_step,
            records: Vec::new(),
        }
    }

    fn finish(&mut self, making: Making) {
        if making.records.is_empty() {
            return;
        }
        self.walks.push(Walk {
            state: making.state,
            id: making.id,
            from: making.from,
            records: making.records,
        });
    }

    /// A call drawn for the state: its tool (tools that have not succeeded yet drawn more
    /// often), its intent, and its arguments.
    fn propose(&mut self, state: &Value, index: &StateIndex) -> Planned {
        // Breadth before depth: every tool is called once before any is favoured (and before
        // refusals are read), so that a small budget is not spent on the first tool refused.
        let warm = self.warmed_up();
        let weights: Vec<f64> = self
            .specs
            .iter()
            .map(|t| {
                let successes = self.cx.tally.successes(&t.name) as f64;
                let calls = self.cx.tally.calls_of(&t.name) as f64;
                if !warm {
                    f64::from(u8::from(calls == 0.0))
                } else if successes == 0.0 {
                    (4.0 / (1.0 + calls / 16.0)).max(0.25)
                } else if successes < FEW_SUCCESSES {
                    3.0
                } else {
                    1.0 + 2.0 / (1.0 + successes)
                }
            })
            .collect();
        let tool = self.rng.weighted(&weights).unwrap_or(0);
        let spec = &self.specs[tool];
        let plan = self.cx.plan;
        let intent = if self.rng.chance(plan.valid_share) {
            Intent::Valid
        } else {
            Intent::Invalid
        };
        let mut fixed: Option<(String, String)> = None;
        let focus = if self.rng.chance(plan.focus_share) {
            // Around a record the exploration created, where the tool takes one of its kind.
            let fresh: Vec<(&RecordRef, &str)> = self
                .fresh
                .iter()
                .filter_map(|r| {
                    let param = spec
                        .params
                        .iter()
                        .find(|p| stem_names(&id_stem(&p.name), &r.collection))?;
                    r.in_state(state).map(|_| (r, param.name.as_str()))
                })
                .collect();
            let around = if self.rng.chance(FRESH_SHARE) {
                self.rng.pick(&fresh).copied()
            } else {
                None
            };
            match around {
                Some((record, param)) => {
                    fixed = Some((param.to_owned(), record.key.clone()));
                    index.focus_on(spec, state, record, &mut self.rng)
                }
                None => {
                    // A record of a kind this tool has not been called on, where one is drawn.
                    let kinds = &self.kinds;
                    let focus = index.focus_preferring(spec, state, &mut self.rng, &|c, _, r| {
                        !kinds.contains(&(tool, c.to_owned(), kind_of(r)))
                    });
                    Some(focus)
                }
            }
        } else {
            None
        };
        if let Some(record) = focus.as_ref().and_then(|f| f.record.as_ref()) {
            if let Some(found) = record.in_state(state) {
                self.kinds
                    .insert((tool, record.collection.clone(), kind_of(found)));
            }
        }
        let mut args = arguments_explored(spec, index, focus.as_ref(), &mut self.rng, intent);
        // An id argument takes the keys of the collection it was seen taking, when the draw
        // gave it something else (`reporter_id` from `users`).
        if intent == Intent::Valid {
            for param in &spec.params {
                let Some(collection) = self.seen.takes(&param.name) else {
                    continue;
                };
                let Some(Value::String(drawn)) = args.get(&param.name) else {
                    continue;
                };
                let fits = index
                    .locate(state, drawn)
                    .is_some_and(|r| r.collection == collection);
                if !fits && self.rng.chance(0.8) {
                    if let Some(key) = self.rng.pick(index.keys_of(collection)) {
                        args.insert(param.name.clone(), Value::String(key.clone()));
                    }
                }
            }
        }
        if let (Some((param, key)), Intent::Valid) = (fixed, intent) {
            if let Some(Value::Array(_)) = args.get(&param) {
                args.insert(param, Value::Array(vec![Value::String(key)]));
            } else {
                args.insert(param, Value::String(key));
            }
        }
        Planned {
            tool,
            args,
            intent,
            created: None,
            depth: 0,
        }
    }

    /// What to try after `record`, a refusal of a call drawn to succeed (nothing when it
    /// succeeded).
    fn proposals(
        &mut self,
        record: &TransitionRecord,
        before: &Value,
        index: &StateIndex,
        depth: u8,
    ) -> Vec<Planned> {
        if !matches!(record.outcome, Outcome::Failure | Outcome::Exception) {
            return Vec::new();
        }
        let tool = record.action["name"].as_str().unwrap_or_default();
        let Some(at) = self.specs.iter().position(|t| t.name == tool) else {
            return Vec::new();
        };
        let args = record.action["arguments"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let answer = refusal::answer_text(&record.observation_json, &record.observation);
        let refused = Refused {
            tool: &self.specs[at],
            args: &args,
            answer: &answer,
            state: before,
            clock: record.clock,
        };
        let proposals = refusal::read(&refused, index, &self.seen, &self.specs, &mut self.rng);
        let mut out = Vec::new();
        for next in proposals.into_iter().take(PROPOSALS_TRIED) {
            match next {
                Next::Retry(args) => out.push(repair(at, args, None, depth)),
                Next::Prepare { tool, args, then } => {
                    let Some(first) = self.specs.iter().position(|t| t.name == tool) else {
                        continue;
                    };
                    out.push(repair(first, args, None, depth));
                    out.push(match then {
                        Then::Same(args) => repair(at, args, None, depth),
                        Then::Created { args, param } => {
                            repair(at, args, Some(Taken::Created(param)), depth)
                        }
                        Then::Answered { args, param } => {
                            repair(at, args, Some(Taken::Answered(param)), depth)
                        }
                    });
                }
            }
        }
        out
    }

    /// Executes one planned call from `value` (kept as `text`), counts it, learns from it, and
    /// keeps its state as a node when it brought something new; `index` indexes `value` when the
    /// caller has it. Returns the record (`None`
    /// when the call was to take a created record's key and nothing was created).
    async fn call(
        &mut self,
        making: &mut Making,
        mut planned: Planned,
        value: &mut Value,
        text: &mut StateText,
        index: Option<&StateIndex>,
    ) -> Result<Option<TransitionRecord>, ExecError> {
        match planned.created.take() {
            Some(Taken::Created(param)) => {
                let Some(created) = &self.last_created else {
                    return Ok(None);
                };
                if created.in_state(value).is_none() {
                    return Ok(None);
                }
                let key = Value::String(created.key.clone());
                let arg = match planned.args.get(&param) {
                    Some(Value::Array(_)) => Value::Array(vec![key]),
                    _ => key,
                };
                planned.args.insert(param, arg);
            }
            Some(Taken::Answered(param)) => {
                let Some(found) = self.last_answer.as_ref().and_then(|a| a.get(&param)) else {
                    return Ok(None);
                };
                planned.args.insert(param, found.clone());
            }
            None => {}
        }
        // A call is meant to succeed only when its arguments fit their schemas: a repair or a
        // mutation that pushed one outside (a bound, a value an answer offered) is a call with
        // a corrupted argument, as records and benchmarks count them.
        if planned.intent == Intent::Valid {
            let name = &self.cx.tools[planned.tool].0.name;
            if !self
                .cx
                .package
                .arguments
                .check(name, &planned.args)
                .is_empty()
            {
                planned.intent = Intent::Invalid;
            }
        }
        let plan = self.cx.plan;
        let step = making.first_step + making.records.len();
        let start = &self.cx.starts[making.state];
        let (spec, schema) = &self.cx.tools[planned.tool];
        let call = Call {
            seed: self.rng.next_u64() >> 16,
            clock: start.clock + (step as f64) * plan.clock_step,
            trace: plan.trace,
            ..Call::new(&self.cx.package.code, &spec.name, &planned.args, value)
        };
        let executed = execute(
            self.cx.executor,
            self.cx.package,
            &call,
            text,
            &start.form,
            Position {
                tool_schema: schema.clone(),
                state_name: &start.name,
                walk: making.id,
                step,
                intent: planned.intent,
            },
            self.cx.probes(),
        )
        .await?;
        let novelty = self
            .cx
            .tally
            .record(&executed.record, executed.coverage.as_ref());
        (self.cx.tick)();
        let record = executed.record;
        self.last_answer = (record.outcome == Outcome::Success
            && record.observation_json.is_object())
        .then(|| record.observation_json.clone());
        if record.outcome == Outcome::Success {
            if planned.intent == Intent::Valid {
                match index {
                    Some(index) => {
                        self.seen
                            .learn_arguments(&spec.name, &planned.args, value, index)
                    }
                    None => {
                        let index = StateIndex::new(value);
                        self.seen
                            .learn_arguments(&spec.name, &planned.args, value, &index);
                    }
                }
            }
            if record.observation_json.is_object() || record.observation_json.is_array() {
                if self.answers.len() == ANSWERS_KEPT {
                    self.answers.pop_front();
                }
                self.answers.push_back(record.observation_json.clone());
                self.answers_added += 1;
                keep_answered(&mut self.answered, &record.observation_json);
            }
            if let Some(after) = &executed.after {
                let touched = self.seen.learn(&spec.name, &planned.args, value, after);
                self.last_created = touched.created.last().cloned();
                for record in touched.created.into_iter().chain(touched.changed) {
                    self.fresh.retain(|r| *r != record);
                    if self.fresh.len() == FRESH_KEPT {
                        self.fresh.pop_front();
                    }
                    self.fresh.push_back(record);
                }
            }
        }
        if let Some(after) = executed.after {
            *value = after;
        }
        let before = std::mem::replace(text, record.config_after.clone());
        making.records.push(record.clone());
        if novelty.any() {
            self.since_new = 0;
            if record.outcome == Outcome::Success
                && planned.intent == Intent::Valid
                && self.probe_base[planned.tool].is_none()
            {
                self.probe_base[planned.tool] = Some(self.nodes.len());
            }
            self.nodes.push(Node {
                state: making.state,
                origin: Some(Origin {
                    walk: making.id,
                    steps: step + 1,
                }),
                steps: step + 1,
                text: text.clone(),
                score: novelty.score(),
                picks: 0,
                reached_by: Some((planned.tool, planned.args, before)),
            });
        } else {
            self.since_new += 1;
        }
        Ok(Some(record))
    }
}

/// Keeps in `kept` the latest [`ANSWERED_PER_NAME`] values `answer` gives under each field
/// name, for at most [`ANSWERED_NAMES`] names (the names kept first stay).
fn keep_answered(kept: &mut BTreeMap<String, Vec<Value>>, answer: &Value) {
    for (name, values) in StateIndex::answer_values(answer) {
        if kept.len() == ANSWERED_NAMES && !kept.contains_key(&name) {
            continue;
        }
        let latest = kept.entry(name).or_default();
        for value in values.into_iter().rev().take(ANSWERED_PER_NAME) {
            latest.retain(|v| *v != value);
            latest.insert(0, value);
        }
        latest.truncate(ANSWERED_PER_NAME);
    }
}

/// A call drawn to succeed: one that tries what a refusal proposed (at its `depth`), or, at
/// [`REPAIR_DEPTH`], one whose refusals are not read (the package's own sequences, probes).
fn repair(tool: usize, args: Map<String, Value>, created: Option<Taken>, depth: u8) -> Planned {
    Planned {
        tool,
        args,
        intent: Intent::Valid,
        created,
        depth,
    }
}

/// A call sequence of the package's own: the initial state it starts from and its calls.
type Sequence = (usize, Vec<(String, Map<String, Value>)>);

/// The package's own call sequences, each with the initial state it starts from: its scripted
/// tests, then its tasks' planned calls (tasks.jsonl lines with a `plan`; a line that does not
/// read is left out: checking the task list is `env check`'s).
fn package_sequences(cx: &Context<'_>) -> Vec<Sequence> {
    let mut out: Vec<Sequence> = cx
        .package
        .tests
        .iter()
        .map(|case| {
            (
                case.state,
                case.steps
                    .iter()
                    .map(|s| (s.tool.clone(), s.args.clone()))
                    .collect(),
            )
        })
        .collect();
    let Some(tasks) = &cx.package.tasks_jsonl else {
        return out;
    };
    for line in tasks.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(task) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(plan) = task.get("plan").and_then(Value::as_array) else {
            continue;
        };
        let state = match task.get("state").and_then(Value::as_str) {
            Some(name) => cx.starts.iter().position(|s| s.name == name),
            None => Some(0),
        };
        let Some(state) = state else {
            continue;
        };
        let calls = plan
            .iter()
            .filter_map(|c| {
                Some((
                    c.get("name")?.as_str()?.to_owned(),
                    c.get("arguments")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default(),
                ))
            })
            .collect();
        out.push((state, calls));
    }
    out
}
