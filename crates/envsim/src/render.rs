//! Rendering reports as a terminal table, Markdown, or the documented JSON schema.

use anyhow::Result;
use clap::ValueEnum;
use comfy_table::presets::{ASCII_MARKDOWN, UTF8_FULL_CONDENSED};
use comfy_table::{CellAlignment, Table};
use envsim_core::report::{Report, Summary};

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Aligned table for the terminal.
    Table,
    /// Markdown table.
    Markdown,
    /// JSON (schema `envsim.score.v2`; an array of reports when several systems are scored).
    Json,
}

/// Renders one or several reports.
pub fn render(reports: &[Report], format: OutputFormat) -> Result<String> {
    match format {
        OutputFormat::Json => {
            let value = match reports {
                [one] => one.to_json(),
                many => serde_json::Value::Array(many.iter().map(Report::to_json).collect()),
            };
            Ok(serde_json::to_string_pretty(&value)? + "\n")
        }
        OutputFormat::Table | OutputFormat::Markdown => Ok(table(reports, format) + "\n"),
    }
}

fn pct(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".to_owned(), |r| format!("{:.1}", r * 100.0))
}

/// What the reference evaluator itself would print, when its denominator differs from
/// envsim's: it drops the samples it crashes on (and never sees missing predictions).
pub fn reference_note(system: &str, overall: &Summary) -> Option<String> {
    if overall.reference_n == overall.n {
        return None;
    }
    let missing = overall.n - overall.reference_n - overall.reference_dropped;
    let mut why = Vec::new();
    if overall.reference_dropped > 0 {
        why.push(format!(
            "drops {} sample{} it crashes on (tagged reference_crash; wrong here)",
            overall.reference_dropped,
            if overall.reference_dropped == 1 {
                ""
            } else {
                "s"
            }
        ));
    }
    if missing > 0 {
        why.push(format!("never saw {missing} without a prediction"));
    }
    Some(format!(
        "{system}: the reference evaluator {} and would print FM-ref {}%, CM-ref {}% over {} samples",
        why.join(" and "),
        pct(overall.fm_ref_printed),
        pct(overall.cm_ref_printed),
        overall.reference_n
    ))
}

/// The legend under every table: which column belongs to which lane.
pub const LEGEND: &str = "rates in %; FM-ref/CM-ref: the reference evaluator's own scores from the raw text, flaws included; FM-strict/CM-strict: envsim's strict lane (exact values, clean delta); field F1: leaf facts";

/// Rows of a report table in display order: `(key, label, summary)` for the strata (the
/// per-|Δ| difficult rows and `unclassified` only when populated), the groups and `overall`.
pub fn display_rows(report: &Report) -> Vec<(String, String, &Summary)> {
    let mut out = Vec::new();
    for (key, summary) in &report.strata {
        let is_detail = key.starts_with("difficult_") && *key != "difficult_7_12";
        if (is_detail || *key == "unclassified") && summary.n == 0 {
            continue;
        }
        let label = if is_detail {
            format!("  |Δ|={}", key.trim_start_matches("difficult_"))
        } else {
            (*key).to_owned()
        };
        out.push(((*key).to_owned(), label, summary));
    }
    for (group, summary) in &report.groups {
        out.push((
            group.key().to_owned(),
            format!("[{}]", group.key()),
            summary,
        ));
    }
    out.push((
        "overall".to_owned(),
        "[overall]".to_owned(),
        &report.overall,
    ));
    out
}

/// Rows of the table: (label, summary).
fn rows(report: &Report) -> Vec<(String, &Summary)> {
    display_rows(report)
        .into_iter()
        .map(|(_, label, summary)| (label, summary))
        .collect()
}

fn table(reports: &[Report], format: OutputFormat) -> String {
    let mut table = Table::new();
    table.load_preset(if format == OutputFormat::Markdown {
        ASCII_MARKDOWN
    } else {
        UTF8_FULL_CONDENSED
    });
    table.set_header([
        "stratum",
        "n",
        "system",
        "FM-ref",
        "CM-ref",
        "FM-strict",
        "CM-strict",
        "field F1",
        "parse fail",
    ]);
    let per_report: Vec<Vec<(String, &Summary)>> = reports.iter().map(rows).collect();
    let row_count = per_report.first().map_or(0, Vec::len);
    for row in 0..row_count {
        for (i, (report, report_rows)) in reports.iter().zip(&per_report).enumerate() {
            let (label, summary) = &report_rows[row];
            let first = i == 0;
            table.add_row([
                if first { label.clone() } else { String::new() },
                if first {
                    summary.n.to_string()
                } else {
                    String::new()
                },
                report.system.clone(),
                pct(summary.fm_ref),
                pct(summary.cm_ref),
                pct(summary.fm_strict),
                pct(summary.cm_strict),
                pct(summary.field_f1),
                pct(summary.parse_failure_rate),
            ]);
        }
    }
    for column in 1..9 {
        if column != 2 {
            if let Some(c) = table.column_mut(column) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    let mut out = table.to_string();
    for report in reports {
        if let Some(note) = reference_note(&report.system, &report.overall) {
            out.push('\n');
            out.push_str(&note);
        }
    }
    if format == OutputFormat::Table {
        out.push('\n');
        out.push_str(LEGEND);
    }
    out
}
