//! The records and the windows over them: the history kept for the widest
//! zoom, the change markers, the time window the charts show (or a demo's
//! whole length), and the "now" window slid over the records since the
//! latest marker, with its running sums and its verdict windows, each
//! record taken in once. Kept together because they move together: a
//! marker restarts "now", a zoom or a reset re-merges it, a record slides
//! it; so only [`Window::push`], [`Window::mark`], [`Window::zoom`] and
//! their kin change them, and "now" is always that of the records held.

use std::collections::VecDeque;

use crate::metrics::window::WindowAcc;
use crate::metrics::{IntervalRecord, WindowStats};
use crate::output::verdict::{SETTLE_S, START_SETTLE_S, WINDOW_S};

/// The time windows `z`/`Z` step through, in seconds.
pub const ZOOM_STEPS_S: [f64; 6] = [10.0, 30.0, 60.0, 120.0, 300.0, 600.0];
/// The window the charts open with.
pub const DEFAULT_WINDOW_S: f64 = 60.0;
/// History kept for the widest zoom.
pub const HISTORY_S: f64 = 600.0;

/// A labelled vertical line on the time charts.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Its number, from 1 in the order changes happened (the charts show
    /// it; the events panel lists it with what changed).
    pub n: usize,
    /// Seconds since the engine started.
    pub t_s: f64,
    /// What changed, short (`mode: unbound -> bound`).
    pub label: String,
}

/// The records, the markers and the windows over them.
#[derive(Debug, Clone)]
pub struct Window {
    /// Records, oldest first, at most [`HISTORY_S`] of them.
    history: VecDeque<IntervalRecord>,
    /// Change markers, oldest first.
    markers: Vec<Marker>,
    /// The number of the latest marker (numbers go on after a reset).
    marker_seq: usize,
    /// Stats of the "now" window ([`Self::now_records`]), kept current by
    /// [`Self::refresh`] so frames do not re-merge histograms.
    now: Option<WindowStats>,
    /// Latency distribution of the "now" window.
    now_buckets: Vec<u64>,
    /// The "now" window's measurements per [`WINDOW_S`] window
    /// after [`SETTLE_S`], kept current with [`Self::now`].
    now_windows: Vec<WindowStats>,
    /// Running sums of the "now" window: the records of `history` from
    /// sequence number `acc_from_seq` on.
    acc: WindowAcc,
    acc_from_seq: u64,
    /// The verdict windows since the last marker (every one, "now"'s being
    /// those inside the time window), each measured once, as it closes:
    /// the records are cut from the marker on by `cut`, the window being
    /// filled starting at sequence number `cut_from`, records up to
    /// `cut_seq` taken in. `cut_anchor` is the marker's time (-inf with
    /// none; NaN: cut again from scratch).
    cut_windows: Vec<WindowStats>,
    cut: crate::output::verdict::Windows,
    cut_anchor: f64,
    cut_from: Option<u64>,
    cut_seq: Option<u64>,
    /// Where "now" was restarted without a change (`b`: what follows a
    /// baseline is compared with it, not the baseline's own stretch);
    /// -inf with none.
    now_anchor: f64,
    /// The time window, seconds.
    window_s: f64,
    /// Seconds since the engine started (the latest record's end).
    elapsed_s: f64,
    /// While a demo runs within its length (s), the charts span the whole
    /// demo, from its start to its end, filling left to right; after it
    /// (or on a zoom) they scroll as usual.
    demo_span: Option<f64>,
    /// Reads that failed verification, since the start.
    verity_failures: u64,
    /// Reads that failed at the device, since the start.
    io_errors: u64,
}

impl Default for Window {
    fn default() -> Self {
        Window::new()
    }
}

impl Window {
    /// No records yet, the default time window.
    pub fn new() -> Window {
        Window {
            history: VecDeque::new(),
            markers: Vec::new(),
            marker_seq: 0,
            now: None,
            now_buckets: Vec::new(),
            now_windows: Vec::new(),
            acc: WindowAcc::default(),
            acc_from_seq: 0,
            cut_windows: Vec::new(),
            cut: crate::output::verdict::Windows::new(WINDOW_S, SETTLE_S),
            cut_anchor: f64::NAN,
            cut_from: None,
            cut_seq: None,
            now_anchor: f64::NEG_INFINITY,
            window_s: DEFAULT_WINDOW_S,
            elapsed_s: 0.0,
            demo_span: None,
            verity_failures: 0,
            io_errors: 0,
        }
    }

    /// Seconds since the engine started (the latest record's end).
    pub fn elapsed_s(&self) -> f64 {
        self.elapsed_s
    }

    /// The time window, seconds.
    pub fn length_s(&self) -> f64 {
        self.window_s
    }

    /// Records, oldest first, at most [`HISTORY_S`] of them.
    pub fn history(&self) -> &VecDeque<IntervalRecord> {
        &self.history
    }

    /// Change markers, oldest first.
    pub fn markers(&self) -> &[Marker] {
        &self.markers
    }

    /// Stats of the "now" window ([`Self::now_records`]).
    pub fn now(&self) -> Option<WindowStats> {
        self.now
    }

    /// Latency distribution of the "now" window.
    pub fn now_buckets(&self) -> &[u64] {
        &self.now_buckets
    }

    /// The "now" window's measurements per [`WINDOW_S`] window after
    /// [`SETTLE_S`].
    pub fn now_windows(&self) -> &[WindowStats] {
        &self.now_windows
    }

    /// Reads that failed verification, since the start.
    pub fn verity_failures(&self) -> u64 {
        self.verity_failures
    }

    /// Reads that failed at the device, since the start.
    pub fn io_errors(&self) -> u64 {
        self.io_errors
    }

    /// A change at `t_s`, `label` in short: a new marker, or the marker at
    /// the same time (changes applied together) with `label` added.
    /// Returns the marker's number. Taken in with the next [`Self::push`].
    pub fn mark(&mut self, t_s: f64, label: String) -> usize {
        match self.markers.last_mut() {
            Some(m) if (m.t_s - t_s).abs() < 1e-6 => {
                m.label.push_str(", ");
                m.label.push_str(&label);
                m.n
            }
            _ => {
                self.marker_seq += 1;
                self.markers.push(Marker {
                    n: self.marker_seq,
                    t_s,
                    label,
                });
                self.marker_seq
            }
        }
    }

    /// Takes in one interval record (its events already marked with
    /// [`Self::mark`]) and slides the "now" window.
    pub fn push(&mut self, rec: IntervalRecord) {
        self.elapsed_s = rec.t_s;
        self.verity_failures += rec.counters.verity_failures;
        self.io_errors += rec.counters.io_errors;
        self.acc.add(&rec);
        self.history.push_back(rec);
        // Slide the "now" window: drop from its front what starts before t0;
        // when that is most of it (a change was just made), rebuild instead.
        let t0 = self.now_t0();
        let first = self.history.front().map_or(0, |r| r.seq);
        let from = self.acc_from_seq.saturating_sub(first) as usize;
        let held = self.history.len().saturating_sub(from);
        let stale = self
            .history
            .iter()
            .skip(from)
            .take_while(|r| r.t_s - r.interval_s < t0)
            .count();
        if stale * 2 > held || self.acc.broken {
            self.history_trim();
            self.refresh();
            return;
        }
        for i in from..from + stale {
            self.acc.remove(&self.history[i]);
        }
        self.acc_from_seq += stale as u64;
        self.history_trim();
        self.derive_now();
    }

    fn history_trim(&mut self) {
        while let (Some(f), Some(b)) = (self.history.front(), self.history.back())
            && b.t_s - f.t_s > HISTORY_S
        {
            self.history.pop_front();
        }
        let oldest = self.history.front().map_or(0.0, |r| r.t_s - r.interval_s);
        self.markers.retain(|m| m.t_s >= oldest);
        self.cut_windows.retain(|w| w.from_s >= oldest - 1e-9);
    }

    /// Recomputes the "now" window's sums from scratch (after a zoom, a
    /// reset or a change).
    pub fn refresh(&mut self) {
        let t0 = self.now_t0();
        self.acc = WindowAcc::default();
        let mut from = None;
        for r in self.history.iter().filter(|r| r.t_s - r.interval_s >= t0) {
            from.get_or_insert(r.seq);
            self.acc.add(r);
        }
        self.acc_from_seq = from.unwrap_or_else(|| self.history.back().map_or(0, |r| r.seq + 1));
        self.derive_now();
    }

    fn derive_now(&mut self) {
        let from = self
            .now_records()
            .find(|r| !r.paused)
            .map(|r| r.t_s - r.interval_s);
        let to = self.history.iter().rev().find(|r| !r.paused).map(|r| r.t_s);
        self.now = from.zip(to).and_then(|(from, to)| self.acc.stats(from, to));
        self.now_buckets = self.acc.buckets.clone();
        self.cut_in();
        let t0 = self.now_t0();
        self.now_windows = self
            .cut_windows
            .iter()
            .filter(|w| w.from_s >= t0 - 1e-9)
            .cloned()
            .collect();
    }

    /// Takes the records not yet cut into verdict windows: from the last
    /// marker on (the rule of [`crate::output::verdict::window_stats`]),
    /// anew when the marker changed. Each record is taken in once and each
    /// window measured once, so a 10-minute "now" costs no more per record
    /// than a short one.
    fn cut_in(&mut self) {
        let anchor = self.anchor();
        if anchor != self.cut_anchor {
            self.cut_anchor = anchor;
            // After the start the run ramps up longer than after a change.
            let settle = if anchor == f64::NEG_INFINITY {
                START_SETTLE_S
            } else {
                SETTLE_S
            };
            self.cut = crate::output::verdict::Windows::new(WINDOW_S, settle);
            self.cut_windows.clear();
            self.cut_from = None;
            self.cut_seq = None;
        }
        let start = match self.cut_seq {
            Some(seq) => self.history.partition_point(|r| r.seq <= seq),
            None => self
                .history
                .partition_point(|r| r.t_s - r.interval_s < anchor),
        };
        for i in start..self.history.len() {
            use crate::output::verdict::Fed;
            let r = &self.history[i];
            self.cut_seq = Some(r.seq);
            match self.cut.feed(r) {
                Fed::Dropped => {}
                Fed::Kept => {
                    self.cut_from.get_or_insert(r.seq);
                }
                Fed::Closed => {
                    let from = self.cut_from.take().unwrap_or(r.seq);
                    let first = self.history.partition_point(|x| x.seq < from);
                    let kept = self
                        .history
                        .range(first..=i)
                        .filter(|x| !x.paused && x.reads > 0);
                    self.cut_windows.extend(WindowStats::of(kept));
                }
            }
        }
    }

    /// The time charts' span (t0, t1) and whether it is the demo's whole
    /// length (its right end is then ahead of now, labelled in seconds
    /// from the start) rather than a window ending now.
    pub fn chart_span(&self) -> (f64, f64, bool) {
        match self.demo_span {
            Some(len) if self.elapsed_s < len => (0.0, len, true),
            _ => (self.elapsed_s - self.window_s, self.elapsed_s, false),
        }
    }

    /// Fits the charts to a demo of `len_s` seconds: while it runs they
    /// span it whole, from its start to its end, filling left to right;
    /// after it (or on a zoom) they scroll as usual.
    pub fn fit_demo(&mut self, len_s: f64) {
        let len = len_s.clamp(ZOOM_STEPS_S[0], ZOOM_STEPS_S[ZOOM_STEPS_S.len() - 1]);
        self.window_s = len;
        self.demo_span = Some(len);
    }

    /// The start of the visible window.
    pub fn window_start(&self) -> f64 {
        (self.elapsed_s - self.window_s).max(0.0)
    }

    /// Records in the visible window.
    pub fn visible(&self) -> impl Iterator<Item = &IntervalRecord> {
        let t0 = self.window_start();
        self.history.iter().filter(move |r| r.t_s > t0)
    }

    /// The "now" window: since the latest marker (a change, or the
    /// baseline's mark: right after `b` "now" starts empty rather than
    /// holding the baseline's own intervals), within the visible window.
    /// Skips the interval the marker fell in.
    pub fn now_records(&self) -> impl Iterator<Item = &IntervalRecord> {
        let t0 = self.now_t0();
        self.history
            .iter()
            .filter(move |r| r.t_s - r.interval_s >= t0)
    }

    /// Where the "now" window starts.
    fn now_t0(&self) -> f64 {
        self.window_start().max(self.anchor())
    }

    /// Where "now" and its verdict windows start: the last change or
    /// [`Self::restart_now`], whichever is later (-inf with neither).
    fn anchor(&self) -> f64 {
        let marker = self.markers.last().map_or(f64::NEG_INFINITY, |m| m.t_s);
        marker.max(self.now_anchor)
    }

    /// Starts "now" afresh at the latest record, without a change (`b`
    /// froze what came before as the baseline): its verdict windows start
    /// there, after the settle time as after a change.
    pub fn restart_now(&mut self) {
        self.now_anchor = self.elapsed_s;
        self.refresh();
    }

    /// Clears the records and the markers (their numbers go on), and
    /// a demo's span.
    pub fn reset(&mut self) {
        self.demo_span = None;
        self.history.clear();
        self.markers.clear();
        self.now_anchor = f64::NEG_INFINITY;
        self.cut_anchor = f64::NAN;
        self.refresh();
    }

    /// Steps the window through [`ZOOM_STEPS_S`].
    pub fn zoom(&mut self, wider: bool) {
        let i = ZOOM_STEPS_S
            .iter()
            .position(|&w| w >= self.window_s)
            .unwrap_or(ZOOM_STEPS_S.len() - 1);
        let j = if wider {
            (i + 1).min(ZOOM_STEPS_S.len() - 1)
        } else {
            i.saturating_sub(1)
        };
        self.zoom_to(ZOOM_STEPS_S[j]);
    }

    /// Sets the window to `window_s` seconds (a replay's seek keeps the
    /// one it had), as a zoom does.
    pub fn zoom_to(&mut self, window_s: f64) {
        self.window_s = window_s;
        self.demo_span = None;
        self.refresh();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Event;

    #[test]
    fn zoom_steps_and_clamps() {
        let mut w = Window::new();
        assert_eq!(w.length_s(), 60.0);
        w.zoom(false);
        w.zoom(false);
        w.zoom(false);
        assert_eq!(w.length_s(), 10.0);
        for _ in 0..10 {
            w.zoom(true);
        }
        assert_eq!(w.length_s(), 600.0);
    }

    /// Changes at one time share a marker and its number; numbers go on
    /// after a reset.
    #[test]
    fn changes_applied_together_share_a_marker() {
        let mut w = Window::new();
        assert_eq!(w.mark(1.0, "mode: a -> b".into()), 1);
        assert_eq!(w.mark(1.0, "hogs: 0 -> 1".into()), 1);
        assert_eq!(w.mark(2.0, "baseline".into()), 2);
        assert_eq!(w.markers()[0].label, "mode: a -> b, hogs: 0 -> 1");
        w.reset();
        assert!(w.markers().is_empty());
        assert_eq!(w.mark(3.0, "x".into()), 3);
    }

    fn rec(seq: u64, events: &[&str], paused: bool) -> IntervalRecord {
        let mut r = crate::metrics::Recorder::new();
        if !paused {
            for i in 0..50u64 {
                let ns = 10_000 + (seq * 7_919 + i * 104_729) % 900_000;
                r.record(crate::metrics::Stage::EndToEnd, ns);
                r.record(crate::metrics::Stage::Queue, ns / 10);
            }
            r.counters.reads = 50;
            r.counters.bytes = 50 * 4096;
        }
        let t_s = (seq + 1) as f64 * 0.25;
        let mut rec = IntervalRecord {
            seq,
            t_s,
            paused,
            ..Default::default()
        };
        rec.fill_from(&r, 0.25);
        rec.workers.run_delay_us = (seq % 13) as f64 * 100.0;
        rec.events = events
            .iter()
            .map(|l| Event {
                t_s: t_s - 0.1,
                label: l.to_string(),
            })
            .collect();
        rec
    }

    #[test]
    fn the_sliding_now_window_equals_a_fresh_merge() {
        let mut w = Window::new();
        w.zoom_to(10.0);
        for seq in 0..400u64 {
            let events: &[&str] = match seq {
                90 => &["workers.mode: unbound -> bound"],
                150 => &["baseline"],
                300 => &["paused"],
                _ => &[],
            };
            let r = rec(seq, events, (300..320).contains(&seq));
            for e in &r.events {
                w.mark(e.t_s, e.label.clone());
            }
            w.push(r);
            if seq == 200 {
                w.zoom(true);
            }
            // The sliding window keeps no execution median (not shown).
            let fresh = WindowStats::of(w.now_records()).map(|mut s| {
                s.exec_p50_us = None;
                s
            });
            assert_eq!(w.now(), fresh, "after record {seq}");
            let mut fresh_buckets = crate::metrics::LatencyBuckets::default();
            for r in w.now_records() {
                fresh_buckets.add(&r.latency_buckets);
            }
            assert_eq!(w.now_buckets(), fresh_buckets.counts, "{seq}");
        }
    }
}
