//! The window: winit's event loop, a glutin EGL context on the window (the engine's
//! [`GlContext`] on top of it, so the slice pass is the engine's program loader and "over"),
//! egui for the panel, and the glue between input events, [`ViewState`] and the GPU passes.
//!
//! What the window does is also said on stderr, one line per change (`deepmerge view: drawn
//! ...`, with the time from the input event to the finished frame), so scripts and the window
//! test can follow it; the inspector's table goes to stdout on request. With `--frame-stats`
//! every frame's time is said too (`deepmerge view: frame ...`), for measuring.
//!
//! The points mode asks a worker thread for the shown layer's cloud ([`super::cloud`]) when it
//! is switched on or the layer changes, and draws it instead of the image once it is on the
//! GPU; while the camera moves the frames draw fewer points ([`PointLod`]), and a frame of all
//! of them follows when it rests ([`REFINE_AFTER`]).

use std::io::Write as _;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use glow::HasContext;
use glutin::config::{Config, ConfigTemplateBuilder, GlConfig};
use glutin::context::{
    ContextApi, ContextAttributesBuilder, GlProfile, NotCurrentGlContext, PossiblyCurrentContext,
    Version,
};
use glutin::display::{GetGlDisplay, GlDisplay};
use glutin::surface::{GlSurface, Surface, SurfaceAttributesBuilder, WindowSurface};
use glutin_winit::{DisplayBuilder, GlWindow};
use raw_window_handle::HasWindowHandle;
use winit::application::ApplicationHandler;
use winit::dpi::{PhysicalPosition, PhysicalSize};
use winit::event::{ElementState, MouseButton, MouseScrollDelta, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoopProxy};
use winit::keyboard::{Key, NamedKey};
use winit::window::{Window, WindowId};

use super::camera::{Area, Camera};
use super::cloud::{
    build_cloud, CanvasKey, CloudRequest, GpuPoints, PointCanvas, PointCloud, PointColour,
    PointDrawParams, PointLod, PointsDrawn, REFINE_FRAME_MS,
};
use super::gpu::{plan_layer, DrawParams, GpuLayer};
use super::load::{Layer, LoadEvent, Loaded};
use super::state::{frame_size, KeyAction, View, ViewState};
use super::ui::{self, PanelInputs, PANEL_WIDTH};
use crate::error::{Error, Result};
use crate::exr::ReadOptions;
use crate::gpu::GlContext;
use crate::inspect::{pixel_report, PixelTable, TableValues};
use crate::size::human_bytes;

/// CPU time this process has used (all threads, user and system), in ms: with the wall time it
/// says how much of a frame's latency was work and how much was waiting for a busy machine.
fn process_cpu_ms() -> f64 {
    crate::run_stats::CpuUse::now().map_or(0.0, |u| u.seconds() * 1e3)
}

/// A press and release closer than this (window pixels) is a click, not a drag.
const CLICK_SLOP: f64 = 3.0;

/// How long the points mode's camera rests before a frame draws every point.
pub const REFINE_AFTER: Duration = Duration::from_millis(250);

/// What the window needs to start work of its own (point clouds) off its thread.
pub struct Workers {
    /// Wakes the window with the result.
    pub proxy: EventLoopProxy<LoadEvent>,
    /// The inputs' files, in order.
    pub files: Vec<PathBuf>,
    /// How they were read.
    pub read: ReadOptions,
}

/// What the layers may take on the GPU.
#[derive(Clone, Copy, Debug, Default)]
pub struct GpuLimits {
    /// Bytes all layers' buffers may take together (`None`: [`crate::gpu::memory::default_budget`]).
    pub budget: Option<u64>,
    /// Bytes one storage buffer may hold, below the driver's limit (tests).
    pub storage_block: Option<u64>,
}

/// Everything that exists once the window is open. Field order is drop order: the engine's
/// context (which deletes programs) and egui's painter go before the GL context they use.
struct Open {
    engine: GlContext,
    painter: egui_glow::Painter,
    egui_state: egui_winit::State,
    egui_ctx: egui::Context,
    vao: glow::VertexArray,
    gpu_layers: Vec<GpuLayer>,
    /// The point cloud of one layer, while the points mode has asked for one.
    points: Option<GpuPoints>,
    /// What the points mode draws into.
    canvas: Option<PointCanvas>,
    /// Bytes all layers may take on the GPU.
    gpu_budget: u64,
    surface: Surface<WindowSurface>,
    context: PossiblyCurrentContext,
    window: Window,
}

/// The application: the state, what loading delivered, and the window once open.
pub struct App {
    title_files: String,
    size: (u32, u32),
    limits: GpuLimits,
    state: ViewState,
    loaded: Option<Loaded>,
    /// Layers delivered before loading finished (uploaded, if the window is open).
    arrived: Vec<Layer>,
    progress: Option<(f32, String)>,
    /// The error that stopped loading (or the window), shown and already printed.
    pub error: Option<String>,
    open: Option<Open>,
    /// Inspector text and the accumulated tables for the plot, for the pinned pixel.
    table_text: Option<String>,
    curves: Vec<PixelTable>,
    /// Set by an input event that changes what is drawn; the frame that shows it reports.
    changed_at: Option<Instant>,
    slice_changed_at: Option<Instant>,
    /// [`process_cpu_ms`] when the slice changed.
    slice_changed_cpu: f64,
    last_slice_ms: Option<f64>,
    /// How long the last slice pass itself took on the GPU, in ms.
    slice_pass_ms: Option<f64>,
    need_slice: bool,
    last_reported: String,
    cursor: [f64; 2],
    press: Option<[f64; 2]>,
    dragging: bool,
    /// A fatal error of the window itself (no display, no GL).
    pub fatal: Option<Error>,
    workers: Workers,
    /// Print every frame's time (`--frame-stats`).
    frame_stats: bool,
    /// The layer whose cloud a worker is building.
    cloud_pending: Option<usize>,
    /// Why the last cloud could not be built or uploaded.
    cloud_error: Option<String>,
    /// The points mode's level of detail while the camera moves.
    lod: PointLod,
    /// When the points mode's camera last moved.
    moved_at: Option<Instant>,
    /// The last frame drew fewer points than the cloud holds: one with all of them is due.
    refine_pending: bool,
    /// What the last frame of the points mode drew.
    last_points: Option<PointsDrawn>,
    /// The last frame's time in ms.
    last_frame_ms: Option<f64>,
}

impl App {
    /// A viewer for the files named in `title_files`, with a window of `size` pixels and the
    /// layers within `limits`.
    pub fn new(
        title_files: String,
        size: (u32, u32),
        limits: GpuLimits,
        workers: Workers,
        frame_stats: bool,
    ) -> App {
        App {
            title_files,
            size,
            limits,
            state: ViewState::default(),
            loaded: None,
            arrived: Vec::new(),
            progress: Some((0.0, "starting".into())),
            error: None,
            open: None,
            table_text: None,
            curves: Vec::new(),
            changed_at: None,
            slice_changed_at: None,
            slice_changed_cpu: 0.0,
            last_slice_ms: None,
            slice_pass_ms: None,
            need_slice: false,
            last_reported: String::new(),
            cursor: [0.0, 0.0],
            press: None,
            dragging: false,
            fatal: None,
            workers,
            frame_stats,
            cloud_pending: None,
            cloud_error: None,
            lod: PointLod::default(),
            moved_at: None,
            refine_pending: false,
            last_points: None,
            last_frame_ms: None,
        }
    }

    fn title(&self) -> String {
        let what = match (&self.loaded, &self.error) {
            (_, Some(_)) => "error".to_string(),
            (None, None) => "loading".to_string(),
            (Some(l), None) => l
                .layers
                .get(self.state.layer)
                .map_or(String::new(), |l| l.name.clone()),
        };
        format!("deepmerge view: {} [{what}]", self.title_files)
    }

    fn layers(&self) -> &[super::load::Layer] {
        self.loaded.as_ref().map_or(&[], |l| &l.layers)
    }

    /// The image area in window pixels: the window less the panel.
    fn area(&self) -> Area {
        let (w, h, scale) = match &self.open {
            Some(o) => {
                let s = o.window.inner_size();
                (s.width as f64, s.height as f64, o.window.scale_factor())
            }
            None => (self.size.0 as f64, self.size.1 as f64, 1.0),
        };
        Area {
            width: (w - PANEL_WIDTH as f64 * scale).max(1.0),
            height: h.max(1.0),
        }
    }

    fn open_window(&mut self, event_loop: &ActiveEventLoop) -> Result<Open> {
        let attributes = Window::default_attributes()
            .with_title(self.title())
            .with_inner_size(PhysicalSize::new(self.size.0, self.size.1));
        let template = ConfigTemplateBuilder::new().with_alpha_size(0);
        let (window, config) = DisplayBuilder::new()
            .with_window_attributes(Some(attributes))
            .build(event_loop, template, pick_config)
            .map_err(|e| Error::Gl(format!("cannot open a window: {e}")))?;
        let window = window.ok_or_else(|| Error::Gl("cannot open a window".into()))?;
        let handle = window
            .window_handle()
            .map_err(|e| Error::Gl(format!("no window handle: {e}")))?
            .as_raw();
        let display = config.display();
        let attributes = ContextAttributesBuilder::new()
            .with_profile(GlProfile::Core)
            .with_context_api(ContextApi::OpenGl(Some(Version::new(4, 3))))
            .build(Some(handle));
        // SAFETY: the config comes from this display and the handle from a live window.
        let not_current = unsafe { display.create_context(&config, &attributes) }
            .map_err(|e| Error::Gl(format!("no OpenGL 4.3 core context for the window: {e}")))?;
        let surface_attributes = window
            .build_surface_attributes(SurfaceAttributesBuilder::default())
            .map_err(|e| Error::Gl(format!("no window surface: {e}")))?;
        // SAFETY: as above.
        let surface = unsafe { display.create_window_surface(&config, &surface_attributes) }
            .map_err(|e| Error::Gl(format!("no window surface: {e}")))?;
        let context = not_current
            .make_current(&surface)
            .map_err(|e| Error::Gl(format!("cannot make the window's context current: {e}")))?;
        // Drawing follows input; waiting for vblank would only add latency (and Xvfb has none).
        let _ = surface.set_swap_interval(&context, glutin::surface::SwapInterval::DontWait);
        let loader = |name: &std::ffi::CStr| display.get_proc_address(name);
        // SAFETY: the context is current on this thread and outlives both function tables
        // (`Open`'s field order drops them first).
        let (engine, egui_gl) = unsafe {
            let probe = glow::Context::from_loader_function_cstr(loader);
            let renderer = probe.get_parameter_string(glow::RENDERER);
            let software = renderer.contains("llvmpipe") || renderer.contains("softpipe");
            (
                GlContext::from_current(loader, software)?,
                Arc::new(glow::Context::from_loader_function_cstr(loader)),
            )
        };
        let painter = egui_glow::Painter::new(egui_gl, "", None, false)
            .map_err(|e| Error::Gl(format!("egui's painter: {e}")))?;
        let egui_ctx = egui::Context::default();
        egui_ctx.set_visuals(egui::Visuals::dark());
        let egui_state = egui_winit::State::new(
            egui_ctx.clone(),
            egui::ViewportId::ROOT,
            &window,
            Some(window.scale_factor() as f32),
            None,
            Some(painter.max_texture_side()),
        );
        // SAFETY: object creation on the current context.
        let vao = unsafe { engine.gl.create_vertex_array() }
            .map_err(|e| Error::Gl(format!("cannot create a vertex array: {e}")))?;
        engine.limit_storage_block(self.limits.storage_block);
        let gpu_budget = self
            .limits
            .budget
            .unwrap_or_else(|| crate::gpu::memory::default_budget(&engine));
        eprintln!(
            "deepmerge view: window open on {} (GPU memory budget {})",
            engine.info().renderer,
            human_bytes(gpu_budget)
        );
        Ok(Open {
            engine,
            painter,
            egui_state,
            egui_ctx,
            vao,
            gpu_layers: Vec::new(),
            points: None,
            canvas: None,
            gpu_budget,
            surface,
            context,
            window,
        })
    }

    /// The next layer arrived: upload it (when the window is open and nothing failed), within
    /// the budget, and let its host arrays go.
    fn on_layer(&mut self, mut layer: Layer) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.upload_pending(Some(&mut layer)) {
            self.fail(e);
        }
        self.arrived.push(layer);
    }

    /// Upload the layers that arrived before the window was open, then `next`.
    fn upload_pending(&mut self, next: Option<&mut Layer>) -> Result<()> {
        let Some(open) = &mut self.open else {
            return Ok(());
        };
        let waiting = self.arrived.iter_mut().skip(open.gpu_layers.len());
        for layer in waiting.chain(next) {
            let plan = plan_layer(&open.engine, layer)?;
            let held: u64 = open.gpu_layers.iter().map(GpuLayer::bytes).sum();
            if held + plan.bytes > open.gpu_budget {
                return Err(Error::GlMemory(format!(
                    "the {} layer needs {} of GPU memory in {} band(s) beside the {} the layers before it hold, more than the GPU memory budget of {}; raise --gpu-memory, or view fewer inputs",
                    layer.name,
                    human_bytes(plan.bytes),
                    plan.bands.len(),
                    human_bytes(held),
                    human_bytes(open.gpu_budget)
                )));
            }
            let gpu = GpuLayer::upload(&open.engine, layer, &plan)?;
            eprintln!(
                "deepmerge view: layer {} ({}) on the GPU: {} in {} band(s)",
                open.gpu_layers.len(),
                layer.name,
                human_bytes(gpu.bytes()),
                gpu.bands()
            );
            open.gpu_layers.push(gpu);
        }
        Ok(())
    }

    /// Loading finished (or failed): take the layers and fit the image.
    fn on_loaded(&mut self, result: Result<Loaded>) {
        self.progress = None;
        if self.error.is_some() {
            // A layer failed to upload: that is the error shown.
            return self.refresh_title();
        }
        let result = result.and_then(|mut loaded| {
            self.upload_pending(None)?;
            loaded.layers = std::mem::take(&mut self.arrived);
            if loaded.layers.is_empty() {
                return Err(Error::internal("loading gave no layers"));
            }
            Ok(loaded)
        });
        match result {
            Ok(loaded) => {
                let merged = &loaded.layers[0];
                eprintln!(
                    "deepmerge view: loaded {} input(s): display window {}x{}, {} samples merged",
                    loaded.inputs.len(),
                    merged.display_window.width(),
                    merged.display_window.height(),
                    merged.samples()
                );
                self.state.camera = Camera::fit(frame_size(merged), self.area());
                self.loaded = Some(loaded);
                self.need_slice = true;
                self.changed_at = Some(Instant::now());
                self.request_cloud();
            }
            Err(e) => self.fail(e),
        }
        self.refresh_title();
    }

    fn refresh_title(&self) {
        if let Some(open) = &self.open {
            open.window.set_title(&self.title());
            open.window.request_redraw();
        }
    }

    /// Show `e` in the window and print it once on stderr, as the CLI prints errors.
    fn fail(&mut self, e: Error) {
        eprintln!("deepmerge: error: {e}");
        self.error = Some(e.to_string());
        self.progress = None;
        self.refresh_title();
    }

    /// In the points mode, start building the shown layer's cloud on a worker unless it is
    /// on the GPU or being built. The cloud held before is let go first: its memory is the
    /// new one's (the budget less what the layers hold).
    fn request_cloud(&mut self) {
        let (Some(open), Some(loaded)) = (&mut self.open, &self.loaded) else {
            return;
        };
        let layer = self.state.layer;
        let held_here = open.points.as_ref().is_some_and(|p| p.info.layer == layer);
        if !self.state.points
            || self.error.is_some()
            || held_here
            || self.cloud_pending == Some(layer)
        {
            return;
        }
        if let Some(old) = open.points.take() {
            old.delete(&open.engine);
        }
        let held: u64 = open.gpu_layers.iter().map(GpuLayer::bytes).sum();
        let shown = &loaded.layers[layer];
        let which = if layer == 0 {
            (0..loaded.inputs.len()).collect()
        } else {
            vec![layer - 1]
        };
        let id_channel = match self.state.view {
            View::Id(k) => shown.id_names.get(k),
            _ => shown.id_names.first(),
        };
        let request = CloudRequest {
            layer,
            files: self.workers.files.clone(),
            inputs: loaded.inputs.clone(),
            which,
            read: self.workers.read.clone(),
            id_channel: id_channel.cloned(),
            budget: open.gpu_budget.saturating_sub(held),
        };
        eprintln!(
            "deepmerge view: building the points of layer {layer} ({}) within {} of GPU memory",
            shown.name,
            human_bytes(request.budget)
        );
        let proxy = self.workers.proxy.clone();
        let spawned = std::thread::Builder::new()
            .name("deepmerge-view-points".into())
            .spawn(move || {
                let result = build_cloud(&request);
                // The window may be gone already; then nobody needs the points.
                let _ = proxy.send_event(LoadEvent::Cloud(request.layer, Box::new(result)));
            });
        match spawned {
            Ok(_) => {
                self.cloud_pending = Some(layer);
                self.cloud_error = None;
            }
            Err(e) => self.cloud_failed(Error::internal(format!(
                "cannot start the points thread: {e}"
            ))),
        }
    }

    /// The points could not be made or held: said in the panel and on stderr; the image views
    /// go on.
    fn cloud_failed(&mut self, e: Error) {
        eprintln!("deepmerge view: no points: {e}");
        self.cloud_error = Some(e.to_string());
        self.mark_changed(false);
    }

    /// A worker finished the cloud of `layer`: upload it if it is the one asked for last.
    fn on_cloud(&mut self, layer: usize, result: Result<PointCloud>) {
        if Some(layer) != self.cloud_pending {
            // A layer left before its cloud came: the cloud asked for since is on its way.
            return;
        }
        self.cloud_pending = None;
        let cloud = match result {
            Ok(cloud) => cloud,
            Err(e) => return self.cloud_failed(e),
        };
        let area = self.area();
        let Some(open) = &mut self.open else {
            return;
        };
        match GpuPoints::upload(&open.engine, cloud) {
            Ok(gpu) => {
                let info = gpu.info.clone();
                eprintln!(
                    "deepmerge view: points of layer {} on the GPU: {} points of {} (every {} kept), {} in {} buffer(s), placed by {}",
                    info.layer,
                    info.points,
                    info.samples,
                    info.stride,
                    human_bytes(gpu.bytes()),
                    gpu.chunks(),
                    info.placement
                );
                open.points = Some(gpu);
                // Whatever the canvas holds was drawn from another cloud.
                if let Some(canvas) = &mut open.canvas {
                    canvas.key = None;
                }
                self.state
                    .fit_orbit(info.basis, info.bounds, area.width / area.height);
                self.lod = PointLod::default();
                self.mark_changed(false);
            }
            Err(e) => self.cloud_failed(e),
        }
    }

    /// Recompute the inspector's text and curves for the pinned pixel.
    fn update_table(&mut self) {
        let (Some(loaded), Some(pixel)) = (&self.loaded, self.state.pinned) else {
            self.table_text = None;
            self.curves.clear();
            return;
        };
        let inputs: Vec<&crate::deep::DeepImage> = loaded.inputs.iter().collect();
        let text = pixel_report(&loaded.titles, &inputs, pixel, self.state.table);
        let mut curves = Vec::new();
        for (i, (title, image)) in loaded.titles.iter().zip(&inputs).enumerate() {
            if let Ok(t) = PixelTable::of_input(title, image, i, pixel, TableValues::Accumulated) {
                curves.push(t);
            }
        }
        if inputs.len() > 1 {
            if let Ok(t) = PixelTable::of_merge(&inputs, pixel, TableValues::Accumulated) {
                curves.push(t);
            }
        }
        match text {
            Ok(text) => self.table_text = Some(text),
            Err(e) => self.table_text = Some(format!("deepmerge: error: {e}")),
        }
        self.curves = curves;
    }

    fn copy_table(&mut self) {
        if let (Some(text), Some((x, y))) = (&self.table_text, self.state.pinned) {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{text}");
            let _ = stdout.flush();
            eprintln!("deepmerge view: copied the table of pixel ({x}, {y}) to stdout");
        }
    }

    fn mark_changed(&mut self, reslice: bool) {
        let now = Instant::now();
        self.changed_at.get_or_insert(now);
        if reslice {
            self.need_slice = true;
            if self.slice_changed_at.is_none() {
                self.slice_changed_at = Some(now);
                self.slice_changed_cpu = process_cpu_ms();
            }
        }
        if let Some(open) = &self.open {
            open.window.request_redraw();
        }
    }

    fn on_key(&mut self, text: &str, event_loop: &ActiveEventLoop) {
        let area = self.area();
        let layer_before = self.state.layer;
        let table_before = self.state.table;
        let action = match &self.loaded {
            Some(l) => self.state.on_key(text, &l.layers, area),
            None => self.state.on_key(text, &[], area),
        };
        match action {
            KeyAction::None => {}
            KeyAction::Redraw => self.mark_changed(false),
            KeyAction::Reslice => self.mark_changed(true),
            KeyAction::CopyTable => self.copy_table(),
            KeyAction::NoIds => {
                eprintln!("{}", self.state.no_ids_line(self.layers()));
                // The points' colouring may have fallen back to depth.
                self.mark_changed(false);
            }
            KeyAction::Quit => event_loop.exit(),
        }
        self.request_cloud();
        if self.state.table != table_before {
            self.update_table();
        }
        if self.state.layer != layer_before {
            if let Some(open) = &self.open {
                open.window.set_title(&self.title());
            }
        }
    }

    fn on_release(&mut self) {
        let Some(start) = self.press.take() else {
            return;
        };
        let moved = (self.cursor[0] - start[0]).hypot(self.cursor[1] - start[1]);
        if self.dragging || moved > CLICK_SLOP {
            self.dragging = false;
            return;
        }
        if self.state.points {
            // No pixel under a point of the cloud: a click pins nothing.
            return;
        }
        let Some(layer) = self.layers().get(self.state.layer) else {
            return;
        };
        if let Some((x, y)) = self.state.pixel_at(self.cursor, layer) {
            self.state.pinned = Some((x, y));
            eprintln!("deepmerge view: pinned pixel ({x}, {y})");
            self.update_table();
            self.mark_changed(false);
        }
    }

    fn redraw(&mut self) -> Result<()> {
        let frame_start = Instant::now();
        let Some(open) = &mut self.open else {
            return Ok(());
        };
        let size = open.window.inner_size();
        // egui first: its sliders may change the slice this frame.
        let raw = open.egui_state.take_egui_input(&open.window);
        let layers: &[super::load::Layer] = self.loaded.as_ref().map_or(&[], |l| &l.layers);
        let inputs = PanelInputs {
            layers,
            progress: self.progress.as_ref().map(|(f, s)| (*f, s.as_str())),
            error: self.error.as_deref(),
            table_text: self.table_text.as_deref(),
            curves: &self.curves,
            last_slice_ms: self.last_slice_ms,
            points: ui::PointsPanel {
                info: open
                    .points
                    .as_ref()
                    .map(|p| &p.info)
                    .filter(|i| i.layer == self.state.layer),
                building: self.cloud_pending.is_some(),
                error: self.cloud_error.as_deref(),
                last_drawn: self.last_points,
                last_frame_ms: self.last_frame_ms,
            },
        };
        let table_before = self.state.table;
        let mut outcome = ui::PanelOutcome::default();
        let full = open.egui_ctx.run(raw, |ctx| {
            outcome = ui::panel(ctx, &mut self.state, &inputs);
        });
        open.egui_state
            .handle_platform_output(&open.window, full.platform_output);
        let now = Instant::now();
        if outcome.reslice {
            self.need_slice = true;
            if self.slice_changed_at.is_none() {
                self.slice_changed_at = Some(now);
                self.slice_changed_cpu = process_cpu_ms();
            }
            self.changed_at.get_or_insert(now);
        }
        if outcome.redraw {
            self.changed_at.get_or_insert(now);
        }
        let area_width = (size.width as f64 - PANEL_WIDTH as f64 * open.window.scale_factor())
            .ceil()
            .max(1.0) as u32;
        let gl = &open.engine.gl;
        // SAFETY: plain state calls on the current context.
        unsafe {
            gl.viewport(0, 0, size.width as i32, size.height as i32);
            gl.clear_color(0.16, 0.16, 0.16, 1.0);
            gl.clear(glow::COLOR_BUFFER_BIT);
        }
        let cloud = open
            .points
            .as_ref()
            .filter(|p| self.state.points && p.info.layer == self.state.layer);
        let mut drawn_points = None;
        if let (Some(cloud), Some(orbit)) = (cloud, self.state.orbit) {
            let area = (area_width, size.height);
            let colour = match self.state.point_colour {
                PointColour::Id if cloud.info.id_channel.is_none() => PointColour::Depth,
                other => other,
            };
            let params = PointDrawParams {
                area,
                matrix: orbit.gl_matrix(area_width as f64 / size.height.max(1) as f64),
                colour,
                depth_range: cloud.info.depth_range,
                slice: (self.state.slice.near, self.state.slice.far),
            };
            let key = CanvasKey {
                layer: cloud.info.layer,
                matrix: params.matrix,
                colour,
                slice: params.slice,
            };
            if open.canvas.as_ref().is_some_and(|c| c.size != area) {
                if let Some(old) = open.canvas.take() {
                    old.delete(&open.engine);
                }
            }
            if open.canvas.is_none() {
                open.canvas = Some(PointCanvas::new(&open.engine, area)?);
            }
            let canvas = open.canvas.as_mut().expect("made above");
            if canvas.key.as_ref() != Some(&key) {
                canvas.start(&open.engine, key, self.lod.passes(cloud.info.points));
            }
            // While the camera moves only the first pass is drawn; at rest, more within the
            // frame's time, until the canvas holds every point.
            let moving = self.moved_at.is_some_and(|t| t.elapsed() < REFINE_AFTER);
            let started = Instant::now();
            let mut drawn = 0;
            canvas.bind(&open.engine, true);
            while canvas.done < canvas.passes {
                let pass = canvas.done;
                let pass_start = Instant::now();
                let n = cloud.draw_passes(&open.engine, &params, pass..pass + 1, canvas.passes)?;
                // SAFETY: a plain call on the current context: the pass is timed to its end.
                unsafe { open.engine.gl.finish() };
                self.lod
                    .learn(n, (Instant::now() - pass_start).as_secs_f64() * 1e3);
                drawn += n;
                canvas.done += 1;
                let elapsed = (Instant::now() - started).as_secs_f64() * 1e3;
                if moving || elapsed >= REFINE_FRAME_MS {
                    break;
                }
            }
            canvas.bind(&open.engine, false);
            canvas.show(&open.engine)?;
            self.refine_pending = canvas.done < canvas.passes;
            drawn_points = Some(PointsDrawn {
                drawn,
                shown: canvas.done,
                passes: canvas.passes,
                held: cloud.info.points,
            });
        } else if let (Some(loaded), Some(gpu)) =
            (&self.loaded, open.gpu_layers.get(self.state.layer))
        {
            let layer = &loaded.layers[self.state.layer];
            if self.need_slice {
                // The pass's GPU time from timer queries, as every GL stage is timed; taking the
                // profile waits for the pass, which the frame needs done anyway.
                open.engine.profile_stages(true);
                let sliced = gpu.slice(&open.engine, self.state.slice.near, self.state.slice.far);
                let profile = open.engine.take_profile();
                open.engine.profile_stages(false);
                sliced?;
                self.slice_pass_ms = profile.stage("slice").map(|s| s.gpu_s * 1e3);
                self.need_slice = false;
            }
            let column = |name: &str| {
                layer
                    .columns
                    .names
                    .iter()
                    .position(|n| n == name)
                    .map_or(-1, |k| k as i32)
            };
            let d = layer.display_window;
            let w = layer.data_window;
            let params = DrawParams {
                window: (size.width, size.height),
                image_width: area_width,
                origin: self.state.camera.origin,
                zoom: self.state.camera.zoom,
                display_window: [d.x0, d.y0, d.x1, d.y1],
                data_window: [w.x0, w.y0, w.x1, w.y1],
                view: self.state.view.shader_id(),
                rgba: [column("R"), column("G"), column("B"), column("A")],
                channel: match self.state.view {
                    View::Channel(k) => k as i32,
                    _ => -1,
                },
                id_channel: match self.state.view {
                    View::Id(k) => k as i32,
                    _ => -1,
                },
                slice: (self.state.slice.near, self.state.slice.far),
                exposure: self.state.exposure,
                depth_range: layer.depth_range,
                pinned: self.state.pinned,
            };
            gpu.draw(&open.engine, open.vao, &params)?;
        }
        let primitives = open.egui_ctx.tessellate(full.shapes, full.pixels_per_point);
        open.painter.paint_and_update_textures(
            [size.width, size.height],
            full.pixels_per_point,
            &primitives,
            &full.textures_delta,
        );
        open.surface
            .swap_buffers(&open.context)
            .map_err(|e| Error::Gl(format!("cannot show the frame: {e}")))?;
        // SAFETY: a plain call on the current context: the frame is done when this returns.
        unsafe { open.engine.gl.finish() };
        let done = Instant::now();
        let frame_ms = (done - frame_start).as_secs_f64() * 1e3;
        if self.frame_stats {
            let what = match drawn_points {
                Some(p) => format!(
                    "points: {} drawn, passes {} of {} shown, {} held",
                    p.drawn, p.shown, p.passes, p.held
                ),
                None => "image".to_string(),
            };
            eprintln!("deepmerge view: frame {frame_ms:.2} ms ({what})");
        }
        if drawn_points.is_some() {
            self.last_points = drawn_points;
        }
        self.last_frame_ms = Some(frame_ms);
        if let Some(since) = self.slice_changed_at.take() {
            let ms = (done - since).as_secs_f64() * 1e3;
            self.last_slice_ms = Some(ms);
            eprintln!(
                "deepmerge view: slice {} shown in {ms:.1} ms (slice pass {:.1} ms, {:.1} ms of CPU)",
                self.state.slice.describe(),
                self.slice_pass_ms.unwrap_or(0.0),
                process_cpu_ms() - self.slice_changed_cpu
            );
        }
        let repaint = full
            .viewport_output
            .get(&egui::ViewportId::ROOT)
            .is_some_and(|v| v.repaint_delay.is_zero());
        let line = match &self.error {
            Some(_) => "the error".to_string(),
            None => self.state.describe(self.layers()),
        };
        if line != self.last_reported && (self.loaded.is_some() || self.error.is_some()) {
            let ms = self
                .changed_at
                .map_or(0.0, |t| (done - t).as_secs_f64() * 1e3);
            eprintln!("deepmerge view: drawn {line} in {ms:.1} ms");
            self.last_reported = line;
        }
        self.changed_at = None;
        if self.state.table != table_before {
            self.update_table();
        }
        if outcome.copy {
            self.copy_table();
        }
        if let Some(open) = &self.open {
            if repaint || outcome.redraw || outcome.reslice || self.progress.is_some() {
                open.window.request_redraw();
            }
        }
        // The panel may have switched the points mode on or the layer.
        self.request_cloud();
        Ok(())
    }
}

/// The config with the most samples of depth 0 (the viewer draws no 3-D geometry on the
/// window: the points mode draws into a framebuffer of its own), preferring one without
/// multisampling: what the window's surface is made with.
fn pick_config(configs: Box<dyn Iterator<Item = Config> + '_>) -> Config {
    configs
        .min_by_key(|c| (c.num_samples(), c.depth_size(), c.alpha_size()))
        .expect("glutin returns at least one config or an error")
}

impl ApplicationHandler<LoadEvent> for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.open.is_some() {
            return;
        }
        match self.open_window(event_loop) {
            Ok(open) => {
                open.window.request_redraw();
                self.open = Some(open);
                // Layers that came before the window.
                if let Err(e) = self.upload_pending(None) {
                    self.fail(e);
                }
            }
            Err(e) => {
                self.fatal = Some(e);
                event_loop.exit();
            }
        }
    }

    fn user_event(&mut self, _event_loop: &ActiveEventLoop, event: LoadEvent) {
        match event {
            LoadEvent::Progress(fraction, what) => {
                self.progress = Some((fraction, what));
                if let Some(open) = &self.open {
                    open.window.request_redraw();
                }
            }
            LoadEvent::Layer(layer) => self.on_layer(*layer),
            LoadEvent::Done(result) => self.on_loaded(*result),
            LoadEvent::Cloud(layer, result) => self.on_cloud(layer, *result),
        }
    }

    fn about_to_wait(&mut self, event_loop: &ActiveEventLoop) {
        // The canvas holds fewer passes than the view is drawn in: once the camera rests, the
        // next frames add them (each within REFINE_FRAME_MS, so input is answered between).
        if !self.refine_pending {
            event_loop.set_control_flow(ControlFlow::Wait);
            return;
        }
        let due = self
            .moved_at
            .map_or_else(Instant::now, |t| t + REFINE_AFTER);
        if Instant::now() >= due {
            event_loop.set_control_flow(ControlFlow::Wait);
            if let Some(open) = &self.open {
                open.window.request_redraw();
            }
        } else {
            event_loop.set_control_flow(ControlFlow::WaitUntil(due));
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _id: WindowId, event: WindowEvent) {
        let Some(open) = &mut self.open else {
            return;
        };
        let response = open.egui_state.on_window_event(&open.window, &event);
        // egui asks for a repaint after every RedrawRequested too; following that would draw
        // frames back to back while nothing changes (and make every change wait for one).
        if response.repaint && !matches!(event, WindowEvent::RedrawRequested) {
            open.window.request_redraw();
        }
        let egui_wants_pointer = open.egui_ctx.is_pointer_over_area()
            || open.egui_ctx.wants_pointer_input()
            || open.egui_ctx.is_using_pointer();
        let egui_wants_keys = open.egui_ctx.wants_keyboard_input();
        match event {
            WindowEvent::CloseRequested => event_loop.exit(),
            WindowEvent::Resized(size) => {
                if let (Some(w), Some(h)) =
                    (NonZeroU32::new(size.width), NonZeroU32::new(size.height))
                {
                    open.surface.resize(&open.context, w, h);
                }
                open.window.request_redraw();
            }
            WindowEvent::RedrawRequested => {
                if let Err(e) = self.redraw() {
                    self.fail(e);
                }
            }
            WindowEvent::KeyboardInput { event, .. }
                if event.state == ElementState::Pressed && !egui_wants_keys =>
            {
                match &event.logical_key {
                    Key::Named(NamedKey::Escape) => event_loop.exit(),
                    Key::Character(text) => {
                        let text = text.to_string();
                        self.on_key(&text, event_loop);
                    }
                    _ => {}
                }
            }
            WindowEvent::CursorMoved { position, .. } => {
                let PhysicalPosition { x, y } = position;
                let at = [x, y];
                if let Some(start) = self.press {
                    let moved = (at[0] - start[0]).hypot(at[1] - start[1]);
                    if self.dragging || moved > CLICK_SLOP {
                        self.dragging = true;
                        let delta = [at[0] - self.cursor[0], at[1] - self.cursor[1]];
                        match (self.state.points, &mut self.state.orbit) {
                            (true, Some(orbit)) => {
                                orbit.orbit(delta);
                                self.moved_at = Some(Instant::now());
                            }
                            (true, None) => {}
                            (false, _) => self.state.camera.pan(delta),
                        }
                        self.mark_changed(false);
                    }
                }
                self.cursor = at;
            }
            WindowEvent::MouseInput { state, button, .. }
                if matches!(button, MouseButton::Left | MouseButton::Right) =>
            {
                match state {
                    ElementState::Pressed if !egui_wants_pointer => self.press = Some(self.cursor),
                    ElementState::Released => {
                        if button == MouseButton::Left {
                            self.on_release();
                        } else {
                            self.press = None;
                            self.dragging = false;
                        }
                    }
                    _ => {}
                }
            }
            WindowEvent::MouseWheel { delta, .. } if !egui_wants_pointer => {
                let lines = match delta {
                    MouseScrollDelta::LineDelta(_, y) => y as f64,
                    MouseScrollDelta::PixelDelta(p) => p.y / 40.0,
                };
                let factor = 1.25f64.powf(lines);
                match (self.state.points, &mut self.state.orbit) {
                    (true, Some(orbit)) => {
                        orbit.zoom(factor);
                        self.moved_at = Some(Instant::now());
                    }
                    (true, None) => {}
                    (false, _) => self.state.camera.zoom_about(self.cursor, factor),
                }
                self.mark_changed(false);
            }
            _ => {}
        }
    }
}
