//! Twin of `glsl/scan.comp` + `glsl/scan_add.comp`: the exclusive prefix sum that turns per-pixel
//! counts into offsets. The GPU version scans work groups in shared memory, scans the group sums
//! recursively and adds them back; the result is the same sequence.

/// Exclusive prefix sum with the total appended: `n + 1` entries for `n` counts, wrapping on
/// overflow as the GPU's `uint` arithmetic does (the callers keep totals below 2^32).
pub fn exclusive_scan(counts: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(counts.len() + 1);
    let mut total = 0u32;
    out.push(0);
    for &c in counts {
        total = total.wrapping_add(c);
        out.push(total);
    }
    out
}
