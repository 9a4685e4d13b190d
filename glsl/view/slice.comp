// The viewer's depth slice (`deepmerge view`): flatten each pixel of a tidy deep image using only
// what lies between the near and far planes. A volume cut by a plane keeps the piece inside,
// with the tidy's split rule (volume_split.glsl, the same functions tidy.comp runs: a
// homogeneous medium, alpha 1 - (1 - a)^f, colour scaled with it); points count when
// near <= Z <= far.
// The composite is over.glsl's. Per pixel it writes NUM_COLUMNS composited values, the depth of
// the front-most contributing piece and the number of samples inside the slice.
layout(local_size_x = GROUP_SIZE_VIEW) in;
#include "common.glsl"
#include "over.glsl"
#include "volume_split.glsl"

layout(std430, binding = 0) readonly buffer Offsets { uint offsets[]; };
layout(std430, binding = 1) readonly buffer Depths { vec2 depths[]; };
layout(std430, binding = 2) readonly buffer Values { float values[]; };
layout(std430, binding = 3) writeonly buffer Sliced { float sliced[]; };

uniform uint u_pixels;
uniform float u_near;
uniform float u_far;

void main() {
    uint p = linear_invocation();
    if (p >= u_pixels) return;
    for (int c = 0; c < NUM_COLUMNS; ++c) g_acc[c] = 0.0;
    float front = 0.0;
    bool has_front = false;
    uint inside = 0u;
    for (uint s = offsets[p]; s < offsets[p + 1u]; ++s) {
        vec2 d = depths[s];
        bool volume = d.y > d.x;
        float lo = max(d.x, u_near);
        float hi = min(d.y, u_far);
        float f = 1.0;
        if (!volume) {
            if (d.x < u_near || d.x > u_far) continue;
        } else {
            if (!(hi > lo)) continue;
            // A volume the slice leaves whole keeps its values exactly (no round trip through
            // exp/log), so the unsliced view is the flat merge bit for bit.
            if (lo > d.x || hi < d.y) f = piece_fraction(lo, hi, d.x, d.y);
        }
        inside += 1u;
        if (over_opaque()) continue;
        float v[NUM_COLUMNS];
        for (int c = 0; c < NUM_COLUMNS; ++c) v[c] = values[s * uint(NUM_COLUMNS) + uint(c)];
        if (f < 1.0) {
            float cut[NUM_COLUMNS];
            for (int c = 0; c < NUM_COLUMNS; ++c) {
                int a = ALPHA_OF[c];
                cut[c] = a < 0 ? split_alpha(v[c], f).x : v[c] * split_alpha(v[a], f).y;
            }
            v = cut;
        }
        if (!has_front && over_contributes(v)) {
            front = volume ? lo : d.x;
            has_front = true;
        }
        over(v);
    }
    uint base = p * uint(NUM_COLUMNS + 2);
    for (int c = 0; c < NUM_COLUMNS; ++c) sliced[base + uint(c)] = g_acc[c];
    sliced[base + uint(NUM_COLUMNS)] = has_front ? front : uintBitsToFloat(0x7fc00000u);
    sliced[base + uint(NUM_COLUMNS) + 1u] = float(inside);
}
