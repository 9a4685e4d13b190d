// Stream compaction of flagged pixels into a dense list (twin: cpu::compact): mark → exclusive
// scan (scan.comp) → scatter. The list is in pixel order whatever the scheduling.
//
// STAGE 0 (mark): marks[p] = 1 when flags[p * FLAG_STRIDE + FLAG_COMPONENT] & FLAG_MASK, else 0.
// STAGE 1 (scatter): list[rank[p]] = p for every marked pixel (rank = the scan of the marks).
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"

uniform uint u_pixels;

layout(std430, binding = 0) readonly buffer FlagsBuf { uint flags[]; };
#if STAGE == 0
layout(std430, binding = 1) writeonly buffer MarksBuf { uint marks[]; };
#else
layout(std430, binding = 1) readonly buffer MarksBuf { uint marks[]; };
layout(std430, binding = 2) readonly buffer RankBuf { uint rank[]; };
layout(std430, binding = 3) writeonly buffer ListBuf { uint list[]; };
#endif

void main() {
    uint p = linear_invocation();
    if (p >= u_pixels) return;
#if STAGE == 0
    uint word = flags[p * uint(FLAG_STRIDE) + uint(FLAG_COMPONENT)];
    marks[p] = (word & uint(FLAG_MASK)) != 0u ? 1u : 0u;
#else
    if (marks[p] != 0u) list[rank[p]] = p;
#endif
}
