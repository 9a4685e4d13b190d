// Per layout pixel of a band, how many samples one input holds there (twin:
// cpu::gather::gather_counts): the counts a build scans, written at u_count_base + p (an input's
// slice of a stacked k-way image).
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"
#include "gather.glsl"

layout(std430, binding = 0) writeonly buffer Counts { uint counts[]; };
uniform uint u_count_base;

void main() {
    uint p = linear_invocation();
    if (p >= u_pixels) {
        return;
    }
    int i = source_pixel(p);
    counts[u_count_base + p] = i < 0 ? 0u : source_offsets[i + 1] - source_offsets[i];
}
