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
