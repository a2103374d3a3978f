//! `readpath agent`: the far end of `--remote`. Started on the target by
//! the user's ssh or adb, it reads [`Request`]s on stdin and writes the
//! recording format on stdout, so a laptop can explore a phone or a test
//! server. It never outlives its connection: when stdin closes (the link
//! dropped, the client killed) it stops the workload and exits, so nothing
//! is left running on the device. Records wait in a queue of their own on
//! the way out, so a slow link delays them but never drops one.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use super::protocol::{
    Command, Fatal, Hello, Message, PROTOCOL, Progress, Reply, Request, Running,
};
use crate::engine::{Engine, EngineOptions, Faults};
use crate::settings::Settings;

/// Shortest and longest interval an agent accepts.
const INTERVAL_MS: std::ops::RangeInclusive<u64> = 10..=60_000;

/// What the stdin thread hands over: a request, a line refused, or the end.
enum In {
    Request(Box<Request>),
    Refused(super::protocol::RequestError),
    Closed,
}

/// Reads requests until stdin closes.
fn read_stdin(tx: Sender<In>) {
    let stdin = std::io::stdin();
    let mut r = std::io::BufReader::new(stdin.lock());
    let mut buf = Vec::new();
    loop {
        match crate::output::recording::read_line_capped(&mut r, &mut buf) {
            Ok(false) | Err(Ok(_)) => break,
            Err(Err(())) => {
                let _ = tx.send(In::Refused(super::protocol::RequestError::TooLong));
                break;
            }
            Ok(true) => {}
        }
        let line = String::from_utf8_lossy(&buf);
        if line.trim().is_empty() {
            continue;
        }
        let msg = match super::protocol::parse_request(line.trim()) {
            Ok(r) => In::Request(Box::new(r)),
            Err(e) => In::Refused(e),
        };
        if tx.send(msg).is_err() {
            return;
        }
    }
    let _ = tx.send(In::Closed);
}

/// Writes lines to stdout on a thread of its own (a slow link blocks it,
/// never the workload); the queue between holds every line until written.
/// Returns the sender and the writer thread.
fn writer() -> (Sender<String>, std::thread::JoinHandle<()>) {
    let (tx, rx) = channel::<String>();
    let h = std::thread::Builder::new()
        .name("agent-out".into())
        .spawn(move || {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let put = |out: &mut std::io::BufWriter<_>, l: &str| -> std::io::Result<()> {
                out.write_all(l.as_bytes())?;
                out.write_all(b"\n")
            };
            // Every line queued goes out, then one flush: in batches on a
            // slow link, at once on a fast one.
            while let Ok(line) = rx.recv() {
                let mut ok = put(&mut out, &line);
                while ok.is_ok()
                    && let Ok(next) = rx.try_recv()
                {
                    ok = put(&mut out, &next);
                }
                if ok.and_then(|()| out.flush()).is_err() {
                    return;
                }
            }
        })
        .expect("spawning the agent's writer");
    (tx, h)
}

fn send(out: &Sender<String>, m: Message) {
    let _ = out.send(m.to_line());
}

/// The dataset's preparation as progress lines to the client: one at the
/// start, one every [`PROGRESS_EVERY`] at most, and one at the end (a
/// dataset already there sends none).
fn progress_lines(out: &Sender<String>) -> impl FnMut(u64, u64) + '_ {
    let mut last: Option<std::time::Instant> = None;
    move |done, total| {
        if last.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) || done >= total {
            send(out, Message::Progress(Progress { done, total }));
            last = Some(std::time::Instant::now());
        }
    }
}

/// How often at most the agent says how far its dataset got.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// Runs the agent until stdin closes or a stop; the exit status.
pub fn run(data_dir: &Path) -> i32 {
    crate::sys::install_stop_handlers();
    let (out, writer) = writer();
    send(
        &out,
        Message::Hello(Hello {
            protocol: PROTOCOL,
            readpath: env!("CARGO_PKG_VERSION").into(),
            arch: std::env::consts::ARCH.into(),
        }),
    );
    let (tx, rx) = channel();
    std::thread::Builder::new()
        .name("agent-in".into())
        .spawn(move || read_stdin(tx))
        .expect("spawning the agent's reader");
    let status = serve(data_dir, &rx, &out, Faults::default());
    drop(out);
    let _ = writer.join();
    status
}

fn fatal(out: &Sender<String>, message: String, bad_input: bool) -> i32 {
    send(out, Message::Fatal(Fatal { message, bad_input }));
    if bad_input { 2 } else { 1 }
}

/// Runs one session: the start request, the workload with its records and
/// replies, the summary. `faults` only in tests.
fn serve(data_dir: &Path, rx: &Receiver<In>, out: &Sender<String>, faults: Faults) -> i32 {
    let start = match await_start(rx, out) {
        Ok(start) => start,
        Err(status) => return status,
    };
    let Start {
        preset,
        settings,
        set,
        interval_ms,
        command,
    } = start;
    if !INTERVAL_MS.contains(&interval_ms) {
        return fatal(
            out,
            format!(
                "interval_ms = {interval_ms} is out of range: allowed {}..={}",
                INTERVAL_MS.start(),
                INTERVAL_MS.end()
            ),
            true,
        );
    }
    let (s, preset_name) = match load(settings, &set, preset.as_deref()) {
        Ok(v) => v,
        Err((e, bad)) => return fatal(out, e, bad),
    };
    let mut progress = progress_lines(out);
    let mut opts = EngineOptions::new(Duration::from_millis(interval_ms), data_dir.to_path_buf());
    opts.faults = faults;
    let mut engine = match Engine::start(s, opts, &mut progress) {
        Ok(e) => e,
        Err(e) => {
            let bad = e.is_bad_input();
            return fatal(out, e.to_string(), bad);
        }
    };
    let header = crate::output::recording::Header::of(&command, &engine, preset_name.or(preset));
    let told = header.effective_settings.clone();
    send(out, Message::Header(Box::new(header)));
    run_until_stopped(&mut engine, rx, out, told);
    finish(engine, out);
    0
}

/// A start request's fields.
struct Start {
    preset: Option<String>,
    settings: Option<Box<Settings>>,
    set: Vec<String>,
    interval_ms: u64,
    command: String,
}

/// Waits for the start request, refusing any other (only stop also makes
/// sense before it): the start, or the agent's exit status.
fn await_start(rx: &Receiver<In>, out: &Sender<String>) -> Result<Start, i32> {
    // Before the start: only start (or stop) makes sense.
    loop {
        match rx.recv() {
            Ok(In::Request(r)) => match r.cmd {
                Command::Start {
                    preset,
                    settings,
                    set,
                    interval_ms,
                    command,
                } => {
                    return Ok(Start {
                        preset,
                        settings,
                        set,
                        interval_ms,
                        command,
                    });
                }
                Command::Stop => return Err(0),
                other => {
                    send(
                        out,
                        Message::Reply(Box::new(Reply::refused(
                            &cmd_name(&other),
                            "the workload has not started".into(),
                            true,
                        ))),
                    );
                }
            },
            Ok(In::Refused(e)) => return Err(fatal(out, e.to_string(), true)),
            Ok(In::Closed) | Err(_) => return Err(0),
        }
    }
}

/// The settings as the target sees them (its presets, its CPUs): the
/// whole `settings` sent, or the `preset` named, with the overrides `set`
/// applied before anything is validated, as `--set` is here; and the
/// preset's name. The error says whether it is bad input.
fn load(
    settings: Option<Box<Settings>>,
    set: &[String],
    preset: Option<&str>,
) -> Result<(Settings, Option<String>), (String, bool)> {
    match settings {
        Some(s) => {
            let mut s = *s;
            set.iter()
                .try_for_each(|spec| s.apply_override(spec).map_err(|e| e.to_string()))
                .and_then(|()| {
                    s.validate(crate::sys::online_cpus().len())
                        .map_err(|e| e.to_string())
                })
                .map(|()| (s, None))
                .map_err(|e| (e, true))
        }
        None => crate::invocation::load_settings(preset, set)
            .map(|(s, p)| (s, p.map(|p| p.name)))
            .map_err(|e| {
                let bad = e.downcast_ref::<crate::invocation::BadInput>().is_some();
                (crate::invocation::error_message(&e), bad)
            }),
    }
}

/// Sends the engine's records and handles requests until a stop signal,
/// a stop request, the end of the input or of the engine.
///
/// The settings as they run go to the client whenever a refusal at run
/// time changed them since it last heard ([`Running`]), before the record
/// whose notice says so.
fn run_until_stopped(
    engine: &mut Engine,
    rx: &Receiver<In>,
    out: &Sender<String>,
    // What the client knows runs: the header's, then each apply reply's.
    mut told: Settings,
) {
    loop {
        if crate::sys::stop_requested() {
            break;
        }
        match engine.records().recv_timeout(Duration::from_millis(20)) {
            Ok(r) => {
                let now = engine.effective();
                if now != told {
                    send(
                        out,
                        Message::Running(Box::new(Running {
                            pods: crate::engine::pipeline::pods_label(&now),
                            effective: Box::new(now.clone()),
                        })),
                    );
                    told = now;
                }
                send(out, Message::Interval(Box::new(r)));
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        match rx.try_recv() {
            Ok(In::Request(r)) => {
                if !handle(engine, r.cmd, out, &mut told) {
                    break;
                }
            }
            Ok(In::Refused(e)) => {
                // A bad line mid-run: said, and the run goes on.
                send(
                    out,
                    Message::Reply(Box::new(Reply::refused("?", e.to_string(), true))),
                );
            }
            Ok(In::Closed) | Err(std::sync::mpsc::TryRecvError::Disconnected) => break,
            Err(std::sync::mpsc::TryRecvError::Empty) => {}
        }
    }
}

/// Stops the engine, sends the records left and the run's summary.
fn finish(engine: Engine, out: &Sender<String>) {
    let requested = engine.settings().clone();
    let effective = engine.effective();
    let features = engine.features().clone();
    let machine = crate::sys::machine_info(engine.dataset().dir());
    let device_irqs = engine.device_irqs();
    let (totals, rest) = crate::invocation::stop_and_drain(engine);
    for r in rest {
        send(out, Message::Interval(Box::new(r)));
    }
    let mut summary =
        crate::output::report::RunSummary::new(&requested, &effective, &totals, machine, features);
    summary.device_irqs = Some(device_irqs);
    send(out, Message::Summary(Box::new(summary)));
}

fn cmd_name(c: &Command) -> String {
    match c {
        Command::Start { .. } => "start",
        Command::Apply { .. } => "apply",
        Command::Pause => "pause",
        Command::Resume => "resume",
        Command::DropCache => "drop_cache",
        Command::Trace { .. } => "trace",
        Command::Mark { .. } => "mark",
        Command::Stop => "stop",
    }
    .into()
}

/// Does one command on the running engine; false to stop. `told`: the
/// settings as running that the client was last sent.
fn handle(engine: &mut Engine, cmd: Command, out: &Sender<String>, told: &mut Settings) -> bool {
    let name = cmd_name(&cmd);
    match cmd {
        Command::Stop => return false,
        Command::Start { .. } => send(
            out,
            Message::Reply(Box::new(Reply::refused(
                &name,
                "the workload is already running".into(),
                true,
            ))),
        ),
        Command::Apply { settings } => {
            let reply = match engine.apply(*settings) {
                Ok(changes) => {
                    *told = engine.effective();
                    Reply {
                        changes,
                        settings: Some(Box::new(engine.settings().clone())),
                        effective: Some(Box::new(told.clone())),
                        pods: crate::engine::pipeline::pods_label(told),
                        ..Reply::ok(&name)
                    }
                }
                Err(e) => Reply::refused(&name, e.to_string(), e.is_bad_input()),
            };
            send(out, Message::Reply(Box::new(reply)));
        }
        Command::Pause => engine.pause(),
        Command::Resume => {
            if let Err(e) = engine.resume() {
                send(
                    out,
                    Message::Reply(Box::new(Reply::refused(
                        &name,
                        e.to_string(),
                        e.is_bad_input(),
                    ))),
                );
            }
        }
        Command::DropCache => {
            let dropped = engine.drop_cache();
            send(
                out,
                Message::Reply(Box::new(Reply {
                    dropped,
                    ..Reply::ok(&name)
                })),
            );
        }
        Command::Mark { label } => {
            engine.mark(crate::output::format::printable(&label, false));
        }
        Command::Trace { on } => {
            let reply = match engine.trace(on) {
                Ok(()) => Reply::ok(&name),
                Err(why) => Reply::refused(&name, why, false),
            };
            send(out, Message::Reply(Box::new(reply)));
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client reading the agent's lines in order knows what runs when it
    /// reads the notice of a refusal at run time: the agent sends the
    /// settings as running (or its header already had them) before the
    /// interval whose notice says so, and again after an apply.
    #[test]
    fn a_refusal_at_run_time_reaches_the_client_before_its_notice() {
        let f = crate::sys::probe_features();
        if !f.highpri {
            eprintln!(
                "skipped: nice -20 is refused up front here ({:?}): the header says so",
                f.highpri_reason
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut s = Settings::default();
        for o in [
            "workers.highpri=true",
            "workers.mode=bound",
            "workload.file_size=4M",
            "workload.rate_iops=2000",
        ] {
            s.apply_override(o).unwrap();
        }
        let (tx, rx) = channel();
        let (out, lines) = channel();
        let request = |cmd| {
            In::Request(Box::new(Request {
                protocol: PROTOCOL,
                cmd,
            }))
        };
        tx.send(request(Command::Start {
            preset: None,
            settings: Some(Box::new(s.clone())),
            set: Vec::new(),
            interval_ms: 50,
            command: "test".into(),
        }))
        .unwrap();
        let faults = Faults {
            deny_highpri: true,
            ..Faults::default()
        };
        let agent = std::thread::spawn(move || serve(dir.path(), &rx, &out, faults));
        // The client's side: what it knows runs, line by line.
        let mut knows: Option<Settings> = None;
        let (mut notices, mut applied, mut n) = (0, false, 0);
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while let Ok(line) = lines.recv_timeout(Duration::from_secs(30)) {
            n += 1;
            match Message::parse(&line, n).unwrap() {
                Message::Header(h) => knows = Some(h.effective_settings),
                Message::Running(r) => knows = Some(*r.effective),
                Message::Reply(r) => {
                    if let Some(e) = r.effective {
                        knows = Some(*e);
                    }
                }
                Message::Interval(r) => {
                    if r.notices
                        .iter()
                        .any(|n| n.text.starts_with("workers.highpri"))
                    {
                        let k = knows.as_ref().expect("a header first");
                        assert!(!k.workers.highpri, "the notice came before what runs");
                        notices += 1;
                        if !applied {
                            // A new pipeline is refused again, after the
                            // apply reply said what ran when it was built.
                            let mut next = s.clone();
                            next.workload.queue_depth += 1;
                            tx.send(request(Command::Apply {
                                settings: Box::new(next),
                            }))
                            .unwrap();
                            applied = true;
                        } else {
                            tx.send(request(Command::Stop)).unwrap();
                        }
                    }
                }
                Message::Summary(_) => break,
                // The dataset's preparation in a fresh data dir.
                Message::Progress(_) if knows.is_none() => {}
                other => panic!("unexpected {other:?}"),
            }
            assert!(std::time::Instant::now() < until, "no end in 60 s");
        }
        assert_eq!(agent.join().unwrap(), 0);
        assert_eq!(notices, 2, "one notice per pipeline");
        assert!(!knows.unwrap().workers.highpri);
    }
}
