// Deep output written through the workgroup's shared memory (OUT_STAGED, host side:
// resident::DeepWrites::Staged). A merge invocation writes its own pixel's run of slots, so in a
// linearised image (and in the tails of interleaved groups) neighbouring invocations write far
// apart and their stores do not coalesce. But a group of GROUP_SIZE pixels owns one contiguous
// range of slots in every array layout: [OUT_offsets[first], OUT_offsets[first + width]). When
// that range fits in STAGE_SAMPLES, the invocations store into shared memory at the same
// positions, and after a barrier the whole group copies the range out in slot order, each
// store beside its neighbour's. A group whose range does not fit writes straight to the image
// as without staging, and so does a group holding a pixel left to merge_coop.comp: that pixel's
// slots are written by the later dispatch, and copying them out first would write shared
// memory no invocation stored (overwritten then, but never written at all is plainer). The
// bytes of the image are the same either way.
//
// Needs the OUT image (image.glsl as OUT), OUT_VALUES, NUM_COLUMNS, u_pixels and
// linear_group(). The stage calls out_staging_begin and out_staging_end from main(), in uniform
// control flow (every invocation of the group, including those past the last pixel), and
// stores every key and value through out_store_key and out_store_value.

#ifndef OUT_STAGED
#define OUT_STAGED 0
#endif

#if OUT_STAGED
shared Fragment stage_keys[STAGE_SAMPLES];
#if OUT_VALUES
shared float stage_values[STAGE_SAMPLES * NUM_COLUMNS];
#endif
// Nonzero once an invocation of the group finds its pixel left to the cooperative merge.
shared uint stage_direct;
// The group's first slot and slot count, and whether its stores go through shared memory: the
// same in every invocation of the group.
uint g_stage_first = 0u;
uint g_stage_count = 0u;
bool g_staged = false;
#endif

// Decide whether this group stages its writes. `deferred`: this invocation's pixel is merged by
// another stage. Every invocation of the group calls it.
void out_staging_begin(bool deferred) {
#if OUT_STAGED
    uint first = min(linear_group() * uint(GROUP_SIZE), u_pixels);
    uint end = min(first + uint(GROUP_SIZE), u_pixels);
    if (gl_LocalInvocationID.x == 0u) {
        stage_direct = 0u;
    }
    memoryBarrierShared();
    barrier();
    if (deferred) {
        atomicOr(stage_direct, 1u);
    }
    memoryBarrierShared();
    barrier();
    g_stage_first = OUT_offsets[first];
    g_stage_count = OUT_offsets[end] - g_stage_first;
    g_staged = stage_direct == 0u && g_stage_count <= uint(STAGE_SAMPLES);
#endif
}

// Store the key of output slot `out_slot`.
void out_store_key(uint out_slot, Fragment f) {
#if OUT_STAGED
    if (g_staged) {
        stage_keys[out_slot - g_stage_first] = f;
        return;
    }
#endif
    OUT_keys[out_slot] = f;
}

#if OUT_VALUES
// Store column `c` of output slot `out_slot`.
void out_store_value(uint out_slot, uint c, float v) {
#if OUT_STAGED
    if (g_staged) {
        stage_values[(out_slot - g_stage_first) * NUM_COLUMNS + c] = v;
        return;
    }
#endif
    OUT_values[out_slot * NUM_COLUMNS + c] = v;
}
#endif

// Copy a staged group's range out, slot by slot across the group. Every invocation calls it.
void out_staging_end() {
#if OUT_STAGED
    memoryBarrierShared();
    barrier();
    if (g_staged) {
        for (uint i = gl_LocalInvocationID.x; i < g_stage_count; i += uint(GROUP_SIZE)) {
            OUT_keys[g_stage_first + i] = stage_keys[i];
        }
#if OUT_VALUES
        uint words = g_stage_count * uint(NUM_COLUMNS);
        uint base = g_stage_first * uint(NUM_COLUMNS);
        for (uint i = gl_LocalInvocationID.x; i < words; i += uint(GROUP_SIZE)) {
            OUT_values[base + i] = stage_values[i];
        }
#endif
    }
#endif
}
