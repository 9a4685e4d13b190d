//! Runs of a deep merge's output samples that take consecutive values of one input.
//!
//! A merged pixel list interleaves its inputs' lists by depth, but mostly in long stretches:
//! the 1080p powerplant pair's deep merge keeps 51 M samples in 2.5 M runs, 20 samples a run
//! (runs continue across pixels, as an input's planes do). So the deep output's planes are
//! built run by run, each run one copy of a slice of an input's plane
//! ([`super::MergePlan::gather_runs`]), instead of value by value, once for every channel; and
//! a merged row keeps a run of 16 bytes instead of every sample's 24-byte key.

/// `len` output samples whose values are values `start..start + len` of input `input`'s planes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceRun {
    /// The first value's index in the input's planes.
    pub start: u64,
    /// Which input (0 = first on the command line).
    pub input: u32,
    /// How many values.
    pub len: u32,
}

/// Append the samples `keys` ((input, index), in output order) to `runs`: a key that continues
/// the last run (its input, the next index) lengthens it, any other starts a new one.
pub fn push_source_runs(runs: &mut Vec<SourceRun>, keys: impl IntoIterator<Item = (u32, u64)>) {
    for (input, index) in keys {
        match runs.last_mut() {
            Some(run)
                if run.input == input
                    && run.start + run.len as u64 == index
                    && run.len < u32::MAX =>
            {
                run.len += 1
            }
            _ => runs.push(SourceRun {
                start: index,
                input,
                len: 1,
            }),
        }
    }
}

/// How many samples `runs` hold.
pub fn samples_in(runs: &[SourceRun]) -> usize {
    runs.iter().map(|r| r.len as usize).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::composite::MergePlan;
    use crate::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};
    use half::f16;

    /// One row of `n` samples, one a pixel, with the channels `channels` (name, type): value i
    /// of every channel derived from i and the channel, so that a wrong index shows.
    fn row(n: usize, channels: &[(&str, SampleType)]) -> DeepImage {
        let window = Bounds::from_origin_size(0, 0, n, 1);
        let planes = channels
            .iter()
            .enumerate()
            .map(|(c, &(_, t))| {
                let v = |i: usize| (i * 10 + c) as f32 / 8.0;
                match t {
                    SampleType::F16 => Plane::F16((0..n).map(|i| f16::from_f32(v(i))).collect()),
                    SampleType::F32 => Plane::F32((0..n).map(v).collect()),
                    SampleType::U32 => Plane::U32((0..n).map(|i| (i * 10 + c) as u32).collect()),
                }
            })
            .collect();
        let channels = channels.iter().map(|&(n, t)| Channel::new(n, t)).collect();
        DeepImage::from_counts(
            window,
            window,
            channels,
            &vec![1; n],
            planes,
            DeepState::Sorted,
        )
        .unwrap()
    }

    /// Copying runs gives every output channel the values that gathering key by key gives: the
    /// typed copies (a channel both inputs hold in the output's type), zeros (a channel one input
    /// lacks) and converted values (R, half in one input and float in the other), for keys in
    /// long runs, single keys and steps back.
    #[test]
    fn runs_gather_what_the_keys_gather_in_every_channel() {
        let a = row(
            40,
            &[
                ("A", SampleType::F16),
                ("R", SampleType::F16),
                ("Z", SampleType::F32),
                ("id", SampleType::U32),
            ],
        );
        let b = row(
            30,
            &[
                ("A", SampleType::F16),
                ("R", SampleType::F32),
                ("Z", SampleType::F32),
            ],
        );
        let plan = MergePlan::new(&[&a, &b]).unwrap();
        let mut keys: Vec<(u32, u64)> = Vec::new();
        keys.extend((3..20).map(|i| (0, i)));
        keys.extend((0..12).map(|i| (1, i)));
        keys.extend([(0, 20), (0, 39), (1, 29), (1, 5), (0, 0), (0, 1)]);
        keys.extend((12..30).map(|i| (1, i)));
        let mut runs = Vec::new();
        push_source_runs(&mut runs, keys.iter().copied());
        assert_eq!(runs.len(), 8);
        for channel in &plan.deep_channels {
            let sources = plan.channel_sources(channel);
            let mut by_keys = Plane::with_capacity(channel.sample_type, keys.len());
            plan.gather_sources(&mut by_keys, &sources, keys.iter().copied());
            let mut by_runs = Plane::with_capacity(channel.sample_type, keys.len());
            plan.gather_runs(&mut by_runs, &sources, &runs);
            assert_eq!(by_runs, by_keys, "channel {}", channel.name);
        }
        let names: Vec<&str> = plan.deep_channels.iter().map(|c| c.name.as_str()).collect();
        assert!(names.contains(&"id") && names.contains(&"R"), "{names:?}");
    }

    #[test]
    fn keys_that_continue_a_run_lengthen_it_and_others_start_one() {
        let mut runs = Vec::new();
        push_source_runs(&mut runs, [(0, 4), (0, 5), (1, 0), (1, 1), (1, 2), (0, 6)]);
        // A later call continues the last run (runs cross pixels).
        push_source_runs(&mut runs, [(0, 7), (0, 9), (1, 3)]);
        let run = |input, start, len| SourceRun { start, input, len };
        assert_eq!(
            runs,
            vec![
                run(0, 4, 2),
                run(1, 0, 3),
                run(0, 6, 2),
                run(0, 9, 1),
                run(1, 3, 1)
            ]
        );
        assert_eq!(samples_in(&runs), 9);
        // The same index of another input, or a step back, is no continuation.
        let mut runs = Vec::new();
        push_source_runs(&mut runs, [(0, 1), (1, 2), (1, 1)]);
        assert_eq!(runs, vec![run(0, 1, 1), run(1, 2, 1), run(1, 1, 1)]);
    }
}
