// Tidy and flatten listed pixels of a merged, sorted, linearised (CSR) list (twin: cpu::tidy):
// the same result as composite::tidy_pixel followed by composite::flatten_pixel, computed on the
// fly in one pass per pixel with O(1) memory (no tidied list is ever stored).
//
// Walk: the boundaries of a pixel are its samples' Z and volumes' ZBack. For each distinct
// boundary b, front to back: the points at b composite in list order (COUNT and EMIT, the tidy
// deep output, merge them into one by the same mix as volume pieces, as
// composite::tidy::tidy_deep_pixel does), then the slab [b, next):
// every volume covering it contributes the piece covering that slab, and two or more pieces merge
// by adding optical depths (composite::tidy::merge_coincident). That is the order the
// reference's stable sort of the cut pieces produces. Cost per pixel: O(boundaries x samples alive
// at a boundary x columns).
//
// Resumable: llvmpipe (gallivm) ends every loop of an invocation once the invocation has run
// 65535 loop iterations in all (LP_MAX_TGSI_LOOP_ITERATIONS, a guard against hangs), silently.
// A long list easily needs more, so each invocation charges its loops against WORK_BUDGET,
// saves its walk (boundary, window, composite so far) when the next step might not fit, and the
// host dispatches again until no pixel is left RUNNING. A pixel whose single step cannot fit
// (tens of thousands of samples alive at one boundary) is marked TOO_LONG for the host to finish.
// Loop conditions read SSBOs only inside the body: with `while (hi < end && keys[hi].z <= b)`
// llvmpipe walked short (wrong results even on 2-sample pixels; cause not pinned down), the
// for-with-break form below is right.
//
// Modes (TIDY_MODE): FLATTEN composites the walk's tidied samples into one row per listed pixel
// (the flat output); COUNT counts them and EMIT writes them (key + values) at the pixel's offset
// in the tidied deep image (count → scan → emit, as every other deep output is built). The three
// share the walk, so the samples they see are the same ones in the same order (`deliver`).
//
// Volumes are cut with volume_split.glsl (split_alpha, piece_fraction) and coincident pieces
// merge by optical depth (optical_depth, alpha_of_depth), series-safe forms shared with
// slice.comp (see cpu::tidy for the error bounds; same constants, same order of operations).
layout(local_size_x = GROUP_SIZE) in;
#include "common.glsl"
#include "fragment.glsl"

uniform uint u_count;

#define TIDY_FLATTEN 0
#define TIDY_COUNT 1
#define TIDY_EMIT 2

layout(std430, binding = 0) readonly buffer KeysBuf { Fragment keys[]; };
layout(std430, binding = 1) readonly buffer ValuesBuf { float values[]; };
layout(std430, binding = 2) readonly buffer OffsetsBuf { uint offsets[]; };
layout(std430, binding = 3) readonly buffer PixelsBuf { uint pixels[]; };
#if TIDY_MODE == TIDY_FLATTEN
// NUM_COLUMNS flattened values per listed pixel, and (input, index, Z bits, 1) of its front-most
// tidied sample with any alpha above 0 (zero when none), as merge.comp's flat output.
layout(std430, binding = 4) buffer OutValues { float out_values[]; };
layout(std430, binding = 5) buffer OutFront { uvec4 out_front[]; };
#else
// Per listed pixel, tidied samples delivered so far (COUNT: the count in the end).
layout(std430, binding = 8) buffer EmittedBuf { uint emitted[]; };
#endif
#if TIDY_MODE == TIDY_EMIT
// The tidied image (linearised): per-pixel offsets (indexed by image pixel), keys, values.
layout(std430, binding = 9) readonly buffer TidiedOffsetsBuf { uint tidied_offsets[]; };
layout(std430, binding = 4) writeonly buffer TidiedKeysBuf { Fragment tidied_keys[]; };
layout(std430, binding = 5) writeonly buffer TidiedValuesBuf { float tidied_values[]; };
#endif

// The column table and "over" (g_acc: the running composite of this invocation's pixel).
#include "over.glsl"
#include "volume_split.glsl"

bool is_volume(Fragment f) {
    return f.zback > f.z;
}

// The tidied piece being composited (g_acc, the running composite, is over.glsl's).
float g_piece[NUM_COLUMNS];
bool g_done = false;
uvec4 g_front = uvec4(0u);

// The tidied piece of slab [b, next) into g_piece; returns the slot of its first contributor or
// 0xffffffff when no volume covers the slab. Slots lo..hi are the ones still alive. With
// at_points, the points at b instead, whole (next unused): the merge of coincident points.
uint slab_piece(uint lo, uint hi, float b, float next, bool at_points) {
    uint first = 0xffffffffu;
    for (int c = 0; c < NUM_COLUMNS; ++c) {
        int ac = ALPHA_OF[c] < 0 ? c : ALPHA_OF[c];
        uint count = 0u;
        float lone = 0.0;
        float opaque_sum = 0.0;
        uint opaque_count = 0u;
        float depth = 0.0;
        float weighted = 0.0;
        for (uint i = lo; i < hi; ++i) {
            Fragment f = keys[i];
            bool covers = at_points ? (f.z == b && !is_volume(f))
                                    : (is_volume(f) && f.z <= b && f.zback > b);
            if (!covers) continue;
            float raw_a = values[i * uint(NUM_COLUMNS) + uint(ac)];
            float raw_c = values[i * uint(NUM_COLUMNS) + uint(c)];
            float pa = raw_a;
            float pc = raw_c;
            // A point, or a volume with no boundary strictly inside, stays as it is, bit for bit.
            if (!at_points && !(f.z == b && f.zback == next)) {
                vec2 s = split_alpha(raw_a, piece_fraction(b, next, f.z, f.zback));
                pa = s.x;
                pc = ac == c ? pa : raw_c * s.y;
            }
            if (count == 0u) {
                first = i;
                lone = pc;
            }
            count += 1u;
            if (pa >= 1.0) {
                opaque_sum += pc;
                opaque_count += 1u;
            } else {
                float u = optical_depth(pa);
                depth += u;
                weighted += pa == 0.0 ? pc : pc * (u / pa);
            }
        }
        if (count <= 1u) {
            g_piece[c] = lone;
        } else if (opaque_count > 0u) {
            g_piece[c] = ac == c ? 1.0 : opaque_sum / float(opaque_count);
        } else {
            float merged = alpha_of_depth(depth);
            float w = depth == 0.0 ? 1.0 : merged / depth;
            g_piece[c] = ac == c ? merged : w * weighted;
        }
    }
    return first;
}

// flatten_pixel's loop body for g_piece (source f, front depth z). Defined after slab_piece,
// which writes g_piece: Mesa warns of a global read above its first write (a KHR_debug message).
void composite(Fragment f, float z) {
    if (over_opaque()) {
        g_done = true;
        return;
    }
    if (g_front.w == 0u && over_contributes(g_piece)) {
        g_front = uvec4(f.input_index, f.sample_index, floatBitsToUint(z), 1u);
    }
    over(g_piece);
}

uint g_emitted = 0u;
uint g_pixel = 0u;

// Counting needs only whether some volume covers the slab starting at b (or, at_points, some
// point stands at b), not its piece.
uint slab_first(uint lo, uint hi, float b, bool at_points) {
    for (uint i = lo; i < hi; ++i) {
        Fragment f = keys[i];
        bool covers = at_points ? (f.z == b && !is_volume(f))
                                : (is_volume(f) && f.z <= b && f.zback > b);
        if (covers) return i;
    }
    return 0xffffffffu;
}

// The walk's output: one tidied sample over [z, zback) cut from (or first merged into) `source`,
// its values in g_piece when `from_piece`, else slot `slot`'s values unchanged. Returns true
// when the walk may stop (flattening: everything behind is hidden).
bool deliver(Fragment source, float z, float zback, bool from_piece, uint slot) {
#if TIDY_MODE == TIDY_FLATTEN
    if (!from_piece) {
        for (int c = 0; c < NUM_COLUMNS; ++c) g_piece[c] = values[slot * uint(NUM_COLUMNS) + uint(c)];
    }
    composite(source, z);
    return g_done;
#else
#if TIDY_MODE == TIDY_EMIT
    uint at = tidied_offsets[g_pixel] + g_emitted;
    tidied_keys[at] = Fragment(z, zback, source.input_index, source.sample_index);
    for (int c = 0; c < NUM_COLUMNS; ++c) {
        tidied_values[at * uint(NUM_COLUMNS) + uint(c)] =
            from_piece ? g_piece[c] : values[slot * uint(NUM_COLUMNS) + uint(c)];
    }
#endif
    g_emitted += 1u;
    return false;
#endif
}

// Resumable walk state per listed pixel: (boundary bits, lo, hi, status).
layout(std430, binding = 6) buffer StateBuf { uvec4 state[]; };
// [0]: pixels that yielded this pass (run again); [1]: pixels too long for one pass's budget.
layout(std430, binding = 7) buffer CounterBuf { uint counters[]; };

const uint FRESH = 0u;
const uint RUNNING = 1u;
const uint FINISHED = 2u;
const uint TOO_LONG = 3u;

void main() {
    uint k = linear_invocation();
    if (k >= u_count) return;
    uvec4 st = state[k];
    if (st.w == FINISHED || st.w == TOO_LONG) return;
    uint p = pixels[k];
    g_pixel = p;
    uint start = offsets[p];
    uint end = offsets[p + 1u];
    float b;
    uint lo, hi;
    g_done = false;
#if TIDY_MODE == TIDY_FLATTEN
    if (st.w == FRESH) {
        for (int c = 0; c < NUM_COLUMNS; ++c) g_acc[c] = 0.0;
        g_front = uvec4(0u);
    } else {
        for (int c = 0; c < NUM_COLUMNS; ++c) g_acc[c] = out_values[k * uint(NUM_COLUMNS) + uint(c)];
        g_front = out_front[k];
    }
#else
    g_emitted = st.w == FRESH ? 0u : emitted[k];
#endif
    if (st.w == FRESH) {
        // The smallest boundary is the first Z: the list is sorted by Z and ZBack > Z.
        b = end > start ? keys[start].z : 0.0;
        lo = start;
        hi = start;
    } else {
        b = uintBitsToFloat(st.x);
        lo = st.y;
        hi = st.z;
    }
    // Loop iterations this invocation may still run (see WORK_BUDGET); every loop below is
    // charged before it runs.
    uint work = 0u;
    uint status = FINISHED;
    // Slots are global; lo..hi is the window of samples that may still contribute.
    while (end > start) {
        // Bring in the samples starting at b, as far as the budget goes (a fresh pass always
        // gets somewhere, so even a huge pixel makes progress).
        uint limit = min(end, hi + (uint(WORK_BUDGET) - work));
        work += (limit - hi) + 1u;
        for (; hi < limit; ++hi) {
            if (keys[hi].z > b) break;
        }
        if (hi < end && keys[hi].z <= b) {
            status = RUNNING;
            break;
        }
        // Points (with their column loops), next boundary, slab pieces (a window loop per
        // column), lo advance, compositing: charged as if no column loop were unrolled.
        uint cost = uint(6 * NUM_COLUMNS + 4) * (hi - lo) + 8u * uint(NUM_COLUMNS) + 16u;
        if (cost > uint(WORK_BUDGET)) {
            status = TOO_LONG;
            break;
        }
        if (work + cost > uint(WORK_BUDGET)) {
            status = RUNNING;
            break;
        }
        work += cost;
#if TIDY_MODE == TIDY_FLATTEN
        for (uint i = lo; i < hi; ++i) {
            if (g_done) break;
            Fragment f = keys[i];
            if (f.z == b && !is_volume(f)) {
                if (deliver(f, f.z, f.zback, false, i)) break;
            }
        }
#else
        {
#if TIDY_MODE == TIDY_COUNT
            uint point = slab_first(lo, hi, b, true);
#else
            uint point = slab_piece(lo, hi, b, b, true);
#endif
            if (point != 0xffffffffu) {
                Fragment f = keys[point];
                deliver(f, f.z, f.zback, true, point);
            }
        }
#endif
        float next = 0.0;
        bool found = false;
        if (hi < end && keys[hi].z > b) {
            next = keys[hi].z;
            found = true;
        }
        for (uint i = lo; i < hi; ++i) {
            Fragment f = keys[i];
            if (is_volume(f) && f.zback > b && (!found || f.zback < next)) {
                next = f.zback;
                found = true;
            }
        }
        // Each step moves to a strictly larger boundary; NaN depths end the walk here.
        if (g_done || !found) break;
#if TIDY_MODE == TIDY_COUNT
        uint first = slab_first(lo, hi, b, false);
#else
        uint first = slab_piece(lo, hi, b, next, false);
#endif
        if (first != 0xffffffffu) {
            if (deliver(keys[first], b, next, true, first)) break;
        }
        b = next;
        // Samples ending at or before the new boundary can never contribute again.
        for (; lo < hi; ++lo) {
            Fragment f = keys[lo];
            if (is_volume(f) && f.zback > b) break;
        }
    }
#if TIDY_MODE == TIDY_FLATTEN
    for (int c = 0; c < NUM_COLUMNS; ++c) {
        out_values[k * uint(NUM_COLUMNS) + uint(c)] = g_acc[c];
    }
    out_front[k] = g_front;
#else
    emitted[k] = g_emitted;
#endif
    state[k] = uvec4(floatBitsToUint(b), lo, hi, status);
    if (status == RUNNING) atomicAdd(counters[0], 1u);
    if (status == TOO_LONG) atomicAdd(counters[1], 1u);
}
