//! `deepmerge view FILE...`: a window on a merge of deep images (or on one), for a compositor
//! who wants to look rather than read.
//!
//! - [`load`]: the inputs are read, merged (tidy deep, the reference merge) and flattened to
//!   GPU arrays on a worker thread, with progress, so the window never freezes;
//! - [`gpu`]: the slice pass (`glsl/view/slice.comp`) re-flattens only the samples between the near
//!   and far planes on the GPU, cutting volumes as the tidy does; the image pass draws a view;
//!   a layer is held in bands of rows, each buffer within the device's storage-block limit and
//!   all of them within a GPU memory budget;
//! - [`state`], [`camera`]: what is shown and where, and the keys;
//! - [`cloud`], [`orbit`]: the points mode, every sample as a point placed as `deepmerge
//!   points` places it (built on a worker thread, held in vertex buffers within the GPU memory
//!   budget), seen through an orbit camera;
//! - [`display`]: the display transforms, stated in Rust for the tests;
//! - [`ui`]: the egui side panel with the inspector (tables from [`crate::inspect`]);
//! - `app`: the winit event loop and the GL context on the window.

mod app;
pub mod camera;
pub mod cloud;
pub mod display;
pub mod gpu;
pub mod load;
pub mod orbit;
pub mod state;
pub mod ui;

use std::path::PathBuf;

use clap::Args;
use winit::event_loop::EventLoop;

use crate::error::{Error, Result};
use crate::exr::{ChunkSource, PartSelector, ReadOptions};
use crate::request::{FieldNames, MergeOption, MergeRequest, OptionNames};

/// Inputs the viewer takes: keys 1 to 9 show each.
pub const MAX_INPUTS: usize = 9;

/// `deepmerge view`'s arguments.
#[derive(Args, Debug, Clone)]
pub struct ViewArgs {
    /// Deep EXR inputs, front-most priority first (1 to 9; keys 1..9 show each, 0 the merge).
    // No upper bound for clap: more than nine get the viewer's own one-line error.
    #[arg(value_name = "FILE", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Part to read from multi-part inputs: an index or a name (default: the first deep part).
    #[arg(long, value_name = "PART")]
    pub part: Option<String>,
    /// Sort every input pixel, even where the file says it is sorted.
    #[arg(long, conflicts_with = "assume_sorted")]
    pub sort: bool,
    /// Trust that every input's pixels are sorted, whatever the file says.
    #[arg(long)]
    pub assume_sorted: bool,
    /// Refuse inputs that would take more than this once decoded: GiB, or a size with a unit
    /// (512MiB).
    #[arg(long, value_name = "SIZE", default_value = "8")]
    pub max_memory: String,
    /// Window size, WIDTHxHEIGHT pixels.
    #[arg(long, default_value = "1600x900")]
    pub size: String,
    /// GPU memory the layers may take: GiB, or a size with a unit (default: three quarters of
    /// what the driver reports free, or of the host's available memory on a software
    /// rasteriser).
    #[arg(long, value_name = "SIZE")]
    pub gpu_memory: Option<String>,
    /// Bind at most this many bytes per storage buffer, below the driver's limit (for tests
    /// of the banded layers).
    #[arg(long, value_name = "BYTES", hide = true)]
    pub storage_block_limit: Option<u64>,
    /// Print every frame's time on stderr (for measuring the viewer: docs/benchmarks.md).
    #[arg(long, hide = true)]
    pub frame_stats: bool,
}

/// The viewer's flags, as the merge request's refusals name them (those it has; the others
/// keep the request's field names).
struct ViewFlags;

impl OptionNames for ViewFlags {
    fn spell(&self, option: MergeOption) -> &'static str {
        match option {
            MergeOption::Sort => "--sort",
            MergeOption::AssumeSorted => "--assume-sorted",
            MergeOption::Part => "--part",
            other => FieldNames.spell(other),
        }
    }

    fn setting(&self, option: MergeOption, value: &str) -> String {
        format!("{} {value}", self.spell(option))
    }
}

/// What must hold before a window opens: the inputs' count, every input readable with a deep
/// part (the CLI's checks and messages: [`ChunkSource::open`] reads the header and offset
/// table only) and an X display to open the window on.
fn check_before_window(args: &ViewArgs, read: &ReadOptions) -> Result<()> {
    if args.files.len() > MAX_INPUTS {
        return Err(Error::Usage(format!(
            "the viewer takes 1 to {MAX_INPUTS} inputs (keys 1 to {MAX_INPUTS} show each), not {}; merge some of them first (deepmerge A.exr B.exr --deep -o AB.exr)",
            args.files.len()
        )));
    }
    for path in &args.files {
        ChunkSource::open(path, &read.part, read.max_memory)?;
    }
    // Only X11 is built in (winit's Wayland backend is left out); winit's own message for a
    // missing display names its source file and Wayland.
    if std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty()) {
        return Err(Error::Gl(
            "cannot open a window: no X display (DISPLAY is not set); set DISPLAY or run under xvfb-run".into(),
        ));
    }
    Ok(())
}

/// Open the window and run until it is closed. `Ok(false)` means an error was shown in the
/// window and already printed on stderr (the exit status should say so).
pub fn run(args: &ViewArgs) -> Result<bool> {
    let memory = |flag: &str, text: &str| {
        crate::size::parse_memory(text).map_err(|e| Error::Usage(format!("{flag}: {e}")))
    };
    let max_memory = memory("--max-memory", &args.max_memory)?;
    let gpu_budget = args
        .gpu_memory
        .as_deref()
        .map(|text| memory("--gpu-memory", text))
        .transpose()?;
    // The viewer's merge options are the merge's: mapped onto the one request and checked there.
    let merge = MergeRequest {
        sort: args.sort,
        assume_sorted: args.assume_sorted,
        ..MergeRequest::default()
    };
    merge.check(args.files.len(), &ViewFlags)?;
    let size = crate::scene::parse_size(&args.size)?;
    let request = load::LoadRequest {
        files: args.files.clone(),
        read: ReadOptions {
            part: args
                .part
                .as_deref()
                .map(|p| p.parse().expect("infallible"))
                .unwrap_or(PartSelector::FirstDeep),
            max_memory,
        },
        merge: merge.merge_options(),
    };
    check_before_window(args, &request.read)?;
    let request_read = request.read.clone();
    let event_loop = EventLoop::<load::LoadEvent>::with_user_event()
        .build()
        .map_err(|_| {
            Error::Gl(format!(
                "cannot open a window: cannot connect to the X display {:?}; set DISPLAY or run under xvfb-run",
                std::env::var_os("DISPLAY").unwrap_or_default()
            ))
        })?;
    let proxy = event_loop.create_proxy();
    let cloud_proxy = proxy.clone();
    let worker = std::thread::Builder::new()
        .name("deepmerge-view-load".into())
        .spawn(move || {
            load::load(&request, &|event| {
                // The window may be gone already; then nobody needs the news.
                let _ = proxy.send_event(event);
            })
        })
        .map_err(|e| Error::internal(format!("cannot start the loader thread: {e}")))?;
    let names: Vec<String> = args
        .files
        .iter()
        .map(|f| {
            f.file_name().map_or_else(
                || f.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let mut app = app::App::new(
        names.join(" + "),
        (size.0 as u32, size.1 as u32),
        app::GpuLimits {
            budget: gpu_budget,
            storage_block: args.storage_block_limit,
        },
        app::Workers {
            proxy: cloud_proxy,
            files: args.files.clone(),
            read: request_read,
        },
        args.frame_stats,
    );
    event_loop
        .run_app(&mut app)
        .map_err(|e| Error::Gl(format!("the window's event loop failed: {e}")))?;
    if let Some(e) = app.fatal.take() {
        return Err(e);
    }
    // The loader ends on its own; a window closed early does not wait for it.
    drop(worker);
    Ok(app.error.is_none())
}
