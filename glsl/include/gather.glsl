// Where a layout pixel of a band finds its samples in one input's decoded planes, and how a
// plane's value is read as a float (twin: cpu::gather). Shared by gather_count.comp and
// gather.comp.
//
// An input is staged as the reader decoded it: the sample offsets of its rows inside the band
// (u32, relative to the first staged sample) and its planes, each a run of words in one buffer
// (half: two values per word, low half first; float and uint: one per word). Slot 0 is Z,
// slot 1 ZBack, slot 2 + c column c; a slot's descriptor is (first word, type).

#define SLOT_ABSENT 0u
#define SLOT_HALF 1u
#define SLOT_FLOAT 2u
#define SLOT_UINT 3u

layout(std430, binding = 1) readonly buffer SourceOffsets { uint source_offsets[]; };
layout(std430, binding = 2) readonly buffer SourcePlanes { uint source_words[]; };
layout(std430, binding = 3) readonly buffer SourceSlots { uvec2 source_slots[]; };
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
    if (d.y == SLOT_HALF) {
        uint word = source_words[d.x + (s >> 1)];
        return half_bits_to_float((s & 1u) != 0u ? word >> 16 : word & 0xFFFFu);
    }
    if (d.y == SLOT_FLOAT) {
        return uintBitsToFloat(source_words[d.x + s]);
    }
    if (d.y == SLOT_UINT) {
        return uint_to_float(source_words[d.x + s]);
    }
    return fallback;
}
