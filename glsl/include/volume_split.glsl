// Splitting a homogeneous volume: the one home of the rule every stage that cuts a volume runs
// (tidy.comp's slab pieces, slice.comp's depth slice). Twins: cpu::tidy (these f32 functions,
// same names, same constants, same order of operations) and composite::tidy::split_alpha and
// piece_fraction (the f64 reference).
//
// A piece covering fraction f of a medium of alpha a has alpha 1 - (1 - a)^f, computed as
// -expm1(f * log1p(-a)); its colour scales by piece / a. GLSL has no log1p/expm1, and log/exp
// near 1 are only specified to an absolute 2^-21, so the maths below uses its own series (see
// cpu::tidy for the error bounds): the naive form, exp of f times log(1 - a), loses every
// digit of a small alpha.

const float LN2 = 0.693147182;
const float SQRT_HALF = 0.707106769;
const float SERIES_ALPHA = 0.29;
const float SERIES_EXP = 0.35;

// atanh(s)/s for s*s = t <= 0.0295.
float atanh_ratio(float t) {
    return 1.0 + t * (1.0 / 3.0 + t * (1.0 / 5.0 + t * (1.0 / 7.0 + t * (1.0 / 9.0))));
}

float log_f(float y) {
    int e;
    float m = frexp(y, e);
    if (m < SQRT_HALF) {
        m *= 2.0;
        e -= 1;
    }
    float s = (m - 1.0) / (m + 1.0);
    return float(e) * LN2 + 2.0 * s * atanh_ratio(s * s);
}

float exp_f(float t) {
    if (t < -88.0) return 0.0;
    if (t > 88.0) return uintBitsToFloat(0x7f800000u);
    float k = floor(t / LN2 + 0.5);
    float r = t - k * LN2;
    float e = 1.0 + r * (1.0 + r / 2.0 * (1.0 + r / 3.0 * (1.0 + r / 4.0 * (1.0 + r / 5.0
        * (1.0 + r / 6.0 * (1.0 + r / 7.0 * (1.0 + r / 8.0 * (1.0 + r / 9.0))))))));
    return ldexp(e, int(k));
}

// -log1p(-a): the optical depth of alpha a < 1.
float optical_depth(float a) {
    if (abs(a) <= SERIES_ALPHA) {
        float s = a / (2.0 - a);
        return 2.0 * s * atanh_ratio(s * s);
    }
    return -log_f(1.0 - a);
}

// -expm1(-x): the alpha of optical depth x.
float alpha_of_depth(float x) {
    if (abs(x) <= SERIES_EXP) {
        return x * (1.0 - x / 2.0 * (1.0 - x / 3.0 * (1.0 - x / 4.0 * (1.0 - x / 5.0
            * (1.0 - x / 6.0 * (1.0 - x / 7.0 * (1.0 - x / 8.0 * (1.0 - x / 9.0))))))));
    }
    return 1.0 - exp_f(-x);
}

// (piece alpha, colour scale) of the piece covering `fraction` of a medium of alpha `alpha`
// (opaque and NaN alphas stay whole; a clear medium scales colour by the fraction).
vec2 split_alpha(float alpha, float fraction) {
    if (alpha >= 1.0 || isnan(alpha)) return vec2(alpha, 1.0);
    if (alpha == 0.0) return vec2(0.0, fraction);
    float piece = alpha_of_depth(fraction * optical_depth(alpha));
    return vec2(piece, piece / alpha);
}

// The fraction of volume [z, zback) that [front, back) covers: an infinitely deep volume gives
// its finite pieces nothing and its infinite pieces everything.
float piece_fraction(float front, float back, float z, float zback) {
    float len = zback - z;
    float span = back - front;
    if (!isinf(len) && !isnan(len)) return clamp(span / len, 0.0, 1.0);
    return (!isinf(span) && !isnan(span)) ? 0.0 : 1.0;
}
