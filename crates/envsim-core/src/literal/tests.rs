//! Unit tests for the literal parser; property tests are in [`props`].

use super::numbers::limbs_to_decimal;
use super::*;
use serde_json::json;

fn py(text: &str) -> Value {
    match parse_literal(text, Dialect::Python) {
        Ok(v) => v,
        Err(e) => panic!("{text:?} failed in Python: {e}"),
    }
}

fn relaxed(text: &str) -> Value {
    match parse_literal(text, Dialect::Relaxed) {
        Ok(v) => v,
        Err(e) => panic!("{text:?} failed in Relaxed: {e}"),
    }
}

fn json_ok(text: &str) -> Value {
    match parse_literal(text, Dialect::Json) {
        Ok(v) => v,
        Err(e) => panic!("{text:?} failed in Json: {e}"),
    }
}

fn err(text: &str, dialect: Dialect) -> LiteralError {
    match parse_literal(text, dialect) {
        Ok(v) => panic!("{text:?} parsed in {dialect:?} as {v}"),
        Err(e) => e,
    }
}

fn kind(text: &str, dialect: Dialect) -> LiteralErrorKind {
    err(text, dialect).kind
}

fn unsupported(s: &'static str) -> LiteralErrorKind {
    LiteralErrorKind::UnsupportedSyntax(Cow::Borrowed(s))
}

#[test]
fn json_basics() {
    assert_eq!(
        json_ok(r#" {"a": [1, -2, 3.5, true, false, null], "b": {"c": "d"}} "#),
        json!({"a": [1, -2, 3.5, true, false, null], "b": {"c": "d"}})
    );
    assert_eq!(
        json_ok(r#""\"\\\/\b\f\n\r\t\u00e9""#),
        json!("\"\\/\u{8}\u{c}\n\r\t\u{e9}")
    );
    assert_eq!(json_ok(r#""\ud83d\ude00""#), json!("😀"));
    assert_eq!(json_ok("[]"), json!([]));
    assert_eq!(json_ok("{}"), json!({}));
}

#[test]
fn json_rejects_non_json() {
    use LiteralErrorKind::*;
    assert_eq!(kind("[1,]", Dialect::Json), UnexpectedChar(']'));
    assert_eq!(kind("{'a': 1}", Dialect::Json), UnexpectedChar('\''));
    assert_eq!(kind("01", Dialect::Json), InvalidNumber);
    assert_eq!(kind("1.", Dialect::Json), UnexpectedEnd);
    assert_eq!(kind("1.x", Dialect::Json), InvalidNumber);
    assert_eq!(kind(".5", Dialect::Json), UnexpectedChar('.'));
    assert_eq!(kind("+1", Dialect::Json), UnexpectedChar('+'));
    assert_eq!(kind("True", Dialect::Json), unsupported("name `True`"));
    assert_eq!(kind("NaN", Dialect::Json), unsupported("name `NaN`"));
    assert_eq!(kind(r#""\'""#, Dialect::Json), InvalidEscape);
    assert_eq!(kind("\"a\tb\"", Dialect::Json), UnexpectedChar('\t'));
    assert_eq!(kind("{1: 2}", Dialect::Json), UnexpectedChar('1'));
    assert_eq!(kind("(1)", Dialect::Json), UnexpectedChar('('));
    assert_eq!(kind("1e400", Dialect::Json), NumberOutOfRange);
    assert_eq!(kind(r#""\ud800""#, Dialect::Json), LoneSurrogate);
    assert_eq!(kind(r#""\udc00x""#, Dialect::Json), LoneSurrogate);
    assert_eq!(kind(r#""\ud800\u0041""#, Dialect::Json), LoneSurrogate);
    assert_eq!(kind(r#""a" "b""#, Dialect::Json), TrailingCharacters);
}

#[test]
fn json_numbers_match_serde_json() {
    for text in [
        "0",
        "-0",
        "1",
        "-1",
        "1.0",
        "-0.0",
        "1e5",
        "1E-5",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "123456789012345678901234567890",
        "0.1",
        "4.9e-324",
    ] {
        let expected: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let got = json_ok(text);
        assert_eq!(got, expected, "{text}");
        assert_eq!(got.is_f64(), expected.is_f64(), "{text}");
        assert_eq!(got.is_i64(), expected.is_i64(), "{text}");
    }
    // serde_json's default float parser is not always correctly rounded
    // (that needs its `float_roundtrip` feature); this parser is, like
    // Python's.
    assert_eq!(json_ok("2.5e-308").as_f64(), Some(2.5e-308));
    assert_eq!(
        json_ok("0.30000000000000004").as_f64(),
        Some(0.300_000_000_000_000_04)
    );
}

#[test]
fn integers_and_floats_stay_distinct() {
    for dialect in [Dialect::Json, Dialect::Python, Dialect::Relaxed] {
        let one = parse_literal("1", dialect).unwrap_or_default();
        let one_f = parse_literal("1.0", dialect).unwrap_or_default();
        assert!(one.is_u64(), "{dialect:?}");
        assert!(one_f.is_f64(), "{dialect:?}");
        assert_ne!(one, one_f);
    }
}

#[test]
fn python_containers() {
    assert_eq!(
        py("{'a': [1, 2,], 'b': (3,), 'c': (), 'd': {1, 2}, 'e': None, 'f': True, 'g': False,}"),
        json!({"a": [1, 2], "b": [3], "c": [], "d": [1, 2], "e": null, "f": true, "g": false})
    );
    assert_eq!(py("(1, 'x')"), json!([1, "x"]));
    assert_eq!(py("(1)"), json!(1));
    assert_eq!(py("((('a')))"), json!("a"));
    assert_eq!(py("set()"), json!([]));
    assert_eq!(py("set ( )"), json!([]));
    assert_eq!(py("{1, 1, 2}"), json!([1, 1, 2]));
    assert_eq!(py("[\n  1,\n  2\n]"), json!([1, 2]));
    assert_eq!(py("{(1, 2), 3}"), json!([[1, 2], 3]));
    assert_eq!(py("1, 2"), json!([1, 2]));
    assert_eq!(py("1,"), json!([1]));
    assert_eq!(py("  {'a': 1}  \n"), json!({"a": 1}));
    assert_eq!(py("[1, \\\n 2]"), json!([1, 2]));
    assert_eq!(py("[1, # one\n 2] # done"), json!([1, 2]));
    assert_eq!(py("# leading comment\n{'a': 1}"), json!({"a": 1}));
    assert_eq!(py("\n\n{'a': 1}\n  \n"), json!({"a": 1}));
    assert_eq!(py("  \t[1]"), json!([1]));
    assert_eq!(py("\n\u{c}[1]"), json!([1]));
}

#[test]
fn python_rejects_what_literal_eval_rejects() {
    use LiteralErrorKind::*;
    assert_eq!(kind("true", Dialect::Python), unsupported("name `true`"));
    assert_eq!(kind("null", Dialect::Python), unsupported("name `null`"));
    assert_eq!(kind("inf", Dialect::Python), unsupported("name `inf`"));
    assert_eq!(kind("-inf", Dialect::Python), unsupported("name `inf`"));
    assert_eq!(kind("nan", Dialect::Python), unsupported("name `nan`"));
    assert_eq!(
        kind("Ellipsis", Dialect::Python),
        unsupported("name `Ellipsis`")
    );
    assert_eq!(kind("...", Dialect::Python), unsupported("Ellipsis"));
    assert_eq!(kind("foo", Dialect::Python), unsupported("name `foo`"));
    assert_eq!(kind("1j", Dialect::Python), unsupported("complex number"));
    assert_eq!(kind("1.5J", Dialect::Python), unsupported("complex number"));
    assert_eq!(kind("f'x'", Dialect::Python), unsupported("f-string"));
    assert_eq!(
        kind("'a' b'b'", Dialect::Python),
        unsupported("mixed bytes and str literals")
    );
    assert_eq!(
        kind(r"'\N{DASH}'", Dialect::Python),
        unsupported("\\N{...} escape")
    );
    assert_eq!(kind("[[1]: 2]", Dialect::Python), UnexpectedChar(':'));
    assert_eq!(kind("{[1]: 2}", Dialect::Python), InvalidDictKey);
    assert_eq!(kind("{(1, 2): 3}", Dialect::Python), InvalidDictKey);
    assert_eq!(
        kind("{[1], 2}", Dialect::Python),
        unsupported("unhashable set element")
    );
    assert_eq!(
        kind("{1, [2]}", Dialect::Python),
        unsupported("unhashable set element")
    );
    assert_eq!(kind("01", Dialect::Python), InvalidNumber);
    assert_eq!(kind("1_", Dialect::Python), InvalidNumber);
    assert_eq!(kind("1__0", Dialect::Python), InvalidNumber);
    assert_eq!(kind("0b102", Dialect::Python), InvalidNumber);
    assert_eq!(kind("0x", Dialect::Python), UnexpectedEnd);
    assert_eq!(kind("0xg", Dialect::Python), InvalidNumber);
    assert_eq!(kind("1e", Dialect::Python), UnexpectedEnd);
    assert_eq!(kind("1ex", Dialect::Python), InvalidNumber);
    assert_eq!(kind("--1", Dialect::Python), UnexpectedChar('-'));
    assert_eq!(kind("-(-1)", Dialect::Python), UnexpectedChar('-'));
    assert_eq!(kind("-True", Dialect::Python), UnexpectedChar('T'));
    assert_eq!(kind("-(1,)", Dialect::Python), UnexpectedChar(','));
    assert_eq!(kind("'a\nb'", Dialect::Python), UnexpectedChar('\n'));
    assert_eq!(kind("'a\0b'", Dialect::Python), UnexpectedChar('\0'));
    assert_eq!(kind("b'\u{e9}'", Dialect::Python), UnexpectedChar('\u{e9}'));
    assert_eq!(
        kind(r"b'\xff'", Dialect::Python),
        unsupported("bytes literal that is not valid UTF-8")
    );
    assert_eq!(kind("[1,,2]", Dialect::Python), UnexpectedChar(','));
    assert_eq!(kind("(,)", Dialect::Python), UnexpectedChar(','));
    assert_eq!(kind("{**a}", Dialect::Python), UnexpectedChar('*'));
    assert_eq!(kind("'a'\n'b'", Dialect::Python), TrailingCharacters);
    assert_eq!(kind("1,\n2", Dialect::Python), UnexpectedChar('\n'));
    assert_eq!(kind(r"'\x4'", Dialect::Python), InvalidEscape);
    assert_eq!(kind(r"'\U00110000'", Dialect::Python), InvalidEscape);
    assert_eq!(kind(r"'\ud800'", Dialect::Python), LoneSurrogate);
    assert_eq!(kind(r"'\U0000dc00'", Dialect::Python), LoneSurrogate);
    assert_eq!(kind("r'\\'", Dialect::Python), UnexpectedEnd);
    assert_eq!(kind("1 + 2j", Dialect::Python), TrailingCharacters);
    // "unexpected indent": only spaces and tabs are stripped up front.
    assert_eq!(
        err("\n  [1]", Dialect::Python),
        LiteralError {
            offset: 1,
            kind: UnexpectedChar(' ')
        }
    );
    assert_eq!(kind(" # c\n\t[1]", Dialect::Python), UnexpectedChar('\t'));
    assert_eq!(kind("\u{c} [1]", Dialect::Python), UnexpectedChar(' '));
    assert_eq!(kind("6\n ", Dialect::Python), UnexpectedChar(' '));
    assert_eq!(kind("6\n\n\t", Dialect::Python), UnexpectedChar('\t'));
    assert_eq!(kind("6\n\u{c} ", Dialect::Python), UnexpectedChar(' '));
    assert_eq!(py("6\n \n"), json!(6));
    assert_eq!(py("6  "), json!(6));
    assert_eq!(py("6\n \u{c}"), json!(6));
    assert_eq!(py("6\n  # c"), json!(6));
    assert_eq!(py("\\\n1"), json!(1));
    assert_eq!(
        err("\\\n 1", Dialect::Python),
        LiteralError {
            offset: 2,
            kind: UnexpectedChar(' ')
        }
    );
    assert_eq!(kind("\n\n  ", Dialect::Python), EmptyInput);
    assert_eq!(kind("[1,\n  ", Dialect::Python), UnexpectedEnd);
    assert_eq!(kind("[1,\\\n", Dialect::Python), UnexpectedEnd);
    assert_eq!(kind("1\\\n", Dialect::Python), TrailingCharacters);
    assert_eq!(kind("[1]\\\r\n", Dialect::Python), TrailingCharacters);
    assert_eq!(py("1\\\n\n"), json!(1));
    assert_eq!(py("6 # x\\\n"), json!(6));
    assert_eq!(relaxed("\n  [1]\n "), json!([1]));
    assert_eq!(relaxed("1\\\n"), json!(1));
    assert_eq!(
        parse_literal_prefix("\n  [1]", Dialect::Python),
        Ok((json!([1]), 6))
    );
}

#[test]
fn python_numbers() {
    assert_eq!(py("1_000"), json!(1000));
    assert_eq!(py("0x_ff"), json!(255));
    assert_eq!(py("0XFF"), json!(255));
    assert_eq!(py("0o17"), json!(15));
    assert_eq!(py("0b1010"), json!(10));
    assert_eq!(py("-5"), json!(-5));
    assert_eq!(py("+5"), json!(5));
    assert_eq!(py("- 5"), json!(-5));
    assert_eq!(py("-(5)"), json!(-5));
    assert_eq!(py("(-5)"), json!(-5));
    assert_eq!(py("-0"), json!(0));
    assert!(py("-0").is_u64());
    assert_eq!(py("00"), json!(0));
    assert_eq!(py("0_0"), json!(0));
    assert_eq!(py("1."), json!(1.0));
    assert_eq!(py(".5"), json!(0.5));
    assert_eq!(py("1e5"), json!(100000.0));
    assert_eq!(py("1.e2"), json!(100.0));
    assert_eq!(py("1_0.5"), json!(10.5));
    assert_eq!(py("01.5"), json!(1.5));
    assert_eq!(py("1e1_0"), json!(1e10));
    assert_eq!(py("-1.5e-3"), json!(-0.0015));
    assert_eq!(py("1e-400"), json!(0.0));
    assert_eq!(
        kind("1e400", Dialect::Python),
        LiteralErrorKind::NumberOutOfRange
    );
    assert_eq!(
        py("18446744073709551615"),
        json!(18_446_744_073_709_551_615u64)
    );
    assert_eq!(py("-9223372036854775808"), json!(i64::MIN));
    let big = py("18446744073709551616");
    assert_eq!(big.as_f64(), Some(18_446_744_073_709_551_616.0));
    let neg_big = py("-18446744073709551615");
    assert_eq!(neg_big.as_f64(), Some(-18_446_744_073_709_551_615.0));
    assert_eq!(py("0x1_0000_0000_0000_0000").as_f64(), Some(2f64.powi(64)));
    // 2^64 + 2^11 + 1 rounds up to 2^64 + 2^12 (above the tie).
    assert_eq!(
        py("0x10000000000000801").as_f64(),
        Some(2f64.powi(64) + 4096.0)
    );
    // 2^64 + 2^11 is a tie and rounds to even (2^64).
    assert_eq!(py("0x10000000000000800").as_f64(), Some(2f64.powi(64)));
    let nines = "9".repeat(400);
    assert_eq!(
        kind(&nines, Dialect::Python),
        LiteralErrorKind::NumberOutOfRange
    );
    assert_eq!(
        kind(&"1".repeat(4301), Dialect::Python),
        LiteralErrorKind::NumberOutOfRange
    );
}

#[test]
fn big_integers_convert_like_python() {
    let digits = "123456789012345678901234567890123456789";
    let v = py(digits);
    let expected: f64 = digits.parse().unwrap_or(0.0);
    assert_eq!(v.as_f64(), Some(expected));
    // As a key its exact text survives.
    assert_eq!(py(&format!("{{{digits}: 1}}")), json!({ digits: 1 }));
    assert_eq!(
        py(&format!("{{-{digits}: 1}}")),
        json!({ format!("-{digits}"): 1 })
    );
    // Too large for f64, fine as a key.
    let huge = "7".repeat(400);
    assert_eq!(py(&format!("{{{huge}: 1}}")), json!({ huge.clone(): 1 }));
    assert_eq!(
        kind(&format!("{{1: {huge}}}"), Dialect::Python),
        LiteralErrorKind::NumberOutOfRange
    );
    assert_eq!(
        py("{0x10000000000000000: 0}"),
        json!({"18446744073709551616": 0})
    );
    assert_eq!(
        py("{-18446744073709551615: 0}"),
        json!({"-18446744073709551615": 0})
    );
    assert_eq!(limbs_to_decimal(&[]), "0");
    assert_eq!(limbs_to_decimal(&[0, 1]), "4294967296");
}

#[test]
fn python_dict_keys_use_str() {
    assert_eq!(
        py("{1: 'a', 1.5: 'b', True: 'c', None: 'd', -2: 'e', 1e16: 'f', -0.0: 'g', 'x': 'h'}"),
        json!({"1": "a", "1.5": "b", "True": "c", "None": "d", "-2": "e", "1e+16": "f", "-0.0": "g", "x": "h"})
    );
    assert_eq!(
        relaxed("{true: 1, null: 2, -0: 3}"),
        json!({"True": 1, "None": 2, "0": 3})
    );
    assert_eq!(py("{b'k': 1}"), json!({"k": 1}));
    assert_eq!(py("{(1): 1}"), json!({"1": 1}));
}

#[test]
fn duplicate_keys_last_wins_in_first_position() {
    let v = py("{'a': 1, 'b': 2, 'a': 3}");
    assert_eq!(v, json!({"a": 3, "b": 2}));
    let keys: Vec<&String> = v
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys, ["a", "b"]);
    assert_eq!(json_ok(r#"{"a": 1, "a": 2}"#), json!({"a": 2}));
}

#[test]
fn python_strings() {
    assert_eq!(py(r#"'it\'s'"#), json!("it's"));
    assert_eq!(py(r#""it's""#), json!("it's"));
    assert_eq!(py(r"'a' 'b'"), json!("ab"));
    assert_eq!(py("'a'\"b\"r'\\c'"), json!("ab\\c"));
    assert_eq!(py("['a'\n 'b']"), json!(["ab"]));
    assert_eq!(
        py(r#"'\\ \' \" \a \b \f \n \r \t \v'"#),
        json!("\\ ' \" \u{7} \u{8} \u{c} \n \r \t \u{b}")
    );
    assert_eq!(py(r"'\101\x41\u0041\U00000041\0'"), json!("AAAA\0"));
    assert_eq!(py(r"'\777'"), json!("\u{1ff}"));
    assert_eq!(py(r"'\d\/\q'"), json!("\\d\\/\\q"));
    assert_eq!(py("'a\\\nb'"), json!("ab"));
    assert_eq!(py("'a\\\r\nb'"), json!("ab"));
    assert_eq!(py(r"r'\n\''"), json!("\\n\\'"));
    assert_eq!(py(r"R'\\'"), json!("\\\\"));
    assert_eq!(py(r"u'x'"), json!("x"));
    assert_eq!(py(r"b'\x41\n'"), json!("A\n"));
    assert_eq!(py(r"b'\u0041'"), json!("\\u0041"));
    assert_eq!(py(r"rb'\x41'"), json!("\\x41"));
    assert_eq!(py(r"b'\xc3\xa9'"), json!("é"));
    assert_eq!(py(r"b'\303\251'"), json!("é"));
    assert_eq!(py("'tab\there'"), json!("tab\there"));
    assert_eq!(py(r"'\ud83d\ude00'"), json!("😀"));
    assert_eq!(py(r"'\U0001F600'"), json!("😀"));
    assert_eq!(py("'日本語 😀'"), json!("日本語 😀"));
    assert_eq!(py("'''a\r\nb'c'''"), json!("a\nb'c"));
    assert_eq!(py("\"\"\"x\"\"\""), json!("x"));
    assert_eq!(py("''"), json!(""));
    assert_eq!(py("'''''' 'x'"), json!("x"));
}

#[test]
fn relaxed_is_a_union() {
    assert_eq!(
        relaxed("{'a': True, \"b\": false, 'c': None, 'd': null, 'e': [1, 2,], 'f': (1,),}"),
        json!({"a": true, "b": false, "c": null, "d": null, "e": [1, 2], "f": [1]})
    );
    assert_eq!(relaxed(r#""a\/b""#), json!("a/b"));
    assert_eq!(relaxed(r"'\d'"), json!("\\d"));
    assert_eq!(
        relaxed("\"line1\nline2\ttab\r\n\""),
        json!("line1\nline2\ttab\r\n")
    );
    assert_eq!(relaxed("'\u{1}'"), json!("\u{1}"));
    assert_eq!(relaxed("{\n'a'\n:\n1\n}"), json!({"a": 1}));
    assert!(relaxed("-0").is_f64());
    assert_eq!(kind("NaN", Dialect::Relaxed), unsupported("NaN"));
    assert_eq!(kind("-Infinity", Dialect::Relaxed), unsupported("Infinity"));
    assert_eq!(
        kind("[Infinity]", Dialect::Relaxed),
        unsupported("Infinity")
    );
    assert_eq!(kind("nan", Dialect::Relaxed), unsupported("name `nan`"));
    assert_eq!(kind("{a: 1}", Dialect::Relaxed), unsupported("name `a`"));
}

#[test]
fn truncation_is_unexpected_end() {
    let cases = [
        r#"{"a": "hello"#,
        r#"{"a": [1, 2"#,
        r#"{"a": [1, 2,"#,
        r#"{"a"#,
        r#"{"a": "#,
        r#"{"a": tr"#,
        r#"{"a": nul"#,
        r#"{"a": 1."#,
        r#"{"a": 1e"#,
        r#"{"a": -"#,
        r#"{"a": "\u12"#,
        r#"{"a": "\ud83d"#,
        r#"{"a": "\ud83d\"#,
        r#"{"a": "x\"#,
        "[",
        "{",
    ];
    for text in cases {
        for dialect in [Dialect::Json, Dialect::Python, Dialect::Relaxed] {
            let text = if dialect == Dialect::Python {
                text.replace("tr", "Tr").replace("nul", "Non")
            } else {
                text.to_owned()
            };
            let e = err(&text, dialect);
            assert_eq!(
                e.kind,
                LiteralErrorKind::UnexpectedEnd,
                "{text:?} {dialect:?}"
            );
            assert_eq!(e.offset, text.len(), "{text:?} {dialect:?}");
        }
    }
    assert_eq!(
        kind("{'a': (1, ", Dialect::Python),
        LiteralErrorKind::UnexpectedEnd
    );
    assert_eq!(
        kind("{'a': '''x", Dialect::Python),
        LiteralErrorKind::UnexpectedEnd
    );
    assert_eq!(
        kind("{'a': 0x", Dialect::Relaxed),
        LiteralErrorKind::UnexpectedEnd
    );
}

#[test]
fn error_offsets() {
    let e = err(r#"{"a": 1, "b": x}"#, Dialect::Json);
    assert_eq!(e.offset, 14);
    assert_eq!(e.kind, unsupported("name `x`"));
    assert_eq!(err("[1] x", Dialect::Json).offset, 4);
    assert_eq!(
        err("  ", Dialect::Json),
        LiteralError {
            offset: 2,
            kind: LiteralErrorKind::EmptyInput
        }
    );
    assert_eq!(err("", Dialect::Python).kind, LiteralErrorKind::EmptyInput);
    assert_eq!(err(r#"["\q"]"#, Dialect::Json).offset, 2);
    assert_eq!(err("[1, 2 3]", Dialect::Python).offset, 6);
    assert_eq!(err("'é' x", Dialect::Python).offset, 5);
}

#[test]
fn display_mentions_offset() {
    let e = err("[1, x]", Dialect::Json);
    assert_eq!(e.to_string(), "unsupported syntax: name `x` at byte 4");
    let e = err("[1", Dialect::Json);
    assert_eq!(e.to_string(), "unexpected end of input at byte 2");
    assert_eq!(
        LiteralErrorKind::UnexpectedChar('\'').to_string(),
        "unexpected character '\\''"
    );
    assert_eq!(
        LiteralErrorKind::TooDeep.to_string(),
        "nesting deeper than 128 levels"
    );
}

#[test]
fn prefix_parsing() {
    assert_eq!(
        parse_literal_prefix(r#"  {"a": 1} trailing {"b": 2}"#, Dialect::Json),
        Ok((json!({"a": 1}), 10))
    );
    assert_eq!(
        parse_literal_prefix("1, 2", Dialect::Python),
        Ok((json!(1), 1))
    );
    assert_eq!(
        parse_literal_prefix("'a' 'b' c", Dialect::Python),
        Ok((json!("ab"), 7))
    );
    assert_eq!(
        parse_literal_prefix("'a'\n'b'", Dialect::Python),
        Ok((json!("a"), 3))
    );
    assert_eq!(
        parse_literal_prefix("{}{}", Dialect::Relaxed),
        Ok((json!({}), 2))
    );
    assert_eq!(
        parse_literal_prefix(" \n ", Dialect::Relaxed).map_err(|e| e.kind),
        Err(LiteralErrorKind::EmptyInput)
    );
}

#[test]
fn depth_limit() {
    let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    for dialect in [Dialect::Json, Dialect::Python, Dialect::Relaxed] {
        assert!(parse_literal(&ok, dialect).is_ok(), "{dialect:?}");
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(
            err(&deep, dialect),
            LiteralError {
                offset: MAX_DEPTH,
                kind: LiteralErrorKind::TooDeep
            }
        );
    }
    let objects = format!(
        "{}1{}",
        r#"{"a":"#.repeat(MAX_DEPTH + 1),
        "}".repeat(MAX_DEPTH + 1)
    );
    assert_eq!(kind(&objects, Dialect::Json), LiteralErrorKind::TooDeep);
    let parens = format!(
        "{}1{}",
        "(".repeat(MAX_DEPTH + 1),
        ")".repeat(MAX_DEPTH + 1)
    );
    assert_eq!(kind(&parens, Dialect::Python), LiteralErrorKind::TooDeep);
    let signed = format!(
        "-{}1{}",
        "(".repeat(MAX_DEPTH + 1),
        ")".repeat(MAX_DEPTH + 1)
    );
    assert_eq!(kind(&signed, Dialect::Python), LiteralErrorKind::TooDeep);
}

#[test]
fn hundred_thousand_brackets_do_not_overflow_the_stack() {
    let n = 100_000;
    for open in ["[", "{", "(", "{\"a\":", "{'a':[", "-("] {
        let text = open.repeat(n);
        for dialect in [Dialect::Json, Dialect::Python, Dialect::Relaxed] {
            let e = err(&text, dialect);
            assert!(
                matches!(
                    e.kind,
                    LiteralErrorKind::TooDeep
                        | LiteralErrorKind::UnexpectedChar(_)
                        | LiteralErrorKind::InvalidNumber
                ),
                "{open} {dialect:?}: {e}"
            );
        }
    }
    let text = "[".repeat(n) + &"]".repeat(n);
    assert_eq!(kind(&text, Dialect::Relaxed), LiteralErrorKind::TooDeep);
}

#[test]
fn locate_lines_and_columns() {
    let text = "ab\ncé\r\nx";
    assert_eq!(locate(text, 0), (1, 1));
    assert_eq!(locate(text, 2), (1, 3));
    assert_eq!(locate(text, 3), (2, 1));
    assert_eq!(locate(text, 6), (2, 3));
    // Inside the two-byte 'é': refers to it.
    assert_eq!(locate(text, 5), (2, 2));
    assert_eq!(locate(text, 8), (3, 1));
    assert_eq!(locate(text, 1000), (3, 2));
    assert_eq!(locate("", 5), (1, 1));
}

mod props;
