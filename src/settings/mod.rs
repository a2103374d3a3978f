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

use serde::{Deserialize, Serialize};

use crate::crypto::CipherKind;
pub use crate::verity::merkle::HashKind;

/// The page size; block and file sizes must be multiples of it.
pub const PAGE_SIZE: u64 = 4096;
/// Largest CPU number accepted before the machine is known (the kernel's
/// `CONFIG_NR_CPUS` tops out at 8192); defined in `sys` with the CPU-list
/// parser.
pub use crate::sys::MAX_CPU_NUMBER;

/// The sections of a settings file, in order.
pub const SECTIONS: &[&str] = &["workload", "pipeline", "workers", "cache", "load", "kernel"];
/// Longest `kernel.dir`, in bytes (the kernel's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

mod choices;
pub use choices::{
    AffinityScope, CacheDevice, Completion, EngineKind, KernelEra, Pattern, SleepMode, Target,
    VerifyMode, WorkerMode,
};

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
    /// CPUs the device's completion interrupts land on (`completion =
    /// irq`); empty = each submitting CPU takes its own.
    pub irq_cpus: Vec<usize>,
    /// Where device completions queue the post-read work.
    pub completion: Completion,
    /// Size of the file read, in bytes.
    pub file_size: u64,
    /// Bytes of one sequential run of `pattern = "bursts"`.
    pub burst: u64,
    /// The CPUs the whole run may use: readers, workers, interrupt
    /// threads and hogs together ([`Settings::run_cpus`]).
    #[serde(with = "cpu_set_serde")]
    pub cpus: CpuSet,
}

/// `workload.cpus`: every CPU readpath may use, the first N of them, or a
/// list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CpuSet {
    /// Every CPU the process may use (`"all"`).
    #[default]
    All,
    /// The first N of them (`4`).
    First(usize),
    /// These (`"0-3,6"`, `[2]`), among those the process may use.
    List(Vec<usize>),
}

mod cpu_set_serde {
    use super::CpuSet;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Wire {
        Count(usize),
        List(Vec<usize>),
        Word(String),
    }

    pub fn serialize<S: Serializer>(v: &CpuSet, s: S) -> Result<S::Ok, S::Error> {
        match v {
            CpuSet::All => Wire::Word("all".into()),
            CpuSet::First(n) => Wire::Count(*n),
            CpuSet::List(l) => Wire::List(l.clone()),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<CpuSet, D::Error> {
        match Wire::deserialize(d)? {
            Wire::Count(n) => Ok(CpuSet::First(n)),
            Wire::List(l) => Ok(CpuSet::List(l)),
            Wire::Word(w) if w == "all" => Ok(CpuSet::All),
            Wire::Word(w) => Err(serde::de::Error::custom(format!(
                "workload.cpus = {w:?}: allowed \"all\", a count or a CPU list"
            ))),
        }
    }
}

mod hogs_serde {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Wire {
        Count(u32),
        Word(String),
    }

    pub fn serialize<S: Serializer>(v: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(n) => Wire::Count(*n),
            None => Wire::Word("all".into()),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        match Wire::deserialize(d)? {
            Wire::Count(n) => Ok(Some(n)),
            Wire::Word(w) if w == "all" => Ok(None),
            Wire::Word(w) => Err(serde::de::Error::custom(format!(
                "load.hogs = {w:?}: allowed \"all\" or a count"
            ))),
        }
    }
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
            irq_cpus: Vec::new(),
            completion: Completion::Thread,
            file_size: 256 << 20,
            burst: 1 << 20,
            cpus: CpuSet::All,
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
    /// Who computes verification's SHA-256: readpath or the kernel (AF_ALG).
    pub hash: HashKind,
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
            hash: HashKind::Software,
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
    /// Unbound workers stay on their pod's CPUs (the kernel's per-queue
    /// `affinity_strict`); false (the kernel's default): they start there
    /// and the scheduler may move them to any CPU the queue may use.
    pub affinity_strict: bool,
    /// The kernel whose workqueues and fs-verity the model follows; setting
    /// it also sets `mode`, `verify_mode` and `highpri` to that kernel's
    /// queue flags ([`Workers::apply_era`]).
    pub kernel_era: KernelEra,
}

impl Default for Workers {
    fn default() -> Self {
        Workers {
            mode: WorkerMode::Unbound,
            verify_mode: VerifyMode::Bound,
            highpri: true,
            max_active: 0,
            affinity_scope: AffinityScope::Cache,
            affinity_strict: false,
            kernel_era: KernelEra::V6_18,
        }
    }
}

impl Workers {
    /// Sets `mode`, `verify_mode` and `highpri` to the flags `kernel_era`'s
    /// fscrypt and fs-verity queues were allocated with. The one rule
    /// (also in `engine::resolve` and docs/model.md): the era supplies these
    /// three keys' values when it is set, and a key set after it (later on
    /// the command line, or anywhere in the same file: a file applies
    /// `kernel_era` first) wins.
    pub fn apply_era(&mut self) {
        (self.mode, self.verify_mode, self.highpri) = self.kernel_era.queue_flags();
    }
}

impl KernelEra {
    /// The era whose rules a kernel of release `release` (`uname -r`,
    /// `6.1.192`, `6.18.44-fc`) follows: 6.1 and 4.19 by their series, 5.15
    /// only as Android built it (`-android` in the release), 6.18 and later
    /// as 6.18. None for another series (6.6, 6.12: the model has no era
    /// with exactly their rules).
    pub fn of_release(release: &str) -> Option<KernelEra> {
        let mut nums = release
            .split(|c: char| !c.is_ascii_digit())
            .map(|n| n.parse::<u32>().ok());
        let (major, minor) = (nums.next()??, nums.next()??);
        match (major, minor) {
            (4, 19) => Some(KernelEra::V4_19),
            (5, 15) if release.contains("android") => Some(KernelEra::V5_15Android),
            (6, 1) => Some(KernelEra::V6_1),
            (6, m) if m >= 18 => Some(KernelEra::V6_18),
            (m, _) if m > 6 => Some(KernelEra::V6_18),
            _ => None,
        }
    }

    /// Where the era's fscrypt and fs-verity queues run work and whether
    /// they are WQ_HIGHPRI, as `(mode, verify_mode, highpri)`. fscrypt:
    /// `WQ_UNBOUND | WQ_HIGHPRI` in every era here (the 2018 seed, 4.18).
    /// fs-verity: `WQ_UNBOUND | WQ_HIGHPRI` as merged (5.4) and on the
    /// Android 5.15 the 2023 seed measured; `WQ_HIGHPRI` (bound) since that
    /// seed (v6.3, backported to Debian's 6.1), `WQ_HIGHPRI | WQ_PERCPU` in
    /// 6.18. The engine's `era` module has the rest of each era's rules.
    pub fn queue_flags(self) -> (WorkerMode, VerifyMode, bool) {
        let verify = match self {
            KernelEra::V4_19 | KernelEra::V5_15Android => VerifyMode::Unbound,
            KernelEra::V6_1 | KernelEra::V6_18 => VerifyMode::Bound,
        };
        (WorkerMode::Unbound, verify, true)
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Load {
    /// CPU-bound background threads; None = one per CPU the run may use
    /// (`"all"`, [`Settings::hog_count`]).
    #[serde(with = "hogs_serde")]
    pub hogs: Option<u32>,
    /// Nice value of the hog threads.
    pub hog_nice: i32,
}

impl Default for Load {
    fn default() -> Self {
        Load {
            hogs: Some(0),
            hog_nice: 0,
        }
    }
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
    /// `/sys/module/workqueue/parameters/default_affinity_scope` (global);
    /// None = not changed (`"default"` in files and recordings).
    #[serde(with = "scope_or_default")]
    pub affinity_scope: Option<AffinityScope>,
    /// `/sys/devices/virtual/workqueue/cpumask`; empty = not changed.
    pub unbound_cpus: Vec<usize>,
    /// The file's block device's `queue/read_ahead_kb`; None = not changed.
    pub read_ahead_kb: Option<u32>,
    /// The file's block device's `queue/rq_affinity` (0, 1, 2), which the
    /// model's `completion = irq` follows too; None = not changed on the
    /// kernel target, 1 (the kernel's default) in the model.
    pub rq_affinity: Option<u8>,
    /// The scheduler's autogroups (`/proc/sys/kernel/sched_autogroup_enabled`,
    /// 0 or 1; global), for both targets; None = not changed.
    pub autogroup: Option<u8>,
    /// Follow the kernel's post-read queues and block requests through
    /// their tracepoints (off: what tracing costs can be measured).
    pub trace: bool,
    /// Hold the kernel's page cache of the target file to `cache.size`:
    /// readpath runs in a memory cgroup of its own while it reads the
    /// kernel target.
    pub limit_cache: bool,
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel {
            dir: String::new(),
            affinity_scope: None,
            unbound_cpus: Vec::new(),
            read_ahead_kb: None,
            rq_affinity: None,
            autogroup: None,
            trace: true,
            limit_cache: true,
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

mod scope_or_default {
    use super::AffinityScope;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<AffinityScope>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(scope) => scope.serialize(s),
            None => s.serialize_str("default"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<AffinityScope>, D::Error> {
        let s = String::deserialize(d)?;
        if s == "default" {
            return Ok(None);
        }
        s.parse().map(Some).map_err(serde::de::Error::custom)
    }
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

mod key;
pub use key::Key;
mod table;
pub use table::{Apply, Bind, KEYS, Kind, Scope, Setting, Step, StepError, key_info, reference};
use table::{sections_list, unknown_key_error};

fn section_names(section: &str) -> Vec<&'static str> {
    KEYS.iter()
        .filter(|k| k.section() == section)
        .map(|k| k.name())
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

mod error;
pub use error::{SettingsError, line_col};
mod value;
pub(crate) use crate::sys::cpu_number_error;
use value::Val;
use value::{
    Entry, SpannedError, closest, entries_from_de, entries_from_toml, toml_string, wrong_type,
};

pub(crate) mod units;

pub use units::{
    CpuListError, DurationError, MAX_DURATION, MAX_FILE_SIZE, MIN_DURATION, SizeError,
    format_cpu_list, format_duration, format_size, parse_cpu_list, parse_duration,
    parse_duration_in, parse_size,
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
            // `kernel_era` first: it sets other keys of the section, which
            // the file's own values then override (see `Workers::apply_era`).
            let era_first = items
                .iter()
                .filter(|i| i.key == "kernel_era")
                .chain(items.iter().filter(|i| i.key != "kernel_era"));
            for item in era_first {
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
    pub fn set(&mut self, key: impl AsRef<str>, value: &str) -> Result<(), SettingsError> {
        let key = key.as_ref().trim();
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
                    if key_info(key).is_some_and(Setting::takes_text)
                        && !quoted
                        && !matches!(v, Val::Str(_))
                    {
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

    /// The one per-key setter behind both the TOML and the `--set` paths:
    /// the key's [`Setting`] checks the value and stores it.
    fn set_value(&mut self, key: &str, v: &Val) -> Result<(), SettingsError> {
        key_info(key)
            .ok_or_else(|| unknown_key_error(key))?
            .set(self, v)
    }

    /// The current value of `key` as a [`Val`], as a TOML file would hold it.
    fn value_of(&self, key: &str) -> Option<Val> {
        key_info(key).map(|k| k.value(self))
    }

    /// The display form of `key`'s value (`uring`, `4K`, `0-3,6`, `[]`,
    /// `""` for an empty salt); `None` for an unknown key. Passing it back
    /// to [`Self::set`] gives the same value.
    pub fn get(&self, key: impl AsRef<str>) -> Option<String> {
        Some(match self.value_of(key.as_ref())? {
            Val::Str(s) if s.is_empty() => "\"\"".to_string(),
            Val::Str(s) => s,
            Val::Array(items) if items.is_empty() => "[]".to_string(),
            Val::Array(items) => format_cpu_list(
                &items
                    .iter()
                    .filter_map(|i| match i {
                        Val::Int(n) => usize::try_from(*n).ok(),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
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
            if let Some(v) = self.value_of(k.key.name()) {
                probe.set_value(k.key.name(), &v)?;
            }
        }
        let w = &self.workload;
        if w.file_size < w.block_size {
            return Err(SettingsError::Invalid {
                key: crate::key!(workload.file_size).name().to_string(),
                value: toml_string(&format_size(w.file_size)),
                reason: format!(
                    "must be at least workload.block_size ({})",
                    format_size(w.block_size)
                ),
                allowed: key_info(crate::key!(workload.file_size).name())
                    .map(Setting::allowed)
                    .unwrap_or_default(),
            });
        }
        let machine = match cpu_count {
            0 => "this machine has no CPUs".to_string(),
            1 => "this machine has 1 CPU (0)".to_string(),
            n => format!("this machine has {n} CPUs (0-{})", n - 1),
        };
        for (key, list) in [
            (crate::key!(workload.reader_cpus).name(), &w.reader_cpus),
            (crate::key!(workload.irq_cpus).name(), &w.irq_cpus),
            (
                crate::key!(kernel.unbound_cpus).name(),
                &self.kernel.unbound_cpus,
            ),
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
        let cpus_value = || {
            self.value_of(crate::key!(workload.cpus).name())
                .map(|v| v.written())
                .unwrap_or_default()
        };
        let cpus_allowed = || {
            key_info(crate::key!(workload.cpus).name())
                .map(Setting::allowed)
                .unwrap_or_default()
        };
        match &w.cpus {
            CpuSet::All => {}
            CpuSet::First(n) if *n > cpu_count => {
                return Err(SettingsError::Invalid {
                    key: crate::key!(workload.cpus).name().into(),
                    value: cpus_value(),
                    reason: format!("{n} CPUs is more than readpath may use: {machine}"),
                    allowed: cpus_allowed(),
                });
            }
            CpuSet::First(_) => {}
            CpuSet::List(l) => {
                if let Some(&cpu) = l.iter().find(|&&c| c >= cpu_count) {
                    return Err(SettingsError::Invalid {
                        key: crate::key!(workload.cpus).name().into(),
                        value: cpus_value(),
                        reason: format!("CPU {cpu} is out of range; {machine}"),
                        allowed: cpus_allowed(),
                    });
                }
            }
        }
        // What the run may use, on a machine of CPUs 0..cpu_count.
        let run = self.run_cpus(&(0..cpu_count).collect::<Vec<_>>());
        for (key, list) in [
            (crate::key!(workload.reader_cpus).name(), &w.reader_cpus),
            (crate::key!(workload.irq_cpus).name(), &w.irq_cpus),
        ] {
            if let Some(&cpu) = list.iter().find(|c| !run.contains(c)) {
                return Err(SettingsError::Invalid {
                    key: key.to_string(),
                    value: self.value_of(key).map(|v| v.written()).unwrap_or_default(),
                    reason: format!(
                        "CPU {cpu} is not one the run may use (workload.cpus = {}: CPUs {})",
                        cpus_value(),
                        format_cpu_list(&run)
                    ),
                    allowed: format!("CPUs among {}", format_cpu_list(&run)),
                });
            }
        }
        Ok(())
    }

    /// The CPUs the run may use, sorted: those of `allowed` (the CPUs the
    /// process may use, [`crate::sys::online_cpus`]) that `workload.cpus`
    /// names, all of them, or the first N.
    pub fn run_cpus(&self, allowed: &[usize]) -> Vec<usize> {
        let mut all = allowed.to_vec();
        all.sort_unstable();
        match &self.workload.cpus {
            CpuSet::All => all,
            CpuSet::First(n) => all.into_iter().take(*n).collect(),
            CpuSet::List(l) => all.into_iter().filter(|c| l.contains(c)).collect(),
        }
    }

    /// Whether `workload.cpus` restricts the run at all.
    pub fn cpus_restricted(&self) -> bool {
        self.workload.cpus != CpuSet::All
    }

    /// The hogs to start when the run may use `run_cpus` CPUs:
    /// `load.hogs`, or one per CPU when it is `"all"`.
    pub fn hog_count(&self, run_cpus: usize) -> u32 {
        self.load
            .hogs
            .unwrap_or(u32::try_from(run_cpus).unwrap_or(u32::MAX).min(256))
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
            if let Some(v) = self.value_of(k.key.name()) {
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
        assert!(
            err_set("kernel.rq_affinity", "3")
                .contains("default (the device's value; 1 in the model), 0, 1 or 2")
        );
        assert!(err_set("kernel.read_ahead_kb", "99999999999").contains("0..=131072"));
        assert!(err_set("kernel.autogroup", "2").contains("default (not changed), 0 or 1"));
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
        assert_eq!(s.load.hogs, Some(0));
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
            assert!(!k.help.is_empty() && !k.allowed().is_empty(), "{}", k.key);
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
        // The allowed text of a choice is its enum's names, from one list.
        use crate::choice::Choice;
        let allowed = |k: &str| key_info(k).unwrap().allowed();
        assert_eq!(allowed("pipeline.cipher"), CipherKind::allowed_list());
        assert_eq!(allowed("workload.engine"), EngineKind::allowed_list());
        assert_eq!(allowed("workload.sleep"), SleepMode::allowed_list());
        assert_eq!(allowed("workload.pattern"), Pattern::allowed_list());
        assert_eq!(allowed("workers.mode"), WorkerMode::allowed_list());
        assert_eq!(allowed("workers.verify_mode"), VerifyMode::allowed_list());
        assert_eq!(allowed("workload.target"), Target::allowed_list());
        assert_eq!(allowed("workload.completion"), Completion::allowed_list());
        assert_eq!(allowed("cache.device"), CacheDevice::allowed_list());
        assert_eq!(
            allowed("workers.affinity_scope"),
            AffinityScope::allowed_list()
        );
        assert_eq!(
            allowed("kernel.affinity_scope"),
            format!("default (not changed), {}", AffinityScope::allowed_list())
        );
        assert_eq!(allowed("workload.queue_depth"), "1..=1024");
        assert_eq!(
            allowed("load.hogs"),
            "all (one per CPU the run may use) or 0..=256"
        );
        assert_eq!(
            allowed("workload.cpus"),
            "all (every CPU readpath may use) or a number 1..=8192 (the first N CPUs readpath may use) or a CPU list like \"0-3,6\" or [2]"
        );
        assert_eq!(
            allowed("kernel.rq_affinity"),
            "default (the device's value; 1 in the model), 0, 1 or 2 (0 = complete where the interrupt landed, 1 = on the submitting CPU across LLCs or (6.11+) capacities, 2 = always on the submitting CPU)"
        );
        assert_eq!(
            allowed("kernel.read_ahead_kb"),
            "default (not changed) or 0..=131072"
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
        ("workload.cpus", "\"0-6\"", "0-6", "0-6"),
        ("workload.irq_cpus", "\"0\"", "0", "0"),
        ("workload.completion", "\"irq\"", "irq", "irq"),
        ("workload.file_size", "\"1G\"", "1G", "1G"),
        ("workload.burst", "\"4M\"", "4M", "4M"),
        ("pipeline.decrypt", "false", "false", "false"),
        ("pipeline.cipher", "\"adiantum\"", "adiantum", "adiantum"),
        ("pipeline.verity", "false", "false", "false"),
        ("pipeline.hash", "\"kernel\"", "kernel", "kernel"),
        ("pipeline.salt", "\"00ff\"", "00ff", "00ff"),
        ("pipeline.corrupt_every", "100", "100", "100"),
        // 6.1's queue flags are 6.18's: only the era changes.
        ("workers.kernel_era", "\"6.1\"", "6.1", "6.1"),
        ("workers.mode", "\"inline\"", "inline", "inline"),
        ("workers.verify_mode", "\"same\"", "same", "same"),
        ("workers.highpri", "false", "false", "false"),
        ("workers.max_active", "8", "8", "8"),
        ("workers.affinity_scope", "\"system\"", "system", "system"),
        ("workers.affinity_strict", "true", "true", "true"),
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
        ("kernel.autogroup", "0", "0", "0"),
        ("kernel.limit_cache", "false", "false", "false"),
        ("kernel.trace", "false", "false", "false"),
    ];

    #[test]
    fn workload_cpus_count_list_and_all() {
        let mut s = Settings::default();
        assert_eq!(s.get("workload.cpus").unwrap(), "all");
        assert_eq!(s.run_cpus(&[3, 1, 2, 0]), vec![0, 1, 2, 3]);
        s.set("workload.cpus", "2").unwrap();
        assert_eq!(s.workload.cpus, CpuSet::First(2));
        assert_eq!(s.get("workload.cpus").unwrap(), "2");
        assert_eq!(s.run_cpus(&[4, 5, 6]), vec![4, 5]);
        s.set("workload.cpus", "1,3").unwrap();
        assert_eq!(s.workload.cpus, CpuSet::List(vec![1, 3]));
        assert_eq!(s.run_cpus(&[0, 1, 2]), vec![1]);
        s.set("workload.cpus", "[2]").unwrap();
        assert_eq!(s.workload.cpus, CpuSet::List(vec![2]));
        s.set("workload.cpus", "all").unwrap();
        assert_eq!(s.workload.cpus, CpuSet::All);
        assert!(!s.cpus_restricted());
        // Through a file, and back.
        let t = Settings::from_toml_str("[workload]\ncpus = 4\n", "p.toml").unwrap();
        assert_eq!(t.workload.cpus, CpuSet::First(4));
        assert!(t.to_toml_string().contains("cpus = 4\n"));
        let u = Settings::from_toml_str(&t.to_toml_string(), "q.toml").unwrap();
        assert_eq!(u, t);
        assert!(err_set("workload.cpus", "0").contains("out of range"));
        assert!(err_set("workload.cpus", "[]").contains("nowhere to run"));
        // More than the machine has, a CPU it lacks, readers outside.
        s.set("workload.cpus", "4").unwrap();
        let e = s.validate(2).unwrap_err().to_string();
        assert!(e.starts_with("workload.cpus = 4 is invalid: 4 CPUs is more than readpath may use: this machine has 2 CPUs (0-1)"), "{e}");
        s.set("workload.cpus", "1").unwrap();
        s.set("workload.reader_cpus", "1").unwrap();
        let e = s.validate(2).unwrap_err().to_string();
        assert!(e.starts_with("workload.reader_cpus = [1] is invalid: CPU 1 is not one the run may use (workload.cpus = 1: CPUs 0)"), "{e}");
        s.set("workload.reader_cpus", "0").unwrap();
        s.validate(2).unwrap();
    }

    #[test]
    fn hogs_all_is_one_per_run_cpu() {
        let mut s = Settings::default();
        assert_eq!(s.hog_count(8), 0);
        s.set("load.hogs", "all").unwrap();
        assert_eq!(s.load.hogs, None);
        assert_eq!(s.get("load.hogs").unwrap(), "all");
        assert_eq!(s.hog_count(8), 8);
        let t = Settings::from_toml_str("[load]\nhogs = \"all\"\n", "p.toml").unwrap();
        assert_eq!(t.load.hogs, None);
        assert!(t.to_toml_string().contains("hogs = \"all\"\n"));
        s.set("load.hogs", "3").unwrap();
        assert_eq!(s.hog_count(8), 3);
        // JSON (recordings) keeps the word too.
        let j = serde_json::to_string(&t).unwrap();
        assert!(j.contains("\"hogs\":\"all\""), "{j}");
        assert_eq!(serde_json::from_str::<Settings>(&j).unwrap(), t);
    }

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
            "unknown setting \"workers.zzz\": valid keys in [workers] are kernel_era, mode, verify_mode, highpri, max_active, affinity_scope, affinity_strict"
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
            "p.toml:1:11: unknown setting \"workload.extra\": valid keys in [workload] are target, engine, sleep, direct, pattern, block_size, queue_depth, submit_batch, readers, rate_iops, reader_cpus, cpus, irq_cpus, completion, file_size, burst"
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
            "load.hogs = -1 is out of range: allowed all (one per CPU the run may use) or 0..=256"
        );
        assert_eq!(
            err_set("load.hog_nice", "20"),
            "load.hog_nice = 20 is out of range: allowed -20..=19"
        );
        assert_eq!(
            err_set("pipeline.cipher", "rot13"),
            "pipeline.cipher = \"rot13\" is invalid: allowed aes-256-xts, aes-256-xts-soft, aes-256-xts-ti, aes-256-xts-ni4, adiantum, kernel"
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
            "preset.toml:5:12: pipeline.cipher = \"rot13\" is invalid: allowed aes-256-xts, aes-256-xts-soft, aes-256-xts-ti, aes-256-xts-ni4, adiantum, kernel"
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
            parse_cpu_list("3-1").unwrap_err().to_string(),
            "range 3-1 is backwards (did you mean 1-3?)"
        );
        assert_eq!(
            parse_cpu_list("0,,1").unwrap_err().to_string(),
            "empty entry in CPU list"
        );
        assert_eq!(
            parse_cpu_list("a").unwrap_err().to_string(),
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
            "x".parse::<SleepMode>().unwrap_err().to_string(),
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
