//! Temporary files that must not outlive an interrupted run.
//!
//! Outputs are written to a temporary file beside them and renamed into place
//! ([`crate::exr::write_atomically`]), so an error never leaves a partial output: dropping the
//! `tempfile` handle removes the file. A signal that kills the process skips every destructor,
//! though, so each live temporary file is also listed here, in a small registry, and
//! [`install_signal_handlers`] starts a thread that on SIGINT, SIGTERM or SIGHUP removes every
//! listed file and then dies of that same signal (so the parent sees the conventional status,
//! 130, 143 or 129 in a shell, and a shell loop stops on Ctrl-C).
//!
//! A writer lists its file with a [`TempFileGuard`] for as long as the file may exist under its
//! temporary name: create the guard right after creating the file, and drop it once the file is
//! renamed or removed. Declared before the file handle (or held in a struct field after it),
//! the guard outlives the handle, so a signal never finds the file unlisted while it exists.
//!
//! It also makes writes past the file-size limit (`ulimit -f`) fail with `EFBIG`, like a full
//! disk, instead of killing the process with SIGXFSZ and leaving the temporary file behind.
//!
//! Test hook: with `DEEPMERGE_TEST_PAUSE_AFTER_TEMP_MS=N` set, creating a guard sleeps N ms
//! afterwards, so a test can signal a run that is known to hold a temporary file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGXFSZ};

/// Environment variable of the test hook (see the module docs).
pub const PAUSE_AFTER_TEMP_ENV: &str = "DEEPMERGE_TEST_PAUSE_AFTER_TEMP_MS";

/// The live temporary files, each with the id of the guard that listed it.
static LIVE: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());

/// Ids for guards, so one path listed twice is unlisted once per guard.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn live() -> MutexGuard<'static, Vec<(u64, PathBuf)>> {
    // A panic elsewhere while the list was locked leaves it consistent (one push or remove).
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Lists a temporary file for removal on a terminating signal until it is dropped; see the
/// module docs for where to create and drop it.
#[derive(Debug)]
pub struct TempFileGuard {
    id: u64,
}

impl TempFileGuard {
    /// List `path` (the temporary file just created) for removal on a terminating signal.
    pub fn new(path: &Path) -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        live().push((id, path.to_path_buf()));
        if let Some(ms) = std::env::var(PAUSE_AFTER_TEMP_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        TempFileGuard { id }
    }
}

impl Drop for TempFileGuard {
    fn drop(&mut self) {
        live().retain(|(id, _)| *id != self.id);
    }
}

/// The temporary files listed now (for tests).
pub fn live_temp_files() -> Vec<PathBuf> {
    live().iter().map(|(_, p)| p.clone()).collect()
}

/// Remove every listed temporary file, leaving the list locked so that no writer can list (or
/// rename) another one while the process goes down. Called by the signal thread only.
fn remove_all_and_hold() -> MutexGuard<'static, Vec<(u64, PathBuf)>> {
    let list = live();
    for (_, path) in list.iter() {
        // Already renamed or removed by its writer: nothing left to do.
        let _ = std::fs::remove_file(path);
    }
    list
}

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Install the handlers (once per process; later calls do nothing): a thread that on SIGINT,
/// SIGTERM or SIGHUP removes the listed temporary files and dies of the signal (except for
/// those the parent made the process ignore, which stay ignored), and a no-op handler for
/// SIGXFSZ so that exceeding the file-size limit is a write error (`EFBIG`).
///
/// Fails only when the operating system refuses a handler, with its message.
pub fn install_signal_handlers() -> std::io::Result<()> {
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    // Caught rather than fatal: the write that crosses the limit returns EFBIG instead.
    signal_hook::flag::register(SIGXFSZ, Arc::new(AtomicBool::new(false)))?;
    // A signal the parent set to be ignored stays ignored (`nohup` ignores SIGHUP, a
    // non-interactive shell's background jobs SIGINT): catching it would end runs they protect.
    let caught: Vec<i32> = [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|&s| !is_ignored(s))
        .collect();
    let mut signals = signal_hook::iterator::Signals::new(caught)?;
    std::thread::Builder::new()
        .name("deepmerge-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let _held = remove_all_and_hold();
                // Restores the default action and raises the signal again: the process ends as
                // if it had never caught it. Should that fail, exit with the shell's status.
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                std::process::exit(128 + signal);
            }
        })?;
    Ok(())
}

/// True when `signal`'s disposition is "ignore" (inherited from the parent).
fn is_ignored(signal: i32) -> bool {
    // SAFETY: sigaction with a null new action only reads the current one into `current`, a
    // zeroed, properly sized and aligned struct.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_list_and_unlist_their_own_file() {
        let a = Path::new("/nonexistent/a.tmp");
        let first = TempFileGuard::new(a);
        let second = TempFileGuard::new(a);
        let count = |p: &Path| live_temp_files().iter().filter(|q| *q == p).count();
        assert_eq!(count(a), 2);
        drop(first);
        assert_eq!(count(a), 1);
        drop(second);
        assert_eq!(count(a), 0);
    }
}
