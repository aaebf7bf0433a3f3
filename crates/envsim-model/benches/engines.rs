//! Prefill and decode speed of the local engines compiled into this build, side by side on the
//! same prompts, threads and machine state (the engines take turns prompt by prompt).
//!
//! ```sh
//! cargo bench -p envsim-model --bench engines                      # the pure-Rust engine
//! cargo bench -p envsim-model --features llama --bench engines     # both, alternating
//! ```
//!
//! Prompts: the chat prompts of `tests/fixtures/prompts.json` (sliced prompts of the bundled
//! benchmark, as the quickstart sends them). Each is computed from an empty cache (no prefix
//! reuse) and then decodes `ENVSIM_BENCH_TOKENS` tokens (default 64; greedy, no stop rules).
//! `ENVSIM_BENCH_THREADS` sets the threads (default: all available), `ENVSIM_BENCH_ROUNDS` the
//! passes over the prompts (default 1). Needs the default model in the cache (`envsim model
//! fetch`); without it, says so and exits.

use envsim_core::prompt::Prompt;
use envsim_model::local::{
    default_threads, EngineKind, Generation, LocalCompletion, LocalEngine, LocalSettings,
};
use envsim_model::model::{cached_path, verify, DEFAULT_MODEL};
use std::path::Path;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Default)]
struct Totals {
    prefill_tokens: usize,
    prefill_ms: f64,
    decode_tokens: usize,
    decode_ms: f64,
    load_s: f64,
}

fn main() {
    let path = cached_path(&DEFAULT_MODEL);
    if let Err(e) = verify(&path, Some(DEFAULT_MODEL.size), None) {
        println!("skipped: the default model is not in the cache ({e}); run `envsim model fetch`");
        return;
    }
    let threads = env_usize("ENVSIM_BENCH_THREADS", default_threads());
    let tokens = env_usize("ENVSIM_BENCH_TOKENS", 64) as u32;
    let rounds = env_usize("ENVSIM_BENCH_ROUNDS", 1);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/prompts.json");
    let prompts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let prompts: Vec<(String, Prompt)> = prompts["chat"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                Prompt {
                    system: c["system"].as_str().unwrap().to_owned(),
                    user: c["user"].as_str().unwrap().to_owned(),
                },
            )
        })
        .collect();
    let kinds = EngineKind::available();
    println!(
        "engines: {} · {threads} threads · {} prompts × {rounds} · {tokens} decoded tokens each · candle SIMD: {}",
        kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
        prompts.len(),
        candle_simd(),
    );
    let settings = LocalSettings {
        model_path: path.clone(),
        n_ctx: 8192,
        threads,
    };
    let mut engines: Vec<(EngineKind, Option<LocalEngine>, Totals)> = kinds
        .iter()
        .map(|&k| (k, None, Totals::default()))
        .collect();
    let generation = Generation {
        max_tokens: tokens,
        temperature: 0.0,
        seed: 0,
        stop: vec![],
        stop_after_object: false,
        json_schema: None,
    };
    println!(
        "{:<10} {:<12} {:>7} {:>10} {:>10} {:>7} {:>10}",
        "engine", "prompt", "tokens", "prefill s", "tok/s", "decoded", "tok/s"
    );
    for _ in 0..rounds {
        for (id, prompt) in &prompts {
            for (kind, engine, totals) in &mut engines {
                // A fresh engine per prompt: nothing is reused from the previous prompt (the
                // quickstart's prompts share their first ~100 tokens at most).
                drop(engine.take());
                let started = LocalEngine::start_with(*kind, settings.clone()).unwrap();
                totals.load_s += started.info.load_seconds;
                let done: LocalCompletion = started
                    .generate_blocking(prompt.clone(), generation.clone())
                    .unwrap();
                assert_eq!(done.reused_tokens, 0);
                let n = done.usage.prompt_tokens as usize;
                let d = done.usage.completion_tokens as usize;
                println!(
                    "{:<10} {:<12} {:>7} {:>10.2} {:>10.1} {:>7} {:>10.1}",
                    kind.name(),
                    id,
                    n,
                    done.prefill_ms / 1000.0,
                    n as f64 / (done.prefill_ms / 1000.0),
                    d,
                    d as f64 / (done.decode_ms / 1000.0).max(1e-9),
                );
                totals.prefill_tokens += n;
                totals.prefill_ms += done.prefill_ms;
                totals.decode_tokens += d;
                totals.decode_ms += done.decode_ms;
                *engine = Some(started);
            }
        }
    }
    println!();
    println!(
        "{:<10} {:>14} {:>14} {:>12}",
        "engine", "prefill tok/s", "decode tok/s", "load s (avg)"
    );
    let loads = (prompts.len() * rounds).max(1) as f64;
    for (kind, _, t) in &engines {
        println!(
            "{:<10} {:>14.1} {:>14.1} {:>12.2}",
            kind.name(),
            t.prefill_tokens as f64 / (t.prefill_ms / 1000.0),
            t.decode_tokens as f64 / (t.decode_ms / 1000.0),
            t.load_s / loads,
        );
    }
}

fn candle_simd() -> &'static str {
    #[cfg(feature = "candle")]
    {
        envsim_model::candle::simd_kernels().unwrap_or("none (scalar kernels)")
    }
    #[cfg(not(feature = "candle"))]
    {
        "not compiled"
    }
}
