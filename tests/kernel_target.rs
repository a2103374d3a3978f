//! `workload.target = "kernel"` end to end, with the real binary: a run
//! through the running kernel's own fscrypt reports its
//! `fscrypt_read_queue` items and queue latencies; every system setting it
//! changes (the workqueue affinity scope, the device's readahead) is put
//! back after `q` in the explorer, after SIGTERM, and after SIGKILL
//! followed by a new start or `readpath kernel restore`; the image it
//! mounts is unmounted; a run as an unprivileged user gets a clear error
//! naming what is missing. Needs root, a loop device, mkfs.ext4 and the
//! workqueue tracepoints; skips, saying which is missing, elsewhere.
//!
//! The affinity scope is global: the tests that turn it hold one lock, so
//! they never overlap.

#[path = "common/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SCOPE: &str = "/sys/module/workqueue/parameters/default_affinity_scope";

/// Held by every test that runs the kernel target (its knobs are global).
static GLOBAL: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    GLOBAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[path = "common/bin.rs"]
mod bin;
#[path = "common/kernel.rs"]
mod probe;
#[path = "common/tasks.rs"]
mod tasks;

/// Why this machine cannot run the kernel target, if it cannot.
fn missing() -> Option<String> {
    if let Some(why) = probe::missing() {
        return Some(why);
    }
    if !Path::new(SCOPE).exists() {
        return Some(format!("{SCOPE} (a kernel before 6.5)"));
    }
    if !Path::new("/sys/kernel/tracing/events/workqueue").exists()
        && !Path::new("/sys/kernel/tracing").exists()
    {
        return Some("tracefs (CONFIG_TRACING)".into());
    }
    None
}

/// True (and said) when the kernel target cannot run here; under CI as
/// root, which `.ci/run` provides, that is a failure.
fn skip(test: &str) -> bool {
    match missing() {
        Some(why) => {
            skip::skip(test, &format!("needs {why}"), skip::root());
            true
        }
        None => false,
    }
}

fn scope() -> String {
    std::fs::read_to_string(SCOPE).unwrap().trim().to_string()
}

/// The mounts at or under `dir` (the kernel's table, every escape
/// decoded: a data dir with a tab or a newline in its name).
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    readpath::sys::trust::mounts()
        .into_iter()
        .map(|m| m.point)
        .filter(|p| p.starts_with(&real))
        .collect()
}

fn readpath(data: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_readpath"));
    c.arg("--data-dir").arg(data);
    c
}

fn wait_until(what: &str, limit: Duration, mut pred: impl FnMut() -> bool) {
    let start = Instant::now();
    while !pred() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A scope other than the machine's own, to turn it to.
fn other_scope(now: &str) -> &'static str {
    if now == "system" { "cpu" } else { "system" }
}

#[test]
fn a_kernel_run_reports_the_fscrypt_queue_and_leaves_nothing_behind() {
    if skip("a_kernel_run_reports_the_fscrypt_queue_and_leaves_nothing_behind") {
        return;
    }
    let _g = lock();
    let data = tempfile::tempdir().unwrap();
    let before = scope();
    let o = readpath(data.path())
        .args([
            "run",
            "--set",
            "workload.target=kernel",
            "--set",
            "workload.file_size=16M",
            "--set",
            "cache.cold_start=true",
            "--set",
            "workload.block_size=16K",
            "--duration",
            "3s",
            "--format",
            "json",
            "--trace",
            data.path().join("k.pftrace").to_str().unwrap(),
            "--record",
            data.path().join("k.jsonl").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {stderr}", o.status);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // The recording's timelines name each item's kworker as the kernel
    // does (`kworker/u4:2-fscrypt_read_queue`), read from /proc.
    let rec = readpath::output::recording::read(&data.path().join("k.jsonl")).unwrap();
    let mut named = 0;
    for t in rec.records.iter().flat_map(|r| &r.timeline) {
        for s in t.spans.iter().filter(|s| s.kind.is_item()) {
            let th = t.threads.iter().find(|th| th.tid == s.tid);
            let name = th.map_or("", |th| th.name.as_str());
            assert!(
                name.starts_with("kworker/") || name == format!("tid {}", s.tid),
                "item of tid {} named {name:?}",
                s.tid
            );
            named += usize::from(name.starts_with("kworker/"));
        }
    }
    assert!(named > 0, "no item named by its kworker");
    // The trace holds a slice for each of the kworkers' items the run
    // counted: the same tracepoints' items, interval by interval.
    let traced = bin::traced_items(&stderr);
    assert_eq!(
        Some(traced),
        j["stages_us"]["queue"]["count"].as_u64(),
        "{stderr}"
    );
    assert!(j["reads"].as_u64().unwrap() > 0, "{j}");
    assert_eq!(j["io_errors"], 0);
    assert_eq!(j["effective_settings"]["workload"]["target"], "kernel");
    let q = &j["kernel"]["workqueues"]["fscrypt_read_queue"];
    assert!(
        q["items"].as_u64().unwrap_or(0) > 0,
        "no fscrypt items: {}",
        j["kernel"]
    );
    assert!(q["queue_us"]["p50"].as_f64().unwrap() > 0.0, "{q}");
    assert!(q["queue_us"]["p99"].as_f64().unwrap() >= q["queue_us"]["p50"].as_f64().unwrap());
    assert!(q["exec_us"]["p50"].as_f64().unwrap() > 0.0, "{q}");
    // fscrypt's queue is WQ_UNBOUND: the kernel queued every item to an
    // unbound pool (its tracepoint's cpu=-1), and says so.
    assert_eq!(q["unbound_pct"].as_f64(), Some(100.0), "{q}");
    assert_eq!(j["kernel"]["affinity_scope"], before.as_str());
    assert!(!j["kernel"]["aes_driver"].as_str().unwrap().is_empty());
    // The reads' device latency is the block layer's (the loop device).
    assert!(
        j["stages_us"]["device"]["count"].as_u64().unwrap() > 0,
        "{}",
        j["stages_us"]
    );
    assert!(j["stages_us"]["queue"]["count"].as_u64().unwrap() > 0);
    // What only the model measures is absent, never printed as zeros.
    for model_only in [
        "decrypted_units",
        "verified_blocks",
        "hashes",
        "corrupted",
        "pools",
        "irq",
    ] {
        assert!(
            j.get(model_only).is_none(),
            "{model_only} in a kernel run: {j}"
        );
    }
    // The kernel's own page hits and misses of the file (traced).
    let pc = &j["page_cache"];
    assert!(
        pc["hits"].as_u64().unwrap() + pc["misses"].as_u64().unwrap() > 0,
        "{pc}"
    );
    assert_eq!(scope(), before);
    assert!(
        mounts_under(data.path()).is_empty(),
        "{:?}",
        mounts_under(data.path())
    );
    assert!(
        !data.path().join("kernel/target-state.json").exists(),
        "the mount's state is removed after a clean exit"
    );
    // The kept image's files are reused: a second run writes nothing.
    let o = readpath(data.path())
        .args([
            "run",
            "--set",
            "workload.target=kernel",
            "--set",
            "workload.file_size=16M",
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("path: the running kernel's read path"),
        "{text}"
    );
    assert!(text.contains("kernel: workqueue affinity scope"), "{text}");
}

/// Starts a kernel run that turns the affinity scope (and the device's
/// readahead) and waits until the scope is turned.
fn start_turning(data: &Path, to: &str) -> std::process::Child {
    let child = readpath(data)
        .args([
            "run",
            "--set",
            "workload.target=kernel",
            "--set",
            "workload.file_size=8M",
            "--set",
            &format!("kernel.affinity_scope={to}"),
            "--set",
            "kernel.read_ahead_kb=512",
            "--duration",
            "60s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the scope to be turned", Duration::from_secs(60), || {
        scope() == to
    });
    child
}

#[test]
fn sigterm_puts_every_knob_back_and_unmounts() {
    if skip("sigterm_puts_every_knob_back_and_unmounts") {
        return;
    }
    let _g = lock();
    let data = tempfile::tempdir().unwrap();
    let before = scope();
    let to = other_scope(&before);
    let child = start_turning(data.path(), to);
    // The device's readahead was turned too.
    let mnt = data.path().join("kernel/target");
    let (maj, min) = readpath::kernel::device_of(&mnt).unwrap();
    let ra = format!("/sys/dev/block/{maj}:{min}/queue/read_ahead_kb");
    assert_eq!(std::fs::read_to_string(&ra).unwrap().trim(), "512");
    // SAFETY: kill on a child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(scope(), before);
    assert!(mounts_under(data.path()).is_empty());
    assert!(
        std::fs::read_dir(data.path().join("kernel"))
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("knobs-")),
        "the knobs' state is removed once they are back"
    );
}

#[test]
fn sigkill_leaves_knobs_that_the_next_start_and_restore_put_back() {
    if skip("sigkill_leaves_knobs_that_the_next_start_and_restore_put_back") {
        return;
    }
    let _g = lock();
    let before = scope();
    let to = other_scope(&before);
    // Twice: put back once by a new start (a model run), once by hand.
    for by_restore in [false, true] {
        let data = tempfile::tempdir().unwrap();
        let mut child = start_turning(data.path(), to);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(scope(), to, "SIGKILL cannot put anything back");
        assert_eq!(mounts_under(data.path()).len(), 1);
        let o = if by_restore {
            readpath(data.path())
                .args(["kernel", "restore"])
                .output()
                .unwrap()
        } else {
            readpath(data.path())
                .args([
                    "run",
                    "--set",
                    "workload.file_size=4M",
                    "--duration",
                    "300ms",
                ])
                .output()
                .unwrap()
        };
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            scope(),
            before,
            "put back by {}",
            if by_restore { "restore" } else { "a new start" }
        );
        assert!(mounts_under(data.path()).is_empty(), "{out}");
        assert!(
            out.contains("kernel.affinity_scope"),
            "says what it put back: {out}"
        );
        let instances = std::fs::read_dir("/sys/kernel/tracing/instances")
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        e.file_name().to_string_lossy() == format!("readpath-{}", child.id())
                    })
                    .count()
            })
            .unwrap_or(0);
        assert_eq!(instances, 0, "the killed run's tracefs instance is removed");
    }
}

#[test]
fn q_in_the_explorer_puts_the_scope_back() {
    if skip("q_in_the_explorer_puts_the_scope_back") {
        return;
    }
    if !readpath::sys::testing::require_tool(
        "q_in_the_explorer_puts_the_scope_back",
        "tmux",
        "tmux",
    ) {
        return;
    }
    let _g = lock();
    let data = tempfile::tempdir().unwrap();
    let before = scope();
    let to = other_scope(&before);
    let status = data.path().join("status");
    let name = format!("readpath-kt-{}", std::process::id());
    let cmd = format!(
        "{} --data-dir {} tui --set workload.target=kernel --set workload.file_size=8M --set kernel.affinity_scope={to}; echo \"exit=$?\" > {}; sleep 60",
        env!("CARGO_BIN_EXE_readpath"),
        data.path().display(),
        status.display()
    );
    let tmux = |args: &[&str]| {
        Command::new("tmux").args(args).output().unwrap();
    };
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &name,
        "-x",
        "120",
        "-y",
        "40",
        &cmd,
    ]);
    struct Kill(String);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("tmux")
                .args(["kill-session", "-t", &self.0])
                .status();
        }
    }
    let _k = Kill(name.clone());
    wait_until("the scope to be turned", Duration::from_secs(60), || {
        scope() == to
    });
    std::thread::sleep(Duration::from_millis(1500));
    tmux(&["send-keys", "-t", &name, "q"]);
    wait_until("the explorer to exit", Duration::from_secs(30), || {
        std::fs::read_to_string(&status).is_ok_and(|t| !t.trim().is_empty())
    });
    assert_eq!(std::fs::read_to_string(&status).unwrap().trim(), "exit=0");
    assert_eq!(scope(), before);
    assert!(mounts_under(data.path()).is_empty());
}

#[test]
fn an_unprivileged_run_is_told_what_is_missing() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // Already unprivileged: the run itself is the test.
        let data = tempfile::tempdir().unwrap();
        let o = readpath(data.path())
            .args(["run", "--set", "workload.target=kernel", "--duration", "1s"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains("needs root"));
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        println!(
            "an_unprivileged_run_is_told_what_is_missing: skipped: needs setpriv (util-linux)"
        );
        return;
    }
    // A copy of the binary and a data dir of nobody's own (the trust
    // rule refuses one writable by all).
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("readpath");
    std::fs::copy(env!("CARGO_BIN_EXE_readpath"), &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = scope();
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args([
            "run",
            "--set",
            "workload.target=kernel",
            "--set",
            "kernel.affinity_scope=system",
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("workload.target = \"kernel\""), "{err}");
    assert!(err.contains("needs root"), "{err}");
    assert!(err.contains("tracefs"), "names what needs root: {err}");
    assert_eq!(scope(), before);
}

#[test]
fn a_second_readpath_cannot_turn_a_knob_another_holds_and_the_original_comes_back() {
    if skip("a_second_readpath_cannot_turn_a_knob_another_holds_and_the_original_comes_back") {
        return;
    }
    let _g = lock();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let before = scope();
    let to = other_scope(&before);
    let child = start_turning(a.path(), to);
    // Another readpath, another data dir, another scope: refused, naming
    // the one that holds it.
    let o = readpath(b.path())
        .args([
            "run",
            "--set",
            "workload.target=kernel",
            "--set",
            "workload.file_size=8M",
            "--set",
            &format!(
                "kernel.affinity_scope={}",
                if to == "cpu" { "numa" } else { "cpu" }
            ),
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("PID {}", child.id())), "{err}");
    assert!(err.contains(&*a.path().to_string_lossy()), "{err}");
    assert_eq!(scope(), to, "the second changed nothing");
    assert!(mounts_under(b.path()).is_empty());
    // SAFETY: kill on a child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(scope(), before, "the original is back");
    assert!(mounts_under(a.path()).is_empty());
}

#[test]
fn a_data_dir_with_a_tab_newline_and_backslash_is_put_back_after_sigkill() {
    if skip("a_data_dir_with_a_tab_newline_and_backslash_is_put_back_after_sigkill") {
        return;
    }
    let _g = lock();
    let top = tempfile::tempdir().unwrap();
    let data = top.path().join("a b\tc\\d\ne");
    std::fs::create_dir(&data).unwrap();
    let before = scope();
    let mut child = start_turning(&data, other_scope(&before));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!mounts_under(&data).is_empty(), "SIGKILL leaves the mount");
    let o = readpath(&data)
        .args(["kernel", "restore"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        mounts_under(&data).is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(scope(), before);
}

#[test]
fn a_mount_point_that_is_a_link_is_refused_and_nothing_is_mounted_there() {
    if skip("a_mount_point_that_is_a_link_is_refused_and_nothing_is_mounted_there") {
        return;
    }
    let _g = lock();
    let top = tempfile::tempdir().unwrap();
    let data = top.path().join("data");
    let canary = top.path().join("canary-dir");
    std::fs::create_dir_all(data.join("kernel")).unwrap();
    std::fs::create_dir(&canary).unwrap();
    std::fs::write(canary.join("keep.txt"), "canary").unwrap();
    std::os::unix::fs::symlink(&canary, data.join("kernel/target")).unwrap();
    let o = readpath(&data)
        .args([
            "run",
            "--set",
            "workload.target=kernel",
            "--set",
            "workload.file_size=8M",
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert!(mounts_under(&canary).is_empty());
    assert!(mounts_under(&data).is_empty());
    assert_eq!(
        std::fs::read_to_string(canary.join("keep.txt")).unwrap(),
        "canary"
    );
    assert!(
        std::fs::symlink_metadata(data.join("kernel/target"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "left as it was, for its owner to look at"
    );
}

#[test]
fn a_kernel_dir_whose_readpath_dir_is_a_link_is_refused() {
    if skip("a_kernel_dir_whose_readpath_dir_is_a_link_is_refused") {
        return;
    }
    let _g = lock();
    let top = tempfile::tempdir().unwrap();
    let (data, kd, elsewhere) = (
        top.path().join("data"),
        top.path().join("kd"),
        top.path().join("elsewhere"),
    );
    for d in [&data, &kd, &elsewhere] {
        std::fs::create_dir(d).unwrap();
    }
    std::os::unix::fs::symlink(&elsewhere, kd.join("readpath")).unwrap();
    let o = readpath(&data)
        .args([
            "run",
            "--set",
            "workload.target=kernel",
            "--set",
            "workload.file_size=8M",
            "--set",
            &format!("kernel.dir={}", kd.display()),
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn tracefs_mounted_by_one_readpath_is_unmounted_by_whichever_ends_last() {
    if skip("tracefs_mounted_by_one_readpath_is_unmounted_by_whichever_ends_last") {
        return;
    }
    let _g = lock();
    let mounted = || {
        readpath::sys::trust::mounts()
            .iter()
            .any(|m| m.fstype == "tracefs")
    };
    if mounted() {
        println!(
            "tracefs_mounted_by_one_readpath_is_unmounted_by_whichever_ends_last: skipped: tracefs was mounted before (not readpath's to unmount)"
        );
        return;
    }
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let run = |d: &Path| {
        readpath(d)
            .args([
                "run",
                "--set",
                "workload.target=kernel",
                "--set",
                "workload.file_size=8M",
                "--duration",
                "60s",
                "--interval-log",
                "/dev/stdout",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Waits for the run's first interval on its stdout (its workload under
    // way: the file written, the readers on, the trace open), then keeps
    // draining the rest so the run never waits on the pipe.
    let tracing = |child: &mut std::process::Child| {
        use std::io::BufRead;
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = std::io::BufReader::new(out).lines();
            let first = lines.next();
            let _ = tx.send(first.is_some());
            for _ in lines {}
        });
        let got = rx.recv_timeout(Duration::from_secs(90));
        assert_eq!(got, Ok(true), "no interval from the run within 90 s");
        let inst = format!("/sys/kernel/tracing/instances/readpath-{}", child.id());
        assert!(Path::new(&inst).join("trace_pipe").exists(), "{inst}");
    };
    let mut first = run(a.path());
    tracing(&mut first);
    assert!(mounted());
    let mut second = run(b.path());
    tracing(&mut second);
    for (child, last) in [(first, false), (second, true)] {
        // SAFETY: kill on a child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // The one that mounted it cannot while the other traces.
        assert_eq!(
            mounted(),
            !last,
            "tracefs mounted after the {} ended",
            if last { "second" } else { "first" }
        );
    }
}

/// Why the kernel's page cache cannot be limited here (no memory cgroup),
/// if it cannot; else where readpath's cgroups are made.
fn cgroup_place(test: &str) -> Option<readpath::sys::cgroup::Placement> {
    if skip(test) {
        return None;
    }
    match readpath::sys::cgroup::probe() {
        Ok(p) => Some(p),
        Err(why) => {
            skip::skip(test, &format!("needs a memory cgroup: {why}"), false);
            None
        }
    }
}

/// The kernel target's file a run reads (plain, no verity: the image's
/// base directory), once it is there.
fn target_file(data: &Path, size: u64) -> PathBuf {
    let dir = data.join("kernel/target/readpath");
    let mut found = None;
    wait_until("the kernel target's file", Duration::from_secs(90), || {
        found = std::fs::read_dir(&dir).ok().and_then(|rd| {
            rd.flatten().map(|e| e.path()).find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("data-{size}-")))
            })
        });
        found.is_some()
    });
    found.unwrap()
}

/// A plain sequential kernel run of a 64M file read in 64K blocks by one
/// synchronous reader (one read in flight, a 128K readahead window), with
/// `cache`; more settings in `extra`.
fn cache_run(data: &Path, cache: &str, duration: &str, extra: &[&str]) -> Command {
    let mut c = readpath(data);
    c.args([
        "run",
        "--set",
        "workload.target=kernel",
        "--set",
        "pipeline.decrypt=false",
        "--set",
        "pipeline.verity=false",
        "--set",
        "workload.file_size=64M",
        "--set",
        "workload.pattern=sequential",
        "--set",
        "workload.block_size=64K",
        "--set",
        "workload.readers=1",
        "--set",
        "workload.engine=sync",
        "--set",
        "workload.sleep=iowait",
        "--set",
        "kernel.read_ahead_kb=128",
        "--set",
        &format!("cache.size={cache}"),
        "--duration",
        duration,
        "--format",
        "json",
    ]);
    c.args(extra);
    c
}

#[test]
fn the_kernel_cache_is_held_to_cache_size_and_its_hits_are_counted() {
    let test = "the_kernel_cache_is_held_to_cache_size_and_its_hits_are_counted";
    let Some(place) = cgroup_place(test) else {
        return;
    };
    let _g = lock();
    let data = tempfile::tempdir().unwrap();
    let size = 64u64 << 20;
    let cache = 16u64 << 20;
    // One reader, one 64K read in flight; and the margin memory the
    // process frees between two settings of the limit goes to.
    let slack = readpath::kernel::cgroup::slack(1, 1, 64 << 10) + readpath::kernel::cgroup::MARGIN;
    let child = cache_run(data.path(), "16M", "8s", &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let cg = place.parent.join(format!("readpath-{pid}"));
    let file = target_file(data.path(), size);
    // The whole process moves in (every thread: memory is per process).
    wait_until("readpath in its cgroup", Duration::from_secs(60), || {
        std::fs::read_to_string(cg.join("cgroup.procs"))
            .is_ok_and(|p| p.lines().any(|l| l.trim() == pid.to_string()))
    });
    // Sampled while it reads the file over and over: the file's resident
    // pages (mincore) never exceed cache.size + the stated slack.
    let f = std::fs::File::open(&file).unwrap();
    let mut most = 0;
    for _ in 0..25 {
        std::thread::sleep(Duration::from_millis(200));
        let r = readpath::sys::page_cache_residency(&f).unwrap();
        most = most.max(r.resident_pages * 4096);
    }
    drop(f);
    assert!(
        most <= cache + slack,
        "{} KiB of the file resident, limit {} KiB + {} KiB slack",
        most >> 10,
        cache >> 10,
        slack >> 10
    );
    assert!(most > 0, "the file was read through the cache");
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}: {stderr}", o.status);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        j["bytes"].as_u64().unwrap() > 2 * size,
        "the file was read more than twice: {}",
        j["bytes"]
    );
    let pc = &j["page_cache"];
    let hit = pc["hit_pct"].as_f64().unwrap_or(100.0);
    assert!(hit < 50.0, "a quarter of the file cached: {pc}");
    assert!(pc["misses"].as_u64().unwrap() > size / 4096, "{pc}");
    assert!(
        j["notices"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("memory cgroup")),
        "{}",
        j["notices"]
    );
    // Gone after the run: the cgroup, and its journal entry.
    assert!(!cg.exists(), "{} left behind", cg.display());
    assert!(
        !Path::new(&format!("/run/readpath/cgroup-{pid}.json")).exists(),
        "the cgroup's state is removed"
    );
    // The whole file fits: after the first pass every read hits.
    let o = cache_run(data.path(), "128M", "4s", &[]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let hit = j["page_cache"]["hit_pct"].as_f64().unwrap();
    assert!(hit > 70.0, "the whole file cached: {}", j["page_cache"]);
    // Limit off: no cgroup, and the cache is not counted against cache.size.
    let o = cache_run(
        data.path(),
        "16M",
        "1s",
        &["--set", "kernel.limit_cache=false"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        !j["notices"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("memory cgroup")),
        "{}",
        j["notices"]
    );
}

const ROOM: readpath::kernel::cgroup::Room = readpath::kernel::cgroup::Room {
    slack: 1 << 20,
    floor: 4 << 20,
};

#[test]
fn the_process_comes_back_to_its_cgroup_and_a_killed_runs_cgroup_is_removed() {
    let test = "the_process_comes_back_to_its_cgroup_and_a_killed_runs_cgroup_is_removed";
    let Some(place) = cgroup_place(test) else {
        return;
    };
    let _g = lock();
    // In this process: moved in, and back where it was after.
    let data = tempfile::tempdir().unwrap();
    let before = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let cg =
        readpath::kernel::cgroup::CacheCgroup::enter(data.path(), &place, 1 << 30, ROOM).unwrap();
    let dir = cg.dir().to_path_buf();
    assert!(dir.exists());
    assert_ne!(
        std::fs::read_to_string("/proc/self/cgroup").unwrap(),
        before
    );
    // A cgroup there already is not ours: refused, left alone.
    drop(cg);
    assert_eq!(
        std::fs::read_to_string("/proc/self/cgroup").unwrap(),
        before
    );
    assert!(!dir.exists(), "{} left behind", dir.display());
    std::fs::create_dir(&dir).unwrap();
    let e = readpath::kernel::cgroup::CacheCgroup::enter(data.path(), &place, 1 << 30, ROOM)
        .unwrap_err();
    assert!(e.to_string().contains("not this readpath's"), "{e}");
    assert!(dir.exists(), "a cgroup not ours is never removed");
    std::fs::remove_dir(&dir).unwrap();
    assert_eq!(
        std::fs::read_to_string("/proc/self/cgroup").unwrap(),
        before
    );
    // A run killed with its cgroup: the next `kernel restore` removes it.
    let mut child = cache_run(data.path(), "16M", "60s", &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let cg = place.parent.join(format!("readpath-{}", child.id()));
    let state = format!("/run/readpath/cgroup-{}.json", child.id());
    wait_until("the run's cgroup", Duration::from_secs(90), || cg.exists());
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(cg.exists(), "SIGKILL cannot remove it");
    assert!(Path::new(&state).exists(), "journalled");
    let o = readpath(data.path())
        .args(["kernel", "restore"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!cg.exists(), "removed by restore: {out}");
    assert!(!Path::new(&state).exists());
    assert!(out.contains(&format!("readpath-{}", child.id())), "{out}");
    // And the tracefs instance counting its page-cache adds.
    assert!(
        !Path::new(&format!(
            "/sys/kernel/tracing/instances/readpath-{}-cache",
            child.id()
        ))
        .exists(),
        "{out}"
    );
}

/// `kernel.autogroup` is turned for the model too (no kernel target
/// needed), and put back after SIGTERM, and after SIGKILL by `readpath
/// kernel restore`.
#[test]
fn autogroups_are_turned_for_a_model_run_and_put_back() {
    const AUTOGROUP: &str = readpath::sys::AUTOGROUP_SYSCTL;
    let test = "autogroups_are_turned_for_a_model_run_and_put_back";
    if !skip::root() {
        skip::skip(test, "needs root (the sysctl)", false);
        return;
    }
    if !Path::new(AUTOGROUP).exists() {
        skip::skip(test, "needs CONFIG_SCHED_AUTOGROUP", false);
        return;
    }
    let _g = lock();
    let read = || {
        std::fs::read_to_string(AUTOGROUP)
            .unwrap()
            .trim()
            .to_string()
    };
    let before = read();
    let to = if before == "1" { "0" } else { "1" };
    for kill in [false, true] {
        let data = tempfile::tempdir().unwrap();
        let child = readpath(data.path())
            .args([
                "run",
                "--set",
                "workload.file_size=4M",
                "--set",
                &format!("kernel.autogroup={to}"),
                "--set",
                "load.hogs=1",
                "--duration",
                "60s",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until("autogroups to be turned", Duration::from_secs(60), || {
            read() == to
        });
        let sig = if kill { libc::SIGKILL } else { libc::SIGTERM };
        // SAFETY: kill on a child's pid.
        unsafe { libc::kill(child.id() as i32, sig) };
        let o = child.wait_with_output().unwrap();
        if kill {
            assert_eq!(read(), to, "SIGKILL cannot put anything back");
            let o = readpath(data.path())
                .args(["kernel", "restore"])
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert!(
                String::from_utf8_lossy(&o.stdout).contains("kernel.autogroup"),
                "says what it put back: {}",
                String::from_utf8_lossy(&o.stdout)
            );
        } else {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        assert_eq!(read(), before, "put back (killed: {kill})");
    }
}

/// `workload.cpus = 1` on the kernel target: the kernel's unbound
/// workqueues (its loop worker, fscrypt's queue) are held to the run's one
/// CPU through the unbound cpumask while it runs, readpath's own threads
/// are held there by their affinity, and the mask comes back after.
#[test]
fn workload_cpus_holds_the_kernels_unbound_queues_and_puts_the_mask_back() {
    if skip("workload_cpus_holds_the_kernels_unbound_queues_and_puts_the_mask_back") {
        return;
    }
    const MASK: &str = "/sys/devices/virtual/workqueue/cpumask";
    if readpath::sys::online_cpus().len() < 2 || !Path::new(MASK).exists() {
        skip::skip(
            "workload_cpus_holds_the_kernels_unbound_queues_and_puts_the_mask_back",
            "needs 2 CPUs and the unbound cpumask",
            false,
        );
        return;
    }
    let _g = lock();
    let data = tempfile::tempdir().unwrap();
    let mask = || std::fs::read_to_string(MASK).unwrap().trim().to_string();
    let before = mask();
    let first = readpath::sys::online_cpus()[0];
    let want = readpath::sys::cpu_mask_hex(&[first]);
    let child = readpath(data.path())
        .args([
            "run",
            "--set",
            "workload.target=kernel",
            "--set",
            "workload.file_size=8M",
            "--set",
            "workload.cpus=1",
            "--set",
            "load.hogs=all",
            "--duration",
            "60s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(
        "the unbound cpumask to be turned",
        Duration::from_secs(60),
        || mask() == want,
    );
    // readpath's own threads: readers and the hog on that CPU too.
    wait_until("the readers", Duration::from_secs(20), || {
        tasks::affinities(child.id())
            .iter()
            .any(|(c, _)| c.starts_with("reader-"))
    });
    for (comm, allowed) in tasks::affinities(child.id()) {
        if comm.starts_with("reader-") || comm.starts_with("hog-") {
            assert_eq!(allowed, first.to_string(), "{comm}");
        }
    }
    // SAFETY: kill on a child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(mask(), before, "the unbound cpumask is put back");
}
