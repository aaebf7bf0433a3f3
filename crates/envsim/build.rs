//! Embeds the bundled environment corpus (the workspace's `envs/` folder) in the binary, so an
//! installed `envsim` needs no source tree.
//!
//! Every file under `envs/` (hidden entries and `__pycache__` aside) is packed, byte for byte,
//! into `$OUT_DIR/corpus.bin.zst`, which `src/bundled.rs` includes and unpacks. The archive is
//! one zstd frame with a content checksum holding:
//!
//! ```text
//! MAGIC  u32-le file count  then per file, in path order:
//!        u32-le path length, path (UTF-8, relative to envs/, `/`-separated),
//!        u64-le content length, content
//! ```
//!
//! Cargo reruns this script whenever anything under `envs/` changes, so the binary always holds
//! the corpus it was built from.

use std::fs;
use std::path::{Path, PathBuf};

/// Keep in step with `src/bundled.rs`.
const MAGIC: &[u8] = b"envsim-corpus/1\n";
/// Fast enough unoptimised (build scripts' dependencies are built without optimisation): about
/// 0.6 s for the 7.7 MB corpus, 0.75 MB out; level 19 saves another 0.1 MB but takes ~20 s.
const LEVEL: i32 = 9;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by Cargo"));
    let root = manifest_dir.join("../../envs");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", root.display());
    if !root.is_dir() {
        panic!(
            "the environment corpus is missing: {} is not a folder (envsim builds from its \
             workspace, which holds envs/)",
            root.display()
        );
    }
    let mut files = Vec::new();
    collect(&root, "", &mut files);
    files.sort();
    let mut archive = Vec::with_capacity(8 << 20);
    archive.extend_from_slice(MAGIC);
    archive.extend_from_slice(
        &u32::try_from(files.len())
            .expect("file count")
            .to_le_bytes(),
    );
    for (relative, path) in &files {
        let bytes =
            fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        archive.extend_from_slice(
            &u32::try_from(relative.len())
                .expect("path length")
                .to_le_bytes(),
        );
        archive.extend_from_slice(relative.as_bytes());
        archive.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        archive.extend_from_slice(&bytes);
    }
    let mut compressor = zstd::bulk::Compressor::new(LEVEL).expect("zstd compressor");
    compressor
        .set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))
        .expect("zstd checksum flag");
    let compressed = compressor.compress(&archive).expect("compress the corpus");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by Cargo"));
    fs::write(out.join("corpus.bin.zst"), compressed).expect("write the packed corpus");
}

/// Adds the files under `dir` (whose path relative to the corpus is `prefix`) to `files` as
/// (relative path, path on disk).
fn collect(dir: &Path, prefix: &str, files: &mut Vec<(String, PathBuf)>) {
    let entries =
        fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        let path = entry.path();
        let name = entry.file_name();
        let name = name
            .to_str()
            .unwrap_or_else(|| panic!("{}: the corpus needs UTF-8 file names", path.display()));
        if name.starts_with('.') || name == "__pycache__" {
            continue;
        }
        let relative = format!("{prefix}{name}");
        // Follows symbolic links, as reading the folder at run time did.
        let meta = fs::metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if meta.is_dir() {
            collect(&path, &format!("{relative}/"), files);
        } else if meta.is_file() {
            files.push((relative, path));
        }
    }
}
