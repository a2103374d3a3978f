//! Measurement: per-thread recorders, the once-per-interval handoff, and the
//! interval record every consumer reads.
//!
//! The hot path (one read) must not allocate, lock or send on a channel, so
//! each reader and worker thread records into its own [`Recorder`] (plain
//! histograms and counters it owns). Once per interval the sampler bumps a
//! global epoch; each thread notices at its next safe point (after a read, or
//! when woken from sleep) and swaps its recorder with the pre-allocated spare
//! in its [`ThreadSlot`] mailbox: one uncontended lock per interval per
//! thread. The sampler then merges the mailboxes into an [`IntervalRecord`],
//! the one immutable, serde-serializable snapshot that the headless runner,
//! the TUI, experiments and recordings all consume.

pub mod window;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest latency a histogram records exactly (ns); larger values saturate.
pub const MAX_LATENCY_NS: u64 = 100_000_000_000;
/// Significant figures of every latency histogram (0.1% resolution).
pub const SIGFIG: u8 = 3;
/// Buckets per octave of [`LatencyBuckets`] (the TUI's distribution chart).
pub const BUCKETS_PER_OCTAVE: usize = 4;
/// Lowest bucket edge of [`LatencyBuckets`], in ns.
pub const BUCKET_BASE_NS: f64 = 1_000.0;
/// Number of buckets of [`LatencyBuckets`]: 1 us .. ~16 s.
pub const BUCKET_COUNT: usize = 24 * BUCKETS_PER_OCTAVE;

/// Monotonic clock in ns (CLOCK_MONOTONIC, a vDSO call: ~20 ns).
#[inline]
pub fn now_ns() -> u64 {
    crate::sys::monotonic_ns()
}

static RECORDING: AtomicBool = AtomicBool::new(true);

/// Turns latency recording on or off for the whole process (a benchmark
/// switch: `readpath run --no-latency` measures what recording costs).
/// Off, [`stamp`] returns 0 without reading the clock and
/// [`Recorder::record`] does nothing; counters (reads, bytes) still count.
pub fn set_recording(on: bool) {
    RECORDING.store(on, Ordering::Relaxed);
}

/// Whether latencies are recorded.
#[inline]
pub fn recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// A timestamp for latency measurement: [`now_ns`], or 0 when recording is
/// off (no clock read).
#[inline]
pub fn stamp() -> u64 {
    if recording() { now_ns() } else { 0 }
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, SIGFIG)
        .expect("static histogram bounds are valid")
}

/// The pipeline stages a read goes through, each with its own histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Issue (or intended issue, when rate limited) until decrypted and verified.
    EndToEnd,
    /// Handed to the kernel (after the submitting `io_uring_enter` returned,
    /// as fio's clat; the start of the `pread` for sync reads) until the
    /// completion was reaped by the reader thread.
    Device,
    /// Enqueued on a workqueue until a worker started it (all queues summed).
    Queue,
    /// Time spent decrypting.
    Decrypt,
    /// Time spent verifying (hashing, tree walk).
    Verify,
}

impl Stage {
    /// All stages, in pipeline order after the end-to-end total.
    pub const ALL: [Stage; 5] = [
        Stage::EndToEnd,
        Stage::Device,
        Stage::Queue,
        Stage::Decrypt,
        Stage::Verify,
    ];
}

/// Plain counters a thread accumulates between two handoffs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counters {
    /// Reads completed, decrypted and verified as requested (good data).
    pub reads: u64,
    /// Bytes of good reads.
    pub bytes: u64,
    /// Reads that failed verification (never counted as good data).
    pub verity_failures: u64,
    /// Reads that failed at the device (short read or error).
    pub io_errors: u64,
    /// Data units decrypted.
    pub decrypted_units: u64,
    /// Data blocks verified against the Merkle tree (good or bad).
    pub verified_blocks: u64,
    /// SHA-256 computations done by verification.
    pub hashes: u64,
    /// Verifications whose leaf hash block was already verified (only the
    /// data block was hashed).
    pub cache_hits: u64,
    /// Verifications that had to hash and verify at least one tree block.
    pub cache_misses: u64,
    /// Buffers corrupted on purpose (`pipeline.corrupt_every`).
    pub corrupted: u64,
    /// Page-cache pages an application read found uptodate (a copy).
    pub pc_hits: u64,
    /// Page-cache pages an application read did not find uptodate.
    pub pc_misses: u64,
    /// Bios read for page-cache misses (each decrypted and verified whole).
    pub bios: u64,
    /// Bytes of those bios.
    pub bio_bytes: u64,
    /// Bios started by async readahead (the marked page was reached).
    pub readahead_async: u64,
    /// fs-verity tree pages the verify workers read (missing from the cache).
    pub tree_pages_read: u64,
    /// Reads of tree pages (one `preadv` each, readahead included).
    pub tree_reads: u64,
    /// Times a verify worker waited for a tree page another was reading.
    pub tree_waits: u64,
    /// Nanoseconds verify workers spent blocked on the tree.
    pub tree_blocked_ns: u64,
    /// Tree reads decrypted on the decrypt queue (fscrypt's, as ext4 does)
    /// rather than by the verify worker that read them.
    pub tree_queued_decrypts: u64,
}

impl Counters {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &Counters) {
        self.reads += o.reads;
        self.bytes += o.bytes;
        self.verity_failures += o.verity_failures;
        self.io_errors += o.io_errors;
        self.decrypted_units += o.decrypted_units;
        self.verified_blocks += o.verified_blocks;
        self.hashes += o.hashes;
        self.cache_hits += o.cache_hits;
        self.cache_misses += o.cache_misses;
        self.corrupted += o.corrupted;
        self.pc_hits += o.pc_hits;
        self.pc_misses += o.pc_misses;
        self.bios += o.bios;
        self.bio_bytes += o.bio_bytes;
        self.readahead_async += o.readahead_async;
        self.tree_pages_read += o.tree_pages_read;
        self.tree_reads += o.tree_reads;
        self.tree_waits += o.tree_waits;
        self.tree_blocked_ns += o.tree_blocked_ns;
        self.tree_queued_decrypts += o.tree_queued_decrypts;
    }
}

/// One thread's measurements since its last handoff. Owned by the thread; no
/// method allocates once constructed.
pub struct Recorder {
    hists: [Histogram<u64>; 5],
    /// Counters (public: the pipeline bumps them directly).
    pub counters: Counters,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    /// Allocates the histograms (done once per thread, before the hot loop).
    pub fn new() -> Self {
        Recorder {
            hists: [new_hist(), new_hist(), new_hist(), new_hist(), new_hist()],
            counters: Counters::default(),
        }
    }

    /// Records one duration for a stage. No allocation; values above
    /// [`MAX_LATENCY_NS`] saturate.
    #[inline]
    pub fn record(&mut self, stage: Stage, ns: u64) {
        if recording() {
            self.hists[stage as usize].saturating_record(ns.max(1));
        }
    }

    /// The histogram of one stage.
    pub fn hist(&self, stage: Stage) -> &Histogram<u64> {
        &self.hists[stage as usize]
    }

    /// Adds the samples of a ns histogram of any bounds to one stage
    /// (values above [`MAX_LATENCY_NS`] saturate); `replace` empties the
    /// stage first. Used for what the kernel's tracepoints measured.
    pub fn add_samples(&mut self, stage: Stage, h: &Histogram<u64>, replace: bool) {
        let own = &mut self.hists[stage as usize];
        if replace {
            own.reset();
        }
        for v in h.iter_recorded() {
            own.saturating_record_n(v.value_iterated_to().max(1), v.count_at_value());
        }
    }

    /// Adds another recorder's content into this one (same bounds: no allocation).
    pub fn merge(&mut self, other: &Recorder) {
        for (a, b) in self.hists.iter_mut().zip(other.hists.iter()) {
            a.add(b).expect("histograms share bounds");
        }
        self.counters.add(&other.counters);
    }

    /// Empties the recorder, keeping its memory.
    pub fn reset(&mut self) {
        for h in &mut self.hists {
            h.reset();
        }
        self.counters = Counters::default();
    }

    /// True when nothing was recorded since the last reset.
    pub fn is_empty(&self) -> bool {
        self.counters == Counters::default() && self.hists.iter().all(|h| h.is_empty())
    }
}

/// What a registered thread does; decides which counters the sampler reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Issues reads and reaps completions.
    Reader,
    /// Serves a workqueue (decrypt and/or verify).
    Worker,
    /// Background CPU load.
    Hog,
    /// Stands for the interrupt context a device completion runs in.
    Irq,
}

struct Mailbox {
    rec: Recorder,
    pending: bool,
}

/// A thread's registration with the sampler: its mailbox and identity.
pub struct ThreadSlot {
    /// Thread name, as seen in `top -H`.
    pub name: String,
    /// What the thread does.
    pub role: Role,
    /// Kernel thread id (for /proc/self/task/TID).
    pub tid: i32,
    thread: Thread,
    mailbox: Mutex<Mailbox>,
    seen_epoch: AtomicU64,
    alive: AtomicBool,
    final_sched: Mutex<Option<crate::sys::ThreadCounters>>,
}

impl ThreadSlot {
    /// The thread's own last scheduler counters, stored just before it exits
    /// (its /proc entry disappears with it).
    pub fn set_final_sched(&self, c: crate::sys::ThreadCounters) {
        *self.final_sched.lock().unwrap_or_else(|e| e.into_inner()) = Some(c);
    }

    /// See [`ThreadSlot::set_final_sched`].
    pub fn final_sched(&self) -> Option<crate::sys::ThreadCounters> {
        *self.final_sched.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the thread if it is parked, so it reaches a safe point.
    pub fn unpark(&self) {
        self.thread.unpark();
    }

    /// False once the thread published its last data and exited its loop.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// True once the thread handed over its data for `epoch`.
    pub fn has_seen(&self, epoch: u64) -> bool {
        self.seen_epoch.load(Ordering::Acquire) >= epoch
    }

    /// Moves any published data into `into` (sampler side).
    pub fn collect(&self, into: &mut Recorder) {
        let mut mb = self.mailbox.lock().unwrap_or_else(|e| e.into_inner());
        if mb.pending {
            into.merge(&mb.rec);
            mb.rec.reset();
            mb.pending = false;
        }
    }
}

/// The sampler's side of the handoff: the epoch and the registered threads.
#[derive(Default)]
pub struct Registry {
    epoch: AtomicU64,
    slots: Mutex<Vec<Arc<ThreadSlot>>>,
}

impl Registry {
    /// Registers the calling thread and returns its thread-side handle.
    pub fn register(self: &Arc<Self>, role: Role) -> ThreadHandle {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("readpath").to_string();
        let epoch = self.epoch.load(Ordering::Acquire);
        let slot = Arc::new(ThreadSlot {
            name,
            role,
            tid: crate::sys::gettid(),
            thread,
            mailbox: Mutex::new(Mailbox {
                rec: Recorder::new(),
                pending: false,
            }),
            seen_epoch: AtomicU64::new(epoch),
            alive: AtomicBool::new(true),
            final_sched: Mutex::new(None),
        });
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(slot.clone());
        ThreadHandle {
            registry: self.clone(),
            slot,
            epoch,
            rec: Recorder::new(),
        }
    }

    /// Starts a new interval: threads hand over their data at their next safe point.
    pub fn bump_epoch(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// A snapshot of the registered threads.
    pub fn slots(&self) -> Vec<Arc<ThreadSlot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Drops the given slots: threads seen dead *before* their mailbox was
    /// last collected, so nothing they published is lost.
    pub fn prune(&self, dead: &[Arc<ThreadSlot>]) {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|s| !dead.iter().any(|d| Arc::ptr_eq(d, s)));
    }
}

/// A thread's side of the handoff: its live recorder plus its mailbox.
pub struct ThreadHandle {
    registry: Arc<Registry>,
    slot: Arc<ThreadSlot>,
    epoch: u64,
    /// The live recorder the thread writes into.
    pub rec: Recorder,
}

impl ThreadHandle {
    /// The safe point: one relaxed atomic load, and once per interval the swap.
    #[inline]
    pub fn tick(&mut self) {
        let e = self.registry.epoch.load(Ordering::Acquire);
        if e != self.epoch {
            self.publish(e);
        }
    }

    #[cold]
    fn publish(&mut self, epoch: u64) {
        {
            let mut mb = self.slot.mailbox.lock().unwrap_or_else(|e| e.into_inner());
            if mb.pending {
                mb.rec.merge(&self.rec);
                self.rec.reset();
            } else {
                std::mem::swap(&mut mb.rec, &mut self.rec);
                mb.pending = true;
            }
        }
        self.epoch = epoch;
        self.slot.seen_epoch.store(epoch, Ordering::Release);
    }

    /// The thread's slot (tid, name).
    pub fn slot(&self) -> &Arc<ThreadSlot> {
        &self.slot
    }
}

impl Drop for ThreadHandle {
    fn drop(&mut self) {
        // Publish everything recorded so far, then mark the slot dead.
        let e = self.registry.epoch.load(Ordering::Acquire);
        self.publish(e);
        self.slot.alive.store(false, Ordering::Release);
    }
}

/// Percentiles of one histogram, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Number of samples.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest sample.
    pub max: f64,
}

impl Percentiles {
    /// Percentiles of a ns histogram, converted to us.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Percentiles::default();
        }
        let us = |ns: u64| ns as f64 / 1_000.0;
        Percentiles {
            count: h.len(),
            mean: h.mean() / 1_000.0,
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

/// Percentiles of every stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StagePercentiles {
    /// Issue until reaped.
    pub device: Percentiles,
    /// Waiting on workqueues (the "workqueue scheduler latency").
    pub queue: Percentiles,
    /// Decryption.
    pub decrypt: Percentiles,
    /// Verification.
    pub verify: Percentiles,
}

impl StagePercentiles {
    /// Percentiles of each stage of a recorder.
    pub fn of(r: &Recorder) -> Self {
        StagePercentiles {
            device: Percentiles::of(r.hist(Stage::Device)),
            queue: Percentiles::of(r.hist(Stage::Queue)),
            decrypt: Percentiles::of(r.hist(Stage::Decrypt)),
            verify: Percentiles::of(r.hist(Stage::Verify)),
        }
    }
}

/// End-to-end latency distribution over log-spaced buckets
/// ([`BUCKETS_PER_OCTAVE`] per octave from [`BUCKET_BASE_NS`]); the first
/// bucket also holds everything faster, the last everything slower.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyBuckets {
    /// Sample counts, [`BUCKET_COUNT`] entries (empty when nothing was recorded).
    pub counts: Vec<u64>,
}

impl LatencyBuckets {
    /// Lower edge of bucket `i`, in us.
    pub fn lower_edge_us(i: usize) -> f64 {
        BUCKET_BASE_NS * 2f64.powf(i as f64 / BUCKETS_PER_OCTAVE as f64) / 1_000.0
    }

    /// Bins a ns histogram.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencyBuckets::default();
        }
        let mut counts = vec![0u64; BUCKET_COUNT];
        for v in h.iter_recorded() {
            let ns = h.median_equivalent(v.value_iterated_to()) as f64;
            let idx = if ns <= BUCKET_BASE_NS {
                0
            } else {
                ((ns / BUCKET_BASE_NS).log2() * BUCKETS_PER_OCTAVE as f64) as usize
            };
            counts[idx.min(BUCKET_COUNT - 1)] += v.count_at_value();
        }
        LatencyBuckets { counts }
    }

    /// Adds another distribution into this one.
    pub fn add(&mut self, o: &LatencyBuckets) {
        if o.counts.is_empty() {
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKET_COUNT];
        }
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
    }
}

/// A latency histogram's non-empty buckets as `[value_ns, count]` pairs,
/// each value the highest equivalent of its hdrhistogram bucket. It keeps the
/// record's full 3-significant-digit resolution in a few hundred pairs, so a
/// consumer can merge any window of intervals (the TUI's baseline and "now")
/// into exact percentiles, where [`LatencyBuckets`] would give +-9%.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SparseHist(pub Vec<(u64, u64)>);

impl SparseHist {
    /// The non-empty buckets of a ns histogram.
    pub fn of(h: &Histogram<u64>) -> Self {
        SparseHist(
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        )
    }

    /// Adds these samples into `h` (same bounds as the recorders').
    pub fn add_to(&self, h: &mut Histogram<u64>) {
        for &(v, n) in &self.0 {
            h.saturating_record_n(v, n);
        }
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.0.iter().map(|&(_, n)| n).sum()
    }
}

/// An empty ns histogram with the recorders' bounds and precision, to merge
/// [`SparseHist`]s into.
pub fn empty_hist() -> Histogram<u64> {
    new_hist()
}

/// Scheduler counters of the worker threads over an interval (or a run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerSched {
    /// Worker threads sampled.
    pub threads: u32,
    /// Sum over workers of time spent runnable but not running (us): the 2023
    /// fsverity patch's "total workqueue scheduler latency".
    pub run_delay_us: f64,
    /// Sum over workers of time on CPU (us).
    pub cpu_us: f64,
    /// Voluntary context switches (slept: waiting for work).
    pub voluntary_switches: u64,
    /// Involuntary context switches (preempted).
    pub involuntary_switches: u64,
    /// CPU migrations (0 when the kernel does not expose them).
    pub migrations: u64,
}

impl WorkerSched {
    /// Adds another sample.
    pub fn add(&mut self, o: &WorkerSched) {
        self.threads = self.threads.max(o.threads);
        self.run_delay_us += o.run_delay_us;
        self.cpu_us += o.cpu_us;
        self.voluntary_switches += o.voluntary_switches;
        self.involuntary_switches += o.involuntary_switches;
        self.migrations += o.migrations;
    }
}

/// A live change of settings, or another event worth a marker on a chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Seconds since the engine started.
    pub t_s: f64,
    /// Short label, e.g. "workers.mode: unbound -> bound".
    pub label: String,
}

/// Something the user should know: a fallback or a refused privilege.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    /// Seconds since the engine started.
    pub t_s: f64,
    /// The message.
    pub text: String,
}

/// Busy and iowait share of one CPU over an interval.
pub use crate::sys::CpuUsage;

/// One interval's measurements: the unit every consumer reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalRecord {
    /// Interval number, from 0.
    pub seq: u64,
    /// End of the interval, seconds since the engine started.
    pub t_s: f64,
    /// Length of the interval, seconds.
    pub interval_s: f64,
    /// True when the workload was paused for the whole interval.
    pub paused: bool,
    /// Good reads completed.
    pub reads: u64,
    /// Bytes of good reads.
    pub bytes: u64,
    /// Throughput of good reads, MiB/s.
    pub throughput_mib_s: f64,
    /// Good reads per second.
    pub iops: f64,
    /// End-to-end latency (issue -> decrypted and verified), us.
    pub latency_us: Percentiles,
    /// Per-stage latency, us.
    pub stages_us: StagePercentiles,
    /// End-to-end latency distribution.
    pub latency_buckets: LatencyBuckets,
    /// End-to-end latency histogram, exact (ns).
    #[serde(default)]
    pub latency_hist: SparseHist,
    /// Queue-wait histogram, exact (ns).
    #[serde(default)]
    pub queue_hist: SparseHist,
    /// Workers' scheduler counters over this interval.
    pub workers: WorkerSched,
    /// The irq threads' scheduler counters (`workload.completion = irq`;
    /// zeros otherwise and in older recordings), apart from the workers'.
    #[serde(default)]
    pub irq: WorkerSched,
    /// Workers' run_delay since the engine started, us.
    pub run_delay_us_total: f64,
    /// Per-CPU busy and iowait.
    pub cpus: Vec<CpuUsage>,
    /// CPU time of the whole process over the interval, % of one CPU.
    pub process_cpu_pct: f64,
    /// Resident set size at the end of the interval, bytes.
    pub rss_bytes: u64,
    /// Hash-cache hit rate over the interval, % of verifications (None without verification).
    pub hash_cache_hit_pct: Option<f64>,
    /// The model's page cache over this interval (absent in recordings
    /// made before it existed).
    #[serde(default)]
    pub page_cache: PageCacheStats,
    /// The workqueues' worker pools at the end of the interval (absent in
    /// older recordings).
    #[serde(default)]
    pub pools: Vec<PoolRecord>,
    /// The running kernel's post-read queues over this interval, from their
    /// tracepoints (`workload.target = "kernel"`; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelRecord>,
    /// All counters of the interval.
    pub counters: Counters,
    /// Settings changes (and other markers) that happened in this interval.
    pub events: Vec<Event>,
    /// Notices raised in this interval.
    pub notices: Vec<Notice>,
}

/// One workqueue's workers at the end of an interval: a per-CPU queue's
/// pools summed, or an unbound queue's pods summed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PoolRecord {
    /// The kernel queue it models: `fscrypt` or `fsverity`.
    pub queue: String,
    /// `bound` (per-CPU, concurrency-managed) or `unbound`.
    pub kind: String,
    /// Worker threads.
    pub workers: u32,
    /// Running (awake, not blocked) now.
    pub running: u32,
    /// Blocked in an item (reading the tree) now.
    pub blocked: u32,
    /// Most blocked at once during the interval (per pool, summed).
    pub blocked_peak: u32,
    /// Items waiting now.
    pub pending: u64,
}

/// The running kernel's post-read work over an interval, as its
/// tracepoints saw it (`workload.target = "kernel"`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KernelRecord {
    /// Each post-read queue that ran an item in the interval.
    pub queues: Vec<KernelQueueRecord>,
    /// kworkers that ran those items (their run_delay is `workers`).
    pub kworkers: u32,
    /// Block requests of the file's device completed (their latency is
    /// `stages_us.device`).
    pub requests: u64,
    /// Trace events lost (tracefs overruns): figures are then partial.
    pub lost: u64,
    /// The file's pages in the kernel's page cache at the end (`mincore`).
    pub cached_bytes: u64,
}

/// One kernel workqueue over an interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KernelQueueRecord {
    /// The queue's name (`fscrypt_read_queue`).
    pub queue: String,
    /// Items that ran to the end.
    pub items: u64,
    /// Queued -> started (the workqueue scheduler latency), us.
    pub queue_us: Percentiles,
    /// Started -> ended, us.
    pub exec_us: Percentiles,
    /// Share of items run on another CPU than the one that queued them, %.
    pub moved_pct: f64,
}

/// Largest count an interval record read from outside may carry: far above
/// any real interval, and low enough that a million of them add up without
/// overflow.
pub const MAX_RECORD_COUNT: u64 = 1 << 42;
/// Most entries of an exact histogram in a record (the histogram's own
/// bucket count is below this).
pub const MAX_HIST_ENTRIES: usize = 100_000;
/// Most events or notices in one interval, and their longest text.
const MAX_EVENTS: usize = 10_000;
const MAX_TEXT: usize = 4096;

fn check_f64(name: &str, v: f64, lo: f64, hi: f64) -> Result<(), String> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        let num = |x: f64| {
            if x != 0.0 && !(1e-3..1e9).contains(&x.abs()) {
                format!("{x:e}")
            } else {
                format!("{x}")
            }
        };
        Err(format!(
            "{name} = {} is out of range: allowed {}..={}",
            num(v),
            num(lo),
            num(hi)
        ))
    }
}

fn check_u64(name: &str, v: u64) -> Result<(), String> {
    if v <= MAX_RECORD_COUNT {
        Ok(())
    } else {
        Err(format!(
            "{name} = {v} is out of range: allowed 0..={MAX_RECORD_COUNT}"
        ))
    }
}

/// The named number fields of a flat record (a [`Percentiles`],
/// [`Counters`]), read through its serialized form so a check never lists
/// them again.
fn number_fields<T: Serialize>(v: &T) -> Vec<(String, serde_json::Value)> {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::Object(m)) => m.into_iter().collect(),
        _ => Vec::new(),
    }
}

impl Percentiles {
    fn check(&self, name: &str) -> Result<(), String> {
        let max_us = MAX_LATENCY_NS as f64 / 1e3;
        check_u64(&format!("{name}.count"), self.count)?;
        for (field, v) in number_fields(self) {
            if field != "count" {
                let v = v.as_f64().unwrap_or(f64::NAN);
                check_f64(&format!("{name}.{field}"), v, 0.0, max_us)?;
            }
        }
        Ok(())
    }
}

impl SparseHist {
    fn check(&self, name: &str) -> Result<(), String> {
        if self.0.len() > MAX_HIST_ENTRIES {
            return Err(format!(
                "{name} has {} entries: allowed at most {MAX_HIST_ENTRIES}",
                self.0.len()
            ));
        }
        for &(v, n) in &self.0 {
            if v > MAX_LATENCY_NS {
                return Err(format!(
                    "{name}: value {v} ns is out of range: allowed 0..={MAX_LATENCY_NS}"
                ));
            }
            check_u64(&format!("{name}: count"), n)?;
        }
        Ok(())
    }
}

impl Counters {
    fn check(&self) -> Result<(), String> {
        for (field, v) in number_fields(self) {
            check_u64(&format!("counters.{field}"), v.as_u64().unwrap_or(u64::MAX))?;
        }
        Ok(())
    }
}

impl IntervalRecord {
    /// Range-checks a record read from outside (a recording): every number
    /// finite and within what readpath can produce, every list bounded. The
    /// error names the field, its value and what is allowed.
    pub fn check(&self) -> Result<(), String> {
        const MAX_T_S: f64 = 1e9; // ~30 years
        const MAX_RATE: f64 = 1e13;
        check_f64("t_s", self.t_s, -1.0, MAX_T_S)?;
        check_f64("interval_s", self.interval_s, 1e-6, 3600.0)?;
        check_u64("reads", self.reads)?;
        check_u64("bytes", self.bytes)?;
        check_f64("throughput_mib_s", self.throughput_mib_s, 0.0, MAX_RATE)?;
        check_f64("iops", self.iops, 0.0, MAX_RATE)?;
        self.latency_us.check("latency_us")?;
        for (name, p) in [
            ("device", &self.stages_us.device),
            ("queue", &self.stages_us.queue),
            ("decrypt", &self.stages_us.decrypt),
            ("verify", &self.stages_us.verify),
        ] {
            p.check(&format!("stages_us.{name}"))?;
        }
        let n = self.latency_buckets.counts.len();
        if n != 0 && n != BUCKET_COUNT {
            return Err(format!(
                "latency_buckets.counts has {n} entries: allowed 0 or {BUCKET_COUNT}"
            ));
        }
        for &c in &self.latency_buckets.counts {
            check_u64("latency_buckets.counts", c)?;
        }
        self.latency_hist.check("latency_hist")?;
        self.queue_hist.check("queue_hist")?;
        let w = &self.workers;
        check_f64("workers.run_delay_us", w.run_delay_us, 0.0, MAX_RATE)?;
        check_f64("workers.cpu_us", w.cpu_us, 0.0, MAX_RATE)?;
        check_u64("workers.voluntary_switches", w.voluntary_switches)?;
        check_u64("workers.involuntary_switches", w.involuntary_switches)?;
        check_u64("workers.migrations", w.migrations)?;
        let q = &self.irq;
        check_f64("irq.run_delay_us", q.run_delay_us, 0.0, MAX_RATE)?;
        check_f64("irq.cpu_us", q.cpu_us, 0.0, MAX_RATE)?;
        check_u64("irq.voluntary_switches", q.voluntary_switches)?;
        check_u64("irq.involuntary_switches", q.involuntary_switches)?;
        check_u64("irq.migrations", q.migrations)?;
        check_f64(
            "run_delay_us_total",
            self.run_delay_us_total,
            0.0,
            MAX_RATE * 1e3,
        )?;
        if self.cpus.len() > crate::settings::MAX_CPU_NUMBER + 1 {
            return Err(format!(
                "cpus has {} entries: allowed at most {}",
                self.cpus.len(),
                crate::settings::MAX_CPU_NUMBER + 1
            ));
        }
        for c in &self.cpus {
            if c.cpu > crate::settings::MAX_CPU_NUMBER {
                return Err(format!(
                    "cpus[].cpu = {} is out of range: allowed 0..={}",
                    c.cpu,
                    crate::settings::MAX_CPU_NUMBER
                ));
            }
            check_f64("cpus[].busy_pct", c.busy_pct, 0.0, 100.0)?;
            check_f64("cpus[].iowait_pct", c.iowait_pct, 0.0, 100.0)?;
        }
        check_f64("process_cpu_pct", self.process_cpu_pct, 0.0, 100.0 * 8192.0)?;
        check_u64("rss_bytes", self.rss_bytes >> 10)?;
        if let Some(h) = self.page_cache.hit_pct {
            check_f64("page_cache.hit_pct", h, 0.0, 100.0)?;
        }
        if let Some(b) = self.page_cache.bio_bytes_mean {
            check_f64("page_cache.bio_bytes_mean", b, 0.0, 1e12)?;
        }
        check_u64("page_cache.size_bytes", self.page_cache.size_bytes)?;
        if let Some(h) = self.hash_cache_hit_pct {
            check_f64("hash_cache_hit_pct", h, 0.0, 100.0)?;
        }
        if let Some(k) = &self.kernel {
            if k.queues.len() > crate::kernel::trace::POST_READ_QUEUES.len() {
                return Err(format!(
                    "kernel.queues has {} entries: allowed at most {}",
                    k.queues.len(),
                    crate::kernel::trace::POST_READ_QUEUES.len()
                ));
            }
            for q in &k.queues {
                if !crate::kernel::trace::POST_READ_QUEUES.contains(&q.queue.as_str()) {
                    return Err(format!(
                        "kernel.queues[].queue = {:?}: allowed {}",
                        q.queue,
                        crate::kernel::trace::POST_READ_QUEUES.join(", ")
                    ));
                }
                check_u64("kernel.queues[].items", q.items)?;
                q.queue_us.check("kernel.queues[].queue_us")?;
                q.exec_us.check("kernel.queues[].exec_us")?;
                check_f64("kernel.queues[].moved_pct", q.moved_pct, 0.0, 100.0)?;
            }
            check_u64("kernel.kworkers", u64::from(k.kworkers))?;
            check_u64("kernel.requests", k.requests)?;
            check_u64("kernel.lost", k.lost)?;
            check_u64("kernel.cached_bytes", k.cached_bytes >> 10)?;
        }
        if self.pools.len() > 2 {
            return Err(format!(
                "pools has {} entries: allowed at most 2",
                self.pools.len()
            ));
        }
        for p in &self.pools {
            if !matches!(p.queue.as_str(), "fscrypt" | "fsverity") {
                return Err(format!(
                    "pools[].queue = {:?}: allowed \"fscrypt\", \"fsverity\"",
                    p.queue
                ));
            }
            if !matches!(p.kind.as_str(), "bound" | "unbound") {
                return Err(format!(
                    "pools[].kind = {:?}: allowed \"bound\", \"unbound\"",
                    p.kind
                ));
            }
            let most = (crate::settings::MAX_CPU_NUMBER as u64 + 1) * 64;
            for (f, v) in [
                ("workers", p.workers),
                ("running", p.running),
                ("blocked", p.blocked),
                ("blocked_peak", p.blocked_peak),
            ] {
                if u64::from(v) > most {
                    return Err(format!(
                        "pools[].{f} = {v} is out of range: allowed 0..={most}"
                    ));
                }
            }
            check_u64("pools[].pending", p.pending)?;
        }
        self.counters.check()?;
        for (name, len, items) in [
            (
                "events",
                self.events.len(),
                self.events
                    .iter()
                    .map(|e| (e.t_s, e.label.len()))
                    .collect::<Vec<_>>(),
            ),
            (
                "notices",
                self.notices.len(),
                self.notices.iter().map(|n| (n.t_s, n.text.len())).collect(),
            ),
        ] {
            if len > MAX_EVENTS {
                return Err(format!(
                    "{name} has {len} entries: allowed at most {MAX_EVENTS}"
                ));
            }
            for (t, text_len) in items {
                check_f64(&format!("{name}[].t_s"), t, -1.0, MAX_T_S)?;
                if text_len > MAX_TEXT {
                    return Err(format!(
                        "{name}[]: a text of {text_len} bytes: allowed at most {MAX_TEXT}"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What the page cache did: per interval in a record, or over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PageCacheStats {
    /// Plaintext held at the end (bytes).
    pub size_bytes: u64,
    /// Pages reads found uptodate (copied, no post-read work).
    pub hits: u64,
    /// Pages reads did not find uptodate.
    pub misses: u64,
    /// hits / (hits + misses), percent; None with no lookup.
    pub hit_pct: Option<f64>,
    /// Bios read (each decrypted and verified as one work item).
    pub bios: u64,
    /// Mean bytes per bio; None with no bio.
    pub bio_bytes_mean: Option<f64>,
    /// Bios started by async readahead.
    pub readahead_async: u64,
    /// fs-verity tree pages read by the verify workers (cold hash pages).
    pub tree_pages_read: u64,
    /// Reads of tree pages (readahead included).
    pub tree_reads: u64,
    /// Waits for a tree page another worker was reading.
    pub tree_waits: u64,
    /// Milliseconds verify workers were blocked on the tree.
    pub tree_blocked_ms: f64,
}

impl PageCacheStats {
    /// The figures of counters, with the cache holding `size_bytes`.
    pub fn of(c: &Counters, size_bytes: u64) -> PageCacheStats {
        let looked = c.pc_hits + c.pc_misses;
        PageCacheStats {
            size_bytes,
            hits: c.pc_hits,
            misses: c.pc_misses,
            hit_pct: (looked > 0).then(|| c.pc_hits as f64 * 100.0 / looked as f64),
            bios: c.bios,
            bio_bytes_mean: (c.bios > 0).then(|| c.bio_bytes as f64 / c.bios as f64),
            readahead_async: c.readahead_async,
            tree_pages_read: c.tree_pages_read,
            tree_reads: c.tree_reads,
            tree_waits: c.tree_waits,
            tree_blocked_ms: c.tree_blocked_ns as f64 / 1e6,
        }
    }
}

impl IntervalRecord {
    /// Fills the derived fields from a merged recorder over `interval_s` seconds.
    pub fn fill_from(&mut self, r: &Recorder, interval_s: f64) {
        self.interval_s = interval_s;
        self.reads = r.counters.reads;
        self.bytes = r.counters.bytes;
        self.counters = r.counters;
        let secs = interval_s.max(1e-9);
        self.throughput_mib_s = r.counters.bytes as f64 / (1024.0 * 1024.0) / secs;
        self.iops = r.counters.reads as f64 / secs;
        self.latency_us = Percentiles::of(r.hist(Stage::EndToEnd));
        self.stages_us = StagePercentiles::of(r);
        self.latency_buckets = LatencyBuckets::of(r.hist(Stage::EndToEnd));
        self.latency_hist = SparseHist::of(r.hist(Stage::EndToEnd));
        self.queue_hist = SparseHist::of(r.hist(Stage::Queue));
        self.hash_cache_hit_pct = hit_pct(&r.counters);
        self.page_cache = PageCacheStats::of(&r.counters, self.page_cache.size_bytes);
    }
}

/// Measurements over a window of intervals, exact percentiles included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowStats {
    /// Start of the window, seconds since the engine started.
    pub from_s: f64,
    /// End of the window.
    pub to_s: f64,
    /// Seconds measured (paused intervals excluded).
    pub secs: f64,
    /// Good reads.
    pub reads: u64,
    /// MiB/s.
    pub throughput_mib_s: f64,
    /// Reads per second.
    pub iops: f64,
    /// End-to-end median, us.
    pub p50_us: f64,
    /// End-to-end p99, us.
    pub p99_us: f64,
    /// End-to-end p99.9, us.
    pub p999_us: f64,
    /// Queue wait p99, us (0 without queues).
    pub queue_p99_us: f64,
    /// Workers' run_delay per second of wall time, us/s.
    pub run_delay_us_per_s: f64,
    /// Page-cache hit ratio of the window's reads, % (None off the
    /// page-cache path).
    #[serde(default)]
    pub page_hit_pct: Option<f64>,
    /// Bios per second (each one decrypted and verified as one item).
    #[serde(default)]
    pub bios_per_s: f64,
}

impl WindowStats {
    /// Merges the records' exact histograms and counters.
    pub fn of<'a>(records: impl IntoIterator<Item = &'a IntervalRecord>) -> Option<WindowStats> {
        let mut lat = empty_hist();
        let mut queue = empty_hist();
        let mut st = WindowStats::default();
        let (mut bytes, mut run_delay, mut first) = (0u64, 0.0, true);
        let (mut hits, mut misses, mut bios) = (0u64, 0u64, 0u64);
        for r in records.into_iter().filter(|r| !r.paused) {
            hits += r.page_cache.hits;
            misses += r.page_cache.misses;
            bios += r.page_cache.bios;
            if first {
                st.from_s = r.t_s - r.interval_s;
                first = false;
            }
            st.to_s = r.t_s;
            st.secs += r.interval_s;
            st.reads += r.reads;
            bytes += r.bytes;
            run_delay += r.workers.run_delay_us;
            r.latency_hist.add_to(&mut lat);
            r.queue_hist.add_to(&mut queue);
        }
        if first || st.secs <= 0.0 {
            return None;
        }
        st.throughput_mib_s = bytes as f64 / (1024.0 * 1024.0) / st.secs;
        st.iops = st.reads as f64 / st.secs;
        let q = |h: &hdrhistogram::Histogram<u64>, p: f64| {
            if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(p) as f64 / 1e3
            }
        };
        st.p50_us = q(&lat, 0.5);
        st.p99_us = q(&lat, 0.99);
        st.p999_us = q(&lat, 0.999);
        st.queue_p99_us = q(&queue, 0.99);
        st.run_delay_us_per_s = run_delay / st.secs;
        st.page_hit_pct = (hits + misses > 0).then(|| hits as f64 * 100.0 / (hits + misses) as f64);
        st.bios_per_s = bios as f64 / st.secs;
        Some(st)
    }
}

/// The median (mean of the middle two for an even count); NaN when empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Hash-cache hit rate in %, None when nothing was verified.
pub fn hit_pct(c: &Counters) -> Option<f64> {
    let n = c.cache_hits + c.cache_misses;
    (n > 0).then(|| c.cache_hits as f64 * 100.0 / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_hists_merge_to_the_same_percentiles_as_the_recorders() {
        let (mut a, mut b, mut both) = (Recorder::new(), Recorder::new(), Recorder::new());
        for v in 1..=5000u64 {
            let ns = v * v * 37 + 900;
            let r = if v % 3 == 0 { &mut a } else { &mut b };
            r.record(Stage::EndToEnd, ns);
            both.record(Stage::EndToEnd, ns);
        }
        let mut merged = empty_hist();
        for r in [&a, &b] {
            let s = SparseHist::of(r.hist(Stage::EndToEnd));
            assert!(s.0.len() < 5000, "sparse form stays small: {}", s.0.len());
            s.add_to(&mut merged);
        }
        assert_eq!(
            Percentiles::of(&merged),
            Percentiles::of(both.hist(Stage::EndToEnd))
        );
        let json = serde_json::to_string(&SparseHist::of(a.hist(Stage::EndToEnd))).unwrap();
        assert!(json.starts_with("[["), "{json}");
    }

    #[test]
    fn percentiles_are_exact_to_the_histogram_resolution() {
        let mut r = Recorder::new();
        for v in 1..=1000u64 {
            r.record(Stage::EndToEnd, v * 1_000);
        }
        let p = Percentiles::of(r.hist(Stage::EndToEnd));
        assert_eq!(p.count, 1000);
        assert!((p.p50 - 500.0).abs() <= 0.5, "{p:?}");
        assert!((p.p99 - 990.0).abs() <= 1.0, "{p:?}");
        assert!((p.max - 1000.0).abs() <= 1.0, "{p:?}");
    }

    #[test]
    fn handoff_moves_data_once_per_epoch() {
        let reg = Arc::new(Registry::default());
        let mut h = reg.register(Role::Worker);
        h.rec.counters.reads = 3;
        h.rec.record(Stage::Device, 10);
        h.tick(); // same epoch: nothing moves
        let slot = h.slot().clone();
        let mut got = Recorder::new();
        slot.collect(&mut got);
        assert!(got.is_empty());
        reg.bump_epoch();
        h.tick();
        assert!(h.rec.is_empty());
        slot.collect(&mut got);
        assert_eq!(got.counters.reads, 3);
        // Late collection: two epochs worth merge instead of being lost.
        h.rec.counters.reads = 1;
        reg.bump_epoch();
        h.tick();
        h.rec.counters.reads = 2;
        reg.bump_epoch();
        h.tick();
        let mut got2 = Recorder::new();
        slot.collect(&mut got2);
        assert_eq!(got2.counters.reads, 3);
        // Drop publishes the rest and marks dead.
        h.rec.counters.reads = 5;
        drop(h);
        assert!(!slot.is_alive());
        let mut got3 = Recorder::new();
        slot.collect(&mut got3);
        assert_eq!(got3.counters.reads, 5);
        let dead: Vec<_> = reg.slots().into_iter().filter(|s| !s.is_alive()).collect();
        reg.prune(&dead);
        assert!(reg.slots().is_empty());
    }

    #[test]
    fn buckets_put_values_in_log_bins() {
        let mut r = Recorder::new();
        r.record(Stage::EndToEnd, 500); // below base: bucket 0
        r.record(Stage::EndToEnd, 2_000); // 2 us: one octave up
        r.record(Stage::EndToEnd, 1_000_000); // 1 ms: ~10 octaves up
        let b = LatencyBuckets::of(r.hist(Stage::EndToEnd));
        assert_eq!(b.counts.len(), BUCKET_COUNT);
        assert_eq!(b.counts[0], 1);
        assert_eq!(b.counts[BUCKETS_PER_OCTAVE], 1);
        let ms_bucket = ((1000f64).log2() * BUCKETS_PER_OCTAVE as f64) as usize;
        assert_eq!(b.counts[ms_bucket], 1);
        assert_eq!(b.counts.iter().sum::<u64>(), 3);
    }
}
