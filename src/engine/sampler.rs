//! The sampler thread: once per interval it hands every pipeline thread a
//! fresh recorder, reads the workers' and kworkers' scheduler counters,
//! /proc/stat and the process's CPU time, takes the kernel target's trace,
//! and publishes one [`IntervalRecord`]; at the end it returns the run's
//! totals. Apart from the engine's lifecycle because it runs on its own
//! thread and shares only [`Shared`] with the rest.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::time::Duration;

use crate::metrics::{
    IntervalRecord, ReadersIowait, Recorder, Role, Timeline, TimelineThread, WorkerSched, now_ns,
};
use crate::sys::{ThreadCounters, ThreadStatReader};

use super::{MAX_PHASES, Phase, RunTotals, Shared, pagecache};

/// True for an event that is a live change of a setting (`key: a -> b`),
/// not a marker (baseline, drop cache, pause).
fn is_setting_change(label: &str) -> bool {
    label
        .split_once(": ")
        .is_some_and(|(key, rest)| key.contains('.') && !key.contains(' ') && rest.contains(" -> "))
}

/// Page hits and misses of one interval's `read` pages, counted the same
/// way on both targets: each page `added` to the file's cache (read from
/// the device: the model's bios' pages, the kernel's
/// `mm_filemap_add_to_page_cache` events) is a miss of a page read, the
/// other pages read are hits. Pages added ahead of the reads (readahead
/// past the interval's last read) count when pages are read: carried
/// over, at most one file's worth. Readahead never read stays a miss for
/// later reads, as the kernel's count has it. Returns (hits, misses).
fn page_hits(read: u64, added: u64, carry: &mut u64, file_pages: u64) -> (u64, u64) {
    let added = added + *carry;
    let misses = added.min(read);
    *carry = (added - misses).min(file_pages);
    (read - misses, misses)
}

/// Takes the kernel target's trace of one interval into the interval's
/// recorder (device latency from the block tracepoints in place of the
/// reader's, queue latency of every post-read queue, fscrypt's and
/// blk-crypto's execution as decryption, fsverity's as verification), the
/// run_delay of the kworkers that ran those items into `ws`, and the run
/// totals; returns the interval's kernel record. The interval is `seq`,
/// ending at `end_ns`; the trace's reader is waited for up to `wait`.
fn kernel_interval(
    (tracer, file, cgroup): &super::KernelShared,
    (seq, end_ns, wait): (u64, u64, Duration),
    carry: &mut u64,
    merged: &mut Recorder,
    ws: &mut WorkerSched,
    kworkers: &mut HashMap<i32, (SchedState, u64)>,
    totals: &mut RunTotals,
) -> crate::metrics::KernelRecord {
    use crate::metrics::{KernelQueueRecord, Percentiles, Stage};
    let page = crate::sys::page_size() as u64;
    let (tracer, cgroup) = (tracer.as_deref(), cgroup.as_deref());
    let cached_bytes =
        crate::sys::page_cache_residency(file).map_or(0, |r| r.resident_pages * page);
    // The cgroup's limit follows what else it is charged (one read and at
    // most one write of files held open).
    let (cache_limit_bytes, charged_bytes) = cgroup
        .and_then(|c| c.adjust(cached_bytes).ok())
        .unwrap_or((0, 0));
    // Not traced: the reader's own figures stand (the device stage is
    // then the whole read, as for a raw read).
    let Some(tracer) = tracer else {
        return crate::metrics::KernelRecord {
            untraced: true,
            cached_bytes,
            cache_limit_bytes,
            charged_bytes,
            ..Default::default()
        };
    };
    let mut k = tracer.take_interval_at(end_ns, wait);
    // While tracing, the kworkers' items as spans, with the readers'.
    for s in k.spans.drain(..) {
        merged.spans.push(s);
    }
    // The kernel's page hits and misses of the pages the readers read
    // (`page_hits`): its pages added to the file's cache are its
    // `mm_filemap_add_to_page_cache` events. O_DIRECT reads
    // (`workload.direct`) bypass the cache: neither hits nor misses.
    let buffered = !crate::sys::opened_direct(std::os::fd::AsRawFd::as_raw_fd(&**file));
    if let Some(adds) = k.cache_adds.filter(|_| buffered) {
        let read = merged.counters.bytes.div_ceil(page);
        let file_pages = file.metadata().map_or(0, |m| m.len().div_ceil(page));
        let (hits, misses) = page_hits(read, adds, carry, file_pages);
        merged.counters.pc_misses += misses;
        merged.counters.pc_hits += hits;
    } else {
        *carry = 0;
    }
    merged.add_samples(Stage::Device, &k.device_ns, true);
    merged.counters.bios += k.requests;
    let mut queues = Vec::new();
    for name in crate::kernel::trace::POST_READ_QUEUES {
        let Some(q) = k.queues.get(*name) else {
            continue;
        };
        merged.add_samples(Stage::Queue, &q.queue_ns, false);
        let stage = if *name == "fsverity_read_queue" {
            Stage::Verify
        } else {
            Stage::Decrypt
        };
        merged.add_samples(stage, &q.exec_ns, false);
        merged.counters.items_run += q.items;
        merged.counters.items_moved += q.moved.min(q.items);
        merged.counters.items_unbound += q.unbound.min(q.items);
        merged.counters.items_highpri += q.highpri.min(q.items);
        queues.push(KernelQueueRecord {
            queue: name.to_string(),
            items: q.items,
            queue_us: Percentiles::of(&q.queue_ns),
            exec_us: Percentiles::of(&q.exec_ns),
            peak_running: k.peak.get(*name).copied().unwrap_or(0),
            moved_pct: if q.items > 0 {
                (q.moved as f64 * 100.0 / q.items as f64).min(100.0)
            } else {
                0.0
            },
        });
        match totals.kernel.get_mut(*name) {
            Some(t) => {
                t.items += q.items;
                t.moved += q.moved;
                t.unbound += q.unbound;
                t.highpri += q.highpri;
                let _ = t.queue_ns.add(&q.queue_ns);
                let _ = t.exec_ns.add(&q.exec_ns);
            }
            None => {
                totals.kernel.insert(name.to_string(), q.clone());
            }
        }
    }
    // Each kworker's counters are read every interval while it is
    // followed; its delta counts in the intervals it ran a post-read item.
    for &tid in k.kworkers.keys() {
        if let std::collections::hash_map::Entry::Vacant(v) = kworkers.entry(tid)
            && let Ok(mut r) = ThreadStatReader::open_global(tid)
        {
            let last = r.read().unwrap_or_default();
            v.insert((
                SchedState {
                    reader: Some(r),
                    last,
                },
                seq,
            ));
        }
    }
    kworkers.retain(|tid, (st, seen)| {
        let Some(now) = st.reader.as_mut().and_then(|r| r.read().ok()) else {
            return false; // the kworker exited
        };
        let d = now.delta(&st.last);
        st.last = now;
        if k.kworkers.contains_key(tid) {
            *seen = seq;
            add_thread(ws, &d);
        }
        // Followed for 40 intervals after its last item.
        seq.saturating_sub(*seen) < 40
    });
    crate::metrics::KernelRecord {
        queues,
        untraced: false,
        kworkers: k.kworkers.len() as u32,
        requests: k.requests,
        lost: k.lost,
        trace_lag_ms: k.lag_ns as f64 / 1e6,
        cached_bytes,
        cache_limit_bytes,
        charged_bytes,
    }
}

/// Adds one thread's counters over an interval to a group's.
fn add_thread(to: &mut WorkerSched, d: &ThreadCounters) {
    to.threads += 1;
    to.run_delay_us += d.run_delay_ns as f64 / 1e3;
    to.cpu_us += d.cpu_ns as f64 / 1e3;
    to.voluntary_switches += d.voluntary_ctxt_switches;
    to.involuntary_switches += d.nonvoluntary_ctxt_switches;
    to.migrations += d.migrations;
}

struct SchedState {
    reader: Option<ThreadStatReader>,
    last: ThreadCounters,
}

/// Most kernel thread names the sampler keeps (past it, it forgets them
/// all and reads them again).
const MAX_KERNEL_NAMES: usize = 4096;

/// The sampler's state between intervals.
struct Sampler {
    shared: Arc<Shared>,
    interval_ns: u64,
    totals: RunTotals,
    /// The settings phase being recorded.
    phase: Phase,
    /// This interval's recorders, merged.
    merged: Recorder,
    /// The threads the interval's timeline names (while tracing).
    threads: Vec<TimelineThread>,
    /// The kernel's threads that ran post-read items (kworkers), by TID:
    /// their names, read once each from `/proc` while tracing.
    kernel_names: HashMap<i32, String>,
    /// The kworkers the kernel's tracepoints named, with the interval they
    /// last ran a post-read item.
    kworkers: HashMap<i32, (SchedState, u64)>,
    /// Pages added to the file's cache (either target's) not yet matched
    /// by pages read (their misses counted when pages are read).
    page_carry: u64,
    /// The kernel's trace has lost events (said once, in a notice).
    lost_noticed: bool,
    /// The kernel's trace was read later than an interval (said once).
    lag_noticed: bool,
    /// Workers' and irq threads' scheduler counters, by TID.
    sched: HashMap<i32, SchedState>,
    stat: Option<crate::sys::ProcStatReader>,
    prev_cpu: Vec<crate::sys::CpuTimes>,
    now_cpu: Vec<crate::sys::CpuTimes>,
    prev_proc: u64,
    last_tick: u64,
    next: u64,
    seq: u64,
    run_delay_total: f64,
    cpu_ns_total: u64,
    start: u64,
}

/// The sampler thread's body: one record per interval on `tx` until the
/// engine asks it to stop (a last record then), and the run's totals.
pub(super) fn sampler_main(
    shared: Arc<Shared>,
    interval: Duration,
    tx: Sender<IntervalRecord>,
) -> RunTotals {
    *shared
        .sampler_thread
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current());
    let mut s = Sampler::new(shared, interval);
    loop {
        let stop = s.wait_tick();
        let rec = s.interval();
        let _ = tx.send(rec);
        if stop {
            break;
        }
        s.next += s.interval_ns;
        if s.next <= now_ns() {
            s.next = now_ns() + s.interval_ns;
        }
    }
    s.finish()
}

impl Sampler {
    fn new(shared: Arc<Shared>, interval: Duration) -> Sampler {
        let totals = RunTotals {
            rec: Recorder::new(),
            workers: WorkerSched::default(),
            irq: WorkerSched::default(),
            duration_s: 0.0,
            notices: Vec::new(),
            events: Vec::new(),
            intervals: 0,
            process_cpu_pct: 0.0,
            page_cache_bytes: 0,
            pools: Vec::new(),
            kernel: Default::default(),
            kernel_scope: None,
            phases: Vec::new(),
        };
        let mut stat = crate::sys::ProcStatReader::open().ok();
        let mut prev_cpu = Vec::new();
        if let Some(s) = stat.as_mut() {
            let _ = s.read(&mut prev_cpu);
        }
        let prev_proc = crate::sys::process_cpu_time_ns();
        let last_tick = now_ns();
        let interval_ns = interval.as_nanos() as u64;
        Sampler {
            shared,
            interval_ns,
            totals,
            phase: Phase::new(0.0, Vec::new()),
            merged: Recorder::for_interval(),
            threads: Vec::new(),
            kernel_names: HashMap::new(),
            kworkers: HashMap::new(),
            page_carry: 0,
            lost_noticed: false,
            lag_noticed: false,
            sched: HashMap::new(),
            stat,
            prev_cpu,
            now_cpu: Vec::new(),
            prev_proc,
            last_tick,
            next: last_tick + interval_ns,
            seq: 0,
            run_delay_total: 0.0,
            cpu_ns_total: 0,
            start: last_tick,
        }
    }

    /// Sleeps until the next tick; true when the engine asked the sampler
    /// to stop first (the interval so far is still recorded).
    fn wait_tick(&self) -> bool {
        loop {
            if self.shared.sampler_stop.load(Ordering::SeqCst) {
                return true;
            }
            let now = now_ns();
            if now >= self.next {
                return false;
            }
            std::thread::park_timeout(Duration::from_nanos(self.next - now));
        }
    }

    /// Closes one interval: collects the threads' recorders and scheduler
    /// counters and the kernel's trace, and returns its record (already
    /// added to the totals).
    fn interval(&mut self) -> IntervalRecord {
        // The interval's end: the kernel's events are counted by their
        // own times up to here.
        let end_ns = now_ns();
        let was_running = self.shared.running.load(Ordering::SeqCst);
        let (mut ws, irq, readers_iowait) = self.collect_threads();
        let kernel = self
            .shared
            .kernel
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let kernel_rec = kernel.map(|k| {
            kernel_interval(
                &k,
                (
                    self.seq,
                    end_ns,
                    Duration::from_nanos(self.interval_ns / 4).min(Duration::from_millis(100)),
                ),
                &mut self.page_carry,
                &mut self.merged,
                &mut ws,
                &mut self.kworkers,
                &mut self.totals,
            )
        });
        if let Some(k) = kernel_rec
            .as_ref()
            .filter(|k| k.lost > 0 && !self.lost_noticed)
        {
            self.lost_noticed = true;
            super::NoticeSink(self.shared.clone()).push(format!(
                "kernel target: tracefs dropped {} trace events (the tracer fell behind): the kernel's queue and item figures are partial where a record's kernel.lost is not 0",
                k.lost
            ));
        }
        let interval_ms = self.interval_ns as f64 / 1e6;
        if let Some(k) = kernel_rec
            .as_ref()
            .filter(|k| k.trace_lag_ms > interval_ms && !self.lag_noticed)
        {
            self.lag_noticed = true;
            super::NoticeSink(self.shared.clone()).push(format!(
                "kernel target: readpath's reader of the kernel's trace fell {:.1} s behind its events (a loaded machine, or a debug build): each interval counts the items that ended in it by their own times, but those of its last {:.1} s were read too late and count in the next one (kernel.trace_lag_ms in each record)",
                k.trace_lag_ms / 1e3,
                k.trace_lag_ms / 1e3
            ));
        }
        if kernel_rec.is_none() {
            // The model's page cache, counted as the kernel's is.
            let pc = self
                .shared
                .pcache
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if let Some(pc) = pc {
                let page = pagecache::PAGE as u64;
                let c = &mut self.merged.counters;
                let (hits, misses) = page_hits(
                    c.bytes.div_ceil(page),
                    c.bio_bytes / page,
                    &mut self.page_carry,
                    pc.file_pages() as u64,
                );
                c.pc_hits += hits;
                c.pc_misses += misses;
            } else {
                self.page_carry = 0;
            }
        }
        self.run_delay_total += ws.run_delay_us;
        self.totals.workers.add(&ws);
        self.totals.irq.add(&irq);

        let now = now_ns();
        let interval_s = (now - self.last_tick) as f64 / 1e9;
        self.last_tick = now;
        let shared = self.shared.clone();
        let mut rec = IntervalRecord {
            seq: self.seq,
            t_s: (now - shared.start_ns) as f64 / 1e9,
            paused: !was_running && self.merged.is_empty(),
            ..Default::default()
        };
        rec.page_cache.size_bytes = shared
            .pcache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |pc| (pc.resident() * pagecache::PAGE) as u64);
        rec.pools = pool_records(&shared);
        if let Some(k) = &kernel_rec {
            rec.page_cache.size_bytes = k.cached_bytes;
        }
        rec.fill_from(&self.merged, interval_s);
        if crate::metrics::tracing() || !self.merged.spans.is_empty() {
            let mut threads = std::mem::take(&mut self.threads);
            self.name_kernel_threads(&mut threads);
            rec.timeline = Some(Timeline::of(&self.merged.spans, shared.start_ns, threads));
        }
        rec.kernel = kernel_rec;
        rec.workers = ws;
        rec.irq = irq;
        rec.readers_iowait = readers_iowait;
        rec.run_delay_us_total = self.run_delay_total;
        self.host_usage(&mut rec, interval_s);
        rec.events = std::mem::take(&mut *shared.events.lock().unwrap_or_else(|e| e.into_inner()));
        rec.notices =
            std::mem::take(&mut *shared.notices.lock().unwrap_or_else(|e| e.into_inner()));
        self.account(&rec, interval_s);
        self.seq += 1;
        rec
    }

    /// The handoff: every thread swaps its recorder at its next safe
    /// point; their recorders are merged into `merged`, and the workers'
    /// and irq threads' scheduler counters over the interval returned, with
    /// the readers' sleeps in iowait where the kernel counts them.
    fn collect_threads(&mut self) -> (WorkerSched, WorkerSched, Option<ReadersIowait>) {
        let reg = self.shared.registry.clone();
        let epoch = reg.bump_epoch();
        let slots = reg.slots();
        // A thread parked idle published everything before it parked:
        // it is not woken (the workload would not have woken it).
        // A hog publishes when it runs: it is not waited for (at a high
        // nice it may not run for a while), what it recorded since comes
        // with the next interval.
        let done = |s: &crate::metrics::ThreadSlot| {
            s.role == Role::Hog || !s.is_alive() || s.is_parked() || s.has_seen(epoch)
        };
        for s in slots.iter().filter(|s| !done(s)) {
            s.unpark();
        }
        let deadline = now_ns() + (self.interval_ns / 4).min(50_000_000);
        while now_ns() < deadline && !slots.iter().all(|s| done(s)) {
            std::thread::sleep(Duration::from_micros(200));
        }
        // Threads already dead now have published everything: collect them
        // once more below, then drop them.
        let dead: Vec<_> = slots.iter().filter(|s| !s.is_alive()).cloned().collect();
        self.merged.reset();
        for s in &slots {
            s.collect(&mut self.merged);
            // A thread parked idle: what it recorded before it parked.
            s.collect_live(&mut self.merged);
        }
        // Workers' scheduler counters, and the irq threads' apart; the
        // readers' iowait.
        let mut ws = WorkerSched::default();
        let mut irq = WorkerSched::default();
        let mut iowait: Option<u64> = None;
        for s in slots
            .iter()
            .filter(|s| matches!(s.role, Role::Worker | Role::Irq | Role::Reader))
        {
            let st = self.sched.entry(s.tid).or_insert_with(|| SchedState {
                reader: ThreadStatReader::open(s.tid).ok().map(|r| match s.role {
                    Role::Reader => r.with_iowait(),
                    _ => r,
                }),
                last: ThreadCounters::default(),
            });
            let now = if s.is_alive() {
                st.reader.as_mut().and_then(|r| r.read().ok())
            } else {
                s.final_sched()
            };
            if let Some(now) = now {
                let d = now.delta(&st.last);
                st.last = now;
                if s.role == Role::Reader {
                    if let Some(ns) = d.iowait_ns {
                        *iowait.get_or_insert(0) += ns;
                    }
                    continue;
                }
                let to = if s.role == Role::Irq {
                    &mut irq
                } else {
                    &mut ws
                };
                add_thread(to, &d);
            }
        }
        if crate::metrics::tracing() || !self.merged.spans.is_empty() {
            self.threads.clear();
            self.threads.extend(slots.iter().map(|s| TimelineThread {
                tid: s.tid,
                name: s.name.clone(),
                role: s.role,
            }));
        }
        for s in &dead {
            self.sched.remove(&s.tid);
        }
        reg.prune(&dead);
        let iowait = iowait.map(|ns| ReadersIowait {
            ms: ns as f64 / 1e6,
        });
        (ws, irq, iowait)
    }

    /// The machine's per-CPU usage and the process's CPU and memory over
    /// the interval, into `rec`.
    /// Adds to `threads` the kernel's threads this interval's items ran on
    /// (the kernel target's kworkers: a span's TID that is none of
    /// readpath's threads), each named as `/proc` names it
    /// (`kworker/1:1H-fsverity_read_queue`: bound to CPU 1, high priority),
    /// read once per thread; one gone before it was read is named by its
    /// TID. At most [`MAX_KERNEL_NAMES`] are kept.
    fn name_kernel_threads(&mut self, threads: &mut Vec<TimelineThread>) {
        let ours: std::collections::HashSet<i32> = threads.iter().map(|t| t.tid).collect();
        let mut seen = std::collections::HashSet::new();
        for s in self.merged.spans.spans() {
            if !s.kind.is_item() || ours.contains(&s.tid) || !seen.insert(s.tid) {
                continue;
            }
            if self.kernel_names.len() >= MAX_KERNEL_NAMES {
                self.kernel_names.clear();
            }
            let name = self
                .kernel_names
                .entry(s.tid)
                .or_insert_with(|| {
                    crate::sys::thread_comm(s.tid).unwrap_or_else(|| format!("tid {}", s.tid))
                })
                .clone();
            threads.push(TimelineThread {
                tid: s.tid,
                name,
                role: Role::Worker,
            });
        }
    }

    fn host_usage(&mut self, rec: &mut IntervalRecord, interval_s: f64) {
        if let Some(s) = self.stat.as_mut()
            && s.read(&mut self.now_cpu).is_ok()
        {
            crate::sys::cpu_usage(&self.prev_cpu, &self.now_cpu, &mut rec.cpus);
            std::mem::swap(&mut self.prev_cpu, &mut self.now_cpu);
        }
        let proc_now = crate::sys::process_cpu_time_ns();
        let dproc = proc_now.saturating_sub(self.prev_proc);
        self.cpu_ns_total += dproc;
        self.prev_proc = proc_now;
        rec.process_cpu_pct = dproc as f64 / 1e9 / interval_s.max(1e-9) * 100.0;
        rec.rss_bytes = crate::sys::process_rss_bytes();
    }

    /// Adds the interval's record to the run's totals and settings phases.
    fn account(&mut self, rec: &IntervalRecord, interval_s: f64) {
        let totals = &mut self.totals;
        for p in &rec.pools {
            match totals
                .pools
                .iter_mut()
                .find(|t| t.queue == p.queue && t.kind == p.kind)
            {
                Some(t) => {
                    let peak = t.blocked_peak.max(p.blocked_peak);
                    *t = p.clone();
                    t.blocked_peak = peak;
                }
                None => totals.pools.push(p.clone()),
            }
        }
        totals.rec.merge(&self.merged);
        if !rec.paused {
            totals.duration_s += interval_s;
        }
        // Settings phases: an interval holding a change starts a new one
        // and belongs to neither.
        let changes: Vec<String> = rec
            .events
            .iter()
            .filter(|e| is_setting_change(&e.label))
            .map(|e| e.label.clone())
            .collect();
        if changes.is_empty() {
            if !rec.paused {
                self.phase.rec.merge(&self.merged);
                self.phase.secs += interval_s;
                self.phase.run_delay_us += rec.workers.run_delay_us;
            }
        } else if totals.phases.len() + 1 < MAX_PHASES {
            let start = rec.events.iter().map(|e| e.t_s).fold(rec.t_s, f64::min);
            totals.phases.push(std::mem::replace(
                &mut self.phase,
                Phase::new(start, changes),
            ));
        } else {
            self.phase.changes.extend(changes);
        }
        totals.events.extend(rec.events.iter().cloned());
        totals.notices.extend(rec.notices.iter().cloned());
        totals.intervals += 1;
    }

    /// The run's totals, the last phase closed.
    fn finish(mut self) -> RunTotals {
        self.totals.phases.push(self.phase);
        let elapsed = (now_ns() - self.start) as f64 / 1e9;
        self.totals.process_cpu_pct = self.cpu_ns_total as f64 / 1e9 / elapsed.max(1e-9) * 100.0;
        self.totals
    }
}

/// Each queue's worker pool as it is now.
fn pool_records(shared: &Shared) -> Vec<crate::metrics::PoolRecord> {
    shared
        .pools
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(name, kind, qs)| {
            let mut p = crate::metrics::PoolRecord {
                queue: name.to_string(),
                kind: kind.to_string(),
                ..Default::default()
            };
            for q in qs {
                let st = q.state();
                p.workers += st.workers as u32;
                p.running += st.running as u32;
                p.blocked += st.blocked as u32;
                p.blocked_peak += st.blocked_peak as u32;
                p.pending += st.pending as u64;
                p.created += st.created as u32;
                p.cpu_intensive += st.cpu_intensive;
                p.deferred += st.deferred;
                p.repatriated += st.repatriated;
            }
            p
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn pages_added_are_the_misses_of_pages_read_carried_until_read() {
        let mut carry = 0;
        // Readahead brought 12 pages for 10 read: 10 misses, 2 carried.
        assert_eq!(super::page_hits(10, 12, &mut carry, 100), (0, 10));
        assert_eq!(carry, 2);
        // The next 10 reads: the 2 carried are misses, 8 hits.
        assert_eq!(super::page_hits(10, 0, &mut carry, 100), (8, 2));
        assert_eq!(carry, 0);
        // Never more carried than one file's pages.
        super::page_hits(0, 500, &mut carry, 100);
        assert_eq!(carry, 100);
    }

    #[test]
    fn only_setting_changes_start_a_phase() {
        assert!(super::is_setting_change("workers.mode: unbound -> bound"));
        assert!(super::is_setting_change(
            "kernel.affinity_scope: default -> cpu"
        ));
        for l in [
            "baseline",
            "drop cache (cold start)",
            "paused",
            "preset default",
            "x: a",
        ] {
            assert!(!super::is_setting_change(l), "{l}");
        }
    }
}
