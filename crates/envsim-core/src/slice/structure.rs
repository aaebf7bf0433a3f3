//! The source's structure: the environment class or the database functions, their methods and
//! parameters, and the references between them.

use super::*;
#[derive(Clone, Debug)]
pub(super) struct Param {
    pub(super) name: String,
    /// `*args`, `**kwargs`, or the `*`/`/` markers.
    pub(super) star: bool,
}

#[derive(Clone, Debug)]
pub(super) struct Method {
    pub(super) name: String,
    pub(super) item: Item,
    pub(super) decorators: Vec<String>,
    pub(super) params: Vec<Param>,
    /// Byte range of the body (after the signature's `:`).
    pub(super) body: (usize, usize),
    /// A module-level function (database convention), not a method.
    pub(super) module_level: bool,
}

impl Method {
    pub(super) fn is_static(&self) -> bool {
        self.decorators.iter().any(|d| d == "staticmethod")
    }

    pub(super) fn is_class_method(&self) -> bool {
        self.decorators.iter().any(|d| d == "classmethod")
    }

    pub(super) fn is_dunder(&self) -> bool {
        self.name.len() > 4 && self.name.starts_with("__") && self.name.ends_with("__")
    }
}

/// A `self.<name>` in a method body: the byte of `self` and the byte after `<name>`.
#[derive(Clone, Debug)]
pub(super) struct SelfRef {
    pub(super) at: usize,
    pub(super) name: String,
    pub(super) after: usize,
}

pub(super) struct Analysis<'a> {
    pub(super) src: Src<'a>,
    /// The convention the code was read in.
    pub(super) convention: Convention,
    /// The environment class (empty in the database convention).
    pub(super) class_name: String,
    /// Flat units in source order: `(first line, end line, method index)`.
    pub(super) units: Vec<(usize, usize, Option<usize>)>,
    /// The class's methods, or the module-level functions in the database convention.
    pub(super) methods: Vec<Method>,
}

pub(super) fn analyse<'a>(env_code: &'a str, tool: &str) -> Result<Analysis<'a>, String> {
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
pub(super) fn analyse_database<'a>(env_code: &'a str, tool: &str) -> Result<Analysis<'a>, String> {
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

pub(super) const NOT_DEFINED_CLASS: &str = "no class defines ";
pub(super) const NOT_DEFINED_FUNCTION: &str = "no module-level function defines ";

/// Reads the code in `convention`, or in the other one when the tool is not defined the
/// declared way but is the other way (a module-level function in a class package is read as
/// the database convention, and the reverse).
pub(super) fn analyse_as<'a>(
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

pub(super) fn first_code_indent(src: &Src<'_>, from: usize, to: usize) -> Option<usize> {
    (from..to)
        .find(|&l| src.lines[l].kind == Kind::Code)
        .map(|l| src.lines[l].indent)
}

/// The methods in a class body (lines `[from, to)`); `None` when the body does not parse.
pub(super) fn class_methods(src: &Src<'_>, from: usize, to: usize) -> Option<Vec<Method>> {
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

pub(super) fn params(src: &Src<'_>, open: usize, close: usize, base: u32) -> Vec<Param> {
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
pub(super) fn self_refs(src: &Src<'_>, (from, to): (usize, usize)) -> (Vec<SelfRef>, Vec<usize>) {
    name_refs(src, "self", (from, to))
}

/// Every `<base>.<name>` and bare `<base>` in a byte range.
pub(super) fn name_refs(
    src: &Src<'_>,
    base: &str,
    (from, to): (usize, usize),
) -> (Vec<SelfRef>, Vec<usize>) {
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
pub(super) fn idents_in<'a>(src: &Src<'a>, (from, to): (usize, usize)) -> Vec<(usize, &'a str)> {
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

pub(super) const FORBIDDEN_CALLS: [&str; 6] =
    ["eval", "exec", "globals", "locals", "super", "__import__"];

/// Checks one kept method for dynamic access; returns the methods it names.
pub(super) fn method_refs(a: &Analysis<'_>, m: &Method) -> Result<BTreeSet<String>, String> {
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
