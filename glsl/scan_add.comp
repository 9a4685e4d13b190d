// Second half of the scan: add each group's scanned total to its elements and write the grand
// total after the last element (the scan has n + 1 outputs).
layout(local_size_x = SCAN_GROUP) in;
#include "common.glsl"

layout(std430, binding = 1) buffer OutBuf { uint values_out[]; };
layout(std430, binding = 3) readonly buffer ScannedSumsBuf { uint scanned_sums[]; };
uniform uint u_n;
uniform uint u_groups;

void main() {
    uint i = linear_invocation();
    if (i < u_n) {
        values_out[i] += scanned_sums[linear_group()];
    }
    if (i == 0u) {
        values_out[u_n] = scanned_sums[u_groups];
    }
}
