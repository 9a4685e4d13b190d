//! Shader storage buffers that know their size and free themselves.

use glow::HasContext;

use crate::error::{Error, Result};

/// One buffer object on the GPU.
pub struct GpuBuffer<'a> {
    gl: &'a glow::Context,
    /// The GL name.
    pub buffer: glow::Buffer,
    /// Size in bytes: at least 16 from every constructor but [`Self::uninit`], which takes what it
    /// is given (GL refuses empty storage blocks, and the zero fill clears whole 16-byte words).
    pub bytes: usize,
}

impl<'a> GpuBuffer<'a> {
    /// A zero-filled buffer of `bytes` (at least 16).
    pub fn zeroed(gl: &'a glow::Context, bytes: usize) -> Result<Self> {
        // glow 0.16 has no glClearBufferData; a calloc'd upload is cheap enough.
        Self::from_slice(gl, &vec![0u8; bytes.max(16)])
    }

    /// A buffer holding `data`.
    pub fn from_slice<T: bytemuck::Pod>(gl: &'a glow::Context, data: &[T]) -> Result<Self> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let buffer = Self::uninit(gl, bytes.len().max(16))?;
        // SAFETY: the buffer is at least as large as `bytes`.
        unsafe {
            gl.bind_buffer(glow::SHADER_STORAGE_BUFFER, Some(buffer.buffer));
            gl.buffer_sub_data_u8_slice(glow::SHADER_STORAGE_BUFFER, 0, bytes);
        }
        Ok(buffer)
    }

    /// A buffer of `bytes` whose contents start undefined: for scratch space a shader writes
    /// before it reads (no zero upload).
    pub fn uninit(gl: &'a glow::Context, bytes: usize) -> Result<Self> {
        let size = i32::try_from(bytes)
            .map_err(|_| Error::GlMemory(format!("a buffer of {bytes} bytes is too large")))?;
        // SAFETY: plain object creation on the current context.
        unsafe {
            let buffer = gl
                .create_buffer()
                .map_err(|e| Error::Gl(format!("cannot create a buffer: {e}")))?;
            gl.bind_buffer(glow::SHADER_STORAGE_BUFFER, Some(buffer));
            gl.buffer_data_size(glow::SHADER_STORAGE_BUFFER, size, glow::DYNAMIC_COPY);
            if gl.get_error() == glow::OUT_OF_MEMORY {
                gl.delete_buffer(buffer);
                return Err(Error::GlMemory(format!(
                    "out of memory allocating {bytes} bytes"
                )));
            }
            Ok(GpuBuffer { gl, buffer, bytes })
        }
    }

    /// Bind to storage binding `index`.
    pub fn bind(&self, index: u32) {
        // SAFETY: the buffer is alive.
        unsafe {
            self.gl
                .bind_buffer_base(glow::SHADER_STORAGE_BUFFER, index, Some(self.buffer))
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
        assert!(at + len <= self.bytes, "transfer outside a GPU buffer");
        // SAFETY: the buffer is alive.
        unsafe {
            self.gl
                .bind_buffer(glow::SHADER_STORAGE_BUFFER, Some(self.buffer))
        };
        at as i32
    }
}

impl super::GlContext {
    /// A zero-filled buffer of `bytes` (at least 16). Large ones are cleared on the GPU by
    /// `fill.comp`: uploading a host buffer of zeros costs a bus transfer per byte (hundreds of
    /// MiB per merged image at 1080p), which dominated merge times on a discrete GPU. Small ones
    /// are uploaded, which costs less than a dispatch.
    pub fn zeroed(&self, bytes: usize) -> Result<GpuBuffer<'_>> {
        const UPLOAD_BELOW: usize = 64 << 10;
        if bytes < UPLOAD_BELOW {
            return self.timed("upload", bytes as u64, || {
                GpuBuffer::zeroed(&self.gl, bytes)
            });
        }
        let buffer = GpuBuffer::uninit(&self.gl, bytes.div_ceil(16) * 16)?;
        self.fill_zero(&buffer)?;
        Ok(buffer)
    }

    /// Set every byte of `buffer` to 0 on the GPU (its whole 16-byte words; buffers made here
    /// are whole words long).
    pub fn fill_zero(&self, buffer: &GpuBuffer) -> Result<()> {
        let words = buffer.bytes / 16;
        let program = self.use_stage("fill.comp", &super::program::Defines::default())?;
        self.uniform_u32(program, "u_n", words as u32);
        buffer.bind(0);
        self.set_dispatch_bytes(buffer.bytes as u64);
        self.dispatch(words, 64)
    }
}

impl Drop for GpuBuffer<'_> {
    fn drop(&mut self) {
        // SAFETY: the buffer belongs to this context and nothing uses it any more.
        unsafe { self.gl.delete_buffer(self.buffer) };
    }
}
