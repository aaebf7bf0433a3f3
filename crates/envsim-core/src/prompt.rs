//! Prompt templates for simulator models, and the training target.
//!
//! - [`Template::Envsim`]: envsim's own prompt. It states the output schema, the delta
//!   vocabulary and the path syntax (JSON Pointer) precisely, so a correct answer is never
//!   lost to an unstated convention. Evaluation and training use the same text.
//! - [`Template::Reference`]: the reference benchmark's training *layout* — one instruction that
//!   carries the environment code, an input holding `initial_config` and `tool_call`
//!   (`name({json args})`) as indented JSON — in envsim's wording.
//!
//! The target is the canonical form: `{"feedback": <str() of the return value>,
//! "config_changes": [{"type": "add"|"modify"|"delete", "path": "<JSON Pointer>", "value": …}]}`
//! with the changes of the fine diff (lists descended).

use crate::diff::{changes_to_json, fine_diff, PathStyle};
use crate::sample::Action;
use serde_json::{json, Value};

/// Which prompt layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Template {
    /// envsim's prompt (system + user).
    Envsim,
    /// The reference's training layout (instruction + input).
    Reference,
}

/// A rendered prompt: a system part and a user part (the reference layout calls them
/// instruction and input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    /// System message / Alpaca instruction.
    pub system: String,
    /// User message / Alpaca input.
    pub user: String,
}

const ENVSIM_RULES: &str = "You simulate a software environment. You are given the environment's \
Python code, its current state as JSON, and one tool call. Predict exactly what executing the call \
returns and how the state changes.\n\n\
Answer with one JSON object and nothing else:\n\
{\"feedback\": <the tool's return value exactly as Python's str() prints it>,\n \
\"config_changes\": [<changes in the order they happen; [] when nothing changes>]}\n\n\
Each change is {\"type\": \"add\" | \"modify\" | \"delete\", \"path\": <JSON Pointer>, \"value\": <new value>}:\n\
- \"add\" creates an object key or inserts into a list, \"modify\" replaces an existing value, \
\"delete\" removes a key or list element (no \"value\").\n\
- Paths are JSON Pointers (RFC 6901) into the state: \"/orders/O1/status\"; list elements by \
index (\"/items/0\"), \"/items/-\" appends; inside a key write \"~1\" for \"/\" and \"~0\" for \"~\".\n\
- Creating a record is one \"add\" of the whole record; changing one field is one \"modify\" of that field.";

impl Template {
    /// Parses `envsim` or `reference`.
    pub fn parse(name: &str) -> Option<Template> {
        match name {
            "envsim" => Some(Template::Envsim),
            "reference" => Some(Template::Reference),
            _ => None,
        }
    }

    /// Name as accepted by [`Template::parse`].
    pub fn name(self) -> &'static str {
        match self {
            Template::Envsim => "envsim",
            Template::Reference => "reference",
        }
    }

    /// Renders the prompt for one call.
    pub fn render(self, env_code: &str, state: &Value, action: &Action) -> Prompt {
        match self {
            Template::Envsim => Prompt {
                system: format!("{ENVSIM_RULES}\n\nEnvironment code:\n```python\n{env_code}\n```"),
                user: format!(
                    "State:\n{}\n\nTool call: {}",
                    serde_json::to_string_pretty(state).unwrap_or_default(),
                    action.render()
                ),
            },
            Template::Reference => Prompt {
                system: format!(
                    "Act as the environment below. For the tool call in the input, give the environment's \
                     exact feedback and the changes the call makes to the configuration.\n\n\
                     Environment Code:\n{env_code}\n\nRun the tool call exactly and return the result."
                ),
                user: serde_json::to_string_pretty(&json!({
                    "initial_config": state,
                    "tool_call": action.render(),
                }))
                .unwrap_or_default(),
            },
        }
    }
}

/// The training target for a transition: canonical feedback and fine-diff changes.
pub fn target(observation: &str, before: &Value, after: &Value) -> Value {
    json!({
        "feedback": observation,
        "config_changes": changes_to_json(&fine_diff(before, after), PathStyle::Pointer),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::apply;
    use crate::delta::Delta;

    fn action() -> Action {
        Action {
            name: "pay".into(),
            arguments: json!({"order_id": "O1"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        }
    }

    #[test]
    fn envsim_prompt_states_the_conventions() {
        let p = Template::Envsim.render("class Shop: ...", &json!({"orders": {}}), &action());
        assert!(p.system.contains("JSON Pointer") && p.system.contains("class Shop: ..."));
        assert!(
            p.user.ends_with("Tool call: pay({\"order_id\":\"O1\"})"),
            "{}",
            p.user
        );
        let r = Template::Reference.render("class Shop: ...", &json!({"a": 1}), &action());
        let input: Value = serde_json::from_str(&r.user).unwrap();
        assert_eq!(
            input,
            json!({"initial_config": {"a": 1}, "tool_call": "pay({\"order_id\":\"O1\"})"})
        );
        assert_eq!(Template::parse("reference"), Some(Template::Reference));
        assert_eq!(Template::parse("x"), None);
    }

    #[test]
    fn target_applies_back_to_the_true_state() {
        let (before, after) = (
            json!({"o": {"s": "new"}, "l": [1]}),
            json!({"o": {"s": "paid"}, "l": [1, 2], "n": {}}),
        );
        let t = target("{'success': True}", &before, &after);
        assert_eq!(t["feedback"], "{'success': True}");
        let (rebuilt, problems) = apply(&before, &Delta::from_value(&t["config_changes"]));
        assert!(problems.is_empty());
        assert_eq!(rebuilt, after);
    }
}
