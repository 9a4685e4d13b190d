// One sample's key as every stage moves it (Rust: vocab::Fragment). The composited values live in
// a parallel float buffer, NUM_COLUMNS per slot, at the same slot index.
struct Fragment {
    float z;
    float zback;
    uint input_index;
    uint sample_index;
};

// Strict (Z, ZBack) order, as vocab::depth_less.
bool depth_less(Fragment a, Fragment b) {
    return a.z < b.z || (a.z == b.z && a.zback < b.zback);
}

// LAYOUT_LL, LAYOUT_LA, LAYOUT_IA and LAYOUT_BIA come from Rust (`vocab::glsl_defines`, emitted
// by the program loader before any stage), so they cannot drift from `Layout::glsl_id`.
