//! Deliberately broken variants of an environment package (mutants), the known-bad inputs the
//! quality gate is measured on: one small edit of the Python code per mutant, of four kinds a
//! code-writing model makes — a state write dropped, a check inverted, a threshold moved, an
//! id made nondeterministic. The description (manifest, rules, states) stays as it was, so a
//! simulator that reads the description faithfully answers as the good package would.
//!
//! The code is read line by line (no Python parser): only statements on one line are edited
//! (brackets balanced, no continuation), outside docstrings and outside `__init__`, so an edit
//! never splits a statement. An edit may still be equivalent (a write that is overwritten later,
//! a check no walk reaches): that is part of what the gate's recall per kind measures.

use envsim_core::rng::Rng;
use envsim_exec::package::EnvPackage;
use envsim_exec::EnvCode;
use serde::Serialize;

/// How a mutant breaks its package.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MutantKind {
    /// A write to the state (an item or attribute assignment, a `del`, an in-place list or
    /// dict update) becomes `pass`.
    DroppedWrite,
    /// An `if`/`elif` condition is negated.
    InvertedCheck,
    /// A number an order comparison tests against (`<`, `<=`, `>`, `>=`) becomes `2n + 1`.
    WrongThreshold,
    /// A name ending in `id` that is assigned gets random bytes appended (from `os.urandom`,
    /// which the sandbox does not seed).
    NondeterministicId,
}

impl MutantKind {
    /// Every kind.
    pub const ALL: [MutantKind; 4] = [
        MutantKind::DroppedWrite,
        MutantKind::InvertedCheck,
        MutantKind::WrongThreshold,
        MutantKind::NondeterministicId,
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            MutantKind::DroppedWrite => "dropped_write",
            MutantKind::InvertedCheck => "inverted_check",
            MutantKind::WrongThreshold => "wrong_threshold",
            MutantKind::NondeterministicId => "nondeterministic_id",
        }
    }
}

/// One edit of a package's code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Edit {
    /// The kind.
    pub kind: MutantKind,
    /// The function it is in.
    pub function: String,
    /// The line (1-based).
    pub line: usize,
    /// The line as it was.
    pub original: String,
    /// What replaces it (one line, or two for a nondeterministic id).
    pub replacement: String,
}

/// A mutant: the package with one edit.
#[derive(Clone)]
pub struct Mutant {
    /// The edit.
    pub edit: Edit,
    /// The package, its code edited (name, manifest and states unchanged).
    pub package: EnvPackage,
}

impl Mutant {
    /// `package` with `edit` applied to its code (convention, class and error rendering kept).
    pub fn of(package: &EnvPackage, edit: Edit) -> Mutant {
        let code = &package.code;
        let mut package = package.clone();
        package.code = EnvCode::with_convention(
            apply(&code.code, &edit),
            code.class_name.clone(),
            code.convention,
        )
        .with_errors((*code.errors).clone());
        Mutant { edit, package }
    }
}

/// A line of code as the scanner classifies it.
struct Line<'a> {
    number: usize,
    text: &'a str,
    indent: usize,
    /// The innermost function it is in.
    function: Option<String>,
    /// A whole statement on one line (not inside brackets or a docstring, balanced, not
    /// continued).
    simple: bool,
}

/// The lines of `code` with the function each is in and whether it is a statement of its own.
fn scan(code: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut functions: Vec<(usize, String)> = Vec::new();
    let mut depth = 0i64;
    let mut in_docstring: Option<&'static str> = None;
    let mut continued = false;
    for (i, text) in code.lines().enumerate() {
        let trimmed = text.trim_start();
        let indent = text.len() - trimmed.len();
        let starts_clean = depth == 0 && in_docstring.is_none() && !continued;
        // A docstring line: toggled by an odd number of triple quotes.
        if let Some(quote) = in_docstring {
            if trimmed.matches(quote).count() % 2 == 1 {
                in_docstring = None;
            }
            out.push(Line {
                number: i + 1,
                text,
                indent,
                function: functions.last().map(|(_, f)| f.clone()),
                simple: false,
            });
            continue;
        }
        if starts_clean && !trimmed.is_empty() && !trimmed.starts_with('#') {
            while functions.last().is_some_and(|(d, _)| *d >= indent) {
                functions.pop();
            }
        }
        let (delta, opens_docstring) = brackets(trimmed);
        if starts_clean {
            if let Some(rest) = trimmed
                .strip_prefix("def ")
                .or_else(|| trimmed.strip_prefix("async def "))
            {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                functions.push((indent, name));
            }
        }
        depth += delta;
        let ends_open = depth != 0 || trimmed.ends_with('\\') || opens_docstring.is_some();
        out.push(Line {
            number: i + 1,
            text,
            indent,
            function: functions.last().map(|(_, f)| f.clone()),
            simple: starts_clean && !ends_open && !trimmed.is_empty() && !trimmed.starts_with('#'),
        });
        continued = trimmed.ends_with('\\');
        in_docstring = opens_docstring;
        if depth < 0 {
            depth = 0;
        }
    }
    out
}

/// The net bracket depth of a line outside strings and comments, and the triple quote it
/// leaves open (a docstring that goes on).
fn brackets(line: &str) -> (i64, Option<&'static str>) {
    let bytes = line.as_bytes();
    let (mut depth, mut i) = (0i64, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'#' => break,
            q @ (b'"' | b'\'') => {
                let triple = bytes.get(i..i + 3) == Some(&[q, q, q][..]);
                if triple {
                    let quote: &'static str = if q == b'"' { "\"\"\"" } else { "'''" };
                    match line[i + 3..].find(quote) {
                        Some(end) => i += 3 + end + 3,
                        None => return (depth, Some(quote)),
                    }
                    continue;
                }
                i = past_string(bytes, i);
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    (depth, None)
}

/// The index just past the one-line string literal that opens at `start` (a quote), escapes
/// skipped; the end of the line when it does not close.
fn past_string(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() && bytes[i] != quote {
        if bytes[i] == b'\\' {
            i += 1;
        }
        i += 1;
    }
    (i + 1).min(bytes.len())
}

/// The code part of a line (before a comment that is outside strings).
fn code_part(text: &str) -> &str {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'#' => return text[..i].trim_end(),
            b'"' | b'\'' => {
                i = past_string(bytes, i);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    text.trim_end()
}

/// What the edit of `kind` makes of a line, when it applies to it.
fn edit_line(kind: MutantKind, text: &str, indent: usize) -> Option<String> {
    let pad = &text[..indent];
    let code = code_part(&text[indent..]);
    match kind {
        MutantKind::DroppedWrite => is_state_write(code).then(|| format!("{pad}pass")),
        MutantKind::InvertedCheck => {
            let (word, rest) = code
                .strip_prefix("if ")
                .map(|r| ("if", r))
                .or_else(|| code.strip_prefix("elif ").map(|r| ("elif", r)))?;
            let condition = rest.strip_suffix(':')?.trim();
            (!condition.is_empty() && !condition.contains("__name__"))
                .then(|| format!("{pad}{word} not ({condition}):"))
        }
        MutantKind::WrongThreshold => {
            let (start, end, number) = threshold(code)?;
            let moved = match number.parse::<i64>() {
                Ok(n) => (2 * n + 1).to_string(),
                Err(_) => {
                    let x: f64 = number.parse().ok()?;
                    format!("{}", 2.0 * x + 1.0)
                }
            };
            Some(format!("{pad}{}{moved}{}", &code[..start], &code[end..]))
        }
        MutantKind::NondeterministicId => {
            let (name, value) = code.split_once('=')?;
            let name = name.trim();
            let assigned = !value.starts_with('=')
                && !name.ends_with(['!', '<', '>', '+', '-', '*', '/', '%', ':'])
                && !name.is_empty()
                && name.chars().all(|c| c.is_alphanumeric() || c == '_')
                && (name == "id"
                    || name.ends_with("_id")
                    || name.ends_with("id") && name.len() <= 4);
            assigned.then(|| {
                format!(
                    "{pad}{code}\n{pad}{name} = \"%s-%s\" % ({name}, __import__(\"os\").urandom(3).hex())"
                )
            })
        }
    }
}

/// Whether a statement writes to the state: an item or attribute assignment (`x[k] = v`,
/// `self.a = v`, augmented too), a `del x[k]`, or an in-place update call as a statement.
fn is_state_write(code: &str) -> bool {
    if let Some(target) = code.strip_prefix("del ") {
        return target.contains('[') || target.contains('.');
    }
    const UPDATES: [&str; 9] = [
        ".append(",
        ".extend(",
        ".insert(",
        ".remove(",
        ".pop(",
        ".update(",
        ".clear(",
        ".setdefault(",
        ".discard(",
    ];
    let first = code.split_whitespace().next().unwrap_or_default();
    if [
        "return", "if", "elif", "while", "for", "raise", "assert", "yield",
    ]
    .contains(&first)
    {
        return false;
    }
    if UPDATES.iter().any(|u| code.contains(u)) && !code.contains('=') {
        return true;
    }
    // An assignment whose target is an item or an attribute.
    let Some(at) = assignment_at(code) else {
        return false;
    };
    let target = code[..at]
        .trim_end_matches(['+', '-', '*', '/', '%'])
        .trim();
    !target.contains(',') && (target.ends_with(']') || target.contains('.'))
}

/// Where the assignment's `=` is (not `==`, `<=`, `>=`, `!=`, nor one inside brackets).
fn assignment_at(code: &str) -> Option<usize> {
    let bytes = code.as_bytes();
    let mut depth = 0i32;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' | b'\'' => {
                i = past_string(bytes, i);
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'=' if depth == 0 => {
                let before = if i > 0 { bytes[i - 1] } else { b' ' };
                let after = bytes.get(i + 1).copied().unwrap_or(b' ');
                if after != b'=' && !matches!(before, b'=' | b'!' | b'<' | b'>') {
                    return Some(i);
                }
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The first number an order comparison tests against, outside strings: its byte range.
fn threshold(code: &str) -> Option<(usize, usize, &str)> {
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' | b'\'' => {
                i = past_string(bytes, i);
                continue;
            }
            b'<' | b'>' => {
                let mut j = i + 1;
                if bytes.get(j) == Some(&b'=') {
                    j += 1;
                } else if matches!(bytes.get(j), Some(b'<' | b'>')) {
                    // A shift, not a comparison.
                    i = j + 1;
                    continue;
                }
                while bytes.get(j) == Some(&b' ') {
                    j += 1;
                }
                let start = j;
                while bytes
                    .get(j)
                    .is_some_and(|b| b.is_ascii_digit() || *b == b'.')
                {
                    j += 1;
                }
                let followed = bytes
                    .get(j)
                    .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
                if j > start && !followed && bytes[start].is_ascii_digit() {
                    return Some((start, j, &code[start..j]));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Every place an edit of `kind` applies in `code`: outside `__init__`, module level and
/// adapter regions (code an importer wrapped around the environment's own, which is not what a
/// gate of the environment is measured on).
pub fn sites(code: &str, kind: MutantKind) -> Vec<Edit> {
    let adapter = envsim_exec::coverage::adapter_lines(code);
    scan(code)
        .into_iter()
        .filter(|l| l.simple && !adapter.get(l.number - 1).copied().unwrap_or(false))
        .filter_map(|l| {
            let function = l.function.clone()?;
            if function == "__init__" {
                return None;
            }
            let replacement = edit_line(kind, l.text, l.indent)?;
            Some(Edit {
                kind,
                function,
                line: l.number,
                original: l.text.to_owned(),
                replacement,
            })
        })
        .collect()
}

/// `code` with `edit` applied.
pub fn apply(code: &str, edit: &Edit) -> String {
    let mut out = String::with_capacity(code.len() + 64);
    for (i, line) in code.lines().enumerate() {
        out.push_str(if i + 1 == edit.line {
            &edit.replacement
        } else {
            line
        });
        out.push('\n');
    }
    out
}

/// Up to `count` mutants of `package` of `kind`, at sites drawn with `seed` (fewer when the
/// code has fewer sites; none when it has none).
pub fn mutants(package: &EnvPackage, kind: MutantKind, count: usize, seed: u64) -> Vec<Mutant> {
    let mut sites = sites(&package.code.code, kind);
    let mut rng = Rng::new(seed ^ (kind as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut out = Vec::new();
    while out.len() < count && !sites.is_empty() {
        let edit = sites.swap_remove(rng.below(sites.len()));
        out.push(Mutant::of(package, edit));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODE: &str = r#"
class Shop:
    def __init__(self, init_config: dict):
        self.orders = init_config.get("orders", {})
        self.next_id = 1

    def _err(self, message):
        """A failure answer.

        With a message."""
        return {"success": False, "error": message}

    def place_order(self, item: str, quantity: int) -> dict:
        if quantity <= 0:
            return self._err("quantity must be positive")
        if quantity > 10:  # a limit per order
            return self._err("at most 10 per order")
        order_id = "O%d" % self.next_id
        self.next_id += 1
        self.orders[order_id] = {"item": item,
                                 "quantity": quantity}
        note = "a=b"
        return {"success": True, "order_id": order_id}

    def cancel_order(self, order_id: str) -> dict:
        if order_id not in self.orders:
            return self._err("no order " + order_id)
        del self.orders[order_id]
        self.orders.setdefault("log", []).append(order_id)
        return {"success": True}
"#;

    fn lines(kind: MutantKind) -> Vec<(usize, String)> {
        sites(CODE, kind)
            .into_iter()
            .map(|e| (e.line, e.replacement))
            .collect()
    }

    #[test]
    fn writes_are_dropped_only_where_a_statement_writes_the_state() {
        // Not `__init__`, not the local `order_id = ...`, not the multi-line dict, not `note`.
        assert_eq!(
            lines(MutantKind::DroppedWrite),
            vec![
                (19, "        pass".to_owned()),
                (28, "        pass".to_owned()),
                (29, "        pass".to_owned()),
            ]
        );
    }

    #[test]
    fn checks_are_inverted_and_comments_left_out() {
        assert_eq!(
            lines(MutantKind::InvertedCheck),
            vec![
                (14, "        if not (quantity <= 0):".to_owned()),
                (16, "        if not (quantity > 10):".to_owned()),
                (
                    26,
                    "        if not (order_id not in self.orders):".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn thresholds_move_to_twice_plus_one() {
        assert_eq!(
            lines(MutantKind::WrongThreshold),
            vec![
                (14, "        if quantity <= 1:".to_owned()),
                (16, "        if quantity > 21:".to_owned()),
            ]
        );
    }

    #[test]
    fn ids_get_random_bytes_after_their_assignment() {
        assert_eq!(
            lines(MutantKind::NondeterministicId),
            vec![(
                18,
                "        order_id = \"O%d\" % self.next_id\n        order_id = \"%s-%s\" % (order_id, __import__(\"os\").urandom(3).hex())".to_owned()
            )]
        );
    }

    /// The lines of `code` where an edit of `kind` applies.
    fn site_lines(code: &str, kind: MutantKind) -> Vec<usize> {
        sites(code, kind).iter().map(|e| e.line).collect()
    }

    #[test]
    fn adapter_regions_are_not_mutated() {
        // The same code with `cancel_order` inside an adapter region: its check, its writes and
        // its `if` are no site any more; `place_order`'s stay, at lines shifted by none.
        let wrapped = CODE.replace(
            "    def cancel_order",
            "# envsim: adapter begin\n    def cancel_order",
        );
        assert_eq!(
            site_lines(&wrapped, MutantKind::InvertedCheck),
            vec![14, 16]
        );
        assert_eq!(site_lines(&wrapped, MutantKind::DroppedWrite), vec![19]);
        // Closed again, what follows is the environment's own.
        let closed = wrapped.replace(
            "        del self.orders[order_id]",
            "# envsim: adapter end\n        del self.orders[order_id]",
        );
        assert_eq!(
            site_lines(&closed, MutantKind::DroppedWrite),
            vec![19, 30, 31]
        );
    }

    #[test]
    fn an_edit_replaces_its_line_only() {
        let edit = &sites(CODE, MutantKind::InvertedCheck)[1];
        let edited = apply(CODE, edit);
        let changed: Vec<(&str, &str)> = CODE
            .lines()
            .zip(edited.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(
            changed,
            vec![(
                "        if quantity > 10:  # a limit per order",
                "        if not (quantity > 10):"
            )]
        );
        assert_eq!(CODE.lines().count(), edited.lines().count());
    }

    #[test]
    fn mutants_of_a_package_keep_its_description_and_differ_in_code() {
        let dir = tempfile::tempdir().unwrap();
        let package = EnvPackage::load(&envsim_testkit::desk::write(dir.path()).unwrap()).unwrap();
        for kind in MutantKind::ALL {
            let found = mutants(&package, kind, 5, 3);
            let all_sites = sites(&package.code.code, kind).len();
            assert_eq!(found.len(), all_sites.min(5), "{kind:?}");
            for m in &found {
                assert_eq!(m.package.manifest, package.manifest);
                assert_eq!(m.package.states, package.states);
                assert_ne!(m.package.code.code, package.code.code);
                assert_eq!(m.edit.kind, kind);
            }
            // Seeded: the same draws again.
            let again: Vec<Edit> = mutants(&package, kind, 5, 3)
                .into_iter()
                .map(|m| m.edit)
                .collect();
            assert_eq!(
                again,
                found.iter().map(|m| m.edit.clone()).collect::<Vec<_>>()
            );
        }
    }
}
