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
//! The markers that structure model output (Markdown fences, `<think>`
//! tags) can also occur *inside* the answer, in its string values (a
//! feedback that quotes a fenced code block, a change that stores the text
//! `<think>`). The rule throughout is that a marker inside a complete
//! literal is text: only markers outside the complete objects and arrays of
//! the output structure it.
//!
//! 1. Text that is empty or whitespace only is [`ParseFailure::Empty`].
//! 2. Reasoning is removed: `<think>…</think>` blocks (tags matched
//!    case-insensitively, any number of blocks) are dropped. A tag counts
//!    only outside the complete literals that a scan of the whole text as in
//!    step 5 finds, so `{"feedback": "a </think> b"}` keeps its tag. A
//!    `</think>` without an opening tag drops everything before it (chat
//!    templates that put `<think>` into the prompt); an opening `<think>`
//!    that is never closed drops everything after it (but see step 7c);
//!    opening tags inside a block are part of the reasoning. What is left is
//!    a list of segments of the original text, so all offsets keep referring
//!    to the original.
//! 3. The kept text is scanned as in step 5, ignoring fences; the spans of
//!    the complete values found (objects, arrays, sets) are its *literals*.
//! 4. Candidate regions are, in order: the contents of Markdown code fences
//!    (three or more backticks and an optional language tag such as `json`,
//!    `JSON` or `python`; a fence that is never closed runs to the end of its
//!    segment), then the text outside fences. Backticks inside a literal of
//!    step 3 are text, not fence markers: in
//!    ``{"feedback": "```\n{'ok': True}\n```"}`` the answer is the whole
//!    object, not the dict in the quoted fence. A region without any `{`
//!    that as a whole is a JSON or Python value (a bare array, number,
//!    string) is noted as such, so that the failure can say what was found.
//! 5. In each region every `{` is an attempt, scanned left to right. Quotes
//!    in the surrounding prose are not tracked (an apostrophe in "don't" is
//!    not a string delimiter); quoting matters only inside an attempt, so
//!    braces, fences and tags inside the strings of an attempt never start
//!    anything. An attempt parses one value with [`parse_literal_prefix`] in
//!    [`Dialect::Json`], and if that fails in [`Dialect::Relaxed`]; an object
//!    is a candidate and scanning resumes after it, so objects nested in a
//!    candidate (or in its strings) are not candidates themselves. A failed
//!    attempt resumes the scan at the point where the parser gave up, so
//!    objects nested in the valid part of a broken object are not picked up
//!    either; an attempt that runs into the end of the region (truncation)
//!    or exceeds the depth limit ends the scan of the region. A `[` is an
//!    attempt too: an array that holds objects is noted (and skipped), any
//!    other array is skipped, and a failed `[` attempt is ignored (the
//!    objects inside a broken array are still found), except that running
//!    into the end of the region with a `{` still ahead counts as
//!    truncation.
//! 6. If no candidate turned up in fences or outside them, the candidates
//!    of the scan of step 3 (the kept text ignoring fences) are used.
//! 7. The answer is chosen among the candidates:
//!    - (a) the candidate with the most preferred keys at its top level (at
//!      least one); among equals the first in the order of step 4 (fence
//!      contents first, then the text outside fences, each in text order).
//!      A draft object before the answer loses if it has fewer preferred
//!      keys, and wins a tie;
//!    - (b) else, if a candidate wraps the answer
//!      (`{"answer": {"feedback": …, "config_changes": …}}`), the wrapped
//!      object: the first candidate that holds, as a member value at any
//!      depth (through object members, never array items or strings), an
//!      object with preferred keys gives the shallowest such object, the one
//!      with the most preferred keys and then the first in the text
//!      ([`Repair::Unwrapped`]);
//!    - (c) else, if an unclosed `<think>` swallowed the end of the output,
//!      the fences in the swallowed text are scanned as in steps 3 to 5: the
//!      fenced candidate with the most preferred keys (at least one) is the
//!      answer, the *last* among equals (later reasoning revises earlier
//!      drafts). Unfenced objects in unclosed reasoning never count;
//!    - (d) else the first candidate.
//! 8. Without candidates the failure is, in this order of precedence:
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
//! Literals are found by one left-to-right scan, so an attempt that fails
//! deep into the text (an unterminated string in reasoning) can hide a
//! literal behind it from step 2; step 3 scans the kept text afresh, so
//! reasoning cannot hide the answer's literals from the fence rule. A
//! literal cut off by the end of the text is not complete: markers in its
//! strings still count.
//!
//! This is envsim's own reading (the strict lane). The reference
//! evaluator's parser, quirks included, is reproduced separately in
//! [`crate::reference::extract`].

use std::collections::HashMap;
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
    /// The object was nested in a wrapper object without the preferred keys
    /// (`{"answer": {"feedback": …}}`) and was taken out of it.
    Unwrapped,
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
            Repair::Unwrapped => "unwrapped",
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
    /// Byte range of the object's text in the original output (for an
    /// unwrapped object, of the inner object's text).
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
/// several objects, find it inside a wrapper object or unfinished reasoning,
/// and pick the most relevant error among several broken ones.
///
/// # Errors
///
/// Returns why no object could be extracted.
pub fn extract_object(text: &str, preferred_keys: &[&str]) -> Result<Extracted, ParseFailure> {
    if text.trim().is_empty() {
        return Err(ParseFailure::Empty);
    }
    let kept = strip_think(text);
    // The kept text scanned as a whole, ignoring fences: its complete
    // literals hide the fence markers inside them (step 4); without fences it
    // is the scan of step 5, and with fences the fallback of step 6.
    let mut whole = Scanner::new(text);
    for segment in &kept.segments {
        whole.region(segment.clone(), None);
    }
    let mut fences = Vec::new();
    for segment in &kept.segments {
        fences.extend(find_fences(text, segment.clone(), &whole.values));
    }
    let scan = if fences.is_empty() {
        whole
    } else {
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
        if scan.candidates.is_empty() {
            scan.candidates = whole.candidates;
        }
        scan
    };

    let mut candidates = scan.candidates;
    let top = |candidate: Candidate| {
        let fence = candidate.fence.and_then(|i| fences.get(i));
        Chosen {
            allowed: allowed_ranges(candidate.span.clone(), fence),
            fenced: fence.is_some(),
            unwrapped: false,
            segments: kept.segments.clone(),
            object: candidate.object,
            span: candidate.span,
            relaxed: candidate.relaxed,
        }
    };
    let chosen = if let Some(index) = best_candidate(&candidates, preferred_keys, false) {
        top(candidates.swap_remove(index))
    } else if let Some((wrapper, nested)) = candidates
        .iter()
        .find_map(|c| unwrap_nested(text, c, preferred_keys).map(|n| (c, n)))
    {
        let fence = wrapper.fence.and_then(|i| fences.get(i));
        Chosen {
            allowed: allowed_ranges(wrapper.span.clone(), fence),
            fenced: fence.is_some(),
            unwrapped: true,
            segments: kept.segments.clone(),
            object: nested.object,
            span: nested.span,
            relaxed: nested.relaxed,
        }
    } else if let Some(found) = kept
        .swallowed
        .clone()
        .and_then(|swallowed| from_swallowed(text, swallowed, preferred_keys, &kept.segments))
    {
        found
    } else if !candidates.is_empty() {
        top(candidates.swap_remove(0))
    } else {
        return Err(failure(
            text,
            &scan.failures,
            scan.non_object,
            kept.swallowed.is_some(),
            preferred_keys,
        ));
    };

    let mut repairs = Vec::new();
    if kept.stripped {
        repairs.push(Repair::ThinkStripped);
    }
    if chosen.fenced {
        repairs.push(Repair::Fenced);
    }
    if has_other_text(text, &chosen.segments, &chosen.allowed) {
        repairs.push(Repair::SurroundingText);
    }
    if chosen.unwrapped {
        repairs.push(Repair::Unwrapped);
    }
    if chosen.relaxed {
        let features = relaxed_features(text.get(chosen.span.clone()).unwrap_or(""));
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
        object: chosen.object,
        span: chosen.span,
        repairs,
    })
}

/// The object [`extract_object`] settled on (step 7 of the algorithm), with
/// what is needed to work out the repairs.
struct Chosen {
    object: Map<String, Value>,
    span: Range<usize>,
    relaxed: bool,
    /// The object (or its wrapper) came from a fence.
    fenced: bool,
    /// The object was taken out of a wrapper object.
    unwrapped: bool,
    /// The output text that is not reasoning.
    segments: Vec<Range<usize>>,
    /// The ranges of `segments` that are the answer itself: the object (or
    /// its wrapper) and the markers of its fence.
    allowed: Vec<Range<usize>>,
}

/// The answer's own text: its object (or wrapper) span and the markers of
/// the fence it is in.
fn allowed_ranges(span: Range<usize>, fence: Option<&Fence>) -> Vec<Range<usize>> {
    let mut allowed = vec![span];
    if let Some(f) = fence {
        allowed.push(f.open.clone());
        allowed.extend(f.close.clone());
    }
    allowed
}

/// How many of the preferred keys `object` has at its top level.
fn preferred_count(object: &Map<String, Value>, preferred_keys: &[&str]) -> usize {
    preferred_keys
        .iter()
        .filter(|k| object.contains_key(**k))
        .count()
}

/// The index of the candidate with the most preferred keys (at least one);
/// among equals the first, or with `later` the last.
fn best_candidate(candidates: &[Candidate], preferred_keys: &[&str], later: bool) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (index, candidate) in candidates.iter().enumerate() {
        let count = preferred_count(&candidate.object, preferred_keys);
        let better = match best {
            None => count > 0,
            Some((top, _)) => count > top || (later && count == top),
        };
        if better {
            best = Some((count, index));
        }
    }
    best.map(|(_, index)| index)
}

/// An object found inside a wrapper candidate.
struct Nested {
    object: Map<String, Value>,
    span: Range<usize>,
    relaxed: bool,
}

/// Step 7b: the outermost object with preferred keys nested in `wrapper`,
/// following object members only (not array items). At the shallowest depth
/// that has one, the object with the most preferred keys wins, the first in
/// the text among equals.
fn unwrap_nested(text: &str, wrapper: &Candidate, preferred_keys: &[&str]) -> Option<Nested> {
    // Cheap check on the parsed value before any text is walked.
    if !nested_has_keys(&wrapper.object, preferred_keys) {
        return None;
    }
    let mut level = vec![wrapper.span.clone()];
    while !level.is_empty() {
        let mut next = Vec::new();
        let mut best: Option<(usize, Map<String, Value>, Range<usize>)> = None;
        for span in level {
            for (object, value_span) in object_members(text, span) {
                let count = preferred_count(&object, preferred_keys);
                if count > best.as_ref().map_or(0, |(top, ..)| *top) {
                    best = Some((count, object, value_span));
                } else if count == 0 {
                    next.push(value_span);
                }
            }
        }
        if let Some((_, object, span)) = best {
            let relaxed = text
                .get(span.clone())
                .is_none_or(|s| parse_literal(s, Dialect::Json).is_err());
            return Some(Nested {
                object,
                span,
                relaxed,
            });
        }
        level = next;
    }
    None
}

/// Whether an object nested in `object` (through object members, at any
/// depth) has one of the preferred keys.
fn nested_has_keys(object: &Map<String, Value>, preferred_keys: &[&str]) -> bool {
    let mut stack: Vec<&Map<String, Value>> = vec![object];
    while let Some(map) = stack.pop() {
        for value in map.values() {
            if let Value::Object(inner) = value {
                if preferred_count(inner, preferred_keys) > 0 {
                    return true;
                }
                stack.push(inner);
            }
        }
    }
    false
}

/// An object-valued member of an object literal: the value and its span.
type ObjectMember = (Map<String, Value>, Range<usize>);

/// The members of the object literal at `span` whose values are object
/// literals, with the spans of those values, in the order of the text. A
/// repeated key keeps its last value, as the parsed object does. Walks the
/// text with [`parse_literal_prefix`], so braces and quotes inside strings
/// are no concern; anything unexpected ends the walk.
fn object_members(text: &str, span: Range<usize>) -> Vec<ObjectMember> {
    // One slot per distinct key, at the position of its first occurrence.
    let mut slots: Vec<Option<ObjectMember>> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let Some(inner) = text.get(span.clone()) else {
        return Vec::new();
    };
    let bytes = inner.as_bytes();
    if bytes.first() != Some(&b'{') {
        return Vec::new();
    }
    let parse_at = |pos: usize| {
        inner
            .get(pos..)
            .and_then(|rest| parse_literal_prefix(rest, Dialect::Relaxed).ok())
    };
    let mut pos = 1;
    loop {
        pos = skip_blank(bytes, pos);
        if matches!(bytes.get(pos), None | Some(b'}')) {
            break;
        }
        let Some((key, len)) = parse_at(pos) else {
            break;
        };
        pos = skip_blank(bytes, pos + len);
        if bytes.get(pos) != Some(&b':') {
            break;
        }
        pos = skip_blank(bytes, pos + 1);
        let value_start = pos;
        let Some((value, len)) = parse_at(pos) else {
            break;
        };
        pos += len;
        let slot = match value {
            Value::Object(object) if bytes.get(value_start) == Some(&b'{') => {
                Some((object, span.start + value_start..span.start + pos))
            }
            _ => None,
        };
        let key = match key {
            Value::String(s) => s,
            other => other.to_string(),
        };
        match seen.get(&key).and_then(|&index| slots.get_mut(index)) {
            Some(existing) => *existing = slot,
            None => {
                seen.insert(key, slots.len());
                slots.push(slot);
            }
        }
        pos = skip_blank(bytes, pos);
        if bytes.get(pos) == Some(&b',') {
            pos += 1;
        } else {
            break;
        }
    }
    slots.into_iter().flatten().collect()
}

/// Skips what the literal parser skips between tokens: whitespace, `#`
/// comments and backslash line continuations.
fn skip_blank(bytes: &[u8], mut pos: usize) -> usize {
    loop {
        match bytes.get(pos) {
            Some(b' ' | b'\t' | b'\n' | b'\r' | 0x0c) => pos += 1,
            Some(b'#') => {
                while bytes.get(pos).is_some_and(|&b| b != b'\n' && b != b'\r') {
                    pos += 1;
                }
            }
            Some(b'\\') if matches!(bytes.get(pos + 1), Some(b'\n' | b'\r')) => pos += 2,
            _ => return pos,
        }
    }
}

/// Step 7c: the answer in a fence inside the reasoning that an unclosed
/// `<think>` swallowed (`swallowed` is the text after that tag). Only fenced
/// objects with preferred keys count; the one with the most wins, the last
/// among equals.
fn from_swallowed(
    text: &str,
    swallowed: Range<usize>,
    preferred_keys: &[&str],
    segments: &[Range<usize>],
) -> Option<Chosen> {
    let literals = literal_spans(text, swallowed.clone());
    let fences = find_fences(text, swallowed.clone(), &literals);
    let mut scan = Scanner::new(text);
    for (index, fence) in fences.iter().enumerate() {
        scan.region(fence.content.clone(), Some(index));
    }
    let index = best_candidate(&scan.candidates, preferred_keys, true)?;
    let candidate = scan.candidates.swap_remove(index);
    let fence = candidate.fence.and_then(|i| fences.get(i));
    let mut segments = segments.to_vec();
    // What follows the answer's fence is output too; what precedes it is
    // reasoning.
    if let Some(f) = fence {
        segments.push(f.outer().end..swallowed.end);
    }
    Some(Chosen {
        allowed: allowed_ranges(candidate.span.clone(), fence),
        fenced: true,
        unwrapped: false,
        segments,
        object: candidate.object,
        span: candidate.span,
        relaxed: candidate.relaxed,
    })
}

/// Chooses the failure to report when no candidate was found (step 8 of the
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

/// The spans of the complete literals (objects, arrays, sets) that a scan of
/// `region` as in step 5 of the algorithm finds, in order and disjoint.
fn literal_spans(text: &str, region: Range<usize>) -> Vec<Range<usize>> {
    let mut scan = Scanner::new(text);
    scan.region(region, None);
    scan.values
}

/// The end of the literal span that contains byte `at`, if one does.
fn literal_end(literals: &[Range<usize>], at: usize) -> Option<usize> {
    let index = literals.partition_point(|span| span.end <= at);
    literals
        .get(index)
        .filter(|span| span.start <= at)
        .map(|span| span.end)
}

/// The parts of the text that survive reasoning removal.
struct Kept {
    segments: Vec<Range<usize>>,
    stripped: bool,
    /// The text after an opening `<think>` that is never closed.
    swallowed: Option<Range<usize>>,
}

/// Step 2 of the algorithm.
fn strip_think(text: &str) -> Kept {
    let mut tags = find_think_tags(text, &[]);
    if !tags.is_empty() {
        // Tags inside the complete literals of the whole text are text.
        tags = find_think_tags(text, &literal_spans(text, 0..text.len()));
    }
    let mut segments = Vec::new();
    let mut cursor = 0;
    let mut inside = false;
    let mut opened_at = 0;
    for (range, closing) in &tags {
        match (closing, inside) {
            (false, false) => {
                segments.push(cursor..range.start);
                inside = true;
                opened_at = range.end;
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
        swallowed: inside.then_some(opened_at..text.len()),
    }
}

/// Finds `<think>` and `</think>` tags (ASCII case-insensitive) outside the
/// `literals`; the flag says whether the tag is a closing one.
fn find_think_tags(text: &str, literals: &[Range<usize>]) -> Vec<(Range<usize>, bool)> {
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
        if let Some(end) = literal_end(literals, at) {
            i = end;
            continue;
        }
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

/// Finds the fences in `segment`; backticks inside `literals` are text.
fn find_fences(text: &str, segment: Range<usize>, literals: &[Range<usize>]) -> Vec<Fence> {
    let bytes = text.as_bytes();
    let byte = |i: usize| {
        if i < segment.end {
            bytes.get(i).copied()
        } else {
            None
        }
    };
    let find_ticks = |mut from: usize| -> Option<usize> {
        loop {
            let hay = bytes.get(from..segment.end)?;
            let at = from + hay.windows(3).position(|w| w == b"```")?;
            match literal_end(literals, at) {
                Some(end) => from = end,
                None => return Some(at),
            }
        }
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
    /// The spans of all complete values found (candidates, arrays, sets).
    values: Vec<Range<usize>>,
    failures: Vec<Failure>,
    non_object: Option<&'static str>,
}

impl<'t> Scanner<'t> {
    fn new(text: &'t str) -> Self {
        Scanner {
            text,
            candidates: Vec::new(),
            values: Vec::new(),
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
                    self.values.push(at..at + len);
                    self.candidates.push(Candidate {
                        object,
                        span: at..at + len,
                        fence,
                        relaxed,
                    });
                    i = at + len;
                }
                Ok(((value, len), _)) => {
                    self.values.push(at..at + len);
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

/// The JSON type of a value, in JSON Schema's words (`boolean`, `array`, ...).
pub(crate) fn type_name(v: &Value) -> &'static str {
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
    fn fence_inside_a_json_string_is_text() {
        let text =
            r#"{"feedback": "```\n{'success': False, 'error': 'x'}\n```", "config_changes": []}"#;
        let expected = obj(json!({
            "feedback": "```\n{'success': False, 'error': 'x'}\n```",
            "config_changes": []
        }));
        let e = ok(text);
        assert_eq!(e.object, expected);
        assert_eq!(e.span, 0..text.len());
        assert!(e.repairs.is_empty(), "{:?}", e.repairs);

        // Raw line breaks in the string: the same object, in the relaxed dialect.
        let raw = text.replace("\\n", "\n");
        let e = ok(&raw);
        assert_eq!(e.object, expected);
        assert_eq!(e.repairs, [Repair::LenientSyntax]);

        // The whole object in a fence of its own: the outer fence counts.
        let fenced = format!("Result:\n```json\n{text}\n```\nDone.");
        let e = ok(&fenced);
        assert_eq!(e.object, expected);
        assert_eq!(fenced.get(e.span), Some(text));
        assert_eq!(e.repairs, [Repair::Fenced, Repair::SurroundingText]);
        let bare = format!("```\n{text}\n```");
        assert_eq!(ok(&bare).object, expected);

        // Python literal with a quoted JSON fence.
        let python = r#"{'feedback': '```json\n{"a": 1}\n```', 'config_changes': []}"#;
        assert_eq!(
            ok(python).object,
            obj(json!({"feedback": "```json\n{\"a\": 1}\n```", "config_changes": []}))
        );
    }

    #[test]
    fn braces_and_fences_inside_strings_are_text() {
        let text = r#"Use {x}: {"feedback": "use {x} and } or {", "config_changes": [{"type": "modify", "path": "a", "value": "```json\n{}\n```"}]} ok"#;
        let e = ok(text);
        assert_eq!(
            e.object,
            obj(json!({
                "feedback": "use {x} and } or {",
                "config_changes": [{"type": "modify", "path": "a", "value": "```json\n{}\n```"}]
            }))
        );
        assert_eq!(e.repairs, [Repair::SurroundingText]);
        // A fence quoted inside an array is text too: the output is the array.
        assert_eq!(
            fail(r#"[{"feedback": "```\n{'a': 1}\n```"}]"#),
            ParseFailure::NotAnObject { found: "array" }
        );
    }

    #[test]
    fn think_tags_inside_strings_are_text() {
        for feedback in ["<think>hmm</think>", "a </think> b", "the <think> tag"] {
            let text = json!({"feedback": feedback, "config_changes": []}).to_string();
            let e = ok(&text);
            assert_eq!(
                e.object,
                obj(json!({"feedback": feedback, "config_changes": []}))
            );
            assert!(e.repairs.is_empty(), "{text}: {:?}", e.repairs);
        }
        // After real reasoning whose draft quotes a tag as well.
        let text = "<think>draft {\"feedback\": \"</think>\"}</think>\n\
                    {\"feedback\": \"x </think> y\", \"config_changes\": []}";
        let e = ok(text);
        assert_eq!(
            e.object,
            obj(json!({"feedback": "x </think> y", "config_changes": []}))
        );
        assert_eq!(e.repairs, [Repair::ThinkStripped]);
        // A draft whose unterminated string runs past `</think>` does not
        // hide the answer's literal from the fence rule.
        let text = "<think>He wrote {\"a\": \"b</think>\
                    {\"feedback\": \"```\\n{'a': 1}\\n```\", \"config_changes\": []}";
        assert_eq!(
            ok(text).object,
            obj(json!({"feedback": "```\n{'a': 1}\n```", "config_changes": []}))
        );
    }

    #[test]
    fn draft_objects_before_the_answer() {
        let answer = obj(json!({"feedback": "ok", "config_changes": []}));
        let keyless =
            "Draft: {\"draft\": true}\nAnswer: {\"feedback\": \"ok\", \"config_changes\": []}";
        assert_eq!(ok(keyless).object, answer);
        // Fewer preferred keys lose (this used to pick the draft).
        let partial =
            "Draft: {\"feedback\": \"draft\"}\nAnswer: {\"feedback\": \"ok\", \"config_changes\": []}";
        assert_eq!(ok(partial).object, answer);
        // Among equals the first wins, a fenced one before prose.
        let equal = r#"A: {"feedback": "a", "config_changes": []} B: {"feedback": "b", "config_changes": []}"#;
        assert_eq!(
            ok(equal).object,
            obj(json!({"feedback": "a", "config_changes": []}))
        );
        let fenced = "{\"feedback\": \"a\"}\n```json\n{\"feedback\": \"b\"}\n```";
        assert_eq!(ok(fenced).object, obj(json!({"feedback": "b"})));
    }

    #[test]
    fn wrapped_answers_are_unwrapped() {
        let text = r#"{"answer": {"feedback": "x", "config_changes": []}}"#;
        let e = ok(text);
        assert_eq!(
            e.object,
            obj(json!({"feedback": "x", "config_changes": []}))
        );
        assert_eq!(
            text.get(e.span),
            Some(r#"{"feedback": "x", "config_changes": []}"#)
        );
        assert_eq!(e.repairs, [Repair::Unwrapped]);

        let python =
            "```python\n{'result': {'meta': {'n': 1}, # note\n 'output': {'feedback': 'x'}}}\n```";
        let e = ok(python);
        assert_eq!(e.object, obj(json!({"feedback": "x"})));
        assert_eq!(python.get(e.span), Some("{'feedback': 'x'}"));
        assert_eq!(
            e.repairs,
            [Repair::Fenced, Repair::Unwrapped, Repair::SingleQuotes]
        );

        // The shallowest wrapped object wins, then the one with most keys.
        let depth = r#"{"a": {"b": {"feedback": 1, "config_changes": []}}, "c": {"feedback": 2}}"#;
        assert_eq!(ok(depth).object, obj(json!({"feedback": 2})));
        let keys = r#"{"a": {"feedback": 1}, "b": {"feedback": 2, "config_changes": []}}"#;
        assert_eq!(
            ok(keys).object,
            obj(json!({"feedback": 2, "config_changes": []}))
        );
        // A repeated key keeps its last value, as in the parsed object.
        let repeated = r#"{"a": {"feedback": 1}, "a": {"feedback": 2}}"#;
        assert_eq!(ok(repeated).object, obj(json!({"feedback": 2})));
        let replaced = r#"{"a": {"feedback": 1}, "a": 3}"#;
        assert_eq!(ok(replaced).object, obj(json!({"a": 3})));
        // Strings and arrays are not looked into.
        let opaque = r#"{"note": "{'feedback': 1}", "items": [{"feedback": 2}]}"#;
        let e = ok(opaque);
        assert_eq!(
            e.object,
            obj(json!({"note": "{'feedback': 1}", "items": [{"feedback": 2}]}))
        );
        assert!(e.repairs.is_empty());
        // An answer at the top level beats a wrapper, even a later one.
        let both = r#"{"wrapper": {"feedback": "y", "config_changes": []}} {"feedback": "x"}"#;
        assert_eq!(ok(both).object, obj(json!({"feedback": "x"})));
    }

    #[test]
    fn think_drafts_lose_to_the_answer_after_the_block() {
        let reasoning = "<think>Draft: {\"draft\": true}, or rather\n```json\n\
                         {\"feedback\": \"draft\", \"config_changes\": []}\n```\n\
                         use {x}, it's fine</think>\n";
        let answer = obj(json!({"feedback": "final", "config_changes": []}));
        let plain = format!("{reasoning}{{\"feedback\": \"final\", \"config_changes\": []}}");
        let e = ok(&plain);
        assert_eq!(e.object, answer);
        assert_eq!(e.repairs, [Repair::ThinkStripped]);
        let fenced =
            format!("{reasoning}```json\n{{\"feedback\": \"final\", \"config_changes\": []}}\n```");
        let e = ok(&fenced);
        assert_eq!(e.object, answer);
        assert_eq!(e.repairs, [Repair::ThinkStripped, Repair::Fenced]);
    }

    #[test]
    fn unclosed_think_with_a_fenced_answer() {
        let text =
            "<think>reasoning {x}\n```json\n{\"feedback\": \"final\", \"config_changes\": []}\n```";
        let e = ok(text);
        assert_eq!(
            e.object,
            obj(json!({"feedback": "final", "config_changes": []}))
        );
        assert_eq!(e.repairs, [Repair::ThinkStripped, Repair::Fenced]);
        // The last of equals wins; text after the fence is surrounding text.
        let two = "<think>hm\n```json\n{\"feedback\": \"a\", \"config_changes\": []}\n```\n\
                   better:\n```json\n{\"feedback\": \"b\", \"config_changes\": []}\n```\ndone";
        let e = ok(two);
        assert_eq!(
            e.object,
            obj(json!({"feedback": "b", "config_changes": []}))
        );
        assert_eq!(
            e.repairs,
            [
                Repair::ThinkStripped,
                Repair::Fenced,
                Repair::SurroundingText
            ]
        );
        // More preferred keys beat a later fence.
        let keys = "<think>\n```json\n{\"feedback\": \"a\", \"config_changes\": []}\n```\n\
                    ```json\n{\"feedback\": \"b\"}\n```";
        assert_eq!(
            ok(keys).object,
            obj(json!({"feedback": "a", "config_changes": []}))
        );
        // Only fenced objects with preferred keys count.
        assert_eq!(
            fail("<think>reasoning\n```json\n{\"x\": 1}\n```"),
            ParseFailure::UnclosedThink
        );
        assert_eq!(
            fail("<think>reasoning {\"feedback\": 1, \"config_changes\": []}"),
            ParseFailure::UnclosedThink
        );
        // An answer before the reasoning still wins.
        let before = "{\"feedback\": \"early\"} <think> ```json\n{\"feedback\": 2, \"config_changes\": []}\n```";
        assert_eq!(ok(before).object, obj(json!({"feedback": "early"})));
        // A candidate without preferred keys does not.
        let keyless = "{\"x\": 1} <think> ```json\n{\"feedback\": 2}\n```";
        assert_eq!(ok(keyless).object, obj(json!({"feedback": 2})));
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
            Repair::Unwrapped,
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
                let _ = crate::reference::extract::parse_to_obj(&crate::python::PyValue::str(&text));
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
                let _ = crate::reference::extract::parse_to_obj(&crate::python::PyValue::str(&text));
            }
        }
    }
}
