// Merge NUM_INPUTS sorted lists per pixel in one pass (the paper's future work: k-way merging;
// twin: cpu::merge::merge_kway), into a deep image OUT in any layout (OUTPUT_DEEP) or a flat
// composite (OUTPUT_FLAT), with exactly the order of merge.comp's pairwise chain: at each step
// the smallest (Z, ZBack) key among the inputs' current fragments, ties to the lowest input.
//
// The inputs arrive as ONE stacked image IN (built by build.comp like any image, in any
// layout): input k's pixel p is IN's pixel k * u_stride + p, with u_stride the band's pixel
// count rounded up to GROUP_SIZE, so every input's interleaving groups line up with the
// threads' groups. One image instead of NUM_INPUTS keeps the SSBO bindings at 5 + output
// (GL guarantees only 8 per stage; llvmpipe offers 16). Lists are walked front to back (an LL
// input is built ascending); an LL output comes out reversed, as from an ascending merge.
//
// Stepwise reads only: each input keeps one fragment in hand. Register blocks of BLOCK_SIZE per
// input would need NUM_INPUTS x BLOCK_SIZE fragments per thread, far beyond the registers, so
// MergeMethod::RegisterBlock merges k-way exactly as stepwise does (BIA still uses BLOCK_SIZE).
// Every loop over the inputs has the compile-time bound NUM_INPUTS and indexes the per-input
// arrays with its loop counter only, so the compiler can unroll it and keep them in registers.
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"
#include "fragment.glsl"

// Pixels of the band (one invocation each); IN has NUM_INPUTS * u_stride pixels.
uniform uint u_pixels;
uniform uint u_stride;
uniform uint u_in_pixels;

#define MERGE_DESC 0
#define IN_PIXELS u_in_pixels
#include_as "image.glsl" IN

#if OUTPUT_DEEP
#include_as "image.glsl" OUT
// OUT_STAGED: the group's writes go through shared memory (out_store_key, out_store_value).
#include "out_staging.glsl"
#else
// Flat output, as merge.comp writes it: NUM_COLUMNS values per pixel, and per pixel (input,
// index, Z bits, flags) of the front-most sample with any alpha above 0. Flags: 1 = has a front
// sample, 2 = needs tidying; flagged_count counts the pixels flagged 2.
layout(std430, binding = 10) writeonly buffer FlatValues { float flat_values[]; };
layout(std430, binding = 11) writeonly buffer FlatFront { uvec4 flat_front[]; };
layout(std430, binding = 12) buffer FlaggedCount { uint flagged_count; };
#endif

#include "over.glsl"

// Set per pixel in main(); the initialisers keep Mesa's "used uninitialized" warnings (KHR_debug
// messages, which strict mode fails on) away from emit().
uint g_pixel = 0u;
uint g_emitted = 0u;
#if !OUTPUT_DEEP
bool g_done = false;
bool g_has_front = false;
bool g_needs_tidy = false;
float g_reach = 0.0;
Fragment g_front = Fragment(0.0, 0.0, 0u, 0u);
#endif

// merge.comp's emit, for a fragment in IN's slot `slot`.
void emit(uint slot) {
    Fragment f = IN_keys[slot];
#if OUTPUT_DEEP
    uint out_slot;
#if OUT_LAYOUT == LAYOUT_LL
    out_slot = atomicAdd(OUT_aux2[0], 1u);
    OUT_aux2[out_slot] = atomicExchange(OUT_aux1[g_pixel], out_slot);
#else
    out_slot = OUT_address(g_pixel, g_emitted);
#endif
    out_store_key(out_slot, f);
#if OUT_VALUES
    for (uint c = 0u; c < NUM_COLUMNS; ++c) {
        out_store_value(out_slot, c, IN_values[slot * NUM_COLUMNS + c]);
    }
#endif
#else
    // composite::tidy::needs_tidy, sample by sample.
    if (f.z < g_reach) {
        g_needs_tidy = true;
    }
    if (f.zback > f.z) {
        g_reach = max(g_reach, f.zback);
    }
    g_done = g_done || over_opaque();
    if (!g_done) {
        float v[NUM_COLUMNS];
        for (uint c = 0u; c < NUM_COLUMNS; ++c) {
            v[c] = IN_values[slot * NUM_COLUMNS + c];
        }
        if (!g_has_front && over_contributes(v)) {
            g_has_front = true;
            g_front = f;
        }
        over(v);
    }
#endif
    g_emitted += 1u;
}

// Merge pixel p's lists (every invocation whose pixel is in the band).
void merge_pixel(uint p) {
    g_pixel = p;
    g_emitted = 0u;
#if !OUTPUT_DEEP
    for (int c = 0; c < NUM_COLUMNS; ++c) {
        g_acc[c] = 0.0;
    }
    g_done = false;
    g_has_front = false;
    g_needs_tidy = false;
    g_reach = uintBitsToFloat(0xff800000u); // -infinity
#endif
    // Per input: samples, samples not yet emitted, list cursor, slot and key of the one in hand.
    uint count[NUM_INPUTS];
    uint left[NUM_INPUTS];
    uint cursor[NUM_INPUTS];
    uint slot[NUM_INPUTS];
    Fragment head[NUM_INPUTS];
    for (uint k = 0u; k < uint(NUM_INPUTS); ++k) {
        uint q = k * u_stride + p;
        count[k] = IN_count(q);
        left[k] = count[k];
        cursor[k] = IN_begin(q);
        slot[k] = 0u;
        if (count[k] > 0u) {
            slot[k] = IN_next_slot(q, count[k], cursor[k]);
            head[k] = IN_keys[slot[k]];
        }
    }
    for (;;) {
        // The smallest key in hand; a strict comparison keeps the lowest input on ties.
        uint best = uint(NUM_INPUTS);
        Fragment best_key = Fragment(0.0, 0.0, 0u, 0u); // read only once `best` is set
        for (uint k = 0u; k < uint(NUM_INPUTS); ++k) {
            if (left[k] > 0u && (best == uint(NUM_INPUTS) || depth_less(head[k], best_key))) {
                best = k;
                best_key = head[k];
            }
        }
        if (best == uint(NUM_INPUTS)) {
            break;
        }
        for (uint k = 0u; k < uint(NUM_INPUTS); ++k) {
            if (k == best) {
                emit(slot[k]);
                left[k] -= 1u;
                if (left[k] > 0u) {
                    slot[k] = IN_next_slot(k * u_stride + p, count[k], cursor[k]);
                    head[k] = IN_keys[slot[k]];
                }
            }
        }
    }

#if !OUTPUT_DEEP
    for (int c = 0; c < NUM_COLUMNS; ++c) {
        flat_values[p * uint(NUM_COLUMNS) + uint(c)] = g_acc[c];
    }
    uint flags = (g_has_front ? 1u : 0u) | (g_needs_tidy ? 2u : 0u);
    if (g_needs_tidy) atomicAdd(flagged_count, 1u);
    flat_front[p] = g_has_front
        ? uvec4(g_front.input_index, g_front.sample_index, floatBitsToUint(g_front.z), flags)
        : uvec4(0u, 0u, 0u, flags);
#endif
}

void main() {
    uint p = linear_invocation();
#if OUTPUT_DEEP
    // Every invocation of the group, past the last pixel too: the staging has barriers.
    out_staging_begin(false);
#endif
    if (p < u_pixels) {
        merge_pixel(p);
    }
#if OUTPUT_DEEP
    out_staging_end();
#endif
}
