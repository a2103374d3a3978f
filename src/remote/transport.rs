//! Reaching a target with the tools its users already have: the system's
//! `ssh` and `scp` (their config, keys and agent) or `adb`. No server of
//! our own. Before the agent starts, the target's architecture (`uname
//! -m`) and readpath version are checked, and a matching binary is copied
//! there when it is missing or older. The commands can be replaced, as
//! git's GIT_SSH_COMMAND is: `READPATH_SSH_COMMAND`, `READPATH_SCP_COMMAND`,
//! `READPATH_ADB` (split at whitespace; readpath appends its arguments).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one setup command (uname, version, copy) may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);

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
}

fn word_ok(s: &str, extra: &[char]) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.len() <= 255
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c) || extra.contains(&c))
}

impl Remote {
    /// Reads `ssh:[user@]host[:port]` or `adb:[serial]`.
    pub fn parse(spec: &str) -> Result<Remote, String> {
        let bad = |why: &str| {
            format!(
                "--remote {:?}: {why}; allowed: ssh:[user@]host[:port] or adb:[serial]",
                crate::output::format::printable(spec, false)
            )
        };
        if let Some(rest) = spec.strip_prefix("ssh:") {
            let (user, hostport) = match rest.split_once('@') {
                Some((u, h)) => (Some(u), h),
                None => (None, rest),
            };
            if let Some(u) = user
                && !word_ok(u, &[])
            {
                return Err(bad("the user has characters a login cannot have"));
            }
            let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
                let (h, after) = v6
                    .split_once(']')
                    .ok_or_else(|| bad("an IPv6 address needs its closing ]"))?;
                (h.to_string(), after.strip_prefix(':'))
            } else {
                match hostport.rsplit_once(':') {
                    Some((h, p)) => (h.to_string(), Some(p)),
                    None => (hostport.to_string(), None),
                }
            };
            let v6 = hostport.starts_with('[');
            if host.is_empty() {
                return Err(bad("no host given"));
            }
            if !(word_ok(&host, if v6 { &[':'] } else { &[] })) {
                return Err(bad("the host has characters a host name cannot have"));
            }
            let port = match port {
                None => None,
                Some(p) => match p.parse::<u16>() {
                    Ok(n) if n > 0 => Some(n),
                    _ => return Err(bad(&format!("port {p:?} is not 1..=65535"))),
                },
            };
            return Ok(Remote::Ssh {
                user: user.map(str::to_string),
                host,
                port,
            });
        }
        if let Some(serial) = spec.strip_prefix("adb:") {
            if !serial.is_empty() && !word_ok(serial, &[':']) {
                return Err(bad("the serial has characters a device serial cannot have"));
            }
            return Ok(Remote::Adb {
                serial: (!serial.is_empty()).then(|| serial.to_string()),
            });
        }
        Err(bad("unknown transport"))
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
        }
    }

    /// Where readpath keeps its binary on the target by default.
    pub fn default_dir(&self) -> &'static str {
        match self {
            Remote::Ssh { .. } => ".cache/readpath-agent",
            Remote::Adb { .. } => "/data/local/tmp/readpath",
        }
    }

    /// The data dir the agent is given by default (None: the target's own
    /// default, `~/.cache/readpath`; Android has no such home).
    pub fn default_data_dir(&self, dir: &str) -> Option<String> {
        match self {
            Remote::Ssh { .. } => None,
            Remote::Adb { .. } => Some(format!("{dir}/data")),
        }
    }

    fn tool(var: &str, default: &str) -> Result<Vec<String>, String> {
        let line = std::env::var(var).unwrap_or_else(|_| default.to_string());
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        if words.is_empty() {
            return Err(format!("{var} is empty"));
        }
        Ok(words)
    }

    /// `adb [-s SERIAL]`, from `READPATH_ADB`.
    fn adb(serial: &Option<String>) -> Result<Command, String> {
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
            Remote::Adb { .. } => String::new(),
        }
    }

    /// The command that runs `remote` (a shell command line) on the target.
    pub fn command(&self, remote: &str) -> Result<Command, String> {
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
        }
    }

    /// Runs `remote` on the target and returns its stdout; a failure gives
    /// its stderr.
    pub fn run(&self, remote: &str) -> Result<String, String> {
        let c = self.command(remote)?;
        self.capture(c, remote)
    }

    fn capture(&self, mut c: Command, what: &str) -> Result<String, String> {
        let program = c.get_program().to_string_lossy().into_owned();
        let mut child = c
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: running {program}: {e}", self.label()))?;
        let mut out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let t_out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = (&mut out).take(1 << 20).read_to_string(&mut s);
            s
        });
        let t_err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = (&mut err).take(1 << 16).read_to_string(&mut s);
            s
        });
        let start = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
                break st;
            }
            if start.elapsed() > SETUP_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{}: `{what}` took longer than {} s",
                    self.label(),
                    SETUP_TIMEOUT.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = t_out.join().unwrap_or_default();
        let stderr = t_err.join().unwrap_or_default();
        if !status.success() {
            return Err(format!(
                "{}: `{what}` failed ({status}): {}",
                self.label(),
                crate::output::format::printable(stderr.trim(), false)
            ));
        }
        Ok(stdout)
    }

    /// Copies the local file `local` to `remote` on the target.
    pub fn copy(&self, local: &Path, remote: &str) -> Result<(), String> {
        let c = match self {
            Remote::Ssh { port, .. } => {
                let words = Remote::tool("READPATH_SCP_COMMAND", "scp")?;
                let mut c = Command::new(&words[0]);
                c.args(&words[1..]);
                c.args(["-q", "-o", "BatchMode=yes"]);
                if let Some(p) = port {
                    c.args(["-P", &p.to_string()]);
                }
                c.arg(local).arg(format!("{}:{remote}", self.dest()));
                c
            }
            Remote::Adb { serial } => {
                let mut c = Remote::adb(serial)?;
                c.arg("push").arg(local).arg(remote);
                c
            }
        };
        self.capture(c, &format!("copy {} to {remote}", local.display()))
            .map(|_| ())
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
pub fn local_binary(arch: &str) -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("READPATH_AGENT_BINARY") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("READPATH_AGENT_BINARY={}: not a file", p.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
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
    Err(format!(
        "no readpath binary for {arch} at hand: build one with `rustup target add {triple} && cargo build --release --target {triple}` (README: Static builds for targets), or set READPATH_AGENT_BINARY=PATH"
    ))
}

/// Makes sure a readpath no older than this one is at `dir/readpath` on the
/// target (copying it there when missing, older, another build of the same
/// version, or `refresh`); returns its path and what was done, for the user.
pub fn prepare(remote: &Remote, dir: &str, refresh: bool) -> Result<(String, String), String> {
    let arch = remote.run("uname -m")?.trim().to_string();
    if arch.is_empty() || !word_ok(&arch, &[]) {
        return Err(format!(
            "{}: `uname -m` said {arch:?}, not an architecture",
            remote.label()
        ));
    }
    let bin = format!("{dir}/readpath");
    let q = sh_quote(&bin);
    let there = remote
        .run(&format!("if [ -x {q} ]; then {q} --version; fi"))
        .unwrap_or_default();
    let ours = env!("CARGO_PKG_VERSION");
    let theirs = there
        .split_whitespace()
        .nth(1)
        .filter(|_| there.starts_with("readpath "))
        .map(str::to_string);
    // The same version may be another build (a developer's): compare the
    // bytes where the target can hash them (coreutils or toybox).
    let local = local_binary(&arch).map_err(|e| format!("{}: {e}", remote.label()));
    let mut differs = false;
    if theirs.as_deref() == Some(ours)
        && let Ok(l) = &local
        && let Ok(mine) = file_sha256(l)
        && let Ok(out) = remote.run(&format!(
            "sha256sum {q} 2>/dev/null || toybox sha256sum {q}"
        ))
        && let Some(h) = out.split_whitespace().next()
    {
        differs = h.len() == 64 && h != mine;
    }
    let copy = refresh || differs || theirs.as_deref().is_none_or(|v| older(v, ours));
    if !copy {
        return Ok((
            bin,
            format!(
                "{}: {arch}, readpath {} there",
                remote.label(),
                theirs.unwrap_or_default()
            ),
        ));
    }
    let local = local?;
    let tmp = format!("{bin}.tmp-{}", std::process::id());
    remote.run(&format!("mkdir -p {}", sh_quote(dir)))?;
    remote.copy(&local, &tmp)?;
    remote.run(&format!(
        "chmod 755 {t} && mv -f {t} {q}",
        t = sh_quote(&tmp)
    ))?;
    Ok((
        bin,
        format!(
            "{}: {arch}, copied readpath {ours} there ({}{})",
            remote.label(),
            local.display(),
            match theirs {
                Some(v) if differs => format!("; it had another build of {v}"),
                Some(v) => format!("; it had {v}"),
                None => String::new(),
            }
        ),
    ))
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
        ] {
            let e = Remote::parse(bad).unwrap_err();
            assert!(
                e.contains("--remote") && e.contains("allowed"),
                "{bad}: {e}"
            );
        }
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
