//! Batches of environments: the batch file, skipping known domains and taken names, concurrent
//! writing, the store (a failed request retried by the rerun, an accepted package installed
//! again from the store), token and cost accounting. The writer is a test double that answers
//! by package name from a script; the gate's simulator is the faulty double reading the good
//! package (a perfect reader).

mod common;

use common::reader;
use envsim_core::prompt::Prompt;
use envsim_core::sample::{Price, Usage};
use envsim_exec::package::EnvPackage;
use envsim_exec::{Convention, Executor, Limits};
use envsim_llm::{BoxFuture, LlmError, TextModel};
use envsim_synth::envgen::batch::{
    derived_name, known_packages, read_requests, synthesize_batch, BatchEvent, BatchPlan,
    EntryStatus,
};
use envsim_synth::envgen::dedup::{Known, Profile};
use envsim_synth::envgen::files::PackageFiles;
use envsim_synth::envgen::{EnvRequest, EnvSource, SynthPlan};
use envsim_synth::store::SynthStore;
use envsim_testkit::tally::{answer, CODE, MANIFEST, TESTS};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A test double of a writer model answering by the package name its prompt asks for: the
/// answers scripted for that name in turn (the last again when they run out); a name scripted
/// with no answer fails like an unreachable endpoint. Usage: a token per 4 bytes, as the
/// scripted writer of the library counts.
struct WriterByName {
    answers: BTreeMap<String, Vec<String>>,
    asked: Mutex<Vec<String>>,
}

impl WriterByName {
    fn new(answers: &[(&str, Vec<String>)]) -> Self {
        WriterByName {
            answers: answers
                .iter()
                .map(|(n, a)| ((*n).to_owned(), a.clone()))
                .collect(),
            asked: Mutex::new(Vec::new()),
        }
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl TextModel for WriterByName {
    fn name(&self) -> String {
        "writer-by-name".into()
    }

    fn complete<'a>(
        &'a self,
        prompt: Prompt,
        _schema: Option<Value>,
        _seed: u64,
    ) -> BoxFuture<'a, Result<(String, Usage), LlmError>> {
        Box::pin(async move {
            let name = prompt
                .user
                .lines()
                .find_map(|l| l.strip_prefix("Package name: "))
                .unwrap_or("")
                .to_owned();
            let k = {
                let mut asked = self.asked.lock().unwrap();
                asked.push(name.clone());
                asked.iter().filter(|n| **n == name).count() - 1
            };
            let script = self.answers.get(&name).cloned().unwrap_or_default();
            let answer = script.get(k).or(script.last()).cloned().ok_or(LlmError {
                model: self.name(),
                message: format!("connection refused (no answer for {name})"),
            })?;
            let usage = Usage {
                prompt_tokens: (prompt.system.len() + prompt.user.len()) as u64 / 4,
                completion_tokens: answer.len() as u64 / 4,
            };
            Ok((answer, usage))
        })
    }
}

fn describe(name: &str, text: &str) -> EnvRequest {
    EnvRequest {
        name: name.into(),
        source: EnvSource::Description(text.into()),
        convention: Convention::Class,
    }
}

/// A corpus package's manifest (only the manifest is read to know a package).
const LIBRARY: &str = r#"{"name": "library", "domain": "public services",
  "description": "Circulation desk of a public library: members borrow books, renew loans, place holds and pay overdue fines.",
  "class_name": "Library",
  "tools": [
    {"type": "function", "function": {"name": "check_out_book", "description": "Lend a book to a member.", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "renew_loan", "description": "Renew a member's loan.", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "pay_fine", "description": "Pay overdue fines.", "parameters": {"type": "object", "properties": {}}}}]}"#;

fn plan(threshold: Option<f64>) -> BatchPlan {
    BatchPlan {
        synth: SynthPlan {
            rounds: 2,
            ..SynthPlan::default()
        },
        jobs: 2,
        dedup_threshold: threshold,
        force: false,
    }
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_batch_file_reads_descriptions_and_json_requests() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "api.json",
        r#"{"openapi": "3.0.0", "info": {"title": "Parking"}, "paths": {}}"#,
    );
    let file = write(
        dir.path(),
        "batch.txt",
        "# environments to grow\n\
         A lending library where members borrow books and pay late fines.\n\
         \n\
         {\"name\": \"parking\", \"openapi\": \"api.json\", \"convention\": \"database\"}\n\
         {\"name\": \"rooms\", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"book_room\"}}]}\n\
         {\"description\": \"A lending library for tools, with deposits.\"}\n",
    );
    let requests = read_requests(&file, Convention::Class).unwrap();
    let names: Vec<&str> = requests.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "lending_library_member",
            "parking",
            "rooms",
            "lending_library_tool"
        ]
    );
    assert_eq!(
        requests[0].source,
        EnvSource::Description(
            "A lending library where members borrow books and pay late fines.".into()
        )
    );
    assert_eq!(requests[1].convention, Convention::Database);
    assert!(
        matches!(&requests[1].source, EnvSource::OpenApi(doc) if doc["info"]["title"] == "Parking")
    );
    assert!(matches!(&requests[2].source, EnvSource::Tools(t) if t.len() == 1));
    assert_eq!(requests[3].convention, Convention::Class);
}

#[test]
fn derived_names_take_three_domain_words_and_repeat_with_a_number() {
    assert_eq!(
        derived_name("The greenhouse's climate control: vents and heaters."),
        "greenhouse_climate_control"
    );
    assert_eq!(derived_name("42 parking spots"), "parking_spot");
    assert_eq!(derived_name("2025 ..."), "env");
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "b.txt",
        "Parking spots of a garage.\nParking spots of a garage, with valets.\n",
    );
    let names: Vec<String> = read_requests(&file, Convention::Class)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["parking_spot_garage", "parking_spot_garage_2"]);
}

#[test]
fn a_bad_batch_file_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("{\"name\": \"x\"\n", "line 1: not a JSON object"),
        (
            "ok line\n{\"name\": \"a\", \"description\": \"d\", \"tools\": [{}]}\n",
            "line 2: give one of \"description\", \"openapi\" and \"tools\", not description and tools",
        ),
        (
            "{\"name\": \"a\", \"descripton\": \"d\"}\n",
            "line 1: unknown field \"descripton\"",
        ),
        (
            "{\"name\": \"Shop\", \"description\": \"d\"}\n",
            "line 1: \"name\": \"Shop\" is not a package name",
        ),
        (
            "{\"name\": \"a\", \"description\": \"d\"}\n\n{\"name\": \"a\", \"description\": \"e\"}\n",
            "line 3: the name \"a\" is already used on line 1",
        ),
        (
            "{\"name\": \"a\", \"openapi\": \"missing.json\"}\n",
            "line 1: \"openapi\": cannot read",
        ),
        (
            "{\"tools\": [{}]}\n",
            "line 1: \"name\" is needed for an OpenAPI or tools request",
        ),
        (
            "{\"name\": \"a\", \"description\": \"d\", \"convention\": \"sql\"}\n",
            "line 1: \"convention\": \"sql\" is not one",
        ),
        ("# only a comment\n", "holds no request"),
    ];
    for (k, (text, expected)) in cases.iter().enumerate() {
        let file = write(dir.path(), &format!("bad{k}.jsonl"), text);
        let error = read_requests(&file, Convention::Class)
            .expect_err(text)
            .to_string();
        assert!(
            error.starts_with(&file.display().to_string()) && error.contains(expected),
            "{text:?}: {error}"
        );
    }
}

#[tokio::test]
async fn a_batch_writes_accepts_refuses_and_skips_with_tokens_and_cost() {
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));
    let simulator = reader(Arc::clone(&executor));
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    // A package already in the output folder, and a corpus holding a library package.
    PackageFiles::parse(&answer(CODE, Some(TESTS)))
        .unwrap()
        .install(&out, "kept")
        .unwrap();
    let corpus = root.path().join("corpus");
    std::fs::create_dir_all(corpus.join("library")).unwrap();
    std::fs::write(corpus.join("library/manifest.json"), LIBRARY).unwrap();
    let known = Known::new(known_packages(&[&corpus], &[]).unwrap());
    assert_eq!(known.len(), 1);

    let requests = vec![
        describe(
            "scores",
            "Scoreboards of a quiz night: teams, rounds, points.",
        ),
        describe("broken", "Parking spots of a garage."),
        describe(
            "lending",
            "A public library: members borrow books, renew loans, pay fines.",
        ),
        describe("kept", "Bus timetables and stops."),
        describe(
            "scores_again",
            "Scoreboards of a quiz night: teams, rounds and points.",
        ),
    ];
    let good = answer(CODE, Some(TESTS));
    let writer = WriterByName::new(&[
        ("scores", vec![good.clone()]),
        ("broken", vec!["I cannot write code.".to_owned()]),
    ]);
    let store_file = root.path().join("store.sqlite");
    let mut store = SynthStore::open(&store_file).unwrap();
    let drafts = tempfile::tempdir().unwrap();
    let events = Mutex::new(Vec::new());
    let report = synthesize_batch(
        &writer,
        Arc::clone(&executor),
        &simulator,
        "reader",
        &requests,
        &plan(Some(0.5)),
        known,
        &mut store,
        &out,
        drafts.path(),
        &|e| {
            if let BatchEvent::Finished { name, entry, .. } = e {
                events.lock().unwrap().push((name, entry.map(|e| e.status)));
            }
        },
    )
    .await
    .unwrap();
    let statuses: Vec<(&str, EntryStatus)> = report
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("scores", EntryStatus::Accepted),
            ("broken", EntryStatus::Refused),
            ("lending", EntryStatus::Duplicate),
            ("kept", EntryStatus::Exists),
            ("scores_again", EntryStatus::Duplicate),
        ]
    );
    assert!(report.failures.is_empty());
    assert!(!report.resumed);
    assert_eq!(events.lock().unwrap().len(), 5);
    // Skipped requests cost nothing; the duplicates name what they duplicate.
    let [scores, broken, lending, kept, again] = &report.entries[..] else {
        panic!("five entries")
    };
    assert_eq!(lending.rounds, 0);
    assert_eq!(lending.writer_usage, Usage::default());
    assert_eq!(lending.nearest.as_ref().unwrap().name, "library");
    assert!(lending.nearest.as_ref().unwrap().similarity >= 0.5);
    // The accepted package is compared with the corpus too, and is not its duplicate.
    assert_eq!(scores.nearest.as_ref().unwrap().name, "library");
    assert!(scores.nearest.as_ref().unwrap().similarity < 0.5);
    assert_eq!(again.nearest.as_ref().unwrap().name, "scores");
    assert_eq!(kept.rounds, 0);
    let mut asked = writer.asked();
    asked.sort();
    assert_eq!(asked, ["broken", "broken", "scores"]);
    // The accepted package is installed, loads, and is named as asked.
    assert_eq!(scores.rounds, 1);
    assert_eq!(scores.gate_score, Some(1.0));
    assert_eq!(
        scores.path.as_deref(),
        Some(out.join("scores").display().to_string().as_str())
    );
    let installed = EnvPackage::load(&out.join("scores")).unwrap();
    assert_eq!(installed.manifest.name, "scores");
    assert_eq!(broken.rounds, 2);
    assert_eq!(
        broken.findings[0].message,
        "the answer holds no file: each file must start on a line `=== FILE: path ===`"
    );
    assert!(!out.join("broken").exists());
    // Every answer is kept beside the drafts.
    for round in [1, 2] {
        assert_eq!(
            std::fs::read_to_string(drafts.path().join(format!("broken.round-{round}.txt")))
                .unwrap(),
            "I cannot write code."
        );
    }
    // Tokens: the writer's as the double counts them, the gate's as its report says.
    assert_eq!(scores.writer_usage.completion_tokens, good.len() as u64 / 4);
    assert_eq!(
        broken.writer_usage.completion_tokens,
        2 * ("I cannot write code.".len() as u64 / 4)
    );
    assert_eq!(broken.gate_tokens, 0);
    let price = Price {
        input_per_mtok: 1.0,
        output_per_mtok: 4.0,
    };
    let cost = report.cost(price, 0.0);
    assert_eq!(
        cost.writer_usage.completion_tokens,
        scores.writer_usage.completion_tokens + broken.writer_usage.completion_tokens
    );
    assert_eq!(
        cost.writer_usage.prompt_tokens,
        scores.writer_usage.prompt_tokens + broken.writer_usage.prompt_tokens
    );
    assert_eq!(cost.gate_tokens, scores.gate_tokens);
    let writer_usd = |u: Usage| (u.prompt_tokens as f64 + 4.0 * u.completion_tokens as f64) / 1e6;
    let expected = writer_usd(scores.writer_usage) + writer_usd(broken.writer_usage);
    assert!((cost.total_usd - expected).abs() < 1e-12);
    assert_eq!(cost.gate_usd, 0.0);
    assert_eq!(cost.per_accepted_usd, Some(cost.total_usd));
    let with_gate = report.cost(price, 2.0);
    assert!((with_gate.gate_usd - 2.0 * scores.gate_tokens as f64 / 1e6).abs() < 1e-12);
    assert!((with_gate.total_usd - expected - with_gate.gate_usd).abs() < 1e-12);
}

#[tokio::test]
async fn a_rerun_retries_what_failed_and_reinstalls_from_the_store() {
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));
    let simulator = reader(Arc::clone(&executor));
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    let store_file = root.path().join("store.sqlite");
    let drafts = tempfile::tempdir().unwrap();
    let requests = vec![
        describe("first", "Scoreboards of a quiz night."),
        describe("second", "Bus timetables and stops."),
    ];
    let good = answer(CODE, Some(TESTS));
    let run = |writer: WriterByName| {
        let executor = Arc::clone(&executor);
        let requests = requests.clone();
        let (out, store_file, drafts) =
            (out.clone(), store_file.clone(), drafts.path().to_path_buf());
        let simulator = &simulator;
        async move {
            let mut store = SynthStore::open(&store_file).unwrap();
            let report = synthesize_batch(
                &writer,
                executor,
                simulator,
                "reader",
                &requests,
                &plan(None),
                Known::default(),
                &mut store,
                &out,
                &drafts,
                &|_| {},
            )
            .await
            .unwrap();
            (report, writer.asked())
        }
    };
    // The endpoint fails for `second`: it is stored as failed, `first` as accepted.
    let (report, asked) = run(WriterByName::new(&[
        ("first", vec![good.clone()]),
        ("second", vec![]),
    ]))
    .await;
    assert_eq!(asked.len(), 2);
    assert_eq!(report.entries.len(), 1);
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].name, "second");
    assert!(
        report.failures[0].error.contains("connection refused"),
        "{:?}",
        report.failures
    );
    // The rerun writes only `second`; `first` comes from the store, and is installed again
    // from it when its folder is gone.
    std::fs::remove_dir_all(out.join("first")).unwrap();
    let (report, asked) = run(WriterByName::new(&[("second", vec![good.clone()])])).await;
    assert!(report.resumed);
    assert_eq!(report.from_store, 1);
    assert_eq!(asked, ["second"]);
    assert!(report.failures.is_empty());
    let statuses: Vec<EntryStatus> = report.entries.iter().map(|e| e.status).collect();
    assert_eq!(statuses, [EntryStatus::Accepted, EntryStatus::Accepted]);
    assert_eq!(
        PackageFiles::read(&out.join("first")).unwrap(),
        PackageFiles::read(&out.join("second"))
            .map(|mut f| {
                let m = f.files.get_mut("manifest.json").unwrap();
                *m = m.replace("\"second\"", "\"first\"");
                f
            })
            .unwrap()
    );
    // A third run has nothing to do and asks nobody.
    let (report, asked) = run(WriterByName::new(&[])).await;
    assert_eq!(report.from_store, 2);
    assert!(asked.is_empty());
}

#[tokio::test]
async fn an_accepted_package_that_duplicates_a_known_one_is_not_installed() {
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));
    let simulator = reader(Arc::clone(&executor));
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    let manifest: envsim_exec::package::Manifest = serde_json::from_str(MANIFEST).unwrap();
    // Known: the tally package. Asked for: words that share nothing with it, so the request
    // passes; the writer answers with the tally package all the same.
    let known = Known::new(vec![Profile::of_manifest(&manifest)]);
    let request = describe("weather", "Forecasts for mountain huts.");
    assert!(
        known
            .nearest(&Profile::of_request(&request))
            .unwrap()
            .similarity
            < 0.1
    );
    let writer = WriterByName::new(&[("weather", vec![answer(CODE, Some(TESTS))])]);
    let mut store = SynthStore::open(&root.path().join("s.sqlite")).unwrap();
    let drafts = tempfile::tempdir().unwrap();
    let report = synthesize_batch(
        &writer,
        executor,
        &simulator,
        "reader",
        &[request],
        &plan(Some(0.5)),
        known,
        &mut store,
        &out,
        drafts.path(),
        &|_| {},
    )
    .await
    .unwrap();
    let entry = &report.entries[0];
    assert_eq!(entry.status, EntryStatus::Duplicate);
    assert_eq!(entry.rounds, 1);
    let nearest = entry.nearest.as_ref().unwrap();
    assert_eq!(nearest.name, "tally");
    assert!(nearest.similarity > 0.9, "{nearest:?}");
    assert!(entry.path.is_none());
    assert!(!out.join("weather").exists());
    let price = Price {
        input_per_mtok: 1.0,
        output_per_mtok: 1.0,
    };
    assert_eq!(report.cost(price, 1.0).per_accepted_usd, None);
}

#[tokio::test]
async fn of_two_requests_answered_with_the_same_package_one_is_kept() {
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));
    let simulator = reader(Arc::clone(&executor));
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    let requests = vec![
        describe("quiz", "Scoreboards of a quiz night."),
        describe("buses", "Bus timetables and stops."),
    ];
    let good = answer(CODE, Some(TESTS));
    let writer = WriterByName::new(&[("quiz", vec![good.clone()]), ("buses", vec![good])]);
    let mut store = SynthStore::open(&root.path().join("s.sqlite")).unwrap();
    let drafts = tempfile::tempdir().unwrap();
    let report = synthesize_batch(
        &writer,
        executor,
        &simulator,
        "reader",
        &requests,
        &plan(Some(0.5)),
        Known::default(),
        &mut store,
        &out,
        drafts.path(),
        &|_| {},
    )
    .await
    .unwrap();
    let mut statuses: Vec<EntryStatus> = report.entries.iter().map(|e| e.status).collect();
    statuses.sort_by_key(|s| s.name());
    assert_eq!(statuses, [EntryStatus::Accepted, EntryStatus::Duplicate]);
    let kept = report
        .entries
        .iter()
        .find(|e| e.status == EntryStatus::Accepted)
        .unwrap();
    let dropped = report
        .entries
        .iter()
        .find(|e| e.status == EntryStatus::Duplicate)
        .unwrap();
    let nearest = dropped.nearest.as_ref().unwrap();
    assert_eq!(nearest.name, kept.name);
    assert!((nearest.similarity - 1.0).abs() < 1e-9, "{nearest:?}");
    assert!(out.join(&kept.name).is_dir());
    assert!(!out.join(&dropped.name).exists());
}
