//! The model's workqueues against the kernel's: an unbound queue's pods
//! (`workers.affinity_scope`). Its own test binary, so no other engine's
//! workers are alive while it looks at thread names and CPU masks.

use std::time::Duration;

use readpath::engine::{Engine, EngineOptions};
use readpath::settings::Settings;

mod common;
// One test at a time: each looks at this process's threads, or times runs
// that another engine would disturb.
#[path = "common/serial.rs"]
mod serial;
use serial::serial;
#[path = "common/skip.rs"]
mod skip;
use common::{data_dir, settings};

/// This process's threads whose name starts with `prefix`: (name, CPUs).
fn threads_named(prefix: &str) -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let name = name.trim().to_string();
        let tid: i32 = t.file_name().to_str().unwrap().parse().unwrap();
        if name.starts_with(prefix)
            && let Ok(cpus) = readpath::sys::thread_affinity(tid)
        {
            out.push((name, cpus));
        }
    }
    out.sort();
    out
}

/// An unbound queue's workers run in the pods of `workers.affinity_scope`:
/// one pod per CPU with `cpu`, each with the node's max_active workers
/// (each pinned to its pod's CPU with
/// `workers.affinity_strict`; by default, as the kernel's non-strict pods,
/// started there and then allowed every CPU), one pod of every CPU with
/// `system` (unpinned), and every block is still decrypted and verified.
#[test]
fn unbound_workers_run_in_the_pods_of_the_affinity_scope() {
    let _g = serial();
    let cpus = readpath::sys::online_cpus();
    if cpus.len() < 2 {
        skip::skip(
            "unbound_workers_run_in_the_pods_of_the_affinity_scope",
            "one CPU",
            false,
        );
        return;
    }
    for (scope, strict) in [("cpu", true), ("cpu", false), ("system", false)] {
        let s = settings(&[
            &format!("workers.affinity_scope={scope}"),
            &format!("workers.affinity_strict={strict}"),
            "workers.mode=unbound",
            "workers.verify_mode=unbound",
            "workload.engine=sync",
        ]);
        let mut quiet = |_: u64, _: u64| {};
        let engine = Engine::start(
            s,
            EngineOptions::new(Duration::from_millis(50), data_dir()),
            &mut quiet,
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let workers = threads_named("fscrypt-u");
        let (t, _) = engine.stop_with_records();
        let c = &t.rec.counters;
        assert!(
            c.reads > 0 && c.verity_failures == 0 && c.io_errors == 0,
            "{scope}: {c:?}"
        );
        // Every page a bio read was decrypted and verified.
        assert_eq!(c.decrypted_units, c.bio_bytes / 4096, "{scope}");
        assert_eq!(c.verified_blocks, c.bio_bytes / 4096, "{scope}");
        assert!(c.items_run > 0, "{scope}: {c:?}");
        if scope == "cpu" && strict {
            // A pinned pod's worker runs on the CPU that queued the item.
            assert_eq!(c.items_moved, 0, "{c:?}");
        }
        // Each pod starts one worker and its manager creates more on
        // demand, up to max_active (= CPUs, the node's, which any one pod
        // may use all of) and a reserve.
        let slots = readpath::engine::unbound_pool_slots(cpus.len());
        if scope == "cpu" {
            for (k, &c) in cpus.iter().enumerate() {
                let mask = if strict { vec![c] } else { cpus.clone() };
                let pod: Vec<_> = workers
                    .iter()
                    .filter(|(n, _)| n.starts_with(&format!("fscrypt-u{k}.")))
                    .collect();
                assert!(
                    pod.iter().any(|(n, _)| *n == format!("fscrypt-u{k}.0")),
                    "{workers:?}"
                );
                for (name, m) in &pod {
                    let i: usize = name[format!("fscrypt-u{k}.").len()..].parse().unwrap();
                    assert!(i < slots, "{name}: {workers:?}");
                    assert_eq!(m, &mask, "{name}");
                }
            }
            assert_eq!(
                workers.len(),
                workers
                    .iter()
                    .filter(
                        |(n, _)| (0..cpus.len()).any(|k| n.starts_with(&format!("fscrypt-u{k}.")))
                    )
                    .count(),
                "{workers:?}"
            );
        } else {
            assert!((1..=slots).contains(&workers.len()), "{workers:?}");
            for (name, mask) in &workers {
                assert!(!name.contains('.'), "{name}");
                assert_eq!(mask, &cpus, "{name}");
            }
        }
    }
}

/// Runs `s` for `d` on this binary's dataset; the totals.
fn run_for(s: Settings, d: Duration) -> readpath::engine::RunTotals {
    let mut quiet = |_: u64, _: u64| {};
    let engine = Engine::start(
        s,
        EngineOptions::new(Duration::from_millis(100), data_dir()),
        &mut quiet,
    )
    .unwrap();
    std::thread::sleep(d);
    engine.stop_with_records().0
}

/// Whether this process may run threads at SCHED_FIFO (asked of a thread
/// that then exits).
fn fifo_permitted() -> Result<(), String> {
    std::thread::spawn(|| readpath::sys::set_current_thread_fifo(readpath::sys::IRQ_FIFO_PRIORITY))
        .join()
        .unwrap()
        .map_err(|e| e.to_string())
}

/// Whether the data dir's filesystem takes O_DIRECT (the irq threads
/// stand for a real device's interrupts: `cache.device = disk`).
fn o_direct_here() -> bool {
    let file = data_dir().join("dataset-4194304").join("plain.bin");
    readpath::sys::supports_o_direct(&file).unwrap_or(false)
}

/// `completion = irq`: the page cache's bios are submitted and completed by
/// an irq thread per CPU (pinned, SCHED_FIFO where permitted), every block
/// is still decrypted and verified once, and the irq threads' scheduler
/// counters are reported apart from the workers'.
#[test]
fn irq_completions_process_every_bio_in_their_own_threads() {
    let _g = serial();
    if !readpath::sys::probe_features().io_uring || !o_direct_here() {
        skip::skip(
            "irq_completions_process_every_bio_in_their_own_threads",
            "needs io_uring and O_DIRECT on the data dir",
            true,
        );
        return;
    }
    let cpus = readpath::sys::online_cpus();
    let s = settings(&["workload.completion=irq", "cache.size=0"]);
    let mut quiet = |_: u64, _: u64| {};
    let engine = Engine::start(
        s,
        EngineOptions::new(Duration::from_millis(50), data_dir()),
        &mut quiet,
    )
    .unwrap();
    assert_eq!(
        engine.effective().workload.completion,
        readpath::settings::Completion::Irq
    );
    std::thread::sleep(Duration::from_millis(300));
    let irq = threads_named("irq-cpu");
    let policies: Vec<i32> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .unwrap_or_default()
                .starts_with("irq-cpu")
        })
        .map(|t| {
            let tid: i32 = t.file_name().to_str().unwrap().parse().unwrap();
            readpath::sys::thread_policy(tid).unwrap()
        })
        .collect();
    let (t, records) = engine.stop_with_records();
    let want: Vec<(String, Vec<usize>)> = {
        let mut w: Vec<_> = cpus
            .iter()
            .map(|&c| (format!("irq-cpu{c}"), vec![c]))
            .collect();
        w.sort();
        w
    };
    assert_eq!(irq, want);
    if fifo_permitted().is_ok() {
        assert!(
            policies.iter().all(|&p| p == libc::SCHED_FIFO),
            "{policies:?}"
        );
    } else {
        eprintln!("SCHED_FIFO not permitted here: the irq threads' policy is not checked");
    }
    let c = &t.rec.counters;
    assert!(c.reads > 0 && c.bios > 0, "{c:?}");
    assert_eq!((c.verity_failures, c.io_errors), (0, 0));
    assert_eq!(c.decrypted_units, c.bio_bytes / 4096);
    assert_eq!(c.verified_blocks, c.bio_bytes / 4096);
    assert_eq!(t.irq.threads as usize, cpus.len(), "{:?}", t.irq);
    assert!(t.irq.cpu_us > 0.0);
    assert!(records.iter().any(|r| r.irq.threads > 0));
}

/// The point of `completion = irq`: CPU hogs delay a nice-0 reader that
/// reaps its own completions, not an interrupt. With a hog per CPU, the
/// device stage (submission until the completion is handled) keeps its p99
/// with `irq` (within 3x of the p99 without hogs, or 500 us), where with
/// `thread` it reached 1.6-2.9 ms in some runs on the 2-vCPU VM (printed,
/// not asserted: how long a hog delays a waking reader varies).
#[test]
fn irq_completions_are_not_delayed_by_cpu_hogs() {
    let _g = serial();
    if !readpath::sys::probe_features().io_uring || !o_direct_here() {
        skip::skip(
            "irq_completions_are_not_delayed_by_cpu_hogs",
            "needs io_uring and O_DIRECT on the data dir",
            true,
        );
        return;
    }
    if let Err(why) = fifo_permitted() {
        skip::skip(
            "irq_completions_are_not_delayed_by_cpu_hogs",
            &why,
            skip::root(),
        );
        return;
    }
    let hogs = readpath::sys::online_cpus().len();
    let p99 = |completion: &str, hogs: usize| {
        let s = settings(&[
            &format!("workload.completion={completion}"),
            &format!("load.hogs={hogs}"),
            "cache.size=0",
        ]);
        let t = run_for(s, Duration::from_millis(2000));
        let h = t.rec.hist(readpath::metrics::Stage::Device);
        assert!(h.len() > 100, "{completion}: {} bios", h.len());
        h.value_at_quantile(0.99) as f64 / 1e3
    };
    let quiet = p99("irq", 0);
    let loaded = p99("irq", hogs);
    let thread = p99("thread", hogs);
    eprintln!(
        "device p99: irq {quiet:.0} us without hogs, {loaded:.0} us with {hogs}; thread {thread:.0} us with {hogs}"
    );
    assert!(
        loaded < (3.0 * quiet).max(500.0),
        "with {hogs} hogs the irq threads' device p99 rose from {quiet:.0} us to {loaded:.0} us"
    );
}

/// `workload.irq_cpus = 0`: every bio's interrupt lands on CPU 0, as a
/// phone's single UFS interrupt. With `kernel.rq_affinity = 0` every work
/// item is queued from CPU 0 (checked per item: the irq thread counts the
/// items whose `sched_getcpu` at queueing is the interrupt's CPU); with 2,
/// every item is sent back to the reader's CPU (1) and queued from there;
/// with 1, CPUs sharing their last-level cache and capacity (as here, when
/// they do) complete where the interrupt landed.
#[test]
fn one_interrupt_cpu_queues_every_item_there_unless_rq_affinity_sends_it_back() {
    let _g = serial();
    let test = "one_interrupt_cpu_queues_every_item_there_unless_rq_affinity_sends_it_back";
    if !readpath::sys::probe_features().io_uring || !o_direct_here() {
        skip::skip(test, "needs io_uring and O_DIRECT on the data dir", true);
        return;
    }
    let cpus = readpath::sys::online_cpus();
    if !cpus.contains(&0) || !cpus.contains(&1) {
        skip::skip(test, "needs CPUs 0 and 1 online", true);
        return;
    }
    let run = |rq: u8| {
        let s = settings(&[
            "workload.completion=irq",
            "cache.size=0",
            "workload.reader_cpus=1",
            "workload.irq_cpus=0",
            &format!("kernel.rq_affinity={rq}"),
        ]);
        let t = run_for(s, Duration::from_millis(400));
        let irq = threads_named("irq-cpu");
        let c = t.rec.counters;
        assert!(c.bios > 0, "rq_affinity {rq}: {c:?}");
        assert_eq!((c.verity_failures, c.io_errors), (0, 0));
        (c, irq)
    };
    let (c, _) = run(0);
    assert_eq!(c.irq_ipis, 0, "{c:?}");
    assert_eq!(
        c.queued_on_irq_cpu, c.bios,
        "rq_affinity 0: not every item queued on CPU 0: {c:?}"
    );
    assert_eq!(c.queued_on_submitter, 0, "{c:?}");
    let (c, _) = run(2);
    assert_eq!(c.irq_ipis, c.bios, "{c:?}");
    assert_eq!(
        c.queued_on_submitter, c.bios,
        "rq_affinity 2: not every item queued on its submitter's CPU: {c:?}"
    );
    assert_eq!(c.queued_on_irq_cpu, 0, "{c:?}");
    let topo = readpath::sys::cpu_topology(&[0, 1]);
    let caps = readpath::sys::cpu_capacities(&[0, 1]);
    let (c, _) = run(1);
    if topo[0].llc.contains(&1) && caps[0] == caps[1] {
        assert_eq!((c.irq_ipis, c.queued_on_irq_cpu), (0, c.bios), "{c:?}");
    } else {
        assert_eq!(c.queued_on_submitter, c.bios, "{c:?}");
    }
}

/// Per-CPU pools start with one worker a CPU and create more as they need
/// them: with the tree cold, verify items block reading it, and the pools'
/// worker threads (`fsverity-cpuN.i`, each pinned to its CPU) outnumber the
/// CPUs, as many as the pool records' `created` says. With both stages on
/// per-CPU queues and WQ_HIGHPRI, both run on one high-priority pool a CPU
/// (`kworker-hi-cpuN`), as the kernel's `cpu_worker_pools[1]`.
#[test]
fn per_cpu_pools_create_workers_on_demand_and_share_the_highpri_pool() {
    let _g = serial();
    let cpus = readpath::sys::online_cpus();
    let s = settings(&[
        "pipeline.decrypt=false",
        "workers.mode=bound",
        "workload.pattern=random",
        "workload.readers=2",
        "cache.size=1M",
        "cache.cold_start=true",
    ]);
    let mut quiet = |_: u64, _: u64| {};
    let engine = Engine::start(
        s,
        EngineOptions::new(Duration::from_millis(50), data_dir()),
        &mut quiet,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let workers = threads_named("fsverity-cpu");
    let (t, _) = engine.stop_with_records();
    let pool = t
        .pools
        .iter()
        .find(|p| p.kind == "bound")
        .expect("a bound pool");
    assert!(t.rec.counters.tree_reads > 0, "{:?}", t.rec.counters);
    // Seen during the run (more may come before the stop).
    assert!(workers.len() > cpus.len(), "{workers:?}");
    assert!(
        workers.len() <= pool.created as usize,
        "{workers:?} {pool:?}"
    );
    for (name, mask) in &workers {
        let cpu: usize = name["fsverity-cpu".len()..]
            .split('.')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(mask, &vec![cpu], "{name}");
    }

    let s = settings(&[
        "workers.mode=bound",
        "workers.verify_mode=bound",
        "workers.highpri=true",
    ]);
    let engine = Engine::start(
        s,
        EngineOptions::new(Duration::from_millis(50), data_dir()),
        &mut quiet,
    )
    .unwrap();
    let shared = engine.effective().workers.highpri;
    let pools: Vec<(&str, &str, usize)> = engine
        .pools()
        .iter()
        .map(|(n, k, qs)| (*n, *k, qs.len()))
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let hi = threads_named("kworker-hi-cpu");
    let separate = threads_named("fscrypt-cpu").len() + threads_named("fsverity-cpu").len();
    let (t, _) = engine.stop_with_records();
    assert_eq!(t.rec.counters.verity_failures, 0);
    if shared {
        assert_eq!(pools, vec![("highpri", "bound", cpus.len())]);
        assert!(hi.len() >= cpus.len() && separate == 0, "{hi:?}");
    } else {
        // Nice -20 refused here: two queues of their own.
        assert_eq!(pools.len(), 2, "{pools:?}");
        assert!(hi.is_empty());
    }
}
