//! The binary as a user runs it: bad input is refused with exit status 2 and
//! a message naming the key, the value and what is allowed, without touching
//! any file; `digest` agrees with `fsverity digest`; `run` prints the
//! documented JSON; text from files (a recording's labels, a file name)
//! never reaches the terminal raw.

use std::path::Path;
use std::process::Command;

#[path = "common/bin.rs"]
mod bin;
#[path = "common/serial.rs"]
mod serial;
#[path = "common/tasks.rs"]
mod tasks;
// Every test that runs a workload holds it: no other test's pinned
// threads starve it (or it theirs).
use bin::{readpath, stderr};
use serial::serial;

fn tree_listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd {
            let e = e.unwrap();
            out.push(format!(
                "{} {}",
                e.file_name().to_string_lossy(),
                e.metadata().unwrap().len()
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn bad_settings_exit_2_with_a_clear_message_and_touch_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--set", "workload.queue_depth=0"],
            &["workload.queue_depth", "0", "1..=1024"],
        ),
        (
            &["--set", "workload.block_size=1000"],
            &["workload.block_size", "1000", "multiple of 4096"],
        ),
        (
            &["--set", "workload.readers=100000"],
            &["workload.readers", "100000", "1..=256"],
        ),
        (&["--set", "load.hogs=-1"], &["load.hogs", "-1", "0..=256"]),
        (
            &["--set", "pipeline.cipher=rot13"],
            &["pipeline.cipher", "rot13", "aes-256-xts"],
        ),
        (
            &["--set", "workers.mod=bound"],
            &["workers.mod", "did you mean \"workers.mode\""],
        ),
        (
            &["--set", "workload.queue_depth=abc"],
            &["workload.queue_depth", "abc", "integer"],
        ),
        (&["--set", "nonsense"], &["nonsense", "section.key=value"]),
        (
            &[
                "--set",
                "workload.engine=sync",
                "--set",
                "workload.sleep=plain",
            ],
            &["workload.sleep", "plain", "sync", "iowait"],
        ),
        (
            &["--set", "workload.reader_cpus=4096"],
            &["workload.reader_cpus", "4096"],
        ),
        (&["--duration", "soon"], &["soon", "duration"]),
    ];
    for (args, needles) in cases {
        let mut full = vec!["run"];
        full.extend_from_slice(args);
        if !args.contains(&"--duration") {
            full.extend_from_slice(&["--duration", "1s"]);
        }
        let o = readpath(&full, tmp.path());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        for n in *needles {
            assert!(err.contains(n), "{args:?}: {err:?} lacks {n:?}");
        }
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            tree_listing(tmp.path()).is_empty(),
            "{args:?}: files were written"
        );
    }
}

#[test]
fn bad_preset_file_names_file_line_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("bad.toml");
    std::fs::write(&p, "[workload]\nengine = \"uring\"\nqueue_depth = 0\n").unwrap();
    let o = readpath(
        &["run", "--preset", p.to_str().unwrap()],
        &tmp.path().join("data"),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.toml:3:"), "{err}");
    assert!(err.contains("workload.queue_depth"), "{err}");
    assert!(!tmp.path().join("data").exists());
}

#[test]
fn unwritable_data_dir_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let blocker = tmp.path().join("file");
    std::fs::write(&blocker, b"keep me").unwrap();
    let o = readpath(
        &["run", "--duration", "1s", "--set", "workload.file_size=1M"],
        &blocker.join("data"),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("data dir"), "{err}");
    assert_eq!(std::fs::read(&blocker).unwrap(), b"keep me");
}

#[test]
fn digest_matches_fsverity_digest() {
    if !readpath::sys::testing::require_tool(
        "digest_matches_fsverity_digest",
        "fsverity",
        "fsverity",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (i, size) in [0usize, 1, 4095, 4096, 4097, 300_000, 1 << 20]
        .iter()
        .enumerate()
    {
        let p = tmp.path().join(format!("f{i}"));
        let data: Vec<u8> = (0..*size).map(|j| (j * 31 + i) as u8).collect();
        std::fs::write(&p, data).unwrap();
        files.push(p);
    }
    for (bs, salt) in [
        ("4096", ""),
        ("1024", "abcd"),
        (
            "2048",
            "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
        ),
    ] {
        let mut args = vec!["digest", "--block-size", bs, "--salt", salt];
        let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
        args.extend(names.iter().map(|s| s.as_str()));
        let ours = readpath(&args, tmp.path());
        assert!(ours.status.success(), "{}", stderr(&ours));
        let mut theirs = Command::new("fsverity");
        theirs.arg("digest").arg(format!("--block-size={bs}"));
        if !salt.is_empty() {
            theirs.arg(format!("--salt={salt}"));
        }
        let theirs = theirs.args(&names).output().unwrap();
        assert!(theirs.status.success());
        assert_eq!(
            String::from_utf8_lossy(&ours.stdout),
            String::from_utf8_lossy(&theirs.stdout),
            "block size {bs}, salt {salt:?}"
        );
    }
    // Bad parameters are input errors.
    let o = readpath(&["digest", "--block-size", "1000", "x"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn run_json_has_the_documented_fields() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("intervals.jsonl");
    let o = readpath(
        &[
            "run",
            "--duration",
            "600ms",
            "--interval",
            "100ms",
            "--format",
            "json",
            "--set",
            "workload.file_size=2M",
            "--interval-log",
            log.to_str().unwrap(),
        ],
        &tmp.path().join("data"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in [
        "settings",
        "duration_s",
        "bytes",
        "reads",
        "throughput_mib_s",
        "iops",
        "latency_us",
        "stages_us",
        "run_delay_us_total",
        "verity_failures",
        "notices",
        "machine",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    for k in ["p50", "p90", "p99", "p999", "max"] {
        assert!(v["latency_us"][k].is_number(), "latency_us.{k}");
        for st in ["device", "queue", "decrypt", "verify"] {
            assert!(v["stages_us"][st][k].is_number(), "stages_us.{st}.{k}");
        }
    }
    assert!(v["reads"].as_u64().unwrap() > 0);
    assert_eq!(v["verity_failures"].as_u64(), Some(0));
    let lines = std::fs::read_to_string(&log).unwrap();
    let n = lines.lines().count();
    assert!(n >= 3, "{n} interval lines");
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert!(first.get("latency_us").is_some() && first.get("t_s").is_some());
}

#[test]
fn shipped_default_preset_is_the_default_settings() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/presets/default.toml");
    let p = readpath::scenario::preset::load_file(std::path::Path::new(path)).unwrap();
    assert_eq!(p.settings, readpath::settings::Settings::default());
    // The embedded copy is the same file.
    let (shipped, _) = readpath::scenario::preset::resolve("default").unwrap();
    assert_eq!(shipped.settings, p.settings);
}

#[test]
fn explorer_without_a_terminal_points_to_run() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [&[][..], &["tui"][..]] {
        let o = readpath(args, tmp.path());
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("needs a terminal") && e.contains("readpath run"),
            "{e}"
        );
        assert!(tree_listing(tmp.path()).is_empty(), "nothing written");
    }
    let o = readpath(&["tui", "--fps", "100"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("0.5..=30"), "{}", stderr(&o));
}

#[test]
fn bench_crypto_reports_every_primitive_next_to_openssl() {
    let _g = serial();
    if !readpath::sys::testing::require_tool(
        "bench_crypto_reports_every_primitive",
        "openssl",
        "openssl",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let o = readpath(
        &[
            "bench",
            "crypto",
            "--seconds",
            "20ms",
            "--rounds",
            "1",
            "--format",
            "json",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let results = j["results"].as_array().unwrap();
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    // sha256-2x only where the CPU has the SHA extensions.
    let sha_ni = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .contains(" sha_ni");
    let mut want = vec![
        "aes-256-xts",
        "aes-256-xts-soft",
        "aes-256-xts-ti",
        "aes-256-xts-ni4",
        "adiantum",
        "sha256",
        "sha256-generic",
    ];
    if sha_ni {
        want.push("sha256-2x");
    }
    want.push("fsverity-verify");
    // The page-cache readers' copy (a memfd `pread`), for bench/paths.sh.
    want.push("kernel-copy");
    assert_eq!(names, want);
    for r in results {
        assert!(r["bytes_per_s"].as_f64().unwrap() > 1e6, "{r}");
    }
    // openssl is installed by .ci/run: the primitives it has are compared
    // (both AES-NI loops against its aes-256-xts).
    for r in results.iter().filter(|r| {
        ["aes-256-xts", "aes-256-xts-ni4", "sha256"].contains(&r["name"].as_str().unwrap())
    }) {
        assert!(r["openssl_bytes_per_s"].as_f64().unwrap() > 1e6, "{r}");
        assert!(r["ratio"].as_f64().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn run_without_latency_recording_still_counts_every_read() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let o = readpath(
        &[
            "run",
            "--no-latency",
            "--duration",
            "1s",
            "--set",
            "workload.file_size=8M",
            // No page cache: every read is its own bio, decrypted and verified.
            "--set",
            "cache.size=0",
            "--format",
            "json",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let reads = j["reads"].as_u64().unwrap();
    let misses = j["page_cache"]["misses"].as_u64().unwrap();
    assert!(misses > 0 && misses <= reads);
    assert!(reads > 0);
    assert_eq!(j["latency_us"]["count"], 0, "no latency recorded");
    // Each missed page is decrypted and verified (plus the rare readahead
    // window a read next to the previous one starts).
    let decrypted = j["decrypted_units"].as_u64().unwrap();
    assert!(
        decrypted >= misses,
        "{decrypted} decrypted, {misses} misses"
    );
    assert_eq!(j["verified_blocks"].as_u64().unwrap(), decrypted);
    assert_eq!(j["verity_failures"], 0);
}

#[test]
fn demo_names_and_scripts_are_checked_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let o = readpath(&["demo", "nope"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("no demo named \"nope\"") && e.contains("fsverity-bound-vs-unbound"),
        "{e}"
    );
    let bad = tmp.path().join("bad.toml");
    std::fs::write(
        &bad,
        "version = 1\nname = \"x\"\n[[step]]\nset = { \"workload.queue_depth\" = 0 }\n",
    )
    .unwrap();
    let o = readpath(&["demo", bad.to_str().unwrap()], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("step 1: set: workload.queue_depth = 0"),
        "{}",
        stderr(&o)
    );
    // A valid demo still needs a terminal; nothing is written without one.
    let o = readpath(&["demo", "io_uring-qd1-iowait"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("needs a terminal"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
}

/// An OS error quoted by its wrapper is printed once, not twice; a data dir
/// that is a file says so.
#[test]
fn a_data_dir_that_is_a_file_is_named_and_errors_print_once() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("afile");
    std::fs::write(&file, b"x").unwrap();
    let o = readpath(&["prepare", "--size", "1M"], &file);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("is a file, not a directory"), "{e}");
    assert!(!e.contains("os error"), "{e}");
    // A directory given as a recording: one message, exit 2.
    let o = readpath(
        &[
            "plot",
            tmp.path().to_str().unwrap(),
            "--out",
            "-",
            "--format",
            "csv",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.matches("is a directory").count(), 1, "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

/// `readpath demo` with no name lists every shipped demo (name, steps,
/// length, what it shows) and touches nothing.
#[test]
fn demo_without_a_name_lists_the_demos() {
    let dir = tempfile::tempdir().unwrap();
    let o = readpath(&["demo"], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for (name, _) in readpath::scenario::demo::SHIPPED {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name}  (")))
            .unwrap_or_else(|| panic!("{name} not listed:\n{out}"));
        assert!(line.contains(" steps, ") && line.ends_with(')'), "{line}");
    }
    assert!(out.lines().all(|l| l.chars().count() <= 80), "{out}");
    assert!(tree_listing(dir.path()).is_empty());
}

/// Splits one CSV record (RFC 4180: quoted fields, `""` inside them).
fn csv_record(line: &str) -> Vec<String> {
    let (mut fields, mut cur, mut quoted, mut chars) =
        (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    assert!(!quoted, "an unterminated quoted field: {line:?}");
    fields.push(cur);
    fields
}

/// Text from files never reaches a terminal raw: a recording's labels
/// (escape sequences, a newline, quotes, a formula) come out of `plot
/// --format csv` as one RFC 4180 field per row, control characters
/// replaced; a file name with an escape sequence is printed by `digest`
/// with it replaced.
#[test]
fn text_from_files_cannot_drive_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile/labels-escapes.jsonl");
    let o = readpath(
        &[
            "plot",
            rec.to_str().unwrap(),
            "--format",
            "csv",
            "--out",
            "-",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !o.stdout.iter().any(|&b| b < 0x20 && b != b'\n'),
        "a control byte on stdout"
    );
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out}");
    let rows: Vec<Vec<String>> = out.lines().map(csv_record).collect();
    assert_eq!(rows.len(), 4, "the header and one row per interval: {out}");
    assert!(rows.iter().all(|r| r.len() == 9), "{rows:?}");
    assert!(
        rows[1][8].starts_with("caption: \u{fffd}]0;pwned title"),
        "{rows:?}"
    );
    assert!(rows[2][8].contains("line\u{fffd}break"), "{rows:?}");
    assert_eq!(
        rows[3][8],
        "'=HYPERLINK(\"http://example.invalid\",\"click\")"
    );

    let name = tmp.path().join("evil\x1b]0;title\x07.bin");
    std::fs::write(&name, b"data").unwrap();
    let o = readpath(&["digest", name.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.starts_with("sha256:"), "{out}");
    assert!(out.contains("evil\u{fffd}]0;title\u{fffd}.bin"), "{out:?}");
    assert!(!out.contains('\x1b') && !out.contains('\x07'), "{out:?}");
}

/// `lab` refuses what it cannot take before it downloads, builds or boots
/// anything: exit 2, the value and what is allowed named, nothing written.
#[test]
fn lab_bad_input_exits_2_naming_what_is_allowed() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["lab", "build", "--revert", "fsverity"],
            &["fsverity", "fsverity-2023, fscrypt-2018, io_uring-2023"],
        ),
        (&["lab", "build", "-j", "0"], &["0", "1..=1024"]),
        (&["lab", "bench", "ssh:box"], &["ssh:box", "vm:KERNEL"]),
        (&["lab", "bench", "vm:6.1:aes=maybe"], &["aes", "on|off"]),
        (&["lab", "fetch", "debian-99"], &["debian-99", "debian-6.1"]),
        (
            &["lab", "run", "vm:6.1:cpus=0", "--", "digest"],
            &["cpus", "1..=64"],
        ),
    ];
    for (args, needles) in cases {
        let o = readpath(args, tmp.path());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        for n in *needles {
            assert!(err.contains(n), "{args:?}: {err:?} lacks {n:?}");
        }
        assert!(
            tree_listing(tmp.path()).is_empty(),
            "{args:?}: files were written"
        );
    }
}

#[test]
fn sweep_checks_every_point_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let n = readpath_cpus();
    let too_many = format!("workload.cpus={}", n + 1);
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["--preset", "fsverity-bound-vs-unbound"],
            vec!["--across"],
        ),
        (
            vec![
                "--preset",
                "fsverity-bound-vs-unbound",
                "--across",
                "load.hogs=1,x",
            ],
            vec!["--across: load.hogs", "\"x\""],
        ),
        (
            vec![
                "--preset",
                "fsverity-bound-vs-unbound",
                "--across",
                "workers.mode=bound",
            ],
            vec!["the setting the sweep compares"],
        ),
        (
            vec![
                "--preset",
                "fsverity-bound-vs-unbound",
                "--across",
                "load.hogs=1",
                "--across",
                "load.hogs=2",
            ],
            vec!["named twice"],
        ),
        (
            vec![
                "--preset",
                "fsverity-bound-vs-unbound",
                "--across",
                "load.hogs=1",
                "--across",
                "workload.readers=1",
                "--across",
                "workload.queue_depth=1",
            ],
            vec!["one or two axes"],
        ),
        (
            vec![
                "--preset",
                "io_uring-qd1-iowait",
                "--across",
                "load.hogs=0,1",
            ],
            vec!["workload.sleep has 3 values", "exactly two"],
        ),
        (
            vec![
                "--preset",
                "fsverity-bound-vs-unbound",
                "--across",
                "load.hogs=0,1",
                "--metric",
                "speed",
            ],
            vec!["--metric \"speed\"", "run_delay_ms_per_s"],
        ),
        (
            vec![
                "--preset",
                "fsverity-bound-vs-unbound",
                "--across",
                &too_many,
            ],
            vec!["at workload.cpus=", "more than readpath may use"],
        ),
        (
            vec![
                "--preset",
                "fsverity-bound-vs-unbound",
                "--across",
                "load.hogs=0,1,2,3,4,5,6,7,8",
                "--across",
                "workload.readers=1,2,3,4,5,6,7,8",
            ],
            vec!["72 points", "at most 64"],
        ),
    ];
    for (args, needles) in cases {
        let mut full = vec!["sweep", "--duration", "1s"];
        full.extend_from_slice(&args);
        let o = readpath(&full, tmp.path());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{args:?}: {err:?} lacks {n:?}");
        }
        assert!(
            tree_listing(tmp.path()).is_empty(),
            "{args:?}: files were written"
        );
    }
}

/// The CPUs readpath may use here.
fn readpath_cpus() -> usize {
    readpath::sys::online_cpus().len()
}

/// A short sweep end to end: every point ran A and B and counted reads,
/// each cell has a verdict against the preset's published figure, the
/// report reads back, and `plot` draws its heat map.
#[test]
fn a_sweep_runs_every_point_and_plots_a_heat_map() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("sweep.json");
    let o = readpath(
        &[
            "sweep",
            "--preset",
            "fsverity-bound-vs-unbound",
            "--set",
            "workload.file_size=16M",
            "--across",
            "load.hogs=0,all",
            "--rounds",
            "2",
            "--duration",
            "500ms",
            "--warmup",
            "250ms",
            "--out",
            out.to_str().unwrap(),
        ],
        tmp.path(),
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}{text}", stderr(&o));
    assert!(
        text.contains("change of run_delay ms/s, unbound -> bound"),
        "{text}"
    );
    assert!(text.contains("hogs=all"), "{text}");
    let r = readpath::output::sweep::parse(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(r.points.len(), 2);
    for p in &r.points {
        assert_eq!(p.variants.len(), 2);
        for v in &p.variants {
            assert_eq!(v.rounds.len(), 2, "{:?}", p.at);
            assert!(
                v.rounds.iter().all(|w| w.reads > 0),
                "{:?} {}: a round counted no read: {:?}",
                p.at,
                v.value,
                v.rounds
            );
            assert_eq!(v.failed_reads, 0);
        }
        assert_eq!(p.verdict.published.as_deref(), Some("-96%"));
    }
    let png = tmp.path().join("map.svg");
    let o = readpath(
        &[
            "plot",
            out.to_str().unwrap(),
            "--out",
            png.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let svg = std::fs::read_to_string(&png).unwrap();
    assert!(svg.contains("<svg") && svg.contains("hogs"), "{svg}");
}

/// `workload.cpus = 1` and `load.hogs = "all"`: every thread the run
/// starts (readers, both queues' workers, interrupt threads, hogs) is
/// allowed exactly the first CPU readpath may use, and there is one hog;
/// read from /proc while the run is under way.
#[test]
fn workload_cpus_holds_every_thread_of_the_run() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let first = readpath::sys::online_cpus()[0];
    let child = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .arg("--data-dir")
        .arg(tmp.path())
        .args([
            "run",
            "--duration",
            "4s",
            "--set",
            "workload.file_size=16M",
            "--set",
            "workload.cpus=1",
            "--set",
            "load.hogs=all",
            "--set",
            "workload.readers=2",
            "--set",
            "workload.completion=irq",
            "--set",
            "workers.mode=unbound",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the workload's threads (after the dataset is made: seconds
    // on a busy machine) and for each to have set its affinity (a thread
    // pins itself just after it starts), reading each one's affinity; the
    // last reading before the run ends is what is checked.
    let mut child = child;
    let mut seen: Vec<(String, String)> = Vec::new();
    let is_work = |c: &str| {
        ["reader-", "hog-", "fscrypt", "fsverity", "irq"]
            .iter()
            .any(|p| c.starts_with(p))
    };
    while child.try_wait().unwrap().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(50));
        seen = tasks::affinities(child.id());
        if seen.iter().any(|(c, _)| c.starts_with("hog-"))
            && seen.iter().any(|(c, _)| c.starts_with("reader-"))
            && seen
                .iter()
                .filter(|(c, _)| is_work(c))
                .all(|(_, a)| *a == first.to_string())
        {
            break;
        }
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let work: Vec<&(String, String)> = seen.iter().filter(|(c, _)| is_work(c)).collect();
    assert!(
        work.iter().any(|(c, _)| c.starts_with("reader-")),
        "no reader seen: {seen:?}"
    );
    for (comm, allowed) in &work {
        assert_eq!(
            allowed,
            &first.to_string(),
            "{comm} may run on {allowed}: {seen:?}"
        );
    }
    let hogs = work.iter().filter(|(c, _)| c.starts_with("hog-")).count();
    assert_eq!(hogs, 1, "one hog per CPU of the run: {seen:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("CPUs: {first} (workload.cpus)"))
            && text.contains("1 hogs at nice 0 (one per CPU the run may use)"),
        "{text}"
    );
}
