//! readpath beyond one machine, tested without a phone: the agent driven
//! over a pipe (start, apply, mark, stop; it stops when stdin closes; a
//! newer protocol is refused by name), and the client against fake
//! transports (an "ssh" that is a shell script) that say garbage or speak
//! a newer protocol. The end-to-end run over a real sshd on 127.0.0.1 is
//! in tests/remote_ssh.rs.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use readpath::remote::protocol::{self, Message, PROTOCOL};
use readpath::settings::Settings;

fn agent(data_dir: &std::path::Path) -> (Child, ChildStdin, BufReader<std::process::ChildStdout>) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .arg("--data-dir")
        .arg(data_dir)
        .arg("agent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdin = c.stdin.take().unwrap();
    let stdout = BufReader::new(c.stdout.take().unwrap());
    (c, stdin, stdout)
}

fn next(out: &mut BufReader<std::process::ChildStdout>, n: &mut usize) -> Option<Message> {
    let mut line = String::new();
    if out.read_line(&mut line).unwrap() == 0 {
        return None;
    }
    *n += 1;
    Some(Message::parse(line.trim(), *n).unwrap_or_else(|e| panic!("{e}")))
}

fn send(stdin: &mut ChildStdin, cmd: protocol::Command) {
    writeln!(stdin, "{}", protocol::request_line(cmd)).unwrap();
    stdin.flush().unwrap();
}

fn start(stdin: &mut ChildStdin) {
    send(
        stdin,
        protocol::Command::Start {
            preset: None,
            settings: None,
            set: vec![
                "workload.file_size=16M".into(),
                "workers.mode=unbound".into(),
            ],
            interval_ms: 100,
            command: "run".into(),
        },
    );
}

fn wait_exit(c: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some(s) = c.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn the_agent_over_a_pipe_runs_applies_marks_and_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, mut stdin, mut out) = agent(tmp.path());
    let mut n = 0;
    match next(&mut out, &mut n) {
        Some(Message::Hello(h)) => {
            assert_eq!(h.protocol, PROTOCOL);
            assert_eq!(h.readpath, env!("CARGO_PKG_VERSION"));
            assert_eq!(h.arch, std::env::consts::ARCH);
        }
        other => panic!("first line: {other:?}"),
    }
    start(&mut stdin);
    let header = match next(&mut out, &mut n) {
        Some(Message::Header(h)) => h,
        other => panic!("expected the header: {other:?}"),
    };
    assert_eq!(header.command, "run");
    assert_eq!(header.settings.workload.file_size, 16 << 20);
    assert!(!header.machine.hostname.is_empty());
    // A few intervals, then a change: one reply naming it.
    let mut intervals = 0;
    while intervals < 3 {
        if let Some(Message::Interval(_)) = next(&mut out, &mut n) {
            intervals += 1;
        }
    }
    let mut s: Settings = header.settings.clone();
    s.set("workers.mode", "bound").unwrap();
    send(
        &mut stdin,
        protocol::Command::Apply {
            settings: Box::new(s),
        },
    );
    send(
        &mut stdin,
        protocol::Command::Mark {
            label: "baseline".into(),
        },
    );
    let (mut replied, mut marked) = (false, false);
    let t = Instant::now();
    while !(replied && marked) && t.elapsed() < Duration::from_secs(30) {
        match next(&mut out, &mut n) {
            Some(Message::Reply(r)) => {
                assert!(r.ok, "{r:?}");
                assert_eq!(r.cmd, "apply");
                assert_eq!(r.changes.len(), 1, "{r:?}");
                assert_eq!(r.changes[0].label(), "workers.mode: unbound -> bound");
                replied = true;
            }
            Some(Message::Interval(i)) => {
                marked |= i.events.iter().any(|e| e.label == "baseline");
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(replied && marked, "reply {replied}, mark {marked}");
    send(&mut stdin, protocol::Command::Stop);
    let summary = loop {
        match next(&mut out, &mut n) {
            Some(Message::Summary(s)) => break s,
            Some(Message::Interval(_)) => {}
            other => panic!("{other:?}"),
        }
    };
    assert!(summary.reads > 0);
    assert_eq!(summary.verity_failures, 0);
    // Each miss's bio decrypted and verified (hits were, when they came in).
    assert!(
        summary.decrypted_units > 0 && summary.verified_blocks > 0,
        "{summary:?}"
    );
    assert!(
        next(&mut out, &mut n).is_none(),
        "nothing after the summary"
    );
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(20)).map(|s| s.code()),
        Some(Some(0))
    );
}

#[test]
fn the_agent_stops_when_its_stdin_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, mut stdin, mut out) = agent(tmp.path());
    let mut n = 0;
    assert!(matches!(next(&mut out, &mut n), Some(Message::Hello(_))));
    start(&mut stdin);
    assert!(matches!(next(&mut out, &mut n), Some(Message::Header(_))));
    assert!(matches!(next(&mut out, &mut n), Some(Message::Interval(_))));
    // The connection drops: no stop, just the end of stdin.
    drop(stdin);
    let status = wait_exit(&mut child, Duration::from_secs(20));
    if status.is_none() {
        let _ = child.kill();
    }
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "the agent exits by itself"
    );
}

#[test]
fn a_newer_protocol_is_refused_by_name_on_both_sides() {
    // The agent refuses a newer client.
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, mut stdin, mut out) = agent(tmp.path());
    let mut n = 0;
    assert!(matches!(next(&mut out, &mut n), Some(Message::Hello(_))));
    writeln!(stdin, "{{\"protocol\":{},\"cmd\":\"stop\"}}", PROTOCOL + 1).unwrap();
    stdin.flush().unwrap();
    match next(&mut out, &mut n) {
        Some(Message::Fatal(f)) => {
            assert!(
                f.message.contains(&format!("protocol {}", PROTOCOL + 1))
                    && f.message.contains("newer")
                    && f.message.contains("update readpath on the target"),
                "{f:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(10)).and_then(|s| s.code()),
        Some(2)
    );
    // The client refuses a newer agent.
    let hello = protocol::Hello {
        protocol: PROTOCOL + 1,
        readpath: "9.0.0".into(),
        arch: "x86_64".into(),
    };
    let e = protocol::check_hello(&hello, "ssh:phone").unwrap_err();
    assert!(
        e.contains("ssh:phone") && e.contains("protocol 2") && e.contains("upgrade readpath here"),
        "{e}"
    );
}

/// A fake `ssh`: answers `uname -m` and `--version` like a target with
/// readpath on it, and runs `AGENT` (a shell snippet) for the agent.
fn fake_ssh(dir: &std::path::Path, agent: &str) -> String {
    let path = dir.join("fake-ssh");
    let script = format!(
        "#!/bin/sh\n\
         for last; do :; done\n\
         case \"$last\" in\n\
         \"uname -m\") echo {arch} ;;\n\
         *--version*) echo 'readpath {v}' ;;\n\
         *agent*) {agent} ;;\n\
         *) exit 3 ;;\n\
         esac\n",
        arch = std::env::consts::ARCH,
        v = env!("CARGO_PKG_VERSION"),
    );
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

fn run_remote(ssh: &str, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["run", "--remote", "ssh:target", "--duration", "2s"])
        .args(extra)
        .env("READPATH_SSH_COMMAND", ssh)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn an_agent_that_writes_garbage_is_refused_by_line_number() {
    let tmp = tempfile::tempdir().unwrap();
    let hello = format!(
        "{{\"hello\":{{\"protocol\":{PROTOCOL},\"readpath\":\"{}\",\"arch\":\"x86_64\"}}}}",
        env!("CARGO_PKG_VERSION")
    );
    for (agent, want) in [
        (
            format!("echo '{hello}'; echo 'Welcome to the phone!'; cat >/dev/null"),
            "agent line 2: not JSON",
        ),
        (
            format!("echo '{hello}'; echo '{{\"interval\":{{\"seq\":\"x\"}}}}'; cat >/dev/null"),
            "agent line 2: not a protocol message",
        ),
        (
            "echo 'garbage'; cat >/dev/null".to_string(),
            "agent line 1: not JSON",
        ),
        ("exit 0".to_string(), "the agent ended before its hello"),
    ] {
        let ssh = fake_ssh(tmp.path(), &agent);
        let o = run_remote(&ssh, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{agent}: {err}");
        assert!(
            err.contains(want) && err.contains("ssh:target"),
            "{agent}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_newer_agent_is_refused_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let hello = format!(
        "{{\"hello\":{{\"protocol\":{},\"readpath\":\"9.9.9\",\"arch\":\"x86_64\"}}}}",
        PROTOCOL + 1
    );
    let ssh = fake_ssh(tmp.path(), &format!("echo '{hello}'; cat >/dev/null"));
    let o = run_remote(&ssh, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("newer than this readpath's") && err.contains("upgrade readpath here"),
        "{err}"
    );
}

#[test]
fn bad_remote_specs_and_unsupported_commands_exit_2() {
    for (args, want) in [
        (vec!["run", "--remote", "ssh:-oProxyCommand=x"], "--remote"),
        (vec!["run", "--remote", "ftp:host"], "unknown transport"),
        (
            vec!["compare", "--remote", "ssh:h", "--hosts", "local"],
            "not both",
        ),
        (
            vec!["run", "--remote", "ssh:h", "--remote-dir", "a\nb"],
            "not a usable path",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn a_slow_link_delays_records_but_loses_none() {
    let tmp = tempfile::tempdir().unwrap();
    // The agent's output trickles out: a line every 80 ms, while it
    // writes one every 20 ms.
    let agent = format!(
        "{} agent --data-dir {} | while IFS= read -r l; do printf '%s\\n' \"$l\"; sleep 0.08; done",
        env!("CARGO_BIN_EXE_readpath"),
        tmp.path().join("data").display()
    );
    let ssh = fake_ssh(tmp.path(), &agent);
    let rec = tmp.path().join("slow.jsonl");
    let o = run_remote(
        &ssh,
        &[
            "--interval",
            "20ms",
            "--set",
            "workload.file_size=16M",
            "--record",
            rec.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("s late (a slow link)") && err.contains("none is dropped"),
        "{err}"
    );
    assert!(!err.contains("never arrived"), "{err}");
    // Every interval arrived, in order, none skipped.
    let r = readpath::output::recording::read(&rec).unwrap();
    assert!(r.records.len() > 20, "{} records", r.records.len());
    for (i, x) in r.records.iter().enumerate() {
        assert_eq!(x.seq, i as u64, "record {i}");
    }
}

#[test]
fn adb_targets_use_adb_shell_and_adb_push() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("adb.log");
    // A fake adb: logs its arguments, runs `shell` commands here and
    // `push` as a copy.
    let adb = tmp.path().join("fake-adb");
    std::fs::write(
        &adb,
        format!(
            "#!/bin/sh\n\
             echo \"$@\" >> {log}\n\
             [ \"$1\" = -s ] && shift 2\n\
             case \"$1\" in\n\
             shell) shift; exec sh -c \"$1\" ;;\n\
             push) cp \"$2\" \"$3\" ;;\n\
             *) exit 3 ;;\n\
             esac\n",
            log = log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&adb, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tmp.path().join("dev");
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["run", "--remote", "adb:emulator-5554", "--remote-dir"])
        .arg(&dir)
        .args(["--duration", "1s", "--set", "workload.file_size=16M"])
        .env("READPATH_ADB", &adb)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("adb:emulator-5554") && err.contains("copied"),
        "{err}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls.lines().all(|l| l.starts_with("-s emulator-5554 ")),
        "{calls}"
    );
    assert!(calls.contains("shell uname -m"), "{calls}");
    assert!(calls.lines().any(|l| l.contains(" push ")), "{calls}");
    // The data dir is under the binary's dir on a device (no home there).
    assert!(dir.join("data/dataset-16777216").is_dir());
    assert!(String::from_utf8_lossy(&o.stdout).contains(" 0 failures"));
}

#[test]
fn compare_on_targets_only_leaves_validation_to_them() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = format!(
        "exec {} agent --data-dir {}",
        env!("CARGO_BIN_EXE_readpath"),
        tmp.path().join("data").display()
    );
    let ssh = fake_ssh(tmp.path(), &agent);
    let args = |hosts: &str| {
        Command::new(env!("CARGO_BIN_EXE_readpath"))
            .args(["compare", "--hosts", hosts])
            .args(["--set", "workload.file_size=16M"])
            // CPU 5: not on this 2-CPU machine, maybe on a target.
            .args(["--set", "workload.reader_cpus=5"])
            .args(["--vary", "workers.mode=unbound,bound"])
            .args(["--duration", "500ms", "--rounds", "1", "--warmup", "0s"])
            .env("READPATH_SSH_COMMAND", &ssh)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    if readpath::sys::online_cpus().len() > 5 {
        println!("skipping: this machine has CPU 5");
        return;
    }
    // With `local` among the hosts, this machine refuses it at once.
    let o = args("local,ssh:target");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("reader_cpus") && err.contains("CPU 5"),
        "{err}"
    );
    // On targets only, the target judges (this one has no CPU 5 either):
    // refused there, by name, exit 2.
    let o = args("ssh:target");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ssh:target") && err.contains("reader_cpus") && err.contains("CPU 5"),
        "{err}"
    );
}

#[test]
fn a_preset_named_for_a_target_is_resolved_and_validated_there() {
    if readpath::sys::online_cpus().len() > 5 {
        println!("skipping: this machine has CPU 5");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let agent = format!(
        "exec {} agent --data-dir {}",
        env!("CARGO_BIN_EXE_readpath"),
        tmp.path().join("data").display()
    );
    let ssh = fake_ssh(tmp.path(), &agent);
    // The preset by name, the override applied there before validating.
    let o = run_remote(
        &ssh,
        &["--preset", "default", "--set", "workload.reader_cpus=5"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ssh:target") && err.contains("reader_cpus"),
        "{err}"
    );
    // A preset the target does not have is refused there, by name.
    let o = run_remote(&ssh, &["--preset", "no-such-preset"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no-such-preset"), "{err}");
}
