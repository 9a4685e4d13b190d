//! The host gather, for inputs that need sorting when the host is asked to sort them
//! (`GlOptions::sort_on_gpu: Some(false)`, `--gpu-stages host`):
//! one input's samples in one band, pixel by pixel in layout order, sorted per pixel, as the
//! stream the GPU builds an image from (counts, fragment keys, composited values). Every other
//! input is gathered on the GPU from its decoded planes ([`super::gather`]).

use super::band::Band;
use crate::composite::{read_sample, MergePlan};
use crate::vocab::Fragment;

/// Input `k`'s samples in `band`, pixel by pixel in layout order: counts, keys, values.
pub(super) fn host_gather(
    plan: &MergePlan,
    k: usize,
    band: &Band,
    stride: usize,
    sort_on_host: bool,
) -> (Vec<u32>, Vec<Fragment>, Vec<f32>) {
    let image = plan.inputs[k];
    let window = plan.window;
    let depth = plan.depth[k];
    let sources = &plan.sources[k];
    let mut counts = Vec::with_capacity(band.pixels());
    let mut keys = Vec::new();
    let mut values = Vec::new();
    let mut order: Vec<usize> = Vec::new();
    for &q in &band.perm {
        let x = window.x0 + (q as usize % band.width) as i32;
        let y = window.y0 + (band.row0 + q as usize / band.width) as i32;
        let Some(p) = image.pixel_index(x, y) else {
            counts.push(0);
            continue;
        };
        let range = image.range(p);
        counts.push(range.len() as u32);
        let key = |index: usize| {
            Fragment::try_from(read_sample(image, depth, k as u32, index))
                .expect("inputs over 2^32 samples are refused before gathering")
        };
        order.clear();
        order.extend(range);
        if sort_on_host {
            // Sorted here, stably, so equal depths keep file order (the GPU stage does the same).
            order.sort_by(|&i, &j| key(i).depth_cmp(&key(j)));
        }
        for &index in &order {
            keys.push(key(index));
            for c in 0..stride {
                values.push(match sources.get(c).copied().flatten() {
                    Some(ch) => image.planes[ch].get_f32(index),
                    None => 0.0,
                });
            }
        }
    }
    (counts, keys, values)
}
