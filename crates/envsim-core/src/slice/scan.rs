//! Scanning the Python source: lines classified (code, blank, comment, continuation), strings
//! and f-strings, brackets, identifiers.

/// What a byte of the source is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Class {
    Code,
    Comment,
    /// A string literal (prefix and quotes included), or the literal text of an f-string.
    Str,
    /// Inside the `{…}` of an f-string: code.
    FExpr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Blank,
    Comment,
    /// Starts a logical line.
    Code,
    /// Continues a logical line (inside brackets or a string, or after a backslash).
    Cont,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Line {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) next: usize,
    pub(super) indent: usize,
    pub(super) kind: Kind,
}

pub(super) fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

pub(super) fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c >= 0x80
}

/// For a valid string prefix: whether it makes an f-string. (Raw strings need no special
/// case: a backslash keeps the next quote from closing them too.)
pub(super) fn string_prefix(prefix: &[u8]) -> Option<bool> {
    let lower: Vec<u8> = prefix.iter().map(u8::to_ascii_lowercase).collect();
    match lower.as_slice() {
        b"r" | b"u" | b"b" | b"br" | b"rb" => Some(false),
        b"f" | b"fr" | b"rf" => Some(true),
        _ => None,
    }
}

/// A scanned source: per-byte classes and bracket depths, and lines.
pub(super) struct Src<'a> {
    pub(super) text: &'a str,
    pub(super) b: &'a [u8],
    pub(super) class: Vec<Class>,
    /// Bracket depth of each byte (an opening or closing bracket has the outer depth).
    pub(super) depth: Vec<u32>,
    /// Newlines escaped by a backslash.
    pub(super) joined: Vec<bool>,
    pub(super) lines: Vec<Line>,
}

impl<'a> Src<'a> {
    pub(super) fn scan(text: &'a str) -> Option<Src<'a>> {
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
    pub(super) fn runs(&self, i: usize) -> bool {
        matches!(self.class[i], Class::Code | Class::FExpr)
    }

    /// A line's text after its indentation.
    pub(super) fn stripped(&self, l: usize) -> &'a str {
        let line = self.lines[l];
        self.text[line.start..line.end].trim_start()
    }

    /// Text of lines `[from, to)`, newlines included.
    pub(super) fn text_of(&self, from: usize, to: usize) -> &'a str {
        if from >= to {
            return "";
        }
        &self.text[self.lines[from].start..self.lines[to - 1].next]
    }

    /// The statements at `indent` in lines `[from, to)`, each with its nested lines; decorators
    /// belong to the statement they decorate. Trailing blank and comment lines are left out.
    pub(super) fn items(&self, from: usize, to: usize, indent: usize) -> Option<Vec<Item>> {
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
    pub(super) fn statement_end(&self, head: usize, to: usize) -> usize {
        let mut l = head + 1;
        while l < to && self.lines[l].kind == Kind::Cont {
            l += 1;
        }
        l
    }

    /// The identifier starting at byte `i`.
    pub(super) fn ident_at(&self, i: usize) -> &'a str {
        let mut j = i;
        while j < self.b.len() && is_ident(self.b[j]) {
            j += 1;
        }
        &self.text[i..j]
    }

    /// The identifier ending at byte `j` (exclusive), and where it starts.
    pub(super) fn ident_before(&self, j: usize) -> (usize, &'a str) {
        let mut i = j;
        while i > 0 && is_ident(self.b[i - 1]) {
            i -= 1;
        }
        (i, &self.text[i..j])
    }

    pub(super) fn skip_space(&self, mut i: usize, end: usize) -> usize {
        while i < end && matches!(self.b[i], b' ' | b'\t') {
            i += 1;
        }
        i
    }

    pub(super) fn skip_space_back(&self, mut j: usize, start: usize) -> usize {
        while j > start && matches!(self.b[j - 1], b' ' | b'\t' | b'\n' | b'\r') {
            j -= 1;
        }
        j
    }
}

pub(super) fn scan_string(
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
pub(super) struct Item {
    pub(super) first: usize,
    pub(super) head: usize,
    pub(super) end: usize,
}
