//! Reading a file of records one at a time, in whichever form each record is written: a
//! function-calling transcript without states (OpenAI chat, ShareGPT/Hermes, LLaMA-Factory),
//! or a trajectory record (envsim's, the reference's) with or without states. The audit and
//! the agreement of simulations read their inputs this way.

use crate::trajectories::{read_run, RecordedRun, TrajectoryError, TrajectoryFormat};
use envsim_core::transcript::{is_transcript, read_transcript, Transcript};
use serde_json::Value;
use std::path::Path;

/// A file or a record that cannot be read, with the place named.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file cannot be opened or read.
    #[error("cannot read {file}: {error}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        error: std::io::Error,
    },
    /// Something in the file is not a record: the message names the file, the record (line,
    /// column) and the field.
    #[error("{0}")]
    Invalid(String),
    /// A trajectory record with a field that does not read.
    #[error(transparent)]
    Trajectory(#[from] TrajectoryError),
}

/// Every record of the file at `path`, one at a time, read as it goes: JSON Lines are read line
/// by line, so memory holds one record, however long the file (a JSON array is read whole).
/// `each` gets the parsed value, where it is (`line 3`) and its position.
pub fn for_each_record_in<E: From<RecordError>>(
    path: &Path,
    mut each: impl FnMut(Value, &str, usize) -> Result<(), E>,
) -> Result<(), E> {
    use std::io::{BufRead, Read};
    let source = path.display().to_string();
    let io = |error| RecordError::Io {
        file: source.clone(),
        error,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let first = {
        let buffer = reader.fill_buf().map_err(io)?;
        let buffer = buffer
            .strip_prefix(b"\xEF\xBB\xBF".as_slice())
            .unwrap_or(buffer);
        buffer.iter().copied().find(|b| !b.is_ascii_whitespace())
    };
    match first {
        None => {
            return Err(RecordError::Invalid(format!("{source}: the file is empty")).into());
        }
        Some(b'[') => {
            let mut text = String::new();
            reader.read_to_string(&mut text).map_err(io)?;
            return for_each_record(&text, &source, each);
        }
        Some(_) => {}
    }
    let (mut line, mut number, mut index) = (Vec::new(), 0usize, 0usize);
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io)?;
        if n == 0 {
            break;
        }
        number += 1;
        let mut text = line.trim_ascii();
        if number == 1 {
            text = text
                .strip_prefix(b"\xEF\xBB\xBF".as_slice())
                .unwrap_or(text);
        }
        if text.is_empty() {
            continue;
        }
        let value: Value = serde_json::from_slice(text).map_err(|e| {
            RecordError::Invalid(format!(
                "{source}: line {number}, column {}: not valid JSON: {e}",
                e.column()
            ))
        })?;
        each(value, &format!("line {number}"), index)?;
        index += 1;
    }
    Ok(())
}

/// Every record of a text, one at a time: `each` gets the parsed value, where it is, and its
/// position.
pub fn for_each_record<E: From<RecordError>>(
    text: &str,
    source: &str,
    mut each: impl FnMut(Value, &str, usize) -> Result<(), E>,
) -> Result<(), E> {
    let bytes = text.as_bytes();
    match envsim_core::formats::record_spans(bytes) {
        Some(spans) => {
            for span in spans {
                let location = span.location.to_string();
                let value: Value = match serde_json::from_slice(&bytes[span.range.clone()]) {
                    Ok(v) => v,
                    // The whole-file reader gives the located syntax error.
                    Err(_) => {
                        let message = match envsim_core::formats::records(bytes, source) {
                            Err(e) => e.to_string(),
                            Ok(_) => format!("{source}: {location}: not valid JSON"),
                        };
                        return Err(RecordError::Invalid(message).into());
                    }
                };
                each(value, &location, span.index)?;
            }
        }
        None => {
            let records = envsim_core::formats::records(bytes, source)
                .map_err(|e| RecordError::Invalid(e.to_string()))?;
            for r in records {
                each(r.value, &r.location.to_string(), r.index)?;
            }
        }
    }
    Ok(())
}

/// One record read in the first form that fits it.
#[derive(Clone, Debug)]
pub enum AuditRecord {
    /// A function-calling transcript without states.
    Transcript(Transcript),
    /// An envsim or reference run (with states when it has an initial state).
    Run(RecordedRun),
}

/// Reads one record: a transcript (`messages` / `conversations`, no initial state), else a
/// trajectory record; errors name the file, the record and the field.
pub fn read_record(
    value: Value,
    location: &str,
    index: usize,
    source: &str,
) -> Result<AuditRecord, RecordError> {
    if is_transcript(&value) && value.get("initial_state").is_none() {
        return read_transcript(&value)
            .map(AuditRecord::Transcript)
            .map_err(|e| {
                RecordError::Invalid(format!(
                    "{source}: {location}: at {}: {}",
                    if e.pointer.is_empty() {
                        "the record"
                    } else {
                        &e.pointer
                    },
                    e.message
                ))
            });
    }
    let format = TrajectoryFormat::detect(&value).ok_or_else(|| {
        RecordError::Invalid(format!("{source}: {location}: not a trajectory record: expected `steps` (envsim), `task_info` + `trajectory` (reference), `messages` (OpenAI chat) or `conversations` (ShareGPT/Hermes)"))
    })?;
    Ok(AuditRecord::Run(run_of(
        value, location, index, format, source,
    )?))
}

/// [`read_run`] on a record it may take apart: its states are moved into the run instead of
/// copied (the rest of the record is read as `read_run` reads it, with the same errors).
fn run_of(
    mut value: Value,
    location: &str,
    index: usize,
    format: TrajectoryFormat,
    source: &str,
) -> Result<RecordedRun, TrajectoryError> {
    if format != TrajectoryFormat::Envsim {
        return read_run(&value, location, index, format, source);
    }
    let take = |slot: Option<&mut Value>| match slot {
        Some(v @ Value::Object(_)) => Some(v.take()),
        _ => None,
    };
    let initial = take(value.get_mut("initial_state"));
    let afters: Vec<Option<Value>> = match value.get_mut("steps").and_then(Value::as_array_mut) {
        Some(steps) => steps
            .iter_mut()
            .map(|s| take(s.get_mut("state_after")))
            .collect(),
        None => Vec::new(),
    };
    let mut run = read_run(&value, location, index, format, source)?;
    if initial.is_some() {
        run.initial_state = initial;
    }
    for (step, after) in run.steps.iter_mut().zip(afters) {
        if after.is_some() {
            step.state_after = after;
        }
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn collected(path: &Path) -> Result<Vec<(Value, String, usize)>, RecordError> {
        let mut seen = Vec::new();
        for_each_record_in(path, |value, location, index| {
            seen.push((value, location.to_owned(), index));
            Ok::<(), RecordError>(())
        })?;
        Ok(seen)
    }

    #[test]
    fn json_lines_are_read_line_by_line_with_their_places() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        std::fs::write(&path, "\u{feff}{\"a\": 1}\n\n  {\"b\": 2}  \n").unwrap();
        let seen = collected(&path).unwrap();
        assert_eq!(
            seen,
            vec![
                (json!({"a": 1}), "line 1".to_owned(), 0),
                (json!({"b": 2}), "line 3".to_owned(), 1)
            ]
        );
    }

    #[test]
    fn a_json_array_is_read_whole_with_record_positions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.json");
        std::fs::write(&path, "[{\"a\": 1}, {\"b\": 2}]").unwrap();
        let seen = collected(&path).unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!((&seen[1].0, seen[1].2), (&json!({"b": 2}), 1));
    }

    #[test]
    fn bad_files_are_refused_with_the_place() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.jsonl");
        std::fs::write(&empty, " \n").unwrap();
        assert_eq!(
            collected(&empty).unwrap_err().to_string(),
            format!("{}: the file is empty", empty.display())
        );
        let broken = dir.path().join("broken.jsonl");
        std::fs::write(&broken, "{\"a\": 1}\n{\"a\": \n").unwrap();
        let err = collected(&broken).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "{}: line 2, column 5: not valid JSON",
                broken.display()
            )),
            "{err}"
        );
        let missing = dir.path().join("missing.jsonl");
        assert!(matches!(
            collected(&missing).unwrap_err(),
            RecordError::Io { file, .. } if file == missing.display().to_string()
        ));
    }

    #[test]
    fn records_are_read_in_the_form_that_fits() {
        let transcript = json!({"messages": [
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
              "function": {"name": "get", "arguments": "{\"id\": 1}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"ok\": true}"}
        ]});
        match read_record(transcript, "line 1", 0, "t.jsonl").unwrap() {
            AuditRecord::Transcript(t) => assert_eq!(t.calls[0].tool, "get"),
            other => panic!("{other:?}"),
        }
        let run = json!({"env": "desk", "task_id": "t", "initial_state": {"n": 0},
            "steps": [{"action": {"name": "add", "arguments": {}}, "observation": "ok",
                       "state_after": {"n": 1}}]});
        match read_record(run, "line 2", 1, "t.jsonl").unwrap() {
            AuditRecord::Run(r) => {
                assert_eq!(r.initial_state, Some(json!({"n": 0})));
                assert_eq!(r.steps[0].state_after, Some(json!({"n": 1})));
            }
            other => panic!("{other:?}"),
        }
        let err = read_record(json!({"what": 1}), "line 3", 2, "t.jsonl").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("t.jsonl: line 3: not a trajectory record"));
    }
}
