//! The near end of `--remote`: starts `readpath agent` on the target
//! through [`super::transport`], checks its hello, and turns its lines back
//! into interval records on a channel, so the explorer and `run` drive it
//! as they drive the local engine ([`Workload`]). A lost connection keeps
//! what arrived and says so; a line that is not the protocol is refused by
//! its number; records that arrive late are shown as a lag, never dropped.
//! Every wait of the start (the agent's hello, its header) ends on a stop
//! signal, and the hello has a timeout ([`super::transport::Timeouts`]). A
//! line longer than [`super::protocol::MAX_LINE`] after the start is
//! skipped to its newline (read through a bounded buffer, never held
//! whole), counted and said (a notice in the next record, and
//! [`Finished::refused_note`]), and the session goes on.

use std::io::Write;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::protocol::{Command, Message, Reply};
use super::transport::Remote;
use crate::engine::EngineError;
use crate::engine::workload::Workload;
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

/// Why the lines stopped when they simply ended.
const ENDED: &str = "the agent's output ended";

/// What the reader thread saw last, shared with the workload.
#[derive(Default)]
struct Shared {
    /// Why the lines stopped (None while they come, or after a summary).
    lost: Option<String>,
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
    effective: Settings,
    paused: bool,
    pods: Option<String>,
    records: Receiver<IntervalRecord>,
    replies: Receiver<Reply>,
    shared: Arc<Mutex<Shared>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// A remote workload's end.
pub struct Finished {
    /// The target's summary, or why there is none.
    pub summary: Result<RunSummary, String>,
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
}

impl Finished {
    /// What to say of the lines refused for their length, if any.
    pub fn refused_note(&self) -> Option<String> {
        let first = self.refused_first.as_deref()?;
        Some(match self.refused_lines {
            1 => format!("1 line of the agent refused and skipped ({first})"),
            n => format!("{n} lines of the agent refused and skipped (the first: {first})"),
        })
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

fn err(place: &str, message: String, bad_input: bool) -> EngineError {
    // The transport's messages already start with the place.
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

/// Reads the agent's lines until they end: records to `records`, replies
/// to `replies`, the summary and why it ended into `shared`.
fn read_agent(
    out: std::process::ChildStdout,
    first: Sender<Result<Message, String>>,
    records: Sender<IntervalRecord>,
    replies: Sender<Reply>,
    shared: Arc<Mutex<Shared>>,
    interval_s: f64,
    t_offset: f64,
) {
    let mut r = std::io::BufReader::with_capacity(256 * 1024, out);
    let mut buf = Vec::new();
    let mut n = 0usize;
    let mut started: Option<Instant> = None;
    let mut first = Some(first);
    // Notices of refused lines, for the next record.
    let mut pending: Vec<String> = Vec::new();
    let end = |why: Option<String>| {
        let mut s = lock(&shared);
        if s.summary.is_none() && s.lost.is_none() {
            s.lost = Some(why.unwrap_or_else(|| ENDED.into()));
        }
    };
    loop {
        n += 1;
        match crate::output::recording::read_line_capped(&mut r, &mut buf) {
            Ok(true) => {}
            Ok(false) => return end(None),
            Err(Ok(e)) => return end(Some(format!("reading from the agent: {e}"))),
            Err(Err(())) if first.is_some() => {
                return end(Some(format!(
                    "agent line {n}: longer than {} bytes",
                    super::protocol::MAX_LINE
                )));
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
        let msg = Message::parse(text, n);
        // The hello and the header go to whoever waits for the start.
        if let Some(tx) = &first {
            let done = matches!(msg, Ok(Message::Header(_)) | Ok(Message::Fatal(_)) | Err(_));
            if matches!(msg, Ok(Message::Header(_))) {
                started = Some(Instant::now());
            }
            let _ = tx.send(msg.clone());
            if done {
                first = None;
                if msg.is_err() {
                    return end(msg.err());
                }
            }
            continue;
        }
        match msg {
            Ok(Message::Interval(mut rec)) => {
                let clock = Clock {
                    started,
                    interval_s,
                    t_offset,
                };
                take_record(&mut rec, &mut pending, &shared, &clock);
                if records.send(*rec).is_err() {
                    return;
                }
            }
            Ok(Message::Reply(rep)) => {
                let _ = replies.send(*rep);
            }
            Ok(Message::Summary(s)) => {
                lock(&shared).summary = Some(*s);
            }
            Ok(Message::Fatal(f)) => return end(Some(f.message)),
            Ok(Message::Hello(_) | Message::Header(_)) => {
                return end(Some(format!("agent line {n}: a second hello or header")));
            }
            Err(e) => return end(Some(e)),
        }
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
) -> Result<(), String> {
    let skipped = match skip_line(r) {
        Ok(k) => k,
        Err(e) => return Err(format!("reading from the agent: {e}")),
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
    rx: &Receiver<Result<Message, String>>,
    timeout: Duration,
) -> Result<Result<Message, String>, Waited> {
    let start = Instant::now();
    loop {
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
            err(&place, e.message, bad)
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
                .any(|kv| kv.trim_start().starts_with("kernel.dir"))
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
        let (rec_tx, rec_rx) = channel();
        let (rep_tx, rep_rx) = channel();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let sh = shared.clone();
        let interval_s = restart.interval.as_secs_f64();
        let t_offset = restart.t_offset;
        let reader = std::thread::Builder::new()
            .name("remote-in".into())
            .spawn(move || read_agent(stdout, first_tx, rec_tx, rep_tx, sh, interval_s, t_offset))
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
            effective: Settings::default(),
            paused: false,
            pods: None,
            records: rec_rx,
            replies: rep_rx,
            shared,
            reader: Some(reader),
        };
        w.await_hello(&first_rx, &place, &bin, timeouts.hello)?;
        w.send(start)?;
        w.await_header(&first_rx, &place, &bin)
    }

    /// Waits for the agent's hello (another protocol is refused by name).
    fn await_hello(
        &mut self,
        first_rx: &Receiver<Result<Message, String>>,
        place: &str,
        bin: &str,
        timeout: Duration,
    ) -> Result<(), EngineError> {
        match wait_first(first_rx, timeout) {
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
        first_rx: &Receiver<Result<Message, String>>,
        place: &str,
        bin: &str,
    ) -> Result<RemoteWorkload, EngineError> {
        match wait_first(first_rx, START_TIMEOUT) {
            Ok(Ok(Message::Header(h))) => {
                self.settings = h.settings.clone();
                self.effective = h.effective_settings.clone();
                self.pods = crate::engine::pipeline::pods_label(&self.effective);
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
                    "the workload did not start in {} s (preparing its dataset?)",
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
        if let Some(why) = why.filter(|w| w != ENDED) {
            m = format!("{why}; {m}");
        }
        err(place, m, false)
    }

    fn send(&mut self, cmd: Command) -> Result<(), EngineError> {
        let line = super::protocol::request_line(cmd);
        let place = self.remote.label();
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(err(&place, "the connection is closed".into(), false));
        };
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush())
            .map_err(|e| err(&place, format!("sending to the agent: {e}"), false))
    }

    fn reply(&mut self, cmd: &str) -> Result<Reply, EngineError> {
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
                        why.unwrap_or_else(|| "the connection is closed".into()),
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
        let label = self.remote.label();
        if let Remote::Vm(v) = &self.remote {
            let release = &self.header.machine.kernel;
            let short: String = release.split('-').take(2).collect::<Vec<_>>().join("-");
            if v.accel_name() != "tcg" {
                return format!("{label} ({short}, {})", v.accel_name());
            }
            let by = crate::lab::Slowdown::load(&crate::lab::data_dir(), &v.kernel, "tcg")
                .map_or_else(
                    || format!("unmeasured: readpath lab bench {label}"),
                    |s| s.short(),
                );
            return format!("{label} ({short}, tcg: times emulated, {by})");
        }
        let host = &self.header.machine.hostname;
        if host.is_empty() {
            label
        } else {
            format!("{label} ({host})")
        }
    }

    /// Stops the workload there: its summary (or why there is none: the
    /// connection was lost first), the records not taken yet, and how they
    /// were delivered.
    pub fn finish(mut self) -> Finished {
        let _ = self.send(Command::Stop);
        // Closing stdin also stops an agent that missed the stop. Not for
        // a lab guest: there it hangs up the virtio port, and the agent's
        // summary would block; the guest powers off once the agent ends,
        // and QEMU is killed below if it does not.
        if !matches!(self.remote, Remote::Vm(_)) {
            self.stdin = None;
        }
        if let Some(r) = self.reader.take() {
            let start = Instant::now();
            while !r.is_finished() && start.elapsed() < REPLY_TIMEOUT {
                std::thread::sleep(Duration::from_millis(20));
            }
            if r.is_finished() {
                let _ = r.join();
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let rest: Vec<IntervalRecord> = self.records.try_iter().collect();
        let s = lock(&self.shared);
        let summary = match (&s.summary, &s.lost) {
            (Some(sum), _) => Ok(sum.clone()),
            (None, Some(why)) => Err(why.clone()),
            (None, None) => Err("the agent ended without its summary".into()),
        };
        Finished {
            summary,
            rest,
            max_lag_s: s.max_lag_s,
            missing: s.missing,
            refused_lines: s.refused,
            refused_first: s.refused_first.clone(),
        }
    }
}

impl Message {
    fn kind(&self) -> &'static str {
        match self {
            Message::Hello(_) => "a hello",
            Message::Header(_) => "a header",
            Message::Interval(_) => "an interval",
            Message::Reply(_) => "a reply",
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
    fn effective(&self) -> &Settings {
        &self.effective
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
        if let Some(e) = r.effective {
            self.effective = *e;
        }
        self.pods = r.pods;
        Ok(r.changes)
    }
    fn mark_event(&self, label: &str) {
        // &self: the stdin is written through a clone of its descriptor.
        if let Some(stdin) = self.stdin.as_ref() {
            let line = super::protocol::request_line(Command::Mark {
                label: label.into(),
            });
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
    fn pods(&self) -> Option<String> {
        self.pods.clone()
    }
    fn place(&self) -> Option<String> {
        let lag = lock(&self.shared).lag_s;
        let mut s = self.place_name();
        if lag >= 1.0 {
            s.push_str(&format!(" · lag {lag:.1} s"));
        }
        Some(s)
    }
    fn lost(&self) -> Option<String> {
        lock(&self.shared).lost.clone()
    }
    fn reconnect(&mut self) -> Option<Result<(), EngineError>> {
        Some(RemoteWorkload::reconnect(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_refused_lines_are_said_once_counted() {
        let mut f = Finished {
            summary: Err("x".into()),
            rest: Vec::new(),
            max_lag_s: 0.0,
            missing: 0,
            refused_lines: 0,
            refused_first: None,
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
