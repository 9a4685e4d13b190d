//! Progress reporting and run statistics for the CLI, in the forms job runners parse.
//!
//! - [`Progress`]: a bar on a terminal (indicatif, on stderr), `openjd_progress: N` lines
//!   (Open Job Description's runtime reads them from stdout), `Progress: N%` lines (the pattern
//!   Deadline's command-line plugins match), or nothing. Percent lines are printed when the
//!   whole percent changes, always start at 0 and end at 100 on success, and are flushed at
//!   once so a runner sees them while the run goes on. Safe to share between frame threads.
//! - [`RunStats`]: time spent in each stage (read, merge, write; summed over frames when frames
//!   run in parallel) and the wall time, and the peak resident memory (`VmHWM` from
//!   `/proc/self/status`), printed like oiiotool's `--runstats`.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
        progress.report(0);
        progress
    }

    /// One more step done.
    pub fn step(&self) {
        let done = {
            let mut state = self.state.lock().expect("progress lock");
            state.0 += 1;
            state.0
        };
        self.report(done);
    }

    /// All steps done (also when some were skipped): the bar finishes, lines end at 100.
    pub fn finish(&self) {
        self.report(self.total);
        if let Kind::Bar(bar) = &self.kind {
            bar.finish_and_clear();
        }
    }

    fn report(&self, done: u64) {
        match &self.kind {
            Kind::Bar(bar) => bar.set_position(done),
            Kind::Lines(before, after) => {
                let percent = done.min(self.total) * 100 / self.total;
                let mut state = self.state.lock().expect("progress lock");
                if state.1.is_some_and(|last| last >= percent) {
                    return;
                }
                state.1 = Some(percent);
                // Under the lock, so lines from frame threads come out in order.
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

/// A stage of a merge, for [`RunStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Reading and decoding the inputs.
    Read,
    /// The merge itself (either engine).
    Merge,
    /// Encoding and writing the output.
    Write,
}

/// Time per stage and peak memory of a run.
pub struct RunStats {
    start: Instant,
    stages: Mutex<[Duration; 3]>,
}

impl Default for RunStats {
    fn default() -> Self {
        RunStats::new()
    }
}

impl RunStats {
    /// Start counting now.
    pub fn new() -> RunStats {
        RunStats {
            start: Instant::now(),
            stages: Mutex::new([Duration::ZERO; 3]),
        }
    }

    /// Run `f` as (part of) `stage`, adding its time to the stage's.
    pub fn time<T>(&self, stage: Stage, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.stages.lock().expect("stats lock")[stage as usize] += t.elapsed();
        out
    }

    /// The report, one stage a line, like oiiotool's `--runstats`.
    pub fn report(&self, frames: usize) -> String {
        let stages = *self.stages.lock().expect("stats lock");
        let mut s = String::from("deepmerge runtime statistics\n");
        let summed = if frames > 1 {
            format!(" (summed over {frames} frames)")
        } else {
            String::new()
        };
        for (name, d) in ["read", "merge", "write"].iter().zip(stages) {
            s += &format!("  {name:<12}{:>10.3} s{summed}\n", d.as_secs_f64());
        }
        s += &format!(
            "  {:<12}{:>10.3} s\n",
            "total (wall)",
            self.start.elapsed().as_secs_f64()
        );
        match peak_memory_bytes() {
            Some(b) => {
                s += &format!(
                    "  {:<12}{:>10.1} MiB\n",
                    "peak memory",
                    b as f64 / 1048576.0
                )
            }
            None => s += "  peak memory  unknown (no /proc/self/status)\n",
        }
        s
    }
}

/// The process's peak resident set (`VmHWM`), where Linux reports it.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_times_add_up_and_peak_memory_is_read() {
        let stats = RunStats::new();
        stats.time(Stage::Merge, || {
            std::thread::sleep(Duration::from_millis(20))
        });
        stats.time(Stage::Merge, || {
            std::thread::sleep(Duration::from_millis(20))
        });
        let merged = stats.stages.lock().unwrap()[Stage::Merge as usize];
        assert!(merged >= Duration::from_millis(40), "{merged:?}");
        assert_eq!(
            stats.stages.lock().unwrap()[Stage::Read as usize],
            Duration::ZERO
        );
        let report = stats.report(1);
        assert!(report.contains("merge") && report.contains("peak memory"));
        #[cfg(target_os = "linux")]
        assert!(peak_memory_bytes().is_some_and(|b| b > 1 << 20));
    }
}
