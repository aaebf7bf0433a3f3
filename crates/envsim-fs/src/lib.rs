//! # envsim-fs
//!
//! File helpers shared by envsim's adapters (the executor's package import, the evaluation
//! harness, the CLI), so that there is one way to write a file that readers must never see
//! half-written: [`write_atomic`] for bytes at hand, [`AtomicFile`] for a file written in parts
//! (a download). envsim-core does no I/O and does not use this crate.
//!
//! Both write into a uniquely named temporary file in the destination's directory (same file
//! system, so the rename is atomic; unique, so concurrent writers never share a temporary
//! file), flush it to disk, then rename it over the destination: a crash, a full disk or an
//! error leaves the old file or the new one, never a torn file, and no temporary file behind.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The step of an atomic write that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Creating the destination's directory.
    CreateDir,
    /// Creating the temporary file in that directory.
    CreateFile,
    /// Writing, flushing or renaming the file.
    Write,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::CreateDir => "create",
            Step::CreateFile => "create a file in",
            Step::Write => "write",
        })
    }
}

/// An atomic write that failed, and where: `cannot write out/report.json: No space left on
/// device`. The destination is then unchanged.
#[derive(Debug, thiserror::Error)]
#[error("cannot {step} {}: {error}", path.display())]
pub struct WriteError {
    /// What failed.
    pub step: Step,
    /// The directory ([`Step::CreateDir`], [`Step::CreateFile`]) or the destination.
    pub path: PathBuf,
    /// The cause (part of the message, so not repeated as a source).
    pub error: io::Error,
}

/// The directory a file at `path` goes into (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// A file that appears at its destination, complete, only when [`AtomicFile::commit`]
/// succeeds; dropped without a commit it is removed and the destination is untouched.
#[derive(Debug)]
pub struct AtomicFile {
    tmp: tempfile::NamedTempFile,
    dest: PathBuf,
}

impl AtomicFile {
    /// A new, empty temporary file next to `dest`, creating `dest`'s directory if needed.
    pub fn create(dest: &Path) -> Result<AtomicFile, WriteError> {
        let dir = parent(dest);
        let fail = |step, error| WriteError {
            step,
            path: dir.to_owned(),
            error,
        };
        std::fs::create_dir_all(dir).map_err(|e| fail(Step::CreateDir, e))?;
        let mut name = std::ffi::OsString::from(".");
        name.push(dest.file_name().unwrap_or_default());
        let mut builder = tempfile::Builder::new();
        builder.prefix(&name).suffix(".tmp");
        // The file gets the mode a plain `File::create` would give it: the destination's own
        // when it exists, else 0o666 narrowed by the umask (a temporary file alone would be
        // 0o600, readable by nobody else once renamed into place).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dest)
                .map(|m| m.permissions())
                .unwrap_or_else(|_| std::fs::Permissions::from_mode(0o666));
            builder.permissions(mode);
        }
        let tmp = builder
            .tempfile_in(dir)
            .map_err(|e| fail(Step::CreateFile, e))?;
        Ok(AtomicFile {
            tmp,
            dest: dest.to_owned(),
        })
    }

    /// Where the file will appear.
    pub fn destination(&self) -> &Path {
        &self.dest
    }

    /// The temporary file's path (for a tool that writes to it by name).
    pub fn temp_path(&self) -> &Path {
        self.tmp.path()
    }

    /// The temporary file (for its metadata, or to read back what was written).
    pub fn as_file(&self) -> &File {
        self.tmp.as_file()
    }

    /// Flushes the file to disk and renames it over the destination; then flushes the
    /// directory entry as well, where the platform allows (best effort: the file is already in
    /// place, whole, when that step runs).
    pub fn commit(self) -> Result<(), WriteError> {
        let AtomicFile { mut tmp, dest } = self;
        let fail = |error| WriteError {
            step: Step::Write,
            path: dest.clone(),
            error,
        };
        tmp.flush()
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(fail)?;
        tmp.persist(&dest).map_err(|e| fail(e.error))?;
        #[cfg(unix)]
        if let Ok(dir) = File::open(parent(&dest)) {
            // Some file systems refuse to sync a directory; the rename has happened anyway.
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tmp.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.tmp.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tmp.flush()
    }
}

/// Writes `bytes` to `path` whole or not at all (see the crate docs), creating the directory
/// if needed.
pub fn write_atomic(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), WriteError> {
    let mut file = AtomicFile::create(path)?;
    file.write_all(bytes.as_ref()).map_err(|error| WriteError {
        step: Step::Write,
        path: path.to_owned(),
        error,
    })?;
    file.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[cfg(unix)]
    #[test]
    fn files_get_the_mode_a_plain_create_gives() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"x").unwrap();
        let fresh = dir.path().join("fresh");
        write_atomic(&fresh, b"y").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode(&fresh),
            mode(&plain),
            "umask applies as to File::create"
        );
        std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&fresh, b"z").unwrap();
        assert_eq!(mode(&fresh), 0o640, "an existing file keeps its mode");
    }

    #[test]
    fn writes_whole_files_and_replaces_old_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.txt");
        write_atomic(&path, "one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        // Nothing but the file itself is left in the directory.
        assert_eq!(entries(path.parent().unwrap()), ["out.txt"]);
    }

    #[test]
    fn failures_name_the_step_and_the_place() {
        let dir = tempfile::tempdir().unwrap();
        let blocked = dir.path().join("file");
        std::fs::write(&blocked, "x").unwrap();
        let error = write_atomic(&blocked.join("inner.txt"), "y").unwrap_err();
        assert_eq!(error.step, Step::CreateDir);
        assert_eq!(error.path, blocked);
        let message = error.to_string();
        assert!(message.starts_with("cannot create "), "{message}");
        assert!(message.contains("file"), "{message}");
        // A directory in the way of the destination: the rename fails, nothing is left over.
        let taken = dir.path().join("taken");
        std::fs::create_dir(&taken).unwrap();
        std::fs::write(taken.join("keep"), "k").unwrap();
        let error = write_atomic(&taken, "y").unwrap_err();
        assert_eq!(error.step, Step::Write);
        assert_eq!(entries(dir.path()), ["file", "taken"]);
    }

    #[test]
    fn a_file_written_in_parts_appears_only_on_commit() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("model.bin");
        std::fs::write(&dest, "old").unwrap();
        let mut file = AtomicFile::create(&dest).unwrap();
        file.write_all(b"new ").unwrap();
        file.write_all(b"content").unwrap();
        assert_eq!(file.as_file().metadata().unwrap().len(), 11);
        assert_eq!(file.destination(), dest);
        let temp = file.temp_path().to_owned();
        assert_eq!(temp.parent(), Some(dir.path()));
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "old");
        file.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "new content");
        assert!(!temp.exists());
        // Abandoned: removed, the destination untouched.
        let mut file = AtomicFile::create(&dest).unwrap();
        file.write_all(b"partial").unwrap();
        drop(file);
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "new content");
        assert_eq!(entries(dir.path()), ["model.bin"]);
    }

    #[test]
    fn concurrent_writers_use_their_own_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.json");
        let a = AtomicFile::create(&dest).unwrap();
        let b = AtomicFile::create(&dest).unwrap();
        assert_ne!(a.temp_path(), b.temp_path());
        a.commit().unwrap();
        b.commit().unwrap();
        assert_eq!(entries(dir.path()), ["out.json"]);
    }

    #[test]
    fn a_bare_file_name_goes_into_the_current_directory() {
        assert_eq!(parent(Path::new("out.json")), Path::new("."));
        assert_eq!(parent(Path::new("a/out.json")), Path::new("a"));
    }
}
