//! The model's workqueues against the kernel's: an unbound queue's pods
//! (`workers.affinity_scope`). Its own test binary, so no other engine's
//! workers are alive while it looks at thread names and CPU masks.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use readpath::engine::{Engine, EngineOptions};
use readpath::settings::Settings;

/// One small dataset shared by the tests of this binary.
fn data_dir() -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::Builder::new()
            .prefix("readpath-wq")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let mut quiet = |_: u64, _: u64| {};
        readpath::dataset::Dataset::open_or_prepare(d.path(), 4 << 20, b"", &mut quiet).unwrap();
        d
    })
    .path()
    .to_path_buf()
}

fn settings(overrides: &[&str]) -> Settings {
    let mut s = Settings::default();
    s.set("workload.file_size", "4M").unwrap();
    for o in overrides {
        s.apply_override(o).unwrap();
    }
    s
}

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
/// one pod per CPU with `cpu` (each worker pinned to its pod's CPU), one pod
/// of every CPU with `system` (unpinned), and every block is still decrypted
/// and verified.
#[test]
fn unbound_workers_run_in_the_pods_of_the_affinity_scope() {
    let cpus = readpath::sys::online_cpus();
    if cpus.len() < 2 {
        eprintln!("SKIP unbound_workers_run_in_the_pods_of_the_affinity_scope: one CPU");
        return;
    }
    for scope in ["cpu", "system"] {
        let s = settings(&[
            &format!("workers.affinity_scope={scope}"),
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
        if scope == "cpu" {
            // One worker per pod (max_active = CPUs, one CPU per pod).
            let mut want: Vec<(String, Vec<usize>)> = cpus
                .iter()
                .enumerate()
                .map(|(k, &c)| (format!("fscrypt-u{k}.0"), vec![c]))
                .collect();
            want.sort();
            assert_eq!(workers, want);
        } else {
            assert_eq!(workers.len(), cpus.len(), "{workers:?}");
            for (name, mask) in &workers {
                assert!(!name.contains('.'), "{name}");
                assert_eq!(mask, &cpus, "{name}");
            }
        }
    }
}
