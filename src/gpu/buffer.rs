//! Shader storage buffers that know their size and free themselves, or go back to their
//! context's pool (`pool.rs`).

use glow::HasContext;

use super::pool::{allocate, BufferPool, ZERO_BLOCK};
use crate::error::Result;

/// What happens to the buffer object when its [`GpuBuffer`] drops.
enum Owner<'a> {
    /// Deleted.
    Own,
    /// Given back to the pool for the next request.
    Pool(&'a BufferPool),
    /// Nothing: someone else owns it (the pool's constant buffer, while it is filled).
    Borrowed,
}

/// One buffer object on the GPU.
pub struct GpuBuffer<'a> {
    gl: &'a glow::Context,
    /// The GL name.
    pub buffer: glow::Buffer,
    /// Size in bytes that the buffer stands for (bound, read, cleared, reported): at least 16
    /// from every constructor but [`Self::uninit`] and [`crate::gpu::GlContext::scratch`],
    /// which take what they are given (GL refuses empty storage blocks, and the zero fill
    /// clears whole 16-byte words). A pooled buffer's storage may be larger ([`Self::capacity`]).
    pub bytes: usize,
    capacity: usize,
    owner: Owner<'a>,
}

impl<'a> GpuBuffer<'a> {
    /// A zero-filled buffer of `bytes` (at least 16), uploaded from the host and not pooled
    /// ([`crate::gpu::GlContext::zeroed`] clears a pooled one on the GPU instead).
    pub fn zeroed(gl: &'a glow::Context, bytes: usize) -> Result<Self> {
        Self::from_slice(gl, &vec![0u8; bytes.max(16)])
    }

    /// A buffer holding `data`, not pooled ([`crate::gpu::GlContext::upload`] pools it).
    pub fn from_slice<T: bytemuck::Pod>(gl: &'a glow::Context, data: &[T]) -> Result<Self> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let buffer = Self::uninit(gl, bytes.len().max(16))?;
        buffer.write(bytes);
        Ok(buffer)
    }

    /// A buffer of `bytes` whose contents start undefined, not pooled: for scratch space a
    /// shader writes before it reads (no zero upload).
    pub fn uninit(gl: &'a glow::Context, bytes: usize) -> Result<Self> {
        let buffer = allocate(gl, bytes)?;
        Ok(GpuBuffer {
            gl,
            buffer,
            bytes,
            capacity: bytes,
            owner: Owner::Own,
        })
    }

    /// A pooled buffer object of `capacity` bytes standing for `bytes`.
    pub(crate) fn pooled(
        gl: &'a glow::Context,
        buffer: glow::Buffer,
        bytes: usize,
        capacity: usize,
        pool: &'a BufferPool,
    ) -> Self {
        GpuBuffer {
            gl,
            buffer,
            bytes,
            capacity,
            owner: Owner::Pool(pool),
        }
    }

    /// A view of a buffer object owned elsewhere, which dropping leaves alone.
    pub(crate) fn borrowed(gl: &'a glow::Context, buffer: glow::Buffer, bytes: usize) -> Self {
        GpuBuffer {
            gl,
            buffer,
            bytes,
            capacity: bytes,
            owner: Owner::Borrowed,
        }
    }

    /// Bytes of storage behind the buffer (at least [`Self::bytes`]).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bind to storage binding `index`: the first [`Self::bytes`] of it, so a pooled buffer
    /// binds the size it stands for, within the storage-block limit it was checked against.
    pub fn bind(&self, index: u32) {
        // SAFETY: the buffer is alive and the range lies inside it.
        unsafe {
            if self.bytes == self.capacity || self.bytes == 0 {
                self.gl
                    .bind_buffer_base(glow::SHADER_STORAGE_BUFFER, index, Some(self.buffer))
            } else {
                self.gl.bind_buffer_range(
                    glow::SHADER_STORAGE_BUFFER,
                    index,
                    Some(self.buffer),
                    0,
                    self.bytes as i32,
                )
            }
        };
    }

    /// Read the first `len` elements back.
    pub fn read<T: bytemuck::Pod + Default>(&self, len: usize) -> Vec<T> {
        self.read_range(0, len)
    }

    /// Read `len` elements starting at element `first`.
    pub fn read_range<T: bytemuck::Pod + Default>(&self, first: usize, len: usize) -> Vec<T> {
        let mut out = vec![T::default(); len];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        let at = self.bind_range::<T>(first, bytes.len());
        // SAFETY: the range lies inside the bound buffer.
        unsafe {
            self.gl
                .get_buffer_sub_data(glow::SHADER_STORAGE_BUFFER, at, bytes)
        };
        out
    }

    /// Overwrite the start of the buffer with `data`.
    pub fn write<T: bytemuck::Pod>(&self, data: &[T]) {
        self.write_range(0, data);
    }

    /// Overwrite elements from element `first` on with `data`.
    pub fn write_range<T: bytemuck::Pod>(&self, first: usize, data: &[T]) {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let at = self.bind_range::<T>(first, bytes.len());
        // SAFETY: the range lies inside the bound buffer.
        unsafe {
            self.gl
                .buffer_sub_data_u8_slice(glow::SHADER_STORAGE_BUFFER, at, bytes)
        };
    }

    /// Bind the buffer for a host transfer of `len` bytes from element `first` (of type `T`) on,
    /// and return that byte offset. The range must lie inside the buffer: callers size their
    /// transfers from the buffer's own counts, so a range outside it is a bug, not bad input.
    fn bind_range<T>(&self, first: usize, len: usize) -> i32 {
        let at = first * std::mem::size_of::<T>();
        assert!(at + len <= self.capacity, "transfer outside a GPU buffer");
        // SAFETY: the buffer is alive.
        unsafe {
            self.gl
                .bind_buffer(glow::SHADER_STORAGE_BUFFER, Some(self.buffer))
        };
        at as i32
    }
}

impl super::GlContext {
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
        let words = buffer.bytes.div_ceil(16).min(buffer.capacity / 16);
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
        // SAFETY: the buffer is alive and holds `words` whole words.
        unsafe {
            self.gl.bind_buffer_range(
                glow::SHADER_STORAGE_BUFFER,
                0,
                Some(buffer.buffer),
                0,
                (words * 16) as i32,
            )
        };
        self.set_dispatch_bytes((words * 16) as u64);
        self.dispatch(words, 64)
    }
}

impl Drop for GpuBuffer<'_> {
    fn drop(&mut self) {
        match self.owner {
            Owner::Own => {
                // SAFETY: the buffer belongs to this context and nothing uses it any more.
                unsafe { self.gl.delete_buffer(self.buffer) };
            }
            Owner::Pool(pool) => pool.give_back(self.gl, self.buffer, self.capacity),
            Owner::Borrowed => {}
        }
    }
}
