//! A GL context made on a helper thread while the merging thread gets on with the inputs.
//!
//! Making a context costs a process 64-77 ms on an NVIDIA H100 host (the driver loaded, the
//! device opened; `DEEPMERGE_TIMELINE`), before a single input was opened: a fifth of a 1080p
//! flat merge. The context is made on a helper ([`GlContext::new_unbound`]) while the merging
//! thread opens the inputs, reads their counts, plans the bands and the reader decodes the first
//! one; the merging thread makes it current where it first needs it ([`StartingGl::get`]). The
//! helper never binds it: on NVIDIA hosts a context's first binding on a thread cost 26-41 ms,
//! and the helper's binding (to check the device) put that cost twice before the first band.
//! The band plan needs only whether the device is a software rasteriser, which the helper tells
//! as soon as EGL has listed the devices ([`StartingGl::software`]).
//!
//! Should the device tried first fail and the context come from the next one (a GPU listed but
//! unusable, then llvmpipe), the bands were planned for the first: the merge is the same, only
//! its bands may be larger than that device's defaults would make them, within the host budget,
//! and overlapped (as on a GPU) where that device would finish each band first.

use std::cell::{OnceCell, RefCell};
use std::sync::mpsc::{channel, Receiver};
use std::thread::JoinHandle;

use super::context::Unbound;
use super::mapped::EnvSettings;
use super::{GlContext, GlOptions};
use crate::error::{Error, Result};

/// A GL context in the making on a helper thread ([`Self::start`]), made current on this thread
/// on first use ([`Self::get`]).
pub struct StartingGl {
    settings: EnvSettings,
    /// Whether the device tried first is a software rasteriser, once the helper has listed them.
    software: OnceCell<bool>,
    listed: Receiver<bool>,
    helper: RefCell<Option<JoinHandle<Result<Unbound>>>>,
    ready: OnceCell<GlContext>,
    /// Why the context could not be made, once known (said again to every later caller).
    failed: OnceCell<String>,
    /// Whether a context that cannot be made, or comes from a software rasteriser, leaves the
    /// merge on the CPU engine instead of failing it (`--backend auto`: [`Self::start_or_cpu`]).
    falls_back: bool,
    /// Why the merge fell back to the CPU engine, once it has.
    fell_back: OnceCell<String>,
    /// What asked for GL, said in the error when no context can be made
    /// ([`Self::needed_for`]).
    needed_for: Option<&'static str>,
}

impl StartingGl {
    /// Start making a context on a helper thread (strict mode as `DEEPMERGE_GL_STRICT` says). A
    /// bad `DEEPMERGE_GL_*` setting is refused here, on this thread.
    pub fn start() -> Result<StartingGl> {
        Self::start_with(false, GlContext::new_unbound)
    }

    /// [`Self::start`] for `--backend auto`, which chose the GL engine because EGL lists a GPU:
    /// should that GPU give no context, or the context come from a software rasteriser (the
    /// GPU failed and EGL's next device was llvmpipe), the merge runs on the CPU engine, as
    /// `auto` would have chosen knowing it ([`Self::for_merge`], [`Self::fell_back`]).
    pub fn start_or_cpu() -> Result<StartingGl> {
        Self::start_with(true, GlContext::new_unbound)
    }

    /// A start whose helper fails with `why` before EGL lists anything, as a GPU whose driver
    /// gives no context does; `falls_back` as [`Self::start_or_cpu`]. For the tests of what a
    /// merge does then, which no working device can show.
    #[doc(hidden)]
    pub fn failing(why: &'static str, falls_back: bool) -> Result<StartingGl> {
        Self::start_with(falls_back, move |_, _, _: Box<dyn FnOnce(bool)>| {
            Err(Error::Gl(why.into()))
        })
    }

    /// Start `make` (a context maker as [`GlContext::new_unbound`]) on the helper thread.
    fn start_with<M>(falls_back: bool, make: M) -> Result<StartingGl>
    where
        M: FnOnce(bool, EnvSettings, Box<dyn FnOnce(bool)>) -> Result<Unbound> + Send + 'static,
    {
        let strict = super::strict::strict_from_env();
        let settings = EnvSettings::from_env()?;
        let (tell, listed) = channel();
        let helper = std::thread::Builder::new()
            .name("gl-start".into())
            .spawn(move || {
                let tell: Box<dyn FnOnce(bool)> = Box::new(move |software| {
                    let _ = tell.send(software);
                });
                make(strict, settings, tell)
            })
            .map_err(|e| Error::Gl(format!("cannot start a thread to make the GL context: {e}")))?;
        Ok(StartingGl {
            settings,
            software: OnceCell::new(),
            listed,
            helper: RefCell::new(Some(helper)),
            ready: OnceCell::new(),
            failed: OnceCell::new(),
            falls_back,
            fell_back: OnceCell::new(),
            needed_for: None,
        })
    }

    /// This start, whose failure says what asked for GL: "`what` but no GL context can be made
    /// (why)" (`--backend auto` with GPU options, which asks for GL without naming it).
    pub fn needed_for(mut self, what: &'static str) -> StartingGl {
        self.needed_for = Some(what);
        self
    }

    /// The context a merge runs on: [`Self::get`]'s, except that a start that falls back
    /// ([`Self::start_or_cpu`]) gives `None`, the CPU engine, where the context could not be
    /// made or came from a software rasteriser.
    pub fn for_merge(&self) -> Result<Option<&GlContext>> {
        if self.fell_back.get().is_some() {
            return Ok(None);
        }
        let why = match self.get() {
            Ok(ctx) if !(self.falls_back && ctx.info().software) => return Ok(Some(ctx)),
            Ok(ctx) => format!(
                "the GL context came from the software rasteriser {}",
                ctx.info().renderer
            ),
            Err(e) if self.falls_back => format!("the GPU gave no GL context ({e})"),
            Err(e) => return Err(e),
        };
        let _ = self.fell_back.set(why);
        Ok(None)
    }

    /// Why the merge runs on the CPU engine after all, once [`Self::for_merge`] has found that
    /// it must.
    pub fn fell_back(&self) -> Option<&str> {
        self.fell_back.get().map(String::as_str)
    }

    /// Whether the context will be a software rasteriser's (the device tried first; see the
    /// module docs), as [`super::GlInfo::software`] says once it is made. Waits only for EGL's
    /// device list; `false` when the helper failed before it (then [`Self::get`] says why).
    pub fn software(&self) -> bool {
        if let Some(ctx) = self.ready.get() {
            return ctx.info().software;
        }
        *self.software.get_or_init(|| {
            let _span = crate::timeline::span(|| "wait for EGL's device list".into());
            self.listed.recv().unwrap_or(false)
        })
    }

    /// Whether a streamed merge with `gl` overlaps its bands on this context
    /// ([`GlOptions::overlaps_bands`]), before the context is made.
    pub fn overlaps_bands(&self, gl: &GlOptions) -> bool {
        match self.ready.get() {
            Some(ctx) => gl.overlaps_bands(ctx),
            None => gl.overlaps_bands_given(self.settings.overlap, self.software()),
        }
    }

    /// The context, current on this thread: the first call waits for the helper and makes it
    /// current here.
    pub fn get(&self) -> Result<&GlContext> {
        if let Some(ctx) = self.ready.get() {
            return Ok(ctx);
        }
        if let Some(why) = self.failed.get() {
            return Err(Error::Gl(why.clone()));
        }
        let helper = self.helper.borrow_mut().take();
        let unbound = match helper {
            Some(helper) => {
                let _span = crate::timeline::span(|| "wait for the GL context".into());
                helper.join().unwrap_or_else(|_| {
                    Err(Error::internal("the thread making the GL context panicked"))
                })
            }
            None => Err(Error::internal("the GL context was taken twice")),
        };
        match unbound.and_then(|unbound| self.adopt(unbound)) {
            Ok(ctx) => Ok(self.ready.get_or_init(|| ctx)),
            Err(e) => {
                // Said again as the same GL error (its message, not "OpenGL: " twice).
                let e = match self.needed_for {
                    Some(what) => no_context_for(what, &e),
                    None => e,
                };
                let why = gl_message(&e);
                let _ = self.failed.set(why);
                Err(e)
            }
        }
    }

    /// The context once [`Self::get`] has made it, without waiting.
    pub fn ready(&self) -> Option<&GlContext> {
        self.ready.get()
    }

    /// `unbound` made current here. Where that fails (a driver that will not move a context
    /// between threads, a device whose context cannot be bound or lacks what the engine needs)
    /// a context is made on this thread instead, from the best device that gives one.
    fn adopt(&self, unbound: Unbound) -> Result<GlContext> {
        let _span = crate::timeline::span(|| "make the GL context current".into());
        let strict = unbound.strict();
        GlContext::adopt(unbound, self.settings).or_else(|first| {
            GlContext::new_listed(strict, self.settings, |_| {}).map_err(|e| {
                Error::Gl(format!(
                    "the context made on a helper thread failed here ({}); none made on this \
                     thread either: {}",
                    gl_message(&first),
                    gl_message(&e)
                ))
            })
        })
    }
}

/// What `e` says, without the "OpenGL: " a GL error's display puts in front, for a message
/// that quotes it inside another GL error.
fn gl_message(e: &Error) -> String {
    match e {
        Error::Gl(why) => why.clone(),
        other => other.to_string(),
    }
}

/// The error of a context that `what` asked for and that could not be made (`e`): "`what` but
/// no GL context can be made (e)", made at once or on the helper ([`StartingGl::needed_for`]).
pub(crate) fn no_context_for(what: &str, e: &Error) -> Error {
    Error::Gl(format!("{what} but no GL context can be made ({e})"))
}

impl Drop for StartingGl {
    /// A context never asked for (the run failed first) is waited for, so that the process
    /// does not end while the helper is inside the driver; it is deleted with the helper's
    /// result.
    fn drop(&mut self) {
        if let Some(helper) = self.helper.get_mut().take() {
            let _ = helper.join();
        }
    }
}
