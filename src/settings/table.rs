//! One definition per setting: the table every other place reads.
//!
//! A [`Setting`] says everything readpath knows about one key, the way
//! ripgrep keeps one definition per flag: its name (spelled once, from the
//! field it sets), its typed [`Kind`] and range, the word that means "not
//! set", its unit, its help line, the values the chooser offers, the
//! explorer key that steps it and how ([`Bind`]), when a change takes effect
//! ([`Apply`]) and which targets it applies to ([`Scope`]). From it come the
//! TOML and `--set` parser's per-key checks and their error messages (the
//! allowed text), [`super::Settings::get`], the value chooser's ladder, the
//! explorer's change functions and help, the `:` prompt's completion, the
//! greying of model-only keys on the kernel target
//! ([`crate::engine::resolve`]) and `docs/settings.md`, which a test keeps
//! equal to [`reference`].
//!
//! Defaults live in the sections' `Default` impls (the struct is the type
//! the engine reads); [`Setting::default_text`] reads them back, so the
//! reference never restates one.

use super::units::{format_cpu_list, format_size, parse_cpu_list, parse_size};
use super::{
    AffinityScope, CacheDevice, Completion, EngineKind, HashKind, KernelEra, MAX_CPU_NUMBER,
    MAX_PATH_BYTES, PAGE_SIZE, Pattern, SettingsError, SleepMode, Target, Val, VerifyMode,
    WorkerMode, closest, cpu_number_error, wrong_type,
};
use crate::choice::Choice;
use crate::crypto::CipherKind;

use super::{Key, SECTIONS, Settings, section_names};

/// What values a key takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One of a fixed set of names, in cycle order.
    Choice(&'static [&'static str]),
    /// `true` or `false`.
    Bool,
    /// An integer in `lo..=hi`.
    Int { lo: i64, hi: i64 },
    /// A byte count, a multiple of the page size, `lo..=hi`, written `4096` or `"4K"`.
    Size { lo: u64, hi: u64 },
    /// A list of CPU numbers (`[0, 1]`, `"0-3,6"`).
    Cpus,
    /// A count of CPUs (`4`: the first four) or a list of them (`"0-3,6"`,
    /// `[2]`).
    CpuSet,
    /// `""` or an absolute path (of what it names).
    Path { of: &'static str },
    /// A hex string of at most `max_bytes` bytes.
    Hex { max_bytes: usize },
}

/// How the explorer's key steps a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// One key cycles through the values ([`Kind::Choice`] order, or
    /// true/false); Alt with it steps back.
    Cycle(char),
    /// Two keys: the first (and its aliases) doubles, the second halves,
    /// within the range.
    Double {
        up: &'static [char],
        down: &'static [char],
    },
    /// Two keys: the first adds one, the second takes one away.
    Add {
        up: &'static [char],
        down: &'static [char],
    },
}

/// The explorer key of a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bind {
    /// The key (or keys) and what they do.
    pub step: Step,
    /// Where the binding sorts in the help and the footer (most used first).
    pub rank: u8,
    /// The footer's label, if the footer shows it (while there is room).
    pub footer: Option<&'static str>,
    /// The help line; `{values}` becomes the cycle (`a -> b -> c`) and
    /// `{range}` the range (`1..1024`).
    pub help: &'static str,
}

/// When a change of the key takes effect in a running workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Apply {
    /// At once: the readers and workers restart with it; the page cache
    /// and the dataset stay.
    Live,
    /// After the dataset (file and Merkle tree) is prepared again.
    Rebuild,
    /// After the kernel target is opened again (its file system, key and tracer).
    Reopen,
}

/// Which targets a key applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The model and the kernel target, here or on a remote agent.
    Both,
    /// Only readpath's model; on the kernel target it does nothing, for the
    /// reason given.
    Model(&'static str),
    /// The model, and the kernel target of a kernel built with readpath's
    /// lab switches (`lab build --switches`: `kernel::switches`), where it
    /// flips the kernel's own queue; on any other kernel it does nothing,
    /// for the reason given.
    Switch(&'static str),
    /// Only the kernel target (`workload.target = kernel`).
    Kernel,
}

/// Why the explorer's step of a setting ([`Setting::step`]) goes nowhere.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepError {
    /// The setting has no explorer key.
    #[error("{key} has no key")]
    NoKey {
        /// The setting.
        key: super::Key,
    },
    /// A number already at the end of its range the step goes towards.
    #[error("{key} is already at its {} ({edge})", if *up { "maximum" } else { "minimum" })]
    AtLimit {
        /// The setting.
        key: super::Key,
        /// The end, as the setting writes it.
        edge: String,
        /// Stepping up (towards the maximum).
        up: bool,
    },
    /// The settings refused the new value.
    #[error(transparent)]
    Settings(#[from] SettingsError),
}

/// One setting.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// `section.key`.
    pub key: super::Key,
    /// The values it takes.
    pub kind: Kind,
    /// A word meaning "not set" and what it means (`auto`, `default`).
    pub unset: Option<(&'static str, &'static str)>,
    /// What a special value means, added to the allowed text (`0 = unlimited`).
    pub note: &'static str,
    /// The unit of a number (`bytes`, `reads/s`), empty for none.
    pub unit: &'static str,
    /// One line saying what it does.
    pub help: &'static str,
    /// The values the chooser offers for a number; empty: the kind's names,
    /// true/false, or (for a size or count) a doubling ladder over its range.
    pub ladder: &'static [&'static str],
    /// The explorer key, if it has one.
    pub bind: Option<Bind>,
    /// When a change takes effect.
    pub apply: Apply,
    /// Which targets it applies to.
    pub scope: Scope,
    /// A rarely changed refinement: the explorer's settings panel shows it
    /// only when it differs from its default.
    pub quiet: bool,
    get: fn(&Settings) -> Val,
    put: fn(&mut Settings, Val),
    /// What setting the key also does to the others (`workers.kernel_era`
    /// sets the queue flags of its kernel), after it is stored.
    then: fn(&mut Settings),
}

/// A typed field as a [`Val`] and back: the one conversion between the
/// settings' structs and the values the parser checks.
pub(super) trait FieldValue: Sized {
    fn to_val(&self) -> Val;
    /// `v` has passed its key's check, so it is of this field's type.
    fn from_val(v: Val) -> Option<Self>;
}

impl FieldValue for bool {
    fn to_val(&self) -> Val {
        Val::Bool(*self)
    }
    fn from_val(v: Val) -> Option<Self> {
        match v {
            Val::Bool(b) => Some(b),
            _ => None,
        }
    }
}

macro_rules! int_field {
    ($($t:ty),+) => {$(
        impl FieldValue for $t {
            fn to_val(&self) -> Val {
                Val::Int(i128::from(*self))
            }
            fn from_val(v: Val) -> Option<Self> {
                match v {
                    Val::Int(n) => <$t>::try_from(n).ok(),
                    _ => None,
                }
            }
        }
    )+};
}
int_field!(u8, u32, u64, i32);

impl FieldValue for Vec<usize> {
    fn to_val(&self) -> Val {
        Val::Array(self.iter().map(|&c| Val::Int(c as i128)).collect())
    }
    fn from_val(v: Val) -> Option<Self> {
        match v {
            Val::Unset => Some(Vec::new()),
            Val::Array(items) => items
                .into_iter()
                .map(|i| match i {
                    Val::Int(n) => usize::try_from(n).ok(),
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    }
}

impl FieldValue for super::CpuSet {
    fn to_val(&self) -> Val {
        match self {
            super::CpuSet::All => Val::Unset,
            super::CpuSet::First(n) => Val::Int(*n as i128),
            super::CpuSet::List(l) => l.to_val(),
        }
    }
    fn from_val(v: Val) -> Option<Self> {
        match v {
            Val::Unset => Some(super::CpuSet::All),
            Val::Int(n) => usize::try_from(n).ok().map(super::CpuSet::First),
            v @ Val::Array(_) => Vec::<usize>::from_val(v).map(super::CpuSet::List),
            _ => None,
        }
    }
}

impl FieldValue for String {
    fn to_val(&self) -> Val {
        Val::Str(self.clone())
    }
    fn from_val(v: Val) -> Option<Self> {
        match v {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl FieldValue for Vec<u8> {
    fn to_val(&self) -> Val {
        Val::Str(hex::encode(self))
    }
    fn from_val(v: Val) -> Option<Self> {
        match v {
            Val::Str(s) => hex::decode(s).ok(),
            _ => None,
        }
    }
}

impl<T: FieldValue> FieldValue for Option<T> {
    fn to_val(&self) -> Val {
        self.as_ref().map_or(Val::Unset, T::to_val)
    }
    fn from_val(v: Val) -> Option<Self> {
        match v {
            Val::Unset => Some(None),
            v => T::from_val(v).map(Some),
        }
    }
}

macro_rules! choice_field {
    ($($t:ty),+) => {$(
        impl FieldValue for $t {
            fn to_val(&self) -> Val {
                Val::Str(self.name().to_string())
            }
            fn from_val(v: Val) -> Option<Self> {
                match v {
                    Val::Str(s) => <$t as Choice>::lookup(&s),
                    _ => None,
                }
            }
        }
    )+};
}
choice_field!(
    Target,
    EngineKind,
    SleepMode,
    Pattern,
    Completion,
    CipherKind,
    HashKind,
    WorkerMode,
    VerifyMode,
    AffinityScope,
    CacheDevice,
    KernelEra
);

/// A [`Setting`] for the field `section.name`: its key is the field's path.
macro_rules! setting {
    ($section:ident . $name:ident, $kind:expr, { $($field:ident : $value:expr),* $(,)? }) => {
        Setting {
            key: $crate::key!($section.$name),
            kind: $kind,
            get: |s: &Settings| FieldValue::to_val(&s.$section.$name),
            put: |s: &mut Settings, v: Val| {
                if let Some(x) = FieldValue::from_val(v) {
                    s.$section.$name = x;
                }
            },
            $($field: $value,)*
            ..BLANK
        }
    };
}

/// The fields a [`setting!`] leaves out.
const BLANK: Setting = Setting {
    key: super::Key::checked(""),
    kind: Kind::Bool,
    unset: None,
    note: "",
    unit: "",
    help: "",
    ladder: &[],
    bind: None,
    apply: Apply::Live,
    scope: Scope::Both,
    quiet: false,
    get: |_| Val::Unset,
    put: |_, _| {},
    then: |_| {},
};

const NOT_CHANGED: Option<(&str, &str)> = Some(("default", "not changed"));

const KERNEL_QUEUES: &str = "the kernel's own queues: fscrypt_read_queue is unbound and WQ_HIGHPRI, fsverity_read_queue per-CPU and WQ_HIGHPRI, fixed when they are made (kernel.affinity_scope moves the unbound one); a kernel built with readpath's lab switches (readpath lab build --switches) flips them";

/// Every setting, in section order (the order of `--help`, files written,
/// the settings panel and error messages).
pub static KEYS: &[Setting] = &[
    setting!(workload.target, Kind::Choice(&Target::NAMES), {
        help: "what does the post-read work: readpath's model, or the running kernel's own fscrypt and fs-verity on a real ext4 file",
        apply: Apply::Reopen,
        bind: Some(Bind { step: Step::Cycle('k'), rank: 6, footer: None,
            help: "target: readpath's model <-> the running kernel (its own fscrypt, fs-verity and page cache, traced)" }),
    }),
    setting!(workload.engine, Kind::Choice(&EngineKind::NAMES), {
        help: "how reads are issued: io_uring, or blocking pread",
        bind: Some(Bind { step: Step::Cycle('e'), rank: 9, footer: Some("engine"),
            help: "engine: io_uring <-> sync pread" }),
    }),
    setting!(workload.sleep, Kind::Choice(&SleepMode::NAMES), {
        help: "how a reader waits for a read: sleep as iowait, plain sleep, or busy-poll",
        bind: Some(Bind { step: Step::Cycle('i'), rank: 8, footer: Some("sleep"),
            help: "reader sleep: iowait -> plain (NO_IOWAIT) -> poll" }),
    }),
    setting!(workload.direct, Kind::Bool, {
        help: "open the file with O_DIRECT (bypass the page cache)",
        bind: Some(Bind { step: Step::Cycle('o'), rank: 13, footer: Some("O_DIRECT"),
            help: "O_DIRECT on/off (as ext4 treats it: verity files stay buffered)" }),
    }),
    setting!(workload.pattern, Kind::Choice(&Pattern::NAMES), {
        help: "which blocks are read: random offsets, one after another, or runs of workload.burst from random offsets",
    }),
    setting!(workload.block_size, Kind::Size { lo: 4096, hi: 1 << 20 }, {
        unit: "bytes",
        help: "bytes per read, also the decrypt and verify unit",
        bind: Some(Bind { step: Step::Double { up: &['>', '.'], down: &['<', ','] }, rank: 16,
            footer: Some("bs"), help: "block size x2 / /2 ({range})" }),
    }),
    setting!(workload.queue_depth, Kind::Int { lo: 1, hi: 1024 }, {
        unit: "reads",
        help: "reads in flight per reader (io_uring)",
        bind: Some(Bind { step: Step::Double { up: &['+', '='], down: &['-', '_'] }, rank: 14,
            footer: Some("depth"), help: "queue depth x2 / /2 ({range})" }),
    }),
    setting!(workload.submit_batch, Kind::Int { lo: 1, hi: 1024 }, {
        note: "1 = submit each read at once, as fio does by default",
        unit: "reads",
        help: "reads gathered before one io_uring submission (fio's iodepth_batch_submit)",
    }),
    setting!(workload.readers, Kind::Int { lo: 1, hi: 256 }, {
        unit: "threads",
        help: "reader threads",
        ladder: &["1", "2", "3", "4", "5", "6", "7", "8", "16", "32", "64", "128", "256"],
        bind: Some(Bind { step: Step::Add { up: &[']'], down: &['['] }, rank: 15,
            footer: Some("readers"), help: "readers +1 / -1" }),
    }),
    setting!(workload.rate_iops, Kind::Int { lo: 0, hi: 10_000_000 }, {
        note: "0 = unlimited",
        unit: "reads/s",
        help: "target reads per second over all readers",
        ladder: &["0", "100", "1000", "10000", "100000", "1000000"],
    }),
    setting!(workload.reader_cpus, Kind::Cpus, {
        note: "no pinning",
        help: "CPUs the readers are pinned to, round-robin (and where completions land)",
    }),
    setting!(workload.cpus, Kind::CpuSet, {
        unset: Some(("all", "every CPU readpath may use")),
        note: "the first N CPUs readpath may use",
        unit: "CPUs",
        help: "the CPUs the whole run may use: readers, workers (bound pools exist only there, unbound pods are cut to them), interrupt threads and hogs; on the kernel target readpath's threads and the kernel's unbound workqueues (kernel.unbound_cpus unless set)",
        ladder: &["all", "1", "2", "4", "8", "16"],
        apply: Apply::Rebuild,
        quiet: true,
    }),
    setting!(workload.irq_cpus, Kind::Cpus, {
        note: "each submitting CPU takes its own interrupt, as on a multi-queue NVMe",
        help: "CPUs the device's completion interrupts land on with completion = irq, the submitting CPUs spread over them (one CPU: a phone's single UFS interrupt); kernel.rq_affinity may send the work back to the submitter",
        scope: Scope::Model("the device's interrupts land where /proc/irq/N/smp_affinity puts them (the run reports them as device_irqs)"),
    }),
    setting!(workload.completion, Kind::Choice(&Completion::NAMES), {
        help: "where a device completion queues the post-read work: an IRQ-like SCHED_FIFO thread per interrupt CPU (workload.irq_cpus), or the reader (threaded)",
        scope: Scope::Model("the kernel completes its own bios (in interrupt context or its loop worker)"),
        bind: Some(Bind { step: Step::Cycle('I'), rank: 4, footer: None,
            help: "completions: thread (the reader reaps) <-> irq (an IRQ-like SCHED_FIFO thread per CPU)" }),
    }),
    setting!(workload.file_size, Kind::Size { lo: 4096, hi: super::units::MAX_FILE_SIZE }, {
        unit: "bytes",
        help: "size of the file read",
        apply: Apply::Rebuild,
        ladder: &["4M", "16M", "64M", "256M", "1G", "4G"],
    }),
    setting!(workload.burst, Kind::Size { lo: 4096, hi: 1 << 30 }, {
        unit: "bytes",
        help: "bytes of one sequential run of pattern \"bursts\" (an app start reading a file), rounded up to whole reads",
        ladder: &["64K", "256K", "1M", "4M", "16M"],
    }),
    setting!(pipeline.decrypt, Kind::Bool, {
        help: "decrypt every block read (fscrypt)",
        bind: Some(Bind { step: Step::Cycle('d'), rank: 11, footer: Some("decrypt"),
            help: "fscrypt decryption on/off" }),
    }),
    setting!(pipeline.cipher, Kind::Choice(&CipherKind::NAMES), {
        help: "contents encryption mode used by decrypt (aes-256-xts-ti: a port of the kernel's aes-fixed-time AES; aes-256-xts-ni4: a port of Linux 6.1's xts-aes-aesni loop, four blocks at a time; kernel: the running kernel's xts(aes) through AF_ALG; all but adiantum are the same AES-256-XTS)",
        bind: Some(Bind { step: Step::Cycle('c'), rank: 12, footer: Some("cipher"),
            help: "cipher: {values}" }),
    }),
    setting!(pipeline.verity, Kind::Bool, {
        help: "verify every block read against a Merkle tree (fs-verity)",
        bind: Some(Bind { step: Step::Cycle('v'), rank: 10, footer: Some("verity"),
            help: "fs-verity verification on/off" }),
    }),
    setting!(pipeline.hash, Kind::Choice(&HashKind::NAMES), {
        help: "who computes verification's SHA-256: readpath (software), the running kernel's sha256 through AF_ALG (kernel), or readpath's port of the kernel's generic C sha256 (generic: sha256-generic's cost without AF_ALG's system calls)",
        scope: Scope::Model("the kernel's fs-verity always hashes with its own sha256"),
    }),
    // fs-verity's FS_VERITY_MAX_SALT_SIZE.
    setting!(pipeline.salt, Kind::Hex { max_bytes: 32 }, {
        help: "salt hashed into every Merkle tree block",
        apply: Apply::Rebuild,
    }),
    setting!(pipeline.corrupt_every, Kind::Int { lo: 0, hi: i64::MAX }, {
        note: "0 = off, N = every Nth read",
        unit: "reads",
        help: "flip a byte in every Nth read, to exercise verification failures",
        scope: Scope::Model("the model's: the kernel's file is not corrupted"),
        ladder: &["0", "10", "100", "1000", "10000"],
    }),
    // Before the three keys it sets, so a file written back lists it first.
    setting!(workers.kernel_era, Kind::Choice(&KernelEra::NAMES), {
        help: "the kernel whose workqueues and fs-verity the model follows: unbound pools per node (before 6.5) or per pod, tree readahead, CPU_INTENSIVE; also sets workers.mode, verify_mode and highpri to its queues' flags (a key set after it wins)",
        scope: Scope::Model("the kernel target runs the machine's own kernel"),
        then: |s| s.workers.apply_era(),
    }),
    setting!(workers.mode, Kind::Choice(&WorkerMode::NAMES), {
        help: "where decrypt runs (or the only stage, when one is on)",
        scope: Scope::Switch(KERNEL_QUEUES),
        bind: Some(Bind { step: Step::Cycle('w'), rank: 1, footer: Some("workers"),
            help: "workers: {values} (the decrypt queue, or the only one)" }),
    }),
    setting!(workers.verify_mode, Kind::Choice(&VerifyMode::NAMES), {
        help: "where verify runs when decrypt is on too; same = decrypt's queue",
        scope: Scope::Switch(KERNEL_QUEUES),
        bind: Some(Bind { step: Step::Cycle('W'), rank: 2, footer: Some("verify mode"),
            help: "verify queue: {values}" }),
    }),
    setting!(workers.highpri, Kind::Bool, {
        help: "high-priority workers (WQ_HIGHPRI)",
        scope: Scope::Switch(KERNEL_QUEUES),
        bind: Some(Bind { step: Step::Cycle('h'), rank: 3, footer: Some("highpri"),
            help: "high priority workers on/off (nice -20, WQ_HIGHPRI)" }),
    }),
    // The kernel's WQ_MAX_ACTIVE.
    setting!(workers.max_active, Kind::Int { lo: 0, hi: 512 }, {
        note: "0 = number of online CPUs",
        unit: "work items",
        help: "work items the unbound pool runs at once",
        scope: Scope::Switch(KERNEL_QUEUES),
    }),
    setting!(workers.affinity_scope, Kind::Choice(&AffinityScope::NAMES), {
        help: "unbound work runs on the queueing CPU's pod: its CPU, core, last-level cache, node, or any CPU",
        scope: Scope::Model("the model's pods; the kernel's is kernel.affinity_scope"),
        bind: Some(Bind { step: Step::Cycle('a'), rank: 5, footer: None,
            help: "unbound pods: {values} (affinity scope)" }),
    }),
    setting!(workers.affinity_strict, Kind::Bool, {
        help: "unbound workers stay on their pod's CPUs (the kernel's affinity_strict); false, the kernel's default since 6.6: a worker starts on its pod, the scheduler may move it to any CPU the queue may use (an idle one first)",
        scope: Scope::Model(KERNEL_QUEUES),
        quiet: true,
    }),
    setting!(cache.size, Kind::Size { lo: 0, hi: 1 << 40 }, {
        unset: Some(("auto", "a quarter of workload.file_size")),
        note: "0 = every read misses",
        unit: "bytes",
        help: "plaintext the page cache holds; a hit is a copy, a miss a bio to decrypt and verify (kernel target: its memory cgroup holds the file's cache to it, kernel.limit_cache)",
        ladder: &["auto", "0", "1M", "4M", "16M", "64M", "256M", "1G"],
    }),
    // Up to one bio of BIO_MAX_VECS 4 KiB pages.
    setting!(cache.read_ahead, Kind::Size { lo: 0, hi: 1 << 20 }, {
        note: "0 = no readahead",
        unit: "bytes",
        help: "largest readahead window of a sequential stream (read_ahead_kb)",
        scope: Scope::Model("the model's readahead; the kernel's is kernel.read_ahead_kb"),
        ladder: &["0", "16K", "32K", "64K", "128K", "256K", "512K", "1M"],
    }),
    setting!(cache.device, Kind::Choice(&CacheDevice::NAMES), {
        help: "what a miss reads: the device (O_DIRECT), the file's own kernel cache (no latency), or the kernel target's blocks on its device (FIEMAP, O_DIRECT)",
        scope: Scope::Model("the kernel's own page cache"),
    }),
    setting!(cache.cold_start, Kind::Bool, {
        help: "drop the page cache (file and tree) whenever the workload starts or a setting is applied",
    }),
    setting!(load.hogs, Kind::Int { lo: 0, hi: 256 }, {
        unset: Some(("all", "one per CPU the run may use")),
        unit: "threads",
        help: "CPU-bound background threads competing with the workers, on the CPUs the run may use",
        ladder: &["0", "1", "2", "3", "4", "6", "8", "16", "32", "all"],
        bind: Some(Bind { step: Step::Add { up: &['g'], down: &['G'] }, rank: 17,
            footer: Some("hogs"), help: "background CPU hogs +1 / -1" }),
    }),
    setting!(load.hog_nice, Kind::Int { lo: -20, hi: 19 }, {
        help: "nice value of the hog threads",
        ladder: &["-20", "-10", "0", "10", "19"],
    }),
    setting!(kernel.dir, Kind::Path { of: "a directory on a filesystem with the encrypt feature" }, {
        note: "an ext4 image readpath makes and loop-mounts under its data dir, as root",
        help: "where the kernel target's files live (workload.target = kernel)",
        apply: Apply::Reopen,
        scope: Scope::Kernel,
    }),
    setting!(kernel.affinity_scope, Kind::Choice(&AffinityScope::NAMES), {
        unset: NOT_CHANGED,
        help: "the kernel's workqueue.default_affinity_scope: where fscrypt's unbound queue runs work (global: every unbound queue of the machine)",
        scope: Scope::Kernel,
        bind: Some(Bind { step: Step::Cycle('K'), rank: 7, footer: None,
            help: "the kernel's workqueue affinity scope (global): {values}" }),
    }),
    setting!(kernel.unbound_cpus, Kind::Cpus, {
        unset: NOT_CHANGED,
        help: "the CPUs every unbound workqueue may run on (/sys/devices/virtual/workqueue/cpumask; global)",
        scope: Scope::Kernel,
    }),
    // 128 MiB: more than any block device's queue takes in practice.
    setting!(kernel.read_ahead_kb, Kind::Int { lo: 0, hi: 128 << 10 }, {
        unset: NOT_CHANGED,
        unit: "KiB",
        help: "the kernel file's block device's read_ahead_kb (the kernel's readahead window)",
        scope: Scope::Kernel,
        ladder: &["default", "0", "32", "128", "512", "2048", "8192"],
    }),
    setting!(kernel.rq_affinity, Kind::Int { lo: 0, hi: 2 }, {
        unset: Some(("default", "the device's value; 1 in the model")),
        note: "0 = complete where the interrupt landed, 1 = on the submitting CPU across LLCs or (6.11+) capacities, 2 = always on the submitting CPU",
        help: "where a request's completion runs (the block device's queue/rq_affinity; the model's completion = irq follows it too)",
    }),
    setting!(kernel.autogroup, Kind::Int { lo: 0, hi: 1 }, {
        unset: NOT_CHANGED,
        note: "1 = each session's tasks share one scheduling group (hogs and the model's workers compete as one group against everything else, the kernel's kworkers among them); 0 = every task competes on its own",
        help: "the scheduler's autogroups (/proc/sys/kernel/sched_autogroup_enabled; global), set for both targets: threads started after the change follow it",
        quiet: true,
    }),
    setting!(kernel.limit_cache, Kind::Bool, {
        help: "run readpath in a memory cgroup of its own that holds the kernel's page cache of the file to cache.size (false: the kernel caches the whole file, as without a cgroup)",
        scope: Scope::Kernel,
    }),
    setting!(kernel.trace, Kind::Bool, {
        help: "follow the kernel's post-read queues and block requests through their tracepoints (false: no queue figures, to measure what tracing costs)",
        scope: Scope::Kernel,
    }),
];

/// The [`Setting`] of `key` (`section.key`), if it is one.
pub fn key_info(key: &str) -> Option<&'static Setting> {
    KEYS.iter().find(|k| k.key == key)
}

impl Setting {
    /// The key's section (`workload`).
    pub fn section(&self) -> &'static str {
        self.key.name().split_once('.').map_or("", |(s, _)| s)
    }

    /// The key's name in its section (`queue_depth`).
    pub fn name(&self) -> &'static str {
        self.key
            .name()
            .split_once('.')
            .map_or(self.key.name(), |(_, n)| n)
    }

    /// What is allowed, as error messages, help and the reference say it.
    pub fn allowed(&self) -> String {
        let note = |s: String| {
            if self.note.is_empty() {
                s
            } else {
                format!("{s} ({})", self.note)
            }
        };
        let (body, list) = match self.kind {
            Kind::Choice(names) => (names.join(", "), true),
            Kind::Bool => ("true, false".to_string(), true),
            Kind::Int { lo, hi } if hi == i64::MAX => (note(format!(">= {lo}")), false),
            Kind::Int { lo, hi } if hi - lo <= 3 => {
                let items: Vec<String> = (lo..=hi).map(|n| n.to_string()).collect();
                let (last, rest) = items.split_last().unwrap_or((&items[0], &[]));
                (note(format!("{} or {last}", rest.join(", "))), true)
            }
            Kind::Int { lo, hi } => (note(format!("{lo}..={hi}")), false),
            Kind::Size { lo, hi } => (
                note(format!(
                    "a multiple of {PAGE_SIZE} between {} and {}",
                    format_size(lo),
                    format_size(hi)
                )),
                false,
            ),
            Kind::Cpus if self.unset.is_some() => ("a CPU list like \"0-3,6\"".to_string(), false),
            Kind::CpuSet => (
                format!(
                    "a number 1..={} ({}) or a CPU list like \"0-3,6\" or [2]",
                    MAX_CPU_NUMBER + 1,
                    self.note
                ),
                false,
            ),
            Kind::Cpus => (
                format!(
                    "[] ({}), a list of CPU numbers like [0, 1], or a CPU list like \"0-3,6\"",
                    self.note
                ),
                false,
            ),
            Kind::Path { of } => (
                format!("\"\" ({}) or an absolute path of {of}", self.note),
                false,
            ),
            Kind::Hex { max_bytes } => (
                format!("a hex string of 0..={max_bytes} bytes (an even number of hex digits)"),
                false,
            ),
        };
        match self.unset {
            Some((word, means)) if list => format!("{word} ({means}), {body}"),
            Some((word, means)) => format!("{word} ({means}) or {body}"),
            None => body,
        }
    }

    /// Checks `v` against the key's kind and range: the value to store, or
    /// the error that names the key, the value and what is allowed.
    pub(super) fn check(&self, v: &Val) -> Result<Val, SettingsError> {
        if let Some((word, _)) = self.unset
            && let Val::Str(t) = v
            && (t.trim().eq_ignore_ascii_case(word)
                || (t.trim().is_empty() && matches!(self.kind, Kind::Cpus)))
        {
            return Ok(Val::Unset);
        }
        match self.kind {
            Kind::Choice(names) => self.check_choice(v, names),
            Kind::Bool => match v {
                Val::Bool(_) => Ok(v.clone()),
                _ => Err(wrong_type(self.key.name(), v, "true or false".to_string())),
            },
            Kind::Int { lo, hi } => match v {
                Val::Int(n) if (i128::from(lo)..=i128::from(hi)).contains(n) => Ok(v.clone()),
                Val::Int(n) => Err(SettingsError::OutOfRange {
                    key: self.key.to_string(),
                    value: n.to_string(),
                    allowed: self.allowed(),
                }),
                _ => Err(wrong_type(
                    self.key.name(),
                    v,
                    format!("an integer {}", self.allowed()),
                )),
            },
            Kind::Size { lo, hi } => self.check_size(v, lo, hi),
            Kind::Cpus => self.check_cpus(v),
            Kind::CpuSet => self.check_cpu_set(v),
            Kind::Path { .. } => self.check_path(v),
            Kind::Hex { max_bytes } => self.check_hex(v, max_bytes),
        }
    }

    /// The error for a value of the right type that is not allowed.
    fn invalid(&self, v: &Val, reason: String) -> SettingsError {
        SettingsError::Invalid {
            key: self.key.to_string(),
            value: v.written(),
            reason,
            allowed: self.allowed(),
        }
    }

    fn check_choice(&self, v: &Val, names: &[&str]) -> Result<Val, SettingsError> {
        let list = self.cycle().join(", ");
        let Val::Str(s) = v else {
            return Err(wrong_type(self.key.name(), v, format!("one of {list}")));
        };
        if let Some(n) = names.iter().find(|n| n.eq_ignore_ascii_case(s.trim())) {
            return Ok(Val::Str(n.to_string()));
        }
        let mut reason = format!("allowed {list}");
        if let Some(c) = closest(s, names.iter().copied()) {
            reason.push_str(&format!(" (did you mean {c:?}?)"));
        }
        Err(SettingsError::Invalid {
            key: self.key.to_string(),
            value: v.written(),
            reason,
            allowed: list,
        })
    }

    fn check_size(&self, v: &Val, lo: u64, hi: u64) -> Result<Val, SettingsError> {
        let expected = || format!("a size like 4096 or \"4K\" ({})", self.allowed());
        let n: i128 = match v {
            Val::Int(n) => *n,
            Val::Str(s) => match parse_size(s) {
                Ok(n) => n.into(),
                Err(_) => return Err(wrong_type(self.key.name(), v, expected())),
            },
            _ => return Err(wrong_type(self.key.name(), v, expected())),
        };
        if n >= i128::from(lo) && n <= i128::from(hi) && n % i128::from(PAGE_SIZE) == 0 {
            Ok(Val::Int(n))
        } else {
            Err(self.invalid(v, format!("must be {}", self.allowed())))
        }
    }

    fn check_cpus(&self, v: &Val) -> Result<Val, SettingsError> {
        let numbers: Vec<i128> = match v {
            Val::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Val::Int(n) => out.push(*n),
                        _ => return Err(wrong_type(self.key.name(), v, self.allowed())),
                    }
                }
                out
            }
            Val::Int(n) => vec![*n],
            Val::Str(s) if s.trim() == "[]" => Vec::new(),
            Val::Str(s) => parse_cpu_list(s)
                .map_err(|e| self.invalid(v, e.to_string()))?
                .into_iter()
                .map(|c| c as i128)
                .collect(),
            _ => return Err(wrong_type(self.key.name(), v, self.allowed())),
        };
        let mut out: Vec<Val> = Vec::with_capacity(numbers.len());
        for n in numbers {
            let cpu = usize::try_from(n)
                .ok()
                .filter(|&c| c <= MAX_CPU_NUMBER)
                .ok_or_else(|| self.invalid(v, cpu_number_error(n)))?;
            if out.contains(&Val::Int(cpu as i128)) {
                return Err(self.invalid(v, format!("CPU {cpu} is listed twice")));
            }
            out.push(Val::Int(cpu as i128));
        }
        if out.is_empty() && self.unset.is_some() {
            return Err(self.invalid(
                v,
                "an empty CPU list would leave unbound work nowhere to run; use \"default\" to leave it unchanged".into(),
            ));
        }
        Ok(Val::Array(out))
    }

    /// A count (`4`, `"4"`) or a non-empty CPU list (`"0-3"`, `[2]`).
    fn check_cpu_set(&self, v: &Val) -> Result<Val, SettingsError> {
        let count = match v {
            Val::Int(n) => Some(*n),
            Val::Str(t) if !t.trim().is_empty() && t.trim().bytes().all(|b| b.is_ascii_digit()) => {
                Some(t.trim().parse::<i128>().unwrap_or(i128::MAX))
            }
            _ => None,
        };
        if let Some(n) = count {
            return if (1..=MAX_CPU_NUMBER as i128 + 1).contains(&n) {
                Ok(Val::Int(n))
            } else {
                Err(SettingsError::OutOfRange {
                    key: self.key.to_string(),
                    value: v.written(),
                    allowed: self.allowed(),
                })
            };
        }
        // `--set workload.cpus=[2]` arrives as text.
        let listed = match v {
            Val::Str(t) if t.trim().starts_with('[') && t.trim().ends_with(']') => {
                let t = t.trim();
                Val::Str(t[1..t.len() - 1].to_string())
            }
            v => v.clone(),
        };
        if matches!(&listed, Val::Str(t) if t.trim().is_empty())
            || matches!(&listed, Val::Array(a) if a.is_empty())
        {
            return Err(self.invalid(
                v,
                "an empty CPU list leaves the run nowhere to run; \"all\" is every CPU".into(),
            ));
        }
        match self
            .check_cpus(&listed)
            .map_err(|_| self.invalid(v, "not a count or a CPU list".into()))?
        {
            Val::Array(a) if a.is_empty() => Err(self.invalid(
                v,
                "an empty CPU list leaves the run nowhere to run; \"all\" is every CPU".into(),
            )),
            ok => Ok(ok),
        }
    }

    fn check_path(&self, v: &Val) -> Result<Val, SettingsError> {
        let Val::Str(p) = v else {
            return Err(wrong_type(self.key.name(), v, self.allowed()));
        };
        let problem = if p.is_empty() {
            return Ok(v.clone());
        } else if p.len() > MAX_PATH_BYTES {
            format!(
                "{} bytes is longer than PATH_MAX ({MAX_PATH_BYTES})",
                p.len()
            )
        } else if p.chars().any(char::is_control) {
            "it contains a control character".to_string()
        } else if !p.starts_with('/') {
            "it is not an absolute path".to_string()
        } else {
            return Ok(v.clone());
        };
        Err(self.invalid(v, format!("{problem}; allowed {}", self.allowed())))
    }

    fn check_hex(&self, v: &Val, max_bytes: usize) -> Result<Val, SettingsError> {
        let Val::Str(s) = v else {
            return Err(wrong_type(self.key.name(), v, self.allowed()));
        };
        let problem = if let Some(c) = s.chars().find(|c| !c.is_ascii_hexdigit()) {
            format!("{c:?} is not a hex digit")
        } else if s.len() % 2 != 0 {
            format!("{} hex digits is an odd number", s.len())
        } else if s.len() / 2 > max_bytes {
            format!("{} bytes is too long", s.len() / 2)
        } else {
            return Ok(Val::Str(s.to_ascii_lowercase()));
        };
        Err(self.invalid(v, format!("{problem}; allowed {}", self.allowed())))
    }

    /// Whether a bare word on the command line is this key's text even
    /// where it would parse as another TOML value (`sync`, `4K`, `00ff`).
    pub(super) fn takes_text(&self) -> bool {
        matches!(
            self.kind,
            Kind::Choice(_) | Kind::Path { .. } | Kind::Hex { .. }
        ) || self.unset.is_some() && !matches!(self.kind, Kind::Int { .. })
    }

    /// Sets the key to `v` after checking it.
    pub(super) fn set(&self, s: &mut Settings, v: &Val) -> Result<(), SettingsError> {
        let checked = self.check(v)?;
        (self.put)(s, checked);
        (self.then)(s);
        Ok(())
    }

    /// The key's value as a TOML file holds it: sizes as `"4K"`, the unset
    /// word where it is not set.
    pub(super) fn value(&self, s: &Settings) -> Val {
        let v = (self.get)(s);
        let empty = matches!(&v, Val::Unset) || matches!(&v, Val::Array(a) if a.is_empty());
        match (self.unset, &self.kind, v) {
            (Some((word, _)), _, _) if empty => Val::Str(word.to_string()),
            (_, Kind::Size { .. }, Val::Int(n)) => {
                Val::Str(format_size(u64::try_from(n).unwrap_or(0)))
            }
            (Some(_), Kind::Cpus | Kind::CpuSet, Val::Array(items)) => {
                let cpus: Vec<usize> = items
                    .iter()
                    .filter_map(|i| match i {
                        Val::Int(n) => usize::try_from(*n).ok(),
                        _ => None,
                    })
                    .collect();
                Val::Str(format_cpu_list(&cpus))
            }
            (_, _, v) => v,
        }
    }

    /// The default value, as [`Settings::get`] writes it.
    pub fn default_text(&self) -> String {
        Settings::default().get(self.key).unwrap_or_default()
    }

    /// Every value of a choice or an on/off key, in cycle order; empty for
    /// others.
    pub fn cycle(&self) -> Vec<String> {
        let mut out: Vec<String> = match self.kind {
            Kind::Choice(names) => names.iter().map(|n| n.to_string()).collect(),
            Kind::Bool => vec!["true".into(), "false".into()],
            Kind::Int { lo, hi } if hi - lo <= 3 => (lo..=hi).map(|n| n.to_string()).collect(),
            _ => Vec::new(),
        };
        if let Some((word, _)) = self.unset
            && !out.is_empty()
        {
            out.insert(0, word.to_string());
        }
        out
    }

    /// The values the chooser offers before the current one is added: the
    /// cycle, the table's ladder, or doubling over the range of a number.
    pub fn ladder(&self) -> Vec<String> {
        if !self.ladder.is_empty() {
            return self.ladder.iter().map(|s| s.to_string()).collect();
        }
        let cycle = self.cycle();
        if !cycle.is_empty() {
            return cycle;
        }
        let (lo, hi) = match self.kind {
            Kind::Int { lo, hi } => (lo.max(0) as u64, hi as u64),
            Kind::Size { lo, hi } => (lo, hi),
            _ => {
                return self
                    .unset
                    .map(|(w, _)| vec![w.to_string()])
                    .unwrap_or_else(|| match self.kind {
                        Kind::Cpus => vec!["[]".to_string()],
                        _ => Vec::new(),
                    });
            }
        };
        let from = lo.max(1);
        let mut out: Vec<String> = Vec::new();
        if lo < from {
            out.push(lo.to_string());
        }
        out.extend(
            std::iter::successors(Some(from), |v| v.checked_mul(2))
                .take_while(|v| *v <= hi)
                .map(|v| v.to_string()),
        );
        out
    }

    /// The explorer's step of the key from `s`: the next value of its
    /// cycle (or the previous one, `back`), doubled or halved, or one more
    /// or less; `up` picks which key of a pair. The new settings, or why
    /// the step goes nowhere (a limit).
    pub fn step(&self, s: &Settings, up: bool, back: bool) -> Result<Settings, StepError> {
        let Some(bind) = self.bind else {
            return Err(StepError::NoKey { key: self.key });
        };
        let mut n = s.clone();
        let current = s.get(self.key).unwrap_or_default();
        let next = match bind.step {
            Step::Cycle(_) => {
                let cycle = self.cycle();
                let i = cycle.iter().position(|v| *v == current).unwrap_or(0);
                let len = cycle.len().max(1);
                let j = if back {
                    (i + len - 1) % len
                } else {
                    (i + 1) % len
                };
                cycle.get(j).cloned().unwrap_or_default()
            }
            Step::Double { .. } | Step::Add { .. } => {
                let (lo, hi) = self.range();
                let v = match (self.get)(s) {
                    Val::Int(n) => n,
                    _ => 0,
                };
                let doubling = matches!(bind.step, Step::Double { .. });
                let want = match (doubling, up) {
                    (true, true) => v.saturating_mul(2),
                    (true, false) => v / 2,
                    (false, true) => v + 1,
                    (false, false) => v - 1,
                };
                let next = want.clamp(lo, hi);
                if next == v {
                    let edge = self.display(if up { hi } else { lo });
                    return Err(StepError::AtLimit {
                        key: self.key,
                        edge,
                        up,
                    });
                }
                next.to_string()
            }
        };
        n.set(self.key, &next)?;
        Ok(n)
    }

    /// The range of a number, as i128.
    pub fn range(&self) -> (i128, i128) {
        match self.kind {
            Kind::Int { lo, hi } => (lo.into(), hi.into()),
            Kind::Size { lo, hi } => (lo.into(), hi.into()),
            _ => (0, 0),
        }
    }

    /// A number of this key as the screens write it (`1M` for a size).
    fn display(&self, n: i128) -> String {
        match self.kind {
            Kind::Size { .. } => format_size(u64::try_from(n).unwrap_or(0)),
            _ => n.to_string(),
        }
    }

    /// The binding's help line, its `{values}` and `{range}` filled in.
    pub fn bind_help(&self) -> String {
        let Some(bind) = self.bind else {
            return String::new();
        };
        let (lo, hi) = self.range();
        let mut help = bind
            .help
            .replace("{values}", &self.cycle().join(" -> "))
            .replace(
                "{range}",
                &format!("{}..{}", self.display(lo), self.display(hi)),
            );
        if let Step::Cycle(c) = bind.step
            && self.cycle().len() > 2
        {
            help.push_str(&format!("; Alt-{c} back"));
        }
        help
    }

    /// Whether it applies to the kernel target; if not, why. A key of
    /// [`Scope::Switch`] applies where the kernel has readpath's lab
    /// switches (`switches`).
    pub fn kernel_note(&self, switches: bool) -> Option<&'static str> {
        match self.scope {
            Scope::Model(why) => Some(why),
            Scope::Switch(why) if !switches => Some(why),
            _ => None,
        }
    }
}

/// The settings reference (`docs/settings.md`), made from the table.
pub fn reference() -> String {
    let mut out = String::from(
        "# Settings reference\n\n\
         <!-- Generated from src/settings/table.rs by `cargo test`; edit the table, not this file. -->\n\n\
         Every setting, as a preset's TOML section or `--set section.key=value` takes it.\n\
         A value outside what is allowed is refused with the key, the value and this text\n\
         (exit 2). \"Applies\" says when a change reaches a running workload: *live* (the\n\
         readers and workers restart with it), *rebuild* (after the dataset is prepared\n\
         again) or *reopen* (after the kernel target is opened again). \"Targets\" says\n\
         which targets it acts on; the explorer greys it elsewhere, with the reason.\n\n\
         The defaults mirror the kernel's fscrypt and fs-verity read path (decrypt on an\n\
         unbound high-priority queue, verify on a per-CPU queue, as in v6.18); as a file\n\
         (`presets/default.toml` spells them out):\n\n```toml\n",
    );
    out.push_str(&Settings::default().to_toml_string());
    out.push_str("```\n");
    let mut section = "";
    for k in KEYS {
        if k.section() != section {
            section = k.section();
            out.push_str(&format!(
                "\n## [{section}]\n\n| key | default | allowed | unit | key in explorer | applies | targets | what it does |\n|---|---|---|---|---|---|---|---|\n"
            ));
        }
        let keys = match k.bind.map(|b| b.step) {
            Some(Step::Cycle(c)) => format!("`{c}`"),
            Some(Step::Double { up, down } | Step::Add { up, down }) => {
                format!("`{}` / `{}`", up[0], down[0])
            }
            None => String::new(),
        };
        let apply = match k.apply {
            Apply::Live => "live",
            Apply::Rebuild => "rebuild",
            Apply::Reopen => "reopen",
        };
        let scope = match k.scope {
            Scope::Both => "model, kernel".to_string(),
            Scope::Model(why) => format!("model (kernel: {why})"),
            Scope::Switch(_) => "model; kernel with readpath's lab switches (`lab build --switches`), where it flips the kernel's own queue or wait (other kernels: fixed when the queue is made)".to_string(),
            Scope::Kernel => "kernel".to_string(),
        };
        let cell = |s: &str| s.replace('|', "\\|");
        out.push_str(&format!(
            "| `{}` | `{}` | {} | {} | {} | {} | {} | {} |\n",
            k.name(),
            k.default_text(),
            cell(&k.allowed()),
            k.unit,
            keys,
            apply,
            cell(&scope),
            cell(k.help),
        ));
    }
    out.push_str(
        "\nWhat each knob models: [model.md](model.md). The `[kernel]` knobs:\n\
         [kernel.md](kernel.md). Presets (files of these sections): [presets.md](presets.md).\n",
    );
    out
}

impl Key {
    /// Its row of the settings table (here, not in `key.rs`: a key names
    /// a field, the table says what the field is).
    pub fn setting(self) -> &'static Setting {
        key_info(self.name())
            .unwrap_or_else(|| panic!("{}: a field of Settings that is no setting", self.name()))
    }
}

/// The error of a key no table row has, with the closest one as a
/// suggestion (in its section, the same name in another section, or the
/// closest name anywhere) and what is allowed.
pub(super) fn unknown_key_error(key: &str) -> SettingsError {
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

/// The sections, as `[workload], [pipeline], ...`.
pub(super) fn sections_list() -> String {
    SECTIONS
        .iter()
        .map(|s| format!("[{s}]"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_era_sets_its_queue_flags_and_a_key_set_after_it_wins() {
        use crate::settings::{KernelEra, VerifyMode};
        let mut s = Settings::default();
        s.set("workers.kernel_era", "5.15-android").unwrap();
        assert_eq!(s.workers.verify_mode, VerifyMode::Unbound);
        s.set("workers.verify_mode", "same").unwrap();
        assert_eq!(s.workers.verify_mode, VerifyMode::Same);
        // "6.1" on the command line is the era's name, not a number.
        s.set("workers.kernel_era", "6.1").unwrap();
        assert_eq!(s.workers.verify_mode, VerifyMode::Bound);
        // In a file the era applies first, wherever it is written.
        let f = Settings::from_toml_str(
            "[workers]\nverify_mode = \"same\"\nkernel_era = \"4.19\"\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(f.workers.kernel_era, KernelEra::V4_19);
        assert_eq!(f.workers.verify_mode, VerifyMode::Same);
        assert_eq!(
            Settings::from_toml_str(&f.to_toml_string(), "back").unwrap(),
            f
        );
        let e = Settings::default()
            .set("workers.kernel_era", "5.4")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("workers.kernel_era") && e.contains("5.15-android"),
            "{e}"
        );
    }

    /// `docs/settings.md` is [`reference`]: a change to the table that is
    /// not in the docs fails here. `READPATH_WRITE_DOCS=1 cargo test
    /// settings_reference` writes it.
    #[test]
    fn the_settings_reference_is_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/settings.md");
        let want = reference();
        if std::env::var_os("READPATH_WRITE_DOCS").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/settings.md differs from settings::reference(); run \
             READPATH_WRITE_DOCS=1 cargo test --lib the_settings_reference_is_the_table"
        );
    }

    #[test]
    fn every_setting_is_whole() {
        let s = Settings::default();
        for k in KEYS {
            assert!(!k.help.is_empty(), "{}", k.key);
            // The default reads back through the key's own check.
            let mut t = Settings::default();
            t.set(k.key, &k.default_text())
                .unwrap_or_else(|e| panic!("{}: {e}", k.key));
            assert_eq!(t, s, "{}", k.key);
            // Every ladder value is allowed.
            for v in k.ladder() {
                let mut t = Settings::default();
                t.set(k.key, &v)
                    .unwrap_or_else(|e| panic!("{} ladder {v}: {e}", k.key));
            }
            if let Some(b) = k.bind {
                assert!(
                    !matches!(b.step, Step::Cycle(_)) || !k.cycle().is_empty(),
                    "{}: a cycle key on a value without a cycle",
                    k.key
                );
                assert!(!k.bind_help().contains('{'), "{}", k.key);
            }
        }
        let ranks: Vec<u8> = KEYS.iter().filter_map(|k| k.bind.map(|b| b.rank)).collect();
        let mut sorted = ranks.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ranks.len(), "two bindings share a rank");
    }

    #[test]
    fn steps_stop_at_the_range() {
        let qd = key_info("workload.queue_depth").unwrap();
        let mut s = Settings::default();
        assert_eq!(
            qd.step(&s, false, false).unwrap_err().to_string(),
            "workload.queue_depth is already at its minimum (1)"
        );
        s.workload.queue_depth = 1000;
        assert_eq!(qd.step(&s, true, false).unwrap().workload.queue_depth, 1024);
        let bs = key_info("workload.block_size").unwrap();
        s.workload.block_size = 1 << 20;
        assert_eq!(
            bs.step(&s, true, false).unwrap_err().to_string(),
            "workload.block_size is already at its maximum (1M)"
        );
        let scope = key_info("kernel.affinity_scope").unwrap();
        let back = scope.step(&Settings::default(), true, true).unwrap();
        assert_eq!(back.kernel.affinity_scope, Some(AffinityScope::System));
        assert_eq!(scope.ladder()[0], "default");
    }
}
