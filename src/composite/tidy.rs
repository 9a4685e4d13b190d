//! Tidying a pixel where volume samples overlap (DESIGN §4): split each volume at every other
//! sample's Z and ZBack strictly inside it, merge volume pieces that cover identical intervals,
//! keep coincident points as they are (they composite in merge order).
//!
//! The model is the usual one for deep volumes: a sample over [Z, ZBack) is a homogeneous medium,
//! so the part of it covering a fraction `f` of its depth has alpha `1 − (1 − a)^f`, and its
//! premultiplied colour scales with its alpha. Two media sharing one interval add their optical
//! depths `u = −ln(1 − a)`; each one's colour counts in proportion to its share of the optical
//! depth. Everything is computed in f64 with `ln_1p`/`exp_m1`, so very thin pieces and nearly
//! transparent samples keep their precision (a naive `powf` loses it).
//!
//! Its two primitives are shared with the holdout ([`mod@super::holdout`]), so both follow one
//! model: splitting a volume at a depth ([`piece_fraction`], [`split_alpha`], [`split_row`]) and
//! mixing media that share an interval ([`CoincidentMix`], behind [`merge_coincident`]).
//!
//! Only pixels where some volume overlaps a later sample need this; [`needs_tidy`] is the cheap
//! gate the merge runs on every pixel, so inputs made only of points pay one pass over depths.
//!
//! GPU note: GLSL has no `log1p`/`expm1`; a port needs series fallbacks for small arguments (or
//! f64) to stay within the tolerances the tests state.

use super::pixel::{CompositeChannels, CompositeKind, PixelSamples};
use crate::vocab::{depth_cmp, depth_less, Sample};

/// True when some volume in `samples` (in merge order) overlaps a later sample, so that
/// compositing in list order would be wrong without splitting.
pub fn needs_tidy(samples: &[Sample]) -> bool {
    let mut reach = f32::NEG_INFINITY;
    for s in samples {
        if s.z < reach {
            return true;
        }
        if s.is_volume() {
            reach = reach.max(s.zback);
        }
    }
    false
}

/// True when `samples` is in merge order by depth and no two of them overlap: every volume ends
/// at or before the next sample starts (points may coincide with each other and with a volume's
/// ends). This is what `deepImageState = tidy` promises.
pub fn is_tidy(samples: &[Sample]) -> bool {
    let sorted = samples
        .windows(2)
        .all(|w| !depth_less(w[1].key(), w[0].key()));
    sorted && !needs_tidy(samples)
}

/// The piece of a homogeneous volume of alpha `alpha` that covers `fraction` (0..=1) of its depth:
/// returns the piece's alpha and the factor its premultiplied colour is scaled by.
///
/// `a ≥ 1` stays opaque with its colour unchanged (every piece of an opaque medium is opaque);
/// `a = 0` stays 0 and scales colour by the fraction (pure emission spreads evenly).
pub fn split_alpha(alpha: f64, fraction: f64) -> (f64, f64) {
    if alpha >= 1.0 || alpha.is_nan() {
        (alpha, 1.0)
    } else if alpha == 0.0 {
        (0.0, fraction)
    } else {
        let piece = -(fraction * (-alpha).ln_1p()).exp_m1();
        (piece, piece / alpha)
    }
}

/// Merge the values of pieces that cover one interval (rows of `width` values, all the same
/// length) into `out`, per DESIGN §4: for each alpha column `a = 1 − Π(1 − a_i)`; each colour
/// column `c = w · Σ c_i·v_i` with `u_i = −ln(1 − a_i)`, `v_i = u_i / a_i` (1 when `a_i = 0`) and
/// `w = a / Σu_i` (1 when the sum is 0). Where pieces are opaque in a colour's alpha, they win
/// outright and their colours are averaged. Each column is one [`CoincidentMix`].
pub fn merge_coincident(rows: &[&[f32]], channels: &CompositeChannels, out: &mut [f32]) {
    for (k, kind) in channels.kinds.iter().enumerate() {
        let alpha_column = match *kind {
            CompositeKind::Alpha => k,
            CompositeKind::Colour { alpha } => alpha,
        };
        let mut mix = CoincidentMix::default();
        for row in rows {
            mix.add(row[alpha_column] as f64, row[k] as f64);
        }
        out[k] = match kind {
            CompositeKind::Alpha => mix.alpha(),
            CompositeKind::Colour { .. } => mix.colour(),
        } as f32;
    }
}

/// Media that share one interval, mixed by optical depth (DESIGN §4): the accumulator behind
/// [`merge_coincident`], for one colour column and its alpha.
///
/// Optical depths `u = −ln(1 − a)` add; the mix has alpha `1 − e^(−Σu)` and colour
/// `w · Σ c·v` with `v = u / a` (1 when `a = 0`) and `w = a_mix / Σu` (1 when `Σu = 0`). Opaque
/// media (`a ≥ 1`) win outright: the mix is opaque and its colour is their average.
///
/// The holdout uses it too, so that "how much of IN survives HOLDOUT" is the same arithmetic as
/// the merge: [`CoincidentMix::transmittance`] of the holdout material in front of a sample, and
/// [`CoincidentMix::colour`] with IN as a unit colour for IN's share of a medium it shares.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CoincidentMix {
    /// Σu over the media that are not opaque.
    optical_depth: f64,
    /// Σ c·v over the media that are not opaque.
    weighted: f64,
    /// Σ c over the opaque media.
    opaque_sum: f64,
    /// How many opaque media were added.
    opaque_count: usize,
}

impl CoincidentMix {
    /// Add a whole medium (or point) of alpha `alpha` and premultiplied colour `colour`.
    pub fn add(&mut self, alpha: f64, colour: f64) {
        if alpha >= 1.0 {
            self.opaque_sum += colour;
            self.opaque_count += 1;
            return;
        }
        let u = -(-alpha).ln_1p();
        self.optical_depth += u;
        self.weighted += if alpha == 0.0 {
            colour
        } else {
            colour * (u / alpha)
        };
    }

    /// Add the part covering `fraction` of a colourless medium of alpha `alpha` (a holdout's
    /// matte): optical depth `fraction · u`, taken straight from the whole medium's alpha rather
    /// than from a rounded piece alpha. Every part of an opaque medium is opaque, whatever its
    /// fraction (as in [`split_alpha`]).
    pub fn add_part(&mut self, alpha: f64, fraction: f64) {
        if alpha >= 1.0 {
            self.opaque_count += 1;
        } else {
            self.optical_depth += -(fraction * (-alpha).ln_1p());
        }
    }

    /// True when an opaque medium was added.
    pub fn is_opaque(&self) -> bool {
        self.opaque_count > 0
    }

    /// True when nothing added attenuates: no opaque medium and no optical depth.
    pub fn is_clear(&self) -> bool {
        !self.is_opaque() && self.optical_depth == 0.0
    }

    /// The mix's alpha.
    pub fn alpha(&self) -> f64 {
        if self.is_opaque() {
            1.0
        } else {
            -(-self.optical_depth).exp_m1()
        }
    }

    /// The mix's premultiplied colour.
    pub fn colour(&self) -> f64 {
        if self.is_opaque() {
            return self.opaque_sum / self.opaque_count as f64;
        }
        let w = if self.optical_depth == 0.0 {
            1.0
        } else {
            self.alpha() / self.optical_depth
        };
        w * self.weighted
    }

    /// What the mix lets through, `1 − alpha` (0 when opaque), computed without cancellation.
    pub fn transmittance(&self) -> f64 {
        if self.is_opaque() {
            0.0
        } else {
            (-self.optical_depth).exp()
        }
    }
}

/// Split and merge `pixel`'s samples (in merge order) in place so that no two overlap; the
/// result is in merge order and tidy ([`is_tidy`]).
///
/// Pieces keep their source's `input` and `index`, so non-composited channels (ids) still come
/// from the sample they were cut from; a merged piece keeps those of its first contributor in
/// merge order. Samples that need no cut keep their values unchanged.
///
/// It allocates a few small buffers per call: it only runs on pixels the gate lets through.
pub fn tidy_pixel(pixel: &mut PixelSamples, channels: &CompositeChannels) {
    let width = pixel.width;
    // Every depth at which something starts or ends; a volume is cut at those strictly inside it.
    let mut cuts = Vec::with_capacity(2 * pixel.len());
    for s in &pixel.samples {
        cuts.push(s.z);
        if s.is_volume() {
            cuts.push(s.zback);
        }
    }
    cuts.sort_unstable_by(f32::total_cmp);
    cuts.dedup_by(|a, b| a == b);

    let mut pieces = PixelSamples::new(width);
    let mut piece_row = vec![0.0f32; width];
    for (s, sample) in pixel.samples.iter().enumerate() {
        let row = pixel.row(s);
        let first_inside = cuts.partition_point(|&c| c <= sample.z);
        let inside_end = cuts.partition_point(|&c| c < sample.zback);
        if !sample.is_volume() || first_inside >= inside_end {
            pieces.push(*sample, row);
            continue;
        }
        let length = sample.zback as f64 - sample.z as f64;
        let mut front = sample.z;
        let backs = cuts[first_inside..inside_end]
            .iter()
            .copied()
            .chain(std::iter::once(sample.zback));
        for back in backs {
            let fraction = piece_fraction(front as f64, back as f64, length);
            cut_row(row, fraction, channels, &mut piece_row);
            pieces.push(
                Sample {
                    z: front,
                    zback: back,
                    ..*sample
                },
                &piece_row,
            );
            front = back;
        }
    }

    // Pieces of a later sample may lie in front of pieces of an earlier one: restore merge order.
    // The sort is stable, so equal depths keep the order of their sources (input, then index).
    let mut order: Vec<usize> = (0..pieces.len()).collect();
    order.sort_by(|&a, &b| depth_cmp(pieces.samples[a].key(), pieces.samples[b].key()));

    pixel.samples.clear();
    pixel.values.clear();
    let mut group: Vec<&[f32]> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let first = pieces.samples[order[i]];
        let mut j = i + 1;
        // Only volumes with identical intervals merge; coincident points stay separate.
        if first.is_volume() {
            while j < order.len() {
                let next = pieces.samples[order[j]];
                if next.z == first.z && next.zback == first.zback {
                    j += 1;
                } else {
                    break;
                }
            }
        }
        if j - i == 1 {
            pixel.push(first, pieces.row(order[i]));
        } else {
            group.clear();
            group.extend(order[i..j].iter().map(|&p| pieces.row(p)));
            merge_coincident(&group, channels, &mut piece_row);
            pixel.push(first, &piece_row);
        }
        i = j;
    }
}

/// Splitting a volume at a depth: the fraction of a volume of depth `length` that the piece
/// [front, back) covers (its alpha and colour then follow from [`split_alpha`]). An infinitely
/// deep volume (Z = −inf or ZBack = +inf) gives its finite pieces nothing and its infinite
/// pieces everything, so no piece gets NaN from `inf / inf`.
pub fn piece_fraction(front: f64, back: f64, length: f64) -> f64 {
    if length.is_finite() {
        ((back - front) / length).clamp(0.0, 1.0)
    } else if (back - front).is_finite() {
        0.0
    } else {
        1.0
    }
}

/// The values of the piece covering `fraction` of a volume whose values are `row`.
fn cut_row(row: &[f32], fraction: f64, channels: &CompositeChannels, out: &mut [f32]) {
    for (o, v) in out.iter_mut().zip(split_row(row, fraction, channels)) {
        *o = v as f32;
    }
}

/// Splitting a volume's values at a depth: the values of the piece covering `fraction` of a
/// volume whose values are `row`, per composited column, before rounding to f32 (so that a caller
/// scaling them further, like the holdout, rounds once).
pub fn split_row<'a>(
    row: &'a [f32],
    fraction: f64,
    channels: &'a CompositeChannels,
) -> impl Iterator<Item = f64> + 'a {
    channels
        .kinds
        .iter()
        .enumerate()
        .map(move |(k, kind)| match *kind {
            CompositeKind::Alpha => split_alpha(row[k] as f64, fraction).0,
            CompositeKind::Colour { alpha } => {
                let (_, scale) = split_alpha(row[alpha] as f64, fraction);
                row[k] as f64 * scale
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Columns A, R with R attenuated by A.
    fn ar() -> CompositeChannels {
        CompositeChannels {
            names: vec!["A".into(), "R".into()],
            kinds: vec![CompositeKind::Alpha, CompositeKind::Colour { alpha: 0 }],
            alphas: vec![0],
        }
    }

    fn sample(z: f32, zback: f32, input: u32, index: u64) -> Sample {
        Sample {
            z,
            zback,
            input,
            index,
        }
    }

    #[test]
    fn split_alpha_halves_a_volume_of_three_quarters() {
        // (1 - 0.75)^(1/2) = 0.5, so each half has alpha 0.5 and two thirds of the colour.
        let (a, scale) = split_alpha(0.75, 0.5);
        assert!((a - 0.5).abs() < 1e-15);
        assert!((scale - 0.5 / 0.75).abs() < 1e-15);
    }

    #[test]
    fn split_alpha_keeps_precision_for_tiny_alpha_and_fraction() {
        // For a → 0 the piece alpha tends to f·a; a naive 1 - (1-a)^f in f64 loses most digits.
        let (a, scale) = split_alpha(1e-12, 1e-3);
        assert!((a / 1e-15 - 1.0).abs() < 1e-9, "{a}");
        assert!((scale / 1e-3 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn split_alpha_edge_cases() {
        assert_eq!(split_alpha(1.0, 0.25), (1.0, 1.0));
        assert_eq!(split_alpha(0.0, 0.25), (0.0, 0.25));
        assert!((split_alpha(0.3, 1.0).0 - 0.3).abs() < 1e-15);
    }

    #[test]
    fn needs_tidy_only_for_overlaps() {
        assert!(!needs_tidy(&[
            sample(1.0, 1.0, 0, 0),
            sample(1.0, 1.0, 1, 0)
        ]));
        assert!(!needs_tidy(&[
            sample(0.0, 1.0, 0, 0),
            sample(1.0, 2.0, 1, 0)
        ]));
        assert!(needs_tidy(&[
            sample(0.0, 2.0, 0, 0),
            sample(1.0, 1.0, 1, 0)
        ]));
        assert!(needs_tidy(&[
            sample(0.0, 2.0, 0, 0),
            sample(0.0, 2.0, 1, 0)
        ]));
    }

    #[test]
    fn split_pieces_recomposite_to_the_whole() {
        // One volume cut by two points: flattening the volume pieces alone gives the volume back.
        let channels = ar();
        let mut pixel = PixelSamples::new(2);
        pixel.push(sample(0.0, 10.0, 0, 0), &[0.9, 0.6]);
        pixel.push(sample(2.5, 2.5, 1, 0), &[0.0, 0.0]);
        pixel.push(sample(7.0, 7.0, 1, 1), &[0.0, 0.0]);
        tidy_pixel(&mut pixel, &channels);
        let depths: Vec<(f32, f32)> = pixel.samples.iter().map(|s| (s.z, s.zback)).collect();
        assert_eq!(
            depths,
            vec![(0.0, 2.5), (2.5, 2.5), (2.5, 7.0), (7.0, 7.0), (7.0, 10.0)]
        );
        let (mut a, mut r) = (0.0f64, 0.0f64);
        for s in 0..pixel.len() {
            let row = pixel.row(s);
            r += (1.0 - a) * row[1] as f64;
            a += (1.0 - a) * row[0] as f64;
        }
        assert!((a - 0.9).abs() < 1e-6 && (r - 0.6).abs() < 1e-6, "{a} {r}");
        // Pieces remember their source so ids follow them.
        assert!(pixel
            .samples
            .iter()
            .filter(|s| s.is_volume())
            .all(|s| s.input == 0 && s.index == 0));
    }

    #[test]
    fn merged_volume_matches_finely_interleaved_slices() {
        // Independent oracle: two media sharing [0, 1) are the limit of alternating thin slices
        // of each, composited with "over".
        let channels = ar();
        let (a1, c1, a2, c2) = (0.6f64, 0.5f64, 0.3f64, 0.05f64);
        let mut out = [0.0f32; 2];
        merge_coincident(
            &[&[a1 as f32, c1 as f32], &[a2 as f32, c2 as f32]],
            &channels,
            &mut out,
        );
        let n = 200_000;
        let (s1, k1) = split_alpha(a1, 1.0 / n as f64);
        let (s2, k2) = split_alpha(a2, 1.0 / n as f64);
        let (mut a, mut c) = (0.0f64, 0.0f64);
        for i in 0..2 * n {
            let (sa, sc) = if i % 2 == 0 {
                (s1, c1 * k1)
            } else {
                (s2, c2 * k2)
            };
            c += (1.0 - a) * sc;
            a += (1.0 - a) * sa;
        }
        assert!((out[0] as f64 - a).abs() < 1e-6, "{} vs {a}", out[0]);
        assert!((out[1] as f64 - c).abs() < 1e-5, "{} vs {c}", out[1]);
    }

    #[test]
    fn coincident_mix_of_parts_and_wholes() {
        // Half of a medium of alpha .75 has optical depth ln 2: transmittance .5.
        let mut mix = CoincidentMix::default();
        mix.add_part(0.75, 0.5);
        assert!((mix.transmittance() - 0.5).abs() < 1e-15);
        assert!((mix.alpha() - 0.5).abs() < 1e-15);
        // With IN (alpha .5, a unit colour) on top: equal optical depths, so IN's colour weight
        // is half the mixed alpha .75.
        let mut shared = CoincidentMix::default();
        shared.add(0.5, 1.0);
        shared.add_part(0.75, 0.5);
        assert!((shared.colour() - 0.375 / 0.5).abs() < 1e-15);
        // A part of an opaque medium is opaque even at fraction 0 (as split_alpha keeps it).
        let mut opaque = CoincidentMix::default();
        opaque.add_part(1.0, 0.0);
        assert!(opaque.is_opaque() && opaque.transmittance() == 0.0);
        assert!(CoincidentMix::default().is_clear());
        let mut clear = CoincidentMix::default();
        clear.add_part(0.5, 0.0);
        assert!(clear.is_clear() && clear.transmittance() == 1.0);
    }

    #[test]
    fn piece_fraction_of_infinite_volumes() {
        let inf = f64::INFINITY;
        assert_eq!(piece_fraction(1.0, 2.0, 4.0), 0.25);
        assert_eq!(piece_fraction(1.0, 2.0, inf), 0.0);
        assert_eq!(piece_fraction(2.0, inf, inf), 1.0);
        assert_eq!(piece_fraction(-inf, 2.0, inf), 1.0);
    }

    #[test]
    fn merge_coincident_opaque_wins_and_averages() {
        let channels = ar();
        let mut out = [0.0f32; 2];
        merge_coincident(&[&[1.0, 0.2], &[0.5, 0.9]], &channels, &mut out);
        assert_eq!(out, [1.0, 0.2]);
        merge_coincident(&[&[1.0, 0.2], &[1.0, 0.6]], &channels, &mut out);
        assert_eq!(out[0], 1.0);
        assert!((out[1] - 0.4).abs() < 1e-7);
        // Transparent emitters add.
        merge_coincident(&[&[0.0, 0.2], &[0.0, 0.3]], &channels, &mut out);
        assert_eq!(out[0], 0.0);
        assert!((out[1] - 0.5).abs() < 1e-7);
    }
}
