//! The one policy that decides which engine runs a merge and, for the GL engine, where its sort
//! and tidy stages run. The CLI, the benches and library callers all ask here.
//!
//! - [`choose_engine`]: `Backend::Cpu` is the CPU engine; `Backend::Gl` is OpenGL or an error;
//!   `Backend::Auto` is the CPU engine for a merge, unless GPU options were given, which ask for
//!   GL explicitly. Measured end to end (file to file, docs/benchmarks.md "End to end on an
//!   NVIDIA H100" and "The GL engine on an NVIDIA H200"), the CPU engine on the host's threads
//!   beat the GL engine on an H100 by 2.3-7x at 1080p and 4K, as it does on llvmpipe; on an H200
//!   (one run per cell) GL led for flat output at 2 and 4 host threads only, before any hardware
//!   run confirmed its bytes. So `Auto` makes no context and asks EGL nothing, until a hardware
//!   table with confirmed bytes says otherwise.
//! - Where the GL engine's stages run (`GlOptions::sorts_on_gpu`, `GlOptions::tidies_on_gpu`):
//!   a requested placement wins; otherwise the sort runs on the GPU (`sort.comp`, exact) and
//!   the tidy on the host, bit-identical to the CPU engine on every device (`tidy.comp` works
//!   in f32, within 1e-5, and runs only when asked: `--gpu-stages gpu`).

use crate::error::{Error, Result};
use crate::gpu::GlContext;

pub use crate::request::Backend;
pub use crate::stream::MergeEngine;

/// The engine a run chose: the GL context made for it, or the CPU engine and why. It is not a
/// second engine enum: the one enum is [`MergeEngine`], which each merge borrows from this
/// choice ([`EngineChoice::merging`]). This owns what the enum borrows (the context, made once
/// for a run and current on the thread that made it) and the status line's reason.
pub struct EngineChoice {
    /// The GL context, when the GL engine was chosen (boxed: a context is large).
    context: Option<Box<GlContext>>,
    /// Why GL was not used, as a parenthesised clause for the status line (" (reason)"); empty
    /// when the CPU engine was asked for, or when GL was chosen.
    cpu_reason: String,
}

impl EngineChoice {
    /// The CPU engine, with why GL was not chosen (" (reason)", or empty).
    pub fn cpu(reason: impl Into<String>) -> Self {
        EngineChoice {
            context: None,
            cpu_reason: reason.into(),
        }
    }

    /// The GL engine on `context`.
    pub fn gl(context: GlContext) -> Self {
        EngineChoice {
            context: Some(Box::new(context)),
            cpu_reason: String::new(),
        }
    }

    /// The GL context when the GL engine was chosen, `None` for the CPU engine.
    pub fn context(&self) -> Option<&GlContext> {
        self.context.as_deref()
    }

    /// Why the CPU engine runs, as a parenthesised clause for the status line (empty when it
    /// was asked for, or when GL runs).
    pub fn cpu_reason(&self) -> &str {
        &self.cpu_reason
    }

    /// The engine for one merge with the GL options `gl` (ignored by the CPU engine).
    pub fn merging(&self, gl: crate::gpu::GlOptions) -> MergeEngine<'_> {
        match self.context() {
            None => MergeEngine::Cpu,
            Some(ctx) => MergeEngine::Gl(ctx, gl),
        }
    }

    /// `"cpu"` or `"gl"`, as reports name the engine.
    pub fn name(&self) -> &'static str {
        self.merging(crate::gpu::GlOptions::default()).name()
    }
}

impl crate::request::MergeRequest {
    /// The engine this request runs on (a GL context is made here when GL is used). It lives
    /// here, not in `request.rs`, so that the request (which builds without the `gl` feature)
    /// does not depend on the engine choice that depends on it.
    pub fn engine(&self) -> Result<EngineChoice> {
        choose_engine(self.backend, self.gl.is_given())
    }
}

/// Pick the engine for `backend`; `gl_options_given` is true when the caller set GL-only options
/// (layout, method, block size, pixel order, stage placement, statistics), which select GL under
/// `Auto` and are refused with `Cpu`.
pub fn choose_engine(backend: Backend, gl_options_given: bool) -> Result<EngineChoice> {
    match backend {
        // `MergeRequest::check` refuses this in the front end's words first.
        Backend::Cpu if gl_options_given => Err(Error::Usage(
            "GPU options choose how the GPU merges; they do not apply to the CPU backend".into(),
        )),
        Backend::Cpu => Ok(EngineChoice::cpu("")),
        Backend::Gl => Ok(EngineChoice::gl(GlContext::new()?)),
        // Measured, not assumed: see the module docs.
        Backend::Auto if !gl_options_given => Ok(EngineChoice::cpu(AUTO_PICKS_CPU)),
        Backend::Auto => auto_with_context(gl_options_given),
    }
}

/// Why `Auto` runs a merge on the CPU engine, for the status line.
pub const AUTO_PICKS_CPU: &str = " (faster end to end than the GL engine on llvmpipe, and on NVIDIA H100 and H200 hosts at 8 or more threads; --backend gl uses OpenGL)";

/// `Auto` with GPU options given: GL (a software rasteriser too, as the options ask for it), or
/// an error naming why there is none.
fn auto_with_context(gl_options_given: bool) -> Result<EngineChoice> {
    debug_assert!(gl_options_given);
    GlContext::new().map(EngineChoice::gl).map_err(|e| {
        Error::Gl(format!(
            "GPU options were given but no GL context can be made ({e})"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU choices make no context, and what a merge borrows from them is the CPU engine:
    /// `Cpu` gives no reason for the status line, `Auto` without GPU options says why.
    #[test]
    fn cpu_choices_lend_the_cpu_engine() {
        let asked = choose_engine(Backend::Cpu, false).unwrap();
        assert!(asked.context().is_none());
        assert_eq!(asked.cpu_reason(), "");
        assert!(matches!(
            asked.merging(crate::gpu::GlOptions::default()),
            MergeEngine::Cpu
        ));
        assert_eq!(asked.name(), "cpu");
        let auto = choose_engine(Backend::Auto, false).unwrap();
        assert!(auto.context().is_none());
        assert_eq!(auto.cpu_reason(), AUTO_PICKS_CPU);
        assert_eq!(auto.name(), "cpu");
    }

    /// GPU options with the CPU backend are refused, not ignored.
    #[test]
    fn gpu_options_on_the_cpu_backend_are_refused() {
        assert!(matches!(
            choose_engine(Backend::Cpu, true),
            Err(Error::Usage(_))
        ));
    }
}
