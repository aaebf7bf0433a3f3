//! Writing a sampled benchmark: the reference JSON format, envsim's JSONL, and a datasheet.

use crate::composition::{Composition, Sampled};
use envsim_core::diff::{reference_change_json, reference_diff, ReferenceEquality};
use envsim_explore::record::{StateCache, StateText, TransitionRecord};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The rendered files of a benchmark (the reference JSON is written separately, streamed:
/// [`write_reference_json`]).
#[derive(Clone, Debug, PartialEq)]
pub struct BenchmarkFiles {
    /// `benchmark.jsonl`: envsim's richer records (compact where states are large).
    pub envsim_jsonl: String,
    /// `datasheet.json`.
    pub datasheet_json: Value,
    /// `datasheet.md`.
    pub datasheet_md: String,
    /// SHA-256 of `benchmark.jsonl`, hex.
    pub fingerprint: String,
}

/// A sample in the reference format (`task_info`, `step_detail`, `env_code`), with its id.
fn reference_record(
    id: usize,
    t: &TransitionRecord,
    before: Value,
    after: Value,
    env_code: &str,
) -> Value {
    reference_sample(
        &id.to_string(),
        (!t.convention.is_class()).then(|| t.convention.as_str()),
        &t.env,
        &format!("{}/{}/{}", t.initial_state, t.walk, t.step),
        t.step,
        &t.action,
        &Value::String(t.observation.clone()),
        before,
        after,
        env_code,
    )
}

/// A reference-format sample from its parts; `step` is 0-based; `convention` is named when it
/// is not the class convention.
#[allow(clippy::too_many_arguments)]
fn reference_sample(
    id: &str,
    convention: Option<&str>,
    env: &str,
    task_id: &str,
    step: usize,
    action: &Value,
    observation: &Value,
    before: Value,
    after: Value,
    env_code: &str,
) -> Value {
    let changes = reference_diff(&before, &after, ReferenceEquality::Labelling);
    let changes: Vec<Value> = changes
        .iter()
        .map(|c| reference_change_json(c, true))
        .collect();
    let count = changes.len();
    let mut record = json!({
        "sample_id": id,
        "task_info": {"env_id": env, "task_id": task_id, "task": "", "step": step + 1},
        "step_detail": {
            "step": step + 1,
            "action": action,
            "observation": {"type": "tool", "content": observation},
            "config_before": before,
            "config_after": after,
            "config_change": {
                "changes": changes,
                "change_count": count,
            },
        },
        "env_code": env_code,
    });
    // Replaying a sample needs to know how its code is written; `class` is the reference's
    // own (and the default), so only the other convention is named.
    if let (Some(convention), Some(map)) = (convention, record.as_object_mut()) {
        map.insert("convention".into(), convention.into());
    }
    record
}

/// Writes envsim benchmark JSONL (`benchmark.jsonl`, compact or not) as reference-format JSON,
/// one sample at a time: what `bench build` writes as `benchmark.json` for the same samples,
/// byte for byte. `env_code(env)` gives each environment's code ("" when unknown). Returns the
/// number of samples.
pub fn export_reference_json(
    bytes: &[u8],
    source: &str,
    env_code: &dyn Fn(&str) -> String,
    out: &mut dyn std::io::Write,
) -> Result<usize, ExportReferenceError> {
    let mut reader = envsim_core::formats::RecordReader::new(source);
    let mut written = 0usize;
    out.write_all(b"[")?;
    for record in envsim_core::formats::records(bytes, source)? {
        let location = record.location.clone();
        let field = |key: &str| record.value.get(key).cloned();
        let missing = |key: &str| ExportReferenceError::Record {
            location: format!("{source}: {location}"),
            field: key.to_owned(),
        };
        let (Some(env), Some(state), Some(walk), Some(step), Some(action)) = (
            field("env"),
            field("initial_state"),
            field("walk"),
            field("step"),
            field("action"),
        ) else {
            // A state record: nothing to write; anything else is not envsim JSONL.
            if record.value.get("state_id").is_some() {
                reader.read(record)?;
                continue;
            }
            let key = ["env", "initial_state", "walk", "step", "action"]
                .into_iter()
                .find(|k| record.value.get(*k).is_none())
                .unwrap_or("env");
            return Err(missing(key));
        };
        let env = env.as_str().ok_or_else(|| missing("env"))?.to_owned();
        let convention = field("convention")
            .and_then(|c| c.as_str().map(str::to_owned))
            .filter(|c| c != "class");
        let step = step.as_u64().ok_or_else(|| missing("step"))? as usize;
        let task_id = format!(
            "{}/{}/{step}",
            state.as_str().ok_or_else(|| missing("initial_state"))?,
            walk.as_u64().ok_or_else(|| missing("walk"))?
        );
        for t in reader.read(record)? {
            if written > 0 {
                out.write_all(b",")?;
            }
            let sample = reference_sample(
                &t.id,
                convention.as_deref(),
                &env,
                &task_id,
                step,
                &action,
                &t.observation,
                t.config_before,
                t.config_after,
                &env_code(&env),
            );
            serde_json::to_writer(&mut *out, &sample).map_err(std::io::Error::from)?;
            written += 1;
        }
    }
    out.write_all(b"]\n")?;
    Ok(written)
}

/// Why [`export_reference_json`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportReferenceError {
    /// Not a benchmark file.
    #[error(transparent)]
    Format(#[from] envsim_core::formats::FormatError),
    /// A record lacks what envsim JSONL records hold.
    #[error("{location}: field `{field}`: missing or of the wrong type (an envsim benchmark.jsonl is needed)")]
    Record {
        /// File and record.
        location: String,
        /// The field.
        field: String,
    },
    /// Writing failed.
    #[error("cannot write: {0}")]
    Io(#[from] std::io::Error),
}

/// Writes `benchmark.json` — a JSON array in the reference format, every sample with its whole
/// states — one sample at a time, so that memory holds one sample's states, not all of them.
pub fn write_reference_json(
    out: &mut dyn std::io::Write,
    transitions: &[TransitionRecord],
    sampled: &Sampled,
    env_codes: &BTreeMap<String, String>,
) -> std::io::Result<()> {
    let mut cache = StateCache::default();
    out.write_all(b"[")?;
    for (id, (_, i)) in sampled.picks.iter().enumerate() {
        let t = &transitions[*i];
        let code = env_codes
            .get(&t.env)
            .map(String::as_str)
            .unwrap_or_default();
        let (before, after) = (cache.value(&t.config_before), cache.value(&t.config_after));
        if id > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, &reference_record(id, t, before, after, code))?;
    }
    out.write_all(b"]\n")
}

/// The size `benchmark.json` would have, roughly: the states' texts of every sample (a patched
/// state counts its base's size).
pub fn reference_json_estimate(transitions: &[TransitionRecord], sampled: &Sampled) -> u64 {
    sampled
        .picks
        .iter()
        .map(|(_, i)| {
            let t = &transitions[*i];
            (t.config_before.approximate_len() + t.config_after.approximate_len()) as u64
        })
        .sum()
}

/// One sample as a `benchmark.jsonl` record. A patched state (of a large initial state) is
/// written as a reference to its stored base plus the patch from it, the state after as the
/// patch from the state before (`envsim_core::formats::RecordReader` reads them back).
fn envsim_record(id: usize, bucket: &str, t: &TransitionRecord, cache: &mut StateCache) -> Value {
    let refs = t.config_before.as_patch().map(|(base, patch)| {
        let (before, after) = (cache.value(&t.config_before), cache.value(&t.config_after));
        let patch: Value = serde_json::from_str(patch).unwrap_or(Value::Null);
        (
            json!({"state": base.id, "patch": patch}),
            json!({"patch": envsim_core::state_patch::diff_patch(&before, &after)}),
        )
    });
    let mut light;
    let shown = match refs {
        Some(_) => {
            light = t.clone();
            light.config_before = StateText::from_value(&Value::Null);
            light.config_after = StateText::from_value(&Value::Null);
            &light
        }
        None => t,
    };
    let mut record = serde_json::to_value(shown).unwrap_or(Value::Null);
    if let Some(map) = record.as_object_mut() {
        map.shift_insert(0, "sample_id".into(), id.to_string().into());
        map.shift_insert(1, "bucket".into(), bucket.into());
        if let Some((before_ref, after_ref)) = refs {
            let at = map
                .keys()
                .position(|k| k == "config_before")
                .unwrap_or(map.len());
            map.shift_remove("config_before");
            map.shift_remove("config_after");
            map.shift_insert(at, "config_before_ref".into(), before_ref);
            map.shift_insert(at + 1, "config_after_ref".into(), after_ref);
        }
    }
    record
}

/// Renders the files. `env_codes` maps environment names to their source.
pub fn render(
    transitions: &[TransitionRecord],
    sampled: &Sampled,
    composition: &Composition,
    seed: u64,
) -> BenchmarkFiles {
    let mut jsonl = String::new();
    let mut cache = StateCache::default();
    let mut stored = std::collections::HashSet::new();
    for (id, (bucket, i)) in sampled.picks.iter().enumerate() {
        let t = &transitions[*i];
        if let Some((base, _)) = t.config_before.as_patch() {
            if stored.insert(base.id.clone()) {
                // The base's text is envsim's own compact JSON: written as it is.
                jsonl.push_str(&format!(
                    "{{\"state_id\":{},\"state\":{}}}\n",
                    Value::String(base.id.clone()),
                    base.text
                ));
            }
        }
        let record = envsim_record(id, bucket, t, &mut cache);
        jsonl.push_str(&serde_json::to_string(&record).unwrap_or_default());
        jsonl.push('\n');
    }
    let fingerprint = fingerprint(jsonl.as_bytes());
    let datasheet_json = datasheet(transitions, sampled, composition, seed, &fingerprint);
    let datasheet_md = datasheet_markdown(&datasheet_json);
    BenchmarkFiles {
        envsim_jsonl: jsonl,
        datasheet_json,
        datasheet_md,
        fingerprint,
    }
}

/// Hex SHA-256 of bytes: the fingerprint of a benchmark file.
pub fn fingerprint(bytes: &[u8]) -> String {
    envsim_core::hex::encode(&Sha256::digest(bytes))
}

/// Counts per bucket, environment, |Δ| and tool, plus provenance.
pub fn datasheet(
    transitions: &[TransitionRecord],
    sampled: &Sampled,
    composition: &Composition,
    seed: u64,
    fingerprint: &str,
) -> Value {
    let mut per_bucket: Map<String, Value> = Map::new();
    for b in &composition.buckets {
        let n = sampled
            .picks
            .iter()
            .filter(|(name, _)| *name == b.name)
            .count();
        // The environment that fills most of the bucket (capped by `--max-env-share`).
        let mut by_env: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, i) in sampled.picks.iter().filter(|(name, _)| *name == b.name) {
            *by_env.entry(transitions[*i].env.as_str()).or_default() += 1;
        }
        let largest = by_env
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(
                |(env, k)| json!({"env": env, "samples": k, "share": *k as f64 / n.max(1) as f64}),
            );
        per_bucket.insert(
            b.name.clone(),
            json!({"wanted": b.count, "sampled": n, "environments": by_env.len(), "largest_env": largest}),
        );
    }
    let mut per_env: BTreeMap<&str, usize> = BTreeMap::new();
    let mut histogram: BTreeMap<usize, usize> = BTreeMap::new();
    let mut tools: BTreeMap<String, usize> = BTreeMap::new();
    let mut reference_blind = 0;
    let mut cache = StateCache::default();
    for (_, i) in &sampled.picks {
        let t = &transitions[*i];
        *per_env.entry(t.env.as_str()).or_default() += 1;
        *histogram.entry(t.change_count).or_default() += 1;
        let tool = t
            .action
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        *tools.entry(format!("{}.{tool}", t.env)).or_default() += 1;
        let (before, after) = (cache.value(&t.config_before), cache.value(&t.config_after));
        let changes = reference_diff(&before, &after, ReferenceEquality::Python);
        if changes
            .iter()
            .any(|c| c.after.is_none() || c.pointer.tokens().iter().any(|k| k.contains('.')))
        {
            reference_blind += 1;
        }
    }
    json!({
        "schema": "envsim.datasheet.v1",
        "fingerprint_sha256": fingerprint,
        "seed": seed,
        "samples": sampled.picks.len(),
        "environments": per_env.len(),
        "tools_covered": tools.len(),
        "collected_transitions": transitions.len(),
        "left_out": {"duplicates": sampled.duplicates, "unpredictable": sampled.unpredictable},
        "max_env_share": sampled.max_env_share,
        "shortfalls": sampled.shortfalls,
        "buckets": per_bucket,
        "delta_histogram": histogram.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>(),
        "per_environment": per_env.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect::<Map<_, _>>(),
        "samples_reference_scorer_cannot_credit": reference_blind,
        "intents": intents(transitions, sampled),
    })
}

/// The sampled calls by the driver's intent, and how many of each break their tool's argument
/// schema: deliberately invalid calls are labelled as such (`invalid` with a schema mismatch is
/// the driver's doing, on purpose), and a valid-intent call that breaks its schema would be a
/// driver defect.
fn intents(transitions: &[TransitionRecord], sampled: &Sampled) -> Value {
    let mut schemas: BTreeMap<String, envsim_spec::arguments::ArgumentSchemas> = BTreeMap::new();
    let mut counts = [[0usize; 2]; 2];
    for (_, i) in &sampled.picks {
        let t = &transitions[*i];
        let tool = t
            .action
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let args = t
            .action
            .get("arguments")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let schema = schemas
            .entry(format!("{}\u{0}{tool}", t.env))
            .or_insert_with(|| {
                envsim_spec::arguments::ArgumentSchemas::compile(std::slice::from_ref(
                    &t.tool_schema,
                ))
            });
        let intent = usize::from(t.intent == envsim_explore::driver::Intent::Invalid);
        let mismatch = usize::from(!schema.check(tool, &args).is_empty());
        counts[intent][mismatch] += 1;
    }
    let cell = |c: [usize; 2]| json!({"samples": c[0] + c[1], "schema_mismatch": c[1]});
    json!({"valid": cell(counts[0]), "invalid": cell(counts[1])})
}

fn datasheet_markdown(sheet: &Value) -> String {
    let mut md = String::new();
    md.push_str("# Benchmark datasheet\n\n");
    md.push_str(&format!(
        "- fingerprint (SHA-256 of benchmark.jsonl): `{}`\n- seed: {}\n- samples: {}\n- environments: {}\n- tools covered: {}\n- collected transitions: {} (left out: {} duplicates, {} with clock/seed-dependent output)\n- samples whose correct answer the reference scorer cannot credit (removals, dotted keys): {}\n\n",
        sheet["fingerprint_sha256"].as_str().unwrap_or_default(),
        sheet["seed"],
        sheet["samples"],
        sheet["environments"],
        sheet["tools_covered"],
        sheet["collected_transitions"],
        sheet["left_out"]["duplicates"],
        sheet["left_out"]["unpredictable"],
        sheet["samples_reference_scorer_cannot_credit"],
    ));
    md.push_str(&format!(
        "## Buckets\n\nOne environment may fill at most {} of a bucket (`--max-env-share`).\n\n| bucket | wanted | sampled | environments | largest environment |\n|---|---:|---:|---:|---|\n",
        sheet["max_env_share"]
    ));
    for (name, cell) in sheet["buckets"].as_object().into_iter().flatten() {
        let largest = &cell["largest_env"];
        let largest = match largest["env"].as_str() {
            Some(env) => format!("{env} ({})", largest["samples"]),
            None => "—".to_owned(),
        };
        md.push_str(&format!(
            "| {name} | {} | {} | {} | {largest} |\n",
            cell["wanted"], cell["sampled"], cell["environments"]
        ));
    }
    md.push_str("\n## |Δ| histogram\n\n| |Δ| | samples |\n|---:|---:|\n");
    for (k, v) in sheet["delta_histogram"].as_object().into_iter().flatten() {
        md.push_str(&format!("| {k} | {v} |\n"));
    }
    let intents = &sheet["intents"];
    let (invalid, invalid_schema) = (
        intents["invalid"]["samples"].as_u64().unwrap_or(0),
        intents["invalid"]["schema_mismatch"].as_u64().unwrap_or(0),
    );
    md.push_str(&format!(
        "\n## Calls\n\nThe driver makes some calls invalid on purpose (intent `invalid`): {invalid} samples, {invalid_schema} of them with arguments that break the tool's schema (wrong type, missing or unknown argument) and {} that fit the schema but break the environment's rules. Valid-intent samples: {}, {} of them breaking the schema (a driver defect unless 0).\n",
        invalid.saturating_sub(invalid_schema),
        intents["valid"]["samples"],
        intents["valid"]["schema_mismatch"],
    ));
    md.push_str("\n## Environments\n\n| environment | samples |\n|---|---:|\n");
    for (k, v) in sheet["per_environment"].as_object().into_iter().flatten() {
        md.push_str(&format!("| {k} | {v} |\n"));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use envsim_explore::driver::Intent;
    use envsim_explore::record::Outcome;

    fn call(intent: Intent, args: Value) -> TransitionRecord {
        let state = StateText::from_value(&json!({"reports": {}}));
        TransitionRecord {
            env: "office".into(),
            class_name: "Office".into(),
            convention: Default::default(),
            tool_schema: json!({"type": "function", "function": {"name": "get_report",
                "parameters": {"type": "object", "properties": {"report_id": {"type": "string"}},
                               "required": ["report_id"]}}}),
            initial_state: "00.json".into(),
            walk: 0,
            step: 0,
            intent,
            action: json!({"name": "get_report", "arguments": args}),
            config_before: state.clone(),
            config_after: state,
            observation: "{'success': False}".into(),
            observation_json: json!({"success": false}),
            outcome: Outcome::Failure,
            change_count: 0,
            fine_change_count: 0,
            args_count: 1,
            unpredictable: Vec::new(),
            reads: None,
            seed: 0,
            clock: 0.0,
        }
    }

    #[test]
    fn intents_label_deliberately_invalid_calls() {
        let transitions = vec![
            call(Intent::Valid, json!({"report_id": "R1"})),
            call(Intent::Invalid, json!({"report_id": 2001})),
            call(Intent::Invalid, json!({"report_id": "R404"})),
            call(Intent::Invalid, json!({})),
        ];
        let sampled = Sampled {
            picks: (0..4).map(|i| ("b".to_owned(), i)).collect(),
            shortfalls: Vec::new(),
            duplicates: 0,
            unpredictable: 0,
            max_env_share: 1.0,
        };
        assert_eq!(
            intents(&transitions, &sampled),
            json!({"valid": {"samples": 1, "schema_mismatch": 0},
                   "invalid": {"samples": 3, "schema_mismatch": 2}})
        );
    }
}
