//! The agent protocol: JSON lines over the stdin and stdout of `readpath
//! agent`, carried by the user's own ssh or adb. The client sends
//! [`Request`]s; the agent answers with a [`Message`] per line: a hello
//! (protocol and readpath versions, architecture), then the recording
//! format (its header, then one `{"interval": ...}` per interval, events
//! included), replies to the commands that need one, and the run's summary
//! at the end. Every line is checked where it is read: a line that is not
//! one of these is refused by its number, never guessed at.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::metrics::IntervalRecord;
use crate::output::recording::Header;
use crate::output::report::RunSummary;
use crate::settings::{SettingChange, Settings};

/// The protocol this readpath speaks. Both sides refuse another by name.
pub const PROTOCOL: u32 = 4;

/// Longest line either side reads: a recording's (a header with its
/// settings and machine is a few KiB; an interval with its histograms some
/// tens of KiB).
pub const MAX_LINE: usize = crate::output::recording::MAX_LINE_BYTES;

/// One command to the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The protocol the client speaks ([`PROTOCOL`]).
    pub protocol: u32,
    /// What to do.
    #[serde(flatten)]
    pub cmd: Command,
}

/// What the client asks of the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// Start the workload: settings from a preset of the target (by name)
    /// or given whole, then `--set` overrides, validated on the target.
    Start {
        /// A preset name, resolved on the target (its saved presets).
        #[serde(default)]
        preset: Option<String>,
        /// Whole settings (a preset file read on the client).
        #[serde(default)]
        settings: Option<Box<Settings>>,
        /// `section.key=value` overrides.
        #[serde(default)]
        set: Vec<String>,
        /// Interval length, ms.
        interval_ms: u64,
        /// The client's command, for the recording header (`run`, `tui`).
        command: String,
    },
    /// Run with these settings from now on.
    Apply {
        /// The new settings.
        settings: Box<Settings>,
    },
    /// Pause the workload.
    Pause,
    /// Resume it.
    Resume,
    /// Drop the page cache of the file.
    DropCache,
    /// Record where each work item ran (the records' timeline), or stop.
    Trace {
        /// On or off.
        on: bool,
    },
    /// Add a marker event (`baseline`, a caption).
    Mark {
        /// Its label.
        label: String,
    },
    /// Stop, send the summary, exit.
    Stop,
}

/// The agent's first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// The protocol it speaks.
    pub protocol: u32,
    /// Its readpath version.
    pub readpath: String,
    /// Its machine's architecture (`uname -m`).
    pub arch: String,
}

/// The answer to a command that needs one (start, apply, drop_cache).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The command answered.
    pub cmd: String,
    /// Whether it was done.
    pub ok: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The refusal is of the user's input (exit status 2).
    #[serde(default)]
    pub bad_input: bool,
    /// apply: the changes made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<SettingChange>,
    /// apply: the settings as now requested and as running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Box<Settings>>,
    /// apply: the settings as running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective: Option<Box<Settings>>,
    /// apply: the pods of the unbound queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<String>,
    /// drop_cache: the pages dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<usize>,
}

/// The settings as they run now, sent unasked when a refusal at run time
/// (a worker's nice -20, a hog's nice, an irq thread's SCHED_FIFO refused
/// by the target's kernel) changed them: before the interval whose notice
/// says so, so that a client showing that notice already shows what runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Running {
    /// The settings as running.
    pub effective: Box<Settings>,
    /// The pods of the unbound queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<String>,
}

impl Reply {
    /// A command done.
    pub fn ok(cmd: &str) -> Reply {
        Reply {
            cmd: cmd.into(),
            ok: true,
            error: None,
            bad_input: false,
            changes: Vec::new(),
            settings: None,
            effective: None,
            pods: None,
            dropped: None,
        }
    }

    /// A command refused.
    pub fn refused(cmd: &str, error: String, bad_input: bool) -> Reply {
        Reply {
            ok: false,
            error: Some(error),
            bad_input,
            ..Reply::ok(cmd)
        }
    }
}

/// A fatal error of the agent: it exits after this line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fatal {
    /// What went wrong.
    pub message: String,
    /// The user's input was refused (exit status 2).
    #[serde(default)]
    pub bad_input: bool,
}

/// How far the agent got preparing the workload's dataset (its plaintext,
/// ciphertexts and Merkle trees), between its hello and the header: a few
/// a second while it builds, and once at the end, so a first start on a
/// slow target shows a bar and an estimate instead of silence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Progress {
    /// Bytes of the plaintext written so far.
    pub done: u64,
    /// Of the plaintext's size (the workload's file size).
    pub total: u64,
}

/// Why a progress line was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProgressError {
    /// More done than the whole, or a whole no file size allows.
    #[error("progress {done} of {total} bytes: allowed 0..=total, total 1..={max}")]
    Range {
        /// The bytes done.
        done: u64,
        /// The whole.
        total: u64,
        /// The largest file size a setting allows.
        max: u64,
    },
}

impl Progress {
    /// The line's numbers checked: `done` within `total`, `total` a file
    /// size `workload.file_size` allows.
    fn check(&self) -> Result<(), ProgressError> {
        let max = crate::settings::MAX_FILE_SIZE;
        if self.total == 0 || self.total > max || self.done > self.total {
            return Err(ProgressError::Range {
                done: self.done,
                total: self.total,
                max,
            });
        }
        Ok(())
    }
}

/// One line from the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// The first line.
    Hello(Hello),
    /// The dataset's preparation, after the hello, before the header.
    Progress(Progress),
    /// The recording header, once the workload started.
    Header(Box<Header>),
    /// One interval.
    Interval(Box<IntervalRecord>),
    /// The answer to a command.
    Reply(Box<Reply>),
    /// The settings as they run now, changed by a refusal at run time.
    Running(Box<Running>),
    /// The run's summary, last.
    Summary(Box<RunSummary>),
    /// A fatal error.
    Fatal(Fatal),
}

/// What one agent line serializes as (all but the header, which is the
/// recording header as is).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Wire {
    Hello(Hello),
    Progress(Progress),
    Interval(Box<IntervalRecord>),
    Reply(Box<Reply>),
    Running(Box<Running>),
    Summary(Box<RunSummary>),
    Error(Fatal),
}

impl Message {
    /// The line (no newline).
    pub fn to_line(&self) -> String {
        let v = match self {
            Message::Header(h) => serde_json::to_string(h),
            Message::Hello(h) => serde_json::to_string(&Wire::Hello(h.clone())),
            Message::Progress(p) => serde_json::to_string(&Wire::Progress(*p)),
            Message::Interval(r) => serde_json::to_string(&Wire::Interval(r.clone())),
            Message::Reply(r) => serde_json::to_string(&Wire::Reply(r.clone())),
            Message::Running(r) => serde_json::to_string(&Wire::Running(r.clone())),
            Message::Summary(s) => serde_json::to_string(&Wire::Summary(s.clone())),
            Message::Fatal(f) => serde_json::to_string(&Wire::Error(f.clone())),
        };
        v.unwrap_or_else(|e| format!("{{\"error\":{{\"message\":\"serializing: {e}\"}}}}"))
    }

    /// Reads line `n` (1-based) from the agent: one of the messages, with
    /// what replay and plot check of a recording checked here too (the
    /// header's version and ranges, each interval's numbers).
    pub fn parse(line: &str, n: usize) -> Result<Message, LineError> {
        let at = |problem: LineProblem| LineError { line: n, problem };
        if line.len() > MAX_LINE {
            return Err(at(LineProblem::TooLong));
        }
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
            at(LineProblem::NotJson {
                error: Arc::new(e),
                preview: preview(line),
            })
        })?;
        if v.get("format").is_some() {
            let h = crate::output::recording::header_from(v)
                .map_err(|e| at(LineProblem::Header(Arc::new(e))))?;
            return Ok(Message::Header(Box::new(h)));
        }
        let w: Wire = serde_json::from_value(v).map_err(|e| {
            at(LineProblem::NotAMessage {
                error: Arc::new(e),
                preview: preview(line),
            })
        })?;
        Ok(match w {
            Wire::Hello(h) => Message::Hello(h),
            Wire::Progress(p) => {
                p.check().map_err(|e| at(LineProblem::Progress(e)))?;
                Message::Progress(p)
            }
            Wire::Interval(r) => {
                crate::output::recording::check_record(&r)
                    .map_err(|e| at(LineProblem::Record(e)))?;
                Message::Interval(r)
            }
            Wire::Reply(r) => {
                check_reply(&r).map_err(|e| at(LineProblem::Reply(e)))?;
                Message::Reply(r)
            }
            Wire::Running(r) => {
                check_running(&r).map_err(|e| at(LineProblem::Reply(e)))?;
                Message::Running(r)
            }
            Wire::Summary(s) => Message::Summary(s),
            Wire::Error(f) => Message::Fatal(f),
        })
    }
}

/// Why a line from the agent was refused: its number and what is wrong.
#[derive(Debug, Clone, thiserror::Error)]
#[error("agent line {line}: {problem}")]
pub struct LineError {
    /// The line, 1-based.
    pub line: usize,
    /// What is wrong with it.
    pub problem: LineProblem,
}

/// What is wrong with a line from the agent ([`LineError`]). Clone (the
/// reader hands the error to the waiter and keeps it as why the reading
/// ended): the errors of other crates are shared.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LineProblem {
    /// Longer than [`MAX_LINE`].
    #[error("longer than {MAX_LINE} bytes")]
    TooLong,
    /// Not JSON.
    #[error("not JSON ({error}): {preview}")]
    NotJson {
        /// The parser's error.
        error: Arc<serde_json::Error>,
        /// The line's start, quoted and printable.
        preview: String,
    },
    /// A recording header that is refused.
    #[error(transparent)]
    Header(Arc<crate::output::recording::HeaderError>),
    /// JSON that is no message of the protocol.
    #[error("not a protocol message ({error}): {preview}")]
    NotAMessage {
        /// The parser's error.
        error: Arc<serde_json::Error>,
        /// The line's start, quoted and printable.
        preview: String,
    },
    /// An interval record out of range.
    #[error(transparent)]
    Record(crate::metrics::check::RecordError),
    /// A reply beyond what an agent sends.
    #[error(transparent)]
    Reply(ReplyError),
    /// A progress line out of range.
    #[error(transparent)]
    Progress(ProgressError),
}

/// A reply beyond what an agent sends ([`check_reply`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplyError {
    /// More changes than settings.
    #[error("reply changes has {count} entries: allowed at most {keys} (one per setting)")]
    Changes {
        /// How many.
        count: usize,
        /// How many settings there are.
        keys: usize,
    },
    /// A text over [`MAX_REPLY_TEXT`] bytes.
    #[error("{field}: {len} bytes: allowed at most {MAX_REPLY_TEXT}")]
    Text {
        /// Which (`reply error`, `reply changes[].key`).
        field: &'static str,
        /// Its length, bytes.
        len: usize,
    },
    /// Settings that are invalid.
    #[error("{field}: {source}")]
    Settings {
        /// `reply settings`, `reply effective` or `running effective`.
        field: &'static str,
        /// Why.
        source: Box<crate::settings::SettingsError>,
    },
}

/// The agent speaks another protocol than this readpath ([`check_hello`]):
/// which side to update.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    /// The agent's is newer.
    #[error(
        "{place}: the agent (readpath {readpath}) speaks protocol {protocol}, newer than this readpath's ({PROTOCOL}): upgrade readpath here"
    )]
    Newer {
        /// The target's label.
        place: String,
        /// The agent's version.
        readpath: String,
        /// Its protocol.
        protocol: u32,
    },
    /// The agent's is older.
    #[error(
        "{place}: the agent (readpath {readpath}) speaks protocol {protocol}, older than this readpath's ({PROTOCOL}): update readpath on the target (--remote copies this one there when the target's is older)"
    )]
    Older {
        /// The target's label.
        place: String,
        /// The agent's version.
        readpath: String,
        /// Its protocol.
        protocol: u32,
    },
}

/// Why the agent refused a request line ([`parse_request`]).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Longer than [`MAX_LINE`].
    #[error("request longer than {MAX_LINE} bytes")]
    TooLong,
    /// Not JSON.
    #[error("request is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The client's protocol is newer.
    #[error(
        "protocol {0} from the client is newer than this agent's ({PROTOCOL}): update readpath on the target"
    )]
    Newer(u64),
    /// The client's protocol is older.
    #[error(
        "protocol {0} from the client is older than this agent's ({PROTOCOL}): upgrade readpath on the client"
    )]
    Older(u64),
    /// No protocol number.
    #[error("request without a protocol number")]
    NoProtocol,
    /// Not a request of this protocol.
    #[error("request refused: {0}")]
    Refused(#[source] serde_json::Error),
}

/// Longest text of a reply (its error, its pods, a change's key or value).
pub const MAX_REPLY_TEXT: usize = 16 * 1024;

/// Checks a reply as a header is checked: at most one change per setting,
/// its texts at most [`MAX_REPLY_TEXT`] bytes, its settings valid.
fn check_reply(r: &Reply) -> Result<(), ReplyError> {
    let keys = crate::settings::KEYS.len();
    if r.changes.len() > keys {
        return Err(ReplyError::Changes {
            count: r.changes.len(),
            keys,
        });
    }
    let texts = [
        ("reply error", r.error.as_deref().unwrap_or("")),
        ("reply pods", r.pods.as_deref().unwrap_or("")),
        ("reply cmd", r.cmd.as_str()),
    ];
    let changes = r.changes.iter().flat_map(|c| {
        [
            ("reply changes[].key", c.key.as_str()),
            ("reply changes[].from", c.from.as_str()),
            ("reply changes[].to", c.to.as_str()),
        ]
    });
    for (field, text) in texts.into_iter().chain(changes) {
        if text.len() > MAX_REPLY_TEXT {
            return Err(ReplyError::Text {
                field,
                len: text.len(),
            });
        }
    }
    for (field, s) in [
        ("reply settings", &r.settings),
        ("reply effective", &r.effective),
    ] {
        if let Some(s) = s {
            check_settings(field, s)?;
        }
    }
    Ok(())
}

/// Checks a running line as a reply is checked: its pods at most
/// [`MAX_REPLY_TEXT`] bytes, its settings valid.
fn check_running(r: &Running) -> Result<(), ReplyError> {
    let pods = r.pods.as_deref().unwrap_or("");
    if pods.len() > MAX_REPLY_TEXT {
        return Err(ReplyError::Text {
            field: "running pods",
            len: pods.len(),
        });
    }
    check_settings("running effective", &r.effective)
}

/// Settings from the agent, checked as a recording header's are (any CPU
/// number this readpath allows: they are the target's CPUs).
fn check_settings(field: &'static str, s: &Settings) -> Result<(), ReplyError> {
    s.validate(crate::settings::MAX_CPU_NUMBER + 1)
        .map_err(|e| ReplyError::Settings {
            field,
            source: Box::new(e),
        })
}

/// The start of a line, printable, for an error message.
fn preview(line: &str) -> String {
    let cut: String = line.chars().take(60).collect();
    let cut = crate::output::format::printable(&cut, false);
    if line.chars().count() > 60 {
        format!("{cut:?}...")
    } else {
        format!("{cut:?}")
    }
}

/// Checks the agent's hello against this readpath: another protocol is
/// refused by name, saying which side to update.
pub fn check_hello(h: &Hello, place: &str) -> Result<(), HelloError> {
    use std::cmp::Ordering::*;
    let (place, readpath, protocol) = (place.to_string(), h.readpath.clone(), h.protocol);
    match h.protocol.cmp(&PROTOCOL) {
        Equal => Ok(()),
        Greater => Err(HelloError::Newer {
            place,
            readpath,
            protocol,
        }),
        Less => Err(HelloError::Older {
            place,
            readpath,
            protocol,
        }),
    }
}

/// Reads a request line on the agent: another protocol is refused by name.
pub fn parse_request(line: &str) -> Result<Request, RequestError> {
    if line.len() > MAX_LINE {
        return Err(RequestError::TooLong);
    }
    let v: serde_json::Value = serde_json::from_str(line).map_err(RequestError::NotJson)?;
    match v.get("protocol").and_then(serde_json::Value::as_u64) {
        Some(p) if p == u64::from(PROTOCOL) => {}
        Some(p) if p > u64::from(PROTOCOL) => return Err(RequestError::Newer(p)),
        Some(p) => return Err(RequestError::Older(p)),
        None => return Err(RequestError::NoProtocol),
    }
    serde_json::from_value(v).map_err(RequestError::Refused)
}

/// The line of a request (no newline).
pub fn request_line(cmd: Command) -> String {
    serde_json::to_string(&Request {
        protocol: PROTOCOL,
        cmd,
    })
    .expect("requests serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_held_to_one_change_per_setting_and_short_texts() {
        let ok = Message::Reply(Box::new(Reply::ok("apply"))).to_line();
        assert!(matches!(Message::parse(&ok, 5), Ok(Message::Reply(_))));
        let change = r#"{"key":"workers.mode","from":"bound","to":"unbound"}"#;
        let many = vec![change; crate::settings::KEYS.len() + 1].join(",");
        let line = format!(r#"{{"reply":{{"cmd":"apply","ok":true,"changes":[{many}]}}}}"#);
        let e = Message::parse(&line, 7).unwrap_err().to_string();
        assert!(
            e.starts_with("agent line 7: reply changes has ") && e.contains("one per setting"),
            "{e}"
        );
        let long = "x".repeat(MAX_REPLY_TEXT + 1);
        let line = format!(r#"{{"reply":{{"cmd":"apply","ok":false,"error":"{long}"}}}}"#);
        let e = Message::parse(&line, 8).unwrap_err().to_string();
        assert!(
            e.starts_with("agent line 8: reply error: 16385 bytes: allowed at most 16384"),
            "{e}"
        );
    }
}
