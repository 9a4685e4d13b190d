// The plumbing around tidy.comp (twins in cpu::tidy): which pixels need a tidy, the tidied deep
// image's counts and untouched pixels, and the flat composite's tidied pixels.
//
// STAGE 0 (gate): marks[p] = 1 when a volume of pixel p's merged list overlaps a later sample or
//   two points coincide (composite::tidy::needs_deep_tidy; coincident points are neighbours in
//   merge order), or when the list is longer than GATE_LIMIT (flagged unread,
//   to keep the loop under llvmpipe's 65535-iteration cap; the walk leaves a tidy list as it is).
// STAGE 1 (counts): counts[p] = the walk's count for a marked pixel (emitted[rank[p]]), else the
//   merged count; scanned into the tidied image's offsets.
// STAGE 2 (copy): one invocation per merged slot: a slot of an unmarked pixel moves to the same
//   position in that pixel's tidied range, key and values. Per slot rather than per pixel, so a
//   long list is not one long loop; the slot's pixel is found by binary search of the offsets.
// STAGE 3 (scatter flat): the flattened values and front of the k-th listed pixel replace the
//   flat merge's at pixel list[k].
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"
#include "fragment.glsl"

uniform uint u_pixels;
uniform uint u_count;

#if STAGE == 0
layout(std430, binding = 0) readonly buffer OffsetsBuf { uint offsets[]; };
layout(std430, binding = 1) readonly buffer KeysBuf { Fragment keys[]; };
layout(std430, binding = 2) writeonly buffer MarksBuf { uint marks[]; };

void main() {
    uint p = linear_invocation();
    if (p >= u_pixels) return;
    uint start = offsets[p];
    uint end = offsets[p + 1u];
    uint mark = end - start > uint(GATE_LIMIT) ? 1u : 0u;
    float reach = uintBitsToFloat(0xff800000u);
    // The previous sample's Z when it was a point.
    bool point_before = false;
    float point_z = 0.0;
    for (uint i = start; i < end; ++i) {
        if (mark != 0u) break;
        Fragment f = keys[i];
        if (f.z < reach) {
            mark = 1u;
        } else if (f.zback > f.z) {
            reach = max(reach, f.zback);
            point_before = false;
        } else {
            if (point_before && point_z == f.z) mark = 1u;
            point_before = true;
            point_z = f.z;
        }
    }
    marks[p] = mark;
}
#elif STAGE == 1
layout(std430, binding = 0) readonly buffer OffsetsBuf { uint offsets[]; };
layout(std430, binding = 2) readonly buffer MarksBuf { uint marks[]; };
layout(std430, binding = 3) readonly buffer RankBuf { uint rank[]; };
layout(std430, binding = 4) readonly buffer EmittedBuf { uint emitted[]; };
layout(std430, binding = 5) writeonly buffer CountsBuf { uint counts[]; };

void main() {
    uint p = linear_invocation();
    if (p >= u_pixels) return;
    counts[p] = marks[p] != 0u ? emitted[rank[p]] : offsets[p + 1u] - offsets[p];
}
#elif STAGE == 2
layout(std430, binding = 0) readonly buffer OffsetsBuf { uint offsets[]; };
layout(std430, binding = 1) readonly buffer KeysBuf { Fragment keys[]; };
layout(std430, binding = 2) readonly buffer MarksBuf { uint marks[]; };
layout(std430, binding = 6) readonly buffer ValuesBuf { float values[]; };
layout(std430, binding = 7) readonly buffer TidiedOffsetsBuf { uint tidied_offsets[]; };
layout(std430, binding = 8) writeonly buffer TidiedKeysBuf { Fragment tidied_keys[]; };
layout(std430, binding = 9) writeonly buffer TidiedValuesBuf { float tidied_values[]; };

void main() {
    uint s = linear_invocation();
    if (s >= u_count) return;
    // The pixel p with offsets[p] <= s < offsets[p + 1] (empty pixels share an offset; the
    // last of them is the one that holds s).
    uint lo = 0u;
    uint hi = u_pixels;
    for (int step = 0; step < 33; ++step) {
        if (hi - lo <= 1u) break;
        uint mid = (lo + hi) / 2u;
        if (offsets[mid] <= s) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    uint p = lo;
    if (marks[p] != 0u) return;
    uint at = tidied_offsets[p] + (s - offsets[p]);
    tidied_keys[at] = keys[s];
    for (int c = 0; c < NUM_COLUMNS; ++c) {
        tidied_values[at * uint(NUM_COLUMNS) + uint(c)] = values[s * uint(NUM_COLUMNS) + uint(c)];
    }
}
#else
layout(std430, binding = 0) readonly buffer ListBuf { uint list[]; };
layout(std430, binding = 1) readonly buffer TidiedValuesBuf { float tidied_values[]; };
layout(std430, binding = 2) readonly buffer TidiedFrontBuf { uvec4 tidied_front[]; };
layout(std430, binding = 3) buffer FlatValuesBuf { float flat_values[]; };
layout(std430, binding = 4) buffer FlatFrontBuf { uvec4 flat_front[]; };

void main() {
    uint k = linear_invocation();
    if (k >= u_count) return;
    uint p = list[k];
    for (int c = 0; c < NUM_COLUMNS; ++c) {
        flat_values[p * uint(NUM_COLUMNS) + uint(c)] = tidied_values[k * uint(NUM_COLUMNS) + uint(c)];
    }
    flat_front[p] = tidied_front[k];
}
#endif
