//! The pure-Rust engine on a tiny synthetic Qwen2 GGUF (random weights, a byte-level
//! vocabulary): its logits against a naive reference implementation of the architecture
//! (whole sequence recomputed, f64), and the KV cache — prefix reuse, truncation, one token at
//! a time — against computing from scratch. No model download.
#![cfg(feature = "candle")]

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use envsim_core::prompt::Prompt;
use envsim_model::candle::CandleEngine;
use envsim_model::local::{EngineError, EngineKind, Generation, LocalEngine, LocalSettings};
use envsim_model::InferenceError;
use std::path::Path;

const D: usize = 64;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HD: usize = D / HEADS;
const FF: usize = 96;
const LAYERS: usize = 2;
const BASE: f32 = 10_000.0;
const EPS: f32 = 1e-6;

struct Weights {
    vocab: usize,
    embd: Vec<f32>,
    layers: Vec<LayerW>,
    norm: Vec<f32>,
    out: Vec<f32>,
}

struct LayerW {
    attn_norm: Vec<f32>,
    wq: Vec<f32>,
    bq: Vec<f32>,
    wk: Vec<f32>,
    bk: Vec<f32>,
    wv: Vec<f32>,
    bv: Vec<f32>,
    wo: Vec<f32>,
    ffn_norm: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    down: Vec<f32>,
}

fn random(rng: &mut fastrand::Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| (rng.f32() * 2.0 - 1.0) * scale).collect()
}

fn weights(vocab: usize) -> Weights {
    let mut rng = fastrand::Rng::with_seed(42);
    let kv = KV_HEADS * HD;
    let layers = (0..LAYERS)
        .map(|_| LayerW {
            attn_norm: (0..D).map(|_| 0.5 + rng.f32()).collect(),
            wq: random(&mut rng, D * D, 0.3),
            bq: random(&mut rng, D, 0.1),
            wk: random(&mut rng, kv * D, 0.3),
            bk: random(&mut rng, kv, 0.1),
            wv: random(&mut rng, kv * D, 0.3),
            bv: random(&mut rng, kv, 0.1),
            wo: random(&mut rng, D * D, 0.2),
            ffn_norm: (0..D).map(|_| 0.5 + rng.f32()).collect(),
            gate: random(&mut rng, FF * D, 0.2),
            up: random(&mut rng, FF * D, 0.2),
            down: random(&mut rng, D * FF, 0.2),
        })
        .collect();
    Weights {
        vocab,
        embd: random(&mut rng, vocab * D, 1.0),
        layers,
        norm: (0..D).map(|_| 0.5 + rng.f32()).collect(),
        out: random(&mut rng, vocab * D, 0.3),
    }
}

/// GPT-2's byte-to-character map.
fn byte_chars() -> Vec<char> {
    let mut extra = 0u32;
    (0..=255u8)
        .map(|b| {
            if matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF) {
                char::from(b)
            } else {
                extra += 1;
                char::from_u32(255 + extra).unwrap()
            }
        })
        .collect()
}

fn vocabulary() -> (Vec<String>, Vec<i32>, Vec<String>) {
    let mut tokens: Vec<String> = byte_chars().iter().map(|c| c.to_string()).collect();
    let merges: Vec<String> = ["h e", "l l", "he ll", "hell o", "Ġ w", "o r"]
        .iter()
        .map(|m| (*m).to_owned())
        .collect();
    for m in &merges {
        tokens.push(m.replace(' ', ""));
    }
    let mut types = vec![1; tokens.len()];
    for special in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] {
        tokens.push(special.to_owned());
        types.push(3);
    }
    (tokens, types, merges)
}

fn tensor(values: &[f32], rows: usize, cols: usize, dtype: GgmlDType) -> QTensor {
    let t = Tensor::from_vec(values.to_vec(), (rows, cols), &Device::Cpu).unwrap();
    QTensor::quantize(&t, dtype).unwrap()
}

fn vector(values: &[f32]) -> QTensor {
    let t = Tensor::from_vec(values.to_vec(), values.len(), &Device::Cpu).unwrap();
    QTensor::quantize(&t, GgmlDType::F32).unwrap()
}

/// Writes the model as a GGUF (F32 weights, or Q8_0 matrices when `dtype` says so).
fn write_gguf(path: &Path, w: &Weights, dtype: GgmlDType) {
    let (tokens, types, merges) = vocabulary();
    let strings = |v: &[String]| Value::Array(v.iter().map(|s| Value::String(s.clone())).collect());
    let metadata: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String("qwen2".into())),
        ("general.name", Value::String("tiny qwen2".into())),
        ("qwen2.block_count", Value::U32(LAYERS as u32)),
        ("qwen2.context_length", Value::U32(256)),
        ("qwen2.embedding_length", Value::U32(D as u32)),
        ("qwen2.feed_forward_length", Value::U32(FF as u32)),
        ("qwen2.attention.head_count", Value::U32(HEADS as u32)),
        ("qwen2.attention.head_count_kv", Value::U32(KV_HEADS as u32)),
        ("qwen2.rope.freq_base", Value::F32(BASE)),
        ("qwen2.attention.layer_norm_rms_epsilon", Value::F32(EPS)),
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String("qwen2".into())),
        ("tokenizer.ggml.tokens", strings(&tokens)),
        (
            "tokenizer.ggml.token_type",
            Value::Array(types.iter().map(|&t| Value::I32(t)).collect()),
        ),
        ("tokenizer.ggml.merges", strings(&merges)),
        (
            "tokenizer.ggml.eos_token_id",
            Value::U32(tokens.len() as u32 - 1),
        ),
        (
            "tokenizer.chat_template",
            Value::String("{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}".into()),
        ),
    ];
    assert_eq!(tokens.len(), w.vocab);
    let kv = KV_HEADS * HD;
    let mut tensors: Vec<(String, QTensor)> = vec![
        (
            "token_embd.weight".into(),
            tensor(&w.embd, w.vocab, D, dtype),
        ),
        ("output_norm.weight".into(), vector(&w.norm)),
        ("output.weight".into(), tensor(&w.out, w.vocab, D, dtype)),
    ];
    for (i, l) in w.layers.iter().enumerate() {
        let n = |s: &str| format!("blk.{i}.{s}");
        tensors.extend([
            (n("attn_norm.weight"), vector(&l.attn_norm)),
            (n("attn_q.weight"), tensor(&l.wq, D, D, dtype)),
            (n("attn_q.bias"), vector(&l.bq)),
            (n("attn_k.weight"), tensor(&l.wk, kv, D, dtype)),
            (n("attn_k.bias"), vector(&l.bk)),
            (n("attn_v.weight"), tensor(&l.wv, kv, D, dtype)),
            (n("attn_v.bias"), vector(&l.bv)),
            (n("attn_output.weight"), tensor(&l.wo, D, D, dtype)),
            (n("ffn_norm.weight"), vector(&l.ffn_norm)),
            (n("ffn_gate.weight"), tensor(&l.gate, FF, D, dtype)),
            (n("ffn_up.weight"), tensor(&l.up, FF, D, dtype)),
            (n("ffn_down.weight"), tensor(&l.down, D, FF, dtype)),
        ]);
    }
    let meta: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let tens: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut file, &meta, &tens).unwrap();
}

// ---- the reference: the architecture computed naively in f64 over the whole sequence ----

fn matvec(w: &[f32], x: &[f64], rows: usize) -> Vec<f64> {
    let cols = x.len();
    (0..rows)
        .map(|r| (0..cols).map(|c| f64::from(w[r * cols + c]) * x[c]).sum())
        .collect()
}

fn rms(x: &[f64], w: &[f32]) -> Vec<f64> {
    let mean = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let s = 1.0 / (mean + f64::from(EPS)).sqrt();
    x.iter()
        .zip(w)
        .map(|(v, w)| v * s * f64::from(*w))
        .collect()
}

fn rope(x: &mut [f64], pos: usize) {
    for head in x.chunks_mut(HD) {
        for i in 0..HD / 2 {
            let theta = pos as f64 * f64::from(BASE).powf(-2.0 * i as f64 / HD as f64);
            let (a, b) = (head[i], head[i + HD / 2]);
            head[i] = a * theta.cos() - b * theta.sin();
            head[i + HD / 2] = a * theta.sin() + b * theta.cos();
        }
    }
}

fn reference_logits(w: &Weights, tokens: &[u32]) -> Vec<f64> {
    let kv = KV_HEADS * HD;
    let mut xs: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&t| {
            w.embd[t as usize * D..][..D]
                .iter()
                .map(|&v| f64::from(v))
                .collect()
        })
        .collect();
    for l in &w.layers {
        let mut qs = Vec::new();
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        for (pos, x) in xs.iter().enumerate() {
            let h = rms(x, &l.attn_norm);
            let add = |mut y: Vec<f64>, b: &[f32]| {
                y.iter_mut().zip(b).for_each(|(y, b)| *y += f64::from(*b));
                y
            };
            let mut q = add(matvec(&l.wq, &h, D), &l.bq);
            let mut k = add(matvec(&l.wk, &h, kv), &l.bk);
            rope(&mut q, pos);
            rope(&mut k, pos);
            qs.push(q);
            ks.push(k);
            vs.push(add(matvec(&l.wv, &h, kv), &l.bv));
        }
        for (i, x) in xs.iter_mut().enumerate() {
            let mut attn = vec![0f64; D];
            for h in 0..HEADS {
                let g = h / (HEADS / KV_HEADS);
                let scores: Vec<f64> = (0..=i)
                    .map(|j| {
                        (0..HD)
                            .map(|d| qs[i][h * HD + d] * ks[j][g * HD + d])
                            .sum::<f64>()
                            / (HD as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::MIN, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for (j, e) in e.iter().enumerate() {
                    for d in 0..HD {
                        attn[h * HD + d] += e / sum * vs[j][g * HD + d];
                    }
                }
            }
            let o = matvec(&l.wo, &attn, D);
            x.iter_mut().zip(o).for_each(|(x, o)| *x += o);
            let h = rms(x, &l.ffn_norm);
            let g = matvec(&l.gate, &h, FF);
            let u = matvec(&l.up, &h, FF);
            let a: Vec<f64> = g
                .iter()
                .zip(&u)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            let down = matvec(&l.down, &a, D);
            x.iter_mut().zip(down).for_each(|(x, d)| *x += d);
        }
    }
    let last = rms(xs.last().unwrap(), &w.norm);
    matvec(&w.out, &last, w.vocab)
}

fn max_diff(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(a, b)| (f64::from(*a) - b).abs())
        .fold(0.0, f64::max)
}

fn settings(path: &Path, threads: usize) -> LocalSettings {
    LocalSettings {
        model_path: path.to_owned(),
        n_ctx: 512,
        threads,
    }
}

fn setup(dtype: GgmlDType) -> (tempfile::TempDir, std::path::PathBuf, Weights) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    let w = weights(vocabulary().0.len());
    write_gguf(&path, &w, dtype);
    (dir, path, w)
}

#[test]
fn logits_match_a_naive_reference_of_the_architecture() {
    let (_dir, path, w) = setup(GgmlDType::F32);
    let (mut engine, info) = CandleEngine::load(&settings(&path, 2)).unwrap();
    assert_eq!(info.name, "tiny qwen2");
    assert_eq!(info.engine, EngineKind::Candle);
    // 40 tokens: more than one tile of rows, several chunks of the output head.
    let tokens: Vec<u32> = (0..40).map(|i| (i * 37 + 5) % 256).collect();
    let (logits, reused) = engine.prefill(&tokens).unwrap();
    assert_eq!(reused, 0);
    let reference = reference_logits(&w, &tokens);
    // Queries, keys and values are rounded to f16 and activations to 8 bits for the products
    // (as llama.cpp does), so agreement is close, not exact.
    let scale = reference.iter().map(|v| v.abs()).fold(0.0, f64::max);
    let diff = max_diff(&logits, &reference);
    assert!(diff < 0.02 * scale, "max |Δ| {diff} (logit scale {scale})");
    // The same argmax on every prefix length tested.
    for n in [1, 2, 7, 33] {
        let (l, _) = engine.prefill(&tokens[..n]).unwrap();
        let r = reference_logits(&w, &tokens[..n]);
        let diff = max_diff(&l, &r);
        assert!(diff < 0.02 * scale, "prefix {n}: max |Δ| {diff}");
    }
}

#[test]
fn cache_reuse_and_truncation_equal_computing_from_scratch() {
    let (_dir, path, _w) = setup(GgmlDType::Q8_0);
    let tokens: Vec<u32> = (0..70).map(|i| (i * 11 + 3) % 256).collect();
    let (mut fresh, _) = CandleEngine::load(&settings(&path, 1)).unwrap();
    let (whole, _) = fresh.prefill(&tokens).unwrap();
    // One token at a time after a prefix.
    let (mut stepwise, _) = CandleEngine::load(&settings(&path, 3)).unwrap();
    let (mut logits, _) = stepwise.prefill(&tokens[..20]).unwrap();
    for &t in &tokens[20..] {
        logits = stepwise.step(t).unwrap();
    }
    let close = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    };
    assert!(close(&logits, &whole) < 1e-3, "{}", close(&logits, &whole));
    // A new prompt sharing 50 tokens reuses them; the cache past them is discarded.
    let mut other = tokens[..50].to_vec();
    other.extend([7, 8, 9]);
    let (reused_logits, reused) = stepwise.prefill(&other).unwrap();
    assert_eq!(reused, 50);
    let (mut scratch, _) = CandleEngine::load(&settings(&path, 2)).unwrap();
    let (scratch_logits, _) = scratch.prefill(&other).unwrap();
    assert!(close(&reused_logits, &scratch_logits) < 1e-3);
    // The identical prompt again recomputes only its last token.
    let (again, reused) = scratch.prefill(&other).unwrap();
    assert_eq!(reused, other.len() - 1);
    assert!(close(&again, &scratch_logits) < 1e-3);
}

#[test]
fn the_engine_thread_generates_with_the_shared_stopping_rules() {
    let (_dir, path, _w) = setup(GgmlDType::Q8_0);
    let engine = LocalEngine::start_with(EngineKind::Candle, settings(&path, 2)).unwrap();
    assert_eq!(engine.info.engine, EngineKind::Candle);
    let prompt = Prompt {
        system: "hello".into(),
        user: "hello world".into(),
    };
    let generation = Generation {
        max_tokens: 12,
        temperature: 0.0,
        seed: 0,
        stop: vec![],
        stop_after_object: false,
        json_schema: None,
    };
    let first = engine
        .generate_blocking(prompt.clone(), generation.clone())
        .unwrap();
    let (direct, _) = CandleEngine::load(&settings(&path, 1)).unwrap();
    let prompt_tokens = direct.prompt_tokens(&prompt);
    assert_eq!(prompt_tokens[0], 263, "<|im_start|> first");
    assert_eq!(first.usage.prompt_tokens, prompt_tokens.len() as u64);
    assert_eq!(first.reused_tokens, 0);
    assert!(first.usage.completion_tokens <= 12);
    assert_eq!(first.tokens.len() as u64, first.usage.completion_tokens);
    // Greedy decoding is deterministic, and the repeated prompt is served from the cache.
    let second = engine
        .generate_blocking(prompt.clone(), generation.clone())
        .unwrap();
    assert_eq!(second.tokens, first.tokens);
    assert_eq!(second.content, first.content);
    assert_eq!(second.reused_tokens, prompt_tokens.len() - 1);
    // A prompt that cannot fit is refused with the numbers.
    let long = Prompt {
        system: String::new(),
        user: "hello ".repeat(300),
    };
    let err = engine.generate_blocking(long, generation).unwrap_err();
    assert!(
        matches!(&err, EngineError::Request(m) if m.contains("512-token context")),
        "{err:?}"
    );
    // Sampling with a seed is reproducible.
    let hot = Generation {
        max_tokens: 8,
        temperature: 1.5,
        seed: 3,
        stop: vec![],
        stop_after_object: false,
        json_schema: None,
    };
    let a = engine
        .generate_blocking(prompt.clone(), hot.clone())
        .unwrap();
    let b = engine.generate_blocking(prompt, hot).unwrap();
    assert_eq!(a.tokens, b.tokens);
}

#[test]
fn unsupported_models_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llama.gguf");
    let arch = Value::String("llama".into());
    let mut file = std::fs::File::create(&path).unwrap();
    gguf_file::write(&mut file, &[("general.architecture", &arch)], &[]).unwrap();
    drop(file);
    let err = CandleEngine::load(&settings(&path, 1)).err().unwrap();
    assert!(
        matches!(&err, InferenceError::Unsupported(m)
            if m.contains("Qwen2-architecture") && m.contains("\"llama\"")),
        "{err:?}"
    );
}

#[test]
fn a_schema_constrains_even_a_random_model_to_its_shape() {
    let (_dir, path, _w) = setup(GgmlDType::Q8_0);
    let engine = LocalEngine::start_with(EngineKind::Candle, settings(&path, 2)).unwrap();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "kind": {"enum": ["add", "modify", "delete"]},
            "ok": {"type": "boolean"},
            "tags": {"type": "array", "items": {"enum": ["x", "y"]}}
        },
        "required": ["kind", "ok"],
        "additionalProperties": false
    });
    let grammar = envsim_model::constrain::SchemaGrammar::compile(&schema).unwrap();
    let prompt = Prompt {
        system: "hello".into(),
        user: "hello world".into(),
    };
    let mut complete = 0;
    for seed in 0..6 {
        let generation = Generation {
            max_tokens: 120,
            temperature: if seed == 0 { 0.0 } else { 1.5 },
            seed,
            stop: vec![],
            stop_after_object: false,
            json_schema: Some(schema.clone()),
        };
        let free = engine
            .generate_blocking(
                prompt.clone(),
                Generation {
                    json_schema: None,
                    ..generation.clone()
                },
            )
            .unwrap();
        // The random model left alone does not write JSON, so the constraint is what shapes it.
        assert!(
            serde_json::from_str::<serde_json::Value>(&free.content).is_err(),
            "{}",
            free.content
        );
        let out = engine
            .generate_blocking(prompt.clone(), generation)
            .unwrap();
        let mut matcher = envsim_model::constrain::Matcher::new(&grammar);
        assert!(matcher.advance(out.content.as_bytes()), "{:?}", out.content);
        if out.finish_reason == "stop" {
            complete += 1;
            assert!(matcher.is_complete(), "{:?}", out.content);
            let value: serde_json::Value = serde_json::from_str(&out.content).unwrap();
            let kind = value["kind"].as_str().unwrap();
            assert!(["add", "modify", "delete"].contains(&kind), "{value}");
            assert!(value["ok"].is_boolean(), "{value}");
            for tag in value
                .get("tags")
                .and_then(|t| t.as_array())
                .into_iter()
                .flatten()
            {
                assert!(tag == "x" || tag == "y", "{value}");
            }
            assert!(value
                .as_object()
                .unwrap()
                .keys()
                .all(|k| ["kind", "ok", "tags"].contains(&k.as_str())));
        } else {
            assert_eq!(out.finish_reason, "length");
            assert_eq!(out.tokens.len(), 120);
        }
    }
    assert!(complete >= 3, "{complete} of 6 outputs complete");
    // A schema that admits nothing is an error, not an empty answer.
    let err = engine
        .generate_blocking(
            prompt,
            Generation {
                max_tokens: 5,
                temperature: 0.0,
                seed: 0,
                stop: vec![],
                stop_after_object: false,
                json_schema: Some(serde_json::json!(false)),
            },
        )
        .unwrap_err();
    assert!(
        matches!(&err, EngineError::Generation(m) if m.contains("within the output schema")),
        "{err:?}"
    );
    let err = engine
        .generate_blocking(
            Prompt {
                system: "a".into(),
                user: "b".into(),
            },
            Generation {
                max_tokens: 5,
                temperature: 0.0,
                seed: 0,
                stop: vec![],
                stop_after_object: false,
                json_schema: Some(serde_json::json!({"$ref": "#/missing"})),
            },
        )
        .unwrap_err();
    assert!(
        matches!(&err, EngineError::Request(m)
            if m.contains("cannot constrain decoding") && m.contains("#/missing")),
        "{err:?}"
    );
}

#[test]
fn alternating_prompts_keep_their_own_caches_and_compute_the_same_logits() {
    let (_dir, path, _w) = setup(GgmlDType::Q8_0);
    // Two unrelated prompt streams (an agent's and a simulator's), each growing.
    let a: Vec<u32> = (0..300).map(|i| (i * 7 + 1) % 256).collect();
    let b: Vec<u32> = (0..280).map(|i| (i * 13 + 5) % 256).collect();
    let mut a2 = a.clone();
    a2.extend([9, 8, 7]);
    let mut b2 = b.clone();
    b2.extend([3, 4]);
    let (mut engine, _) = CandleEngine::load(&settings(&path, 2)).unwrap();
    assert_eq!(engine.prefill(&a).unwrap().1, 0);
    // b shares nothing with a: a is set aside, b starts from nothing.
    assert_eq!(engine.prefill(&b).unwrap().1, 0);
    // a2 continues a: its cache is taken back, only the 3 new tokens are computed.
    let (a2_logits, reused) = engine.prefill(&a2).unwrap();
    assert_eq!(reused, a.len());
    let (b2_logits, reused) = engine.prefill(&b2).unwrap();
    assert_eq!(reused, b.len());
    // The same logits as computing each from scratch.
    let close = |x: &[f32], y: &[f32]| {
        x.iter()
            .zip(y)
            .map(|(p, q)| (p - q).abs())
            .fold(0f32, f32::max)
    };
    let (mut fresh, _) = CandleEngine::load(&settings(&path, 1)).unwrap();
    let (scratch, _) = fresh.prefill(&a2).unwrap();
    assert!(close(&a2_logits, &scratch) < 1e-3);
    let (mut fresh, _) = CandleEngine::load(&settings(&path, 1)).unwrap();
    let (scratch, _) = fresh.prefill(&b2).unwrap();
    assert!(close(&b2_logits, &scratch) < 1e-3);
    // More streams than caches: the least recently used one is given up.
    let streams: Vec<Vec<u32>> = (0..envsim_model::candle::KV_CACHES as u32)
        .map(|k| {
            (0..260)
                .map(|i| (i * (17 + 2 * k) + 100 + k) % 256)
                .collect()
        })
        .collect();
    for s in &streams {
        engine.prefill(s).unwrap();
    }
    // a2 was used longest ago: computed anew; the last stream is still there.
    assert_eq!(engine.prefill(&a2).unwrap().1, 0);
    let last = streams.last().unwrap();
    assert_eq!(engine.prefill(last).unwrap().1, last.len() - 1);
}
