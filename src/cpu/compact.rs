//! Twin of `glsl/compact.comp`: stream compaction of flagged pixels into a dense list (the
//! classic mark → exclusive scan → scatter, see `../shared/references` on stream compaction).
//!
//! The GPU uses it to hand only the pixels that need a tidy to `tidy.comp`: the flat merge flags
//! them in its front buffer (bit 2 of the fourth word), the deep tidy gate in a plain 0/1 buffer.
//! The list comes out in pixel order, so results do not depend on scheduling.

use super::scan::exclusive_scan;
use crate::vocab::FlagField;

/// The marked pixels of a flag buffer, as a list and as ranks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactedList {
    /// 1 per marked pixel, 0 otherwise (`compact.comp`'s mark stage).
    pub marks: Vec<u32>,
    /// Exclusive scan of `marks` (`pixels + 1` entries): a marked pixel's position in `list`.
    pub rank: Vec<u32>,
    /// The marked pixels in increasing order.
    pub list: Vec<u32>,
}

/// Mark, scan and scatter the first `pixels` pixels of `flags` selected by `field`.
pub fn compact_flagged(flags: &[u32], pixels: usize, field: FlagField) -> CompactedList {
    let marks: Vec<u32> = (0..pixels)
        .map(|p| {
            let word = flags[p * field.stride as usize + field.component as usize];
            u32::from(word & field.mask != 0)
        })
        .collect();
    let rank = exclusive_scan(&marks);
    let mut list = vec![0u32; rank[pixels] as usize];
    for p in 0..pixels {
        if marks[p] != 0 {
            list[rank[p] as usize] = p as u32;
        }
    }
    CompactedList { marks, rank, list }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_the_marked_pixels_in_order() {
        let front = [[0u32, 0, 0, 1], [0, 0, 0, 3], [0, 0, 0, 0], [0, 0, 0, 2]];
        let flags: Vec<u32> = front.iter().flatten().copied().collect();
        let c = compact_flagged(&flags, 4, FlagField::NEEDS_TIDY_IN_FRONT);
        assert_eq!(c.marks, vec![0, 1, 0, 1]);
        assert_eq!(c.rank, vec![0, 0, 1, 1, 2]);
        assert_eq!(c.list, vec![1, 3]);
        let c = compact_flagged(&[5, 0, 7], 3, FlagField::WORD);
        assert_eq!(c.list, vec![0, 2]);
        assert!(compact_flagged(&[], 0, FlagField::WORD).list.is_empty());
    }
}
