//! A GL context made on a helper thread while the merging thread gets on with the inputs.
//!
//! Making a context costs a process 64-77 ms on an NVIDIA H100 host (the driver loaded, the
//! device opened; `DEEPMERGE_TIMELINE`), before a single input was opened: a fifth of a 1080p
//! flat merge. The context is made and released on a helper ([`GlContext::release`]) while the
//! merging thread opens the inputs, reads their counts, plans the bands and the reader decodes
//! the first one; the merging thread makes it current where it first needs it
//! ([`StartingGl::get`]). The band plan needs only whether the device is a software rasteriser,
//! which the helper tells as soon as EGL has listed the devices ([`StartingGl::software`]).
//!
//! Should the device tried first fail and the context come from the next one (a GPU listed but
//! unusable, then llvmpipe), the bands were planned for the first: the merge is the same, only
//! its bands may be larger than that device's defaults would make them, within the host budget,
//! and overlapped (as on a GPU) where that device would finish each band first.

use std::cell::{OnceCell, RefCell};
use std::sync::mpsc::{channel, Receiver};
use std::thread::JoinHandle;

use super::context::Released;
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
    helper: RefCell<Option<JoinHandle<Result<Released>>>>,
    ready: OnceCell<GlContext>,
    /// Why the context could not be made, once known (said again to every later caller).
    failed: OnceCell<String>,
}

impl StartingGl {
    /// Start making a context on a helper thread (strict mode as `DEEPMERGE_GL_STRICT` says). A
    /// bad `DEEPMERGE_GL_*` setting is refused here, on this thread.
    pub fn start() -> Result<StartingGl> {
        let strict = super::strict::strict_from_env();
        let settings = EnvSettings::from_env()?;
        let (tell, listed) = channel();
        let helper = std::thread::Builder::new()
            .name("gl-start".into())
            .spawn(move || {
                let made = GlContext::new_listed(strict, settings, |software| {
                    let _ = tell.send(software);
                })?;
                made.release()
            })
            .map_err(|e| Error::Gl(format!("cannot start a thread to make the GL context: {e}")))?;
        Ok(StartingGl {
            settings,
            software: OnceCell::new(),
            listed,
            helper: RefCell::new(Some(helper)),
            ready: OnceCell::new(),
            failed: OnceCell::new(),
        })
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
        let released = match helper {
            Some(helper) => {
                let _span = crate::timeline::span(|| "wait for the GL context".into());
                helper.join().unwrap_or_else(|_| {
                    Err(Error::internal("the thread making the GL context panicked"))
                })
            }
            None => Err(Error::internal("the GL context was taken twice")),
        };
        match released.and_then(|released| self.adopt(released)) {
            Ok(ctx) => Ok(self.ready.get_or_init(|| ctx)),
            Err(e) => {
                // Said again as the same GL error (its message, not "OpenGL: " twice).
                let why = match &e {
                    Error::Gl(why) => why.clone(),
                    other => other.to_string(),
                };
                let _ = self.failed.set(why);
                Err(e)
            }
        }
    }

    /// The context once [`Self::get`] has made it, without waiting.
    pub fn ready(&self) -> Option<&GlContext> {
        self.ready.get()
    }

    /// `released` made current here; a driver that will not move a context between threads
    /// gets a new one made on this thread instead.
    fn adopt(&self, released: Released) -> Result<GlContext> {
        let _span = crate::timeline::span(|| "make the GL context current".into());
        let strict = released.strict();
        GlContext::adopt(released, self.settings).or_else(|moved| {
            GlContext::new_listed(strict, self.settings, |_| {})
                .map_err(|e| Error::Gl(format!("{moved}; made on this thread instead: {e}")))
        })
    }
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
