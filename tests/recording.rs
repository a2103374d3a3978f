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
    let out = readpath::files::OutputPath::check("--record", &path, &[]).unwrap();
    let mut w = recording::Writer::create(&out, &h).unwrap();
    for r in &rec.records {
        w.record(r).unwrap();
    }
    w.finish().unwrap();
    let back = recording::read(&path).unwrap();
    assert_eq!(back.header.demo, h.demo);
    let app = ReplayDriver::new(back, 1.0).fresh_app();
    assert_eq!(
        app.show.headline(),
        [Headline::RunDelay, Headline::QueueP99]
    );
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
    let out = readpath::files::OutputPath::check("--record", path, &[]).unwrap();
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

/// A recording is gzip unless its name ends in `.jsonl`; both hold the
/// histograms in HdrHistogram's encoding and read back to the same records
/// (the version-1 pairs read too: the shipped demo recordings); a damaged
/// gzip stream is refused by line.
#[test]
fn a_recording_is_compressed_unless_named_jsonl_and_reads_back_either_way() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = fixture_recording();
    let (gz, plain) = (tmp.path().join("talk.rec"), tmp.path().join("talk.jsonl"));
    write(&gz, &rec);
    write(&plain, &rec);
    let (gz_bytes, plain_bytes) = (std::fs::read(&gz).unwrap(), std::fs::read(&plain).unwrap());
    assert_eq!(&gz_bytes[..2], [0x1f, 0x8b], "gzip magic");
    let text = String::from_utf8(plain_bytes.clone()).unwrap();
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .contains("\"latency_hist\":\"HISTF"),
        "{text:.400}"
    );
    assert!(
        gz_bytes.len() * 3 < plain_bytes.len(),
        "{} vs {}",
        gz_bytes.len(),
        plain_bytes.len()
    );
    assert_eq!(recording::read(&gz).unwrap(), rec);
    assert_eq!(recording::read(&plain).unwrap(), rec);
    // Cut short: the line it breaks on is named.
    let cut = tmp.path().join("cut.rec");
    std::fs::write(&cut, &gz_bytes[..gz_bytes.len() / 2]).unwrap();
    let e = recording::read(&cut).unwrap_err();
    assert!(e.is_bad_input(), "{e}");
    let e = e.to_string();
    assert!(e.contains("cut.rec:") && e.contains("damaged gzip"), "{e}");
}

/// `plot --format hlog`: an HdrHistogram interval log the library's own
/// reader parses, one untagged (latency) and one `queue_wait` histogram per
/// interval, each decoding to exactly the recording's buckets.
#[test]
fn plot_writes_an_interval_log_the_hdrhistogram_reader_reads() {
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    let tmp = tempfile::tempdir().unwrap();
    let rec = fixture_recording();
    let path = tmp.path().join("talk.rec");
    write(&path, &rec);
    let hlog = tmp.path().join("talk.hlog");
    let out = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .args(["plot", "--format", "hlog", "--out"])
        .arg(&hlog)
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read(&hlog).unwrap();
    let mut start = None;
    let mut hists = Vec::new();
    for e in IntervalLogIterator::new(&text) {
        match e.unwrap() {
            LogEntry::StartTime(t) => start = Some(t),
            LogEntry::Interval(i) => hists.push((
                i.tag().map(|t| t.as_str().to_string()),
                i.start_timestamp().as_secs_f64(),
                i.encoded_histogram().to_string(),
            )),
            _ => {}
        }
    }
    assert_eq!(start.unwrap().as_secs(), rec.header.started_unix_s);
    assert_eq!(hists.len(), 2 * rec.records.len());
    for (r, pair) in rec.records.iter().zip(hists.chunks(2)) {
        for ((tag, from, b64), (want_tag, want)) in pair
            .iter()
            .zip([(None, &r.latency_hist), (Some("queue_wait"), &r.queue_hist)])
        {
            assert_eq!(tag.as_deref(), want_tag);
            assert!(
                (from - (r.t_s - r.interval_s)).abs() < 0.001,
                "{from} vs {}",
                r.t_s
            );
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap();
            let h: hdrhistogram::Histogram<u64> =
                Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
            let got: Vec<(u64, u64)> = h
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect();
            assert_eq!(&got, &want.0);
        }
    }
}

#[test]
fn newer_or_foreign_files_are_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let newer = tmp.path().join("newer.jsonl");
    std::fs::write(
        &newer,
        "{\"format\":\"readpath-recording\",\"version\":3,\"something\":\"new\"}\n",
    )
    .unwrap();
    let e = recording::read(&newer).unwrap_err();
    assert!(matches!(e, RecordingError::Newer { found: 3, .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("version 3") && msg.contains("upgrade readpath"),
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
    assert!(app.baseline.get().is_some());
    assert_eq!(
        app.running.settings().workers.mode,
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
    assert!(app.baseline.get().is_none());
    assert!(app.window.elapsed_s() <= 10.0 + 1e-9);
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
    // Every interval the run counted, in order (how many a 1.5 s run has
    // depends on how promptly the sampler ran: not asserted).
    assert_eq!(
        rec.records.len() as u64,
        summary["intervals"].as_u64().unwrap(),
        "every interval recorded"
    );
    assert!(rec.records.len() >= 2, "{} intervals", rec.records.len());
    assert!(
        rec.records
            .iter()
            .enumerate()
            .all(|(i, r)| r.seq == i as u64),
        "intervals in order, none missing"
    );
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
        "read latency (",
        "throughput (MiB/s)",
        "queue wait p99 (us)",
        "run_delay (ms per s)",
        "[1] 29 s: baseline",
        "[2] 30 s: workers.mode: unbound -&gt; bound",
    ] {
        assert!(text.contains(want), "svg lacks {want:?}");
    }
    assert!(!text.contains("scheduler latency"), "the mixed-unit panel");
    // PNG (rsvg-convert is installed by .ci/run): the size asked for.
    let png = tmp.path().join("chart.png");
    if !readpath::sys::testing::require_tool("plot png", "rsvg-convert", "librsvg2-bin") {
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
    assert!(
        text.contains("queue wait p99 (us)")
            && text.contains("run_delay (ms per s)")
            && !text.contains("throughput (MiB/s)")
            && !text.contains("read latency")
    );
    // One panel by its name; --metrics is the same option.
    let o = plot(&["--out", one.to_str().unwrap(), "--metrics", "run_delay"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&one).unwrap();
    assert!(text.contains("run_delay (ms per s)") && !text.contains("queue wait"));
    std::fs::remove_file(&one).unwrap();
    // A bad name: exit 2, naming it and the allowed ones.
    let o = plot(&["--out", "x.svg", "--metric", "latency,iops"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("iops")
            && ["latency", "throughput", "queue", "run_delay", "sched"]
                .iter()
                .all(|n| e.contains(n)),
        "{e}"
    );
    // --no-captions: the same charts without the demo's captions.
    let bare = tmp.path().join("bare.svg");
    let o = plot(&["--out", bare.to_str().unwrap(), "--no-captions"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // (The fixture has no caption: its markers are still numbered.)
    assert!(
        std::fs::read_to_string(&bare)
            .unwrap()
            .contains("[1] 29 s: baseline")
    );
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

/// A `<text>` element of an SVG: where plotters put it and what it says.
#[derive(Debug)]
struct SvgText {
    x: f64,
    y: f64,
    /// `start`, `middle` or `end`.
    anchor: String,
    /// The `dy` plotters writes for the vertical anchor.
    dy: String,
    size: f64,
    rotated: bool,
    text: String,
}

impl SvgText {
    /// The box it covers, approximately: a character is 0.6 em wide.
    fn bbox(&self) -> (f64, f64, f64, f64) {
        let w = self.text.chars().count() as f64 * 0.6 * self.size;
        let x0 = match self.anchor.as_str() {
            "middle" => self.x - w / 2.0,
            "end" => self.x - w,
            _ => self.x,
        };
        let y0 = match self.dy.as_str() {
            "0.76em" => self.y,
            "0.5ex" => self.y - self.size / 2.0,
            _ => self.y - self.size,
        };
        (x0, y0, x0 + w, y0 + self.size)
    }

    fn overlaps(&self, o: &SvgText) -> bool {
        let (a, b) = (self.bbox(), o.bbox());
        a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
    }
}

/// Every `<text>` element of a plotters SVG.
fn svg_texts(svg: &str) -> Vec<SvgText> {
    let attr = |tag: &str, name: &str| -> Option<String> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(tag[at..at + tag[at..].find('"')?].to_string())
    };
    svg.split("<text")
        .skip(1)
        .map(|part| {
            let (tag, rest) = part.split_once('>').unwrap();
            let text = rest.split("</text>").next().unwrap().trim();
            SvgText {
                x: attr(tag, "x").unwrap().parse().unwrap(),
                y: attr(tag, "y").unwrap().parse().unwrap(),
                anchor: attr(tag, "text-anchor").unwrap(),
                dy: attr(tag, "dy").unwrap(),
                size: attr(tag, "font-size").unwrap().parse().unwrap(),
                rotated: attr(tag, "transform").is_some(),
                text: text
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&quot;", "\"")
                    .replace("&apos;", "'")
                    .replace("&amp;", "&"),
            }
        })
        .collect()
}

/// The fixture with demo captions: markers at 5.1 s (caption), 29.1 s
/// (baseline), 30 s (the change) and 30.5 s (caption), the last three close
/// enough that their numbers must be moved apart.
fn captioned_recording() -> Recording {
    let mut rec = fixture_recording();
    rec.records[20].events.push(Event {
        t_s: 5.1,
        label: "caption: unbound: any CPU may pick up the work".into(),
    });
    rec.records[121].events.push(Event {
        t_s: 30.5,
        label: "caption: bound: the work stays where the bio completed".into(),
    });
    rec
}

fn plot_svg(rec: &Recording, args: &[&str]) -> (std::process::Output, String) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("talk.jsonl");
    write(&path, rec);
    let svg = tmp.path().join("chart.svg");
    let o = Command::new(env!("CARGO_BIN_EXE_readpath"))
        .arg("plot")
        .arg(&path)
        .arg("--out")
        .arg(&svg)
        .args(args)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&svg).unwrap_or_default();
    (o, text)
}

/// The panel titles of a plot SVG, top to bottom, and the unit each says
/// in its parentheses.
fn titles(texts: &[SvgText]) -> Vec<(String, String)> {
    let mut t: Vec<&SvgText> = texts
        .iter()
        .filter(|t| {
            [
                "read latency (",
                "throughput (",
                "queue wait p99 (",
                "run_delay (",
            ]
            .iter()
            .any(|p| t.text.starts_with(p))
        })
        .collect();
    t.sort_by(|a, b| a.y.total_cmp(&b.y));
    t.iter()
        .map(|t| {
            let unit = t.text.split_once(" (").unwrap().1.trim_end_matches(')');
            let unit = unit.trim_end_matches(", log axis");
            (t.text.clone(), unit.to_string())
        })
        .collect()
}

/// A recording of one side of a preset's A/B (its `[compare]` key never
/// changed) is titled with that side, not as the comparison; one that
/// changed the key is titled with the preset alone.
#[test]
fn plot_titles_a_one_side_run_with_its_side() {
    // The fixture changes workers.mode at 30 s: both sides.
    let mut rec = fixture_recording();
    rec.header.preset = Some("fsverity-bound-vs-unbound".into());
    let (_, both) = plot_svg(&rec, &[]);
    // Without that change: one side.
    for r in &mut rec.records {
        r.events.retain(|e| !e.label.starts_with("workers.mode: "));
    }
    let mode = rec.header.settings.workers.mode.to_string();
    let (o, svg) = plot_svg(&rec, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = format!("readpath: fsverity-bound-vs-unbound, one side: workers.mode = {mode}");
    assert!(svg.contains(&want), "{want}");
    let svg = both;
    assert!(!svg.contains("one side"));
    assert!(
        svg.contains("readpath: fsverity-bound-vs-unbound"),
        "the preset alone"
    );
}

#[test]
fn plot_gives_every_y_axis_one_unit_said_in_its_title() {
    for size in ["1200x900", "1920x1080", "800x600"] {
        let (o, svg) = plot_svg(&captioned_recording(), &["--size", size]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let texts = svg_texts(&svg);
        let titles = titles(&texts);
        // Four panels, the queue wait and the run_delay each on its own.
        assert_eq!(titles.len(), 4, "{titles:?}");
        assert!(titles[0].0.starts_with("read latency ("), "{titles:?}");
        assert!(titles[0].0.ends_with(", log axis)"), "{titles:?}");
        assert_eq!(titles[1].0, "throughput (MiB/s)");
        assert_eq!(titles[2].0, "queue wait p99 (us)");
        assert_eq!(titles[3].0, "run_delay (ms per s)");
        for (title, unit) in &titles {
            assert!(
                ["us", "ms", "s", "MiB/s", "ms per s"].contains(&unit.as_str()),
                "{title}: one unit"
            );
            assert!(
                !(title.contains("us") && title.contains("ms")),
                "{title} mixes us and ms"
            );
        }
        // Each y axis is described with its title's unit, top to bottom.
        let mut descs: Vec<&SvgText> = texts.iter().filter(|t| t.rotated).collect();
        descs.sort_by(|a, b| a.y.total_cmp(&b.y));
        let descs: Vec<&str> = descs.iter().map(|t| t.text.as_str()).collect();
        let units: Vec<&str> = titles.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(descs, units, "{size}");
        // The tick labels are plain numbers (the unit is the axis'): no
        // "1.0ms" next to "100us".
        for t in &texts {
            let digits = t.text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            assert!(
                digits.len() == t.text.len() || digits.parse::<f64>().is_err(),
                "a tick label with its own unit: {:?}",
                t.text
            );
        }
    }
}

/// `plot --slide`: 1920x1080, every text at least twice a document's of
/// the same size (tick labels about 2% of the height: bench/plot-legibility.py
/// measures them in the PNG), four charts in two columns, a chart's
/// results in one row where they fit, their `~` said once, and nothing
/// outside the picture or on another text.
#[test]
fn plot_for_a_slide_sets_large_type_in_two_columns() {
    let (o, doc) = plot_svg(&captioned_recording(), &["--size", "1920x1080"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (o, svg) = plot_svg(&captioned_recording(), &["--slide"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        svg.contains(r#"width="1920" height="1080""#),
        "{}",
        &svg[..200.min(svg.len())]
    );
    let (doc, texts) = (svg_texts(&doc), svg_texts(&svg));
    let tick = |ts: &[SvgText]| {
        ts.iter()
            .filter(|t| t.text.parse::<f64>().is_ok())
            .map(|t| t.size)
            .fold(f64::INFINITY, f64::min)
    };
    assert!(
        tick(&texts) >= 2.0 * tick(&doc),
        "{} vs {}",
        tick(&texts),
        tick(&doc)
    );
    assert!(tick(&texts) >= 0.02 * 1080.0, "{}", tick(&texts));
    // Two columns of two charts: the titles at two places across.
    let titles: Vec<&SvgText> = texts
        .iter()
        .filter(|t| t.text.ends_with(')') && t.anchor == "middle" && t.size < 40.0)
        .collect();
    assert_eq!(titles.len(), 4, "{titles:?}");
    let mut xs: Vec<i64> = titles.iter().map(|t| t.x.round() as i64).collect();
    xs.sort();
    xs.dedup();
    assert_eq!(xs.len(), 2, "{titles:?}");
    assert!(xs[0] < 960 && xs[1] > 960, "{xs:?}");
    // The latency chart's three results in one row, short.
    let lat: Vec<&SvgText> = texts
        .iter()
        .filter(|t| {
            ["p50 ", "p99 ", "p99.9 "]
                .iter()
                .any(|p| t.text.starts_with(p))
        })
        .collect();
    assert_eq!(lat.len(), 3, "{lat:?}");
    assert!(
        lat.iter()
            .all(|t| t.y == lat[0].y && !t.text.contains("->")),
        "{lat:?}"
    );
    assert!(texts.iter().any(|t| t.text.contains("(~: within noise)")));
    for (i, a) in texts.iter().enumerate() {
        let (x0, y0, x1, y1) = a.bbox();
        if !a.rotated {
            assert!(
                x0 >= 0.0 && x1 <= 1920.0 && y0 >= 0.0 && y1 <= 1080.0,
                "{a:?} outside"
            );
        }
        for b in &texts[i + 1..] {
            if !a.rotated && !b.rotated && a.text.parse::<f64>().is_err() {
                assert!(!a.overlaps(b), "{a:?} on {b:?}");
            }
        }
    }
}

#[test]
fn plot_numbers_its_markers_above_the_data_and_lists_them_below() {
    for size in ["1200x900", "1920x1080", "800x600", "3000x900"] {
        let (o, svg) = plot_svg(&captioned_recording(), &["--size", size]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let texts = svg_texts(&svg);
        // The list under the charts, in time order; captions with their text.
        let want = [
            "[1] 5 s: unbound: any CPU may pick up the work",
            "[2] 29 s: baseline",
            "[3] 30 s: workers.mode: unbound -> bound",
            "[4] 30 s: bound: the work stays where the bio completed",
        ];
        let list_y: Vec<f64> = want
            .iter()
            .map(|w| {
                let found: Vec<&SvgText> = texts.iter().filter(|t| t.text == *w).collect();
                assert_eq!(found.len(), 1, "{size}: {w:?} once in the list");
                found[0].y
            })
            .collect();
        assert!(list_y.windows(2).all(|w| w[0] < w[1]), "{list_y:?}");
        // The labels appear nowhere else: the charts carry numbers only.
        for label in ["baseline", "unbound -> bound", "any CPU", "bio completed"] {
            let n = texts.iter().filter(|t| t.text.contains(label)).count();
            assert_eq!(n, 1, "{size}: {label:?} outside the list");
        }
        let numbers: Vec<&SvgText> = texts
            .iter()
            .filter(|t| {
                t.text.len() > 2
                    && t.text.starts_with('[')
                    && t.text.ends_with(']')
                    && t.text[1..t.text.len() - 1].parse::<u32>().is_ok()
            })
            .collect();
        // Four markers over each of four panels.
        assert_eq!(numbers.len(), 16, "{size}: {numbers:?}");
        for n in 1..=4 {
            let label = format!("[{n}]");
            assert_eq!(numbers.iter().filter(|t| t.text == label).count(), 4);
        }
        // In time order across each strip, none on another.
        for (i, a) in numbers.iter().enumerate() {
            for b in &numbers[i + 1..] {
                assert!(!a.overlaps(b), "{size}: {a:?} overlaps {b:?}");
                if (a.y - b.y).abs() < 1.0 && a.text < b.text {
                    assert!(a.x < b.x, "{size}: {a:?} after {b:?}");
                }
            }
        }
        // The results stay on the charts, top right, and no number is on
        // one.
        let results: Vec<&SvgText> = texts.iter().filter(|t| t.text.contains(" -> ")).collect();
        let results: Vec<&&SvgText> = results.iter().filter(|t| t.text.contains('%')).collect();
        assert!(results.len() >= 6, "{size}: {results:?}");
        // Each stated result carries the explorer's noise marking: the
        // fixture's flat throughput is `~` and within noise, run_delay's
        // fall (36 -> 1.2 ms/s) is not.
        assert!(
            results
                .iter()
                .any(|t| t.text.starts_with("throughput ")
                    && t.text.ends_with("~+0% (within noise)")),
            "{size}: {results:?}"
        );
        assert!(
            results
                .iter()
                .any(|t| t.text.starts_with("run_delay ") && t.text.ends_with(", -97%")),
            "{size}: {results:?}"
        );
        for r in &results {
            assert_eq!(r.anchor, "end", "{r:?}");
            for n in &numbers {
                assert!(!n.overlaps(r), "{size}: {n:?} on the result {r:?}");
            }
        }
        // Each strip lies above its panel's result: over the plotting area.
        for r in &results {
            let strip_above = numbers
                .iter()
                .filter(|n| n.bbox().3 <= r.bbox().1)
                .map(|n| r.y - n.y)
                .fold(f64::INFINITY, f64::min);
            assert!(strip_above < 120.0, "{size}: no numbers above {r:?}");
        }
    }
    // --no-captions: captions leave the charts and the list, and the
    // numbers count the other markers only.
    let (o, svg) = plot_svg(&captioned_recording(), &["--no-captions"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let texts = svg_texts(&svg);
    assert!(texts.iter().any(|t| t.text == "[1] 29 s: baseline"));
    assert!(
        texts
            .iter()
            .any(|t| t.text == "[2] 30 s: workers.mode: unbound -> bound")
    );
    assert!(!texts.iter().any(|t| t.text.contains("[3]")));
    assert!(!svg.contains("any CPU") && !svg.contains("bio completed"));
}

#[test]
fn plot_leaves_out_the_scheduler_panels_without_workers() {
    let mut rec = captioned_recording();
    for r in &mut rec.records {
        r.workers = Default::default();
        r.stages_us.queue = Default::default();
    }
    let (o, svg) = plot_svg(&rec, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let texts = svg_texts(&svg);
    let titles: Vec<String> = titles(&texts).into_iter().map(|t| t.0).collect();
    assert_eq!(titles.len(), 2, "{titles:?}");
    assert!(!svg.contains("queue wait") && !svg.contains("run_delay"));
    // Only run_delay measured: its panel, not the queue wait's.
    let mut rec = captioned_recording();
    for r in &mut rec.records {
        r.stages_us.queue = Default::default();
    }
    let (o, svg) = plot_svg(&rec, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(svg.contains("run_delay (ms per s)") && !svg.contains("queue wait"));
    // Asking for the scheduler panels of a recording without workers: an
    // error (exit 2) that says so, nothing written.
    let mut rec = captioned_recording();
    for r in &mut rec.records {
        r.workers = Default::default();
        r.stages_us.queue = Default::default();
    }
    let (o, svg) = plot_svg(&rec, &["--metric", "sched"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("nothing to draw") && e.contains("queue,run_delay"),
        "{e}"
    );
    assert!(svg.is_empty());
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
        app.show.caption(),
        Some("unbound: any CPU may pick up the work")
    );
    assert!(
        !app.window
            .markers()
            .iter()
            .any(|m| m.label.contains("caption")),
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
        assert!(
            app.baseline.get().is_some() && app.window.now().is_some(),
            "{name}"
        );
    }
    assert!(
        n >= 3,
        "at least three demo recordings in assets/, found {n}"
    );
}

/// Every direction a shipped demo's caption claims about its run (the
/// published result apart) must show in that demo's own recording: the
/// windows after the caption against the baseline, ranges apart, the
/// claimed way. And every demo whose preset states a published result
/// ends with the computed verdict line.
#[test]
fn shipped_demo_captions_claim_only_what_their_recordings_show() {
    use readpath::output::verdict::Kind;
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
        // Each caption, and when the next one (or the end) comes.
        let mut captions: Vec<(f64, String)> = rec
            .records
            .iter()
            .flat_map(|r| &r.events)
            .filter_map(|e| {
                e.label
                    .strip_prefix("caption: ")
                    .map(|c| (e.t_s, c.to_string()))
            })
            .collect();
        let end = rec.records.last().map_or(0.0, |r| r.t_s);
        captions.push((end, String::new()));
        let mut d = ReplayDriver::new(rec, 1.0);
        let mut app = d.fresh_app();
        for w in captions.windows(2) {
            let (claims, until) = (readpath::scenario::demo::claims(&w[0].1), w[1].0);
            if claims.is_empty() {
                continue;
            }
            d.seek(&mut app, until - 0.01);
            for c in claims {
                let Some(metric) = c.metric.and_then(readpath::metrics::table::metric) else {
                    panic!("{name}: {:?} claims a direction of no metric", c.clause);
                };
                let v = app
                    .baseline
                    .verdict_on(&app.window, metric, None)
                    .unwrap_or_else(|| {
                        panic!(
                            "{name}: {:?}: no baseline and windows to show it by",
                            c.clause
                        )
                    });
                let went = v
                    .verdict
                    .change_pct
                    .map_or(0, |x| if x > 0.0 { 1 } else { -1 });
                assert!(
                    v.verdict.kind.is_significant() && (c.sign == 0 || went == c.sign),
                    "{name}: the caption {:?} claims {} {}, the recording shows {}",
                    w[0].1,
                    metric.label,
                    if c.sign < 0 { "lower" } else { "higher" },
                    v.verdict.text
                );
            }
        }
        d.seek(&mut app, end);
        if app.show.published().is_some() {
            let (kind, line, _) = app
                .demo_verdict()
                .unwrap_or_else(|| panic!("{name}: no verdict line at the end"));
            assert!(kind != Kind::NotMeasured, "{name}: {line}");
            assert!(line.starts_with("this run, "), "{name}: {line}");
        }
    }
    assert!(n >= 5, "the five demo recordings in assets/, found {n}");
}

/// The fixture with spans in two stretches, one in each settings phase:
/// 10-12 s (unbound: every item queued on CPU 0 runs on CPU 1 after
/// 300 us) and 35-37 s (bound: queued and run on CPU 0 after 20 us, a hog
/// on CPU 1); an item is queued every millisecond and runs 100 us, a
/// reader sleeps 600 us of each. Each span is in the interval it ended in.
fn traced_recording() -> Recording {
    use readpath::metrics::{Role, Span, SpanKind, Timeline, TimelineThread};
    let mut rec = fixture_recording();
    let threads = vec![
        TimelineThread {
            tid: 100,
            name: "reader-0".into(),
            role: Role::Reader,
        },
        TimelineThread {
            tid: 101,
            name: "fsverity-1".into(),
            role: Role::Worker,
        },
        TimelineThread {
            tid: 102,
            name: "hog-0".into(),
            role: Role::Hog,
        },
    ];
    for (from_s, bound) in [(10u64, false), (35, true)] {
        let from = from_s * 1_000_000_000;
        let mut spans = Vec::new();
        for i in 0..2000u64 {
            let q = from + i * 1_000_000;
            let (cpu, wait) = if bound { (0, 20_000) } else { (1, 300_000) };
            spans.push(Span {
                kind: SpanKind::Verify,
                cpu,
                queued_cpu: 0,
                tid: 101,
                queued_ns: q,
                start_ns: q + wait,
                end_ns: q + wait + 100_000,
            });
            spans.push(Span {
                kind: SpanKind::Sleep,
                cpu: 0,
                queued_cpu: 0,
                tid: 100,
                queued_ns: q,
                start_ns: q,
                end_ns: q + 600_000,
            });
            if bound {
                spans.push(Span {
                    kind: SpanKind::Hog,
                    cpu: 1,
                    queued_cpu: 1,
                    tid: 102,
                    queued_ns: q,
                    start_ns: q,
                    end_ns: q + 900_000,
                });
            }
        }
        for r in rec.records.iter_mut() {
            let (a, b) = (
                ((r.t_s - 0.25) * 1e9).round() as u64,
                (r.t_s * 1e9).round() as u64,
            );
            let mine: Vec<Span> = spans
                .iter()
                .filter(|s| (a..b).contains(&s.end_ns))
                .copied()
                .collect();
            if !mine.is_empty() {
                r.timeline = Some(Timeline {
                    spans: mine,
                    dropped: 0,
                    threads: threads.clone(),
                });
            }
        }
    }
    rec
}

/// `plot --timeline`: by default a window in each settings phase (the
/// middle of its traced stretch), side by side, each headed by the
/// settings in force and saying what its own spans hold (items, the share
/// that ran on another CPU, their waits) and the intervals under it;
/// large type on a slide, no text on another or outside the picture.
#[test]
fn plot_timeline_draws_a_window_of_lanes_in_each_phase_from_its_own_spans() {
    let (o, svg) = plot_svg(&traced_recording(), &["--timeline", "--slide"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("SVG 1920x1080, timeline: 2 windows from 10.900 s and 35.900 s, 200 ms each"),
        "{said}"
    );
    let texts = svg_texts(&svg);
    let all: Vec<&str> = texts.iter().map(|t| t.text.as_str()).collect();
    for want in [
        "workers.mode = unbound",
        "workers.mode = bound",
        "10.900-11.100 s",
        "35.900-36.100 s",
        // One item a millisecond: 200 start in each window.
        "200 items, 100% ran on another CPU than queued",
        "wait to start: median 300 us, longest 300 us",
        "200 items, 0% ran on another CPU than queued",
        "wait to start: median 20 us, longest 20 us",
        "CPU 0",
        "CPU 1",
        "reader-0",
    ] {
        assert!(all.contains(&want), "no {want:?} in {all:?}");
    }
    // The intervals under each window: two (10.75-11.0, 11.0-11.25 s), the
    // fixture's run_delay 9 ms in 0.25 s.
    assert!(
        all.iter()
            .any(|t| t.starts_with("run_delay 36 ms/s, queue p99 ")),
        "{all:?}"
    );
    assert!(all.iter().any(|t| t.contains("median of 2")), "{all:?}");
    // Large type, inside the picture, nothing on another text.
    let tick = texts
        .iter()
        .filter(|t| t.text.parse::<f64>().is_ok())
        .map(|t| t.size)
        .fold(f64::INFINITY, f64::min);
    assert!(tick >= 0.02 * 1080.0, "{tick}");
    for (i, a) in texts.iter().enumerate() {
        let (x0, y0, x1, y1) = a.bbox();
        assert!(
            x0 >= 0.0 && y0 >= 0.0 && x1 <= 1920.0 && y1 <= 1080.0,
            "outside: {a:?}"
        );
        for b in &texts[i + 1..] {
            assert!(!a.overlaps(b), "{a:?} on {b:?}");
        }
    }
    // The lanes are pixel columns merged into runs: at most a few
    // rectangles a column and lane, whatever the number of items.
    let rects = svg.matches("<rect").count();
    assert!(rects < 2 * 1920 * 3, "{rects} rectangles");
}

/// `--at` and `--window` choose the windows; one asked where the
/// recording has no span, a recording without spans, too many windows and
/// `--timeline` with what it does not take are refused by name, exit 2.
#[test]
fn plot_timeline_takes_its_windows_and_refuses_what_it_cannot_draw() {
    let (o, svg) = plot_svg(
        &traced_recording(),
        &["--timeline", "--at", "36s", "--window", "50ms"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("timeline: 1 window from 36.000 s, 50 ms each"),
        "{said}"
    );
    let texts = svg_texts(&svg);
    assert!(
        texts
            .iter()
            .any(|t| t.text == "50 items, 0% ran on another CPU than queued"),
        "{texts:?}"
    );
    assert!(!texts.iter().any(|t| t.text == "workers.mode = unbound"));
    for (rec, args, want) in [
        (
            traced_recording(),
            &["--timeline", "--at", "20s"][..],
            "--at 20.000 s: no span between 20.000 s and 20.200 s; the recording's spans cover 10.0-12.0 s, 35.0-37.0 s",
        ),
        (
            fixture_recording(),
            &["--timeline"][..],
            "no interval carries a timeline: record with `run --record FILE --timeline`",
        ),
        (
            traced_recording(),
            &["--timeline", "--at", "10s,11s,12s"][..],
            "--at: 3 times; allowed 1 or 2",
        ),
        (
            traced_recording(),
            &["--timeline", "--format", "csv"][..],
            "--timeline draws a picture",
        ),
        (traced_recording(), &["--at", "10s"][..], "--timeline"),
        (
            traced_recording(),
            &["--timeline", "--window", "11s"][..],
            "11s",
        ),
        (
            traced_recording(),
            &["--timeline", "--window", "0ms"][..],
            "0ms",
        ),
        (
            traced_recording(),
            &["--timeline", "--metric", "latency"][..],
            "--metric",
        ),
    ] {
        let (o, _) = plot_svg(&rec, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
