//! End-to-end runs of the real engine on a small real dataset: every
//! engine x sleep x workers combination decrypts and verifies every block,
//! corruption is counted exactly, and live changes are applied and marked.

use std::time::Duration;

use readpath::engine::{Engine, EngineOptions, RunTotals};
use readpath::metrics::IntervalRecord;
use readpath::settings::Settings;

mod common;
#[path = "common/skip.rs"]
mod skip;
use common::{data_dir, settings};

fn run_for(s: Settings, d: Duration) -> (RunTotals, Vec<IntervalRecord>, Settings) {
    let mut quiet = |_: u64, _: u64| {};
    let engine = Engine::start(
        s,
        EngineOptions::new(Duration::from_millis(50), data_dir()),
        &mut quiet,
    )
    .unwrap();
    std::thread::sleep(d);
    let eff = engine.effective().clone();
    let (totals, rx) = engine.stop_with_records();
    (totals, rx.try_iter().collect(), eff)
}

fn io_uring_available() -> bool {
    let f = readpath::sys::probe_features();
    if !f.io_uring {
        skip::skip(
            "the io_uring part",
            &f.io_uring_reason.unwrap_or_default(),
            true,
        );
    }
    f.io_uring
}

/// Every good read was served with no failure, and the post-read work
/// matches where the kernel does it: per page-cache bio (each page a bio
/// read is decrypted and verified once, every read looks each of its pages
/// up once), or per read on a direct path.
fn assert_complete(label: &str, t: &RunTotals, s: &Settings) {
    let c = &t.rec.counters;
    let units_per_read = s.workload.block_size / 4096;
    assert!(c.reads > 0, "{label}: no reads completed");
    assert_eq!(c.verity_failures, 0, "{label}: verity failures");
    assert_eq!(c.io_errors, 0, "{label}: io errors");
    let cached = readpath::engine::ReadPath::of(s) == readpath::engine::ReadPath::PageCache;
    let processed = if cached {
        assert_eq!(
            c.pc_hits + c.pc_misses,
            c.reads * units_per_read,
            "{label}: page lookups"
        );
        c.bio_bytes / 4096
    } else {
        c.reads * units_per_read
    };
    if s.pipeline.decrypt {
        assert_eq!(c.decrypted_units, processed, "{label}: decrypted units");
    } else {
        assert_eq!(c.decrypted_units, 0, "{label}");
    }
    if s.pipeline.verity {
        assert_eq!(c.verified_blocks, processed, "{label}: verified blocks");
        assert!(c.hashes >= c.verified_blocks, "{label}: hashes");
    } else {
        assert_eq!(c.verified_blocks, 0, "{label}");
    }
    assert_eq!(c.bytes, c.reads * s.workload.block_size, "{label}: bytes");
}

#[test]
fn every_engine_sleep_and_worker_combination_processes_every_block() {
    let mut combos: Vec<(&str, &str)> = vec![("sync", "iowait")];
    if io_uring_available() {
        combos.extend([("uring", "iowait"), ("uring", "plain"), ("uring", "poll")]);
    }
    for (engine, sleep) in combos {
        for mode in ["inline", "bound", "unbound"] {
            let over = [
                format!("workload.engine={engine}"),
                format!("workload.sleep={sleep}"),
                format!("workers.mode={mode}"),
                "workload.queue_depth=4".to_string(),
                "workload.readers=2".to_string(),
            ];
            let over: Vec<&str> = over.iter().map(|s| s.as_str()).collect();
            let s = settings(&over);
            let label = format!("{engine}/{sleep}/{mode}");
            let (t, records, eff) = run_for(s, Duration::from_millis(250));
            assert_complete(&label, &t, &eff);
            assert!(!records.is_empty(), "{label}: no interval records");
            let sum: u64 = records.iter().map(|r| r.reads).sum();
            assert_eq!(
                sum, t.rec.counters.reads,
                "{label}: records add up to the totals"
            );
            if mode != "inline" {
                assert!(t.workers.threads > 0, "{label}: workers sampled");
            }
        }
    }
}

/// Every interval gets its reads, also when each read completes inside its
/// own submission (page-cached, processed inline): the reader must keep
/// reaching its safe point, not only at the end of the run.
#[test]
fn page_cached_inline_reads_are_handed_over_every_interval() {
    if !io_uring_available() {
        return;
    }
    let s = settings(&[
        "workload.engine=uring",
        "workload.direct=false",
        "workload.pattern=sequential",
        "workload.block_size=64K",
        "workload.queue_depth=8",
        "workers.mode=inline",
        "pipeline.decrypt=false",
        "pipeline.verity=false",
    ]);
    let (t, records, eff) = run_for(s, Duration::from_millis(600));
    assert_complete("cached inline", &t, &eff);
    // The first interval may start before the reader; the last is cut short.
    let inner = &records[1..records.len().saturating_sub(1)];
    assert!(inner.len() >= 5, "{} records", records.len());
    // A reader starved for a whole 50 ms interval by the other tests
    // running beside this one may miss one handoff; the bug this guards
    // against (reads handed over only at the end) leaves most empty.
    let reads: Vec<u64> = records.iter().map(|r| r.reads).collect();
    let empty = inner.iter().filter(|r| r.reads == 0).count();
    assert!(empty * 4 <= inner.len(), "empty intervals: {reads:?}");
    assert!(
        inner.windows(2).all(|w| w[0].reads > 0 || w[1].reads > 0),
        "two empty intervals in a row: {reads:?}"
    );
}

#[test]
fn verify_queue_modes_and_ciphers_process_every_block() {
    let uring = io_uring_available();
    let engine = if uring { "uring" } else { "sync" };
    let cases: &[&[&str]] = &[
        &["workers.mode=unbound", "workers.verify_mode=bound"],
        &["workers.mode=unbound", "workers.verify_mode=unbound"],
        &["workers.mode=bound", "workers.verify_mode=same"],
        &["workers.mode=inline", "workers.verify_mode=bound"],
        &["workers.mode=bound", "workers.verify_mode=inline"],
        &["pipeline.cipher=aes-256-xts-soft"],
        &["pipeline.cipher=adiantum"],
        &["pipeline.decrypt=false"],
        &["pipeline.verity=false"],
        &["pipeline.decrypt=false", "pipeline.verity=false"],
        &["workload.pattern=sequential", "workload.block_size=64K"],
        &["workload.direct=false", "workload.block_size=128K"],
        &["workload.rate_iops=2000"],
        &["load.hogs=2", "workers.highpri=false"],
    ];
    for case in cases {
        let mut over = vec![
            format!("workload.engine={engine}"),
            "workload.queue_depth=2".into(),
        ];
        over.extend(case.iter().map(|s| s.to_string()));
        let over: Vec<&str> = over.iter().map(|s| s.as_str()).collect();
        let s = settings(&over);
        let (t, _, eff) = run_for(s, Duration::from_millis(250));
        assert_complete(&case.join(" "), &t, &eff);
        // Items on an unbound queue count as such, on a bound one not:
        // decryption and verification on unbound queues, all of them; on
        // per-CPU queues, none.
        let c = &t.rec.counters;
        match *case {
            ["workers.mode=unbound", "workers.verify_mode=unbound"] => {
                assert!(c.items_run > 0, "{c:?}");
                assert_eq!(c.items_unbound, c.items_run, "{case:?}: {c:?}");
            }
            ["workers.mode=bound", "workers.verify_mode=same"] => {
                assert!(c.items_run > 0, "{c:?}");
                assert_eq!(c.items_unbound, 0, "{case:?}: {c:?}");
            }
            _ => {}
        }
    }
}

/// `pipeline.cipher = "kernel"` and `pipeline.hash = "kernel"`: the model
/// decrypts with the running kernel's `xts(aes)` and hashes with its
/// `sha256` through AF_ALG, and every block still decrypts and verifies
/// (a wrong byte from the kernel would fail verification). Where AF_ALG is
/// missing, the run takes readpath's own with a notice naming why, and
/// still processes every block.
#[test]
fn kernel_cipher_and_hash_through_af_alg_process_every_block() {
    use readpath::crypto::CipherKind;
    use readpath::settings::HashKind;
    let f = readpath::sys::probe_features();
    let engine = if io_uring_available() {
        "uring"
    } else {
        "sync"
    };
    let cases: &[&[&str]] = &[
        &["workers.mode=unbound", "workload.readers=2"],
        &["workers.mode=bound", "workers.verify_mode=unbound"],
        &["workers.mode=inline", "pipeline.verity=false"],
        &["workload.direct=false", "workload.block_size=128K"],
    ];
    for case in cases {
        let mut over = vec![
            format!("workload.engine={engine}"),
            "workload.queue_depth=2".into(),
            "pipeline.cipher=kernel".into(),
            "pipeline.hash=kernel".into(),
        ];
        over.extend(case.iter().map(|s| s.to_string()));
        let over: Vec<&str> = over.iter().map(|s| s.as_str()).collect();
        let s = settings(&over);
        let label = case.join(" ");
        let (t, _, eff) = run_for(s, Duration::from_millis(300));
        assert_complete(&label, &t, &eff);
        let notices: Vec<&str> = t.notices.iter().map(|n| n.text.as_str()).collect();
        match &f.kernel_cipher_reason {
            None => assert_eq!(eff.pipeline.cipher, CipherKind::Kernel, "{label}"),
            Some(why) => {
                assert_eq!(eff.pipeline.cipher, CipherKind::Aes256Xts, "{label}");
                assert!(
                    notices
                        .iter()
                        .any(|n| n.contains("xts(aes)") && n.contains(why.as_str())),
                    "{label}: {notices:?}"
                );
            }
        }
        // The header names the driver AF_ALG got where the kernel's ran.
        let summary = readpath::output::report::RunSummary::new(
            &settings(&over),
            &eff,
            &t,
            Default::default(),
            f.clone(),
        );
        let head = summary.to_text();
        let head = head.lines().next().unwrap();
        let driver = |alg: &str| {
            readpath::kernel::crypto_driver(alg).map_or("unknown driver".to_string(), |(d, _)| d)
        };
        if eff.pipeline.cipher == CipherKind::Kernel {
            let want = format!("cipher=kernel ({})", driver("xts(aes)"));
            assert!(head.contains(&want), "{label}: {head}");
        } else {
            assert!(
                head.contains("cipher=aes-256-xts,") || head.ends_with("cipher=aes-256-xts"),
                "{label}: {head}"
            );
        }
        if eff.pipeline.verity && eff.pipeline.hash == HashKind::Kernel {
            let want = format!("hash=kernel ({})", driver("sha256"));
            assert!(head.contains(&want), "{label}: {head}");
        } else {
            assert!(!head.contains("hash="), "{label}: {head}");
        }
        let verity = eff.pipeline.verity;
        match (&f.kernel_hash_reason, verity) {
            (None, true) => assert_eq!(eff.pipeline.hash, HashKind::Kernel, "{label}"),
            (Some(why), true) => {
                assert_eq!(eff.pipeline.hash, HashKind::Software, "{label}");
                assert!(
                    notices
                        .iter()
                        .any(|n| n.contains("sha256") && n.contains(why.as_str())),
                    "{label}: {notices:?}"
                );
            }
            (_, false) => {}
        }
    }
    if let Some(why) = f.kernel_cipher_reason.or(f.kernel_hash_reason) {
        skip::skip(
            "the AF_ALG part (ran readpath's own cipher and hash instead)",
            &why,
            false,
        );
    }
}

#[test]
fn rate_limited_run_stays_near_its_target() {
    // A correctness check of the schedule (not a speed test): 1000 IOPS for
    // 0.6 s issues about 600 reads, never thousands.
    let s = settings(&["workload.rate_iops=1000", "workload.queue_depth=8"]);
    let (t, _, _) = run_for(s, Duration::from_millis(600));
    let reads = t.rec.counters.reads;
    assert!((300..=700).contains(&reads), "reads = {reads}");
}

#[test]
fn corruption_is_counted_exactly_and_never_as_good_data() {
    // Each read is its own bio here (no cache, no readahead): every 7th
    // bio corrupted is every 7th read.
    for extra in [
        &["workers.mode=unbound"][..],
        &["workers.mode=inline"],
        &["pipeline.decrypt=false", "workers.mode=bound"],
    ] {
        let mut over = vec![
            "pipeline.corrupt_every=7",
            "workload.queue_depth=1",
            "cache.size=0",
            "cache.read_ahead=0",
        ];
        over.extend_from_slice(extra);
        let s = settings(&over);
        let (t, _, _) = run_for(s, Duration::from_millis(300));
        let c = &t.rec.counters;
        assert!(c.corrupted > 0, "{extra:?}: nothing corrupted");
        assert_eq!(
            c.verity_failures, c.corrupted,
            "{extra:?}: every corrupted read fails"
        );
        // Bios are counted per reader: every 7th one is corrupted.
        assert_eq!(c.corrupted, c.bios / 7, "{extra:?}: exactly every 7th bio");
    }
}

#[test]
fn live_changes_drain_rebuild_and_are_marked() {
    let mut quiet = |_: u64, _: u64| {};
    let s = settings(&["workers.mode=unbound"]);
    let mut engine = Engine::start(
        s.clone(),
        EngineOptions::new(Duration::from_millis(50), data_dir()),
        &mut quiet,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let mut s2 = s.clone();
    s2.set("workers.mode", "bound").unwrap();
    s2.set("workload.queue_depth", "8").unwrap();
    // A demo's step: the baseline marked, then the change.
    engine.mark("baseline");
    let changes = engine.apply(s2.clone()).unwrap();
    let labels: Vec<String> = changes.iter().map(|c| c.label()).collect();
    assert!(
        labels.contains(&"workers.mode: unbound -> bound".to_string()),
        "{labels:?}"
    );
    // A bad change is refused and the workload goes on untouched.
    let mut bad = s2.clone();
    bad.workload.queue_depth = 0;
    assert!(engine.apply(bad).is_err());
    assert_eq!(engine.settings(), &s2);
    // Pause and resume.
    std::thread::sleep(Duration::from_millis(150));
    engine.pause();
    // Long enough for whole intervals of 50 ms to pass paused even when
    // the sampler waits for a CPU (CI runs these tests side by side).
    std::thread::sleep(Duration::from_millis(500));
    engine.resume().unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let (t, rx) = engine.stop_with_records();
    let records: Vec<IntervalRecord> = rx.try_iter().collect();
    let events: Vec<(f64, String)> = records
        .iter()
        .flat_map(|r| r.events.iter().map(|e| (r.t_s, e.label.clone())))
        .collect();
    assert!(
        events
            .iter()
            .any(|(_, l)| l == "workers.mode: unbound -> bound"),
        "{events:?}"
    );
    // Reads continued after the change.
    let t_change = events[0].0;
    let after: u64 = records
        .iter()
        .filter(|r| r.t_s > t_change)
        .map(|r| r.reads)
        .sum();
    assert!(after > 0);
    assert!(
        records.iter().any(|r| r.paused),
        "a paused interval is marked"
    );
    assert_eq!(t.rec.counters.verity_failures, 0);
    // Two settings phases: the start and the change (pause is no change);
    // the interval holding the change is in neither, so the phases hold
    // fewer reads than the run, and each read at most once.
    assert_eq!(
        t.phases.len(),
        2,
        "{:?}",
        t.phases.iter().map(|p| &p.changes).collect::<Vec<_>>()
    );
    assert!(t.phases[0].changes.is_empty());
    assert!(
        t.phases[1]
            .changes
            .iter()
            .any(|c| c == "workers.mode: unbound -> bound"),
        "{:?}",
        t.phases[1].changes
    );
    assert!(t.phases[1].start_s > t.phases[0].start_s);
    let in_phases: u64 = t.phases.iter().map(|p| p.rec.counters.reads).sum();
    assert!(in_phases > 0 && in_phases <= t.rec.counters.reads);
    let summary = readpath::output::report::PhaseSummary::of(&t);
    assert_eq!(summary.len(), 2);
    assert!(summary[1].throughput_mib_s > 0.0);
    // The baseline is the phase it was marked in, not the one its change
    // began at the same instant.
    assert!(summary[0].baseline && !summary[1].baseline, "{summary:?}");
}

/// Settings that need more memory than the machine has are refused before
/// anything is allocated, at start and live, and the running workload is
/// untouched (the combination below used to take the machine down).
#[test]
fn settings_that_do_not_fit_in_memory_are_refused_and_the_workload_goes_on() {
    let huge = [
        "workload.readers=256",
        "workload.queue_depth=1024",
        "workload.block_size=1M",
    ];
    let mut quiet = |_: u64, _: u64| {};
    let opts = EngineOptions::new(Duration::from_millis(50), data_dir());
    let e = Engine::start(settings(&huge), opts.clone(), &mut quiet)
        .err()
        .expect("refused at start");
    assert!(e.is_bad_input(), "{e}");
    assert!(e.to_string().contains("read buffers 256 GiB"), "{e}");
    let mut engine = Engine::start(settings(&["workload.direct=false"]), opts, &mut quiet).unwrap();
    let before = engine.settings().clone();
    let mut s = before.clone();
    for o in huge {
        s.apply_override(o).unwrap();
    }
    let e = engine.apply(s).unwrap_err();
    assert!(e.is_bad_input(), "{e}");
    assert!(e.to_string().contains("lower workload.readers"), "{e}");
    assert_eq!(engine.settings(), &before, "the running settings are kept");
    std::thread::sleep(Duration::from_millis(300));
    let (totals, _) = engine.stop_with_records();
    assert!(totals.rec.counters.reads > 0, "the workload kept running");
}

/// The run ended with reader 0's injected failure, and its drain report
/// says everything came back before its buffers were freed; the report.
fn assert_failed_and_drained(totals: &RunTotals) -> String {
    let texts: Vec<&str> = totals.notices.iter().map(|n| n.text.as_str()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("reader-0 stopped: injected submission failure")),
        "the run ends with the error: {texts:?}"
    );
    let drained = texts
        .iter()
        .find(|t| t.starts_with("reader-0: stopped with"))
        .unwrap_or_else(|| panic!("the drain is reported: {texts:?}"));
    assert!(
        drained.ends_with("all came back before its buffers were freed"),
        "{drained}"
    );
    drained.to_string()
}

/// A reader whose submission fails while reads are in the kernel and items
/// are at the workers ends with an error, and frees its buffers only after
/// every read completed and every item came back: no worker and no kernel
/// read ever touches freed memory (it used to return at once, freeing the
/// buffers under both).
#[test]
fn a_failed_submission_frees_buffers_only_after_every_read_and_item_is_back() {
    if !io_uring_available() {
        return;
    }
    let mut quiet = |_: u64, _: u64| {};
    let mut opts = EngineOptions::new(Duration::from_millis(50), data_dir());
    opts.faults.fail_submit_when_busy = true;
    // Slow decryption on one unbound worker keeps items queued; QD 32 keeps
    // reads in the kernel. A direct read of an encrypted file (blk-crypto):
    // the reader that owns one buffer per read.
    let s = settings(&[
        "workload.direct=true",
        "pipeline.verity=false",
        "workload.engine=uring",
        "workload.queue_depth=32",
        "pipeline.cipher=aes-256-xts-soft",
        "workers.mode=unbound",
        "workers.max_active=1",
    ]);
    let engine = Engine::start(s, opts, &mut quiet).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(engine.touched_freed(), 0, "a worker touched freed buffers");
    let (totals, _) = engine.stop_with_records();
    let drained = assert_failed_and_drained(&totals);
    // "reader-0: stopped with N reads in the kernel and M items at the workers; ..."
    let n: Vec<u64> = drained.split(' ').filter_map(|w| w.parse().ok()).collect();
    assert!(n.len() >= 2 && n[0] > 0 && n[1] > 0, "{drained}");
    // Everything the reader read before the failure was processed in full.
    assert_eq!(totals.rec.counters.verity_failures, 0);
    assert!(totals.rec.counters.reads > 0);
}

/// The same failure in the page-cache reader: it ends with the error after
/// every bio in the kernel completed and every bio at the workers came
/// back, and its bios still in flight are failed, not left in flight in a
/// cache that outlives the pipeline: the engine reads on after a change.
#[test]
fn a_failed_submission_in_the_page_cache_reader_drains_and_leaves_no_page_in_flight() {
    if !io_uring_available() {
        return;
    }
    let mut quiet = |_: u64, _: u64| {};
    let mut opts = EngineOptions::new(Duration::from_millis(50), data_dir());
    opts.faults.fail_submit_when_busy = true;
    let s = settings(&[
        "workload.engine=uring",
        "workload.queue_depth=32",
        "cache.size=0",
        "cache.read_ahead=0",
        "pipeline.cipher=aes-256-xts-soft",
        "workers.mode=unbound",
        "workers.max_active=1",
    ]);
    let mut engine = Engine::start(s.clone(), opts, &mut quiet).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(engine.touched_freed(), 0, "a worker touched freed buffers");
    // Paused, every pipeline has drained: no page may be left in flight.
    engine.pause();
    assert_eq!(engine.pages_in_flight(), 0, "pages left in flight");
    engine.resume().unwrap();
    // A live change rebuilds the pipeline on the same cache (same
    // geometry): if a page had been left in flight, its readers would wait
    // for ever. Inline (both stages), so no item is ever at a worker and
    // the injected failure cannot strike again.
    let mut s2 = s.clone();
    s2.set("workers.mode", "inline").unwrap();
    s2.set("workers.verify_mode", "same").unwrap();
    engine.apply(s2).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    engine.pause();
    assert_eq!(
        engine.pages_in_flight(),
        0,
        "pages left in flight after the change"
    );
    let (totals, records) = engine.stop_with_records();
    let records: Vec<IntervalRecord> = records.try_iter().collect();
    assert_failed_and_drained(&totals);
    let t_change = records
        .iter()
        .find(|r| r.events.iter().any(|e| e.label.starts_with("workers.mode")))
        .map(|r| r.t_s)
        .expect("the change is marked");
    let after: u64 = records
        .iter()
        .filter(|r| r.t_s > t_change)
        .map(|r| r.reads)
        .sum();
    assert!(after > 0, "reads after the change");
    // Still reading near the end (a page left in flight stops the reads
    // that reach it for good; the checks while paused catch it exactly).
    let tail: u64 = records
        .iter()
        .filter(|r| !r.paused)
        .rev()
        .take(6)
        .map(|r| r.reads)
        .sum();
    assert!(
        tail > 0,
        "no reads at the end: {:?}",
        records.iter().map(|r| r.reads).collect::<Vec<_>>()
    );
    assert_eq!(totals.rec.counters.verity_failures, 0);
}

/// Tree pages the verify workers read, over records.
fn tree_pages(records: &[IntervalRecord]) -> u64 {
    records.iter().map(|r| r.page_cache.tree_pages_read).sum()
}

#[test]
fn the_cold_tree_is_read_by_the_verify_workers_and_dropped_with_the_cache() {
    // The whole file and its tree fit: each of the 9 tree pages (one top,
    // eight leaves) is read at most once until the cache is dropped.
    let s = settings(&[
        "cache.size=8M",
        "workers.mode=bound",
        "workers.verify_mode=same",
    ]);
    let mut quiet = |_: u64, _: u64| {};
    let mut engine = Engine::start(
        s,
        EngineOptions::new(Duration::from_millis(50), data_dir()),
        &mut quiet,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let before: Vec<IntervalRecord> = engine.records().try_iter().collect();
    let cold = tree_pages(&before);
    assert!((2..=9).contains(&cold), "{cold} tree pages read cold");
    // The bound verifying queue's per-CPU pools start with one worker a
    // CPU and create more as items block on tree reads (and to keep one
    // idle); the record counts them.
    let cpus = readpath::sys::online_cpus().len() as u32;
    let pool = before
        .iter()
        .rev()
        .flat_map(|r| &r.pools)
        .find(|p| p.kind == "bound")
        .expect("a bound pool record");
    assert!(pool.created > cpus, "{pool:?}");
    assert_eq!(pool.workers, pool.created, "{pool:?}");
    // Dropped (`x`): the tree goes with the data; it is read again.
    engine.drop_cache().expect("page-cache path");
    std::thread::sleep(Duration::from_millis(400));
    let (totals, rx) = engine.stop_with_records();
    let after: Vec<IntervalRecord> = rx.try_iter().collect();
    let again = tree_pages(&after);
    assert!(
        (2..=9).contains(&again),
        "{again} tree pages read after the drop"
    );
    let c = &totals.rec.counters;
    assert_eq!(c.tree_pages_read, cold + again);
    assert_eq!(c.verity_failures, 0);
    assert!(c.tree_blocked_ns > 0);
}

#[test]
fn each_work_item_waits_once_per_queue_as_the_kernels_tracepoints_count() {
    // One queue sample per item and queue (workqueue_queue_work ->
    // workqueue_execute_start on the kernel target): a bio decrypted on
    // fscrypt's queue and verified on fsverity's is two items and two
    // waits, not one summed wait per read.
    for (verify_mode, per_bio) in [("bound", 2), ("same", 1)] {
        let s = settings(&[
            "cache.size=8M",
            &format!("workers.verify_mode={verify_mode}"),
        ]);
        let (t, _, eff) = run_for(s, Duration::from_millis(400));
        assert_complete(verify_mode, &t, &eff);
        let c = &t.rec.counters;
        let waits = t.rec.hist(readpath::metrics::Stage::Queue).len();
        assert_eq!(waits, c.items_run, "{verify_mode}: {c:?}");
        assert_eq!(
            c.items_run,
            per_bio * c.bios + c.tree_queued_decrypts,
            "{verify_mode}: {c:?}"
        );
    }
}

/// A work item's execution is what the kernel's `workqueue_execute_start`
/// -> `workqueue_execute_end` time: it covers the item's hand-on, the
/// queueing of the bio on fs-verity's queue or the read's end (pages
/// uptodate, waiting readers woken), as ext4's `decrypt_work` and
/// `verity_work` end with them. With every hand-on slowed by 3 ms, every
/// bio's item on the queue that ends it records at least that; a
/// decryption that verification follows in the same item keeps only its
/// own share; a tree page decrypted on fscrypt's queue is one more decrypt
/// item, as the kernel traces it.
#[test]
fn an_items_execution_covers_its_hand_on_as_the_kernels_tracepoints_time_it() {
    use readpath::metrics::Stage;
    let slow = Duration::from_millis(3);
    let at_least = |h: &hdrhistogram::Histogram<u64>| {
        h.count_between(slow.as_nanos() as u64 * 99 / 100, u64::MAX)
    };
    // (label, overrides, decrypt items slowed, verify items slowed)
    for (label, set, dec_slow, ver_slow) in [
        ("two queues", &["workers.verify_mode=bound"][..], true, true),
        ("one item", &["workers.verify_mode=same"][..], false, true),
        ("decrypt only", &["pipeline.verity=false"][..], true, false),
        (
            "direct, two queues",
            &["workload.direct=true", "workers.verify_mode=bound"][..],
            true,
            true,
        ),
    ] {
        let mut s = settings(&["cache.size=8M", "workload.readers=1"]);
        for o in set {
            s.apply_override(o).unwrap();
        }
        let mut opts = EngineOptions::new(Duration::from_millis(50), data_dir());
        opts.faults.slow_hand_on = Some(slow);
        let mut quiet = |_: u64, _: u64| {};
        let engine = Engine::start(s, opts, &mut quiet).unwrap();
        std::thread::sleep(Duration::from_millis(400));
        let (t, _) = engine.stop_with_records();
        let c = &t.rec.counters;
        let (dec, ver) = (t.rec.hist(Stage::Decrypt), t.rec.hist(Stage::Verify));
        assert!(c.items_run > 0, "{label}: no items ran: {c:?}");
        // The items that end a bio (or a direct read): one per bio, or
        // per read on the direct path.
        let ended = if c.bios > 0 { c.bios } else { c.reads };
        assert!(ended > 0, "{label}: {c:?}");
        let tree = c.tree_queued_decrypts;
        if dec_slow {
            // Only the tree pages' items, whose end is a waiting verify
            // worker's wake, were not slowed.
            assert_eq!(dec.len(), ended + tree, "{label}: {c:?}");
            assert!(
                at_least(dec) >= ended,
                "{label}: {} of {} decrypt items took {slow:?}: {c:?}",
                at_least(dec),
                dec.len()
            );
        } else {
            // Decryption's share in a shared item ends before the
            // hand-on: its median stays under the spin (a worker
            // preempted on a loaded machine may make one sample long).
            let median = dec.value_at_quantile(0.5);
            assert!(
                !dec.is_empty() && median < slow.as_nanos() as u64,
                "{label}: decryption's share in a shared item, median {median} ns: {c:?}"
            );
        }
        if ver_slow {
            assert_eq!(
                (at_least(ver), ver.len()),
                (ended, ended),
                "{label}: verify items that took {slow:?}, and all: {c:?}"
            );
        } else {
            assert_eq!(ver.len(), 0, "{label}");
        }
    }
}

#[test]
fn tree_pages_are_decrypted_on_the_decrypt_queue_when_verify_has_its_own() {
    // ext4: decrypt on fscrypt's queue, verify on fsverity's; a tree page a
    // verify worker reads is decrypted by a work item on fscrypt's queue.
    for (verify_mode, queued) in [("bound", true), ("unbound", true), ("same", false)] {
        let s = settings(&[
            "cache.size=8M",
            &format!("workers.verify_mode={verify_mode}"),
        ]);
        let (t, _, eff) = run_for(s, Duration::from_millis(400));
        let c = &t.rec.counters;
        assert_complete(verify_mode, &t, &eff);
        assert!(c.tree_reads > 0, "{verify_mode}: {c:?}");
        let want = if queued { c.tree_reads } else { 0 };
        assert_eq!(c.tree_queued_decrypts, want, "{verify_mode}: {c:?}");
    }
}

#[test]
fn a_corrupted_tree_page_fails_the_reads_it_covers_and_no_other() {
    // A dataset of its own, one byte of leaf page 3 (data blocks 256..384,
    // bytes 1 MiB..1.5 MiB) corrupted in the encrypted tree.
    let dir = tempfile::Builder::new()
        .prefix("readpath-e2e-tree")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let mut quiet = |_: u64, _: u64| {};
    let (ds, _) =
        readpath::dataset::Dataset::open_or_prepare(dir.path(), 4 << 20, b"", &mut quiet).unwrap();
    let path = ds.tree_path(readpath::dataset::Variant::Cipher(
        readpath::crypto::CipherKind::Aes256Xts,
    ));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[3 * 4096 + 7] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    // One page per bio, a cache that holds everything: a read fails
    // exactly when its page is under the bad hash page.
    let s = settings(&[
        "cache.size=8M",
        "cache.read_ahead=0",
        "workload.pattern=sequential",
    ]);
    let engine = Engine::start(
        s,
        EngineOptions::new(Duration::from_millis(50), dir.path().to_path_buf()),
        &mut quiet,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let (t, _) = engine.stop_with_records();
    let c = &t.rec.counters;
    assert!(c.reads > 0 && c.verity_failures > 0, "{c:?}");
    // The first failure names a bio inside the covered range.
    let note = t
        .notices
        .iter()
        .find(|n| n.text.starts_with("verity:"))
        .expect("a verity notice");
    let off: u64 = note
        .text
        .split("offset ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", note.text));
    assert!((1 << 20..3 << 19).contains(&off), "{}", note.text);
    // Sequential passes: at most an eighth of the reads fail, as only one
    // leaf page of eight is bad (failed pages are read again each pass).
    let failed = c.verity_failures as f64 / (c.reads + c.verity_failures) as f64;
    assert!(failed > 0.0 && failed < 0.2, "{failed}");
}

/// Each `workers.kernel_era` as the running pipeline built it: the queue
/// kinds its fscrypt and fs-verity queues were allocated with, unbound pools
/// per NUMA node before 6.5 (per pod of the scope, here `cpu`, since), per-CPU
/// pools created on demand with CPU_INTENSIVE marking only since 6.5, and
/// the era's tree readahead (a quarter of each readahead bio before 6.3,
/// none since: one tree page per read), and its hashing (data blocks two
/// at a time in 6.18, one per hash call before).
#[test]
fn each_kernel_era_builds_its_kernels_queues() {
    let online = readpath::sys::online_cpus();
    let nodes = {
        let mut n: Vec<usize> = readpath::sys::cpu_topology(&online)
            .iter()
            .map(|c| c.node)
            .collect();
        n.sort_unstable();
        n.dedup();
        n.len()
    };
    for (era, verify_kind, v65) in [
        ("4.19", "unbound", false),
        ("5.15-android", "unbound", false),
        ("6.1", "bound", false),
        ("6.18", "bound", true),
    ] {
        let s = settings(&[
            &format!("workers.kernel_era={era}"),
            "workers.affinity_scope=cpu",
            "pipeline.decrypt=true",
            "pipeline.verity=true",
            "workload.pattern=sequential",
            "cache.size=8M",
            "cache.cold_start=true",
        ]);
        let mut quiet = |_: u64, _: u64| {};
        let engine = Engine::start(
            s,
            EngineOptions::new(Duration::from_millis(50), data_dir()),
            &mut quiet,
        )
        .unwrap();
        let pools = engine.pools();
        let find = |name: &str| {
            pools.iter().find(|p| p.0 == name).unwrap_or_else(|| {
                panic!(
                    "{era}: no {name} queue in {:?}",
                    pools.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>()
                )
            })
        };
        let (_, kind, pods) = find("fscrypt");
        assert_eq!(*kind, "unbound", "{era}");
        let want_pods = if v65 { online.len() } else { nodes };
        assert_eq!(pods.len(), want_pods, "{era}: unbound pools");
        let (_, kind, qs) = find("fsverity");
        assert_eq!(*kind, verify_kind, "{era}");
        if verify_kind == "bound" {
            assert_eq!(qs.len(), online.len(), "{era}");
            for q in qs {
                assert!(q.is_managed() && q.on_demand(), "{era}");
                assert_eq!(q.detects_cpu_intensive(), v65, "{era}");
            }
        } else {
            assert_eq!(qs.len(), want_pods, "{era}");
            assert!(qs.iter().all(|q| !q.is_managed()), "{era}");
        }
        std::thread::sleep(Duration::from_millis(600));
        let t = engine.stop();
        let c = &t.rec.counters;
        assert_eq!(c.verity_failures, 0, "{era}");
        assert!(c.tree_reads > 0, "{era}: the tree was read cold: {c:?}");
        assert!(c.verified_blocks > 0, "{era}");
        if v65 {
            // Sequential bios of 32 pages: all but an odd block's last.
            assert!(
                c.paired_blocks * 10 >= c.verified_blocks * 9,
                "{era}: {c:?}"
            );
        } else {
            assert_eq!(c.paired_blocks, 0, "{era}: one block per hash call");
        }
        if v65 {
            assert_eq!(c.tree_pages_read, c.tree_reads, "{era}: no tree readahead");
        } else {
            assert!(
                c.tree_pages_read > c.tree_reads,
                "{era}: tree readahead: {} pages in {} reads",
                c.tree_pages_read,
                c.tree_reads
            );
        }
    }
}

/// `io_pages` is the data file's device's `max_sectors_kb / 4`, found
/// here from /proc/self/mountinfo (not from the file's st_dev, as readpath
/// does); 256 with a notice where the device has no queue in sysfs.
#[test]
fn io_pages_is_the_data_devices_max_sectors_kb_over_4() {
    let mut quiet = |_: u64, _: u64| {};
    let (d, _) =
        readpath::dataset::Dataset::open_or_prepare(&data_dir(), 4 << 20, b"", &mut quiet).unwrap();
    let file = d.path(readpath::dataset::Variant::Plain);
    let (pages, notice) = readpath::engine::io_pages_of(&file);
    // The mount holding the file: the longest mount point it is under.
    let canon = std::fs::canonicalize(&file).unwrap();
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let (dev, _) = info
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            canon
                .starts_with(f[4])
                .then(|| (f[2].to_string(), f[4].len()))
        })
        .max_by_key(|(_, n)| *n)
        .expect("a mount");
    let sys = std::path::Path::new("/sys/dev/block").join(&dev);
    let kb = ["queue/max_sectors_kb", "../queue/max_sectors_kb"]
        .iter()
        .find_map(|q| std::fs::read_to_string(sys.join(q)).ok())
        .and_then(|t| t.trim().parse::<u64>().ok());
    match kb {
        Some(kb) => {
            assert_eq!(pages, kb / 4, "{dev}: max_sectors_kb {kb}");
            assert!(notice.is_none(), "{notice:?}");
        }
        None => {
            assert_eq!(pages, 256, "{dev} has no queue in sysfs");
            assert!(notice.unwrap().contains("256 pages"));
        }
    }
}

/// The interval handoff does not wake idle workers: a worker parked with
/// nothing to do published what it recorded before it parked, so the
/// sampler collects it where it sleeps. Before, every worker was woken at
/// every interval (20 times a second here), and each wake on a busy CPU
/// was run_delay the workload never caused. At 40 reads a second, the
/// workers' voluntary switches follow the items, not the intervals.
#[test]
fn idle_workers_are_not_woken_by_the_interval_handoff() {
    let s = settings(&[
        "workload.rate_iops=40",
        "workers.mode=bound",
        "workers.verify_mode=bound",
    ]);
    let (totals, records, _) = run_for(s, Duration::from_secs(3));
    let sched = records
        .iter()
        .fold(readpath::metrics::WorkerSched::default(), |mut a, r| {
            a.add(&r.workers);
            a
        });
    let reads = totals.rec.counters.reads;
    let intervals = records.len() as u64;
    assert!(
        reads > 0 && sched.threads > 0,
        "{reads} reads, {} workers",
        sched.threads
    );
    // Two items a read at most (decrypt, verify), a wake each; the
    // handoff alone would add threads x intervals.
    let handoff = u64::from(sched.threads) * intervals;
    assert!(
        sched.voluntary_switches < 2 * reads + handoff / 4,
        "{} voluntary switches of {} workers over {intervals} intervals for {reads} reads: the handoff wakes idle workers",
        sched.voluntary_switches,
        sched.threads
    );
}

/// What the kernel refuses a running thread goes back through the
/// resolver: a worker refused nice -20 at run time (though the machine's
/// features said it could be had) gives one notice in the resolver's words
/// for all the workers, and the engine's effective settings say what ran
/// (`workers.highpri = false`); the pipeline started again (a change) is
/// refused again and says so again. Without the refusal, what was asked
/// is what runs.
#[test]
fn a_refusal_at_run_time_is_one_notice_and_the_effective_setting() {
    let f = readpath::sys::probe_features();
    if !f.highpri {
        eprintln!(
            "skipped: nice -20 is refused up front here ({:?}): the resolver's fallback, tested in resolve",
            f.highpri_reason
        );
        return;
    }
    let mut quiet = |_: u64, _: u64| {};
    let s = settings(&["workers.highpri=true", "workers.mode=bound"]);
    let refused = "workers.highpri: running at nice 0 instead of -20: cannot set nice -20: refused by Faults::deny_highpri";

    let engine = Engine::start(
        s.clone(),
        EngineOptions::new(Duration::from_millis(50), data_dir()),
        &mut quiet,
    )
    .unwrap();
    // Reads done by the (bound) workers: they started, and set their nice.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while !engine
        .records()
        .recv_timeout(Duration::from_secs(1))
        .is_ok_and(|r| r.reads > 0)
    {
        assert!(std::time::Instant::now() < until, "no reads in 30 s");
    }
    assert!(engine.effective().workers.highpri);
    let (totals, _) = engine.stop_with_records();
    assert!(
        !totals
            .notices
            .iter()
            .any(|n| n.text.contains("nice 0 instead"))
    );

    let mut opts = EngineOptions::new(Duration::from_millis(50), data_dir());
    opts.faults.deny_highpri = true;
    let mut engine = Engine::start(s.clone(), opts, &mut quiet).unwrap();
    // The workers are refused as they start: wait for that, not a time.
    let refused_now = |e: &Engine| {
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while e.effective().workers.highpri && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        !e.effective().workers.highpri
    };
    assert!(refused_now(&engine), "what ran: nice 0");
    assert!(engine.settings().workers.highpri, "asked for");
    let mut next = s.clone();
    next.workload.queue_depth += 1;
    engine.apply(next).unwrap();
    assert!(refused_now(&engine), "the new workers are refused again");
    let (totals, _) = engine.stop_with_records();
    let said: Vec<&str> = totals
        .notices
        .iter()
        .map(|n| n.text.as_str())
        .filter(|t| t.starts_with("workers.highpri"))
        .collect();
    assert_eq!(
        said,
        vec![refused, refused],
        "once per pipeline, not per worker"
    );
}
