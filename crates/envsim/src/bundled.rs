//! What the binary carries, so that an installed `envsim` needs no source tree:
//!
//! - the **benchmark**: 400 samples built from the bundled environments with `envsim bench
//!   build` defaults (seed 42), in the reference JSON format (which carries each sample's
//!   environment code, so prompts are complete), stored zstd-compressed and checked against its
//!   recorded SHA-256 when unpacked;
//! - the **environment corpus**: every file of the workspace's `envs/` folder, packed by
//!   `build.rs` (one zstd frame with a content checksum), unpacked into memory on first use.

use anyhow::{bail, Context, Result};
use envsim_exec::package::MemoryCorpus;
use std::sync::OnceLock;

/// Display name used where a path would be.
pub const NAME: &str = "<bundled benchmark>";

/// Stands for the corpus root in messages about its files
/// (`<bundled corpus>/online_shop/manifest.json: ...`).
pub const CORPUS_LABEL: &str = "<bundled corpus>";

const COMPRESSED: &[u8] = include_bytes!("../../../data/bench/benchmark.json.zst");
const CHECKSUM: &str = include_str!("../../../data/bench/benchmark.json.sha256");

/// `envs/` as packed by `build.rs`.
const CORPUS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/corpus.bin.zst"));
/// Keep in step with `build.rs`.
const CORPUS_MAGIC: &[u8] = b"envsim-corpus/1\n";

/// A benchmark file's bytes and its display name, or the bundled benchmark's when no file is
/// given.
pub fn read_or_bundled(path: Option<&std::path::Path>) -> Result<(Vec<u8>, String)> {
    match path {
        Some(path) => Ok((
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?,
            path.display().to_string(),
        )),
        None => Ok((benchmark()?, NAME.to_owned())),
    }
}

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
        .context("the bundled benchmark has no recorded SHA-256 (corrupt build?)")
}

/// The bundled environment corpus, unpacked once per process.
pub fn corpus() -> Result<&'static MemoryCorpus> {
    static UNPACKED: OnceLock<MemoryCorpus> = OnceLock::new();
    if let Some(corpus) = UNPACKED.get() {
        return Ok(corpus);
    }
    let corpus = unpack_corpus(CORPUS).context("the bundled corpus is damaged (corrupt build?)")?;
    Ok(UNPACKED.get_or_init(|| corpus))
}

fn unpack_corpus(compressed: &[u8]) -> Result<MemoryCorpus> {
    // The frame's checksum is verified while decoding.
    let archive = zstd::stream::decode_all(compressed).context("cannot unpack")?;
    let mut rest = archive
        .strip_prefix(CORPUS_MAGIC)
        .context("not a packed corpus")?;
    let count = u32_le(take(&mut rest, 4)?);
    let mut corpus = MemoryCorpus::new(CORPUS_LABEL);
    for _ in 0..count {
        let path_len = u32_le(take(&mut rest, 4)?);
        let path = std::str::from_utf8(take(&mut rest, path_len)?)
            .context("a file name is not UTF-8")?
            .to_owned();
        let len = u64::from_le_bytes(take(&mut rest, 8)?.try_into().expect("8 bytes"));
        let len = usize::try_from(len).context("a file is too large")?;
        corpus.insert(path, take(&mut rest, len)?.to_vec());
    }
    if !rest.is_empty() {
        bail!("{} stray bytes after the last file", rest.len());
    }
    Ok(corpus)
}

/// The first `n` bytes of `rest`, which moves past them.
fn take<'a>(rest: &mut &'a [u8], n: usize) -> Result<&'a [u8]> {
    if rest.len() < n {
        bail!("truncated");
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

fn u32_le(bytes: &[u8]) -> usize {
    u32::from_le_bytes(bytes.try_into().expect("4 bytes")) as usize
}

#[cfg(test)]
mod tests {
    use envsim_exec::package::EnvPackage;
    use std::path::{Path, PathBuf};

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

    /// Every file of the source tree's `envs/`, as the build script packs it.
    fn envs_on_disk() -> Vec<(String, Vec<u8>)> {
        fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) {
            for entry in std::fs::read_dir(dir).expect("lists") {
                let path = entry.expect("entry").path();
                let name = path.file_name().unwrap().to_str().unwrap().to_owned();
                if name.starts_with('.') || name == "__pycache__" {
                    continue;
                }
                if path.is_dir() {
                    walk(&path, &format!("{prefix}{name}/"), out);
                } else {
                    out.push((
                        format!("{prefix}{name}"),
                        std::fs::read(&path).expect("reads"),
                    ));
                }
            }
        }
        let mut out = Vec::new();
        walk(&envs_dir(), "", &mut out);
        out.sort();
        out
    }

    fn envs_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../envs")
    }

    #[test]
    fn the_bundled_corpus_is_envs_byte_for_byte() {
        let embedded: Vec<(String, Vec<u8>)> = super::corpus()
            .expect("bundled corpus")
            .files()
            .map(|(path, bytes)| (path.to_owned(), bytes.to_vec()))
            .collect();
        let on_disk = envs_on_disk();
        assert_eq!(
            embedded.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            on_disk.iter().map(|(p, _)| p).collect::<Vec<_>>()
        );
        for ((path, a), (_, b)) in embedded.iter().zip(&on_disk) {
            assert!(a == b, "{path} differs from envs/{path}");
        }
    }

    #[test]
    fn the_bundled_corpus_loads_as_envs_does() {
        let summary = |p: &EnvPackage| {
            (
                p.manifest.clone(),
                p.code.code.to_string(),
                p.code.class_name.to_string(),
                p.states.clone(),
                p.tests.clone(),
            )
        };
        let embedded = super::corpus().expect("bundled").load_all().expect("loads");
        let on_disk = EnvPackage::load_all(&envs_dir()).expect("loads");
        assert_eq!(embedded.len(), 42);
        assert_eq!(
            embedded.iter().map(summary).collect::<Vec<_>>(),
            on_disk.iter().map(summary).collect::<Vec<_>>()
        );
        assert_eq!(
            embedded[0].dir,
            Path::new(super::CORPUS_LABEL).join(&embedded[0].manifest.name)
        );
    }

    #[test]
    fn a_damaged_corpus_is_a_clear_error() {
        let mut damaged = super::CORPUS.to_vec();
        let middle = damaged.len() / 2;
        damaged[middle] ^= 0x20;
        assert!(super::unpack_corpus(&damaged).is_err());
        // A well-formed frame holding a truncated archive.
        let archive = zstd::stream::decode_all(super::CORPUS).expect("unpacks");
        let cut = zstd::bulk::compress(&archive[..archive.len() - 1], 1).expect("packs");
        let message = format!("{:#}", super::unpack_corpus(&cut).unwrap_err());
        assert_eq!(message, "truncated");
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
