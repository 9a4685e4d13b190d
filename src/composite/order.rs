//! Sample order: stable by (Z, ZBack), then input index, then the sample's index in its input.

use std::cmp::Ordering;

/// One sample of one input, as the merge orders it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Front depth.
    pub z: f32,
    /// Back depth; equal to `z` for point samples (ZBack absent, or not greater than Z).
    pub zback: f32,
    /// Which input (0 = first on the command line).
    pub input: u32,
    /// Index of the sample in its input's planes.
    pub index: u64,
}

impl Sample {
    /// A volume covers [z, zback) with zback > z; anything else is a point.
    pub fn is_volume(&self) -> bool {
        self.zback > self.z
    }
}

/// True when `a` sorts strictly before `b` by depth alone, (Z, ZBack) lexicographically.
/// `-0.0` and `0.0` compare equal, as they do on the GPU. Ties are left to stability.
pub fn depth_less(a: (f32, f32), b: (f32, f32)) -> bool {
    a.0 < b.0 || (a.0 == b.0 && a.1 < b.1)
}

fn depth_cmp(a: &Sample, b: &Sample) -> Ordering {
    if depth_less((a.z, a.zback), (b.z, b.zback)) {
        Ordering::Less
    } else if depth_less((b.z, b.zback), (a.z, a.zback)) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// Sort a pixel's samples, gathered in (input, index) order, into merge order. The sort is stable,
/// so equal depths keep input order and then file order; it is adaptive, so already sorted runs
/// (one per sorted input) cost a merge, not a full sort.
pub fn sort_samples(samples: &mut [Sample]) {
    samples.sort_by(depth_cmp);
}
