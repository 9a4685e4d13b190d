//! Tidying a pixel where volume samples overlap (docs/architecture.md, "Tidy"): split each volume
//! at every other sample's Z and ZBack strictly inside it, merge volume pieces that cover identical
//! intervals. Coincident points are what tells the two uses apart ([`CoincidentPoints`]):
//! flattening keeps them apart (they composite in merge order, as the flat merge and Nuke do),
//! while a tidy deep output merges them by the same rule as volumes, since OpenEXR's TIDY state
//! allows no two samples with equal (Z, ZBack) ([`tidy_deep_pixel`], [`needs_deep_tidy`]).
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
//! The GPU port (`glsl/include/volume_split.glsl`, shared by `tidy.comp` and `slice.comp`; f32 twin
//! `cpu::tidy`) has its own series for `log1p`/`expm1`, which GLSL lacks, to stay within the
//! tolerances the tests state.

use super::exact_sum::ExactSum;
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

/// True when some two neighbours of `samples` (in merge order) are coincident points: equal Z,
/// both points. Equal keys are neighbours in merge order, so one pass finds them all.
pub fn has_coincident_points(samples: &[Sample]) -> bool {
    samples
        .windows(2)
        .any(|w| w[0].z == w[1].z && !w[0].is_volume() && !w[1].is_volume())
}

/// The gate of a tidy deep output: [`needs_tidy`], or coincident points to merge.
pub fn needs_deep_tidy(samples: &[Sample]) -> bool {
    has_coincident_points(samples) || needs_tidy(samples)
}

/// True when `samples` is in merge order by depth and no volume overlaps a later sample: every
/// volume ends at or before the next sample starts (points may coincide with each other and
/// with a volume's ends). This is what flattening needs, and what [`tidy_pixel`] makes.
pub fn is_split(samples: &[Sample]) -> bool {
    let sorted = samples
        .windows(2)
        .all(|w| !depth_less(w[1].key(), w[0].key()));
    sorted && !needs_tidy(samples)
}

/// True when `samples` is tidy as OpenEXR's `deepImageState` defines it: strictly increasing
/// (Z, ZBack), and no two samples overlap (no coincident points either). This is what
/// [`tidy_deep_pixel`] makes, and what `deepImageState = tidy` promises.
pub fn is_tidy(samples: &[Sample]) -> bool {
    let strictly_sorted = samples
        .windows(2)
        .all(|w| depth_less(w[0].key(), w[1].key()));
    strictly_sorted && !needs_tidy(samples)
}

/// What a tidy does with points at one depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoincidentPoints {
    /// Keep them apart, in merge order: they composite in that order (flat output).
    KeepInOrder,
    /// Merge them into one by [`merge_coincident`], as "Interpreting OpenEXR Deep Pixels" merges
    /// perfectly overlapping samples (a tidy deep output). The merged point is the first one's
    /// sample (its `input` and `index`, so its non-composited channels such as ids).
    Merge,
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
/// length) into `out`, as docs/architecture.md, "Tidy", states: for each alpha column
/// `a = 1 − Π(1 − a_i)`; each colour column `c = w · Σ c_i·v_i` with `u_i = −ln(1 − a_i)`,
/// `v_i = u_i / a_i` (1 when `a_i = 0`) and `w = a / Σu_i` (1 when the sum is 0). Where pieces are
/// opaque in a colour's alpha, they win outright and their colours are averaged. Each column is one
/// [`CoincidentMix`].
pub fn merge_coincident(rows: &[&[f32]], channels: &CompositeChannels, out: &mut [f32]) {
    mix_rows(rows.iter().copied(), channels, out);
}

/// [`merge_coincident`] over any re-iterable sequence of rows.
fn mix_rows<'r>(
    rows: impl Iterator<Item = &'r [f32]> + Clone,
    channels: &CompositeChannels,
    out: &mut [f32],
) {
    for (k, kind) in channels.kinds.iter().enumerate() {
        let alpha_column = match *kind {
            CompositeKind::Alpha => k,
            CompositeKind::Colour { alpha } => alpha,
        };
        let mut mix = CoincidentMix::default();
        for row in rows.clone() {
            mix.add(row[alpha_column] as f64, row[k] as f64);
        }
        out[k] = match kind {
            CompositeKind::Alpha => mix.alpha(),
            CompositeKind::Colour { .. } => mix.colour(),
        } as f32;
    }
}

/// Media that share one interval, mixed by optical depth (docs/architecture.md, "Tidy"): the
/// accumulator behind [`merge_coincident`], for one colour column and its alpha.
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

/// A colourless medium's alpha with `ln(1 − alpha)` taken once, for a medium mixed against many
/// samples (a holdout sample against every piece of IN in its pixel).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clear {
    alpha: f64,
    ln_clear: f64,
}

impl Clear {
    /// The medium of alpha `alpha`.
    pub fn of(alpha: f64) -> Self {
        Clear {
            alpha,
            ln_clear: (-alpha).ln_1p(),
        }
    }
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
        self.add_part_of(&Clear::of(alpha), fraction);
    }

    /// [`Self::add`] of a colourless medium (a holdout's point) whose logarithm is taken once.
    pub fn add_clear(&mut self, medium: &Clear) {
        if medium.alpha >= 1.0 {
            self.opaque_sum += 0.0;
            self.opaque_count += 1;
            return;
        }
        // As `add(alpha, 0.0)`, bit for bit.
        let u = -medium.ln_clear;
        self.optical_depth += u;
        self.weighted += if medium.alpha == 0.0 {
            0.0
        } else {
            0.0 * (u / medium.alpha)
        };
    }

    /// [`Self::add_part`] of a medium whose logarithm is taken once.
    pub fn add_part_of(&mut self, medium: &Clear, fraction: f64) {
        if medium.alpha >= 1.0 {
            self.opaque_count += 1;
        } else {
            self.optical_depth += -(fraction * medium.ln_clear);
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

/// Above this many volumes covering one slab, the sweep of [`tidy_pixel`] mixes them from its
/// running sums ([`RunningMix`]) instead of re-mixing their pieces one by one. At or below it the
/// result is bit for bit what cutting every volume into pieces and merging them gives
/// (the test module keeps that definition, `tidy_pixel_by_pieces`); above it the two agree to a few f32
/// ulps (the running mix skips rounding each piece to f32). Merging tidy inputs never exceeds
/// it unless more than this many inputs overlap at one depth.
pub const EXACT_MIX_LIMIT: usize = 64;

/// Split and merge `pixel`'s samples (in merge order) in place so that no volume overlaps another
/// sample; the result is in merge order ([`is_split`]). Coincident points stay apart, in merge
/// order, as flattening composites them ([`tidy_deep_pixel`] merges them too).
///
/// Pieces keep their source's `input` and `index`, so non-composited channels (ids) still come
/// from the sample they were cut from; a merged piece keeps those of its first contributor in
/// merge order. Samples that need no cut keep their values unchanged.
///
/// The definition is: cut every volume at every depth where a sample starts or ends strictly
/// inside it, then merge the pieces that cover one slab ([`merge_coincident`], pieces in merge
/// order), points kept apart. Building every piece costs (volumes x slabs) when many volumes
/// overlap, so this is a sweep over the sorted boundaries instead: at each boundary the points
/// there, then the slab to the next boundary, mixed from the volumes covering it (an ordered
/// active set, plus exact running sums past [`EXACT_MIX_LIMIT`]). O(n log n) time and O(n)
/// memory for n samples ([`TIDY_BYTES_PER_SAMPLE`]).
///
/// Depths must be numbers where volumes are concerned (a NaN depth makes a point, and readers
/// refuse NaN depths); points at a NaN depth, should any arrive, are kept at the back.
pub fn tidy_pixel(pixel: &mut PixelSamples, channels: &CompositeChannels) {
    tidy_pixel_sweep(
        pixel,
        channels,
        EXACT_MIX_LIMIT,
        CoincidentPoints::KeepInOrder,
    );
}

/// [`tidy_pixel`] for a tidy deep output: also merges coincident points
/// ([`CoincidentPoints::Merge`]), so that the result is tidy as OpenEXR defines it ([`is_tidy`]).
/// A lone point keeps its values bit for bit.
pub fn tidy_deep_pixel(pixel: &mut PixelSamples, channels: &CompositeChannels) {
    tidy_pixel_sweep(pixel, channels, EXACT_MIX_LIMIT, CoincidentPoints::Merge);
}

/// An upper bound on the bytes [`tidy_pixel`] holds per sample of the pixel it tidies, besides
/// 12 bytes per composited column (the output rows: a pixel of n samples tidies into at most
/// 3n): boundaries (8), start and end events (32), point order (8), the active set (32) and
/// output records (3 x 24).
pub const TIDY_BYTES_PER_SAMPLE: u64 = 152;

/// [`tidy_pixel`] with the running-mix threshold as a parameter, so tests can drive both mixes,
/// and what to do with coincident points.
fn tidy_pixel_sweep(
    pixel: &mut PixelSamples,
    channels: &CompositeChannels,
    exact_limit: usize,
    coincident: CoincidentPoints,
) {
    let width = pixel.width;
    let samples = &pixel.samples;
    // Every depth at which something starts or ends: the slabs lie between consecutive ones.
    // Equal depths (-0.0 and 0.0 too) are one boundary, the first in total order kept.
    let mut bounds = Vec::with_capacity(2 * samples.len());
    for s in samples {
        if !s.z.is_nan() {
            bounds.push(s.z);
        }
        if s.is_volume() {
            bounds.push(s.zback);
        }
    }
    bounds.sort_unstable_by(f32::total_cmp);
    bounds.dedup_by(|a, b| a == b);
    let bound_index = |depth: f32| bounds.partition_point(|&c| c < depth);

    // Each volume covers slabs start..end: (slab, sample) pairs sorted by slab.
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    let mut points = Vec::new();
    for (s, sample) in samples.iter().enumerate() {
        if sample.is_volume() {
            starts.push((bound_index(sample.z), s));
            ends.push((bound_index(sample.zback), s));
        } else {
            points.push(s);
        }
    }
    starts.sort_unstable();
    ends.sort_unstable();
    // Points in (Z, ZBack) order, ties in merge order; NaN depths last.
    let point_key = |s: usize| {
        let p = samples[s];
        (p.z, if p.zback.is_nan() { p.z } else { p.zback })
    };
    points.sort_by(|&a, &b| {
        let (ka, kb) = (point_key(a), point_key(b));
        ka.0.is_nan().cmp(&kb.0.is_nan()).then(depth_cmp(ka, kb))
    });

    let mut running = (starts.len() > exact_limit).then(|| RunningMix::new(channels));
    let mut out = PixelSamples::new(width);
    out.samples.reserve(points.len() + bounds.len());
    let mut active = std::collections::BTreeSet::new();
    let mut pieces: Vec<f32> = Vec::new();
    let mut mixed = vec![0.0f32; width];
    let (mut next_start, mut next_end, mut next_point) = (0, 0, 0);
    for (slab, &front) in bounds.iter().enumerate() {
        let first_point = next_point;
        while next_point < points.len() && samples[points[next_point]].z == front {
            next_point += 1;
        }
        let here = &points[first_point..next_point];
        if coincident == CoincidentPoints::Merge && here.len() > 1 {
            // Every point here has Z == front (and ZBack == Z): one perfectly overlapping group,
            // mixed in merge order.
            mix_rows(here.iter().map(|&s| pixel.row(s)), channels, &mut mixed);
            out.push(samples[here[0]], &mixed);
        } else {
            for &s in here {
                out.push(samples[s], pixel.row(s));
            }
        }
        while next_end < ends.len() && ends[next_end].0 == slab {
            let s = ends[next_end].1;
            active.remove(&s);
            if let Some(mix) = &mut running {
                mix.update(&samples[s], pixel.row(s), -1);
            }
            next_end += 1;
        }
        while next_start < starts.len() && starts[next_start].0 == slab {
            let s = starts[next_start].1;
            active.insert(s);
            if let Some(mix) = &mut running {
                mix.update(&samples[s], pixel.row(s), 1);
            }
            next_start += 1;
        }
        let Some(&first) = active.first() else {
            continue;
        };
        let back = bounds[slab + 1];
        let piece = |s: usize| {
            let sample = samples[s];
            // A volume with no boundary strictly inside stays as it is, bit for bit.
            let whole = sample.z == front && sample.zback == back;
            let front = if sample.z == front { sample.z } else { front };
            let back = if sample.zback == back {
                sample.zback
            } else {
                back
            };
            (
                Sample {
                    z: front,
                    zback: back,
                    ..sample
                },
                whole,
            )
        };
        let (first_piece, _) = piece(first);
        let infinite = !(front as f64 - back as f64).is_finite();
        if active.len() == 1 {
            let (cut, whole) = piece(first);
            if whole {
                out.push(cut, pixel.row(first));
            } else {
                cut_piece(
                    &samples[first],
                    &cut,
                    pixel.row(first),
                    channels,
                    &mut mixed,
                );
                out.push(cut, &mixed);
            }
        } else if active.len() <= exact_limit || infinite || running.is_none() {
            // As merging the cut pieces does: each piece rounded to f32, mixed in merge order.
            pieces.clear();
            for &s in &active {
                let (cut, whole) = piece(s);
                if whole {
                    pieces.extend_from_slice(pixel.row(s));
                } else {
                    cut_piece(&samples[s], &cut, pixel.row(s), channels, &mut mixed);
                    pieces.extend_from_slice(&mixed);
                }
            }
            if width > 0 {
                mix_rows(pieces.chunks_exact(width), channels, &mut mixed);
            }
            out.push(first_piece, &mixed);
        } else if let Some(mix) = &mut running {
            mix.slab(back as f64 - front as f64, &mut mixed);
            out.push(first_piece, &mixed);
        }
    }
    for &s in &points[next_point..] {
        out.push(samples[s], pixel.row(s));
    }
    *pixel = out;
}

/// The values of piece `cut` of volume `source` whose values are `row`, into `out`.
fn cut_piece(
    source: &Sample,
    cut: &Sample,
    row: &[f32],
    channels: &CompositeChannels,
    out: &mut [f32],
) {
    let length = source.zback as f64 - source.z as f64;
    let fraction = piece_fraction(cut.z as f64, cut.zback as f64, length);
    cut_row(row, fraction, channels, out);
}

/// The mix of every volume covering the sweep's current depth, kept as exact sums over those
/// volumes of per-depth densities, so a slab of any width is mixed in O(columns): the running
/// form of [`merge_coincident`] for slabs covered by more than [`EXACT_MIX_LIMIT`] volumes.
///
/// A volume of length L and alpha a (`u = −ln(1 − a)`) puts optical depth `w·u/L` into a slab of
/// width w and colour weight `w·c·v/L` (`v = u/a`, 1 when a = 0): the limit of its piece's
/// [`split_alpha`] values, without rounding the piece to f32. Opaque volumes (a ≥ 1) make every
/// slab they cover opaque, with the mean of their colours, as [`CoincidentMix`] does. Only finite
/// slabs use it: in an infinite slab the sweep mixes the pieces themselves.
struct RunningMix<'c> {
    channels: &'c CompositeChannels,
    /// Per column: Σ u/L over the non-opaque volumes, taken from the column's alpha.
    depth: Vec<ExactSum>,
    /// Per column: Σ c·v/L over the non-opaque volumes (colour columns only).
    weighted: Vec<ExactSum>,
    /// Per column: Σ c over the opaque volumes (colour columns only).
    opaque_sum: Vec<ExactSum>,
    /// Per column: how many volumes are opaque in its alpha.
    opaque_count: Vec<i64>,
}

impl<'c> RunningMix<'c> {
    fn new(channels: &'c CompositeChannels) -> Self {
        let n = channels.len();
        RunningMix {
            channels,
            depth: vec![ExactSum::default(); n],
            weighted: vec![ExactSum::default(); n],
            opaque_sum: vec![ExactSum::default(); n],
            opaque_count: vec![0; n],
        }
    }

    /// Add (`direction` 1) or remove (−1) volume `sample` with values `row`. The terms are a
    /// function of the volume alone, so a removal takes back exactly what the addition put in.
    fn update(&mut self, sample: &Sample, row: &[f32], direction: i64) {
        let length = sample.zback as f64 - sample.z as f64;
        for (k, kind) in self.channels.kinds.iter().enumerate() {
            let alpha_column = match *kind {
                CompositeKind::Alpha => k,
                CompositeKind::Colour { alpha } => alpha,
            };
            let alpha = row[alpha_column] as f64;
            let colour = row[k] as f64;
            let is_colour = matches!(kind, CompositeKind::Colour { .. });
            let add = |sum: &mut ExactSum, x: f64| {
                if direction > 0 {
                    sum.add(x)
                } else {
                    sum.remove(x)
                }
            };
            if alpha >= 1.0 {
                self.opaque_count[k] += direction;
                if is_colour {
                    add(&mut self.opaque_sum[k], colour);
                }
                continue;
            }
            let u = -(-alpha).ln_1p();
            add(&mut self.depth[k], u / length);
            if is_colour {
                let v = if alpha == 0.0 { 1.0 } else { u / alpha };
                add(&mut self.weighted[k], colour * v / length);
            }
        }
    }

    /// The mixed values of the slab of width `width` the current volumes cover, into `out`.
    fn slab(&mut self, width: f64, out: &mut [f32]) {
        for (k, kind) in self.channels.kinds.iter().enumerate() {
            let opaque = self.opaque_count[k] > 0;
            out[k] = match kind {
                CompositeKind::Alpha if opaque => 1.0,
                CompositeKind::Colour { .. } if opaque => {
                    self.opaque_sum[k].value() / self.opaque_count[k] as f64
                }
                _ => {
                    let depth = width * self.depth[k].value();
                    let alpha = -(-depth).exp_m1();
                    match kind {
                        CompositeKind::Alpha => alpha,
                        CompositeKind::Colour { .. } => {
                            let w = if depth == 0.0 { 1.0 } else { alpha / depth };
                            w * (width * self.weighted[k].value())
                        }
                    }
                }
            } as f32;
        }
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
    channels.kinds.iter().enumerate().scan(
        None,
        move |last: &mut Option<(usize, (f64, f64))>, (k, kind)| {
            // The split of the alpha column used last: colours sharing an alpha (R, G and B
            // with A) and the alpha itself reuse it rather than each taking a logarithm and an
            // exponential (`split_alpha` is a pure function, so the values are the same).
            let column = match *kind {
                CompositeKind::Alpha => k,
                CompositeKind::Colour { alpha } => alpha,
            };
            let split = match *last {
                Some((c, split)) if c == column => split,
                _ => {
                    let split = split_alpha(row[column] as f64, fraction);
                    *last = Some((column, split));
                    split
                }
            };
            Some(match *kind {
                CompositeKind::Alpha => split.0,
                CompositeKind::Colour { .. } => row[k] as f64 * split.1,
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::composite::flatten::flatten_pixel;

    // The definition the sweep is checked against: the tidy as it was before the sweep, which
    // builds every cut piece (quadratic when many volumes overlap).
    //
    /// Split and merge `pixel`'s samples (in merge order) in place so that no two overlap; the
    /// result is in merge order and split ([`is_split`]), and tidy ([`is_tidy`]) when coincident
    /// points merge too.
    ///
    /// Pieces keep their source's `input` and `index`, so non-composited channels (ids) still come
    /// from the sample they were cut from; a merged piece keeps those of its first contributor in
    /// merge order. Samples that need no cut keep their values unchanged.
    ///
    /// It allocates a few small buffers per call: it only runs on pixels the gate lets through.
    pub fn tidy_pixel_by_pieces(
        pixel: &mut PixelSamples,
        channels: &CompositeChannels,
        coincident: CoincidentPoints,
    ) {
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
            // Volumes with identical intervals merge; coincident points only when asked to.
            if first.is_volume() || coincident == CoincidentPoints::Merge {
                while j < order.len() {
                    let next = pieces.samples[order[j]];
                    let same_kind = next.is_volume() == first.is_volume();
                    if same_kind && next.z == first.z && next.zback == first.zback {
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

    /// A xorshift generator: the pixels below are reproducible from their seed.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        fn unit(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 24) as f32
        }
    }

    /// Columns A, R (by A), GA, G (by GA).
    fn two_alphas() -> CompositeChannels {
        CompositeChannels {
            names: vec!["A".into(), "R".into(), "GA".into(), "G".into()],
            kinds: vec![
                CompositeKind::Alpha,
                CompositeKind::Colour { alpha: 0 },
                CompositeKind::Alpha,
                CompositeKind::Colour { alpha: 2 },
            ],
            alphas: vec![0, 2],
        }
    }

    /// A random pixel in merge order: depths drawn from a few values (ties, coincident volumes,
    /// points inside volumes, signed zeros, infinite Z and ZBack), alphas 0, 1, tiny, or in
    /// (0, `max_alpha`); `max_alpha` above 1 also gives alphas over 1.
    fn random_pixel(rng: &mut Rng, max_samples: u64, max_alpha: f32) -> PixelSamples {
        const DEPTHS: [f32; 9] = [-0.0, 0.0, 0.5, 1.0, 1.25, 2.0, 3.0, 7.5, 1e-30];
        let depth = |rng: &mut Rng| match rng.below(20) {
            0 => f32::INFINITY,
            1 => f32::NEG_INFINITY,
            2 => rng.unit() * 8.0,
            _ => DEPTHS[rng.below(DEPTHS.len() as u64) as usize],
        };
        let alpha = |rng: &mut Rng| match rng.below(8) {
            0 => 0.0,
            1 => 1.0,
            2 => 1e-7 * rng.unit(),
            _ => rng.unit() * max_alpha,
        };
        let n = rng.below(max_samples + 1);
        let mut samples = Vec::new();
        for index in 0..n {
            let z = depth(rng);
            let zback = if rng.below(3) == 0 { z } else { depth(rng) };
            let (z, zback) = crate::vocab::depth_key(z, zback);
            let input = rng.below(3) as u32;
            let row = [alpha(rng), rng.unit() * 2.0 - 0.5, alpha(rng), rng.unit()];
            samples.push((sample(z, zback, input, index), row));
        }
        samples.sort_by(|a, b| depth_cmp(a.0.key(), b.0.key()));
        let mut pixel = PixelSamples::new(4);
        for (s, row) in &samples {
            pixel.push(*s, row);
        }
        pixel
    }

    /// The pixel's samples and values as bits, for bit-for-bit comparison.
    fn bits(pixel: &PixelSamples) -> Vec<(u32, u32, u32, u64, Vec<u32>)> {
        (0..pixel.len())
            .map(|s| {
                let p = pixel.samples[s];
                let row = pixel.row(s).iter().map(|v| v.to_bits()).collect();
                (p.z.to_bits(), p.zback.to_bits(), p.input, p.index, row)
            })
            .collect()
    }

    #[test]
    fn sweep_is_bit_identical_to_cutting_every_piece() {
        let channels = two_alphas();
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let (mut tidied, mut merged_points) = (0, 0);
        for case in 0..30_000 {
            let pixel = random_pixel(&mut rng, 24, 1.5);
            let mut want = pixel.clone();
            tidy_pixel_by_pieces(&mut want, &channels, CoincidentPoints::KeepInOrder);
            let mut got = pixel.clone();
            tidy_pixel(&mut got, &channels);
            assert_eq!(bits(&got), bits(&want), "case {case}: {pixel:?}");
            assert!(is_split(&got.samples), "case {case}");
            // The deep output's tidy: the same with coincident points merged, and tidy as
            // OpenEXR defines it.
            let mut want_deep = pixel.clone();
            tidy_pixel_by_pieces(&mut want_deep, &channels, CoincidentPoints::Merge);
            let mut got_deep = pixel.clone();
            tidy_deep_pixel(&mut got_deep, &channels);
            assert_eq!(bits(&got_deep), bits(&want_deep), "case {case}: {pixel:?}");
            assert!(is_tidy(&got_deep.samples), "case {case}: {got_deep:?}");
            tidied += needs_tidy(&pixel.samples) as usize;
            merged_points += has_coincident_points(&pixel.samples) as usize;
            assert_eq!(
                needs_deep_tidy(&pixel.samples),
                !is_tidy(&pixel.samples),
                "case {case}"
            );
        }
        // The generator must exercise the tidy, not just pass tidy pixels through.
        assert!(tidied > 20_000, "{tidied}");
        assert!(merged_points > 5_000, "{merged_points}");
    }

    #[test]
    fn coincident_points_merge_only_for_deep_output() {
        // Two points at depth 2 (alphas .5 and .5, colours .3 and .1) between a volume ending
        // there and one starting there: flattening keeps them apart, the deep tidy merges them
        // into alpha 1 - .5 * .5 and colour w (c1 v1 + c2 v2) = (.3 + .1) / 2 (equal optical
        // depths): the mean of the two orders' "over" (.35 and .25).
        let channels = ar();
        let mut pixel = PixelSamples::new(2);
        pixel.push(sample(1.0, 2.0, 0, 0), &[0.25, 0.125]);
        pixel.push(sample(2.0, 2.0, 0, 1), &[0.5, 0.3]);
        pixel.push(sample(-0.0, -0.0, 1, 0), &[0.0, 0.0]);
        pixel.push(sample(2.0, 2.0, 1, 1), &[0.5, 0.1]);
        pixel.push(sample(2.0, 3.0, 2, 0), &[0.5, 0.5]);
        pixel.push(sample(0.0, 0.0, 2, 1), &[0.5, 0.2]);
        let mut sorted = PixelSamples::new(2);
        let mut order: Vec<usize> = (0..pixel.len()).collect();
        order.sort_by(|&a, &b| depth_cmp(pixel.samples[a].key(), pixel.samples[b].key()));
        for &s in &order {
            sorted.push(pixel.samples[s], pixel.row(s));
        }
        assert!(!needs_tidy(&sorted.samples) && needs_deep_tidy(&sorted.samples));
        let mut flat = sorted.clone();
        tidy_pixel(&mut flat, &channels);
        assert_eq!(flat, sorted);
        let mut deep = sorted.clone();
        tidy_deep_pixel(&mut deep, &channels);
        let keys: Vec<(f32, f32, u32, u64)> = deep
            .samples
            .iter()
            .map(|s| (s.z, s.zback, s.input, s.index))
            .collect();
        // -0.0 and 0.0 are one depth: the first point in merge order (input 1) stands for both.
        assert_eq!(
            keys,
            vec![
                (-0.0, -0.0, 1, 0),
                (1.0, 2.0, 0, 0),
                (2.0, 2.0, 0, 1),
                (2.0, 3.0, 2, 0)
            ]
        );
        assert!(deep.samples[0].z.is_sign_negative());
        // A transparent point adds nothing to the point it merges with.
        assert!((deep.row(0)[0] - 0.5).abs() < 1e-7 && (deep.row(0)[1] - 0.2).abs() < 1e-7);
        assert_eq!(deep.row(1), &[0.25, 0.125]);
        assert!((deep.row(2)[0] - 0.75).abs() < 1e-7, "{:?}", deep.row(2));
        assert!((deep.row(2)[1] - 0.3).abs() < 1e-7, "{:?}", deep.row(2));
        assert_eq!(deep.row(3), &[0.5, 0.5]);
        assert!(is_tidy(&deep.samples) && !is_tidy(&flat.samples) && is_split(&flat.samples));
    }

    #[test]
    fn merged_points_flatten_the_same_in_either_order() {
        // The merge of coincident points does not depend on their order, unlike "over": the
        // deep tidy of a pair flattens to the same values whichever comes first.
        let channels = two_alphas();
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for case in 0..5_000 {
            let row = |rng: &mut Rng| [rng.unit(), rng.unit(), rng.unit() * 0.999, rng.unit()];
            let (a, b) = (row(&mut rng), row(&mut rng));
            let flattened = |first: &[f32; 4], second: &[f32; 4]| {
                let mut pixel = PixelSamples::new(4);
                pixel.push(sample(1.0, 1.0, 0, 0), first);
                pixel.push(sample(1.0, 1.0, 1, 0), second);
                tidy_deep_pixel(&mut pixel, &channels);
                assert_eq!(pixel.len(), 1);
                flatten_pixel(&pixel, &channels).values
            };
            let (ab, ba) = (flattened(&a, &b), flattened(&b, &a));
            for (x, y) in ab.iter().zip(&ba) {
                assert!((x - y).abs() <= 1e-6, "case {case}: {ab:?} vs {ba:?}");
            }
            // Alpha is 1 - (1 - a1)(1 - a2).
            let alpha = 1.0 - (1.0 - a[0] as f64) * (1.0 - b[0] as f64);
            assert!((ab[0] as f64 - alpha).abs() < 1e-6, "case {case}");
        }
    }

    #[test]
    fn hostile_values_and_depths_never_panic() {
        // Values a corrupt or hostile file can hold (NaN, infinities, negative and huge alphas
        // and colours) at extreme depths: both mixes must finish with a tidy pixel, and the
        // exact one still equals cutting every piece, NaN payloads included.
        const VALUES: [f32; 10] = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -1.0,
            2.0,
            1e38,
            -1e38,
            1e-45,
            0.999_999_94,
            0.5,
        ];
        const DEPTHS: [f32; 8] = [
            f32::NEG_INFINITY,
            -f32::MAX,
            -0.0,
            1e-45,
            2e-45,
            1.0,
            f32::MAX,
            f32::INFINITY,
        ];
        let channels = two_alphas();
        let mut rng = Rng(0xdead_beef_cafe_f00d);
        for case in 0..20_000 {
            let mut samples = Vec::new();
            for index in 0..rng.below(12) {
                let z = DEPTHS[rng.below(8) as usize];
                let zback = DEPTHS[rng.below(8) as usize];
                let (z, zback) = crate::vocab::depth_key(z, zback);
                let row: Vec<f32> = (0..4).map(|_| VALUES[rng.below(10) as usize]).collect();
                samples.push((sample(z, zback, 0, index), row));
            }
            samples.sort_by(|a, b| depth_cmp(a.0.key(), b.0.key()));
            let mut pixel = PixelSamples::new(4);
            for (s, row) in &samples {
                pixel.push(*s, row);
            }
            for (coincident, tidy_check) in [
                (
                    CoincidentPoints::KeepInOrder,
                    is_split as fn(&[Sample]) -> bool,
                ),
                (CoincidentPoints::Merge, is_tidy),
            ] {
                let mut want = pixel.clone();
                tidy_pixel_by_pieces(&mut want, &channels, coincident);
                let mut got = pixel.clone();
                tidy_pixel_sweep(&mut got, &channels, EXACT_MIX_LIMIT, coincident);
                assert_eq!(bits(&got), bits(&want), "case {case}: {pixel:?}");
                let mut running = pixel.clone();
                tidy_pixel_sweep(&mut running, &channels, 0, coincident);
                assert_eq!(running.samples, want.samples, "case {case}");
                assert!(tidy_check(&running.samples), "case {case}");
            }
        }
    }

    #[test]
    fn running_mix_agrees_with_cutting_every_piece() {
        // With no exact limit, every slab covered by two or more volumes comes from the running
        // sums. Same samples, same sources; values within a few f32 ulps of the pieces' mix
        // (which rounds each piece to f32 first), and so the flattened pixel.
        let channels = two_alphas();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut mixed_slabs = 0;
        for case in 0..20_000 {
            let pixel = random_pixel(&mut rng, 24, 0.99);
            let mut want = pixel.clone();
            tidy_pixel_by_pieces(&mut want, &channels, CoincidentPoints::KeepInOrder);
            let mut got = pixel.clone();
            tidy_pixel_sweep(&mut got, &channels, 0, CoincidentPoints::KeepInOrder);
            assert_eq!(got.samples, want.samples, "case {case}");
            for (g, w) in got.values.iter().zip(&want.values) {
                let close = (g - w).abs() <= 2e-5 * w.abs().max(1.0) || (g.is_nan() && w.is_nan());
                assert!(close, "case {case}: {g} vs {w}: {pixel:?}");
            }
            let (fg, fw) = (
                flatten_pixel(&got, &channels),
                flatten_pixel(&want, &channels),
            );
            for (g, w) in fg.values.iter().zip(&fw.values) {
                assert!((g - w).abs() <= 2e-5, "case {case}: flat {g} vs {w}");
            }
            mixed_slabs += (got.values != want.values) as usize;
        }
        // The running mix really ran (and differs in the last bits somewhere).
        assert!(mixed_slabs > 1000, "{mixed_slabs}");
    }

    #[test]
    fn many_overlapping_volumes_tidy_fast_and_match_the_closed_form() {
        // 2^17 volumes over 64 distinct depths: cutting every piece would make 2^22 of them and
        // mix 2^21 in one slab; the sweep adds and removes each volume once. Every volume has
        // the same unpremultiplied colour k, so the flattened pixel is alpha 1 − Π(1 − a_i) and
        // colour k·alpha, whatever the cuts (splitting and mixing keep optical depth).
        let channels = ar();
        let n = 1 << 17;
        let (a, k) = (1e-5f32, 0.75f32);
        let mut rng = Rng(7);
        let mut volumes: Vec<(f32, f32)> = (0..n)
            .map(|_| {
                let z = rng.below(63) as f32;
                (z, z + 1.0 + rng.below(63 - z as u64) as f32)
            })
            .collect();
        volumes.sort_by(|x, y| depth_cmp(*x, *y));
        let mut pixel = PixelSamples::new(2);
        for (index, &(z, zback)) in volumes.iter().enumerate() {
            pixel.push(sample(z, zback, 0, index as u64), &[a, k * a]);
        }
        tidy_pixel(&mut pixel, &channels);
        assert!(is_tidy(&pixel.samples));
        assert!(pixel.len() <= 63, "{} slabs", pixel.len());
        let flat = flatten_pixel(&pixel, &channels);
        let alpha = -((n as f64) * (-(a as f64)).ln_1p()).exp_m1();
        assert!(
            (flat.values[0] as f64 - alpha).abs() < 1e-5,
            "{flat:?} vs {alpha}"
        );
        assert!(
            (flat.values[1] as f64 - k as f64 * alpha).abs() < 1e-5,
            "{flat:?}"
        );
    }
}
