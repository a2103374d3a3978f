//! Checks of untrusted interval records: a recording (or a remote
//! agent's stream) is read from outside, so every number is range-checked
//! and every list bounded before the explorer, `plot` or `replay` trust it.
//! The error names the field, its value and what is allowed.

use serde::Serialize;

use super::record::{IntervalRecord, POST_READ_QUEUES, Percentiles, SparseHist};
use super::recorder::{BUCKET_COUNT, Counters, MAX_LATENCY_NS};

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
/// Most threads a timeline names.
const MAX_THREADS: usize = 65_536;
/// Longest thread name a timeline carries (a kernel comm is 15 bytes).
const MAX_THREAD_NAME: usize = 64;
/// Latest time in a record, seconds (~30 years).
const MAX_T_S: f64 = 1e9;
/// Largest rate, or time total in us, a record may carry.
const MAX_RATE: f64 = 1e13;

/// Why a record read from outside was refused: the field, its value and
/// what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordError {
    /// A number outside its range, or not finite.
    #[error("{field} = {} is out of range: allowed {}..={}", num(*value), num(*lo), num(*hi))]
    Number {
        /// The field (`stages_us.queue.p99`).
        field: String,
        /// Its value.
        value: f64,
        /// The least allowed.
        lo: f64,
        /// The most allowed.
        hi: f64,
    },
    /// A count above its most.
    #[error("{field} = {value} is out of range: allowed 0..={max}")]
    Count {
        /// The field (`counters.reads`, `cpus[].cpu`).
        field: String,
        /// Its value.
        value: u64,
        /// The most allowed.
        max: u64,
    },
    /// A histogram value above the longest latency readpath records.
    #[error("{field}: value {value} ns is out of range: allowed 0..={MAX_LATENCY_NS}")]
    Latency {
        /// The histogram.
        field: String,
        /// The value, ns.
        value: u64,
    },
    /// A list longer than allowed.
    #[error("{field} has {len} entries: allowed at most {max}")]
    TooMany {
        /// The list.
        field: String,
        /// Its length.
        len: usize,
        /// The most allowed.
        max: usize,
    },
    /// Latency buckets neither absent nor of the recorder's count.
    #[error("latency_buckets.counts has {len} entries: allowed 0 or {BUCKET_COUNT}")]
    Buckets {
        /// How many there are.
        len: usize,
    },
    /// A name that is none of its list's.
    #[error("{field} = {value:?}: allowed {allowed}")]
    Name {
        /// The field (`pools[].kind`).
        field: &'static str,
        /// The name.
        value: String,
        /// The names allowed, as the message lists them.
        allowed: String,
    },
    /// An event's or notice's text longer than allowed.
    #[error("{field}[]: a text of {len} bytes: allowed at most {MAX_TEXT}")]
    Text {
        /// `events` or `notices`.
        field: &'static str,
        /// The text's length, bytes.
        len: usize,
    },
}

/// A number as a range message writes it: plain, or in exponent form when
/// far from 1.
fn num(x: f64) -> String {
    if x != 0.0 && !(1e-3..1e9).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

fn check_f64(name: &str, v: f64, lo: f64, hi: f64) -> Result<(), RecordError> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(RecordError::Number {
            field: name.to_string(),
            value: v,
            lo,
            hi,
        })
    }
}

fn check_count(name: &str, v: u64, max: u64) -> Result<(), RecordError> {
    if v <= max {
        Ok(())
    } else {
        Err(RecordError::Count {
            field: name.to_string(),
            value: v,
            max,
        })
    }
}

fn check_u64(name: &str, v: u64) -> Result<(), RecordError> {
    check_count(name, v, MAX_RECORD_COUNT)
}

fn check_len(name: &str, len: usize, max: usize) -> Result<(), RecordError> {
    if len <= max {
        Ok(())
    } else {
        Err(RecordError::TooMany {
            field: name.to_string(),
            len,
            max,
        })
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
    fn check(&self, name: &str) -> Result<(), RecordError> {
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
    fn check(&self, name: &str) -> Result<(), RecordError> {
        check_len(name, self.0.len(), MAX_HIST_ENTRIES)?;
        for &(v, n) in &self.0 {
            if v > MAX_LATENCY_NS {
                return Err(RecordError::Latency {
                    field: name.to_string(),
                    value: v,
                });
            }
            check_u64(&format!("{name}: count"), n)?;
        }
        Ok(())
    }
}

impl Counters {
    fn check(&self) -> Result<(), RecordError> {
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
    pub fn check(&self) -> Result<(), RecordError> {
        self.check_totals()?;
        self.check_hists()?;
        self.check_sched()?;
        self.check_cpus()?;
        self.check_caches()?;
        self.check_kernel()?;
        self.check_pools()?;
        self.counters.check()?;
        self.check_timeline()?;
        self.check_events()
    }

    /// The timeline's spans: bounded, each on a CPU readpath can pin, its
    /// times within the run (their order is checked as they are read).
    fn check_timeline(&self) -> Result<(), RecordError> {
        let Some(t) = &self.timeline else {
            return Ok(());
        };
        check_len(
            "timeline.spans",
            t.spans.len(),
            super::timeline::SPANS_PER_INTERVAL,
        )?;
        check_len("timeline.threads", t.threads.len(), MAX_THREADS)?;
        check_u64("timeline.dropped", t.dropped)?;
        let max_cpu = crate::settings::MAX_CPU_NUMBER as u64;
        let max_ns = (MAX_T_S * 1e9) as u64;
        for s in &t.spans {
            check_count("timeline.spans[].cpu", u64::from(s.cpu), max_cpu)?;
            check_count(
                "timeline.spans[].queued_cpu",
                u64::from(s.queued_cpu),
                max_cpu,
            )?;
            check_count("timeline.spans[].end", s.end_ns, max_ns)?;
        }
        for th in &t.threads {
            check_count(
                "timeline.threads[].name's bytes",
                th.name.len() as u64,
                MAX_THREAD_NAME as u64,
            )?;
        }
        Ok(())
    }

    /// The time, the interval, the totals, the rates and the latency percentiles.
    fn check_totals(&self) -> Result<(), RecordError> {
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
        Ok(())
    }

    /// The latency buckets and the exact histograms.
    fn check_hists(&self) -> Result<(), RecordError> {
        let n = self.latency_buckets.counts.len();
        if n != 0 && n != BUCKET_COUNT {
            return Err(RecordError::Buckets { len: n });
        }
        for &c in &self.latency_buckets.counts {
            check_u64("latency_buckets.counts", c)?;
        }
        self.latency_hist.check("latency_hist")?;
        self.queue_hist.check("queue_hist")?;
        Ok(())
    }

    /// The workers' and the irq threads' scheduling, and the run's run_delay.
    fn check_sched(&self) -> Result<(), RecordError> {
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
        if let Some(w) = &self.readers_iowait {
            check_f64("readers_iowait.ms", w.ms, 0.0, MAX_RATE)?;
        }
        check_f64(
            "run_delay_us_total",
            self.run_delay_us_total,
            0.0,
            MAX_RATE * 1e3,
        )?;
        Ok(())
    }

    /// The per-CPU figures, the process's CPU and memory.
    fn check_cpus(&self) -> Result<(), RecordError> {
        check_len("cpus", self.cpus.len(), crate::settings::MAX_CPU_NUMBER + 1)?;
        for c in &self.cpus {
            check_count(
                "cpus[].cpu",
                c.cpu as u64,
                crate::settings::MAX_CPU_NUMBER as u64,
            )?;
            check_f64("cpus[].busy_pct", c.busy_pct, 0.0, 100.0)?;
            check_f64("cpus[].iowait_pct", c.iowait_pct, 0.0, 100.0)?;
        }
        check_f64("process_cpu_pct", self.process_cpu_pct, 0.0, 100.0 * 8192.0)?;
        check_u64("rss_bytes", self.rss_bytes >> 10)?;
        Ok(())
    }

    /// The page cache's and the hash cache's figures.
    fn check_caches(&self) -> Result<(), RecordError> {
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
        Ok(())
    }

    /// The kernel target's queues and counts.
    fn check_kernel(&self) -> Result<(), RecordError> {
        if let Some(k) = &self.kernel {
            check_len("kernel.queues", k.queues.len(), POST_READ_QUEUES.len())?;
            for q in &k.queues {
                if !POST_READ_QUEUES.contains(&q.queue.as_str()) {
                    return Err(RecordError::Name {
                        field: "kernel.queues[].queue",
                        value: q.queue.clone(),
                        allowed: POST_READ_QUEUES.join(", "),
                    });
                }
                check_u64("kernel.queues[].items", q.items)?;
                q.queue_us.check("kernel.queues[].queue_us")?;
                q.exec_us.check("kernel.queues[].exec_us")?;
                check_f64("kernel.queues[].moved_pct", q.moved_pct, 0.0, 100.0)?;
            }
            check_u64("kernel.kworkers", u64::from(k.kworkers))?;
            check_u64("kernel.requests", k.requests)?;
            check_u64("kernel.lost", k.lost)?;
            check_f64("kernel.trace_lag_ms", k.trace_lag_ms, 0.0, 1e9)?;
            check_u64("kernel.cached_bytes", k.cached_bytes >> 10)?;
        }
        Ok(())
    }

    /// The worker pools: at most two, named, their counts bounded.
    fn check_pools(&self) -> Result<(), RecordError> {
        check_len("pools", self.pools.len(), 2)?;
        for p in &self.pools {
            if !matches!(p.queue.as_str(), "fscrypt" | "fsverity" | "highpri") {
                return Err(RecordError::Name {
                    field: "pools[].queue",
                    value: p.queue.clone(),
                    allowed: "\"fscrypt\", \"fsverity\", \"highpri\"".into(),
                });
            }
            if !matches!(p.kind.as_str(), "bound" | "unbound") {
                return Err(RecordError::Name {
                    field: "pools[].kind",
                    value: p.kind.clone(),
                    allowed: "\"bound\", \"unbound\"".into(),
                });
            }
            let most = (crate::settings::MAX_CPU_NUMBER as u64 + 1) * 64;
            for (f, v) in [
                ("workers", p.workers),
                ("running", p.running),
                ("blocked", p.blocked),
                ("blocked_peak", p.blocked_peak),
                ("created", p.created),
            ] {
                check_count(&format!("pools[].{f}"), u64::from(v), most)?;
            }
            check_u64("pools[].pending", p.pending)?;
        }
        Ok(())
    }

    /// The events and notices: bounded in number, their times in range, their texts in length.
    fn check_events(&self) -> Result<(), RecordError> {
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
            check_len(name, len, MAX_EVENTS)?;
            for (t, text_len) in items {
                check_f64(&format!("{name}[].t_s"), t, -1.0, MAX_T_S)?;
                if text_len > MAX_TEXT {
                    return Err(RecordError::Text {
                        field: name,
                        len: text_len,
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Role, Span, SpanKind, Timeline, TimelineThread};

    fn with(span: Span, name: &str) -> IntervalRecord {
        IntervalRecord {
            interval_s: 0.25,
            timeline: Some(Timeline {
                spans: vec![span],
                dropped: 0,
                threads: vec![TimelineThread {
                    tid: 1,
                    name: name.into(),
                    role: Role::Reader,
                }],
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_timeline_from_outside_is_held_to_real_cpus_times_and_names() {
        let ok = Span {
            kind: SpanKind::Verify,
            cpu: 3,
            queued_cpu: 0,
            tid: 1,
            queued_ns: 10,
            start_ns: 20,
            end_ns: 30,
        };
        assert_eq!(with(ok, "reader-0").check(), Ok(()));
        let e = with(Span { cpu: 9000, ..ok }, "reader-0")
            .check()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "timeline.spans[].cpu = 9000 is out of range: allowed 0..=8191"
        );
        let e = with(
            Span {
                end_ns: u64::MAX,
                ..ok
            },
            "reader-0",
        )
        .check()
        .unwrap_err();
        assert!(e.to_string().starts_with("timeline.spans[].end = "), "{e}");
        let e = with(ok, &"x".repeat(65)).check().unwrap_err();
        assert_eq!(
            e.to_string(),
            "timeline.threads[].name's bytes = 65 is out of range: allowed 0..=64"
        );
    }
}
