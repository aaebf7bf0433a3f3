//! Rendering stored runs: the run report (table/Markdown with intervals and the null line, or
//! JSON), the run list and comparisons.

use crate::render::OutputFormat;
use anyhow::Result;
use comfy_table::presets::{ASCII_MARKDOWN, UTF8_FULL_CONDENSED};
use comfy_table::{CellAlignment, Table};
use envsim_core::stats::Interval;
use envsim_eval::report::{Comparison, RunReport};
use std::collections::HashMap;

fn pct(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".to_owned(), |r| format!("{:.1}", r * 100.0))
}

fn ci(interval: Option<Interval>) -> String {
    interval.map_or_else(
        || "-".to_owned(),
        |i| format!("[{:.1}, {:.1}]", i.lo * 100.0, i.hi * 100.0),
    )
}

fn new_table(format: OutputFormat) -> Table {
    let mut table = Table::new();
    table.load_preset(if format == OutputFormat::Markdown {
        ASCII_MARKDOWN
    } else {
        UTF8_FULL_CONDENSED
    });
    table
}

fn right_align(table: &mut Table, from: usize, to: usize) {
    for column in from..to {
        if let Some(c) = table.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// Row keys in display order with labels (detail rows only when populated).
fn display_rows(report: &RunReport) -> Vec<(String, String)> {
    crate::render::display_rows(&report.report)
        .into_iter()
        .map(|(key, label, _)| (key, label))
        .collect()
}

fn summary_of<'a>(
    report: &'a envsim_core::report::Report,
    key: &str,
) -> Option<&'a envsim_core::report::Summary> {
    if key == "overall" {
        return Some(&report.overall);
    }
    report
        .groups
        .iter()
        .find(|(g, _)| g.key() == key)
        .map(|(_, s)| s)
        .or_else(|| {
            report
                .strata
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, s)| s)
        })
}

fn ms(value: f64) -> String {
    if value >= 1000.0 {
        format!("{:.2} s", value / 1000.0)
    } else {
        format!("{value:.0} ms")
    }
}

/// The lines under a run's table: identity, completeness, tokens, cost, latency, requests.
fn footer(report: &RunReport) -> Vec<String> {
    let record = &report.record;
    let mut lines = vec![format!(
        "run {} · {} · template {} · {} · {}/{} samples finished{}",
        record.run_id,
        record.config.backend.label(),
        record.config.template.as_deref().unwrap_or("-"),
        record.bench_path,
        report.finished,
        report.report.samples.len(),
        if report.complete() {
            String::new()
        } else {
            " (INCOMPLETE: unfinished samples count as wrong; rerun the eval command to resume)"
                .to_owned()
        }
    )];
    if report.failed > 0 {
        let groups: Vec<String> = report
            .errors
            .iter()
            .map(|g| format!("{} × {}", g.count, g.cause))
            .collect();
        lines.push(format!(
            "{} samples failed after their retries ({}), counted as wrong; rerunning the eval command retries them; first: {}",
            report.failed,
            groups.join(", "),
            report.errors.first().map_or("", |g| g.first.as_str())
        ));
    }
    if report.baselines_missing > 0 {
        lines.push(format!(
            "the null and oracle lines cover {} of {} samples (the rest were never sent)",
            report.report.samples.len() - report.baselines_missing,
            report.report.samples.len()
        ));
    }
    let overall = &report.report.overall;
    if report.legacy_scores > 0 {
        lines.push(format!(
            "{} sample scores were written by an older envsim (score schema v1): their FM-ref/CM-ref came from envsim's lenient reading, not the reference evaluator's; rerun the same `envsim eval` command to rescore them from the stored outputs (no requests are repeated)",
            report.legacy_scores
        ));
    }
    if let Some(note) = crate::render::reference_note(&record.system, overall) {
        lines.push(note);
    }
    if overall.prompt_tokens + overall.completion_tokens > 0 {
        let mut line = format!(
            "tokens: {} prompt + {} completion",
            overall.prompt_tokens, overall.completion_tokens
        );
        if let Some(cost) = report.cost {
            line.push_str(&format!(" · cost ${:.4}", cost.total_usd));
            match cost.per_correct_usd {
                Some(c) => line.push_str(&format!(" · ${c:.5} per correct transition (CM-strict)")),
                None => line.push_str(" · no correct transition"),
            }
        }
        lines.push(line);
    }
    if let Some(l) = report.request_latency {
        let r = report.requests;
        lines.push(format!(
            "latency per request: p50 {} · p90 {} · p99 {} · max {} · {} requests ({} retries, {} failed attempts, {} API errors counted as wrong, {} cache hits)",
            ms(l.p50_ms),
            ms(l.p90_ms),
            ms(l.p99_ms),
            ms(l.max_ms),
            r.attempts,
            r.retries,
            r.failed_attempts,
            r.api_errors,
            r.cache_hits
        ));
    } else if report.requests.cache_hits > 0 {
        lines.push(format!(
            "all {} answers came from the response cache",
            report.requests.cache_hits
        ));
    }
    lines
}

/// Renders one run report.
pub fn render_run(report: &RunReport, format: OutputFormat) -> Result<String> {
    if format == OutputFormat::Json {
        return Ok(serde_json::to_string_pretty(&report.to_json())? + "\n");
    }
    let intervals: HashMap<String, Option<Interval>> = report
        .intervals()
        .into_iter()
        .map(|(key, cells)| {
            let cm = cells
                .into_iter()
                .find(|(m, _)| *m == "cm_strict")
                .and_then(|(_, ci)| ci);
            (key, cm)
        })
        .collect();
    let mut table = new_table(format);
    table.set_header([
        "stratum",
        "n",
        "system",
        "FM-ref",
        "CM-ref",
        "FM-strict",
        "CM-strict",
        "95% CI",
        "field F1",
        "parse fail",
    ]);
    for (key, label) in display_rows(report) {
        let Some(s) = summary_of(&report.report, &key) else {
            continue;
        };
        if s.n == 0 && key != "overall" {
            continue;
        }
        table.add_row([
            label,
            s.n.to_string(),
            report.record.system.clone(),
            pct(s.fm_ref),
            pct(s.cm_ref),
            pct(s.fm_strict),
            pct(s.cm_strict),
            ci(intervals.get(&key).copied().flatten()),
            pct(s.field_f1),
            pct(s.parse_failure_rate),
        ]);
        let baselines = [Some(&report.null), report.oracle.as_ref()];
        // A baseline run needs no second line of itself.
        let own = report.record.config.backend.label();
        for baseline in baselines.into_iter().flatten().filter(|b| b.system != own) {
            if let Some(b) = summary_of(baseline, &key) {
                table.add_row([
                    String::new(),
                    String::new(),
                    baseline.system.clone(),
                    pct(b.fm_ref),
                    pct(b.cm_ref),
                    pct(b.fm_strict),
                    pct(b.cm_strict),
                    String::new(),
                    pct(b.field_f1),
                    pct(b.parse_failure_rate),
                ]);
            }
        }
    }
    right_align(&mut table, 1, 2);
    right_align(&mut table, 3, 10);
    let mut out = String::new();
    out.push_str(&table.to_string());
    out.push('\n');
    for line in footer(report) {
        if format == OutputFormat::Markdown {
            out.push_str("- ");
        }
        out.push_str(&line);
        out.push('\n');
    }
    if format == OutputFormat::Table {
        out.push_str(crate::render::LEGEND);
        out.push_str("; 95% CI: percentile bootstrap of CM-strict; null (no change) and oracle (the labels) on the same samples; empty strata omitted\n");
    }
    Ok(out)
}

/// Renders the list of stored runs.
pub fn render_runs(reports: &[RunReport], format: OutputFormat) -> Result<String> {
    if format == OutputFormat::Json {
        let list: Vec<serde_json::Value> = reports
            .iter()
            .map(|r| {
                serde_json::json!({
                    "id": r.record.run_id,
                    "system": r.record.system,
                    "backend": r.record.config.backend.label(),
                    "template": r.record.config.template,
                    "bench_path": r.record.bench_path,
                    "created_at": r.record.created_at,
                    "samples": r.report.samples.len(),
                    "finished": r.finished,
                    "cm_strict": r.report.overall.cm_strict,
                })
            })
            .collect();
        return Ok(serde_json::to_string_pretty(&list)? + "\n");
    }
    let mut table = new_table(format);
    table.set_header([
        "run",
        "system",
        "backend",
        "template",
        "benchmark",
        "created (UTC)",
        "finished",
        "CM-strict",
    ]);
    for r in reports {
        table.add_row([
            r.record.run_id.clone(),
            r.record.system.clone(),
            r.record.config.backend.label(),
            r.record
                .config
                .template
                .clone()
                .unwrap_or_else(|| "-".into()),
            r.record.bench_path.clone(),
            r.record.created_at.chars().take(19).collect(),
            format!("{}/{}", r.finished, r.report.samples.len()),
            pct(r.report.overall.cm_strict),
        ]);
    }
    right_align(&mut table, 6, 8);
    Ok(table.to_string() + "\n")
}

fn p_value(p: f64) -> String {
    if p < 0.001 {
        "<0.001".to_owned()
    } else {
        format!("{p:.3}")
    }
}

/// Renders a comparison: CM-strict per run, and per later run the paired difference to the
/// first with its interval and p-values; then the disagreeing samples.
pub fn render_compare(
    reports: &[RunReport],
    comparison: &Comparison,
    format: OutputFormat,
    show: usize,
) -> Result<String> {
    if format == OutputFormat::Json {
        return Ok(serde_json::to_string_pretty(&comparison.to_json(reports))? + "\n");
    }
    let names: Vec<String> = reports
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                "{} {} [{}]",
                (b'A' + (i % 26) as u8) as char,
                r.record.system,
                r.record.run_id
            )
        })
        .collect();
    let mut out = String::new();
    for name in &names {
        out.push_str(name);
        out.push('\n');
    }
    let mut table = new_table(format);
    let mut header = vec!["stratum".to_owned(), "n".to_owned()];
    for i in 0..reports.len() {
        header.push(format!("CM {}", (b'A' + (i % 26) as u8) as char));
    }
    for i in 1..reports.len() {
        let l = (b'A' + (i % 26) as u8) as char;
        header.push(format!("{l}−A [95% CI]"));
        header.push(format!("p boot {l}"));
        header.push(format!("p McNemar {l}"));
    }
    table.set_header(header);
    for row in &comparison.rows {
        let is_detail = row.key.starts_with("difficult_") && row.key != "difficult_7_12";
        if (is_detail || row.key == "unclassified") && row.n == 0 {
            continue;
        }
        let mut cells = vec![row.key.clone(), row.n.to_string()];
        cells.extend(row.cm_strict.iter().map(|r| pct(*r)));
        for (paired, mcnemar) in row.paired.iter().zip(&row.mcnemar) {
            cells.push(paired.as_ref().map_or("-".into(), |p| {
                format!(
                    "{:+.1} [{:+.1}, {:+.1}]",
                    p.diff * 100.0,
                    p.ci.lo * 100.0,
                    p.ci.hi * 100.0
                )
            }));
            cells.push(paired.as_ref().map_or("-".into(), |p| p_value(p.p_value)));
            cells.push(mcnemar.as_ref().map_or("-".into(), |m| {
                format!("{} ({}/{})", p_value(m.p_value), m.only_a, m.only_b)
            }));
        }
        table.add_row(cells);
    }
    right_align(&mut table, 1, 2 + reports.len() + 3 * (reports.len() - 1));
    out.push_str(&table.to_string());
    out.push('\n');
    out.push_str(&format!(
        "\n{} samples where the runs disagree on CM-strict",
        comparison.disagreements.len()
    ));
    if comparison.disagreements.is_empty() {
        out.push('\n');
        return Ok(out);
    }
    out.push_str(&format!(
        " (first {}):\n",
        show.min(comparison.disagreements.len())
    ));
    for d in comparison.disagreements.iter().take(show) {
        let verdicts: Vec<String> = d
            .cm_strict
            .iter()
            .enumerate()
            .map(|(i, v)| {
                format!(
                    "{}{}",
                    (b'A' + (i % 26) as u8) as char,
                    if *v { "✓" } else { "✗" }
                )
            })
            .collect();
        out.push_str(&format!(
            "{}{}  {}  |Δ|={}  {}\n",
            if format == OutputFormat::Markdown {
                "- "
            } else {
                "  "
            },
            d.sample_id,
            d.stratum,
            d.change_count,
            verdicts.join(" ")
        ));
    }
    if format == OutputFormat::Table {
        out.push_str("McNemar (a/b): samples only A / only the other run got right\n");
    }
    Ok(out)
}
