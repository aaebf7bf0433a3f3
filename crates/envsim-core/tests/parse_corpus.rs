//! A corpus of messy model outputs with the exact outcome expected from
//! `extract_object`.
//!
//! The inputs in [`CASES`] double as seeds for fuzzing the extractor, which
//! is why the table is a plain constant.

use envsim_core::extract::{extract_object, ParseFailure, Repair};
use envsim_core::literal::{parse_literal_prefix, Dialect};
use serde_json::{json, Value};

/// The keys the benchmark's prediction object is expected to have.
const KEYS: &[&str] = &["feedback", "config_changes"];

/// What `extract_object(input, KEYS)` must produce.
#[derive(Debug, Clone, Copy)]
enum Expected {
    /// The extracted object, written as JSON text.
    Object(&'static str),
    /// The failure, by its `ParseFailure::code()`.
    Failure(&'static str),
}

/// One corpus entry.
#[derive(Debug, Clone, Copy)]
struct Case {
    name: &'static str,
    input: &'static str,
    expected: Expected,
}

use Expected::{Failure, Object};

const CASES: &[Case] = &[
    Case {
        name: "plain_json",
        input: r#"{"feedback": "ok", "config_changes": []}"#,
        expected: Object(r#"{"feedback": "ok", "config_changes": []}"#),
    },
    Case {
        name: "prose_before",
        input: "Here is my prediction:\n{\"feedback\": \"done\", \"config_changes\": []}",
        expected: Object(r#"{"feedback": "done", "config_changes": []}"#),
    },
    Case {
        name: "prose_after",
        input: "{\"feedback\": \"done\"}\nLet me know if you need anything else!",
        expected: Object(r#"{"feedback": "done"}"#),
    },
    Case {
        name: "apostrophes_in_prose",
        input: r#"I don't think it's wrong. {"feedback": "it's fine"} That's all, isn't it?"#,
        expected: Object(r#"{"feedback": "it's fine"}"#),
    },
    Case {
        name: "braces_inside_string",
        input: r#"{"feedback": "use {x} here", "config_changes": []}"#,
        expected: Object(r#"{"feedback": "use {x} here", "config_changes": []}"#),
    },
    Case {
        name: "braces_in_prose_before_answer",
        input: r#"I think {maybe} the answer is {"feedback": "yes"}"#,
        expected: Object(r#"{"feedback": "yes"}"#),
    },
    Case {
        name: "unbalanced_brace_in_prose",
        input: r#"Let me fill in the {template first. {"feedback": "ok"}"#,
        expected: Object(r#"{"feedback": "ok"}"#),
    },
    Case {
        name: "set_like_braces_in_bullets",
        input: "- step {1}\n- step {2}\n{\"feedback\": \"ok\"}",
        expected: Object(r#"{"feedback": "ok"}"#),
    },
    Case {
        name: "json_fence",
        input: "```json\n{\"feedback\": \"fenced\"}\n```",
        expected: Object(r#"{"feedback": "fenced"}"#),
    },
    Case {
        name: "json_fence_uppercase",
        input: "Result:\n```JSON\n{\"feedback\": \"upper\"}\n```\nDone.",
        expected: Object(r#"{"feedback": "upper"}"#),
    },
    Case {
        name: "fence_without_language",
        input: "```\n{\"feedback\": 1}\n```",
        expected: Object(r#"{"feedback": 1}"#),
    },
    Case {
        name: "python_fence",
        input: "```python\n{'feedback': True, 'config_changes': None}\n```",
        expected: Object(r#"{"feedback": true, "config_changes": null}"#),
    },
    Case {
        name: "two_fences_second_has_keys",
        input: "The schema:\n```json\n{\"type\": \"object\"}\n```\nThe answer:\n```json\n{\"feedback\": \"second\"}\n```",
        expected: Object(r#"{"feedback": "second"}"#),
    },
    Case {
        name: "two_fences_neither_has_keys",
        input: "```json\n{\"a\": 1}\n```\n```json\n{\"b\": 2}\n```",
        expected: Object(r#"{"a": 1}"#),
    },
    Case {
        name: "fence_preferred_over_prose",
        input: "Draft: {\"feedback\": \"prose\"}\n```json\n{\"feedback\": \"fenced\"}\n```",
        expected: Object(r#"{"feedback": "fenced"}"#),
    },
    Case {
        name: "unterminated_fence",
        input: "```json\n{\"feedback\": \"x\"}",
        expected: Object(r#"{"feedback": "x"}"#),
    },
    Case {
        name: "inline_fence_on_one_line",
        input: "```json {\"feedback\": \"inline\"} ```",
        expected: Object(r#"{"feedback": "inline"}"#),
    },
    Case {
        name: "think_closed",
        input: "<think>The user wants the order created.</think>\n{\"feedback\": \"after think\"}",
        expected: Object(r#"{"feedback": "after think"}"#),
    },
    Case {
        name: "think_with_json_draft",
        input: "<think>Draft: {\"feedback\": \"draft\", \"config_changes\": []}\nHmm, wrong.</think>{\"feedback\": \"final\"}",
        expected: Object(r#"{"feedback": "final"}"#),
    },
    Case {
        name: "think_tags_mixed_case",
        input: "<THINK>x</Think>{\"feedback\": 1}",
        expected: Object(r#"{"feedback": 1}"#),
    },
    Case {
        name: "two_think_blocks",
        input: "<think>a</think>{\"x\": 1}<think>b {\"feedback\": 0}</think>{\"feedback\": 2}",
        expected: Object(r#"{"feedback": 2}"#),
    },
    Case {
        name: "orphan_closing_think",
        input: "I should check the config {\"feedback\": \"draft\"}\n</think>\n\n{\"feedback\": \"final\"}",
        expected: Object(r#"{"feedback": "final"}"#),
    },
    Case {
        name: "unclosed_think",
        input: "<think>Let me reason about {\"feedback\": ",
        expected: Failure("unclosed_think"),
    },
    Case {
        name: "unclosed_think_after_prose",
        input: "Okay.\n<think>The order must be",
        expected: Failure("unclosed_think"),
    },
    Case {
        name: "unclosed_think_after_answer",
        input: "{\"feedback\": \"early\"}\n<think>second thoughts",
        expected: Object(r#"{"feedback": "early"}"#),
    },
    Case {
        name: "only_closed_think",
        input: "<think>nothing to say</think>",
        expected: Failure("no_object"),
    },
    Case {
        name: "truncated_mid_string",
        input: "{\"feedback\": \"The order was cre",
        expected: Failure("truncated"),
    },
    Case {
        name: "truncated_mid_array",
        input: "{\"feedback\": \"ok\", \"config_changes\": [{\"type\": \"modify\", ",
        expected: Failure("truncated"),
    },
    Case {
        name: "truncated_mid_key",
        input: "Sure:\n{\"feedback\": \"ok\", \"conf",
        expected: Failure("truncated"),
    },
    Case {
        name: "truncated_in_open_fence",
        input: "```json\n{\"feedback\": [1, 2",
        expected: Failure("truncated"),
    },
    Case {
        name: "truncated_after_escape",
        input: "{\"feedback\": \"a \\",
        expected: Failure("truncated"),
    },
    Case {
        name: "python_literals",
        input: "{'feedback': 'ok', 'success': True, 'error': None, 'flag': False}",
        expected: Object(r#"{"feedback": "ok", "success": true, "error": null, "flag": false}"#),
    },
    Case {
        name: "python_escaped_quote",
        input: r"{'feedback': 'it\'s done'}",
        expected: Object(r#"{"feedback": "it's done"}"#),
    },
    Case {
        name: "python_mixed_quotes",
        input: r#"{'feedback': "don't", 'config_changes': []}"#,
        expected: Object(r#"{"feedback": "don't", "config_changes": []}"#),
    },
    Case {
        name: "single_quotes_with_json_literals",
        input: "{'feedback': true, 'config_changes': null}",
        expected: Object(r#"{"feedback": true, "config_changes": null}"#),
    },
    Case {
        name: "python_tuple_value",
        input: "{'feedback': 'x', 'ids': (1, 2)}",
        expected: Object(r#"{"feedback": "x", "ids": [1, 2]}"#),
    },
    Case {
        name: "trailing_commas",
        input: "{\"feedback\": \"x\", \"config_changes\": [1, 2,],}",
        expected: Object(r#"{"feedback": "x", "config_changes": [1, 2]}"#),
    },
    Case {
        name: "raw_newline_in_string",
        input: "{\"feedback\": \"line one\nline two\"}",
        expected: Object(r#"{"feedback": "line one\nline two"}"#),
    },
    Case {
        name: "unicode_cjk",
        input: "结果如下：{\"feedback\": \"订单已创建\"}",
        expected: Object(r#"{"feedback": "订单已创建"}"#),
    },
    Case {
        name: "emoji",
        input: "{\"feedback\": \"done 🎉\"}",
        expected: Object(r#"{"feedback": "done 🎉"}"#),
    },
    Case {
        name: "escaped_surrogate_pair",
        input: r#"{"feedback": "\ud83c\udf89 party"}"#,
        expected: Object(r#"{"feedback": "🎉 party"}"#),
    },
    Case {
        name: "python_repr_inside_json_string",
        input: r#"{"feedback": "{'success': True, 'order_id': 'O1'}", "config_changes": []}"#,
        expected: Object(r#"{"feedback": "{'success': True, 'order_id': 'O1'}", "config_changes": []}"#),
    },
    Case {
        name: "empty",
        input: "",
        expected: Failure("empty"),
    },
    Case {
        name: "whitespace_only",
        input: "  \n\t \r\n",
        expected: Failure("empty"),
    },
    Case {
        name: "just_prose",
        input: "I'm sorry, I can't help with that.",
        expected: Failure("no_object"),
    },
    Case {
        name: "bare_array_of_objects",
        input: r#"[{"feedback": "a"}, {"feedback": "b"}]"#,
        expected: Failure("not_an_object"),
    },
    Case {
        name: "bare_array_of_numbers",
        input: "[1, 2, 3]",
        expected: Failure("not_an_object"),
    },
    Case {
        name: "bare_number",
        input: "42",
        expected: Failure("not_an_object"),
    },
    Case {
        name: "bare_string",
        input: r#""just a string""#,
        expected: Failure("not_an_object"),
    },
    Case {
        name: "crlf_line_endings",
        input: "Answer:\r\n{\r\n  \"feedback\": \"ok\",\r\n  \"config_changes\": []\r\n}\r\n",
        expected: Object(r#"{"feedback": "ok", "config_changes": []}"#),
    },
    Case {
        name: "two_objects_back_to_back",
        input: r#"{"a":1}{"b":2}"#,
        expected: Object(r#"{"a": 1}"#),
    },
    Case {
        name: "earlier_object_lacks_keys",
        input: r#"Input was {"order_id": "O1"}. Prediction: {"feedback": "paid", "config_changes": []}"#,
        expected: Object(r#"{"feedback": "paid", "config_changes": []}"#),
    },
    Case {
        name: "nested_answer",
        input: r#"{"feedback": "x", "config_changes": [{"type": "add", "path": "a.b", "value": {"c": 1}}]}"#,
        expected: Object(r#"{"feedback": "x", "config_changes": [{"type": "add", "path": "a.b", "value": {"c": 1}}]}"#),
    },
    Case {
        name: "invalid_value",
        input: r#"{"feedback": "x", "config_changes": undefined}"#,
        expected: Failure("invalid"),
    },
    Case {
        name: "missing_comma",
        input: r#"{"feedback": "x" "config_changes": []}"#,
        expected: Failure("invalid"),
    },
    Case {
        name: "nan_value",
        input: r#"{"feedback": NaN}"#,
        expected: Failure("invalid"),
    },
    Case {
        name: "broken_object_with_nested_object",
        input: r#"{"feedback": "x", "config_changes": {"a": 1}, "done": yes}"#,
        expected: Failure("invalid"),
    },
    Case {
        name: "quoted_whole_output",
        input: r#"'{"feedback": "x"}'"#,
        expected: Object(r#"{"feedback": "x"}"#),
    },
    Case {
        name: "xml_wrapper",
        input: "<answer>{\"feedback\": \"x\"}</answer>",
        expected: Object(r#"{"feedback": "x"}"#),
    },
    Case {
        name: "number_forms",
        input: r#"{"feedback": "x", "count": 1.0, "n": 1, "big": 12345678901234567890, "neg": -3}"#,
        expected: Object(r#"{"feedback": "x", "count": 1.0, "n": 1, "big": 12345678901234567890, "neg": -3}"#),
    },
    Case {
        name: "fence_inside_json_string",
        input: r#"{"feedback": "```\n{'success': False, 'error': 'x'}\n```", "config_changes": []}"#,
        expected: Object(r#"{"feedback": "```\n{'success': False, 'error': 'x'}\n```", "config_changes": []}"#),
    },
    Case {
        name: "think_tags_inside_json_string",
        input: r#"{"feedback": "<think>a</think> b", "config_changes": []}"#,
        expected: Object(r#"{"feedback": "<think>a</think> b", "config_changes": []}"#),
    },
    Case {
        name: "draft_with_fewer_keys_first",
        input: "Draft: {\"feedback\": \"draft\"}\nFinal: {\"feedback\": \"ok\", \"config_changes\": []}",
        expected: Object(r#"{"feedback": "ok", "config_changes": []}"#),
    },
    Case {
        name: "wrapped_answer",
        input: r#"{"answer": {"feedback": "x", "config_changes": []}}"#,
        expected: Object(r#"{"feedback": "x", "config_changes": []}"#),
    },
    Case {
        name: "unclosed_think_then_fenced_answer",
        input: "<think>Let me see {x}.\n```json\n{\"feedback\": \"y\", \"config_changes\": []}\n```",
        expected: Object(r#"{"feedback": "y", "config_changes": []}"#),
    },
    Case {
        name: "markdown_bold_label",
        input: "**Prediction**: {\"feedback\": \"ok\", \"config_changes\": [{\"type\": \"delete\", \"path\": \"x\"}]}",
        expected: Object(r#"{"feedback": "ok", "config_changes": [{"type": "delete", "path": "x"}]}"#),
    },
];

fn outcome(input: &str) -> Result<Value, &'static str> {
    extract_object(input, KEYS)
        .map(|e| Value::Object(e.object))
        .map_err(|f| f.code())
}

#[test]
fn corpus_has_enough_cases() {
    assert!(CASES.len() >= 45, "only {} cases", CASES.len());
    let mut names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), CASES.len(), "duplicate case names");
}

#[test]
fn corpus_outcomes() {
    let mut wrong = Vec::new();
    for case in CASES {
        let expected = match case.expected {
            Object(text) => match serde_json::from_str::<Value>(text) {
                Ok(v) => Ok(v),
                Err(e) => panic!("{}: bad expected JSON: {e}", case.name),
            },
            Failure(code) => Err(code),
        };
        let got = outcome(case.input);
        if got != expected {
            wrong.push(format!("{}: expected {expected:?}, got {got:?}", case.name));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn corpus_spans_cover_the_object() {
    for case in CASES {
        let Ok(extracted) = extract_object(case.input, KEYS) else {
            continue;
        };
        let Some(slice) = case.input.get(extracted.span.clone()) else {
            panic!(
                "{}: span {:?} is not a slice of the input",
                case.name, extracted.span
            );
        };
        assert!(
            slice.starts_with('{') && slice.ends_with('}'),
            "{}: {slice:?}",
            case.name
        );
        let reparsed =
            parse_literal_prefix(slice, Dialect::Relaxed).map(|(v, end)| (v, end == slice.len()));
        assert_eq!(
            reparsed,
            Ok((Value::Object(extracted.object.clone()), true)),
            "{}",
            case.name
        );
    }
}

#[test]
fn corpus_repairs() {
    let repairs = |input: &str| {
        extract_object(input, KEYS)
            .map(|e| e.repairs)
            .unwrap_or_default()
    };
    let find = |name: &str| {
        CASES
            .iter()
            .find(|c| c.name == name)
            .map_or("", |c| c.input)
    };
    assert_eq!(repairs(find("plain_json")), []);
    assert_eq!(repairs(find("prose_before")), [Repair::SurroundingText]);
    assert_eq!(repairs(find("json_fence")), [Repair::Fenced]);
    assert_eq!(
        repairs(find("json_fence_uppercase")),
        [Repair::Fenced, Repair::SurroundingText]
    );
    assert_eq!(repairs(find("think_closed")), [Repair::ThinkStripped]);
    assert_eq!(
        repairs(find("python_literals")),
        [Repair::PythonLiterals, Repair::SingleQuotes]
    );
    assert_eq!(repairs(find("trailing_commas")), [Repair::TrailingCommas]);
    assert_eq!(
        repairs(find("raw_newline_in_string")),
        [Repair::LenientSyntax]
    );
    assert_eq!(
        repairs(find("crlf_line_endings")),
        [Repair::SurroundingText]
    );
    assert_eq!(
        repairs(find("python_fence")),
        [Repair::Fenced, Repair::PythonLiterals, Repair::SingleQuotes]
    );
}

#[test]
fn failure_details() {
    assert_eq!(
        extract_object(find_input("truncated_mid_key"), KEYS),
        Err(ParseFailure::Truncated { offset: 6 })
    );
    let input = find_input("invalid_value");
    match extract_object(input, KEYS) {
        Err(ParseFailure::Invalid { offset, message }) => {
            assert_eq!(offset, input.find("undefined").unwrap_or(usize::MAX));
            assert_eq!(message, "unsupported syntax: name `undefined`");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        extract_object(find_input("bare_array_of_objects"), KEYS),
        Err(ParseFailure::NotAnObject { found: "array" })
    );
    assert_eq!(
        extract_object(find_input("bare_string"), KEYS),
        Err(ParseFailure::NotAnObject { found: "string" })
    );
}

fn find_input(name: &str) -> &'static str {
    CASES
        .iter()
        .find(|c| c.name == name)
        .map_or("", |c| c.input)
}

#[test]
fn deeply_nested_object_is_too_deep() {
    let depth = 200;
    let text = format!("{}1{}", r#"{"a": "#.repeat(depth), "}".repeat(depth));
    assert_eq!(extract_object(&text, KEYS), Err(ParseFailure::TooDeep));
    let with_prose = format!("Here you go: {text} bye");
    assert_eq!(
        extract_object(&with_prose, KEYS),
        Err(ParseFailure::TooDeep)
    );
}

#[test]
fn very_long_string() {
    let long = "x".repeat(200_000);
    let text = format!("Answer: {{\"feedback\": \"{long}\", \"config_changes\": []}}");
    assert_eq!(
        outcome(&text),
        Ok(json!({"feedback": long, "config_changes": []}))
    );
}

#[test]
fn many_braces_stay_fast_and_safe() {
    // Each of these makes naive scanners quadratic or recursive without
    // bound; the cost is watched by the parsing bench, the outcome here.
    let inputs = [
        "{".repeat(100_000),
        "[".repeat(100_000),
        "{\"a\":".repeat(50_000),
        "{a} ".repeat(50_000),
        "[{".repeat(50_000),
        format!("{}{{\"feedback\": 1}}", "{x ".repeat(50_000)),
    ];
    let outcomes: Vec<Result<Value, &str>> = inputs.iter().map(|i| outcome(i)).collect();
    assert_eq!(
        outcomes,
        [
            Err("too_deep"),
            Err("no_object"),
            Err("too_deep"),
            Err("invalid"),
            Err("too_deep"),
            Ok(json!({"feedback": 1})),
        ]
    );
}
