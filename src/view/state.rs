//! What the viewer shows, independent of the window: which layer, which view, exposure, the
//! depth slice, the camera and the pinned pixel, the points mode (its colouring and orbit
//! camera); and the keys that change them.

use super::camera::{Area, Camera};
use super::cloud::PointColour;
use super::load::Layer;
use super::orbit::OrbitCamera;
use crate::inspect::TableValues;

/// What the image area draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// The flat composite (R, G, B) with exposure and the sRGB transform.
    Composite,
    /// One composited column as grey (alpha without exposure).
    Channel(usize),
    /// The front-most contributing depth, near white, far dim.
    Depth,
    /// Samples per pixel in the paper's bins.
    Heatmap,
    /// False colour per id ([`super::display::id_colour`]) of the layer's id channel `k`
    /// ([`Layer::id_names`]), from the front-most contributing sample inside the slice.
    Id(usize),
}

impl View {
    /// The shader's `VIEW_*` number.
    pub fn shader_id(self) -> i32 {
        match self {
            View::Composite => 0,
            View::Channel(_) => 1,
            View::Depth => 2,
            View::Heatmap => 3,
            View::Id(_) => 4,
        }
    }
}

/// The near and far clip planes; infinite ones clip nothing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slice {
    /// Samples in front of this are left out (volumes cut here).
    pub near: f32,
    /// Samples behind this are left out (volumes cut here).
    pub far: f32,
}

impl Default for Slice {
    fn default() -> Self {
        Slice {
            near: f32::NEG_INFINITY,
            far: f32::INFINITY,
        }
    }
}

/// Steps per depth range that a slicing key moves a plane.
pub const SLICE_STEPS: f32 = 20.0;

impl Slice {
    /// True when nothing is clipped.
    pub fn is_whole(&self) -> bool {
        self.near == f32::NEG_INFINITY && self.far == f32::INFINITY
    }

    /// Move the near plane by `steps` twentieths of `range` (back for positive steps); moving
    /// it to the front of the range or beyond unclips it.
    pub fn move_near(&mut self, steps: f32, range: (f32, f32)) {
        let step = (range.1 - range.0) / SLICE_STEPS;
        let from = if self.near.is_finite() {
            self.near
        } else {
            range.0
        };
        let to = from + steps * step;
        self.near = if to <= range.0 { f32::NEG_INFINITY } else { to };
        if self.near > self.far {
            self.far = self.near;
        }
    }

    /// Move the far plane by `steps` twentieths of `range` (back for positive steps); moving it
    /// to the back of the range or beyond unclips it.
    pub fn move_far(&mut self, steps: f32, range: (f32, f32)) {
        let step = (range.1 - range.0) / SLICE_STEPS;
        let from = if self.far.is_finite() {
            self.far
        } else {
            range.1
        };
        let to = from + steps * step;
        self.far = if to >= range.1 { f32::INFINITY } else { to };
        if self.far < self.near {
            self.near = self.far;
        }
    }

    /// The planes as text: `[near, far]`, `-inf`/`inf` where unclipped.
    pub fn describe(&self) -> String {
        format!("[{}, {}]", self.near, self.far)
    }
}

/// The viewer's state.
#[derive(Clone, Debug)]
pub struct ViewState {
    /// 0: the merge; i: the i-th input.
    pub layer: usize,
    /// What is drawn.
    pub view: View,
    /// Stops of exposure for colour views.
    pub exposure: f32,
    /// The depth slice.
    pub slice: Slice,
    /// Where the image lies in the window.
    pub camera: Camera,
    /// The pinned pixel (absolute coordinates).
    pub pinned: Option<(i32, i32)>,
    /// How the inspector lists values.
    pub table: TableValues,
    /// The points mode is on: the layer's samples are drawn as a point cloud.
    pub points: bool,
    /// How the points are coloured.
    pub point_colour: PointColour,
    /// Where the points mode looks from (none until the first cloud is on the GPU).
    pub orbit: Option<OrbitCamera>,
    /// The view `f` goes back to: the last cloud fitted.
    pub orbit_home: Option<OrbitCamera>,
}

impl Default for ViewState {
    fn default() -> Self {
        ViewState {
            layer: 0,
            view: View::Composite,
            exposure: 0.0,
            slice: Slice::default(),
            camera: Camera {
                origin: [0.0, 0.0],
                zoom: 1.0,
            },
            pinned: None,
            table: TableValues::Raw,
            points: false,
            point_colour: PointColour::Depth,
            orbit: None,
            orbit_home: None,
        }
    }
}

/// What a key asks of the window beyond changing the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyAction {
    /// Nothing: the key was not a viewer key.
    None,
    /// The state changed; redraw.
    Redraw,
    /// The slice changed; re-slice and redraw.
    Reslice,
    /// Print the inspector table to stdout.
    CopyTable,
    /// The id view was asked for on a layer without id channels: nothing changed, and the
    /// window says why ([`ViewState::no_ids_line`]).
    NoIds,
    /// Close the window.
    Quit,
}

/// The keys, for docs/view.md and the help text: (key, what it does).
pub const KEYS: &[(&str, &str)] = &[
    ("0", "the merge"),
    ("1..9", "input 1..9"),
    ("c", "composite (exposure, sRGB)"),
    ("r g b a", "one channel (a: alpha)"),
    ("z", "depth (front-most Z)"),
    ("h", "depth-complexity heatmap"),
    (
        "d",
        "id view (false colour per id); again: the next id channel",
    ),
    ("e / E", "exposure +/- half a stop"),
    ("n / N", "near plane back / forward"),
    ("m / M", "far plane forward / back"),
    ("x", "clear the depth slice"),
    ("f", "fit the image"),
    ("=", "1:1 pixels"),
    ("i", "inspector: raw / accumulated"),
    ("t", "print the inspector table to stdout"),
    ("p", "points mode: the samples as a 3-D point cloud"),
    (
        "z / d / c (points)",
        "colour points by depth / id / the sample's colour",
    ),
    ("f (points)", "look at the whole cloud again"),
    ("q, Esc", "quit"),
];

impl ViewState {
    /// Apply a typed key (`text` as winit gives it: "1", "N", "=") with the current `layers`
    /// and image `area`.
    pub fn on_key(&mut self, text: &str, layers: &[Layer], area: Area) -> KeyAction {
        let Some(layer) = layers.get(self.layer) else {
            return match text {
                "q" => KeyAction::Quit,
                _ => KeyAction::None,
            };
        };
        let range = layer.depth_range;
        let column = |name: &str| layer.columns.names.iter().position(|n| n == name);
        if self.points {
            if let Some(action) = self.on_points_key(text, layer) {
                return action;
            }
        }
        match text {
            "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" => {
                let i: usize = text.parse().unwrap_or(0);
                if i < layers.len() && i != self.layer {
                    self.switch_layer(i, layers);
                    KeyAction::Reslice
                } else {
                    KeyAction::None
                }
            }
            "c" => self.set_view(View::Composite),
            "r" | "g" | "b" | "a" => match column(&text.to_uppercase()) {
                Some(k) => self.set_view(View::Channel(k)),
                None => KeyAction::None,
            },
            "z" => self.set_view(View::Depth),
            "h" => self.set_view(View::Heatmap),
            "d" => match (self.view, layer.id_names.len()) {
                (_, 0) => KeyAction::NoIds,
                (View::Id(k), n) => self.set_view(View::Id((k + 1) % n)),
                _ => self.set_view(View::Id(0)),
            },
            "e" => {
                self.exposure += 0.5;
                KeyAction::Redraw
            }
            "E" => {
                self.exposure -= 0.5;
                KeyAction::Redraw
            }
            "n" => self.slice_by(|s| s.move_near(1.0, range)),
            "N" => self.slice_by(|s| s.move_near(-1.0, range)),
            "m" => self.slice_by(|s| s.move_far(-1.0, range)),
            "M" => self.slice_by(|s| s.move_far(1.0, range)),
            "x" => self.slice_by(|s| *s = Slice::default()),
            "f" => {
                self.camera = Camera::fit(frame_size(layer), area);
                KeyAction::Redraw
            }
            "=" => {
                self.camera = Camera::one_to_one(frame_size(layer), area);
                KeyAction::Redraw
            }
            "i" => {
                self.table = match self.table {
                    TableValues::Raw => TableValues::Accumulated,
                    TableValues::Accumulated => TableValues::Raw,
                };
                KeyAction::Redraw
            }
            "t" => KeyAction::CopyTable,
            "p" => {
                self.points = true;
                KeyAction::Redraw
            }
            "q" => KeyAction::Quit,
            _ => KeyAction::None,
        }
    }

    /// The keys that mean something else in the points mode (none for the others, which keep
    /// their meaning: layers, the slice, the inspector, quit). Keys of the image views that
    /// change nothing drawn here (channels, heatmap, exposure, 1:1) do nothing.
    fn on_points_key(&mut self, text: &str, layer: &Layer) -> Option<KeyAction> {
        let colour = |state: &mut Self, colour: PointColour| {
            if state.point_colour == colour {
                KeyAction::None
            } else {
                state.point_colour = colour;
                KeyAction::Redraw
            }
        };
        Some(match text {
            "p" => {
                self.points = false;
                KeyAction::Redraw
            }
            "z" => colour(self, PointColour::Depth),
            "c" => colour(self, PointColour::Sample),
            "d" if layer.id_names.is_empty() => {
                // Said on stderr and in the panel; the colouring falls back to depth.
                self.point_colour = PointColour::Depth;
                KeyAction::NoIds
            }
            "d" => colour(self, PointColour::Id),
            "f" => match self.orbit_home {
                Some(home) if self.orbit != Some(home) => {
                    self.orbit = Some(home);
                    KeyAction::Redraw
                }
                _ => KeyAction::None,
            },
            "r" | "g" | "b" | "a" | "h" | "e" | "E" | "=" => KeyAction::None,
            _ => return None,
        })
    }

    /// A cloud of the layer shown arrived, filling the box `lo`..`hi` in `basis`: the orbit
    /// camera is fitted to it, keeping the turn it had (so layers compare from one angle).
    pub fn fit_orbit(
        &mut self,
        basis: super::orbit::Basis,
        bounds: ([f64; 3], [f64; 3]),
        aspect: f64,
    ) {
        let mut fitted = OrbitCamera::fit(basis, bounds.0, bounds.1, aspect);
        self.orbit_home = Some(fitted);
        if let Some(old) = self.orbit {
            fitted.yaw = old.yaw;
            fitted.pitch = old.pitch;
        }
        self.orbit = Some(fitted);
    }

    /// Show layer `i` (a valid index). The columns and id channels differ between layers: the
    /// view is kept only where it still means the same (an id channel of the same name), else
    /// it becomes the composite.
    pub fn switch_layer(&mut self, i: usize, layers: &[Layer]) {
        let name_of = |k: usize| layers.get(self.layer).and_then(|l| l.id_names.get(k));
        if layers[i].id_names.is_empty() && self.point_colour == PointColour::Id {
            self.point_colour = PointColour::Depth;
        }
        self.view = match self.view {
            View::Channel(_) => View::Composite,
            View::Id(k) => name_of(k)
                .and_then(|name| layers[i].id_names.iter().position(|n| n == name))
                .map_or(View::Composite, View::Id),
            other => other,
        };
        self.layer = i;
    }

    fn set_view(&mut self, view: View) -> KeyAction {
        self.view = view;
        KeyAction::Redraw
    }

    fn slice_by(&mut self, change: impl FnOnce(&mut Slice)) -> KeyAction {
        let before = self.slice;
        change(&mut self.slice);
        if before == self.slice {
            KeyAction::None
        } else {
            KeyAction::Reslice
        }
    }

    /// The absolute pixel under window position `at`, if it lies in `layer`'s display window.
    pub fn pixel_at(&self, at: [f64; 2], layer: &Layer) -> Option<(i32, i32)> {
        let (x, y) = self.camera.pixel_at(at);
        let d = layer.display_window;
        let (w, h) = frame_size(layer);
        ((0..w as i64).contains(&x) && (0..h as i64).contains(&y))
            .then(|| (d.x0 + x as i32, d.y0 + y as i32))
    }

    /// One line saying what is drawn, for stderr (tests and scripts follow it).
    pub fn describe(&self, layers: &[Layer]) -> String {
        let layer = layers.get(self.layer);
        let view = self.view_name(layer);
        let pinned = self
            .pinned
            .map_or("none".to_string(), |(x, y)| format!("({x}, {y})"));
        if self.points {
            return format!(
                "layer {} ({}) points colour {} {} slice {}",
                self.layer,
                layer.map_or("-", |l| l.name.as_str()),
                self.point_colour.name(),
                self.orbit
                    .map_or("camera waiting for the cloud".to_string(), |o| o.describe()),
                self.slice.describe(),
            );
        }
        format!(
            "layer {} ({}) view {view} exposure {} slice {} origin ({}, {}) zoom {} pinned {pinned} table {}",
            self.layer,
            layer.map_or("-", |l| l.name.as_str()),
            self.exposure,
            self.slice.describe(),
            self.camera.origin[0],
            self.camera.origin[1],
            self.camera.zoom,
            self.table.name()
        )
    }

    /// The view as [`ViewState::describe`] names it (`composite`, `channel A`, `id particleid`).
    fn view_name(&self, layer: Option<&Layer>) -> String {
        match self.view {
            View::Composite => "composite".to_string(),
            View::Channel(k) => format!(
                "channel {}",
                layer
                    .and_then(|l| l.columns.names.get(k))
                    .map_or("?", String::as_str)
            ),
            View::Depth => "depth".into(),
            View::Heatmap => "heatmap".into(),
            View::Id(k) => format!(
                "id {}",
                layer
                    .and_then(|l| l.id_names.get(k))
                    .map_or("?", String::as_str)
            ),
        }
    }

    /// The stderr line for [`KeyAction::NoIds`]: which layer has no id channel, and that the
    /// view stays as it is.
    pub fn no_ids_line(&self, layers: &[Layer]) -> String {
        let layer = layers.get(self.layer);
        let stays = if self.points {
            "the points are coloured by depth".to_string()
        } else {
            format!("the view stays {}", self.view_name(layer))
        };
        format!(
            "deepmerge view: layer {} ({}) has no id channel (a uint channel, or a half or float one whose name ends in id); {stays}",
            self.layer,
            layer.map_or("-", |l| l.name.as_str()),
        )
    }
}

/// The size of the frame the camera places: the display window.
pub fn frame_size(layer: &Layer) -> (usize, usize) {
    (layer.display_window.width(), layer.display_window.height())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deep::{Bounds, Channel, DeepImage, SampleType};

    /// A layer of no samples with `A`, `Z` and the uint channels `ids`.
    fn layer(name: &str, ids: &[&str]) -> Layer {
        let window = Bounds::from_origin_size(0, 0, 4, 4);
        let mut channels = vec![
            Channel::new("A", SampleType::F32),
            Channel::new("Z", SampleType::F32),
        ];
        channels.extend(ids.iter().map(|n| Channel::new(*n, SampleType::U32)));
        super::super::load::layer_of(name, &DeepImage::empty(window, window, channels)).unwrap()
    }

    #[test]
    fn the_id_key_cycles_id_channels_and_layers_keep_the_channel_by_name() {
        let layers = [
            layer("merged", &["id", "particleid"]),
            layer("a.exr", &["particleid"]),
            layer("b.exr", &[]),
        ];
        let area = Area {
            width: 100.0,
            height: 100.0,
        };
        let mut state = ViewState::default();
        assert_eq!(state.on_key("d", &layers, area), KeyAction::Redraw);
        assert_eq!(state.view, View::Id(0));
        state.on_key("d", &layers, area);
        assert_eq!(state.view, View::Id(1));
        assert!(state.describe(&layers).contains("view id particleid "));
        state.on_key("d", &layers, area);
        assert_eq!(state.view, View::Id(0));
        state.on_key("d", &layers, area);
        // particleid is a.exr's first id channel.
        state.on_key("1", &layers, area);
        assert_eq!((state.layer, state.view), (1, View::Id(0)));
        // b.exr has none: the composite, and `d` there changes nothing.
        state.on_key("2", &layers, area);
        assert_eq!(state.view, View::Composite);
        assert_eq!(state.on_key("d", &layers, area), KeyAction::NoIds);
        assert_eq!(state.view, View::Composite);
        assert_eq!(
            state.no_ids_line(&layers),
            "deepmerge view: layer 2 (b.exr) has no id channel (a uint channel, or a half or float one whose name ends in id); the view stays composite"
        );
        // From `id` on the merge to a layer without `id`: the composite.
        state.switch_layer(0, &layers);
        state.view = View::Id(0);
        state.switch_layer(1, &layers);
        assert_eq!(state.view, View::Composite);
    }

    #[test]
    fn the_points_mode_keys_colour_the_points_and_fall_back_to_depth_without_ids() {
        let layers = [layer("merged", &["id"]), layer("b.exr", &[])];
        let area = Area {
            width: 100.0,
            height: 100.0,
        };
        let mut state = ViewState::default();
        assert_eq!(state.on_key("p", &layers, area), KeyAction::Redraw);
        assert!(state.points);
        assert!(state
            .describe(&layers)
            .starts_with("layer 0 (merged) points colour depth camera waiting"));
        state.fit_orbit(
            super::super::orbit::Basis::PIXELS,
            ([0.0; 3], [4.0, 4.0, 1.0]),
            1.0,
        );
        assert_eq!(state.on_key("d", &layers, area), KeyAction::Redraw);
        assert_eq!(state.point_colour, PointColour::Id);
        assert_eq!(state.on_key("c", &layers, area), KeyAction::Redraw);
        assert_eq!(state.point_colour, PointColour::Sample);
        // Keys of the image views that change nothing here, and the view is kept for later.
        assert_eq!(state.on_key("h", &layers, area), KeyAction::None);
        assert_eq!(state.view, View::Composite);
        // f goes home after an orbit.
        state.orbit.as_mut().unwrap().orbit([10.0, 0.0]);
        assert_eq!(state.on_key("f", &layers, area), KeyAction::Redraw);
        assert_eq!(state.orbit, state.orbit_home);
        // A layer without ids: id colouring falls back to depth, and `d` says so.
        state.on_key("d", &layers, area);
        state.on_key("1", &layers, area);
        assert_eq!(state.point_colour, PointColour::Depth);
        assert_eq!(state.on_key("d", &layers, area), KeyAction::NoIds);
        assert!(state
            .no_ids_line(&layers)
            .ends_with("the points are coloured by depth"));
        assert!(state
            .describe(&layers)
            .contains(" points colour depth yaw 0 pitch 0 "));
        assert_eq!(state.on_key("p", &layers, area), KeyAction::Redraw);
        assert!(state.describe(&layers).contains(" view composite "));
    }

    #[test]
    fn planes_move_in_steps_and_unclip_at_the_ends() {
        let range = (0.0, 20.0);
        let mut s = Slice::default();
        s.move_near(1.0, range);
        assert_eq!(s.near, 1.0);
        s.move_near(-1.0, range);
        assert_eq!(s.near, f32::NEG_INFINITY);
        s.move_far(-2.0, range);
        assert_eq!(s.far, 18.0);
        s.move_far(5.0, range);
        assert!(s.is_whole());
        // The planes never cross.
        s.move_far(-15.0, range);
        s.move_near(10.0, range);
        assert_eq!((s.near, s.far), (10.0, 10.0));
    }
}
