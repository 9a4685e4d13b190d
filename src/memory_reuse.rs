//! Freed memory kept for the next band instead of handed back to the kernel (the CLI's only).
//!
//! A streamed merge allocates the same buffers band after band: each input's decoded planes,
//! the inflate buffers of every chunk, the merged band. glibc's malloc serves a block of 128 KiB
//! or more (a threshold that grows to at most 32 MiB as such blocks are freed) with a fresh
//! `mmap` and unmaps it when freed, and trims the top of its heap once 128 KiB lie free there,
//! so every band's buffers came back from the kernel as new, zeroed pages: 65,000-71,000 page
//! faults in a flat merge of the 1080p powerplant pair on 2 cores.
//!
//! The CLI raises both thresholds once, after parsing its arguments, and keeps one arena for
//! all threads: blocks up to 32 MiB (glibc's largest threshold on 64-bit) come from the heap,
//! freed memory stays there for the next band, and a worker thread's freed blocks serve the
//! next band's allocations on any thread (one arena a thread, as glibc gives a busy process,
//! each kept its own high-water mark: the peak rose by half at 16 threads). A merge makes about
//! 100,000 allocations in all (most from the per-thread caches, which take no lock), so the one
//! arena's lock is not a queue. Measured on 2 cores (docs/benchmarks.md, "Freed memory kept
//! for the next band"): 65,000-71,000 page faults down to 14,000-18,000, the flat merge 2-5%
//! and its floor's decode 6-10% faster, the peak no higher; with 16 threads' bands (their count
//! from `RAYON_NUM_THREADS=16`, on the same 2 cores) faults down by half to three quarters, CPU
//! time 5% lower and the peak 13-17% lower. Not covered: blocks over 32 MiB, which are still
//! mapped.
//!
//! Left alone: `deepmerge view` (a long-lived window that should hand memory back), a process
//! whose user set any of these through its environment (`GLIBC_TUNABLES`'
//! `glibc.malloc.mmap_threshold`, `trim_threshold` or `arena_max`, `MALLOC_MMAP_THRESHOLD_`,
//! `MALLOC_TRIM_THRESHOLD_`, `MALLOC_ARENA_MAX`: theirs win), and the library, whose allocator
//! is its host process's to choose. `DEEPMERGE_MALLOC=system` keeps glibc's own settings.

use deepmerge::env_setting::{env_setting, setting};
use deepmerge::Result;

/// The allocator setting `DEEPMERGE_MALLOC` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MallocSetting {
    /// Keep freed memory for reuse (the default).
    Reuse,
    /// glibc's own thresholds and arenas.
    System,
}

impl MallocSetting {
    /// From `DEEPMERGE_MALLOC` (`reuse`, `system`; unset or empty is `reuse`); another value is
    /// a usage error naming the variable.
    pub fn from_env() -> Result<MallocSetting> {
        setting(
            "DEEPMERGE_MALLOC",
            env_setting("DEEPMERGE_MALLOC").as_deref(),
            &[
                ("reuse", MallocSetting::Reuse),
                ("system", MallocSetting::System),
            ],
        )
        .map(|chosen| chosen.unwrap_or(MallocSetting::Reuse))
    }
}

/// Largest block served from the heap rather than by its own mapping: glibc's ceiling for the
/// threshold on 64-bit (`DEFAULT_MMAP_THRESHOLD_MAX`), above which `mallopt` refuses it.
#[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
const HEAP_BLOCKS_UP_TO: i32 = 32 << 20;

/// Free memory kept at the top of the heap before it is handed back: more than any band needs.
#[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
const KEEP_FREE_UP_TO: i32 = 1 << 30;

/// Whether the environment sets what [`apply`] would (either threshold, or the number of
/// arenas) itself: then the user's settings stand, all of them. Other malloc tuning goes with
/// ours.
fn malloc_tuned_by_environment() -> bool {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    let set = |name: &str, variable: &str| {
        tunables.contains(&format!("glibc.malloc.{name}")) || std::env::var_os(variable).is_some()
    };
    set("mmap_threshold", "MALLOC_MMAP_THRESHOLD_")
        || set("trim_threshold", "MALLOC_TRIM_THRESHOLD_")
        || set("arena_max", "MALLOC_ARENA_MAX")
}

/// Apply `setting` to this process's allocator, before the merge's buffers exist. Nothing
/// happens off 64-bit glibc (musl and other systems keep their own ways), or where the
/// environment sets a threshold or the number of arenas already.
pub fn apply(setting: MallocSetting) {
    if setting != MallocSetting::Reuse || malloc_tuned_by_environment() {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
    // SAFETY: mallopt changes the allocator's parameters under glibc's own lock; it is sound at
    // any time. Setting either threshold also turns off glibc's adjustment of both, so the
    // others are set only once the mapping threshold took (the trim threshold alone would
    // leave every block of 128 KiB or more mapped).
    unsafe {
        if libc::mallopt(libc::M_MMAP_THRESHOLD, HEAP_BLOCKS_UP_TO) == 1 {
            libc::mallopt(libc::M_TRIM_THRESHOLD, KEEP_FREE_UP_TO);
            // Before the worker threads exist, so that they all share the one heap.
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}
