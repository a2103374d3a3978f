//! Perfetto traces of a run: where each work item ran, for
//! ui.perfetto.dev and trace_processor, the tools the people readpath is
//! for explain placement with.
//!
//! The file is Perfetto's protobuf trace (`perfetto.protos.Trace`: one
//! `TracePacket` after another), written as the intervals come. Each
//! variant of a run (one for `run`, one per variant for `compare`) is a
//! process track holding:
//! - a track per CPU (`CPU 3`; a second lane `CPU 3 ·2` only where two
//!   items overlap there, a worker having moved mid-item), with a slice per
//!   work item named by its stage (`decrypt`, `verify`, `decrypt+verify`),
//!   its worker's tid, the CPU that queued it and its wait as arguments,
//!   and a flow from a `queued` instant on the queueing CPU's track to it;
//! - a track per thread: the readers' sleeps, the hogs' time on each CPU;
//! - counters per interval: throughput, latency p50/p99/p99.9, queue p99,
//!   run_delay;
//! - the markers (setting changes, baseline, A/B) as instants.
//!
//! Event and argument names are interned (`InternedData`: a name is given
//! a number in the packet of its first use, later packets refer to it),
//! which took a work item from 168 to 135 bytes.
//!
//! The messages are those of Perfetto's schema (`perfetto_trace.proto`),
//! declared with prost's derive with the schema's field numbers, only the
//! fields readpath writes (Perfetto's generated crate of the whole schema
//! took 153 s of a clean build). `tests/trace.rs` reads the files back
//! with Perfetto's own Python schema. A trace is capped in size
//! ([`TraceWriter::new`]): past the cap, spans and counters are dropped,
//! counted, and said in the file (an instant on a `readpath` track, room
//! kept for it) and by [`TraceStats::dropped_note`].

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use crate::metrics::{IntervalRecord, Span, SpanKind, TimelineThread};

/// The messages of Perfetto's trace schema readpath writes, with
/// `perfetto_trace.proto`'s field numbers.
#[allow(missing_docs)]
mod schema {
    /// `perfetto.protos.TracePacket`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TracePacket {
        #[prost(uint64, optional, tag = "8")]
        pub timestamp: Option<u64>,
        #[prost(uint32, optional, tag = "10")]
        pub trusted_packet_sequence_id: Option<u32>,
        #[prost(message, optional, tag = "11")]
        pub track_event: Option<TrackEvent>,
        #[prost(message, optional, tag = "12")]
        pub interned_data: Option<InternedData>,
        #[prost(uint32, optional, tag = "13")]
        pub sequence_flags: Option<u32>,
        #[prost(message, optional, tag = "60")]
        pub track_descriptor: Option<TrackDescriptor>,
    }

    /// `perfetto.protos.InternedData`: names given a number once per
    /// sequence, then referred to by it.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InternedData {
        #[prost(message, repeated, tag = "2")]
        pub event_names: Vec<InternedName>,
        #[prost(message, repeated, tag = "3")]
        pub debug_annotation_names: Vec<InternedName>,
    }

    /// `perfetto.protos.EventName` and `DebugAnnotationName` (the same
    /// fields).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InternedName {
        #[prost(uint64, optional, tag = "1")]
        pub iid: Option<u64>,
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
    }

    /// `perfetto.protos.TrackDescriptor`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TrackDescriptor {
        #[prost(uint64, optional, tag = "1")]
        pub uuid: Option<u64>,
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
        #[prost(message, optional, tag = "3")]
        pub process: Option<ProcessDescriptor>,
        #[prost(message, optional, tag = "4")]
        pub thread: Option<ThreadDescriptor>,
        #[prost(uint64, optional, tag = "5")]
        pub parent_uuid: Option<u64>,
        #[prost(message, optional, tag = "8")]
        pub counter: Option<CounterDescriptor>,
        /// `ChildTracksOrdering`: 3 is EXPLICIT (by `sibling_order_rank`).
        #[prost(int32, optional, tag = "11")]
        pub child_ordering: Option<i32>,
        #[prost(int32, optional, tag = "12")]
        pub sibling_order_rank: Option<i32>,
        #[prost(string, optional, tag = "14")]
        pub description: Option<String>,
    }

    /// `perfetto.protos.ProcessDescriptor`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProcessDescriptor {
        #[prost(int32, optional, tag = "1")]
        pub pid: Option<i32>,
        #[prost(string, optional, tag = "6")]
        pub process_name: Option<String>,
    }

    /// `perfetto.protos.ThreadDescriptor`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ThreadDescriptor {
        #[prost(int32, optional, tag = "1")]
        pub pid: Option<i32>,
        #[prost(int32, optional, tag = "2")]
        pub tid: Option<i32>,
        #[prost(string, optional, tag = "5")]
        pub thread_name: Option<String>,
    }

    /// `perfetto.protos.CounterDescriptor`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CounterDescriptor {
        #[prost(string, optional, tag = "6")]
        pub unit_name: Option<String>,
    }

    /// `perfetto.protos.TrackEvent`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TrackEvent {
        #[prost(message, repeated, tag = "4")]
        pub debug_annotations: Vec<DebugAnnotation>,
        /// `TrackEvent.Type`: 1 slice begin, 2 slice end, 3 instant, 4 counter.
        #[prost(int32, optional, tag = "9")]
        pub r#type: Option<i32>,
        #[prost(uint64, optional, tag = "10")]
        pub name_iid: Option<u64>,
        #[prost(uint64, optional, tag = "11")]
        pub track_uuid: Option<u64>,
        #[prost(string, repeated, tag = "22")]
        pub categories: Vec<String>,
        #[prost(string, optional, tag = "23")]
        pub name: Option<String>,
        #[prost(double, optional, tag = "44")]
        pub double_counter_value: Option<f64>,
        #[prost(fixed64, repeated, packed = "false", tag = "47")]
        pub flow_ids: Vec<u64>,
        #[prost(fixed64, repeated, packed = "false", tag = "48")]
        pub terminating_flow_ids: Vec<u64>,
    }

    /// `perfetto.protos.DebugAnnotation`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct DebugAnnotation {
        #[prost(uint64, optional, tag = "1")]
        pub name_iid: Option<u64>,
        #[prost(int64, optional, tag = "4")]
        pub int_value: Option<i64>,
        #[prost(string, optional, tag = "6")]
        pub string_value: Option<String>,
        #[prost(string, optional, tag = "10")]
        pub name: Option<String>,
    }
}

use schema::{
    CounterDescriptor, DebugAnnotation, InternedData, InternedName, ProcessDescriptor,
    ThreadDescriptor, TracePacket, TrackDescriptor, TrackEvent,
};

const SLICE_BEGIN: i32 = 1;
const SLICE_END: i32 = 2;
const INSTANT: i32 = 3;
const COUNTER: i32 = 4;
/// The one packet sequence readpath writes.
const SEQUENCE: u32 = 1;
/// `TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`.
const STATE_CLEARED: u32 = 1;
/// `TracePacket.SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE`: the packet
/// refers to interned names.
const NEEDS_STATE: u32 = 2;
/// Most names interned (event names and argument names each); a name
/// past them is written in full.
const MAX_INTERNED: usize = 4096;
/// Room kept under the cap for the note that says what was dropped
/// (written with [`TraceWriter::finish`]).
const NOTE_ROOM: u64 = 4096;
/// Lanes a CPU's track may split into before an overlapping item is
/// dropped.
const MAX_LANES: usize = 4;
/// The smallest cap a trace may have, bytes.
pub const MIN_TRACE_BYTES: u64 = 64 * 1024;

/// The counters a trace carries per interval: name, unit, value.
fn counters(r: &IntervalRecord) -> [(&'static str, &'static str, f64); 6] {
    [
        ("throughput", "MiB/s", r.throughput_mib_s),
        ("latency p50", "us", r.latency_us.p50),
        ("latency p99", "us", r.latency_us.p99),
        ("latency p99.9", "us", r.latency_us.p999),
        ("queue p99", "us", r.stages_us.queue.p99),
        (
            "run_delay",
            "ms/s",
            crate::metrics::run_delay_ms_per_s(r.workers.run_delay_us, r.interval_s),
        ),
    ]
}

/// One variant's tracks (a process in the trace).
struct Variant {
    name: String,
    pid: i32,
    /// Per CPU, each lane's end so far (an item goes on the first lane
    /// whose last item ended before it started).
    lanes: HashMap<u16, Vec<u64>>,
    /// The threads' tracks made, by tid.
    threads: HashMap<i32, u64>,
    /// The thread names the run gave, by tid.
    names: HashMap<i32, TimelineThread>,
}

/// What a trace holds and what it dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Bytes written.
    pub bytes: u64,
    /// Work items written as slices.
    pub items: u64,
    /// Other spans written (sleeps, hogs).
    pub spans: u64,
    /// Counter values written.
    pub counter_values: u64,
    /// Spans dropped at the cap.
    pub dropped_at_cap: u64,
    /// Counter values and markers dropped at the cap.
    pub dropped_values: u64,
    /// Spans the run could not keep (a thread's or an interval's log full).
    pub dropped_by_run: u64,
    /// Items dropped because their CPU had no free lane.
    pub dropped_overlap: u64,
    /// The cap, bytes.
    pub cap: u64,
}

impl TraceStats {
    /// What was dropped, in a sentence; None when nothing was.
    pub fn dropped_note(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.dropped_at_cap + self.dropped_values > 0 {
            parts.push(format!(
                "{} spans and {} counter values and markers past its cap of {}",
                self.dropped_at_cap,
                self.dropped_values,
                crate::metrics::format::human_bytes(self.cap)
            ));
        }
        if self.dropped_by_run > 0 {
            parts.push(format!(
                "{} spans the run had no room for (more than {} an interval, or a thread's {})",
                self.dropped_by_run,
                crate::metrics::SPANS_PER_INTERVAL,
                crate::metrics::SPANS_PER_THREAD,
            ));
        }
        if self.dropped_overlap > 0 {
            parts.push(format!(
                "{} items overlapping {MAX_LANES} others on their CPU",
                self.dropped_overlap
            ));
        }
        (!parts.is_empty()).then(|| format!("the trace dropped {}", parts.join(", ")))
    }
}

/// A Perfetto trace being written.
pub struct TraceWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    stats: TraceStats,
    variants: Vec<Variant>,
    /// The variant the intervals now written belong to.
    current: usize,
    /// The latest time written.
    last_ns: u64,
    next_flow: u64,
    /// The tracks described so far.
    described: HashSet<u64>,
    /// Event names and argument names interned so far, by name.
    event_names: HashMap<String, u64>,
    arg_names: HashMap<String, u64>,
    /// Past the cap: only the closing note is still written.
    full: bool,
    /// Writing the closing note (the room kept for it may be used).
    closing: bool,
}

impl<W: Write> TraceWriter<W> {
    /// A trace written to `out`, at most `cap` bytes (at least
    /// [`MIN_TRACE_BYTES`]).
    pub fn new(out: W, cap: u64) -> TraceWriter<W> {
        TraceWriter {
            out,
            buf: Vec::with_capacity(256),
            stats: TraceStats {
                cap: cap.max(MIN_TRACE_BYTES),
                ..TraceStats::default()
            },
            variants: Vec::new(),
            current: 0,
            last_ns: 0,
            next_flow: 1,
            described: HashSet::new(),
            event_names: HashMap::new(),
            arg_names: HashMap::new(),
            full: false,
            closing: false,
        }
    }

    /// What is written so far.
    pub fn stats(&self) -> TraceStats {
        self.stats
    }

    /// The intervals that follow are `variant`'s (a process in the trace,
    /// made at its first use: the preset's name for a plain run, a
    /// compare's variant). The times are the one engine's, since it
    /// started.
    pub fn begin_run(&mut self, variant: &str) -> io::Result<()> {
        self.current = match self.variants.iter().position(|v| v.name == variant) {
            Some(i) => i,
            None => {
                let pid = self.variants.len() as i32 + 1;
                self.variants.push(Variant {
                    name: variant.to_string(),
                    pid,
                    lanes: HashMap::new(),
                    threads: HashMap::new(),
                    names: HashMap::new(),
                });
                self.describe(TrackDescriptor {
                    uuid: Some(process_uuid(pid)),
                    process: Some(ProcessDescriptor {
                        pid: Some(pid),
                        process_name: Some(variant.to_string()),
                    }),
                    // The CPUs first, then the counters, then the threads.
                    child_ordering: Some(3),
                    ..Default::default()
                })?;
                self.variants.len() - 1
            }
        };
        Ok(())
    }

    /// Writes one interval of the current run: its spans, counters and
    /// markers. Past the cap, counts what it drops.
    pub fn interval(&mut self, r: &IntervalRecord) -> io::Result<()> {
        if self.variants.is_empty() {
            self.begin_run("readpath")?;
        }
        if let Some(t) = &r.timeline {
            self.stats.dropped_by_run += t.dropped;
            let v = &mut self.variants[self.current];
            for th in &t.threads {
                v.names.entry(th.tid).or_insert_with(|| th.clone());
            }
            for s in &t.spans {
                self.span(s)?;
            }
        }
        let at = self.time(r.t_s);
        for (i, (name, unit, value)) in counters(r).into_iter().enumerate() {
            if !value.is_finite() {
                continue;
            }
            if !self.has_room(ITEM_ROOM) {
                self.stats.dropped_values += 1;
                continue;
            }
            let uuid = self.counter_track(i, name, unit)?;
            self.event(
                at,
                TrackEvent {
                    r#type: Some(COUNTER),
                    track_uuid: Some(uuid),
                    double_counter_value: Some(value),
                    ..Default::default()
                },
            )?;
            self.stats.counter_values += 1;
        }
        for e in &r.events {
            let label = crate::output::format::printable(&e.label, false);
            if !self.has_room(ITEM_ROOM + label.len() as u64) {
                self.stats.dropped_values += 1;
                continue;
            }
            let at = self.time(e.t_s);
            self.marker(at, &label)?;
        }
        Ok(())
    }

    /// The output.
    pub fn out(&self) -> &W {
        &self.out
    }

    /// Ends the trace: the note of what was dropped, if anything was, then
    /// a flush. Returns the output and what the trace holds.
    pub fn finish(mut self) -> io::Result<(W, TraceStats)> {
        if let Some(note) = self.stats.dropped_note() {
            self.closing = true;
            let uuid = NOTE_TRACK;
            self.describe(TrackDescriptor {
                uuid: Some(uuid),
                name: Some("readpath".into()),
                ..Default::default()
            })?;
            let at = self.last_ns;
            self.event(
                at,
                TrackEvent {
                    r#type: Some(INSTANT),
                    track_uuid: Some(uuid),
                    name: Some(note),
                    ..Default::default()
                },
            )?;
        }
        self.out.flush()?;
        Ok((self.out, self.stats))
    }

    /// A time of the run (s since its engine started) in the trace, ns.
    fn time(&self, t_s: f64) -> u64 {
        (t_s.max(0.0) * 1e9) as u64
    }

    /// One span: an item on its CPU's lane with its flow from the
    /// queueing CPU, or a sleep or a hog's time on its thread's track.
    fn span(&mut self, s: &Span) -> io::Result<()> {
        if !self.has_room(ITEM_ROOM) {
            self.stats.dropped_at_cap += 1;
            return Ok(());
        }
        let (start, end) = (s.start_ns, s.end_ns);
        if !s.kind.is_item() {
            let track = self.thread_track(s.tid)?;
            let name = match s.kind {
                SpanKind::Hog => format!("on CPU {}", s.cpu),
                k => k.name().to_string(),
            };
            self.slice(track, start, end, name, Vec::new(), Vec::new())?;
            self.stats.spans += 1;
            return Ok(());
        }
        let Some(lane) = self.lane(s.cpu, start, end) else {
            self.stats.dropped_overlap += 1;
            return Ok(());
        };
        let track = self.cpu_track(s.cpu, lane)?;
        let from = self.cpu_track(s.queued_cpu, 0)?;
        let flow = self.next_flow;
        self.next_flow += 1;
        let queued = s.queued_ns;
        self.event(
            queued,
            TrackEvent {
                r#type: Some(INSTANT),
                track_uuid: Some(from),
                name: Some("queued".into()),
                flow_ids: vec![flow],
                ..Default::default()
            },
        )?;
        let args = vec![
            int_arg("tid", i64::from(s.tid)),
            int_arg("queued_cpu", i64::from(s.queued_cpu)),
            int_arg("wait_ns", s.wait_ns() as i64),
        ];
        self.slice(
            track,
            start,
            end,
            s.kind.name().to_string(),
            args,
            vec![flow],
        )?;
        self.stats.items += 1;
        Ok(())
    }

    /// The first lane of `cpu` free at `start` (taken until `end`).
    fn lane(&mut self, cpu: u16, start: u64, end: u64) -> Option<usize> {
        let lanes = self.variants[self.current].lanes.entry(cpu).or_default();
        let i = match lanes.iter().position(|&e| e <= start) {
            Some(i) => i,
            None if lanes.len() < MAX_LANES => {
                lanes.push(0);
                lanes.len() - 1
            }
            None => return None,
        };
        lanes[i] = end;
        Some(i)
    }

    fn slice(
        &mut self,
        track: u64,
        start: u64,
        end: u64,
        name: String,
        args: Vec<DebugAnnotation>,
        flows_in: Vec<u64>,
    ) -> io::Result<()> {
        self.event(
            start,
            TrackEvent {
                r#type: Some(SLICE_BEGIN),
                track_uuid: Some(track),
                name: Some(name),
                debug_annotations: args,
                terminating_flow_ids: flows_in,
                ..Default::default()
            },
        )?;
        self.event(
            end,
            TrackEvent {
                r#type: Some(SLICE_END),
                track_uuid: Some(track),
                ..Default::default()
            },
        )
    }

    fn marker(&mut self, at: u64, label: &str) -> io::Result<()> {
        let parent = process_uuid(self.variants[self.current].pid);
        let uuid = parent | MARKERS;
        self.describe(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: Some("markers".into()),
            sibling_order_rank: Some(0),
            ..Default::default()
        })?;
        self.event(
            at,
            TrackEvent {
                r#type: Some(INSTANT),
                track_uuid: Some(uuid),
                name: Some(label.to_string()),
                ..Default::default()
            },
        )
    }

    /// The track of lane `lane` of `cpu`, described at its first use.
    fn cpu_track(&mut self, cpu: u16, lane: usize) -> io::Result<u64> {
        let parent = process_uuid(self.variants[self.current].pid);
        let uuid = parent | CPUS | (u64::from(cpu) << 4) | lane as u64;
        self.describe(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: Some(if lane == 0 {
                format!("CPU {cpu}")
            } else {
                format!("CPU {cpu} ·{}", lane + 1)
            }),
            sibling_order_rank: Some(100 + i32::from(cpu) * MAX_LANES as i32 + lane as i32),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// The track of thread `tid`, described at its first use.
    fn thread_track(&mut self, tid: i32) -> io::Result<u64> {
        let v = &self.variants[self.current];
        if let Some(&u) = v.threads.get(&tid) {
            return Ok(u);
        }
        let (pid, parent) = (v.pid, process_uuid(v.pid));
        let n = v.threads.len() as u64 + 1;
        let uuid = parent | THREADS | n;
        let name = v.names.get(&tid).map(|t| t.name.clone());
        self.variants[self.current].threads.insert(tid, uuid);
        self.describe(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            thread: Some(ThreadDescriptor {
                pid: Some(pid),
                tid: Some(tid),
                thread_name: name,
            }),
            sibling_order_rank: Some(100_000 + n as i32),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// A counter's track (the `i`th), described at its first use.
    fn counter_track(&mut self, i: usize, name: &str, unit: &str) -> io::Result<u64> {
        let parent = process_uuid(self.variants[self.current].pid);
        let uuid = parent | COUNTERS | i as u64;
        self.describe(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: Some(format!("{name} ({unit})")),
            counter: Some(CounterDescriptor {
                unit_name: Some(unit.to_string()),
            }),
            sibling_order_rank: Some(10 + i as i32),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// Writes a track's descriptor, once.
    fn describe(&mut self, d: TrackDescriptor) -> io::Result<()> {
        let uuid = d.uuid.unwrap_or_default();
        if !self.described.insert(uuid) {
            return Ok(());
        }
        // The first packet of the sequence says its state starts here.
        let flags = (self.stats.bytes == 0).then_some(STATE_CLEARED);
        self.packet(TracePacket {
            trusted_packet_sequence_id: Some(SEQUENCE),
            sequence_flags: flags,
            track_descriptor: Some(d),
            ..Default::default()
        })
    }

    /// Writes one event at `at` (ns of the trace), its name and its
    /// arguments' names interned: a name's first packet gives it a number
    /// (`interned_data`), later ones refer to it (a work item's names cost
    /// a byte or two, not their length).
    fn event(&mut self, at: u64, mut e: TrackEvent) -> io::Result<()> {
        self.last_ns = self.last_ns.max(at);
        let mut new = InternedData::default();
        if let Some(name) = e.name.take() {
            match intern(&mut self.event_names, &name, &mut new.event_names) {
                Some(iid) => e.name_iid = Some(iid),
                None => e.name = Some(name),
            }
        }
        for a in &mut e.debug_annotations {
            if let Some(name) = a.name.take() {
                match intern(&mut self.arg_names, &name, &mut new.debug_annotation_names) {
                    Some(iid) => a.name_iid = Some(iid),
                    None => a.name = Some(name),
                }
            }
        }
        let interned =
            e.name_iid.is_some() || e.debug_annotations.iter().any(|a| a.name_iid.is_some());
        let fresh = !new.event_names.is_empty() || !new.debug_annotation_names.is_empty();
        self.packet(TracePacket {
            timestamp: Some(at),
            trusted_packet_sequence_id: Some(SEQUENCE),
            track_event: Some(e),
            interned_data: fresh.then_some(new),
            sequence_flags: interned.then_some(NEEDS_STATE),
            ..Default::default()
        })
    }

    /// True when `need` more bytes fit under the cap (less the room kept
    /// for the closing note); else the trace is full from now on.
    fn has_room(&mut self, need: u64) -> bool {
        let room = if self.closing {
            self.stats.cap
        } else {
            self.stats.cap.saturating_sub(NOTE_ROOM)
        };
        if !self.full && self.stats.bytes + need > room {
            self.full = true;
        }
        !self.full || self.closing
    }

    /// Writes a packet as a `Trace.packet` field (the caller checked the
    /// room of what it writes with [`Self::has_room`]).
    fn packet(&mut self, p: TracePacket) -> io::Result<()> {
        self.buf.clear();
        prost::encoding::message::encode(1, &p, &mut self.buf);
        self.out.write_all(&self.buf)?;
        self.stats.bytes += self.buf.len() as u64;
        Ok(())
    }
}

/// The number of `name` in `table`, given one (and said in `new`) at its
/// first use; None once the table is full.
fn intern(
    table: &mut HashMap<String, u64>,
    name: &str,
    new: &mut Vec<InternedName>,
) -> Option<u64> {
    if let Some(&iid) = table.get(name) {
        return Some(iid);
    }
    if table.len() >= MAX_INTERNED {
        return None;
    }
    let iid = table.len() as u64 + 1;
    table.insert(name.to_string(), iid);
    new.push(InternedName {
        iid: Some(iid),
        name: Some(name.to_string()),
    });
    Some(iid)
}

/// A process track's uuid: the variant in the high bits, what it holds
/// (CPUs, threads, counters, markers) below.
fn process_uuid(pid: i32) -> u64 {
    (pid as u64) << 32
}
const CPUS: u64 = 0x1000_0000;
const THREADS: u64 = 0x2000_0000;
const COUNTERS: u64 = 0x3000_0000;
const MARKERS: u64 = 0x4000_0000;
/// The track of the note of what a trace dropped.
const NOTE_TRACK: u64 = 0xffff_ffff;
/// Room an item takes at most (two track descriptors, three events).
const ITEM_ROOM: u64 = 512;

fn int_arg(name: &str, v: i64) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.to_string()),
        int_value: Some(v),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Timeline;
    use prost::Message;

    /// The packets of a trace, read back with the same schema.
    fn packets(bytes: &[u8]) -> Vec<TracePacket> {
        #[derive(Clone, PartialEq, prost::Message)]
        struct Trace {
            #[prost(message, repeated, tag = "1")]
            packet: Vec<TracePacket>,
        }
        Trace::decode(bytes).expect("a Trace").packet
    }

    /// The interned names of a trace's packets: (event names, argument
    /// names), by number; each given once, and never renumbered.
    fn interned(ps: &[TracePacket]) -> (HashMap<u64, String>, HashMap<u64, String>) {
        let (mut ev, mut args) = (HashMap::new(), HashMap::new());
        for d in ps.iter().filter_map(|p| p.interned_data.as_ref()) {
            for (table, names) in [
                (&mut ev, &d.event_names),
                (&mut args, &d.debug_annotation_names),
            ] {
                for n in names {
                    let old = table.insert(n.iid.unwrap(), n.name.clone().unwrap());
                    assert!(old.is_none(), "{n:?} interned twice");
                }
            }
        }
        (ev, args)
    }

    /// An event's name, written or interned.
    fn name_of(e: &TrackEvent, ev: &HashMap<u64, String>) -> Option<String> {
        e.name.clone().or_else(|| ev.get(&e.name_iid?).cloned())
    }

    fn item(cpu: u16, queued_cpu: u16, q: u64, s: u64, e: u64) -> Span {
        Span {
            kind: SpanKind::Decrypt,
            cpu,
            queued_cpu,
            tid: 7,
            queued_ns: q,
            start_ns: s,
            end_ns: e,
        }
    }

    fn record(spans: Vec<Span>) -> IntervalRecord {
        IntervalRecord {
            t_s: 1.0,
            interval_s: 0.25,
            timeline: Some(Timeline {
                spans,
                dropped: 0,
                threads: vec![],
            }),
            ..Default::default()
        }
    }

    #[test]
    fn items_overlapping_on_a_cpu_take_a_second_lane_and_every_track_is_described_first() {
        let mut w = TraceWriter::new(Vec::new(), 1 << 20);
        w.begin_run("readpath: run").unwrap();
        // The second starts before the first ends (a worker moved mid-item);
        // the third fits after the first on lane 0.
        let spans = vec![
            item(1, 0, 10, 100, 300),
            item(1, 1, 150, 200, 400),
            item(1, 0, 250, 300, 350),
        ];
        w.interval(&record(spans)).unwrap();
        let (bytes, stats) = w.finish().unwrap();
        assert_eq!((stats.items, stats.dropped_overlap), (3, 0));
        let ps = packets(&bytes);
        assert_eq!(
            ps[0].sequence_flags,
            Some(STATE_CLEARED),
            "the sequence starts clear"
        );
        let mut described = HashSet::new();
        let mut lanes = Vec::new();
        for p in &ps {
            if let Some(d) = &p.track_descriptor {
                described.insert(d.uuid.unwrap());
                if let Some(n) = &d.name {
                    lanes.push(n.clone());
                }
            }
            if let Some(e) = &p.track_event {
                assert!(described.contains(&e.track_uuid.unwrap()), "{e:?}");
            }
        }
        assert!(lanes.contains(&"CPU 1".to_string()) && lanes.contains(&"CPU 1 ·2".to_string()));
        assert!(
            lanes.contains(&"CPU 0".to_string()),
            "the queueing CPU's track: {lanes:?}"
        );
        // A begin carries the item's flow in, its queued instant the flow out.
        let begins: Vec<&TrackEvent> = ps
            .iter()
            .filter_map(|p| p.track_event.as_ref())
            .filter(|e| e.r#type == Some(SLICE_BEGIN))
            .collect();
        assert_eq!(begins.len(), 3);
        assert_eq!(begins[0].terminating_flow_ids, [1]);
        // Names interned: each given a number once, in the packet of its
        // first use, which then needs the sequence's state.
        let (ev, args) = interned(&ps);
        for b in &begins {
            assert_eq!(b.name, None, "interned, not written");
            assert_eq!(name_of(b, &ev).as_deref(), Some("decrypt"));
        }
        assert_eq!(ev.values().filter(|n| *n == "decrypt").count(), 1);
        let wait_iid = args.iter().find(|(_, n)| *n == "wait_ns").map(|(i, _)| *i);
        let wait = begins[1]
            .debug_annotations
            .iter()
            .find(|a| a.name_iid.is_some() && a.name_iid == wait_iid);
        assert_eq!(wait.unwrap().int_value, Some(50));
        for p in &ps {
            let Some(e) = &p.track_event else { continue };
            let refers =
                e.name_iid.is_some() || e.debug_annotations.iter().any(|a| a.name_iid.is_some());
            let flag = p.sequence_flags.unwrap_or(0) & NEEDS_STATE != 0;
            assert_eq!(refers, flag, "{p:?}");
        }
    }

    #[test]
    fn a_trace_never_passes_its_cap_and_says_what_it_dropped_in_its_last_packet() {
        let cap = MIN_TRACE_BYTES;
        let mut w = TraceWriter::new(Vec::new(), cap);
        for i in 0..40 {
            let spans = (0..100)
                .map(|j| {
                    let t = (i * 100 + j) * 1_000;
                    item((j % 2) as u16, 0, t, t + 10, t + 500)
                })
                .collect();
            w.interval(&record(spans)).unwrap();
        }
        let (bytes, stats) = w.finish().unwrap();
        assert!(bytes.len() as u64 <= cap, "{} bytes", bytes.len());
        assert_eq!(stats.bytes, bytes.len() as u64);
        assert_eq!(stats.items + stats.dropped_at_cap, 4000);
        assert!(stats.dropped_at_cap > 0);
        let note = stats.dropped_note().unwrap();
        assert!(
            note.contains(&format!("{} spans", stats.dropped_at_cap)),
            "{note}"
        );
        let ps = packets(&bytes);
        let (ev, _) = interned(&ps);
        let last = ps.last().unwrap();
        assert_eq!(
            name_of(last.track_event.as_ref().unwrap(), &ev).as_deref(),
            Some(note.as_str())
        );
    }
}
