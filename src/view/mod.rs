//! `deepmerge view FILE...`: a window on a merge of deep images (or on one), for a compositor
//! who wants to look rather than read.
//!
//! - [`load`]: the inputs are read, merged (tidy deep, the reference merge) and flattened to
//!   GPU arrays on a worker thread, with progress, so the window never freezes;
//! - [`gpu`]: the slice pass (`glsl/slice.comp`) re-flattens only the samples between the near
//!   and far planes on the GPU, cutting volumes as the tidy does; the image pass draws a view;
//! - [`state`], [`camera`]: what is shown and where, and the keys;
//! - [`display`]: the display transforms, stated in Rust for the tests;
//! - [`ui`]: the egui side panel with the inspector (tables from [`crate::inspect`]);
//! - `app`: the winit event loop and the GL context on the window.

mod app;
pub mod camera;
pub mod display;
pub mod gpu;
pub mod load;
pub mod state;
pub mod ui;

use std::path::PathBuf;

use clap::Args;
use winit::event_loop::EventLoop;

use crate::composite::{MergeOptions, SortPolicy};
use crate::error::{Error, Result};
use crate::exr::{PartSelector, ReadOptions};

/// `deepmerge view`'s arguments.
#[derive(Args, Debug, Clone)]
pub struct ViewArgs {
    /// Deep EXR inputs, front-most priority first (1 to 9; keys 1..9 show each, 0 the merge).
    #[arg(value_name = "FILE", required = true, num_args = 1..=9)]
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
    /// Refuse inputs that would take more than this many GiB once decoded.
    #[arg(long, value_name = "GIB", default_value_t = 8.0)]
    pub max_memory: f64,
    /// Window size, WIDTHxHEIGHT pixels.
    #[arg(long, default_value = "1600x900")]
    pub size: String,
}

/// Open the window and run until it is closed. `Ok(false)` means an error was shown in the
/// window and already printed on stderr (the exit status should say so).
pub fn run(args: &ViewArgs) -> Result<bool> {
    if !(args.max_memory > 0.0 && args.max_memory.is_finite()) {
        return Err(Error::Usage(format!(
            "--max-memory must be a positive number of GiB, not {}",
            args.max_memory
        )));
    }
    let size = crate::scene::parse_size(&args.size)?;
    let request = load::LoadRequest {
        files: args.files.clone(),
        read: ReadOptions {
            part: args
                .part
                .as_deref()
                .map(|p| p.parse().expect("infallible"))
                .unwrap_or(PartSelector::FirstDeep),
            max_memory: (args.max_memory * (1u64 << 30) as f64) as u64,
        },
        merge: MergeOptions {
            sort: if args.sort {
                SortPolicy::Always
            } else if args.assume_sorted {
                SortPolicy::AssumeSorted
            } else {
                SortPolicy::Auto
            },
            ..MergeOptions::default()
        },
    };
    let event_loop = EventLoop::<load::LoadEvent>::with_user_event()
        .build()
        .map_err(|e| Error::Gl(format!("cannot open a window: {e}")))?;
    let proxy = event_loop.create_proxy();
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
    let mut app = app::App::new(names.join(" + "), (size.0 as u32, size.1 as u32));
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
