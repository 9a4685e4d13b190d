// Addressing of image SRC (twin: vocab::layout::address). Included once per image with SRC
// replaced by the image's name; needs SRC_LAYOUT, SRC_offsets, SRC_aux1 (IA/BIA: per-group min
// counts) and SRC_PIXELS, the image's pixel count (image.glsl makes it the uniform u_pixels
// unless the stage defines it: merge_kway.comp's stacked input has more pixels than the band it
// merges). BLOCK_SIZE is the BIA block.
uint SRC_count(uint p) {
    return SRC_offsets[p + 1u] - SRC_offsets[p];
}

// The pixel holding position s of the image's samples in pixel order (sample i of pixel p at
// offsets[p] + i, s below the total): the last p with offsets[p] <= s, as empty pixels share
// an offset (twin: vocab::built::pixel_holding). Invariant: offsets[lo] <= s < offsets[hi].
uint SRC_pixel_holding(uint s) {
    uint lo = 0u;
    uint hi = SRC_PIXELS;
    while (hi - lo > 1u) {
        uint mid = lo + (hi - lo) / 2u;
        if (SRC_offsets[mid] <= s) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

uint SRC_address(uint p, uint i) {
#if SRC_LAYOUT == LAYOUT_LA
    return SRC_offsets[p] + i;
#elif SRC_LAYOUT == LAYOUT_IA || SRC_LAYOUT == LAYOUT_BIA
    uint g = p / uint(GROUP_SIZE);
    uint r = p % uint(GROUP_SIZE);
    // The last group may be narrower than GROUP_SIZE: interleave over its real width.
    uint width = min(uint(GROUP_SIZE), SRC_PIXELS - g * uint(GROUP_SIZE));
    uint m = SRC_aux1[g];
    uint base = SRC_offsets[g * uint(GROUP_SIZE)];
    if (i < m) {
#if SRC_LAYOUT == LAYOUT_IA
        return base + r + width * i;
#else
        return base + (i / uint(BLOCK_SIZE)) * width * uint(BLOCK_SIZE) + r * uint(BLOCK_SIZE) + (i % uint(BLOCK_SIZE));
#endif
    }
    return width * m + SRC_offsets[p] - m * r + (i - m);
#else
    return 0u; // LL has no addresses
#endif
}
