//! Priority: thread nice values, and whether raising them is permitted
//! (CAP_SYS_NICE, RLIMIT_NICE), with the reason when not.

#[allow(unused_imports)]
use super::*;

/// Why [`set_current_thread_nice`] failed.
#[derive(Debug, thiserror::Error)]
pub enum NiceError {
    /// The kernel refused to lower the nice value (raise the priority).
    #[error("cannot set nice {wanted}: {reason}")]
    Denied {
        /// The nice value asked for.
        wanted: i32,
        /// What is missing, e.g. "needs CAP_SYS_NICE or RLIMIT_NICE >= 40
        /// (current soft limit 0)".
        reason: String,
    },
    /// Any other failure of `setpriority(2)`.
    #[error("setpriority failed: {0}")]
    Other(#[from] io::Error),
}

/// The RLIMIT_NICE value the kernel requires for nice value `nice`
/// (`20 - nice`, nice clamped to the kernel's -20..=19).
pub(super) fn rlimit_needed_for(nice: i32) -> u64 {
    (20 - i64::from(nice.clamp(-20, 19))) as u64
}

/// The soft RLIMIT_NICE, or `None` if it cannot be read.
pub(super) fn rlimit_nice_soft() -> Option<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid, writable rlimit the kernel fills in.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NICE, &mut rl) };
    // rlim_t is 32 bits on some 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    (rc == 0).then_some(rl.rlim_cur as u64)
}

/// RLIM_INFINITY widened to u64 (rlim_t is 32 bits on some 32-bit targets).
#[allow(clippy::unnecessary_cast)]
pub(super) const RLIM_INFINITY_U64: u64 = libc::RLIM_INFINITY as u64;

pub(super) fn format_rlimit(v: Option<u64>) -> String {
    match v {
        Some(RLIM_INFINITY_U64) => "unlimited".to_string(),
        Some(v) => v.to_string(),
        None => "unknown".to_string(),
    }
}

/// CAP_SYS_NICE's bit in the capability sets.
pub(super) const CAP_SYS_NICE_BIT: u32 = 23;

/// The effective capability set from a `/proc/.../status` text.
pub(super) fn parse_cap_eff(status: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let hex = line.strip_prefix("CapEff:")?.trim();
        u64::from_str_radix(hex, 16).ok()
    })
}

/// Whether the calling thread's effective capabilities include CAP_SYS_NICE,
/// or `None` if the status file cannot be read.
pub(super) fn has_cap_sys_nice() -> Option<bool> {
    let status = std::fs::read_to_string("/proc/thread-self/status")
        .or_else(|_| std::fs::read_to_string("/proc/self/status"))
        .ok()?;
    parse_cap_eff(&status).map(|caps| caps & (1 << CAP_SYS_NICE_BIT) != 0)
}

/// The explanation carried by [`NiceError::Denied`] and returned by
/// [`can_raise_priority`]: names what the kernel checks and what we have.
pub(super) fn nice_denied_reason(
    wanted: i32,
    cap_sys_nice: Option<bool>,
    rlim_cur: Option<u64>,
) -> String {
    let need = rlimit_needed_for(wanted);
    let mut reason = format!(
        "needs CAP_SYS_NICE or RLIMIT_NICE >= {need} (current soft limit {})",
        format_rlimit(rlim_cur)
    );
    if cap_sys_nice == Some(true) {
        reason.push_str(
            "; CapEff shows CAP_SYS_NICE, but the kernel checks it in the initial user \
             namespace, so it is probably held only inside a container's user namespace \
             (or a seccomp/LSM policy refuses setpriority)",
        );
    } else {
        reason.push_str(&format!(
            "; run as root, give the binary the capability (setcap cap_sys_nice+ep), or raise \
             the limit (ulimit -e {need}, or a `nice` entry in /etc/security/limits.conf)"
        ));
    }
    reason
}

/// The nice value of thread `tid` (0 = calling thread).
pub(super) fn thread_nice(tid: i32) -> io::Result<i32> {
    // SAFETY: getpriority(2) only reads its integer arguments. The raw syscall
    // returns 20 - nice (1..=40) on success and -1 with errno on failure, so
    // unlike the libc wrapper its result is unambiguous.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_getpriority,
            libc::PRIO_PROCESS as libc::c_long,
            libc::c_long::from(tid),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(20 - rc as i32)
    }
}

/// The calling thread's nice value.
pub fn current_thread_nice() -> io::Result<i32> {
    thread_nice(0)
}

/// Sets the calling thread's nice value (`setpriority(PRIO_PROCESS, gettid(),
/// nice)`, which on Linux affects only that thread).
///
/// Raising the nice value is always allowed; lowering it needs CAP_SYS_NICE or
/// a large enough RLIMIT_NICE, and a refusal comes back as
/// [`NiceError::Denied`] naming both.
pub fn set_current_thread_nice(nice: i32) -> Result<(), NiceError> {
    let tid = gettid();
    // SAFETY: setpriority(2) only reads its integer arguments.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => Err(NiceError::Denied {
            wanted: nice,
            reason: nice_denied_reason(nice, has_cap_sys_nice(), rlimit_nice_soft()),
        }),
        _ => Err(NiceError::Other(err)),
    }
}

/// Whether the kernel's rules allow a thread at `current` to go to `wanted`.
pub(super) fn nice_permitted(
    wanted: i32,
    current: i32,
    cap_sys_nice: bool,
    rlim_cur: Option<u64>,
) -> bool {
    wanted >= current || cap_sys_nice || rlim_cur.is_some_and(|r| rlimit_needed_for(wanted) <= r)
}

/// Why [`can_raise_priority`] says threads may not run at a nice value.
#[derive(Debug, thiserror::Error)]
pub enum RaiseError {
    /// The kernel refuses it (or refused the trial): what it checks and
    /// what this process has.
    #[error("{}", nice_denied_reason(*wanted, *cap_sys_nice, *rlim_cur))]
    Denied {
        /// The nice value asked for.
        wanted: i32,
        /// CAP_SYS_NICE in CapEff, if it could be read.
        cap_sys_nice: Option<bool>,
        /// The soft RLIMIT_NICE, if it could be read.
        rlim_cur: Option<u64>,
    },
    /// The trial thread's `setpriority(2)` failed otherwise.
    #[error(transparent)]
    Failed(NiceError),
    /// The trial thread panicked.
    #[error("nice probe thread panicked")]
    Panicked,
}

/// Probes whether this process may run threads at nice `nice`, without
/// changing anything lasting: `Ok(())` if so, else why not.
///
/// Checks CAP_SYS_NICE in `/proc/thread-self/status` (CapEff, bit 23) and the
/// soft RLIMIT_NICE (`20 - nice <= rlim_cur`). When those say yes, it confirms
/// by setting the nice value on a short-lived scratch thread (which then exits),
/// because a capability held only inside a user namespace shows in CapEff but
/// does not satisfy the kernel.
pub fn can_raise_priority(nice: i32) -> Result<(), RaiseError> {
    let current = current_thread_nice().unwrap_or(0);
    if nice >= current {
        return Ok(());
    }
    let cap = has_cap_sys_nice();
    let rlim = rlimit_nice_soft();
    if !nice_permitted(nice, current, cap == Some(true), rlim) {
        return Err(RaiseError::Denied {
            wanted: nice,
            cap_sys_nice: cap,
            rlim_cur: rlim,
        });
    }
    let trial = std::thread::Builder::new()
        .name("nice-probe".into())
        .spawn(move || match set_current_thread_nice(nice) {
            Ok(()) => Ok(()),
            // What the kernel checks, read as the trial thread read it.
            Err(NiceError::Denied { .. }) => Err(RaiseError::Denied {
                wanted: nice,
                cap_sys_nice: has_cap_sys_nice(),
                rlim_cur: rlimit_nice_soft(),
            }),
            Err(e) => Err(RaiseError::Failed(e)),
        });
    match trial {
        Ok(handle) => handle.join().unwrap_or(Err(RaiseError::Panicked)),
        // Could not start the scratch thread: trust the static check.
        Err(_) => Ok(()),
    }
}

/// Priority of the threads standing for interrupt context: the kernel's
/// threaded IRQ handlers run at SCHED_FIFO 50 (`sched_set_fifo()`).
pub const IRQ_FIFO_PRIORITY: i32 = 50;

/// Why [`set_current_thread_fifo`] was refused: the OS error and what the
/// kernel asks for, with the soft `RLIMIT_RTPRIO` when it could be read.
#[derive(Debug, thiserror::Error)]
#[error(
    "SCHED_FIFO {priority} refused ({source}): needs CAP_SYS_NICE or RLIMIT_RTPRIO >= {priority}{}",
    match rlim_cur {
        Some(cur) => format!(" (current soft limit {cur})"),
        None => String::new(),
    }
)]
pub struct FifoError {
    /// The priority asked for.
    pub priority: i32,
    /// `sched_setscheduler(2)`'s error.
    pub source: io::Error,
    /// The soft `RLIMIT_RTPRIO`, if it could be read.
    pub rlim_cur: Option<u64>,
}

/// Puts the calling thread in SCHED_FIFO at `priority`. Refused without
/// CAP_SYS_NICE or an `RLIMIT_RTPRIO` of at least `priority`: the error
/// says which.
pub fn set_current_thread_fifo(priority: i32) -> Result<(), FifoError> {
    // musl's sched_param has extra (SCHED_SPORADIC) fields the kernel never
    // reads: start from zero and set the one field Linux knows.
    // SAFETY: sched_param is plain integers, for which all zeroes is valid.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    param.sched_priority = priority;
    // SAFETY: `param` is a live sched_param the kernel only reads; pid 0 is
    // the calling thread.
    let rc = unsafe { sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `lim`, which is live.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut lim) } == 0;
    // rlim_t is 32 bits on some 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    let rlim_cur = got.then_some(lim.rlim_cur as u64);
    Err(FifoError {
        priority,
        source: err,
        rlim_cur,
    })
}

/// The scheduling policy of thread `tid` (`SCHED_OTHER` 0, `SCHED_FIFO` 1, ...).
pub fn thread_policy(tid: i32) -> io::Result<i32> {
    // SAFETY: sched_getscheduler only reads its argument.
    let p = unsafe { sched_getscheduler(tid) };
    if p < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(p)
    }
}

// glibc's sched_setscheduler/sched_getscheduler are the system calls, per
// thread as Linux has them. musl's are stubs that fail with ENOSYS (POSIX
// says process, Linux does thread), so a musl build makes the system calls
// itself: same arguments, same result, errno set the same way.
#[cfg(not(target_env = "musl"))]
use libc::{sched_getscheduler, sched_setscheduler};

/// `sched_setscheduler(2)` as the system call (musl's libc function is an
/// ENOSYS stub).
///
/// # Safety
/// `param` must point to a live `sched_param`.
#[cfg(target_env = "musl")]
unsafe fn sched_setscheduler(
    pid: libc::pid_t,
    policy: libc::c_int,
    param: *const libc::sched_param,
) -> libc::c_int {
    // SAFETY: the caller passes a live sched_param the kernel only reads.
    unsafe { libc::syscall(libc::SYS_sched_setscheduler, pid, policy, param) as libc::c_int }
}

/// `sched_getscheduler(2)` as the system call (musl's libc function is an
/// ENOSYS stub).
///
/// # Safety
/// None beyond the system call's: it only reads its argument.
#[cfg(target_env = "musl")]
unsafe fn sched_getscheduler(pid: libc::pid_t) -> libc::c_int {
    // SAFETY: the system call takes a plain integer and reads no memory.
    unsafe { libc::syscall(libc::SYS_sched_getscheduler, pid) as libc::c_int }
}
