//! Measurement: per-thread recorders, the once-per-interval handoff, and the
//! interval record every consumer reads.
//!
//! The hot path (one read) must not allocate, lock or send on a channel, so
//! each reader and worker thread records into its own [`Recorder`] (plain
//! histograms and counters it owns). Once per interval the sampler bumps a
//! global epoch; each thread notices at its next safe point (after a read, or
//! when woken from sleep) and swaps its recorder with the pre-allocated spare
//! in its [`ThreadSlot`] mailbox: one uncontended lock per interval per
//! thread. The sampler then merges the mailboxes into an [`IntervalRecord`],
//! the one immutable, serde-serializable snapshot that the headless runner,
//! the TUI, experiments and recordings all consume.

//!
//! The module is split along its seams: [`recorder`] (the hot path and the
//! handoff), [`record`] (the record schema), [`hdr`] (histograms in
//! HdrHistogram's compressed encoding), [`check`] (checks of records
//! read from outside), [`stats`] (window statistics, spread, median),
//! [`window`] (the explorer's running window), [`timeline`] (where each
//! work item ran, while tracing), [`table`] (the one list of
//! metrics every screen and report reads) and [`format`] (how numbers are
//! written everywhere).

pub(crate) mod check;
pub(crate) mod format;
pub(crate) mod hdr;
pub(crate) mod record;
pub(crate) mod recorder;
pub(crate) mod stats;
pub mod table;
pub(crate) mod timeline;
pub(crate) mod window;

pub use record::{
    CpuUsage, Event, IntervalRecord, KernelQueueRecord, KernelRecord, LatencyBuckets, Notice,
    POST_READ_QUEUES, PageCacheStats, Percentiles, PoolRecord, ReadersIowait, SparseHist,
    StagePercentiles, WorkerSched, empty_hist, hit_pct, run_delay_ms_per_s,
};
pub use recorder::{
    BUCKETS_PER_OCTAVE, Counters, Recorder, Registry, Role, Stage, ThreadHandle, ThreadSlot,
    now_ns, set_recording, stamp,
};
pub use stats::{Spread, WindowStats, median};
pub use table::{Better, METRICS, Metric, Unit};
pub use timeline::{
    SPANS_PER_INTERVAL, SPANS_PER_THREAD, Span, SpanKind, SpanLog, Timeline, TimelineThread,
    fill_columns, set_tracing, tracing,
};
