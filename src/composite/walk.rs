//! One pixel's samples of its inputs walked in merge order a sample at a time, straight from
//! the inputs' Z planes, for the flat composite: it stops at the sample that makes the pixel
//! opaque, and the samples behind it need no ordering at all. In the 1080p powerplant pair, 15
//! million of 51 million samples are composited; the other 36 million were gathered into
//! records, checked for order and merged for nothing (with four inputs, merged in a heap).
//!
//! The walk gives exactly the order [`MergePlan::ordered_samples_into`] gives, which is what the
//! tests check. Two inputs ([`PairWalk`]) are merged as [`merge_sorted_runs`] merges them (ties
//! to the earlier input, and its shortcut where the second run starts at or behind the first's
//! last sample, so runs that `--assume-sorted` trusts and that are not sorted come out as they
//! do there). Three to [`MAX_WALK_INPUTS`] ([`KWalk`]) are walked only where every run is in
//! order, checked here whatever the policy: then the heap of [`super::merge_runs_kway`] and
//! the chain agree on the stable merge (ties to the earlier input), which the walk takes by
//! the smallest head. It covers the common case only and says so by giving no walk: points
//! only (float Z, no ZBack), and every run the [`super::SortPolicy`] would sort already in order
//! (checked in one pass over each input's Z plane; a pixel with a run that is not takes the
//! gathering path, which sorts it).

use rayon::prelude::*;

use super::merge::MergePlan;
use super::one_alpha::MAX_ONE_ALPHA_COLUMNS;
use super::views::Values;
use crate::deep::DeepImage;
use crate::vocab::{depth_less, Sample};

#[cfg(doc)]
use super::order::merge_sorted_runs;

/// [`depth_less`] of two points at depths `a` and `b`: `a < b`, `-0.0` equal to `0.0`.
#[inline(always)]
fn point_less(a: f32, b: f32) -> bool {
    depth_less((a, a), (b, b))
}

/// One input's run of one pixel: its Z plane and the run's sample indices still to come.
#[derive(Clone, Copy)]
struct Run<'a> {
    z: &'a [f32],
    input: u32,
    next: usize,
    end: usize,
}

impl Run<'_> {
    const EMPTY: Run<'static> = Run {
        z: &[],
        input: 0,
        next: 0,
        end: 0,
    };

    /// The depth of the run's next sample, if any.
    #[inline(always)]
    fn head(&self) -> Option<f32> {
        (self.next < self.end).then(|| self.z[self.next])
    }

    /// The run's next sample, taken (the run is not empty).
    #[inline(always)]
    fn take(&mut self) -> Sample {
        let index = self.next;
        self.next += 1;
        let z = self.z[index];
        Sample {
            z,
            zback: z,
            input: self.input,
            index: index as u64,
        }
    }
}

/// The samples of one pixel of one or two inputs in merge order, as an iterator that orders
/// only as far as it is asked ([`Walker::walk`]).
#[derive(Clone, Copy)]
pub(crate) struct PairWalk<'a> {
    /// The earlier input's run, then the later one's (either may be empty).
    runs: [Run<'a>; 2],
    /// The later run starts at or behind the earlier run's last sample: the earlier run whole,
    /// then the later one, as [`merge_sorted_runs`] takes them without comparing further.
    in_order: bool,
}

impl Iterator for PairWalk<'_> {
    type Item = Sample;

    #[inline(always)]
    fn next(&mut self) -> Option<Sample> {
        let [earlier, later] = &mut self.runs;
        let from_earlier = match (earlier.head(), later.head()) {
            // The later input's sample goes first only when strictly in front (`depth_less` of
            // two points); equal depths keep input order.
            (Some(e), Some(l)) => self.in_order || !point_less(l, e),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        Some(if from_earlier {
            earlier.take()
        } else {
            later.take()
        })
    }
}

/// Most inputs a [`KWalk`] merges: a pixel's walk holds a run for each, made afresh for every
/// pixel, and each step compares their heads.
pub(crate) const MAX_WALK_INPUTS: usize = 8;

/// The samples of one pixel of three to [`MAX_WALK_INPUTS`] inputs, every run in depth order,
/// in merge order: each step takes the smallest head, the earliest input's on a tie
/// ([`Walker::walk_k`]).
#[derive(Clone, Copy)]
pub(crate) struct KWalk<'a> {
    /// The inputs' non-empty runs, earliest input first.
    runs: [Run<'a>; MAX_WALK_INPUTS],
    len: usize,
}

impl Iterator for KWalk<'_> {
    type Item = Sample;

    #[inline(always)]
    fn next(&mut self) -> Option<Sample> {
        let mut front: Option<(usize, f32)> = None;
        for (r, run) in self.runs[..self.len].iter().enumerate() {
            if let Some(z) = run.head() {
                // Strictly in front: an equal depth keeps the earlier input's sample first.
                if front.is_none_or(|(_, best)| point_less(z, best)) {
                    front = Some((r, z));
                }
            }
        }
        front.map(|(r, _)| self.runs[r].take())
    }
}

/// A merge's pixels walked ([`MergePlan::walker`]): the plan, and per input whether its runs
/// are known to be in depth order (its file says so and the policy trusts it, or one pass over
/// its Z plane found them so), which spares each pixel's walk its own check.
pub(crate) struct Walker<'p, 'a> {
    plan: &'p MergePlan<'a>,
    in_order: Vec<bool>,
}

impl<'a> MergePlan<'a> {
    /// The walker of this merge's pixels, where they can be walked and composited by the
    /// one-alpha loop: up to [`MAX_WALK_INPUTS`] inputs, each with a float Z and no ZBack,
    /// composited channels that are one alpha and its colours (2 to [`MAX_ONE_ALPHA_COLUMNS`]).
    /// Inputs whose runs the sort policy would sort are checked in one parallel pass each.
    pub(crate) fn walker(&self) -> Option<Walker<'_, 'a>> {
        let columns = self.composite.len();
        if self.inputs.len() > MAX_WALK_INPUTS
            || self.composite.alphas.len() != 1
            || !(2..=MAX_ONE_ALPHA_COLUMNS).contains(&columns)
            || self.views.iter().any(|v| v.columns.len() != columns)
        {
            return None;
        }
        let pairs = self.inputs.len() <= 2;
        let in_order = self
            .inputs
            .iter()
            .zip(&self.views)
            .map(|(image, views)| {
                let (Some(Values::F32(z)), None) = (views.z, views.zback) else {
                    return None;
                };
                let sorts = self.sort.sorts(image.state);
                if pairs && !sorts {
                    // Trusted: a pair's walk merges runs as they stand, as the gathering path.
                    return Some(true);
                }
                let in_order = every_run_in_order(image, z);
                // Three or more runs that are trusted and are not in order merge in an order
                // of the heap's own (unspecified between the heap and the chain): not walked.
                (in_order || sorts).then_some(in_order)
            })
            .collect::<Option<Vec<bool>>>()?;
        Some(Walker {
            plan: self,
            in_order,
        })
    }
}

impl<'a> Walker<'_, 'a> {
    /// Whether this merge's pixels are walked in pairs of runs ([`Self::walk`]), not by
    /// [`Self::walk_k`].
    pub(crate) fn pairs(&self) -> bool {
        self.plan.inputs.len() <= 2
    }

    /// The samples of both inputs at absolute pixel (x, y) in merge order, walked; `None` where
    /// a run the sort policy would sort is not in order (the gathering path sorts it).
    pub(crate) fn walk(&self, x: i32, y: i32) -> Option<PairWalk<'a>> {
        let mut runs = [Run::EMPTY; 2];
        self.runs(x, y, &mut runs)?;
        let [earlier, later] = &runs;
        let in_order = match (later.head(), earlier.end.checked_sub(1)) {
            (Some(first), Some(last)) => !point_less(first, earlier.z[last]),
            _ => true,
        };
        Some(PairWalk { runs, in_order })
    }

    /// The samples of every input at absolute pixel (x, y) in merge order, walked, for three
    /// or more inputs; `None` where a run is not in order.
    pub(crate) fn walk_k(&self, x: i32, y: i32) -> Option<KWalk<'a>> {
        let mut runs = [Run::EMPTY; MAX_WALK_INPUTS];
        let len = self.runs(x, y, &mut runs)?;
        Some(KWalk { runs, len })
    }

    /// The inputs' non-empty runs at absolute pixel (x, y) into `runs`, earliest input first,
    /// and how many; `None` where one is not known to be in order and is not.
    #[inline(always)]
    fn runs(&self, x: i32, y: i32, runs: &mut [Run<'a>]) -> Option<usize> {
        let plan = self.plan;
        let mut filled = 0;
        for (i, image) in plan.inputs.iter().enumerate() {
            let Some(p) = image.pixel_index(x, y) else {
                continue;
            };
            let range = image.range(p);
            if range.is_empty() {
                continue;
            }
            let Some(Values::F32(z)) = plan.views[i].z else {
                unreachable!("a walker's inputs have float depths");
            };
            if !self.in_order[i] && !z[range.clone()].is_sorted_by(|a, b| !point_less(*b, *a)) {
                return None;
            }
            runs[filled] = Run {
                z,
                input: i as u32,
                next: range.start,
                end: range.end,
            };
            filled += 1;
        }
        Some(filled)
    }
}

/// Whether every pixel's run of `image` is in depth order in `z`, its float Z plane: the
/// descents of the whole plane, less those from one pixel's last sample to the next one's
/// first, are none. Two compares a sample in parallel pieces, which the compiler vectorises,
/// where checking pixel by pixel cost 3% of a flat merge's CPU time.
fn every_run_in_order(image: &DeepImage, z: &[f32]) -> bool {
    const PIECE: usize = 1 << 16;
    let descents: usize = z
        .par_chunks(PIECE)
        .enumerate()
        .map(|(k, piece)| {
            // Counted in 32 bits, which keeps the compares four or eight to an instruction.
            let inside: u32 = piece[1..]
                .iter()
                .zip(piece)
                .map(|(next, before)| point_less(*next, *before) as u32)
                .sum();
            // The pair across the start of the piece.
            inside as usize + (k > 0 && point_less(piece[0], z[k * PIECE - 1])) as usize
        })
        .sum();
    if descents == 0 {
        return true;
    }
    let between_pixels: usize = image
        .offsets
        .par_windows(2)
        .with_min_len(PIECE)
        .map(|w| {
            let (start, end) = (w[0] as usize, w[1] as usize);
            (start > 0 && end > start && point_less(z[start], z[start - 1])) as usize
        })
        .sum();
    descents == between_pixels
}

#[cfg(test)]
mod tests {
    use super::super::order::SortPolicy;
    use super::*;
    use crate::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};

    /// An image of one row (alpha, red and Z) of `counts` samples a pixel at x0.., whose Z are
    /// `z` (in sample order).
    fn row(x0: i32, counts: &[u32], z: &[f32], state: DeepState) -> DeepImage {
        let window = Bounds::from_origin_size(x0, 0, counts.len(), 1);
        let n = z.len();
        let alpha: Vec<f32> = (0..n).map(|i| 0.1 + (i % 5) as f32 * 0.2).collect();
        let red = alpha.iter().map(|a| a * 0.5).collect();
        DeepImage::from_counts(
            window,
            window,
            vec![
                Channel::new("A", SampleType::F32),
                Channel::new("R", SampleType::F32),
                Channel::new("Z", SampleType::F32),
            ],
            counts,
            vec![Plane::F32(alpha), Plane::F32(red), Plane::F32(z.to_vec())],
            state,
        )
        .unwrap()
    }

    /// Every pixel of `inputs` walked gives `ordered_samples`' order exactly, under every sort
    /// policy and strategy; returns how many pixels were walked (the others were refused).
    fn walks_as_gathered(inputs: &[&DeepImage]) -> usize {
        let mut walked = 0;
        for sort in [
            SortPolicy::Auto,
            SortPolicy::Always,
            SortPolicy::AssumeSorted,
        ] {
            for strategy in [
                crate::vocab::MergeStrategy::KWay,
                crate::vocab::MergeStrategy::Chain,
            ] {
                let mut plan = MergePlan::new(inputs).unwrap();
                plan.sort = sort;
                plan.strategy = strategy;
                let walker = plan.walker().expect("walkable");
                let w = plan.window;
                for x in w.x0..=w.x1 {
                    let mut gathered = Vec::new();
                    plan.ordered_samples(x, 0, &mut gathered);
                    let walk = if walker.pairs() {
                        walker.walk(x, 0).map(|w| w.collect::<Vec<_>>())
                    } else {
                        walker.walk_k(x, 0).map(|w| w.collect::<Vec<_>>())
                    };
                    if let Some(walk) = walk {
                        assert_eq!(walk, gathered, "pixel {x}, {sort:?}, {strategy:?}");
                        walked += 1;
                    }
                }
            }
        }
        walked
    }

    #[test]
    fn a_walk_gives_the_gathered_order() {
        // Pixel by pixel: interleaved depths, ties between the inputs (-0 and 0 among them),
        // one input empty, the second input wholly behind and wholly in front, long runs.
        let counts_a = [3, 2, 0, 4, 2, 40];
        let counts_b = [3, 2, 3, 1, 2, 40];
        let mut za = vec![1.0, 3.0, 5.0, 0.0, 2.0, 1.0, 2.0, 3.0, 4.0, 7.0, 8.0];
        let mut zb = vec![2.0, 3.0, 4.0, -0.0, 2.0, 6.0, 7.0, 8.0, 9.0, 1.0, 2.0];
        za.extend((0..40).map(|i| i as f32 * 0.5));
        zb.extend((0..40).map(|i| i as f32 * 0.25 + 0.1));
        let a = row(0, &counts_a, &za, DeepState::Messy);
        let b = row(0, &counts_b, &zb, DeepState::Messy);
        // Every pixel is walked: all runs are sorted.
        assert_eq!(walks_as_gathered(&[&a, &b]), 6 * 6);
        assert_eq!(walks_as_gathered(&[&a]), 6 * 6);
        // Windows apart and overlapping by one pixel.
        let c = row(5, &counts_b, &zb, DeepState::Sorted);
        assert_eq!(walks_as_gathered(&[&a, &c]), 11 * 6);
    }

    #[test]
    fn runs_out_of_order_are_refused_where_sorted_and_walked_as_trusted() {
        // Pixel 0: both runs out of order, the second starting behind the first's last sample
        // (the shortcut: the first run whole, then the second). Pixel 1: the first run out of
        // order, the second not behind it. Pixel 2: both in order.
        let a = row(
            0,
            &[2, 3, 2],
            &[3.0, 1.0, 2.0, 1.0, 3.0, 1.0, 2.0],
            DeepState::Messy,
        );
        let b = row(
            0,
            &[2, 2, 2],
            &[2.0, 0.5, 1.5, 0.5, 1.0, 2.0],
            DeepState::Messy,
        );
        let plan = MergePlan::new(&[&a, &b]).unwrap();
        let walker = plan.walker().unwrap();
        assert!(walker.walk(0, 0).is_none());
        assert!(walker.walk(1, 0).is_none());
        assert!(walker.walk(2, 0).is_some());
        // Sorted (`Auto`, `Always`): pixel 2 under both strategies. Trusted (`--assume-sorted`):
        // the lying runs merge as the gathering path merges them, all three pixels.
        assert_eq!(walks_as_gathered(&[&a, &b]), 2 * 2 + 3 * 2);
        // A file that says it is sorted is trusted under `Auto`, not under `Always`.
        let sorted = row(0, &[2], &[3.0, 1.0], DeepState::Sorted);
        let mut plan = MergePlan::new(&[&sorted]).unwrap();
        assert!(plan.walker().unwrap().walk(0, 0).is_some());
        plan.sort = SortPolicy::Always;
        assert!(plan.walker().unwrap().walk(0, 0).is_none());
    }

    #[test]
    fn three_and_four_inputs_walk_as_gathered_where_every_run_is_in_order() {
        // Ties across three inputs at 1.0 and -0.0/0.0, an input empty at a pixel, one input's
        // window apart from the others', runs wholly in front and behind.
        let a = row(
            0,
            &[3, 0, 2, 2],
            &[0.0, 1.0, 2.0, 5.0, 6.0, 1.0, 1.0],
            DeepState::Messy,
        );
        let b = row(
            0,
            &[2, 3, 1, 2],
            &[-0.0, 1.0, 0.5, 1.5, 9.0, 3.0, 0.0, 1.0],
            DeepState::Messy,
        );
        let c = row(
            1,
            &[3, 1, 1, 4],
            &[1.0, 1.0, 2.0, 0.1, 7.0, 1.0, 2.0, 3.0, 4.0],
            DeepState::Sorted,
        );
        let d = row(6, &[2], &[2.0, 1.0], DeepState::Messy);
        // Every pixel of a, b, c (window 0..=4) under every policy and strategy.
        assert_eq!(walks_as_gathered(&[&a, &b, &c]), 5 * 6);
        // d's one pixel is out of order: refused where sorted (2 policies x 2 strategies),
        // and with d trusted (`--assume-sorted`) nothing is walked at all.
        let mut plan = MergePlan::new(&[&a, &b, &c, &d]).unwrap();
        let walker = plan.walker().unwrap();
        assert!(walker.walk_k(6, 0).is_none());
        assert!(walker.walk_k(4, 0).is_some());
        plan.sort = SortPolicy::AssumeSorted;
        assert!(plan.walker().is_none());
        // A file that says sorted and is not, trusted by `Auto`, is not walked either.
        let lying = row(0, &[2], &[2.0, 1.0], DeepState::Sorted);
        assert!(MergePlan::new(&[&a, &b, &lying])
            .unwrap()
            .walker()
            .is_none());
        // Nine inputs are past the walk's runs.
        let nine = [&a; MAX_WALK_INPUTS + 1];
        assert!(MergePlan::new(&nine).unwrap().walker().is_none());
        assert!(MergePlan::new(&nine[..MAX_WALK_INPUTS])
            .unwrap()
            .walker()
            .is_some());
    }

    /// The one-pass check agrees with checking pixel by pixel: descents between pixels (past
    /// empty ones too) do not count, one inside a pixel does, at a piece boundary of the
    /// parallel pass as anywhere.
    #[test]
    fn the_plane_check_counts_descents_inside_pixels_only() {
        const PIECE: usize = 1 << 16;
        // Pixels of 1000 samples rising from 0, then empty pixels, so that every pixel boundary
        // is a descent; one pixel spans the pieces' boundary.
        let pixels = 3 * PIECE / 1000;
        let mut counts = vec![1000u32; pixels];
        counts.extend([0, 0, 7]);
        let n: usize = counts.iter().map(|&c| c as usize).sum();
        let mut z: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
        let check = |z: &[f32], counts: &[u32]| {
            let image = row(0, counts, z, DeepState::Messy);
            let by_pixel = (0..counts.len())
                .all(|p| z[image.range(p)].is_sorted_by(|a, b| !point_less(*b, *a)));
            let Some(Values::F32(plane)) = MergePlan::new(&[&image]).unwrap().views[0].z else {
                unreachable!()
            };
            assert_eq!(every_run_in_order(&image, plane), by_pixel);
            by_pixel
        };
        assert!(check(&z, &counts));
        // A descent inside the pixel that spans the pieces' boundary, right at it.
        let saved = z[PIECE];
        z[PIECE] = z[PIECE - 1] - 1.0;
        assert!(!check(&z, &counts));
        z[PIECE] = saved;
        // Inside the last pixel, after the empty ones.
        z[n - 1] = -1.0;
        assert!(!check(&z, &counts));
        // A pixel boundary at the pieces' boundary: not a descent inside a pixel.
        let at_boundary = vec![PIECE as u32, 5];
        let z: Vec<f32> = (0..PIECE + 5).map(|i| (i % PIECE) as f32).collect();
        assert!(check(&z, &at_boundary));
    }

    #[test]
    fn volumes_half_depths_and_other_channels_are_not_walkable() {
        let a = row(0, &[1], &[1.0], DeepState::Messy);
        assert!(MergePlan::new(&[&a, &a]).unwrap().walker().is_some());
        // One pixel of one sample, channels `names` (their planes all 0.5, Z 1, ZBack 2).
        let pixel = |names: &[(&str, SampleType)]| {
            let window = Bounds::from_origin_size(0, 0, 1, 1);
            let planes = names
                .iter()
                .map(|(name, t)| {
                    let v = match *name {
                        "Z" => 1.0,
                        "ZBack" => 2.0,
                        _ => 0.5,
                    };
                    match t {
                        SampleType::F16 => Plane::F16(vec![half::f16::from_f32(v)]),
                        _ => Plane::F32(vec![v]),
                    }
                })
                .collect();
            let channels = names.iter().map(|(n, t)| Channel::new(*n, *t)).collect();
            DeepImage::from_counts(window, window, channels, &[1], planes, DeepState::Messy)
                .unwrap()
        };
        use SampleType::{F16, F32};
        let half_z = pixel(&[("A", F32), ("R", F32), ("Z", F16)]);
        assert!(MergePlan::new(&[&a, &half_z]).unwrap().walker().is_none());
        let volume = pixel(&[("A", F32), ("R", F32), ("Z", F32), ("ZBack", F32)]);
        assert!(MergePlan::new(&[&volume]).unwrap().walker().is_none());
        // Alpha alone, per-channel alphas, and more columns than the one-alpha loop takes.
        let alpha_only = pixel(&[("A", F32), ("Z", F32)]);
        assert!(MergePlan::new(&[&alpha_only]).unwrap().walker().is_none());
        let per_channel = pixel(&[("AR", F32), ("AG", F32), ("G", F32), ("R", F32), ("Z", F32)]);
        let plan = MergePlan::new(&[&per_channel]).unwrap();
        assert!(plan.composite.alphas.len() > 1 && plan.walker().is_none());
        let names = ["A", "B", "G", "R", "u", "v", "w", "Z"];
        let wide = pixel(&names.map(|n| (n, F32)));
        let plan = MergePlan::new(&[&wide]).unwrap();
        assert!(plan.composite.len() > MAX_ONE_ALPHA_COLUMNS && plan.walker().is_none());
    }
}
