//! Requested settings into the settings that run on this machine, worked
//! out in one place.
//!
//! A setting can run differently from what was asked: io_uring may be
//! disabled (then reads are synchronous, which always sleep as iowait), the
//! kernel may lack `IORING_FEAT_NO_IOWAIT` (then a plain wait is iowait),
//! the process may not raise priority (then workers run at nice 0), the
//! filesystem may refuse O_DIRECT (then reads are buffered), and a
//! synchronous reader has one read in flight whatever the queue depth.
//! [`resolve`] is a pure function of the settings, the machine's
//! [`Features`] and the data file's filesystem: it returns the effective
//! settings, each fallback with its reason (the engine's notices and the
//! explorer's `→ running value`), and each setting the machine or the other
//! settings limit (greyed in the explorer with the reason). The engine, the
//! explorer and the reports all read its answer; nothing works it out again.

use crate::settings::{
    CacheDevice, Completion, EngineKind, Settings, SleepMode, Target, WorkerMode,
};
use crate::sys::Features;

use super::EngineError;

/// What the filesystem of the data file allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFs {
    /// Its type (`ext4`, `tmpfs`).
    pub name: String,
    /// It accepts O_DIRECT reads.
    pub o_direct: bool,
}

impl DataFs {
    /// A filesystem that allows everything (tests, replays that ran direct).
    pub fn capable() -> DataFs {
        DataFs {
            name: "the filesystem".into(),
            o_direct: true,
        }
    }
}

/// A setting that runs differently from what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    /// The setting (`workload.engine`).
    pub key: &'static str,
    /// Why, and what runs instead: the notice text after the key.
    pub reason: String,
}

impl Fallback {
    /// The notice: `workload.engine: io_uring is unavailable (...)`.
    pub fn notice(&self) -> String {
        format!("{}: {}", self.key, self.reason)
    }
}

/// Which kernel read path a configuration models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPath {
    /// ext4/f2fs buffered read: the page cache, readahead bios, post-read
    /// work per bio on a miss (every fs-verity file, and encrypted files
    /// without `inlinecrypt`).
    PageCache,
    /// An O_DIRECT read of an encrypted file on a filesystem mounted with
    /// `inlinecrypt`, no fs-verity: blk-crypto's fallback decrypts each
    /// direct bio on `blk_crypto_wq` (unbound, WQ_HIGHPRI).
    BlkCrypto,
    /// A raw O_DIRECT read of a plain file: no post-read work.
    RawDirect,
    /// `workload.target = "kernel"`: the running kernel's own read path
    /// (its page cache, readahead, fscrypt and fs-verity queues) on a file
    /// written through it; readpath only reads and observes.
    Kernel,
}

impl ReadPath {
    /// The path of effective settings.
    pub fn of(e: &Settings) -> ReadPath {
        if e.workload.target == Target::Kernel {
            return ReadPath::Kernel;
        }
        match (e.workload.direct, e.pipeline.decrypt, e.pipeline.verity) {
            (true, true, false) => ReadPath::BlkCrypto,
            (true, false, false) => ReadPath::RawDirect,
            _ => ReadPath::PageCache,
        }
    }

    /// A one-word name for listings: `buffered`, `blk-crypto`, `direct`.
    pub fn short_name(self) -> &'static str {
        match self {
            ReadPath::PageCache => "buffered",
            ReadPath::BlkCrypto => "blk-crypto",
            ReadPath::RawDirect => "direct",
            ReadPath::Kernel => "kernel",
        }
    }

    /// How the plan and the reports name it.
    pub fn describe(self) -> &'static str {
        match self {
            ReadPath::PageCache => "ext4 buffered read (page cache)",
            ReadPath::BlkCrypto => "blk-crypto (inlinecrypt) direct read",
            ReadPath::RawDirect => "raw direct read",
            ReadPath::Kernel => "the running kernel's read path (its own fscrypt and fs-verity)",
        }
    }
}

/// The answer of [`resolve`].
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// The settings that run.
    pub effective: Settings,
    /// Every fallback taken, in the order of the settings.
    pub fallbacks: Vec<Fallback>,
    /// Settings the machine or the other settings limit, with the reason
    /// (greyed in the explorer), whatever their current value.
    pub limits: Vec<(&'static str, String)>,
    /// The kernel read path it models.
    pub path: ReadPath,
}

impl Resolution {
    /// Why `key` is limited here, if it is.
    pub fn limit(&self, key: &str) -> Option<&str> {
        self.limits
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, why)| why.as_str())
    }

    /// The fallbacks as notices.
    pub fn notices(&self) -> Vec<String> {
        self.fallbacks.iter().map(Fallback::notice).collect()
    }
}

/// Works out what `s` runs as on a machine with `f`, reading a file on
/// `fs`. Impossible combinations (a synchronous reader that does not sleep
/// as iowait) are errors; everything else falls back with a reason.
pub fn resolve(s: &Settings, f: &Features, fs: &DataFs) -> Result<Resolution, EngineError> {
    if s.workload.engine == EngineKind::Sync && s.workload.sleep != SleepMode::Iowait {
        return Err(EngineError::Conflict {
            key: "workload.sleep",
            value: format!("\"{}\"", s.workload.sleep),
            other: "workload.engine = \"sync\"".into(),
            reason: "synchronous reads always sleep as iowait; use sleep = \"iowait\" or engine = \"uring\"",
        });
    }
    let mut e = s.clone();
    let mut fallbacks = Vec::new();
    let mut fall = |key: &'static str, reason: String| fallbacks.push(Fallback { key, reason });
    let w = &mut e.workload;
    if w.engine == EngineKind::Uring && !f.io_uring {
        w.engine = EngineKind::Sync;
        let why = f.io_uring_reason.as_deref().unwrap_or("not available");
        fall(
            "workload.engine",
            format!("io_uring is unavailable ({why}); using engine = sync"),
        );
        if w.sleep != SleepMode::Iowait {
            fall(
                "workload.sleep",
                format!(
                    "{} needs io_uring; synchronous reads sleep as iowait",
                    w.sleep
                ),
            );
            w.sleep = SleepMode::Iowait;
        }
    }
    if w.engine == EngineKind::Uring && w.sleep == SleepMode::Plain && !f.no_iowait {
        fall(
            "workload.sleep",
            "this kernel does not advertise IORING_FEAT_NO_IOWAIT (v6.15+); the wait stays iowait"
                .into(),
        );
        w.sleep = SleepMode::Iowait;
    }
    if w.engine == EngineKind::Sync && w.queue_depth > 1 {
        fall(
            "workload.queue_depth",
            format!(
                "sync reads are one at a time per reader; queue_depth {} is ignored (use readers)",
                w.queue_depth
            ),
        );
        w.queue_depth = 1;
    }
    if w.direct && !fs.o_direct {
        fall(
            "workload.direct",
            format!(
                "{} does not support O_DIRECT; reading buffered (page cache) instead",
                fs.name
            ),
        );
        w.direct = false;
    }
    // O_DIRECT as ext4 and f2fs treat it (ext4_dio_alignment()).
    if e.workload.target == Target::Kernel {
        if let Some(why) = &f.kernel_target_reason {
            let why = why.trim_start_matches("workload.target = \"kernel\" ");
            return Err(EngineError::Kernel(why.to_string()));
        }
        return Ok(resolve_kernel(s, e, fallbacks, f, fs));
    }
    if e.workload.direct && e.pipeline.verity {
        fall(
            "workload.direct",
            "fs-verity files are never read direct (ext4_dio_alignment() is 0 for them): the kernel reads them through the page cache, and so does this run".into(),
        );
        e.workload.direct = false;
    }
    let path = ReadPath::of(&e);
    if path == ReadPath::BlkCrypto && e.workers.mode != WorkerMode::Unbound {
        fall(
            "workers.mode",
            format!(
                "a direct read of an encrypted file is decrypted by blk-crypto's fallback on blk_crypto_wq, which is unbound; {} does not apply",
                e.workers.mode
            ),
        );
        e.workers.mode = WorkerMode::Unbound;
    }
    if path == ReadPath::PageCache && e.cache.device == CacheDevice::Disk && !fs.o_direct {
        fall(
            "cache.device",
            format!(
                "{} does not support O_DIRECT; bios read the file through the kernel's own cache (as device = memory)",
                fs.name
            ),
        );
        e.cache.device = CacheDevice::Memory;
    }
    // Completions in interrupt context are modelled for the page cache's
    // io_uring reads from the device; elsewhere the reader completes them
    // (no notice: the settings panel greys the key with the reason).
    if completion_limit(&e, path).is_some() {
        e.workload.completion = Completion::Thread;
    }
    if e.workers.highpri && !f.highpri {
        fall(
            "workers.highpri",
            format!(
                "running at nice 0 instead of -20: {}",
                f.highpri_reason
                    .as_deref()
                    .unwrap_or("raising priority is not permitted")
            ),
        );
        e.workers.highpri = false;
    }
    let limits = limits(s, &e, f, fs);
    Ok(Resolution {
        effective: e,
        fallbacks,
        limits,
        path,
    })
}

/// The rest of [`resolve`] for `workload.target = "kernel"`: the kernel
/// decides what O_DIRECT does, runs its own queues and page cache; what
/// this kernel lacks (fs-verity) falls back with the reason, and what only
/// the model has is limited.
fn resolve_kernel(
    s: &Settings,
    mut e: Settings,
    mut fallbacks: Vec<Fallback>,
    f: &Features,
    fs: &DataFs,
) -> Resolution {
    let mut fall = |key: &'static str, reason: String| fallbacks.push(Fallback { key, reason });
    if e.pipeline.verity && !f.kernel_verity {
        fall(
            "pipeline.verity",
            "this kernel's ext4 has no fs-verity (CONFIG_FS_VERITY is not set): the kernel target reads its file without verity".into(),
        );
        e.pipeline.verity = false;
    }
    if e.pipeline.corrupt_every > 0 {
        fall(
            "pipeline.corrupt_every",
            "the kernel's file is read as the kernel wrote it; nothing is corrupted".into(),
        );
        e.pipeline.corrupt_every = 0;
    }
    // The kernel's own: no notice (the settings panel greys them).
    e.workload.completion = Completion::Thread;
    let mut out = limits(s, &e, f, fs);
    // The model's page cache and queues are not the kernel's.
    out.retain(|(k, _)| {
        !(k.starts_with("workers.") || k.starts_with("cache.") || *k == "workload.completion")
            || *k == "cache.cold_start"
    });
    out.retain(|(k, _)| *k != "workload.direct");
    let fixed = "the kernel's own queues: fscrypt_read_queue is unbound and WQ_HIGHPRI, fsverity_read_queue per-CPU and WQ_HIGHPRI, fixed when they are made (kernel.affinity_scope moves the unbound one)";
    for key in [
        "workers.mode",
        "workers.verify_mode",
        "workers.highpri",
        "workers.max_active",
    ] {
        out.push((key, fixed.into()));
    }
    out.push((
        "workers.affinity_scope",
        "the model's pods; the kernel's is kernel.affinity_scope".into(),
    ));
    for key in ["cache.size", "cache.device"] {
        out.push((key, "the kernel's own page cache".into()));
    }
    out.push((
        "cache.read_ahead",
        "the model's readahead; the kernel's is kernel.read_ahead_kb".into(),
    ));
    out.push((
        "workload.completion",
        "the kernel completes its own bios (in interrupt context or its loop worker)".into(),
    ));
    out.push((
        "workload.direct",
        "as the kernel treats it: ext4 reads an encrypted file without inlinecrypt, and every verity file, through the page cache".into(),
    ));
    if s.pipeline.cipher == crate::crypto::CipherKind::Aes256XtsSoft
        || s.pipeline.cipher == crate::crypto::CipherKind::Aes256Xts
    {
        out.retain(|(k, _)| *k != "pipeline.cipher");
        out.push((
            "pipeline.cipher",
            "AES-256-XTS with the driver the kernel picks (/proc/crypto): -soft reads the same file".into(),
        ));
    }
    if !f.kernel_verity {
        out.push((
            "pipeline.verity",
            "this kernel's ext4 has no fs-verity (CONFIG_FS_VERITY)".into(),
        ));
    }
    out.push((
        "pipeline.corrupt_every",
        "the model's: the kernel's file is not corrupted".into(),
    ));
    Resolution {
        effective: e,
        fallbacks,
        limits: out,
        path: ReadPath::Kernel,
    }
}

/// Why `completion = irq` does not apply under `e` (on `path`), if it does not.
fn completion_limit(e: &Settings, path: ReadPath) -> Option<String> {
    if path != ReadPath::PageCache {
        Some(format!(
            "{}: the reader completes direct reads (threaded; the kernel's end_io is in interrupt context)",
            path.describe()
        ))
    } else if e.workload.engine == EngineKind::Sync {
        Some("sync: preadv completes in the reader (threaded; a deviation)".into())
    } else if e.cache.device == CacheDevice::Memory {
        Some("device = memory: a bio completes in its submission, as on brd or zram".into())
    } else {
        None
    }
}

/// What the machine (or the other settings) limits, whatever the values.
fn limits(s: &Settings, e: &Settings, f: &Features, fs: &DataFs) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = Vec::new();
    if !f.io_uring {
        out.push((
            "workload.engine",
            format!(
                "io_uring unavailable: {}",
                f.io_uring_reason.as_deref().unwrap_or("setup failed")
            ),
        ));
    }
    if s.workload.engine == EngineKind::Sync && ReadPath::of(e) == ReadPath::PageCache {
        out.push((
            "workload.sleep",
            "sync: a bio's read is iowait, the wait for its post-read work a futex (not iowait: a deviation)".into(),
        ));
    } else if s.workload.engine == EngineKind::Sync {
        out.push(("workload.sleep", "sync reads always sleep as iowait".into()));
    } else if !f.io_uring {
        out.push(("workload.sleep", "needs io_uring".into()));
    } else if !f.no_iowait {
        out.push((
            "workload.sleep",
            "no IORING_FEAT_NO_IOWAIT (Linux 6.15+): plain = iowait".into(),
        ));
    }
    if !fs.o_direct {
        out.push((
            "workload.direct",
            "the filesystem refuses O_DIRECT: buffered".into(),
        ));
    }
    if e.workload.engine == EngineKind::Sync {
        out.push((
            "workload.queue_depth",
            "sync: one read at a time per reader".into(),
        ));
    }
    if !f.highpri {
        out.push((
            "workers.highpri",
            f.highpri_reason
                .clone()
                .unwrap_or_else(|| "nice -20 not permitted".into()),
        ));
    }
    if !(s.pipeline.decrypt && s.pipeline.verity) {
        out.push((
            "workers.verify_mode",
            "used only when decrypt and verity are both on".into(),
        ));
    }
    if !s.pipeline.decrypt {
        out.push(("pipeline.cipher", "decrypt is off".into()));
    } else if s.pipeline.cipher == crate::crypto::CipherKind::Aes256Xts && !f.aes_instructions {
        out.push(("pipeline.cipher", "no AES instructions on this CPU".into()));
    }
    let path = ReadPath::of(e);
    if s.pipeline.verity {
        out.push(("workload.direct", "verity files: page cache (ext4)".into()));
    }
    if path != ReadPath::PageCache {
        let why = format!("{}: no page cache", path.describe());
        for key in ["cache.size", "cache.read_ahead", "cache.device"] {
            out.push((key, why.clone()));
        }
    } else if !fs.o_direct {
        out.push((
            "cache.device",
            "the filesystem refuses O_DIRECT: bios read the kernel's cache".into(),
        ));
    }
    if path == ReadPath::BlkCrypto {
        out.push((
            "workers.mode",
            "blk-crypto decrypts on its unbound queue".into(),
        ));
    }
    if let Some(why) = completion_limit(e, path) {
        out.push(("workload.completion", why));
    }
    if let Some(why) = &f.kernel_target_reason {
        out.push(("workload.target", why.clone()));
    }
    if path != ReadPath::Kernel {
        for key in [
            "kernel.dir",
            "kernel.affinity_scope",
            "kernel.unbound_cpus",
            "kernel.read_ahead_kb",
            "kernel.rq_affinity",
        ] {
            out.push((key, "used with workload.target = kernel".into()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Features {
        Features {
            io_uring: true,
            io_uring_reason: None,
            no_iowait: true,
            aes_instructions: true,
            sha_instructions: true,
            vaes: true,
            schedstat: true,
            highpri: true,
            highpri_reason: None,
            kernel_verity: false,
            kernel_target_reason: None,
        }
    }

    fn with(kv: &[(&str, &str)]) -> Settings {
        let mut s = Settings::default();
        for (k, v) in kv {
            s.set(k, v).unwrap();
        }
        s
    }

    #[test]
    fn a_capable_machine_runs_what_was_asked() {
        let s = with(&[("workload.sleep", "plain")]);
        let r = resolve(&s, &all(), &DataFs::capable()).unwrap();
        assert_eq!(r.effective, s);
        assert!(r.fallbacks.is_empty());
        assert_eq!(r.limit("workload.engine"), None);
    }

    #[test]
    fn no_io_uring_means_sync_reads_that_sleep_as_iowait() {
        let f = Features {
            io_uring: false,
            io_uring_reason: Some("kernel.io_uring_disabled = 2".into()),
            no_iowait: false,
            ..all()
        };
        let s = with(&[("workload.sleep", "plain"), ("workload.queue_depth", "8")]);
        let r = resolve(&s, &f, &DataFs::capable()).unwrap();
        assert_eq!(r.effective.workload.engine, EngineKind::Sync);
        assert_eq!(r.effective.workload.sleep, SleepMode::Iowait);
        assert_eq!(r.effective.workload.queue_depth, 1);
        let keys: Vec<&str> = r.fallbacks.iter().map(|f| f.key).collect();
        assert_eq!(
            keys,
            ["workload.engine", "workload.sleep", "workload.queue_depth"]
        );
        assert!(r.notices()[0].contains("kernel.io_uring_disabled = 2"));
        assert!(
            r.limit("workload.engine")
                .unwrap()
                .contains("io_uring_disabled")
        );
        assert_eq!(r.limit("workload.sleep"), Some("needs io_uring"));
    }

    #[test]
    fn no_no_iowait_means_an_iowait_wait() {
        let f = Features {
            no_iowait: false,
            ..all()
        };
        let r = resolve(
            &with(&[("workload.sleep", "plain")]),
            &f,
            &DataFs::capable(),
        )
        .unwrap();
        assert_eq!(r.effective.workload.sleep, SleepMode::Iowait);
        assert!(r.fallbacks[0].reason.contains("NO_IOWAIT"));
        // Poll needs no kernel feature.
        let r = resolve(&with(&[("workload.sleep", "poll")]), &f, &DataFs::capable()).unwrap();
        assert_eq!(r.effective.workload.sleep, SleepMode::Poll);
    }

    #[test]
    fn no_cap_sys_nice_means_nice_0_and_no_o_direct_means_buffered() {
        let f = Features {
            highpri: false,
            highpri_reason: Some("no CAP_SYS_NICE, RLIMIT_NICE 0".into()),
            kernel_verity: false,
            kernel_target_reason: None,
            ..all()
        };
        let fs = DataFs {
            name: "tmpfs".into(),
            o_direct: false,
        };
        let s = with(&[("workers.highpri", "true"), ("workload.direct", "true")]);
        let r = resolve(&s, &f, &fs).unwrap();
        assert!(!r.effective.workers.highpri);
        assert!(!r.effective.workload.direct);
        assert_eq!(
            r.notices(),
            [
                "workload.direct: tmpfs does not support O_DIRECT; reading buffered (page cache) instead",
                "cache.device: tmpfs does not support O_DIRECT; bios read the file through the kernel's own cache (as device = memory)",
                "workers.highpri: running at nice 0 instead of -20: no CAP_SYS_NICE, RLIMIT_NICE 0"
            ]
        );
        assert_eq!(
            r.effective.cache.device,
            crate::settings::CacheDevice::Memory
        );
        assert_eq!(
            r.limit("workers.highpri"),
            Some("no CAP_SYS_NICE, RLIMIT_NICE 0")
        );
    }

    /// O_DIRECT as ext4 treats it: never for fs-verity files, blk-crypto
    /// for encrypted ones (inlinecrypt), raw for plain ones.
    #[test]
    fn o_direct_runs_the_path_the_kernel_takes() {
        let s = with(&[("workload.direct", "true")]);
        let r = resolve(&s, &all(), &DataFs::capable()).unwrap();
        assert_eq!(r.path, ReadPath::PageCache);
        assert!(!r.effective.workload.direct);
        assert_eq!(r.fallbacks.len(), 1);
        assert_eq!(r.fallbacks[0].key, "workload.direct");
        assert!(
            r.fallbacks[0].reason.contains("ext4_dio_alignment"),
            "{:?}",
            r.fallbacks
        );
        let s = with(&[
            ("workload.direct", "true"),
            ("pipeline.verity", "false"),
            ("workers.mode", "bound"),
        ]);
        let r = resolve(&s, &all(), &DataFs::capable()).unwrap();
        assert_eq!(r.path, ReadPath::BlkCrypto);
        assert!(r.effective.workload.direct);
        assert_eq!(r.effective.workers.mode, WorkerMode::Unbound);
        assert!(r.notices()[0].starts_with(
            "workers.mode: a direct read of an encrypted file is decrypted by blk-crypto"
        ));
        assert_eq!(r.path.describe(), "blk-crypto (inlinecrypt) direct read");
        let s = with(&[
            ("workload.direct", "true"),
            ("pipeline.verity", "false"),
            ("pipeline.decrypt", "false"),
        ]);
        let r = resolve(&s, &all(), &DataFs::capable()).unwrap();
        assert_eq!(r.path, ReadPath::RawDirect);
        assert!(r.fallbacks.is_empty());
        assert!(r.limit("cache.size").unwrap().contains("no page cache"));
        // Buffered is the page cache whatever the stages.
        let r = resolve(
            &with(&[("pipeline.decrypt", "false")]),
            &all(),
            &DataFs::capable(),
        )
        .unwrap();
        assert_eq!(r.path, ReadPath::PageCache);
    }

    #[test]
    fn sync_with_a_non_iowait_sleep_is_refused() {
        let s = with(&[("workload.engine", "sync"), ("workload.sleep", "poll")]);
        let e = resolve(&s, &all(), &DataFs::capable()).unwrap_err();
        assert!(e.to_string().contains("always sleep as iowait"), "{e}");
    }

    #[test]
    fn settings_that_only_matter_with_others_are_limited() {
        let s = with(&[("pipeline.decrypt", "false")]);
        let r = resolve(&s, &all(), &DataFs::capable()).unwrap();
        assert_eq!(r.limit("pipeline.cipher"), Some("decrypt is off"));
        assert!(r.limit("workers.verify_mode").is_some());
        assert!(r.fallbacks.is_empty());
    }
}
