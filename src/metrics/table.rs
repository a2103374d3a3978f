//! The one table of metrics: for each, its name (the JSON key), its
//! titles, the getter from an interval record and from a window's (or a
//! round's) statistics, its unit, which direction is better and how it is
//! written. The explorer's baseline panel and its spreads, presentation
//! mode, `compare`, `plot`, the run summary's phases and the JSON all
//! read it, so a metric is added (or its unit changed) in one place.
//!
//! **run_delay** has one unit everywhere: milliseconds of the workers'
//! run_delay (time runnable but not running, summed over the workers) per
//! second of wall time, `ms/s`. A rate, so rounds and windows of different
//! lengths compare; a kernel engineer reads it as "how many ms of every
//! second the post-read work waited for a CPU". The JSON key is
//! `run_delay_ms_per_s` (interval records keep the raw per-interval
//! `workers.run_delay_us` and the summary its `run_delay_us_total`).

use super::format::{fmt_count, fmt_ms, fmt_rate, fmt_us};
use super::record::IntervalRecord;
use super::stats::WindowStats;

/// What a metric counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// MiB per second.
    MibPerS,
    /// Reads per second.
    Iops,
    /// A latency, microseconds.
    Us,
    /// Milliseconds (of run_delay) per second of wall time.
    MsPerS,
    /// Percent.
    Pct,
    /// Bios per second.
    BiosPerS,
    /// A count of things at once (work items).
    Count,
}

impl Unit {
    /// The unit as a table or axis says it.
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::MibPerS => "MiB/s",
            Unit::Iops => "IOPS",
            Unit::Us => "us",
            Unit::MsPerS => "ms/s",
            Unit::Pct => "%",
            Unit::BiosPerS => "bios/s",
            Unit::Count => "items",
        }
    }
}

/// Which direction of a change is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// More is better (throughput, hit rates).
    Higher,
    /// Less is better (latencies, run_delay).
    Lower,
    /// Neither: a fact, not a score (the share of items on unbound pools).
    Neither,
}

/// One metric.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Its key in JSON (`compare`'s `metrics.<name>`) and in `WindowStats`.
    pub name: &'static str,
    /// Its row title in `compare`'s table, unit included (`p99 us`).
    pub label: &'static str,
    /// Its title on screen (the explorer's baseline panel, the summary's
    /// phase changes), the unit carried by the value or the title.
    pub short: &'static str,
    /// Its title where the baseline panel is narrow (at most 8 columns).
    pub narrow: &'static str,
    /// What it counts.
    pub unit: Unit,
    /// Which way is better.
    pub better: Better,
    /// Shown in the explorer's baseline panel (and its spreads).
    pub explorer: bool,
    /// Its value in one interval (NaN where the interval has none).
    pub interval: fn(&IntervalRecord) -> f64,
    /// Its value over a window or a round (NaN where it has none).
    pub window: fn(&WindowStats) -> f64,
}

/// The workers' run_delay over an interval, ms per second of wall time
/// (NaN for the kernel target untraced: its kworkers are not known).
pub fn run_delay_ms_per_s(r: &IntervalRecord) -> f64 {
    if r.untraced() {
        return f64::NAN;
    }
    super::record::run_delay_ms_per_s(r.workers.run_delay_us, r.interval_s)
}

/// Throughput of good reads, MiB/s.
pub const THROUGHPUT: Metric = Metric {
    name: "throughput_mib_s",
    label: "MiB/s",
    short: "MiB/s",
    narrow: "MiB/s",
    unit: Unit::MibPerS,
    better: Better::Higher,
    explorer: true,
    interval: |r| r.throughput_mib_s,
    window: |s| s.throughput_mib_s,
};

/// Good reads per second.
pub const IOPS: Metric = Metric {
    name: "iops",
    label: "IOPS",
    short: "IOPS",
    narrow: "IOPS",
    unit: Unit::Iops,
    better: Better::Higher,
    explorer: true,
    interval: |r| r.iops,
    window: |s| s.iops,
};

/// End-to-end median latency, us.
pub const P50: Metric = Metric {
    name: "p50_us",
    label: "p50 us",
    short: "p50",
    narrow: "p50",
    unit: Unit::Us,
    better: Better::Lower,
    explorer: true,
    interval: |r| r.latency_us.p50,
    window: |s| s.p50_us,
};

/// End-to-end p99 latency, us.
pub const P99: Metric = Metric {
    name: "p99_us",
    label: "p99 us",
    short: "p99",
    narrow: "p99",
    unit: Unit::Us,
    better: Better::Lower,
    explorer: true,
    interval: |r| r.latency_us.p99,
    window: |s| s.p99_us,
};

/// End-to-end p99.9 latency, us.
pub const P999: Metric = Metric {
    name: "p999_us",
    label: "p99.9 us",
    short: "p99.9",
    narrow: "p99.9",
    unit: Unit::Us,
    better: Better::Lower,
    explorer: true,
    interval: |r| r.latency_us.p999,
    window: |s| s.p999_us,
};

/// p99 of the wait in the workqueues, us.
pub const QUEUE_P99: Metric = Metric {
    name: "queue_p99_us",
    label: "queue p99 us",
    short: "queue p99",
    narrow: "q p99",
    unit: Unit::Us,
    better: Better::Lower,
    explorer: true,
    interval: |r| {
        if r.untraced() {
            f64::NAN
        } else {
            r.stages_us.queue.p99
        }
    },
    window: |s| s.queue_p99_us,
};

/// The workers' run_delay, ms per second of wall time.
pub const RUN_DELAY: Metric = Metric {
    name: "run_delay_ms_per_s",
    label: "run_delay ms/s",
    short: "run_delay/s",
    narrow: "rdelay/s",
    unit: Unit::MsPerS,
    better: Better::Lower,
    explorer: true,
    interval: run_delay_ms_per_s,
    window: |s| s.run_delay_ms_per_s,
};

/// Page-cache hit ratio of the reads, %.
pub const PAGE_HIT: Metric = Metric {
    name: "page_hit_pct",
    label: "page hit %",
    short: "page hit",
    narrow: "page hit",
    unit: Unit::Pct,
    better: Better::Higher,
    explorer: false,
    interval: |r| r.page_cache.hit_pct.unwrap_or(f64::NAN),
    window: |s| s.page_hit_pct.unwrap_or(f64::NAN),
};

/// Bios per second (each decrypted and verified as one item).
pub const BIOS: Metric = Metric {
    name: "bios_per_s",
    label: "bios/s",
    short: "bios/s",
    narrow: "bios/s",
    unit: Unit::BiosPerS,
    better: Better::Higher,
    explorer: false,
    interval: |r| {
        if r.untraced() {
            f64::NAN
        } else {
            r.page_cache.bios as f64 / r.interval_s.max(1e-9)
        }
    },
    window: |s| s.bios_per_s,
};

/// Median execution of a post-read work item, us.
pub const EXEC_P50: Metric = Metric {
    name: "exec_p50_us",
    label: "exec p50 us",
    short: "exec p50",
    narrow: "exec p50",
    unit: Unit::Us,
    better: Better::Lower,
    explorer: false,
    interval: IntervalRecord::exec_p50_us,
    window: |s| s.exec_p50_us.unwrap_or(f64::NAN),
};

/// Post-read work items run on another CPU than the one that queued them,
/// % (the model's by `sched_getcpu`, the kernel's from its workqueue
/// tracepoints). Lower is better: a moved item paid a wakeup on another
/// CPU (an idle one's, in a VM a halted vCPU's) and a cold cache.
pub const MOVED: Metric = Metric {
    name: "moved_pct",
    label: "moved %",
    short: "moved",
    narrow: "moved",
    unit: Unit::Pct,
    better: Better::Lower,
    explorer: false,
    interval: |r| r.counters.moved_pct().unwrap_or(f64::NAN),
    window: |s| s.moved_pct.unwrap_or(f64::NAN),
};

/// Post-read work items queued to an unbound pool, % (the model's by its
/// queue, the kernel's by the pool its `workqueue_queue_work` tracepoint
/// names: cpu=-1 for an unbound pool). 100 on an unbound queue, 0 on a
/// bound one: what a seed's revert changed, said by the kernel itself.
pub const UNBOUND: Metric = Metric {
    name: "unbound_pct",
    label: "unbound %",
    short: "unbound",
    narrow: "unbnd",
    unit: Unit::Pct,
    better: Better::Neither,
    explorer: false,
    interval: |r| r.counters.unbound_pct().unwrap_or(f64::NAN),
    window: |s| s.unbound_pct.unwrap_or(f64::NAN),
};

/// Post-read work items run by a worker at a negative nice, % (the model's
/// by its workers' nice, the kernel's by each kworker's nice in `/proc`):
/// 100 on a WQ_HIGHPRI queue (nice -20 workers), 0 on a normal one.
pub const HIGHPRI: Metric = Metric {
    name: "highpri_pct",
    label: "highpri %",
    short: "highpri",
    narrow: "hipri",
    unit: Unit::Pct,
    better: Better::Neither,
    explorer: false,
    interval: |r| r.counters.highpri_pct().unwrap_or(f64::NAN),
    window: |s| s.highpri_pct.unwrap_or(f64::NAN),
};

/// The readers' time asleep in iowait, ms per second of wall time, summed
/// over the readers (the kernel's delay accounting, where it is on):
/// what the 2023 io_uring seed changed for a reader waiting in the CQ wait,
/// and what cpuidle and cpufreq's iowait boost read. A fact, not a score.
pub const IOWAIT: Metric = Metric {
    name: "iowait_ms_per_s",
    label: "iowait ms/s",
    short: "iowait/s",
    narrow: "iowait/s",
    unit: Unit::MsPerS,
    better: Better::Neither,
    explorer: false,
    interval: |r| {
        r.readers_iowait
            .map_or(f64::NAN, |w| w.ms / r.interval_s.max(1e-9))
    },
    window: |s| s.iowait_ms_per_s.unwrap_or(f64::NAN),
};

/// The most post-read items of one queue executing at once (the kernel
/// target's, from its workqueue tracepoints; the model has no figure): what
/// a queue's `max_active` bounds (fscrypt's unbound queue: the lab switch
/// `fscrypt_max_active`). An interval's is the most seen in it, a window's
/// or a round's the most of its intervals.
pub const AT_ONCE: Metric = Metric {
    name: "items_at_once",
    label: "items at once",
    short: "at once",
    narrow: "at once",
    unit: Unit::Count,
    better: Better::Neither,
    explorer: false,
    interval: IntervalRecord::items_at_once,
    window: |s| s.items_at_once.unwrap_or(f64::NAN),
};

/// Every metric, in the order screens and tables list them.
pub static METRICS: [Metric; 15] = [
    THROUGHPUT, IOPS, P50, P99, P999, QUEUE_P99, EXEC_P50, RUN_DELAY, MOVED, UNBOUND, HIGHPRI,
    AT_ONCE, IOWAIT, PAGE_HIT, BIOS,
];

/// The metric named `name` (its JSON key).
pub fn metric(name: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.name == name)
}

/// The metric named `name`; panics on a name not in [`METRICS`] (for
/// constants in code, checked by the tests).
pub fn named(name: &str) -> &'static Metric {
    metric(name).unwrap_or_else(|| panic!("no metric {name}"))
}

impl Metric {
    /// Its position in [`METRICS`] (the index of its spread).
    pub fn index(&self) -> usize {
        METRICS
            .iter()
            .position(|m| m.name == self.name)
            .expect("a metric of the table")
    }

    /// True when a change of `change_pct` (or any signed change) is an
    /// improvement.
    pub fn better_by(&self, change_pct: f64) -> bool {
        match self.better {
            Better::Higher => change_pct > 0.0,
            Better::Lower => change_pct < 0.0,
            Better::Neither => false,
        }
    }

    /// True when `to` is better than `from`.
    pub fn improves(&self, from: f64, to: f64) -> bool {
        self.better_by(to - from)
    }

    /// `v` on screen, compact, its unit in the value where the title does
    /// not carry it: `31.2` (MiB/s), `8.0K` (IOPS), `850us`, `1.2ms` (per
    /// second: run_delay/s), `97.5%`.
    pub fn show(&self, v: f64) -> String {
        if !v.is_finite() {
            return "-".into();
        }
        match self.unit {
            Unit::MibPerS => fmt_rate(v),
            Unit::Iops | Unit::BiosPerS => fmt_count(v),
            Unit::Us => fmt_us(v),
            Unit::MsPerS => fmt_ms(v),
            Unit::Pct => format!("{v:.1}%"),
            Unit::Count => format!("{v:.0}"),
        }
    }

    /// `v` in a table whose row title carries the unit (`compare`):
    /// `31.2`, `8000`, `512`, `1.2`; `-` without a value.
    pub fn cell(&self, v: f64) -> String {
        if !v.is_finite() {
            return "-".into();
        }
        match self.unit {
            Unit::MibPerS => format!("{v:.1}"),
            Unit::Iops | Unit::Count => format!("{v:.0}"),
            _ if v >= 100.0 => format!("{v:.0}"),
            _ => format!("{v:.1}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_says_its_unit_and_direction() {
        let want = [
            ("throughput_mib_s", "MiB/s", Better::Higher),
            ("iops", "IOPS", Better::Higher),
            ("p50_us", "us", Better::Lower),
            ("p99_us", "us", Better::Lower),
            ("p999_us", "us", Better::Lower),
            ("queue_p99_us", "us", Better::Lower),
            ("exec_p50_us", "us", Better::Lower),
            ("run_delay_ms_per_s", "ms/s", Better::Lower),
            ("moved_pct", "%", Better::Lower),
            ("unbound_pct", "%", Better::Neither),
            ("highpri_pct", "%", Better::Neither),
            ("items_at_once", "items", Better::Neither),
            ("iowait_ms_per_s", "ms/s", Better::Neither),
            ("page_hit_pct", "%", Better::Higher),
            ("bios_per_s", "bios/s", Better::Higher),
        ];
        assert_eq!(METRICS.len(), want.len());
        for (m, (name, unit, better)) in METRICS.iter().zip(want) {
            assert_eq!((m.name, m.unit.symbol(), m.better), (name, unit, better));
            assert_eq!(
                named(name).index(),
                METRICS.iter().position(|x| x.name == name).unwrap()
            );
            assert!(m.narrow.chars().count() <= 8, "{}", m.narrow);
            assert!(m.short.chars().count() <= 11, "{}", m.short);
        }
        let names: std::collections::BTreeSet<_> = METRICS.iter().map(|m| m.name).collect();
        assert_eq!(names.len(), METRICS.len(), "names are unique");
        assert!(named("p99_us").improves(100.0, 90.0));
        assert!(named("iops").improves(100.0, 110.0));
        assert!(!named("run_delay_ms_per_s").improves(1.0, 2.0));
    }

    #[test]
    fn moved_is_the_share_of_items_run_elsewhere_than_queued() {
        let mut r = IntervalRecord {
            interval_s: 0.25,
            reads: 1,
            ..Default::default()
        };
        let m = named("moved_pct");
        assert!((m.interval)(&r).is_nan(), "no item: not measured");
        r.counters.items_run = 8;
        r.counters.items_moved = 2;
        assert_eq!((m.interval)(&r), 25.0);
        let w = WindowStats::of([&r, &r]).unwrap();
        assert_eq!((m.window)(&w), 25.0);
    }

    #[test]
    fn run_delay_is_ms_per_second_of_an_interval_and_a_window() {
        let mut r = IntervalRecord {
            interval_s: 0.25,
            reads: 1,
            ..Default::default()
        };
        r.workers.run_delay_us = 9_000.0;
        let m = named("run_delay_ms_per_s");
        assert_eq!((m.interval)(&r), 36.0);
        let w = WindowStats::of([&r]).unwrap();
        assert!(((m.window)(&w) - 36.0).abs() < 1e-9, "{w:?}");
        assert_eq!(m.show(36.0), "36ms");
        assert_eq!(m.show(1.2), "1.2ms");
        assert_eq!(m.cell(1.2), "1.2");
        assert_eq!(m.cell(553.8), "554");
    }

    #[test]
    fn values_are_written_per_unit() {
        assert_eq!(named("throughput_mib_s").show(31.24), "31.2");
        assert_eq!(named("iops").show(7_990.0), "8.0K");
        assert_eq!(named("p99_us").show(84.2), "84us");
        assert_eq!(named("page_hit_pct").show(97.52), "97.5%");
        assert_eq!(named("p99_us").show(f64::NAN), "-");
        assert_eq!(named("iops").cell(7_990.4), "7990");
        assert_eq!(named("throughput_mib_s").cell(152.94), "152.9");
        assert_eq!(named("p50_us").cell(63.44), "63.4");
        assert_eq!(named("bios_per_s").cell(f64::NAN), "-");
    }
}
