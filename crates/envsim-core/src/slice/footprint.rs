//! Footprints and the oracle: the paths a traced call read, the slice they make, and whether a
//! slice covers them.

use super::*;
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
pub(super) fn reorder(slice: &mut Value, like: &Value) {
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
pub(super) fn copy_path(from: &Value, to: &mut Value, tokens: &[String]) {
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
