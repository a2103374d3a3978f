//! The page-cache model end to end, on real files with the real engine:
//! post-read work happens once per bio on a miss and never on a hit, as in
//! ext4's buffered read path; readahead builds bios of the window's size;
//! concurrent readers of a page cause one bio; a failed bio fails every read
//! of its pages and none of them becomes a hit; O_DIRECT of a verity file is
//! read through the page cache; the page wait is iowait only when asked.
//!
//! The tests of this binary run one at a time (the iowait test reads
//! machine-wide counters).

#[path = "common/serial.rs"]
mod serial;
#[path = "common/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use readpath::engine::{Engine, EngineOptions, RunTotals};
use readpath::metrics::IntervalRecord;
use readpath::settings::Settings;

use serial::serial;

/// A dataset of `size` bytes in a temp dir kept for the binary's life.
fn dataset(size: u64) -> PathBuf {
    let d = tempfile::Builder::new()
        .prefix("readpath-pc")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
        .keep();
    let mut quiet = |_: u64, _: u64| {};
    readpath::dataset::Dataset::open_or_prepare(&d, size, b"", &mut quiet).unwrap();
    d
}

fn shared_16m() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| dataset(16 << 20))
}

fn settings(file_size: &str, overrides: &[&str]) -> Settings {
    let mut s = Settings::default();
    s.set("workload.file_size", file_size).unwrap();
    for o in overrides {
        s.apply_override(o).unwrap();
    }
    s
}

fn run_in(dir: &Path, s: Settings, d: Duration) -> (RunTotals, Vec<IntervalRecord>) {
    let mut quiet = |_: u64, _: u64| {};
    let engine = Engine::start(
        s,
        EngineOptions::new(Duration::from_millis(100), dir.to_path_buf()),
        &mut quiet,
    )
    .unwrap();
    std::thread::sleep(d);
    let (totals, rx) = engine.stop_with_records();
    (totals, rx.try_iter().collect())
}

/// A 16 MiB file read sequentially with a 64 MiB cache: once the file is
/// cached every read is a hit, so each block is decrypted and verified
/// exactly once however long it runs.
#[test]
fn a_cached_file_is_decrypted_and_verified_once() {
    let _g = serial();
    let s = settings(
        "16M",
        &[
            "workload.pattern=sequential",
            "cache.size=64M",
            "cache.device=memory",
        ],
    );
    let (t, records) = run_in(shared_16m(), s, Duration::from_millis(1500));
    let c = &t.rec.counters;
    assert_eq!(c.decrypted_units, 4096, "{c:?}");
    assert_eq!(c.verified_blocks, 4096, "{c:?}");
    assert_eq!(c.verity_failures + c.io_errors, 0);
    assert!(
        c.reads > 2 * 4096,
        "the file was read more than twice: {c:?}"
    );
    // Every read looked at its one page once.
    assert_eq!(c.pc_hits + c.pc_misses, c.reads);
    // The whole file is held, and its fs-verity tree (32 leaf pages and
    // the top page), which the verify workers read into the same cache.
    let held: u64 = records.last().unwrap().page_cache.size_bytes;
    assert_eq!(
        held,
        (16 << 20) + 33 * 4096,
        "the whole file and tree are held"
    );
    assert_eq!(c.tree_pages_read, 33, "each tree page read once: {c:?}");
}

/// With no cache every random read misses and is decrypted and verified
/// itself, as on a cold cache of a file far larger than memory.
#[test]
fn with_no_cache_every_random_read_is_a_bio() {
    let _g = serial();
    let s = settings("16M", &["cache.size=0"]);
    let (t, _) = run_in(shared_16m(), s, Duration::from_millis(800));
    let c = &t.rec.counters;
    assert!(c.reads > 100, "{c:?}");
    assert_eq!(c.pc_hits, 0, "{c:?}");
    assert_eq!(c.pc_misses, c.reads, "{c:?}");
    assert_eq!(c.decrypted_units, c.bio_bytes / 4096, "{c:?}");
    assert_eq!(c.verified_blocks, c.decrypted_units, "{c:?}");
    // Every read is decrypted; a read that happens to follow the previous
    // one (or reads page 0) starts a readahead window, as in the kernel,
    // whose extra pages are dropped unused.
    assert!(c.decrypted_units >= c.reads, "{c:?}");
    assert!(c.decrypted_units <= c.reads + c.reads / 50, "{c:?}");
}

/// With no cache a sequential 128 KiB stream misses on every page (each
/// page's first use since the device read it is a miss, as the kernel's
/// count of pages added to its cache has it; it was once counted 96.9%
/// hits), and it streams at the speed of its bios: readahead's pages wait
/// for the stream instead of being evicted before it reaches them, so no
/// page is read twice (it once fell to 1/30 of the default cache's speed,
/// every window read again synchronously).
#[test]
fn with_no_cache_a_sequential_stream_never_hits() {
    let _g = serial();
    let s = settings(
        "16M",
        &[
            "cache.size=0",
            "workload.pattern=sequential",
            "workload.block_size=128K",
            "cache.device=memory",
        ],
    );
    let (t, _) = run_in(shared_16m(), s, Duration::from_millis(800));
    let c = &t.rec.counters;
    assert!(c.reads > 10, "{c:?}");
    assert_eq!(c.pc_hits, 0, "{c:?}");
    // Each finished read looked at its 32 pages once.
    assert_eq!(
        c.pc_misses,
        32 * (c.reads + c.verity_failures + c.io_errors),
        "{c:?}"
    );
    // Every page read from the device once: what the stream read, plus the
    // windows read ahead of it when the run stopped.
    let pages_read = c.bio_bytes / 4096;
    assert!(pages_read >= c.pc_misses, "{c:?}");
    assert!(
        pages_read <= c.pc_misses + 4 * 32,
        "a page read twice: {c:?}"
    );
    assert!(c.readahead_async * 10 >= c.bios * 9, "{c:?}");
}

/// Sequential 4 KiB reads get readahead windows that grow to
/// `cache.read_ahead` (4, 8, 16 pages, then the full window), read ahead
/// asynchronously when the marked page is reached.
#[test]
fn sequential_reads_make_bios_of_the_readahead_size() {
    let _g = serial();
    for (ra, pages) in [("128K", 32u64), ("512K", 128)] {
        let s = settings(
            "16M",
            &[
                "workload.pattern=sequential",
                "cache.size=64M",
                &format!("cache.read_ahead={ra}"),
            ],
        );
        let (t, _) = run_in(shared_16m(), s, Duration::from_millis(2000));
        let c = &t.rec.counters;
        assert_eq!(c.decrypted_units, 4096, "{ra}: {c:?}");
        // 4 + 8 + 16 (+ 32 + 64) pages to ramp up, then full windows.
        let full = c.bio_bytes / 4096;
        assert_eq!(full, 4096, "{ra}: every page read once: {c:?}");
        let mean = c.bio_bytes / c.bios;
        assert!(
            mean > (pages * 4096) / 2 && mean <= pages * 4096,
            "{ra}: mean bio {mean} bytes, window {} bytes: {c:?}",
            pages * 4096
        );
        // Sync windows only at the start and where the stream wraps to 0.
        assert!(
            c.readahead_async * 10 >= c.bios * 9,
            "{ra}: most bios are async readahead: {c:?}"
        );
    }
    // Readahead off: one page per bio.
    let s = settings(
        "16M",
        &[
            "workload.pattern=sequential",
            "cache.read_ahead=0",
            "cache.size=64M",
        ],
    );
    let (t, _) = run_in(shared_16m(), s, Duration::from_millis(600));
    let c = &t.rec.counters;
    assert_eq!(c.bio_bytes, c.bios * 4096, "{c:?}");
    assert_eq!(c.readahead_async, 0);
}

/// Four readers with eight reads each in flight, random over a 16 MiB file
/// with room for all of it: readers often ask for a page another one is
/// reading, and wait for that bio instead of reading it again, so no page
/// is read (decrypted, verified) twice.
#[test]
fn readers_asking_for_one_page_cause_one_bio() {
    let _g = serial();
    let s = settings(
        "16M",
        &[
            "workload.readers=4",
            "workload.queue_depth=8",
            "cache.size=64M",
            "cache.device=memory",
            "workers.mode=bound",
        ],
    );
    let (t, _) = run_in(shared_16m(), s, Duration::from_millis(1500));
    let c = &t.rec.counters;
    assert!(c.reads > 4096, "{c:?}");
    assert!(c.decrypted_units <= 4096, "a page was read twice: {c:?}");
    assert_eq!(c.decrypted_units, c.bio_bytes / 4096);
    assert_eq!(c.verity_failures + c.io_errors, 0);
}

/// A block corrupted on disk: its bio fails verification, every read of
/// its pages fails, and the pages never become hits (each later read reads
/// and fails again), while every other page is served.
#[test]
fn a_failed_bio_fails_every_read_of_its_pages_and_never_becomes_a_hit() {
    let _g = serial();
    let dir = dataset(4 << 20);
    let ds = readpath::dataset::Dataset::open_or_prepare(&dir, 4 << 20, b"", &mut |_, _| {})
        .unwrap()
        .0;
    let file = ds.path(readpath::dataset::Variant::Cipher(
        readpath::crypto::CipherKind::Aes256Xts,
    ));
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[100 * 4096 + 17] ^= 0x5a;
    std::fs::write(&file, &bytes).unwrap();
    let s = settings("4M", &["cache.size=64M", "cache.read_ahead=0"]);
    let (t, records) = run_in(&dir, s, Duration::from_millis(2000));
    let c = &t.rec.counters;
    assert!(c.verity_failures >= 2, "{c:?}");
    // Each failure is a read of the bad page, which is one bio each time.
    assert_eq!(c.decrypted_units, 1023 + c.verity_failures, "{c:?}");
    // Late in the run the good pages are all hits, the bad one still fails.
    let late = &records[records.len() / 2..];
    let late_fail: u64 = late.iter().map(|r| r.counters.verity_failures).sum();
    assert!(late_fail > 0, "the bad page failed again late in the run");
    // Every page read counts once, a hit or a miss; a failed read read
    // nothing (the kernel's count has no bytes for it either).
    assert_eq!(c.reads, c.pc_hits + c.pc_misses, "{c:?}");
}

/// O_DIRECT on an fs-verity file runs buffered, with a notice saying the
/// kernel does the same.
#[test]
fn direct_with_verity_runs_buffered_with_the_kernels_reason() {
    let _g = serial();
    let s = settings("16M", &["workload.direct=true"]);
    let (t, _) = run_in(shared_16m(), s, Duration::from_millis(400));
    assert!(
        t.notices
            .iter()
            .any(|n| n.text.contains("ext4_dio_alignment")),
        "{:?}",
        t.notices
    );
    let c = &t.rec.counters;
    assert!(c.pc_misses > 0 && c.bios > 0, "{c:?}");
    // An encrypted file without verity: blk-crypto, one direct read per
    // read, decrypted per read, no page cache.
    let s = settings("16M", &["workload.direct=true", "pipeline.verity=false"]);
    let (t, _) = run_in(shared_16m(), s, Duration::from_millis(400));
    let c = &t.rec.counters;
    assert_eq!(c.pc_hits + c.pc_misses, 0, "{c:?}");
    assert_eq!(c.decrypted_units, c.reads, "{c:?}");
}

/// The reader's wait for its page (here a cold 64 KiB bio from the real
/// device, then its post-read work) is iowait with `sleep = iowait` and
/// not with `plain`, as `folio_wait_locked` is iowait: measured on the
/// reader thread itself (per-task delay accounting, `kernel.task_delayacct`
/// switched on for the test and put back), never in /proc/stat, which every
/// other process on the machine moves.
#[test]
fn the_page_wait_is_iowait_only_when_asked() {
    let _g = serial();
    let name = "the_page_wait_is_iowait_only_when_asked";
    let f = readpath::sys::probe_features();
    if !f.io_uring || !f.no_iowait {
        let why = f.io_uring_reason.unwrap_or_else(|| "no NO_IOWAIT".into());
        skip::skip(
            name,
            &format!("needs io_uring with IORING_FEAT_NO_IOWAIT (Linux 6.15+): {why}"),
            !f.io_uring,
        );
        return;
    }
    let knob = "/proc/sys/kernel/task_delayacct";
    let Ok(before) = std::fs::read_to_string(knob) else {
        skip::skip(name, &format!("no {knob}"), false);
        return;
    };
    if std::fs::write(knob, "1").is_err() {
        skip::skip(
            name,
            &format!("needs root to switch on {knob}"),
            skip::root(),
        );
        return;
    }
    let _restore = DelayAcct(before);
    let mut ticks = Vec::new();
    for sleep in ["iowait", "plain"] {
        let s = settings(
            "16M",
            &[
                &format!("workload.sleep={sleep}"),
                "cache.size=0",
                "workload.block_size=64K",
                // No verity: with no cache the verify workers would read
                // tree pages for every bio, and their reads are real
                // iowait whatever the reader's sleep.
                "pipeline.verity=false",
            ],
        );
        let mut quiet = |_: u64, _: u64| {};
        let engine = Engine::start(
            s,
            EngineOptions::new(Duration::from_millis(100), shared_16m().to_path_buf()),
            &mut quiet,
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let a = blkio_ticks("reader-0").expect("the reader thread");
        std::thread::sleep(Duration::from_millis(1500));
        let b = blkio_ticks("reader-0").expect("the reader thread");
        let (t, _) = engine.stop_with_records();
        if t.notices.iter().any(|n| n.text.starts_with("cache.device")) {
            skip::skip(
                name,
                "the test data dir refuses O_DIRECT, so no bio waits for a device",
                true,
            );
            return;
        }
        assert!(t.rec.counters.bios > 0);
        ticks.push(b - a);
    }
    eprintln!(
        "the reader's iowait (blkio delay) ticks over 1.5 s waiting for its pages: sleep=iowait {}, plain {}",
        ticks[0], ticks[1]
    );
    assert!(
        ticks[0] > 0 && ticks[1] == 0,
        "the reader's iowait ticks waiting for its pages: sleep=iowait {}, plain {}",
        ticks[0],
        ticks[1]
    );
}

/// Puts `kernel.task_delayacct` back as it was, however the test ends.
struct DelayAcct(String);

impl Drop for DelayAcct {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/kernel/task_delayacct", &self.0);
    }
}

/// Block-I/O delay ticks (iowait sleeps, per task: field 42 of its stat)
/// of this process's thread `name`.
fn blkio_ticks(name: &str) -> Option<u64> {
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            // Fields after the ")" that ends the command name.
            let rest = &stat[stat.rfind(')')? + 2..];
            return rest.split_whitespace().nth(42 - 3)?.parse().ok();
        }
    }
    None
}

/// The reader's wait for the post-read work of its bio (a bio from memory,
/// so the wait is for the workers, here the slow software AES) sleeps as
/// iowait with `sleep = iowait` and not with `plain`: per-task delay
/// accounting (`kernel.task_delayacct`, switched on for the test and put
/// back) counts the reader's iowait sleeps whatever the other CPUs do. It
/// counts only part of any iowait sleep on these VMs, the kernel's own
/// `io_schedule()` included (`bench/iowait-share.sh`), so the test asks for
/// some iowait against none, not for all of the sleep.
#[test]
fn the_wait_for_post_read_work_is_iowait_only_when_asked() {
    let _g = serial();
    let f = readpath::sys::probe_features();
    let knob = "/proc/sys/kernel/task_delayacct";
    let Ok(before) = std::fs::read_to_string(knob) else {
        skip::skip(
            "the_wait_for_post_read_work_is_iowait_only_when_asked",
            &format!("no {knob}"),
            false,
        );
        return;
    };
    if !f.io_uring || !f.no_iowait || std::fs::write(knob, "1").is_err() {
        skip::skip(
            "the_wait_for_post_read_work_is_iowait_only_when_asked",
            &format!("needs io_uring with NO_IOWAIT and root to switch on {knob}"),
            f.io_uring && f.no_iowait,
        );
        return;
    }
    let _restore = DelayAcct(before);
    let mut ticks = Vec::new();
    for sleep in ["iowait", "plain"] {
        let s = settings(
            "16M",
            &[
                &format!("workload.sleep={sleep}"),
                "cache.size=0",
                "cache.device=memory",
                "cache.read_ahead=0",
                "workload.block_size=64K",
                "pipeline.cipher=aes-256-xts-soft",
                "pipeline.verity=false",
                "workers.max_active=1",
            ],
        );
        let mut quiet = |_: u64, _: u64| {};
        let engine = Engine::start(
            s,
            EngineOptions::new(Duration::from_millis(100), shared_16m().to_path_buf()),
            &mut quiet,
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let a = blkio_ticks("reader-0").expect("the reader thread");
        std::thread::sleep(Duration::from_millis(1500));
        let b = blkio_ticks("reader-0").expect("the reader thread");
        let (t, _) = engine.stop_with_records();
        assert!(t.rec.counters.bios > 0);
        ticks.push(b - a);
    }
    eprintln!(
        "the reader's iowait (blkio delay) ticks over 1.5 s waiting for the workers: sleep=iowait {}, plain {}",
        ticks[0], ticks[1]
    );
    assert!(
        ticks[0] > 0 && ticks[1] == 0,
        "the reader's iowait ticks waiting for the workers: sleep=iowait {}, plain {}",
        ticks[0],
        ticks[1]
    );
}

/// A cold sequential stream of 128 KiB reads at QD1 (one reader, the
/// default 128 KiB `read_ahead`, a cache a quarter of the file so it stays
/// cold), through io_uring and through synchronous reads, from memory and
/// from disk: every read's marked page starts the next 32-page window
/// asynchronously, and every such window is built in full, even when the
/// reader has no free bio slot or frame at that moment (the window then
/// waits for one: the kernel's readahead has no such cap). So bios are
/// full windows, nearly all async readahead, and no window is dropped
/// (issue 27, deviation 2). Before, a synchronous reader lost about one
/// window in four: it fell back to a synchronous window.
#[test]
fn async_readahead_is_never_lost_with_qd1() {
    let _g = serial();
    for engine in ["uring", "sync"] {
        for device in ["memory", "disk"] {
            let s = settings(
                "16M",
                &[
                    "workload.pattern=sequential",
                    "workload.block_size=128K",
                    "workload.queue_depth=1",
                    "workload.readers=1",
                    &format!("workload.engine={engine}"),
                    &format!("cache.device={device}"),
                ],
            );
            let secs = 1.2;
            let (t, _) = run_in(shared_16m(), s, Duration::from_secs_f64(secs));
            let c = &t.rec.counters;
            let what = format!("{engine}/{device}");
            eprintln!(
                "{what}: {:.1} MiB/s, {} reads, {} bios of {:.1} pages, {} async, \
                 {} windows waited, {} dropped",
                c.bytes as f64 / secs / (1 << 20) as f64,
                c.reads,
                c.bios,
                c.bio_bytes as f64 / c.bios.max(1) as f64 / 4096.0,
                c.readahead_async,
                c.ra_deferred,
                c.ra_dropped
            );
            assert!(c.reads > 64, "{what}: {c:?}");
            assert_eq!(c.verity_failures + c.io_errors, 0, "{what}: {c:?}");
            assert_eq!(c.ra_dropped, 0, "{what}: a window was dropped: {c:?}");
            let mean = c.bio_bytes / c.bios;
            assert!(
                mean * 10 >= 32 * 4096 * 9,
                "{what}: mean bio {mean} bytes, window 131072: {c:?}"
            );
            // Only the first window (and one where the stream wraps to 0)
            // is synchronous.
            assert!(
                c.readahead_async * 20 >= c.bios * 19,
                "{what}: async readahead windows were lost: {c:?}"
            );
        }
    }
}

/// The memory device reads nothing: a bio's first stage fills its pages
/// from the mapped ciphertext (decrypting into them, or copying where
/// nothing decrypts). Every block is still decrypted and verified against
/// the dataset's Merkle tree, through io_uring and synchronous reads, with
/// decryption or without; an injected corruption is still caught (the bio
/// is filled before it is corrupted). (`completion = irq` runs as `thread`
/// on the memory device: a bio completes in its submission.)
#[test]
fn the_memory_device_fills_every_page_it_reads() {
    let _g = serial();
    for engine in ["uring", "sync"] {
        for decrypt in [true, false] {
            for corrupt in [0u32, 7] {
                let s = settings(
                    "16M",
                    &[
                        "workload.pattern=random",
                        "workload.block_size=64K",
                        "workload.readers=2",
                        "cache.size=0",
                        "cache.device=memory",
                        &format!("workload.engine={engine}"),
                        &format!("pipeline.decrypt={decrypt}"),
                        &format!("pipeline.corrupt_every={corrupt}"),
                    ],
                );
                let (t, _) = run_in(shared_16m(), s, Duration::from_millis(600));
                let c = &t.rec.counters;
                let what = format!("{engine}/decrypt={decrypt}/corrupt={corrupt}");
                assert!(c.reads > 20 && c.bios > 20, "{what}: {c:?}");
                assert_eq!(c.io_errors, 0, "{what}: {c:?}");
                if corrupt == 0 {
                    assert_eq!(c.verity_failures, 0, "{what}: {c:?}");
                    assert_eq!(c.verified_blocks, c.bio_bytes / 4096, "{what}: {c:?}");
                    if decrypt {
                        assert_eq!(c.decrypted_units, c.bio_bytes / 4096, "{what}: {c:?}");
                    }
                } else {
                    assert!(c.corrupted > 0 && c.verity_failures > 0, "{what}: {c:?}");
                }
            }
        }
    }
}

/// Every read hands the application the dataset's plaintext: the bytes the
/// model decrypted and verified into its frames, copied by the kernel out
/// of the frames' memfd at the right frames and offsets, however the pages
/// came in (the memory device or the disk, io_uring or sync readers, a
/// cache too small to keep a read's pages, hits and misses, several
/// readers on the same pages). Every read is compared, none differs.
#[test]
fn every_read_gets_the_plaintext_the_model_decrypted() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    let _g = serial();
    for engine in ["uring", "sync"] {
        for device in ["memory", "disk"] {
            for (size, pattern) in [("0", "random"), ("1M", "sequential"), ("auto", "random")] {
                let s = settings(
                    "16M",
                    &[
                        &format!("workload.pattern={pattern}"),
                        "workload.block_size=64K",
                        "workload.readers=2",
                        &format!("cache.size={size}"),
                        &format!("cache.device={device}"),
                        &format!("workload.engine={engine}"),
                    ],
                );
                let check = Arc::new(readpath::engine::CopyCheck::default());
                let mut opts =
                    EngineOptions::new(Duration::from_millis(100), shared_16m().to_path_buf());
                opts.check_copies = Some(check.clone());
                let mut quiet = |_: u64, _: u64| {};
                let engine_ = Engine::start(s, opts, &mut quiet).unwrap();
                std::thread::sleep(Duration::from_millis(500));
                let t = engine_.stop();
                let c = &t.rec.counters;
                let what = format!("{engine}/{device}/cache.size={size}/{pattern}");
                assert!(c.reads > 20 && c.bios > 0, "{what}: {c:?}");
                assert_eq!(c.io_errors + c.verity_failures, 0, "{what}: {c:?}");
                assert_eq!(check.reads.load(Ordering::Relaxed), c.reads, "{what}");
                assert_eq!(check.wrong.load(Ordering::Relaxed), 0, "{what}");
            }
        }
    }
}
