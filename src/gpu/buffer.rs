//! Shader storage buffers: creating buffer objects, and [`GpuBuffer`], which knows its size and
//! frees itself or goes back to its context's pool (`pool.rs`).

use glow::HasContext;

use super::GlContext;
use crate::error::{Error, Result};

/// What happens to the buffer object when its [`GpuBuffer`] drops.
enum Owner {
    /// Deleted.
    Own,
    /// Given back to its context's pool for the next request, with a fence
    /// (`fence.rs`) that keeps it out of use until the work issued so far is done.
    Pool,
    /// Nothing: someone else owns it (the pool's constant buffer, while it is filled).
    Borrowed,
}

/// One buffer object on the GPU.
pub struct GpuBuffer<'a> {
    ctx: &'a GlContext,
    /// The GL name.
    pub buffer: glow::Buffer,
    /// Size in bytes that the buffer stands for (bound, read, cleared, reported): at least 16
    /// from every constructor but [`Self::uninit`] and [`crate::gpu::GlContext::scratch`],
    /// which take what they are given (GL refuses empty storage blocks, and the zero fill
    /// clears whole 16-byte words). A pooled buffer's storage may be larger ([`Self::capacity`]).
    pub bytes: usize,
    capacity: usize,
    owner: Owner,
}

impl<'a> GpuBuffer<'a> {
    /// A zero-filled buffer of `bytes` (at least 16), uploaded from the host and not pooled
    /// ([`crate::gpu::GlContext::zeroed`] clears a pooled one on the GPU instead).
    pub fn zeroed(ctx: &'a GlContext, bytes: usize) -> Result<Self> {
        Self::from_slice(ctx, &vec![0u8; bytes.max(16)])
    }

    /// A buffer holding `data`, not pooled ([`crate::gpu::GlContext::upload`] pools it).
    pub fn from_slice<T: bytemuck::Pod>(ctx: &'a GlContext, data: &[T]) -> Result<Self> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let buffer = Self::uninit(ctx, bytes.len().max(16))?;
        buffer.write(bytes);
        Ok(buffer)
    }

    /// A buffer of `bytes` whose contents start undefined, not pooled: for scratch space a
    /// shader writes before it reads (no zero upload). Poisoned in strict mode.
    pub fn uninit(ctx: &'a GlContext, bytes: usize) -> Result<Self> {
        let buffer = allocate(ctx, bytes)?;
        let buffer = GpuBuffer {
            ctx,
            buffer,
            bytes,
            capacity: bytes,
            owner: Owner::Own,
        };
        ctx.poison(&buffer);
        Ok(buffer)
    }

    /// A pooled buffer object of `capacity` bytes standing for `bytes`.
    pub(crate) fn pooled(
        ctx: &'a GlContext,
        buffer: glow::Buffer,
        bytes: usize,
        capacity: usize,
    ) -> Self {
        GpuBuffer {
            ctx,
            buffer,
            bytes,
            capacity,
            owner: Owner::Pool,
        }
    }

    /// A buffer object made elsewhere (a pinned one, `gather.rs`) that dropping deletes.
    pub(crate) fn owned(ctx: &'a GlContext, buffer: glow::Buffer, bytes: usize) -> Self {
        GpuBuffer {
            ctx,
            buffer,
            bytes,
            capacity: bytes,
            owner: Owner::Own,
        }
    }

    /// A view of a buffer object owned elsewhere, which dropping leaves alone.
    pub(crate) fn borrowed(ctx: &'a GlContext, buffer: glow::Buffer, bytes: usize) -> Self {
        GpuBuffer {
            ctx,
            buffer,
            bytes,
            capacity: bytes,
            owner: Owner::Borrowed,
        }
    }

    /// The context the buffer belongs to.
    pub(crate) fn context(&self) -> &'a GlContext {
        self.ctx
    }

    /// Bytes of storage behind the buffer (at least [`Self::bytes`]).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bind to storage binding `index`: the first [`Self::bytes`] of it, so a pooled buffer
    /// binds the size it stands for, within the storage-block limit it was checked against.
    pub fn bind(&self, index: u32) {
        if self.bytes == self.capacity || self.bytes == 0 {
            self.ctx.bind_storage_buffer(index, self.buffer);
        } else {
            self.bind_words(index, self.bytes);
        }
    }

    /// Bind the first `bytes` of the buffer to storage binding `index`.
    pub(crate) fn bind_words(&self, index: u32, bytes: usize) {
        assert!(bytes <= self.capacity, "a binding outside a GPU buffer");
        // SAFETY: the buffer is alive and the range lies inside it.
        unsafe {
            self.ctx.gl.bind_buffer_range(
                glow::SHADER_STORAGE_BUFFER,
                index,
                Some(self.buffer),
                0,
                bytes as i32,
            )
        };
        self.ctx.note_binding(index, self.buffer);
        self.ctx.with_checker(|c| c.bind(index, id(self.buffer)));
        self.ctx.gl_called("glBindBufferRange");
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
        self.ctx.with_checker(|c| c.readback(id(self.buffer)));
        self.ctx.fences.issued();
        // SAFETY: the range lies inside the bound buffer.
        unsafe {
            self.ctx
                .gl
                .get_buffer_sub_data(glow::SHADER_STORAGE_BUFFER, at, bytes)
        };
        self.ctx.gl_called("glGetBufferSubData");
        out
    }

    /// Read `out.len()` bytes from byte `at` now (`glGetBufferSubData`: the host waits).
    pub(crate) fn read_bytes_at(&self, at: usize, out: &mut [u8]) {
        let at = self.bind_range::<u8>(at, out.len());
        self.ctx.with_checker(|c| c.readback(id(self.buffer)));
        self.ctx.fences.issued();
        // SAFETY: the range lies inside the bound buffer.
        unsafe {
            self.ctx
                .gl
                .get_buffer_sub_data(glow::SHADER_STORAGE_BUFFER, at, out)
        };
        self.ctx.gl_called("glGetBufferSubData");
    }

    /// Write `bytes` at byte `at` (`glBufferSubData`; `what` names them for the hazard checker).
    pub(crate) fn write_bytes_at(&self, at: usize, bytes: &[u8], what: &str) {
        self.write_range_as::<u8>(at, bytes, what);
    }

    /// Overwrite the start of the buffer with `data`.
    pub fn write<T: bytemuck::Pod>(&self, data: &[T]) {
        self.write_range(0, data);
    }

    /// Overwrite elements from element `first` on with `data`.
    pub fn write_range<T: bytemuck::Pod>(&self, first: usize, data: &[T]) {
        self.write_range_as(first, data, "host data");
    }

    /// [`Self::write`], saying what is written (for the hazard checker's messages).
    pub(crate) fn write_as<T: bytemuck::Pod>(&self, data: &[T], what: &str) {
        self.write_range_as(0, data, what);
    }

    fn write_range_as<T: bytemuck::Pod>(&self, first: usize, data: &[T], what: &str) {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let at = self.bind_range::<T>(first, bytes.len());
        self.ctx.with_checker(|c| c.upload(id(self.buffer), what));
        self.ctx.fences.issued();
        // SAFETY: the range lies inside the bound buffer.
        unsafe {
            self.ctx
                .gl
                .buffer_sub_data_u8_slice(glow::SHADER_STORAGE_BUFFER, at, bytes)
        };
        self.ctx.gl_called("glBufferSubData");
    }

    /// Bind the buffer for a host transfer of `len` bytes from element `first` (of type `T`) on,
    /// and return that byte offset. The range must lie inside the buffer: callers size their
    /// transfers from the buffer's own counts, so a range outside it is a bug, not bad input.
    fn bind_range<T>(&self, first: usize, len: usize) -> i32 {
        let at = first * std::mem::size_of::<T>();
        assert!(at + len <= self.capacity, "transfer outside a GPU buffer");
        // SAFETY: the buffer is alive.
        unsafe {
            self.ctx
                .gl
                .bind_buffer(glow::SHADER_STORAGE_BUFFER, Some(self.buffer))
        };
        at as i32
    }
}

/// The GL name of `buffer` as the hazard checker keys it.
pub(crate) fn id(buffer: glow::Buffer) -> u32 {
    buffer.0.get()
}

impl super::GlContext {
    /// Bind the whole of `buffer` (of this context: a [`GpuBuffer`]'s, or one of the viewer's
    /// own) to storage binding `index`.
    pub(crate) fn bind_storage_buffer(&self, index: u32, buffer: glow::Buffer) {
        // SAFETY: the caller's buffer belongs to this context.
        unsafe {
            self.gl
                .bind_buffer_base(glow::SHADER_STORAGE_BUFFER, index, Some(buffer))
        };
        self.note_binding(index, buffer);
        self.with_checker(|c| c.bind(index, id(buffer)));
        self.gl_called("glBindBufferBase");
    }

    /// Remember what binding `index` holds.
    pub(crate) fn note_binding(&self, index: u32, buffer: glow::Buffer) {
        let mut bindings = self.storage_bindings.borrow_mut();
        let index = index as usize;
        if bindings.len() <= index {
            bindings.resize(index + 1, None);
        }
        bindings[index] = Some(buffer);
    }

    /// Unbind `buffer` from every storage binding that holds it: it is going back to the pool
    /// (or away). GL keeps a binding to a released buffer, and a later dispatch whose program
    /// declares that block, even one the dispatch never reads, would then name a buffer that
    /// belongs to its next owner: on an H100, strict mode counted such a use and failed a pool
    /// take that nothing had really raced, and a shader that did read it would read another
    /// band's data. Unbound, a block the dispatch does not use names nothing.
    pub(crate) fn unbind_everywhere(&self, buffer: glow::Buffer) {
        let mut bindings = self.storage_bindings.borrow_mut();
        for (index, slot) in bindings.iter_mut().enumerate() {
            if *slot == Some(buffer) {
                // SAFETY: unbinding an indexed binding point of the current context.
                unsafe {
                    self.gl
                        .bind_buffer_base(glow::SHADER_STORAGE_BUFFER, index as u32, None)
                };
                *slot = None;
                self.with_checker(|c| c.unbind(index as u32));
                self.gl_called("glBindBufferBase");
            }
        }
    }
}

impl Drop for GpuBuffer<'_> {
    fn drop(&mut self) {
        match self.owner {
            Owner::Own => {
                self.ctx.unbind_everywhere(self.buffer);
                // SAFETY: the buffer belongs to this context; GL keeps its storage until the
                // work issued with it is done.
                unsafe { self.ctx.gl.delete_buffer(self.buffer) };
                self.ctx.with_checker(|c| c.deleted(id(self.buffer)));
            }
            Owner::Pool => self.ctx.give_back(self.buffer, self.capacity),
            Owner::Borrowed => {}
        }
    }
}

/// Create a buffer object of `bytes` (uninitialised storage).
pub(crate) fn allocate(ctx: &GlContext, bytes: usize) -> Result<glow::Buffer> {
    let immutable = ctx.buffer_storage() == super::mapped::BufferStorage::Immutable;
    let buffer = allocate_raw(&ctx.gl, bytes, immutable)?;
    ctx.with_checker(|c| c.allocated(id(buffer)));
    Ok(buffer)
}

/// [`allocate`] on a bare function table (the viewer's own buffers, outside the engine):
/// immutable storage (`glBufferStorage`, updated by `glBufferSubData` only) or mutable
/// (`glBufferData`).
pub(crate) fn allocate_raw(
    gl: &glow::Context,
    bytes: usize,
    immutable: bool,
) -> Result<glow::Buffer> {
    let size = i32::try_from(bytes)
        .map_err(|_| Error::GlMemory(format!("a buffer of {bytes} bytes is too large")))?;
    // SAFETY: plain object creation on the current context.
    unsafe {
        let buffer = gl
            .create_buffer()
            .map_err(|e| Error::Gl(format!("cannot create a buffer: {e}")))?;
        gl.bind_buffer(glow::SHADER_STORAGE_BUFFER, Some(buffer));
        if immutable {
            gl.buffer_storage(
                glow::SHADER_STORAGE_BUFFER,
                size,
                None,
                glow::DYNAMIC_STORAGE_BIT,
            );
        } else {
            gl.buffer_data_size(glow::SHADER_STORAGE_BUFFER, size, glow::DYNAMIC_COPY);
        }
        if gl.get_error() == glow::OUT_OF_MEMORY {
            gl.delete_buffer(buffer);
            return Err(Error::GlMemory(format!(
                "out of GPU memory allocating {bytes} bytes"
            )));
        }
        Ok(buffer)
    }
}
