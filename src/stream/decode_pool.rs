//! Where the reader decodes: rayon's global pool (the default), or, with `DEEPMERGE_DECODE_NICE`
//! set to a niceness 1 to 19, a pool of its own whose threads run at that lower priority.
//!
//! Why a setting: the reader decodes band n+1 with every core while the merge stage works on
//! band n. On an H100 host with 16 threads the GL thread's staging copies of a band took 20-55
//! ms while the next band was being decoded and 4-5 ms once it was not (the flat timelines of
//! docs/hardware/h100-2026-11-27b): the copy threads wait for cores the decode holds. A lower
//! priority for the decode lets the merge stage's threads in first whenever they are ready,
//! and the decode still takes every core they leave idle. It is a measurement switch until the
//! hardware's figures choose (docs/benchmarks.md); niceness only lowers priority, so an
//! unprivileged process can set it, and it is Linux's per-thread niceness.

use std::sync::OnceLock;

use crate::env_setting::env_setting;
use crate::error::{Error, Result};

/// `DEEPMERGE_DECODE_NICE`'s niceness from its value `value` (unset, empty or 0: `None`); any
/// other value than 0 to 19 is an error naming the variable.
pub fn decode_nice_from(value: Option<&str>) -> Result<Option<i32>> {
    let Some(text) = value.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    match text.parse::<i32>() {
        Ok(0) => Ok(None),
        Ok(n @ 1..=19) => Ok(Some(n)),
        _ => Err(Error::Usage(format!(
            "DEEPMERGE_DECODE_NICE={text}: a niceness from 0 (the default: decode in rayon's \
             pool) to 19 is needed"
        ))),
    }
}

/// The pool the reader decodes in: `None` for rayon's global pool.
pub fn decode_pool() -> Result<Option<&'static rayon::ThreadPool>> {
    static POOL: OnceLock<std::result::Result<Option<rayon::ThreadPool>, String>> = OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let nice = decode_nice_from(env_setting("DEEPMERGE_DECODE_NICE").as_deref())
            .map_err(|e| e.to_string())?;
        let Some(nice) = nice else { return Ok(None) };
        rayon::ThreadPoolBuilder::new()
            .num_threads(rayon::current_num_threads())
            .thread_name(|k| format!("deepmerge-decode-{k}"))
            .start_handler(move |_| lower_priority(nice))
            .build()
            .map(Some)
            .map_err(|e| format!("the decode threads did not start: {e}"))
    });
    match pool {
        Ok(pool) => Ok(pool.as_ref()),
        Err(why) => Err(Error::Usage(why.clone())),
    }
}

/// Run `f` in the decode pool (or where it is called, with none).
pub fn in_decode_pool<T: Send>(f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    match decode_pool()? {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// This thread's niceness raised to `nice` (Linux: per thread; elsewhere nothing).
fn lower_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on this thread's own id; a failure leaves the priority as it was.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_niceness_outside_0_to_19_is_an_error_naming_the_variable() {
        assert_eq!(decode_nice_from(None).unwrap(), None);
        assert_eq!(decode_nice_from(Some("0")).unwrap(), None);
        assert_eq!(decode_nice_from(Some(" 5 ")).unwrap(), Some(5));
        assert_eq!(decode_nice_from(Some("19")).unwrap(), Some(19));
        for bad in ["20", "-1", "low"] {
            let err = decode_nice_from(Some(bad)).unwrap_err().to_string();
            assert!(err.contains("DEEPMERGE_DECODE_NICE"), "{err}");
        }
    }
}
