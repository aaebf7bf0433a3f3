//! What names say: the noun of a tool (`get_order_by_id` → `order`), of an id-naming key
//! (`ticket_id` → `ticket`), and plain singulars — the heuristics every check of transcripts
//! and every generated description use to type resources.

/// Words that end the noun of a tool's name (`get_order_by_id` → `order`).
const NOUN_STOP: &[&str] = &[
    "by", "for", "with", "of", "from", "in", "on", "to", "details", "detail", "info", "status",
    "history", "summary",
];

/// A word's singular, as far as a plain rule gets it (`tickets` → `ticket`, `policies` →
/// `policy`, `addresses` → `address`, `status` stays).
pub fn singular(word: &str) -> String {
    let w = word.to_lowercase();
    if let Some(stem) = w.strip_suffix("ies") {
        if !stem.is_empty() {
            return format!("{stem}y");
        }
    }
    for ending in ["sses", "shes", "ches", "xes"] {
        if w.ends_with(ending) {
            return w[..w.len() - 2].to_owned();
        }
    }
    if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && w.len() > 2 {
        return w[..w.len() - 1].to_owned();
    }
    w
}

/// Whether a collection (`listings`) holds records of the type a noun names (`listing`).
pub fn holds(collection: &str, noun: &str) -> bool {
    collection == noun || singular(collection) == noun
}

/// The words of a name, lower case (`getTicket_details` → `get`, `ticket`, `details`).
pub fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut last_lower = false;
    for c in name.chars() {
        if c == '_' || c == '-' || c == ' ' || c == '.' {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            last_lower = false;
            continue;
        }
        if c.is_uppercase() && last_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        last_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// What a tool's name says it works on: the words after its verb, up to a word like `by` or
/// `details`, the last one made singular (`list_open_tickets` → `open_ticket`,
/// `get_order_by_id` → `order`). A one-word name is its own noun.
pub fn tool_noun(tool: &str) -> String {
    let w = words(tool);
    let rest: Vec<&String> = if w.len() > 1 {
        w[1..].iter().collect()
    } else {
        w.iter().collect()
    };
    let mut kept: Vec<String> = rest
        .iter()
        .take_while(|x| !NOUN_STOP.contains(&x.as_str()))
        .map(|x| (*x).clone())
        .collect();
    if kept.is_empty() {
        kept = rest.iter().map(|x| (*x).clone()).collect();
    }
    if let Some(last) = kept.last_mut() {
        *last = singular(last);
    }
    kept.join("_")
}

/// The noun an id-naming key stands for (`ticket_id` → `ticket`, `userId` → `user`), `None` when
/// the key does not name an id; a bare `id` gives the empty noun (the context decides).
pub fn id_noun(key: &str) -> Option<String> {
    let w = words(key);
    match w.last().map(String::as_str) {
        Some("id") => {
            let stem = &w[..w.len() - 1];
            Some(match stem.last() {
                Some(last) => {
                    let mut s: Vec<String> = stem.to_vec();
                    *s.last_mut().unwrap_or(&mut String::new()) = singular(last);
                    s.join("_")
                }
                None => String::new(),
            })
        }
        _ => None,
    }
}
