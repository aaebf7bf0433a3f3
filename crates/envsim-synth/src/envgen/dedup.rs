//! Near-duplicate environments: what a request or a package is about, as weighted words, and
//! how close two of them are. A batch skips a request whose domain an existing package (or an
//! earlier request of the batch) already covers, before any token is spent on it, and refuses
//! an accepted package that turned out to duplicate one.
//!
//! A profile is the words of the description and the tools (names split at
//! underscores and case changes, descriptions), lower-cased, stop words dropped, plurals folded.
//! Two profiles are compared by the cosine of their TF-IDF vectors over the profiles at hand,
//! so the words every environment has ("user", "list", "status") weigh little and the words of
//! a domain ("loan", "hold", "fine") weigh much.
//!
//! What words can and cannot tell (measured in docs/envsynth.md with the
//! `dedup_calibration` example on the corpus and the packages imported from BFCL and
//! τ²-bench): a request that repeats a known package's description scores 0.6–0.7 (caught at
//! the default 0.5: 50 of 53), distinct corpus domains at most 0.21 as requests and 0.27 as
//! packages; but the same domain described in other words (BFCL's trading bot beside the
//! corpus's brokerage) scores 0.08–0.26, no higher than distinct domains, so no threshold
//! catches it. The nearest package is still the right one for all 7 foreign packages with a
//! corpus counterpart, which is why a dry run lists it for every request.

use super::{EnvRequest, EnvSource};
use envsim_exec::package::Manifest;
use serde_json::Value;
use std::collections::BTreeMap;

/// The similarity from which two environments count as the same domain.
pub const DEFAULT_THRESHOLD: f64 = 0.5;

/// What an environment is about: word → count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    /// Whose profile (a package or request name).
    pub name: String,
    words: BTreeMap<String, f64>,
}

impl Profile {
    /// The profile of `text` under `name`.
    pub fn of_text(name: &str, text: &str) -> Profile {
        let mut profile = Profile {
            name: name.to_owned(),
            words: BTreeMap::new(),
        };
        profile.add(text);
        profile
    }

    /// The profile of a package from its manifest: description and tools (names and
    /// descriptions). Not the rules: they are long and about policy more than domain, and
    /// with them distinct corpus packages came nearer each other (docs/envsynth.md).
    pub fn of_manifest(manifest: &Manifest) -> Profile {
        let mut profile = Profile::of_text(&manifest.name, &manifest.description);
        profile.add_tools(&manifest.tools);
        profile
    }

    /// The profile of what a request asks for.
    pub fn of_request(request: &EnvRequest) -> Profile {
        let mut profile = Profile {
            name: request.name.clone(),
            words: BTreeMap::new(),
        };
        match &request.source {
            EnvSource::Description(text) => profile.add(text),
            EnvSource::Tools(tools) => profile.add_tools(tools),
            EnvSource::OpenApi(doc) => profile.add_openapi(doc),
        }
        profile
    }

    /// Whether it holds no word (nothing to compare).
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    fn add(&mut self, text: &str) {
        for word in words(text) {
            *self.words.entry(word).or_default() += 1.0;
        }
    }

    fn add_tools(&mut self, tools: &[Value]) {
        for tool in tools {
            let function = tool.get("function").unwrap_or(tool);
            for key in ["name", "description"] {
                if let Some(text) = function.get(key).and_then(Value::as_str) {
                    self.add(text);
                }
            }
        }
    }

    fn add_openapi(&mut self, doc: &Value) {
        if let Some(info) = doc.get("info") {
            for key in ["title", "description"] {
                if let Some(text) = info.get(key).and_then(Value::as_str) {
                    self.add(text);
                }
            }
        }
        let Some(paths) = doc.get("paths").and_then(Value::as_object) else {
            return;
        };
        for (path, item) in paths {
            self.add(path);
            let Some(item) = item.as_object() else {
                continue;
            };
            for operation in item.values().filter_map(Value::as_object) {
                for key in ["operationId", "summary", "description"] {
                    if let Some(text) = operation.get(key).and_then(Value::as_str) {
                        self.add(text);
                    }
                }
            }
        }
    }
}

/// The closest known environment to a profile.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Nearest {
    /// Its name.
    pub name: String,
    /// The cosine similarity, 0 to 1.
    pub similarity: f64,
}

/// Known environments, compared by TF-IDF cosine.
#[derive(Clone, Debug, Default)]
pub struct Known {
    profiles: Vec<Profile>,
}

impl Known {
    /// Known `profiles`.
    pub fn new(profiles: Vec<Profile>) -> Known {
        Known { profiles }
    }

    /// One more known environment.
    pub fn push(&mut self, profile: Profile) {
        self.profiles.push(profile);
    }

    /// How many are known.
    pub fn len(&self) -> usize {
        self.profiles.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }

    /// Every known environment's similarity to `profile`, highest first (name order among
    /// equals); the document frequencies count the known profiles and `profile` itself.
    pub fn similarities(&self, profile: &Profile) -> Vec<Nearest> {
        let all: Vec<&Profile> = self.profiles.iter().chain([profile]).collect();
        let n = all.len() as f64;
        let mut frequency: BTreeMap<&str, f64> = BTreeMap::new();
        for p in &all {
            for word in p.words.keys() {
                *frequency.entry(word).or_default() += 1.0;
            }
        }
        let idf = |word: &str| (n / frequency.get(word).copied().unwrap_or(1.0)).ln() + 1.0;
        let weigh = |p: &Profile| -> BTreeMap<String, f64> {
            p.words
                .iter()
                .map(|(w, count)| (w.clone(), (1.0 + count.ln()) * idf(w)))
                .collect()
        };
        let query = weigh(profile);
        let mut out: Vec<Nearest> = self
            .profiles
            .iter()
            .map(|p| Nearest {
                name: p.name.clone(),
                similarity: cosine(&query, &weigh(p)),
            })
            .collect();
        out.sort_by(|a, b| {
            b.similarity
                .total_cmp(&a.similarity)
                .then_with(|| a.name.cmp(&b.name))
        });
        out
    }

    /// The known environment most similar to `profile` (`None` when none is known).
    pub fn nearest(&self, profile: &Profile) -> Option<Nearest> {
        self.similarities(profile).into_iter().next()
    }
}

fn cosine(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> f64 {
    let dot: f64 = a.iter().filter_map(|(w, x)| b.get(w).map(|y| x * y)).sum();
    let norm = |v: &BTreeMap<String, f64>| v.values().map(|x| x * x).sum::<f64>().sqrt();
    let (na, nb) = (norm(a), norm(b));
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        (dot / (na * nb)).clamp(0.0, 1.0)
    }
}

/// Words that say nothing about a domain.
const STOP_WORDS: &[&str] = &[
    "about", "after", "all", "also", "and", "any", "are", "back", "been", "before", "but", "can",
    "each", "every", "for", "from", "get", "given", "has", "have", "how", "into", "its", "may",
    "more", "must", "new", "not", "one", "only", "other", "own", "per", "set", "should", "such",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those",
    "through", "when", "where", "which", "who", "will", "with", "without", "you", "your",
];

/// The words of `text` that may tell a domain: split at everything but letters and digits and
/// at case changes (`checkOutCopy` → check, out, copy), lower-cased, at least three letters,
/// no stop words, plurals folded (`copies` → copy, `loans` → loan).
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    let flush = |current: &mut String, out: &mut Vec<String>| {
        if current.len() >= 3
            && current.chars().any(|c| c.is_ascii_alphabetic())
            && !STOP_WORDS.contains(&current.as_str())
        {
            out.push(fold_plural(current));
        }
        current.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && previous_lower {
                flush(&mut current, &mut out);
            }
            previous_lower = c.is_lowercase() || c.is_ascii_digit();
            current.extend(c.to_lowercase());
        } else {
            previous_lower = false;
            flush(&mut current, &mut out);
        }
    }
    flush(&mut current, &mut out);
    out
}

fn fold_plural(word: &str) -> String {
    if word.len() > 4 {
        if let Some(stem) = word.strip_suffix("ies") {
            return format!("{stem}y");
        }
        for ending in ["sses", "shes", "ches", "xes"] {
            if word.ends_with(ending) {
                return word[..word.len() - 2].to_owned();
            }
        }
    }
    if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") {
        return word[..word.len() - 1].to_owned();
    }
    word.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The distinct words of a profile.
    fn vocabulary(profile: &Profile) -> BTreeSet<&str> {
        profile.words.keys().map(String::as_str).collect()
    }
    use envsim_exec::Convention;

    fn request(name: &str, text: &str) -> EnvRequest {
        EnvRequest {
            name: name.into(),
            source: EnvSource::Description(text.into()),
            convention: Convention::Class,
        }
    }

    #[test]
    fn words_split_case_changes_and_fold_plurals() {
        assert_eq!(
            words("checkOutCopy: the Copies, loans & boxes; id 42 of a fee"),
            ["check", "out", "copy", "copy", "loan", "box", "fee"]
        );
        assert_eq!(
            words("renew_loan status classes"),
            ["renew", "loan", "status", "class"]
        );
    }

    #[test]
    fn the_same_text_is_similarity_one_and_disjoint_text_zero() {
        let known = Known::new(vec![
            Profile::of_text("library", "members borrow books and pay overdue fines"),
            Profile::of_text("garden", "greenhouse sensors water tomatoes"),
        ]);
        let same = Profile::of_text("q", "members borrow books and pay overdue fines");
        let sims = known.similarities(&same);
        assert_eq!(sims[0].name, "library");
        assert!((sims[0].similarity - 1.0).abs() < 1e-12, "{sims:?}");
        assert_eq!(
            sims[1],
            Nearest {
                name: "garden".into(),
                similarity: 0.0
            }
        );
    }

    #[test]
    fn a_paraphrase_is_nearer_its_domain_than_a_domain_sharing_only_common_words() {
        let known = Known::new(vec![
            Profile::of_text(
                "library_loans",
                "Circulation desk of a public library: check out copies, renew loans, hold queues, overdue fines per day, lost items. Tools: check_out_copy, renew_loan, place_hold, pay_fines (list the user's loans).",
            ),
            Profile::of_text(
                "helpdesk",
                "Support tickets for a user: open a ticket, list the user's tickets, close a ticket, status of a ticket.",
            ),
        ]);
        let q = Profile::of_request(&request(
            "books",
            "A lending library where members borrow books, renew their loans and pay late fines.",
        ));
        let sims = known.similarities(&q);
        assert_eq!(sims[0].name, "library_loans");
        assert!(sims[0].similarity > 3.0 * sims[1].similarity, "{sims:?}");
    }

    #[test]
    fn tools_and_openapi_requests_read_names_and_descriptions() {
        let tools = EnvRequest {
            name: "t".into(),
            source: EnvSource::Tools(vec![serde_json::json!({"type": "function", "function": {
                "name": "bookRoom", "description": "Reserve a hotel room."}})]),
            convention: Convention::Class,
        };
        assert_eq!(
            vocabulary(&Profile::of_request(&tools)),
            BTreeSet::from(["book", "room", "reserve", "hotel"])
        );
        let api = EnvRequest {
            name: "a".into(),
            source: EnvSource::OpenApi(serde_json::json!({
                "info": {"title": "Parking"},
                "paths": {"/spots/{id}": {"get": {"operationId": "getSpot", "summary": "One spot"}}}})),
            convention: Convention::Class,
        };
        assert_eq!(
            vocabulary(&Profile::of_request(&api)),
            BTreeSet::from(["parking", "spot"])
        );
    }

    #[test]
    fn an_empty_profile_is_similar_to_nothing() {
        let known = Known::new(vec![Profile::of_text("x", "parcel shipping labels")]);
        let empty = Profile::of_text("q", "the a of");
        assert!(empty.is_empty());
        assert_eq!(known.nearest(&empty).map(|n| n.similarity), Some(0.0));
        assert_eq!(Known::default().nearest(&empty), None);
    }
}
