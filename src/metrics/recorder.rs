//! The hot path's recorder: per-thread histograms and counters that a
//! reader or worker thread fills without allocating, locking or sending,
//! and the once-per-interval mailbox handoff to the sampler ([`Registry`],
//! [`ThreadSlot`], [`ThreadHandle`]). Kept apart from the record schema so
//! what runs per read is all in one short file.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub use super::timeline::Role;
use super::timeline::{Span, SpanLog};

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

pub(crate) fn new_hist() -> Histogram<u64> {
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
    /// Of the data blocks verified, those hashed two at a time (6.18's
    /// `sha256_finup_2x`; 0 in the eras that hashed one block per call).
    pub paired_blocks: u64,
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
    /// Readahead windows (or their remainders) that found no free bio slot
    /// or frame and waited in the reader's pending list to be built.
    pub ra_deferred: u64,
    /// Readahead windows lost because that pending list was full (0 unless
    /// a reader keeps meeting marks while it cannot build a bio).
    pub ra_dropped: u64,
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
    /// Work items an irq thread sent to the bio's submitting CPU to be
    /// queued there (`kernel.rq_affinity`, `completion = irq`).
    pub irq_ipis: u64,
    /// Work items queued (`completion = irq`) from the CPU that submitted
    /// their bio, by `sched_getcpu` at queueing.
    pub queued_on_submitter: u64,
    /// Work items queued (`completion = irq`) from the CPU whose interrupt
    /// completed their bio, by `sched_getcpu` at queueing.
    pub queued_on_irq_cpu: u64,
    /// Work items a worker started (every queue).
    pub items_run: u64,
    /// Of those, run on another CPU than the one that queued them, by
    /// `sched_getcpu` (the kernel target's: its workqueue tracepoints).
    pub items_moved: u64,
    /// Of those, queued to an unbound pool (the model's: an unbound
    /// queue; the kernel target's: the pool `workqueue_queue_work` names).
    #[serde(default)]
    pub items_unbound: u64,
    /// Of those, run by a worker at a negative nice (the model's: a
    /// WQ_HIGHPRI queue whose workers could raise their priority; the
    /// kernel target's: the kworker's nice in `/proc`).
    #[serde(default)]
    pub items_highpri: u64,
}

impl Counters {
    /// Items run on another CPU than queued, % of the items run; None with
    /// none (the `moved %` metric).
    pub fn moved_pct(&self) -> Option<f64> {
        (self.items_run > 0).then(|| self.items_moved as f64 * 100.0 / self.items_run as f64)
    }

    /// Items queued to an unbound pool, % of the items run; None with none
    /// (the `unbound %` metric).
    pub fn unbound_pct(&self) -> Option<f64> {
        (self.items_run > 0).then(|| {
            (self.items_unbound.min(self.items_run)) as f64 * 100.0 / self.items_run as f64
        })
    }

    /// Items run by a high-priority worker (negative nice), % of the items
    /// run; None with none (the `highpri %` metric).
    pub fn highpri_pct(&self) -> Option<f64> {
        (self.items_run > 0).then(|| {
            (self.items_highpri.min(self.items_run)) as f64 * 100.0 / self.items_run as f64
        })
    }

    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &Counters) {
        self.reads += o.reads;
        self.bytes += o.bytes;
        self.verity_failures += o.verity_failures;
        self.io_errors += o.io_errors;
        self.decrypted_units += o.decrypted_units;
        self.verified_blocks += o.verified_blocks;
        self.hashes += o.hashes;
        self.paired_blocks += o.paired_blocks;
        self.cache_hits += o.cache_hits;
        self.cache_misses += o.cache_misses;
        self.corrupted += o.corrupted;
        self.pc_hits += o.pc_hits;
        self.pc_misses += o.pc_misses;
        self.bios += o.bios;
        self.bio_bytes += o.bio_bytes;
        self.readahead_async += o.readahead_async;
        self.ra_deferred += o.ra_deferred;
        self.ra_dropped += o.ra_dropped;
        self.tree_pages_read += o.tree_pages_read;
        self.tree_reads += o.tree_reads;
        self.tree_waits += o.tree_waits;
        self.tree_blocked_ns += o.tree_blocked_ns;
        self.tree_queued_decrypts += o.tree_queued_decrypts;
        self.irq_ipis += o.irq_ipis;
        self.queued_on_submitter += o.queued_on_submitter;
        self.queued_on_irq_cpu += o.queued_on_irq_cpu;
        self.items_run += o.items_run;
        self.items_moved += o.items_moved;
        self.items_unbound += o.items_unbound;
        self.items_highpri += o.items_highpri;
    }
}

/// One thread's measurements since its last handoff. Owned by the thread; no
/// method allocates once constructed.
pub struct Recorder {
    hists: [Histogram<u64>; 5],
    /// Counters (public: the pipeline bumps them directly).
    pub counters: Counters,
    /// Spans, while tracing (see [`super::timeline`]); without room in a
    /// recorder made by [`Recorder::new`].
    pub spans: SpanLog,
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
            spans: SpanLog::default(),
        }
    }

    /// A thread's recorder: with room for the spans it records between
    /// two handoffs while tracing.
    pub fn for_thread() -> Self {
        Recorder {
            spans: SpanLog::with_capacity(super::timeline::SPANS_PER_THREAD),
            ..Recorder::new()
        }
    }

    /// The sampler's recorder of an interval: with room for every
    /// thread's spans.
    pub fn for_interval() -> Self {
        Recorder {
            spans: SpanLog::with_capacity(super::timeline::SPANS_PER_INTERVAL),
            ..Recorder::new()
        }
    }

    /// Records `s` while tracing (one relaxed load otherwise). Never
    /// allocates.
    #[inline]
    pub fn span(&mut self, s: impl FnOnce() -> Span) {
        if super::timeline::tracing() {
            self.spans.push(s());
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
        self.spans.append(&other.spans);
    }

    /// Empties the recorder, keeping its memory.
    pub fn reset(&mut self) {
        for h in &mut self.hists {
            h.reset();
        }
        self.counters = Counters::default();
        self.spans.clear();
    }

    /// True when nothing was recorded since the last reset.
    pub fn is_empty(&self) -> bool {
        self.counters == Counters::default()
            && self.hists.iter().all(|h| h.is_empty())
            && self.spans.is_empty()
    }
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
    /// The thread's live recorder: locked by the thread while it runs (a
    /// [`LiveRecorder`]), let go while it is parked idle
    /// ([`ThreadHandle::idle`]), when the sampler takes its data without
    /// waking it.
    live: Arc<parking_lot::Mutex<Recorder>>,
    /// Parked idle, its live recorder let go.
    parked: AtomicBool,
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

    /// True while the thread is parked idle with its live recorder let
    /// go: the handoff takes its data with [`Self::collect_live`], and
    /// waking it would be the sampler's doing, not the workload's (a wake
    /// on a busy CPU is run_delay; a managed pool's last idle worker
    /// leaving makes the manager start another).
    pub fn is_parked(&self) -> bool {
        self.parked.load(Ordering::Acquire)
    }

    /// Moves the live recorder's data into `into` if the thread let it go
    /// (parked idle); false, touching nothing, while the thread holds it.
    pub fn collect_live(&self, into: &mut Recorder) -> bool {
        match self.live.try_lock() {
            Some(mut live) => {
                if !live.is_empty() {
                    into.merge(&live);
                    live.reset();
                }
                true
            }
            None => false,
        }
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
        let live = Arc::new(parking_lot::Mutex::new(Recorder::for_thread()));
        let held = live.lock_arc();
        let slot = Arc::new(ThreadSlot {
            name,
            role,
            tid: crate::sys::gettid(),
            thread,
            mailbox: Mutex::new(Mailbox {
                rec: Recorder::for_thread(),
                pending: false,
            }),
            seen_epoch: AtomicU64::new(epoch),
            alive: AtomicBool::new(true),
            live,
            parked: AtomicBool::new(false),
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
            rec: LiveRecorder(Some(held)),
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

/// A thread's live recorder, held (locked) while the thread runs: a
/// [`Recorder`] to write into. Let go only while the thread is parked
/// idle, when nothing records.
pub struct LiveRecorder(Option<parking_lot::ArcMutexGuard<parking_lot::RawMutex, Recorder>>);

impl std::ops::Deref for LiveRecorder {
    type Target = Recorder;
    fn deref(&self) -> &Recorder {
        self.0
            .as_deref()
            .expect("a thread records only while it holds its recorder")
    }
}

impl std::ops::DerefMut for LiveRecorder {
    fn deref_mut(&mut self) -> &mut Recorder {
        self.0
            .as_deref_mut()
            .expect("a thread records only while it holds its recorder")
    }
}

/// A thread's side of the handoff: its live recorder plus its mailbox.
pub struct ThreadHandle {
    registry: Arc<Registry>,
    slot: Arc<ThreadSlot>,
    epoch: u64,
    /// The live recorder the thread writes into.
    pub rec: LiveRecorder,
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
                std::mem::swap(&mut mb.rec, &mut *self.rec);
                mb.pending = true;
            }
        }
        self.epoch = epoch;
        self.slot.seen_epoch.store(epoch, Ordering::Release);
    }

    /// About to park with nothing to do: lets its live recorder go, so
    /// the sampler's handoff takes its data where it sleeps instead of
    /// waking it (one uncontended unlock per idle transition).
    #[inline]
    pub fn idle(&mut self) {
        if self.rec.0.is_some() {
            self.slot.parked.store(true, Ordering::Release);
            self.rec.0 = None;
        }
    }

    /// Woken (work, a stop, or a spurious wake): holds its recorder again
    /// (waiting, at most, for a sampler merging it) before it records;
    /// what it records goes out at its next safe point.
    #[inline]
    pub fn awake(&mut self) {
        if self.rec.0.is_none() {
            self.rec.0 = Some(self.slot.live.lock_arc());
            self.slot.parked.store(false, Ordering::Release);
        }
    }

    /// The thread's slot (tid, name).
    pub fn slot(&self) -> &Arc<ThreadSlot> {
        &self.slot
    }
}

impl Drop for ThreadHandle {
    fn drop(&mut self) {
        // Publish everything recorded so far, then mark the slot dead.
        self.awake();
        let e = self.registry.epoch.load(Ordering::Acquire);
        self.publish(e);
        self.slot.alive.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{LatencyBuckets, Percentiles, SparseHist, empty_hist};

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
        // Written in HdrHistogram's encoding, read back to the same buckets;
        // the version-1 pairs still read.
        let s = SparseHist::of(a.hist(Stage::EndToEnd));
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.starts_with("\"HISTF"), "{json}");
        assert_eq!(serde_json::from_str::<SparseHist>(&json).unwrap(), s);
        let pairs = serde_json::to_string(&s.0).unwrap();
        assert!(pairs.starts_with("[["), "{pairs}");
        assert_eq!(serde_json::from_str::<SparseHist>(&pairs).unwrap(), s);
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
