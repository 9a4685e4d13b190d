//! The headless OpenGL context (docs/architecture.md, "The GL engine"): EGL device platform, no
//! surface, core 4.3+.
//!
//! A context is current on the thread that made it; [`GlContext`] is therefore neither `Send`
//! nor `Sync`. The tests share one per test binary on a dedicated GL thread
//! (`tests/gpu_common`); a long-lived user keeps one on a dedicated thread the same way.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;

use glow::HasContext;
use glutin::api::egl::context::{NotCurrentContext, PossiblyCurrentContext};
use glutin::api::egl::device::Device;
use glutin::api::egl::display::Display;
use glutin::config::{ConfigSurfaceTypes, ConfigTemplateBuilder};
use glutin::context::{ContextApi, ContextAttributesBuilder, GlProfile, Version};
use glutin::display::{GetGlDisplay, GlDisplay};

use crate::error::{Error, Result};

/// What the GL implementation is and the limits the engine depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlInfo {
    /// GL_VENDOR.
    pub vendor: String,
    /// GL_RENDERER (e.g. `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub renderer: String,
    /// GL_VERSION.
    pub version: String,
    /// GL_SHADING_LANGUAGE_VERSION.
    pub glsl_version: String,
    /// True when the EGL device is a software rasteriser (`EGL_MESA_device_software`), or
    /// `DEEPMERGE_GL_DEFAULTS=software` gives it a software rasteriser's defaults (`hardware`:
    /// a GPU's). The engine's defaults follow this, not the device.
    pub software: bool,
    /// True on a software rasteriser's device (`EGL_MESA_device_software`) or a renderer named
    /// llvmpipe or softpipe (lavapipe under zink too), whatever the defaults: Mesa's gallivm ends
    /// an invocation's loops silently after 65535 iterations in all, so the engine leaves bands
    /// with very long lists to the CPU engine ([`super::loop_cap`]); any software rasteriser is
    /// counted, to be safe.
    pub loops_capped: bool,
    /// GL_MAX_SHADER_STORAGE_BLOCK_SIZE in bytes: the most one bound buffer range may hold.
    pub max_ssbo_bytes: u64,
    /// GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS.
    pub max_compute_ssbo_bindings: u32,
    /// GL_MAX_COMPUTE_SHARED_MEMORY_SIZE in bytes.
    pub max_shared_memory_bytes: u32,
    /// GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS.
    pub max_invocations: u32,
    /// GL_MAX_COMPUTE_WORK_GROUP_COUNT (x, y, z).
    pub max_group_count: [u32; 3],
    /// GL_MAX_COMPUTE_WORK_GROUP_SIZE (x, y, z).
    pub max_group_size: [u32; 3],
    /// Whether buffers can have persistently mapped storage (GL 4.4 or
    /// `GL_ARB_buffer_storage`), which mapped transfers need (`mapped.rs`).
    pub buffer_storage: bool,
}

impl fmt::Display for GlInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "vendor:    {}", self.vendor)?;
        writeln!(
            f,
            "renderer:  {}{}",
            self.renderer,
            if self.software { " (software)" } else { "" }
        )?;
        writeln!(
            f,
            "version:   {} (GLSL {})",
            self.version, self.glsl_version
        )?;
        writeln!(
            f,
            "max shader storage block: {} MiB",
            self.max_ssbo_bytes >> 20
        )?;
        writeln!(
            f,
            "max compute SSBO bindings: {}",
            self.max_compute_ssbo_bindings
        )?;
        writeln!(
            f,
            "max compute shared memory: {} KiB",
            self.max_shared_memory_bytes >> 10
        )?;
        writeln!(
            f,
            "max work group invocations: {}, size {:?}, count {:?}",
            self.max_invocations, self.max_group_size, self.max_group_count
        )?;
        writeln!(
            f,
            "buffer storage (mapped transfers): {}",
            if self.buffer_storage { "yes" } else { "no" }
        )
    }
}

/// A context made on one thread and current on none ([`GlContext::new_unbound`]), for another
/// to make current ([`GlContext::adopt`]): an EGL context not current anywhere may move between
/// threads.
pub(crate) struct Unbound {
    context: NotCurrentContext,
    display: Display,
    software: bool,
    strict: bool,
}

impl Unbound {
    /// Whether the context was made in strict mode.
    pub(crate) fn strict(&self) -> bool {
        self.strict
    }
}

/// A current, surfaceless GL context with a cache of compiled programs.
pub struct GlContext {
    /// The GL function table.
    pub gl: glow::Context,
    info: GlInfo,
    /// Programs by (stage file, define set); see `program.rs`.
    pub(crate) programs: RefCell<HashMap<String, glow::Program>>,
    /// A storage-block limit lower than the driver's, to test what happens when a buffer does
    /// not fit ([`GlContext::limit_storage_block`]).
    storage_limit: Cell<Option<u64>>,
    /// Timer queries of per-stage profiling (`profile.rs`).
    pub(crate) profiler: RefCell<super::profile::Profiler>,
    /// The stage of the program last made current (`use_stage`), which `dispatch` times.
    pub(crate) current_stage: Cell<&'static str>,
    /// Bytes the next dispatch reads and writes at least, set by the caller (0: unknown).
    pub(crate) next_dispatch_bytes: Cell<u64>,
    /// Buffers given back for reuse (`pool.rs`).
    pub(crate) pool: super::pool::BufferPool,
    /// The fences pooled buffers are released with (`fence.rs`).
    pub(crate) fences: super::fence::ReleaseFences,
    /// Mapped staging and readback buffers, and the transfer path (`mapped.rs`).
    pub(crate) mapped: super::mapped::MappedPool,
    /// Strict mode's checks (`strict.rs`), when on.
    pub(crate) strict: Option<super::strict::Strict>,
    /// The program made current last, whose storage blocks a dispatch touches.
    pub(crate) current_program: Cell<Option<glow::Program>>,
    /// The buffer bound to each indexed storage binding the engine uses, so that a buffer going
    /// back to the pool is unbound (`buffer.rs`, `GlContext::unbind_everywhere`).
    pub(crate) storage_bindings: RefCell<Vec<Option<glow::Buffer>>>,
    /// `glBufferData` itself, for buffers over host memory given by pointer
    /// (`gpu::gather`'s planes read in place), which glow takes only as a slice.
    pub(crate) buffer_data_raw: Option<BufferDataFn>,
    // Kept alive (and current) as long as the function table is used; `None` when the caller
    // owns the context (a window's, see [`GlContext::from_current`]).
    _owned: Option<(PossiblyCurrentContext, Display)>,
}

/// `glBufferData`'s signature.
pub(crate) type BufferDataFn = unsafe extern "system" fn(u32, isize, *const std::ffi::c_void, u32);

impl GlContext {
    /// Check that a buffer of `bytes` can be bound as one storage block (`what` names it):
    /// [`Error::GlMemory`] when it cannot, which the GL merge answers with smaller bands.
    pub fn check_fits(&self, bytes: usize, what: &str) -> Result<()> {
        let mut max = self.info().max_ssbo_bytes;
        if let Some(limit) = self.storage_limit.get() {
            max = max.min(limit);
        }
        if bytes as u64 > max {
            return Err(Error::GlMemory(format!(
                "{what} needs {bytes} bytes in one buffer, more than GL_MAX_SHADER_STORAGE_BLOCK_SIZE ({max}); use smaller bands"
            )));
        }
        Ok(())
    }

    /// Make a context on the best EGL device: a hardware one (no `EGL_MESA_device_software`)
    /// where present, else the software rasteriser. Strict mode (`strict.rs`) is on when
    /// `DEEPMERGE_GL_STRICT=1` is set.
    pub fn new() -> Result<GlContext> {
        Self::new_with(super::strict::strict_from_env())
    }

    /// [`Self::new`] with strict mode on or off (`strict`: a debug context, the hazard checker,
    /// poison and every GL error a failure), whatever the environment says.
    pub fn new_with(strict: bool) -> Result<GlContext> {
        // A bad measurement variable (`DEEPMERGE_GL_*`) is the user's to fix, whatever the
        // device: say so first rather than that no device would do.
        let settings = super::mapped::EnvSettings::from_env()?;
        Self::new_listed(strict, settings, |_| {})
    }

    /// [`Self::new_with`] with the `DEEPMERGE_GL_*` settings read; `listed` hears, once EGL has
    /// listed the devices and before any context is made, whether the device tried first is a
    /// software rasteriser (as [`GlInfo::software`] would say, `DEEPMERGE_GL_DEFAULTS`
    /// included): what a band plan made while the context is still in the making needs
    /// (`starting.rs`).
    pub(crate) fn new_listed(
        strict: bool,
        settings: super::mapped::EnvSettings,
        listed: impl FnOnce(bool),
    ) -> Result<GlContext> {
        let _span = crate::timeline::span(|| "GL context".into());
        Self::on_best_device(settings, listed, |device| {
            let made = Self::make_on_device(device, strict)?;
            Self::adopt(made, settings).map_err(|e| e.to_string())
        })
    }

    /// A context made as [`Self::new_listed`] makes it but never made current, for another
    /// thread to [`Self::adopt`] (`starting.rs`). On an NVIDIA host the first binding of a
    /// context on a thread costs 26-41 ms (`DEEPMERGE_TIMELINE`, H100 and H200): made on a
    /// helper and bound there as well as on the merging thread, the context cost that twice,
    /// once on the merging thread's path. A device whose context then cannot be bound or lacks
    /// what the engine needs is found by [`Self::adopt`], whose caller makes one afresh.
    pub(crate) fn new_unbound(
        strict: bool,
        settings: super::mapped::EnvSettings,
        listed: impl FnOnce(bool),
    ) -> Result<Unbound> {
        let _span = crate::timeline::span(|| "GL context".into());
        Self::on_best_device(settings, listed, |device| {
            Self::make_on_device(device, strict)
        })
    }

    /// `make` on the best EGL device that gives what it asks: hardware ones (no
    /// `EGL_MESA_device_software`) first, then the software rasteriser; `listed` as
    /// [`Self::new_listed`] says.
    fn on_best_device<T>(
        settings: super::mapped::EnvSettings,
        listed: impl FnOnce(bool),
        make: impl Fn(&Device) -> std::result::Result<T, String>,
    ) -> Result<T> {
        let devices: Vec<Device> = Device::query_devices()
            .map_err(|e| {
                Error::Gl(format!(
                    "no EGL devices ({e}); install libegl1 and libgl1-mesa-dri (llvmpipe) or a GPU driver"
                ))
            })?
            .collect();
        if devices.is_empty() {
            return Err(Error::Gl(
                "EGL lists no devices; install libgl1-mesa-dri (llvmpipe) or a GPU driver".into(),
            ));
        }
        let is_software = |d: &Device| d.extensions().contains("EGL_MESA_device_software");
        let mut ordered: Vec<&Device> = devices.iter().filter(|d| !is_software(d)).collect();
        ordered.extend(devices.iter().filter(|d| is_software(d)));
        listed(
            settings
                .software_defaults
                .unwrap_or_else(|| ordered.first().is_some_and(|d| is_software(d))),
        );
        let mut failures = Vec::new();
        for device in ordered {
            match make(device) {
                Ok(made) => return Ok(made),
                Err(e) => failures.push(format!(
                    "{}: {e}",
                    device.name().or(device.vendor()).unwrap_or("device")
                )),
            }
        }
        Err(Error::Gl(format!(
            "no EGL device gave a core 4.3 context with compute shaders ({})",
            failures.join("; ")
        )))
    }

    /// What EGL lists, without opening a display or making a context (the cheap question
    /// `--backend auto` asks first): `Ok(None)` when a hardware device is listed, else
    /// `Ok(Some(name))` with the software rasteriser's name (Mesa's is `llvmpipe`), or why
    /// EGL lists nothing. `DEEPMERGE_GL_DEFAULTS` answers as it sets the defaults: `hardware`
    /// counts every device as a GPU (so that `--backend auto`'s GPU path runs on llvmpipe in the
    /// tests), `software` none.
    pub fn software_only() -> Result<Option<String>> {
        let settings = super::mapped::EnvSettings::from_env()?;
        let devices: Vec<Device> = Device::query_devices()
            .map_err(|e| Error::Gl(format!("no EGL devices ({e})")))?
            .collect();
        let is_software = |d: &Device| {
            settings
                .software_defaults
                .unwrap_or_else(|| d.extensions().contains("EGL_MESA_device_software"))
        };
        if devices.iter().any(|d| !is_software(d)) {
            return Ok(None);
        }
        match devices.first() {
            Some(d) => Ok(Some(
                d.name().or(d.vendor()).unwrap_or("llvmpipe").to_string(),
            )),
            None => Err(Error::Gl("EGL lists no devices".into())),
        }
    }

    /// A core context of the highest version `device` gives, made and not yet current.
    fn make_on_device(device: &Device, strict: bool) -> std::result::Result<Unbound, String> {
        // SAFETY: no raw display handle is passed, so glutin opens the device itself.
        let display = unsafe { Display::with_device(device, None) }.map_err(|e| e.to_string())?;
        // The default template asks for window surfaces and finds no config on a device display.
        let template = ConfigTemplateBuilder::new()
            .with_surface_type(ConfigSurfaceTypes::empty())
            .build();
        // SAFETY: the template is plain data; the display stays alive in the returned context.
        let config = unsafe { display.find_configs(template) }
            .map_err(|e| e.to_string())?
            .next()
            .ok_or("no surfaceless config")?;
        // The highest core version the driver gives (NVIDIA offers 4.6; 4.4 brings buffer
        // storage for mapped transfers), down to the 4.3 the compute stages need.
        let mut created = Err(String::new());
        for minor in [6, 5, 4, 3] {
            let attributes = ContextAttributesBuilder::new()
                .with_profile(GlProfile::Core)
                .with_context_api(ContextApi::OpenGl(Some(Version::new(4, minor))))
                .with_debug(strict)
                .build(None);
            // SAFETY: the config came from this display.
            created =
                unsafe { display.create_context(&config, &attributes) }.map_err(|e| e.to_string());
            if created.is_ok() {
                break;
            }
        }
        let software = device.extensions().contains("EGL_MESA_device_software");
        Ok(Unbound {
            context: created?,
            display,
            software,
            strict,
        })
    }

    /// Make a context just made, here or on another thread ([`Self::new_unbound`]), current on
    /// this one with the `DEEPMERGE_GL_*` settings `settings` (the driver is loaded and the
    /// context made: what is left is binding it, this thread's function table and the
    /// queries). `unbound.software` is the device's; `DEEPMERGE_GL_DEFAULTS` in `settings`
    /// overrides it here as it did for `listed`.
    pub(crate) fn adopt(
        unbound: Unbound,
        settings: super::mapped::EnvSettings,
    ) -> Result<GlContext> {
        let Unbound {
            context,
            display,
            software,
            strict,
        } = unbound;
        // Timed apart: on NVIDIA H100 and H200 hosts binding is what costs (26-41 ms on a
        // thread, the first time), loading the functions and asking the device about 1 ms.
        let span = crate::timeline::span(|| "bind the GL context to this thread".into());
        let context = context
            .make_current_surfaceless()
            .map_err(|e| Error::Gl(format!("cannot make the GL context current: {e}")))?;
        drop(span);
        let _span = crate::timeline::span(|| "load GL's functions, ask the device".into());
        let gl_display = context.display();
        // SAFETY: the context is current on this thread and the loader is the display's own.
        let mut made = unsafe {
            Self::from_current_settings(
                |name| gl_display.get_proc_address(name),
                software,
                strict,
                settings,
            )
        }?;
        made._owned = Some((context, display));
        Ok(made)
    }

    /// The engine on a context someone else made and owns, current on this thread (the viewer's
    /// window context): `loader` resolves GL functions, `software` says whether it is a software
    /// rasteriser. Refuses contexts without the storage buffers the engine binds. Strict mode
    /// as `DEEPMERGE_GL_STRICT` says.
    ///
    /// # Safety
    /// The context must be current on this thread, be core 4.3 or later, and outlive the
    /// returned value (which deletes its programs on drop, with the context still current).
    pub unsafe fn from_current(
        loader: impl FnMut(&std::ffi::CStr) -> *const std::ffi::c_void,
        software: bool,
    ) -> Result<GlContext> {
        Self::from_current_with(loader, software, super::strict::strict_from_env())
    }

    /// [`Self::from_current`] with strict mode on or off.
    ///
    /// # Safety
    /// As [`Self::from_current`].
    pub unsafe fn from_current_with(
        loader: impl FnMut(&std::ffi::CStr) -> *const std::ffi::c_void,
        software: bool,
        strict: bool,
    ) -> Result<GlContext> {
        let settings = super::mapped::EnvSettings::from_env()?;
        Self::from_current_settings(loader, software, strict, settings)
    }

    /// [`Self::from_current_with`] with the `DEEPMERGE_GL_*` settings already read.
    ///
    /// # Safety
    /// As [`Self::from_current`].
    unsafe fn from_current_settings(
        loader: impl FnMut(&std::ffi::CStr) -> *const std::ffi::c_void,
        software: bool,
        strict: bool,
        settings: super::mapped::EnvSettings,
    ) -> Result<GlContext> {
        let mut loader = loader;
        let buffer_data = loader(c"glBufferData");
        // SAFETY: the loader's glBufferData has this signature; null is no function.
        let buffer_data_raw = (!buffer_data.is_null())
            .then(|| std::mem::transmute::<*const std::ffi::c_void, BufferDataFn>(buffer_data));
        let mut gl = glow::Context::from_loader_function_cstr(loader);
        let strict = strict.then(super::strict::Strict::default);
        if let Some(s) = &strict {
            Self::enable_debug_output(&mut gl, s.debug_messages.clone());
        }
        // A device takes the defaults of its kind, unless DEEPMERGE_GL_DEFAULTS says otherwise.
        let info = query_info(
            &gl,
            settings.software_defaults.unwrap_or(software),
            software,
        );
        // A deep merge binds two inputs and an output of five buffers each (`glsl/include/image.glsl`).
        if info.max_compute_ssbo_bindings < 15 {
            return Err(Error::Gl(format!(
                "{} offers {} storage buffers per compute shader; 15 are needed",
                info.renderer, info.max_compute_ssbo_bindings
            )));
        }
        let context = GlContext {
            gl,
            info,
            programs: RefCell::new(HashMap::new()),
            storage_limit: Cell::new(None),
            profiler: RefCell::new(Default::default()),
            current_stage: Cell::new("other"),
            next_dispatch_bytes: Cell::new(0),
            pool: Default::default(),
            fences: Default::default(),
            mapped: Default::default(),
            strict,
            current_program: Cell::new(None),
            storage_bindings: RefCell::new(Vec::new()),
            buffer_data_raw,
            _owned: None,
        };
        if let Some(path) = settings.transfer {
            context.set_transfer_path(path)?;
        }
        context.mapped.overlap.set(settings.overlap);
        let buffers = settings.buffers;
        if buffers == Some(super::mapped::BufferStorage::Immutable) && !context.info.buffer_storage
        {
            return Err(Error::Usage(format!(
                "DEEPMERGE_GL_BUFFERS=immutable: {} has no buffer storage (GL 4.4 or GL_ARB_buffer_storage)",
                context.info.renderer
            )));
        }
        context.mapped.buffers.set(buffers);
        context.mapped.pairwise.set(settings.pairwise);
        context.mapped.deep_writes.set(settings.deep_writes);
        context.mapped.deep_readback.set(settings.deep_readback);
        context.set_transfer_round_bytes(settings.staging_bytes);
        // Planes read in place only on llvmpipe taking its defaults: its "GPU" reads host memory
        // inside each call (`gpu::gather`). Not any software device: zink over lavapipe runs
        // the work on another thread and wants page-aligned memory.
        let pinned = software
            && context.info.software
            && context.info.renderer.starts_with("llvmpipe")
            && context.buffer_data_raw.is_some()
            && context
                .gl
                .supported_extensions()
                .contains("GL_AMD_pinned_memory");
        context.mapped.pinned_possible.set(pinned);
        context
            .mapped
            .pinned_planes
            .set(pinned && settings.pinned != Some(false));
        Ok(context)
    }

    /// Make [`Self::check_fits`] refuse buffers over `bytes` (`None`: the driver's limit again)
    /// while [`GlInfo::max_ssbo_bytes`], which the band planner believes, stays the driver's:
    /// a driver that binds less than it claims, or runs out of memory, for tests of the GL
    /// merge's retry with smaller bands.
    pub fn limit_storage_block(&self, bytes: Option<u64>) {
        self.storage_limit.set(bytes);
    }

    /// Vendor, renderer, version and the limits that matter.
    pub fn info(&self) -> &GlInfo {
        &self.info
    }

    /// Check for a GL error after `what`; in strict mode, also report what strict mode found
    /// ([`Self::strict_report`]).
    pub(crate) fn check(&self, what: &str) -> Result<()> {
        // SAFETY: a plain query on the current context.
        let code = unsafe { self.gl.get_error() };
        if code == glow::NO_ERROR {
            self.strict_report()
        } else if code == glow::OUT_OF_MEMORY {
            Err(Error::GlMemory(format!("{what} ran out of GPU memory")))
        } else {
            Err(Error::Gl(format!(
                "{what} failed with GL error 0x{code:04x}"
            )))
        }
    }
}

impl Drop for GlContext {
    fn drop(&mut self) {
        let _span = crate::timeline::span(|| match self._owned {
            Some(_) => "GL context dropped".into(),
            // A window owns it: only this engine's objects go.
            None => "GL objects deleted".into(),
        });
        self.profiler.borrow_mut().delete(&self.gl);
        self.clear_pool();
        self.clear_mapped();
        for (_, program) in self.programs.borrow_mut().drain() {
            // SAFETY: the programs were made on this context, which is still current.
            unsafe { self.gl.delete_program(program) };
        }
    }
}

/// The context's [`GlInfo`]: `software` whether it takes a software rasteriser's defaults,
/// `software_device` whether its device is one.
unsafe fn query_info(gl: &glow::Context, software: bool, software_device: bool) -> GlInfo {
    let int = |name| gl.get_parameter_i32(name).max(0) as u32;
    let indexed = |name, i| gl.get_parameter_indexed_i32(name, i).max(0) as u32;
    let renderer = gl.get_parameter_string(glow::RENDERER);
    GlInfo {
        vendor: gl.get_parameter_string(glow::VENDOR),
        loops_capped: software_device
            || renderer.contains("llvmpipe")
            || renderer.contains("softpipe"),
        renderer,
        version: gl.get_parameter_string(glow::VERSION),
        glsl_version: gl.get_parameter_string(glow::SHADING_LANGUAGE_VERSION),
        software,
        max_ssbo_bytes: gl
            .get_parameter_i64(glow::MAX_SHADER_STORAGE_BLOCK_SIZE)
            .max(0) as u64,
        max_compute_ssbo_bindings: int(glow::MAX_COMPUTE_SHADER_STORAGE_BLOCKS),
        max_shared_memory_bytes: int(glow::MAX_COMPUTE_SHARED_MEMORY_SIZE),
        max_invocations: int(glow::MAX_COMPUTE_WORK_GROUP_INVOCATIONS),
        max_group_count: [0, 1, 2].map(|i| indexed(glow::MAX_COMPUTE_WORK_GROUP_COUNT, i)),
        max_group_size: [0, 1, 2].map(|i| indexed(glow::MAX_COMPUTE_WORK_GROUP_SIZE, i)),
        buffer_storage: {
            let v = gl.version();
            (v.major, v.minor) >= (4, 4)
                || gl.supported_extensions().contains("GL_ARB_buffer_storage")
        },
    }
}
