// The flat composite of one pixel, fed its merged fragments front to back: "over" (over.glsl)
// with the reference's arithmetic, the front-most sample with any alpha above 0 (its ids and Z
// go to flat output), and composite::tidy::needs_tidy sample by sample. The one home of that
// walk for merge.comp (as it emits) and merge_coop.comp (after a cooperative merge), so both
// run the same operations in the same order. Needs images A and B and over.glsl.
//
// Output: NUM_COLUMNS values per pixel, and per pixel (input, index, Z bits, flags) of the
// front-most contributing sample. Flags: 1 = has a front sample, 2 = needs tidying.
layout(std430, binding = 10) writeonly buffer FlatValues { float flat_values[]; };
layout(std430, binding = 11) writeonly buffer FlatFront { uvec4 flat_front[]; };
// How many pixels were flagged 2: when none is, nothing else needs to look at the flags, so
// inputs made only of points pay one 4-byte read for the tidy path (issue 4).
layout(std430, binding = 12) buffer FlaggedCount { uint flagged_count; };

bool g_done = false;
bool g_has_front = false;
bool g_needs_tidy = false;
float g_reach = 0.0;
Fragment g_front = Fragment(0.0, 0.0, 0u, 0u);

void flat_begin() {
    for (int c = 0; c < NUM_COLUMNS; ++c) {
        g_acc[c] = 0.0;
    }
    g_done = false;
    g_has_front = false;
    g_needs_tidy = false;
    g_reach = uintBitsToFloat(0xff800000u); // -infinity
}

// The next fragment f, in B's slot `slot` when from_b, else in A's.
void flat_step(Fragment f, bool from_b, uint slot) {
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
            v[c] = from_b ? B_values[slot * NUM_COLUMNS + c] : A_values[slot * NUM_COLUMNS + c];
        }
        if (!g_has_front && over_contributes(v)) {
            g_has_front = true;
            g_front = f;
        }
        over(v);
    }
}

// Write pixel p's composite and front record.
void flat_end(uint p) {
    for (int c = 0; c < NUM_COLUMNS; ++c) {
        flat_values[p * uint(NUM_COLUMNS) + uint(c)] = g_acc[c];
    }
    uint flags = (g_has_front ? 1u : 0u) | (g_needs_tidy ? 2u : 0u);
    if (g_needs_tidy) atomicAdd(flagged_count, 1u);
    flat_front[p] = g_has_front
        ? uvec4(g_front.input_index, g_front.sample_index, floatBitsToUint(g_front.z), flags)
        : uvec4(0u, 0u, 0u, flags);
}
