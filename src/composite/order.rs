//! Sample order: stable by (Z, ZBack), then input index, then the sample's index in its input.
//!
//! Two ways to merge the inputs' runs into that order, with the same result: the chain
//! ([`merge_sorted_runs`] once per input, O(n·k) moves for k inputs) and the single pass
//! ([`merge_runs_kway`], a heap over the run heads, O(n log k) compares and one move per sample).

pub use crate::vocab::Sample;
use crate::vocab::{depth_cmp, depth_less};

/// Sort a pixel's samples, gathered in (input, index) order, into merge order. The sort is stable,
/// so equal depths keep input order and then file order; it is adaptive, so already sorted runs
/// (one per sorted input) cost a merge, not a full sort.
pub fn sort_samples(samples: &mut [Sample]) {
    // Most lists arrive in order (renderers write them so, files just rarely say it): one pass
    // of compares proves it, where the sort would set up its runs first.
    if !samples.is_sorted_by(|a, b| !depth_less(b.key(), a.key())) {
        samples.sort_by(|a, b| depth_cmp(a.key(), b.key()));
    }
}

/// Whether the merge sorts each input's samples inside each pixel before merging the inputs.
///
/// Whatever the policy, the inputs' runs are then merged by depth (ties: earlier input first), so
/// the policy only decides whether one input's own samples are trusted to be in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortPolicy {
    /// Sort an input's pixels unless its `deepImageState` says sorted (or tidy). Files without the
    /// attribute count as messy, so they are sorted.
    #[default]
    Auto,
    /// Sort every input's pixels, whatever its header claims (for files that lie).
    Always,
    /// Trust every input to be sorted already. A pixel that is not gets merged as it stands: its
    /// samples keep their file order and the result is not in merge order (garbage in, garbage out).
    AssumeSorted,
}

impl SortPolicy {
    /// True when an input in `state` gets its pixels sorted under this policy.
    pub fn sorts(self, state: crate::deep::DeepState) -> bool {
        match self {
            SortPolicy::Auto => !state.is_sorted(),
            SortPolicy::Always => true,
            SortPolicy::AssumeSorted => false,
        }
    }
}

/// Merge two runs that are each in merge order, `samples[..split]` (the earlier inputs) and
/// `samples[split..]`, into one run in merge order. Stable: on equal depths the left run comes
/// first, which is the tie rule (earlier input first). `scratch` is reused between calls.
pub fn merge_sorted_runs(samples: &mut [Sample], split: usize, scratch: &mut Vec<Sample>) {
    if split == 0 || split >= samples.len() {
        return;
    }
    let (last_left, first_right) = (samples[split - 1], samples[split]);
    if !depth_less(first_right.key(), last_left.key()) {
        // Already in order: the common case for inputs that do not interleave in depth.
        return;
    }
    scratch.clear();
    scratch.extend_from_slice(&samples[..split]);
    let (mut left, mut right, mut write) = (0, split, 0);
    while left < scratch.len() && right < samples.len() {
        let (l, r) = (scratch[left], samples[right]);
        if depth_less(r.key(), l.key()) {
            samples[write] = r;
            right += 1;
        } else {
            samples[write] = l;
            left += 1;
        }
        write += 1;
    }
    while left < scratch.len() {
        samples[write] = scratch[left];
        left += 1;
        write += 1;
    }
}

/// Most runs [`merge_runs_kway`] merges with the heap it keeps on the stack; a pixel with more
/// non-empty runs is merged by the chain (same result). Small on purpose: the per-run arrays
/// live on the stack of every pixel's merge, and zeroing 64-entry arrays per pixel measurably
/// slowed the CPU engine.
pub const MAX_HEAP_RUNS: usize = 16;

/// Merge the runs `samples[bounds[r]..bounds[r + 1]]` (each in merge order; run r holds earlier
/// inputs than run r + 1; `bounds` ascending) into one run in merge order, in one pass: a binary
/// heap of the non-empty runs keyed by (depth key of the run's head, run number). Equal keys
/// leave in run order and each run keeps its own order, so the result is exactly that of
/// [`merge_sorted_runs`] applied run after run (the chain), ties broken by input order.
/// (Runs that are not sorted, `--assume-sorted` on a file that lies, give an unspecified
/// interleaving, as they already did between the CPU chain, which skips runs that look in
/// order, and the GL chain, which does not.)
///
/// Two runs go to [`merge_sorted_runs`] itself; runs already in order (the common case for
/// inputs that do not interleave in depth) cost one comparison per run boundary.
pub fn merge_runs_kway(samples: &mut [Sample], bounds: &[usize], scratch: &mut Vec<Sample>) {
    let (Some(&lo), Some(&hi)) = (bounds.first(), bounds.last()) else {
        return;
    };
    let mut starts = [0usize; MAX_HEAP_RUNS];
    let mut ends = [0usize; MAX_HEAP_RUNS];
    let mut runs = 0;
    for r in bounds.windows(2).filter(|r| r[1] > r[0]) {
        if runs == MAX_HEAP_RUNS {
            return merge_runs_chained(samples, bounds, scratch);
        }
        (starts[runs], ends[runs]) = (r[0] - lo, r[1] - lo);
        runs += 1;
    }
    let samples = &mut samples[lo..hi];
    if runs <= 1 {
        return;
    }
    if runs == 2 {
        return merge_sorted_runs(samples, starts[1], scratch);
    }
    let in_order =
        (1..runs).all(|r| !depth_less(samples[starts[r]].key(), samples[ends[r - 1] - 1].key()));
    if in_order {
        return;
    }
    scratch.clear();
    scratch.extend_from_slice(samples);
    // Heap of run numbers; run a's head comes before run b's when its key is smaller, or equal
    // with a < b (earlier input first).
    let before = |a: usize, b: usize, starts: &[usize]| {
        let (ka, kb) = (scratch[starts[a]].key(), scratch[starts[b]].key());
        depth_less(ka, kb) || (a < b && !depth_less(kb, ka))
    };
    let mut heap = [0u8; MAX_HEAP_RUNS];
    for (r, slot) in heap.iter_mut().enumerate().take(runs) {
        *slot = r as u8;
    }
    let mut len = runs;
    // Runs numbered in order are already a heap only by chance: heapify.
    for i in (0..len / 2).rev() {
        sift_down(&mut heap[..len], i, |a, b| before(a, b, &starts));
    }
    let mut write = 0;
    while len > 0 {
        let r = heap[0] as usize;
        samples[write] = scratch[starts[r]];
        write += 1;
        starts[r] += 1;
        if starts[r] == ends[r] {
            len -= 1;
            heap[0] = heap[len];
        }
        sift_down(&mut heap[..len], 0, |a, b| before(a, b, &starts));
    }
}

/// Restore the heap property below `i` (`before(a, b)`: run a's head leaves first).
fn sift_down(heap: &mut [u8], mut i: usize, before: impl Fn(usize, usize) -> bool) {
    loop {
        let (l, r) = (2 * i + 1, 2 * i + 2);
        let mut first = i;
        if l < heap.len() && before(heap[l] as usize, heap[first] as usize) {
            first = l;
        }
        if r < heap.len() && before(heap[r] as usize, heap[first] as usize) {
            first = r;
        }
        if first == i {
            return;
        }
        heap.swap(i, first);
        i = first;
    }
}

/// The chain over the same runs as [`merge_runs_kway`]: each run merged into the ones before it.
pub fn merge_runs_chained(samples: &mut [Sample], bounds: &[usize], scratch: &mut Vec<Sample>) {
    let Some(&lo) = bounds.first() else {
        return;
    };
    for r in bounds.windows(2).skip(1) {
        merge_sorted_runs(&mut samples[lo..r[1]], r[0] - lo, scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(z: f32, input: u32, index: u64) -> Sample {
        Sample {
            z,
            zback: z,
            input,
            index,
        }
    }

    #[test]
    fn sorting_keeps_ties_in_order_and_sorted_lists_as_they_are() {
        // Out of order, with ties (-0.0 and 0.0 are one depth) and a volume behind a point.
        let mut samples = vec![
            at(2.0, 0, 0),
            at(0.0, 0, 1),
            at(2.0, 0, 2),
            at(-0.0, 0, 3),
            Sample {
                zback: 3.0,
                ..at(1.0, 0, 4)
            },
            at(1.0, 0, 5),
        ];
        sort_samples(&mut samples);
        let order: Vec<u64> = samples.iter().map(|s| s.index).collect();
        assert_eq!(order, [1, 3, 5, 4, 0, 2]);
        // Already in order, ties included: unchanged.
        let before = samples.clone();
        sort_samples(&mut samples);
        assert_eq!(samples, before);
    }

    #[test]
    fn merging_runs_equals_a_stable_sort() {
        let mut runs = vec![at(1.0, 0, 0), at(3.0, 0, 1), at(3.0, 0, 2), at(5.0, 0, 3)];
        runs.extend([at(0.0, 1, 0), at(3.0, 1, 1), at(4.0, 1, 2), at(9.0, 1, 3)]);
        let mut expected = runs.clone();
        sort_samples(&mut expected);
        let mut scratch = Vec::new();
        merge_sorted_runs(&mut runs, 4, &mut scratch);
        assert_eq!(runs, expected);
        // The tie at 3 keeps input 0 first.
        assert_eq!(
            runs.iter().map(|s| (s.input, s.index)).collect::<Vec<_>>(),
            vec![
                (1, 0),
                (0, 0),
                (0, 1),
                (0, 2),
                (1, 1),
                (1, 2),
                (0, 3),
                (1, 3)
            ]
        );
    }

    use proptest::prelude::*;

    /// Runs of samples over few depth levels (ties across and within runs), points and
    /// volumes, some runs empty; sorted per run when `sorted`.
    fn runs_strategy(sorted: bool) -> impl Strategy<Value = (Vec<Sample>, Vec<usize>)> {
        let sample = (0u8..6, 0u8..3, any::<bool>());
        prop::collection::vec(prop::collection::vec(sample, 0..12), 0..12).prop_map(move |runs| {
            let (mut samples, mut bounds) = (Vec::new(), vec![0]);
            for (input, run) in runs.into_iter().enumerate() {
                let start = samples.len();
                for (index, (z, extent, negative_zero)) in run.into_iter().enumerate() {
                    let z = if z == 0 && negative_zero {
                        -0.0
                    } else {
                        z as f32
                    };
                    samples.push(Sample {
                        z,
                        zback: z + extent as f32 * 0.5,
                        input: input as u32,
                        index: index as u64,
                    });
                }
                if sorted {
                    sort_samples(&mut samples[start..]);
                }
                bounds.push(samples.len());
            }
            (samples, bounds)
        })
    }

    fn ids(samples: &[Sample]) -> Vec<(u32, u64)> {
        samples.iter().map(|s| (s.input, s.index)).collect()
    }

    proptest! {
        /// The single pass gives exactly the chain's order (and so a stable sort's) on sorted
        /// runs with ties, signed zeros, points and volumes, empty runs and up to 11 inputs.
        #[test]
        fn kway_order_is_the_chain_order((samples, bounds) in runs_strategy(true)) {
            let mut scratch = Vec::new();
            let mut chained = samples.clone();
            merge_runs_chained(&mut chained, &bounds, &mut scratch);
            let mut kway = samples.clone();
            merge_runs_kway(&mut kway, &bounds, &mut scratch);
            prop_assert_eq!(ids(&kway), ids(&chained));
            let mut sorted = samples;
            sort_samples(&mut sorted);
            prop_assert_eq!(ids(&kway), ids(&sorted));
        }
    }

    #[test]
    fn more_runs_than_the_heap_holds_fall_back_to_the_chain() {
        let runs = MAX_HEAP_RUNS + 3;
        let mut samples: Vec<Sample> = (0..runs)
            .flat_map(|r| [at((r % 5) as f32, r as u32, 0), at(7.0, r as u32, 1)])
            .collect();
        let bounds: Vec<usize> = (0..=runs).map(|r| 2 * r).collect();
        let mut expected = samples.clone();
        sort_samples(&mut expected);
        merge_runs_kway(&mut samples, &bounds, &mut Vec::new());
        assert_eq!(ids(&samples), ids(&expected));
    }

    #[test]
    fn sort_policy_follows_the_state() {
        use crate::deep::DeepState;
        assert!(SortPolicy::Auto.sorts(DeepState::Messy));
        assert!(SortPolicy::Auto.sorts(DeepState::NonOverlapping));
        assert!(!SortPolicy::Auto.sorts(DeepState::Sorted));
        assert!(SortPolicy::Always.sorts(DeepState::Tidy));
        assert!(!SortPolicy::AssumeSorted.sorts(DeepState::Messy));
    }
}
