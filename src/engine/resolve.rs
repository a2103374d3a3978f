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

use crate::crypto::CipherKind;
use crate::key;
use crate::settings::{
    CacheDevice, Completion, EngineKind, HashKind, Key, Scope, Settings, SleepMode, Target,
    VerifyMode, WorkerMode,
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
    /// The data filesystem as the settings that ran tell it, where it
    /// cannot be asked (the explorer of a remote run, a replay): asked for
    /// direct without fs-verity (which is never direct) and ran buffered,
    /// or asked for bios from the disk and got them from memory, means it
    /// refuses O_DIRECT.
    pub fn inferred(requested: &Settings, effective: &Settings) -> DataFs {
        let direct_refused =
            requested.workload.direct && !requested.pipeline.verity && !effective.workload.direct;
        let device_refused = requested.cache.device == CacheDevice::Disk
            && effective.cache.device == CacheDevice::Memory;
        DataFs {
            name: "the filesystem".into(),
            o_direct: !(direct_refused || device_refused),
        }
    }

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
    pub key: Key,
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

/// The settings that run: what [`resolve`] made of the settings asked
/// for on this machine. Only this module builds one, so every part of the
/// engine that takes an `Effective` runs what the resolver decided, never
/// the request (ripgrep's `HiArgs`, built only from `LowArgs`). It reads
/// as [`Settings`] (`Deref`); [`Effective::settings`] hands the plain
/// settings out to what only reports them (records, the explorer, the
/// agent's header).
#[derive(Debug, Clone, PartialEq)]
pub struct Effective {
    settings: Settings,
    ring: Ring,
}

/// How a reader's io_uring ring is set up and waits: decided by
/// [`resolve`] from the settings and the machine's [`Features`], so no
/// reader probes or falls back on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    /// Set up as fio does (`COOP_TASKRUN`, `TASKRUN_FLAG`, `SINGLE_ISSUER`,
    /// `DEFER_TASKRUN`: no IPIs, completions posted when the reader waits);
    /// false for a polling reader (it never waits in the kernel) and where
    /// the kernel lacks `DEFER_TASKRUN` (said in a notice).
    pub tuned: bool,
    /// Its waits pass `IORING_ENTER_NO_IOWAIT` (`sleep = "plain"` where the
    /// kernel has it).
    pub enter_no_iowait: bool,
}

impl std::ops::Deref for Effective {
    type Target = Settings;
    fn deref(&self) -> &Settings {
        &self.settings
    }
}

impl Effective {
    /// The settings, to report.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// How a reader's ring is set up and waits.
    pub fn ring(&self) -> Ring {
        self.ring
    }

    /// What the kernel target runs to write and map the file a `cache.device
    /// = "target"` model reads: untraced, no knob turned, its cache not
    /// limited (the model's own cache is the one read), and the file of the
    /// same decryption, with fs-verity where the kernel has it (the data
    /// blocks are the same either way; the tree is the dataset's).
    pub fn for_target_device(&self, kernel_verity: bool) -> Effective {
        let mut k = self.settings.clone();
        k.kernel = crate::settings::Kernel {
            dir: self.kernel.dir.clone(),
            trace: false,
            limit_cache: false,
            ..Default::default()
        };
        k.pipeline.verity = self.pipeline.verity && kernel_verity;
        Effective {
            settings: k,
            ring: self.ring,
        }
    }
}

/// Why `kernel.affinity_scope` does nothing on a kernel before 6.5 (and
/// what the kernel target's summary says its scope was).
pub const NO_SCOPES: &str =
    "this kernel has no workqueue affinity scopes (Linux 6.5+): one unbound pool per NUMA node";

/// What the kernel refused only when it was done, though [`resolve`] let
/// it run (the machine's features said it could, or could not tell): the
/// engine's threads report it through their notice sink, which says it in
/// the resolver's words (beside the rule that says the same up front), and
/// the engine's effective settings become what ran ([`Effective::refused`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// A worker's nice -20 (`workers.highpri`), and why.
    Highpri(String),
    /// A hog's nice (`load.hog_nice`), and why.
    HogNice(String),
    /// An irq thread's SCHED_FIFO (`workload.completion = irq`): the nice
    /// it runs at instead, and why.
    IrqFifo {
        /// The nice it runs at.
        nice: i32,
        /// Why.
        why: String,
    },
}

impl Refused {
    /// The key it is about.
    pub fn key(&self) -> Key {
        match self {
            Refused::Highpri(_) => key!(workers.highpri),
            Refused::HogNice(_) => key!(load.hog_nice),
            Refused::IrqFifo { .. } => key!(workload.completion),
        }
    }

    /// What runs instead, and why (the notice after the key).
    pub fn reason(&self) -> String {
        match self {
            Refused::Highpri(why) => format!("running at nice 0 instead of -20: {why}"),
            Refused::HogNice(why) => format!("hogs run at nice 0: {why}"),
            Refused::IrqFifo { nice, why } => format!(
                "irq: the completion threads run as ordinary threads (nice {nice}) instead of interrupt-like SCHED_FIFO: {why}"
            ),
        }
    }

    /// The notice: `workers.highpri: running at nice 0 instead of -20: ...`.
    pub fn notice(&self) -> String {
        Fallback {
            key: self.key(),
            reason: self.reason(),
        }
        .notice()
    }
}

impl Effective {
    /// What ran after the kernel refused `r` at run time: a worker refused
    /// nice -20 runs at nice 0 (`workers.highpri = false`), a hog refused
    /// its nice at nice 0. An irq thread refused SCHED_FIFO changes no
    /// setting: its completions still run on the irq threads.
    pub fn refused(&mut self, r: &Refused) {
        match r {
            Refused::Highpri(_) => self.settings.workers.highpri = false,
            Refused::HogNice(_) => self.settings.load.hog_nice = 0,
            Refused::IrqFifo { .. } => {}
        }
    }
}

/// The answer of [`resolve`].
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// The settings that run.
    pub effective: Effective,
    /// Every fallback taken, in the order of the settings.
    pub fallbacks: Vec<Fallback>,
    /// Settings the machine or the other settings limit, with the reason
    /// (greyed in the explorer), whatever their current value.
    pub limits: Vec<(&'static str, String)>,
    /// Settings that do nothing in this configuration (a subset of the
    /// keys in `limits`): any value runs the same.
    pub inert: Vec<&'static str>,
    /// The kernel read path it models.
    pub path: ReadPath,
}

/// One key as [`resolve`] answers for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    /// The key.
    pub key: &'static str,
    /// Its value as asked for.
    pub requested: String,
    /// Its value as it runs.
    pub effective: String,
    /// Why it runs differently, is limited, or does nothing here.
    pub reason: Option<String>,
    /// It does nothing in this configuration.
    pub inert: bool,
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

    /// Every key: asked for, as it runs, and why they differ (or why it is
    /// greyed), in [`crate::settings::KEYS`] order.
    pub fn keys(&self, requested: &Settings) -> Vec<KeyState> {
        crate::settings::KEYS
            .iter()
            .map(|k| KeyState {
                key: k.key.name(),
                requested: requested.get(k.key).unwrap_or_default(),
                effective: self.effective.get(k.key).unwrap_or_default(),
                reason: self.limit(k.key.name()).map(str::to_string).or_else(|| {
                    self.fallbacks
                        .iter()
                        .find(|f| f.key == k.key)
                        .map(|f| f.reason.clone())
                }),
                inert: self.inert.contains(&k.key.name()),
            })
            .collect()
    }

    /// Whether `other` runs the same as this: every key that does something
    /// in both has the same effective value.
    pub fn runs_like(&self, other: &Resolution) -> bool {
        crate::settings::KEYS.iter().all(|k| {
            self.inert.contains(&k.key.name()) && other.inert.contains(&k.key.name())
                || self.effective.get(k.key) == other.effective.get(k.key)
        })
    }
}

/// Reads one reader has in flight under `s`: synchronous reads are one at
/// a time, whatever `workload.queue_depth` says.
pub fn in_flight(s: &Settings) -> u32 {
    match s.workload.engine {
        EngineKind::Sync => 1,
        EngineKind::Uring => s.workload.queue_depth,
    }
}

/// A combination of settings that cannot run, and how to make it run when
/// the other key is the one that moved.
struct Conflict {
    /// The refused key.
    key: &'static str,
    /// The key it conflicts with.
    other: &'static str,
    when: fn(&Settings) -> bool,
    /// What makes it run: `key` to a value that goes with `other`.
    fix: fn(&mut Settings),
    reason: &'static str,
}

const CONFLICTS: &[Conflict] = &[Conflict {
    key: crate::key!(workload.sleep).name(),
    other: crate::key!(workload.engine).name(),
    when: |s| s.workload.engine == EngineKind::Sync && s.workload.sleep != SleepMode::Iowait,
    fix: |s| s.workload.sleep = SleepMode::Iowait,
    reason: "synchronous reads always sleep as iowait; use sleep = \"iowait\" or engine = \"uring\"",
}];

/// After `changed` moved (a key in the explorer), the keys that conflict
/// with its new value follow it (engine = sync takes sleep to iowait);
/// a conflict of `changed` itself stays, for [`resolve`] to refuse.
pub fn reconcile(s: &mut Settings, changed: &str) {
    for c in CONFLICTS {
        if c.other == changed && (c.when)(s) {
            (c.fix)(s);
        }
    }
}

/// What [`resolve`] reads: the settings asked for, those that run so far,
/// the machine and the data file's filesystem.
struct Ctx<'a> {
    s: &'a Settings,
    e: &'a Settings,
    f: &'a Features,
    fs: &'a DataFs,
}

impl Ctx<'_> {
    fn path(&self) -> ReadPath {
        ReadPath::of(self.e)
    }
}

/// Which path a rule is about.
#[derive(Clone, Copy, PartialEq, Eq)]
enum On {
    Both,
    Model,
    Kernel,
}

/// One rule of what runs: while `when` holds, `runs` changes what runs
/// (announced with `notice` when it changed the key), and the key is
/// greyed with `grey`; `inert` says the key then does nothing at all.
struct Rule {
    keys: &'static [Key],
    on: On,
    when: fn(&Ctx) -> bool,
    runs: Option<fn(&mut Settings)>,
    notice: Option<fn(&Ctx) -> String>,
    grey: Option<fn(&Ctx) -> String>,
    inert: bool,
}

const RULE: Rule = Rule {
    keys: &[],
    on: On::Both,
    when: |_| true,
    runs: None,
    notice: None,
    grey: None,
    inert: false,
};

const DIRECT_KERNEL: &str = "as the kernel treats it: ext4 reads an encrypted file without inlinecrypt, and every verity file, through the page cache";

/// Every rule, in the order they apply (a later rule sees what the earlier
/// ones made run) and, per key, the order their reasons are preferred.
const RULES: &[Rule] = &[
    Rule {
        keys: &[key!(workload.engine)],
        when: |c| !c.f.io_uring,
        runs: Some(|e| e.workload.engine = EngineKind::Sync),
        notice: Some(|c| {
            let why = c.f.io_uring_reason.as_deref().unwrap_or("not available");
            format!("io_uring is unavailable ({why}); using engine = sync")
        }),
        grey: Some(|c| {
            format!(
                "io_uring unavailable: {}",
                c.f.io_uring_reason.as_deref().unwrap_or("setup failed")
            )
        }),
        ..RULE
    },
    Rule {
        keys: &[key!(workload.sleep)],
        when: |c| c.s.workload.engine == EngineKind::Sync && c.path() == ReadPath::PageCache,
        grey: Some(|_| {
            "sync: a bio's read is iowait, the wait for its post-read work a futex (not iowait: a deviation)".into()
        }),
        ..RULE
    },
    Rule {
        keys: &[key!(workload.sleep)],
        when: |c| c.s.workload.engine == EngineKind::Sync,
        grey: Some(|_| "sync reads always sleep as iowait".into()),
        ..RULE
    },
    Rule {
        keys: &[key!(workload.sleep)],
        when: |c| !c.f.io_uring,
        runs: Some(|e| e.workload.sleep = SleepMode::Iowait),
        notice: Some(|c| {
            format!(
                "{} needs io_uring; synchronous reads sleep as iowait",
                c.s.workload.sleep
            )
        }),
        grey: Some(|_| "needs io_uring".into()),
        ..RULE
    },
    Rule {
        keys: &[key!(workload.sleep)],
        // The lab kernel's io_uring_iowait switch makes a plain wait on the
        // kernel target (`kernel::switches`).
        when: |c| {
            c.e.workload.engine == EngineKind::Uring
                && !c.f.no_iowait
                && !(c.e.workload.target == Target::Kernel && c.f.kernel_switches)
        },
        runs: Some(|e| {
            if e.workload.sleep == SleepMode::Plain {
                e.workload.sleep = SleepMode::Iowait;
            }
        }),
        notice: Some(|_| {
            "this kernel does not advertise IORING_FEAT_NO_IOWAIT (v6.15+); the wait stays iowait"
                .into()
        }),
        grey: Some(|_| "no IORING_FEAT_NO_IOWAIT (Linux 6.15+): plain = iowait".into()),
        ..RULE
    },
    Rule {
        keys: &[key!(workload.queue_depth)],
        when: |c| c.e.workload.engine == EngineKind::Sync,
        runs: Some(|e| e.workload.queue_depth = in_flight(e)),
        notice: Some(|c| {
            format!(
                "sync reads are one at a time per reader; queue_depth {} is ignored (use readers)",
                c.s.workload.queue_depth
            )
        }),
        grey: Some(|_| "sync: one read at a time per reader".into()),
        ..RULE
    },
    Rule {
        keys: &[key!(workload.direct)],
        on: On::Kernel,
        grey: Some(|_| DIRECT_KERNEL.into()),
        ..RULE
    },
    Rule {
        keys: &[key!(workload.direct)],
        when: |c| !c.fs.o_direct,
        runs: Some(|e| e.workload.direct = false),
        notice: Some(|c| {
            format!(
                "{} does not support O_DIRECT; reading buffered (page cache) instead",
                c.fs.name
            )
        }),
        grey: Some(|_| "the filesystem refuses O_DIRECT: buffered".into()),
        ..RULE
    },
    Rule {
        keys: &[key!(pipeline.verity)],
        on: On::Kernel,
        when: |c| !c.f.kernel_verity,
        runs: Some(|e| e.pipeline.verity = false),
        notice: Some(|_| {
            "this kernel's ext4 has no fs-verity (CONFIG_FS_VERITY is not set): the kernel target reads its file without verity".into()
        }),
        grey: Some(|_| "this kernel's ext4 has no fs-verity (CONFIG_FS_VERITY)".into()),
        inert: true,
    },
    Rule {
        keys: &[key!(kernel.affinity_scope)],
        on: On::Kernel,
        when: |c| !c.f.kernel_affinity_scopes,
        runs: Some(|e| e.kernel.affinity_scope = None),
        notice: Some(|_| NO_SCOPES.into()),
        grey: Some(|_| NO_SCOPES.into()),
        inert: true,
    },
    Rule {
        keys: &[key!(pipeline.corrupt_every)],
        on: On::Kernel,
        runs: Some(|e| e.pipeline.corrupt_every = 0),
        notice: Some(|_| {
            "the kernel's file is read as the kernel wrote it; nothing is corrupted".into()
        }),
        ..RULE
    },
    Rule {
        keys: &[key!(workload.completion)],
        on: On::Kernel,
        runs: Some(|e| e.workload.completion = Completion::Thread),
        ..RULE
    },
    Rule {
        keys: &[key!(pipeline.cipher)],
        on: On::Kernel,
        when: |c| {
            matches!(
                c.s.pipeline.cipher,
                CipherKind::Aes256Xts
                    | CipherKind::Aes256XtsSoft
                    | CipherKind::Aes256XtsTi
                    | CipherKind::Aes256XtsNi4
                    | CipherKind::Kernel
            )
        },
        grey: Some(|_| {
            "AES-256-XTS with the driver the kernel picks (/proc/crypto): -soft, -ti, -ni4 and kernel read the same file"
                .into()
        }),
        ..RULE
    },
    Rule {
        keys: &[key!(workload.direct)],
        on: On::Model,
        when: |c| c.e.pipeline.verity,
        runs: Some(|e| e.workload.direct = false),
        notice: Some(|_| {
            "fs-verity files are never read direct (ext4_dio_alignment() is 0 for them): the kernel reads them through the page cache, and so does this run".into()
        }),
        grey: Some(|_| "verity files: page cache (ext4)".into()),
        ..RULE
    },
    Rule {
        keys: &[key!(workers.mode)],
        on: On::Model,
        when: |c| c.path() == ReadPath::BlkCrypto,
        runs: Some(|e| e.workers.mode = WorkerMode::Unbound),
        notice: Some(|c| {
            format!(
                "a direct read of an encrypted file is decrypted by blk-crypto's fallback on blk_crypto_wq, which is unbound; {} does not apply",
                c.s.workers.mode
            )
        }),
        grey: Some(|_| "blk-crypto decrypts on its unbound queue".into()),
        ..RULE
    },
    Rule {
        keys: &[key!(cache.size), key!(cache.read_ahead), key!(cache.device)],
        on: On::Model,
        when: |c| c.path() != ReadPath::PageCache,
        grey: Some(|c| format!("{}: no page cache", c.path().describe())),
        inert: true,
        ..RULE
    },
    Rule {
        keys: &[key!(cache.device)],
        on: On::Model,
        when: |c| c.path() == ReadPath::PageCache && !c.fs.o_direct,
        runs: Some(|e| e.cache.device = CacheDevice::Memory),
        notice: Some(|c| {
            format!(
                "{} does not support O_DIRECT; bios read the file through the kernel's own cache (as device = memory)",
                c.fs.name
            )
        }),
        grey: Some(|_| "the filesystem refuses O_DIRECT: bios read the kernel's cache".into()),
        ..RULE
    },
    Rule {
        keys: &[key!(cache.device)],
        on: On::Model,
        when: |c| {
            c.path() == ReadPath::PageCache
                && c.e.cache.device == CacheDevice::Target
                && c.f.kernel_target_reason.is_some()
        },
        runs: Some(|e| e.cache.device = CacheDevice::Disk),
        notice: Some(|c| {
            format!(
                "target: the kernel target cannot be opened here ({}); bios read readpath's own file (as device = disk)",
                c.f.kernel_target_reason.as_deref().unwrap_or("")
            )
        }),
        grey: Some(|c| c.f.kernel_target_reason.clone().unwrap_or_default()),
        ..RULE
    },
    // Completions in interrupt context are modelled for the page cache's
    // io_uring reads from the device; elsewhere the reader completes them
    // (no notice: the settings panel greys the key with the reason).
    Rule {
        keys: &[key!(workload.completion)],
        on: On::Model,
        when: |c| completion_limit(c.e, c.path()).is_some(),
        runs: Some(|e| e.workload.completion = Completion::Thread),
        grey: Some(|c| completion_limit(c.e, c.path()).unwrap_or_default()),
        ..RULE
    },
    // Interrupt CPUs and rq_affinity's redirect are those of completions
    // in interrupt context: with the reader completing, they do nothing.
    Rule {
        keys: &[key!(workload.irq_cpus)],
        on: On::Model,
        when: |c| c.e.workload.completion != Completion::Irq,
        grey: Some(|_| "only with completion = irq".into()),
        inert: true,
        ..RULE
    },
    Rule {
        keys: &[key!(workers.highpri)],
        on: On::Model,
        when: |c| !c.f.highpri,
        runs: Some(|e| e.workers.highpri = false),
        notice: Some(|c| {
            Refused::Highpri(
                c.f.highpri_reason
                    .clone()
                    .unwrap_or_else(|| "raising priority is not permitted".into()),
            )
            .reason()
        }),
        grey: Some(|c| {
            c.f.highpri_reason
                .clone()
                .unwrap_or_else(|| "nice -20 not permitted".into())
        }),
        ..RULE
    },
    // `workers.kernel_era` and the queue keys: setting the era sets
    // workers.mode, verify_mode and highpri to its queues' flags; a key set
    // after it (later on the command line, anywhere in the same file) wins
    // (`settings::Workers::apply_era`). Nothing here re-applies the era.
    Rule {
        keys: &[key!(workers.affinity_scope), key!(workers.affinity_strict)],
        on: On::Model,
        when: |c| !super::era::Era::of(c.s.workers.kernel_era).has_affinity_scopes(),
        grey: Some(|c| {
            format!(
                "kernel {} has no affinity scopes (v6.5): one unbound pool per NUMA node",
                c.s.workers.kernel_era
            )
        }),
        inert: true,
        ..RULE
    },
    Rule {
        keys: &[key!(workers.verify_mode)],
        on: On::Model,
        when: |c| !(c.s.pipeline.decrypt && c.s.pipeline.verity),
        grey: Some(|_| "used only when decrypt and verity are both on".into()),
        inert: true,
        ..RULE
    },
    Rule {
        keys: &[key!(pipeline.cipher)],
        when: |c| !c.s.pipeline.decrypt,
        grey: Some(|_| "decrypt is off".into()),
        inert: true,
        ..RULE
    },
    Rule {
        keys: &[key!(pipeline.cipher)],
        on: On::Model,
        when: |c| {
            c.s.pipeline.decrypt
                && c.s.pipeline.cipher == CipherKind::Kernel
                && c.f.kernel_cipher_reason.is_some()
        },
        runs: Some(|e| e.pipeline.cipher = CipherKind::Aes256Xts),
        notice: Some(|c| {
            format!(
                "the kernel's xts(aes) is unavailable through AF_ALG ({}); using aes-256-xts (readpath's own, the same ciphertext)",
                c.f.kernel_cipher_reason.as_deref().unwrap_or("refused")
            )
        }),
        grey: Some(|c| {
            format!(
                "kernel: AF_ALG unavailable ({})",
                c.f.kernel_cipher_reason.as_deref().unwrap_or("refused")
            )
        }),
        ..RULE
    },
    Rule {
        keys: &[key!(pipeline.hash)],
        when: |c| !c.s.pipeline.verity,
        grey: Some(|_| "verity is off".into()),
        inert: true,
        ..RULE
    },
    Rule {
        keys: &[key!(pipeline.hash)],
        on: On::Model,
        when: |c| {
            c.s.pipeline.verity
                && c.s.pipeline.hash == HashKind::Kernel
                && c.f.kernel_hash_reason.is_some()
        },
        runs: Some(|e| e.pipeline.hash = HashKind::Software),
        notice: Some(|c| {
            format!(
                "the kernel's sha256 is unavailable through AF_ALG ({}); using software (readpath's own, the same hashes)",
                c.f.kernel_hash_reason.as_deref().unwrap_or("refused")
            )
        }),
        grey: Some(|c| {
            format!(
                "kernel: AF_ALG unavailable ({})",
                c.f.kernel_hash_reason.as_deref().unwrap_or("refused")
            )
        }),
        ..RULE
    },
    Rule {
        keys: &[key!(pipeline.cipher)],
        when: |c| c.s.pipeline.cipher == CipherKind::Aes256Xts && !c.f.aes_instructions,
        grey: Some(|_| "no AES instructions on this CPU".into()),
        ..RULE
    },
    // The kernel's own page cache is held to cache.size by a memory
    // cgroup; where none can be made it is not limited, and said.
    Rule {
        keys: &[key!(kernel.limit_cache)],
        on: On::Kernel,
        when: |c| c.s.kernel.limit_cache && c.f.kernel_cache_limit_reason.is_some(),
        runs: Some(|e| e.kernel.limit_cache = false),
        notice: Some(|c| {
            format!(
                "the kernel's page cache is not limited to cache.size ({}): after the first pass every read hits, and page hit % is not comparable with the model's",
                c.f.kernel_cache_limit_reason.as_deref().unwrap_or_default()
            )
        }),
        grey: Some(|c| c.f.kernel_cache_limit_reason.clone().unwrap_or_default()),
        ..RULE
    },
    // The scheduler's autogroups are turned for both targets, as root on a
    // kernel that has them; elsewhere left as they are, and said.
    Rule {
        keys: &[key!(kernel.autogroup)],
        when: |c| c.s.kernel.autogroup.is_some() && c.f.autogroup_reason.is_some(),
        runs: Some(|e| e.kernel.autogroup = None),
        notice: Some(|c| {
            format!(
                "the scheduler's autogroups are left as they are ({})",
                c.f.autogroup_reason.as_deref().unwrap_or_default()
            )
        }),
        grey: Some(|c| c.f.autogroup_reason.clone().unwrap_or_default()),
        ..RULE
    },
    Rule {
        keys: &[key!(cache.size)],
        on: On::Kernel,
        when: |c| !c.e.kernel.limit_cache,
        grey: Some(|_| {
            "the kernel's page cache is not limited (kernel.limit_cache off or impossible here)"
                .into()
        }),
        inert: true,
        ..RULE
    },
    // A lab kernel's switches flip its queues between bound and unbound;
    // the kernel never runs its post-read work inline.
    Rule {
        keys: &[key!(workers.mode)],
        on: On::Kernel,
        when: |c| c.f.kernel_switches && c.e.workers.mode == WorkerMode::Inline,
        runs: Some(|e| e.workers.mode = WorkerMode::Unbound),
        notice: Some(|_| {
            "the kernel always queues its post-read work: inline runs as unbound (6.1's fscrypt queue)".into()
        }),
        ..RULE
    },
    Rule {
        keys: &[key!(workers.verify_mode)],
        on: On::Kernel,
        when: |c| c.f.kernel_switches && c.e.workers.verify_mode == VerifyMode::Inline,
        runs: Some(|e| e.workers.verify_mode = VerifyMode::Bound),
        notice: Some(|_| {
            "the kernel always queues its post-read work: inline runs as bound (6.1's fs-verity queue)".into()
        }),
        ..RULE
    },
    Rule {
        keys: &[key!(workload.target)],
        when: |c| c.f.kernel_target_reason.is_some(),
        grey: Some(|c| c.f.kernel_target_reason.clone().unwrap_or_default()),
        ..RULE
    },
];

/// Works out what `s` runs as on a machine with `f`, reading a file on
/// `fs`. Impossible combinations (a synchronous reader that does not sleep
/// as iowait) are errors; everything else falls back with a reason.
pub fn resolve(s: &Settings, f: &Features, fs: &DataFs) -> Result<Resolution, EngineError> {
    if let Some(c) = CONFLICTS.iter().find(|c| (c.when)(s)) {
        return Err(EngineError::Conflict {
            key: c.key,
            value: format!("\"{}\"", s.get(c.key).unwrap_or_default()),
            other: format!("{} = \"{}\"", c.other, s.get(c.other).unwrap_or_default()),
            reason: c.reason,
        });
    }
    let kernel = s.workload.target == Target::Kernel;
    if kernel && let Some(why) = &f.kernel_target_reason {
        let why = why.trim_start_matches("workload.target = \"kernel\" ");
        return Err(super::KernelError::Unavailable(why.to_string()).into());
    }
    let on = if kernel { On::Kernel } else { On::Model };
    // A key of one target only does nothing on the other (its scope in the
    // settings table); the rules about it there do not apply.
    let out_of_scope = |key: &str| {
        crate::settings::key_info(key).is_some_and(|k| match k.scope {
            Scope::Both => false,
            Scope::Model(_) => kernel,
            Scope::Switch(_) => kernel && !f.kernel_switches,
            Scope::Kernel => !kernel,
        })
    };
    let applies = |r: &Rule| {
        (r.on == On::Both || r.on == on) && !r.keys.iter().any(|k| out_of_scope(k.name()))
    };

    let mut e = s.clone();
    let mut fallbacks = Vec::new();
    for rule in RULES.iter().filter(|r| applies(r)) {
        let Some(runs) = rule.runs else { continue };
        let holds = (rule.when)(&Ctx { s, e: &e, f, fs });
        if !holds {
            continue;
        }
        let before: Vec<Option<String>> = rule.keys.iter().map(|k| e.get(k.name())).collect();
        runs(&mut e);
        let ctx = Ctx { s, e: &e, f, fs };
        for (k, was) in rule.keys.iter().zip(before) {
            if e.get(k.name()) != was
                && let Some(notice) = rule.notice
            {
                fallbacks.push(Fallback {
                    key: *k,
                    reason: notice(&ctx),
                });
            }
        }
    }

    let ctx = Ctx { s, e: &e, f, fs };
    let mut limits: Vec<(&'static str, String)> = Vec::new();
    let mut inert: Vec<&'static str> = Vec::new();
    for k in crate::settings::KEYS
        .iter()
        .filter(|k| out_of_scope(k.key.name()))
    {
        let why = match k.scope {
            Scope::Model(why) | Scope::Switch(why) => why,
            _ => "used with workload.target = kernel",
        };
        limits.push((k.key.name(), why.to_string()));
        inert.push(k.key.name());
    }
    for rule in RULES.iter().filter(|r| applies(r)) {
        let Some(grey) = rule.grey else { continue };
        if !(rule.when)(&ctx) {
            continue;
        }
        let why = grey(&ctx);
        for k in rule.keys.iter().map(|k| k.name()) {
            limits.push((k, why.clone()));
            if rule.inert && !inert.contains(&k) {
                inert.push(k);
            }
        }
    }
    // The readers' rings, from the machine's features.
    let sleeps = e.workload.sleep != SleepMode::Poll;
    let ring = Ring {
        tuned: sleeps && f.uring_defer_taskrun,
        enter_no_iowait: e.workload.sleep == SleepMode::Plain && f.no_iowait,
    };
    if sleeps && !f.uring_defer_taskrun && e.workload.engine == EngineKind::Uring && f.io_uring {
        fallbacks.push(Fallback {
            key: crate::key!(workload.engine),
            reason: "this kernel's io_uring has no IORING_SETUP_DEFER_TASKRUN (Linux 6.1+): each reader's ring posts completions by interrupt (IPI) rather than when the reader waits, as fio's would".into(),
        });
    }
    Ok(Resolution {
        path: ReadPath::of(&e),
        effective: Effective { settings: e, ring },
        fallbacks,
        limits,
        inert,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readers_rings_follow_the_machine() {
        let s = Settings::default();
        let r = resolve(&s, &all(), &DataFs::capable()).unwrap();
        assert_eq!(
            r.effective.ring(),
            Ring {
                tuned: true,
                enter_no_iowait: false
            }
        );
        assert!(r.fallbacks.is_empty(), "{:?}", r.fallbacks);
        // A kernel without DEFER_TASKRUN: the plain ring, said once.
        let old = Features {
            uring_defer_taskrun: false,
            ..all()
        };
        let r = resolve(&s, &old, &DataFs::capable()).unwrap();
        assert!(!r.effective.ring().tuned);
        assert!(
            r.fallbacks
                .iter()
                .any(|f| f.key == "workload.engine" && f.reason.contains("DEFER_TASKRUN")),
            "{:?}",
            r.fallbacks
        );
        // plain waits pass NO_IOWAIT only where the kernel has it.
        let plain = with(&[("workload.sleep", "plain")]);
        let r = resolve(&plain, &all(), &DataFs::capable()).unwrap();
        assert!(r.effective.ring().enter_no_iowait);
        // A polling reader never waits in the kernel: the default ring.
        let poll = with(&[("workload.sleep", "poll")]);
        let r = resolve(&poll, &old, &DataFs::capable()).unwrap();
        assert!(!r.effective.ring().tuned && !r.effective.ring().enter_no_iowait);
        assert!(r.fallbacks.iter().all(|f| f.key != "workload.engine"));
    }

    #[test]
    fn every_rule_names_settings_of_the_table() {
        for r in RULES {
            for k in r.keys {
                assert_eq!(k.setting().key, k.name());
            }
        }
    }

    fn all() -> Features {
        Features {
            io_uring: true,
            io_uring_reason: None,
            no_iowait: true,
            uring_defer_taskrun: true,
            aes_instructions: true,
            sha_instructions: true,
            vaes: true,
            schedstat: true,
            highpri: true,
            highpri_reason: None,
            kernel_verity: false,
            kernel_target_reason: None,
            kernel_cipher_reason: None,
            kernel_hash_reason: None,
            kernel_xts_driver: None,
            kernel_sha256_driver: None,
            kernel_cache_limit_reason: None,
            autogroup_reason: None,
            kernel_switches: false,
            kernel_affinity_scopes: true,
        }
    }

    #[test]
    fn a_kernel_without_affinity_scopes_leaves_its_scope_alone_and_says_why() {
        let s = with(&[
            ("workload.target", "kernel"),
            ("kernel.affinity_scope", "cpu"),
        ]);
        let fs = DataFs::capable();
        let r = resolve(&s, &all(), &fs).unwrap();
        assert_eq!(
            r.effective.kernel.affinity_scope, s.kernel.affinity_scope,
            "6.5+: the knob is turned"
        );
        assert_eq!(r.limit("kernel.affinity_scope"), None);
        let old = Features {
            kernel_affinity_scopes: false,
            ..all()
        };
        let r = resolve(&s, &old, &fs).unwrap();
        assert_eq!(r.effective.kernel.affinity_scope, None);
        assert!(
            r.notices()
                .contains(&format!("kernel.affinity_scope: {NO_SCOPES}")),
            "{:?}",
            r.notices()
        );
        assert!(r.inert.contains(&"kernel.affinity_scope"));
        // On the model the kernel's scopes are not asked about.
        let model = with(&[("kernel.affinity_scope", "cpu")]);
        let r = resolve(&model, &old, &fs).unwrap();
        assert!(r.fallbacks.is_empty(), "{:?}", r.fallbacks);
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
        assert_eq!(*r.effective, s);
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
        let keys: Vec<&str> = r.fallbacks.iter().map(|f| f.key.name()).collect();
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
    fn a_kernel_with_lab_switches_takes_the_queue_keys_on_the_kernel_target() {
        let mut s = Settings::default();
        s.workload.target = Target::Kernel;
        s.workload.sleep = SleepMode::Plain;
        let fs = DataFs::capable();
        let stock = Features {
            no_iowait: false,
            ..all()
        };
        let r = resolve(&s, &stock, &fs).unwrap();
        for k in [
            "workers.mode",
            "workers.verify_mode",
            "workers.highpri",
            "workers.max_active",
        ] {
            assert!(r.inert.contains(&k), "{k}");
            assert!(r.limit(k).unwrap().contains("lab build --switches"), "{k}");
        }
        // 6.1 has no NO_IOWAIT: plain falls back to iowait.
        assert_eq!(r.effective.workload.sleep, SleepMode::Iowait);
        let switchable = Features {
            kernel_switches: true,
            ..stock
        };
        s.workers.mode = WorkerMode::Inline;
        let r = resolve(&s, &switchable, &fs).unwrap();
        for k in [
            "workers.mode",
            "workers.verify_mode",
            "workers.highpri",
            "workers.max_active",
        ] {
            assert!(!r.inert.contains(&k), "{k}");
        }
        // The switch makes the plain wait; inline is not the kernel's.
        assert_eq!(r.effective.workload.sleep, SleepMode::Plain);
        assert_eq!(r.effective.workers.mode, WorkerMode::Unbound);
        assert!(r.fallbacks.iter().any(|f| f.key == "workers.mode"));
        // The model is not the kernel: its keys are its own either way.
        s.workload.target = Target::Model;
        let r = resolve(&s, &switchable, &fs).unwrap();
        assert_eq!(r.effective.workers.mode, WorkerMode::Inline);
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

    /// Autogroups are turned where they can be; elsewhere left alone, and
    /// said, on either target.
    #[test]
    fn autogroups_are_left_alone_where_they_cannot_be_turned() {
        for target in ["model", "kernel"] {
            let s = with(&[
                ("workload.target", target),
                ("kernel.autogroup", "0"),
                ("pipeline.verity", "false"),
            ]);
            let r = resolve(&s, &all(), &DataFs::capable()).unwrap();
            assert_eq!(r.effective.kernel.autogroup, Some(0));
            let f = Features {
                autogroup_reason: Some("needs root".into()),
                ..all()
            };
            let r = resolve(&s, &f, &DataFs::capable()).unwrap();
            assert_eq!(r.effective.kernel.autogroup, None);
            let n = r.notices();
            assert!(
                n.iter().any(|n| n.starts_with(
                    "kernel.autogroup: the scheduler's autogroups are left as they are (needs root)"
                )),
                "{n:?}"
            );
        }
    }

    /// The kernel's page cache is held to cache.size where a memory
    /// cgroup can be made; elsewhere it is not limited, and said.
    #[test]
    fn the_kernel_cache_is_limited_where_a_memory_cgroup_can_be_made() {
        let s = with(&[
            ("workload.target", "kernel"),
            ("cache.size", "16M"),
            ("pipeline.verity", "false"),
        ]);
        let r = resolve(&s, &all(), &DataFs::capable()).unwrap();
        assert!(r.effective.kernel.limit_cache);
        assert!(r.fallbacks.is_empty(), "{:?}", r.fallbacks);
        assert_eq!(r.limit("cache.size"), None);
        assert!(!r.inert.contains(&"cache.size"));
        let f = Features {
            kernel_cache_limit_reason: Some("no memory cgroup here".into()),
            ..all()
        };
        let r = resolve(&s, &f, &DataFs::capable()).unwrap();
        assert!(!r.effective.kernel.limit_cache);
        let n = r.notices();
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].starts_with("kernel.limit_cache: the kernel's page cache is not limited")
                && n[0].contains("no memory cgroup here"),
            "{n:?}"
        );
        assert!(r.inert.contains(&"cache.size"));
        // Turned off: no notice, cache.size does nothing.
        let off = with(&[
            ("workload.target", "kernel"),
            ("kernel.limit_cache", "false"),
            ("pipeline.verity", "false"),
        ]);
        let r = resolve(&off, &f, &DataFs::capable()).unwrap();
        assert!(r.fallbacks.is_empty());
        assert!(r.inert.contains(&"cache.size"));
        // The model's cache.size is its own, whatever the machine.
        let r = resolve(&with(&[("cache.size", "16M")]), &f, &DataFs::capable()).unwrap();
        assert!(r.fallbacks.is_empty());
        assert!(!r.inert.contains(&"cache.size"));
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

    #[test]
    fn no_af_alg_means_readpaths_own_cipher_and_hash_with_a_notice() {
        let s = with(&[("pipeline.cipher", "kernel"), ("pipeline.hash", "kernel")]);
        // Where AF_ALG works, both run as asked.
        let r = resolve(&s, &all(), &DataFs::capable()).unwrap();
        assert_eq!(r.effective.pipeline.cipher, CipherKind::Kernel);
        assert_eq!(r.effective.pipeline.hash, HashKind::Kernel);
        assert!(r.fallbacks.is_empty(), "{:?}", r.fallbacks);
        let f = Features {
            kernel_cipher_reason: Some(
                "AF_ALG skcipher xts(aes): socket(AF_ALG): EAFNOSUPPORT".into(),
            ),
            kernel_hash_reason: Some("AF_ALG hash sha256: bind: ENOENT".into()),
            ..all()
        };
        let r = resolve(&s, &f, &DataFs::capable()).unwrap();
        assert_eq!(r.effective.pipeline.cipher, CipherKind::Aes256Xts);
        assert_eq!(r.effective.pipeline.hash, HashKind::Software);
        let n = r.notices();
        assert_eq!(n.len(), 2, "{n:?}");
        assert!(n[0].starts_with("pipeline.cipher: the kernel's xts(aes) is unavailable through AF_ALG (AF_ALG skcipher xts(aes): socket(AF_ALG): EAFNOSUPPORT)"), "{}", n[0]);
        assert!(n[1].starts_with("pipeline.hash: the kernel's sha256 is unavailable through AF_ALG (AF_ALG hash sha256: bind: ENOENT)"), "{}", n[1]);
        assert!(r.limit("pipeline.cipher").unwrap().contains("EAFNOSUPPORT"));
        // Off stages need nothing.
        let off = with(&[
            ("pipeline.cipher", "kernel"),
            ("pipeline.hash", "kernel"),
            ("pipeline.decrypt", "false"),
            ("pipeline.verity", "false"),
        ]);
        let r = resolve(&off, &f, &DataFs::capable()).unwrap();
        assert!(r.fallbacks.is_empty(), "{:?}", r.fallbacks);
        assert_eq!(r.limit("pipeline.hash"), Some("verity is off"));
        // The kernel target reads the AES-256-XTS file whatever AF_ALG says.
        let k = with(&[("pipeline.cipher", "kernel"), ("workload.target", "kernel")]);
        let r = resolve(&k, &f, &DataFs::capable()).unwrap();
        assert_eq!(r.effective.pipeline.cipher, CipherKind::Kernel);
        assert!(
            r.limit("pipeline.cipher")
                .unwrap()
                .contains("kernel read the same file")
        );
        let mut e = r.effective.settings().clone();
        e.pipeline.verity = false;
        let label = super::super::stages::Plan::label(&e);
        assert!(label.contains("fscrypt aes-256-xts"), "{label}");
    }

    #[test]
    fn an_era_before_6_5_makes_the_affinity_scope_inert() {
        let s = with(&[("workers.kernel_era", "6.1")]);
        let r = resolve(&s, &all(), &DataFs::capable()).unwrap();
        assert_eq!(
            r.limit("workers.affinity_scope"),
            Some("kernel 6.1 has no affinity scopes (v6.5): one unbound pool per NUMA node")
        );
        assert!(r.inert.contains(&"workers.affinity_scope"));
        let r = resolve(&with(&[]), &all(), &DataFs::capable()).unwrap();
        assert_eq!(r.limit("workers.affinity_scope"), None);
    }
}
