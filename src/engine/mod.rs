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

mod cached;
pub mod irq;
pub mod memory;
pub mod pagecache;
pub mod pipeline;
pub mod queue;
pub mod reader;
pub mod resolve;
pub mod stages;
pub mod tree;
pub mod workload;

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::dataset::{Dataset, DatasetError, OpenOutcome, Progress, Variant};
use crate::metrics::{
    Event, IntervalRecord, Notice, Recorder, Registry, Role, WorkerSched, now_ns,
};
use crate::settings::{SettingChange, Settings, SettingsError};
use crate::sys::{Features, ThreadCounters, ThreadStatReader};
use crate::verity::merkle::VerifiedCache;

use pipeline::Pipeline;
pub use resolve::{DataFs, ReadPath, Resolution, resolve};

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
    #[error("{0}")]
    Memory(String),
    /// The kernel target cannot run here (not root, no loop device, no
    /// `encrypt`, a cipher the kernel lacks): what is missing.
    #[error("workload.target = \"kernel\": {0}")]
    Kernel(String),
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
        })
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
type KernelShared = (Option<Arc<crate::kernel::trace::Tracer>>, Arc<File>);

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
}

impl EngineOptions {
    /// Options with the given interval and data dir, no faults.
    pub fn new(interval: Duration, data_dir: PathBuf) -> EngineOptions {
        EngineOptions {
            interval,
            data_dir,
            faults: Faults::default(),
        }
    }
}

/// Failures a test can make the engine meet, to prove the error paths
/// never free memory the kernel or a worker still uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// A uring reader's submission fails once it has reads in the kernel
    /// and items at the workers (after its first 64 submissions).
    pub fail_submit_when_busy: bool,
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

/// True for an event that is a live change of a setting (`key: a -> b`),
/// not a marker (baseline, drop cache, pause).
fn is_setting_change(label: &str) -> bool {
    label
        .split_once(": ")
        .is_some_and(|(key, rest)| key.contains('.') && !key.contains(' ') && rest.contains(" -> "))
}

/// The kernel target of a running engine: its file system, the tracer on
/// its queues, and the system knobs turned for it. Dropped in field order:
/// the knobs are put back, the tracer's instance removed, then the key
/// removed and the image unmounted.
struct KernelRun {
    /// The file the pipeline reads (closed first: the image unmounts).
    file: Option<Arc<File>>,
    knobs: crate::kernel::knobs::SystemKnobs,
    /// The tracer, with `kernel.trace` (the default).
    traced: Option<Traced>,
    target: crate::kernel::target::KernelTarget,
    /// `kernel.dir` it was opened with.
    dir: String,
    /// The largest dataset its image has room for.
    file_size: u64,
}

/// The kernel target's tracer and, when readpath mounted it, tracefs
/// (dropped in that order: the instance goes before the mount).
struct Traced {
    tracer: Arc<crate::kernel::trace::Tracer>,
    _tracefs: Option<crate::kernel::TracefsMount>,
}

impl Traced {
    /// Starts following the post-read queues and `device`'s requests.
    fn start(data_dir: &Path, device: (u32, u32)) -> Result<Traced, EngineError> {
        let kerr = |what: &str, e: std::io::Error| EngineError::Kernel(format!("{what}: {e}"));
        let tracefs = crate::kernel::ensure_tracefs(data_dir).map_err(|e| kerr("tracefs", e))?;
        let tracer = crate::kernel::trace::Tracer::start_with(data_dir, Some(device))
            .map_err(|e| kerr("tracing the kernel's workqueues", e))?;
        Ok(Traced {
            tracer: Arc::new(tracer),
            _tracefs: tracefs,
        })
    }

    /// Waits (briefly) until the sampler no longer holds the tracer for
    /// the interval it is closing, so dropping this removes the instance.
    fn release(self) {
        for _ in 0..200 {
            if Arc::strong_count(&self.tracer) == 1 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

struct Hogs {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    count: u32,
    nice: i32,
}

impl Hogs {
    fn none() -> Hogs {
        Hogs {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            count: 0,
            nice: 0,
        }
    }

    fn set(&mut self, count: u32, nice: i32, notices: &NoticeSink) -> std::io::Result<()> {
        if count == self.count && (nice == self.nice || count == 0) {
            return Ok(());
        }
        self.stop_all();
        self.stop = Arc::new(AtomicBool::new(false));
        self.count = count;
        self.nice = nice;
        let denied = Arc::new(AtomicBool::new(false));
        for i in 0..count {
            let stop = self.stop.clone();
            let notices = notices.clone();
            let denied = denied.clone();
            let h = std::thread::Builder::new()
                .name(format!("hog-{i}"))
                .spawn(move || {
                    if let Err(e) = crate::sys::set_current_thread_nice(nice)
                        && !denied.swap(true, Ordering::SeqCst)
                    {
                        notices.push(format!("load.hog_nice: hogs run at nice 0: {e}"));
                    }
                    let mut x = 0x1234_5678_u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        }
                        std::hint::black_box(x);
                    }
                })?;
            self.threads.push(h);
        }
        Ok(())
    }

    fn stop_all(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        self.count = 0;
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
}

/// Refuses settings whose memory (worked out by [`memory::MemoryNeed`])
/// does not fit in what the machine has available plus `freed` bytes (what
/// the running pipeline gives back before the new one starts).
fn check_memory(eff: &Settings, freed: u64) -> Result<(), EngineError> {
    let Some(available) = crate::sys::memory_available_bytes() else {
        return Ok(());
    };
    memory::MemoryNeed::of(eff, crate::sys::online_cpus().len())
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
        });
        let sink = NoticeSink(shared.clone());
        for p in put_back.done {
            sink.push(format!("put back what a killed readpath left: {p}"));
        }
        for p in put_back.problems {
            sink.push(format!("not put back: {p}"));
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
            pcache: None,
            pipeline: None,
            hogs: Hogs::none(),
            paused: false,
            sampler: Some(sampler),
            rx,
            kernel: None,
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
        let path = if r.path == ReadPath::Kernel {
            self.kernel_file(&eff, progress)?
        } else {
            self.leave_kernel();
            self.dataset.path(variant)
        };
        let pcache = (r.path == ReadPath::PageCache).then(|| self.page_cache_for(&eff));
        // A cold start: nothing cached when this configuration begins.
        if eff.cache.cold_start
            && let Some(pc) = &pcache
        {
            pc.drop_all();
            self.mark("drop cache (cold start)");
        }
        *self.shared.pcache.lock().unwrap_or_else(|e| e.into_inner()) = pcache.clone();
        // Page-cache readers copy through the kernel's cache of the
        // plaintext; asked to be read in now, so a hit is not a real read.
        let plain = match &pcache {
            Some(_) => {
                let f = File::open(self.dataset.path(Variant::Plain)).map_err(|e| {
                    EngineError::Start(std::io::Error::new(
                        e.kind(),
                        format!("opening the plaintext the page-cache readers copy from: {e}"),
                    ))
                })?;
                self.warm_plain(&f);
                Some(Arc::new(f))
            }
            None => None,
        };
        let pcache = pcache.zip(plain);
        let direct = match r.path {
            ReadPath::PageCache => eff.cache.device == crate::settings::CacheDevice::Disk,
            _ => eff.workload.direct,
        };
        let file = OpenFile::open(&path, direct)?;
        if let Some(k) = self.kernel.as_mut() {
            k.file = Some(file.file.clone());
            *self.shared.kernel.lock().unwrap_or_else(|e| e.into_inner()) = Some((
                k.traced.as_ref().map(|t| t.tracer.clone()),
                file.file.clone(),
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
        self.hogs
            .set(eff.load.hogs, eff.load.hog_nice, &sink)
            .map_err(EngineError::Start)?;
        let p = Pipeline::start(
            eff.clone(),
            file,
            self.dataset.clone(),
            self.cache.clone(),
            self.shared.registry.clone(),
            sink,
            self.opts.faults,
            pcache,
        )
        .map_err(EngineError::Start)?;
        *self.shared.pools.lock().unwrap_or_else(|e| e.into_inner()) = p.pools();
        self.pipeline = Some(p);
        self.resolution = r;
        self.shared.running.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// The page cache a page-cache pipeline of `eff` reads through: the
    /// current one when its geometry fits, else a new one holding what fits
    /// of the current one's pages. No pipeline runs while this is called.
    fn page_cache_for(&mut self, eff: &Settings) -> Arc<pagecache::PageCache> {
        let g = memory::CacheGeometry::of(eff);
        if let Some(pc) = &self.pcache
            && pc.file_pages() == g.file_pages
            && pc.tree_pages() == g.tree_pages
            && pc.capacity() == g.capacity
            && pc.frames() == pagecache::frames_for(g.capacity, g.reserve)
            && pc.bio_slots() == g.bios
            && pc.readers() == g.readers
        {
            return pc.clone();
        }
        let pc = Arc::new(pagecache::PageCache::with_tree(
            g.file_pages,
            g.tree_pages,
            g.capacity,
            g.reserve,
            g.bios,
            g.readers,
        ));
        if let Some(old) = self.pcache.take() {
            pc.migrate_from(&old);
        }
        self.pcache = Some(pc.clone());
        pc
    }

    /// Makes sure the plaintext the readers copy from is in the kernel's
    /// page cache, so the copy of a hit costs what a kernel hit costs and
    /// never reads the device: read through when it is not all resident and
    /// fits in half the available memory, else a notice says it may not be.
    fn warm_plain(&self, f: &File) {
        let Ok(r) = crate::sys::page_cache_residency(f) else {
            return;
        };
        if r.resident_pages >= r.total_pages {
            return;
        }
        let bytes = r.total_pages * crate::sys::page_size() as u64;
        let room = crate::sys::memory_available_bytes().unwrap_or(0) / 2;
        if bytes <= room && crate::sys::warm_page_cache(f).is_ok() {
            return;
        }
        self.sink().push(format!(
            "page cache: {} of {} pages of the plaintext the readers copy from are in the kernel's cache; a copy that finds its page cold reads the device",
            r.resident_pages, r.total_pages
        ));
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
        let running = memory::MemoryNeed::of(self.effective(), crate::sys::online_cpus().len());
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

    /// The settings as running, after fallbacks (io_uring unavailable, no
    /// O_DIRECT, no NO_IOWAIT...).
    pub fn effective(&self) -> &Settings {
        &self.resolution.effective
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
        totals
    }

    /// Notes the kernel's workqueue affinity scope while the kernel target
    /// runs (before its knobs are put back), for the run summary.
    fn note_kernel_scope(&self) {
        if self.kernel.is_none() {
            return;
        }
        let scope = std::fs::read_to_string(crate::kernel::knobs::AFFINITY_SCOPE)
            .ok()
            .map(|s| s.trim().to_string());
        *self
            .shared
            .kernel_scope
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = scope;
    }

    /// Opens the kernel target (once; again when `kernel.dir` changed or
    /// the dataset outgrew its image), turns the knobs `eff` asks for and
    /// returns the file of `eff`'s decryption and verity, written through
    /// the kernel first if it is missing.
    fn kernel_file(
        &mut self,
        eff: &Settings,
        progress: Progress<'_>,
    ) -> Result<PathBuf, EngineError> {
        let kerr = |what: &str, e: std::io::Error| EngineError::Kernel(format!("{what}: {e}"));
        let size = self.dataset.file_size();
        if self
            .kernel
            .as_ref()
            .is_some_and(|k| k.dir != eff.kernel.dir || k.file_size < size)
        {
            self.leave_kernel();
        }
        if self.kernel.is_none() {
            let target = crate::kernel::target::KernelTarget::open(
                &self.opts.data_dir,
                &eff.kernel.dir,
                &self.dataset,
            )
            .map_err(|e| EngineError::Kernel(e.to_string()))?;
            let driver = crate::kernel::crypto_driver("xts(aes)")
                .map_or_else(|| "unknown".to_string(), |(d, _)| d);
            self.sink().push(format!(
                "kernel target: {}; the kernel's xts(aes) is {driver}",
                target.describe
            ));
            self.kernel = Some(KernelRun {
                knobs: crate::kernel::knobs::SystemKnobs::new(&self.opts.data_dir),
                traced: None,
                target,
                dir: eff.kernel.dir.clone(),
                file_size: if eff.kernel.dir.is_empty() {
                    size
                } else {
                    u64::MAX
                },
                file: None,
            });
        }
        // Tracing on or off as `kernel.trace` says (the sampler lets go of
        // a tracer being stopped first).
        let tracing = self.kernel.as_ref().is_some_and(|k| k.traced.is_some());
        if tracing != eff.kernel.trace {
            *self.shared.kernel.lock().unwrap_or_else(|e| e.into_inner()) = None;
            let k = self.kernel.as_mut().expect("opened above");
            match k.traced.take() {
                Some(t) => t.release(),
                None => k.traced = Some(Traced::start(&self.opts.data_dir, k.target.device)?),
            }
        }
        let k = self.kernel.as_mut().expect("opened above");
        let kind = crate::kernel::target::FileKind::of(
            eff.pipeline.decrypt,
            eff.pipeline.verity,
            eff.pipeline.cipher,
        );
        let path = k.target.file(&self.dataset, kind, progress).map_err(|e| {
            match e.raw_os_error() {
                Some(crate::sys::errno::ENOPKG) => EngineError::Kernel(format!(
                    "pipeline.cipher = \"{}\": this kernel lacks the cipher ({e}); use aes-256-xts",
                    eff.pipeline.cipher.name()
                )),
                _ => kerr("writing its file through the kernel", e),
            }
        })?;
        // Knobs last: nothing is changed until the file is there.
        apply_knobs(k, eff)?;
        Ok(path)
    }

    /// Leaves the kernel target, if it runs: the sampler stops taking its
    /// trace, the knobs are put back, the tracefs instance removed, the
    /// key removed and the image unmounted.
    fn leave_kernel(&mut self) {
        *self.shared.kernel.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.note_kernel_scope();
        if let Some(mut k) = self.kernel.take() {
            if let Some(t) = k.traced.take() {
                t.release();
            }
            drop(k);
        }
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

/// Turns the kernel knobs of `eff` on the target's system (a knob left at
/// `default` is put back to what it was).
fn apply_knobs(k: &mut KernelRun, eff: &Settings) -> Result<(), EngineError> {
    use crate::kernel::knobs::{Knob, cpu_mask_hex};
    let kn = &eff.kernel;
    let mut want: Vec<(Knob, Option<String>)> = vec![
        (
            Knob::affinity_scope(),
            (kn.affinity_scope != crate::settings::KernelScope::Default)
                .then(|| kn.affinity_scope.name().to_string()),
        ),
        (
            Knob::unbound_cpus(),
            (!kn.unbound_cpus.is_empty()).then(|| cpu_mask_hex(&kn.unbound_cpus)),
        ),
    ];
    // A device knob left at `default` is put back if it was changed; a
    // device without a queue directory is an error only when one is set.
    let base = k.target.base();
    match Knob::read_ahead_kb(base).and_then(|ra| Ok((ra, Knob::rq_affinity(base)?))) {
        Ok((ra, rq)) => {
            want.push((ra, kn.read_ahead_kb.map(|n| n.to_string())));
            want.push((rq, kn.rq_affinity.map(|n| n.to_string())));
        }
        Err(e) if kn.read_ahead_kb.is_some() || kn.rq_affinity.is_some() => {
            return Err(EngineError::Kernel(format!(
                "kernel.read_ahead_kb / kernel.rq_affinity: the queue of {}'s device: {e}",
                base.display()
            )));
        }
        Err(_) => {}
    }
    for (knob, value) in want {
        let r = match value {
            Some(v) => k.knobs.set(&knob, &v),
            None => k.knobs.restore(&knob.path),
        };
        r.map_err(|e| EngineError::Kernel(format!("{}: {e}", knob.key)))?;
    }
    Ok(())
}

/// Takes the kernel target's trace of one interval into the interval's
/// recorder (device latency from the block tracepoints in place of the
/// reader's, queue latency of every post-read queue, fscrypt's and
/// blk-crypto's execution as decryption, fsverity's as verification), the
/// run_delay of the kworkers that ran those items into `ws`, and the run
/// totals; returns the interval's kernel record.
fn kernel_interval(
    tracer: Option<&crate::kernel::trace::Tracer>,
    file: &File,
    merged: &mut Recorder,
    ws: &mut WorkerSched,
    kworkers: &mut HashMap<i32, (SchedState, u64)>,
    seq: u64,
    totals: &mut RunTotals,
) -> crate::metrics::KernelRecord {
    use crate::metrics::{KernelQueueRecord, Percentiles, Stage};
    let cached_bytes = crate::sys::page_cache_residency(file)
        .map_or(0, |r| r.resident_pages * crate::sys::page_size() as u64);
    // Not traced: the reader's own figures stand (the device stage is
    // then the whole read, as for a raw read).
    let Some(tracer) = tracer else {
        return crate::metrics::KernelRecord {
            cached_bytes,
            ..Default::default()
        };
    };
    let k = tracer.take_interval();
    merged.add_samples(Stage::Device, &k.device_ns, true);
    merged.counters.bios += k.requests;
    let mut queues = Vec::new();
    for name in crate::kernel::trace::POST_READ_QUEUES {
        let Some(q) = k.queues.get(*name) else {
            continue;
        };
        merged.add_samples(Stage::Queue, &q.queue_ns, false);
        let stage = if *name == "fsverity_read_queue" {
            Stage::Verify
        } else {
            Stage::Decrypt
        };
        merged.add_samples(stage, &q.exec_ns, false);
        queues.push(KernelQueueRecord {
            queue: name.to_string(),
            items: q.items,
            queue_us: Percentiles::of(&q.queue_ns),
            exec_us: Percentiles::of(&q.exec_ns),
            moved_pct: if q.items > 0 {
                (q.moved as f64 * 100.0 / q.items as f64).min(100.0)
            } else {
                0.0
            },
        });
        match totals.kernel.get_mut(*name) {
            Some(t) => {
                t.items += q.items;
                t.moved += q.moved;
                let _ = t.queue_ns.add(&q.queue_ns);
                let _ = t.exec_ns.add(&q.exec_ns);
            }
            None => {
                totals.kernel.insert(name.to_string(), q.clone());
            }
        }
    }
    // Each kworker's counters are read every interval while it is
    // followed; its delta counts in the intervals it ran a post-read item.
    for &tid in k.kworkers.keys() {
        if let std::collections::hash_map::Entry::Vacant(v) = kworkers.entry(tid)
            && let Ok(mut r) = ThreadStatReader::open_global(tid)
        {
            let last = r.read().unwrap_or_default();
            v.insert((
                SchedState {
                    reader: Some(r),
                    last,
                },
                seq,
            ));
        }
    }
    kworkers.retain(|tid, (st, seen)| {
        let Some(now) = st.reader.as_mut().and_then(|r| r.read().ok()) else {
            return false; // the kworker exited
        };
        let d = now.delta(&st.last);
        st.last = now;
        if k.kworkers.contains_key(tid) {
            *seen = seq;
            add_thread(ws, &d);
        }
        // Followed for 40 intervals after its last item.
        seq.saturating_sub(*seen) < 40
    });
    crate::metrics::KernelRecord {
        queues,
        kworkers: k.kworkers.len() as u32,
        requests: k.requests,
        lost: k.lost,
        cached_bytes,
    }
}

/// Adds one thread's counters over an interval to a group's.
fn add_thread(to: &mut WorkerSched, d: &ThreadCounters) {
    to.threads += 1;
    to.run_delay_us += d.run_delay_ns as f64 / 1e3;
    to.cpu_us += d.cpu_ns as f64 / 1e3;
    to.voluntary_switches += d.voluntary_ctxt_switches;
    to.involuntary_switches += d.nonvoluntary_ctxt_switches;
    to.migrations += d.migrations;
}

struct SchedState {
    reader: Option<ThreadStatReader>,
    last: ThreadCounters,
}

fn sampler_main(shared: Arc<Shared>, interval: Duration, tx: Sender<IntervalRecord>) -> RunTotals {
    *shared
        .sampler_thread
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current());
    let reg = shared.registry.clone();
    let mut totals = RunTotals {
        rec: Recorder::new(),
        workers: WorkerSched::default(),
        irq: WorkerSched::default(),
        duration_s: 0.0,
        notices: Vec::new(),
        events: Vec::new(),
        intervals: 0,
        process_cpu_pct: 0.0,
        page_cache_bytes: 0,
        pools: Vec::new(),
        kernel: Default::default(),
        kernel_scope: None,
        phases: Vec::new(),
    };
    let mut phase = Phase::new(0.0, Vec::new());
    let mut merged = Recorder::new();
    // The kworkers the kernel's tracepoints named, with the interval they
    // last ran a post-read item.
    let mut kworkers: HashMap<i32, (SchedState, u64)> = HashMap::new();
    let mut sched: HashMap<i32, SchedState> = HashMap::new();
    let mut stat = crate::sys::ProcStatReader::open().ok();
    let mut prev_cpu = Vec::new();
    let mut now_cpu = Vec::new();
    if let Some(s) = stat.as_mut() {
        let _ = s.read(&mut prev_cpu);
    }
    let mut prev_proc = crate::sys::process_cpu_time_ns();
    let mut last_tick = now_ns();
    let interval_ns = interval.as_nanos() as u64;
    let mut next = last_tick + interval_ns;
    let mut seq = 0u64;
    let mut run_delay_total = 0.0;
    let mut cpu_ns_total = 0u64;
    let start = last_tick;
    loop {
        let stop = loop {
            if shared.sampler_stop.load(Ordering::SeqCst) {
                break true;
            }
            let now = now_ns();
            if now >= next {
                break false;
            }
            std::thread::park_timeout(Duration::from_nanos(next - now));
        };
        let was_running = shared.running.load(Ordering::SeqCst);
        // Handoff: every thread swaps its recorder at its next safe point.
        let epoch = reg.bump_epoch();
        let slots = reg.slots();
        for s in &slots {
            s.unpark();
        }
        let deadline = now_ns() + (interval_ns / 4).min(50_000_000);
        while now_ns() < deadline && !slots.iter().all(|s| !s.is_alive() || s.has_seen(epoch)) {
            std::thread::sleep(Duration::from_micros(200));
        }
        // Threads already dead now have published everything: collect them
        // once more below, then drop them.
        let dead: Vec<_> = slots.iter().filter(|s| !s.is_alive()).cloned().collect();
        merged.reset();
        for s in &slots {
            s.collect(&mut merged);
        }
        // Workers' scheduler counters, and the irq threads' apart.
        let mut ws = WorkerSched::default();
        let mut irq = WorkerSched::default();
        for s in slots
            .iter()
            .filter(|s| s.role == Role::Worker || s.role == Role::Irq)
        {
            let st = sched.entry(s.tid).or_insert_with(|| SchedState {
                reader: ThreadStatReader::open(s.tid).ok(),
                last: ThreadCounters::default(),
            });
            let now = if s.is_alive() {
                st.reader.as_mut().and_then(|r| r.read().ok())
            } else {
                s.final_sched()
            };
            if let Some(now) = now {
                let d = now.delta(&st.last);
                st.last = now;
                let to = if s.role == Role::Irq {
                    &mut irq
                } else {
                    &mut ws
                };
                add_thread(to, &d);
            }
        }
        for s in &dead {
            sched.remove(&s.tid);
        }
        reg.prune(&dead);
        let kernel = shared
            .kernel
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let kernel_rec = kernel.map(|(tracer, file)| {
            kernel_interval(
                tracer.as_deref(),
                &file,
                &mut merged,
                &mut ws,
                &mut kworkers,
                seq,
                &mut totals,
            )
        });
        run_delay_total += ws.run_delay_us;
        totals.workers.add(&ws);
        totals.irq.add(&irq);

        let now = now_ns();
        let interval_s = (now - last_tick) as f64 / 1e9;
        last_tick = now;
        let mut rec = IntervalRecord {
            seq,
            t_s: (now - shared.start_ns) as f64 / 1e9,
            paused: !was_running && merged.is_empty(),
            ..Default::default()
        };
        rec.page_cache.size_bytes = shared
            .pcache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |pc| (pc.resident() * pagecache::PAGE) as u64);
        rec.pools = shared
            .pools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(name, kind, qs)| {
                let mut p = crate::metrics::PoolRecord {
                    queue: name.to_string(),
                    kind: kind.to_string(),
                    ..Default::default()
                };
                for q in qs {
                    let st = q.state();
                    p.workers += st.workers as u32;
                    p.running += st.running as u32;
                    p.blocked += st.blocked as u32;
                    p.blocked_peak += st.blocked_peak as u32;
                    p.pending += st.pending as u64;
                }
                p
            })
            .collect();
        if let Some(k) = &kernel_rec {
            rec.page_cache.size_bytes = k.cached_bytes;
        }
        rec.fill_from(&merged, interval_s);
        rec.kernel = kernel_rec;
        rec.workers = ws;
        rec.irq = irq;
        rec.run_delay_us_total = run_delay_total;
        if let Some(s) = stat.as_mut()
            && s.read(&mut now_cpu).is_ok()
        {
            crate::sys::cpu_usage(&prev_cpu, &now_cpu, &mut rec.cpus);
            std::mem::swap(&mut prev_cpu, &mut now_cpu);
        }
        let proc_now = crate::sys::process_cpu_time_ns();
        let dproc = proc_now.saturating_sub(prev_proc);
        cpu_ns_total += dproc;
        prev_proc = proc_now;
        rec.process_cpu_pct = dproc as f64 / 1e9 / interval_s.max(1e-9) * 100.0;
        rec.rss_bytes = crate::sys::process_rss_bytes();
        rec.events = std::mem::take(&mut *shared.events.lock().unwrap_or_else(|e| e.into_inner()));
        rec.notices =
            std::mem::take(&mut *shared.notices.lock().unwrap_or_else(|e| e.into_inner()));
        for p in &rec.pools {
            match totals
                .pools
                .iter_mut()
                .find(|t| t.queue == p.queue && t.kind == p.kind)
            {
                Some(t) => {
                    let peak = t.blocked_peak.max(p.blocked_peak);
                    *t = p.clone();
                    t.blocked_peak = peak;
                }
                None => totals.pools.push(p.clone()),
            }
        }
        totals.rec.merge(&merged);
        if !rec.paused {
            totals.duration_s += interval_s;
        }
        // Settings phases: an interval holding a change starts a new one
        // and belongs to neither.
        let changes: Vec<String> = rec
            .events
            .iter()
            .filter(|e| is_setting_change(&e.label))
            .map(|e| e.label.clone())
            .collect();
        if changes.is_empty() {
            if !rec.paused {
                phase.rec.merge(&merged);
                phase.secs += interval_s;
                phase.run_delay_us += ws.run_delay_us;
            }
        } else if totals.phases.len() + 1 < MAX_PHASES {
            let start = rec.events.iter().map(|e| e.t_s).fold(rec.t_s, f64::min);
            totals
                .phases
                .push(std::mem::replace(&mut phase, Phase::new(start, changes)));
        } else {
            phase.changes.extend(changes);
        }
        totals.events.extend(rec.events.iter().cloned());
        totals.notices.extend(rec.notices.iter().cloned());
        totals.intervals += 1;
        seq += 1;
        let _ = tx.send(rec);
        if stop {
            break;
        }
        next += interval_ns;
        if next <= now_ns() {
            next = now_ns() + interval_ns;
        }
    }
    totals.phases.push(phase);
    let elapsed = (now_ns() - start) as f64 / 1e9;
    totals.process_cpu_pct = cpu_ns_total as f64 / 1e9 / elapsed.max(1e-9) * 100.0;
    totals
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_setting_changes_start_a_phase() {
        assert!(super::is_setting_change("workers.mode: unbound -> bound"));
        assert!(super::is_setting_change(
            "kernel.affinity_scope: default -> cpu"
        ));
        for l in [
            "baseline",
            "drop cache (cold start)",
            "paused",
            "preset default",
            "x: a",
        ] {
            assert!(!super::is_setting_change(l), "{l}");
        }
    }
}
