// Scatter a pixel-ordered stream into layout LAYOUT (twin: cpu::build::build). One thread per
// pixel walks its samples in stream order, so LL head insertion gives a deterministic list:
// inserting forward yields a descending list, backward (LL_ASCENDING) an ascending one.
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"
#include "fragment.glsl"

layout(std430, binding = 10) readonly buffer StreamKeys { Fragment stream_keys[]; };
layout(std430, binding = 11) readonly buffer StreamValues { float stream_values[]; };
uniform uint u_pixels;

#define MERGE_DESC 0
#include_as "image.glsl" OUT

void main() {
    uint p = linear_invocation();
    if (p >= u_pixels) {
        return;
    }
    uint start = OUT_offsets[p];
    uint n = OUT_count(p);
    for (uint k = 0u; k < n; ++k) {
#if OUT_LAYOUT == LAYOUT_LL
        uint i = LL_ASCENDING != 0 ? n - 1u - k : k;
        uint slot = atomicAdd(OUT_aux2[0], 1u);
        OUT_aux2[slot] = atomicExchange(OUT_aux1[p], slot);
#else
        uint i = k;
        uint slot = OUT_address(p, i);
#endif
        OUT_keys[slot] = stream_keys[start + i];
#if OUT_VALUES
        for (uint c = 0u; c < NUM_COLUMNS; ++c) {
            OUT_values[slot * NUM_COLUMNS + c] = stream_values[(start + i) * NUM_COLUMNS + c];
        }
#endif
    }
}
