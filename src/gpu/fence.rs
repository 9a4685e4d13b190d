//! Fences that keep a pooled buffer out of use until the GPU work issued before its release is
//! done (the pool's write-after-read hazard; docs/architecture.md, "The buffer pool").
//!
//! A [`crate::gpu::GpuBuffer`] goes back to the pool when its Rust owner drops it, which is
//! usually right after the dispatch that reads it was *issued*, not after it *finished*.
//! `glMemoryBarrier` orders earlier shader writes before later accesses, but nothing orders an
//! earlier shader read before a later copy or upload into the same storage: a GPU runs them
//! concurrently (an NVIDIA H100 did, and wrote wrong pixels; llvmpipe finishes each dispatch
//! inside `glDispatchCompute` and never shows it).
//!
//! So a buffer is released with a fence (`glFenceSync`), and taken again only once that fence
//! has signalled or, when it has not, after a GPU-side wait on it (`glWaitSync`), which holds the
//! new user's commands back on the GPU without stalling the host. Buffers released with no GL
//! work issued in between share one fence, and a fence that is known done covers every older
//! one (GL runs a context's commands in order with respect to fences), so a band's worth of
//! releases costs one fence and at most one wait.

use std::cell::{Cell, RefCell};

use glow::HasContext;

/// The fence a released buffer waits on: an index into [`ReleaseFences`]'s live fences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FenceId(u64);

/// One live fence and how many free buffers wait on it.
struct LiveFence {
    id: u64,
    sync: glow::Fence,
    /// The hazard checker's serial when the fence was made (strict mode; 0 otherwise).
    checker_serial: u64,
    users: usize,
}

/// What [`ReleaseFences::before_reuse`] had to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// The work was known done already (an older fence or `glFinish` covered it).
    Done,
    /// The fence had signalled when asked.
    Signalled,
    /// It had not: the GPU waits for it before the new user's commands (`glWaitSync`).
    Waited,
}

/// The context's release fences (see the module docs).
#[derive(Default)]
pub(crate) struct ReleaseFences {
    /// GL commands that do work (dispatches, copies, uploads, readbacks) issued so far.
    issued: Cell<u64>,
    /// `issued` when the newest fence was made.
    newest_at: Cell<Option<u64>>,
    next_id: Cell<u64>,
    live: RefCell<Vec<LiveFence>>,
    /// Fences with an id up to this one are done (signalled, waited on, or older than a finish).
    done_through: Cell<u64>,
    /// Counts for tests and `--stats`.
    pub(crate) stats: Cell<FenceStats>,
    /// Release without fences, as the pool did before them (tests of the hazard checker only).
    pub(crate) disabled: Cell<bool>,
}

/// What the release fences did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FenceStats {
    /// Fences made (`glFenceSync`).
    pub fences: u64,
    /// Reuses whose fence had signalled, or was covered by a newer one known done.
    pub reuses_done: u64,
    /// Reuses that waited on the GPU (`glWaitSync`): the work was still running when the buffer
    /// was taken again.
    pub reuses_waited: u64,
}

impl ReleaseFences {
    fn count(&self, f: impl FnOnce(&mut FenceStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    /// Note a GL command that does work (a later release needs a fence after it).
    pub(crate) fn issued(&self) {
        self.issued.set(self.issued.get() + 1);
    }

    /// A buffer is released now: the fence it will wait on, made here or shared with the
    /// releases since the last command. `checker_serial` is the hazard checker's serial now.
    pub(crate) fn on_release(&self, gl: &glow::Context, checker_serial: u64) -> Option<FenceId> {
        if self.disabled.get() {
            return None;
        }
        let mut live = self.live.borrow_mut();
        if self.newest_at.get() == Some(self.issued.get()) {
            let newest_id = self.next_id.get();
            if let Some(newest) = live.last_mut().filter(|f| f.id == newest_id) {
                newest.users += 1;
                return Some(FenceId(newest.id));
            }
        }
        // No fence since the last command, or the newest is gone: a new one. (A gone fence is
        // not a done one: its last user may have been deleted, `forget`, with nobody waiting.)
        // SAFETY: a plain fence on the current context.
        let sync = unsafe { gl.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0) }.ok()?;
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        self.newest_at.set(Some(self.issued.get()));
        live.push(LiveFence {
            id,
            sync,
            checker_serial,
            users: 1,
        });
        self.count(|s| s.fences += 1);
        Some(FenceId(id))
    }

    /// A buffer released with `fence` is taken again: make sure the GPU has finished the work
    /// issued before the release, or holds later commands back until it has. Returns what it did
    /// and the checker serial the fence stood for. `poll` says whether to ask the fence at all:
    /// strict mode does not, and takes the path a GPU that is behind takes (`strict.rs`).
    pub(crate) fn before_reuse(
        &self,
        gl: &glow::Context,
        fence: Option<FenceId>,
        poll: bool,
    ) -> (Reuse, u64) {
        let Some(FenceId(id)) = fence else {
            return (Reuse::Done, 0);
        };
        let mut live = self.live.borrow_mut();
        let Some(at) = live.iter().position(|f| f.id == id) else {
            return (Reuse::Done, 0);
        };
        let (sync, serial) = (live[at].sync, live[at].checker_serial);
        let reuse = if id <= self.done_through.get() {
            Reuse::Done
        } else {
            // SAFETY: the fence is alive on this context.
            if poll && unsafe { gl.get_sync_status(sync) } == glow::SIGNALED {
                Reuse::Signalled
            } else {
                // SAFETY: as above; TIMEOUT_IGNORED is the only timeout glWaitSync takes.
                unsafe { gl.wait_sync(sync, 0, glow::TIMEOUT_IGNORED) };
                Reuse::Waited
            }
        };
        self.done_through.set(self.done_through.get().max(id));
        self.count(|s| match reuse {
            Reuse::Waited => s.reuses_waited += 1,
            _ => s.reuses_done += 1,
        });
        Self::drop_user(gl, &mut live, at);
        (reuse, serial)
    }

    /// A free buffer released with `fence` is deleted instead of reused.
    pub(crate) fn forget(&self, gl: &glow::Context, fence: Option<FenceId>) {
        let Some(FenceId(id)) = fence else { return };
        let mut live = self.live.borrow_mut();
        if let Some(at) = live.iter().position(|f| f.id == id) {
            Self::drop_user(gl, &mut live, at);
        }
    }

    fn drop_user(gl: &glow::Context, live: &mut Vec<LiveFence>, at: usize) {
        live[at].users -= 1;
        if live[at].users == 0 {
            let gone = live.remove(at);
            // SAFETY: nothing waits on the fence any more.
            unsafe { gl.delete_sync(gone.sync) };
        }
    }

    /// `glFinish` ran: every fence made so far is done.
    pub(crate) fn finished(&self) {
        self.done_through.set(self.next_id.get());
    }

    /// Delete every fence (the context is being dropped, or its pool cleared).
    pub(crate) fn clear(&self, gl: &glow::Context) {
        for fence in self.live.borrow_mut().drain(..) {
            // SAFETY: the fences belong to this context.
            unsafe { gl.delete_sync(fence.sync) };
        }
        self.newest_at.set(None);
    }
}
