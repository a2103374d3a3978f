//! The near end of `--remote`: starts `readpath agent` on the target
//! through [`super::transport`], checks its hello, and turns its lines back
//! into interval records on a channel, so the explorer and `run` drive it
//! as they drive the local engine ([`Workload`]). A lost connection keeps
//! what arrived and says so; a line that is not the protocol is refused by
//! its number; records that arrive late are shown as a lag, never dropped.

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
/// dataset first).
const START_TIMEOUT: Duration = Duration::from_secs(900);

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
            Err(Err(())) => {
                return end(Some(format!(
                    "agent line {n}: longer than {} bytes",
                    super::protocol::MAX_LINE
                )));
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
                // A reconnected agent starts its clock again: its times go
                // on from where the charts are.
                if t_offset > 0.0 {
                    rec.t_s += t_offset;
                    for e in &mut rec.events {
                        e.t_s += t_offset;
                    }
                }
                {
                    let mut sh = lock(&shared);
                    sh.last_t = sh.last_t.max(rec.t_s);
                    if let Some(want) = sh.next_seq
                        && rec.seq > want
                    {
                        sh.missing += rec.seq - want;
                    }
                    sh.next_seq = Some(rec.seq + 1);
                    if let Some(t0) = started {
                        // Due at its end time (plus an interval of slack).
                        let late = t0.elapsed().as_secs_f64() - (rec.t_s - t_offset) - interval_s;
                        sh.lag_s = late.max(0.0);
                        sh.max_lag_s = sh.max_lag_s.max(sh.lag_s);
                    }
                }
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
        let dir = spec
            .dir
            .clone()
            .unwrap_or_else(|| remote.default_dir().to_string());
        say(&format!("{place}: checking the target"));
        let (bin, done) = super::transport::prepare(&remote, &dir, spec.refresh)
            .map_err(|e| err(&place, e, false))?;
        say(&done);
        let data_dir = spec
            .data_dir
            .clone()
            .or_else(|| remote.default_data_dir(&dir));
        let mut line = format!("exec {} agent", super::transport::sh_quote(&bin));
        if let Some(d) = &data_dir {
            line.push_str(&format!(" --data-dir {}", super::transport::sh_quote(d)));
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
        let mut c = remote
            .command(&restart.line)
            .map_err(|e| err(&place, e, true))?;
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| err(&place, format!("starting the agent: {e}"), false))?;
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
        // The hello: another protocol is refused by name.
        let gone = |w: &mut RemoteWorkload, what: &str| {
            let why = lock(&w.shared).lost.clone();
            let status = w.child.wait().ok();
            let mut m = format!(
                "the agent ended {what} ({}): is readpath runnable there (`{bin}`)?",
                status.map_or("?".into(), |s| s.to_string())
            );
            if let Some(why) = why.filter(|w| w != ENDED) {
                m = format!("{why}; {m}");
            }
            err(&place, m, false)
        };
        match first_rx.recv_timeout(REPLY_TIMEOUT) {
            Ok(Ok(Message::Hello(h))) => {
                super::protocol::check_hello(&h, &place).map_err(|e| err(&place, e, true))?;
            }
            Ok(Ok(other)) => {
                return Err(err(
                    &place,
                    format!("agent line 1: expected its hello, got {}", other.kind()),
                    false,
                ));
            }
            Ok(Err(e)) => return Err(err(&place, e, false)),
            Err(_) => return Err(gone(&mut w, "before its hello")),
        }
        w.send(start)?;
        match first_rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(Message::Header(h))) => {
                w.settings = h.settings.clone();
                w.effective = h.effective_settings.clone();
                w.pods = crate::engine::pipeline::pods_label(&w.effective);
                w.header = *h;
                Ok(w)
            }
            Ok(Ok(Message::Fatal(f))) => Err(err(&place, f.message, f.bad_input)),
            Ok(Ok(other)) => Err(err(
                &place,
                format!("expected the recording header, got {}", other.kind()),
                false,
            )),
            Ok(Err(e)) => Err(err(&place, e, false)),
            Err(_) => Err(gone(&mut w, "before the workload started")),
        }
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

    /// Where it runs, for messages: `ssh:pixel (pixel)`.
    pub fn place_name(&self) -> String {
        let label = self.remote.label();
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
        // Closing stdin also stops an agent that missed the stop.
        self.stdin = None;
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
    fn apply(&mut self, new: Settings) -> Result<Vec<SettingChange>, EngineError> {
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
