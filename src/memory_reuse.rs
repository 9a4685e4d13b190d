//! Freed memory kept for the next band instead of handed back to the kernel (the CLI's only).
//!
//! A streamed merge allocates the same buffers band after band: each input's decoded planes,
//! the inflate buffers of every chunk, the merged band. glibc's malloc serves a block of 128 KiB
//! or more (a threshold that grows to at most 32 MiB as such blocks are freed) with a fresh
//! `mmap` and unmaps it when freed, and trims the top of its heap once 128 KiB lie free there,
//! so every band's buffers came back from the kernel as new pages: 70,000 page faults and 0.2-0.3
//! s of system time in a 1.2 s flat merge of the 1080p powerplant pair on 2 cores. On many
//! threads each unmap also stops every core that ran the process (TLB shootdowns).
//!
//! The CLI sets both thresholds once, at start: blocks up to 32 MiB (glibc's largest threshold)
//! come from the heap, and freed memory stays there for the next band. Measured there: 17,000
//! page faults, flat merge 4% less CPU time and the decode floor 10% faster, for a peak resident
//! set 6-15% higher (the high-water mark of a heap, not of each band); docs/benchmarks.md
//! ("Freed memory kept for the next band"). `DEEPMERGE_MALLOC=system` keeps glibc's own
//! behaviour, for comparison or for a process that must hand memory back between runs. The
//! library leaves the allocator alone: a Python process or another program is not ours to tune.

/// The allocator setting `DEEPMERGE_MALLOC` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MallocSetting {
    /// Keep freed memory for reuse (the default).
    Reuse,
    /// glibc's own thresholds.
    System,
}

impl MallocSetting {
    /// From `DEEPMERGE_MALLOC` (`reuse`, `system`; unset is `reuse`); an error names the value.
    pub fn from_env() -> Result<MallocSetting, String> {
        match std::env::var("DEEPMERGE_MALLOC") {
            Err(_) => Ok(MallocSetting::Reuse),
            Ok(v) => match v.trim() {
                "" | "reuse" => Ok(MallocSetting::Reuse),
                "system" => Ok(MallocSetting::System),
                other => Err(format!(
                    "DEEPMERGE_MALLOC={other}: expected reuse (the default) or system"
                )),
            },
        }
    }
}

/// Largest block served from the heap rather than by its own mapping: glibc's ceiling for the
/// threshold (`DEFAULT_MMAP_THRESHOLD_MAX` on 64-bit), above which `mallopt` refuses it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HEAP_BLOCKS_UP_TO: i32 = 32 << 20;

/// Free memory kept at the top of the heap before it is handed back: more than any band needs.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const KEEP_FREE_UP_TO: i32 = 1 << 30;

/// Apply `setting` to this process's allocator. Call it first thing in `main`, before other
/// threads allocate. Nothing happens off glibc (musl and other systems keep their own ways).
pub fn apply(setting: MallocSetting) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if setting == MallocSetting::Reuse {
        // SAFETY: mallopt changes two of the allocator's thresholds; it takes glibc's lock and
        // is sound to call at any time. Setting either threshold turns off glibc's dynamic
        // adjustment of both, which is what is wanted here.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, HEAP_BLOCKS_UP_TO);
            libc::mallopt(libc::M_TRIM_THRESHOLD, KEEP_FREE_UP_TO);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = setting;
}
