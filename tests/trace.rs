//! Perfetto traces (`--trace`): what `run` and `compare` write reads with
//! Perfetto's own schema (the `perfetto` Python package's
//! perfetto_trace_pb2, through tests/perfetto/check_trace.py), with no
//! malformed track, slice or flow, and holds every work item the run
//! counted, each variant of a compare as a process of its own; at its cap a
//! trace drops spans and says how many, in the file and on the terminal.
//! Outside CI, without the package, the tests skip and say why; `.ci/run`
//! installs it. A remote run's trace is tested with the fake ssh of
//! tests/remote.rs.

use std::path::Path;
use std::process::Command;

#[path = "common/bin.rs"]
mod bin;
#[path = "common/serial.rs"]
mod serial;
#[path = "common/skip.rs"]
mod skip;
use bin::{readpath, stderr};
use serial::serial;

/// The trace as tests/perfetto/check_trace.py reads it with Perfetto's
/// schema; None (the test skips, or fails under CI) without the package.
fn check(test: &str, trace: &Path) -> Option<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto/check_trace.py");
    let o = Command::new("python3").arg(script).arg(trace).output();
    let o = match o {
        Ok(o) => o,
        Err(e) => {
            skip::skip(test, &format!("python3 does not run: {e}"), true);
            return None;
        }
    };
    if o.status.code() == Some(3) {
        skip::skip(
            test,
            &format!(
                "Perfetto's schema is not installed (pip install perfetto): {}",
                stderr(&o).trim()
            ),
            true,
        );
        return None;
    }
    assert!(o.status.success(), "check_trace.py: {}", stderr(&o));
    Some(serde_json::from_slice(&o.stdout).expect("check_trace.py prints JSON"))
}

#[test]
fn a_run_trace_reads_with_perfettos_schema_and_holds_every_item_the_run_counted() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("run.pftrace");
    let o = readpath(
        &[
            "run",
            "--duration",
            "1500ms",
            "--format",
            "json",
            "--set",
            "workload.file_size=4M",
            "--set",
            "load.hogs=1",
            "--trace",
            trace.to_str().unwrap(),
        ],
        &tmp.path().join("data"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("readpath: trace ")
            && err.contains("work items")
            && err.contains("ui.perfetto.dev"),
        "{err}"
    );
    assert!(!err.contains("dropped"), "{err}");
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let Some(t) = check("a_run_trace", &trace) else {
        return;
    };
    assert_eq!(t["problems"], serde_json::json!({}), "{t}");
    let procs = t["processes"].as_object().unwrap();
    assert_eq!(procs.len(), 1, "{t}");
    let p = &procs["readpath: run"];
    // The default plan: decrypt on an unbound queue, then verify on a
    // bound one; every item queued, so one queue wait per item.
    let queued = summary["stages_us"]["queue"]["count"].as_u64().unwrap();
    assert!(queued > 100, "{summary}");
    assert_eq!(p["items_total"].as_u64(), Some(queued), "{t}");
    assert_eq!(
        p["items"]["decrypt"].as_u64().unwrap() + p["items"]["verify"].as_u64().unwrap(),
        queued
    );
    assert_eq!(t["flows"].as_u64(), Some(queued), "a flow per item");
    // A counter value per interval, for each of the six counters.
    let intervals = summary["intervals"].as_u64().unwrap();
    for c in [
        "throughput (MiB/s)",
        "latency p50 (us)",
        "latency p99 (us)",
        "latency p99.9 (us)",
        "queue p99 (us)",
        "run_delay (ms/s)",
    ] {
        let n = p["counters"][c].as_u64().unwrap_or(0);
        assert!(
            n + 1 >= intervals && n <= intervals,
            "{c}: {n} of {intervals}"
        );
    }
    // The reader's sleeps and the hog's time on a CPU, each on its thread.
    let threads: Vec<&str> = p["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(threads.contains(&"reader-0"), "{threads:?}");
    assert!(threads.contains(&"hog-0"), "{threads:?}");
    assert!(p["other"]["sleep"].as_u64().unwrap() > 0, "{t}");
    assert!(p["other"]["on"].as_u64().unwrap() > 0, "hog spans: {t}");
    // The items' CPU tracks are this machine's CPUs (which of them the
    // scheduler used is its own choice: with a hog, all on one).
    let cpus = readpath::sys::online_cpus();
    let tracks = p["cpu_tracks"].as_array().unwrap();
    assert!(!tracks.is_empty(), "{t}");
    for c in tracks {
        let n: usize = c.as_str().unwrap()["CPU ".len()..]
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("a CPU track named {c}"));
        assert!(cpus.contains(&n), "{c} is no online CPU: {t}");
    }
}

#[test]
fn a_compare_trace_holds_each_variant_as_a_process_with_its_markers() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("ab.pftrace");
    let o = readpath(
        &[
            "compare",
            "--vary",
            "workers.mode=unbound,bound",
            "--rounds",
            "1",
            "--duration",
            "500ms",
            "--warmup",
            "0s",
            "--set",
            "workload.file_size=4M",
            "--trace",
            trace.to_str().unwrap(),
        ],
        &tmp.path().join("data"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let Some(t) = check("a_compare_trace", &trace) else {
        return;
    };
    assert_eq!(t["problems"], serde_json::json!({}), "{t}");
    let procs = t["processes"].as_object().unwrap();
    let mut names: Vec<&String> = procs.keys().collect();
    names.sort();
    assert_eq!(
        names,
        ["workers.mode = bound", "workers.mode = unbound"],
        "{t}"
    );
    for (name, p) in procs {
        assert!(p["items_total"].as_u64().unwrap() > 10, "{name}: {p}");
        let markers = p["markers"].as_array().unwrap();
        assert!(
            markers
                .iter()
                .any(|m| m.as_str().unwrap().contains(name.as_str())),
            "{name}: its switch is a marker: {markers:?}"
        );
    }
}

#[test]
fn a_trace_at_its_cap_drops_spans_and_says_so_in_the_file_and_on_the_terminal() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("small.pftrace");
    let o = readpath(
        &[
            "run",
            "--duration",
            "1s",
            "--set",
            "workload.file_size=4M",
            "--trace",
            trace.to_str().unwrap(),
            "--trace-max",
            "64K",
        ],
        &tmp.path().join("data"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("the trace dropped") && err.contains("past its cap of 64 KiB"),
        "{err}"
    );
    let size = std::fs::metadata(&trace).unwrap().len();
    assert!(size <= 64 * 1024, "{size} bytes");
    let Some(t) = check("a_trace_at_its_cap", &trace) else {
        return;
    };
    assert_eq!(t["problems"], serde_json::json!({}), "{t}");
    let notes = t["notes"].as_array().unwrap();
    assert!(
        notes.len() == 1 && notes[0].as_str().unwrap().contains("past its cap"),
        "{notes:?}"
    );
}

#[test]
fn bad_trace_options_exit_2_and_name_what_is_allowed() {
    let tmp = tempfile::tempdir().unwrap();
    let o = readpath(
        &["run", "--trace", "x.pftrace", "--trace-max", "1K"],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("allowed a size from 64K to 16G"),
        "{}",
        stderr(&o)
    );
    assert!(!tmp.path().join("x.pftrace").exists());
}

/// `run --record FILE --timeline`: every interval of the recording
/// carries its spans (no trace file needed), and `plot --timeline` draws a
/// window of them saying as many items as the recording's spans hold
/// there; `--timeline` without `--record` is refused, exit 2.
#[test]
fn a_run_recorded_with_its_timeline_plots_its_lanes_with_the_recordings_own_counts() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let rec_path = tmp.path().join("run.jsonl");
    let o = readpath(
        &[
            "run",
            "--duration",
            "1500ms",
            "--set",
            "workload.file_size=4M",
            "--record",
            rec_path.to_str().unwrap(),
            "--timeline",
        ],
        &tmp.path().join("data"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rec = readpath::output::recording::read(&rec_path).unwrap();
    assert!(rec.records.len() >= 4, "{} intervals", rec.records.len());
    assert!(
        rec.records.iter().all(|r| r.timeline.is_some()),
        "every interval carries its timeline"
    );
    // The items that start in 0.5-0.7 s, as the recording holds them.
    let (from, to) = (500_000_000u64, 700_000_000u64);
    let items = rec
        .records
        .iter()
        .flat_map(|r| &r.timeline.as_ref().unwrap().spans)
        .filter(|s| s.kind.is_item() && (from..to).contains(&s.start_ns))
        .count();
    assert!(items > 0, "no item in the window");
    let svg = tmp.path().join("lanes.svg");
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args([
            "plot",
            rec_path.to_str().unwrap(),
            "--timeline",
            "--at",
            "0.5s",
        ])
        .arg("--out")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&svg).unwrap();
    let want = format!("{items} items, ");
    assert!(text.contains(&want), "no {want:?} in the picture");
    // Without a recording to keep the spans in: refused by clap, exit 2.
    let o = readpath(&["run", "--timeline"], &tmp.path().join("data"));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--record"), "{}", stderr(&o));
}
