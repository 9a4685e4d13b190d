// One sample's key as every stage moves it (twin: cpu::Fragment). The composited values live in
// a parallel float buffer, NUM_COLUMNS per slot, at the same slot index.
struct Fragment {
    float z;
    float zback;
    uint input_index;
    uint sample_index;
};

// Strict (Z, ZBack) order, as composite::depth_less.
bool depth_less(Fragment a, Fragment b) {
    return a.z < b.z || (a.z == b.z && a.zback < b.zback);
}

#define LAYOUT_LL 0
#define LAYOUT_LA 1
#define LAYOUT_IA 2
#define LAYOUT_BIA 3
