//! Presets and experiments as a user meets them: every shipped preset loads
//! and validates, every bad-preset fixture is refused with its file,
//! line:column, key and reason (exit 2, nothing written), a saved preset
//! reads back equal, user presets shadow shipped ones, and `compare` runs
//! briefly on a tiny real dataset and reports every variant.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use readpath::scenario::preset::{self, Preset, SHIPPED};
use readpath::settings::{Settings, WorkerMode};

fn readpath(args: &[&str], data_dir: &Path, config: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_readpath"))
        .env("XDG_CONFIG_HOME", config)
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .output()
        .expect("run readpath")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/presets")
        .join(name)
}

#[test]
fn every_shipped_preset_is_valid_and_on_disk_too() {
    assert_eq!(SHIPPED.len(), 7);
    for (name, _) in SHIPPED {
        let (p, origin) = preset::resolve(name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(origin, preset::Origin::Shipped);
        p.settings.validate(2).unwrap();
        // The repository's file is the embedded one.
        let on_disk = preset::load_file(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("presets/{name}.toml")),
        )
        .unwrap();
        assert_eq!(on_disk.settings, p.settings, "{name}");
        assert_eq!(on_disk.description, p.description, "{name}");
    }
    let experiments = [
        ("fsverity-bound-vs-unbound", "553,800"),
        ("app-cold-start", "553,800"),
        ("fscrypt-slow-cipher", "25-35%"),
        ("fscrypt-aes-instructions", "~2%"),
        ("io_uring-qd1-iowait", "20-40%"),
    ];
    for (name, figure) in experiments {
        let (p, _) = preset::resolve(name).unwrap();
        assert!(p.compare.is_some(), "{name} names what it varies");
        assert!(
            p.description.contains(figure),
            "{name}'s description gives the published figure {figure}"
        );
    }
}

#[test]
fn bad_presets_are_refused_with_file_position_key_and_reason() {
    let cases: &[(&str, &[&str])] = &[
        ("bad-syntax.toml", &["bad-syntax.toml:3:9:", "expected `]`"]),
        (
            "bad-unknown-section.toml",
            &[
                "bad-unknown-section.toml:2:2:",
                "\"worker\"",
                "did you mean \"workers\"",
            ],
        ),
        (
            "bad-unknown-key.toml",
            &[
                "bad-unknown-key.toml:3:1:",
                "\"workers.mod\"",
                "did you mean \"workers.mode\"",
            ],
        ),
        (
            "bad-top-level-key.toml",
            &[
                "bad-top-level-key.toml:2:1:",
                "\"descripton\"",
                "did you mean \"description\"",
            ],
        ),
        (
            "bad-wrong-type.toml",
            &[
                "bad-wrong-type.toml:3:15:",
                "workload.queue_depth",
                "\"deep\"",
                "1..=1024",
            ],
        ),
        (
            "bad-out-of-range.toml",
            &[
                "bad-out-of-range.toml:3:15:",
                "workload.queue_depth = 0",
                "1..=1024",
            ],
        ),
        (
            "bad-duplicate-key.toml",
            &["bad-duplicate-key.toml:4:1:", "duplicate key \"mode\""],
        ),
        (
            "bad-future-version.toml",
            &[
                "bad-future-version.toml:1:11:",
                "version",
                "2 is from a newer readpath",
                "version 1",
            ],
        ),
        (
            "bad-compare-unknown-setting.toml",
            &[
                "bad-compare-unknown-setting.toml:6:1:",
                "compare.\"workers.mod\"",
                "did you mean \"workers.mode\"",
            ],
        ),
        (
            "bad-compare-value.toml",
            &[
                "bad-compare-value.toml:4:30:",
                "\"sideways\"",
                "inline, bound, unbound",
            ],
        ),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let mut all = vec!["presets".to_string(), "check".to_string()];
    for (file, wants) in cases {
        let path = fixture(file);
        let e = preset::load_file(&path).expect_err(file).to_string();
        for w in *wants {
            assert!(e.contains(w), "{file}: {e:?} lacks {w:?}");
        }
        // The same through the binary, on every command that takes --preset.
        for cmd in [
            &["run", "--duration", "1s"][..],
            &["compare"][..],
            &["tui"][..],
        ] {
            let mut args: Vec<&str> = cmd.to_vec();
            let p = path.to_str().unwrap();
            args.extend(["--preset", p]);
            let o = readpath(&args, tmp.path(), tmp.path());
            assert_eq!(o.status.code(), Some(2), "{file} {cmd:?}");
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains(wants[0]), "{file} {cmd:?}: {err}");
        }
        all.push(path.to_str().unwrap().to_string());
    }
    // `presets check` reports every error at once.
    all.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("presets/default.toml")
            .to_str()
            .unwrap()
            .to_string(),
    );
    let args: Vec<&str> = all.iter().map(String::as_str).collect();
    let o = readpath(&args, tmp.path(), tmp.path());
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    for (file, _) in cases {
        assert!(err.contains(file), "check names {file}: {err}");
    }
    assert!(String::from_utf8_lossy(&o.stdout).contains("default.toml: ok"));
    // Nothing was written anywhere.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn save_then_load_round_trips_and_user_presets_shadow_shipped_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Settings::default();
    s.workers.mode = WorkerMode::Bound;
    s.workload.queue_depth = 8;
    s.load.hogs = Some(2);
    let p = Preset {
        version: 1,
        name: "mine".into(),
        description: "a \"quoted\" description\nover two lines".into(),
        settings: s.clone(),
        compare: Some(preset::Compare::of(
            "workload.queue_depth",
            vec!["1".into(), "32".into()],
        )),
        published: None,
    };
    let path = tmp.path().join("readpath/presets/mine.toml");
    preset::save_atomic(&p, &path).unwrap();
    let back = preset::load_file(&path).unwrap();
    assert_eq!(back, p);
    // Replacing keeps one file and no temporary ones.
    let mut p2 = p.clone();
    p2.settings.load.hogs = Some(0);
    preset::save_atomic(&p2, &path).unwrap();
    assert_eq!(
        preset::load_file(&path).unwrap().settings.load.hogs,
        Some(0)
    );
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["mine.toml"]);
    // A user preset named like a shipped one wins, and `show` says where from.
    std::fs::copy(&path, tmp.path().join("readpath/presets/default.toml")).unwrap();
    let o = readpath(&["presets", "show", "default"], tmp.path(), tmp.path());
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("readpath/presets/default.toml"), "{out}");
    assert!(
        out.contains("hogs = 0") && out.contains("mode = \"bound\""),
        "{out}"
    );
    let o = readpath(&["presets", "list"], tmp.path(), tmp.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        out.matches("\ndefault ").count() + out.starts_with("default ") as usize,
        1,
        "{out}"
    );
    assert!(
        out.contains("mine") && out.contains("max-throughput"),
        "{out}"
    );
    // A header names the columns; descriptions wrap at spaces under
    // their column: no line is wider than 120 columns and no claim is cut
    // (no ellipsis anywhere).
    assert!(out.starts_with("NAME "), "{out}");
    for l in out.lines() {
        assert!(l.chars().count() <= 120, "{l}");
        assert!(!l.contains('…'), "{l}");
    }
}

#[test]
fn compare_runs_every_variant_interleaved_and_reports_the_machine() {
    let tmp = tempfile::tempdir().unwrap();
    let o = readpath(
        &[
            "compare",
            "--set",
            "workload.file_size=8M",
            "--set",
            "workload.direct=false",
            "--vary",
            "workers.mode=inline,bound",
            "--duration",
            "1s",
            "--warmup",
            "250ms",
            "--rounds",
            "2",
            "--format",
            "json",
            "--record",
            tmp.path().join("cmp.jsonl").to_str().unwrap(),
        ],
        tmp.path(),
        tmp.path(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["key"], "workers.mode");
    // The recording holds every switch, captioned, for replay.
    let rec = readpath::output::recording::read(&tmp.path().join("cmp.jsonl")).unwrap();
    assert_eq!(rec.header.command, "compare");
    let captions: Vec<String> = rec
        .records
        .iter()
        .flat_map(|r| &r.events)
        .filter(|e| e.label.starts_with("caption: round"))
        .map(|e| e.label.clone())
        .collect();
    assert_eq!(captions.len(), 4, "{captions:?}");
    assert!(
        captions[1].ends_with("workers.mode = bound"),
        "{captions:?}"
    );
    assert_eq!(r["rounds"], 2);
    let variants = r["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2);
    assert_eq!(variants[0]["value"], "inline");
    assert_eq!(variants[1]["value"], "bound");
    for v in variants {
        assert_eq!(v["rounds"].as_array().unwrap().len(), 2, "{v}");
        assert_eq!(v["failed_reads"], 0);
        let tp = &v["metrics"]["throughput_mib_s"];
        assert!(tp["median"].as_f64().unwrap() > 0.0, "{v}");
        assert!(
            tp["min"].as_f64().unwrap() <= tp["max"].as_f64().unwrap(),
            "{v}"
        );
        for m in [
            "iops",
            "p50_us",
            "p99_us",
            "p999_us",
            "queue_p99_us",
            "run_delay_ms_per_s",
        ] {
            assert!(v["metrics"][m]["median"].is_number(), "{m}: {v}");
        }
    }
    assert!(variants[0]["metrics"]["throughput_mib_s"]["change_pct"].is_null());
    assert!(variants[1]["metrics"]["throughput_mib_s"]["change_pct"].is_number());
    // The JSON reads back.
    let back: readpath::output::experiment::CompareReport =
        serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(back.variants.len(), 2);
    for k in [
        "kernel",
        "cpu_model",
        "cpus",
        "aes_instructions",
        "data_dir_fs",
    ] {
        assert!(r["machine"].get(k).is_some(), "machine.{k}");
    }
    assert!(r["features"]["highpri"].is_boolean());

    // A preset's [compare] is the default --vary; text output names it.
    let o = readpath(
        &[
            "compare",
            "--preset",
            "io_uring-qd1-iowait",
            "--set",
            "workload.file_size=8M",
            "--duration",
            "500ms",
            "--warmup",
            "250ms",
            "--rounds",
            "1",
        ],
        tmp.path(),
        tmp.path(),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("workload.sleep = iowait vs plain vs poll"),
        "{out}"
    );
    assert!(out.contains("preset io_uring-qd1-iowait"), "{out}");
    assert!(out.contains("machine: Linux"), "{out}");

    // Nothing to vary, or a bad value: exit 2 before anything runs.
    for args in [
        &["compare", "--set", "workload.file_size=8M"][..],
        &["compare", "--vary", "workers.mode=inline,sideways"][..],
        &[
            "compare",
            "--vary",
            "workload.engine=sync",
            "--set",
            "workload.sleep=poll",
        ][..],
    ] {
        let o = readpath(args, tmp.path(), tmp.path());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
}
