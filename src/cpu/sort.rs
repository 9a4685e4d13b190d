//! Twin of `glsl/sort.comp`: sort every pixel of a linearised (CSR) fragment buffer into merge
//! order (docs/architecture.md, "Depth order"), in place, with exactly the shader's stages and
//! constants. The shader's `STAGE_SHORT`, `STAGE_CHECK`, `STAGE_LOCAL`, `STAGE_MERGE`,
//! `STAGE_GATHER` and `STAGE_SCATTER` are `sort_short`, `check_long`, `local_sort`, `merge_global`,
//! `gather_values` and `scatter_values` here; a work group is emulated by running its invocations
//! phase by phase (what one phase reads, it reads before any write of the next, as the barriers
//! ensure).
//!
//! Pixel p owns slots `offsets[p]..offsets[p + 1]`, `n` of them. Pixels already in order are
//! never written.
//! 1. `sort_short` (one invocation per pixel): `n <= REG_SORT_SIZE` is sorted "in registers"
//!    (a fixed-size array) by odd-even transposition, a sorting network that only swaps
//!    neighbours strictly out of order, hence stable. A longer list only records its chunk
//!    count `ceil(n / LOCAL_SORT_SIZE)`; the counts are scanned into chunk items, one work group
//!    each, which find their pixel by a binary search of the scan (`owner_of`).
//! 2. `check_long`: each chunk group flags its pixel if one of its adjacent pairs is out of
//!    order; unflagged pixels are skipped from here on.
//! 3. `local_sort`: each chunk (up to [`LOCAL_SORT_SIZE`] slots) is sorted in shared memory:
//!    register-sorted blocks of [`REG_SORT_SIZE`], then pairwise rank merges of the runs. An
//!    element's output slot is its index in its run plus its rank in the other run: for a left
//!    element the right run's elements strictly less than it, for a right element the left
//!    run's elements not greater, which keeps equal keys in order (stable).
//! 4. `merge_global` (`n > LOCAL_SORT_SIZE`): the same rank merge of the sorted chunks in
//!    global memory, one pass per width, ping-ponging with a scratch buffer; `local_sort`
//!    starts in the scratch when the pass count is odd so every pixel ends in the buffer.
//! 5. With values, each element's original position rides along and the values (`columns` per
//!    slot) are gathered from those positions: by `sort_short` and `local_sort` themselves
//!    for lists of one chunk, by `gather_values` / `scatter_values` through the scratch,
//!    [`VALUE_ROUND`] columns a round, for longer lists.
//!
//! Stability comes from the algorithm, not from a tie-break key, so the result equals a stable
//! `sort_by` with [`Fragment::depth_less`] whatever the fragments' `input`/`index` fields hold.

use super::scan::exclusive_scan;
use crate::vocab::{Fragment, LOCAL_SORT_SIZE, REG_SORT_SIZE, VALUE_ROUND};

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

/// Global merge passes a list of `n` slots needs: `ceil(log2(ceil(n / LOCAL_SORT_SIZE)))`.
pub fn merge_passes(n: usize) -> u32 {
    let chunks = n.div_ceil(LOCAL_SORT_SIZE);
    if chunks <= 1 {
        0
    } else {
        (chunks - 1).ilog2() + 1
    }
}

/// The shader's bindings.
struct Buffers<'a> {
    offsets: &'a [u32],
    fragments: &'a mut [Fragment],
    /// As large as the fragments when some list needs a merge pass, else empty. Doubles as the
    /// value scratch ([`VALUE_ROUND`] floats per slot) once the merges are done.
    scratch: Vec<Fragment>,
    /// `[0, samples)`: original position (inside its pixel) of the element at each slot;
    /// `[samples, 2·samples)`: the same for `scratch`. Only with values and merge passes.
    positions: Vec<u32>,
    values: Option<(&'a mut [f32], usize)>,
    /// Exclusive scan of the chunk counts: pixel p owns chunk items
    /// `chunk_starts[p]..chunk_starts[p + 1]`.
    chunk_starts: Vec<u32>,
    /// Per chunk item; set at a pixel's first item when the pixel is out of order.
    disorder: Vec<u32>,
}

/// Where a chunk group works (the shader's `Chunk`).
struct Chunk {
    /// The pixel's first chunk item, where its disorder flag lives.
    start: usize,
    /// The pixel's first slot and length.
    first: usize,
    n: usize,
    /// The chunk's first position inside the pixel, and its length.
    base: usize,
    len: usize,
}

fn sort_all(offsets: &[u32], fragments: &mut [Fragment], values: Option<(&mut [f32], usize)>) {
    let samples = fragments.len();
    let pixels = offsets.len().saturating_sub(1);
    let mut buffers = Buffers {
        offsets,
        fragments,
        scratch: Vec::new(),
        positions: Vec::new(),
        values,
        chunk_starts: Vec::new(),
        disorder: Vec::new(),
    };
    let mut chunk_counts = vec![0u32; pixels];
    let mut max_passes = 0;
    for (p, count) in chunk_counts.iter_mut().enumerate() {
        let (chunks, passes) = sort_short(&mut buffers, p);
        *count = chunks;
        max_passes = max_passes.max(passes);
    }
    let chunks = chunk_counts.iter().sum::<u32>() as usize;
    if chunks == 0 {
        return;
    }
    buffers.chunk_starts = exclusive_scan(&chunk_counts);
    buffers.disorder = vec![0; chunks];
    if max_passes > 0 {
        buffers.scratch = vec![Fragment::default(); samples];
        if buffers.values.is_some() {
            buffers.positions = vec![0; 2 * samples];
        }
    }
    for g in 0..chunks {
        check_long(&mut buffers, g);
    }
    for g in 0..chunks {
        local_sort(&mut buffers, g);
    }
    for pass in 0..max_passes {
        for g in 0..chunks {
            merge_global(&mut buffers, g, pass);
        }
    }
    let columns = buffers.values.as_ref().map(|v| v.1);
    if let (Some(columns), true) = (columns, max_passes > 0) {
        for column0 in (0..columns).step_by(VALUE_ROUND) {
            for g in 0..chunks {
                gather_values(&mut buffers, g, column0);
            }
            for g in 0..chunks {
                scatter_values(&mut buffers, g, column0);
            }
        }
    }
}

/// Sort the first `len` (`<= REG_SORT_SIZE`) elements of `reg` (and `pos` with them) by
/// odd-even transposition: REG_SORT_SIZE phases sort REG_SORT_SIZE elements; pairs past `len`
/// are skipped so padding never moves; a round without a swap means sorted.
fn register_block_sort(
    reg: &mut [Fragment; REG_SORT_SIZE],
    pos: &mut [u32; REG_SORT_SIZE],
    len: usize,
) {
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
}

/// `STAGE_SHORT` for pixel `p`: sort a short list in registers; for a long one return its
/// chunk count and merge passes (the shader's `chunk_counts[p]` and `stats`).
fn sort_short(buffers: &mut Buffers, p: usize) -> (u32, u32) {
    let first = buffers.offsets[p] as usize;
    let n = buffers.offsets[p + 1] as usize - first;
    if n > REG_SORT_SIZE {
        return (n.div_ceil(LOCAL_SORT_SIZE) as u32, merge_passes(n));
    }
    let list = &mut buffers.fragments[first..first + n];
    if (1..n).all(|i| !list[i].depth_less(&list[i - 1])) {
        return (0, 0);
    }
    let mut reg = [Fragment::default(); REG_SORT_SIZE];
    let mut pos: [u32; REG_SORT_SIZE] = std::array::from_fn(|i| i as u32);
    reg[..n].copy_from_slice(list);
    register_block_sort(&mut reg, &mut pos, n);
    list.copy_from_slice(&reg[..n]);
    if let Some((values, columns)) = buffers.values.as_mut() {
        // The pixel is this invocation's alone: read a column from the original slots, then
        // write it back in sorted order.
        for c in 0..*columns {
            let held: Vec<f32> = (0..n)
                .map(|i| values[(first + pos[i] as usize) * *columns + c])
                .collect();
            for (i, v) in held.into_iter().enumerate() {
                values[(first + i) * *columns + c] = v;
            }
        }
    }
    (0, 0)
}

/// The pixel that owns chunk item `g`: the last p with `chunk_starts[p] <= g`.
fn owner_of(chunk_starts: &[u32], g: usize) -> usize {
    chunk_starts[1..].partition_point(|&s| s as usize <= g)
}

/// The chunk group `g` works on, or `None` when its pixel was found in order (`check` stages
/// run before the flags exist and see every chunk).
fn chunk_of_group(buffers: &Buffers, g: usize, check: bool) -> Option<Chunk> {
    let p = owner_of(&buffers.chunk_starts, g);
    let start = buffers.chunk_starts[p] as usize;
    if !check && buffers.disorder[start] == 0 {
        return None;
    }
    let first = buffers.offsets[p] as usize;
    let n = buffers.offsets[p + 1] as usize - first;
    let base = (g - start) * LOCAL_SORT_SIZE;
    Some(Chunk {
        start,
        first,
        n,
        base,
        len: LOCAL_SORT_SIZE.min(n - base),
    })
}

/// `STAGE_CHECK` for chunk item `g`: flag the pixel when a pair ending in this chunk is out of
/// order.
fn check_long(buffers: &mut Buffers, g: usize) {
    let c = chunk_of_group(buffers, g, true).expect("check sees every chunk");
    let f = &buffers.fragments[c.first..c.first + c.n];
    if (c.base.max(1)..c.base + c.len).any(|i| f[i].depth_less(&f[i - 1])) {
        buffers.disorder[c.start] = 1;
    }
}

/// Elements of the sorted `run` strictly less than `x`, or with `or_equal` not greater: the
/// shader's binary searches.
fn count_before(run: &[Fragment], x: &Fragment, or_equal: bool) -> usize {
    run.partition_point(|y| {
        if or_equal {
            !x.depth_less(y)
        } else {
            y.depth_less(x)
        }
    })
}

/// Where element `i` of a list of `len` goes when the sorted runs of `width` are merged
/// pairwise: its index in its run plus its rank in the other run (`list` is the whole list).
fn merge_destination(list: &[Fragment], len: usize, width: usize, i: usize) -> usize {
    let lo = i / (2 * width) * (2 * width);
    let mid = (lo + width).min(len);
    let hi = (lo + 2 * width).min(len);
    if i < mid {
        i + count_before(&list[mid..hi], &list[i], false)
    } else {
        i - mid + lo + count_before(&list[lo..mid], &list[i], true)
    }
}

/// `STAGE_LOCAL` for chunk item `g`: sort the chunk in "shared memory" (register blocks, then
/// rank merges in place) and write it where the pixel's merge passes start.
fn local_sort(buffers: &mut Buffers, g: usize) {
    let Some(c) = chunk_of_group(buffers, g, false) else {
        return;
    };
    let passes = merge_passes(c.n);
    let to_scratch = passes % 2 == 1;
    let mut keys = vec![Fragment::default(); c.len];
    let mut pos = vec![0u32; c.len];
    // 1. Each invocation register-sorts one block into shared memory.
    for block in (0..c.len).step_by(REG_SORT_SIZE) {
        let block_len = REG_SORT_SIZE.min(c.len - block);
        let mut reg = [Fragment::default(); REG_SORT_SIZE];
        let mut reg_pos: [u32; REG_SORT_SIZE] =
            std::array::from_fn(|i| (c.base + block + i) as u32);
        let from = c.first + c.base + block;
        reg[..block_len].copy_from_slice(&buffers.fragments[from..from + block_len]);
        register_block_sort(&mut reg, &mut reg_pos, block_len);
        keys[block..block + block_len].copy_from_slice(&reg[..block_len]);
        pos[block..block + block_len].copy_from_slice(&reg_pos[..block_len]);
    }
    // 2. Pairwise rank merges: every destination is taken (barrier), then written (barrier).
    let mut width = REG_SORT_SIZE;
    while width < c.len {
        let dest: Vec<usize> = (0..c.len)
            .map(|i| merge_destination(&keys, c.len, width, i))
            .collect();
        let (held, held_pos) = (keys.clone(), pos.clone());
        for (i, &d) in dest.iter().enumerate() {
            keys[d] = held[i];
            pos[d] = held_pos[i];
        }
        width *= 2;
    }
    // 3. Write the chunk out.
    let slots = c.first + c.base..c.first + c.base + c.len;
    if to_scratch {
        buffers.scratch[slots.clone()].copy_from_slice(&keys);
    } else {
        buffers.fragments[slots.clone()].copy_from_slice(&keys);
    }
    let samples = buffers.fragments.len();
    if let Some((values, columns)) = buffers.values.as_mut() {
        if passes > 0 {
            let half = if to_scratch { samples } else { 0 };
            buffers.positions[half + slots.start..half + slots.end].copy_from_slice(&pos);
        } else {
            // One chunk is the whole pixel: gather its values a column at a time.
            for col in 0..*columns {
                let held: Vec<f32> = pos
                    .iter()
                    .map(|&o| values[(c.first + o as usize) * *columns + col])
                    .collect();
                for (i, v) in held.into_iter().enumerate() {
                    values[(c.first + i) * *columns + col] = v;
                }
            }
        }
    }
}

/// `STAGE_MERGE` for chunk item `g` and pass `pass`: move the chunk's slots to their place in
/// the merge of the runs of width `LOCAL_SORT_SIZE << pass`, into the other buffer.
fn merge_global(buffers: &mut Buffers, g: usize, pass: u32) {
    let Some(c) = chunk_of_group(buffers, g, false) else {
        return;
    };
    let passes = merge_passes(c.n);
    if pass >= passes {
        return;
    }
    let width = LOCAL_SORT_SIZE << pass;
    // Passes left, this one included, decide where the data is: an odd count means the scratch.
    let from_scratch = (passes - pass) % 2 == 1;
    let samples = buffers.fragments.len();
    let pixel = c.first..c.first + c.n;
    let (src, dst): (&[Fragment], &mut [Fragment]) = if from_scratch {
        (
            &buffers.scratch[pixel.clone()],
            &mut buffers.fragments[pixel],
        )
    } else {
        (
            &buffers.fragments[pixel.clone()],
            &mut buffers.scratch[pixel],
        )
    };
    let (from, to) = if from_scratch {
        (samples + c.first, c.first)
    } else {
        (c.first, samples + c.first)
    };
    for i in c.base..c.base + c.len {
        let dest = merge_destination(src, c.n, width, i);
        dst[dest] = src[i];
        if buffers.values.is_some() {
            buffers.positions[to + dest] = buffers.positions[from + i];
        }
    }
}

/// `STAGE_GATHER` for chunk item `g`: copy the values of columns `column0..column0 +
/// VALUE_ROUND` from each slot's original position into the scratch.
fn gather_values(buffers: &mut Buffers, g: usize, column0: usize) {
    let Some(c) = chunk_of_group(buffers, g, false) else {
        return;
    };
    if merge_passes(c.n) == 0 {
        return;
    }
    let (values, columns) = buffers.values.as_ref().expect("gather runs with values");
    for slot in c.first + c.base..c.first + c.base + c.len {
        let origin = c.first + buffers.positions[slot] as usize;
        let mut round = [0.0f32; VALUE_ROUND];
        for (j, v) in round.iter_mut().enumerate() {
            if column0 + j < *columns {
                *v = values[origin * columns + column0 + j];
            }
        }
        // The scratch slot's 16 bytes hold the round's floats (the shader's ScratchValues).
        buffers.scratch[slot] = bytemuck::cast(round);
    }
}

/// `STAGE_SCATTER` for chunk item `g`: copy the round's values from the scratch back into place.
fn scatter_values(buffers: &mut Buffers, g: usize, column0: usize) {
    let Some(c) = chunk_of_group(buffers, g, false) else {
        return;
    };
    if merge_passes(c.n) == 0 {
        return;
    }
    let (values, columns) = buffers.values.as_mut().expect("scatter runs with values");
    for slot in c.first + c.base..c.first + c.base + c.len {
        let round: [f32; VALUE_ROUND] = bytemuck::cast(buffers.scratch[slot]);
        for (j, v) in round.into_iter().enumerate() {
            if column0 + j < *columns {
                values[slot * *columns + column0 + j] = v;
            }
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
            out[offsets[p] as usize..offsets[p + 1] as usize].sort_by(|a, b| a.depth_cmp(b));
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
        // Values follow their fragments: column c of a slot encodes the fragment's index and c.
        // 9 columns take three value rounds, the last partial.
        for columns in [1, 3, 9] {
            let mut values: Vec<f32> = fragments
                .iter()
                .flat_map(|f| (0..columns).map(move |c| (f.index * 16 + c as u32) as f32))
                .collect();
            let mut with_values = fragments.to_vec();
            sort_pixels_with_values(offsets, &mut with_values, &mut values, columns);
            assert_eq!(bits(&with_values), bits(&expected), "{what} (with values)");
            for (slot, f) in with_values.iter().enumerate() {
                for c in 0..columns {
                    assert_eq!(
                        values[slot * columns + c],
                        (f.index * 16 + c as u32) as f32,
                        "{what}: values of slot {slot}, {columns} columns"
                    );
                }
            }
        }
    }

    #[test]
    fn sorts_like_a_stable_sort_at_every_length() {
        let (r, l) = (REG_SORT_SIZE, LOCAL_SORT_SIZE);
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
            l - 1,
            l,
            l + 1,
            2000,
            3 * l + 5,
            4 * l + 1,
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
    fn counts_merge_passes_and_finds_chunk_owners() {
        let l = LOCAL_SORT_SIZE;
        let passes: Vec<u32> = [0, 17, l, l + 1, 2 * l, 2 * l + 1, 4 * l, 4 * l + 1]
            .iter()
            .map(|&n| merge_passes(n))
            .collect();
        assert_eq!(passes, [0, 0, 0, 1, 1, 2, 2, 3]);
        // Pixels with 0, 2, 0, 0, 1 and 3 chunk items.
        let starts = exclusive_scan(&[0, 2, 0, 0, 1, 3]);
        let owners: Vec<usize> = (0..6).map(|g| owner_of(&starts, g)).collect();
        assert_eq!(owners, [1, 1, 4, 5, 5, 5]);
    }

    #[test]
    fn empty_input_is_fine() {
        sort_pixels(&[0], &mut []);
        sort_pixels(&[], &mut []);
    }
}
