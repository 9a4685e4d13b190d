// One input's samples of a band as the stream a build scatters (twin: cpu::gather::gather):
// per layout pixel, its samples in file order at the scanned offset, each as a fragment key
// (Z, ZBack as vocab::depth_key makes them, the input, the sample's index in the input) and its
// composited values, read from the planes as decoded (half to float here, exactly).
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"
#include "fragment.glsl"
#include "gather.glsl"

layout(std430, binding = 0) readonly buffer Offsets { uint offsets[]; };
layout(std430, binding = 10) writeonly buffer StreamKeys { Fragment stream_keys[]; };
layout(std430, binding = 11) writeonly buffer StreamValues { float stream_values[]; };
uniform uint u_count_base;
uniform uint u_input;
// The input's index of staged sample 0.
uniform uint u_index_base;
// WITH_VALUES 0: the keys alone, for a merge that writes a deep output's keys alone (only the
// depth planes are staged then).
#ifndef WITH_VALUES
#define WITH_VALUES 1
#endif

void main() {
    uint p = linear_invocation();
    if (p >= u_pixels) {
        return;
    }
    int i = source_pixel(p);
    if (i < 0) {
        return;
    }
    uint first = source_offsets[i];
    uint n = source_offsets[i + 1] - first;
    uint out_first = offsets[u_count_base + p];
    for (uint k = 0u; k < n; ++k) {
        uint s = first + k;
        float z = read_slot(0u, s, 0.0);
        float zback = read_slot(1u, s, z);
        Fragment f;
        f.z = z;
        // vocab::depth_key: a back depth in front of the front one is a point at the front.
        f.zback = zback > z ? zback : z;
        f.input_index = u_input;
        f.sample_index = u_index_base + s;
        stream_keys[out_first + k] = f;
#if WITH_VALUES
        for (uint c = 0u; c < NUM_COLUMNS; ++c) {
            stream_values[(out_first + k) * NUM_COLUMNS + c] = read_slot(2u + c, s, 0.0);
        }
#endif
    }
}
