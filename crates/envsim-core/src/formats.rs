//! Reading benchmark and prediction files (from bytes; the caller does the I/O).
//!
//! Benchmarks: the reference format, as a JSON array or as JSON Lines. A record is either
//! single-step (`step_detail`) or multi-step (`trajectory`, one transition per step), or a flat
//! record with the step keys at top level. Predictions: envsim prediction JSONL, or a reference
//! evaluator result file (`{"model", "results": [...], "summary"}`), detected from the content.
//!
//! Every error names the file, the line (JSON Lines) or record (JSON array), and the field.
//! Nesting deeper than 128 levels is rejected (serde_json's recursion limit).

use crate::sample::{Action, Origin, Prediction, Transition, Usage};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt;

/// Where in a file an error is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// The file as a whole.
    File,
    /// 1-based line and column of a syntax error.
    LineColumn(usize, usize),
    /// 1-based line of a JSON Lines record.
    Line(usize),
    /// 0-based index of a record in a JSON array.
    Record(usize),
}

/// A located error in an input file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    /// The file name as given by the caller.
    pub source: String,
    /// Where.
    pub location: Location,
    /// Dotted field path inside the record, when the problem is one field.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File => write!(f, "file"),
            Location::LineColumn(l, c) => write!(f, "line {l} column {c}"),
            Location::Line(l) => write!(f, "line {l}"),
            Location::Record(r) => write!(f, "record {r}"),
        }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        match self.location {
            Location::File => {}
            Location::LineColumn(l, c) => write!(f, ":{l}:{c}")?,
            Location::Line(l) => write!(f, ": line {l}")?,
            Location::Record(r) => write!(f, ": record {r}")?,
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for FormatError {}

/// One top-level record of a JSON array or JSON Lines file, and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// The record.
    pub value: Value,
    /// Line (JSON Lines) or index (JSON array).
    pub location: Location,
    /// 0-based position among the records.
    pub index: usize,
}

/// The located error for a serde_json syntax error in the file `source`: line and column (the
/// parser's line plus `line_offset`, for a parser started on a later line) and the message
/// without serde_json's own position suffix.
pub fn syntax_error(source: &str, e: &serde_json::Error, line_offset: usize) -> FormatError {
    let message = e.to_string();
    // serde_json appends " at line L column C"; the location is reported separately.
    let message = message
        .rfind(" at line ")
        .map_or(message.as_str(), |i| &message[..i])
        .to_owned();
    FormatError {
        source: source.to_owned(),
        location: Location::LineColumn(e.line() + line_offset, e.column()),
        field: None,
        message,
    }
}

fn file_error(source: &str, message: impl Into<String>) -> FormatError {
    FormatError {
        source: source.to_owned(),
        location: Location::File,
        field: None,
        message: message.into(),
    }
}

/// The error for a file with nothing but whitespace in it.
pub fn empty_file_error(source: &str) -> FormatError {
    file_error(source, "the file is empty")
}

fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

fn first_byte(bytes: &[u8]) -> Option<u8> {
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// Splits a file into records: a JSON array's elements, or one record per non-blank line
/// (any file whose first non-blank byte is not `[`).
pub fn records(bytes: &[u8], source: &str) -> Result<Vec<Record>, FormatError> {
    let bytes = strip_bom(bytes);
    match first_byte(bytes) {
        None => Err(empty_file_error(source)),
        Some(b'[') => {
            let items: Vec<Value> =
                serde_json::from_slice(bytes).map_err(|e| syntax_error(source, &e, 0))?;
            Ok(items
                .into_iter()
                .enumerate()
                .map(|(index, value)| Record {
                    value,
                    location: Location::Record(index),
                    index,
                })
                .collect())
        }
        Some(_) => {
            let mut out = Vec::new();
            for (line_index, line) in bytes.split(|&b| b == b'\n').enumerate() {
                if let Some(record) = line_record(line, line_index, out.len(), source)? {
                    out.push(record);
                }
            }
            Ok(out)
        }
    }
}

/// One line of a JSON Lines file as [`records`] reads it: `None` for a blank line, else the
/// record at 0-based `line_index` (reported 1-based) that is the `index`-th record of the file.
pub fn line_record(
    line: &[u8],
    line_index: usize,
    index: usize,
    source: &str,
) -> Result<Option<Record>, FormatError> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: Value =
        serde_json::from_slice(line).map_err(|e| syntax_error(source, &e, line_index))?;
    Ok(Some(Record {
        value,
        location: Location::Line(line_index + 1),
        index,
    }))
}

/// Field access with located errors for one record.
struct Fields<'a> {
    source: &'a str,
    location: &'a Location,
}

impl Fields<'_> {
    fn error(&self, field: &str, message: impl Into<String>) -> FormatError {
        FormatError {
            source: self.source.to_owned(),
            location: self.location.clone(),
            field: (!field.is_empty()).then(|| field.to_owned()),
            message: message.into(),
        }
    }

    fn object<'v>(
        &self,
        value: &'v Value,
        field: &str,
    ) -> Result<&'v Map<String, Value>, FormatError> {
        value.as_object().ok_or_else(|| {
            self.error(
                field,
                format!(
                    "expected an object, found {}",
                    crate::path::type_name(value)
                ),
            )
        })
    }

    fn object_mut<'v>(
        &self,
        value: &'v mut Value,
        field: &str,
    ) -> Result<&'v mut Map<String, Value>, FormatError> {
        match value {
            Value::Object(map) => Ok(map),
            other => Err(self.error(
                field,
                format!(
                    "expected an object, found {}",
                    crate::path::type_name(other)
                ),
            )),
        }
    }

    /// A required field, moved out of the record (left `null` there).
    fn take_required(
        &self,
        map: &mut Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Result<Value, FormatError> {
        map.get_mut(key)
            .map(Value::take)
            .ok_or_else(|| self.error(field, "missing"))
    }

    fn required<'v>(
        &self,
        map: &'v Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Result<&'v Value, FormatError> {
        map.get(key).ok_or_else(|| self.error(field, "missing"))
    }

    /// An optional id-like field: a string or an integer, as a string.
    fn id(
        &self,
        map: &Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Result<Option<String>, FormatError> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(Some(n.to_string())),
            Some(other) => Err(self.error(
                field,
                format!(
                    "expected a string or an integer, found {}",
                    crate::path::type_name(other)
                ),
            )),
        }
    }
}

/// Reads a benchmark file in the reference format (JSON array or JSON Lines).
pub fn parse_benchmark(bytes: &[u8], source: &str) -> Result<Vec<Transition>, FormatError> {
    let mut reader = RecordReader::new(source);
    let mut transitions = Vec::new();
    for record in records(bytes, source)? {
        transitions.extend(reader.read(record)?);
    }
    reader.finish()?;
    Ok(transitions)
}

/// Reads a benchmark's records one at a time, in file order, so that a caller can work on each
/// record's transitions and drop them before the next (a benchmark of multi-megabyte states is
/// much larger parsed than as text). It keeps what spans records: the states stored once
/// (state records of compact envsim JSONL) and the ids seen (duplicates are errors).
///
/// Compact envsim JSONL: a line `{"state_id": ID, "state": {...}}` stores a state once; a later
/// sample replaces `config_before` with `"config_before_ref": {"state": ID, "patch": [...]}`
/// (the stored state with a patch of `state_patch` applied) and `config_after` with
/// `"config_after_ref": {"patch": [...]}` (applied to the state before). A state record is not
/// a sample.
#[derive(Debug)]
pub struct RecordReader<'s> {
    source: &'s str,
    states: HashMap<String, Value>,
    seen: HashMap<String, Location>,
}

impl<'s> RecordReader<'s> {
    /// A reader for the file named `source` (for messages).
    pub fn new(source: &'s str) -> Self {
        RecordReader {
            source,
            states: HashMap::new(),
            seen: HashMap::new(),
        }
    }

    /// The transitions of the next record (none for a state record).
    pub fn read(&mut self, record: Record) -> Result<Vec<Transition>, FormatError> {
        let Record {
            mut value,
            location,
            index,
        } = record;
        let fields = Fields {
            source: self.source,
            location: &location,
        };
        if let Some((id, state)) = state_record(&mut value, &fields)? {
            if self.states.insert(id.clone(), state).is_some() {
                return Err(fields.error("state_id", format!("state {id:?} is stored twice")));
            }
            return Ok(Vec::new());
        }
        resolve_state_refs(&mut value, &self.states, &fields)?;
        let transitions = record_transitions(value, index, &fields)?;
        note_ids(&mut self.seen, &fields, &transitions)?;
        Ok(transitions)
    }

    /// Ends the file: an error when it held no samples.
    pub fn finish(self) -> Result<(), FormatError> {
        if self.seen.is_empty() {
            return Err(file_error(self.source, "the benchmark holds no samples"));
        }
        Ok(())
    }
}

/// Records the ids of a record's transitions in `seen`; a duplicate is an error at the record
/// (`fields`) naming where the id was first seen.
fn note_ids(
    seen: &mut HashMap<String, Location>,
    fields: &Fields<'_>,
    transitions: &[Transition],
) -> Result<(), FormatError> {
    for transition in transitions {
        if let Some(first) = seen.insert(transition.id.clone(), fields.location.clone()) {
            return Err(fields.error(
                "sample_id",
                format!(
                    "duplicate sample id {:?} (first seen at {first:?})",
                    transition.id
                ),
            ));
        }
    }
    Ok(())
}

/// `Some((id, state))` when the record is a state record (`state_id` and `state`, no sample
/// fields).
fn state_record(
    value: &mut Value,
    fields: &Fields<'_>,
) -> Result<Option<(String, Value)>, FormatError> {
    let Value::Object(map) = value else {
        return Ok(None);
    };
    if !map.contains_key("state_id") || map.contains_key("action") {
        return Ok(None);
    }
    let id = match map.get("state_id") {
        Some(Value::String(id)) => id.clone(),
        _ => return Err(fields.error("state_id", "expected a string")),
    };
    match map.get_mut("state").map(Value::take) {
        Some(state @ Value::Object(_)) => Ok(Some((id, state))),
        Some(_) => Err(fields.error("state", "a stored state must be an object")),
        None => Err(fields.error("state", "missing")),
    }
}

/// Replaces `config_before_ref` / `config_after_ref` with the states they describe.
fn resolve_state_refs(
    value: &mut Value,
    states: &HashMap<String, Value>,
    fields: &Fields<'_>,
) -> Result<(), FormatError> {
    let Value::Object(map) = value else {
        return Ok(());
    };
    let Some(before_ref) = map.shift_remove("config_before_ref") else {
        if map.contains_key("config_after_ref") {
            return Err(fields.error("config_after_ref", "needs a `config_before_ref`"));
        }
        return Ok(());
    };
    let id = match before_ref.get("state") {
        Some(Value::String(id)) => id,
        _ => return Err(fields.error("config_before_ref.state", "expected a state id")),
    };
    let mut before = states
        .get(id)
        .ok_or_else(|| {
            fields.error(
                "config_before_ref.state",
                format!("no state record {id:?} before this record"),
            )
        })?
        .clone();
    let patch = before_ref.get("patch").unwrap_or(&Value::Null);
    crate::state_patch::apply_patch(&mut before, patch)
        .map_err(|e| fields.error("config_before_ref.patch", e))?;
    let after = match map.shift_remove("config_after_ref") {
        None => return Err(fields.error("config_after_ref", "missing")),
        Some(after_ref) => {
            let mut after = before.clone();
            let patch = after_ref.get("patch").unwrap_or(&Value::Null);
            crate::state_patch::apply_patch(&mut after, patch)
                .map_err(|e| fields.error("config_after_ref.patch", e))?;
            after
        }
    };
    map.insert("config_before".into(), before);
    map.insert("config_after".into(), after);
    Ok(())
}

/// Runs the record readers of [`parse_benchmark_with`]: given the number of records `n` and a
/// function reading record `i` (`None` when it is not valid), returns the `n` results in record
/// order, computed in any order, on any threads.
pub trait RecordRunner:
    FnOnce(usize, &(dyn Fn(usize) -> Option<Vec<Transition>> + Sync)) -> Vec<Option<Vec<Transition>>>
{
}

impl<F> RecordRunner for F where
    F: FnOnce(
        usize,
        &(dyn Fn(usize) -> Option<Vec<Transition>> + Sync),
    ) -> Vec<Option<Vec<Transition>>>
{
}

/// [`parse_benchmark`] with each record parsed and read on its own, by `run` (which may use
/// threads; envsim-core does not). The result, and every error, is exactly that of
/// [`parse_benchmark`]: the records are first found by a quick structural scan
/// ([`record_spans`]), and whenever that scan, a record or the checks across records fail, the
/// whole file is read again by [`parse_benchmark`] for its located error.
pub fn parse_benchmark_with(
    bytes: &[u8],
    source: &str,
    run: impl RecordRunner,
) -> Result<Vec<Transition>, FormatError> {
    let Some(spans) = independent_record_spans(bytes) else {
        return parse_benchmark(bytes, source);
    };
    let read = |i: usize| read_record(bytes, spans.get(i)?);
    let results = run(spans.len(), &read);
    if results.len() != spans.len() {
        return parse_benchmark(bytes, source);
    }
    let mut collector = Collector::new(source);
    for (span, transitions) in spans.iter().zip(results) {
        let pushed = transitions.map(|t| collector.push(&span.location, t));
        if !matches!(pushed, Some(Ok(()))) {
            return parse_benchmark(bytes, source);
        }
    }
    collector
        .finish()
        .or_else(|_| parse_benchmark(bytes, source))
}

/// The records of a file that can each be read on their own ([`read_record`]), in file order:
/// `None` when the quick scan cannot split the file, or when it is a compact file (whose records
/// refer to states stored in earlier ones).
pub fn independent_record_spans(bytes: &[u8]) -> Option<Vec<RecordSpan>> {
    record_spans(bytes).filter(|_| !is_compact(bytes))
}

/// Whether a file is compact envsim JSONL (its samples refer to states stored in earlier
/// records, so its records cannot be read on their own).
pub fn is_compact(bytes: &[u8]) -> bool {
    memchr::memmem::find(bytes, b"\"config_before_ref").is_some()
}

/// The transitions of one record of [`independent_record_spans`], read on its own; `None` when
/// the record is not valid (read the whole file with [`parse_benchmark`] for the located
/// error). Duplicate ids across records are not checked here.
pub fn read_record(bytes: &[u8], span: &RecordSpan) -> Option<Vec<Transition>> {
    let value: Value = serde_json::from_slice(bytes.get(span.range.clone())?).ok()?;
    let fields = Fields {
        // Errors are discarded, so no file name is needed for them.
        source: "",
        location: &span.location,
    };
    record_transitions(value, span.index, &fields).ok()
}

/// Where one record of a file lies, as found by [`record_spans`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordSpan {
    /// Byte range of the record's JSON text (surrounding whitespace excluded).
    pub range: std::ops::Range<usize>,
    /// Line (JSON Lines) or index (JSON array), as [`records`] reports it.
    pub location: Location,
    /// 0-based position among the records.
    pub index: usize,
}

/// Deepest nesting [`record_spans`] accepts (the outer array counts); deeper files are left to
/// the whole-file readers, so that serde_json's recursion limit (128) applies to them exactly
/// as it does to [`records`].
const SPAN_MAX_DEPTH: usize = 100;

fn is_json_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn trim_json_whitespace(bytes: &[u8], mut range: std::ops::Range<usize>) -> std::ops::Range<usize> {
    while range.start < range.end && is_json_whitespace(bytes[range.start]) {
        range.start += 1;
    }
    while range.end > range.start && is_json_whitespace(bytes[range.end - 1]) {
        range.end -= 1;
    }
    range
}

/// Finds the records of a file without parsing them: the elements of a JSON array (found by a
/// scan that only follows strings and brackets), or the non-blank lines of JSON Lines, in the
/// order and with the locations that [`records`] gives them. Parsing each span on its own then
/// gives the values [`records`] would.
///
/// `None` when the scan finds the file is not a well-formed array of at least one element (an
/// unterminated string, a stray bracket, an empty element, text after the array) or is nested
/// deeper than 100 levels: the whole-file readers then report what is wrong. A span that is not
/// valid JSON by itself means the file is not valid either.
pub fn record_spans(bytes: &[u8]) -> Option<Vec<RecordSpan>> {
    RecordSpans::new(bytes).collect::<Option<Vec<_>>>()
}

/// [`record_spans`] one record at a time, so a reader can start on the first records before the
/// scan reaches the end of the file. Each item is a span, or `None` when the scan finds that
/// the file cannot be split (then nothing follows); the spans before it were right as far as
/// they go but the file as a whole is not valid for [`record_spans`].
#[derive(Debug)]
pub struct RecordSpans<'b> {
    bytes: &'b [u8],
    scan: SpanScan,
    index: usize,
}

#[derive(Debug)]
enum SpanScan {
    /// JSON Lines: the next line starts at `start`; `line` is its 1-based number.
    Lines { start: usize, line: usize },
    /// A JSON array: the next record starts at `start`.
    Array { start: usize },
    /// The file cannot be split: the next item is `None`.
    Invalid,
    /// Ended (after the last span, or after a `None`).
    Done,
}

impl<'b> RecordSpans<'b> {
    /// Starts scanning `bytes`.
    pub fn new(bytes: &'b [u8]) -> Self {
        let offset = bytes.len() - strip_bom(bytes).len();
        let first = bytes[offset..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .map(|p| p + offset);
        let scan = match first {
            Some(first) if bytes[first] != b'[' => SpanScan::Lines {
                start: offset,
                line: 1,
            },
            // JSON allows fewer kinds of whitespace before `[` than the check above.
            Some(first) if bytes[offset..first].iter().all(|&b| is_json_whitespace(b)) => {
                SpanScan::Array { start: first + 1 }
            }
            // Nothing but whitespace, or whitespace JSON does not allow.
            _ => SpanScan::Invalid,
        };
        RecordSpans {
            bytes,
            scan,
            index: 0,
        }
    }

    fn span(&mut self, range: std::ops::Range<usize>, location: Location) -> RecordSpan {
        let index = self.index;
        self.index += 1;
        RecordSpan {
            range,
            location,
            index,
        }
    }

    /// The next line with content, as a span.
    fn next_line(&mut self, mut start: usize, mut line: usize) -> Option<RecordSpan> {
        let bytes = self.bytes;
        while start <= bytes.len() {
            let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |p| start + p);
            let (range, number) = (start..end, line);
            start = end + 1;
            line += 1;
            if bytes[range.clone()].iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            self.scan = SpanScan::Lines { start, line };
            return Some(self.span(range, Location::Line(number)));
        }
        self.scan = SpanScan::Done;
        None
    }

    /// The next element of the array starting at `start`: `Some(Some(span))`, `Some(None)` when
    /// the file cannot be split, `None` after the last.
    fn next_element(&mut self, start: usize) -> Option<Option<RecordSpan>> {
        let bytes = self.bytes;
        self.scan = SpanScan::Done;
        let mut depth = 1;
        let mut i = start;
        let trimmed = |range| {
            let range = trim_json_whitespace(bytes, range);
            (!range.is_empty()).then_some(range)
        };
        loop {
            let Some(&b) = bytes.get(i) else {
                return Some(None);
            };
            match b {
                b'"' => {
                    // Skip the string: find its closing quote, stepping over escapes.
                    i += 1;
                    loop {
                        let Some(p) = bytes
                            .get(i..)
                            .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
                        else {
                            return Some(None);
                        };
                        i += p;
                        if bytes[i] == b'"' {
                            break;
                        }
                        i += 2;
                    }
                }
                b'[' | b'{' => {
                    depth += 1;
                    if depth > SPAN_MAX_DEPTH {
                        return Some(None);
                    }
                }
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        // A `}` closed the array.
                        return Some(None);
                    }
                }
                b']' => {
                    depth -= 1;
                    if depth == 0 {
                        // The last element: valid only with nothing but whitespace after `]`.
                        let Some(range) = trimmed(start..i) else {
                            return Some(None);
                        };
                        if !bytes[i + 1..].iter().all(|&b| is_json_whitespace(b)) {
                            return Some(None);
                        }
                        let index = self.index;
                        return Some(Some(self.span(range, Location::Record(index))));
                    }
                }
                b',' if depth == 1 => {
                    let Some(range) = trimmed(start..i) else {
                        return Some(None);
                    };
                    self.scan = SpanScan::Array { start: i + 1 };
                    let index = self.index;
                    return Some(Some(self.span(range, Location::Record(index))));
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl Iterator for RecordSpans<'_> {
    type Item = Option<RecordSpan>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.scan {
            SpanScan::Done => None,
            SpanScan::Invalid => {
                self.scan = SpanScan::Done;
                Some(None)
            }
            SpanScan::Lines { start, line } => self.next_line(start, line).map(Some),
            SpanScan::Array { start } => self.next_element(start),
        }
    }
}

/// Gathers the transitions of a file's records in order, rejecting duplicate ids.
struct Collector<'s> {
    source: &'s str,
    seen: HashMap<String, Location>,
    transitions: Vec<Transition>,
}

impl<'s> Collector<'s> {
    fn new(source: &'s str) -> Self {
        Collector {
            source,
            seen: HashMap::new(),
            transitions: Vec::new(),
        }
    }

    fn push(
        &mut self,
        location: &Location,
        transitions: Vec<Transition>,
    ) -> Result<(), FormatError> {
        let fields = Fields {
            source: self.source,
            location,
        };
        note_ids(&mut self.seen, &fields, &transitions)?;
        self.transitions.extend(transitions);
        Ok(())
    }

    fn finish(self) -> Result<Vec<Transition>, FormatError> {
        if self.transitions.is_empty() {
            return Err(file_error(self.source, "the benchmark holds no samples"));
        }
        Ok(self.transitions)
    }
}

/// Which form a record has.
enum RecordShape {
    /// `step_detail`: one step.
    Single,
    /// `trajectory`: a list of steps.
    Trajectory,
    /// The step keys at top level.
    Flat,
}

/// The transitions of one record. The record is taken apart: states and observations are moved
/// out of it, not copied.
fn record_transitions(
    mut value: Value,
    index: usize,
    fields: &Fields<'_>,
) -> Result<Vec<Transition>, FormatError> {
    let map = fields.object(&value, "")?;
    let base_id = match fields.id(map, "sample_id", "sample_id")? {
        Some(id) => id,
        None => fields
            .id(map, "id", "id")?
            .unwrap_or_else(|| index.to_string()),
    };
    let task_info = match map.get("task_info") {
        None | Some(Value::Null) => None,
        Some(v) => Some(fields.object(v, "task_info")?),
    };
    let env_id = match task_info {
        Some(info) => fields.id(info, "env_id", "task_info.env_id")?,
        None => None,
    }
    .or(fields.id(map, "env_id", "env_id")?)
    .or(fields.id(map, "env", "env")?);
    let task_id = match task_info {
        Some(info) => fields.id(info, "task_id", "task_info.task_id")?,
        None => None,
    };
    match map.get("env_code") {
        None | Some(Value::Null | Value::String(_)) => {}
        Some(other) => {
            return Err(fields.error(
                "env_code",
                format!("expected a string, found {}", crate::path::type_name(other)),
            ))
        }
    }
    let shape = if map.contains_key("step_detail") {
        RecordShape::Single
    } else if let Some(trajectory) = map.get("trajectory") {
        let Value::Array(steps) = trajectory else {
            return Err(fields.error("trajectory", "expected a list of steps"));
        };
        if steps.is_empty() {
            return Err(fields.error("trajectory", "the trajectory has no steps"));
        }
        RecordShape::Trajectory
    } else if map.contains_key("config_before") {
        RecordShape::Flat
    } else {
        return Err(fields.error("", "the record has neither `step_detail` nor `trajectory`"));
    };
    let mut env_code = match value.get_mut("env_code") {
        Some(Value::String(code)) => std::mem::take(code),
        _ => String::new(),
    };
    let steps: Vec<(Option<usize>, &mut Value, String)> = match shape {
        RecordShape::Single => value
            .get_mut("step_detail")
            .map(|step| (None, step, "step_detail".to_owned()))
            .into_iter()
            .collect(),
        RecordShape::Trajectory => match value.get_mut("trajectory") {
            Some(Value::Array(steps)) => steps
                .iter_mut()
                .enumerate()
                .map(|(k, s)| (Some(k), s, format!("trajectory.{k}")))
                .collect(),
            _ => Vec::new(),
        },
        RecordShape::Flat => vec![(None, &mut value, String::new())],
    };
    let count = steps.len();
    let mut out = Vec::with_capacity(count);
    for (step, value, prefix) in steps {
        let at = |name: &str| {
            if prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{prefix}.{name}")
            }
        };
        let step_map = fields.object_mut(value, &prefix)?;
        let action = read_action(
            fields,
            fields.required(step_map, "action", &at("action"))?,
            &at("action"),
        )?;
        let observation = match step_map.get_mut("observation") {
            None => return Err(fields.error(&at("observation"), "missing")),
            Some(Value::Object(obs)) => obs
                .get_mut("content")
                .map(Value::take)
                .ok_or_else(|| fields.error(&at("observation.content"), "missing"))?,
            Some(other) => other.take(),
        };
        let config_before =
            fields.take_required(step_map, "config_before", &at("config_before"))?;
        let config_after = fields.take_required(step_map, "config_after", &at("config_after"))?;
        let stored_change_count = match step_map.get("config_change") {
            None | Some(Value::Null) => None,
            Some(change) => {
                let change = fields.object(change, &at("config_change"))?;
                match change.get("change_count") {
                    None | Some(Value::Null) => None,
                    Some(n) => Some(
                        n.as_u64()
                            .and_then(|n| usize::try_from(n).ok())
                            .ok_or_else(|| {
                                fields.error(
                                    &at("config_change.change_count"),
                                    "expected a non-negative integer",
                                )
                            })?,
                    ),
                }
            }
        };
        let id = match step {
            Some(k) => format!("{base_id}:{k}"),
            None => base_id.clone(),
        };
        // The last step takes the code; the others copy it.
        let env_code = if out.len() + 1 == count {
            std::mem::take(&mut env_code)
        } else {
            env_code.clone()
        };
        out.push(Transition {
            id,
            origin: Origin {
                record: index,
                step,
            },
            env_id: env_id.clone(),
            task_id: task_id.clone(),
            action,
            observation,
            config_before,
            config_after,
            stored_change_count,
            env_code,
        });
    }
    Ok(out)
}

fn read_action(fields: &Fields<'_>, value: &Value, field: &str) -> Result<Action, FormatError> {
    let map = fields.object(value, field)?;
    let name = match map.get("name") {
        Some(Value::String(name)) => name.clone(),
        Some(other) => {
            return Err(fields.error(
                &format!("{field}.name"),
                format!("expected a string, found {}", crate::path::type_name(other)),
            ))
        }
        None => return Err(fields.error(&format!("{field}.name"), "missing")),
    };
    let arguments = match map.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(args)) => args.clone(),
        // Function-calling APIs deliver arguments as a JSON string.
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(args)) => args,
            _ => {
                return Err(fields.error(
                    &format!("{field}.arguments"),
                    "a string here must hold a JSON object",
                ))
            }
        },
        Some(other) => {
            return Err(fields.error(
                &format!("{field}.arguments"),
                format!(
                    "expected an object, found {}",
                    crate::path::type_name(other)
                ),
            ))
        }
    };
    Ok(Action { name, arguments })
}

/// How a prediction names its transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PredictionKey {
    /// envsim prediction JSONL: the transition id.
    Id(String),
    /// Reference result files: record index and trajectory step index.
    Reference {
        /// `sample_index`.
        sample_index: usize,
        /// `step_index`, if given.
        step_index: Option<usize>,
    },
}

/// One prediction read from a file.
#[derive(Clone, Debug, PartialEq)]
pub struct PredictionRecord {
    /// Which transition.
    pub key: PredictionKey,
    /// What the simulator said.
    pub prediction: Prediction,
    /// Token usage, if recorded.
    pub usage: Option<Usage>,
    /// Where it was read from, for messages.
    pub location: Location,
}

/// Reads predictions: envsim prediction JSONL, or a reference evaluator result file.
///
/// envsim JSONL, one object per line: `sample_id` (string or integer) and one of `output`
/// (raw model text), `prediction` (an already-parsed output object) or `error` (the request
/// failed); optional `usage` (`prompt_tokens`, `completion_tokens`).
pub fn parse_predictions(bytes: &[u8], source: &str) -> Result<Vec<PredictionRecord>, FormatError> {
    let trimmed = strip_bom(bytes);
    if first_byte(trimmed) == Some(b'{') {
        if let Ok(Value::Object(whole)) = serde_json::from_slice::<Value>(trimmed) {
            if whole.contains_key("results") && !whole.contains_key("sample_id") {
                return reference_results(&whole, source);
            }
        }
    }
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for record in records(bytes, source)? {
        let line = match record.location {
            Location::Line(l) => l,
            _ => record.index,
        };
        let fields = Fields {
            source,
            location: &record.location,
        };
        let map = fields.object(&record.value, "")?;
        let id = fields
            .id(map, "sample_id", "sample_id")?
            .ok_or_else(|| fields.error("sample_id", "missing"))?;
        if let Some(first) = seen.insert(id.clone(), line) {
            return Err(fields.error(
                "sample_id",
                format!("duplicate sample id {id:?} (first on line {first})"),
            ));
        }
        let present: Vec<&str> = ["output", "prediction", "error"]
            .into_iter()
            .filter(|k| map.get(*k).is_some_and(|v| !v.is_null()))
            .collect();
        let prediction = match present.as_slice() {
            ["output"] => match &map["output"] {
                Value::String(text) => Prediction::Raw(text.clone()),
                other => {
                    return Err(fields.error(
                        "output",
                        format!(
                            "expected the raw model text as a string, found {}",
                            crate::path::type_name(other)
                        ),
                    ))
                }
            },
            ["prediction"] => Prediction::Parsed(map["prediction"].clone()),
            ["error"] => Prediction::ApiError(match &map["error"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
            [] => {
                return Err(fields.error("", "one of `output`, `prediction` or `error` is required"))
            }
            _ => {
                return Err(fields.error(
                    "",
                    format!(
                        "only one of `output`, `prediction` or `error` may be given, found {}",
                        present.join(", ")
                    ),
                ))
            }
        };
        let usage = match map.get("usage") {
            None | Some(Value::Null) => None,
            Some(u) => Some(
                serde_json::from_value::<Usage>(u.clone())
                    .map_err(|e| fields.error("usage", format!("expected token counts: {e}")))?,
            ),
        };
        out.push(PredictionRecord {
            key: PredictionKey::Id(id),
            prediction,
            usage,
            location: record.location.clone(),
        });
    }
    Ok(out)
}

fn reference_results(
    whole: &Map<String, Value>,
    source: &str,
) -> Result<Vec<PredictionRecord>, FormatError> {
    let Some(Value::Array(results)) = whole.get("results") else {
        return Err(FormatError {
            source: source.to_owned(),
            location: Location::File,
            field: Some("results".into()),
            message: "expected a list".into(),
        });
    };
    results
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let location = Location::Record(index);
            let fields = Fields {
                source,
                location: &location,
            };
            let map = fields.object(entry, "results")?;
            let index_of = |key: &str| -> Result<Option<usize>, FormatError> {
                match map.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => v
                        .as_u64()
                        .and_then(|n| usize::try_from(n).ok())
                        .map(Some)
                        .ok_or_else(|| fields.error(key, "expected a non-negative integer")),
                }
            };
            let sample_index =
                index_of("sample_index")?.ok_or_else(|| fields.error("sample_index", "missing"))?;
            let step_index = index_of("step_index")?;
            let result = fields.object(fields.required(map, "result", "result")?, "result")?;
            let prediction = match result.get("error") {
                Some(Value::String(e)) if e == "failed_parse" => Prediction::Raw(
                    result
                        .get("raw")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                ),
                Some(e) if !e.is_null() => Prediction::ApiError(match e {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                }),
                _ => {
                    let mut object = Map::new();
                    object.insert(
                        "feedback".into(),
                        result
                            .get("feedback_pred_raw")
                            .cloned()
                            .unwrap_or(Value::Null),
                    );
                    object.insert(
                        "config_changes".into(),
                        result
                            .get("changes_pred")
                            .cloned()
                            .unwrap_or(Value::Array(Vec::new())),
                    );
                    Prediction::Parsed(Value::Object(object))
                }
            };
            Ok(PredictionRecord {
                key: PredictionKey::Reference {
                    sample_index,
                    step_index,
                },
                prediction,
                usage: None,
                location,
            })
        })
        .collect()
}

/// Pairs predictions with transitions, in benchmark order.
///
/// A prediction for an unknown transition is an error. A transition without a prediction is an
/// error unless `allow_missing`, in which case it scores as [`Prediction::Missing`].
pub fn match_predictions<T: std::borrow::Borrow<Transition>>(
    transitions: &[T],
    records: Vec<PredictionRecord>,
    allow_missing: bool,
    source: &str,
) -> Result<Vec<(Prediction, Option<Usage>)>, FormatError> {
    let mut matcher = PredictionMatcher::new(records, source);
    let matched = transitions
        .iter()
        .map(|t| matcher.take(t.borrow()))
        .collect();
    matcher.finish(allow_missing)?;
    Ok(matched)
}

/// [`match_predictions`] one transition at a time, for a caller that reads the benchmark as a
/// stream and cannot hold its transitions: [`take`](Self::take) hands out each transition's
/// prediction as the transition comes, [`finish`](Self::finish) then gives the error
/// [`match_predictions`] gives for the same transitions (the first prediction, in file order,
/// for no transition or for a transition that already has one; then the missing ones).
///
/// A prediction finds its transition by id, or by the reference key: `sample_index` is the
/// benchmark record, `step_index` the step of a trajectory record (ignored for a single-step
/// record, 0 when absent). A record's transitions are either one without a step or its steps,
/// so every prediction has at most one transition.
#[derive(Debug)]
pub struct PredictionMatcher {
    source: String,
    entries: Vec<MatchEntry>,
    /// Entries keyed by id, in file order.
    by_id: HashMap<String, Vec<usize>>,
    /// Entries keyed by reference `sample_index`, in file order.
    by_record: HashMap<usize, Vec<usize>>,
    /// Transitions seen.
    seen: usize,
    /// The first transitions without a prediction (as many as an error names).
    missing: Vec<String>,
    /// How many transitions had no prediction.
    missing_count: usize,
}

/// How many missing sample ids the error names.
const MISSING_SHOWN: usize = 5;

#[derive(Debug)]
struct MatchEntry {
    key: PredictionKey,
    location: Location,
    /// The prediction until its transition takes it.
    prediction: Option<(Prediction, Option<Usage>)>,
    state: EntryState,
}

#[derive(Debug)]
enum EntryState {
    /// No transition has come for it (yet).
    Unclaimed,
    /// Its transition took it.
    Taken,
    /// Its transition had an earlier prediction; the transition's id.
    Second(String),
}

impl PredictionMatcher {
    /// A matcher for the predictions of the file named `source`.
    pub fn new(records: Vec<PredictionRecord>, source: &str) -> Self {
        let mut by_id: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_record: HashMap<usize, Vec<usize>> = HashMap::new();
        let entries = records
            .into_iter()
            .enumerate()
            .map(|(i, record)| {
                match &record.key {
                    PredictionKey::Id(id) => by_id.entry(id.clone()).or_default().push(i),
                    PredictionKey::Reference { sample_index, .. } => {
                        by_record.entry(*sample_index).or_default().push(i);
                    }
                }
                MatchEntry {
                    key: record.key,
                    location: record.location,
                    prediction: Some((record.prediction, record.usage)),
                    state: EntryState::Unclaimed,
                }
            })
            .collect();
        PredictionMatcher {
            source: source.to_owned(),
            entries,
            by_id,
            by_record,
            seen: 0,
            missing: Vec::new(),
            missing_count: 0,
        }
    }

    /// The prediction for the next transition ([`Prediction::Missing`] when there is none).
    /// Each transition must come once.
    pub fn take(&mut self, transition: &Transition) -> (Prediction, Option<Usage>) {
        self.seen += 1;
        let entries = &self.entries;
        let mut candidates: Vec<usize> = self
            .by_id
            .get(transition.id.as_str())
            .into_iter()
            .flatten()
            .copied()
            .chain(
                self.by_record
                    .get(&transition.origin.record)
                    .into_iter()
                    .flatten()
                    .copied()
                    .filter(|&i| match (&entries[i].key, transition.origin.step) {
                        (_, None) => true,
                        (PredictionKey::Reference { step_index, .. }, Some(step)) => {
                            step_index.unwrap_or(0) == step
                        }
                        (PredictionKey::Id(_), Some(_)) => false,
                    }),
            )
            .collect();
        candidates.sort_unstable();
        let Some((&first, rest)) = candidates.split_first() else {
            self.missing_count += 1;
            if self.missing.len() < MISSING_SHOWN {
                self.missing.push(transition.id.clone());
            }
            return (Prediction::Missing, None);
        };
        for &i in rest {
            self.entries[i].state = EntryState::Second(transition.id.clone());
        }
        let entry = &mut self.entries[first];
        entry.state = EntryState::Taken;
        entry
            .prediction
            .take()
            .unwrap_or((Prediction::Missing, None))
    }

    /// Ends the benchmark: the first prediction (in file order) that named no transition or a
    /// transition with an earlier prediction is an error, and so are transitions without a
    /// prediction unless `allow_missing`.
    pub fn finish(self, allow_missing: bool) -> Result<(), FormatError> {
        for entry in &self.entries {
            let message = match &entry.state {
                EntryState::Taken => continue,
                EntryState::Second(id) => format!("a second prediction for sample {id:?}"),
                EntryState::Unclaimed => match &entry.key {
                    PredictionKey::Id(id) => format!("sample_id {id:?} is not in the benchmark"),
                    PredictionKey::Reference {
                        sample_index,
                        step_index,
                    } => format!(
                        "sample_index {sample_index}, step_index {step_index:?} is not in the benchmark"
                    ),
                },
            };
            return Err(FormatError {
                source: self.source,
                location: entry.location.clone(),
                field: None,
                message,
            });
        }
        if self.missing_count > 0 && !allow_missing {
            return Err(file_error(
                &self.source,
                format!(
                    "{} of {} samples have no prediction (first: {}); pass --allow-missing to score them as wrong",
                    self.missing_count,
                    self.seen,
                    self.missing.join(", ")
                ),
            ));
        }
        Ok(())
    }
}
