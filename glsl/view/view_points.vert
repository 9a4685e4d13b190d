// The viewer's points mode: one point per sample (view::cloud's PointRecord), placed by the
// orbit camera's view-projection matrix (view::orbit, computed in Rust) and coloured by depth,
// id or the sample's own colour. The depth ramp is view::display::depth_ramp's; the id colour
// was computed on the host (display::id_colour), so this stage only picks.
layout(location = 0) in vec3 a_position;
layout(location = 1) in float a_depth;    // the sample's Z
layout(location = 2) in vec4 a_rgba;      // the colour `points` writes (sRGB bytes)
layout(location = 3) in vec4 a_id_rgba;   // the id's false colour

uniform mat4 u_view_projection;
uniform int u_colour;        // COLOUR_* below
uniform vec2 u_depth_range;  // the depths the ramp spans
uniform vec2 u_slice;        // the depth slice: points outside it are not drawn
uniform vec3 u_ramp[3];      // near, middle and far colours of the depth ramp

flat out vec3 v_colour;

#define COLOUR_DEPTH 0
#define COLOUR_ID 1
#define COLOUR_SAMPLE 2

void main() {
    if (!(a_depth >= u_slice.x && a_depth <= u_slice.y)) {
        // Outside the clip volume: the point is dropped before rasterisation.
        gl_Position = vec4(2.0, 2.0, 2.0, 1.0);
        v_colour = vec3(0.0);
        return;
    }
    gl_Position = u_view_projection * vec4(a_position, 1.0);
    if (u_colour == COLOUR_DEPTH) {
        float span = max(u_depth_range.y - u_depth_range.x, 1e-30);
        float t = clamp((a_depth - u_depth_range.x) / span, 0.0, 1.0);
        v_colour = t < 0.5 ? mix(u_ramp[0], u_ramp[1], 2.0 * t)
                           : mix(u_ramp[1], u_ramp[2], 2.0 * t - 1.0);
    } else if (u_colour == COLOUR_ID) {
        v_colour = a_id_rgba.rgb;
    } else {
        v_colour = a_rgba.rgb;
    }
}
