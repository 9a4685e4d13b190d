//! Twin of `glsl/sort.comp`: sort every pixel of a linearised (CSR) fragment buffer into merge
//! order (DESIGN §4), in place, with exactly the shader's algorithm and constants.
//!
//! Pixel p owns slots `offsets[p]..offsets[p + 1]`. Per pixel:
//! 1. a pixel already in order is left alone (one read pass);
//! 2. every chunk of [`REG_SORT_SIZE`] slots is sorted "in registers" (a fixed-size array) by
//!    odd-even transposition, a sorting network that only swaps neighbours strictly out of
//!    order, hence stable;
//! 3. longer lists merge the sorted runs bottom-up, ping-ponging between the buffer and a
//!    scratch buffer of the same size; the right run's head is taken only when strictly less,
//!    so the merge is stable too;
//! 4. with values, each element's original position rides along through 2-3 and the values
//!    (`columns` per slot) are permuted in place by following the permutation's cycles.
//!
//! Stability comes from the algorithm, not from a tie-break key, so the result equals a stable
//! `sort_by` with [`Fragment::depth_less`] whatever the fragments' `input`/`index` fields hold.

use super::Fragment;

/// Slots sorted at once in registers (the shader's `REG_SORT_SIZE`): large enough that short
/// lists need no merge pass, small enough that the unrolled network stays cheap to compile and
/// in registers.
pub const REG_SORT_SIZE: usize = 16;

/// Top bit of a position: its cycle has been applied (the shader's `POSITION_DONE`).
const POSITION_DONE: u32 = 0x8000_0000;

/// Sort each pixel's fragments (`offsets` has one entry more than there are pixels).
pub fn sort_pixels(offsets: &[u32], fragments: &mut [Fragment]) {
    sort_all(offsets, fragments, None);
}

/// As [`sort_pixels`], permuting `values` (`columns` floats per slot) along with the fragments.
pub fn sort_pixels_with_values(
    offsets: &[u32],
    fragments: &mut [Fragment],
    values: &mut [f32],
    columns: usize,
) {
    assert_eq!(values.len(), fragments.len() * columns, "values per slot");
    sort_all(offsets, fragments, Some((values, columns)));
}

/// The per-slot buffers one pixel's sort reads and writes (the shader's bindings).
struct Buffers<'a> {
    fragments: &'a mut [Fragment],
    scratch: Vec<Fragment>,
    /// `[0, samples)`: original position of the element at each slot; `[samples, 2·samples)`:
    /// the same for `scratch`. Empty without values.
    positions: Vec<u32>,
    values: Option<(&'a mut [f32], usize)>,
}

fn sort_all(offsets: &[u32], fragments: &mut [Fragment], values: Option<(&mut [f32], usize)>) {
    let samples = fragments.len();
    let with_values = values.is_some();
    let mut buffers = Buffers {
        fragments,
        scratch: vec![Fragment::default(); samples],
        positions: vec![0; if with_values { 2 * samples } else { 0 }],
        values,
    };
    for p in 0..offsets.len().saturating_sub(1) {
        sort_pixel(&mut buffers, offsets[p] as usize, offsets[p + 1] as usize);
    }
}

/// One invocation of the shader: sort slots `[first, end)`.
fn sort_pixel(buffers: &mut Buffers, first: usize, end: usize) {
    let n = end - first;
    let in_order =
        (1..n).all(|i| !buffers.fragments[first + i].depth_less(&buffers.fragments[first + i - 1]));
    if in_order {
        return;
    }
    for chunk in (0..n).step_by(REG_SORT_SIZE) {
        register_block_sort(buffers, first + chunk, REG_SORT_SIZE.min(n - chunk), chunk);
    }
    let mut in_scratch = false;
    let mut width = REG_SORT_SIZE;
    while width < n {
        for lo in (0..n).step_by(2 * width) {
            let mid = (lo + width).min(n);
            let hi = (lo + 2 * width).min(n);
            merge_runs(buffers, in_scratch, first + lo, first + mid, first + hi);
        }
        in_scratch = !in_scratch;
        width *= 2;
    }
    let samples = buffers.scratch.len();
    if in_scratch {
        buffers.fragments[first..end].copy_from_slice(&buffers.scratch[first..end]);
        if buffers.values.is_some() {
            buffers
                .positions
                .copy_within(samples + first..samples + end, first);
        }
    }
    if let Some((values, columns)) = buffers.values.as_mut() {
        permute_values(&mut buffers.positions, values, *columns, first, n);
    }
}

/// Sort slots `[first, first + len)` (`len <= REG_SORT_SIZE`) in a fixed-size array;
/// `position0` is the position of `first` inside its pixel.
fn register_block_sort(buffers: &mut Buffers, first: usize, len: usize, position0: usize) {
    let mut reg = [Fragment::default(); REG_SORT_SIZE];
    let mut pos = [0u32; REG_SORT_SIZE];
    for i in 0..REG_SORT_SIZE {
        if i < len {
            reg[i] = buffers.fragments[first + i];
            pos[i] = (position0 + i) as u32;
        }
    }
    // Odd-even transposition: REG_SORT_SIZE phases sort REG_SORT_SIZE elements; pairs past
    // `len` are skipped so padding never moves; a round without a swap means sorted.
    for _round in 0..REG_SORT_SIZE.div_ceil(2) {
        let mut swapped = false;
        for phase in 0..2 {
            for j in (0..REG_SORT_SIZE - 1).step_by(2) {
                let a = j + phase;
                if a + 1 < REG_SORT_SIZE && a + 1 < len && reg[a + 1].depth_less(&reg[a]) {
                    reg.swap(a, a + 1);
                    pos.swap(a, a + 1);
                    swapped = true;
                }
            }
        }
        if !swapped {
            break;
        }
    }
    for i in 0..REG_SORT_SIZE {
        if i < len {
            buffers.fragments[first + i] = reg[i];
            if buffers.values.is_some() {
                buffers.positions[first + i] = pos[i];
            }
        }
    }
}

/// Stable merge of the sorted runs `[lo, mid)` and `[mid, hi)` of one buffer into the other.
fn merge_runs(buffers: &mut Buffers, from_scratch: bool, lo: usize, mid: usize, hi: usize) {
    let samples = buffers.scratch.len();
    let with_values = buffers.values.is_some();
    let (src, dst): (&[Fragment], &mut [Fragment]) = if from_scratch {
        (&buffers.scratch, &mut *buffers.fragments)
    } else {
        (&*buffers.fragments, &mut buffers.scratch)
    };
    let (src_pos, dst_pos) = if from_scratch {
        (samples, 0)
    } else {
        (0, samples)
    };
    let positions = &mut buffers.positions;
    let mut emit = |out_slot: usize, from: usize| {
        dst[out_slot] = src[from];
        if with_values {
            positions[dst_pos + out_slot] = positions[src_pos + from];
        }
    };
    let (mut i, mut j, mut out_slot) = (lo, mid, lo);
    while i < mid && j < hi {
        if src[j].depth_less(&src[i]) {
            emit(out_slot, j);
            j += 1;
        } else {
            emit(out_slot, i);
            i += 1;
        }
        out_slot += 1;
    }
    // One run is used up; the rest of the other is already in order.
    for from in (i..mid).chain(j..hi) {
        emit(out_slot, from);
        out_slot += 1;
    }
}

/// Apply the sort's permutation (`positions[first + s]`: where the element now at `s` was) to
/// the values of slots `[first, first + n)` in place, one cycle at a time.
fn permute_values(
    positions: &mut [u32],
    values: &mut [f32],
    columns: usize,
    first: usize,
    n: usize,
) {
    let mut held = vec![0.0f32; columns];
    for start in 0..n {
        let origin = positions[first + start];
        if origin & POSITION_DONE != 0 {
            continue;
        }
        if origin as usize == start {
            positions[first + start] = origin | POSITION_DONE;
            continue;
        }
        held.copy_from_slice(&values[(first + start) * columns..(first + start + 1) * columns]);
        // Slot `target` takes its origin's values, the origin takes its own origin's, and so on
        // until the cycle returns to `start`, whose values were held aside.
        let mut target = start;
        loop {
            let origin = positions[first + target];
            positions[first + target] = origin | POSITION_DONE;
            let origin = origin as usize;
            let to = (first + target) * columns;
            if origin == start {
                values[to..to + columns].copy_from_slice(&held);
                break;
            }
            values.copy_within(
                (first + origin) * columns..(first + origin + 1) * columns,
                to,
            );
            target = origin;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (no dependency needed).
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: u32) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as u32) % n.max(1)
        }
    }

    fn bits(f: &[Fragment]) -> Vec<[u32; 4]> {
        f.iter().map(|f| bytemuck::cast(*f)).collect()
    }

    /// The definition: a stable `sort_by` on depth per pixel.
    fn reference(offsets: &[u32], fragments: &[Fragment]) -> Vec<Fragment> {
        let mut out = fragments.to_vec();
        for p in 0..offsets.len() - 1 {
            out[offsets[p] as usize..offsets[p + 1] as usize].sort_by(|a, b| {
                if a.depth_less(b) {
                    std::cmp::Ordering::Less
                } else if b.depth_less(a) {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            });
        }
        out
    }

    /// Pixels of the given lengths with depths drawn from `levels` values (ties when small);
    /// `index` numbers the slots so every reordering of equal keys is visible.
    fn pixels(lengths: &[usize], levels: u32, seed: u64) -> (Vec<u32>, Vec<Fragment>) {
        let mut rng = Lcg(seed);
        let mut offsets = vec![0u32];
        let mut fragments = Vec::new();
        for &n in lengths {
            for _ in 0..n {
                let z = rng.below(levels) as f32 * 0.5;
                let zback = z + rng.below(3) as f32;
                fragments.push(Fragment {
                    z,
                    zback,
                    input: rng.below(3),
                    index: fragments.len() as u32,
                });
            }
            offsets.push(fragments.len() as u32);
        }
        (offsets, fragments)
    }

    fn check(offsets: &[u32], fragments: &[Fragment], what: &str) {
        let expected = reference(offsets, fragments);
        let mut sorted = fragments.to_vec();
        sort_pixels(offsets, &mut sorted);
        assert_eq!(bits(&sorted), bits(&expected), "{what}");
        // Values follow their fragments: column c of a slot encodes the fragment's index.
        let columns = 3;
        let mut values: Vec<f32> = fragments
            .iter()
            .flat_map(|f| (0..columns).map(move |c| (f.index * 4 + c as u32) as f32))
            .collect();
        let mut with_values = fragments.to_vec();
        sort_pixels_with_values(offsets, &mut with_values, &mut values, columns);
        assert_eq!(bits(&with_values), bits(&expected), "{what} (with values)");
        for (slot, f) in with_values.iter().enumerate() {
            for c in 0..columns {
                assert_eq!(
                    values[slot * columns + c],
                    (f.index * 4 + c as u32) as f32,
                    "{what}: values of slot {slot}"
                );
            }
        }
    }

    #[test]
    fn sorts_like_a_stable_sort_at_every_length() {
        let r = REG_SORT_SIZE;
        let lengths = [
            0,
            1,
            2,
            3,
            r - 1,
            r,
            r + 1,
            2 * r,
            2 * r + 1,
            5 * r + 3,
            500,
            2000,
        ];
        for levels in [2, 7, 1000] {
            let (offsets, fragments) = pixels(&lengths, levels, levels as u64);
            check(&offsets, &fragments, &format!("{levels} depth levels"));
        }
    }

    #[test]
    fn keeps_equal_keys_in_order_and_handles_edges() {
        let mut fragments = Vec::new();
        let mut offsets = vec![0u32];
        let zs: [&[f32]; 5] = [
            &[0.0, -0.0, 0.0, -0.0, 1.0, -1.0],
            &[f32::INFINITY, f32::NEG_INFINITY, f32::INFINITY, 0.0],
            &[1.0; 40],
            &[
                5.0, 4.0, 3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0, -9.0,
                -10.0, -11.0, -12.0, -13.0, -14.0,
            ],
            &[1.0, 2.0, 3.0],
        ];
        for list in zs {
            for &z in list {
                fragments.push(Fragment {
                    z,
                    zback: z,
                    input: 0,
                    index: fragments.len() as u32,
                });
            }
            offsets.push(fragments.len() as u32);
        }
        check(&offsets, &fragments, "edge values");
        // The equal keys do discriminate: an order that reverses ties differs from the reference.
        let expected = reference(&offsets, &fragments);
        let mut reversed_ties = fragments.clone();
        reversed_ties[6..10]
            .sort_by(|a, b| a.z.partial_cmp(&b.z).unwrap().then(b.index.cmp(&a.index)));
        assert_ne!(bits(&reversed_ties[6..10]), bits(&expected[6..10]));
    }

    #[test]
    fn empty_input_is_fine() {
        sort_pixels(&[0], &mut []);
        sort_pixels(&[], &mut []);
    }
}
