//! Environment time: when "now" is for a state, and which stored times are events that already
//! happened.
//!
//! Every call runs under a frozen clock (the executor makes `datetime.now()`, `time.time()` and
//! friends read it). A state stored in January 2024 must not be driven by a clock of January
//! 2025, nor a state of June 2025 by one of January 2025: records the tools create would be
//! older than the ones already there. The clock of a state is its package's explicit one
//! (manifest `clocks`), else the one [`state_clock`] derives from the state itself, by the first
//! of these rules that applies:
//!
//! 1. **The state says what time it is**: a key named `now`, `today`, `current_time`,
//!    `current_date`, `current_datetime`, `business_date` or `as_of` (anywhere; the first in
//!    document order) holding a date or date-time. A date-time is the clock. A bare date is the
//!    whole day: the clock is the start of the hour after that day's latest past event (rule
//!    2's events), or the day's start when none happened that day.
//! 2. **After the latest past event**: the latest date or date-time stored under a key that
//!    names something that already happened ([`is_past_event_key`]: `created_at`, `updated`,
//!    `last_login`, `timestamp`, `paid_on`, …), rounded up to the start of the next hour. Keys
//!    of times that may lie ahead (`due`, `ends_at`, `expires`, `scheduled_for`, `start`,
//!    `paid_through`, …) and ambiguous ones (a bare `date`) never count: an auction ending next
//!    month must not move the clock past its end.
//!
//! A state that neither rule applies to has no derived clock.

use crate::pointer::JsonPointer;
use serde_json::Value;

/// Seconds between the steps of a walk or a replay unless told otherwise: five minutes.
pub const DEFAULT_CLOCK_STEP: f64 = 300.0;

/// Words of a key that name an event that already happened.
const PAST_WORDS: &[&str] = &[
    "acknowledged",
    "added",
    "approved",
    "booked",
    "cancelled",
    "canceled",
    "changed",
    "checked",
    "closed",
    "completed",
    "created",
    "delivered",
    "filed",
    "issued",
    "joined",
    "last",
    "logged",
    "modified",
    "opened",
    "ordered",
    "paid",
    "placed",
    "posted",
    "processed",
    "purchased",
    "received",
    "recorded",
    "registered",
    "reported",
    "requested",
    "rejected",
    "resolved",
    "returned",
    "sent",
    "settled",
    "shipped",
    "signed",
    "submitted",
    "timestamp",
    "ts",
    "updated",
    "uploaded",
];

/// Words of a key that may name a time ahead (they win over [`PAST_WORDS`]).
const FUTURE_WORDS: &[&str] = &[
    "day",
    "deadline",
    "due",
    "end",
    "ends",
    "estimated",
    "eta",
    "expiration",
    "expire",
    "expires",
    "expiry",
    "next",
    "planned",
    "renewal",
    "renews",
    "scheduled",
    "start",
    "starts",
    "target",
    "through",
    "until",
    "valid",
];

/// The lower-case words of a key: split at `_`, `-`, `.`, spaces and camelCase boundaries.
fn words(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Whether a key names something that already happened (see the module docs): one of its
/// words is a past event (`created`, `last`, `timestamp`, …) and none names a time that may lie
/// ahead (`due`, `end`, `next`, `start`, …).
pub fn is_past_event_key(key: &str) -> bool {
    let words = words(key);
    words.iter().any(|w| PAST_WORDS.contains(&w.as_str()))
        && !words.iter().any(|w| FUTURE_WORDS.contains(&w.as_str()))
}

/// Seconds since 1970-01-01T00:00:00Z of an ISO 8601 date or date-time in extended form:
/// `2025-06-10`, `2025-06-10T09:30`, `2025-06-10 09:30:00.5`, `2025-06-10T09:30:00Z`,
/// `2025-06-10T09:30:00+02:00`. Without an offset the time is read as UTC; a date is its
/// midnight. Anything else (times alone, basic form like `20250610`, free text) is `None`.
pub fn parse_time(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    // Extended form only: an id like `20250610` is not a date.
    if bytes.len() < 10
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || !bytes[..4].iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    if let Ok(ts) = text.parse::<jiff::Timestamp>() {
        return Some(ts.as_millisecond() as f64 / 1000.0);
    }
    let civil = text.parse::<jiff::civil::DateTime>().ok()?;
    let ts = civil.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    Some(ts.as_millisecond() as f64 / 1000.0)
}

/// A time as RFC 3339 in UTC (`2025-06-10T10:00:00Z`); `seconds` as given for times outside
/// what a calendar can show.
pub fn format_time(seconds: f64) -> String {
    let millis = (seconds * 1000.0).round();
    if millis.is_finite() {
        if let Ok(ts) = jiff::Timestamp::from_millisecond(millis as i64) {
            return ts.to_string();
        }
    }
    format!("{seconds} s")
}

/// A time found in a state.
#[derive(Clone, Debug, PartialEq)]
pub struct Stamp {
    /// Seconds since the epoch.
    pub seconds: f64,
    /// Where it is stored.
    pub pointer: JsonPointer,
    /// The stored text.
    pub text: String,
}

/// The latest date or date-time stored under a past-event key ([`is_past_event_key`]) anywhere
/// in `state`; for an array, the key that holds it counts. The first one found wins a tie.
pub fn latest_event(state: &Value) -> Option<Stamp> {
    latest_event_before(state, f64::INFINITY)
}

/// Keys under which a state says what time it is (rule 1 of the module docs).
const NOW_KEYS: &[&str] = &[
    "now",
    "today",
    "current_time",
    "current_date",
    "current_datetime",
    "business_date",
    "as_of",
];

/// Which rule of the module docs gave a derived clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockRule {
    /// The state says what time it is.
    StatedNow,
    /// The start of the hour after the latest past event.
    AfterLatestEvent,
}

/// A clock derived from a state, with the stored time it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct DerivedClock {
    /// Seconds since the epoch.
    pub seconds: f64,
    /// The rule that applied.
    pub rule: ClockRule,
    /// The stored time the rule read.
    pub from: Stamp,
}

/// The first date or date-time stored under a key of [`NOW_KEYS`], in document order.
fn stated_now(value: &Value, path: &mut Vec<String>) -> Option<Stamp> {
    match value {
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            path.push(k.clone());
            let found = match v {
                Value::String(text) if NOW_KEYS.contains(&k.to_lowercase().as_str()) => {
                    parse_time(text).map(|seconds| Stamp {
                        seconds,
                        pointer: JsonPointer::from_tokens(path.clone()),
                        text: text.clone(),
                    })
                }
                _ => stated_now(v, path),
            };
            path.pop();
            found
        }),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
            path.push(i.to_string());
            let found = stated_now(v, path);
            path.pop();
            found
        }),
        _ => None,
    }
}

/// The start of the hour after `seconds`.
fn next_hour(seconds: f64) -> f64 {
    ((seconds / 3600.0).floor() + 1.0) * 3600.0
}

/// The clock the rules of the module docs derive from `state`, or `None` when neither applies.
pub fn state_clock(state: &Value) -> Option<DerivedClock> {
    if let Some(from) = stated_now(state, &mut Vec::new()) {
        // A bare date is a whole day: the clock is at the start of the hour after the day's
        // latest past event (or at the day's start), never before what already happened
        // that day. Events recorded after the stated day do not move it.
        let mut seconds = from.seconds;
        if from.text.trim().len() == 10 {
            let day_end = from.seconds + 86_400.0;
            if let Some(latest) = latest_event_before(state, day_end) {
                seconds = seconds.max(next_hour(latest.seconds).min(day_end - 1.0));
            }
        }
        return Some(DerivedClock {
            seconds,
            rule: ClockRule::StatedNow,
            from,
        });
    }
    latest_event(state).map(|from| DerivedClock {
        seconds: next_hour(from.seconds),
        rule: ClockRule::AfterLatestEvent,
        from,
    })
}

/// [`latest_event`] among the events strictly before `limit`.
pub fn latest_event_before(state: &Value, limit: f64) -> Option<Stamp> {
    let mut latest = None;
    visit_events(state, None, &mut Vec::new(), limit, &mut latest);
    latest
}

/// Keeps in `latest` the latest past-event time under `value` before `limit` (a [`Stamp`] is
/// made only for a new latest one: states of megabytes hold many times).
fn visit_events(
    value: &Value,
    key: Option<&str>,
    path: &mut Vec<String>,
    limit: f64,
    latest: &mut Option<Stamp>,
) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                path.push(k.clone());
                visit_events(v, Some(k), path, limit, latest);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(i.to_string());
                visit_events(v, key, path, limit, latest);
                path.pop();
            }
        }
        Value::String(text) if key.is_some_and(is_past_event_key) => {
            if let Some(seconds) = parse_time(text) {
                if seconds < limit && latest.as_ref().is_none_or(|l| seconds > l.seconds) {
                    *latest = Some(Stamp {
                        seconds,
                        pointer: JsonPointer::from_tokens(path.clone()),
                        text: text.clone(),
                    });
                }
            }
        }
        _ => {}
    }
}

/// The clock a state runs under, and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct StateClock {
    /// Seconds since the epoch.
    pub seconds: f64,
    /// Where the clock came from.
    pub source: ClockSource,
}

/// Where a [`StateClock`] came from.
#[derive(Clone, Debug, PartialEq)]
pub enum ClockSource {
    /// The package says (manifest `clocks`).
    Manifest,
    /// Derived from the state ([`state_clock`]).
    Derived(DerivedClock),
    /// Neither: the executor's fixed default.
    Default,
}

impl StateClock {
    /// The clock of a state without an explicit one: derived, else `default`.
    pub fn of_state(state: &Value, default: f64) -> StateClock {
        match state_clock(state) {
            Some(derived) => StateClock {
                seconds: derived.seconds,
                source: ClockSource::Derived(derived),
            },
            None => StateClock {
                seconds: default,
                source: ClockSource::Default,
            },
        }
    }

    /// The clock and its origin in words: `2025-06-10T12:00:00Z (the state's /settings/now)`.
    pub fn describe(&self) -> String {
        let origin = match &self.source {
            ClockSource::Manifest => "set in the manifest".to_owned(),
            ClockSource::Derived(d) => match d.rule {
                ClockRule::StatedNow => format!("the state's {} {}", d.from.pointer, d.from.text),
                ClockRule::AfterLatestEvent => {
                    format!(
                        "after the state's latest event, {} {}",
                        d.from.pointer, d.from.text
                    )
                }
            },
            ClockSource::Default => "the default: the state records no time".to_owned(),
        };
        format!("{} ({origin})", format_time(self.seconds))
    }
}

/// Times in a value the clock stamped: every string that is a date or date-time, and every
/// number that reads as seconds (10⁹ to 4·10⁹) or milliseconds (10¹² to 4·10¹²) since the
/// epoch. For a clock-dependent field found by running a call under two clocks: whatever it
/// holds is a stamp. Nested values count only under past-event keys (a record created with a
/// clock-dependent id also holds the caller's own dates).
pub fn stamps_in(value: &Value) -> Vec<(JsonPointer, f64)> {
    let mut out = Vec::new();
    let mut path = Vec::new();
    collect_stamps(value, true, &mut path, &mut out);
    out
}

fn collect_stamps(
    value: &Value,
    counts: bool,
    path: &mut Vec<String>,
    out: &mut Vec<(JsonPointer, f64)>,
) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                path.push(k.clone());
                collect_stamps(v, is_past_event_key(k), path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(i.to_string());
                collect_stamps(v, counts, path, out);
                path.pop();
            }
        }
        Value::String(text) if counts => {
            if let Some(seconds) = parse_time(text) {
                out.push((JsonPointer::from_tokens(path.clone()), seconds));
            }
        }
        Value::Number(n) if counts => {
            if let Some(x) = n.as_f64() {
                if (1e9..4e9).contains(&x) {
                    out.push((JsonPointer::from_tokens(path.clone()), x));
                } else if (1e12..4e12).contains(&x) {
                    out.push((JsonPointer::from_tokens(path.clone()), x / 1000.0));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_parse_in_extended_form_only() {
        assert_eq!(parse_time("2025-01-01"), Some(1_735_689_600.0));
        assert_eq!(parse_time("2025-01-01T00:00:00Z"), Some(1_735_689_600.0));
        assert_eq!(
            parse_time("2025-01-01T02:00:00+02:00"),
            Some(1_735_689_600.0)
        );
        assert_eq!(parse_time("2025-01-01 00:30"), Some(1_735_691_400.0));
        assert_eq!(parse_time("2025-01-01T00:00:00.5"), Some(1_735_689_600.5));
        for not_a_time in [
            "20250101",
            "10:00",
            "2025-13-01",
            "2025-01-01x",
            "soon",
            "",
            "2025",
        ] {
            assert_eq!(parse_time(not_a_time), None, "{not_a_time}");
        }
        assert_eq!(format_time(1_735_689_600.0), "2025-01-01T00:00:00Z");
        assert_eq!(format_time(1_735_689_600.25), "2025-01-01T00:00:00.25Z");
        assert_eq!(format_time(f64::NAN), "NaN s");
    }

    #[test]
    fn past_event_keys_are_named_for_what_already_happened() {
        for key in [
            "created_at",
            "createdAt",
            "updated",
            "last_login",
            "lastModified",
            "timestamp",
            "paid_on",
            "sent-at",
        ] {
            assert!(is_past_event_key(key), "{key}");
        }
        for key in [
            "due_date",
            "ends_at",
            "expires_at",
            "scheduled_for",
            "start_time",
            "next_billing",
            "date",
            "name",
            "last_day",
            "valid_until",
        ] {
            assert!(!is_past_event_key(key), "{key}");
        }
    }

    #[test]
    fn the_derived_clock_follows_the_latest_past_event_not_future_times() {
        let state = json!({
            "tickets": {
                "T1": {"created_at": "2024-03-01T10:15:00Z", "due_at": "2024-09-01T00:00:00Z"},
                "T2": {"created_at": "2024-05-20T08:40:00", "history": [{"timestamp": "2024-05-21 17:05"}]}
            },
            "auction": {"ends_at": "2030-01-01T00:00:00Z", "date": "2029-01-01"},
            "note": "2031-01-01"
        });
        let latest = latest_event(&state).expect("has events");
        assert_eq!(latest.text, "2024-05-21 17:05");
        assert_eq!(
            latest.pointer.to_string(),
            "/tickets/T2/history/0/timestamp"
        );
        // 17:05 → the start of the next hour, 18:00.
        let clock = state_clock(&state).expect("derived");
        assert_eq!(Some(clock.seconds), parse_time("2024-05-21T18:00:00Z"));
        assert_eq!(
            (clock.rule, clock.from),
            (ClockRule::AfterLatestEvent, latest)
        );
        // A time exactly on the hour still moves to the next one: new records come after.
        let seconds = |state: Value| state_clock(&state).map(|c| c.seconds);
        assert_eq!(
            seconds(json!({"created": "2024-01-01"})),
            parse_time("2024-01-01T01:00:00Z")
        );
        assert_eq!(seconds(json!({"due": "2024-01-01", "n": 3})), None);
        // A state that says what time it is wins, as it is.
        let stated = json!({"orders": {"o": {"created_at": "2025-05-01"}}, "settings": {"Now": "2025-04-10T09:00"}});
        let clock = state_clock(&stated).expect("stated");
        assert_eq!(clock.rule, ClockRule::StatedNow);
        assert_eq!(clock.from.pointer.to_string(), "/settings/Now");
        assert_eq!(Some(clock.seconds), parse_time("2025-04-10T09:00:00Z"));
        // A stated day: after the day's latest event, not after later (contradicting) ones.
        let day = json!({"business_date": "2024-06-12", "orders": [
            {"created_at": "2024-06-12T14:02:08"}, {"created_at": "2024-06-11T23:00:00"},
            {"paid_at": "2024-06-30T10:00:00"}]});
        assert_eq!(seconds(day), parse_time("2024-06-12T15:00:00Z"));
        let quiet = json!({"business_date": "2024-06-12", "o": {"created_at": "2024-06-01"}});
        assert_eq!(seconds(quiet), parse_time("2024-06-12T00:00:00Z"));
        // A `now` that is not a time does not count.
        assert_eq!(
            seconds(json!({"now": "soon", "created": "2024-01-01"})),
            parse_time("2024-01-01T01:00:00Z")
        );
    }

    #[test]
    fn stamps_are_times_of_clock_dependent_values() {
        assert_eq!(
            stamps_in(&json!("2025-01-01T00:00:00")),
            [(
                JsonPointer::from_tokens(Vec::<String>::new()),
                1_735_689_600.0
            )]
        );
        assert_eq!(
            stamps_in(&json!(1_735_689_600_000u64))[0].1,
            1_735_689_600.0
        );
        assert!(stamps_in(&json!(42)).is_empty());
        // In a whole new record, only its past-event fields: its due date came from the call.
        let record =
            json!({"id": "R-1735689600", "created_at": "2025-01-01", "due_date": "2024-01-01"});
        let stamps = stamps_in(&record);
        assert_eq!(stamps.len(), 1);
        assert_eq!(stamps[0].0.to_string(), "/created_at");
    }
}
