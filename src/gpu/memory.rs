//! How much memory the GL engine may use on its device: what the driver says is free (NVIDIA's
//! `GL_NVX_gpu_memory_info`), or on a software rasteriser, whose buffers are host memory, what
//! the host has available. The viewer sizes its layers from it, and the streamed merge its
//! bands (`--gpu-memory` overrides both).

use glow::HasContext;

use super::GlContext;

/// Bytes the device has free: the driver's figure, or under a software rasteriser the host's
/// `MemAvailable`; `None` where neither is known.
pub fn available_memory(ctx: &GlContext) -> Option<u64> {
    /// GL_GPU_MEMORY_INFO_CURRENT_AVAILABLE_VIDMEM_NVX, in KiB.
    const AVAILABLE_VIDMEM_NVX: u32 = 0x9049;
    if ctx
        .gl
        .supported_extensions()
        .contains("GL_NVX_gpu_memory_info")
    {
        // SAFETY: a plain query the extension defines, on the current context.
        let kib = unsafe { ctx.gl.get_parameter_i32(AVAILABLE_VIDMEM_NVX) };
        (kib > 0).then(|| kib as u64 * 1024)
    } else if ctx.info().software {
        host_available_bytes()
    } else {
        None
    }
}

/// Three quarters of [`available_memory`], 4 GiB where it is unknown: what a GL job may take
/// on the device when not told (`--gpu-memory`).
pub fn default_budget(ctx: &GlContext) -> u64 {
    available_memory(ctx).map_or(4 << 30, |bytes| bytes / 4 * 3)
}

/// The device budget a merge's bands are sized to on a software rasteriser when not told
/// (`--gpu-memory`). Its buffers are host memory, on the cores that also decode and encode: a
/// band's buffers are kept in the range of the CPU engine's cache-sized bands (twice its 32 MiB,
/// since a sample is wider on the GPU) instead of the host's whole budget. Measured on the 1080p
/// powerplant pair under llvmpipe (flat): peak memory 282 MiB -> 206 MiB for 3% more wall time;
/// 32 MiB gave 174 MiB for 8-10% more.
pub const SOFTWARE_MERGE_BUDGET: u64 = 64 << 20;

/// The GPU buffers one band of a merge holds at once, at most, each sized like its largest:
/// staged planes, the gathered keys and values, the merged image's keys and values, counts and
/// offsets, the flat composite. A band whose largest buffer takes `budget / 8` fits `budget`.
pub const BUFFERS_PER_BAND: u64 = 8;

/// The largest buffer of a band ([`super::GlOptions::band_budget_bytes`]) under a device
/// budget of `budget` bytes.
pub fn band_budget_of(budget: u64) -> u64 {
    (budget / BUFFERS_PER_BAND).max(1)
}

/// `MemAvailable` of /proc/meminfo.
fn host_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
