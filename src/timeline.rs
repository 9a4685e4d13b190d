//! A run's timeline, for finding where a merge's wall time goes on a machine at hand: with
//! `DEEPMERGE_TIMELINE=1` set, the stages that matter to the wall time (the GL context and its
//! shaders, buffers made, each band's decoding, staging, GPU work, readback and encoding) record
//! when they ran and on which thread, and the CLI prints them in start order when the command
//! ends. `--runstats` sums each stage over the run; this shows what overlapped and what waited
//! (a start-up that runs before the first band, a band decoded while the GPU sat idle).
//!
//! Off (the default), a span costs one load of a flag: the label is never formatted.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// One span: on which thread, what, when (seconds from the timeline's origin), and what its
/// thread spent meanwhile.
struct Span {
    thread: String,
    label: String,
    start: f64,
    end: f64,
    /// CPU seconds the thread ran and minor page faults it took during the span (`None` where
    /// the system does not count them per thread).
    used: Option<ThreadUse>,
}

/// A thread's CPU time (its CPU clock) and minor page faults (`getrusage(RUSAGE_THREAD)`) so
/// far, on Linux: a span much longer than its thread's CPU time waited (for a lock, the
/// scheduler, the disk), one as long ran all the while; faults count fresh pages the kernel
/// handed it.
#[derive(Clone, Copy)]
struct ThreadUse {
    cpu_s: f64,
    faults: u64,
}

impl ThreadUse {
    #[cfg(target_os = "linux")]
    fn now() -> Option<ThreadUse> {
        // SAFETY: both calls write only the structs they are given, about this thread. The
        // CPU time comes from the thread's CPU clock (the scheduler's nanoseconds), not from
        // getrusage's times, which may advance a whole tick at a time.
        let (usage, cpu) = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            let mut cpu: libc::timespec = std::mem::zeroed();
            let ok = libc::getrusage(libc::RUSAGE_THREAD, &mut usage) == 0
                && libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut cpu) == 0;
            ok.then_some((usage, cpu))
        }?;
        Some(ThreadUse {
            cpu_s: cpu.tv_sec as f64 + cpu.tv_nsec as f64 * 1e-9,
            faults: usage.ru_minflt as u64,
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn now() -> Option<ThreadUse> {
        None
    }

    /// What was used from `self` to `later` (on the same thread).
    fn until(self, later: ThreadUse) -> ThreadUse {
        ThreadUse {
            cpu_s: (later.cpu_s - self.cpu_s).max(0.0),
            faults: later.faults.saturating_sub(self.faults),
        }
    }
}

/// The spans recorded so far and the instant they count from.
struct Timeline {
    origin: Instant,
    spans: Mutex<Vec<Span>>,
}

static TIMELINE: OnceLock<Option<Timeline>> = OnceLock::new();

thread_local! {
    /// The role of this thread in the timeline (`reader`, `writer`), where one was given.
    static ROLE: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Whether `DEEPMERGE_TIMELINE` asks for a timeline: set, not empty and not `0`.
fn asked() -> bool {
    std::env::var("DEEPMERGE_TIMELINE").is_ok_and(|v| !v.trim().is_empty() && v.trim() != "0")
}

fn timeline() -> Option<&'static Timeline> {
    TIMELINE
        .get_or_init(|| {
            asked().then(|| Timeline {
                origin: Instant::now(),
                spans: Mutex::new(Vec::new()),
            })
        })
        .as_ref()
}

/// Start the timeline's clock now, when it is asked for (the CLI calls this first thing, so
/// that times count from the process's start).
pub fn start() {
    let _ = timeline();
}

/// Name this thread's role in the timeline (the streamed pipeline's `reader` and `writer`);
/// other threads show as `main` or their thread name or id.
pub fn name_thread(role: &'static str) {
    ROLE.with(|r| r.set(Some(role)));
}

fn thread_label() -> String {
    if let Some(role) = ROLE.with(Cell::get) {
        return role.to_string();
    }
    let thread = std::thread::current();
    match thread.name() {
        Some(name) => name.to_string(),
        None => format!("{:?}", thread.id()),
    }
}

/// A span being timed: recorded when dropped, on the thread that opened it (not `Send`: its
/// thread's CPU time is read at both ends).
#[must_use = "a span is timed until it is dropped"]
pub struct SpanGuard {
    open: Option<(String, Instant, Option<ThreadUse>)>,
    _this_thread: std::marker::PhantomData<*const ()>,
}

impl Drop for SpanGuard {
    fn drop(&mut self) {
        let (Some((label, started, used)), Some(timeline)) = (self.open.take(), timeline()) else {
            return;
        };
        let span = Span {
            thread: thread_label(),
            label,
            start: started.duration_since(timeline.origin).as_secs_f64(),
            end: timeline.origin.elapsed().as_secs_f64(),
            used: used.zip(ThreadUse::now()).map(|(a, b)| a.until(b)),
        };
        timeline.spans.lock().expect("timeline lock").push(span);
    }
}

/// Time what runs until the returned guard is dropped, as `label()` (called only when a
/// timeline is recorded).
pub fn span(label: impl FnOnce() -> String) -> SpanGuard {
    SpanGuard {
        open: timeline().map(|_| (label(), Instant::now(), ThreadUse::now())),
        _this_thread: std::marker::PhantomData,
    }
}

/// The spans recorded so far, in start order, one a line: start and length in milliseconds,
/// the milliseconds its thread ran on a CPU meanwhile and the minor page faults it took (`-`
/// where not counted), the thread, the label; then each thread's busy time (the union of its
/// spans) against the wall time so far. `None` when no timeline is recorded.
pub fn report() -> Option<String> {
    let timeline = timeline()?;
    let mut spans = std::mem::take(&mut *timeline.spans.lock().expect("timeline lock"));
    spans.sort_by(|a, b| a.start.total_cmp(&b.start));
    let wall = timeline.origin.elapsed().as_secs_f64();
    let mut text = String::from("timeline (ms from the start; DEEPMERGE_TIMELINE)\n");
    let _ = writeln!(
        text,
        "  {:>9} {:>9} {:>9} {:>7}  {:<8} what",
        "start", "took", "on cpu", "faults", "thread"
    );
    for s in &spans {
        let (cpu, faults) = match s.used {
            Some(u) => (format!("{:.1}", u.cpu_s * 1e3), u.faults.to_string()),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(
            text,
            "  {:>9.1} {:>9.1} {cpu:>9} {faults:>7}  {:<8} {}",
            s.start * 1e3,
            (s.end - s.start) * 1e3,
            s.thread,
            s.label
        );
    }
    let mut threads: Vec<&str> = spans.iter().map(|s| s.thread.as_str()).collect();
    threads.sort_unstable();
    threads.dedup();
    for thread in threads {
        let busy = busy_seconds(spans.iter().filter(|s| s.thread == thread));
        let _ = writeln!(
            text,
            "  {thread}: busy {:.1} ms of {:.1} ms",
            busy * 1e3,
            wall * 1e3
        );
    }
    Some(text)
}

/// The time covered by `spans` (one thread's, nested or not), counting overlaps once.
fn busy_seconds<'s>(spans: impl Iterator<Item = &'s Span>) -> f64 {
    let mut intervals: Vec<(f64, f64)> = spans.map(|s| (s.start, s.end)).collect();
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut busy = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (start, end) in intervals {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                busy += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    busy + current.map_or(0.0, |(s, e)| e - s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span_at(start: f64, end: f64) -> Span {
        Span {
            thread: "main".into(),
            label: String::new(),
            start,
            end,
            used: None,
        }
    }

    /// A thread's CPU time grows while it computes and not while it sleeps, and touching
    /// fresh pages counts their faults.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_threads_use_counts_its_running_not_its_sleeping_and_its_fresh_pages() {
        let start = ThreadUse::now().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(40));
        let slept = start.until(ThreadUse::now().unwrap());
        assert!(slept.cpu_s < 0.02, "{} s on a CPU asleep", slept.cpu_s);
        let start = ThreadUse::now().unwrap();
        let begun = Instant::now();
        let mut x = 1u64;
        while begun.elapsed().as_secs_f64() < 0.04 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let ran = start.until(ThreadUse::now().unwrap());
        // Most of the 40 ms, unless the machine took the CPU away for a while.
        assert!(ran.cpu_s > 0.01, "{} s on a CPU computing", ran.cpu_s);
        let start = ThreadUse::now().unwrap();
        let mut fresh = vec![0u8; 16 << 20];
        for page in fresh.chunks_mut(4096) {
            page[0] = 1;
        }
        std::hint::black_box(&fresh);
        let touched = start.until(ThreadUse::now().unwrap());
        // 4,096 pages, or 8 where the kernel hands out 2 MiB pages to any mapping.
        assert!(touched.faults >= 8, "{} faults", touched.faults);
    }

    /// Nested and overlapping spans count once; a gap does not count.
    #[test]
    fn busy_time_is_the_union_of_the_spans() {
        let spans = [
            span_at(0.0, 1.0),
            span_at(0.2, 0.5),
            span_at(0.8, 1.5),
            span_at(3.0, 3.25),
        ];
        assert!((busy_seconds(spans.iter()) - 1.75).abs() < 1e-12);
        assert_eq!(busy_seconds([].iter()), 0.0);
    }
}
