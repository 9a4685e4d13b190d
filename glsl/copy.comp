// Plain buffer copy, one uvec4 per thread: the memory-bandwidth floor the merges are compared to.
layout(local_size_x = 64) in;
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uvec4 dst[]; };
uniform uint u_n;

void main() {
    uint i = linear_invocation();
    if (i < u_n) {
        dst[i] = src[i];
    }
}
