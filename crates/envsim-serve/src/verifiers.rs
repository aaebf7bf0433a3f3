//! verifiers environments of OpenEnv task sets: [`package`] writes the files of a small
//! pip-installable Python package for `verifiers` 0.4 (its `verifiers.v1` API) that plays a
//! task set served at `/openenv/{set}` (see [`crate::openenv`]).
//!
//! The package's taskset loads the set's tasks from `GET {base_url}/tasks`; each rollout's
//! setup starts an episode (`POST {base_url}/reset` with the task and a fresh episode id, kept
//! in the rollout's state); every tool of the environment is a `@vf.tool` of a Toolset (a typed
//! signature read from its JSON Schema, its description as the docstring) whose call is a step
//! of that episode; finalize sends the model's final message as the answer unless a tool call
//! already ended the episode; the server's reward is the rollout's reward, and its detail a
//! metric. The Python code uses the standard library (HTTP through `urllib.request`, on a
//! thread) and the verifiers API only.
//!
//! Pure: text in, text out; the CLI (`envsim export verifiers`) writes the files.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// A generated package.
#[derive(Clone, Debug, PartialEq)]
pub struct Package {
    /// Its distribution name, also the plugin id verifiers loads it by (`vf-eval NAME`).
    pub name: String,
    /// Its import name (the plugin id with `_` for `-`).
    pub module: String,
    /// Its files: path relative to the package's root → text.
    pub files: BTreeMap<String, String>,
}

/// The package playing the task set `set` (served at `{server_url}/openenv/{set}`, the
/// default of its `base_url`) whose environment has `tools` (OpenAI function schemas,
/// `{"type": "function", "function": {"name", "description", "parameters"}}`, or the bare
/// function objects).
pub fn package(set: &str, tools: &[Value], server_url: &str) -> Result<Package, String> {
    if set.is_empty()
        || !set
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "{set:?} is not a task set name (letters, digits, '_' and '-', as `envsim serve --openenv` names them)"
        ));
    }
    let server_url = server_url.trim_end_matches('/');
    let valid_url = ["http://", "https://"]
        .iter()
        .any(|scheme| server_url.len() > scheme.len() && server_url.starts_with(scheme));
    if !valid_url || server_url.chars().any(char::is_whitespace) {
        return Err(format!(
            "{server_url:?} is not the URL of an envsim server (http://HOST:PORT or https://…)"
        ));
    }
    let tools = read_tools(tools)?;
    let module = format!("envsim_{}", set.to_ascii_lowercase().replace('-', "_"));
    let name = module.replace('_', "-");
    let base_url = format!("{server_url}/openenv/{set}");
    let values = [
        ("SET", set),
        ("SET_LITERAL", &py_str(set)),
        ("MODULE", &module),
        ("NAME", &name),
        ("BASE_URL", &base_url),
        ("BASE_URL_LITERAL", &py_str(&base_url)),
        ("TOOL_METHODS", &tool_methods(&tools)),
    ];
    let files = [
        ("pyproject.toml".to_owned(), PYPROJECT),
        ("README.md".to_owned(), README),
        (format!("{module}/__init__.py"), INIT_PY),
        (format!("{module}/taskset.py"), TASKSET_PY),
        (format!("{module}/tools.py"), TOOLS_PY),
    ]
    .into_iter()
    .map(|(path, template)| (path, fill(template, &values)))
    .collect();
    Ok(Package {
        name,
        module,
        files,
    })
}

/// One tool as the generated Toolset has it.
#[derive(Clone, Debug, PartialEq)]
struct Tool {
    /// envsim's name of it (what a step's action names).
    name: String,
    /// The Python method (a safe identifier).
    method: String,
    /// The name the model sees (MCP and OpenAI rules: envsim's name when it keeps them, else
    /// the method's).
    advertised: String,
    /// Its docstring: the description, then what its parameters' schemas say beside types.
    doc: String,
    /// Required parameters first, then optional ones.
    params: Vec<Param>,
}

/// One parameter.
#[derive(Clone, Debug, PartialEq)]
struct Param {
    /// envsim's name (the key of the step's `arguments`).
    name: String,
    /// The Python parameter (a safe identifier; the MCP schema shows it).
    ident: String,
    /// Its annotation, from the JSON Schema's `type`.
    annotation: &'static str,
    required: bool,
}

/// Python's keywords (the soft ones are identifiers).
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// What a `vf.Toolset` has besides its tools (verifiers 0.4: its public attributes and the
/// instance's `config`): a tool method of one of these names would replace it. Private names
/// are never generated (no method or parameter starts with `_`).
const TOOLSET_ATTRIBUTES: &[&str] = &[
    "TOOL_PREFIX",
    "config",
    "register",
    "run",
    "server_name",
    "setup",
    "setup_task",
    "state",
];

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A name an OpenAI function and an MCP tool may both have.
fn is_tool_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `s` with every character but ASCII letters, digits and `_` made `_`.
fn identifier_chars(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// `base`, else `base_2`, `base_3`, … : the first not in `taken` (which then holds it).
fn unique(base: String, taken: &mut BTreeSet<String>) -> String {
    let mut candidate = base.clone();
    let mut n = 2;
    while taken.contains(&candidate) {
        candidate = format!("{base}_{n}");
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// Method names: a tool's own name when it is a safe method name, else made one (`tool_` in
/// front of a keyword, a Toolset attribute, or a name starting with `_` or a digit), unique.
/// Tools keeping their own names are served first, so that a made name never takes one.
fn method_names(names: &[String]) -> Vec<String> {
    let safe = |n: &str| {
        is_identifier(n)
            && !n.starts_with('_')
            && !KEYWORDS.contains(&n)
            && !TOOLSET_ATTRIBUTES.contains(&n)
    };
    let mut taken: BTreeSet<String> = names.iter().filter(|n| safe(n)).cloned().collect();
    names
        .iter()
        .map(|n| {
            if safe(n) {
                return n.clone();
            }
            let chars = identifier_chars(n);
            let base = if safe(&chars) {
                chars
            } else {
                format!("tool_{chars}")
            };
            unique(base, &mut taken)
        })
        .collect()
}

/// Parameter names: the property's own name when it is a safe Python parameter, else made
/// one (`arg` in front of a name starting with `_` or a digit — MCP refuses parameters
/// starting with `_` —, `_` after a keyword or `self`), unique within the tool.
fn param_idents(names: &[String]) -> Vec<String> {
    let safe =
        |n: &str| is_identifier(n) && !n.starts_with('_') && !KEYWORDS.contains(&n) && n != "self";
    let mut taken: BTreeSet<String> = names.iter().filter(|n| safe(n)).cloned().collect();
    names
        .iter()
        .map(|n| {
            if safe(n) {
                return n.clone();
            }
            let chars = identifier_chars(n);
            let base = if chars.is_empty() || chars.starts_with(|c: char| c.is_ascii_digit()) {
                format!("arg_{chars}")
            } else if chars.starts_with('_') {
                format!("arg{chars}")
            } else if KEYWORDS.contains(&chars.as_str()) || chars == "self" {
                format!("{chars}_")
            } else {
                chars
            };
            unique(base, &mut taken)
        })
        .collect()
}

/// The annotation of a parameter whose JSON Schema is `schema`.
fn annotation(schema: &Value) -> &'static str {
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => "str",
        Some("integer") => "int",
        Some("number") => "float",
        Some("boolean") => "bool",
        Some("array") => "list",
        Some("object") => "dict",
        _ => "typing.Any",
    }
}

/// The tools, checked: each has a name (unique), its parameters are an object schema.
fn read_tools(tools: &[Value]) -> Result<Vec<Tool>, String> {
    let mut names: Vec<String> = Vec::new();
    let mut read: Vec<(String, Vec<Param>)> = Vec::new();
    for (k, tool) in tools.iter().enumerate() {
        let function = tool.get("function").unwrap_or(tool);
        let name = match function.get("name") {
            Some(Value::String(name)) if !name.is_empty() => name.clone(),
            _ => return Err(format!("tool {}: no name (`function.name`)", k + 1)),
        };
        if names.contains(&name) {
            return Err(format!("the tool name {name:?} is used twice"));
        }
        let description = match function.get("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(d)) => d.clone(),
            Some(_) => return Err(format!("tool {name:?}: `description` is not a string")),
        };
        let empty = Map::new();
        let (properties, required) = match function.get("parameters") {
            None | Some(Value::Null) => (&empty, Vec::new()),
            Some(Value::Object(schema)) => {
                let properties = match schema.get("properties") {
                    None | Some(Value::Null) => &empty,
                    Some(Value::Object(p)) => p,
                    Some(_) => {
                        return Err(format!(
                            "tool {name:?}: `parameters.properties` is not an object"
                        ))
                    }
                };
                let required: Vec<String> = match schema.get("required") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(r)) => r
                        .iter()
                        .map(|v| v.as_str().map(str::to_owned))
                        .collect::<Option<_>>()
                        .ok_or_else(|| {
                            format!("tool {name:?}: `parameters.required` is not a list of names")
                        })?,
                    Some(_) => {
                        return Err(format!(
                            "tool {name:?}: `parameters.required` is not a list of names"
                        ))
                    }
                };
                (properties, required)
            }
            Some(_) => return Err(format!("tool {name:?}: `parameters` is not an object")),
        };
        // Required parameters first (Python wants them before those with defaults); one the
        // schema requires without describing it is still sent, as anything.
        let mut order: Vec<(String, &Value, bool)> = Vec::new();
        let any = Value::Null;
        for (p, schema) in properties {
            if required.contains(p) {
                order.push((p.clone(), schema, true));
            }
        }
        for p in &required {
            if !properties.contains_key(p) && !order.iter().any(|(n, _, _)| n == p) {
                order.push((p.clone(), &any, true));
            }
        }
        for (p, schema) in properties {
            if !required.contains(p) {
                order.push((p.clone(), schema, false));
            }
        }
        let idents = param_idents(&order.iter().map(|(n, _, _)| n.clone()).collect::<Vec<_>>());
        let mut notes: Vec<String> = Vec::new();
        let params = order
            .iter()
            .zip(idents)
            .map(|((p, schema, required), ident)| {
                if let Some(note) = param_note(&ident, schema) {
                    notes.push(note);
                }
                Param {
                    name: p.clone(),
                    ident,
                    annotation: annotation(schema),
                    required: *required,
                }
            })
            .collect();
        let mut doc = description;
        if !notes.is_empty() {
            doc = format!("{}\n\nArguments:\n{}", doc.trim_end(), notes.join("\n"))
                .trim_start()
                .to_owned();
        }
        names.push(name.clone());
        read.push((doc, params));
    }
    let methods = method_names(&names);
    Ok(names
        .into_iter()
        .zip(methods)
        .zip(read)
        .map(|((name, method), (doc, params))| Tool {
            advertised: if is_tool_name(&name) {
                name.clone()
            } else {
                method.clone()
            },
            name,
            method,
            doc,
            params,
        })
        .collect())
}

/// What a parameter's schema says that its annotation does not (the MCP schema is made from
/// the signature): its description and its allowed values, as a line of the docstring.
fn param_note(ident: &str, schema: &Value) -> Option<String> {
    let description = schema
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|d| !d.is_empty());
    let allowed = schema
        .get("enum")
        .and_then(Value::as_array)
        .filter(|values| !values.is_empty())
        .map(|values| {
            let listed: Vec<String> = values.iter().map(Value::to_string).collect();
            format!("one of {}", listed.join(", "))
        });
    match (description, allowed) {
        (None, None) => None,
        (Some(d), None) => Some(format!("- {ident}: {d}")),
        (None, Some(a)) => Some(format!("- {ident}: {a}")),
        (Some(d), Some(a)) => Some(format!("- {ident}: {d} ({a})")),
    }
}

/// A Python string literal of `s`: JSON's escapes are Python's, so any text (quotes, `\`,
/// newlines, control characters, triple quotes) stays inside the literal.
fn py_str(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// The Toolset's methods, one per tool.
fn tool_methods(tools: &[Tool]) -> String {
    let mut out = String::new();
    for tool in tools {
        let mut signature = String::from("self");
        for p in &tool.params {
            if p.required {
                signature.push_str(&format!(", {}: {}", p.ident, p.annotation));
            } else {
                signature.push_str(&format!(", {}: {} | None = None", p.ident, p.annotation));
            }
        }
        out.push_str(&format!(
            "\n    @vf.tool(name={})\n    async def {}({signature}) -> str:\n        {}\n",
            py_str(&tool.advertised),
            tool.method,
            py_str(&tool.doc),
        ));
        let given: Vec<String> = tool
            .params
            .iter()
            .filter(|p| p.required)
            .map(|p| format!("{}: {}", py_str(&p.name), p.ident))
            .collect();
        out.push_str(&format!("        _arguments = {{{}}}\n", given.join(", ")));
        for p in tool.params.iter().filter(|p| !p.required) {
            out.push_str(&format!(
                "        if {} is not None:\n            _arguments[{}] = {}\n",
                p.ident,
                py_str(&p.name),
                p.ident
            ));
        }
        out.push_str(&format!(
            "        return await _call(self.state, {}, _arguments)\n",
            py_str(&tool.name)
        ));
    }
    out
}

/// `template` with every `@@KEY@@` of `values` replaced, in one pass (a value is never read
/// for keys).
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("@@") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let known = after.find("@@").and_then(|end| {
            values
                .iter()
                .find(|(key, _)| *key == &after[..end])
                .map(|(_, value)| (*value, end))
        });
        match known {
            Some((value, end)) => {
                out.push_str(value);
                rest = &after[end + 2..];
            }
            None => {
                out.push_str("@@");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

const PYPROJECT: &str = r#"[project]
name = "@@NAME@@"
version = "0.1.0"
description = "The envsim task set @@SET@@ as a verifiers environment (generated by envsim export verifiers)."
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["verifiers"]

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["@@MODULE@@"]
"#;

const README: &str = r#"# @@NAME@@

The envsim task set `@@SET@@` as a [verifiers](https://github.com/PrimeIntellect-ai/verifiers)
environment, generated by `envsim export verifiers`: regenerate it rather than edit it.

```sh
envsim serve --openenv @@SET@@=TASKS.jsonl     # the task set, at @@BASE_URL@@
pip install -e .
vf-eval @@NAME@@ -m MODEL -n 5 --env.taskset.task.base-url @@BASE_URL@@
```

Each task of the set is a task here (`GET /tasks`). A rollout starts an episode (`/reset`);
each tool of the environment is a tool of the model, whose call is a step of the episode
(`/step`); the model's final message is the episode's answer, unless a tool call already ended
it; the reward is the server's (`envsim_reward`), its detail the metrics `reward_binary`,
`reward_partial`, `reward_checks` and `reward_failures` (the failures themselves in the
trace's `info.envsim`). The agent runs the tool-only chat loop by default (the `null`
harness); `--env.agent.harness.id` picks another. A server with a token: set `ENVSIM_TOKEN`
(or `--env.taskset.task.token`, which the run's saved config keeps).

- `@@MODULE@@/taskset.py`: the tasks, the episode's setup and finalize, the reward.
- `@@MODULE@@/tools.py`: the tools (a `vf.Toolset`) and the requests to the server.
"#;

const INIT_PY: &str = r#""""The envsim task set `@@SET@@` as a verifiers environment (generated by `envsim export verifiers`)."""

from verifiers.v1.harnesses.null import NullHarness

from @@MODULE@@.taskset import EnvsimTaskset

# The taskset, and the harness its agent runs unless told otherwise: the tool-only chat loop,
# since an envsim environment is its tools (the default `bash` harness would add a shell).
__all__ = ["EnvsimTaskset", "NullHarness"]
"#;

const TASKSET_PY: &str = r#""""The envsim task set `@@SET@@` as a verifiers taskset: its tasks, one episode per rollout,
the server's reward.

Generated by `envsim export verifiers`: regenerate it rather than edit it.
"""

import os
import uuid

import verifiers.v1 as vf

from @@MODULE@@.tools import (
    EnvsimError,
    EnvsimRefused,
    EnvsimState,
    EnvsimToolset,
    send,
    send_async,
    step,
)

TASK_SET = @@SET_LITERAL@@

# Where the task set is served (`envsim serve --openenv @@SET@@=TASKS`).
DEFAULT_BASE_URL = @@BASE_URL_LITERAL@@


class EnvsimData(vf.TaskData):
    """A task of the set: `id` is envsim's task id, `prompt` its instruction."""


class EnvsimTaskConfig(vf.TaskConfig):
    """Where the server is (`--env.taskset.task.base-url`), and its bearer token if it has one
    (`--env.taskset.task.token`, else $ENVSIM_TOKEN, which the run's saved config does not
    keep)."""

    base_url: str = DEFAULT_BASE_URL
    token: str | None = None
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


def token_of(config: EnvsimTaskConfig) -> str | None:
    """The server's bearer token: the config's, else $ENVSIM_TOKEN (`envsim serve` reads it too)."""
    return config.token or os.environ.get("ENVSIM_TOKEN") or None


class EnvsimTask(vf.Task[EnvsimData, EnvsimState, EnvsimTaskConfig]):
    @property
    def key(self) -> str:
        # envsim's task id is durable; the default content hash holds the run-local index.
        return self.data.id or self.hash

    @classmethod
    def toolsets(cls, config: EnvsimTaskConfig) -> list[vf.Toolset]:
        return [EnvsimToolset(config.tools)]

    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        """Starts the rollout's episode of this task; the tool server finds it in the state."""
        state = trace.state
        state.base_url = self.config.base_url.rstrip("/")
        state.token = token_of(self.config)
        episode_id = uuid.uuid4().hex
        try:
            await send_async(
                "POST",
                state.base_url + "/reset",
                {"task_id": self.data.id, "episode_id": episode_id},
                state.token,
            )
        except EnvsimError as e:
            raise EnvsimError(f"envsim: cannot start an episode of task {self.data.id!r}: {e}") from None
        # Only an episode that started is one: finalize ends nothing else.
        state.episode_id = episode_id

    @vf.stop
    async def episode_over(self, trace: vf.Trace) -> bool:
        """A tool call ended the episode (a terminal tool, or the tool-call budget spent)."""
        return trace.state.done

    async def finalize(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        """Ends the episode with the model's final message as the answer (unless a tool call
        ended it) and records the outcome in `trace.info["envsim"]`, which the scores read."""
        state = trace.state
        if not state.episode_id:
            return
        if not state.done:
            try:
                await step(state, {"answer": trace.last_reply})
            except EnvsimError as e:
                raise EnvsimError(f"envsim: cannot end episode {state.episode_id}: {e}") from None
        trace.info["envsim"] = {
            "episode_id": state.episode_id,
            "task_id": self.data.id,
            "finish": state.finish,
            "reward": state.reward,
            "reward_detail": state.reward_detail,
        }

    @vf.reward(weight=1.0)
    async def envsim_reward(self, trace: vf.Trace) -> float:
        """The server's reward of the episode (binary or partial, as it is configured); 0 when
        it gives none (a task without a checker)."""
        reward = trace.info.get("envsim", {}).get("reward")
        return 0.0 if reward is None else float(reward)

    @vf.metric
    async def reward_detail(self, trace: vf.Trace) -> dict[str, float]:
        """The reward's detail: binary, partial, values checked, failures."""
        detail = trace.info.get("envsim", {}).get("reward_detail")
        if not isinstance(detail, dict):
            return {}
        return {
            "reward_binary": float(detail.get("binary") or 0.0),
            "reward_partial": float(detail.get("partial") or 0.0),
            "reward_checks": float(detail.get("checks") or 0),
            "reward_failures": float(len(detail.get("failures") or [])),
        }


class EnvsimConfig(vf.TasksetConfig):
    task: EnvsimTaskConfig = EnvsimTaskConfig()


class EnvsimTaskset(vf.Taskset[EnvsimTask, EnvsimConfig]):
    def load(self) -> list[EnvsimTask]:
        """The set's tasks, as the server lists them; fails when it cannot."""
        config = self.config.task
        url = config.base_url.rstrip("/") + "/tasks"
        try:
            reply = send("GET", url, token=token_of(config))
        except EnvsimRefused as e:
            hint = " (give it in $ENVSIM_TOKEN or --env.taskset.task.token)" if e.status == 401 else ""
            raise EnvsimError(
                f"envsim: cannot load the tasks of the task set {TASK_SET!r}: {url} answered "
                f"HTTP {e.status}: {e}{hint}"
            ) from None
        except EnvsimError as e:
            raise EnvsimError(
                f"envsim: cannot load the tasks of the task set {TASK_SET!r}: {e}. "
                f"Serve them (`envsim serve --openenv {TASK_SET}=TASKS`) or point "
                f"--env.taskset.task.base-url at the server's /openenv/{TASK_SET}."
            ) from None
        tasks = reply.get("tasks") if isinstance(reply, dict) else None
        if not isinstance(tasks, list) or not all(
            isinstance(t, dict) and isinstance(t.get("id"), str) for t in tasks
        ):
            raise EnvsimError(f"envsim: {url} did not answer a task list: {str(reply)[:200]}")
        if not tasks:
            raise EnvsimError(
                f"envsim: the task set {TASK_SET!r} at {url} has no tasks "
                f"(serve it with a task file: `--openenv {TASK_SET}=TASKS`)"
            )
        return [
            EnvsimTask(EnvsimData(id=t["id"], prompt=t.get("instruction") or ""), config)
            for t in tasks
        ]
"#;

const TOOLS_PY: &str = r#""""The tools of the envsim task set `@@SET@@` as a verifiers tool server: one tool per tool of
the environment, each call a step of the rollout's episode on the envsim server.

Generated by `envsim export verifiers`: regenerate it rather than edit it.
"""

import asyncio
import json
import typing
import urllib.error
import urllib.request
import uuid

import verifiers.v1 as vf

# Seconds one request may take: a step may wait for a simulator model.
TIMEOUT = 300.0
# Tries of one step when the server is out of reach or answers 502, 503 or 504: the step
# carries an idempotency key, so a retry is answered with the step the server took, never
# taken twice.
STEP_TRIES = 5
RETRIED_STATUSES = (502, 503, 504)


class EnvsimError(RuntimeError):
    """The envsim server cannot be reached, or refused a request."""


class EnvsimRefused(EnvsimError):
    """The envsim server answered with an error (its message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class EnvsimState(vf.State):
    """The rollout's episode, shared by the task's hooks and the tool server."""

    base_url: str = ""
    token: str | None = None
    episode_id: str = ""
    done: bool = False
    finish: str | None = None
    reward: float | None = None
    reward_detail: dict | None = None


def _json_or_text(raw: bytes) -> typing.Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode("utf-8", "replace")


def _error_message(body: typing.Any) -> str:
    """What an error reply says: OpenEnv's `detail` (a text, or the fields at fault), or the
    server's own `error`."""
    detail = body.get("detail", body.get("error")) if isinstance(body, dict) else body
    if isinstance(detail, list):
        detail = "; ".join(
            str(item.get("msg", item)) if isinstance(item, dict) else str(item) for item in detail
        )
    if isinstance(detail, str) and detail:
        return detail
    return json.dumps(body)


def send(
    method: str,
    url: str,
    body: typing.Any = None,
    token: str | None = None,
    extra: dict | None = None,
) -> typing.Any:
    """One request, blocking: the reply's JSON. An error reply raises EnvsimRefused, a server
    out of reach EnvsimError."""
    headers = {"Accept": "application/json", **(extra or {})}
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = "Bearer " + token
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return _json_or_text(response.read())
    except urllib.error.HTTPError as e:
        raise EnvsimRefused(e.code, _error_message(_json_or_text(e.read()))) from None
    except (urllib.error.URLError, OSError) as e:
        raise EnvsimError(f"cannot reach {url}: {getattr(e, 'reason', e)}") from None


async def send_async(
    method: str,
    url: str,
    body: typing.Any = None,
    token: str | None = None,
    extra: dict | None = None,
) -> typing.Any:
    """`send` on a thread, so that the event loop goes on meanwhile."""
    return await asyncio.to_thread(send, method, url, body, token, extra)


async def step(state: EnvsimState, action: dict) -> dict:
    """One step of the rollout's episode: its observation. `state` keeps whether the episode
    is over, how, and its reward. The request carries an idempotency key: when the server is
    out of reach or answers 502/503/504 it is sent again (up to STEP_TRIES times, waiting
    longer each time), and the server answers a retry with the step it already took."""
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    body = {"episode_id": state.episode_id, "action": action}
    for attempt in range(STEP_TRIES):
        try:
            reply = await send_async("POST", state.base_url + "/step", body, state.token, headers)
            break
        except EnvsimRefused as e:
            if e.status not in RETRIED_STATUSES or attempt + 1 == STEP_TRIES:
                raise
        except EnvsimError:
            if attempt + 1 == STEP_TRIES:
                raise
        await asyncio.sleep(0.25 * 2**attempt)
    if not isinstance(reply, dict):
        raise EnvsimError(f"the step's reply is not a JSON object: {str(reply)[:200]}")
    observation = reply.get("observation")
    if not isinstance(observation, dict):
        observation = {}
    state.done = bool(reply.get("done"))
    state.reward = reply.get("reward")
    state.finish = observation.get("finish", state.finish)
    state.reward_detail = observation.get("reward_detail", state.reward_detail)
    return observation


async def _call(state: EnvsimState, tool: str, arguments: dict) -> str:
    """A tool call as a step of the episode: the tool's answer as JSON text, or the server's
    message when it refuses the call."""
    if not state.episode_id:
        raise EnvsimError("no episode in the rollout's state: the task's setup starts one")
    try:
        observation = await step(state, {"tool": tool, "arguments": arguments})
    except EnvsimRefused as e:
        return f"Error: {e}"
    return json.dumps(observation.get("result"), ensure_ascii=False)


class EnvsimToolset(vf.Toolset[vf.ToolsetConfig, EnvsimState]):
    """The environment's tools, under envsim's names (no server prefix)."""

    TOOL_PREFIX = None
@@TOOL_METHODS@@

if __name__ == "__main__":
    EnvsimToolset.run()
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn function(name: &str, description: &str, parameters: Value) -> Value {
        json!({"type": "function", "function": {"name": name, "description": description, "parameters": parameters}})
    }

    fn methods_of(tools: &[Value]) -> String {
        tool_methods(&read_tools(tools).unwrap())
    }

    #[test]
    fn json_schema_types_become_annotations_and_optional_arguments_are_dropped_when_none() {
        let tool = function(
            "find",
            "Find things.",
            json!({"type": "object", "properties": {
                "limit": {"type": "integer"},
                "query": {"type": "string"},
                "score": {"type": "number"},
                "exact": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "filter": {"type": "object"},
                "anything": {},
                "either": {"type": ["string", "null"]}
            }, "required": ["query", "tags"]}),
        );
        assert_eq!(
            methods_of(&[tool]),
            r#"
    @vf.tool(name="find")
    async def find(self, query: str, tags: list, limit: int | None = None, score: float | None = None, exact: bool | None = None, filter: dict | None = None, anything: typing.Any | None = None, either: typing.Any | None = None) -> str:
        "Find things."
        _arguments = {"query": query, "tags": tags}
        if limit is not None:
            _arguments["limit"] = limit
        if score is not None:
            _arguments["score"] = score
        if exact is not None:
            _arguments["exact"] = exact
        if filter is not None:
            _arguments["filter"] = filter
        if anything is not None:
            _arguments["anything"] = anything
        if either is not None:
            _arguments["either"] = either
        return await _call(self.state, "find", _arguments)
"#
        );
    }

    #[test]
    fn names_python_cannot_take_get_safe_methods_mapped_to_the_real_names() {
        let no_params = json!({"type": "object", "properties": {}});
        let names = [
            "get-ticket",
            "class",
            "config",
            "_private",
            "2fa",
            "get ticket",
            "get_ticket",
            "run",
            "tool_run",
        ];
        let tools: Vec<Value> = names
            .iter()
            .map(|n| function(n, "", no_params.clone()))
            .collect();
        let read = read_tools(&tools).unwrap();
        let seen: Vec<(&str, &str, &str)> = read
            .iter()
            .map(|t| (t.name.as_str(), t.method.as_str(), t.advertised.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                // Not an identifier: its characters made one; the model still sees its name.
                ("get-ticket", "get_ticket_2", "get-ticket"),
                ("class", "tool_class", "class"),
                ("config", "tool_config", "config"),
                ("_private", "tool__private", "_private"),
                ("2fa", "tool_2fa", "2fa"),
                // Not a tool name either: the model sees the method's.
                ("get ticket", "get_ticket_3", "get_ticket_3"),
                // Names already safe keep themselves, whatever comes before them.
                ("get_ticket", "get_ticket", "get_ticket"),
                ("run", "tool_run_2", "run"),
                ("tool_run", "tool_run", "tool_run"),
            ]
        );
        let code = tool_methods(&read);
        assert!(code.contains(
            "    @vf.tool(name=\"get-ticket\")\n    async def get_ticket_2(self) -> str:\n"
        ));
        assert!(code.contains("return await _call(self.state, \"get ticket\", _arguments)"));
    }

    #[test]
    fn parameter_names_python_cannot_take_are_renamed_and_sent_under_their_own() {
        let tool = function(
            "move",
            "",
            json!({"type": "object", "properties": {
                "from": {"type": "string"},
                "self": {"type": "string"},
                "_to": {"type": "string"},
                "2nd": {"type": "integer"},
                "a-b": {"type": "string"},
                "a_b": {"type": "string"},
                "_arguments": {"type": "string"}
            }, "required": ["from", "self", "_to", "2nd", "a-b", "a_b"]}),
        );
        assert_eq!(
            methods_of(&[tool]),
            r#"
    @vf.tool(name="move")
    async def move(self, from_: str, self_: str, arg_to: str, arg_2nd: int, a_b_2: str, a_b: str, arg_arguments: str | None = None) -> str:
        ""
        _arguments = {"from": from_, "self": self_, "_to": arg_to, "2nd": arg_2nd, "a-b": a_b_2, "a_b": a_b}
        if arg_arguments is not None:
            _arguments["_arguments"] = arg_arguments
        return await _call(self.state, "move", _arguments)
"#
        );
    }

    #[test]
    fn descriptions_are_string_literals_whatever_they_hold() {
        let description = "Say \"hi\" \\ then\nnew line \"\"\" triple ''' quotes\t\u{7}.";
        let tool = function(
            "say",
            description,
            json!({"type": "object", "properties": {
                "text": {"type": "string", "description": "What to \"say\"."},
                "tone": {"type": "string", "enum": ["calm", "loud"]}
            }, "required": ["text"]}),
        );
        let code = methods_of(&[tool]);
        let line = code.lines().nth(3).unwrap();
        assert_eq!(
            line,
            r#"        "Say \"hi\" \\ then\nnew line \"\"\" triple ''' quotes\t\u0007.\n\nArguments:\n- text: What to \"say\".\n- tone: one of \"calm\", \"loud\"""#
        );
        // A tool name with a quote is a literal too, in the decorator and in the call.
        let code = methods_of(&[function("a\"b", "", json!({}))]);
        assert!(code.contains("@vf.tool(name=\"a_b\")"), "{code}");
        assert!(code.contains("_call(self.state, \"a\\\"b\", _arguments)"));
    }

    #[test]
    fn the_package_names_its_module_after_the_set_and_its_default_url_after_the_server() {
        let tools = [function(
            "close_ticket",
            "Close.",
            json!({"type": "object", "properties": {"ticket_id": {"type": "string"}}, "required": ["ticket_id"]}),
        )];
        let p = package("help-desk", &tools, "http://127.0.0.1:8700/").unwrap();
        assert_eq!(
            (p.name.as_str(), p.module.as_str()),
            ("envsim-help-desk", "envsim_help_desk")
        );
        assert_eq!(
            p.files.keys().collect::<Vec<_>>(),
            [
                "README.md",
                "envsim_help_desk/__init__.py",
                "envsim_help_desk/taskset.py",
                "envsim_help_desk/tools.py",
                "pyproject.toml"
            ]
        );
        let pyproject = &p.files["pyproject.toml"];
        assert!(pyproject.contains("name = \"envsim-help-desk\"\n"));
        assert!(pyproject.contains("dependencies = [\"verifiers\"]\n"));
        assert!(pyproject.contains("packages = [\"envsim_help_desk\"]\n"));
        let taskset = &p.files["envsim_help_desk/taskset.py"];
        assert!(
            taskset.contains("DEFAULT_BASE_URL = \"http://127.0.0.1:8700/openenv/help-desk\"\n")
        );
        assert!(taskset.contains("TASK_SET = \"help-desk\"\n"));
        assert!(taskset.contains("from envsim_help_desk.tools import "));
        assert!(p.files["envsim_help_desk/__init__.py"]
            .contains("__all__ = [\"EnvsimTaskset\", \"NullHarness\"]\n"));
        let tools_py = &p.files["envsim_help_desk/tools.py"];
        assert!(tools_py.contains("    async def close_ticket(self, ticket_id: str) -> str:\n"));
        assert!(!tools_py.contains("@@"), "every placeholder is filled");
        for banned in ["import httpx", "import requests", "import aiohttp"] {
            assert!(
                p.files.values().all(|text| !text.contains(banned)),
                "{banned}"
            );
        }
    }

    #[test]
    fn bad_input_is_refused_with_the_reason() {
        let ok = [function("a", "", json!({}))];
        for (set, tools, url, says) in [
            ("", &ok[..], "http://h", "not a task set name"),
            ("a b", &ok[..], "http://h", "not a task set name"),
            ("a", &ok[..], "ftp://h", "not the URL of an envsim server"),
            ("a", &ok[..], "http://", "not the URL of an envsim server"),
            (
                "a",
                &[json!({"function": {}})][..],
                "http://h",
                "tool 1: no name",
            ),
            (
                "a",
                &[function("x", "", json!({})), function("x", "", json!({}))][..],
                "http://h",
                "\"x\" is used twice",
            ),
            (
                "a",
                &[function("x", "", json!([1]))][..],
                "http://h",
                "`parameters` is not an object",
            ),
            (
                "a",
                &[function(
                    "x",
                    "",
                    json!({"properties": {}, "required": [1]}),
                )][..],
                "http://h",
                "not a list of names",
            ),
            (
                "a",
                &[json!({"name": "x", "description": 3})][..],
                "http://h",
                "`description` is not a string",
            ),
        ] {
            let e = package(set, tools, url).unwrap_err();
            assert!(e.contains(says), "{set:?} {url:?}: {e}");
        }
        // A tool without parameters, and one whose schema requires an undescribed parameter.
        let p = package(
            "a",
            &[json!({"name": "x", "parameters": {"required": ["y"]}})],
            "https://h:1",
        )
        .unwrap();
        assert!(p.files["envsim_a/tools.py"].contains("async def x(self, y: typing.Any) -> str:"));
    }

    #[test]
    fn placeholders_are_filled_once_and_values_are_not_read_for_keys() {
        assert_eq!(
            fill("a @@X@@ b @@Y@@ @@nope@@ @@", &[("X", "@@Y@@"), ("Y", "y")]),
            "a @@Y@@ b y @@nope@@ @@"
        );
    }
}
