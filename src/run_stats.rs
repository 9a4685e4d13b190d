//! Run statistics: time spent in each stage of a merge (read, merge, write; summed over
//! frames when frames run in parallel), the wall time, the CPU time the process used beside it
//! (how busy the threads were: a merge that keeps every thread busy can only go faster by doing
//! less work; one that leaves them idle waits on something serial), and the peak resident
//! memory (`VmHWM` from `/proc/self/status`), printed like oiiotool's `--runstats`. The streamed
//! pipeline fills them; the CLI and the Python module print or return them.

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
    /// The process's CPU use when counting began.
    cpu_start: Option<CpuUse>,
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
            cpu_start: CpuUse::now(),
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
        let wall = self.start.elapsed();
        s += &format!("  {:<12}{:>10.3} s\n", "total (wall)", wall.as_secs_f64());
        if let (Some(start), Some(now)) = (self.cpu_start, CpuUse::now()) {
            let used = now.since(start);
            s += &format!(
                "  {:<12}{:>10.3} s ({:.3} user + {:.3} system): {}; {} page faults\n",
                "cpu time",
                used.seconds(),
                used.user.as_secs_f64(),
                used.system.as_secs_f64(),
                used.busy_note(wall),
                used.page_faults
            );
        }
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

/// CPU time a process used, on all its threads, and the page faults it took (`getrusage`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuUse {
    /// Time running the program's own code.
    pub user: Duration,
    /// Time in the kernel on its behalf (reads, writes, page faults).
    pub system: Duration,
    /// Page faults served without I/O: mostly fresh memory touched for the first time.
    pub page_faults: u64,
}

impl CpuUse {
    /// The process's use so far; `None` where `getrusage` fails.
    pub fn now() -> Option<CpuUse> {
        // SAFETY: getrusage fills the struct it is given, which is plain data.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
            return None;
        }
        let time = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        Some(CpuUse {
            user: time(usage.ru_utime),
            system: time(usage.ru_stime),
            page_faults: usage.ru_minflt.max(0) as u64,
        })
    }

    /// What was used between `earlier` and this.
    pub fn since(self, earlier: CpuUse) -> CpuUse {
        CpuUse {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            page_faults: self.page_faults.saturating_sub(earlier.page_faults),
        }
    }

    /// User and system seconds together.
    pub fn seconds(&self) -> f64 {
        (self.user + self.system).as_secs_f64()
    }

    /// The share of `threads` threads busy over `wall` (CPU time / (threads x wall)): issue
    /// 25's parallel efficiency. Every thread of the process counts, the pool's and the others
    /// (the reader, the writer, a GL driver's own: llvmpipe's rasteriser threads, or a GPU
    /// driver spinning while it waits), so on the GL engine it says how busy the host was, not
    /// how much of that was merging; it may pass 1.
    pub fn busy_share(&self, wall: Duration, threads: usize) -> f64 {
        self.seconds() / (threads.max(1) as f64 * wall.as_secs_f64()).max(1e-9)
    }

    /// "91% of 2 threads busy": [`Self::busy_share`] of the worker threads a merge runs on (the
    /// cores the process may use, or `RAYON_NUM_THREADS`).
    pub fn busy_note(&self, wall: Duration) -> String {
        let threads = rayon::current_num_threads();
        format!(
            "{:.0}% of {} busy",
            100.0 * self.busy_share(wall, threads),
            counted(threads, "thread")
        )
    }
}

/// `n` things, singular for one ("1 thread", "16 threads", "2 inputs").
pub fn counted(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
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

    #[test]
    fn cpu_time_counts_a_spinning_thread() {
        let start = CpuUse::now().expect("getrusage");
        // Spin on this thread until the process has used 40 ms more CPU time (other tests'
        // threads count too, so only a bound holds), or give up after 10 s of wall time.
        let spin = Instant::now();
        let mut x = 1u64;
        let mut used = CpuUse::default();
        while used.seconds() < 0.04 && spin.elapsed() < Duration::from_secs(10) {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            used = CpuUse::now().expect("getrusage").since(start);
        }
        assert!(used.seconds() >= 0.04, "spinning used {used:?}");
        // Readings never go back.
        let later = CpuUse::now().expect("getrusage");
        assert!(later.seconds() >= start.seconds() && later.page_faults >= start.page_faults);
        // The busy share: CPU time over threads x wall.
        let made_up = CpuUse {
            user: Duration::from_millis(1500),
            system: Duration::from_millis(300),
            page_faults: 7,
        };
        assert!((made_up.busy_share(Duration::from_secs(1), 2) - 0.9).abs() < 1e-9);
        assert!((made_up.busy_share(Duration::from_millis(500), 4) - 0.9).abs() < 1e-9);
        let report = RunStats::new().report(1);
        assert!(
            report.contains("cpu time") && report.contains(" busy; "),
            "{report}"
        );
        assert_eq!(counted(1, "thread"), "1 thread");
        assert_eq!(counted(16, "thread"), "16 threads");
    }
}
