// Per-pixel stable sort of a linearised (CSR) fragment buffer, in place (twin: cpu::sort).
// Pixel p owns slots [offsets[p], offsets[p + 1]); one invocation sorts one pixel into merge
// order (DESIGN §4): by depth_less, equal keys keeping their original order.
//
// 1. A pixel already in order is left alone (one read pass): sorted inputs cost no writes.
// 2. Register block sort: every chunk of REG_SORT_SIZE slots is loaded into a local array and
//    sorted by odd-even transposition, a sorting network of adjacent compare-exchanges with
//    compile-time loop bounds, so the array stays in registers. It only ever swaps neighbours
//    that are strictly out of order, which makes it stable without a tie-break key.
// 3. Lists longer than one chunk: bottom-up merges of the sorted runs (widths REG_SORT_SIZE,
//    2·REG_SORT_SIZE, ...), ping-ponging between the fragment buffer and a scratch buffer of the
//    same size at the same slots (each pixel only touches its own range, so passes need no
//    barrier). A merge takes the right run's head only when it is strictly less: stable.
//    This is the paper's register block sort plus a bounded fallback in place of backwards
//    memory allocation: any length works with O(n log(n / REG_SORT_SIZE)) global traffic.
// 4. WITH_VALUES: every element carries its original position through 2-3; the pixel's
//    NUM_COLUMNS values per slot are then permuted in place by following the permutation's
//    cycles (positions are marked done with the top bit), so no second value buffer is needed.
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"
#include "fragment.glsl"

layout(std430, binding = 0) readonly buffer Offsets { uint offsets[]; };
layout(std430, binding = 1) buffer Fragments { Fragment fragments[]; };
layout(std430, binding = 2) buffer Scratch { Fragment scratch[]; };
#if WITH_VALUES
layout(std430, binding = 3) buffer Values { float values[]; };
// [0, u_samples): original position (inside its pixel) of the element now at each slot;
// [u_samples, 2·u_samples): the same for the scratch buffer.
layout(std430, binding = 4) buffer Positions { uint positions[]; };
#endif
uniform uint u_pixels;
uniform uint u_samples;

// Positions are below 2^31 (a storage block holds far fewer slots), so the top bit is free.
const uint POSITION_DONE = 0x80000000u;

Fragment load_fragment(bool from_scratch, uint slot) {
    return from_scratch ? scratch[slot] : fragments[slot];
}

void store_fragment(bool to_scratch, uint slot, Fragment f) {
    if (to_scratch) {
        scratch[slot] = f;
    } else {
        fragments[slot] = f;
    }
}

#if WITH_VALUES
uint load_position(bool from_scratch, uint slot) {
    return positions[(from_scratch ? u_samples : 0u) + slot];
}

void store_position(bool to_scratch, uint slot, uint position) {
    positions[(to_scratch ? u_samples : 0u) + slot] = position;
}
#endif

// Sort slots [first, first + len) (len <= REG_SORT_SIZE) in registers; `position0` is the
// position of `first` inside its pixel.
void register_block_sort(uint first, uint len, uint position0) {
    Fragment reg[REG_SORT_SIZE];
#if WITH_VALUES
    uint pos[REG_SORT_SIZE];
#endif
    for (int i = 0; i < REG_SORT_SIZE; ++i) {
        if (uint(i) < len) {
            reg[i] = fragments[first + uint(i)];
#if WITH_VALUES
            pos[i] = position0 + uint(i);
#endif
        }
    }
    // Odd-even transposition: REG_SORT_SIZE phases (even pairs, then odd pairs, repeated) sort
    // any REG_SORT_SIZE elements. Pairs past `len` are skipped, so padding never moves.
    for (int round = 0; round < (REG_SORT_SIZE + 1) / 2; ++round) {
        bool swapped = false;
        for (int phase = 0; phase < 2; ++phase) {
            for (int j = 0; j + 1 < REG_SORT_SIZE; j += 2) {
                int a = j + phase;
                if (a + 1 < REG_SORT_SIZE && uint(a + 1) < len && depth_less(reg[a + 1], reg[a])) {
                    Fragment t = reg[a];
                    reg[a] = reg[a + 1];
                    reg[a + 1] = t;
#if WITH_VALUES
                    uint tp = pos[a];
                    pos[a] = pos[a + 1];
                    pos[a + 1] = tp;
#endif
                    swapped = true;
                }
            }
        }
        if (!swapped) {
            break;
        }
    }
    for (int i = 0; i < REG_SORT_SIZE; ++i) {
        if (uint(i) < len) {
            fragments[first + uint(i)] = reg[i];
#if WITH_VALUES
            store_position(false, first + uint(i), pos[i]);
#endif
        }
    }
}

// Stable merge of the sorted runs [lo, mid) and [mid, hi) of one buffer into the other.
void merge_runs(bool from_scratch, uint lo, uint mid, uint hi) {
    bool to_scratch = !from_scratch;
    uint i = lo;
    uint j = mid;
    uint out_slot = lo;
    if (i < mid && j < hi) {
        Fragment a = load_fragment(from_scratch, i);
        Fragment b = load_fragment(from_scratch, j);
        while (true) {
            if (depth_less(b, a)) {
                store_fragment(to_scratch, out_slot, b);
#if WITH_VALUES
                store_position(to_scratch, out_slot, load_position(from_scratch, j));
#endif
                ++out_slot;
                if (++j == hi) {
                    break;
                }
                b = load_fragment(from_scratch, j);
            } else {
                store_fragment(to_scratch, out_slot, a);
#if WITH_VALUES
                store_position(to_scratch, out_slot, load_position(from_scratch, i));
#endif
                ++out_slot;
                if (++i == mid) {
                    break;
                }
                a = load_fragment(from_scratch, i);
            }
        }
    }
    // One run is used up; the rest of the other is already in place order.
    for (; i < mid; ++i, ++out_slot) {
        store_fragment(to_scratch, out_slot, load_fragment(from_scratch, i));
#if WITH_VALUES
        store_position(to_scratch, out_slot, load_position(from_scratch, i));
#endif
    }
    for (; j < hi; ++j, ++out_slot) {
        store_fragment(to_scratch, out_slot, load_fragment(from_scratch, j));
#if WITH_VALUES
        store_position(to_scratch, out_slot, load_position(from_scratch, j));
#endif
    }
}

#if WITH_VALUES
// Apply the sort's permutation to the values of slots [first, first + n) in place.
void permute_values(uint first, uint n) {
    for (uint start = 0u; start < n; ++start) {
        uint origin = positions[first + start];
        if ((origin & POSITION_DONE) != 0u) {
            continue;
        }
        if (origin == start) {
            positions[first + start] = origin | POSITION_DONE;
            continue;
        }
        float held[NUM_COLUMNS];
        for (int c = 0; c < NUM_COLUMNS; ++c) {
            held[c] = values[(first + start) * uint(NUM_COLUMNS) + uint(c)];
        }
        // Slot `target` takes the values of slot `origin`, which then takes its own origin's,
        // until the cycle comes back to `start`, whose values were held aside.
        uint target = start;
        while (true) {
            origin = positions[first + target];
            positions[first + target] = origin | POSITION_DONE;
            if (origin == start) {
                for (int c = 0; c < NUM_COLUMNS; ++c) {
                    values[(first + target) * uint(NUM_COLUMNS) + uint(c)] = held[c];
                }
                break;
            }
            for (int c = 0; c < NUM_COLUMNS; ++c) {
                values[(first + target) * uint(NUM_COLUMNS) + uint(c)] =
                    values[(first + origin) * uint(NUM_COLUMNS) + uint(c)];
            }
            target = origin;
        }
    }
}
#endif

void main() {
    uint p = linear_invocation();
    if (p >= u_pixels) {
        return;
    }
    uint first = offsets[p];
    uint n = offsets[p + 1u] - first;
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
    for (uint chunk = 0u; chunk < n; chunk += uint(REG_SORT_SIZE)) {
        register_block_sort(first + chunk, min(uint(REG_SORT_SIZE), n - chunk), chunk);
    }
    bool in_scratch = false;
    for (uint width = uint(REG_SORT_SIZE); width < n; width *= 2u) {
        for (uint lo = 0u; lo < n; lo += 2u * width) {
            uint mid = min(lo + width, n);
            uint hi = min(lo + 2u * width, n);
            merge_runs(in_scratch, first + lo, first + mid, first + hi);
        }
        in_scratch = !in_scratch;
    }
    if (in_scratch) {
        for (uint i = 0u; i < n; ++i) {
            fragments[first + i] = scratch[first + i];
#if WITH_VALUES
            positions[first + i] = positions[u_samples + first + i];
#endif
        }
    }
#if WITH_VALUES
    permute_values(first, n);
#endif
}
