//! The band planner: the output window cut into runs of rows from the samples each row holds
//! (every input's count tables, read before any sample) and the memory budget.
//!
//! A row costs what its band holds while it is alive: each input's decoded samples (twice: the
//! decoded rows and the band's planes), its per-pixel counts and offsets, and the merge's working
//! set and output (the same per-sample and per-pixel sizes `composite::budget` counts for a
//! whole image). Three bands are alive at the peak (one read, one merged, one written), and each
//! input holds at most one block of rows beyond the band (a 16-line ZIP block, a row of tiles),
//! so a band may use a third of what the budget leaves after those blocks. Bands are further
//! capped at [`band_cap`]: [`MAX_BAND_BYTES`], or [`BAND_BYTES_PER_THREAD`] for each thread where
//! that is more. Beyond that a larger band is no faster (rayon has rows and chunks enough) and
//! only raises the peak; below it, a many-core host starves: each band's chunks are decoded and
//! encoded in parallel, and a 1080p deep band of 32 MiB is 4 or 5 rows, 4 or 5 ZIPS chunks for
//! 16 threads. A row that alone is over its share of the budget is
//! refused, naming the input with the most samples in it. The count tables the readers keep
//! for decoding come off the budget first.
//!
//! A run of rows in which no input holds a sample is a band of its own, however long: such a
//! band is never decoded or merged (the writer repeats one empty chunk), so it costs nothing to
//! hold, and cutting it from the rows around it keeps them from paying for its width.

use std::ops::RangeInclusive;

use super::StreamOptions;
use crate::composite::{
    OutputKind, DEEP_PIXEL_BYTES, DEEP_SAMPLE_BYTES, FLAT_COPIES, GL_FLAT_PIXEL_BYTES,
};
use crate::deep::Bounds;
use crate::error::{Error, Result};
use crate::exr::{ChunkSource, BANDS_IN_FLIGHT};

/// The most bytes a band is planned to take on a host of up to two threads, whatever the budget
/// allows (taller bands measured 2-12% slower on two cores).
pub const MAX_BAND_BYTES: u64 = 32 << 20;

/// Band bytes per thread beyond two threads. On a 16-thread H200 host, the 1080p powerplant
/// pair's deep merge took 2.15 s in 32 MiB bands (4 or 5 rows) and 1.37-1.41 s in bands of 46,
/// 92 or 180 rows (docs/benchmarks.md, "Band height on many cores"); 16 MiB a thread gives that
/// pair about 32 rows.
pub const BAND_BYTES_PER_THREAD: u64 = 16 << 20;

/// The most bytes a band is planned to take with `threads` threads merging it, whatever the
/// budget allows: enough rows that every thread has chunks to decode and encode.
pub fn band_cap(threads: usize) -> u64 {
    MAX_BAND_BYTES.max((threads as u64).saturating_mul(BAND_BYTES_PER_THREAD))
}

/// What `DEEPMERGE_GL_BAND_CAP` asks of the GL engine's bands on a GPU (a measurement
/// setting): at most that many bytes of band for each host thread, or (`None`: unset, empty or
/// `0`) bands as large as the host budget allows, the default. A size from 1M to 16G; anything
/// else is an error that names the variable.
///
/// Why: the GL engine's bands on a GPU are as large as the host budget allows (a few bands for
/// a 1080p frame), so the reader, decoding up to four bands ahead, touches most of a frame's
/// decoded planes for the first time. On an NVIDIA H200 host at two threads the flat merge's
/// decode then took 110,000 page faults (the CPU engine's, in its small bands, 17,000), and on
/// this 2-core machine the same bands' unpacking took 1.59 s of CPU against 1.22 s in bands a
/// quarter the size. Smaller bands cost the GPU's merging thread a round of dispatches and a
/// readback each, which matters where that thread is the limit (16 threads, flat output):
/// the hardware's to weigh (`benches/end_to_end.sh`, `E2E_GL_VARIANT`).
pub fn gl_band_cap_from(value: Option<&str>) -> Result<Option<u64>> {
    let text = value.map(str::trim).unwrap_or_default();
    if text.is_empty() || text == "0" {
        return Ok(None);
    }
    match crate::size::parse_bytes(text) {
        Ok(bytes) if ((1 << 20)..=(16 << 30)).contains(&bytes) => Ok(Some(bytes)),
        _ => Err(Error::Usage(format!(
            "DEEPMERGE_GL_BAND_CAP={text}: use a size of band per host thread from 1M to 16G \
             (64M), or 0 for bands as large as the memory budget allows"
        ))),
    }
}

/// [`gl_band_cap_from`] of the environment now.
pub fn gl_band_cap_from_env() -> Result<Option<u64>> {
    gl_band_cap_from(crate::env_setting::env_setting("DEEPMERGE_GL_BAND_CAP").as_deref())
}

/// Bytes per output row held for the whole merge: its planned cost (8) and its chunk's entry
/// in the writer's offset table (at most 8).
const OUTPUT_ROW_TABLE_BYTES: u64 = 16;

/// Rows of the output window, absolute and inclusive.
pub type Band = RangeInclusive<i32>;

/// What the output holds per sample and per pixel, for costing rows.
#[derive(Clone, Copy, Debug)]
pub struct OutputShape {
    /// Bytes of one deep output sample's values (all output channels).
    pub deep_value_bytes: u64,
    /// Composited channels.
    pub columns: u64,
    /// Id (uint) channels.
    pub ids: u64,
}

/// Bytes the merge and output of one row take beyond its inputs.
fn output_row_bytes(
    kind: OutputKind,
    shape: &OutputShape,
    tidy: bool,
    width: u64,
    samples: u64,
) -> u64 {
    match kind {
        OutputKind::Flat { .. } => {
            let flat = 4 * (shape.columns + shape.ids + 1);
            let gl = 4 * shape.columns.max(1) + GL_FLAT_PIXEL_BYTES;
            width.saturating_mul(FLAT_COPIES * flat + gl)
        }
        OutputKind::Deep => {
            let samples = if tidy {
                samples.saturating_mul(2)
            } else {
                samples
            };
            width.saturating_mul(DEEP_PIXEL_BYTES).saturating_add(
                samples.saturating_mul(DEEP_SAMPLE_BYTES + 2 * shape.deep_value_bytes),
            )
        }
    }
}

/// Bytes an input's row takes once decoded into a band.
fn input_row_bytes(source: &ChunkSource, samples: u64) -> u64 {
    // Counts (4), offsets (8) and the decoded row's counts (4) per pixel; samples twice (the
    // decoded blocks and the planes; one-line chunks unpack straight into the planes, but the
    // band heights measured on hardware were planned this way, so only the peak is lower).
    (source.window.width() as u64 * 16)
        .saturating_add(samples.saturating_mul(2 * source.sample_bytes()))
}

/// Cut `window` (the union of the inputs' windows) into bands for `sources` (their rows
/// counted) under `options.budget`, or into `options.band_rows` rows each when set.
pub fn plan_bands(
    sources: &[ChunkSource],
    window: Bounds,
    shape: &OutputShape,
    options: &StreamOptions,
) -> Result<Vec<Band>> {
    plan_bands_capped(
        sources,
        window,
        shape,
        options,
        band_cap(options.threads_per_band()),
        BANDS_IN_FLIGHT,
    )
}

/// [`plan_bands`] with bands of at most `cap` bytes instead of [`band_cap`]'s, and
/// `in_flight` bands alive at once instead of [`BANDS_IN_FLIGHT`]: the GL engine on a device of
/// its own, whose bands are better as large as the host budget allows (each band costs a round
/// of dispatches and a readback; the GPU bounds its own share), and which holds one band more
/// when it overlaps a band's readback with the next band's GPU work.
pub fn plan_bands_capped(
    sources: &[ChunkSource],
    window: Bounds,
    shape: &OutputShape,
    options: &StreamOptions,
    cap: u64,
    in_flight: u64,
) -> Result<Vec<Band>> {
    if let Some(rows) = options.band_rows {
        let rows = rows.max(1) as i64;
        let mut bands = Vec::new();
        let mut y = window.y0 as i64;
        while y <= window.y1 as i64 {
            let end = (y + rows - 1).min(window.y1 as i64);
            bands.push(y as i32..=end as i32);
            y = end + 1;
        }
        return Ok(bands);
    }
    let width = window.width() as u64;
    let kind = options.merge.output;
    let tidy = options.merge.tidy;
    // The output window is hostile too (two small inputs far apart): the planner's row costs
    // and the writer's offset table are per row, and the bands alive hold a few rows each.
    let window_bytes = (window.height() as u64)
        .saturating_mul(OUTPUT_ROW_TABLE_BYTES)
        .saturating_add(output_row_bytes(kind, shape, tidy, width, 0).saturating_mul(in_flight));
    if window_bytes > options.budget {
        let paths: Vec<&std::path::Path> = sources.iter().map(|s| s.path()).collect();
        return Err(Error::over_budget(
            format_args!(
                "{}: the merged data window ({}, {})-({}, {}), {} x {} pixels, for {} output,",
                crate::composite::input_names(&paths),
                window.x0,
                window.y0,
                window.x1,
                window.y1,
                window.width(),
                window.height(),
                match kind {
                    OutputKind::Flat { .. } => "flat",
                    OutputKind::Deep => "deep",
                },
            ),
            window_bytes,
            options.budget,
        ));
    }
    let samples_at = |s: &ChunkSource, y: i32| -> u64 {
        if y < s.window.y0 || y > s.window.y1 {
            0
        } else {
            s.row_samples[(y - s.window.y0) as usize]
        }
    };
    let row_cost = |y: i32| -> u64 {
        let mut total = 0u64;
        let mut samples = 0u64;
        for s in sources {
            let n = samples_at(s, y);
            samples = samples.saturating_add(n);
            if n > 0 || (y >= s.window.y0 && y <= s.window.y1) {
                total = total.saturating_add(input_row_bytes(s, n));
            }
        }
        total.saturating_add(output_row_bytes(kind, shape, tidy, width, samples))
    };
    // What is held beyond the bands: each input's largest block of rows decoded ahead, and the
    // deep writer's partial chunk (its rows short of one chunk).
    let mut reserve = 0u64;
    for s in sources {
        let block = s.block_height();
        let largest = s
            .row_samples
            .chunks(block)
            .map(|b| b.iter().map(|&n| input_row_bytes(s, n)).sum::<u64>())
            .max()
            .unwrap_or(0);
        reserve = reserve.saturating_add(largest);
    }
    let costs: Vec<u64> = (window.y0..=window.y1).map(row_cost).collect();
    if kind == OutputKind::Deep {
        let lines = options.deep_write.codec.lines_per_chunk();
        if lines > 1 {
            let largest = costs
                .chunks(lines)
                .map(|c| c.iter().sum::<u64>())
                .max()
                .unwrap_or(0);
            reserve = reserve.saturating_add(largest);
        }
    }
    let kept: u64 = sources.iter().map(ChunkSource::kept_bytes).sum();
    let share = options.budget.saturating_sub(reserve).saturating_sub(kept) / in_flight;
    let target = share.min(cap);
    let empty_row = |y: i32| sources.iter().all(|s| samples_at(s, y) == 0);
    let max_block = sources
        .iter()
        .map(ChunkSource::block_height)
        .max()
        .unwrap_or(1);
    // Whether row y starts a block (or lies outside the window) of every input.
    let block_edge = |y: i32| {
        sources.iter().all(|s| {
            y <= s.window.y0
                || y > s.window.y1
                || ((y - s.window.y0) as usize).is_multiple_of(s.block_height())
        })
    };
    let mut bands = Vec::new();
    let mut start = window.y0;
    let mut held = 0u64;
    let mut run_empty = empty_row(window.y0);
    for (k, &cost) in costs.iter().enumerate() {
        let y = window.y0 + k as i32;
        if cost > share {
            // What the budget must be for this row: a band of it per band alive beside the
            // reserve.
            let needed = cost
                .saturating_mul(in_flight)
                .saturating_add(reserve)
                .saturating_add(kept);
            return Err(refuse_row(
                sources,
                y,
                needed,
                options.budget,
                in_flight,
                samples_at,
            ));
        }
        let empty = empty_row(y);
        let full = !empty && held.saturating_add(cost) > target;
        if y > start && (empty != run_empty || full) {
            // A band that ends inside an input's block leaves the rest of the block decoded on
            // top of the next band: end the band at the last block edge of every input
            // instead, when the rows that moves to the next band leave it under the target.
            let mut cut = y;
            if full && empty == run_empty {
                // At most one block of the tallest: the search is short whatever the band.
                let mut carried = 0u64;
                for c in (start + 1..=y).rev().take(max_block) {
                    carried = carried.saturating_add(costs[(c - window.y0) as usize]);
                    if carried > target {
                        break;
                    }
                    if block_edge(c) {
                        cut = c;
                        break;
                    }
                }
            }
            bands.push(start..=cut - 1);
            start = cut;
            held = costs[(cut - window.y0) as usize..k].iter().sum();
        }
        run_empty = empty;
        if !empty {
            held = held.saturating_add(cost);
        }
    }
    bands.push(start..=window.y1);
    Ok(bands)
}

/// The refusal of row `y`, which alone would need `needed` bytes of budget.
fn refuse_row(
    sources: &[ChunkSource],
    y: i32,
    needed: u64,
    budget: u64,
    in_flight: u64,
    samples_at: impl Fn(&ChunkSource, i32) -> u64,
) -> Error {
    let total: u64 = sources.iter().map(|s| samples_at(s, y)).sum();
    let densest = sources
        .iter()
        .max_by_key(|s| samples_at(s, y))
        .expect("at least one input");
    Error::over_budget(
        format_args!(
            "row {y}, with {} samples here ({total} over all inputs) and {} bands of rows \
             held at a time ({}),",
            samples_at(densest, y),
            if in_flight == 3 { "three" } else { "four" },
            if in_flight == 3 {
                "one read, one merged, one written"
            } else {
                "one read, two merged, one written"
            },
        ),
        needed,
        budget,
    )
    .in_file(densest.path())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_band_cap_grows_with_the_threads_past_two() {
        assert_eq!(band_cap(1), MAX_BAND_BYTES);
        assert_eq!(band_cap(2), MAX_BAND_BYTES);
        assert_eq!(band_cap(4), 64 << 20);
        assert_eq!(band_cap(16), 256 << 20);
        assert_eq!(band_cap(usize::MAX), u64::MAX);
    }

    #[test]
    fn the_gl_band_cap_is_a_size_per_thread_or_none() {
        assert_eq!(gl_band_cap_from(None).unwrap(), None);
        assert_eq!(gl_band_cap_from(Some("")).unwrap(), None);
        assert_eq!(gl_band_cap_from(Some("0")).unwrap(), None);
        assert_eq!(gl_band_cap_from(Some("64M")).unwrap(), Some(64 << 20));
        assert_eq!(gl_band_cap_from(Some(" 1048576 ")).unwrap(), Some(1 << 20));
        for bad in ["512K", "17G", "lots", "-1"] {
            let e = gl_band_cap_from(Some(bad)).unwrap_err().to_string();
            assert!(
                e.contains(&format!("DEEPMERGE_GL_BAND_CAP={bad}: ")) && e.contains("1M to 16G"),
                "{e}"
            );
        }
    }
}
