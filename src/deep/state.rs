//! `deepImageState`: what a file says about the order of samples inside each pixel, and the check
//! that a claim holds, so that a writer stamps only what the pixels satisfy.
//!
//! OpenEXR (`ImfDeepImageState.h`) defines, for a pixel's samples i, j with depths (Z, ZBack):
//!
//! - SORTED: for every i < j, `Z[i] < Z[j] || (Z[i] == Z[j] && ZBack[i] < ZBack[j])`: strictly
//!   increasing, so two samples with equal (Z, ZBack) are not sorted;
//! - NON_OVERLAPPING: for every i ≠ j, one ends at or before the other starts, or they share Z
//!   and one is a point (ZBack ≤ Z) while the other is a volume (ZBack > Z). Overlapping volumes,
//!   coincident points and points strictly inside a volume are all ruled out; a point at a
//!   volume's front or back is allowed;
//! - TIDY: both; MESSY: neither claimed. An image is in a state when all its pixels are.
//!
//! A pixel without a Z channel has Z = 0, one without ZBack has ZBack = Z (as the merge reads
//! them). [`DeepImage::held_state`] narrows an image's claim to what every pixel satisfies, in
//! O(samples) for sorted pixels; the writers stamp that. A pixel with a NaN depth and more than
//! one sample is taken to satisfy neither property: readers refuse NaN depths, so this only
//! keeps the check simple and never claims too much.

use rayon::prelude::*;

use super::{ChannelRole, DeepImage, Plane};

/// What the file says about the order of samples inside each pixel (`deepImageState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeepState {
    /// Nothing is known: samples may be in any order and may overlap (also: attribute absent).
    Messy = 0,
    /// Strictly increasing (Z, ZBack) in each pixel; volumes may overlap.
    Sorted = 1,
    /// No two samples overlap (no coincident points either), but they may be in any order.
    NonOverlapping = 2,
    /// Sorted and non-overlapping.
    Tidy = 3,
}

impl DeepState {
    /// From the attribute's byte; unknown values are treated as messy.
    pub fn from_byte(byte: u8) -> Self {
        match byte {
            1 => DeepState::Sorted,
            2 => DeepState::NonOverlapping,
            3 => DeepState::Tidy,
            _ => DeepState::Messy,
        }
    }

    /// The state of pixels that are sorted and/or non-overlapping as given.
    pub fn of(sorted: bool, non_overlapping: bool) -> Self {
        match (sorted, non_overlapping) {
            (true, true) => DeepState::Tidy,
            (true, false) => DeepState::Sorted,
            (false, true) => DeepState::NonOverlapping,
            (false, false) => DeepState::Messy,
        }
    }

    /// True when each pixel's samples are known to be sorted.
    pub fn is_sorted(self) -> bool {
        matches!(self, DeepState::Sorted | DeepState::Tidy)
    }

    /// True when no two samples of a pixel are known to overlap.
    pub fn is_non_overlapping(self) -> bool {
        matches!(self, DeepState::NonOverlapping | DeepState::Tidy)
    }

    /// What both `self` and `other` claim (the state of the union of two sets of pixels).
    pub fn meet(self, other: DeepState) -> DeepState {
        DeepState::of(
            self.is_sorted() && other.is_sorted(),
            self.is_non_overlapping() && other.is_non_overlapping(),
        )
    }

    /// Lower-case name as `deepmerge info` prints it.
    pub fn name(self) -> &'static str {
        match self {
            DeepState::Messy => "messy",
            DeepState::Sorted => "sorted",
            DeepState::NonOverlapping => "non-overlapping",
            DeepState::Tidy => "tidy",
        }
    }
}

/// True when (Z, ZBack) pairs `a` then `b` are in strictly increasing order (SORTED's test).
fn strictly_before(a: (f32, f32), b: (f32, f32)) -> bool {
    a.0 < b.0 || (a.0 == b.0 && a.1 < b.1)
}

/// True when `depths`, already strictly increasing and free of NaN, hold no two overlapping
/// samples. One pass: samples with equal Z are neighbours, at most two of them may share a Z (a
/// point, then a volume), and every sample must start at or after every earlier Z's backs.
fn sorted_depths_do_not_overlap(depths: &[(f32, f32)]) -> bool {
    let mut reach = f32::NEG_INFINITY;
    let mut i = 0;
    while i < depths.len() {
        let (z, zback) = depths[i];
        if z < reach {
            return false;
        }
        let mut back = zback;
        if i + 1 < depths.len() && depths[i + 1].0 == z {
            // Sharing a Z is allowed for a point (ZBack ≤ Z) followed by a volume; a third
            // sample at that Z would share it with that volume.
            let second = depths[i + 1].1;
            let third = i + 2 < depths.len() && depths[i + 2].0 == z;
            if !(zback <= z && second > z) || third {
                return false;
            }
            back = back.max(second);
            i += 1;
        }
        reach = reach.max(back);
        i += 1;
    }
    true
}

/// The state one pixel's (Z, ZBack) pairs satisfy, of the properties `claim` asks about (a
/// property not claimed is not checked and reported false). `scratch` is reused for the sort a
/// non-overlapping claim on an unsorted pixel needs.
pub fn pixel_state(
    depths: &[(f32, f32)],
    claim: DeepState,
    scratch: &mut Vec<(f32, f32)>,
) -> DeepState {
    if depths.len() < 2 {
        return claim;
    }
    if depths.iter().any(|d| d.0.is_nan() || d.1.is_nan()) {
        return DeepState::Messy;
    }
    let sorted = depths.windows(2).all(|w| strictly_before(w[0], w[1]));
    let non_overlapping = claim.is_non_overlapping()
        && if sorted {
            sorted_depths_do_not_overlap(depths)
        } else {
            // Non-overlapping does not depend on the order: check the sorted samples (two equal
            // pairs overlap, so the sorted copy must be strictly increasing as well).
            scratch.clear();
            scratch.extend_from_slice(depths);
            scratch.sort_unstable_by(|a, b| a.partial_cmp(b).expect("no NaN here"));
            scratch.windows(2).all(|w| strictly_before(w[0], w[1]))
                && sorted_depths_do_not_overlap(scratch)
        };
    DeepState::of(claim.is_sorted() && sorted, non_overlapping)
}

/// Depth `i` of a plane (no plane: `default`).
#[inline]
fn depth(plane: Option<&Plane>, i: usize, default: f32) -> f32 {
    match plane {
        Some(Plane::F32(v)) => v[i],
        Some(other) => other.get_f32(i),
        None => default,
    }
}

/// Pixels checked per parallel task by [`DeepImage::held_state`].
const PIXELS_PER_TASK: usize = 4096;

impl DeepImage {
    /// The image's claimed [`DeepImage::state`], narrowed to what every pixel satisfies (see the
    /// module docs): what a writer may stamp. O(samples) unless a non-overlapping claim meets
    /// unsorted pixels, which are sorted first.
    pub fn held_state(&self) -> DeepState {
        let claim = self.state;
        if claim == DeepState::Messy {
            return claim;
        }
        let z = self.role_index(ChannelRole::Z).map(|c| &self.planes[c]);
        let zback = self.role_index(ChannelRole::ZBack).map(|c| &self.planes[c]);
        let pixels = self.pixel_count();
        (0..pixels.div_ceil(PIXELS_PER_TASK))
            .into_par_iter()
            .map(|task| {
                let mut depths = Vec::new();
                let mut scratch = Vec::new();
                let mut held = claim;
                let end = ((task + 1) * PIXELS_PER_TASK).min(pixels);
                for p in task * PIXELS_PER_TASK..end {
                    let range = self.range(p);
                    if range.len() < 2 {
                        continue;
                    }
                    depths.clear();
                    depths.extend(range.map(|i| {
                        let front = depth(z, i, 0.0);
                        (front, depth(zback, i, front))
                    }));
                    held = pixel_state(&depths, held, &mut scratch);
                    if held == DeepState::Messy {
                        break;
                    }
                }
                held
            })
            .reduce(|| claim, DeepState::meet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OpenEXR's definitions word for word, over every pair: the oracle for the one-pass check.
    fn by_definition(d: &[(f32, f32)]) -> DeepState {
        let n = d.len();
        let (z, zb) = (|i: usize| d[i].0, |i: usize| d[i].1);
        let sorted =
            (0..n).all(|i| (i + 1..n).all(|j| z(i) < z(j) || (z(i) == z(j) && zb(i) < zb(j))));
        let non_overlapping = (0..n).all(|i| {
            (0..n).filter(|&j| j != i).all(|j| {
                (z(i) < z(j) && zb(i) <= z(j))
                    || (z(j) < z(i) && zb(j) <= z(i))
                    || (z(i) == z(j) && zb(i) <= z(i) && zb(j) > z(j))
                    || (z(i) == z(j) && zb(j) <= z(j) && zb(i) > z(i))
            })
        });
        DeepState::of(sorted, non_overlapping)
    }

    #[test]
    fn one_pass_check_agrees_with_the_definition() {
        const DEPTHS: [f32; 8] = [
            -0.0,
            0.0,
            0.5,
            1.0,
            2.0,
            3.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut scratch = Vec::new();
        let mut seen = [0usize; 4];
        for case in 0..200_000 {
            let n = next(6);
            let mut d: Vec<(f32, f32)> = (0..n)
                .map(|_| {
                    let z = DEPTHS[next(DEPTHS.len())];
                    let zback = if next(3) == 0 {
                        z
                    } else {
                        DEPTHS[next(DEPTHS.len())]
                    };
                    (z, zback)
                })
                .collect();
            if next(2) == 0 {
                d.sort_by(|a, b| a.partial_cmp(b).unwrap());
            }
            let want = by_definition(&d);
            seen[want as usize] += 1;
            for claim in [
                DeepState::Tidy,
                DeepState::Sorted,
                DeepState::NonOverlapping,
                DeepState::Messy,
            ] {
                let got = pixel_state(&d, claim, &mut scratch);
                assert_eq!(
                    got,
                    claim.meet(want),
                    "case {case}: {d:?} claimed {claim:?}"
                );
            }
        }
        // Every state occurs, so each branch of the check ran.
        assert!(seen.iter().all(|&k| k > 1000), "{seen:?}");
    }

    #[test]
    fn nan_depths_claim_nothing_but_alone() {
        let mut scratch = Vec::new();
        let nan = f32::NAN;
        assert_eq!(
            pixel_state(&[(nan, nan)], DeepState::Tidy, &mut scratch),
            DeepState::Tidy
        );
        assert_eq!(
            pixel_state(&[(0.0, 1.0), (1.0, nan)], DeepState::Tidy, &mut scratch),
            DeepState::Messy
        );
    }

    #[test]
    fn meet_keeps_what_both_claim() {
        use DeepState::*;
        assert_eq!(Tidy.meet(Sorted), Sorted);
        assert_eq!(Tidy.meet(NonOverlapping), NonOverlapping);
        assert_eq!(Sorted.meet(NonOverlapping), Messy);
        assert_eq!(Tidy.meet(Tidy), Tidy);
        assert_eq!(Messy.meet(Tidy), Messy);
    }
}
