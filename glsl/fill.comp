// Zero a buffer on the GPU, one uvec4 per invocation: large buffers start zeroed without a
// host-side buffer of zeros crossing the bus (GlContext::zeroed).
layout(local_size_x = 64) in;
#include "common.glsl"

layout(std430, binding = 0) writeonly buffer Dst { uvec4 dst[]; };
uniform uint u_n;

void main() {
    uint i = linear_invocation();
    if (i < u_n) {
        dst[i] = uvec4(0u);
    }
}
