//! The one policy that decides which engine runs a merge and, for the GL engine, where its sort
//! and tidy stages run. The CLI, the benches and library callers all ask here.
//!
//! - [`choose_engine`]: `Backend::Cpu` is the CPU engine; `Backend::Gl` is OpenGL or an error;
//!   `Backend::Auto` is OpenGL on a hardware device, and the CPU engine where no GL context can
//!   be made or the only GL is a software rasteriser such as llvmpipe (there the CPU engine is
//!   several times faster end to end, docs/benchmarks.md), unless GPU options were given, which
//!   ask for GL explicitly. The software case is decided from EGL's device list alone
//!   (`EGL_MESA_device_software`), without making a context.
//! - [`stage_on_gpu`]: a requested placement wins; otherwise the GPU stages (`sort.comp`,
//!   `tidy.comp`) run on a hardware device and the host does the work under a software
//!   rasteriser, where it is faster (sort ~10x, tidy ~3x, measured on llvmpipe) and
//!   bit-identical to the CPU engine.

use crate::error::{Error, Result};
use crate::gpu::{GlContext, GlInfo};

/// Which engine the user asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// GL on a hardware device, else the CPU engine (see the module docs).
    #[default]
    Auto,
    /// The CPU engine.
    Cpu,
    /// OpenGL compute, or an error.
    Gl,
}

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

/// Pick the engine for `backend`; `gl_options_given` is true when the caller set GL-only options
/// (layout, method, block size, pixel order, stage placement, statistics), which select GL under
/// `Auto` and are refused with `Cpu`.
pub fn choose_engine(backend: Backend, gl_options_given: bool) -> Result<Engine> {
    match backend {
        Backend::Cpu if gl_options_given => Err(Error::Usage(
            "--layout, --rbm, --stepwise, --block, --pixel-order, --gpu-stages and --stats choose how the GPU merges; they do not apply to --backend cpu".into(),
        )),
        Backend::Cpu => Ok(Engine::Cpu {
            reason: String::new(),
        }),
        Backend::Gl => Ok(Engine::Gl(Box::new(GlContext::new()?))),
        // Ask EGL what devices it lists before making a context: where it lists only a
        // software rasteriser and no GPU options were given, the CPU engine runs and no
        // context (tens of ms with llvmpipe) is made just to learn that.
        Backend::Auto if !gl_options_given => match GlContext::software_only() {
            Ok(Some(name)) => Ok(Engine::Cpu {
                reason: format!(
                    " (OpenGL here is only the software renderer {name}, slower than the CPU engine; --backend gl forces it)"
                ),
            }),
            Ok(None) => auto_with_context(false),
            Err(e) => Ok(Engine::Cpu {
                reason: format!(" ({e})"),
            }),
        },
        Backend::Auto => auto_with_context(gl_options_given),
    }
}

/// `Auto` decided by making a context and asking its renderer.
fn auto_with_context(gl_options_given: bool) -> Result<Engine> {
    match GlContext::new() {
        Ok(ctx) if ctx.info().software && !gl_options_given => Ok(Engine::Cpu {
            reason: format!(
                " (OpenGL here is only the software renderer {}, slower than the CPU engine; --backend gl forces it)",
                ctx.info().renderer
            ),
        }),
        Ok(ctx) => Ok(Engine::Gl(Box::new(ctx))),
        Err(e) if gl_options_given => Err(Error::Gl(format!(
            "GPU options were given but no GL context can be made ({e})"
        ))),
        Err(e) => Ok(Engine::Cpu {
            reason: format!(" ({e})"),
        }),
    }
}

/// Whether a GL stage with placement `requested` (`Some(true)`: GPU, `Some(false)`: host,
/// `None`: choose) runs on the GPU of the device described by `info`.
pub fn stage_on_gpu(requested: Option<bool>, info: &GlInfo) -> bool {
    requested.unwrap_or(!info.software)
}
