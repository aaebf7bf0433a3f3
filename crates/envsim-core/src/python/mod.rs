//! A model of the Python objects and parsers the reference scorer depends on.
//!
//! The reference evaluator reads model output with `json.loads` and
//! `ast.literal_eval`, compares with `==` and writes into dicts keyed by
//! whatever it parsed. Reproducing its numbers byte for byte needs those
//! semantics exactly, not a JSON approximation: [`PyValue`] holds the objects
//! (tuples, sets, bytes, complex numbers, exact integers, non-string dict
//! keys, strings with lone surrogates), [`json_loads`] and [`literal_eval`]
//! are CPython 3.11's parsers, [`py_eq`] its equality and [`repr`] its
//! spelling.
//!
//! Pure functions over bytes: no I/O, no global state, no panics; nesting is
//! bounded (the parsers take CPython's own limits), so hostile input cannot
//! exhaust the stack.

pub mod int;
pub mod json;
pub mod literal;
pub mod repr;
pub mod text;
mod tokenize;
mod unicode_names;
pub mod value;

pub use int::PyInt;
pub use json::{json_loads, JsonError};
pub use literal::{literal_eval, LiteralEvalError};
pub use repr::{repr, str_of};
pub use value::{py_eq, PyDict, PyKey, PySet, PyStr, PyValue, Unhashable};
