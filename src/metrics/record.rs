//! The interval record's schema: what one interval's measurements look
//! like once merged ([`IntervalRecord`] and its parts), the one immutable,
//! serializable snapshot that the headless runner, the explorer,
//! experiments and recordings all read. Recordings written by older
//! versions must keep reading, so fields are added with `serde(default)`.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::recorder::{
    BUCKET_BASE_NS, BUCKET_COUNT, BUCKETS_PER_OCTAVE, Counters, Recorder, Stage, new_hist,
};

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

/// A latency histogram's non-empty buckets as `(value_ns, count)` pairs,
/// each value the highest equivalent of its hdrhistogram bucket. It keeps the
/// record's full 3-significant-digit resolution in a few hundred pairs, so a
/// consumer can merge any window of intervals (the TUI's baseline and "now")
/// into exact percentiles, where [`LatencyBuckets`] would give +-9%.
///
/// Written as HdrHistogram's compressed encoding (a `HISTF...` string, see
/// [`super::hdr`]); read from that or from the `[[value_ns, count], ...]`
/// pairs recordings of format version 1 hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SparseHist(pub Vec<(u64, u64)>);

impl Serialize for SparseHist {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::hdr::encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for SparseHist {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Encoded(String),
            Pairs(Vec<(u64, u64)>),
        }
        match Either::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "a histogram must be an HdrHistogram string (HISTF...) or [[value_ns, count], ...]",
            )
        })? {
            Either::Encoded(text) => super::hdr::decode(&text)
                .map(SparseHist)
                .map_err(serde::de::Error::custom),
            Either::Pairs(p) => Ok(SparseHist(p)),
        }
    }
}

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

/// Scheduler delay summed over threads, `run_delay_us` us over `secs`
/// seconds of wall time, as the one unit readpath says it in: ms of delay
/// per second (`run_delay ms/s`; metrics/table.rs). Every window, phase,
/// round and summary computes its run_delay figure here.
pub fn run_delay_ms_per_s(run_delay_us: f64, secs: f64) -> f64 {
    run_delay_us.max(0.0) / 1e3 / secs.max(1e-9)
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
    /// The readers' time asleep in iowait over this interval, from the
    /// kernel's delay accounting; absent where it does not count it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readers_iowait: Option<ReadersIowait>,
    /// Where each work item ran in this interval: its spans, while
    /// tracing (the explorer's timeline open, a trace asked for; absent
    /// otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<super::timeline::Timeline>,
    /// All counters of the interval.
    pub counters: Counters,
    /// Settings changes (and other markers) that happened in this interval.
    pub events: Vec<Event>,
    /// Notices raised in this interval.
    pub notices: Vec<Notice>,
}

/// The readers' time asleep in iowait over an interval, summed over the
/// readers, from the kernel's delay accounting of each reader thread
/// (`/proc/self/task/TID/stat`'s `delayacct_blkio_ticks`: every sleep with
/// `in_iowait` set; counted only while `kernel.task_delayacct` is on, as a
/// lab guest boots it). A reader waiting in io_uring's CQ wait sleeps in
/// iowait where the kernel marks that wait (the 2023 io_uring seed; the lab
/// switch `io_uring_iowait`; `IORING_ENTER_NO_IOWAIT` turns it off), and a
/// pread always does. Its resolution is the clock tick (10 ms at USER_HZ
/// 100) of each reader's running total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadersIowait {
    /// Time asleep in iowait, ms.
    pub ms: f64,
}

/// One workqueue's workers at the end of an interval: a per-CPU queue's
/// pools summed, or an unbound queue's pods summed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PoolRecord {
    /// The kernel queue it models: `fscrypt` or `fsverity`, or `highpri` for
    /// the per-CPU high-priority pools both share.
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
    /// Workers its pools created since the pipeline started (per-CPU
    /// pools start with one and create more on demand).
    pub created: u32,
    /// Items marked CPU_INTENSIVE since the pipeline started.
    pub cpu_intensive: u64,
    /// Items of a per-CPU queue that waited for its `max_active` on their
    /// CPU (the kernel's inactive items) since the pipeline started.
    pub deferred: u64,
    /// Wakes that pointed a worker outside its pod back at it since the
    /// pipeline started (a non-strict pod, 6.6+'s `kick_pool`).
    pub repatriated: u64,
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
    /// How far behind the kernel's events readpath's trace reader was
    /// when the interval closed, ms: the items that ended in the interval's
    /// last `trace_lag_ms` count in the next one (0: caught up; items are
    /// counted by the events' own times).
    #[serde(default)]
    pub trace_lag_ms: f64,
    /// The kernel's queues were not traced (`kernel.trace = false`): its
    /// queue wait, workers' run_delay and bios were not measured, and read
    /// as unmeasured (`-`), not as 0.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub untraced: bool,
    /// The file's pages in the kernel's page cache at the end (`mincore`).
    pub cached_bytes: u64,
    /// The limit of readpath's memory cgroup at the end (`memory.high` on cgroup v2;
    /// 0: the kernel's cache is not limited, `kernel.limit_cache`).
    pub cache_limit_bytes: u64,
    /// What that cgroup was charged at the end (`memory.current`: the
    /// file's cache, and the process's memory since it moved in).
    pub charged_bytes: u64,
}

/// The post-read queues of ext4, f2fs and blk-crypto: the names a
/// [`KernelQueueRecord`] may carry (the kernel tracer follows these).
pub const POST_READ_QUEUES: &[&str] = &[
    "fscrypt_read_queue",
    "fsverity_read_queue",
    "blk_crypto_wq",
    "f2fs_post_read_wq",
];

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
    /// The most of its items executing at once (seen when one started):
    /// what the queue's `max_active` bounds.
    pub peak_running: u32,
    /// Share of items run on another CPU than the one that queued them, %.
    pub moved_pct: f64,
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
    /// Readahead windows (or their rest) that waited for a free bio slot
    /// or frame before their bios were built.
    pub readahead_deferred: u64,
    /// Readahead windows dropped because a reader's list of waiting
    /// windows was full (0 unless the model is broken: a test checks it).
    pub readahead_dropped: u64,
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
            // The kernel target counts its requests, not their bytes.
            bio_bytes_mean: (c.bios > 0 && c.bio_bytes > 0)
                .then(|| c.bio_bytes as f64 / c.bios as f64),
            readahead_async: c.readahead_async,
            readahead_deferred: c.ra_deferred,
            readahead_dropped: c.ra_dropped,
            tree_pages_read: c.tree_pages_read,
            tree_reads: c.tree_reads,
            tree_waits: c.tree_waits,
            tree_blocked_ms: c.tree_blocked_ns as f64 / 1e6,
        }
    }
}

impl IntervalRecord {
    /// Whether this is an interval of the kernel target without its
    /// tracepoints (`kernel.trace = false`): its queue wait, workers'
    /// run_delay and bios are then unmeasured, not 0.
    pub fn untraced(&self) -> bool {
        self.kernel.as_ref().is_some_and(|k| k.untraced)
    }

    /// The most post-read items of one kernel queue executing at once in
    /// this interval; NaN where the kernel's queues were not traced or ran
    /// none (the `items at once` metric).
    pub fn items_at_once(&self) -> f64 {
        self.kernel
            .as_ref()
            .and_then(|k| k.queues.iter().map(|q| q.peak_running).max())
            .filter(|&p| p > 0)
            .map_or(f64::NAN, f64::from)
    }

    /// A post-read work item's execution, median, us: decryption's item
    /// (fscrypt's, measured on the kernel target from its tracepoints), or
    /// verification's where nothing is decrypted; NaN with neither.
    pub fn exec_p50_us(&self) -> f64 {
        let st = &self.stages_us;
        if st.decrypt.count > 0 {
            st.decrypt.p50
        } else if st.verify.count > 0 {
            st.verify.p50
        } else {
            f64::NAN
        }
    }

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

/// Hash-cache hit rate in %, None when nothing was verified.
pub fn hit_pct(c: &Counters) -> Option<f64> {
    let n = c.cache_hits + c.cache_misses;
    (n > 0).then(|| c.cache_hits as f64 * 100.0 / n as f64)
}
