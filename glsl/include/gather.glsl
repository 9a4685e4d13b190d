// Where a layout pixel of a band finds its samples in one input's decoded planes, and how a
// plane's value is read as a float (twin: cpu::gather). Shared by gather_count.comp and
// gather.comp.
//
// An input is staged as the reader decoded it: the sample offsets of its rows inside the band
// (u32, relative to the first staged sample) and its planes, each a run of words (half: two
// values per word, low half first; float and uint: one per word). Slot 0 is Z, slot 1 ZBack,
// slot 2 + c column c; a slot's descriptor is (first word, type | shift << 8). Copied to the
// GPU, every run lies in one buffer, each from a word's start. Read in place (PINNED_PLANES: a
// software rasteriser's buffers over the decoded planes themselves, GL_AMD_pinned_memory),
// slot k reads plane k's buffer (slots of one run bind one buffer twice), which starts at the
// word holding the run's first value: a run of halves may start in a word's high half (shift
// 1). The plane is the slot, not a descriptor's field, so that where the slot is a constant
// (every call below, loops unrolled) the choice of buffer is made when the shader compiles.

#define SLOT_ABSENT 0u
#define SLOT_HALF 1u
#define SLOT_FLOAT 2u
#define SLOT_UINT 3u

layout(std430, binding = 1) readonly buffer SourceOffsets { uint source_offsets[]; };
layout(std430, binding = 2) readonly buffer SourcePlanes { uint source_words[]; };
layout(std430, binding = 3) readonly buffer SourceSlots { uvec2 source_slots[]; };
#if PINNED_PLANES
// Planes 1-7 (plane 0 is SourcePlanes), for slots 1-7; the bindings the gather leaves free
// (host: gpu::gather::PINNED_PLANE_BINDINGS).
layout(std430, binding = 5) readonly buffer SourcePlane1 { uint source_words_1[]; };
layout(std430, binding = 6) readonly buffer SourcePlane2 { uint source_words_2[]; };
layout(std430, binding = 7) readonly buffer SourcePlane3 { uint source_words_3[]; };
layout(std430, binding = 8) readonly buffer SourcePlane4 { uint source_words_4[]; };
layout(std430, binding = 9) readonly buffer SourcePlane5 { uint source_words_5[]; };
layout(std430, binding = 12) readonly buffer SourcePlane6 { uint source_words_6[]; };
layout(std430, binding = 13) readonly buffer SourcePlane7 { uint source_words_7[]; };
#endif

// Word `i` of plane `plane`.
uint plane_word(uint plane, uint i) {
#if PINNED_PLANES
    switch (plane) {
    case 1u: return source_words_1[i];
    case 2u: return source_words_2[i];
    case 3u: return source_words_3[i];
    case 4u: return source_words_4[i];
    case 5u: return source_words_5[i];
    case 6u: return source_words_6[i];
    case 7u: return source_words_7[i];
    default: return source_words[i];
    }
#else
    return source_words[i];
#endif
}
#if PERMUTED
layout(std430, binding = 4) readonly buffer PixelOrder { uint pixel_order[]; };
#endif

uniform uint u_pixels;
// The band's width (the window's), and the input pixel the band's first pixel falls on
// (may be outside the input: columns and rows left of or above it).
uniform uint u_band_width;
uniform int u_origin_x;
uniform int u_origin_y;
// The staged rows of the input: its width and how many rows.
uniform uint u_input_width;
uniform uint u_input_rows;

// The staged input pixel under layout pixel p, or -1 where the input has none.
int source_pixel(uint p) {
#if PERMUTED
    uint q = pixel_order[p];
#else
    uint q = p;
#endif
    int x = int(q % u_band_width) + u_origin_x;
    int y = int(q / u_band_width) + u_origin_y;
    if (x < 0 || y < 0 || uint(x) >= u_input_width || uint(y) >= u_input_rows) {
        return -1;
    }
    return y * int(u_input_width) + x;
}

// A half's bits as the float it stands for, exactly (as half::f16::to_f32: subnormals kept,
// NaN quietened with its payload), in integer arithmetic so no driver's conversion is trusted.
float half_bits_to_float(uint h) {
    uint sign = (h & 0x8000u) << 16;
    uint exponent = (h >> 10) & 0x1Fu;
    uint mantissa = h & 0x3FFu;
    if (exponent == 0x1Fu) {
        uint quiet = mantissa != 0u ? 0x400000u : 0u;
        return uintBitsToFloat(sign | 0x7F800000u | quiet | (mantissa << 13));
    }
    if (exponent == 0u) {
        if (mantissa == 0u) {
            return uintBitsToFloat(sign);
        }
        // A subnormal: mantissa * 2^-24, normalised.
        int top = findMSB(mantissa);
        uint bits = (mantissa << uint(23 - top)) & 0x7FFFFFu;
        return uintBitsToFloat(sign | (uint(top + 103) << 23) | bits);
    }
    return uintBitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// A uint as the nearest float, ties to even (as Rust's `as f32`), in integer arithmetic.
float uint_to_float(uint v) {
    if (v < 0x1000000u) {
        return float(v);
    }
    int top = findMSB(v);
    uint shift = uint(top - 23);
    uint kept = v >> shift;
    uint rest = v & ((1u << shift) - 1u);
    uint half_way = 1u << (shift - 1u);
    if (rest > half_way || (rest == half_way && (kept & 1u) != 0u)) {
        kept += 1u;
    }
    // kept may carry into bit 24: the exponent then takes it (the mantissa field wraps to 0).
    return uintBitsToFloat((uint(top + 127) << 23) + (kept - 0x800000u));
}

// Sample s (staged index) of slot `slot`, or `fallback` where the input lacks the channel.
float read_slot(uint slot, uint s, float fallback) {
    uvec2 d = source_slots[slot];
    uint type = d.y & 0xFu;
    uint plane = PINNED_PLANES != 0 ? slot : 0u;
    if (type == SLOT_HALF) {
        uint h = s + (d.y >> 8);
        uint word = plane_word(plane, d.x + (h >> 1));
        return half_bits_to_float((h & 1u) != 0u ? word >> 16 : word & 0xFFFFu);
    }
    if (type == SLOT_FLOAT) {
        return uintBitsToFloat(plane_word(plane, d.x + s));
    }
    if (type == SLOT_UINT) {
        return uint_to_float(plane_word(plane, d.x + s));
    }
    return fallback;
}
