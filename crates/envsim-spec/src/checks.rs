//! The specification an audit checks calls and responses against: an API description
//! (OpenAPI 3.0/3.1 or OpenAI tool schemas, read by [`envsim_core::apispec`]), the tools a
//! transcript declares, or an environment package's manifest. Every schema is compiled once.

use crate::arguments::ArgumentSchemas;
use envsim_core::apispec::{parse_spec, ApiSpec, SpecError};
use envsim_core::audit::{EffectAnnotation, Vocabulary};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Compiled checks of one specification.
#[derive(Clone)]
pub struct SpecChecks {
    /// What it came from (for reports).
    pub name: String,
    tools: BTreeSet<String>,
    arguments: ArgumentSchemas,
    /// Per tool: the schema of its successful response (OpenAPI: the first 2xx response that
    /// declares one).
    responses: ArgumentSchemas,
    /// Per tool: the schema of its failure responses (any declared 4XX/5XX or `default`
    /// response's).
    failures: ArgumentSchemas,
    /// Per tool: the HTTP statuses it declares, when the description has responses.
    statuses: BTreeMap<String, envsim_core::apispec::ToolSpec>,
    /// What each tool does to resources, from the OpenAPI method and path.
    pub effects: BTreeMap<String, Vec<EffectAnnotation>>,
    /// The field names and types every success schema declares: what also judges an answer
    /// whose own schema promises little (no schema, or no field required), since a tool's
    /// answer holds the API's records under the API's names.
    vocabulary: Vocabulary,
}

/// One way a step breaks the specification.
pub struct SpecProblem {
    /// `unknown_tool`, `argument_schema`, `response_schema` or `undeclared_status`.
    pub kind: &'static str,
    /// What is wrong, in words.
    pub explanation: String,
}

impl SpecChecks {
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
        // The failure schema: any of the declared 4XX/5XX and `default` responses' schemas.
        let failures = ArgumentSchemas::from_schemas(spec.tools.values().filter_map(|t| {
            let schemas: Vec<Value> = t
                .responses
                .iter()
                .filter(|(status, _)| {
                    status.starts_with('4') || status.starts_with('5') || *status == "default"
                })
                .filter_map(|(_, r)| r.schema.clone())
                .collect();
            match schemas.len() {
                0 => None,
                1 => Some((t.name.clone(), schemas.into_iter().next()?)),
                _ => Some((t.name.clone(), serde_json::json!({ "anyOf": schemas }))),
            }
        }));
        let mut vocabulary = Vocabulary::default();
        for t in spec.tools.values() {
            for (status, response) in &t.responses {
                if let (true, Some(schema)) = (status.starts_with('2'), &response.schema) {
                    vocabulary.declare(schema);
                }
            }
        }
        SpecChecks {
            vocabulary,
            name,
            tools: spec.tools.keys().cloned().collect(),
            arguments,
            responses,
            failures,
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
    pub fn from_tools(tools: &[Value], name: String) -> Result<SpecChecks, SpecError> {
        let spec = parse_spec(&Value::Array(tools.to_vec()))?;
        Ok(SpecChecks::from_spec(&spec, name))
    }

    /// Per tool with declared responses: the statuses it declares.
    pub fn declared_statuses(&self) -> BTreeMap<String, Vec<String>> {
        self.statuses
            .iter()
            .map(|(tool, spec)| (tool.clone(), spec.responses.keys().cloned().collect()))
            .collect()
    }

    /// How a step breaks the specification (empty: it fits). The answer is checked against
    /// the success schema when it says success, the failure schema when it says failure, and
    /// must fit one of the two when it says neither. A call the specification
    /// refuses (an unknown tool, arguments that break the schema) breaks it only when it did
    /// not fail: refusing such a call is what the API should do, so a failed one fits.
    pub fn check(
        &self,
        tool: &str,
        arguments: &Map<String, Value>,
        observation: &Value,
        success: Option<bool>,
    ) -> Vec<SpecProblem> {
        let refused = success == Some(false);
        if !self.tools.contains(tool) {
            if refused {
                return Vec::new();
            }
            return vec![SpecProblem {
                kind: "unknown_tool",
                explanation: format!("{tool} is not a tool of {}", self.name),
            }];
        }
        let mut out = Vec::new();
        let problems = if refused {
            Vec::new()
        } else {
            self.arguments.check(tool, arguments)
        };
        if !problems.is_empty() {
            out.push(SpecProblem {
                kind: "argument_schema",
                explanation: problems.join("; "),
            });
        }
        if !observation.is_null() {
            let (fits_success, fits_failure) = (
                self.responses.check_value(tool, observation),
                self.failures.check_value(tool, observation),
            );
            let broken = match success {
                Some(true) => (!fits_success.is_empty()).then_some(("success", fits_success)),
                Some(false) => (!fits_failure.is_empty()).then_some(("failure", fits_failure)),
                // An answer that says neither: it must fit one of the two, when both are
                // declared.
                None if self.responses.has(tool) && self.failures.has(tool) => {
                    (!fits_success.is_empty() && !fits_failure.is_empty()).then(|| {
                        let mut both = fits_success;
                        both.extend(fits_failure);
                        ("success or failure", both)
                    })
                }
                None => None,
            };
            // A successful answer also keeps to the description's vocabulary: another
            // spelling of a field it names, or another type of a field it types one way.
            let broken = match (broken, success) {
                (broken, Some(true)) => {
                    let departures = self.vocabulary.problems(observation);
                    match broken {
                        _ if departures.is_empty() => broken,
                        Some((which, mut problems)) => {
                            problems.extend(departures);
                            Some((which, problems))
                        }
                        None => Some(("success", departures)),
                    }
                }
                (broken, _) => broken,
            };
            if let Some((which, problems)) = broken {
                out.push(SpecProblem {
                    kind: "response_schema",
                    explanation: format!(
                        "the response breaks the declared {which} schema: {}",
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
