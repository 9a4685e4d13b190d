//! The strict mode's hazard checker: what Vulkan's synchronization validation does, applied to
//! this engine's GL layer, so that a missing wait or barrier fails a test on Mesa llvmpipe (which
//! finishes every dispatch inside `glDispatchCompute`) instead of writing wrong pixels on a GPU
//! that overlaps them.
//!
//! Every dispatch, copy, upload and readback gets a serial number. Each buffer remembers its
//! last use and its last shader read and write (what and which serial). Work up to a serial
//! counts as finished at a readback (`glGetBufferSubData` waits for the GPU), at `glFinish`, and
//! at a fence that has signalled or that later commands wait on (`glWaitSync`). Barriers are
//! remembered by the serial they follow. A hazard is:
//! - **reuse before the last use finished**: a pool take of a buffer whose last use is not known
//!   finished, or a write by copy or upload into a buffer a shader may still read (GL orders a
//!   later copy after earlier shader *writes* once a `GL_BUFFER_UPDATE_BARRIER_BIT` is issued,
//!   but nothing orders it after earlier shader *reads*: NVIDIA runs them concurrently);
//! - **a read with no barrier since the write**: a shader reading a buffer a shader wrote with no
//!   `GL_SHADER_STORAGE_BARRIER_BIT` since, or a copy or readback of one with no
//!   `GL_BUFFER_UPDATE_BARRIER_BIT` since;
//! - **two dispatches touching one buffer with no barrier between them**, one of them writing;
//! - **a dispatch through a stale binding**: a storage block bound to a buffer that has gone
//!   back to the pool (GL keeps the binding; the next owner's data would be read or written).
//!
//! Which storage blocks a dispatch reads and writes comes from its program (active blocks, with
//! `readonly`/`writeonly` where the source says so; other blocks count as both). The checker is
//! plain bookkeeping with no GL in it (unit tests below); `GlContext` feeds it in strict mode.

use std::collections::HashMap;

/// How a use touches a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    fn reads(self) -> bool {
        self != Access::Write
    }
    fn writes(self) -> bool {
        self != Access::Read
    }
}

/// One use of a buffer: which operation (serial and words) and how.
#[derive(Clone, Debug)]
struct Use {
    serial: u64,
    what: String,
}

impl std::fmt::Display for Use {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (#{})", self.what, self.serial)
    }
}

/// What the checker knows of one buffer object.
#[derive(Default)]
struct BufferState {
    last: Option<Use>,
    shader_read: Option<Use>,
    shader_write: Option<Use>,
    /// Back in the pool (released by its owner, not yet taken again): GL may still have it
    /// bound, and a dispatch through that binding uses a buffer nobody owns.
    released: bool,
}

/// The GL barrier bits the checker follows (`glMemoryBarrier`).
pub(crate) const SHADER_STORAGE_BARRIER: u32 = 0x2000;
pub(crate) const BUFFER_UPDATE_BARRIER: u32 = 0x200;

/// The bookkeeping (see the module docs).
#[derive(Default)]
pub(crate) struct HazardChecker {
    /// Serial of the last operation issued.
    serial: u64,
    /// Every operation up to this serial is finished (or ordered before everything issued now).
    finished: u64,
    /// The serial the last barrier with each bit followed (0: none yet).
    storage_barrier_after: u64,
    update_barrier_after: u64,
    any_barrier_after: u64,
    buffers: HashMap<u32, BufferState>,
    /// Indexed storage-buffer bindings: binding → buffer.
    bound: HashMap<u32, u32>,
    /// Hazards found and not yet reported.
    found: Vec<String>,
}

impl HazardChecker {
    fn next(&mut self, what: String) -> Use {
        self.serial += 1;
        Use {
            serial: self.serial,
            what,
        }
    }

    fn unfinished(&self, u: &Option<Use>) -> Option<Use> {
        u.as_ref().filter(|u| u.serial > self.finished).cloned()
    }

    fn state(&mut self, buffer: u32) -> &mut BufferState {
        self.buffers.entry(buffer).or_default()
    }

    /// Hazards found since the last call, oldest first.
    pub(crate) fn take_found(&mut self) -> Vec<String> {
        std::mem::take(&mut self.found)
    }

    /// Buffer `buffer` has fresh storage (allocated, or its name reused after a delete).
    pub(crate) fn allocated(&mut self, buffer: u32) {
        self.buffers.insert(buffer, BufferState::default());
    }

    /// `buffer` was deleted (GL keeps its storage until the work using it is done).
    pub(crate) fn deleted(&mut self, buffer: u32) {
        self.buffers.remove(&buffer);
        self.bound.retain(|_, b| *b != buffer);
    }

    /// `buffer` is bound to storage binding `binding`.
    pub(crate) fn bind(&mut self, binding: u32, buffer: u32) {
        self.bound.insert(binding, buffer);
    }

    /// A dispatch of `stage` whose program has storage blocks at `blocks` (binding, access).
    pub(crate) fn dispatch(&mut self, stage: &str, blocks: &[(u32, Access)]) {
        let this = self.next(format!("dispatch of {stage}"));
        for &(binding, access) in blocks {
            // A block a program declares may go unused in a dispatch (stages switch phases with
            // uniforms), and GL leaves it unbound then: nothing to check.
            let Some(&buffer) = self.bound.get(&binding) else {
                continue;
            };
            if self.buffers.get(&buffer).is_some_and(|s| s.released) {
                self.found.push(format!(
                    "{this} uses buffer {buffer} (binding {binding}), which went back to the pool: a stale binding"
                ));
            }
            let (storage, any) = (self.storage_barrier_after, self.any_barrier_after);
            let write = self.unfinished(
                &self
                    .buffers
                    .get(&buffer)
                    .and_then(|s| s.shader_write.clone()),
            );
            let read = self.unfinished(
                &self
                    .buffers
                    .get(&buffer)
                    .and_then(|s| s.shader_read.clone()),
            );
            if let Some(w) = write.as_ref().filter(|w| w.serial != this.serial) {
                if access.reads() && storage < w.serial {
                    self.found.push(format!(
                        "{this} reads buffer {buffer} (binding {binding}), written by {w} with no GL_SHADER_STORAGE_BARRIER_BIT since"
                    ));
                } else if access.writes() && any < w.serial {
                    self.found.push(format!(
                        "{this} writes buffer {buffer} (binding {binding}), written by {w} with no barrier since"
                    ));
                }
            }
            if let Some(r) = read.as_ref().filter(|r| r.serial != this.serial) {
                if access.writes() && any < r.serial {
                    self.found.push(format!(
                        "{this} writes buffer {buffer} (binding {binding}) while {r} may still read it (no barrier since)"
                    ));
                }
            }
            let state = self.state(buffer);
            if access.reads() {
                state.shader_read = Some(this.clone());
            }
            if access.writes() {
                state.shader_write = Some(this.clone());
            }
            state.last = Some(this.clone());
        }
    }

    /// A read of `buffer` by a copy or the host (`what`): a shader's write to it needs a
    /// GL_BUFFER_UPDATE_BARRIER_BIT first.
    fn transfer_read(&mut self, buffer: u32, this: &Use) {
        let write = self.unfinished(
            &self
                .buffers
                .get(&buffer)
                .and_then(|s| s.shader_write.clone()),
        );
        if let Some(w) = write {
            if self.update_barrier_after < w.serial {
                self.found.push(format!(
                    "{this} reads buffer {buffer}, written by {w} with no GL_BUFFER_UPDATE_BARRIER_BIT since"
                ));
            }
        }
        self.state(buffer).last = Some(this.clone());
    }

    /// A write into `buffer` by a copy or an upload: nothing orders it after an earlier shader
    /// read, and a shader's write needs a GL_BUFFER_UPDATE_BARRIER_BIT first.
    fn transfer_write(&mut self, buffer: u32, this: &Use) {
        let state = self.buffers.get(&buffer);
        let read = self.unfinished(&state.and_then(|s| s.shader_read.clone()));
        let write = self.unfinished(&state.and_then(|s| s.shader_write.clone()));
        if let Some(r) = read {
            self.found.push(format!(
                "{this} writes buffer {buffer} while {r} may still read it (not known finished)"
            ));
        } else if let Some(w) = write {
            if self.update_barrier_after < w.serial {
                self.found.push(format!(
                    "{this} writes buffer {buffer}, written by {w} with no GL_BUFFER_UPDATE_BARRIER_BIT since"
                ));
            }
        }
        self.state(buffer).last = Some(this.clone());
    }

    /// `glCopyBufferSubData` from `src` into `dst` (`what` says why).
    pub(crate) fn copy(&mut self, src: u32, dst: u32, what: &str) {
        let this = self.next(format!("copy ({what})"));
        self.transfer_read(src, &this);
        self.transfer_write(dst, &this);
    }

    /// `glBufferSubData` into `dst` (`what` says why).
    pub(crate) fn upload(&mut self, dst: u32, what: &str) {
        let this = self.next(format!("upload ({what})"));
        self.transfer_write(dst, &this);
    }

    /// `glGetBufferSubData` from `src`: the host waits for the GPU, so everything issued so far
    /// is finished afterwards.
    pub(crate) fn readback(&mut self, src: u32) {
        let this = self.next("readback".to_string());
        self.transfer_read(src, &this);
        self.finished = self.serial;
    }

    /// The host writes `buffer` through its mapping (`what` says why): every GPU use of it, the
    /// copies out of it above all, must be known finished (a fence the host waited on), since
    /// nothing on the GPU orders a host write.
    pub(crate) fn host_write(&mut self, buffer: u32, what: &str) {
        let last = self.buffers.get(&buffer).and_then(|s| s.last.clone());
        if let Some(last) = self.unfinished(&last) {
            self.found.push(format!(
                "a host write ({what}) into mapped buffer {buffer} while its use by {last} is not known finished"
            ));
        }
    }

    /// The host reads `buffer` through its mapping: the copy into it must be known finished.
    pub(crate) fn host_read(&mut self, buffer: u32) {
        let last = self.buffers.get(&buffer).and_then(|s| s.last.clone());
        if let Some(last) = self.unfinished(&last) {
            self.found.push(format!(
                "a host read of mapped buffer {buffer} while its write by {last} is not known finished"
            ));
        }
    }

    /// `glMemoryBarrier(bits)`.
    pub(crate) fn barrier(&mut self, bits: u32) {
        if bits & SHADER_STORAGE_BARRIER != 0 {
            self.storage_barrier_after = self.serial;
        }
        if bits & BUFFER_UPDATE_BARRIER != 0 {
            self.update_barrier_after = self.serial;
        }
        self.any_barrier_after = self.serial;
    }

    /// `glFinish`: everything issued so far is finished.
    pub(crate) fn finish(&mut self) {
        self.finished = self.serial;
    }

    /// A fence is made now: the serial it stands for.
    pub(crate) fn fence(&self) -> u64 {
        self.serial
    }

    /// A fence made at `serial` has signalled, or later commands wait for it (`glWaitSync`).
    pub(crate) fn fence_done(&mut self, serial: u64) {
        self.finished = self.finished.max(serial);
    }

    /// Storage binding `binding` holds nothing now.
    pub(crate) fn unbind(&mut self, binding: u32) {
        self.bound.remove(&binding);
    }

    /// `buffer` went back to the pool: no dispatch may use it until it is taken again.
    pub(crate) fn released(&mut self, buffer: u32) {
        self.state(buffer).released = true;
    }

    /// The pool gives `buffer` to a new user (`purpose`): its last use must be finished.
    pub(crate) fn take(&mut self, buffer: u32, purpose: &str) {
        self.state(buffer).released = false;
        // Name a shader's use where one may still run (the one a GPU overlaps), else the last.
        let state = self.buffers.get(&buffer);
        let last = [
            state.and_then(|s| s.shader_read.clone()),
            state.and_then(|s| s.shader_write.clone()),
            state.and_then(|s| s.last.clone()),
        ]
        .into_iter()
        .find_map(|u| self.unfinished(&u));
        if let Some(last) = last {
            self.found.push(format!(
                "pool take of buffer {buffer} for {purpose} while its use by {last} is not known finished"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(c: &mut HazardChecker, pairs: &[(u32, u32)]) {
        for &(binding, buffer) in pairs {
            c.bind(binding, buffer);
        }
    }

    #[test]
    fn a_dispatch_through_a_binding_to_a_released_buffer_is_a_hazard_until_it_is_taken() {
        let mut c = HazardChecker::default();
        c.allocated(9);
        bound(&mut c, &[(3, 9)]);
        c.dispatch("tidy.comp", &[(3, Access::Read)]);
        assert!(c.take_found().is_empty());
        c.released(9);
        c.dispatch("tidy.comp", &[(3, Access::Read)]);
        let found = c.take_found();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("uses buffer 9 (binding 3), which went back to the pool"),
            "{found:?}"
        );
        c.finish();
        c.take(9, "scratch");
        c.dispatch("tidy.comp", &[(3, Access::Read)]);
        assert!(c.take_found().is_empty());
    }

    #[test]
    fn a_pool_take_before_the_last_read_finished_is_a_hazard_naming_both_uses() {
        let mut c = HazardChecker::default();
        c.allocated(7);
        bound(&mut c, &[(0, 7)]);
        c.dispatch("scan.comp", &[(0, Access::Read)]);
        c.barrier(SHADER_STORAGE_BARRIER | BUFFER_UPDATE_BARRIER);
        c.take(7, "a zero fill");
        let found = c.take_found();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("pool take of buffer 7 for a zero fill"),
            "{found:?}"
        );
        assert!(found[0].contains("dispatch of scan.comp (#1)"), "{found:?}");
    }

    #[test]
    fn a_host_write_into_staging_before_its_copy_finished_is_a_hazard_and_a_waited_fence_clears_it()
    {
        let mut c = HazardChecker::default();
        c.allocated(3);
        c.allocated(4);
        c.copy(3, 4, "staged planes");
        c.host_write(3, "staged planes");
        let found = c.take_found();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("host write (staged planes) into mapped buffer 3"),
            "{found:?}"
        );
        let serial = c.fence();
        c.fence_done(serial);
        c.host_write(3, "staged planes");
        assert!(c.take_found().is_empty());
    }

    #[test]
    fn a_host_read_of_a_readback_before_its_fence_is_a_hazard() {
        let mut c = HazardChecker::default();
        c.allocated(5);
        c.allocated(6);
        c.copy(5, 6, "a readback");
        let serial = c.fence();
        c.host_read(6);
        assert_eq!(c.take_found().len(), 1);
        c.fence_done(serial);
        c.host_read(6);
        assert!(c.take_found().is_empty());
    }

    #[test]
    fn a_waited_fence_a_readback_or_a_finish_makes_the_take_safe() {
        for how in ["fence", "readback", "finish"] {
            let mut c = HazardChecker::default();
            c.allocated(7);
            c.allocated(8);
            bound(&mut c, &[(0, 7)]);
            c.dispatch("scan.comp", &[(0, Access::Read)]);
            c.barrier(SHADER_STORAGE_BARRIER | BUFFER_UPDATE_BARRIER);
            match how {
                "fence" => {
                    let serial = c.fence();
                    c.fence_done(serial);
                }
                "readback" => c.readback(8),
                _ => c.finish(),
            }
            c.take(7, "an upload");
            assert!(c.take_found().is_empty(), "{how}");
        }
    }

    #[test]
    fn a_fence_made_before_the_last_use_does_not_cover_it() {
        let mut c = HazardChecker::default();
        c.allocated(7);
        let serial = c.fence();
        bound(&mut c, &[(0, 7)]);
        c.dispatch("merge.comp", &[(0, Access::Read)]);
        c.fence_done(serial);
        c.take(7, "a scratch");
        assert_eq!(c.take_found().len(), 1);
    }

    #[test]
    fn a_copy_into_a_buffer_a_shader_may_still_read_is_a_hazard_even_after_barriers() {
        let mut c = HazardChecker::default();
        c.allocated(1);
        c.allocated(2);
        bound(&mut c, &[(0, 1)]);
        c.dispatch("count.comp", &[(0, Access::Read)]);
        c.barrier(!0);
        c.copy(2, 1, "a counter reset");
        let found = c.take_found();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("copy (a counter reset)"), "{found:?}");
        assert!(found[0].contains("may still read it"), "{found:?}");
        // A shader's earlier write, once a buffer-update barrier is issued, is ordered.
        bound(&mut c, &[(1, 2)]);
        c.dispatch("fill.comp", &[(1, Access::Write)]);
        c.barrier(BUFFER_UPDATE_BARRIER);
        c.upload(2, "new values");
        assert!(c.take_found().is_empty());
    }

    #[test]
    fn reads_need_the_barrier_bit_for_their_kind_of_read() {
        let mut c = HazardChecker::default();
        c.allocated(1);
        c.allocated(2);
        bound(&mut c, &[(0, 1), (1, 2)]);
        c.dispatch("scan.comp", &[(0, Access::Write)]);
        // No barrier: a shader read of it is a hazard.
        c.dispatch("scan_add.comp", &[(0, Access::Read)]);
        assert_eq!(c.take_found().len(), 1);
        c.barrier(SHADER_STORAGE_BARRIER);
        c.dispatch("scan.comp", &[(0, Access::Write)]);
        c.barrier(SHADER_STORAGE_BARRIER);
        c.dispatch("scan_add.comp", &[(0, Access::Read)]);
        assert!(c.take_found().is_empty());
        // A readback of the write wants the buffer-update bit, which was not issued.
        c.dispatch("scan.comp", &[(1, Access::Write)]);
        c.barrier(SHADER_STORAGE_BARRIER);
        c.readback(2);
        let found = c.take_found();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("GL_BUFFER_UPDATE_BARRIER_BIT"),
            "{found:?}"
        );
    }

    #[test]
    fn two_dispatches_on_one_buffer_need_a_barrier_between_them() {
        let mut c = HazardChecker::default();
        c.allocated(1);
        bound(&mut c, &[(0, 1)]);
        c.dispatch("build.comp", &[(0, Access::Read)]);
        c.dispatch("fill.comp", &[(0, Access::Write)]);
        assert_eq!(c.take_found().len(), 1);
        c.barrier(SHADER_STORAGE_BARRIER);
        c.dispatch("build.comp", &[(0, Access::ReadWrite)]);
        assert!(c.take_found().is_empty());
    }

    #[test]
    fn an_unbound_block_and_a_fresh_buffer() {
        let mut c = HazardChecker::default();
        c.dispatch("merge.comp", &[(3, Access::Read)]);
        assert!(c.take_found().is_empty());
        // A deleted name that comes back holds fresh storage: nothing of the old one remains.
        c.allocated(4);
        bound(&mut c, &[(0, 4)]);
        c.dispatch("merge.comp", &[(0, Access::Read)]);
        c.deleted(4);
        c.allocated(4);
        c.take(4, "reuse");
        assert!(c.take_found().is_empty());
    }
}
