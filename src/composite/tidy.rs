//! Tidying a pixel where volume samples overlap (DESIGN §4): split each volume at every other
//! sample's Z and ZBack strictly inside it, merge coincident volume pieces, keep coincident
//! points in order.

use super::order::Sample;
use super::pixel::{CompositeChannels, PixelSamples};

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

/// Split and merge `pixel`'s samples in place so that no two overlap. Not yet implemented:
/// leaves the samples as they are (issue 4).
pub fn tidy_pixel(_pixel: &mut PixelSamples, _channels: &CompositeChannels) {}
