//! What a session simulates: an environment package (code mode) or only an API description
//! (environment-free mode), with what the checks need: the specification, the tools' effects
//! and how an answer says success.

use envsim_core::apispec::{parse_spec, ApiSpec, SpecError};
use envsim_core::audit::observed::guess_outcome;
use envsim_core::audit::{AuditTrajectory, Effects};
use envsim_core::outcome::OutcomeRule;
use envsim_exec::package::EnvPackage;
use envsim_exec::EnvCode;
use envsim_spec::checks::SpecChecks;
use serde_json::{json, Value};

/// An environment as a session sees it.
#[derive(Clone)]
pub struct Environment {
    /// Its name.
    pub name: String,
    /// The code, in code mode; `None` in environment-free mode.
    pub code: Option<EnvCode>,
    /// The description simulators are given in environment-free mode (and the server serves):
    /// an OpenAPI document or OpenAI tool schemas.
    pub description: Value,
    /// Its tools as OpenAI tool schemas (what agents are shown: the server's tool list, MCP).
    pub tools: Vec<Value>,
    /// Its tools' argument and response schemas, compiled.
    pub spec: SpecChecks,
    /// What each tool does to resources: learned by running the code, else read from the
    /// description's paths (else guessed from names).
    pub effects: Effects,
    /// How an answer says success (a package's rule); `None`: read from the answer itself.
    pub rule: Option<OutcomeRule>,
    /// The frozen clock of the first step (seconds since the epoch); each step adds
    /// [`envsim_core::clock::DEFAULT_CLOCK_STEP`].
    pub clock: f64,
    /// Notes in plain language (a package's rules; the user's notes).
    pub notes: String,
}

impl Environment {
    /// Code mode: a package, with the effects learned from its executed walks `runs`, and the
    /// OpenAPI description generated from them. Fails only when the generated description does
    /// not read back (a generator fault, reported rather than papered over).
    pub fn from_package(
        package: &EnvPackage,
        runs: &[AuditTrajectory],
        effects: Effects,
    ) -> Result<Self, SpecError> {
        let description =
            envsim_spec::openapi::describe(&package.manifest.outline(), runs, &effects);
        let spec = parse_spec(&description)?;
        Ok(Environment {
            name: package.manifest.name.clone(),
            code: Some(package.code.clone()),
            tools: tool_schemas(&spec),
            spec: SpecChecks::from_spec(&spec, package.manifest.name.clone()),
            description,
            effects,
            rule: Some(package.outcome.clone()),
            clock: package.clock(0).seconds,
            notes: package.manifest.rules.join("\n"),
        })
    }

    /// Environment-free mode: only an API description (OpenAPI 3.x or OpenAI tool schemas,
    /// already parsed from JSON or YAML). Effects come from its paths.
    pub fn from_description(
        name: &str,
        description: Value,
        notes: String,
        clock: f64,
    ) -> Result<Self, SpecError> {
        let parsed = parse_spec(&description)?;
        let spec = SpecChecks::from_spec(&parsed, name.to_owned());
        let effects = Effects::default().with_annotations(&spec.effects);
        Ok(Environment {
            name: name.to_owned(),
            code: None,
            tools: tool_schemas(&parsed),
            description,
            spec,
            effects,
            rule: None,
            clock,
            notes,
        })
    }

    /// The same environment with its code and outcome rule withheld: what an environment-free
    /// simulation of it knows (its generated description, notes and effects read from paths).
    pub fn without_code(&self) -> Self {
        let effects = Effects::default().with_annotations(&self.spec.effects);
        Environment {
            code: None,
            rule: None,
            effects,
            ..self.clone()
        }
    }

    /// The same environment with the package's code and outcome rule: what the truth runs in,
    /// whatever a simulation of it is given.
    pub fn with_code_of(&self, package: &EnvPackage) -> Self {
        Environment {
            code: Some(package.code.clone()),
            rule: Some(package.outcome.clone()),
            ..self.clone()
        }
    }

    /// Whether an answer says success: an error the executor reports (`Error: ...`, a raised
    /// exception or a refused call) is a failure; else the package's rule, else read from the
    /// answer.
    pub fn outcome(&self, observation: &Value) -> Option<bool> {
        outcome_by(self.rule.as_ref(), observation)
    }
}

/// Success, failure or undetermined for an observation: an `Error: ` text (the executor's
/// report) is a failure; otherwise `rule` decides, or without one a guess from the answer.
pub fn outcome_by(rule: Option<&OutcomeRule>, observation: &Value) -> Option<bool> {
    if observation
        .as_str()
        .is_some_and(|t| t.starts_with("Error: "))
    {
        return Some(false);
    }
    match rule {
        Some(rule) => rule.classify(observation),
        None => guess_outcome(observation),
    }
}

/// The tools of a parsed description as OpenAI tool schemas.
fn tool_schemas(spec: &ApiSpec) -> Vec<Value> {
    spec.tools
        .values()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t.name,
                "description": t.description.clone().unwrap_or_default(),
                "parameters": t.parameters,
            }})
        })
        .collect()
}
