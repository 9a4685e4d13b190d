//! The side panel (egui): status and progress, the view and its controls, the points mode
//! (its switch, colouring, what the cloud holds and how it is drawn), the depth-slice sliders
//! and a bar showing the planes, the heatmap's legend, and the pixel inspector (the shared
//! [`crate::inspect`] table, a raw/accumulated toggle and a plot of accumulated alpha against
//! depth).

use egui::{Color32, RichText, Stroke};

use super::cloud::{CloudInfo, PointColour};
use super::load::Layer;
use super::state::{Slice, View, ViewState, KEYS};
use crate::heatmap::BIN_COLOURS;
use crate::info::COMPLEXITY_BINS;
use crate::inspect::{PixelTable, TableValues};

/// Width of the side panel in points.
pub const PANEL_WIDTH: f32 = 560.0;

/// What the panel shows besides the state.
pub struct PanelInputs<'a> {
    /// The layers, once loaded.
    pub layers: &'a [Layer],
    /// Loading progress (0..=1) and what is being done, while loading.
    pub progress: Option<(f32, &'a str)>,
    /// The error that stopped loading.
    pub error: Option<&'a str>,
    /// The inspector's text for the pinned pixel.
    pub table_text: Option<&'a str>,
    /// Accumulated tables of the pinned pixel (each input, then the merge), for the plot.
    pub curves: &'a [PixelTable],
    /// How long the last slice change took to show, in ms.
    pub last_slice_ms: Option<f64>,
    /// The points mode's cloud and how it went.
    pub points: PointsPanel<'a>,
}

/// What the panel says of the points mode.
pub struct PointsPanel<'a> {
    /// The shown layer's cloud, once on the GPU.
    pub info: Option<&'a CloudInfo>,
    /// A cloud is being built.
    pub building: bool,
    /// Why the last cloud could not be made.
    pub error: Option<&'a str>,
    /// What the last frame of the points mode drew.
    pub last_drawn: Option<super::cloud::PointsDrawn>,
    /// The last frame's time, ms.
    pub last_frame_ms: Option<f64>,
}

/// What the panel changed.
#[derive(Default)]
pub struct PanelOutcome {
    /// The slice changed.
    pub reslice: bool,
    /// Something else shown changed.
    pub redraw: bool,
    /// The copy button was pressed.
    pub copy: bool,
}

/// Colours of the plot's curves: inputs in order, the merge last in white.
const CURVE_COLOURS: [Color32; 6] = [
    Color32::from_rgb(255, 140, 60),
    Color32::from_rgb(80, 200, 255),
    Color32::from_rgb(140, 255, 120),
    Color32::from_rgb(255, 110, 200),
    Color32::from_rgb(255, 230, 90),
    Color32::from_rgb(180, 150, 255),
];

/// Draw the panel; returns what it changed.
pub fn panel(ctx: &egui::Context, state: &mut ViewState, inputs: &PanelInputs) -> PanelOutcome {
    let mut out = PanelOutcome::default();
    egui::SidePanel::right("deepmerge-panel")
        .exact_width(PANEL_WIDTH)
        .resizable(false)
        .show(ctx, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| {
                status(ui, inputs);
                if let Some(layer) = inputs.layers.get(state.layer) {
                    controls(ui, state, inputs.layers, layer, &mut out);
                    points_controls(ui, state, layer, &inputs.points, &mut out);
                    if !state.points {
                        inspector(ui, state, inputs, layer, &mut out);
                    }
                }
                ui.separator();
                ui.collapsing("Keys and mouse", |ui| {
                    for (key, what) in KEYS {
                        ui.label(format!("{key}: {what}"));
                    }
                    ui.label("drag: pan; wheel: zoom about the cursor; click: pin a pixel");
                    ui.label("points mode: drag: orbit; wheel: nearer / farther");
                });
            });
        });
    if let Some(error) = inputs.error {
        egui::CentralPanel::default()
            .frame(egui::Frame::NONE)
            .show(ctx, |ui| {
                ui.centered_and_justified(|ui| {
                    ui.label(
                        RichText::new(error)
                            .color(Color32::from_rgb(255, 90, 90))
                            .size(16.0),
                    );
                });
            });
    }
    out
}

fn status(ui: &mut egui::Ui, inputs: &PanelInputs) {
    ui.heading("deepmerge view");
    if let Some((fraction, what)) = inputs.progress {
        ui.add(egui::ProgressBar::new(fraction).text(what).animate(true));
    }
    if let Some(error) = inputs.error {
        ui.label(RichText::new(error).color(Color32::from_rgb(255, 90, 90)));
    }
}

fn controls(
    ui: &mut egui::Ui,
    state: &mut ViewState,
    layers: &[Layer],
    layer: &Layer,
    out: &mut PanelOutcome,
) {
    ui.horizontal_wrapped(|ui| {
        for (i, l) in layers.iter().enumerate() {
            let label = if i == 0 {
                "0 merged".to_string()
            } else {
                format!("{i} {}", l.name)
            };
            if ui.selectable_label(state.layer == i, label).clicked() && state.layer != i {
                state.switch_layer(i, layers);
                out.reslice = true;
            }
        }
    });
    ui.label(format!(
        "{}: {}x{} data window, {} samples",
        layer.name,
        layer.data_window.width(),
        layer.data_window.height(),
        layer.samples()
    ));
    ui.horizontal_wrapped(|ui| {
        let mut view = state.view;
        ui.selectable_value(&mut view, View::Composite, "composite");
        for (k, name) in layer.columns.names.iter().enumerate() {
            ui.selectable_value(&mut view, View::Channel(k), name.as_str());
        }
        ui.selectable_value(&mut view, View::Depth, "depth");
        ui.selectable_value(&mut view, View::Heatmap, "heatmap");
        for (k, name) in layer.id_names.iter().enumerate() {
            ui.selectable_value(&mut view, View::Id(k), format!("id {name}"));
        }
        if view != state.view {
            state.view = view;
            out.redraw = true;
        }
    });
    if ui
        .add(egui::Slider::new(&mut state.exposure, -10.0..=10.0).text("exposure (stops)"))
        .changed()
    {
        out.redraw = true;
    }
    slice_controls(ui, &mut state.slice, layer.depth_range, out);
    if state.view == View::Heatmap {
        legend(ui);
    }
    if state.view == View::Depth {
        ui.label(format!(
            "depth: white at {}, dim at {}",
            layer.depth_range.0, layer.depth_range.1
        ));
    }
}

fn points_controls(
    ui: &mut egui::Ui,
    state: &mut ViewState,
    layer: &Layer,
    points: &PointsPanel,
    out: &mut PanelOutcome,
) {
    ui.separator();
    if ui
        .checkbox(&mut state.points, "points mode (p): the samples in 3-D")
        .changed()
    {
        out.redraw = true;
    }
    if !state.points {
        return;
    }
    ui.horizontal(|ui| {
        ui.label("colour by");
        let mut colour = state.point_colour;
        ui.selectable_value(&mut colour, PointColour::Depth, "depth (z)");
        let has_ids = !layer.id_names.is_empty();
        ui.add_enabled_ui(has_ids, |ui| {
            ui.selectable_value(&mut colour, PointColour::Id, "id (d)");
        });
        ui.selectable_value(&mut colour, PointColour::Sample, "sample colour (c)");
        if colour != state.point_colour {
            state.point_colour = colour;
            out.redraw = true;
        }
        if ui.button("reset camera (f)").clicked() && state.orbit != state.orbit_home {
            state.orbit = state.orbit_home;
            out.redraw = true;
        }
    });
    if layer.id_names.is_empty() {
        ui.label(format!(
            "{} has no id channel: the points are coloured by depth, not by id",
            layer.name
        ));
    }
    if let Some(error) = points.error {
        ui.label(
            RichText::new(format!("no points: {error}")).color(Color32::from_rgb(255, 90, 90)),
        );
    }
    let Some(info) = points.info else {
        if points.building {
            // A still line, not an animated bar: an animation redraws the window all the while,
            // which on a software rasteriser takes the cores the worker needs.
            ui.label("building the points on a worker thread...");
        }
        return;
    };
    ui.label(format!(
        "{} points of {} samples, placed by {}",
        info.points, info.samples, info.placement
    ));
    if info.stride > 1 {
        ui.label(
            RichText::new(format!(
                "every {}th sample only: all of them would take more than the GPU memory budget leaves (--gpu-memory)",
                info.stride
            ))
            .color(Color32::from_rgb(255, 200, 90)),
        );
    }
    if let Some(id) = &info.id_channel {
        if state.point_colour == PointColour::Id {
            ui.label(format!("id colours from channel {id}"));
        }
    }
    if state.point_colour == PointColour::Depth {
        depth_ramp_legend(ui, info.depth_range);
    }
    if let (Some(drawn), Some(ms)) = (points.last_drawn, points.last_frame_ms) {
        let shown = (drawn.held * drawn.shown)
            .div_ceil(drawn.passes.max(1))
            .min(drawn.held);
        ui.label(format!(
            "showing {shown} of {} points ({} of {} passes; while the camera moves, 1); last frame {} points in {ms:.1} ms",
            drawn.held, drawn.shown, drawn.passes, drawn.drawn
        ));
    }
}

/// The depth ramp from its near to its far depth.
fn depth_ramp_legend(ui: &mut egui::Ui, range: (f32, f32)) {
    ui.horizontal(|ui| {
        ui.label(format!("near {}", range.0));
        let (rect, _) = ui.allocate_exact_size(egui::vec2(160.0, 12.0), egui::Sense::hover());
        let steps = 32;
        for k in 0..steps {
            let z = range.0 + (range.1 - range.0) * (k as f32 + 0.5) / steps as f32;
            let [r, g, b] = super::display::depth_ramp(z, range).map(|v| (v * 255.0) as u8);
            let x0 = rect.left() + rect.width() * k as f32 / steps as f32;
            let x1 = rect.left() + rect.width() * (k + 1) as f32 / steps as f32;
            ui.painter().rect_filled(
                egui::Rect::from_x_y_ranges(x0..=x1, rect.y_range()),
                0.0,
                Color32::from_rgb(r, g, b),
            );
        }
        ui.label(format!("far {}", range.1));
    });
}

fn slice_controls(ui: &mut egui::Ui, slice: &mut Slice, range: (f32, f32), out: &mut PanelOutcome) {
    ui.separator();
    ui.label(format!("depth slice {}", slice.describe()));
    let (lo, hi) = range;
    let mut near = if slice.near.is_finite() {
        slice.near
    } else {
        lo
    };
    let mut far = if slice.far.is_finite() { slice.far } else { hi };
    let near_changed = ui
        .add(egui::Slider::new(&mut near, lo..=hi).text("near"))
        .changed();
    let far_changed = ui
        .add(egui::Slider::new(&mut far, lo..=hi).text("far"))
        .changed();
    if near_changed {
        slice.near = if near <= lo { f32::NEG_INFINITY } else { near };
        slice.far = slice.far.max(slice.near);
        out.reslice = true;
    }
    if far_changed {
        slice.far = if far >= hi { f32::INFINITY } else { far };
        slice.near = slice.near.min(slice.far);
        out.reslice = true;
    }
    if ui.button("clear slice (x)").clicked() && !slice.is_whole() {
        *slice = Slice::default();
        out.reslice = true;
    }
    // The planes on a bar spanning the layer's depths.
    let (rect, _) =
        ui.allocate_exact_size(egui::vec2(ui.available_width(), 14.0), egui::Sense::hover());
    let painter = ui.painter();
    painter.rect_filled(rect, 2.0, Color32::from_gray(50));
    let x_of = |z: f32| {
        let t = if hi > lo { (z - lo) / (hi - lo) } else { 0.0 };
        rect.left() + t.clamp(0.0, 1.0) * rect.width()
    };
    let kept = egui::Rect::from_x_y_ranges(
        x_of(slice.near.max(lo))..=x_of(slice.far.min(hi)),
        rect.y_range(),
    );
    painter.rect_filled(kept, 2.0, Color32::from_rgb(70, 120, 200));
}

fn legend(ui: &mut egui::Ui) {
    ui.label("samples per pixel:");
    ui.horizontal_wrapped(|ui| {
        for ((name, _), colour) in COMPLEXITY_BINS.iter().zip(BIN_COLOURS) {
            let (rect, _) = ui.allocate_exact_size(egui::vec2(14.0, 14.0), egui::Sense::hover());
            ui.painter().rect_filled(
                rect,
                2.0,
                Color32::from_rgb(colour[0], colour[1], colour[2]),
            );
            ui.label(*name);
        }
    });
    ui.label("(darker: lower in the bin; black: empty)");
}

fn inspector(
    ui: &mut egui::Ui,
    state: &mut ViewState,
    inputs: &PanelInputs,
    layer: &Layer,
    out: &mut PanelOutcome,
) {
    ui.separator();
    let Some((x, y)) = state.pinned else {
        ui.label("click a pixel to inspect its samples");
        return;
    };
    ui.horizontal(|ui| {
        ui.label(RichText::new(format!("pixel ({x}, {y})")).strong());
        let mut table = state.table;
        ui.selectable_value(&mut table, TableValues::Raw, "raw");
        ui.selectable_value(&mut table, TableValues::Accumulated, "accumulated");
        if table != state.table {
            state.table = table;
            out.redraw = true;
        }
        if ui.button("copy to stdout (t)").clicked() {
            out.copy = true;
        }
    });
    alpha_plot(ui, inputs.curves, state.slice, layer.depth_range);
    if let Some(ms) = inputs.last_slice_ms {
        ui.label(format!("last slice change shown in {ms:.1} ms"));
    }
    if let Some(text) = inputs.table_text {
        egui::ScrollArea::both()
            .id_salt("table")
            .max_height(360.0)
            .show(ui, |ui| {
                ui.add(egui::Label::new(RichText::new(text).monospace().size(9.5)).extend());
            });
    }
}

/// Accumulated alpha against depth for each table, with the slice's planes as vertical lines.
fn alpha_plot(ui: &mut egui::Ui, curves: &[PixelTable], slice: Slice, layer_range: (f32, f32)) {
    let (rect, _) = ui.allocate_exact_size(
        egui::vec2(ui.available_width(), 110.0),
        egui::Sense::hover(),
    );
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 2.0, Color32::from_gray(24));
    let depths = curves
        .iter()
        .flat_map(|t| t.rows.iter().flat_map(|r| [r.z, r.zback]))
        .filter(|z| z.is_finite());
    let (mut lo, mut hi) = depths.fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), z| {
        (a.min(z), b.max(z))
    });
    if lo > hi {
        (lo, hi) = layer_range;
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    let pad = 0.05 * (hi - lo);
    let (lo, hi) = (lo - pad, hi + pad);
    let x_of = |z: f32| rect.left() + ((z - lo) / (hi - lo)).clamp(0.0, 1.0) * rect.width();
    let y_of = |a: f32| rect.bottom() - 4.0 - a.clamp(0.0, 1.0) * (rect.height() - 8.0);
    for plane in [slice.near, slice.far]
        .into_iter()
        .filter(|z| z.is_finite())
    {
        painter.vline(
            x_of(plane),
            rect.y_range(),
            Stroke::new(1.0, Color32::from_rgb(70, 120, 200)),
        );
    }
    for (i, table) in curves.iter().enumerate() {
        let colour = if i + 1 == curves.len() && curves.len() > 1 {
            Color32::WHITE
        } else {
            CURVE_COLOURS[i % CURVE_COLOURS.len()]
        };
        let mut points = vec![egui::pos2(rect.left(), y_of(0.0))];
        let mut alpha = 0.0;
        for (z, a) in table.alpha_curve() {
            let x = x_of(z);
            points.push(egui::pos2(x, y_of(alpha)));
            points.push(egui::pos2(x, y_of(a)));
            alpha = a;
        }
        points.push(egui::pos2(rect.right(), y_of(alpha)));
        painter.add(egui::Shape::line(points, Stroke::new(1.5, colour)));
    }
    painter.text(
        rect.left_top() + egui::vec2(4.0, 2.0),
        egui::Align2::LEFT_TOP,
        format!("accumulated A vs depth ({lo:.3} .. {hi:.3})"),
        egui::FontId::proportional(10.0),
        Color32::GRAY,
    );
}
