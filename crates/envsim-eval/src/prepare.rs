//! Getting a benchmark ready to score, on every core: unpacking the bundled benchmark
//! ([`unpack_benchmark`]), reading a benchmark file record by record in parallel
//! ([`parse_benchmark`]) and preparing its samples in parallel ([`prepare_samples`]).
//!
//! Results are those of the sequential functions in `envsim_core` (same transitions and errors,
//! same prepared samples, same order); only the time differs. The bundled 36 MB benchmark takes
//! about 0.2 s on two cores where the sequential path took about 0.8 s (`cargo bench -p
//! envsim-eval --bench load`, numbers in `docs/benchmarks.md`).

use std::io::Read;
use std::num::NonZeroUsize;
use std::sync::Mutex;

use envsim_core::formats::{self, FormatError};
use envsim_core::sample::Transition;
use envsim_core::score::PreparedSample;

use crate::config::sha256_hex;

/// Largest benchmark [`unpack_benchmark`] accepts (a corrupt size field cannot make it allocate
/// more).
pub const MAX_UNPACKED_BYTES: u64 = 1 << 30;

/// Why compressed benchmark bytes could not be unpacked.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    /// The bytes are not a valid zstd stream.
    #[error("the compressed benchmark is corrupt: {0}")]
    Corrupt(String),
    /// The stream holds more than [`MAX_UNPACKED_BYTES`].
    #[error("the compressed benchmark holds {0} bytes or more, over the 1 GiB allowed")]
    TooLarge(u64),
    /// The unpacked bytes are not the recorded ones.
    #[error("the unpacked benchmark's SHA-256 {actual} differs from the recorded {expected}")]
    Checksum {
        /// SHA-256 recorded next to the compressed file.
        expected: String,
        /// SHA-256 of what was unpacked.
        actual: String,
    },
}

/// Unpacks a zstd-compressed benchmark (one or more frames, as the `zstd` tool writes them) and
/// checks it against its recorded SHA-256 (lowercase hex), which is the fingerprint runs are
/// stored under, so the unpacked bytes are exactly the benchmark file's.
pub fn unpack_benchmark(compressed: &[u8], expected_sha256: &str) -> Result<Vec<u8>, UnpackError> {
    let declared = zstd::zstd_safe::get_frame_content_size(compressed)
        .map_err(|e| UnpackError::Corrupt(format!("unreadable frame header ({e:?})")))?;
    if let Some(size) = declared.filter(|&size| size > MAX_UNPACKED_BYTES) {
        return Err(UnpackError::TooLarge(size));
    }
    // One frame that declares its size (as `zstd FILE` writes it) unpacks straight into a buffer
    // of that size; anything else (several frames, a streamed frame) goes through the stream
    // decoder, which also gives the error for corrupt input.
    let single = declared
        .and_then(|size| usize::try_from(size).ok())
        .and_then(|size| zstd::bulk::decompress(compressed, size).ok());
    let bytes = match single {
        Some(bytes) => bytes,
        None => {
            let mut bytes = Vec::new();
            zstd::stream::Decoder::new(compressed)
                .map_err(|e| UnpackError::Corrupt(e.to_string()))?
                .take(MAX_UNPACKED_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| UnpackError::Corrupt(e.to_string()))?;
            if bytes.len() as u64 > MAX_UNPACKED_BYTES {
                return Err(UnpackError::TooLarge(bytes.len() as u64));
            }
            bytes
        }
    };
    let actual = sha256_hex(&bytes);
    if actual != expected_sha256 {
        return Err(UnpackError::Checksum {
            expected: expected_sha256.to_owned(),
            actual,
        });
    }
    Ok(bytes)
}

/// [`envsim_core::formats::parse_benchmark`] with the records parsed on every core: the same
/// transitions in the same order, and for a bad file the same located error (which is found by
/// reading the file again as a whole).
pub fn parse_benchmark(bytes: &[u8], source: &str) -> Result<Vec<Transition>, FormatError> {
    formats::parse_benchmark_with(bytes, source, |n, read| {
        parallel_map((0..n).collect(), read)
    })
}

/// One item of a [`SampleStream`].
#[derive(Debug)]
pub enum StreamItem {
    /// The next sample in file order, with the score JSON of a missing prediction for it (what
    /// its row holds until it is answered).
    Sample {
        /// The prepared sample.
        sample: Box<PreparedSample>,
        /// `serde_json::to_string(&sample.score(&Prediction::Missing, None))`.
        missing_score: String,
    },
    /// The file is not a valid benchmark: the located error of [`formats::parse_benchmark`].
    /// Nothing follows.
    Failed(FormatError),
}

/// A benchmark's samples, read and prepared in file order on a background thread while the
/// caller already works on the first ones (the evaluation runner sends their requests). The
/// channel closes after the last sample, or right after a [`StreamItem::Failed`]; a stream
/// that closes without either ended because its thread failed.
pub struct SampleStream {
    /// Where the items arrive.
    pub items: tokio::sync::mpsc::Receiver<StreamItem>,
}

/// Records read and prepared together before their samples are handed on: small, so the first
/// samples are ready after a few milliseconds, and enough to keep every core busy.
const STREAM_CHUNK: usize = 8;

/// Starts reading `bytes` (a benchmark file named `source`) into a [`SampleStream`]. The items
/// are exactly those of [`parse_benchmark`] + [`prepare_samples`] (same samples, same order,
/// same located error), but the first ones arrive long before the file is read. An error
/// found late comes after the samples before it: callers that must not act on a file with an
/// error anywhere read the whole stream first.
pub fn stream_samples(bytes: Vec<u8>, source: String) -> std::io::Result<SampleStream> {
    let (tx, items) = tokio::sync::mpsc::channel(1024);
    std::thread::Builder::new()
        .name("envsim-read-bench".into())
        .spawn(move || produce_samples(&bytes, &source, &tx))?;
    Ok(SampleStream { items })
}

fn produce_samples(bytes: &[u8], source: &str, tx: &tokio::sync::mpsc::Sender<StreamItem>) {
    let send = |sample: PreparedSample| {
        let mut sample = Box::new(sample);
        let missing_score =
            serde_json::to_string(&sample.score(&envsim_core::sample::Prediction::Missing, None))
                .unwrap_or_default();
        tx.blocking_send(StreamItem::Sample {
            sample,
            missing_score,
        })
        .is_ok()
    };
    let fail = |error: FormatError| {
        let _ = tx.blocking_send(StreamItem::Failed(error));
    };
    // The whole file at once when its records cannot be read on their own.
    if formats::is_compact(bytes) {
        match parse_benchmark(bytes, source) {
            Ok(transitions) => {
                for sample in prepare_samples(transitions) {
                    if !send(sample) {
                        return;
                    }
                }
            }
            Err(error) => fail(error),
        }
        return;
    }
    // Any failure (a bad record, a duplicate id, no samples) is settled by the whole-file
    // reader: its located error, the same as without streaming, or (should the quick scan have
    // split the file wrongly) the samples not sent yet.
    let settle = |sent: usize| match parse_benchmark(bytes, source) {
        Err(error) => fail(error),
        Ok(transitions) => {
            let rest = transitions.into_iter().skip(sent).collect();
            for sample in prepare_samples(rest) {
                if !send(sample) {
                    return;
                }
            }
        }
    };
    let mut seen = std::collections::HashSet::new();
    // The scan for record boundaries runs ahead of the readers one chunk at a time, so the
    // first samples are ready long before it reaches the end of the file.
    let mut spans = formats::RecordSpans::new(bytes);
    loop {
        let Some(chunk) = spans
            .by_ref()
            .take(STREAM_CHUNK)
            .collect::<Option<Vec<_>>>()
        else {
            return settle(seen.len());
        };
        if chunk.is_empty() {
            break;
        }
        let read: Vec<Option<Vec<PreparedSample>>> = parallel_map(chunk.iter().collect(), |span| {
            formats::read_record(bytes, span)
                .map(|transitions| transitions.into_iter().map(PreparedSample::new).collect())
        });
        for samples in read {
            let Some(samples) = samples else {
                return settle(seen.len());
            };
            for sample in samples {
                if !seen.insert(sample.transition().id.clone()) {
                    return settle(seen.len());
                }
                if !send(sample) {
                    return;
                }
            }
        }
    }
    if seen.is_empty() {
        settle(0);
    }
}

/// `transitions.into_iter().map(PreparedSample::new).collect()`, on every core, in order.
pub fn prepare_samples(transitions: Vec<Transition>) -> Vec<PreparedSample> {
    parallel_map(transitions, PreparedSample::new)
}

/// `items.into_iter().map(f).collect()` with the calls spread over the available cores (the
/// calling thread works too); items are handed out one at a time, so uneven costs balance out.
/// The results keep the order of `items`. Runs on the calling thread alone when there is one
/// core, one item, or no thread can be started. A panic in `f` is re-raised here.
pub fn parallel_map<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let workers = cores.min(items.len());
    if workers <= 1 {
        return items.into_iter().map(f).collect();
    }
    let n = items.len();
    let queue = Mutex::new(items.into_iter().enumerate());
    let work = || {
        let mut done = Vec::new();
        loop {
            let next = match queue.lock() {
                Ok(mut queue) => queue.next(),
                Err(poisoned) => poisoned.into_inner().next(),
            };
            let Some((i, item)) = next else {
                return done;
            };
            done.push((i, f(item)));
        }
    };
    let mut slots: Vec<Option<R>> = std::iter::repeat_with(|| None).take(n).collect();
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..workers)
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(scope, work).ok())
            .collect();
        let mut parts = vec![work()];
        for helper in helpers {
            match helper.join() {
                Ok(part) => parts.push(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        for (i, result) in parts.into_iter().flatten() {
            slots[i] = Some(result);
        }
    });
    // Every index was handed out exactly once, so every slot is filled.
    slots.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use envsim_testkit::{to_json_array, BenchOptions, SyntheticBench};

    fn fixture() -> String {
        to_json_array(&SyntheticBench::records(5, 2, &BenchOptions::default()))
    }

    #[test]
    fn parallel_map_keeps_order_and_every_item() {
        let out = parallel_map((0..1000).collect(), |i: u64| {
            // Uneven work, so workers finish out of order.
            (0..(i % 7) * 1000).fold(i, |acc, x| acc ^ x)
                ^ (0..(i % 7) * 1000).fold(0, |a, x| a ^ x)
        });
        assert_eq!(out, (0..1000).collect::<Vec<u64>>());
        assert!(parallel_map(Vec::<u8>::new(), |x| x).is_empty());
        assert_eq!(parallel_map(vec![3], |x| x * 2), [6]);
    }

    #[test]
    #[should_panic(expected = "boom")]
    fn parallel_map_re_raises_a_panic() {
        parallel_map((0..64).collect(), |i: u32| {
            if i == 40 {
                panic!("boom");
            }
            i
        });
    }

    #[test]
    fn parse_benchmark_equals_the_sequential_reader() {
        let text = fixture();
        let parallel = parse_benchmark(text.as_bytes(), "f.json").expect("parses");
        let sequential = formats::parse_benchmark(text.as_bytes(), "f.json").expect("parses");
        assert_eq!(parallel, sequential);
        let bad = text.replacen("\"config_after\"", "\"config_aftr\"", 1);
        let error = parse_benchmark(bad.as_bytes(), "f.json").unwrap_err();
        assert_eq!(
            Err(error),
            formats::parse_benchmark(bad.as_bytes(), "f.json")
        );
    }

    #[test]
    fn prepare_samples_equals_the_sequential_preparation() {
        let transitions = formats::parse_benchmark(fixture().as_bytes(), "f.json").expect("parses");
        let sequential: Vec<PreparedSample> = transitions
            .iter()
            .cloned()
            .map(PreparedSample::new)
            .collect();
        let mut parallel = prepare_samples(transitions.clone());
        assert_eq!(parallel.len(), sequential.len());
        let oracle = envsim_core::baseline::Baseline::Oracle;
        for ((p, mut s), t) in parallel.iter_mut().zip(sequential).zip(&transitions) {
            assert_eq!(p.transition(), t);
            assert_eq!(format!("{p:?}"), format!("{s:?}"));
            let prediction = oracle.predict(t);
            assert_eq!(p.score(&prediction, None), s.score(&prediction, None));
        }
        let null = envsim_core::baseline::Baseline::Null;
        for (p, t) in parallel.iter_mut().zip(&transitions) {
            let score = p.score(&null.predict(t), None);
            assert_eq!(score.sample_id, t.id);
        }
    }

    /// Everything a stream gives: the samples (as their debug text, which covers every
    /// prepared field) with their missing-prediction scores, then the error if any.
    fn drain(text: &str) -> (Vec<(String, String)>, Option<FormatError>) {
        let mut stream = stream_samples(text.as_bytes().to_vec(), "f.json".into()).expect("starts");
        let mut samples = Vec::new();
        let mut error = None;
        while let Some(item) = stream.items.blocking_recv() {
            match item {
                StreamItem::Sample {
                    sample,
                    missing_score,
                } => {
                    assert!(error.is_none(), "a sample after the error");
                    samples.push((format!("{sample:?}"), missing_score));
                }
                StreamItem::Failed(e) => error = Some(e),
            }
        }
        (samples, error)
    }

    /// What the stream must give: the whole-file reader's samples or its error.
    fn expected(text: &str) -> Result<Vec<(String, String)>, FormatError> {
        let transitions = formats::parse_benchmark(text.as_bytes(), "f.json")?;
        Ok(transitions
            .into_iter()
            .map(|t| {
                let mut sample = PreparedSample::new(t);
                let missing = serde_json::to_string(
                    &sample.score(&envsim_core::sample::Prediction::Missing, None),
                )
                .expect("serialises");
                (format!("{sample:?}"), missing)
            })
            .collect())
    }

    #[test]
    fn a_stream_gives_the_samples_of_the_whole_file_reader() {
        let records = SyntheticBench::records(9, 3, &BenchOptions::default());
        let array = to_json_array(&records);
        let lines: String = records.iter().map(|r| format!("{r}\n")).collect();
        for text in [&array, &lines] {
            let (samples, error) = drain(text);
            assert_eq!(error, None);
            assert_eq!(samples.len(), records.len());
            assert_eq!(Ok(samples), expected(text));
        }
    }

    #[test]
    fn a_stream_ends_with_the_whole_file_readers_error_after_the_good_samples() {
        let records = SyntheticBench::records(9, 2, &BenchOptions::default());
        let text = to_json_array(&records);
        let good = expected(&text).expect("valid");
        let n = records.len();
        // A record without its call, last: every record before it streams first.
        let mut late = records.clone();
        late[n - 1]["step_detail"]
            .as_object_mut()
            .expect("a step")
            .remove("action");
        // The same id twice (records 0 and 1).
        let mut duplicate = records.clone();
        duplicate[0]["sample_id"] = "dup".into();
        duplicate[1]["sample_id"] = "dup".into();
        let truncated = text[..text.len() - 40].to_owned();
        for (name, bad, source, at_most) in [
            ("late", to_json_array(&late), &late, n - 1),
            ("duplicate", to_json_array(&duplicate), &duplicate, 1),
            ("truncated", truncated, &records, n - 1),
            ("empty array", "[]".to_owned(), &records, 0),
            ("blank", "  \n ".to_owned(), &records, 0),
        ] {
            let want = expected(&bad).expect_err(name);
            let (samples, error) = drain(&bad);
            assert_eq!(error.as_ref(), Some(&want), "{name}");
            // At most the samples before the bad record came first (a chunk read together
            // stops at its first bad record), and they are the file's own.
            assert!(
                samples.len() <= at_most,
                "{name}: {} > {at_most}",
                samples.len()
            );
            if !samples.is_empty() {
                let before = expected(&to_json_array(&source[..samples.len()])).expect("valid");
                assert!(samples == before, "{name}: other samples");
            }
        }
        assert_eq!(good.len(), n);
        // The late error comes after every chunk before the bad record.
        let (samples, _) = drain(&to_json_array(&late));
        assert!(samples.len() >= (n - 1) / STREAM_CHUNK * STREAM_CHUNK);
    }

    #[test]
    fn a_compact_file_streams_in_order() {
        // A state record, then two samples that refer to it.
        let state = serde_json::json!({"items": {"a": 1}});
        let lines = [
            serde_json::json!({"state_id": "s0", "state": state}),
            serde_json::json!({"sample_id": "x", "action": {"name": "get", "arguments": {}}, "observation": "{'success': True}", "config_before_ref": {"state": "s0", "patch": []}, "config_after_ref": {"patch": []}}),
            serde_json::json!({"sample_id": "y", "action": {"name": "set", "arguments": {"v": 2}}, "observation": "{'success': True}", "config_before_ref": {"state": "s0", "patch": []}, "config_after_ref": {"patch": [{"op": "replace", "path": "/items/a", "value": 2}]}}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let (samples, error) = drain(&text);
        assert_eq!(error, None);
        assert_eq!(samples.len(), 2);
        assert_eq!(Ok(samples), expected(&text));
    }

    #[test]
    fn unpack_checks_the_stream_and_the_checksum() {
        let text = fixture();
        let sha = sha256_hex(text.as_bytes());
        let packed = zstd::bulk::compress(text.as_bytes(), 3).expect("compresses");
        assert_eq!(
            unpack_benchmark(&packed, &sha).expect("unpacks"),
            text.as_bytes()
        );
        // Two frames, as `cat a.zst b.zst` gives.
        let (a, b) = text.as_bytes().split_at(text.len() / 2);
        let mut two = zstd::bulk::compress(a, 1).expect("compresses");
        two.extend(zstd::bulk::compress(b, 1).expect("compresses"));
        assert_eq!(
            unpack_benchmark(&two, &sha).expect("unpacks"),
            text.as_bytes()
        );
        // A streamed frame carries no size.
        let streamed = zstd::stream::encode_all(text.as_bytes(), 1).expect("compresses");
        assert_eq!(
            unpack_benchmark(&streamed, &sha).expect("unpacks"),
            text.as_bytes()
        );

        let wrong = sha256_hex(b"other");
        assert!(matches!(
            unpack_benchmark(&packed, &wrong),
            Err(UnpackError::Checksum { expected, actual }) if expected == wrong && actual == sha
        ));
        let mut flipped = packed.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0x55;
        assert!(matches!(
            unpack_benchmark(&flipped, &sha),
            Err(UnpackError::Corrupt(_) | UnpackError::Checksum { .. })
        ));
        assert!(matches!(
            unpack_benchmark(&packed[..packed.len() - 9], &sha),
            Err(UnpackError::Corrupt(_))
        ));
        assert!(matches!(
            unpack_benchmark(b"not zstd at all", &sha),
            Err(UnpackError::Corrupt(_))
        ));
    }
}
