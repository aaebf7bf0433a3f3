//! Progress of `envsim eval` on stderr, drawn from the runner's events: a bar on a terminal,
//! a line every 10 seconds otherwise, and one summary line at the end.

use envsim_eval::runner::RunEvent;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Renders [`RunEvent`]s.
pub struct Progress {
    enabled: bool,
    bar: Option<ProgressBar>,
    lines: bool,
    started: Instant,
    last_line: Instant,
    last: Option<RunEvent>,
}

fn message(handled: usize, correct: usize, failed: usize, parse_failures: usize) -> String {
    let share = if handled == 0 {
        0.0
    } else {
        correct as f64 * 100.0 / handled as f64
    };
    format!("CM-strict {share:.1}% · failed requests {failed} · parse failures {parse_failures}")
}

impl Progress {
    /// A renderer; `enabled` false shows nothing.
    pub fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            bar: None,
            lines: false,
            started: Instant::now(),
            last_line: Instant::now(),
            last: None,
        }
    }

    /// Shows one event.
    pub fn show(&mut self, event: &RunEvent) {
        if !self.enabled {
            return;
        }
        match event {
            RunEvent::Started { todo, .. } => {
                self.started = Instant::now();
                if std::io::stderr().is_terminal() {
                    let bar = ProgressBar::with_draw_target(
                        Some(*todo as u64),
                        ProgressDrawTarget::stderr(),
                    );
                    bar.set_style(
                        ProgressStyle::with_template(
                            "{bar:30} {pos}/{len} samples · {per_sec} · ETA {eta} · {msg}",
                        )
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                    self.bar = Some(bar);
                } else {
                    self.lines = true;
                }
            }
            RunEvent::Progress {
                handled,
                todo,
                correct,
                failed,
                parse_failures,
            } => {
                let text = message(*handled, *correct, *failed, *parse_failures);
                if let Some(bar) = &self.bar {
                    bar.set_position(*handled as u64);
                    bar.set_message(text);
                } else if self.lines && self.last_line.elapsed() >= Duration::from_secs(10) {
                    self.last_line = Instant::now();
                    eprintln!(
                        "eval: {handled}/{todo} samples, {:.0} s, {text}",
                        self.started.elapsed().as_secs_f64()
                    );
                }
            }
            RunEvent::Stopping { reason } => {
                if let Some(bar) = &self.bar {
                    bar.suspend(|| eprintln!("eval: stopping: {reason}"));
                } else {
                    eprintln!("eval: stopping: {reason}");
                }
            }
        }
        if matches!(event, RunEvent::Progress { .. } | RunEvent::Started { .. }) {
            self.last = Some(event.clone());
        }
    }

    /// Clears the bar and prints the summary line.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if !self.enabled {
            return;
        }
        let seconds = self.started.elapsed().as_secs_f64();
        match &self.last {
            Some(RunEvent::Progress {
                handled,
                todo,
                correct,
                failed,
                parse_failures,
            }) => eprintln!(
                "eval: {handled}/{todo} samples in {seconds:.1} s, {}",
                message(*handled, *correct, *failed, *parse_failures)
            ),
            Some(RunEvent::Started { todo: 0, .. }) | None => {}
            Some(_) => eprintln!("eval: no sample finished ({seconds:.1} s)"),
        }
    }
}
