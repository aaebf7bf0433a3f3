//! Reading any file as a benchmark or as predictions must never panic, and the record-by-record
//! reader for threads must agree with the sequential one.
//!
//! The input is a whole file. `parse_benchmark`, `records`, `record_spans`,
//! `parse_benchmark_with` (its records read on two threads, and in reverse order) and
//! `parse_predictions` all read it; the threaded and reversed readers must give exactly the
//! transitions, or the error, of `parse_benchmark`, and the spans found by the quick scan must
//! parse to the records `records` gives, at the same locations.
#![no_main]

use envsim_core::formats::{
    parse_benchmark, parse_benchmark_with, parse_predictions, record_spans, records,
};
use envsim_core::sample::Transition;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

type Read<'a> = &'a (dyn Fn(usize) -> Option<Vec<Transition>> + Sync);

/// Reads the records on two threads, even and odd indices.
fn on_two_threads(n: usize, read: Read<'_>) -> Vec<Option<Vec<Transition>>> {
    let mut out: Vec<Option<Vec<Transition>>> = vec![None; n];
    let (even, odd) = std::thread::scope(|s| {
        let run = |parity: usize| {
            s.spawn(move || {
                (0..n)
                    .filter(|i| i % 2 == parity)
                    .map(|i| (i, read(i)))
                    .collect::<Vec<_>>()
            })
        };
        let (a, b) = (run(0), run(1));
        // A reader that panicked is a finding: let it through.
        let a = a.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        let b = b.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        (a, b)
    });
    for (i, r) in even.into_iter().chain(odd) {
        out[i] = r;
    }
    out
}

/// Reads the records last to first.
fn in_reverse(n: usize, read: Read<'_>) -> Vec<Option<Vec<Transition>>> {
    let mut out: Vec<_> = (0..n).rev().map(read).collect();
    out.reverse();
    out
}

/// A runner that loses every result.
fn losing(_: usize, _: Read<'_>) -> Vec<Option<Vec<Transition>>> {
    Vec::new()
}

fuzz_target!(|data: &[u8]| {
    let sequential = parse_benchmark(data, "fuzz");
    assert_eq!(
        parse_benchmark_with(data, "fuzz", on_two_threads),
        sequential
    );
    assert_eq!(parse_benchmark_with(data, "fuzz", in_reverse), sequential);
    // A runner that loses results: the reader must notice and fall back.
    assert_eq!(parse_benchmark_with(data, "fuzz", losing), sequential);

    let whole = records(data, "fuzz");
    if let (Some(spans), Ok(whole)) = (record_spans(data), &whole) {
        assert_eq!(spans.len(), whole.len());
        for (span, record) in spans.iter().zip(whole) {
            assert_eq!(span.location, record.location);
            assert_eq!(span.index, record.index);
            let value: Value = serde_json::from_slice(&data[span.range.clone()])
                .expect("a span of a valid file parses");
            assert_eq!(value, record.value);
        }
    }
    if sequential.is_ok() {
        assert!(whole.is_ok(), "a readable benchmark has records");
    }
    let _ = parse_predictions(data, "fuzz");
});
