//! Importing the Berkeley Function Calling Leaderboard's (BFCL v4) multi-turn API classes as
//! envsim packages.
//!
//! The source is an installed `bfcl_eval` package (`pip install bfcl-eval --no-deps` plus
//! `mpmath`). envsim reads its data files itself — the category's questions
//! (`data/BFCL_v4_multi_turn_<category>.json`: `id`, `initial_config`, `involved_classes`), the
//! ground truth (`data/possible_answer/...`: per turn, calls written as Python such as
//! `cd(folder='document')`) and the function docs (`data/multi_turn_func_doc/*.json`) — and
//! runs a stdlib helper (`python/bfcl_import.py`) with the user's `python3`, which imports
//! BFCL's classes, inlines their source into each package's `env.py` beside envsim's JSON
//! state adapter (`python/bfcl_adapter.py`), and records the ground truth by running every task
//! on BFCL's own objects. One package per API class: `manifest.json` (tools from BFCL's function
//! docs), one state per task that involves the class (named by the task id), `tests.json` (the
//! task's calls of that class with the observations and states BFCL gave) and
//! `trajectories.jsonl` (the same calls as call-only envsim trajectories).

use crate::envscaler::ImportError;
use crate::package::{Convention, Manifest, OutcomeRule};
use envsim_core::literal::{parse_literal_prefix, Dialect};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// envsim's JSON state adapter, appended to every generated `env.py`.
pub const ADAPTER_SOURCE: &str = include_str!("../python/bfcl_adapter.py");
/// The import helper run with the user's `python3`.
pub const HELPER_SOURCE: &str = include_str!("../python/bfcl_import.py");
/// What to install when `bfcl_eval` is missing.
pub const PIP_HINT: &str = "pip install bfcl-eval==2026.3.23 --no-deps && pip install mpmath";
/// The default category.
pub const DEFAULT_CATEGORY: &str = "base";

/// One ground-truth call, read from its Python text.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedCall {
    /// The text as BFCL wrote it.
    pub text: String,
    /// Function name.
    pub name: String,
    /// Positional arguments.
    pub args: Vec<Value>,
    /// Keyword arguments, in the order written.
    pub kwargs: Map<String, Value>,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Reads a call written as Python: `name(literal, ..., key=literal, ...)` (arguments are
/// Python literals; a keyword argument may not precede a positional one). The error says what
/// is wrong and at which byte.
pub fn parse_call(text: &str) -> Result<ParsedCall, String> {
    let trimmed = text.trim();
    let start = text.len() - text.trim_start().len();
    let name_len = trimmed
        .char_indices()
        .find(|(_, c)| !is_ident(*c))
        .map_or(trimmed.len(), |(i, _)| i);
    let name = &trimmed[..name_len];
    if !name.chars().next().is_some_and(is_ident_start) {
        return Err("a call must start with a function name".into());
    }
    let mut pos = name_len;
    let rest = |pos: usize| trimmed.get(pos..).unwrap_or_default();
    let skip_ws = |pos: usize| pos + (rest(pos).len() - rest(pos).trim_start().len());
    pos = skip_ws(pos);
    if !rest(pos).starts_with('(') {
        return Err(format!(
            "expected `(` after `{name}` at byte {}",
            start + pos
        ));
    }
    pos += 1;
    let mut args = Vec::new();
    let mut kwargs = Map::new();
    loop {
        pos = skip_ws(pos);
        if rest(pos).starts_with(')') {
            pos += 1;
            break;
        }
        // A keyword: an identifier, then `=` that is not `==`.
        let here = rest(pos);
        let ident_len = here
            .char_indices()
            .find(|(_, c)| !is_ident(*c))
            .map_or(here.len(), |(i, _)| i);
        let after_ident = here[ident_len..].trim_start();
        let keyword = (ident_len > 0
            && here.chars().next().is_some_and(is_ident_start)
            && after_ident.starts_with('=')
            && !after_ident.starts_with("=="))
        .then(|| here[..ident_len].to_owned());
        if keyword.is_some() {
            pos += ident_len + (here.len() - ident_len - after_ident.len()) + 1;
        } else if !kwargs.is_empty() {
            return Err(format!(
                "a positional argument follows a keyword argument at byte {}",
                start + pos
            ));
        }
        let (value, used) = parse_literal_prefix(rest(pos), Dialect::Python).map_err(|e| {
            format!(
                "argument {}: {} at byte {}",
                keyword.clone().unwrap_or_else(|| args.len().to_string()),
                e.kind,
                start + pos + e.offset
            )
        })?;
        pos += used;
        match keyword {
            Some(key) => {
                if kwargs.insert(key.clone(), value).is_some() {
                    return Err(format!("the keyword argument `{key}` is repeated"));
                }
            }
            None => args.push(value),
        }
        pos = skip_ws(pos);
        if rest(pos).starts_with(',') {
            pos += 1;
        } else if !rest(pos).starts_with(')') {
            return Err(if pos >= trimmed.len() {
                "the call is not closed with `)`".into()
            } else {
                format!("expected `,` or `)` at byte {}", start + pos)
            });
        }
    }
    pos = skip_ws(pos);
    if pos < trimmed.len() {
        return Err(format!(
            "trailing text after the call at byte {}",
            start + pos
        ));
    }
    Ok(ParsedCall {
        text: text.to_owned(),
        name: name.to_owned(),
        args,
        kwargs,
    })
}

/// One multi-turn task with its ground truth.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// BFCL's id (`multi_turn_base_0`).
    pub id: String,
    /// Class name → its initial config.
    pub initial_config: Map<String, Value>,
    /// The API classes the task uses, in BFCL's order.
    pub involved_classes: Vec<String>,
    /// Per turn, the ground-truth calls.
    pub turns: Vec<Vec<ParsedCall>>,
    /// Per turn, what the user says (the turn's user messages joined by new lines).
    pub questions: Vec<String>,
}

pub(crate) fn import_error(
    source: &str,
    location: impl Into<String>,
    message: impl Into<String>,
) -> ImportError {
    ImportError {
        source_name: source.to_owned(),
        location: location.into(),
        message: message.into(),
    }
}

/// Reads a category's questions and possible answers (JSON Lines or a JSON array each) into
/// tasks, in the questions' order. Every question needs exactly one answer and the reverse;
/// every call must parse.
pub fn read_tasks(
    questions: &[u8],
    questions_source: &str,
    answers: &[u8],
    answers_source: &str,
) -> Result<Vec<Task>, ImportError> {
    let records = |bytes: &[u8], source: &str| {
        envsim_core::formats::records(bytes, source)
            .map_err(|e| import_error(source, e.location.to_string(), e.message))
    };
    let mut truth: BTreeMap<String, (String, Vec<Vec<ParsedCall>>)> = BTreeMap::new();
    for record in records(answers, answers_source)? {
        let at = record.location.to_string();
        let id = record
            .value
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                import_error(answers_source, &at, "field `id` is missing or not a string")
            })?;
        let Some(Value::Array(turns)) = record.value.get("ground_truth") else {
            return Err(import_error(
                answers_source,
                &at,
                "field `ground_truth` is missing or not a list of turns",
            ));
        };
        let mut parsed = Vec::new();
        for (t, turn) in turns.iter().enumerate() {
            let Value::Array(calls) = turn else {
                return Err(import_error(
                    answers_source,
                    &at,
                    format!("field `ground_truth[{t}]` is not a list of calls"),
                ));
            };
            let mut turn_calls = Vec::new();
            for (k, call) in calls.iter().enumerate() {
                let field = format!("field `ground_truth[{t}][{k}]`");
                let text = call.as_str().ok_or_else(|| {
                    import_error(answers_source, &at, format!("{field} is not a string"))
                })?;
                turn_calls.push(parse_call(text).map_err(|e| {
                    import_error(answers_source, &at, format!("{field} {text:?}: {e}"))
                })?);
            }
            parsed.push(turn_calls);
        }
        if truth.insert(id.to_owned(), (at.clone(), parsed)).is_some() {
            return Err(import_error(
                answers_source,
                &at,
                format!("the id {id:?} is repeated"),
            ));
        }
    }
    let mut tasks = Vec::new();
    let mut seen = BTreeSet::new();
    for record in records(questions, questions_source)? {
        let at = record.location.to_string();
        let field = |name: &str| record.value.get(name);
        let id = field("id").and_then(Value::as_str).ok_or_else(|| {
            import_error(
                questions_source,
                &at,
                "field `id` is missing or not a string",
            )
        })?;
        if !seen.insert(id.to_owned()) {
            return Err(import_error(
                questions_source,
                &at,
                format!("the id {id:?} is repeated"),
            ));
        }
        let initial_config = match field("initial_config") {
            Some(Value::Object(config)) => config.clone(),
            _ => {
                return Err(import_error(
                    questions_source,
                    &at,
                    "field `initial_config` is missing or not an object",
                ))
            }
        };
        let involved_classes = match field("involved_classes") {
            Some(Value::Array(classes)) if classes.iter().all(Value::is_string) => classes
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect::<Vec<_>>(),
            _ => {
                return Err(import_error(
                    questions_source,
                    &at,
                    "field `involved_classes` is missing or not a list of class names",
                ))
            }
        };
        for (class, config) in &initial_config {
            if !config.is_object() {
                return Err(import_error(
                    questions_source,
                    &at,
                    format!("field `initial_config.{class}` is not an object"),
                ));
            }
        }
        let questions = match field("question") {
            None => Vec::new(),
            Some(Value::Array(turns)) => {
                let mut out = Vec::new();
                for (t, turn) in turns.iter().enumerate() {
                    let Some(messages) = turn.as_array() else {
                        return Err(import_error(
                            questions_source,
                            &at,
                            format!("field `question.{t}` is not a list of messages"),
                        ));
                    };
                    let said: Vec<&str> = messages
                        .iter()
                        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
                        .filter_map(|m| m.get("content").and_then(Value::as_str))
                        .collect();
                    out.push(said.join("\n"));
                }
                out
            }
            Some(_) => {
                return Err(import_error(
                    questions_source,
                    &at,
                    "field `question` is not a list of turns",
                ))
            }
        };
        let Some((_, turns)) = truth.remove(id) else {
            return Err(import_error(
                answers_source,
                "file",
                format!("no ground truth for the task {id:?} ({questions_source} {at})"),
            ));
        };
        tasks.push(Task {
            id: id.to_owned(),
            initial_config,
            involved_classes,
            turns,
            questions,
        });
    }
    if let Some((id, (at, _))) = truth.into_iter().next() {
        return Err(import_error(
            answers_source,
            at,
            format!("the task {id:?} is not in {questions_source}"),
        ));
    }
    Ok(tasks)
}

/// A BFCL parameter schema (`"type": "dict"`, `"float"`, `"tuple"`, `"any"`) as JSON Schema.
fn json_schema(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        match (key.as_str(), value) {
            ("type", Value::String(t)) => {
                let mapped = match t.as_str() {
                    "dict" => Some("object"),
                    "float" => Some("number"),
                    "tuple" => Some("array"),
                    "any" => None,
                    other => Some(other),
                };
                if let Some(mapped) = mapped {
                    out.insert(key.clone(), Value::String(mapped.to_owned()));
                }
            }
            ("properties", Value::Object(props)) => {
                out.insert(
                    key.clone(),
                    Value::Object(
                        props
                            .iter()
                            .map(|(name, p)| (name.clone(), json_schema(p)))
                            .collect(),
                    ),
                );
            }
            ("items", items) => {
                out.insert(key.clone(), json_schema(items));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out.into_iter().collect()
}

/// Reads a BFCL function-doc file (one `{name, description, parameters, response}` per line,
/// or a JSON array) into OpenAI function schemas, in file order. `parameters` is converted to
/// JSON Schema (`dict` → `object`, `float` → `number`, `tuple` → `array`, `any` → no type);
/// `response` is left out.
pub fn read_func_docs(bytes: &[u8], source: &str) -> Result<Vec<Value>, ImportError> {
    let records = envsim_core::formats::records(bytes, source)
        .map_err(|e| import_error(source, e.location.to_string(), e.message))?;
    let mut tools = Vec::new();
    let mut names = BTreeSet::new();
    for record in records {
        let at = record.location.to_string();
        let doc = &record.value;
        let name = doc
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| import_error(source, &at, "field `name` is missing or not a string"))?;
        if !names.insert(name.to_owned()) {
            return Err(import_error(
                source,
                &at,
                format!("the function {name:?} is repeated"),
            ));
        }
        let description = match doc.get("description") {
            Some(Value::String(d)) => d.clone(),
            None => String::new(),
            Some(_) => {
                return Err(import_error(
                    source,
                    &at,
                    "field `description` is not a string",
                ))
            }
        };
        let parameters = match doc.get("parameters") {
            Some(p @ Value::Object(_)) => json_schema(p),
            None => json!({"type": "object", "properties": {}}),
            Some(_) => {
                return Err(import_error(
                    source,
                    &at,
                    "field `parameters` is not an object",
                ))
            }
        };
        if parameters.get("properties").is_some_and(|p| !p.is_object()) {
            return Err(import_error(
                source,
                &at,
                "field `parameters.properties` is not an object",
            ));
        }
        tools.push(json!({"type": "function", "function": {
            "name": name, "description": description, "parameters": parameters}}));
    }
    Ok(tools)
}

/// The folder of the `bfcl_eval` package that `python` imports (no `-I`: a user install
/// counts). The error names what to install.
pub fn locate_source(python: &Path) -> Result<PathBuf, ImportError> {
    package_folder(
        python,
        "bfcl_eval",
        &format!("install it ({PIP_HINT}) or pass --source"),
    )
}

/// The folder of the package `module` that `python` imports (no `-I`: a user install counts);
/// the error gives the import's own last line and `advice`.
pub(crate) fn package_folder(
    python: &Path,
    module: &str,
    advice: &str,
) -> Result<PathBuf, ImportError> {
    let output = std::process::Command::new(python)
        .args([
            "-c",
            &format!(
                "import os, {module}; print(os.path.dirname(os.path.abspath({module}.__file__)))"
            ),
        ])
        .output()
        .map_err(|e| {
            import_error(
                &python.display().to_string(),
                "interpreter",
                format!("cannot run it: {e}"),
            )
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    match text.lines().next() {
        Some(dir) if output.status.success() && !dir.is_empty() => Ok(PathBuf::from(dir)),
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let cause = stderr.lines().last().unwrap_or_default().trim().to_owned();
            Err(import_error(
                module,
                "package",
                format!(
                    "{} cannot import {module} ({cause}): {advice}",
                    python.display()
                ),
            ))
        }
    }
}

/// What an import wrote.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct BfclSummary {
    /// The bfcl-eval version the helper found.
    pub version: Option<String>,
    /// The category imported.
    pub category: String,
    /// Tasks read.
    pub tasks: usize,
    /// Ground-truth calls read.
    pub steps: usize,
    /// The packages written.
    pub envs: Vec<BfclEnv>,
    /// Ground-truth calls that are not scripted, with why (`task: call: cause`).
    pub skipped: Vec<String>,
    /// Modules the generated code imports that the executor's isolated interpreter cannot.
    pub missing_modules: Vec<String>,
}

/// One package written.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BfclEnv {
    /// Package name (`bfcl_<module>`).
    pub name: String,
    /// BFCL's class name.
    pub class: String,
    /// Tools in the manifest.
    pub tools: usize,
    /// States (= tasks involving the class).
    pub states: usize,
    /// Scripted steps (= trajectory steps).
    pub steps: usize,
}

/// What the import needs.
#[derive(Clone, Debug)]
pub struct BfclImport {
    /// The `bfcl_eval` package folder.
    pub source: PathBuf,
    /// The category (`base`, `miss_param`, `long_context`, ...).
    pub category: String,
    /// The interpreter that runs the helper and BFCL's code.
    pub python: PathBuf,
    /// The output folder.
    pub out: PathBuf,
}

fn category_files(source: &Path, category: &str) -> Result<(PathBuf, PathBuf), ImportError> {
    let file = format!("BFCL_v4_multi_turn_{category}.json");
    let questions = source.join("data").join(&file);
    let answers = source.join("data").join("possible_answer").join(&file);
    if questions.is_file() && answers.is_file() {
        return Ok((questions, answers));
    }
    let mut known: Vec<String> = std::fs::read_dir(source.join("data").join("possible_answer"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_prefix("BFCL_v4_multi_turn_"))
                        .and_then(|n| n.strip_suffix(".json"))
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default();
    known.sort();
    Err(import_error(
        &source.display().to_string(),
        format!("category {category:?}"),
        format!(
            "no data/{file} with data/possible_answer/{file}; categories found: {}",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ),
    ))
}

fn read(path: &Path) -> Result<Vec<u8>, ImportError> {
    std::fs::read(path).map_err(|e| {
        import_error(
            &path.display().to_string(),
            "file",
            format!("cannot read: {e}"),
        )
    })
}

/// Runs the helper on `tasks` and returns its reply.
fn run_helper(options: &BfclImport, tasks: &[Task]) -> Result<Value, ImportError> {
    let helper_error = |message: String| import_error("bfcl_import.py", "helper", message);
    let dir =
        tempfile::tempdir().map_err(|e| helper_error(format!("cannot make a temp dir: {e}")))?;
    let helper = dir.path().join("bfcl_import.py");
    let adapter = dir.path().join("bfcl_adapter.py");
    std::fs::write(&helper, HELPER_SOURCE)
        .and_then(|()| std::fs::write(&adapter, ADAPTER_SOURCE))
        .map_err(|e| helper_error(format!("cannot write the helper: {e}")))?;
    let request = json!({
        "source": options.source,
        "long_context": options.category == "long_context",
        "tasks": tasks.iter().map(|t| json!({
            "id": t.id,
            "initial_config": t.initial_config,
            "involved_classes": t.involved_classes,
            "turns": t.turns.iter().map(|turn| turn.iter().map(|c| json!({
                "text": c.text, "name": c.name, "args": c.args, "kwargs": c.kwargs,
            })).collect::<Vec<_>>()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    run_json_helper(
        &options.python,
        &[&helper, &adapter],
        request.to_string(),
        "bfcl_import.py",
        &mut |_| {},
    )
}

/// Writes the helper `source` as `file_name` into a temporary folder, runs it with `request`
/// ([`run_json_helper`]) and reads its reply as `T`: what the τ²-bench and AppWorld importers
/// share.
pub(crate) fn run_helper_source<T: serde::de::DeserializeOwned>(
    python: &Path,
    file_name: &str,
    source: &str,
    request: &Value,
    progress: &mut dyn FnMut(&str),
) -> Result<T, ImportError> {
    let helper_error = |message: String| import_error(file_name, "helper", message);
    let dir =
        tempfile::tempdir().map_err(|e| helper_error(format!("cannot make a temp dir: {e}")))?;
    let helper = dir.path().join(file_name);
    std::fs::write(&helper, source)
        .map_err(|e| helper_error(format!("cannot write the helper: {e}")))?;
    let reply = run_json_helper(python, &[&helper], request.to_string(), file_name, progress)?;
    serde_json::from_value(reply)
        .map_err(|e| helper_error(format!("the reply does not have the expected shape: {e}")))
}

/// Runs a stdlib helper, `python ARGS...` (the script first), with `request` on its stdin: the
/// reply is the JSON object on its stdout, which must say `"ok": true` (else its `error` is the
/// error). Lines on stderr that start `progress: ` go to `progress` as they come; the others
/// are kept for the error when no reply comes.
pub(crate) fn run_json_helper(
    python: &Path,
    args: &[&Path],
    request: String,
    helper_name: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<Value, ImportError> {
    use std::io::{BufRead, Read};
    let helper_error = |message: String| import_error(helper_name, "helper", message);
    let mut child = std::process::Command::new(python)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| helper_error(format!("cannot run {}: {e}", python.display())))?;
    let mut stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        stdin
            .as_mut()
            .map(|s| std::io::Write::write_all(s, request.as_bytes()))
    });
    let mut stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        stdout.as_mut().map(|s| s.read_to_end(&mut bytes));
        bytes
    });
    let mut other_lines: Vec<String> = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            match line.strip_prefix("progress: ") {
                Some(text) => progress(text),
                None => other_lines.push(line),
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| helper_error(format!("cannot wait for it: {e}")))?;
    let stdout = reader.join().unwrap_or_default();
    let sent = writer.join();
    let reply: Value = match serde_json::from_slice(&stdout) {
        Ok(reply) => reply,
        Err(e) => {
            let unsent = match sent {
                Ok(Some(Err(e))) => format!("; the request was not read whole: {e}"),
                _ => String::new(),
            };
            return Err(helper_error(format!(
                "no reply ({e}); exit {status}{unsent}; stderr: {}",
                other_lines.join("\n").trim()
            )));
        }
    };
    if reply.get("ok") != Some(&Value::Bool(true)) {
        return Err(helper_error(
            reply
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("failed without a message")
                .to_owned(),
        ));
    }
    Ok(reply)
}

/// How BFCL tools signal failure: a dict observation holding an `error` key (every package's
/// `outcome`, `{"rule": "error_key", "key": "error"}`).
pub fn outcome_rule() -> OutcomeRule {
    OutcomeRule::ErrorKey {
        key: "error".to_owned(),
    }
}

pub(crate) fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if is_ident(c) || c == '-' { c } else { '_' })
        .collect()
}

pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

/// One package's files, relative path → text.
pub(crate) type Files = BTreeMap<String, String>;

/// Builds one package per API class from the helper's reply. `asked` holds the tasks as read
/// (their questions become the package's `tasks.jsonl`).
fn packages(
    options: &BfclImport,
    reply: &Value,
    asked: &BTreeMap<String, &Task>,
    summary: &mut BfclSummary,
) -> Result<Vec<(String, Files)>, ImportError> {
    let protocol = |what: &str| {
        import_error(
            "bfcl_import.py",
            "reply",
            format!("{what} is missing or malformed"),
        )
    };
    let classes = reply
        .get("classes")
        .and_then(Value::as_object)
        .ok_or_else(|| protocol("`classes`"))?;
    let tasks = reply
        .get("tasks")
        .and_then(Value::as_array)
        .ok_or_else(|| protocol("`tasks`"))?;
    let mut out = Vec::new();
    let rule = outcome_rule();
    for (class, info) in classes {
        let text = |key: &str| {
            info.get(key)
                .and_then(Value::as_str)
                .ok_or_else(|| protocol(&format!("`classes.{class}.{key}`")))
        };
        let name = format!("bfcl_{}", sanitize(text("module_file")?));
        let doc_file = text("func_doc_file").map_err(|_| {
            import_error(
                &options.source.display().to_string(),
                class.as_str(),
                "MULTI_TURN_FUNC_DOC_FILE_MAPPING names no function-doc file for this class",
            )
        })?;
        let doc_path = options
            .source
            .join("data")
            .join("multi_turn_func_doc")
            .join(doc_file);
        let tools = read_func_docs(&read(&doc_path)?, &doc_path.display().to_string())?;
        let manifest = Manifest {
            name: name.clone(),
            domain: "bfcl".into(),
            description: text("description")?.to_owned(),
            class_name: text("adapter_class")?.to_owned(),
            convention: Convention::Class,
            outcome: Some(outcome_rule()),
            clocks: Default::default(),
            effects: Default::default(),
            rules: Vec::new(),
            errors: Default::default(),
            tools,
        };
        let mut files = Files::new();
        files.insert("env.py".into(), text("code")?.to_owned());
        let manifest_value =
            serde_json::to_value(&manifest).map_err(|e| protocol(&e.to_string()))?;
        files.insert("manifest.json".into(), pretty(&manifest_value));
        // States by task id; their index is their place in file-name order.
        let mut states = BTreeMap::new();
        for task in tasks {
            let id = task
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| protocol("a task id"))?;
            if let Some(state) = task.pointer(&format!("/initial_states/{class}")) {
                states.insert(
                    format!("{}.json", sanitize(id)),
                    (id.to_owned(), state.clone()),
                );
            }
        }
        let index: BTreeMap<&str, usize> = states
            .values()
            .enumerate()
            .map(|(i, (id, _))| (id.as_str(), i))
            .collect();
        let mut cases = Vec::new();
        let mut trajectories = String::new();
        let mut agent_tasks = String::new();
        let mut steps_written = 0;
        for task in tasks {
            let id = task.get("id").and_then(Value::as_str).unwrap_or_default();
            let Some(&state_index) = index.get(id) else {
                continue;
            };
            // The user's own words, for agents (`envsim synth`): only tasks that need this
            // class alone, since the package has no other class's tools.
            if let Some(question) = asked.get(id).filter(|t| {
                t.involved_classes == [class.clone()]
                    && t.questions.first().is_some_and(|q| !q.is_empty())
            }) {
                let line = json!({
                    "id": id,
                    "env": name,
                    "instruction": question.questions[0],
                    "turns": question.questions[1..].iter().filter(|q| !q.is_empty()).collect::<Vec<_>>(),
                    "state": format!("{}.json", sanitize(id)),
                    "source": "bfcl",
                });
                agent_tasks.push_str(&line.to_string());
                agent_tasks.push('\n');
            }
            let initial = &states[&format!("{}.json", sanitize(id))].1;
            let mut steps = Vec::new();
            let mut recorded = Vec::new();
            for step in task
                .get("steps")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if step.get("class").and_then(Value::as_str) != Some(class.as_str()) {
                    continue;
                }
                let tool = step
                    .get("tool")
                    .and_then(Value::as_str)
                    .ok_or_else(|| protocol("a step's tool"))?;
                let call = step.get("text").and_then(Value::as_str).unwrap_or(tool);
                if let Some(raised) = step.get("raised").and_then(Value::as_str) {
                    // The executor reports a raised exception as an error, which a scripted
                    // step cannot expect: the case stops before it.
                    summary.skipped.push(format!(
                        "{id}: {call}: BFCL raised {raised} (this and the class's later calls in the task are not scripted)"
                    ));
                    break;
                }
                let args = step.get("kwargs").cloned().unwrap_or_else(|| json!({}));
                let observation_json = step.get("observation_json").cloned().unwrap_or(Value::Null);
                let observation = step
                    .get("observation")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let mut expect = Map::new();
                if let Some(success) = rule.classify(&observation_json) {
                    expect.insert("success".into(), Value::Bool(success));
                }
                if !observation_json.is_null() {
                    expect.insert("observation".into(), observation_json.clone());
                }
                expect.insert(
                    "state".into(),
                    json!({"": step.get("state_after").cloned().unwrap_or(Value::Null)}),
                );
                steps.push(json!({"tool": tool, "args": args, "expect": expect}));
                recorded.push(json!({"action": {"name": tool, "arguments": args}, "observation": observation}));
            }
            steps_written += steps.len();
            cases.push(json!({"name": id, "state": state_index, "steps": steps}));
            let line =
                json!({"env": name, "task_id": id, "initial_state": initial, "steps": recorded});
            trajectories.push_str(&line.to_string());
            trajectories.push('\n');
        }
        for (file, (_, state)) in &states {
            files.insert(format!("states/{file}"), pretty(state));
        }
        files.insert("tests.json".into(), pretty(&json!({"cases": cases})));
        files.insert("trajectories.jsonl".into(), trajectories);
        if !agent_tasks.is_empty() {
            files.insert("tasks.jsonl".into(), agent_tasks);
        }
        summary.envs.push(BfclEnv {
            name: name.clone(),
            class: class.clone(),
            tools: manifest.tools.len(),
            states: states.len(),
            steps: steps_written,
        });
        out.push((name, files));
    }
    for task in tasks {
        let id = task.get("id").and_then(Value::as_str).unwrap_or_default();
        for step in task
            .get("steps")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if step.get("class").is_none_or(Value::is_null) {
                summary.skipped.push(format!(
                    "{id}: {}: {}",
                    step.get("text").and_then(Value::as_str).unwrap_or_default(),
                    step.get("raised")
                        .and_then(Value::as_str)
                        .unwrap_or("no class")
                ));
            }
        }
    }
    Ok(out)
}

/// Writes `files` as the package folder `out/name`, replacing whatever was there: the package
/// is assembled in a temporary folder beside it and renamed into place, so no file of an
/// earlier import survives and a failure leaves the earlier package whole.
pub(crate) fn write_package(out: &Path, name: &str, files: &Files) -> Result<(), ImportError> {
    let fail =
        |message: String| import_error(&out.join(name).display().to_string(), "package", message);
    std::fs::create_dir_all(out)
        .map_err(|e| fail(format!("cannot create the output folder: {e}")))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}.import-"))
        .tempdir_in(out)
        .map_err(|e| fail(format!("cannot make a staging folder: {e}")))?;
    for (relative, text) in files {
        let path = staging.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| fail(format!("cannot create {relative}'s folder: {e}")))?;
        }
        std::fs::write(&path, text).map_err(|e| fail(format!("cannot write {relative}: {e}")))?;
    }
    let target = out.join(name);
    if target.exists() {
        std::fs::remove_dir_all(&target)
            .map_err(|e| fail(format!("cannot remove the earlier package: {e}")))?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, &target).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staged);
        fail(format!("cannot move the package into place: {e}"))
    })
}

/// The modules the generated code imports that the executor's interpreter cannot import.
fn missing_modules(python: &Path, reply: &Value) -> Vec<String> {
    let mut wanted = BTreeSet::new();
    for info in reply
        .get("classes")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|c| c.values())
    {
        for module in info
            .get("third_party")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(m) = module.as_str() {
                wanted.insert(m.to_owned());
            }
        }
    }
    unimportable(python, wanted)
}

/// The modules of `wanted` that the executor's interpreter (`$ENVSIM_PYTHON`, else `python`),
/// run without the user site directory as the executor runs it, cannot import.
pub(crate) fn unimportable(python: &Path, wanted: BTreeSet<String>) -> Vec<String> {
    let executor_python = std::env::var_os("ENVSIM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| python.to_owned());
    wanted
        .into_iter()
        .filter(|module| {
            !std::process::Command::new(&executor_python)
                // `-I` ignores PYTHONPATH and the user site directory, as the executor's
                // workers do (their environment is cleared and they run with `-s`).
                .args(["-I", "-c", &format!("import {module}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect()
}

/// Imports a category: reads its tasks, runs the helper and writes one package per API class
/// into `options.out` (each package folder replaced whole). Refusing a non-empty `out` is the
/// caller's decision (the CLI's `--force`).
pub fn import(options: &BfclImport) -> Result<BfclSummary, ImportError> {
    let (questions, answers) = category_files(&options.source, &options.category)?;
    let tasks = read_tasks(
        &read(&questions)?,
        &questions.display().to_string(),
        &read(&answers)?,
        &answers.display().to_string(),
    )?;
    let reply = run_helper(options, &tasks)?;
    let mut summary = BfclSummary {
        version: reply
            .get("version")
            .and_then(Value::as_str)
            .map(str::to_owned),
        category: options.category.clone(),
        tasks: tasks.len(),
        steps: tasks.iter().flat_map(|t| &t.turns).map(Vec::len).sum(),
        ..BfclSummary::default()
    };
    let asked: BTreeMap<String, &Task> = tasks.iter().map(|t| (t.id.clone(), t)).collect();
    let mut packages = packages(options, &reply, &asked, &mut summary)?;
    packages.sort_by(|a, b| a.0.cmp(&b.0));
    summary.envs.sort_by(|a, b| a.name.cmp(&b.name));
    for (name, files) in &packages {
        write_package(&options.out, name, files)?;
    }
    summary.missing_modules = missing_modules(&options.python, &reply);
    Ok(summary)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn call(text: &str) -> (String, Vec<Value>, Value) {
        let c = parse_call(text).unwrap();
        assert_eq!(c.text, text);
        (c.name, c.args, Value::Object(c.kwargs))
    }

    #[test]
    fn calls_read_as_python() {
        assert_eq!(
            call("cd(folder='document')"),
            ("cd".into(), vec![], json!({"folder": "document"}))
        );
        assert_eq!(
            call("sort('final_report.pdf')"),
            ("sort".into(), vec![json!("final_report.pdf")], json!({}))
        );
        assert_eq!(call("ls()"), ("ls".into(), vec![], json!({})));
        assert_eq!(
            call(" grep(file_name='a, b.txt',pattern=\"x)y\") "),
            (
                "grep".into(),
                vec![],
                json!({"file_name": "a, b.txt", "pattern": "x)y"})
            )
        );
        assert_eq!(
            call("place_order(order_type='Buy', symbol='AAPL', price=-1.5e2, amount=100, flag=True, x=None)"),
            (
                "place_order".into(),
                vec![],
                json!({"order_type": "Buy", "symbol": "AAPL", "price": -150.0, "amount": 100, "flag": true, "x": null})
            )
        );
        assert_eq!(
            call("mean(numbers=[1, 2.5, (3, 4)], opts={'a': [True]}, n = 3)"),
            (
                "mean".into(),
                vec![],
                json!({"numbers": [1, 2.5, [3, 4]], "opts": {"a": [true]}, "n": 3})
            )
        );
        assert_eq!(
            call("f(1, 'two', k=[])"),
            ("f".into(), vec![json!(1), json!("two")], json!({"k": []}))
        );
        // `==` in a value is not a keyword.
        assert_eq!(
            parse_call("f(a == 1)").unwrap_err(),
            "argument 0: unsupported syntax: name `a` at byte 2"
        );
    }

    #[test]
    fn bad_calls_say_what_and_where() {
        for (text, error) in [
            ("", "a call must start with a function name"),
            ("1f()", "a call must start with a function name"),
            ("cd folder='x'", "expected `(` after `cd` at byte 3"),
            ("cd(folder='x'", "the call is not closed with `)`"),
            ("cd(folder='x' 'y' 2)", "expected `,` or `)` at byte 18"),
            (
                "cd(folder=x)",
                "argument folder: unsupported syntax: name `x` at byte 10",
            ),
            (
                "cd(a=1, 2)",
                "a positional argument follows a keyword argument at byte 8",
            ),
            ("cd(a=1, a=2)", "the keyword argument `a` is repeated"),
            ("cd(a=1) + 1", "trailing text after the call at byte 8"),
            ("cd(a='x)", "argument a: unexpected end of input at byte 8"),
        ] {
            assert_eq!(parse_call(text).unwrap_err(), error, "{text:?}");
        }
    }

    const QUESTIONS: &str = r#"{"id": "multi_turn_base_0", "question": [], "initial_config": {"TicketAPI": {"ticket_counter": 3}}, "involved_classes": ["TicketAPI", "MathAPI"]}
{"id": "multi_turn_base_1", "question": [], "initial_config": {}, "involved_classes": ["MathAPI"]}
"#;
    const ANSWERS: &str = r#"{"id": "multi_turn_base_1", "ground_truth": [["add(a=1, b=2)"]]}
{"id": "multi_turn_base_0", "ground_truth": [["create_ticket(title='x')", "add(1, 2)"], []]}
"#;

    #[test]
    fn tasks_pair_questions_with_answers() {
        let tasks =
            read_tasks(QUESTIONS.as_bytes(), "q.json", ANSWERS.as_bytes(), "a.json").unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].id, "multi_turn_base_0");
        assert_eq!(tasks[0].involved_classes, ["TicketAPI", "MathAPI"]);
        assert_eq!(
            Value::Object(tasks[0].initial_config.clone()),
            json!({"TicketAPI": {"ticket_counter": 3}})
        );
        assert_eq!(tasks[0].turns.len(), 2);
        assert_eq!(tasks[0].turns[0][1].args, [json!(1), json!(2)]);
        assert!(tasks[0].turns[1].is_empty());
        assert_eq!(tasks[1].turns[0][0].name, "add");
    }

    #[test]
    fn bad_task_records_are_located() {
        let err = |q: &str, a: &str| {
            read_tasks(q.as_bytes(), "q.json", a.as_bytes(), "a.json")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(QUESTIONS, "{\"id\": \"multi_turn_base_1\", \"ground_truth\": [[\"add(a=1\"]]}\n"),
            "a.json: line 1: field `ground_truth[0][0]` \"add(a=1\": the call is not closed with `)`"
        );
        assert_eq!(
            err(
                QUESTIONS,
                "{\"id\": \"multi_turn_base_1\", \"ground_truth\": [\"add()\"]}\n"
            ),
            "a.json: line 1: field `ground_truth[0]` is not a list of calls"
        );
        assert_eq!(
            err(
                QUESTIONS,
                "{\"id\": \"multi_turn_base_1\", \"ground_truth\": [[\"add()\"]]}\n"
            ),
            "a.json: file: no ground truth for the task \"multi_turn_base_0\" (q.json line 1)"
        );
        let extra = format!("{ANSWERS}{{\"id\": \"multi_turn_base_9\", \"ground_truth\": []}}\n");
        assert_eq!(
            err(QUESTIONS, &extra),
            "a.json: line 3: the task \"multi_turn_base_9\" is not in q.json"
        );
        assert_eq!(
            err(
                "{\"id\": \"t\", \"initial_config\": [], \"involved_classes\": []}\n",
                ANSWERS
            ),
            "q.json: line 1: field `initial_config` is missing or not an object"
        );
        assert_eq!(
            err(
                "\n{\"id\": \"t\", \"initial_config\": {}, \"involved_classes\": [1]}\n",
                ANSWERS
            ),
            "q.json: line 2: field `involved_classes` is missing or not a list of class names"
        );
        assert_eq!(
            err(
                "{\"id\": \"t\", \"initial_config\": {\"A\": 1}, \"involved_classes\": []}\n",
                ANSWERS
            ),
            "q.json: line 1: field `initial_config.A` is not an object"
        );
        assert_eq!(
            err(QUESTIONS, "{\"id\": \"multi_turn_base_1\", \"ground_truth\": []}\n{\"id\": \"multi_turn_base_1\", \"ground_truth\": []}\n"),
            "a.json: line 2: the id \"multi_turn_base_1\" is repeated"
        );
        assert_eq!(
            err(QUESTIONS, "{\"id\": "),
            "a.json: line 1 column 7: EOF while parsing a value"
        );
    }

    #[test]
    fn func_docs_become_openai_schemas() {
        let docs = r#"{"name": "mean", "description": "Average.", "parameters": {"type": "dict", "properties": {"numbers": {"type": "array", "items": {"type": "float"}, "description": "n"}, "pair": {"type": "tuple", "items": {"type": "any"}}}, "required": ["numbers"]}, "response": {"type": "dict"}}
{"name": "ls", "description": "List."}
"#;
        let tools = read_func_docs(docs.as_bytes(), "math.json").unwrap();
        assert_eq!(
            tools,
            [
                json!({"type": "function", "function": {"name": "mean", "description": "Average.", "parameters": {
                    "type": "object",
                    "properties": {"numbers": {"type": "array", "items": {"type": "number"}, "description": "n"},
                                   "pair": {"type": "array", "items": {}}},
                    "required": ["numbers"]}}}),
                json!({"type": "function", "function": {"name": "ls", "description": "List.",
                    "parameters": {"type": "object", "properties": {}}}}),
            ]
        );
        let bad = |text: &str| {
            read_func_docs(text.as_bytes(), "d.json")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            bad("{\"description\": \"x\"}"),
            "d.json: line 1: field `name` is missing or not a string"
        );
        assert_eq!(
            bad("{\"name\": \"a\"}\n{\"name\": \"a\"}"),
            "d.json: line 2: the function \"a\" is repeated"
        );
        assert_eq!(
            bad("{\"name\": \"a\", \"parameters\": {\"properties\": []}}"),
            "d.json: line 1: field `parameters.properties` is not an object"
        );
        assert_eq!(
            bad("{\"name\": \"a\", \"parameters\": 3}"),
            "d.json: line 1: field `parameters` is not an object"
        );
    }

    #[test]
    fn the_outcome_rule_is_the_error_key() {
        let rule = outcome_rule();
        assert_eq!(
            rule.classify(&json!({"error": "No such file"})),
            Some(false)
        );
        assert_eq!(rule.classify(&json!({"result": 3})), Some(true));
        assert_eq!(rule.classify(&json!("error")), Some(true));
        assert_eq!(
            serde_json::to_value(&rule).unwrap(),
            json!({"rule": "error_key", "key": "error"})
        );
    }

    #[test]
    fn a_missing_category_names_the_ones_there() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data/possible_answer")).unwrap();
        for name in [
            "BFCL_v4_multi_turn_base.json",
            "BFCL_v4_multi_turn_long_context.json",
        ] {
            std::fs::write(dir.path().join("data").join(name), "").unwrap();
            std::fs::write(dir.path().join("data/possible_answer").join(name), "").unwrap();
        }
        let message = category_files(dir.path(), "nope").unwrap_err().message;
        assert_eq!(
            message,
            "no data/BFCL_v4_multi_turn_nope.json with data/possible_answer/BFCL_v4_multi_turn_nope.json; categories found: base, long_context"
        );
        assert!(category_files(dir.path(), "base").is_ok());
    }

    /// An interpreter that sees no site-packages at all (`python3 -S` behind a script in `dir`).
    pub(crate) fn python_without_site(dir: &Path) -> PathBuf {
        let wrapper = dir.join("python-without-site");
        let python = std::env::var("ENVSIM_PYTHON").unwrap_or_else(|_| "python3".into());
        std::fs::write(&wrapper, format!("#!/bin/sh\nexec {python} -S \"$@\"\n")).unwrap();
        let mut permissions = std::fs::metadata(&wrapper).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&wrapper, permissions).unwrap();
        wrapper
    }

    #[test]
    fn a_python_without_bfcl_eval_names_the_pip_command() {
        let dir = tempfile::tempdir().unwrap();
        let wrapper = python_without_site(dir.path());
        let err = locate_source(&wrapper).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "bfcl_eval: package: {} cannot import bfcl_eval (ModuleNotFoundError: No module named 'bfcl_eval'): install it (pip install bfcl-eval==2026.3.23 --no-deps && pip install mpmath) or pass --source",
                wrapper.display()
            )
        );
    }

    #[test]
    fn a_package_is_replaced_whole() {
        let out = tempfile::tempdir().unwrap();
        let stale = out.path().join("bfcl_x/states/old_task.json");
        std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
        std::fs::write(&stale, "{}").unwrap();
        let files = Files::from([
            ("env.py".to_owned(), "x = 1\n".to_owned()),
            ("states/t1.json".to_owned(), "{}\n".to_owned()),
        ]);
        write_package(out.path(), "bfcl_x", &files).unwrap();
        assert!(!stale.exists());
        assert_eq!(
            std::fs::read_to_string(out.path().join("bfcl_x/states/t1.json")).unwrap(),
            "{}\n"
        );
        let names: Vec<_> = std::fs::read_dir(out.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["bfcl_x"], "no staging folder is left");
    }
    /// The adapter alone (no BFCL): values JSON cannot hold are written, tagged, rebuilt and
    /// written again identically; bad states and unsupported values are named by location.
    #[test]
    fn the_adapter_round_trips_what_json_cannot_hold() {
        let probe = r####"import json, random
class File:
    def __init__(self, name, content=""):
        self.name = name; self.content = content; self._last_modified = 0
class Directory:
    def __init__(self, name, parent=None):
        self.name = name; self.parent = parent; self.contents = {}
class Api:
    def __init__(self):
        self._api_description = "constant"
    def load(self):
        self.ids = {3, 1, 2}
        self.frozen = frozenset(["b", "a"])
        self.pair = (1, [2, (3,)])
        self.orders = {"7": {"x": 1}, 12: "twelve"}
        self.tweets = {0: "a", 1: "b"}
        self.root = Directory("home"); self.root.contents["docs"] = Directory("docs", self.root)
        self.root.contents["docs"].contents["a.txt"] = File("a.txt", "hi")
        self.root.contents["b"] = File("renamed", "")
        self._current_dir = self.root.contents["docs"]
        self._random = random.Random(42); self._random._envsim_origin = (42, 0); self._random.randint(1, 10); self._random.random()
        self._free = random.Random(); self._free.setstate(random.Random(5).getstate())
        self._free._envsim_origin = None
    def bump(self, n: int):
        self.ids.add(n); self._random.randint(1, 10**12); return {"ids": sorted(self.ids)}
a = Api(); a.load()
c = envsim_constants(Api)
s1 = envsim_export(a, c)
free = s1.pop('private_free'); print(json.dumps(s1, sort_keys=True)); print(len(free['mt_state'][1]), free['mt_state'][1][-1]); s1['private_free'] = free
b = envsim_rebuild(Api, json.loads(json.dumps(s1)), globals())
assert b._random.getstate() == a._random.getstate() and b._current_dir is b.root.contents["docs"]
assert b.pair == a.pair and b.orders == a.orders and b.ids == a.ids and type(b.frozen) is frozenset
s2 = envsim_export(b, c)
assert s1 == s2, (s1, s2)
Env = envsim_adapter(Api, "EnvApi", s1, globals())
e = Env({}); 
for k, v in json.loads(json.dumps(s1)).items(): setattr(e, k, v)
print(json.dumps(e.bump(n=9)), json.dumps({k: v for k, v in vars(e).items() if k in ("ids", "private_random", "json_types")}, sort_keys=True))
a.bump(9); assert envsim_export(a, c) == {k: v for k, v in vars(e).items() if not k.startswith("_")}
for bad in [{"json_types": {"/ids": "set"}, "ids": 3}, {"json_types": {"/r": "random"}, "r": {"seed": 1, "words_drawn": -1}},
            {"json_types": {"/c": "ref"}, "c": "/nowhere"}, {"json_types": {"/x": "wat"}, "x": 1}, {"json_types": {"/o": "int_keys"}, "o": {"a": 1}}]:
    try: envsim_rebuild(Api, bad, globals()); print("no error", bad)
    except EnvsimStateError as exc: print("error:", exc)
class Odd:
    def __init__(self): self.k = {(1, 2): 3}
try: envsim_export(Odd(), {})
except EnvsimStateError as exc: print("error:", exc)
class Obj:
    def __init__(self): self.o = object()
try: envsim_export(Obj(), {})
except EnvsimStateError as exc: print("error:", exc)
"####;
        let script = format!("{ADAPTER_SOURCE}\n{probe}");
        let output = std::process::Command::new(
            std::env::var_os("ENVSIM_PYTHON").unwrap_or_else(|| "python3".into()),
        )
        .args(["-c", &script])
        .output()
        .expect("python3 runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = String::from_utf8(output.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                r#"{"frozen": ["a", "b"], "ids": [1, 2, 3], "json_types": {"/frozen": "frozenset", "/ids": "set", "/orders": {"int_keys": ["12"]}, "/pair": "tuple", "/pair/1/1": "tuple", "/private_current_dir": "ref", "/private_free": "random", "/private_random": "random", "/root": "fs_tree", "/tweets": "int_keys"}, "orders": {"12": "twelve", "7": {"x": 1}}, "pair": [1, [2, [3]]], "private_current_dir": "/root/contents/docs", "private_random": {"seed": 42, "words_drawn": 4}, "root": {"contents": {"b": {"content": "", "name": "renamed", "type": "file"}, "docs": {"contents": {"a.txt": {"content": "hi", "type": "file"}}, "type": "directory"}}, "name": "home", "type": "directory"}, "tweets": {"0": "a", "1": "b"}}"#,
                "625 624",
                r#"{"ids": [1, 2, 3, 9]} {"ids": [1, 2, 3, 9], "json_types": {"/frozen": "frozenset", "/ids": "set", "/orders": {"int_keys": ["12"]}, "/pair": "tuple", "/pair/1/1": "tuple", "/private_current_dir": "ref", "/private_free": "random", "/private_random": "random", "/root": "fs_tree", "/tweets": "int_keys"}, "private_random": {"seed": 42, "words_drawn": 6}}"#,
                "error: /ids: tagged set but not a list",
                "error: /r: `words_drawn` must be a non-negative integer",
                "error: /c: the reference '/nowhere' names no object of the state",
                "error: /x: unknown json_types tag 'wat'",
                "error: /o: the key 'a' is tagged integer",
                "error: /k: the dict key (1, 2) is neither a string nor an integer",
                "error: /o: a builtins.object cannot be written as JSON state",
            ]
        );
    }
}
