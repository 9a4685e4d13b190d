//! Twin of `glsl/sources.comp`: the sources (input, index) of a merged deep image's samples in
//! pixel order, packed as [`SourcePacking`] says, with the count of pixels whose list or group
//! minimum disagrees with their count and of positions whose address falls outside the image
//! (the GPU stage's `bad` word). And twin of `glsl/source_runs.comp`: the runs of those sources,
//! a record for each stretch of positions taking consecutive values of one input.

use crate::vocab::{BuiltImage, Layout, SourcePacking, GROUP_SIZE};

/// The packed sources of `image` (sample i of pixel p at position `offsets[p] + i`) and how many
/// inconsistencies it has (0 for a consistent image). Positions an inconsistent pixel does not
/// reach stay 0.
pub fn pack_sources(image: &BuiltImage, packing: SourcePacking) -> (Vec<u32>, u32) {
    let pixels = image.pixel_count();
    let samples = image.offsets[pixels] as usize;
    let words = packing.words();
    let mut sources = vec![0u32; samples * words];
    let mut bad = 0u32;
    let mut put = |position: usize, slot: u32| {
        packing.pack(
            &image.slots[slot as usize],
            &mut sources[position * words..(position + 1) * words],
        )
    };
    if image.layout == Layout::LinkedList {
        // One pixel at a time, as the stage's invocations: a walk bounded by the count.
        for p in 0..pixels {
            let (first, n) = (image.offsets[p], image.count(p));
            let mut node = image.head[p];
            let mut i = 0u32;
            while node != 0 && i < n && node as usize <= samples {
                let at = if image.ascending { i } else { n - 1 - i };
                put((first + at) as usize, node);
                node = image.next[node as usize];
                i += 1;
            }
            if i != n || node != 0 {
                bad += 1;
            }
        }
    } else {
        // Every pixel's group minimum, empty pixels too, as the stage's first `pixels`
        // invocations check them.
        let min_count_past = |p: usize| {
            image.layout.groups_min_counts()
                && image.min_counts[p / GROUP_SIZE as usize] > image.count(p)
        };
        bad += (0..pixels).filter(|&p| min_count_past(p)).count() as u32;
        // One position at a time, as the stage's invocations.
        for s in 0..samples as u32 {
            let p = image.pixel_holding(s);
            let i = s - image.offsets[p];
            if min_count_past(p) {
                continue;
            }
            let from = image.pixel_address(p, i);
            if from as usize >= samples {
                bad += 1;
                continue;
            }
            put(s as usize, from);
        }
    }
    (sources, bad)
}

/// The runs of `sources` (packed as `packing`, [`pack_sources`]'s first result), as
/// `glsl/source_runs.comp` writes them: a record of [`SourcePacking::run_words`] words for each
/// position that starts a run (the first; another input than the position before; or not the
/// next index of the same input): the position, then its source's packed words.
pub fn source_runs(sources: &[u32], packing: SourcePacking) -> Vec<u32> {
    let words = packing.words();
    let mut records = Vec::new();
    let mut before: Option<(u32, u32)> = None;
    for (position, packed) in sources.chunks_exact(words).enumerate() {
        let (input, index) = packing.unpack(packed);
        let continues = before.is_some_and(|(i, k)| i == input && k.checked_add(1) == Some(index));
        if !continues {
            records.push(position as u32);
            records.extend_from_slice(packed);
        }
        before = Some((input, index));
    }
    records
}
