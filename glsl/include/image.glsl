// The buffers of image SRC at bindings SRC_BINDING_0 .. SRC_BINDING_4 (GLSL 4.30 wants literal
// bindings, so the host defines all five), and a reader that walks a
// pixel's list in the merge's direction. SRC_ACCESS is readonly or writeonly-free (empty).
layout(std430, binding = SRC_BINDING_0) SRC_ACCESS buffer SRC_KeysBuf { Fragment SRC_keys[]; };
layout(std430, binding = SRC_BINDING_1) SRC_ACCESS buffer SRC_ValuesBuf { float SRC_values[]; };
layout(std430, binding = SRC_BINDING_2) readonly buffer SRC_OffsetsBuf { uint SRC_offsets[]; };
// IA/BIA: per-group min counts. LL: head per pixel.
layout(std430, binding = SRC_BINDING_3) buffer SRC_Aux1Buf { uint SRC_aux1[]; };
// LL: next per node; next[0] is the node allocation counter (node 0 is the null node).
layout(std430, binding = SRC_BINDING_4) buffer SRC_Aux2Buf { uint SRC_aux2[]; };

#ifndef SRC_PIXELS
#define SRC_PIXELS u_pixels
#endif
// SRC_VALUES 0: an output image whose values are not written, only its keys (a final deep
// output: the host takes each sample's values from the inputs it names, GpuImage::with_values).
#ifndef SRC_VALUES
#define SRC_VALUES 1
#endif
#include "layout.glsl"

// Slot of the next fragment of pixel p (n samples) in traversal order; `cursor` starts at
// SRC_begin(p). Arrays walk either way; an LL list only the way it was built.
uint SRC_begin(uint p) {
#if SRC_LAYOUT == LAYOUT_LL
    return SRC_aux1[p];
#else
    return 0u;
#endif
}

uint SRC_next_slot(uint p, uint n, inout uint cursor) {
#if SRC_LAYOUT == LAYOUT_LL
    uint node = cursor;
    cursor = SRC_aux2[node];
    return node;
#else
    uint i = cursor;
    cursor += 1u;
    return SRC_address(p, MERGE_DESC != 0 ? n - 1u - i : i);
#endif
}
