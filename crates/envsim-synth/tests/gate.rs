//! The quality gate on the desk package and its mutants, with the faulty double as the gate's
//! simulator: a double that answers from the good package's code (a perfect reader of the
//! description), spoiled at a known rate.

use envsim_exec::package::EnvPackage;
use envsim_exec::{Executor, Limits};
use envsim_sim::backend::{ExecutorSimulator, Simulator};
use envsim_sim::faulty::FaultySimulator;
use envsim_synth::gate::{environments, gate, judge, sample_calls, GateConfig, GateError};
use envsim_synth::mutants::{sites, Mutant, MutantKind};
use std::sync::Arc;

async fn executor() -> Arc<Executor> {
    Arc::new(Executor::new(2, Limits::default()).await.expect("python3"))
}

fn desk(dir: &std::path::Path) -> EnvPackage {
    EnvPackage::load(&envsim_testkit::desk::write(dir).unwrap()).unwrap()
}

/// The double: the good package's code, spoiled at `rate`.
fn double(executor: &Arc<Executor>, good: &EnvPackage, rate: f64) -> Arc<dyn Simulator> {
    let (with_code, _) = environments(good).unwrap();
    let reader = ExecutorSimulator::new(Arc::clone(executor)).knowing(&with_code);
    Arc::new(FaultySimulator::new(reader, rate, 11, "reader"))
}

/// The mutant of the desk whose edit is on the line that holds `text`.
fn mutant_at(package: &EnvPackage, kind: MutantKind, text: &str) -> Mutant {
    let edit = sites(&package.code.code, kind)
        .into_iter()
        .find(|e| e.original.contains(text))
        .unwrap_or_else(|| panic!("no {kind:?} site at {text:?}"));
    Mutant::of(package, edit)
}

#[tokio::test]
async fn a_good_package_passes_and_a_broken_one_is_told_where() {
    let dir = tempfile::tempdir().unwrap();
    let good = desk(dir.path());
    let executor = executor().await;
    let config = GateConfig {
        walks: 3,
        steps: 10,
        ..GateConfig::default()
    };
    // A perfect reader agrees on every call of the good package.
    let report = gate(
        Arc::clone(&executor),
        &good,
        double(&executor, &good, 0.0),
        None,
        &config,
        |_, _| {},
    )
    .await
    .unwrap();
    assert_eq!(report.calls, 30);
    assert_eq!((report.agreeing, report.score), (30, 1.0));
    assert!(report.accepted);
    assert!(report.tools.iter().all(|t| t.examples.is_empty()));
    let sampled: usize = report.tools.iter().map(|t| t.calls).sum();
    assert_eq!(sampled, report.calls);
    assert!(report.unsampled.is_empty(), "{:?}", report.unsampled);

    // Closing a ticket that leaves it open: the reader says it closes.
    let broken = mutant_at(
        &good,
        MutantKind::DroppedWrite,
        "t[\"status\"] = \"closed\"",
    );
    let calls = sample_calls(Arc::clone(&executor), &good, &config)
        .await
        .unwrap();
    let report = judge(
        Arc::clone(&executor),
        &broken.package,
        &calls,
        double(&executor, &good, 0.0),
        None,
        &config,
        |_, _| {},
    )
    .await
    .unwrap();
    let close = report
        .tools
        .iter()
        .find(|t| t.tool == "close_ticket")
        .expect("close_ticket was sampled");
    assert!(close.state_disagreements > 0, "{close:?}");
    let example = &close.examples[0];
    assert!(
        example
            .state_differs_at
            .iter()
            .all(|p| p.ends_with("/status")),
        "{example:?}"
    );
    // Every other tool agrees.
    for t in report.tools.iter().filter(|t| t.tool != "close_ticket") {
        assert_eq!(t.agreeing, t.calls, "{t:?}");
    }
    assert!(report.score < 1.0);
}

#[tokio::test]
async fn a_simulator_that_always_errs_fails_a_good_package_and_bad_thresholds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let good = desk(dir.path());
    let executor = executor().await;
    let config = GateConfig {
        walks: 2,
        steps: 8,
        ..GateConfig::default()
    };
    let report = gate(
        Arc::clone(&executor),
        &good,
        double(&executor, &good, 1.0),
        None,
        &GateConfig {
            mode: envsim_sim::session::AnchorMode::Off,
            ..config.clone()
        },
        |_, _| {},
    )
    .await
    .unwrap();
    assert!(!report.accepted);
    assert!(report.score < 0.85, "{}", report.score);
    let err = gate(
        Arc::clone(&executor),
        &good,
        double(&executor, &good, 0.0),
        None,
        &GateConfig {
            threshold: 1.5,
            ..config
        },
        |_, _| {},
    )
    .await
    .unwrap_err();
    assert!(matches!(err, GateError::Threshold(t) if t == 1.5));
    assert_eq!(
        err.to_string(),
        "the acceptance threshold must be between 0 and 1, got 1.5"
    );
}

#[tokio::test]
async fn the_curve_gates_every_mutant_and_the_every_tool_rule_catches_what_the_overall_misses() {
    use envsim_synth::gate::curve::{gate_curve, CurvePlan, CurveRule};
    use envsim_synth::gate::GateRule;
    let dir = tempfile::tempdir().unwrap();
    let good = desk(dir.path());
    let executor = executor().await;
    let every = GateRule::EveryTool { min_calls: 4 };
    let plan = CurvePlan {
        rates: vec![0.0],
        kinds: MutantKind::ALL.to_vec(),
        mutants_per_kind: 10,
        config: GateConfig {
            walks: 3,
            steps: 10,
            mode: envsim_sim::session::AnchorMode::Off,
            ..GateConfig::default()
        },
        seed: 5,
        rules: vec![CurveRule::Fixed(GateRule::Overall), CurveRule::Fixed(every)],
        checks: None,
    };
    let curve = gate_curve(executor, std::slice::from_ref(&good), &plan, |_, _, _| {})
        .await
        .unwrap();
    // Every site of every kind became a mutant.
    let sites: usize = MutantKind::ALL
        .iter()
        .map(|k| sites(&good.code.code, *k).len())
        .sum();
    assert_eq!(curve.mutants.len(), sites);
    let point = &curve.points[0];
    let (overall, per_tool) = (&point.rules[0], &point.rules[1]);
    assert_eq!((overall.good.accepted, per_tool.good.accepted), (1, 1));
    // The closing that leaves tickets open is exposed by the walks.
    let closing = curve
        .mutants
        .iter()
        .find(|m| m.edit.kind == MutantKind::DroppedWrite && m.edit.original.contains("closed"))
        .expect("the dropped close is a mutant");
    assert!(closing.score_at_zero < 1.0, "{closing:?}");
    // Whatever the overall rule lets through, the every-tool rule rejects at least as much.
    assert!(per_tool.exposed.rejected() >= overall.exposed.rejected());
    assert!(per_tool.exposed.rejected() > 0);
    assert_eq!(per_tool.rejection_precision, Some(1.0));
}

/// A simulator that cannot answer calls of one tool (as a model whose context a prompt
/// overflows), and answers the rest as `inner` does.
struct Refusing {
    inner: Arc<dyn Simulator>,
    tool: &'static str,
}

impl Simulator for Refusing {
    fn name(&self) -> String {
        "refusing".into()
    }

    fn predict<'a>(
        &'a self,
        r: &'a envsim_sim::backend::StepRequest<'a>,
    ) -> envsim_sim::backend::BoxFuture<
        'a,
        Result<envsim_sim::backend::Prediction, envsim_sim::backend::PredictError>,
    > {
        Box::pin(async move {
            if r.tool == self.tool || self.tool == "*" {
                return Err(envsim_sim::backend::PredictError::Failed(
                    "prompt too long".into(),
                ));
            }
            self.inner.predict(r).await
        })
    }
}

#[tokio::test]
async fn calls_a_simulator_cannot_answer_count_as_disagreements_and_none_answered_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = desk(dir.path());
    let executor = executor().await;
    let config = GateConfig {
        walks: 2,
        steps: 8,
        mode: envsim_sim::session::AnchorMode::Off,
        ..GateConfig::default()
    };
    let some: Arc<dyn Simulator> = Arc::new(Refusing {
        inner: double(&executor, &good, 0.0),
        tool: "get_ticket",
    });
    let report = gate(Arc::clone(&executor), &good, some, None, &config, |_, _| {})
        .await
        .unwrap();
    let get = report
        .tools
        .iter()
        .find(|t| t.tool == "get_ticket")
        .unwrap();
    assert_eq!((get.unanswered, get.agreeing), (get.calls, 0));
    assert_eq!(report.unanswered, get.calls);
    assert_eq!(report.agreeing, report.calls - get.calls);
    assert_eq!(
        report.unanswered_because.as_deref(),
        Some("get_ticket: prompt too long")
    );
    let none: Arc<dyn Simulator> = Arc::new(Refusing {
        inner: double(&executor, &good, 0.0),
        tool: "*",
    });
    let err = gate(executor, &good, none, None, &config, |_, _| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "desk: every sampled call: the simulator: answered none of 16 calls; the first: "
        ),
        "{err}"
    );
}
