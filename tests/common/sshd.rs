//! A real OpenSSH server for the tests of `--remote ssh:...`: readpath runs
//! the system's `ssh` and `scp`, so its remote path is only tested against a
//! real sshd. [`start`] runs `/usr/sbin/sshd` in the foreground as the
//! current user, listening on 127.0.0.1 only on a random free port, with a
//! host key, a user key, `authorized_keys`, both configs and `known_hosts`
//! in a temp dir; `ssh_command` and `scp_command` (`ssh -F CONFIG`, `scp -F
//! CONFIG`: what `READPATH_SSH_COMMAND` and `READPATH_SCP_COMMAND` take) use
//! only that dir, never `~/.ssh` or an agent, and check the host key
//! strictly. sshd also serves `Subsystem sftp internal-sftp`, so plain
//! `scp` (SFTP since OpenSSH 9) and `scp -O` (the legacy protocol) both
//! work; [`start_without_sftp`] leaves it out, as dropbear and minimal
//! images do, so only `scp -O` works there. Dropping the harness ends every session's processes and sshd
//! itself, and reaps it. Without sshd (or the OpenSSH client tools) it
//! prints why and returns `None`, except under CI (`CI` set), where
//! `.ci/run` installs them and their absence is a failure.
//!
//! Include it with `#[path = "common/sshd.rs"] mod sshd;`.

use std::fs;
use std::io::{ErrorKind, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where sshd is looked for (it must be run by an absolute path).
const SSHD_PATHS: &[&str] = &["/usr/sbin/sshd", "/usr/local/sbin/sshd"];

/// How long sshd may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How many ports are tried when sshd cannot bind the one picked.
const PORT_ATTEMPTS: usize = 5;

/// A running sshd on 127.0.0.1 and the client command lines that reach it.
pub struct Sshd {
    /// The port sshd listens on (127.0.0.1 only).
    pub port: u16,
    /// The user to log in as: the current one (`id -un`).
    pub user: String,
    /// `ssh -F CONFIG`: append `-p PORT`, the destination, the command.
    pub ssh_command: String,
    /// `scp -F CONFIG`: append `-P PORT`, the source, `user@127.0.0.1:PATH`.
    pub scp_command: String,
    dir: tempfile::TempDir,
    child: Child,
}

impl Sshd {
    /// `user@127.0.0.1:PORT`, the destination in readpath's `ssh:` form.
    pub fn dest(&self) -> String {
        format!("{}@127.0.0.1:{}", self.user, self.port)
    }

    /// `ssh:user@127.0.0.1:PORT`, the argument of `--remote`.
    pub fn spec(&self) -> String {
        format!("ssh:{}", self.dest())
    }

    /// sshd's process id (the listener; sessions are its children).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The temp dir holding the keys, the configs and sshd's log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// Starts sshd, or says why it cannot and returns `None` (a panic under CI).
pub fn start() -> Option<Sshd> {
    start_with(true)
}

/// [`start`], without an SFTP server: plain `scp` (SFTP since OpenSSH 9)
/// fails there as on a target without `sftp-server`.
pub fn start_without_sftp() -> Option<Sshd> {
    start_with(false)
}

fn start_with(sftp: bool) -> Option<Sshd> {
    let Some(sshd) = SSHD_PATHS.iter().map(Path::new).find(|p| p.is_file()) else {
        return missing("sshd", "openssh-server");
    };
    for tool in ["ssh", "scp", "ssh-keygen"] {
        if !on_path(tool) {
            return missing(tool, "openssh-client");
        }
    }
    let user = current_user();
    let dir = temp_dir();
    let d = dir.path();

    let host_key = d.join("host_ed25519");
    let user_key = d.join("id_ed25519");
    keygen(&host_key, "readpath-test-host");
    keygen(&user_key, "readpath-test-user");
    let authorized = d.join("authorized_keys");
    write_private(&authorized, &read(&user_key.with_extension("pub")));
    let host_pub = read(&host_key.with_extension("pub"));
    let host_pub = host_pub
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");

    // As root, sshd chroots its unprivileged children into this empty dir
    // and refuses to start without it; as anyone else it is not used.
    let privsep = Path::new("/run/sshd");
    if is_root() && !privsep.exists() {
        if let Err(e) = fs::create_dir_all(privsep) {
            panic!("sshd harness: cannot create {}: {e}", privsep.display());
        }
        let _ = fs::set_permissions(privsep, fs::Permissions::from_mode(0o755));
    }

    let server_config = d.join("sshd_config");
    let client_config = d.join("ssh_config");
    let known_hosts = d.join("known_hosts");
    let pid_file = d.join("sshd.pid");
    let log = d.join("sshd.log");
    write_private(
        &client_config,
        &format!(
            "Host *\n\
             \x20 IdentityFile {key}\n\
             \x20 IdentitiesOnly yes\n\
             \x20 IdentityAgent none\n\
             \x20 UserKnownHostsFile {known}\n\
             \x20 GlobalKnownHostsFile /dev/null\n\
             \x20 StrictHostKeyChecking yes\n\
             \x20 UpdateHostKeys no\n\
             \x20 CheckHostIP no\n\
             \x20 BatchMode yes\n\
             \x20 PasswordAuthentication no\n\
             \x20 KbdInteractiveAuthentication no\n\
             \x20 ForwardAgent no\n\
             \x20 ForwardX11 no\n\
             \x20 ControlMaster no\n\
             \x20 ControlPath none\n\
             \x20 ConnectTimeout 10\n\
             \x20 LogLevel ERROR\n",
            key = user_key.display(),
            known = known_hosts.display(),
        ),
    );

    let mut last_log = String::new();
    for _ in 0..PORT_ATTEMPTS {
        let port = free_port();
        write_private(&known_hosts, &format!("[127.0.0.1]:{port} {host_pub}\n"));
        write_private(
            &server_config,
            &format!(
                "Port {port}\n\
                 ListenAddress 127.0.0.1\n\
                 AddressFamily inet\n\
                 HostKey {host_key}\n\
                 PidFile {pid_file}\n\
                 AuthorizedKeysFile {authorized}\n\
                 AllowUsers {user}\n\
                 StrictModes no\n\
                 UsePAM no\n\
                 PubkeyAuthentication yes\n\
                 PasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\n\
                 PermitEmptyPasswords no\n\
                 PermitRootLogin prohibit-password\n\
                 AllowAgentForwarding no\n\
                 AllowTcpForwarding no\n\
                 X11Forwarding no\n\
                 PermitUserEnvironment no\n\
                 UseDNS no\n\
                 PrintMotd no\n\
                 PrintLastLog no\n\
                 {subsystem}\
                 LogLevel ERROR\n",
                host_key = host_key.display(),
                pid_file = pid_file.display(),
                authorized = authorized.display(),
                subsystem = if sftp {
                    "Subsystem sftp internal-sftp\n"
                } else {
                    ""
                },
            ),
        );
        let stderr = match fs::File::create(&log) {
            Ok(f) => f,
            Err(e) => panic!("sshd harness: cannot create {}: {e}", log.display()),
        };
        let child = Command::new(sshd)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&server_config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => panic!("sshd harness: cannot run {}: {e}", sshd.display()),
        };
        match wait_ready(&mut child, port) {
            Ready::Yes => {
                return Some(Sshd {
                    port,
                    user,
                    ssh_command: format!("ssh -F {}", client_config.display()),
                    scp_command: format!("scp -F {}", client_config.display()),
                    dir,
                    child,
                });
            }
            Ready::Exited(status) => {
                last_log = fs::read_to_string(&log).unwrap_or_default();
                reap(&mut child);
                if last_log.contains("Address already in use") {
                    continue; // someone took the port after we let it go
                }
                panic!(
                    "sshd harness: {} exited ({status}) before accepting connections; its stderr:\n{last_log}",
                    sshd.display()
                );
            }
            Ready::TimedOut(why) => {
                stop(&mut child);
                last_log = fs::read_to_string(&log).unwrap_or_default();
                panic!(
                    "sshd harness: sshd did not accept connections on 127.0.0.1:{port} within {READY_TIMEOUT:?} ({why}); its stderr:\n{last_log}"
                );
            }
        }
    }
    panic!(
        "sshd harness: sshd could not bind a free port in {PORT_ATTEMPTS} tries; its last stderr:\n{last_log}"
    );
}

/// The skip (or, under CI, fail) rule for a missing OpenSSH tool.
fn missing(tool: &str, package: &str) -> Option<Sshd> {
    assert!(
        std::env::var_os("CI").is_none(),
        "{tool} missing: .ci/run installs {package}"
    );
    println!("skipping: no {tool} (apt-get install {package})");
    None
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn current_user() -> String {
    match Command::new("id").arg("-un").output() {
        Ok(o) if o.status.success() => {
            let user = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if user.is_empty() {
                panic!("sshd harness: `id -un` printed no user name");
            }
            user
        }
        Ok(o) => panic!(
            "sshd harness: `id -un` failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("sshd harness: cannot run `id -un`: {e}"),
    }
}

/// A 0700 temp dir whose path has no whitespace (the command lines are
/// split on it).
fn temp_dir() -> tempfile::TempDir {
    let mut base = std::env::temp_dir();
    if base.to_string_lossy().contains(char::is_whitespace) {
        base = PathBuf::from("/tmp");
    }
    let dir = match tempfile::Builder::new()
        .prefix("readpath-sshd")
        .tempdir_in(&base)
    {
        Ok(d) => d,
        Err(e) => panic!(
            "sshd harness: cannot create a temp dir in {}: {e}",
            base.display()
        ),
    };
    if let Err(e) = fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)) {
        panic!("sshd harness: cannot chmod {}: {e}", dir.path().display());
    }
    dir
}

/// An ed25519 key pair without a passphrase: `path` (0600) and `path.pub`.
fn keygen(path: &Path, comment: &str) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "sshd harness: ssh-keygen failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("sshd harness: cannot run ssh-keygen: {e}"),
    }
    if let Err(e) = fs::set_permissions(path, fs::Permissions::from_mode(0o600)) {
        panic!("sshd harness: cannot chmod {}: {e}", path.display());
    }
}

fn read(path: &Path) -> String {
    match fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => panic!("sshd harness: cannot read {}: {e}", path.display()),
    }
}

/// Writes `text` to `path` with mode 0600.
fn write_private(path: &Path, text: &str) {
    if let Err(e) = fs::write(path, text)
        .and_then(|()| fs::set_permissions(path, fs::Permissions::from_mode(0o600)))
    {
        panic!("sshd harness: cannot write {}: {e}", path.display());
    }
}

/// A port that was free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    match TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).and_then(|l| l.local_addr()) {
        Ok(a) => a.port(),
        Err(e) => panic!("sshd harness: cannot bind 127.0.0.1:0 to pick a port: {e}"),
    }
}

enum Ready {
    Yes,
    Exited(std::process::ExitStatus),
    TimedOut(String),
}

/// Waits until `child` is alive and an SSH banner comes from the port.
fn wait_ready(child: &mut Child, port: u16) -> Ready {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut why = String::from("no attempt");
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ready::Exited(status),
            Ok(None) => {}
            Err(e) => return Ready::TimedOut(format!("cannot wait for sshd: {e}")),
        }
        match banner(addr) {
            // A banner from someone else who took the port is not enough:
            // sshd must also still be running (it exits if it cannot bind).
            Ok(b) if b.starts_with("SSH-") => {
                if let Ok(None) = child.try_wait() {
                    return Ready::Yes;
                }
            }
            Ok(b) => why = format!("not an SSH banner: {b:?}"),
            Err(e) => why = e.to_string(),
        }
        if Instant::now() >= deadline {
            return Ready::TimedOut(format!("last attempt: {why}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The first line the server at `addr` sends.
fn banner(addr: SocketAddr) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while buf.len() < 255 {
        match s.read(&mut byte) {
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => buf.push(byte[0]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(String::from_utf8_lossy(&buf).trim_end().to_string())
}

/// Ends sshd and everything it started, and reaps sshd: the sessions'
/// own processes (the commands they run) are killed first, so each
/// session's sshd sees its command end, closes, and is reaped by its
/// parent; what is still there after a bounded wait is killed; then the
/// listener gets SIGTERM (SIGKILL if it lingers) and is reaped.
fn stop(child: &mut Child) {
    let pid = child.id() as libc::pid_t;
    if let Ok(None) = child.try_wait() {
        for (p, comm) in descendants(pid) {
            if comm != "sshd" {
                signal(p, libc::SIGKILL);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        while !descendants(pid).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        for (p, _) in descendants(pid) {
            signal(p, libc::SIGKILL);
        }
        signal(pid, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(3);
        while let Ok(None) = child.try_wait() {
            if Instant::now() >= deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    reap(child);
}

fn reap(child: &mut Child) {
    let _ = child.wait();
}

/// Sends `sig` to `pid`, a process this harness started (sshd or one of
/// its descendants); never to a group, 0, -1 or init.
fn signal(pid: libc::pid_t, sig: libc::c_int) {
    if pid > 1 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid, sig) };
    }
}

/// The live (not zombie) descendants of `root`: (pid, comm).
fn descendants(root: libc::pid_t) -> Vec<(libc::pid_t, String)> {
    let mut procs = Vec::new(); // (pid, ppid, comm)
    if let Ok(entries) = fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ppid ...; comm may hold spaces and parens.
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            let comm = stat[open + 1..close].to_string();
            let mut rest = stat[close + 1..].split_whitespace();
            let state = rest.next().unwrap_or("");
            let Some(ppid) = rest.next().and_then(|s| s.parse::<libc::pid_t>().ok()) else {
                continue;
            };
            if state != "Z" && state != "X" {
                procs.push((pid, ppid, comm));
            }
        }
    }
    let mut out: Vec<(libc::pid_t, String)> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, ppid, comm) in &procs {
            if *ppid == parent && !out.iter().any(|(p, _)| p == pid) {
                out.push((*pid, comm.clone()));
                frontier.push(*pid);
            }
        }
    }
    out
}
