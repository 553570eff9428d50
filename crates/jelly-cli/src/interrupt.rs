//! Temporary output files removed when the command is interrupted.
//!
//! Outputs are written under a temporary name and renamed into place at the end (see
//! [`crate::io::Output`]), and a temporary file is removed when the command fails. A
//! signal (Ctrl-C, SIGTERM from `timeout` or a supervisor) ends the process without
//! running that cleanup, which left `.NAME.PID.N.tmp` files behind; so the first
//! temporary file starts a thread that waits for those signals, removes the files
//! still pending and exits as the signal would have (130, 143).
//!
//! A command may also take the first signal itself ([`defer_first_signal`]): a
//! streaming publish then ends its request at a frame boundary and prints what the
//! server appended. A second signal exits at once.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static WATCH: Once = Once::new();
/// Whether the signal handlers are installed.
static WATCHING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Where the next signal goes instead of ending the process (taken by that signal).
static DEFERRED: Mutex<Option<tokio::sync::watch::Sender<Option<u8>>>> = Mutex::new(None);

/// Hands the next Ctrl-C or SIGTERM to the caller instead of exiting: the receiver
/// then holds the exit code the signal stands for (130, 143). A signal after that one
/// exits as usual. `None` if the handlers cannot be installed (signals then keep their
/// default action).
pub fn defer_first_signal() -> Option<tokio::sync::watch::Receiver<Option<u8>>> {
    WATCH.call_once(watch_signals);
    if !WATCHING.load(std::sync::atomic::Ordering::Acquire) {
        return None;
    }
    let (tx, rx) = tokio::sync::watch::channel(None);
    *DEFERRED.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
    Some(rx)
}

/// Records a temporary file to remove if the command is interrupted.
pub fn register(tmp: &Path) {
    WATCH.call_once(watch_signals);
    lock().push(tmp.to_path_buf());
}

/// Forgets a temporary file (renamed into place, or removed).
pub fn unregister(tmp: &Path) {
    lock().retain(|p| p != tmp);
}

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Installs the handlers before returning (so that a signal right after the first
/// temporary file is made is caught), then waits for them on a thread of its own.
fn watch_signals() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    else {
        return;
    };
    let signals = {
        let _in_runtime = rt.enter();
        (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        )
    };
    let (Ok(mut int), Ok(mut term)) = signals else {
        // Without handlers, signals keep their default action: only the cleanup is lost.
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("jelly-interrupt".into())
        .spawn(move || {
            rt.block_on(async {
                loop {
                    let code: u8 = tokio::select! {
                        _ = int.recv() => 130,
                        _ = term.recv() => 143,
                    };
                    let deferred = DEFERRED.lock().unwrap_or_else(|e| e.into_inner()).take();
                    if let Some(tx) = deferred
                        && tx.send(Some(code)).is_ok()
                    {
                        continue;
                    }
                    for p in lock().drain(..) {
                        let _ = std::fs::remove_file(p);
                    }
                    std::process::exit(i32::from(code));
                }
            });
        });
    if spawned.is_ok() {
        WATCHING.store(true, std::sync::atomic::Ordering::Release);
    }
}
