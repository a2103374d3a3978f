//! Hostile inputs against the real binary. Every case of
//! `tests/hostile/cases.toml` runs `readpath` the way a careless or
//! unlucky user would: outputs onto devices, FIFOs, symlinks and the input
//! itself, absurd durations and sizes, damaged or endless recordings and
//! presets, missing and unreadable files, signals in the middle of a run,
//! FIFOs nobody reads or writes (or that stall), labels made of escape
//! sequences. Whatever the input, readpath must answer with status 0 or 2 (1
//! only for a real I/O failure or a stop signal that ended a wait), never
//! panic or die of a signal, leave no process and no temporary file
//! behind, put no escape sequence on stdout where a case forbids one, and
//! never write where it was not asked to (a
//! sentinel directory next to each case's temporary directory, `/dev/null`,
//! the device, FIFO or symlink it was pointed at). All cases run, every
//! failure is collected with its command, status and stderr, and the test
//! fails once at the end listing them all.
//!
//! `HOSTILE_ONLY=a,b` runs only the cases whose name contains `a` or `b`;
//! `HOSTILE_KEEP=1` keeps the temporary directories and prints where;
//! `HOSTILE_BIN=path` runs another build of readpath (a release build, say).
//!
//! The case format is described at the top of `tests/hostile/cases.toml`.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

/// How long a case may run unless it says otherwise.
const DEFAULT_TIMEOUT_S: f64 = 60.0;
/// How long after its exit a case's process group may still have members.
const GROUP_GRACE: Duration = Duration::from_secs(2);
/// How long after a signal the process must have exited, unless the case
/// says otherwise.
const DEFAULT_EXIT_WITHIN_S: f64 = 2.0;
/// Address-space limit of every case: a case that asks for hundreds of GiB
/// fails an allocation (and shows as a death by signal) instead of taking
/// the machine into the OOM killer.
const ADDRESS_SPACE_LIMIT: u64 = 8 << 30;
/// Peak resident memory a case may reach unless it says otherwise (the
/// 16M workloads stay far below).
const DEFAULT_MAX_RSS_MIB: f64 = 1024.0;
/// Bytes of stdout and of stderr kept per case (the rest is read and dropped).
const KEEP_BYTES: usize = 1 << 20;
/// Bytes of stderr shown per failure in the report.
const SHOW_STDERR: usize = 2000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CasesFile {
    case: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    args: Vec<String>,
    #[serde(default)]
    setup: Vec<Setup>,
    #[serde(default = "default_exit")]
    exit: Vec<i32>,
    #[serde(default)]
    stderr_contains: Vec<String>,
    #[serde(default)]
    stderr_lacks: Vec<String>,
    #[serde(default)]
    stdout_contains: Vec<String>,
    /// Byte strings stdout must not hold (compared as bytes: an escape
    /// sequence is caught whether or not the rest is UTF-8).
    #[serde(default)]
    stdout_lacks: Vec<String>,
    #[serde(default)]
    after: Vec<After>,
    #[serde(default = "default_timeout")]
    timeout_s: f64,
    signal: Option<Signal>,
    /// A FIFO (made by `setup`) the harness keeps open for reading and drains.
    drain_fifo: Option<String>,
    /// A FIFO the harness opens for reading and never reads (a reader
    /// that stalls: the pipe fills).
    hold_fifo: Option<String>,
    /// A FIFO the harness writes a file into (an input given as a FIFO).
    feed_fifo: Option<FeedFifo>,
    /// Replaces `{data}` as the `--data-dir` of this case.
    data_dir: Option<String>,
    /// Peak resident memory allowed, MiB (default [`DEFAULT_MAX_RSS_MIB`]).
    max_rss_mib: Option<f64>,
    /// "root", "non-root" or the name of a program that must be on PATH.
    #[serde(default)]
    needs: Vec<String>,
}

fn default_exit() -> Vec<i32> {
    vec![0, 2]
}

fn default_timeout() -> f64 {
    DEFAULT_TIMEOUT_S
}

/// What the harness writes into a FIFO input: `from`'s bytes, once (then
/// it closes: end of file) or over and over until the case ends.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FeedFifo {
    fifo: String,
    from: String,
    #[serde(default)]
    endless: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Signal {
    /// Send it once stdout holds this text (a run's first interval, with
    /// `--interval-log /dev/stdout` or `--record -`).
    when_stdout: Option<String>,
    /// Send it once stderr holds this text (readpath's "waiting for ..."
    /// notices).
    when_stderr: Option<String>,
    /// Send it once this directory (relative to `{tmp}`, made by `setup`)
    /// holds an entry: what readpath makes first (a dataset being prepared).
    when_entry_in: Option<String>,
    sig: String,
    exit_within_s: Option<f64>,
}

impl Signal {
    /// Whether the state the signal waits for is reached. A case signals a
    /// known state, never after a fixed wait: on a loaded machine a fixed
    /// wait lands in another state (still preparing the dataset), and the
    /// case fails for the machine, not for readpath.
    fn due(&self, tmp: &Path, stdout: &Mutex<Vec<u8>>, stderr: &Mutex<Vec<u8>>) -> bool {
        let holds = |buf: &Mutex<Vec<u8>>, text: &str| {
            let b = buf.lock().unwrap_or_else(|p| p.into_inner());
            b.windows(text.len()).any(|w| w == text.as_bytes())
        };
        if let Some(t) = &self.when_stdout
            && !holds(stdout, t)
        {
            return false;
        }
        if let Some(t) = &self.when_stderr
            && !holds(stderr, t)
        {
            return false;
        }
        if let Some(d) = &self.when_entry_in {
            let any = std::fs::read_dir(tmp.join(d)).is_ok_and(|mut rd| rd.next().is_some());
            if !any {
                return false;
            }
        }
        true
    }

    /// What it waits for, in words.
    fn state(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = &self.when_stdout {
            parts.push(format!("stdout holding {t:?}"));
        }
        if let Some(t) = &self.when_stderr {
            parts.push(format!("stderr holding {t:?}"));
        }
        if let Some(d) = &self.when_entry_in {
            parts.push(format!("an entry in {d}"));
        }
        parts.join(" and ")
    }
}

/// What the harness does in the case's directory before running it; paths
/// are relative to `{tmp}` unless absolute.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Setup {
    /// A character device 1:3 (what /dev/null is); root only.
    MknodNull(String),
    Fifo(String),
    /// [link, target]: the target as written (relative to the link's directory).
    Symlink((String, String)),
    /// [link, existing file].
    Hardlink((String, String)),
    /// [source, destination].
    Copy((String, String)),
    /// [name, content].
    Write((String, String)),
    /// [name, unit, count]: `unit` repeated `count` times.
    WriteRepeat((String, String, usize)),
    /// [name, unit, count], appended.
    AppendRepeat((String, String, usize)),
    /// [name, bytes]: deterministic pseudo-random bytes.
    WriteRandom((String, usize)),
    Mkdir(String),
    /// [name, mode], e.g. ["r.jsonl", 0] (meaningful as non-root only).
    Chmod((String, u32)),
    /// [name, uid]: the node itself (a link is not followed); root only,
    /// else the case is skipped.
    Chown((String, u32)),
}

/// What must hold after the run; paths as in [`Setup`].
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum After {
    IsCharDevice(String),
    IsSymlink(String),
    IsFifo(String),
    IsDir(String),
    IsRegular(String),
    Exists(String),
    Absent(String),
    /// Same bytes as right after `setup`.
    Unchanged(String),
    /// A complete recording: line 1 a readpath-recording header, then at
    /// least one `{"interval": ...}` line, every line whole JSON.
    Recording(String),
    /// [file, text]: the file's bytes do not hold the text's.
    Lacks((String, String)),
}

struct Ctx {
    bin: PathBuf,
    corpus: PathBuf,
    repo: PathBuf,
    data: PathBuf,
    root: PathBuf,
    is_root: bool,
}

impl Ctx {
    fn expand(&self, s: &str, tmp: &Path) -> String {
        s.replace("{tmp}", &tmp.display().to_string())
            .replace("{corpus}", &self.corpus.display().to_string())
            .replace("{data}", &self.data.display().to_string())
            .replace("{repo}", &self.repo.display().to_string())
    }

    fn path(&self, s: &str, tmp: &Path) -> PathBuf {
        let p = PathBuf::from(self.expand(s, tmp));
        if p.is_absolute() { p } else { tmp.join(p) }
    }
}

enum Outcome {
    /// Passed: its status and peak RSS, for the progress line.
    Pass(String),
    Skip(String),
    Fail(String),
}

#[test]
fn hostile_inputs_are_refused_cleanly() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let corpus = repo.join("tests/hostile");
    let text = std::fs::read_to_string(corpus.join("cases.toml")).expect("read cases.toml");
    let file: CasesFile = toml::from_str(&text).unwrap_or_else(|e| panic!("cases.toml: {e}"));
    let mut seen = std::collections::HashSet::new();
    for c in &file.case {
        assert!(seen.insert(&c.name), "duplicate case name {}", c.name);
    }
    assert!(
        is_null_device(Path::new("/dev/null")),
        "/dev/null is not the null device before any case ran"
    );

    let tmpdir = tempfile::Builder::new()
        .prefix("readpath-hostile-")
        .tempdir()
        .expect("temporary directory");
    let root = tmpdir.path().to_path_buf();
    let ctx = Ctx {
        bin: std::env::var_os("HOSTILE_BIN").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_readpath")),
            PathBuf::from,
        ),
        corpus,
        repo,
        data: root.join("data"),
        root: root.clone(),
        // SAFETY: geteuid has no preconditions.
        is_root: unsafe { libc::geteuid() } == 0,
    };
    std::fs::create_dir_all(root.join("cases")).unwrap();
    std::fs::create_dir_all(root.join("sentinels")).unwrap();
    prepare_data(&ctx);

    let only: Vec<String> = std::env::var("HOSTILE_ONLY")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let started = Instant::now();
    let mut failures = Vec::new();
    let (mut passed, mut skipped) = (0, 0);
    for (i, case) in file.case.iter().enumerate() {
        if !only.is_empty() && !only.iter().any(|o| case.name.contains(o.as_str())) {
            continue;
        }
        let t = Instant::now();
        let outcome = run_case(&ctx, i, case);
        let secs = t.elapsed().as_secs_f64();
        match outcome {
            Outcome::Pass(how) => {
                passed += 1;
                eprintln!("hostile: ok   {} ({how}, {secs:.1}s)", case.name);
            }
            Outcome::Skip(why) => {
                skipped += 1;
                eprintln!("hostile: skip {}: {why}", case.name);
            }
            Outcome::Fail(report) => {
                eprintln!("hostile: FAIL {} ({secs:.1}s)", case.name);
                failures.push(report);
            }
        }
    }
    eprintln!(
        "hostile: {passed} passed, {} failed, {skipped} skipped in {:.0}s",
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    if std::env::var_os("HOSTILE_KEEP").is_some() {
        let kept = tmpdir.keep();
        eprintln!("hostile: kept {}", kept.display());
    }
    if !failures.is_empty() {
        panic!(
            "{} hostile case(s) failed:\n\n{}",
            failures.len(),
            failures.join("\n\n")
        );
    }
}

/// The shared dataset every workload case runs on.
fn prepare_data(ctx: &Ctx) {
    let home = ctx.root.join("prepare-home");
    std::fs::create_dir_all(&home).unwrap();
    let o = Command::new(&ctx.bin)
        .arg("--data-dir")
        .arg(&ctx.data)
        .args(["prepare", "--size", "16M"])
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .stdin(Stdio::null())
        .output()
        .expect("run readpath prepare");
    assert!(
        o.status.success(),
        "readpath prepare --size 16M: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
}

fn run_case(ctx: &Ctx, index: usize, case: &Case) -> Outcome {
    for need in &case.needs {
        match need.as_str() {
            "root" if !ctx.is_root => return Outcome::Skip("needs root".into()),
            "non-root" if ctx.is_root => {
                return Outcome::Skip("root reads any file: meaningful as non-root only".into());
            }
            "root" | "non-root" => {}
            // Under CI (`.ci/run` installs every tool) a missing one fails.
            prog if !on_path(prog) && std::env::var("CI").is_ok_and(|v| v == "true") => {
                return Outcome::Fail(format!("{prog} is not on PATH, and .ci/run installs it"));
            }
            prog if !on_path(prog) => {
                return Outcome::Skip(format!("{prog} is not on PATH (Debian: librsvg2-bin)"));
            }
            _ => {}
        }
    }
    if !ctx.is_root && case.setup.iter().any(|s| matches!(s, Setup::MknodNull(_))) {
        return Outcome::Skip("mknod of a character device needs root".into());
    }

    let tmp = ctx.root.join("cases").join(format!("{index:03}"));
    let sentinel = ctx.root.join("sentinels").join(format!("{index:03}"));
    let outcome = run_case_in(ctx, case, &tmp, &sentinel);
    // A case's files go with it, unless HOSTILE_KEEP asks to look at them.
    if std::env::var_os("HOSTILE_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&tmp);
        let _ = std::fs::remove_dir_all(&sentinel);
    }
    outcome
}

fn run_case_in(ctx: &Ctx, case: &Case, tmp: &Path, sentinel: &Path) -> Outcome {
    let data_dir = case
        .data_dir
        .as_deref()
        .map_or_else(|| ctx.data.clone(), |d| ctx.path(d, tmp));
    let mut argv: Vec<String> = vec!["--data-dir".into(), data_dir.display().to_string()];
    argv.extend(case.args.iter().map(|a| ctx.expand(a, tmp)));
    let command = format!(
        "(cd {} && {} {})",
        tmp.display(),
        ctx.bin.display(),
        argv.iter()
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let fail = |problems: Vec<String>, status: &str, stderr: &str| {
        Outcome::Fail(format!(
            "== {}\n   command: {command}\n   status: {status}\n   problems:\n{}\n   stderr: {}",
            case.name,
            problems
                .iter()
                .map(|p| format!("     - {p}"))
                .collect::<Vec<_>>()
                .join("\n"),
            indent(&truncate(stderr, SHOW_STDERR))
        ))
    };

    // The case's world: {tmp}, its XDG directories, the sentinel and the
    // symlink to it, then the case's own setup.
    if let Err(e) = make_world(ctx, tmp, sentinel) {
        return fail(vec![format!("harness setup: {e}")], "not run", "");
    }
    for s in &case.setup {
        match do_setup(ctx, tmp, s) {
            Ok(None) => {}
            Ok(Some(skip)) => return Outcome::Skip(skip),
            Err(e) => return fail(vec![format!("setup {s:?}: {e}")], "not run", ""),
        }
    }
    let mut unchanged = BTreeMap::new();
    for a in &case.after {
        if let After::Unchanged(p) = a {
            match std::fs::read(ctx.path(p, tmp)) {
                Ok(b) => {
                    unchanged.insert(p.clone(), b);
                }
                Err(e) => return fail(vec![format!("unchanged = {p:?}: {e}")], "not run", ""),
            }
        }
    }
    let sentinel_before = match snapshot(sentinel) {
        Ok(s) => s,
        Err(e) => return fail(vec![format!("sentinel snapshot: {e}")], "not run", ""),
    };
    let data_tmp_before = tmp_files(&data_dir);
    let drain_stop = Arc::new(AtomicBool::new(false));
    let drainer = case
        .drain_fifo
        .as_ref()
        .map(|f| drain_fifo(ctx.path(f, tmp), drain_stop.clone()));
    let holder = case
        .hold_fifo
        .as_ref()
        .map(|f| hold_fifo(ctx.path(f, tmp), drain_stop.clone()));
    let feeder = case.feed_fifo.as_ref().map(|f| {
        feed_fifo(
            ctx.path(&f.fifo, tmp),
            ctx.path(&f.from, tmp),
            f.endless,
            drain_stop.clone(),
        )
    });

    let run = match execute(ctx, case, tmp, &argv) {
        Ok(r) => r,
        Err(e) => return fail(vec![format!("could not run: {e}")], "not run", ""),
    };
    drain_stop.store(true, Ordering::SeqCst);
    for t in [drainer, holder, feeder].into_iter().flatten() {
        let _ = t.join();
    }

    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let mut problems = run.problems;
    let s = run.status;
    let code = s.code();
    let status_text = format!(
        "{}, peak RSS {:.0} MiB",
        describe_status(s),
        run.max_rss_mib
    );
    if let Some(sig) = s.signal() {
        problems.push(format!("died of signal {sig} ({})", signal_name(sig)));
    } else if code == Some(101) {
        problems.push("exit status 101: a panic".into());
    }
    if let Some(c) = code
        && !case.exit.contains(&c)
    {
        problems.push(format!("exit status {c}, allowed {:?}", case.exit));
    }
    if !s.success() && stderr.trim().is_empty() {
        problems.push("failed with nothing on stderr".into());
    }
    for needle in ["panicked", "RUST_BACKTRACE"] {
        if stderr.contains(needle) {
            problems.push(format!("stderr contains {needle:?}"));
        }
    }
    for (token, n) in os_errors(&stderr) {
        if n > 1 {
            problems.push(format!("{token:?} appears {n} times in stderr"));
        }
    }
    for s in &case.stderr_contains {
        let s = ctx.expand(s, tmp);
        if !stderr.contains(&s) {
            problems.push(format!("stderr lacks {s:?}"));
        }
    }
    for s in &case.stderr_lacks {
        if stderr.contains(s.as_str()) {
            problems.push(format!("stderr contains {s:?}"));
        }
    }
    for s in &case.stdout_contains {
        if !stdout.contains(s.as_str()) {
            problems.push(format!(
                "stdout lacks {s:?}; stdout: {:?}",
                truncate(&stdout, 300)
            ));
        }
    }
    for s in &case.stdout_lacks {
        if let Some(at) = find_bytes(&run.stdout, s.as_bytes()) {
            problems.push(format!(
                "stdout holds {s:?} at byte {at}; stdout: {:?}",
                truncate(&stdout, 300)
            ));
        }
    }
    match snapshot(sentinel) {
        Ok(after) => problems.extend(diff_snapshots(&sentinel_before, &after)),
        Err(e) => problems.push(format!("sentinel {}: {e}", sentinel.display())),
    }
    if !is_null_device(Path::new("/dev/null")) {
        problems.push("/dev/null is no longer the null device (restored)".into());
        restore_dev_null();
    }
    if matches!(code, Some(0 | 2)) {
        let left = tmp_files(tmp).into_iter().chain(
            tmp_files(&data_dir)
                .into_iter()
                .filter(|f| !data_tmp_before.contains(f)),
        );
        for f in left {
            problems.push(format!("temporary file left: {}", f.display()));
        }
    }
    for a in &case.after {
        if let Err(e) = check_after(ctx, tmp, a, &unchanged) {
            problems.push(format!("after {a:?}: {e}"));
        }
    }

    if problems.is_empty() {
        Outcome::Pass(status_text)
    } else {
        fail(problems, &status_text, &stderr)
    }
}

struct Run {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    problems: Vec<String>,
    max_rss_mib: f64,
}

/// Runs the binary in its own process group, with the case's signal and
/// timeout, and makes sure nothing of its group survives it.
fn execute(ctx: &Ctx, case: &Case, tmp: &Path, argv: &[String]) -> std::io::Result<Run> {
    let mut cmd = Command::new(&ctx.bin);
    cmd.args(argv)
        .current_dir(tmp)
        .env("HOME", tmp.join("home"))
        .env("XDG_CACHE_HOME", tmp.join("xdg-cache"))
        .env("XDG_CONFIG_HOME", tmp.join("xdg-config"))
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: setrlimit and prctl are async-signal-safe; the closure
    // allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            // Dies with the harness (a killed `cargo test` leaves no case running).
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let lim = libc::rlimit {
                rlim_cur: ADDRESS_SPACE_LIMIT,
                rlim_max: ADDRESS_SPACE_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child.id() as libc::pid_t;
    let out_live = Arc::new(Mutex::new(Vec::new()));
    let err_live = Arc::new(Mutex::new(Vec::new()));
    let out_rx = read_all(child.stdout.take().expect("stdout"), out_live.clone());
    let err_rx = read_all(child.stderr.take().expect("stderr"), err_live.clone());
    let mut problems = Vec::new();

    let start = Instant::now();
    let timeout = Duration::from_secs_f64(case.timeout_s);
    let signal = case.signal.as_ref().map(|s| {
        assert!(
            s.when_stdout.is_some() || s.when_stderr.is_some() || s.when_entry_in.is_some(),
            "{}: a signal waits for a known state (when_stdout, when_stderr or when_entry_in), never a fixed time",
            case.name
        );
        (
            s,
            signal_number(&s.sig)
                .unwrap_or_else(|| panic!("{}: unknown signal {}", case.name, s.sig)),
            s.sig.clone(),
            Duration::from_secs_f64(s.exit_within_s.unwrap_or(DEFAULT_EXIT_WITHIN_S)),
        )
    });
    let mut signalled: Option<Instant> = None;
    let (status, usage) = loop {
        if let Some(done) = wait4(pid, false)? {
            break done;
        }
        let now = Instant::now();
        if let Some((s, signo, _, _)) = &signal
            && signalled.is_none()
            && s.due(tmp, &out_live, &err_live)
        {
            // SAFETY: plain kill(2) on our own child.
            unsafe { libc::kill(pid, *signo) };
            signalled = Some(now);
        }
        if now.duration_since(start) >= timeout {
            problems.push(format!(
                "timed out after {:.0}s (process group killed)",
                case.timeout_s
            ));
            // SAFETY: kill(2) on the child's own process group.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            break wait4(pid, true)?.expect("a blocking wait4 returns the child");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // The child is reaped by wait4 above, not by `child`, which is only
    // dropped (that does not wait).
    drop(child);
    let max_rss_mib = usage.ru_maxrss as f64 / 1024.0;
    let rss_limit = case.max_rss_mib.unwrap_or(DEFAULT_MAX_RSS_MIB);
    if max_rss_mib > rss_limit {
        problems.push(format!(
            "peak RSS {max_rss_mib:.0} MiB, allowed {rss_limit:.0} MiB"
        ));
    }
    let exited = Instant::now();
    if let Some((s, _, name, within)) = &signal {
        match signalled {
            None => problems.push(format!(
                "exited after {:.1}s, before SIG{name} was due (on {})",
                exited.duration_since(start).as_secs_f64(),
                s.state()
            )),
            Some(at) if exited.duration_since(at) > *within => problems.push(format!(
                "exited {:.1}s after SIG{name}, allowed {:.1}s",
                exited.duration_since(at).as_secs_f64(),
                within.as_secs_f64()
            )),
            Some(_) => {}
        }
    }

    // Children of the binary (rsvg-convert, openssl...) are in its group.
    if !group_gone_within(pid, GROUP_GRACE) {
        problems.push(format!(
            "processes of its group still running {:.0}s after it exited: {} (killed)",
            GROUP_GRACE.as_secs_f64(),
            group_members(pid).join(", ")
        ));
        // SAFETY: kill(2) on the child's own process group.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        if !group_gone_within(pid, Duration::from_secs(5)) {
            problems.push("its process group survived SIGKILL".into());
        }
    }
    let collect = |rx: mpsc::Receiver<Vec<u8>>, what: &str, problems: &mut Vec<String>| {
        rx.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| {
            problems.push(format!("{what} still open 5s after the group ended"));
            Vec::new()
        })
    };
    let stdout = collect(out_rx, "stdout", &mut problems);
    let stderr = collect(err_rx, "stderr", &mut problems);
    Ok(Run {
        status,
        stdout,
        stderr,
        problems,
        max_rss_mib,
    })
}

/// Waits for the child (blocking or not) with its resource usage.
fn wait4(pid: libc::pid_t, block: bool) -> std::io::Result<Option<(ExitStatus, libc::rusage)>> {
    loop {
        let mut status = 0;
        // SAFETY: rusage is plain data; zeroed is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let flags = if block { 0 } else { libc::WNOHANG };
        // SAFETY: valid pointers to locals; pid is our own child.
        let rc = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        match rc {
            0 => return Ok(None),
            -1 => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            _ => return Ok(Some((ExitStatus::from_raw(status), usage))),
        }
    }
}

/// Reads a pipe to its end on a thread, keeping the first [`KEEP_BYTES`].
fn read_all<R: Read + Send + 'static>(
    mut r: R,
    live: Arc<Mutex<Vec<u8>>>,
) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = KEEP_BYTES.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                    // What arrived so far, for a signal that waits on it.
                    let mut l = live.lock().unwrap_or_else(|p| p.into_inner());
                    let room = KEEP_BYTES.saturating_sub(l.len());
                    l.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send(kept);
    });
    rx
}

/// Keeps a FIFO open for reading (non-blocking, so the harness never waits
/// on a writer that does not come) and throws away what arrives.
fn drain_fifo(path: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::thread::spawn(move || {
        let Ok(mut f) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
        else {
            return;
        };
        let mut buf = vec![0u8; 64 * 1024];
        while !stop.load(Ordering::SeqCst) {
            match f.read(&mut buf) {
                Ok(n) if n > 0 => {}
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    })
}

/// Opens a FIFO for reading (non-blocking, so the harness never waits)
/// and holds it unread until the case ends: the writer's pipe fills.
fn hold_fifo(path: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::thread::spawn(move || {
        let held = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path);
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(held);
    })
}

/// Writes `from` into a FIFO once a reader opened it (polled with
/// non-blocking opens, so the harness never waits on a reader that does
/// not come), then closes it; `endless` writes it again and again until
/// the case ends or the reader goes.
fn feed_fifo(
    path: PathBuf,
    from: PathBuf,
    endless: bool,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::thread::spawn(move || {
        let bytes = std::fs::read(&from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        let mut f = loop {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
            {
                Ok(f) => break f,
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        loop {
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                match f.write(rest) {
                    Ok(n) => rest = &rest[n..],
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(2))
                    }
                    Err(_) => return, // the reader went
                }
            }
            if !endless {
                return;
            }
        }
    })
}

fn group_gone_within(pgid: libc::pid_t, limit: Duration) -> bool {
    let start = Instant::now();
    loop {
        // SAFETY: signal 0 only checks for existence.
        let rc = unsafe { libc::kill(-pgid, 0) };
        if rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// "PID (comm)" of every process in a process group, from /proc.
fn group_members(pgid: libc::pid_t) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let comm = stat[..close].split_once('(').map_or("", |(_, c)| c);
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<libc::pid_t>().ok()) == Some(pgid) {
            out.push(format!("{} ({comm})", e.file_name().to_string_lossy()));
        }
    }
    out
}

fn make_world(ctx: &Ctx, tmp: &Path, sentinel: &Path) -> std::io::Result<()> {
    for d in ["home", "xdg-cache", "xdg-config"] {
        std::fs::create_dir_all(tmp.join(d))?;
    }
    std::fs::create_dir_all(sentinel.join("sub"))?;
    std::fs::write(sentinel.join("keep.txt"), b"readpath must not touch this\n")?;
    std::fs::copy(ctx.corpus.join("good.jsonl"), sentinel.join("rec.jsonl"))?;
    std::fs::copy(
        ctx.repo.join("presets/default.toml"),
        sentinel.join("p.toml"),
    )?;
    std::fs::write(sentinel.join("sub/deep.txt"), b"nor this\n")?;
    std::os::unix::fs::symlink(sentinel, tmp.join("outside"))
}

/// Performs one setup action; `Ok(Some(reason))` skips the case.
fn do_setup(ctx: &Ctx, tmp: &Path, s: &Setup) -> std::io::Result<Option<String>> {
    let p = |s: &str| ctx.path(s, tmp);
    match s {
        Setup::MknodNull(n) => {
            let c = cstring(&p(n));
            // SAFETY: a valid NUL-terminated path.
            let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EPERM) {
                    return Ok(Some(format!("mknod is not allowed here: {e}")));
                }
                return Err(e);
            }
        }
        Setup::Fifo(n) => {
            let c = cstring(&p(n));
            // SAFETY: a valid NUL-terminated path.
            if unsafe { libc::mkfifo(c.as_ptr(), 0o644) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Setup::Symlink((link, target)) => {
            std::os::unix::fs::symlink(ctx.expand(target, tmp), p(link))?
        }
        Setup::Hardlink((link, target)) => std::fs::hard_link(p(target), p(link))?,
        Setup::Copy((from, to)) => {
            std::fs::copy(p(from), p(to))?;
        }
        Setup::Write((n, content)) => std::fs::write(p(n), content)?,
        Setup::WriteRepeat((n, unit, count)) => std::fs::write(p(n), unit.repeat(*count))?,
        Setup::AppendRepeat((n, unit, count)) => {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(p(n))?;
            f.write_all(unit.repeat(*count).as_bytes())?;
        }
        Setup::WriteRandom((n, len)) => {
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let bytes: Vec<u8> = (0..*len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 32) as u8
                })
                .collect();
            std::fs::write(p(n), bytes)?
        }
        Setup::Mkdir(n) => std::fs::create_dir_all(p(n))?,
        Setup::Chmod((n, mode)) => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p(n), std::fs::Permissions::from_mode(*mode))?
        }
        Setup::Chown((n, uid)) => {
            if !ctx.is_root {
                return Ok(Some("chown needs root".into()));
            }
            std::os::unix::fs::lchown(p(n), Some(*uid), Some(*uid))?
        }
    }
    Ok(None)
}

fn check_after(
    ctx: &Ctx,
    tmp: &Path,
    a: &After,
    unchanged: &BTreeMap<String, Vec<u8>>,
) -> Result<(), String> {
    let kind = |p: &Path| -> Result<std::fs::FileType, String> {
        std::fs::symlink_metadata(p)
            .map(|m| m.file_type())
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let is = |n: &str, want: &str, ok: fn(&std::fs::FileType) -> bool| {
        let p = ctx.path(n, tmp);
        let t = kind(&p)?;
        if ok(&t) {
            Ok(())
        } else {
            Err(format!(
                "{} is a {}, not a {want}",
                p.display(),
                kind_name(&t)
            ))
        }
    };
    match a {
        After::IsCharDevice(n) => is(n, "character device", |t| t.is_char_device()),
        After::IsSymlink(n) => is(n, "symlink", |t| t.is_symlink()),
        After::IsFifo(n) => is(n, "FIFO", |t| t.is_fifo()),
        After::IsDir(n) => is(n, "directory", |t| t.is_dir()),
        After::IsRegular(n) => is(n, "regular file", |t| t.is_file()),
        After::Exists(n) => kind(&ctx.path(n, tmp)).map(|_| ()),
        After::Absent(n) => match std::fs::symlink_metadata(ctx.path(n, tmp)) {
            Ok(m) => Err(format!("exists ({})", kind_name(&m.file_type()))),
            Err(_) => Ok(()),
        },
        After::Unchanged(n) => {
            let now = std::fs::read(ctx.path(n, tmp)).map_err(|e| e.to_string())?;
            if Some(&now) == unchanged.get(n) {
                Ok(())
            } else {
                Err(format!(
                    "changed: {} bytes now, starting {:?}",
                    now.len(),
                    truncate(&String::from_utf8_lossy(&now), 80)
                ))
            }
        }
        After::Recording(n) => check_recording(&ctx.path(n, tmp)),
        After::Lacks((n, text)) => {
            let bytes = std::fs::read(ctx.path(n, tmp)).map_err(|e| e.to_string())?;
            match find_bytes(&bytes, text.as_bytes()) {
                Some(at) => Err(format!("holds {text:?} at byte {at}")),
                None => Ok(()),
            }
        }
    }
}

/// Where `needle` first occurs in `hay`, byte for byte.
fn find_bytes(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

fn check_recording(p: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
    let mut lines = text.lines();
    let first = lines.next().ok_or("empty")?;
    let header: serde_json::Value =
        serde_json::from_str(first).map_err(|e| format!("line 1: {e}"))?;
    if header["format"] != "readpath-recording" {
        return Err(format!(
            "line 1 is not a readpath-recording header: {:?}",
            truncate(first, 120)
        ));
    }
    let mut intervals = 0;
    for (i, l) in lines.enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 2))?;
        if v.get("interval").is_none() {
            return Err(format!("line {}: no \"interval\"", i + 2));
        }
        intervals += 1;
    }
    if !text.ends_with('\n') {
        return Err("the last line is not terminated".into());
    }
    if intervals == 0 {
        return Err("no interval recorded".into());
    }
    Ok(())
}

#[derive(Debug, PartialEq)]
struct Entry {
    kind: String,
    ino: u64,
    content: Vec<u8>,
}

/// Every entry under `dir` (not following symlinks): type, inode, bytes.
fn snapshot(dir: &Path) -> std::io::Result<BTreeMap<PathBuf, Entry>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let m = std::fs::symlink_metadata(&d)?;
        out.insert(
            d.strip_prefix(dir).unwrap_or(&d).to_path_buf(),
            Entry {
                kind: kind_name(&m.file_type()).into(),
                ino: m.ino(),
                content: Vec::new(),
            },
        );
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            let m = std::fs::symlink_metadata(&p)?;
            let t = m.file_type();
            if t.is_dir() {
                stack.push(p);
                continue;
            }
            let content = if t.is_file() {
                std::fs::read(&p)?
            } else if t.is_symlink() {
                std::fs::read_link(&p)?
                    .into_os_string()
                    .into_encoded_bytes()
            } else {
                Vec::new()
            };
            out.insert(
                p.strip_prefix(dir).unwrap_or(&p).to_path_buf(),
                Entry {
                    kind: kind_name(&t).into(),
                    ino: m.ino(),
                    content,
                },
            );
        }
    }
    Ok(out)
}

fn diff_snapshots(
    before: &BTreeMap<PathBuf, Entry>,
    after: &BTreeMap<PathBuf, Entry>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (p, b) in before {
        match after.get(p) {
            None => out.push(format!("sentinel: {} was removed", p.display())),
            Some(a) if a.kind != b.kind => out.push(format!(
                "sentinel: {} became a {} (was a {})",
                p.display(),
                a.kind,
                b.kind
            )),
            Some(a) if a.ino != b.ino => out.push(format!(
                "sentinel: {} was replaced (new inode)",
                p.display()
            )),
            Some(a) if a.content != b.content => {
                out.push(format!("sentinel: {} was modified", p.display()))
            }
            Some(_) => {}
        }
    }
    for p in after.keys().filter(|p| !before.contains_key(*p)) {
        out.push(format!("sentinel: {} was created", p.display()));
    }
    out
}

/// Files named `*.tmp-*` under `dir`, not following symlinks.
fn tmp_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().contains(".tmp-") {
                out.push(e.path());
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    out
}

/// Each distinct "(os error N)" in `s` with how often it occurs.
fn os_errors(s: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while let Some(i) = rest.find("(os error ") {
        let tail = &rest[i..];
        let end = tail.find(')').map_or(tail.len(), |j| j + 1);
        *out.entry(tail[..end].to_string()).or_insert(0) += 1;
        rest = &tail[end..];
    }
    out
}

fn is_null_device(p: &Path) -> bool {
    std::fs::symlink_metadata(p)
        .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == libc::makedev(1, 3))
}

/// Puts the null device back if a case replaced it (as root a rename over
/// /dev/null succeeds, and everything on the machine would then write to a
/// file). Made beside it and renamed over, so /dev/null is never missing.
fn restore_dev_null() {
    let tmp = format!("/dev/.null-hostile-{}", std::process::id());
    let c = std::ffi::CString::new(tmp.clone()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    if rc == 0 {
        // SAFETY: chmod on the node just made (mknod's mode is umasked).
        unsafe { libc::chmod(c.as_ptr(), 0o666) };
        let _ = std::fs::rename(&tmp, "/dev/null");
    }
}

fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            std::fs::metadata(d.join(prog)).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
        })
    })
}

fn cstring(p: &Path) -> std::ffi::CString {
    std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("no NUL in a path")
}

fn kind_name(t: &std::fs::FileType) -> &'static str {
    if t.is_symlink() {
        "symlink"
    } else if t.is_dir() {
        "directory"
    } else if t.is_file() {
        "regular file"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else {
        "something else"
    }
}

fn signal_number(name: &str) -> Option<libc::c_int> {
    Some(match name.trim_start_matches("SIG") {
        "TERM" => libc::SIGTERM,
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "USR1" => libc::SIGUSR1,
        "PIPE" => libc::SIGPIPE,
        _ => return None,
    })
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGABRT => "SIGABRT: an abort, e.g. a failed allocation",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGPIPE => "SIGPIPE",
        _ => "other",
    }
}

fn describe_status(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(sig)) => format!("signal {sig} ({})", signal_name(sig)),
        _ => format!("{s}"),
    }
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes in all)", &s[..end], s.len())
}

fn indent(s: &str) -> String {
    let s = s.trim_end();
    if s.is_empty() {
        return "(empty)".into();
    }
    format!(
        "\n{}",
        s.lines()
            .map(|l| format!("     | {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    )
}
