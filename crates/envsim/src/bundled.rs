//! The bundled benchmark: 400 samples built from the bundled environments with
//! `envsim bench build` defaults (seed 42), in the reference JSON format (which carries each
//! sample's environment code, so prompts are complete), stored xz-compressed in the binary.

use anyhow::{bail, Context, Result};
use envsim_eval::config::sha256_hex;

/// Display name used where a path would be.
pub const NAME: &str = "<bundled benchmark>";

const COMPRESSED: &[u8] = include_bytes!("../../../data/bench/benchmark.json.xz");
const CHECKSUM: &str = include_str!("../../../data/bench/benchmark.json.sha256");

/// The benchmark file's bytes (reference JSON), checked against its recorded SHA-256.
pub fn benchmark() -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(26 << 20);
    lzma_rs::xz_decompress(&mut std::io::Cursor::new(COMPRESSED), &mut out)
        .context("the bundled benchmark does not decompress (corrupt build?)")?;
    let expected = fingerprint()?;
    let actual = sha256_hex(&out);
    if actual != expected {
        bail!("the bundled benchmark's SHA-256 {actual} differs from the recorded {expected}");
    }
    Ok(out)
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
        let transitions =
            envsim_core::formats::parse_benchmark(&bytes, super::NAME).expect("parses");
        assert_eq!(transitions.len(), 400);
        // Every sample carries its environment's code, so prompts are complete.
        assert!(transitions.iter().all(|t| t.env_code.contains("class ")));
    }
}
