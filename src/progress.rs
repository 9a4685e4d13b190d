//! Progress reporting for the CLI, in the forms job runners parse.
//!
//! - [`Progress`]: a bar on a terminal (indicatif, on stderr), `openjd_progress: N` lines
//!   (Open Job Description's runtime reads them from stdout), `Progress: N%` lines (the pattern
//!   Deadline's command-line plugins match), or nothing. Percent lines are printed when the
//!   whole percent changes, always start at 0 and end at 100 on success, and are flushed at
//!   once so a runner sees them while the run goes on. Safe to share between frame threads.
//!
//! The run statistics `--runstats` prints are the library's ([`crate::run_stats`]): the
//! streamed merge fills them whatever front end runs it.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar on stderr when it is a terminal, else nothing.
    Auto,
    /// A bar on stderr.
    Bar,
    /// `openjd_progress: N` lines on stdout.
    OpenJd,
    /// `Progress: N%` lines on stdout.
    Plain,
    /// Nothing.
    None,
}

/// A progress reporter over `total` steps (stages of one merge, or frames of a sequence).
pub struct Progress {
    kind: Kind,
    total: u64,
    state: Mutex<(u64, Option<u64>)>,
}

enum Kind {
    Bar(indicatif::ProgressBar),
    Lines(&'static str, &'static str),
    Silent,
}

impl Progress {
    /// A reporter of `total` steps; `what` names them on the bar ("stages", "frames").
    pub fn new(mode: ProgressMode, total: u64, what: &str) -> Progress {
        let mode = match mode {
            ProgressMode::Auto if std::io::stderr().is_terminal() => ProgressMode::Bar,
            ProgressMode::Auto => ProgressMode::None,
            m => m,
        };
        let kind = match mode {
            ProgressMode::Bar => {
                let bar = indicatif::ProgressBar::new(total);
                let style = indicatif::ProgressStyle::with_template(&format!(
                    "{{bar:40}} {{pos}}/{{len}} {what} {{elapsed_precise}} (eta {{eta}})"
                ))
                .expect("a valid template");
                bar.set_style(style);
                Kind::Bar(bar)
            }
            ProgressMode::OpenJd => Kind::Lines("openjd_progress: ", ""),
            ProgressMode::Plain => Kind::Lines("Progress: ", "%"),
            ProgressMode::None | ProgressMode::Auto => Kind::Silent,
        };
        let progress = Progress {
            kind,
            total: total.max(1),
            state: Mutex::new((0, None)),
        };
        progress.report(&mut progress.state.lock().expect("progress lock"), 0);
        progress
    }

    /// One more step done.
    pub fn step(&self) {
        // The count and its line under one lock: counted here and printed after another
        // thread's later count, a step's line would be dropped as not past the last one.
        let mut state = self.state.lock().expect("progress lock");
        state.0 += 1;
        let done = state.0;
        self.report(&mut state, done);
    }

    /// All steps done (also when some were skipped): the bar finishes, lines end at 100.
    pub fn finish(&self) {
        self.report(&mut self.state.lock().expect("progress lock"), self.total);
        if let Kind::Bar(bar) = &self.kind {
            bar.finish_and_clear();
        }
    }

    /// Show `done` steps; `state` is held locked, so lines from frame threads come out in order.
    fn report(&self, state: &mut (u64, Option<u64>), done: u64) {
        match &self.kind {
            Kind::Bar(bar) => bar.set_position(done),
            Kind::Lines(before, after) => {
                let percent = done.min(self.total) * 100 / self.total;
                if state.1.is_some_and(|last| last >= percent) {
                    return;
                }
                state.1 = Some(percent);
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{before}{percent}{after}");
                let _ = out.flush();
            }
            Kind::Silent => {}
        }
    }

    /// Print a line on stderr without breaking the bar.
    pub fn note(&self, line: &str) {
        match &self.kind {
            Kind::Bar(bar) => bar.suspend(|| eprintln!("{line}")),
            _ => eprintln!("{line}"),
        }
    }
}
