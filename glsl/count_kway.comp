// Counting pass of a k-way merge's output (twin: cpu::merge::merge_kway_built): each pixel of
// the band holds as many samples as all NUM_INPUTS inputs of the stacked image IN together;
// input k's pixel p is stacked pixel k * u_stride + p (see merge_kway.comp).
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"

layout(std430, binding = 0) readonly buffer InOffsets { uint in_offsets[]; };
layout(std430, binding = 1) writeonly buffer CountsOut { uint counts_out[]; };
uniform uint u_pixels;
uniform uint u_stride;

void main() {
    uint p = linear_invocation();
    if (p < u_pixels) {
        uint n = 0u;
        for (uint k = 0u; k < uint(NUM_INPUTS); ++k) {
            uint q = k * u_stride + p;
            n += in_offsets[q + 1u] - in_offsets[q];
        }
        counts_out[p] = n;
    }
}
