//! Where the image lies in the window: an origin (the window pixel of the display window's
//! top-left corner) and a zoom (window pixels per image pixel). Pan moves the origin, zoom keeps
//! the image point under the cursor fixed, fit and 1:1 centre the image in the image area.

/// The image area of the window (window pixels, top-left origin): what the panel leaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    /// Width in window pixels.
    pub width: f64,
    /// Height in window pixels.
    pub height: f64,
}

/// The image's placement in the window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    /// Window position of the display window's top-left corner.
    pub origin: [f64; 2],
    /// Window pixels per image pixel.
    pub zoom: f64,
}

/// Zoom limits: a whole 8K frame in a thumbnail, a pixel as large as a small window.
pub const ZOOM_RANGE: (f64, f64) = (1.0 / 64.0, 256.0);

impl Camera {
    /// The whole image (`size` pixels) as large as fits in `area`, centred.
    pub fn fit(size: (usize, usize), area: Area) -> Camera {
        let (w, h) = (size.0.max(1) as f64, size.1.max(1) as f64);
        let zoom = (area.width / w)
            .min(area.height / h)
            .clamp(ZOOM_RANGE.0, ZOOM_RANGE.1);
        Self::centred(size, area, zoom)
    }

    /// One image pixel per window pixel, centred, on whole pixels (so nothing is resampled).
    pub fn one_to_one(size: (usize, usize), area: Area) -> Camera {
        let mut camera = Self::centred(size, area, 1.0);
        camera.origin = camera.origin.map(f64::round);
        camera
    }

    fn centred(size: (usize, usize), area: Area, zoom: f64) -> Camera {
        Camera {
            origin: [
                (area.width - size.0 as f64 * zoom) / 2.0,
                (area.height - size.1 as f64 * zoom) / 2.0,
            ],
            zoom,
        }
    }

    /// Move the image by a drag of `delta` window pixels.
    pub fn pan(&mut self, delta: [f64; 2]) {
        self.origin[0] += delta[0];
        self.origin[1] += delta[1];
    }

    /// Zoom by `factor` keeping the image point under window position `at` where it is.
    pub fn zoom_about(&mut self, at: [f64; 2], factor: f64) {
        let zoom = (self.zoom * factor).clamp(ZOOM_RANGE.0, ZOOM_RANGE.1);
        let k = zoom / self.zoom;
        self.origin = [
            at[0] - (at[0] - self.origin[0]) * k,
            at[1] - (at[1] - self.origin[1]) * k,
        ];
        self.zoom = zoom;
    }

    /// The image pixel (relative to the display window's corner) under window position `at`.
    pub fn pixel_at(&self, at: [f64; 2]) -> (i64, i64) {
        (
            ((at[0] - self.origin[0]) / self.zoom).floor() as i64,
            ((at[1] - self.origin[1]) / self.zoom).floor() as i64,
        )
    }

    /// The window position of the centre of image pixel `pixel` (relative to the corner).
    pub fn window_of(&self, pixel: (i64, i64)) -> [f64; 2] {
        [
            self.origin[0] + (pixel.0 as f64 + 0.5) * self.zoom,
            self.origin[1] + (pixel.1 as f64 + 0.5) * self.zoom,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AREA: Area = Area {
        width: 800.0,
        height: 600.0,
    };

    #[test]
    fn fit_centres_the_whole_image() {
        let c = Camera::fit((400, 100), AREA);
        assert_eq!(c.zoom, 2.0);
        assert_eq!(c.origin, [0.0, 200.0]);
        assert_eq!(c.pixel_at([1.0, 201.0]), (0, 0));
        assert_eq!(c.pixel_at([799.0, 399.0]), (399, 99));
    }

    #[test]
    fn zoom_keeps_the_point_under_the_cursor() {
        let mut c = Camera::one_to_one((101, 51), AREA);
        assert_eq!(c.origin, [350.0, 275.0]);
        let at = [412.3, 301.7];
        let before = [
            (at[0] - c.origin[0]) / c.zoom,
            (at[1] - c.origin[1]) / c.zoom,
        ];
        c.zoom_about(at, 3.0);
        let after = [
            (at[0] - c.origin[0]) / c.zoom,
            (at[1] - c.origin[1]) / c.zoom,
        ];
        assert!((before[0] - after[0]).abs() < 1e-9 && (before[1] - after[1]).abs() < 1e-9);
        c.pan([10.0, -5.0]);
        assert_eq!(c.pixel_at(c.window_of((7, 9))), (7, 9));
    }
}
