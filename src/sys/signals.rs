//! Signals: the stop signals end runs the way quitting does; the explorer also
//! hears resizes, stops and continues. Every handler only stores to an atomic.
//!
//! The handlers are installed with SA_RESTART (a blocking call is resumed
//! after the handler, as the standard library expects), so a stop signal
//! is seen only where something polls [`stop_requested`]: nothing may block
//! on what a user names (a FIFO, a pipe, a terminal, a slow reader, a
//! regular file whose read blocks such as `/proc/kmsg`) without a timeout.
//! `files` opens and reads every input non-blocking and waits in `poll(2)`
//! for at most 100 ms at a time (and refuses files of kernel
//! pseudo-filesystems outright); the dataset is prepared on a thread while
//! the command's thread polls; every loop of a run polls between records.
//! Clearing SA_RESTART instead would make every blocking call in the crate
//! (and in its libraries) fail with EINTR on the thread the signal lands
//! on, and only there: polling is the design that cannot regress.

#[allow(unused_imports)]
use super::*;

/// Set by the stop signals; the long-running loops (run, compare, the
/// explorer) poll it and end as on a normal quit: outputs finished, summary
/// printed.
static STOP: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// Set by SIGWINCH: the terminal changed size.
static RESIZED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Set by SIGTSTP (sent by `kill -TSTP`; in raw mode Ctrl-Z is a key).
static SUSPEND: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Set by SIGCONT: the process was continued (`fg`) after a stop.
static CONTINUED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The signals that end a run the way quitting does.
pub const STOP_SIGNALS: [libc::c_int; 4] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

extern "C" fn on_stop(sig: libc::c_int) {
    STOP.store(sig, std::sync::atomic::Ordering::SeqCst);
}

extern "C" fn on_winch(_: libc::c_int) {
    RESIZED.store(true, std::sync::atomic::Ordering::SeqCst);
}

extern "C" fn on_tstp(_: libc::c_int) {
    SUSPEND.store(true, std::sync::atomic::Ordering::SeqCst);
}

extern "C" fn on_cont(_: libc::c_int) {
    CONTINUED.store(true, std::sync::atomic::Ordering::SeqCst);
}

pub(super) fn set_handler(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: every handler here only stores to an atomic, which is
    // async-signal-safe; sigaction is given a zeroed, then filled struct.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Installs the stop handlers (SIGINT, SIGTERM, SIGHUP, SIGQUIT): from now
/// on they set a flag ([`stop_signal`]) instead of killing the process.
pub fn install_stop_handlers() {
    for sig in STOP_SIGNALS {
        set_handler(sig, on_stop);
    }
}

/// Installs the explorer's handlers: the stop signals, plus SIGWINCH
/// (redraw), SIGTSTP (suspend: restore the terminal, then stop) and SIGCONT
/// (take the terminal back and redraw).
pub fn install_terminal_handlers() {
    install_stop_handlers();
    set_handler(libc::SIGWINCH, on_winch);
    set_handler(libc::SIGTSTP, on_tstp);
    set_handler(libc::SIGCONT, on_cont);
}

/// The stop signal received, if any (0: none).
pub fn stop_signal() -> libc::c_int {
    STOP.load(std::sync::atomic::Ordering::SeqCst)
}

/// The conventional name of a signal number ("SIGTERM").
pub fn signal_name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGTSTP => "SIGTSTP",
        _ => "a signal",
    }
}

/// True once a stop signal arrived.
pub fn stop_requested() -> bool {
    stop_signal() != 0
}

/// True (once) when the terminal was resized since the last call.
pub fn take_resized() -> bool {
    RESIZED.swap(false, std::sync::atomic::Ordering::SeqCst)
}

/// True (once) when a SIGTSTP asked the explorer to suspend.
pub fn take_suspend() -> bool {
    SUSPEND.swap(false, std::sync::atomic::Ordering::SeqCst)
}

/// True (once) when the process was continued after a stop.
pub fn take_continued() -> bool {
    CONTINUED.swap(false, std::sync::atomic::Ordering::SeqCst)
}

/// Stops the process as Ctrl-Z does in a shell (job control), and returns
/// when it is continued. The caller restores the terminal first.
pub fn stop_self() {
    // SAFETY: SIGSTOP cannot be caught or ignored; raise(3) only sends it to
    // this thread's process. Execution resumes here after SIGCONT.
    unsafe {
        libc::raise(libc::SIGSTOP);
    }
}

/// SIGHUP: the terminal hung up (the explorer ends as "terminal gone").
pub const SIGHUP: i32 = libc::SIGHUP;

/// Sends SIGTERM to `pid` (a child of ours not reaped yet, so its PID is
/// not reused); false when it could not be sent.
pub fn terminate(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid, libc::SIGTERM) == 0 }
}

/// Sends SIGKILL to process group `pgid` (a child of ours that leads its
/// own group, `process_group(0)`, not reaped yet, so the ID is not
/// reused); false when it could not be sent.
pub fn kill_group(pgid: u32) -> bool {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return false;
    };
    // SAFETY: kill has no memory-safety preconditions; a negative PID names
    // the process group.
    unsafe { libc::kill(-pgid, libc::SIGKILL) == 0 }
}
