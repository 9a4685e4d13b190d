//! GPU exclusive prefix sum (twin: `cpu::scan::exclusive_scan`): `scan.comp` scans
//! work groups of [`SCAN_GROUP`] in shared memory and writes one total per group, the totals are
//! scanned recursively, and `scan_add.comp` adds them back. Any length works, 0 included.

use super::buffer::GpuBuffer;
use super::program::Defines;
use super::GlContext;
use crate::error::Result;

/// Threads (and elements) per scan work group: 256 u32 fit twice in shared memory with room to
/// spare on every implementation (32 KiB is the minimum).
pub const SCAN_GROUP: usize = 256;

fn defines() -> Defines {
    Defines::default().set("SCAN_GROUP", format!("{SCAN_GROUP}u"))
}

/// Groups a 1D dispatch of `n` elements really launches (rows of at most 65535 groups).
fn launched_groups(n: usize) -> usize {
    let groups = n.div_ceil(SCAN_GROUP).max(1);
    let x = groups.min(65535);
    x * groups.div_ceil(x)
}

/// Exclusive scan of the first `n` u32 of `input` into a new buffer of `n + 1` u32 (the total
/// last).
pub fn exclusive_scan_buffer<'a>(
    ctx: &'a GlContext,
    input: &GpuBuffer<'a>,
    n: usize,
) -> Result<GpuBuffer<'a>> {
    let output = ctx.zeroed((n + 1) * 4)?;
    scan_into(ctx, input, &output, n)?;
    Ok(output)
}

fn scan_into<'a>(
    ctx: &'a GlContext,
    input: &GpuBuffer<'a>,
    output: &GpuBuffer<'a>,
    n: usize,
) -> Result<()> {
    let groups = launched_groups(n);
    let sums = ctx.zeroed((groups + 1) * 4)?;
    let scan = ctx.use_stage("scan.comp", &defines())?;
    ctx.uniform_u32(scan, "u_n", n as u32);
    input.bind(0);
    output.bind(1);
    sums.bind(2);
    ctx.set_dispatch_bytes((2 * n * 4) as u64);
    ctx.dispatch(n, SCAN_GROUP)?;
    let real_groups = n.div_ceil(SCAN_GROUP).max(1);
    if real_groups == 1 {
        // One group: nothing to add ([0]) and its total is the grand total ([1]).
        let scanned = ctx.zeroed(8)?;
        copy_u32(ctx, &sums, 0, &scanned, 1, 1)?;
        return add(ctx, output, &scanned, n, 1);
    }
    let scanned = ctx.zeroed((real_groups + 1) * 4)?;
    scan_into(ctx, &sums, &scanned, real_groups)?;
    add(ctx, output, &scanned, n, real_groups)
}

fn add<'a>(
    ctx: &'a GlContext,
    output: &GpuBuffer<'a>,
    scanned: &GpuBuffer<'a>,
    n: usize,
    groups: usize,
) -> Result<()> {
    let program = ctx.use_stage("scan_add.comp", &defines())?;
    ctx.uniform_u32(program, "u_n", n as u32);
    ctx.uniform_u32(program, "u_groups", groups as u32);
    output.bind(1);
    scanned.bind(3);
    ctx.set_dispatch_bytes((2 * n * 4) as u64);
    ctx.dispatch(n.max(1), SCAN_GROUP)
}

/// Copy `count` u32 from `src[from..]` to `dst[to..]`.
pub(crate) fn copy_u32(
    ctx: &GlContext,
    src: &GpuBuffer,
    from: usize,
    dst: &GpuBuffer,
    to: usize,
    count: usize,
) -> Result<()> {
    ctx.copy_buffer(
        src.buffer,
        from * 4,
        dst.buffer,
        to * 4,
        count * 4,
        "a scan total",
    )
}

/// Scan `counts` on the GPU and read the `n + 1` offsets back (for tests and small jobs).
pub fn exclusive_scan(ctx: &GlContext, counts: &[u32]) -> Result<Vec<u32>> {
    let input = ctx.upload(counts)?;
    let output = exclusive_scan_buffer(ctx, &input, counts.len())?;
    Ok(output.read(counts.len() + 1))
}
