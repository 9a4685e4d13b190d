// The sources of a merged deep image, in pixel order (twin: cpu::sources::pack_sources). A deep
// output read back by its keys alone, with nothing for the host to tidy, needs of each sample
// only where it came from: the host copies every channel from the input sample a source names.
// So instead of the image (16-byte keys in its layout, and a linked list's links), one word or
// two per sample come back, in the order the host writes them (vocab::SourcePacking):
//   SOURCE_WORDS 1: input << INDEX_BITS | index (INDEX_BITS 32: the index alone);
//   SOURCE_WORDS 2: input, index.
// Sample i of pixel p goes to position offsets[p] + i. Arrays: one invocation per position (the
// writes coalesce, the reads gather, as in relayout.comp). A linked list has no addresses: one
// invocation per pixel walks its list.
//
// `bad` (one word, zeroed by the host) counts the pixels whose list or group minimum disagrees
// with their count, and positions whose address falls outside the image, so that an inconsistent
// image is an error rather than wrong sources, as the host's check of a read-back image makes it
// (BuiltImage::check). Arrays check every pixel, empty ones too: invocation t checks pixel t and
// packs position t (max(pixels, samples) invocations).
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"
#include "fragment.glsl"

uniform uint u_pixels;
uniform uint u_samples;

// image.glsl's list walker reads it; this stage addresses slots itself.
#define MERGE_DESC 0

#include_as "image.glsl" IN

layout(std430, binding = 10) writeonly buffer SourcesBuf { uint sources[]; };
layout(std430, binding = 11) buffer BadBuf { uint bad[]; };

void put(uint position, Fragment f) {
#if SOURCE_WORDS == 1
#if INDEX_BITS == 32
    sources[position] = f.sample_index;
#else
    sources[position] = (f.input_index << uint(INDEX_BITS)) | f.sample_index;
#endif
#else
    sources[2u * position] = f.input_index;
    sources[2u * position + 1u] = f.sample_index;
#endif
}

void main() {
#if IN_LAYOUT == LAYOUT_LL
    uint p = linear_invocation();
    if (p >= u_pixels) {
        return;
    }
    uint first = IN_offsets[p];
    uint n = IN_count(p);
    uint node = IN_aux1[p];
    uint i = 0u;
    // Bounded by the count: a list that runs on is reported, not followed.
    while (node != 0u && i < n && node <= u_samples) {
        put(first + (LIST_ASCENDING != 0 ? i : n - 1u - i), IN_keys[node]);
        node = IN_aux2[node];
        i += 1u;
    }
    if (i != n || node != 0u) {
        atomicAdd(bad[0], 1u);
    }
#else
    uint s = linear_invocation();
#if IN_LAYOUT == LAYOUT_IA || IN_LAYOUT == LAYOUT_BIA
    if (s < u_pixels && IN_aux1[s / uint(GROUP_SIZE)] > IN_count(s)) {
        atomicAdd(bad[0], 1u);
    }
#endif
    if (s >= u_samples) {
        return;
    }
    uint p = IN_pixel_holding(s);
    uint i = s - IN_offsets[p];
#if IN_LAYOUT == LAYOUT_IA || IN_LAYOUT == LAYOUT_BIA
    if (IN_aux1[p / uint(GROUP_SIZE)] > IN_count(p)) {
        return; // counted by pixel p's invocation
    }
#endif
    uint from = IN_address(p, i);
    if (from >= u_samples) {
        atomicAdd(bad[0], 1u);
        return;
    }
    put(s, IN_keys[from]);
#endif
}
