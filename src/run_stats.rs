//! Run statistics: time spent in each stage of a merge (read, merge, write; summed over
//! frames when frames run in parallel), the wall time, and the peak resident memory (`VmHWM`
//! from `/proc/self/status`), printed like oiiotool's `--runstats`. The streamed pipeline fills
//! them; the CLI and the Python module print or return them.

use std::sync::Mutex;
use std::time::{Duration, Instant};

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

/// What the merging thread of a streamed run waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// The reader's next decoded band.
    Input,
    /// The writer taking the band just merged.
    Writer,
}

/// Time per stage, the merging thread's waits, the bands, and peak memory of a run.
pub struct RunStats {
    start: Instant,
    stages: Mutex<[Duration; 3]>,
    waits: Mutex<[Duration; 2]>,
    /// Bands merged (summed over frames and parts) and the most rows one held.
    bands: Mutex<(usize, usize)>,
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
            waits: Mutex::new([Duration::ZERO; 2]),
            bands: Mutex::new((0, 0)),
        }
    }

    /// Count a streamed merge's plan: `bands` bands, the tallest `max_rows` rows (how the
    /// budget and the threads cut the window: `stream::plan::band_cap`).
    pub fn note_bands(&self, bands: usize, max_rows: usize) {
        let mut noted = self.bands.lock().expect("stats lock");
        noted.0 += bands;
        noted.1 = noted.1.max(max_rows);
    }

    /// Run `f` as (part of) `stage`, adding its time to the stage's.
    pub fn time<T>(&self, stage: Stage, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.stages.lock().expect("stats lock")[stage as usize] += t.elapsed();
        out
    }

    /// Add `d` to the merging thread's time waiting for `what`.
    pub fn waited(&self, what: Wait, d: Duration) {
        self.waits.lock().expect("stats lock")[what as usize] += d;
    }

    /// Seconds the merging thread has waited for `what` so far.
    pub fn wait_seconds(&self, what: Wait) -> f64 {
        self.waits.lock().expect("stats lock")[what as usize].as_secs_f64()
    }

    /// Seconds spent in `stage` so far.
    pub fn seconds(&self, stage: Stage) -> f64 {
        self.stages.lock().expect("stats lock")[stage as usize].as_secs_f64()
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
        let waits = *self.waits.lock().expect("stats lock");
        if waits.iter().any(|w| !w.is_zero()) {
            // Where the stages do not overlap: the merge idle, waiting on a neighbour.
            s += &format!(
                "  {:<12}{:>10.3} s for decoded bands, {:.3} s for the writer{summed}\n",
                "merge waited",
                waits[Wait::Input as usize].as_secs_f64(),
                waits[Wait::Writer as usize].as_secs_f64()
            );
        }
        let (bands, max_rows) = *self.bands.lock().expect("stats lock");
        if bands > 0 {
            s += &format!(
                "  {:<12}{bands:>10} (at most {max_rows} rows){summed}\n",
                "bands"
            );
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
