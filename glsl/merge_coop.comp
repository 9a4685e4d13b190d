// The cooperative schedule of merge.comp's merge (twin: cpu::merge, the same merge): each pixel
// that merge.comp listed as long (LONG_LISTS) is merged by a workgroup of COOP_GROUP invocations
// instead of one. Groups take the listed pixels in turn (group g: entries g, g + groups, ...), so
// the dispatch needs no count from the host.
//
// Per pixel, every fragment finds its place in the merged list by rank, in parallel: A's
// fragment i (ascending index) lands at i + #{B fragments strictly before it}, B's fragment j at
// j + #{A fragments not after it}, each count a binary search of the other list. That is the
// stable merge merge.comp runs: ascending, ties take A (the earlier inputs) first; descending
// (MERGE_DESC), the ascending merge reversed, so arrays get the same positions and an LL list
// the same links. The rank only holds on sorted lists, so the group first checks that every
// list is sorted (depth_less never true of a fragment and the one before it); a pixel whose
// lists are not (an input trusted to be sorted that is not) is merged by one invocation,
// stepwise, walking the way merge.comp walks, so the output is merge.comp's bit for bit anyway.
//
// Output, the positions merge.comp writes: deep arrays at OUT_address(p, position); an LL list
// takes a run of nodes from the node counter, linked as head insertion in merge.comp's emit
// order would link them; flat output composites the pixel in one invocation (flat_walk.glsl,
// front to back as merge.comp does) from the merged order the group wrote into the scratch, so
// the order-dependent "over" sums are never reassociated.
//
// LL lists cannot be indexed: the group walks them once into the scratch (A by invocation 0, B
// by invocation 1) and indexes that.
layout(local_size_x = COOP_GROUP) in;
#include "common.glsl"
#include "fragment.glsl"

uniform uint u_pixels;
// Scratch words before the LL walks' slots (A's at A_offsets[p], B's after u_a_samples more).
uniform uint u_walk_base;
uniform uint u_a_samples;
// Scratch words before the merged order of flat output (pixel p's at A_offsets[p] + B_offsets[p]).
uniform uint u_order_base;

#include_as "image.glsl" A
#include_as "image.glsl" B
#if OUTPUT_DEEP
#include_as "image.glsl" OUT
#endif

#include "over.glsl"
#if !OUTPUT_DEEP
#include "flat_walk.glsl"
#endif

// Entry 0: the long pixels listed by merge.comp; entries 1..: the pixels; from u_walk_base and
// u_order_base, the scratch described above. Coherent: invocations of a group read what others
// of the group wrote, after memoryBarrierBuffer and barrier.
layout(std430, binding = 15) coherent buffer CoopScratch { uint coop[]; };

// A slot in the merged order: bit 31 says it is B's (slots stay below 2^28: 16-byte keys in a
// storage block the host checks).
const uint FROM_B = 0x80000000u;

shared bool s_unsorted;
shared uint s_node_base;
shared uint s_old_head;

// Slot of A's fragment at ascending index i of pixel p (na fragments).
uint a_slot(uint p, uint na, uint i) {
#if A_LAYOUT == LAYOUT_LL
    // Walked in the list's own order: against the merge's direction when descending.
    uint k = MERGE_DESC != 0 ? na - 1u - i : i;
    return coop[u_walk_base + A_offsets[p] + k];
#else
    return A_address(p, i);
#endif
}

uint b_slot(uint p, uint nb, uint i) {
#if B_LAYOUT == LAYOUT_LL
    uint k = MERGE_DESC != 0 ? nb - 1u - i : i;
    return coop[u_walk_base + u_a_samples + B_offsets[p] + k];
#else
    return B_address(p, i);
#endif
}

// How many of B's fragments come strictly before f (depth_less), on a sorted list.
uint b_before(uint p, uint nb, Fragment f) {
    uint lo = 0u, hi = nb;
    while (lo < hi) {
        uint mid = (lo + hi) / 2u;
        if (depth_less(B_keys[b_slot(p, nb, mid)], f)) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// How many of A's fragments are not after f (!depth_less(f, a)), on a sorted list.
uint a_not_after(uint p, uint na, Fragment f) {
    uint lo = 0u, hi = na;
    while (lo < hi) {
        uint mid = (lo + hi) / 2u;
        if (!depth_less(f, A_keys[a_slot(p, na, mid)])) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// Put the fragment in `slot` of B (from_b) or A at ascending position `pos` of pixel p's merged
// list of n: written out (deep), or recorded in the merged order (flat).
void place(uint p, uint n, uint pos, bool from_b, uint slot) {
#if OUTPUT_DEEP
#if OUT_LAYOUT == LAYOUT_LL
    // merge.comp head-inserts in emit order: ascending, each node links to the one before it
    // and the last is the head; descending, each links to the one after it and the first is
    // the head; the end links to the head the pixel had (none: the output is fresh).
    uint out_slot = s_node_base + pos;
    uint end = MERGE_DESC != 0 ? n - 1u : 0u;
    uint next = MERGE_DESC != 0 ? out_slot + 1u : out_slot - 1u;
    OUT_aux2[out_slot] = pos == end ? s_old_head : next;
#else
    uint out_slot = OUT_address(p, pos);
#endif
    OUT_keys[out_slot] = from_b ? B_keys[slot] : A_keys[slot];
#if OUT_VALUES
    for (uint c = 0u; c < NUM_COLUMNS; ++c) {
        OUT_values[out_slot * NUM_COLUMNS + c] =
            from_b ? B_values[slot * NUM_COLUMNS + c] : A_values[slot * NUM_COLUMNS + c];
    }
#endif
#else
    coop[u_order_base + A_offsets[p] + B_offsets[p] + pos] = slot | (from_b ? FROM_B : 0u);
#endif
}

// merge.comp's stepwise merge in one invocation, on the indexed lists: emit k goes to position
// k, or n - 1 - k descending (arrays are stored ascending).
void merge_serial(uint p, uint na, uint nb) {
    uint n = na + nb;
    uint ia = 0u, ib = 0u;
    for (uint k = 0u; k < n; ++k) {
        uint pos = MERGE_DESC != 0 ? n - 1u - k : k;
        // The next fragment of each list in the merge's direction.
        uint sa = ia < na ? a_slot(p, na, MERGE_DESC != 0 ? na - 1u - ia : ia) : 0u;
        uint sb = ib < nb ? b_slot(p, nb, MERGE_DESC != 0 ? nb - 1u - ib : ib) : 0u;
        bool from_b;
        if (ia == na) {
            from_b = true;
        } else if (ib == nb) {
            from_b = false;
        } else {
#if MERGE_DESC
            from_b = !depth_less(B_keys[sb], A_keys[sa]);
#else
            from_b = depth_less(B_keys[sb], A_keys[sa]);
#endif
        }
        if (from_b) {
            place(p, n, pos, true, sb);
            ib += 1u;
        } else {
            place(p, n, pos, false, sa);
            ia += 1u;
        }
    }
}

void merge_pixel(uint p) {
    uint t = gl_LocalInvocationID.x;
    uint na = A_count(p);
    uint nb = B_count(p);
    uint n = na + nb;
    if (t == 0u) {
        s_unsorted = false;
#if OUTPUT_DEEP && OUT_LAYOUT == LAYOUT_LL
        s_node_base = atomicAdd(OUT_aux2[0], n);
        s_old_head = OUT_aux1[p];
#endif
    }
#if A_LAYOUT == LAYOUT_LL || B_LAYOUT == LAYOUT_LL
    if (t == 0u) {
        uint cursor = A_begin(p);
        for (uint k = 0u; k < na; ++k) {
            coop[u_walk_base + A_offsets[p] + k] = A_next_slot(p, na, cursor);
        }
    }
    if (t == uint(COOP_GROUP - 1)) {
        uint cursor = B_begin(p);
        for (uint k = 0u; k < nb; ++k) {
            coop[u_walk_base + u_a_samples + B_offsets[p] + k] = B_next_slot(p, nb, cursor);
        }
    }
#endif
    memoryBarrierBuffer();
    barrier();
    // Sorted? Each fragment against the one before it.
    bool unsorted = false;
    for (uint i = t + 1u; i < na; i += uint(COOP_GROUP)) {
        unsorted = unsorted || depth_less(A_keys[a_slot(p, na, i)], A_keys[a_slot(p, na, i - 1u)]);
    }
    for (uint j = t + 1u; j < nb; j += uint(COOP_GROUP)) {
        unsorted = unsorted || depth_less(B_keys[b_slot(p, nb, j)], B_keys[b_slot(p, nb, j - 1u)]);
    }
    if (unsorted) {
        s_unsorted = true;
    }
    barrier();
    if (s_unsorted) {
        if (t == 0u) {
            merge_serial(p, na, nb);
        }
    } else {
        for (uint i = t; i < na; i += uint(COOP_GROUP)) {
            uint slot = a_slot(p, na, i);
            place(p, n, i + b_before(p, nb, A_keys[slot]), false, slot);
        }
        for (uint j = t; j < nb; j += uint(COOP_GROUP)) {
            uint slot = b_slot(p, nb, j);
            place(p, n, j + a_not_after(p, na, B_keys[slot]), true, slot);
        }
    }
#if OUTPUT_DEEP && OUT_LAYOUT == LAYOUT_LL
    if (t == 0u) {
        OUT_aux1[p] = s_node_base + (MERGE_DESC != 0 ? 0u : n - 1u);
    }
#endif
#if !OUTPUT_DEEP
    memoryBarrierBuffer();
    barrier();
    if (t == 0u) {
        // Front to back in one invocation, as merge.comp composites.
        flat_begin();
        uint first = u_order_base + A_offsets[p] + B_offsets[p];
        for (uint k = 0u; k < n; ++k) {
            uint entry = coop[first + k];
            bool from_b = (entry & FROM_B) != 0u;
            uint slot = entry & ~FROM_B;
            flat_step(from_b ? B_keys[slot] : A_keys[slot], from_b, slot);
        }
        flat_end(p);
    }
#endif
    // The next pixel reuses the shared flags.
    barrier();
}

void main() {
    uint groups = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
    uint listed = coop[0];
    for (uint e = linear_group(); e < listed; e += groups) {
        merge_pixel(coop[1u + e]);
    }
}
