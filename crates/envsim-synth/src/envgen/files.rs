//! A package as a writer model writes it: its files one after another, each under a marker
//! line `=== FILE: path ===`, and what a package may hold (`env.py`, `manifest.json`,
//! `tests.json`, `tasks.jsonl`, `states/NAME.json`, `generate_states.py`).

use std::collections::BTreeMap;
use std::path::Path;

/// The marker that opens a file: `=== FILE: env.py ===`.
pub const FILE_MARKER: &str = "=== FILE:";

/// The files of a package, by path relative to its folder.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PackageFiles {
    /// Path → content.
    pub files: BTreeMap<String, String>,
}

/// Why a writer's answer is not a package.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilesError {
    /// No marker line at all.
    #[error("the answer holds no file: each file must start on a line `=== FILE: path ===`")]
    NoFiles,
    /// A path a package may not hold.
    #[error("line {line}: {path:?} is not a file a package holds (env.py, manifest.json, tests.json, tasks.jsonl, generate_states.py, states/NAME.json)")]
    Path {
        /// The marker's line (1-based).
        line: usize,
        /// The path.
        path: String,
    },
    /// The same path twice.
    #[error("line {line}: {path} is written twice")]
    Twice {
        /// The second marker's line.
        line: usize,
        /// The path.
        path: String,
    },
    /// A file the package needs is missing.
    #[error("{0} is missing")]
    Missing(String),
}

/// Whether a package may hold `path`.
pub fn allowed(path: &str) -> bool {
    const FIXED: [&str; 5] = [
        "env.py",
        "manifest.json",
        "tests.json",
        "tasks.jsonl",
        "generate_states.py",
    ];
    if FIXED.contains(&path) {
        return true;
    }
    let Some(name) = path
        .strip_prefix("states/")
        .and_then(|n| n.strip_suffix(".json"))
    else {
        return false;
    };
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

impl PackageFiles {
    /// Reads a writer's answer: text before the first marker is ignored; a file's content is
    /// everything up to the next marker (or `=== END ===`), without a Markdown fence the model
    /// may have wrapped it in.
    pub fn parse(text: &str) -> Result<PackageFiles, FilesError> {
        let mut files = BTreeMap::new();
        let mut current: Option<(String, Vec<&str>)> = None;
        let finish = |files: &mut BTreeMap<String, String>, (path, lines): (String, Vec<&str>)| {
            files.insert(path, unfenced(&lines));
        };
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if let Some(rest) = trimmed.strip_prefix(FILE_MARKER) {
                let path = rest.trim().trim_end_matches('=').trim().to_owned();
                if let Some(done) = current.take() {
                    finish(&mut files, done);
                }
                if !allowed(&path) {
                    return Err(FilesError::Path { line: i + 1, path });
                }
                if files.contains_key(&path) {
                    return Err(FilesError::Twice { line: i + 1, path });
                }
                current = Some((path, Vec::new()));
            } else if trimmed == "=== END ===" {
                if let Some(done) = current.take() {
                    finish(&mut files, done);
                }
            } else if let Some((_, lines)) = &mut current {
                lines.push(line);
            }
        }
        if let Some(done) = current.take() {
            finish(&mut files, done);
        }
        if files.is_empty() {
            return Err(FilesError::NoFiles);
        }
        for needed in ["env.py", "manifest.json"] {
            if !files.contains_key(needed) {
                return Err(FilesError::Missing(needed.to_owned()));
            }
        }
        if !files.keys().any(|p| p.starts_with("states/")) {
            return Err(FilesError::Missing(
                "states/NAME.json (an initial state)".to_owned(),
            ));
        }
        Ok(PackageFiles { files })
    }

    /// The files in the answer format (what [`PackageFiles::parse`] reads back).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (path, content) in &self.files {
            out.push_str(&format!("{FILE_MARKER} {path} ===\n"));
            out.push_str(content);
            if !content.ends_with('\n') {
                out.push('\n');
            }
        }
        out.push_str("=== END ===\n");
        out
    }

    /// The files of the package folder `dir` (the ones a package may hold).
    pub fn read(dir: &Path) -> std::io::Result<PackageFiles> {
        let mut files = BTreeMap::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type()?.is_dir() && name == "states" {
                for state in std::fs::read_dir(entry.path())? {
                    let state = state?;
                    let path = format!("states/{}", state.file_name().to_string_lossy());
                    if allowed(&path) {
                        files.insert(path, std::fs::read_to_string(state.path())?);
                    }
                }
            } else if allowed(&name) {
                files.insert(name.clone(), std::fs::read_to_string(entry.path())?);
            }
        }
        Ok(PackageFiles { files })
    }

    /// Writes the files into `dir` (created; files already there that a package may hold are
    /// replaced, other state files removed so that states of two writes never mix).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let states = dir.join("states");
        std::fs::create_dir_all(&states)?;
        for entry in std::fs::read_dir(&states)? {
            let entry = entry?;
            let path = format!("states/{}", entry.file_name().to_string_lossy());
            if allowed(&path) && !self.files.contains_key(&path) {
                std::fs::remove_file(entry.path())?;
            }
        }
        for (path, content) in &self.files {
            envsim_fs::write_atomic(&dir.join(path), content.as_bytes())
                .map_err(|e| std::io::Error::new(e.error.kind(), e.to_string()))?;
        }
        Ok(())
    }

    /// Writes the package as `out/name`, whole or not at all: into a fresh folder beside its
    /// place, then moved there (a package already there is replaced). Returns the path.
    pub fn install(&self, out: &Path, name: &str) -> std::io::Result<std::path::PathBuf> {
        let target = out.join(name);
        std::fs::create_dir_all(out)?;
        let partial = tempfile::Builder::new()
            .prefix(&format!(".{name}-"))
            .tempdir_in(out)?;
        self.write(partial.path())?;
        if target.exists() {
            std::fs::remove_dir_all(&target)?;
        }
        let written = partial.keep();
        if let Err(error) = std::fs::rename(&written, &target) {
            let _ = std::fs::remove_dir_all(&written);
            return Err(error);
        }
        Ok(target)
    }
}

/// A file's lines without the Markdown fence around them (```python ... ```), and with one
/// final newline.
fn unfenced(lines: &[&str]) -> String {
    let mut body: &[&str] = lines;
    while body.first().is_some_and(|l| l.trim().is_empty()) {
        body = &body[1..];
    }
    while body.last().is_some_and(|l| l.trim().is_empty()) {
        body = &body[..body.len() - 1];
    }
    if body.len() >= 2
        && body[0].trim_start().starts_with("```")
        && body[body.len() - 1].trim() == "```"
    {
        body = &body[1..body.len() - 1];
    }
    let mut text = body.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reads_into_files_without_fences_and_round_trips() {
        let answer = "Here is the package.\n=== FILE: env.py ===\n```python\nclass A:\n    pass\n```\n\n=== FILE: manifest.json ===\n{\"name\": \"a\"}\n=== FILE: states/00_small.json ===\n{}\n=== END ===\nThanks.";
        let files = PackageFiles::parse(answer).unwrap();
        assert_eq!(
            files.files,
            BTreeMap::from([
                ("env.py".to_owned(), "class A:\n    pass\n".to_owned()),
                ("manifest.json".to_owned(), "{\"name\": \"a\"}\n".to_owned()),
                ("states/00_small.json".to_owned(), "{}\n".to_owned()),
            ])
        );
        assert_eq!(PackageFiles::parse(&files.render()).unwrap(), files);
    }

    #[test]
    fn bad_answers_are_refused_with_the_place() {
        assert_eq!(PackageFiles::parse("no files"), Err(FilesError::NoFiles));
        assert_eq!(
            PackageFiles::parse("=== FILE: ../etc/passwd ===\nx"),
            Err(FilesError::Path {
                line: 1,
                path: "../etc/passwd".into()
            })
        );
        assert_eq!(
            PackageFiles::parse("=== FILE: env.py ===\nx\n=== FILE: env.py ===\ny"),
            Err(FilesError::Twice {
                line: 3,
                path: "env.py".into()
            })
        );
        assert_eq!(
            PackageFiles::parse("=== FILE: env.py ===\nx"),
            Err(FilesError::Missing("manifest.json".into()))
        );
        let err = PackageFiles::parse("=== FILE: env.py ===\nx\n=== FILE: manifest.json ===\n{}")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "states/NAME.json (an initial state) is missing"
        );
        for bad in [
            "states/.hidden.json",
            "states/a/b.json",
            "states/x.txt",
            "other.py",
        ] {
            assert!(!allowed(bad), "{bad}");
        }
    }

    #[test]
    fn files_written_and_read_back_are_the_same_and_old_states_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = PackageFiles::parse(
            "=== FILE: env.py ===\nx = 1\n=== FILE: manifest.json ===\n{}\n=== FILE: states/old.json ===\n{}\n",
        )
        .unwrap();
        first.write(dir.path()).unwrap();
        let second = PackageFiles::parse(
            "=== FILE: env.py ===\nx = 2\n=== FILE: manifest.json ===\n{}\n=== FILE: states/new.json ===\n{\"a\": 1}\n",
        )
        .unwrap();
        second.write(dir.path()).unwrap();
        assert_eq!(PackageFiles::read(dir.path()).unwrap(), second);
    }
}
