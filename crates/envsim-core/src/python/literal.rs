//! CPython 3.11's `ast.literal_eval` on a `str`.
//!
//! `ast.literal_eval(s)` parses `s.lstrip(" \t")` in `eval` mode and turns
//! the tree into a value, accepting only:
//!
//! * constants: `int`, `float` and imaginary literals, `str` and `bytes`
//!   literals (every prefix but `f`, adjacent literals concatenated, every
//!   escape), `True`, `False`, `None`, `...`;
//! * tuples (also bare at the top level: `1, 2` and `1,`), lists, sets,
//!   dicts (no `**`), and `set()` called without arguments;
//! * `+x` / `-x` where `x` is an `int`, `float` or `complex` constant (not a
//!   `bool`, not another sign: `--1` and `-True` raise; parentheses vanish,
//!   so `-(1)` is `-1`);
//! * `a + b` / `a - b` where `a` is a possibly signed `int` or `float`
//!   constant and `b` an imaginary constant (`1+2j`, `-1.5-2j`), computed as
//!   Python does (the `int` converted to `float`, `OverflowError` when it is
//!   too large).
//!
//! [`literal_eval`] returns the value, or an error wherever Python raises
//! anything (`SyntaxError` and `IndentationError` from the parser,
//! `ValueError` for any other node, `TypeError` for an unhashable dict key
//! or set element, `OverflowError`, the `UnicodeEncodeError` a lone
//! surrogate in the text causes, the error for NUL characters). Dict and set
//! displays follow Python's rules for equal keys (`{1: 'a', True: 'b'}` is
//! `{1: 'b'}`).
//!
//! The source goes through the same steps as in CPython: the text must
//! encode to UTF-8 (no lone surrogates) and hold no NUL; newlines are
//! translated (`\r\n` and `\r` become `\n`, inside string literals too);
//! the tokenizer (`python/tokenize.rs`) reproduces indentation (a line with
//! content outside brackets must start in column 0, form feeds reset the
//! column, backslash continuations count as CPython 3.11 counts them),
//! comments, explicit and implicit line joining, the limit of 200 open
//! brackets and the exact number and string grammars (prefixes, every
//! escape, `\N{...}` names, the 4300-digit limit on decimal integers); and a
//! small parser builds only the literal subset of the grammar, rejecting
//! anything else at its first token: any other node would make
//! `literal_eval` raise anyway. Non-ASCII names are NFKC-normalized by
//! CPython, so `ｓｅｔ()` is `set()`.
//!
//! Robustness: no panics, on any bytes. The parser does not recurse: open
//! displays live on an explicit stack, at most 200 deep, so stack use is
//! small and constant. Chains of signs or operators are rejected as soon as
//! they go past what a literal allows (`--1`, `1+2j+3j`). Time is linear in
//! the input, apart from converting decimal integers (at most 4300 digits
//! each, as in CPython).
//!
//! Known differences from CPython, none of which changes a value or whether
//! one is returned:
//!
//! * The error is one [`LiteralEvalError`]; its message only approximates
//!   Python's and does not tell the exception types apart, and when the text
//!   has several errors the one reported may not be the one Python reports.
//! * Sets keep insertion order (CPython iterates them in hash order).
//! * Warnings (invalid escape sequences such as `'\d'`) are not reported;
//!   under Python's default filters they are silent too.
//! * Input that is not generalized UTF-8 (so not a Python `str`) is
//!   rejected.
//!
//! `\N{...}` lookups use the `unicode_names2` crate, whose Unicode version
//! is newer than CPython 3.11's 14.0; characters named after 14.0 are
//! excluded with a table and the aliases are CPython's own list, so every
//! lookup gives what CPython 3.11 gives (verified against `python3` for all
//! names and aliases in several spellings).

use std::borrow::Cow;

use super::text;
use super::tokenize::{Lexer, StrLit, Token};
use super::value::{PyDict, PySet, PyStr, PyValue};

/// Why `ast.literal_eval` raised.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} (byte {offset})")]
pub struct LiteralEvalError {
    /// Byte offset in the input.
    pub offset: usize,
    /// What Python would report, approximately.
    pub message: String,
}

type Result<T> = std::result::Result<T, LiteralEvalError>;

fn error(offset: usize, message: &str) -> LiteralEvalError {
    LiteralEvalError {
        offset,
        message: message.to_owned(),
    }
}

/// `ast.literal_eval(text)`.
///
/// `text` is generalized UTF-8 (see [`super::text`]); any `&str` is valid.
///
/// # Errors
///
/// Wherever Python raises.
pub fn literal_eval(text: &[u8]) -> Result<PyValue> {
    check_source(text)?;
    let skipped = text
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    let source = text.get(skipped..).unwrap_or_default();
    let (source, collapsed) = translate_newlines(source);
    let mut parser = Parser {
        lexer: Lexer::new(&source),
        peeked: None,
        frames: Vec::new(),
    };
    parser.file().map_err(|mut e| {
        // Back to an offset in `text`: add the stripped prefix and the `\r`
        // of every `\r\n` pair before the error.
        let before = collapsed.partition_point(|&at| at < e.offset);
        e.offset = e.offset.saturating_add(skipped).saturating_add(before);
        e
    })
}

/// What CPython checks before tokenizing: the text must encode to UTF-8 (no
/// lone surrogates) and hold no NUL character.
fn check_source(text: &[u8]) -> Result<()> {
    let mut at = 0;
    while let Some((cp, len)) = text::decode(text, at) {
        if text::is_surrogate(cp) {
            return Err(error(at, "surrogates not allowed (UnicodeEncodeError)"));
        }
        if cp == 0 {
            return Err(error(at, "source code string cannot contain null bytes"));
        }
        if cp == 0xFFFD && text.get(at..at + 3) != Some("\u{FFFD}".as_bytes()) {
            return Err(error(at, "not a Python str (invalid UTF-8)"));
        }
        at += len;
    }
    Ok(())
}

/// `translate_newlines`: `\r\n` and lone `\r` become `\n`. Also returns the
/// offsets (in the result) of the newlines that replaced a `\r\n` pair.
fn translate_newlines(source: &[u8]) -> (Cow<'_, [u8]>, Vec<usize>) {
    if !source.contains(&b'\r') {
        return (Cow::Borrowed(source), Vec::new());
    }
    let mut out = Vec::with_capacity(source.len());
    let mut collapsed = Vec::new();
    let mut bytes = source.iter().copied().peekable();
    while let Some(b) = bytes.next() {
        if b == b'\r' {
            if bytes.peek() == Some(&b'\n') {
                bytes.next();
                collapsed.push(out.len());
            }
            out.push(b'\n');
        } else {
            out.push(b);
        }
    }
    (Cow::Owned(out), collapsed)
}

/// A parsed expression, with as much of its AST node kind as `literal_eval`
/// looks at.
enum Elem {
    /// A `Constant` node (parentheses around it vanish in the AST).
    Constant(PyValue),
    /// A `UnaryOp` `+`/`-` on an `int`/`float`/`complex` constant.
    Signed(PyValue),
    /// Any other node `literal_eval` converts (containers, `set()`, the
    /// complex `BinOp`).
    Other(PyValue),
    /// The name `set` (at this offset), which only converts when called
    /// without arguments; parentheses around it vanish: `(set)()`.
    SetName(usize),
}

impl Elem {
    fn value(self) -> Result<PyValue> {
        match self {
            Elem::Constant(v) | Elem::Signed(v) | Elem::Other(v) => Ok(v),
            Elem::SetName(at) => Err(error(at, "malformed node or string: a name")),
        }
    }
}

/// `_convert_num` accepts exactly these types (`bool` is not one).
fn is_number(value: &PyValue) -> bool {
    matches!(
        value,
        PyValue::Int(_) | PyValue::Float(_) | PyValue::Complex { .. }
    )
}

/// What is pending around the operand being parsed: a sign before it, and
/// the left operand and operator of a `BinOp` it is the right side of.
#[derive(Default)]
struct Pending {
    /// Offset of the sign, and whether it is `-`.
    sign: Option<(usize, bool)>,
    /// Offset of the operator, the left operand, whether it is `-`.
    left: Option<(usize, Elem, bool)>,
}

/// A display whose items are being parsed (the whole text counts as one,
/// for its bare tuple).
enum Frame {
    /// The top level: items so far, and whether a comma made it a tuple.
    Top { items: Vec<PyValue>, comma: bool },
    /// After `(`.
    Paren { items: Vec<PyValue>, comma: bool },
    /// After `[`.
    List(Vec<PyValue>),
    /// After `{`, before the first item tells a dict from a set.
    Brace,
    /// A dict display; `key` is set while its value is being parsed.
    Dict { dict: PyDict, key: Option<PyValue> },
    /// A set display.
    Set(PySet),
}

/// What delivering a finished expression to its display led to.
enum Step {
    /// A separator was read; the next item starts.
    NextItem,
    /// The display was closed; its value is an operand of the outer one.
    Closed(Elem),
    /// The whole text was read.
    Done(PyValue),
}

/// An iterative parser of the literal subset of the grammar. Nested
/// displays live on an explicit stack (at most 200 deep, the tokenizer's
/// limit), so the parser itself never recurses.
struct Parser<'a> {
    lexer: Lexer<'a>,
    peeked: Option<(usize, Token)>,
    /// The open displays, innermost last, each with the [`Pending`] state
    /// of the expression it is an operand of.
    frames: Vec<(Frame, Pending)>,
}

impl Parser<'_> {
    fn next(&mut self) -> Result<(usize, Token)> {
        match self.peeked.take() {
            Some(token) => Ok(token),
            None => self.lexer.next_token(),
        }
    }

    fn peek(&mut self) -> Result<&Token> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lexer.next_token()?);
        }
        match &self.peeked {
            Some((_, token)) => Ok(token),
            None => Err(error(0, "internal error")),
        }
    }

    /// `eval: expressions NEWLINE* ENDMARKER`, where an expression is
    /// `[sign] primary [('+'|'-') [sign] primary]`, a primary is an atom
    /// or `set()`, and an atom a constant or a display.
    fn file(&mut self) -> Result<PyValue> {
        self.frames.push((
            Frame::Top {
                items: Vec::new(),
                comma: false,
            },
            Pending::default(),
        ));
        let mut pending = Pending::default();
        loop {
            // The start of an operand; `None` when a display was opened.
            let Some(mut elem) = self.operand(&mut pending)? else {
                continue;
            };
            loop {
                elem = self.trailer(elem)?;
                let (finished, combined) = finish_operand(&mut pending, elem)?;
                elem = finished;
                if !combined && matches!(self.peek()?, Token::Plus | Token::Minus) {
                    let (at, op) = self.next()?;
                    pending.left = Some((at, elem, matches!(op, Token::Minus)));
                    break;
                }
                match self.deliver(elem)? {
                    Step::NextItem => break,
                    Step::Closed(value) => {
                        elem = value;
                        pending = match self.frames.pop() {
                            Some((_, outer)) => outer,
                            None => return Err(error(0, "internal error")),
                        };
                    }
                    Step::Done(value) => return Ok(value),
                }
            }
        }
    }

    /// Reads an optional sign and an atom. An opening bracket pushes a
    /// frame (taking `pending` with it) and returns `None`.
    fn operand(&mut self, pending: &mut Pending) -> Result<Option<Elem>> {
        loop {
            let (at, token) = self.next()?;
            return Ok(Some(match token {
                Token::Plus | Token::Minus => {
                    // `UnaryOp(UnaryOp(...))` never converts.
                    if pending.sign.is_some() {
                        return Err(error(at, "malformed node or string: a sign needs a number"));
                    }
                    pending.sign = Some((at, matches!(token, Token::Minus)));
                    continue;
                }
                Token::Number(v) | Token::Constant(v) => Elem::Constant(v),
                Token::Str(first) => Elem::Constant(self.strings(at, first)?),
                Token::Set => Elem::SetName(at),
                Token::Open(bracket) => {
                    if matches!(self.peek()?, Token::Close) {
                        self.next()?;
                        Elem::Other(match bracket {
                            b'(' => PyValue::Tuple(Vec::new()),
                            b'[' => PyValue::List(Vec::new()),
                            _ => PyValue::Dict(Box::default()),
                        })
                    } else {
                        let frame = match bracket {
                            b'(' => Frame::Paren {
                                items: Vec::new(),
                                comma: false,
                            },
                            b'[' => Frame::List(Vec::new()),
                            _ => Frame::Brace,
                        };
                        self.frames.push((frame, std::mem::take(pending)));
                        return Ok(None);
                    }
                }
                _ => return Err(error(at, "invalid syntax")),
            }));
        }
    }

    /// The one trailer a literal can have: the empty call in `set()`.
    /// Any other trailer is left for [`Self::deliver`] to reject.
    fn trailer(&mut self, elem: Elem) -> Result<Elem> {
        if let Elem::SetName(_) = elem {
            if matches!(self.peek()?, Token::Open(b'(')) {
                self.next()?;
                return match self.next()? {
                    (_, Token::Close) => Ok(Elem::Other(PyValue::Set(Box::default()))),
                    (at, _) => Err(error(at, "malformed node or string: a call with arguments")),
                };
            }
        }
        Ok(elem)
    }

    /// Adjacent string literals, concatenated.
    fn strings(&mut self, at: usize, first: StrLit) -> Result<PyValue> {
        let (mut value, is_bytes) = match first {
            StrLit::Str(s) => (s, false),
            StrLit::Bytes(b) => (b, true),
        };
        while matches!(self.peek()?, Token::Str(_)) {
            if let (_, Token::Str(next)) = self.next()? {
                match (next, is_bytes) {
                    (StrLit::Str(s), false) | (StrLit::Bytes(s), true) => value.extend(s),
                    _ => return Err(error(at, "cannot mix bytes and nonbytes literals")),
                }
            }
        }
        Ok(if is_bytes {
            PyValue::Bytes(value.into_boxed_slice())
        } else {
            PyValue::Str(PyStr::from_wtf(value))
        })
    }

    /// Hands a finished expression to the innermost display and reads what
    /// follows it there: a separator, the closing bracket, or the end.
    fn deliver(&mut self, elem: Elem) -> Result<Step> {
        let (at, token) = self.next()?;
        let bad = || error(at, "invalid syntax");
        let unhashable = |e: super::value::Unhashable| error(at, &e.to_string());
        let is_comma = matches!(token, Token::Comma);
        let separator = is_comma || matches!(token, Token::Close);
        let Some((frame, _)) = self.frames.last_mut() else {
            return Err(error(at, "internal error"));
        };
        match frame {
            Frame::Top { items, comma } => {
                if matches!(token, Token::Newline | Token::End) {
                    let value = if *comma {
                        items.push(elem.value()?);
                        PyValue::Tuple(std::mem::take(items))
                    } else {
                        elem.value()?
                    };
                    self.peeked = Some((at, token));
                    return self.end(value);
                }
                if !is_comma {
                    return Err(bad());
                }
                items.push(elem.value()?);
                *comma = true;
            }
            Frame::Paren { items, comma } => {
                if !separator {
                    return Err(bad());
                }
                if !is_comma && !*comma {
                    // `(x)`: the parentheses vanish.
                    return Ok(Step::Closed(elem));
                }
                items.push(elem.value()?);
                *comma = true;
            }
            Frame::List(items) => {
                if !separator {
                    return Err(bad());
                }
                items.push(elem.value()?);
            }
            Frame::Brace => {
                if matches!(token, Token::Colon) {
                    *frame = Frame::Dict {
                        dict: PyDict::new(),
                        key: Some(elem.value()?),
                    };
                    return Ok(Step::NextItem);
                }
                if !separator {
                    return Err(bad());
                }
                let mut set = PySet::new();
                set.add(elem.value()?).map_err(unhashable)?;
                *frame = Frame::Set(set);
            }
            Frame::Dict { dict, key } => match key.take() {
                // `elem` is a key.
                None => {
                    if !matches!(token, Token::Colon) {
                        return Err(bad());
                    }
                    *key = Some(elem.value()?);
                    return Ok(Step::NextItem);
                }
                // `elem` is the value of `k`.
                Some(k) => {
                    if !separator {
                        return Err(bad());
                    }
                    dict.insert(k, elem.value()?).map_err(unhashable)?;
                }
            },
            Frame::Set(set) => {
                if !separator {
                    return Err(bad());
                }
                set.add(elem.value()?).map_err(unhashable)?;
            }
        }
        if is_comma {
            // A comma may end the display: `[1,]`, `(1,)`, `{1: 2,}`, `1,`.
            let top = matches!(self.frames.last(), Some((Frame::Top { .. }, _)));
            let ends = match self.peek()? {
                Token::Newline | Token::End => top,
                Token::Close => !top,
                _ => false,
            };
            if !ends {
                return Ok(Step::NextItem);
            }
            if !top {
                self.next()?;
            }
        }
        let (value, top) = match self.frames.last_mut() {
            Some((Frame::Top { items, .. }, _)) => (PyValue::Tuple(std::mem::take(items)), true),
            Some((Frame::Paren { items, .. }, _)) => (PyValue::Tuple(std::mem::take(items)), false),
            Some((Frame::List(items), _)) => (PyValue::List(std::mem::take(items)), false),
            Some((Frame::Dict { dict, .. }, _)) => {
                (PyValue::Dict(Box::new(std::mem::take(dict))), false)
            }
            Some((Frame::Set(set), _)) => (PyValue::Set(Box::new(std::mem::take(set))), false),
            Some((Frame::Brace, _)) | None => return Err(error(at, "internal error")),
        };
        if top {
            return self.end(value);
        }
        Ok(Step::Closed(Elem::Other(value)))
    }

    /// After the top-level expression: `NEWLINE* ENDMARKER`.
    fn end(&mut self, value: PyValue) -> Result<Step> {
        loop {
            match self.next()? {
                (_, Token::Newline) => {}
                (_, Token::End) => return Ok(Step::Done(value)),
                (at, _) => return Err(error(at, "invalid syntax")),
            }
        }
    }
}

/// Applies the pending sign, then the pending `BinOp`, to a finished
/// primary. Also tells whether a `BinOp` was completed.
fn finish_operand(pending: &mut Pending, mut elem: Elem) -> Result<(Elem, bool)> {
    if let Some((at, negate)) = pending.sign.take() {
        elem = match elem {
            Elem::Constant(v) if is_number(&v) => {
                Elem::Signed(if negate { negate_number(v) } else { v })
            }
            _ => return Err(error(at, "malformed node or string: a sign needs a number")),
        };
    }
    match pending.left.take() {
        None => Ok((elem, false)),
        Some((at, left, subtract)) => complex_binop(left, subtract, elem)
            .map(|e| (e, true))
            .ok_or_else(|| {
                error(
                    at,
                    "malformed node or string: only a real number plus or minus an imaginary one",
                )
            }),
    }
}

/// `-x` for an `int`, `float` or `complex`.
fn negate_number(value: PyValue) -> PyValue {
    match value {
        PyValue::Int(i) => PyValue::Int(i.neg()),
        PyValue::Float(f) => PyValue::Float(-f),
        PyValue::Complex { re, im } => PyValue::Complex { re: -re, im: -im },
        other => other,
    }
}

/// The one `BinOp` `literal_eval` accepts: a (signed) `int` or `float`
/// constant plus or minus a `complex` constant. `None` where Python raises.
fn complex_binop(left: Elem, subtract: bool, right: Elem) -> Option<Elem> {
    let left = match left {
        Elem::Constant(v) | Elem::Signed(v) => v,
        Elem::Other(_) | Elem::SetName(_) => return None,
    };
    let (right_re, right_im) = match right {
        Elem::Constant(PyValue::Complex { re, im }) => (re, im),
        _ => return None,
    };
    // `int + complex` converts the int with `float()` (OverflowError when
    // it does not fit), then adds componentwise with a zero imaginary part.
    let left = match left {
        PyValue::Int(i) => i.to_f64()?,
        PyValue::Float(f) => f,
        _ => return None,
    };
    let (re, im) = if subtract {
        (left - right_re, 0.0 - right_im)
    } else {
        (left + right_re, 0.0 + right_im)
    };
    Some(Elem::Other(PyValue::Complex { re, im }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::{py_eq, repr, PyInt};

    fn eval(text: &str) -> PyValue {
        match literal_eval(text.as_bytes()) {
            Ok(v) => v,
            Err(e) => panic!("{text:?} failed: {e}"),
        }
    }

    fn fails(text: &str) -> bool {
        literal_eval(text.as_bytes()).is_err()
    }

    fn repr_of(text: &str) -> String {
        repr(&eval(text))
    }

    fn complex_bits(text: &str) -> (u64, u64) {
        match eval(text) {
            PyValue::Complex { re, im } => (re.to_bits(), im.to_bits()),
            other => panic!("{text:?} gave {other:?}"),
        }
    }

    #[test]
    fn constants() {
        assert_eq!(repr_of("1"), "1");
        assert_eq!(repr_of("  \t-12"), "-12");
        assert_eq!(repr_of("1.5"), "1.5");
        assert_eq!(repr_of("True"), "True");
        assert_eq!(repr_of("None"), "None");
        assert_eq!(repr_of("..."), "Ellipsis");
        assert_eq!(repr_of("'a' \"b\""), "'ab'");
        assert_eq!(repr_of("b'a' B'b'"), "b'ab'");
        assert_eq!(repr_of("1e400"), "inf");
        assert_eq!(repr_of("-1e400"), "-inf");
        assert_eq!(repr_of("0x_FF"), "255");
        assert_eq!(repr_of("0o17 ,0b1_0"), "(15, 2)");
        assert_eq!(repr_of("1_0.5e1_0"), "105000000000.0");
        assert_eq!(repr_of("00"), "0");
        assert_eq!(repr_of("0_0"), "0");
        assert_eq!(repr_of("01.5"), "1.5");
        assert_eq!(repr_of("1."), "1.0");
        assert_eq!(repr_of(".5"), "0.5");
        assert_eq!(repr_of("2J"), "2j");
        let big = eval("123456789012345678901234567890");
        assert!(matches!(big, PyValue::Int(PyInt::Big(_))));
    }

    #[test]
    fn number_errors() {
        for text in [
            "01",
            "0_",
            "1__0",
            "1_",
            "0x",
            "0x_",
            "0b2",
            "0o8",
            "1e",
            "1e+",
            "1a",
            "1_000j_",
            "0x1j",
            "1jj",
            "1.e",
            "1é",
            "1if 1 else 2",
        ] {
            assert!(fails(text), "{text:?}");
        }
        let digits = "1".repeat(4300);
        assert!(literal_eval(digits.as_bytes()).is_ok());
        assert!(fails(&format!("{digits}1")));
        assert!(literal_eval(format!("{digits}.0").as_bytes()).is_ok());
        assert!(literal_eval("0".repeat(5000).as_bytes()).is_ok());
        assert!(literal_eval(format!("0x{}", "f".repeat(5000)).as_bytes()).is_ok());
    }

    #[test]
    fn signs_and_complex() {
        assert_eq!(repr_of("-(1)"), "-1");
        assert_eq!(repr_of("+1.5"), "1.5");
        assert_eq!(repr_of("1+2j"), "(1+2j)");
        assert_eq!(repr_of("-1-2j"), "(-1-2j)");
        assert_eq!(repr_of("(-1)+2j"), "(-1+2j)");
        assert_eq!(
            complex_bits("-1j"),
            ((-0.0f64).to_bits(), (-1.0f64).to_bits())
        );
        assert_eq!(
            complex_bits("-0.0+1j"),
            (0.0f64.to_bits(), 1.0f64.to_bits())
        );
        assert_eq!(
            complex_bits("-0.0-0j"),
            ((-0.0f64).to_bits(), 0.0f64.to_bits())
        );
        assert!(matches!(eval("-0.0"), PyValue::Float(f) if f.is_sign_negative()));
        for text in [
            "--1",
            "-True",
            "1+2",
            "1j+1",
            "1+-2j",
            "1+2j+3j",
            "-(1+2j)",
            "(1+2j)+1j",
            "-'a'",
            "-(-1)",
            "- -1",
            "1*2j",
            "~1",
            "-[1]",
            "True+1j",
        ] {
            assert!(fails(text), "{text:?}");
        }
        let huge = format!("1{}+1j", "0".repeat(400));
        assert!(fails(&huge));
    }

    #[test]
    fn containers() {
        assert_eq!(repr_of("1, 2"), "(1, 2)");
        assert_eq!(repr_of("1,"), "(1,)");
        assert_eq!(repr_of("()"), "()");
        assert_eq!(repr_of("[1, (2,), {3: [4]},]"), "[1, (2,), {3: [4]}]");
        assert_eq!(repr_of("{1: 'a', True: 'b'}"), "{1: 'b'}");
        assert_eq!(repr_of("{1, True, 1.0}"), "{1}");
        assert_eq!(repr_of("set ( )"), "set()");
        assert_eq!(repr_of("ｓｅｔ()"), "set()");
        assert_eq!(repr_of("[(set)(), ((set))( )]"), "[set(), set()]");
        assert_eq!(repr_of("{}"), "{}");
        assert_eq!(repr_of("(\n 1, # one\n 2\n)"), "(1, 2)");
        for text in [
            "",
            "(",
            "[1,,]",
            "(,)",
            "{1: 2, 3}",
            "{**{}}",
            "[*()]",
            "{[1]: 2}",
            "{(1, [2])}",
            "{{}}",
            "set(())",
            "set()()",
            "(set)",
            "set",
            "-set()",
            "frozenset()",
            "x",
            "[1 for x in y]",
            "1 2",
            "(1)(2)",
            "[1][0]",
            "{1:=2}",
            "f'a'",
            "'a' f'b'",
            "b'a' 'b'",
            "1; 2",
            "名前",
        ] {
            assert!(fails(text), "{text:?}");
        }
    }

    #[test]
    fn nesting_limit() {
        let ok = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(literal_eval(ok.as_bytes()).is_ok());
        let too_deep = format!("{}{}", "(".repeat(201), ")".repeat(201));
        assert!(fails(&too_deep));
        // The parser keeps open displays on the heap: the deepest nesting
        // parses on a small stack, even in a debug build.
        let deep = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let dicts = format!("{}1{}", "{1: ".repeat(200), "}".repeat(200));
                let mixed = format!("{}-(1)+2j{}", "[(".repeat(99), ",)]".repeat(99));
                literal_eval(dicts.as_bytes()).is_ok() && literal_eval(mixed.as_bytes()).is_ok()
            })
            .map(|handle| handle.join());
        assert!(matches!(deep, Ok(Ok(true))));
        // Long chains of signs and operators fail at once.
        assert!(fails(&"-".repeat(100_000)));
        assert!(fails(&format!("{}1", "-(".repeat(100_000))));
        assert!(fails(&"1+".repeat(100_000)));
    }

    #[test]
    fn lines_and_indentation() {
        assert_eq!(repr_of("6\n \n"), "6");
        assert_eq!(repr_of("6\n\x0c"), "6");
        assert_eq!(repr_of("# c\n1 # d\n\n"), "1");
        assert_eq!(repr_of("\\\n1"), "1");
        assert_eq!(repr_of("1 + \\\n 2j"), "(1+2j)");
        assert_eq!(repr_of("[1,\r\n2]\r"), "[1, 2]");
        assert_eq!(repr_of("'''a\r\nb'''"), "'a\\nb'");
        for text in [
            "\n {'success': True}  \n",
            "6\n ",
            "6\n\x0c ",
            "\x0c 1",
            "1\\\n",
            "1\n2",
            "\\\n  1",
            "'a\rb'",
            "1\n\\\n",
            "[1\n",
            "1)",
            "(1]",
        ] {
            assert!(fails(text), "{text:?}");
        }
    }

    #[test]
    fn strings() {
        assert_eq!(
            repr_of(r"'\d\x41\101\u00e9\N{LATIN SMALL LETTER A}\n'"),
            r"'\\dAAéa\n'"
        );
        assert_eq!(
            repr_of(r"'\N{line feed}\N{Latin Small Letter B}'"),
            r"'\nb'"
        );
        assert_eq!(
            repr_of(r"'\N{CJK UNIFIED IDEOGRAPH-4E00}\N{HANGUL SYLLABLE GAG}'"),
            "'一각'"
        );
        assert_eq!(repr_of(r"'\777'"), "'ǿ'");
        assert_eq!(repr_of(r"b'\777\x41\d'"), r"b'\xffA\\d'");
        assert_eq!(repr_of(r"r'\n' R'\''"), r#""\\n\\'""#);
        assert_eq!(repr_of(r"rb'\x' Br'\''"), r#"b"\\x\\'""#);
        assert_eq!(repr_of("'\\\nx'"), "'x'");
        assert_eq!(repr_of(r"'\é'"), r"'\\é'");
        assert_eq!(repr_of(r"'\ud800'"), r"'\ud800'");
        for text in [
            r"'\x4'",
            r"'\U00110000'",
            r"'\N{LATINCAPITALLETTERA}'",
            r"'\N{cjk unified ideograph-4E00}'",
            r"'\N{CJK UNIFIED IDEOGRAPH-4e00}'",
            r"'\N{HANGUL SYLLABLE ga}'",
            r"'\N{}'",
            r"'\N'",
            r"'\N{a'",
            r"b'\x4'",
            "b'é'",
            "'a\nb'",
            "'abc",
            "ur'x'",
            "bu'x'",
            "Rf'x'",
        ] {
            assert!(fails(text), "{text:?}");
        }
        // A lone surrogate in the source (generalized UTF-8), even in a comment.
        assert!(literal_eval(b"'\xed\xa0\x80'").is_err());
        assert!(literal_eval(b"1 # \xed\xb0\x80").is_err());
        assert!(literal_eval(b"1\x00").is_err());
        assert!(literal_eval(b"'\xff'").is_err());
        assert!(py_eq(&eval("u'x'"), &PyValue::str("x")));
    }

    #[test]
    fn error_offsets_point_into_the_input() {
        let e = literal_eval(b"  [1,\r\n x]").err();
        assert_eq!(e.map(|e| e.offset), Some(8));
    }
}
