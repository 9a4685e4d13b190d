// Work-group exclusive scan (twin: cpu::scan::exclusive_scan): each group of SCAN_GROUP threads
// scans SCAN_GROUP counts in shared memory (Hillis-Steele, double-buffered), writes the local
// exclusive sums and its group total. scan_add.comp then adds the scanned group totals.
layout(local_size_x = SCAN_GROUP) in;
#include "common.glsl"

layout(std430, binding = 0) readonly buffer InBuf { uint values_in[]; };
layout(std430, binding = 1) writeonly buffer OutBuf { uint values_out[]; };
layout(std430, binding = 2) writeonly buffer SumsBuf { uint group_sums[]; };
uniform uint u_n;

shared uint partial[2][SCAN_GROUP];

void main() {
    uint i = linear_invocation();
    uint lid = gl_LocalInvocationID.x;
    uint v = i < u_n ? values_in[i] : 0u;
    partial[0][lid] = v;
    barrier();
    uint src = 0u;
    for (uint step = 1u; step < SCAN_GROUP; step <<= 1) {
        uint sum = partial[src][lid];
        if (lid >= step) {
            sum += partial[src][lid - step];
        }
        partial[1u - src][lid] = sum;
        src = 1u - src;
        barrier();
    }
    uint inclusive = partial[src][lid];
    if (i < u_n) {
        values_out[i] = inclusive - v;
    }
    if (lid == SCAN_GROUP - 1u) {
        group_sums[linear_group()] = inclusive;
    }
}
