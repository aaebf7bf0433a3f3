//! The bundled benchmark: 400 samples built from the bundled environments with
//! `envsim bench build` defaults (seed 42), stored xz-compressed in the binary.

use anyhow::{bail, Context, Result};
use envsim_eval::config::sha256_hex;

/// Display name used where a path would be.
pub const NAME: &str = "<bundled benchmark>";

const COMPRESSED: &[u8] = include_bytes!("../../../data/bench/benchmark.jsonl.xz");
const DATASHEET: &str = include_str!("../../../data/bench/datasheet.json");

/// The benchmark file's bytes (JSON Lines), checked against the datasheet's fingerprint.
pub fn benchmark() -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(26 << 20);
    lzma_rs::xz_decompress(&mut std::io::Cursor::new(COMPRESSED), &mut out)
        .context("the bundled benchmark does not decompress (corrupt build?)")?;
    let expected = fingerprint()?;
    let actual = sha256_hex(&out);
    if actual != expected {
        bail!("the bundled benchmark's SHA-256 {actual} differs from its datasheet's {expected}");
    }
    Ok(out)
}

/// The fingerprint recorded in the bundled datasheet.
pub fn fingerprint() -> Result<String> {
    let sheet: serde_json::Value =
        serde_json::from_str(DATASHEET).context("bundled datasheet is not JSON")?;
    sheet
        .get("fingerprint_sha256")
        .and_then(|f| f.as_str())
        .map(str::to_owned)
        .context("bundled datasheet has no fingerprint_sha256")
}

#[cfg(test)]
mod tests {
    #[test]
    fn bundled_benchmark_matches_its_fingerprint() {
        let bytes = super::benchmark().expect("bundled benchmark");
        let transitions =
            envsim_core::formats::parse_benchmark(&bytes, super::NAME).expect("parses");
        assert_eq!(transitions.len(), 400);
    }
}
