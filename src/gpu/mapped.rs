//! Host transfers through persistently mapped buffers (GL 4.4 or `GL_ARB_buffer_storage`), the
//! way a driver moves data at bus speed: the host writes into memory the GPU can see, with as
//! many threads as it has, and the GPU copies it into its own buffers (`glCopyBufferSubData`);
//! a readback is a GPU copy into mapped memory behind a fence, waited for only when the host
//! needs the bytes, so the host can stage the next band meanwhile.
//!
//! Where the driver has no buffer storage, on a software rasteriser (whose buffers are host
//! memory already), or when `DEEPMERGE_GL_TRANSFER=calls` asks, transfers are plain
//! `glBufferSubData` and `glGetBufferSubData` calls ([`TransferPath::Calls`]).
//!
//! Staging goes through a few buffers of at most [`STAGING_BYTES`] each: a larger upload is cut
//! into rounds, and the host fills one buffer while the GPU copies out of another (a second one
//! is made rather than waited for, [`STAGING_BUFFERS`]). A staging
//! buffer is written again only once the fence after its last copies has signalled (the host
//! waits for it: a GPU-side wait cannot hold back a host write). Readback buffers are free once
//! the host has read them. Free buffers are bounded ([`MAX_FREE_BUFFERS`] each way).
//!
//! In strict mode the hazard checker sees every host write into mapped memory: one into a
//! buffer whose last copy is not known finished is a hazard (`hazard.rs`).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use glow::HasContext;
use rayon::prelude::*;

use super::buffer::{id, GpuBuffer};
use super::pool::size_class;
use super::GlContext;
use crate::env_setting::{env_setting, setting};
use crate::error::{Error, Result};

/// The most bytes one staging buffer holds: larger uploads go in rounds. 16 MiB: on an NVIDIA
/// H100 host a 1080p pair's merge spent 16-22 ms making each of the two 48-64 MiB buffers the
/// first bands needed (pinned host memory), and took 0.42 s against 0.45 s flat, 1.27 s against
/// 1.39 s deep, with 16 MiB rounds (`DEEPMERGE_TIMELINE`, one run each, 2026-11-27); a round's
/// copy (about 0.6 ms there) stays well under the host's time to fill the other buffer.
pub const STAGING_BYTES: usize = 16 << 20;

/// Free mapped buffers kept for reuse, per direction; older ones are deleted.
const MAX_FREE_BUFFERS: usize = 4;

/// Readbacks of at least this many bytes are large ([`GlContext::take_readback`]).
const LARGE_READBACK: usize = 1 << 20;

/// Staging buffers made before the host waits for one to be free again: two, so that the host
/// fills one while the GPU copies out of the other.
const STAGING_BUFFERS: usize = 2;

/// Copies below this size are made on one host thread (a task costs more than it saves).
const PARALLEL_COPY_BYTES: usize = 1 << 20;

/// How long the host waits for one fence before calling the GPU hung.
const FENCE_TIMEOUT: Duration = Duration::from_secs(600);

/// Every `DEEPMERGE_GL_*` measurement setting, read once when a context is made: an unknown
/// value is an error naming its variable, before any device is tried.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EnvSettings {
    pub transfer: Option<TransferPath>,
    pub buffers: Option<BufferStorage>,
    pub overlap: Option<bool>,
    pub pairwise: Option<bool>,
    pub deep_writes: Option<crate::gpu::resident::DeepWrites>,
    pub deep_readback: Option<crate::gpu::resident::DeepReadback>,
    /// `DEEPMERGE_GL_DEFAULTS`: whose defaults the context takes (`Some(true)`: a software
    /// rasteriser's), whatever the device is.
    pub software_defaults: Option<bool>,
    /// `DEEPMERGE_GL_STAGING`: the bytes of one staging round and readback chunk, in place of
    /// [`STAGING_BYTES`] (a size, `16M`).
    pub staging_bytes: Option<usize>,
    /// `DEEPMERGE_GL_PINNED`: whether a software rasteriser reads decoded planes in place.
    pub pinned: Option<bool>,
}

impl EnvSettings {
    /// The settings as the environment gives them now.
    pub(crate) fn from_env() -> Result<EnvSettings> {
        // Read where the copy threads start (`copy_pool`); checked here, with the others.
        copy_threads_from(env_setting("DEEPMERGE_GL_COPY_THREADS").as_deref())?;
        // Read where a streamed merge starts its reader (`reader_staging.rs`); checked here too.
        super::reader_staging::reader_staging_from_env()?;
        // Read where a streamed merge plans its bands (`stream::plan`); checked here too, so
        // that a bad value is refused wherever it would do nothing (llvmpipe, `--band-rows`).
        crate::stream::plan::gl_band_cap_from_env()?;
        Ok(EnvSettings {
            transfer: TransferPath::from_env()?,
            buffers: BufferStorage::from_env()?,
            overlap: overlap_from_env()?,
            pairwise: pairwise_from_env()?,
            deep_writes: deep_writes_from_env()?,
            deep_readback: deep_readback_from_env()?,
            software_defaults: defaults_from(env_setting("DEEPMERGE_GL_DEFAULTS").as_deref())?,
            staging_bytes: staging_bytes_from(env_setting("DEEPMERGE_GL_STAGING").as_deref())?,
            pinned: pinned_from(env_setting("DEEPMERGE_GL_PINNED").as_deref())?,
        })
    }
}

/// `DEEPMERGE_GL_STAGING`'s size of a staging round, from its value `value` (unset or empty:
/// `None`): a number of bytes or a size with a unit (`16M`); anything but 64K to 1G is an error
/// naming the variable.
pub fn staging_bytes_from(value: Option<&str>) -> Result<Option<usize>> {
    let Some(text) = value.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let refuse = |why: String| {
        Error::Usage(format!(
            "DEEPMERGE_GL_STAGING={text}: {why} (bytes, or a size with a unit, from 64K to 1G: 16M)"
        ))
    };
    let bytes = crate::size::parse_bytes(text).map_err(refuse)?;
    if !((64 << 10)..=(1 << 30)).contains(&bytes) {
        return Err(refuse("out of range".into()));
    }
    Ok(Some(bytes as usize))
}

/// How host data reaches GPU buffers and comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferPath {
    /// Persistently mapped buffers: parallel host writes and GPU copies; fenced readbacks.
    Mapped,
    /// `glBufferSubData` and `glGetBufferSubData` (the host waits for every readback).
    Calls,
}

impl TransferPath {
    /// The path's name, as `DEEPMERGE_GL_TRANSFER` and `--stats` spell it.
    pub fn name(self) -> &'static str {
        match self {
            TransferPath::Mapped => "mapped",
            TransferPath::Calls => "calls",
        }
    }

    /// What `DEEPMERGE_GL_TRANSFER` asks for, if anything (an unknown value is an error that
    /// names the variable).
    pub fn from_env() -> Result<Option<TransferPath>> {
        Self::from_setting(env_setting("DEEPMERGE_GL_TRANSFER").as_deref())
    }

    /// [`Self::from_env`] of the value `value`.
    pub fn from_setting(value: Option<&str>) -> Result<Option<TransferPath>> {
        setting(
            "DEEPMERGE_GL_TRANSFER",
            value,
            &[
                ("mapped", TransferPath::Mapped),
                ("calls", TransferPath::Calls),
            ],
        )
    }
}

/// What `DEEPMERGE_GL_OVERLAP` asks for, if anything: 1 overlaps bands, 0 does not (an unknown
/// value is an error that names the variable).
pub fn overlap_from_env() -> Result<Option<bool>> {
    overlap_from(env_setting("DEEPMERGE_GL_OVERLAP").as_deref())
}

/// [`overlap_from_env`] of the value `value`.
pub fn overlap_from(value: Option<&str>) -> Result<Option<bool>> {
    setting("DEEPMERGE_GL_OVERLAP", value, &[("1", true), ("0", false)])
}

/// What `DEEPMERGE_GL_DEFAULTS` asks for, if anything: `hardware` gives a software rasteriser
/// every default a GPU of its own gets (overlapped bands, mapped transfers, immutable buffers,
/// the GPU's sort shape, tidy and band budget), so that strict mode on llvmpipe runs the paths a
/// GPU runs; `software` gives a GPU llvmpipe's. `Some(true)`: software defaults.
pub fn defaults_from(value: Option<&str>) -> Result<Option<bool>> {
    setting(
        "DEEPMERGE_GL_DEFAULTS",
        value,
        &[("hardware", false), ("software", true)],
    )
}

/// How the engine's storage buffers are allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferStorage {
    /// `glBufferStorage` with no map bits (GL 4.4 or `GL_ARB_buffer_storage`): immutable, so a
    /// driver has no reason to move it out of video memory. NVIDIA moved mutable storage
    /// buffers that were read back to host memory ("Buffer performance warning: ... is being
    /// copied/moved from VIDEO memory to HOST memory", seen on an H200).
    Immutable,
    /// `glBufferData` with `GL_DYNAMIC_COPY`: mutable storage, placed where the driver likes.
    Mutable,
}

impl BufferStorage {
    /// The name, as `DEEPMERGE_GL_BUFFERS` and `--stats` spell it.
    pub fn name(self) -> &'static str {
        match self {
            BufferStorage::Immutable => "immutable",
            BufferStorage::Mutable => "mutable",
        }
    }

    /// What `DEEPMERGE_GL_BUFFERS` asks for, if anything (for measurements; an unknown value
    /// is an error that names the variable).
    pub fn from_env() -> Result<Option<BufferStorage>> {
        Self::from_setting(env_setting("DEEPMERGE_GL_BUFFERS").as_deref())
    }

    /// [`Self::from_env`] of the value `value`.
    pub fn from_setting(value: Option<&str>) -> Result<Option<BufferStorage>> {
        setting(
            "DEEPMERGE_GL_BUFFERS",
            value,
            &[
                ("immutable", BufferStorage::Immutable),
                ("mutable", BufferStorage::Mutable),
            ],
        )
    }
}

/// What `DEEPMERGE_GL_PAIRWISE` asks for, if anything: 1 runs the pairwise kernel for two
/// inputs with long lists, 0 the k-way one (`GlOptions::pairwise_long_pairs`; for measurements).
pub fn pairwise_from_env() -> Result<Option<bool>> {
    pairwise_from(env_setting("DEEPMERGE_GL_PAIRWISE").as_deref())
}

/// [`pairwise_from_env`] of the value `value`.
pub fn pairwise_from(value: Option<&str>) -> Result<Option<bool>> {
    setting("DEEPMERGE_GL_PAIRWISE", value, &[("1", true), ("0", false)])
}

/// What `DEEPMERGE_GL_PINNED` asks for, from its value `value`: `1` (the default where it can
/// be) has a software rasteriser read the decoded planes in place, `0` copies them as a GPU's
/// are (`gpu::gather`; for measurements).
pub fn pinned_from(value: Option<&str>) -> Result<Option<bool>> {
    setting("DEEPMERGE_GL_PINNED", value, &[("1", true), ("0", false)])
}

/// What `DEEPMERGE_GL_DEEP_READBACK` asks for, if anything: `sources`, `runs` or `image`
/// (`GlOptions::deep_readback`; for measurements).
pub fn deep_readback_from_env() -> Result<Option<crate::gpu::resident::DeepReadback>> {
    deep_readback_from(env_setting("DEEPMERGE_GL_DEEP_READBACK").as_deref())
}

/// [`deep_readback_from_env`] of the value `value`.
pub fn deep_readback_from(
    value: Option<&str>,
) -> Result<Option<crate::gpu::resident::DeepReadback>> {
    use crate::gpu::resident::DeepReadback;
    setting(
        "DEEPMERGE_GL_DEEP_READBACK",
        value,
        &[
            ("sources", DeepReadback::Sources),
            ("runs", DeepReadback::Runs),
            ("image", DeepReadback::Image),
        ],
    )
}

/// What `DEEPMERGE_GL_DEEP_WRITES` asks for, if anything: `direct`, `relayout`, `staged` or
/// `staged:<size>` (shared memory a group, `staged:8K`; `GlOptions::deep_writes`; for
/// measurements).
pub fn deep_writes_from_env() -> Result<Option<crate::gpu::resident::DeepWrites>> {
    deep_writes_from(env_setting("DEEPMERGE_GL_DEEP_WRITES").as_deref())
}

/// [`deep_writes_from_env`] of the value `value`: a staged size is bytes or a size with a unit,
/// from 256 bytes to 64K (what a driver may offer a group; more is cut to the driver's limit).
pub fn deep_writes_from(value: Option<&str>) -> Result<Option<crate::gpu::resident::DeepWrites>> {
    use crate::gpu::resident::DeepWrites;
    const NAME: &str = "DEEPMERGE_GL_DEEP_WRITES";
    let Some(size) = value.and_then(|v| v.strip_prefix("staged:")) else {
        return setting(
            NAME,
            value,
            &[
                ("direct", DeepWrites::Direct),
                ("relayout", DeepWrites::Relayout),
                (
                    "staged",
                    DeepWrites::Staged {
                        group_bytes: DeepWrites::STAGED_GROUP_BYTES,
                    },
                ),
            ],
        )
        .map_err(|_| {
            Error::Usage(format!(
                "{NAME}={} is not a setting of it; use direct, relayout, staged or \
                 staged:<size> (shared memory a group: staged:8K)",
                value.unwrap_or_default()
            ))
        });
    };
    match crate::size::parse_bytes(size) {
        Ok(bytes) if (256..=(64 << 10)).contains(&bytes) => Ok(Some(DeepWrites::Staged {
            group_bytes: bytes as u32,
        })),
        _ => Err(Error::Usage(format!(
            "{NAME}=staged:{size}: the shared memory a group stages in is bytes or a size with \
             a unit, from 256 to 64K (staged:8K)"
        ))),
    }
}

/// Counts and times of the mapped transfers, for `--stats` and the tests.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TransferStats {
    /// Mapped buffers created.
    pub allocations: u64,
    /// Staging rounds (one buffer filled and copied out each).
    pub staging_rounds: u64,
    /// Host seconds spent waiting for a staging buffer's fence before writing it again.
    pub staging_wait_s: f64,
    /// Readbacks issued ahead of need (copies into mapped memory).
    pub reads_ahead: u64,
    /// Bytes the GPU copied out of planes the reader's threads had staged
    /// (`DEEPMERGE_GL_READER_STAGING`, `reader_staging.rs`), which the merging thread did not copy.
    pub reader_staged_bytes: u64,
    /// Host seconds spent waiting for a readback's fence.
    pub readback_wait_s: f64,
    /// Bytes of decoded planes the GPU read in place, never copied (`gpu::gather`, a software
    /// rasteriser with `GL_AMD_pinned_memory`).
    pub pinned_bytes: u64,
}

/// One buffer with persistent, coherent mapped storage.
pub(crate) struct MappedBuffer {
    pub(super) buffer: glow::Buffer,
    pub(super) ptr: *mut u8,
    pub(super) capacity: usize,
}

/// A fence with the hazard checker's serial when it was made.
pub(crate) struct Fence {
    sync: glow::Fence,
    serial: u64,
}

/// The context's free mapped buffers and counts.
#[derive(Default)]
pub(crate) struct MappedPool {
    /// Free staging buffers, oldest first, each with the fence of its last copies.
    staging: RefCell<Vec<(MappedBuffer, Option<Fence>)>>,
    /// Free readback buffers, oldest first.
    readback: RefCell<Vec<MappedBuffer>>,
    pub(crate) stats: Cell<TransferStats>,
    /// The path chosen for this context (set when it is made).
    pub(crate) path: Cell<Option<TransferPath>>,
    /// Whether bands overlap, as `DEEPMERGE_GL_OVERLAP` says (`GlOptions::overlaps_bands`).
    pub(crate) overlap: Cell<Option<bool>>,
    /// What `DEEPMERGE_GL_BUFFERS` said when the context was made.
    pub(crate) buffers: Cell<Option<BufferStorage>>,
    /// What `DEEPMERGE_GL_PAIRWISE` said when the context was made.
    pub(crate) pairwise: Cell<Option<bool>>,
    /// What `DEEPMERGE_GL_DEEP_WRITES` said when the context was made.
    pub(crate) deep_writes: Cell<Option<crate::gpu::resident::DeepWrites>>,
    pub(crate) deep_readback: Cell<Option<crate::gpu::resident::DeepReadback>>,
    /// The most bytes of one staging round or readback chunk (0: [`STAGING_BYTES`]).
    round_bytes: Cell<usize>,
    /// Readbacks dropped before they were waited for: their buffers and fences, to delete.
    orphans: Rc<RefCell<Vec<Pending>>>,
    /// Read mapped readbacks without waiting for their copies ([`GlContext::use_readback_waits`]).
    skip_readback_waits: Cell<bool>,
    /// The planes the reader staged for the band being issued, lent for its staging
    /// (`reader_staging.rs`): pieces that lie in them are copied by the GPU from there.
    pub(super) reader_staged: RefCell<Option<super::reader_staging::StagedBand>>,
    /// Blocks staging by the reader made, kept for the context's next merge.
    pub(super) reader_blocks: RefCell<Vec<MappedBuffer>>,
    /// Whether a band's decoded planes are read in place rather than copied (`gpu::gather`).
    pub(crate) pinned_planes: Cell<bool>,
    /// Whether they can be: a software rasteriser with `GL_AMD_pinned_memory`.
    pub(crate) pinned_possible: Cell<bool>,
}

/// A pointer the copy threads share; each writes its own range.
#[derive(Clone, Copy)]
pub(super) struct SharedPtr(pub(super) *mut u8);
// SAFETY: the threads write disjoint ranges of the destination, which outlives the parallel copy.
unsafe impl Send for SharedPtr {}
unsafe impl Sync for SharedPtr {}

impl SharedPtr {
    /// The address `at` bytes in (a method, so that closures capture the whole `SharedPtr`).
    pub(super) fn at(self, at: usize) -> *mut u8 {
        // SAFETY: callers stay inside the destination (a mapping, or a readback's host copy).
        unsafe { self.0.add(at) }
    }
}

/// One host write of a staging round: `bytes` into `dst` at byte `to`.
pub(crate) struct Piece<'p, 'a> {
    /// The GPU buffer written.
    pub dst: &'p GpuBuffer<'a>,
    /// Byte offset in `dst`.
    pub to: usize,
    /// The bytes.
    pub bytes: &'p [u8],
}

/// A readback issued ahead of need: the bytes arrive in mapped memory behind a fence, or were
/// read at once (the calls path). Dropped unfinished (an error between issuing and waiting),
/// its buffers and fence go to the context's orphans, deleted at the next readback.
pub(crate) struct PendingRead {
    inner: Option<Pending>,
    orphans: Rc<RefCell<Vec<Pending>>>,
}

/// What a [`PendingRead`] holds.
enum Pending {
    Mapped {
        chunks: Vec<(MappedBuffer, usize)>,
        fence: Fence,
        bytes: usize,
    },
    Ready(Vec<u8>),
}

impl PendingRead {
    /// How many bytes the readback brings.
    fn bytes(&self) -> usize {
        match &self.inner {
            Some(Pending::Mapped { bytes, .. }) => *bytes,
            Some(Pending::Ready(bytes)) => bytes.len(),
            None => 0,
        }
    }
}

impl Drop for PendingRead {
    fn drop(&mut self) {
        if let Some(pending @ Pending::Mapped { .. }) = self.inner.take() {
            self.orphans.borrow_mut().push(pending);
        }
    }
}

/// Copy `tasks` of (destination pointer offset, source) into `base`, in parallel when large:
/// host data into a staging mapping, or a readback's mapping out into host memory.
fn copy_into(base: SharedPtr, tasks: &[(usize, &[u8])]) {
    let total: usize = tasks.iter().map(|(_, b)| b.len()).sum();
    let one = |&(at, bytes): &(usize, &[u8])| {
        // SAFETY: `at..at + len` lies inside the destination (the caller laid the tasks out in
        // it), no two tasks overlap, and no source overlaps the destination.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.at(at), bytes.len()) }
    };
    match copy_pool() {
        Some(pool) if total >= PARALLEL_COPY_BYTES => {
            // Split into pieces of about 1 MiB so every core gets work.
            let mut split: Vec<(usize, &[u8])> = Vec::new();
            for &(at, bytes) in tasks {
                for (k, part) in bytes.chunks(PARALLEL_COPY_BYTES).enumerate() {
                    split.push((at + k * PARALLEL_COPY_BYTES, part));
                }
            }
            pool.install(|| split.par_iter().for_each(one));
        }
        _ => tasks.iter().for_each(one),
    }
}

/// The threads that copy into staging memory and out of readbacks: a pool of their own, since
/// the global one is busy decoding the next band, and a copy queued behind a decode would hold
/// the GL thread. As many threads as `DEEPMERGE_GL_COPY_THREADS` says (0: none, the GL thread
/// copies alone), else the cores up to 8. `None`: no pool.
fn copy_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        // A context made already checked the setting (`EnvSettings`): a bad one is the default.
        let asked = copy_threads_from(env_setting("DEEPMERGE_GL_COPY_THREADS").as_deref());
        let threads = asked
            .ok()
            .flatten()
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get().min(8)));
        (threads > 0).then(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|k| format!("deepmerge-staging-{k}"))
                .build()
                .expect("the staging copy threads start")
        })
    })
    .as_ref()
}

/// `DEEPMERGE_GL_COPY_THREADS`'s thread count from its value `value` (unset or empty: `None`);
/// anything but 0 to 64 is an error naming the variable.
pub fn copy_threads_from(value: Option<&str>) -> Result<Option<usize>> {
    let Some(text) = value.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    match text.parse::<usize>() {
        Ok(n) if n <= 64 => Ok(Some(n)),
        _ => Err(Error::Usage(format!(
            "DEEPMERGE_GL_COPY_THREADS={text}: a number of threads from 0 (the GL thread copies \
             alone) to 64 is needed"
        ))),
    }
}

impl GlContext {
    /// The transfer path of this context: what `DEEPMERGE_GL_TRANSFER` or
    /// [`Self::set_transfer_path`] chose, else mapped on a GPU whose driver has buffer storage.
    /// A software rasteriser's buffers are host memory, so there mapping adds a copy
    /// (measured on llvmpipe, idle: 600 MiB staged in 0.43 s mapped, 0.12 s by calls).
    pub fn transfer_path(&self) -> TransferPath {
        let info = self.info();
        self.mapped
            .path
            .get()
            .unwrap_or(if info.buffer_storage && !info.software {
                TransferPath::Mapped
            } else {
                TransferPath::Calls
            })
    }

    /// Choose the transfer path (tests compare both); mapped needs buffer storage.
    pub fn set_transfer_path(&self, path: TransferPath) -> Result<()> {
        if path == TransferPath::Mapped && !self.info().buffer_storage {
            return Err(Error::Gl(format!(
                "{} has no buffer storage (GL 4.4 or GL_ARB_buffer_storage) for mapped transfers",
                self.info().renderer
            )));
        }
        self.mapped.path.set(Some(path));
        Ok(())
    }

    /// Cut staging rounds and readback chunks at `bytes` (rounded up to 16; `None`:
    /// [`STAGING_BYTES`]), so that tests run many rounds on small images.
    #[doc(hidden)]
    pub fn set_transfer_round_bytes(&self, bytes: Option<usize>) {
        self.mapped
            .round_bytes
            .set(bytes.map_or(0, |b| b.max(16).next_multiple_of(16)));
    }

    /// Whether a band's decoded planes are read in place (a software rasteriser with
    /// `GL_AMD_pinned_memory`, unless `DEEPMERGE_GL_PINNED=0`) rather than copied (`gpu::gather`).
    pub fn pinned_planes(&self) -> bool {
        self.mapped.pinned_planes.get()
    }

    /// Read planes in place (`true`, where the context can: a software rasteriser with
    /// `GL_AMD_pinned_memory`, whatever `DEEPMERGE_GL_PINNED` said) or copy them (`false`), so
    /// that tests run both on one context.
    #[doc(hidden)]
    pub fn set_pinned_planes(&self, on: bool) {
        self.mapped
            .pinned_planes
            .set(on && self.mapped.pinned_possible.get());
    }

    /// Read mapped readbacks without waiting for their fences (`false`), so that a test can
    /// show a driver that runs the GPU's work on another thread (zink) returning what the copy
    /// had not written yet, where llvmpipe, which copies inside the call, returns the right
    /// bytes; `true` (the default) waits again. Never for real work: on a GPU it reads wrong
    /// pixels.
    #[doc(hidden)]
    pub fn use_readback_waits(&self, on: bool) {
        self.mapped.skip_readback_waits.set(!on);
    }

    pub(super) fn round_bytes(&self) -> usize {
        match self.mapped.round_bytes.get() {
            0 => STAGING_BYTES,
            b => b,
        }
    }

    /// Whether `DEEPMERGE_GL_OVERLAP` asked for overlapped bands when the context was made.
    pub(crate) fn overlap_from_env(&self) -> Option<bool> {
        self.mapped.overlap.get()
    }

    /// How this context allocates its storage buffers: what `DEEPMERGE_GL_BUFFERS` said when it
    /// was made, else immutable storage where the driver has buffer storage.
    pub fn buffer_storage(&self) -> BufferStorage {
        self.mapped
            .buffers
            .get()
            .unwrap_or(if self.info().buffer_storage {
                BufferStorage::Immutable
            } else {
                BufferStorage::Mutable
            })
    }

    /// Whether `DEEPMERGE_GL_PAIRWISE` asked for the pairwise kernel when the context was made.
    pub(crate) fn pairwise_from_env(&self) -> Option<bool> {
        self.mapped.pairwise.get()
    }

    /// How `DEEPMERGE_GL_DEEP_WRITES` asked deep outputs to be written when the context was made.
    pub(crate) fn deep_writes_from_env(&self) -> Option<crate::gpu::resident::DeepWrites> {
        self.mapped.deep_writes.get()
    }

    pub(crate) fn deep_readback_from_env(&self) -> Option<crate::gpu::resident::DeepReadback> {
        self.mapped.deep_readback.get()
    }

    /// What the mapped transfers have done since the context was made.
    pub fn transfer_stats(&self) -> TransferStats {
        self.mapped.stats.get()
    }

    pub(super) fn count_transfer(&self, f: impl FnOnce(&mut TransferStats)) {
        let mut s = self.mapped.stats.get();
        f(&mut s);
        self.mapped.stats.set(s);
    }

    /// Write every piece into its GPU buffer. On the mapped path the host copies them into
    /// staging buffers with all its threads and the GPU copies them on; on the calls path each
    /// is one `glBufferSubData`. `what` names the data for the hazard checker.
    pub(crate) fn write_pieces(&self, pieces: &[Piece], what: &str) -> Result<()> {
        for piece in pieces {
            assert!(
                piece.to + piece.bytes.len() <= piece.dst.capacity(),
                "a write outside a GPU buffer"
            );
        }
        if self.transfer_path() == TransferPath::Calls {
            for piece in pieces {
                piece.dst.write_bytes_at(piece.to, piece.bytes, what);
            }
            return Ok(());
        }
        // Pieces the reader's threads staged already are copied by the GPU from there; the
        // rest go through staging rounds.
        let mut rest: Vec<&Piece> = Vec::with_capacity(pieces.len());
        for piece in pieces {
            if !self.copy_reader_staged(piece, what)? {
                rest.push(piece);
            }
        }
        let pieces = rest;
        // Rounds of at most `round_bytes`: (piece, its byte range) per round.
        let round_bytes = self.round_bytes();
        let mut round: Vec<(usize, usize, usize)> = Vec::new();
        let mut filled = 0usize;
        for (k, piece) in pieces.iter().enumerate() {
            let mut from = 0;
            while from < piece.bytes.len() {
                let take = (piece.bytes.len() - from).min(round_bytes - filled);
                round.push((k, from, from + take));
                filled += take.next_multiple_of(16);
                from += take;
                if filled >= round_bytes {
                    self.stage_round(&pieces, &round, what)?;
                    round.clear();
                    filled = 0;
                }
            }
        }
        if !round.is_empty() {
            self.stage_round(&pieces, &round, what)?;
        }
        Ok(())
    }

    /// One staging round: take a staging buffer, fill it in parallel, copy it out, fence it.
    fn stage_round(
        &self,
        pieces: &[&Piece],
        round: &[(usize, usize, usize)],
        what: &str,
    ) -> Result<()> {
        let mut layout = Vec::with_capacity(round.len());
        let mut at = 0usize;
        for &(k, from, to) in round {
            layout.push((at, &pieces[k].bytes[from..to]));
            at += (to - from).next_multiple_of(16);
        }
        let staging = {
            let _span = crate::timeline::span(|| "take a staging buffer".to_string());
            self.take_staging(at.max(16))?
        };
        self.with_checker(|c| c.host_write(id(staging.buffer), what));
        {
            let _span = crate::timeline::span(|| format!("copy {} KiB into staging", at >> 10));
            copy_into(SharedPtr(staging.ptr), &layout);
        }
        let _span = crate::timeline::span(|| "issue the staging copies".to_string());
        let mut result = Ok(());
        for (&(k, from, to), &(src, _)) in round.iter().zip(&layout) {
            let piece = &pieces[k];
            result = self.copy_buffer(
                staging.buffer,
                src,
                piece.dst.buffer,
                piece.to + from,
                to - from,
                what,
            );
            if result.is_err() {
                break;
            }
        }
        let fence = self.make_fence();
        if fence.is_none() {
            // No fence to wait on before the next write: wait for the copies now.
            self.finish();
        }
        self.give_back_staging(staging, fence);
        self.count_transfer(|s| s.staging_rounds += 1);
        result
    }

    pub(super) fn make_fence(&self) -> Option<Fence> {
        let serial = self.checker_serial();
        // SAFETY: a plain fence on the current context.
        let sync = unsafe { self.gl.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0) }.ok()?;
        self.gl_called("glFenceSync");
        Some(Fence { sync, serial })
    }

    /// Whether `fence` has signalled, asked without waiting; never in strict mode, which counts
    /// no fence as signalled until the host has waited on it: the path a GPU that is behind the
    /// host takes, not llvmpipe's (`strict.rs`). A signalled fence is still to be waited on
    /// ([`Self::wait_fence`], at once), so that the hazard checker sees it.
    pub(super) fn signalled(&self, fence: &Fence) -> bool {
        if self.is_strict() {
            return false;
        }
        // SAFETY: a status query of a live fence of this context.
        let status = unsafe { self.gl.client_wait_sync(fence.sync, 0, 0) };
        status == glow::ALREADY_SIGNALED || status == glow::CONDITION_SATISFIED
    }

    /// Delete `fence` once nothing will wait on it any more (waited for, or given up on).
    pub(super) fn delete_fence(&self, fence: Fence) {
        // SAFETY: the fence belongs to this context.
        unsafe { self.gl.delete_sync(fence.sync) };
    }

    /// Wait on the host until `fence` has signalled; returns the seconds waited.
    pub(super) fn wait_fence(&self, fence: Fence) -> Result<f64> {
        let start = Instant::now();
        loop {
            // SAFETY: the fence is alive on this context; the timeout is in nanoseconds.
            let status = unsafe {
                self.gl
                    .client_wait_sync(fence.sync, glow::SYNC_FLUSH_COMMANDS_BIT, 1_000_000_000)
            };
            match status {
                glow::ALREADY_SIGNALED | glow::CONDITION_SATISFIED => break,
                glow::TIMEOUT_EXPIRED if start.elapsed() < FENCE_TIMEOUT => continue,
                other => {
                    self.delete_fence(fence);
                    return Err(Error::Gl(if other == glow::TIMEOUT_EXPIRED {
                        format!(
                            "{} did not finish its work within {} s (glClientWaitSync)",
                            self.info().renderer,
                            FENCE_TIMEOUT.as_secs()
                        )
                    } else {
                        format!(
                            "glClientWaitSync failed on {} (status 0x{other:x})",
                            self.info().renderer
                        )
                    }));
                }
            }
        }
        let serial = fence.serial;
        self.delete_fence(fence);
        self.gl_called("glClientWaitSync");
        self.with_checker(|c| c.fence_done(serial));
        Ok(start.elapsed().as_secs_f64())
    }

    /// A staging buffer of at least `bytes`, its last copies finished: a free one whose copies
    /// are done, else a new one while fewer than [`STAGING_BUFFERS`] exist (so the host fills
    /// one while the GPU copies out of another), else the oldest fitting one, once it is done.
    fn take_staging(&self, bytes: usize) -> Result<MappedBuffer> {
        let found = {
            let mut free = self.mapped.staging.borrow_mut();
            // (Never signalled in strict mode before the host waited: `signalled`.)
            let done = |fence: &Option<Fence>| fence.as_ref().is_none_or(|f| self.signalled(f));
            let fits: Vec<usize> = (0..free.len())
                .filter(|&k| free[k].0.capacity >= bytes)
                .collect();
            let ready = fits.iter().copied().find(|&k| done(&free[k].1));
            let pick = match ready {
                Some(k) => Some(k),
                None if free.len() < STAGING_BUFFERS => None,
                None => fits.first().copied(),
            };
            pick.map(|k| free.remove(k))
        };
        match found {
            Some((buffer, fence)) => {
                if let Some(fence) = fence {
                    match self.wait_fence(fence) {
                        Ok(waited) => self.count_transfer(|s| s.staging_wait_s += waited),
                        Err(e) => {
                            self.delete_mapped(buffer);
                            return Err(e);
                        }
                    }
                }
                Ok(buffer)
            }
            None => self.allocate_mapped(size_class(bytes), glow::MAP_WRITE_BIT),
        }
    }

    fn give_back_staging(&self, buffer: MappedBuffer, fence: Option<Fence>) {
        let mut free = self.mapped.staging.borrow_mut();
        free.push((buffer, fence));
        while free.len() > MAX_FREE_BUFFERS {
            let (old, fence) = free.remove(0);
            if let Some(fence) = fence {
                self.delete_fence(fence);
            }
            self.delete_mapped(old);
        }
    }

    /// A buffer of `capacity` bytes with persistent, coherent storage mapped for `access`
    /// (`GL_MAP_WRITE_BIT` or `GL_MAP_READ_BIT`).
    pub(super) fn allocate_mapped(&self, capacity: usize, access: u32) -> Result<MappedBuffer> {
        let _span = crate::timeline::span(|| {
            let what = if access == glow::MAP_READ_BIT {
                "readback"
            } else {
                "staging"
            };
            format!("make a {} MiB mapped {what} buffer", capacity >> 20)
        });
        let size = i32::try_from(capacity)
            .map_err(|_| Error::GlMemory(format!("a mapped buffer of {capacity} bytes")))?;
        let map_flags = access | glow::MAP_PERSISTENT_BIT | glow::MAP_COHERENT_BIT;
        let mut flags = map_flags;
        if access == glow::MAP_READ_BIT {
            // The host reads what a readback buffer holds: ask for host (cached) memory. On an
            // H200 without this hint the host copied readbacks out at 0.3-0.4 GB/s (`--stats`,
            // readback 2.79 s for 787 MiB), the rate of reading uncached memory.
            flags |= glow::CLIENT_STORAGE_BIT;
        }
        // SAFETY: object creation and mapping on the current context; the mapping lives as
        // long as the buffer (deleting a buffer unmaps it).
        let (buffer, ptr) = unsafe {
            let buffer = self
                .gl
                .create_buffer()
                .map_err(|e| Error::Gl(format!("cannot create a buffer: {e}")))?;
            self.gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(buffer));
            self.gl
                .buffer_storage(glow::COPY_WRITE_BUFFER, size, None, flags);
            if self.gl.get_error() == glow::OUT_OF_MEMORY {
                self.gl.delete_buffer(buffer);
                return Err(Error::GlMemory(format!(
                    "out of memory allocating a mapped buffer of {capacity} bytes"
                )));
            }
            let ptr = self
                .gl
                // The storage hint is no access flag: mapping with it is an error.
                .map_buffer_range(glow::COPY_WRITE_BUFFER, 0, size, map_flags);
            (buffer, ptr)
        };
        if ptr.is_null() {
            // SAFETY: the buffer was made above.
            unsafe { self.gl.delete_buffer(buffer) };
            return Err(Error::Gl(format!(
                "{} could not map a buffer of {capacity} bytes",
                self.info().renderer
            )));
        }
        self.with_checker(|c| c.allocated(id(buffer)));
        self.gl_called("glBufferStorage");
        self.count_transfer(|s| s.allocations += 1);
        Ok(MappedBuffer {
            buffer,
            ptr,
            capacity,
        })
    }

    pub(super) fn delete_mapped(&self, buffer: MappedBuffer) {
        // SAFETY: the buffer belongs to this context; GL keeps its storage until the copies
        // issued with it are done, and deleting it unmaps it.
        unsafe { self.gl.delete_buffer(buffer.buffer) };
        self.with_checker(|c| c.deleted(id(buffer.buffer)));
    }

    /// Start reading `bytes` of `src` from byte `at`: on the mapped path a GPU copy into mapped
    /// memory behind a fence ([`Self::finish_read`] waits for it), on the calls path a read now.
    pub(crate) fn read_ahead(
        &self,
        src: &GpuBuffer,
        at: usize,
        bytes: usize,
    ) -> Result<PendingRead> {
        assert!(
            at + bytes <= src.capacity(),
            "a readback outside a GPU buffer"
        );
        let pending = |inner| PendingRead {
            inner: Some(inner),
            orphans: self.mapped.orphans.clone(),
        };
        if self.transfer_path() == TransferPath::Calls {
            let mut out = vec![0u8; bytes];
            if bytes > 0 {
                src.read_bytes_at(at, &mut out);
            }
            return Ok(pending(Pending::Ready(out)));
        }
        self.bury_orphans();
        let mut chunks = Vec::new();
        let mut result = Ok(());
        for from in (0..bytes).step_by(self.round_bytes()) {
            let len = (bytes - from).min(self.round_bytes());
            let target = match self.take_readback(len) {
                Ok(target) => target,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            let copied =
                self.copy_buffer(src.buffer, at + from, target.buffer, 0, len, "a readback");
            chunks.push((target, len));
            if let Err(e) = copied {
                result = Err(e);
                break;
            }
        }
        let fence = self.make_fence();
        if let Err(e) = result.and_then(|()| {
            fence
                .as_ref()
                .map(|_| ())
                .ok_or_else(|| Error::Gl("glFenceSync failed".into()))
        }) {
            for (chunk, _) in chunks {
                self.delete_mapped(chunk);
            }
            if let Some(fence) = fence {
                self.delete_fence(fence);
            }
            return Err(e);
        }
        self.count_transfer(|s| s.reads_ahead += 1);
        Ok(pending(Pending::Mapped {
            chunks,
            fence: fence.expect("checked above"),
            bytes,
        }))
    }

    /// Delete what readbacks dropped unfinished left (GL keeps a buffer's storage until the
    /// copy into it is done).
    fn bury_orphans(&self) {
        let orphans: Vec<Pending> = self.mapped.orphans.borrow_mut().drain(..).collect();
        for orphan in orphans {
            if let Pending::Mapped { chunks, fence, .. } = orphan {
                self.delete_fence(fence);
                for (chunk, _) in chunks {
                    self.delete_mapped(chunk);
                }
            }
        }
    }

    /// The bytes of a readback started by [`Self::read_ahead`], as `T`s, once the GPU has copied
    /// them (the host waits on the fence here, and counts the wait).
    pub(crate) fn finish_read<T: bytemuck::Pod + Default>(
        &self,
        pending: PendingRead,
    ) -> Result<Vec<T>> {
        self.finish_read_prefix(pending, usize::MAX)
    }

    /// [`Self::finish_read`] of at most the first `len` `T`s: a readback of a buffer's whole room
    /// of which the GPU filled a part only it knew when the copy was issued (a deep output's
    /// runs), copied out of mapped memory no further than that part.
    pub(crate) fn finish_read_prefix<T: bytemuck::Pod + Default>(
        &self,
        pending: PendingRead,
        len: usize,
    ) -> Result<Vec<T>> {
        let size = std::mem::size_of::<T>();
        let len = len.min(pending.bytes() / size);
        let mut out = vec![T::default(); len];
        self.finish_read_bytes(pending, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }

    /// [`Self::finish_read`] straight into `dst`, which the readback fills exactly (a flat band's
    /// values into their place in the window): one copy out of mapped memory, none after.
    pub(crate) fn finish_read_into<T: bytemuck::Pod>(
        &self,
        pending: PendingRead,
        dst: &mut [T],
    ) -> Result<()> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
        assert_eq!(
            bytes.len(),
            pending.bytes(),
            "a readback fills its destination"
        );
        self.finish_read_bytes(pending, bytes)
    }

    /// Wait for `pending` and copy its first `dst.len()` bytes (at most all of them) into `dst`;
    /// its mapped buffers go back for reuse.
    fn finish_read_bytes(&self, mut pending: PendingRead, dst: &mut [u8]) -> Result<()> {
        match pending.inner.take().expect("a readback is finished once") {
            Pending::Ready(bytes) => {
                dst.copy_from_slice(&bytes[..dst.len()]);
                Ok(())
            }
            Pending::Mapped {
                chunks,
                fence,
                bytes,
            } => {
                let bytes = bytes.min(dst.len());
                let span = crate::timeline::span(|| "wait for a readback".into());
                let waited = if self.mapped.skip_readback_waits.get() {
                    self.delete_fence(fence);
                    Ok(0.0)
                } else {
                    self.wait_fence(fence)
                };
                drop(span);
                let _span = crate::timeline::span(|| format!("copy out {} KiB", bytes >> 10));
                if let Ok(waited) = waited {
                    self.count_transfer(|s| s.readback_wait_s += waited);
                    let mut tasks = Vec::with_capacity(chunks.len());
                    let mut at = 0;
                    for (chunk, len) in &chunks {
                        let len = (*len).min(bytes - at);
                        if len == 0 {
                            break;
                        }
                        self.with_checker(|c| c.host_read(id(chunk.buffer)));
                        // SAFETY: the copy into the mapping has finished (the fence signalled)
                        // and `len` bytes of it are the readback's.
                        let src = unsafe { std::slice::from_raw_parts(chunk.ptr, len) };
                        tasks.push((at, src));
                        at += len;
                    }
                    assert!(at <= dst.len(), "a readback's chunks overrun it");
                    // In parallel pieces, as staging copies in: on an H100 host one thread
                    // read readbacks out of mapped memory at 1.5-2.9 GB/s, on the merging
                    // thread, which is the GL engine's critical path.
                    copy_into(SharedPtr(dst.as_mut_ptr()), &tasks);
                }
                for (chunk, _) in chunks {
                    if waited.is_ok() {
                        self.give_back_readback(chunk);
                    } else {
                        // The copy may still be running: never reuse the buffer.
                        self.delete_mapped(chunk);
                    }
                }
                waited.map(|_| ())
            }
        }
    }

    /// A free readback buffer that holds `bytes`, else a new one of its size class. A large
    /// readback (1 MiB or more: a band's composite, its runs, its offsets) takes the smallest
    /// free buffer that holds it, whatever its size: a streamed merge's first band is often its
    /// largest, and on an H200 host each later, smaller band of a flat merge made readback
    /// buffers of its own where the first band's lay free (eight of them, 1.3-1.9 ms each on
    /// the merging thread). A small readback (a count, a flag) keeps to buffers at most twice
    /// its size (64 KiB at least), so that it does not hold a large buffer that a large
    /// readback of the same band then makes again.
    fn take_readback(&self, bytes: usize) -> Result<MappedBuffer> {
        let most = if bytes >= LARGE_READBACK {
            usize::MAX
        } else {
            2 * bytes.max(1 << 16)
        };
        let found = {
            let mut free = self.mapped.readback.borrow_mut();
            free.iter()
                .enumerate()
                .filter(|(_, b)| b.capacity >= bytes && b.capacity <= most)
                .min_by_key(|(_, b)| b.capacity)
                .map(|(k, _)| k)
                .map(|k| free.remove(k))
        };
        match found {
            Some(buffer) => Ok(buffer),
            None => self.allocate_mapped(size_class(bytes), glow::MAP_READ_BIT),
        }
    }

    fn give_back_readback(&self, buffer: MappedBuffer) {
        let mut free = self.mapped.readback.borrow_mut();
        free.push(buffer);
        while free.len() > MAX_FREE_BUFFERS {
            let old = free.remove(0);
            self.delete_mapped(old);
        }
    }

    /// Delete every free mapped buffer (the context is being dropped, or its pool cleared).
    pub(crate) fn clear_mapped(&self) {
        self.bury_orphans();
        for (buffer, fence) in self
            .mapped
            .staging
            .borrow_mut()
            .drain(..)
            .collect::<Vec<_>>()
        {
            if let Some(fence) = fence {
                self.delete_fence(fence);
            }
            self.delete_mapped(buffer);
        }
        for buffer in self
            .mapped
            .readback
            .borrow_mut()
            .drain(..)
            .chain(self.mapped.reader_blocks.borrow_mut().drain(..))
            .collect::<Vec<_>>()
        {
            self.delete_mapped(buffer);
        }
    }
}
