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

mod code;
mod footprint;
mod scan;
mod state;
mod structure;
#[cfg(test)]
mod tests;

pub use code::{slice_code, slice_code_as};
pub use footprint::{footprint, slice_covers, slice_with_reads, Footprint};
use scan::*;
pub use state::slice_state;
use structure::*;
