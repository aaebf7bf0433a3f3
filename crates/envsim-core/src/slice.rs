//! Prompt slicing: the part of an environment's code and state that one tool call can use.
//!
//! A small simulator model cannot read a whole environment class and a 100 KB state for every
//! call. [`slice_code`] ([`slice_code_as`] for a declared [`Convention`]) keeps the code one
//! call can run and [`slice_state`] the state it can read or write, by a conservative static analysis of the Python source text (a line and
//! indentation scanner that knows strings, f-strings, comments, brackets, decorators and
//! multi-line signatures; no Python parser). Whenever the analysis is unsure it keeps more:
//! a whole container, or the whole code and state ([`CodeSlice::fallback`]).
//!
//! # The rule
//!
//! Two conventions ([`Convention`], declared by the package manifest; class by default):
//! - **class** (EnvScaler): one class, constructed with the state, whose top-level state keys
//!   become instance attributes; each public method is a tool;
//! - **database**: module-level tool functions `def tool(data, **kwargs)` whose first
//!   parameter is the whole state (one JSON dict, mutated in place).
//!
//! A tool that the declared convention does not define but the other does (a module-level
//! function in a class package) is read in the other ([`CodeSlice::convention`]). The rules
//! below are the class convention's; the database convention's follow them.
//!
//! **Code.** The *environment class* is the module-level class that defines the called tool.
//! Kept, in their original order and text: everything outside that class (imports, constants,
//! module-level functions and classes: small, and the same for every call, so they belong to
//! the cacheable prefix), the class header, every class-level statement that is not a method
//! (docstring, constants), `__init__`, every dunder method, the tool, and every method that a
//! kept method names as `self.<m>`, `cls.<m>` or `<Class>.<m>` (called or not: properties and
//! method references count), transitively. Comments and blank lines between two kept units stay;
//! where methods were dropped, one blank line separates the kept ones.
//!
//! **Fallback to the whole code and state** when: the source does not scan (unterminated string,
//! unbalanced brackets, unexpected indentation), no class or more than one class defines the
//! tool, the class has base classes other than `object`, a method name is defined twice, the
//! class defines `__getattr__`/`__getattribute__`/`__setattr__`/`__delattr__`, or a kept method
//! other than `__init__` uses `self` other than as `self.<name>` (`getattr(self, …)`,
//! `setattr(self, …)`, `vars(self)`, `type(self)`, `helper(self)`, `return self`), uses
//! `self.__<name>__` (`self.__dict__`, `self.__class__`), calls `self.<name>(…)` where `<name>`
//! is not a method of the class, calls `eval`, `exec`, `globals`, `locals`, `super` or
//! `__import__`, or has a first parameter not named `self` (instance methods).
//!
//! **State.** A top-level state key is kept when a kept method other than `__init__` names it
//! as `self.<key>` — in code or inside an f-string's `{…}`, never in comments or plain strings;
//! reads and writes alike (a write-only key must be present so a predicted `modify` stays a
//! `modify`). Every other key is dropped. A kept key is cut down to some of its entries only
//! when all of these hold:
//! - its value is a JSON object;
//! - every occurrence of `self.<key>` in the kept methods (not `__init__`) is one of
//!   `self.<key>[n]` (reads, assignments, `del`), `self.<key>.get(n…`, `self.<key>.pop(n…`,
//!   `self.<key>.setdefault(n…`, `n in self.<key>` or `n not in self.<key>` (with nothing
//!   binding tighter than `in` around it), where `n` is a bare name that *holds a tool
//!   parameter* `p` in that method;
//! - the call passes each such `p` as a string or an integer.
//!
//! A name holds tool parameter `p` in the tool when it is `p` itself and `p` is never rebound
//! in the tool's body (assignment or augmented assignment, `:=`, `for` and comprehension
//! targets, `as`, `del`, `global`, `lambda` or nested `def` parameters, `import`, `case`); in a
//! helper method when it is one of the helper's parameters, the helper never rebinds it, the
//! helper is referenced only as `self.<helper>(…)` calls (no `*`/`**` unpacking or `lambda` in
//! the arguments), and every such call, wherever it is, passes a bare name holding `p` for that
//! parameter (by position or keyword) — so `self._member(member_id)` with
//! `member_id in self.members` inside `_member` still looks up only `args["member_id"]`.
//!
//! It then keeps exactly the entries whose key is one of those argument values (an integer as
//! its decimal text); a key that does not exist is simply not there, which is the truth. The
//! slice is a subtree of the state: paths are unchanged, so a delta predicted on the slice
//! applies to the full state as it is.
//!
//! **Beyond bare parameters** (both conventions). A lookup key may also be `str(n)`, `n.lower()`,
//! `n.upper()`, `n.strip()` (string arguments, computed for ASCII text only) or a one-line
//! f-string such as `f"P-{n}"` ([`AttrUse::Entries`], [`KeyPart`]). A table may be named through
//! a local alias (`orders = self.orders`, optionally `… or {}`), a name bound by that one
//! assignment only, whose uses are read like the table's own; and passed whole as an argument of
//! a method called as `self.<m>(…)` whose parameter is then read like the table. Literal keys
//! (`self.settings["currency"]`) keep the class convention's table whole, as before.
//!
//! **Database convention.** Kept: every module-level statement that is not a function (imports,
//! constants, classes), the tool, and every module-level function a kept one names (not as an
//! attribute `x.f`), or that a kept non-function statement names, transitively. The database is
//! the tool's first parameter; its uses: `data["t"]`, `data.get("t"…)`, `data.setdefault("t"…)`
//! name table `t` (then read like `self.t` above, with literal keys allowed: `data["settings"]
//! ["currency"]` keeps one entry); `"t" in data` needs `t` only to exist (kept as `{}` when
//! nothing else uses it); `db = data` is an alias; `helper(data, …)` (or a table,
//! `helper(users, …)`) is followed into the helper's parameter (recursion included); anything else (`json.dumps(data)`, `data[name]`,
//! iterating it) keeps the whole state. Fallback to the whole code and state when the source does
//! not scan, no module-level function (and no class) defines the tool, a function is defined
//! twice, the tool has no first parameter, a kept function is decorated or calls `eval`, `exec`,
//! `globals`, `locals`, `vars` or `__import__`.
//!
//! **Why a table stays whole.** [`CodeSlice::whole_reasons`] holds, per table used whole, the
//! first use that needs it with its line (`iterated at line 42 (for o in orders.values())`,
//! `passed to sorted() at line 7 (…)`, `looked up with a key the slicer cannot compute at …`,
//! `its size is read (len) at …`, `assigned at …`); [`slice_state`] adds the reasons that
//! depend on the call (an argument that is not a string or an integer, a value that is not an
//! object, a fallback) in [`StateSlice::reasons`], one per table kept whole.
//!
//! # Footprints and the oracle
//!
//! The executor's tracer reports the paths a call read ([`footprint`], [`slice_with_reads`]).
//! [`slice_covers`] checks that a slice holds every read path with the full state's value (or
//! absence) — the oracle check of `envsim bench slice-check`, which also re-executes the call on
//! the slice and compares observation and delta.

use crate::pointer::JsonPointer;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

// ------------------------------------------------------------------------------ public types

pub use crate::convention::Convention;

/// One piece of an entry key computed from the call's arguments ([`AttrUse::Entries`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyPart {
    /// Literal text (`"…"`, or the text of an f-string around its `{…}`).
    Text(String),
    /// The argument of this tool parameter: a string as it is, an integer in decimal (`p`,
    /// `str(p)`, `f"{p}"`).
    Arg(String),
    /// `p.lower()` of a string argument (computed for ASCII text only).
    Lower(String),
    /// `p.upper()` of a string argument (ASCII only).
    Upper(String),
    /// `p.strip()` of a string argument (ASCII only).
    Strip(String),
}

/// How the shown code uses one table (a top-level state key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttrUse {
    /// Some use may need the whole value ([`CodeSlice::whole_reasons`] says which).
    Whole,
    /// Every use is a lookup keyed by one of these parameters of the called tool.
    Keys(BTreeSet<String>),
    /// Every use is a lookup keyed by one of these keys computed from the arguments (used when
    /// some key is not a bare parameter; the parts of one key are concatenated).
    Entries(BTreeSet<Vec<KeyPart>>),
}

/// Why a table (top-level key) of a state slice is kept whole.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TableReason {
    /// The table (`/orders`; the root when the state is not an object).
    pub table: JsonPointer,
    /// Why, with the code line when a use in the code is the cause:
    /// `iterated at line 42 (for o in orders.values())`.
    pub reason: String,
}

/// The code one call can run (see the module docs for the rule).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeSlice {
    /// The code to show.
    pub source: String,
    /// True when `source` is the whole code (a fallback, or every method is reachable).
    pub full: bool,
    /// Why the analysis gave up, when it did; the state is then kept whole as well.
    pub fallback: Option<String>,
    /// The convention the code was read in (the declared one, or the other when only that one
    /// defines the tool).
    pub convention: Convention,
    /// The methods of the environment class shown, in source order, or the module-level
    /// functions shown in the database convention (after a fallback: every one found,
    /// possibly none).
    pub methods: Vec<String>,
    /// Tables the shown code names (instance attributes, not in `__init__`; database keys),
    /// and how it uses them.
    pub attributes: BTreeMap<String, AttrUse>,
    /// For each table used [`AttrUse::Whole`]: the first use that needs it whole, with its
    /// line (`iterated at line 42 (for o in orders.values())`).
    pub whole_reasons: BTreeMap<String, String>,
    /// Database convention: why every table is needed whole, when the database itself is used
    /// other than by table (passed to an unknown function, iterated, a table chosen by a
    /// computed key).
    pub database_whole: Option<String>,
}

impl CodeSlice {
    fn whole_code(
        env_code: &str,
        reason: impl Into<String>,
        methods: Vec<String>,
        convention: Convention,
    ) -> CodeSlice {
        CodeSlice {
            source: env_code.to_owned(),
            full: true,
            fallback: Some(reason.into()),
            convention,
            methods,
            attributes: BTreeMap::new(),
            whole_reasons: BTreeMap::new(),
            database_whole: None,
        }
    }
}

/// The state one call can read or write (see the module docs for the rule).
#[derive(Clone, Debug, PartialEq)]
pub struct StateSlice {
    /// The sliced state: a subtree of the full state, same paths.
    pub state: Value,
    /// Values kept whole: top-level keys (`/orders`) and entries of cut-down objects
    /// (`/orders/O1`), sorted.
    pub kept: Vec<JsonPointer>,
    /// Top-level objects cut down to the entries named by the arguments, sorted.
    pub partial: Vec<JsonPointer>,
    /// True when the state is kept entirely (fallback, not an object, or everything used whole).
    pub full: bool,
    /// Why each table kept whole is kept whole, sorted by table.
    pub reasons: Vec<TableReason>,
}

// ------------------------------------------------------------------------------ scanning

/// What a byte of the source is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Code,
    Comment,
    /// A string literal (prefix and quotes included), or the literal text of an f-string.
    Str,
    /// Inside the `{…}` of an f-string: code.
    FExpr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Blank,
    Comment,
    /// Starts a logical line.
    Code,
    /// Continues a logical line (inside brackets or a string, or after a backslash).
    Cont,
}

#[derive(Clone, Copy, Debug)]
struct Line {
    start: usize,
    end: usize,
    next: usize,
    indent: usize,
    kind: Kind,
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c >= 0x80
}

/// For a valid string prefix: whether it makes an f-string. (Raw strings need no special
/// case: a backslash keeps the next quote from closing them too.)
fn string_prefix(prefix: &[u8]) -> Option<bool> {
    let lower: Vec<u8> = prefix.iter().map(u8::to_ascii_lowercase).collect();
    match lower.as_slice() {
        b"r" | b"u" | b"b" | b"br" | b"rb" => Some(false),
        b"f" | b"fr" | b"rf" => Some(true),
        _ => None,
    }
}

/// A scanned source: per-byte classes and bracket depths, and lines.
struct Src<'a> {
    text: &'a str,
    b: &'a [u8],
    class: Vec<Class>,
    /// Bracket depth of each byte (an opening or closing bracket has the outer depth).
    depth: Vec<u32>,
    /// Newlines escaped by a backslash.
    joined: Vec<bool>,
    lines: Vec<Line>,
}

impl<'a> Src<'a> {
    fn scan(text: &'a str) -> Option<Src<'a>> {
        let b = text.as_bytes();
        let n = b.len();
        let mut class = vec![Class::Code; n];
        let mut depth = vec![0u32; n];
        let mut joined = vec![false; n];
        let mut d: u32 = 0;
        let mut i = 0;
        while i < n {
            let c = b[i];
            if c == b'#' {
                while i < n && b[i] != b'\n' {
                    class[i] = Class::Comment;
                    depth[i] = d;
                    i += 1;
                }
                continue;
            }
            if c == b'\'' || c == b'"' {
                i = scan_string(b, i, i, false, d, &mut class, &mut depth)?;
                continue;
            }
            if is_ident_start(c) {
                let start = i;
                while i < n && is_ident(b[i]) {
                    depth[i] = d;
                    i += 1;
                }
                if i < n && (b[i] == b'\'' || b[i] == b'"') {
                    if let Some(f) = string_prefix(&b[start..i]) {
                        i = scan_string(b, start, i, f, d, &mut class, &mut depth)?;
                    }
                }
                continue;
            }
            match c {
                b'(' | b'[' | b'{' => {
                    depth[i] = d;
                    d = d.checked_add(1)?;
                }
                b')' | b']' | b'}' => {
                    d = d.checked_sub(1)?;
                    depth[i] = d;
                }
                b'\\' => {
                    depth[i] = d;
                    let nl = if b.get(i + 1) == Some(&b'\r') {
                        i + 2
                    } else {
                        i + 1
                    };
                    if b.get(nl) == Some(&b'\n') {
                        depth[i + 1..=nl].fill(d);
                        joined[nl] = true;
                        i = nl + 1;
                        continue;
                    }
                }
                _ => depth[i] = d,
            }
            i += 1;
        }
        if d != 0 {
            return None;
        }
        let mut lines = Vec::new();
        let mut start = 0;
        loop {
            let end = b[start..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(n, |p| start + p);
            let next = if end < n { end + 1 } else { n };
            let continued = start > 0
                && (matches!(class[start - 1], Class::Str | Class::FExpr)
                    || depth[start - 1] > 0
                    || joined[start - 1]);
            let mut indent = 0;
            let mut first = None;
            for (k, &c) in b[start..end].iter().enumerate() {
                match c {
                    b' ' => indent += 1,
                    b'\t' => indent = (indent / 8 + 1) * 8,
                    b'\x0c' => indent = 0,
                    b'\r' => {}
                    _ => {
                        first = Some(start + k);
                        break;
                    }
                }
            }
            let kind = if continued {
                Kind::Cont
            } else {
                match first {
                    None => Kind::Blank,
                    Some(k) if b[k] == b'#' => Kind::Comment,
                    Some(_) => Kind::Code,
                }
            };
            lines.push(Line {
                start,
                end,
                next,
                indent,
                kind,
            });
            if end >= n {
                break;
            }
            start = next;
        }
        Some(Src {
            text,
            b,
            class,
            depth,
            joined,
            lines,
        })
    }

    /// Code or f-string expression: bytes that run.
    fn runs(&self, i: usize) -> bool {
        matches!(self.class[i], Class::Code | Class::FExpr)
    }

    /// A line's text after its indentation.
    fn stripped(&self, l: usize) -> &'a str {
        let line = self.lines[l];
        self.text[line.start..line.end].trim_start()
    }

    /// Text of lines `[from, to)`, newlines included.
    fn text_of(&self, from: usize, to: usize) -> &'a str {
        if from >= to {
            return "";
        }
        &self.text[self.lines[from].start..self.lines[to - 1].next]
    }

    /// The statements at `indent` in lines `[from, to)`, each with its nested lines; decorators
    /// belong to the statement they decorate. Trailing blank and comment lines are left out.
    fn items(&self, from: usize, to: usize, indent: usize) -> Option<Vec<Item>> {
        let mut out: Vec<Item> = Vec::new();
        let mut decorating = false;
        for l in from..to {
            let line = self.lines[l];
            match line.kind {
                Kind::Blank | Kind::Comment => continue,
                Kind::Cont => {}
                Kind::Code if line.indent < indent => return None,
                Kind::Code if line.indent > indent => {}
                Kind::Code => {
                    let decorator = self.stripped(l).starts_with('@');
                    match out.last_mut() {
                        Some(item) if decorating => item.head = l,
                        _ => out.push(Item {
                            first: l,
                            head: l,
                            end: l + 1,
                        }),
                    }
                    decorating = decorator;
                }
            }
            out.last_mut()?.end = l + 1;
        }
        Some(out)
    }

    /// First line after the statement that starts at `head` (its continuation lines included).
    fn statement_end(&self, head: usize, to: usize) -> usize {
        let mut l = head + 1;
        while l < to && self.lines[l].kind == Kind::Cont {
            l += 1;
        }
        l
    }

    /// The identifier starting at byte `i`.
    fn ident_at(&self, i: usize) -> &'a str {
        let mut j = i;
        while j < self.b.len() && is_ident(self.b[j]) {
            j += 1;
        }
        &self.text[i..j]
    }

    /// The identifier ending at byte `j` (exclusive), and where it starts.
    fn ident_before(&self, j: usize) -> (usize, &'a str) {
        let mut i = j;
        while i > 0 && is_ident(self.b[i - 1]) {
            i -= 1;
        }
        (i, &self.text[i..j])
    }

    fn skip_space(&self, mut i: usize, end: usize) -> usize {
        while i < end && matches!(self.b[i], b' ' | b'\t') {
            i += 1;
        }
        i
    }

    fn skip_space_back(&self, mut j: usize, start: usize) -> usize {
        while j > start && matches!(self.b[j - 1], b' ' | b'\t' | b'\n' | b'\r') {
            j -= 1;
        }
        j
    }
}

fn scan_string(
    b: &[u8],
    prefix_start: usize,
    quote_at: usize,
    fstring: bool,
    d: u32,
    class: &mut [Class],
    depth: &mut [u32],
) -> Option<usize> {
    let n = b.len();
    let q = b[quote_at];
    let triple = quote_at + 2 < n && b[quote_at + 1] == q && b[quote_at + 2] == q;
    let mut j = quote_at + if triple { 3 } else { 1 };
    let body_start = j;
    let end = loop {
        let c = *b.get(j)?;
        if c == b'\\' {
            // In raw strings too, a backslash keeps the next byte from closing the string.
            j += 2;
            continue;
        }
        if c == q {
            if !triple {
                break j + 1;
            }
            if b.get(j + 1) == Some(&q) && b.get(j + 2) == Some(&q) {
                break j + 3;
            }
        } else if c == b'\n' && !triple {
            return None;
        }
        j += 1;
    };
    for k in prefix_start..end {
        class[k] = Class::Str;
        depth[k] = d;
    }
    if fstring {
        // Mark the `{…}` parts (not `{{`/`}}`) as code.
        let body_end = end - if triple { 3 } else { 1 };
        let mut braces = 0u32;
        let mut k = body_start;
        while k < body_end {
            match b[k] {
                b'{' if braces == 0 && b.get(k + 1) == Some(&b'{') => k += 1,
                b'}' if braces == 0 && b.get(k + 1) == Some(&b'}') => k += 1,
                b'{' => braces += 1,
                b'}' if braces > 0 => {
                    braces -= 1;
                    class[k] = Class::FExpr;
                }
                _ => {}
            }
            if braces > 0 {
                class[k] = Class::FExpr;
            }
            k += 1;
        }
    }
    Some(end)
}

/// One statement with its nested lines, as line indices: `[first, end)`, `head` is the first
/// line after the decorators.
#[derive(Clone, Copy, Debug)]
struct Item {
    first: usize,
    head: usize,
    end: usize,
}

// ------------------------------------------------------------------------------ structure

#[derive(Clone, Debug)]
struct Param {
    name: String,
    /// `*args`, `**kwargs`, or the `*`/`/` markers.
    star: bool,
}

#[derive(Clone, Debug)]
struct Method {
    name: String,
    item: Item,
    decorators: Vec<String>,
    params: Vec<Param>,
    /// Byte range of the body (after the signature's `:`).
    body: (usize, usize),
    /// A module-level function (database convention), not a method.
    module_level: bool,
}

impl Method {
    fn is_static(&self) -> bool {
        self.decorators.iter().any(|d| d == "staticmethod")
    }

    fn is_class_method(&self) -> bool {
        self.decorators.iter().any(|d| d == "classmethod")
    }

    fn is_dunder(&self) -> bool {
        self.name.len() > 4 && self.name.starts_with("__") && self.name.ends_with("__")
    }
}

/// A `self.<name>` in a method body: the byte of `self` and the byte after `<name>`.
#[derive(Clone, Debug)]
struct SelfRef {
    at: usize,
    name: String,
    after: usize,
}

struct Analysis<'a> {
    src: Src<'a>,
    /// The convention the code was read in.
    convention: Convention,
    /// The environment class (empty in the database convention).
    class_name: String,
    /// Flat units in source order: `(first line, end line, method index)`.
    units: Vec<(usize, usize, Option<usize>)>,
    /// The class's methods, or the module-level functions in the database convention.
    methods: Vec<Method>,
}

fn analyse<'a>(env_code: &'a str, tool: &str) -> Result<Analysis<'a>, String> {
    let src = Src::scan(env_code).ok_or("the source does not scan (string or brackets)")?;
    let nlines = src.lines.len();
    let top = src
        .items(0, nlines, 0)
        .ok_or("unexpected indentation at module level")?;
    let mut found: Vec<(Item, String, usize, Vec<Method>)> = Vec::new();
    for item in &top {
        let head = src.stripped(item.head);
        let Some(rest) = head.strip_prefix("class ").map(str::trim_start) else {
            continue;
        };
        let name = src.ident_at(src.lines[item.head].end - rest.len());
        let header_end = src.statement_end(item.head, item.end);
        let methods = class_methods(&src, header_end, item.end)
            .ok_or_else(|| format!("cannot read the body of class {name}"))?;
        if methods.iter().any(|m| m.name == tool) {
            found.push((*item, name.to_owned(), header_end, methods));
        }
    }
    let (class_item, class_name, header_end, methods) = match found.len() {
        0 => return Err(format!("{NOT_DEFINED_CLASS}{tool}")),
        1 => found.pop().ok_or("unreachable")?,
        _ => return Err(format!("several classes define {tool}")),
    };
    if class_name.is_empty() {
        // Not Python (`class ?:`); references to the class could not be found either.
        return Err(format!("the class that defines {tool} has no name"));
    }
    // Base classes.
    let header = &env_code[src.lines[class_item.head].start..src.lines[header_end - 1].end];
    if let (Some(open), Some(close)) = (header.find('('), header.rfind(')')) {
        let bases = header.get(open + 1..close).unwrap_or("").trim();
        if !bases.is_empty() && bases != "object" {
            return Err(format!("class {class_name} has base classes ({bases})"));
        }
    }
    let mut seen = BTreeSet::new();
    for m in &methods {
        if !seen.insert(m.name.as_str()) {
            return Err(format!("method {} is defined twice", m.name));
        }
        if matches!(
            m.name.as_str(),
            "__getattr__" | "__getattribute__" | "__setattr__" | "__delattr__"
        ) {
            return Err(format!("class {class_name} defines {}", m.name));
        }
    }
    // Flat units: module items, the class header, the class body items.
    let mut units = Vec::new();
    for item in &top {
        if item.first == class_item.first {
            units.push((class_item.first, header_end, None));
            let body_indent = first_code_indent(&src, header_end, class_item.end);
            if let Some(indent) = body_indent {
                let body = src
                    .items(header_end, class_item.end, indent)
                    .ok_or("unexpected indentation in the class body")?;
                for b in body {
                    let method = methods.iter().position(|m| m.item.first == b.first);
                    units.push((b.first, b.end, method));
                }
            }
        } else {
            units.push((item.first, item.end, None));
        }
    }
    Ok(Analysis {
        src,
        convention: Convention::Class,
        class_name,
        units,
        methods,
    })
}

/// Reads the code in the database convention: the tool is a module-level function whose first
/// parameter is the database.
fn analyse_database<'a>(env_code: &'a str, tool: &str) -> Result<Analysis<'a>, String> {
    let src = Src::scan(env_code).ok_or("the source does not scan (string or brackets)")?;
    let nlines = src.lines.len();
    let top = src
        .items(0, nlines, 0)
        .ok_or("unexpected indentation at module level")?;
    let mut functions =
        class_methods(&src, 0, nlines).ok_or("cannot read the module-level functions")?;
    if !functions.iter().any(|f| f.name == tool) {
        return Err(format!("{NOT_DEFINED_FUNCTION}{tool}"));
    }
    let mut seen = BTreeSet::new();
    for f in &mut functions {
        f.module_level = true;
        if !seen.insert(f.name.clone()) {
            return Err(format!("function {} is defined twice", f.name));
        }
    }
    let database = functions
        .iter()
        .find(|f| f.name == tool)
        .and_then(|f| f.params.first())
        .filter(|p| !p.star && !p.name.is_empty());
    if database.is_none() {
        return Err(format!("{tool} has no database parameter"));
    }
    let units = top
        .iter()
        .map(|item| {
            let function = functions.iter().position(|f| f.item.first == item.first);
            (item.first, item.end, function)
        })
        .collect();
    Ok(Analysis {
        src,
        convention: Convention::Database,
        class_name: String::new(),
        units,
        methods: functions,
    })
}

const NOT_DEFINED_CLASS: &str = "no class defines ";
const NOT_DEFINED_FUNCTION: &str = "no module-level function defines ";

/// Reads the code in `convention`, or in the other one when the tool is not defined the
/// declared way but is the other way (a module-level function in a class package is read as
/// the database convention, and the reverse).
fn analyse_as<'a>(
    env_code: &'a str,
    tool: &str,
    convention: Convention,
) -> Result<Analysis<'a>, String> {
    type Reader = for<'x> fn(&'x str, &str) -> Result<Analysis<'x>, String>;
    let (first, second): (Reader, Reader) = match convention {
        Convention::Class => (analyse, analyse_database),
        Convention::Database => (analyse_database, analyse),
    };
    let undefined = |e: &str| {
        e.strip_prefix(NOT_DEFINED_CLASS)
            .or_else(|| e.strip_prefix(NOT_DEFINED_FUNCTION))
            == Some(tool)
    };
    match first(env_code, tool) {
        Err(e) if undefined(&e) => match second(env_code, tool) {
            Err(other) if undefined(&other) => Err(e),
            result => result,
        },
        result => result,
    }
}

fn first_code_indent(src: &Src<'_>, from: usize, to: usize) -> Option<usize> {
    (from..to)
        .find(|&l| src.lines[l].kind == Kind::Code)
        .map(|l| src.lines[l].indent)
}

/// The methods in a class body (lines `[from, to)`); `None` when the body does not parse.
fn class_methods(src: &Src<'_>, from: usize, to: usize) -> Option<Vec<Method>> {
    let Some(indent) = first_code_indent(src, from, to) else {
        return Some(Vec::new());
    };
    let mut methods = Vec::new();
    for item in src.items(from, to, indent)? {
        let head = src.stripped(item.head);
        let rest = head
            .strip_prefix("def ")
            .or_else(|| head.strip_prefix("async def ").map(str::trim_start));
        let Some(rest) = rest else { continue };
        let rest = rest.trim_start();
        let line = src.lines[item.head];
        let name_at = line.end - rest.len();
        let name = src.ident_at(name_at).to_owned();
        let decorators = (item.first..item.head)
            .filter(|&l| src.lines[l].kind == Kind::Code)
            .filter_map(|l| src.stripped(l).strip_prefix('@'))
            .map(|d| {
                d.split(|c: char| c == '(' || c == '#' || c.is_whitespace())
                    .next()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect();
        // Signature: `(` … matching `)` … `:` at the same depth.
        let mut open = name_at + name.len();
        while open < src.b.len() && src.b[open] != b'(' {
            if !matches!(src.b[open], b' ' | b'\t') {
                return None;
            }
            open += 1;
        }
        let base = *src.depth.get(open)?;
        let close = (open + 1..src.b.len())
            .find(|&k| src.b[k] == b')' && src.class[k] == Class::Code && src.depth[k] == base)?;
        let colon = (close + 1..src.b.len())
            .find(|&k| src.b[k] == b':' && src.class[k] == Class::Code && src.depth[k] == base)?;
        let params = params(src, open, close, base);
        let body_end = src.lines[item.end - 1].next;
        methods.push(Method {
            name,
            item,
            decorators,
            params,
            body: (colon + 1, body_end),
            module_level: false,
        });
    }
    Some(methods)
}

fn params(src: &Src<'_>, open: usize, close: usize, base: u32) -> Vec<Param> {
    let mut out = Vec::new();
    let mut start = open + 1;
    for k in open + 1..=close {
        let split = k == close
            || (src.b[k] == b',' && src.class[k] == Class::Code && src.depth[k] == base + 1);
        if !split {
            continue;
        }
        let part = src.text[start..k].trim();
        start = k + 1;
        if part.is_empty() {
            continue;
        }
        let star = part.starts_with('*') || part == "/";
        let name_part = part.trim_start_matches('*').trim_start();
        let name: String = name_part
            .bytes()
            .take_while(|&c| is_ident(c))
            .map(char::from)
            .collect();
        out.push(Param { name, star });
    }
    out
}

/// Every `self.<name>` (and bare `self`) in a byte range, outside comments and plain strings.
fn self_refs(src: &Src<'_>, (from, to): (usize, usize)) -> (Vec<SelfRef>, Vec<usize>) {
    name_refs(src, "self", (from, to))
}

/// Every `<base>.<name>` and bare `<base>` in a byte range.
fn name_refs(src: &Src<'_>, base: &str, (from, to): (usize, usize)) -> (Vec<SelfRef>, Vec<usize>) {
    let (mut refs, mut bare) = (Vec::new(), Vec::new());
    if base.is_empty() {
        // An empty name is everywhere; the scan below would not advance.
        return (refs, bare);
    }
    let b = src.b;
    let len = base.len();
    let mut i = from;
    while i + len <= to {
        if !src.runs(i)
            || !b[i..].starts_with(base.as_bytes())
            || (i > 0 && (is_ident(b[i - 1]) || b[i - 1] == b'.'))
            || (i + len < b.len() && is_ident(b[i + len]))
        {
            i += 1;
            continue;
        }
        let dot = i + len;
        if dot + 1 < to && b[dot] == b'.' && is_ident_start(b[dot + 1]) {
            let name = src.ident_at(dot + 1);
            refs.push(SelfRef {
                at: i,
                name: name.to_owned(),
                after: dot + 1 + name.len(),
            });
            i = dot + 1 + name.len();
        } else {
            bare.push(i);
            i = dot;
        }
    }
    (refs, bare)
}

/// Identifiers in a byte range (code only), with their byte offsets.
fn idents_in<'a>(src: &Src<'a>, (from, to): (usize, usize)) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    let mut i = from;
    while i < to {
        if src.runs(i) && is_ident_start(src.b[i]) && (i == 0 || !is_ident(src.b[i - 1])) {
            let name = src.ident_at(i);
            out.push((i, name));
            i += name.len().max(1);
        } else {
            i += 1;
        }
    }
    out
}

const FORBIDDEN_CALLS: [&str; 6] = ["eval", "exec", "globals", "locals", "super", "__import__"];

/// Checks one kept method for dynamic access; returns the methods it names.
fn method_refs(a: &Analysis<'_>, m: &Method) -> Result<BTreeSet<String>, String> {
    let src = &a.src;
    let names: BTreeSet<&str> = a.methods.iter().map(|m| m.name.as_str()).collect();
    let instance = !m.is_static() && !m.is_class_method();
    if instance && m.params.first().map(|p| p.name.as_str()) != Some("self") {
        return Err(format!("the first parameter of {} is not self", m.name));
    }
    let (refs, bare) = self_refs(src, m.body);
    if m.name != "__init__" {
        if let Some(&at) = bare.first() {
            return Err(format!(
                "{} uses self without an attribute (byte {at})",
                m.name
            ));
        }
        for r in &refs {
            if r.name.len() > 4 && r.name.starts_with("__") && r.name.ends_with("__") {
                return Err(format!("{} uses self.{}", m.name, r.name));
            }
            let called = src.b.get(r.after) == Some(&b'(');
            if called && !names.contains(r.name.as_str()) {
                return Err(format!(
                    "{} calls self.{}, which is not a method of the class",
                    m.name, r.name
                ));
            }
        }
        for (at, name) in idents_in(src, m.body) {
            if FORBIDDEN_CALLS.contains(&name) {
                let after = src.skip_space(at + name.len(), m.body.1);
                if src.b.get(after) == Some(&b'(') {
                    return Err(format!("{} calls {name}()", m.name));
                }
            }
        }
    }
    let mut out: BTreeSet<String> = refs
        .into_iter()
        .filter(|r| names.contains(r.name.as_str()))
        .map(|r| r.name)
        .collect();
    let mut bases = vec![a.class_name.as_str()];
    if m.is_class_method() {
        bases.push("cls");
    }
    for base in bases {
        let (refs, _) = name_refs(src, base, m.body);
        out.extend(
            refs.into_iter()
                .filter(|r| names.contains(r.name.as_str()))
                .map(|r| r.name),
        );
    }
    Ok(out)
}

// ------------------------------------------------------------------------------ code slice

/// The code one call of `tool` can run: [`slice_code_as`] with the default convention,
/// [`Convention::Class`] (a tool that only a module-level function defines is read in the
/// database convention). Never fails: when unsure it returns the whole code with
/// [`CodeSlice::fallback`] set.
pub fn slice_code(env_code: &str, tool: &str) -> CodeSlice {
    slice_code_as(env_code, tool, Convention::Class)
}

/// The code one call of `tool` can run, for an environment written in `convention` (the
/// package manifest's): see the module docs for the rule. A tool the declared convention does
/// not define but the other one does is read in the other ([`CodeSlice::convention`]). Never
/// fails: when unsure it returns the whole code with [`CodeSlice::fallback`] set.
pub fn slice_code_as(env_code: &str, tool: &str, convention: Convention) -> CodeSlice {
    let a = match analyse_as(env_code, tool, convention) {
        Ok(a) => a,
        Err(reason) => return CodeSlice::whole_code(env_code, reason, Vec::new(), convention),
    };
    let all_methods = || a.methods.iter().map(|m| m.name.clone()).collect::<Vec<_>>();
    let reachable = match a.convention {
        Convention::Class => reachable_methods(&a, tool),
        Convention::Database => reachable_functions(&a, tool),
    };
    let kept = match reachable {
        Ok(kept) => kept,
        Err(reason) => {
            return CodeSlice::whole_code(env_code, reason, all_methods(), a.convention);
        }
    };
    // Table uses.
    let uses = match a.methods.iter().find(|m| m.name == tool) {
        Some(tool_method) => table_uses(&a, tool_method, &kept),
        None => {
            let reason = format!("no method {tool}");
            return CodeSlice::whole_code(env_code, reason, all_methods(), a.convention);
        }
    };
    // Assemble.
    let src = &a.src;
    let is_kept = |unit: &(usize, usize, Option<usize>)| {
        unit.2.is_none_or(|m| kept.contains(&a.methods[m].name))
    };
    let mut out = String::with_capacity(env_code.len());
    let nlines = src.lines.len();
    let first = a.units.first().map_or(nlines, |u| u.0);
    out.push_str(src.text_of(0, first));
    let mut previous: Option<usize> = None; // end line of the previous unit
    let mut previous_kept = true;
    for unit in &a.units {
        if !is_kept(unit) {
            previous_kept = false;
            previous = Some(unit.1);
            continue;
        }
        if let Some(end) = previous {
            if previous_kept {
                out.push_str(src.text_of(end, unit.0));
            } else {
                out.push('\n');
            }
        }
        out.push_str(src.text_of(unit.0, unit.1));
        previous = Some(unit.1);
        previous_kept = true;
    }
    if let Some(end) = previous {
        out.push_str(src.text_of(end, nlines));
    }
    let full = out == env_code;
    CodeSlice {
        source: if full { env_code.to_owned() } else { out },
        full,
        fallback: None,
        convention: a.convention,
        methods: a
            .methods
            .iter()
            .filter(|m| kept.contains(&m.name))
            .map(|m| m.name.clone())
            .collect(),
        attributes: uses.attributes,
        whole_reasons: uses.reasons,
        database_whole: uses.database_whole,
    }
}

/// The methods one call of `tool` can run (class convention): the tool, `__init__`, dunder
/// methods and every method a kept one names, transitively; an error says why the analysis
/// gives up.
fn reachable_methods(a: &Analysis<'_>, tool: &str) -> Result<BTreeSet<String>, String> {
    let mut kept: BTreeSet<String> = a
        .methods
        .iter()
        .filter(|m| m.name == tool || m.name == "__init__" || m.is_dunder())
        .map(|m| m.name.clone())
        .collect();
    let mut work: Vec<String> = kept.iter().cloned().collect();
    while let Some(name) = work.pop() {
        let Some(m) = a.methods.iter().find(|m| m.name == name) else {
            continue;
        };
        for r in method_refs(a, m)? {
            if kept.insert(r.clone()) {
                work.push(r);
            }
        }
    }
    Ok(kept)
}

/// Calls that make the analysis give up in the database convention.
const FORBIDDEN_FUNCTION_CALLS: [&str; 6] =
    ["eval", "exec", "globals", "locals", "vars", "__import__"];

/// The module-level functions one call of `tool` can run (database convention): the tool,
/// every function named by a module-level statement that is not a function (those are kept
/// anyway), and every function a kept one names, transitively (called or not; never as an
/// attribute `x.name`). An error says why the analysis gives up.
fn reachable_functions(a: &Analysis<'_>, tool: &str) -> Result<BTreeSet<String>, String> {
    let src = &a.src;
    let names: BTreeSet<&str> = a.methods.iter().map(|m| m.name.as_str()).collect();
    let named = |range: (usize, usize)| -> Vec<String> {
        idents_in(src, range)
            .into_iter()
            .filter(|&(at, name)| names.contains(name) && (at == 0 || src.b[at - 1] != b'.'))
            .map(|(_, name)| name.to_owned())
            .collect()
    };
    let mut kept = BTreeSet::from([tool.to_owned()]);
    for &(first, end, function) in &a.units {
        if function.is_none() && first < end {
            kept.extend(named((src.lines[first].start, src.lines[end - 1].next)));
        }
    }
    let mut work: Vec<String> = kept.iter().cloned().collect();
    while let Some(name) = work.pop() {
        let Some(f) = a.methods.iter().find(|m| m.name == name) else {
            continue;
        };
        // A decorator may wrap the function and use the database itself.
        if let Some(d) = f.decorators.first() {
            return Err(format!("{} is decorated (@{d})", f.name));
        }
        for (at, called) in idents_in(src, f.body) {
            if FORBIDDEN_FUNCTION_CALLS.contains(&called) && (at == 0 || src.b[at - 1] != b'.') {
                let after = src.skip_space(at + called.len(), f.body.1);
                if src.b.get(after) == Some(&b'(') {
                    return Err(format!("{} calls {called}()", f.name));
                }
            }
        }
        for r in named(f.body) {
            if kept.insert(r.clone()) {
                work.push(r);
            }
        }
    }
    Ok(kept)
}

/// The named parameters of a method, after `self`/`cls`, or of a module-level function
/// (positional order).
fn named_params(m: &Method) -> impl Iterator<Item = (usize, &Param)> {
    let skip = usize::from(!m.is_static() && !m.module_level);
    m.params
        .iter()
        .skip(skip)
        .enumerate()
        .filter(|(_, p)| !p.star && !p.name.is_empty())
}

/// The arguments of the call whose `(` is at `open`, as trimmed texts; `None` when they cannot be
/// mapped to parameters safely (`*`/`**` unpacking, a `lambda`, whose commas would split it).
fn call_args<'a>(src: &Src<'a>, open: usize, limit: usize) -> Option<Vec<&'a str>> {
    if src.b.get(open) != Some(&b'(') {
        return None;
    }
    let base = src.depth[open];
    let close = (open + 1..limit)
        .find(|&k| src.b[k] == b')' && src.class[k] == Class::Code && src.depth[k] == base)?;
    let mut out = Vec::new();
    let mut start = open + 1;
    for k in open + 1..=close {
        let split = k == close
            || (src.b[k] == b',' && src.class[k] == Class::Code && src.depth[k] == base + 1);
        if split {
            out.push(src.text[start..k].trim());
            start = k + 1;
        }
    }
    if out.last() == Some(&"") {
        out.pop();
    }
    let unsafe_piece = |piece: &&str| {
        piece.is_empty()
            || piece.starts_with('*')
            || idents_in(src, (0, 0)).is_empty()
                && piece
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|w| w == "lambda")
    };
    if out.iter().any(unsafe_piece) {
        return None;
    }
    Some(out)
}

/// The argument passed for parameter `name` (positional index `index`) among call arguments.
fn argument_for<'a>(args: &[&'a str], index: usize, name: &str) -> Option<&'a str> {
    let keyword = |piece: &'a str| -> Option<(&'a str, &'a str)> {
        let eq = piece.find('=')?;
        let (key, value) = (piece[..eq].trim(), &piece[eq + 1..]);
        (!value.starts_with('=') && !key.is_empty() && key.bytes().all(is_ident))
            .then_some((key, value.trim()))
    };
    let mut positional = 0;
    let mut found = None;
    for piece in args {
        match keyword(piece) {
            Some((key, value)) if key == name => found = Some(value),
            Some(_) => {}
            None => {
                if positional == index {
                    found = Some(*piece);
                }
                positional += 1;
            }
        }
    }
    found
}

/// Which parameters hold the value of which tool parameter: `(method, parameter) → tool
/// parameter`. The tool's own parameters that are never rebound hold themselves (in the
/// database convention not the first, the database) unless the tool calls itself with another
/// value; a helper's parameter holds tool parameter `p` when the helper is only ever
/// referenced as `self.h(…)` calls (as `h(…)` in the database convention), every call passes a
/// name that holds `p` (a bare name) for it, and the helper never rebinds it. Calls between
/// helpers may be recursive: every call chain starts at the tool.
fn bindings(
    a: &Analysis<'_>,
    tool: &Method,
    kept: &BTreeSet<String>,
) -> BTreeMap<(String, String), String> {
    let src = &a.src;
    // The database parameter is not a tool argument.
    let database = a.convention == Convention::Database;
    let kept_methods: Vec<&Method> = a
        .methods
        .iter()
        .filter(|m| kept.contains(&m.name))
        .collect();
    // Every reference to each method, from each kept method: (caller, byte after the name).
    let mut calls: BTreeMap<&str, Vec<(&str, Option<usize>)>> = BTreeMap::new();
    for m in kept_methods.iter().filter(|_| database) {
        for (at, name) in idents_in(src, m.body) {
            if at > 0 && src.b[at - 1] == b'.' {
                continue;
            }
            if let Some(x) = a.methods.iter().find(|x| x.name == name) {
                calls
                    .entry(x.name.as_str())
                    .or_default()
                    .push((m.name.as_str(), Some(at + name.len())));
            }
        }
    }
    for m in kept_methods.iter().filter(|_| !database) {
        let (refs, _) = self_refs(src, m.body);
        for r in refs {
            calls
                .entry(
                    a.methods
                        .iter()
                        .find(|x| x.name == r.name)
                        .map_or("", |x| x.name.as_str()),
                )
                .or_default()
                .push((m.name.as_str(), Some(r.after)));
        }
        for base in [a.class_name.as_str(), "cls"] {
            let (refs, _) = name_refs(src, base, m.body);
            for r in refs {
                if let Some(x) = a.methods.iter().find(|x| x.name == r.name) {
                    calls
                        .entry(x.name.as_str())
                        .or_default()
                        .push((m.name.as_str(), None));
                }
            }
        }
    }
    // The arguments of every call of each kept method (`None`: some reference is not a call
    // whose arguments can be read).
    type Sites<'x> = Option<Vec<(&'x str, Vec<&'x str>)>>;
    let sites: BTreeMap<&str, Sites> = kept_methods
        .iter()
        .map(|h| {
            let parsed = calls
                .get(h.name.as_str())
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .map(|&(caller, after)| {
                    let caller_end = a.methods.iter().find(|m| m.name == caller)?.body.1;
                    Some((caller, call_args(src, after?, caller_end)?))
                })
                .collect();
            (h.name.as_str(), parsed)
        })
        .collect();
    // A greatest fixed point, so that recursion between helpers keeps what every entry from
    // the tool passes: each candidate starts as "anything" (a helper) or its own name (the
    // tool's parameters: the call's arguments), and every call site narrows it.
    #[derive(Clone, PartialEq)]
    enum Holds {
        Any,
        Param(String),
        Nothing,
    }
    fn meet(a: Holds, b: Holds) -> Holds {
        match (a, b) {
            (Holds::Any, x) | (x, Holds::Any) => x,
            (Holds::Param(p), Holds::Param(q)) if p == q => Holds::Param(p),
            _ => Holds::Nothing,
        }
    }
    let mut holds: BTreeMap<(String, String), Holds> = BTreeMap::new();
    for h in &kept_methods {
        if h.name == "__init__" {
            continue;
        }
        let is_tool = h.name == tool.name;
        for (index, q) in named_params(h) {
            if !is_stable(src, h.body, &q.name, None) || (database && is_tool && index == 0) {
                continue;
            }
            let start = if is_tool {
                Holds::Param(q.name.clone())
            } else {
                Holds::Any
            };
            holds.insert((h.name.clone(), q.name.clone()), start);
        }
    }
    loop {
        let mut changed = false;
        for h in &kept_methods {
            for (index, q) in named_params(h) {
                let key = (h.name.clone(), q.name.clone());
                let Some(old) = holds.get(&key).cloned() else {
                    continue;
                };
                if old == Holds::Nothing {
                    continue;
                }
                let computed = match sites.get(h.name.as_str()) {
                    Some(Some(parsed)) => parsed.iter().fold(Holds::Any, |acc, (caller, args)| {
                        let passed = argument_for(args, index, &q.name)
                            .and_then(|arg| holds.get(&((*caller).to_owned(), arg.to_owned())))
                            .cloned()
                            .unwrap_or(Holds::Nothing);
                        meet(acc, passed)
                    }),
                    _ => Holds::Nothing,
                };
                let new = meet(old.clone(), computed);
                if new != old {
                    holds.insert(key, new);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    holds
        .into_iter()
        .filter_map(|(key, h)| match h {
            Holds::Param(p) => Some((key, p)),
            _ => None,
        })
        .collect()
}

/// What a name or expression in a function holds: the database, or one table of it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Holder {
    Db,
    Table(String),
}

/// How the kept functions use one table, while they are being read.
#[derive(Clone, Debug, Default)]
struct TableUse {
    keys: BTreeSet<Vec<KeyPart>>,
    /// The first use that needs the whole table: (byte, reason).
    whole: Option<(usize, String)>,
}

/// Where a table or database expression is passed as an argument.
enum Passed {
    /// A parameter of a function of the analysed code.
    To(usize, String),
    /// A function the analysis does not follow (its name as written).
    Unknown(String),
}

/// How the kept functions use the state: per table, and the database as a whole.
struct Uses<'s, 'a> {
    a: &'s Analysis<'a>,
    /// (function, name) → the tool parameter the name holds.
    bound: BTreeMap<(String, String), String>,
    tables: BTreeMap<String, TableUse>,
    /// The first use of the database (database convention) that needs all of it.
    db_whole: Option<(usize, String)>,
    /// Names to follow: (function, name, what it holds, byte of the one assignment that binds
    /// it, for a local alias).
    work: Vec<(usize, String, Holder, Option<usize>)>,
    seen: BTreeSet<(usize, String, Holder)>,
}

/// The result of [`table_uses`].
struct TableUses {
    attributes: BTreeMap<String, AttrUse>,
    reasons: BTreeMap<String, String>,
    database_whole: Option<String>,
}

fn earliest(slot: &mut Option<(usize, String)>, at: usize, reason: String) {
    if slot.as_ref().is_none_or(|(first, _)| at < *first) {
        *slot = Some((at, reason));
    }
}

/// How the kept functions (not `__init__`) use each table: `self.<name>` in the class
/// convention, `data["<name>"]` (through aliases and helpers) in the database convention.
fn table_uses(a: &Analysis<'_>, tool: &Method, kept: &BTreeSet<String>) -> TableUses {
    let mut u = Uses {
        a,
        bound: bindings(a, tool, kept),
        tables: BTreeMap::new(),
        db_whole: None,
        work: Vec::new(),
        seen: BTreeSet::new(),
    };
    let src = &a.src;
    match a.convention {
        Convention::Class => {
            let methods: BTreeSet<&str> = a.methods.iter().map(|m| m.name.as_str()).collect();
            for (fi, m) in a.methods.iter().enumerate() {
                if !kept.contains(&m.name) || m.name == "__init__" {
                    continue;
                }
                let (refs, _) = self_refs(src, m.body);
                for r in refs {
                    // Methods named through self are code, not state.
                    if !methods.contains(r.name.as_str()) {
                        u.table(fi, (r.at, r.after), &r.name);
                    }
                }
            }
        }
        Convention::Database => {
            let fi = a.methods.iter().position(|m| m.name == tool.name);
            let db = tool.params.first().map(|p| p.name.clone());
            if let (Some(fi), Some(db)) = (fi, db) {
                if is_stable(src, tool.body, &db, None) {
                    u.follow_name(fi, db, Holder::Db, None);
                } else {
                    let reason = format!(
                        "the database parameter {db} is bound again in {}",
                        tool.name
                    );
                    earliest(&mut u.db_whole, tool.body.0, reason);
                }
            }
        }
    }
    while let Some((fi, name, holder, alias_at)) = u.work.pop() {
        u.uses_of(fi, &name, &holder, alias_at);
    }
    let mut out = TableUses {
        attributes: BTreeMap::new(),
        reasons: BTreeMap::new(),
        database_whole: u.db_whole.map(|(_, r)| r),
    };
    for (table, usage) in u.tables {
        let attr = match usage.whole {
            Some((_, reason)) => {
                out.reasons.insert(table.clone(), reason);
                AttrUse::Whole
            }
            None => {
                let params: Option<BTreeSet<String>> = usage
                    .keys
                    .iter()
                    .map(|k| match k.as_slice() {
                        [KeyPart::Arg(p)] => Some(p.clone()),
                        _ => None,
                    })
                    .collect();
                match params {
                    Some(params) => AttrUse::Keys(params),
                    None => AttrUse::Entries(usage.keys),
                }
            }
        };
        out.attributes.insert(table, attr);
    }
    out
}

impl Uses<'_, '_> {
    fn follow_name(&mut self, fi: usize, name: String, holder: Holder, alias_at: Option<usize>) {
        if self.seen.insert((fi, name.clone(), holder.clone())) {
            self.work.push((fi, name, holder, alias_at));
        }
    }

    fn whole(&mut self, holder: &Holder, at: usize, reason: String) {
        match holder {
            Holder::Db => earliest(&mut self.db_whole, at, reason),
            Holder::Table(t) => {
                earliest(
                    &mut self.tables.entry(t.clone()).or_default().whole,
                    at,
                    reason,
                );
            }
        }
    }

    /// `what at line N (code)`.
    fn at_line(&self, what: &str, at: usize) -> String {
        let src = &self.a.src;
        let l = src
            .lines
            .partition_point(|line| line.start <= at)
            .saturating_sub(1);
        let code = src.stripped(l).trim_end();
        let code: String = if code.chars().count() > 100 {
            code.chars().take(99).chain(['…']).collect()
        } else {
            code.to_owned()
        };
        format!("{what} at line {} ({code})", l + 1)
    }

    /// Every use of `name` in function `fi`.
    fn uses_of(&mut self, fi: usize, name: &str, holder: &Holder, alias_at: Option<usize>) {
        let a = self.a;
        let src = &a.src;
        let body = a.methods[fi].body;
        for (at, ident) in idents_in(src, body) {
            if ident != name
                || (at > 0 && src.b[at - 1] == b'.')
                || Some(at) == alias_at
                || is_keyword_name(src, at, name.len(), body.1)
            {
                continue;
            }
            let span = (at, at + name.len());
            match holder {
                Holder::Db => self.database(fi, span),
                Holder::Table(t) => self.table(fi, span, t),
            }
        }
    }

    /// A use of the database at `span`.
    fn database(&mut self, fi: usize, (s, e): (usize, usize)) {
        let a = self.a;
        let src = &a.src;
        let body = a.methods[fi].body;
        // data["t"], data.get("t"…), data.setdefault("t"…)
        if src.b.get(e) == Some(&b'[') {
            if let Some(close) = matching(src, e, body.1) {
                match str_literal(src.text[e + 1..close].trim()) {
                    Some(t) => self.table(fi, (s, close + 1), &t),
                    None => {
                        let reason =
                            self.at_line("a table chosen by a key the slicer cannot compute", s);
                        earliest(&mut self.db_whole, s, reason);
                    }
                }
                return;
            }
        }
        for method in [".get(", ".setdefault("] {
            if !src.text[e..].starts_with(method) {
                continue;
            }
            let open = e + method.len() - 1;
            let first = call_args(src, open, body.1)
                .and_then(|args| args.first().and_then(|t| str_literal(t)));
            match (first, matching(src, open, body.1)) {
                (Some(t), Some(close)) => self.table(fi, (s, close + 1), &t),
                _ => {
                    let reason =
                        self.at_line("a table chosen by a key the slicer cannot compute", s);
                    earliest(&mut self.db_whole, s, reason);
                }
            }
            return;
        }
        // "t" in data: the table must be there when it is.
        if let Some(t) = membership_operand(src, (s, e), body).and_then(str_literal) {
            self.tables.entry(t).or_default();
            return;
        }
        if !self.follow(fi, (s, e), &Holder::Db) {
            let reason = self.why_whole(fi, (s, e));
            earliest(&mut self.db_whole, s, reason);
        }
    }

    /// A use of table `t` at `span`.
    fn table(&mut self, fi: usize, span: (usize, usize), t: &str) {
        let a = self.a;
        let src = &a.src;
        let body = a.methods[fi].body;
        self.tables.entry(t.to_owned()).or_default();
        if let Some(key) = lookup_operand(src, span, body) {
            match self.key_of(fi, key) {
                Some(k) => {
                    if let Some(usage) = self.tables.get_mut(t) {
                        usage.keys.insert(k);
                    }
                }
                None => {
                    let key = key.trim();
                    let what = if is_name(key) {
                        format!("looked up by {key}, which does not always hold an argument of the call")
                    } else {
                        "looked up with a key the slicer cannot compute".to_owned()
                    };
                    let reason = self.at_line(&what, span.0);
                    self.whole(&Holder::Table(t.to_owned()), span.0, reason);
                }
            }
            return;
        }
        let holder = Holder::Table(t.to_owned());
        if !self.follow(fi, span, &holder) {
            let reason = self.why_whole(fi, span);
            self.whole(&holder, span.0, reason);
        }
    }

    /// Follows the value at `span` into a local alias or a parameter of a function of the
    /// code; false when it goes elsewhere (a reason is recorded when it cannot be followed).
    fn follow(&mut self, fi: usize, span: (usize, usize), holder: &Holder) -> bool {
        let a = self.a;
        let src = &a.src;
        let f = &a.methods[fi];
        if let Some((name, lhs)) = alias_def(src, span, f.body) {
            let param = f.params.iter().any(|p| p.name == name);
            if !param && is_stable(src, f.body, name, Some(lhs)) {
                self.follow_name(fi, name.to_owned(), holder.clone(), Some(lhs));
            } else {
                let what = format!("assigned to {name}, which is bound elsewhere in {}", f.name);
                let reason = self.at_line(&what, span.0);
                self.whole(holder, span.0, reason);
            }
            return true;
        }
        match passed_to(a, span, f.body) {
            Some(Passed::To(gi, param)) => {
                let g = &a.methods[gi];
                if is_stable(src, g.body, &param, None) {
                    self.follow_name(gi, param, holder.clone(), None);
                } else {
                    let what = format!("passed to {}(), which binds {param} again", g.name);
                    let reason = self.at_line(&what, span.0);
                    self.whole(holder, span.0, reason);
                }
                true
            }
            _ => false,
        }
    }

    /// Why the use at `span` needs the whole value.
    fn why_whole(&self, fi: usize, (s, e): (usize, usize)) -> String {
        let a = self.a;
        let src = &a.src;
        let body = a.methods[fi].body;
        let b = src.b;
        if b.get(e) == Some(&b'.') {
            let m = src.ident_at(e + 1);
            if b.get(e + 1 + m.len()) == Some(&b'(') {
                let what = match m {
                    "values" | "items" | "keys" => "iterated".to_owned(),
                    other => format!("its method {other}() is called"),
                };
                return self.at_line(&what, s);
            }
        }
        // `len(X)` inside an f-string, where the scanner does not count brackets.
        if src.text[..s].ends_with("len(") && b.get(e) == Some(&b')') {
            return self.at_line("its size is read (len)", s);
        }
        let j = src.skip_space_back(s, body.0);
        let (i, word) = src.ident_before(j);
        if word == "in" && src.runs(i) {
            let l = src
                .lines
                .partition_point(|line| line.start <= s)
                .saturating_sub(1);
            let before = &src.text[src.lines[l].start..s];
            let what = if before
                .split(|c: char| !is_ident(c as u8))
                .any(|w| w == "for")
            {
                "iterated"
            } else {
                "tested for membership of a key the slicer cannot compute"
            };
            return self.at_line(what, s);
        }
        if let Some(Passed::Unknown(name)) = passed_to(a, (s, e), body) {
            let what = if name == "len" {
                "its size is read (len)".to_owned()
            } else {
                format!("passed to {name}()")
            };
            return self.at_line(&what, s);
        }
        let k = src.skip_space(e, body.1);
        let assigned = match b.get(k) {
            Some(b'=') => b.get(k + 1) != Some(&b'='),
            Some(&c) => {
                b.get(k + 1) == Some(&b'=') && b"+-*/%&|^@<>".contains(&c)
                    || src.text[k..].starts_with("//=")
                    || src.text[k..].starts_with("**=")
                    || src.text[k..].starts_with(">>=")
                    || src.text[k..].starts_with("<<=")
            }
            None => false,
        };
        let what = if assigned {
            "assigned"
        } else {
            match word {
                "del" => "deleted",
                "return" | "yield" => "returned",
                _ => "used whole",
            }
        };
        self.at_line(what, s)
    }

    /// The key a lookup text computes in function `fi`, from the call's arguments.
    fn key_of(&self, fi: usize, text: &str) -> Option<Vec<KeyPart>> {
        let a = self.a;
        let f = &a.methods[fi].name;
        let holds = |name: &str| self.bound.get(&(f.clone(), name.to_owned())).cloned();
        let t = text.trim();
        if is_name(t) {
            return holds(t).map(|p| vec![KeyPart::Arg(p)]);
        }
        if let Some(inner) = t.strip_prefix("str(").and_then(|r| r.strip_suffix(')')) {
            let inner = inner.trim();
            return is_name(inner)
                .then(|| holds(inner))
                .flatten()
                .map(|p| vec![KeyPart::Arg(p)]);
        }
        type Part = fn(String) -> KeyPart;
        let methods: [(&str, Part); 3] = [
            (".lower()", KeyPart::Lower),
            (".upper()", KeyPart::Upper),
            (".strip()", KeyPart::Strip),
        ];
        for (suffix, part) in methods {
            if let Some(name) = t.strip_suffix(suffix) {
                return is_name(name)
                    .then(|| holds(name))
                    .flatten()
                    .map(|p| vec![part(p)]);
            }
        }
        let literals = a.convention == Convention::Database;
        if let Some(s) = str_literal(t) {
            return literals.then(|| vec![KeyPart::Text(s)]);
        }
        let parts = fstring_parts(t)?;
        let mut out = Vec::new();
        for (literal, piece) in parts {
            if literal {
                if !piece.is_empty() {
                    out.push(KeyPart::Text(piece.to_owned()));
                }
            } else {
                out.push(KeyPart::Arg(holds(piece.trim())?));
            }
        }
        (literals || out.iter().any(|p| matches!(p, KeyPart::Arg(_)))).then_some(out)
    }
}

fn is_name(t: &str) -> bool {
    t.bytes().next().is_some_and(is_ident_start)
        && t.bytes().all(is_ident)
        && !matches!(t, "None" | "True" | "False" | "not" | "in" | "lambda")
}

/// The text of a plain one-line string literal (`"…"`, `'…'`, optionally `u`-prefixed) without
/// escapes.
fn str_literal(t: &str) -> Option<String> {
    let t = t.strip_prefix(['u', 'U']).unwrap_or(t);
    let q = t.chars().next().filter(|&c| c == '"' || c == '\'')?;
    let body = t.strip_prefix(q)?.strip_suffix(q)?;
    (t.len() >= 2 && !body.contains(q) && !body.contains('\\') && !body.contains('\n'))
        .then(|| body.to_owned())
}

/// An f-string's pieces: `(true, literal text)` and `(false, expression)`; `None` unless it is
/// a one-line f-string without escapes, doubled braces, conversions or format specs.
fn fstring_parts(t: &str) -> Option<Vec<(bool, &str)>> {
    let t = t.strip_prefix(['f', 'F'])?;
    let q = t.chars().next().filter(|&c| c == '"' || c == '\'')?;
    let body = t.strip_prefix(q)?.strip_suffix(q)?;
    if t.len() < 2 || body.contains(q) || body.contains('\\') || body.contains('\n') {
        return None;
    }
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(open) = rest.find('{') {
        let (literal, after) = rest.split_at(open);
        if literal.contains('}') {
            return None;
        }
        let close = after.find('}')?;
        let expr = &after[1..close];
        if expr.contains(['{', ':', '!', '=']) {
            return None;
        }
        out.push((true, literal));
        out.push((false, expr));
        rest = &after[close + 1..];
    }
    if rest.contains('}') {
        return None;
    }
    out.push((true, rest));
    Some(out)
}

/// The closing bracket of the bracket at `open`, before `limit`. Inside an f-string's `{…}`
/// (where the scanner does not count brackets) the first closing bracket: nested brackets
/// then give a key text that does not compute, which keeps the value whole.
fn matching(src: &Src<'_>, open: usize, limit: usize) -> Option<usize> {
    let base = *src.depth.get(open)?;
    let kind = *src.class.get(open)?;
    (open + 1..limit.min(src.b.len())).find(|&k| {
        matches!(src.b[k], b')' | b']' | b'}') && src.class[k] == kind && src.depth[k] == base
    })
}

/// True when the identifier at `at` names a keyword argument (`f(name=…)`).
fn is_keyword_name(src: &Src<'_>, at: usize, len: usize, limit: usize) -> bool {
    let k = src.skip_space(at + len, limit);
    let eq = src.b.get(k) == Some(&b'=') && src.b.get(k + 1) != Some(&b'=');
    let j = src.skip_space_back(at, 0);
    eq && src.depth[at] > 0 && j > 0 && matches!(src.b[j - 1], b'(' | b',')
}

/// The key text of a lookup of the value at `span`: `X[key]`, `X.get(key…`, `X.pop(key…`,
/// `X.setdefault(key…`, `key in X`, `key not in X` (nothing binding tighter around it).
fn lookup_operand<'a>(
    src: &Src<'a>,
    (s, e): (usize, usize),
    body: (usize, usize),
) -> Option<&'a str> {
    let b = src.b;
    if b.get(e) == Some(&b'[') {
        let close = matching(src, e, body.1)?;
        return Some(&src.text[e + 1..close]);
    }
    if b.get(e) == Some(&b'.') {
        let method = src.ident_at(e + 1);
        if !matches!(method, "get" | "pop" | "setdefault") {
            return None;
        }
        let open = e + 1 + method.len();
        if b.get(open) != Some(&b'(') {
            return None;
        }
        // An empty first argument (or an unpacking) is no key.
        return Some(call_args(src, open, body.1)?.first().copied().unwrap_or(""));
    }
    membership_operand(src, (s, e), body)
}

/// The operand `p` of `p in X` / `p not in X` for the value at `span`, with nothing binding
/// tighter than `in` around it; `p` is a bare name, a string literal or a call on a dotted
/// name (`str(n)`, `n.lower()`).
fn membership_operand<'a>(
    src: &Src<'a>,
    (s, e): (usize, usize),
    (from, to): (usize, usize),
) -> Option<&'a str> {
    let b = src.b;
    let follower_ok = {
        let j = src.skip_space(e, to);
        match b.get(j) {
            _ if j >= to => true,
            None => true,
            Some(b')' | b']' | b'}' | b',' | b':' | b';' | b'\n' | b'\r' | b'#' | b'\\') => true,
            Some(&c) if is_ident_start(c) => {
                matches!(src.ident_at(j), "and" | "or" | "if" | "else" | "for")
            }
            _ => false,
        }
    };
    if !follower_ok {
        return None;
    }
    let j = src.skip_space_back(s, from);
    let (i, word) = src.ident_before(j);
    if word != "in" || !src.runs(i) {
        return None;
    }
    let mut j = src.skip_space_back(i, from);
    let (i, mut word) = src.ident_before(j);
    if word == "not" {
        j = src.skip_space_back(i, from);
        word = src.ident_before(j).1;
    }
    let p_at = if word.is_empty() && j > from && src.class[j - 1] == Class::Str {
        // A string literal operand.
        let mut k = j - 1;
        while k > from && src.class[k - 1] == Class::Str {
            k -= 1;
        }
        k
    } else if word.is_empty() && j > from && b[j - 1] == b')' && src.runs(j - 1) {
        // A call on a (dotted) name: `str(n)`, `n.lower()`.
        let d = src.depth[j - 1];
        let open = (from..j - 1)
            .rev()
            .find(|&k| src.depth[k] == d && b[k] == b'(' && src.runs(k))?;
        let (mut k, name) = src.ident_before(open);
        if name.is_empty() {
            return None;
        }
        while k > from + 1 && b[k - 1] == b'.' {
            let (before, part) = src.ident_before(k - 1);
            if part.is_empty() {
                break;
            }
            k = before;
        }
        k
    } else {
        j - word.len()
    };
    let p = &src.text[p_at..j];
    if p.is_empty() || !(is_ident_start(b[p_at]) || src.class[p_at] == Class::Str) {
        return None;
    }
    if src.class[p_at] != Class::Str && !src.runs(p_at) {
        return None;
    }
    let k = src.skip_space_back(p_at, from);
    let before_ok = k == from
        || match b[k - 1] {
            b'(' | b'[' | b'{' | b',' | b':' | b'=' => true,
            c if is_ident(c) => matches!(
                src.ident_before(k).1,
                "if" | "elif"
                    | "while"
                    | "and"
                    | "or"
                    | "not"
                    | "return"
                    | "assert"
                    | "else"
                    | "yield"
            ),
            _ => false,
        };
    before_ok.then_some(p)
}

/// `name = <span>` (optionally `… or {}`) as a whole statement on its own line: the name and
/// the byte where the statement starts.
fn alias_def<'a>(
    src: &Src<'a>,
    (s, e): (usize, usize),
    (_, to): (usize, usize),
) -> Option<(&'a str, usize)> {
    if src.depth[s] != 0 {
        return None;
    }
    let l = src
        .lines
        .partition_point(|line| line.start <= s)
        .saturating_sub(1);
    let line = src.lines[l];
    if line.kind != Kind::Code {
        return None;
    }
    let first = line.end - src.stripped(l).len();
    if first >= s || !is_ident_start(src.b[first]) || !src.runs(first) {
        return None;
    }
    let name = src.ident_at(first);
    let eq = src.skip_space(first + name.len(), s);
    if src.b.get(eq) != Some(&b'=') || src.b.get(eq + 1) == Some(&b'=') {
        return None;
    }
    if src.skip_space(eq + 1, s) != s || !is_name(name) {
        return None;
    }
    let mut k = src.skip_space(e, to);
    for tail in ["or {}", "or dict()"] {
        if src.text[k.min(src.text.len())..].starts_with(tail) {
            k = src.skip_space(k + tail.len(), to);
            break;
        }
    }
    let ends = k >= to || matches!(src.b.get(k), None | Some(b'\n' | b'\r' | b'#'));
    ends.then_some((name, first))
}

/// Where the value at `span` goes when it is a whole argument of a call.
fn passed_to(a: &Analysis<'_>, (s, e): (usize, usize), body: (usize, usize)) -> Option<Passed> {
    let src = &a.src;
    let b = src.b;
    let d = src.depth[s];
    if d == 0 {
        return None;
    }
    let open = (body.0..s).rev().find(|&k| src.depth[k] < d)?;
    if b[open] != b'(' || src.class[open] != Class::Code {
        return None;
    }
    let (i, name) = src.ident_before(open);
    if name.is_empty() || !is_ident_start(b[i]) {
        return None;
    }
    // The callee as written (dotted names included), for reasons.
    let mut start = i;
    while start > 0 && b[start - 1] == b'.' {
        let (j, part) = src.ident_before(start - 1);
        if part.is_empty() {
            break;
        }
        start = j;
    }
    let written = src.text[start..open].to_owned();
    let unknown = || Some(Passed::Unknown(written.clone()));
    let args = match call_args(src, open, body.1) {
        Some(args) => args,
        None => return unknown(),
    };
    // Which argument the span is: by position or keyword.
    let base = src.text.as_ptr() as usize;
    let mut positional = 0;
    let mut slot: Option<(usize, Option<&str>)> = None;
    for piece in &args {
        let at = piece.as_ptr() as usize - base;
        let keyword = piece
            .find('=')
            .map(|eq| (piece[..eq].trim(), eq))
            .filter(|(k, eq)| is_name(k) && piece.as_bytes().get(eq + 1) != Some(&b'='));
        match keyword {
            Some((k, eq)) => {
                let value = piece[eq + 1..].trim_start();
                let v_at = value.as_ptr() as usize - base;
                if v_at == s && v_at + value.len() == e {
                    slot = Some((0, Some(k)));
                }
            }
            None => {
                if at == s && at + piece.len() == e {
                    slot = Some((positional, None));
                }
                positional += 1;
            }
        }
    }
    let (index, keyword) = match slot {
        Some(slot) => slot,
        None => return unknown(),
    };
    let dotted_self = i > 0 && b[i - 1] == b'.' && src.ident_before(i - 1).1 == "self";
    let callee = match a.convention {
        Convention::Class if dotted_self => a.methods.iter().position(|m| m.name == name),
        Convention::Database if i == 0 || b[i - 1] != b'.' => {
            a.methods.iter().position(|m| m.name == name)
        }
        _ => None,
    };
    let Some(gi) = callee else {
        return unknown();
    };
    let g = &a.methods[gi];
    let param = named_params(g).find(|(k, p)| match keyword {
        Some(kw) => p.name == kw,
        None => *k == index,
    });
    match param {
        Some((_, p)) => Some(Passed::To(gi, p.name.clone())),
        None => unknown(),
    }
}

/// A token of a method body, for the rebinding check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Ident(&'a str),
    Op(&'a str),
    Str,
    End,
}

fn tokens<'a>(src: &Src<'a>, (from, to): (usize, usize)) -> Vec<(Tok<'a>, u32, usize)> {
    const OPS3: [&str; 5] = ["**=", "//=", ">>=", "<<=", "..."];
    const OPS2: [&str; 20] = [
        "==", "!=", "<=", ">=", ":=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "@=", "->",
        "**", "//", "<<", ">>", "<>",
    ];
    let b = src.b;
    let mut out = Vec::new();
    let mut i = from;
    while i < to {
        let c = b[i];
        let d = src.depth[i];
        match src.class[i] {
            Class::Comment => {
                i += 1;
                continue;
            }
            Class::Str | Class::FExpr => {
                while i < to && matches!(src.class[i], Class::Str | Class::FExpr) {
                    i += 1;
                }
                out.push((Tok::Str, d, i));
                continue;
            }
            Class::Code => {}
        }
        if c == b'\n' || c == b';' {
            if d == 0 && !src.joined[i] {
                out.push((Tok::End, 0, i));
            }
            i += 1;
        } else if is_ident(c) {
            let w = src.ident_at(i);
            out.push((Tok::Ident(w), d, i));
            i += w.len().max(1);
        } else if c.is_ascii_whitespace() || c == b'\\' {
            i += 1;
        } else {
            let rest = &src.text[i..to];
            let op = OPS3
                .iter()
                .chain(OPS2.iter())
                .find(|op| rest.starts_with(**op))
                .copied()
                .unwrap_or_else(|| {
                    let len = rest.chars().next().map_or(1, char::len_utf8);
                    &rest[..len]
                });
            out.push((Tok::Op(op), d, i));
            i += op.len();
        }
    }
    out.push((Tok::End, 0, to));
    out
}

const AUGMENTED: [&str; 14] = [
    "+=", "-=", "*=", "/=", "//=", "%=", "**=", ">>=", "<<=", "&=", "|=", "^=", "@=", ":=",
];

/// True when name `p` is never bound in the body, except by the statement that starts at byte
/// `except` (a local alias's one assignment).
fn is_stable(src: &Src<'_>, body: (usize, usize), p: &str, except: Option<usize>) -> bool {
    let toks = tokens(src, body);
    let is_p = |t: &Tok<'_>| *t == Tok::Ident(p);
    // Statement by statement.
    let mut start = 0;
    for end in 0..toks.len() {
        if toks[end].0 != Tok::End {
            continue;
        }
        let stmt = &toks[start..end];
        start = end + 1;
        if stmt.is_empty() || !stmt.iter().any(|(t, _, _)| is_p(t)) || Some(stmt[0].2) == except {
            continue;
        }
        let base = stmt[0].1;
        // An assignment at statement level with p before it, not as an attribute.
        if let Some(eq) = stmt
            .iter()
            .position(|&(t, d, _)| t == Tok::Op("=") && d == base)
        {
            // `p[…] = …` and `p.a = …` change the value, not the name.
            let rebinds = stmt[..eq].iter().enumerate().any(|(k, &(t, d, _))| {
                is_p(&t)
                    && d == base
                    && (k == 0 || stmt[k - 1].0 != Tok::Op("."))
                    && !matches!(stmt.get(k + 1), Some((Tok::Op("[" | "."), _, _)))
            });
            if rebinds {
                return false;
            }
        }
        for (k, &(t, d, _)) in stmt.iter().enumerate() {
            let next = stmt.get(k + 1).map(|x| x.0);
            let prev = k.checked_sub(1).map(|k| stmt[k].0);
            if is_p(&t)
                && prev != Some(Tok::Op("."))
                && matches!(next, Some(Tok::Op(op)) if AUGMENTED.contains(&op))
            {
                return false;
            }
            match t {
                Tok::Ident("as") if next.is_some_and(|n| is_p(&n)) => return false,
                Tok::Ident("for") => {
                    let targets = stmt[k + 1..]
                        .iter()
                        .take_while(|&&(t, dd, _)| !(t == Tok::Ident("in") && dd == d));
                    if targets.clone().any(|(t, _, _)| is_p(t)) {
                        return false;
                    }
                }
                Tok::Ident("lambda") => {
                    let params = stmt[k + 1..]
                        .iter()
                        .take_while(|&&(t, dd, _)| !(t == Tok::Op(":") && dd == d));
                    if params.clone().any(|(t, _, _)| is_p(t)) {
                        return false;
                    }
                }
                // `del k`, `global k` (not `del self.x[k]`).
                Tok::Ident("del" | "global" | "nonlocal")
                    if stmt[k + 1..].iter().enumerate().any(|(j, &(t, dd, _))| {
                        is_p(&t)
                            && dd == d
                            && !matches!(stmt.get(k + 2 + j), Some((Tok::Op("[" | "."), _, _)))
                    }) =>
                {
                    return false
                }
                Tok::Ident("def" | "class" | "import" | "case") => return false,
                _ => {}
            }
        }
    }
    true
}

// ------------------------------------------------------------------------------ state slice

/// The state one call can read or write, given the code slice for its tool and its
/// arguments: see the module docs for the rule. Never fails.
pub fn slice_state(code: &CodeSlice, args: &Map<String, Value>, state: &Value) -> StateSlice {
    let whole = |state: &Value, reason: &str| {
        let tables: Vec<JsonPointer> = state
            .as_object()
            .map(|m| {
                m.keys()
                    .map(|k| JsonPointer::from_tokens([k.as_str()]))
                    .collect()
            })
            .unwrap_or_else(|| vec![JsonPointer::root()]);
        StateSlice {
            state: state.clone(),
            reasons: tables
                .iter()
                .map(|table| TableReason {
                    table: table.clone(),
                    reason: reason.to_owned(),
                })
                .collect(),
            kept: tables,
            partial: Vec::new(),
            full: true,
        }
    };
    let Some(map) = state.as_object() else {
        return whole(state, "the state is not a JSON object");
    };
    if let Some(reason) = &code.fallback {
        return whole(state, &format!("the code slicer fell back: {reason}"));
    }
    if let Some(reason) = &code.database_whole {
        return whole(state, &format!("the database is used whole: {reason}"));
    }
    let mut out = Map::new();
    let (mut kept, mut partial, mut reasons) = (Vec::new(), Vec::new(), Vec::new());
    for (key, value) in map {
        let Some(usage) = code.attributes.get(key) else {
            continue;
        };
        let root = JsonPointer::from_tokens([key.as_str()]);
        let wanted: Result<BTreeSet<String>, String> = match usage {
            AttrUse::Whole => Err(code
                .whole_reasons
                .get(key)
                .cloned()
                .unwrap_or_else(|| "used whole".to_owned())),
            AttrUse::Keys(params) => params
                .iter()
                .map(|p| entry_key(&[KeyPart::Arg(p.clone())], args))
                .collect(),
            AttrUse::Entries(keys) => keys.iter().map(|k| entry_key(k, args)).collect(),
        };
        let cut = match (wanted, value) {
            (Ok(wanted), Value::Object(entries)) => Ok(entries
                .iter()
                .filter(|(k, _)| wanted.contains(*k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Map<String, Value>>()),
            (Ok(_), other) => Err(format!(
                "looked up by key, but the value is {} (only objects are cut)",
                json_kind(other)
            )),
            (Err(reason), _) => Err(reason),
        };
        match cut {
            Ok(cut) => {
                kept.extend(cut.keys().map(|k| root.child(k.as_str())));
                partial.push(root);
                out.insert(key.clone(), Value::Object(cut));
            }
            Err(reason) => {
                reasons.push(TableReason {
                    table: root.clone(),
                    reason,
                });
                kept.push(root);
                out.insert(key.clone(), value.clone());
            }
        }
    }
    kept.sort();
    partial.sort();
    reasons.sort_by(|a, b| a.table.cmp(&b.table));
    let full = partial.is_empty() && out.len() == map.len();
    StateSlice {
        state: Value::Object(out),
        kept,
        partial,
        full,
        reasons,
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The key `parts` compute from the call's arguments, or why they cannot be computed.
fn entry_key(parts: &[KeyPart], args: &Map<String, Value>) -> Result<String, String> {
    let text = |p: &str| match args.get(p) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(n.to_string()),
        Some(_) => Err(format!("the argument {p} is not a string or an integer")),
        None => Err(format!("the argument {p} is not given")),
    };
    let ascii = |p: &str, op: &str| match args.get(p) {
        Some(Value::String(s)) if s.is_ascii() => Ok(s.clone()),
        _ => Err(format!(
            "the argument {p} is not ASCII text ({p}.{op}() is computed for ASCII text only)"
        )),
    };
    let mut out = String::new();
    for part in parts {
        match part {
            KeyPart::Text(t) => out.push_str(t),
            KeyPart::Arg(p) => out.push_str(&text(p)?),
            KeyPart::Lower(p) => out.push_str(&ascii(p, "lower")?.to_ascii_lowercase()),
            KeyPart::Upper(p) => out.push_str(&ascii(p, "upper")?.to_ascii_uppercase()),
            // Python's str.strip() on ASCII text strips these.
            KeyPart::Strip(p) => out.push_str(ascii(p, "strip")?.trim_matches([
                ' ', '\t', '\n', '\r', '\x0b', '\x0c', '\x1c', '\x1d', '\x1e', '\x1f',
            ])),
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------------------ footprints

/// Traced reads, interpreted.
///
/// The executor's tracer records `self.x` itself as the read `/x`, which is indistinguishable
/// from reading all of `x` (`len(self.x)`, iterating it, passing it on). A top-level read `/x`
/// of an object that also has reads below it (`/x/k…`) is therefore taken as the attribute
/// access: `x` must exist and be an object ([`Footprint::containers`]); every other read needs
/// its whole value ([`Footprint::values`]). Iterating such an object's entries still shows up
/// as reads of every entry; what this leaves unseen (only the keys or the length of an object
/// that is also looked up by key) is caught by re-executing the call on the slice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Paths whose value (or absence) the call read.
    pub values: Vec<JsonPointer>,
    /// Top-level objects the call accessed as attributes and looked into.
    pub containers: Vec<JsonPointer>,
}

/// Interprets traced reads against the state they were traced on (see [`Footprint`]).
pub fn footprint(state: &Value, reads: &[JsonPointer]) -> Footprint {
    let mut out = Footprint::default();
    let looked_into: BTreeSet<&str> = reads
        .iter()
        .filter(|r| r.tokens().len() > 1)
        .map(|r| r.tokens()[0].as_str())
        .collect();
    for read in reads {
        let tokens = read.tokens();
        let container = tokens.len() == 1
            && looked_into.contains(tokens[0].as_str())
            && read.get(state).is_some_and(Value::is_object);
        if container {
            out.containers.push(read.clone());
        } else {
            out.values.push(read.clone());
        }
    }
    out.values = crate::pointer::minimal_roots(out.values);
    out.containers.sort();
    out.containers.dedup();
    out
}

/// The smallest subtree of `state` that holds every traced read ([`footprint`]): each value
/// read, with its ancestors as objects holding only what was read (a list is kept whole, as it
/// cannot have holes), and an empty object for each container read. A read of a missing key
/// adds nothing: it stays missing.
pub fn slice_with_reads(state: &Value, reads: &[JsonPointer]) -> Value {
    let fp = footprint(state, reads);
    let mut out = match state {
        Value::Object(_) => Value::Object(Map::new()),
        other => return other.clone(),
    };
    for c in &fp.containers {
        if let Some((_, key)) = c.split_last() {
            if let Value::Object(m) = &mut out {
                m.entry(key.to_owned())
                    .or_insert_with(|| Value::Object(Map::new()));
            }
        }
    }
    for read in &fp.values {
        copy_path(state, &mut out, read.tokens());
    }
    reorder(&mut out, state);
    out
}

/// Puts the keys of every object of `slice` in the order they have in `like`.
fn reorder(slice: &mut Value, like: &Value) {
    if let (Value::Object(map), Value::Object(original)) = (slice, like) {
        let mut taken = std::mem::take(map);
        for (key, value) in original {
            if let Some(mut v) = taken.remove(key) {
                reorder(&mut v, value);
                map.insert(key.clone(), v);
            }
        }
    }
}

/// Copies the value at `tokens` from `from` into `to`, creating object ancestors; stops at a
/// list (copied whole) and at a missing key.
fn copy_path(from: &Value, to: &mut Value, tokens: &[String]) {
    let Some((first, rest)) = tokens.split_first() else {
        *to = from.clone();
        return;
    };
    match (from, &mut *to) {
        (Value::Object(src), Value::Object(dst)) => {
            let Some(child) = src.get(first) else { return };
            if rest.is_empty() {
                dst.insert(first.clone(), child.clone());
                return;
            }
            let slot = dst.entry(first.clone()).or_insert_with(|| match child {
                Value::Object(_) => Value::Object(Map::new()),
                _ => Value::Null,
            });
            match child {
                Value::Object(_) if slot.is_object() => copy_path(child, slot, rest),
                Value::Object(_) => {}
                _ => *slot = child.clone(),
            }
        }
        (Value::Array(_), _) => *to = from.clone(),
        _ => {}
    }
}

/// The oracle check: `Ok` when `slice` holds every traced read of `full` with the same value,
/// or is missing it exactly where `full` is, reads interpreted as in [`footprint`] (a
/// container read needs the object to exist in both, not its whole value). Otherwise the first
/// read path that is not covered.
pub fn slice_covers(full: &Value, slice: &Value, reads: &[JsonPointer]) -> Result<(), JsonPointer> {
    let fp = footprint(full, reads);
    for c in &fp.containers {
        let kind = |v: &Value| c.get(v).map(Value::is_object);
        if kind(full) != kind(slice) {
            return Err(c.clone());
        }
    }
    for p in &fp.values {
        if p.get(full) != p.get(slice) {
            return Err(p.clone());
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------ tests

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn ptrs(paths: &[&str]) -> Vec<JsonPointer> {
        paths
            .iter()
            .map(|p| JsonPointer::parse(p).unwrap())
            .collect()
    }

    const SHOP: &str = r#""""A shop."""

import datetime

TAX = 0.2


def _money(x):
    return round(x, 2)


class Shop:
    """Orders and customers."""

    REASONS = ("damaged", "other")

    def __init__(self, init_config: dict):
        self.orders = {}
        self.customers = {}
        self.settings = {}
        self.log = []

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _fmt(x):
        return f"{x:.2f}"

    def _customer(self, customer_id):
        return self.customers.get(customer_id)

    def _total(self, order):
        return _money(order["total"] * (1 + TAX))

    # ---------------------------------------------------------------- tools
    def get_order(self, order_id: str) -> dict:
        """One order."""
        if order_id not in self.orders:
            return {"success": False, "error": f"Order {order_id} not found"}
        return {"success": True, "data": self.orders[order_id],
                "total": self._fmt(self._total(self.orders[order_id]))}

    def pay(self, order_id: str,
            customer_id: str) -> dict:
        """Pay an order; see self.settings in the docs."""
        # self.log is not touched here
        order = self.orders.get(order_id)
        customer = self._customer(customer_id)
        if order is None or customer is None:
            return {"success": False, "error": "not found"}
        order["status"] = "paid"
        return {"success": True, "message": f"paid {self.settings['currency']}"}

    def count(self) -> dict:
        return {"success": True, "data": len(self.orders)}
"#;

    #[test]
    fn keeps_the_tool_its_helpers_and_the_shared_prefix() {
        let s = slice_code(SHOP, "get_order");
        assert_eq!(s.fallback, None);
        assert!(!s.full);
        assert_eq!(s.methods, vec!["__init__", "_fmt", "_total", "get_order"]);
        let expected = r#""""A shop."""

import datetime

TAX = 0.2


def _money(x):
    return round(x, 2)


class Shop:
    """Orders and customers."""

    REASONS = ("damaged", "other")

    def __init__(self, init_config: dict):
        self.orders = {}
        self.customers = {}
        self.settings = {}
        self.log = []

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _fmt(x):
        return f"{x:.2f}"

    def _total(self, order):
        return _money(order["total"] * (1 + TAX))

    # ---------------------------------------------------------------- tools
    def get_order(self, order_id: str) -> dict:
        """One order."""
        if order_id not in self.orders:
            return {"success": False, "error": f"Order {order_id} not found"}
        return {"success": True, "data": self.orders[order_id],
                "total": self._fmt(self._total(self.orders[order_id]))}
"#;
        assert_eq!(s.source, expected);
        assert_eq!(
            s.attributes,
            BTreeMap::from([(
                "orders".to_owned(),
                AttrUse::Keys(BTreeSet::from(["order_id".to_owned()]))
            )])
        );
    }

    #[test]
    fn multi_line_signatures_comments_and_docstrings() {
        let s = slice_code(SHOP, "pay");
        assert_eq!(s.fallback, None);
        assert_eq!(s.methods, vec!["__init__", "_customer", "pay"]);
        assert!(s.source.contains(
            "    def pay(self, order_id: str,\n            customer_id: str) -> dict:\n"
        ));
        assert!(s.source.contains("    def _customer(self, customer_id):\n        return self.customers.get(customer_id)\n\n    def pay("));
        // `self.settings` in the docstring and `self.log` in the comment are not uses;
        // the one in the f-string is. The helper is called with the tool's `customer_id`.
        assert_eq!(
            s.attributes,
            BTreeMap::from([
                (
                    "customers".to_owned(),
                    AttrUse::Keys(BTreeSet::from(["customer_id".to_owned()]))
                ),
                (
                    "orders".to_owned(),
                    AttrUse::Keys(BTreeSet::from(["order_id".to_owned()]))
                ),
                ("settings".to_owned(), AttrUse::Whole),
            ])
        );
        let state = json!({
            "orders": {"O1": {"status": "new"}, "O2": {"status": "new"}},
            "customers": {"C1": {}, "C2": {}},
            "settings": {"currency": "EUR"},
            "log": [1, 2, 3],
        });
        let sliced = slice_state(
            &s,
            &args(json!({"order_id": "O2", "customer_id": "C1"})),
            &state,
        );
        assert_eq!(
            sliced.state,
            json!({
                "orders": {"O2": {"status": "new"}},
                "customers": {"C1": {}},
                "settings": {"currency": "EUR"},
            })
        );
        assert_eq!(
            sliced.kept,
            ptrs(&["/customers/C1", "/orders/O2", "/settings"])
        );
        assert_eq!(sliced.partial, ptrs(&["/customers", "/orders"]));
        assert!(!sliced.full);
        // A missing order stays missing; a non-string argument keeps the object whole.
        let missing = slice_state(&s, &args(json!({"order_id": "O9"})), &state);
        assert_eq!(missing.state["orders"], json!({}));
        let odd = slice_state(&s, &args(json!({"order_id": ["O1"]})), &state);
        assert_eq!(odd.state["orders"], state["orders"]);
        let number = slice_state(
            &s,
            &args(json!({"order_id": 7})),
            &json!({"orders": {"7": 1, "8": 2}}),
        );
        assert_eq!(number.state, json!({"orders": {"7": 1}}));
    }

    #[test]
    fn iteration_or_len_keeps_the_whole_object() {
        let s = slice_code(SHOP, "count");
        assert_eq!(s.methods, vec!["__init__", "count"]);
        assert_eq!(
            s.attributes,
            BTreeMap::from([("orders".to_owned(), AttrUse::Whole)])
        );
        let state = json!({"orders": {"O1": 1}, "customers": {"C1": 2}});
        let sliced = slice_state(&s, &Map::new(), &state);
        assert_eq!(sliced.state, json!({"orders": {"O1": 1}}));
        assert_eq!(sliced.kept, ptrs(&["/orders"]));
    }

    fn class(body: &str) -> String {
        format!("class E:\n    def __init__(self, init_config):\n        self.x = {{}}\n\n{body}")
    }

    #[test]
    fn dynamic_access_falls_back_to_everything() {
        for body in [
            "    def t(self, k):\n        return getattr(self, k)\n",
            "    def t(self, k):\n        setattr(self, k, 1)\n",
            "    def t(self):\n        return vars(self)\n",
            "    def t(self):\n        return self.__dict__\n",
            "    def t(self):\n        return type(self).__name__\n",
            "    def t(self):\n        return eval('self.x')\n",
            "    def t(this):\n        return this.x\n",
            "    def t(self):\n        return self.hook()\n",
        ] {
            let code = class(body);
            let s = slice_code(&code, "t");
            assert!(s.fallback.is_some() && s.full && s.source == code, "{body}");
            let state = json!({"x": {"a": 1}, "y": 2});
            let sliced = slice_state(&s, &Map::new(), &state);
            assert_eq!(sliced.state, state);
            assert!(sliced.full);
        }
        // Dynamic access in a method the tool does not reach does not matter.
        let code = class("    def t(self):\n        return self.x\n\n    def u(self):\n        return vars(self)\n");
        let s = slice_code(&code, "t");
        assert_eq!(s.fallback, None);
        assert_eq!(s.methods, vec!["__init__", "t"]);
        // setattr in __init__ is the EnvScaler loop: fine.
        let code = "class E:\n    def __init__(self, init_config):\n        for k, v in init_config.items():\n            setattr(self, k, v)\n\n    def t(self):\n        return self.x\n";
        assert_eq!(slice_code(code, "t").fallback, None);
    }

    #[test]
    fn a_class_without_a_name_falls_back_instead_of_hanging() {
        // Found by the `slice_code` fuzz target: the empty class name matched everywhere and
        // the reference scan never advanced (unbounded memory).
        for code in [
            "class ?:\n    def t(self):\n        return 1\n",
            "class :\n    def _h(self):\n        return 1\n\n    def t(self):\n        return self._h()\n",
            "class (object):\n    @classmethod\n    def t(cls):\n        return cls.x\n",
        ] {
            let s = slice_code(code, "t");
            assert!(s.full, "{code}");
            assert_eq!(
                s.fallback.as_deref(),
                Some("the class that defines t has no name")
            );
        }
        let src = Src::scan("x = 1\n").unwrap();
        assert_eq!(name_refs(&src, "", (0, 6)).1, Vec::<usize>::new());
    }

    #[test]
    fn unknown_tools_and_broken_sources_fall_back() {
        assert!(slice_code(SHOP, "nope").fallback.is_some());
        assert!(
            slice_code("class E:\n    def t(self):\n        return 'x\n", "t")
                .fallback
                .is_some()
        );
        assert!(
            slice_code("class E(Base):\n    def t(self):\n        return 1\n", "t")
                .fallback
                .is_some()
        );
        assert!(slice_code(
            "class E:\n    def t(self):\n        return 1\n\n    def t(self):\n        return 2\n",
            "t"
        )
        .fallback
        .is_some());
        assert!(slice_code("", "t").fallback.is_some());
        assert!(
            slice_code("class E:\n    def t(self):\n        return (1\n", "t")
                .fallback
                .is_some()
        );
    }

    #[test]
    fn rebinding_the_key_parameter_keeps_the_object_whole() {
        for body in [
            "        k = k.strip()\n        return self.x[k]\n",
            "        k += '1'\n        return self.x[k]\n",
            "        for k in ['a']:\n            pass\n        return self.x[k]\n",
            "        return [self.x[k] for k in self.x]\n",
            "        k, j = 1, 2\n        return self.x[k]\n",
            "        f = lambda k: self.x[k]\n        return f('a')\n",
            "        with open('f') as k:\n            return self.x[k]\n",
        ] {
            let code = class(&format!("    def t(self, k):\n{body}"));
            let s = slice_code(&code, "t");
            assert_eq!(s.fallback, None, "{body}");
            assert_eq!(s.attributes.get("x"), Some(&AttrUse::Whole), "{body}");
        }
        // Stable: keyword arguments, comparisons, attribute assignment elsewhere.
        let code = class("    def t(self, k):\n        y = dict(k=k)\n        if k == 'a' or k in self.x:\n            self.x[k] = self.x.get(k, 0) + 1\n        del self.x[k]\n        return self.x.pop(k, None)\n");
        let s = slice_code(&code, "t");
        assert_eq!(
            s.attributes.get("x"),
            Some(&AttrUse::Keys(BTreeSet::from(["k".to_owned()])))
        );
    }

    #[test]
    fn helper_parameters_hold_tool_parameters_only_when_every_call_passes_them() {
        let helpers = "    def _get(self, key, strict=True):\n        if key not in self.x:\n            return None\n        return self._deeper(key)\n\n    def _deeper(self, k2):\n        return self.x.get(k2)\n\n";
        let keyed = AttrUse::Keys(BTreeSet::from(["k".to_owned()]));
        for (tool, want) in [
            (
                "    def t(self, k, j):\n        return self._get(k)\n",
                keyed.clone(),
            ),
            (
                "    def t(self, k, j):\n        return self._get(key=k, strict=False)\n",
                keyed.clone(),
            ),
            (
                "    def t(self, k, j):\n        return self._get(k) or self._get(k)\n",
                keyed.clone(),
            ),
            // Another value, another parameter, a rebound one, a non-call reference, unpacking.
            (
                "    def t(self, k, j):\n        return self._get(k) or self._get('a')\n",
                AttrUse::Whole,
            ),
            (
                "    def t(self, k, j):\n        return self._get(k) or self._get(j)\n",
                AttrUse::Whole,
            ),
            (
                "    def t(self, k, j):\n        k = k.upper()\n        return self._get(k)\n",
                AttrUse::Whole,
            ),
            (
                "    def t(self, k, j):\n        f = self._get\n        return f(k)\n",
                AttrUse::Whole,
            ),
            (
                "    def t(self, k, j):\n        return self._get(*[k])\n",
                AttrUse::Whole,
            ),
            // Positions count: here `key` holds `j`.
            (
                "    def t(self, k, j):\n        return self._get(j, k)\n",
                AttrUse::Keys(BTreeSet::from(["j".to_owned()])),
            ),
        ] {
            let code = class(&format!("{helpers}{tool}"));
            let s = slice_code(&code, "t");
            assert_eq!(s.fallback, None, "{tool}");
            assert_eq!(s.attributes.get("x"), Some(&want), "{tool}");
        }
        // A helper that rebinds its parameter.
        let code = class("    def _get(self, key):\n        key = key.strip()\n        return self.x[key]\n\n    def t(self, k):\n        return self._get(k)\n");
        assert_eq!(
            slice_code(&code, "t").attributes.get("x"),
            Some(&AttrUse::Whole)
        );
        // A static helper: no self to skip.
        let code = class("    @staticmethod\n    def _norm(v):\n        return v\n\n    def _get(self, key):\n        return self.x[key]\n\n    def t(self, k):\n        return self._get(k), self._norm(k)\n");
        assert_eq!(slice_code(&code, "t").attributes.get("x"), Some(&keyed));
    }

    #[test]
    fn membership_needs_plain_operands() {
        for (expr, keyed) in [
            ("k in self.x", true),
            ("k not in self.x", true),
            ("(k in self.x)", true),
            ("j + k in self.x", false),
            ("k in self.x + []", false),
            ("k in self.x.values()", false),
            ("k in self.x[k]", true),
            ("self.x", false),
            ("len(self.x)", false),
            ("self.x[k:]", false),
            ("self.x[k][0]", true),
            ("f'{self.x[k]}'", true),
            ("f'{self.x}'", false),
            ("'self.x'", true),
            ("self.x.keys()", false),
        ] {
            let code = class(&format!(
                "    def t(self, k, j):\n        a = self.x.get(k)\n        return {expr}\n"
            ));
            let s = slice_code(&code, "t");
            let want = if keyed {
                AttrUse::Keys(BTreeSet::from(["k".to_owned()]))
            } else {
                AttrUse::Whole
            };
            assert_eq!(s.attributes.get("x"), Some(&want), "{expr}");
        }
    }

    #[test]
    fn decorators_properties_and_class_references_are_followed() {
        let code = "import functools\n\n\nclass E:\n    @property\n    def size(self):\n        return len(self.items)\n\n    @staticmethod\n    def _fmt(x):\n        return str(x)\n\n    @functools.lru_cache(maxsize=None)\n    def unused(self):\n        return self.other\n\n    def __repr__(self):\n        return 'E'\n\n    def t(self):\n        return E._fmt(self.size)\n";
        let s = slice_code(code, "t");
        assert_eq!(s.fallback, None);
        assert_eq!(s.methods, vec!["size", "_fmt", "__repr__", "t"]);
        assert!(s.source.contains("    @property\n    def size(self):"));
        assert!(!s.source.contains("lru_cache"));
        assert_eq!(
            s.attributes,
            BTreeMap::from([("items".to_owned(), AttrUse::Whole)])
        );
    }

    #[test]
    fn everything_reachable_gives_back_the_source() {
        let code = "class E:\n    def __init__(self, c):\n        self.a = {}\n\n    # helper\n    def _h(self):\n        return self.a\n\n    def t(self):\n        return self._h()\n";
        let s = slice_code(code, "t");
        assert!(s.full && s.fallback.is_none());
        assert_eq!(s.source, code);
    }

    #[test]
    fn footprint_slices_and_the_oracle() {
        let state = json!({
            "orders": {"O1": {"s": 1, "t": 2}, "O2": {"s": 3}},
            "items": [{"a": 1}, {"a": 2}],
            "n": 5,
            "unused": {"z": 1},
        });
        // `self.orders[...]["s"]`, `self.items[0]`, `self.n`, a lookup of a missing order.
        let reads = ptrs(&[
            "/orders",
            "/orders/O1",
            "/orders/O1/s",
            "/orders/O9",
            "/items",
            "/items/0/a",
            "/n",
        ]);
        let fp = footprint(&state, &reads);
        assert_eq!(fp.containers, ptrs(&["/orders"]));
        assert_eq!(
            fp.values,
            ptrs(&["/items", "/n", "/orders/O1", "/orders/O9"])
        );
        let slice = slice_with_reads(&state, &reads);
        assert_eq!(
            slice,
            json!({"orders": {"O1": {"s": 1, "t": 2}}, "items": [{"a": 1}, {"a": 2}], "n": 5})
        );
        assert_eq!(slice_covers(&state, &slice, &reads), Ok(()));
        assert_eq!(slice_covers(&state, &state, &reads), Ok(()));
        // Missing a read value, adding a key that is absent, missing the container.
        let bad = json!({"orders": {"O1": {"s": 1}}, "items": [], "n": 5});
        assert_eq!(
            slice_covers(&state, &bad, &reads),
            Err(JsonPointer::parse("/items").unwrap())
        );
        let extra = json!({"orders": {"O1": {"s": 1, "t": 2}, "O9": 0}, "items": [{"a": 1}, {"a": 2}], "n": 5});
        assert_eq!(
            slice_covers(&state, &extra, &reads),
            Err(JsonPointer::parse("/orders/O9").unwrap())
        );
        let no_container = json!({"items": [{"a": 1}, {"a": 2}], "n": 5});
        assert_eq!(
            slice_covers(&state, &no_container, &ptrs(&["/orders", "/orders/O9"])),
            Err(JsonPointer::parse("/orders").unwrap())
        );
        // A top-level read with nothing below it (len, iteration) needs the whole value.
        let len = ptrs(&["/orders"]);
        assert_eq!(
            slice_with_reads(&state, &len),
            json!({"orders": state["orders"]})
        );
        assert!(slice_covers(&state, &json!({"orders": {"O1": {"s": 1, "t": 2}}}), &len).is_err());
    }

    const DB: &str = r#""""A shop over one JSON database."""

import json

CURRENCY = "EUR"


def _user(data, uid):
    return data["users"].get(uid)


def _order(orders, oid):
    return orders[oid]


def get_user(data, user_id):
    user = _user(data, user_id)
    if user is None:
        return "Error: user not found"
    return json.dumps(user)


def get_order(data, order_id):
    if order_id not in data["orders"]:
        return "Error: order not found"
    order = data["orders"][order_id]
    return ", ".join(order["items"])


def cancel_order(data, order_id, reason):
    orders = data.get("orders", {})
    order = _order(orders, order_id)
    order["status"] = "cancelled"
    data["log"].append(reason)
    return "ok"


def list_orders(data, user_id):
    orders = data["orders"]
    mine = [o for o in orders.values() if o["user_id"] == user_id]
    return f"{len(mine)} of {len(data['users'])} users"


def buyer_of(data, order_id):
    order = data["orders"][order_id]
    return data["users"][order["user_id"]]["name"]


def product(data, sku, tag):
    if "products" not in data:
        return "Error: no products"
    p = data["products"][f"P-{sku}"]
    return p["name"] + data["tags"][tag.lower()] + data["settings"]["currency"]


def dump(data):
    return json.dumps(data)


def by_table(data, table, key):
    return data[table][key]
"#;

    fn db_state() -> Value {
        json!({
            "users": {"U1": {"name": "Ann"}, "U2": {"name": "Bo"}},
            "orders": {"O1": {"user_id": "U1", "items": ["a"], "status": "new"}, "O2": {"user_id": "U2", "items": [], "status": "new"}},
            "log": ["x"],
            "products": {"P-7": {"name": "pen"}, "P-8": {"name": "ink"}},
            "tags": {"red": "!", "blue": "?"},
            "settings": {"currency": "EUR", "tax": 0.2},
            "other": {"z": 1},
        })
    }

    fn reason(table: &str, reason: &str) -> TableReason {
        TableReason {
            table: JsonPointer::parse(table).unwrap(),
            reason: reason.to_owned(),
        }
    }

    fn keys(params: &[&str]) -> AttrUse {
        AttrUse::Keys(params.iter().map(|p| (*p).to_owned()).collect())
    }

    const DB_ARGS: &str = r#"{"user_id": "U1", "order_id": "O1", "reason": "r", "sku": 7,
        "tag": "RED", "table": "users", "key": "U1"}"#;

    fn db_slice(tool: &str) -> (CodeSlice, StateSlice) {
        let code = slice_code(DB, tool);
        let call: Value = serde_json::from_str(DB_ARGS).unwrap();
        let state = slice_state(&code, &args(call), &db_state());
        (code, state)
    }

    #[test]
    fn database_lookups_through_helpers_and_aliases_keep_only_the_entries() {
        // data["users"].get(uid) in a helper called with (data, user_id).
        let (code, state) = db_slice("get_user");
        assert_eq!(code.convention, Convention::Database);
        assert_eq!(code.fallback, None);
        assert_eq!(code.methods, vec!["_user", "get_user"]);
        assert_eq!(
            code.attributes,
            BTreeMap::from([("users".to_owned(), keys(&["user_id"]))])
        );
        assert_eq!(state.state, json!({"users": {"U1": {"name": "Ann"}}}));
        assert_eq!(state.kept, ptrs(&["/users/U1"]));
        assert_eq!(state.partial, ptrs(&["/users"]));
        assert_eq!(state.reasons, vec![]);
        assert!(!state.full);
        // `in` with the key, then an entry alias: `order = data["orders"][order_id]`.
        let (code, state) = db_slice("get_order");
        assert_eq!(code.methods, vec!["get_order"]);
        assert_eq!(
            code.source,
            "\"\"\"A shop over one JSON database.\"\"\"\n\nimport json\n\nCURRENCY = \"EUR\"\n\ndef get_order(data, order_id):\n    if order_id not in data[\"orders\"]:\n        return \"Error: order not found\"\n    order = data[\"orders\"][order_id]\n    return \", \".join(order[\"items\"])\n"
        );
        assert_eq!(
            state.state,
            json!({"orders": {"O1": {"user_id": "U1", "items": ["a"], "status": "new"}}})
        );
        // A table alias from data.get("orders", {}) passed to a helper that looks it up; a
        // method called on a table keeps it whole.
        let (code, state) = db_slice("cancel_order");
        assert_eq!(code.methods, vec!["_order", "cancel_order"]);
        assert_eq!(
            code.attributes,
            BTreeMap::from([
                ("log".to_owned(), AttrUse::Whole),
                ("orders".to_owned(), keys(&["order_id"])),
            ])
        );
        let append = "its method append() is called at line 34 (data[\"log\"].append(reason))";
        assert_eq!(code.whole_reasons["log"], append);
        assert_eq!(
            state.state,
            json!({"orders": {"O1": {"user_id": "U1", "items": ["a"], "status": "new"}}, "log": ["x"]})
        );
        assert_eq!(state.reasons, vec![reason("/log", append)]);
    }

    #[test]
    fn database_tables_stay_whole_only_when_the_code_needs_them_whole() {
        // Iteration through an alias, len() inside an f-string.
        let (code, state) = db_slice("list_orders");
        let iterated = "iterated at line 40 (mine = [o for o in orders.values() if o[\"user_id\"] == user_id])";
        let len = "its size is read (len) at line 41 (return f\"{len(mine)} of {len(data['users'])} users\")";
        assert_eq!(
            code.whole_reasons,
            BTreeMap::from([
                ("orders".to_owned(), iterated.to_owned()),
                ("users".to_owned(), len.to_owned()),
            ])
        );
        assert!(!state.full);
        assert_eq!(
            state.reasons,
            vec![reason("/orders", iterated), reason("/users", len)]
        );
        assert_eq!(state.state["orders"], db_state()["orders"]);
        // A key read from another value.
        let (code, state) = db_slice("buyer_of");
        assert_eq!(code.attributes["orders"], keys(&["order_id"]));
        let computed = "looked up with a key the slicer cannot compute at line 46 (return data[\"users\"][order[\"user_id\"]][\"name\"])";
        assert_eq!(state.reasons, vec![reason("/users", computed)]);
        assert_eq!(state.state["users"], db_state()["users"]);
        assert_eq!(state.kept, ptrs(&["/orders/O1", "/users"]));
        // The database itself passed on, or a table chosen by an argument: everything.
        for (tool, why) in [
            ("dump", "passed to json.dumps() at line 57 (return json.dumps(data))"),
            (
                "by_table",
                "a table chosen by a key the slicer cannot compute at line 61 (return data[table][key])",
            ),
        ] {
            let (code, state) = db_slice(tool);
            assert_eq!(code.database_whole.as_deref(), Some(why));
            assert_eq!(state.state, db_state());
            assert!(state.full);
            let expected: Vec<TableReason> = db_state()
                .as_object()
                .unwrap()
                .keys()
                .map(|k| TableReason {
                    table: JsonPointer::from_tokens([k.as_str()]),
                    reason: format!("the database is used whole: {why}"),
                })
                .collect();
            assert_eq!(state.reasons, expected);
        }
    }

    #[test]
    fn database_keys_computed_from_arguments_and_literal_keys() {
        let (code, state) = db_slice("product");
        assert_eq!(
            code.attributes,
            BTreeMap::from([
                (
                    "products".to_owned(),
                    AttrUse::Entries(BTreeSet::from([vec![
                        KeyPart::Text("P-".into()),
                        KeyPart::Arg("sku".into())
                    ]]))
                ),
                (
                    "settings".to_owned(),
                    AttrUse::Entries(BTreeSet::from([vec![KeyPart::Text("currency".into())]]))
                ),
                (
                    "tags".to_owned(),
                    AttrUse::Entries(BTreeSet::from([vec![KeyPart::Lower("tag".into())]]))
                ),
            ])
        );
        // sku 7 is "P-7"; "RED".lower() is "red"; `"products" not in data` needs no more.
        assert_eq!(
            state.state,
            json!({"products": {"P-7": {"name": "pen"}}, "tags": {"red": "!"}, "settings": {"currency": "EUR"}})
        );
        assert_eq!(state.reasons, vec![]);
        // Arguments the key cannot be computed from keep the table whole, saying why.
        let code = slice_code(DB, "product");
        let odd = slice_state(
            &code,
            &args(json!({"sku": true, "tag": "ROUGE\u{e9}"})),
            &db_state(),
        );
        assert_eq!(
            odd.reasons,
            vec![
                reason("/products", "the argument sku is not a string or an integer"),
                reason(
                    "/tags",
                    "the argument tag is not ASCII text (tag.lower() is computed for ASCII text only)"
                ),
            ]
        );
        let missing = slice_state(&code, &Map::new(), &db_state());
        assert_eq!(
            missing.reasons[0],
            reason("/products", "the argument sku is not given")
        );
        // A keyed table whose value is not an object stays whole.
        let listed = slice_state(
            &code,
            &args(json!({"sku": "7", "tag": "x"})),
            &json!({"products": [1], "tags": {}, "settings": {}}),
        );
        assert_eq!(
            listed.reasons,
            vec![reason(
                "/products",
                "looked up by key, but the value is a list (only objects are cut)"
            )]
        );
    }

    #[test]
    fn database_existence_checks_keep_an_empty_table() {
        let code = "def has_users(data):\n    return 'users' in data\n";
        let s = slice_code(code, "has_users");
        assert_eq!(
            s.attributes,
            BTreeMap::from([("users".to_owned(), keys(&[]))])
        );
        let state = slice_state(&s, &Map::new(), &json!({"users": {"U1": 1}, "x": 2}));
        assert_eq!(state.state, json!({"users": {}}));
    }

    #[test]
    fn database_helpers_recursion_aliases_and_rebinding() {
        // Mutual recursion between helpers that pass the database and the key along.
        let code = "def _a(db, k, n):\n    if n:\n        return _b(db, k, n - 1)\n    return db['users'][k]\n\n\ndef _b(d, key, n):\n    return _a(d, key, n)\n\n\ndef t(data, user_id):\n    return _a(data, user_id, 3)\n";
        let s = slice_code(code, "t");
        assert_eq!(s.fallback, None);
        assert_eq!(s.methods, vec!["_a", "_b", "t"]);
        assert_eq!(
            s.attributes,
            BTreeMap::from([("users".to_owned(), keys(&["user_id"]))])
        );
        // A helper called with another key somewhere: the key is not the argument.
        let code = "def _get(data, k):\n    return data['users'][k]\n\n\ndef t(data, user_id):\n    return _get(data, user_id), _get(data, 'admin')\n";
        let s = slice_code(code, "t");
        assert_eq!(s.attributes["users"], AttrUse::Whole);
        assert_eq!(
            s.whole_reasons["users"],
            "looked up by k, which does not always hold an argument of the call at line 2 (return data['users'][k])"
        );
        // Keyword arguments and an alias of the database.
        let code = "def _get(k, data=None):\n    return data['users'][k]\n\n\ndef t(data, user_id):\n    db = data\n    return _get(k=user_id, data=db)\n";
        assert_eq!(
            slice_code(code, "t").attributes["users"],
            keys(&["user_id"])
        );
        // An alias bound twice, a database parameter bound again, a helper that binds its
        // table parameter again.
        let code = "def t(data, user_id):\n    users = data['users']\n    if not users:\n        users = {}\n    return users[user_id]\n";
        let s = slice_code(code, "t");
        assert_eq!(
            s.whole_reasons["users"],
            "assigned to users, which is bound elsewhere in t at line 2 (users = data['users'])"
        );
        let code =
            "def t(data, user_id):\n    data = dict(data)\n    return data['users'][user_id]\n";
        assert_eq!(
            slice_code(code, "t").database_whole.as_deref(),
            Some("the database parameter data is bound again in t")
        );
        let code = "def _h(users, k):\n    users = sorted(users)\n    return users[0]\n\n\ndef t(data, user_id):\n    return _h(data['users'], user_id)\n";
        assert_eq!(
            slice_code(code, "t").whole_reasons["users"],
            "passed to _h(), which binds users again at line 7 (return _h(data['users'], user_id))"
        );
        // `... or {}` keeps the alias; a table alias passed on to an unknown function does not.
        let code = "def t(data, user_id):\n    users = data.get('users') or {}\n    return users.get(user_id)\n";
        assert_eq!(
            slice_code(code, "t").attributes["users"],
            keys(&["user_id"])
        );
        let code = "def t(data):\n    users = data['users']\n    return sorted(users)\n";
        assert_eq!(
            slice_code(code, "t").whole_reasons["users"],
            "passed to sorted() at line 3 (return sorted(users))"
        );
        // Writes: a new entry is an entry; replacing or deleting the table needs it.
        let code = "def t(data, user_id, name):\n    data['users'][user_id] = {'name': name}\n    data['log'] = []\n    del data['old']\n    return 'ok'\n";
        let s = slice_code(code, "t");
        assert_eq!(s.attributes["users"], keys(&["user_id"]));
        assert_eq!(
            s.whole_reasons["log"],
            "assigned at line 3 (data['log'] = [])"
        );
        assert_eq!(
            s.whole_reasons["old"],
            "deleted at line 4 (del data['old'])"
        );
    }

    #[test]
    fn the_declared_convention_decides_when_both_define_the_tool() {
        let code = "class E:\n    def __init__(self, init_config):\n        self.users = {}\n\n    def t(self, k):\n        return self.users[k]\n\n\ndef t(data, k):\n    return data['orders'][k]\n";
        let class = slice_code_as(code, "t", Convention::Class);
        assert_eq!(class.convention, Convention::Class);
        assert_eq!(
            class.attributes,
            BTreeMap::from([("users".to_owned(), keys(&["k"]))])
        );
        let db = slice_code_as(code, "t", Convention::Database);
        assert_eq!(db.convention, Convention::Database);
        assert_eq!(
            db.attributes,
            BTreeMap::from([("orders".to_owned(), keys(&["k"]))])
        );
        // A class package whose tool only a class defines, declared as database: read as class.
        let s = slice_code_as(SHOP, "get_order", Convention::Database);
        assert_eq!(s.convention, Convention::Class);
        assert_eq!(s, slice_code(SHOP, "get_order"));
        // Neither defines it: the declared convention's reason.
        assert_eq!(
            slice_code_as(SHOP, "nope", Convention::Database)
                .fallback
                .as_deref(),
            Some("no module-level function defines nope")
        );
        assert_eq!(
            slice_code(SHOP, "nope").fallback.as_deref(),
            Some("no class defines nope")
        );
        assert_eq!(Convention::parse("database"), Some(Convention::Database));
        assert_eq!(
            Convention::parse(Convention::Class.as_str()),
            Some(Convention::Class)
        );
        assert_eq!(Convention::parse("Class"), None);
        assert_eq!(
            serde_json::from_value::<Convention>(json!("database")).unwrap(),
            Convention::Database
        );
        assert_eq!(Convention::default(), Convention::Class);
    }

    #[test]
    fn database_fallbacks() {
        for (code, why) in [
            ("def t(data):\n    return eval('data')\n", "t calls eval()"),
            (
                "def _h(data):\n    return globals()['x']\n\n\ndef t(data):\n    return _h(data)\n",
                "_h calls globals()",
            ),
            ("def t():\n    return 1\n", "t has no database parameter"),
            (
                "def t(*args):\n    return 1\n",
                "t has no database parameter",
            ),
            (
                "def t(data):\n    return 1\n\n\ndef t(data):\n    return 2\n",
                "function t is defined twice",
            ),
            (
                "import functools\n\n@functools.wraps\ndef t(data):\n    return 1\n",
                "t is decorated (@functools.wraps)",
            ),
            (
                "def t(data):\n    return (1\n",
                "the source does not scan (string or brackets)",
            ),
        ] {
            let s = slice_code_as(code, "t", Convention::Database);
            assert_eq!(s.fallback.as_deref(), Some(why), "{code}");
            assert!(s.full && s.source == code);
            let state = slice_state(&s, &Map::new(), &json!({"a": {"b": 1}}));
            assert_eq!(
                state.reasons,
                vec![reason("/a", &format!("the code slicer fell back: {why}"))]
            );
        }
        // Not an object: the root, whole.
        let s = slice_code(DB, "get_user");
        let state = slice_state(&s, &Map::new(), &json!([1]));
        assert_eq!(
            state.reasons,
            vec![reason("", "the state is not a JSON object")]
        );
    }

    #[test]
    fn class_style_gains_computed_keys_aliases_and_table_helpers() {
        for (body, want) in [
            ("        orders = self.x\n        return orders[k]\n", keys(&["k"])),
            ("        return self.x[str(k)]\n", keys(&["k"])),
            ("        return str(k) in self.x\n", keys(&["k"])),
            ("        return k.upper() not in self.x\n", AttrUse::Entries(BTreeSet::from([vec![KeyPart::Upper("k".into())]]))),
            ("        return len(k) in self.x\n", AttrUse::Whole),
            ("        return self.x.get(k.strip())\n", AttrUse::Entries(BTreeSet::from([vec![KeyPart::Strip("k".into())]]))),
            ("        return self.x[f'O-{k}']\n", AttrUse::Entries(BTreeSet::from([vec![KeyPart::Text("O-".into()), KeyPart::Arg("k".into())]]))),
            ("        return self._h(self.x, k)\n\n    def _h(self, table, key):\n        return table[key]\n", keys(&["k"])),
            // Literal keys stay whole in the class style (unchanged).
            ("        return self.x['a']\n", AttrUse::Whole),
            ("        return self.x[f'O-1']\n", AttrUse::Whole),
        ] {
            let code = class(&format!("    def t(self, k):\n{body}"));
            let s = slice_code(&code, "t");
            assert_eq!(s.fallback, None, "{body}");
            assert_eq!(s.attributes.get("x"), Some(&want), "{body}");
        }
        let code = class("    def t(self, k):\n        orders = self.x\n        return [o for o in orders.values()]\n");
        assert_eq!(
            slice_code(&code, "t").whole_reasons["x"],
            "iterated at line 7 (return [o for o in orders.values()])"
        );
        let s = slice_code(SHOP, "count");
        assert_eq!(
            s.whole_reasons["orders"],
            "its size is read (len) at line 54 (return {\"success\": True, \"data\": len(self.orders)})"
        );
        let state = slice_state(&s, &Map::new(), &json!({"orders": {"O1": 1}}));
        assert_eq!(
            state.reasons,
            vec![reason(
                "/orders",
                "its size is read (len) at line 54 (return {\"success\": True, \"data\": len(self.orders)})"
            )]
        );
    }

    #[test]
    fn adversarial_database_sources_never_panic() {
        for code in [
            "def t(data",
            "def t(data):\n    return data[",
            "def t(data):\n    return data['users'\n",
            "def t(data):\n    return data[]\n",
            "def t(data):\n    return data.get(\n",
            "def t(data):\n    return data.get()\n",
            "def t(data):\n    return data.setdefault('x'\n",
            "def t(data):\n    return f'{data[\"u\"][k]}'\n",
            "def t(data):\n    return f'{data}'\n",
            "def t(data):\n    x = data\n    data = x\n    return x['a']\n",
            "def t(data):\n    a = b = data\n    return a['u']\n",
            "def t(data):\n    a = data['u']\n    b = a\n    a = b\n    return b[1]\n",
            "def t(data, k):\n    return t(data, k) or data['u'][k]\n",
            "def _h(data):\n    return _h(data)\n\n\ndef t(data):\n    return _h(data)\n",
            "def t(data):\n    return _missing(data)\n",
            "def t(data):\n    return (lambda data: data)(data)\n",
            "def t(data):\n    'users' in data\n    in data\n",
            "def t(data):\n    = data['u']\n",
            "def t(data):\n    u = data['u'] or {}\n    return u[\n",
            "def t(data, **kw):\n    return data['u'][kw['k']]\n",
            "def t(data, k):\n    return data['u'][f'{k']\n",
            "def t(data, k):\n    return data['u'][f'{k}}']\n",
            "def t(data, k):\n    return data['u'][u'']\n",
            "def t(data, k):\n    return data[\"\"][\"\"]\n",
            "def t(data):\n\treturn data['é']['ключ']\n",
            "def t(data):\r\n    return data['u']\r\n",
            "@\ndef t(data):\n    return 1\n",
            "def t(data):\n    return data['u'](data)\n",
            "def t(data, k):\n    return k in data['u'] in data\n",
        ] {
            for convention in [Convention::Class, Convention::Database] {
                let s = slice_code_as(code, "t", convention);
                let state = json!({"u": {"a": 1}, "users": {"k": 2}, "": {"": 3}});
                let sliced = slice_state(&s, &args(json!({"k": "a"})), &state);
                for kept in &sliced.kept {
                    assert_eq!(kept.get(&sliced.state), kept.get(&state), "{code}");
                }
            }
        }
        // Recursion between helpers ends.
        let s = slice_code(
            "def _h(db, k):\n    return _g(db, k)\n\n\ndef _g(db, k):\n    return _h(db, k) or db['u'][k]\n\n\ndef t(data, k):\n    return _h(data, k)\n",
            "t",
        );
        assert_eq!(
            s.attributes,
            BTreeMap::from([("u".to_owned(), keys(&["k"]))])
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_or_truncated_sources(
            code in "[a-z_ ():.\\[\\]{}'\"#\\\\@=,\n\tfkéself]{0,300}",
            cut in 0usize..2200,
        ) {
            let state = json!({"x": {"a": 1}, "orders": {"O1": {}}});
            let s = slice_code(&code, "t");
            let _ = slice_state(&s, &args(json!({"k": "a"})), &state);
            let truncated: String = SHOP.chars().take(cut).collect();
            for tool in ["pay", "get_order", "count", "t"] {
                let s = slice_code(&truncated, tool);
                proptest::prop_assert!(s.source.len() <= truncated.len());
                let _ = slice_state(&s, &args(json!({"order_id": "O1"})), &state);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_database_style_sources(
            code in "(def t\\(data, k\\):\n    |[a-z_ ():.\\[\\]{}'\"#=,\n\tfk]|data|users|\\['u'\\]|\\.get\\(| in |for ){0,80}",
            cut in 0usize..1400,
        ) {
            let state = json!({"u": {"a": 1}, "users": {"U1": {}}, "orders": {"O1": {}}});
            for convention in [Convention::Class, Convention::Database] {
                let s = slice_code_as(&code, "t", convention);
                let sliced = slice_state(&s, &args(json!({"k": "a"})), &state);
                for kept in &sliced.kept {
                    proptest::prop_assert_eq!(kept.get(&sliced.state), kept.get(&state));
                }
                // A reason for exactly the tables kept whole.
                let whole: Vec<&JsonPointer> =
                    sliced.kept.iter().filter(|p| p.tokens().len() <= 1).collect();
                let explained: Vec<&JsonPointer> = sliced.reasons.iter().map(|r| &r.table).collect();
                proptest::prop_assert_eq!(whole, explained);
            }
            let truncated: String = DB.chars().take(cut).collect();
            for tool in ["get_user", "cancel_order", "product", "t"] {
                let s = slice_code(&truncated, tool);
                proptest::prop_assert!(s.source.len() <= truncated.len());
                let _ = slice_state(&s, &args(json!({"user_id": "U1", "sku": 1})), &db_state());
            }
        }
    }

    #[test]
    fn never_panics_on_odd_sources() {
        for code in [
            "",
            "\n\n",
            "class",
            "class E",
            "class E:\n",
            "class E:\n    def",
            "class E:\n    def t",
            "class E:\n    def t(self",
            "class E:\n  def t(self):\n    return self.\n",
            "class E:\n    def t(self): return self.x[",
            "class E:\n    def t(self):\n        return f'{self.x'\n",
            "class E:\n    def t(self):\n        return '''",
            "class E:\n    def t(self):\n        return 1 \\",
            "class E:\n\tdef t(self):\n\t\treturn self.x[k]\n",
            "class E:\r\n    def t(self, k):\r\n        return self.x[k]\r\n",
            "class É:\n    def t(self, ключ):\n        return self.x[ключ]\n",
            "@dec\n",
            "class E:\n    @dec\n",
            ")",
        ] {
            let s = slice_code(code, "t");
            let _ = slice_state(&s, &Map::new(), &json!({"x": {"a": 1}}));
        }
        let s = slice_code(
            "class E:\r\n    def t(self, k):\r\n        return self.x[k]\r\n",
            "t",
        );
        assert_eq!(
            s.attributes.get("x"),
            Some(&AttrUse::Keys(BTreeSet::from(["k".to_owned()])))
        );
    }
}
