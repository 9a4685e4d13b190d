//! Freed memory kept for the next band instead of handed back to the kernel (the CLI's only).
//!
//! A streamed merge allocates the same buffers band after band: each input's decoded planes,
//! the inflate buffers of every chunk, the merged band. glibc's malloc serves a block of 128 KiB
//! or more (a threshold that grows to at most 32 MiB as such blocks are freed) with a fresh
//! `mmap` and unmaps it when freed, and trims the top of its heap once 128 KiB lie free there,
//! so every band's buffers came back from the kernel as new, zeroed pages: 65,000-71,000 page
//! faults in a flat merge of the 1080p powerplant pair on 2 cores.
//!
//! The CLI raises both thresholds once, after parsing its arguments: blocks up to 32 MiB
//! (glibc's largest threshold on 64-bit) come from the heap, and freed memory stays there for
//! the next band. Measured on 2 cores: 17,000 page faults, the flat merge 5-9% and its floor's
//! decode 6-10% faster, a peak resident set 6-15% higher (a heap keeps its high-water mark);
//! docs/benchmarks.md ("Freed memory kept for the next band"). Not covered: blocks over 32 MiB
//! (the planes of the tall bands of a many-core host may be), and a worker thread's arena past
//! its first 64 MiB, which glibc still unmaps when it empties.
//!
//! Left alone: `deepmerge view` (a long-lived window that should hand memory back), a process
//! whose user set either threshold through its environment (`GLIBC_TUNABLES`'
//! `glibc.malloc.mmap_threshold` or `trim_threshold`, `MALLOC_MMAP_THRESHOLD_`,
//! `MALLOC_TRIM_THRESHOLD_`: theirs wins), and the library, whose allocator is its
//! host process's to choose. `DEEPMERGE_MALLOC=system` keeps glibc's own thresholds.

use deepmerge::env_setting::{env_setting, setting};
use deepmerge::Result;

/// The allocator setting `DEEPMERGE_MALLOC` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MallocSetting {
    /// Keep freed memory for reuse (the default).
    Reuse,
    /// glibc's own thresholds.
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

/// Whether the environment sets either threshold itself (then the user's setting stands; other
/// malloc tuning, such as the number of arenas, goes with ours).
fn thresholds_set_by_environment() -> bool {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    ["mmap_threshold", "trim_threshold"].iter().any(|t| {
        tunables.contains(&format!("glibc.malloc.{t}"))
            || std::env::var_os(format!("MALLOC_{}_", t.to_uppercase())).is_some()
    })
}

/// Apply `setting` to this process's allocator, before the merge's buffers exist. Nothing
/// happens off 64-bit glibc (musl and other systems keep their own ways), or where the
/// environment sets a threshold already.
pub fn apply(setting: MallocSetting) {
    if setting != MallocSetting::Reuse || thresholds_set_by_environment() {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
    // SAFETY: mallopt changes two of the allocator's thresholds under glibc's own lock; it is
    // sound at any time. Setting either also turns off glibc's adjustment of both, so the
    // trim threshold is set only once the mapping threshold took (alone it would leave every
    // block of 128 KiB or more mapped).
    unsafe {
        if libc::mallopt(libc::M_MMAP_THRESHOLD, HEAP_BLOCKS_UP_TO) == 1 {
            libc::mallopt(libc::M_TRIM_THRESHOLD, KEEP_FREE_UP_TO);
        }
    }
}
