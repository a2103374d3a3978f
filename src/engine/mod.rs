//! The engine: runs a workload from validated [`Settings`], accepts new
//! settings while running, and publishes one [`IntervalRecord`] per interval.
//!
//! It owns the dataset, the current [`pipeline::Pipeline`] (readers, queues,
//! workers), the background CPU hogs and the sampler thread. It knows nothing
//! about terminals: the headless runner, the TUI, experiments and recordings
//! all consume the same records from [`Engine::records`].
//!
//! ```text
//!  readers ──reap──▶ dispatch ──▶ [fscrypt queue] ──▶ decrypt ──▶ [fsverity queue] ──▶ verify
//!     ▲    (inline: processed here)   bound/unbound        (or same item)    bound/unbound     │
//!     └──────────────────────────── buffer given back ◀───────────────────────────────────────┘
//!  sampler: every interval, bumps the epoch, collects per-thread recorders,
//!           reads workers' schedstat and /proc/stat, emits an IntervalRecord
//! ```

mod backend;
mod cached;
mod device;
pub(crate) mod era;
mod hogs;
mod irq;
mod irq_thread;
mod kernel_run;
pub(crate) mod memory;
mod pagecache;
pub(crate) mod pipeline;
mod queue;
mod reader;
pub(crate) mod resolve;
mod sampler;
mod source;
pub(crate) mod stages;
mod tree;
pub mod workload;

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::dataset::{Dataset, DatasetError, OpenOutcome, Progress, Variant};
use crate::metrics::{Event, IntervalRecord, Notice, Recorder, Registry, WorkerSched, now_ns};
use crate::settings::{Key, SettingChange, Settings, SettingsError};
use crate::sys::Features;
use crate::verity::merkle::VerifiedCache;

use hogs::Hogs;
use kernel_run::KernelRun;
use pipeline::Pipeline;
pub use pipeline::unbound_pool_slots;
pub use resolve::{
    DataFs, Effective, KeyState, ReadPath, Refused, Resolution, in_flight, reconcile, resolve,
};
use sampler::sampler_main;

/// Default length of an interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(250);

/// Why the engine refused to start or to apply settings. In every case the
/// running workload (if any) is untouched.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A setting is out of range or of the wrong type.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A combination of settings that cannot work.
    #[error("{key} = {value} is not allowed with {other}: {reason}")]
    Conflict {
        /// The refused key.
        key: &'static str,
        /// Its value.
        value: String,
        /// The setting it conflicts with, with its value.
        other: String,
        /// Why, and what to do.
        reason: &'static str,
    },
    /// The dataset could not be prepared or opened.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// The data file could not be opened.
    #[error("opening {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Threads or rings could not be created.
    #[error("starting the pipeline: {0}")]
    Start(std::io::Error),
    /// An output (a recording) was refused or failed.
    #[error("{0}")]
    Output(String),
    /// The settings need more memory than the machine has available.
    #[error(transparent)]
    Memory(#[from] memory::TooMuchMemory),
    /// The kernel target cannot run here (not root, no loop device, no
    /// `encrypt`, a cipher the kernel lacks): what is missing.
    #[error("workload.target = \"kernel\": {0}")]
    Kernel(#[from] KernelError),
    /// A workload on another machine (`--remote`) refused or failed.
    #[error("{place}: {message}")]
    Remote {
        /// Where (`ssh:phone`).
        place: String,
        /// What the agent or the transport said.
        message: String,
        /// The user's input was refused there (exit status 2).
        bad_input: bool,
    },
}

/// Why the kernel target cannot run here, or could not be set up as the
/// settings ask ([`EngineError::Kernel`]): the key or step, and the OS's
/// error.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The machine cannot run it at all (not root, no loop device, no
    /// `encrypt`): [`crate::sys::Features::kernel_target_reason`].
    #[error("{0}")]
    Unavailable(String),
    /// Its image could not be opened or made (`kernel.dir`).
    #[error("{0}")]
    Open(#[source] std::io::Error),
    /// A step of setting it up failed.
    #[error("{step}: {source}")]
    Step {
        /// What was being done (`tracefs`, `writing its file through the
        /// kernel`).
        step: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// `pipeline.cipher` names a cipher this kernel lacks.
    #[error(
        "pipeline.cipher = \"{cipher}\": this kernel lacks the cipher ({source}); use aes-256-xts"
    )]
    MissingCipher {
        /// The cipher's name.
        cipher: &'static str,
        /// The kernel's refusal (ENOPKG).
        source: std::io::Error,
    },
    /// `kernel.limit_cache`: no memory cgroup can be made here.
    #[error("kernel.limit_cache: {0}")]
    NoCgroup(#[source] crate::sys::cgroup::CgroupError),
    /// `kernel.read_ahead_kb` / `kernel.rq_affinity` set, and the file's
    /// device has no queue directory.
    #[error(
        "kernel.read_ahead_kb / kernel.rq_affinity: the queue of {}'s device: {source}",
        base.display()
    )]
    DeviceQueue {
        /// The file whose device it is.
        base: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A knob (`kernel.*`, a lab switch) could not be set or put back.
    #[error("{key}: {source}")]
    Knob {
        /// The knob's key.
        key: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// A queue mode the kernel's lab switches cannot have.
    #[error(transparent)]
    Switch(#[from] crate::kernel::switches::InlineQueue),
    /// `cache.device = "target"`: the file could not be mapped onto its
    /// device.
    #[error(
        "cache.device = \"target\": mapping {} onto its device: {source}",
        path.display()
    )]
    DeviceMap {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl EngineError {
    /// True when the error is the user's input (exit status 2).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            EngineError::Settings(_)
                | EngineError::Conflict { .. }
                | EngineError::Memory(_)
                | EngineError::Kernel(_)
                | EngineError::Remote {
                    bad_input: true,
                    ..
                }
        ) || matches!(self, EngineError::Dataset(d) if d.is_bad_input())
    }
}

/// The data file of a pipeline, opened with or without O_DIRECT.
#[derive(Clone)]
pub struct OpenFile {
    /// The open file, shared by all readers.
    pub file: Arc<File>,
    /// Its path.
    pub path: PathBuf,
    /// True when opened with O_DIRECT.
    pub direct: bool,
    /// With `cache.device = "target"`: `file` is the block device under
    /// the kernel target's file, and this maps the file's offsets onto it.
    pub map: Option<Arc<device::DeviceMap>>,
    /// With `cache.device = "memory"`: the file mapped whole. A bio is then
    /// no copy at all: its pages are filled by the post-read work from the
    /// mapping, decrypted straight into them ([`OpenFile::device_bytes`]),
    /// as a device's DMA fills a page with no CPU.
    pub mem: Option<Arc<crate::sys::Mapping>>,
}

impl OpenFile {
    /// Opens `path`, with O_DIRECT when `direct` ([`resolve`] already chose
    /// buffered reads where the filesystem refuses O_DIRECT).
    pub fn open(path: &Path, direct: bool) -> Result<OpenFile, EngineError> {
        let mut o = OpenOptions::new();
        o.read(true);
        if direct {
            o.custom_flags(crate::sys::oflag::O_DIRECT);
        }
        let f = o.open(path).map_err(|source| EngineError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(OpenFile {
            file: Arc::new(f),
            path: path.to_path_buf(),
            direct,
            map: None,
            mem: None,
        })
    }

    /// The bytes a bio of `len` bytes at file offset `off` reads from the
    /// memory device (`cache.device = "memory"`), None for a real device.
    #[inline]
    pub fn device_bytes(&self, off: u64, len: usize) -> Option<&[u8]> {
        let m = self.mem.as_ref()?;
        m.bytes().get(off as usize..off as usize + len)
    }

    /// The device offset a bio at file offset `off` reads (the same
    /// offset, unless the file is read on its device).
    #[inline]
    pub fn device_offset(&self, off: u64) -> u64 {
        match &self.map {
            Some(m) => m.device_offset(off),
            None => off,
        }
    }

    /// Pages a bio starting at page `p` may span before the blocks stop
    /// being contiguous on the device (`max` when not mapped).
    #[inline]
    pub fn contiguous_pages(&self, p: u64, max: u64) -> u64 {
        match &self.map {
            Some(m) => (m.contiguous(p * pagecache::PAGE as u64) / pagecache::PAGE as u64).min(max),
            None => max,
        }
    }
}

/// What the filesystem of a dataset allows (asked once per dataset).
fn probe_data_fs(ds: &Dataset) -> DataFs {
    let path = ds.path(Variant::Plain);
    DataFs {
        name: crate::sys::fs_type_name(&path),
        o_direct: crate::sys::supports_o_direct(&path).unwrap_or(true),
    }
}

/// The kernel target's tracer (None with `kernel.trace = false`) and the
/// file it reads, as the sampler sees them.
/// The kernel target's tracer, open file and memory cgroup, as the
/// sampler takes them each interval.
type KernelShared = (
    Option<Arc<crate::kernel::trace::Tracer>>,
    Arc<File>,
    Option<Arc<crate::kernel::cgroup::CacheCgroup>>,
);

struct Shared {
    start_ns: u64,
    registry: Arc<Registry>,
    events: Mutex<Vec<Event>>,
    notices: Mutex<Vec<Notice>>,
    running: AtomicBool,
    sampler_stop: AtomicBool,
    sampler_thread: Mutex<Option<std::thread::Thread>>,
    /// The page cache in use (the sampler reads how much it holds).
    pcache: Mutex<Option<Arc<pagecache::PageCache>>>,
    /// The running pipeline's queues (the sampler reads their pools).
    pools: Mutex<Vec<pipeline::QueuePools>>,
    /// The kernel target's tracer and open file, while it runs (the
    /// sampler takes each interval's trace and the file's cached pages).
    kernel: Mutex<Option<KernelShared>>,
    /// The kernel's workqueue affinity scope while the kernel target ran.
    kernel_scope: Mutex<Option<String>>,
    /// What the kernel refused the running threads (one of each kind):
    /// the effective settings are what ran ([`Engine::effective`]).
    refused: Mutex<Vec<Refused>>,
}

impl Shared {
    fn t_s(&self) -> f64 {
        (now_ns() - self.start_ns) as f64 / 1e9
    }
}

/// Where pipeline threads report notices (cheap to clone; not on the hot path).
#[derive(Clone)]
pub struct NoticeSink(Arc<Shared>);

impl NoticeSink {
    /// Adds a notice to the next interval record.
    pub fn push(&self, text: String) {
        let n = Notice {
            t_s: self.0.t_s(),
            text,
        };
        self.0
            .notices
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(n);
    }

    /// The kernel refused `r` to a running thread: its notice, in the
    /// resolver's words, once for each kind until the threads of that kind
    /// start again ([`NoticeSink::forget_refused`]), and the engine's
    /// effective settings become what runs.
    pub fn refused(&self, r: Refused) {
        let mut all = self.0.refused.lock().unwrap_or_else(|e| e.into_inner());
        if all.iter().any(|x| x.key() == r.key()) {
            return;
        }
        self.push(r.notice());
        all.push(r);
    }

    /// The threads a refusal of `key` was about start again: they may be
    /// granted it this time.
    pub fn forget_refused(&self, key: Key) {
        self.0
            .refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|x| x.key() != key);
    }
}

/// Engine options that are not workload settings.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Length of an interval.
    pub interval: Duration,
    /// The data dir holding datasets.
    pub data_dir: PathBuf,
    /// Failures to inject (tests of the error paths); none by default.
    pub faults: Faults,
    /// Page-cache readers compare every read's bytes with the dataset's
    /// plaintext and count here (tests); none by default.
    pub check_copies: Option<Arc<CopyCheck>>,
}

/// What page-cache readers handed the application, checked against the
/// dataset's plaintext (a test's proof that a read gets the bytes the model
/// decrypted and verified, from the right frames, at the right offsets).
#[derive(Debug, Default)]
pub struct CopyCheck {
    /// Reads whose bytes were compared.
    pub reads: AtomicU64,
    /// Of those, reads whose bytes differ from the plaintext.
    pub wrong: AtomicU64,
}

impl EngineOptions {
    /// Options with the given interval and data dir, no faults.
    pub fn new(interval: Duration, data_dir: PathBuf) -> EngineOptions {
        EngineOptions {
            interval,
            data_dir,
            faults: Faults::default(),
            check_copies: None,
        }
    }
}

/// Failures a test can make the engine meet, to prove the error paths
/// never free memory the kernel or a worker still uses, and delays that
/// show what a measurement covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// A uring reader's submission fails once it has reads in the kernel
    /// and items at the workers (after its first 64 submissions).
    pub fail_submit_when_busy: bool,
    /// The workers' nice -20 is refused (EPERM) as a kernel that grants
    /// it to no thread of this process would, though the machine's
    /// features said it could be had.
    pub deny_highpri: bool,
    /// Every post-read item's hand-on (queueing the bio on the verify
    /// queue, or ending the read) first spins this long, as a slow wake-up
    /// would: a test checks that an item's execution covers its end, as
    /// the kernel's `workqueue_execute_end` follows it.
    pub slow_hand_on: Option<std::time::Duration>,
}

/// Totals over a whole run, returned by [`Engine::stop`].
pub struct RunTotals {
    /// Every interval's data merged.
    pub rec: Recorder,
    /// Workers' scheduler counters over the run.
    pub workers: WorkerSched,
    /// The irq threads' (`workload.completion = irq`), apart.
    pub irq: WorkerSched,
    /// Seconds the workload ran (paused time excluded).
    pub duration_s: f64,
    /// Every notice of the run.
    pub notices: Vec<Notice>,
    /// Every event of the run.
    pub events: Vec<Event>,
    /// Intervals recorded.
    pub intervals: u64,
    /// Mean process CPU over the run, % of one CPU.
    pub process_cpu_pct: f64,
    /// Plaintext the page cache held at the end (bytes).
    pub page_cache_bytes: u64,
    /// Each queue's worker pool over the run: its last size, and the most
    /// workers blocked at once (`blocked_peak`); running, blocked and
    /// pending as at the end.
    pub pools: Vec<crate::metrics::PoolRecord>,
    /// The kernel's post-read queues over the run, from their tracepoints
    /// (`workload.target = "kernel"`), by name.
    pub kernel: std::collections::BTreeMap<String, crate::kernel::trace::QueueTrace>,
    /// The kernel's workqueue affinity scope while the kernel target ran.
    pub kernel_scope: Option<String>,
    /// The run by settings phase: a new phase at each live change of
    /// settings (the interval holding the change belongs to neither).
    pub phases: Vec<Phase>,
}

/// Most settings phases a run keeps apart; later changes go to the last.
pub const MAX_PHASES: usize = 32;

/// One stretch of a run under the same settings.
pub struct Phase {
    /// When it began, seconds since the engine started.
    pub start_s: f64,
    /// The changes that began it (none for the first).
    pub changes: Vec<String>,
    /// Its intervals merged.
    pub rec: Recorder,
    /// Seconds measured (paused and changing intervals excluded).
    pub secs: f64,
    /// Workers' run_delay over it, us.
    pub run_delay_us: f64,
}

impl Phase {
    fn new(start_s: f64, changes: Vec<String>) -> Phase {
        Phase {
            start_s,
            changes,
            rec: Recorder::new(),
            secs: 0.0,
            run_delay_us: 0.0,
        }
    }
}

/// A running engine.
pub struct Engine {
    shared: Arc<Shared>,
    opts: EngineOptions,
    requested: Settings,
    /// What `requested` runs as here (the one answer of [`resolve`]).
    resolution: Resolution,
    /// What the dataset's filesystem allows.
    data_fs: DataFs,
    features: Features,
    dataset: Arc<Dataset>,
    cache: Arc<VerifiedCache>,
    /// Where each reader's offsets stood when it last stopped: a reader
    /// started again goes on from there ([`source::Streams`]).
    streams: Arc<source::Streams>,
    /// The model's page cache of the file read; kept across live changes
    /// (resized, keeping what fits, when its geometry changes) and across
    /// direct-read configurations, as the kernel keeps its page cache.
    pcache: Option<Arc<pagecache::PageCache>>,
    pipeline: Option<Pipeline>,
    hogs: Hogs,
    paused: bool,
    sampler: Option<JoinHandle<RunTotals>>,
    rx: Receiver<IntervalRecord>,
    /// The kernel target, while `workload.target = "kernel"` runs.
    kernel: Option<KernelRun>,
    /// System knobs turned for both targets (`kernel.autogroup`), put back
    /// when the engine stops (and by the next start after a crash).
    knobs: Option<crate::kernel::knobs::SystemKnobs>,
}

/// Refuses settings whose memory (worked out by [`memory::MemoryNeed`])
/// does not fit in what the machine has available plus `freed` bytes (what
/// the running pipeline gives back before the new one starts).
fn check_memory(eff: &Settings, freed: u64) -> Result<(), EngineError> {
    let Some(available) = crate::sys::memory_available_bytes() else {
        return Ok(());
    };
    memory::MemoryNeed::of(eff, eff.run_cpus(&crate::sys::online_cpus()).len())
        .check(eff, available.saturating_add(freed))
        .map_err(EngineError::Memory)
}

impl Engine {
    /// Validates the settings, opens (or prepares) the dataset and starts the
    /// workload and the sampler.
    pub fn start(
        settings: Settings,
        opts: EngineOptions,
        progress: Progress<'_>,
    ) -> Result<Engine, EngineError> {
        let cpus = crate::sys::online_cpus();
        settings.validate(cpus.len())?;
        let features = crate::sys::probe_features();
        // Nothing in the data dir is acted on before it passes the trust
        // rule; then what a readpath killed with SIGKILL left outside it
        // (system knobs, tracefs instances, mounts) is put back first.
        crate::dataset::check_data_dir(&opts.data_dir)?;
        let put_back = crate::kernel::restore_all(&opts.data_dir);
        // Refused before the dataset is touched; the filesystem's answer
        // (O_DIRECT) comes with the dataset, and the launch resolves again.
        let early = resolve(&settings, &features, &DataFs::capable())?;
        check_memory(&early.effective, 0)?;
        let (dataset, outcome) = Dataset::open_or_prepare(
            &opts.data_dir,
            settings.workload.file_size,
            &settings.pipeline.salt,
            progress,
        )?;
        // Resolved again with the dataset's filesystem (O_DIRECT), before
        // any thread exists: nothing to undo on an error.
        let data_fs = probe_data_fs(&dataset);
        let resolution = resolve(&settings, &features, &data_fs)?;
        let cache = Arc::new(dataset.tree().new_cache());
        let shared = Arc::new(Shared {
            start_ns: now_ns(),
            registry: Arc::new(Registry::default()),
            events: Mutex::new(Vec::new()),
            notices: Mutex::new(Vec::new()),
            running: AtomicBool::new(false),
            sampler_stop: AtomicBool::new(false),
            sampler_thread: Mutex::new(None),
            pcache: Mutex::new(None),
            pools: Mutex::new(Vec::new()),
            kernel: Mutex::new(None),
            kernel_scope: Mutex::new(None),
            refused: Mutex::new(Vec::new()),
        });
        let sink = NoticeSink(shared.clone());
        for p in put_back.done {
            sink.push(format!("put back what a killed readpath left: {p}"));
        }
        for p in put_back.problems {
            sink.push(format!("not put back: {p}"));
        }
        // Readahead's largest request is the data file's device's.
        let (io_pages, why) = io_pages_of(&dataset.path(Variant::Plain));
        pagecache::set_io_pages(io_pages);
        if let Some(why) = why {
            sink.push(why);
        }
        match outcome {
            OpenOutcome::Existing => {}
            OpenOutcome::Created => {
                sink.push(format!("dataset prepared in {}", dataset.dir().display()))
            }
            OpenOutcome::Rebuilt(why) => sink.push(format!("dataset rebuilt ({why})")),
        }
        let (tx, rx) = channel();
        let sampler = {
            let shared = shared.clone();
            let interval = opts.interval;
            std::thread::Builder::new()
                .name("sampler".into())
                .spawn(move || sampler_main(shared, interval, tx))
                .map_err(EngineError::Start)?
        };
        let mut engine = Engine {
            shared,
            opts,
            requested: settings.clone(),
            resolution: resolution.clone(),
            data_fs,
            features,
            dataset: Arc::new(dataset),
            cache,
            streams: Arc::default(),
            pcache: None,
            pipeline: None,
            hogs: Hogs::none(),
            paused: false,
            sampler: Some(sampler),
            rx,
            kernel: None,
            knobs: None,
        };
        if let Err(e) = engine.launch_with(resolution, progress) {
            engine.shutdown();
            return Err(e);
        }
        Ok(engine)
    }

    fn sink(&self) -> NoticeSink {
        NoticeSink(self.shared.clone())
    }

    /// Builds and starts a pipeline for a resolution (none must be
    /// running); its fallbacks become notices.
    fn launch(&mut self, r: Resolution) -> Result<(), EngineError> {
        self.launch_with(r, &mut |_, _| {})
    }

    /// [`Engine::launch`], with the progress of writing the kernel
    /// target's file when it is written now.
    fn launch_with(&mut self, r: Resolution, progress: Progress<'_>) -> Result<(), EngineError> {
        let eff = r.effective.clone();
        let variant = Variant::for_pipeline(eff.pipeline.decrypt, eff.pipeline.cipher);
        let on_target_device = r.path == ReadPath::PageCache
            && eff.cache.device == crate::settings::CacheDevice::Target;
        let mut target_dev = None;
        let path = if r.path == ReadPath::Kernel {
            self.kernel_file(&eff, progress)?
        } else if on_target_device {
            let f = self.target_device(&eff, progress)?;
            let p = f.path.clone();
            target_dev = Some(f);
            p
        } else {
            self.leave_kernel();
            self.dataset.path(variant)
        };
        let pcache = match r.path {
            ReadPath::PageCache => Some(self.page_cache_for(&eff)?),
            _ => None,
        };
        // A cold start: nothing cached when this configuration begins.
        if eff.cache.cold_start
            && let Some(pc) = &pcache
        {
            pc.drop_all();
            self.mark("drop cache (cold start)");
        }
        *self.shared.pcache.lock().unwrap_or_else(|e| e.into_inner()) = pcache.clone();
        let copy_check = match (&self.opts.check_copies, &pcache) {
            (Some(c), Some(_)) => {
                let plain = self.dataset.path(Variant::Plain);
                let m = File::open(&plain)
                    .and_then(|f| crate::sys::Mapping::read_only(&f))
                    .map_err(|source| EngineError::Open {
                        path: plain,
                        source,
                    })?;
                Some((c.clone(), Arc::new(m)))
            }
            _ => None,
        };
        let direct = match r.path {
            ReadPath::PageCache => eff.cache.device != crate::settings::CacheDevice::Memory,
            _ => eff.workload.direct,
        };
        let mut file = match target_dev {
            Some(f) => f,
            None => OpenFile::open(&path, direct)?,
        };
        if r.path == ReadPath::PageCache && eff.cache.device == crate::settings::CacheDevice::Memory
        {
            let m = crate::sys::Mapping::read_only(&file.file).map_err(|e| {
                EngineError::Start(std::io::Error::new(
                    e.kind(),
                    format!("mapping the ciphertext the memory device reads: {e}"),
                ))
            })?;
            file.mem = Some(Arc::new(m));
        }
        if r.path == ReadPath::Kernel
            && let Some(k) = self.kernel.as_mut()
        {
            k.file = Some(file.file.clone());
            *self.shared.kernel.lock().unwrap_or_else(|e| e.into_inner()) = Some((
                k.traced.as_ref().map(|t| t.tracer.clone()),
                file.file.clone(),
                k.cgroup.clone(),
            ));
            if eff.cache.cold_start {
                let _ = crate::sys::fadvise_dontneed(&file.file);
                self.mark("drop cache (cold start: POSIX_FADV_DONTNEED)");
            }
        }
        let sink = self.sink();
        for n in r.notices() {
            sink.push(n);
        }
        // The pipeline's threads start again: what was refused them may be
        // granted now (a hog's refusal is forgotten when the hogs restart).
        sink.forget_refused(crate::key!(workers.highpri));
        sink.forget_refused(crate::key!(workload.completion));
        let run_cpus = eff.run_cpus(&crate::sys::online_cpus());
        if self.set_autogroup(&eff)? {
            // A thread's group is decided when it starts: the hogs start
            // again in the new one (the workers and readers start below).
            self.hogs
                .set(
                    0,
                    eff.load.hog_nice,
                    &run_cpus,
                    &sink,
                    &self.shared.registry,
                )
                .map_err(EngineError::Start)?;
        }
        self.hogs
            .set(
                eff.hog_count(run_cpus.len()),
                eff.load.hog_nice,
                &run_cpus,
                &sink,
                &self.shared.registry,
            )
            .map_err(EngineError::Start)?;
        let p = Pipeline::start(
            eff.clone(),
            file,
            self.dataset.clone(),
            self.cache.clone(),
            self.streams.clone(),
            self.shared.registry.clone(),
            sink,
            self.opts.faults,
            pcache,
            copy_check,
        )
        .map_err(EngineError::Start)?;
        *self.shared.pools.lock().unwrap_or_else(|e| e.into_inner()) = p.pools();
        self.pipeline = Some(p);
        self.resolution = r;
        self.shared.running.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Turns the scheduler's autogroups as `eff` asks (`kernel.autogroup`;
    /// unset: put back if this engine changed them). True when the value
    /// in force changed.
    fn set_autogroup(&mut self, eff: &Effective) -> Result<bool, EngineError> {
        use crate::kernel::knobs::{Knob, SystemKnobs};
        let path = Path::new(crate::sys::AUTOGROUP_SYSCTL);
        let read = || {
            std::fs::read_to_string(path)
                .map(|v| v.trim().to_string())
                .ok()
        };
        let before = read();
        let r = match eff.kernel.autogroup {
            Some(v) => self
                .knobs
                .get_or_insert_with(|| SystemKnobs::new(&self.opts.data_dir))
                .set(&Knob::autogroup(), &v.to_string()),
            None => match self.knobs.as_mut() {
                Some(k) if k.original(path).is_some() => k.restore(path),
                _ => return Ok(false),
            },
        };
        r.map_err(|source| KernelError::Knob {
            key: crate::key!(kernel.autogroup).name(),
            source,
        })?;
        Ok(read() != before)
    }

    /// The page cache a page-cache pipeline of `eff` reads through: the
    /// current one when its geometry fits, else a new one holding what fits
    /// of the current one's pages. No pipeline runs while this is called.
    fn page_cache_for(
        &mut self,
        eff: &Effective,
    ) -> Result<Arc<pagecache::PageCache>, EngineError> {
        let g = memory::CacheGeometry::of(eff);
        if let Some(pc) = &self.pcache
            && pc.file_pages() == g.file_pages
            && pc.tree_pages() == g.tree_pages
            && pc.capacity() == g.capacity
            && pc.frames() == pagecache::frames_for(g.capacity, g.reserve)
            && pc.bio_slots() == g.bios
            && pc.readers() == g.readers
        {
            return Ok(pc.clone());
        }
        let pc = pagecache::PageCache::with_tree(
            g.file_pages,
            g.tree_pages,
            g.capacity,
            g.reserve,
            g.bios,
            g.readers,
        )
        .map_err(|e| {
            EngineError::Start(std::io::Error::new(
                e.kind(),
                format!("creating the page cache's frames (a memfd): {e}"),
            ))
        })?;
        let pc = Arc::new(pc);
        if let Some(old) = self.pcache.take() {
            pc.migrate_from(&old);
        }
        self.pcache = Some(pc.clone());
        Ok(pc)
    }

    /// Records where each work item ran from now on (the records'
    /// `timeline`: the explorer's timeline open, a trace file), or stops.
    /// The model's threads record their spans; on the kernel target its
    /// tracer turns the kworkers' items (its workqueue tracepoints) into
    /// spans, and the readers record their sleeps as the model's do. Why
    /// not, where the kernel target runs untraced.
    pub fn trace(&mut self, on: bool) -> Result<(), String> {
        crate::metrics::set_tracing(on);
        match &self.kernel {
            Some(k) if on && k.traced.is_none() => Err(
                "the kernel target runs untraced (kernel.trace = false, or no tracefs): the lanes show readpath's readers and hogs only"
                    .into(),
            ),
            _ => Ok(()),
        }
    }

    /// Drops every page of the model's page cache (the `x` key; `echo 1 >
    /// /proc/sys/vm/drop_caches` for this file), marked on the charts.
    /// Returns the pages dropped (None: no page cache in use).
    pub fn drop_cache(&mut self) -> Option<usize> {
        if self.resolution.path == ReadPath::Kernel {
            // The kernel's own cache of the file: POSIX_FADV_DONTNEED.
            let f = self.kernel.as_ref()?.file.clone()?;
            let n = crate::sys::page_cache_residency(&f).map_or(0, |r| r.resident_pages);
            crate::sys::fadvise_dontneed(&f).ok()?;
            self.mark("drop cache (POSIX_FADV_DONTNEED)");
            return Some(n as usize);
        }
        if self.resolution.path != ReadPath::PageCache {
            return None;
        }
        let n = self.pcache.as_ref().map(|pc| pc.drop_all())?;
        self.mark("drop cache");
        Some(n)
    }

    /// Pages of the page cache in flight (for tests: 0 while paused, when
    /// every pipeline has drained; a page left in flight would hang its
    /// next reader).
    pub fn pages_in_flight(&self) -> usize {
        self.pcache.as_ref().map_or(0, |pc| pc.pages_in_flight())
    }

    /// Bytes of plaintext the page cache holds now (0: none in use).
    pub fn page_cache_bytes(&self) -> u64 {
        // The kernel target: its own cache of the file (mincore).
        if let Some(f) = self.kernel.as_ref().and_then(|k| k.file.as_ref()) {
            return crate::sys::page_cache_residency(f)
                .map_or(0, |r| r.resident_pages * crate::sys::page_size() as u64);
        }
        self.pcache
            .as_ref()
            .map_or(0, |pc| (pc.resident() * pagecache::PAGE) as u64)
    }

    fn halt(&mut self) {
        self.shared
            .pools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        if let Some(mut p) = self.pipeline.take() {
            p.stop();
        }
        self.shared.running.store(false, Ordering::SeqCst);
    }

    /// Applies new settings to the running workload: in-flight reads drain,
    /// the pipeline is rebuilt, metrics continue, and every changed key
    /// becomes an event. On error nothing changes.
    pub fn apply(&mut self, new: Settings) -> Result<Vec<SettingChange>, EngineError> {
        new.validate(crate::sys::online_cpus().len())?;
        let resolution = resolve(&new, &self.features, &self.data_fs)?;
        let changes = self.requested.diff(&new);
        if changes.is_empty() {
            return Ok(changes);
        }
        let eff = self.effective();
        let running = memory::MemoryNeed::of(&eff, eff.run_cpus(&crate::sys::online_cpus()).len());
        let freed = if self.paused {
            0
        } else {
            running.buffers + running.histograms
        };
        check_memory(&resolution.effective, freed)?;
        let new_dataset = if new.workload.file_size != self.requested.workload.file_size
            || new.pipeline.salt != self.requested.pipeline.salt
        {
            let mut quiet = |_: u64, _: u64| {};
            let (ds, outcome) = Dataset::open_or_prepare(
                &self.opts.data_dir,
                new.workload.file_size,
                &new.pipeline.salt,
                &mut quiet,
            )?;
            if let OpenOutcome::Rebuilt(why) = outcome {
                self.sink().push(format!("dataset rebuilt ({why})"));
            }
            Some(ds)
        } else {
            None
        };
        let was_paused = self.paused;
        self.halt();
        let old_dataset = new_dataset.map(|ds| {
            let cache = Arc::new(ds.tree().new_cache());
            (
                std::mem::replace(&mut self.dataset, Arc::new(ds)),
                std::mem::replace(&mut self.cache, cache),
            )
        });
        if was_paused {
            self.resolution = resolution;
        } else if let Err(e) = self.launch(resolution) {
            // Put the previous workload back; the caller sees the error.
            if let Some((ds, cache)) = old_dataset {
                self.dataset = ds;
                self.cache = cache;
            }
            let old = self.resolution.clone();
            let _ = self.launch(old);
            return Err(e);
        }
        self.requested = new;
        let t_s = self.shared.t_s();
        let mut ev = self.shared.events.lock().unwrap_or_else(|e| e.into_inner());
        for c in &changes {
            ev.push(Event {
                t_s,
                label: c.label(),
            });
        }
        Ok(changes)
    }

    /// Adds a marker event (e.g. "baseline") to the next record.
    pub fn mark(&self, label: impl Into<String>) {
        let e = Event {
            t_s: self.shared.t_s(),
            label: label.into(),
        };
        self.shared
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(e);
    }

    /// Pauses the workload (threads drain and exit; the sampler goes on).
    pub fn pause(&mut self) {
        if !self.paused {
            self.halt();
            self.hogs.stop_all();
            self.paused = true;
            self.mark("paused");
        }
    }

    /// Resumes a paused workload.
    pub fn resume(&mut self) -> Result<(), EngineError> {
        if self.paused {
            let r = self.resolution.clone();
            self.launch(r)?;
            self.paused = false;
            self.mark("resumed");
        }
        Ok(())
    }

    /// Work items a worker found after their reader had freed its buffers
    /// The running pipeline's queues as built: each queue's name, kind and
    /// per-CPU pools or pods (empty while none runs).
    pub fn pools(&self) -> Vec<pipeline::QueuePools> {
        self.shared
            .pools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// (counted in debug builds; anything but 0 is a use after free).
    pub fn touched_freed(&self) -> u64 {
        self.pipeline.as_ref().map_or(0, |p| p.touched_freed())
    }

    /// True while paused.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// The settings as requested.
    pub fn settings(&self) -> &Settings {
        &self.requested
    }

    /// The settings as running: after the resolver's fallbacks (io_uring
    /// unavailable, no O_DIRECT, no NO_IOWAIT...) and what the kernel
    /// refused the running threads since ([`Refused`]).
    pub fn effective(&self) -> Settings {
        let mut e = self.resolution.effective.clone();
        for r in self
            .shared
            .refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            e.refused(r);
        }
        e.settings().clone()
    }

    /// How the requested settings resolved here: the effective settings,
    /// each fallback and each limit with its reason.
    pub fn resolution(&self) -> &Resolution {
        &self.resolution
    }

    /// What the kernel and machine offer.
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// The dataset in use.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    /// Where the completion interrupts of the block device under the file
    /// read land: the kernel target's device while it runs, else the
    /// dataset's (what `workload.irq_cpus` models).
    pub fn device_irqs(&self) -> crate::sys::DeviceIrqs {
        match &self.kernel {
            Some(k) => crate::sys::device_irqs_of(k.target.device.0, k.target.device.1),
            None => crate::sys::device_irqs(self.dataset.dir()),
        }
    }

    /// One record per interval, in order.
    pub fn records(&self) -> &Receiver<IntervalRecord> {
        &self.rx
    }

    fn shutdown(&mut self) -> Option<RunTotals> {
        self.halt();
        self.hogs.stop_all();
        self.note_kernel_scope();
        self.shared.sampler_stop.store(true, Ordering::SeqCst);
        if let Some(t) = self
            .shared
            .sampler_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            t.unpark();
        }
        let bytes = self.page_cache_bytes();
        let totals = self
            .sampler
            .take()
            .and_then(|h| h.join().ok())
            .map(|mut t| {
                t.page_cache_bytes = bytes;
                t.kernel_scope = self
                    .shared
                    .kernel_scope
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                t
            });
        // After the sampler took the last trace: knobs back, instance
        // removed, key removed, image unmounted.
        self.leave_kernel();
        self.knobs = None;
        totals
    }

    /// Stops everything and returns the run's totals.
    pub fn stop(self) -> RunTotals {
        self.stop_with_records().0
    }

    /// Stops everything; returns the totals and the record channel, which
    /// still holds the records not consumed yet (the final one included).
    pub fn stop_with_records(mut self) -> (RunTotals, Receiver<IntervalRecord>) {
        let totals = self.shutdown().expect("sampler thread returns totals");
        let (_, empty) = channel();
        (totals, std::mem::replace(&mut self.rx, empty))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// `bdi->io_pages` where the device is unknown: one bio of `BIO_MAX_VECS`
/// pages.
pub const DEFAULT_IO_PAGES: u64 = 256;

/// The largest request of the block device holding `path`, in pages
/// (`bdi->io_pages` = `max_sectors_kb / 4`: 320 at the default 1280 KiB),
/// and a notice where it is unknown (tmpfs, no sysfs): then
/// [`DEFAULT_IO_PAGES`].
pub fn io_pages_of(path: &std::path::Path) -> (u64, Option<String>) {
    match crate::sys::max_sectors_kb_of(path) {
        Some(kb) if kb >= 4 => (kb / 4, None),
        _ => (
            DEFAULT_IO_PAGES,
            Some(format!(
                "page cache: {} is on no block device with a queue/max_sectors_kb in sysfs; readahead requests up to {DEFAULT_IO_PAGES} pages (bdi io_pages)",
                path.display()
            )),
        ),
    }
}
