//! Environment packages: a folder with `env.py`, `manifest.json`, `states/*.json` and an optional
//! `tests.json` (see `envs/README.md`), plus checking them against the code and running their
//! scripted tests through the executor. Packages load from a folder on disk
//! ([`EnvPackage::load`], [`EnvPackage::load_all`]) or from files held in memory
//! ([`MemoryCorpus`], e.g. a corpus embedded in a binary), with the same checks and messages.

pub use crate::Convention;
use crate::{Call, EnvCode, ExecError, Executor};
pub use envsim_core::clock::{ClockSource, StateClock};
use envsim_core::diff::reference_change_count;
pub use envsim_core::outcome::OutcomeRule;
use envsim_core::pointer::JsonPointer;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// A located problem with a package.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct PackageError {
    /// The file (or folder) at fault.
    pub path: PathBuf,
    /// What is wrong, with the field when there is one.
    pub message: String,
}

/// The clock of every state: the manifest's (`clocks`, keyed by file name or its stem), else
/// derived from the state, else the default. A key that names no state, or a value that is not
/// a date or date-time, is an error at the manifest.
fn state_clocks(
    manifest: &Manifest,
    states: &[(String, Value)],
    manifest_path: &Path,
) -> Result<Vec<StateClock>, PackageError> {
    let mut explicit = std::collections::HashMap::new();
    for (key, text) in &manifest.clocks {
        let Some(index) = states
            .iter()
            .position(|(name, _)| name == key || name.strip_suffix(".json") == Some(key))
        else {
            let names: Vec<&str> = states.iter().map(|(n, _)| n.as_str()).collect();
            return Err(err(
                manifest_path,
                format!("field `clocks.{key}` names no state (the states are {names:?})"),
            ));
        };
        let seconds = envsim_core::clock::parse_time(text).ok_or_else(|| {
            err(
                manifest_path,
                format!(
                    "field `clocks.{key}` is {text:?}, not a date-time like \"2025-06-10T09:00:00Z\""
                ),
            )
        })?;
        explicit.insert(index, seconds);
    }
    Ok(states
        .iter()
        .enumerate()
        .map(|(i, (_, state))| match explicit.get(&i) {
            Some(&seconds) => StateClock {
                seconds,
                source: ClockSource::Manifest,
            },
            None => StateClock::of_state(state, crate::DEFAULT_CLOCK),
        })
        .collect())
}

fn err(path: &Path, message: impl Into<String>) -> PackageError {
    PackageError {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// `manifest.json`.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Package name (= folder name).
    pub name: String,
    /// Domain (commerce, travel, ...).
    pub domain: String,
    /// What the system is.
    pub description: String,
    /// Class to instantiate (convention `class`; absent for `database`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub class_name: String,
    /// How the code is written (`class`, the default, or `database`).
    #[serde(default, skip_serializing_if = "Convention::is_class")]
    pub convention: Convention,
    /// How observations say success or failure; the convention's default when absent (see
    /// [`Manifest::outcome_rule`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeRule>,
    /// The clock of each initial state (file name → date-time, e.g. `"00_small.json":
    /// "2025-06-10T09:00:00Z"`); a state not listed gets the clock derived from it
    /// ([`envsim_core::clock::state_clock`]), else [`crate::DEFAULT_CLOCK`].
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub clocks: std::collections::BTreeMap<String, String>,
    /// What tools do to resources (`{"close_ticket": [{"resource": "tickets", "operation":
    /// "update", "id_parameter": "ticket_id"}]}`), for the consistency audit; optional, and
    /// what running the tools shows wins over it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub effects: std::collections::BTreeMap<String, Vec<envsim_core::audit::EffectAnnotation>>,
    /// Business rules in plain language.
    #[serde(default)]
    pub rules: Vec<String>,
    /// How the suite's harness answers an exception or an invalid call (`{"exception":
    /// "Error: {message}"}`); absent: the executor's reports stand.
    #[serde(
        default,
        skip_serializing_if = "crate::rendering::ErrorRendering::is_empty"
    )]
    pub errors: crate::rendering::ErrorRendering,
    /// OpenAI function schemas, one per tool.
    pub tools: Vec<Value>,
}

impl Manifest {
    /// What an API description of the package is generated from (`envsim_spec::openapi`).
    pub fn outline(&self) -> envsim_spec::openapi::ApiOutline {
        envsim_spec::openapi::ApiOutline {
            name: self.name.clone(),
            description: self.description.clone(),
            rules: self.rules.clone(),
            tools: self.tools.clone(),
        }
    }
}

impl Manifest {
    /// The effective outcome rule: the manifest's own, or its convention's default.
    pub fn outcome_rule(&self) -> OutcomeRule {
        self.outcome
            .clone()
            .unwrap_or_else(|| self.convention.default_outcome())
    }

    /// Tool names in manifest order.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools
            .iter()
            .filter_map(|t| {
                t.pointer("/function/name")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .collect()
    }
}

/// One scripted test step.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TestStep {
    /// Tool name.
    pub tool: String,
    /// Arguments.
    #[serde(default)]
    pub args: Map<String, Value>,
    /// What must hold afterwards.
    pub expect: Expectation,
}

/// Assertions on one step.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// The outcome under the package's outcome rule (`true` success, `false` failure; a raised
    /// exception is a failure). When absent, the outcome is not asserted.
    #[serde(default)]
    pub success: Option<bool>,
    /// The exact return value.
    #[serde(default)]
    pub observation: Option<Value>,
    /// JSON Pointer → value in the state after.
    #[serde(default)]
    pub state: Map<String, Value>,
    /// JSON Pointers that must not exist after.
    #[serde(default)]
    pub absent: Vec<String>,
    /// |Δ| as the reference counts it.
    #[serde(default)]
    pub delta_count: Option<usize>,
}

/// One scripted sequence.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TestCase {
    /// What the case shows.
    pub name: String,
    /// Index of the initial state.
    pub state: usize,
    /// Steps in order.
    pub steps: Vec<TestStep>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct TestFile {
    cases: Vec<TestCase>,
}

/// A loaded environment package.
#[derive(Clone, Debug)]
pub struct EnvPackage {
    /// The package folder.
    pub dir: PathBuf,
    /// The manifest.
    pub manifest: Manifest,
    /// The code, ready for the executor.
    pub code: EnvCode,
    /// Initial states by file name, in file-name order.
    pub states: Vec<(String, Value)>,
    /// Scripted tests (empty when there is no `tests.json`).
    pub tests: Vec<TestCase>,
    /// The package's task list for agents (`tasks.jsonl`, one task per line, read by
    /// `envsim synth`), as text; `None` when there is none.
    pub tasks_jsonl: Option<String>,
    /// The effective outcome rule ([`Manifest::outcome_rule`]).
    pub outcome: OutcomeRule,
    /// The tools' argument schemas, compiled.
    pub arguments: envsim_spec::arguments::ArgumentSchemas,
    /// The clock of each initial state (same order as `states`).
    pub clocks: Vec<StateClock>,
}

/// Where package files are read from: the file system, or a [`MemoryCorpus`].
trait Files {
    /// The whole file.
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>>;
    /// Whether `path` is a file.
    fn is_file(&self, path: &Path) -> bool;
    /// The entries directly inside the folder `dir`, in no particular order.
    fn list(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>>;
}

/// The file system.
struct Disk;

impl Files for Disk {
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }

    fn list(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        Ok(std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect())
    }
}

fn read_json<T: serde::de::DeserializeOwned>(
    files: &impl Files,
    path: &Path,
) -> Result<T, PackageError> {
    let bytes = files
        .read(path)
        .map_err(|e| err(path, format!("cannot read: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| err(path, e.to_string()))
}

/// Package folders held in memory, such as a corpus embedded in a binary: file contents keyed by
/// their path relative to the corpus root, `/`-separated (`online_shop/env.py`,
/// `online_shop/states/00_small.json`). Packages load from it exactly as from a folder with
/// that layout; messages name files under `label` (`<bundled corpus>/online_shop/manifest.json:
/// ...`), which stands for the root.
#[derive(Clone, Debug, Default)]
pub struct MemoryCorpus {
    label: PathBuf,
    files: BTreeMap<String, Vec<u8>>,
}

impl MemoryCorpus {
    /// An empty corpus whose files are named under `label` in messages.
    pub fn new(label: impl Into<PathBuf>) -> Self {
        MemoryCorpus {
            label: label.into(),
            files: BTreeMap::new(),
        }
    }

    /// What stands for the root in messages.
    pub fn label(&self) -> &Path {
        &self.label
    }

    /// Adds (or replaces) the file at `path` (relative, `/`-separated).
    pub fn insert(&mut self, path: impl Into<String>, bytes: Vec<u8>) {
        self.files.insert(path.into(), bytes);
    }

    /// Every file, by relative path in byte order.
    pub fn files(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.files.iter().map(|(k, v)| (k.as_str(), v.as_slice()))
    }

    /// Names of the packages (top-level folders holding `manifest.json`), sorted.
    pub fn package_names(&self) -> Vec<String> {
        // BTreeMap keys are sorted, and `name/manifest.json` keys sort as their names do
        // among themselves.
        self.files
            .keys()
            .filter_map(|k| k.strip_suffix("/manifest.json"))
            .filter(|name| !name.is_empty() && !name.contains('/'))
            .map(str::to_owned)
            .collect()
    }

    /// Loads the package `name`, as [`EnvPackage::load`] loads a folder.
    pub fn load(&self, name: &str) -> Result<EnvPackage, PackageError> {
        EnvPackage::load_from(self, &self.label.join(name))
    }

    /// Loads every package, by name, as [`EnvPackage::load_all`] loads a folder.
    pub fn load_all(&self) -> Result<Vec<EnvPackage>, PackageError> {
        self.package_names()
            .iter()
            .map(|name| self.load(name))
            .collect()
    }

    /// The key of `path` (under the label), when it is one.
    fn key(&self, path: &Path) -> Option<String> {
        let rest = path.strip_prefix(&self.label).ok()?;
        let mut parts = Vec::new();
        for component in rest.components() {
            match component {
                Component::Normal(part) => parts.push(part.to_str()?),
                _ => return None,
            }
        }
        Some(parts.join("/"))
    }
}

impl Files for MemoryCorpus {
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        self.key(path)
            .and_then(|k| self.files.get(&k))
            .cloned()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }

    fn is_file(&self, path: &Path) -> bool {
        self.key(path).is_some_and(|k| self.files.contains_key(&k))
    }

    fn list(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let not_found = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let key = self.key(dir).ok_or_else(not_found)?;
        let prefix = if key.is_empty() { key } else { key + "/" };
        let mut entries: Vec<PathBuf> = self
            .files
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&prefix))
            .filter_map(|k| k[prefix.len()..].split('/').next())
            .map(|entry| dir.join(entry))
            .collect();
        entries.dedup();
        if entries.is_empty() {
            return Err(not_found());
        }
        Ok(entries)
    }
}

/// The JSON Schema type a Python annotation stands for, when it clearly stands for one
/// (`str`, `int`, `Optional[float]`, `list[str]`, `Dict[str, int]`, `bool | None`, …).
pub fn json_type_of_annotation(annotation: &str) -> Option<&'static str> {
    let mut a = annotation.trim().trim_start_matches("typing.");
    for wrapper in ["Optional[", "optional["] {
        if let Some(inner) = a.strip_prefix(wrapper).and_then(|r| r.strip_suffix(']')) {
            a = inner.trim();
        }
    }
    let parts: Vec<&str> = a
        .split('|')
        .map(str::trim)
        .filter(|p| *p != "None")
        .collect();
    let [single] = parts.as_slice() else {
        return None;
    };
    let head = single
        .split('[')
        .next()
        .unwrap_or_default()
        .trim()
        .trim_start_matches("typing.");
    Some(match head {
        "str" => "string",
        "int" => "integer",
        "float" => "number",
        "bool" => "boolean",
        "list" | "List" | "tuple" | "Tuple" | "set" | "Set" | "Sequence" => "array",
        "dict" | "Dict" | "Mapping" => "object",
        _ => return None,
    })
}

impl EnvPackage {
    /// Loads one package folder.
    pub fn load(dir: &Path) -> Result<EnvPackage, PackageError> {
        Self::load_from(&Disk, dir)
    }

    fn load_from(files: &impl Files, dir: &Path) -> Result<EnvPackage, PackageError> {
        let manifest: Manifest = read_json(files, &dir.join("manifest.json"))?;
        let folder = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if manifest.name != folder {
            return Err(err(
                &dir.join("manifest.json"),
                format!(
                    "field `name` is {:?} but the folder is {folder:?}",
                    manifest.name
                ),
            ));
        }
        match (manifest.convention, manifest.class_name.is_empty()) {
            (Convention::Class, true) => {
                return Err(err(
                    &dir.join("manifest.json"),
                    "field `class_name` is missing (convention `class` needs the class to instantiate)",
                ))
            }
            (Convention::Database, false) => {
                return Err(err(
                    &dir.join("manifest.json"),
                    "field `class_name` must be absent: convention `database` has no class (its tools are the module's functions)",
                ))
            }
            _ => {}
        }
        for (i, tool) in manifest.tools.iter().enumerate() {
            if tool
                .pointer("/function/name")
                .and_then(Value::as_str)
                .is_none()
            {
                return Err(err(
                    &dir.join("manifest.json"),
                    format!("field `tools.{i}.function.name` is missing"),
                ));
            }
        }
        let tool_names = manifest.tool_names();
        if let Some(tool) = manifest.effects.keys().find(|t| !tool_names.contains(t)) {
            return Err(err(
                &dir.join("manifest.json"),
                format!("field `effects.{tool}` names no tool of the manifest"),
            ));
        }
        let code_path = dir.join("env.py");
        let code = files
            .read(&code_path)
            .map_err(|e| err(&code_path, format!("cannot read: {e}")))?;
        let code = String::from_utf8(code).map_err(|_| err(&code_path, "not valid UTF-8"))?;
        let states_dir = dir.join("states");
        let mut names: Vec<PathBuf> = files
            .list(&states_dir)
            .map_err(|e| err(&states_dir, format!("cannot list: {e}")))?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        names.sort();
        let mut states = Vec::new();
        for path in names {
            let value: Value = read_json(files, &path)?;
            if !value.is_object() {
                return Err(err(&path, "a state must be a JSON object"));
            }
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            states.push((name, value));
        }
        if states.is_empty() {
            return Err(err(&states_dir, "no initial states (*.json)"));
        }
        let clocks = state_clocks(&manifest, &states, &dir.join("manifest.json"))?;
        let tests_path = dir.join("tests.json");
        let tests = if files.is_file(&tests_path) {
            let file: TestFile = read_json(files, &tests_path)?;
            for (i, case) in file.cases.iter().enumerate() {
                if case.state >= states.len() {
                    return Err(err(
                        &tests_path,
                        format!(
                            "field `cases.{i}.state` is {} but there are {} states",
                            case.state,
                            states.len()
                        ),
                    ));
                }
            }
            file.cases
        } else {
            Vec::new()
        };
        let tasks_path = dir.join("tasks.jsonl");
        let tasks_jsonl = if files.is_file(&tasks_path) {
            let bytes = files
                .read(&tasks_path)
                .map_err(|e| err(&tasks_path, format!("cannot read: {e}")))?;
            Some(
                String::from_utf8(bytes)
                    .map_err(|e| err(&tasks_path, format!("not UTF-8: {e}")))?,
            )
        } else {
            None
        };
        Ok(EnvPackage {
            dir: dir.to_owned(),
            tasks_jsonl,
            outcome: manifest.outcome_rule(),
            arguments: envsim_spec::arguments::ArgumentSchemas::compile(&manifest.tools),
            code: EnvCode::with_convention(code, manifest.class_name.clone(), manifest.convention)
                .with_errors(manifest.errors.clone()),
            manifest,
            states,
            tests,
            clocks,
        })
    }

    /// The clock of step `k` of a scripted case on initial state `index`: the state's clock,
    /// advancing [`envsim_core::clock::DEFAULT_CLOCK_STEP`] a step.
    pub fn scripted_clock(&self, index: usize, k: usize) -> f64 {
        self.clock(index).seconds + (k as f64) * envsim_core::clock::DEFAULT_CLOCK_STEP
    }

    /// The clock initial state `index` runs under.
    pub fn clock(&self, index: usize) -> StateClock {
        self.clocks.get(index).cloned().unwrap_or(StateClock {
            seconds: crate::DEFAULT_CLOCK,
            source: ClockSource::Default,
        })
    }

    /// Loads every package folder (a folder holding `manifest.json`) under `root`, by name.
    pub fn load_all(root: &Path) -> Result<Vec<EnvPackage>, PackageError> {
        let mut dirs: Vec<PathBuf> = Disk
            .list(root)
            .map_err(|e| err(root, format!("cannot list environments: {e}")))?
            .into_iter()
            .filter(|p| p.join("manifest.json").is_file())
            .collect();
        dirs.sort();
        dirs.iter().map(|d| EnvPackage::load(d)).collect()
    }

    /// Checks the manifest against the code: every public method has exactly one tool with the
    /// same required and optional parameters, and every tool has a method. Returns the problems.
    pub async fn check(&self, executor: &Executor) -> Result<Vec<String>, ExecError> {
        let methods = executor.describe(&self.code).await?;
        // What a tool is in the code: a method of the class, or a function over the database
        // (whose database parameter `describe` leaves out).
        let kind = match self.manifest.convention {
            Convention::Class => "method",
            Convention::Database => "function",
        };
        // A tool whose parameters are not a JSON Schema: its calls go unchecked.
        let mut problems: Vec<String> = self
            .arguments
            .problems()
            .into_iter()
            .map(|(tool, why)| {
                format!("tool {tool}: its parameters are {why}; its arguments are not checked")
            })
            .collect();
        let methods = methods.as_array().cloned().unwrap_or_default();
        let tools: Vec<&Value> = self.manifest.tools.iter().collect();
        for method in &methods {
            let name = method
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let matching: Vec<&&Value> = tools
                .iter()
                .filter(|t| t.pointer("/function/name").and_then(Value::as_str) == Some(name))
                .collect();
            let Some(tool) = matching.first() else {
                problems.push(format!("{kind} `{name}` has no tool in the manifest"));
                continue;
            };
            if matching.len() > 1 {
                problems.push(format!("tool `{name}` is listed {} times", matching.len()));
            }
            let params = method
                .get("params")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let props = tool
                .pointer("/function/parameters/properties")
                .and_then(Value::as_object);
            let required: Vec<&str> = tool
                .pointer("/function/parameters/required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for p in &params {
                let pname = p.get("name").and_then(Value::as_str).unwrap_or_default();
                let is_required = p.get("required").and_then(Value::as_bool).unwrap_or(false);
                if !props.is_some_and(|m| m.contains_key(pname)) {
                    problems.push(format!(
                        "tool `{name}`: parameter `{pname}` is missing from the schema"
                    ));
                } else if is_required != required.contains(&pname) {
                    problems.push(format!(
                        "tool `{name}`: parameter `{pname}` is {} in the code but {} in the schema",
                        if is_required { "required" } else { "optional" },
                        if required.contains(&pname) {
                            "required"
                        } else {
                            "optional"
                        }
                    ));
                }
                let annotation = p.get("annotation").and_then(Value::as_str);
                let declared = props
                    .and_then(|m| m.get(pname))
                    .and_then(|schema| schema.get("type"))
                    .and_then(Value::as_str);
                if let (Some(expected), Some(declared)) =
                    (annotation.and_then(json_type_of_annotation), declared)
                {
                    // JSON Schema's "number" also admits integers.
                    let compatible =
                        expected == declared || (expected == "integer" && declared == "number");
                    if !compatible {
                        problems.push(format!(
                            "tool `{name}`: parameter `{pname}` is annotated {:?} in the code but typed {declared:?} in the schema",
                            annotation.unwrap_or_default()
                        ));
                    }
                }
            }
            if let Some(props) = props {
                for key in props.keys() {
                    if !params
                        .iter()
                        .any(|p| p.get("name").and_then(Value::as_str) == Some(key))
                    {
                        problems.push(format!(
                            "tool `{name}`: schema parameter `{key}` is not in the code"
                        ));
                    }
                }
            }
        }
        for tool in self.manifest.tool_names() {
            if !methods
                .iter()
                .any(|m| m.get("name").and_then(Value::as_str) == Some(tool.as_str()))
            {
                problems.push(format!("tool `{tool}` has no public {kind} in the code"));
            }
        }
        Ok(problems)
    }

    /// Runs the scripted tests; returns one message per failed assertion (empty: all passed).
    ///
    /// `expect.success`, when given, is checked with the package's outcome rule ([`Self::outcome`]):
    /// a step whose observation the rule leaves undetermined fails it either way. A step that
    /// raises passes only with `"success": false`; its other assertions then apply to the state
    /// the code left (an `observation` cannot match), and the chain continues from that state.
    /// Any other execution error ends the case.
    pub async fn run_tests(&self, executor: &Executor) -> Vec<String> {
        let mut failures = Vec::new();
        for case in &self.tests {
            let mut state = self.states[case.state].1.clone();
            for (k, step) in case.steps.iter().enumerate() {
                let at = format!(
                    "{} / case {:?} / step {k} ({})",
                    self.manifest.name, case.name, step.tool
                );
                // Each step draws its own seed (distinct across the chain; see `default_seed`)
                // and runs at the state's clock, five minutes after the step before.
                let clock = self.scripted_clock(case.state, k);
                let call = Call {
                    seed: crate::default_seed(&state, &step.tool, &step.args),
                    clock,
                    ..Call::new(&self.code, &step.tool, &step.args, &state)
                };
                let expect = &step.expect;
                // (observation as JSON, its str(), the state after); `None` for an exception.
                let (observation, state_after) = match executor.call(&call).await {
                    Ok(o) => {
                        failures.extend(
                            stamps_before_the_past(executor, &call, &o, &state)
                                .await
                                .into_iter()
                                .map(|problem| format!("{at}: {problem}")),
                        );
                        (Some((o.observation_json, o.observation)), o.state_after)
                    }
                    Err(e @ ExecError::Exception { .. }) if expect.success == Some(false) => {
                        let after = e.state_after().cloned().unwrap_or_else(|| state.clone());
                        (None, after)
                    }
                    Err(e) => {
                        failures.push(format!("{at}: {e}"));
                        break;
                    }
                };
                if let Some(expected) = expect.success {
                    let actual = match &observation {
                        Some((json, _)) => self.outcome.classify(json),
                        None => self.outcome.classify_raised(),
                    };
                    if actual != Some(expected) {
                        let shown = observation.as_ref().map_or("", |(_, text)| text.as_str());
                        failures.push(format!(
                            "{at}: outcome is {} under the {}, expected {}: {shown}",
                            match actual {
                                Some(true) => "success",
                                Some(false) => "failure",
                                None => "undetermined",
                            },
                            self.outcome.describe(),
                            if expected { "success" } else { "failure" },
                        ));
                    }
                }
                if let Some(obs) = &expect.observation {
                    match &observation {
                        Some((json, _)) if json == obs => {}
                        Some((json, _)) => {
                            failures.push(format!("{at}: observation {json} != expected {obs}"))
                        }
                        None => failures.push(format!(
                            "{at}: the tool raised, so there is no observation to be {obs}"
                        )),
                    }
                }
                for (pointer, expected) in &expect.state {
                    match JsonPointer::parse(pointer) {
                        Ok(p) => match p.get(&state_after) {
                            Some(actual) if actual == expected => {}
                            actual => failures.push(format!(
                                "{at}: state {pointer} is {actual:?}, expected {expected}"
                            )),
                        },
                        Err(e) => failures.push(format!("{at}: bad pointer {pointer:?}: {e}")),
                    }
                }
                for pointer in &expect.absent {
                    if JsonPointer::parse(pointer)
                        .ok()
                        .and_then(|p| p.get(&state_after).cloned())
                        .is_some()
                    {
                        failures.push(format!("{at}: {pointer} should not exist"));
                    }
                }
                if let Some(expected) = expect.delta_count {
                    let actual = reference_change_count(&state, &state_after);
                    if actual != expected {
                        failures.push(format!("{at}: |Δ| is {actual}, expected {expected}"));
                    }
                }
                state = state_after;
            }
        }
        failures
    }
}

/// What a call stamped with its clock that lies before the latest event `state` records up to
/// that clock: the call runs again under a later clock ([`crate::PROBE_CLOCK_SHIFT`]), and every time in a field that
/// changed (`/observation/...`, `/state/...`; see [`envsim_core::clock::stamps_in`]) must not
/// be earlier than that event. One line per stamp; empty when the twin call cannot run.
async fn stamps_before_the_past(
    executor: &Executor,
    call: &Call<'_>,
    outcome: &crate::CallOutcome,
    state: &Value,
) -> Vec<String> {
    use envsim_core::clock::{format_time, latest_event_before, stamps_in};
    // Events the state records after the clock contradict it; `env test` warns about those
    // states on their own (`EnvPackage::clock_warnings`).
    let Some(latest) = latest_event_before(state, call.clock + 1e-3) else {
        return Vec::new();
    };
    let Ok(later) = executor
        .call(&Call {
            clock: call.clock + crate::PROBE_CLOCK_SHIFT,
            ..call.clone()
        })
        .await
    else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    for path in outcome.differences(&later) {
        let (root, rest) = match path.strip_prefix("/observation") {
            Some(rest) => (&outcome.observation_json, rest),
            None => match path.strip_prefix("/state") {
                Some(rest) => (&outcome.state_after, rest),
                None => continue,
            },
        };
        let Some(value) = JsonPointer::parse(rest).ok().and_then(|p| p.get(root)) else {
            continue;
        };
        for (inner, seconds) in stamps_in(value) {
            // A second of slack for stamps rounded down by the code.
            if seconds < latest.seconds - 1.0 {
                problems.push(format!(
                    "{path}{inner} is stamped {}, before the state's latest event {} at {} (the call ran at {})",
                    format_time(seconds),
                    latest.text,
                    latest.pointer,
                    format_time(call.clock)
                ));
            }
        }
    }
    problems
}

impl EnvPackage {
    /// States that record past events after their own clock (they contradict themselves: a
    /// tool's new records will be older than those), one line each.
    pub fn clock_warnings(&self) -> Vec<String> {
        self.states
            .iter()
            .enumerate()
            .filter_map(|(i, (name, state))| {
                let clock = self.clock(i);
                let latest = envsim_core::clock::latest_event(state)?;
                (latest.seconds >= clock.seconds + 1.0).then(|| {
                    format!(
                        "state {name} records {} {} after its clock {}",
                        latest.pointer,
                        latest.text,
                        clock.describe()
                    )
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::json_type_of_annotation as t;
    use super::{EnvPackage, MemoryCorpus};
    use std::path::Path;

    /// Two packages plus stray files, as (relative path, contents).
    fn files() -> Vec<(&'static str, String)> {
        let manifest = |name: &str| {
            format!(
                r#"{{"name": "{name}", "domain": "test", "description": "d", "class_name": "C",
                    "tools": [{{"type": "function", "function": {{"name": "get"}}}}]}}"#
            )
        };
        let code = "class C:\n    pass\n";
        [
            ("README.md", "# corpus"),
            ("b_env/env.py", code),
            ("b_env/states/10.json", r#"{"n": 10}"#),
            ("b_env/states/02.json", r#"{"n": 2}"#),
            ("b_env/states/notes.txt", "not a state"),
            (
                "b_env/tests.json",
                r#"{"cases": [{"name": "c", "state": 1, "steps": []}]}"#,
            ),
            ("a-env/env.py", code),
            ("a-env/states/0.json", "{}"),
            ("docs/notes.md", "not a package"),
        ]
        .into_iter()
        .map(|(path, text)| (path, text.to_owned()))
        .chain([
            ("b_env/manifest.json", manifest("b_env")),
            ("a-env/manifest.json", manifest("a-env")),
        ])
        .collect()
    }

    fn summary(p: &EnvPackage) -> (String, String, Vec<(String, serde_json::Value)>, usize) {
        (
            p.manifest.name.clone(),
            p.code.code.to_string(),
            p.states.clone(),
            p.tests.len(),
        )
    }

    #[test]
    fn a_memory_corpus_loads_as_the_same_folder_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let mut memory = MemoryCorpus::new("<test corpus>");
        for (path, text) in files() {
            let on_disk = dir.path().join(path);
            std::fs::create_dir_all(on_disk.parent().unwrap()).unwrap();
            std::fs::write(on_disk, &text).unwrap();
            memory.insert(path, text.as_bytes().to_vec());
        }
        let disk: Vec<_> = EnvPackage::load_all(dir.path()).unwrap();
        let mem: Vec<_> = memory.load_all().unwrap();
        assert_eq!(memory.package_names(), ["a-env", "b_env"]);
        assert_eq!(
            disk.iter().map(summary).collect::<Vec<_>>(),
            mem.iter().map(summary).collect::<Vec<_>>()
        );
        let b = &mem[1];
        assert_eq!(b.states[0].0, "02.json");
        assert_eq!(b.tests.len(), 1);
        assert_eq!(b.dir, Path::new("<test corpus>/b_env"));
        assert!(mem[0].tests.is_empty());
    }

    #[test]
    fn a_manifest_s_error_rendering_reaches_the_code_and_a_misspelt_one_is_refused() {
        let mut memory = MemoryCorpus::new("<test corpus>");
        for (path, text) in files() {
            memory.insert(path, text.as_bytes().to_vec());
        }
        memory.insert(
            "c/manifest.json",
            br#"{"name": "c", "domain": "t", "description": "d", "class_name": "C",
                 "errors": {"exception": "Error: {message}"}, "tools": []}"#
                .to_vec(),
        );
        memory.insert("c/env.py", b"class C:\n    pass\n".to_vec());
        memory.insert("c/states/0.json", b"{}".to_vec());
        let package = memory.load("c").unwrap();
        assert_eq!(
            package.code.errors.exception("ValueError: no").as_deref(),
            Some("Error: no")
        );
        assert_eq!(package.code.errors.invalid_call("x"), None);
        // Written back only when set.
        let text = serde_json::to_string(&package.manifest).unwrap();
        assert!(
            text.contains(r#""errors":{"exception":"Error: {message}"}"#),
            "{text}"
        );
        assert!(
            !serde_json::to_string(&memory.load("b_env").unwrap().manifest)
                .unwrap()
                .contains("errors")
        );
        memory.insert(
            "c/manifest.json",
            br#"{"name": "c", "domain": "t", "description": "d", "class_name": "C",
                 "errors": {"exceptoin": "Error"}, "tools": []}"#
                .to_vec(),
        );
        let error = memory.load("c").unwrap_err().to_string();
        assert!(error.contains("unknown field `exceptoin`"), "{error}");
    }

    #[test]
    fn memory_corpus_errors_name_the_file_under_the_label() {
        let mut memory = MemoryCorpus::new("<test corpus>");
        for (path, text) in files() {
            if path != "b_env/states/02.json" {
                memory.insert(path, text.as_bytes().to_vec());
            }
        }
        memory.insert("b_env/states/02.json", b"[1]".to_vec());
        let error = memory.load("b_env").unwrap_err();
        assert_eq!(
            error.to_string(),
            "<test corpus>/b_env/states/02.json: a state must be a JSON object"
        );
        let error = memory.load("nope").unwrap_err();
        assert_eq!(error.path, Path::new("<test corpus>/nope/manifest.json"));
        memory.insert("c/manifest.json", br#"{"name": "c"}"#.to_vec());
        let error = memory.load("c").unwrap_err().to_string();
        assert!(
            error.starts_with("<test corpus>/c/manifest.json: missing field"),
            "{error}"
        );
        // The first broken package stops loading them all.
        assert_eq!(
            memory.load_all().unwrap_err().path,
            Path::new("<test corpus>/b_env/states/02.json")
        );
    }

    /// A one-package corpus whose manifest has `extra` fields (a JSON object's members).
    fn with_manifest(extra: &str) -> MemoryCorpus {
        let mut memory = MemoryCorpus::new("<test corpus>");
        memory.insert(
            "p/manifest.json",
            format!(
                r#"{{"name": "p", "domain": "test", "description": "d", {extra}
                    "tools": [{{"type": "function", "function": {{"name": "get"}}}}]}}"#
            )
            .into_bytes(),
        );
        memory.insert("p/env.py", b"def get(data):\n    return 'ok'\n".to_vec());
        memory.insert("p/states/0.json", b"{}".to_vec());
        memory
    }

    #[test]
    fn the_outcome_rule_is_the_manifests_or_the_conventions_default() {
        use super::{Convention, OutcomeRule};
        use serde_json::json;
        let class = with_manifest(r#""class_name": "C","#).load("p").unwrap();
        assert_eq!(class.manifest.convention, Convention::Class);
        assert_eq!(class.manifest.outcome, None);
        assert_eq!(class.outcome, OutcomeRule::success_key());
        let database = with_manifest(r#""convention": "database","#)
            .load("p")
            .unwrap();
        assert_eq!(database.manifest.convention, Convention::Database);
        assert_eq!(database.outcome, OutcomeRule::error_prefix());
        assert_eq!(database.outcome.classify(&json!("Error: no")), Some(false));
        let explicit = with_manifest(
            r#""convention": "database", "outcome": {"rule": "pattern", "failure": "^(Error|Fail)"},"#,
        )
        .load("p")
        .unwrap();
        assert_eq!(explicit.outcome.classify(&json!("Failed: no")), Some(false));
        assert_eq!(explicit.outcome.classify(&json!("Done")), Some(true));
        let status = with_manifest(
            r#""class_name": "C", "outcome": {"rule": "status_field", "field": "status", "success": ["ok"]},"#,
        )
        .load("p")
        .unwrap();
        assert_eq!(
            status.outcome.classify(&json!({"status": "ok"})),
            Some(true)
        );
        assert_eq!(status.outcome.classify(&json!({"success": true})), None);
        // Written manifests leave the defaults out and keep what was given.
        let written = serde_json::to_value(&class.manifest).unwrap();
        assert_eq!(written.get("convention"), None);
        assert_eq!(written.get("outcome"), None);
        let written = serde_json::to_value(&explicit.manifest).unwrap();
        assert_eq!(written["convention"], "database");
        assert_eq!(
            written["outcome"],
            json!({"rule": "pattern", "failure": "^(Error|Fail)"})
        );
        assert_eq!(written.get("class_name"), None);
    }

    #[test]
    fn bad_outcome_rules_and_conventions_are_located_manifest_errors() {
        let error = |extra: &str| with_manifest(extra).load("p").unwrap_err().to_string();
        let bad_regex =
            error(r#""class_name": "C", "outcome": {"rule": "pattern", "failure": "Error ("},"#);
        assert!(
            bad_regex.starts_with(
                "<test corpus>/p/manifest.json: invalid failure pattern \"Error (\": regex parse error"
            ),
            "{bad_regex}"
        );
        assert!(bad_regex.ends_with("at line 1 column 123"), "{bad_regex}");
        assert_eq!(
            error(r#""class_name": "C", "outcome": {"rule": "error_prefix"},"#),
            "<test corpus>/p/manifest.json: missing field `prefix` at line 1 column 106"
        );
        assert_eq!(
            error(r#""convention": "functions","#),
            "<test corpus>/p/manifest.json: unknown variant `functions`, expected `class` or \
             `database` at line 1 column 77"
        );
        assert_eq!(
            error(r#""convention": "class","#),
            "<test corpus>/p/manifest.json: field `class_name` is missing (convention `class` \
             needs the class to instantiate)"
        );
        assert_eq!(
            error(r#""convention": "database", "class_name": "C","#),
            "<test corpus>/p/manifest.json: field `class_name` must be absent: convention \
             `database` has no class (its tools are the module's functions)"
        );
        assert_eq!(
            error(r#""class_name": "C", "outcomes": null,"#),
            "<test corpus>/p/manifest.json: unknown field `outcomes`, expected one of `name`, \
             `domain`, `description`, `class_name`, `convention`, `outcome`, `clocks`, `effects`, `rules`, \
             `errors`, `tools` \
             at line 1 column 81"
        );
    }

    #[test]
    fn annotations_map_to_json_types() {
        assert_eq!(t("str"), Some("string"));
        assert_eq!(t("Optional[int]"), Some("integer"));
        assert_eq!(t("typing.Optional[float]"), Some("number"));
        assert_eq!(t("bool | None"), Some("boolean"));
        assert_eq!(t("List[str]"), Some("array"));
        assert_eq!(t("dict[str, int]"), Some("object"));
        assert_eq!(t("int | str"), None, "a union is not one type");
        assert_eq!(t("Any"), None);
        assert_eq!(t("MyRecord"), None);
    }
}
