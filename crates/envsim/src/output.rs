//! Writing output files: whole or not at all.

use anyhow::{Context, Result};
use std::io::Write as _;
use std::path::Path;

/// Writes `bytes` to `path` atomically: into a uniquely named temporary file in the same
/// directory, flushed to disk, then renamed over `path`, so a crash or a full disk never
/// leaves a torn file. Creates the directory if needed.
pub fn write_atomic(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    tmp.write_all(bytes.as_ref())
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_files_and_replaces_old_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.txt");
        write_atomic(&path, "one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        // Nothing but the file itself is left in the directory.
        let entries: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(entries.len(), 1);
        let blocked = dir.path().join("file");
        std::fs::write(&blocked, "x").unwrap();
        let error = write_atomic(&blocked.join("inner.txt"), "y").unwrap_err();
        assert!(error.to_string().contains("cannot create"), "{error}");
    }
}
