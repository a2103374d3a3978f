//! procfs read every interval: per-thread schedstat, status and sched, and
//! /proc/stat's per-CPU times, kept open and re-read from offset 0 into buffers
//! they own.

#[allow(unused_imports)]
use super::*;

/// A procfs file kept open and re-read from offset 0 into a reusable buffer.
#[derive(Debug)]
pub(super) struct ProcFile {
    pub(super) file: File,
    pub(super) buf: Vec<u8>,
}

impl ProcFile {
    pub(super) fn open(path: &Path, initial_capacity: usize) -> io::Result<Self> {
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
    pub(super) fn read_whole(&mut self) -> io::Result<usize> {
        loop {
            let n = self.pread0()?;
            if n < self.buf.len() {
                return Ok(n);
            }
            self.grow();
        }
    }
}

pub(super) fn invalid_data(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("cannot parse {what}"))
}

pub(super) fn as_text<'a>(bytes: &'a [u8], what: &str) -> io::Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|_| invalid_data(what))
}

/// `cpu_ns run_delay_ns timeslices` from a `schedstat` file.
pub(super) fn parse_schedstat(text: &str) -> Option<[u64; 3]> {
    let mut fields = text.split_ascii_whitespace().map(str::parse::<u64>);
    let mut next = || fields.next()?.ok();
    Some([next()?, next()?, next()?])
}

/// `(voluntary, nonvoluntary)` context switches from a `status` file.
pub(super) fn parse_status_switches(text: &str) -> Option<(u64, u64)> {
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
pub(super) struct SchedFields {
    /// `se.nr_migrations`.
    pub(super) migrations: Option<u64>,
    /// `nr_voluntary_switches` and `nr_involuntary_switches`: the same
    /// counters (`nvcsw`, `nivcsw`) that `status` shows as
    /// `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches`.
    pub(super) switches: Option<(u64, u64)>,
}

pub(super) fn parse_sched(text: &str) -> SchedFields {
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
    /// Time asleep in iowait, ns, from the kernel's delay accounting
    /// (`stat` field 42, `delayacct_blkio_ticks`: every sleep with
    /// `in_iowait` set, interruptible or not, in clock ticks); None unless
    /// asked for ([`ThreadStatReader::with_iowait`]) and the kernel counts
    /// it (`kernel.task_delayacct = 1`, or booted with `delayacct`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iowait_ns: Option<u64>,
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
            // The first reading (or accounting just turned on): all it
            // counted, as the other fields against zero.
            iowait_ns: self
                .iowait_ns
                .map(|ns| ns.saturating_sub(earlier.iowait_ns.unwrap_or(0))),
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
        self.iowait_ns = match (self.iowait_ns, other.iowait_ns) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            (a, b) => a.or(b),
        };
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
    pub(super) tid: i32,
    pub(super) schedstat: ProcFile,
    pub(super) status: ProcFile,
    pub(super) sched: Option<ProcFile>,
    /// `sched` carries the context switch counts, so `status` is not read.
    pub(super) switches_from_sched: bool,
    /// `stat`, for the time asleep in iowait ([`Self::with_iowait`]).
    pub(super) stat: Option<ProcFile>,
}

/// Whether the kernel accounts each task's time asleep in iowait now
/// (`/proc/sys/kernel/task_delayacct` is 1: the sysctl, or the `delayacct`
/// boot parameter; CONFIG_TASK_DELAY_ACCT).
pub fn delayacct_on() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/task_delayacct").is_ok_and(|t| t.trim() == "1")
}

/// Field `n` (numbered from 1, as proc(5) numbers them: 19 is `nice`, 42
/// `delayacct_blkio_ticks`) of a `/proc/PID/stat` line. Fields after the
/// command (which may hold spaces and parentheses) start with field 3.
pub fn stat_field(text: &str, n: usize) -> Option<&str> {
    let (_, rest) = text.rsplit_once(')')?;
    rest.split_ascii_whitespace().nth(n.checked_sub(3)?)
}

/// `delayacct_blkio_ticks` (field 42) of a `stat` file, in clock ticks.
pub(super) fn parse_stat_blkio_ticks(text: &str) -> Option<u64> {
    stat_field(text, 42)?.parse().ok()
}

/// The name (`comm`) of thread `tid` of any process, as the kernel keeps
/// it (`kworker/1:1H-fsverity_read_queue`, at most 63 bytes), made
/// printable; None once it has exited.
pub fn thread_comm(tid: i32) -> Option<String> {
    let mut f = ProcFile::open(Path::new(&format!("/proc/{tid}/task/{tid}/comm")), 64).ok()?;
    let n = f.read_whole().ok()?;
    let name = String::from_utf8_lossy(&f.buf[..n.min(63)]);
    let name = crate::sys::printable(name.trim_end_matches('\n'), false);
    (!name.is_empty()).then_some(name)
}

impl ThreadStatReader {
    /// Opens the files of thread `tid` of this process. `/sched` (which needs
    /// CONFIG_SCHED_DEBUG) is optional: without it, or if it has no
    /// `se.nr_migrations` line, migrations read as 0 and
    /// [`has_migrations`](Self::has_migrations) is false.
    pub fn open(tid: i32) -> io::Result<Self> {
        Self::open_dir(tid, PathBuf::from(format!("/proc/self/task/{tid}")))
    }

    /// Opens the files of thread `tid` of any process (a kworker the
    /// kernel's tracepoints named).
    pub fn open_global(tid: i32) -> io::Result<Self> {
        Self::open_dir(tid, PathBuf::from(format!("/proc/{tid}/task/{tid}")))
    }

    fn open_dir(tid: i32, dir: PathBuf) -> io::Result<Self> {
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
            stat: None,
        })
    }

    /// Reads the thread's time asleep in iowait too (one file more per
    /// read), where the kernel accounts it ([`delayacct_on`]); without,
    /// [`ThreadCounters::iowait_ns`] is None.
    pub fn with_iowait(mut self) -> Self {
        if delayacct_on() {
            let dir = format!("/proc/self/task/{}/stat", self.tid);
            self.stat = ProcFile::open(Path::new(&dir), 1024).ok();
        }
        self
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
            iowait_ns: match &mut self.stat {
                Some(f) => {
                    let n = f.read_whole()?;
                    let ticks = parse_stat_blkio_ticks(as_text(&f.buf[..n], "stat")?)
                        .ok_or_else(|| invalid_data("stat delayacct_blkio_ticks"))?;
                    Some(ticks.saturating_mul(1_000_000_000) / clock_ticks_per_sec())
                }
                None => None,
            },
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
pub(super) fn parse_proc_stat(text: &str, out: &mut Vec<CpuTimes>) -> io::Result<bool> {
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
    pub(super) file: ProcFile,
}

impl ProcStatReader {
    /// Opens /proc/stat.
    pub fn open() -> io::Result<Self> {
        // SAFETY: sysconf only reads its integer argument.
        let conf = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        let cpus = usize::try_from(conf).unwrap_or(1).max(1);
        Self::with_capacity(1024 + 160 * cpus)
    }

    pub(super) fn with_capacity(capacity: usize) -> io::Result<Self> {
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
