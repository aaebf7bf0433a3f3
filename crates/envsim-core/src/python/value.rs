//! [`PyValue`]: the Python objects that `json.loads` and `ast.literal_eval`
//! can produce, with CPython's equality and hashing.
//!
//! The reference scorer compares what it parsed with Python's `==` and uses
//! parsed values as dict keys, so the types JSON cannot tell apart matter:
//! `(1, 2) != [1, 2]`, `b'a' != 'a'`, `{1: 'x'} != {'1': 'x'}`, while
//! `1 == 1.0 == True` and `1 == (1+0j)`. Integers are exact at any size.
//!
//! Equality comes in the two flavours CPython has: [`py_eq`] is the `==`
//! operator, [`PyValue::contained_eq`] is what containers use on their items
//! (`PyObject_RichCompareBool`), which tests identity first. The only value
//! that is not equal to itself is NaN, and every NaN envsim can meet is the
//! one object `json.loads` returns for `NaN` (it hands out the same float
//! each time), so inside containers NaN equals NaN while `nan == nan` at the
//! top level is false, exactly as in the reference.

use std::hash::{BuildHasherDefault, DefaultHasher, Hash, Hasher};

use indexmap::{Equivalent, IndexMap, IndexSet};
use num_bigint::BigInt;
use serde_json::Value;

use super::int::PyInt;
use super::text;

/// The fixed hasher of envsim's Python dicts and sets: deterministic, so
/// scoring never depends on a random seed.
pub type PyHasher = BuildHasherDefault<DefaultHasher>;

/// A Python object of the kinds the reference scorer's parsers produce.
#[derive(Clone, Debug)]
pub enum PyValue {
    /// `None`.
    None,
    /// `...` (`ast.literal_eval` accepts it).
    Ellipsis,
    /// `True` / `False`.
    Bool(bool),
    /// `int`, exact.
    Int(PyInt),
    /// `float`.
    Float(f64),
    /// `complex`.
    Complex {
        /// Real part.
        re: f64,
        /// Imaginary part.
        im: f64,
    },
    /// `str`.
    Str(PyStr),
    /// `bytes`.
    Bytes(Box<[u8]>),
    /// `list`.
    List(Vec<PyValue>),
    /// `tuple`.
    Tuple(Vec<PyValue>),
    /// `dict`.
    Dict(Box<PyDict>),
    /// `set`.
    Set(Box<PySet>),
}

/// A Python `str`: code points stored as generalized UTF-8 (see
/// [`super::text`]), so lone surrogates survive.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PyStr(Box<[u8]>);

impl PyStr {
    /// Wraps generalized UTF-8 bytes (as built by [`text::encode`]).
    pub(crate) fn from_wtf(bytes: Vec<u8>) -> PyStr {
        PyStr(bytes.into_boxed_slice())
    }

    /// The generalized UTF-8 bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The text as `&str`, unless it holds a lone surrogate.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// The text, with lone surrogates replaced by U+FFFD (for messages).
    pub fn to_string_lossy(&self) -> String {
        text::code_points(&self.0)
            .map(|cp| char::from_u32(cp).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    }

    /// Number of code points (`len()` in Python).
    pub fn char_len(&self) -> usize {
        text::code_points(&self.0).count()
    }
}

impl From<&str> for PyStr {
    fn from(s: &str) -> PyStr {
        PyStr(s.as_bytes().into())
    }
}

impl From<String> for PyStr {
    fn from(s: String) -> PyStr {
        PyStr(s.into_bytes().into_boxed_slice())
    }
}

impl std::fmt::Debug for PyStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", super::repr::str_repr(self))
    }
}

/// A value known to be hashable, as stored in dict keys and sets.
#[derive(Clone, Debug)]
pub struct PyKey(PyValue);

impl PyKey {
    /// The key's value.
    pub fn value(&self) -> &PyValue {
        &self.0
    }
}

impl PartialEq for PyKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.contained_eq(&other.0)
    }
}

impl Eq for PyKey {}

impl Hash for PyKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_value(&self.0, state);
    }
}

/// A borrowed value used to look a key up without cloning it.
struct KeyRef<'a>(&'a PyValue);

impl Hash for KeyRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_value(self.0, state);
    }
}

impl Equivalent<PyKey> for KeyRef<'_> {
    fn equivalent(&self, key: &PyKey) -> bool {
        self.0.contained_eq(&key.0)
    }
}

/// Python's `TypeError: unhashable type`: a list, dict or set (or a tuple
/// holding one) used as a dict key or set element.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unhashable type: '{type_name}'")]
pub struct Unhashable {
    /// The Python type name of the offending value.
    pub type_name: &'static str,
}

/// A Python `dict`: insertion-ordered, keys compared with Python equality
/// (`1`, `1.0` and `True` are one key).
#[derive(Clone, Debug, Default)]
pub struct PyDict(IndexMap<PyKey, PyValue, PyHasher>);

impl PyDict {
    /// An empty dict.
    pub fn new() -> PyDict {
        PyDict::default()
    }

    /// `len(d)`.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the dict is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `d[key] = value`: an equal key already present keeps its place and its
    /// original key object; only the value changes. Returns the old value.
    ///
    /// # Errors
    ///
    /// [`Unhashable`] when `key` cannot be hashed.
    pub fn insert(&mut self, key: PyValue, value: PyValue) -> Result<Option<PyValue>, Unhashable> {
        check_hashable(&key)?;
        Ok(self.0.insert(PyKey(key), value))
    }

    /// `d.get(key)` (an unhashable key raises in Python; see [`Self::lookup`]).
    pub fn get(&self, key: &PyValue) -> Option<&PyValue> {
        self.0.get(&KeyRef(key))
    }

    /// `d.get(key)` for a string key.
    pub fn get_str(&self, key: &str) -> Option<&PyValue> {
        self.get(&PyValue::Str(PyStr::from(key)))
    }

    /// Position of `key`, or `Err` if Python would raise on the lookup.
    ///
    /// # Errors
    ///
    /// [`Unhashable`] when `key` cannot be hashed.
    pub fn lookup(&self, key: &PyValue) -> Result<Option<usize>, Unhashable> {
        check_hashable(key)?;
        Ok(self.0.get_index_of(&KeyRef(key)))
    }

    /// The entry at `index`.
    pub fn get_index(&self, index: usize) -> Option<(&PyValue, &PyValue)> {
        self.0.get_index(index).map(|(k, v)| (&k.0, v))
    }

    /// The value at `index`, mutably.
    pub fn get_index_mut(&mut self, index: usize) -> Option<&mut PyValue> {
        self.0.get_index_mut(index).map(|(_, v)| v)
    }

    /// Removes the entry at `index`, moving the last entry into its place
    /// (undo with [`Self::restore_swapped`]).
    pub(crate) fn swap_remove_index(&mut self, index: usize) -> Option<(PyKey, PyValue)> {
        self.0.swap_remove_index(index)
    }

    /// Undoes [`Self::swap_remove_index`]: puts `key` back at `index`.
    pub(crate) fn restore_swapped(&mut self, index: usize, key: PyKey, value: PyValue) {
        let (at, _) = self.0.insert_full(key, value);
        self.0.swap_indices(index, at);
    }

    /// Removes the last entry (undo of an insertion of a new key).
    pub(crate) fn pop(&mut self) -> Option<(PyKey, PyValue)> {
        self.0.pop()
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&PyValue, &PyValue)> {
        self.0.iter().map(|(k, v)| (&k.0, v))
    }
}

/// A Python `set`, in insertion order (CPython iterates in hash order; only
/// `repr` could tell, and envsim never relies on it).
#[derive(Clone, Debug, Default)]
pub struct PySet(IndexSet<PyKey, PyHasher>);

impl PySet {
    /// An empty set.
    pub fn new() -> PySet {
        PySet::default()
    }

    /// `s.add(value)`; an equal element already present stays.
    ///
    /// # Errors
    ///
    /// [`Unhashable`] when `value` cannot be hashed.
    pub fn add(&mut self, value: PyValue) -> Result<(), Unhashable> {
        check_hashable(&value)?;
        self.0.insert(PyKey(value));
        Ok(())
    }

    /// `value in s` for a hashable value.
    pub fn contains(&self, value: &PyValue) -> bool {
        self.0.contains(&KeyRef(value))
    }

    /// `len(s)`.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The elements.
    pub fn iter(&self) -> impl Iterator<Item = &PyValue> {
        self.0.iter().map(|k| &k.0)
    }
}

fn check_hashable(value: &PyValue) -> Result<(), Unhashable> {
    match value {
        PyValue::List(_) | PyValue::Dict(_) | PyValue::Set(_) => Err(Unhashable {
            type_name: value.type_name(),
        }),
        PyValue::Tuple(items) => items.iter().try_for_each(check_hashable),
        _ => Ok(()),
    }
}

impl PyValue {
    /// A `str`.
    pub fn str(s: &str) -> PyValue {
        PyValue::Str(PyStr::from(s))
    }

    /// An `int`.
    pub fn int(i: i64) -> PyValue {
        PyValue::Int(PyInt::Small(i))
    }

    /// The Python type name (`type(x).__name__`).
    pub fn type_name(&self) -> &'static str {
        match self {
            PyValue::None => "NoneType",
            PyValue::Ellipsis => "ellipsis",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Complex { .. } => "complex",
            PyValue::Str(_) => "str",
            PyValue::Bytes(_) => "bytes",
            PyValue::List(_) => "list",
            PyValue::Tuple(_) => "tuple",
            PyValue::Dict(_) => "dict",
            PyValue::Set(_) => "set",
        }
    }

    /// Python truthiness (`bool(x)`).
    pub fn is_truthy(&self) -> bool {
        match self {
            PyValue::None => false,
            PyValue::Ellipsis => true,
            PyValue::Bool(b) => *b,
            PyValue::Int(i) => !i.is_zero(),
            PyValue::Float(f) => *f != 0.0,
            PyValue::Complex { re, im } => *re != 0.0 || *im != 0.0,
            PyValue::Str(s) => !s.as_bytes().is_empty(),
            PyValue::Bytes(b) => !b.is_empty(),
            PyValue::List(items) | PyValue::Tuple(items) => !items.is_empty(),
            PyValue::Dict(d) => !d.is_empty(),
            PyValue::Set(s) => !s.is_empty(),
        }
    }

    /// Whether the value can be hashed (a dict key or set element).
    pub fn is_hashable(&self) -> bool {
        check_hashable(self).is_ok()
    }

    /// Equality as containers test their items: identity first, so the JSON
    /// NaN object equals itself. See the [module docs](self).
    pub fn contained_eq(&self, other: &PyValue) -> bool {
        eq_inner(self, other, true)
    }

    /// Converts decoded JSON (a benchmark's states) into the objects
    /// `json.load` would have built.
    pub fn from_json(value: &Value) -> PyValue {
        match value {
            Value::Null => PyValue::None,
            Value::Bool(b) => PyValue::Bool(*b),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    PyValue::int(i)
                } else if let Some(u) = n.as_u64() {
                    PyValue::Int(PyInt::from_bigint(BigInt::from(u)))
                } else {
                    PyValue::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => PyValue::str(s),
            Value::Array(items) => PyValue::List(items.iter().map(PyValue::from_json).collect()),
            Value::Object(map) => {
                let mut dict = PyDict(IndexMap::with_capacity_and_hasher(
                    map.len(),
                    PyHasher::default(),
                ));
                for (k, v) in map {
                    dict.0.insert(PyKey(PyValue::str(k)), PyValue::from_json(v));
                }
                PyValue::Dict(Box::new(dict))
            }
        }
    }
}

impl PyValue {
    /// A JSON rendering for display and for records that need JSON (not for scoring): tuples
    /// and sets become arrays, bytes the text they decode to (lossily), dict keys their
    /// `str()`, integers beyond `i64`/`u64` the nearest float, and values JSON cannot hold
    /// (NaN, infinities, complex numbers, `...`) their `repr()` as a string.
    pub fn to_json_lossy(&self) -> Value {
        let repr_string = || Value::String(super::repr::repr(self));
        match self {
            PyValue::None => Value::Null,
            PyValue::Bool(b) => Value::Bool(*b),
            PyValue::Int(PyInt::Small(i)) => Value::from(*i),
            PyValue::Int(PyInt::Big(big)) => match u64::try_from(&**big) {
                Ok(u) => Value::from(u),
                Err(_) => PyInt::Big(big.clone())
                    .to_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or_else(repr_string, Value::Number),
            },
            PyValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or_else(repr_string, Value::Number)
            }
            PyValue::Ellipsis | PyValue::Complex { .. } => repr_string(),
            PyValue::Str(s) => Value::String(s.to_string_lossy()),
            PyValue::Bytes(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
            PyValue::List(items) | PyValue::Tuple(items) => {
                Value::Array(items.iter().map(PyValue::to_json_lossy).collect())
            }
            PyValue::Set(set) => Value::Array(set.iter().map(PyValue::to_json_lossy).collect()),
            PyValue::Dict(dict) => Value::Object(
                dict.iter()
                    .map(|(k, v)| (super::repr::str_of(k).to_string_lossy(), v.to_json_lossy()))
                    .collect(),
            ),
        }
    }
}

/// Python's `a == b`. See the [module docs](self) for how NaN is treated.
pub fn py_eq(a: &PyValue, b: &PyValue) -> bool {
    eq_inner(a, b, false)
}

/// A number as Python compares it.
enum Num<'a> {
    Int(&'a PyInt),
    Small(i64),
    Float(f64),
    Complex(f64, f64),
}

fn num(v: &PyValue) -> Option<Num<'_>> {
    match v {
        PyValue::Bool(b) => Some(Num::Small(i64::from(*b))),
        PyValue::Int(i) => Some(Num::Int(i)),
        PyValue::Float(f) => Some(Num::Float(*f)),
        PyValue::Complex { re, im } => Some(Num::Complex(*re, *im)),
        _ => None,
    }
}

fn float_eq(x: f64, y: f64, nan_is_self: bool) -> bool {
    x == y || (nan_is_self && x.is_nan() && y.is_nan())
}

fn int_eq_float(i: &PyInt, f: f64) -> bool {
    i.eq_f64(f)
}

fn num_eq(a: Num<'_>, b: Num<'_>, nan_is_self: bool) -> bool {
    let small = PyInt::Small;
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x == y,
        (Num::Int(x), Num::Small(y)) | (Num::Small(y), Num::Int(x)) => *x == small(y),
        (Num::Small(x), Num::Small(y)) => x == y,
        (Num::Int(i), Num::Float(f)) | (Num::Float(f), Num::Int(i)) => int_eq_float(i, f),
        (Num::Small(i), Num::Float(f)) | (Num::Float(f), Num::Small(i)) => {
            int_eq_float(&small(i), f)
        }
        (Num::Float(x), Num::Float(y)) => float_eq(x, y, nan_is_self),
        (Num::Complex(re, im), Num::Complex(re2, im2)) => {
            float_eq(re, re2, nan_is_self) && float_eq(im, im2, nan_is_self)
        }
        (Num::Complex(re, im), other) | (other, Num::Complex(re, im)) => {
            im == 0.0 && num_eq(Num::Float(re), other, nan_is_self)
        }
    }
}

fn eq_inner(a: &PyValue, b: &PyValue, nan_is_self: bool) -> bool {
    match (a, b) {
        (PyValue::None, PyValue::None) | (PyValue::Ellipsis, PyValue::Ellipsis) => true,
        (PyValue::Str(x), PyValue::Str(y)) => x == y,
        (PyValue::Bytes(x), PyValue::Bytes(y)) => x == y,
        (PyValue::List(x), PyValue::List(y)) | (PyValue::Tuple(x), PyValue::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.contained_eq(q))
        }
        (PyValue::Dict(x), PyValue::Dict(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| v.contained_eq(w)))
        }
        (PyValue::Set(x), PyValue::Set(y)) => {
            x.len() == y.len() && x.iter().all(|item| y.contains(item))
        }
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => num_eq(x, y, nan_is_self),
            _ => false,
        },
    }
}

/// Hashes a hashable value consistently with [`PyValue::contained_eq`]:
/// equal numbers of different types hash alike.
fn hash_value<H: Hasher>(value: &PyValue, state: &mut H) {
    match value {
        PyValue::None => state.write_u8(0),
        PyValue::Ellipsis => state.write_u8(1),
        PyValue::Bool(b) => hash_int(&PyInt::Small(i64::from(*b)), state),
        PyValue::Int(i) => hash_int(i, state),
        PyValue::Float(f) => hash_float(*f, state),
        PyValue::Complex { re, im } if *im == 0.0 => hash_float(*re, state),
        PyValue::Complex { re, im } => {
            state.write_u8(2);
            state.write_u64(normalized_bits(*re));
            state.write_u64(normalized_bits(*im));
        }
        PyValue::Str(s) => {
            state.write_u8(3);
            s.as_bytes().hash(state);
        }
        PyValue::Bytes(b) => {
            state.write_u8(4);
            b.hash(state);
        }
        PyValue::Tuple(items) => {
            state.write_u8(5);
            state.write_usize(items.len());
            for item in items {
                hash_value(item, state);
            }
        }
        // Never keys: `check_hashable` keeps them out.
        PyValue::List(_) | PyValue::Dict(_) | PyValue::Set(_) => state.write_u8(6),
    }
}

fn normalized_bits(f: f64) -> u64 {
    if f == 0.0 {
        0
    } else if f.is_nan() {
        f64::NAN.to_bits()
    } else {
        f.to_bits()
    }
}

fn hash_int<H: Hasher>(i: &PyInt, state: &mut H) {
    state.write_u8(7);
    match i {
        PyInt::Small(v) => state.write_i64(*v),
        PyInt::Big(b) => b.to_signed_bytes_le().hash(state),
    }
}

fn hash_float<H: Hasher>(f: f64, state: &mut H) {
    match PyInt::from_integral_f64(f) {
        Some(i) => hash_int(&i, state),
        None => {
            state.write_u8(8);
            state.write_u64(normalized_bits(f));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(pairs: Vec<(PyValue, PyValue)>) -> PyValue {
        let mut d = PyDict::new();
        for (k, v) in pairs {
            d.insert(k, v).unwrap();
        }
        PyValue::Dict(Box::new(d))
    }

    #[test]
    fn numeric_tower() {
        let one = [
            PyValue::Bool(true),
            PyValue::int(1),
            PyValue::Float(1.0),
            PyValue::Complex { re: 1.0, im: 0.0 },
        ];
        for a in &one {
            for b in &one {
                assert!(py_eq(a, b), "{a:?} == {b:?}");
            }
        }
        assert!(!py_eq(
            &PyValue::int(1),
            &PyValue::Complex { re: 1.0, im: 1.0 }
        ));
        assert!(py_eq(&PyValue::Float(-0.0), &PyValue::int(0)));
        let big = PyInt::parse_decimal("9007199254740993").unwrap();
        assert!(!py_eq(
            &PyValue::Int(big),
            &PyValue::Float(9007199254740992.0)
        ));
        let two63 = PyInt::parse_decimal("9223372036854775808").unwrap();
        assert!(py_eq(
            &PyValue::Int(two63),
            &PyValue::Float(9223372036854775808.0)
        ));
    }

    #[test]
    fn nan_is_only_equal_inside_containers() {
        let nan = PyValue::Float(f64::NAN);
        assert!(!py_eq(&nan, &nan));
        assert!(py_eq(
            &PyValue::List(vec![nan.clone()]),
            &PyValue::List(vec![nan.clone()])
        ));
    }

    #[test]
    fn sequence_and_text_types_differ() {
        let items = vec![PyValue::int(1)];
        assert!(!py_eq(
            &PyValue::List(items.clone()),
            &PyValue::Tuple(items)
        ));
        assert!(!py_eq(
            &PyValue::str("a"),
            &PyValue::Bytes(b"a".as_slice().into())
        ));
    }

    #[test]
    fn dict_keys_follow_python_equality() {
        let d = dict(vec![
            (PyValue::int(1), PyValue::str("a")),
            (PyValue::Bool(true), PyValue::str("b")),
            (PyValue::Float(1.5), PyValue::None),
        ]);
        let PyValue::Dict(inner) = &d else {
            unreachable!()
        };
        assert_eq!(inner.len(), 2);
        assert!(
            matches!(inner.get_index(0), Some((PyValue::Int(_), PyValue::Str(s))) if s.as_str() == Some("b"))
        );
        assert!(inner.get(&PyValue::Float(1.0)).is_some());
        assert!(inner.get(&PyValue::str("1")).is_none());
        assert!(py_eq(
            &d,
            &dict(vec![
                (PyValue::Float(1.5), PyValue::None),
                (PyValue::Float(1.0), PyValue::str("b")),
            ])
        ));
        let mut e = PyDict::new();
        assert_eq!(
            e.insert(PyValue::List(vec![]), PyValue::None).err(),
            Some(Unhashable { type_name: "list" })
        );
        assert!(e
            .insert(
                PyValue::Tuple(vec![PyValue::Dict(Box::default())]),
                PyValue::None
            )
            .is_err());
    }

    #[test]
    fn from_json_builds_str_keyed_dicts() {
        let v = PyValue::from_json(&serde_json::json!({"a": [1, 2.5, null, true], "b": "x"}));
        let PyValue::Dict(d) = &v else { unreachable!() };
        assert!(matches!(d.get_str("a"), Some(PyValue::List(items)) if items.len() == 4));
        assert!(d.get_str("b").is_some());
    }
}
