//! Tool answers as transcripts carry them, read into values.
//!
//! A tool's answer reaches a transcript as text in one of a few forms, depending on who printed
//! it: JSON (`json.dumps`, HTTP APIs), a Python literal (`str(result)` of a dict, the form
//! EnvScaler- and EnvSimBench-style environments print: `{'success': True, 'data': None}`), a
//! JSON value or literal embedded in prose (`Result: {...}`, `Tool output:\n[...]`), or plain
//! text. [`read_answer_text`] reads each into a value and says which form it was, so that an
//! audit can report how much of a file it could read and refuse a file it could not.
//!
//! Plain text stays a string: the checks read its outcome by the environment's rule and its
//! "not found" wording, nothing more.

use serde::Serialize;
use serde_json::Value;

use crate::literal::{parse_literal, parse_literal_prefix, Dialect};

/// The form a tool answer was written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerForm {
    /// A JSON text.
    Json,
    /// A Python literal (`str()` or `repr()` of dicts, lists, strings, numbers, `True`/`None`).
    PythonLiteral,
    /// A JSON value or Python literal inside other text (`Result: {...}`); the embedded value
    /// is the answer.
    Embedded,
    /// Text with no structured value in it.
    Text,
    /// Already a structured value in the record (an object or number as content, not text).
    Structured,
    /// No answer (`null`, missing, or empty text).
    Empty,
}

impl AnswerForm {
    /// Every form, in report order.
    pub const ALL: [AnswerForm; 6] = [
        AnswerForm::Json,
        AnswerForm::PythonLiteral,
        AnswerForm::Embedded,
        AnswerForm::Text,
        AnswerForm::Structured,
        AnswerForm::Empty,
    ];

    /// The form's name in reports (`json`, `python_literal`, ...).
    pub fn name(self) -> &'static str {
        match self {
            AnswerForm::Json => "json",
            AnswerForm::PythonLiteral => "python_literal",
            AnswerForm::Embedded => "embedded",
            AnswerForm::Text => "text",
            AnswerForm::Structured => "structured",
            AnswerForm::Empty => "empty",
        }
    }

    /// Whether the answer gave a structured value (records and fields can be read from it).
    pub fn is_structured(self) -> bool {
        matches!(
            self,
            AnswerForm::Json
                | AnswerForm::PythonLiteral
                | AnswerForm::Embedded
                | AnswerForm::Structured
        )
    }
}

/// A tool answer, read.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The value: parsed for the structured forms, the trimmed text for [`AnswerForm::Text`],
    /// `Null` for [`AnswerForm::Empty`].
    pub value: Value,
    /// The form it was written in.
    pub form: AnswerForm,
    /// For [`AnswerForm::Embedded`], the whole text (an outcome rule written for the text,
    /// such as an error prefix, is read on it).
    pub text: Option<String>,
}

impl Answer {
    /// An answer that is already a value in the record: text is read with
    /// [`read_answer_text`], `null` is empty, anything else is structured.
    pub fn of_value(value: Option<&Value>) -> Answer {
        match value {
            None | Some(Value::Null) => Answer::empty(),
            Some(Value::String(text)) => read_answer_text(text),
            Some(other) => Answer {
                value: other.clone(),
                form: AnswerForm::Structured,
                text: None,
            },
        }
    }

    /// The answer's outcome by `classify` (an outcome rule, or a guess), read on the value and,
    /// for a value embedded in text, on the whole text as well: a failure either reading finds
    /// is a failure (AppWorld's `Response status code is 422:\n{"message": ...}` fails by its
    /// prefix although the embedded object alone looks like an answer), else what either
    /// decides.
    pub fn outcome(&self, classify: impl Fn(&Value) -> Option<bool>) -> Option<bool> {
        let on_value = classify(&self.value);
        let on_text = self
            .text
            .as_ref()
            .and_then(|text| classify(&Value::String(text.clone())));
        match (on_value, on_text) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (value, text) => value.or(text),
        }
    }

    /// No answer.
    pub fn empty() -> Answer {
        Answer {
            value: Value::Null,
            form: AnswerForm::Empty,
            text: None,
        }
    }
}

/// The shortest embedded value worth reading as the answer: `{}`/`[]` in prose are not a
/// payload (`"Done []"`), and a lone number or word inside text is text.
const MIN_EMBEDDED: usize = 2;

/// The most places in one text where an embedded value is tried.
const MAX_EMBEDDED_STARTS: usize = 64;

/// Reads an answer text: JSON first (what JSON says is what it means), then a Python literal,
/// then the largest object or array embedded in the text, else the trimmed text.
pub fn read_answer_text(text: &str) -> Answer {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Answer::empty();
    }
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return Answer {
            value,
            form: AnswerForm::Json,
            text: None,
        };
    }
    if let Ok(value) = parse_literal(trimmed, Dialect::Python) {
        // A bare word parses as nothing in Python, but a tuple of words does not either; only
        // values that are literals reach here.
        return Answer {
            value,
            form: AnswerForm::PythonLiteral,
            text: None,
        };
    }
    match embedded(trimmed) {
        Some(value) => Answer {
            value,
            form: AnswerForm::Embedded,
            text: Some(trimmed.to_owned()),
        },
        None => Answer {
            value: Value::String(trimmed.to_owned()),
            form: AnswerForm::Text,
            text: None,
        },
    }
}

/// The largest object (else array) that starts at a `{` or `[` of the text and parses as JSON
/// or a Python literal; one that holds nothing is not taken.
fn embedded(text: &str) -> Option<Value> {
    let mut best: Option<(bool, usize, Value)> = None;
    let mut from = 0;
    // Each start that does not parse costs a scan: a bounded number of them keeps a long text
    // of stray brackets linear.
    let mut starts = 0;
    while let Some(offset) = text[from..].find(['{', '[']) {
        starts += 1;
        if starts > MAX_EMBEDDED_STARTS {
            break;
        }
        let at = from + offset;
        let rest = &text[at..];
        let parsed = parse_literal_prefix(rest, Dialect::Json)
            .or_else(|_| parse_literal_prefix(rest, Dialect::Python));
        match parsed {
            Ok((value, len)) if len >= MIN_EMBEDDED && !is_hollow(&value) => {
                let rank = (value.is_object(), len);
                if best
                    .as_ref()
                    .is_none_or(|(object, size, _)| rank > (*object, *size))
                {
                    best = Some((rank.0, rank.1, value));
                }
                // What it holds was read with it.
                from = at + len;
            }
            _ => from = at + 1,
        }
        if from >= text.len() {
            break;
        }
    }
    best.map(|(_, _, value)| value)
}

fn is_hollow(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => true,
    }
}

/// How many answers were read in each form.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AnswerTally {
    /// Answers per form.
    pub forms: std::collections::BTreeMap<AnswerForm, usize>,
    /// Answers whose outcome (success or failure) could be read.
    pub outcome_read: usize,
    /// Answers read: a structured value, or text whose outcome was read.
    pub read: usize,
    /// All answers counted.
    pub answers: usize,
}

impl AnswerTally {
    /// Counts one answer, and whether its outcome was read.
    pub fn add(&mut self, form: AnswerForm, outcome_read: bool) {
        *self.forms.entry(form).or_default() += 1;
        self.answers += 1;
        self.outcome_read += usize::from(outcome_read);
        self.read += usize::from(form.is_structured() || outcome_read);
    }

    /// Answers nothing could be read from: empty, or text of unknown outcome.
    pub fn unread(&self) -> usize {
        self.answers - self.read
    }

    /// The share of answers read (1 when there were none).
    pub fn read_share(&self) -> f64 {
        if self.answers == 0 {
            1.0
        } else {
            self.read as f64 / self.answers as f64
        }
    }

    /// Adds another tally.
    pub fn merge(&mut self, other: &AnswerTally) {
        for (form, n) in &other.forms {
            *self.forms.entry(*form).or_default() += n;
        }
        self.answers += other.answers;
        self.outcome_read += other.outcome_read;
        self.read += other.read;
    }
}

/// An executor's observation as a value: its JSON form when the executor gave one, else its
/// text read as an answer ([`read_answer_text`]: JSON, a Python literal, else the text).
pub fn observation_value(json: &Value, text: &str) -> Value {
    if !json.is_null() {
        return json.clone();
    }
    read_answer_text(text).value
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> (Value, AnswerForm) {
        let a = read_answer_text(text);
        (a.value, a.form)
    }

    #[test]
    fn every_form_is_read() {
        assert_eq!(
            read(r#" {"success": true, "data": {"id": 1}} "#),
            (
                json!({"success": true, "data": {"id": 1}}),
                AnswerForm::Json
            )
        );
        assert_eq!(
            read("{'success': True, 'data': {'note_id': 'N1', 'body': None}}"),
            (
                json!({"success": true, "data": {"note_id": "N1", "body": null}}),
                AnswerForm::PythonLiteral
            )
        );
        assert_eq!(
            read("[('a', 1), ('b', 2)]"),
            (json!([["a", 1], ["b", 2]]), AnswerForm::PythonLiteral)
        );
        assert_eq!(
            read("Result: {'ok': False, 'error': 'Note N9 not found'}"),
            (
                json!({"ok": false, "error": "Note N9 not found"}),
                AnswerForm::Embedded
            )
        );
        assert_eq!(
            read("Tool output:\n[{\"id\": 1}, {\"id\": 2}]\nDone."),
            (json!([{"id": 1}, {"id": 2}]), AnswerForm::Embedded)
        );
        assert_eq!(
            read("Note N1 was deleted."),
            (json!("Note N1 was deleted."), AnswerForm::Text)
        );
        assert_eq!(read("  "), (Value::Null, AnswerForm::Empty));
        assert_eq!(read("42"), (json!(42), AnswerForm::Json));
        assert_eq!(read("True"), (json!(true), AnswerForm::PythonLiteral));
    }

    #[test]
    fn embedded_values_prefer_the_largest_object() {
        // Brackets in prose and empty values are not the payload.
        assert_eq!(
            read("[info] saved {} then {'id': 'A', 'n': [1, 2]} and [3]"),
            (json!({"id": "A", "n": [1, 2]}), AnswerForm::Embedded)
        );
        assert_eq!(read("Done [] {}"), (json!("Done [] {}"), AnswerForm::Text));
        // Unbalanced text is text, not a panic; a long run of stray brackets is given up on
        // after a bounded number of tries (text, read in time).
        assert_eq!(read("oops {'a': "), (json!("oops {'a':"), AnswerForm::Text));
        let stray = "{'a': [".repeat(20_000);
        assert_eq!(read(&stray).1, AnswerForm::Text);
        let a = read_answer_text("Error: {'code': 404}");
        assert_eq!(a.text.as_deref(), Some("Error: {'code': 404}"));
    }

    #[test]
    fn values_in_records() {
        assert_eq!(Answer::of_value(None).form, AnswerForm::Empty);
        assert_eq!(Answer::of_value(Some(&json!(null))).form, AnswerForm::Empty);
        assert_eq!(
            Answer::of_value(Some(&json!({"a": 1}))).form,
            AnswerForm::Structured
        );
        assert_eq!(
            Answer::of_value(Some(&json!("{'a': 1}"))).value,
            json!({"a": 1})
        );
    }

    #[test]
    fn tallies_count_what_was_read() {
        let mut t = AnswerTally::default();
        t.add(AnswerForm::PythonLiteral, true);
        t.add(AnswerForm::Text, false);
        t.add(AnswerForm::Empty, false);
        t.add(AnswerForm::Json, true);
        assert_eq!(
            (t.answers, t.read, t.unread(), t.outcome_read),
            (4, 2, 2, 2)
        );
        t.add(AnswerForm::Json, false);
        assert_eq!((t.read, t.outcome_read), (3, 2));
        assert_eq!(t.read_share(), 0.6);
        let mut all = AnswerTally::default();
        all.merge(&t);
        all.merge(&t);
        assert_eq!(all.forms[&AnswerForm::Text], 2);
        assert_eq!(AnswerTally::default().read_share(), 1.0);
    }

    mod props {
        use super::super::*;
        use crate::python::repr::to_python_repr;
        use proptest::prelude::*;
        use serde_json::Value;

        fn arb_value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                (-1.0e6f64..1.0e6).prop_map(Value::from),
                "[ -~]{0,12}".prop_map(Value::String),
                "\\PC{0,8}".prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 32, 6, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                    proptest::collection::vec(("[a-z_]{1,8}", inner), 0..5)
                        .prop_map(|entries| Value::Object(entries.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            /// What `str(result)` prints is read back exactly, and so is JSON.
            #[test]
            fn python_literals_and_json_read_back(v in arb_value()) {
                let py = read_answer_text(&to_python_repr(&v));
                prop_assert!(py.form.is_structured() || py.form == AnswerForm::Empty, "{:?}", py.form);
                if py.form != AnswerForm::Empty {
                    prop_assert_eq!(&py.value, &v);
                }
                let js = read_answer_text(&v.to_string());
                if js.form != AnswerForm::Empty {
                    prop_assert_eq!(js.form, AnswerForm::Json);
                    prop_assert_eq!(&js.value, &v);
                }
            }

            /// An object printed after a word of prose is the answer.
            #[test]
            fn embedded_objects_are_found(v in arb_value()) {
                let Value::Object(map) = &v else { return Ok(()) };
                if map.is_empty() {
                    return Ok(());
                }
                let a = read_answer_text(&format!("Result: {}", to_python_repr(&v)));
                prop_assert_eq!(a.form, AnswerForm::Embedded);
                prop_assert_eq!(&a.value, &v);
            }

            /// No text makes the reader panic, and a structured read is never empty text.
            #[test]
            fn any_text_is_read(text in "\\PC{0,64}") {
                let a = read_answer_text(&text);
                if a.form == AnswerForm::Text {
                    prop_assert_eq!(a.value, Value::String(text.trim().to_owned()));
                }
            }
        }
    }

    #[test]
    fn an_embedded_answer_fails_by_its_text_or_its_value() {
        let prefix = crate::outcome::OutcomeRule::ErrorPrefix {
            prefix: "Response status code is".into(),
        };
        let refused = read_answer_text(
            "Response status code is 409:\n{\"message\": \"The product with id 408 does not exist.\"}",
        );
        assert_eq!(refused.form, AnswerForm::Embedded);
        assert_eq!(refused.outcome(|v| prefix.classify(v)), Some(false));
        let fine = read_answer_text("Result: {\"id\": 3, \"title\": \"milk\"}");
        assert_eq!(fine.outcome(|v| prefix.classify(v)), Some(true));
        // A rule on the value still decides an embedded value.
        let key = crate::outcome::OutcomeRule::success_key();
        let failed = read_answer_text("Tool said: {'success': False, 'error': 'no such note'}");
        assert_eq!(failed.outcome(|v| key.classify(v)), Some(false));
        let done = read_answer_text("Tool said: {'success': True, 'data': 1}");
        assert_eq!(done.outcome(|v| key.classify(v)), Some(true));
        // Neither reading decides: undetermined.
        assert_eq!(read_answer_text("ok").outcome(|v| key.classify(v)), None);
    }
}
