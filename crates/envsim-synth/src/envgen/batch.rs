//! Many environments at once (`envsim env synth --batch FILE`): requests read from a file, the
//! ones whose domain is already covered skipped before any token is spent ([`super::dedup`]),
//! the others written concurrently by [`super::synthesize`], each outcome committed to the
//! synthesis store as it arrives (the store design of `envsim synth` and `eval`: a run keyed by
//! the fingerprint of its settings and requests, so a killed batch loses only what was in
//! flight and a rerun continues with the requests not done), each accepted package installed
//! as `OUT/NAME` at once, and the writer's and the gate's tokens counted per package.

use super::dedup::{Known, Nearest, Profile};
use super::files::PackageFiles;
use super::{synthesize, EnvRequest, EnvSource, RoundEvent, SynthOutcome, SynthPlan};
use crate::store::{fingerprint, StoreError, SynthStore};
use envsim_core::sample::{Price, Usage};
use envsim_exec::package::{EnvPackage, Manifest};
use envsim_exec::{Convention, Executor};
use envsim_llm::TextModel;
use envsim_sim::backend::Simulator;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A batch file that cannot be read, with the place.
#[derive(Debug, thiserror::Error)]
#[error("{path}{}: {message}", line.map_or(String::new(), |l| format!(", line {l}")))]
pub struct BatchFileError {
    /// The file.
    pub path: String,
    /// The line (1-based), when one is at fault.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// Reads a batch file: one request per line, either a description in words (the package is
/// named after its first words) or a JSON object `{"name": …, "description": …}` (or
/// `"openapi"`: a document, or the path of one relative to the batch file; or `"tools"`: an
/// array of tool schemas), with an optional `"convention"` (`class` or `database`, default
/// `convention`). Blank lines and lines starting with `#` are skipped. Two requests may not
/// share a name.
pub fn read_requests(
    path: &Path,
    convention: Convention,
) -> Result<Vec<EnvRequest>, BatchFileError> {
    let shown = path.display().to_string();
    let fail = |line: Option<usize>, message: String| BatchFileError {
        path: shown.clone(),
        line,
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(None, e.to_string()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut requests: Vec<EnvRequest> = Vec::new();
    let mut named_at: BTreeMap<String, usize> = BTreeMap::new();
    for (k, raw) in text.lines().enumerate() {
        let number = k + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let request = if line.starts_with('{') {
            let object: serde_json::Map<String, Value> = serde_json::from_str(line)
                .map_err(|e| fail(Some(number), format!("not a JSON object: {e}")))?;
            request_of(&object, base, convention).map_err(|message| fail(Some(number), message))?
        } else {
            let name = unique_name(&derived_name(line), &named_at);
            EnvRequest {
                name,
                source: EnvSource::Description(line.to_owned()),
                convention,
            }
        };
        if !super::is_identifier(&request.name) {
            return Err(fail(
                Some(number),
                format!(
                    "\"name\": {:?} is not a package name (lower-case letters, digits and underscores, starting with a letter, at most 64)",
                    request.name
                ),
            ));
        }
        if let Some(first) = named_at.get(&request.name) {
            return Err(fail(
                Some(number),
                format!(
                    "the name {:?} is already used on line {first}",
                    request.name
                ),
            ));
        }
        named_at.insert(request.name.clone(), number);
        requests.push(request);
    }
    if requests.is_empty() {
        return Err(fail(None, "holds no request".into()));
    }
    Ok(requests)
}

/// One JSON line as a request.
fn request_of(
    object: &serde_json::Map<String, Value>,
    base: &Path,
    convention: Convention,
) -> Result<EnvRequest, String> {
    const FIELDS: [&str; 5] = ["name", "description", "openapi", "tools", "convention"];
    if let Some(unknown) = object.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!(
            "unknown field {unknown:?} (a request holds name, one of description, openapi or tools, and optionally convention)"
        ));
    }
    let sources: Vec<&str> = ["description", "openapi", "tools"]
        .into_iter()
        .filter(|k| object.contains_key(*k))
        .collect();
    let source = match sources.as_slice() {
        ["description"] => match &object["description"] {
            Value::String(text) if !text.trim().is_empty() => {
                EnvSource::Description(text.trim().to_owned())
            }
            _ => return Err("\"description\" must be a non-empty string".into()),
        },
        ["openapi"] => match &object["openapi"] {
            Value::Object(_) => EnvSource::OpenApi(object["openapi"].clone()),
            Value::String(file) => {
                let at = base.join(file);
                let text = std::fs::read_to_string(&at)
                    .map_err(|e| format!("\"openapi\": cannot read {}: {e}", at.display()))?;
                let doc: Value = serde_json::from_str(&text).map_err(|e| {
                    format!(
                        "\"openapi\": {}: line {}, column {}: {e}",
                        at.display(),
                        e.line(),
                        e.column()
                    )
                })?;
                if !doc.is_object() {
                    return Err(format!(
                        "\"openapi\": {} is not an OpenAPI document (a JSON object)",
                        at.display()
                    ));
                }
                EnvSource::OpenApi(doc)
            }
            _ => return Err("\"openapi\" must be a document or the path of one".into()),
        },
        ["tools"] => match &object["tools"] {
            Value::Array(tools) if !tools.is_empty() && tools.iter().all(Value::is_object) => {
                EnvSource::Tools(tools.clone())
            }
            _ => return Err("\"tools\" must be a non-empty array of tool schemas".into()),
        },
        [] => return Err("say what to write: \"description\", \"openapi\" or \"tools\"".into()),
        _ => {
            return Err(format!(
                "give one of \"description\", \"openapi\" and \"tools\", not {}",
                sources.join(" and ")
            ))
        }
    };
    let name = match object.get("name") {
        Some(Value::String(name)) => name.clone(),
        Some(_) => return Err("\"name\" must be a string".into()),
        None => match &source {
            EnvSource::Description(text) => derived_name(text),
            _ => return Err("\"name\" is needed for an OpenAPI or tools request".into()),
        },
    };
    let convention = match object.get("convention") {
        None => convention,
        Some(Value::String(c)) if c == "class" => Convention::Class,
        Some(Value::String(c)) if c == "database" => Convention::Database,
        Some(other) => {
            return Err(format!(
                "\"convention\": {other} is not one (class or database)"
            ))
        }
    };
    Ok(EnvRequest {
        name,
        source,
        convention,
    })
}

/// A package name from a description's first words that tell the domain (`"A lending library
/// where members…"` → `lending_library_member`).
pub fn derived_name(text: &str) -> String {
    let name = super::dedup::words(text)
        .into_iter()
        .filter(|w| w.chars().all(|c| c.is_ascii_alphanumeric()))
        .take(3)
        .collect::<Vec<_>>()
        .join("_");
    let mut name = name;
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        name.insert_str(0, "env_");
    }
    name.truncate(48);
    name.trim_end_matches('_').to_owned()
}

fn unique_name(name: &str, taken: &BTreeMap<String, usize>) -> String {
    if !taken.contains_key(name) {
        return name.to_owned();
    }
    (2..)
        .map(|k| format!("{name}_{k}"))
        .find(|n| !taken.contains_key(n))
        .unwrap_or_else(|| name.to_owned())
}

/// How a batch runs.
#[derive(Clone, Debug)]
pub struct BatchPlan {
    /// How each package is written, checked and gated.
    pub synth: SynthPlan,
    /// Requests in flight at once.
    pub jobs: usize,
    /// Skip a request (and refuse an accepted package) this similar to a known environment
    /// (`None`: no deduplication).
    pub dedup_threshold: Option<f64>,
    /// Write over packages of the same name in the output folder (else those requests are
    /// skipped).
    pub force: bool,
}

/// What became of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryStatus {
    /// A package passed every check and the gate, and was installed.
    Accepted,
    /// No draft passed in the rounds allowed.
    Refused,
    /// The request, or the package written for it, duplicates a known environment.
    Duplicate,
    /// A package of the same name is in the output folder (and `force` is off).
    Exists,
}

impl EntryStatus {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            EntryStatus::Accepted => "accepted",
            EntryStatus::Refused => "refused",
            EntryStatus::Duplicate => "duplicate",
            EntryStatus::Exists => "exists",
        }
    }
}

/// One request's result, as stored and reported.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchEntry {
    /// The package name.
    pub name: String,
    /// What became of it.
    pub status: EntryStatus,
    /// Writer rounds spent (0: skipped before writing).
    pub rounds: usize,
    /// What failed in the last round (empty when accepted or skipped).
    pub findings: Vec<super::check::Finding>,
    /// The gate's score in the last round that reached the gate.
    pub gate_score: Option<f64>,
    /// The writer's tokens.
    pub writer_usage: Usage,
    /// The gate simulator's tokens.
    pub gate_tokens: u64,
    /// The most similar known environment, when deduplication ran.
    pub nearest: Option<Nearest>,
    /// Where the package was installed (accepted only).
    pub path: Option<String>,
    /// The accepted package's files (kept so a resumed batch can install it again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<PackageFiles>,
    /// Seconds the request took.
    pub seconds: f64,
}

impl BatchEntry {
    fn skipped(name: &str, status: EntryStatus, nearest: Option<Nearest>) -> BatchEntry {
        BatchEntry {
            name: name.to_owned(),
            status,
            rounds: 0,
            findings: Vec::new(),
            gate_score: None,
            writer_usage: Usage::default(),
            gate_tokens: 0,
            nearest,
            path: None,
            files: None,
            seconds: 0.0,
        }
    }
}

/// A request that could not be done (its writer or the sandbox failed); a rerun retries it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchFailure {
    /// The package name.
    pub name: String,
    /// Why.
    pub error: String,
}

/// A whole batch.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchReport {
    /// The run's key in the store (its first 12 hex digits name it).
    pub run: String,
    /// Whether the run was in the store already (resumed).
    pub resumed: bool,
    /// Entries in request order (failed requests have none).
    pub entries: Vec<BatchEntry>,
    /// Requests that failed this time.
    pub failures: Vec<BatchFailure>,
    /// Entries read back from the store rather than done now.
    pub from_store: usize,
}

/// Tokens and money of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BatchCost {
    /// The writer's tokens.
    pub writer_usage: Usage,
    /// The gate simulator's tokens (prompt and completion together, as simulators report).
    pub gate_tokens: u64,
    /// USD for the writer's tokens.
    pub writer_usd: f64,
    /// USD for the gate's tokens.
    pub gate_usd: f64,
    /// Both.
    pub total_usd: f64,
    /// The total divided by the accepted packages (`None` when none is accepted).
    pub per_accepted_usd: Option<f64>,
}

impl BatchReport {
    /// Entries with `status`.
    pub fn count(&self, status: EntryStatus) -> usize {
        self.entries.iter().filter(|e| e.status == status).count()
    }

    /// Tokens and money of every entry: the writer's tokens at `writer` prices, the gate's at
    /// `gate_per_mtok` USD per million (a local simulator's are free: 0).
    pub fn cost(&self, writer: Price, gate_per_mtok: f64) -> BatchCost {
        let mut writer_usage = Usage::default();
        let mut gate_tokens = 0;
        for entry in &self.entries {
            writer_usage.add(entry.writer_usage);
            gate_tokens += entry.gate_tokens;
        }
        let (input, output) = writer.cost(writer_usage);
        let gate_usd = gate_tokens as f64 * gate_per_mtok / 1e6;
        let total_usd = input + output + gate_usd;
        let accepted = self.count(EntryStatus::Accepted);
        BatchCost {
            writer_usage,
            gate_tokens,
            writer_usd: input + output,
            gate_usd,
            total_usd,
            per_accepted_usd: (accepted > 0).then(|| total_usd / accepted as f64),
        }
    }
}

/// Why a batch could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An entry in the store is not one (a store written by another version).
    #[error("synthesis store: the entry of request {index} ({name}) does not read: {message}")]
    StoredEntry {
        /// Its position.
        index: usize,
        /// Its name.
        name: String,
        /// Why.
        message: String,
    },
    /// A known package could not be read.
    #[error("cannot read the known package {path}: {message}")]
    Known {
        /// Its folder.
        path: String,
        /// Why.
        message: String,
    },
    /// An accepted package could not be installed.
    #[error("cannot install {path}: {error}")]
    Install {
        /// Where.
        path: String,
        /// Why.
        error: std::io::Error,
    },
}

/// What a batch tells as it goes.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchEvent {
    /// The run: its key, whether resumed, requests in all and to do now.
    Started {
        /// The run's key.
        run: String,
        /// Found in the store.
        resumed: bool,
        /// Requests in all.
        requests: usize,
        /// Requests to write now.
        to_write: usize,
    },
    /// A round of one request finished.
    Round(RoundEvent),
    /// A request finished (or was skipped, or failed: `entry` is `None` and `error` says why).
    Finished {
        /// The request's name.
        name: String,
        /// Its entry.
        entry: Option<Box<BatchEntry>>,
        /// Why it failed.
        error: Option<String>,
    },
}

/// The profiles of the packages in `dirs` (each a folder of package folders, or a package
/// folder itself), skipping the folder names in `except`.
pub fn known_packages(dirs: &[&Path], except: &[&str]) -> Result<Vec<Profile>, BatchError> {
    let mut out = Vec::new();
    for dir in dirs {
        let mut folders: Vec<PathBuf> = if dir.join("manifest.json").is_file() {
            vec![dir.to_path_buf()]
        } else {
            match std::fs::read_dir(dir) {
                Ok(entries) => entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.join("manifest.json").is_file())
                    .collect(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(e) => {
                    return Err(BatchError::Known {
                        path: dir.display().to_string(),
                        message: e.to_string(),
                    })
                }
            }
        };
        folders.sort();
        for folder in folders {
            let name = folder
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.starts_with('.') || except.contains(&name.as_str()) {
                continue;
            }
            let path = folder.join("manifest.json");
            let known = |message: String| BatchError::Known {
                path: path.display().to_string(),
                message,
            };
            let text = std::fs::read_to_string(&path).map_err(|e| known(e.to_string()))?;
            let manifest: Manifest = serde_json::from_str(&text)
                .map_err(|e| known(format!("line {}, column {}: {e}", e.line(), e.column())))?;
            let mut profile = Profile::of_manifest(&manifest);
            profile.name = name;
            out.push(profile);
        }
    }
    Ok(out)
}

/// What a batch will do with a request before writing anything.
#[derive(Clone, Debug, PartialEq)]
pub enum Triage {
    /// Write it; the most similar known environment (or earlier request), when any is.
    Write {
        /// The most similar known environment or earlier request.
        nearest: Option<Nearest>,
    },
    /// Skip it: a package of its name is in the output folder, or it repeats a known one.
    Skip(Box<BatchEntry>),
}

/// What a batch does with each request (in order): a request is skipped when `out` holds a
/// package of its name (unless `plan.force`), or when a known environment or an earlier
/// request of the batch is at least `plan.dedup_threshold` similar to it.
pub fn triage(requests: &[EnvRequest], known: &Known, out: &Path, plan: &BatchPlan) -> Vec<Triage> {
    // Known environments and the requests before this one, weighed together.
    let mut pool = known.clone();
    let mut decisions = Vec::with_capacity(requests.len());
    for request in requests {
        let profile = Profile::of_request(request);
        let nearest = pool.nearest(&profile);
        pool.push(profile);
        let skip = |status, nearest| {
            Triage::Skip(Box::new(BatchEntry::skipped(
                &request.name,
                status,
                nearest,
            )))
        };
        decisions.push(if !plan.force && out.join(&request.name).exists() {
            skip(EntryStatus::Exists, None)
        } else if plan
            .dedup_threshold
            .is_some_and(|t| nearest.as_ref().is_some_and(|n| n.similarity >= t))
        {
            skip(EntryStatus::Duplicate, nearest)
        } else {
            Triage::Write { nearest }
        });
    }
    decisions
}

/// A request as stored (its part of the run's fingerprint).
fn request_json(request: &EnvRequest) -> Value {
    let source = match &request.source {
        EnvSource::Description(text) => json!({"description": text}),
        EnvSource::OpenApi(doc) => json!({"openapi": doc}),
        EnvSource::Tools(tools) => json!({"tools": tools}),
    };
    json!({
        "name": request.name,
        "source": source,
        "convention": super::convention_name(request.convention),
    })
}

/// Writes every request of `requests` with `writer` (see [`super::synthesize`]), `plan.jobs`
/// at a time, into `out`; `known` are the environments that exist already (the corpus, the
/// packages in `out`); `gate_name` says which simulator gates (part of the run's key, like the
/// writer's name and the plan); drafts go to `drafts/NAME`. Outcomes are committed to `store`
/// as they arrive; what a previous run of the same batch finished is read back, and accepted
/// packages missing from `out` are installed again.
#[allow(clippy::too_many_arguments)]
pub async fn synthesize_batch(
    writer: &dyn TextModel,
    executor: Arc<Executor>,
    simulator: &(dyn Fn(&EnvPackage) -> Arc<dyn Simulator> + Sync),
    gate_name: &str,
    requests: &[EnvRequest],
    plan: &BatchPlan,
    known: Known,
    store: &mut SynthStore,
    out: &Path,
    drafts: &Path,
    progress: &(dyn Fn(BatchEvent) + Sync),
) -> Result<BatchReport, BatchError> {
    let config = json!({
        "kind": "env-synth",
        "writer": writer.name(),
        "gate": gate_name,
        "rounds": plan.synth.rounds,
        "seed": plan.synth.seed,
        "check": format!("{:?}", plan.synth.check),
        "gate_config": format!("{:?}", plan.synth.gate),
    });
    let values: Vec<Value> = requests.iter().map(request_json).collect();
    let run = fingerprint(&config, &values);
    let resumed = store.begin(&run, &config, &values)?;
    let stored = store.tasks(&run)?;

    let mut entries: Vec<Option<BatchEntry>> = vec![None; requests.len()];
    let mut from_store = 0;
    for task in stored.iter().filter(|t| t.status == "done") {
        let name = requests.get(task.index).map_or("?", |r| r.name.as_str());
        let record = task.record.clone().unwrap_or(Value::Null);
        let entry: BatchEntry =
            serde_json::from_value(record).map_err(|e| BatchError::StoredEntry {
                index: task.index,
                name: name.to_owned(),
                message: e.to_string(),
            })?;
        if let (EntryStatus::Accepted, Some(files)) = (entry.status, &entry.files) {
            if !out.join(&entry.name).exists() {
                install(files, out, &entry.name)?;
            }
        }
        if let Some(slot) = entries.get_mut(task.index) {
            *slot = Some(entry);
            from_store += 1;
        }
    }

    // Skips are not stored: they depend on `out`, `known` and the threshold, which a rerun
    // may change.
    let mut to_write = Vec::new();
    for (index, decision) in triage(requests, &known, out, plan).into_iter().enumerate() {
        if entries[index].is_some() {
            continue;
        }
        match decision {
            Triage::Write { .. } => to_write.push(index),
            Triage::Skip(entry) => entries[index] = Some(*entry),
        }
    }
    progress(BatchEvent::Started {
        run: run.clone(),
        resumed,
        requests: requests.len(),
        to_write: to_write.len(),
    });
    for (index, entry) in entries.iter().enumerate() {
        if let Some(entry) = entry.as_ref().filter(|e| e.rounds == 0) {
            progress(BatchEvent::Finished {
                name: requests[index].name.clone(),
                entry: Some(Box::new(entry.clone())),
                error: None,
            });
        }
    }

    let next = AtomicUsize::new(0);
    let store = Mutex::new(store);
    let written: Mutex<Vec<(usize, BatchEntry)>> = Mutex::new(Vec::new());
    let failures: Mutex<Vec<(usize, BatchFailure)>> = Mutex::new(Vec::new());
    let accepted = Mutex::new(known);
    let worker = || async {
        loop {
            let k = next.fetch_add(1, Ordering::SeqCst);
            let Some(&index) = to_write.get(k) else {
                return Ok::<(), BatchError>(());
            };
            let request = &requests[index];
            let started = std::time::Instant::now();
            let round_progress = |e: RoundEvent| progress(BatchEvent::Round(e));
            let result = synthesize(
                writer,
                Arc::clone(&executor),
                simulator,
                request,
                &plan.synth,
                drafts,
                &round_progress,
            )
            .await;
            let seconds = started.elapsed().as_secs_f64();
            match result {
                Ok(outcome) => {
                    let mut entry = entry_of(outcome, seconds);
                    if let (EntryStatus::Accepted, Some(files)) = (entry.status, &entry.files) {
                        // Known are the packages there were, and those this run accepted so
                        // far (whichever of two alike finishes first is kept).
                        let profile = files
                            .files
                            .get("manifest.json")
                            .and_then(|m| serde_json::from_str::<Manifest>(m).ok())
                            .map(|m| {
                                let mut p = Profile::of_manifest(&m);
                                p.name = entry.name.clone();
                                p
                            });
                        let mut accepted = lock(&accepted);
                        let nearest = profile.as_ref().and_then(|p| accepted.nearest(p));
                        let duplicate = plan
                            .dedup_threshold
                            .is_some_and(|t| nearest.as_ref().is_some_and(|n| n.similarity >= t));
                        if duplicate {
                            entry.status = EntryStatus::Duplicate;
                        } else if let Some(p) = profile {
                            accepted.push(p);
                        }
                        entry.nearest = nearest;
                    }
                    if entry.status == EntryStatus::Accepted {
                        if let Some(files) = &entry.files {
                            let path = install(files, out, &entry.name)?;
                            entry.path = Some(path.display().to_string());
                        }
                    }
                    let record = serde_json::to_value(&entry).unwrap_or(Value::Null);
                    lock(&store).done(&run, index, &record)?;
                    progress(BatchEvent::Finished {
                        name: request.name.clone(),
                        entry: Some(Box::new(entry.clone())),
                        error: None,
                    });
                    lock(&written).push((index, entry));
                }
                Err(error) => {
                    let error = error.to_string();
                    lock(&store).failed(&run, index, &error)?;
                    progress(BatchEvent::Finished {
                        name: request.name.clone(),
                        entry: None,
                        error: Some(error.clone()),
                    });
                    lock(&failures).push((
                        index,
                        BatchFailure {
                            name: request.name.clone(),
                            error,
                        },
                    ));
                }
            }
        }
    };
    let workers: Vec<_> = (0..plan.jobs.clamp(1, to_write.len().max(1)))
        .map(|_| worker())
        .collect();
    for result in futures_util::future::join_all(workers).await {
        result?;
    }
    for (index, entry) in written.into_inner().unwrap_or_else(|p| p.into_inner()) {
        entries[index] = Some(entry);
    }
    let mut failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    failures.sort_by_key(|(index, _)| *index);
    Ok(BatchReport {
        run,
        resumed,
        entries: entries.into_iter().flatten().collect(),
        failures: failures.into_iter().map(|(_, f)| f).collect(),
        from_store,
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn install(files: &PackageFiles, out: &Path, name: &str) -> Result<PathBuf, BatchError> {
    files
        .install(out, name)
        .map_err(|error| BatchError::Install {
            path: out.join(name).display().to_string(),
            error,
        })
}

/// The entry of a finished request (before deduplication and installing).
fn entry_of(outcome: SynthOutcome, seconds: f64) -> BatchEntry {
    let last = outcome.rounds.last();
    BatchEntry {
        name: outcome.name.clone(),
        status: if outcome.accepted {
            EntryStatus::Accepted
        } else {
            EntryStatus::Refused
        },
        rounds: outcome.rounds.len(),
        findings: last.map(|r| r.findings.clone()).unwrap_or_default(),
        gate_score: outcome
            .rounds
            .iter()
            .rev()
            .find_map(|r| r.gate.as_ref().map(|g| g.score)),
        writer_usage: outcome.writer_usage,
        gate_tokens: outcome.gate_tokens,
        nearest: None,
        path: None,
        files: if outcome.accepted {
            outcome.files
        } else {
            None
        },
        seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(status: EntryStatus, prompt: u64, completion: u64, gate: u64) -> BatchEntry {
        BatchEntry {
            rounds: 1,
            writer_usage: Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
            },
            gate_tokens: gate,
            ..BatchEntry::skipped("p", status, None)
        }
    }

    #[test]
    fn the_cost_prices_the_writer_and_the_gate_apart_and_divides_by_accepted_packages() {
        let report = BatchReport {
            run: "r".into(),
            resumed: false,
            entries: vec![
                entry(EntryStatus::Accepted, 1_000_000, 200_000, 500_000),
                entry(EntryStatus::Refused, 2_000_000, 300_000, 0),
                entry(EntryStatus::Accepted, 500_000, 100_000, 1_500_000),
            ],
            failures: Vec::new(),
            from_store: 0,
        };
        let price = Price {
            input_per_mtok: 3.0,
            output_per_mtok: 15.0,
        };
        let cost = report.cost(price, 0.5);
        assert_eq!(
            cost.writer_usage,
            Usage {
                prompt_tokens: 3_500_000,
                completion_tokens: 600_000
            }
        );
        assert_eq!(cost.gate_tokens, 2_000_000);
        // 3.5 M × $3 + 0.6 M × $15 = $19.5; 2 M × $0.5 = $1.
        assert!((cost.writer_usd - 19.5).abs() < 1e-9);
        assert!((cost.gate_usd - 1.0).abs() < 1e-9);
        assert!((cost.total_usd - 20.5).abs() < 1e-9);
        assert_eq!(cost.per_accepted_usd, Some(cost.total_usd / 2.0));
    }
}
