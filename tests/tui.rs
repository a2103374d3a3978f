//! The explorer's screens, rendered on ratatui's TestBackend from fixed,
//! synthetic interval records (no engine, no timing), and compared with
//! insta snapshots: the main screen at 80x24 and 160x48, the help, the
//! too-small message, the baseline panel, a change marker on the charts, and
//! the whole footer of a wide terminal.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use readpath::engine::workload::Place;
use readpath::metrics::WindowStats;
use readpath::tui::app::App;
use readpath::tui::fixture::app;
use readpath::tui::render::{Look, render};
use readpath::tui::state::Overlay;
use readpath::tui::theme::{Theme, ThemeName};

fn look() -> Look {
    Look {
        theme: Theme::named(ThemeName::Dark),
        ascii: false,
    }
}

fn draw(app: &App, look: &Look, w: u16, h: u16) -> Buffer {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| render(app, look, f.area(), f.buffer_mut()))
        .unwrap();
    t.backend().buffer().clone()
}

fn text(buf: &Buffer) -> String {
    readpath::tui::fixture::screen_text(buf)
}

#[test]
fn main_screen_160x48() {
    let screen = text(&draw(&app(false), &look(), 160, 48));
    assert!(
        screen.contains("[1] workers.mode:"),
        "the marker's number and what changed, in the events:\n{screen}"
    );
    insta::assert_snapshot!("main_160x48", screen);
}

#[test]
fn main_screen_80x24() {
    let screen = text(&draw(&app(false), &look(), 80, 24));
    assert!(screen.contains("latency"), "{screen}");
    // Every axis carries its unit: where the ticks do not (throughput's
    // MiB/s and IOPS, run_delay's ms/s), the bottom border says it.
    assert!(
        screen.contains("└ MiB/s ─") && screen.contains("─ IOPS ┘") && screen.contains("─ ms/s ┘"),
        "{screen}"
    );
    assert!(screen.contains("mode"), "{screen}");
    insta::assert_snapshot!("main_80x24", screen);
}

#[test]
fn help_screen() {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let mut a = app(false);
    a.overlays.open(Overlay::help());
    let screen = text(&draw(&a, &look(), 160, 48));
    // The first three pages: the keys grew past two.
    let mut next = a.clone();
    let pg = KeyEvent::new(KeyCode::PageDown, KeyModifiers::NONE);
    readpath::tui::overlay::overlay_key(next.overlays.current_mut(), pg, &|_: &str| false);
    let mut third = next.clone();
    readpath::tui::overlay::overlay_key(third.overlays.current_mut(), pg, &|_: &str| false);
    let both = format!(
        "{screen}{}{}",
        text(&draw(&next, &look(), 160, 48)),
        text(&draw(&third, &look(), 160, 48))
    );
    for k in [
        "inline -> bound -> unbound",
        "NO_IOWAIT",
        "run_delay",
        "WQ_HIGHPRI",
        "Alt-W back",
        ":set section.key=value",
    ] {
        assert!(both.contains(k), "help lacks {k:?}:\n{both}");
    }
    insta::assert_snapshot!("help_160x48", screen);
}

/// Every footer key fits at 220 columns: the order past `gG hogs` (which no
/// snapshot reaches) is the key table's, most used first.
#[test]
fn a_wide_footer_lists_every_footer_key() {
    let screen = text(&draw(&app(false), &look(), 220, 48));
    let footer = screen.lines().last().unwrap();
    assert!(
        footer.starts_with(" w workers  W verify mode  h highpri  i sleep "),
        "{footer}"
    );
    assert!(
        footer.contains(
            "  gG hogs  b baseline  A A/B  p presets  s save  ␣ pause  r reset  zZ zoom "
        ),
        "{footer}"
    );
    assert!(footer.ends_with("  ? help  q quit"), "{footer}");
    // Then the timeline and the ways in, while room is left (270 columns).
    let wider = text(&draw(&app(false), &look(), 270, 48));
    let footer = wider.lines().last().unwrap();
    assert!(
        footer.contains("  zZ zoom  t timeline  ↑↓ cursor  Enter pick  : set  ⇥⇤ focus "),
        "{footer}"
    );
}

#[test]
fn too_small_names_the_size_needed() {
    let screen = text(&draw(&app(false), &look(), 50, 12));
    assert!(
        screen.contains("needs at least 60x18, this one is 50x12"),
        "{screen}"
    );
    insta::assert_snapshot!("too_small_50x12", screen);
}

#[test]
fn baseline_panel_compares_baseline_with_now() {
    let a = app(true);
    let b = a.baseline.get().unwrap().stats;
    let n = a.window.now().unwrap();
    // The fixture's change: run_delay 9000 -> 300 us per 0.25 s interval.
    // In ms per second of wall time (the one unit of run_delay).
    assert!((b.run_delay_ms_per_s - 36.0).abs() < 1e-3, "{b:?}");
    assert!((n.run_delay_ms_per_s - 1.2).abs() < 1e-3, "{n:?}");
    // "now" starts after the change marker: only bound intervals.
    assert!(n.from_s >= 30.0, "{n:?}");
    let screen = text(&draw(&a, &look(), 160, 48));
    // 36 -> 1.2 ms/s: the 2 s windows' ranges are apart, so it is a
    // result, not marked as noise.
    assert!(
        screen.contains(" -97%") && !screen.contains("~-97%"),
        "run_delay change:\n{screen}"
    );
    assert!(screen.contains("2 s windows: base "), "{screen}");
    insta::assert_snapshot!("baseline_160x48", screen);
    // At 80x24 the panel takes the scheduler chart's place.
    let small = text(&draw(&a, &look(), 80, 24));
    assert!(small.contains("baseline vs now"), "{small}");
    insta::assert_snapshot!("baseline_80x24", small);
    // At 120x40 the panel is narrow: every row keeps its change on its
    // own line (nothing wraps under it) and run_delay stays in view.
    let mid = text(&draw(&a, &look(), 120, 40));
    for name in ["MiB/s", "p99.9", "q p99", "rdelay/s"] {
        let row = mid
            .lines()
            .find_map(|l| l.split_once(&format!("││{name} ")))
            .unwrap_or_else(|| panic!("{name}:\n{mid}"))
            .1;
        assert!(row.contains('%'), "{name}: {row}");
    }
    insta::assert_snapshot!("baseline_120x40", mid);
}

#[test]
fn a_change_marker_is_drawn_at_one_x_on_every_time_chart() {
    for (w, h) in [(160, 48), (120, 40), (80, 24)] {
        let buf = draw(&app(false), &look(), w, h);
        let screen = text(&buf);
        // The label is in the events panel, once, with its number; the
        // charts carry the number only, never the label over the data.
        assert_eq!(
            screen.matches("[1] workers.mode:").count(),
            1,
            "{w}x{h}:\n{screen}"
        );
        assert!(
            screen.matches("unbound -> bound").count() <= 1,
            "{w}x{h}:\n{screen}"
        );
        // The charts are the right-hand column: the marker line is drawn
        // as a dashed line (`┆`, never Braille like the data), in the
        // marker's colour, at one column on every chart (they share a
        // right gutter, so their time axes line up).
        let marker = look().theme.marker;
        let mut cols = std::collections::BTreeSet::new();
        let mut rows = 0;
        for y in 0..h {
            for x in w / 3..w {
                let c = &buf[(x, y)];
                if c.fg == marker && c.symbol() == "┆" {
                    cols.insert(x);
                    rows += 1;
                }
            }
        }
        assert_eq!(cols.len(), 1, "{w}x{h}: marker columns {cols:?}\n{screen}");
        assert!(rows >= 6, "{w}x{h}: {rows} marker cells");
        // Its number sits in the strip above the latency plot, at that column.
        let x = *cols.first().unwrap();
        let numbered = (0..h).any(|y| buf[(x, y)].symbol() == "1" && buf[(x, y)].fg == marker);
        assert!(numbered, "{w}x{h}: no number 1 at column {x}\n{screen}");
    }
}

#[test]
fn unavailable_settings_are_greyed_with_a_reason() {
    let buf = draw(&app(false), &look(), 160, 48);
    let screen = text(&buf);
    assert!(screen.contains("needs CAP_SYS_NICE"), "{screen}");
    let row = (0..48)
        .find(|&y| {
            (0..40)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                .contains("highpri")
        })
        .expect("highpri row");
    let cell = (0..40)
        .map(|x| &buf[(x, row)])
        .find(|c| c.symbol() == "g")
        .unwrap();
    assert_eq!(cell.fg, look().theme.disabled);
}

/// The shipped presets as the picker lists them.
fn shipped_items() -> Vec<readpath::tui::state::PickItem> {
    readpath::scenario::preset::SHIPPED
        .iter()
        .map(|(name, src)| {
            let p = readpath::scenario::preset::Preset::from_toml_str(src, name, name).unwrap();
            readpath::tui::state::PickItem {
                name: p.name,
                origin: "shipped",
                description: p.description,
                settings: Some(p.settings),
            }
        })
        .collect()
}

#[test]
fn preset_picker() {
    let mut a = app(false);
    a.overlays.open(Overlay::Picker {
        items: shipped_items(),
        selected: 1,
    });
    a.show.name_preset("default", "the defaults");
    let screen = text(&draw(&a, &look(), 160, 48));
    assert!(
        screen.contains("553,800"),
        "the chosen preset's description:\n{screen}"
    );
    assert!(screen.contains("settings · default"), "{screen}");
    insta::assert_snapshot!("picker_160x48", screen);
    a.overlays.open(Overlay::ConfirmOverwrite("mine".into()));
    let screen = text(&draw(&a, &look(), 80, 24));
    assert!(screen.contains("replace it? (y/n; Esc"), "{screen}");
}

#[test]
fn ascii_mode_draws_only_ascii() {
    let l = Look {
        theme: Theme::named(ThemeName::Light),
        ascii: true,
    };
    let mut a = app(true);
    let screen = text(&draw(&a, &l, 160, 48));
    assert!(screen.is_ascii(), "{screen}");
    // Each series of a chart has its own mark, in the legend and the plot;
    // a check mark reads + / -, never as a letter glued to a word.
    let latency = screen
        .lines()
        .find(|l| l.contains("latency (log)"))
        .unwrap();
    for want in ["* p50", "+ p99", "o p99.9"] {
        assert!(latency.contains(want), "{want:?} in {latency}");
    }
    let plot: String = screen.lines().skip(2).take(10).collect();
    for m in ['*', '+', 'o'] {
        assert!(plot.contains(m), "{m:?} drawn:\n{screen}");
    }
    assert!(
        screen.contains("io_uring+") && screen.contains("highpri-"),
        "{screen}"
    );
    assert!(!screen.contains("io_uringy"), "{screen}");
    a.overlays.open(Overlay::help());
    assert!(text(&draw(&a, &l, 80, 24)).is_ascii());
}

/// Every character the screens draw has an ASCII look-alike for
/// `--ascii` (none is drawn `?`): the main screen at 160x48 and 80x24,
/// with a live A/B's turns, the help and presentation mode.
#[test]
fn every_drawn_character_has_an_ascii_look_alike() {
    let mut a = app(true);
    let mut screens = vec![
        text(&draw(&a, &look(), 160, 48)),
        text(&draw(&a, &look(), 80, 24)),
    ];
    // An A/B that ran two turns, 40-42 s on the current settings and
    // 42-44 s on the baseline's, then ended.
    let now = a.window.elapsed_s();
    a.baseline.start_ab(a.running.settings(), now).unwrap();
    a.baseline.ab_mut().unwrap().spans = vec![(40.0, 1), (42.0, 0)];
    a.baseline.end_ab(44.0);
    screens.push(text(&draw(&a, &look(), 120, 40)));
    a.overlays.open(Overlay::help());
    screens.push(text(&draw(&a, &look(), 160, 48)));
    a.overlays.close();
    a.view.set_present(true);
    screens.push(text(&draw(&a, &look(), 120, 40)));
    let mut missing: Vec<char> = screens
        .iter()
        .flat_map(|s| s.chars())
        .filter(|c| !c.is_ascii() && readpath::tui::render::ascii_for(*c).is_none())
        .collect();
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "no ASCII look-alike for {missing:?}");
    assert!(screens[2].contains("▄▄") && screens[2].contains("▁▁"));
}

#[test]
fn presentation_mode_fits_80x24_and_120x40() {
    let mut a = app(true);
    a.view.set_present(true);
    for (w, h, name) in [(80, 24, "present_80x24"), (120, 40, "present_120x40")] {
        let screen = text(&draw(&a, &look(), w, h));
        // Without a demo: throughput, p99 and run_delay, each with its unit.
        let boxes = screen.lines().nth(1).unwrap();
        assert!(
            boxes.contains("MiB/s") && boxes.contains("p99 (us)") && boxes.contains("run_delay/s"),
            "{boxes}"
        );
        // The change box names its one metric (the first headline number),
        // never switching by itself.
        assert!(
            screen.contains("throughput vs base") || screen.contains("MiB/s change"),
            "{screen}"
        );
        // Each number says the window it is over, apart from the chart
        // legend's latest interval.
        assert!(screen.contains("last 15 s"), "{screen}");
        assert!(screen.contains("█"), "big digits:\n{screen}");
        insta::assert_snapshot!(name, screen);
    }
}

/// The target is always named, at every size, local or remote: after
/// running/paused and the time it comes first; the machine's iowait
/// line and the UI's cost give way before it and before the plan.
#[test]
fn the_header_always_names_the_target() {
    let mut a = app(false);
    a.running
        .set_idle("idle haltpoll, no cpufreq".into(), false);
    for (w, h) in [(80, 24), (120, 40), (160, 48)] {
        let screen = text(&draw(&a, &look(), w, h));
        let header = screen.lines().next().unwrap();
        assert!(header.contains("│ this host"), "{w}x{h}: {header}");
    }
    a.running.moved_to(Some(Place {
        name: "vm:debian-6.1".into(),
        detail: Some("(6.1.0-31, tcg, about 40x slower than the host)".into()),
        health: Vec::new(),
    }));
    for (w, h) in [(80, 24), (120, 40), (160, 48)] {
        let screen = text(&draw(&a, &look(), w, h));
        let header = screen.lines().next().unwrap();
        assert!(header.contains("│ vm:debian-6.1"), "{w}x{h}: {header}");
        // The plan next, before the UI's cost or the iowait line.
        assert!(
            header.contains("│ decrypt: bound -> verify: bound"),
            "{w}x{h}: {header}"
        );
        if w == 160 {
            assert!(header.contains("(6.1.0-31, tcg"), "{w}x{h}: {header}");
        }
    }
    // A longer name leaves no room for the plan at 80 columns: its short
    // form, not the iowait line or the UI's cost instead.
    a.running
        .moved_to(Some(Place::named("ssh:build-server-17")));
    let screen = text(&draw(&a, &look(), 80, 24));
    let header = screen.lines().next().unwrap();
    assert!(
        header.contains("│ ssh:build-server-17 │ dec bound -> ver bound"),
        "{header}"
    );
}

#[test]
fn the_header_names_the_unbound_pods() {
    let mut a = app(false);
    a.running.set_pods(Some("pods cache 0-3|4-7".into()));
    let screen = text(&draw(&a, &look(), 160, 48));
    let header = screen.lines().next().unwrap();
    assert!(header.contains("· pods cache 0-3|4-7"), "{header}");
    // Whether anything reads iowait (and the idle and frequency drivers
    // that decide it), right-aligned where they fit: after the pods.
    let mut a = app(false);
    a.running
        .set_idle("idle haltpoll, no cpufreq".into(), false);
    let screen = text(&draw(&a, &look(), 160, 48));
    let header = screen.lines().next().unwrap();
    assert!(header.contains("│ iowait unused here │ ui "), "{header}");
    // Wider, the drivers that decide it too.
    let screen = text(&draw(&a, &look(), 200, 48));
    let header = screen.lines().next().unwrap();
    assert!(
        header.contains("│ iowait unused here (idle haltpoll, no cpufreq)"),
        "{header}"
    );
    // Without an unbound queue, no pods.
    let screen = text(&draw(&app(false), &look(), 160, 48));
    assert!(!screen.lines().next().unwrap().contains("pods"), "{screen}");
}

#[test]
fn the_stages_panel_shows_the_irq_threads_apart() {
    let mut a = app(false);
    // No irq threads in the fixture: no line.
    let screen = text(&draw(&a, &look(), 160, 48));
    assert!(!screen.contains("irq x"), "{screen}");
    for seq in 180..190 {
        let mut r = readpath::tui::fixture::record(seq);
        r.irq.threads = 2;
        r.irq.run_delay_us = 300.0 * r.interval_s;
        r.irq.cpu_us = 0.25e6 * r.interval_s;
        a.push(r);
    }
    let screen = text(&draw(&a, &look(), 160, 48));
    assert!(
        screen.contains("irq x2  run_delay 0.3 ms/s  cpu 25%"),
        "{screen}"
    );
}

#[test]
fn the_stages_panel_shows_each_queues_running_and_blocked_workers() {
    let mut a = app(false);
    let screen = text(&draw(&a, &look(), 160, 48));
    assert!(!screen.contains("blocked"), "{screen}");
    for seq in 180..190 {
        let mut r = readpath::tui::fixture::record(seq);
        r.pools = vec![
            readpath::metrics::PoolRecord {
                queue: "fscrypt".into(),
                kind: "unbound".into(),
                workers: 2,
                running: 1,
                ..Default::default()
            },
            readpath::metrics::PoolRecord {
                queue: "fsverity".into(),
                kind: "bound".into(),
                workers: 8,
                running: 2,
                blocked: 1,
                blocked_peak: if seq == 185 { 3 } else { 1 },
                pending: 0,
                ..Default::default()
            },
        ];
        r.page_cache.tree_pages_read = (20.0 * r.interval_s) as u64;
        r.page_cache.tree_blocked_ms = 1.5 * r.interval_s;
        a.push(r);
    }
    let screen = text(&draw(&a, &look(), 160, 48));
    assert!(
        screen.contains("fscrypt  unb  run 1/2  blk 0  max 0"),
        "{screen}"
    );
    assert!(
        screen.contains("fsverity bnd  run 2/8  blk 1  max 3"),
        "{screen}"
    );
    // Over the "now" window (fixture records before these read none).
    assert!(
        screen.contains("tree ") && screen.contains(" pg/s  blocked "),
        "{screen}"
    );
    // Narrow (120 columns): running of the workers and blocked (the
    // help's stages legend), never cut.
    let screen = text(&draw(&a, &look(), 120, 40));
    assert!(screen.contains("fsverity 2/8 blk 1 "), "{screen}");
    assert!(screen.contains("fscrypt 1/2 blk 0 "), "{screen}");
}

/// The kernel target: the settings panel shows `[kernel]` and greys the
/// model's worker and cache knobs; the stages panel shows the kernel's
/// `fscrypt_read_queue` from its tracepoints.
#[test]
fn kernel_target_screens() {
    let a = readpath::tui::fixture::kernel_app();
    let wide = text(&draw(&a, &look(), 160, 48));
    for want in [
        "[kernel]",
        "affinity_scope cpu",
        "fscrypt  172/s  q p99 1.1ms",
        "kernel, per item",
        "verity         true → false",
        "target         kernel",
    ] {
        assert!(wide.contains(want), "160x48 lacks {want:?}:\n{wide}");
    }
    insta::assert_snapshot!("kernel_160x48", wide);
    let narrow = text(&draw(&a, &look(), 80, 24));
    assert!(narrow.contains("target     kernel"), "{narrow}");
    insta::assert_snapshot!("kernel_80x24", narrow);
    let mid = text(&draw(&a, &look(), 120, 40));
    assert!(mid.contains("fscrypt"), "{mid}");
    insta::assert_snapshot!("kernel_120x40", mid);
}

/// The save dialog: the preset's name prefilled and selected (typing
/// replaces it), and a refused character said in words.
#[test]
fn save_dialog() {
    let mut a = app(false);
    a.overlays.open(Overlay::SaveName {
        name: "default".into(),
        selected: true,
        refused: Some("' ' cannot be in a preset name: letters, digits, - _ . only".into()),
    });
    let screen = text(&draw(&a, &look(), 120, 40));
    // The presets directory is the user's: written as [DIR] here.
    let dir =
        readpath::scenario::preset::user_dir().map_or("?".into(), |d| d.display().to_string());
    let screen = screen.replace(&format!("saved to {dir}/"), "saved to [DIR]/");
    assert!(screen.contains("name: default"), "{screen}");
    assert!(screen.contains("typing replaces the name"), "{screen}");
    assert!(screen.contains("cannot be in a preset name"), "{screen}");
    insta::assert_snapshot!("save_120x40", screen);
}

/// Right after a change the baseline panel says it is collecting instead
/// of comparing a second of data (no green or red number).
#[test]
fn the_baseline_panel_collects_before_it_compares() {
    let mut a = app(true);
    let mut r = readpath::tui::fixture::record(180);
    r.events.push(readpath::metrics::Event {
        t_s: r.t_s - 0.1,
        label: "workers.mode: bound -> unbound".into(),
    });
    a.push(r);
    a.push(readpath::tui::fixture::record(181));
    let screen = text(&draw(&a, &look(), 160, 48));
    assert!(screen.contains("now: 0 of 2 windows of 2 s"), "{screen}");
    let row = screen
        .lines()
        .find_map(|l| l.split_once("││MiB/s"))
        .unwrap()
        .1;
    // The baseline's median stands; "now" and the change wait.
    assert!(row.contains("…") && !row.contains('%'), "{row}");
    let m = readpath::metrics::table::metric("throughput_mib_s").unwrap();
    let base = a.baseline.get().unwrap();
    let median = readpath::metrics::Spread::of(base.windows.iter().map(m.window)).median;
    assert!(row.contains(m.show(median).trim()), "{row}");
}

/// Every row of the baseline panel is arithmetic: the two values are the
/// medians of the windows the change is computed from, so the change
/// column is what the two values say (to its rounding), at every size.
#[test]
fn each_baseline_row_is_arithmetic() {
    let a = app(true);
    for (w, h) in [(80, 24), (120, 40), (160, 48)] {
        let screen = text(&draw(&a, &look(), w, h));
        let mut seen = 0;
        for m in readpath::metrics::METRICS.iter().filter(|m| m.explorer) {
            let v = a.baseline.verdict_on(&a.window, m, None).unwrap();
            let pct = v.verdict.change_pct.unwrap();
            assert!((pct - (v.after / v.before - 1.0) * 100.0).abs() < 1e-6);
            // The row shows exactly those two medians and that change.
            let (b, n) = (m.show(v.before), m.show(v.after));
            let (b, n) = (b.trim(), n.trim());
            if let Some(row) = screen
                .lines()
                .find(|l| l.contains(b) && l.contains(n) && l.contains(&format!("{pct:+.0}%")))
            {
                assert!(!row.is_empty());
                seen += 1;
            }
        }
        assert!(seen >= 3, "{w}x{h}: {seen} rows found\n{screen}");
    }
}

/// After a preset changed several settings at once, the baseline panel
/// names every key that differs instead of crediting one.
#[test]
fn the_baseline_panel_names_every_setting_that_differs() {
    let mut a = app(true);
    let mut s = a.running.settings().clone();
    s.set("workload.block_size", "64K").unwrap();
    s.set("pipeline.decrypt", "false").unwrap();
    a.running.set(s.clone(), s);
    let screen = text(&draw(&a, &look(), 160, 48));
    let line = screen
        .lines()
        .find_map(|l| l.split_once("3 settings differ from the baseline: "))
        .unwrap_or_else(|| panic!("{screen}"))
        .1;
    for k in ["workload.block_size", "pipeline.decrypt", "workers.mode"] {
        assert!(line.contains(k) || screen.contains(k), "{k}: {line}");
    }
}

/// The help scrolls to its end at 80x24 (the glossary and the recipes
/// are reachable), can be searched with `/`, and in a replay lists the
/// replay's keys instead of the settings keys it refuses.
#[test]
fn help_scrolls_searches_and_matches_the_mode() {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use readpath::tui::overlay::overlay_key;
    let k = |c: KeyCode| KeyEvent::new(c, KeyModifiers::NONE);
    let none = |_: &str| false;
    let mut a = app(false);
    a.overlays.open(Overlay::help());
    let top = text(&draw(&a, &look(), 80, 24));
    assert!(top.contains("help 1-"), "{top}");
    assert!(!top.contains("max_active  how many"), "{top}");
    overlay_key(a.overlays.current_mut(), k(KeyCode::End), &none);
    let end = text(&draw(&a, &look(), 80, 24));
    assert!(end.contains("> vs the kernel"), "{end}");
    insta::assert_snapshot!("help_end_80x24", end);
    // Up comes back one line at a time, whatever End set.
    overlay_key(a.overlays.current_mut(), k(KeyCode::Home), &none);
    assert_eq!(text(&draw(&a, &look(), 80, 24)), top);
    // `/hogs`: only the rows that say it.
    for c in "/hogs".chars() {
        overlay_key(a.overlays.current_mut(), k(KeyCode::Char(c)), &none);
    }
    overlay_key(a.overlays.current_mut(), k(KeyCode::Enter), &none);
    let found = text(&draw(&a, &look(), 80, 24));
    assert!(found.contains("help: \"hogs\""), "{found}");
    assert!(found.contains("CPU-bound background threads"), "{found}");
    assert!(!found.contains("fs-verity verification on/off"), "{found}");
    // Esc clears the search, a second Esc closes.
    overlay_key(a.overlays.current_mut(), k(KeyCode::Esc), &none);
    assert!(matches!(a.overlays.current(), Overlay::Help { find, .. } if find.is_empty()));
    overlay_key(a.overlays.current_mut(), k(KeyCode::Esc), &none);
    assert_eq!(*a.overlays.current(), Overlay::None);
    // A replay's help: its own keys, not the settings keys.
    let mut r = app(false);
    r.running.set_replay("replay 1x".into());
    r.overlays.open(Overlay::help());
    let screen = text(&draw(&r, &look(), 160, 48));
    assert!(screen.contains("seek 10 s back"), "{screen}");
    assert!(
        !screen.contains("fs-verity verification on/off"),
        "{screen}"
    );
}

/// A demo's caption in presentation mode: a band of its own under the
/// numbers, the whole sentence wrapped (never cut mid-word, never covered
/// by the change toast), the step and countdown as its title; at 80x24
/// and 120x40.
#[test]
fn presentation_captions_have_a_band_of_their_own() {
    let mut a = app(true);
    a.view.set_present(true);
    a.show.set_caption(
        "BOUND (v6.3, f959325e6ac3): the work stays on the CPU that completed the bio. Watch run_delay and queue p99 fall (Android: -96%).".into(),
    );
    a.show.set_step(2, 3, Some(a.window.elapsed_s() + 9.5));
    // The demo's own big numbers: run_delay and queue p99, the change box
    // following run_delay (better: lower, in green).
    a.show.set_headline(
        readpath::scenario::demo::resolve("fsverity-bound-vs-unbound", 2)
            .unwrap()
            .headline,
    );
    for (w, h, name) in [
        (80, 24, "present_caption_80x24"),
        (120, 40, "present_caption_120x40"),
    ] {
        let screen = text(&draw(&a, &look(), w, h));
        assert!(screen.contains("step 2/3 · next in 10 s"), "{screen}");
        let boxes = screen.lines().nth(1).unwrap();
        assert!(
            boxes.contains("run_delay/s")
                && boxes.contains("queue p99")
                && boxes.contains("run_delay vs base")
                && !boxes.contains("MiB/s"),
            "{boxes}"
        );
        let band: String = screen
            .lines()
            .filter(|l| l.starts_with('│'))
            .map(|l| l.trim_matches('│').trim())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(band.contains("Watch run_delay and queue p99"), "{screen}");
        assert!(screen.contains("█"), "big digits still shown:\n{screen}");
        insta::assert_snapshot!(name, screen);
    }
}

const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (160, 48)];

/// The value chooser of `workers.verify_mode` (Enter on its row): every
/// variant, the current one marked, on the settings panel's cursor; and
/// one of `workers.highpri`, whose `true` this machine cannot run (greyed
/// with the reason the settings panel gives) while it is not the current
/// value.
#[test]
fn the_value_chooser() {
    use readpath::tui::overlay::chooser::open_chooser;
    for (w, h) in SIZES {
        let mut a = app(false);
        a.view.select_setting("workers.verify_mode");
        a.overlays.open(open_chooser(&a, "workers.verify_mode"));
        let screen = text(&draw(&a, &look(), w, h));
        for want in [
            "workers.verify_mode: ↑↓ Enter sets",
            "same",
            "inline",
            "unbound",
            "(now)",
        ] {
            assert!(screen.contains(want), "{w}x{h} lacks {want:?}:\n{screen}");
        }
        insta::assert_snapshot!(format!("chooser_{w}x{h}"), screen);
    }
    let mut a = app(false);
    let mut s = a.running.settings().clone();
    s.workers.highpri = false;
    a.running.set(s.clone(), s);
    a.overlays.open(open_chooser(&a, "workers.highpri"));
    let screen = text(&draw(&a, &look(), 120, 40));
    assert!(screen.contains("needs CAP_SYS_NICE"), "{screen}");
    // The greyed value is drawn in the disabled colour.
    let buf = draw(&a, &look(), 120, 40);
    let greyed = buf
        .content
        .iter()
        .any(|c| c.symbol() == "t" && c.fg == look().theme.disabled);
    assert!(greyed, "{screen}");
}

/// The `:` prompt after a bad value: the parser's error names the key,
/// the value and what is allowed; nothing changed.
#[test]
fn the_prompt_shows_the_parsers_error() {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use readpath::tui::overlay::prompt::{open_prompt, prompt_key};
    for (w, h) in SIZES {
        let mut a = app(false);
        let before = a.running.settings().clone();
        a.overlays.open(open_prompt());
        for c in "set workers.verify_mode=boundd".chars() {
            prompt_key(&mut a, KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        }
        prompt_key(&mut a, KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert_eq!(*a.running.settings(), before);
        let screen = text(&draw(&a, &look(), w, h));
        // Wrapped: look at the popup's text joined.
        let joined: String = screen
            .lines()
            .map(|l| l.trim_matches(|c| c == '│' || c == ' '))
            .collect::<Vec<_>>()
            .join(" ");
        for want in [
            ":set workers.verify_mode=boundd_",
            "boundd",
            "same, inline, bound",
        ] {
            assert!(joined.contains(want), "{w}x{h} lacks {want:?}:\n{screen}");
        }
        insta::assert_snapshot!(format!("prompt_error_{w}x{h}"), screen);
    }
}

/// A click on the latency chart at the stall (20 s): the readout gives the
/// interval's time and p50 / p99 / p99.9 with units; a dotted cursor runs
/// down every chart; a click on the change's line lists the change.
#[test]
fn a_chart_click_reads_the_values_at_that_time() {
    use ratatui::crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
    use ratatui::layout::Rect;
    use readpath::tui::render::layout::{Hit, chart_span, hit, main_layout};
    use readpath::tui::state::ChartKind;
    for (w, h) in SIZES {
        let mut a = app(false);
        a.view.set_screen(Rect::new(0, 0, w, h));
        let l = main_layout(&a, a.view.screen());
        let (_, r) = l.charts[0];
        // The latency chart carries the markers' number strip.
        let p = readpath::tui::render::chart::plot_rect(r, true).unwrap();
        let (t0, t1) = chart_span(&a);
        // The column the stall at 20 s is drawn in.
        let x = p.x + readpath::tui::render::chart::col_of(t0, t1, p.width, 20.1);
        let y = p.y + 1;
        assert!(matches!(
            hit(&a, a.view.screen(), x, y),
            Hit::Chart(ChartKind::Latency, _)
        ));
        let click = MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column: x,
            row: y,
            modifiers: KeyModifiers::NONE,
        };
        readpath::tui::mouse::mouse(&mut a, click, true);
        let ro = a.view.readout().expect("a readout");
        let screen = text(&draw(&a, &look(), w, h));
        assert!(screen.contains("┊"), "{w}x{h} cursor:\n{screen}");
        for want in ["p50", " us", "ago)"] {
            assert!(
                screen.contains(want),
                "{w}x{h} lacks {want:?} ({ro:?}):\n{screen}"
            );
        }
        insta::assert_snapshot!(format!("readout_{w}x{h}"), screen);
        // On the change's line: the change is listed.
        let x = p.x + readpath::tui::render::chart::col_of(t0, t1, p.width, 30.0);
        readpath::tui::mouse::mouse(&mut a, MouseEvent { column: x, ..click }, true);
        let screen = text(&draw(&a, &look(), w, h));
        assert!(
            screen.contains("│ mode: unbound -> bound"),
            "{w}x{h}:\n{screen}"
        );
    }
}

/// The events panel scrolled back with the wheel: older lines, a title
/// that says how many are newer, and a new event that does not move it.
#[test]
fn the_events_panel_scrolls_back() {
    use ratatui::crossterm::event::{KeyModifiers, MouseEvent, MouseEventKind};
    use ratatui::layout::Rect;
    use readpath::tui::render::layout::main_layout;
    for (w, h) in SIZES {
        let mut a = app(false);
        for i in 0..40 {
            a.log
                .line(40.0 + i as f64 * 0.1, format!("event {i}"), false);
        }
        a.view.set_screen(Rect::new(0, 0, w, h));
        let l = main_layout(&a, a.view.screen());
        let wheel = MouseEvent {
            kind: MouseEventKind::ScrollUp,
            column: l.events.x + 2,
            row: l.events.y + 1,
            modifiers: KeyModifiers::NONE,
        };
        readpath::tui::mouse::mouse(&mut a, wheel, true);
        readpath::tui::mouse::mouse(&mut a, wheel, true);
        let screen = text(&draw(&a, &look(), w, h));
        assert!(screen.contains("events ↑ 6 newer"), "{w}x{h}:\n{screen}");
        assert!(screen.contains("event 33"), "{w}x{h}:\n{screen}");
        assert!(!screen.contains("event 39"), "{w}x{h}:\n{screen}");
        a.log.line(45.0, "a new event".into(), false);
        let after = text(&draw(&a, &look(), w, h));
        assert!(after.contains("events ↑ 7 newer"), "{after}");
        assert!(!after.contains("a new event"), "not yanked:\n{after}");
        insta::assert_snapshot!(format!("events_scrolled_{w}x{h}"), screen);
    }
}

/// The settings panel's cursor is a highlight only: the text is as
/// before, the row's cells reversed.
#[test]
fn the_settings_cursor_highlights_its_row() {
    use ratatui::style::Modifier;
    let mut a = app(false);
    let plain = text(&draw(&a, &look(), 160, 48));
    a.view.select_setting("workers.mode");
    let buf = draw(&a, &look(), 160, 48);
    assert_eq!(text(&buf), plain);
    let row = (0..48)
        .find(|&y| {
            (0..40)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                .contains(" w mode")
        })
        .unwrap();
    assert!(buf[(5, row)].modifier.contains(Modifier::REVERSED));
    assert!(!buf[(5, row + 1)].modifier.contains(Modifier::REVERSED));
}

/// A workload on a target whose connection was lost: the header names the
/// target and says so, in the main screen and in presentation mode; the
/// charts keep what arrived.
#[test]
fn a_lost_remote_workload_says_so_and_keeps_its_charts() {
    let mut a = app(false);
    a.running.moved_to(Some(Place {
        name: "ssh:pixel".into(),
        detail: Some("(pixel)".into()),
        health: vec!["lag 2.3 s".into()],
    }));
    a.running.lose("the agent's output ended".into());
    let screen = text(&draw(&a, &look(), 120, 40));
    let header = screen.lines().next().unwrap();
    assert!(
        header.contains("│ ssh:pixel")
            && header.contains("· lag 2.3 s")
            && header.contains("✗ connection lost: the agent's output ended"),
        "{header}"
    );
    assert!(screen.contains("⡇"), "the charts stay:\n{screen}");
    insta::assert_snapshot!("remote_lost_120x40", screen);
    a.view.set_present(true);
    let screen = text(&draw(&a, &look(), 80, 24));
    let header = screen.lines().next().unwrap();
    assert!(
        header.contains("ssh:pixel") && header.contains("connection lost"),
        "{header}"
    );
}

/// A quiet setting (`workers.affinity_strict`) is in the settings panel
/// only once it differs from its default.
#[test]
fn a_quiet_setting_shows_once_changed() {
    let mut a = app(false);
    let screen = text(&draw(&a, &look(), 160, 48));
    assert!(!screen.contains(" strict "), "{screen}");
    let mut s = a.running.settings().clone();
    s.workers.affinity_strict = true;
    a.running.set(s, a.running.effective().clone());
    let screen = text(&draw(&a, &look(), 160, 48));
    // Its name outgrows the column: its short form, whole.
    assert!(screen.contains("   strict         true"), "{screen}");
}

/// A finished sweep (`readpath replay SWEEP.json`) at the sizes a user
/// has: the grid whole, every verdict coloured, the selected point in
/// words, nothing cut mid-value.
#[test]
fn sweep_view_at_80x24_120x40_160x48() {
    use readpath::tui::sweep_view::{Cursor, render};
    let r = readpath::tui::fixture::sweep();
    for (w, h) in [(80u16, 24u16), (120, 40), (160, 48)] {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        let th = Theme::named(ThemeName::Dark);
        t.draw(|f| render(&r, Cursor { row: 1, col: 1 }, &th, f.area(), f.buffer_mut()))
            .unwrap();
        let screen = text(t.backend().buffer());
        for want in [
            "-98% ✓",
            "+55% ✗",
            "~-5%",
            "workload.cpus = 2, load.hogs = 1",
            "not reproduced: +55%, ranges apart (published -96%)",
            "the opposite sign (ranges apart) at 1 of 6: cpus=2/hogs=1",
        ] {
            assert!(
                screen.contains(want),
                "{w}x{h}: {want:?} missing:\n{screen}"
            );
        }
        insta::assert_snapshot!(format!("sweep_{w}x{h}"), screen);
    }
}

/// The fixture with a baseline and a live A/B started, and the windows
/// of the baseline and of "now" to make its turns of.
fn app_in_ab() -> (App, Vec<WindowStats>, Vec<WindowStats>) {
    let mut a = app(true);
    a.baseline
        .start_ab(a.running.settings(), a.window.elapsed_s())
        .unwrap();
    let base = a.baseline.get().unwrap().windows.clone();
    let now = a.window.now_windows().to_vec();
    (a, base, now)
}

/// The live A/B (`A`) in the baseline panel: each side's median over its
/// turns, the change judged over the rounds (compare's rule), the round
/// and the turn's clock, the throughput's verdict in words; at every size.
#[test]
fn live_ab_panel_shows_rounds_and_verdicts() {
    let (mut a, base, now) = app_in_ab();
    assert!(
        base.len() >= 4 && now.len() >= 4,
        "{} {}",
        base.len(),
        now.len()
    );
    let t = a.window.elapsed_s();
    a.baseline.ab_mut().unwrap().since_s = t - 2.0;
    // Three rounds: the ranges apart, but noise alone does that 10% of
    // the time: a hint, marked `?`.
    a.baseline.ab_mut().unwrap().turns = [base[..3].to_vec(), now[..3].to_vec()];
    let screen = text(&draw(&a, &look(), 160, 48));
    for want in [
        "live A/B · round 4 · on now 2/5 s",
        "?-97%",
        "3 v 3 rounds; base 31.2-31.2",
    ] {
        assert!(screen.contains(want), "{want:?}:\n{screen}");
    }
    // Four: a finding.
    a.baseline.ab_mut().unwrap().turns = [base[..4].to_vec(), now[..4].to_vec()];
    let screen = text(&draw(&a, &look(), 160, 48));
    for want in [
        "live A/B · round 5 · on now 2/5 s",
        " -97%",
        "4 v 4 rounds; base 31.2-31.2",
        "1.5 s of each turn dropped · A stops",
    ] {
        assert!(screen.contains(want), "{want:?}:\n{screen}");
    }
    assert!(
        !screen.contains("~-97%") && !screen.contains("?-97%"),
        "{screen}"
    );
    insta::assert_snapshot!("ab_160x48", screen);
    // Where the panel is narrow the title keeps the turn's clock, whole.
    let mid = text(&draw(&a, &look(), 120, 40));
    assert!(mid.contains("A/B · round 5 · now 2/5 s"), "{mid}");
    insta::assert_snapshot!("ab_120x40", mid);
    insta::assert_snapshot!("ab_80x24", text(&draw(&a, &look(), 80, 24)));
}

/// An A/B that ended keeps its table on the panel (titled as its result)
/// until the next `b` or `A`; its result event is logged, not a marker.
#[test]
fn an_ended_ab_keeps_its_result_until_the_next_b_or_a() {
    let (mut a, base, now) = app_in_ab();
    a.baseline.ab_mut().unwrap().turns = [base[..4].to_vec(), now[..4].to_vec()];
    assert_eq!(a.baseline.end_ab(a.window.elapsed_s()).unwrap().rounds(), 4);
    let line = "A/B result: 4 rounds, baseline -> now: MiB/s 31.2 -> 31.2".to_string();
    for (w, h) in [(80, 24), (120, 40), (160, 48)] {
        let screen = text(&draw(&a, &look(), w, h));
        assert!(screen.contains("A/B result ·"), "{w}x{h}:\n{screen}");
        assert!(screen.contains("-97%"), "{w}x{h}:\n{screen}");
    }
    // The result comes back as an event: logged, no marker.
    let markers = a.window.markers().len();
    let mut r = readpath::tui::fixture::record(180);
    r.events.push(readpath::metrics::Event {
        t_s: r.t_s - 0.1,
        label: line.clone(),
    });
    a.push(r);
    assert_eq!(a.window.markers().len(), markers);
    assert!(a.log.lines().iter().any(|(_, l, _)| *l == line));
    // A new baseline ends it.
    assert_eq!(a.mark_baseline(), Ok(()));
    assert!(a.baseline.ab_last().is_none());
    let screen = text(&draw(&a, &look(), 160, 48));
    assert!(!screen.contains("┌ A/B result"), "{screen}");
    assert!(screen.contains("┌ baseline vs now"), "{screen}");
}

/// First contact: the footer names three keys to try, whole at 80x24,
/// until a key is pressed.
#[test]
fn the_first_hint_names_three_keys_and_goes_on_a_key() {
    let mut a = app(false);
    a.log.show_hint();
    let screen = text(&draw(&a, &look(), 80, 24));
    let footer = screen.lines().last().unwrap();
    assert!(
        footer.contains(readpath::tui::state::FIRST_HINT),
        "{footer}"
    );
    a.log.end_hint();
    let screen = text(&draw(&a, &look(), 80, 24));
    assert!(!screen.contains("try w"), "{screen}");
}

/// Keys in context: a replay's footer offers no key the replay refuses
/// (settings, presets, save, A/B), and still its own.
#[test]
fn a_replays_footer_offers_only_what_a_replay_does() {
    let mut a = app(false);
    a.running.set_replay("replay 1x".into());
    let screen = text(&draw(&a, &look(), 220, 48));
    let footer = screen.lines().last().unwrap();
    for refused in [" w ", " p presets", " s save", " A A/B", " +- ", " gG "] {
        assert!(!footer.contains(refused), "{refused:?}: {footer}");
    }
    for kept in [" b baseline", " zZ zoom", " ? help", " q quit"] {
        assert!(footer.contains(kept), "{kept:?}: {footer}");
    }
}

/// Tokens of a screen: runs of letters, digits and the punctuation inside
/// values (`.` `%` `/` `-` `_` `:` `,`), braille, box drawing and block
/// glyphs left out.
fn tokens(screen: &str) -> Vec<String> {
    let keep = |c: char| c.is_ascii_alphanumeric() || "._%/-:,µ".contains(c);
    screen
        .split(|c: char| !keep(c))
        .map(|t| t.trim_matches(|c: char| ",:.".contains(c)).to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

/// The text of the box where `with` (a popup drawn) differs from
/// `under` (the same screen without it), one line per row.
fn popup_text(with: &Buffer, under: &Buffer) -> String {
    let a = with.area;
    let (mut x0, mut y0, mut x1, mut y1) = (u16::MAX, u16::MAX, 0, 0);
    for y in 0..a.height {
        for x in 0..a.width {
            if with[(x, y)] != under[(x, y)] {
                (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
            }
        }
    }
    let mut out = String::new();
    for y in y0..=y1.min(a.height.saturating_sub(1)) {
        for x in x0..=x1 {
            out.push_str(with[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// No value or word is cut: every token on each screen at 80x24, 100x30,
/// 120x40 and 160x48 is one the same screen shows whole on a very large
/// terminal (where nothing needs cutting), a short form from the tables,
/// a chart's axis label, or a piece of a word longer than any line.
#[test]
fn no_screen_cuts_a_value_or_a_word() {
    use readpath::tui::overlay::chooser::open_chooser;
    use std::collections::BTreeSet;
    let mut present = app(true);
    present.view.set_present(true);
    let mut replay = app(true);
    replay.running.set_replay("replay 2x".into());
    let mut ab = app(true);
    ab.baseline
        .start_ab(ab.running.settings(), ab.window.elapsed_s())
        .unwrap();
    let (bw, nw) = (
        ab.baseline.get().unwrap().windows.clone(),
        ab.window.now_windows().to_vec(),
    );
    ab.baseline.ab_mut().unwrap().turns = [bw, nw];
    let mut hint = app(false);
    hint.log.show_hint();
    let mut present_ab = ab.clone();
    present_ab.view.set_present(true);
    // An A/B that ended: its result stays, on the panel and presentation's box.
    let mut ab_result = ab.clone();
    ab_result.baseline.end_ab(ab_result.window.elapsed_s());
    let mut present_ab_result = ab_result.clone();
    present_ab_result.view.set_present(true);
    // The popups and messages.
    let with = |f: &dyn Fn(&mut App)| {
        let mut a = app(true);
        f(&mut a);
        a
    };
    let help = with(&|a| a.overlays.open(Overlay::help()));
    let help_found = with(&|a| a.overlays.open(Overlay::help_on(Some("stages".into()))));
    let help_long = with(&|a| {
        a.overlays
            .open(Overlay::help_on(Some("workload.queue_depth".into())))
    });
    let chooser = with(&|a| {
        // Nice -20 refused here: `true` greyed with its reason.
        let mut s = a.running.settings().clone();
        s.workers.highpri = false;
        a.running.set(s.clone(), s);
        a.view.select_setting("workers.highpri");
        a.overlays.open(open_chooser(a, "workers.highpri"));
    });
    let chooser_scope = with(&|a| a.overlays.open(open_chooser(a, "workers.affinity_scope")));
    let picker = with(&|a| {
        a.overlays.open(Overlay::Picker {
            items: shipped_items(),
            selected: 1,
        });
    });
    let prompt = with(&|a| {
        use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
        use readpath::tui::overlay::prompt::{open_prompt, prompt_key};
        a.overlays.open(open_prompt());
        for c in "set workers.verify_mode=boundd".chars() {
            prompt_key(a, KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        }
        prompt_key(a, KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    });
    let save = with(&|a| {
        a.overlays.open(Overlay::SaveName {
            name: "default".into(),
            selected: true,
            refused: Some("' ' cannot be in a preset name: letters, digits, - _ . only".into()),
        })
    });
    let confirm = with(&|a| a.overlays.open(Overlay::ConfirmOverwrite("mine".into())));
    let error = with(&|a| {
        a.overlays
            .error("workload.queue_depth = 5000: not allowed; a number in 1..=4096")
    });
    let flash = with(&|a| {
        a.flash(
            "workload.engine: uring -> sync, workload.sleep: plain -> iowait, \
             workers.mode: bound -> unbound (applied in 96 ms)",
        )
    });
    let caption = with(&|a| {
        a.show.set_caption(
            "Bound: each read's verification waits on the CPU that completed it, \
             behind the hogs; watch run_delay climb on the scheduler chart"
                .into(),
        );
        a.show.set_step(2, 5, Some(a.window.elapsed_s() + 12.0));
    });
    let readout = with(&|a| {
        a.view.read_chart(readpath::tui::state::Readout {
            chart: readpath::tui::state::ChartKind::Latency,
            t_s: 20.1,
        })
    });
    let apps: Vec<(&str, App)> = vec![
        ("main", app(false)),
        ("baseline", app(true)),
        ("kernel", readpath::tui::fixture::kernel_app()),
        ("present", present),
        ("replay", replay),
        ("ab", ab),
        ("present_ab", present_ab),
        ("ab_result", ab_result),
        ("present_ab_result", present_ab_result),
        ("hint", hint),
        ("help", help),
        ("help_found", help_found),
        ("help_long", help_long),
        ("chooser", chooser),
        ("chooser_scope", chooser_scope),
        ("picker", picker),
        ("prompt", prompt),
        ("save", save),
        ("confirm", confirm),
        ("error", error),
        ("flash", flash),
        ("caption", caption),
        ("readout", readout),
        ("timeline", readpath::tui::fixture::timeline_app(false)),
        (
            "timeline_chosen",
            readpath::tui::fixture::timeline_app(true),
        ),
    ];
    let sweep = readpath::tui::fixture::sweep();
    type Screen<'a> = Box<dyn Fn(u16, u16) -> String + 'a>;
    // A popup's screen is its box only: what it covers of the screen
    // under it is not cut, only hidden.
    let mut screens: Vec<(&str, Screen)> = apps
        .iter()
        .map(|(name, a)| {
            let f: Screen = Box::new(move |w, h| {
                let with = draw(a, &look(), w, h);
                if !a.overlays.is_open() {
                    return text(&with);
                }
                let mut under = a.clone();
                under.overlays.open(Overlay::None);
                popup_text(&with, &draw(&under, &look(), w, h))
            });
            (*name, f)
        })
        .collect();
    screens.push((
        "sweep",
        Box::new(|w, h| {
            use readpath::tui::sweep_view::{Cursor, render};
            let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
            let th = Theme::named(ThemeName::Dark);
            t.draw(|f| {
                render(
                    &sweep,
                    Cursor { row: 1, col: 1 },
                    &th,
                    f.area(),
                    f.buffer_mut(),
                )
            })
            .unwrap();
            text(t.backend().buffer())
        }),
    ));
    let mut bad = Vec::new();
    for (name, draw_at) in &screens {
        let mut whole: BTreeSet<String> = BTreeSet::new();
        for (w, h) in [(400u16, 120u16), (300, 100)] {
            whole.extend(tokens(&draw_at(w, h)));
        }
        // Short forms from the tables (never cut: chosen whole).
        whole.extend(
            readpath::tui::text::SHORT_NAMES
                .iter()
                .map(|(_, s)| s.to_string()),
        );
        whole.extend(
            readpath::metrics::METRICS
                .iter()
                .flat_map(|m| tokens(m.narrow)),
        );
        // An entry longer than the events panel says where the rest is;
        // presentation's change box is titled `vs base` or `change` where
        // `vs baseline` does not fit (each chosen whole); a message says
        // where it is whole.
        whole.extend(tokens(
            "… whole in the summary (q) vs base baseline change +1 more +2 more in events",
        ));
        for (w, h) in [(80u16, 24u16), (100, 30), (120, 40), (160, 48)] {
            let screen = draw_at(w, h);
            for t in tokens(&screen) {
                let axis = t.ends_with('s')
                    && t.trim_start_matches('-')
                        .trim_end_matches(['s', 'm', 'u', 'n'])
                        .parse::<f64>()
                        .is_ok()
                    || t.parse::<f64>().is_ok();
                // The help's title: the lines shown (`1-26 of 190`).
                let range = t
                    .split_once('-')
                    .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok());
                // A word longer than a panel's line (a path in a notice)
                // is broken where it must be.
                let long_piece = whole
                    .iter()
                    .any(|w| w.chars().count() > 30 && w.contains(&t));
                if !whole.contains(&t) && !axis && !range && !long_piece {
                    bad.push(format!("{name} {w}x{h}: {t:?}"));
                }
            }
            for line in screen.lines() {
                let chars: Vec<char> = line.chars().collect();
                for (i, pair) in chars.windows(2).enumerate() {
                    // A title run into its box's corner was cut at a
                    // space (every title ends in a space or a rule).
                    let texty = |c: char| c.is_alphanumeric() || "%)]:.,".contains(c);
                    if texty(pair[0]) && "┐┘╮╯".contains(pair[1]) {
                        bad.push(format!("{name} {w}x{h}: title cut: {line:?}"));
                    }
                    // An ellipsis right after a word is a cut word or
                    // value; one after a space stands for "the rest".
                    if pair[1] == '…' && !pair[0].is_whitespace() && i + 1 < chars.len() {
                        bad.push(format!("{name} {w}x{h}: ellipsis cut: {line:?}"));
                    }
                }
            }
        }
    }
    bad.sort();
    bad.dedup();
    assert!(bad.is_empty(), "{} cut:\n{}", bad.len(), bad.join("\n"));
}

/// Before a baseline, presentation's change box keeps its title and says
/// how a baseline comes (live: `press b`; in a demo, a step marks it).
#[test]
fn the_change_box_before_a_baseline_says_how_one_comes() {
    let mut a = app(false);
    a.view.set_present(true);
    let screen = text(&draw(&a, &look(), 80, 24));
    assert!(screen.contains("┌ vs baseline "), "{screen}");
    assert!(screen.contains("└ press b ─"), "{screen}");
    a.show.set_step(1, 3, Some(50.0));
    let screen = text(&draw(&a, &look(), 80, 24));
    assert!(screen.contains("└ a step marks it ─"), "{screen}");
}

/// In presentation mode the live A/B's verdict is the change box: the
/// first number's change over the rounds, and whether the ranges are apart.
#[test]
fn presentation_shows_the_live_ab_in_the_change_box() {
    let mut a = app(true);
    a.view.set_present(true);
    a.baseline
        .start_ab(a.running.settings(), a.window.elapsed_s())
        .unwrap();
    let (bw, nw) = (
        a.baseline.get().unwrap().windows.clone(),
        a.window.now_windows().to_vec(),
    );
    a.baseline.ab_mut().unwrap().turns = [bw[..3].to_vec(), nw[..3].to_vec()];
    let screen = text(&draw(&a, &look(), 120, 40));
    assert!(screen.contains("┌ throughput A/B, 3 rounds "), "{screen}");
    assert!(screen.contains("└ within noise ─"), "{screen}");
    // No demo verdict line while the A/B runs: its rounds are the verdict.
    assert!(a.demo_verdict().is_none());
}

/// The change shown vs the baseline is the verdict's own once each side
/// has two windows (so the panel, the boxes and the verdict line agree),
/// and none before that: no figure from a second of data.
#[test]
fn the_change_vs_the_baseline_is_the_verdicts_once_it_has_windows() {
    let a = app(true);
    let rd = readpath::metrics::table::metric("run_delay_ms_per_s").unwrap();
    let (c, kind) = a.baseline.change(&a.window, rd).unwrap();
    let v = a.baseline.verdict_on(&a.window, rd, None).unwrap();
    assert_eq!(Some(c), v.verdict.change_pct);
    assert!(kind.unwrap().is_significant());
    // "now" under two windows (1.5 s after the change): no change yet.
    let a = baseline_then_short_now();
    assert!(a.window.now_windows().len() < 2);
    assert_eq!(a.baseline.change(&a.window, rd), None);
}

/// Every shipped demo's captions fit presentation's caption band (three
/// lines) whole at 80 columns, so none is ever shortened on stage.
#[test]
fn shipped_captions_fit_the_band_at_80_columns() {
    let mut n = 0;
    for (name, _) in readpath::scenario::preset::SHIPPED {
        let Ok(demo) = readpath::scenario::demo::resolve(name, 16) else {
            continue;
        };
        for c in demo.steps.iter().filter_map(|s| s.caption.as_ref()) {
            n += 1;
            let lines = readpath::tui::text::wrap_words(c, 76, 76);
            assert!(lines.len() <= 3, "{name}: {} lines: {c}", lines.len());
        }
    }
    assert!(n >= 10, "the shipped demos' captions, found {n}");
}

/// A workload that runs nowhere: it takes changes and marks as the engine
/// does (one event per changed key, with the next record, here the
/// shared `events` the test sends with its records).
struct FakeWorkload {
    settings: readpath::settings::Settings,
    features: readpath::sys::Features,
    rx: std::sync::mpsc::Receiver<readpath::metrics::IntervalRecord>,
    events: std::rc::Rc<std::cell::RefCell<Vec<readpath::metrics::Event>>>,
    t_s: std::rc::Rc<std::cell::Cell<f64>>,
    /// What runs, when a refusal at run time made it differ from what was
    /// asked.
    ran: std::rc::Rc<std::cell::RefCell<Option<readpath::settings::Settings>>>,
}

impl FakeWorkload {
    /// One running `app`'s settings, and the sender of its records (kept
    /// by the test: the workload is lost once it is dropped).
    fn of(
        app: &App,
    ) -> (
        FakeWorkload,
        std::sync::mpsc::Sender<readpath::metrics::IntervalRecord>,
    ) {
        let (tx, rx) = std::sync::mpsc::channel();
        let fake = FakeWorkload {
            settings: app.running.settings().clone(),
            features: readpath::sys::Features::default(),
            rx,
            events: Default::default(),
            t_s: std::rc::Rc::new(std::cell::Cell::new(app.window.elapsed_s())),
            ran: Default::default(),
        };
        (fake, tx)
    }
}

impl readpath::engine::workload::Workload for FakeWorkload {
    fn settings(&self) -> &readpath::settings::Settings {
        &self.settings
    }
    fn effective(&self) -> readpath::settings::Settings {
        self.ran
            .borrow()
            .clone()
            .unwrap_or_else(|| self.settings.clone())
    }
    fn features(&self) -> &readpath::sys::Features {
        &self.features
    }
    fn machine(&self) -> readpath::sys::MachineInfo {
        readpath::sys::MachineInfo::default()
    }
    fn records(&self) -> &std::sync::mpsc::Receiver<readpath::metrics::IntervalRecord> {
        &self.rx
    }
    fn apply(
        &mut self,
        new: readpath::settings::Settings,
    ) -> Result<Vec<readpath::settings::SettingChange>, readpath::engine::EngineError> {
        let changes = self.settings.diff(&new);
        for c in &changes {
            self.mark_event(&c.label());
        }
        self.settings = new;
        Ok(changes)
    }
    fn mark_event(&self, label: &str) {
        self.events.borrow_mut().push(readpath::metrics::Event {
            t_s: self.t_s.get(),
            label: label.to_string(),
        });
    }
    fn pause(&mut self) {}
    fn resume(&mut self) -> Result<(), readpath::engine::EngineError> {
        Ok(())
    }
    fn is_paused(&self) -> bool {
        false
    }
    fn drop_cache(&mut self) -> Option<usize> {
        None
    }
    fn pods(&self) -> Option<String> {
        None
    }
}

/// A refusal at run time (the target's kernel refused the workers' nice
/// -20) greys the setting out with the record whose notice says so, not
/// at the next change the user makes.
#[test]
fn a_refusal_at_run_time_greys_the_setting_out_with_its_notice() {
    use readpath::tui::Driver;
    let mut a = app(true);
    let mut asked = a.running.settings().clone();
    asked.workers.highpri = true;
    a.running.set(asked.clone(), asked.clone());
    let (mut fake, tx) = FakeWorkload::of(&a);
    let ran = fake.ran.clone();
    let mut d = readpath::tui::EngineDriver {
        engine: &mut fake,
        out: Default::default(),
    };
    let mut refused = asked.clone();
    refused.workers.highpri = false;
    *ran.borrow_mut() = Some(refused.clone());
    let mut r = readpath::tui::fixture::record(180);
    r.notices.push(readpath::metrics::Notice {
        t_s: r.t_s,
        text: "workers.highpri: running at nice 0 instead of -20: cannot set nice -20".into(),
    });
    tx.send(r).unwrap();
    d.poll(&mut a);
    assert_eq!(a.running.effective(), &refused);
    assert!(a.running.settings().workers.highpri, "still asked for");
}

/// The live A/B's switches are neither chart markers nor log lines: the
/// A/B's start and stop are markers, and each completed round is one log
/// line with both sides' throughput.
#[test]
fn a_live_ab_marks_its_start_and_stop_and_logs_rounds_not_switches() {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use readpath::tui::Driver;
    let mut a = app(true);
    let (mut fake, tx) = FakeWorkload::of(&a);
    let (events, t_s) = (fake.events.clone(), fake.t_s.clone());
    let markers_before = a.window.markers().len();
    let log_before = a.log.lines().len();
    let mut d = readpath::tui::EngineDriver {
        engine: &mut fake,
        out: Default::default(),
    };
    let key = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::SHIFT);
    let mut seq = 180;
    let mut step = |d: &mut readpath::tui::EngineDriver, a: &mut App, n: u64| {
        for _ in 0..n {
            let mut r = readpath::tui::fixture::record(seq);
            seq += 1;
            r.events = std::mem::take(&mut *events.borrow_mut());
            t_s.set(r.t_s);
            tx.send(r).unwrap();
            d.poll(a);
        }
    };
    d.key(&mut a, key('A'));
    assert!(a.baseline.ab().is_some(), "{:?}", a.flash_text());
    // 31 s: six turns of 5 s, three rounds.
    step(&mut d, &mut a, 124);
    let ab = a.baseline.ab().cloned().expect("the A/B runs");
    assert_eq!(ab.rounds(), 3);
    let labels: Vec<&str> = a.window.markers()[markers_before..]
        .iter()
        .map(|m| m.label.as_str())
        .collect();
    assert_eq!(labels, ["A/B start"], "one marker, no switch");
    let log: Vec<&str> = a
        .log
        .lines()
        .iter()
        .skip(log_before)
        .map(|l| l.1.as_str())
        .collect();
    let rounds: Vec<&&str> = log.iter().filter(|l| l.starts_with("A/B round ")).collect();
    assert_eq!(rounds.len(), 3, "{log:#?}");
    assert!(
        rounds[0].starts_with("A/B round 1: MiB/s baseline ") && rounds[0].contains(" · now "),
        "{log:#?}"
    );
    assert!(!log.iter().any(|l| l.contains("workers.mode")), "{log:#?}");
    // Stopped on the baseline's turn: back on the current settings, that
    // change the marker "now" starts at; the stop logged.
    step(&mut d, &mut a, 20);
    assert_eq!(a.baseline.ab().unwrap().on, 0, "the baseline's turn");
    d.key(&mut a, key('A'));
    assert!(a.baseline.ab().is_none());
    step(&mut d, &mut a, 1);
    let last = a.window.markers().last().unwrap();
    assert_eq!(last.label, "mode: unbound -> bound");
    assert_eq!(a.window.markers().len(), markers_before + 2);
    assert!(
        a.log
            .lines()
            .iter()
            .any(|l| l.1 == "A/B stopped after 3 rounds: back on your settings")
    );
    // Its turns stay on the latency chart's strip: one after the other,
    // sides alternating from the current settings', the last ending at
    // the stop; the baseline's drawn apart from the current settings'.
    let turns = a.baseline.spans(a.window.elapsed_s());
    assert!(turns.len() >= 7, "{turns:?}");
    assert_eq!(turns[0].2, 1, "the A/B starts on the current settings");
    for w in turns.windows(2) {
        assert_eq!(w[0].1, w[1].0, "turns meet: {turns:?}");
        assert_ne!(w[0].2, w[1].2, "sides alternate: {turns:?}");
    }
    assert_eq!(turns.last().unwrap().2, 0, "stopped on the baseline's turn");
    let l =
        readpath::tui::render::layout::main_layout(&a, ratatui::layout::Rect::new(0, 0, 160, 48));
    let strip_y = l.charts[0].1.y + 1;
    let buf = draw(&a, &look(), 160, 48);
    let strip: String = (l.charts[0].1.x..l.charts[0].1.right())
        .map(|x| buf[(x, strip_y)].symbol().to_string())
        .collect();
    assert!(strip.contains("▄▄") && strip.contains("▁▁"), "{strip}");
    // Stopped on the current settings' turn: a marker of its own.
    d.key(&mut a, key('A'));
    step(&mut d, &mut a, 10);
    assert_eq!(a.baseline.ab().unwrap().on, 1);
    d.key(&mut a, key('A'));
    step(&mut d, &mut a, 1);
    let labels: Vec<&str> = a.window.markers()[markers_before + 2..]
        .iter()
        .map(|m| m.label.as_str())
        .collect();
    assert_eq!(labels, ["A/B start", "A/B stop"]);
}

/// `?` explains what is focused: the panel last clicked (the stages
/// panel, the header), the chart read, the cursor's setting; Esc clears
/// the focus and `?` opens the whole help again.
#[test]
fn question_mark_opens_the_help_at_the_focused_panel() {
    use ratatui::crossterm::event::{
        KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
    };
    use ratatui::layout::Rect;
    use readpath::tui::Driver;
    use readpath::tui::render::layout::main_layout;
    let mut a = app(true);
    a.view.set_screen(Rect::new(0, 0, 160, 48));
    let (mut fake, _tx) = FakeWorkload::of(&a);
    let mut d = readpath::tui::EngineDriver {
        engine: &mut fake,
        out: Default::default(),
    };
    let click = |a: &mut App, x: u16, y: u16| {
        let ev = MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column: x,
            row: y,
            modifiers: KeyModifiers::NONE,
        };
        readpath::tui::mouse::mouse(a, ev, true);
    };
    let key = |c| KeyEvent::new(c, KeyModifiers::NONE);
    let l = main_layout(&a, a.view.screen());
    let stages = l.bottom.expect("a bottom row at 160x48")[1];
    let ask = |d: &mut readpath::tui::EngineDriver, a: &mut App| {
        d.key(a, key(KeyCode::Char('?')));
        let Overlay::Help { find, .. } = a.overlays.current() else {
            panic!("no help: {:?}", a.overlays.current());
        };
        let find = find.clone();
        d.key(a, key(KeyCode::Char('?')));
        assert_eq!(*a.overlays.current(), Overlay::None, "? closes it");
        find
    };
    click(&mut a, stages.x + 3, stages.y + 2);
    assert_eq!(ask(&mut d, &mut a), "stages");
    let screen = {
        a.overlays.open(Overlay::help_on(a.view.help_topic()));
        let s = text(&draw(&a, &look(), 160, 48));
        a.overlays.open(Overlay::None);
        s
    };
    assert!(screen.contains("help: \"stages\""), "{screen}");
    assert!(screen.contains("the stages panel: per bio"), "{screen}");
    click(&mut a, 10, 0);
    assert_eq!(ask(&mut d, &mut a), "header");
    let (_, chart) = l.charts[1];
    click(&mut a, chart.x + 20, chart.y + 3);
    assert_eq!(ask(&mut d, &mut a), "axes");
    d.key(&mut a, key(KeyCode::Esc)); // the readout
    assert_eq!(ask(&mut d, &mut a), "axes", "the chart keeps the focus");
    d.key(&mut a, key(KeyCode::Esc)); // the focus
    assert_eq!(ask(&mut d, &mut a), "");
    d.key(&mut a, key(KeyCode::Down));
    let first = a.view.cursor().expect("the cursor on the first row");
    assert_eq!(ask(&mut d, &mut a), first);
    let rows = readpath::tui::help::rows(a.running.mode(), first);
    assert!(
        rows.iter().any(|(k, _)| k == first),
        "the help has {first}'s row: {rows:?}"
    );
}

/// Tab and Shift-Tab step the focus through the panels the screen shows,
/// round the ends, without a mouse: the header, the settings panel (its
/// cursor), the charts, the bottom row, the events panel; `?` explains
/// the focused one, its border is drawn bright, Up / Down scroll the events
/// panel when it has the focus, and at 80x24 (no bottom row) Tab skips the
/// panels not drawn.
#[test]
fn tab_moves_the_focus_through_the_panels_on_screen() {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use ratatui::layout::Rect;
    use readpath::tui::Driver;
    use readpath::tui::render::layout::main_layout;
    let mut a = app(true);
    for i in 0..80 {
        a.log.line(i as f64, format!("event line {i}"), false);
    }
    a.view.set_screen(Rect::new(0, 0, 160, 48));
    let (mut fake, _tx) = FakeWorkload::of(&a);
    let mut d = readpath::tui::EngineDriver {
        engine: &mut fake,
        out: Default::default(),
    };
    let key = |c| KeyEvent::new(c, KeyModifiers::NONE);
    let at = |a: &App| {
        a.view
            .focus()
            .map(str::to_string)
            .or(a.view.cursor().map(|_| "settings".into()))
    };
    let mut seen = Vec::new();
    for _ in 0..8 {
        d.key(&mut a, key(KeyCode::Tab));
        seen.push(at(&a).unwrap_or_default());
    }
    assert_eq!(
        seen,
        [
            "header",
            "settings",
            "axes",
            "distribution",
            "stages",
            "baseline",
            "events",
            "header"
        ]
    );
    // Shift-Tab goes back round the start.
    d.key(&mut a, KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT));
    assert_eq!(at(&a).as_deref(), Some("events"));
    // The focused panel's border is in the title's colour; another's is not.
    let th = look().theme;
    let l = main_layout(&a, a.view.screen());
    let buf = draw(&a, &look(), 160, 48);
    let corner = |r: Rect| buf[(r.x, r.y + r.height - 1)].fg;
    assert_eq!(corner(l.events), th.title, "the events panel is focused");
    assert_eq!(corner(l.settings), th.border, "the settings panel is not");
    // Up scrolls the focused events panel back, Down forward again; the
    // settings cursor does not move.
    d.key(&mut a, key(KeyCode::Up));
    assert!(a.log.anchor().is_some(), "scrolled back");
    assert_eq!(a.view.cursor(), None);
    d.key(&mut a, key(KeyCode::Down));
    d.key(&mut a, key(KeyCode::Char('?')));
    let Overlay::Help { find, .. } = a.overlays.current() else {
        panic!("no help: {:?}", a.overlays.current());
    };
    assert_eq!(find, "events");
    d.key(&mut a, key(KeyCode::Esc));
    d.key(&mut a, key(KeyCode::Esc));
    assert_eq!(*a.overlays.current(), Overlay::None);
    // Tab onto the settings panel puts its cursor on the top row.
    while a.view.cursor().is_none() {
        d.key(&mut a, key(KeyCode::Tab));
    }
    assert_eq!(
        Some(a.view.cursor().unwrap()),
        l.setting_rows.first().map(|r| r.1)
    );
    // At 80x24: no bottom row, no stop for it.
    a.view.set_screen(Rect::new(0, 0, 80, 24));
    a.view.focus_panel(None);
    let mut small = Vec::new();
    for _ in 0..6 {
        d.key(&mut a, key(KeyCode::Tab));
        small.push(at(&a).unwrap_or_default());
    }
    let stops = readpath::tui::render::layout::focus_stops(&main_layout(&a, a.view.screen()));
    assert!(!stops.contains(&"stages"), "{stops:?}");
    assert_eq!(small[..stops.len()], stops[..]);
}

/// "now"'s verdict windows, taken in one record at a time, are the very
/// windows `window_stats` cuts from "now"'s records after a change; with
/// no change inside the time window, each lies inside "now" and they stay
/// where they were as the window slides (cut from the last marker).
#[test]
fn nows_windows_taken_in_per_record_are_the_rules_windows() {
    use readpath::output::verdict::{SETTLE_S, WINDOW_S, window_stats};
    let mut a = app(true);
    for seq in 180..260 {
        a.push(readpath::tui::fixture::record(seq));
        let now: Vec<_> = a.window.now_records().collect();
        assert_eq!(
            a.window.now_windows(),
            window_stats(&now, WINDOW_S, SETTLE_S),
            "{seq}"
        );
    }
    assert!(a.window.now_windows().len() >= 10);
    // A 10 s time window, the marker long gone from it: "now" slides.
    a.window.zoom_to(10.0);
    let before = a.window.now_windows().to_vec();
    a.push(readpath::tui::fixture::record(260));
    let t0 = a.window.window_start();
    assert!(!a.window.now_windows().is_empty() && a.window.now_windows().len() <= 5);
    assert!(a.window.now_windows().iter().all(|w| w.from_s >= t0 - 1e-9));
    assert!(
        a.window
            .now_windows()
            .iter()
            .all(|w| before.contains(w) || w.to_s > before.last().map_or(0.0, |b| b.to_s)),
        "windows already cut stay as they were"
    );
}

/// The fixture's records to 126 intervals with the baseline marked at
/// 116: "now" holds under two verdict windows after it.
fn baseline_then_short_now() -> App {
    let s = readpath::settings::Settings::default();
    let mut a = App::new(s.clone(), s, readpath::tui::fixture::features(), 2);
    for seq in 0..126 {
        if seq == 116 {
            assert_eq!(a.mark_baseline(), Ok(()));
        }
        a.push(readpath::tui::fixture::record(seq));
    }
    a
}

/// Presentation's change box says a change is not judged yet while
/// "now" holds under two verdict windows ("too short to judge"), never
/// "within noise", which is a verdict.
#[test]
fn presentation_says_too_short_before_it_says_noise() {
    let mut a = baseline_then_short_now();
    let mut bound = a.running.settings().clone();
    bound.workers.mode = readpath::settings::WorkerMode::Bound;
    a.running.set(bound.clone(), bound);
    a.view.set_present(true);
    assert!(
        a.window.now_windows().len() < 2,
        "{}",
        a.window.now_windows().len()
    );
    for (w, h) in [(80, 24), (120, 40)] {
        let screen = text(&draw(&a, &look(), w, h));
        assert!(
            screen.contains("too short to judge") || screen.contains("measuring"),
            "{w}x{h}:\n{screen}"
        );
        assert!(!screen.contains("within noise"), "{w}x{h}:\n{screen}");
    }
}

/// Before the first interval (a start's last phase: a second here, more
/// from a slow target) the latency chart says what it waits for, naming
/// the target, at every size; the first record clears it.
#[test]
fn empty_charts_say_they_wait_for_the_first_interval() {
    use readpath::settings::Settings;
    let s = Settings::default();
    let mut a = App::new(s.clone(), s, readpath::tui::fixture::features(), 2);
    for (w, h) in [(80, 24), (120, 40), (160, 48)] {
        let screen = text(&draw(&a, &look(), w, h));
        let want = if w >= 120 {
            "waiting for the first interval from this host…"
        } else {
            "waiting for the first interval…"
        };
        assert!(screen.contains(want), "{w}x{h}:\n{screen}");
    }
    a.running.moved_to(Some(Place::named("vm:6.1-switches")));
    let screen = text(&draw(&a, &look(), 120, 40));
    assert!(screen.contains("waiting for the first interval from vm:6.1-switches…"));
    a.push(readpath::tui::fixture::record(0));
    let screen = text(&draw(&a, &look(), 120, 40));
    assert!(
        !screen.contains("waiting for the first interval"),
        "{screen}"
    );
}

#[test]
fn timeline_screens() {
    use readpath::tui::fixture::timeline_app;
    for (w, h) in [(80, 24), (120, 40), (160, 48)] {
        let screen = text(&draw(&timeline_app(false), &look(), w, h));
        insta::assert_snapshot!(format!("timeline_{w}x{h}"), screen);
        let screen = text(&draw(&timeline_app(true), &look(), w, h));
        assert!(
            screen.contains("◆ decrypt on CPU 1") || screen.contains("◆ verify on CPU 0"),
            "{screen}"
        );
        insta::assert_snapshot!(format!("timeline_chosen_{w}x{h}"), screen);
    }
}

/// Presentation mode with the timeline open (`t` on stage): the lanes in
/// the charts' place, all their height, each CPU's lane three rows tall,
/// the chosen item said under them.
#[test]
fn the_timeline_on_stage_takes_the_charts_place() {
    use readpath::tui::fixture::timeline_app;
    for (w, h) in [(80, 24), (120, 40)] {
        let mut a = timeline_app(true);
        a.view.set_present(true);
        let screen = text(&draw(&a, &look(), w, h));
        assert!(screen.contains("timeline"), "{screen}");
        assert!(!screen.contains("latency (log)"), "{screen}");
        if h >= 40 {
            // CPU 1's lane: its label on its bottom row, hog shade above.
            let rows: Vec<&str> = screen.lines().collect();
            let at = rows.iter().position(|l| l.contains("│CPU 1 ")).unwrap();
            assert!(rows[at - 1].contains("▒▒▒"), "{screen}");
            assert!(screen.contains("◆ "), "{screen}");
        }
        insta::assert_snapshot!(format!("present_timeline_{w}x{h}"), screen);
    }
}
