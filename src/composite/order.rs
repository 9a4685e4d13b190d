//! Sample order: stable by (Z, ZBack), then input index, then the sample's index in its input.

pub use crate::vocab::Sample;
use crate::vocab::{depth_cmp, depth_less};

/// Sort a pixel's samples, gathered in (input, index) order, into merge order. The sort is stable,
/// so equal depths keep input order and then file order; it is adaptive, so already sorted runs
/// (one per sorted input) cost a merge, not a full sort.
pub fn sort_samples(samples: &mut [Sample]) {
    samples.sort_by(|a, b| depth_cmp(a.key(), b.key()));
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
