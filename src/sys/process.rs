//! The process: its CPU time and RSS, whether a process is alive, temporary
//! files a dead one left, what it may write, tools on PATH, the memory it
//! may still allocate and the machine has, and what `/proc` proves of
//! another process (its program, parent and start time).

#[allow(unused_imports)]
use super::*;

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
pub(super) fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// What the cgroup v2 memory limit of this process leaves, in bytes.
pub(super) fn cgroup_memory_left() -> Option<u64> {
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

/// Makes the child `cmd` starts die with this process: `SIGKILL` from the
/// kernel the moment readpath ends, however it ends (a crash or SIGKILL
/// included), so a virtual machine it started is never left running
/// (`prctl(PR_SET_PDEATHSIG)` in the child before it execs; if readpath
/// ended before that, the child exits at once).
pub fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: between fork and exec only async-signal-safe calls are made
    // (prctl, getppid, _exit), and nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// What `/proc/PID` says of a process, for proving what it is rather than
/// trusting what it calls itself ([`process_info`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessInfo {
    /// The program it runs: `/proc/PID/exe`, read as a link (the kernel's
    /// own answer, not argv[0]); None where it cannot be read (another
    /// user's process, a kernel thread).
    pub exe: Option<PathBuf>,
    /// Its command line (`/proc/PID/cmdline`), each argument as UTF-8
    /// (lossy).
    pub args: Vec<String>,
    /// Its real UID (`Uid:` of `/proc/PID/status`).
    pub uid: u32,
    /// Its parent's PID (`/proc/PID/stat` field 4).
    pub ppid: u32,
    /// When it started, in clock ticks after boot (`/proc/PID/stat` field
    /// 22): with the PID, what names one process for the life of the
    /// machine (a reused PID has another start time).
    pub start_ticks: u64,
}

/// `(ppid, start_ticks)` from the text of a `/proc/PID/stat` file: fields
/// 4 and 22, counted after the command's closing `)` (a command may hold
/// spaces and parentheses).
pub(super) fn parse_stat_parent_start(stat: &str) -> Option<(u32, u64)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // rest starts at field 3 (the state).
    Some((f.get(1)?.parse().ok()?, f.get(19)?.parse().ok()?))
}

/// What `/proc/PID` says of process `pid` now ([`ProcessInfo`]); None when
/// there is no such process (or it ended while it was read). Each file is
/// read at most 1 MiB.
pub fn process_info(pid: u32) -> Option<ProcessInfo> {
    use std::io::Read;
    let dir = PathBuf::from(format!("/proc/{pid}"));
    let read = |name: &str| -> Option<Vec<u8>> {
        let mut b = Vec::new();
        File::open(dir.join(name))
            .ok()?
            .take(1 << 20)
            .read_to_end(&mut b)
            .ok()?;
        Some(b)
    };
    let stat = String::from_utf8(read("stat")?).ok()?;
    let (ppid, start_ticks) = parse_stat_parent_start(&stat)?;
    let status = String::from_utf8_lossy(&read("status")?).into_owned();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())?;
    let cmdline = read("cmdline")?;
    let args = cmdline
        .strip_suffix(&[0])
        .unwrap_or(&cmdline)
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let exe = std::fs::read_link(dir.join("exe")).ok();
    // Read last: the same process still, or nothing.
    let again = String::from_utf8(read("stat")?).ok()?;
    if parse_stat_parent_start(&again).map(|(_, s)| s) != Some(start_ticks) {
        return None;
    }
    Some(ProcessInfo {
        exe,
        args,
        uid,
        ppid,
        start_ticks,
    })
}

/// The machine's memory (`MemTotal:` of /proc/meminfo), in bytes; None
/// where it cannot be read.
pub fn memory_total_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Sends SIGTERM to process `pid` only if it is still the process that
/// started at `start_ticks` (`/proc/PID/stat` field 22): a pidfd
/// (`pidfd_open`) pins the process first, its start time is read after,
/// and the signal goes through the pidfd (`pidfd_send_signal`), so a PID
/// reused in between is never signalled. `NotFound` where it is gone or
/// another process now.
pub fn terminate_started(pid: u32, start_ticks: u64) -> io::Result<()> {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "PID out of range",
        ));
    };
    // SAFETY: pidfd_open takes a PID and flags and returns a new
    // descriptor or -1; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, p, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor we own from here on.
    let pidfd = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) };
    let now = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| parse_stat_parent_start(&s))
        .map(|(_, s)| s);
    if now != Some(start_ticks) {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("process {pid} ended (its PID is another process's now)"),
        ));
    }
    // SAFETY: pidfd_send_signal on a pidfd we own, no siginfo (null), no
    // flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGTERM,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
