// The viewer's points mode: each point one window pixel of its colour (view_points.vert).
flat in vec3 v_colour;

out vec4 frag;

void main() {
    frag = vec4(v_colour, 1.0);
}
