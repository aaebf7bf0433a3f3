//! Property tests: no input makes the parser panic, and the dialects agree
//! with `serde_json` and with each other.

use super::*;
use proptest::prelude::*;

const ALL: [Dialect; 3] = [Dialect::Json, Dialect::Python, Dialect::Relaxed];

/// Value equality that lets floats differ in the last bits, since
/// serde_json's default float parsing may be off by an ulp or so.
fn nearly_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x == y || (x - y).abs() <= x.abs().max(y.abs()) * 1e-15
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| nearly_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((ka, va), (kb, vb))| ka == kb && nearly_equal(va, vb))
        }
        _ => a == b,
    }
}

fn check_no_panic(text: &str) {
    for dialect in ALL {
        let whole = parse_literal(text, dialect);
        let prefix = parse_literal_prefix(text, dialect);
        if let Err(e) = &whole {
            assert!(e.offset <= text.len());
        }
        if let Ok((_, end)) = &prefix {
            assert!(*end <= text.len());
            assert!(text.is_char_boundary(*end));
        }
        // A complete parse is also a prefix parse of the same value.
        if let Ok(v) = whole {
            if let Ok((pv, _)) = prefix {
                if dialect == Dialect::Json {
                    assert_eq!(v, pv);
                }
            }
        }
    }
}

/// Short strings over the characters the grammars care about, so
/// that the deeper parser paths are reached often.
const JSON_LIKE: &str = r#"[\[\]{}()'",: \n\t0-9a-zA-Z_.+\-\\/éu😀#*]{0,48}"#;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>()) {
        check_no_panic(&text);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        check_no_panic(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn json_like_strings_never_panic(text in JSON_LIKE) {
        check_no_panic(&text);
    }

    #[test]
    fn json_dialect_agrees_with_serde_json(text in JSON_LIKE) {
        let ours = parse_literal(&text, Dialect::Json).ok();
        let theirs = serde_json::from_str::<Value>(&text).ok();
        match (&ours, &theirs) {
            (Some(a), Some(b)) => prop_assert!(nearly_equal(a, b), "{:?} vs {:?}", a, b),
            _ => prop_assert_eq!(ours, theirs),
        }
    }

    #[test]
    fn json_results_are_relaxed_results(text in JSON_LIKE) {
        if let Ok(v) = parse_literal(&text, Dialect::Json) {
            // Only `-0` differs: a float in both, so the values agree.
            prop_assert_eq!(parse_literal(&text, Dialect::Relaxed), Ok(v));
        }
    }

    #[test]
    fn python_results_are_relaxed_results(text in JSON_LIKE) {
        if let Ok(v) = parse_literal(&text, Dialect::Python) {
            // `-0` (also written `- 0`, which Python accepts) is the int 0 in Python and the
            // float -0.0 in the relaxed dialect, as in JSON.
            let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            if !squeezed.contains("-0") && !text.contains("\\/") && !text.contains('\r') {
                prop_assert_eq!(parse_literal(&text, Dialect::Relaxed), Ok(v));
            }
        }
    }
}
