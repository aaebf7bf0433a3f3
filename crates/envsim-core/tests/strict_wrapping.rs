//! The strict lane reads the same answer however the model wraps it.
//!
//! For generated transitions and predictions that score CM-strict, the raw
//! output keeps its CM-strict and FM-strict scores (and its extracted object)
//! when it is surrounded by prose, put in a fence or preceded by reasoning.
//! String values in the states, observations and predictions are drawn from
//! texts that contain the markers the extractor looks for: fences, braces,
//! `<think>` tags, quotes.

use envsim_core::diff::{changes_to_json, fine_diff, PathStyle};
use envsim_core::extract::extract_object;
use envsim_core::prelude::*;
use envsim_core::python::repr::to_python_repr;
use envsim_core::score::OUTPUT_KEYS;
use envsim_testkit::transition;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// Keys, some of which need escaping in pointers or contain dots.
const KEYS: [&str; 7] = ["a", "b", "c.d", "0", "x/y", "~t", "e f"];

/// String values that contain what the extractor treats specially.
const TRICKY: [&str; 14] = [
    "",
    "plain",
    "```",
    "```json\n{\"a\": 1}\n```",
    "```\n{'success': False, 'error': 'x'}\n```",
    "use {x} here",
    "{",
    "}",
    "<think>",
    "</think>",
    "<think>hmm {'draft': True}</think>",
    "it's \"quoted\"",
    "[1, 2] and {'a': [3]}",
    "line one\nline two ``` ü",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..4).prop_map(Value::from),
        prop_oneof![Just(1.0f64), Just(0.5), Just(-2.0)].prop_map(Value::from),
        prop::sample::select(TRICKY.to_vec()).prop_map(Value::from),
    ]
}

fn object_of<S: Strategy<Value = Value>>(values: S) -> impl Strategy<Value = Value> {
    prop::collection::vec((prop::sample::select(KEYS.to_vec()), values), 0..4).prop_map(|pairs| {
        Value::Object(
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect::<Map<_, _>>(),
        )
    })
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            object_of(inner),
        ]
    })
}

fn state() -> impl Strategy<Value = Value> {
    object_of(json_value())
}

/// Observations: the `str()` of a return value, or a JSON value.
fn observation() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(TRICKY.to_vec()).prop_map(Value::from),
        Just(json!("{'success': True}")),
        json_value(),
    ]
}

/// How the answer object is written.
#[derive(Debug, Clone, Copy)]
enum Notation {
    Compact,
    Pretty,
    Python,
}

fn render(object: &Value, notation: Notation) -> String {
    match notation {
        Notation::Compact => object.to_string(),
        Notation::Pretty => serde_json::to_string_pretty(object).unwrap_or_default(),
        Notation::Python => to_python_repr(object),
    }
}

/// Prose around an answer: braces, apostrophes, quotes and stray backticks.
const PROSE_BEFORE: [&str; 6] = [
    "Here is the result:\n",
    "I don't think {x} changes; use {x} and {y}. It's this: ",
    "Answer (see {a}, [b] and the `code`): ",
    "The tool's output \"quoted\" is:\n\n",
    "Stray ``` marks aside, ",
    "**Prediction**:\n",
];
const PROSE_AFTER: [&str; 5] = [
    "",
    "\nHope that helps, don't hesitate to ask {more}.",
    " That's all {folks}!",
    "\n\n(Note: {braces} and 'quotes' in prose are fine.)",
    "\nLet me know if you'd like changes to [the plan].",
];

/// Reasoning before the answer: drafts, fences, braces, quoted tags.
const THINKING: [&str; 7] = [
    "The call updates the state.",
    "Draft: {\"feedback\": \"draft\", \"config_changes\": []} hmm, wrong.",
    "```json\n{\"draft\": true}\n```\nno, use {x}",
    "It's {y}; a lone ``` fence marker",
    "Maybe {'feedback': 'draft', 'config_changes': None}",
    "The draft {\"feedback\": \"</think> inside\"} quotes a tag.",
    "Nested <think> opening, {braces} and [1, 2].",
];

/// The ways of wrapping the answer text `body` that must not change its score.
fn wrappings(body: &str, before: &str, after: &str, thinking: &str) -> Vec<(&'static str, String)> {
    vec![
        ("prose before", format!("{before}{body}")),
        ("prose after", format!("{body}{after}")),
        ("prose around", format!("{before}{body}{after}")),
        ("json fence", format!("```json\n{body}\n```")),
        (
            "json fence in prose",
            format!("{before}\n```json\n{body}\n```{after}"),
        ),
        ("bare fence", format!("```\n{body}\n```")),
        ("python fence", format!("```python\n{body}\n```\n{after}")),
        ("think", format!("<think>{thinking}</think>\n{body}")),
        (
            "think, fence",
            format!("<think>\n{thinking}\n</think>\n\n```json\n{body}\n```"),
        ),
        (
            "think, prose",
            format!("<think>{thinking}</think>{before}{body}{after}"),
        ),
    ]
}

/// The answer text to wrap, and its strict scores.
struct Answer {
    text: String,
    cm_strict: bool,
    fm_strict: bool,
    object: Map<String, Value>,
}

fn answer(sample: &mut PreparedSample, object: &Value, notation: Notation) -> Answer {
    let text = render(object, notation);
    let score = sample.score(&Prediction::Raw(text.clone()), None);
    let object = extract_object(&text, &OUTPUT_KEYS)
        .map(|e| e.object)
        .unwrap_or_default();
    Answer {
        text,
        cm_strict: score.cm_strict,
        fm_strict: score.fm_strict,
        object,
    }
}

/// Checks every wrapping of `answer`, which must score CM-strict.
fn check_wrappings(
    sample: &mut PreparedSample,
    answer: &Answer,
    prose: (usize, usize, usize),
) -> Result<(), TestCaseError> {
    prop_assert!(answer.cm_strict, "unwrapped answer {:?}", answer.text);
    let (before, after, thinking) = prose;
    for (name, wrapped) in wrappings(
        &answer.text,
        PROSE_BEFORE[before % PROSE_BEFORE.len()],
        PROSE_AFTER[after % PROSE_AFTER.len()],
        THINKING[thinking % THINKING.len()],
    ) {
        let extracted = extract_object(&wrapped, &OUTPUT_KEYS).map(|e| e.object);
        prop_assert_eq!(
            extracted.as_ref().ok(),
            Some(&answer.object),
            "{}: {:?}",
            name,
            wrapped
        );
        let score = sample.score(&Prediction::Raw(wrapped.clone()), None);
        prop_assert!(score.cm_strict, "{}: {:?}", name, wrapped);
        prop_assert_eq!(score.fm_strict, answer.fm_strict, "{}: {:?}", name, wrapped);
    }
    Ok(())
}

fn notation() -> impl Strategy<Value = Notation> {
    prop_oneof![
        Just(Notation::Compact),
        Just(Notation::Pretty),
        Just(Notation::Python)
    ]
}

fn prose() -> impl Strategy<Value = (usize, usize, usize)> {
    (
        0..PROSE_BEFORE.len(),
        0..PROSE_AFTER.len(),
        0..THINKING.len(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The oracle's answer, in key-list or pointer paths and any notation.
    #[test]
    fn oracle_answers_survive_wrapping(
        before in state(),
        after in state(),
        obs in observation(),
        pointer_paths in any::<bool>(),
        notation in notation(),
        prose in prose(),
    ) {
        let mut sample = PreparedSample::new(transition(before, after, obs));
        let Prediction::Parsed(mut object) = Baseline::Oracle.predict(sample.transition()) else {
            unreachable!("the oracle predicts a parsed object");
        };
        if pointer_paths {
            let t = sample.transition();
            object["config_changes"] =
                changes_to_json(&fine_diff(&t.config_before, &t.config_after), PathStyle::Pointer);
        }
        let answer = answer(&mut sample, &object, notation);
        prop_assert!(answer.fm_strict, "the oracle's feedback is right: {:?}", answer.text);
        check_wrappings(&mut sample, &answer, prose)?;
    }

    /// Right changes with a wrong (tricky) feedback: CM-strict holds and
    /// FM-strict stays what it was.
    #[test]
    fn wrong_feedback_answers_survive_wrapping(
        before in state(),
        after in state(),
        obs in observation(),
        feedback in prop::sample::select(TRICKY.to_vec()),
        notation in notation(),
        prose in prose(),
    ) {
        let mut sample = PreparedSample::new(transition(before, after, obs));
        let Prediction::Parsed(mut object) = Baseline::Oracle.predict(sample.transition()) else {
            unreachable!("the oracle predicts a parsed object");
        };
        object["feedback"] = json!(feedback);
        let answer = answer(&mut sample, &object, notation);
        check_wrappings(&mut sample, &answer, prose)?;
    }

    /// No-change answers (the null baseline's, with any feedback) for
    /// unchanged states.
    #[test]
    fn no_change_answers_survive_wrapping(
        state in state(),
        obs in observation(),
        feedback in prop::sample::select(TRICKY.to_vec()),
        notation in notation(),
        prose in prose(),
    ) {
        let mut sample = PreparedSample::new(transition(state.clone(), state, obs));
        let Prediction::Parsed(mut object) = Baseline::Null.predict(sample.transition()) else {
            unreachable!("the null baseline predicts a parsed object");
        };
        object["feedback"] = json!(feedback);
        let answer = answer(&mut sample, &object, notation);
        check_wrappings(&mut sample, &answer, prose)?;
    }
}

/// The case that motivated the fence rule, end to end through the scorer.
#[test]
fn fenced_observation_in_feedback_scores_strictly() {
    let observation = json!("```\n{'success': False, 'error': 'x'}\n```");
    let before = json!({"a": 1});
    let after = json!({"a": 2});
    let mut sample = PreparedSample::new(transition(before, after, observation.clone()));
    let object = json!({
        "feedback": observation,
        "config_changes": [{"type": "modify", "path": ["a"], "value": 2}]
    });
    for text in [
        object.to_string(),
        format!("```json\n{object}\n```"),
        format!("<think>```\n{{'success': True}}\n```</think>\nSure: {object} done"),
    ] {
        let score = sample.score(&Prediction::Raw(text.clone()), None);
        assert!(score.cm_strict && score.fm_strict, "{text}");
    }
}
