// The runs in a merged deep image's packed sources (sources.comp; twin: cpu::sources::source_runs).
// The host copies a deep output's planes run by run, a run being samples that take consecutive
// values of one input (composite::source_runs): 51 M samples in 2.5 M runs on the 1080p
// powerplant pair. So where the GPU's pixel order is the window's, only each run's first
// position and source come back, instead of every position's source, and the host neither
// copies nor walks a word a sample.
//   STAGE 0 (mark): starts[s] = 1 where position s starts a run: the first position, another
//     input than the position before, or not the next index of its input.
//   STAGE 1 (scatter): a run's start s writes its record at rank[s] (the exclusive scan of
//     `starts`, scan.comp, whose total is the number of runs): s, then its SOURCE_WORDS words of
//     source as sources.comp packed them (RUN_WORDS = 1 + SOURCE_WORDS).
// One invocation per position in both stages, so the reads and writes of a warp coalesce.
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"

uniform uint u_samples;

layout(std430, binding = 0) readonly buffer SourcesBuf { uint sources[]; };
#if STAGE == 0
layout(std430, binding = 1) writeonly buffer StartsBuf { uint starts[]; };
#else
layout(std430, binding = 1) readonly buffer StartsBuf { uint starts[]; };
layout(std430, binding = 2) readonly buffer RankBuf { uint rank[]; };
layout(std430, binding = 3) writeonly buffer RunsBuf { uint runs[]; };
#endif

// Position s's source: (input, index).
uvec2 source_at(uint s) {
#if SOURCE_WORDS == 1
#if INDEX_BITS == 32
    return uvec2(0u, sources[s]);
#else
    uint word = sources[s];
    return uvec2(word >> uint(INDEX_BITS), word & ((1u << uint(INDEX_BITS)) - 1u));
#endif
#else
    return uvec2(sources[2u * s], sources[2u * s + 1u]);
#endif
}

#if STAGE == 0
bool starts_run(uint s) {
    if (s == 0u) {
        return true;
    }
    uvec2 before = source_at(s - 1u);
    uvec2 here = source_at(s);
    // The last index has no next one (the sum would wrap to 0).
    return here.x != before.x || before.y == 0xffffffffu || here.y != before.y + 1u;
}
#endif

void main() {
    uint s = linear_invocation();
    if (s >= u_samples) {
        return;
    }
#if STAGE == 0
    starts[s] = starts_run(s) ? 1u : 0u;
#else
    if (starts[s] == 0u) {
        return;
    }
    uint at = rank[s] * uint(RUN_WORDS);
    runs[at] = s;
    for (uint w = 0u; w < uint(SOURCE_WORDS); w++) {
        runs[at + 1u + w] = sources[uint(SOURCE_WORDS) * s + w];
    }
#endif
}
