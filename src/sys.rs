//! Everything readpath asks the kernel about itself.
//!
//! readpath measures scheduler latency the way kernel engineers do, so it needs
//! the kernel's own bookkeeping rather than guesses from wall clocks: per-thread
//! CPU time, run-queue delay and timeslices (`/proc/self/task/TID/schedstat`),
//! voluntary and involuntary context switches (`.../status`, or `.../sched`
//! when present), migrations (`.../sched`), per-CPU busy/iowait time (`/proc/stat`), and process CPU time
//! and RSS. It also decides where threads run and at what priority
//! (`sched_setaffinity`, `setpriority`), probes once at startup what the machine
//! and kernel offer (io_uring and its `NO_IOWAIT` feature, AES/SHA
//! instructions, schedstat, the right to raise priority, O_DIRECT), and records
//! a description of the machine with every result. This module and the
//! io_uring reader are the only places in readpath that make raw syscalls, so
//! every `unsafe` block the rest of the crate depends on for talking to the
//! kernel lives here, each with its own `SAFETY:` argument.
//!
//! Readers meant to run every sampling interval ([`ThreadStatReader`],
//! [`ProcStatReader`]) keep their files open and `pread` them at offset 0 into
//! a buffer they own. procfs seq files regenerate their contents on a read at
//! offset 0, so after the first call a sample costs one syscall per file and no
//! allocation. The parsers are pure functions over text, tested against fixed
//! samples independently of the live files.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

// ---------------------------------------------------------------------------
// Threads and CPUs
// ---------------------------------------------------------------------------

/// The kernel thread id of the calling thread.
pub fn gettid() -> i32 {
    // SAFETY: gettid(2) takes no arguments, touches no memory and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    tid as i32
}

/// The CPU the calling thread is running on right now (`sched_getcpu(3)`).
///
/// glibc answers from the rseq area or the vDSO, so this is cheap enough to
/// call once per I/O. The answer may be stale by the time it is used unless the
/// thread is pinned. Returns 0 if the kernel cannot tell (never seen on Linux).
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu takes no arguments and only returns a value.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).unwrap_or(0)
}

/// Bits per word of a kernel CPU mask (`unsigned long`).
const MASK_WORD_BITS: usize = libc::c_ulong::BITS as usize;
/// The largest CPU index accepted by [`pin_current_thread`]; anything above is a
/// caller bug, not a CPU.
const MAX_CPU_INDEX: usize = 1 << 20;

fn mask_to_cpus(words: &[libc::c_ulong]) -> Vec<usize> {
    let mut cpus = Vec::new();
    for (i, &word) in words.iter().enumerate() {
        let mut w = word;
        while w != 0 {
            cpus.push(i * MASK_WORD_BITS + w.trailing_zeros() as usize);
            w &= w - 1;
        }
    }
    cpus
}

fn cpus_to_mask(cpus: &[usize]) -> Vec<libc::c_ulong> {
    let max = cpus.iter().copied().max().unwrap_or(0);
    // At least the size of glibc's cpu_set_t (1024 CPUs); the kernel ignores
    // bits beyond its own CPU count.
    let words = (max / MASK_WORD_BITS + 1).max(1024 / MASK_WORD_BITS);
    let mut mask = vec![0 as libc::c_ulong; words];
    for &cpu in cpus {
        mask[cpu / MASK_WORD_BITS] |= 1 << (cpu % MASK_WORD_BITS);
    }
    mask
}

/// `sched_getaffinity(pid)` as a sorted list of CPU indices, growing the mask
/// until it is as large as the kernel's (machines with more than 1024 CPUs).
fn affinity_of(pid: libc::pid_t) -> io::Result<Vec<usize>> {
    let mut words: Vec<libc::c_ulong> = vec![0; 1024 / MASK_WORD_BITS];
    loop {
        let bytes = std::mem::size_of_val(words.as_slice());
        // SAFETY: `words` is a live, writable buffer of exactly `bytes` bytes,
        // suitably aligned for `unsigned long` (the kernel's mask word, and
        // cpu_set_t's). The kernel writes at most `bytes` bytes into it; glibc
        // only zeroes the part the kernel did not write, also within `bytes`.
        let rc = unsafe {
            libc::sched_getaffinity(pid, bytes, words.as_mut_ptr().cast::<libc::cpu_set_t>())
        };
        if rc == 0 {
            return Ok(mask_to_cpus(&words));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINVAL) && words.len() < MAX_CPU_INDEX / MASK_WORD_BITS
        {
            let len = words.len() * 2;
            words.resize(len, 0);
            continue;
        }
        return Err(err);
    }
}

/// The CPUs the process was allowed to use when this module first looked
/// (the first call to [`online_cpus`], [`pin_current_thread`] or
/// [`unpin_current_thread`]; call `online_cpus()` early in `main` to make that
/// "startup").
fn process_mask() -> &'static [usize] {
    static MASK: OnceLock<Vec<usize>> = OnceLock::new();
    MASK.get_or_init(|| {
        // SAFETY: getpid(2) takes no arguments and cannot fail.
        let pid = unsafe { libc::getpid() };
        // The main thread's mask (its tid is the pid) is the process's mask,
        // even when the first caller is an already pinned worker.
        affinity_of(pid)
            .or_else(|_| affinity_of(0))
            .ok()
            .filter(|cpus| !cpus.is_empty())
            .unwrap_or_else(|| {
                let n = std::thread::available_parallelism().map_or(1, |n| n.get());
                (0..n).collect()
            })
    })
}

/// The CPUs this process may run on, sorted: the affinity mask of the process
/// (its main thread) as captured once at startup, which is what `taskset` or a
/// cpuset cgroup allowed. Not changed by later pinning of threads.
pub fn online_cpus() -> Vec<usize> {
    process_mask().to_vec()
}

/// Pins the calling thread to `cpus` (`sched_setaffinity(0, ...)`).
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    // Capture the process mask before the first change of any thread's mask.
    let _ = process_mask();
    if cpus.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot pin a thread to an empty CPU set",
        ));
    }
    if let Some(&bad) = cpus.iter().find(|&&c| c > MAX_CPU_INDEX) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU index {bad} is out of range"),
        ));
    }
    let mask = cpus_to_mask(cpus);
    // SAFETY: `mask` is a live buffer of exactly the size passed, aligned for
    // `unsigned long`; the kernel only reads from it. pid 0 is the calling thread.
    let rc = unsafe {
        libc::sched_setaffinity(
            0,
            std::mem::size_of_val(mask.as_slice()),
            mask.as_ptr().cast::<libc::cpu_set_t>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Lets the calling thread run on every CPU of the process mask captured at
/// startup again.
pub fn unpin_current_thread() -> io::Result<()> {
    pin_current_thread(process_mask())
}

/// The calling thread's CPU affinity right now, sorted.
pub fn current_thread_affinity() -> io::Result<Vec<usize>> {
    affinity_of(0)
}

// ---------------------------------------------------------------------------
// Priority
// ---------------------------------------------------------------------------

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
fn rlimit_needed_for(nice: i32) -> u64 {
    (20 - i64::from(nice.clamp(-20, 19))) as u64
}

/// The soft RLIMIT_NICE, or `None` if it cannot be read.
fn rlimit_nice_soft() -> Option<u64> {
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
const RLIM_INFINITY_U64: u64 = libc::RLIM_INFINITY as u64;

fn format_rlimit(v: Option<u64>) -> String {
    match v {
        Some(RLIM_INFINITY_U64) => "unlimited".to_string(),
        Some(v) => v.to_string(),
        None => "unknown".to_string(),
    }
}

/// CAP_SYS_NICE's bit in the capability sets.
const CAP_SYS_NICE_BIT: u32 = 23;

/// The effective capability set from a `/proc/.../status` text.
fn parse_cap_eff(status: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let hex = line.strip_prefix("CapEff:")?.trim();
        u64::from_str_radix(hex, 16).ok()
    })
}

/// Whether the calling thread's effective capabilities include CAP_SYS_NICE,
/// or `None` if the status file cannot be read.
fn has_cap_sys_nice() -> Option<bool> {
    let status = std::fs::read_to_string("/proc/thread-self/status")
        .or_else(|_| std::fs::read_to_string("/proc/self/status"))
        .ok()?;
    parse_cap_eff(&status).map(|caps| caps & (1 << CAP_SYS_NICE_BIT) != 0)
}

/// The explanation carried by [`NiceError::Denied`] and returned by
/// [`can_raise_priority`]: names what the kernel checks and what we have.
fn nice_denied_reason(wanted: i32, cap_sys_nice: Option<bool>, rlim_cur: Option<u64>) -> String {
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
fn thread_nice(tid: i32) -> io::Result<i32> {
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
fn nice_permitted(wanted: i32, current: i32, cap_sys_nice: bool, rlim_cur: Option<u64>) -> bool {
    wanted >= current || cap_sys_nice || rlim_cur.is_some_and(|r| rlimit_needed_for(wanted) <= r)
}

/// Probes whether this process may run threads at nice `nice`, without
/// changing anything lasting: `Ok(())` if so, else `Err(reason)`.
///
/// Checks CAP_SYS_NICE in `/proc/thread-self/status` (CapEff, bit 23) and the
/// soft RLIMIT_NICE (`20 - nice <= rlim_cur`). When those say yes, it confirms
/// by setting the nice value on a short-lived scratch thread (which then exits),
/// because a capability held only inside a user namespace shows in CapEff but
/// does not satisfy the kernel.
pub fn can_raise_priority(nice: i32) -> Result<(), String> {
    let current = current_thread_nice().unwrap_or(0);
    if nice >= current {
        return Ok(());
    }
    let cap = has_cap_sys_nice();
    let rlim = rlimit_nice_soft();
    if !nice_permitted(nice, current, cap == Some(true), rlim) {
        return Err(nice_denied_reason(nice, cap, rlim));
    }
    let trial = std::thread::Builder::new()
        .name("nice-probe".into())
        .spawn(move || match set_current_thread_nice(nice) {
            Ok(()) => Ok(()),
            Err(NiceError::Denied { reason, .. }) => Err(reason),
            Err(e) => Err(e.to_string()),
        });
    match trial {
        Ok(handle) => handle
            .join()
            .unwrap_or_else(|_| Err("nice probe thread panicked".to_string())),
        // Could not start the scratch thread: trust the static check.
        Err(_) => Ok(()),
    }
}

// ---------------------------------------------------------------------------
// procfs files read every interval
// ---------------------------------------------------------------------------

/// A procfs file kept open and re-read from offset 0 into a reusable buffer.
#[derive(Debug)]
struct ProcFile {
    file: File,
    buf: Vec<u8>,
}

impl ProcFile {
    fn open(path: &Path, initial_capacity: usize) -> io::Result<Self> {
        Ok(Self {
            file: File::open(path)?,
            buf: vec![0; initial_capacity.max(16)],
        })
    }

    /// One `pread` at offset 0 into the buffer; returns the byte count. A count
    /// equal to the buffer length means there may be more.
    fn pread0(&mut self) -> io::Result<usize> {
        loop {
            match self.file.read_at(&mut self.buf, 0) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }

    fn grow(&mut self) {
        let len = self.buf.len() * 2;
        self.buf.resize(len, 0);
    }

    /// Reads the whole file; returns its length in `buf`. A seq file shown in
    /// one go (schedstat, status, sched, stat) returns everything in a single
    /// read when the buffer is large enough, so a short read is the end; a full
    /// buffer is grown and the read repeated, which happens only on the first
    /// reads.
    fn read_whole(&mut self) -> io::Result<usize> {
        loop {
            let n = self.pread0()?;
            if n < self.buf.len() {
                return Ok(n);
            }
            self.grow();
        }
    }
}

fn invalid_data(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("cannot parse {what}"))
}

fn as_text<'a>(bytes: &'a [u8], what: &str) -> io::Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|_| invalid_data(what))
}

/// `cpu_ns run_delay_ns timeslices` from a `schedstat` file.
fn parse_schedstat(text: &str) -> Option<[u64; 3]> {
    let mut fields = text.split_ascii_whitespace().map(str::parse::<u64>);
    let mut next = || fields.next()?.ok();
    Some([next()?, next()?, next()?])
}

/// `(voluntary, nonvoluntary)` context switches from a `status` file.
fn parse_status_switches(text: &str) -> Option<(u64, u64)> {
    let mut voluntary = None;
    let mut nonvoluntary = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
            voluntary = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
            nonvoluntary = v.trim().parse().ok();
        }
        if voluntary.is_some() && nonvoluntary.is_some() {
            break;
        }
    }
    Some((voluntary?, nonvoluntary?))
}

/// What readpath takes from a `sched` file (`key   :   value` lines).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SchedFields {
    /// `se.nr_migrations`.
    migrations: Option<u64>,
    /// `nr_voluntary_switches` and `nr_involuntary_switches`: the same
    /// counters (`nvcsw`, `nivcsw`) that `status` shows as
    /// `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches`.
    switches: Option<(u64, u64)>,
}

fn parse_sched(text: &str) -> SchedFields {
    let mut migrations = None;
    let mut voluntary = None;
    let mut involuntary = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let slot = match key.trim() {
            "se.nr_migrations" => &mut migrations,
            "nr_voluntary_switches" => &mut voluntary,
            "nr_involuntary_switches" => &mut involuntary,
            _ => continue,
        };
        *slot = value.trim().parse().ok();
        if migrations.is_some() && voluntary.is_some() && involuntary.is_some() {
            break;
        }
    }
    SchedFields {
        migrations,
        switches: voluntary.zip(involuntary),
    }
}

/// Per-thread scheduler counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ThreadCounters {
    /// Time spent on a CPU (schedstat field 1).
    pub cpu_ns: u64,
    /// Time spent runnable on a run queue, waiting for a CPU (schedstat field 2).
    pub run_delay_ns: u64,
    /// Number of times run on a CPU (schedstat field 3).
    pub timeslices: u64,
    /// Switches away because the thread blocked or yielded.
    pub voluntary_ctxt_switches: u64,
    /// Switches away because the thread was preempted.
    pub nonvoluntary_ctxt_switches: u64,
    /// Moves between CPUs (`se.nr_migrations`; 0 when `/sched` is absent).
    pub migrations: u64,
}

impl ThreadCounters {
    /// `self - earlier`, field by field, saturating at 0.
    pub fn delta(&self, earlier: &ThreadCounters) -> ThreadCounters {
        ThreadCounters {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            run_delay_ns: self.run_delay_ns.saturating_sub(earlier.run_delay_ns),
            timeslices: self.timeslices.saturating_sub(earlier.timeslices),
            voluntary_ctxt_switches: self
                .voluntary_ctxt_switches
                .saturating_sub(earlier.voluntary_ctxt_switches),
            nonvoluntary_ctxt_switches: self
                .nonvoluntary_ctxt_switches
                .saturating_sub(earlier.nonvoluntary_ctxt_switches),
            migrations: self.migrations.saturating_sub(earlier.migrations),
        }
    }

    /// Adds `other` field by field (saturating), e.g. to total a thread pool.
    pub fn add(&mut self, other: &ThreadCounters) {
        self.cpu_ns = self.cpu_ns.saturating_add(other.cpu_ns);
        self.run_delay_ns = self.run_delay_ns.saturating_add(other.run_delay_ns);
        self.timeslices = self.timeslices.saturating_add(other.timeslices);
        self.voluntary_ctxt_switches = self
            .voluntary_ctxt_switches
            .saturating_add(other.voluntary_ctxt_switches);
        self.nonvoluntary_ctxt_switches = self
            .nonvoluntary_ctxt_switches
            .saturating_add(other.nonvoluntary_ctxt_switches);
        self.migrations = self.migrations.saturating_add(other.migrations);
    }
}

/// Opened once per thread (by tid, for the current process), read every
/// interval: `/proc/self/task/TID/{schedstat,status,sched}` kept open and
/// re-read with `pread` at offset 0 into buffers owned by the reader.
///
/// CPU time, run delay and timeslices come from `schedstat`, migrations from
/// `sched`. The context switch counts come from `sched` too when it has them
/// (the same kernel counters as `status` shows, and one file fewer per read;
/// `status` is the costliest of the three for the kernel to generate);
/// otherwise from `status`.
///
/// The reader may be used from any thread. Once the thread has exited,
/// [`read`](Self::read) fails (ESRCH).
#[derive(Debug)]
pub struct ThreadStatReader {
    tid: i32,
    schedstat: ProcFile,
    status: ProcFile,
    sched: Option<ProcFile>,
    /// `sched` carries the context switch counts, so `status` is not read.
    switches_from_sched: bool,
}

impl ThreadStatReader {
    /// Opens the files of thread `tid` of this process. `/sched` (which needs
    /// CONFIG_SCHED_DEBUG) is optional: without it, or if it has no
    /// `se.nr_migrations` line, migrations read as 0 and
    /// [`has_migrations`](Self::has_migrations) is false.
    pub fn open(tid: i32) -> io::Result<Self> {
        let dir = PathBuf::from(format!("/proc/self/task/{tid}"));
        let schedstat = ProcFile::open(&dir.join("schedstat"), 128)?;
        let status = ProcFile::open(&dir.join("status"), 4096)?;
        let mut sched = ProcFile::open(&dir.join("sched"), 4096).ok();
        let fields = sched
            .as_mut()
            .and_then(|f| {
                let n = f.read_whole().ok()?;
                std::str::from_utf8(&f.buf[..n]).ok().map(parse_sched)
            })
            .unwrap_or_default();
        if fields.migrations.is_none() {
            sched = None;
        }
        Ok(Self {
            tid,
            schedstat,
            status,
            switches_from_sched: sched.is_some() && fields.switches.is_some(),
            sched,
        })
    }

    /// The thread this reader reads.
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// Whether migrations are counted (the thread's `/sched` file exists).
    pub fn has_migrations(&self) -> bool {
        self.sched.is_some()
    }

    /// The thread's counters now (cumulative since it started).
    pub fn read(&mut self) -> io::Result<ThreadCounters> {
        let n = self.schedstat.read_whole()?;
        let [cpu_ns, run_delay_ns, timeslices] =
            parse_schedstat(as_text(&self.schedstat.buf[..n], "schedstat")?)
                .ok_or_else(|| invalid_data("schedstat"))?;

        let mut from_sched = SchedFields::default();
        if let Some(f) = &mut self.sched {
            let n = f.read_whole()?;
            from_sched = parse_sched(as_text(&f.buf[..n], "sched")?);
            if from_sched.migrations.is_none() {
                return Err(invalid_data("sched se.nr_migrations"));
            }
        }
        let migrations = from_sched.migrations.unwrap_or(0);

        let (voluntary, nonvoluntary) = match from_sched.switches {
            Some(switches) if self.switches_from_sched => switches,
            _ => {
                let n = self.status.read_whole()?;
                parse_status_switches(as_text(&self.status.buf[..n], "status")?)
                    .ok_or_else(|| invalid_data("status context switches"))?
            }
        };

        Ok(ThreadCounters {
            cpu_ns,
            run_delay_ns,
            timeslices,
            voluntary_ctxt_switches: voluntary,
            nonvoluntary_ctxt_switches: nonvoluntary,
            migrations,
        })
    }
}

/// Whether the kernel keeps per-task schedstat (CONFIG_SCHED_INFO): the calling
/// thread's `schedstat` is readable and not all zero. Run delay and timeslices
/// come from it; without it readpath cannot measure scheduler latency.
pub fn schedstat_available() -> bool {
    ["/proc/thread-self/schedstat", "/proc/self/schedstat"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|t| parse_schedstat(&t))
        .any(|fields| fields.iter().any(|&v| v != 0))
}

// ---------------------------------------------------------------------------
// /proc/stat
// ---------------------------------------------------------------------------

/// Per-CPU times from /proc/stat (USER_HZ ticks; convert with
/// [`clock_ticks_per_sec`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CpuTimes {
    /// The CPU index (`cpuN`).
    pub cpu: usize,
    /// Time in user mode (includes guest time).
    pub user: u64,
    /// Time in user mode at positive nice.
    pub nice: u64,
    /// Time in kernel mode.
    pub system: u64,
    /// Idle time.
    pub idle: u64,
    /// Idle time with I/O outstanding (not reliable on NO_HZ kernels; may even
    /// go backwards).
    pub iowait: u64,
    /// Hard interrupt time.
    pub irq: u64,
    /// Soft interrupt time.
    pub softirq: u64,
    /// Time stolen by the hypervisor.
    pub steal: u64,
}

/// Parses the `cpuN` lines at the start of /proc/stat into `out` (cleared
/// first; the aggregate `cpu` line is skipped). `text` must hold only complete
/// lines. Returns true if a line after the CPU lines was seen, i.e. all CPU
/// lines are in `text`.
fn parse_proc_stat(text: &str, out: &mut Vec<CpuTimes>) -> io::Result<bool> {
    out.clear();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            if line.is_empty() {
                continue;
            }
            return Ok(true);
        };
        let mut fields = rest.split_ascii_whitespace();
        let Some(id) = fields.next() else {
            return Err(invalid_data("/proc/stat cpu line"));
        };
        if rest.starts_with(|c: char| c.is_ascii_whitespace()) {
            // The aggregate "cpu " line: `id` was its first value.
            continue;
        }
        let cpu: usize = id.parse().map_err(|_| invalid_data("/proc/stat cpu id"))?;
        let mut v = [0u64; 8];
        let mut count = 0;
        for (slot, field) in v.iter_mut().zip(fields) {
            *slot = field
                .parse()
                .map_err(|_| invalid_data("/proc/stat cpu time"))?;
            count += 1;
        }
        // user nice system idle have always been there; the rest arrived over
        // 2.5/2.6 and read as 0 if missing.
        if count < 4 {
            return Err(invalid_data("/proc/stat cpu line (too few fields)"));
        }
        out.push(CpuTimes {
            cpu,
            user: v[0],
            nice: v[1],
            system: v[2],
            idle: v[3],
            iowait: v[4],
            irq: v[5],
            softirq: v[6],
            steal: v[7],
        });
    }
    Ok(false)
}

/// Keeps /proc/stat open and reads its per-CPU lines.
///
/// Only the prefix holding the `cpuN` lines is copied out of the kernel (the
/// `intr` line that follows can be hundreds of kilobytes on big machines); the
/// buffer grows if the CPU lines do not fit.
#[derive(Debug)]
pub struct ProcStatReader {
    file: ProcFile,
}

impl ProcStatReader {
    /// Opens /proc/stat.
    pub fn open() -> io::Result<Self> {
        // SAFETY: sysconf only reads its integer argument.
        let conf = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        let cpus = usize::try_from(conf).unwrap_or(1).max(1);
        Self::with_capacity(1024 + 160 * cpus)
    }

    fn with_capacity(capacity: usize) -> io::Result<Self> {
        Ok(Self {
            file: ProcFile::open(Path::new("/proc/stat"), capacity)?,
        })
    }

    /// Fills `out` with one entry per online CPU, ascending (cleared first;
    /// its allocation is reused).
    pub fn read(&mut self, out: &mut Vec<CpuTimes>) -> io::Result<()> {
        loop {
            let n = self.file.pread0()?;
            let whole = n < self.file.buf.len();
            let bytes = &self.file.buf[..n];
            // Only complete lines, unless this is the whole file.
            let end = if whole {
                n
            } else {
                bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
            };
            let complete = parse_proc_stat(as_text(&bytes[..end], "/proc/stat")?, out)?;
            if complete || whole {
                return Ok(());
            }
            self.file.grow();
        }
    }
}

/// USER_HZ: the unit of /proc/stat times, ticks per second (almost always 100).
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf only reads its integer argument.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

/// One CPU's use over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CpuUsage {
    /// The CPU index.
    pub cpu: usize,
    /// Percent of the interval not idle and not iowait (steal counts as busy).
    pub busy_pct: f64,
    /// Percent of the interval idle with I/O outstanding.
    pub iowait_pct: f64,
}

/// Per-CPU usage between two /proc/stat samples, into `out` (cleared first).
///
/// CPUs are matched by index; a CPU only in `now` (it came online) is left
/// out. Counters that went backwards count as 0. An interval with no ticks
/// reads as 0 %.
pub fn cpu_usage(prev: &[CpuTimes], now: &[CpuTimes], out: &mut Vec<CpuUsage>) {
    out.clear();
    for (i, n) in now.iter().enumerate() {
        let p = match prev.get(i) {
            Some(p) if p.cpu == n.cpu => p,
            _ => match prev.binary_search_by_key(&n.cpu, |p| p.cpu) {
                Ok(j) => &prev[j],
                Err(_) => match prev.iter().find(|p| p.cpu == n.cpu) {
                    Some(p) => p,
                    None => continue,
                },
            },
        };
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let idle = d(n.idle, p.idle);
        let iowait = d(n.iowait, p.iowait);
        let busy = d(n.user, p.user)
            + d(n.nice, p.nice)
            + d(n.system, p.system)
            + d(n.irq, p.irq)
            + d(n.softirq, p.softirq)
            + d(n.steal, p.steal);
        let total = busy + idle + iowait;
        let pct = |x: u64| {
            if total == 0 {
                0.0
            } else {
                100.0 * x as f64 / total as f64
            }
        };
        out.push(CpuUsage {
            cpu: n.cpu,
            busy_pct: pct(busy),
            iowait_pct: pct(iowait),
        });
    }
}

// ---------------------------------------------------------------------------
// Process totals
// ---------------------------------------------------------------------------

/// CPU time (user + system) used by the whole process so far, in nanoseconds
/// (`clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`).
pub fn process_cpu_time_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Resident set size of the process in bytes (`/proc/self/statm`, field 2
/// times the page size), 0 if it cannot be read. Does not allocate.
pub fn process_rss_bytes() -> u64 {
    fn read() -> Option<u64> {
        let file = File::open("/proc/self/statm").ok()?;
        let mut buf = [0u8; 256];
        let n = file.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        let pages: u64 = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
        Some(pages.saturating_mul(page_size() as u64))
    }
    read().unwrap_or(0)
}

// ---------------------------------------------------------------------------
// Clocks, eventfds, the terminal's bytes, free space
// ---------------------------------------------------------------------------

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clocks asked for
    // (monotonic, thread and process CPU time) always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Monotonic clock in ns (CLOCK_MONOTONIC, a vDSO call: ~20 ns).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time of the calling thread, ns (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_time_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// A non-blocking eventfd: a counter another thread adds to, whose read
/// a reader arms on its io_uring to be woken. Closed on drop.
#[derive(Debug)]
pub struct EventFd(i32);

impl EventFd {
    /// `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain syscall with no pointers; the fd is owned by the
        // returned value and closed once, on drop.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(EventFd(fd))
    }

    /// Adds 1 (wakes a read armed on it). Never blocks.
    #[inline]
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a valid u64 to an eventfd we own.
        unsafe { libc::write(self.0, (&one as *const u64).cast(), 8) };
    }

    /// The file descriptor (for an io_uring read).
    pub fn raw(&self) -> i32 {
        self.0
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        // SAFETY: the fd was created by `new` for this value and is closed once.
        unsafe { libc::close(self.0) };
    }
}

/// What waiting for bytes on standard input found.
#[derive(Debug, PartialEq, Eq)]
pub enum StdinRead {
    /// Nothing before the timeout, or a signal interrupted the wait.
    Idle,
    /// This many bytes were read into the buffer.
    Bytes(usize),
    /// The terminal was hung up or closed.
    Gone,
}

/// Waits up to `timeout_ms` for standard input to be readable and reads
/// what is there into `buf` (`poll(2)`, then one `read(2)`).
pub fn read_stdin(timeout_ms: i32, buf: &mut [u8]) -> StdinRead {
    let mut fds = [libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: `fds` is a valid array of one pollfd for the duration of the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, timeout_ms) };
    if n <= 0 {
        return StdinRead::Idle;
    }
    if fds[0].revents & libc::POLLIN == 0 {
        // POLLHUP / POLLERR / POLLNVAL without data.
        return StdinRead::Gone;
    }
    // SAFETY: reading at most `buf.len()` bytes into a valid, writable buffer.
    let r = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
    match r {
        0 => StdinRead::Gone,
        r if r < 0 => match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR | libc::EAGAIN) => StdinRead::Idle,
            _ => StdinRead::Gone,
        },
        r => StdinRead::Bytes(r as usize),
    }
}

/// Bytes free for an unprivileged user on the filesystem of `path`
/// (`statvfs(2)`: f_bavail x f_frsize).
pub fn free_bytes(path: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid NUL-terminated path and `st` points to writable
    // memory the size of a statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so the kernel filled in the whole struct.
    let st = unsafe { st.assume_init() };
    // The field types vary by target (32-bit on some); widen them all.
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// Makes a FIFO at `path` (`mkfifo(3)`), mode `mode`.
pub fn make_fifo(path: &Path, mode: u32) -> io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is a valid NUL-terminated path for the call.
    if unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Signals
// ---------------------------------------------------------------------------

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

fn set_handler(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) {
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

/// True when this process may write `path` (and, for a directory, create
/// files in it): `access(2)` with W_OK (and X_OK for a directory), by the
/// real user as the kernel checks it.
pub fn can_write(path: &Path, dir: bool) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let mode = if dir {
        libc::W_OK | libc::X_OK
    } else {
        libc::W_OK
    };
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    unsafe { libc::access(c.as_ptr(), mode) == 0 }
}

/// True when an executable `name` is on `PATH`.
pub fn tool_on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            std::fs::metadata(d.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// For tests that need an outside tool (the `fsverity` oracle, `tmux`,
/// `openssl`, `rsvg-convert`): true when it is on `PATH`. When it is not,
/// under CI (`CI=true`, as `.ci/run` sets: it installs every tool) this
/// panics, so a missing tool fails; elsewhere it prints a visible skip
/// naming the tool and its Debian package, and the test returns early.
#[doc(hidden)]
pub fn require_tool(test: &str, name: &str, package: &str) -> bool {
    if tool_on_path(name) {
        return true;
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "{test}: `{name}` is not on PATH, and .ci/run installs it (Debian package {package})"
    );
    eprintln!("SKIPPED {test}: needs `{name}` (apt-get install {package})");
    false
}

/// True when `pid` is a running (not zombie) process.
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Removes the entries of `dir` named `PREFIX<pid>` (files or directories)
/// whose process is gone: what a killed readpath left while writing. Entries
/// of a live process, this one included, are left alone.
pub fn remove_stale_temps(dir: &Path, prefix: &str) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || process_alive(pid) {
            continue;
        }
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => {
                let _ = std::fs::remove_dir_all(&p);
            }
            Ok(t) if t.is_file() => {
                let _ = std::fs::remove_file(&p);
            }
            _ => {}
        }
    }
}

/// Memory this process may still allocate without pushing the machine into
/// reclaim, in bytes: `MemAvailable` from /proc/meminfo, lowered to what the
/// process's cgroup (v2 `memory.max` minus `memory.current`) leaves. None
/// when neither can be read.
pub fn memory_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let avail = meminfo.as_deref().and_then(parse_mem_available);
    let cgroup = cgroup_memory_left();
    match (avail, cgroup) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}

/// `MemAvailable:` of /proc/meminfo, in bytes.
fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// What the cgroup v2 memory limit of this process leaves, in bytes.
fn cgroup_memory_left() -> Option<u64> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = cg.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let dir = Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
    let max = std::fs::read_to_string(dir.join("memory.max")).ok()?;
    let max: u64 = max.trim().parse().ok()?; // "max": no limit
    let cur: u64 = std::fs::read_to_string(dir.join("memory.current"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(max.saturating_sub(cur))
}

// ---------------------------------------------------------------------------
// Feature probes
// ---------------------------------------------------------------------------

/// What the machine and kernel offer; probed once at startup.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Features {
    /// An io_uring could be set up.
    pub io_uring: bool,
    /// Why not, when `io_uring` is false.
    pub io_uring_reason: Option<String>,
    /// The kernel offers IORING_FEAT_NO_IOWAIT (waiting in io_uring_enter
    /// need not count as iowait; Linux 6.15+).
    pub no_iowait: bool,
    /// AES instructions (x86 AES-NI, or the ARMv8 AES extension).
    pub aes_instructions: bool,
    /// SHA-256 instructions (x86 SHA-NI, or ARMv8 SHA2).
    pub sha_instructions: bool,
    /// Vector AES (x86 VAES; false elsewhere).
    pub vaes: bool,
    /// Per-task schedstat is available ([`schedstat_available`]).
    pub schedstat: bool,
    /// Threads may run at nice -20 ([`can_raise_priority`]).
    pub highpri: bool,
    /// Why not, when `highpri` is false.
    pub highpri_reason: Option<String>,
}

/// `kernel.io_uring_disabled`, or `None` if the sysctl does not exist (kernels
/// before 6.6) or cannot be read.
fn io_uring_disabled_sysctl() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn describe_io_uring_sysctl(value: Option<u32>) -> String {
    match value {
        Some(0) => "kernel.io_uring_disabled = 0 (enabled for all)".to_string(),
        Some(1) => "kernel.io_uring_disabled = 1 (only for CAP_SYS_ADMIN or members of \
                    kernel.io_uring_group)"
            .to_string(),
        Some(2) => "kernel.io_uring_disabled = 2 (disabled for everyone)".to_string(),
        Some(v) => format!("kernel.io_uring_disabled = {v}"),
        None => "kernel.io_uring_disabled is not present (kernel before 6.6 or /proc/sys \
                 unreadable)"
            .to_string(),
    }
}

/// The reason an io_uring could not be set up, for [`Features::io_uring_reason`].
fn io_uring_failure_reason(err: &io::Error, sysctl: Option<u32>) -> String {
    match err.raw_os_error() {
        Some(libc::EPERM) => format!(
            "io_uring_setup: permission denied (EPERM); {}; a seccomp filter (containers) \
             can also refuse it",
            describe_io_uring_sysctl(sysctl)
        ),
        Some(libc::ENOSYS) => format!(
            "io_uring_setup is not implemented (ENOSYS): kernel without CONFIG_IO_URING, or \
             blocked by a seccomp filter; {}",
            describe_io_uring_sysctl(sysctl)
        ),
        Some(libc::ENOMEM) => format!(
            "io_uring_setup: out of memory (ENOMEM); kernels before 5.12 charge rings to \
             RLIMIT_MEMLOCK, which may be too low ({err})"
        ),
        _ => format!("io_uring_setup failed: {err}"),
    }
}

fn cpu_crypto_features() -> (bool, bool, bool) {
    #[cfg(target_arch = "x86_64")]
    {
        (
            std::arch::is_x86_feature_detected!("aes"),
            std::arch::is_x86_feature_detected!("sha"),
            std::arch::is_x86_feature_detected!("vaes"),
        )
    }
    #[cfg(target_arch = "aarch64")]
    {
        (
            std::arch::is_aarch64_feature_detected!("aes"),
            std::arch::is_aarch64_feature_detected!("sha2"),
            false,
        )
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        (false, false, false)
    }
}

/// Probes what the machine and kernel offer. Meant to run once at startup: it
/// sets up (and drops) a two-entry io_uring and may start a short-lived thread
/// (see [`can_raise_priority`]).
pub fn probe_features() -> Features {
    let (io_uring, io_uring_reason, no_iowait) = match io_uring::IoUring::new(2) {
        Ok(ring) => (true, None, ring.params().is_feature_no_iowait()),
        Err(e) => (
            false,
            Some(io_uring_failure_reason(&e, io_uring_disabled_sysctl())),
            false,
        ),
    };
    let (aes_instructions, sha_instructions, vaes) = cpu_crypto_features();
    let highpri = can_raise_priority(-20);
    Features {
        io_uring,
        io_uring_reason,
        no_iowait,
        aes_instructions,
        sha_instructions,
        vaes,
        schedstat: schedstat_available(),
        highpri: highpri.is_ok(),
        highpri_reason: highpri.err(),
    }
}

// ---------------------------------------------------------------------------
// Machine description
// ---------------------------------------------------------------------------

/// Machine description recorded with results.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MachineInfo {
    /// `gethostname(2)`.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPU brand string, e.g. "AMD EPYC 7763 64-Core Processor".
    pub cpu_model: String,
    /// CPUs this process may use ([`online_cpus`]), which is what bounds the
    /// run; less than the machine's total under taskset or a cpuset.
    pub cpus: usize,
    /// Total RAM in bytes.
    pub memory_bytes: u64,
    /// AES instructions available.
    pub aes_instructions: bool,
    /// SHA-256 instructions available.
    pub sha_instructions: bool,
    /// Filesystem type of the data directory ([`fs_type_name`]).
    pub data_dir_fs: String,
    /// `/sys/devices/system/cpu/cpuidle/current_driver` ("none" when the
    /// kernel has no idle driver), `None` if absent.
    pub cpuidle_driver: Option<String>,
    /// cpufreq governor of the first usable CPU (cpu0 as fallback), `None` if
    /// there is no cpufreq (common in VMs).
    pub cpufreq_governor: Option<String>,
}

fn read_sysfs_string(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// "model name" (x86) or "Hardware"/"CPU part"-less fallback from /proc/cpuinfo.
fn cpuinfo_model_name() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        let key = key.trim();
        (key == "model name" || key == "Model" || key == "Hardware")
            .then(|| value.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

/// Describes the machine, for recording with results. `data_dir` need not
/// exist yet (its nearest existing ancestor is used for the filesystem type).
pub fn machine_info(data_dir: &Path) -> MachineInfo {
    use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

    let sys = System::new_with_specifics(
        RefreshKind::nothing()
            .with_cpu(CpuRefreshKind::nothing())
            .with_memory(MemoryRefreshKind::nothing().with_ram()),
    )
    .ok();
    let cpu_model = sys
        .as_ref()
        .and_then(|s| s.cpus().first())
        .map(|c| c.brand().trim().to_string())
        .filter(|b| !b.is_empty())
        .or_else(cpuinfo_model_name)
        .unwrap_or_else(|| "unknown".to_string());
    let memory_bytes = sys.as_ref().map_or(0, System::total_memory);
    let hostname = System::host_name()
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    let kernel = System::kernel_version()
        .ok()
        .filter(|k| !k.is_empty())
        .or_else(|| read_sysfs_string("/proc/sys/kernel/osrelease"))
        .unwrap_or_else(|| "unknown".to_string());
    let cpus = online_cpus();
    let (aes_instructions, sha_instructions, _) = cpu_crypto_features();
    let governor_path =
        |cpu: usize| format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor");
    let cpufreq_governor = cpus
        .first()
        .and_then(|&c| read_sysfs_string(&governor_path(c)))
        .or_else(|| read_sysfs_string(&governor_path(0)));
    MachineInfo {
        hostname,
        kernel,
        cpu_model,
        cpus: cpus.len(),
        memory_bytes,
        aes_instructions,
        sha_instructions,
        data_dir_fs: fs_type_name(data_dir),
        cpuidle_driver: read_sysfs_string("/sys/devices/system/cpu/cpuidle/current_driver"),
        cpufreq_governor,
    }
}

/// The name of a filesystem magic number (`statfs.f_type`).
fn fs_magic_name(magic: u32) -> Option<&'static str> {
    Some(match magic {
        0xEF53 => "ext4", // ext2/ext3/ext4 share the magic
        0x0102_1994 => "tmpfs",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0xF2F5_2010 => "f2fs",
        0x794C_7630 => "overlayfs",
        0x6969 => "nfs",
        0x6573_5546 => "fuse",
        0x2FC1_2FC1 => "zfs",
        0xCA45_1A4E => "bcachefs",
        0x0102_1997 => "9p",
        0x8584_58F6 => "ramfs",
        0x9584_58F6 => "hugetlbfs",
        0x7371_7368 => "squashfs",
        0x2011_BAB0 => "exfat",
        0x4D44 => "vfat",
        0x5346_544E => "ntfs",
        0xFF53_4D42 => "cifs",
        0xFE53_4D42 => "smb2",
        0x00C3_6400 => "ceph",
        0x3434 => "nilfs2",
        0x9FA0 => "proc",
        0x6265_6572 => "sysfs",
        0x6367_7270 => "cgroup2",
        0x1CD1 => "devpts",
        _ => return None,
    })
}

/// `path` made absolute, then its nearest ancestor (itself included) that exists.
pub fn nearest_existing_ancestor(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    abs.ancestors()
        .find(|a| !a.as_os_str().is_empty() && std::fs::metadata(a).is_ok())
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}

/// `statfs(2)` magic of `path`.
fn fs_magic(path: &Path) -> io::Result<u32> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c_path` is a NUL-terminated string that outlives the call and
    // `st` points to writable memory the size of `struct statfs`.
    let rc = unsafe { libc::statfs(c_path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statfs returned 0, so the kernel filled in the whole struct.
    let st = unsafe { st.assume_init() };
    // f_type's C type varies by architecture; magics are 32-bit values.
    Ok(st.f_type as u32)
}

/// Filesystem type of `path` by `statfs(2)` magic ("ext4", "tmpfs", "xfs",
/// "btrfs", "f2fs", "overlayfs", "nfs", "fuse", "zfs", ...; unknown magics as
/// hex, e.g. "0x12345678"; "unknown" if statfs fails). If `path` does not exist
/// yet, its nearest existing ancestor is asked.
pub fn fs_type_name(path: &Path) -> String {
    match fs_magic(&nearest_existing_ancestor(path)) {
        Ok(magic) => fs_magic_name(magic).map_or_else(|| format!("0x{magic:x}"), str::to_string),
        Err(_) => "unknown".to_string(),
    }
}

// ---------------------------------------------------------------------------
// Files and the page cache
// ---------------------------------------------------------------------------

/// The system page size in bytes.
pub fn page_size() -> usize {
    // SAFETY: sysconf only reads its integer argument.
    let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(ps).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// O_DIRECT support of a filesystem: opens `path` (an existing file) with
/// O_DIRECT and, since some filesystems accept the flag at open and refuse the
/// I/O, reads its first block into a page-aligned buffer. `Ok(false)` when
/// either answers EINVAL; other errors (missing file, permission) are returned.
pub fn supports_o_direct(path: &Path) -> io::Result<bool> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(false),
        Err(e) => return Err(e),
    };
    let align = page_size().max(4096);
    let mut storage = vec![0u8; 2 * align];
    let skip = (align - storage.as_ptr().addr() % align) % align;
    let buf = &mut storage[skip..skip + align];
    match file.read_at(buf, 0) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Drops a file's pages from the page cache: writes dirty pages back
/// (`fdatasync`, as dirty pages cannot be dropped) and then
/// `posix_fadvise(POSIX_FADV_DONTNEED)` over the whole file. Pages mapped or
/// locked by anyone stay; tmpfs/shmem pages cannot be dropped at all.
pub fn fadvise_dontneed(file: &File) -> io::Result<()> {
    match file.sync_data() {
        Ok(()) => {}
        // Files that cannot be synced (special files, read-only media) have
        // nothing dirty to write back.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EROFS)) => {}
        Err(e) => return Err(e),
    }
    // SAFETY: posix_fadvise only reads its integer arguments; the fd is owned
    // by `file`, which is borrowed for the duration of the call.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Warms the page cache with a file by reading it through (after a
/// `POSIX_FADV_WILLNEED` hint). Returns the bytes read. Has no effect on the
/// cache for a file opened with O_DIRECT.
pub fn warm_page_cache(file: &File) -> io::Result<u64> {
    // SAFETY: posix_fadvise only reads its integer arguments; the fd is owned
    // by `file`, which is borrowed for the duration of the call.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED) };
    let mut buf = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    loop {
        match file.read_at(&mut buf, offset) {
            Ok(0) => return Ok(offset),
            Ok(n) => offset += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// How much of a file is in the page cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Residency {
    /// Pages of the file now in the page cache.
    pub resident_pages: u64,
    /// Pages the file spans.
    pub total_pages: u64,
}

/// How much of `file` is in the page cache (`mmap` + `mincore(2)`; the mapping
/// is never touched, so this does not change the answer). `file` must be open
/// for reading.
pub fn page_cache_residency(file: &File) -> io::Result<Residency> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Residency::default());
    }
    let len = usize::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large to map"))?;
    let pages = len.div_ceil(page_size());
    // SAFETY: a fresh read-only shared mapping of an open fd at a kernel-chosen
    // address; it aliases no Rust memory and is unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vec = vec![0u8; pages];
    // SAFETY: `addr..addr+len` is the mapping made above (page-aligned start);
    // `vec` has one writable byte per page of it, as mincore requires.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr().cast()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmaps exactly the mapping made above; nothing refers to it.
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return Err(err);
    }
    Ok(Residency {
        resident_pages: vec.iter().filter(|&&b| b & 1 != 0).count() as u64,
        total_pages: pages as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Barrier};
    use std::time::{Duration, Instant};

    fn spin_for(d: Duration) {
        let end = Instant::now() + d;
        let mut x = 0u64;
        while Instant::now() < end {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }

    /// The calling thread's CPU time by its own clock.
    fn thread_cputime_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0);
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    /// Spins until the calling thread has used `ns` of CPU, however long that
    /// takes on a busy machine.
    fn burn_cpu_ns(ns: u64) {
        let start = thread_cputime_ns();
        while thread_cputime_ns() - start < ns {
            spin_for(Duration::from_micros(200));
        }
    }

    // ---- pure parsers ---------------------------------------------------

    #[test]
    fn parses_schedstat_sample() {
        assert_eq!(
            parse_schedstat("18303990 9254706 26\n"),
            Some([18_303_990, 9_254_706, 26])
        );
        assert_eq!(parse_schedstat("0 0 0"), Some([0, 0, 0]));
        assert_eq!(parse_schedstat("1 2\n"), None);
        assert_eq!(parse_schedstat("x 2 3\n"), None);
    }

    const STATUS_SAMPLE: &str = "Name:\tbash\nUmask:\t0022\nState:\tS (sleeping)\n\
        Tgid:\t2569\nPid:\t2569\nCapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\n\
        CapEff:\t000001fffeffffff\nCapBnd:\t000001fffeffffff\nCpus_allowed_list:\t0-1\n\
        voluntary_ctxt_switches:\t20\nnonvoluntary_ctxt_switches:\t6\n";

    #[test]
    fn parses_status_sample() {
        assert_eq!(parse_status_switches(STATUS_SAMPLE), Some((20, 6)));
        assert_eq!(parse_status_switches("Name:\tx\n"), None);
        assert_eq!(parse_cap_eff(STATUS_SAMPLE), Some(0x0000_01ff_feff_ffff));
        let caps = parse_cap_eff(STATUS_SAMPLE).unwrap();
        assert_ne!(caps & (1 << CAP_SYS_NICE_BIT), 0);
        assert_eq!(parse_cap_eff("CapEff:\t0000000000000000\n"), Some(0));
    }

    const SCHED_SAMPLE: &str = "bash (2569, #threads: 1)\n\
        -------------------------------------------------------------------\n\
        se.exec_start                                :       4471437.603865\n\
        se.vruntime                                  :           126.787688\n\
        se.sum_exec_runtime                          :            18.303990\n\
        se.nr_migrations                             :                    6\n\
        nr_switches                                  :                   26\n\
        nr_voluntary_switches                        :                   20\n\
        nr_involuntary_switches                      :                    6\n\
        policy                                       :                    0\n\
        prio                                         :                  120\n\
        current_node=0, numa_group_id=0\n";

    #[test]
    fn parses_sched_sample() {
        assert_eq!(
            parse_sched(SCHED_SAMPLE),
            SchedFields {
                migrations: Some(6),
                switches: Some((20, 6)),
            }
        );
        // The same counters as status shows.
        assert_eq!(
            parse_sched(SCHED_SAMPLE).switches,
            parse_status_switches(STATUS_SAMPLE)
        );
        assert_eq!(
            parse_sched("x (1, #threads: 1)\nse.vruntime : 1.0\n"),
            SchedFields::default()
        );
        assert_eq!(
            parse_sched("se.nr_migrations : 3\nnr_voluntary_switches : 2\n"),
            SchedFields {
                migrations: Some(3),
                switches: None,
            }
        );
    }

    const PROC_STAT_SAMPLE: &str = "cpu  3560 0 2796 886372 512 0 272 1279 0 0\n\
        cpu0 1145 0 985 444448 35 0 98 613 0 0\n\
        cpu1 2414 7 1810 441924 477 3 173 666 0 0\n\
        cpu3 1 2 3 4\n\
        intr 215579 0 0 0 0\n\
        ctxt 4242\n";

    #[test]
    fn parses_proc_stat_sample() {
        let mut out = vec![CpuTimes::default(); 7]; // cleared by the parser
        assert!(parse_proc_stat(PROC_STAT_SAMPLE, &mut out).unwrap());
        assert_eq!(
            out,
            vec![
                CpuTimes {
                    cpu: 0,
                    user: 1145,
                    nice: 0,
                    system: 985,
                    idle: 444_448,
                    iowait: 35,
                    irq: 0,
                    softirq: 98,
                    steal: 613,
                },
                CpuTimes {
                    cpu: 1,
                    user: 2414,
                    nice: 7,
                    system: 1810,
                    idle: 441_924,
                    iowait: 477,
                    irq: 3,
                    softirq: 173,
                    steal: 666,
                },
                CpuTimes {
                    cpu: 3,
                    user: 1,
                    nice: 2,
                    system: 3,
                    idle: 4,
                    ..CpuTimes::default()
                },
            ]
        );
        // Only CPU lines so far: parsed, but not known to be complete.
        assert!(!parse_proc_stat("cpu  1 2 3 4\ncpu0 1 2 3 4\n", &mut out).unwrap());
        assert_eq!(out.len(), 1);
        assert!(parse_proc_stat("cpu0 1 2\nintr 0\n", &mut out).is_err());
        assert!(parse_proc_stat("cpuX 1 2 3 4\nintr 0\n", &mut out).is_err());
    }

    #[test]
    fn cpu_usage_from_fixed_samples() {
        let t = |cpu, user, system, idle, iowait, softirq, steal| CpuTimes {
            cpu,
            user,
            nice: 0,
            system,
            idle,
            iowait,
            irq: 0,
            softirq,
            steal,
        };
        let prev = vec![t(0, 100, 50, 1000, 10, 5, 0), t(1, 10, 10, 10, 10, 0, 0)];
        let now = vec![
            // +30 user +10 system +50 idle +10 iowait: 100 ticks.
            t(0, 130, 60, 1050, 20, 5, 0),
            // +1 user +1 system +2 idle +0 iowait, +4 steal: 8 ticks.
            t(1, 11, 11, 12, 10, 0, 4),
            // Not in prev: left out.
            t(2, 1, 1, 1, 1, 0, 0),
        ];
        let mut out = Vec::new();
        cpu_usage(&prev, &now, &mut out);
        assert_eq!(
            out,
            vec![
                CpuUsage {
                    cpu: 0,
                    busy_pct: 40.0,
                    iowait_pct: 10.0
                },
                CpuUsage {
                    cpu: 1,
                    busy_pct: 75.0,
                    iowait_pct: 0.0
                },
            ]
        );
        let json = serde_json::to_string(&out).unwrap();
        assert_eq!(serde_json::from_str::<Vec<CpuUsage>>(&json).unwrap(), out);
        // No ticks, and iowait going backwards (NO_HZ), read as 0.
        let later = vec![t(0, 130, 60, 1050, 15, 5, 0)];
        cpu_usage(&now, &later, &mut out);
        assert_eq!(
            out,
            vec![CpuUsage {
                cpu: 0,
                busy_pct: 0.0,
                iowait_pct: 0.0
            }]
        );
        // Misaligned lists (a CPU went offline) still match by index.
        cpu_usage(&prev[1..], &now, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].cpu, 1);
        assert_eq!(out[0].busy_pct, 75.0);
    }

    #[test]
    fn counters_delta_and_add() {
        let a = ThreadCounters {
            cpu_ns: 10,
            run_delay_ns: 5,
            timeslices: 3,
            voluntary_ctxt_switches: 2,
            nonvoluntary_ctxt_switches: 1,
            migrations: 7,
        };
        let b = ThreadCounters {
            cpu_ns: 25,
            run_delay_ns: 5,
            timeslices: 4,
            voluntary_ctxt_switches: 9,
            nonvoluntary_ctxt_switches: 0,
            migrations: 8,
        };
        let d = b.delta(&a);
        assert_eq!(
            d,
            ThreadCounters {
                cpu_ns: 15,
                run_delay_ns: 0,
                timeslices: 1,
                voluntary_ctxt_switches: 7,
                nonvoluntary_ctxt_switches: 0, // saturated
                migrations: 1,
            }
        );
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<ThreadCounters>(&json).unwrap(), d);
        let mut sum = a;
        sum.add(&d);
        assert_eq!(sum.cpu_ns, 25);
        assert_eq!(sum.migrations, 8);
        assert_eq!(sum.nonvoluntary_ctxt_switches, 1);
    }

    #[test]
    fn cpu_mask_round_trip() {
        let cpus = vec![0, 1, 63, 64, 65, 1500];
        assert_eq!(mask_to_cpus(&cpus_to_mask(&cpus)), cpus);
        assert_eq!(cpus_to_mask(&[0]).len() * MASK_WORD_BITS, 1024);
    }

    #[test]
    fn fs_magic_names() {
        assert_eq!(fs_magic_name(0xEF53), Some("ext4"));
        assert_eq!(fs_magic_name(0x0102_1994), Some("tmpfs"));
        assert_eq!(fs_magic_name(0x9123_683E), Some("btrfs"));
        assert_eq!(fs_magic_name(0x1234_5678), None);
    }

    // ---- priority -------------------------------------------------------

    #[test]
    fn nice_denied_message_names_what_is_missing() {
        let reason = nice_denied_reason(-20, Some(false), Some(0));
        assert!(
            reason.starts_with("needs CAP_SYS_NICE or RLIMIT_NICE >= 40 (current soft limit 0)"),
            "{reason}"
        );
        let err = NiceError::Denied {
            wanted: -20,
            reason,
        };
        let msg = err.to_string();
        assert!(msg.contains("CAP_SYS_NICE"), "{msg}");
        assert!(msg.contains("RLIMIT_NICE"), "{msg}");
        assert!(msg.contains("nice -20"), "{msg}");
        let reason = nice_denied_reason(-5, Some(true), Some(RLIM_INFINITY_U64));
        assert!(reason.contains("RLIMIT_NICE >= 25 (current soft limit unlimited)"));
        assert!(reason.contains("user namespace"));
    }

    #[test]
    fn nice_permission_rules() {
        // Raising nice (lowering priority) is always allowed.
        assert!(nice_permitted(5, 0, false, Some(0)));
        assert!(nice_permitted(0, 0, false, None));
        // Lowering needs the capability or 20 - nice <= RLIMIT_NICE.
        assert!(!nice_permitted(-1, 0, false, Some(20)));
        assert!(nice_permitted(-1, 0, false, Some(21)));
        assert!(nice_permitted(-20, 0, false, Some(40)));
        assert!(!nice_permitted(-20, 0, false, Some(39)));
        assert!(nice_permitted(-20, 0, true, Some(0)));
        assert_eq!(rlimit_needed_for(-20), 40);
        assert_eq!(rlimit_needed_for(-100), 40);
        assert_eq!(rlimit_needed_for(19), 1);
    }

    #[test]
    fn set_nice_minus_20_as_root() {
        // On a scratch thread, so the test harness thread is left alone.
        std::thread::spawn(|| {
            let probe = can_raise_priority(-20);
            match set_current_thread_nice(-20) {
                Ok(()) => {
                    assert!(probe.is_ok(), "probe said no but it worked: {probe:?}");
                    assert_eq!(current_thread_nice().unwrap(), -20);
                    // Raising nice back is always allowed.
                    set_current_thread_nice(0).unwrap();
                    assert_eq!(current_thread_nice().unwrap(), 0);
                }
                Err(NiceError::Denied { wanted, reason }) => {
                    assert!(!real_root(), "denied as root: {reason}");
                    assert_eq!(wanted, -20);
                    assert!(probe.is_err());
                    eprintln!("skip: not privileged: {reason}");
                }
                Err(e) => panic!("{e}"),
            }
        })
        .join()
        .unwrap();
    }

    /// Root of the initial user namespace (not root of a container's user
    /// namespace, whose capabilities do not satisfy setpriority).
    fn real_root() -> bool {
        // SAFETY: geteuid cannot fail.
        let euid = unsafe { libc::geteuid() };
        let uid_map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
        let identity =
            uid_map.split_ascii_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"];
        euid == 0 && identity
    }

    const CHILD_ENV: &str = "RP_SYS_UNPRIVILEGED_CHILD";

    /// Runs as `nobody` when started by `unprivileged_paths_via_setpriv`;
    /// otherwise does nothing.
    #[test]
    fn unprivileged_child_checks() {
        if std::env::var_os(CHILD_ENV).is_none() {
            return;
        }
        // SAFETY: geteuid cannot fail.
        assert_ne!(unsafe { libc::geteuid() }, 0);
        std::thread::spawn(|| {
            let probe = can_raise_priority(-20).unwrap_err();
            assert!(probe.contains("CAP_SYS_NICE") && probe.contains("RLIMIT_NICE"));
            match set_current_thread_nice(-20) {
                Err(e @ NiceError::Denied { .. }) => {
                    let msg = e.to_string();
                    println!("denied as expected: {msg}");
                    assert!(msg.contains("CAP_SYS_NICE"), "{msg}");
                    assert!(msg.contains("RLIMIT_NICE >= 40"), "{msg}");
                }
                other => panic!("expected Denied, got {other:?}"),
            }
            // Raising nice needs no privilege, and neither does going back down
            // to where we started... only if the limit allows: it does not.
            set_current_thread_nice(5).unwrap();
            assert!(can_raise_priority(10).is_ok());
            assert!(matches!(
                set_current_thread_nice(0),
                Err(NiceError::Denied { .. })
            ));
        })
        .join()
        .unwrap();
        // The other probes work unprivileged too.
        let mut r = ThreadStatReader::open(gettid()).unwrap();
        let c = r.read().unwrap();
        assert!(c.cpu_ns > 0);
        let f = probe_features();
        println!("features as nobody: {f:?}");
        assert!(!f.highpri);
        if io_uring_disabled_sysctl().unwrap_or(0) == 0 {
            assert!(f.io_uring, "{:?}", f.io_uring_reason);
        }
        let mut cpus = Vec::new();
        ProcStatReader::open().unwrap().read(&mut cpus).unwrap();
        assert!(!cpus.is_empty());
        println!("unprivileged child checks passed");
    }

    #[test]
    fn unprivileged_paths_via_setpriv() {
        if !real_root() || std::env::var_os(CHILD_ENV).is_some() {
            eprintln!("skip: needs root to drop to nobody");
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let name = module_path!()
            .split_once("::")
            .map_or(module_path!(), |(_, rest)| rest)
            .to_string()
            + "::unprivileged_child_checks";
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(&exe)
            .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "1")
            .output();
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                eprintln!("skip: cannot run setpriv: {e}");
                return;
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if matches!(out.status.code(), Some(126) | Some(127))
            || stderr.contains("Permission denied")
        {
            eprintln!("skip: nobody cannot execute {}: {stderr}", exe.display());
            return;
        }
        assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
        assert!(
            stdout.contains("unprivileged child checks passed"),
            "child did not run the checks:\n{stdout}\n{stderr}"
        );
        eprintln!("{stdout}");
    }

    // ---- live readers ---------------------------------------------------

    #[test]
    fn gettid_names_a_task_of_this_process() {
        let tid = gettid();
        assert!(tid > 0);
        assert!(Path::new(&format!("/proc/self/task/{tid}")).exists());
        let other = std::thread::spawn(gettid).join().unwrap();
        assert_ne!(other, tid);
    }

    #[test]
    fn thread_reader_sees_cpu_time_grow() {
        let mut r = ThreadStatReader::open(gettid()).unwrap();
        assert_eq!(r.tid(), gettid());
        let a = r.read().unwrap();
        // Spin until the thread has used 5 ms of CPU by its own clock (however
        // long that takes on a busy machine), then sleep once.
        let start = thread_cputime_ns();
        while thread_cputime_ns() - start < 5_000_000 {
            spin_for(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(1));
        let b = r.read().unwrap();
        let clock = thread_cputime_ns();
        let d = b.delta(&a);
        assert!(d.cpu_ns > 0, "{d:?}");
        // Same source (sum_exec_runtime); schedstat lags the clock, which
        // also folds in the time of the running slice.
        assert!(b.cpu_ns <= clock, "{b:?} vs clock {clock}");
        assert!(b.cpu_ns >= start, "{b:?} vs start {start}");
        assert!(d.timeslices >= 1, "{d:?}");
        assert!(d.voluntary_ctxt_switches >= 1, "{d:?}");
        assert!(schedstat_available());
    }

    #[test]
    fn sched_and_status_agree_on_switches_of_a_parked_thread() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            tid_tx.send(gettid()).unwrap();
            rx.recv().unwrap();
        });
        let tid = tid_rx.recv().unwrap();
        // Let it block in recv.
        std::thread::sleep(Duration::from_millis(20));
        let mut r = ThreadStatReader::open(tid).unwrap();
        let c = r.read().unwrap();
        let n = r.status.read_whole().unwrap();
        let status = parse_status_switches(std::str::from_utf8(&r.status.buf[..n]).unwrap());
        if r.switches_from_sched {
            assert_eq!(
                status,
                Some((c.voluntary_ctxt_switches, c.nonvoluntary_ctxt_switches))
            );
        }
        assert!(c.voluntary_ctxt_switches >= 1, "{c:?}");
        tx.send(()).unwrap();
        h.join().unwrap();
    }

    #[test]
    fn thread_reader_without_sched_file() {
        // As on kernels without CONFIG_SCHED_DEBUG.
        let mut r = ThreadStatReader::open(gettid()).unwrap();
        r.sched = None;
        r.switches_from_sched = false;
        assert!(!r.has_migrations());
        std::thread::sleep(Duration::from_millis(1));
        let c = r.read().unwrap();
        assert_eq!(c.migrations, 0);
        assert!(c.cpu_ns > 0 && c.voluntary_ctxt_switches > 0, "{c:?}");
    }

    #[test]
    fn thread_reader_of_missing_thread_fails() {
        assert!(ThreadStatReader::open(i32::MAX).is_err());
        let tid = std::thread::spawn(gettid).join().unwrap();
        // Gone already (or never readable again): open or read fails.
        if let Ok(mut r) = ThreadStatReader::open(tid) {
            assert!(r.read().is_err());
        }
    }

    #[test]
    fn run_delay_grows_when_threads_share_a_cpu() {
        let cpu = online_cpus()[0];
        let n = 3;
        let barrier = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    pin_current_thread(&[cpu]).unwrap();
                    let mut r = ThreadStatReader::open(gettid()).unwrap();
                    barrier.wait();
                    let a = r.read().unwrap();
                    spin_for(Duration::from_millis(200));
                    let b = r.read().unwrap();
                    (b.delta(&a), r.has_migrations())
                })
            })
            .collect();
        for h in handles {
            let (d, _) = h.join().unwrap();
            assert!(d.cpu_ns > 0, "{d:?}");
            assert!(d.run_delay_ns > 0, "{d:?}");
            assert!(d.timeslices > 1, "{d:?}");
            assert!(d.nonvoluntary_ctxt_switches > 0, "{d:?}");
        }
    }

    #[test]
    fn migrations_count_moves_between_cpus() {
        let cpus = online_cpus();
        std::thread::spawn(move || {
            let mut r = ThreadStatReader::open(gettid()).unwrap();
            if !r.has_migrations() {
                eprintln!("skip: no /proc/self/task/TID/sched on this kernel");
                return;
            }
            if cpus.len() < 2 {
                eprintln!("skip: one CPU");
                return;
            }
            let a = r.read().unwrap();
            for &cpu in [cpus[0], cpus[1], cpus[0]].iter() {
                pin_current_thread(&[cpu]).unwrap();
                assert_eq!(current_cpu(), cpu);
            }
            let b = r.read().unwrap();
            assert!(b.delta(&a).migrations >= 1, "{a:?} -> {b:?}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pinning_moves_the_thread() {
        let cpus = online_cpus();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]));
        std::thread::spawn(move || {
            for &cpu in &cpus {
                pin_current_thread(&[cpu]).unwrap();
                for _ in 0..100 {
                    assert_eq!(current_cpu(), cpu);
                }
                assert_eq!(current_thread_affinity().unwrap(), vec![cpu]);
            }
            unpin_current_thread().unwrap();
            assert_eq!(current_thread_affinity().unwrap(), cpus);
            assert!(pin_current_thread(&[]).is_err());
            assert!(pin_current_thread(&[MAX_CPU_INDEX + 1]).is_err());
            // A CPU the machine does not have.
            assert!(pin_current_thread(&[100_000]).is_err());
            // Still unpinned after the failures.
            assert_eq!(current_thread_affinity().unwrap(), cpus);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn proc_stat_reader_reads_live_cpus() {
        let mut r = ProcStatReader::open().unwrap();
        let mut a = Vec::new();
        r.read(&mut a).unwrap();
        assert!(!a.is_empty());
        assert!(a.windows(2).all(|w| w[0].cpu < w[1].cpu));
        spin_for(Duration::from_millis(30));
        let mut b = Vec::with_capacity(a.len());
        r.read(&mut b).unwrap();
        assert_eq!(a.len(), b.len());
        let mut usage = Vec::new();
        cpu_usage(&a, &b, &mut usage);
        assert_eq!(usage.len(), a.len());
        for u in &usage {
            assert!((0.0..=100.0).contains(&u.busy_pct), "{u:?}");
        }
        // A tiny buffer grows until the CPU lines fit and gives the same CPUs.
        let mut small = ProcStatReader::with_capacity(16).unwrap();
        let mut c = Vec::new();
        small.read(&mut c).unwrap();
        assert_eq!(
            c.iter().map(|t| t.cpu).collect::<Vec<_>>(),
            b.iter().map(|t| t.cpu).collect::<Vec<_>>()
        );
        assert!(c.iter().zip(&b).all(|(c, b)| c.idle >= b.idle));
        assert!(small.file.buf.len() > 16);
        assert!(clock_ticks_per_sec() > 0);
    }

    #[test]
    fn proc_file_grows_to_whole_file() {
        let mut f = ProcFile::open(Path::new("/proc/self/status"), 16).unwrap();
        let n = f.read_whole().unwrap();
        let text = std::str::from_utf8(&f.buf[..n]).unwrap();
        assert!(text.starts_with("Name:"));
        assert!(parse_status_switches(text).is_some());
        // A second read reuses the buffer and starts again at the top.
        let cap = f.buf.len();
        let n = f.read_whole().unwrap();
        assert_eq!(f.buf.len(), cap);
        assert!(f.buf[..n].starts_with(b"Name:"));
    }

    #[test]
    fn process_totals() {
        let a = process_cpu_time_ns();
        burn_cpu_ns(5_000_000);
        let b = process_cpu_time_ns();
        assert!(b - a >= 5_000_000, "{a} -> {b}");
        let rss = process_rss_bytes();
        assert!(rss > 0 && rss.is_multiple_of(page_size() as u64), "{rss}");
        assert!(page_size().is_power_of_two());
    }

    // ---- probes ---------------------------------------------------------

    #[test]
    fn probe_features_finds_io_uring() {
        let f = probe_features();
        eprintln!("{f:#?}");
        match io_uring_disabled_sysctl() {
            Some(v) if v != 0 => {
                eprintln!(
                    "skip: kernel.io_uring_disabled = {v}: {:?}",
                    f.io_uring_reason
                );
            }
            _ => assert!(f.io_uring, "{:?}", f.io_uring_reason),
        }
        assert_eq!(f.io_uring, f.io_uring_reason.is_none());
        assert_eq!(f.highpri, f.highpri_reason.is_none());
        assert!(f.schedstat);
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(serde_json::from_str::<Features>(&json).unwrap(), f);
    }

    #[test]
    fn io_uring_reasons_name_the_sysctl() {
        let eperm = io::Error::from_raw_os_error(libc::EPERM);
        let r = io_uring_failure_reason(&eperm, Some(2));
        assert!(r.contains("kernel.io_uring_disabled = 2"), "{r}");
        let enosys = io::Error::from_raw_os_error(libc::ENOSYS);
        let r = io_uring_failure_reason(&enosys, None);
        assert!(r.contains("kernel.io_uring_disabled is not present"), "{r}");
    }

    #[test]
    fn machine_info_describes_this_machine() {
        let dir = tempfile::tempdir().unwrap();
        let m = machine_info(&dir.path().join("not/yet/there"));
        eprintln!("{m:#?}");
        assert_eq!(m.cpus, online_cpus().len());
        assert!(m.memory_bytes > 0);
        assert_ne!(m.cpu_model, "unknown");
        assert_eq!(
            m.kernel,
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap()
                .trim()
        );
        assert_eq!(m.data_dir_fs, fs_type_name(dir.path()));
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<MachineInfo>(&json).unwrap(), m);
    }

    #[test]
    fn fs_types_of_known_paths() {
        let root = fs_type_name(Path::new("/"));
        assert_ne!(root, "unknown");
        let dir = tempfile::tempdir().unwrap();
        let tmp = fs_type_name(dir.path());
        assert_ne!(tmp, "unknown");
        assert_eq!(fs_type_name(&dir.path().join("a/b/c")), tmp);
        assert_eq!(fs_type_name(Path::new("/proc/self")), "proc");
        if Path::new("/dev/shm").exists() {
            assert_eq!(fs_type_name(Path::new("/dev/shm")), "tmpfs");
        }
        assert_ne!(
            fs_type_name(Path::new("relative/path/that/is/absent")),
            "unknown"
        );
        eprintln!("/ is {root}, tempdir is {tmp}");
    }

    #[test]
    fn o_direct_probe_answers() {
        for base in ["/tmp", "/dev/shm"] {
            if !Path::new(base).is_dir() {
                continue;
            }
            let mut f = tempfile::NamedTempFile::new_in(base).unwrap();
            f.write_all(&[7u8; 8192]).unwrap();
            f.flush().unwrap();
            let r = supports_o_direct(f.path());
            eprintln!(
                "O_DIRECT on {base} ({}): {r:?}",
                fs_type_name(Path::new(base))
            );
            assert!(r.is_ok(), "{r:?}");
        }
        let err = supports_o_direct(Path::new("/nonexistent/file")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn dontneed_drops_and_warm_fills_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let file = File::open(&path).unwrap();
        let pages = (1u64 << 20) / page_size() as u64;
        fadvise_dontneed(&file).unwrap();
        let cold = page_cache_residency(&file).unwrap();
        assert_eq!(cold.total_pages, pages);
        assert_eq!(warm_page_cache(&file).unwrap(), 1 << 20);
        let warm = page_cache_residency(&file).unwrap();
        assert_eq!(warm.resident_pages, pages, "{warm:?}");
        if fs_type_name(dir.path()) == "tmpfs" {
            eprintln!("skip: tmpfs pages cannot be dropped");
        } else {
            assert_eq!(cold.resident_pages, 0, "{cold:?}");
        }
        let empty = File::create(dir.path().join("empty")).unwrap();
        assert_eq!(page_cache_residency(&empty).unwrap(), Residency::default());
    }
}
