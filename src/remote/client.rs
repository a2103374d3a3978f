//! The near end of `--remote`: starts `readpath agent` on the target
//! through [`super::transport`], checks its hello, and turns its lines back
//! into interval records on a channel, so the explorer and `run` drive it
//! as they drive the local engine ([`Workload`]). ssh, adb and lab guests
//! (`vm:`) all come through here, so what it refuses it refuses for all.
//! A lost connection keeps what arrived and says so; a line that is not
//! the protocol ends the session with an error naming the line; records
//! that arrive late are shown as a lag, never dropped. Records are taken
//! only as the run can make them ([`super::pace`]: in order, one per
//! interval plus slack), and memory stays bounded whatever the agent
//! sends: the channel to the workload holds [`RECORDS_CAP`] records, the
//! reader holds at most [`HELD_BYTES`] more while the workload cannot take
//! them (waiting for a reply, after the stop), a reply is taken only for a
//! request sent, and nothing may follow the summary. Every wait of the
//! start (the agent's hello, its header) ends on a stop signal, and the
//! hello has a timeout ([`super::transport::Timeouts`]); the end waits for
//! the summary only while the agent keeps talking
//! ([`super::pace::stop_silence`]), at most [`STOP_LIMIT`], and at most
//! [`SIGNAL_GRACE`] after a stop signal. A line longer than
//! [`super::protocol::MAX_LINE`] after the start is skipped to its newline
//! (read through a bounded buffer, never held whole), counted and said (a
//! notice in the next record, and [`Finished::refused_note`]), and the
//! session goes on.

use std::collections::VecDeque;
use std::io::Write;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{
    Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError, channel, sync_channel,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::pace::{Pace, PaceError};
use super::protocol::{Command, Fatal, LineError, LineProblem, Message, Progress, Reply, Running};
use super::transport::Remote;
use crate::engine::EngineError;
use crate::engine::workload::{Place, Workload};
use crate::metrics::IntervalRecord;
use crate::output::recording::Header;
use crate::output::report::RunSummary;
use crate::settings::{SettingChange, Settings};
use crate::sys::{Features, MachineInfo};

/// How long a reply may take (an apply drains and restarts the workload).
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the agent may take to start the workload (it may prepare a
/// dataset first); a stop signal ends the wait at once.
const START_TIMEOUT: Duration = Duration::from_secs(900);
/// How often a wait looks at the stop signals.
const POLL: Duration = Duration::from_millis(20);
/// Most notices of refused lines carried by one record.
const MAX_PENDING_NOTICES: usize = 16;
/// Records the channel from the reader to the workload holds; the reader
/// waits for room beyond (the agent's own queue then holds the rest).
pub const RECORDS_CAP: usize = 64;
/// What the reader may hold beside the channel while the workload cannot
/// take records (it waits for a reply, or the run is ending): 64 MiB,
/// counted as the records' line bytes plus their histograms' entries.
pub const HELD_BYTES: usize = 64 << 20;
/// The longest the end waits for the agent's summary, however it talks.
pub const STOP_LIMIT: Duration = Duration::from_secs(60);
/// How long the end still waits for the summary after a stop signal.
pub const SIGNAL_GRACE: Duration = Duration::from_millis(1500);
/// How long a lab guest may take to power off after its summary (it syncs
/// and unmounts its disk first); QEMU is killed after.
const POWEROFF_WAIT: Duration = Duration::from_secs(30);

/// Why the agent's lines stopped, or why there is no summary: kept by the
/// reader, said when the workload asks ([`Workload::lost`]) and as the
/// [`Finished::summary`]'s error. Clone: the workload reads it while the
/// reader holds it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Lost {
    /// The lines simply ended.
    #[error("the agent's output ended")]
    Ended,
    /// Reading them failed.
    #[error("reading from the agent: {0}")]
    Read(Arc<std::io::Error>),
    /// A line the protocol refuses.
    #[error(transparent)]
    Line(#[from] LineError),
    /// The agent's own fatal error.
    #[error("{}", .0.message)]
    Fatal(Fatal),
    /// A message other than the hello or the header, first.
    #[error("agent line {line}: {kind} out of turn")]
    OutOfTurn {
        /// The line, 1-based.
        line: usize,
        /// What it was (`an interval`).
        kind: &'static str,
    },
    /// A line after the summary.
    #[error("agent line {line}: {what} after the summary: the summary is the agent's last line")]
    AfterSummary {
        /// The line, 1-based.
        line: usize,
        /// What it was (`a line` where it was no message).
        what: &'static str,
    },
    /// A record breaking the pace of a run.
    #[error("agent line {line}: {source}")]
    Pace {
        /// The line, 1-based.
        line: usize,
        /// The rule it broke.
        source: PaceError,
    },
    /// A reply to no request.
    #[error(
        "agent line {line}: a reply to {:?} that no request asked for: the agent answers each request at most once",
        crate::output::format::printable(cmd, false)
    )]
    UnaskedReply {
        /// The line, 1-based.
        line: usize,
        /// The request it says it answers.
        cmd: String,
    },
    /// A hello or a header once the run started.
    #[error("agent line {line}: a second hello or header")]
    SecondHello {
        /// The line, 1-based.
        line: usize,
    },
    /// After the summary, the agent went on.
    #[error("the agent did not end after its summary")]
    NoEnd,
    /// After the stop, the agent fell silent without its summary.
    #[error(
        "no summary from the agent: it said nothing for {:.1} s after the stop (its last line: line {lines}); a run's agent sends a record each interval and its summary once stopped",
        silence.as_secs_f64()
    )]
    Silent {
        /// How long it said nothing.
        silence: Duration,
        /// Lines read.
        lines: usize,
    },
    /// No summary within [`STOP_LIMIT`] of the stop.
    #[error("no summary from the agent in {} s after the stop", STOP_LIMIT.as_secs())]
    StopLimit,
    /// A stop signal came while waiting for the summary.
    #[error(
        "interrupted by {} while waiting for the agent's summary",
        crate::sys::signal_name(*sig)
    )]
    Interrupted {
        /// The signal.
        sig: i32,
    },
    /// The agent ended, and sent no summary.
    #[error("the agent ended without its summary")]
    NoSummary,
}

/// What the reader thread saw last, shared with the workload.
#[derive(Default)]
struct Shared {
    /// Why the lines stopped (None while they come, or after a summary).
    lost: Option<Lost>,
    /// The summary, once it came.
    summary: Option<RunSummary>,
    /// Seconds the newest record arrived after it was due.
    lag_s: f64,
    /// The newest record's end time (after any reconnection's offset).
    last_t: f64,
    /// The most any record arrived late, s.
    max_lag_s: f64,
    /// Records whose sequence number skipped (none from a readpath agent:
    /// said, never silent).
    missing: u64,
    /// The sequence number expected next.
    next_seq: Option<u64>,
    /// Lines refused for their length (skipped; the session went on).
    refused: u64,
    /// What the first refused line was.
    refused_first: Option<String>,
    /// When the start request was sent: the agent's run began after it.
    start_sent: Option<Instant>,
    /// When the last line came (None before the first).
    last_line: Option<Instant>,
    /// Lines read so far.
    lines: usize,
    /// Replies the agent may still send: one per request sent (it answers
    /// each at most once), none for the start and the stop.
    asked: u64,
    /// A reply is awaited: the workload takes no records meanwhile.
    waiting: bool,
    /// The stop was sent: the workload takes no more records.
    stopping: bool,
    /// Records held beside the full channel (in order, after it), each
    /// with its weight ([`weight`]).
    held: VecDeque<(IntervalRecord, usize)>,
    /// Their weight.
    held_bytes: usize,
    /// Records after the stop beyond [`HELD_BYTES`]: not kept, said.
    unkept: u64,
    /// The settings as they run and the unbound queues' pods, as the agent
    /// last said (its header, an apply reply, or a running line after a
    /// refusal at run time), in the order its lines came.
    running: Option<Running>,
}

/// A workload running on another machine.
pub struct RemoteWorkload {
    remote: Remote,
    /// How the agent was started, to start it again (`R` after a loss).
    restart: Restart,
    child: Child,
    stdin: Option<ChildStdin>,
    /// The recording header the agent sent at its start.
    pub header: Header,
    settings: Settings,
    paused: bool,
    records: Receiver<IntervalRecord>,
    replies: Receiver<Reply>,
    shared: Arc<Mutex<Shared>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// A remote workload's end.
pub struct Finished {
    /// The target's summary, or why there is none.
    pub summary: Result<RunSummary, Lost>,
    /// Records not taken yet.
    pub rest: Vec<IntervalRecord>,
    /// The most any record arrived late, s.
    pub max_lag_s: f64,
    /// Records that never came (sequence numbers skipped).
    pub missing: u64,
    /// Lines of the agent refused for their length and skipped.
    pub refused_lines: u64,
    /// What the first of them was.
    pub refused_first: Option<String>,
    /// Records after the stop not kept: more than [`HELD_BYTES`] of them
    /// waited behind the channel.
    pub unkept: u64,
}

impl Finished {
    /// What to say of the lines refused for their length, and of the
    /// records after the stop not kept, if any.
    pub fn refused_note(&self) -> Option<String> {
        let refused = self
            .refused_first
            .as_deref()
            .map(|first| match self.refused_lines {
                1 => format!("1 line of the agent refused and skipped ({first})"),
                n => format!("{n} lines of the agent refused and skipped (the first: {first})"),
            });
        let unkept = (self.unkept > 0).then(|| {
            format!(
                "{} records after the stop not kept (more than {} MiB of them waited)",
                self.unkept,
                HELD_BYTES >> 20
            )
        });
        match (refused, unkept) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        }
    }
}

/// How to start the agent again.
#[derive(Clone)]
struct Restart {
    /// The agent's command line there.
    line: String,
    /// The interval.
    interval: Duration,
    /// The command, for the header.
    command: String,
    /// The seconds already shown: a new agent's times go on from here.
    t_offset: f64,
}

/// What to start on the target.
pub struct StartSpec {
    /// A preset name (resolved there) or none.
    pub preset: Option<String>,
    /// Whole settings (a preset file read here), or none.
    pub settings: Option<Settings>,
    /// `--set` overrides.
    pub set: Vec<String>,
    /// The interval.
    pub interval: Duration,
    /// The command, for the recording header.
    pub command: String,
    /// The directory of readpath's binary on the target (None: the default).
    pub dir: Option<String>,
    /// The data dir there (None: the target's default).
    pub data_dir: Option<String>,
    /// Copy the binary even when the target has this version.
    pub refresh: bool,
}

fn err(place: &str, message: impl std::fmt::Display, bad_input: bool) -> EngineError {
    // The transport's messages already start with the place.
    let message = message.to_string();
    let message = match message.strip_prefix(&format!("{place}: ")) {
        Some(rest) => rest.to_string(),
        None => message,
    };
    EngineError::Remote {
        place: place.into(),
        message,
        bad_input,
    }
}

fn lock(s: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// The reader thread's ends of the channels.
struct Outlets {
    /// The hello and the header, to whoever waits for the start.
    first: Sender<Result<Message, LineError>>,
    /// Interval records, to the workload ([`RECORDS_CAP`]).
    records: SyncSender<IntervalRecord>,
    /// Replies (at most one per request sent).
    replies: Sender<Reply>,
}

/// Reads the agent's lines until they end or break the protocol: records
/// to `out.records`, replies to `out.replies`, the summary and why it
/// ended into `shared`.
fn read_agent(
    out: std::process::ChildStdout,
    to: Outlets,
    shared: Arc<Mutex<Shared>>,
    interval_ms: u64,
    t_offset: f64,
) {
    let mut r = std::io::BufReader::with_capacity(256 * 1024, out);
    let mut buf = Vec::new();
    let mut n = 0usize;
    let mut started: Option<Instant> = None;
    let mut first = Some(to.first);
    let mut hello = false;
    let mut pace = Pace::new(interval_ms);
    // Notices of refused lines, for the next record.
    let mut pending: Vec<String> = Vec::new();
    let end = |why: Option<Lost>| {
        let mut s = lock(&shared);
        if s.summary.is_none() && s.lost.is_none() {
            s.lost = Some(why.unwrap_or(Lost::Ended));
        }
    };
    let interval_s = interval_ms as f64 / 1e3;
    loop {
        n += 1;
        let read = crate::output::recording::read_line_capped(&mut r, &mut buf);
        {
            let mut s = lock(&shared);
            s.last_line = Some(Instant::now());
            s.lines = n;
        }
        match read {
            Ok(true) => {}
            Ok(false) => return end(None),
            Err(Ok(e)) => return end(Some(Lost::Read(Arc::new(e)))),
            Err(Err(())) if first.is_some() => {
                return end(Some(Lost::Line(LineError {
                    line: n,
                    problem: LineProblem::TooLong,
                })));
            }
            Err(Err(())) => {
                // Skipped to its newline, said, and the session goes on.
                if let Err(why) = skip_overlong(&mut r, &mut buf, n, &shared, &mut pending) {
                    return end(Some(why));
                }
                continue;
            }
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let bytes = text.len();
        let msg = Message::parse(text, n);
        // The hello and the header go to whoever waits for the start; the
        // first line that is not the next of them ends the reading (the
        // waiter says what came instead).
        if let Some(tx) = &first {
            let next = match (&msg, hello) {
                (Ok(Message::Hello(_)), false) => {
                    hello = true;
                    true
                }
                (Ok(Message::Header(_)), true) => {
                    started = Some(Instant::now());
                    true
                }
                (Ok(Message::Progress(_)), true) => true,
                _ => false,
            };
            let _ = tx.send(msg.clone());
            if started.is_some() {
                first = None;
            }
            if next {
                continue;
            }
            return end(Some(match msg {
                Err(e) => Lost::Line(e),
                Ok(Message::Fatal(f)) => Lost::Fatal(f),
                Ok(m) => Lost::OutOfTurn {
                    line: n,
                    kind: m.kind(),
                },
            }));
        }
        if lock(&shared).summary.is_some() {
            let what = msg.as_ref().map_or("a line", |m| m.kind());
            let mut s = lock(&shared);
            s.summary = None;
            s.lost = Some(Lost::AfterSummary { line: n, what });
            return;
        }
        match msg {
            Ok(Message::Interval(mut rec)) => {
                let since = lock(&shared)
                    .start_sent
                    .map_or(0.0, |t| t.elapsed().as_secs_f64());
                if let Err(source) = pace.take(rec.seq, rec.t_s, since) {
                    return end(Some(Lost::Pace { line: n, source }));
                }
                let clock = Clock {
                    started,
                    interval_s,
                    t_offset,
                };
                take_record(&mut rec, &mut pending, &shared, &clock);
                let w = weight(&rec, bytes);
                if deliver(*rec, w, &to.records, &shared).is_err() {
                    return;
                }
            }
            Ok(Message::Reply(rep)) => {
                let mut s = lock(&shared);
                if s.asked == 0 {
                    drop(s);
                    return end(Some(Lost::UnaskedReply {
                        line: n,
                        cmd: rep.cmd.clone(),
                    }));
                }
                s.asked -= 1;
                if let Some(e) = &rep.effective {
                    s.running = Some(Running {
                        effective: e.clone(),
                        pods: rep.pods.clone(),
                    });
                }
                drop(s);
                let _ = to.replies.send(*rep);
                // What was held while the reply was awaited goes first.
                if flush_held(&to.records, &shared).is_err() {
                    return;
                }
            }
            Ok(Message::Running(r)) => lock(&shared).running = Some(*r),
            Ok(Message::Summary(s)) => {
                lock(&shared).summary = Some(*s);
            }
            Ok(Message::Fatal(f)) => return end(Some(Lost::Fatal(f))),
            Ok(Message::Hello(_) | Message::Header(_)) => {
                return end(Some(Lost::SecondHello { line: n }));
            }
            Ok(m @ Message::Progress(_)) => {
                return end(Some(Lost::OutOfTurn {
                    line: n,
                    kind: m.kind(),
                }));
            }
            Err(e) => return end(Some(Lost::Line(e))),
        }
    }
}

/// What a record weighs while it is held: its line's bytes plus its
/// histograms' entries (16 bytes each, decoded).
fn weight(rec: &IntervalRecord, line_bytes: usize) -> usize {
    line_bytes + 16 * (rec.latency_hist.0.len() + rec.queue_hist.0.len())
}

/// Moves held records into the channel while it has room; Err when the
/// workload is gone.
fn move_held(records: &SyncSender<IntervalRecord>, sh: &mut Shared) -> Result<(), ()> {
    while let Some((rec, w)) = sh.held.pop_front() {
        match records.try_send(rec) {
            Ok(()) => sh.held_bytes -= w,
            Err(TrySendError::Full(rec)) => {
                sh.held.push_front((rec, w));
                return Ok(());
            }
            Err(TrySendError::Disconnected(_)) => return Err(()),
        }
    }
    Ok(())
}

/// Hands a record (of weight `w`) to the workload, after any held before
/// it. When the channel is full: held while the workload cannot take
/// records (a reply awaited, the stop sent) and [`HELD_BYTES`] allow, not
/// kept (counted) after the stop beyond that, else waited for. Err when
/// the workload is gone.
fn deliver(
    rec: IntervalRecord,
    w: usize,
    records: &SyncSender<IntervalRecord>,
    shared: &Mutex<Shared>,
) -> Result<(), ()> {
    let mut rec = rec;
    loop {
        let mut sh = lock(shared);
        move_held(records, &mut sh)?;
        if sh.held.is_empty() {
            match records.try_send(rec) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(r)) => rec = r,
                Err(TrySendError::Disconnected(_)) => return Err(()),
            }
        }
        if sh.waiting || sh.stopping {
            if sh.held_bytes + w <= HELD_BYTES {
                sh.held_bytes += w;
                sh.held.push_back((rec, w));
                return Ok(());
            }
            if sh.stopping {
                sh.unkept += 1;
                return Ok(());
            }
        }
        drop(sh);
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Moves every held record into the channel as the workload takes them,
/// until none is left or the workload again cannot take them (Err: it is
/// gone).
fn flush_held(records: &SyncSender<IntervalRecord>, shared: &Mutex<Shared>) -> Result<(), ()> {
    loop {
        let mut sh = lock(shared);
        move_held(records, &mut sh)?;
        if sh.held.is_empty() || sh.waiting || sh.stopping {
            return Ok(());
        }
        drop(sh);
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Skips the rest of an agent line longer than the protocol allows (its
/// start is in `buf`, line `n`), counts it as refused in `shared` and
/// keeps a notice of it in `pending` for the next record; the error says
/// why the agent could no longer be read.
fn skip_overlong(
    r: &mut impl std::io::BufRead,
    buf: &mut Vec<u8>,
    n: usize,
    shared: &Mutex<Shared>,
    pending: &mut Vec<String>,
) -> Result<(), Lost> {
    let skipped = match skip_line(r) {
        Ok(k) => k,
        Err(e) => return Err(Lost::Read(Arc::new(e))),
    };
    let text = format!(
        "agent line {n}: {} bytes, longer than {} bytes: skipped",
        (buf.len() as u64).saturating_add(skipped),
        super::protocol::MAX_LINE
    );
    buf.clear();
    let mut sh = lock(shared);
    sh.refused += 1;
    sh.refused_first.get_or_insert_with(|| text.clone());
    drop(sh);
    if pending.len() < MAX_PENDING_NOTICES {
        pending.push(text);
    }
    Ok(())
}

/// The agent's clock as the reader sees it.
struct Clock {
    /// When the header came (the run's start here).
    started: Option<Instant>,
    /// The run's interval, seconds: the slack a record is due within.
    interval_s: f64,
    /// Where a reconnected agent's times go on from, seconds.
    t_offset: f64,
}

/// Takes in a record from the agent: its times moved by the clock's
/// offset, the pending notices added to it, and the session's last time,
/// missing records and lag updated in `shared`.
fn take_record(
    rec: &mut IntervalRecord,
    pending: &mut Vec<String>,
    shared: &Mutex<Shared>,
    clock: &Clock,
) {
    let t_offset = clock.t_offset;
    // A reconnected agent starts its clock again: its times go
    // on from where the charts are.
    if t_offset > 0.0 {
        rec.t_s += t_offset;
        for e in &mut rec.events {
            e.t_s += t_offset;
        }
    }
    for text in pending.drain(..) {
        rec.notices
            .push(crate::metrics::Notice { t_s: rec.t_s, text });
    }
    let mut sh = lock(shared);
    sh.last_t = sh.last_t.max(rec.t_s);
    if let Some(want) = sh.next_seq
        && rec.seq > want
    {
        sh.missing += rec.seq - want;
    }
    sh.next_seq = Some(rec.seq + 1);
    if let Some(t0) = clock.started {
        // Due at its end time (plus an interval of slack).
        let late = t0.elapsed().as_secs_f64() - (rec.t_s - t_offset) - clock.interval_s;
        sh.lag_s = late.max(0.0);
        sh.max_lag_s = sh.max_lag_s.max(sh.lag_s);
    }
}

/// Reads the rest of a line (to its newline or the end) without keeping
/// it; its bytes, the newline not counted.
fn skip_line(r: &mut impl std::io::BufRead) -> std::io::Result<u64> {
    let mut n = 0u64;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(n);
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        r.consume(take);
        if done {
            return Ok(n + take as u64 - 1);
        }
        n += take as u64;
    }
}

/// Waits up to `timeout` for the next of the first messages, ending at
/// once on a stop signal: the message, or why there is none.
fn wait_first(
    rx: &Receiver<Result<Message, LineError>>,
    timeout: Duration,
    status: &mut Status,
) -> Result<Result<Message, LineError>, Waited> {
    let start = Instant::now();
    loop {
        status.tick();
        let sig = crate::sys::stop_signal();
        if sig != 0 {
            return Err(Waited::Interrupted(sig));
        }
        match rx.recv_timeout(POLL) {
            Ok(m) => return Ok(m),
            Err(RecvTimeoutError::Disconnected) => return Err(Waited::Ended),
            Err(RecvTimeoutError::Timeout) if start.elapsed() >= timeout => {
                return Err(Waited::TimedOut);
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

/// A phase of a remote start, shown on a terminal's stderr as one line
/// that counts its seconds (`readpath: vm:debian-6.1: booting the guest,
/// waiting for the agent… 12 s`), so the first minute on a slow target
/// (a TCG guest boots in 30-60 s) is never silent; cleared when the phase
/// ends, and, where it took 2 s or more, said with how long
/// (`readpath: vm:debian-6.1: agent ready after 38.2 s`). Nothing is
/// drawn where stderr is not a terminal; the closing line is said anyway.
pub(crate) struct Status {
    /// The target (`vm:debian-6.1`).
    place: String,
    /// What the phase waits for.
    what: String,
    start: Instant,
    /// The seconds the line last showed; whether it is on the terminal.
    shown: u64,
    drawn: bool,
    tty: bool,
    /// The agent's dataset preparation, where it said how far it got.
    dataset: Option<Preparing>,
}

/// A dataset the agent prepares: how far it is, since when, and when it
/// ended.
struct Preparing {
    now: Progress,
    since: Instant,
    took: Option<f64>,
}

impl Preparing {
    /// `dataset [=====>    ] 96M/256M, 40s left`: the bar, the bytes and
    /// the time left at the pace so far (short: it shares an 80-column
    /// line with the target's name).
    fn line(&self) -> String {
        const WIDTH: u64 = 16;
        let Progress { done, total } = self.now;
        let full = (done.saturating_mul(WIDTH) / total.max(1)).min(WIDTH) as usize;
        let bar = format!(
            "[{}{}{}]",
            "=".repeat(full),
            if full < WIDTH as usize { ">" } else { "" },
            " ".repeat((WIDTH as usize).saturating_sub(full + 1))
        );
        let e = self.since.elapsed().as_secs_f64();
        let left = e / done.max(1) as f64 * (total - done) as f64;
        let left = if done > 0 && e >= 1.0 && left >= 1.0 {
            format!(", {} left", crate::output::format::human_secs(left))
        } else {
            String::new()
        };
        format!(
            "dataset {bar} {}/{}{left}",
            crate::settings::format_size(done),
            crate::settings::format_size(total)
        )
    }
}

impl Status {
    /// `what` began now on `place`.
    pub(crate) fn new(place: &str, what: &str) -> Status {
        use std::io::IsTerminal;
        Status {
            place: place.to_string(),
            what: what.to_string(),
            start: Instant::now(),
            shown: 0,
            drawn: false,
            tty: std::io::stderr().is_terminal(),
            dataset: None,
        }
    }

    /// Redraws the line once a second.
    fn tick(&mut self) {
        let s = self.start.elapsed().as_secs();
        if s > self.shown {
            self.draw(s);
        }
    }

    /// The line, counting `s` seconds: what the phase waits for, and the
    /// dataset's bar while the agent prepares it.
    fn draw(&mut self, s: u64) {
        if !self.tty {
            return;
        }
        use std::io::Write;
        let mut e = std::io::stderr();
        let what = match &self.dataset {
            Some(d) if d.took.is_none() => d.line(),
            _ => self.what.clone(),
        };
        // One line, never wrapped: cut to the terminal's width.
        let line = format!("readpath: {}: {what}… {s} s", self.place);
        let width = crate::sys::stderr_columns().map_or(79, |w| usize::from(w.max(2)) - 1);
        let line: String = line.chars().take(width).collect();
        let _ = write!(e, "\r\x1b[2K{line}");
        let _ = e.flush();
        (self.shown, self.drawn) = (s, true);
    }

    /// The agent said how far its dataset got: the bar moves now; at its
    /// end, how long it took is kept for [`Status::end`].
    fn progress(&mut self, p: Progress) {
        let d = self.dataset.get_or_insert(Preparing {
            now: p,
            since: Instant::now(),
            took: None,
        });
        d.now = p;
        if p.done >= p.total && d.took.is_none() {
            d.took = Some(d.since.elapsed().as_secs_f64());
        }
        self.draw(self.start.elapsed().as_secs());
    }

    /// Ends the phase: clears the line, and says `done` with the seconds
    /// it took where that was 2 s or more (and first, where the agent
    /// prepared a dataset, how large and how long that took).
    fn end(mut self, done: &str) {
        self.clear();
        if let Some(Preparing {
            now, took: Some(t), ..
        }) = &self.dataset
        {
            crate::invocation::say(&format!(
                "readpath: {}: dataset of {} prepared in {t:.1} s, kept there",
                self.place,
                crate::settings::format_size(now.total)
            ));
        }
        let secs = self.start.elapsed().as_secs_f64();
        if secs >= 2.0 {
            crate::invocation::say(&format!(
                "readpath: {}: {done} after {secs:.1} s",
                self.place
            ));
        }
    }

    fn clear(&mut self) {
        if self.drawn {
            use std::io::Write;
            let mut e = std::io::stderr();
            let _ = write!(e, "\r\x1b[2K");
            let _ = e.flush();
            self.drawn = false;
        }
    }
}

impl Drop for Status {
    /// An error or a signal ends a phase too: the line is not left behind.
    fn drop(&mut self) {
        self.clear();
    }
}

/// The error for a stop signal `sig` that came while waiting for `what`.
fn interrupted(place: &str, sig: i32, what: &str) -> EngineError {
    err(
        place,
        format!(
            "interrupted by {} while waiting for {what}",
            crate::sys::signal_name(sig)
        ),
        false,
    )
}

/// Why [`wait_first`] has no message.
enum Waited {
    /// The agent's output ended.
    Ended,
    /// The timeout passed.
    TimedOut,
    /// A stop signal came.
    Interrupted(i32),
}

impl RemoteWorkload {
    /// Reaches the target, makes sure it has readpath, starts the agent
    /// and the workload; returns once the agent sent its header. `say`
    /// hears what is being done (for stderr).
    pub fn start(
        remote: Remote,
        spec: StartSpec,
        say: &mut dyn FnMut(&str),
    ) -> Result<RemoteWorkload, EngineError> {
        let place = remote.label();
        // The paths as the target takes them (`~` resolved), checked before
        // anything runs there.
        let dir = remote
            .resolve_path(
                "--remote-dir",
                spec.dir.as_deref().unwrap_or(remote.default_dir()),
            )
            .map_err(|e| err(&place, e, true))?;
        let data_dir = match &spec.data_dir {
            Some(d) => Some(
                remote
                    .resolve_path("--remote-data-dir", d)
                    .map_err(|e| err(&place, e, true))?,
            ),
            None => remote.default_data_dir(&dir),
        };
        super::transport::Timeouts::from_env().map_err(|e| err(&place, e, true))?;
        say(&format!("{place}: checking the target"));
        let (bin, done) = super::transport::prepare(&remote, &dir, spec.refresh).map_err(|e| {
            let bad = e.is_bad_input();
            err(&place, e.problem, bad)
        })?;
        say(&done);
        // `--data-dir=PATH`: one word, whatever the path starts with.
        let mut line = format!("exec {} agent", super::transport::sh_quote(&bin));
        if let Some(d) = &data_dir {
            line.push_str(&format!(
                " {}",
                super::transport::sh_quote(&format!("--data-dir={d}"))
            ));
        }
        // A lab guest's kernel target reads from its lab disk (virtio,
        // ext4 with encryption and verity) itself, not from a loop image
        // on it: `kernel.dir` is that disk unless the user named another.
        let mut spec = spec;
        if matches!(remote, Remote::Vm(_))
            && spec
                .settings
                .as_ref()
                .is_none_or(|s| s.kernel.dir.is_empty())
            && !spec
                .set
                .iter()
                .any(|kv| kv.trim_start().starts_with(crate::key!(kernel.dir).name()))
        {
            spec.set.insert(
                0,
                format!("kernel.dir={}", crate::lab::vm::GUEST_KERNEL_DIR),
            );
        }
        let restart = Restart {
            line,
            interval: spec.interval,
            command: spec.command.clone(),
            t_offset: 0.0,
        };
        let start = Command::Start {
            preset: spec.preset,
            settings: spec.settings.map(Box::new),
            set: spec.set,
            interval_ms: spec.interval.as_millis() as u64,
            command: spec.command,
        };
        RemoteWorkload::connect(remote, restart, start)
    }

    /// Starts the agent (`restart.line`), checks its hello, sends `start`
    /// and waits for the header.
    fn connect(
        remote: Remote,
        restart: Restart,
        start: Command,
    ) -> Result<RemoteWorkload, EngineError> {
        let place = remote.label();
        let bin = restart.line.clone();
        let timeouts = super::transport::Timeouts::from_env().map_err(|e| err(&place, e, true))?;
        let mut c = remote
            .command(&restart.line)
            .map_err(|e| err(&place, e, true))?;
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| err(&place, format!("starting the agent: {e}"), false))?;
        if matches!(remote, Remote::Vm(_)) {
            // What lets `kernel restore` prove it readpath's guest.
            let _ = crate::lab::vm::record_guest(&crate::lab::data_dir(), child.id());
        }
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (first_tx, first_rx) = channel();
        let (rec_tx, rec_rx) = sync_channel(RECORDS_CAP);
        let (rep_tx, rep_rx) = channel();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let sh = shared.clone();
        // The interval as the start request says it (whole milliseconds).
        let interval_ms = restart.interval.as_millis() as u64;
        let t_offset = restart.t_offset;
        let to = Outlets {
            first: first_tx,
            records: rec_tx,
            replies: rep_tx,
        };
        let reader = std::thread::Builder::new()
            .name("remote-in".into())
            .spawn(move || read_agent(stdout, to, sh, interval_ms, t_offset))
            .map_err(|e| err(&place, format!("starting the reader: {e}"), false))?;
        let mut w = RemoteWorkload {
            remote,
            restart,
            child,
            stdin: Some(stdin),
            header: Header {
                format: String::new(),
                version: 0,
                command: String::new(),
                started_unix_s: 0,
                preset: None,
                settings: Settings::default(),
                effective_settings: Settings::default(),
                features: Features::default(),
                machine: MachineInfo::default(),
                demo: None,
            },
            settings: Settings::default(),
            paused: false,
            records: rec_rx,
            replies: rep_rx,
            shared,
            reader: Some(reader),
        };
        let waiting = match &w.remote {
            Remote::Vm(_) => "booting the guest, waiting for the agent",
            _ => "waiting for the agent",
        };
        let mut status = Status::new(&place, waiting);
        w.await_hello(&first_rx, &place, &bin, timeouts.hello, &mut status)?;
        status.end("agent ready");
        // The agent's clock starts after this: no record of its run can
        // end later than the time since.
        lock(&w.shared).start_sent = Some(Instant::now());
        w.send(start)?;
        let mut status = Status::new(&place, "starting the workload");
        let w = w.await_header(&first_rx, &place, &bin, &mut status)?;
        status.end("workload started");
        Ok(w)
    }

    /// Waits for the agent's hello (another protocol is refused by name).
    fn await_hello(
        &mut self,
        first_rx: &Receiver<Result<Message, LineError>>,
        place: &str,
        bin: &str,
        timeout: Duration,
        status: &mut Status,
    ) -> Result<(), EngineError> {
        match wait_first(first_rx, timeout, status) {
            Ok(Ok(Message::Hello(h))) => {
                super::protocol::check_hello(&h, place).map_err(|e| err(place, e, true))?;
            }
            Ok(Ok(other)) => {
                return Err(err(
                    place,
                    format!("agent line 1: expected its hello, got {}", other.kind()),
                    false,
                ));
            }
            Ok(Err(e)) => return Err(err(place, e, false)),
            Err(Waited::Ended) => return Err(self.gone(place, bin, "before its hello")),
            Err(Waited::TimedOut) => {
                return Err(err(
                    place,
                    format!(
                        "no hello from the agent in {:.1} s (`{}` started, said nothing): is readpath runnable there? ({}=SECONDS gives a slow link longer)",
                        timeout.as_secs_f64(),
                        crate::output::format::printable(bin, false),
                        super::transport::TIMEOUT_VAR
                    ),
                    false,
                ));
            }
            Err(Waited::Interrupted(sig)) => {
                return Err(interrupted(place, sig, "the agent's hello"));
            }
        }
        Ok(())
    }

    /// Waits for the recording header that says the workload started, and
    /// takes its settings: the workload, or why it did not start.
    fn await_header(
        mut self,
        first_rx: &Receiver<Result<Message, LineError>>,
        place: &str,
        bin: &str,
        status: &mut Status,
    ) -> Result<RemoteWorkload, EngineError> {
        // The wait ends START_TIMEOUT after the last word from the agent:
        // a large dataset on a slow target may take longer than that, as
        // long as it says how far it got.
        let msg = loop {
            match wait_first(first_rx, START_TIMEOUT, status) {
                Ok(Ok(Message::Progress(p))) => status.progress(p),
                m => break m,
            }
        };
        match msg {
            Ok(Ok(Message::Header(h))) => {
                self.settings = h.settings.clone();
                lock(&self.shared).running = Some(Running {
                    pods: crate::engine::pipeline::pods_label(&h.effective_settings),
                    effective: Box::new(h.effective_settings.clone()),
                });
                self.header = *h;
                Ok(self)
            }
            Ok(Ok(Message::Fatal(f))) => Err(err(place, f.message, f.bad_input)),
            Ok(Ok(other)) => Err(err(
                place,
                format!("expected the recording header, got {}", other.kind()),
                false,
            )),
            Ok(Err(e)) => Err(err(place, e, false)),
            Err(Waited::Ended) => Err(self.gone(place, bin, "before the workload started")),
            Err(Waited::TimedOut) => Err(err(
                place,
                format!(
                    "the workload did not start: nothing from the agent for {} s",
                    START_TIMEOUT.as_secs()
                ),
                false,
            )),
            Err(Waited::Interrupted(sig)) => Err(interrupted(
                place,
                sig,
                "the workload to start (the agent's header)",
            )),
        }
    }

    /// The agent ended `what` (before its hello, before the workload
    /// started): waits a moment for it, and says why, with its status and
    /// the command `bin` that started it.
    fn gone(&mut self, place: &str, bin: &str, what: &str) -> EngineError {
        let why = lock(&self.shared).lost.clone();
        // Its output ended: it is ending too, or is ended here.
        let t = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) && t.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(POLL);
        }
        let _ = self.child.kill();
        let status = self.child.wait().ok();
        let mut m = format!(
            "the agent ended {what} ({}): is readpath runnable there (`{}`)?",
            status.map_or("?".into(), |s| s.to_string()),
            crate::output::format::printable(bin, false)
        );
        if let Some(why) = why.filter(|w| !matches!(w, Lost::Ended)) {
            m = format!("{why}; {m}");
        }
        err(place, m, false)
    }

    /// Sends a request; one reply to it is allowed from then on (the
    /// agent answers each request at most once; the start and the stop
    /// get none).
    fn send(&mut self, cmd: Command) -> Result<(), EngineError> {
        let answered = !matches!(cmd, Command::Start { .. } | Command::Stop);
        let line = super::protocol::request_line(cmd);
        let place = self.remote.label();
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(err(&place, "the connection is closed", false));
        };
        if answered {
            lock(&self.shared).asked += 1;
        }
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush())
            .map_err(|e| err(&place, format!("sending to the agent: {e}"), false))
    }

    /// Waits for the reply to `cmd`. Meanwhile the workload takes no
    /// records: the reader holds those before the reply (up to
    /// [`HELD_BYTES`]) so that it reaches the reply.
    fn reply(&mut self, cmd: &str) -> Result<Reply, EngineError> {
        lock(&self.shared).waiting = true;
        let r = self.await_reply(cmd);
        lock(&self.shared).waiting = false;
        r
    }

    fn await_reply(&mut self, cmd: &str) -> Result<Reply, EngineError> {
        let place = self.remote.label();
        let start = Instant::now();
        loop {
            match self.replies.recv_timeout(Duration::from_millis(100)) {
                Ok(r) if r.cmd == cmd || r.cmd == "?" => return Ok(r),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    if let Some(why) = lock(&self.shared).lost.clone() {
                        return Err(err(&place, why, false));
                    }
                    if start.elapsed() > REPLY_TIMEOUT {
                        return Err(err(
                            &place,
                            format!("no answer to {cmd} in {} s", REPLY_TIMEOUT.as_secs()),
                            false,
                        ));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let why = lock(&self.shared).lost.clone();
                    return Err(err(
                        &place,
                        why.map_or_else(|| "the connection is closed".into(), |w| w.to_string()),
                        false,
                    ));
                }
            }
        }
    }

    /// Starts the agent again after a lost connection, with the settings
    /// last running; the new records' times go on from the old ones.
    pub fn reconnect(&mut self) -> Result<(), EngineError> {
        let last_t = lock(&self.shared).last_t;
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut restart = self.restart.clone();
        restart.t_offset = last_t.max(self.restart.t_offset) + restart.interval.as_secs_f64();
        let start = Command::Start {
            preset: None,
            settings: Some(Box::new(self.settings.clone())),
            set: Vec::new(),
            interval_ms: restart.interval.as_millis() as u64,
            command: restart.command.clone(),
        };
        let fresh = RemoteWorkload::connect(self.remote.clone(), restart, start)?;
        lock(&fresh.shared).last_t = last_t;
        let old = std::mem::replace(self, fresh);
        drop(old);
        Ok(())
    }

    /// Where it runs, for messages: `ssh:pixel (pixel)`; a lab guest by
    /// its kernel's release and accelerator (`vm:debian-6.1 (6.1.0-57,
    /// tcg: times emulated)`), with by how much where `lab bench`
    /// measured it: under TCG every time there is emulated.
    pub fn place_name(&self) -> String {
        self.where_().line()
    }

    /// The target: its name and what it is (a guest's kernel and
    /// emulation, a host's name).
    fn where_(&self) -> Place {
        let name = self.remote.label();
        let detail = if let Remote::Vm(v) = &self.remote {
            let release = &self.header.machine.kernel;
            let short: String = release.split('-').take(2).collect::<Vec<_>>().join("-");
            if v.accel_name() != "tcg" {
                format!("({short}, {})", v.accel_name())
            } else {
                let by = crate::lab::Slowdown::load(&crate::lab::data_dir(), &v.kernel, "tcg")
                    .map_or_else(
                        || format!("unmeasured: readpath lab bench {name}"),
                        |s| s.short(),
                    );
                format!("({short}, tcg: times emulated, {by})")
            }
        } else {
            let host = &self.header.machine.hostname;
            if host.is_empty() {
                return Place::named(name);
            }
            format!("({host})")
        };
        Place {
            name,
            detail: Some(detail),
            health: Vec::new(),
        }
    }

    /// Stops the workload there: its summary (or why there is none: the
    /// connection was lost first), the records not taken yet, and how they
    /// were delivered.
    pub fn finish(mut self) -> Finished {
        lock(&self.shared).stopping = true;
        let _ = self.send(Command::Stop);
        // Closing stdin also stops an agent that missed the stop. Not for
        // a lab guest: there it hangs up the virtio port, and the agent's
        // summary would block; the guest powers off once the agent ends,
        // and QEMU is killed below if it does not.
        if !matches!(self.remote, Remote::Vm(_)) {
            self.stdin = None;
        }
        let gave_up = self.await_end();
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take()
            && r.is_finished()
        {
            let _ = r.join();
        }
        // The channel's records first, then those held after them.
        let mut rest: Vec<IntervalRecord> = self.records.try_iter().collect();
        let mut s = lock(&self.shared);
        rest.extend(std::mem::take(&mut s.held).into_iter().map(|(r, _)| r));
        s.held_bytes = 0;
        let summary = match (&s.summary, &s.lost, gave_up) {
            (Some(sum), _, _) => Ok(sum.clone()),
            (None, Some(why), _) if !matches!(why, Lost::Ended) => Err(why.clone()),
            (None, _, Some(why)) => Err(why),
            (None, _, None) => Err(Lost::NoSummary),
        };
        Finished {
            summary,
            rest,
            max_lag_s: s.max_lag_s,
            missing: s.missing,
            refused_lines: s.refused,
            refused_first: s.refused_first.clone(),
            unkept: s.unkept,
        }
    }

    /// After the stop: waits for the agent's summary and the end of its
    /// lines while it keeps talking (each line within
    /// [`super::pace::stop_silence`]), at most [`STOP_LIMIT`], and at most
    /// [`SIGNAL_GRACE`] after a stop signal; a lab guest, once it sent
    /// its summary, gets [`POWEROFF_WAIT`] to power off. None when the
    /// lines ended, else why the wait was given up.
    fn await_end(&mut self) -> Option<Lost> {
        let reader = self.reader.as_ref()?;
        let stopped = Instant::now();
        let silence = super::pace::stop_silence(self.restart.interval);
        let vm = matches!(self.remote, Remote::Vm(_));
        let mut signalled: Option<(Instant, i32)> = None;
        let mut summed: Option<Instant> = None;
        loop {
            if reader.is_finished() {
                return None;
            }
            let (summary, last_line) = {
                let s = lock(&self.shared);
                (s.summary.is_some(), s.last_line)
            };
            let now = Instant::now();
            if summary {
                let at = *summed.get_or_insert(now);
                let wait = if vm {
                    POWEROFF_WAIT
                } else {
                    Duration::from_secs(1)
                };
                if now.duration_since(at) >= wait {
                    return Some(Lost::NoEnd);
                }
            } else {
                // Silence counts from the stop or the last line, whichever is later.
                let quiet_since = last_line.map_or(stopped, |l| l.max(stopped));
                if now.duration_since(quiet_since) >= silence {
                    let lines = lock(&self.shared).lines;
                    return Some(Lost::Silent { silence, lines });
                }
                if now.duration_since(stopped) >= STOP_LIMIT {
                    return Some(Lost::StopLimit);
                }
            }
            let sig = crate::sys::stop_signal();
            if sig != 0 {
                let (at, sig) = *signalled.get_or_insert((now, sig));
                if now.duration_since(at) >= SIGNAL_GRACE {
                    return Some(Lost::Interrupted { sig });
                }
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Message {
    fn kind(&self) -> &'static str {
        match self {
            Message::Hello(_) => "a hello",
            Message::Progress(_) => "a progress line",
            Message::Header(_) => "a header",
            Message::Interval(_) => "an interval",
            Message::Reply(_) => "a reply",
            Message::Running(_) => "a running line",
            Message::Summary(_) => "a summary",
            Message::Fatal(_) => "an error",
        }
    }
}

impl Drop for RemoteWorkload {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Workload for RemoteWorkload {
    fn settings(&self) -> &Settings {
        &self.settings
    }
    fn effective(&self) -> Settings {
        lock(&self.shared).running.as_ref().map_or_else(
            || self.header.effective_settings.clone(),
            |r| (*r.effective).clone(),
        )
    }
    fn features(&self) -> &Features {
        &self.header.features
    }
    fn machine(&self) -> MachineInfo {
        self.header.machine.clone()
    }
    fn records(&self) -> &Receiver<IntervalRecord> {
        &self.records
    }
    fn apply(&mut self, mut new: Settings) -> Result<Vec<SettingChange>, EngineError> {
        // A lab guest's kernel target reads its lab disk: settings made
        // here (a preset, a demo step, a compare variant) say nothing of
        // it, and would otherwise move it back to a loop image.
        if matches!(self.remote, Remote::Vm(_)) && new.kernel.dir.is_empty() {
            new.kernel.dir = crate::lab::vm::GUEST_KERNEL_DIR.into();
        }
        self.send(Command::Apply {
            settings: Box::new(new),
        })?;
        let r = self.reply("apply")?;
        if !r.ok {
            return Err(err(
                &self.remote.label(),
                r.error.unwrap_or_default(),
                r.bad_input,
            ));
        }
        if let Some(s) = r.settings {
            self.settings = *s;
        }
        // The settings as running were taken by the reader, in line order.
        Ok(r.changes)
    }
    fn mark_event(&self, label: &str) {
        // &self: the stdin is written through a clone of its descriptor.
        if let Some(stdin) = self.stdin.as_ref() {
            let line = super::protocol::request_line(Command::Mark {
                label: label.into(),
            });
            lock(&self.shared).asked += 1;
            let mut w: &ChildStdin = stdin;
            let _ = w
                .write_all(line.as_bytes())
                .and_then(|()| w.write_all(b"\n"))
                .and_then(|()| w.flush());
        }
    }
    fn pause(&mut self) {
        if self.send(Command::Pause).is_ok() {
            self.paused = true;
        }
    }
    fn resume(&mut self) -> Result<(), EngineError> {
        self.send(Command::Resume)?;
        self.paused = false;
        Ok(())
    }
    fn is_paused(&self) -> bool {
        self.paused
    }
    fn drop_cache(&mut self) -> Option<usize> {
        self.send(Command::DropCache).ok()?;
        self.reply("drop_cache").ok()?.dropped
    }
    fn trace(&mut self, on: bool) -> Result<(), String> {
        self.send(Command::Trace { on })
            .map_err(|e| e.to_string())?;
        let r = self.reply("trace").map_err(|e| e.to_string())?;
        match r.error {
            Some(why) if !r.ok => Err(why),
            _ => Ok(()),
        }
    }
    fn pods(&self) -> Option<String> {
        lock(&self.shared)
            .running
            .as_ref()
            .and_then(|r| r.pods.clone())
    }
    fn place(&self) -> Option<Place> {
        let (lag, quiet) = {
            let s = lock(&self.shared);
            let quiet = s
                .last_line
                .filter(|_| s.lost.is_none())
                .map(|t| t.elapsed());
            (s.lag_s, quiet)
        };
        let mut p = self.where_();
        if lag >= 1.0 {
            p.health.push(format!("lag {lag:.1} s"));
        }
        // An agent sends a record each interval: one quiet for longer than
        // the stop's margin is said (the link or the target stalled).
        if let Some(q) = quiet.filter(|q| *q >= super::pace::stop_silence(self.restart.interval)) {
            p.health.push(format!("silent {:.0} s", q.as_secs_f64()));
        }
        Some(p)
    }
    fn lost(&self) -> Option<String> {
        lock(&self.shared).lost.as_ref().map(Lost::to_string)
    }
    fn reconnect(&mut self) -> Option<Result<(), EngineError>> {
        Some(RemoteWorkload::reconnect(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64) -> IntervalRecord {
        IntervalRecord {
            seq,
            ..Default::default()
        }
    }

    #[test]
    fn records_behind_a_reply_are_held_and_go_first_after_it() {
        let (tx, rx) = sync_channel(2);
        let sh = Arc::new(Mutex::new(Shared {
            waiting: true,
            ..Default::default()
        }));
        // The workload waits for a reply: the channel fills, the rest is
        // held, and the reader goes on to the reply.
        for s in 0..5 {
            deliver(rec(s), 100, &tx, &sh).unwrap();
        }
        {
            let s = lock(&sh);
            assert_eq!(s.held.len(), 3);
            assert_eq!(s.held_bytes, 300);
        }
        // The reply came: what was held goes out first, as the workload
        // takes records again, then the next record.
        lock(&sh).waiting = false;
        let sh2 = sh.clone();
        let reader = std::thread::spawn(move || {
            flush_held(&tx, &sh2).unwrap();
            deliver(rec(5), 100, &tx, &sh2).unwrap();
        });
        let got: Vec<u64> = (0..6)
            .map(|_| rx.recv_timeout(REPLY_TIMEOUT).unwrap().seq)
            .collect();
        reader.join().unwrap();
        assert_eq!(got, [0, 1, 2, 3, 4, 5]);
        assert_eq!(lock(&sh).held_bytes, 0);
    }

    #[test]
    fn after_the_stop_records_beyond_the_budget_are_counted_not_kept() {
        let (tx, rx) = sync_channel(1);
        let sh = Arc::new(Mutex::new(Shared {
            stopping: true,
            ..Default::default()
        }));
        let half = HELD_BYTES / 2;
        for s in 0..5 {
            deliver(rec(s), half, &tx, &sh).unwrap();
        }
        let s = lock(&sh);
        // One in the channel, two held (the budget), two not kept.
        assert_eq!(rx.try_iter().map(|r| r.seq).collect::<Vec<_>>(), [0]);
        assert_eq!(
            s.held.iter().map(|(r, _)| r.seq).collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(s.unkept, 2);
        let f = Finished {
            summary: Err(Lost::NoSummary),
            rest: Vec::new(),
            max_lag_s: 0.0,
            missing: 0,
            refused_lines: 0,
            refused_first: None,
            unkept: s.unkept,
        };
        assert_eq!(
            f.refused_note().unwrap(),
            "2 records after the stop not kept (more than 64 MiB of them waited)"
        );
    }

    #[test]
    fn a_gone_workload_ends_the_reader() {
        let (tx, rx) = sync_channel(1);
        drop(rx);
        let sh = Mutex::new(Shared::default());
        assert!(deliver(rec(0), 1, &tx, &sh).is_err());
    }

    #[test]
    fn skip_line_reads_through_a_small_buffer_to_the_newline() {
        let mut data = vec![b'x'; 100_000];
        data.extend_from_slice(b"\nnext\n");
        let mut r = std::io::BufReader::with_capacity(4096, &data[..]);
        assert_eq!(skip_line(&mut r).unwrap(), 100_000);
        let mut rest = String::new();
        std::io::BufRead::read_line(&mut r, &mut rest).unwrap();
        assert_eq!(rest, "next\n");
        // Without a newline: to the end.
        let mut r = std::io::BufReader::with_capacity(4096, &b"abc"[..]);
        assert_eq!(skip_line(&mut r).unwrap(), 3);
        assert_eq!(skip_line(&mut r).unwrap(), 0);
    }

    /// What runs is what the agent's lines said last, in their order: the
    /// header's, then a running line's (a refusal at run time), and a
    /// record after it finds the client knowing.
    #[test]
    fn a_running_line_changes_what_the_client_says_runs() {
        use crate::output::recording::{FORMAT, Header, VERSION};
        let mut asked = Settings::default();
        asked.workers.highpri = true;
        let mut ran = asked.clone();
        ran.workers.highpri = false;
        let header = Header {
            format: FORMAT.into(),
            version: VERSION,
            command: "test".into(),
            started_unix_s: 0,
            preset: None,
            settings: asked.clone(),
            effective_settings: asked.clone(),
            features: Features::default(),
            machine: MachineInfo::default(),
            demo: None,
        };
        let lines = [
            Message::Hello(super::super::protocol::Hello {
                protocol: super::super::protocol::PROTOCOL,
                readpath: "test".into(),
                arch: "x86_64".into(),
            }),
            Message::Header(Box::new(header)),
            Message::Running(Box::new(Running {
                effective: Box::new(ran.clone()),
                pods: Some("2 pods".into()),
            })),
            Message::Interval(Box::new(IntervalRecord {
                seq: 0,
                interval_s: 0.05,
                t_s: 0.05,
                ..Default::default()
            })),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.out");
        let text: String = lines.iter().map(|m| m.to_line() + "\n").collect();
        std::fs::write(&path, text).unwrap();
        let mut cat = std::process::Command::new("cat")
            .arg(&path)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (first, first_rx) = std::sync::mpsc::channel();
        let (records, records_rx) = sync_channel(8);
        let (replies, _replies_rx) = std::sync::mpsc::channel();
        let sh = Arc::new(Mutex::new(Shared::default()));
        let out = cat.stdout.take().unwrap();
        let to = Outlets {
            first,
            records,
            replies,
        };
        let sh2 = sh.clone();
        let reader = std::thread::spawn(move || read_agent(out, to, sh2, 50, 0.0));
        for _ in 0..2 {
            first_rx
                .recv_timeout(Duration::from_secs(10))
                .unwrap()
                .unwrap();
        }
        // The record comes after the running line: by then the client knows.
        records_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let running = lock(&sh).running.clone().expect("a running line");
        assert_eq!(*running.effective, ran);
        assert_eq!(running.pods.as_deref(), Some("2 pods"));
        reader.join().unwrap();
        let _ = cat.wait();
    }

    #[test]
    fn the_refused_lines_are_said_once_counted() {
        let mut f = Finished {
            summary: Err(Lost::NoSummary),
            rest: Vec::new(),
            max_lag_s: 0.0,
            missing: 0,
            refused_lines: 0,
            refused_first: None,
            unkept: 0,
        };
        assert_eq!(f.refused_note(), None);
        f.refused_lines = 1;
        f.refused_first = Some("agent line 3: 9 bytes".into());
        assert_eq!(
            f.refused_note().unwrap(),
            "1 line of the agent refused and skipped (agent line 3: 9 bytes)"
        );
        f.refused_lines = 2;
        assert!(f.refused_note().unwrap().starts_with("2 lines"));
    }
}
