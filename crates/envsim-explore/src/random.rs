//! The random strategy: seeded random walks from every initial state, each tool drawn
//! uniformly, its arguments drawn from the current state. What envsim walked before the
//! explorer, kept as the baseline; the same plan gives the same calls it always gave.

use crate::driver::{arguments_with, Intent, StateIndex};
use crate::record::{execute, Position};
use crate::{Context, Walk};
use envsim_core::rng::Rng;
use envsim_exec::{Call, ExecError};

/// The walks of one package, state by state, walk by walk.
pub(crate) async fn walk(cx: &mut Context<'_>) -> Result<Vec<Walk>, ExecError> {
    let plan = cx.plan;
    let mut walks = Vec::new();
    for state_index in 0..cx.starts.len() {
        for walk in 0..plan.walks {
            let start = &cx.starts[state_index];
            let label = format!("{}/{}/{walk}", cx.package.manifest.name, start.name);
            let mut rng = Rng::derive(plan.seed, &label);
            let mut state = start.value.as_ref().clone();
            let mut state_text = start.text.clone();
            let mut records = Vec::with_capacity(plan.steps);
            for step in 0..plan.steps {
                let Some((tool, schema)) = rng.pick(&cx.tools) else {
                    break;
                };
                let intent = if rng.chance(plan.valid_share) {
                    Intent::Valid
                } else {
                    Intent::Invalid
                };
                let index = StateIndex::new(&state);
                // Drawn only when asked for, so that benchmark walks keep their random stream.
                let focus = if plan.focus_share > 0.0 && rng.chance(plan.focus_share) {
                    Some(index.focus(tool, &state, &mut rng))
                } else {
                    None
                };
                let args = arguments_with(tool, &index, focus.as_ref(), &mut rng, intent);
                let seed = rng.next_u64() >> 16;
                let start = &cx.starts[state_index];
                let call = Call {
                    seed,
                    clock: start.clock + (step as f64) * plan.clock_step,
                    trace: plan.trace,
                    ..Call::new(&cx.package.code, &tool.name, &args, &state)
                };
                let executed = execute(
                    cx.executor,
                    cx.package,
                    &call,
                    &state_text,
                    &start.form,
                    Position {
                        tool_schema: (*schema).clone(),
                        state_name: &start.name,
                        walk,
                        step,
                        intent,
                    },
                    cx.probes(),
                )
                .await?;
                cx.tally
                    .record(&executed.record, executed.coverage.as_ref());
                (cx.tick)();
                if let Some(after) = executed.after {
                    state = after;
                }
                state_text = executed.record.config_after.clone();
                records.push(executed.record);
            }
            walks.push(Walk {
                state: state_index,
                id: walk,
                from: None,
                records,
            });
        }
    }
    Ok(walks)
}
