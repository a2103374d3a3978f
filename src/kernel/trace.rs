//! The kernel's own read path, observed through its tracepoints: what the
//! model's queue latency and device latency are to be held against.
//!
//! A [`Tracer`] makes a tracefs instance of its own
//! (`/sys/kernel/tracing/instances/readpath-PID`), so the global trace
//! buffer and whatever else traces the machine are untouched. It enables
//! `workqueue:workqueue_queue_work`, `workqueue_execute_start` and
//! `workqueue_execute_end` there, with a filter keeping only the post-read
//! queues, and reads every CPU's ring buffer as pages (`trace_pipe_raw`,
//! decoded by [`super::rawtrace`]; `trace_pipe`'s text where the kernel
//! publishes no layouts) on a thread. Each item is followed by its
//! work pointer: queue latency is queued -> started (the 2023 fsverity
//! patch's "workqueue scheduler latency"), execution is started -> ended,
//! the CPU that queued it is compared with the CPU that ran it, and the
//! kworker (thread id) that ran it is counted. Given a block device
//! ([`Tracer::start_with`]), it also enables `block:block_rq_issue` and
//! `block_rq_complete`, filtered on that device, and follows each read
//! request by its sector: device latency is issued -> completed.
//!
//! What the thread aggregates is taken per interval
//! ([`Tracer::take_interval`], e.g. every 250 ms by the engine's sampler):
//! items and requests count in the interval they complete in, while those
//! still in flight stay followed across intervals. Whole-run totals per
//! queue are kept alongside ([`Tracer::finish`]). Trace lines the ring
//! buffer lost (`CPU:N [LOST n EVENTS]` in `trace_pipe`), and in-flight
//! entries dropped because their other end never came (the maps are
//! capped), are counted in [`KernelInterval::lost`]. The instance is
//! recorded in `DATA_DIR/kernel/trace-PID.state` before it is made and
//! removed on drop, or after a crash by `kernel::restore`.
//!
//! Given a file ([`Tracer::follow_file`]), a second instance of its own
//! (`readpath-PID-cache`) counts the pages the kernel adds to that file's
//! page cache (`filemap:mm_filemap_add_to_page_cache`, filtered in the
//! kernel on the file): the kernel's page-cache misses, taken per interval
//! with the rest ([`KernelInterval::cache_adds`]).

use std::collections::HashMap;
use std::hash::Hash;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use hdrhistogram::Histogram;

/// The post-read queues of ext4, f2fs and blk-crypto (defined with the
/// record that names them, below this module).
pub use crate::metrics::POST_READ_QUEUES;

/// The tracepoints a [`Tracer`] enables (under `events/workqueue/`).
pub const EVENTS: &[&str] = &[
    "workqueue_queue_work",
    "workqueue_execute_start",
    "workqueue_execute_end",
];

/// The tracepoints a [`Tracer`] given a device also enables (under
/// `events/block/`).
pub const BLOCK_EVENTS: &[&str] = &["block_rq_issue", "block_rq_complete"];

/// The tracepoint that counts the kernel's page-cache misses of the target
/// file ([`Tracer::follow_file`]): a folio added to its page cache (under
/// `events/filemap/`).
pub const CACHE_ADD_EVENT: &str = "mm_filemap_add_to_page_cache";

/// The functions the post-read queues run (ext4's and f2fs's read
/// completion steps, blk-crypto's fallback): their work items are the ones
/// `workqueue_execute_start` / `_end` are kept for.
pub const POST_READ_FUNCTIONS: &[&str] = &[
    "decrypt_work",
    "verity_work",
    "f2fs_post_read_work",
    "blk_crypto_fallback_decrypt_bio",
];

/// A tracefs filter keeping the execute events of [`POST_READ_FUNCTIONS`]
/// (`function == 0x...` per address in `/proc/kallsyms`); None where
/// kallsyms hides the addresses.
fn post_read_function_filter() -> Option<String> {
    let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
    let addrs = function_addresses(&text, POST_READ_FUNCTIONS);
    (!addrs.is_empty()).then(|| {
        addrs
            .iter()
            .map(|a| format!("function == 0x{a:x}"))
            .collect::<Vec<_>>()
            .join(" || ")
    })
}

/// The non-zero addresses of the text symbols `names` in kallsyms text.
fn function_addresses(kallsyms: &str, names: &[&str]) -> Vec<u64> {
    let mut out: Vec<u64> = kallsyms
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            let kind = f.next()?;
            let name = f.next()?;
            (addr != 0 && matches!(kind, "t" | "T") && names.contains(&name)).then_some(addr)
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Where tracefs is mounted.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// In-flight entries (queued items, running items, issued requests) each
/// map holds at most; past it, entries older than [`STALE_NS`] of trace
/// time are dropped (and counted as lost).
pub const MAX_IN_FLIGHT: usize = 65_536;

/// Trace time after which an in-flight entry is taken for lost when its
/// map is full, ns.
pub const STALE_NS: u64 = 10_000_000_000;

/// An empty latency histogram, 1 ns to an hour at 3 significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds")
}

/// One queue's items over the trace (or over an interval).
#[derive(Debug, Clone)]
pub struct QueueTrace {
    /// Items that were queued and ran to the end within the trace (the
    /// interval: those that ended in it).
    pub items: u64,
    /// Queued -> started, ns (one value per item counted in `items`).
    pub queue_ns: Histogram<u64>,
    /// Started -> ended, ns (one value per item counted in `items`).
    pub exec_ns: Histogram<u64>,
    /// Items that ran on another CPU than the one that queued them.
    pub moved: u64,
    /// Items queued to an unbound pool (the tracepoint's `cpu=` is the
    /// pool's CPU: 4294967295, -1, for an unbound pool): the kernel's own
    /// word on whether the queue is bound.
    pub unbound: u64,
    /// Items run by a worker at a negative nice (a WQ_HIGHPRI pool's,
    /// nice -20): the worker's own nice, read from `/proc` the first time
    /// the trace names it.
    pub highpri: u64,
}

impl QueueTrace {
    fn new() -> QueueTrace {
        QueueTrace {
            items: 0,
            queue_ns: histogram(),
            exec_ns: histogram(),
            moved: 0,
            unbound: 0,
            highpri: 0,
        }
    }

    fn record(&mut self, r: &Running, exec_ns: u64) {
        self.items += 1;
        self.queue_ns.saturating_record(r.wait_ns.max(1));
        self.exec_ns.saturating_record(exec_ns.max(1));
        self.moved += u64::from(r.moved);
        self.unbound += u64::from(r.unbound);
        self.highpri += u64::from(r.highpri);
    }
}

/// What the kernel did in one interval ([`Tracer::take_interval`]).
#[derive(Debug, Clone)]
pub struct KernelInterval {
    /// Per post-read queue: the items that completed in this interval.
    pub queues: HashMap<String, QueueTrace>,
    /// Per post-read queue: the most of its items executing at once, seen
    /// when one started in this interval (a queue's `max_active` bounds
    /// it: fscrypt's unbound queue, `num_online_cpus()` in 6.1).
    pub peak: HashMap<&'static str, u32>,
    /// Thread ids (the pid of the trace line: the "70" of
    /// "kworker/u9:0-70") of the kworkers that started an item of a
    /// post-read queue in this interval, with the count of items each
    /// started.
    pub kworkers: HashMap<i32, u64>,
    /// Block-device request latency (issue -> complete), ns, of the traced
    /// device's reads completed in this interval (empty without a device).
    pub device_ns: Histogram<u64>,
    /// Read requests completed (== `device_ns.len()`).
    pub requests: u64,
    /// Trace lines lost in this interval (the ring buffer's
    /// `CPU:N [LOST n EVENTS]`; one where it could not say how many), plus
    /// in-flight entries dropped because their map was full: when non-zero,
    /// the figures above miss some items.
    pub lost: u64,
    /// Pages added to the followed file's page cache (its misses: each
    /// page a read found missing is added once, by the read or its
    /// readahead) since the last interval; None when no file is followed.
    pub cache_adds: Option<u64>,
    /// How far behind its events the trace's reader was when the interval
    /// was closed, ns: what happened in the interval's last `lag_ns` was
    /// not read yet and counts in the next one (0: it had caught up; see
    /// [`Tracer::take_interval_at`]).
    pub lag_ns: u64,
    /// While tracing (`metrics::set_tracing`), the items that ended in
    /// this interval as spans, on the trace clock (CLOCK_MONOTONIC where
    /// the instance has it, else none are kept): where each ran, queued
    /// where and when, by which kworker. At most
    /// [`crate::metrics::SPANS_PER_INTERVAL`]; past it, counted in
    /// `spans_dropped`.
    pub spans: Vec<crate::metrics::Span>,
    /// Spans not kept for want of room.
    pub spans_dropped: u64,
}

impl KernelInterval {
    /// Keeps the span of item `r`, ended at `end_ns`.
    fn push_span(&mut self, r: &Running, end_ns: u64) {
        use crate::metrics::{Span, SpanKind};
        if self.spans.len() >= crate::metrics::SPANS_PER_INTERVAL {
            self.spans_dropped += 1;
            return;
        }
        // fscrypt's and blk-crypto's items decrypt, fs-verity's verify,
        // f2fs's post-read work does both in one.
        let kind = match r.queue {
            "fsverity_read_queue" => SpanKind::Verify,
            "f2fs_post_read_wq" => SpanKind::DecryptVerify,
            _ => SpanKind::Decrypt,
        };
        self.spans.push(Span {
            kind,
            cpu: r.cpu.min(u32::from(u16::MAX)) as u16,
            queued_cpu: r.queued.0.min(u32::from(u16::MAX)) as u16,
            tid: r.pid,
            queued_ns: r.queued.1.min(r.t_ns),
            start_ns: r.t_ns,
            end_ns: end_ns.max(r.t_ns),
        });
    }
}

impl Default for KernelInterval {
    fn default() -> KernelInterval {
        KernelInterval {
            queues: HashMap::new(),
            peak: HashMap::new(),
            kworkers: HashMap::new(),
            device_ns: histogram(),
            requests: 0,
            lost: 0,
            cache_adds: None,
            lag_ns: 0,
            spans: Vec::new(),
            spans_dropped: 0,
        }
    }
}

pub use super::event::Event;

/// Parses one `trace_pipe` line of the events a [`Tracer`] enables, or a
/// lost-events line; None for others. A line is
/// `COMM-PID [CPU] FLAGS SECONDS.MICROS: EVENT: ARGS`, e.g.
/// `  kworker/u8:2-57  [001] ..... 1234.567890: workqueue_queue_work: work struct=... function=... workqueue=... req_cpu=... cpu=...`;
/// the comm may hold spaces and dashes (the pid is the digits after the
/// last `-` before ` [CPU]`). Allocates nothing.
pub fn parse_line(line: &str) -> Option<Event<'_>> {
    let line = line.trim_end_matches(['\n', '\r']);
    if let Some(rest) = line.strip_prefix("CPU:") {
        return parse_lost(rest);
    }
    let (open, close) = cpu_field(line)?;
    let cpu: u32 = line[open + 2..close].trim().parse().ok()?;
    let rest = &line[close + 1..];
    let colon = rest.find(": ")?;
    let t_ns = parse_ts(rest[..colon].split_whitespace().next_back()?)?;
    let rest = &rest[colon + 2..];
    let (name, args) = rest.split_once(": ")?;
    match name {
        "workqueue_queue_work" => {
            let field = |k: &str| {
                args.split_whitespace()
                    .find_map(|f| f.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
            };
            Some(Event::Queue {
                cpu,
                t_ns,
                work: parse_hex(field("struct")?)?,
                queue: field("workqueue")?,
                unbound: field("cpu").is_some_and(|c| c == "4294967295" || c == "-1"),
            })
        }
        "workqueue_execute_start" | "workqueue_execute_end" => {
            let work = args.strip_prefix("work struct ")?.split(':').next()?.trim();
            let work = parse_hex(work)?;
            Some(if name == "workqueue_execute_start" {
                Event::Start {
                    cpu,
                    t_ns,
                    work,
                    pid: task_pid(&line[..open])?,
                }
            } else {
                Event::End { t_ns, work }
            })
        }
        "block_rq_issue" | "block_rq_complete" => {
            let (dev, read, sector) = parse_rq(args)?;
            Some(Event::rq(name == "block_rq_issue", t_ns, dev, sector, read))
        }
        _ => None,
    }
}

/// `N [LOST n EVENTS]` (after `CPU:`).
fn parse_lost(rest: &str) -> Option<Event<'static>> {
    let (cpu, rest) = rest.split_once(" [LOST")?;
    let n = rest.strip_suffix("EVENTS]")?.trim();
    Some(Event::Lost {
        cpu: cpu.trim().parse().ok()?,
        events: if n.is_empty() { 1 } else { n.parse().ok()? },
    })
}

/// The ` [CPU]` field of a line: the first ` [digits]` after a `-PID`
/// (where a comm holds ` [` of its own), as (index of ` [`, index of `]`).
fn cpu_field(line: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(i) = line[from..].find(" [") {
        let open = from + i;
        if let Some(j) = line[open + 2..].find(']') {
            let close = open + 2 + j;
            let inner = line[open + 2..close].trim();
            if !inner.is_empty()
                && inner.bytes().all(|b| b.is_ascii_digit())
                && task_pid(&line[..open]).is_some()
            {
                return Some((open, close));
            }
        }
        from = open + 2;
    }
    None
}

/// The pid of `COMM-PID` (padded, and with a `(TGID)` column where the
/// instance records tgids): the digits after the last `-`.
fn task_pid(head: &str) -> Option<i32> {
    let mut head = head.trim_end();
    if head.ends_with(')') {
        head = head[..head.rfind('(')?].trim_end();
    }
    let (_, pid) = head.rsplit_once('-')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// The args of `block_rq_issue` (`7,0 R 4096 () 2048 + 8 none,0,0 [comm]`)
/// or `block_rq_complete` (`7,0 R () 2048 + 8 none,0,0 [0]`; older
/// kernels lack the ioprio field): (device, read, sector).
fn parse_rq(args: &str) -> Option<((u32, u32), bool, u64)> {
    let (dev, rest) = args.trim_start().split_once(' ')?;
    let (major, minor) = dev.split_once(',')?;
    let dev = (major.parse().ok()?, minor.parse().ok()?);
    let (rwbs, rest) = rest.trim_start().split_once(' ')?;
    let open = rest.find('(')?;
    let close = open + rest[open..].find(") ")?;
    let (sector, _) = rest[close + 2..].split_once(" + ")?;
    Some((dev, rwbs.contains('R'), sector.trim().parse().ok()?))
}

/// A `%p` pointer (hex, with or without `0x`).
fn parse_hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x").unwrap_or(s), 16).ok()
}

/// "1234.567890" (seconds, microseconds) -> ns.
fn parse_ts(s: &str) -> Option<u64> {
    let (sec, frac) = s.split_once('.')?;
    let sec: u64 = sec.parse().ok()?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_ns: u64 = frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32);
    sec.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// A queued item, by work pointer.
#[derive(Debug, Clone, Copy)]
struct Queued {
    t_ns: u64,
    cpu: u32,
    queue: &'static str,
    unbound: bool,
}

/// A running item, by work pointer.
#[derive(Debug, Clone, Copy)]
struct Running {
    t_ns: u64,
    /// Where and when it was queued, the CPU it started on and its
    /// kworker (for its span, while tracing).
    queued: (u32, u64),
    cpu: u32,
    pid: i32,
    /// Queued -> started.
    wait_ns: u64,
    moved: bool,
    queue: &'static str,
    unbound: bool,
    /// Its worker runs at a negative nice.
    highpri: bool,
}

/// Whether thread `tid` runs at a negative nice (field 19 of
/// `/proc/TID/stat`, after the comm's closing parenthesis); false where it
/// cannot be read (a worker gone).
pub fn negative_nice(tid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{tid}/stat")) else {
        return false;
    };
    nice_field(&stat).is_some_and(|n| n < 0)
}

/// The nice field of a `/proc/PID/stat` line.
fn nice_field(stat: &str) -> Option<i32> {
    crate::sys::stat_field(stat, 19)?.parse().ok()
}

/// The most kworkers whose nice is kept (a map cleared when full).
const MAX_NICE_CACHED: usize = 4096;

/// The name in [`POST_READ_QUEUES`] equal to `q`.
fn intern(q: &str) -> Option<&'static str> {
    POST_READ_QUEUES.iter().copied().find(|&n| n == q)
}

/// Makes room for one more entry in `map`: when full, drops the entries
/// older than [`STALE_NS`] before `now_ns` (all of them when that frees
/// less than half, so the cost stays amortised); returns how many went.
fn make_room<K: Eq + Hash, V>(map: &mut HashMap<K, V>, t_ns: fn(&V) -> u64, now_ns: u64) -> u64 {
    if map.len() < MAX_IN_FLIGHT {
        return 0;
    }
    let before = map.len();
    let cutoff = now_ns.saturating_sub(STALE_NS);
    map.retain(|_, v| t_ns(v) >= cutoff);
    if map.len() > MAX_IN_FLIGHT / 2 {
        map.clear();
    }
    (before - map.len()) as u64
}

/// Follows items and requests from their events, filling the current
/// interval and the whole-run totals. Items of queues not in
/// [`POST_READ_QUEUES`] are ignored.
#[derive(Default)]
pub struct Aggregator {
    queued: HashMap<u64, Queued>,
    running: HashMap<u64, Running>,
    issued: HashMap<((u32, u32), u64), u64>,
    /// Whether each kworker seen runs at a negative nice (a kworker keeps
    /// its pool, so its nice, for life; read once).
    highpri: HashMap<i32, bool>,
    /// How a kworker's nice is found (tests give their own).
    nice_of: Option<fn(i32) -> bool>,
    interval: KernelInterval,
    /// While an interval is being closed: its end (the trace clock's ns).
    /// What ends after it goes to [`Self::after`], the next interval.
    cut_ns: Option<u64>,
    /// What ended after [`Self::cut_ns`]: the next interval's start.
    after: KernelInterval,
    /// The trace clock's time up to which every event has been read: when
    /// the pipe was last found empty (the reader thread sets it).
    read_to_ns: u64,
    /// Per queue, its items in [`Self::running`]: one more at a start, one
    /// fewer at an end. After events were lost (an end among them would
    /// leave its item counted) they are counted again at each start, those
    /// started within the last second only, until the first start after
    /// every item from before the loss is that old ([`Self::recount_until`]).
    executing: HashMap<&'static str, u32>,
    /// After a loss: the trace clock's ns past which every item from before
    /// it is a second old; until the first start after it, each start
    /// counts [`Self::executing`] again.
    recount_until: Option<u64>,
    /// Per queue, over the whole trace.
    pub queues: HashMap<String, QueueTrace>,
}

impl Aggregator {
    /// An aggregator that learns whether a kworker runs at a negative nice
    /// from `nice_of` instead of `/proc` (tests).
    pub fn with_nice(nice_of: fn(i32) -> bool) -> Aggregator {
        Aggregator {
            nice_of: Some(nice_of),
            ..Aggregator::default()
        }
    }

    /// The interval an event at `t_ns` counts in: the one being closed
    /// unless it happened after its end.
    fn at(&mut self, t_ns: u64) -> &mut KernelInterval {
        Self::interval_of(self.cut_ns, &mut self.interval, &mut self.after, t_ns)
    }

    /// [`Self::at`], with the fields borrowed apart.
    fn interval_of<'a>(
        cut_ns: Option<u64>,
        interval: &'a mut KernelInterval,
        after: &'a mut KernelInterval,
        t_ns: u64,
    ) -> &'a mut KernelInterval {
        match cut_ns {
            Some(cut) if t_ns > cut => after,
            _ => interval,
        }
    }

    /// Events were lost at `t_ns`: recount at each start for a second.
    fn lost_at(&mut self, t_ns: u64) {
        self.recount_until = Some(t_ns.saturating_add(1_000_000_000));
    }

    /// Counts each queue's running items again: those started within a
    /// second of `now_ns` (an item whose end was lost stops counting).
    fn recount(&mut self, now_ns: u64) {
        self.executing.clear();
        for r in self.running.values() {
            if now_ns.saturating_sub(r.t_ns) < 1_000_000_000 {
                *self.executing.entry(r.queue).or_insert(0) += 1;
            }
        }
    }

    /// Takes one event.
    pub fn add(&mut self, e: &Event<'_>) {
        // `trace_pipe` gives the CPUs' events merged in time order: every
        // event before this one has been read.
        if let Some(t) = e.t_ns() {
            self.read_to(t);
        }
        match *e {
            Event::Queue {
                cpu,
                t_ns,
                work,
                queue,
                unbound,
            } => {
                if let Some(queue) = intern(queue) {
                    self.interval.lost += make_room(&mut self.queued, |q| q.t_ns, t_ns);
                    self.queued.insert(
                        work,
                        Queued {
                            t_ns,
                            cpu,
                            queue,
                            unbound,
                        },
                    );
                }
            }
            Event::Start {
                cpu,
                t_ns,
                work,
                pid,
            } => {
                if let Some(q) = self.queued.remove(&work) {
                    let dropped = make_room(&mut self.running, |r| r.t_ns, t_ns);
                    if dropped > 0 {
                        self.interval.lost += dropped;
                        self.lost_at(t_ns);
                    }
                    if self.highpri.len() >= MAX_NICE_CACHED {
                        self.highpri.clear();
                    }
                    let nice_of = self.nice_of.unwrap_or(negative_nice);
                    let highpri = *self.highpri.entry(pid).or_insert_with(|| nice_of(pid));
                    self.running.insert(
                        work,
                        Running {
                            t_ns,
                            queued: (q.cpu, q.t_ns),
                            cpu,
                            pid,
                            wait_ns: t_ns.saturating_sub(q.t_ns),
                            moved: q.cpu != cpu,
                            queue: q.queue,
                            unbound: q.unbound,
                            highpri,
                        },
                    );
                    // Its queue's items executing now, this one included.
                    if let Some(until) = self.recount_until {
                        self.recount(t_ns);
                        if t_ns > until {
                            self.recount_until = None;
                        }
                    } else {
                        *self.executing.entry(q.queue).or_insert(0) += 1;
                    }
                    let at_once = self.executing.get(q.queue).copied().unwrap_or(1);
                    let k = self.at(t_ns);
                    *k.kworkers.entry(pid).or_insert(0) += 1;
                    let peak = k.peak.entry(q.queue).or_insert(0);
                    *peak = (*peak).max(at_once);
                }
            }
            Event::End { t_ns, work } => {
                if let Some(r) = self.running.remove(&work) {
                    if let Some(n) = self.executing.get_mut(r.queue) {
                        *n = n.saturating_sub(1);
                    }
                    let exec = t_ns.saturating_sub(r.t_ns);
                    let k =
                        Self::interval_of(self.cut_ns, &mut self.interval, &mut self.after, t_ns);
                    if crate::metrics::tracing() {
                        k.push_span(&r, t_ns);
                    }
                    for m in [&mut k.queues, &mut self.queues] {
                        match m.get_mut(r.queue) {
                            Some(q) => q.record(&r, exec),
                            None => {
                                let mut q = QueueTrace::new();
                                q.record(&r, exec);
                                m.insert(r.queue.to_string(), q);
                            }
                        }
                    }
                }
            }
            Event::RqIssue {
                t_ns,
                dev,
                sector,
                read,
            } => {
                if read {
                    self.interval.lost += make_room(&mut self.issued, |t| *t, t_ns);
                    self.issued.insert((dev, sector), t_ns);
                }
            }
            Event::RqComplete {
                t_ns,
                dev,
                sector,
                read,
            } => {
                if read && let Some(t0) = self.issued.remove(&(dev, sector)) {
                    let k = self.at(t_ns);
                    k.device_ns
                        .saturating_record(t_ns.saturating_sub(t0).max(1));
                    k.requests += 1;
                }
            }
            Event::Lost { events, .. } => {
                self.interval.lost += events;
                self.lost_at(self.read_to_ns);
            }
        }
    }

    /// Returns what completed since the last call (or the start), leaving
    /// what is in flight followed.
    pub fn take_interval(&mut self) -> KernelInterval {
        self.take_with(KernelInterval::default())
    }

    /// Marks the end of the interval being closed at `cut_ns` (the trace
    /// clock's ns): from now on what ends after it counts in the next
    /// interval ([`Self::take_with`]).
    pub fn cut_at(&mut self, cut_ns: u64) {
        self.cut_ns = Some(cut_ns);
    }

    /// The interval being closed (what ended up to its cut, or everything
    /// without one); what ended after the cut starts the next, and `fresh`
    /// (made outside any lock) waits for the one after. With a cut that
    /// the reader had not read up to, its lag is said.
    pub fn take_with(&mut self, fresh: KernelInterval) -> KernelInterval {
        let next = std::mem::replace(&mut self.after, fresh);
        let mut k = std::mem::replace(&mut self.interval, next);
        if let Some(cut) = self.cut_ns.take() {
            k.lag_ns = cut.saturating_sub(self.read_to_ns);
        }
        k
    }

    /// Every event up to `t_ns` (the trace clock's ns) has been read.
    pub fn read_to(&mut self, t_ns: u64) {
        self.read_to_ns = self.read_to_ns.max(t_ns);
    }

    /// The trace clock's time up to which every event has been read.
    pub fn read_to_ns(&self) -> u64 {
        self.read_to_ns
    }

    /// Items queued or running, and read requests issued, not yet done.
    pub fn in_flight(&self) -> (usize, usize, usize) {
        (self.queued.len(), self.running.len(), self.issued.len())
    }

    /// Takes one line of `trace_pipe` (bytes: a comm need not be UTF-8).
    fn add_line(&mut self, line: &[u8]) {
        match std::str::from_utf8(line) {
            Ok(s) => {
                if let Some(e) = parse_line(s) {
                    self.add(&e);
                }
            }
            Err(_) => {
                if let Some(e) = parse_line(&String::from_utf8_lossy(line)) {
                    self.add(&e);
                }
            }
        }
    }
}

/// A tracefs instance following the post-read queues (and a block
/// device's requests) until finished or dropped.
pub struct Tracer {
    dir: PathBuf,
    stop: Arc<AtomicBool>,
    agg: Arc<Mutex<Aggregator>>,
    thread: Option<std::thread::JoinHandle<()>>,
    state: PathBuf,
    block: bool,
    /// The followed file's page-cache adds ([`Tracer::follow_file`]).
    cache: Mutex<Option<CacheCounter>>,
    /// The instance's clock is CLOCK_MONOTONIC (`trace_clock = mono`):
    /// intervals are cut by the events' own times.
    mono: bool,
}

/// Counts a file's page-cache adds in a tracefs instance of its own
/// (`readpath-PID-cache`) holding only `filemap:mm_filemap_add_to_page_cache`,
/// filtered in the kernel on the file: the count is the events its ring
/// buffer took (`entries + overrun` of every CPU's `stats`), never read
/// line by line, so however fast pages are added none is missed (a
/// reader thread that falls behind would leave some uncounted). Recorded
/// (`tracecache-PID.state`) before it is made; removed on drop, or after
/// a crash by `kernel::restore`.
struct CacheCounter {
    dir: PathBuf,
    state: PathBuf,
    /// The count at the last interval.
    last: u64,
}

impl CacheCounter {
    fn start(data_dir: &Path, dev: (u32, u32), ino: u64, pages: u64) -> io::Result<CacheCounter> {
        let ev = Path::new(TRACEFS)
            .join("events/filemap")
            .join(CACHE_ADD_EVENT);
        if !ev.exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: this kernel has no such tracepoint", ev.display()),
            ));
        }
        let dir = Path::new(TRACEFS)
            .join("instances")
            .join(format!("readpath-{}-cache", std::process::id()));
        let state = super::record_state_as(data_dir, &dir, "tracecache")?;
        std::fs::create_dir(&dir)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        let mut c = CacheCounter {
            dir,
            state,
            last: 0,
        };
        let ev = c.dir.join("events/filemap").join(CACHE_ADD_EVENT);
        // The kernel's dev_t: major << 20 | minor. Only the file's data
        // pages (an fs-verity file's tree is cached past its end).
        let s_dev = (u64::from(dev.0) << 20) | u64::from(dev.1);
        write(
            &ev.join("filter"),
            &format!("s_dev == {s_dev} && i_ino == {ino} && index < {pages}"),
        )?;
        // Lines are never read: the smallest buffer, overwritten.
        let _ = write(&c.dir.join("buffer_size_kb"), "4");
        write(&ev.join("enable"), "1")?;
        write(&c.dir.join("tracing_on"), "1")?;
        c.last = c.count();
        Ok(c)
    }

    /// Events the instance's buffers took: every CPU's entries (still
    /// held) and overrun (overwritten).
    fn count(&self) -> u64 {
        let Ok(rd) = std::fs::read_dir(self.dir.join("per_cpu")) else {
            return 0;
        };
        rd.flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stats")).ok())
            .map(|t| {
                t.lines()
                    .filter_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        matches!(k, "entries" | "overrun")
                            .then(|| v.trim().parse::<u64>().ok())
                            .flatten()
                    })
                    .sum::<u64>()
            })
            .sum()
    }

    /// Adds since the last call.
    fn take(&mut self) -> u64 {
        let now = self.count();
        let d = now.saturating_sub(self.last);
        self.last = now;
        d
    }
}

/// Removes a tracefs instance this process made (tracefs may refuse for a
/// moment while its last reader lets go: tried for up to 1 s), then its
/// state file once the instance is gone.
fn remove_instance(dir: &Path, state: &Path) {
    for _ in 0..50 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if !dir.exists() {
        let _ = std::fs::remove_file(state);
    }
}

impl Drop for CacheCounter {
    fn drop(&mut self) {
        let _ = write(&self.dir.join("tracing_on"), "0");
        let _ = write(
            &self
                .dir
                .join("events/filemap")
                .join(CACHE_ADD_EVENT)
                .join("enable"),
            "0",
        );
        remove_instance(&self.dir, &self.state);
    }
}

fn write(path: &Path, v: &str) -> io::Result<()> {
    std::fs::write(path, v)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn lock(agg: &Mutex<Aggregator>) -> MutexGuard<'_, Aggregator> {
    agg.lock().unwrap_or_else(|e| e.into_inner())
}

/// The CPUs of a tracefs instance's `per_cpu/`, ascending.
fn raw_cpus(dir: &Path) -> Vec<u32> {
    let mut cpus: Vec<u32> = std::fs::read_dir(dir.join("per_cpu"))
        .map(|d| {
            d.filter_map(|e| {
                e.ok()?
                    .file_name()
                    .to_str()?
                    .strip_prefix("cpu")?
                    .parse()
                    .ok()
            })
            .collect()
        })
        .unwrap_or_default();
    cpus.sort_unstable();
    cpus
}

/// Pages one pass of [`read_raw`] takes before it hands them on (4 MiB at
/// 4 KiB pages): a pass that fills it goes again at once.
const RAW_PASS_PAGES: usize = 1024;

/// Reads every CPU's `trace_pipe_raw` (non-blocking) into `agg` until
/// `stop`, then drains them. Each pass reads what every CPU has, decodes
/// the pages, puts their events in time order (the CPUs' buffers are
/// separate; `trace_pipe` merges them so) and hands them on under one
/// lock; a pass that found every buffer empty says so with its start
/// time, as [`read_pipe`] does. The page buffer is allocated once.
fn read_raw(
    layouts: &super::rawtrace::Layouts,
    mut pipes: Vec<(u32, std::fs::File)>,
    stop: &AtomicBool,
    agg: &Mutex<Aggregator>,
) {
    let page = crate::sys::page_size().max(4096);
    let mut buf = vec![0u8; RAW_PASS_PAGES * page];
    let mut pages: Vec<(u32, usize)> = Vec::with_capacity(RAW_PASS_PAGES);
    let mut drained = false;
    loop {
        let asked_ns = crate::sys::monotonic_ns();
        pages.clear();
        let mut full = false;
        let mut failed = false;
        'cpus: for (cpu, f) in pipes.iter_mut() {
            loop {
                if pages.len() == RAW_PASS_PAGES {
                    full = true;
                    break 'cpus;
                }
                let at = pages.len() * page;
                match f.read(&mut buf[at..at + page]) {
                    Ok(0) => break,
                    Ok(n) => {
                        // A page read whole (the kernel copies one at a
                        // time); a short read has no page header to trust.
                        if n == page {
                            pages.push((*cpu, at));
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
        }
        if !pages.is_empty() {
            // One allocation a pass (not an event): the events borrow
            // `buf`, which the next pass reads into.
            let mut events = Vec::with_capacity(pages.len() * 32);
            let mut bad = 0u64;
            for &(cpu, at) in &pages {
                if !layouts.decode_page(&buf[at..at + page], cpu, &mut events) {
                    bad += 1;
                }
            }
            events.sort_by_key(|e| e.t_ns().unwrap_or(0));
            let mut a = lock(agg);
            if bad > 0 {
                // A page that made no sense: what it held is lost.
                a.add(&Event::Lost {
                    cpu: u32::MAX,
                    events: bad,
                });
            }
            for e in &events {
                a.add(e);
            }
        }
        if failed {
            break;
        }
        if full {
            continue;
        }
        if drained_after(agg, asked_ns, stop, &mut drained) {
            break;
        }
    }
}

/// Every buffer read empty by a pass that began at `asked_ns`: every
/// event before then was read (the trace clock is CLOCK_MONOTONIC's,
/// `trace_clock = mono`). Once stopped, one more pass drains what is
/// left: true when that pass is done; else a 5 ms wait.
fn drained_after(
    agg: &Mutex<Aggregator>,
    asked_ns: u64,
    stop: &AtomicBool,
    drained: &mut bool,
) -> bool {
    lock(agg).read_to(asked_ns);
    if stop.load(Ordering::SeqCst) {
        if *drained {
            return true;
        }
        *drained = true;
    }
    std::thread::sleep(std::time::Duration::from_millis(5));
    false
}

/// Reads `trace_pipe` (non-blocking) into `agg` until `stop`, then drains
/// it: whole reads are split into lines and taken under one lock.
fn read_pipe(mut pipe: std::fs::File, stop: &AtomicBool, agg: &Mutex<Aggregator>) {
    let mut buf = vec![0u8; 1 << 16];
    let mut have = 0;
    let mut drained = false;
    loop {
        let asked_ns = crate::sys::monotonic_ns();
        match pipe.read(&mut buf[have..]) {
            Ok(0) => break,
            Ok(n) => {
                have += n;
                let Some(last) = buf[..have].iter().rposition(|&b| b == b'\n') else {
                    // A line longer than the buffer is none of ours.
                    if have == buf.len() {
                        have = 0;
                    }
                    continue;
                };
                {
                    let mut a = lock(agg);
                    for line in buf[..last].split(|&b| b == b'\n') {
                        a.add_line(line);
                    }
                }
                // A partial line: the rest comes with the next read.
                buf.copy_within(last + 1..have, 0);
                have -= last + 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if drained_after(agg, asked_ns, stop, &mut drained) {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

impl Tracer {
    /// Starts tracing the post-read queues in an instance of its own,
    /// recorded under `data_dir` first: [`Tracer::start_with`] without a
    /// device.
    pub fn start(data_dir: &Path) -> io::Result<Tracer> {
        Tracer::start_with(data_dir, None)
    }

    /// Starts tracing the post-read queues, and with `device` (major,
    /// minor) the latency of that block device's read requests, in an
    /// instance of its own (named by the PID: one Tracer at a time per
    /// process), recorded under `data_dir` first. Needs root (or tracefs
    /// access) and a mounted tracefs; the error says which is missing.
    pub fn start_with(data_dir: &Path, device: Option<(u32, u32)>) -> io::Result<Tracer> {
        let events = Path::new(TRACEFS).join("events/workqueue/workqueue_queue_work");
        if !events.exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} has no workqueue tracepoints: mount tracefs (mount -t tracefs nodev {TRACEFS}) as root",
                    events.display()
                ),
            ));
        }
        let block = Path::new(TRACEFS).join("events/block/block_rq_issue");
        if device.is_some() && !block.exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is missing: this kernel has no block tracepoints (CONFIG_BLK_DEV_IO_TRACE / CONFIG_EVENT_TRACING)",
                    block.display()
                ),
            ));
        }
        let dir = Path::new(TRACEFS)
            .join("instances")
            .join(format!("readpath-{}", std::process::id()));
        if dir.exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists: another Tracer of this process is running (one at a time per process)",
                    dir.display()
                ),
            ));
        }
        let state = super::record_state(data_dir, &dir)?;
        std::fs::create_dir(&dir)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        // From here on an error drops `t`, which removes the instance.
        let mut t = Tracer {
            dir,
            stop: Arc::new(AtomicBool::new(false)),
            agg: Arc::new(Mutex::new(Aggregator::default())),
            thread: None,
            state,
            block: device.is_some(),
            cache: Mutex::new(None),
            mono: false,
        };
        // The events' times on readpath's clock, so an interval takes the
        // items that ended in it however late they are read (the
        // instance's own clock: the top level's is left alone).
        t.mono = write(&t.dir.join("trace_clock"), "mono").is_ok();
        let filter = POST_READ_QUEUES
            .iter()
            .map(|q| format!("workqueue == \"{q}\""))
            .collect::<Vec<_>>()
            .join(" || ");
        let ev = t.dir.join("events/workqueue");
        write(&ev.join("workqueue_queue_work/filter"), &filter)?;
        // The start and end events carry no queue name: filtered on the
        // post-read work functions' addresses, so the kernel does not
        // emit (and format, and readpath parse) every other work item of
        // the machine, the loop device's own among them. Where the
        // addresses are hidden (kptr_restrict) they stay unfiltered.
        if let Some(f) = post_read_function_filter() {
            for e in &EVENTS[1..] {
                let _ = write(&ev.join(e).join("filter"), &f);
            }
        }
        for e in EVENTS {
            write(&ev.join(e).join("enable"), "1")?;
        }
        if let Some((major, minor)) = device {
            // The field is the kernel's dev_t: major << 20 | minor. Writes
            // are left out in the kernel where its filter takes a glob.
            let dev = (u64::from(major) << 20) | u64::from(minor);
            let ev = t.dir.join("events/block");
            for e in BLOCK_EVENTS {
                let f = ev.join(e).join("filter");
                if write(&f, &format!("dev == {dev} && rwbs ~ \"*R*\"")).is_err() {
                    write(&f, &format!("dev == {dev}"))?;
                }
                write(&ev.join(e).join("enable"), "1")?;
            }
        }
        write(&t.dir.join("tracing_on"), "1")?;
        // Non-blocking, so the reader sees `stop` within a few ms and
        // closes the pipes before the instance is removed.
        let open = |p: &Path| {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(crate::sys::oflag::O_NONBLOCK)
                .open(p)
        };
        let (stop, agg) = (t.stop.clone(), t.agg.clone());
        // The ring buffer's pages as they are (`trace_pipe_raw`), decoded
        // here from the layouts the kernel publishes, rather than
        // `trace_pipe`'s text, which costs the kernel a kallsyms lookup
        // and a format per event in the reading thread. The text where
        // the layouts are missing.
        let raw = super::rawtrace::Layouts::read(&t.dir).and_then(|l| {
            let pipes = raw_cpus(&t.dir)
                .iter()
                .map(|&c| {
                    open(&t.dir.join(format!("per_cpu/cpu{c}/trace_pipe_raw"))).map(|f| (c, f))
                })
                .collect::<io::Result<Vec<_>>>()
                .ok()?;
            (!pipes.is_empty()).then_some((l, pipes))
        });
        t.thread = Some(match raw {
            Some((layouts, pipes)) => std::thread::Builder::new()
                .name("tracer".into())
                .spawn(move || read_raw(&layouts, pipes, &stop, &agg))?,
            None => {
                let pipe = open(&t.dir.join("trace_pipe"))?;
                std::thread::Builder::new()
                    .name("tracer".into())
                    .spawn(move || read_pipe(pipe, &stop, &agg))?
            }
        });
        Ok(t)
    }

    /// Returns what completed since the last call (or the start): per
    /// queue, per kworker, the device's read latency, and what was lost.
    /// Items and requests in flight stay followed into the next interval;
    /// the reader thread keeps running. Only what the reader has taken
    /// from `trace_pipe` counts (it polls every 5 ms).
    pub fn take_interval(&self) -> KernelInterval {
        // The next interval's (allocated) histograms are made outside the lock.
        let fresh = KernelInterval::default();
        let mut k = lock(&self.agg).take_with(fresh);
        self.add_cache_adds(&mut k);
        k
    }

    /// The interval that ended at `end_ns` (CLOCK_MONOTONIC, readpath's
    /// [`crate::metrics::now_ns`]): the items and requests that ended up
    /// to then, by the events' own times, whenever the reader thread read
    /// them. It waits up to `wait` for the reader to read up to `end_ns`;
    /// a reader further behind leaves the rest to the next interval, and
    /// the interval says by how much ([`KernelInterval::lag_ns`]). Where
    /// the instance's clock could not be set, as [`Self::take_interval`].
    pub fn take_interval_at(&self, end_ns: u64, wait: std::time::Duration) -> KernelInterval {
        if !self.mono {
            // Spans on another clock than the engine's would be misplaced.
            let mut k = self.take_interval();
            k.spans_dropped += k.spans.len() as u64;
            k.spans.clear();
            return k;
        }
        lock(&self.agg).cut_at(end_ns);
        let deadline = crate::sys::monotonic_ns().saturating_add(wait.as_nanos() as u64);
        while lock(&self.agg).read_to_ns() < end_ns && crate::sys::monotonic_ns() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let fresh = KernelInterval::default();
        let mut k = lock(&self.agg).take_with(fresh);
        self.add_cache_adds(&mut k);
        k
    }

    fn add_cache_adds(&self, k: &mut KernelInterval) {
        k.cache_adds = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .map(CacheCounter::take);
    }

    /// Counts the pages added to the page cache of the file `ino` on
    /// device `dev` (major, minor), its first `pages` pages only, from now
    /// on ([`KernelInterval::cache_adds`]): an instance of its own holding
    /// `filemap:mm_filemap_add_to_page_cache`, filtered in the kernel on
    /// the superblock's device, the inode and the page index, recorded
    /// under `data_dir` first. Again for another file replaces it. An
    /// error (a kernel without the tracepoint) leaves none followed.
    ///
    /// The count is of folios: one per page where the file is cached in
    /// single pages (what ext4 does for encrypted and verity files).
    pub fn follow_file(
        &self,
        data_dir: &Path,
        dev: (u32, u32),
        ino: u64,
        pages: u64,
    ) -> io::Result<()> {
        let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        // The old one goes first (one instance name per process).
        *c = None;
        *c = Some(CacheCounter::start(data_dir, dev, ino, pages)?);
        Ok(())
    }

    /// Stops, removes the instance and returns the whole run's per-queue
    /// totals (what any interval taken reported, and what was left).
    pub fn finish(mut self) -> HashMap<String, QueueTrace> {
        self.teardown();
        std::mem::take(&mut lock(&self.agg).queues)
    }

    fn teardown(&mut self) {
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.stop.store(true, Ordering::SeqCst);
        let _ = write(&self.dir.join("tracing_on"), "0");
        for e in EVENTS {
            let _ = write(
                &self.dir.join("events/workqueue").join(e).join("enable"),
                "0",
            );
        }
        if self.block {
            for e in BLOCK_EVENTS {
                let _ = write(&self.dir.join("events/block").join(e).join("enable"), "0");
            }
        }
        // The reader sees `stop` within a few ms and closes the pipe (an
        // instance cannot be removed while its pipe is open).
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
        remove_instance(&self.dir, &self.state);
        // A tracefs that another readpath mounted and could not unmount
        // while this one used it: whoever ends last puts it back.
        if let Some(dir) = self.state.parent() {
            let _ = super::restore_tracefs(dir, &mut Vec::new());
        }
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        if self.thread.is_some() || self.dir.exists() {
            self.teardown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_read_functions_are_found_in_kallsyms() {
        let text = "ffffffff81809920 t verity_work\nffffffff81809960 t decrypt_work\nffffffffc0001000 t decrypt_work\t[f2fs]\n0000000000000000 t decrypt_work\nffffffff81000000 T decrypt_work_helper\nffffffff81000010 d decrypt_work\n";
        assert_eq!(
            function_addresses(text, POST_READ_FUNCTIONS),
            vec![0xffffffff81809920, 0xffffffff81809960, 0xffffffffc0001000]
        );
        assert!(function_addresses("", POST_READ_FUNCTIONS).is_empty());
    }

    fn feed(a: &mut Aggregator, lines: &[impl AsRef<str>]) {
        for l in lines {
            if let Some(e) = parse_line(l.as_ref()) {
                a.add(&e);
            }
        }
    }

    #[test]
    fn trace_lines_parse_and_items_are_followed() {
        let lines = [
            "   kworker/1:1H-88      [001] d..1.   100.000010: workqueue_queue_work: work struct=00000000aabbccdd function=fscrypt_decrypt_bio workqueue=fscrypt_read_queue req_cpu=8192 cpu=4294967295",
            "  kworker/u9:0-70       [000] .....   100.000060: workqueue_execute_start: work struct 00000000aabbccdd: function fscrypt_decrypt_bio",
            "  kworker/u9:0-70       [000] .....   100.000160: workqueue_execute_end: work struct 00000000aabbccdd: function fscrypt_decrypt_bio",
            "          <idle>-0      [001] d.h1.   100.000200: workqueue_queue_work: work struct=0000000011112222 function=verity_work workqueue=fsverity_read_queue req_cpu=1 cpu=1",
            "  kworker/1:2H-99       [001] .....   100.001200: workqueue_execute_start: work struct 0000000011112222: function verity_work",
            "  kworker/1:2H-99       [001] .....   100.001210: workqueue_execute_end: work struct 0000000011112222: function verity_work",
            "# tracer: nop",
            "garbage [x] no",
        ];
        assert_eq!(
            parse_line(lines[0]),
            Some(Event::Queue {
                cpu: 1,
                t_ns: 100_000_010_000,
                work: 0xaabb_ccdd,
                queue: "fscrypt_read_queue",
                unbound: true,
            })
        );
        assert_eq!(
            parse_line(lines[1]),
            Some(Event::Start {
                cpu: 0,
                t_ns: 100_000_060_000,
                work: 0xaabb_ccdd,
                pid: 70
            })
        );
        assert_eq!(parse_line(lines[6]), None);
        assert_eq!(parse_line(lines[7]), None);
        // Kworker 70 is a high-priority pool's (nice -20), 99 not.
        let mut a = Aggregator::with_nice(|pid| pid == 70);
        feed(&mut a, &lines);
        let f = &a.queues["fscrypt_read_queue"];
        // fscrypt's queue is unbound (the pool's cpu=-1), fsverity's bound
        // (cpu=1): the kernel says which pool each item went to.
        assert_eq!((f.items, f.moved, f.unbound), (1, 1, 1));
        assert!((49_900..=50_100).contains(&f.queue_ns.value_at_quantile(0.5)));
        assert!((99_900..=100_100).contains(&f.exec_ns.value_at_quantile(0.5)));
        let v = &a.queues["fsverity_read_queue"];
        assert_eq!((v.items, v.moved, v.unbound), (1, 0, 0));
        assert_eq!(f.highpri + v.highpri, 1);
        assert!((999_000..=1_001_000).contains(&v.queue_ns.value_at_quantile(0.5)));
        assert_eq!(
            nice_field(
                "57 (kworker/1:1H-kblockd) I 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0 0 -20 1 0 116 0 0"
            ),
            Some(-20)
        );
        assert_eq!(
            nice_field("9 (a) b) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 5 1 0 1"),
            Some(5)
        );
        assert_eq!(nice_field("garbage"), None);
        assert_eq!(parse_ts("1.5"), Some(1_500_000_000));
        assert_eq!(parse_ts("1.x"), None);
        // The interval saw the same, and its kworkers.
        let i = a.take_interval();
        assert_eq!(i.queues["fscrypt_read_queue"].items, 1);
        assert_eq!(i.kworkers, HashMap::from([(70, 1), (99, 1)]));
        assert_eq!(a.in_flight(), (0, 0, 0));
    }

    #[test]
    fn the_pid_is_after_the_last_dash_of_the_comm() {
        let pid = |head: &str| {
            let line = format!(
                "{head} [003] .....   7.000001: workqueue_execute_start: work struct 00000000deadbeef: function fscrypt_decrypt_bio"
            );
            match parse_line(&line) {
                Some(Event::Start { pid, cpu, .. }) => {
                    assert_eq!(cpu, 3);
                    Some(pid)
                }
                _ => None,
            }
        };
        assert_eq!(pid("  my-prog x-1234-5678   "), Some(5678));
        assert_eq!(pid("  my-prog x-1234"), Some(1234));
        assert_eq!(pid("    <idle>-0      "), Some(0));
        assert_eq!(pid("kworker/u9:0-70 (     70)"), Some(70));
        // A comm holding " [1]" of its own.
        assert_eq!(pid("odd [1] name-42"), Some(42));
        assert_eq!(pid("no pid here"), None);
    }

    #[test]
    fn block_and_lost_lines_parse() {
        let issue = "   loop0-1234   [001] ..... 200.000100: block_rq_issue: 7,0 R 4096 () 2048 + 8 [kworker/1:1]";
        let complete =
            "  <idle>-0      [001] d.h1. 200.000300: block_rq_complete: 7,0 R () 2048 + 8 [0]";
        assert_eq!(
            parse_line(issue),
            Some(Event::RqIssue {
                t_ns: 200_000_100_000,
                dev: (7, 0),
                sector: 2048,
                read: true
            })
        );
        assert_eq!(
            parse_line(complete),
            Some(Event::RqComplete {
                t_ns: 200_000_300_000,
                dev: (7, 0),
                sector: 2048,
                read: true
            })
        );
        // 6.x: an ioprio field; a cmd in the parentheses; other rwbs.
        assert_eq!(
            parse_line(
                "  kworker/u8:3-66 [000] ..... 1.000000: block_rq_issue: 259,3 RA 131072 (12 00 ab) 123456789 + 256 be,0,4 [cat]"
            ),
            Some(Event::RqIssue {
                t_ns: 1_000_000_000,
                dev: (259, 3),
                sector: 123_456_789,
                read: true
            })
        );
        assert_eq!(
            parse_line(
                "  rustc-18406   [001] ..s..  1291.883965: block_rq_complete: 254,0 FWS () 18446744073709551615 + 0 none,0,0 [0]"
            ),
            Some(Event::RqComplete {
                t_ns: 1_291_883_965_000,
                dev: (254, 0),
                sector: u64::MAX,
                read: false
            })
        );
        assert_eq!(
            parse_line("CPU:2 [LOST 123 EVENTS]"),
            Some(Event::Lost {
                cpu: 2,
                events: 123
            })
        );
        assert_eq!(
            parse_line("CPU:0 [LOST EVENTS]\n"),
            Some(Event::Lost { cpu: 0, events: 1 })
        );
        // Reads are timed issue -> complete; writes are not; lost lines count.
        let mut a = Aggregator::default();
        feed(
            &mut a,
            &[
                issue,
                "   loop0-1234   [001] ..... 200.000110: block_rq_issue: 7,0 WS 4096 () 4096 + 8 none,0,0 [jbd2/loop0-8]",
                "  <idle>-0      [001] d.h1. 200.000400: block_rq_complete: 7,0 WS () 4096 + 8 none,0,0 [0]",
                complete,
                "CPU:1 [LOST 5 EVENTS]",
            ],
        );
        let i = a.take_interval();
        assert_eq!((i.requests, i.device_ns.len(), i.lost), (1, 1, 5));
        assert!((199_000..=201_000).contains(&i.device_ns.max()));
        assert_eq!(a.in_flight(), (0, 0, 0));
    }

    #[test]
    fn an_interval_counts_what_completed_in_it() {
        let q = |t: &str, w: &str| {
            format!(
                "  kworker/1:1H-88 [001] d..1. {t}: workqueue_queue_work: work struct={w} function=fscrypt_decrypt_bio workqueue=fscrypt_read_queue req_cpu=8192 cpu=1"
            )
        };
        let s = |t: &str, w: &str, who: &str| {
            format!(
                "  {who} [000] ..... {t}: workqueue_execute_start: work struct {w}: function fscrypt_decrypt_bio"
            )
        };
        let e = |t: &str, w: &str| {
            format!(
                "  kworker/u9:0-70 [000] ..... {t}: workqueue_execute_end: work struct {w}: function fscrypt_decrypt_bio"
            )
        };
        let mut a = Aggregator::default();
        let lines = [
            q("10.000000", "aa"),
            q("10.000001", "bb"),
            s("10.000010", "aa", "kworker/u9:0-70"),
            e("10.000020", "aa"),
            // A queue the tracer does not follow is ignored.
            "  x-1 [000] ..... 10.000030: workqueue_queue_work: work struct=cc function=f workqueue=events req_cpu=1 cpu=1".to_string(),
        ];
        feed(&mut a, &lines);
        let one = a.take_interval();
        assert_eq!(one.queues["fscrypt_read_queue"].items, 1);
        assert_eq!(one.kworkers, HashMap::from([(70, 1)]));
        assert_eq!(a.in_flight(), (1, 0, 0));
        // bb, queued in the first interval, runs and ends in the second.
        let lines = [
            s("10.000100", "bb", "kworker/u9:1-71"),
            e("10.000300", "bb"),
            s("10.000400", "cc", "kworker/u9:1-71"),
        ];
        feed(&mut a, &lines);
        let two = a.take_interval();
        let f = &two.queues["fscrypt_read_queue"];
        assert_eq!((f.items, f.queue_ns.len(), f.exec_ns.len()), (1, 1, 1));
        assert!((98_000..=100_000).contains(&f.queue_ns.max()));
        assert_eq!(two.kworkers, HashMap::from([(71, 1)]));
        assert!(a.take_interval().queues.is_empty());
        // The totals hold both.
        assert_eq!(a.queues["fscrypt_read_queue"].items, 2);
        assert_eq!(a.queues.len(), 1);
    }

    #[test]
    fn the_most_items_at_once_of_each_queue_is_counted() {
        let line = |t: &str, ev: &str, w: &str, who: &str| match ev {
            "q" => format!(
                "  x-1 [001] d..1. {t}: workqueue_queue_work: work struct={w} function=fscrypt_decrypt_bio workqueue=fscrypt_read_queue req_cpu=8192 cpu=4294967295"
            ),
            "s" => format!(
                "  {who} [001] ..... {t}: workqueue_execute_start: work struct {w}: function fscrypt_decrypt_bio"
            ),
            _ => format!(
                "  {who} [001] ..... {t}: workqueue_execute_end: work struct {w}: function fscrypt_decrypt_bio"
            ),
        };
        let mut a = Aggregator::with_nice(|_| true);
        // aa and bb overlap, cc runs alone after them.
        let lines = [
            line("1.000000", "q", "aa", ""),
            line("1.000001", "q", "bb", ""),
            line("1.000002", "q", "cc", ""),
            line("1.000010", "s", "aa", "kworker/u9:0-70"),
            line("1.000020", "s", "bb", "kworker/u9:1-71"),
            line("1.000030", "e", "aa", "kworker/u9:0-70"),
            line("1.000040", "e", "bb", "kworker/u9:1-71"),
            line("1.000050", "s", "cc", "kworker/u9:0-70"),
            line("1.000060", "e", "cc", "kworker/u9:0-70"),
        ];
        feed(&mut a, &lines);
        let k = a.take_interval();
        assert_eq!(k.peak["fscrypt_read_queue"], 2);
        assert_eq!(k.queues["fscrypt_read_queue"].items, 3);
        // One at a time (max_active = 1): never two.
        let lines = [
            line("2.000000", "q", "dd", ""),
            line("2.000001", "q", "ee", ""),
            line("2.000010", "s", "dd", "kworker/u9:0-70"),
            line("2.000020", "e", "dd", "kworker/u9:0-70"),
            line("2.000030", "s", "ee", "kworker/u9:1-71"),
            line("2.000040", "e", "ee", "kworker/u9:1-71"),
        ];
        feed(&mut a, &lines);
        assert_eq!(a.take_interval().peak["fscrypt_read_queue"], 1);
        // An item whose end was lost with the ring buffer's overrun stops
        // counting a second on: starts two seconds later run alone.
        let lines = [
            line("3.000000", "q", "f1", ""),
            line("3.000010", "s", "f1", "kworker/u9:0-70"),
            "CPU:1 [LOST 1 EVENTS]".to_string(),
            // Within the second after the loss, f1 (maybe still running)
            // counts beside f2.
            line("3.500000", "q", "f2", ""),
            line("3.500010", "s", "f2", "kworker/u9:1-71"),
            line("3.500020", "e", "f2", "kworker/u9:1-71"),
        ];
        feed(&mut a, &lines);
        assert_eq!(a.take_interval().peak["fscrypt_read_queue"], 2);
        let lines = [
            line("5.000000", "q", "f3", ""),
            line("5.000010", "s", "f3", "kworker/u9:1-71"),
            line("5.000020", "e", "f3", "kworker/u9:1-71"),
            line("5.000030", "q", "f4", ""),
            line("5.000040", "s", "f4", "kworker/u9:1-71"),
            line("5.000050", "e", "f4", "kworker/u9:1-71"),
        ];
        feed(&mut a, &lines);
        let k = a.take_interval();
        assert_eq!(
            k.peak["fscrypt_read_queue"], 1,
            "f1's lost end is not counted"
        );
    }

    #[test]
    fn an_interval_is_cut_at_its_end_by_the_events_own_times() {
        let line = |t: &str, ev: &str, w: &str| match ev {
            "q" => format!(
                "  kworker/1:1H-88 [001] d..1. {t}: workqueue_queue_work: work struct={w} function=verity_work workqueue=fsverity_read_queue req_cpu=8192 cpu=1"
            ),
            "s" => format!(
                "  kworker/1:2H-99 [001] ..... {t}: workqueue_execute_start: work struct {w}: function verity_work"
            ),
            _ => format!(
                "  kworker/1:2H-99 [001] ..... {t}: workqueue_execute_end: work struct {w}: function verity_work"
            ),
        };
        let mut a = Aggregator::with_nice(|_| true);
        // aa ends before the interval's end (20 s), bb after it.
        let first = [
            line("19.000000", "q", "aa"),
            line("19.500000", "s", "aa"),
            line("19.600000", "e", "aa"),
            line("19.900000", "q", "bb"),
        ];
        let first: Vec<&str> = first.iter().map(String::as_str).collect();
        feed(&mut a, &first);
        assert_eq!(a.read_to_ns(), 19_900_000_000);
        // The interval closes at 20 s; the reader had read to 19.9 s.
        a.cut_at(20_000_000_000);
        // Read while it closes: bb ran from 20.1 s, after the end.
        let late = [line("20.100000", "s", "bb"), line("20.200000", "e", "bb")];
        let late: Vec<&str> = late.iter().map(String::as_str).collect();
        feed(&mut a, &late);
        let one = a.take_with(KernelInterval::default());
        assert_eq!(one.queues["fsverity_read_queue"].items, 1, "aa only");
        assert_eq!(one.peak["fsverity_read_queue"], 1);
        assert_eq!(one.kworkers, HashMap::from([(99, 1)]));
        assert_eq!(one.lag_ns, 0, "it had read past the end");
        // bb counts in the next interval, where it ended.
        let two = a.take_interval();
        assert_eq!(two.queues["fsverity_read_queue"].items, 1, "bb");
        assert_eq!(two.kworkers, HashMap::from([(99, 1)]));
        // A reader behind the end: its lag is said, and what it has not
        // read yet counts in the next interval.
        let behind = [line("21.000000", "q", "cc")];
        let behind: Vec<&str> = behind.iter().map(String::as_str).collect();
        feed(&mut a, &behind);
        a.cut_at(23_000_000_000);
        let three = a.take_with(KernelInterval::default());
        assert!(three.queues.is_empty());
        assert_eq!(three.lag_ns, 2_000_000_000);
        let late = [line("22.000000", "s", "cc"), line("22.500000", "e", "cc")];
        let late: Vec<&str> = late.iter().map(String::as_str).collect();
        feed(&mut a, &late);
        assert_eq!(a.take_interval().queues["fsverity_read_queue"].items, 1);
    }

    #[test]
    fn items_never_started_do_not_grow_the_maps_forever() {
        let mut a = Aggregator::default();
        let sec = 1_000_000_000u64;
        // Old items whose start was lost, then as many again 20 s later.
        for i in 0..MAX_IN_FLIGHT as u64 {
            a.add(&Event::Queue {
                cpu: 0,
                t_ns: sec + i,
                work: i,
                queue: "fscrypt_read_queue",
                unbound: true,
            });
        }
        assert_eq!(a.in_flight().0, MAX_IN_FLIGHT);
        for i in 0..(MAX_IN_FLIGHT as u64) * 3 {
            a.add(&Event::Queue {
                cpu: 0,
                t_ns: 21 * sec + i,
                work: (1 << 40) + i,
                queue: "fscrypt_read_queue",
                unbound: true,
            });
            assert!(a.in_flight().0 <= MAX_IN_FLIGHT);
        }
        let i = a.take_interval();
        assert!(i.lost >= 3 * MAX_IN_FLIGHT as u64, "{}", i.lost);
        assert_eq!(i.lost + a.in_flight().0 as u64, 4 * MAX_IN_FLIGHT as u64);
    }
}
