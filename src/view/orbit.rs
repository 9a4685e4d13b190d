//! The points mode's camera: a perspective camera orbiting a target (the point cloud's centre)
//! at a distance, turned by a yaw about the data's up axis and a pitch about its right axis.
//! The data's axes ([`Basis`]) are those of the image: at yaw and pitch 0 the camera looks
//! down the depth axis with the image's x to the right and its y up the screen, so the cloud
//! first appears as the picture does. The matrices are computed here in f64 and handed to the
//! shader as one f32 view-projection matrix; [`OrbitCamera::project`] is the same arithmetic
//! on the host (the tests and the window test place points with it).

/// Three orthonormal directions in world space: the image's right, up and into the picture.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Basis {
    /// The image's x, to the right.
    pub right: [f64; 3],
    /// The image's up (pixel y runs the other way).
    pub up: [f64; 3],
    /// Into the picture: away from the camera that made it.
    pub forward: [f64; 3],
}

impl Basis {
    /// Pixel coordinates (x right, y down) and depth (away from the viewer).
    pub const PIXELS: Basis = Basis {
        right: [1.0, 0.0, 0.0],
        up: [0.0, -1.0, 0.0],
        forward: [0.0, 0.0, 1.0],
    };

    /// The basis closest to `right`, `up` and `forward` (directions, any length): forward
    /// kept, up made perpendicular to it, right completing the triple (so the result is
    /// orthonormal whatever a camera's matrices hold); none when they are degenerate.
    pub fn orthonormal(right: [f64; 3], up: [f64; 3], forward: [f64; 3]) -> Option<Basis> {
        let forward = normalise(forward)?;
        let up = normalise(sub(up, scale(forward, dot(up, forward))))?;
        // right × up = -forward for a camera looking down forward (see PIXELS); keep the
        // handedness of the given right.
        let mut r = cross(up, forward);
        if dot(r, right) < 0.0 {
            r = scale(r, -1.0);
        }
        Some(Basis {
            right: normalise(r)?,
            up,
            forward,
        })
    }
}

/// The vertical field of view, in radians.
pub const FOV_Y: f64 = 0.8;
/// Radians of yaw or pitch per window pixel dragged.
pub const ORBIT_PER_PIXEL: f64 = 0.01;
/// The pitch stays this far inside ±90° (at ±90° up and the view direction meet).
const PITCH_LIMIT: f64 = std::f64::consts::FRAC_PI_2 - 0.01;
/// Distance limits, in cloud radii.
pub const DISTANCE_RANGE: (f64, f64) = (1e-3, 100.0);

/// Where the points mode looks from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OrbitCamera {
    /// The data's axes.
    pub basis: Basis,
    /// The point looked at (the cloud's centre).
    pub target: [f64; 3],
    /// The radius of the cloud's bounding sphere about the target (sets near and far).
    pub radius: f64,
    /// From the eye to the target.
    pub distance: f64,
    /// Turn about the basis' up axis, radians (positive: the eye moves to the left).
    pub yaw: f64,
    /// Turn about the turned right axis, radians (positive: the eye moves down).
    pub pitch: f64,
}

impl OrbitCamera {
    /// Looking at the box `lo`..`hi` down `basis`' forward axis, from where the whole box
    /// fits an image area of `aspect` (width over height).
    pub fn fit(basis: Basis, lo: [f64; 3], hi: [f64; 3], aspect: f64) -> OrbitCamera {
        let target = scale(add(lo, hi), 0.5);
        let radius = (length(sub(hi, lo)) / 2.0).max(1e-6);
        // The bounding sphere inside the narrower of the two fields of view.
        let half_x = ((FOV_Y / 2.0).tan() * aspect.max(1e-3)).atan();
        let half = half_x.min(FOV_Y / 2.0);
        OrbitCamera {
            basis,
            target,
            radius,
            distance: radius / half.sin(),
            yaw: 0.0,
            pitch: 0.0,
        }
    }

    /// Turn by a drag of `delta` window pixels: right turns the cloud to the right (the eye
    /// to the left), down tips its top towards the viewer (the eye up).
    pub fn orbit(&mut self, delta: [f64; 2]) {
        self.yaw += delta[0] * ORBIT_PER_PIXEL;
        self.pitch = (self.pitch - delta[1] * ORBIT_PER_PIXEL).clamp(-PITCH_LIMIT, PITCH_LIMIT);
    }

    /// Move towards the target (`factor` > 1) or away (< 1): the distance is divided by
    /// `factor`, within [`DISTANCE_RANGE`] radii.
    pub fn zoom(&mut self, factor: f64) {
        let (lo, hi) = DISTANCE_RANGE;
        self.distance = (self.distance / factor).clamp(lo * self.radius, hi * self.radius);
    }

    /// The camera's right, up and viewing directions (from the eye towards the target).
    pub fn axes(&self) -> ([f64; 3], [f64; 3], [f64; 3]) {
        let Basis { right, up, forward } = self.basis;
        let (sy, cy) = self.yaw.sin_cos();
        let (sp, cp) = self.pitch.sin_cos();
        let level = add(scale(forward, cy), scale(right, sy));
        let view = add(scale(level, cp), scale(up, sp));
        let r = sub(scale(right, cy), scale(forward, sy));
        (r, cross(r, view), view)
    }

    /// Where the eye is.
    pub fn eye(&self) -> [f64; 3] {
        let (_, _, view) = self.axes();
        sub(self.target, scale(view, self.distance))
    }

    /// The near and far planes: around the cloud's sphere, the near one kept in front of the
    /// eye when the eye is inside the cloud.
    pub fn planes(&self) -> (f64, f64) {
        let far = self.distance + self.radius * 1.01;
        let near = (self.distance - self.radius * 1.01).max(far * 1e-4);
        (near, far)
    }

    /// The view-projection matrix (world to clip space) for an image area of `aspect`, row
    /// by row: `clip = M (x, y, z, 1)`.
    pub fn view_projection(&self, aspect: f64) -> [[f64; 4]; 4] {
        let (r, u, v) = self.axes();
        let eye = self.eye();
        // View space: x right, y up, looking down -z (GL's convention).
        let view = [
            [r[0], r[1], r[2], -dot(r, eye)],
            [u[0], u[1], u[2], -dot(u, eye)],
            [-v[0], -v[1], -v[2], dot(v, eye)],
            [0.0, 0.0, 0.0, 1.0],
        ];
        let (near, far) = self.planes();
        let f = 1.0 / (FOV_Y / 2.0).tan();
        let projection = [
            [f / aspect.max(1e-6), 0.0, 0.0, 0.0],
            [0.0, f, 0.0, 0.0],
            [
                0.0,
                0.0,
                (far + near) / (near - far),
                2.0 * far * near / (near - far),
            ],
            [0.0, 0.0, -1.0, 0.0],
        ];
        let mut out = [[0.0; 4]; 4];
        for (i, row) in out.iter_mut().enumerate() {
            for (j, value) in row.iter_mut().enumerate() {
                *value = (0..4).map(|k| projection[i][k] * view[k][j]).sum();
            }
        }
        out
    }

    /// [`OrbitCamera::view_projection`] as GL takes it: f32, column by column.
    pub fn gl_matrix(&self, aspect: f64) -> [f32; 16] {
        let m = self.view_projection(aspect);
        std::array::from_fn(|k| m[k % 4][k / 4] as f32)
    }

    /// The position in an image area of `size` window pixels (top-left origin) where point
    /// `p` is drawn, none when it lies outside the near and far planes or behind the eye.
    pub fn project(&self, p: [f64; 3], size: (f64, f64)) -> Option<[f64; 2]> {
        let m = self.view_projection(size.0 / size.1);
        let clip: Vec<f64> = (0..4)
            .map(|i| m[i][0] * p[0] + m[i][1] * p[1] + m[i][2] * p[2] + m[i][3])
            .collect();
        if clip[3] <= 0.0 || clip[2].abs() > clip[3] {
            return None;
        }
        let (nx, ny) = (clip[0] / clip[3], clip[1] / clip[3]);
        Some([(nx + 1.0) / 2.0 * size.0, (1.0 - ny) / 2.0 * size.1])
    }

    /// The state as text: `yaw Y pitch P distance D`, in full precision (the window test
    /// rebuilds the camera from it).
    pub fn describe(&self) -> String {
        format!(
            "yaw {} pitch {} distance {}",
            self.yaw, self.pitch, self.distance
        )
    }
}

fn add(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn scale(a: [f64; 3], k: f64) -> [f64; 3] {
    [a[0] * k, a[1] * k, a[2] * k]
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn length(a: [f64; 3]) -> f64 {
    dot(a, a).sqrt()
}

fn normalise(a: [f64; 3]) -> Option<[f64; 3]> {
    let l = length(a);
    (l.is_finite() && l > 1e-300).then(|| scale(a, 1.0 / l))
}

#[cfg(test)]
mod tests {
    use super::*;

    const AREA: (f64, f64) = (800.0, 600.0);

    /// A 1920x1080 frame of pixel coordinates, depths 10 to 90.
    fn camera() -> OrbitCamera {
        OrbitCamera::fit(
            Basis::PIXELS,
            [0.0, 0.0, 10.0],
            [1920.0, 1080.0, 90.0],
            AREA.0 / AREA.1,
        )
    }

    fn near(a: [f64; 2], b: [f64; 2]) -> bool {
        (a[0] - b[0]).abs() < 1e-6 && (a[1] - b[1]).abs() < 1e-6
    }

    #[test]
    fn the_target_projects_to_the_centre_whatever_the_orbit() {
        let mut c = camera();
        let centre = [AREA.0 / 2.0, AREA.1 / 2.0];
        for (drag, wheel) in [
            ([0.0, 0.0], 1.0),
            ([120.0, -40.0], 1.5),
            ([-300.0, 500.0], 0.3),
        ] {
            c.orbit(drag);
            c.zoom(wheel);
            let at = c.project(c.target, AREA).unwrap();
            assert!(near(at, centre), "{at:?} after {drag:?}, {wheel}");
        }
    }

    #[test]
    fn at_rest_the_cloud_looks_like_the_picture() {
        let c = camera();
        // The image's corners keep their places: top-left up and left of the centre, x to the
        // right, y down the screen, and the whole frame inside the area.
        let tl = c.project([0.0, 0.0, 50.0], AREA).unwrap();
        let br = c.project([1920.0, 1080.0, 50.0], AREA).unwrap();
        assert!(tl[0] < AREA.0 / 2.0 && tl[1] < AREA.1 / 2.0, "{tl:?}");
        assert!(br[0] > AREA.0 / 2.0 && br[1] > AREA.1 / 2.0, "{br:?}");
        for p in [tl, br] {
            assert!((0.0..=AREA.0).contains(&p[0]) && (0.0..=AREA.1).contains(&p[1]));
        }
        // Nearer points of the same pixel spread further from the centre (perspective).
        let front = c.project([0.0, 0.0, 10.0], AREA).unwrap();
        assert!(front[0] < tl[0] && front[1] < tl[1]);
    }

    #[test]
    fn zoom_changes_the_distance_monotonically_within_limits() {
        let mut c = camera();
        let mut last = c.distance;
        for _ in 0..200 {
            c.zoom(1.25);
            assert!(c.distance <= last);
            last = c.distance;
        }
        assert_eq!(c.distance, DISTANCE_RANGE.0 * c.radius);
        for _ in 0..400 {
            c.zoom(0.8);
            assert!(c.distance >= last);
            last = c.distance;
        }
        assert_eq!(c.distance, DISTANCE_RANGE.1 * c.radius);
        // Closer: a point off the centre moves outwards.
        let mut c = camera();
        let p = [1200.0, 540.0, 50.0];
        let before = c.project(p, AREA).unwrap()[0] - AREA.0 / 2.0;
        c.zoom(1.5);
        let after = c.project(p, AREA).unwrap()[0] - AREA.0 / 2.0;
        assert!(after > before && before > 0.0);
    }

    #[test]
    fn dragging_right_turns_the_near_side_right() {
        let mut c = camera();
        // The cloud's near face moves right and its far face left as the eye goes left.
        let front = [960.0, 540.0, 10.0];
        let back = [960.0, 540.0, 90.0];
        c.orbit([50.0, 0.0]);
        assert!((c.yaw - 50.0 * ORBIT_PER_PIXEL).abs() < 1e-12);
        let f = c.project(front, AREA).unwrap();
        let b = c.project(back, AREA).unwrap();
        assert!(f[0] > AREA.0 / 2.0 && b[0] < AREA.0 / 2.0, "{f:?} {b:?}");
        // Down tips the top forward: the eye rises, the near face moves down the screen.
        let mut c = camera();
        c.orbit([0.0, 50.0]);
        let f = c.project(front, AREA).unwrap();
        assert!(f[1] > AREA.1 / 2.0, "{f:?}");
        // The pitch stops short of the poles.
        c.orbit([0.0, 1e6]);
        assert!(c.pitch > -std::f64::consts::FRAC_PI_2);
        assert!(c.project(c.target, AREA).is_some());
    }

    #[test]
    fn the_gl_matrix_is_the_view_projection_by_columns() {
        let mut c = camera();
        c.orbit([33.0, -12.0]);
        let m = c.view_projection(1.5);
        let g = c.gl_matrix(1.5);
        assert_eq!(g[1], m[1][0] as f32);
        assert_eq!(g[4], m[0][1] as f32);
        assert_eq!(g[14], m[2][3] as f32);
    }

    #[test]
    fn a_basis_is_made_orthonormal_and_keeps_its_handedness() {
        let b = Basis::orthonormal([2.0, 0.0, 0.1], [0.1, -3.0, 0.0], [0.0, 0.0, 5.0]).unwrap();
        assert!(dot(b.right, b.up).abs() < 1e-12 && dot(b.up, b.forward).abs() < 1e-12);
        assert!(dot(b.right, [1.0, 0.0, 0.0]) > 0.99);
        assert!(dot(b.up, [0.0, -1.0, 0.0]) > 0.99);
        assert_eq!(
            Basis::orthonormal(Basis::PIXELS.right, Basis::PIXELS.up, Basis::PIXELS.forward),
            Some(Basis::PIXELS)
        );
        assert!(Basis::orthonormal([1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]).is_none());
    }
}
