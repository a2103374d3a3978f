//! The sshd harness (`tests/common/sshd.rs`) that the `--remote ssh:...`
//! tests stand on, checked on its own: its `ssh_command` runs a command on
//! 127.0.0.1 as the current user (`uname -m` is this build's arch), its
//! `scp_command` copies a file there by SFTP (OpenSSH 9's default) and, with
//! `-O`, by the legacy protocol (and, started without SFTP, only with
//! `-O`, as on dropbear or a minimal image), neither touches `~/.ssh`, sshd listens on
//! 127.0.0.1 only, and dropping the harness leaves none of its processes
//! running, an open session's included. Skips, saying why, without sshd;
//! fails under CI.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

#[path = "common/sshd.rs"]
mod sshd;
use sshd::Sshd;

/// `cmd` (a command line split on whitespace, as readpath splits
/// `READPATH_SSH_COMMAND`) with `args` appended.
fn command(cmd: &str, args: &[&str]) -> Command {
    let mut words = cmd.split_whitespace();
    let mut c = Command::new(words.next().unwrap());
    c.args(words).args(args).stdin(Stdio::null());
    c
}

/// Runs `remote` on the harness's sshd with its `ssh_command`.
fn ssh(s: &Sshd, remote: &[&str]) -> Output {
    let port = s.port.to_string();
    let login = format!("{}@127.0.0.1", s.user);
    let mut args = vec!["-p", &port, &login];
    args.extend_from_slice(remote);
    command(&s.ssh_command, &args).output().unwrap()
}

/// Copies `local` to `remote` with the harness's `scp_command` and `extra`.
fn scp(s: &Sshd, extra: &[&str], local: &Path, remote: &Path) -> Output {
    let port = s.port.to_string();
    let local = local.to_str().unwrap();
    let to = format!("{}@127.0.0.1:{}", s.user, remote.display());
    let mut args = extra.to_vec();
    args.extend_from_slice(&["-P", &port, local, &to]);
    command(&s.scp_command, &args).output().unwrap()
}

fn ok(what: &str, o: &Output) -> String {
    assert!(
        o.status.success(),
        "{what} failed ({}): stdout {:?} stderr {:?}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// What is in `~/.ssh` (names and modification times), or `None` without it.
fn dot_ssh() -> Option<Vec<(String, Option<SystemTime>)>> {
    let home = PathBuf::from(std::env::var_os("HOME")?);
    let entries = fs::read_dir(home.join(".ssh")).ok()?;
    let mut v: Vec<_> = entries
        .flatten()
        .map(|e| {
            let mtime = e.metadata().and_then(|m| m.modified()).ok();
            (e.file_name().to_string_lossy().into_owned(), mtime)
        })
        .collect();
    v.sort();
    Some(v)
}

/// A process: its pid and start time (so a reused pid is not mistaken
/// for it), its parent, its comm.
#[derive(Debug, Clone, PartialEq)]
struct Proc {
    pid: u32,
    start: u64,
    ppid: u32,
    comm: String,
}

/// Every live (not zombie) process.
fn processes() -> Vec<Proc> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let open = stat.find('(').unwrap();
        let close = stat.rfind(')').unwrap();
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22.
        if f[0] == "Z" || f[0] == "X" {
            continue;
        }
        out.push(Proc {
            pid,
            start: f[19].parse().unwrap(),
            ppid: f[1].parse().unwrap(),
            comm: stat[open + 1..close].to_string(),
        });
    }
    out
}

/// `root` and its live descendants.
fn tree(root: u32) -> Vec<Proc> {
    let all = processes();
    let mut out: Vec<Proc> = all.iter().filter(|p| p.pid == root).cloned().collect();
    let mut i = 0;
    while i < out.len() {
        let parent = out[i].pid;
        out.extend(all.iter().filter(|p| p.ppid == parent).cloned());
        i += 1;
    }
    out
}

/// Waits (bounded) for `child` to exit; kills it if it does not.
fn wait_or_kill(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    None
}

#[test]
fn ssh_and_scp_reach_sshd_and_drop_leaves_nothing_running() {
    let ssh_before = dot_ssh();
    let Some(s) = sshd::start() else {
        return;
    };
    assert_eq!(s.dest(), format!("{}@127.0.0.1:{}", s.user, s.port));
    assert_eq!(s.spec(), format!("ssh:{}", s.dest()));

    let arch = ok("ssh uname -m", &ssh(&s, &["uname", "-m"]));
    assert_eq!(arch.trim(), std::env::consts::ARCH);

    // The "remote" is this machine: copy into a dir of our own.
    let local = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let src = local.path().join("payload");
    let text = format!(
        "readpath sshd harness {}\nsecond line\n",
        std::process::id()
    );
    fs::write(&src, &text).unwrap();
    for (how, extra) in [("sftp", &[][..]), ("legacy", &["-O"][..])] {
        let dst = remote.path().join(format!("copied-{how}"));
        ok(&format!("scp ({how})"), &scp(&s, extra, &src, &dst));
        let back = ok("ssh cat", &ssh(&s, &["cat", dst.to_str().unwrap()]));
        assert_eq!(back, text, "scp ({how}) then cat");
    }

    // A session still open when the harness is dropped must end too.
    let port = s.port.to_string();
    let login = format!("{}@127.0.0.1", s.user);
    let mut session = command(&s.ssh_command, &["-p", &port, &login, "sleep", "600"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut procs = tree(s.pid());
    while !procs.iter().any(|p| p.comm == "sleep") {
        assert!(
            Instant::now() < deadline,
            "the session's sleep never started under sshd: {procs:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
        procs = tree(s.pid());
    }
    assert_eq!(procs[0].comm, "sshd", "{procs:?}");
    let dir = s.dir().to_path_buf();
    assert!(dir.join("sshd_config").is_file());

    drop(s);
    let alive: Vec<&Proc> = {
        let now = processes();
        // The same pid and start time: the same process (its parent may
        // have changed if it was orphaned).
        procs
            .iter()
            .filter(|p| now.iter().any(|q| (q.pid, q.start) == (p.pid, p.start)))
            .collect()
    };
    assert!(alive.is_empty(), "left running after drop: {alive:?}");
    assert!(!dir.exists(), "{} left behind", dir.display());
    let status = wait_or_kill(&mut session, Duration::from_secs(5));
    assert!(
        status.is_some_and(|s| !s.success()),
        "the open session's ssh should fail once sshd is gone: {status:?}"
    );
    assert_eq!(dot_ssh(), ssh_before, "~/.ssh was touched");
}

/// This machine's addresses other than loopback ones.
fn other_addresses() -> Vec<SocketAddr> {
    let mut out = Vec::new();
    let mut ifs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into `ifs`, freed below.
    if unsafe { libc::getifaddrs(&mut ifs) } != 0 {
        return out;
    }
    let mut cur = ifs;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet
        // freed; ifa_addr is null or points at a sockaddr of its family.
        let (next, addr) = unsafe {
            let i = &*cur;
            let addr = if i.ifa_addr.is_null() {
                None
            } else {
                match i32::from((*i.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let a = &*(i.ifa_addr as *const libc::sockaddr_in);
                        let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
                        Some(SocketAddr::new(IpAddr::V4(ip), 0))
                    }
                    libc::AF_INET6 => {
                        let a = &*(i.ifa_addr as *const libc::sockaddr_in6);
                        let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
                        Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                            ip,
                            0,
                            0,
                            a.sin6_scope_id,
                        )))
                    }
                    _ => None,
                }
            };
            (i.ifa_next, addr)
        };
        if let Some(a) = addr.filter(|a| !a.ip().is_loopback()) {
            out.push(a);
        }
        cur = next;
    }
    // SAFETY: `ifs` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(ifs) };
    out
}

/// The local addresses (hex, as /proc/net/tcp* prints them) listening on `port`.
fn listening(table: &str, port: u16) -> Vec<String> {
    let text = fs::read_to_string(table).unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (addr, p) = f[1].split_once(':').unwrap();
        if f[3] == "0A" && u16::from_str_radix(p, 16).unwrap() == port {
            out.push(addr.to_string());
        }
    }
    out
}

fn refused(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err()
}

#[test]
fn sshd_listens_on_127_0_0_1_only() {
    let Some(s) = sshd::start() else {
        return;
    };
    let on = |ip: IpAddr| SocketAddr::new(ip, s.port);
    assert!(
        !refused(on(Ipv4Addr::LOCALHOST.into())),
        "127.0.0.1 refused"
    );

    // The kernel's own table: one listening socket on the port, 127.0.0.1.
    let ipv4 = listening("/proc/net/tcp", s.port);
    let ipv6 = listening("/proc/net/tcp6", s.port);
    let lo = format!("{:08X}", u32::from_ne_bytes([127, 0, 0, 1]));
    assert_eq!(ipv4, [lo], "IPv4 listeners on port {}", s.port);
    assert!(
        ipv6.is_empty(),
        "IPv6 listeners on port {}: {ipv6:?}",
        s.port
    );

    // Every 127/8 address is this host's, so 127.0.0.2 tells 127.0.0.1
    // from 0.0.0.0 even on a machine with nothing but loopback.
    assert!(
        refused(on(Ipv4Addr::new(127, 0, 0, 2).into())),
        "127.0.0.2 accepted"
    );
    assert!(refused(on(Ipv6Addr::LOCALHOST.into())), "[::1] accepted");

    let others = other_addresses();
    if others.is_empty() {
        println!("sshd_listens_on_127_0_0_1_only: no non-loopback address, only loopback checked");
    }
    for mut a in others {
        a.set_port(s.port);
        assert!(refused(a), "sshd reachable on {a}");
    }
}

#[test]
fn without_sftp_only_the_legacy_scp_copies() {
    let Some(s) = sshd::start_without_sftp() else {
        return;
    };
    let local = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let src = local.path().join("payload");
    fs::write(&src, "payload\n").unwrap();
    let dst = remote.path().join("copied");
    let o = scp(&s, &[], &src, &dst);
    assert!(
        !o.status.success(),
        "plain scp (SFTP) copied without an SFTP server"
    );
    assert!(!dst.exists());
    ok("scp -O", &scp(&s, &["-O"], &src, &dst));
    assert_eq!(fs::read_to_string(&dst).unwrap(), "payload\n");
}
