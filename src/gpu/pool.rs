//! The buffer pool of a GL context: storage buffers given back when their [`GpuBuffer`] drops
//! and taken again by the next band or merge, so that a merge after the first few bands
//! allocates nothing (allocating a buffer object can stall a driver, and fresh storage is
//! paged in on first touch).
//!
//! A request for `bytes` takes the smallest free buffer that holds them and wastes at most half
//! of itself (`capacity <= 2 * bytes`, small buffers excepted), or allocates one of the next size
//! class (sizes step by a quarter of a power of two, so at most 25% is wasted and a band a little
//! larger than the last still finds a buffer). Free buffers are bounded: when they add up to more
//! than twice the most bytes ever taken at once, the oldest free ones are deleted, so a pool
//! holds at most what its largest band needed, twice.
//!
//! The pool also keeps one small constant buffer (zeros, then a 1): buffers are cleared and
//! counters set by GPU copies from it, not by host uploads.
//!
//! A buffer comes back when its owner drops it, which is usually right after the dispatch that
//! reads it was issued: it is released with a fence and taken again only once the work before
//! that fence is done or waited for on the GPU (`fence.rs`).

use std::cell::{Cell, RefCell};

use glow::HasContext;

use super::buffer::{allocate, id, GpuBuffer};
use super::fence::FenceId;
use super::GlContext;
use crate::error::{Error, Result};

/// Bytes of zeros in the constant buffer: buffers up to this size are cleared by one copy from
/// it; larger ones by `fill.comp`.
pub(crate) const ZERO_BLOCK: usize = 64 << 10;

/// The smallest capacity the pool allocates: counters and tiny tables share one class.
const MIN_CAPACITY: usize = 256;

/// What a pool has done, for tests and `--stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffer objects created (glBufferData), the constant buffer included.
    pub allocations: u64,
    /// Requests served by a free buffer.
    pub reuses: u64,
    /// Buffers deleted to keep the free ones within bounds.
    pub evictions: u64,
    /// Bytes held by free buffers now.
    pub free_bytes: u64,
    /// Bytes of the buffers taken now.
    pub taken_bytes: u64,
    /// The most bytes taken at once.
    pub peak_taken_bytes: u64,
}

impl std::fmt::Display for PoolStats {
    /// One `--stats` line: what the pool held at its peak and holds now.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        write!(
            f,
            "buffer pool:    {:.1} MiB taken at the peak, {:.1} MiB taken and {:.1} MiB free now; {} buffers made, {} reuses, {} evicted",
            mib(self.peak_taken_bytes),
            mib(self.taken_bytes),
            mib(self.free_bytes),
            self.allocations,
            self.reuses,
            self.evictions
        )
    }
}

/// Free buffers by capacity, with the counts above.
#[derive(Default)]
pub(crate) struct BufferPool {
    /// Free buffers, oldest first.
    free: RefCell<Vec<Free>>,
    stats: Cell<PoolStats>,
    /// Zeros ([`ZERO_BLOCK`] bytes) then one u32 = 1.
    constants: Cell<Option<glow::Buffer>>,
}

/// A free buffer: its capacity in bytes, and the fence it was released with.
struct Free {
    capacity: usize,
    buffer: glow::Buffer,
    fence: Option<FenceId>,
}

/// The capacity a request of `bytes` is allocated with: a multiple of 16 (the zero fill clears
/// whole 16-byte words), at least [`MIN_CAPACITY`], rounded up to a quarter of the power of two
/// below it.
pub(crate) fn size_class(bytes: usize) -> usize {
    let bytes = bytes.max(MIN_CAPACITY);
    let step = (1usize << (usize::BITS - 1 - bytes.leading_zeros())) / 4;
    bytes.div_ceil(step) * step
}

impl BufferPool {
    fn update(&self, f: impl FnOnce(&mut PoolStats)) {
        let mut stats = self.stats.get();
        f(&mut stats);
        self.stats.set(stats);
    }

    /// Take a free buffer that holds `bytes`, if one fits (see the module docs).
    fn take(&self, bytes: usize) -> Option<Free> {
        let limit = (2 * bytes).max(MIN_CAPACITY);
        let mut free = self.free.borrow_mut();
        let best = free
            .iter()
            .enumerate()
            .filter(|(_, f)| f.capacity >= bytes && f.capacity <= limit)
            .min_by_key(|(_, f)| f.capacity)
            .map(|(i, _)| i)?;
        let taken = free.remove(best);
        self.update(|s| {
            s.reuses += 1;
            s.free_bytes -= taken.capacity as u64;
        });
        Some(taken)
    }

    fn taken(&self, capacity: usize) {
        self.update(|s| {
            s.taken_bytes += capacity as u64;
            s.peak_taken_bytes = s.peak_taken_bytes.max(s.taken_bytes);
        });
    }

    /// A buffer comes back with the fence it waits on: keep it for the next request, and hand
    /// back the oldest free ones to delete when they exceed twice the peak taken.
    fn give_back(
        &self,
        buffer: glow::Buffer,
        capacity: usize,
        fence: Option<FenceId>,
    ) -> Vec<Free> {
        let mut free = self.free.borrow_mut();
        free.push(Free {
            capacity,
            buffer,
            fence,
        });
        self.update(|s| {
            s.taken_bytes -= capacity as u64;
            s.free_bytes += capacity as u64;
        });
        let mut evicted = Vec::new();
        while self.stats.get().free_bytes > 2 * self.stats.get().peak_taken_bytes {
            let oldest = free.remove(0);
            self.update(|s| {
                s.free_bytes -= oldest.capacity as u64;
                s.evictions += 1;
            });
            evicted.push(oldest);
        }
        evicted
    }
}

impl GlContext {
    /// A pooled buffer of `bytes` whose contents start undefined: for space a shader writes
    /// before it reads. Taken from the pool when a free buffer fits, else allocated; poisoned in
    /// strict mode.
    pub fn scratch(&self, bytes: usize) -> Result<GpuBuffer<'_>> {
        let buffer = self.take_pooled(bytes, "scratch")?;
        self.poison(&buffer);
        Ok(buffer)
    }

    /// A pooled buffer of `bytes` for `purpose`, contents undefined and not poisoned (the caller
    /// fills it at once). A free buffer is reused only once the GPU work issued before its
    /// release is done, or the GPU waits for it (`fence.rs`).
    pub(crate) fn take_pooled(&self, bytes: usize, purpose: &str) -> Result<GpuBuffer<'_>> {
        if let Some(free) = self.pool.take(bytes) {
            let (_, serial) = self
                .fences
                .before_reuse(&self.gl, free.fence, !self.is_strict());
            self.with_checker(|c| {
                if free.fence.is_some() {
                    c.fence_done(serial);
                }
                c.take(id(free.buffer), purpose);
            });
            self.gl_called("glWaitSync");
            self.pool.taken(free.capacity);
            return Ok(GpuBuffer::pooled(self, free.buffer, bytes, free.capacity));
        }
        let capacity = size_class(bytes);
        let _span = crate::timeline::span(|| format!("make a {} MiB buffer", capacity >> 20));
        let buffer = allocate(self, capacity)?;
        self.pool.update(|s| s.allocations += 1);
        self.pool.taken(capacity);
        Ok(GpuBuffer::pooled(self, buffer, bytes, capacity))
    }

    /// A pooled buffer comes back from its owner (`GpuBuffer`'s drop): released with a fence.
    pub(crate) fn give_back(&self, buffer: glow::Buffer, capacity: usize) {
        self.unbind_everywhere(buffer);
        let fence = self.fences.on_release(&self.gl, self.checker_serial());
        self.gl_called("glFenceSync");
        self.with_checker(|c| c.released(id(buffer)));
        for evicted in self.pool.give_back(buffer, capacity, fence) {
            self.delete_free(evicted);
        }
    }

    fn delete_free(&self, free: Free) {
        self.fences.forget(&self.gl, free.fence);
        // SAFETY: the buffer was made on this context and nothing holds it any more; GL keeps
        // its storage until the work issued with it is done.
        unsafe { self.gl.delete_buffer(free.buffer) };
        self.with_checker(|c| c.deleted(id(free.buffer)));
    }

    /// Delete every free buffer, the constants and the release fences (the context is being
    /// dropped, or asked to let its memory go).
    pub(crate) fn clear_pool(&self) {
        let free: Vec<Free> = self.pool.free.borrow_mut().drain(..).collect();
        for f in free {
            self.delete_free(f);
        }
        if let Some(buffer) = self.pool.constants.take() {
            // SAFETY: as in `delete_free`.
            unsafe { self.gl.delete_buffer(buffer) };
            self.with_checker(|c| c.deleted(id(buffer)));
        }
        self.fences.clear(&self.gl);
        self.pool.update(|s| s.free_bytes = 0);
    }

    /// A pooled buffer holding `data` (an upload, timed as the "upload" stage).
    pub fn upload<T: bytemuck::Pod>(&self, data: &[T]) -> Result<GpuBuffer<'_>> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let buffer = self.take_pooled(bytes.len().max(16), "an upload")?;
        if bytes.len() < buffer.capacity() {
            // Whatever the data leaves is poison in strict mode.
            self.poison(&buffer);
        }
        self.timed("upload", bytes.len() as u64, || {
            buffer.write_as(bytes, "an upload")
        });
        Ok(buffer)
    }

    /// Release pooled buffers without fences (`false`), as the pool did before them, so that a
    /// test can show strict mode's hazard checker catching the hazard; `true` (the default)
    /// fences them again. Never for real work: on a GPU it writes wrong pixels.
    #[doc(hidden)]
    pub fn use_release_fences(&self, on: bool) {
        self.fences.disabled.set(!on);
    }

    /// What the release fences have done since the context was made.
    pub fn fence_stats(&self) -> super::fence::FenceStats {
        self.fences.stats.get()
    }

    /// What the pool has done since the context was made.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats.get()
    }

    /// Delete the pool's free buffers and the free mapped staging and readback buffers
    /// (buffers still taken come back later as usual): for a long-lived context that wants its
    /// GPU and pinned memory back between jobs.
    pub fn release_pooled(&self) {
        self.clear_pool();
        self.clear_mapped();
    }

    /// The constant buffer, made on first use: [`ZERO_BLOCK`] bytes of zeros followed by one
    /// u32 = 1, uploaded once per context.
    fn constants(&self) -> Result<glow::Buffer> {
        if let Some(buffer) = self.pool.constants.get() {
            return Ok(buffer);
        }
        let bytes = ZERO_BLOCK + 16;
        let buffer = allocate(self, bytes)?;
        self.pool.update(|s| s.allocations += 1);
        // Uploaded, once per context: a fill dispatch here would rebind storage binding 0 in
        // the middle of whichever stage first asked for zeros.
        let mut data = vec![0u32; bytes / 4];
        data[ZERO_BLOCK / 4] = 1;
        GpuBuffer::borrowed(self, buffer, bytes).write_as(&data, "the constant zeros");
        self.pool.constants.set(Some(buffer));
        Ok(buffer)
    }

    /// Copy `bytes` of the constant buffer from byte `from` into `dst` at byte `to`.
    fn copy_constant(&self, from: usize, dst: &GpuBuffer, to: usize, bytes: usize) -> Result<()> {
        let constants = self.constants()?;
        let what = if from == ZERO_BLOCK {
            "a counter set to 1"
        } else {
            "a zero fill"
        };
        self.timed("fill", bytes as u64, || {
            self.copy_buffer(constants, from, dst.buffer, to, bytes, what)
        })
    }

    /// Copy `bytes` from `src` at byte `from` into `dst` at byte `to` (`glCopyBufferSubData`;
    /// `what` says why, for the hazard checker). The ranges must lie inside the buffers.
    pub(crate) fn copy_buffer(
        &self,
        src: glow::Buffer,
        from: usize,
        dst: glow::Buffer,
        to: usize,
        bytes: usize,
        what: &str,
    ) -> Result<()> {
        self.with_checker(|c| c.copy(id(src), id(dst), what));
        self.fences.issued();
        // SAFETY: both ranges lie inside their buffers (the callers check).
        unsafe {
            self.gl.bind_buffer(glow::COPY_READ_BUFFER, Some(src));
            self.gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(dst));
            self.gl.copy_buffer_sub_data(
                glow::COPY_READ_BUFFER,
                glow::COPY_WRITE_BUFFER,
                from as i32,
                to as i32,
                bytes as i32,
            );
        }
        self.check("glCopyBufferSubData")
    }

    /// `glFinish`: wait until the GPU has done everything issued (for honest host timings);
    /// every release fence and hazard is then behind us.
    pub fn finish(&self) {
        // SAFETY: a plain finish on the current context.
        unsafe { self.gl.finish() };
        self.fences.finished();
        self.with_checker(|c| c.finish());
        self.gl_called("glFinish");
    }

    /// Set u32 element `index` of `buffer` to 1 on the GPU (a counter's start), without a host
    /// upload.
    pub(crate) fn set_u32_one(&self, buffer: &GpuBuffer, index: usize) -> Result<()> {
        if (index + 1) * 4 > buffer.bytes {
            return Err(Error::internal("a counter outside its buffer"));
        }
        self.copy_constant(ZERO_BLOCK, buffer, index * 4, 4)
    }

    /// Zero the first `bytes` of `buffer` by a copy from the constant zeros (`bytes` at most
    /// [`ZERO_BLOCK`]).
    pub(crate) fn zero_small(&self, buffer: &GpuBuffer, bytes: usize) -> Result<()> {
        if bytes > ZERO_BLOCK || bytes > buffer.capacity() {
            return Err(Error::internal("a small clear past its buffer"));
        }
        if bytes == 0 {
            return Ok(());
        }
        self.copy_constant(0, buffer, 0, bytes)
    }
}

impl GlContext {
    /// A zero-filled pooled buffer of `bytes` (at least 16), cleared on the GPU: large ones by
    /// `fill.comp`, small ones by a copy from the pool's constant zeros. Uploading a host buffer
    /// of zeros costs a bus transfer per byte (hundreds of MiB per merged image at 1080p), which
    /// dominated merge times on a discrete GPU; a dispatch per tiny counter costs more than a
    /// copy.
    pub fn zeroed(&self, bytes: usize) -> Result<GpuBuffer<'_>> {
        let whole = bytes.max(16).div_ceil(16) * 16;
        // Sizes as they were before the pool (whole words from the fill's size on), so that
        // `--stats` reports the same buffer bytes.
        let bytes = if whole < ZERO_BLOCK {
            bytes.max(16)
        } else {
            whole
        };
        let buffer = self.scratch(bytes)?;
        if whole <= ZERO_BLOCK {
            self.zero_small(&buffer, whole)?;
        } else {
            self.fill_words(&buffer, whole / 16)?;
        }
        Ok(buffer)
    }

    /// Set every byte of `buffer` to 0 on the GPU (its whole 16-byte words: pooled buffers hold
    /// whole words past their size).
    pub fn fill_zero(&self, buffer: &GpuBuffer) -> Result<()> {
        let words = buffer.bytes.div_ceil(16).min(buffer.capacity() / 16);
        let whole = words * 16;
        if whole <= ZERO_BLOCK {
            self.zero_small(buffer, whole)
        } else {
            self.fill_words(buffer, words)
        }
    }

    /// Zero the first `words` 16-byte words of `buffer` with `fill.comp`.
    pub(crate) fn fill_words(&self, buffer: &GpuBuffer, words: usize) -> Result<()> {
        if words == 0 {
            return Ok(());
        }
        let program = self.use_stage("fill.comp", &super::program::Defines::default())?;
        self.uniform_u32(program, "u_n", words as u32);
        buffer.bind_words(0, words * 16);
        self.set_dispatch_bytes((words * 16) as u64);
        self.dispatch(words, 64)
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_waste_at_most_a_quarter_and_hold_whole_words() {
        for bytes in (0..5000).chain([65535, 65536, 65537, 1 << 20, (1 << 20) + 1, 123_456_789]) {
            let class = size_class(bytes);
            assert!(
                class >= bytes.max(super::MIN_CAPACITY),
                "{bytes} -> {class}"
            );
            assert_eq!(class % 16, 0, "{bytes} -> {class}");
            if bytes >= super::MIN_CAPACITY {
                assert!(
                    class as f64 <= bytes as f64 * 1.25 + 16.0,
                    "{bytes} -> {class}"
                );
            }
        }
        // Classes are shared: nearby sizes round to the same capacity.
        assert_eq!(size_class(1000), size_class(1024));
        assert_eq!(size_class(16), size_class(200));
    }
}
