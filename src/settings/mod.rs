//! The one validated description of a workload.
//!
//! Everything readpath does (which engine reads the file, how it waits, how
//! blocks flow through the decrypt and verify workers, what background load
//! competes with them) is decided by a [`Settings`] value, and this module is
//! the only place that builds one. Settings come from TOML sections
//! (`[workload]`, `[pipeline]`, `[workers]`, `[load]`), then from
//! `--set section.key=value` overrides, on top of defaults that mirror the
//! kernel's own read path: fscrypt decrypts on an unbound, high-priority
//! workqueue with one active work item per online CPU (`fscrypt_read_queue`),
//! fs-verity verifies on a bound, high-priority queue (`fsverity_read_queue`),
//! with AES-256-XTS, 4K blocks and no salt. The TOML path and the `--set` path
//! share one per-key setter, so a bad value gets the same message either way:
//! it names the key, the value as written and what is allowed, and for a file
//! it starts with `file:line:column`.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::crypto::CipherKind;

/// The page size; block and file sizes must be multiples of it.
pub const PAGE_SIZE: u64 = 4096;
/// Smallest `workload.block_size`.
pub const MIN_BLOCK_SIZE: u64 = 4096;
/// Largest `workload.block_size`.
pub const MAX_BLOCK_SIZE: u64 = 1 << 20;
/// Smallest `workload.file_size`.
pub const MIN_FILE_SIZE: u64 = 4096;
/// Largest `workload.file_size` (1T).
pub const MAX_FILE_SIZE: u64 = 1 << 40;
/// Largest readahead window (one bio of BIO_MAX_VECS 4 KiB pages).
pub const MAX_READ_AHEAD: u64 = 1 << 20;
/// Largest `workload.burst`.
pub const MAX_BURST: u64 = 1 << 30;
/// Largest `workload.queue_depth`.
pub const MAX_QUEUE_DEPTH: u32 = 1024;
/// Largest `workload.readers`.
pub const MAX_READERS: u32 = 256;
/// Largest `workload.rate_iops`.
pub const MAX_RATE_IOPS: u64 = 10_000_000;
/// Largest CPU number accepted before the machine is known (the kernel's
/// `CONFIG_NR_CPUS` tops out at 8192); defined in `sys` with the CPU-list
/// parser.
pub use crate::sys::MAX_CPU_NUMBER;
/// Longest `pipeline.salt`, in bytes (fs-verity's `FS_VERITY_MAX_SALT_SIZE`).
pub const MAX_SALT_BYTES: usize = 32;
/// Largest non-zero `workers.max_active` (the kernel's `WQ_MAX_ACTIVE`).
pub const MAX_MAX_ACTIVE: u32 = 512;
/// Largest `load.hogs`.
pub const MAX_HOGS: u32 = 256;

/// The sections of a settings file, in order.
pub const SECTIONS: &[&str] = &["workload", "pipeline", "workers", "cache", "load", "kernel"];
/// Largest `kernel.read_ahead_kb` (128 MiB).
pub const MAX_KERNEL_READ_AHEAD_KB: u32 = 128 << 10;
/// Longest `kernel.dir`, in bytes (the kernel's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// A set of named choices (the enums below and [`CipherKind`]).
trait Choice: Copy + PartialEq + 'static {
    fn choices() -> &'static [Self];
    fn choice_name(self) -> &'static str;

    fn allowed_list() -> String {
        Self::choices()
            .iter()
            .map(|c| c.choice_name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn lookup(s: &str) -> Option<Self> {
        Self::choices()
            .iter()
            .copied()
            .find(|c| c.choice_name().eq_ignore_ascii_case(s.trim()))
    }
}

impl Choice for CipherKind {
    fn choices() -> &'static [Self] {
        &CipherKind::ALL
    }
    fn choice_name(self) -> &'static str {
        self.name()
    }
}

macro_rules! setting_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in the order [`Self::next`] cycles through.
            pub const ALL: [$name; [$($text),+].len()] = [$($name::$variant),+];

            /// The string used in TOML and on the command line.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The next value in [`Self::ALL`] order, wrapping around.
            pub fn next(self) -> Self {
                let i = Self::ALL.iter().position(|&v| v == self).unwrap_or(0);
                Self::ALL[(i + 1) % Self::ALL.len()]
            }

            /// The previous value in [`Self::ALL`] order, wrapping around
            /// (what Alt+key steps to in the explorer).
            pub fn prev(self) -> Self {
                let i = Self::ALL.iter().position(|&v| v == self).unwrap_or(0);
                Self::ALL[(i + Self::ALL.len() - 1) % Self::ALL.len()]
            }
        }

        impl Choice for $name {
            fn choices() -> &'static [Self] {
                &Self::ALL
            }
            fn choice_name(self) -> &'static str {
                self.name()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.name())
            }
        }

        impl FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                <Self as Choice>::lookup(s).ok_or_else(|| {
                    format!("{s:?} is not one of {}", <Self as Choice>::allowed_list())
                })
            }
        }
    };
}

setting_enum! {
    /// What runs the post-read work (`workload.target`).
    Target {
        /// readpath's model: its own page cache, queues and workers.
        Model => "model",
        /// The running kernel: a file on an ext4 with `encrypt`, read through
        /// the kernel's own fscrypt (and fs-verity where it has it).
        Kernel => "kernel",
    }
}

setting_enum! {
    /// The kernel's `workqueue.default_affinity_scope` as `kernel.affinity_scope`
    /// sets it; `default` leaves it as the machine has it.
    #[derive(Default)]
    KernelScope {
        /// Not changed.
        #[default]
        Default => "default",
        /// Each CPU its own pod.
        Cpu => "cpu",
        /// A pod per core.
        Smt => "smt",
        /// A pod per last-level cache.
        Cache => "cache",
        /// A pod per NUMA node.
        Numa => "numa",
        /// One pod of every CPU.
        System => "system",
    }
}

setting_enum! {
    /// How reads are issued.
    EngineKind {
        /// io_uring, `queue_depth` reads in flight per reader.
        Uring => "uring",
        /// Blocking `pread`, one read at a time per reader.
        Sync => "sync",
    }
}

setting_enum! {
    /// How a reader waits for a read to complete.
    SleepMode {
        /// Sleep counted as iowait (`io_schedule`), as the page cache does.
        Iowait => "iowait",
        /// Plain interruptible sleep, not counted as iowait.
        Plain => "plain",
        /// Busy-poll for the completion.
        Poll => "poll",
    }
}

setting_enum! {
    /// Where a device completion queues the post-read work
    /// (`workload.completion`).
    Completion {
        /// In a context standing for the interrupt: a SCHED_FIFO thread on
        /// the CPU where the completion lands, as the kernel's bio end_io.
        Irq => "irq",
        /// In the reader that submitted it, a nice-0 thread (threaded IRQs).
        Thread => "thread",
    }
}

setting_enum! {
    /// Which offsets are read.
    Pattern {
        /// Uniformly random block-aligned offsets.
        Random => "random",
        /// Consecutive blocks, wrapping at the end of the file.
        Sequential => "sequential",
        /// Runs of `workload.burst` consecutive bytes, each from a random
        /// block: an app start reading its APK, dex and .so files.
        Bursts => "bursts",
    }
}

setting_enum! {
    /// Where the decrypt stage (or the only stage, when one is on) runs.
    WorkerMode {
        /// In the reader's own context, right after the read completes.
        Inline => "inline",
        /// On a per-CPU (bound) worker queue, on the CPU that completed the read.
        Bound => "bound",
        /// On an unbound worker pool that may run on any CPU.
        Unbound => "unbound",
    }
}

setting_enum! {
    /// Where the verify stage runs when decrypt is also on.
    VerifyMode {
        /// On the same queue as decrypt, in the same work item.
        Same => "same",
        /// In the context that finished decrypting.
        Inline => "inline",
        /// On its own per-CPU (bound) worker queue.
        Bound => "bound",
        /// On its own unbound worker pool.
        Unbound => "unbound",
    }
}

setting_enum! {
    /// Which CPUs an unbound queue runs a work item on (`workers.affinity_scope`,
    /// the kernel's `workqueue.default_affinity_scope`, v6.5+): those of the
    /// queueing CPU's pod.
    AffinityScope {
        /// Each CPU is its own pod.
        Cpu => "cpu",
        /// A pod per core: the CPU's SMT siblings.
        Smt => "smt",
        /// A pod per last-level cache (the kernel's default).
        Cache => "cache",
        /// A pod per NUMA node.
        Numa => "numa",
        /// One pod of every CPU (the kernel before v6.5).
        System => "system",
    }
}

setting_enum! {
    /// What a page-cache miss reads from (`cache.device`).
    CacheDevice {
        /// The real device: every bio is an O_DIRECT read of the ciphertext file.
        Disk => "disk",
        /// A device with almost no latency: bios are buffered reads of the
        /// ciphertext file, served from the kernel's own cache of it.
        Memory => "memory",
    }
}

/// `[workload]`: the read workload itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Workload {
    /// What does the post-read work: the model or the running kernel.
    pub target: Target,
    pub engine: EngineKind,
    pub sleep: SleepMode,
    /// Open the file with `O_DIRECT`.
    pub direct: bool,
    pub pattern: Pattern,
    /// Bytes per read.
    pub block_size: u64,
    /// Reads in flight per reader (io_uring).
    pub queue_depth: u32,
    /// Reads gathered before one submission (io_uring); 1 = each read is
    /// submitted as soon as its buffer is free (fio's `iodepth_batch_submit`).
    pub submit_batch: u32,
    /// Reader threads.
    pub readers: u32,
    /// Target reads per second over all readers; 0 = unlimited.
    pub rate_iops: u64,
    /// CPUs the readers are pinned to; empty = no pinning. With
    /// `completion = irq`, also where completions land.
    pub reader_cpus: Vec<usize>,
    /// Where device completions queue the post-read work.
    pub completion: Completion,
    /// Size of the file read, in bytes.
    pub file_size: u64,
    /// Bytes of one sequential run of `pattern = "bursts"`.
    pub burst: u64,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            target: Target::Model,
            engine: EngineKind::Uring,
            sleep: SleepMode::Iowait,
            direct: false,
            pattern: Pattern::Random,
            block_size: 4096,
            queue_depth: 1,
            submit_batch: 1,
            readers: 1,
            rate_iops: 0,
            reader_cpus: Vec::new(),
            completion: Completion::Thread,
            file_size: 256 << 20,
            burst: 1 << 20,
        }
    }
}

/// `[pipeline]`: the post-read stages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pipeline {
    /// Decrypt every block (fscrypt).
    pub decrypt: bool,
    pub cipher: CipherKind,
    /// Verify every block against the Merkle tree (fs-verity).
    pub verity: bool,
    /// Merkle tree salt; serialized as a hex string.
    #[serde(with = "hex_bytes")]
    pub salt: Vec<u8>,
    /// 0 = off, else flip a byte in every Nth read.
    pub corrupt_every: u64,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline {
            decrypt: true,
            cipher: CipherKind::Aes256Xts,
            verity: true,
            salt: Vec::new(),
            corrupt_every: 0,
        }
    }
}

/// `[workers]`: the worker queues the stages run on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Workers {
    pub mode: WorkerMode,
    pub verify_mode: VerifyMode,
    /// High-priority workers (`WQ_HIGHPRI`).
    pub highpri: bool,
    /// 0 = number of online CPUs, else the unbound pool's limit.
    pub max_active: u32,
    /// The pods unbound queues run work in.
    pub affinity_scope: AffinityScope,
}

impl Default for Workers {
    fn default() -> Self {
        Workers {
            mode: WorkerMode::Unbound,
            verify_mode: VerifyMode::Bound,
            highpri: true,
            max_active: 0,
            affinity_scope: AffinityScope::Cache,
        }
    }
}

/// `[cache]`: the model's page cache, where the kernel decides whether a
/// read costs post-read work at all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cache {
    /// Bytes of plaintext pages the cache may hold; None = a quarter of
    /// `workload.file_size` ("auto"), 0 = every read misses.
    pub size: Option<u64>,
    /// Largest readahead window in bytes (`read_ahead_kb`); 0 = off.
    pub read_ahead: u64,
    /// What a miss reads from.
    pub device: CacheDevice,
    /// Dropped (file and tree) whenever the workload starts or a setting
    /// is applied: every configuration starts cold, as an app start after
    /// `echo 3 > /proc/sys/vm/drop_caches`.
    pub cold_start: bool,
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            size: None,
            read_ahead: 128 << 10,
            device: CacheDevice::Disk,
            cold_start: false,
        }
    }
}

/// `[load]`: competing background load (none by default).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Load {
    /// CPU-bound background threads.
    pub hogs: u32,
    /// Nice value of the hog threads.
    pub hog_nice: i32,
}

/// `[kernel]`: the real kernel with `workload.target = "kernel"`: where
/// its file lives, and the system knobs readpath turns (each put back on
/// exit; `default` / empty = not changed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Kernel {
    /// A directory on a filesystem with `encrypt`; empty = an ext4 image
    /// readpath makes and loop-mounts under its data dir (root).
    pub dir: String,
    /// `/sys/module/workqueue/parameters/default_affinity_scope` (global).
    pub affinity_scope: KernelScope,
    /// `/sys/devices/virtual/workqueue/cpumask`; empty = not changed.
    pub unbound_cpus: Vec<usize>,
    /// The file's block device's `queue/read_ahead_kb`; None = not changed.
    pub read_ahead_kb: Option<u32>,
    /// The file's block device's `queue/rq_affinity` (0, 1, 2); None = not changed.
    pub rq_affinity: Option<u8>,
    /// Follow the kernel's post-read queues and block requests through
    /// their tracepoints (off: what tracing costs can be measured).
    pub trace: bool,
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel {
            dir: String::new(),
            affinity_scope: KernelScope::Default,
            unbound_cpus: Vec::new(),
            read_ahead_kb: None,
            rq_affinity: None,
            trace: true,
        }
    }
}

/// A complete, validated workload description.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    pub workload: Workload,
    pub pipeline: Pipeline,
    pub workers: Workers,
    pub cache: Cache,
    pub load: Load,
    pub kernel: Kernel,
}

mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        hex::decode(&s).map_err(serde::de::Error::custom)
    }
}

/// One setting key, for `--help`, the TUI and error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyInfo {
    /// `section.key`.
    pub key: &'static str,
    /// The allowed values, as error messages quote them.
    pub allowed: &'static str,
    /// One line saying what the key does.
    pub help: &'static str,
}

/// Every setting key with a one-line description and the allowed values, in
/// section order (used by --help, the TUI and error messages).
pub const KEYS: &[KeyInfo] = &[
    KeyInfo {
        key: "workload.target",
        allowed: "model, kernel",
        help: "what does the post-read work: readpath's model, or the running kernel's own fscrypt and fs-verity on a real ext4 file",
    },
    KeyInfo {
        key: "workload.engine",
        allowed: "uring, sync",
        help: "how reads are issued: io_uring, or blocking pread",
    },
    KeyInfo {
        key: "workload.sleep",
        allowed: "iowait, plain, poll",
        help: "how a reader waits for a read: sleep as iowait, plain sleep, or busy-poll",
    },
    KeyInfo {
        key: "workload.direct",
        allowed: "true, false",
        help: "open the file with O_DIRECT (bypass the page cache)",
    },
    KeyInfo {
        key: "workload.pattern",
        allowed: "random, sequential, bursts",
        help: "which blocks are read: random offsets, one after another, or runs of workload.burst from random offsets",
    },
    KeyInfo {
        key: "workload.block_size",
        allowed: "a multiple of 4096 between 4K and 1M",
        help: "bytes per read, also the decrypt and verify unit",
    },
    KeyInfo {
        key: "workload.queue_depth",
        allowed: "1..=1024",
        help: "reads in flight per reader (io_uring)",
    },
    KeyInfo {
        key: "workload.submit_batch",
        allowed: "1..=1024 (1 = submit each read at once, as fio does by default)",
        help: "reads gathered before one io_uring submission (fio's iodepth_batch_submit)",
    },
    KeyInfo {
        key: "workload.readers",
        allowed: "1..=256",
        help: "reader threads",
    },
    KeyInfo {
        key: "workload.rate_iops",
        allowed: "0..=10000000 (0 = unlimited)",
        help: "target reads per second over all readers",
    },
    KeyInfo {
        key: "workload.reader_cpus",
        allowed: "[] (no pinning), a list of CPU numbers like [0, 1], or a CPU list like \"0-3,6\"",
        help: "CPUs the readers are pinned to, round-robin (and where completions land)",
    },
    KeyInfo {
        key: "workload.completion",
        allowed: "irq, thread",
        help: "where a device completion queues the post-read work: an IRQ-like SCHED_FIFO thread per CPU, or the reader (threaded)",
    },
    KeyInfo {
        key: "workload.file_size",
        allowed: "a multiple of 4096 between 4K and 1T",
        help: "size of the file read",
    },
    KeyInfo {
        key: "workload.burst",
        allowed: "a multiple of 4096 from 4K to 1G",
        help: "bytes of one sequential run of pattern \"bursts\" (an app start reading a file), rounded up to whole reads",
    },
    KeyInfo {
        key: "pipeline.decrypt",
        allowed: "true, false",
        help: "decrypt every block read (fscrypt)",
    },
    KeyInfo {
        key: "pipeline.cipher",
        allowed: "aes-256-xts, aes-256-xts-soft, adiantum",
        help: "contents encryption mode used by decrypt",
    },
    KeyInfo {
        key: "pipeline.verity",
        allowed: "true, false",
        help: "verify every block read against a Merkle tree (fs-verity)",
    },
    KeyInfo {
        key: "pipeline.salt",
        allowed: "a hex string of 0..=32 bytes (an even number of hex digits)",
        help: "salt hashed into every Merkle tree block",
    },
    KeyInfo {
        key: "pipeline.corrupt_every",
        allowed: ">= 0 (0 = off, N = every Nth read)",
        help: "flip a byte in every Nth read, to exercise verification failures",
    },
    KeyInfo {
        key: "workers.mode",
        allowed: "inline, bound, unbound",
        help: "where decrypt runs (or the only stage, when one is on)",
    },
    KeyInfo {
        key: "workers.verify_mode",
        allowed: "same, inline, bound, unbound",
        help: "where verify runs when decrypt is on too; same = decrypt's queue",
    },
    KeyInfo {
        key: "workers.highpri",
        allowed: "true, false",
        help: "high-priority workers (WQ_HIGHPRI)",
    },
    KeyInfo {
        key: "workers.max_active",
        allowed: "0..=512 (0 = number of online CPUs)",
        help: "work items the unbound pool runs at once",
    },
    KeyInfo {
        key: "workers.affinity_scope",
        allowed: "cpu, smt, cache, numa, system",
        help: "unbound work runs on the queueing CPU's pod: its CPU, core, last-level cache, node, or any CPU",
    },
    KeyInfo {
        key: "cache.size",
        allowed: "\"auto\" (a quarter of workload.file_size) or a multiple of 4096 from 0 to 1T (0 = every read misses)",
        help: "plaintext the page cache holds; a hit is a copy, a miss a bio to decrypt and verify",
    },
    KeyInfo {
        key: "cache.read_ahead",
        allowed: "a multiple of 4096 from 0 to 1M (0 = no readahead)",
        help: "largest readahead window of a sequential stream (read_ahead_kb)",
    },
    KeyInfo {
        key: "cache.device",
        allowed: "disk, memory",
        help: "what a miss reads: the device (O_DIRECT), or the file's own kernel cache (no latency)",
    },
    KeyInfo {
        key: "cache.cold_start",
        allowed: "true, false",
        help: "drop the page cache (file and tree) whenever the workload starts or a setting is applied",
    },
    KeyInfo {
        key: "load.hogs",
        allowed: "0..=256",
        help: "CPU-bound background threads competing with the workers",
    },
    KeyInfo {
        key: "load.hog_nice",
        allowed: "-20..=19",
        help: "nice value of the hog threads",
    },
    KeyInfo {
        key: "kernel.dir",
        allowed: "\"\" (an ext4 image readpath makes and loop-mounts under its data dir, as root) or an absolute path of a directory on a filesystem with the encrypt feature",
        help: "where the kernel target's files live (workload.target = kernel)",
    },
    KeyInfo {
        key: "kernel.affinity_scope",
        allowed: "default (not changed), cpu, smt, cache, numa, system",
        help: "the kernel's workqueue.default_affinity_scope: where fscrypt's unbound queue runs work (global: every unbound queue of the machine)",
    },
    KeyInfo {
        key: "kernel.unbound_cpus",
        allowed: "default (not changed) or a CPU list like \"0-3,6\"",
        help: "the CPUs every unbound workqueue may run on (/sys/devices/virtual/workqueue/cpumask; global)",
    },
    KeyInfo {
        key: "kernel.read_ahead_kb",
        allowed: "default (not changed) or 0..=131072",
        help: "the kernel file's block device's read_ahead_kb (the kernel's readahead window)",
    },
    KeyInfo {
        key: "kernel.rq_affinity",
        allowed: "default (not changed), 0, 1 or 2",
        help: "the block device's rq_affinity: complete a request on the CPU that issued it (1: its cache group, 2: that CPU)",
    },
    KeyInfo {
        key: "kernel.trace",
        allowed: "true, false",
        help: "follow the kernel's post-read queues and block requests through their tracepoints (false: no queue figures, to measure what tracing costs)",
    },
];

/// The [`KeyInfo`] of `key` (`section.key`), if it is a setting.
pub fn key_info(key: &str) -> Option<&'static KeyInfo> {
    KEYS.iter().find(|k| k.key == key)
}

fn info(key: &str) -> &'static KeyInfo {
    key_info(key).unwrap_or(&KeyInfo {
        key: "",
        allowed: "",
        help: "",
    })
}

/// Keys whose values are strings: on the command line a bare word is taken
/// as the string even when it would also parse as another TOML value.
fn is_text_key(key: &str) -> bool {
    matches!(
        key,
        "workload.target"
            | "workload.engine"
            | "workload.sleep"
            | "workload.completion"
            | "workload.pattern"
            | "pipeline.cipher"
            | "pipeline.salt"
            | "workers.mode"
            | "workers.verify_mode"
            | "workers.affinity_scope"
            | "cache.size"
            | "cache.device"
            | "kernel.dir"
            | "kernel.affinity_scope"
            | "kernel.unbound_cpus"
    )
}

fn section_names(section: &str) -> Vec<&'static str> {
    KEYS.iter()
        .filter_map(|k| k.key.split_once('.'))
        .filter(|(s, _)| *s == section)
        .map(|(_, n)| n)
        .collect()
}

/// A change between two [`Settings`], as [`Settings::diff`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingChange {
    /// `section.key`.
    pub key: String,
    /// The old value, in [`Settings::get`] form.
    pub from: String,
    /// The new value, in [`Settings::get`] form.
    pub to: String,
}

impl SettingChange {
    /// Label for chart markers: `workers.mode: unbound -> bound`.
    pub fn label(&self) -> String {
        format!("{}: {} -> {}", self.key, self.from, self.to)
    }

    /// Like [`Self::label`] without the section (`mode: unbound -> bound`);
    /// every key name is unique across sections.
    pub fn short_label(&self) -> String {
        let name = self.key.split_once('.').map_or(&*self.key, |(_, n)| n);
        format!("{}: {} -> {}", name, self.from, self.to)
    }
}

/// Why settings could not be read, set or validated. `Display` is one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    /// A key that is not a setting.
    #[error("{}", unknown_message("setting", key, suggestion, allowed))]
    UnknownKey {
        /// The key as written (`section.key`, or a bare top-level key).
        key: String,
        /// The closest valid key, if one is close.
        suggestion: Option<String>,
        /// What is valid there, as a phrase ("valid keys in [workers] are ...").
        allowed: String,
    },
    /// A TOML table that is not a section.
    #[error("{}", unknown_message("section", section, suggestion, allowed))]
    UnknownSection {
        section: String,
        suggestion: Option<String>,
        allowed: String,
    },
    /// A value of the wrong type (a string where an integer belongs...).
    #[error("{key}: expected {expected}, got {got}")]
    WrongType {
        key: String,
        /// The value as written (TOML form).
        value: String,
        /// What was expected, including the allowed values.
        expected: String,
        /// The value with its type ("a boolean (true)", or a quoted string).
        got: String,
    },
    /// A number outside its range.
    #[error("{key} = {value} is out of range: allowed {allowed}")]
    OutOfRange {
        key: String,
        value: String,
        allowed: String,
    },
    /// A value of the right type that is not allowed.
    #[error("{key} = {value} is invalid: {reason}")]
    Invalid {
        key: String,
        value: String,
        /// The whole explanation, allowed values included.
        reason: String,
        allowed: String,
    },
    /// A `--set` argument that is not `section.key=value`.
    #[error("--set {spec:?}: {reason}")]
    BadOverride { spec: String, reason: String },
    /// The TOML parser's own error (syntax, duplicate keys).
    #[error("{}{message}", position_prefix(origin, at))]
    Parse {
        origin: String,
        /// 1-based line and column.
        at: Option<(usize, usize)>,
        message: String,
    },
    /// An error found in a file, with where it was found.
    #[error("{}{error}", position_prefix(origin, at))]
    Located {
        origin: String,
        /// 1-based line and column of the offending key or value.
        at: Option<(usize, usize)>,
        error: Box<SettingsError>,
    },
}

fn unknown_message(what: &str, name: &str, suggestion: &Option<String>, allowed: &str) -> String {
    match suggestion {
        Some(s) => format!("unknown {what} {name:?} (did you mean {s:?}?)"),
        None => format!("unknown {what} {name:?}: {allowed}"),
    }
}

fn position_prefix(origin: &str, at: &Option<(usize, usize)>) -> String {
    match at {
        Some((line, col)) => format!("{origin}:{line}:{col}: "),
        None => format!("{origin}: "),
    }
}

impl SettingsError {
    /// The key the error is about (`section.key`, or a section name).
    pub fn key(&self) -> Option<&str> {
        match self {
            SettingsError::UnknownKey { key, .. }
            | SettingsError::WrongType { key, .. }
            | SettingsError::OutOfRange { key, .. }
            | SettingsError::Invalid { key, .. } => Some(key),
            SettingsError::UnknownSection { section, .. } => Some(section),
            SettingsError::Located { error, .. } => error.key(),
            SettingsError::BadOverride { .. } | SettingsError::Parse { .. } => None,
        }
    }

    /// The offending value as written, where there is one.
    pub fn value(&self) -> Option<&str> {
        match self {
            SettingsError::WrongType { value, .. }
            | SettingsError::OutOfRange { value, .. }
            | SettingsError::Invalid { value, .. } => Some(value),
            SettingsError::Located { error, .. } => error.value(),
            _ => None,
        }
    }

    /// What is allowed instead, where that is known.
    pub fn allowed(&self) -> Option<&str> {
        match self {
            SettingsError::UnknownKey { allowed, .. }
            | SettingsError::UnknownSection { allowed, .. }
            | SettingsError::OutOfRange { allowed, .. }
            | SettingsError::Invalid { allowed, .. } => Some(allowed),
            SettingsError::WrongType { expected, .. } => Some(expected),
            SettingsError::Located { error, .. } => error.allowed(),
            _ => None,
        }
    }
}

/// 1-based line and column (in characters) of byte `offset` in `src`.
pub fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(src.len());
    while !src.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

// ---------------------------------------------------------------------------
// Values as written, shared by the TOML and --set paths.

#[derive(Debug, Clone, PartialEq)]
enum Val {
    Str(String),
    Int(i128),
    /// As written; never used numerically.
    Float(String),
    Bool(bool),
    Datetime(String),
    Array(Vec<Val>),
    Table(Vec<Entry>),
}

/// An error and the source span of the key or value it is about.
type SpannedError = (SettingsError, Option<Range<usize>>);

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    key: String,
    key_span: Option<Range<usize>>,
    value: Val,
    value_span: Option<Range<usize>>,
}

impl Val {
    fn from_de(v: &toml::de::DeValue<'_>) -> Val {
        use toml::de::DeValue;
        match v {
            DeValue::String(s) => Val::Str(s.to_string()),
            DeValue::Integer(i) => {
                Val::Int(i128::from_str_radix(i.as_str(), i.radix()).unwrap_or(i128::MAX))
            }
            DeValue::Float(f) => Val::Float(f.as_str().to_string()),
            DeValue::Boolean(b) => Val::Bool(*b),
            DeValue::Datetime(d) => Val::Datetime(d.to_string()),
            DeValue::Array(a) => Val::Array(a.iter().map(|e| Val::from_de(e.get_ref())).collect()),
            DeValue::Table(t) => Val::Table(entries_from_de(t)),
        }
    }

    fn from_toml(v: &toml::Value) -> Val {
        match v {
            toml::Value::String(s) => Val::Str(s.clone()),
            toml::Value::Integer(i) => Val::Int(i128::from(*i)),
            toml::Value::Float(f) => Val::Float(f.to_string()),
            toml::Value::Boolean(b) => Val::Bool(*b),
            toml::Value::Datetime(d) => Val::Datetime(d.to_string()),
            toml::Value::Array(a) => Val::Array(a.iter().map(Val::from_toml).collect()),
            toml::Value::Table(t) => Val::Table(entries_from_toml(t)),
        }
    }

    /// The value as it would be written in TOML.
    fn written(&self) -> String {
        match self {
            Val::Str(s) => toml_string(s),
            Val::Int(i) => i.to_string(),
            Val::Float(s) | Val::Datetime(s) => s.clone(),
            Val::Bool(b) => b.to_string(),
            Val::Array(items) => {
                let items: Vec<String> = items.iter().map(Val::written).collect();
                format!("[{}]", items.join(", "))
            }
            Val::Table(entries) => {
                let items: Vec<String> = entries
                    .iter()
                    .map(|e| format!("{} = {}", e.key, e.value.written()))
                    .collect();
                if items.is_empty() {
                    "{}".to_string()
                } else {
                    format!("{{ {} }}", items.join(", "))
                }
            }
        }
    }

    /// The value with its type, for "got ..." in messages.
    fn described(&self) -> String {
        let what = match self {
            Val::Str(_) => return self.written(),
            Val::Int(_) => "an integer",
            Val::Float(_) => "a float",
            Val::Bool(_) => "a boolean",
            Val::Datetime(_) => "a datetime",
            Val::Array(_) => "an array",
            Val::Table(_) => "a table",
        };
        format!("{what} ({})", self.written())
    }
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn entries_from_de(table: &toml::de::DeTable<'_>) -> Vec<Entry> {
    let mut entries: Vec<Entry> = table
        .iter()
        .map(|(k, v)| Entry {
            key: k.get_ref().to_string(),
            key_span: Some(k.span()),
            value: Val::from_de(v.get_ref()),
            value_span: Some(v.span()),
        })
        .collect();
    // Report the first problem in file order.
    entries.sort_by_key(|e| e.key_span.as_ref().map_or(0, |s| s.start));
    entries
}

fn entries_from_toml(table: &toml::Table) -> Vec<Entry> {
    table
        .iter()
        .map(|(k, v)| Entry {
            key: k.clone(),
            key_span: None,
            value: Val::from_toml(v),
            value_span: None,
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Suggestions for unknown names.

const CLOSE: f64 = 0.85;

fn closest<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let input = input.to_ascii_lowercase().replace('-', "_");
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&input, c), c))
        .filter(|(score, _)| *score >= CLOSE)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

fn unknown_key_error(key: &str) -> SettingsError {
    let (section, name) = key.split_once('.').unwrap_or(("", key));
    let section_ok = SECTIONS.contains(&section);
    let mut suggestion = None;
    if section_ok {
        suggestion = closest(name, section_names(section)).map(|n| format!("{section}.{n}"));
    }
    if suggestion.is_none() {
        // The right name in the wrong section, or no section at all.
        let lower = name.to_ascii_lowercase().replace('-', "_");
        suggestion = KEYS
            .iter()
            .find(|k| k.key.split_once('.').is_some_and(|(_, n)| n == lower))
            .map(|k| k.key.to_string());
    }
    if suggestion.is_none()
        && !section_ok
        && !section.is_empty()
        && let Some(s) = closest(section, SECTIONS.iter().copied())
    {
        suggestion = closest(name, section_names(s)).map(|n| format!("{s}.{n}"));
    }
    if suggestion.is_none() && section.is_empty() {
        // A bare key: the closest key name in any section.
        let names = KEYS.iter().filter_map(|k| k.key.split_once('.'));
        if let Some(n) = closest(name, names.clone().map(|(_, n)| n)) {
            suggestion = names
                .filter(|(_, m)| *m == n)
                .map(|(s, _)| format!("{s}.{n}"))
                .next();
        }
    }
    let allowed = if section_ok {
        format!(
            "valid keys in [{section}] are {}",
            section_names(section).join(", ")
        )
    } else {
        format!("settings live in sections {}", sections_list())
    };
    SettingsError::UnknownKey {
        key: key.to_string(),
        suggestion,
        allowed,
    }
}

fn sections_list() -> String {
    SECTIONS
        .iter()
        .map(|s| format!("[{s}]"))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------
// Per-kind value checks.

fn wrong_type(key: &str, v: &Val, expected: String) -> SettingsError {
    SettingsError::WrongType {
        key: key.to_string(),
        value: v.written(),
        expected,
        got: v.described(),
    }
}

fn int_in(key: &str, v: &Val, lo: i128, hi: i128) -> Result<i128, SettingsError> {
    let allowed = info(key).allowed;
    match v {
        Val::Int(n) if (lo..=hi).contains(n) => Ok(*n),
        Val::Int(n) => Err(SettingsError::OutOfRange {
            key: key.to_string(),
            value: n.to_string(),
            allowed: allowed.to_string(),
        }),
        _ => Err(wrong_type(key, v, format!("an integer {allowed}"))),
    }
}

fn int_u32(key: &str, v: &Val, lo: u32, hi: u32) -> Result<u32, SettingsError> {
    let n = int_in(key, v, lo.into(), hi.into())?;
    Ok(u32::try_from(n).unwrap_or(hi))
}

fn int_u64(key: &str, v: &Val, lo: u64, hi: u64) -> Result<u64, SettingsError> {
    let n = int_in(key, v, lo.into(), hi.into())?;
    Ok(u64::try_from(n).unwrap_or(hi))
}

fn boolean(key: &str, v: &Val) -> Result<bool, SettingsError> {
    match v {
        Val::Bool(b) => Ok(*b),
        _ => Err(wrong_type(key, v, "true or false".to_string())),
    }
}

fn choice<T: Choice>(key: &str, v: &Val) -> Result<T, SettingsError> {
    let allowed = T::allowed_list();
    let Val::Str(s) = v else {
        return Err(wrong_type(key, v, format!("one of {allowed}")));
    };
    T::lookup(s).ok_or_else(|| {
        let mut reason = format!("allowed {allowed}");
        if let Some(c) = closest(s, T::choices().iter().map(|c| c.choice_name())) {
            reason.push_str(&format!(" (did you mean {c:?}?)"));
        }
        SettingsError::Invalid {
            key: key.to_string(),
            value: v.written(),
            reason,
            allowed,
        }
    })
}

fn size(key: &str, v: &Val, lo: u64, hi: u64) -> Result<u64, SettingsError> {
    let allowed = info(key).allowed;
    let n: i128 = match v {
        Val::Int(n) => *n,
        Val::Str(s) => match parse_size(s) {
            Ok(n) => n.into(),
            Err(_) => {
                return Err(wrong_type(
                    key,
                    v,
                    format!("a size like 4096 or \"4K\" ({allowed})"),
                ));
            }
        },
        _ => {
            return Err(wrong_type(
                key,
                v,
                format!("a size like 4096 or \"4K\" ({allowed})"),
            ));
        }
    };
    let ok = n >= i128::from(lo) && n <= i128::from(hi) && n % i128::from(PAGE_SIZE) == 0;
    if !ok {
        return Err(SettingsError::Invalid {
            key: key.to_string(),
            value: v.written(),
            reason: format!("must be {allowed}"),
            allowed: allowed.to_string(),
        });
    }
    Ok(u64::try_from(n).unwrap_or(hi))
}

fn cpus(key: &str, v: &Val) -> Result<Vec<usize>, SettingsError> {
    let allowed = info(key).allowed;
    let invalid = |reason: String| SettingsError::Invalid {
        key: key.to_string(),
        value: v.written(),
        reason,
        allowed: allowed.to_string(),
    };
    let numbers: Vec<i128> = match v {
        Val::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Val::Int(n) => out.push(*n),
                    _ => return Err(wrong_type(key, v, allowed.to_string())),
                }
            }
            out
        }
        Val::Int(n) => vec![*n],
        Val::Str(s) => parse_cpu_list(s)
            .map_err(invalid)?
            .into_iter()
            .map(|c| c as i128)
            .collect(),
        _ => return Err(wrong_type(key, v, allowed.to_string())),
    };
    let mut out: Vec<usize> = Vec::with_capacity(numbers.len());
    for n in numbers {
        let cpu = usize::try_from(n)
            .ok()
            .filter(|&c| c <= MAX_CPU_NUMBER)
            .ok_or_else(|| invalid(cpu_number_error(n)))?;
        if out.contains(&cpu) {
            return Err(invalid(format!("CPU {cpu} is listed twice")));
        }
        out.push(cpu);
    }
    Ok(out)
}

/// `kernel.dir`: empty, or an absolute path without control characters.
fn dir_path(key: &str, v: &Val) -> Result<String, SettingsError> {
    let allowed = info(key).allowed;
    let Val::Str(p) = v else {
        return Err(wrong_type(key, v, allowed.to_string()));
    };
    let problem = if p.is_empty() {
        None
    } else if p.len() > MAX_PATH_BYTES {
        Some(format!(
            "{} bytes is longer than PATH_MAX ({MAX_PATH_BYTES})",
            p.len()
        ))
    } else if p.chars().any(char::is_control) {
        Some("it contains a control character".to_string())
    } else if !p.starts_with('/') {
        Some("it is not an absolute path".to_string())
    } else {
        None
    };
    match problem {
        None => Ok(p.clone()),
        Some(reason) => Err(SettingsError::Invalid {
            key: key.to_string(),
            value: v.written(),
            reason: format!("{reason}; allowed {allowed}"),
            allowed: allowed.to_string(),
        }),
    }
}

pub(crate) use crate::sys::cpu_number_error;

fn salt(key: &str, v: &Val) -> Result<Vec<u8>, SettingsError> {
    let allowed = info(key).allowed;
    let Val::Str(s) = v else {
        return Err(wrong_type(key, v, allowed.to_string()));
    };
    let problem = if let Some(c) = s.chars().find(|c| !c.is_ascii_hexdigit()) {
        Some(format!("{c:?} is not a hex digit"))
    } else if s.len() % 2 != 0 {
        Some(format!("{} hex digits is an odd number", s.len()))
    } else if s.len() / 2 > MAX_SALT_BYTES {
        Some(format!("{} bytes is too long", s.len() / 2))
    } else {
        None
    };
    match (problem, hex::decode(s)) {
        (None, Ok(bytes)) => Ok(bytes),
        (problem, _) => Err(SettingsError::Invalid {
            key: key.to_string(),
            value: v.written(),
            reason: format!(
                "{}; allowed {allowed}",
                problem.unwrap_or_else(|| "not hex".to_string())
            ),
            allowed: allowed.to_string(),
        }),
    }
}

pub mod units;

pub use units::{
    MAX_DURATION, MIN_DURATION, format_cpu_list, format_duration, format_size, parse_cpu_list,
    parse_duration, parse_duration_in, parse_size,
};

// ---------------------------------------------------------------------------

impl Settings {
    /// Read settings from a TOML document; `origin` (usually the file name)
    /// starts every error message. Missing keys keep their defaults; unknown
    /// sections and keys are errors. Cross-field checks are left to
    /// [`Self::validate`], which runs after `--set` overrides.
    pub fn from_toml_str(src: &str, origin: &str) -> Result<Settings, SettingsError> {
        Self::from_toml_str_with(src, origin, &[])
    }

    /// Like [`Self::from_toml_str`], but the top-level keys in `reserved`
    /// (a preset's `version`, `name`, `description`, `[compare]`...) are
    /// skipped rather than rejected, for the caller to read from the same
    /// source. They are also offered as suggestions for misspelled keys.
    pub fn from_toml_str_with(
        src: &str,
        origin: &str,
        reserved: &[&str],
    ) -> Result<Settings, SettingsError> {
        let doc = toml::de::DeTable::parse(src).map_err(|e| {
            let span = e.span();
            let mut message = e.message().replace('\n', "; ");
            if message == "duplicate key"
                && let Some(name) = span.clone().and_then(|r| src.get(r))
            {
                message = format!("duplicate key {:?}", name.trim_matches(['"', '\'']));
            }
            SettingsError::Parse {
                origin: origin.to_string(),
                at: span.map(|r| line_col(src, r.start)),
                message,
            }
        })?;
        let entries = entries_from_de(doc.get_ref());
        let mut settings = Settings::default();
        settings.apply_entries(&entries, reserved).map_err(|b| {
            let (error, span) = *b;
            SettingsError::Located {
                origin: origin.to_string(),
                at: span.map(|r| line_col(src, r.start)),
                error: Box::new(error),
            }
        })?;
        Ok(settings)
    }

    /// Read settings from an already parsed TOML table (no line numbers in
    /// errors, which start with `origin`). A caller with extra top-level keys
    /// removes them first.
    pub fn from_toml_table(table: &toml::Table, origin: &str) -> Result<Settings, SettingsError> {
        let mut settings = Settings::default();
        settings
            .apply_entries(&entries_from_toml(table), &[])
            .map_err(|b| SettingsError::Located {
                origin: origin.to_string(),
                at: None,
                error: Box::new(b.0),
            })?;
        Ok(settings)
    }

    fn apply_entries(
        &mut self,
        entries: &[Entry],
        reserved: &[&str],
    ) -> Result<(), Box<SpannedError>> {
        for top in entries {
            if reserved.contains(&top.key.as_str()) {
                continue;
            }
            let section = top.key.as_str();
            if !SECTIONS.contains(&section) {
                let error = if let Val::Table(_) = top.value {
                    let suggestion = closest(section, SECTIONS.iter().chain(reserved).copied())
                        .map(str::to_string);
                    SettingsError::UnknownSection {
                        section: section.to_string(),
                        suggestion,
                        allowed: format!("valid sections are {}", sections_list()),
                    }
                } else {
                    let mut error = unknown_key_error(section);
                    if let SettingsError::UnknownKey { suggestion, .. } = &mut error
                        && let Some(r) = closest(section, reserved.iter().copied())
                    {
                        *suggestion = Some(r.to_string());
                    }
                    error
                };
                return Err(Box::new((error, top.key_span.clone())));
            }
            let Val::Table(items) = &top.value else {
                let error = wrong_type(section, &top.value, format!("a table [{section}]"));
                return Err(Box::new((error, top.value_span.clone())));
            };
            for item in items {
                let key = format!("{section}.{}", item.key);
                if key_info(&key).is_none() {
                    return Err(Box::new((unknown_key_error(&key), item.key_span.clone())));
                }
                self.set_value(&key, &item.value)
                    .map_err(|e| Box::new((e, item.value_span.clone())))?;
            }
        }
        Ok(())
    }

    /// Apply one `--set` argument, `section.key=value`.
    pub fn apply_override(&mut self, spec: &str) -> Result<(), SettingsError> {
        let bad = || SettingsError::BadOverride {
            spec: spec.to_string(),
            reason: "expected section.key=value".to_string(),
        };
        let (key, value) = spec.split_once('=').ok_or_else(bad)?;
        if key.trim().is_empty() {
            return Err(bad());
        }
        self.set(key, value)
    }

    /// Set `key` (`section.key`) from command-line text. The text is read as
    /// a TOML value, except that bare words are strings (`sync`, `4K`,
    /// `00ff`), and CPU lists may be written `0,1`, `[0, 1]` or `0-3`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), SettingsError> {
        let key = key.trim();
        if key_info(key).is_none() {
            return Err(unknown_key_error(key));
        }
        let raw = value.trim();
        let quoted = raw.starts_with('"') || raw.starts_with('\'');
        let v = if raw.is_empty() {
            Val::Str(String::new())
        } else {
            match toml::de::DeValue::parse(raw) {
                Ok(parsed) => {
                    let v = Val::from_de(parsed.get_ref());
                    if is_text_key(key) && !quoted && !matches!(v, Val::Str(_)) {
                        Val::Str(raw.to_string())
                    } else {
                        v
                    }
                }
                Err(e) if quoted || raw.starts_with('[') || raw.starts_with('{') => {
                    return Err(SettingsError::BadOverride {
                        spec: format!("{key}={value}"),
                        reason: format!("invalid value: {}", e.message().replace('\n', "; ")),
                    });
                }
                Err(_) => Val::Str(raw.to_string()),
            }
        };
        self.set_value(key, &v)
    }

    /// The one per-key setter behind both the TOML and the `--set` paths.
    fn set_value(&mut self, key: &str, v: &Val) -> Result<(), SettingsError> {
        let w = &mut self.workload;
        let p = &mut self.pipeline;
        let k = &mut self.workers;
        let l = &mut self.load;
        let c = &mut self.cache;
        let kn = &mut self.kernel;
        let is_default =
            |v: &Val| matches!(v, Val::Str(t) if t.trim().eq_ignore_ascii_case("default"));
        match key {
            "workload.target" => w.target = choice(key, v)?,
            "workload.engine" => w.engine = choice(key, v)?,
            "workload.sleep" => w.sleep = choice(key, v)?,
            "workload.direct" => w.direct = boolean(key, v)?,
            "workload.pattern" => w.pattern = choice(key, v)?,
            "workload.block_size" => w.block_size = size(key, v, MIN_BLOCK_SIZE, MAX_BLOCK_SIZE)?,
            "workload.queue_depth" => w.queue_depth = int_u32(key, v, 1, MAX_QUEUE_DEPTH)?,
            "workload.submit_batch" => w.submit_batch = int_u32(key, v, 1, MAX_QUEUE_DEPTH)?,
            "workload.readers" => w.readers = int_u32(key, v, 1, MAX_READERS)?,
            "workload.rate_iops" => w.rate_iops = int_u64(key, v, 0, MAX_RATE_IOPS)?,
            "workload.reader_cpus" => w.reader_cpus = cpus(key, v)?,
            "workload.completion" => w.completion = choice(key, v)?,
            "workload.file_size" => w.file_size = size(key, v, MIN_FILE_SIZE, MAX_FILE_SIZE)?,
            "workload.burst" => w.burst = size(key, v, 4096, MAX_BURST)?,
            "pipeline.decrypt" => p.decrypt = boolean(key, v)?,
            "pipeline.cipher" => p.cipher = choice(key, v)?,
            "pipeline.verity" => p.verity = boolean(key, v)?,
            "pipeline.salt" => p.salt = salt(key, v)?,
            "pipeline.corrupt_every" => p.corrupt_every = int_u64(key, v, 0, i64::MAX as u64)?,
            "workers.mode" => k.mode = choice(key, v)?,
            "workers.verify_mode" => k.verify_mode = choice(key, v)?,
            "workers.highpri" => k.highpri = boolean(key, v)?,
            "workers.max_active" => k.max_active = int_u32(key, v, 0, MAX_MAX_ACTIVE)?,
            "workers.affinity_scope" => k.affinity_scope = choice(key, v)?,
            "cache.size" => {
                c.size = match v {
                    Val::Str(t) if t.trim().eq_ignore_ascii_case("auto") => None,
                    _ => Some(size(key, v, 0, MAX_FILE_SIZE)?),
                }
            }
            "cache.read_ahead" => c.read_ahead = size(key, v, 0, MAX_READ_AHEAD)?,
            "cache.device" => c.device = choice(key, v)?,
            "cache.cold_start" => c.cold_start = boolean(key, v)?,
            "load.hogs" => l.hogs = int_u32(key, v, 0, MAX_HOGS)?,
            "load.hog_nice" => {
                l.hog_nice = i32::try_from(int_in(key, v, -20, 19)?).unwrap_or_default()
            }
            "kernel.dir" => kn.dir = dir_path(key, v)?,
            "kernel.affinity_scope" => kn.affinity_scope = choice(key, v)?,
            "kernel.unbound_cpus" => {
                kn.unbound_cpus = match v {
                    Val::Str(t) if t.trim().is_empty() => Vec::new(),
                    _ if is_default(v) => Vec::new(),
                    _ => {
                        let bare = matches!(v, Val::Str(t) if t.trim() == "[]");
                        let cpus = if bare { Vec::new() } else { cpus(key, v)? };
                        if cpus.is_empty() {
                            return Err(SettingsError::Invalid {
                                key: key.to_string(),
                                value: v.written(),
                                reason: "an empty CPU list would leave unbound work nowhere to run; use \"default\" to leave it unchanged".into(),
                                allowed: info(key).allowed.to_string(),
                            });
                        }
                        cpus
                    }
                }
            }
            "kernel.read_ahead_kb" => {
                kn.read_ahead_kb = if is_default(v) {
                    None
                } else {
                    Some(int_u32(key, v, 0, MAX_KERNEL_READ_AHEAD_KB)?)
                }
            }
            "kernel.trace" => kn.trace = boolean(key, v)?,
            "kernel.rq_affinity" => {
                kn.rq_affinity = if is_default(v) {
                    None
                } else {
                    Some(int_u32(key, v, 0, 2)? as u8)
                }
            }
            _ => return Err(unknown_key_error(key)),
        }
        Ok(())
    }

    /// The current value of `key` as a [`Val`], as a TOML file would hold it.
    fn value_of(&self, key: &str) -> Option<Val> {
        let w = &self.workload;
        let p = &self.pipeline;
        let k = &self.workers;
        let l = &self.load;
        let c = &self.cache;
        let kn = &self.kernel;
        let s = |x: &str| Val::Str(x.to_string());
        let size = |n: u64| Val::Str(format_size(n));
        Some(match key {
            "workload.target" => s(w.target.name()),
            "workload.engine" => s(w.engine.name()),
            "workload.sleep" => s(w.sleep.name()),
            "workload.direct" => Val::Bool(w.direct),
            "workload.pattern" => s(w.pattern.name()),
            "workload.block_size" => size(w.block_size),
            "workload.queue_depth" => Val::Int(w.queue_depth.into()),
            "workload.submit_batch" => Val::Int(w.submit_batch.into()),
            "workload.readers" => Val::Int(w.readers.into()),
            "workload.rate_iops" => Val::Int(w.rate_iops.into()),
            "workload.reader_cpus" => {
                Val::Array(w.reader_cpus.iter().map(|&c| Val::Int(c as i128)).collect())
            }
            "workload.completion" => s(w.completion.name()),
            "workload.file_size" => size(w.file_size),
            "workload.burst" => size(w.burst),
            "pipeline.decrypt" => Val::Bool(p.decrypt),
            "pipeline.cipher" => s(p.cipher.name()),
            "pipeline.verity" => Val::Bool(p.verity),
            "pipeline.salt" => s(&hex::encode(&p.salt)),
            "pipeline.corrupt_every" => Val::Int(p.corrupt_every.into()),
            "workers.mode" => s(k.mode.name()),
            "workers.verify_mode" => s(k.verify_mode.name()),
            "workers.highpri" => Val::Bool(k.highpri),
            "workers.max_active" => Val::Int(k.max_active.into()),
            "workers.affinity_scope" => s(k.affinity_scope.name()),
            "cache.size" => match c.size {
                None => s("auto"),
                Some(n) => size(n),
            },
            "cache.read_ahead" => size(c.read_ahead),
            "cache.device" => s(c.device.name()),
            "cache.cold_start" => Val::Bool(c.cold_start),
            "load.hogs" => Val::Int(l.hogs.into()),
            "load.hog_nice" => Val::Int(l.hog_nice.into()),
            "kernel.dir" => s(&kn.dir),
            "kernel.affinity_scope" => s(kn.affinity_scope.name()),
            "kernel.unbound_cpus" if kn.unbound_cpus.is_empty() => s("default"),
            "kernel.unbound_cpus" => s(&format_cpu_list(&kn.unbound_cpus)),
            "kernel.read_ahead_kb" => kn
                .read_ahead_kb
                .map_or(s("default"), |n| Val::Int(n.into())),
            "kernel.rq_affinity" => kn.rq_affinity.map_or(s("default"), |n| Val::Int(n.into())),
            "kernel.trace" => Val::Bool(kn.trace),
            _ => return None,
        })
    }

    /// The display form of `key`'s value (`uring`, `4K`, `0-3,6`, `[]`,
    /// `""` for an empty salt); `None` for an unknown key. Passing it back
    /// to [`Self::set`] gives the same value.
    pub fn get(&self, key: &str) -> Option<String> {
        Some(match self.value_of(key)? {
            Val::Str(s) if s.is_empty() => "\"\"".to_string(),
            Val::Str(s) => s,
            Val::Array(_) if self.workload.reader_cpus.is_empty() => "[]".to_string(),
            Val::Array(_) => format_cpu_list(&self.workload.reader_cpus),
            other => other.written(),
        })
    }

    /// Check everything, including what one key cannot check alone:
    /// `file_size >= block_size`, and every reader CPU exists on a machine
    /// with `cpu_count` CPUs. Run it after all overrides.
    pub fn validate(&self, cpu_count: usize) -> Result<(), SettingsError> {
        // Fields are public: re-run every per-key check on the values held.
        let mut probe = Settings::default();
        for k in KEYS {
            if let Some(v) = self.value_of(k.key) {
                probe.set_value(k.key, &v)?;
            }
        }
        let w = &self.workload;
        if w.file_size < w.block_size {
            return Err(SettingsError::Invalid {
                key: "workload.file_size".to_string(),
                value: toml_string(&format_size(w.file_size)),
                reason: format!(
                    "must be at least workload.block_size ({})",
                    format_size(w.block_size)
                ),
                allowed: info("workload.file_size").allowed.to_string(),
            });
        }
        let machine = match cpu_count {
            0 => "this machine has no CPUs".to_string(),
            1 => "this machine has 1 CPU (0)".to_string(),
            n => format!("this machine has {n} CPUs (0-{})", n - 1),
        };
        for (key, list) in [
            ("workload.reader_cpus", &w.reader_cpus),
            ("kernel.unbound_cpus", &self.kernel.unbound_cpus),
        ] {
            if let Some(&cpu) = list.iter().find(|&&c| c >= cpu_count) {
                return Err(SettingsError::Invalid {
                    key: key.to_string(),
                    value: self.value_of(key).map(|v| v.written()).unwrap_or_default(),
                    reason: format!("CPU {cpu} is out of range; {machine}"),
                    allowed: machine,
                });
            }
        }
        Ok(())
    }

    /// The settings as a TOML document that [`Self::from_toml_str`] reads
    /// back to the same value; sizes are written as `"4K"`-style strings.
    pub fn to_toml_string(&self) -> String {
        let mut out = String::new();
        let mut current = "";
        for k in KEYS {
            let Some((section, name)) = k.key.split_once('.') else {
                continue;
            };
            if section != current {
                if !current.is_empty() {
                    out.push('\n');
                }
                out.push_str(&format!("[{section}]\n"));
                current = section;
            }
            if let Some(v) = self.value_of(k.key) {
                out.push_str(&format!("{name} = {}\n", v.written()));
            }
        }
        out
    }

    /// Every key whose value differs, `from` = self, `to` = other, in
    /// [`KEYS`] order.
    pub fn diff(&self, other: &Settings) -> Vec<SettingChange> {
        KEYS.iter()
            .filter_map(|k| {
                let (from, to) = (self.get(k.key)?, other.get(k.key)?);
                (from != to).then(|| SettingChange {
                    key: k.key.to_string(),
                    from,
                    to,
                })
            })
            .collect()
    }

    /// Bytes the page cache may hold: `cache.size`, or a quarter of the
    /// file (in whole pages) when it is "auto".
    pub fn cache_bytes(&self) -> u64 {
        self.cache
            .size
            .unwrap_or(self.workload.file_size / 4 / PAGE_SIZE * PAGE_SIZE)
    }

    /// How many work items the unbound pool runs at once: `max_active`, or
    /// the number of online CPUs when it is 0 (as `fscrypt_read_queue` does).
    pub fn effective_max_active(&self, online_cpus: usize) -> usize {
        match self.workers.max_active {
            0 => online_cpus.max(1),
            n => n as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err_set(key: &str, value: &str) -> String {
        Settings::default().set(key, value).unwrap_err().to_string()
    }

    #[test]
    fn kernel_keys_are_checked_where_they_are_parsed() {
        assert_eq!(
            err_set("kernel.dir", "mnt/enc"),
            "kernel.dir = \"mnt/enc\" is invalid: it is not an absolute path; allowed \"\" (an ext4 image readpath makes and loop-mounts under its data dir, as root) or an absolute path of a directory on a filesystem with the encrypt feature"
        );
        assert!(err_set("kernel.dir", "\"/a\\nb\"").contains("control character"));
        assert!(err_set("kernel.dir", &format!("/{}", "x".repeat(5000))).contains("PATH_MAX"));
        assert!(err_set("kernel.rq_affinity", "3").contains("default (not changed), 0, 1 or 2"));
        assert!(err_set("kernel.read_ahead_kb", "99999999999").contains("0..=131072"));
        assert!(err_set("kernel.unbound_cpus", "[]").contains("nowhere to run"));
        assert!(err_set("kernel.affinity_scope", "pod").contains("allowed default, cpu"));
        let mut s = Settings::default();
        s.set("kernel.unbound_cpus", "0-3").unwrap();
        let e = s.validate(2).unwrap_err().to_string();
        assert!(
            e.starts_with("kernel.unbound_cpus = \"0-3\" is invalid: CPU 2 is out of range"),
            "{e}"
        );
        s.set("kernel.unbound_cpus", "default").unwrap();
        assert!(s.kernel.unbound_cpus.is_empty());
        s.set("kernel.read_ahead_kb", "default").unwrap();
        assert_eq!(s, Settings::default());
    }

    fn err_toml(src: &str) -> String {
        Settings::from_toml_str(src, "p.toml")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn defaults() {
        let s = Settings::default();
        assert_eq!(s.workload.engine, EngineKind::Uring);
        assert_eq!(s.workload.sleep, SleepMode::Iowait);
        assert!(
            !s.workload.direct,
            "buffered: the kernel reads verity files through the page cache"
        );
        assert_eq!(s.workload.pattern, Pattern::Random);
        assert_eq!(s.workload.block_size, 4096);
        assert_eq!(s.workload.queue_depth, 1);
        assert_eq!(s.workload.readers, 1);
        assert_eq!(s.workload.rate_iops, 0);
        assert!(s.workload.reader_cpus.is_empty());
        assert_eq!(s.workload.file_size, 256 << 20);
        assert!(s.pipeline.decrypt);
        assert_eq!(s.pipeline.cipher, CipherKind::Aes256Xts);
        assert!(s.pipeline.verity);
        assert!(s.pipeline.salt.is_empty());
        assert_eq!(s.pipeline.corrupt_every, 0);
        assert_eq!(s.workers.mode, WorkerMode::Unbound);
        assert_eq!(s.workers.verify_mode, VerifyMode::Bound);
        assert!(s.workers.highpri);
        assert_eq!(s.workers.max_active, 0);
        assert_eq!(s.load.hogs, 0);
        assert_eq!(s.load.hog_nice, 0);
        assert_eq!(Settings::from_toml_str("", "empty.toml").unwrap(), s);
        s.validate(1).unwrap();
        assert_eq!(s.get("workload.block_size").unwrap(), "4K");
        assert_eq!(s.get("workload.file_size").unwrap(), "256M");
        assert_eq!(s.get("workload.reader_cpus").unwrap(), "[]");
        assert_eq!(s.get("pipeline.salt").unwrap(), "\"\"");
        assert_eq!(s.get("nope.nope"), None);
    }

    #[test]
    fn keys_table_is_consistent() {
        let s = Settings::default();
        for k in KEYS {
            let (section, _) = k.key.split_once('.').unwrap();
            assert!(SECTIONS.contains(&section), "{}", k.key);
            assert!(s.get(k.key).is_some(), "{}", k.key);
            assert!(!k.help.is_empty() && !k.allowed.is_empty(), "{}", k.key);
        }
        // Keys are grouped by section, in section order.
        let order: Vec<usize> = KEYS
            .iter()
            .map(|k| {
                let sec = k.key.split_once('.').unwrap().0;
                SECTIONS.iter().position(|s| *s == sec).unwrap()
            })
            .collect();
        assert!(order.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(info("pipeline.cipher").allowed, CipherKind::allowed_list());
        assert_eq!(info("workload.engine").allowed, EngineKind::allowed_list());
        assert_eq!(info("workload.sleep").allowed, SleepMode::allowed_list());
        assert_eq!(info("workload.pattern").allowed, Pattern::allowed_list());
        assert_eq!(info("workers.mode").allowed, WorkerMode::allowed_list());
        assert_eq!(
            info("workers.verify_mode").allowed,
            VerifyMode::allowed_list()
        );
    }

    /// (key, TOML literal, --set text, expected get()).
    const EVERY_KEY: &[(&str, &str, &str, &str)] = &[
        ("workload.engine", "\"sync\"", "sync", "sync"),
        ("workload.sleep", "\"poll\"", "poll", "poll"),
        ("workload.direct", "true", "true", "true"),
        (
            "workload.pattern",
            "\"sequential\"",
            "sequential",
            "sequential",
        ),
        ("workload.block_size", "\"16K\"", "16K", "16K"),
        ("workload.queue_depth", "32", "32", "32"),
        ("workload.submit_batch", "8", "8", "8"),
        ("workload.readers", "4", "4", "4"),
        ("workload.rate_iops", "50000", "50000", "50000"),
        ("workload.reader_cpus", "\"0-3,6\"", "0-3,6", "0-3,6"),
        ("workload.completion", "\"irq\"", "irq", "irq"),
        ("workload.file_size", "\"1G\"", "1G", "1G"),
        ("workload.burst", "\"4M\"", "4M", "4M"),
        ("pipeline.decrypt", "false", "false", "false"),
        ("pipeline.cipher", "\"adiantum\"", "adiantum", "adiantum"),
        ("pipeline.verity", "false", "false", "false"),
        ("pipeline.salt", "\"00ff\"", "00ff", "00ff"),
        ("pipeline.corrupt_every", "100", "100", "100"),
        ("workers.mode", "\"inline\"", "inline", "inline"),
        ("workers.verify_mode", "\"same\"", "same", "same"),
        ("workers.highpri", "false", "false", "false"),
        ("workers.max_active", "8", "8", "8"),
        ("workers.affinity_scope", "\"system\"", "system", "system"),
        ("cache.size", "\"16M\"", "16M", "16M"),
        ("cache.read_ahead", "\"512K\"", "512K", "512K"),
        ("cache.device", "\"memory\"", "memory", "memory"),
        ("cache.cold_start", "true", "true", "true"),
        ("load.hogs", "4", "4", "4"),
        ("load.hog_nice", "-5", "-5", "-5"),
        ("workload.target", "\"kernel\"", "kernel", "kernel"),
        ("kernel.dir", "\"/mnt/enc\"", "/mnt/enc", "/mnt/enc"),
        ("kernel.affinity_scope", "\"cpu\"", "cpu", "cpu"),
        ("kernel.unbound_cpus", "\"0-1\"", "0-1", "0-1"),
        ("kernel.read_ahead_kb", "512", "512", "512"),
        ("kernel.rq_affinity", "2", "2", "2"),
        ("kernel.trace", "false", "false", "false"),
    ];

    #[test]
    fn every_key_via_toml_and_set() {
        let defaults = Settings::default();
        assert_eq!(EVERY_KEY.len(), KEYS.len());
        for &(key, lit, cli, want) in EVERY_KEY {
            assert!(key_info(key).is_some(), "{key}");
            assert_ne!(
                defaults.get(key).unwrap(),
                want,
                "{key}: pick a non-default"
            );
            let (section, name) = key.split_once('.').unwrap();
            let src = format!("[{section}]\n{name} = {lit}\n");
            let from_file =
                Settings::from_toml_str(&src, "t.toml").unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(from_file.get(key).unwrap(), want, "{key} via TOML");

            let mut from_cli = Settings::default();
            from_cli
                .apply_override(&format!("{key}={cli}"))
                .unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(from_cli.get(key).unwrap(), want, "{key} via --set");
            assert_eq!(from_file, from_cli, "{key}");

            // Only that key changed, and get() output can be set back.
            let changes = defaults.diff(&from_cli);
            assert_eq!(changes.len(), 1, "{key}: {changes:?}");
            assert_eq!(changes[0].key, key);
            let mut again = Settings::default();
            again.set(key, &from_cli.get(key).unwrap()).unwrap();
            assert_eq!(again, from_cli, "{key}");
        }
    }

    #[test]
    fn typed_fields_after_set() {
        let mut s = Settings::default();
        for spec in [
            "workload.block_size=8192",
            "workload.file_size = 1T",
            "workload.reader_cpus=[2, 0]",
            "pipeline.salt=1234",
            "pipeline.cipher=\"aes-256-xts-soft\"",
            "workers.mode=Bound",
        ] {
            s.apply_override(spec)
                .unwrap_or_else(|e| panic!("{spec}: {e}"));
        }
        assert_eq!(s.workload.block_size, 8192);
        assert_eq!(s.workload.file_size, 1 << 40);
        assert_eq!(s.workload.reader_cpus, vec![2, 0]);
        assert_eq!(s.pipeline.salt, vec![0x12, 0x34]);
        assert_eq!(s.pipeline.cipher, CipherKind::Aes256XtsSoft);
        assert_eq!(s.workers.mode, WorkerMode::Bound);
        s.set("workload.reader_cpus", "0,1").unwrap();
        assert_eq!(s.workload.reader_cpus, vec![0, 1]);
        s.set("workload.reader_cpus", "3").unwrap();
        assert_eq!(s.workload.reader_cpus, vec![3]);
        s.set("workload.reader_cpus", "[]").unwrap();
        assert!(s.workload.reader_cpus.is_empty());
        s.set("pipeline.salt", "").unwrap();
        assert!(s.pipeline.salt.is_empty());
        let t = Settings::from_toml_str(
            "[workload]\nreader_cpus = [1, 3]\nblock_size = 65536\n",
            "x",
        )
        .unwrap();
        assert_eq!(t.workload.reader_cpus, vec![1, 3]);
        assert_eq!(t.workload.block_size, 65536);
        // Dotted keys at the top level are the same thing.
        let d = Settings::from_toml_str("workload.engine = \"sync\"\n", "x").unwrap();
        assert_eq!(d.workload.engine, EngineKind::Sync);
    }

    #[test]
    fn unknown_keys_and_sections() {
        assert_eq!(
            err_set("workers.mod", "bound"),
            "unknown setting \"workers.mod\" (did you mean \"workers.mode\"?)"
        );
        let mut s = Settings::default();
        let e = s.apply_override("workers.mod=bound").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown setting \"workers.mod\" (did you mean \"workers.mode\"?)"
        );
        assert_eq!(e.key(), Some("workers.mod"));
        assert_eq!(
            err_toml("[workers]\nmod = \"bound\"\n"),
            "p.toml:2:1: unknown setting \"workers.mod\" (did you mean \"workers.mode\"?)"
        );
        assert_eq!(
            err_set("workers.zzz", "1"),
            "unknown setting \"workers.zzz\": valid keys in [workers] are mode, verify_mode, highpri, max_active, affinity_scope"
        );
        assert_eq!(
            err_set("queue_dept", "4"),
            "unknown setting \"queue_dept\" (did you mean \"workload.queue_depth\"?)"
        );
        assert_eq!(
            err_set("queue_depth", "4"),
            "unknown setting \"queue_depth\" (did you mean \"workload.queue_depth\"?)"
        );
        assert_eq!(
            err_set("workers.hogs", "4"),
            "unknown setting \"workers.hogs\" (did you mean \"load.hogs\"?)"
        );
        assert_eq!(
            err_set("wrkload.readers", "4"),
            "unknown setting \"wrkload.readers\" (did you mean \"workload.readers\"?)"
        );
        assert_eq!(
            err_set("foo.bar", "4"),
            "unknown setting \"foo.bar\": settings live in sections [workload], [pipeline], [workers], [cache], [load], [kernel]"
        );
        assert_eq!(
            err_toml("[wrkers]\nmode = \"bound\"\n"),
            "p.toml:1:2: unknown section \"wrkers\" (did you mean \"workers\"?)"
        );
        assert_eq!(
            err_toml("\n[zzz]\n"),
            "p.toml:2:2: unknown section \"zzz\": valid sections are [workload], [pipeline], [workers], [cache], [load], [kernel]"
        );
        assert_eq!(
            err_toml("queue_depth = 4\n"),
            "p.toml:1:1: unknown setting \"queue_depth\" (did you mean \"workload.queue_depth\"?)"
        );
        assert_eq!(
            err_toml("workload = 3\n"),
            "p.toml:1:12: workload: expected a table [workload], got an integer (3)"
        );
        assert_eq!(
            err_toml("[workload.extra]\n"),
            "p.toml:1:11: unknown setting \"workload.extra\": valid keys in [workload] are target, engine, sleep, direct, pattern, block_size, queue_depth, submit_batch, readers, rate_iops, reader_cpus, completion, file_size, burst"
        );
    }

    #[test]
    fn reserved_top_level_keys() {
        let src = "version = 1\nname = \"x\"\n[compare]\na = 1\n[workload]\nreaders = 2\n";
        let reserved = ["version", "name", "description", "compare"];
        let s = Settings::from_toml_str_with(src, "p.toml", &reserved).unwrap();
        assert_eq!(s.workload.readers, 2);
        assert_eq!(
            err_toml(src),
            "p.toml:1:1: unknown setting \"version\": settings live in sections [workload], [pipeline], [workers], [cache], [load], [kernel]"
        );
        let e = Settings::from_toml_str_with("nme = \"x\"\n", "p.toml", &reserved).unwrap_err();
        assert_eq!(
            e.to_string(),
            "p.toml:1:1: unknown setting \"nme\" (did you mean \"name\"?)"
        );
        let e = Settings::from_toml_str_with("[compar]\n", "p.toml", &reserved).unwrap_err();
        assert_eq!(
            e.to_string(),
            "p.toml:1:2: unknown section \"compar\" (did you mean \"compare\"?)"
        );

        let mut table: toml::Table = toml::from_str(src).unwrap();
        for r in reserved {
            table.remove(r);
        }
        assert_eq!(Settings::from_toml_table(&table, "p.toml").unwrap(), s);
        table.insert("workers".into(), toml::Value::Table(toml::Table::new()));
        table["workers"]
            .as_table_mut()
            .unwrap()
            .insert("max_active".into(), toml::Value::Integer(9999));
        assert_eq!(
            Settings::from_toml_table(&table, "p.toml")
                .unwrap_err()
                .to_string(),
            "p.toml: workers.max_active = 9999 is out of range: allowed 0..=512 (0 = number of online CPUs)"
        );
    }

    #[test]
    fn wrong_types() {
        assert_eq!(
            err_set("workload.queue_depth", "abc"),
            "workload.queue_depth: expected an integer 1..=1024, got \"abc\""
        );
        assert_eq!(
            err_toml("[workload]\nqueue_depth = true\n"),
            "p.toml:2:15: workload.queue_depth: expected an integer 1..=1024, got a boolean (true)"
        );
        assert_eq!(
            err_toml("[workload]\nqueue_depth = [1, 2]\n"),
            "p.toml:2:15: workload.queue_depth: expected an integer 1..=1024, got an array ([1, 2])"
        );
        assert_eq!(
            err_set("workload.queue_depth", "\"4\""),
            "workload.queue_depth: expected an integer 1..=1024, got \"4\""
        );
        assert_eq!(
            err_set("workload.direct", "yes"),
            "workload.direct: expected true or false, got \"yes\""
        );
        assert_eq!(
            err_toml("[workload]\nengine = 3\n"),
            "p.toml:2:10: workload.engine: expected one of uring, sync, got an integer (3)"
        );
        assert_eq!(
            err_set("workload.block_size", "4X"),
            "workload.block_size: expected a size like 4096 or \"4K\" (a multiple of 4096 between 4K and 1M), got \"4X\""
        );
        assert_eq!(
            err_set("workload.rate_iops", "1.5"),
            "workload.rate_iops: expected an integer 0..=10000000 (0 = unlimited), got a float (1.5)"
        );
        let e = Settings::default()
            .set("workload.queue_depth", "abc")
            .unwrap_err();
        assert_eq!(e.key(), Some("workload.queue_depth"));
        assert_eq!(e.value(), Some("\"abc\""));
        assert_eq!(e.allowed(), Some("an integer 1..=1024"));
    }

    #[test]
    fn out_of_range_and_invalid() {
        assert_eq!(
            err_set("workload.queue_depth", "0"),
            "workload.queue_depth = 0 is out of range: allowed 1..=1024"
        );
        assert_eq!(
            err_set("workload.block_size", "1000"),
            "workload.block_size = 1000 is invalid: must be a multiple of 4096 between 4K and 1M"
        );
        assert_eq!(
            err_set("workload.block_size", "2M"),
            "workload.block_size = \"2M\" is invalid: must be a multiple of 4096 between 4K and 1M"
        );
        assert_eq!(
            err_set("workload.readers", "100000"),
            "workload.readers = 100000 is out of range: allowed 1..=256"
        );
        assert_eq!(
            err_set("load.hogs", "-1"),
            "load.hogs = -1 is out of range: allowed 0..=256"
        );
        assert_eq!(
            err_set("load.hog_nice", "20"),
            "load.hog_nice = 20 is out of range: allowed -20..=19"
        );
        assert_eq!(
            err_set("pipeline.cipher", "rot13"),
            "pipeline.cipher = \"rot13\" is invalid: allowed aes-256-xts, aes-256-xts-soft, adiantum"
        );
        assert_eq!(
            err_set("workers.mode", "unbond"),
            "workers.mode = \"unbond\" is invalid: allowed inline, bound, unbound (did you mean \"unbound\"?)"
        );
        assert_eq!(
            err_set("workload.file_size", "2T"),
            "workload.file_size = \"2T\" is invalid: must be a multiple of 4096 between 4K and 1T"
        );
        assert_eq!(
            err_set("workload.rate_iops", "20000000"),
            "workload.rate_iops = 20000000 is out of range: allowed 0..=10000000 (0 = unlimited)"
        );
        assert_eq!(
            err_set("workload.submit_batch", "0"),
            "workload.submit_batch = 0 is out of range: allowed 1..=1024 (1 = submit each read at once, as fio does by default)"
        );
        assert_eq!(
            err_set("pipeline.corrupt_every", "-3"),
            "pipeline.corrupt_every = -3 is out of range: allowed >= 0 (0 = off, N = every Nth read)"
        );
        assert_eq!(
            err_set("pipeline.salt", "abc"),
            "pipeline.salt = \"abc\" is invalid: 3 hex digits is an odd number; allowed a hex string of 0..=32 bytes (an even number of hex digits)"
        );
        assert_eq!(
            err_set("pipeline.salt", "zz"),
            "pipeline.salt = \"zz\" is invalid: 'z' is not a hex digit; allowed a hex string of 0..=32 bytes (an even number of hex digits)"
        );
        assert!(err_set("pipeline.salt", &"ab".repeat(33)).contains("33 bytes is too long"));
        Settings::default()
            .set("pipeline.salt", &"ab".repeat(32))
            .unwrap();
        assert_eq!(
            err_set("workload.reader_cpus", "3-1"),
            "workload.reader_cpus = \"3-1\" is invalid: range 3-1 is backwards (did you mean 1-3?)"
        );
        assert_eq!(
            err_set("workload.reader_cpus", "[1, 1]"),
            "workload.reader_cpus = [1, 1] is invalid: CPU 1 is listed twice"
        );
        assert_eq!(
            err_set("workload.reader_cpus", "-1"),
            "workload.reader_cpus = -1 is invalid: CPU -1 is out of range: CPU numbers are 0..=8191"
        );
        let e = Settings::default()
            .set("workload.queue_depth", "0")
            .unwrap_err();
        assert_eq!(e.key(), Some("workload.queue_depth"));
        assert_eq!(e.value(), Some("0"));
        assert_eq!(e.allowed(), Some("1..=1024"));
    }

    #[test]
    fn bad_override_syntax() {
        let mut s = Settings::default();
        assert_eq!(
            s.apply_override("foo").unwrap_err().to_string(),
            "--set \"foo\": expected section.key=value"
        );
        assert_eq!(
            s.apply_override("=3").unwrap_err().to_string(),
            "--set \"=3\": expected section.key=value"
        );
        assert_eq!(s.apply_override("foo").unwrap_err().key(), None);
        let e = s.apply_override("pipeline.salt=\"ab").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--set \"pipeline.salt=\\\"ab\": invalid value: "),
            "{e}"
        );
        assert_eq!(s, Settings::default());
    }

    #[test]
    fn toml_errors_have_line_and_column() {
        let src = "# a preset\n[workload]\nengine = \"sync\"\nqueue_depth = 0\n";
        let e = Settings::from_toml_str(src, "preset.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "preset.toml:4:15: workload.queue_depth = 0 is out of range: allowed 1..=1024"
        );
        assert_eq!(e.key(), Some("workload.queue_depth"));
        assert!(matches!(
            e,
            SettingsError::Located {
                at: Some((4, 15)),
                ..
            }
        ));
        let src = "[workload]\nengine = \"sync\"\n\n[pipeline]\n  cipher = \"rot13\"\n";
        assert_eq!(
            Settings::from_toml_str(src, "preset.toml")
                .unwrap_err()
                .to_string(),
            "preset.toml:5:12: pipeline.cipher = \"rot13\" is invalid: allowed aes-256-xts, aes-256-xts-soft, adiantum"
        );
        // The first problem in file order is reported.
        let src = "[workload]\nreaders = 0\nblock_size = 1000\n";
        assert!(err_toml(src).starts_with("p.toml:2:11: workload.readers = 0"));
        let src = "[workload]\nblock_size = 1000\nreaders = 0\n";
        assert!(err_toml(src).starts_with("p.toml:2:14: workload.block_size = 1000"));
    }

    #[test]
    fn toml_parser_errors() {
        assert_eq!(
            err_toml("[workload]\nengine = \"uring\"\nengine = \"sync\"\n"),
            "p.toml:3:1: duplicate key \"engine\""
        );
        assert_eq!(
            err_toml("[workload]\n[workload]\n"),
            "p.toml:2:2: duplicate key \"workload\""
        );
        let e = err_toml("[workload]\nqueue_depth = \n");
        assert!(e.starts_with("p.toml:2:15: "), "{e}");
        let e = err_toml("[workload]\nengine = sync\n");
        assert!(e.starts_with("p.toml:2:10: "), "{e}");
        assert!(e.contains("quoted"), "{e}");
    }

    #[test]
    fn round_trip() {
        let d = Settings::default();
        assert_eq!(
            Settings::from_toml_str(&d.to_toml_string(), "rt").unwrap(),
            d
        );
        let mut s = Settings::default();
        for &(key, _, cli, _) in EVERY_KEY {
            s.set(key, cli).unwrap();
        }
        s.set("workload.block_size", "12K").unwrap();
        let text = s.to_toml_string();
        assert!(text.contains("block_size = \"12K\""), "{text}");
        assert!(text.contains("reader_cpus = [0, 1, 2, 3, 6]"), "{text}");
        assert!(text.contains("[load]\nhogs = 4\nhog_nice = -5\n"), "{text}");
        assert_eq!(Settings::from_toml_str(&text, "rt").unwrap(), s);
        s.validate(8).unwrap();

        // JSON (recordings): same key names, enums as strings, salt as hex.
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"engine\":\"sync\""), "{json}");
        assert!(json.contains("\"cipher\":\"adiantum\""), "{json}");
        assert!(json.contains("\"salt\":\"00ff\""), "{json}");
        assert!(json.contains("\"block_size\":12288"), "{json}");
        assert_eq!(serde_json::from_str::<Settings>(&json).unwrap(), s);
        // serde's TOML form reads back through the validating path too.
        let serde_toml = toml::to_string(&s).unwrap();
        assert_eq!(Settings::from_toml_str(&serde_toml, "rt").unwrap(), s);
    }

    #[test]
    fn diff_and_labels() {
        let a = Settings::default();
        assert!(a.diff(&a).is_empty());
        let mut b = a.clone();
        b.set("workers.mode", "bound").unwrap();
        b.set("workload.queue_depth", "16").unwrap();
        b.set("workload.reader_cpus", "0-3").unwrap();
        let changes = a.diff(&b);
        let labels: Vec<String> = changes.iter().map(SettingChange::label).collect();
        assert_eq!(
            labels,
            [
                "workload.queue_depth: 1 -> 16",
                "workload.reader_cpus: [] -> 0-3",
                "workers.mode: unbound -> bound",
            ]
        );
        assert_eq!(changes[2].short_label(), "mode: unbound -> bound");
        assert_eq!(
            changes[0],
            SettingChange {
                key: "workload.queue_depth".into(),
                from: "1".into(),
                to: "16".into()
            }
        );
        assert_eq!(b.diff(&a)[0].label(), "workload.queue_depth: 16 -> 1");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,6").unwrap(), vec![0, 1, 2, 3, 6]);
        assert_eq!(parse_cpu_list(" 2 , 0 ").unwrap(), vec![2, 0]);
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpu_list("5-5").unwrap(), vec![5]);
        assert_eq!(
            parse_cpu_list("3-1").unwrap_err(),
            "range 3-1 is backwards (did you mean 1-3?)"
        );
        assert_eq!(
            parse_cpu_list("0,,1").unwrap_err(),
            "empty entry in CPU list"
        );
        assert_eq!(
            parse_cpu_list("a").unwrap_err(),
            "\"a\" is not a CPU number"
        );
        assert!(parse_cpu_list("0-99999").is_err());
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6]), "0-3,6");
        assert_eq!(format_cpu_list(&[3, 1]), "3,1");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn validate_cross_field() {
        let mut s = Settings::default();
        s.set("workload.reader_cpus", "[5]").unwrap();
        let e = s.validate(2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "workload.reader_cpus = [5] is invalid: CPU 5 is out of range; this machine has 2 CPUs (0-1)"
        );
        assert_eq!(e.key(), Some("workload.reader_cpus"));
        assert_eq!(e.value(), Some("[5]"));
        s.validate(6).unwrap();
        s.set("workload.reader_cpus", "0,1").unwrap();
        assert!(
            s.validate(1)
                .unwrap_err()
                .to_string()
                .ends_with("CPU 1 is out of range; this machine has 1 CPU (0)")
        );

        let mut s = Settings::default();
        s.set("workload.block_size", "64K").unwrap();
        s.set("workload.file_size", "16K").unwrap();
        assert_eq!(
            s.validate(4).unwrap_err().to_string(),
            "workload.file_size = \"16K\" is invalid: must be at least workload.block_size (64K)"
        );

        // Public fields are checked too.
        let mut s = Settings::default();
        s.workload.queue_depth = 0;
        assert_eq!(
            s.validate(4).unwrap_err().to_string(),
            "workload.queue_depth = 0 is out of range: allowed 1..=1024"
        );
        let mut s = Settings::default();
        s.workload.file_size = 5000;
        assert_eq!(
            s.validate(4).unwrap_err().to_string(),
            "workload.file_size = \"5000\" is invalid: must be a multiple of 4096 between 4K and 1T"
        );
    }

    #[test]
    fn sizes() {
        for (text, bytes) in [
            ("4096", 4096),
            ("4K", 4096),
            ("4k", 4096),
            ("4KiB", 4096),
            ("4kb", 4096),
            ("256M", 256 << 20),
            ("1G", 1 << 30),
            ("1T", 1 << 40),
            ("2 M", 2 << 20),
            ("512B", 512),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        for bad in ["", "K", "4X", "1.5G", "-4K", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(format_size(4096), "4K");
        assert_eq!(format_size(256 << 20), "256M");
        assert_eq!(format_size(1 << 30), "1G");
        assert_eq!(format_size(1 << 40), "1T");
        assert_eq!(format_size(1536 << 20), "1536M");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(format_size(0), "0");
    }

    #[test]
    fn enums() {
        assert_eq!(EngineKind::Uring.next(), EngineKind::Sync);
        assert_eq!(EngineKind::Sync.next(), EngineKind::Uring);
        assert_eq!(VerifyMode::Unbound.next(), VerifyMode::Same);
        for m in WorkerMode::ALL {
            assert_eq!(m.to_string().parse::<WorkerMode>(), Ok(m));
        }
        assert_eq!(SleepMode::ALL.len(), 3);
        assert_eq!(format!("{:>7}", Pattern::Random), " random");
        assert_eq!(
            "x".parse::<SleepMode>().unwrap_err(),
            "\"x\" is not one of iowait, plain, poll"
        );
        assert_eq!(
            serde_json::to_string(&VerifyMode::Same).unwrap(),
            "\"same\""
        );
    }

    #[test]
    fn max_active() {
        let mut s = Settings::default();
        assert_eq!(s.effective_max_active(8), 8);
        assert_eq!(s.effective_max_active(0), 1);
        s.workers.max_active = 3;
        assert_eq!(s.effective_max_active(8), 3);
    }

    #[test]
    fn line_columns() {
        assert_eq!(line_col("abc", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("é\nx", 1), (1, 1));
        assert_eq!(line_col("x", 99), (1, 2));
    }
}
