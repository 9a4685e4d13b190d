//! Twin of `glsl/relayout.comp`: a deep image rewritten in another layout with the same pixels,
//! counts and offsets, slot by slot of the new layout (the GL engine merges into an
//! interleaved image and relays it out linearised when `GlOptions::deep_writes` asks).

use crate::vocab::layout::{address, group_min_counts};
use crate::vocab::{BuiltImage, Layout};

/// `image` (interleaved or linearised) rewritten in `layout` (linearised, interleaved or
/// blocked interleaved with `block_size`): for every slot of the new layout, in slot order,
/// the pixel holding it (the last whose offset is at most the slot), its sample there, and that
/// sample's key and values copied from where `image` holds them.
pub fn relayout(image: &BuiltImage, layout: Layout, block_size: u32) -> BuiltImage {
    assert!(
        image.layout != Layout::LinkedList && layout != Layout::LinkedList,
        "a linked list has no slot order to relay out"
    );
    let pixels = image.pixel_count();
    let counts: Vec<u32> = (0..pixels).map(|p| image.count(p)).collect();
    let block = if layout == Layout::BlockedInterleaved {
        block_size
    } else {
        1
    };
    let min_counts = group_min_counts(layout, block, &counts);
    let samples = image.offsets[pixels] as usize;
    let columns = image.columns;
    let mut slots = vec![Default::default(); samples];
    let mut values = vec![0.0f32; samples * columns];
    for s in 0..samples as u32 {
        let p = image.pixel_holding(s);
        let i = s - image.offsets[p];
        let from = address(
            image.layout,
            image.block_size,
            &image.offsets,
            &image.min_counts,
            p,
            i,
        )
        .expect("an array layout") as usize;
        let to = address(layout, block, &image.offsets, &min_counts, p, i).expect("an array layout")
            as usize;
        slots[to] = image.slots[from];
        values[to * columns..(to + 1) * columns]
            .copy_from_slice(&image.values[from * columns..(from + 1) * columns]);
    }
    BuiltImage {
        layout,
        block_size: block,
        columns,
        offsets: image.offsets.clone(),
        min_counts,
        head: Vec::new(),
        next: Vec::new(),
        slots,
        values,
        ascending: true,
    }
}
