//! The specification an audit checks calls and responses against: an API description given
//! with `--spec` (OpenAPI 3.0/3.1 in JSON or YAML, or OpenAI tool schemas), the tools a
//! transcript declares, or an environment package's manifest. Every schema is compiled once.

use anyhow::{Context, Result};
use envsim_core::apispec::{parse_spec, ApiSpec};
use envsim_core::audit::EffectAnnotation;
use envsim_exec::arguments::ArgumentSchemas;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Compiled checks of one specification.
pub struct SpecChecks {
    /// What it came from (for reports).
    pub name: String,
    tools: BTreeSet<String>,
    arguments: ArgumentSchemas,
    /// Per tool: the schema of its successful response (OpenAPI: the first 2xx response that
    /// declares one).
    responses: ArgumentSchemas,
    /// Per tool: the HTTP statuses it declares, when the description has responses.
    statuses: BTreeMap<String, envsim_core::apispec::ToolSpec>,
    /// What each tool does to resources, from the OpenAPI method and path.
    pub effects: BTreeMap<String, Vec<EffectAnnotation>>,
}

/// One way a step breaks the specification.
pub struct SpecProblem {
    /// `unknown_tool`, `argument_schema`, `response_schema` or `undeclared_status`.
    pub kind: &'static str,
    /// What is wrong, in words.
    pub explanation: String,
}

impl SpecChecks {
    /// Reads an API description: YAML when the file name ends in `.yaml`/`.yml`, else JSON.
    pub fn from_file(path: &Path) -> Result<SpecChecks> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let yaml = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
        let doc: Value = if yaml {
            yaml_serde::from_str(&text)
                .with_context(|| format!("{}: not valid YAML", path.display()))?
        } else {
            serde_json::from_str(&text)
                .with_context(|| format!("{}: not valid JSON", path.display()))?
        };
        let spec = parse_spec(&doc).map_err(|e| {
            anyhow::anyhow!(
                "{}: at {}: {}",
                path.display(),
                if e.pointer.is_empty() {
                    "the top"
                } else {
                    &e.pointer
                },
                e.message
            )
        })?;
        Ok(SpecChecks::from_spec(&spec, path.display().to_string()))
    }

    /// The checks of a parsed description.
    pub fn from_spec(spec: &ApiSpec, name: String) -> SpecChecks {
        let arguments = ArgumentSchemas::from_schemas(
            spec.tools
                .values()
                .map(|t| (t.name.clone(), t.parameters.clone())),
        );
        let responses = ArgumentSchemas::from_schemas(spec.tools.values().filter_map(|t| {
            let (_, response) = t
                .responses
                .iter()
                .filter(|(status, r)| status.starts_with('2') && r.schema.is_some())
                .min_by_key(|(status, _)| status.as_str())?;
            Some((t.name.clone(), response.schema.clone()?))
        }));
        SpecChecks {
            name,
            tools: spec.tools.keys().cloned().collect(),
            arguments,
            responses,
            statuses: spec
                .tools
                .iter()
                .filter(|(_, t)| !t.responses.is_empty())
                .map(|(n, t)| (n.clone(), t.clone()))
                .collect(),
            effects: spec
                .tools
                .iter()
                .map(|(n, t)| (n.clone(), t.effects()))
                .filter(|(_, e)| !e.is_empty())
                .collect(),
        }
    }

    /// The checks of OpenAI tool schemas (a transcript's `tools`, a manifest's).
    pub fn from_tools(tools: &[Value], name: String) -> Result<SpecChecks> {
        let spec = parse_spec(&Value::Array(tools.to_vec()))
            .map_err(|e| anyhow::anyhow!("{name}: at {}: {}", e.pointer, e.message))?;
        Ok(SpecChecks::from_spec(&spec, name))
    }

    /// Per tool with declared responses: the statuses it declares.
    pub fn declared_statuses(&self) -> BTreeMap<String, Vec<String>> {
        self.statuses
            .iter()
            .map(|(tool, spec)| (tool.clone(), spec.responses.keys().cloned().collect()))
            .collect()
    }

    /// How a step breaks the specification (empty: it fits).
    pub fn check(
        &self,
        tool: &str,
        arguments: &Map<String, Value>,
        observation: &Value,
        success: Option<bool>,
    ) -> Vec<SpecProblem> {
        if !self.tools.contains(tool) {
            return vec![SpecProblem {
                kind: "unknown_tool",
                explanation: format!("{tool} is not a tool of {}", self.name),
            }];
        }
        let mut out = Vec::new();
        let problems = self.arguments.check(tool, arguments);
        if !problems.is_empty() {
            out.push(SpecProblem {
                kind: "argument_schema",
                explanation: problems.join("; "),
            });
        }
        if success == Some(true) && !observation.is_null() {
            let problems = self.responses.check_value(tool, observation);
            if !problems.is_empty() {
                out.push(SpecProblem {
                    kind: "response_schema",
                    explanation: format!(
                        "the response breaks the declared success schema: {}",
                        problems.join("; ")
                    ),
                });
            }
        }
        if let Some(spec) = self.statuses.get(tool) {
            let status = envsim_core::audit::bias::http_status(observation)
                .filter(|s| (100..600).contains(s));
            if let Some(status) = status {
                if !spec.declares(status as u16) {
                    out.push(SpecProblem {
                        kind: "undeclared_status",
                        explanation: format!("{tool} answers with status {status}, which its description does not declare"),
                    });
                }
            }
        }
        out
    }
}
