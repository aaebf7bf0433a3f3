//! The code slice: the methods one tool can reach, and the tables (state containers) it uses,
//! how, and why.

use super::*;
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
pub(super) fn reachable_methods(a: &Analysis<'_>, tool: &str) -> Result<BTreeSet<String>, String> {
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
pub(super) const FORBIDDEN_FUNCTION_CALLS: [&str; 6] =
    ["eval", "exec", "globals", "locals", "vars", "__import__"];

/// The module-level functions one call of `tool` can run (database convention): the tool,
/// every function named by a module-level statement that is not a function (those are kept
/// anyway), and every function a kept one names, transitively (called or not; never as an
/// attribute `x.name`). An error says why the analysis gives up.
pub(super) fn reachable_functions(
    a: &Analysis<'_>,
    tool: &str,
) -> Result<BTreeSet<String>, String> {
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
pub(super) fn named_params(m: &Method) -> impl Iterator<Item = (usize, &Param)> {
    let skip = usize::from(!m.is_static() && !m.module_level);
    m.params
        .iter()
        .skip(skip)
        .enumerate()
        .filter(|(_, p)| !p.star && !p.name.is_empty())
}

/// The arguments of the call whose `(` is at `open`, as trimmed texts; `None` when they cannot be
/// mapped to parameters safely (`*`/`**` unpacking, a `lambda`, whose commas would split it).
pub(super) fn call_args<'a>(src: &Src<'a>, open: usize, limit: usize) -> Option<Vec<&'a str>> {
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
pub(super) fn argument_for<'a>(args: &[&'a str], index: usize, name: &str) -> Option<&'a str> {
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
pub(super) fn bindings(
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
    pub(super) fn meet(a: Holds, b: Holds) -> Holds {
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
pub(super) enum Holder {
    Db,
    Table(String),
}

/// How the kept functions use one table, while they are being read.
#[derive(Clone, Debug, Default)]
pub(super) struct TableUse {
    pub(super) keys: BTreeSet<Vec<KeyPart>>,
    /// The first use that needs the whole table: (byte, reason).
    pub(super) whole: Option<(usize, String)>,
}

/// Where a table or database expression is passed as an argument.
pub(super) enum Passed {
    /// A parameter of a function of the analysed code.
    To(usize, String),
    /// A function the analysis does not follow (its name as written).
    Unknown(String),
}

/// How the kept functions use the state: per table, and the database as a whole.
pub(super) struct Uses<'s, 'a> {
    pub(super) a: &'s Analysis<'a>,
    /// (function, name) → the tool parameter the name holds.
    pub(super) bound: BTreeMap<(String, String), String>,
    pub(super) tables: BTreeMap<String, TableUse>,
    /// The first use of the database (database convention) that needs all of it.
    pub(super) db_whole: Option<(usize, String)>,
    /// Names to follow: (function, name, what it holds, byte of the one assignment that binds
    /// it, for a local alias).
    pub(super) work: Vec<(usize, String, Holder, Option<usize>)>,
    pub(super) seen: BTreeSet<(usize, String, Holder)>,
}

/// The result of [`table_uses`].
pub(super) struct TableUses {
    pub(super) attributes: BTreeMap<String, AttrUse>,
    pub(super) reasons: BTreeMap<String, String>,
    pub(super) database_whole: Option<String>,
}

pub(super) fn earliest(slot: &mut Option<(usize, String)>, at: usize, reason: String) {
    if slot.as_ref().is_none_or(|(first, _)| at < *first) {
        *slot = Some((at, reason));
    }
}

/// How the kept functions (not `__init__`) use each table: `self.<name>` in the class
/// convention, `data["<name>"]` (through aliases and helpers) in the database convention.
pub(super) fn table_uses(a: &Analysis<'_>, tool: &Method, kept: &BTreeSet<String>) -> TableUses {
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
    pub(super) fn follow_name(
        &mut self,
        fi: usize,
        name: String,
        holder: Holder,
        alias_at: Option<usize>,
    ) {
        if self.seen.insert((fi, name.clone(), holder.clone())) {
            self.work.push((fi, name, holder, alias_at));
        }
    }

    pub(super) fn whole(&mut self, holder: &Holder, at: usize, reason: String) {
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
    pub(super) fn at_line(&self, what: &str, at: usize) -> String {
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
    pub(super) fn uses_of(
        &mut self,
        fi: usize,
        name: &str,
        holder: &Holder,
        alias_at: Option<usize>,
    ) {
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
    pub(super) fn database(&mut self, fi: usize, (s, e): (usize, usize)) {
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
    pub(super) fn table(&mut self, fi: usize, span: (usize, usize), t: &str) {
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
    pub(super) fn follow(&mut self, fi: usize, span: (usize, usize), holder: &Holder) -> bool {
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
    pub(super) fn why_whole(&self, fi: usize, (s, e): (usize, usize)) -> String {
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
    pub(super) fn key_of(&self, fi: usize, text: &str) -> Option<Vec<KeyPart>> {
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

pub(super) fn is_name(t: &str) -> bool {
    t.bytes().next().is_some_and(is_ident_start)
        && t.bytes().all(is_ident)
        && !matches!(t, "None" | "True" | "False" | "not" | "in" | "lambda")
}

/// The text of a plain one-line string literal (`"…"`, `'…'`, optionally `u`-prefixed) without
/// escapes.
pub(super) fn str_literal(t: &str) -> Option<String> {
    let t = t.strip_prefix(['u', 'U']).unwrap_or(t);
    let q = t.chars().next().filter(|&c| c == '"' || c == '\'')?;
    let body = t.strip_prefix(q)?.strip_suffix(q)?;
    (t.len() >= 2 && !body.contains(q) && !body.contains('\\') && !body.contains('\n'))
        .then(|| body.to_owned())
}

/// An f-string's pieces: `(true, literal text)` and `(false, expression)`; `None` unless it is
/// a one-line f-string without escapes, doubled braces, conversions or format specs.
pub(super) fn fstring_parts(t: &str) -> Option<Vec<(bool, &str)>> {
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
pub(super) fn matching(src: &Src<'_>, open: usize, limit: usize) -> Option<usize> {
    let base = *src.depth.get(open)?;
    let kind = *src.class.get(open)?;
    (open + 1..limit.min(src.b.len())).find(|&k| {
        matches!(src.b[k], b')' | b']' | b'}') && src.class[k] == kind && src.depth[k] == base
    })
}

/// True when the identifier at `at` names a keyword argument (`f(name=…)`).
pub(super) fn is_keyword_name(src: &Src<'_>, at: usize, len: usize, limit: usize) -> bool {
    let k = src.skip_space(at + len, limit);
    let eq = src.b.get(k) == Some(&b'=') && src.b.get(k + 1) != Some(&b'=');
    let j = src.skip_space_back(at, 0);
    eq && src.depth[at] > 0 && j > 0 && matches!(src.b[j - 1], b'(' | b',')
}

/// The key text of a lookup of the value at `span`: `X[key]`, `X.get(key…`, `X.pop(key…`,
/// `X.setdefault(key…`, `key in X`, `key not in X` (nothing binding tighter around it).
pub(super) fn lookup_operand<'a>(
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
pub(super) fn membership_operand<'a>(
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
pub(super) fn alias_def<'a>(
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
pub(super) fn passed_to(
    a: &Analysis<'_>,
    (s, e): (usize, usize),
    body: (usize, usize),
) -> Option<Passed> {
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
pub(super) enum Tok<'a> {
    Ident(&'a str),
    Op(&'a str),
    Str,
    End,
}

pub(super) fn tokens<'a>(src: &Src<'a>, (from, to): (usize, usize)) -> Vec<(Tok<'a>, u32, usize)> {
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

pub(super) const AUGMENTED: [&str; 14] = [
    "+=", "-=", "*=", "/=", "//=", "%=", "**=", ">>=", "<<=", "&=", "|=", "^=", "@=", ":=",
];

/// True when name `p` is never bound in the body, except by the statement that starts at byte
/// `except` (a local alias's one assignment).
pub(super) fn is_stable(
    src: &Src<'_>,
    body: (usize, usize),
    p: &str,
    except: Option<usize>,
) -> bool {
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
