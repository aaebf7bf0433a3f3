//! What identifies a run: benchmark fingerprint, backend, template and decoding parameters.
//!
//! The run hash is the SHA-256 of the canonical JSON of [`RunConfig`] (object keys sorted at
//! every level), so the same command line maps to the same run whatever the key order of
//! `--extra-body`, and any change that can change a prediction gives a different run. Settings
//! that cannot change a prediction (concurrency, rate limits, timeouts, retries, API key,
//! prices) are deliberately not part of it: a run may be resumed with other limits.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use envsim_llm::Decoding;

/// Which simulator produces the predictions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BackendConfig {
    /// An OpenAI-compatible `/v1/chat/completions` endpoint.
    Openai {
        /// Base URL up to and including `/v1`.
        base_url: String,
        /// Model name sent in the request.
        model: String,
    },
    /// The benchmark's own labels (the ceiling line).
    Oracle,
    /// "No change" with an empty feedback (the floor line).
    Null,
    /// Predictions read from a file.
    Replay {
        /// SHA-256 of the predictions file.
        file_sha256: String,
    },
    /// The embedded local model (llama.cpp on the CPU).
    Local {
        /// The model's name (GGUF `general.name`, else the file name).
        model: String,
        /// SHA-256 of the model file, when verified (the default model); otherwise its size
        /// and file name identify it.
        model_id: String,
        /// Context length in tokens.
        n_ctx: u32,
    },
    /// Responses of an offline OpenAI Batch job, imported from its output file.
    Batch {
        /// Model named in the exported requests.
        model: String,
        /// SHA-256 of the exported request file.
        requests_sha256: String,
    },
}

impl BackendConfig {
    /// Whether this backend renders prompts itself (so the template and decoding are part of
    /// the run). A batch run's prompts are fixed by its request file, whose hash it carries.
    pub fn uses_prompts(&self) -> bool {
        matches!(
            self,
            BackendConfig::Openai { .. } | BackendConfig::Local { .. }
        )
    }

    /// Short label for tables: `openai:<model>`, `oracle`, …
    pub fn label(&self) -> String {
        match self {
            BackendConfig::Openai { model, .. } => format!("openai:{model}"),
            BackendConfig::Oracle => "oracle".into(),
            BackendConfig::Null => "null".into(),
            BackendConfig::Replay { file_sha256 } => {
                format!("replay:{}", &file_sha256[..8.min(file_sha256.len())])
            }
            BackendConfig::Batch { model, .. } => format!("batch:{model}"),
            BackendConfig::Local { model, .. } => format!("local:{model}"),
        }
    }
}

/// Everything that determines a run's predictions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// SHA-256 of the benchmark file's bytes.
    pub bench_sha256: String,
    /// The subset of the benchmark evaluated (`None`: all of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subset: Option<Subset>,
    /// The simulator.
    pub backend: BackendConfig,
    /// Prompt template name (`None` for backends that send no prompt).
    pub template: Option<String>,
    /// Decoding parameters (`None` for backends that send no prompt).
    pub decoding: Option<Decoding>,
}

impl RunConfig {
    /// Builds a config, dropping the template and decoding for backends that do not use them,
    /// so e.g. `--backend oracle --template reference` is the same run as without the flag.
    pub fn new(
        bench_sha256: String,
        backend: BackendConfig,
        template: &str,
        decoding: Decoding,
    ) -> RunConfig {
        let prompts = backend.uses_prompts();
        RunConfig {
            bench_sha256,
            subset: None,
            backend,
            template: prompts.then(|| template.to_owned()),
            decoding: prompts.then_some(decoding),
        }
    }

    /// The full run hash (64 hex digits).
    pub fn hash(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        sha256_hex(canonical_json(&value).as_bytes())
    }

    /// The run id shown to users: the first 12 hex digits of the hash.
    pub fn run_id(&self) -> String {
        self.hash()[..12].to_owned()
    }
}

/// A deterministic subset of a benchmark: the samples whose prompt has at most
/// `max_prompt_chars` characters (with the run's template), then the first `per_stratum` of
/// every stratum (benchmark order), then `limit` of those taken across the strata in turn
/// (the first of each stratum, then the second of each, …), kept in benchmark order: a
/// benchmark sorted by stratum would otherwise give a limit all from its first stratum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subset {
    /// Samples kept per stratum (difficult |Δ| values count as one stratum).
    pub per_stratum: Option<usize>,
    /// Samples kept in all.
    pub limit: Option<usize>,
    /// Only samples whose rendered prompt (system + user) has at most this many characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_prompt_chars: Option<usize>,
    /// Whether `limit` takes samples across the strata in turn. Runs stored before it did
    /// read as `false` and keep taking the first `limit`, so that resuming them selects what
    /// they started with (the field is part of the run's hash).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub limit_across_strata: bool,
}

impl Subset {
    /// `None` when no bound is set.
    pub fn new(
        per_stratum: Option<usize>,
        limit: Option<usize>,
        max_prompt_chars: Option<usize>,
    ) -> Option<Subset> {
        (per_stratum.is_some() || limit.is_some() || max_prompt_chars.is_some()).then_some(Subset {
            per_stratum,
            limit,
            max_prompt_chars,
            // Only a limit needs it: subsets without one hash as they did.
            limit_across_strata: limit.is_some(),
        })
    }

    /// The indices kept, in benchmark order, given each sample's stratum key and (when
    /// `max_prompt_chars` is set) its prompt length in characters.
    pub fn select(&self, strata: &[&str], prompt_chars: &[usize]) -> Vec<usize> {
        let mut taken: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        let mut kept = Vec::new();
        for (i, key) in strata.iter().enumerate() {
            if let Some(max) = self.max_prompt_chars {
                if prompt_chars.get(i).is_none_or(|chars| *chars > max) {
                    continue;
                }
            }
            let count = taken.entry(key).or_insert(0);
            if self.per_stratum.is_some_and(|cap| *count >= cap) {
                continue;
            }
            *count += 1;
            kept.push(i);
        }
        match self.limit {
            Some(limit) if self.limit_across_strata && limit < kept.len() => {
                // Each kept sample's rank within its stratum; take rank 0 of every stratum
                // (in order of first appearance), then rank 1, … until the limit.
                let mut seen: std::collections::HashMap<&str, usize> =
                    std::collections::HashMap::new();
                let mut ranked: Vec<(usize, usize, usize)> = Vec::with_capacity(kept.len());
                let mut order: std::collections::HashMap<&str, usize> =
                    std::collections::HashMap::new();
                for &i in &kept {
                    let next = order.len();
                    let first = *order.entry(strata[i]).or_insert(next);
                    let rank = seen.entry(strata[i]).or_insert(0);
                    ranked.push((*rank, first, i));
                    *rank += 1;
                }
                ranked.sort_unstable();
                let mut chosen: Vec<usize> = ranked.iter().take(limit).map(|r| r.2).collect();
                chosen.sort_unstable();
                chosen
            }
            Some(limit) => {
                kept.truncate(limit);
                kept
            }
            None => kept,
        }
    }
}

/// JSON with object keys sorted at every level and no whitespace.
pub fn canonical_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(value)).unwrap_or_default()
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    envsim_core::hex::encode(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn openai(extra: Value) -> RunConfig {
        RunConfig::new(
            "ab".repeat(32),
            BackendConfig::Openai {
                base_url: "http://x/v1".into(),
                model: "m".into(),
            },
            "envsim",
            Decoding {
                temperature: Some(0.0),
                max_tokens: Some(512),
                stop: vec![],
                extra_body: extra.as_object().cloned().unwrap_or_default(),
            },
        )
    }

    #[test]
    fn hash_ignores_key_order_but_not_values() {
        let a = openai(json!({"a": 1, "b": {"y": 2, "x": 1}}));
        let b = openai(json!({"b": {"x": 1, "y": 2}, "a": 1}));
        let c = openai(json!({"a": 2, "b": {"x": 1, "y": 2}}));
        assert_eq!(a.hash(), b.hash());
        assert_ne!(a.hash(), c.hash());
        assert_eq!(a.run_id().len(), 12);
        assert!(a.hash().starts_with(&a.run_id()));
    }

    #[test]
    fn template_and_decoding_matter_only_for_prompting_backends() {
        let oracle =
            |t: &str| RunConfig::new("f".into(), BackendConfig::Oracle, t, Decoding::default());
        assert_eq!(oracle("envsim").hash(), oracle("reference").hash());
        let mut a = openai(json!({}));
        let b = a.clone();
        a.template = Some("reference".into());
        assert_ne!(a.hash(), b.hash());
        let mut c = b.clone();
        c.decoding.as_mut().unwrap().temperature = Some(0.7);
        assert_ne!(c.hash(), b.hash());
        let mut d = b.clone();
        d.bench_sha256 = "other".into();
        assert_ne!(d.hash(), b.hash());
    }

    #[test]
    fn subset_selection_is_per_stratum_then_limited() {
        let strata = ["a", "b", "a", "a", "c", "b", "c"];
        let both = Subset::new(Some(2), None, None).unwrap();
        assert_eq!(both.select(&strata, &[]), [0, 1, 2, 4, 5, 6]);
        let small = Subset::new(Some(1), None, Some(10)).unwrap();
        assert_eq!(small.select(&strata, &[50, 9, 10, 1, 11, 3, 2]), [1, 2, 6]);
        assert_eq!(
            Subset::new(Some(1), Some(2), None)
                .unwrap()
                .select(&strata, &[]),
            [0, 1]
        );
        // A limit alone takes the strata in turn: a, b, c first.
        assert_eq!(
            Subset::new(None, Some(3), None)
                .unwrap()
                .select(&strata, &[]),
            [0, 1, 4]
        );
        assert_eq!(
            Subset::new(None, Some(5), None)
                .unwrap()
                .select(&strata, &[]),
            [0, 1, 2, 4, 5]
        );
        // A benchmark sorted by stratum: the limit still spans them.
        let sorted = ["f", "f", "f", "f", "s", "s", "n"];
        let limited = Subset::new(None, Some(3), None).unwrap();
        assert_eq!(limited.select(&sorted, &[]), [0, 4, 6]);
        // A run stored before (no `limit_across_strata`) keeps its first samples.
        let stored: Subset =
            serde_json::from_value(json!({"per_stratum": null, "limit": 3})).unwrap();
        assert_eq!(stored.select(&sorted, &[]), [0, 1, 2]);
        assert_ne!(stored, limited);
        // A subset without a limit serializes (and hashes) as before.
        assert_eq!(
            serde_json::to_value(Subset::new(Some(2), None, None).unwrap()).unwrap(),
            json!({"per_stratum": 2, "limit": null})
        );
        assert_eq!(Subset::new(None, None, None), None);
        let mut a = openai(json!({}));
        let b = a.clone();
        a.subset = Some(both);
        assert_ne!(a.hash(), b.hash());
    }

    #[test]
    fn sha256_of_known_input() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            canonical_json(&json!({"b": [{"d": 1, "c": 2}], "a": null})),
            r#"{"a":null,"b":[{"c":2,"d":1}]}"#
        );
    }
}
