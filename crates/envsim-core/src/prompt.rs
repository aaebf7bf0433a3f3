//! Prompt templates for simulator models, and the training target.
//!
//! - [`Template::Envsim`]: envsim's own prompt. It states the output schema, the delta
//!   vocabulary and the path syntax (JSON Pointer) precisely, so a correct answer is never
//!   lost to an unstated convention. Evaluation and training use the same text.
//! - [`Template::EnvsimSliced`]: envsim's prompt over a slice ([`crate::slice`]): only the
//!   called method with the code it uses, and only the state the call can read or write, so a
//!   small model with a short context can take it. The rules come first and the code slice
//!   (which starts with the environment's shared prefix: module code, class header, constants,
//!   `__init__`) follows in the system message, so a prefix cache is reused across calls of the
//!   same environment; the sliced state and the call are the user message.
//! - [`Template::Reference`]: the reference benchmark's training *layout* — one instruction that
//!   carries the environment code, an input holding `initial_config` and `tool_call`
//!   (`name({json args})`) as indented JSON — in envsim's wording.
//! - [`reference_eval_prompt`] (and [`Template::render_eval`] for `Reference`): the reference
//!   evaluator's prompt, reproduced character for character — its wording, and the JSON that
//!   CPython's `json.dumps` writes ([`crate::python::json::dumps`]) — so that scores obtained with it are
//!   comparable with the published tables. It never states the path syntax of
//!   `config_changes`, so a model must guess the convention; that is why envsim's own template
//!   exists, and why this one is kept only for parity.
//!
//! The target is the canonical form: `{"feedback": <str() of the return value>,
//! "config_changes": [{"type": "add"|"modify"|"delete", "path": "<JSON Pointer>", "value": …}]}`
//! with the changes of the fine diff (lists descended).

use crate::diff::{changes_to_json, fine_diff, PathStyle};
use crate::python::json::{dumps, DumpOptions};
use crate::sample::Action;
use crate::slice::{slice_code_as, slice_state, Convention};
use serde_json::{json, Value};

/// Which prompt layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Template {
    /// envsim's prompt (system + user).
    Envsim,
    /// envsim's prompt over the code and state slice of the call ([`crate::slice`]).
    EnvsimSliced,
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

/// What [`Template::EnvsimSliced`] adds to the rules (with its leading space).
const SLICED_NOTE: &str =
    " Only the called method with the code it uses and the parts of the state \
the call can read or write are shown: anything the call looks up that is not shown does not exist, \
and paths are those of the full state.";

impl Template {
    /// Parses `envsim`, `envsim-sliced` or `reference`.
    pub fn parse(name: &str) -> Option<Template> {
        match name {
            "envsim" => Some(Template::Envsim),
            "envsim-sliced" => Some(Template::EnvsimSliced),
            "reference" => Some(Template::Reference),
            _ => None,
        }
    }

    /// Name as accepted by [`Template::parse`].
    pub fn name(self) -> &'static str {
        match self {
            Template::Envsim => "envsim",
            Template::EnvsimSliced => "envsim-sliced",
            Template::Reference => "reference",
        }
    }

    /// Renders the prompt for one call.
    ///
    /// `EnvsimSliced` is [`envsim_sliced_prompt`] with the default convention (class; a tool
    /// that only a module-level function defines is read in the database convention).
    pub fn render(self, env_code: &str, state: &Value, action: &Action) -> Prompt {
        match self {
            Template::Envsim => envsim_prompt(ENVSIM_RULES, env_code, state, action),
            Template::EnvsimSliced => {
                envsim_sliced_prompt(env_code, state, action, Convention::default())
            }
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

    /// Renders the prompt for evaluating a simulator on one call: [`Template::render`] for
    /// `Envsim` and `EnvsimSliced` (evaluation and training share envsim's text), the reference
    /// evaluator's exact prompt ([`reference_eval_prompt`] with [`ReferenceVariant::Frontier`])
    /// for `Reference`.
    pub fn render_eval(self, env_code: &str, state: &Value, action: &Action) -> Prompt {
        match self {
            Template::Envsim | Template::EnvsimSliced => self.render(env_code, state, action),
            Template::Reference => {
                reference_eval_prompt(env_code, state, action, ReferenceVariant::Frontier)
            }
        }
    }
}

fn envsim_prompt(rules: &str, env_code: &str, state: &Value, action: &Action) -> Prompt {
    Prompt {
        system: format!("{rules}\n\nEnvironment code:\n```python\n{env_code}\n```"),
        user: format!(
            "State:\n{}\n\nTool call: {}",
            serde_json::to_string_pretty(state).unwrap_or_default(),
            action.render()
        ),
    }
}

/// The `envsim-sliced` prompt for code written in `convention`: slices the code and state
/// ([`slice_code_as`], [`slice_state`]) and renders them with [`sliced_prompt`]; when that
/// would not be shorter (in characters) than the `envsim` prompt (nothing to cut, or less than
/// the added sentence) it renders the `envsim` prompt.
pub fn envsim_sliced_prompt(
    env_code: &str,
    state: &Value,
    action: &Action,
    convention: Convention,
) -> Prompt {
    let code = slice_code_as(env_code, &action.name, convention);
    let sliced = slice_state(&code, &action.arguments, state);
    let full = Template::Envsim.render(env_code, state, action);
    if code.full && sliced.full {
        return full;
    }
    let prompt = sliced_prompt(&code.source, &sliced.state, action);
    let chars = |p: &Prompt| p.system.chars().count() + p.user.chars().count();
    if chars(&prompt) >= chars(&full) {
        return full;
    }
    prompt
}

/// The `envsim-sliced` layout for an already sliced code and state (from [`crate::slice`], or
/// a footprint slice): system = envsim's rules, the sentence about slicing, the code; user =
/// the state as indented JSON and the call — the `Envsim` layout with one more sentence.
pub fn sliced_prompt(code: &str, state: &Value, action: &Action) -> Prompt {
    envsim_prompt(&format!("{ENVSIM_RULES}{SLICED_NOTE}"), code, state, action)
}

/// envsim's prompt for an environment known only by its API description (environment-free
/// simulation): the rules worded for a description instead of code, the description (an
/// OpenAPI document or tool schemas, as JSON) and the notes in the system message; the state
/// and the call as in the `envsim` layout.
pub fn description_prompt(
    description: &Value,
    notes: &str,
    state: &Value,
    action: &Action,
) -> Prompt {
    let rules = ENVSIM_RULES.replacen(
        "You are given the environment's Python code,",
        "You are given the environment's API description (what each operation takes, does and answers),",
        1,
    );
    let notes = if notes.trim().is_empty() {
        String::new()
    } else {
        format!("\n\nRules of the environment:\n{notes}")
    };
    Prompt {
        system: format!(
            "{rules}{DESCRIPTION_NOTE}{notes}\n\nAPI description:\n```json\n{}\n```",
            serde_json::to_string(description).unwrap_or_default()
        ),
        user: format!(
            "State:\n{}\n\nTool call: {}",
            serde_json::to_string_pretty(state).unwrap_or_default(),
            action.render()
        ),
    }
}

/// What [`description_prompt`] adds to the rules (with its leading space).
const DESCRIPTION_NOTE: &str = " The feedback is the operation's answer as JSON text, shaped as \
its description's responses say: the success response when the call can succeed on this state, \
the failure response (and no change) when it cannot.";

/// Which reference evaluator's wording [`reference_eval_prompt`] reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReferenceVariant {
    /// The prompt the reference uses for frontier (API) models.
    Frontier,
    /// The prompt the reference uses for its fine-tuned models: the frontier wording plus a
    /// sentence that stops the model from repeating its answer.
    Sft,
}

/// The reference evaluator's instructions, one line with single spaces between sentences.
const REFERENCE_EVAL_INSTRUCTIONS: &str = concat!(
    "Instructions: You are given the environment code and the initial config. ",
    "A tool call will be provided; you must predict the environment's textual feedback ",
    "(exact output string) and any configuration changes that result from executing the tool. ",
    "Only report config changes using types: add, modify, delete. ",
    "Output ONLY a JSON object with keys: \"feedback\": string, ",
    "\"config_changes\": [{\"type\":..., \"path\":..., \"value\": ...}]. ",
    "If no config change, set \"config_changes\": []. ",
    "Do not output other text.",
);

/// What [`ReferenceVariant::Sft`] appends to the system prompt (with its leading space).
const REFERENCE_SFT_SUFFIX: &str =
    " Do not repeat the JSON. Output exactly one JSON object and stop.";

/// The reference evaluator's prompt for one call, exactly as it builds it:
///
/// - system: `"Environment code:\n\n{env_code}\n\nInitial config:\n{json.dumps(state,
///   ensure_ascii=False, indent=2)}\n\nInstructions: …"`, plus the [`ReferenceVariant::Sft`]
///   suffix for that variant;
/// - user: `"Tool call: {name}({json.dumps(arguments)})\n\nReturn the JSON as specified."` —
///   the arguments with `json.dumps`'s defaults, so non-ASCII text is `\uXXXX`-escaped there
///   while the state shows it raw.
pub fn reference_eval_prompt(
    env_code: &str,
    state: &Value,
    action: &Action,
    variant: ReferenceVariant,
) -> Prompt {
    let state_json = dumps(
        state,
        DumpOptions {
            indent: Some(2),
            ensure_ascii: false,
        },
    );
    let suffix = match variant {
        ReferenceVariant::Frontier => "",
        ReferenceVariant::Sft => REFERENCE_SFT_SUFFIX,
    };
    // `dumps` takes a `Value`; the arguments are a map, so wrap a copy (prompts are small).
    let arguments = dumps(
        &Value::Object(action.arguments.clone()),
        DumpOptions::default(),
    );
    Prompt {
        system: format!(
            "Environment code:\n\n{env_code}\n\nInitial config:\n{state_json}\n\n\
             {REFERENCE_EVAL_INSTRUCTIONS}{suffix}"
        ),
        user: format!(
            "Tool call: {}({arguments})\n\nReturn the JSON as specified.",
            action.name
        ),
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
    fn the_description_prompt_carries_the_description_not_code() {
        let description = json!({"openapi": "3.1.0", "paths": {"/orders/{order_id}:pay": {}}});
        let p = description_prompt(
            &description,
            "Paid orders stay paid.",
            &json!({"orders": {}}),
            &action(),
        );
        assert!(p.system.starts_with(
            "You simulate a software environment. You are given the environment's API description"
        ));
        assert!(!p.system.contains("Python code"));
        assert!(p
            .system
            .contains("Rules of the environment:\nPaid orders stay paid."));
        assert!(p.system.ends_with(
            "```json\n{\"openapi\":\"3.1.0\",\"paths\":{\"/orders/{order_id}:pay\":{}}}\n```"
        ));
        assert!(
            p.user.ends_with("Tool call: pay({\"order_id\":\"O1\"})"),
            "{}",
            p.user
        );
        let bare = description_prompt(&description, " ", &json!({}), &action());
        assert!(!bare.system.contains("Rules of the environment"));
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

    fn ship_action() -> Action {
        Action {
            name: "ship_order".into(),
            arguments: json!({"order_id": "O1", "note": "café ☕"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        }
    }

    #[test]
    fn reference_eval_prompt_frontier_is_exact() {
        let state = json!({"orders": {"O1": {"status": "paid", "tags": [], "total": 1.0}}});
        let p = reference_eval_prompt(
            "class Shop: ...",
            &state,
            &ship_action(),
            ReferenceVariant::Frontier,
        );
        let expected_system = "Environment code:\n\nclass Shop: ...\n\nInitial config:\n{\n  \"orders\": {\n    \"O1\": {\n      \"status\": \"paid\",\n      \"tags\": [],\n      \"total\": 1.0\n    }\n  }\n}\n\nInstructions: You are given the environment code and the initial config. A tool call will be provided; you must predict the environment's textual feedback (exact output string) and any configuration changes that result from executing the tool. Only report config changes using types: add, modify, delete. Output ONLY a JSON object with keys: \"feedback\": string, \"config_changes\": [{\"type\":..., \"path\":..., \"value\": ...}]. If no config change, set \"config_changes\": []. Do not output other text.";
        assert_eq!(p.system, expected_system);
        assert_eq!(
            p.user,
            "Tool call: ship_order({\"order_id\": \"O1\", \"note\": \"caf\\u00e9 \\u2615\"})\n\nReturn the JSON as specified."
        );
    }

    #[test]
    fn reference_eval_prompt_sft_appends_the_stop_sentence() {
        let state = json!({"a": 1});
        let frontier =
            reference_eval_prompt("code", &state, &ship_action(), ReferenceVariant::Frontier);
        let sft = reference_eval_prompt("code", &state, &ship_action(), ReferenceVariant::Sft);
        assert_eq!(
            sft.system,
            "Environment code:\n\ncode\n\nInitial config:\n{\n  \"a\": 1\n}\n\nInstructions: You are given the environment code and the initial config. A tool call will be provided; you must predict the environment's textual feedback (exact output string) and any configuration changes that result from executing the tool. Only report config changes using types: add, modify, delete. Output ONLY a JSON object with keys: \"feedback\": string, \"config_changes\": [{\"type\":..., \"path\":..., \"value\": ...}]. If no config change, set \"config_changes\": []. Do not output other text. Do not repeat the JSON. Output exactly one JSON object and stop."
        );
        assert_eq!(sft.user, frontier.user);
        let simple = reference_eval_prompt("code", &json!({}), &action(), ReferenceVariant::Sft);
        assert_eq!(
            simple.user,
            "Tool call: pay({\"order_id\": \"O1\"})\n\nReturn the JSON as specified."
        );
        assert!(simple
            .system
            .contains("Initial config:\n{}\n\nInstructions:"));
    }

    #[test]
    fn reference_eval_prompt_keeps_state_unicode_raw_but_escapes_arguments() {
        let state = json!({"customer": "Zoë 😀", "line": "a\tb"});
        let p = reference_eval_prompt("", &state, &ship_action(), ReferenceVariant::Frontier);
        assert!(
            p.system
                .contains("\"customer\": \"Zoë 😀\",\n  \"line\": \"a\\tb\""),
            "{}",
            p.system
        );
        assert!(p.user.contains("\"caf\\u00e9 \\u2615\"") && p.user.is_ascii());
    }

    #[test]
    fn render_eval_dispatches_by_template() {
        let state = json!({"orders": {"O1": {"status": "new"}}});
        assert_eq!(
            Template::Envsim.render_eval("class Shop: ...", &state, &action()),
            Template::Envsim.render("class Shop: ...", &state, &action())
        );
        assert_eq!(
            Template::Reference.render_eval("class Shop: ...", &state, &action()),
            reference_eval_prompt(
                "class Shop: ...",
                &state,
                &action(),
                ReferenceVariant::Frontier
            )
        );
        // Evaluation with the reference template does not reuse the training layout.
        assert_ne!(
            Template::Reference.render_eval("c", &state, &action()),
            Template::Reference.render("c", &state, &action())
        );
    }

    const SHOP: &str = "class Shop:\n    def __init__(self, init_config):\n        self.orders = {}\n\n    def pay(self, order_id):\n        if order_id not in self.orders:\n            return {'success': False}\n        self.orders[order_id]['status'] = 'paid'\n        return {'success': True}\n\n    def count(self):\n        return {'success': True, 'data': len(self.orders)}\n";

    #[test]
    fn envsim_sliced_prompt_is_exact_on_a_tiny_example() {
        // Enough to cut that the slice is shorter than the full prompt.
        let notes = "n".repeat(300);
        let state =
            json!({"orders": {"O1": {"status": "new"}, "O2": {"status": "new"}}, "notes": notes});
        let p = Template::EnvsimSliced.render(SHOP, &state, &action());
        let code = "class Shop:\n    def __init__(self, init_config):\n        self.orders = {}\n\n    def pay(self, order_id):\n        if order_id not in self.orders:\n            return {'success': False}\n        self.orders[order_id]['status'] = 'paid'\n        return {'success': True}\n";
        assert_eq!(
            p.system,
            format!("{ENVSIM_RULES} Only the called method with the code it uses and the parts of the state the call can read or write are shown: anything the call looks up that is not shown does not exist, and paths are those of the full state.\n\nEnvironment code:\n```python\n{code}\n```")
        );
        assert_eq!(
            p.user,
            "State:\n{\n  \"orders\": {\n    \"O1\": {\n      \"status\": \"new\"\n    }\n  }\n}\n\nTool call: pay({\"order_id\":\"O1\"})"
        );
        assert!(p.system.starts_with(ENVSIM_RULES));
        assert_eq!(
            Template::parse("envsim-sliced"),
            Some(Template::EnvsimSliced)
        );
        assert_eq!(Template::EnvsimSliced.name(), "envsim-sliced");
        assert_eq!(
            Template::EnvsimSliced.render_eval(SHOP, &state, &action()),
            p
        );
    }

    #[test]
    fn envsim_sliced_prompt_is_never_longer_than_envsim() {
        let len = |p: &Prompt| p.system.len() + p.user.len();
        let big: serde_json::Map<String, Value> = (0..50)
            .map(|i| {
                (
                    format!("O{i}"),
                    json!({"status": "new", "lines": [1, 2, 3]}),
                )
            })
            .collect();
        let count = Action {
            name: "count".into(),
            arguments: serde_json::Map::new(),
        };
        for (code, state, action) in [
            (SHOP, json!({"orders": big}), action()),
            (SHOP, json!({"orders": {}}), action()),
            (SHOP, json!({"orders": {"O1": {}}}), count.clone()),
            (SHOP, json!({}), count.clone()),
            ("", json!({"a": 1}), action()),
            (
                "class E:\n    def pay(self, order_id):\n        return vars(self)\n",
                json!({"a": 1}),
                action(),
            ),
            ("not python at all (", json!([1, 2]), action()),
        ] {
            let full = Template::Envsim.render(code, &state, &action);
            let sliced = Template::EnvsimSliced.render(code, &state, &action);
            assert!(len(&sliced) <= len(&full), "{code:?} {state}");
        }
        // Too little to cut (less than the added sentence): the envsim prompt itself.
        let state = json!({"orders": {"O1": {}}});
        assert_eq!(
            Template::EnvsimSliced.render(SHOP, &state, &count),
            Template::Envsim.render(SHOP, &state, &count)
        );
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
