//! Staging by the reader (`DEEPMERGE_GL_READER_STAGING=1`, a measurement setting, off by
//! default): the reader's decode threads copy a band's planes into GPU-visible memory as soon as
//! they have decoded it, while the merging thread is still busy with the band before, and the
//! merging thread then only issues the GPU's copies out of that memory.
//!
//! Why: on an NVIDIA H100 host at 16 threads the GL engine's flat merge is bound by its merging
//! thread, which spent 190 of its 470 ms copying decoded planes into staging memory (its own
//! staging rounds, `mapped.rs`), most of them beside the next band's decode. Copied on the
//! reader's threads, the same bytes move off that thread; whether the whole merge gains depends
//! on how much the copy then slows the decode, which only hardware can say
//! (`benches/hardware/contention.sh`), hence a setting.
//!
//! How:
//! - [`ReaderStaging`] is the part both threads share: persistently mapped blocks of the staging
//!   round's size that the reader may fill, and the bands it staged. The reader takes as many
//!   free blocks as a band's planes need, or none (then that band is staged as before); it
//!   never waits and never calls GL.
//! - [`ReaderStagingOnGl`] is the merging thread's part: it makes the blocks (up to twice what
//!   the largest band needs), lends a staged band to the context while the band's GPU work is
//!   issued ([`GlContext::copy_reader_staged`]: a piece that lies inside a staged plane becomes
//!   GPU copies out of the blocks), then fences the blocks, and gives them back to the reader
//!   only once the host has waited on that fence, as staging buffers are.
//! - A staged plane is found by its host address: the images a band's pieces come from are the
//!   ones the reader staged, alive and unchanged until the band is issued (inputs that pruning
//!   rewrites are not staged by the reader at all). A piece found in none is staged as before,
//!   so the bytes never depend on what the reader managed to stage.
//! - The strict mode's hazard checker sees the reader's writes when a block is given to the
//!   reader (from then on it may write at any time): a block whose last copies are not known
//!   finished is a hazard there, as for any staging buffer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rayon::prelude::*;

use super::buffer::id;
use super::mapped::{Fence, MappedBuffer, Piece, SharedPtr, TransferPath};
use super::GlContext;
use crate::deep::{ChannelRole, DeepImage, Plane};
use crate::env_setting::env_setting;
use crate::error::Result;

/// Copies of at most this many bytes each, so that every decode thread gets work.
const COPY_PIECE_BYTES: usize = 1 << 20;

/// How much mapped memory staging by the reader may pin, as `DEEPMERGE_GL_READER_STAGING` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReaderStagingSize {
    /// Enough for every plane: blocks for twice the largest band's (`1`).
    TwoBands,
    /// At most this many bytes (`<size>`, e.g. `64M`): the reader stages the planes that fit,
    /// the merging thread the rest. Making pinned memory costs (0.4 ms a MiB on an H100 host),
    /// so a bound trades the copies moved off the merging thread against that.
    Bytes(usize),
}

/// What `DEEPMERGE_GL_READER_STAGING` asks for: `1` has the reader's threads stage each band's
/// planes, a size (`64M`, from 1M to 16G) bounds the memory that pins, `0` (or unset) leaves
/// staging to the merging thread (`None`); anything else is an error that names the variable.
pub fn reader_staging_from(value: Option<&str>) -> Result<Option<ReaderStagingSize>> {
    let text = value.map(str::trim).unwrap_or_default();
    match text {
        "" | "0" => return Ok(None),
        "1" => return Ok(Some(ReaderStagingSize::TwoBands)),
        _ => {}
    }
    match crate::size::parse_bytes(text) {
        Ok(bytes) if ((1 << 20)..=(16 << 30)).contains(&bytes) => {
            Ok(Some(ReaderStagingSize::Bytes(bytes as usize)))
        }
        _ => Err(crate::error::Error::Usage(format!(
            "DEEPMERGE_GL_READER_STAGING={text}: use 1 (the reader's threads stage every plane), \
             a size from 1M to 16G (at most that much mapped memory: 64M) or 0 (off)"
        ))),
    }
}

/// [`reader_staging_from`] of the environment now.
pub fn reader_staging_from_env() -> Result<Option<ReaderStagingSize>> {
    reader_staging_from(env_setting("DEEPMERGE_GL_READER_STAGING").as_deref())
}

/// A mapped block the reader may fill: its buffer, where it is mapped, its usable bytes.
#[derive(Clone, Copy)]
struct Block {
    buffer: glow::Buffer,
    ptr: SharedPtr,
    bytes: usize,
    /// The mapping's whole size, to give the buffer back as it was made.
    capacity: usize,
}

impl Block {
    /// The mapped buffer this block is.
    fn mapped(self) -> MappedBuffer {
        MappedBuffer {
            buffer: self.buffer,
            ptr: self.ptr.0,
            capacity: self.capacity,
        }
    }
}

/// One staged plane: its host address range and where it starts in the band's blocks, laid end
/// to end.
struct StagedPlane {
    host: usize,
    len: usize,
    at: usize,
}

/// A band's planes as the reader copied them into its blocks.
pub(crate) struct StagedBand {
    blocks: Vec<Block>,
    planes: Vec<StagedPlane>,
    block_bytes: usize,
}

impl StagedBand {
    /// Where the bytes `bytes` lie in the blocks, when they lie inside one staged plane:
    /// (block, byte offset in it, offset in `bytes`, length) for each block they span.
    fn find(&self, bytes: &[u8]) -> Option<Vec<(Block, usize, usize, usize)>> {
        let addr = bytes.as_ptr() as usize;
        let plane = self
            .planes
            .iter()
            .find(|p| p.host <= addr && addr + bytes.len() <= p.host + p.len)?;
        let mut at = plane.at + (addr - plane.host);
        let mut from = 0;
        let mut segments = Vec::new();
        while from < bytes.len() {
            let (block, offset) = (at / self.block_bytes, at % self.block_bytes);
            let take = (self.block_bytes - offset).min(bytes.len() - from);
            segments.push((self.blocks[block], offset, from, take));
            from += take;
            at += take;
        }
        Some(segments)
    }
}

/// What the reader and the merging thread share.
#[derive(Default)]
struct Shared {
    /// Blocks whose last copies are known finished, for the reader to fill.
    free: Vec<Block>,
    /// Bands the reader staged, by their first row, for the merging thread.
    staged: Vec<(i32, StagedBand)>,
    /// Bands the reader found too few free blocks for (staged by the merging thread instead).
    missed: u64,
}

/// The reader's side of staging by the reader: shared with the merging thread
/// ([`ReaderStagingOnGl`]).
pub struct ReaderStaging {
    shared: Mutex<Shared>,
    /// The pinned memory asked for.
    size: ReaderStagingSize,
    /// The bytes the reader stages of the largest band.
    band_bytes: usize,
    /// The first rows of the bands the reader decodes (those where an input holds samples).
    busy_bands: Vec<i32>,
    /// Whether the merging thread's context stages through mapped memory at all (known once it
    /// is current): until then, and where it does not, the reader stages nothing.
    on: AtomicBool,
    /// Only the depth planes (a deep output stages no values), or every plane.
    depth_only: bool,
    /// Bands of `busy_bands` the reader has decoded (whether it staged them or not).
    decoded: AtomicUsize,
}

impl ReaderStaging {
    /// Staging by the reader of every plane (flat output) or of the depth planes alone
    /// (`depth_only`: a deep output's merge stages only its keys), pinning what `size` says,
    /// for `bands`: each band's first row and its planes' roles and bytes (every source's).
    pub fn new(
        depth_only: bool,
        size: ReaderStagingSize,
        bands: impl Iterator<Item = (i32, Vec<(ChannelRole, usize)>)>,
    ) -> Arc<ReaderStaging> {
        let mut staging = ReaderStaging {
            shared: Mutex::new(Shared::default()),
            size,
            band_bytes: 0,
            busy_bands: Vec::new(),
            on: AtomicBool::new(false),
            depth_only,
            decoded: AtomicUsize::new(0),
        };
        for (start, planes) in bands {
            if planes.iter().any(|&(_, bytes)| bytes > 0) {
                staging.busy_bands.push(start);
            }
            // Each plane starts on 16 bytes in the blocks.
            let bytes = planes
                .iter()
                .filter(|&&(role, _)| staging.stages(role))
                .map(|&(_, bytes)| bytes.next_multiple_of(16))
                .sum();
            staging.band_bytes = staging.band_bytes.max(bytes);
        }
        Arc::new(staging)
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic on another thread ends the run; the blocks' bookkeeping is still whole.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stages(&self, role: ChannelRole) -> bool {
        !self.depth_only || matches!(role, ChannelRole::Z | ChannelRole::ZBack)
    }

    /// On the reader's thread, once band `band_start`'s `images` are decoded: copy their planes
    /// into free blocks with the decode threads, if enough blocks are free; else leave them.
    pub fn stage(&self, band_start: i32, images: &[DeepImage]) {
        if self.busy_bands.binary_search(&band_start).is_ok() {
            self.decoded.fetch_add(1, Ordering::AcqRel);
        }
        if !self.on.load(Ordering::Acquire) {
            return;
        }
        let planes: Vec<&[u8]> = images
            .iter()
            .flat_map(|image| image.channels.iter().zip(&image.planes))
            .filter(|(channel, plane)| self.stages(channel.role) && !plane.is_empty())
            .map(|(_, plane)| plane_bytes(plane))
            .collect();
        let need: usize = planes.iter().map(|p| p.len().next_multiple_of(16)).sum();
        if need == 0 {
            return;
        }
        let mut blocks: Vec<Block> = {
            let mut shared = self.lock();
            let Some(block_bytes) = shared.free.first().map(|b| b.bytes) else {
                shared.missed += 1;
                return;
            };
            let count = need.div_ceil(block_bytes).min(shared.free.len());
            let keep = shared.free.len() - count;
            shared.free.split_off(keep)
        };
        let block_bytes = blocks[0].bytes;
        let capacity = blocks.len() * block_bytes;
        // Lay the planes end to end over the blocks, in copies of at most a piece each; a plane
        // that does not fit what is left is left to the merging thread.
        let mut copies: Vec<(SharedPtr, &[u8])> = Vec::new();
        let mut staged = Vec::with_capacity(planes.len());
        let mut at = 0usize;
        for plane in planes {
            if at + plane.len() > capacity {
                continue;
            }
            staged.push(StagedPlane {
                host: plane.as_ptr() as usize,
                len: plane.len(),
                at,
            });
            let mut from = 0;
            while from < plane.len() {
                let (block, offset) = (at / block_bytes, at % block_bytes);
                let take = (block_bytes - offset)
                    .min(plane.len() - from)
                    .min(COPY_PIECE_BYTES);
                copies.push((
                    SharedPtr(blocks[block].ptr.at(offset)),
                    &plane[from..from + take],
                ));
                from += take;
                at += take;
            }
            at = at.next_multiple_of(16);
        }
        // Blocks nothing went into go back.
        let unused = blocks.split_off(at.div_ceil(block_bytes));
        if !unused.is_empty() || staged.is_empty() {
            let mut shared = self.lock();
            shared.free.extend(unused);
            if staged.is_empty() {
                shared.free.append(&mut blocks);
                shared.missed += 1;
                return;
            }
        }
        let _span = crate::timeline::span(|| format!("stage {} KiB for the GPU", at >> 10));
        copies.par_iter().for_each(|&(dst, src)| {
            // SAFETY: each copy's destination is its own range of a block taken from the free
            // list above (no other thread writes it, and the GPU's last copies out of it are
            // finished: blocks become free only after the host waited on their fence), inside
            // the block's mapping; the source is a live plane.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.0, src.len()) }
        });
        self.lock().staged.push((
            band_start,
            StagedBand {
                blocks,
                planes: staged,
                block_bytes,
            },
        ));
    }

    /// Bands the reader found too few free blocks for.
    pub fn missed(&self) -> u64 {
        self.lock().missed
    }
}

/// A plane's values as bytes.
fn plane_bytes(plane: &Plane) -> &[u8] {
    match plane {
        Plane::U32(v) => bytemuck::cast_slice(v),
        Plane::F16(v) => bytemuck::cast_slice(v),
        Plane::F32(v) => bytemuck::cast_slice(v),
    }
}

/// The merging thread's side of staging by the reader: makes the blocks, lends each staged
/// band to the context while it is issued, fences the blocks after, and frees everything when
/// dropped.
pub struct ReaderStagingOnGl<'c> {
    ctx: &'c GlContext,
    shared: Arc<ReaderStaging>,
    /// Blocks of bands issued, with the fence after their copies, oldest first.
    in_flight: VecDeque<(Vec<Block>, Option<Fence>)>,
    /// Blocks to keep free for the reader's next band.
    wanted: usize,
    /// Blocks made, and the most that may be.
    made: usize,
    most: usize,
    block_bytes: usize,
}

impl<'c> ReaderStagingOnGl<'c> {
    /// The merging thread's side of `shared` on `ctx`: `None` where `ctx` does not stage
    /// through mapped memory, or no band has planes to stage (the reader then stages nothing).
    pub fn new(ctx: &'c GlContext, shared: Arc<ReaderStaging>) -> Option<ReaderStagingOnGl<'c>> {
        if ctx.transfer_path() != TransferPath::Mapped || shared.band_bytes == 0 {
            return None;
        }
        let block_bytes = ctx.round_bytes();
        let band_blocks = shared.band_bytes.div_ceil(block_bytes);
        let most = match shared.size {
            // One band's blocks filled by the reader while another's are copied out.
            ReaderStagingSize::TwoBands => 2 * band_blocks,
            ReaderStagingSize::Bytes(bytes) => (bytes / block_bytes).max(2),
        };
        shared.on.store(true, Ordering::Release);
        Some(ReaderStagingOnGl {
            ctx,
            shared,
            in_flight: VecDeque::new(),
            wanted: band_blocks.min(most.div_ceil(2)),
            made: 0,
            most,
            block_bytes,
        })
    }

    /// Blocks whose copies have finished (asked without waiting) back to the reader: called
    /// once the merging thread has issued a band and waited for the one before, so that the
    /// reader can fill them again for the band it decodes now.
    pub fn reclaim_finished(&mut self) -> Result<()> {
        while self
            .in_flight
            .front()
            .is_some_and(|(_, fence)| fence.as_ref().is_none_or(|f| self.ctx.signalled(f)))
        {
            self.reclaim_oldest()?;
        }
        Ok(())
    }

    /// The oldest band's blocks back to the reader, once the host has waited on their fence.
    fn reclaim_oldest(&mut self) -> Result<()> {
        let Some((blocks, fence)) = self.in_flight.pop_front() else {
            return Ok(());
        };
        if let Some(fence) = fence {
            self.ctx.wait_fence(fence)?;
        }
        // From here the reader may write them at any time: the hazard checker sees the write
        // now (after the wait above, or a hazard).
        for block in &blocks {
            self.ctx
                .with_checker(|c| c.host_write(id(block.buffer), "planes the reader stages"));
        }
        self.shared.lock().free.extend(blocks);
        Ok(())
    }

    /// Before a band is issued (and before the first): blocks whose copies are done back to
    /// the reader, and new ones made until the reader has enough for its next band (or the
    /// most are made). None are made where the reader has no band left to decode: pinned
    /// memory costs the merging thread time to make (a run of one band would pay it for
    /// nothing; so would the bands the reader decoded while the context was being made).
    pub fn top_up(&mut self) -> Result<()> {
        self.reclaim_finished()?;
        let decoded = self.shared.decoded.load(Ordering::Acquire);
        if decoded >= self.shared.busy_bands.len() {
            return Ok(());
        }
        loop {
            if self.shared.lock().free.len() >= self.wanted {
                return Ok(());
            }
            if !self.in_flight.is_empty() {
                self.reclaim_oldest()?;
                continue;
            }
            if self.made >= self.most {
                return Ok(());
            }
            // A block an earlier merge on this context made, else a new one.
            let kept = {
                let mut kept = self.ctx.mapped.reader_blocks.borrow_mut();
                let at = kept.iter().position(|b| b.capacity >= self.block_bytes);
                at.map(|at| kept.swap_remove(at))
            };
            let mapped = match kept {
                Some(mapped) => mapped,
                None => self
                    .ctx
                    .allocate_mapped(self.block_bytes, glow::MAP_WRITE_BIT)?,
            };
            self.made += 1;
            self.shared.lock().free.push(Block {
                buffer: mapped.buffer,
                ptr: SharedPtr(mapped.ptr),
                bytes: self.block_bytes,
                capacity: mapped.capacity,
            });
        }
    }

    /// Lend the band starting at row `band_start`, if the reader staged it, to the context for
    /// its staging; bands before it that were never lent go back to the reader.
    pub fn lend(&mut self, band_start: i32) {
        let staged = {
            let mut shared = self.shared.lock();
            let mut found = None;
            for (start, band) in std::mem::take(&mut shared.staged) {
                if start == band_start {
                    found = Some(band);
                } else if start < band_start {
                    shared.free.extend(band.blocks);
                } else {
                    shared.staged.push((start, band));
                }
            }
            found
        };
        if let Some(band) = staged {
            *self.ctx.mapped.reader_staged.borrow_mut() = Some(band);
        }
    }

    /// After the band is issued: its blocks fenced and kept until the host has waited on that.
    pub fn settle(&mut self) {
        let Some(band) = self.ctx.mapped.reader_staged.borrow_mut().take() else {
            return;
        };
        let fence = self.ctx.make_fence();
        if fence.is_none() {
            // No fence to wait on before the reader writes again: wait for the copies now.
            self.ctx.finish();
        }
        self.in_flight.push_back((band.blocks, fence));
    }
}

impl Drop for ReaderStagingOnGl<'_> {
    /// Keep every block on the context for its next merge, once the copies out of it are done
    /// (a run that failed may have left some issued): the next merge hands kept blocks to its
    /// reader at once. A block whose copies cannot be waited for is deleted instead (GL keeps
    /// its storage until they are done). The reader has stopped by now.
    fn drop(&mut self) {
        self.shared.on.store(false, Ordering::Release);
        let mut blocks: Vec<Block> = Vec::new();
        if let Some(band) = self.ctx.mapped.reader_staged.borrow_mut().take() {
            blocks.extend(band.blocks);
        }
        for (held, fence) in self.in_flight.drain(..) {
            match fence.map(|fence| self.ctx.wait_fence(fence)) {
                Some(Err(_)) => held
                    .into_iter()
                    .for_each(|block| self.ctx.delete_mapped(block.mapped())),
                _ => blocks.extend(held),
            }
        }
        {
            let mut shared = self.shared.lock();
            blocks.append(&mut shared.free);
            for (_, band) in shared.staged.drain(..) {
                blocks.extend(band.blocks);
            }
        }
        // Making pinned memory costs more than holding it (a frame sequence, the Python module).
        let mut kept = self.ctx.mapped.reader_blocks.borrow_mut();
        kept.extend(blocks.into_iter().map(Block::mapped));
    }
}

impl GlContext {
    /// On the mapped path, copy `piece` on the GPU out of the planes the reader staged for the
    /// band being issued, when it lies inside one of them; `false` when it does not (it is to
    /// be staged as usual).
    pub(super) fn copy_reader_staged(&self, piece: &Piece, what: &str) -> Result<bool> {
        let segments = match self.mapped.reader_staged.borrow().as_ref() {
            Some(band) if !piece.bytes.is_empty() => band.find(piece.bytes),
            _ => None,
        };
        let Some(segments) = segments else {
            return Ok(false);
        };
        for (block, offset, from, len) in segments {
            self.copy_buffer(
                block.buffer,
                offset,
                piece.dst.buffer,
                piece.to + from,
                len,
                what,
            )?;
        }
        self.count_transfer(|s| s.reader_staged_bytes += piece.bytes.len() as u64);
        Ok(true)
    }
}
