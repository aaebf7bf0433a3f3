//! Differential test: `envsim_core::python::json::dumps` against CPython's `json.dumps`.
//!
//! Generates a few hundred seeded values (nested containers, every kind of awkward string,
//! floats across the whole range, integers at the i64/u64 limits), has `python3` dump each with
//! all four combinations of `indent` (None/2) and `ensure_ascii`, and requires byte equality.
//! Values travel to Python as JSON lines and the results come back JSON-encoded (pure ASCII),
//! so no encoding on the way can hide or cause a difference.

use envsim_core::python::json::{dumps, DumpOptions};
use envsim_core::rng::Rng;
use serde_json::{Map, Number, Value};
use std::io::Write;
use std::process::{Command, Stdio};

/// The option combinations, in the order the Python script loops over them.
const OPTION_GRID: [DumpOptions; 4] = [
    DumpOptions {
        indent: None,
        ensure_ascii: true,
    },
    DumpOptions {
        indent: None,
        ensure_ascii: false,
    },
    DumpOptions {
        indent: Some(2),
        ensure_ascii: true,
    },
    DumpOptions {
        indent: Some(2),
        ensure_ascii: false,
    },
];

/// Reads JSON lines from stdin as bytes (the locale's encoding must not matter; `splitlines`
/// would also split inside U+2028 and friends, which JSON leaves unescaped) and prints each
/// dump as a JSON string on its own line.
const PYTHON_SCRIPT: &str = r#"
import json, sys
out = []
for line in sys.stdin.buffer.read().split(b"\n"):
    if not line:
        continue
    value = json.loads(line.decode("utf-8"))
    for indent in (None, 2):
        for ensure_ascii in (True, False):
            out.append(json.dumps(json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)))
sys.stdout.write("\n".join(out) + "\n")
"#;

/// Characters that exercise every escaping rule.
const AWKWARD_CHARS: &[char] = &[
    '"',
    '\\',
    '/',
    '\n',
    '\r',
    '\t',
    '\u{8}',
    '\u{c}',
    '\u{0}',
    '\u{1}',
    '\u{1f}',
    ' ',
    '~',
    '\u{7f}',
    '\u{80}',
    '\u{85}',
    '\u{a0}',
    'é',
    'ß',
    '\u{2028}',
    '\u{2029}',
    '€',
    '中',
    '\u{feff}',
    '\u{fffd}',
    '\u{ffff}',
    '😀',
    '\u{10000}',
    '\u{1d11e}',
    '\u{10ffff}',
    '\'',
];

fn random_char(rng: &mut Rng) -> char {
    match rng.below(4) {
        0 => AWKWARD_CHARS[rng.below(AWKWARD_CHARS.len())],
        1 => char::from(b' ' + rng.below(95) as u8),
        // Any code point; surrogates are not `char`s and become a private-use character.
        2 => char::from_u32(rng.below(0x11_0000) as u32).unwrap_or('\u{e000}'),
        _ => char::from_u32(rng.below(0x800) as u32).unwrap_or('x'),
    }
}

fn random_string(rng: &mut Rng) -> String {
    let len = rng.below(12);
    (0..len).map(|_| random_char(rng)).collect()
}

fn float_value(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

fn random_float(rng: &mut Rng) -> Value {
    const SPECIAL: &[f64] = &[
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.1,
        0.5,
        1e16,
        1e15,
        9_999_999_999_999_998.0,
        1e-4,
        1e-5,
        1.5e-7,
        123_456_789.125,
        // 811212085039910.25 exactly: a shortest-digits tie that Python rounds to even.
        6_489_696_680_319_282.0 / 8.0,
        5e-324,
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        f64::EPSILON,
        1e22,
        1e23,
        18_014_398_509_481_984.0,
    ];
    match rng.below(4) {
        0 => float_value(SPECIAL[rng.below(SPECIAL.len())]),
        // Any finite bit pattern: all magnitudes, subnormals included.
        1 => {
            let f = f64::from_bits(rng.next_u64());
            float_value(if f.is_finite() { f } else { 2.5 })
        }
        // Short decimals across the range where repr switches between notations.
        2 => {
            let mantissa = rng.below(1_000_000) as f64;
            let exponent = rng.below(60) as i32 - 30;
            float_value(mantissa * 10f64.powi(exponent))
        }
        // Integer-valued floats around 2^53 and 1e16.
        _ => float_value((rng.next_u64() >> (rng.below(20) + 4)) as f64),
    }
}

fn random_integer(rng: &mut Rng) -> Value {
    match rng.below(5) {
        0 => Value::from(rng.below(100) as i64 - 50),
        1 => Value::from(rng.next_u64() as i64),
        2 => Value::from(rng.next_u64()),
        3 => Value::from([i64::MIN, i64::MAX, -1][rng.below(3)]),
        _ => Value::from(u64::MAX - rng.below(3) as u64),
    }
}

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    let kinds = if depth >= 4 { 6 } else { 9 };
    match rng.below(kinds) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(0.5)),
        2 => random_integer(rng),
        3 => random_float(rng),
        4 | 5 => Value::String(random_string(rng)),
        6 => Value::Array(
            (0..rng.below(5))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let mut map = Map::new();
            for _ in 0..rng.below(5) {
                map.insert(random_string(rng), random_value(rng, depth + 1));
            }
            Value::Object(map)
        }
    }
}

/// Hand-picked values first, then seeded random ones.
fn test_values() -> Vec<Value> {
    let mut values: Vec<Value> = [
        r#"{}"#,
        r#"[]"#,
        r#"[[], {}, [[]], {"a": {}}]"#,
        r#"{"z": 1, "a": 2, "": null, "é": [true, false]}"#,
        r#""""#,
        r#"{"order_id": "O1", "note": "café ☕", "qty": 3, "price": 9.99}"#,
    ]
    .iter()
    .map(|text| serde_json::from_str(text).expect("valid JSON"))
    .collect();
    let mut rng = Rng::new(20_240_601);
    values.extend((0..400).map(|_| random_value(&mut rng, 0)));
    values
}

/// Runs `PYTHON_SCRIPT` on `values` in a scratch directory and returns its output lines.
fn python_dumps(values: &[Value]) -> Vec<String> {
    let scratch =
        std::env::temp_dir().join(format!("envsim-pyjson-cpython-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("create scratch directory");
    let mut input = String::new();
    for value in values {
        input.push_str(&serde_json::to_string(value).expect("serialize"));
        input.push('\n');
    }
    let mut child = Command::new("python3")
        .arg("-I")
        .arg("-c")
        .arg(PYTHON_SCRIPT)
        .current_dir(&scratch)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 on PATH");
    let mut stdin = child.stdin.take().expect("stdin");
    // Feed stdin from another thread so a full stdout pipe can never deadlock us.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("python3 runs");
    writer.join().expect("writer thread").expect("write stdin");
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        output.status.success(),
        "python3 failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("ASCII output")
        .lines()
        .map(|line| serde_json::from_str::<String>(line).expect("a JSON string per line"))
        .collect()
}

#[test]
fn dumps_matches_cpython_byte_for_byte() {
    let values = test_values();
    let expected = python_dumps(&values);
    assert_eq!(expected.len(), values.len() * OPTION_GRID.len());
    let mut mismatches = Vec::new();
    let mut compared = 0;
    for (value, python) in values
        .iter()
        .flat_map(|value| OPTION_GRID.iter().map(move |options| (value, options)))
        .zip(&expected)
    {
        let (value, options) = value;
        compared += 1;
        let ours = dumps(value, *options);
        if &ours != python {
            mismatches.push(format!(
                "{options:?} on {value}\n  python: {python:?}\n  ours:   {ours:?}"
            ));
        }
    }
    assert_eq!(compared, values.len() * 4);
    assert!(
        mismatches.is_empty(),
        "{} of {compared} dumps differ from CPython; first ones:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(5)].join("\n")
    );
}
