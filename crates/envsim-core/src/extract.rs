//! Pulling the prediction object out of raw model output.
//!
//! Models wrap their JSON answer in reasoning, prose and Markdown, write
//! Python literals instead of JSON, and get cut off mid-answer. The
//! benchmark scores the *object*, so [`extract_object`] finds it, records
//! which leniencies were needed ([`Repair`]), and when there is no usable
//! object says precisely why ([`ParseFailure`]), so that failures can be
//! counted by cause.
//!
//! # Algorithm of [`extract_object`]
//!
//! 1. Text that is empty or whitespace only is [`ParseFailure::Empty`].
//! 2. Reasoning is removed: `<think>…</think>` blocks (tags matched
//!    case-insensitively, any number of blocks) are dropped. A `</think>`
//!    without an opening tag drops everything before it (chat templates that
//!    put `<think>` into the prompt); an opening `<think>` that is never
//!    closed drops everything after it. What is left is a list of segments
//!    of the original text, so all offsets keep referring to the original.
//!    Tags are recognised anywhere, even inside JSON strings.
//! 3. Candidate regions are, in order: the contents of Markdown code fences
//!    (three or more backticks and an optional language tag such as `json`,
//!    `JSON` or `python`; a fence that is never closed runs to the end of its
//!    segment), then the text outside fences. A region without any `{` that
//!    as a whole is a JSON or Python value (a bare array, number, string) is
//!    noted as such, so that the failure can say what was found.
//! 4. In each region every `{` is an attempt, scanned left to right. Quotes
//!    in the surrounding prose are not tracked (an apostrophe in "don't" is
//!    not a string delimiter); quoting matters only inside an attempt. An
//!    attempt parses one value with [`parse_literal_prefix`] in
//!    [`Dialect::Json`], and if that fails in [`Dialect::Relaxed`]; an object
//!    is a candidate and scanning resumes after it, so objects nested in a
//!    candidate are not candidates themselves. A failed attempt resumes the
//!    scan at the point where the parser gave up, so objects nested in the
//!    valid part of a broken object are not picked up either; an attempt
//!    that runs into the end of the region (truncation) or exceeds the depth
//!    limit ends the scan of the region. A `[` is an attempt too: an array
//!    that holds objects is noted (and skipped), any other array is skipped,
//!    and a failed `[` attempt is ignored (the objects inside a broken array
//!    are still found), except that running into the end of the region with
//!    a `{` still ahead counts as truncation.
//! 5. If no candidate turned up in fences, the whole segments are scanned
//!    once more ignoring fences (a stray triple backtick inside a JSON string
//!    would otherwise split the object).
//! 6. The first candidate that has any of the preferred keys at its top
//!    level wins, else the first candidate.
//! 7. Without candidates the failure is, in this order of precedence:
//!    [`ParseFailure::Truncated`] if an attempt ran into the end of the text
//!    (one cut off by the end of a closed fence is invalid instead);
//!    [`ParseFailure::NotAnObject`] if a non-object value (or an array of
//!    objects) was found; [`ParseFailure::TooDeep`] or
//!    [`ParseFailure::Invalid`] for the failed attempt that looks most like
//!    the answer (the first whose text up to the next attempt mentions a
//!    preferred key as a quoted string, else the first);
//!    [`ParseFailure::UnclosedThink`] if an unclosed `<think>` swallowed the
//!    rest of the output; [`ParseFailure::NoObject`] otherwise.
//!
//! The module also reproduces the reference benchmark's own normalisation
//! ([`reference_extract_json`], [`reference_parse_to_obj`]), quirks
//! included, because its Feedback-Match metric depends on them.

use std::ops::Range;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::literal::{
    parse_literal, parse_literal_prefix, Dialect, LiteralError, LiteralErrorKind, MAX_DEPTH,
};

/// Why no prediction object could be extracted. [`ParseFailure::code`] gives
/// a stable identifier for counting failures by cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseFailure {
    /// The output is empty or whitespace only.
    #[error("model output is empty")]
    Empty,
    /// The output ends inside a `<think>` block and nothing usable precedes
    /// it: the model was still reasoning when it stopped.
    #[error("model output ends inside an unclosed <think> block")]
    UnclosedThink,
    /// No `{` that could start an object.
    #[error("no JSON object found in model output")]
    NoObject,
    /// The output ends inside the object that starts at byte `offset`.
    #[error("model output ends inside the object starting at byte {offset} (truncated)")]
    Truncated {
        /// Byte offset of the object's `{` in the original text.
        offset: usize,
    },
    /// The object that looks like the answer is malformed.
    #[error("invalid object: {message} at byte {offset}")]
    Invalid {
        /// Byte offset of the error in the original text.
        offset: usize,
        /// What is wrong, for people.
        message: String,
    },
    /// The object is nested deeper than [`MAX_DEPTH`] levels.
    #[error("object nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// The output holds a complete value that is not an object.
    #[error("expected a JSON object, found {found}")]
    NotAnObject {
        /// `"array"`, `"string"`, `"number"`, `"boolean"` or `"null"`.
        found: &'static str,
    },
}

impl ParseFailure {
    /// A stable snake_case identifier for the kind of failure, for reports
    /// and counters: `"empty"`, `"unclosed_think"`, `"no_object"`,
    /// `"truncated"`, `"invalid"`, `"too_deep"` or `"not_an_object"`.
    pub fn code(&self) -> &'static str {
        match self {
            ParseFailure::Empty => "empty",
            ParseFailure::UnclosedThink => "unclosed_think",
            ParseFailure::NoObject => "no_object",
            ParseFailure::Truncated { .. } => "truncated",
            ParseFailure::Invalid { .. } => "invalid",
            ParseFailure::TooDeep => "too_deep",
            ParseFailure::NotAnObject { .. } => "not_an_object",
        }
    }
}

/// A leniency that was needed to get the object, so that reports can show
/// how far model outputs stray from the requested format. Serialises as its
/// [`Repair::code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Repair {
    /// `<think>` reasoning was removed.
    ThinkStripped,
    /// The object came from a Markdown code fence.
    Fenced,
    /// There was other text around the object (outside reasoning and the
    /// fence markers).
    SurroundingText,
    /// The object uses `True`, `False` or `None`.
    PythonLiterals,
    /// The object has commas before closing brackets.
    TrailingCommas,
    /// The object has single-quoted strings.
    SingleQuotes,
    /// The object needed the relaxed dialect for something else: raw line
    /// breaks or tabs in strings, Python-only escapes or string prefixes,
    /// tuples or sets.
    LenientSyntax,
}

impl Repair {
    /// A stable snake_case identifier, equal to the serialised form.
    pub fn code(self) -> &'static str {
        match self {
            Repair::ThinkStripped => "think_stripped",
            Repair::Fenced => "fenced",
            Repair::SurroundingText => "surrounding_text",
            Repair::PythonLiterals => "python_literals",
            Repair::TrailingCommas => "trailing_commas",
            Repair::SingleQuotes => "single_quotes",
            Repair::LenientSyntax => "lenient_syntax",
        }
    }
}

/// The prediction object found in a model output.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    /// The object itself.
    pub object: Map<String, Value>,
    /// Byte range of the object's text in the original output.
    pub span: Range<usize>,
    /// The leniencies that were needed, without duplicates, in the order of
    /// the [`Repair`] variants.
    pub repairs: Vec<Repair>,
}

/// Finds the prediction object in raw model output; see the
/// [module docs](self) for the algorithm.
///
/// `preferred_keys` are top-level keys the answer is expected to have (for
/// example `["feedback", "config_changes"]`); they pick the answer among
/// several objects and the most relevant error among several broken ones.
///
/// # Errors
///
/// Returns why no object could be extracted.
pub fn extract_object(text: &str, preferred_keys: &[&str]) -> Result<Extracted, ParseFailure> {
    if text.trim().is_empty() {
        return Err(ParseFailure::Empty);
    }
    let kept = strip_think(text);
    let mut fences = Vec::new();
    for segment in &kept.segments {
        fences.extend(find_fences(text, segment.clone()));
    }
    let mut scan = Scanner::new(text);
    for (index, fence) in fences.iter().enumerate() {
        scan.region(fence.content.clone(), Some(index));
    }
    for segment in &kept.segments {
        let mut start = segment.start;
        for fence in fences
            .iter()
            .filter(|f| f.outer().start >= segment.start && f.outer().end <= segment.end)
        {
            scan.region(start..fence.outer().start, None);
            start = fence.outer().end;
        }
        scan.region(start..segment.end, None);
    }
    if scan.candidates.is_empty() && !fences.is_empty() {
        let mut fallback = Scanner::new(text);
        for segment in &kept.segments {
            fallback.region(segment.clone(), None);
        }
        scan.candidates = fallback.candidates;
    }

    let chosen = scan
        .candidates
        .iter()
        .position(|c| preferred_keys.iter().any(|k| c.object.contains_key(*k)))
        .or_else(|| (!scan.candidates.is_empty()).then_some(0));
    let Some(candidate) = chosen.and_then(|i| scan.candidates.into_iter().nth(i)) else {
        return Err(failure(
            text,
            &scan.failures,
            scan.non_object,
            kept.unclosed,
            preferred_keys,
        ));
    };

    let fence = candidate.fence.and_then(|i| fences.get(i));
    let mut repairs = Vec::new();
    if kept.stripped {
        repairs.push(Repair::ThinkStripped);
    }
    if fence.is_some() {
        repairs.push(Repair::Fenced);
    }
    let mut allowed = vec![candidate.span.clone()];
    if let Some(f) = fence {
        allowed.push(f.open.clone());
        allowed.extend(f.close.clone());
    }
    if has_other_text(text, &kept.segments, &allowed) {
        repairs.push(Repair::SurroundingText);
    }
    if candidate.relaxed {
        let features = relaxed_features(text.get(candidate.span.clone()).unwrap_or(""));
        if features.python_literals {
            repairs.push(Repair::PythonLiterals);
        }
        if features.trailing_commas {
            repairs.push(Repair::TrailingCommas);
        }
        if features.single_quotes {
            repairs.push(Repair::SingleQuotes);
        }
        if !(features.python_literals || features.trailing_commas || features.single_quotes) {
            repairs.push(Repair::LenientSyntax);
        }
    }
    Ok(Extracted {
        object: candidate.object,
        span: candidate.span,
        repairs,
    })
}

/// Chooses the failure to report when no candidate was found (step 7 of the
/// algorithm).
fn failure(
    text: &str,
    failures: &[Failure],
    non_object: Option<&'static str>,
    unclosed_think: bool,
    preferred_keys: &[&str],
) -> ParseFailure {
    if let Some(f) = failures.iter().find(|f| f.truncated) {
        return ParseFailure::Truncated { offset: f.start };
    }
    if let Some(found) = non_object {
        return ParseFailure::NotAnObject { found };
    }
    let mentions_key = |f: &&Failure| {
        let owned = text.get(f.start..f.owned_end).unwrap_or("");
        preferred_keys
            .iter()
            .any(|k| owned.contains(&format!("\"{k}\"")) || owned.contains(&format!("'{k}'")))
    };
    let chosen = failures.iter().find(mentions_key).or(failures.first());
    if let Some(f) = chosen {
        return match f.kind {
            LiteralErrorKind::TooDeep => ParseFailure::TooDeep,
            _ => ParseFailure::Invalid {
                offset: f.error_offset,
                message: f.message.clone(),
            },
        };
    }
    if unclosed_think {
        ParseFailure::UnclosedThink
    } else {
        ParseFailure::NoObject
    }
}

/// The parts of the text that survive reasoning removal.
struct Kept {
    segments: Vec<Range<usize>>,
    stripped: bool,
    unclosed: bool,
}

fn strip_think(text: &str) -> Kept {
    let tags = find_think_tags(text);
    let mut segments = Vec::new();
    let mut cursor = 0;
    let mut inside = false;
    for (range, closing) in &tags {
        match (closing, inside) {
            (false, false) => {
                segments.push(cursor..range.start);
                inside = true;
            }
            // A nested opening tag is part of the reasoning.
            (false, true) => {}
            (true, true) => {
                inside = false;
                cursor = range.end;
            }
            (true, false) => {
                segments.clear();
                cursor = range.end;
            }
        }
    }
    if !inside {
        segments.push(cursor..text.len());
    }
    segments.retain(|r| !r.is_empty());
    Kept {
        segments,
        stripped: !tags.is_empty(),
        unclosed: inside,
    }
}

/// Finds `<think>` and `</think>` tags (ASCII case-insensitive); the flag
/// says whether the tag is a closing one.
fn find_think_tags(text: &str) -> Vec<(Range<usize>, bool)> {
    const OPEN: &[u8] = b"<think>";
    const CLOSE: &[u8] = b"</think>";
    let bytes = text.as_bytes();
    let mut tags = Vec::new();
    let mut i = 0;
    while let Some(rel) = bytes
        .get(i..)
        .and_then(|rest| rest.iter().position(|&b| b == b'<'))
    {
        let at = i + rel;
        let matches = |tag: &[u8]| {
            bytes
                .get(at..at + tag.len())
                .is_some_and(|s| s.eq_ignore_ascii_case(tag))
        };
        if matches(OPEN) {
            tags.push((at..at + OPEN.len(), false));
            i = at + OPEN.len();
        } else if matches(CLOSE) {
            tags.push((at..at + CLOSE.len(), true));
            i = at + CLOSE.len();
        } else {
            i = at + 1;
        }
    }
    tags
}

/// A Markdown code fence: the opening marker with its language tag, the
/// contents, and the closing marker if there is one.
struct Fence {
    open: Range<usize>,
    content: Range<usize>,
    close: Option<Range<usize>>,
}

impl Fence {
    /// The whole fenced block, markers included.
    fn outer(&self) -> Range<usize> {
        let end = self.close.as_ref().map_or(self.content.end, |c| c.end);
        self.open.start..end
    }
}

fn find_fences(text: &str, segment: Range<usize>) -> Vec<Fence> {
    let bytes = text.as_bytes();
    let byte = |i: usize| {
        if i < segment.end {
            bytes.get(i).copied()
        } else {
            None
        }
    };
    let find_ticks = |from: usize| -> Option<usize> {
        let hay = bytes.get(from..segment.end)?;
        hay.windows(3).position(|w| w == b"```").map(|p| from + p)
    };
    let skip_ticks = |mut i: usize| {
        while byte(i) == Some(b'`') {
            i += 1;
        }
        i
    };
    let mut fences = Vec::new();
    let mut from = segment.start;
    while let Some(open_at) = find_ticks(from) {
        let mut lang_end = skip_ticks(open_at);
        while byte(lang_end).is_some_and(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'-' | b'.' | b'#')
        }) {
            lang_end += 1;
        }
        let open = open_at..lang_end;
        match find_ticks(lang_end) {
            Some(close_at) => {
                let close_end = skip_ticks(close_at);
                fences.push(Fence {
                    open,
                    content: lang_end..close_at,
                    close: Some(close_at..close_end),
                });
                from = close_end;
            }
            None => {
                fences.push(Fence {
                    open,
                    content: lang_end..segment.end,
                    close: None,
                });
                break;
            }
        }
    }
    fences
}

/// An object found by an attempt.
struct Candidate {
    object: Map<String, Value>,
    span: Range<usize>,
    fence: Option<usize>,
    relaxed: bool,
}

/// A `{` attempt that failed.
struct Failure {
    /// Offset of the `{`.
    start: usize,
    /// Offset of the error.
    error_offset: usize,
    kind: LiteralErrorKind,
    message: String,
    /// Where the next attempt (or the region) begins: the text this attempt
    /// "owns" when judging whether it looks like the answer.
    owned_end: usize,
    /// The attempt ran into the end of the whole text.
    truncated: bool,
}

/// Collects candidates and failures over the regions of one text.
struct Scanner<'t> {
    text: &'t str,
    candidates: Vec<Candidate>,
    failures: Vec<Failure>,
    non_object: Option<&'static str>,
}

impl<'t> Scanner<'t> {
    fn new(text: &'t str) -> Self {
        Scanner {
            text,
            candidates: Vec::new(),
            failures: Vec::new(),
            non_object: None,
        }
    }

    fn region(&mut self, region: Range<usize>, fence: Option<usize>) {
        let Some(slice) = self.text.get(region.clone()) else {
            return;
        };
        if slice.trim().is_empty() {
            return;
        }
        if !slice.contains('{') {
            // No object can start here; note a bare value such as `[1, 2]`
            // or `42` so that the failure can say what was found instead.
            if let Some(value) = whole_value(slice) {
                self.non_object.get_or_insert(type_name(&value));
            }
        }
        let bytes = self.text.as_bytes();
        let mut i = region.start;
        let mut open_failure: Option<usize> = None;
        while let Some(rel) = bytes
            .get(i..region.end)
            .and_then(|rest| rest.iter().position(|&b| b == b'{' || b == b'['))
        {
            let at = i + rel;
            if let Some(f) = open_failure
                .take()
                .and_then(|idx| self.failures.get_mut(idx))
            {
                f.owned_end = at;
            }
            let is_brace = bytes.get(at) == Some(&b'{');
            let sub = self.text.get(at..region.end).unwrap_or("");
            let attempt = match parse_literal_prefix(sub, Dialect::Json) {
                Ok(ok) => Ok((ok, false)),
                Err(json_err) => match parse_literal_prefix(sub, Dialect::Relaxed) {
                    Ok(ok) => Ok((ok, true)),
                    Err(relaxed_err) => Err((json_err, relaxed_err)),
                },
            };
            match attempt {
                Ok(((Value::Object(object), len), relaxed)) if is_brace => {
                    self.candidates.push(Candidate {
                        object,
                        span: at..at + len,
                        fence,
                        relaxed,
                    });
                    i = at + len;
                }
                Ok(((value, len), _)) => {
                    if let Value::Array(items) = &value {
                        if items.iter().any(Value::is_object) {
                            self.non_object.get_or_insert("array");
                        }
                    }
                    i = at + len.max(1);
                }
                Err((json_err, relaxed_err)) => {
                    let ran_out = relaxed_err.kind == LiteralErrorKind::UnexpectedEnd;
                    if !is_brace {
                        if ran_out {
                            if sub.contains('{') {
                                self.record(at, &relaxed_err, region.end);
                            }
                            break;
                        }
                        i = at + 1;
                        continue;
                    }
                    open_failure = Some(self.failures.len());
                    self.record(at, &relaxed_err, region.end);
                    if ran_out || relaxed_err.kind == LiteralErrorKind::TooDeep {
                        open_failure = None;
                        break;
                    }
                    i = at + json_err.offset.max(relaxed_err.offset).max(1);
                }
            }
        }
        if let Some(f) = open_failure.and_then(|idx| self.failures.get_mut(idx)) {
            f.owned_end = region.end;
        }
    }

    /// Records a failed attempt at `at`; `err` is relative to `at`.
    fn record(&mut self, at: usize, err: &LiteralError, region_end: usize) {
        let ran_out = err.kind == LiteralErrorKind::UnexpectedEnd;
        let truncated = ran_out && region_end == self.text.len();
        let message = if ran_out && !truncated {
            format!("object is incomplete: its block ends at byte {region_end}")
        } else {
            err.kind.to_string()
        };
        self.failures.push(Failure {
            start: at,
            error_offset: at + err.offset,
            kind: err.kind.clone(),
            message,
            owned_end: region_end,
            truncated,
        });
    }
}

/// The value `slice` consists of (apart from surrounding whitespace), in
/// JSON or else in the relaxed dialect. Unlike [`parse_literal`] this does
/// not read `a, b` as a tuple.
fn whole_value(slice: &str) -> Option<Value> {
    [Dialect::Json, Dialect::Relaxed]
        .into_iter()
        .find_map(|dialect| {
            let (value, end) = parse_literal_prefix(slice, dialect).ok()?;
            slice.get(end..)?.trim().is_empty().then_some(value)
        })
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether the kept text has non-whitespace outside the `allowed` ranges.
fn has_other_text(text: &str, segments: &[Range<usize>], allowed: &[Range<usize>]) -> bool {
    segments.iter().any(|segment| {
        text.get(segment.clone()).is_some_and(|s| {
            s.char_indices().any(|(i, c)| {
                let at = segment.start + i;
                !c.is_whitespace() && !allowed.iter().any(|r| r.contains(&at))
            })
        })
    })
}

/// Which Python-isms an object's text shows, found by a light scan that
/// skips over quoted strings.
#[derive(Default)]
struct RelaxedFeatures {
    python_literals: bool,
    trailing_commas: bool,
    single_quotes: bool,
}

fn relaxed_features(s: &str) -> RelaxedFeatures {
    let bytes = s.as_bytes();
    let mut features = RelaxedFeatures::default();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\'' | b'"' => {
                features.single_quotes |= b == b'\'';
                i += 1;
                while let Some(&c) = bytes.get(i) {
                    i += if c == b'\\' { 2 } else { 1 };
                    if c == b {
                        break;
                    }
                }
            }
            b',' => {
                let next = bytes
                    .get(i + 1..)
                    .and_then(|rest| rest.iter().find(|c| !c.is_ascii_whitespace()));
                features.trailing_commas |= matches!(next, Some(b'}' | b']' | b')'));
                i += 1;
            }
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let start = i;
                while bytes
                    .get(i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    i += 1;
                }
                features.python_literals |=
                    matches!(s.get(start..i), Some("True" | "False" | "None"));
            }
            _ => i += 1,
        }
    }
    features
}

/// Reproduces the reference benchmark's `extract_json`.
///
/// In order: (1) the first ```` ```json ```` fenced block (up to the next
/// ```` ``` ````, trimmed), parsed as JSON, then as a Python literal; (2) the
/// whole text as JSON, then as a Python literal; (3) the first non-greedy
/// `\{[\s\S]*?\}` match, i.e. from the first `{` to the first `}` after it,
/// as JSON, then as a Python literal. The first success is returned, whatever
/// its type.
///
/// Bug-compatibility notes: step 3 cuts nested objects at their first `}`,
/// so it only succeeds for flat objects; a step that parses to `null`
/// returns `None` (in Python the parsed `None` and "no result" coincide, and
/// the reference returns right away); JSON is parsed with this crate's
/// strict JSON parser, so the few things Python's `json.loads` accepts
/// beyond RFC 8259 (`NaN`, `Infinity`, lone surrogates) fall through to the
/// next step instead.
pub fn reference_extract_json(text: &str) -> Option<Value> {
    let json_then_python = |s: &str| -> Option<Value> {
        parse_literal(s, Dialect::Json)
            .or_else(|_| parse_literal(s, Dialect::Python))
            .ok()
    };
    let fenced = text.find("```json").and_then(|at| {
        let rest = text.get(at + "```json".len()..)?;
        let end = rest.find("```")?;
        rest.get(..end).map(str::trim)
    });
    let braces = text.find('{').and_then(|start| {
        let end = text.get(start..)?.find('}')?;
        text.get(start..=start + end)
    });
    let attempts = [fenced, Some(text), braces];
    let first = attempts.into_iter().flatten().find_map(json_then_python)?;
    (!first.is_null()).then_some(first)
}

/// Reproduces the reference benchmark's `parse_to_obj`.
///
/// Non-strings are returned unchanged. A string goes through
/// [`reference_extract_json`]; failing that, its trimmed text is parsed as a
/// Python literal; failing that, if it is wrapped in one layer of matching
/// quotes (`'…'` or `"…"`), the inside gets both treatments again; otherwise
/// the string itself is the result.
///
/// Because of `extract_json`'s non-greedy match, the result of a mutation
/// message is the object it mentions, wherever it is in the message:
/// `"Created {'id': 5}"` and `"Deleted {'id': 5} failed"` both give
/// `{"id": 5}`.
pub fn reference_parse_to_obj(v: &Value) -> Value {
    let Value::String(s) = v else {
        return v.clone();
    };
    if let Some(found) = reference_extract_json(s) {
        return found;
    }
    let trimmed = s.trim();
    if let Ok(found) = parse_literal(trimmed, Dialect::Python) {
        return found;
    }
    let unquoted = ['\'', '"'].into_iter().find_map(|q| {
        let inner = trimmed.strip_prefix(q)?.strip_suffix(q)?;
        Some(inner)
    });
    if let Some(inner) = unquoted {
        if let Some(found) = reference_extract_json(inner) {
            return found;
        }
        if let Ok(found) = parse_literal(inner.trim(), Dialect::Python) {
            return found;
        }
    }
    Value::String(s.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEYS: &[&str] = &["feedback", "config_changes"];

    fn ok(text: &str) -> Extracted {
        match extract_object(text, KEYS) {
            Ok(e) => e,
            Err(f) => panic!("{text:?} failed: {f}"),
        }
    }

    fn fail(text: &str) -> ParseFailure {
        match extract_object(text, KEYS) {
            Ok(e) => panic!("{text:?} gave {:?}", e.object),
            Err(f) => f,
        }
    }

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn plain_json() {
        let e = ok(r#"{"feedback": "ok"}"#);
        assert_eq!(e.object, obj(json!({"feedback": "ok"})));
        assert_eq!(e.span, 0..18);
        assert!(e.repairs.is_empty());
    }

    #[test]
    fn surrounding_prose() {
        let text = r#"Sure! Here it is: {"feedback": "ok"} Hope that helps, don't hesitate."#;
        let e = ok(text);
        assert_eq!(e.object, obj(json!({"feedback": "ok"})));
        assert_eq!(text.get(e.span.clone()), Some(r#"{"feedback": "ok"}"#));
        assert_eq!(e.repairs, [Repair::SurroundingText]);
    }

    #[test]
    fn fenced_with_prose() {
        let text = "Answer:\n```json\n{\"feedback\": 1}\n```\n";
        let e = ok(text);
        assert_eq!(e.repairs, [Repair::Fenced, Repair::SurroundingText]);
        let bare = "```json\n{\"feedback\": 1}\n```";
        assert_eq!(ok(bare).repairs, [Repair::Fenced]);
        assert_eq!(bare.get(ok(bare).span), Some("{\"feedback\": 1}"));
    }

    #[test]
    fn think_blocks() {
        let text = "<think>maybe {\"feedback\": \"draft\"}</think>\n{\"feedback\": \"final\"}";
        let e = ok(text);
        assert_eq!(e.object, obj(json!({"feedback": "final"})));
        assert_eq!(e.repairs, [Repair::ThinkStripped]);
        assert_eq!(
            e.span.start,
            text.find("{\"feedback\": \"final").unwrap_or(0)
        );

        let orphan = "reasoning {\"feedback\": \"draft\"} </THINK> {\"feedback\": \"final\"}";
        assert_eq!(ok(orphan).object, obj(json!({"feedback": "final"})));

        assert_eq!(
            fail("<think>I need to consider {\"feedback\""),
            ParseFailure::UnclosedThink
        );
        assert_eq!(fail("  <think>"), ParseFailure::UnclosedThink);
        let before = "{\"feedback\": 1} <think> more";
        assert_eq!(ok(before).object, obj(json!({"feedback": 1})));
        assert_eq!(fail("<think>x</think>"), ParseFailure::NoObject);
    }

    #[test]
    fn python_repairs() {
        let e = ok("{'feedback': True, 'x': [1, 2,], 'y': None}");
        assert_eq!(
            e.object,
            obj(json!({"feedback": true, "x": [1, 2], "y": null}))
        );
        assert_eq!(
            e.repairs,
            [
                Repair::PythonLiterals,
                Repair::TrailingCommas,
                Repair::SingleQuotes
            ]
        );
        let e = ok("{\"feedback\": \"a\nb\"}");
        assert_eq!(e.repairs, [Repair::LenientSyntax]);
        let e = ok(r#"{"feedback": "x", }"#);
        assert_eq!(e.repairs, [Repair::TrailingCommas]);
    }

    #[test]
    fn failures() {
        assert_eq!(fail(""), ParseFailure::Empty);
        assert_eq!(fail(" \n\t"), ParseFailure::Empty);
        assert_eq!(fail("I cannot answer that."), ParseFailure::NoObject);
        assert_eq!(
            fail(r#"{"feedback": "cut"#),
            ParseFailure::Truncated { offset: 0 }
        );
        assert_eq!(fail("[1, 2]"), ParseFailure::NotAnObject { found: "array" });
        assert_eq!(fail("42"), ParseFailure::NotAnObject { found: "number" });
        assert_eq!(
            fail(r#"{"feedback": oops}"#),
            ParseFailure::Invalid {
                offset: 13,
                message: "unsupported syntax: name `oops`".to_owned()
            }
        );
        let closed_fence = "```json\n{\"feedback\": 1,\n```";
        assert!(matches!(fail(closed_fence), ParseFailure::Invalid { .. }));
    }

    #[test]
    fn preferred_failure_is_reported() {
        let text = r#"I think {maybe} it is {"feedback": wrong}"#;
        match fail(text) {
            ParseFailure::Invalid { offset, .. } => {
                assert_eq!(offset, text.find("wrong").unwrap_or(0))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nested_objects_in_broken_objects_are_not_candidates() {
        let text = r#"{"feedback": "x", "config": {"a": 1}, "flag": yes}"#;
        assert!(matches!(fail(text), ParseFailure::Invalid { .. }));
    }

    #[test]
    fn codes_and_display() {
        let all = [
            (ParseFailure::Empty, "empty"),
            (ParseFailure::UnclosedThink, "unclosed_think"),
            (ParseFailure::NoObject, "no_object"),
            (ParseFailure::Truncated { offset: 3 }, "truncated"),
            (
                ParseFailure::Invalid {
                    offset: 4,
                    message: "m".to_owned(),
                },
                "invalid",
            ),
            (ParseFailure::TooDeep, "too_deep"),
            (
                ParseFailure::NotAnObject { found: "array" },
                "not_an_object",
            ),
        ];
        for (failure, code) in all {
            assert_eq!(failure.code(), code);
            assert!(!failure.to_string().contains('\n'));
        }
        assert_eq!(
            ParseFailure::Truncated { offset: 3 }.to_string(),
            "model output ends inside the object starting at byte 3 (truncated)"
        );
        assert_eq!(
            ParseFailure::Invalid {
                offset: 4,
                message: "m".to_owned()
            }
            .to_string(),
            "invalid object: m at byte 4"
        );
        for repair in [
            Repair::ThinkStripped,
            Repair::Fenced,
            Repair::SurroundingText,
            Repair::PythonLiterals,
            Repair::TrailingCommas,
            Repair::SingleQuotes,
            Repair::LenientSyntax,
        ] {
            assert_eq!(
                serde_json::to_value(repair).ok(),
                Some(json!(repair.code()))
            );
        }
    }

    #[test]
    fn reference_extract_json_steps() {
        assert_eq!(
            reference_extract_json("x ```json\n{\"a\": 1}\n``` y"),
            Some(json!({"a": 1}))
        );
        assert_eq!(
            reference_extract_json("```json\n{'a': True}\n```"),
            Some(json!({"a": true}))
        );
        assert_eq!(reference_extract_json(" [1, 2] "), Some(json!([1, 2])));
        assert_eq!(reference_extract_json("('a', 1)"), Some(json!(["a", 1])));
        assert_eq!(
            reference_extract_json("text {\"a\": 1} text"),
            Some(json!({"a": 1}))
        );
        // The non-greedy match stops at the first '}'.
        assert_eq!(reference_extract_json("x {\"a\": {\"b\": 1}} y"), None);
        assert_eq!(reference_extract_json("no json"), None);
        assert_eq!(reference_extract_json("null"), None);
        // An unterminated fence is no match; the brace match then applies.
        assert_eq!(
            reference_extract_json("```json\n{\"a\": 1}"),
            Some(json!({"a": 1}))
        );
        assert_eq!(
            reference_extract_json("```json {\"a\": 1}"),
            Some(json!({"a": 1}))
        );
    }

    #[test]
    fn reference_parse_to_obj_quirks() {
        let created = reference_parse_to_obj(&json!("Created {'id': 5}"));
        let deleted = reference_parse_to_obj(&json!("Deleted {'id': 5} failed"));
        assert_eq!(created, json!({"id": 5}));
        assert_eq!(deleted, json!({"id": 5}));
        assert_eq!(
            reference_parse_to_obj(&json!("{'success': True, 'data': {'a': 1}}")),
            json!({"success": true, "data": {"a": 1}})
        );
        assert_eq!(reference_parse_to_obj(&json!(5)), json!(5));
        assert_eq!(
            reference_parse_to_obj(&json!({"a": "{'b': 1}"})),
            json!({"a": "{'b': 1}"})
        );
        assert_eq!(
            reference_parse_to_obj(&json!("plain text")),
            json!("plain text")
        );
        assert_eq!(reference_parse_to_obj(&json!("'quoted'")), json!("quoted"));
        assert_eq!(
            reference_parse_to_obj(&json!("'{'a': {'b': 1}}'")),
            json!({"a": {"b": 1}})
        );
        assert_eq!(reference_parse_to_obj(&json!("None")), json!(null));
        assert_eq!(reference_parse_to_obj(&json!("null")), json!("null"));
        assert_eq!(reference_parse_to_obj(&json!("  42 ")), json!(42));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]

            #[test]
            fn never_panics(text in any::<String>()) {
                let result = extract_object(&text, KEYS);
                if let Ok(e) = result {
                    prop_assert!(e.span.end <= text.len());
                }
                let _ = reference_parse_to_obj(&Value::String(text));
            }

            #[test]
            fn never_panics_on_json_like(text in r#"[\[\]{}()'",: \n0-9a-z_.\\`<>/]{0,64}"#) {
                let result = extract_object(&text, KEYS);
                if let Ok(e) = result {
                    let slice = text.get(e.span.clone());
                    prop_assert!(slice.is_some());
                    let starts_with_brace = slice.is_some_and(|s| s.starts_with('{'));
                    prop_assert!(starts_with_brace, "span {:?} of {:?}", e.span, text);
                }
                let _ = reference_parse_to_obj(&Value::String(text));
            }
        }
    }
}
