//! [`BuiltImage`]: the host copy of one deep image in a layout, as the GPU holds it, and how to
//! walk a pixel of it. The GPU engine reads its images back into this form; the CPU twin of
//! `build.comp` builds it directly; the tests compare the two.

use super::layout::address;
use super::{Fragment, Layout};

/// One deep image in a layout, as the GPU holds it (host copy).
#[derive(Clone, Debug, PartialEq)]
pub struct BuiltImage {
    /// The layout.
    pub layout: Layout,
    /// Block size BIA was built with (1 for the others).
    pub block_size: u32,
    /// Composited values per fragment slot.
    pub columns: usize,
    /// Exclusive scan of the counts (`P + 1` entries); for LL unused but kept for readback.
    pub offsets: Vec<u32>,
    /// IA/BIA per-group minimum counts.
    pub min_counts: Vec<u32>,
    /// LL head per pixel (0 = empty).
    pub head: Vec<u32>,
    /// LL next per node; node 0 is the null node (on the GPU it holds the allocation counter).
    pub next: Vec<u32>,
    /// Fragment slots (for LL, node 0 is unused).
    pub slots: Vec<Fragment>,
    /// `columns` values per slot.
    pub values: Vec<f32>,
    /// For LL: whether lists run front to back. Arrays are always stored ascending.
    pub ascending: bool,
}

impl BuiltImage {
    /// Number of pixels.
    pub fn pixel_count(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Samples in pixel p.
    pub fn count(&self, p: usize) -> u32 {
        self.offsets[p + 1] - self.offsets[p]
    }

    /// The pixel holding position `s` of the samples in pixel order (sample i of pixel p at
    /// `offsets[p] + i`, `s` below the total): the last p whose offset is at most `s`, as empty
    /// pixels share an offset (twin of `layout.glsl`'s `pixel_holding`).
    pub fn pixel_holding(&self, s: u32) -> usize {
        self.offsets[..self.pixel_count()].partition_point(|&o| o <= s) - 1
    }

    /// Slots of pixel p's samples, front to back.
    pub fn pixel_slots(&self, p: usize) -> Vec<u32> {
        match self.layout {
            Layout::LinkedList => {
                let mut slots = Vec::new();
                let mut node = self.head[p];
                while node != 0 {
                    slots.push(node);
                    node = self.next[node as usize];
                }
                if !self.ascending {
                    slots.reverse();
                }
                slots
            }
            layout => (0..self.count(p))
                .map(|i| {
                    address(
                        layout,
                        self.block_size,
                        &self.offsets,
                        &self.min_counts,
                        p,
                        i,
                    )
                    .expect("array layout")
                })
                .collect(),
        }
    }

    /// Append pixel p's fragments, front to back, to `out`: [`Self::pixel`] without a vector per
    /// pixel (the host's part of reading a deep merge back, 51 M samples at 1080p).
    pub fn extend_with_pixel(&self, p: usize, out: &mut Vec<Fragment>) {
        match self.layout {
            // A linearised pixel is one run of slots.
            Layout::Linearised => {
                out.extend_from_slice(
                    &self.slots[self.offsets[p] as usize..self.offsets[p + 1] as usize],
                );
            }
            Layout::LinkedList => {
                let first = out.len();
                let mut node = self.head[p];
                while node != 0 {
                    out.push(self.slots[node as usize]);
                    node = self.next[node as usize];
                }
                if !self.ascending {
                    out[first..].reverse();
                }
            }
            layout => out.extend((0..self.count(p)).map(|i| {
                let slot = address(
                    layout,
                    self.block_size,
                    &self.offsets,
                    &self.min_counts,
                    p,
                    i,
                )
                .expect("array layout");
                self.slots[slot as usize]
            })),
        }
    }

    /// Pixel p's fragments, front to back.
    pub fn pixel(&self, p: usize) -> Vec<Fragment> {
        let mut fragments = Vec::new();
        self.extend_with_pixel(p, &mut fragments);
        fragments
    }
}

impl BuiltImage {
    /// Whether the image is consistent enough to walk: offsets that only grow and end at the
    /// slots held, group minimum counts no larger than any count in the group (IA, BIA), and
    /// linked lists whose nodes stay in range and whose lengths are the pixels' counts. An image
    /// read back from a GPU is checked before it is walked, so that a driver or synchronisation
    /// fault gives an error, not a panic or an endless walk.
    pub fn check(&self) -> Result<(), String> {
        let pixels = self.pixel_count();
        check_offsets(&self.offsets, pixels)?;
        let total = self.offsets[pixels] as usize;
        let slots = total + usize::from(self.layout.links_lists());
        if self.slots.len() < slots {
            return Err(format!("{total} samples in {} slots", self.slots.len()));
        }
        if self.layout.links_lists() {
            if self.head.len() != pixels || self.next.len() < slots {
                return Err("its list heads or links are short".into());
            }
            for p in 0..pixels {
                let mut node = self.head[p] as usize;
                let mut length = 0u32;
                while node != 0 {
                    if node >= slots || length >= self.count(p) {
                        return Err(format!(
                            "pixel {p}'s list runs past its {} samples",
                            self.count(p)
                        ));
                    }
                    length += 1;
                    node = self.next[node] as usize;
                }
                if length != self.count(p) {
                    return Err(format!(
                        "pixel {p}'s list holds {length} of its {} samples",
                        self.count(p)
                    ));
                }
            }
        } else if self.layout.groups_min_counts() {
            let group = crate::vocab::GROUP_SIZE as usize;
            if self.min_counts.len() < pixels.div_ceil(group) {
                return Err("its group minimum counts are short".into());
            }
            for p in 0..pixels {
                if self.min_counts[p / group] > self.count(p) {
                    return Err(format!("pixel {p}'s group minimum count is past its count"));
                }
            }
        }
        Ok(())
    }

    /// Slot of sample `i` of pixel `p` (array layouts only).
    pub fn pixel_address(&self, p: usize, i: u32) -> u32 {
        address(
            self.layout,
            self.block_size,
            &self.offsets,
            &self.min_counts,
            p,
            i,
        )
        .expect("array layout")
    }
}

/// Whether `offsets` are the exclusive scan of `pixels` counts: `pixels + 1` of them, only
/// growing (the first part of [`BuiltImage::check`], and all a readback of packed sources has
/// to check on the host).
pub fn check_offsets(offsets: &[u32], pixels: usize) -> Result<(), String> {
    if offsets.len() != pixels + 1 || offsets.windows(2).any(|w| w[0] > w[1]) {
        return Err("its offsets do not grow".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pixels of 2 and 1 samples as linked lists (nodes 1..=3) or linearised.
    fn image(layout: Layout) -> BuiltImage {
        let fragment = Fragment::default();
        BuiltImage {
            layout,
            block_size: 1,
            columns: 0,
            offsets: vec![0, 2, 3],
            min_counts: Vec::new(),
            head: if layout == Layout::LinkedList {
                vec![2, 3]
            } else {
                Vec::new()
            },
            next: if layout == Layout::LinkedList {
                vec![0, 0, 1, 0]
            } else {
                Vec::new()
            },
            slots: vec![fragment; 4],
            values: Vec::new(),
            ascending: true,
        }
    }

    #[test]
    fn a_consistent_image_passes_and_broken_ones_are_named() {
        assert_eq!(image(Layout::LinkedList).check(), Ok(()));
        assert_eq!(image(Layout::Linearised).check(), Ok(()));
        // A cycle would walk forever: it is caught at the pixel's count.
        let mut cycle = image(Layout::LinkedList);
        cycle.next[1] = 2;
        assert!(cycle.check().unwrap_err().contains("runs past"));
        // A link out of range would index past the slots.
        let mut wild = image(Layout::LinkedList);
        wild.head[1] = 99;
        assert!(wild.check().is_err());
        // Offsets that shrink, or promise more samples than were read back.
        let mut shrinking = image(Layout::Linearised);
        shrinking.offsets = vec![0, 3, 2];
        assert!(shrinking.check().is_err());
        let mut short = image(Layout::Linearised);
        short.slots.truncate(2);
        assert!(short.check().is_err());
    }
}
