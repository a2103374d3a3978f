//! Synthetic interval records for the explorer's snapshot tests and its
//! benchmark: a deterministic 45 s QD1 workload (unbound until 30 s, then
//! bound, with a stall at 20 s), so screens and costs can be reproduced
//! without an engine, a disk or a clock.

use crate::metrics::{CpuUsage, Event, IntervalRecord, Notice, Recorder, Stage};
use crate::settings::{Settings, WorkerMode};
use crate::sys::Features;
use crate::tui::app::App;

/// Length of a fixture interval, seconds.
pub const INTERVAL_S: f64 = 0.25;

/// Machine features of the fixture (high priority refused).
pub fn features() -> Features {
    crate::sys::testing::fixture_features()
}

/// One interval of a QD1 workload through the page cache: a quarter of the
/// reads hit (a copy), the rest are one 4 KiB bio each, whose stages are
/// recorded per bio; unbound before t = 30 s (slower, more run_delay),
/// bound after; a stall at t = 20 s.
pub fn record(seq: u64) -> IntervalRecord {
    let t = (seq + 1) as f64 * INTERVAL_S;
    let bound = t > 30.0;
    let mut r = Recorder::new();
    let base_us = if bound { 70.0 } else { 90.0 };
    let n = 2000u64;
    for i in 0..n {
        // A deterministic spread: most near base, a tail up to ~20x.
        let f = i as f64 / n as f64;
        let us = base_us
            * (0.8 + 0.4 * f)
            * if f > 0.99 {
                20.0 * (f - 0.98) * 10.0
            } else {
                1.0
            };
        let us = if (seq == 80) && i == n - 1 {
            40_000.0
        } else {
            us
        };
        let hit = i % 4 == 3;
        let us = if hit { 0.3 } else { us };
        r.record(Stage::EndToEnd, (us * 1e3) as u64);
        if hit {
            continue;
        }
        r.record(Stage::Device, (us * 0.8e3) as u64);
        r.record(
            Stage::Queue,
            (us * if bound { 0.05e3 } else { 0.15e3 }) as u64,
        );
        r.record(Stage::Decrypt, 800);
        r.record(Stage::Verify, 3_000);
    }
    let misses = n - n / 4;
    r.counters.reads = n;
    r.counters.bytes = n * 4096;
    r.counters.pc_hits = n / 4;
    r.counters.pc_misses = misses;
    r.counters.bios = misses;
    r.counters.bio_bytes = misses * 4096;
    r.counters.decrypted_units = misses;
    r.counters.verified_blocks = misses;
    let mut rec = IntervalRecord {
        seq,
        t_s: t,
        ..Default::default()
    };
    rec.page_cache.size_bytes = 64 << 20;
    rec.fill_from(&r, INTERVAL_S);
    rec.workers.threads = 4;
    rec.workers.run_delay_us = if bound { 300.0 } else { 9_000.0 };
    rec.cpus = vec![
        CpuUsage {
            cpu: 0,
            busy_pct: 20.0,
            iowait_pct: 5.0,
        },
        CpuUsage {
            cpu: 1,
            busy_pct: 55.0,
            iowait_pct: 40.0,
        },
    ];
    if seq == 119 {
        rec.events.push(Event {
            t_s: 30.0,
            label: "workers.mode: unbound -> bound".into(),
        });
    }
    if seq == 0 {
        rec.notices.push(Notice {
            t_s: 0.0,
            text: "workers.highpri: nice -20 refused; running at nice 0".into(),
        });
    }
    rec
}

/// The explorer after 45 s of the fixture; with `baseline`, `b` was pressed
/// at 29 s (before the change).
pub fn app(baseline: bool) -> App {
    let s = Settings::default();
    let mut app = App::new(s.clone(), s, features(), 2);
    for seq in 0..180 {
        if seq == 116 && baseline {
            assert_eq!(app.mark_baseline(), Ok(()));
        }
        app.push(record(seq));
    }
    let mut bound = app.running.settings().clone();
    bound.workers.mode = WorkerMode::Bound;
    app.running.set(bound.clone(), bound);
    app
}

/// The explorer after the fixture's 45 s with the timeline open (`t`) on
/// 200 ms of spans: a decrypt item queued on CPU 0 every 400 us, run on
/// CPU 1 after a wait that grows, its verify back on CPU 0; a hog on CPU
/// 1 off its CPU while the items run; the reader asleep between reads.
/// With `chosen`, the view is frozen on an item (→ twice).
pub fn timeline_app(chosen: bool) -> App {
    use crate::metrics::{Role, Span, SpanKind, Timeline, TimelineThread};
    let mut app = app(false);
    app.lanes.toggle();
    let end_ns = (app.window.elapsed_s() * 1e9) as u64;
    let from = end_ns - 200_000_000;
    let mut spans = Vec::new();
    let span = |kind, cpu, queued_cpu, tid, q: u64, s: u64, e: u64| Span {
        kind,
        cpu,
        queued_cpu,
        tid,
        queued_ns: q,
        start_ns: s,
        end_ns: e,
    };
    let mut hog_from = from;
    for i in 0..500u64 {
        let q = from + i * 400_000;
        let wait = 20_000 + (i % 50) * 4_000;
        let (s, e) = (q + wait, q + wait + 60_000);
        spans.push(span(SpanKind::Decrypt, 1, 0, 101, q, s, e));
        spans.push(span(SpanKind::Verify, 0, 1, 102, e, e + 15_000, e + 75_000));
        spans.push(span(SpanKind::Hog, 1, 1, 103, hog_from, hog_from, s));
        hog_from = e;
        spans.push(span(
            SpanKind::Sleep,
            0,
            0,
            100,
            q + 5_000,
            q + 5_000,
            q + 330_000,
        ));
    }
    spans.sort_by_key(|s| s.start_ns);
    let thread = |tid, name: &str, role| TimelineThread {
        tid,
        name: name.into(),
        role,
    };
    app.lanes.take(Timeline {
        spans,
        dropped: 0,
        threads: vec![
            thread(100, "reader-0", Role::Reader),
            thread(101, "fscrypt-1", Role::Worker),
            thread(102, "fsverity-cpu0", Role::Worker),
            thread(103, "hog-0", Role::Hog),
        ],
    });
    if chosen {
        app.lanes.choose(true);
        app.lanes.choose(true);
    }
    app
}

/// A rendered buffer as text, one line per row (for snapshot tests).
pub fn screen_text(buf: &ratatui::buffer::Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// One interval of the fixture read through the kernel target: the
/// kernel's `fscrypt_read_queue` as its tracepoints saw it, the stages
/// those fill (device from the block layer, queue and decrypt per item).
pub fn kernel_record(seq: u64) -> IntervalRecord {
    use crate::metrics::{KernelQueueRecord, KernelRecord, Percentiles};
    let mut rec = record(seq);
    rec.stages_us.verify = Percentiles::default();
    let items = 40 + seq % 7;
    let scope_cpu = (seq + 1) as f64 * INTERVAL_S > 30.0;
    let queue = |p50: f64, p99: f64| Percentiles {
        count: items,
        mean: p50 * 1.5,
        p50,
        p90: p99 * 0.6,
        p99,
        p999: p99 * 1.2,
        max: p99 * 1.3,
    };
    rec.kernel = Some(KernelRecord {
        queues: vec![KernelQueueRecord {
            queue: "fscrypt_read_queue".into(),
            items,
            queue_us: if scope_cpu {
                queue(14.0, 1_150.0)
            } else {
                queue(32.0, 9_830.0)
            },
            exec_us: queue(159.0, 744.0),
            moved_pct: if scope_cpu { 2.0 } else { 69.0 },
            peak_running: 2,
        }],
        kworkers: 2,
        requests: items * 4,
        lost: 0,
        cached_bytes: 48 << 20,
        ..Default::default()
    });
    rec.counters.decrypted_units = 0;
    rec.counters.verified_blocks = 0;
    // The kernel's page cache is its own: no model hits or misses.
    rec.counters.pc_hits = 0;
    rec.counters.pc_misses = 0;
    rec.page_cache = crate::metrics::PageCacheStats {
        size_bytes: 48 << 20,
        ..Default::default()
    };
    if seq == 119 {
        rec.events = vec![Event {
            t_s: 30.0,
            label: "kernel.affinity_scope: system -> cpu".into(),
        }];
    }
    if seq == 0 {
        rec.notices = vec![Notice {
            t_s: 0.0,
            text: "kernel target: ext4 image ~/.cache/readpath/kernel/target.img (loop 7:0); the kernel's xts(aes) is xts(ecb(aes-fixed-time))".into(),
        }];
    }
    rec
}

/// The explorer after 45 s of the kernel target, the kernel's affinity
/// scope turned from `system` to `cpu` at 30 s.
pub fn kernel_app() -> App {
    let mut s = Settings::default();
    s.workload.target = crate::settings::Target::Kernel;
    s.kernel.affinity_scope = Some(crate::settings::AffinityScope::System);
    let running = |s: &Settings| {
        crate::engine::resolve(s, &features(), &crate::engine::DataFs::capable())
            .expect("the fixture's settings resolve")
            .effective
            .settings()
            .clone()
    };
    let mut app = App::new(s.clone(), running(&s), features(), 2);
    for seq in 0..180 {
        app.push(kernel_record(seq));
    }
    let mut cpu = app.running.settings().clone();
    cpu.kernel.affinity_scope = Some(crate::settings::AffinityScope::Cpu);
    let eff = running(&cpu);
    app.running.set(cpu, eff);
    app
}

/// A finished sweep for the sweep view's snapshots: the fs-verity seed
/// over CPUs 1, 2 x hogs 0, 1, all, one cell of each verdict
/// ([`crate::output::sweep::fixture`]).
pub fn sweep() -> crate::output::sweep::SweepReport {
    crate::output::sweep::fixture()
}
