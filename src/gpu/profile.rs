//! GPU time per stage, measured on the GPU with timer queries (`glQueryCounter(GL_TIMESTAMP)`
//! pairs around each dispatch, upload and readback), not with host clocks around `glFinish`.
//!
//! Why timestamps rather than `GL_TIME_ELAPSED`: llvmpipe answers 0 for elapsed-time queries but
//! gives real timestamps, so one method works on llvmpipe and on hardware. The queries are only
//! issued while profiling is switched on ([`GlContext::profile_stages`]) and are read back in
//! [`GlContext::take_profile`], after the work, so a profiled merge has no extra host
//! synchronisation inside it.
//!
//! Each stage also carries the bytes it must at least read and write (the buffers it walks), so
//! a report can give GB/s and the distance to the device's copy bandwidth, stage by stage.

use std::fmt;

use glow::HasContext;

use super::program::Defines;
use super::GlContext;
use crate::error::{Error, Result};

/// The stages a GL merge (and the viewer) runs, in pipeline order.
pub const STAGES: [&str; 11] = [
    "upload", "fill", "count", "scan", "build", "sort", "merge", "tidy", "readback", "slice",
    "copy",
];

/// One stage's totals over the profiled work.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StageTime {
    /// Stage name (one of [`STAGES`], or "other").
    pub stage: &'static str,
    /// Timed calls (dispatches or transfers).
    pub calls: u32,
    /// Seconds on the GPU, summed over the calls.
    pub gpu_s: f64,
    /// Bytes the calls read and wrote at least (0 where unknown).
    pub bytes: u64,
}

impl StageTime {
    /// Bytes per second, when both the bytes and the time are known.
    pub fn bandwidth(&self) -> Option<f64> {
        (self.bytes > 0 && self.gpu_s > 0.0).then(|| self.bytes as f64 / self.gpu_s)
    }
}

/// Per-stage GPU times of the work done since profiling was switched on or last taken.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuProfile {
    /// Stages in [`STAGES`] order, only those that ran.
    pub stages: Vec<StageTime>,
    /// The device's copy bandwidth in bytes per second (bytes read + written), when measured in
    /// the same process ([`crate::gpu::copy_bandwidth`]): each stage's ratio to it is printed.
    pub copy_bandwidth: Option<f64>,
}

impl GpuProfile {
    /// Seconds on the GPU over all stages.
    pub fn total_s(&self) -> f64 {
        self.stages.iter().map(|s| s.gpu_s).sum()
    }

    /// The stage named `stage`, if it ran.
    pub fn stage(&self, stage: &str) -> Option<&StageTime> {
        self.stages.iter().find(|s| s.stage == stage)
    }

    /// Fold another profile in (bands of one merge).
    pub fn add(&mut self, other: &GpuProfile) {
        for s in &other.stages {
            self.record(s.stage, s.calls, s.gpu_s, s.bytes);
        }
        if self.copy_bandwidth.is_none() {
            self.copy_bandwidth = other.copy_bandwidth;
        }
    }

    fn record(&mut self, stage: &'static str, calls: u32, gpu_s: f64, bytes: u64) {
        match self.stages.iter_mut().find(|s| s.stage == stage) {
            Some(s) => {
                s.calls += calls;
                s.gpu_s += gpu_s;
                s.bytes += bytes;
            }
            None => {
                self.stages.push(StageTime {
                    stage,
                    calls,
                    gpu_s,
                    bytes,
                });
                let rank = |name: &str| STAGES.iter().position(|s| *s == name).unwrap_or(99);
                self.stages.sort_by_key(|s| rank(s.stage));
            }
        }
    }
}

impl fmt::Display for GpuProfile {
    /// One line per stage: GPU ms, calls, MiB moved, GB/s and the share of the copy bandwidth
    /// (how far the stage is from the floor: 100% is at the floor).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.copy_bandwidth {
            Some(bw) => writeln!(
                f,
                "GPU stages (timer queries; copy bandwidth {:.1} GB/s measured in this process):",
                bw / 1e9
            )?,
            None => writeln!(f, "GPU stages (timer queries):")?,
        }
        writeln!(
            f,
            "  {:<9} {:>10} {:>6} {:>10} {:>9} {:>9}",
            "stage", "GPU ms", "calls", "MiB", "GB/s", "of copy"
        )?;
        for s in &self.stages {
            let (gbs, share) = match s.bandwidth() {
                Some(b) => (
                    format!("{:.1}", b / 1e9),
                    self.copy_bandwidth
                        .map_or("-".to_string(), |c| format!("{:.1}%", 100.0 * b / c)),
                ),
                None => ("-".to_string(), "-".to_string()),
            };
            writeln!(
                f,
                "  {:<9} {:>10.3} {:>6} {:>10.1} {:>9} {:>9}",
                s.stage,
                s.gpu_s * 1e3,
                s.calls,
                s.bytes as f64 / (1 << 20) as f64,
                gbs,
                share
            )?;
        }
        write!(f, "  {:<9} {:>10.3}", "total", self.total_s() * 1e3)
    }
}

/// A pair of timestamp queries around one timed call.
struct Pending {
    stage: &'static str,
    bytes: u64,
    begin: glow::Query,
    end: glow::Query,
}

/// The queries in flight and the ones free for reuse.
#[derive(Default)]
pub(crate) struct Profiler {
    enabled: bool,
    pending: Vec<Pending>,
    free: Vec<glow::Query>,
}

impl Profiler {
    /// Delete every query object (the context is being dropped).
    pub(crate) fn delete(&mut self, gl: &glow::Context) {
        for q in self
            .free
            .drain(..)
            .chain(self.pending.drain(..).flat_map(|p| [p.begin, p.end]))
        {
            // SAFETY: the queries were made on this context, which is still current.
            unsafe { gl.delete_query(q) };
        }
    }
}

fn new_query(gl: &glow::Context, free: &mut Vec<glow::Query>) -> Option<glow::Query> {
    // SAFETY: plain object creation on the current context.
    free.pop().or_else(|| unsafe { gl.create_query().ok() })
}

impl GlContext {
    /// Switch per-stage GPU timing on or off (off by default). Switching it on drops what was
    /// recorded and not yet taken.
    pub fn profile_stages(&self, on: bool) {
        let mut p = self.profiler.borrow_mut();
        p.enabled = on;
        let dropped: Vec<Pending> = p.pending.drain(..).collect();
        for d in dropped {
            p.free.push(d.begin);
            p.free.push(d.end);
        }
    }

    /// Whether per-stage timing is on.
    pub fn profiling(&self) -> bool {
        self.profiler.borrow().enabled
    }

    /// Run `work` as one call of `stage` that moves at least `bytes`, between two timestamp
    /// queries when profiling is on.
    pub(crate) fn timed<T>(&self, stage: &'static str, bytes: u64, work: impl FnOnce() -> T) -> T {
        if !self.profiling() {
            return work();
        }
        let begin = {
            let mut p = self.profiler.borrow_mut();
            new_query(&self.gl, &mut p.free)
        };
        if let Some(q) = begin {
            // SAFETY: a timestamp query on the current context.
            unsafe { self.gl.query_counter(q, glow::TIMESTAMP) };
        }
        let result = work();
        let mut p = self.profiler.borrow_mut();
        if let (Some(begin), Some(end)) = (begin, new_query(&self.gl, &mut p.free)) {
            // SAFETY: as above.
            unsafe { self.gl.query_counter(end, glow::TIMESTAMP) };
            p.pending.push(Pending {
                stage,
                bytes,
                begin,
                end,
            });
        }
        result
    }

    /// The per-stage times of the work since profiling was switched on or last taken (waits for
    /// the GPU to reach the last query); the queries are kept for reuse.
    pub fn take_profile(&self) -> GpuProfile {
        let mut p = self.profiler.borrow_mut();
        let pending: Vec<Pending> = p.pending.drain(..).collect();
        let mut profile = GpuProfile::default();
        for call in pending {
            let read = |q: glow::Query| -> u64 {
                let mut value = 0u64;
                // SAFETY: no buffer is bound to GL_QUERY_BUFFER, so the offset is the address of
                // `value`, which outlives the call; QUERY_RESULT waits for the result.
                unsafe {
                    self.gl.get_query_parameter_u64_with_offset(
                        q,
                        glow::QUERY_RESULT,
                        &mut value as *mut u64 as usize,
                    )
                };
                value
            };
            let (t0, t1) = (read(call.begin), read(call.end));
            profile.record(
                call.stage,
                1,
                t1.saturating_sub(t0) as f64 * 1e-9,
                call.bytes,
            );
            p.free.push(call.begin);
            p.free.push(call.end);
        }
        profile
    }
}

/// The device's copy bandwidth in bytes per second (bytes read + written): the GL engine's copy
/// kernel (`glsl/copy.comp`, 16-byte words) over two buffers of `bytes` (clamped to one storage
/// block), `repeats` times after a warm-up, timed with timer queries like every stage. The floor
/// every stage of a profile is compared with. What was being profiled stays recorded.
pub fn copy_bandwidth(ctx: &GlContext, bytes: usize, repeats: usize) -> Result<f64> {
    let max = usize::try_from(ctx.info().max_ssbo_bytes).unwrap_or(usize::MAX);
    let bytes = bytes.min(max).max(16) / 16 * 16;
    let src = ctx.zeroed(bytes)?;
    let dst = ctx.zeroed(bytes)?;
    let program = ctx.use_stage("copy.comp", &Defines::default())?;
    let n = bytes / 16;
    ctx.uniform_u32(program, "u_n", n as u32);
    src.bind(0);
    dst.bind(1);
    // Warm-up: the first dispatch may finish compiling the pipeline.
    ctx.dispatch_untimed(n, 64)?;
    let mut own = Profiler {
        enabled: true,
        ..Default::default()
    };
    // Time the copies with a profiler of their own, so a profile being recorded keeps its calls.
    std::mem::swap(&mut own, &mut *ctx.profiler.borrow_mut());
    let timed = (0..repeats.max(1)).try_for_each(|_| {
        ctx.set_dispatch_bytes(2 * bytes as u64);
        ctx.dispatch(n, 64)
    });
    let copy = ctx.take_profile();
    std::mem::swap(&mut own, &mut *ctx.profiler.borrow_mut());
    own.delete(&ctx.gl);
    timed?;
    copy.stage("copy")
        .and_then(StageTime::bandwidth)
        .ok_or_else(|| Error::Gl("the copy kernel's timer queries gave no time".into()))
}

/// The host-to-GPU upload rate on `ctx` in bytes per second: `repeats` uploads of `bytes` from
/// host memory (`glBufferSubData`, as staging uses), timed on the host up to `glFinish`. The
/// reference `--stats` sets the staging rate beside (the bus on a GPU, a memcpy on llvmpipe).
pub fn upload_bandwidth(ctx: &GlContext, bytes: usize, repeats: usize) -> Result<f64> {
    let data = vec![0u8; bytes.max(16)];
    let buffer = ctx.scratch(data.len())?;
    // Warm-up: the first upload may allocate the buffer's storage.
    buffer.write(&data);
    ctx.finish();
    let start = std::time::Instant::now();
    for _ in 0..repeats.max(1) {
        buffer.write(&data);
    }
    ctx.finish();
    let seconds = start.elapsed().as_secs_f64();
    Ok((data.len() * repeats.max(1)) as f64 / seconds.max(1e-9))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_fold_in_pipeline_order() {
        let mut a = GpuProfile::default();
        a.record("merge", 1, 0.002, 100);
        a.record("upload", 2, 0.001, 50);
        let mut b = GpuProfile::default();
        b.record("merge", 1, 0.003, 100);
        a.add(&b);
        let names: Vec<_> = a.stages.iter().map(|s| s.stage).collect();
        assert_eq!(names, ["upload", "merge"]);
        let merge = a.stage("merge").unwrap();
        assert_eq!((merge.calls, merge.bytes), (2, 200));
        assert!((merge.gpu_s - 0.005).abs() < 1e-12);
        assert!((a.total_s() - 0.006).abs() < 1e-12);
    }
}
