//! The one policy that decides which engine runs a merge and, for the GL engine, where its sort
//! and tidy stages run. The CLI, the benches and library callers all ask here.
//!
//! - [`choose_engine`]: `Backend::Cpu` is the CPU engine; `Backend::Gl` is OpenGL or an error;
//!   `Backend::Auto` is the CPU engine for a merge, unless GPU options were given, which ask for
//!   GL explicitly. Measured end to end (file to file, docs/benchmarks.md "End to end on an
//!   NVIDIA H100"), the CPU engine on the host's threads beat the GL engine on an H100 by 2.3-7x
//!   at 1080p and 4K, as it does on llvmpipe: the GL merge kernels are fast, but gathering,
//!   uploading and reading back bands on the host costs more than the CPU merge. So `Auto` makes
//!   no context and asks EGL nothing.
//! - [`crate::gpu::stage_on_gpu`] (the GL engine's own rule, stated here with the engine choice): a requested placement wins; otherwise the GPU stages (`sort.comp`,
//!   `tidy.comp`) run on a hardware device and the host does the work under a software
//!   rasteriser, where it is faster (sort ~10x, tidy ~3x, measured on llvmpipe) and
//!   bit-identical to the CPU engine.

use crate::error::{Error, Result};
use crate::gpu::GlContext;

pub use crate::request::Backend;

/// The engine chosen for a merge.
pub enum Engine {
    /// The CPU engine, with why when GL was not chosen under `Auto` (" (reason)", or empty).
    Cpu {
        /// Why GL was not used, as a parenthesised clause for the status line; empty when the
        /// CPU engine was asked for.
        reason: String,
    },
    /// The GL engine on this context (boxed: a context is large beside the CPU variant).
    Gl(Box<GlContext>),
}

impl Engine {
    /// This engine for one merge with the GL options `gl` (ignored by the CPU engine): the
    /// streamed merge's [`crate::stream::MergeEngine`] borrows the engine chosen here. One
    /// meaning, two lifetimes: `Engine` owns the choice (and the GL context) for a run,
    /// `MergeEngine` lends it to one merge.
    pub fn merging(&self, gl: crate::gpu::GlOptions) -> crate::stream::MergeEngine<'_> {
        match self {
            Engine::Cpu { .. } => crate::stream::MergeEngine::Cpu,
            Engine::Gl(ctx) => crate::stream::MergeEngine::Gl(ctx, gl),
        }
    }

    /// `"cpu"` or `"gl"`, as reports name the engine.
    pub fn name(&self) -> &'static str {
        match self {
            Engine::Cpu { .. } => "cpu",
            Engine::Gl(_) => "gl",
        }
    }
}

impl crate::request::MergeRequest {
    /// The engine this request runs on (a GL context is made here when GL is used). It lives
    /// here, not in `request.rs`, so that the request (which builds without the `gl` feature)
    /// does not depend on the engine choice that depends on it.
    pub fn engine(&self) -> Result<Engine> {
        choose_engine(self.backend, self.gl.is_given())
    }
}

/// Pick the engine for `backend`; `gl_options_given` is true when the caller set GL-only options
/// (layout, method, block size, pixel order, stage placement, statistics), which select GL under
/// `Auto` and are refused with `Cpu`.
pub fn choose_engine(backend: Backend, gl_options_given: bool) -> Result<Engine> {
    match backend {
        // `MergeRequest::check` refuses this in the front end's words first.
        Backend::Cpu if gl_options_given => Err(Error::Usage(
            "GPU options choose how the GPU merges; they do not apply to the CPU backend".into(),
        )),
        Backend::Cpu => Ok(Engine::Cpu {
            reason: String::new(),
        }),
        Backend::Gl => Ok(Engine::Gl(Box::new(GlContext::new()?))),
        // Measured, not assumed: see the module docs.
        Backend::Auto if !gl_options_given => Ok(Engine::Cpu {
            reason: AUTO_PICKS_CPU.to_string(),
        }),
        Backend::Auto => auto_with_context(gl_options_given),
    }
}

/// Why `Auto` runs a merge on the CPU engine, for the status line.
pub const AUTO_PICKS_CPU: &str = " (faster end to end than the GL engine, on llvmpipe and on an NVIDIA H100 alike; --backend gl uses OpenGL)";

/// `Auto` with GPU options given: GL (a software rasteriser too, as the options ask for it), or
/// an error naming why there is none.
fn auto_with_context(gl_options_given: bool) -> Result<Engine> {
    debug_assert!(gl_options_given);
    GlContext::new()
        .map(|ctx| Engine::Gl(Box::new(ctx)))
        .map_err(|e| {
            Error::Gl(format!(
                "GPU options were given but no GL context can be made ({e})"
            ))
        })
}
