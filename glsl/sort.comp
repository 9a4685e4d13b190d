// Per-pixel stable sort of a linearised (CSR) fragment buffer, in place (twin: cpu::sort).
// Pixel p owns slots [offsets[p], offsets[p + 1]); every pixel ends in merge order
// (docs/architecture.md, "Depth order"): by depth_less, equal keys keeping their original order.
// One source, six stages (STAGE), run in this order by gpu::sort; a pixel already in order is never
// written (a read pass only).
//
// Short lists (n <= REG_SORT_SIZE), STAGE_SHORT, one invocation per pixel: the list is loaded
//   into a local array and sorted by odd-even transposition, a sorting network of adjacent
//   compare-exchanges with compile-time bounds, so it stays in registers. It only swaps
//   neighbours that are strictly out of order, which makes it stable without a tie-break key.
//   For a long list the invocation only records its chunk count, ceil(n / LOCAL_SORT_SIZE).
//   The chunk counts are scanned (gpu::scan) into each long pixel's first chunk item; every
//   later stage runs one work group of LOCAL_GROUP_SIZE per chunk item and finds its pixel by a
//   binary search of the scan, so no list of long pixels has to be compacted.
// Long lists (n > REG_SORT_SIZE):
//   STAGE_CHECK: each group checks the adjacent pairs of its chunk (the pair across the chunk's
//     first slot included) and flags the pixel (at its first chunk item) when one is out of order.
//   STAGE_LOCAL: each group sorts its chunk of up to LOCAL_SORT_SIZE slots in shared memory:
//     every invocation register-sorts one REG_SORT_SIZE block into shared memory, then the
//     sorted runs are merged pairwise (widths REG_SORT_SIZE .. LOCAL_SORT_SIZE / 2), in parallel
//     and in place: each element finds its output slot from its rank in its own run plus a binary
//     search of the other run, all ranks are taken before a barrier and written after it. A left
//     element counts the right run's elements strictly less than it, a right element the left
//     run's elements not greater: equal keys keep their order (stable) with no tie-break key.
//   STAGE_MERGE (lists longer than LOCAL_SORT_SIZE): the same rank merge of the sorted chunks in
//     global memory, one dispatch per width LOCAL_SORT_SIZE · 2^u_pass, ping-ponging between the
//     fragments and a scratch buffer at the same slots. STAGE_LOCAL writes to the scratch when a
//     pixel needs an odd number of passes, so every pixel ends in the fragment buffer.
// WITH_VALUES: every element carries its original position (inside its pixel) through the
//   sort and the pixel's NUM_COLUMNS values per slot are then gathered from those positions: in
//   registers for short lists, column by column around a barrier for lists of one chunk, and for
//   longer ones by STAGE_GATHER / STAGE_SCATTER through the (then free) scratch buffer, 4 columns
//   (its 16 bytes per slot) a round.
// Paths by length: n <= REG_SORT_SIZE (16) registers, one invocation; up to LOCAL_SORT_SIZE
//   (512) one work group in shared memory; longer, one group per chunk and global merges. With
//   SERIAL_SORT_SIZE above REG_SORT_SIZE (the serial shape, chosen on a software rasteriser),
//   lists up to SERIAL_SORT_SIZE are sorted by their own invocation (serial_sort) instead of a
//   group, and only longer ones take the group stages.
// Cost: no loop runs more than a few thousand iterations per invocation (llvmpipe silently ends
//   an invocation's loops after 65535 iterations in all), whatever the list length: a short list
//   costs O(n^2) compare-exchanges in registers, a long one O(n log^2 n) work spread over
//   ceil(n / LOCAL_SORT_SIZE) groups and ceil(log2(ceil(n / LOCAL_SORT_SIZE))) merge dispatches.
// Barriers: a group's chunk, hence every loop bound and early return around a barrier, is the
//   same for all its invocations, so every invocation reaches every barrier.
#define STAGE_SHORT 0
#define STAGE_CHECK 1
#define STAGE_LOCAL 2
#define STAGE_MERGE 3
#define STAGE_GATHER 4
#define STAGE_SCATTER 5

#if STAGE == STAGE_SHORT
layout(local_size_x = GROUP_SIZE) in;
#else
layout(local_size_x = LOCAL_GROUP_SIZE) in;
#endif
#include "common.glsl"
#include "fragment.glsl"

// Slots each invocation of a chunk group handles (LOCAL_SORT_SIZE = LOCAL_GROUP_SIZE blocks of
// REG_SORT_SIZE, so it is one register block).
const uint PER_INVOCATION = uint(LOCAL_SORT_SIZE / LOCAL_GROUP_SIZE);

layout(std430, binding = 0) readonly buffer Offsets { uint offsets[]; };
#if STAGE != STAGE_GATHER && STAGE != STAGE_SCATTER
layout(std430, binding = 1) buffer Fragments { Fragment fragments[]; };
#endif
#if STAGE == STAGE_LOCAL || STAGE == STAGE_MERGE
layout(std430, binding = 2) buffer Scratch { Fragment scratch[]; };
#endif
#if STAGE == STAGE_GATHER || STAGE == STAGE_SCATTER
// The scratch buffer again, 4 floats per slot, once the merges no longer need it.
layout(std430, binding = 2) buffer ScratchValues { float scratch_values[]; };
#endif
#if WITH_VALUES
layout(std430, binding = 3) buffer Values { float values[]; };
// Lists longer than LOCAL_SORT_SIZE: [0, u_samples) is the original position (inside its pixel)
// of the element at each slot of the fragments, [u_samples, 2·u_samples) the same for scratch.
layout(std430, binding = 4) buffer Positions { uint positions[]; };
#endif
#if STAGE == STAGE_SHORT
// Chunk items of each pixel (0 for short lists), scanned by the host into ChunkStarts.
layout(std430, binding = 5) writeonly buffer ChunkCounts { uint chunk_counts[]; };
// [0]: chunk items in all; [1]: the most merge passes any pixel needs.
layout(std430, binding = 6) buffer Stats { uint stats[]; };
#else
// Exclusive scan of the chunk counts, u_pixels + 1 entries: pixel p owns the chunk items
// [chunk_starts[p], chunk_starts[p + 1]).
layout(std430, binding = 5) readonly buffer ChunkStarts { uint chunk_starts[]; };
// Per chunk item, zeroed; STAGE_CHECK sets a pixel's first item when the pixel is out of order.
layout(std430, binding = 6) buffer Disorder { uint disorder[]; };
#endif
uniform uint u_pixels;
uniform uint u_samples;
// Chunk items in all (the dispatch may launch a few more groups).
uniform uint u_chunks;
// STAGE_MERGE: merge runs of width LOCAL_SORT_SIZE << u_pass.
uniform uint u_pass;
// STAGE_GATHER / STAGE_SCATTER: the first of the (up to 4) columns of this round.
uniform uint u_column0;

// Global merge passes a list of n slots needs: ceil(log2(ceil(n / LOCAL_SORT_SIZE))).
uint merge_passes(uint n) {
    uint chunks = (n + uint(LOCAL_SORT_SIZE) - 1u) / uint(LOCAL_SORT_SIZE);
    return chunks <= 1u ? 0u : uint(findMSB(chunks - 1u)) + 1u;
}

// Sort the first `len` (<= REG_SORT_SIZE) elements of `reg` (and `pos` with them) by odd-even
// transposition: REG_SORT_SIZE phases (even pairs, then odd pairs, repeated) sort any
// REG_SORT_SIZE elements. Pairs past `len` are skipped, so padding never moves; a round with
// no swap means the rest is sorted.
void register_block_sort(inout Fragment reg[REG_SORT_SIZE], inout uint pos[REG_SORT_SIZE],
                         uint len) {
    for (int round = 0; round < (REG_SORT_SIZE + 1) / 2; ++round) {
        bool swapped = false;
        for (int phase = 0; phase < 2; ++phase) {
            for (int j = 0; j + 1 < REG_SORT_SIZE; j += 2) {
                int a = j + phase;
                if (a + 1 < REG_SORT_SIZE && uint(a + 1) < len && depth_less(reg[a + 1], reg[a])) {
                    Fragment t = reg[a];
                    reg[a] = reg[a + 1];
                    reg[a + 1] = t;
                    uint tp = pos[a];
                    pos[a] = pos[a + 1];
                    pos[a + 1] = tp;
                    swapped = true;
                }
            }
        }
        if (!swapped) {
            break;
        }
    }
}

#if STAGE == STAGE_SHORT
#if SERIAL_SORT_SIZE > REG_SORT_SIZE
// A list of REG_SORT_SIZE < n <= SERIAL_SORT_SIZE sorted by this invocation alone (the serial
// shape, for a software rasteriser, where a work group per list costs far more): a stable
// insertion sort of the keys in a local array, carrying each one's original position, then
// each column's values gathered from those positions. At most SERIAL_SORT_SIZE^2 / 2 + 2n ·
// NUM_COLUMNS loop iterations, far below llvmpipe's limit.
void serial_sort(uint first, uint n) {
    Fragment keys[SERIAL_SORT_SIZE];
    uint pos[SERIAL_SORT_SIZE];
    for (uint i = 0u; i < n; ++i) {
        keys[i] = fragments[first + i];
        pos[i] = i;
    }
    for (uint i = 1u; i < n; ++i) {
        Fragment f = keys[i];
        uint j = i;
        // Strictly less only: equal keys keep their order (stable).
        while (j > 0u && depth_less(f, keys[j - 1u])) {
            keys[j] = keys[j - 1u];
            pos[j] = pos[j - 1u];
            j -= 1u;
        }
        keys[j] = f;
        pos[j] = i;
    }
    for (uint i = 0u; i < n; ++i) {
        fragments[first + i] = keys[i];
    }
#if WITH_VALUES
    for (int c = 0; c < NUM_COLUMNS; ++c) {
        float held[SERIAL_SORT_SIZE];
        for (uint i = 0u; i < n; ++i) {
            held[i] = values[(first + pos[i]) * uint(NUM_COLUMNS) + uint(c)];
        }
        for (uint i = 0u; i < n; ++i) {
            values[(first + i) * uint(NUM_COLUMNS) + uint(c)] = held[i];
        }
    }
#endif
}
#endif

void main() {
    uint p = linear_invocation();
    if (p >= u_pixels) {
        return;
    }
    uint first = offsets[p];
    uint n = offsets[p + 1u] - first;
    if (n > uint(max(REG_SORT_SIZE, SERIAL_SORT_SIZE))) {
        uint chunks = (n + uint(LOCAL_SORT_SIZE) - 1u) / uint(LOCAL_SORT_SIZE);
        chunk_counts[p] = chunks;
        atomicAdd(stats[0], chunks);
        atomicMax(stats[1], merge_passes(n));
        return;
    }
    chunk_counts[p] = 0u;
    bool in_order = true;
    for (uint i = 1u; i < n; ++i) {
        if (depth_less(fragments[first + i], fragments[first + i - 1u])) {
            in_order = false;
            break;
        }
    }
    if (in_order) {
        return;
    }
#if SERIAL_SORT_SIZE > REG_SORT_SIZE
    if (n > uint(REG_SORT_SIZE)) {
        serial_sort(first, n);
        return;
    }
#endif
    Fragment reg[REG_SORT_SIZE];
    uint pos[REG_SORT_SIZE];
    for (int i = 0; i < REG_SORT_SIZE; ++i) {
        pos[i] = uint(i);
        if (uint(i) < n) {
            reg[i] = fragments[first + uint(i)];
        }
    }
    register_block_sort(reg, pos, n);
    for (int i = 0; i < REG_SORT_SIZE; ++i) {
        if (uint(i) < n) {
            fragments[first + uint(i)] = reg[i];
        }
    }
#if WITH_VALUES
    // The pixel is this invocation's alone: read a column's values from their original slots,
    // then write them back in sorted order.
    for (int c = 0; c < NUM_COLUMNS; ++c) {
        float held[REG_SORT_SIZE];
        for (int i = 0; i < REG_SORT_SIZE; ++i) {
            if (uint(i) < n) {
                held[i] = values[(first + pos[i]) * uint(NUM_COLUMNS) + uint(c)];
            }
        }
        for (int i = 0; i < REG_SORT_SIZE; ++i) {
            if (uint(i) < n) {
                values[(first + uint(i)) * uint(NUM_COLUMNS) + uint(c)] = held[i];
            }
        }
    }
#endif
}

#else
// The pixel that owns chunk item g (< the total): the last p with chunk_starts[p] <= g, found
// as the first entry of chunk_starts[1 ..= u_pixels] greater than g. Such a pixel has chunks.
// Every binary search here is bounded by 40 steps: a 32-bit count is used up within 33, and a
// constant bound keeps each loop's iteration count obvious (llvmpipe's limit).
uint owner_of(uint g) {
    uint lo = 1u;
    uint count = u_pixels;
    for (int step = 0; step < 40; ++step) {
        if (count == 0u) {
            break;
        }
        uint half_count = count / 2u;
        uint mid = lo + half_count;
        if (chunk_starts[mid] <= g) {
            lo = mid + 1u;
            count -= half_count + 1u;
        } else {
            count = half_count;
        }
    }
    return lo - 1u;
}

// What every chunk group starts from. `live` is false for the spare groups past the last
// chunk item and for pixels found in order; both are uniform over the group, so returning on
// them keeps every barrier in uniform control flow.
struct Chunk {
    bool live;
    uint start;  // the pixel's first chunk item, where its disorder flag lives
    uint first;  // the pixel's first slot
    uint n;      // the pixel's length
    uint base;   // the chunk's first position inside the pixel
    uint len;    // the chunk's length
};

Chunk chunk_of_group() {
    Chunk c;
    c.live = false;
    uint g = linear_group();
    if (g >= u_chunks) {
        return c;
    }
    uint p = owner_of(g);
    c.start = chunk_starts[p];
    c.first = offsets[p];
    c.n = offsets[p + 1u] - c.first;
    c.base = (g - c.start) * uint(LOCAL_SORT_SIZE);
    c.len = min(uint(LOCAL_SORT_SIZE), c.n - c.base);
#if STAGE == STAGE_CHECK
    c.live = true;
#else
    c.live = disorder[c.start] != 0u;
#endif
    return c;
}
#endif

#if STAGE == STAGE_CHECK
void main() {
    Chunk c = chunk_of_group();
    if (!c.live) {
        return;
    }
    uint lid = gl_LocalInvocationID.x;
    for (uint k = 0u; k < PER_INVOCATION; ++k) {
        uint i = c.base + lid + k * uint(LOCAL_GROUP_SIZE);
        if (i >= c.base + c.len) {
            break;
        }
        if (i >= 1u && depth_less(fragments[c.first + i], fragments[c.first + i - 1u])) {
            // Every writer stores the same 1, so the race is harmless.
            disorder[c.start] = 1u;
            break;
        }
    }
}
#endif

#if STAGE == STAGE_LOCAL
shared Fragment s_keys[LOCAL_SORT_SIZE];
#if WITH_VALUES
// Original position inside the pixel of the element at each shared slot.
shared uint s_pos[LOCAL_SORT_SIZE];
#endif

// Elements of shared run [a, b) strictly less than x (a left element's rank in the right run).
uint count_less_shared(uint a, uint b, Fragment x) {
    uint lo = a;
    uint count = b - a;
    for (int step = 0; step < 40; ++step) {
        if (count == 0u) {
            break;
        }
        uint half_count = count / 2u;
        uint mid = lo + half_count;
        if (depth_less(s_keys[mid], x)) {
            lo = mid + 1u;
            count -= half_count + 1u;
        } else {
            count = half_count;
        }
    }
    return lo - a;
}

// Elements of shared run [a, b) not greater than x (a right element's rank in the left run).
uint count_not_greater_shared(uint a, uint b, Fragment x) {
    uint lo = a;
    uint count = b - a;
    for (int step = 0; step < 40; ++step) {
        if (count == 0u) {
            break;
        }
        uint half_count = count / 2u;
        uint mid = lo + half_count;
        if (!depth_less(x, s_keys[mid])) {
            lo = mid + 1u;
            count -= half_count + 1u;
        } else {
            count = half_count;
        }
    }
    return lo - a;
}

void main() {
    Chunk c = chunk_of_group();
    if (!c.live) {
        return;
    }
    uint lid = gl_LocalInvocationID.x;
    uint passes = merge_passes(c.n);
    // Odd pass counts start in the scratch so the last global pass lands in the fragments.
    bool to_scratch = (passes & 1u) != 0u;

    // 1. Each invocation register-sorts one block straight from the fragments into shared memory.
    uint block = lid * uint(REG_SORT_SIZE);
    uint block_len = block < c.len ? min(uint(REG_SORT_SIZE), c.len - block) : 0u;
    Fragment reg[REG_SORT_SIZE];
    uint pos[REG_SORT_SIZE];
    for (int i = 0; i < REG_SORT_SIZE; ++i) {
        pos[i] = c.base + block + uint(i);
        if (uint(i) < block_len) {
            reg[i] = fragments[c.first + c.base + block + uint(i)];
        }
    }
    register_block_sort(reg, pos, block_len);
    for (int i = 0; i < REG_SORT_SIZE; ++i) {
        if (uint(i) < block_len) {
            s_keys[block + uint(i)] = reg[i];
#if WITH_VALUES
            s_pos[block + uint(i)] = pos[i];
#endif
        }
    }
    memoryBarrierShared();
    barrier();

    // 2. Merge the runs pairwise in place: ranks are read before the barrier, written after.
    //    c.len is uniform over the group, so is this loop.
    for (uint width = uint(REG_SORT_SIZE); width < c.len; width *= 2u) {
        Fragment held[PER_INVOCATION];
        uint dest[PER_INVOCATION];
#if WITH_VALUES
        uint held_pos[PER_INVOCATION];
#endif
        for (uint k = 0u; k < PER_INVOCATION; ++k) {
            uint i = lid + k * uint(LOCAL_GROUP_SIZE);
            if (i >= c.len) {
                break;
            }
            Fragment x = s_keys[i];
            uint lo = (i / (2u * width)) * (2u * width);
            uint mid = min(lo + width, c.len);
            uint hi = min(lo + 2u * width, c.len);
            held[k] = x;
            dest[k] = i < mid ? i + count_less_shared(mid, hi, x)
                              : i - mid + lo + count_not_greater_shared(lo, mid, x);
#if WITH_VALUES
            held_pos[k] = s_pos[i];
#endif
        }
        memoryBarrierShared();
        barrier();
        for (uint k = 0u; k < PER_INVOCATION; ++k) {
            if (lid + k * uint(LOCAL_GROUP_SIZE) >= c.len) {
                break;
            }
            s_keys[dest[k]] = held[k];
#if WITH_VALUES
            s_pos[dest[k]] = held_pos[k];
#endif
        }
        memoryBarrierShared();
        barrier();
    }

    // 3. Write the sorted chunk out (coalesced: neighbouring invocations, neighbouring slots).
    for (uint k = 0u; k < PER_INVOCATION; ++k) {
        uint i = lid + k * uint(LOCAL_GROUP_SIZE);
        if (i >= c.len) {
            break;
        }
        uint slot = c.first + c.base + i;
        if (to_scratch) {
            scratch[slot] = s_keys[i];
        } else {
            fragments[slot] = s_keys[i];
        }
#if WITH_VALUES
        if (passes > 0u) {
            positions[(to_scratch ? u_samples : 0u) + slot] = s_pos[i];
        }
#endif
    }
#if WITH_VALUES
    // A pixel of one chunk is this group's alone: gather its values now, a column at a time (all
    // reads of a column before the barrier, its writes after; columns do not overlap).
    if (passes == 0u) {
        for (int col = 0; col < NUM_COLUMNS; ++col) {
            float held_value[PER_INVOCATION];
            for (uint k = 0u; k < PER_INVOCATION; ++k) {
                uint i = lid + k * uint(LOCAL_GROUP_SIZE);
                if (i >= c.len) {
                    break;
                }
                held_value[k] = values[(c.first + s_pos[i]) * uint(NUM_COLUMNS) + uint(col)];
            }
            memoryBarrierBuffer();
            barrier();
            for (uint k = 0u; k < PER_INVOCATION; ++k) {
                uint i = lid + k * uint(LOCAL_GROUP_SIZE);
                if (i >= c.len) {
                    break;
                }
                values[(c.first + i) * uint(NUM_COLUMNS) + uint(col)] = held_value[k];
            }
        }
    }
#endif
}
#endif

#if STAGE == STAGE_MERGE
Fragment load_fragment(bool from_scratch, uint slot) {
    return from_scratch ? scratch[slot] : fragments[slot];
}

// Elements of run [a, b) (slots) strictly less than x, or with `or_equal` not greater.
uint count_before(bool from_scratch, uint a, uint b, Fragment x, bool or_equal) {
    uint lo = a;
    uint count = b - a;
    for (int step = 0; step < 40; ++step) {
        if (count == 0u) {
            break;
        }
        uint half_count = count / 2u;
        uint mid = lo + half_count;
        Fragment y = load_fragment(from_scratch, mid);
        if (or_equal ? !depth_less(x, y) : depth_less(y, x)) {
            lo = mid + 1u;
            count -= half_count + 1u;
        } else {
            count = half_count;
        }
    }
    return lo - a;
}

void main() {
    Chunk c = chunk_of_group();
    if (!c.live) {
        return;
    }
    uint passes = merge_passes(c.n);
    if (u_pass >= passes) {
        return;
    }
    uint width = uint(LOCAL_SORT_SIZE) << u_pass;
    // Passes left, this one included, decide where the data is: an odd count means the scratch.
    bool from_scratch = ((passes - u_pass) & 1u) != 0u;
    uint lid = gl_LocalInvocationID.x;
    for (uint k = 0u; k < PER_INVOCATION; ++k) {
        uint i = c.base + lid + k * uint(LOCAL_GROUP_SIZE);
        if (i >= c.base + c.len) {
            break;
        }
        Fragment x = load_fragment(from_scratch, c.first + i);
        uint lo = (i / (2u * width)) * (2u * width);
        uint mid = min(lo + width, c.n);
        uint hi = min(lo + 2u * width, c.n);
        uint dest = i < mid ? i + count_before(from_scratch, c.first + mid, c.first + hi, x, false)
                            : i - mid + lo + count_before(from_scratch, c.first + lo, c.first + mid, x, true);
        if (from_scratch) {
            fragments[c.first + dest] = x;
        } else {
            scratch[c.first + dest] = x;
        }
#if WITH_VALUES
        uint from = (from_scratch ? u_samples : 0u) + c.first;
        uint to = (from_scratch ? 0u : u_samples) + c.first;
        positions[to + dest] = positions[from + i];
#endif
    }
}
#endif

#if STAGE == STAGE_GATHER || STAGE == STAGE_SCATTER
void main() {
    Chunk c = chunk_of_group();
    if (!c.live || merge_passes(c.n) == 0u) {
        return;
    }
    uint lid = gl_LocalInvocationID.x;
    for (uint k = 0u; k < PER_INVOCATION; ++k) {
        uint i = c.base + lid + k * uint(LOCAL_GROUP_SIZE);
        if (i >= c.base + c.len) {
            break;
        }
        uint slot = c.first + i;
#if STAGE == STAGE_GATHER
        uint origin = c.first + positions[slot];
#endif
        for (uint j = 0u; j < 4u; ++j) {
            uint col = u_column0 + j;
            if (col < uint(NUM_COLUMNS)) {
#if STAGE == STAGE_GATHER
                scratch_values[slot * 4u + j] = values[origin * uint(NUM_COLUMNS) + col];
#else
                values[slot * uint(NUM_COLUMNS) + col] = scratch_values[slot * 4u + j];
#endif
            }
        }
    }
}
#endif
