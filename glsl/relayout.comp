// Rewrite deep image IN into OUT, the same pixels, counts and offsets in another layout, one
// invocation per OUT slot in slot order (twin: cpu::relayout::relayout). A merge writes its deep
// output one pixel per invocation, each into its own run of slots, so into a linearised image
// the writes of neighbouring invocations land far apart; merging into an interleaved image (whose
// writes lie side by side) and relaying it out here makes both passes' writes coalesce, at the
// price of one more copy (`GlOptions::deep_writes`). The reads here gather instead.
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"
#include "fragment.glsl"

uniform uint u_pixels;
uniform uint u_samples;

// image.glsl's list walker reads it; the relayout addresses slots itself.
#define MERGE_DESC 0

#include_as "image.glsl" IN
#include_as "image.glsl" OUT

void main() {
    uint s = linear_invocation();
    if (s >= u_samples) {
        return;
    }
    uint p = IN_pixel_holding(s);
    uint i = s - IN_offsets[p];
    uint from = IN_address(p, i);
    uint to = OUT_address(p, i);
    OUT_keys[to] = IN_keys[from];
#if OUT_VALUES
    for (uint c = 0u; c < NUM_COLUMNS; ++c) {
        OUT_values[to * NUM_COLUMNS + c] = IN_values[from * NUM_COLUMNS + c];
    }
#endif
}
