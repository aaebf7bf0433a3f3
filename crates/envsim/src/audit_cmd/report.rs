//! The audit summary as text on the terminal and as Markdown (the HTML report is
//! `html`).

use envsim_core::audit::{AuditSummary, SpecSummary};

/// A number with four decimals.
fn f4(x: f64) -> String {
    format!("{x:.4}")
}

/// The drift's 95% interval as `[lo, hi]`, or a dash.
fn interval_text(spec: &SpecSummary) -> String {
    match spec.drift.interval {
        Some([lo, hi]) => format!("[{}, {}]", f4(lo), f4(hi)),
        None => "—".to_owned(),
    }
}

/// The summary as Markdown: headline numbers, violations by kind, answers read,
/// specification, bias.
pub fn markdown_summary(s: &AuditSummary) -> String {
    let mut out = format!(
        "# envsim audit\n\n| trajectories | steps | constraints checked | violations | mean SCS | min SCS | consistent trajectories |\n|---|---|---|---|---|---|---|\n| {} | {} | {} | {} | {} | {} | {} |\n\n## Violations by kind\n\n| kind | count |\n|---|---|\n",
        s.trajectories, s.steps, s.checked, s.violations,
        f4(s.scs.mean), f4(s.scs.min), s.scs.consistent_trajectories,
    );
    for (kind, n) in &s.by_kind {
        out.push_str(&format!("| {kind} | {n} |\n"));
    }
    if !s.answers.is_empty() {
        out.push_str("\n## Tool answers read\n\n| file | answers |\n|---|---|\n");
        for (file, t) in &s.answers {
            out.push_str(&format!("| {file} | {} |\n", t.describe()));
        }
    }
    let from_transcripts: Vec<_> = (s.environments.iter())
        .filter(|e| !e.writes_from_transcripts.is_empty())
        .collect();
    if !from_transcripts.is_empty() {
        out.push_str("\n## Writes taken from the transcripts\n\nThe learning walks saw these tools succeed nowhere; what most of the file's transcripts show them write is taken instead, weaker evidence than executed calls.\n\n| environment | tools |\n|---|---|\n");
        for e in from_transcripts {
            out.push_str(&format!(
                "| {} | {} |\n",
                e.env,
                e.writes_from_transcripts.join(", ")
            ));
        }
    }
    if let Some(spec) = &s.spec {
        out.push_str(&format!(
            "\n## Specification\n\n| steps | violating | SpecCS | drift slope | 95% interval |\n|---|---|---|---|---|\n| {} | {} | {} | {} | {} |\n",
            spec.steps, spec.violating_steps, f4(spec.spec_cs_mean), f4(spec.drift.slope),
            interval_text(spec),
        ));
    }
    if let Some(from) = &s.bias.expected_from {
        out.push_str(&format!("\n## Distribution bias\n\nExpected from {from}.\n\n| tool | steps | JSD | happy-path excess |\n|---|---|---|---|\n"));
        if let Some(report) = &s.bias.report {
            if let Some(o) = &report.overall {
                out.push_str(&format!(
                    "| **all** | {} | {} | {} |\n",
                    o.steps,
                    f4(o.jsd),
                    f4(o.happy_path_excess)
                ));
            }
            for (tool, b) in &report.tools {
                out.push_str(&format!(
                    "| {tool} | {} | {} | {} |\n",
                    b.steps,
                    f4(b.jsd),
                    f4(b.happy_path_excess)
                ));
            }
        }
    }
    out
}

/// The summary as lines on the terminal: counts, then bias.
pub fn print_summary(s: &AuditSummary) {
    print_counts(s);
    print_bias(s);
}

fn print_counts(s: &AuditSummary) {
    println!(
        "{} trajectories, {} steps: {} constraints checked, {} violated ({} relying on guessed effects)",
        s.trajectories, s.steps, s.checked, s.violations, s.violations_on_guessed_effects
    );
    for (file, t) in &s.answers {
        println!("{file}: {}", t.describe());
    }
    for e in s
        .environments
        .iter()
        .filter(|e| !e.writes_from_transcripts.is_empty())
    {
        println!(
            "{}: writes of {} taken from the file's transcripts (weaker than executed evidence)",
            e.env,
            e.writes_from_transcripts.join(", ")
        );
    }
    println!(
        "SCS: mean {:.4}, min {:.4}, 10th percentile {:.4}; {} of {} trajectories hold every checked constraint",
        s.scs.mean, s.scs.min, s.scs.p10, s.scs.consistent_trajectories, s.trajectories
    );
    for (kind, count) in &s.by_kind {
        println!("  {kind:<24} {count}");
    }
    if let Some(spec) = &s.spec {
        let interval = match spec.drift.interval {
            Some([lo, hi]) => format!(" (95% interval {lo:.4} to {hi:.4})"),
            None => String::new(),
        };
        println!(
            "specification: {} of {} calls break their tool's schema; SpecCS {:.4}; drift {:+.4} violations per step index{interval}",
            spec.violating_steps, spec.steps, spec.spec_cs_mean, spec.drift.slope,
        );
    }
}

/// The distribution-bias lines: overall, then the tools that diverge most.
fn print_bias(s: &AuditSummary) {
    let bias = &s.bias;
    let Some(from) = &bias.expected_from else {
        return;
    };
    if let Some(report) = &bias.report {
        if let Some(overall) = &report.overall {
            println!(
                "distribution bias (expected from {from}): JSD {:.4}, happy-path excess {:+.4} over {} steps",
                overall.jsd, overall.happy_path_excess, overall.steps
            );
        }
        let mut worst: Vec<(&String, f64, f64)> = (report.tools.iter())
            .map(|(t, b)| (t, b.jsd, b.happy_path_excess))
            .filter(|(_, jsd, _)| *jsd > 0.0)
            .collect();
        worst.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (tool, jsd, excess) in worst.iter().take(5) {
            println!("  {tool:<24} JSD {jsd:.4}, happy-path excess {excess:+.4}");
        }
    }
    if !s.coverage.is_empty() {
        let parts: Vec<String> = (s.coverage.iter())
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        println!("transitions exercised: {}", parts.join(", "));
    }
}
