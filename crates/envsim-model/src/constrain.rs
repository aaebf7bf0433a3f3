//! JSON-Schema-constrained decoding for the local engines: a byte-level matcher that accepts
//! exactly the prefixes of JSON texts a schema allows (within the subset below), and a token
//! chooser that only picks tokens whose bytes keep the output such a prefix.
//!
//! This is what `response_format` gives on an OpenAI-compatible server: a small model asked
//! for `{"feedback": …, "config_changes": […]}` otherwise writes prose, a code fence, a second
//! object or a key the reader does not know. Under the constraint every completion that ends
//! is one JSON value of the schema's shape.
//!
//! The schema subset enforced while decoding: `type` (one or several), `properties`,
//! `required`, `additionalProperties` (false, a schema, or absent = any), `items`, `enum`,
//! `const`, `anyOf`/`oneOf` (any branch), `allOf` (properties and required merged), `nullable`
//! (OpenAPI 3.0), local `$ref`s (`#/…`, recursive ones included), `true`/`false`. Other
//! keywords (lengths, patterns, bounds, formats) are not enforced here: the output is checked
//! against the whole schema afterwards, as every simulator answer is. Enum strings and object
//! keys are matched in their plain JSON spelling (no `\u` escapes for plain characters).
//!
//! The matcher keeps a set of alternative parse stacks (a branch of `anyOf` is chosen only when
//! the text decides it) and caps whitespace runs, so a model cannot pad forever.

use serde_json::Value;

/// Longest run of whitespace allowed between tokens of the JSON text.
const MAX_WHITESPACE_RUN: u16 = 48;
/// Candidates tried in logit order before the chooser checks the whole vocabulary.
const TOP_CANDIDATES: usize = 256;
/// Rejected draws before a sampled choice checks the whole vocabulary.
const SAMPLED_REJECTIONS: usize = 64;

/// A schema compiled for matching.
#[derive(Clone, Debug)]
pub struct SchemaGrammar {
    nodes: Vec<Node>,
    root: usize,
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    /// One of several nodes (a value of any of them); empty: no value at all.
    Union(Vec<usize>),
    Object {
        /// Declared properties: JSON-escaped name and value node.
        properties: Vec<(Vec<u8>, usize)>,
        required: Vec<Vec<u8>>,
        /// Node of undeclared properties; `None`: none allowed.
        additional: Option<usize>,
    },
    Array {
        items: usize,
    },
    /// A string; `Some`: only these (JSON-escaped contents).
    String(Option<Vec<Vec<u8>>>),
    Number {
        integer: bool,
    },
    /// Exactly this text (`true`, `false`, `null`, a non-string enum value).
    Literal(Vec<u8>),
}

/// Index of the node matching any JSON value (compiled first).
const ANY: usize = 0;

/// Why a schema cannot constrain decoding: what cannot be compiled, and where (`#/...`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SchemaError(pub String);

impl SchemaGrammar {
    /// Compiles `schema`; an error names what cannot be compiled (a `$ref` outside the document
    /// or one that does not resolve, a `type` that is not a JSON type).
    pub fn compile(schema: &Value) -> Result<SchemaGrammar, SchemaError> {
        let mut compiler = Compiler {
            root: schema,
            nodes: Vec::new(),
            refs: Vec::new(),
        };
        // ANY = Union(object, array, string, number, true, false, null), each open.
        compiler.nodes.push(Node::Union(Vec::new()));
        let parts = vec![
            compiler.push(Node::Object {
                properties: Vec::new(),
                required: Vec::new(),
                additional: Some(ANY),
            }),
            compiler.push(Node::Array { items: ANY }),
            compiler.push(Node::String(None)),
            compiler.push(Node::Number { integer: false }),
            compiler.push(Node::Literal(b"true".to_vec())),
            compiler.push(Node::Literal(b"false".to_vec())),
            compiler.push(Node::Literal(b"null".to_vec())),
        ];
        compiler.nodes[ANY] = Node::Union(parts);
        let root = compiler.node(schema, "#", 0)?;
        Ok(SchemaGrammar {
            nodes: compiler.nodes,
            root,
        })
    }
}

struct Compiler<'s> {
    root: &'s Value,
    nodes: Vec<Node>,
    /// `$ref` targets compiled so far (recursion ends at a reserved node).
    refs: Vec<(String, usize)>,
}

impl<'s> Compiler<'s> {
    fn push(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    fn node(&mut self, schema: &Value, at: &str, depth: usize) -> Result<usize, SchemaError> {
        if depth > 64 {
            return Err(SchemaError(format!(
                "{at}: the schema nests deeper than 64 levels"
            )));
        }
        let map = match schema {
            Value::Bool(true) => return Ok(ANY),
            Value::Bool(false) => return Ok(self.push(Node::Union(Vec::new()))),
            Value::Object(map) => map,
            other => {
                return Err(SchemaError(format!(
                    "{at}: a schema must be an object or a boolean, not {other}"
                )))
            }
        };
        if let Some(reference) = map.get("$ref") {
            let reference = reference
                .as_str()
                .ok_or_else(|| SchemaError(format!("{at}/$ref: not a string")))?;
            if let Some(&(_, id)) = self.refs.iter().find(|(r, _)| r == reference) {
                return Ok(id);
            }
            let pointer = reference.strip_prefix('#').ok_or_else(|| {
                SchemaError(format!("{at}/$ref: {reference:?} points outside this schema (only `#/…` references are followed)"))
            })?;
            let target = self.root.pointer(pointer).ok_or_else(|| {
                SchemaError(format!(
                    "{at}/$ref: {reference:?} does not resolve in this schema"
                ))
            })?;
            // Reserve the node first, so a recursive reference finds it.
            let id = self.push(Node::Union(Vec::new()));
            self.refs.push((reference.to_owned(), id));
            let inner = self.node(target, reference, depth + 1)?;
            self.nodes[id] = Node::Union(vec![inner]);
            return Ok(id);
        }
        let values = match (map.get("const"), map.get("enum")) {
            (Some(value), _) => Some(std::slice::from_ref(value)),
            (None, Some(Value::Array(values))) => Some(values.as_slice()),
            (None, Some(_)) => return Err(SchemaError(format!("{at}/enum: not an array"))),
            (None, None) => None,
        };
        if let Some(values) = values {
            return Ok(self.enumeration(values));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = map.get(key) {
                let branches = branches
                    .as_array()
                    .ok_or_else(|| SchemaError(format!("{at}/{key}: not an array")))?;
                let mut ids = Vec::new();
                for (i, branch) in branches.iter().enumerate() {
                    ids.push(self.node(branch, &format!("{at}/{key}/{i}"), depth + 1)?);
                }
                return Ok(self.push(Node::Union(ids)));
            }
        }
        let merged;
        let map = match map.get("allOf").and_then(Value::as_array) {
            Some(parts) => {
                merged = self.merge_all_of(map, parts, at)?;
                &merged
            }
            None => map,
        };
        let types: Vec<&str> = match map.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts
                .iter()
                .map(|t| {
                    t.as_str()
                        .ok_or_else(|| SchemaError(format!("{at}/type: {t} is not a type name")))
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(SchemaError(format!(
                    "{at}/type: {other} is not a type name"
                )))
            }
            None if ["properties", "required", "additionalProperties"]
                .iter()
                .any(|k| map.contains_key(*k)) =>
            {
                vec!["object"]
            }
            None if map.contains_key("items") => vec!["array"],
            None => return Ok(ANY),
        };
        let mut ids = Vec::new();
        for t in &types {
            let id = match *t {
                "object" => self.object(map, at, depth)?,
                "array" => {
                    let items = match map.get("items") {
                        Some(items) => self.node(items, &format!("{at}/items"), depth + 1)?,
                        None => ANY,
                    };
                    self.push(Node::Array { items })
                }
                "string" => self.push(Node::String(None)),
                "integer" => self.push(Node::Number { integer: true }),
                "number" => self.push(Node::Number { integer: false }),
                "boolean" => {
                    let yes = self.push(Node::Literal(b"true".to_vec()));
                    let no = self.push(Node::Literal(b"false".to_vec()));
                    self.push(Node::Union(vec![yes, no]))
                }
                "null" => self.push(Node::Literal(b"null".to_vec())),
                other => {
                    return Err(SchemaError(format!(
                        "{at}/type: {other:?} is not a JSON type"
                    )))
                }
            };
            ids.push(id);
        }
        if map.get("nullable") == Some(&Value::Bool(true)) && !types.contains(&"null") {
            ids.push(self.push(Node::Literal(b"null".to_vec())));
        }
        Ok(if ids.len() == 1 {
            ids[0]
        } else {
            self.push(Node::Union(ids))
        })
    }

    fn object(
        &mut self,
        map: &serde_json::Map<String, Value>,
        at: &str,
        depth: usize,
    ) -> Result<usize, SchemaError> {
        let mut properties = Vec::new();
        if let Some(declared) = map.get("properties") {
            let declared = declared
                .as_object()
                .ok_or_else(|| SchemaError(format!("{at}/properties: not an object")))?;
            for (name, schema) in declared {
                let id = self.node(schema, &format!("{at}/properties/{name}"), depth + 1)?;
                properties.push((escaped(name), id));
            }
        }
        let required = match map.get("required") {
            Some(Value::Array(names)) => names
                .iter()
                .map(|n| {
                    n.as_str()
                        .map(escaped)
                        .ok_or_else(|| SchemaError(format!("{at}/required: {n} is not a name")))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(SchemaError(format!("{at}/required: not an array"))),
            None => Vec::new(),
        };
        let additional = match map.get("additionalProperties") {
            None | Some(Value::Bool(true)) => Some(ANY),
            Some(Value::Bool(false)) => None,
            Some(schema) => {
                Some(self.node(schema, &format!("{at}/additionalProperties"), depth + 1)?)
            }
        };
        Ok(self.push(Node::Object {
            properties,
            required,
            additional,
        }))
    }

    /// `allOf`: the schema's own keywords with each part's `properties`, `required` and (when
    /// the schema has none) `type` merged in; parts may be `$ref`s.
    fn merge_all_of(
        &self,
        map: &serde_json::Map<String, Value>,
        parts: &[Value],
        at: &str,
    ) -> Result<serde_json::Map<String, Value>, SchemaError> {
        let mut merged = map.clone();
        merged.remove("allOf");
        for (i, part) in parts.iter().enumerate() {
            let mut part = part;
            for _ in 0..16 {
                match part.get("$ref").and_then(Value::as_str) {
                    Some(reference) => {
                        part = reference
                            .strip_prefix('#')
                            .and_then(|p| self.root.pointer(p))
                            .ok_or_else(|| {
                                SchemaError(format!(
                                    "{at}/allOf/{i}: {reference:?} does not resolve in this schema"
                                ))
                            })?;
                    }
                    None => break,
                }
            }
            let Some(part) = part.as_object() else {
                continue;
            };
            if let Some(Value::Object(props)) = part.get("properties") {
                let target = merged
                    .entry("properties")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Value::Object(target) = target {
                    for (k, v) in props {
                        target.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                }
            }
            if let Some(Value::Array(names)) = part.get("required") {
                let target = merged
                    .entry("required")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(target) = target {
                    target.extend(names.iter().cloned());
                }
            }
            if !merged.contains_key("type") {
                if let Some(t) = part.get("type") {
                    merged.insert("type".into(), t.clone());
                }
            }
        }
        Ok(merged)
    }

    fn enumeration(&mut self, values: &[Value]) -> usize {
        let mut strings = Vec::new();
        let mut ids = Vec::new();
        for value in values {
            match value {
                Value::String(s) => strings.push(escaped(s)),
                other => {
                    let text = other.to_string().into_bytes();
                    ids.push(self.push(Node::Literal(text)));
                }
            }
        }
        if !strings.is_empty() {
            ids.push(self.push(Node::String(Some(strings))));
        }
        if ids.len() == 1 {
            ids[0]
        } else {
            self.push(Node::Union(ids))
        }
    }
}

/// A string's contents as JSON writes them (between the quotes).
fn escaped(text: &str) -> Vec<u8> {
    let quoted = Value::String(text.to_owned()).to_string().into_bytes();
    quoted[1..quoted.len() - 1].to_vec()
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ObjectPhase {
    /// After `{`: a key or `}`.
    Open,
    /// After a key: `:`.
    Colon,
    /// In a value (the value's frames are above this one).
    Value,
    /// After a value: `,` or `}`.
    Next,
    /// After `,`: a key.
    Key,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Escape {
    None,
    /// After `\`.
    Started,
    /// In `\uXXXX`, this many hex digits to go.
    Hex(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NumberPhase {
    /// After `-`.
    Sign,
    /// After a leading `0` (complete).
    Zero,
    /// In the integer digits (complete).
    Integer,
    /// After `.`.
    Point,
    /// In the fraction digits (complete).
    Fraction,
    /// After `e`/`E`.
    Exponent,
    /// After the exponent's sign.
    ExponentSign,
    /// In the exponent digits (complete).
    ExponentDigits,
}

impl NumberPhase {
    fn complete(self) -> bool {
        matches!(
            self,
            NumberPhase::Zero
                | NumberPhase::Integer
                | NumberPhase::Fraction
                | NumberPhase::ExponentDigits
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Frame {
    /// A value of this node is expected next.
    Value(usize),
    Object {
        node: usize,
        phase: ObjectPhase,
        /// Keys written so far (escaped), the current one last once it closed.
        seen: Vec<Vec<u8>>,
    },
    Array {
        items: usize,
        /// Whether at least one item was written (then `,` or `]`).
        after_item: bool,
        in_item: bool,
    },
    Str {
        /// `Some`: the allowed contents; the written contents are kept to check them.
        allowed: Option<Vec<Vec<u8>>>,
        written: Vec<u8>,
        escape: Escape,
        /// A key of the object below (the contents are kept and handed to it).
        key: bool,
    },
    Number {
        integer: bool,
        phase: NumberPhase,
    },
    Literal {
        node: usize,
        at: usize,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Alternative {
    frames: Vec<Frame>,
    whitespace: u16,
    /// The root value is complete.
    done: bool,
}

/// The state of matching one output against a [`SchemaGrammar`].
#[derive(Clone, Debug)]
pub struct Matcher<'g> {
    grammar: &'g SchemaGrammar,
    alternatives: Vec<Alternative>,
}

impl<'g> Matcher<'g> {
    /// Nothing written yet.
    pub fn new(grammar: &'g SchemaGrammar) -> Matcher<'g> {
        Matcher {
            grammar,
            alternatives: vec![Alternative {
                frames: vec![Frame::Value(grammar.root)],
                whitespace: 0,
                done: false,
            }],
        }
    }

    /// Appends `bytes` if the text stays a prefix the schema allows; false (and unchanged)
    /// otherwise, or for no bytes at all.
    pub fn advance(&mut self, bytes: &[u8]) -> bool {
        match self.after(bytes) {
            Some(next) => {
                self.alternatives = next;
                true
            }
            None => false,
        }
    }

    /// Whether appending `bytes` keeps the text a prefix the schema allows.
    pub fn accepts(&self, bytes: &[u8]) -> bool {
        self.after(bytes).is_some()
    }

    /// Whether the text written is a complete value of the schema.
    pub fn is_complete(&self) -> bool {
        self.alternatives.iter().any(|a| a.done)
    }

    fn after(&self, bytes: &[u8]) -> Option<Vec<Alternative>> {
        if bytes.is_empty() {
            return None;
        }
        let mut current = self.alternatives.clone();
        for &b in bytes {
            let mut next = Vec::with_capacity(current.len());
            for alternative in current {
                feed(self.grammar, alternative, b, &mut next);
            }
            if next.is_empty() {
                return None;
            }
            let mut unique: Vec<Alternative> = Vec::with_capacity(next.len());
            for a in next {
                if !unique.contains(&a) {
                    unique.push(a);
                }
            }
            current = unique;
        }
        Some(current)
    }
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// Feeds one byte to one alternative; its successors (none: the byte is refused) go to `out`.
fn feed(g: &SchemaGrammar, mut a: Alternative, b: u8, out: &mut Vec<Alternative>) {
    let Some(top) = a.frames.last_mut() else {
        // The root value is complete: only trailing whitespace.
        if is_whitespace(b) && a.whitespace < MAX_WHITESPACE_RUN {
            a.whitespace += 1;
            out.push(a);
        }
        return;
    };
    // Whitespace between tokens (not inside strings, numbers or literals).
    let between = matches!(
        top,
        Frame::Value(_)
            | Frame::Object {
                phase: ObjectPhase::Open
                    | ObjectPhase::Colon
                    | ObjectPhase::Next
                    | ObjectPhase::Key,
                ..
            }
            | Frame::Array { in_item: false, .. }
    );
    if let Frame::Value(node) = top {
        if g.nodes[*node] == Node::Union(Vec::new()) {
            // A `false` schema: no value, so nothing at all.
            return;
        }
    }
    if between && is_whitespace(b) {
        if a.whitespace < MAX_WHITESPACE_RUN {
            a.whitespace += 1;
            out.push(a);
        }
        return;
    }
    if !matches!(top, Frame::Str { .. }) {
        a.whitespace = 0;
    }
    match top {
        Frame::Value(node) => {
            let node = *node;
            a.frames.pop();
            start_value(g, a, node, b, out);
        }
        Frame::Object { node, phase, seen } => {
            let Node::Object {
                properties,
                required,
                additional,
            } = &g.nodes[*node]
            else {
                return;
            };
            let key_allowed = |seen: &[Vec<u8>]| {
                additional.is_some()
                    || properties
                        .iter()
                        .any(|(name, _)| !seen.iter().any(|s| s == name))
            };
            match (phase.clone(), b) {
                (ObjectPhase::Open | ObjectPhase::Key, b'"') if key_allowed(seen) => {
                    let allowed = additional.is_none().then(|| {
                        properties
                            .iter()
                            .filter(|(name, _)| !seen.iter().any(|s| s == name))
                            .map(|(name, _)| name.clone())
                            .collect()
                    });
                    a.frames.push(Frame::Str {
                        allowed,
                        written: Vec::new(),
                        escape: Escape::None,
                        key: true,
                    });
                    out.push(a);
                }
                (ObjectPhase::Open | ObjectPhase::Next, b'}')
                    if required.iter().all(|r| seen.iter().any(|s| s == r)) =>
                {
                    a.frames.pop();
                    value_done(&mut a);
                    out.push(a);
                }
                (ObjectPhase::Colon, b':') => {
                    let key = seen.last().cloned().unwrap_or_default();
                    let value = properties
                        .iter()
                        .find(|(name, _)| *name == key)
                        .map(|(_, id)| *id)
                        .or(*additional);
                    let Some(value) = value else {
                        return;
                    };
                    *phase = ObjectPhase::Value;
                    a.frames.push(Frame::Value(value));
                    out.push(a);
                }
                (ObjectPhase::Next, b',') if key_allowed(seen) => {
                    *phase = ObjectPhase::Key;
                    out.push(a);
                }
                _ => {}
            }
        }
        Frame::Array {
            items,
            after_item,
            in_item,
        } => {
            let items = *items;
            match (*after_item, b) {
                (_, b']') => {
                    a.frames.pop();
                    value_done(&mut a);
                    out.push(a);
                }
                (true, b',') => {
                    *in_item = true;
                    a.frames.push(Frame::Value(items));
                    out.push(a);
                }
                (false, _) => {
                    *in_item = true;
                    start_value(g, a, items, b, out);
                }
                (true, _) => {}
            }
        }
        Frame::Str {
            allowed,
            written,
            escape,
            key,
        } => {
            let keep = allowed.is_some() || *key;
            match escape.clone() {
                Escape::Started => {
                    if !matches!(
                        b,
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' | b'u'
                    ) {
                        return;
                    }
                    *escape = if b == b'u' {
                        Escape::Hex(4)
                    } else {
                        Escape::None
                    };
                }
                Escape::Hex(left) => {
                    if !b.is_ascii_hexdigit() {
                        return;
                    }
                    *escape = if left > 1 {
                        Escape::Hex(left - 1)
                    } else {
                        Escape::None
                    };
                }
                Escape::None if b == b'"' => {
                    if let Some(allowed) = allowed {
                        if !allowed.iter().any(|v| v == written) {
                            return;
                        }
                    }
                    let written = std::mem::take(written);
                    let key = *key;
                    a.frames.pop();
                    if key {
                        if let Some(Frame::Object { phase, seen, .. }) = a.frames.last_mut() {
                            if seen.contains(&written) {
                                return;
                            }
                            seen.push(written);
                            *phase = ObjectPhase::Colon;
                        }
                    } else {
                        value_done(&mut a);
                    }
                    out.push(a);
                    return;
                }
                Escape::None if b == b'\\' => *escape = Escape::Started,
                Escape::None if b < 0x20 => return,
                Escape::None => {}
            }
            if keep {
                written.push(b);
                if let Some(allowed) = allowed {
                    if !allowed.iter().any(|v| v.starts_with(written)) {
                        return;
                    }
                }
            }
            out.push(a);
        }
        Frame::Number { integer, phase } => {
            use NumberPhase::*;
            let next = match (*phase, b) {
                (Sign, b'0') => Some(Zero),
                (Sign, b'1'..=b'9') => Some(Integer),
                (Integer, b'0'..=b'9') => Some(Integer),
                (Zero | Integer, b'.') if !*integer => Some(Point),
                (Zero | Integer | Fraction, b'e' | b'E') if !*integer => Some(Exponent),
                (Point | Fraction, b'0'..=b'9') => Some(Fraction),
                (Exponent, b'+' | b'-') => Some(ExponentSign),
                (Exponent | ExponentSign | ExponentDigits, b'0'..=b'9') => Some(ExponentDigits),
                _ => None,
            };
            match next {
                Some(next) => {
                    *phase = next;
                    out.push(a);
                }
                None if phase.complete() => {
                    // The number ended before this byte: the byte belongs to what follows.
                    a.frames.pop();
                    value_done(&mut a);
                    feed(g, a, b, out);
                }
                None => {}
            }
        }
        Frame::Literal { node, at } => {
            let Node::Literal(text) = &g.nodes[*node] else {
                return;
            };
            if text.get(*at) != Some(&b) {
                return;
            }
            *at += 1;
            if *at == text.len() {
                a.frames.pop();
                value_done(&mut a);
            }
            out.push(a);
        }
    }
}

/// The first byte of a value of `node`.
fn start_value(
    g: &SchemaGrammar,
    mut a: Alternative,
    node: usize,
    b: u8,
    out: &mut Vec<Alternative>,
) {
    match &g.nodes[node] {
        Node::Union(branches) => {
            for &branch in branches {
                start_value(g, a.clone(), branch, b, out);
            }
        }
        Node::Object { .. } if b == b'{' => {
            a.frames.push(Frame::Object {
                node,
                phase: ObjectPhase::Open,
                seen: Vec::new(),
            });
            out.push(a);
        }
        Node::Array { items } if b == b'[' => {
            a.frames.push(Frame::Array {
                items: *items,
                after_item: false,
                in_item: false,
            });
            out.push(a);
        }
        Node::String(allowed) if b == b'"' => {
            a.frames.push(Frame::Str {
                allowed: allowed.clone(),
                written: Vec::new(),
                escape: Escape::None,
                key: false,
            });
            out.push(a);
        }
        Node::Number { integer } if b == b'-' || b.is_ascii_digit() => {
            let phase = match b {
                b'-' => NumberPhase::Sign,
                b'0' => NumberPhase::Zero,
                _ => NumberPhase::Integer,
            };
            a.frames.push(Frame::Number {
                integer: *integer,
                phase,
            });
            out.push(a);
        }
        Node::Literal(text) if text.first() == Some(&b) => {
            if text.len() == 1 {
                value_done(&mut a);
            } else {
                a.frames.push(Frame::Literal { node, at: 1 });
            }
            out.push(a);
        }
        _ => {}
    }
}

/// A value just ended: its container moves on (or the root is complete).
fn value_done(a: &mut Alternative) {
    match a.frames.last_mut() {
        None => a.done = true,
        Some(Frame::Object { phase, .. }) => *phase = ObjectPhase::Next,
        Some(Frame::Array {
            after_item,
            in_item,
            ..
        }) => {
            *after_item = true;
            *in_item = false;
        }
        Some(_) => {}
    }
}

/// Picks next tokens: greedy (the first maximum) or sampled at a temperature with a seed;
/// optionally only among tokens a predicate allows.
pub(crate) struct Sampler {
    temperature: f32,
    rng: fastrand::Rng,
}

impl Sampler {
    pub(crate) fn new(temperature: f32, seed: u32) -> Sampler {
        Sampler {
            temperature,
            rng: fastrand::Rng::with_seed(u64::from(seed)),
        }
    }

    fn greedy(&self) -> bool {
        self.temperature <= 0.0 || !self.temperature.is_finite()
    }

    /// The next token, unconstrained.
    pub(crate) fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.greedy() {
            return argmax(logits);
        }
        let weights = self.weights(logits);
        self.draw(&weights).unwrap_or_else(|| argmax(logits))
    }

    /// The next token among those `allowed` accepts; `None` when it accepts none.
    ///
    /// Greedy: the best-scoring allowed token (the top candidates are tried in order first,
    /// then the whole vocabulary). Sampled: draws from the temperature distribution, refusing
    /// disallowed draws, which samples the distribution restricted to the allowed tokens; after
    /// many refusals it masks the whole vocabulary and draws once.
    pub(crate) fn sample_allowed(
        &mut self,
        logits: &[f32],
        allowed: impl Fn(u32) -> bool,
    ) -> Option<u32> {
        if self.greedy() {
            let best = argmax(logits);
            if allowed(best) {
                return Some(best);
            }
            let mut order: Vec<u32> = (0..logits.len() as u32).collect();
            let top = TOP_CANDIDATES.min(order.len());
            if top < order.len() {
                order.select_nth_unstable_by(top, |&x, &y| {
                    logits[y as usize].total_cmp(&logits[x as usize])
                });
            }
            order[..top].sort_by(|&x, &y| {
                logits[y as usize]
                    .total_cmp(&logits[x as usize])
                    .then(x.cmp(&y))
            });
            if let Some(&token) = order[..top].iter().find(|&&t| allowed(t)) {
                return Some(token);
            }
            return order[top..]
                .iter()
                .copied()
                .filter(|&t| allowed(t))
                .max_by(|&x, &y| {
                    logits[x as usize]
                        .total_cmp(&logits[y as usize])
                        .then(y.cmp(&x))
                });
        }
        let mut weights = self.weights(logits);
        for _ in 0..SAMPLED_REJECTIONS {
            let token = self.draw(&weights)?;
            if allowed(token) {
                return Some(token);
            }
            weights[token as usize] = 0.0;
        }
        for (token, weight) in weights.iter_mut().enumerate() {
            if *weight > 0.0 && !allowed(token as u32) {
                *weight = 0.0;
            }
        }
        self.draw(&weights)
    }

    fn weights(&self, logits: &[f32]) -> Vec<f64> {
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        logits
            .iter()
            .map(|&l| f64::from((l - max) / self.temperature).exp())
            .collect()
    }

    /// A draw proportional to `weights`; `None` when they are all zero.
    fn draw(&mut self, weights: &[f64]) -> Option<u32> {
        let total: f64 = weights.iter().sum();
        if total <= 0.0 || !total.is_finite() {
            return None;
        }
        let mut target = self.rng.f64() * total;
        let mut last = None;
        for (i, &w) in weights.iter().enumerate() {
            if w > 0.0 {
                last = Some(i as u32);
                target -= w;
                if target <= 0.0 {
                    return last;
                }
            }
        }
        last
    }
}

/// The index of the first maximum.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn grammar(schema: Value) -> SchemaGrammar {
        SchemaGrammar::compile(&schema).unwrap()
    }

    /// Whether `text` is accepted byte by byte, and complete at its end.
    fn run(g: &SchemaGrammar, text: &str) -> (bool, bool) {
        let mut m = Matcher::new(g);
        for b in text.bytes() {
            if !m.advance(&[b]) {
                return (false, false);
            }
        }
        (true, m.is_complete())
    }

    fn answer() -> SchemaGrammar {
        grammar(json!({
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
                    "required": ["type", "path"]
                }}
            },
            "required": ["feedback", "config_changes"],
            "additionalProperties": false
        }))
    }

    #[test]
    fn valid_answers_are_accepted_at_every_byte_and_complete_at_the_end() {
        let g = answer();
        for text in [
            r#"{"feedback": "ok", "config_changes": []}"#,
            "{\n  \"config_changes\": [\n    {\"type\": \"add\", \"path\": \"a.b\", \"value\": {\"x\": [1, -2.5e3, true, null, \"s\\\"q\\u00e9\"]}}\n  ],\n  \"feedback\": \"done\"\n}",
            r#"{"feedback":"","config_changes":[{"path":"p","type":"delete"},{"type":"modify","path":"q","value":0}]}"#,
        ] {
            assert_eq!(run(&g, text), (true, true), "{text}");
            // Every proper prefix is accepted and not complete.
            for end in 0..text.len() {
                let (ok, complete) = run(&g, &text[..end]);
                assert!(ok && !complete, "prefix {:?}", &text[..end]);
            }
        }
    }

    #[test]
    fn what_the_schema_forbids_is_refused_at_the_first_wrong_byte() {
        let g = answer();
        for (text, refused_at) in [
            // Prose before the object.
            ("Sure! {", 0),
            // An undeclared key in a closed object.
            (r#"{"observation""#, 2),
            // A missing required key at the close.
            (r#"{"feedback": "x"}"#, 16),
            // An enum value outside the list.
            (r#"{"config_changes": [{"type": "ad""#, 32),
            (r#"{"config_changes": [{"type": "addx"#, 33),
            // A required key missing in an item.
            (r#"{"config_changes": [{"type": "add"}"#, 34),
            // A key already written (a closed object offers only the others).
            (r#"{"feedback": "a", "feedback""#, 19),
            // A raw newline inside a string; a bad escape.
            ("{\"feedback\": \"a\nb", 15),
            (r#"{"feedback": "\q"#, 15),
            // A trailing comma.
            (r#"{"feedback": "a",}"#, 17),
        ] {
            let mut m = Matcher::new(&g);
            let accepted = text.bytes().take_while(|&b| m.advance(&[b])).count();
            assert_eq!(accepted, refused_at, "{text}");
        }
    }

    #[test]
    fn numbers_end_where_the_next_token_starts() {
        let g = grammar(json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "x": {"type": "number"}}}));
        assert_eq!(run(&g, r#"{"n": -12, "x": 0.5e-3}"#), (true, true));
        assert_eq!(run(&g, r#"{"n":7}"#), (true, true));
        assert_eq!(run(&g, r#"{"n": 1.5"#), (false, false));
        assert_eq!(run(&g, r#"{"n": 01"#), (false, false));
        assert_eq!(run(&g, r#"{"x": 1."#), (true, false));
        assert_eq!(run(&g, r#"{"x": 1.}"#), (false, false));
        assert_eq!(run(&g, r#"{"x": -}"#), (false, false));
        // An open object refuses a key written twice at its closing quote.
        assert_eq!(run(&g, r#"{"n": 1, "other": 2, "n2": 3}"#), (true, true));
        let mut m = Matcher::new(&g);
        assert!(m.advance(br#"{"n": 1, "n"#));
        assert!(!m.accepts(b"\""));
        assert!(m.accepts(b"x\""));
        // A bare number is complete at its end but may still grow.
        let g = grammar(json!({"type": "number"}));
        assert_eq!(run(&g, "12"), (true, false));
    }

    #[test]
    fn unions_refs_nullable_and_const() {
        let g = grammar(json!({
            "$defs": {"node": {"type": "object", "properties": {
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                "name": {"type": ["string", "null"]}}, "additionalProperties": false}},
            "anyOf": [{"$ref": "#/$defs/node"}, {"type": "boolean"}, {"const": 3}]
        }));
        assert_eq!(
            run(&g, r#"{"kids": [{"kids": [], "name": null}], "name": "r"}"#),
            (true, true)
        );
        assert_eq!(run(&g, "false"), (true, true));
        assert_eq!(run(&g, "3"), (true, true));
        assert_eq!(run(&g, "4"), (false, false));
        assert!(!run(&g, r#"{"kids": [{"other": 1}]}"#).0);
        let g = grammar(json!({"type": "string", "nullable": true}));
        assert_eq!(run(&g, "null"), (true, true));
        assert_eq!(run(&g, "\"a\""), (true, true));
        let g = grammar(
            json!({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                         {"properties": {"b": {"type": "string"}}}],
                               "additionalProperties": false}),
        );
        assert_eq!(run(&g, r#"{"b": "x", "a": 1}"#), (true, true));
        assert_eq!(run(&g, r#"{"b": "x"}"#), (false, false));
        assert!(!run(&g, r#"{"c""#).0);
        // `false` admits nothing; `true` anything.
        assert!(!Matcher::new(&grammar(json!(false))).accepts(b" "));
        assert!(!Matcher::new(&grammar(json!(false))).accepts(b"1"));
        assert_eq!(
            run(&grammar(json!(true)), r#"[{"a": [null]}, "x"]"#),
            (true, true)
        );
    }

    #[test]
    fn schemas_that_cannot_be_compiled_are_named() {
        for (schema, expected) in [
            (
                json!({"$ref": "other.json#/a"}),
                "points outside this schema",
            ),
            (json!({"$ref": "#/nowhere"}), "does not resolve"),
            (json!({"type": "text"}), "\"text\" is not a JSON type"),
            (
                json!({"properties": {"a": {"type": 3}}}),
                "#/properties/a/type",
            ),
            (json!(12), "must be an object or a boolean"),
        ] {
            let e = SchemaGrammar::compile(&schema).unwrap_err();
            assert!(e.0.contains(expected), "{e}");
        }
    }

    #[test]
    fn whitespace_runs_are_capped() {
        let g = answer();
        let mut m = Matcher::new(&g);
        assert!(m.advance(b"{"));
        for _ in 0..MAX_WHITESPACE_RUN {
            assert!(m.advance(b"\n"));
        }
        assert!(!m.accepts(b" "));
        assert!(m.advance(b"\"feedback\""));
        assert!(m.accepts(b" "));
        // Inside a string, spaces are text, not padding.
        assert!(m.advance(b":\""));
        assert!(m.advance(&[b' '; 200]));
    }

    #[test]
    fn the_sampler_picks_the_best_allowed_token_or_draws_among_allowed_ones() {
        let logits = [0.1, 2.0, 2.0, -1.0, 1.5];
        let mut greedy = Sampler::new(0.0, 0);
        assert_eq!(greedy.sample(&logits), 1);
        assert_eq!(greedy.sample_allowed(&logits, |t| t != 1), Some(2));
        assert_eq!(
            greedy.sample_allowed(&logits, |t| t == 3 || t == 0),
            Some(0)
        );
        assert_eq!(greedy.sample_allowed(&logits, |_| false), None);
        // Past the top candidates: the best of the rest.
        let many: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        assert_eq!(greedy.sample_allowed(&many, |t| t < 10), Some(9));
        let mut hot = Sampler::new(1.0, 7);
        for _ in 0..50 {
            let t = hot.sample_allowed(&logits, |t| t == 0 || t == 3).unwrap();
            assert!(t == 0 || t == 3);
        }
        assert_eq!(hot.sample_allowed(&logits, |_| false), None);
        // Draws are seeded.
        let draws = |seed| {
            let mut s = Sampler::new(0.8, seed);
            (0..20).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        assert_eq!(draws(3), draws(3));
    }
}
