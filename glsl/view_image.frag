// The viewer's image pass: for each window pixel, the image pixel under it (camera: origin and
// zoom), read from slice.comp's output and drawn in the current view. The display transforms
// are the ones `view::display` states in Rust (the tests compare the two).
// A layer is held in bands of rows, one sliced buffer each: the pass is drawn once per band,
// with `u_data` the band's rows and `u_rows` the image rows whose window pixels it draws.
layout(std430, binding = 3) readonly buffer Sliced { float sliced[]; };

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

out vec4 frag;

#define VIEW_COMPOSITE 0
#define VIEW_CHANNEL 1
#define VIEW_DEPTH 2
#define VIEW_HEATMAP 3
#define STRIDE (NUM_COLUMNS + 2)

const uint HEAT_HI[5] = uint[5](HEAT_BIN_LIST);
const vec3 HEAT_COLOUR[5] = vec3[5](HEAT_COLOUR_LIST);

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
        } else {
            rgb = heat(uint(sliced[base + uint(NUM_COLUMNS) + 1u])) / 255.0;
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
