//! Holding one deep image out by another (`deepmerge holdout IN HOLDOUT -o OUT [--cull]`).
//!
//! [`HoldoutMode::Attenuate`] is a true holdout: every sample of IN is scaled by how much of it
//! would still be seen through HOLDOUT if the two were merged, so that merging the result with
//! HOLDOUT's alpha gives IN's share of the merge. Per alpha column (A, or RA/GA/BA for the colours
//! that use them):
//! - holdout samples wholly in front of an IN sample multiply it by `1 − a`; a holdout volume
//!   partly in front by `(1 − a)^f` for the fraction `f` in front (the tidy model of
//!   [`super::tidy`]); coincident points do not hold each other out (IN is the first input, and
//!   ties go to the first input);
//! - IN's volumes are cut at holdout boundaries strictly inside them, so each piece either shares
//!   its interval with holdout volumes or is clear of them; where it shares, IN keeps its share of
//!   the merged medium, `m = (u1 / a1) · a_mix / (u1 + u2)` (the colour weight of the coincident
//!   volume merge, DESIGN §4), with opaque media winning outright (both opaque: half each);
//! - samples whose every factor is exactly 0 are dropped, as they add nothing.
//!
//! [`HoldoutMode::Cull`] keeps IN's samples unchanged and drops those that start behind the
//! holdout's opaque depth: the Z of the holdout sample (in merge order) at which its accumulated
//! alpha reaches 1 in every alpha column. A volume that straddles that depth is kept whole.
//! (OpenImageIO's `deep_holdout` differs in two ways: it looks for a single sample with alpha of
//! at least 1 rather than accumulating, and culls behind that sample's ZBack rather than its Z;
//! an opaque medium is opaque from its front, so samples starting inside it are hidden.)
//!
//! Output has IN's data window, channels and ids; untouched samples keep their values bit-exactly.

use super::order::{sort_samples, Sample, SortPolicy};
use super::pixel::{CompositeChannels, CompositeKind};
use super::tidy::split_alpha;
use crate::deep::{ChannelRole, DeepImage, DeepState, Plane};
use crate::error::Result;

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
    let in_depth = depth_channels(input);
    let ho_depth = depth_channels(holdout);

    let mut counts = Vec::with_capacity(input.pixel_count());
    // Output samples: the source sample with (for split or scaled ones) new depths and values.
    let mut kept: Vec<(Sample, Option<Vec<f32>>)> = Vec::with_capacity(input.sample_count());
    let mut in_samples = Vec::new();
    let mut ho_samples: Vec<HoldoutSample> = Vec::new();
    for p in 0..input.pixel_count() {
        let (x, y) = input.data_window.coords_of(p);
        ordered(input, 0, p, in_depth, &mut in_samples);
        ho_samples.clear();
        if let Some(hp) = holdout.pixel_index(x, y) {
            let mut order = Vec::new();
            ordered(holdout, 1, hp, ho_depth, &mut order);
            ho_samples.extend(order.iter().map(|s| {
                HoldoutSample {
                    z: s.z,
                    zback: s.zback,
                    alphas: channels
                        .alphas
                        .iter()
                        .map(|&k| {
                            holdout_sources[k]
                                .map_or(0.0, |c| holdout.planes[c].get_f32(s.index as usize) as f64)
                        })
                        .collect(),
                }
            }));
        }
        let before = kept.len();
        match mode {
            HoldoutMode::Cull => {
                let opaque = opaque_depth(&ho_samples, channels.alphas.len());
                kept.extend(
                    in_samples
                        .iter()
                        .filter(|s| opaque.is_none_or(|d| s.z <= d))
                        .map(|s| (*s, None)),
                );
            }
            HoldoutMode::Attenuate => {
                for s in &in_samples {
                    let values: Vec<f32> = sources
                        .iter()
                        .map(|src| src.map_or(0.0, |c| input.planes[c].get_f32(s.index as usize)))
                        .collect();
                    attenuate_sample(s, &values, &ho_samples, &channels, &mut kept);
                }
            }
        }
        counts.push((kept.len() - before) as u32);
    }

    let planes = input
        .channels
        .iter()
        .enumerate()
        .map(|(c, channel)| {
            let column = channels.names.iter().position(|n| n == &channel.name);
            let mut plane = Plane::with_capacity(channel.sample_type, kept.len());
            for (s, values) in &kept {
                match (values, channel.role) {
                    (Some(_), ChannelRole::Z) => plane.push_f32(s.z),
                    (Some(_), ChannelRole::ZBack) => plane.push_f32(s.zback),
                    (Some(v), _) if column.is_some() => plane.push_f32(v[column.unwrap()]),
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

fn depth_channels(image: &DeepImage) -> (Option<usize>, Option<usize>) {
    (
        image.role_index(ChannelRole::Z),
        image.role_index(ChannelRole::ZBack),
    )
}

/// Pixel `p`'s samples in merge order (sorted unless the header says they are).
fn ordered(
    image: &DeepImage,
    input: u32,
    p: usize,
    (z, zback): (Option<usize>, Option<usize>),
    out: &mut Vec<Sample>,
) {
    out.clear();
    for index in image.range(p) {
        let zf = z.map_or(0.0, |c| image.planes[c].get_f32(index));
        let zb = zback.map_or(zf, |c| image.planes[c].get_f32(index));
        out.push(Sample {
            z: zf,
            zback: if zb > zf { zb } else { zf },
            input,
            index: index as u64,
        });
    }
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
    out: &mut Vec<(Sample, Option<Vec<f32>>)>,
) {
    let mut cuts: Vec<f32> = Vec::new();
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
        let fraction = if cuts.is_empty() {
            1.0
        } else {
            ((back as f64 - front as f64) / length).clamp(0.0, 1.0)
        };
        // Per alpha column: this piece's alpha, and the factor the holdout leaves of it.
        let factors: Vec<f64> = channels
            .alphas
            .iter()
            .enumerate()
            .map(|(j, &k)| {
                let piece_alpha = split_alpha(row[k] as f64, fraction).0;
                holdout_factor(&piece, piece_alpha, holdout, j)
            })
            .collect();
        front = back;
        if factors.iter().all(|&f| f == 0.0) {
            continue;
        }
        if cuts.is_empty() && factors.iter().all(|&f| f == 1.0) {
            out.push((piece, None));
            continue;
        }
        let factor_of = |alpha_column: usize| {
            factors[channels
                .alphas
                .iter()
                .position(|&a| a == alpha_column)
                .expect("an alpha column")]
        };
        let values = channels
            .kinds
            .iter()
            .enumerate()
            .map(|(k, kind)| match *kind {
                CompositeKind::Alpha => {
                    (split_alpha(row[k] as f64, fraction).0 * factor_of(k)) as f32
                }
                CompositeKind::Colour { alpha } => {
                    let (_, scale) = split_alpha(row[alpha] as f64, fraction);
                    (row[k] as f64 * scale * factor_of(alpha)) as f32
                }
            })
            .collect();
        out.push((piece, Some(values)));
    }
}

/// What the holdout leaves of a piece of IN (alpha `piece_alpha` in alpha column `j`): the
/// transmittance of everything in front of the piece times, where holdout volumes share the
/// piece's interval, IN's share of the merged medium.
fn holdout_factor(piece: &Sample, piece_alpha: f64, holdout: &[HoldoutSample], j: usize) -> f64 {
    let mut optical_depth_in_front = 0.0f64;
    let mut opaque_in_front = false;
    let mut shared_depth = 0.0f64;
    let mut shared_opaque = false;
    for h in holdout {
        let a = h.alphas[j];
        if !h.is_volume() {
            // A point holds out what lies strictly behind it; ties go to IN (the first input).
            if h.z < piece.z {
                accumulate(a, 1.0, &mut optical_depth_in_front, &mut opaque_in_front);
            }
            continue;
        }
        let length = h.zback as f64 - h.z as f64;
        let in_front = ((piece.z as f64 - h.z as f64) / length).clamp(0.0, 1.0);
        if in_front > 0.0 {
            accumulate(
                a,
                in_front,
                &mut optical_depth_in_front,
                &mut opaque_in_front,
            );
        }
        if piece.is_volume() && h.z <= piece.z && piece.zback <= h.zback {
            let shared = (piece.zback as f64 - piece.z as f64) / length;
            accumulate(a, shared, &mut shared_depth, &mut shared_opaque);
        }
    }
    if opaque_in_front {
        return 0.0;
    }
    let transmittance = (-optical_depth_in_front).exp();
    let share = if shared_opaque {
        if piece_alpha >= 1.0 {
            0.5
        } else {
            0.0
        }
    } else if piece_alpha >= 1.0 || shared_depth == 0.0 {
        1.0
    } else {
        let own = -(-piece_alpha).ln_1p();
        let total = own + shared_depth;
        if total == 0.0 {
            1.0
        } else {
            let mixed_alpha = -(-total).exp_m1();
            let v = if piece_alpha == 0.0 {
                1.0
            } else {
                own / piece_alpha
            };
            v * mixed_alpha / total
        }
    };
    transmittance * share
}

/// Add the optical depth of `fraction` of a medium of alpha `a` (opaque media flag instead).
fn accumulate(a: f64, fraction: f64, optical_depth: &mut f64, opaque: &mut bool) {
    if a >= 1.0 {
        *opaque = true;
    } else {
        *optical_depth -= fraction * (-a).ln_1p();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ho(z: f32, zback: f32, a: f64) -> HoldoutSample {
        HoldoutSample {
            z,
            zback,
            alphas: vec![a],
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
        assert_eq!(holdout_factor(&piece(2.5, 2.5), 0.3, &h, 0), 0.25);
        // A coincident point does not hold IN out.
        assert_eq!(holdout_factor(&piece(1.0, 1.0), 0.3, &h, 0), 1.0);
    }

    #[test]
    fn half_a_volume_in_front_gives_the_square_root() {
        let h = [ho(0.0, 2.0, 0.75)];
        let f = holdout_factor(&piece(1.0, 1.0), 0.3, &h, 0);
        assert!((f - 0.5).abs() < 1e-12, "{f}");
    }

    #[test]
    fn opaque_holdout_in_front_removes_everything() {
        let h = [ho(0.0, 0.0, 1.0)];
        assert_eq!(holdout_factor(&piece(1.0, 2.0), 0.3, &h, 0), 0.0);
        assert_eq!(opaque_depth(&h, 1), Some(0.0));
        assert_eq!(opaque_depth(&[ho(0.0, 0.0, 0.5)], 1), None);
    }

    #[test]
    fn shared_interval_keeps_ins_share_of_the_mix() {
        // Equal media: IN keeps half of the merged alpha 1 - (1 - a)^2.
        let h = [ho(0.0, 1.0, 0.5)];
        let f = holdout_factor(&piece(0.0, 1.0), 0.5, &h, 0);
        assert!((0.5 * f - 0.75 / 2.0).abs() < 1e-12, "{f}");
    }
}
