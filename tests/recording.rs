//! Recordings: a run recorded with `--record` reads back with every
//! interval (they add up to the run's summary), a recording round-trips
//! exactly, a newer format or a foreign file is refused with a clear
//! message (exit 2), and replaying the fixture recording draws the expected
//! screens, with markers and the recorded baseline, at any position.

use std::path::Path;
use std::process::Command;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use readpath::metrics::Event;
use readpath::output::recording::{self, Header, Recording, RecordingError};
use readpath::settings::Settings;
use readpath::sys::MachineInfo;
use readpath::tui::fixture::{features, record};
use readpath::tui::render::{Look, render};
use readpath::tui::replay::ReplayDriver;
use readpath::tui::theme::{Theme, ThemeName};

fn header() -> Header {
    Header {
        format: recording::FORMAT.into(),
        version: recording::VERSION,
        command: "tui".into(),
        started_unix_s: 1_796_000_000,
        preset: Some("fsverity-bound-vs-unbound".into()),
        settings: Settings::default(),
        effective_settings: Settings::default(),
        features: features(),
        machine: MachineInfo {
            cpus: 2,
            ..MachineInfo::default()
        },
        demo: None,
    }
}

#[test]
fn a_demo_recording_keeps_its_headline_numbers_for_replay() {
    use readpath::scenario::demo::Headline;
    let tmp = tempfile::tempdir().unwrap();
    let demo = readpath::scenario::demo::resolve("fsverity-bound-vs-unbound", 2).unwrap();
    let mut h = header();
    h.command = "demo".into();
    h.demo = Some(recording::DemoHeader::of(&demo));
    let mut rec = fixture_recording();
    rec.header = h.clone();
    let path = tmp.path().join("demo.jsonl");
    let out = readpath::output::file::OutputPath::check("--record", &path, &[]).unwrap();
    let mut w = recording::Writer::create(&out, &h).unwrap();
    for r in &rec.records {
        w.record(r).unwrap();
    }
    w.finish().unwrap();
    let back = recording::read(&path).unwrap();
    assert_eq!(back.header.demo, h.demo);
    let app = ReplayDriver::new(back, 1.0).fresh_app();
    assert_eq!(app.headline, [Headline::RunDelay, Headline::QueueP99]);
    // A name that is no metric is refused by name, exit 2.
    let text =
        std::fs::read_to_string(&path)
            .unwrap()
            .replacen("\"queue_p99\"", "\"queue_p999\"", 1);
    std::fs::write(&path, text).unwrap();
    let e = recording::read(&path).unwrap_err().to_string();
    assert!(
        e.contains("demo.headline") && e.contains("queue_p999") && e.contains("allowed"),
        "{e}"
    );
}

/// The snapshot fixture as a recording, `b` pressed at 29 s.
fn fixture_recording() -> Recording {
    let records = (0..180)
        .map(|seq| {
            let mut r = record(seq);
            if seq == 116 {
                r.events.push(Event {
                    t_s: 29.1,
                    label: "baseline".into(),
                });
            }
            r
        })
        .collect();
    Recording {
        header: header(),
        records,
    }
}

fn write(path: &Path, rec: &Recording) {
    let out = readpath::output::file::OutputPath::check("--record", path, &[]).unwrap();
    let mut w = recording::Writer::create(&out, &rec.header).unwrap();
    for r in &rec.records {
        w.record(r).unwrap();
    }
    assert_eq!(w.finish().unwrap(), path);
}

#[test]
fn a_recording_round_trips_and_leaves_no_temporary_file() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("talk.jsonl");
    let rec = fixture_recording();
    write(&path, &rec);
    assert_eq!(recording::read(&path).unwrap(), rec);
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["talk.jsonl"]);
}

#[test]
fn newer_or_foreign_files_are_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let newer = tmp.path().join("newer.jsonl");
    std::fs::write(
        &newer,
        "{\"format\":\"readpath-recording\",\"version\":2,\"something\":\"new\"}\n",
    )
    .unwrap();
    let e = recording::read(&newer).unwrap_err();
    assert!(matches!(e, RecordingError::Newer { found: 2, .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("version 2") && msg.contains("upgrade readpath"),
        "{msg}"
    );
    let foreign = tmp.path().join("foreign.jsonl");
    std::fs::write(&foreign, "{\"hello\": 1}\n").unwrap();
    let e = recording::read(&foreign).unwrap_err().to_string();
    assert!(
        e.contains("foreign.jsonl:1") && e.contains("not a readpath recording"),
        "{e}"
    );
    // The binary: exit 2 with the message, before asking for a terminal.
    for (f, want) in [
        (&newer, "upgrade readpath"),
        (&foreign, "not a readpath recording"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
            .arg("replay")
            .arg(f)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains(want));
    }
}

fn screen(driver: &mut ReplayDriver, app: &readpath::tui::app::App) -> String {
    let _ = driver;
    let look = Look {
        theme: Theme::named(ThemeName::Dark),
        ascii: false,
    };
    let mut t = Terminal::new(TestBackend::new(160, 48)).unwrap();
    t.draw(|f| render(app, &look, f.area(), f.buffer_mut()))
        .unwrap();
    readpath::tui::fixture::screen_text(t.backend().buffer())
}

#[test]
fn replaying_the_fixture_draws_markers_and_the_recorded_baseline() {
    let mut d = ReplayDriver::new(fixture_recording(), 2.0);
    let mut app = d.fresh_app();
    // At 20 s: no change yet, no baseline.
    d.seek(&mut app, 20.0);
    let s = screen(&mut d, &app);
    assert!(s.contains("replay 2x"), "{s}");
    assert!(!s.contains("mode: unbound -> bound"), "{s}");
    assert!(s.contains("no baseline yet"), "{s}");
    // At 45 s (the end): the change marker, the baseline from 29 s, and the
    // settings panel following the recorded change.
    d.seek(&mut app, 45.0);
    assert!(app.baseline.is_some());
    assert_eq!(
        app.settings.workers.mode,
        readpath::settings::WorkerMode::Bound
    );
    let s = screen(&mut d, &app);
    assert!(s.contains("mode: unbound -> bound"), "{s}");
    assert!(
        s.contains("-97%"),
        "run_delay change from the recorded baseline:\n{s}"
    );
    insta::assert_snapshot!("replay_45s_160x48", s);
    // Moving back rebuilds the state: the baseline is gone again.
    d.seek(&mut app, 10.0);
    assert!(app.baseline.is_none());
    assert!(app.elapsed_s <= 10.0 + 1e-9);
}

#[test]
fn run_record_writes_every_interval() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("run.jsonl");
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .arg("--data-dir")
        .arg(tmp.path())
        .args([
            "run",
            "--duration",
            "1500ms",
            "--set",
            "workload.file_size=8M",
            "--format",
            "json",
            "--record",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rec = recording::read(&path).unwrap();
    assert_eq!(rec.header.command, "run");
    assert_eq!(rec.header.settings.workload.file_size, 8 << 20);
    assert!(rec.records.len() >= 5, "{} intervals", rec.records.len());
    let reads: u64 = rec.records.iter().map(|r| r.reads).sum();
    assert_eq!(
        reads,
        summary["reads"].as_u64().unwrap(),
        "the intervals add up to the run"
    );
    // A recording target in a missing directory is refused before anything runs.
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .arg("--data-dir")
        .arg(tmp.path())
        .args(["run", "--record", "/nonexistent/dir/x.jsonl"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--record"));
}

#[test]
fn plot_writes_a_valid_svg_a_png_of_the_requested_size_and_csv() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("talk.jsonl");
    write(&path, &fixture_recording());
    let plot = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_readpath"))
            .arg("plot")
            .arg(&path)
            .args(args)
            .output()
            .unwrap()
    };
    let svg = tmp.path().join("chart.svg");
    let o = plot(&["--out", svg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // It says what it wrote.
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.starts_with("readpath plot: wrote ") && said.contains("SVG 1200x900"),
        "{said}"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    // The slide states its result: the change from the first phase to the
    // last, per series, with units (the fixture's run_delay falls 36 ->
    // 1.2 ms/s when workers go bound).
    assert!(
        text.contains("run_delay 36 ms/s -&gt; 1.20 ms/s, -97%"),
        "no result on the chart"
    );
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    for want in [
        "latency (us, log)",
        "throughput (MiB/s)",
        "scheduler latency",
        "mode: unbound -&gt; bound",
        "baseline",
    ] {
        assert!(text.contains(want), "svg lacks {want:?}");
    }
    // PNG (rsvg-convert is installed by .ci/run): the size asked for.
    let png = tmp.path().join("chart.png");
    if !readpath::sys::require_tool("plot png", "rsvg-convert", "librsvg2-bin") {
        return;
    }
    let o = plot(&["--out", png.to_str().unwrap(), "--size", "800x600"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let head = std::fs::read(&png).unwrap();
    assert_eq!(&head[..8], b"\x89PNG\r\n\x1a\n");
    let w = u32::from_be_bytes(head[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(head[20..24].try_into().unwrap());
    assert_eq!((w, h), (800, 600));
    // --metric picks the charts.
    let one = tmp.path().join("one.svg");
    let o = plot(&["--out", one.to_str().unwrap(), "--metric", "sched"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&one).unwrap();
    assert!(text.contains("scheduler latency") && !text.contains("throughput (MiB/s)"));
    std::fs::remove_file(&one).unwrap();
    assert_eq!(
        plot(&["--out", "x.svg", "--metric", "iops"]).status.code(),
        Some(2)
    );
    // --no-captions: the same charts without the demo's captions.
    let bare = tmp.path().join("bare.svg");
    let o = plot(&["--out", bare.to_str().unwrap(), "--no-captions"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!std::fs::read_to_string(&bare).unwrap().contains("[1]"));
    std::fs::remove_file(&bare).unwrap();
    // CSV: a header and one row per interval.
    let o = plot(&["--format", "csv", "--out", "-"]);
    let csv = String::from_utf8_lossy(&o.stdout);
    assert!(csv.starts_with("t_s,throughput_mib_s,iops,p50_us"), "{csv}");
    assert_eq!(csv.lines().count(), 181);
    assert!(csv.contains("workers.mode: unbound -> bound"));
    // Bad requests: exit 2, nothing written.
    for args in [
        &["--out", "/tmp/x.gif"][..],
        &["--out", "x.svg", "--size", "10x10"][..],
    ] {
        assert_eq!(plot(args).status.code(), Some(2), "{args:?}");
    }
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn a_recorded_demo_replays_its_captions() {
    let mut rec = fixture_recording();
    rec.records[20].events.push(Event {
        t_s: 5.1,
        label: "caption: unbound: any CPU may pick up the work".into(),
    });
    let mut d = ReplayDriver::new(rec, 1.0);
    let mut app = d.fresh_app();
    d.seek(&mut app, 10.0);
    assert_eq!(
        app.caption.as_deref(),
        Some("unbound: any CPU may pick up the work")
    );
    assert!(
        !app.markers.iter().any(|m| m.label.contains("caption")),
        "captions are not chart markers"
    );
    let s = screen(&mut d, &app);
    assert!(s.contains("▶ unbound: any CPU may pick up the work"), "{s}");
}

#[test]
fn shipped_demo_recordings_replay() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("demo-") && name.ends_with(".jsonl")) {
            continue;
        }
        n += 1;
        let rec = recording::read(&p).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rec.header.command, "demo", "{name}");
        let captions = rec
            .records
            .iter()
            .flat_map(|r| &r.events)
            .filter(|e| e.label.starts_with("caption: "))
            .count();
        assert!(captions >= 2, "{name}: {captions} captions");
        assert!(
            rec.records
                .iter()
                .flat_map(|r| &r.events)
                .any(|e| e.label == "baseline"),
            "{name} marks a baseline"
        );
        let mut d = ReplayDriver::new(rec, 1.0);
        let mut app = d.fresh_app();
        let end = d.length_s();
        d.seek(&mut app, end);
        assert!(app.baseline.is_some() && app.now.is_some(), "{name}");
    }
    assert!(
        n >= 3,
        "at least three demo recordings in assets/, found {n}"
    );
}
