//! The "cliff chart": config-match accuracy (CM-strict, or the reference lane's CM-ref, see
//! [`CliffMetric`]) against |Δ| (the number of state changes a tool call makes), one curve per
//! evaluation run, rendered as a self-contained SVG document.
//!
//! [`cliff_svg`] is a pure function: no I/O, no clock, no hashing, so the same input always gives
//! the same bytes. Every number is written with a fixed precision (coordinates with two decimals,
//! percentages with one) and every piece of caller-supplied text is XML-escaped.
//!
//! What the chart holds, back to front:
//!
//! * a white background, the title, light grid lines at 0/20/…/100 % and at every integer |Δ|
//!   (a coarser 1/2/5×10^k step once that would take more than [`MAX_X_TICKS`] intervals), the axes
//!   with their ticks and titles;
//! * one translucent 95 % confidence band per series (`<path class="band">`, lo → hi), emitted only
//!   for series with at least one drawable point;
//! * the null baseline, if any: a dashed grey `<path class="line baseline">` with small markers and
//!   no band;
//! * per series a `<path class="line">` in the series colour (Okabe–Ito, cycling) and one
//!   `<circle>` marker per drawable point carrying a `<title>` tooltip such as
//!   `|Δ|=3: 41.2% [30.1, 52.0], n=34 (run name)`;
//! * a legend to the right of the plot (series name, overall n);
//! * a "no data" note when no series has a drawable point.
//!
//! A point is drawable when `n > 0` and its rate is finite. Points that are not drawable are
//! skipped and break the line (and the band) there: the line is one `<path>` whose `d` holds one
//! `M…L…` sub-path per unbroken run of drawable points, so nothing is interpolated across a
//! skipped point. (A change count that is simply absent from `points` does not break the line.)
//! Rates and interval ends are clamped to `[0, 1]`; a NaN interval end falls back to the rate and
//! `lo > hi` is swapped.

use std::fmt::Write as _;

/// Width of the SVG canvas, in user units (px).
pub const WIDTH: f64 = 820.0;
/// Height of the SVG canvas, in user units (px).
pub const HEIGHT: f64 = 480.0;

/// Left edge of the plot area (the y axis).
const PLOT_LEFT: f64 = 64.0;
/// Right edge of the plot area.
const PLOT_RIGHT: f64 = 628.0;
/// Top edge of the plot area: where 100 % is drawn.
const PLOT_TOP: f64 = 50.0;
/// Bottom edge of the plot area (the x axis): where 0 % is drawn.
const PLOT_BOTTOM: f64 = 410.0;
/// Horizontal inset of the data inside the plot area, so markers at |Δ| = 0 and at the largest
/// |Δ| do not sit on the frame. |Δ| = 0 maps to `PLOT_LEFT + X_PAD`, the largest |Δ| to
/// `PLOT_RIGHT - X_PAD`.
const X_PAD: f64 = 12.0;
/// Left edge of the legend.
const LEGEND_X: f64 = 644.0;
/// Baseline of the first legend entry's first line.
const LEGEND_TOP: f64 = 62.0;
/// Vertical distance between legend entries (each entry is two text lines).
const LEGEND_ROW: f64 = 32.0;
/// Names longer than this many characters are shortened with "…" in the legend (the full name
/// stays available as a tooltip).
const LEGEND_NAME_CHARS: usize = 20;
/// Titles longer than this many characters are shortened with "…".
const TITLE_CHARS: usize = 80;
/// The x axis gets a tick (and grid line) at every integer |Δ| while that makes at most this many
/// intervals (`MAX_X_TICKS + 1` ticks counting 0); beyond, the smallest 1/2/5×10^k step that does.
pub const MAX_X_TICKS: usize = 24;
/// Half-width of the band drawn around an isolated point (a run of one drawable point).
const ISOLATED_BAND_HALF_WIDTH: f64 = 4.0;

/// Okabe–Ito colour-blind-safe palette, yellow (#F0E442) left out because it is nearly invisible on
/// white. Series cycle through it in order.
const PALETTE: [&str; 7] = [
    "#0072B2", // blue
    "#D55E00", // vermillion
    "#009E73", // bluish green
    "#CC79A7", // reddish purple
    "#E69F00", // orange
    "#56B4E9", // sky blue
    "#000000", // black
];
/// Colour of the null baseline.
const BASELINE_COLOUR: &str = "#7F7F7F";

/// One point: accuracy at one |Δ| value.
#[derive(Clone, Debug, PartialEq)]
pub struct CliffPoint {
    /// |Δ|: the number of state changes the calls in this bucket make.
    pub change_count: usize,
    /// Number of calls in the bucket. Points with `n == 0` are not drawn.
    pub n: usize,
    /// CM-strict accuracy, a fraction in `[0, 1]`.
    pub rate: f64,
    /// Lower end of the 95 % confidence interval, a fraction in `[0, 1]`.
    pub lo: f64,
    /// Upper end of the 95 % confidence interval, a fraction in `[0, 1]`.
    pub hi: f64,
}

/// One run's curve.
#[derive(Clone, Debug, PartialEq)]
pub struct CliffSeries {
    /// Shown in the legend and the tooltips.
    pub name: String,
    /// The points, in any order (they are drawn sorted by `change_count`).
    pub points: Vec<CliffPoint>,
}

/// A point after validation and clamping.
#[derive(Clone, Copy, Debug)]
struct Drawn {
    change_count: usize,
    n: usize,
    rate: f64,
    lo: f64,
    hi: f64,
}

/// Sorts `points` by change count and splits them into runs of drawable points; a point with
/// `n == 0` or a non-finite rate ends the current run.
fn segments(points: &[CliffPoint]) -> Vec<Vec<Drawn>> {
    let mut sorted: Vec<&CliffPoint> = points.iter().collect();
    sorted.sort_by_key(|p| p.change_count); // stable: equal change counts keep their order
    let mut out: Vec<Vec<Drawn>> = Vec::new();
    let mut current: Vec<Drawn> = Vec::new();
    for p in sorted {
        if p.n == 0 || !p.rate.is_finite() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        let rate = p.rate.clamp(0.0, 1.0);
        let end = |v: f64| if v.is_nan() { rate } else { v.clamp(0.0, 1.0) };
        let (mut lo, mut hi) = (end(p.lo), end(p.hi));
        if lo > hi {
            std::mem::swap(&mut lo, &mut hi);
        }
        current.push(Drawn {
            change_count: p.change_count,
            n: p.n,
            rate,
            lo,
            hi,
        });
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Maps |Δ| and rates to canvas coordinates.
struct Scale {
    x_max: usize,
}

impl Scale {
    fn x(&self, change_count: usize) -> f64 {
        let span = PLOT_RIGHT - PLOT_LEFT - 2.0 * X_PAD;
        PLOT_LEFT + X_PAD + change_count as f64 / self.x_max as f64 * span
    }

    fn y(&self, rate: f64) -> f64 {
        PLOT_BOTTOM - rate * (PLOT_BOTTOM - PLOT_TOP)
    }
}

/// Smallest step from 1, 2, 5, 10, 20, 50, … that keeps the number of x ticks at or under
/// [`MAX_X_TICKS`] (+1 for the tick at 0).
fn x_tick_step(x_max: usize) -> usize {
    let mut decade: usize = 1;
    loop {
        for m in [1usize, 2, 5] {
            match decade.checked_mul(m) {
                Some(step) if x_max / step <= MAX_X_TICKS => return step,
                Some(_) => {}
                None => return usize::MAX,
            }
        }
        decade = match decade.checked_mul(10) {
            Some(d) => d,
            None => return usize::MAX,
        };
    }
}

/// Fixed-precision coordinate; never prints `-0.00`.
fn f2(v: f64) -> String {
    let s = format!("{v:.2}");
    if s == "-0.00" {
        "0.00".to_string()
    } else {
        s
    }
}

/// A fraction as a percentage with one decimal, e.g. `0.4123` → `41.2`.
fn pct(v: f64) -> String {
    let s = format!("{:.1}", v * 100.0);
    if s == "-0.0" {
        "0.0".to_string()
    } else {
        s
    }
}

/// Escapes text for use in XML character data and double- or single-quoted attribute values.
/// Characters that XML 1.0 does not allow at all (most C0 controls, U+FFFE, U+FFFF) become U+FFFD.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Shortens `s` to at most `max` characters, ending with "…" when something was cut.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn total_n(series: &CliffSeries) -> usize {
    series
        .points
        .iter()
        .fold(0usize, |acc, p| acc.saturating_add(p.n))
}

/// The `d` of a series line: one `M…L…` sub-path per run of drawable points.
fn line_d(scale: &Scale, segs: &[Vec<Drawn>]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for seg in segs {
        let mut s = String::new();
        for (i, p) in seg.iter().enumerate() {
            let cmd = if i == 0 { "M" } else { " L" };
            let _ = write!(
                s,
                "{cmd}{} {}",
                f2(scale.x(p.change_count)),
                f2(scale.y(p.rate))
            );
        }
        parts.push(s);
    }
    parts.join(" ")
}

/// The `d` of a band: one closed sub-path per run, along `hi` left to right and back along `lo`.
/// A run of a single point becomes a narrow bar so its interval stays visible.
fn band_d(scale: &Scale, segs: &[Vec<Drawn>]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for seg in segs {
        let mut pts: Vec<(f64, f64)> = Vec::new();
        if let [p] = seg.as_slice() {
            let x = scale.x(p.change_count);
            let (l, r) = (x - ISOLATED_BAND_HALF_WIDTH, x + ISOLATED_BAND_HALF_WIDTH);
            pts.extend([
                (l, scale.y(p.hi)),
                (r, scale.y(p.hi)),
                (r, scale.y(p.lo)),
                (l, scale.y(p.lo)),
            ]);
        } else {
            pts.extend(seg.iter().map(|p| (scale.x(p.change_count), scale.y(p.hi))));
            pts.extend(
                seg.iter()
                    .rev()
                    .map(|p| (scale.x(p.change_count), scale.y(p.lo))),
            );
        }
        let mut s = String::new();
        for (i, (x, y)) in pts.iter().enumerate() {
            let cmd = if i == 0 { "M" } else { " L" };
            let _ = write!(s, "{cmd}{} {}", f2(*x), f2(*y));
        }
        s.push_str(" Z");
        parts.push(s);
    }
    parts.join(" ")
}

/// Marker circles with their tooltips.
fn markers(out: &mut String, scale: &Scale, segs: &[Vec<Drawn>], name: &str, r: f64, fill: &str) {
    for p in segs.iter().flatten() {
        let _ = writeln!(
            out,
            r##"<circle cx="{}" cy="{}" r="{}" fill="{fill}" stroke="#FFFFFF" stroke-width="1"><title>|Δ|={}: {}% [{}, {}], n={} ({})</title></circle>"##,
            f2(scale.x(p.change_count)),
            f2(scale.y(p.rate)),
            f2(r),
            p.change_count,
            pct(p.rate),
            pct(p.lo),
            pct(p.hi),
            p.n,
            esc(name),
        );
    }
}

/// One legend entry: a swatch (line + marker), the name and a second line with the overall n.
fn legend_entry(out: &mut String, row: usize, colour: &str, dashed: bool, name: &str, sub: &str) {
    let y = LEGEND_TOP + row as f64 * LEGEND_ROW;
    let mid = y - 4.0;
    let (dash, width) = if dashed {
        (r##" stroke-dasharray="6 4""##, "1.5")
    } else {
        ("", "2")
    };
    let _ = writeln!(
        out,
        r##"<g class="legend-entry"><title>{}</title>"##,
        esc(name)
    );
    let _ = writeln!(
        out,
        r##"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{colour}" stroke-width="{width}"{dash}/>"##,
        f2(LEGEND_X),
        f2(mid),
        f2(LEGEND_X + 22.0),
        f2(mid),
    );
    let _ = writeln!(
        out,
        r##"<circle cx="{}" cy="{}" r="3.50" fill="{colour}" stroke="#FFFFFF" stroke-width="1"/>"##,
        f2(LEGEND_X + 11.0),
        f2(mid),
    );
    let _ = writeln!(
        out,
        r##"<text x="{}" y="{}" font-size="12" fill="#222222">{}</text>"##,
        f2(LEGEND_X + 28.0),
        f2(y),
        esc(&shorten(name, LEGEND_NAME_CHARS)),
    );
    let _ = writeln!(
        out,
        r##"<text x="{}" y="{}" font-size="11" fill="#666666">{}</text>"##,
        f2(LEGEND_X + 28.0),
        f2(y + 14.0),
        esc(sub),
    );
    out.push_str("</g>\n");
}

/// Which config-match metric a cliff chart plots; its name labels the y axis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CliffMetric {
    /// envsim's strict lane.
    #[default]
    CmStrict,
    /// The reference evaluator's own config match.
    CmRef,
}

impl CliffMetric {
    /// The column name, as in the score tables.
    pub fn label(self) -> &'static str {
        match self {
            CliffMetric::CmStrict => "CM-strict",
            CliffMetric::CmRef => "CM-ref",
        }
    }
}

/// Renders the cliff chart as a standalone SVG document (`WIDTH`×`HEIGHT`, UTF-8, no XML
/// declaration). `baseline` is drawn dashed and grey, without a band. Same input → same bytes.
pub fn cliff_svg(
    title: &str,
    metric: CliffMetric,
    series: &[CliffSeries],
    baseline: Option<&CliffSeries>,
) -> String {
    let series_segs: Vec<Vec<Vec<Drawn>>> = series.iter().map(|s| segments(&s.points)).collect();
    let baseline_segs: Option<Vec<Vec<Drawn>>> = baseline.map(|b| segments(&b.points));
    let x_max = series
        .iter()
        .chain(baseline)
        .flat_map(|s| s.points.iter().map(|p| p.change_count))
        .max()
        .unwrap_or(0)
        .max(1);
    let scale = Scale { x_max };
    let has_data = series_segs.iter().any(|segs| !segs.is_empty());
    let title = shorten(title, TITLE_CHARS);

    let mut out = String::new();
    let _ = writeln!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="Helvetica, Arial, sans-serif" role="img" aria-label="{t}">"##,
        w = WIDTH,
        h = HEIGHT,
        t = esc(&title),
    );
    let _ = writeln!(out, "<title>{}</title>", esc(&title));
    let _ = writeln!(
        out,
        r##"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#FFFFFF"/>"##
    );
    let _ = writeln!(
        out,
        r##"<text class="title" x="{}" y="30.00" font-size="16" font-weight="bold" fill="#222222">{}</text>"##,
        f2(PLOT_LEFT),
        esc(&title),
    );

    // Grid, ticks and tick labels.
    out.push_str("<g class=\"grid\" stroke=\"#E5E5E5\" stroke-width=\"1\">\n");
    for k in 0..=5u32 {
        let y = f2(scale.y(f64::from(k) / 5.0));
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{y}" x2="{}" y2="{y}"/>"##,
            f2(PLOT_LEFT),
            f2(PLOT_RIGHT),
        );
    }
    let step = x_tick_step(x_max);
    let x_ticks: Vec<usize> = (0..=x_max).step_by(step).collect();
    for &t in &x_ticks {
        let x = f2(scale.x(t));
        let _ = writeln!(
            out,
            r##"<line x1="{x}" y1="{}" x2="{x}" y2="{}"/>"##,
            f2(PLOT_TOP),
            f2(PLOT_BOTTOM),
        );
    }
    out.push_str("</g>\n");

    out.push_str("<g class=\"axes\" stroke=\"#333333\" stroke-width=\"1\">\n");
    let _ = writeln!(
        out,
        r##"<line x1="{l}" y1="{b}" x2="{r}" y2="{b}"/>"##,
        l = f2(PLOT_LEFT),
        r = f2(PLOT_RIGHT),
        b = f2(PLOT_BOTTOM),
    );
    let _ = writeln!(
        out,
        r##"<line x1="{l}" y1="{t}" x2="{l}" y2="{b}"/>"##,
        l = f2(PLOT_LEFT),
        t = f2(PLOT_TOP),
        b = f2(PLOT_BOTTOM),
    );
    for k in 0..=5u32 {
        let y = f2(scale.y(f64::from(k) / 5.0));
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{y}" x2="{}" y2="{y}"/>"##,
            f2(PLOT_LEFT - 5.0),
            f2(PLOT_LEFT),
        );
    }
    for &t in &x_ticks {
        let x = f2(scale.x(t));
        let _ = writeln!(
            out,
            r##"<line x1="{x}" y1="{}" x2="{x}" y2="{}"/>"##,
            f2(PLOT_BOTTOM),
            f2(PLOT_BOTTOM + 5.0),
        );
    }
    out.push_str("</g>\n");

    out.push_str("<g class=\"tick-labels\" font-size=\"11\" fill=\"#333333\">\n");
    for k in 0..=5u32 {
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" text-anchor="end">{}%</text>"##,
            f2(PLOT_LEFT - 8.0),
            f2(scale.y(f64::from(k) / 5.0) + 4.0),
            k * 20,
        );
    }
    for &t in &x_ticks {
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" text-anchor="middle">{t}</text>"##,
            f2(scale.x(t)),
            f2(PLOT_BOTTOM + 18.0),
        );
    }
    out.push_str("</g>\n");

    let plot_mid_x = (PLOT_LEFT + PLOT_RIGHT) / 2.0;
    let plot_mid_y = (PLOT_TOP + PLOT_BOTTOM) / 2.0;
    let _ = writeln!(
        out,
        r##"<text class="axis-title" x="{}" y="{}" font-size="13" text-anchor="middle" fill="#222222">|Δ| (state changes per call)</text>"##,
        f2(plot_mid_x),
        f2(PLOT_BOTTOM + 44.0),
    );
    let _ = writeln!(
        out,
        r##"<text class="axis-title" x="18.00" y="{y}" font-size="13" text-anchor="middle" fill="#222222" transform="rotate(-90 18.00 {y})">{label} (%)</text>"##,
        y = f2(plot_mid_y),
        label = metric.label(),
    );

    // Bands under everything else.
    out.push_str("<g class=\"bands\">\n");
    for (i, segs) in series_segs.iter().enumerate() {
        if segs.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            r##"<path class="band" d="{}" fill="{}" fill-opacity="0.18" stroke="none"/>"##,
            band_d(&scale, segs),
            PALETTE[i % PALETTE.len()],
        );
    }
    out.push_str("</g>\n");

    if let (Some(b), Some(segs)) = (baseline, &baseline_segs) {
        out.push_str("<g class=\"baseline\">\n");
        let _ = writeln!(
            out,
            r##"<path class="line baseline" d="{}" fill="none" stroke="{BASELINE_COLOUR}" stroke-width="1.5" stroke-dasharray="6 4" stroke-linejoin="round" stroke-linecap="round"/>"##,
            line_d(&scale, segs),
        );
        markers(&mut out, &scale, segs, &b.name, 2.5, BASELINE_COLOUR);
        out.push_str("</g>\n");
    }

    for (i, (s, segs)) in series.iter().zip(&series_segs).enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        out.push_str("<g class=\"series\">\n");
        let _ = writeln!(
            out,
            r##"<path class="line" d="{}" fill="none" stroke="{colour}" stroke-width="2" stroke-linejoin="round" stroke-linecap="round"/>"##,
            line_d(&scale, segs),
        );
        markers(&mut out, &scale, segs, &s.name, 3.5, colour);
        out.push_str("</g>\n");
    }

    // Legend: series in order, then the baseline. When they do not fit beside the plot, the last
    // series rows give way to a "+k more" row; the baseline is always listed.
    out.push_str("<g class=\"legend\">\n");
    let slots = ((PLOT_BOTTOM - LEGEND_TOP) / LEGEND_ROW).floor() as usize + 1;
    let baseline_rows = usize::from(baseline.is_some());
    let shown = if series.len() + baseline_rows <= slots {
        series.len()
    } else {
        slots - 1 - baseline_rows
    };
    let mut row = 0;
    for (i, s) in series.iter().take(shown).enumerate() {
        let sub = format!("n={}", total_n(s));
        legend_entry(
            &mut out,
            row,
            PALETTE[i % PALETTE.len()],
            false,
            &s.name,
            &sub,
        );
        row += 1;
    }
    if shown < series.len() {
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" font-size="11" fill="#666666">+{} more series</text>"##,
            f2(LEGEND_X),
            f2(LEGEND_TOP + row as f64 * LEGEND_ROW),
            series.len() - shown,
        );
        row += 1;
    }
    if let Some(b) = baseline {
        let sub = format!("baseline, n={}", total_n(b));
        legend_entry(&mut out, row, BASELINE_COLOUR, true, &b.name, &sub);
    }
    out.push_str("</g>\n");

    if !has_data {
        let _ = writeln!(
            out,
            r##"<text class="no-data" x="{}" y="{}" font-size="14" text-anchor="middle" fill="#888888">no data</text>"##,
            f2(plot_mid_x),
            f2(plot_mid_y),
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(change_count: usize, n: usize, rate: f64, lo: f64, hi: f64) -> CliffPoint {
        CliffPoint {
            change_count,
            n,
            rate,
            lo,
            hi,
        }
    }

    fn series(name: &str, points: Vec<CliffPoint>) -> CliffSeries {
        CliffSeries {
            name: name.to_string(),
            points,
        }
    }

    /// A smooth-ish decaying curve over |Δ| 0..=max with a crude ±interval.
    fn decaying(name: &str, start: f64, decay: f64, max: usize) -> CliffSeries {
        let points = (0..=max)
            .map(|k| {
                let rate = start * decay.powi(k as i32);
                let n = 120usize.saturating_sub(k * 9).max(4);
                let half = 1.96 * (rate * (1.0 - rate) / n as f64).sqrt();
                pt(k, n, rate, (rate - half).max(0.0), (rate + half).min(1.0))
            })
            .collect();
        series(name, points)
    }

    fn count(hay: &str, needle: &str) -> usize {
        hay.matches(needle).count()
    }

    /// All `d` attributes of `<path class="line…">` elements, in document order.
    fn line_ds(svg: &str) -> Vec<String> {
        svg.lines()
            .filter(|l| l.starts_with("<path class=\"line"))
            .map(|l| {
                let start = l.find(" d=\"").expect("d attribute") + 4;
                let end = start + l[start..].find('"').expect("closing quote");
                l[start..end].to_string()
            })
            .collect()
    }

    /// A tiny XML well-formedness check: one root element, balanced tags, quoted attributes, no
    /// raw `<` inside tags, every `&` starting a known entity or a numeric character reference.
    fn assert_well_formed(svg: &str) {
        let mut stack: Vec<&str> = Vec::new();
        let mut roots = 0;
        let mut rest = svg;
        while let Some(open) = rest.find('<') {
            check_text(&rest[..open]);
            if stack.is_empty() {
                assert!(
                    rest[..open].trim().is_empty(),
                    "text outside the root element"
                );
            }
            let after = &rest[open + 1..];
            let close = after.find('>').expect("unterminated tag");
            let tag = &after[..close];
            assert!(!tag.contains('<'), "'<' inside tag: {tag}");
            assert_eq!(count(tag, "\"") % 2, 0, "unbalanced quotes in tag: {tag}");
            check_text(tag);
            if let Some(name) = tag.strip_prefix('/') {
                let top = stack
                    .pop()
                    .unwrap_or_else(|| panic!("closing </{name}> with nothing open"));
                assert_eq!(top, name.trim(), "mismatched closing tag");
            } else {
                let name = tag
                    .split(|c: char| c.is_whitespace() || c == '/')
                    .next()
                    .unwrap_or("");
                assert!(
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
                    "bad tag name in <{tag}>"
                );
                if stack.is_empty() {
                    roots += 1;
                }
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
            rest = &after[close + 1..];
        }
        assert!(
            rest.trim().is_empty(),
            "trailing text after the root element"
        );
        assert!(stack.is_empty(), "unclosed tags: {stack:?}");
        assert_eq!(roots, 1, "exactly one root element");
    }

    fn check_text(text: &str) {
        for (i, _) in text.match_indices('&') {
            let tail = &text[i..];
            let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"]
                .iter()
                .any(|e| tail.starts_with(e))
                || tail
                    .strip_prefix("&#")
                    .and_then(|t| t.find(';').map(|e| (t, e)))
                    .is_some_and(|(t, e)| e > 0 && t[..e].chars().all(|c| c.is_ascii_digit()));
            assert!(ok, "raw '&' in {text:?}");
        }
        assert!(!text.contains('>'), "raw '>' in {text:?}");
    }

    fn realistic() -> (Vec<CliffSeries>, CliffSeries) {
        let runs = vec![
            decaying("gpt-x / full-state prompt", 0.97, 0.84, 12),
            decaying("small-model <diff> & \"patch\"", 0.93, 0.70, 12),
            {
                let mut s = decaying("retrieval-augmented", 0.95, 0.78, 12);
                s.points[9].n = 0; // an empty bucket: the line breaks at |Δ| = 9
                s
            },
        ];
        let baseline = decaying("null (no-op) baseline", 0.62, 0.55, 12);
        (runs, baseline)
    }

    #[test]
    fn chart_starts_with_svg_and_is_balanced() {
        let (runs, baseline) = realistic();
        let svg = cliff_svg("Cliff", CliffMetric::CmStrict, &runs, Some(&baseline));
        assert!(svg.starts_with("<svg "));
        assert!(svg.ends_with("</svg>\n"));
        assert_eq!(count(&svg, "<svg"), 1);
        assert_eq!(count(&svg, "</svg>"), 1);
        assert!(svg.contains(r#"width="820" height="480" viewBox="0 0 820 480""#));
        assert_well_formed(&svg);
    }

    #[test]
    fn chart_has_one_line_per_series_and_one_band_per_drawable_series() {
        let (mut runs, baseline) = realistic();
        runs.push(series(
            "all empty",
            vec![pt(0, 0, 0.5, 0.4, 0.6), pt(3, 0, 0.2, 0.1, 0.3)],
        ));
        runs.push(series("no points", vec![]));

        let svg = cliff_svg("t", CliffMetric::CmStrict, &runs, Some(&baseline));
        assert_eq!(count(&svg, "<path class=\"line\""), runs.len());
        assert_eq!(count(&svg, "<path class=\"line baseline\""), 1);
        assert_eq!(count(&svg, "<path class=\"band\""), 3);
        // No other paths and no polylines: every <path is a series line, the baseline or a band.
        assert_eq!(count(&svg, "<path"), runs.len() + 1 + 3);
        assert_eq!(count(&svg, "<polyline"), 0);
        // The baseline has no band: its colour is never used as a fill with opacity.
        assert_eq!(count(&svg, "fill-opacity"), 3);
        // Baseline first, then the series in order; the two undrawable series get an empty `d`.
        let ds = line_ds(&svg);
        assert_eq!(ds.len(), runs.len() + 1);
        assert!(ds[0].starts_with("M76.00 "));
        assert!(ds[..runs.len() - 1].iter().all(|d| d.starts_with('M')));
        assert!(ds[runs.len() - 1].is_empty() && ds[runs.len()].is_empty());

        let without = cliff_svg("t", CliffMetric::CmStrict, &runs, None);
        assert_eq!(count(&without, "<path class=\"line"), runs.len());
        assert_eq!(count(&without, "stroke-dasharray"), 0);
        assert_well_formed(&svg);
        assert_well_formed(&without);
    }

    #[test]
    fn chart_escapes_names_and_title() {
        let name = r#"a<b & "c""#;
        let runs = [series(
            name,
            vec![pt(0, 5, 0.4, 0.2, 0.6), pt(2, 5, 0.2, 0.1, 0.3)],
        )];
        let base = series("it's <null>", vec![pt(1, 3, 0.1, 0.0, 0.3)]);
        let svg = cliff_svg("T <&> \"q\"", CliffMetric::CmStrict, &runs, Some(&base));
        assert!(!svg.contains(name));
        assert!(!svg.contains("a<b"));
        assert!(svg.contains("a&lt;b &amp; &quot;c&quot;"));
        assert!(svg.contains("it&#39;s &lt;null&gt;"));
        assert!(svg.contains("T &lt;&amp;&gt; &quot;q&quot;"));
        assert!(svg.contains(r#"aria-label="T &lt;&amp;&gt; &quot;q&quot;""#));
        assert_well_formed(&svg);

        let control = cliff_svg(
            "bell\u{7}",
            CliffMetric::CmStrict,
            &[series("nul\u{0}", vec![pt(0, 1, 1.0, 1.0, 1.0)])],
            None,
        );
        assert!(!control.contains('\u{0}') && !control.contains('\u{7}'));
        assert!(control.contains("nul\u{FFFD}"));
        assert_well_formed(&control);
    }

    #[test]
    fn chart_maps_rate_extremes_to_plot_edges() {
        // x_max = 1: |Δ|=0 → PLOT_LEFT + X_PAD = 76, |Δ|=1 → PLOT_RIGHT - X_PAD = 616;
        // rate 1.0 → PLOT_TOP = 50, rate 0.0 → PLOT_BOTTOM = 410.
        let runs = [series(
            "s",
            vec![pt(0, 10, 1.0, 0.9, 1.0), pt(1, 10, 0.0, 0.0, 0.1)],
        )];
        let svg = cliff_svg("t", CliffMetric::CmStrict, &runs, None);
        assert!(svg.contains(r#"<circle cx="76.00" cy="50.00""#));
        assert!(svg.contains(r#"<circle cx="616.00" cy="410.00""#));
        assert_eq!(line_ds(&svg), ["M76.00 50.00 L616.00 410.00"]);
        // Band: along hi left to right, back along lo (0.9 → 86, 0.1 → 374).
        assert!(svg.contains(r#"d="M76.00 50.00 L616.00 374.00 L616.00 410.00 L76.00 86.00 Z""#));
        // The 100 % and 0 % grid lines and labels sit on the same coordinates.
        assert!(svg.contains(r#"<line x1="64.00" y1="50.00" x2="628.00" y2="50.00"/>"#));
        assert!(svg.contains(r#"<line x1="64.00" y1="410.00" x2="628.00" y2="410.00"/>"#));
        assert!(svg.contains(r#"y="54.00" text-anchor="end">100%</text>"#));
        assert!(svg.contains(r#"y="414.00" text-anchor="end">0%</text>"#));
        // Over |Δ| 0..=12 one unit is 540 / 12 = 45 px.
        let wide = cliff_svg(
            "t",
            CliffMetric::CmStrict,
            &[series(
                "s",
                vec![pt(0, 1, 0.5, 0.5, 0.5), pt(12, 1, 0.5, 0.5, 0.5)],
            )],
            None,
        );
        assert_eq!(line_ds(&wide), ["M76.00 230.00 L616.00 230.00"]);
        assert!(wide.contains(r#"<text x="121.00" y="428.00" text-anchor="middle">1</text>"#));
    }

    #[test]
    fn chart_skips_zero_n_points_and_breaks_the_line() {
        let runs = [series(
            "s",
            vec![
                pt(0, 10, 0.9, 0.8, 1.0),
                pt(1, 10, 0.8, 0.7, 0.9),
                pt(2, 0, 0.0, 0.0, 0.0),
                pt(3, 10, 0.5, 0.4, 0.6),
                pt(4, 10, 0.4, 0.3, 0.5),
            ],
        )];
        let svg = cliff_svg("t", CliffMetric::CmStrict, &runs, None);
        let ds = line_ds(&svg);
        assert_eq!(ds.len(), 1);
        assert_eq!(count(&ds[0], "M"), 2, "two segments: {}", ds[0]);
        assert_eq!(count(&ds[0], "L"), 2);
        // x_max = 4: 135 px per unit; |Δ|=2 would be at x = 346.
        assert!(ds[0].starts_with("M76.00 86.00 L211.00 122.00 M481.00 230.00 L616.00 266.00"));
        assert!(!svg.contains(r#"<circle cx="346.00""#));
        assert!(!svg.contains("|Δ|=2:"));
        assert_eq!(count(&svg, "<title>|Δ|="), 4);
        // The band breaks too: two closed sub-paths.
        let band = svg
            .lines()
            .find(|l| l.starts_with("<path class=\"band\""))
            .unwrap();
        assert_eq!(count(band, "Z"), 2);
        assert_well_formed(&svg);
    }

    #[test]
    fn chart_tooltips_carry_rate_interval_and_n() {
        let runs = [series(
            "run A",
            vec![pt(3, 34, 0.4123, 0.3014, 0.52), pt(4, 7, 0.1, 0.0, 0.3)],
        )];
        let svg = cliff_svg("t", CliffMetric::CmStrict, &runs, None);
        assert!(svg.contains("<title>|Δ|=3: 41.2% [30.1, 52.0], n=34 (run A)</title>"));
        assert!(svg.contains("<title>|Δ|=4: 10.0% [0.0, 30.0], n=7 (run A)</title>"));
        // Legend: name and overall n.
        assert!(svg.contains(">run A</text>"));
        assert!(svg.contains(">n=41</text>"));
    }

    #[test]
    fn chart_clamps_out_of_range_and_non_finite_values() {
        let runs = [series(
            "s",
            vec![
                pt(0, 5, 1.7, -0.2, f64::INFINITY),
                pt(1, 5, f64::NAN, 0.1, 0.2),
                pt(2, 5, -0.5, f64::NAN, f64::NEG_INFINITY),
                pt(3, 5, f64::INFINITY, 0.0, 1.0),
                pt(4, 5, 0.5, 0.7, 0.3),
            ],
        )];
        let svg = cliff_svg("t", CliffMetric::CmStrict, &runs, None);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        // NaN and infinite rates are skipped and break the line; x_max stays 4 (135 px per unit).
        let ds = line_ds(&svg);
        assert_eq!(ds, ["M76.00 50.00 M346.00 410.00 M616.00 230.00"]);
        assert!(svg.contains("|Δ|=0: 100.0% [0.0, 100.0], n=5"));
        assert!(svg.contains("|Δ|=2: 0.0% [0.0, 0.0], n=5"));
        assert!(
            svg.contains("|Δ|=4: 50.0% [30.0, 70.0], n=5"),
            "lo > hi is swapped"
        );
        assert_eq!(
            count(&svg, "<circle cx="),
            3 + 1,
            "three markers plus the legend swatch"
        );
        // Isolated points get a narrow band bar (±4 px).
        assert!(svg.contains("M72.00 50.00 L80.00 50.00 L80.00 410.00 L72.00 410.00 Z"));
        assert_well_formed(&svg);
    }

    #[test]
    fn chart_without_series_still_has_axes_and_a_no_data_note() {
        let svg = cliff_svg("empty", CliffMetric::CmStrict, &[], None);
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains(">no data</text>"));
        assert!(svg.contains("|Δ| (state changes per call)"));
        assert!(svg.contains("CM-strict (%)"));
        let reference = cliff_svg("empty", CliffMetric::CmRef, &[], None);
        assert!(reference.contains("CM-ref (%)") && !reference.contains("CM-strict"));
        assert_eq!(count(&svg, "<path"), 0);
        // x runs 0..=1 at least: ticks 0 and 1.
        assert!(svg.contains(r#"<text x="76.00" y="428.00" text-anchor="middle">0</text>"#));
        assert!(svg.contains(r#"<text x="616.00" y="428.00" text-anchor="middle">1</text>"#));
        assert_well_formed(&svg);

        // A baseline alone is not data, and series with only empty buckets are not either.
        let base = series("null", vec![pt(0, 3, 0.3, 0.1, 0.6)]);
        let only_empty = [series("e", vec![pt(5, 0, 0.5, 0.4, 0.6)])];
        let svg = cliff_svg("t", CliffMetric::CmStrict, &only_empty, Some(&base));
        assert!(svg.contains(">no data</text>"));
        assert_eq!(count(&svg, "<path class=\"band\""), 0);
        assert!(
            svg.contains(r#"text-anchor="middle">5</text>"#),
            "empty buckets still set the x range"
        );
        assert_well_formed(&svg);

        let (runs, _) = realistic();
        assert!(!cliff_svg("t", CliffMetric::CmStrict, &runs, None).contains("no data"));
    }

    #[test]
    fn chart_grid_has_percent_lines_and_every_integer_x() {
        let (runs, baseline) = realistic();
        let svg = cliff_svg("t", CliffMetric::CmStrict, &runs, Some(&baseline));
        for k in 0..=12 {
            assert!(
                svg.contains(&format!(r#"text-anchor="middle">{k}</text>"#)),
                "x tick {k}"
            );
        }
        for p in [0, 20, 40, 60, 80, 100] {
            assert!(
                svg.contains(&format!(r#"text-anchor="end">{p}%</text>"#)),
                "y tick {p}"
            );
        }
        let grid = &svg[svg.find("<g class=\"grid\"").unwrap()..];
        let grid = &grid[..grid.find("</g>").unwrap()];
        assert_eq!(count(grid, "<line"), 6 + 13);

        // A huge |Δ| falls back to a coarser step instead of thousands of ticks.
        let far = [series(
            "s",
            vec![pt(0, 1, 0.5, 0.4, 0.6), pt(1000, 1, 0.1, 0.0, 0.2)],
        )];
        let svg = cliff_svg("t", CliffMetric::CmStrict, &far, None);
        let grid = &svg[svg.find("<g class=\"grid\"").unwrap()..];
        let grid = &grid[..grid.find("</g>").unwrap()];
        assert_eq!(count(grid, "<line"), 6 + 21, "step 50 over 0..=1000");
        assert_eq!(x_tick_step(24), 1);
        assert_eq!(x_tick_step(25), 2);
        assert_eq!(x_tick_step(usize::MAX), 1_000_000_000_000_000_000);
    }

    #[test]
    fn chart_colours_cycle_and_legend_overflows_gracefully() {
        let many: Vec<CliffSeries> = (0..15)
            .map(|i| {
                series(
                    &format!("run {i}"),
                    vec![pt(0, 1, 0.5, 0.4, 0.6), pt(1, 2, 0.4, 0.3, 0.5)],
                )
            })
            .collect();
        let base = series("null", vec![pt(0, 1, 0.1, 0.0, 0.2)]);
        let svg = cliff_svg("t", CliffMetric::CmStrict, &many, Some(&base));
        assert_eq!(count(&svg, "<path class=\"line\""), 15);
        // Series 0 and 7 share the first colour.
        let lines: Vec<&str> = svg
            .lines()
            .filter(|l| l.starts_with("<path class=\"line\""))
            .collect();
        assert!(
            lines[0].contains(PALETTE[0])
                && lines[7].contains(PALETTE[0])
                && lines[1].contains(PALETTE[1])
        );
        // 11 legend rows: 9 series, "+6 more series", the baseline.
        assert_eq!(count(&svg, "<g class=\"legend-entry\""), 10);
        assert!(svg.contains(">+6 more series</text>"));
        assert!(svg.contains(">baseline, n=1</text>"));
        assert_well_formed(&svg);

        let long = "a-very-long-run-name-that-goes-on-and-on";
        let svg = cliff_svg(
            "t",
            CliffMetric::CmStrict,
            &[series(long, vec![pt(0, 1, 0.5, 0.4, 0.6)])],
            None,
        );
        assert!(svg.contains(">a-very-long-run-nam…</text>"));
        assert!(
            svg.contains(&format!("<title>{long}</title>")),
            "full name kept as tooltip"
        );
    }

    #[test]
    fn chart_is_deterministic_and_order_independent_within_a_series() {
        let (runs, baseline) = realistic();
        let a = cliff_svg("Cliff", CliffMetric::CmStrict, &runs, Some(&baseline));
        let b = cliff_svg(
            "Cliff",
            CliffMetric::CmStrict,
            &runs.clone(),
            Some(&baseline.clone()),
        );
        assert_eq!(a, b);
        let mut shuffled = runs.clone();
        for s in &mut shuffled {
            s.points.reverse();
        }
        assert_eq!(
            a,
            cliff_svg("Cliff", CliffMetric::CmStrict, &shuffled, Some(&baseline))
        );
    }

    #[test]
    fn chart_is_well_formed_for_assorted_inputs() {
        let (runs, baseline) = realistic();
        let weird = series(
            "w\"eird' <&>",
            vec![
                pt(usize::MAX, 1, 0.3, 0.2, 0.4),
                pt(0, usize::MAX, 2.0, -1.0, f64::NAN),
                pt(7, 0, 0.5, 0.5, 0.5),
            ],
        );
        let inputs: Vec<(&str, Vec<CliffSeries>, Option<&CliffSeries>)> = vec![
            ("", vec![], None),
            ("only baseline", vec![], Some(&baseline)),
            ("one", vec![runs[0].clone()], None),
            ("all", runs.clone(), Some(&baseline)),
            ("weird <t>", vec![weird.clone(), weird], Some(&baseline)),
            (
                "single point",
                vec![series("p", vec![pt(0, 1, 0.5, 0.5, 0.5)])],
                None,
            ),
        ];
        for (title, s, b) in &inputs {
            let svg = cliff_svg(title, CliffMetric::CmRef, s, *b);
            assert!(svg.starts_with("<svg"), "{title}");
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{title}");
            assert_well_formed(&svg);
        }
    }

    #[test]
    #[ignore = "writes target/cliff-example.svg for a human to look at"]
    fn chart_write_example() {
        let (runs, baseline) = realistic();
        let svg = cliff_svg(
            "Config-match accuracy by |Δ| — example runs",
            CliffMetric::CmStrict,
            &runs,
            Some(&baseline),
        );
        assert_well_formed(&svg);
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
        std::fs::create_dir_all(&dir).expect("create target dir");
        let path = dir.join("cliff-example.svg");
        std::fs::write(&path, &svg).expect("write example");
        eprintln!("wrote {}", path.display());
    }
}
