//! Where each work item ran: the spans a traced run records, for the
//! explorer's timeline and Perfetto traces. Every seed is about placement
//! (on which CPU a decrypt or verify item ran, how long it waited, behind
//! what), which the interval's aggregates (queue p99, run_delay, moved %)
//! only summarise.
//!
//! A span is one work item's execution (its stage, the CPU that queued it
//! and the CPU it ran on, its worker, when it was queued, started and
//! ended), a reader's sleep, or a hog's time on a CPU. Tracing is off
//! unless asked for ([`set_tracing`]: the explorer's timeline open, or a
//! trace file): off, an item costs one relaxed load. On, a thread writes
//! its spans into its own [`SpanLog`] (a vector allocated once with the
//! thread's recorder and never grown: full, a span is counted as dropped),
//! handed to the sampler with the rest of the recorder once per interval,
//! which puts them in the interval's [`Timeline`].

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

static TRACING: AtomicBool = AtomicBool::new(false);

/// Turns span recording on or off for the whole process.
pub fn set_tracing(on: bool) {
    TRACING.store(on, Ordering::Relaxed);
}

/// Whether spans are recorded (one relaxed load).
#[inline]
pub fn tracing() -> bool {
    TRACING.load(Ordering::Relaxed)
}

/// Spans one thread records between two handoffs at most; past it they
/// are counted as dropped. An interval of the default preset has a few
/// thousand items in all.
pub const SPANS_PER_THREAD: usize = 16_384;
/// Spans one interval's timeline holds at most (all threads together):
/// its record's line stays under the longest line a recording or an
/// agent may write (16 MiB; a span's row is at most ~75 bytes).
pub const SPANS_PER_INTERVAL: usize = 131_072;

/// What a span is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum SpanKind {
    /// A work item that decrypted (and queued the read for verification,
    /// or had nothing to verify).
    Decrypt = 0,
    /// A work item that verified.
    Verify = 1,
    /// A work item that decrypted and then verified in one go.
    DecryptVerify = 2,
    /// A reader asleep, waiting for its reads or its buffers.
    Sleep = 3,
    /// A hog on a CPU (from when it was seen there to when it was last
    /// seen running: the gaps are what else ran there).
    Hog = 4,
}

impl SpanKind {
    /// Every kind, in the order of its number.
    pub const ALL: [SpanKind; 5] = [
        SpanKind::Decrypt,
        SpanKind::Verify,
        SpanKind::DecryptVerify,
        SpanKind::Sleep,
        SpanKind::Hog,
    ];

    /// Its name, as the timeline's legend and a trace's slices say it.
    pub fn name(self) -> &'static str {
        match self {
            SpanKind::Decrypt => "decrypt",
            SpanKind::Verify => "verify",
            SpanKind::DecryptVerify => "decrypt+verify",
            SpanKind::Sleep => "sleep",
            SpanKind::Hog => "hog",
        }
    }

    /// True for a work item's execution.
    pub fn is_item(self) -> bool {
        matches!(
            self,
            SpanKind::Decrypt | SpanKind::Verify | SpanKind::DecryptVerify
        )
    }
}

/// One span. Times are ns: on the monotonic clock while a thread records
/// it, since the engine started in a [`Timeline`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// What it is.
    pub kind: SpanKind,
    /// The CPU it ran on (where it started).
    pub cpu: u16,
    /// The CPU that queued the item (an item's; else `cpu`).
    pub queued_cpu: u16,
    /// The thread.
    pub tid: i32,
    /// When the item was queued (an item's; else `start_ns`).
    pub queued_ns: u64,
    /// When it started.
    pub start_ns: u64,
    /// When it ended.
    pub end_ns: u64,
}

impl Span {
    /// A work item's execution on this thread and CPU.
    #[inline]
    pub fn item(
        kind: SpanKind,
        queued_cpu: usize,
        queued_ns: u64,
        start_ns: u64,
        cpu: usize,
    ) -> Span {
        Span {
            kind,
            cpu: cpu.min(u16::MAX as usize) as u16,
            queued_cpu: queued_cpu.min(u16::MAX as usize) as u16,
            tid: this_tid(),
            queued_ns: queued_ns.min(start_ns),
            start_ns,
            end_ns: start_ns,
        }
    }

    /// A span of this thread on the CPU it is on now, from `start_ns`.
    #[inline]
    pub fn here(kind: SpanKind, start_ns: u64) -> Span {
        let cpu = crate::sys::current_cpu();
        Span::item(kind, cpu, start_ns, start_ns, cpu)
    }

    /// Ended at `end_ns`.
    #[inline]
    pub fn ended(mut self, end_ns: u64) -> Span {
        self.end_ns = end_ns.max(self.start_ns);
        self
    }

    /// The wait from queueing to start, ns.
    pub fn wait_ns(&self) -> u64 {
        self.start_ns - self.queued_ns
    }

    /// Its length, ns.
    pub fn len_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }

    /// The same span with its times less `base` (the engine's start).
    fn since(self, base: u64) -> Span {
        Span {
            queued_ns: self.queued_ns.saturating_sub(base),
            start_ns: self.start_ns.saturating_sub(base),
            end_ns: self.end_ns.saturating_sub(base),
            ..self
        }
    }
}

/// The calling thread's id, asked of the kernel once per thread.
#[inline]
pub fn this_tid() -> i32 {
    thread_local! {
        static TID: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
    }
    TID.with(|t| {
        if t.get() == 0 {
            t.set(crate::sys::gettid());
        }
        t.get()
    })
}

/// A span as a record writes it: `[kind, cpu, queued_cpu, tid, queued,
/// start, end]`, seven numbers (a trace of a busy second has ~10^5).
type SpanRow = (u8, u16, u16, i32, u64, u64, u64);

impl Serialize for Span {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let row: SpanRow = (
            self.kind as u8,
            self.cpu,
            self.queued_cpu,
            self.tid,
            self.queued_ns,
            self.start_ns,
            self.end_ns,
        );
        row.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Span, D::Error> {
        use serde::de::Error;
        let (kind, cpu, queued_cpu, tid, queued_ns, start_ns, end_ns) = SpanRow::deserialize(d)?;
        let kind = SpanKind::ALL.get(kind as usize).copied().ok_or_else(|| {
            D::Error::custom(format!(
                "timeline.spans[]: kind {kind} is out of range: allowed 0..={}",
                SpanKind::ALL.len() - 1
            ))
        })?;
        if !(queued_ns <= start_ns && start_ns <= end_ns) {
            return Err(D::Error::custom(format!(
                "timeline.spans[]: times {queued_ns} <= {start_ns} <= {end_ns} do not hold: queued, started and ended in that order"
            )));
        }
        Ok(Span {
            kind,
            cpu,
            queued_cpu,
            tid,
            queued_ns,
            start_ns,
            end_ns,
        })
    }
}

/// A thread's spans since its last handoff: a vector of fixed capacity
/// that a push never grows. Made without room ([`SpanLog::default`]), it
/// keeps nothing and counts nothing (a run's totals).
#[derive(Debug, Default)]
pub struct SpanLog {
    spans: Vec<Span>,
    dropped: u64,
}

impl SpanLog {
    /// Room for `cap` spans, allocated now (its pages are touched only as
    /// spans are written).
    pub fn with_capacity(cap: usize) -> SpanLog {
        SpanLog {
            spans: Vec::with_capacity(cap),
            dropped: 0,
        }
    }

    /// Keeps `s`, or counts it dropped when full. Never allocates.
    #[inline]
    pub fn push(&mut self, s: Span) {
        if self.spans.len() < self.spans.capacity() {
            self.spans.push(s);
        } else if self.spans.capacity() > 0 {
            self.dropped += 1;
        }
    }

    /// Moves `other`'s spans in, as many as there is room for (the rest
    /// counted dropped). Never allocates.
    pub fn append(&mut self, other: &SpanLog) {
        if self.spans.capacity() == 0 {
            return;
        }
        let room = self.spans.capacity() - self.spans.len();
        let take = other.spans.len().min(room);
        self.spans.extend_from_slice(&other.spans[..take]);
        self.dropped += other.dropped + (other.spans.len() - take) as u64;
    }

    /// Empties it, keeping its room.
    pub fn clear(&mut self) {
        self.spans.clear();
        self.dropped = 0;
    }

    /// True with no span kept or dropped.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty() && self.dropped == 0
    }

    /// The spans kept.
    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// The spans dropped for want of room.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// What a registered thread does; decides which counters the sampler reads
/// (here, with the spans, as a timeline names its threads).
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

/// A thread a timeline names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineThread {
    /// Its thread id.
    pub tid: i32,
    /// Its name (`fscrypt-0`, `reader-1`, `hog-0`; a kworker's comm).
    pub name: String,
    /// What it does.
    pub role: Role,
}

/// An interval's spans, in a traced run: where each work item ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// The spans that ended in the interval, ordered by start; times since
    /// the engine started, ns.
    pub spans: Vec<Span>,
    /// Spans not kept for want of room (a thread's log or the interval's).
    pub dropped: u64,
    /// The threads the spans name.
    pub threads: Vec<TimelineThread>,
}

impl Timeline {
    /// The interval's timeline of `log`, its times made relative to
    /// `base_ns` (the engine's start), with the threads that ran.
    pub fn of(log: &SpanLog, base_ns: u64, threads: Vec<TimelineThread>) -> Timeline {
        let mut spans: Vec<Span> = log.spans().iter().map(|s| s.since(base_ns)).collect();
        spans.sort_unstable_by_key(|s| (s.start_ns, s.cpu));
        Timeline {
            spans,
            dropped: log.dropped(),
            threads,
        }
    }

    /// Work items in it.
    pub fn items(&self) -> usize {
        self.spans.iter().filter(|s| s.kind.is_item()).count()
    }
}

/// Splits `[s, e)` over `n` columns of `per` ns each from `from` (a
/// timeline drawn as cells or pixels): calls `add(column, ns)` with the ns
/// of it in each column it covers; a span shorter than a nanosecond's share
/// still counts one, and what lies outside the columns is left out.
pub fn fill_columns(
    from: u64,
    per: u64,
    n: usize,
    s: u64,
    e: u64,
    mut add: impl FnMut(usize, u64),
) {
    if e < from || n == 0 || per == 0 {
        return;
    }
    let s = s.max(from);
    let first = ((s - from) / per) as usize;
    if first >= n {
        return;
    }
    let e = e.max(s + 1);
    let last = ((((e - from).saturating_sub(1)) / per) as usize).min(n - 1);
    for c in first..=last {
        let (c0, c1) = (from + c as u64 * per, from + (c as u64 + 1) * per);
        add(c, e.min(c1).saturating_sub(s.max(c0)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_fills_the_columns_it_covers_by_its_overlap() {
        let mut got = vec![0u64; 4];
        // Columns of 10 ns from 100: the span 115..132 is 5 in column 1, 10
        // in column 2 and 2 in column 3.
        fill_columns(100, 10, 4, 115, 132, |c, ns| got[c] += ns);
        assert_eq!(got, [0, 5, 10, 2]);
        let mut got = vec![0u64; 4];
        fill_columns(100, 10, 4, 90, 95, |c, ns| got[c] += ns);
        assert_eq!(got, [0; 4], "before the columns");
        fill_columns(100, 10, 4, 135, 135, |c, ns| got[c] += ns);
        assert_eq!(got, [0, 0, 0, 1], "a zero-length span still shows");
        fill_columns(100, 10, 4, 139, 900, |c, ns| got[c] += ns);
        assert_eq!(got, [0, 0, 0, 2], "cut at the last column's end");
        fill_columns(100, 10, 0, 100, 900, |_, _| panic!("no columns"));
    }

    fn span(kind: SpanKind, q: u64, s: u64, e: u64) -> Span {
        Span {
            kind,
            cpu: 1,
            queued_cpu: 0,
            tid: 42,
            queued_ns: q,
            start_ns: s,
            end_ns: e,
        }
    }

    #[test]
    fn a_log_keeps_what_it_has_room_for_and_counts_the_rest() {
        let mut a = SpanLog::with_capacity(3);
        for i in 0..5 {
            a.push(span(SpanKind::Decrypt, i, i + 1, i + 2));
        }
        assert_eq!(a.spans().len(), 3);
        assert_eq!(a.dropped(), 2);
        assert_eq!(a.spans.capacity(), 3, "never grown");
        let mut b = SpanLog::with_capacity(3);
        b.push(span(SpanKind::Verify, 0, 0, 1));
        b.append(&a);
        assert_eq!(b.spans().len(), 3);
        assert_eq!(
            b.dropped(),
            2 + 1,
            "a's dropped and the one b had no room for"
        );
        // Without room (a run's totals): nothing kept, nothing counted.
        let mut t = SpanLog::default();
        t.push(span(SpanKind::Verify, 0, 0, 1));
        t.append(&b);
        assert!(t.is_empty());
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.spans.capacity(), 3);
    }

    #[test]
    fn a_timeline_is_relative_to_the_start_sorted_and_written_as_rows() {
        let mut log = SpanLog::with_capacity(8);
        log.push(span(SpanKind::Verify, 1_300, 1_500, 1_900));
        log.push(span(SpanKind::Decrypt, 1_000, 1_100, 1_200));
        log.push(span(SpanKind::Sleep, 1_050, 1_050, 2_000));
        let t = Timeline::of(&log, 1_000, vec![]);
        assert_eq!(
            t.spans.iter().map(|s| s.start_ns).collect::<Vec<_>>(),
            [50, 100, 500]
        );
        assert_eq!(t.items(), 2);
        assert_eq!(t.spans[1].wait_ns(), 100);
        let json = serde_json::to_string(&t.spans[1]).unwrap();
        assert_eq!(json, "[0,1,0,42,0,100,200]");
        assert_eq!(serde_json::from_str::<Span>(&json).unwrap(), t.spans[1]);
        for (bad, why) in [
            (
                "[5,1,0,42,0,100,200]",
                "kind 5 is out of range: allowed 0..=4",
            ),
            ("[0,1,0,42,150,100,200]", "150 <= 100 <= 200 do not hold"),
            ("[0,1,0,42,0,300,200]", "0 <= 300 <= 200 do not hold"),
            ("[0,70000,0,42,0,1,2]", "70000"),
        ] {
            let e = serde_json::from_str::<Span>(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn an_item_span_never_starts_before_it_was_queued() {
        let s = Span::item(SpanKind::Decrypt, 3, 900, 800, 1).ended(700);
        assert_eq!((s.queued_ns, s.start_ns, s.end_ns), (800, 800, 800));
        assert_eq!((s.cpu, s.queued_cpu), (1, 3));
        assert_eq!(s.tid, crate::sys::gettid());
    }
}
