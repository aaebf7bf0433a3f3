//! The bundled benchmark: 400 samples built from the bundled environments with
//! `envsim bench build` defaults (seed 42), in the reference JSON format (which carries each
//! sample's environment code, so prompts are complete), stored zstd-compressed in the binary.

use anyhow::{Context, Result};

/// Display name used where a path would be.
pub const NAME: &str = "<bundled benchmark>";

const COMPRESSED: &[u8] = include_bytes!("../../../data/bench/benchmark.json.zst");
const CHECKSUM: &str = include_str!("../../../data/bench/benchmark.json.sha256");

/// The benchmark file's bytes (reference JSON), checked against its recorded SHA-256.
pub fn benchmark() -> Result<Vec<u8>> {
    envsim_eval::prepare::unpack_benchmark(COMPRESSED, &fingerprint()?)
        .context("the bundled benchmark is damaged (corrupt build?)")
}

/// The SHA-256 recorded next to the bundled benchmark (`sha256sum` format).
pub fn fingerprint() -> Result<String> {
    CHECKSUM
        .split_whitespace()
        .next()
        .filter(|h| h.len() == 64)
        .map(str::to_owned)
        .context("data/bench/benchmark.json.sha256 holds no SHA-256")
}

#[cfg(test)]
mod tests {
    #[test]
    fn bundled_benchmark_matches_its_fingerprint() {
        let bytes = super::benchmark().expect("bundled benchmark");
        assert_eq!(
            envsim_eval::config::sha256_hex(&bytes),
            super::fingerprint().expect("recorded")
        );
        let transitions =
            envsim_core::formats::parse_benchmark(&bytes, super::NAME).expect("parses");
        assert_eq!(transitions.len(), 400);
        // The parallel reader `envsim eval` uses reads it alike.
        assert_eq!(
            envsim_eval::prepare::parse_benchmark(&bytes, super::NAME).expect("parses"),
            transitions
        );
        // Every sample carries its environment's code, so prompts are complete.
        assert!(transitions.iter().all(|t| t.env_code.contains("class ")));
    }

    #[test]
    fn a_damaged_benchmark_is_a_clear_error() {
        let mut damaged = super::COMPRESSED.to_vec();
        let middle = damaged.len() / 2;
        damaged[middle] ^= 0x20;
        let expected = super::fingerprint().expect("recorded");
        let error = envsim_eval::prepare::unpack_benchmark(&damaged, &expected).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("corrupt") || message.contains("differs from the recorded"),
            "{message}"
        );
    }
}
