//! What a session simulates: an environment package (code mode) or only an API description
//! (environment-free mode), with what the checks need: the specification, the tools' effects
//! and how an answer says success.

use envsim_bench::spec_checks::SpecChecks;
use envsim_core::apispec::{parse_spec, SpecError};
use envsim_core::audit::observed::guess_outcome;
use envsim_core::audit::{AuditTrajectory, Effects};
use envsim_core::outcome::OutcomeRule;
use envsim_exec::package::EnvPackage;
use envsim_exec::EnvCode;
use serde_json::Value;

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
    /// OpenAPI description generated from them.
    pub fn from_package(package: &EnvPackage, runs: &[AuditTrajectory], effects: Effects) -> Self {
        let description = envsim_bench::openapi::describe(&package.manifest, runs, &effects);
        let spec = match parse_spec(&description) {
            Ok(spec) => SpecChecks::from_spec(&spec, package.manifest.name.clone()),
            // The generator writes what the reader reads (a unit test holds it to that); the
            // manifest's own tools are the fallback all the same.
            Err(_) => {
                SpecChecks::from_tools(&package.manifest.tools, package.manifest.name.clone())
                    .unwrap_or_else(|_| SpecChecks::from_spec(&empty_spec(), String::new()))
            }
        };
        Environment {
            name: package.manifest.name.clone(),
            code: Some(package.code.clone()),
            description,
            spec,
            effects,
            rule: Some(package.outcome.clone()),
            clock: package.clock(0).seconds,
            notes: package.manifest.rules.join("\n"),
        }
    }

    /// Environment-free mode: only an API description (OpenAPI 3.x or OpenAI tool schemas,
    /// already parsed from JSON or YAML). Effects come from its paths.
    pub fn from_description(
        name: &str,
        description: Value,
        notes: String,
        clock: f64,
    ) -> Result<Self, SpecError> {
        let spec = SpecChecks::from_spec(&parse_spec(&description)?, name.to_owned());
        let effects = Effects::default().with_annotations(&spec.effects);
        Ok(Environment {
            name: name.to_owned(),
            code: None,
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

    /// Whether an answer says success: an error the executor reports (`Error: ...`, a raised
    /// exception or a refused call) is a failure; else the package's rule, else read from the
    /// answer.
    pub fn outcome(&self, observation: &Value) -> Option<bool> {
        if observation
            .as_str()
            .is_some_and(|t| t.starts_with("Error: "))
        {
            return Some(false);
        }
        match &self.rule {
            Some(rule) => rule.classify(observation),
            None => guess_outcome(observation),
        }
    }
}

fn empty_spec() -> envsim_core::apispec::ApiSpec {
    envsim_core::apispec::ApiSpec {
        format: envsim_core::apispec::SpecFormat::OpenAiTools,
        title: None,
        tools: Default::default(),
    }
}
