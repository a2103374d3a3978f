//! The headless run's summary: one JSON object (schema in docs/metrics.md) and a
//! text rendering in the spirit of fio's, built from the engine's totals.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::engine::RunTotals;
use crate::engine::stages::Plan;
use crate::metrics::format::{fmt_count, human_bytes, kib_approx};
use crate::metrics::{Event, Percentiles, StagePercentiles, WindowStats, WorkerSched, hit_pct};

/// Microseconds beside a `(usec)` title (`cli` prints histograms with it
/// too): one formatter, [`crate::metrics::format::fmt_fig`].
pub use crate::metrics::format::fmt_fig as fio_us;
use crate::settings::{Settings, format_size};
use crate::sys::{Features, MachineInfo};

/// Version of the JSON summary schema.
pub const SUMMARY_VERSION: u32 = 1;

/// Everything a headless run reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Schema version ([`SUMMARY_VERSION`]).
    pub version: u32,
    /// Settings as requested.
    pub settings: Settings,
    /// Settings as they ran (after fallbacks).
    pub effective_settings: Settings,
    /// Where each stage ran, e.g. "decrypt: unbound -> verify: bound".
    pub plan: String,
    /// Seconds the workload ran.
    pub duration_s: f64,
    /// Bytes of good reads.
    pub bytes: u64,
    /// Good reads.
    pub reads: u64,
    /// MiB/s of good reads.
    pub throughput_mib_s: f64,
    /// Good reads per second.
    pub iops: f64,
    /// End-to-end latency, us.
    pub latency_us: Percentiles,
    /// Per-stage latency, us.
    pub stages_us: StagePercentiles,
    /// Workers' total run_delay (runnable, not running), us (kept for
    /// readers of the JSON; [`RunSummary::run_delay_ms_per_s`] is the figure
    /// every screen and report shows).
    pub run_delay_us_total: f64,
    /// Workers' run_delay per second of the run, ms/s: the unit of
    /// run_delay everywhere ([`crate::metrics::table`]).
    #[serde(default)]
    pub run_delay_ms_per_s: f64,
    /// Workers' scheduler counters over the run.
    pub workers: WorkerSched,
    /// The irq threads' (`workload.completion = irq`), apart from the
    /// workers'; absent when no irq thread ran (the kernel target, or
    /// `completion = thread`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq: Option<WorkerSched>,
    /// Reads that failed verification.
    pub verity_failures: u64,
    /// Reads that failed at the device.
    pub io_errors: u64,
    /// Reads corrupted on purpose (`pipeline.corrupt_every`); the model's
    /// counts, like the three below, absent from a kernel target's run,
    /// which does not measure them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupted: Option<u64>,
    /// Data units decrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decrypted_units: Option<u64>,
    /// Data blocks verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_blocks: Option<u64>,
    /// SHA-256 computations of verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hashes: Option<u64>,
    /// Of the data blocks verified, those hashed two at a time (the 6.18
    /// era's `sha256_finup_2x`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_blocks: Option<u64>,
    /// Hash-cache hit rate, % (None without verification).
    pub hash_cache_hit_pct: Option<f64>,
    /// Post-read work items run on another CPU than the one that queued
    /// them, % (None with no queued item; the kernel target's per queue
    /// under `kernel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_pct: Option<f64>,
    /// The kernel read path the run modelled.
    #[serde(default)]
    pub read_path: String,
    /// The unbound queues' pods ("pods cache 0-3|4-7"), when a queue was unbound.
    #[serde(default)]
    pub pods: Option<String>,
    /// The model's page cache over the run (zeros on a direct-read path);
    /// on a kernel target's run the kernel's page hits and misses of the
    /// file (`mm_filemap_add_to_page_cache`), absent where they were not
    /// counted (`kernel.trace` off, no such tracepoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache: Option<crate::metrics::PageCacheStats>,
    /// Each workqueue's worker pool: its workers and the most blocked at
    /// once over the run (cold tree reads).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<crate::metrics::PoolRecord>,
    /// The kernel driver the model decrypted with through AF_ALG
    /// (`pipeline.cipher = "kernel"`): `/proc/crypto`'s highest-priority
    /// `xts(aes)`, e.g. `xts-aes-vaes-avx512`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher_driver: Option<String>,
    /// The kernel driver the model hashed with through AF_ALG
    /// (`pipeline.hash = "kernel"`): the highest-priority `sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_driver: Option<String>,
    /// Mean CPU of the whole process, % of one CPU.
    pub process_cpu_pct: f64,
    /// Intervals recorded.
    pub intervals: u64,
    /// Notices (fallbacks, refused privileges), in order.
    pub notices: Vec<String>,
    /// Events (live changes, marks, A/B results), in order, with their
    /// times.
    pub events: Vec<Event>,
    /// The run by settings phase (one per live change; the interval of a
    /// change belongs to neither), when it had more than one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseSummary>,
    /// The running kernel's post-read work (`workload.target = "kernel"`):
    /// its queues as their tracepoints saw them, its workqueue affinity
    /// scope and the AES driver it used; absent for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelSummary>,
    /// Where the completion interrupts of the block device under the file
    /// land (`/proc/irq/N/effective_affinity_list` of its queue
    /// interrupts), when the run looked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_irqs: Option<crate::sys::DeviceIrqs>,
    /// The machine.
    pub machine: MachineInfo,
    /// Kernel and CPU features detected.
    pub features: Features,
}

/// One settings phase of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseSummary {
    /// When it began, seconds since the start.
    pub start_s: f64,
    /// The changes that began it (empty for the first).
    pub changes: Vec<String>,
    /// Seconds measured.
    pub duration_s: f64,
    /// MiB/s of good reads.
    pub throughput_mib_s: f64,
    /// Good reads per second.
    pub iops: f64,
    /// End-to-end p50, us.
    pub p50_us: f64,
    /// End-to-end p99, us.
    pub p99_us: f64,
    /// Queue-wait p99, us.
    pub queue_p99_us: f64,
    /// Workers' run_delay per second, ms/s.
    pub run_delay_ms_per_s: f64,
    /// The baseline was marked in this phase (the latest `baseline`
    /// event): the phases after it are compared with it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub baseline: bool,
}

impl PhaseSummary {
    /// The phase as a window's statistics, so the metric table's getters
    /// read it (the figures a phase does not keep are 0).
    pub fn stats(&self) -> WindowStats {
        WindowStats {
            secs: self.duration_s,
            throughput_mib_s: self.throughput_mib_s,
            iops: self.iops,
            p50_us: self.p50_us,
            p99_us: self.p99_us,
            queue_p99_us: self.queue_p99_us,
            run_delay_ms_per_s: self.run_delay_ms_per_s,
            ..WindowStats::default()
        }
    }

    /// The metrics of the table a phase keeps, in its order.
    fn metrics() -> impl Iterator<Item = &'static crate::metrics::Metric> {
        use crate::metrics::table::{P50, P99, QUEUE_P99, RUN_DELAY, THROUGHPUT};
        [&THROUGHPUT, &P50, &P99, &QUEUE_P99, &RUN_DELAY].into_iter()
    }

    /// Each metric's change from `base` to this phase, % (`MiB/s +3%, p50
    /// -1%, ...`), the way the explorer's baseline panel says it.
    pub fn versus(&self, base: &PhaseSummary) -> String {
        let (a, b) = (base.stats(), self.stats());
        PhaseSummary::metrics()
            .map(|m| {
                let (a, b) = ((m.window)(&a), (m.window)(&b));
                let pct = if a > 0.0 && b.is_finite() {
                    format!("{:+.0}%", (b - a) / a * 100.0)
                } else {
                    "-".to_string()
                };
                format!("{} {pct}", m.short)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The phases of a run's totals; none when it had only one.
    pub fn of(totals: &RunTotals) -> Vec<PhaseSummary> {
        if totals.phases.len() < 2 {
            return Vec::new();
        }
        // The baseline's phase: the one running when it was marked (a
        // change made with it starts the next phase at the same time).
        let marked = totals
            .events
            .iter()
            .rev()
            .find(|e| e.label == "baseline")
            .map(|e| e.t_s);
        let base_at = marked.and_then(|t| {
            totals
                .phases
                .iter()
                .rposition(|p| p.start_s < t || p.changes.is_empty())
        });
        totals
            .phases
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let c = &p.rec.counters;
                let d = p.secs.max(1e-9);
                let pct = |stage, q| {
                    let h: &hdrhistogram::Histogram<u64> = p.rec.hist(stage);
                    if h.is_empty() {
                        0.0
                    } else {
                        h.value_at_quantile(q) as f64 / 1e3
                    }
                };
                use crate::metrics::Stage;
                PhaseSummary {
                    start_s: p.start_s,
                    changes: p.changes.clone(),
                    duration_s: p.secs,
                    throughput_mib_s: c.bytes as f64 / (1024.0 * 1024.0) / d,
                    iops: c.reads as f64 / d,
                    p50_us: pct(Stage::EndToEnd, 0.5),
                    p99_us: pct(Stage::EndToEnd, 0.99),
                    queue_p99_us: pct(Stage::Queue, 0.99),
                    run_delay_ms_per_s: crate::metrics::run_delay_ms_per_s(p.run_delay_us, d),
                    baseline: base_at == Some(i),
                }
            })
            .collect()
    }
}

/// The kernel target's part of a run summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelSummary {
    /// Per post-read queue that ran items.
    pub workqueues: std::collections::BTreeMap<String, KernelQueueSummary>,
    /// `workqueue.default_affinity_scope` while the run read the kernel.
    pub affinity_scope: String,
    /// The driver of the kernel's `xts(aes)` (`/proc/crypto`).
    pub aes_driver: String,
    /// The queues were traced (`kernel.trace`); false: no queue figures.
    #[serde(default)]
    pub traced: bool,
}

/// One kernel workqueue over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelQueueSummary {
    /// Items that ran to the end.
    pub items: u64,
    /// Queued -> started, us.
    pub queue_us: Percentiles,
    /// Started -> ended, us.
    pub exec_us: Percentiles,
    /// Share of items run on another CPU than the one that queued them, %.
    pub moved_pct: f64,
    /// Share of items the kernel queued to an unbound pool, % (its
    /// `workqueue_queue_work` names the pool: cpu=-1 for an unbound one).
    #[serde(default)]
    pub unbound_pct: f64,
}

impl KernelSummary {
    /// The summary of a run's totals, if it read the kernel.
    pub fn of(totals: &RunTotals, traced: bool) -> Option<KernelSummary> {
        let scope = totals.kernel_scope.clone()?;
        Some(KernelSummary {
            workqueues: totals
                .kernel
                .iter()
                .map(|(name, q)| {
                    (
                        name.clone(),
                        KernelQueueSummary {
                            items: q.items,
                            queue_us: Percentiles::of(&q.queue_ns),
                            exec_us: Percentiles::of(&q.exec_ns),
                            moved_pct: if q.items > 0 {
                                q.moved as f64 * 100.0 / q.items as f64
                            } else {
                                0.0
                            },
                            unbound_pct: if q.items > 0 {
                                q.unbound.min(q.items) as f64 * 100.0 / q.items as f64
                            } else {
                                0.0
                            },
                        },
                    )
                })
                .collect(),
            affinity_scope: scope,
            aes_driver: crate::kernel::crypto_driver("xts(aes)")
                .map_or_else(|| "unknown".into(), |(d, _)| d),
            traced,
        })
    }
}

/// The driver AF_ALG binds for `alg`: `/proc/crypto`'s highest-priority
/// one, or "unknown driver" where it cannot be read.
fn afalg_driver(alg: &str) -> String {
    crate::kernel::crypto_driver(alg).map_or_else(|| "unknown driver".into(), |(d, _)| d)
}

impl RunSummary {
    /// Builds the summary of a finished run.
    pub fn new(
        settings: &Settings,
        effective: &Settings,
        totals: &RunTotals,
        machine: MachineInfo,
        features: Features,
    ) -> RunSummary {
        let r = &totals.rec;
        let c = &r.counters;
        let d = totals.duration_s.max(1e-9);
        // What only the model measures is absent from a kernel target's run.
        let model = effective.workload.target == crate::settings::Target::Model;
        RunSummary {
            version: SUMMARY_VERSION,
            settings: settings.clone(),
            effective_settings: effective.clone(),
            plan: Plan::label(effective),
            duration_s: totals.duration_s,
            bytes: c.bytes,
            reads: c.reads,
            throughput_mib_s: c.bytes as f64 / (1024.0 * 1024.0) / d,
            iops: c.reads as f64 / d,
            latency_us: Percentiles::of(r.hist(crate::metrics::Stage::EndToEnd)),
            stages_us: StagePercentiles::of(r),
            run_delay_us_total: totals.workers.run_delay_us,
            run_delay_ms_per_s: crate::metrics::run_delay_ms_per_s(totals.workers.run_delay_us, d),
            workers: totals.workers,
            irq: (totals.irq.threads > 0).then_some(totals.irq),
            verity_failures: c.verity_failures,
            io_errors: c.io_errors,
            corrupted: model.then_some(c.corrupted),
            decrypted_units: model.then_some(c.decrypted_units),
            verified_blocks: model.then_some(c.verified_blocks),
            hashes: model.then_some(c.hashes),
            paired_blocks: model.then_some(c.paired_blocks),
            hash_cache_hit_pct: hit_pct(c),
            moved_pct: c.moved_pct(),
            read_path: crate::engine::ReadPath::of(effective)
                .describe()
                .to_string(),
            pods: crate::engine::pipeline::pods_label(effective),
            // The kernel's hits and misses, where its cache was followed.
            page_cache: (model || c.pc_hits + c.pc_misses > 0)
                .then(|| crate::metrics::PageCacheStats::of(c, totals.page_cache_bytes)),
            pools: totals.pools.clone(),
            cipher_driver: (model
                && effective.pipeline.decrypt
                && effective.pipeline.cipher == crate::crypto::CipherKind::Kernel)
                .then(|| afalg_driver(crate::crypto::KERNEL_XTS)),
            hash_driver: (model
                && effective.pipeline.verity
                && effective.pipeline.hash == crate::settings::HashKind::Kernel)
                .then(|| afalg_driver(crate::verity::merkle::KERNEL_SHA256)),
            process_cpu_pct: totals.process_cpu_pct,
            intervals: totals.intervals,
            notices: totals.notices.iter().map(|n| n.text.clone()).collect(),
            events: totals.events.clone(),
            phases: PhaseSummary::of(totals),
            kernel: KernelSummary::of(totals, effective.kernel.trace),
            device_irqs: None,
            machine,
            features,
        }
    }

    /// The fio-style text summary: after its first line, what a session
    /// did (the settings it started with, its changes, its A/B results),
    /// then the detail.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let session = Session::of(&self.events);
        self.write_head(&mut o);
        session.write(&mut o);
        self.write_latency(&mut o);
        self.write_threads(&mut o);
        self.write_path(&mut o);
        self.write_kernel(&mut o);
        self.write_counters(&mut o);
        write_phases(&self.phases, &session.ab_spans, &mut o);
        self.write_tail(&mut o);
        crate::output::format::printable(&o, true)
    }

    /// The first lines: the workload and plan, the load, the reads and their rate.
    fn write_head(&self, o: &mut String) {
        let e = &self.effective_settings;
        let w = &e.workload;
        let _ = writeln!(
            o,
            "readpath: {} {} {}{} {} qd={} readers={}{} | {}{}{}{}",
            w.engine,
            w.sleep,
            if w.direct { "O_DIRECT " } else { "buffered " },
            w.pattern,
            format_size(w.block_size),
            w.queue_depth,
            w.readers,
            if w.rate_iops > 0 {
                format!(" rate={}/s", w.rate_iops)
            } else {
                String::new()
            },
            self.plan,
            if e.pipeline.decrypt {
                match &self.cipher_driver {
                    Some(d) => format!(", cipher={} ({d})", e.pipeline.cipher),
                    None => format!(", cipher={}", e.pipeline.cipher),
                }
            } else {
                String::new()
            },
            match &self.hash_driver {
                Some(d) => format!(", hash=kernel ({d})"),
                None if e.pipeline.verity
                    && e.pipeline.hash == crate::settings::HashKind::Generic
                    && e.workload.target == crate::settings::Target::Model =>
                {
                    ", hash=generic (sha256-generic port)".into()
                }
                None => String::new(),
            },
            if e.workload.target == crate::settings::Target::Model {
                let (c, v) = crate::engine::era::Era::of(e.workers.kernel_era).flag_text();
                format!(
                    "{}, kernel {} (as allocated: fscrypt {c}, fsverity {v})",
                    if e.workers.highpri { ", highpri" } else { "" },
                    e.workers.kernel_era
                )
            } else {
                String::new()
            },
        );
        if let Some(d) = &self.device_irqs {
            let _ = writeln!(o, "  device: {}", d.describe());
        }
        let run_cpus = e.run_cpus(&crate::sys::online_cpus());
        let hogs = e.hog_count(run_cpus.len());
        if hogs > 0 {
            let _ = writeln!(
                o,
                "  load: {hogs} hogs at nice {}{}",
                e.load.hog_nice,
                if e.load.hogs.is_none() {
                    " (one per CPU the run may use)"
                } else {
                    ""
                }
            );
        }
        if e.cpus_restricted() {
            let _ = writeln!(
                o,
                "  CPUs: {} (workload.cpus)",
                crate::settings::format_cpu_list(&run_cpus)
            );
        }
        let _ = writeln!(
            o,
            "  read: IOPS={}, BW={:.1}MiB/s ({:.1}MB/s), {} in {:.1}s, {} reads",
            fmt_count(self.iops),
            self.throughput_mib_s,
            self.throughput_mib_s * 1.048576,
            human_bytes(self.bytes),
            self.duration_s,
            self.reads
        );
    }

    /// One latency row per stage that saw reads: end to end, device, queue, decrypt, verify.
    fn write_latency(&self, o: &mut String) {
        let row = |o: &mut String, name: &str, p: &Percentiles| {
            if p.count == 0 {
                return;
            }
            let _ = writeln!(
                o,
                "  {name:<8} (usec): p50={:<9} p90={:<9} p99={:<9} p99.9={:<9} max={:<9} mean={}",
                fio_us(p.p50),
                fio_us(p.p90),
                fio_us(p.p99),
                fio_us(p.p999),
                fio_us(p.max),
                fio_us(p.mean)
            );
        };
        row(o, "lat", &self.latency_us);
        row(o, "device", &self.stages_us.device);
        row(o, "queue", &self.stages_us.queue);
        row(o, "decrypt", &self.stages_us.decrypt);
        row(o, "verify", &self.stages_us.verify);
    }

    /// The worker threads' and the irq threads' scheduling.
    fn write_threads(&self, o: &mut String) {
        if self.workers.threads > 0 {
            let _ = writeln!(
                o,
                "  {}: {} threads, run_delay {} ms/s, cpu {:.2}s, switches {} voluntary / {} involuntary, {} migrations",
                if self.kernel.is_some() {
                    "kworkers (in the intervals they ran post-read items)"
                } else {
                    "workers"
                },
                self.workers.threads,
                fio_us(self.run_delay_ms_per_s),
                self.workers.cpu_us / 1e6,
                self.workers.voluntary_switches,
                self.workers.involuntary_switches,
                self.workers.migrations
            );
            if self.kernel.is_none()
                && let Some(m) = self.moved_pct
            {
                let _ = writeln!(o, "  work items: {m:.0}% ran on another CPU than queued");
            }
        }
        if let Some(irq) = &self.irq {
            let _ = writeln!(
                o,
                "  irq: {} threads (completions), run_delay {} ms/s, cpu {:.2}s, switches {} voluntary / {} involuntary",
                irq.threads,
                crate::metrics::table::RUN_DELAY.cell(crate::metrics::run_delay_ms_per_s(
                    irq.run_delay_us,
                    self.duration_s
                )),
                irq.cpu_us / 1e6,
                irq.voluntary_switches,
                irq.involuntary_switches,
            );
        }
    }

    /// The read path, the unbound pods, the page cache, the verity tree and the worker pools.
    fn write_path(&self, o: &mut String) {
        let _ = writeln!(o, "  path: {}", self.read_path);
        if let Some(p) = &self.pods {
            let _ = writeln!(o, "  unbound {p}");
        }
        let empty = crate::metrics::PageCacheStats::default();
        let pc = self.page_cache.as_ref().unwrap_or(&empty);
        if pc.hits + pc.misses > 0 {
            let _ = writeln!(
                o,
                "  page cache: {} hits, {} misses ({} hit), {} bios of {} mean, {} by async readahead, {} held",
                pc.hits,
                pc.misses,
                pc.hit_pct
                    .map(|p| format!("{p:.1}%"))
                    .unwrap_or_else(|| "-".into()),
                pc.bios,
                pc.bio_bytes_mean
                    .map(kib_approx)
                    .unwrap_or_else(|| "-".into()),
                pc.readahead_async,
                human_bytes(pc.size_bytes),
            );
            if pc.readahead_deferred + pc.readahead_dropped > 0 {
                let _ = writeln!(
                    o,
                    "  readahead: {} windows waited for a free bio slot or frame, {} dropped",
                    pc.readahead_deferred, pc.readahead_dropped,
                );
            }
        }
        if pc.tree_reads > 0 || pc.tree_waits > 0 {
            let _ = writeln!(
                o,
                "  verity tree: {} pages read in {} reads by the verify workers (cold hash pages), {} waits for a page being read, {:.1} ms blocked",
                pc.tree_pages_read, pc.tree_reads, pc.tree_waits, pc.tree_blocked_ms,
            );
        }
        for p in &self.pools {
            // Say what the worker count is: a pool's threads, some of
            // them idle (each pool starts one and creates more on demand,
            // as the kernel's manager does), not the concurrency.
            let how = if p.kind == "bound" {
                format!(
                    "{} worker threads in its per-CPU pools, {} created in the run (one a pool at the start, more when one blocks; idle ones wait, as the kernel's do), {} items waited for the queue's max_active on their CPU",
                    p.workers, p.created, p.deferred
                )
            } else {
                format!(
                    "{} worker threads in its pods, {} created in the run (one a pod at the start, more as work arrives, one kept idle; max_active bounds the items at once, not the threads){}",
                    p.workers,
                    p.created,
                    if p.repatriated > 0 {
                        format!(
                            ", {} wakes pointed a worker outside its pod back at it (kick_pool's wake_cpu)",
                            p.repatriated
                        )
                    } else {
                        String::new()
                    }
                )
            };
            let _ = writeln!(
                o,
                "  {} queue ({}): {how}, at most {} blocked at once, {} items CPU_INTENSIVE",
                p.queue, p.kind, p.blocked_peak, p.cpu_intensive
            );
        }
    }

    /// The kernel target's workqueues (scope, driver, one line per queue).
    fn write_kernel(&self, o: &mut String) {
        if let Some(k) = &self.kernel {
            let _ = writeln!(
                o,
                "  kernel: workqueue affinity scope {}, xts(aes) driver {}",
                k.affinity_scope, k.aes_driver
            );
            if !k.traced {
                let _ = writeln!(
                    o,
                    "  kernel: not traced (kernel.trace = false): no queue figures; device is the whole read"
                );
            } else if k.workqueues.is_empty() {
                let _ = writeln!(
                    o,
                    "  kernel: no post-read work item ran (every read hit the kernel's page cache, or the file is neither encrypted nor verity)"
                );
            }
            for (name, q) in &k.workqueues {
                let _ = writeln!(
                    o,
                    "  {name}: {} items ({}); queue (usec) p50={} p99={} p99.9={} max={}; exec (usec) p50={} p99={}; ran on another CPU than queued: {:.0}%",
                    q.items,
                    match q.unbound_pct {
                        p if p >= 99.95 => "unbound pool".to_string(),
                        p if p <= 0.05 => "per-CPU pools".to_string(),
                        p => format!("{p:.0}% on unbound pools"),
                    },
                    fio_us(q.queue_us.p50),
                    fio_us(q.queue_us.p99),
                    fio_us(q.queue_us.p999),
                    fio_us(q.queue_us.max),
                    fio_us(q.exec_us.p50),
                    fio_us(q.exec_us.p99),
                    q.moved_pct
                );
            }
        }
    }

    /// The model's decrypt and verity counts, deliberate corruption and I/O errors.
    fn write_counters(&self, o: &mut String) {
        let e = &self.effective_settings;
        if let Some(units) = self.decrypted_units.filter(|_| e.pipeline.decrypt) {
            let _ = writeln!(o, "  decrypt: {units} data units");
        }
        if let (Some(blocks), Some(hashes), true) =
            (self.verified_blocks, self.hashes, e.pipeline.verity)
        {
            let _ = writeln!(
                o,
                "  verity: {} blocks verified ({}), {} hashes, {} failures, hash cache hit {}",
                blocks,
                match self.paired_blocks {
                    Some(p) if p > 0 => format!("{p} two at a time"),
                    _ => "one per hash call".into(),
                },
                hashes,
                self.verity_failures,
                self.hash_cache_hit_pct
                    .map(|p| format!("{p:.2}%"))
                    .unwrap_or_else(|| "-".into())
            );
        }
        if let Some(n) = self.corrupted.filter(|&n| n > 0) {
            let _ = writeln!(o, "  corrupted on purpose: {n} reads");
        }
        if self.io_errors > 0 {
            let _ = writeln!(o, "  io errors: {}", self.io_errors);
        }
    }

    /// The process CPU, the machine and the notices (the events are the
    /// session's lines, each said once there; the JSON keeps each).
    fn write_tail(&self, o: &mut String) {
        let _ = writeln!(o, "  cpu: process {:.1}% of one CPU", self.process_cpu_pct);
        let _ = writeln!(o, "  machine: {}", self.machine.line());
        write_notices(&self.notices, o);
    }
}

/// The event that starts a live A/B (the explorer's `A`).
pub const AB_START: &str = "A/B start";
/// The event of a live A/B stopped with `A` on the current settings.
pub const AB_STOP: &str = "A/B stop";
/// The start of the event that carries an ended A/B's result.
pub const AB_RESULT: &str = "A/B result: ";

/// What a session did, read from its events: the settings it started
/// with (each key it changed, at its first value), its changes in order
/// (a live A/B's own switches counted, not listed), its A/B results; and
/// the A/B's spans, which the phases table folds.
#[derive(Debug, Default)]
struct Session {
    /// `key = value` of each key changed, as it was at the start.
    started: Vec<String>,
    /// `19.3s workers.mode: unbound -> inline`, `32.9s A/B start (8
    /// switches)`, in order.
    changes: Vec<String>,
    /// Each ended A/B's result line, without its prefix.
    results: Vec<String>,
    /// (start, end) of each live A/B, seconds (end: infinity while open).
    ab_spans: Vec<(f64, f64)>,
}

impl Session {
    fn of(events: &[Event]) -> Session {
        let mut s = Session::default();
        let mut keys: Vec<&str> = Vec::new();
        // The open A/B: its start's index in `changes` and its switches.
        let mut open: Option<(usize, usize, f64)> = None;
        let close = |s: &mut Session, open: &mut Option<(usize, usize, f64)>, t: f64| {
            if let Some((at, n, from)) = open.take() {
                s.changes[at].push_str(&format!(" ({n} switches)"));
                s.ab_spans.push((from, t));
            }
        };
        for e in events {
            let (t, label) = (e.t_s, e.label.as_str());
            if label.starts_with("caption: ") {
                continue;
            }
            if let Some(r) = label.strip_prefix(AB_RESULT) {
                s.results.push(r.to_string());
                close(&mut s, &mut open, t);
                continue;
            }
            // A setting's change, as SettingChange::label writes it, of
            // a key the table has.
            let change = label.split_once(": ").and_then(|(k, ch)| {
                Some((crate::settings::key_info(k)?, ch.split_once(" -> ")?.0))
            });
            if let Some((setting, from)) = change {
                let key = setting.key.name();
                if !keys.contains(&key) {
                    keys.push(key);
                    s.started.push(format!("{key} = {from}"));
                }
                if let Some((_, n, _)) = open.as_mut() {
                    *n += 1;
                    continue;
                }
            }
            if label == AB_STOP {
                close(&mut s, &mut open, t);
            }
            s.changes.push(format!("{t:.1}s {label}"));
            if label == AB_START {
                open = Some((s.changes.len() - 1, 0, t));
            }
        }
        close(&mut s, &mut open, f64::INFINITY);
        s
    }

    /// The session's lines: where it started, what changed (one a line),
    /// the A/B results; nothing for a run without changes.
    fn write(&self, o: &mut String) {
        if !self.started.is_empty() {
            let _ = writeln!(o, "  started with: {}", self.started.join(", "));
        }
        if !self.changes.is_empty() {
            let _ = writeln!(o, "  changes:");
            for c in &self.changes {
                let _ = writeln!(o, "    {c}");
            }
        }
        for r in &self.results {
            let _ = writeln!(o, "  A/B result: {r}");
        }
    }
}

/// The notices, each text once in the order first raised, with how often
/// where it was raised again (a fallback re-resolved at every change); the
/// JSON keeps each.
fn write_notices(notices: &[String], o: &mut String) {
    let mut said: Vec<(&str, usize)> = Vec::new();
    for n in notices {
        match said.iter_mut().find(|(t, _)| *t == n.as_str()) {
            Some((_, count)) => *count += 1,
            None => said.push((n, 1)),
        }
    }
    for (n, count) in said {
        let _ = match count {
            1 => writeln!(o, "  notice: {n}"),
            c => writeln!(o, "  notice ({c} times): {n}"),
        };
    }
}

/// The table by settings phase, each against the baseline before it; the
/// phases inside a live A/B (`ab_spans`) one row (its turns are what its
/// result line measured).
fn write_phases(phases: &[PhaseSummary], ab_spans: &[(f64, f64)], o: &mut String) {
    let in_ab = |t: f64| ab_spans.iter().any(|&(a, b)| t > a && t <= b);
    if !phases.is_empty() {
        let _ = writeln!(
            o,
            "  by settings phase (the interval of each change left out):"
        );
        // The metrics' columns, titled as the metric table titles them.
        let widths: Vec<usize> = PhaseSummary::metrics()
            .map(|m| m.label.len().max(9))
            .collect();
        let mut head = format!("    {:>7} {:>6}", "from s", "secs");
        for (m, w) in PhaseSummary::metrics().zip(&widths) {
            let _ = write!(head, " {:>w$}", m.label);
        }
        let _ = writeln!(o, "{head}  settings");
        let mut base: Option<&PhaseSummary> = None;
        let mut said_span: Option<usize> = None;
        for p in phases {
            // An A/B's turns: one line for them all.
            if in_ab(p.start_s) {
                let span = ab_spans
                    .iter()
                    .position(|&(a, b)| p.start_s > a && p.start_s <= b);
                if span != said_span {
                    said_span = span;
                    let n = phases.iter().filter(|q| {
                        span.is_some_and(|i| {
                            let (a, b) = ab_spans[i];
                            q.start_s > a && q.start_s <= b
                        })
                    });
                    let _ = writeln!(
                        o,
                        "    {:>7.1} {:>6}  live A/B: {} turns (its result line above)",
                        p.start_s,
                        "",
                        n.count()
                    );
                }
                continue;
            }
            let mut what = if p.changes.is_empty() {
                "(start)".to_string()
            } else {
                p.changes.join(", ")
            };
            if p.baseline {
                what.push_str("  [baseline]");
            }
            let st = p.stats();
            let mut row = format!("    {:>7.1} {:>6.1}", p.start_s, p.duration_s);
            for (m, w) in PhaseSummary::metrics().zip(&widths) {
                let _ = write!(row, " {:>w$}", m.cell((m.window)(&st)));
            }
            let _ = writeln!(o, "{row}  {what}");
            if let Some(b) = base {
                let _ = writeln!(o, "    {:>14} vs baseline: {}", "", p.versus(b));
            }
            if p.baseline {
                base = Some(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session's summary leads with where it started, what changed and
    /// its A/B results; an A/B's own switches are counted, not listed,
    /// in the changes and the phases.
    #[test]
    fn a_session_leads_with_its_start_changes_and_results() {
        let ev = |t_s: f64, l: &str| Event {
            t_s,
            label: l.into(),
        };
        let mut events = vec![
            ev(15.3, "baseline"),
            ev(19.3, "workers.mode: unbound -> inline"),
            ev(32.9, AB_START),
        ];
        for (i, t) in [37.8, 42.8, 48.0, 53.0].iter().enumerate() {
            let (a, b) = if i % 2 == 0 {
                ("inline", "unbound")
            } else {
                ("unbound", "inline")
            };
            events.push(ev(*t, &format!("workers.mode: {a} -> {b}")));
        }
        events.push(ev(
            57.9,
            &format!(
                "{AB_RESULT}2 rounds, baseline -> now: MiB/s 69.4 -> 69.6 ~+0% (within noise)"
            ),
        ));
        events.push(ev(57.9, AB_STOP));
        events.push(ev(60.0, "caption: a demo's words"));
        events.push(ev(61.0, "pipeline.decrypt: true -> false"));
        let s = Session::of(&events);
        assert_eq!(
            s.started,
            ["workers.mode = unbound", "pipeline.decrypt = true"]
        );
        assert_eq!(
            s.changes,
            [
                "15.3s baseline",
                "19.3s workers.mode: unbound -> inline",
                "32.9s A/B start (4 switches)",
                "57.9s A/B stop",
                "61.0s pipeline.decrypt: true -> false"
            ]
        );
        assert_eq!(s.results.len(), 1);
        assert_eq!(s.ab_spans, [(32.9, 57.9)]);
        let mut o = String::new();
        s.write(&mut o);
        assert!(
            o.starts_with(
                "  started with: workers.mode = unbound, pipeline.decrypt = true\n  changes:\n    15.3s baseline\n    19.3s workers.mode: unbound -> inline\n"
            ),
            "{o}"
        );
        assert!(
            o.contains("\n  A/B result: 2 rounds, baseline -> now: MiB/s 69.4"),
            "{o}"
        );
        // The phases inside the A/B: one line.
        let phase = |t: f64| PhaseSummary {
            start_s: t,
            changes: vec!["x".into()],
            duration_s: 4.0,
            throughput_mib_s: 1.0,
            iops: 1.0,
            p50_us: 1.0,
            p99_us: 1.0,
            queue_p99_us: 0.0,
            run_delay_ms_per_s: 1.0,
            baseline: false,
        };
        let phases: Vec<PhaseSummary> = [0.0, 19.3, 37.8, 42.8, 48.0, 53.0, 61.0]
            .iter()
            .map(|&t| phase(t))
            .collect();
        let mut o = String::new();
        write_phases(&phases, &s.ab_spans, &mut o);
        assert_eq!(
            o.matches("live A/B: 4 turns (its result line above)")
                .count(),
            1,
            "{o}"
        );
        assert_eq!(o.lines().count(), 2 + 3 + 1, "{o}");
    }

    #[test]
    fn a_notice_raised_again_is_said_once_with_how_often() {
        let n = |t: &str| t.to_string();
        let mut o = String::new();
        write_notices(&[n("a"), n("b"), n("a"), n("a")], &mut o);
        assert_eq!(o, "  notice (3 times): a\n  notice: b\n");
    }

    #[test]
    fn a_phase_says_its_change_from_the_baseline() {
        let p = |mib: f64, p99: f64, rd: f64| PhaseSummary {
            start_s: 0.0,
            changes: Vec::new(),
            duration_s: 10.0,
            throughput_mib_s: mib,
            iops: mib * 256.0,
            p50_us: 100.0,
            p99_us: p99,
            queue_p99_us: 0.0,
            run_delay_ms_per_s: rd,
            baseline: false,
        };
        assert_eq!(
            p(31.0, 400.0, 2.0).versus(&p(31.0, 1_000.0, 40.0)),
            "MiB/s +0%, p50 +0%, p99 -60%, queue p99 -, run_delay/s -95%"
        );
        // The table: its columns titled and written as the metric table
        // says (run_delay in ms/s, not through a latency formatter).
        let mut base = p(31.0, 1_000.0, 40.0);
        base.baseline = true;
        let mut next = p(31.0, 400.0, 2.25);
        next.start_s = 10.0;
        next.changes = vec!["workers.mode: unbound -> bound".into()];
        let mut o = String::new();
        write_phases(&[base, next], &[], &mut o);
        assert_eq!(
            o,
            "  by settings phase (the interval of each change left out):\n\
             \x20    from s   secs     MiB/s    p50 us    p99 us queue p99 us run_delay ms/s  settings\n\
             \x20       0.0   10.0      31.0       100      1000          0.0           40.0  (start)  [baseline]\n\
             \x20      10.0   10.0      31.0       100       400          0.0            2.2  workers.mode: unbound -> bound\n\
             \x20                  vs baseline: MiB/s +0%, p50 +0%, p99 -60%, queue p99 -, run_delay/s -94%\n"
        );
    }
}
