// "Over", front to back: the one home of the composite every flattening stage runs (the flat
// output of merge.comp and merge_kway.comp, tidy.comp's flatten, slice.comp's depth slice),
// operation for operation Rust's composite::flatten_pixel:
// out = out + (1 - out.A) * s, each colour under its own alpha, stopping once every alpha is 1.
// The column table (NUM_COLUMNS, ALPHA_OF, ALPHAS, NUM_ALPHAS) comes from ColumnSpec::defines.

const int ALPHA_OF[NUM_COLUMNS] = int[NUM_COLUMNS](ALPHA_OF_LIST);
const int ALPHAS[NUM_ALPHAS_ALLOC] = int[NUM_ALPHAS_ALLOC](ALPHAS_LIST);

// The running composite of this invocation's pixel. `precise` keeps the compiler from fusing
// acc + (1 - a) * v into an fma: the reference rounds the product and the sum separately.
precise float g_acc[NUM_COLUMNS];

// True once every alpha is 1 (never without alphas): nothing behind can show any more.
bool over_opaque() {
    if (NUM_ALPHAS == 0) return false;
    for (int j = 0; j < NUM_ALPHAS; ++j) {
        if (g_acc[ALPHAS[j]] < 1.0) return false;
    }
    return true;
}

// True when a sample with values v contributes (any alpha above 0): the front-most such sample
// supplies ids and Z to flat output.
bool over_contributes(float v[NUM_COLUMNS]) {
    for (int j = 0; j < NUM_ALPHAS; ++j) {
        if (v[ALPHAS[j]] > 0.0) return true;
    }
    return false;
}

// Composite a sample with values v under g_acc. Colours first: they read the alpha accumulated
// before this sample.
void over(float v[NUM_COLUMNS]) {
    for (int c = 0; c < NUM_COLUMNS; ++c) {
        if (ALPHA_OF[c] >= 0) {
            precise float t = (1.0 - g_acc[ALPHA_OF[c]]) * v[c];
            g_acc[c] = g_acc[c] + t;
        }
    }
    for (int j = 0; j < NUM_ALPHAS; ++j) {
        int k = ALPHAS[j];
        precise float t = (1.0 - g_acc[k]) * v[k];
        g_acc[k] = g_acc[k] + t;
    }
}
