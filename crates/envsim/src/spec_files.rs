//! Reading the API description `envsim audit --spec FILE` checks against (JSON, or YAML when
//! the file name ends in `.yaml`/`.yml`); the checks are [`envsim_spec::checks`].

use anyhow::{Context, Result};
use envsim_core::apispec::parse_spec;
use envsim_spec::checks::SpecChecks;
use serde_json::Value;
use std::path::Path;

/// Reads a JSON or YAML document (YAML when the file name ends in `.yaml`/`.yml`).
pub fn read_document(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    if is_yaml(path) {
        yaml_serde::from_str(&text).with_context(|| format!("{}: not valid YAML", path.display()))
    } else {
        serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))
    }
}

/// Whether a file name ends in `.yaml` or `.yml` (any case).
pub fn is_yaml(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
}

/// Reads an API description into its compiled checks; a bad one is an error naming the file
/// and the JSON pointer of the place.
pub fn spec_from_file(path: &Path) -> Result<SpecChecks> {
    let doc = read_document(path)?;
    let spec = parse_spec(&doc).map_err(|e| {
        anyhow::anyhow!(
            "{}: at {}: {}",
            path.display(),
            if e.pointer.is_empty() {
                "the top"
            } else {
                &e.pointer
            },
            e.message
        )
    })?;
    Ok(SpecChecks::from_spec(&spec, path.display().to_string()))
}
