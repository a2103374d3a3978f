//! Reaching a target with the tools its users already have: the system's
//! `ssh` and `scp` (their config, keys and agent) or `adb`. No server of
//! our own. Before the agent starts, the target's architecture (`uname
//! -m`) and readpath version are checked, and a matching binary is copied
//! there when it is missing or older: under a temporary name, its SHA-256
//! checked there against this one's, then moved into place, so a damaged
//! copy is never run. Remote arguments are data, never shell: every path
//! in a command line for the target's shell is quoted ([`sh_quote`]), a
//! path that could be read as an option or that holds control characters
//! is refused ([`check_path`]), `~` is resolved here, one way
//! ([`Remote::resolve_path`]), and scp, which hands its remote path to the
//! target's shell in its legacy protocol, only ever gets paths of plain
//! characters (others are streamed through `ssh ... 'cat > PATH'`, as is
//! any copy scp fails, such as to a target without an SFTP server). Every
//! setup step has a timeout ([`Timeouts`]) and ends at once on a stop
//! signal. The commands can be replaced, as git's GIT_SSH_COMMAND is:
//! `READPATH_SSH_COMMAND`, `READPATH_SCP_COMMAND`, `READPATH_ADB` (split at
//! whitespace; readpath appends its arguments).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::output::format::printable;

/// How long one setup command (uname, version, hash, mkdir, install) may
/// take, unless [`TIMEOUT_VAR`] says otherwise.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the agent may take to say its hello once started, unless
/// [`TIMEOUT_VAR`] says otherwise.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(15);
/// What a copy gets on top of the setup timeout, per MiB of the binary (a
/// slow link is slow, not stalled).
const COPY_PER_MIB: Duration = Duration::from_secs(4);
/// The variable that sets every setup step's timeout and the hello's, in
/// seconds, for slow links.
pub const TIMEOUT_VAR: &str = "READPATH_REMOTE_TIMEOUT";
/// The range [`TIMEOUT_VAR`] accepts, s.
const TIMEOUT_RANGE: std::ops::RangeInclusive<f64> = 0.1..=3600.0;
/// How long a command that is no setup step ([`Remote::run`]: a benchmark
/// there) may take.
const LONG_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest path for the target accepted.
const MAX_PATH: usize = 4096;
/// What a path for the target may be, for error messages.
pub const PATH_RULE: &str = "allowed: 1..=4096 bytes of printable characters \
    (no control or format characters), not starting with '-'; '~' only as \
    '~' or '~/...' (the login's home, ssh only); on adb an absolute path";

/// A target machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remote {
    /// `ssh:[user@]host[:port]`.
    Ssh {
        /// The login, if given.
        user: Option<String>,
        /// Host name or address (`[::1]` for IPv6 with a port).
        host: String,
        /// The port, if given.
        port: Option<u16>,
    },
    /// `adb:[serial]`.
    Adb {
        /// The device, if more than one is attached.
        serial: Option<String>,
    },
    /// `vm:KERNEL[:...]`: a lab kernel booted under QEMU here
    /// ([`crate::lab`]), readpath inside, the agent on a virtio serial port.
    Vm(crate::lab::VmRemote),
}

/// Why a setup step failed: the target's label and what went wrong there;
/// what went wrong says whether the user's input is to blame (exit status
/// 2, [`SetupError::kind`]).
#[derive(Debug, thiserror::Error)]
#[error("{place}: {problem}")]
pub struct SetupError {
    /// The target's label (`ssh:pixel`).
    pub place: String,
    /// What went wrong.
    pub problem: SetupProblem,
}

/// What went wrong in a setup step ([`SetupError`]), in the step's words.
#[derive(Debug, thiserror::Error)]
pub enum SetupProblem {
    /// The command (ssh, scp, adb, QEMU) could not be started.
    #[error("{step}: running {program}: {source}")]
    Spawn {
        /// The step (`uname -m`).
        step: String,
        /// The program, printable.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// Waiting for the command failed.
    #[error("{step}: waiting for {program}: {source}")]
    Wait {
        /// The step.
        step: String,
        /// The program, printable.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// A stop signal came during the step.
    #[error("{step}: interrupted by {}", crate::sys::signal_name(*signal))]
    Interrupted {
        /// The step.
        step: String,
        /// The signal.
        signal: i32,
    },
    /// The step took longer than its timeout.
    #[error(
        "{step}: no answer in {} (the target or the link hangs; {TIMEOUT_VAR}=SECONDS gives a slow link longer)",
        secs(*timeout)
    )]
    TimedOut {
        /// The step.
        step: String,
        /// Its timeout.
        timeout: Duration,
    },
    /// The command ran and failed: its status and its stderr.
    #[error("{step} failed ({status}): {}", printable(stderr.trim(), false))]
    Failed {
        /// The step.
        step: String,
        /// Its exit status.
        status: ExitStatus,
        /// What it said on stderr.
        stderr: String,
    },
    /// The command for the target could not be made (an empty tool
    /// variable, a lab guest that cannot be made ready).
    #[error(transparent)]
    Command(#[from] CommandError),
    /// A local file could not be read.
    #[error("reading {}: {source}", path.display())]
    ReadLocal {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A copy to a lab guest (which gets readpath in its initramfs).
    #[error("a lab guest gets readpath in its initramfs, not by a copy")]
    GuestCopy,
    /// scp failed, and so did the stream through ssh.
    #[error("the copy failed both ways: {first}; then {second}")]
    BothWays {
        /// Why scp failed.
        first: Box<SetupProblem>,
        /// Why the stream failed.
        second: Box<SetupProblem>,
    },
    /// [`TIMEOUT_VAR`] is refused.
    #[error(transparent)]
    Timeout(#[from] BadTimeout),
    /// `--remote-dir` is refused.
    #[error(transparent)]
    Dir(#[from] FlagPathError),
    /// `uname -m` said no architecture.
    #[error("`uname -m` said {:?}, not an architecture", printable(arch, false))]
    Arch {
        /// What it said.
        arch: String,
    },
    /// No readpath binary for the target's architecture.
    #[error(transparent)]
    Binary(#[from] LocalBinaryError),
    /// The copy's SHA-256 there is not this binary's.
    #[error(
        "the copy at {tmp} has SHA-256 {theirs}, but {} has {ours}: it arrived damaged (a truncated transfer, a full disk?); it was removed and nothing was run",
        local.display()
    )]
    Hash {
        /// The copy's path there.
        tmp: String,
        /// Its SHA-256.
        theirs: String,
        /// The binary copied.
        local: PathBuf,
        /// Its SHA-256.
        ours: String,
    },
    /// The copy's size there is not this binary's.
    #[error(
        "the copy at {tmp} is {:?} bytes, but {} has {size}: it arrived damaged; it was removed and nothing else was run",
        printable(said.trim(), false),
        local.display()
    )]
    Size {
        /// The copy's path there.
        tmp: String,
        /// What `wc -c` said.
        said: String,
        /// The binary copied.
        local: PathBuf,
        /// Its size.
        size: u64,
    },
    /// The copy's `--version` is not this readpath's.
    #[error(
        "the copy at {tmp} says {:?} to --version, not readpath {}; it was removed",
        printable(said.trim(), false),
        env!("CARGO_PKG_VERSION")
    )]
    Version {
        /// The copy's path there.
        tmp: String,
        /// What it said.
        said: String,
    },
    /// A lab guest's kernel, initramfs or disk could not be made ready.
    #[error("{0}")]
    Guest(std::io::Error),
}

impl SetupProblem {
    /// What kind of failure it is.
    pub fn kind(&self) -> SetupFailure {
        match self {
            SetupProblem::Interrupted { .. } => SetupFailure::Interrupted,
            SetupProblem::TimedOut { .. } => SetupFailure::TimedOut,
            SetupProblem::Command(_) | SetupProblem::Timeout(_) | SetupProblem::Dir(_) => {
                SetupFailure::BadInput
            }
            SetupProblem::BothWays { second, .. } => second.kind(),
            _ => SetupFailure::Failed,
        }
    }
}

/// The kinds of [`SetupError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupFailure {
    /// A command failed, or its answer was wrong.
    Failed,
    /// A step took longer than its timeout.
    TimedOut,
    /// A stop signal arrived during a step.
    Interrupted,
    /// The user's input was refused (a path, a variable).
    BadInput,
}

impl SetupError {
    fn new(place: &str, problem: impl Into<SetupProblem>) -> SetupError {
        SetupError {
            place: place.to_string(),
            problem: problem.into(),
        }
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> SetupFailure {
        self.problem.kind()
    }

    /// The user's input is to blame (exit status 2).
    pub fn is_bad_input(&self) -> bool {
        self.kind() == SetupFailure::BadInput
    }
}

/// A [`TIMEOUT_VAR`] that is no number of seconds in range: its value and
/// what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{TIMEOUT_VAR}={:?} is not a number of seconds: allowed {}..={}",
    printable(value, false),
    TIMEOUT_RANGE.start(),
    TIMEOUT_RANGE.end()
)]
pub struct BadTimeout {
    /// The variable's value.
    pub value: String,
}

/// How long the setup steps and the agent's hello may take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeouts {
    /// Each setup command (a copy gets [`COPY_PER_MIB`] more per MiB).
    pub setup: Duration,
    /// The agent's hello, from its start.
    pub hello: Duration,
}

impl Timeouts {
    /// The defaults, or [`TIMEOUT_VAR`] (seconds) for every one of them.
    pub fn from_env() -> Result<Timeouts, BadTimeout> {
        Timeouts::from_value(std::env::var(TIMEOUT_VAR).ok())
    }

    /// The defaults, or `value` (seconds) for every one of them.
    fn from_value(value: Option<String>) -> Result<Timeouts, BadTimeout> {
        let Some(v) = value else {
            return Ok(Timeouts {
                setup: SETUP_TIMEOUT,
                hello: HELLO_TIMEOUT,
            });
        };
        match v.trim().parse::<f64>() {
            Ok(s) if TIMEOUT_RANGE.contains(&s) => {
                let d = Duration::from_secs_f64(s);
                Ok(Timeouts { setup: d, hello: d })
            }
            _ => Err(BadTimeout { value: v }),
        }
    }

    /// The timeout of copying `bytes`.
    fn copy(&self, bytes: u64) -> Duration {
        self.setup + COPY_PER_MIB * (bytes.div_ceil(1 << 20)).min(1 << 16) as u32
    }
}

fn word_ok(s: &str, extra: &[char]) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.len() <= 255
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c) || extra.contains(&c))
}

/// A character no path for the target may hold: a control character or
/// an invisible format one (a bidi override would make the path printed
/// differ from the path used).
fn bad_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}' | '\u{ad}')
}

/// Checks a path for the target given by the user (`--remote-dir`,
/// `--remote-data-dir`), with the rules that hold on every transport (see
/// [`PATH_RULE`]); the error has the value and what is allowed, the caller
/// adds the flag.
pub fn check_path(value: &str) -> Result<(), PathError> {
    let why = if value.is_empty() {
        PathProblem::Empty
    } else if value.len() > MAX_PATH {
        PathProblem::TooLong
    } else if value.starts_with('-') {
        PathProblem::Dash
    } else if value.chars().any(bad_char) {
        PathProblem::BadChar
    } else if value.starts_with('~') && !(value == "~" || value.starts_with("~/")) {
        PathProblem::OtherHome
    } else {
        return Ok(());
    };
    Err(PathError {
        value: value.to_string(),
        why,
    })
}

/// A path for the target that breaks [`PATH_RULE`] ([`check_path`]): the
/// value (shown printable), what is wrong with it and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{:?} is not a usable path: it {why}; {PATH_RULE}",
    printable(value, false)
)]
pub struct PathError {
    /// The path as given.
    pub value: String,
    /// What is wrong with it.
    pub why: PathProblem,
}

/// What is wrong with a path for the target ([`PathError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathProblem {
    /// Nothing.
    #[error("is empty")]
    Empty,
    /// Over [`MAX_PATH`] bytes.
    #[error("is longer than 4096 bytes")]
    TooLong,
    /// It starts with `-`.
    #[error("starts with '-' (a command there would read it as an option)")]
    Dash,
    /// A control or invisible format character.
    #[error("has a control or format character")]
    BadChar,
    /// `~user`.
    #[error("names another login's home ('~user' is not expanded)")]
    OtherHome,
}

/// A path for the target given by a flag that cannot be used there
/// ([`Remote::resolve_path`]): the flag, the value and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagPathError {
    /// It breaks the rule of every transport.
    #[error("{flag} {error}")]
    Rule {
        /// The flag (`--remote-dir`).
        flag: String,
        /// Why.
        error: PathError,
    },
    /// A relative path on adb or a lab guest.
    #[error(
        "{flag} {:?} is not a usable path on adb or vm: it is not absolute (e.g. /data/local/tmp/readpath); {PATH_RULE}",
        printable(value, false)
    )]
    NotAbsolute {
        /// The flag.
        flag: String,
        /// The path as given.
        value: String,
    },
}

/// What `--remote` allows, for messages.
const REMOTE_RULE: &str = "ssh:[user@]host[:port], adb:[serial] or vm:KERNEL[:cpus=N][:mem=MIB][:cache=MODE][:accel=kvm|tcg][:aes=on|off][:queues=N]";

/// Why a `--remote` spec was refused ([`Remote::parse`]).
#[derive(Debug, thiserror::Error)]
pub enum RemoteSpecError {
    /// The spec itself: what is wrong, and what is allowed.
    #[error(
        "--remote {:?}: {problem}; allowed: {REMOTE_RULE}",
        printable(spec, false)
    )]
    Bad {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        problem: SpecProblem,
    },
    /// The lab kernel a `vm:` spec names is not there, or may not be read.
    #[error(transparent)]
    Kernel(#[from] crate::lab::KernelCheckError),
}

/// What is wrong with a `--remote` spec ([`RemoteSpecError::Bad`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecProblem {
    /// A login with characters a login cannot have.
    #[error("the user has characters a login cannot have")]
    User,
    /// `[` without `]`.
    #[error("an IPv6 address needs its closing ]")]
    Bracket,
    /// Something other than `:PORT` after `]`.
    #[error(
        "{:?} after the address: only :PORT may follow ]",
        printable(after, false)
    )]
    AfterAddress {
        /// What follows `]`.
        after: String,
    },
    /// No host.
    #[error("no host given")]
    NoHost,
    /// Not an IPv6 address between the brackets.
    #[error("between [ and ] goes an IPv6 address")]
    Ipv6,
    /// A host with characters a host name cannot have.
    #[error("the host has characters a host name cannot have")]
    Host,
    /// A port that is not 1..=65535 in plain digits.
    #[error("port {:?} is not 1..=65535", printable(port, false))]
    Port {
        /// The port as given.
        port: String,
    },
    /// A `vm:` spec's fields.
    #[error(transparent)]
    Vm(#[from] crate::lab::VmSpecError),
    /// An adb serial with characters a serial cannot have.
    #[error("the serial has characters a device serial cannot have")]
    Serial,
    /// Neither `ssh:`, `adb:` nor `vm:`.
    #[error("unknown transport")]
    Transport,
}

/// A command-replacing variable (`READPATH_SSH_COMMAND`) set to nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var} is empty: allowed a command and its options")]
pub struct EmptyTool {
    /// The variable.
    pub var: &'static str,
}

/// Why the command that runs a line on the target could not be made
/// ([`Remote::command`]).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// Its tool's variable is empty.
    #[error(transparent)]
    Tool(#[from] EmptyTool),
    /// A lab guest's kernel, initramfs or disk could not be made ready.
    #[error(transparent)]
    Guest(#[from] std::io::Error),
}

/// Why there is no readpath binary for a target here ([`local_binary`]).
#[derive(Debug, thiserror::Error)]
pub enum LocalBinaryError {
    /// `READPATH_AGENT_BINARY` is no file, or this binary cannot be found.
    #[error(transparent)]
    Agent(#[from] crate::lab::vm::AgentBinaryError),
    /// Another architecture, and no static build for it.
    #[error(
        "no readpath binary for {arch} at hand: build one with `rustup target add {triple} && cargo build --release --target {triple}` (README: Static builds for targets), or set READPATH_AGENT_BINARY=PATH"
    )]
    NoBuild {
        /// The target's architecture (`uname -m`).
        arch: String,
        /// The Rust target triple of its static build.
        triple: String,
    },
}

/// A path scp can be given as it is: plain characters only, so neither
/// its SFTP mode (literal paths, `~` expanded) nor its legacy protocol
/// (the path goes through the target's shell) can read it as anything else.
fn scp_safe(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('-')
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,@".contains(c))
}

/// What one command did.
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Reads `r` into `into` until it ends, keeping the first `cap` bytes and
/// draining the rest (so the writer never blocks on a full pipe).
fn drain(mut r: impl Read, into: Arc<Mutex<Vec<u8>>>, cap: usize) {
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                let mut v = into.lock().unwrap_or_else(|e| e.into_inner());
                let room = cap.saturating_sub(v.len()).min(n);
                v.extend_from_slice(&buf[..room]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Ends `child`: SIGTERM (ssh closes its connection and ends its proxy
/// command), then SIGKILL if it lingers, and reaps it.
fn end_child(child: &mut Child) {
    if let Ok(None) = child.try_wait()
        && i32::try_from(child.id()).is_ok()
    {
        // Our own child, not reaped yet: its PID is not reused.
        crate::sys::terminate(child.id());
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(300) {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
    }
    let _ = child.wait();
}

impl Remote {
    /// Reads `ssh:[user@]host[:port]` or `adb:[serial]`; anything after
    /// these (`ssh:[::1]junk`) is refused.
    pub fn parse(spec: &str) -> Result<Remote, RemoteSpecError> {
        let bad = |problem: SpecProblem| RemoteSpecError::Bad {
            spec: spec.to_string(),
            problem,
        };
        if let Some(rest) = spec.strip_prefix("ssh:") {
            let (user, hostport) = match rest.split_once('@') {
                Some((u, h)) => (Some(u), h),
                None => (None, rest),
            };
            if let Some(u) = user
                && !word_ok(u, &[])
            {
                return Err(bad(SpecProblem::User));
            }
            let v6 = hostport.starts_with('[');
            let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
                let (h, after) = inner
                    .split_once(']')
                    .ok_or_else(|| bad(SpecProblem::Bracket))?;
                let port = match after {
                    "" => None,
                    a => Some(a.strip_prefix(':').ok_or_else(|| {
                        bad(SpecProblem::AfterAddress {
                            after: a.to_string(),
                        })
                    })?),
                };
                (h.to_string(), port)
            } else {
                match hostport.rsplit_once(':') {
                    Some((h, p)) => (h.to_string(), Some(p)),
                    None => (hostport.to_string(), None),
                }
            };
            if host.is_empty() {
                return Err(bad(SpecProblem::NoHost));
            }
            if v6 {
                // An address, with a zone (`fe80::1%eth0`) where it has one.
                let (addr, zone) = match host.split_once('%') {
                    Some((a, z)) => (a, Some(z)),
                    None => (host.as_str(), None),
                };
                if addr.parse::<std::net::Ipv6Addr>().is_err()
                    || zone.is_some_and(|z| !word_ok(z, &[]))
                {
                    return Err(bad(SpecProblem::Ipv6));
                }
            } else if !word_ok(&host, &[]) {
                return Err(bad(SpecProblem::Host));
            }
            let port = match port {
                None => None,
                Some(p) => match p.parse::<u16>() {
                    Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
                    _ => {
                        return Err(bad(SpecProblem::Port {
                            port: p.to_string(),
                        }));
                    }
                },
            };
            return Ok(Remote::Ssh {
                user: user.map(str::to_string),
                host,
                port,
            });
        }
        if let Some(rest) = spec.strip_prefix("vm:") {
            // The spec's fields with the rule beside them; the kernel it
            // names (the data dir trusted, a lab kernel that opens or a
            // bzImage path readpath may read) in its own words, once.
            let host_mib = crate::sys::memory_total_bytes().map(|b| b >> 20);
            let v = crate::lab::VmRemote::parse_spec(rest, host_mib)
                .map_err(|e| bad(SpecProblem::Vm(e)))?;
            v.check_kernel(&crate::lab::data_dir())?;
            return Ok(Remote::Vm(v));
        }
        if let Some(serial) = spec.strip_prefix("adb:") {
            if !serial.is_empty() && !word_ok(serial, &[':']) {
                return Err(bad(SpecProblem::Serial));
            }
            return Ok(Remote::Adb {
                serial: (!serial.is_empty()).then(|| serial.to_string()),
            });
        }
        Err(bad(SpecProblem::Transport))
    }

    /// The spec, as the header shows it (`ssh:pixel`).
    pub fn label(&self) -> String {
        match self {
            Remote::Ssh { user, host, port } => {
                let mut s = "ssh:".to_string();
                if let Some(u) = user {
                    s.push_str(u);
                    s.push('@');
                }
                if host.contains(':') {
                    s.push_str(&format!("[{host}]"));
                } else {
                    s.push_str(host);
                }
                if let Some(p) = port {
                    s.push_str(&format!(":{p}"));
                }
                s
            }
            Remote::Adb { serial: Some(s) } => format!("adb:{s}"),
            Remote::Adb { serial: None } => "adb:".into(),
            Remote::Vm(v) => v.label(),
        }
    }

    /// Where readpath keeps its binary on the target by default.
    pub fn default_dir(&self) -> &'static str {
        match self {
            Remote::Ssh { .. } => ".cache/readpath-agent",
            Remote::Adb { .. } => "/data/local/tmp/readpath",
            Remote::Vm(_) => "/bin",
        }
    }

    /// The data dir the agent is given by default (None: the target's own
    /// default, `~/.cache/readpath`; Android has no such home).
    pub fn default_data_dir(&self, dir: &str) -> Option<String> {
        match self {
            Remote::Ssh { .. } => None,
            Remote::Adb { .. } => Some(format!("{dir}/data")),
            Remote::Vm(_) => Some(crate::lab::vm::GUEST_DATA_DIR.to_string()),
        }
    }

    /// A path for the target given by `flag`, as the commands there take
    /// it. On ssh, `~` and `~/x` are resolved here into `.` and `./x`:
    /// relative to the login's home, where both the commands ssh runs and
    /// scp (either protocol) start, so the directory made, the copy and the
    /// agent's paths are the same one; no shell ever sees a `~` of ours. A
    /// relative path means the same. On adb the path must be absolute (the
    /// device's shell has no home of readpath's, and `adb push` resolves
    /// relative paths its own way).
    pub fn resolve_path(&self, flag: &str, value: &str) -> Result<String, FlagPathError> {
        check_path(value).map_err(|error| FlagPathError::Rule {
            flag: flag.to_string(),
            error,
        })?;
        match self {
            Remote::Ssh { .. } => Ok(match value.strip_prefix('~') {
                Some(rest) => format!(".{rest}"),
                None => value.to_string(),
            }),
            Remote::Adb { .. } | Remote::Vm(_) if value.starts_with('/') => Ok(value.to_string()),
            Remote::Adb { .. } | Remote::Vm(_) => Err(FlagPathError::NotAbsolute {
                flag: flag.to_string(),
                value: value.to_string(),
            }),
        }
    }

    fn tool(var: &'static str, default: &str) -> Result<Vec<String>, EmptyTool> {
        let line = std::env::var(var).unwrap_or_else(|_| default.to_string());
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        if words.is_empty() {
            return Err(EmptyTool { var });
        }
        Ok(words)
    }

    /// `adb [-s SERIAL]`, from `READPATH_ADB`.
    fn adb(serial: &Option<String>) -> Result<Command, EmptyTool> {
        let words = Remote::tool("READPATH_ADB", "adb")?;
        let mut c = Command::new(&words[0]);
        c.args(&words[1..]);
        if let Some(s) = serial {
            c.args(["-s", s]);
        }
        Ok(c)
    }

    fn dest(&self) -> String {
        match self {
            Remote::Ssh {
                user: Some(u),
                host,
                ..
            } => format!("{u}@{host}"),
            Remote::Ssh { host, .. } => host.clone(),
            Remote::Adb { .. } | Remote::Vm(_) => String::new(),
        }
    }

    /// scp's `[user@]host:path`, an IPv6 address in brackets (`::1:path`
    /// would be ambiguous).
    fn scp_dest(&self, path: &str) -> String {
        match self {
            Remote::Ssh { user, host, .. } => {
                let host = if host.contains(':') {
                    format!("[{host}]")
                } else {
                    host.clone()
                };
                match user {
                    Some(u) => format!("{u}@{host}:{path}"),
                    None => format!("{host}:{path}"),
                }
            }
            Remote::Adb { .. } | Remote::Vm(_) => path.to_string(),
        }
    }

    /// The command that runs `remote` (a shell command line, its paths
    /// quoted with [`sh_quote`]) on the target.
    pub fn command(&self, remote: &str) -> Result<Command, CommandError> {
        match self {
            Remote::Ssh { port, .. } => {
                let words = Remote::tool("READPATH_SSH_COMMAND", "ssh")?;
                let mut c = Command::new(&words[0]);
                c.args(&words[1..]);
                // Never ask for a password on a terminal the explorer owns.
                c.args(["-o", "BatchMode=yes"]);
                if let Some(p) = port {
                    c.args(["-p", &p.to_string()]);
                }
                c.arg(self.dest()).arg("--").arg(remote);
                Ok(c)
            }
            Remote::Adb { serial } => {
                let mut c = Remote::adb(serial)?;
                c.arg("shell").arg(remote);
                Ok(c)
            }
            // The guest's /init runs the line (from the kernel's command
            // line) and powers off: the command boots it. Every caller
            // names the guest (its label) before the error.
            Remote::Vm(v) => {
                let spec = crate::lab::spec_for(v, &mut |m| {
                    crate::invocation::say(&format!("readpath: {m}"))
                })?;
                Ok(crate::lab::vm::prepare(
                    &crate::lab::data_dir(),
                    &spec,
                    Some(remote),
                    &mut |_| {},
                )?)
            }
        }
    }

    /// Runs `remote` on the target and returns its stdout; a failure gives
    /// its stderr. For commands that are no setup step (a benchmark there):
    /// two minutes at most, and a stop signal ends it at once.
    pub fn run(&self, remote: &str) -> Result<String, SetupError> {
        self.step(remote, remote, LONG_TIMEOUT)
    }

    /// Runs `c` (step `step`, for messages) with `stdin`, for at most
    /// `timeout`, ending it on a stop signal; what it did, whatever its
    /// status.
    fn exec(
        &self,
        mut c: Command,
        step: &str,
        timeout: Duration,
        stdin: Stdio,
    ) -> Result<Ran, SetupError> {
        let place = self.label();
        if let Some(sig) = stopped() {
            return Err(interrupted(&place, step, sig));
        }
        let program = printable(&c.get_program().to_string_lossy(), false);
        // A lab guest's port hangs up when QEMU's stdin ends, and what the
        // guest writes then blocks: its stdin stays open until it exits.
        let vm = matches!(self, Remote::Vm(_));
        let mut child = c
            .stdin(if vm { Stdio::piped() } else { stdin })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| {
                SetupError::new(
                    &place,
                    SetupProblem::Spawn {
                        step: step.to_string(),
                        program: program.clone(),
                        source,
                    },
                )
            })?;
        if vm {
            // What lets `kernel restore` prove it readpath's guest.
            let _ = crate::lab::vm::record_guest(&crate::lab::data_dir(), child.id());
        }
        let out = Arc::new(Mutex::new(Vec::new()));
        let err = Arc::new(Mutex::new(Vec::new()));
        let readers = [
            (
                child
                    .stdout
                    .take()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
                out.clone(),
                1 << 20,
            ),
            (
                child
                    .stderr
                    .take()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
                err.clone(),
                1 << 16,
            ),
        ]
        .map(|(pipe, into, cap)| pipe.map(|p| std::thread::spawn(move || drain(p, into, cap))));
        let held_stdin = child.stdin.take();
        let start = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break st,
                Ok(None) => {}
                Err(e) => {
                    end_child(&mut child);
                    return Err(SetupError::new(
                        &place,
                        SetupProblem::Wait {
                            step: step.to_string(),
                            program,
                            source: e,
                        },
                    ));
                }
            }
            if let Some(sig) = stopped() {
                end_child(&mut child);
                return Err(interrupted(&place, step, sig));
            }
            if start.elapsed() > timeout {
                end_child(&mut child);
                return Err(SetupError::new(
                    &place,
                    SetupProblem::TimedOut {
                        step: step.to_string(),
                        timeout,
                    },
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        drop(held_stdin);
        // The guest's command's status, not QEMU's (0 after any poweroff).
        let status = match self {
            Remote::Vm(v) => {
                use std::os::unix::process::ExitStatusExt;
                let code =
                    crate::lab::vm::guest_status(&crate::lab::data_dir(), &v.kernel).unwrap_or(255);
                ExitStatus::from_raw((code & 0xff) << 8)
            }
            _ => status,
        };
        // Its output, once read to the end; a process it left behind
        // holding a pipe (an ssh connection master) is not waited for long.
        let t = Instant::now();
        while readers.iter().flatten().any(|r| !r.is_finished())
            && t.elapsed() < Duration::from_millis(500)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let text = |b: &Arc<Mutex<Vec<u8>>>| {
            String::from_utf8_lossy(&b.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
        };
        Ok(Ran {
            status,
            stdout: text(&out),
            stderr: text(&err),
        })
    }

    /// Runs the shell command line `remote` there; its stdout, or an error
    /// with its stderr when it failed.
    fn step(&self, step: &str, remote: &str, timeout: Duration) -> Result<String, SetupError> {
        let c = self
            .command(remote)
            .map_err(|e| SetupError::new(&self.label(), e))?;
        let ran = self.exec(c, step, timeout, Stdio::null())?;
        self.succeeded(step, ran)
    }

    fn succeeded(&self, step: &str, ran: Ran) -> Result<String, SetupError> {
        if ran.status.success() {
            return Ok(ran.stdout);
        }
        Err(SetupError::new(
            &self.label(),
            SetupProblem::Failed {
                step: step.to_string(),
                status: ran.status,
                stderr: ran.stderr,
            },
        ))
    }

    /// Copies the local file `local` to `remote` on the target (within
    /// `timeout` per try); says how. On ssh it tries scp where the path is
    /// plain ([`scp_safe`]) and streams the file through `ssh ... 'cat >
    /// PATH'` otherwise, or when scp failed (a target without an SFTP
    /// server: dropbear, minimal images); both failures are reported.
    pub fn copy(
        &self,
        local: &Path,
        remote: &str,
        timeout: Duration,
    ) -> Result<String, SetupError> {
        let place = self.label();
        let open = || {
            std::fs::File::open(local)
                .map(Stdio::from)
                .map_err(|source| {
                    SetupError::new(
                        &place,
                        SetupProblem::ReadLocal {
                            path: local.to_path_buf(),
                            source,
                        },
                    )
                })
        };
        let tool = |e: EmptyTool| SetupError::new(&place, CommandError::Tool(e));
        match self {
            Remote::Vm(_) => Err(SetupError::new(&place, SetupProblem::GuestCopy)),
            Remote::Adb { serial } => {
                let mut c = Remote::adb(serial).map_err(tool)?;
                c.arg("push").arg(local).arg(remote);
                let ran = self.exec(c, "copy (adb push)", timeout, Stdio::null())?;
                self.succeeded("copy (adb push)", ran)
                    .map(|_| "adb push".into())
            }
            Remote::Ssh { port, .. } => {
                let cat = format!("cat > {}", sh_quote(remote));
                let by_cat = |how: String| -> Result<String, SetupError> {
                    let c = self.command(&cat).map_err(|e| SetupError::new(&place, e))?;
                    let ran = self.exec(c, "copy (ssh cat)", timeout, open()?)?;
                    self.succeeded("copy (ssh cat)", ran).map(|_| how)
                };
                if !scp_safe(remote) {
                    return by_cat(
                        "ssh (cat; the path has characters scp would hand to the target's shell)"
                            .into(),
                    );
                }
                let words = Remote::tool("READPATH_SCP_COMMAND", "scp").map_err(tool)?;
                let mut c = Command::new(&words[0]);
                c.args(&words[1..]);
                c.args(["-q", "-o", "BatchMode=yes"]);
                if let Some(p) = port {
                    c.args(["-P", &p.to_string()]);
                }
                c.arg(local).arg(self.scp_dest(remote));
                let scp = self
                    .exec(c, "copy (scp)", timeout, Stdio::null())
                    .and_then(|ran| self.succeeded("copy (scp)", ran));
                match scp {
                    Ok(_) => Ok("scp".into()),
                    Err(e) if e.kind() == SetupFailure::Interrupted => Err(e),
                    Err(first) => {
                        let why = first.problem.to_string();
                        by_cat(format!("ssh (cat), as {why}")).map_err(|second| {
                            SetupError::new(
                                &place,
                                SetupProblem::BothWays {
                                    first: Box::new(first.problem),
                                    second: Box::new(second.problem),
                                },
                            )
                        })
                    }
                }
            }
        }
    }
}

/// The stop signal received, if any.
fn stopped() -> Option<i32> {
    let sig = crate::sys::stop_signal();
    (sig != 0).then_some(sig)
}

fn interrupted(place: &str, step: &str, sig: i32) -> SetupError {
    SetupError::new(
        place,
        SetupProblem::Interrupted {
            step: step.to_string(),
            signal: sig,
        },
    )
}

/// `30 s`, `1.5 s`.
fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// The SHA-256 of a file, hex.
fn file_sha256(path: &Path) -> std::io::Result<String> {
    use sha2::Digest;
    let mut f = std::fs::File::open(path)?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// The SHA-256 of `path` on the target (coreutils, toybox or busybox), or
/// None where it cannot hash it (none of them, no such file).
fn remote_sha256(
    remote: &Remote,
    path: &str,
    timeout: Duration,
) -> Result<Option<String>, SetupError> {
    let q = sh_quote(path);
    let line = format!(
        "sha256sum {q} 2>/dev/null || toybox sha256sum {q} 2>/dev/null || busybox sha256sum {q}"
    );
    match remote.step("sha256sum", &line, timeout) {
        Ok(out) => Ok(out
            .split_whitespace()
            .next()
            .map(str::to_ascii_lowercase)
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))),
        Err(e) if e.kind() == SetupFailure::Failed => Ok(None),
        Err(e) => Err(e),
    }
}

/// `s` quoted for a POSIX shell.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `a` is older than `b` (dotted numeric versions).
pub fn older(a: &str, b: &str) -> bool {
    let parse = |v: &str| -> Vec<u64> {
        v.split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().unwrap_or(0))
            .collect()
    };
    parse(a) < parse(b)
}

/// The local binary that runs on `arch`: `READPATH_AGENT_BINARY`, else
/// this very binary when the architecture is the same (it needs the
/// target's libc to be as new as this machine's: a static build in
/// `READPATH_AGENT_BINARY` avoids that), else the static musl build for
/// that architecture beside this one's target dir
/// (`target/aarch64-unknown-linux-musl/release/readpath`).
pub fn local_binary(arch: &str) -> Result<PathBuf, LocalBinaryError> {
    if let Some(chosen) = crate::lab::vm::agent_binary_override() {
        return Ok(chosen?);
    }
    let exe = std::env::current_exe().map_err(crate::lab::vm::AgentBinaryError::CurrentExe)?;
    if arch == std::env::consts::ARCH {
        return Ok(exe);
    }
    let triple = format!("{arch}-unknown-linux-musl");
    if let Some(target) = exe.parent().and_then(Path::parent) {
        let musl = target.join(&triple).join("release").join("readpath");
        if musl.is_file() {
            return Ok(musl);
        }
    }
    Err(LocalBinaryError::NoBuild {
        arch: arch.to_string(),
        triple,
    })
}

/// Makes sure a readpath no older than this one is at `dir/readpath` on the
/// target (`dir` as given by `--remote-dir`, resolved with
/// [`Remote::resolve_path`]), copying it there when missing, older, another
/// build of the same version, or `refresh`; returns its path and what was
/// done, for the user. A copy goes to a temporary name in `dir`, its
/// SHA-256 is checked there (where the target cannot hash, its size and
/// `--version`, and the message says so), and only then is it moved into
/// place: a damaged copy is removed and never run.
pub fn prepare(remote: &Remote, dir: &str, refresh: bool) -> Result<(String, String), SetupError> {
    let place = remote.label();
    if let Remote::Vm(v) = remote {
        return prepare_vm(v, &place);
    }
    let failed = |problem: SetupProblem| SetupError::new(&place, problem);
    let t = Timeouts::from_env().map_err(|e| SetupError::new(&place, e))?;
    let dir = remote
        .resolve_path("--remote-dir", dir)
        .map_err(|e| SetupError::new(&place, e))?;
    let arch = remote
        .step("uname -m", "uname -m", t.setup)?
        .trim()
        .to_string();
    if arch.is_empty() || !word_ok(&arch, &[]) {
        return Err(failed(SetupProblem::Arch { arch }));
    }
    let bin = format!("{dir}/readpath");
    let q = sh_quote(&bin);
    let theirs = installed_version(remote, &q, t.setup)?;
    let ours = env!("CARGO_PKG_VERSION");
    // The same version may be another build (a developer's), or not ours
    // at all: compare the bytes; where the target cannot hash them, they
    // cannot be trusted, and this binary is copied (and checked) again.
    let local = local_binary(&arch).map_err(|e| SetupError::new(&place, e));
    let mut differs = false;
    let mut unhashed = false;
    if theirs.as_deref() == Some(ours)
        && let Ok(l) = &local
        && let Ok(mine) = file_sha256(l)
    {
        match remote_sha256(remote, &bin, t.setup)? {
            Some(h) => differs = h != mine,
            None => unhashed = true,
        }
    }
    let copy = refresh || differs || unhashed || theirs.as_deref().is_none_or(|v| older(v, ours));
    if !copy {
        return Ok((
            bin,
            format!(
                "{place}: {arch}, readpath {} there",
                theirs.unwrap_or_default()
            ),
        ));
    }
    let local = local?;
    let read = |source| {
        failed(SetupProblem::ReadLocal {
            path: local.clone(),
            source,
        })
    };
    let mine = file_sha256(&local).map_err(read)?;
    let size = std::fs::metadata(&local).map_err(read)?.len();
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = format!("{dir}/readpath.tmp-{}-{nonce:08x}", std::process::id());
    let qt = sh_quote(&tmp);
    remote.step("mkdir", &format!("mkdir -p {}", sh_quote(&dir)), t.setup)?;
    // From here on a failure removes the copy (a stop signal leaves it:
    // nothing more is run then).
    let remove = |e: SetupError| {
        if e.kind() != SetupFailure::Interrupted {
            let _ = remote.step("removing the copy", &format!("rm -f {qt}"), t.setup);
        }
        e
    };
    let how = remote.copy(&local, &tmp, t.copy(size)).map_err(remove)?;
    let checked = check_copy(remote, &tmp, &local, &mine, size, t.setup, &remove)?;
    remote
        .step(
            "install (chmod, mv)",
            &format!("chmod 755 {qt} && mv -f {qt} {q}"),
            t.setup,
        )
        .map_err(remove)?;
    Ok((
        bin,
        format!(
            "{place}: {arch}, copied readpath {ours} there ({}, by {how}; {checked}{})",
            local.display(),
            match theirs {
                Some(v) if differs => format!("; it had another build of {v}"),
                Some(v) if unhashed => format!("; it had {v}, which could not be hashed there"),
                Some(v) => format!("; it had {v}"),
                None => String::new(),
            }
        ),
    ))
}

/// A lab guest made ready: its kernel found, its initramfs (with this
/// readpath) and disk made or reused; what was done, for the user.
fn prepare_vm(v: &crate::lab::VmRemote, place: &str) -> Result<(String, String), SetupError> {
    let failed = |e| SetupError::new(place, SetupProblem::Guest(e));
    let mut made = Vec::new();
    let spec = crate::lab::spec_for(v, &mut |m| {
        crate::invocation::say(&format!("readpath: {m}"))
    })
    .map_err(failed)?;
    crate::lab::vm::prepare(&crate::lab::data_dir(), &spec, None, &mut |m| {
        made.push(m.to_string())
    })
    .map_err(failed)?;
    Ok((
        "/bin/readpath".into(),
        format!(
            "{place}: Linux {} ({}) under QEMU ({}), {} vCPUs (one socket, one last-level cache), {} MiB, virtio-blk with {}{}",
            spec.kernel.info.release,
            spec.kernel.info.source,
            spec.accel.name(),
            spec.cpus,
            spec.memory_mib,
            match spec.queues {
                Some(1) => "one queue (every completion on one vCPU, as a phone's UFS)".to_string(),
                Some(n) => format!("{n} queues"),
                None => format!("{} queues (each vCPU completes its own reads)", spec.cpus),
            },
            if made.is_empty() {
                String::new()
            } else {
                format!("; {}", made.join("; "))
            }
        ),
    ))
}

/// The version of the readpath at `q` (the binary's path, quoted for the
/// shell) on the target, made printable; none where there is none or it
/// fails to run (a damaged one).
fn installed_version(
    remote: &Remote,
    q: &str,
    setup: Duration,
) -> Result<Option<String>, SetupError> {
    // A binary that fails (a damaged one) counts as none; a hang does not.
    let there = match remote.step(
        "readpath --version",
        &format!("if [ -x {q} ]; then {q} --version; fi"),
        setup,
    ) {
        Ok(out) => out,
        Err(e) if e.kind() == SetupFailure::Failed => String::new(),
        Err(e) => return Err(e),
    };
    Ok(there
        .split_whitespace()
        .nth(1)
        .filter(|_| there.starts_with("readpath "))
        .map(|v| printable(v, false)))
}

/// Checks the copy at `tmp` against `local` (SHA-256 `mine`, `size`
/// bytes): by its SHA-256 there or, where the target cannot hash, by its
/// size and `--version`; says how it was checked. A damaged copy goes
/// through `remove`.
fn check_copy(
    remote: &Remote,
    tmp: &str,
    local: &Path,
    mine: &str,
    size: u64,
    setup: Duration,
    remove: &dyn Fn(SetupError) -> SetupError,
) -> Result<String, SetupError> {
    let place = remote.label();
    let failed = |problem: SetupProblem| SetupError::new(&place, problem);
    let ours = env!("CARGO_PKG_VERSION");
    let qt = sh_quote(tmp);
    let ok = match remote_sha256(remote, tmp, setup).map_err(remove)? {
        Some(h) if h == mine => "its SHA-256 checked there".to_string(),
        Some(h) => {
            return Err(remove(failed(SetupProblem::Hash {
                tmp: tmp.to_string(),
                theirs: h,
                local: local.to_path_buf(),
                ours: mine.to_string(),
            })));
        }
        None => {
            // No hashing tool there: the size, then the binary's own word.
            let theirs_size = remote
                .step("wc -c", &format!("wc -c < {qt}"), setup)
                .map_err(remove)?;
            if theirs_size.trim().parse::<u64>().ok() != Some(size) {
                return Err(remove(failed(SetupProblem::Size {
                    tmp: tmp.to_string(),
                    said: theirs_size,
                    local: local.to_path_buf(),
                    size,
                })));
            }
            let v = remote
                .step(
                    "the copy's --version",
                    &format!("chmod 755 {qt} && {qt} --version"),
                    setup,
                )
                .map_err(remove)?;
            if !v.starts_with(&format!("readpath {ours}")) {
                return Err(remove(failed(SetupProblem::Version {
                    tmp: tmp.to_string(),
                    said: v,
                })));
            }
            "its SHA-256 could not be checked there (no sha256sum, toybox or busybox): its size and --version were".to_string()
        }
    };
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_are_refused_by_name() {
        assert_eq!(
            Remote::parse("ssh:me@pixel:2222").unwrap(),
            Remote::Ssh {
                user: Some("me".into()),
                host: "pixel".into(),
                port: Some(2222)
            }
        );
        assert_eq!(
            Remote::parse("ssh:[::1]:22").unwrap().label(),
            "ssh:[::1]:22"
        );
        assert_eq!(Remote::parse("adb:").unwrap(), Remote::Adb { serial: None });
        assert_eq!(Remote::parse("adb:R58M").unwrap().label(), "adb:R58M");
        for bad in [
            "ssh:",
            "ssh:-oProxyCommand=x",
            "ssh:a b",
            "ssh:host:0",
            "ssh:host:70000",
            "ssh:h;rm",
            "adb:-s",
            "telnet:x",
            // Trailing junk and bracketed non-addresses.
            "ssh:[::1]junk",
            "ssh:[::1]:22junk",
            "ssh:[::1]:",
            "ssh:[nothost]",
            "ssh:[::1",
            "ssh:host:22x",
            "ssh:host:+22",
            "ssh:a@b@c",
            "ssh:@host",
        ] {
            let e = Remote::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains("--remote") && e.contains("allowed"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn ipv6_hosts_with_zones_and_ports() {
        let r = Remote::parse("ssh:me@[fe80::1%eth0]:2200").unwrap();
        assert_eq!(r.label(), "ssh:me@[fe80::1%eth0]:2200");
        let r = Remote::parse("ssh:[::1]").unwrap();
        assert_eq!(r.label(), "ssh:[::1]");
        // scp needs the brackets back (`::1:path` is ambiguous).
        assert_eq!(r.scp_dest("x/y"), "[::1]:x/y");
        let r = Remote::parse("ssh:u@h").unwrap();
        assert_eq!(r.scp_dest("x/y"), "u@h:x/y");
    }

    #[test]
    fn remote_paths_are_data_and_tilde_is_the_home() {
        for ok in [
            "/tmp/d$(touch x)",
            "a b/`c`",
            "~",
            "~/x",
            "rel/x",
            "/a/-b",
            "/é",
        ] {
            assert!(check_path(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-m777",
            "--help",
            "a\nb",
            "a\tb",
            "a\u{7f}b",
            "a\u{202e}b",
            "~root/x",
            "~x",
        ] {
            let e = check_path(bad).unwrap_err().to_string();
            assert!(
                e.contains("not a usable path") && e.contains("allowed"),
                "{bad:?}: {e}"
            );
        }
        assert!(check_path(&"a".repeat(4097)).is_err());
        let ssh = Remote::parse("ssh:h").unwrap();
        assert_eq!(ssh.resolve_path("--remote-dir", "~").unwrap(), ".");
        assert_eq!(ssh.resolve_path("--remote-dir", "~/x").unwrap(), "./x");
        // Never an option, even after the resolution.
        assert_eq!(ssh.resolve_path("--remote-dir", "~/-x").unwrap(), "./-x");
        assert_eq!(ssh.resolve_path("--remote-dir", "rel").unwrap(), "rel");
        let e = ssh
            .resolve_path("--remote-data-dir", "--help")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--remote-data-dir \"--help\""), "{e}");
        let adb = Remote::parse("adb:").unwrap();
        assert_eq!(
            adb.resolve_path("--remote-dir", "/data/x").unwrap(),
            "/data/x"
        );
        for bad in ["~/x", "rel"] {
            let e = adb
                .resolve_path("--remote-dir", bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("--remote-dir") && e.contains("absolute"), "{e}");
        }
        // scp gets plain paths only.
        assert!(scp_safe("./x/readpath.tmp-1-0a") && scp_safe("/data/local/tmp/r"));
        for unsafe_ in [
            "/tmp/d$(x)",
            "a b",
            "a`b`",
            "a;b",
            "a'b",
            "a*b",
            "~/x",
            "-x",
            "",
        ] {
            assert!(!scp_safe(unsafe_), "{unsafe_}");
        }
    }

    #[test]
    fn the_timeout_variable_is_checked() {
        let t = Timeouts::from_value(None).unwrap();
        assert_eq!((t.setup, t.hello), (SETUP_TIMEOUT, HELLO_TIMEOUT));
        let t = Timeouts::from_value(Some("2.5".into())).unwrap();
        assert_eq!(
            (t.setup, t.hello),
            (Duration::from_millis(2500), Duration::from_millis(2500))
        );
        for bad in ["0", "-1", "x", "", "1e9", "NaN"] {
            let e = Timeouts::from_value(Some(bad.into()))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(TIMEOUT_VAR) && e.contains("allowed 0.1..=3600"),
                "{e}"
            );
        }
        let t = Timeouts::from_value(None).unwrap();
        assert_eq!(t.copy(0), SETUP_TIMEOUT);
        assert_eq!(t.copy(10 << 20), SETUP_TIMEOUT + COPY_PER_MIB * 10);
        assert_eq!(secs(Duration::from_secs(30)), "30 s");
        assert_eq!(secs(Duration::from_millis(1500)), "1.5 s");
    }

    #[test]
    fn versions_and_quotes() {
        assert!(older("0.1.0", "0.2.0"));
        assert!(older("0.9.9", "0.10.0"));
        assert!(!older("0.2.0", "0.2.0"));
        assert_eq!(sh_quote("a'b"), "'a'\\''b'");
    }

    #[test]
    fn the_ssh_command_is_batch_mode_with_the_port() {
        let r = Remote::parse("ssh:u@h:2200").unwrap();
        let c = r.command("uname -m").unwrap();
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let tail = ["-o", "BatchMode=yes", "-p", "2200", "u@h", "--", "uname -m"];
        assert!(args.ends_with(&tail.map(String::from)), "{args:?}");
    }
}
