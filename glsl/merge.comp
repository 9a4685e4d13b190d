// Merge the lists of images A (earlier inputs) and B (the next input) at each pixel (twin:
// cpu::merge), stepwise (MERGE_METHOD 0) or with register blocks of BLOCK_SIZE (MERGE_METHOD 1;
// RBM_SHIFT picks constant-index shifting blocks over dynamically indexed ones),
// into a deep image OUT in any layout (OUTPUT_DEEP) or a flat composite (OUTPUT_FLAT). With
// LONG_LISTS, pixels with long lists are only listed, for merge_coop.comp.
//
// Direction: with MERGE_DESC the lists are walked back to front, the largest key is emitted
// first and ties take B first, which is exactly the ascending merge reversed. A descending merge
// feeding LL head insertion yields an ascending list; the host picks directions so that every
// LL list is read the way it was built, and flat output always merges ascending.
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"
#include "fragment.glsl"

uniform uint u_pixels;

#include_as "image.glsl" A
#include_as "image.glsl" B

#if OUTPUT_DEEP
#include_as "image.glsl" OUT
// OUT_STAGED: the group's writes go through shared memory (out_store_key, out_store_value).
#include "out_staging.glsl"
#endif

// The column table (ALPHA_OF: column c's alpha column, or -1 for alphas) and "over" (g_acc).
#include "over.glsl"
#if !OUTPUT_DEEP
// Flat output and the walk that composites it (flat_begin, flat_step, flat_end).
#include "flat_walk.glsl"
#endif

#if LONG_LISTS
// Pixels whose lists hold more than u_long_threshold fragments together are left to
// merge_coop.comp, a workgroup each: listed here (entry 0 counts them, the pixels follow).
uniform uint u_long_threshold;
layout(std430, binding = 15) buffer LongPixels { uint long_pixels[]; };
#endif

// Per-pixel merge state.
uint g_pixel = 0u;
uint g_emitted = 0u;
uint g_total = 0u;

void emit(bool from_b, uint slot) {
    Fragment f = from_b ? B_keys[slot] : A_keys[slot];
#if OUTPUT_DEEP
    uint out_slot;
#if OUT_LAYOUT == LAYOUT_LL
    out_slot = atomicAdd(OUT_aux2[0], 1u);
    OUT_aux2[out_slot] = atomicExchange(OUT_aux1[g_pixel], out_slot);
#else
    // Arrays are stored ascending whatever the merge direction.
    out_slot = OUT_address(g_pixel, MERGE_DESC != 0 ? g_total - 1u - g_emitted : g_emitted);
#endif
    out_store_key(out_slot, f);
#if OUT_VALUES
    for (uint c = 0u; c < NUM_COLUMNS; ++c) {
        out_store_value(out_slot, c,
            from_b ? B_values[slot * NUM_COLUMNS + c] : A_values[slot * NUM_COLUMNS + c]);
    }
#endif
#else
    flat_step(f, from_b, slot);
#endif
    g_emitted += 1u;
}

bool take_b(Fragment fa, Fragment fb) {
#if MERGE_DESC
    return !depth_less(fb, fa);
#else
    return depth_less(fb, fa);
#endif
}

// Whether pixel p is left to merge_coop.comp (listed there by merge_pixel).
bool deferred_to_coop(uint p) {
#if LONG_LISTS
    return p < u_pixels && A_count(p) + B_count(p) > u_long_threshold;
#else
    return false;
#endif
}

// Merge pixel p's two lists (every invocation whose pixel is in the image).
void merge_pixel(uint p) {
    g_pixel = p;
    g_emitted = 0u;
    uint na = A_count(p);
    uint nb = B_count(p);
    g_total = na + nb;
#if LONG_LISTS
    if (g_total > u_long_threshold) {
        long_pixels[1u + atomicAdd(long_pixels[0], 1u)] = p;
        return;
    }
#endif
#if !OUTPUT_DEEP
    flat_begin();
#endif
    uint cursor_a = A_begin(p);
    uint cursor_b = B_begin(p);

#if MERGE_METHOD == 0
    // Stepwise: one fragment of each list in hand.
    uint ia = 0u, ib = 0u;
    uint slot_a = 0u, slot_b = 0u;
    Fragment fa, fb;
    if (na > 0u) { slot_a = A_next_slot(p, na, cursor_a); fa = A_keys[slot_a]; }
    if (nb > 0u) { slot_b = B_next_slot(p, nb, cursor_b); fb = B_keys[slot_b]; }
    while (ia < na && ib < nb) {
        if (take_b(fa, fb)) {
            emit(true, slot_b);
            ib += 1u;
            if (ib < nb) { slot_b = B_next_slot(p, nb, cursor_b); fb = B_keys[slot_b]; }
        } else {
            emit(false, slot_a);
            ia += 1u;
            if (ia < na) { slot_a = A_next_slot(p, na, cursor_a); fa = A_keys[slot_a]; }
        }
    }
    while (ia < na) {
        emit(false, slot_a);
        ia += 1u;
        if (ia < na) { slot_a = A_next_slot(p, na, cursor_a); }
    }
    while (ib < nb) {
        emit(true, slot_b);
        ib += 1u;
        if (ib < nb) { slot_b = B_next_slot(p, nb, cursor_b); }
    }
#elif RBM_SHIFT
    // Register blocks with constant indices only (RBM_SHIFT 1): the head of each block is
    // always element 0, and after every emit the block shifts down by one, in loops of the
    // compile-time bound BLOCK_SIZE that unroll. GPU compilers keep such arrays in registers;
    // the dynamically indexed variant below (block[pos]) can put them in local memory, which is
    // what the paper's register blocks avoid. Same emits in the same order as stepwise.
    Fragment block_a[BLOCK_SIZE];
    Fragment block_b[BLOCK_SIZE];
    uint slots_a[BLOCK_SIZE];
    uint slots_b[BLOCK_SIZE];
    uint read_a = 0u, held_a = 0u;
    uint read_b = 0u, held_b = 0u;
    for (;;) {
        if (held_a == 0u) {
            held_a = min(uint(BLOCK_SIZE), na - read_a);
            for (uint j = 0u; j < uint(BLOCK_SIZE); ++j) {
                if (j < held_a) {
                    slots_a[j] = A_next_slot(p, na, cursor_a);
                    block_a[j] = A_keys[slots_a[j]];
                }
            }
            read_a += held_a;
        }
        if (held_b == 0u) {
            held_b = min(uint(BLOCK_SIZE), nb - read_b);
            for (uint j = 0u; j < uint(BLOCK_SIZE); ++j) {
                if (j < held_b) {
                    slots_b[j] = B_next_slot(p, nb, cursor_b);
                    block_b[j] = B_keys[slots_b[j]];
                }
            }
            read_b += held_b;
        }
        if (held_a == 0u && held_b == 0u) {
            break;
        }
        for (uint k = 0u; k < uint(2 * BLOCK_SIZE); ++k) {
            if (held_a == 0u || held_b == 0u) break;
            if (take_b(block_a[0], block_b[0])) {
                emit(true, slots_b[0]);
                for (uint j = 0u; j + 1u < uint(BLOCK_SIZE); ++j) {
                    block_b[j] = block_b[j + 1u];
                    slots_b[j] = slots_b[j + 1u];
                }
                held_b -= 1u;
            } else {
                emit(false, slots_a[0]);
                for (uint j = 0u; j + 1u < uint(BLOCK_SIZE); ++j) {
                    block_a[j] = block_a[j + 1u];
                    slots_a[j] = slots_a[j + 1u];
                }
                held_a -= 1u;
            }
        }
        // A list whose refill found nothing is finished: drain the other block.
        if (read_a == na && held_a == 0u) {
            for (uint j = 0u; j < uint(BLOCK_SIZE); ++j) {
                if (j < held_b) emit(true, slots_b[j]);
            }
            held_b = 0u;
        } else if (read_b == nb && held_b == 0u) {
            for (uint j = 0u; j < uint(BLOCK_SIZE); ++j) {
                if (j < held_a) emit(false, slots_a[j]);
            }
            held_a = 0u;
        }
    }
#else
    // Register blocks with a dynamic index (RBM_SHIFT 0): every loop over a block has the
    // compile-time bound BLOCK_SIZE (with an
    // early exit). The comparison reads block[pos], a dynamic index, which is cheap on llvmpipe
    // (the shifting variant above was 2x slower there) but may live in local memory on a GPU.
    Fragment block_a[BLOCK_SIZE];
    Fragment block_b[BLOCK_SIZE];
    uint slots_a[BLOCK_SIZE];
    uint slots_b[BLOCK_SIZE];
    uint read_a = 0u, held_a = 0u, pos_a = 0u;
    uint read_b = 0u, held_b = 0u, pos_b = 0u;
    for (;;) {
        if (pos_a == held_a) {
            held_a = min(uint(BLOCK_SIZE), na - read_a);
            for (uint j = 0u; j < uint(BLOCK_SIZE); ++j) {
                if (j >= held_a) break;
                slots_a[j] = A_next_slot(p, na, cursor_a);
                block_a[j] = A_keys[slots_a[j]];
            }
            read_a += held_a;
            pos_a = 0u;
        }
        if (pos_b == held_b) {
            held_b = min(uint(BLOCK_SIZE), nb - read_b);
            for (uint j = 0u; j < uint(BLOCK_SIZE); ++j) {
                if (j >= held_b) break;
                slots_b[j] = B_next_slot(p, nb, cursor_b);
                block_b[j] = B_keys[slots_b[j]];
            }
            read_b += held_b;
            pos_b = 0u;
        }
        if (held_a == 0u && held_b == 0u) {
            break;
        }
        for (uint k = 0u; k < uint(2 * BLOCK_SIZE); ++k) {
            if (pos_a == held_a || pos_b == held_b) break;
            if (take_b(block_a[pos_a], block_b[pos_b])) {
                emit(true, slots_b[pos_b]);
                pos_b += 1u;
            } else {
                emit(false, slots_a[pos_a]);
                pos_a += 1u;
            }
        }
        // A list whose refill found nothing is finished: drain the other block.
        if (held_a == 0u) {
            for (uint j = 0u; j < uint(BLOCK_SIZE); ++j) {
                if (j >= held_b) break;
                if (j >= pos_b) emit(true, slots_b[j]);
            }
            pos_b = held_b;
        } else if (held_b == 0u) {
            for (uint j = 0u; j < uint(BLOCK_SIZE); ++j) {
                if (j >= held_a) break;
                if (j >= pos_a) emit(false, slots_a[j]);
            }
            pos_a = held_a;
        }
    }
#endif

#if !OUTPUT_DEEP
    flat_end(p);
#endif
}

void main() {
    uint p = linear_invocation();
#if OUTPUT_DEEP
    // Every invocation of the group, past the last pixel too: the staging has barriers.
    out_staging_begin(deferred_to_coop(p));
#endif
    if (p < u_pixels) {
        merge_pixel(p);
    }
#if OUTPUT_DEEP
    out_staging_end();
#endif
}
