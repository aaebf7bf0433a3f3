//! Checking a call's arguments against its tool's JSON Schema (the manifest's `parameters`),
//! before any code runs: `get_report(report_id=2001)` where the schema says string is reported
//! as such, not left to the code (which would answer "Report 2001 not found").
//!
//! Each tool's schema is compiled once, when the package loads. A schema that is not a valid
//! JSON Schema is not an error of the call: the tool is then unchecked, and the reason is kept
//! for `env test` to report.

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The compiled argument schemas of a package's tools.
#[derive(Clone, Default)]
pub struct ArgumentSchemas {
    tools: Arc<BTreeMap<String, Result<jsonschema::Validator, String>>>,
}

impl std::fmt::Debug for ArgumentSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.tools.iter().map(|(name, v)| (name, v.is_ok())))
            .finish()
    }
}

impl ArgumentSchemas {
    /// Compiles the `parameters` of every tool (OpenAI function schemas); a tool without
    /// `parameters` is left unchecked.
    pub fn compile(tools: &[Value]) -> ArgumentSchemas {
        let mut compiled = BTreeMap::new();
        for tool in tools {
            let Some(name) = tool.pointer("/function/name").and_then(Value::as_str) else {
                continue;
            };
            let Some(schema) = tool.pointer("/function/parameters") else {
                continue;
            };
            let validator = jsonschema::validator_for(schema)
                .map_err(|e| format!("not a valid JSON Schema: {e}"));
            compiled.insert(name.to_owned(), validator);
        }
        ArgumentSchemas {
            tools: Arc::new(compiled),
        }
    }

    /// Compiles one schema per name (any JSON Schema: a response body's, say), each once.
    pub fn from_schemas(schemas: impl IntoIterator<Item = (String, Value)>) -> ArgumentSchemas {
        let compiled = schemas
            .into_iter()
            .map(|(name, schema)| {
                let validator = jsonschema::validator_for(&schema)
                    .map_err(|e| format!("not a valid JSON Schema: {e}"));
                (name, validator)
            })
            .collect();
        ArgumentSchemas {
            tools: Arc::new(compiled),
        }
    }

    /// How `args` break the schema of `tool`, one line each (`report_id: 2001 is not of type
    /// "string"`); empty when they fit, when the tool has no schema, or when its schema could
    /// not be compiled ([`ArgumentSchemas::problems`] lists those).
    pub fn check(&self, tool: &str, args: &Map<String, Value>) -> Vec<String> {
        self.check_value(tool, &Value::Object(args.clone()))
    }

    /// [`ArgumentSchemas::check`] for any value (a response body against its schema).
    pub fn check_value(&self, tool: &str, instance: &Value) -> Vec<String> {
        let Some(Ok(validator)) = self.tools.get(tool) else {
            return Vec::new();
        };
        let mut out: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = at.trim_start_matches('/');
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Whether `tool` has a schema (compiled or not).
    pub fn has(&self, tool: &str) -> bool {
        self.tools.contains_key(tool)
    }

    /// Tools whose schema could not be compiled, with why.
    pub fn problems(&self) -> Vec<(String, String)> {
        self.tools
            .iter()
            .filter_map(|(name, v)| v.as_ref().err().map(|e| (name.clone(), e.clone())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<Value> {
        vec![
            json!({"type": "function", "function": {"name": "get_report", "parameters": {
                "type": "object",
                "properties": {"report_id": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                "required": ["report_id"], "additionalProperties": false}}}),
            json!({"type": "function", "function": {"name": "broken", "parameters": {"type": 5}}}),
            json!({"type": "function", "function": {"name": "free"}}),
        ]
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn mismatches_are_named_by_argument() {
        let schemas = ArgumentSchemas::compile(&tools());
        assert_eq!(
            schemas.check("get_report", &args(json!({"report_id": "R1"}))),
            Vec::<String>::new()
        );
        assert_eq!(
            schemas.check("get_report", &args(json!({"report_id": 2001}))),
            ["report_id: 2001 is not of type \"string\""]
        );
        assert_eq!(
            schemas.check("get_report", &args(json!({"limit": 0, "extra": true}))),
            [
                "\"report_id\" is a required property",
                "Additional properties are not allowed ('extra' was unexpected)",
                "limit: 0 is less than the minimum of 1",
            ]
        );
        // No schema, an uncompilable one, an unknown tool: nothing to say about the call.
        assert!(schemas.check("free", &args(json!({"x": 1}))).is_empty());
        assert!(schemas.check("broken", &args(json!({"x": 1}))).is_empty());
        assert!(schemas.check("nope", &args(json!({}))).is_empty());
        let problems = schemas.problems();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].0, "broken");
        assert!(
            problems[0].1.starts_with("not a valid JSON Schema: "),
            "{problems:?}"
        );
    }
}
