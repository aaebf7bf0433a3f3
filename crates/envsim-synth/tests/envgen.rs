//! The environment-writing loop with a scripted writer (a test double answering from a
//! script): a good writer's package is accepted at once, a repairable one after its repair, a
//! hopeless one never; the gate's simulator is the faulty double reading the good package.

mod common;

use common::reader;
use envsim_exec::{Convention, Executor, Limits};
use envsim_synth::envgen::check::CheckKind;
use envsim_synth::envgen::{synthesize, EnvRequest, EnvSource, ScriptedWriter, SynthPlan};
use envsim_testkit::tally::{answer, CODE, TESTS};
use std::sync::Arc;

fn request() -> EnvRequest {
    EnvRequest {
        name: "tally".into(),
        source: EnvSource::Description("Named counters with a limit.".into()),
        convention: Convention::Class,
    }
}

async fn run(writer: &ScriptedWriter) -> envsim_synth::envgen::SynthOutcome {
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));
    let scratch = tempfile::tempdir().unwrap();
    let simulator = reader(Arc::clone(&executor));
    synthesize(
        writer,
        executor,
        &simulator,
        &request(),
        &SynthPlan::default(),
        scratch.path(),
        &|_| {},
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_good_writer_is_accepted_in_one_round() {
    let writer = ScriptedWriter::new(vec![answer(CODE, Some(TESTS))]);
    let outcome = run(&writer).await;
    assert!(outcome.accepted, "{:#?}", outcome.rounds);
    assert_eq!(outcome.rounds.len(), 1);
    let gate = outcome.rounds[0].gate.as_ref().expect("the gate judged it");
    assert_eq!(gate.score, 1.0);
    assert!(outcome.writer_usage.prompt_tokens > 0);
    let files = outcome.files.expect("the accepted files");
    assert_eq!(files.files["env.py"], CODE.trim_start().to_owned());
    // The writer was shown the format's documentation.
    assert!(writer.prompts()[0].system.contains("## tests.json"));
}

#[tokio::test]
async fn a_repairable_writer_gets_the_findings_and_is_accepted_after_its_repair() {
    let writer = ScriptedWriter::new(vec![answer(CODE, None), answer(CODE, Some(TESTS))]);
    let outcome = run(&writer).await;
    assert!(outcome.accepted);
    assert_eq!(outcome.rounds.len(), 2);
    let first: Vec<CheckKind> = outcome.rounds[0].findings.iter().map(|f| f.check).collect();
    assert_eq!(first, vec![CheckKind::Tests]);
    let repair = &writer.prompts()[1].user;
    assert!(
        repair
            .contains("It failed these checks in the sandbox:\n- [tests] tests.json has no cases"),
        "{repair}"
    );
    assert!(
        repair.contains("=== FILE: env.py ==="),
        "the draft is shown again"
    );
}

#[tokio::test]
async fn code_that_does_what_the_description_does_not_say_is_sent_back_by_the_gate() {
    // Resetting leaves the counter as it was: the description says it goes back to 0.
    let lazy = CODE.replace("        self.counters[counter_id][\"value\"] = 0\n", "");
    assert_ne!(lazy, CODE);
    let lazy_tests = TESTS.replace(r#", "state": {"/counters/C1/value": 0}"#, "");
    assert_ne!(lazy_tests, TESTS);
    let writer = ScriptedWriter::new(vec![
        answer(&lazy, Some(&lazy_tests)),
        answer(CODE, Some(TESTS)),
    ]);
    let outcome = run(&writer).await;
    assert!(outcome.accepted);
    let first = &outcome.rounds[0];
    let gate = first
        .gate
        .as_ref()
        .expect("the first draft reached the gate");
    assert!(
        !gate.accepted
            || gate
                .tools
                .iter()
                .any(|t| t.tool == "reset_counter" && t.agreeing < t.calls)
    );
    assert!(
        first
            .findings
            .iter()
            .any(|f| f.check == CheckKind::Gate && f.message.starts_with("reset_counter:")),
        "{:#?}",
        first.findings
    );
}

#[tokio::test]
async fn a_hopeless_writer_is_refused_after_every_round() {
    let writer = ScriptedWriter::new(vec![
        "I cannot write code.".to_owned(),
        answer("class Tally(:\n", Some(TESTS)),
    ]);
    let outcome = run(&writer).await;
    assert!(!outcome.accepted);
    assert_eq!(outcome.rounds.len(), 3);
    assert_eq!(outcome.rounds[0].findings[0].check, CheckKind::Files);
    // An answer that held no files is not shown again: only what was wrong with it.
    let repair = &writer.prompts()[1].user;
    assert!(
        repair.contains("Your previous answer could not be read as package files:\n- [files] the answer holds no file"),
        "{repair}"
    );
    assert!(!repair.contains("I cannot write code."), "{repair}");
    // A draft that read as files is shown with its findings.
    let third = &writer.prompts()[2].user;
    assert!(third.contains("Your previous package:\n\n") && third.contains("=== FILE: env.py ==="));
    for round in &outcome.rounds[1..] {
        assert_eq!(
            round.findings[0].check,
            CheckKind::Loads,
            "{:?}",
            round.findings
        );
    }
}
