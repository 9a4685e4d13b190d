// Per group of GROUP_SIZE pixels, the smallest count (IA), rounded down to BLOCK_SIZE for BIA
// (twin: vocab::layout::group_min_counts). One thread per group.
layout(local_size_x = 64) in;
#include "common.glsl"
#include "fragment.glsl"

layout(std430, binding = 0) readonly buffer OffsetsBuf { uint offsets[]; };
layout(std430, binding = 1) writeonly buffer MinBuf { uint min_counts[]; };
uniform uint u_pixels;

void main() {
    uint g = linear_invocation();
    uint first = g * uint(GROUP_SIZE);
    if (first >= u_pixels) {
        return;
    }
    uint last = min(first + uint(GROUP_SIZE), u_pixels);
    uint m = 0xffffffffu;
    for (uint p = first; p < last; ++p) {
        m = min(m, offsets[p + 1u] - offsets[p]);
    }
#if LAYOUT == LAYOUT_BIA
    m -= m % uint(BLOCK_SIZE);
#endif
    min_counts[g] = m;
}
