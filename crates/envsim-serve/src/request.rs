//! The body of `POST /sessions`, checked field by field: a wrong type, a value out of range
//! or a field the server does not know is refused with the field's name, never read as a
//! default (`"fault_rate": "high"` is no fault rate, and a misspelt `"primery"` would
//! otherwise leave the default simulator in place without a word).

use envsim_sim::session::AnchorMode;
use envsim_sim::verify::VerifyPolicy;
use serde_json::{Map, Value};

/// The fields a creation request may carry.
pub const FIELDS: [&str; 10] = [
    "env",
    "state",
    "no_code",
    "primary",
    "secondary",
    "fault_rate",
    "anchor",
    "max_regenerations",
    "verify",
    "seed",
];

/// The most regenerations a session may ask for per step.
pub const MAX_REGENERATIONS: u64 = 10;

/// A session's creation request.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionRequest {
    /// The environment's name.
    pub env: String,
    /// The initial state (`None`: the environment's first).
    pub state: Option<Map<String, Value>>,
    /// Simulate from the generated description only.
    pub no_code: bool,
    /// The primary simulator's kind, as named (the host knows the kinds).
    pub primary: Option<String>,
    /// The secondary simulator's kind.
    pub secondary: Option<String>,
    /// The faulty double's error rate (the host's default when absent).
    pub fault_rate: Option<f64>,
    /// How answers are anchored.
    pub anchor: AnchorMode,
    /// Regenerations per step.
    pub max_regenerations: usize,
    /// Verification against a second simulator.
    pub verify: Option<VerifyPolicy>,
    /// Seed of the session's draws.
    pub seed: u64,
}

/// A refusal: the field and what is wrong with it.
fn refuse(field: &str, what: impl std::fmt::Display) -> String {
    format!("field `{field}`: {what}")
}

/// A value in words for an error: its JSON text, cut short.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(59).collect::<String>())
    } else {
        text
    }
}

impl SessionRequest {
    /// Reads a creation body, refusing the first field that is wrong (module doc).
    pub fn parse(body: &Value) -> Result<SessionRequest, String> {
        let Value::Object(fields) = body else {
            return Err("the request body must be a JSON object".into());
        };
        if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(format!(
                "unknown field `{unknown}` (the fields are {})",
                FIELDS.join(", ")
            ));
        }
        // A field given as null is a field not given.
        let get = |name: &str| fields.get(name).filter(|v| !v.is_null());
        let string = |name: &str| -> Result<Option<String>, String> {
            match get(name) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(refuse(
                    name,
                    format!("must be a string, not {}", shown(other)),
                )),
            }
        };
        let env = match string("env")? {
            Some(env) if !env.is_empty() => env,
            Some(_) => return Err(refuse("env", "is empty")),
            None => return Err(refuse("env", "is missing (the environment's name)")),
        };
        let state = match get("state") {
            None => None,
            Some(Value::Object(state)) => Some(state.clone()),
            Some(other) => {
                return Err(refuse(
                    "state",
                    format!("must be a JSON object, not {}", shown(other)),
                ))
            }
        };
        let no_code = match get("no_code") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(refuse(
                    "no_code",
                    format!("must be true or false, not {}", shown(other)),
                ))
            }
        };
        let fault_rate = match get("fault_rate") {
            None => None,
            Some(v) => match v.as_f64() {
                Some(rate) if (0.0..=1.0).contains(&rate) => Some(rate),
                _ => {
                    return Err(refuse(
                        "fault_rate",
                        format!("must be a number between 0 and 1, not {}", shown(v)),
                    ))
                }
            },
        };
        let anchor = match string("anchor")?.as_deref() {
            None | Some("full") => AnchorMode::Full,
            Some("validate") => AnchorMode::Validate,
            Some("off") => AnchorMode::Off,
            Some(other) => {
                return Err(refuse(
                    "anchor",
                    format!("{other:?} is not off, validate or full"),
                ))
            }
        };
        let max_regenerations = match get("max_regenerations") {
            None => 2,
            Some(v) => match v.as_u64() {
                Some(n) if n <= MAX_REGENERATIONS => n as usize,
                _ => {
                    return Err(refuse(
                        "max_regenerations",
                        format!(
                            "must be a whole number from 0 to {MAX_REGENERATIONS}, not {}",
                            shown(v)
                        ),
                    ))
                }
            },
        };
        let seed = match get("seed") {
            None => 0,
            Some(v) => v.as_u64().ok_or_else(|| {
                refuse(
                    "seed",
                    format!(
                        "must be a whole number from 0 to {}, not {}",
                        u64::MAX,
                        shown(v)
                    ),
                )
            })?,
        };
        Ok(SessionRequest {
            env,
            state,
            no_code,
            primary: string("primary")?,
            secondary: string("secondary")?,
            fault_rate,
            anchor,
            max_regenerations,
            verify: verify(get("verify"))?,
            seed,
        })
    }
}

/// The `verify` field: absent, `false`, `true` (the default policy) or `{floor, ceiling,
/// warmup}`.
fn verify(value: Option<&Value>) -> Result<Option<VerifyPolicy>, String> {
    let policy = match value {
        None | Some(Value::Bool(false)) => return Ok(None),
        Some(Value::Bool(true)) => return Ok(Some(VerifyPolicy::default())),
        Some(Value::Object(v)) => v,
        Some(other) => {
            return Err(refuse(
                "verify",
                format!(
                    "must be true, false or {{floor, ceiling, warmup}}, not {}",
                    shown(other)
                ),
            ))
        }
    };
    if let Some(unknown) = policy
        .keys()
        .find(|k| !["floor", "ceiling", "warmup"].contains(&k.as_str()))
    {
        return Err(format!(
            "unknown field `verify.{unknown}` (the fields are floor, ceiling, warmup)"
        ));
    }
    let default = VerifyPolicy::default();
    let share = |name: &str, fallback: f64| -> Result<f64, String> {
        match policy.get(name).filter(|v| !v.is_null()) {
            None => Ok(fallback),
            Some(v) => match v.as_f64() {
                Some(x) if (0.0..=1.0).contains(&x) => Ok(x),
                _ => Err(refuse(
                    &format!("verify.{name}"),
                    format!("must be a number between 0 and 1, not {}", shown(v)),
                )),
            },
        }
    };
    let floor = share("floor", default.floor)?;
    let ceiling = share("ceiling", default.ceiling)?;
    if floor > ceiling {
        return Err(refuse(
            "verify",
            format!("floor {floor} is above ceiling {ceiling}"),
        ));
    }
    let warmup = match policy.get("warmup").filter(|v| !v.is_null()) {
        None => default.warmup,
        Some(v) => v.as_u64().map(|n| n as usize).ok_or_else(|| {
            refuse(
                "verify.warmup",
                format!("must be a whole number, not {}", shown(v)),
            )
        })?,
    };
    Ok(Some(VerifyPolicy {
        floor,
        ceiling,
        warmup,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(body: Value) -> String {
        SessionRequest::parse(&body).expect_err("the body is refused")
    }

    #[test]
    fn a_full_request_reads_every_field() {
        let r = SessionRequest::parse(&json!({
            "env": "helpdesk_tickets", "state": {"tickets": {}}, "no_code": true,
            "primary": "faulty", "secondary": "executor", "fault_rate": 0.25,
            "anchor": "validate", "max_regenerations": 10,
            "verify": {"floor": 0.2, "ceiling": 0.9, "warmup": 1}, "seed": 7
        }))
        .unwrap();
        assert_eq!(r.env, "helpdesk_tickets");
        assert_eq!(
            r.state,
            Some(Map::from_iter([("tickets".to_owned(), json!({}))]))
        );
        assert!(r.no_code);
        assert_eq!(
            (r.primary.as_deref(), r.secondary.as_deref()),
            (Some("faulty"), Some("executor"))
        );
        assert_eq!(r.fault_rate, Some(0.25));
        assert_eq!(r.anchor, AnchorMode::Validate);
        assert_eq!((r.max_regenerations, r.seed), (10, 7));
        assert_eq!(
            r.verify,
            Some(VerifyPolicy {
                floor: 0.2,
                ceiling: 0.9,
                warmup: 1
            })
        );
    }

    #[test]
    fn defaults_fill_what_is_absent_or_null() {
        let r = SessionRequest::parse(&json!({"env": "e", "seed": null, "verify": true})).unwrap();
        assert_eq!(
            (r.anchor, r.max_regenerations, r.seed),
            (AnchorMode::Full, 2, 0)
        );
        assert_eq!((r.no_code, r.fault_rate, r.state), (false, None, None));
        assert_eq!(r.verify, Some(VerifyPolicy::default()));
    }

    /// Each wrong field is refused by name, as real clients sent them.
    #[test]
    fn wrong_fields_are_refused_by_name() {
        let cases = [
            (
                json!({"env": "e", "fault_rate": "high"}),
                "field `fault_rate`: must be a number between 0 and 1, not \"high\"",
            ),
            (
                json!({"env": "e", "fault_rate": 1.5}),
                "field `fault_rate`: must be a number between 0 and 1, not 1.5",
            ),
            (
                json!({"env": "e", "no_code": "true"}),
                "field `no_code`: must be true or false, not \"true\"",
            ),
            (
                json!({"env": "e", "seed": -1}),
                "field `seed`: must be a whole number",
            ),
            (
                json!({"env": "e", "seed": 1.5}),
                "field `seed`: must be a whole number",
            ),
            (
                json!({"env": "e", "max_regenerations": 99}),
                "field `max_regenerations`: must be a whole number from 0 to 10, not 99",
            ),
            (
                json!({"env": "e", "anchor": "strict"}),
                "field `anchor`: \"strict\" is not off, validate or full",
            ),
            (
                json!({"env": "e", "primary": 3}),
                "field `primary`: must be a string, not 3",
            ),
            (
                json!({"env": "e", "state": []}),
                "field `state`: must be a JSON object, not []",
            ),
            (
                json!({"env": "e", "verify": "yes"}),
                "field `verify`: must be true, false",
            ),
            (
                json!({"env": "e", "verify": {"floor": 2}}),
                "field `verify.floor`: must be a number between 0 and 1, not 2",
            ),
            (
                json!({"env": "e", "verify": {"floor": 0.9, "ceiling": 0.1}}),
                "field `verify`: floor 0.9 is above ceiling 0.1",
            ),
            (
                json!({"env": "e", "verify": {"flor": 0.2}}),
                "unknown field `verify.flor`",
            ),
            (
                json!({"env": "e", "primery": "faulty"}),
                "unknown field `primery` (the fields are env, state,",
            ),
            (json!({"env": ""}), "field `env`: is empty"),
            (json!({"state": {}}), "field `env`: is missing"),
            (json!(["env"]), "the request body must be a JSON object"),
        ];
        for (body, expected) in cases {
            let message = refused(body.clone());
            assert!(message.starts_with(expected), "{body}: {message}");
        }
    }
}
