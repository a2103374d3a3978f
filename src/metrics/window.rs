//! Window statistics the explorer keeps current record by record: running
//! sums and merged exact histograms over a contiguous run of intervals, so
//! the "now" panel costs one record's work per interval, not a re-merge of
//! the whole window.

use hdrhistogram::Histogram;

use super::{IntervalRecord, WindowStats, empty_hist};

/// Running sums over a contiguous run of records, added at the back and
/// removed at the front, so keeping the "now" window current costs one
/// record's work per interval instead of re-merging the whole window
/// (13 ms per record at a 10-minute window, measured with the test fixture).
#[derive(Debug, Clone)]
pub struct WindowAcc {
    lat: Histogram<u64>,
    queue: Histogram<u64>,
    scratch: Histogram<u64>,
    /// Latency distribution of the window, [`super::BUCKET_COUNT`] buckets.
    pub buckets: Vec<u64>,
    reads: u64,
    bytes: u64,
    secs: f64,
    run_delay: f64,
    /// Page-cache hits, misses (pages) and bios.
    pc: (u64, u64, u64),
    /// Intervals of the kernel target without its tracepoints.
    untraced: u64,
    /// A subtraction failed (cannot happen with matching adds): the owner
    /// rebuilds the window from its records.
    pub broken: bool,
}

impl Default for WindowAcc {
    fn default() -> Self {
        WindowAcc {
            lat: empty_hist(),
            queue: empty_hist(),
            scratch: empty_hist(),
            buckets: Vec::new(),
            reads: 0,
            bytes: 0,
            secs: 0.0,
            run_delay: 0.0,
            pc: (0, 0, 0),
            untraced: 0,
            broken: false,
        }
    }
}

impl WindowAcc {
    /// Adds a record's measurements (paused intervals hold none).
    pub fn add(&mut self, r: &IntervalRecord) {
        let mut b = crate::metrics::LatencyBuckets {
            counts: std::mem::take(&mut self.buckets),
        };
        b.add(&r.latency_buckets);
        self.buckets = b.counts;
        if r.paused {
            return;
        }
        self.reads += r.reads;
        self.bytes += r.bytes;
        self.secs += r.interval_s;
        self.run_delay += r.workers.run_delay_us;
        self.untraced += u64::from(r.kernel.as_ref().is_some_and(|k| k.untraced));
        let c = &r.page_cache;
        self.pc = (
            self.pc.0 + c.hits,
            self.pc.1 + c.misses,
            self.pc.2 + r.counters.bios,
        );
        r.latency_hist.add_to(&mut self.lat);
        r.queue_hist.add_to(&mut self.queue);
    }

    /// Removes a record added earlier.
    pub fn remove(&mut self, r: &IntervalRecord) {
        for (a, b) in self.buckets.iter_mut().zip(&r.latency_buckets.counts) {
            *a = a.saturating_sub(*b);
        }
        if r.paused {
            return;
        }
        self.reads -= r.reads.min(self.reads);
        self.bytes -= r.bytes.min(self.bytes);
        self.secs -= r.interval_s;
        self.run_delay -= r.workers.run_delay_us;
        self.untraced -=
            u64::from(r.kernel.as_ref().is_some_and(|k| k.untraced)).min(self.untraced);
        let c = &r.page_cache;
        self.pc = (
            self.pc.0.saturating_sub(c.hits),
            self.pc.1.saturating_sub(c.misses),
            self.pc.2.saturating_sub(r.counters.bios),
        );
        for (sparse, h) in [
            (&r.latency_hist, &mut self.lat),
            (&r.queue_hist, &mut self.queue),
        ] {
            self.scratch.reset();
            sparse.add_to(&mut self.scratch);
            if h.subtract(&self.scratch).is_err() {
                self.broken = true;
            }
        }
    }

    /// The window's stats, `None` when it holds no running interval: the
    /// same fold as [`WindowStats::of`] ([`super::stats::Sums`]). What the
    /// sliding window does not keep (the explorer does not show it) stays
    /// None: `WindowStats::of` has it.
    pub fn stats(&self, from_s: f64, to_s: f64) -> Option<WindowStats> {
        if self.secs <= 1e-9 {
            return None;
        }
        let mut st = WindowStats {
            from_s,
            to_s,
            secs: self.secs,
            reads: self.reads,
            ..WindowStats::default()
        };
        super::stats::Sums {
            bytes: self.bytes,
            run_delay_us: self.run_delay,
            pages: self.pc,
            lat: &self.lat,
            queue: &self.queue,
            untraced: self.untraced > 0,
        }
        .fill(&mut st);
        Some(st)
    }
}
