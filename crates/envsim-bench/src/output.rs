//! Writing a sampled benchmark: the reference JSON format, envsim's JSONL, and a datasheet.

use crate::collect::TransitionRecord;
use crate::sample::{Composition, Sampled};
use envsim_core::diff::{reference_change_json, reference_diff, ReferenceEquality};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The rendered files of a benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchmarkFiles {
    /// `benchmark.json`: a JSON array in the reference format.
    pub reference_json: String,
    /// `benchmark.jsonl`: envsim's richer records.
    pub envsim_jsonl: String,
    /// `datasheet.json`.
    pub datasheet_json: Value,
    /// `datasheet.md`.
    pub datasheet_md: String,
    /// SHA-256 of `benchmark.jsonl`, hex.
    pub fingerprint: String,
}

/// A sample in the reference format (`task_info`, `step_detail`, `env_code`), with its id.
pub fn reference_record(id: usize, t: &TransitionRecord, env_code: &str) -> Value {
    let (before, after) = (t.config_before.value(), t.config_after.value());
    let changes = reference_diff(&before, &after, ReferenceEquality::Labelling);
    let mut record = json!({
        "sample_id": id.to_string(),
        "task_info": {"env_id": t.env, "task_id": format!("{}/{}/{}", t.initial_state, t.walk, t.step), "task": "", "step": t.step + 1},
        "step_detail": {
            "step": t.step + 1,
            "action": t.action,
            "observation": {"type": "tool", "content": t.observation},
            "config_before": before,
            "config_after": after,
            "config_change": {
                "changes": changes.iter().map(|c| reference_change_json(c, true)).collect::<Vec<_>>(),
                "change_count": changes.len(),
            },
        },
        "env_code": env_code,
    });
    // Replaying a sample needs to know how its code is written; `class` is the reference's
    // own (and the default), so only the other convention is named.
    if let (false, Some(map)) = (t.convention.is_class(), record.as_object_mut()) {
        map.insert("convention".into(), t.convention.as_str().into());
    }
    record
}

/// Renders the files. `env_codes` maps environment names to their source.
pub fn render(
    transitions: &[TransitionRecord],
    sampled: &Sampled,
    composition: &Composition,
    env_codes: &BTreeMap<String, String>,
    seed: u64,
) -> BenchmarkFiles {
    let mut reference = Vec::with_capacity(sampled.picks.len());
    let mut jsonl = String::new();
    for (id, (bucket, i)) in sampled.picks.iter().enumerate() {
        let t = &transitions[*i];
        let code = env_codes
            .get(&t.env)
            .map(String::as_str)
            .unwrap_or_default();
        reference.push(reference_record(id, t, code));
        let mut record = serde_json::to_value(t).unwrap_or(Value::Null);
        if let Some(map) = record.as_object_mut() {
            map.shift_insert(0, "sample_id".into(), id.to_string().into());
            map.shift_insert(1, "bucket".into(), bucket.clone().into());
        }
        jsonl.push_str(&serde_json::to_string(&record).unwrap_or_default());
        jsonl.push('\n');
    }
    let fingerprint = fingerprint(jsonl.as_bytes());
    let datasheet_json = datasheet(transitions, sampled, composition, seed, &fingerprint);
    let datasheet_md = datasheet_markdown(&datasheet_json);
    BenchmarkFiles {
        reference_json: serde_json::to_string(&reference).unwrap_or_default() + "\n",
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
        let (before, after) = (t.config_before.value(), t.config_after.value());
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
    })
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
    md.push_str("\n## Environments\n\n| environment | samples |\n|---|---:|\n");
    for (k, v) in sheet["per_environment"].as_object().into_iter().flatten() {
        md.push_str(&format!("| {k} | {v} |\n"));
    }
    md
}
