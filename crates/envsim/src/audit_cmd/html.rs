//! `envsim audit` as one self-contained HTML page: the summary's numbers, charts of the SCS
//! distribution and of specification drift, the distribution bias, and the chosen trajectory's
//! state constraint graph drawn as a timeline. Inline CSS and SVG only, so the file can be
//! mailed, archived or opened offline, and nothing in it runs or fetches anything.

use envsim_core::audit::bias::Bias;
use envsim_core::audit::observed::Timeline;
use envsim_core::audit::{AuditSummary, BiasSummary, ScsSummary, SpecSummary};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Appends formatted text to a `String`; writing to a `String` cannot fail, so the `Result`
/// is dropped here once instead of at every call.
macro_rules! w {
    ($out:expr, $($arg:tt)*) => {{
        let _ = write!($out, $($arg)*);
    }};
}

// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
/// Creation markers (bluish green).
const GREEN: &str = "#009E73";
/// Update markers and the histogram's bars (blue).
const BLUE: &str = "#0072B2";
/// Violations and failed steps (vermillion, the palette's red).
const RED: &str = "#D55E00";
/// Missing-resource markers (orange).
const ORANGE: &str = "#E69F00";
/// Ink for text, hollow markers and deletions.
const INK: &str = "#222";
/// Steps with an unknown outcome, axes and axis labels.
const GREY: &str = "#888";
/// Class colours for the bias bars, in the order classes are first met (success first).
const CLASS_COLOURS: [&str; 7] = [
    "#009E73", "#D55E00", "#56B4E9", "#E69F00", "#CC79A7", "#0072B2", "#F0E442",
];
/// Attributes of centred SVG text.
const MID: &str = "text-anchor=\"middle\"";
/// Attributes of right-aligned SVG text (labels left of a chart).
const END: &str = "text-anchor=\"end\"";
/// At most this many steps are drawn in the timeline, so the drawing stays legible.
const MAX_STEPS: usize = 60;
/// At most this many resource lanes are drawn in the timeline.
const MAX_LANES: usize = 40;

/// The page's style: system fonts (no downloads), a readable measure, light table borders.
const CSS: &str = "body{margin:0;background:#fafafa;color:#222;font:15px/1.5 -apple-system,\
BlinkMacSystemFont,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif}\
main{max-width:1000px;margin:0 auto;padding:24px}h1{margin:0 0 4px;font-size:28px}\
h2{margin:32px 0 8px;font-size:20px;border-bottom:1px solid #ddd;padding-bottom:4px}\
h3{margin:20px 0 6px;font-size:16px}.muted,.note{color:#666}.note{font-size:13px}\
.headline b{font-size:18px}table{border-collapse:collapse;margin:8px 0;font-size:14px}\
th,td{border:1px solid #e2e2e2;padding:3px 10px;text-align:left;vertical-align:top}\
th{background:#f0f0f0;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}\
tr.zero td{color:#aaa}.scroll{overflow-x:auto}svg{display:block;margin:8px 0;font-size:11px}\
.legend span{display:inline-block;margin-right:16px;font-size:13px}\
.sw{display:inline-block;width:10px;height:10px;margin-right:5px;vertical-align:middle;\
box-sizing:border-box}";

pub use envsim_bench::file_audit::Drawn;

/// A violation as the timeline and its table show it.
struct Shown<'a> {
    step: usize,
    kind: &'a str,
    resource: Option<&'a str>,
    conflicting_step: Option<usize>,
    explanation: &'a str,
}

/// Every violation of the drawn trajectory, the state checks' first.
fn shown(drawn: &Drawn) -> Vec<Shown<'_>> {
    let checks = drawn.violations.iter().map(|v| Shown {
        step: v.step,
        kind: v.kind.name(),
        resource: v.resource.as_deref(),
        conflicting_step: v.conflicting_step,
        explanation: &v.explanation,
    });
    let spec = drawn.spec.iter().map(|v| Shown {
        step: v.step,
        kind: &v.kind,
        resource: None,
        conflicting_step: None,
        explanation: &v.explanation,
    });
    checks.chain(spec).collect()
}

/// A self-contained HTML report of an audit: the summary, and the trajectory `drawn` as a
/// timeline when one is given. The output depends on the input alone, so reports can be
/// compared byte for byte.
pub fn render(summary: &AuditSummary, drawn: Option<&Drawn>) -> String {
    let mut out = String::with_capacity(16 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    w!(
        out,
        "<title>envsim audit</title><style>{CSS}</style></head><body><main>\n"
    );
    headline(&mut out, summary);
    histogram(&mut out, &summary.scs);
    out.push_str("<h2>Violations by kind</h2>\n");
    count_table(&mut out, "kind", &summary.by_kind);
    if let Some(s) = &summary.spec {
        spec(&mut out, s);
    }
    bias(&mut out, &summary.bias, &summary.coverage);
    if let Some(d) = drawn {
        timeline_section(&mut out, &d.timeline, &shown(d));
    }
    out.push_str("</main></body></html>\n");
    out
}

/// HTML-escapes text for element content and quoted attributes alike, so that tool names,
/// ids and explanations taken from transcripts can never inject markup.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The first `max` characters of `s`, escaped, with an ellipsis when cut: SVG text does not
/// wrap, so long names would run into their neighbours.
fn short(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        escape(s)
    } else {
        escape(&s.chars().take(max - 1).collect::<String>()) + "…"
    }
}

/// A share in [0, 1] as a percentage with one decimal.
fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A table under a header row (`head`: column names separated by `|`); the columns listed in
/// `numeric` are right-aligned, and rows flagged `true` are greyed (kinds never seen).
fn table(out: &mut String, head: &str, numeric: &[usize], rows: &[(bool, Vec<String>)]) {
    out.push_str("<table><tr>");
    head.split('|').for_each(|h| w!(out, "<th>{h}</th>"));
    out.push_str("</tr>\n");
    for (grey, cells) in rows {
        out.push_str(if *grey { "<tr class=\"zero\">" } else { "<tr>" });
        for (i, c) in cells.iter().enumerate() {
            let n = if numeric.contains(&i) {
                " class=\"n\""
            } else {
                ""
            };
            w!(out, "<td{n}>{c}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// A two-column table of counts keyed by name, most frequent first (equal counts keep the
/// summary's order), with zero rows greyed.
fn count_table(out: &mut String, what: &str, counts: &BTreeMap<String, usize>) {
    if counts.is_empty() {
        out.push_str("<p class=\"note\">None in the summary.</p>\n");
        return;
    }
    let mut rows: Vec<(&String, &usize)> = counts.iter().collect();
    rows.sort_by(|a, b| b.1.cmp(a.1));
    let rows: Vec<_> = rows
        .into_iter()
        .map(|(k, n)| (*n == 0, vec![escape(k), n.to_string()]))
        .collect();
    table(out, &format!("{what}|count"), &[1], &rows);
}

/// Opens an SVG of the given size, labelled for screen readers.
fn svg(out: &mut String, w: f64, h: f64, label: &str) {
    w!(out, "<svg width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" role=\"img\" aria-label=\"{label}\">");
}

/// An SVG text at (x, y); `extra` carries further attributes, `body` is escaped already.
fn label(out: &mut String, (x, y): (f64, f64), extra: &str, body: &str) {
    w!(out, "<text x=\"{x:.1}\" y=\"{y:.1}\" {extra}>{body}</text>");
}

/// An SVG line from `a` to `b`; `style` carries the stroke attributes.
fn line(out: &mut String, (x1, y1): (f64, f64), (x2, y2): (f64, f64), style: &str) {
    w!(
        out,
        "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" {style}/>"
    );
}

/// Section 1: the title, the headline numbers and the input forms.
fn headline(out: &mut String, s: &AuditSummary) {
    out.push_str("<h1>envsim audit</h1>\n<p class=\"headline\">");
    let items = [
        (s.trajectories.to_string(), "trajectories"),
        (s.steps.to_string(), "steps"),
        (s.checked.to_string(), "constraints checked"),
        (s.violations.to_string(), "violations"),
        (format!("{:.3}", s.scs.mean), "mean SCS"),
        (
            s.scs.consistent_trajectories.to_string(),
            "consistent trajectories",
        ),
    ];
    let parts: Vec<String> = items
        .iter()
        .map(|(n, what)| format!("<b>{n}</b> {what}"))
        .collect();
    w!(out, "{}</p>\n", parts.join(" · "));
    let n = s.violations_on_guessed_effects;
    w!(
        out,
        "<p class=\"muted\">{n} of the violations rest on guessed tool effects.</p>\n"
    );
    let forms: Vec<String> = (s.inputs.iter())
        .map(|(form, n)| format!("{} ({n})", escape(form)))
        .collect();
    if !forms.is_empty() {
        w!(out, "<p class=\"muted\">Inputs: {}</p>\n", forms.join(", "));
    }
}

/// Section 2: the SCS histogram as bars over [0, 1], counts above the bars and in tooltips.
fn histogram(out: &mut String, scs: &ScsSummary) {
    out.push_str("<h2>SCS distribution</h2>\n");
    let (mean, min, p10) = (scs.mean, scs.min, scs.p10);
    w!(
        out,
        "<p>Mean {mean:.3} · minimum {min:.3} · 10th percentile {p10:.3}</p>\n"
    );
    let bins = &scs.histogram;
    if bins.is_empty() {
        out.push_str("<p class=\"note\">The summary has no SCS histogram.</p>\n");
        return;
    }
    let (w, h, left, base) = (600.0, 200.0, 40.0, 170.0);
    let max = bins.iter().map(|&n| n as f64).fold(0.0, f64::max);
    let k = bins.len() as f64;
    let band = (w - left - 10.0) / k;
    svg(out, w, h, "SCS histogram");
    line(
        out,
        (left, base),
        (w - 10.0, base),
        &format!("stroke=\"{GREY}\""),
    );
    for (i, &bin) in bins.iter().enumerate() {
        let n = bin as f64;
        let bh = if max > 0.0 {
            n / max * (base - 18.0)
        } else {
            0.0
        };
        let (x, lo, hi) = (left + i as f64 * band, i as f64 / k, (i + 1) as f64 / k);
        let close = if i + 1 == bins.len() { ']' } else { ')' };
        let (bw, top, c) = (band - 4.0, base - bh, bin.to_string());
        w!(out, "<g><title>SCS [{lo:.1}, {hi:.1}{close}: {c} trajectories</title><rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{bw:.1}\" height=\"{bh:.1}\" fill=\"{BLUE}\"/>", x + 2.0);
        // Zero bars stay unlabelled so that the populated bins stand out.
        if n > 0.0 {
            label(out, (x + band / 2.0, top - 4.0), MID, &c);
        }
        out.push_str("</g>");
    }
    for i in 0..=bins.len() {
        let (at, edge) = (
            (left + i as f64 * band, base + 16.0),
            format!("{:.1}", i as f64 / k),
        );
        label(out, at, &format!("{MID} fill=\"{GREY}\""), &edge);
    }
    out.push_str("</svg>\n");
}

/// Section 4: specification conformance and the drift of the violation rate by step index.
fn spec(out: &mut String, spec: &SpecSummary) {
    out.push_str("<h2>Specification</h2>\n");
    let rate = if spec.steps > 0 {
        format!(
            " ({:.1}%)",
            spec.violating_steps as f64 / spec.steps as f64 * 100.0
        )
    } else {
        String::new()
    };
    let (cs, trajectories) = (spec.spec_cs_mean, spec.trajectories);
    let (bad, steps) = (spec.violating_steps, spec.steps);
    w!(out, "<p>Mean SpecCS <b>{cs:.3}</b> over {trajectories} trajectories · {bad} of {steps} steps break the specification{rate}</p>\n<h3>Drift</h3>\n");
    let drift = &spec.drift;
    let interval = drift.interval.map_or("no interval".into(), |[lo, hi]| {
        format!("95% interval [{lo:.3}, {hi:.3}]")
    });
    let slope = drift.slope;
    w!(out, "<p>Slope of the violation indicator on the step index: <b>{slope:.3}</b> per step ({interval}). A positive slope means later steps break the specification more often.</p>\n");
    let points: Vec<(f64, f64)> = (drift.by_index.iter())
        .map(|&(n, bad)| (n as f64, bad as f64))
        .collect();
    if points.is_empty() {
        out.push_str("<p class=\"note\">No per-index counts to draw.</p>\n");
        return;
    }
    let (w, h, left, right, top, base) = (640.0, 220.0, 48.0, 12.0, 12.0, 180.0);
    let band = (w - left - right) / points.len() as f64;
    let y = |r: f64| top + (1.0 - r) * (base - top);
    svg(out, w, h, "Violation rate by step index");
    let axis = format!("{END} fill=\"{GREY}\"");
    for q in 0..=4 {
        let r = f64::from(q) / 4.0;
        line(out, (left, y(r)), (w - right, y(r)), "stroke=\"#e4e4e4\"");
        let tick = format!("{:.0}%", r * 100.0);
        label(out, (left - 6.0, y(r) + 4.0), &axis, &tick);
    }
    // Label every k-th index so that long trajectories do not pile up their labels.
    let every = points.len().div_ceil(16);
    let axis = format!("{MID} fill=\"{GREY}\"");
    let (mut path, mut marks) = (Vec::new(), String::new());
    for (i, &(n, a)) in points.iter().enumerate() {
        let x = left + (i as f64 + 0.5) * band;
        if i % every == 0 {
            label(out, (x, base + 16.0), &axis, &i.to_string());
        }
        // An index no trajectory reaches has no rate; it is left as a gap in the points.
        if n > 0.0 {
            let (r, yr) = (a / n, y(a / n));
            path.push(format!("{x:.1},{yr:.1}"));
            w!(marks, "<circle cx=\"{x:.1}\" cy=\"{yr:.1}\" r=\"3.5\" fill=\"{RED}\"><title>step {i}: {a:.0} of {n:.0} ({:.1}%)</title></circle>", r * 100.0);
        }
    }
    let path = path.join(" ");
    w!(
        out,
        "<polyline points=\"{path}\" fill=\"none\" stroke=\"{RED}\" stroke-width=\"1.5\"/>{marks}"
    );
    let at = ((left + w - right) / 2.0, h - 6.0);
    label(out, at, &axis, "step index");
    out.push_str("</svg>\n");
}

/// Section 5: the outcome distribution against its expectation, per tool, then coverage.
fn bias(out: &mut String, bias: &BiasSummary, coverage: &BTreeMap<String, usize>) {
    out.push_str("<h2>Distribution bias</h2>\n");
    match &bias.expected_from {
        Some(from) => w!(
            out,
            "<p>Expected outcome distribution: {}.</p>\n",
            escape(from)
        ),
        None => out.push_str("<p>No expected outcome distribution.</p>\n"),
    }
    let overall = bias.report.as_ref().and_then(|r| r.overall.as_ref());
    if let Some(o) = overall {
        let (n, jsd, excess) = (o.steps, o.jsd, signed_pp(o.happy_path_excess));
        w!(out, "<p>Overall over {n} steps: JSD <b>{jsd:.4}</b> · happy-path excess <b>{excess}</b> (observed minus expected success share)</p>\n");
    }
    let mut tools: Vec<(&String, &Bias)> =
        (bias.report.iter()).flat_map(|r| r.tools.iter()).collect();
    // Most divergent tools first.
    tools.sort_by(|a, b| b.1.jsd.total_cmp(&a.1.jsd));
    if !tools.is_empty() {
        let head = "tool|steps|observed success|expected success|excess|JSD";
        let rows: Vec<_> = (tools.iter())
            .map(|(tool, b)| {
                let (obs, exp) = (success(&b.observed), success(&b.expected));
                let (excess, jsd) = (signed_pp(b.happy_path_excess), format!("{:.4}", b.jsd));
                (
                    false,
                    vec![escape(tool), b.steps.to_string(), obs, exp, excess, jsd],
                )
            })
            .collect();
        table(out, head, &[1, 2, 3, 4, 5], &rows);
    }
    let without: Vec<String> = (bias.report.iter())
        .flat_map(|r| r.without_expectation.iter())
        .map(|t| escape(t))
        .collect();
    if !without.is_empty() {
        w!(
            out,
            "<p class=\"note\">No expectation for: {}</p>\n",
            without.join(", ")
        );
    }
    let observed: Vec<_> = (bias.observed.iter())
        .map(|(class, share)| (false, vec![escape(class), pct(*share)]))
        .collect();
    if !observed.is_empty() {
        table(out, "class|observed share", &[1], &observed);
    }
    let mut bars: Vec<(&str, &Bias)> = overall.map(|o| ("all tools", o)).into_iter().collect();
    bars.extend(tools.iter().map(|(t, b)| (t.as_str(), *b)));
    if !bars.is_empty() {
        share_bars(out, &bars);
    }
    if !coverage.is_empty() {
        out.push_str("<h3>Coverage</h3>\n");
        count_table(out, "transition", coverage);
    }
}

/// A happy-path excess in percentage points, signed so its direction reads at a glance.
fn signed_pp(x: f64) -> String {
    format!("{:+.1} pp", x * 100.0)
}

/// The success share of a share map; a map without `success` has none of it.
fn success(shares: &BTreeMap<String, f64>) -> String {
    pct(shares.get("success").copied().unwrap_or(0.0))
}

/// Stacked bars of class shares, observed above expected, one pair per tool, in one SVG; each
/// class keeps one colour (`success` first, then in the order met) across all bars.
fn share_bars(out: &mut String, bars: &[(&str, &Bias)]) {
    let mut classes = vec!["success".to_string()];
    for (_, b) in bars {
        for class in b.observed.keys().chain(b.expected.keys()) {
            if !classes.contains(class) {
                classes.push(class.clone());
            }
        }
    }
    let colour = |i: usize| CLASS_COLOURS[i % CLASS_COLOURS.len()];
    let (label_w, bar_w, row) = (190.0, 500.0, 14.0);
    let rows = 2 * bars.len();
    let h = rows as f64 * row + bars.len() as f64 * 8.0 + 4.0;
    out.push_str("<h3>Observed and expected outcome classes</h3>\n");
    svg(
        out,
        label_w + bar_w + 10.0,
        h,
        "Outcome class shares per tool",
    );
    let mut y = 4.0;
    for (tool, b) in bars {
        for (which, shares) in [("observed", &b.observed), ("expected", &b.expected)] {
            let body = format!(
                "<title>{}</title>{} · {}",
                escape(tool),
                short(tool, 22),
                &which[..3]
            );
            label(out, (label_w - 6.0, y + row - 4.0), END, &body);
            w!(out, "<rect x=\"{label_w}\" y=\"{y:.1}\" width=\"{bar_w}\" height=\"{:.1}\" fill=\"#eee\"/>", row - 2.0);
            let mut x = label_w;
            for (i, class) in classes.iter().enumerate() {
                let share = shares.get(class).copied().unwrap_or(0.0).clamp(0.0, 1.0);
                if share > 0.0 {
                    let (width, c, t, p) = (share * bar_w, colour(i), escape(tool), share * 100.0);
                    w!(out, "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"{:.1}\" fill=\"{c}\"><title>{t}, {which}: {} {p:.1}%</title></rect>", row - 2.0, escape(class));
                    x += width;
                }
            }
            y += row;
        }
        y += 8.0;
    }
    out.push_str("</svg>\n<p class=\"legend\">");
    for (i, class) in classes.iter().enumerate() {
        let (c, name) = (colour(i), escape(class));
        w!(
            out,
            "<span><i class=\"sw\" style=\"background:{c}\"></i>{name}</span>"
        );
    }
    out.push_str("</p>\n");
}

/// One marker of the timeline: the SVG shape of an event kind centred at (x, y).
fn marker(kind: &str, x: f64, y: f64) -> String {
    let (l, r, t, b) = (x - 6.0, x + 6.0, y - 6.0, y + 6.0);
    match kind {
        "create" => format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"6\" fill=\"{GREEN}\"/>"),
        "read" => format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5.5\" fill=\"#fff\" stroke=\"{INK}\" stroke-width=\"1.5\"/>"),
        "update" => format!("<rect x=\"{:.1}\" y=\"{:.1}\" width=\"11\" height=\"11\" fill=\"{BLUE}\"/>", x - 5.5, y - 5.5),
        "delete" => format!("<path d=\"M{l:.1} {t:.1}L{r:.1} {b:.1}M{l:.1} {b:.1}L{r:.1} {t:.1}\" stroke=\"{INK}\" stroke-width=\"2.5\"/>"),
        "missing" => format!("<path d=\"M{x:.1} {t:.1}L{r:.1} {y:.1}L{x:.1} {b:.1}L{l:.1} {y:.1}Z\" fill=\"#fff\" stroke=\"{ORANGE}\" stroke-width=\"1.5\"/>"),
        _ => format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{GREY}\"/>"),
    }
}

/// A lane's events as (step, kind), in step order.
fn events(lane: &[envsim_core::audit::observed::TimelineEvent]) -> Vec<(usize, &str)> {
    let mut evs: Vec<(usize, &str)> = lane.iter().map(|e| (e.step, e.kind)).collect();
    evs.sort_by_key(|e| e.0);
    evs
}

/// Section 6: the chosen trajectory's state constraint graph as a timeline, with its
/// violations marked where they happen and a table of them below.
fn timeline_section(out: &mut String, t: &Timeline, violations: &[Shown<'_>]) {
    w!(
        out,
        "<h2>Timeline of trajectory {}</h2>\n",
        escape(&t.trajectory)
    );
    let steps = &t.steps;
    let mut lanes: Vec<(&String, Vec<(usize, &str)>)> = (t.lanes.iter())
        .map(|(name, evs)| (name, events(evs)))
        .collect();
    // Lanes in order of their first event, so resources read top to bottom as they appear.
    let first = |evs: &[(usize, &str)]| evs.first().map_or(usize::MAX, |e| e.0);
    lanes.sort_by(|a, b| (first(&a.1), a.0).cmp(&(first(&b.1), b.0)));
    let last_event = lanes
        .iter()
        .filter_map(|(_, e)| e.last().map(|e| e.0 + 1))
        .max();
    let n_steps = steps.len().max(last_event.unwrap_or(0));
    let (shown_steps, shown_lanes) = (n_steps.min(MAX_STEPS), lanes.len().min(MAX_LANES));
    let total_lanes = lanes.len();
    let lanes = &lanes[..shown_lanes];
    let name = |s: usize| steps.get(s).map_or("", |st| st.0.as_str());
    if n_steps == 0 {
        out.push_str("<p class=\"note\">The trajectory has no steps to draw.</p>\n");
        return violation_table(out, violations);
    }
    let (label_w, head_h, tri_h, lane_h) = (170.0, 110.0, 18.0, 26.0);
    let col = ((960.0 - label_w) / shown_steps as f64).clamp(16.0, 48.0);
    let top = head_h + tri_h;
    let (w, h) = (
        label_w + col * shown_steps as f64 + 12.0,
        top + lane_h * shown_lanes as f64 + 8.0,
    );
    let cx = |s: usize| label_w + (s as f64 + 0.5) * col;
    let cy = |l: usize| top + (l as f64 + 0.5) * lane_h;
    out.push_str("<div class=\"scroll\">");
    svg(out, w, h, "Resource timeline");
    // Narrow columns number every other (or every third) step so the numbers stay apart.
    let every = (22.0 / col).ceil() as usize;
    for s in 0..shown_steps {
        let outcome = steps.get(s).and_then(|st| st.1);
        let (fill, what) = match outcome {
            Some(true) => (INK, "succeeded"),
            Some(false) => (RED, "failed"),
            None => (GREY, "outcome unknown"),
        };
        let x = cx(s);
        if outcome == Some(false) {
            w!(out, "<rect x=\"{:.1}\" y=\"{top}\" width=\"{col:.1}\" height=\"{:.1}\" fill=\"{RED}\" fill-opacity=\"0.07\"/>", x - col / 2.0, h - top);
        }
        let (full, cut, y) = (escape(name(s)), short(name(s), 16), head_h - 20.0);
        w!(
            out,
            "<g fill=\"{fill}\"><title>step {s}: {full} ({what})</title>"
        );
        let turn = format!("transform=\"rotate(-60 {:.1} {y:.1})\"", x + 3.0);
        label(out, (x + 3.0, y), &turn, &cut);
        if s % every == 0 {
            let bold = format!("{MID} font-weight=\"600\"");
            label(out, (x, head_h - 4.0), &bold, &s.to_string());
        }
        out.push_str("</g>");
    }
    for (l, (lane, evs)) in lanes.iter().enumerate() {
        let y = cy(l);
        line(out, (label_w, y), (w - 12.0, y), "stroke=\"#eee\"");
        let body = format!("<title>{}</title>{}", escape(lane), short(lane, 24));
        label(
            out,
            (label_w - 8.0, y + 4.0),
            &format!("class=\"lane\" {END}"),
            &body,
        );
        let drawn: Vec<&(usize, &str)> = evs.iter().filter(|e| e.0 < shown_steps).collect();
        for pair in drawn.windows(2) {
            // After a deletion the resource should be gone: that stretch is dashed.
            let dash = if pair[0].1 == "delete" {
                " stroke-dasharray=\"3 3\""
            } else {
                ""
            };
            let style = format!("stroke=\"#777\" stroke-width=\"2\"{dash}");
            line(out, (cx(pair[0].0), y), (cx(pair[1].0), y), &style);
        }
        for &&(s, kind) in &drawn {
            let (tool, kind_e, lane_e) = (escape(name(s)), escape(kind), escape(lane));
            w!(
                out,
                "<g><title>step {s} · {tool} · {kind_e} {lane_e}</title>{}</g>",
                marker(kind, cx(s), y)
            );
        }
    }
    // Violations at the same step and lane share one mark whose tooltip lists them all.
    let mut marks: Vec<(usize, Option<usize>, Vec<String>)> = Vec::new();
    for v in violations {
        let s = v.step;
        if s >= shown_steps {
            continue;
        }
        let lane = (v.resource).and_then(|r| lanes.iter().position(|(n, _)| n.as_str() == r));
        let tip = format!("step {s} · {}: {}", escape(v.kind), escape(v.explanation));
        match marks.iter_mut().find(|m| m.0 == s && m.1 == lane) {
            Some(m) => m.2.push(tip),
            None => marks.push((s, lane, vec![tip])),
        }
        if let Some(c) = v.conflicting_step.filter(|&c| c < shown_steps) {
            let y = lane.map_or(head_h + tri_h / 2.0, cy);
            let (x1, x2) = (cx(c), cx(s));
            let (mid, lift) = (
                (x1 + x2) / 2.0,
                y - 2.0 * (lane_h * 0.8).min(8.0 + (x2 - x1).abs() * 0.2),
            );
            w!(out, "<path d=\"M{x1:.1} {y:.1}Q{mid:.1} {lift:.1} {x2:.1} {y:.1}\" fill=\"none\" stroke=\"{RED}\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\"><title>step {c} conflicts with step {s}</title></path>");
        }
    }
    for (s, lane, tips) in &marks {
        let (x, tips) = (cx(*s), tips.join("\n"));
        match lane {
            Some(l) => {
                let (name, y) = (escape(lanes[*l].0), cy(*l));
                w!(out, "<g class=\"vring\" data-step=\"{s}\" data-lane=\"{name}\"><title>{tips}</title><circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"10\" fill=\"none\" stroke=\"{RED}\" stroke-width=\"2\"/></g>");
            }
            None => {
                let (l, r, t, b) = (x - 6.0, x + 6.0, head_h + 3.0, head_h + tri_h - 3.0);
                w!(out, "<g class=\"vtri\" data-step=\"{s}\"><title>{tips}</title><path d=\"M{l:.1} {t:.1}L{r:.1} {t:.1}L{x:.1} {b:.1}Z\" fill=\"{RED}\"/></g>");
            }
        }
    }
    out.push_str("</svg></div>\n");
    if n_steps > shown_steps || total_lanes > shown_lanes {
        let (steps_left, lanes_left) = (n_steps - shown_steps, total_lanes - shown_lanes);
        w!(out, "<p class=\"note\">Drawn: the first {shown_steps} of {n_steps} steps and {shown_lanes} of {total_lanes} lanes; {steps_left} steps and {lanes_left} lanes are left out of the drawing (the table below lists every violation).</p>\n");
    }
    legend(out);
    violation_table(out, violations);
}

/// The timeline's legend, drawn with CSS so that the page has exactly one SVG per chart.
fn legend(out: &mut String) {
    let sw = "<span><i class=\"sw\" style=\"";
    w!(
        out,
        "<p class=\"legend\">{sw}background:{GREEN};border-radius:50%\"></i>create</span>\
         {sw}border:1.5px solid {INK};border-radius:50%\"></i>read</span>\
         {sw}background:{BLUE}\"></i>update</span>\
         <span><b style=\"margin-right:5px\">✕</b>delete</span>\
         {sw}border:1.5px solid {ORANGE};transform:rotate(45deg)\"></i>missing</span>\
         {sw}border:2px solid {RED};border-radius:50%\"></i>violation on a resource</span>\
         {sw}background:{RED};clip-path:polygon(0 0,100% 0,50% 100%)\"></i>violation without \
         a lane</span><span>dashed red arc: conflicting step → violating step</span>\
         <span>dashed grey: the resource's life after its deletion</span>\
         <span>red column: the step failed; grey header: outcome unknown</span></p>\n"
    );
}

/// The trajectory's violations as a table, every one of them, drawn or not.
fn violation_table(out: &mut String, violations: &[Shown<'_>]) {
    if violations.is_empty() {
        out.push_str("<p>No violations in this trajectory.</p>\n");
        return;
    }
    let rows: Vec<_> = (violations.iter())
        .map(|v| {
            let cells = vec![
                v.step.to_string(),
                escape(v.kind),
                v.resource.map(escape).unwrap_or_default(),
                v.conflicting_step
                    .map(|c| c.to_string())
                    .unwrap_or_default(),
                escape(v.explanation),
            ];
            (false, cells)
        })
        .collect();
    let head = "step|kind|resource|conflicting step|explanation";
    table(out, head, &[0, 3], &rows);
}

/// Checks the report on the example audit and on partial inputs.
#[cfg(test)]
mod tests {
    use super::*;
    use envsim_core::audit::observed::TimelineEvent;
    use envsim_core::audit::{EffectSource, SpecViolation, Violation, ViolationKind};
    use serde_json::json;

    /// The example summary of `envsim audit`, with a histogram added (the example predates
    /// that field): two trajectories, SCS 0.0 and 0.5.
    fn summary() -> AuditSummary {
        serde_json::from_value(json!({
            "trajectories": 2, "steps": 5, "checked": 4, "violations": 3,
            "violations_on_guessed_effects": 0,
            "by_kind": {
                "appeared_without_create": 0, "contradictory_repeat": 1, "failure_with_change": 0,
                "list_inconsistent": 0, "phantom_id": 1, "read_after_delete": 1, "stale_read": 0,
                "success_without_change": 0, "vanished_without_delete": 0
            },
            "scs": {"mean": 0.25, "min": 0.0, "p10": 0.0, "consistent_trajectories": 0,
                    "histogram": [1, 0, 0, 0, 0, 1, 0, 0, 0, 0]},
            "environments": [{"env": "", "effects": "guessed"}],
            "inputs": {"openai_chat": 1, "sharegpt": 1},
            "answers": {},
            "spec": {
                "trajectories": 2, "steps": 5, "violating_steps": 1,
                "spec_cs_mean": 0.8333333333333333,
                "drift": {"slope": 0.42857142857142855, "interval": [0.0, 0.5],
                          "by_index": [[2, 0], [2, 0], [1, 1]]}
            },
            "bias": {
                "tools": {
                    "create_ticket": {"steps": 1, "observed": {"success": 1.0},
                        "expected": {"success": 1.0}, "jsd": 0.0, "happy_path_excess": 0.0},
                    "delete_ticket": {"steps": 1, "observed": {"success": 1.0},
                        "expected": {"success": 1.0}, "jsd": 0.0, "happy_path_excess": 0.0},
                    "get_ticket": {"steps": 3,
                        "observed": {"not_found": 0.3333333333333333, "success": 0.6666666666666666},
                        "expected": {"not_found": 0.5, "success": 0.5},
                        "jsd": 0.020720839623908208, "happy_path_excess": 0.16666666666666663}
                },
                "overall": {"steps": 5, "observed": {"not_found": 0.2, "success": 0.8},
                    "expected": {"not_found": 0.3, "success": 0.7},
                    "jsd": 0.009668627400105323, "happy_path_excess": 0.10000000000000009},
                "without_expectation": [],
                "expected_from": "the statuses --spec declares, each equally likely",
                "observed": {"not_found": 0.2, "success": 0.8}
            },
            "coverage": {"create": 1, "delete": 1, "failure": 1, "read": 2}
        }))
        .expect("the example summary reads")
    }

    /// The example trajectory: a ticket created, deleted, then read; another one missing; a
    /// read after the deletion and a response that breaks its schema.
    fn drawn() -> Drawn {
        let event = |step, kind| TimelineEvent { step, kind };
        let steps = [
            ("create_ticket", true),
            ("delete_ticket", true),
            ("get_ticket", true),
            ("get_ticket", false),
        ];
        let lanes = [
            (
                "ticket/T1",
                vec![event(0, "create"), event(1, "delete"), event(2, "read")],
            ),
            ("ticket/T9", vec![event(3, "missing")]),
        ];
        Drawn {
            timeline: Timeline {
                trajectory: "line 1 o1".into(),
                steps: steps
                    .iter()
                    .map(|(t, ok)| (t.to_string(), Some(*ok)))
                    .collect(),
                lanes: lanes.into_iter().map(|(l, e)| (l.to_string(), e)).collect(),
            },
            violations: vec![Violation {
                trajectory: "line 1 o1".into(),
                step: 2,
                kind: ViolationKind::ReadAfterDelete,
                tool: "get_ticket".into(),
                resource: Some("ticket/T1".into()),
                field: Some("ticket_id".into()),
                conflicting_step: Some(1),
                guessed: false,
                effects: EffectSource::Observed,
                explanation: "get_ticket succeeds on ticket/T1, which step 1 deleted".into(),
            }],
            spec: vec![SpecViolation {
                trajectory: "line 1 o1".into(),
                step: 2,
                tool: "get_ticket".into(),
                kind: "response_schema".into(),
                explanation: "the response breaks the declared success schema: status: \
                              \"opened\" is not one of \"open\" or \"closed\""
                    .into(),
            }],
        }
    }

    /// All five characters that could open markup or end an attribute are replaced.
    #[test]
    fn escape_replaces_the_five_special_characters() {
        assert_eq!(
            escape(r#"<a href="x">Tom & 'Jerry'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("plain ✓"), "plain ✓");
    }

    /// The example audit: a standalone page with every chart and every violation drawn.
    #[test]
    fn example_report_is_self_contained_and_complete() {
        let html = render(&summary(), Some(&drawn()));
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(!html.contains("<script"));
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(html.contains(
            "the response breaks the declared success schema: status: &quot;opened&quot; is not \
             one of &quot;open&quot; or &quot;closed&quot;"
        ));
        // Histogram, drift, bias bars and timeline.
        assert_eq!(html.matches("<svg").count(), 4);
        assert_eq!(html.matches("class=\"lane\"").count(), 2);
        assert_eq!(html.matches("class=\"vring\"").count(), 1);
        assert!(html.contains("<g class=\"vring\" data-step=\"2\" data-lane=\"ticket/T1\"><title>step 2 · read_after_delete: get_ticket succeeds on ticket/T1, which step 1 deleted</title>"));
        // The schema violation has no resource: a triangle on its column.
        assert!(html.contains("<g class=\"vtri\" data-step=\"2\">"));
        assert!(html.contains("<title>step 2: 1 of 1 (100.0%)</title>"));
        assert!(html.contains("<title>step 0: 0 of 2 (0.0%)</title>"));
        assert!(html.contains("<title>step 1 conflicts with step 2</title>"));
        // Tools by JSD, largest first.
        let get = html.find("<tr><td>get_ticket</td>").unwrap();
        assert!(get < html.find("<tr><td>create_ticket</td>").unwrap());
        assert!(html.contains("<td class=\"n\">+16.7 pp</td>"));
        assert!(html.contains("<tr class=\"zero\"><td>stale_read</td>"));
        // Without its histogram the summary draws one chart fewer.
        let mut bare = summary();
        bare.scs.histogram.clear();
        let html = render(&bare, Some(&drawn()));
        assert_eq!(html.matches("<svg").count(), 3);
    }

    /// Absent sections are skipped, and an empty trajectory renders without panicking.
    #[test]
    fn missing_parts_are_left_out() {
        let mut s = summary();
        s.spec = None;
        let html = render(&s, None);
        assert!(!html.contains("<h2>Specification</h2>") && !html.contains("<h3>Drift</h3>"));
        assert!(!html.contains("<h2>Timeline"));
        assert!(html.contains("<h2>SCS distribution</h2>"));
        // Without an expectation: the observed shares, no comparison and no bars.
        s.bias.report = None;
        s.bias.expected_from = None;
        let html = render(&s, None);
        assert!(html.contains("<p>No expected outcome distribution.</p>"));
        assert!(html.contains("<tr><td>success</td><td class=\"n\">80.0%</td></tr>"));
        assert_eq!(html.matches("<svg").count(), 1);
        let empty = Drawn {
            timeline: Timeline::default(),
            violations: Vec::new(),
            spec: Vec::new(),
        };
        let html = render(&s, Some(&empty));
        assert!(html.contains("The trajectory has no steps to draw."));
        assert!(html.contains("No violations in this trajectory."));
        assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    }

    /// The same input gives the same bytes, so reports can be diffed.
    #[test]
    fn rendering_is_deterministic() {
        let a = render(&summary(), Some(&drawn()));
        let b = render(&summary(), Some(&drawn()));
        assert_eq!(a, b);
    }
}
