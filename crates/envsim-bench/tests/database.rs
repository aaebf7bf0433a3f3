//! `bench build` over packages of the database convention: string observations are classified
//! by the package's outcome rule (default: an `Error` prefix is a failure), so their
//! transitions are sampled, and the benchmark replays from its own file.

use envsim_bench::composition::{sample, Bucket, BucketOutcome, Composition, SampleOptions};
use envsim_bench::output::{render, write_reference_json};
use envsim_bench::slice_check::SliceCheckError;
use envsim_bench::verify::{verify_records, verify_stream, VerifyError};
use envsim_core::formats::{records, Record};
use envsim_exec::package::EnvPackage;
use envsim_exec::{Executor, Limits};
use envsim_explore::plan::{ExplorePlan, Strategy};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One package per tool, so that every call of a package ends the same way: `adder` changes
/// one key and says so, `refuser` refuses with an `Error:` string, `crasher` changes a key and
/// raises, `reporter` reads and answers with a dict (a success under the default rule), and
/// `status` answers `{"status": ...}` under a `status_field` rule.
fn write_packages(root: &std::path::Path) -> Vec<EnvPackage> {
    let fixtures: [(&str, &str, Option<Value>); 5] = [
        (
            "adder",
            "def add(data):\n    data['n'] += 1\n    return 'Added, n = %d' % data['n']\n",
            None,
        ),
        (
            "refuser",
            "def refuse(data):\n    return 'Error: closed today'\n",
            None,
        ),
        (
            "crasher",
            "def crash(data):\n    data['n'] += 1\n    raise ValueError('broken after the change')\n",
            None,
        ),
        (
            "reporter",
            "def report(data):\n    return {'n': data['n']}\n",
            None,
        ),
        (
            "status",
            "def check(data):\n    data['n'] += 1\n    return {'status': 'ok' if data['n'] % 2 else 'busy'}\n",
            Some(json!({"rule": "status_field", "field": "status", "success": ["ok"]})),
        ),
    ];
    fixtures
        .iter()
        .map(|(name, code, outcome)| {
            let dir = root.join(name);
            std::fs::create_dir_all(dir.join("states")).unwrap();
            std::fs::write(dir.join("env.py"), code).unwrap();
            std::fs::write(dir.join("states/0.json"), r#"{"n": 0}"#).unwrap();
            let tool = code[4..].split('(').next().unwrap();
            let mut manifest = json!({"name": name, "domain": "test", "description": "d",
                "convention": "database",
                "tools": [{"type": "function", "function": {"name": tool, "description": tool,
                    "parameters": {"type": "object", "properties": {}, "required": []}}}]});
            if let Some(rule) = outcome {
                manifest["outcome"] = rule.clone();
            }
            std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
            EnvPackage::load(&dir).unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_packages_are_classified_sampled_and_replayable() {
    let dir = tempfile::tempdir().unwrap();
    let packages = write_packages(dir.path());
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));
    let plan = ExplorePlan {
        // Walks along each state, as the expectations below count them.
        strategy: Strategy::Random,
        focus_share: 0.0,
        twin: true,
        walks: 2,
        steps: 3,
        valid_share: 1.0,
        seed: 5,
        trace: false,
        ..ExplorePlan::default()
    };
    let transitions = envsim_explore::explore(
        Arc::clone(&executor),
        Arc::new(packages.clone()),
        plan,
        2,
        |_, _| {},
    )
    .await
    .expect("explores")
    .into_records();
    assert_eq!(transitions.len(), 5 * 2 * 3);
    let mut counts: BTreeMap<(&str, String), usize> = BTreeMap::new();
    for t in &transitions {
        *counts
            .entry((t.env.as_str(), format!("{:?}", t.outcome)))
            .or_default() += 1;
    }
    assert_eq!(
        counts.into_iter().collect::<Vec<_>>(),
        [
            (("adder", "Success".into()), 6),
            (("crasher", "Exception".into()), 6),
            (("refuser", "Failure".into()), 6),
            (("reporter", "Success".into()), 6),
            // n = 1, 2, 3 along each walk: ok, busy, ok.
            (("status", "Failure".into()), 2),
            (("status", "Success".into()), 4),
        ]
    );
    let adder: Vec<(&str, usize)> = transitions
        .iter()
        .filter(|t| t.env == "adder")
        .map(|t| (t.observation.as_str(), t.change_count))
        .collect();
    assert_eq!(
        adder,
        [
            ("Added, n = 1", 1),
            ("Added, n = 2", 1),
            ("Added, n = 3", 1),
            ("Added, n = 1", 1),
            ("Added, n = 2", 1),
            ("Added, n = 3", 1)
        ]
    );
    // The exception's partial change is kept and the walk continues from it.
    let crashes: Vec<String> = transitions
        .iter()
        .filter(|t| t.env == "crasher")
        .map(|t| t.config_after.identity().into_owned())
        .collect();
    assert_eq!(&crashes[..3], [r#"{"n":1}"#, r#"{"n":2}"#, r#"{"n":3}"#]);

    let composition = Composition {
        buckets: vec![
            Bucket {
                name: "failure".into(),
                outcome: BucketOutcome::Failure,
                delta: None,
                args: None,
                // The refusal (one distinct call: it changes nothing) and `busy`.
                count: 2,
            },
            Bucket {
                name: "no_change".into(),
                outcome: BucketOutcome::Success,
                delta: Some([0, 0]),
                args: None,
                count: 1,
            },
            Bucket {
                name: "changed".into(),
                outcome: BucketOutcome::Success,
                delta: Some([1, 1]),
                args: None,
                count: 4,
            },
        ],
    };
    let options = SampleOptions {
        seed: 5,
        allow_unpredictable: false,
        allow_underfill: false,
        max_env_share: 1.0,
    };
    let sampled = sample(&transitions, &composition, &options).expect("fills");
    let codes: BTreeMap<String, String> = packages
        .iter()
        .map(|p| (p.manifest.name.clone(), p.code.code.to_string()))
        .collect();
    let files = render(&transitions, &sampled, &composition, 5);
    assert_eq!(files.datasheet_json["samples"], 7);
    let mut reference_json = Vec::new();
    write_reference_json(&mut reference_json, &transitions, &sampled, &codes).unwrap();
    let reference: Value = serde_json::from_slice(&reference_json).unwrap();
    let reference = reference.as_array().unwrap();
    assert_eq!(reference.len(), 7);
    assert!(reference.iter().all(|r| r["convention"] == "database"));
    let failures: Vec<&str> = reference
        .iter()
        .filter_map(|r| r["step_detail"]["observation"]["content"].as_str())
        .filter(|o| o.starts_with("Error"))
        .collect();
    assert_eq!(failures, ["Error: closed today"]);
    let busy = reference
        .iter()
        .filter(|r| r["step_detail"]["observation"]["content"] == "{'status': 'busy'}")
        .count();
    assert_eq!(busy, 1);

    // The benchmark replays from its own file, with the packages and without them (the
    // records carry the code and name the convention).
    let bytes = &reference_json[..];
    for known in [true, false] {
        let by_name: HashMap<String, EnvPackage> = if known {
            packages
                .iter()
                .map(|p| (p.manifest.name.clone(), p.clone()))
                .collect()
        } else {
            HashMap::new()
        };
        let recs = records(bytes, "benchmark.json").unwrap();
        let report = verify_records(Arc::clone(&executor), "benchmark.json", recs, &by_name, 4)
            .await
            .unwrap();
        assert_eq!((report.checked, report.identical), (7, 7), "{report:?}");
    }

    // Read as a stream: the same verdicts; an error of the stream (the file is not valid JSON
    // further on) comes first, even after a sample that cannot be replayed.
    let stream = |records: Vec<Record>, late: bool| {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            for record in records {
                if tx.send(Ok(record)).await.is_err() {
                    return;
                }
            }
            if late {
                let _ = tx.send(Err("late syntax error".to_owned())).await;
            }
        });
        rx
    };
    let none = HashMap::new();
    let verify = |mut rx| {
        let executor = Arc::clone(&executor);
        let none = &none;
        async move { verify_stream(executor, "benchmark.json", &mut rx, none, 2).await }
    };
    let recs = records(bytes, "benchmark.json").unwrap();
    let report = verify(stream(recs.clone(), false)).await.unwrap().unwrap();
    assert_eq!((report.checked, report.identical), (7, 7), "{report:?}");
    let late = verify(stream(recs.clone(), true)).await;
    assert_eq!(late.unwrap_err(), "late syntax error");
    let mut no_code = recs.clone();
    no_code[3].value.as_object_mut().unwrap().remove("env_code");
    let failed = verify(stream(no_code.clone(), false)).await.unwrap();
    assert!(
        matches!(
            failed,
            Err(VerifyError::Job(SliceCheckError::NoCode { .. }))
        ),
        "{failed:?}"
    );
    let late = verify(stream(no_code, true)).await;
    assert_eq!(late.unwrap_err(), "late syntax error");
}

/// A refusal that joins a set of strings into its text (as foreign environments list the
/// allowed values) is the same on every run, since every worker hashes strings with one seed,
/// and the double execution runs its twin in a process with another hash seed, so the text is
/// marked unpredictable and never sampled, instead of failing at replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_built_from_a_set_of_strings_is_marked_unpredictable() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("picky");
    std::fs::create_dir_all(pkg.join("states")).unwrap();
    std::fs::write(
        pkg.join("env.py"),
        "def paint(data, colour: str):\n    allowed = {'red', 'green', 'blue', 'black', 'white', 'grey'}\n    if colour not in allowed:\n        return 'Error: allowed: ' + ', '.join(allowed)\n    data['colour'] = colour\n    return 'Painted'\n",
    )
    .unwrap();
    std::fs::write(pkg.join("states/0.json"), r#"{"colour": "red"}"#).unwrap();
    let manifest = json!({"name": "picky", "domain": "test", "description": "d",
        "convention": "database",
        "tools": [{"type": "function", "function": {"name": "paint", "description": "paint",
            "parameters": {"type": "object", "properties": {"colour": {"type": "string",
                "enum": ["green", "pink"]}}, "required": ["colour"]}}}]});
    std::fs::write(pkg.join("manifest.json"), manifest.to_string()).unwrap();
    let packages = vec![EnvPackage::load(&pkg).unwrap()];
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));
    let plan = ExplorePlan {
        // Walks along each state, as the expectations below count them.
        strategy: Strategy::Random,
        focus_share: 0.0,
        twin: true,
        walks: 3,
        steps: 4,
        valid_share: 1.0,
        seed: 11,
        trace: false,
        ..ExplorePlan::default()
    };
    let mut runs = Vec::new();
    for _ in 0..2 {
        runs.push(
            envsim_explore::explore(
                Arc::clone(&executor),
                Arc::new(packages.clone()),
                plan.clone(),
                2,
                |_, _| {},
            )
            .await
            .expect("explores")
            .into_records(),
        );
    }
    let texts = |run: &[envsim_explore::record::TransitionRecord]| -> Vec<String> {
        run.iter().map(|t| t.observation.clone()).collect()
    };
    assert_eq!(texts(&runs[0]), texts(&runs[1]));
    let refusals: Vec<_> = runs[0]
        .iter()
        .filter(|t| t.observation.starts_with("Error"))
        .collect();
    let painted: Vec<_> = runs[0]
        .iter()
        .filter(|t| t.observation == "Painted")
        .collect();
    assert!(!refusals.is_empty() && !painted.is_empty());
    assert!(refusals.iter().all(|t| t.unpredictable == ["/observation"]));
    assert!(painted.iter().all(|t| t.unpredictable.is_empty()));
}
