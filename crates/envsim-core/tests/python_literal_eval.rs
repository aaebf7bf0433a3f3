//! Differential test: `envsim_core::python::literal_eval` against CPython's
//! `ast.literal_eval`.
//!
//! A hand-written corpus covering every rule the port reproduces, then a few
//! hundred grammar-generated inputs from a fixed seed, all go to one
//! `python3` process. Each input travels as a JSON array of code points (so
//! lone surrogates and NUL characters arrive intact), Python prints a
//! canonical, type-tagged, ASCII dump of the value or `ERROR`, and the Rust
//! result rendered the same way must be identical for every input.
//!
//! `python3` (CPython 3.11) on `PATH` is a documented requirement of the test
//! suite; without it this test fails with a message saying so.

use envsim_core::python::repr::py_float_repr;
use envsim_core::python::{literal_eval, text, PyInt, PyValue};
use envsim_core::rng::Rng;
use std::io::Write;
use std::process::{Command, Stdio};

/// Reads one JSON array of code points per line, prints the canonical dump
/// of `ast.literal_eval` of that text, or `ERROR`.
const PYTHON_SCRIPT: &str = r#"
import ast, json, sys

def canon(v):
    t = type(v)
    if v is None:
        return "None"
    if v is Ellipsis:
        return "Ellipsis"
    if t is bool:
        return "bool:" + str(v)
    if t is int:
        return "int:" + format(v, "x")
    if t is float:
        return "float:" + repr(v)
    if t is complex:
        return "complex:(" + repr(v.real) + "," + repr(v.imag) + ")"
    if t is str:
        return "str:" + ",".join(format(ord(c), "x") for c in v)
    if t is bytes:
        return "bytes:" + v.hex()
    if t is tuple:
        return "tuple:[" + ";".join(map(canon, v)) + "]"
    if t is list:
        return "list:[" + ";".join(map(canon, v)) + "]"
    if t is set:
        return "set:{" + ";".join(sorted(map(canon, v))) + "}"
    if t is dict:
        return "dict:{" + ";".join(canon(k) + "=>" + canon(x) for k, x in v.items()) + "}"
    raise TypeError(t)

out = []
for line in sys.stdin.buffer.read().split(b"\n"):
    if not line:
        continue
    source = "".join(map(chr, json.loads(line)))
    try:
        value = ast.literal_eval(source)
    except Exception:
        out.append("ERROR")
        continue
    out.append(canon(value))
sys.stdout.write("\n".join(out) + "\n")
"#;

/// The canonical dump `PYTHON_SCRIPT` prints, for a Rust result.
fn canon(value: &PyValue) -> String {
    let join = |items: &mut dyn Iterator<Item = String>| items.collect::<Vec<_>>().join(";");
    match value {
        PyValue::None => "None".into(),
        PyValue::Ellipsis => "Ellipsis".into(),
        PyValue::Bool(b) => format!("bool:{}", if *b { "True" } else { "False" }),
        PyValue::Int(PyInt::Small(i)) if *i < 0 => format!("int:-{:x}", i.unsigned_abs()),
        PyValue::Int(PyInt::Small(i)) => format!("int:{i:x}"),
        PyValue::Int(PyInt::Big(b)) => format!("int:{}", b.to_str_radix(16)),
        PyValue::Float(f) => format!("float:{}", py_float_repr(*f)),
        PyValue::Complex { re, im } => {
            format!("complex:({},{})", py_float_repr(*re), py_float_repr(*im))
        }
        PyValue::Str(s) => format!(
            "str:{}",
            text::code_points(s.as_bytes())
                .map(|cp| format!("{cp:x}"))
                .collect::<Vec<_>>()
                .join(",")
        ),
        PyValue::Bytes(b) => format!("bytes:{}", envsim_core::hex::encode(b)),
        PyValue::Tuple(items) => format!("tuple:[{}]", join(&mut items.iter().map(canon))),
        PyValue::List(items) => format!("list:[{}]", join(&mut items.iter().map(canon))),
        PyValue::Set(set) => {
            let mut items: Vec<String> = set.iter().map(canon).collect();
            items.sort();
            format!("set:{{{}}}", items.join(";"))
        }
        PyValue::Dict(dict) => format!(
            "dict:{{{}}}",
            join(
                &mut dict
                    .iter()
                    .map(|(k, v)| format!("{}=>{}", canon(k), canon(v)))
            )
        ),
    }
}

/// Hand-picked inputs, one or more for every rule of the port.
const CORPUS: &[&str] = &[
    // Constants.
    "1",
    "-1",
    "+1",
    "0",
    "-0",
    "1.5",
    "-0.0",
    "+0.0",
    "True",
    "False",
    "None",
    "...",
    "-True",
    "+False",
    "-None",
    "-...",
    "Ellipsis",
    "__debug__",
    "nan",
    "inf",
    "-inf",
    // Whitespace before, after and around.
    "  1",
    "\t\t1",
    " \t 1 \t ",
    "\x0c1",
    "\x0c 1",
    " \x0c1",
    "\x0b1",
    "1\x0b",
    "1 ",
    "1\x0c",
    "\u{a0}1",
    "\u{3000}1",
    "\u{feff}1",
    // Integers.
    "123456789012345678901234567890",
    "-123456789012345678901234567890",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "00",
    "000",
    "0_0",
    "0_0_0",
    "01",
    "0_1",
    "007",
    "1_000",
    "1__000",
    "1_",
    "_1",
    "0_",
    "0__0",
    "0x1F",
    "0X_ff",
    "0x",
    "0x_",
    "0x1_",
    "0x1__2",
    "0xg",
    "0x1g",
    "0o17",
    "0O_7",
    "0o8",
    "0o18",
    "0o",
    "0b101",
    "0B_1_0",
    "0b2",
    "0b12",
    "0b",
    "-0x10",
    "1a",
    "1_a",
    "0x1for",
    "1if 1 else 2",
    "1or 2",
    "1 if 1 else 2",
    "1é",
    // Floats and imaginary numbers.
    "1.",
    ".5",
    "1.e5",
    "1e5",
    "1E+5",
    "1e-5",
    "1_0.5e1_0",
    "1_0.5_e10",
    "1._5",
    "1.5_",
    "1e",
    "1e+",
    "1e_5",
    "1e5_",
    "1ee5",
    "01.5",
    "09e1",
    "0_1.5",
    "01j",
    "00j",
    "0e0",
    "1e400",
    "-1e400",
    "1e-400",
    "2.5e-324",
    "0.1",
    "1.7976931348623157e308",
    "1.7976931348623159e308",
    "1j",
    "2J",
    "1.5j",
    ".5j",
    "1.j",
    "1e5j",
    "1e400j",
    "-1j",
    "+1j",
    "-0j",
    "1jj",
    "1j_",
    "0x1j",
    "1..",
    "1...",
    "1.5.",
    ". 5",
    "..",
    "....",
    "1 .5",
    // Signs and the complex BinOp.
    "-(1)",
    "-((1))",
    "-(-1)",
    "--1",
    "- -1",
    "+-1",
    "-+1",
    "1+2j",
    "1-2j",
    "-1+2j",
    "-1-2j",
    "+1+2j",
    "1.5+2.5j",
    "-1.5-0j",
    "(-1)+2j",
    "-(1)+2j",
    "(1)+(2j)",
    "(1+2j)",
    "-(1+2j)",
    "(1+2j)+3j",
    "1+2j+3j",
    "1+2",
    "1-2",
    "1j+1",
    "1j+1j",
    "1+-2j",
    "1+(-2j)",
    "True+1j",
    "1+True",
    "'a'+'b'",
    "1*2j",
    "2**2",
    "~1",
    "not 1",
    "-0.0+1j",
    "-0.0-0j",
    "0.0-0j",
    "-0-0j",
    "1e400+1j",
    "-1e400-1e400j",
    "1+1e400j",
    "-1",
    // Strings.
    "'a'",
    "\"a\"",
    "'''a'''",
    "\"\"\"a\"\"\"",
    "''",
    "\"\"",
    "''''''",
    "'a' 'b'",
    "'a'  \"b\" '''c'''",
    "('a'\n 'b')",
    "'a'\n'b'",
    "'a' \\\n'b'",
    "u'a'",
    "U'a'",
    "r'a\\b'",
    "R'\\''",
    "b'a'",
    "B'a'",
    "br'\\x'",
    "Br'a'",
    "bR'a'",
    "rb'a'",
    "Rb'a'",
    "RB'a'",
    "ur'a'",
    "bu'a'",
    "ub'a'",
    "f'a'",
    "F'a'",
    "fr'a'",
    "rf'a'",
    "Rf'a'",
    "f''",
    "'a' f'b'",
    "b'a' 'b'",
    "'a' b'b'",
    "b'a' b'b'",
    "'a",
    "'a\nb'",
    "'''a\nb'''",
    "'''a\r\nb'''",
    "'''a\rb'''",
    "'a\rb'",
    "'a\\\nb'",
    "'a\\\r\nb'",
    "r'a\\\nb'",
    "'\\",
    "'\\'",
    "'''a''",
    "'a''",
    "'é'",
    "b'é'",
    "rb'é'",
    "'😀'",
    "'\u{85}\u{2028}'",
    r"'\\'",
    r"'\''",
    r#"'\"'"#,
    r"'\a\b\f\n\r\t\v'",
    r"b'\a\b\f\n\r\t\v'",
    r"'\0'",
    r"'\7'",
    r"'\08'",
    r"'\101'",
    r"'\1011'",
    r"'\377'",
    r"'\400'",
    r"'\777'",
    r"b'\777'",
    r"b'\400'",
    r"b'\101'",
    r"'\x41'",
    r"'\x4'",
    r"'\xg1'",
    r"'\X41'",
    r"b'\x41'",
    r"b'\x4'",
    r"b'\xZZ'",
    r"'\u00e9'",
    r"'\u00E9'",
    r"'\u00e'",
    r"'\ud800'",
    r"'\udc00\ud800'",
    r"'\U0001F600'",
    r"'\U0010FFFF'",
    r"'\U00110000'",
    r"'\UFFFFFFFF'",
    r"'\U0001F60'",
    r"b'\u00e9'",
    r"b'\N{DIGIT ONE}'",
    r"'\d'",
    r"'\%'",
    r"'\ '",
    r"'\é'",
    r"b'\d'",
    r"'\N{LATIN SMALL LETTER A}'",
    r"'\N{latin small letter a}'",
    r"'\N{Latin Small Letter A}'",
    r"'\N{LATIN SMALL LETTER A }'",
    r"'\N{ LATIN SMALL LETTER A}'",
    r"'\N{LATIN  SMALL LETTER A}'",
    r"'\N{LATIN_SMALL_LETTER_A}'",
    r"'\N{LATINSMALLLETTERA}'",
    r"'\N{LATIN-SMALL LETTER A}'",
    r"'\N{-LATIN SMALL LETTER A}'",
    r"'\N{TIBETAN LETTER -A}'",
    r"'\N{HANGUL JUNGSEONG O-E}'",
    r"'\N{HANGUL JUNGSEONG OE}'",
    r"'\N{EM DASH}'",
    r"'\N{SNOWMAN}'",
    r"'\N{NULL}'",
    r"'\N{NUL}'",
    r"'\N{nul}'",
    r"'\N{LINE FEED}'",
    r"'\N{line feed}'",
    r"'\N{LF}'",
    r"'\N{BYTE ORDER MARK}'",
    r"'\N{BOM}'",
    r"'\N{EM}'",
    r"'\N{END OF MEDIUM}'",
    r"'\N{VS256}'",
    r"'\N{LATIN CAPITAL LETTER GHA}'",
    r"'\N{CJK UNIFIED IDEOGRAPH-4E00}'",
    r"'\N{CJK UNIFIED IDEOGRAPH-04E00}'",
    r"'\N{CJK UNIFIED IDEOGRAPH-004E00}'",
    r"'\N{CJK UNIFIED IDEOGRAPH-4e00}'",
    r"'\N{cjk unified ideograph-4E00}'",
    r"'\N{CJK UNIFIED IDEOGRAPH-20000}'",
    r"'\N{CJK UNIFIED IDEOGRAPH-3134A}'",
    r"'\N{CJK UNIFIED IDEOGRAPH-3134B}'",
    r"'\N{CJK UNIFIED IDEOGRAPH-31350}'",
    r"'\N{CJK UNIFIED IDEOGRAPH-2EBF0}'",
    r"'\N{CJK UNIFIED IDEOGRAPH-9FFF}'",
    r"'\N{CJK UNIFIED IDEOGRAPH-4DB5}'",
    r"'\N{CJK COMPATIBILITY IDEOGRAPH-F900}'",
    r"'\N{HANGUL SYLLABLE GA}'",
    r"'\N{HANGUL SYLLABLE GAG}'",
    r"'\N{HANGUL SYLLABLE GAGG}'",
    r"'\N{HANGUL SYLLABLE A}'",
    r"'\N{HANGUL SYLLABLE }'",
    r"'\N{HANGUL SYLLABLE ga}'",
    r"'\N{hangul syllable GA}'",
    r"'\N{Hangul Syllable GA}'",
    r"'\N{HANGUL SYLLABLE GAX}'",
    r"'\N{HANGUL SYLLABLE HIH}'",
    r"'\N{TANGUT IDEOGRAPH-17000}'",
    r"'\N{EGYPTIAN HIEROGLYPH A001}'",
    r"'\N{TOTO LETTER PA}'",
    r"'\N{ZNAMENNY NEUME KRYUK}'",
    r"'\N{KAWI LETTER A}'",
    r"'\N{NAG MUNDARI LETTER O}'",
    r"'\N{GARAY VOWEL SIGN A}'",
    r"'\N{}'",
    r"'\N'",
    r"'\N{'",
    r"'\N{a'",
    r"'\N{LATIN SMALL LETTER A'",
    r"'\N{é}'",
    r"'\N{LATIN SMALL LETTER A}\N{DIGIT TWO}'",
    r"r'\N{x}'",
    // Containers.
    "()",
    "(1)",
    "(1,)",
    "(1, 2)",
    "(1, 2,)",
    "(,)",
    "(1,,)",
    "((),)",
    "[]",
    "[1]",
    "[1,]",
    "[1, 2, [3, (4,)]]",
    "[,]",
    "[1,,2]",
    "{}",
    "{1}",
    "{1,}",
    "{1, 2, 1}",
    "{1, True, 1.0, 1+0j}",
    "{0, False, -0.0, 0j, -0j}",
    "{'a', 'a', b'a'}",
    "{(1, 2), (1, 2)}",
    "{(1, [2])}",
    "{[1]}",
    "{{}}",
    "{set()}",
    "{1: 2}",
    "{1: 2,}",
    "{1: 'a', True: 'b'}",
    "{True: 'a', 1: 'b', 1.0: 'c'}",
    "{1: 'a', 2: 'b', 1: 'c'}",
    "{(1,): 1, (1.0,): 2}",
    "{[1]: 2}",
    "{(1, [2]): 2}",
    "{{}: 1}",
    "{1: [1], 2: {3: {4}}}",
    "{1: 2, 3}",
    "{1, 2: 3}",
    "{1: }",
    "{: 1}",
    "{1:2:3}",
    "{**{}}",
    "{1: 2, **{}}",
    "{*()}",
    "[*()]",
    "(*(),)",
    "*()",
    "{1:=2}",
    "{x := 1}",
    "(x := 1)",
    "set()",
    "set ( )",
    "set(\n)",
    "set(# c\n)",
    "(set)()",
    "((set))()",
    "set()()",
    "(set)",
    "( set\n)( )",
    "(set())",
    "[(set)()]",
    "-set()",
    "set()+1j",
    "1+set()",
    "set ()",
    "set(())",
    "set([])",
    "set(*())",
    "set(x=1)",
    "set",
    "set[1]",
    "frozenset()",
    "dict()",
    "list()",
    "tuple()",
    "ｓｅｔ()",
    "ſet()",
    "𝐬𝐞𝐭()",
    "sｅt()",
    "ⓢⓔⓣ()",
    "sets()",
    "名前",
    "[名前]",
    "x",
    "a.b",
    "(1).real",
    "1 .real",
    "x[0]",
    "[1][0]",
    "(1)(2)",
    "[1 for x in y]",
    "{1: 2 for x in y}",
    "(x for x in y)",
    "lambda: 1",
    "1 < 2",
    "1 == 1",
    "1 and 2",
    "yield",
    "await x",
    "1; 2",
    "1 = 2",
    "1 2",
    "'a' 1",
    "1 'a'",
    "[1] [2]",
    "1,,",
    ",",
    ",1",
    "1,\n2",
    "1, 2, ",
    "1 ,",
    // Lines, comments, continuation, indentation.
    "",
    " ",
    "\n",
    "# only a comment",
    "1 # comment",
    "1#",
    "# c\n1",
    "#c\n\n1\n\n#d\n",
    "1\n",
    "1\n\n\n",
    "\n1",
    "\n\n1",
    "1\n2",
    "1\n 2",
    "\n {'success': True}  \n",
    "\n{'success': True}  \n",
    "6\n ",
    "6\n \n",
    "6\n\t",
    "6\n\t\n",
    "6\n\x0c",
    "6\n\x0c ",
    "6\n \x0c",
    "6\n#c",
    "6\n  #c",
    "6\n  #c\n",
    "\\\n1",
    "\\\n  1",
    "\\\n\n1",
    "\\\n#c\n1",
    "\\\n\\\n1",
    "\\1",
    "\\",
    "1\\",
    "1\\\n",
    "1 \\\n",
    "1 \\\n\n",
    "1\n\\\n",
    "1\n\\\n\n",
    "1\n\\\n#c\n",
    "#c\n  \\\n\x0c1",
    "#c\n\\\n\x0c1",
    "#\n\x0c\\\n 1",
    "\x0c\\\n1",
    "1 + \\\n2j",
    "(1,\\\n2)",
    "[1,\n2]",
    "[1,\n\n  2\n]",
    "[\n1, # one\n2 # two\n]",
    "(\n\t1\n)",
    "{\n'a':\n1\n}",
    "[1\n",
    "[1",
    "(",
    ")",
    "1)",
    "(1]",
    "[1)",
    "{1]",
    "(1,\n",
    "1\r\n",
    "1\r",
    "[1,\r\n2]",
    "[1,\r2]",
    "\r\n1",
    "\r 1",
    "1\r\n 2",
    "# c\r1",
    // Non-printable and odd characters.
    "1 $",
    "1 ?",
    "1 !",
    "`1`",
    "1 @ 2",
    "1 ; ",
    "\x01",
    "1\x1b",
    "'\x01\x7f'",
    "1 # \u{ffff}",
    "# -*- coding: latin-1 -*-\n'é'",
    "# coding: ascii\n'é'",
    "1\n  \x0c",
    "#c\n  \\\n\n1",
    "#c\n  \\\n1",
    "Ｔｒｕｅ",
    "Ｎｏｎｅ",
    "(ｓｅｔ)()",
    "'''a''''",
    "'''a'''b'''",
    "{0.0: 1, -0.0: 2}",
    "{-0.0, 0}",
    "9007199254740993+0j",
    "-9223372036854775809+1j",
    "1 \\\n# c\n",
    "'\u{10ffff}'",
];

/// The nesting-limit cases, built.
fn nesting_inputs() -> Vec<String> {
    let mut inputs = Vec::new();
    for depth in [199, 200, 201] {
        inputs.push(format!("{}{}", "[".repeat(depth), "]".repeat(depth)));
        inputs.push(format!("{}{}", "(".repeat(depth), ")".repeat(depth)));
        inputs.push(format!("{}1{}", "(".repeat(depth), ")".repeat(depth)));
        inputs.push(format!("{}1{}", "{".repeat(depth), "}".repeat(depth)));
        inputs.push(format!(
            "{}1{}",
            "[{1: ".repeat(depth / 2),
            "}]".repeat(depth / 2)
        ));
        inputs.push(format!(
            "{}-(1)+2j{}",
            "[(".repeat(depth / 2),
            ",)]".repeat(depth / 2)
        ));
    }
    inputs.push(format!("{}1", "-".repeat(5000)));
    inputs.push(format!("{}1{}", "-(".repeat(150), ")".repeat(150)));
    inputs.push(format!("{}1", "1+".repeat(3000)));
    inputs.push(format!("[{}]", "1,".repeat(5000)));
    inputs
}

/// The number-size cases, built.
fn number_inputs() -> Vec<String> {
    vec![
        "9".repeat(4300),
        "9".repeat(4301),
        format!("-{}", "9".repeat(4300)),
        format!("1_{}", "0".repeat(4299)),
        format!("1_{}", "0".repeat(4300)),
        "0".repeat(5000),
        format!("0x{}", "f".repeat(5000)),
        format!("0b{}", "1".repeat(20000)),
        format!("{}.5", "9".repeat(5000)),
        format!("{}j", "9".repeat(5000)),
        format!("1{}+1j", "0".repeat(308)),
        format!("1{}+1j", "0".repeat(309)),
        format!("-1{}-1j", "0".repeat(400)),
        format!("0.{}1", "0".repeat(400)),
        format!("1e{}", "9".repeat(30)),
    ]
}

/// Inputs with characters a Rust `&str` cannot hold: lone surrogates (and
/// NUL, for symmetry), as code points.
fn special_inputs() -> Vec<Vec<u32>> {
    let cps = |s: &str| s.chars().map(u32::from).collect::<Vec<u32>>();
    let mut inputs = Vec::new();
    for (before, special, after) in [
        ("'", 0xD800, "'"),
        ("'a", 0xDFFF, "b'"),
        ("1 # ", 0xD800, ""),
        ("", 0xDC00, "1"),
        ("1", 0, ""),
        ("'", 0, "'"),
        ("# ", 0, "\n1"),
        ("b'", 0xD800, "'"),
    ] {
        let mut input = cps(before);
        input.push(special);
        input.extend(cps(after));
        inputs.push(input);
    }
    inputs
}

/// A grammar-based random input: brackets, strings with escapes, numbers,
/// names, signs and operators, whitespace, newlines and comments, with an
/// occasional random edit.
struct Generator {
    rng: Rng,
}

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "7",
    "42",
    "00",
    "0_0",
    "01",
    "1_000",
    "1__0",
    "1_",
    "0x1f",
    "0X_A",
    "0o17",
    "0o8",
    "0b101",
    "0b2",
    "1.",
    ".5",
    "1.5",
    "1e5",
    "1E-5",
    "1e",
    "1_0.5e1_0",
    "1e400",
    "1j",
    "2.5J",
    "0j",
    "1jj",
    "9223372036854775808",
    "1a",
    "0x",
    "3.14159",
];
const NAMES: &[&str] = &[
    "True",
    "False",
    "None",
    "set",
    "x",
    "ｓｅｔ",
    "名前",
    "Ellipsis",
    "not",
    "if",
    "lambda",
    "_",
];
const STRING_PREFIXES: &[&str] = &[
    "", "", "", "", "r", "b", "B", "rb", "Br", "u", "U", "f", "rf", "ur", "bu",
];
const QUOTES: &[&str] = &["'", "\"", "'''", "\"\"\""];
const STRING_PIECES: &[&str] = &[
    "a",
    "xyz",
    " ",
    "é",
    "😀",
    "中",
    "\\n",
    "\\t",
    "\\\\",
    "\\'",
    "\\\"",
    "\\x41",
    "\\x4",
    "\\xZZ",
    "\\u00e9",
    "\\u00E",
    "\\U0001F600",
    "\\U00110000",
    "\\ud800",
    "\\101",
    "\\777",
    "\\0",
    "\\d",
    "\\é",
    "\\\n",
    "\\N{DIGIT ONE}",
    "\\N{digit one}",
    "\\N{DIGIT  ONE}",
    "\\N{LF}",
    "\\N{CJK UNIFIED IDEOGRAPH-4E00}",
    "\\N{HANGUL SYLLABLE GAG}",
    "\\N{",
    "\\N{}",
    "\n",
    "\r\n",
    "'",
    "\"",
    "{",
    "}",
    "#",
];
const GAPS: &[&str] = &[
    "", "", "", " ", " ", "  ", "\t", "\x0c", "\n", "\r\n", "\\\n", " # c\n", "\n ", "\n\n",
];

impl Generator {
    fn pick(&mut self, items: &[&'static str]) -> &'static str {
        self.rng.pick(items).copied().unwrap_or("")
    }

    fn gap(&mut self, out: &mut String) {
        if self.rng.chance(0.3) {
            out.push_str(self.pick(GAPS));
        }
    }

    fn string(&mut self, out: &mut String) {
        let prefix = self.pick(STRING_PREFIXES);
        let quote = self.pick(QUOTES);
        out.push_str(prefix);
        out.push_str(quote);
        for _ in 0..self.rng.below(4) {
            let piece = self.pick(STRING_PIECES);
            out.push_str(piece);
        }
        if !self.rng.chance(0.05) {
            out.push_str(quote);
        }
    }

    fn value(&mut self, depth: usize, out: &mut String) {
        let kinds = if depth >= 4 { 5 } else { 10 };
        match self.rng.below(kinds) {
            0 | 1 => {
                if self.rng.chance(0.3) {
                    out.push_str(self.pick(&["-", "+", "-", "--", "- "]));
                }
                out.push_str(self.pick(NUMBERS));
                if self.rng.chance(0.2) {
                    out.push_str(self.pick(&["+", "-", " + ", "-"]));
                    out.push_str(self.pick(&["2j", "1.5J", "0j", "3", "1e400j", "-1j"]));
                }
            }
            2 => {
                self.string(out);
                if self.rng.chance(0.3) {
                    self.gap(out);
                    self.string(out);
                }
            }
            3 => out.push_str(self.pick(NAMES)),
            4 => out.push_str(self.pick(&["...", "set()", "-(1)", "(-1)+2j", "()", "[]", "{}"])),
            5 | 6 => {
                let (open, close) = *self
                    .rng
                    .pick(&[("(", ")"), ("[", "]"), ("{", "}")])
                    .unwrap_or(&("(", ")"));
                out.push_str(open);
                let dict = open == "{" && self.rng.chance(0.5);
                let count = self.rng.below(4);
                for i in 0..count {
                    if i > 0 {
                        out.push(',');
                    }
                    self.gap(out);
                    self.value(depth + 1, out);
                    if dict {
                        self.gap(out);
                        out.push(':');
                        self.gap(out);
                        self.value(depth + 1, out);
                    }
                    self.gap(out);
                }
                if count > 0 && self.rng.chance(0.2) {
                    out.push(',');
                }
                if !self.rng.chance(0.03) {
                    out.push_str(close);
                }
            }
            7 => {
                self.value(depth + 1, out);
                out.push_str(self.pick(&[", ", ",", " ,"]));
                self.value(depth + 1, out);
            }
            8 => {
                out.push_str(self.pick(&["-", "+"]));
                out.push('(');
                self.value(depth + 1, out);
                out.push(')');
            }
            _ => {
                self.value(depth + 1, out);
                out.push_str(self.pick(&[" ", "", "\n", " # c"]));
                out.push_str(self.pick(&["", "", "1", "'x'", "(", ".real", "[0]", "()"]));
            }
        }
    }

    fn input(&mut self) -> Vec<u32> {
        let mut out = String::new();
        if self.rng.chance(0.2) {
            out.push_str(self.pick(&[" ", "\t", "\n", "# c\n", "\x0c", "\\\n", "\n "]));
        }
        self.value(0, &mut out);
        if self.rng.chance(0.3) {
            out.push_str(self.pick(&[",", "\n", " \n", "\n ", "\n\n", "# end", "\r\n", "\\\n"]));
        }
        let mut cps: Vec<u32> = out.chars().map(u32::from).collect();
        // An occasional edit: delete, duplicate or insert a character.
        if !cps.is_empty() && self.rng.chance(0.15) {
            let at = self.rng.below(cps.len());
            match self.rng.below(3) {
                0 => {
                    cps.remove(at);
                }
                1 => {
                    let c = cps[at];
                    cps.insert(at, c);
                }
                _ => {
                    let c = *self
                        .rng
                        .pick(&[0x20, 0x0A, 0x27, 0x5C, 0x28, 0x5D, 0xD800, 0x00, 0xE9])
                        .unwrap_or(&0x20);
                    cps.insert(at, c);
                }
            }
        }
        cps
    }
}

fn random_inputs(count: usize) -> Vec<Vec<u32>> {
    let mut generator = Generator {
        rng: Rng::new(0x11_7E2A_1E7A),
    };
    (0..count).map(|_| generator.input()).collect()
}

/// Every input, as code points.
fn all_inputs() -> Vec<Vec<u32>> {
    let cps = |s: &str| s.chars().map(u32::from).collect::<Vec<u32>>();
    let mut inputs: Vec<Vec<u32>> = CORPUS.iter().map(|s| cps(s)).collect();
    inputs.extend(nesting_inputs().iter().map(|s| cps(s)));
    inputs.extend(number_inputs().iter().map(|s| cps(s)));
    inputs.extend(special_inputs());
    inputs.extend(random_inputs(600));
    inputs
}

/// Runs `PYTHON_SCRIPT` over `inputs` in one `python3` process.
fn python_results(inputs: &[Vec<u32>]) -> Vec<String> {
    let mut payload = String::new();
    for input in inputs {
        let numbers: Vec<String> = input.iter().map(u32::to_string).collect();
        payload.push('[');
        payload.push_str(&numbers.join(","));
        payload.push_str("]\n");
    }
    let spawned = Command::new("python3")
        .arg("-I")
        .arg("-c")
        .arg(PYTHON_SCRIPT)
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => panic!(
            "this test needs `python3` (CPython 3.11) on PATH, a documented requirement of \
             the envsim test suite; starting it failed: {e}"
        ),
    };
    let mut stdin = child.stdin.take().expect("python3 stdin");
    // Feed stdin from another thread so a full stdout pipe cannot deadlock.
    let writer = std::thread::spawn(move || stdin.write_all(payload.as_bytes()));
    let output = child.wait_with_output().expect("python3 runs");
    writer
        .join()
        .expect("writer thread")
        .expect("write to python3");
    assert!(
        output.status.success(),
        "python3 failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("ASCII output")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn rust_result(input: &[u32]) -> String {
    let mut bytes = Vec::new();
    for &cp in input {
        text::encode(cp, &mut bytes);
    }
    match literal_eval(&bytes) {
        Ok(value) => canon(&value),
        Err(_) => "ERROR".into(),
    }
}

fn shown(input: &[u32]) -> String {
    let s: String = input
        .iter()
        .map(|&cp| char::from_u32(cp).map_or(format!("\\u{{{cp:x}}}"), |c| c.to_string()))
        .collect();
    let mut s = format!("{s:?}");
    if s.len() > 300 {
        s.truncate(300);
        s.push_str("...");
    }
    s
}

fn truncated(s: &str) -> &str {
    s.get(..s.len().min(200)).unwrap_or(s)
}

#[test]
fn literal_eval_matches_cpython() {
    let inputs = all_inputs();
    assert!(CORPUS.len() >= 200, "corpus has {} inputs", CORPUS.len());
    let expected = python_results(&inputs);
    assert_eq!(expected.len(), inputs.len(), "one result line per input");
    let mut mismatches = Vec::new();
    let mut values = 0;
    for (input, python) in inputs.iter().zip(&expected) {
        let ours = rust_result(input);
        if python != "ERROR" {
            values += 1;
        }
        if &ours != python {
            mismatches.push(format!(
                "{}\n  python: {}\n  ours:   {}",
                shown(input),
                truncated(python),
                truncated(&ours)
            ));
        }
    }
    // Both outcomes must be well represented for the comparison to mean much.
    assert!(
        values > inputs.len() / 5,
        "only {values} inputs gave values"
    );
    assert!(values < inputs.len() * 4 / 5, "{values} inputs gave values");
    assert!(
        mismatches.is_empty(),
        "{} of {} inputs differ from CPython:\n{}",
        mismatches.len(),
        inputs.len(),
        mismatches[..mismatches.len().min(20)].join("\n")
    );
}
