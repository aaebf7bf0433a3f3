//! Boundary probes: a tool's successful call made again with one parameter at, or one past, a
//! number the tool's code compares it with.
//!
//! Random and guided draws stay clear of the exact places where a value one off changes the
//! answer (`len(title.strip()) < 5`, `weight > 31.5`, `quantity <= 0`): an argument drawn from
//! the state or pushed to a schema's edge seldom lands on the bound the code tests. Those are
//! the places where an off-by-one bound hides — boundary-value analysis tests both sides of
//! every bound, and a fuzzer's comparison feedback (libFuzzer's value profile, AFL++'s CmpLog)
//! puts the compared numbers into its inputs for the same reason. The numbers are read from
//! the code ([`envsim_exec::coverage::Comparison`]), not from an answer, so a bound no refusal
//! states is probed too.

use crate::driver::{concrete, schema_type, ToolSpec};
use envsim_exec::coverage::Comparison;
use serde_json::{Map, Number, Value};

/// One probe: a parameter set to a value on one side of a bound.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Probe {
    /// The parameter changed.
    pub(crate) param: String,
    /// What it is set to.
    pub(crate) value: Probed,
}

/// The value a probe gives its parameter.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Probed {
    /// This number (an integer where the parameter takes integers).
    Number(f64),
    /// A text, or a list, of this length made from the call's own value.
    Length(usize),
}

/// The probes of `tool`, from the comparisons of its own function and of helpers whose
/// parameter has the name of one of the tool's: the value on the far side of each bound first
/// (`< N`: N; `<= N`: N + 1), every bound's first value before any bound's second, each once.
pub(crate) fn probes_of(
    tool: &ToolSpec,
    comparisons: &[Comparison],
    tools: &[ToolSpec],
) -> Vec<Probe> {
    let is_tool = |name: &str| tools.iter().any(|t| t.name == name);
    let mut sides: Vec<Vec<Probe>> = Vec::new();
    for comparison in comparisons {
        let own = comparison.function == tool.name;
        if !own && is_tool(&comparison.function) {
            continue;
        }
        let Some(param) = tool.params.iter().find(|p| p.name == comparison.parameter) else {
            continue;
        };
        let kind = schema_type(concrete(&param.schema));
        let values = sides_of(&comparison.operator, comparison.number);
        let probed: Vec<Probed> = if comparison.length {
            if !matches!(kind, "string" | "array" | "") {
                continue;
            }
            values
                .into_iter()
                .filter(|v| *v >= 0.0 && v.fract() == 0.0 && *v <= 100_000.0)
                .map(|v| Probed::Length(v as usize))
                .collect()
        } else {
            match kind {
                "integer" => values
                    .into_iter()
                    .flat_map(|v| {
                        if v.fract() == 0.0 {
                            vec![v]
                        } else {
                            vec![v.ceil(), v.floor()]
                        }
                    })
                    .map(Probed::Number)
                    .collect(),
                "number" | "" => values.into_iter().map(Probed::Number).collect(),
                _ => continue,
            }
        };
        let probes = probed
            .into_iter()
            .map(|value| Probe {
                param: param.name.clone(),
                value,
            })
            .collect();
        sides.push(probes);
    }
    let mut out: Vec<Probe> = Vec::new();
    let longest = sides.iter().map(Vec::len).max().unwrap_or(0);
    for rank in 0..longest {
        for probe in sides.iter().filter_map(|s| s.get(rank)) {
            if !out.contains(probe) {
                out.push(probe.clone());
            }
        }
    }
    out
}

/// The values on both sides of `parameter operator number`, the one a bound one off would
/// answer differently first.
fn sides_of(operator: &str, n: f64) -> Vec<f64> {
    match operator {
        "<" | ">=" => vec![n, n - 1.0],
        "<=" | ">" => vec![n + 1.0, n],
        _ => vec![n, n + 1.0, n - 1.0],
    }
}

/// `args` with the probe's parameter set; `None` when the call's value cannot be made to the
/// probe's length (a list the call did not give).
pub(crate) fn applied(probe: &Probe, args: &Map<String, Value>) -> Option<Map<String, Value>> {
    let current = args.get(&probe.param);
    let value = match probe.value {
        Probed::Number(n) => number(n)?,
        Probed::Length(length) => match current {
            Some(Value::Array(items)) if !items.is_empty() || length == 0 => {
                Value::Array(distinct_items(items, length))
            }
            Some(Value::Array(_)) => return None,
            Some(Value::String(text)) => Value::String(of_length(text, length)),
            _ => Value::String(of_length(&probe.param.replace('_', " "), length)),
        },
    };
    let mut out = args.clone();
    out.insert(probe.param.clone(), value);
    Some(out)
}

/// A JSON number for `n`: an integer where it is one.
fn number(n: f64) -> Option<Value> {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        Some(Value::Number(Number::from(n as i64)))
    } else {
        Number::from_f64(n).map(Value::Number)
    }
}

/// `length` items from `items`, repeated where there are fewer, each repeat made distinct
/// where it can be (a list's bound is seldom the only rule: `nameservers must be distinct`):
/// a text gets a letter before it (`bns1.example.net`), a number a multiple of its count added.
fn distinct_items(items: &[Value], length: usize) -> Vec<Value> {
    (0..length)
        .map(|k| {
            let item = &items[k % items.len()];
            let round = k / items.len();
            if round == 0 {
                return item.clone();
            }
            match item {
                Value::String(text) => {
                    let letter = char::from(b'a' + (round % 26) as u8);
                    Value::String(format!("{letter}{text}"))
                }
                Value::Number(n) => match n.as_i64() {
                    Some(i) => Value::from(i + (round * items.len()) as i64),
                    None => item.clone(),
                },
                _ => item.clone(),
            }
        })
        .collect()
}

/// `text` made exactly `length` characters long, with no space at either end (codes strip
/// before they count): cut, or lengthened — a text of one word by its own characters (a pin
/// stays digits, a code stays a code), else with words of its own kind.
fn of_length(text: &str, length: usize) -> String {
    let word = text.trim();
    let long = if !word.is_empty() && !word.contains(char::is_whitespace) {
        word.chars()
            .cycle()
            .take(length.max(word.chars().count()))
            .collect()
    } else {
        crate::refusal::lengthened(text, length)
    };
    let mut chars: Vec<char> = long.chars().take(length).collect();
    // Both ways of lengthening start from the trimmed text: only the cut can end on a space.
    while chars.last().is_some_and(|c| c.is_whitespace()) {
        chars.pop();
    }
    while chars.len() < length {
        chars.push('x');
    }
    chars.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, params: Value) -> ToolSpec {
        ToolSpec::from_schema(&json!({"type": "function", "function": {
            "name": name, "description": "",
            "parameters": {"type": "object", "properties": params}}}))
        .unwrap()
    }

    fn compared(function: &str, parameter: &str, length: bool, op: &str, n: f64) -> Comparison {
        Comparison {
            function: function.into(),
            parameter: parameter.into(),
            length,
            operator: op.into(),
            number: n,
        }
    }

    #[test]
    fn the_far_side_of_every_bound_comes_first_and_types_are_kept() {
        let ship = tool(
            "ship",
            json!({"weight": {"type": "number"}, "count": {"type": "integer"},
                   "note": {"type": "string"}, "id": {"type": "string"}}),
        );
        let other = tool("other", json!({"weight": {"type": "number"}}));
        let comparisons = [
            compared("ship", "weight", false, ">", 31.5),
            compared("ship", "count", false, "<=", 0.0),
            compared("_check", "note", true, ">=", 5.0),
            compared("ship", "note", true, "<=", 120.0),
            // Another tool's bound on a parameter of the same name is that tool's.
            compared("other", "weight", false, "<", 2.0),
            // A length of a parameter the schema says is a number is not probed.
            compared("ship", "count", true, "<", 3.0),
            compared("ship", "id", false, "==", 4.0),
        ];
        let probes = probes_of(&ship, &comparisons, &[ship.clone(), other]);
        let got: Vec<(&str, Probed)> = probes
            .iter()
            .map(|p| (p.param.as_str(), p.value.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("weight", Probed::Number(32.5)),
                ("count", Probed::Number(1.0)),
                ("note", Probed::Length(5)),
                ("note", Probed::Length(121)),
                ("weight", Probed::Number(31.5)),
                ("count", Probed::Number(0.0)),
                ("note", Probed::Length(4)),
                ("note", Probed::Length(120)),
            ]
        );
    }

    #[test]
    fn an_integer_parameter_takes_whole_numbers_on_both_sides_of_a_fraction() {
        let book = tool("book", json!({"hours": {"type": "integer"}}));
        let probes = probes_of(
            &book,
            &[compared("book", "hours", false, "<", 0.5)],
            std::slice::from_ref(&book),
        );
        let values: Vec<Probed> = probes.into_iter().map(|p| p.value).collect();
        assert_eq!(
            values,
            [
                Probed::Number(1.0),
                Probed::Number(0.0),
                Probed::Number(-1.0)
            ]
        );
    }

    #[test]
    fn applied_probes_have_the_exact_length_or_number() {
        let args = json!({"title": "  Vintage lamp  ", "tags": ["a", "b"], "n": 3})
            .as_object()
            .unwrap()
            .clone();
        let probe = |param: &str, value| Probe {
            param: param.into(),
            value,
        };
        for length in [0, 1, 4, 5, 13, 121] {
            let out = applied(&probe("title", Probed::Length(length)), &args).unwrap();
            let title = out["title"].as_str().unwrap();
            assert_eq!(title.chars().count(), length, "{title:?}");
            assert_eq!(title.trim().chars().count(), length, "{title:?}");
        }
        let out = applied(&probe("tags", Probed::Length(5)), &args).unwrap();
        assert_eq!(out["tags"], json!(["a", "b", "ba", "bb", "ca"]));
        let numbers = json!({"ids": [1, 2], "pin": "1234"})
            .as_object()
            .unwrap()
            .clone();
        let out = applied(&probe("ids", Probed::Length(4)), &numbers).unwrap();
        assert_eq!(out["ids"], json!([1, 2, 3, 4]));
        // A word is lengthened by its own characters: a pin stays digits.
        let out = applied(&probe("pin", Probed::Length(9)), &numbers).unwrap();
        assert_eq!(out["pin"], json!("123412341"));
        let out = applied(&probe("pin", Probed::Length(3)), &numbers).unwrap();
        assert_eq!(out["pin"], json!("123"));
        let out = applied(&probe("n", Probed::Number(32.5)), &args).unwrap();
        assert_eq!(out["n"], json!(32.5));
        let out = applied(&probe("n", Probed::Number(-1.0)), &args).unwrap();
        assert_eq!(out["n"], json!(-1));
        // A parameter the call left out gets a text made from its name.
        let out = applied(&probe("reason_text", Probed::Length(8)), &args).unwrap();
        assert_eq!(out["reason_text"], json!("reason t"));
        // A cut that ends on a space ends on a letter instead.
        let out = applied(&probe("reason_text", Probed::Length(7)), &args).unwrap();
        assert_eq!(out["reason_text"], json!("reasonx"));
        let empty = json!({"tags": []}).as_object().unwrap().clone();
        assert_eq!(applied(&probe("tags", Probed::Length(2)), &empty), None);
        assert_eq!(
            applied(&probe("tags", Probed::Length(0)), &empty).unwrap()["tags"],
            json!([])
        );
    }
}
