//! The timeline view's state (`t`): the spans of the last seconds (where
//! each work item ran, the readers' sleeps, the hogs' time on a CPU), the
//! window shown (its length, and where it ends: the newest span, or a time
//! frozen with space to look), and the item chosen in it (← →), whose wait
//! from queueing to start is drawn. The spans come out of the records
//! ([`Lanes::take`]), so the records kept for the charts stay small.

use std::collections::{BTreeMap, VecDeque};

use crate::metrics::{Span, Timeline};

/// The windows the timeline shows, ms (`z` narrows, `Z` widens).
pub const LANE_WINDOWS_MS: [u64; 6] = [20, 50, 100, 200, 500, 1000];
/// The window it opens with, ms.
pub const DEFAULT_LANE_WINDOW_MS: u64 = 200;
/// Spans kept behind the newest, ns (the widest window and its freeze).
const KEEP_NS: u64 = 3_000_000_000;
/// Most spans kept (a busy second of a wide machine).
const MAX_SPANS: usize = 400_000;

/// The timeline view: open or not, its spans, its window, its choice.
#[derive(Debug, Clone)]
pub struct Lanes {
    open: bool,
    spans: VecDeque<Span>,
    /// The thread names the spans carry, by tid (every thread seen).
    threads: BTreeMap<i32, String>,
    /// The threads of the newest interval (tid, name): a pipeline rebuilt
    /// by a change has new readers, whose lanes replace the old ones'.
    current: Vec<(i32, String)>,
    window_ms: u64,
    /// Where a frozen view ends, ns since the engine started.
    frozen: Option<u64>,
    /// The chosen item: its start and CPU.
    chosen: Option<(u64, u16)>,
    /// The newest end seen, ns.
    latest: u64,
    /// Spans the run could not keep (its logs full), since opened.
    dropped: u64,
    /// Spans this view let go for want of room.
    shed: u64,
    /// Why no span comes (the target cannot trace them yet).
    note: Option<String>,
    /// A trace file is written: the workload traces, open or closed.
    pinned: bool,
    /// Intervals that came with a timeline and no span, since opened.
    empty: u32,
}

impl Default for Lanes {
    fn default() -> Lanes {
        Lanes {
            open: false,
            spans: VecDeque::new(),
            threads: BTreeMap::new(),
            current: Vec::new(),
            window_ms: DEFAULT_LANE_WINDOW_MS,
            frozen: None,
            chosen: None,
            latest: 0,
            dropped: 0,
            shed: 0,
            note: None,
            pinned: false,
            empty: 0,
        }
    }
}

impl Lanes {
    /// Whether the view is open.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Opens or closes it; closed, it lets its spans go. Returns whether
    /// it is open now.
    pub fn toggle(&mut self) -> bool {
        self.open = !self.open;
        if !self.open {
            *self = Lanes {
                window_ms: self.window_ms,
                pinned: self.pinned,
                ..Lanes::default()
            };
        }
        self.open
    }

    /// Takes in an interval's spans (kept only while open).
    pub fn take(&mut self, t: Timeline) {
        if !self.open {
            return;
        }
        self.dropped += t.dropped;
        self.empty += u32::from(t.spans.is_empty());
        if !t.threads.is_empty() {
            self.current = t
                .threads
                .iter()
                .map(|th| (th.tid, th.name.clone()))
                .collect();
        }
        for th in t.threads {
            self.threads.insert(th.tid, th.name);
        }
        // Keep the spans ordered by start: an interval's come sorted, and
        // one that ended late (in the next interval) may start before
        // spans already kept, so the tail from its start is sorted again
        // (a few ms of spans, not the seconds kept).
        let first = t.spans.iter().map(|s| s.start_ns).min().unwrap_or(u64::MAX);
        let at = self.spans.partition_point(|s| s.start_ns <= first);
        for s in t.spans {
            self.latest = self.latest.max(s.end_ns);
            self.spans.push_back(s);
        }
        self.spans.make_contiguous()[at..].sort_by_key(|s| s.start_ns);
        let keep_from = self.latest.saturating_sub(KEEP_NS);
        let keep_from = self.frozen.map_or(keep_from, |f| {
            keep_from.min(f.saturating_sub(1_000_000_000))
        });
        while self.spans.front().is_some_and(|s| s.end_ns < keep_from)
            || self.spans.len() > MAX_SPANS
        {
            if self.spans.len() > MAX_SPANS {
                self.shed += 1;
            }
            self.spans.pop_front();
        }
    }

    /// The window's length, ms.
    pub fn window_ms(&self) -> u64 {
        self.window_ms
    }

    /// Narrows (`z`) or widens (`Z`) the window.
    pub fn zoom(&mut self, wider: bool) {
        let i = LANE_WINDOWS_MS
            .iter()
            .position(|&w| w == self.window_ms)
            .unwrap_or(3);
        let i = if wider {
            (i + 1).min(LANE_WINDOWS_MS.len() - 1)
        } else {
            i.saturating_sub(1)
        };
        self.window_ms = LANE_WINDOWS_MS[i];
    }

    /// Freezes the view where it is, or lets it follow the spans again.
    /// Returns whether it is frozen now.
    pub fn toggle_freeze(&mut self) -> bool {
        self.frozen = match self.frozen {
            Some(_) => {
                self.chosen = None;
                None
            }
            None => Some(self.latest),
        };
        self.frozen.is_some()
    }

    /// Whether the view is frozen.
    pub fn frozen(&self) -> bool {
        self.frozen.is_some()
    }

    /// The window shown: (from, to), ns since the engine started.
    pub fn span(&self) -> (u64, u64) {
        let to = self.frozen.unwrap_or(self.latest);
        (to.saturating_sub(self.window_ms * 1_000_000), to)
    }

    /// The spans that show in the window.
    pub fn visible(&self) -> impl Iterator<Item = &Span> {
        let (from, to) = self.span();
        self.spans
            .iter()
            .take_while(move |s| s.start_ns <= to)
            .filter(move |s| s.end_ns >= from)
    }

    /// Chooses the next (or previous) work item in the window, from the
    /// one chosen (from the window's middle when none is). Freezes the
    /// view first. Returns the item chosen.
    pub fn choose(&mut self, later: bool) -> Option<Span> {
        if self.frozen.is_none() {
            self.toggle_freeze();
        }
        let (from, to) = self.span();
        let at = self.chosen.map_or((from + to) / 2, |c| c.0);
        let items = self.visible().filter(|s| s.kind.is_item());
        let next = if later {
            items
                .filter(|s| (s.start_ns, s.cpu) > (at, self.chosen.map_or(0, |c| c.1)))
                .min_by_key(|s| (s.start_ns, s.cpu))
                .copied()
        } else {
            items
                .filter(|s| (s.start_ns, s.cpu) < (at, self.chosen.map_or(u16::MAX, |c| c.1)))
                .max_by_key(|s| (s.start_ns, s.cpu))
                .copied()
        };
        if let Some(s) = next {
            self.chosen = Some((s.start_ns, s.cpu));
        }
        self.chosen()
    }

    /// The chosen item, while it is in the window.
    pub fn chosen(&self) -> Option<Span> {
        let (start, cpu) = self.chosen?;
        self.visible()
            .find(|s| s.start_ns == start && s.cpu == cpu && s.kind.is_item())
            .copied()
    }

    /// A thread's name, where the spans gave it.
    pub fn thread(&self, tid: i32) -> Option<&str> {
        self.threads.get(&tid).map(String::as_str)
    }

    /// The readers' threads running now (tid, name), in name order.
    pub fn readers(&self) -> Vec<(i32, &str)> {
        let mut r: Vec<(i32, &str)> = self
            .current
            .iter()
            .filter(|(_, n)| n.starts_with("reader"))
            .map(|(t, n)| (*t, n.as_str()))
            .collect();
        r.sort_by(|a, b| a.1.cmp(b.1));
        r
    }

    /// Spans not shown for want of room: the run's logs, and this view's.
    pub fn dropped(&self) -> u64 {
        self.dropped + self.shed
    }

    /// Whether a trace file keeps the workload tracing (`--trace`).
    pub fn pin(&mut self, on: bool) {
        self.pinned = on;
    }

    /// See [`Lanes::pin`].
    pub fn pinned(&self) -> bool {
        self.pinned
    }

    /// Says why no span will come (shown in the view's place).
    pub fn set_note(&mut self, why: String) {
        self.note = Some(why);
    }

    /// Why no span comes, where the workload said.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Intervals that came with no span since it opened.
    pub fn empty_intervals(&self) -> u32 {
        self.empty
    }

    /// Whether any span came since it opened.
    pub fn has_spans(&self) -> bool {
        self.latest > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{SpanKind, TimelineThread};

    fn item(cpu: u16, q: u64, s: u64, e: u64) -> Span {
        Span {
            kind: SpanKind::Verify,
            cpu,
            queued_cpu: 0,
            tid: 5,
            queued_ns: q,
            start_ns: s,
            end_ns: e,
        }
    }

    fn timeline(spans: Vec<Span>) -> Timeline {
        Timeline {
            spans,
            dropped: 1,
            threads: vec![TimelineThread {
                tid: 5,
                name: "fsverity-0".into(),
                role: crate::metrics::Role::Worker,
            }],
        }
    }

    #[test]
    fn closed_it_keeps_nothing_and_open_it_follows_the_newest_span() {
        let mut l = Lanes::default();
        l.take(timeline(vec![item(0, 0, 1, 2)]));
        assert!(!l.has_spans());
        assert!(l.toggle());
        let ms = 1_000_000;
        l.take(timeline(vec![
            item(1, 0, 10 * ms, 11 * ms),
            item(0, 0, 300 * ms, 301 * ms),
        ]));
        assert_eq!(l.span(), (101 * ms, 301 * ms));
        assert_eq!(
            l.visible().count(),
            1,
            "the one at 10 ms is before the 200 ms window"
        );
        l.zoom(true);
        assert_eq!(l.window_ms(), 500);
        assert_eq!(l.visible().count(), 2);
        assert_eq!(l.thread(5), Some("fsverity-0"));
        assert_eq!(l.dropped(), 1, "what came while closed is not counted");
        // Frozen, newer spans do not move it.
        assert!(l.toggle_freeze());
        l.take(timeline(vec![item(0, 0, 900 * ms, 901 * ms)]));
        assert_eq!(l.span().1, 301 * ms);
        assert!(!l.toggle_freeze());
        assert_eq!(l.span().1, 901 * ms);
        // A rebuilt pipeline's reader replaces the old one's lane; the old
        // one's name is still known for its spans.
        let reader = |tid| TimelineThread {
            tid,
            name: "reader-0".into(),
            role: crate::metrics::Role::Reader,
        };
        let mut t = timeline(vec![]);
        t.threads = vec![reader(7)];
        l.take(t);
        let mut t = timeline(vec![]);
        t.threads = vec![reader(8)];
        l.take(t);
        assert_eq!(l.readers(), [(8, "reader-0")]);
        assert_eq!(l.thread(7), Some("reader-0"));
        assert_eq!(l.empty_intervals(), 2, "the two with threads only");
        assert!(!l.toggle(), "closed");
        assert!(!l.has_spans());
        assert_eq!(l.window_ms(), 500, "its zoom is kept");
    }

    #[test]
    fn arrows_choose_items_in_start_order_and_freeze_the_view() {
        let mut l = Lanes::default();
        l.toggle();
        l.take(timeline(vec![
            item(1, 0, 100, 150),
            item(0, 50, 120, 130),
            item(1, 0, 160, 170),
        ]));
        let first = l.choose(true).unwrap();
        assert!(l.frozen());
        // From the middle (85 ns into a 200 ms window that starts at 0).
        assert_eq!(first.start_ns, 100);
        assert_eq!(l.choose(true).unwrap().start_ns, 120);
        assert_eq!(l.choose(true).unwrap().start_ns, 160);
        assert_eq!(l.choose(true).unwrap().start_ns, 160, "the last stays");
        assert_eq!(l.choose(false).unwrap().start_ns, 120);
        assert_eq!(l.chosen().unwrap().wait_ns(), 70);
    }
}
