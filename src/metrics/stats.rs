//! Statistics over a window of intervals: exact percentiles merged from
//! the records' histograms ([`WindowStats`]), a metric's spread over
//! intervals or rounds ([`Spread`]) and the [`median`] every consumer
//! uses. One implementation, so the explorer, `compare` and the summary
//! agree on what "median" and "inside the noise" mean.

use serde::{Deserialize, Serialize};

use super::record::{IntervalRecord, empty_hist};

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
    /// Queue wait p99, us (0 without queues; NaN where the kernel's
    /// queues were not traced).
    #[serde(default, with = "nan_as_null")]
    pub queue_p99_us: f64,
    /// Workers' run_delay per second of wall time, ms/s (the unit of
    /// run_delay everywhere: see [`super::table`]; NaN untraced).
    #[serde(default, with = "nan_as_null")]
    pub run_delay_ms_per_s: f64,
    /// Page-cache hit ratio of the window's reads, % (None off the
    /// page-cache path).
    #[serde(default)]
    pub page_hit_pct: Option<f64>,
    /// Bios per second (each one decrypted and verified as one item; NaN
    /// where the kernel's block layer was not traced).
    #[serde(default, with = "nan_as_null")]
    pub bios_per_s: f64,
    /// Median over the intervals of a post-read work item's median
    /// execution (decryption's, else verification's), us; NaN with none.
    #[serde(default)]
    pub exec_p50_us: Option<f64>,
    /// Post-read work items run on another CPU than queued, %; None with
    /// no item.
    #[serde(default)]
    pub moved_pct: Option<f64>,
    /// Post-read work items queued to an unbound pool, %; None with no item.
    #[serde(default)]
    pub unbound_pct: Option<f64>,
    /// Post-read work items run by a high-priority (negative nice) worker,
    /// %; None with no item.
    #[serde(default)]
    pub highpri_pct: Option<f64>,
    /// The readers' time asleep in iowait, ms per second, over the
    /// intervals that counted it; None where none did.
    #[serde(default)]
    pub iowait_ms_per_s: Option<f64>,
    /// The most post-read items of one kernel queue executing at once in
    /// any of the intervals; None where the kernel's queues were not
    /// traced or ran none.
    #[serde(default)]
    pub items_at_once: Option<f64>,
}

impl WindowStats {
    /// Merges the records' exact histograms and counters.
    pub fn of<'a>(records: impl IntoIterator<Item = &'a IntervalRecord>) -> Option<WindowStats> {
        let mut lat = empty_hist();
        let mut queue = empty_hist();
        let mut st = WindowStats::default();
        let (mut bytes, mut run_delay, mut first) = (0u64, 0.0, true);
        let (mut hits, mut misses, mut bios) = (0u64, 0u64, 0u64);
        let mut items = crate::metrics::Counters::default();
        let mut exec = Vec::new();
        let mut iowait: Option<(f64, f64)> = None;
        let mut untraced = false;
        for r in records.into_iter().filter(|r| !r.paused) {
            untraced |= r.kernel.as_ref().is_some_and(|k| k.untraced);
            let at_once = r.items_at_once();
            if at_once.is_finite() {
                st.items_at_once = Some(st.items_at_once.map_or(at_once, |m: f64| m.max(at_once)));
            }
            if let Some(w) = r.readers_iowait {
                let (ms, secs) = iowait.unwrap_or_default();
                iowait = Some((ms + w.ms, secs + r.interval_s));
            }
            hits += r.page_cache.hits;
            misses += r.page_cache.misses;
            bios += r.counters.bios;
            items.items_run += r.counters.items_run;
            items.items_moved += r.counters.items_moved;
            items.items_unbound += r.counters.items_unbound;
            items.items_highpri += r.counters.items_highpri;
            exec.push(r.exec_p50_us());
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
        Sums {
            bytes,
            run_delay_us: run_delay,
            pages: (hits, misses, bios),
            lat: &lat,
            queue: &queue,
            untraced,
        }
        .fill(&mut st);
        let exec = median(exec);
        st.exec_p50_us = exec.is_finite().then_some(exec);
        st.moved_pct = items.moved_pct();
        st.unbound_pct = items.unbound_pct();
        st.highpri_pct = items.highpri_pct();
        st.iowait_ms_per_s = iowait
            .filter(|&(_, secs)| secs > 0.0)
            .map(|(ms, secs)| ms / secs);
        Some(st)
    }
}

/// What a window sums over its intervals besides its seconds and reads:
/// [`WindowStats::of`] and the explorer's sliding window
/// ([`super::window::WindowAcc`]) both keep these, and [`Sums::fill`] is
/// the one fold that turns them into a window's figures.
pub(crate) struct Sums<'h> {
    /// Bytes read.
    pub bytes: u64,
    /// The workers' run_delay, us.
    pub run_delay_us: f64,
    /// Page-cache hits, misses (pages) and bios.
    pub pages: (u64, u64, u64),
    /// End-to-end latency, ns, exact.
    pub lat: &'h hdrhistogram::Histogram<u64>,
    /// Queue wait, ns, exact.
    pub queue: &'h hdrhistogram::Histogram<u64>,
    /// An interval of the kernel target without its tracepoints: the
    /// queue wait, run_delay and bios that need them are unmeasured.
    pub untraced: bool,
}

impl Sums<'_> {
    /// Fills `st`'s rates and percentiles from these sums over `st.secs`
    /// seconds and `st.reads` reads.
    pub(crate) fn fill(&self, st: &mut WindowStats) {
        let secs = st.secs.max(1e-9);
        let q = |h: &hdrhistogram::Histogram<u64>, p: f64| {
            if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(p) as f64 / 1e3
            }
        };
        let (hits, misses, bios) = self.pages;
        st.throughput_mib_s = self.bytes as f64 / (1024.0 * 1024.0) / secs;
        st.iops = st.reads as f64 / secs;
        st.p50_us = q(self.lat, 0.5);
        st.p99_us = q(self.lat, 0.99);
        st.p999_us = q(self.lat, 0.999);
        st.queue_p99_us = q(self.queue, 0.99);
        st.run_delay_ms_per_s = super::record::run_delay_ms_per_s(self.run_delay_us, st.secs);
        st.page_hit_pct = (hits + misses > 0).then(|| hits as f64 * 100.0 / (hits + misses) as f64);
        st.bios_per_s = bios as f64 / secs;
        if self.untraced {
            st.queue_p99_us = f64::NAN;
            st.run_delay_ms_per_s = f64::NAN;
            st.bios_per_s = f64::NAN;
        }
    }
}

/// The median of the finite values (mean of the middle two for an even
/// count); NaN when there is none.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One metric over a set of samples (a window's intervals, an
/// experiment's rounds): median, lowest and highest, and (in `compare`)
/// the median's change from the first variant's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Median of the samples (NaN with none: `null` in JSON).
    #[serde(with = "nan_as_null")]
    pub median: f64,
    /// Lowest sample.
    #[serde(with = "nan_as_null")]
    pub min: f64,
    /// Highest sample.
    #[serde(with = "nan_as_null")]
    pub max: f64,
    /// Change of the median relative to a reference's, % (None for the
    /// reference itself, or when the reference is 0 or missing).
    pub change_pct: Option<f64>,
}

/// A figure that may be missing (NaN) as JSON: `null`, read back as NaN
/// (JSON has no NaN; serde_json writes it as `null` and cannot read that
/// into an f64).
mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

impl Spread {
    /// The spread of `values` (non-finite ones left out; with none, every
    /// figure NaN and [`Spread::holds`] false).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Spread {
        let v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Spread {
                median: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
                change_pct: None,
            };
        }
        Spread {
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            median: median(v),
            change_pct: None,
        }
    }

    /// True when `value` lies within the samples' range: a change to it
    /// is inside the noise.
    pub fn holds(&self, value: f64) -> bool {
        self.min <= value && value <= self.max
    }

    /// True when the two ranges overlap.
    pub fn overlaps(&self, o: &Spread) -> bool {
        self.min <= o.max && o.min <= self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_lists() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(vec![5.0]), 5.0);
        assert!(median(vec![]).is_nan());
        // Missing values (NaN) are left out, not sorted in.
        assert_eq!(median(vec![1.0, f64::NAN, 2.0]), 1.5);
        assert!(median(vec![f64::NAN]).is_nan());
    }

    #[test]
    fn a_spread_holds_its_range_and_overlaps() {
        let a = Spread::of([3.0, 1.0, 2.0]);
        assert_eq!((a.median, a.min, a.max), (2.0, 1.0, 3.0));
        assert!(a.holds(1.0) && a.holds(3.0) && !a.holds(3.5));
        let b = Spread::of([3.0, 4.0]);
        assert!(a.overlaps(&b) && b.overlaps(&a));
        assert!(!a.overlaps(&Spread::of([4.0, 5.0])));
        let none = Spread::of([f64::NAN]);
        assert!(none.median.is_nan() && !none.holds(0.0));
    }

    #[test]
    fn the_kernel_untraced_leaves_its_queue_figures_unmeasured_not_zero() {
        let rec = |untraced: bool| IntervalRecord {
            t_s: 1.0,
            interval_s: 1.0,
            reads: 10,
            bytes: 10 << 20,
            kernel: Some(crate::metrics::KernelRecord {
                untraced,
                ..Default::default()
            }),
            ..Default::default()
        };
        let traced = WindowStats::of([&rec(false)]).unwrap();
        assert_eq!(traced.throughput_mib_s, 10.0);
        assert_eq!(
            (
                traced.queue_p99_us,
                traced.run_delay_ms_per_s,
                traced.bios_per_s
            ),
            (0.0, 0.0, 0.0)
        );
        let mut acc = crate::metrics::window::WindowAcc::default();
        acc.add(&rec(true));
        for st in [
            WindowStats::of([&rec(true)]).unwrap(),
            acc.stats(0.0, 1.0).unwrap(),
        ] {
            assert_eq!(st.throughput_mib_s, 10.0);
            assert!(st.queue_p99_us.is_nan() && st.run_delay_ms_per_s.is_nan());
            assert!(st.bios_per_s.is_nan());
            // In JSON they are null, and read back as unmeasured.
            let json = serde_json::to_string(&st).unwrap();
            assert!(json.contains("\"queue_p99_us\":null"), "{json}");
            let back: WindowStats = serde_json::from_str(&json).unwrap();
            assert!(back.bios_per_s.is_nan());
        }
        acc.remove(&rec(true));
        acc.add(&rec(false));
        assert_eq!(acc.stats(0.0, 1.0).unwrap().bios_per_s, 0.0);
        let r = rec(true);
        for m in ["queue_p99_us", "run_delay_ms_per_s", "bios_per_s"] {
            let m = crate::metrics::table::metric(m).unwrap();
            assert!((m.interval)(&r).is_nan(), "{}", m.name);
            assert_eq!(m.cell((m.interval)(&r)), "-");
        }
    }
}
