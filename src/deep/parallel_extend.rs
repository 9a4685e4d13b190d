//! Appending runs of values to a `Vec` in parallel, each run written straight into its place in
//! the spare capacity: a join of pieces or an unpacked band costs one pass over the values, on
//! every core, with no zeroed fill first (a serial memset of the whole run) and no copy after.
//! The one `unsafe` of it is here, and it holds whatever the caller's runs yield: a run that
//! yields fewer values than its length stops the program with a panic before the length is set.

use rayon::prelude::*;

/// Append to `out`, in order, one run per job of `runs` (its length, the job), the run's values
/// being `values(job)`, runs written in parallel. Each `values(job)` must yield exactly the
/// run's length: a run that yields fewer panics (and `out` keeps its length); values past the
/// length are not taken.
pub(crate) fn extend_in_parallel<T, J, I>(
    out: &mut Vec<T>,
    runs: Vec<(usize, J)>,
    values: impl Fn(J) -> I + Sync,
) where
    T: Send,
    J: Send,
    I: Iterator<Item = T>,
{
    let total: usize = runs.iter().map(|(n, _)| n).sum();
    out.reserve(total);
    let mut rest = &mut out.spare_capacity_mut()[..total];
    let mut tasks = Vec::with_capacity(runs.len());
    for (n, job) in runs {
        let (head, tail) = rest.split_at_mut(n);
        tasks.push((head, job));
        rest = tail;
    }
    tasks.into_par_iter().for_each(|(slots, job)| {
        let mut written = 0;
        for (slot, value) in slots.iter_mut().zip(values(job)) {
            slot.write(value);
            written += 1;
        }
        assert_eq!(
            written,
            slots.len(),
            "a run yields as many values as its length"
        );
    });
    // SAFETY: the tasks tile the first `total` spare slots (each split off in turn, as long as
    // its run), and each wrote every slot of its own: one that did not panicked above, and the
    // panic reaches this thread before this line.
    unsafe { out.set_len(out.len() + total) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_land_in_order_after_what_the_vec_held() {
        let mut out = vec![7u32, 8];
        let runs = vec![(3, 10u32), (0, 20), (70_000, 30), (1, 40)];
        extend_in_parallel(&mut out, runs.clone(), |base| (0..).map(move |k| base + k));
        let mut expected = vec![7u32, 8];
        for (n, base) in runs {
            expected.extend((0..n as u32).map(|k| base + k));
        }
        assert_eq!(out, expected);
    }

    #[test]
    fn a_short_run_panics_and_leaves_the_length() {
        let mut out = vec![1u64];
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            extend_in_parallel(&mut out, vec![(4, ()), (5, ())], |()| 0..4u64);
        }));
        assert!(result.is_err(), "a run of 4 values for 5 slots must panic");
        assert_eq!(out, vec![1]);
    }
}
