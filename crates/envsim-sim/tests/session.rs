//! Sessions on a small package written by the test, with the real executor.

use envsim_core::audit::{AuditStep, AuditTrajectory, Effects};
use envsim_core::sample::Usage;
use envsim_exec::package::EnvPackage;
use envsim_exec::{Executor, Limits};
use envsim_sim::backend::{
    BoxFuture, ExecutorSimulator, PredictError, Prediction, Simulator, StepRequest,
};
use envsim_sim::environment::Environment;
use envsim_sim::faulty::FaultySimulator;
use envsim_sim::session::{AnchorMode, Backends, Session, SessionConfig};
use envsim_sim::verify::VerifyPolicy;
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};

fn desk(dir: &std::path::Path) -> EnvPackage {
    EnvPackage::load(&envsim_testkit::desk::write(dir).unwrap()).unwrap()
}

fn initial() -> Value {
    envsim_testkit::desk::initial_state()
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

/// The calls every test makes: create, read, close, read, close again (fails), read a
/// missing ticket (fails).
fn calls() -> Vec<(&'static str, Map<String, Value>)> {
    vec![
        ("create_ticket", args(json!({"title": "b"}))),
        ("get_ticket", args(json!({"ticket_id": "T2"}))),
        ("close_ticket", args(json!({"ticket_id": "T2"}))),
        ("get_ticket", args(json!({"ticket_id": "T2"}))),
        ("close_ticket", args(json!({"ticket_id": "T2"}))),
        ("get_ticket", args(json!({"ticket_id": "T9"}))),
        ("create_ticket", args(json!({"title": "c"}))),
        ("close_ticket", args(json!({"ticket_id": "T1"}))),
    ]
}

/// The environment with effects learned from a session of the executor itself.
async fn setup(dir: &std::path::Path) -> (Arc<Environment>, Arc<ExecutorSimulator>) {
    let package = desk(dir);
    let executor = Arc::new(ExecutorSimulator::new(Arc::new(
        Executor::new(1, Limits::default()).await.expect("python3"),
    )));
    // Learn from the truth: the same calls, twice, from the initial state.
    let bare = Environment::from_package(&package, &[], Effects::default()).unwrap();
    let mut runs = Vec::new();
    for seed in 0..2 {
        let mut s = Session::new(
            Arc::new(bare.clone()),
            Backends {
                primary: executor.clone(),
                secondary: None,
                executor: None,
            },
            SessionConfig {
                seed,
                ..SessionConfig::default()
            },
            initial(),
        );
        for (tool, a) in calls() {
            s.step(tool, &a).await.unwrap();
        }
        runs.push(AuditTrajectory {
            id: format!("learn{seed}"),
            initial_state: Arc::clone(s.initial_state()),
            steps: s
                .steps()
                .iter()
                .map(|r| AuditStep {
                    tool: r.tool.clone(),
                    arguments: r.arguments.clone(),
                    observation: r.observation.clone(),
                    success: r.success,
                    state_after: Arc::clone(&r.state_after),
                })
                .collect(),
        });
    }
    let effects = Effects::learn(&runs);
    (
        Arc::new(Environment::from_package(&package, &runs, effects).unwrap()),
        executor,
    )
}

#[tokio::test]
async fn the_executor_session_is_the_truth_and_forks_and_rolls_back() {
    let dir = tempfile::tempdir().unwrap();
    let (env, executor) = setup(dir.path()).await;
    let mut s = Session::new(
        env,
        Backends {
            primary: executor,
            secondary: None,
            executor: None,
        },
        SessionConfig::default(),
        initial(),
    );
    let calls = calls();
    for (tool, a) in &calls[..3] {
        let r = s.step(tool, a).await.unwrap();
        assert_eq!(r.provenance.simulator, "executor");
        assert_eq!((r.provenance.attempts, r.provenance.uncertain), (1, false));
    }
    assert_eq!(s.state()["tickets"]["T2"]["status"], "closed");
    assert_eq!(s.steps()[1].observation["data"]["title"], "b");
    assert_eq!(s.snapshot("closed"), 3);
    let mut fork = s.fork();
    fork.step("create_ticket", &args(json!({"title": "f"})))
        .await
        .unwrap();
    assert!(fork.state()["tickets"].get("T3").is_some());
    assert!(
        s.state()["tickets"].get("T3").is_none(),
        "the fork is apart"
    );
    // The fork shares the first three steps, states included.
    assert!(Arc::ptr_eq(&s.steps()[2], &fork.steps()[2]));
    // An unchanged state is the state before, shared.
    assert!(Arc::ptr_eq(
        &s.steps()[1].state_after,
        &s.steps()[0].state_after
    ));
    fork.rollback("closed").unwrap();
    assert_eq!(fork.steps().len(), 3);
    assert_eq!(fork.state(), s.state());
    assert!(fork.rollback("nothing").is_err());
    assert!(fork.rollback_to(7).is_err());
    fork.rollback_to(0).unwrap();
    assert_eq!(**fork.state(), initial());
    assert!(fork.snapshots().is_empty(), "marks past the rollback go");
    // The record is a trajectory the audit reads.
    let record = s.trajectory("t");
    assert_eq!(record["steps"].as_array().unwrap().len(), 3);
    assert_eq!(record["steps"][0]["provenance"]["simulator"], "executor");
}

/// Runs the calls with a primary in `mode`; returns per step whether the kept answer equals
/// the truth, and the session.
async fn run(
    env: &Arc<Environment>,
    truth: &Arc<ExecutorSimulator>,
    primary: Arc<dyn Simulator>,
    secondary: Option<Arc<dyn Simulator>>,
    mode: AnchorMode,
    verify: Option<VerifyPolicy>,
    with_executor: bool,
) -> (Vec<bool>, Session) {
    let mut s = Session::new(
        Arc::clone(env),
        Backends {
            primary,
            secondary,
            executor: with_executor.then(|| truth.clone() as Arc<dyn Simulator>),
        },
        SessionConfig {
            mode,
            max_regenerations: 2,
            verify,
            seed: 3,
        },
        initial(),
    );
    let mut right = Vec::new();
    for (tool, a) in calls() {
        let before = Arc::clone(s.state());
        let r = s.step(tool, &a).await.unwrap();
        let request = StepRequest {
            env,
            state: &before,
            tool,
            arguments: &a,
            seed: 3,
            step: right.len(),
            attempt: 0,
            feedback: &[],
        };
        let t = truth.predict(&request).await.unwrap();
        right.push(t.observation == r.observation && t.state_after == *r.state_after);
    }
    (right, s)
}

#[tokio::test]
async fn anchoring_repairs_a_faulty_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let (env, truth) = setup(dir.path()).await;
    let faulty = || -> Arc<dyn Simulator> {
        Arc::new(FaultySimulator::new(
            ExecutorSimulator::clone(&truth),
            1.0,
            7,
            "always",
        ))
    };
    // Off: every step the double can spoil is wrong.
    let (off, _) = run(&env, &truth, faulty(), None, AnchorMode::Off, None, true).await;
    assert!(off.iter().filter(|r| !**r).count() >= 6, "{off:?}");
    // Validate: nothing changes, but what the checks catch is marked uncertain.
    let (validated, s) = run(
        &env,
        &truth,
        faulty(),
        None,
        AnchorMode::Validate,
        None,
        true,
    )
    .await;
    assert_eq!(validated, off);
    let uncertain: Vec<bool> = s.steps().iter().map(|r| r.provenance.uncertain).collect();
    assert!(uncertain.iter().any(|u| *u));
    for (k, r) in s.steps().iter().enumerate() {
        if r.provenance.uncertain {
            assert!(!validated[k], "step {k}: an uncertain step was right");
        }
    }
    // Full: a double that always errs is caught, regenerated (and errs again), then
    // escalated to the executor: every caught step is right.
    let (full, s) = run(&env, &truth, faulty(), None, AnchorMode::Full, None, true).await;
    for (k, r) in s.steps().iter().enumerate() {
        let p = &r.provenance;
        if p.escalated_to.is_some() {
            assert_eq!(p.escalated_to.as_deref(), Some("executor"));
            assert_eq!((p.attempts, p.regenerations), (3, 2), "step {k}");
            assert!(full[k]);
            assert!(!p.problems.is_empty());
        }
    }
    assert!(full.iter().filter(|r| **r).count() > off.iter().filter(|r| **r).count());
    assert!(s.steps().iter().all(|r| !r.provenance.uncertain));
}

#[tokio::test]
async fn verification_escalates_disagreements_and_adapts() {
    let dir = tempfile::tempdir().unwrap();
    let (env, truth) = setup(dir.path()).await;
    let exact: Arc<dyn Simulator> = truth.clone();
    // Two doubles that never err agree on everything: the probability falls to the floor.
    let never = || -> Arc<dyn Simulator> {
        Arc::new(FaultySimulator::new(
            ExecutorSimulator::clone(&truth),
            0.0,
            1,
            "never",
        ))
    };
    let policy = VerifyPolicy {
        floor: 0.1,
        ceiling: 1.0,
        warmup: 2,
    };
    let (right, s) = run(
        &env,
        &truth,
        never(),
        Some(never()),
        AnchorMode::Full,
        Some(policy),
        false,
    )
    .await;
    assert!(right.iter().all(|r| *r));
    let verified = s
        .steps()
        .iter()
        .filter(|r| r.provenance.verified_by.is_some())
        .count();
    assert!(verified >= 4, "{verified}");
    assert!(s.steps().iter().all(|r| r.provenance.agreed != Some(false)));
    let get = &s.verifier().tools["get_ticket"];
    assert_eq!(get.verified, get.agreed);
    assert!(s.verifier().probability("get_ticket") < 1.0);
    // A primary that always errs, verified by the truth: every disagreement escalates to the
    // executor.
    let always: Arc<dyn Simulator> = Arc::new(FaultySimulator::new(
        ExecutorSimulator::clone(&truth),
        1.0,
        9,
        "always",
    ));
    let (right, _) = run(
        &env,
        &truth,
        always,
        Some(exact),
        AnchorMode::Full,
        Some(VerifyPolicy {
            floor: 1.0,
            ceiling: 1.0,
            warmup: 0,
        }),
        true,
    )
    .await;
    assert!(right.iter().all(|r| *r), "{right:?}");
}

/// A test double answering from a script, recording the feedback it was given.
struct Scripted {
    answers: Mutex<Vec<Result<Prediction, PredictError>>>,
    feedback: Mutex<Vec<Vec<String>>>,
}

impl Simulator for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn predict<'a>(
        &'a self,
        r: &'a StepRequest<'a>,
    ) -> BoxFuture<'a, Result<Prediction, PredictError>> {
        Box::pin(async move {
            self.feedback.lock().unwrap().push(r.feedback.to_vec());
            self.answers.lock().unwrap().remove(0)
        })
    }
}

#[tokio::test]
async fn without_code_the_description_is_the_truth() {
    let dir = tempfile::tempdir().unwrap();
    let (env, _) = setup(dir.path()).await;
    let env = Arc::new(env.without_code());
    assert!(env.code.is_none() && env.rule.is_none());
    let after = {
        let mut s = initial();
        s["tickets"]["T2"] = json!({"title": "b", "status": "open"});
        s["next_id"] = json!(3);
        s
    };
    let answer = |observation: Value, state: &Value| {
        Ok(Prediction {
            observation,
            state_after: state.clone(),
            raw: None,
            usage: Usage {
                prompt_tokens: 8,
                completion_tokens: 2,
            },
        })
    };
    let scripted = Arc::new(Scripted {
        answers: Mutex::new(vec![
            // A create whose answer drops a field its responses always have, and a title that
            // is not a string accepted: both break the description.
            answer(json!({"success": true, "ticketId": "T2"}), &after),
            Err(PredictError::Unreadable {
                why: "no output object".into(),
                raw: "I think it works".into(),
                usage: Usage {
                    prompt_tokens: 4,
                    completion_tokens: 3,
                },
                feedback: None,
            }),
            answer(json!({"success": true, "ticket_id": "T2"}), &after),
        ]),
        feedback: Mutex::new(Vec::new()),
    });
    let mut s = Session::new(
        env,
        Backends {
            primary: scripted.clone(),
            secondary: None,
            executor: None,
        },
        SessionConfig::default(),
        initial(),
    );
    let r = s
        .step("create_ticket", &args(json!({"title": "b"})))
        .await
        .unwrap();
    let p = &r.provenance;
    assert_eq!((p.attempts, p.regenerations, p.uncertain), (3, 2, false));
    // The unreadable answer's tokens count too.
    assert_eq!((p.tokens, p.completion_tokens), (27, 7));
    assert_eq!(r.observation["ticket_id"], "T2");
    let kinds: Vec<&str> = p.problems.iter().map(|x| x.kind.as_str()).collect();
    assert_eq!(kinds, ["response_schema", "unreadable"]);
    let feedback = scripted.feedback.lock().unwrap().clone();
    assert!(feedback[0].is_empty());
    assert!(feedback[1][0].contains("ticket_id"), "{:?}", feedback[1]);
    assert_eq!(feedback[2], ["no output object"]);
    // A call that breaks its schema and is answered as a success is rejected without code;
    // nothing is left to escalate to, so the step is kept, uncertain.
    let scripted = Arc::new(Scripted {
        answers: Mutex::new(
            (0..3)
                .map(|_| answer(json!({"success": true, "ticket_id": "T3"}), &after))
                .collect(),
        ),
        feedback: Mutex::new(Vec::new()),
    });
    let mut s = Session::new(
        Arc::clone(s.env_arc()),
        Backends {
            primary: scripted,
            secondary: None,
            executor: None,
        },
        SessionConfig::default(),
        initial(),
    );
    let r = s
        .step("create_ticket", &args(json!({"title": 5})))
        .await
        .unwrap();
    assert!(r.provenance.uncertain);
    assert!(r
        .provenance
        .problems
        .iter()
        .any(|p| p.kind == "argument_schema"));
    // An answer whose change list does not apply, with anchoring off: the step is uncertain,
    // the state stays, and the observation is the answer's feedback, not its raw text.
    let scripted = Arc::new(Scripted {
        // As the model answer reader makes it.
        answers: Mutex::new(vec![Err(envsim_sim::backend::read_answer(
            r#"{"feedback": "Created T2", "config_changes": [{"type": "modify", "path": "/nope/x", "value": 1}]}"#.into(),
            Usage {
                prompt_tokens: 5,
                completion_tokens: 4,
            },
            &initial(),
        )
        .unwrap_err())]),
        feedback: Mutex::new(Vec::new()),
    });
    let mut off = Session::new(
        Arc::clone(s.env_arc()),
        Backends {
            primary: scripted,
            secondary: None,
            executor: None,
        },
        SessionConfig {
            mode: envsim_sim::session::AnchorMode::Off,
            ..SessionConfig::default()
        },
        initial(),
    );
    let r = off
        .step("create_ticket", &args(json!({"title": "b"})))
        .await
        .unwrap();
    assert!(r.provenance.uncertain);
    assert_eq!(r.observation, json!("Created T2"));
    assert_eq!(*r.state_after, initial());
    assert_eq!(r.provenance.tokens, 9);
    // The executor is not there to escalate to: a session without code says so when asked to
    // run one.
    let request = StepRequest {
        env: s.env(),
        state: &initial(),
        tool: "get_ticket",
        arguments: &args(json!({"ticket_id": "T1"})),
        seed: 0,
        step: 0,
        attempt: 0,
        feedback: &[],
    };
    let executor =
        ExecutorSimulator::new(Arc::new(Executor::new(1, Limits::default()).await.unwrap()));
    let err = executor.predict(&request).await.unwrap_err();
    assert!(
        err.to_string().contains("needs the environment's code"),
        "{err}"
    );
    // A measurement's test double that knows the code answers for a description-only
    // session, as the executor would with the code.
    let (truth, _) = setup(dir.path()).await;
    // A package whose failures are texts: the description-only session cannot read them, the
    // double that knows the package can.
    let mut truth = (*truth).clone();
    truth.rule = Some(envsim_core::outcome::OutcomeRule::ErrorPrefix {
        prefix: "Response status code is".into(),
    });
    let knowing = executor.knowing(&truth);
    let failure = json!("Response status code is 422: no");
    assert_eq!(
        s.env().outcome(&failure),
        Some(true),
        "a guess from the text alone"
    );
    assert_eq!(knowing.outcome(s.env(), &failure), Some(false));
    assert_eq!(knowing.outcome(s.env(), &json!("Error: x")), Some(false));
    let answer = knowing.predict(&request).await.unwrap();
    assert_eq!(
        answer.observation["data"]["title"],
        json!("a"),
        "{answer:?}"
    );
    assert_eq!(answer.state_after, initial());
}

#[tokio::test]
async fn an_openai_simulator_asks_for_structured_answers_and_is_anchored() {
    use envsim_sim::backend::OpenAiSimulator;
    use envsim_testkit::openai_double::{DoubleConfig, OpenAiDouble};
    let dir = tempfile::tempdir().unwrap();
    let (env, truth) = setup(dir.path()).await;
    // The model answers every prompt with a create that forgets its change: the audit catches
    // it (a create whose successes always change the state), the regenerations repeat it, and
    // the executor takes the step.
    let double = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some(
            r#"{"feedback": "{'success': True, 'ticket_id': 'T2'}", "config_changes": []}"#.into(),
        ),
        ..DoubleConfig::default()
    })
    .unwrap();
    let client = envsim_llm::openai::OpenAiClient::new(&envsim_llm::openai::ClientSettings {
        base_url: double.base_url(),
        api_key: None,
        timeout: std::time::Duration::from_secs(10),
        max_connections: 2,
    })
    .unwrap();
    let model = OpenAiSimulator::new(
        client,
        "m".into(),
        envsim_core::prompt::Template::EnvsimSliced,
        envsim_llm::Decoding {
            temperature: Some(0.0),
            max_tokens: Some(200),
            stop: Vec::new(),
            extra_body: Map::new(),
        },
    );
    let mut s = Session::new(
        Arc::clone(&env),
        Backends {
            primary: Arc::new(model),
            secondary: None,
            executor: Some(truth.clone()),
        },
        SessionConfig::default(),
        initial(),
    );
    let r = s
        .step("create_ticket", &args(json!({"title": "b"})))
        .await
        .unwrap();
    let p = &r.provenance;
    assert_eq!(
        (p.attempts, p.escalated_to.as_deref()),
        (3, Some("executor"))
    );
    assert!(p.tokens > 0);
    assert_eq!(s.state()["tickets"]["T2"]["title"], "b");
    let bodies = double.bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0]["response_format"]["type"], "json_schema");
    assert_eq!(
        bodies[0]["response_format"]["json_schema"]["schema"]["required"],
        json!(["feedback", "config_changes"])
    );
    // The regenerations carry the reason.
    let last_user = |b: &Value| {
        b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(!last_user(&bodies[0]).contains("rejected"));
    assert!(last_user(&bodies[1]).contains("Your previous answer to this call was rejected"));
    assert!(
        last_user(&bodies[1]).contains("reports success but the state did not change"),
        "{}",
        last_user(&bodies[1])
    );
    double.shutdown();
}

/// `measure::measure_config` against the executor: the executor itself is right at every step;
/// a double that always errs is wrong where its answers differ, every miss named; full
/// anchoring with escalation to the code repairs what validation catches.
#[tokio::test]
async fn anchoring_is_measured_against_the_executor() {
    use envsim_sim::measure::{measure_config, AnchoringTotals, MeasureConfig, Measured};
    let dir = tempfile::tempdir().unwrap();
    let (env, executor) = setup(dir.path()).await;
    let run = AuditTrajectory {
        id: "calls".into(),
        initial_state: Arc::new(initial()),
        steps: calls()
            .into_iter()
            .map(|(tool, arguments)| AuditStep {
                tool: tool.into(),
                arguments,
                observation: Value::Null,
                success: None,
                state_after: Arc::new(Value::Null),
            })
            .collect(),
    };
    let runs = [run.clone(), run];
    let truth = (*env).clone();
    let on = Measured {
        env: Arc::clone(&env),
        truth_env: &truth,
        executor: &executor,
        escalation: Some((*executor).clone()),
        runs: &runs,
        max_regenerations: 2,
        seed: 5,
    };
    let adaptive = VerifyPolicy {
        floor: 0.1,
        ceiling: 0.5,
        warmup: 3,
    };
    let off = MeasureConfig::named("off", adaptive).unwrap();
    let mut exact = AnchoringTotals::default();
    measure_config(&on, &off, executor.clone(), None, &mut exact)
        .await
        .unwrap();
    let steps = 2 * calls().len();
    assert_eq!(
        (
            exact.trajectories,
            exact.consistent_trajectories,
            exact.final_state_right,
            exact.steps,
            exact.right_steps,
            exact.wrong_and_not_uncertain
        ),
        (2, 2, 2, steps, steps, 0)
    );
    assert!(exact.misses.is_empty());
    let faulty = || -> Arc<dyn Simulator> {
        Arc::new(FaultySimulator::new((*executor).clone(), 1.0, 1, "test"))
    };
    let mut spoiled = AnchoringTotals::default();
    measure_config(&on, &off, faulty(), None, &mut spoiled)
        .await
        .unwrap();
    assert_eq!(spoiled.steps, steps);
    assert!(spoiled.right_steps < steps, "{spoiled:?}");
    assert_eq!(spoiled.consistent_trajectories, 0);
    assert_eq!(spoiled.wrong_and_not_uncertain, steps - spoiled.right_steps);
    assert_eq!(
        spoiled.misses.values().sum::<usize>(),
        spoiled.wrong_and_not_uncertain,
        "{:?}",
        spoiled.misses
    );
    assert!(!spoiled.misses.contains_key("none"));
    let full = MeasureConfig::named("full", adaptive).unwrap();
    let mut anchored = AnchoringTotals::default();
    measure_config(&on, &full, faulty(), None, &mut anchored)
        .await
        .unwrap();
    assert!(anchored.right_steps > spoiled.right_steps, "{anchored:?}");
    assert!(anchored.simulator_calls > spoiled.simulator_calls);
}
