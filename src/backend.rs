//! The one policy that decides which engine runs a merge and, for the GL engine, where its sort
//! and tidy stages run. The CLI, the benches and library callers all ask here.
//!
//! - [`choose_engine`]: `Backend::Cpu` is the CPU engine; `Backend::Gl` is OpenGL or an error;
//!   `Backend::Auto` is the CPU engine for a merge, unless GPU options were given, which ask for
//!   GL explicitly, and a deep merge on a host with a GPU of its own and
//!   [`AUTO_GL_MIN_THREADS`] to [`AUTO_GL_MAX_THREADS`] threads (from the CLI, of at least
//!   [`AUTO_GL_MIN_INPUT_BYTES`] of input files), which runs on the GL engine. Measured end to
//!   end (file to file, docs/benchmarks.md): the CPU engine beat the GL engine on llvmpipe
//!   everywhere, and on NVIDIA H100 and H200 hosts for flat output at 4 or more threads; on an
//!   H100 host on 2026-11-26, with its bytes confirmed equal, the GL engine was 1.24-1.9x faster
//!   for deep output at 4, 8 and 16 threads and even at 2; on 2026-11-27, with the CPU engine's
//!   bands grown with the threads, 1.1-1.2x faster at 4 and 8 threads and level at 16 and 2;
//!   timed as whole processes, the CPU engine was as fast or faster from 12 threads on an H200
//!   host and level at 16 on an H100 host ([`AUTO_GL_MAX_THREADS`]). `Auto` asks EGL which
//!   devices it lists only for such a deep merge (no display, no context), and makes a context
//!   only on a GPU: from the CLI on a helper thread while the run opens its inputs
//!   ([`ContextStart::OnHelper`]; a GPU that then gives no usable context leaves the merge on
//!   the CPU engine), for the Python module before the choice returns. The status line (`--runstats`) says which engine and why. The comp
//!   graph's merges stay on the CPU engine under `Auto` (`MergeRequest::uses_gl`): they were
//!   not measured.
//! - Where the GL engine's stages run (`GlOptions::sorts_on_gpu`, `GlOptions::tidies_on_gpu`):
//!   a requested placement wins; otherwise the sort runs on the GPU (`sort.comp`, exact) and
//!   the tidy on the host, bit-identical to the CPU engine on every device (`tidy.comp` works
//!   in f32, within 1e-5, and runs only when asked: `--gpu-stages gpu`).

use crate::error::{Error, Result};
use crate::gpu::starting::no_context_for;
use crate::gpu::{GlContext, StartingGl};

pub use crate::request::Backend;
pub use crate::stream::MergeEngine;

/// The engine a run chose: the GL context made for it, or the CPU engine and why. It is not a
/// second engine enum: the one enum is [`MergeEngine`], which each merge borrows from this
/// choice ([`EngineChoice::merging`]). This owns what the enum borrows (the context, made once
/// for a run and current on the thread that made it) and the status line's reason.
pub struct EngineChoice {
    /// The GL context, when the GL engine was chosen.
    context: Option<ChosenContext>,
    /// Why GL was not used, as a parenthesised clause for the status line (" (reason)"); empty
    /// when the CPU engine was asked for, or when GL was chosen.
    cpu_reason: String,
    /// Why GL was chosen when it was not asked for by name (`Auto`), as a parenthesised clause
    /// for the status line (" (auto: reason)"); empty otherwise.
    gl_reason: String,
    /// Why the CPU engine ran after all, once `Auto`'s starting context fell back
    /// ([`StartingGl::fell_back`]), in the status line's words.
    fallback_reason: std::cell::OnceCell<String>,
}

/// Where the context of a GL choice is made: at once, or on a helper thread while the run opens
/// its inputs ([`StartingGl`]; the CLI's one merge, for `Gl` and for `Auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextStart {
    /// Made before the choice returns (a caller that keeps its context for many merges).
    Now,
    /// Started on a helper thread; under `Auto`, a GPU that then gives no usable context
    /// leaves the merge on the CPU engine ([`StartingGl::start_or_cpu`]).
    OnHelper,
}

/// The status line's clause for a deep merge that `Auto` keeps on the CPU engine for `why`.
fn no_gpu_reason(why: &str) -> String {
    format!(" (deep output, but {why}; on a GPU the GL engine would run)")
}

/// The context of a GL choice: made, or still in the making on a helper thread (boxed: a
/// context is large).
enum ChosenContext {
    Made(Box<GlContext>),
    Starting(Box<StartingGl>),
}

impl EngineChoice {
    /// The CPU engine, with why GL was not chosen (" (reason)", or empty).
    pub fn cpu(reason: impl Into<String>) -> Self {
        EngineChoice {
            context: None,
            cpu_reason: reason.into(),
            gl_reason: String::new(),
            fallback_reason: Default::default(),
        }
    }

    /// The GL engine on `context`.
    pub fn gl(context: GlContext) -> Self {
        EngineChoice {
            context: Some(ChosenContext::Made(Box::new(context))),
            cpu_reason: String::new(),
            gl_reason: String::new(),
            fallback_reason: Default::default(),
        }
    }

    /// The GL engine on a context being made on a helper thread ([`StartingGl`]): a merge
    /// makes it current where it first needs it, so that its start-up overlaps the inputs'.
    pub fn gl_starting(context: StartingGl) -> Self {
        EngineChoice {
            context: Some(ChosenContext::Starting(Box::new(context))),
            cpu_reason: String::new(),
            gl_reason: String::new(),
            fallback_reason: Default::default(),
        }
    }

    /// The GL engine on a context `Auto` started on a helper thread for `reason`
    /// (" (auto: reason)"), which falls back to the CPU engine ([`StartingGl::start_or_cpu`]).
    pub fn gl_starting_because(context: StartingGl, reason: String) -> Self {
        EngineChoice {
            gl_reason: reason,
            ..Self::gl_starting(context)
        }
    }

    /// The starting context, when it fell back to the CPU engine.
    fn fell_back(&self) -> Option<&str> {
        match self.context.as_ref()? {
            ChosenContext::Starting(starting) => starting.fell_back(),
            ChosenContext::Made(_) => None,
        }
    }

    /// The GL engine on `context`, chosen by `Auto` for `reason` (" (auto: reason)").
    pub fn gl_because(context: GlContext, reason: String) -> Self {
        EngineChoice {
            gl_reason: reason,
            ..Self::gl(context)
        }
    }

    /// Why `Auto` chose the GL engine, as " (auto: reason)" (empty when it was asked for, or for
    /// the CPU engine).
    pub fn gl_reason(&self) -> &str {
        if self.fell_back().is_some() {
            return "";
        }
        &self.gl_reason
    }

    /// The GL context when the GL engine was chosen and its context is made (a starting one
    /// once a merge has made it current), `None` for the CPU engine.
    pub fn context(&self) -> Option<&GlContext> {
        match self.context.as_ref()? {
            ChosenContext::Made(ctx) => Some(ctx),
            ChosenContext::Starting(starting) if starting.fell_back().is_some() => None,
            ChosenContext::Starting(starting) => starting.ready(),
        }
    }

    /// Whether the GL engine was chosen (and, where `Auto` started its context, has not fallen
    /// back to the CPU engine so far: until a merge or [`Self::started_context`] has waited for
    /// that context, a fallback still to come is not known, so ask after the merge, as the
    /// CLI's status line does).
    pub fn is_gl(&self) -> bool {
        self.context.is_some() && self.fell_back().is_none()
    }

    /// The GL context when the GL engine was chosen, made current here now if it was still
    /// starting (waiting for it); `None` for the CPU engine.
    pub fn started_context(&self) -> Result<Option<&GlContext>> {
        match &self.context {
            None => Ok(None),
            Some(ChosenContext::Made(ctx)) => Ok(Some(ctx)),
            Some(ChosenContext::Starting(starting)) => starting.for_merge(),
        }
    }

    /// Why the CPU engine runs, as a parenthesised clause for the status line (empty when it
    /// was asked for, or when GL runs).
    pub fn cpu_reason(&self) -> &str {
        match self.fell_back() {
            Some(why) => self.fallback_reason.get_or_init(|| no_gpu_reason(why)),
            None => &self.cpu_reason,
        }
    }

    /// The engine for one merge with the GL options `gl` (ignored by the CPU engine).
    pub fn merging(&self, gl: crate::gpu::GlOptions) -> MergeEngine<'_> {
        match &self.context {
            None => MergeEngine::Cpu,
            Some(ChosenContext::Made(ctx)) => MergeEngine::Gl(ctx, gl),
            Some(ChosenContext::Starting(starting)) if starting.fell_back().is_some() => {
                MergeEngine::Cpu
            }
            Some(ChosenContext::Starting(starting)) => match starting.ready() {
                Some(ctx) => MergeEngine::Gl(ctx, gl),
                None => MergeEngine::GlStarting(starting, gl),
            },
        }
    }

    /// `"cpu"` or `"gl"`, as reports name the engine (for `Auto`'s starting context, as
    /// [`Self::is_gl`] says: ask after the merge).
    pub fn name(&self) -> &'static str {
        self.merging(crate::gpu::GlOptions::default()).name()
    }
}

impl crate::request::MergeRequest {
    /// The engine this request runs on (a GL context is made here when GL is used). It lives
    /// here, not in `request.rs`, so that the request (which builds without the `gl` feature)
    /// does not depend on the engine choice that depends on it.
    /// `sequence`: the request merges frames, which `Auto` keeps on the CPU engine (frames merge
    /// side by side there, `-j`; one GL frame at a time was not measured against that).
    /// `input_bytes`: the size of the input files, which `Auto` weighs for one process's merge
    /// (`None`: not known, or a caller that keeps its context for many merges).
    /// `--backend gl`, and `--backend auto` where it chooses GL, start the context on a helper
    /// thread ([`StartingGl`]): the run opens its inputs and decodes the first band meanwhile.
    pub fn engine(&self, sequence: bool, input_bytes: Option<u64>) -> Result<EngineChoice> {
        choose_engine_with(
            self.backend,
            self.gl.is_given(),
            self.deep && !sequence,
            input_bytes,
            ContextStart::OnHelper,
        )
    }
}

/// Pick the engine for `backend`; `gl_options_given` is true when the caller set GL-only options
/// (layout, method, block size, pixel order, stage placement, statistics), which select GL under
/// `Auto` and are refused with `Cpu`; `deep_output` is whether the merge writes deep output,
/// which `Auto` weighs (the module docs), and `input_bytes` the size of its input files, which
/// `Auto` weighs where a run pays for its own context (the CLI: [`AUTO_GL_MIN_INPUT_BYTES`];
/// `None` for callers that keep a context for many merges, such as the Python module).
pub fn choose_engine(
    backend: Backend,
    gl_options_given: bool,
    deep_output: bool,
    input_bytes: Option<u64>,
) -> Result<EngineChoice> {
    choose_engine_with(
        backend,
        gl_options_given,
        deep_output,
        input_bytes,
        ContextStart::Now,
    )
}

/// [`choose_engine`], with the context of a GL choice made where `start` says.
pub fn choose_engine_with(
    backend: Backend,
    gl_options_given: bool,
    deep_output: bool,
    input_bytes: Option<u64>,
    start: ContextStart,
) -> Result<EngineChoice> {
    match backend {
        // `MergeRequest::check` refuses this in the front end's words first.
        Backend::Cpu if gl_options_given => Err(Error::Usage(
            "GPU options choose how the GPU merges; they do not apply to the CPU backend".into(),
        )),
        Backend::Cpu => Ok(EngineChoice::cpu("")),
        Backend::Gl => match start {
            ContextStart::Now => Ok(EngineChoice::gl(GlContext::new()?)),
            ContextStart::OnHelper => StartingGl::start().map(EngineChoice::gl_starting),
        },
        // Measured, not assumed: see the module docs.
        Backend::Auto if !gl_options_given => auto_engine(
            deep_output,
            rayon::current_num_threads(),
            input_bytes,
            auto_gl_min_input_bytes,
            start,
        ),
        Backend::Auto => auto_with_context(start),
    }
}

/// Why `Auto` runs a flat merge on the CPU engine, for the status line.
pub const AUTO_PICKS_CPU: &str = " (faster end to end than the GL engine for flat output, on llvmpipe and on an NVIDIA H100 host at 4 or more threads; --backend gl uses OpenGL)";

/// The fewest host threads at which `Auto` runs a deep merge on a GPU: on an NVIDIA H100 host
/// the GL engine was 1.24-1.9x faster end to end at 4, 8 and 16 threads, and even at 2 (two
/// runs, one each way); on 2026-11-27, once the CPU engine's bands grew with the threads, 1.2x
/// at 4, 1.09x at 8, level at 16 (1.28 s against 1.33 s, median of 3; 1.34 against 1.24, one
/// run) and at 2 (5.53 s against 5.24 s, one run).
pub const AUTO_GL_MIN_THREADS: usize = 4;

/// The most host threads at which `Auto` runs a deep merge on a GPU. Timed as whole processes
/// (the 1080p powerplant pair, medians of 3, `benches/hardware/contention.sh`) on an NVIDIA H200
/// host (2026-11-28, fourth run), the GL engine led at 4 threads (2.88 s against 3.13 s), was
/// level at 8 (1.56 s against 1.54 s) and behind at 12 (1.20 s against 1.13 s) and 16 (1.09 s
/// against 0.94 s); on an H100 host (2026-11-27) it led at 8 (1.65 s against 1.77 s) and was
/// level at 16 (1.21 s against 1.19 s). The end-to-end tables, which time the merge after the
/// GL context is made, had them level at 16. With more threads the CPU engine's merge spreads
/// over them while the GL engine's host side stays on one merging thread, so the GL engine's
/// gain is where host threads are few.
pub const AUTO_GL_MAX_THREADS: usize = 8;

/// The least size of input files for which `Auto` runs a deep merge from the CLI on a GPU. The
/// GL engine was measured faster on the 1080p powerplant pair (388 MB of ZIPS files, 51 M
/// samples), by 0.5-1.1 s at 4-16 threads on an NVIDIA H100 host; a process pays for its GL
/// context and shaders first (an H200's first GL process took 0.7 s longer than the next, whose
/// shaders the driver had cached), so a merge much smaller than the measured one is not known to
/// gain, and stays on the CPU engine. On an NVIDIA H200 host at 16 threads (2026-11-26, whole
/// processes, deep output) the two met between 102 MiB (CPU 0.46 s, GL 0.57 s with a warm shader
/// cache) and 370 MiB (CPU 2.12 s, GL 1.56 s), docs/benchmarks.md ("`auto`'s size bound").
/// `DEEPMERGE_AUTO_GL_MIN_BYTES` sets another bound (a number
/// of bytes, `0` for none, or a size with a unit, `64M`), for measuring where the two meet on a
/// GPU host.
pub const AUTO_GL_MIN_INPUT_BYTES: u64 = 256 << 20;

/// [`AUTO_GL_MIN_INPUT_BYTES`], or what `DEEPMERGE_AUTO_GL_MIN_BYTES` says: a plain number is
/// bytes (unlike `--memory-budget`, whose plain numbers are GiB), a number with a unit a size
/// as `--memory-budget` takes it.
pub(crate) fn auto_gl_min_input_bytes() -> Result<u64> {
    let text = match std::env::var("DEEPMERGE_AUTO_GL_MIN_BYTES") {
        Ok(text) if !text.trim().is_empty() => text,
        _ => return Ok(AUTO_GL_MIN_INPUT_BYTES),
    };
    crate::size::parse_bytes(&text).map_err(|why| {
        Error::Usage(format!(
            "DEEPMERGE_AUTO_GL_MIN_BYTES={text}: {why} (a number of bytes, or a size such as 64M)"
        ))
    })
}

/// `Auto` without GPU options, for a merge whose output is deep (`deep_output`) on `threads`
/// host threads, of `input_bytes` of input files where known: the GL engine on a GPU of its own
/// where the hardware tables have it faster (deep output, [`AUTO_GL_MIN_THREADS`] to
/// [`AUTO_GL_MAX_THREADS`] threads, inputs of `min_bytes()` or more where their size is given;
/// the bound is read only then), else the CPU engine; either way with the reason for the status
/// line. Never a software rasteriser: there the CPU engine is faster. A GPU that gives no
/// context leaves the merge on the CPU engine and says why.
fn auto_engine(
    deep_output: bool,
    threads: usize,
    input_bytes: Option<u64>,
    min_bytes: impl FnOnce() -> Result<u64>,
    start: ContextStart,
) -> Result<EngineChoice> {
    if !deep_output {
        return Ok(EngineChoice::cpu(AUTO_PICKS_CPU));
    }
    if threads < AUTO_GL_MIN_THREADS {
        return Ok(EngineChoice::cpu(format!(
            " (deep output on {threads} host threads, where the engines measured even on an NVIDIA H100 host; the GL engine leads from {AUTO_GL_MIN_THREADS}: --backend gl uses OpenGL)"
        )));
    }
    if threads > AUTO_GL_MAX_THREADS {
        return Ok(EngineChoice::cpu(format!(
            " (deep output on {threads} host threads, where the CPU engine measured as fast as the GL engine or faster, whole processes on NVIDIA H100 and H200 hosts; the GL engine leads from {AUTO_GL_MIN_THREADS} to {AUTO_GL_MAX_THREADS}: --backend gl uses OpenGL)"
        )));
    }
    if let Some(bytes) = input_bytes {
        let min_bytes = min_bytes()?;
        if bytes < min_bytes {
            let mib = |b: u64| format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64);
            return Ok(EngineChoice::cpu(format!(
                " (deep output of {} of input files, under the {} from which the GL engine runs: it was measured faster on larger merges, and a smaller one may not win back its start-up, a GL context and its shaders; --backend gl uses OpenGL)",
                mib(bytes),
                mib(min_bytes)
            )));
        }
    }
    let no_gpu = |why: String| EngineChoice::cpu(no_gpu_reason(&why));
    let because = format!(
        " (auto: deep output on {threads} host threads with a GPU, where the GL engine measured faster end to end)"
    );
    Ok(match GlContext::software_only() {
        Ok(Some(name)) => no_gpu(format!(
            "the only GL device is the software rasteriser {name}, where the CPU engine is faster"
        )),
        Err(e) => no_gpu(format!("EGL lists no GL device ({e})")),
        // The context is made while the run opens its inputs; a GPU that then gives none, or
        // only llvmpipe's, leaves the merge on the CPU engine (`StartingGl::for_merge`).
        Ok(None) if start == ContextStart::OnHelper => match StartingGl::start_or_cpu() {
            Ok(starting) => EngineChoice::gl_starting_because(starting, because),
            Err(e) => no_gpu(format!("the GL context could not be started ({e})")),
        },
        Ok(None) => match GlContext::new() {
            Ok(ctx) if !ctx.info().software => EngineChoice::gl_because(ctx, because),
            Ok(ctx) => no_gpu(format!(
                "the GL context came from the software rasteriser {}",
                ctx.info().renderer
            )),
            Err(e) => no_gpu(format!("the GPU gave no GL context ({e})")),
        },
    })
}

/// `Auto` with GPU options given: GL (a software rasteriser too, as the options ask for it), or
/// an error naming why there is none; the context made where `start` says (the CLI's on a
/// helper thread, as `--backend gl`'s: `deepmerge a.exr b.exr --layout bia` is such a run).
fn auto_with_context(start: ContextStart) -> Result<EngineChoice> {
    const WHY: &str = "GPU options were given";
    match start {
        ContextStart::Now => GlContext::new()
            .map(EngineChoice::gl)
            .map_err(|e| no_context_for(WHY, &e)),
        ContextStart::OnHelper => {
            StartingGl::start().map(|starting| EngineChoice::gl_starting(starting.needed_for(WHY)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU choices make no context, and what a merge borrows from them is the CPU engine:
    /// `Cpu` gives no reason for the status line, `Auto` without GPU options says why.
    #[test]
    fn cpu_choices_lend_the_cpu_engine() {
        let asked = choose_engine(Backend::Cpu, false, false, None).unwrap();
        assert!(asked.context().is_none());
        assert_eq!(asked.cpu_reason(), "");
        assert!(matches!(
            asked.merging(crate::gpu::GlOptions::default()),
            MergeEngine::Cpu
        ));
        assert_eq!(asked.name(), "cpu");
        let auto = choose_engine(Backend::Auto, false, false, None).unwrap();
        assert!(auto.context().is_none());
        assert_eq!(auto.cpu_reason(), AUTO_PICKS_CPU);
        assert_eq!(auto.name(), "cpu");
        // Deep output on fewer threads than the GL engine leads from, or more than it leads
        // to: the CPU engine, before EGL is asked anything.
        let bound = || Ok(AUTO_GL_MIN_INPUT_BYTES);
        for (threads, why) in [
            (AUTO_GL_MIN_THREADS - 1, "where the engines measured even"),
            (
                AUTO_GL_MAX_THREADS + 1,
                "where the CPU engine measured as fast",
            ),
        ] {
            let choice = auto_engine(true, threads, None, bound, ContextStart::Now).unwrap();
            assert!(choice.context().is_none());
            assert!(
                choice
                    .cpu_reason()
                    .starts_with(&format!(" (deep output on {threads} host threads, {why}")),
                "{}",
                choice.cpu_reason()
            );
        }
        // Deep output from input files smaller than the GL engine was measured faster on: the
        // CPU engine, before EGL is asked anything.
        let small = auto_engine(
            true,
            AUTO_GL_MIN_THREADS,
            Some(30 << 20),
            bound,
            ContextStart::Now,
        )
        .unwrap();
        assert!(small.context().is_none());
        assert!(
            small
                .cpu_reason()
                .starts_with(" (deep output of 30 MiB of input files, under the 256 MiB"),
            "{}",
            small.cpu_reason()
        );
    }

    /// GPU options with the CPU backend are refused, not ignored.
    #[test]
    fn gpu_options_on_the_cpu_backend_are_refused() {
        assert!(matches!(
            choose_engine(Backend::Cpu, true, false, None),
            Err(Error::Usage(_))
        ));
    }
}
