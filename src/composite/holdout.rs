//! Holding one deep image out by another (`deepmerge holdout IN HOLDOUT -o OUT [--cull]`).
//!
//! [`HoldoutMode::Attenuate`] is a true holdout: every sample of IN is scaled by how much of it
//! would still be seen through HOLDOUT if the two were merged, its share of the merge: seen
//! through IN's own samples in front of it, the held-out sample adds to the picture what it adds
//! to the merge of IN and HOLDOUT (`tests/holdout.rs` checks this by brute force). It is built
//! from the tidy's two primitives ([`super::tidy`]: splitting a volume at a depth, mixing media
//! that share an interval), so it follows the merge's model exactly, infinitely deep volumes
//! included. Per alpha column (A, or RA/GA/BA for the colours that use them):
//! - IN's volumes are cut at holdout boundaries strictly inside them, as the tidy would cut them;
//! - holdout material that sorts before a piece of IN in merge order (docs/architecture.md, "Depth
//!   order": by (Z, ZBack), exact ties to IN, the first input) multiplies it by its transmittance:
//!   `1 − a` for a point, `(1 − a)^f` for the part of a volume in front, covering the fraction `f`
//!   of it. So a point holds out what lies behind it and a volume piece starting at its depth, but
//!   not a point at its depth;
//! - where holdout volumes share a piece's interval, IN keeps its share of the mixed medium:
//!   the mix's colour with IN as a unit colour, `(u1 / a1) · a_mix / (u1 + u2 + …)` (the colour
//!   weight of the coincident volume merge), with opaque media winning outright (opaque ones
//!   share equally);
//! - samples whose every factor is exactly 0 are dropped, as they add nothing.
//!
//! One case cannot follow the merge: a holdout volume infinite at both ends in front of an IN
//! point at +inf. The tidy gives each infinite piece of such a volume all of it, so the merge's
//! alpha there grows with every cut it makes (at IN's other samples too); the holdout takes the
//! volume once, as an uncut merge would.
//!
//! [`HoldoutMode::Cull`] keeps IN's samples unchanged and drops those that start behind the
//! holdout's opaque depth: the Z of the holdout sample (in merge order) at which its accumulated
//! alpha reaches 1 in every alpha column. A volume that straddles that depth is kept whole.
//! (OpenImageIO's `deep_holdout` differs in two ways: it looks for a single sample with alpha of
//! at least 1 rather than accumulating, and culls behind that sample's ZBack rather than its Z;
//! an opaque medium is opaque from its front, so samples starting inside it are hidden.)
//!
//! Output has IN's data window, channels and ids; untouched samples keep their values bit-exactly.

use super::merge::read_sample;
use super::order::{sort_samples, SortPolicy};
use super::pixel::{CompositeChannels, CompositeKind};
use super::tidy::{piece_fraction, split_row, Clear, CoincidentMix};
use crate::deep::{ChannelRole, DeepImage, DeepState, Plane};
use crate::error::Result;
use crate::vocab::{depth_less, Sample};
use rayon::prelude::*;

/// What a holdout does to IN's samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HoldoutMode {
    /// Scale each sample by the holdout's transmittance at its depth (a true holdout).
    #[default]
    Attenuate,
    /// Drop samples behind the holdout's opaque depth; keep the rest unchanged.
    Cull,
}

/// One holdout sample as the holdout needs it: its depth and its alpha per IN alpha column.
struct HoldoutSample {
    z: f32,
    zback: f32,
    alphas: Vec<f64>,
    /// Per alpha column, the medium with its logarithm taken once: a holdout sample is mixed
    /// against every piece of IN in its pixel.
    media: Vec<Clear>,
}

impl HoldoutSample {
    fn is_volume(&self) -> bool {
        self.zback > self.z
    }
}

/// Hold `input` out by `holdout` pixel by pixel (absolute pixel coordinates; holdout pixels
/// outside IN's data window are ignored, IN pixels outside the holdout's are unchanged).
/// Both inputs are sorted per pixel unless their `deepImageState` says they are sorted.
pub fn holdout(input: &DeepImage, holdout: &DeepImage, mode: HoldoutMode) -> Result<DeepImage> {
    input.check_depths()?;
    holdout.check_depths()?;
    let channels = CompositeChannels::of(&[input]);
    let sources = channels.sources_in(input);
    // For each of IN's alpha columns, where the holdout's matching alpha comes from.
    let holdout_sources: Vec<Option<usize>> = channels.sources_in(holdout);

    // Pixels are independent: runs of pixels are held out in parallel and joined in order, so
    // the result is the serial walk's. Runs of pixels, not rows: a graph's bands can be a few
    // rows tall, and whole rows then made one task of a band.
    let pixels = input.pixel_count();
    let pieces: Vec<Held> = (0..pixels.div_ceil(PIXELS_PER_TASK))
        .into_par_iter()
        .map(|task| {
            let first = task * PIXELS_PER_TASK;
            let end = (first + PIXELS_PER_TASK).min(pixels);
            hold_pixels(
                first..end,
                input,
                holdout,
                mode,
                &channels,
                &sources,
                &holdout_sources,
            )
        })
        .collect();
    let mut counts = Vec::with_capacity(input.pixel_count());
    let mut kept: Vec<Kept> = Vec::with_capacity(input.sample_count());
    let mut values: Vec<f32> = Vec::new();
    for piece in pieces {
        counts.extend(piece.counts);
        // A piece's value rows are numbered from its own start.
        let base = (values.len() / stride_of(&channels)) as u32;
        kept.extend(piece.kept.into_iter().map(|k| Kept {
            row: k.row.map(|r| r + base),
            ..k
        }));
        values.extend(piece.values);
    }

    let stride = stride_of(&channels);
    let planes = input
        .channels
        .par_iter()
        .enumerate()
        .map(|(c, channel)| {
            let column = channels.names.iter().position(|n| n == &channel.name);
            let mut plane = Plane::with_capacity(channel.sample_type, kept.len());
            for k in &kept {
                let s = &k.sample;
                match (k.row, channel.role) {
                    (Some(_), ChannelRole::Z) => plane.push_f32(s.z),
                    (Some(_), ChannelRole::ZBack) => plane.push_f32(s.zback),
                    (Some(r), _) if column.is_some() => {
                        plane.push_f32(values[r as usize * stride + column.unwrap()])
                    }
                    _ => plane.push_from(&input.planes[c], s.index as usize),
                }
            }
            plane
        })
        .collect();
    let state = match input.state {
        // Cutting IN's volumes at holdout boundaries keeps non-overlapping samples apart.
        DeepState::Tidy | DeepState::NonOverlapping => DeepState::Tidy,
        _ => DeepState::Sorted,
    };
    DeepImage::from_counts(
        input.display_window,
        input.data_window,
        input.channels.clone(),
        &counts,
        planes,
        state,
    )
}

/// Pixels a task holds out at a time (about a row of a 2K image).
const PIXELS_PER_TASK: usize = 2048;

/// One output sample: the source sample (with new depths where it was cut) and, for a split or
/// scaled one, the row of its new values (one per composited column) in [`Held::values`].
#[derive(Clone, Copy)]
struct Kept {
    sample: Sample,
    row: Option<u32>,
}

/// Per-pixel sample counts and the output samples of a run of pixels, with the value rows of
/// the ones that changed (held flat: an allocation per sample cost more than the holdout's
/// arithmetic).
#[derive(Default)]
struct Held {
    counts: Vec<u32>,
    kept: Vec<Kept>,
    values: Vec<f32>,
}

/// Values per row of [`Held::values`] (at least 1, so rows stay numbered).
fn stride_of(channels: &CompositeChannels) -> usize {
    channels.kinds.len().max(1)
}

/// What [`attenuate_sample`] reuses from sample to sample.
#[derive(Default)]
struct Scratch {
    cuts: Vec<f32>,
    split: Vec<f64>,
    factors: Vec<f64>,
}

/// [`holdout`] over the pixels `pixels` of `input`.
fn hold_pixels(
    pixels: std::ops::Range<usize>,
    input: &DeepImage,
    holdout: &DeepImage,
    mode: HoldoutMode,
    channels: &CompositeChannels,
    sources: &[Option<usize>],
    holdout_sources: &[Option<usize>],
) -> Held {
    let in_depth = input.depth_channels();
    let ho_depth = holdout.depth_channels();
    let mut held = Held {
        counts: Vec::with_capacity(pixels.len()),
        ..Held::default()
    };
    let mut in_samples = Vec::new();
    let mut order = Vec::new();
    // Holdout samples are reused from pixel to pixel (their alpha vectors with them): the
    // pixel's are the first `ho_len`.
    let mut ho_samples: Vec<HoldoutSample> = Vec::new();
    let mut row: Vec<f32> = Vec::new();
    let mut scratch = Scratch::default();
    for p in pixels {
        let (x, y) = input.data_window.coords_of(p);
        ordered(input, 0, p, in_depth, &mut in_samples);
        let mut ho_len = 0;
        if let Some(hp) = holdout.pixel_index(x, y) {
            ordered(holdout, 1, hp, ho_depth, &mut order);
            for s in &order {
                if ho_len == ho_samples.len() {
                    ho_samples.push(HoldoutSample {
                        z: 0.0,
                        zback: 0.0,
                        alphas: Vec::new(),
                        media: Vec::new(),
                    });
                }
                let h = &mut ho_samples[ho_len];
                h.z = s.z;
                h.zback = s.zback;
                h.alphas.clear();
                h.alphas.extend(channels.alphas.iter().map(|&k| {
                    holdout_sources[k]
                        .map_or(0.0, |c| holdout.planes[c].get_f32(s.index as usize) as f64)
                }));
                h.media.clear();
                h.media.extend(h.alphas.iter().map(|&a| Clear::of(a)));
                ho_len += 1;
            }
        }
        let ho_samples = &ho_samples[..ho_len];
        let before = held.kept.len();
        match mode {
            HoldoutMode::Cull => {
                let opaque = opaque_depth(ho_samples, channels.alphas.len());
                held.kept.extend(
                    in_samples
                        .iter()
                        .filter(|s| opaque.is_none_or(|d| s.z <= d))
                        .map(|s| Kept {
                            sample: *s,
                            row: None,
                        }),
                );
            }
            HoldoutMode::Attenuate => {
                for s in &in_samples {
                    row.clear();
                    row.extend(
                        sources.iter().map(|src| {
                            src.map_or(0.0, |c| input.planes[c].get_f32(s.index as usize))
                        }),
                    );
                    attenuate_sample(s, &row, ho_samples, channels, &mut scratch, &mut held);
                }
            }
        }
        held.counts.push((held.kept.len() - before) as u32);
    }
    held
}

/// Pixel `p`'s samples in merge order (sorted unless the header says they are).
fn ordered(
    image: &DeepImage,
    input: u32,
    p: usize,
    depth: (Option<usize>, Option<usize>),
    out: &mut Vec<Sample>,
) {
    out.clear();
    out.extend(
        image
            .range(p)
            .map(|index| read_sample(image, depth, input, index)),
    );
    if SortPolicy::Auto.sorts(image.state) {
        sort_samples(out);
    }
}

/// The Z at which the holdout's accumulated alpha reaches 1 in every alpha column, if it does.
fn opaque_depth(holdout: &[HoldoutSample], alpha_columns: usize) -> Option<f32> {
    let mut accumulated = vec![0.0f64; alpha_columns];
    for h in holdout {
        for (acc, &a) in accumulated.iter_mut().zip(&h.alphas) {
            *acc += (1.0 - *acc) * a.min(1.0);
        }
        if alpha_columns > 0 && accumulated.iter().all(|&a| a >= 1.0) {
            return Some(h.z);
        }
    }
    None
}

/// Cut IN sample `s` (values `row`, one per composited column) at holdout boundaries strictly
/// inside it, scale each piece by the holdout's attenuation, and append the pieces that remain.
fn attenuate_sample(
    s: &Sample,
    row: &[f32],
    holdout: &[HoldoutSample],
    channels: &CompositeChannels,
    scratch: &mut Scratch,
    out: &mut Held,
) {
    let cuts = &mut scratch.cuts;
    cuts.clear();
    if s.is_volume() {
        for h in holdout {
            for d in [h.z, h.zback] {
                if d > s.z && d < s.zback {
                    cuts.push(d);
                }
            }
        }
        cuts.sort_unstable_by(f32::total_cmp);
        cuts.dedup();
    }
    let length = s.zback as f64 - s.z as f64;
    let stride = stride_of(channels);
    let mut front = s.z;
    for i in 0..=cuts.len() {
        let back = if s.is_volume() {
            cuts.get(i).copied().unwrap_or(s.zback)
        } else {
            s.z
        };
        let piece = Sample {
            z: front,
            zback: back,
            ..*s
        };
        // The tidy's split, so that pieces of infinitely deep volumes get fractions, not NaN.
        let fraction = if cuts.is_empty() {
            1.0
        } else {
            piece_fraction(front as f64, back as f64, length)
        };
        // The piece's values, split only when needed: a piece nothing touches keeps its own.
        let values = &mut scratch.split;
        values.clear();
        let split = |values: &mut Vec<f64>| {
            if values.is_empty() {
                values.extend(split_row(row, fraction, channels));
            }
        };
        // Per alpha column: the factor the holdout leaves of this piece.
        let factors = &mut scratch.factors;
        factors.clear();
        for (j, &k) in channels.alphas.iter().enumerate() {
            let piece_alpha = || {
                split(values);
                values[k]
            };
            factors.push(holdout_factor(&piece, piece_alpha, holdout, j));
        }
        front = back;
        if factors.iter().all(|&f| f == 0.0) {
            continue;
        }
        if cuts.is_empty() && factors.iter().all(|&f| f == 1.0) {
            out.kept.push(Kept {
                sample: piece,
                row: None,
            });
            continue;
        }
        let factor_of = |alpha_column: usize| {
            factors[channels
                .alphas
                .iter()
                .position(|&a| a == alpha_column)
                .expect("an alpha column")]
        };
        split(values);
        let row_index = (out.values.len() / stride) as u32;
        out.values
            .extend(
                channels
                    .kinds
                    .iter()
                    .zip(values.iter())
                    .enumerate()
                    .map(|(k, (kind, &v))| {
                        let alpha = match *kind {
                            CompositeKind::Alpha => k,
                            CompositeKind::Colour { alpha } => alpha,
                        };
                        (v * factor_of(alpha)) as f32
                    }),
            );
        // A table without composited columns still takes its one value per row.
        out.values.resize((row_index as usize + 1) * stride, 0.0);
        out.kept.push(Kept {
            sample: piece,
            row: Some(row_index),
        });
    }
}

/// What the holdout leaves of a piece of IN (alpha `piece_alpha` in alpha column `j`): IN's share
/// of the merge of IN and HOLDOUT, per unit of the piece. That is the transmittance of the
/// holdout material that sorts before the piece in merge order (docs/architecture.md, "Depth
/// order", [`depth_less`]; exact ties go to IN, the first input) times, where holdout volumes share
/// the piece's interval, IN's colour weight in the mixed medium. Both are [`CoincidentMix`]es over
/// parts of holdout samples split as the tidy splits them ([`piece_fraction`]).
fn holdout_factor(
    piece: &Sample,
    piece_alpha: impl FnOnce() -> f64,
    holdout: &[HoldoutSample],
    j: usize,
) -> f64 {
    let mut in_front = CoincidentMix::default();
    // The holdout media sharing the piece's interval.
    let mut shared = CoincidentMix::default();
    // IN is cut at h's ends, so a volume h either covers a volume piece or misses it.
    let covers = |h: &HoldoutSample| piece.is_volume() && h.z <= piece.z && piece.zback <= h.zback;
    let fraction_of = |h: &HoldoutSample| {
        let length = h.zback as f64 - h.z as f64;
        piece_fraction(piece.z as f64, piece.zback as f64, length)
    };
    for h in holdout {
        let medium = &h.media[j];
        if !h.is_volume() {
            // A point holds out the pieces that sort after it in merge order: those starting
            // behind it, and a volume piece starting at its depth ((z, z) sorts before
            // (z, zback)); an IN point at its depth ties with it and goes first.
            if depth_less((h.z, h.zback), (piece.z, piece.zback)) {
                in_front.add_clear(medium);
            }
        } else {
            let length = h.zback as f64 - h.z as f64;
            // Tidying cuts h at the piece's front: its part [h.z, min(piece.z, h.zback)) sorts
            // before the piece exactly when it is not empty. (Even a part of fraction 0, the
            // finite front of an infinitely deep volume, counts when h is opaque, as in the tidy.)
            if h.z < piece.z {
                let back = piece.z.min(h.zback);
                in_front.add_part_of(medium, piece_fraction(h.z as f64, back as f64, length));
            }
            if covers(h) {
                shared.add_part_of(medium, fraction_of(h));
            }
        }
        // Opaque material in front stays opaque: nothing later changes the answer.
        if in_front.is_opaque() {
            return 0.0;
        }
    }
    // Exactly 1 where nothing shares the interval, so such pieces keep their values (and the
    // piece's alpha, a logarithm and an exponential, is not needed).
    let share = if shared.is_clear() {
        1.0
    } else {
        // The piece mixed with the media it shares, IN as a unit colour: the mix's colour is
        // then IN's share of it. Built in the order the merge mixes them.
        let mut mixed = CoincidentMix::default();
        mixed.add(piece_alpha(), 1.0);
        for h in holdout.iter().filter(|h| h.is_volume() && covers(h)) {
            mixed.add_part_of(&h.media[j], fraction_of(h));
        }
        mixed.colour()
    };
    in_front.transmittance() * share
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ho(z: f32, zback: f32, a: f64) -> HoldoutSample {
        HoldoutSample {
            z,
            zback,
            alphas: vec![a],
            media: vec![Clear::of(a)],
        }
    }

    fn piece(z: f32, zback: f32) -> Sample {
        Sample {
            z,
            zback,
            input: 0,
            index: 0,
        }
    }

    #[test]
    fn points_in_front_multiply_transmittance() {
        let h = [ho(1.0, 1.0, 0.5), ho(2.0, 2.0, 0.5), ho(3.0, 3.0, 0.5)];
        assert_eq!(holdout_factor(&piece(2.5, 2.5), || 0.3, &h, 0), 0.25);
        // A coincident point does not hold IN out.
        assert_eq!(holdout_factor(&piece(1.0, 1.0), || 0.3, &h, 0), 1.0);
    }

    #[test]
    fn a_point_holds_out_a_volume_piece_starting_at_its_depth() {
        // Merge order: the point (2, 2) sorts before the volume piece (2, 3), whatever its end.
        let h = [ho(2.0, 2.0, 0.5)];
        assert_eq!(holdout_factor(&piece(2.0, 3.0), || 0.3, &h, 0), 0.5);
        assert_eq!(
            holdout_factor(&piece(2.0, f32::INFINITY), || 0.3, &h, 0),
            0.5
        );
        assert_eq!(holdout_factor(&piece(1.0, 2.0), || 0.3, &h, 0), 1.0);
    }

    #[test]
    fn infinite_holdout_volumes_follow_the_tidy() {
        let inf = f32::INFINITY;
        // The finite front of [1, inf) has fraction 0: nothing in front of a point at 3...
        assert_eq!(
            holdout_factor(&piece(3.0, 3.0), || 0.3, &[ho(1.0, inf, 0.5)], 0),
            1.0
        );
        // ...unless the medium is opaque; the front of [-inf, 3) is all of it.
        assert_eq!(
            holdout_factor(&piece(3.0, 3.0), || 0.3, &[ho(1.0, inf, 1.0)], 0),
            0.0
        );
        let f = holdout_factor(&piece(1.0, 1.0), || 0.3, &[ho(-inf, 3.0, 0.75)], 0);
        assert!((f - 0.25).abs() < 1e-12, "{f}");
        // The tail [2, inf) of IN shares all of the holdout's [1, inf): equal media, half each.
        let f = holdout_factor(&piece(2.0, inf), || 0.5, &[ho(1.0, inf, 0.5)], 0);
        assert!((0.5 * f - 0.75 / 2.0).abs() < 1e-12, "{f}");
    }

    #[test]
    fn half_a_volume_in_front_gives_the_square_root() {
        let h = [ho(0.0, 2.0, 0.75)];
        let f = holdout_factor(&piece(1.0, 1.0), || 0.3, &h, 0);
        assert!((f - 0.5).abs() < 1e-12, "{f}");
    }

    #[test]
    fn opaque_holdout_in_front_removes_everything() {
        let h = [ho(0.0, 0.0, 1.0)];
        assert_eq!(holdout_factor(&piece(1.0, 2.0), || 0.3, &h, 0), 0.0);
        assert_eq!(opaque_depth(&h, 1), Some(0.0));
        assert_eq!(opaque_depth(&[ho(0.0, 0.0, 0.5)], 1), None);
    }

    #[test]
    fn shared_interval_keeps_ins_share_of_the_mix() {
        // Equal media: IN keeps half of the merged alpha 1 - (1 - a)^2.
        let h = [ho(0.0, 1.0, 0.5)];
        let f = holdout_factor(&piece(0.0, 1.0), || 0.5, &h, 0);
        assert!((0.5 * f - 0.75 / 2.0).abs() < 1e-12, "{f}");
    }
}
