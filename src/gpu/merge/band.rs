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

/// Cut the window from row `first_row` on into bands whose merged buffers fit `limit` bytes
/// each, when the output may hold `growth` times the merged samples (a tidy splits volumes: at
/// most 2x, as a pixel of n samples has at most 2n boundaries and every tidied sample starts at
/// one). The stacked inputs of a k-way merge take as many slots as the merged output.
pub(super) fn plan_bands(
    plan: &MergePlan,
    gl_options: &GlOptions,
    limit: u64,
    stride: usize,
    growth: u64,
    first_row: usize,
) -> Result<Vec<Band>> {
    let per_sample = growth * 16u64.max(4 * stride as u64);
    let width = plan.window.width();
    let mut bands = Vec::new();
    let mut row0 = first_row;
    let mut total = 0u64;
    let rows = row_samples(plan);
    for (y, &n) in rows.iter().enumerate().skip(first_row) {
        if (n + 1) * per_sample > limit {
            return Err(Error::Gl(format!(
                "row {} holds {n} samples, more than one GPU buffer of {limit} bytes can take",
                plan.window.y0 as i64 + y as i64
            )));
        }
        if y > row0 && (total + n + 1) * per_sample > limit {
            bands.push(Band::new(row0, y - row0, width, gl_options));
            row0 = y;
            total = 0;
        }
        total += n;
    }
    bands.push(Band::new(row0, rows.len() - row0, width, gl_options));
    Ok(bands)
}
