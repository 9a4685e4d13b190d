//! Band planning: the union window cut into runs of rows whose merged buffers each fit one GPU
//! storage buffer (`GL_MAX_SHADER_STORAGE_BLOCK_SIZE`, or a smaller budget), each with the
//! layout pixel order it is built in.

use crate::composite::MergePlan;
use crate::error::{Error, Result};
use crate::gpu::GlOptions;
use crate::vocab::PixelOrder;

/// A run of rows of the union window, with its pixel order.
#[derive(Clone, Debug)]
pub(super) struct Band {
    /// First row, relative to the window.
    pub(super) row0: usize,
    /// Rows.
    pub(super) rows: usize,
    /// Width of the window.
    pub(super) width: usize,
    /// Layout pixel p → row-major index inside the band.
    pub(super) perm: Vec<u32>,
    /// Whether `perm` is the identity: the GPU's pixel order is the window's
    /// (`PixelOrder::RowMajor`), so results come back in place.
    pub(super) in_window_order: bool,
}

impl Band {
    pub(super) fn new(row0: usize, rows: usize, width: usize, options: &GlOptions) -> Band {
        Band {
            row0,
            rows,
            width,
            perm: options.pixel_order.permutation(width, rows),
            in_window_order: options.pixel_order == PixelOrder::RowMajor,
        }
    }

    pub(super) fn pixels(&self) -> usize {
        self.width * self.rows
    }

    /// Per pixel of the band in row-major order, its position in the GPU's order (`perm`'s
    /// inverse): the order the readback walks the GPU's results in.
    pub(super) fn inverse_perm(&self) -> Vec<u32> {
        let mut inverse = vec![0u32; self.perm.len()];
        for (p, &q) in self.perm.iter().enumerate() {
            inverse[q as usize] = p as u32;
        }
        inverse
    }
}

/// Samples of each row of the window over all inputs.
fn row_samples(plan: &MergePlan) -> Vec<u64> {
    let window = plan.window;
    let mut rows = vec![0u64; window.height()];
    for image in &plan.inputs {
        let dw = image.data_window;
        let w = dw.width();
        for rel in 0..dw.height() {
            let y = dw.y0 as i64 + rel as i64 - window.y0 as i64;
            // An input may reach past a window chosen smaller than the union (`--bbox`).
            if let Some(row) = usize::try_from(y).ok().and_then(|y| rows.get_mut(y)) {
                *row += image.offsets[(rel + 1) * w] - image.offsets[rel * w];
            }
        }
    }
    rows
}

/// What one GPU buffer of a band may take, in bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct BandLimits {
    /// For a band of several rows: the size bands are cut to.
    pub(super) band: u64,
    /// For a band of one row too dense for `band`: the most the device and the GPU memory
    /// budget allow one buffer, so that a dense row is merged in a band of its own rather than
    /// refused while the budget has room (on a software rasteriser `band` is kept far below it).
    pub(super) row: u64,
    /// Whether `row` is the driver's largest storage block rather than the GPU memory budget's
    /// share, for the refusal's words.
    pub(super) row_is_storage_block: bool,
}

impl BandLimits {
    /// Both limits halved, after the driver could not hold a band.
    pub(super) fn halved(self) -> BandLimits {
        BandLimits {
            band: self.band / 2,
            row: self.row / 2,
            row_is_storage_block: false,
        }
    }
}

/// Cut the window from row `first_row` on into bands whose merged buffers fit `limits.band`
/// bytes each (a row denser than that in a band of its own, up to `limits.row`), when the
/// output may hold `growth` times the merged samples (a tidy splits volumes: at most 2x, as a
/// pixel of n samples has at most 2n boundaries and every tidied sample starts at one). The
/// stacked inputs of a k-way merge take as many slots as the merged output.
pub(super) fn plan_bands(
    plan: &MergePlan,
    gl_options: &GlOptions,
    limits: BandLimits,
    stride: usize,
    growth: u64,
    first_row: usize,
) -> Result<Vec<Band>> {
    let per_sample = growth * 16u64.max(4 * stride as u64);
    let width = plan.window.width();
    let limit = limits.band;
    let mut bands = Vec::new();
    let mut row0 = first_row;
    let mut total = 0u64;
    let rows = row_samples(plan);
    for (y, &n) in rows.iter().enumerate().skip(first_row) {
        let row_bytes = (n + 1) * per_sample;
        if row_bytes > limits.row.max(limit) {
            let (bound, remedy) = if limits.row_is_storage_block {
                (
                    "the driver's largest storage block",
                    "the CPU engine merges it",
                )
            } else {
                (
                    "one buffer's share of the GPU memory budget",
                    "a larger GPU memory budget, or the CPU engine, merges it",
                )
            };
            return Err(Error::Gl(format!(
                "row {} holds {n} samples: one GPU buffer of them takes {}, more than {bound} ({}); {remedy}",
                plan.window.y0 as i64 + y as i64,
                crate::size::human_bytes(row_bytes),
                crate::size::human_bytes(limits.row.max(limit)),
            )));
        }
        if row_bytes > limit {
            // A dense row in a band of its own, bounded by `limits.row`.
            if y > row0 {
                bands.push(Band::new(row0, y - row0, width, gl_options));
            }
            bands.push(Band::new(y, 1, width, gl_options));
            row0 = y + 1;
            total = 0;
            continue;
        }
        if y > row0 && (total + n + 1) * per_sample > limit {
            bands.push(Band::new(row0, y - row0, width, gl_options));
            row0 = y;
            total = 0;
        }
        total += n;
    }
    // The rows after the last dense one; an empty window still gets its one (empty) band.
    if row0 < rows.len() || bands.is_empty() {
        bands.push(Band::new(row0, rows.len() - row0, width, gl_options));
    }
    Ok(bands)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};

    /// A 2-wide image whose row y holds `rows[y]` samples (all in its first pixel).
    fn image(rows: &[u32]) -> DeepImage {
        let window = Bounds::from_origin_size(0, 0, 2, rows.len());
        let counts: Vec<u32> = rows.iter().flat_map(|&n| [n, 0]).collect();
        let samples: u32 = rows.iter().sum();
        DeepImage::from_counts(
            window,
            window,
            vec![Channel::new("Z", SampleType::F32)],
            &counts,
            vec![Plane::F32(vec![1.0; samples as usize])],
            DeepState::Sorted,
        )
        .unwrap()
    }

    /// The bands' (first row, rows) for rows of `rows` samples, at 16 bytes a sample.
    fn planned(rows: &[u32], band: u64, row: u64, first_row: usize) -> Result<Vec<(usize, usize)>> {
        let image = image(rows);
        let plan = MergePlan::new(&[&image])?;
        let limits = BandLimits {
            band,
            row,
            row_is_storage_block: false,
        };
        let bands = plan_bands(&plan, &GlOptions::default(), limits, 1, 1, first_row)?;
        Ok(bands.iter().map(|b| (b.row0, b.rows)).collect())
    }

    #[test]
    fn a_dense_row_gets_a_band_of_its_own_up_to_the_row_limit() {
        // 16 bytes a sample: a band of 160 bytes holds rows of 4 samples two by two (the row's
        // count plus one is charged).
        let quiet = [4, 4, 4, 4];
        assert_eq!(planned(&quiet, 160, 160, 0).unwrap(), [(0, 2), (2, 2)]);
        // A row of 20 samples (336 bytes) first, in the middle, last; never an empty band.
        assert_eq!(planned(&[20, 4, 4], 160, 400, 0).unwrap(), [(0, 1), (1, 2)]);
        assert_eq!(
            planned(&[4, 20, 4], 160, 400, 0).unwrap(),
            [(0, 1), (1, 1), (2, 1)]
        );
        assert_eq!(planned(&[4, 4, 20], 160, 400, 0).unwrap(), [(0, 2), (2, 1)]);
        assert_eq!(
            planned(&[4, 20, 4, 4], 160, 400, 1).unwrap(),
            [(1, 1), (2, 2)]
        );
        // Past the row limit, and after the limits are halved, it is refused, naming the row.
        let refused = planned(&[4, 20], 160, 320, 0).unwrap_err().to_string();
        assert!(refused.contains("row 1 holds 20 samples"), "{refused}");
        let halved = BandLimits {
            band: 160,
            row: 400,
            row_is_storage_block: true,
        }
        .halved();
        assert_eq!((halved.band, halved.row), (80, 200));
        // An empty window still gets its one (empty) band.
        assert_eq!(planned(&[], 160, 160, 0).unwrap(), [(0, 0)]);
    }
}
