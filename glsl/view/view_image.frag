// The viewer's image pass: for each window pixel, the image pixel under it (camera: origin and
// zoom), read from slice.comp's output and drawn in the current view. The display transforms
// are the ones `view::display` states in Rust (the tests compare the two).
// A layer is held in bands of rows, one sliced buffer each: the pass is drawn once per band,
// with `u_data` the band's rows and `u_rows` the image rows whose window pixels it draws.
// The id view also reads the band's samples (the slice pass's bindings 0 to 2) and their ids.
layout(std430, binding = 0) readonly buffer Offsets { uint offsets[]; };
layout(std430, binding = 1) readonly buffer Depths { vec2 depths[]; };
layout(std430, binding = 2) readonly buffer Values { float values[]; };
layout(std430, binding = 3) readonly buffer Sliced { float sliced[]; };
layout(std430, binding = 4) readonly buffer Ids { uint ids[]; };

uniform vec2 u_origin;      // window pixel (top-left origin) of the display window's corner
uniform float u_zoom;       // window pixels per image pixel
uniform float u_height;     // window height, to turn gl_FragCoord upside down
uniform ivec2 u_display0;   // display window corner (absolute)
uniform ivec4 u_display;    // display window x0, y0, x1, y1
uniform ivec4 u_data;       // this band's part of the data window x0, y0, x1, y1
uniform ivec2 u_rows;       // image rows (absolute) this band draws: its own, and beyond
uniform int u_view;         // VIEW_* below
uniform ivec4 u_rgba;       // columns of R, G, B, A (-1 where absent)
uniform int u_channel;      // the column VIEW_CHANNEL shows
uniform float u_gain;       // 2^exposure
uniform vec2 u_depth_range; // depths the depth view spans
uniform ivec2 u_pinned;     // the pinned pixel (absolute), or far outside
uniform int u_pin_shown;    // 1 when a pixel is pinned
uniform vec2 u_slice;       // the slice's near and far planes
uniform int u_id_channel;   // the id channel VIEW_ID shows
uniform int u_id_stride;    // ids per sample

out vec4 frag;

#define VIEW_COMPOSITE 0
#define VIEW_CHANNEL 1
#define VIEW_DEPTH 2
#define VIEW_HEATMAP 3
#define VIEW_ID 4
#define STRIDE (NUM_COLUMNS + 2)

const uint HEAT_HI[5] = uint[5](HEAT_BIN_LIST);
const vec3 HEAT_COLOUR[5] = vec3[5](HEAT_COLOUR_LIST);
const int ID_ALPHAS[NUM_ALPHAS_ALLOC] = int[NUM_ALPHAS_ALLOC](ALPHAS_LIST);

float srgb(float linear) {
    float v = clamp(linear, 0.0, 1.0);
    return v <= 0.0031308 ? 12.92 * v : 1.055 * pow(v, 1.0 / 2.4) - 0.055;
}

// heatmap::complexity_colour, in 0..255 units, rounded as the Rust one rounds.
vec3 heat(uint count) {
    if (count == 0u) return vec3(0.0);
    int bin = 4;
    for (int i = 0; i < 5; ++i) {
        if (count <= HEAT_HI[i]) { bin = i; break; }
    }
    uint lo = bin == 0 ? 0u : HEAT_HI[bin - 1];
    uint hi = bin == 4 ? 4u * lo : HEAT_HI[bin];
    float t = min(float(count - lo) / float(hi - lo), 1.0);
    float k = HEAT_FLOOR + (1.0 - HEAT_FLOOR) * t;
    return floor(HEAT_COLOUR[bin] * k + 0.5);
}

// display::id_colour, operation for operation (integers only, so the two agree exactly): black
// for id 0, else hue, saturation and value from murmur3's finalizer of the id.
uvec3 id_colour(uint id) {
    if (id == 0u) return uvec3(0u);
    uint h = id;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    uint hue = ((h >> 16) * 1536u) >> 16;
    uint s = 150u + (h & 0xffu) * 105u / 255u;
    uint v = 180u + ((h >> 8) & 0xffu) * 75u / 255u;
    uint sector = hue / 256u;
    uint f = hue % 256u;
    uint p = v * (255u - s) / 255u;
    uint q = v * (255u - s * f / 255u) / 255u;
    uint t = v * (255u - s * (255u - f) / 255u) / 255u;
    if (sector == 0u) return uvec3(v, t, p);
    if (sector == 1u) return uvec3(q, v, p);
    if (sector == 2u) return uvec3(p, v, t);
    if (sector == 3u) return uvec3(p, q, v);
    if (sector == 4u) return uvec3(t, p, v);
    return uvec3(v, p, q);
}

// The id the id view shows for band pixel p: that of the sample the slice pass took its front
// depth from (the front-most sample inside the slice with any alpha above 0; Layer::front_id
// is the host twin), found again by its piece's front depth; 0 where the slice has none.
uint front_id(uint p, float front) {
    if (isnan(front) || u_id_stride <= 0) return 0u;
    for (uint s = offsets[p]; s < offsets[p + 1u]; ++s) {
        vec2 d = depths[s];
        bool volume = d.y > d.x;
        float lo = max(d.x, u_slice.x);
        float hi = min(d.y, u_slice.y);
        if (!volume) {
            if (d.x < u_slice.x || d.x > u_slice.y) continue;
        } else if (!(hi > lo)) {
            continue;
        }
        if ((volume ? lo : d.x) != front) continue;
        for (int j = 0; j < NUM_ALPHAS; ++j) {
            if (values[s * uint(NUM_COLUMNS) + uint(ID_ALPHAS[j])] > 0.0) {
                return ids[s * uint(u_id_stride) + uint(u_id_channel)];
            }
        }
    }
    return 0u;
}

float column(uint base, int c) {
    return c < 0 ? 0.0 : sliced[base + uint(c)];
}

void main() {
    vec2 at = vec2(gl_FragCoord.x, u_height - gl_FragCoord.y);
    ivec2 px = ivec2(floor((at - u_origin) / u_zoom)) + u_display0;
    // Another band's pixel: that band's draw writes it.
    if (px.y < u_rows.x || px.y > u_rows.y) discard;
    bool in_display = all(greaterThanEqual(px, u_display.xy)) && all(lessThanEqual(px, u_display.zw));
    bool in_data = all(greaterThanEqual(px, u_data.xy)) && all(lessThanEqual(px, u_data.zw));
    vec3 rgb = in_display ? vec3(0.0) : vec3(0.16);
    if (in_data) {
        int width = u_data.z - u_data.x + 1;
        uint p = uint((px.y - u_data.y) * width + (px.x - u_data.x));
        uint base = p * uint(STRIDE);
        if (u_view == VIEW_COMPOSITE) {
            vec3 c = vec3(column(base, u_rgba.x), column(base, u_rgba.y), column(base, u_rgba.z));
            rgb = vec3(srgb(c.r * u_gain), srgb(c.g * u_gain), srgb(c.b * u_gain));
        } else if (u_view == VIEW_CHANNEL) {
            float gain = u_channel == u_rgba.w ? 1.0 : u_gain;
            rgb = vec3(srgb(column(base, u_channel) * gain));
        } else if (u_view == VIEW_DEPTH) {
            float z = sliced[base + uint(NUM_COLUMNS)];
            if (!isnan(z)) {
                float span = max(u_depth_range.y - u_depth_range.x, 1e-30);
                float t = clamp((z - u_depth_range.x) / span, 0.0, 1.0);
                rgb = vec3(1.0 - DEPTH_FAR_DIM * t);
            }
        } else if (u_view == VIEW_HEATMAP) {
            rgb = heat(uint(sliced[base + uint(NUM_COLUMNS) + 1u])) / 255.0;
        } else {
            rgb = vec3(id_colour(front_id(p, sliced[base + uint(NUM_COLUMNS)]))) / 255.0;
        }
    }
    // The pinned pixel: outlined where it is at least 5 window pixels wide, else marked by a
    // crosshair with a gap, so the pixel itself stays visible.
    if (px == u_pinned && u_zoom >= 5.0) {
        vec2 inside = fract((at - u_origin) / u_zoom) * u_zoom;
        if (min(inside.x, inside.y) < 1.0 || max(inside.x, inside.y) > u_zoom - 1.0) {
            rgb = vec3(1.0, 0.2, 0.8);
        }
    } else if (u_zoom < 5.0 && u_pin_shown != 0) {
        vec2 centre = u_origin + (vec2(u_pinned - u_display0) + 0.5) * u_zoom;
        vec2 off = abs(at - centre);
        if ((off.y < 1.0 && off.x > 4.0 && off.x < 14.0) || (off.x < 1.0 && off.y > 4.0 && off.y < 14.0)) {
            rgb = vec3(1.0, 0.2, 0.8);
        }
    }
    frag = vec4(rgb, 1.0);
}
