// Counting pass of a merge's output: each pixel holds as many samples as both inputs together.
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"

layout(std430, binding = 0) readonly buffer OffsetsA { uint offsets_a[]; };
layout(std430, binding = 1) readonly buffer OffsetsB { uint offsets_b[]; };
layout(std430, binding = 2) writeonly buffer CountsOut { uint counts_out[]; };
uniform uint u_pixels;

void main() {
    uint p = linear_invocation();
    if (p < u_pixels) {
        counts_out[p] = offsets_a[p + 1u] - offsets_a[p] + offsets_b[p + 1u] - offsets_b[p];
    }
}
