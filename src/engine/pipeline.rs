//! One running configuration: the reader threads, the workqueues and their
//! workers, built from one effective [`Settings`] and torn down as a whole.
//!
//! The engine builds a [`Pipeline`] when it starts and on every live change;
//! stopping one lets the readers drain (every read in flight completes and
//! comes back through post-processing) before the threads exit, so no read
//! is lost or half-counted across a change. The work itself (decrypt, then
//! verify) is in [`super::stages`]; the threads that do it are started here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use std::os::unix::fs::OpenOptionsExt;

use crate::dataset::{Dataset, Variant, tree_first_unit};
use crate::metrics::{Registry, Role};
use crate::settings::Settings;
use crate::verity::merkle::VerifiedCache;

use crate::settings::units::format_cpu_list;
use crate::settings::{AffinityScope, Completion, HashKind};
use crate::sys::{CpuTopo, pods_by};

use super::era::{CPU_INTENSIVE_THRESH_NS, Era};
use super::irq::Irqs;
use super::queue::{NodeLimit, Pod, Queues, WorkQueue};
use super::reader;
use super::stages::{Ctx, Placement, Plan};
use super::tree::TreePages;
use super::{NoticeSink, OpenFile};

/// A queue as the sampler sees it: the kernel queue it models, `bound` or
/// `unbound`, and its per-CPU queues or pods.
pub type QueuePools = (&'static str, &'static str, Vec<Arc<WorkQueue>>);

/// A running pipeline: its context and threads.
pub struct Pipeline {
    ctx: Arc<Ctx>,
    readers: Vec<JoinHandle<()>>,
    /// Stand for interrupt context (`workload.completion = irq`).
    irq_threads: Vec<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
    /// The per-CPU pools' manager and the workers it created.
    manager: Option<Manager>,
}

/// Most workers a per-CPU pool of `s` may create: one per item that can be
/// in flight (each may block reading the tree, or run CPU_INTENSIVE) plus
/// the idle one the pool keeps. A pool starts with one; its manager creates
/// the others as the kernel's does (see `queue.rs`), so this only bounds
/// the slots (and the memory estimate).
pub fn pool_workers(s: &Settings) -> usize {
    let items =
        s.workload.readers as usize * reader::buffers_per_reader(s).max(reader::bios_per_reader(s));
    items + 2
}

/// `max_active` of a workqueue made without one (`alloc_workqueue(..., 0)`).
pub const WQ_DFL_ACTIVE: usize = 256;

/// The items a per-CPU workqueue runs at once on each CPU (its `max_active`,
/// per CPU): fsverity's queue is made with `num_online_cpus()` in every era
/// that has it (`fsverity_init_workqueue`); fscrypt's, when bound, with 0,
/// the default (before the 2018 seed, and the lab kernel's bound variant).
/// `decrypt`: the queue is fscrypt's (it decrypts, and verifies too when
/// verification has no queue of its own).
pub fn bound_max_active(decrypt: bool, online_cpus: usize) -> usize {
    if decrypt {
        WQ_DFL_ACTIVE
    } else {
        online_cpus.max(1)
    }
}

/// The queues of one placement. Per-CPU pools start with one worker and
/// grow up to `pool` (their manager creates the others); the queue is
/// workqueue `pwq` of them, running `bound_max` items at once on each CPU.
#[allow(clippy::too_many_arguments)]
fn build_queues(
    p: Placement,
    capacity: usize,
    cpus: &[usize],
    pods: &[(Vec<usize>, usize)],
    pool: usize,
    node_max: usize,
    pwq: u8,
    bound_max: usize,
) -> Option<Queues> {
    match p {
        Placement::Inline => None,
        Placement::Bound => {
            let max_cpu = cpus.iter().copied().max().unwrap_or(0);
            let mut by_cpu: Vec<Option<Arc<WorkQueue>>> = vec![None; max_cpu + 1];
            for &c in cpus {
                let q = WorkQueue::per_cpu_on_demand(capacity, pool);
                q.set_pwq(pwq, bound_max, capacity);
                by_cpu[c] = Some(Arc::new(q));
            }
            let first = by_cpu[cpus[0]].clone().expect("queue for first CPU");
            Some(Queues::Bound { by_cpu, first, pwq })
        }
        Placement::Unbound => {
            let spec = pods;
            let pods: Vec<Pod> = spec
                .iter()
                .map(|(cpus, workers)| Pod {
                    q: Arc::new(WorkQueue::unbound_on_demand(
                        capacity,
                        unbound_pool_slots(*workers),
                    )),
                    cpus: cpus.clone(),
                })
                .collect();
            // One pod: its own max_active. Several share their NUMA
            // node's.
            if let [(_, items)] = spec {
                pods[0].q.set_node_limit(Arc::new(NodeLimit::pod(*items)));
            } else {
                let topo = crate::sys::cpu_topology(cpus);
                let node_of = |c: usize| topo.iter().find(|t| t.cpu == c).map_or(0, |t| t.node);
                let total: usize = pods.iter().map(|p| p.cpus.len()).sum();
                let mut nodes: std::collections::BTreeMap<usize, (usize, Vec<usize>)> =
                    std::collections::BTreeMap::new();
                for (i, p) in pods.iter().enumerate() {
                    let e = nodes.entry(node_of(p.cpus[0])).or_default();
                    e.0 += p.cpus.len();
                    e.1.push(i);
                }
                for (node_cpus, members) in nodes.into_values() {
                    let workers = members.iter().map(|&i| spec[i].1 + UNBOUND_RESERVE).sum();
                    let max = node_max_active(node_max, node_cpus, total);
                    let limit = Arc::new(NodeLimit::new(max, workers));
                    for i in members {
                        pods[i].q.set_node_limit(limit.clone());
                    }
                }
            }
            Some(Queues::unbound(pods))
        }
    }
}

/// The pods an unbound queue runs work in under `s`: the CPUs readpath may
/// use (`cpus`), grouped by `workers.affinity_scope` from the machine's
/// topology in sysfs, as the kernel's `init_pod_type()` groups them; on a
/// `workers.kernel_era` before 6.5, by NUMA node (one unbound pool per
/// node, `numa_pwq_tbl`).
pub fn unbound_pods(s: &Settings, cpus: &[usize]) -> Vec<Vec<usize>> {
    pods_of_scope(unbound_layout(s), &crate::sys::cpu_topology(cpus))
}

/// The grouping of unbound pools under `s`: its affinity scope, or NUMA
/// nodes before 6.5.
pub fn unbound_layout(s: &Settings) -> AffinityScope {
    if Era::of(s.workers.kernel_era).has_affinity_scopes() {
        s.workers.affinity_scope
    } else {
        AffinityScope::Numa
    }
}

/// Pods of `scope` over a topology (tests pass fake ones).
pub fn pods_of_scope(scope: AffinityScope, topo: &[CpuTopo]) -> Vec<Vec<usize>> {
    match scope {
        AffinityScope::Cpu => pods_by(topo, |c| c.cpu),
        AffinityScope::Smt => pods_by(topo, |c| c.smt.clone()),
        AffinityScope::Cache => pods_by(topo, |c| c.llc.clone()),
        AffinityScope::Numa => pods_by(topo, |c| c.node),
        AffinityScope::System => pods_by(topo, |_| ()),
    }
}

/// The items each pod may run at once. The kernel's `max_active` of an
/// unbound queue is per NUMA node and shared by the node's pods
/// (`wq_node_nr_active`, v6.9+): any one pod may run up to all of it while
/// the others are idle. So each pod may run `max_active` items (and has
/// [`unbound_pool_slots`] of them for workers) and a [`NodeLimit`] holds
/// the pods together to `max_active` items at once; with more than
/// [`MAX_UNBOUND_WORKERS`] in all, each pod gets an equal share of those
/// (at least 1).
pub fn pod_workers(pods: &[Vec<usize>], max_active: usize) -> Vec<usize> {
    let n = pods.len().max(1);
    let per = max_active.max(1).min((MAX_UNBOUND_WORKERS / n).max(1));
    vec![per; pods.len()]
}

/// The items an unbound queue of `max_active` runs at once on a NUMA node
/// with `node_cpus` of its `total_cpus` CPUs (`wq_update_node_max_active`):
/// the node's share, rounded up, at least `min_active` (`max_active` up to
/// `WQ_DFL_MIN_ACTIVE` = 8), at most `max_active`.
pub fn node_max_active(max_active: usize, node_cpus: usize, total_cpus: usize) -> usize {
    let max_active = max_active.max(1);
    let min_active = max_active.min(8);
    (max_active * node_cpus)
        .div_ceil(total_cpus.max(1))
        .clamp(min_active, max_active)
}

/// The most items an unbound queue's pods run at once, all together, in
/// the model (each pod's share of them is its `max_active`).
pub const MAX_UNBOUND_WORKERS: usize = 256;

/// Workers an unbound pod may have beyond the items it runs at once: one
/// woken that finds no room or no item, and the idle one the pool keeps
/// in reserve (`may_start_working`). Its manager creates them on demand.
pub const UNBOUND_RESERVE: usize = 2;

/// The worker slots of an unbound pod that runs `items` at once.
pub fn unbound_pool_slots(items: usize) -> usize {
    items.max(1) + UNBOUND_RESERVE
}

/// The header's "pods cache 0-3|4-7" for `s`, when one of its queues is
/// unbound.
pub fn pods_label(s: &Settings) -> Option<String> {
    let plan = Plan::of(s);
    let unbound = [Some(plan.first), plan.second]
        .into_iter()
        .flatten()
        .any(|p| p == Placement::Unbound);
    unbound.then(|| {
        let pods = unbound_pods(s, &s.run_cpus(&crate::sys::online_cpus()));
        let list: Vec<String> = pods.iter().map(|p| format_cpu_list(p)).collect();
        if Era::of(s.workers.kernel_era).has_affinity_scopes() {
            format!("pods {} {}", s.workers.affinity_scope, list.join("|"))
        } else {
            format!("pools per node {}", list.join("|"))
        }
    })
}

impl Pipeline {
    /// Builds the queues, spawns the workers, then the readers.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        settings: super::Effective,
        file: OpenFile,
        dataset: Arc<Dataset>,
        cache: Arc<VerifiedCache>,
        streams: Arc<super::source::Streams>,
        registry: Arc<Registry>,
        notices: NoticeSink,
        faults: super::Faults,
        pcache: Option<Arc<super::pagecache::PageCache>>,
        copy_check: Option<(Arc<super::CopyCheck>, Arc<crate::sys::Mapping>)>,
    ) -> std::io::Result<Pipeline> {
        let plan = Plan::of(&settings);
        // Everything the pipeline starts runs on these (`workload.cpus`).
        let cpus = settings.run_cpus(&crate::sys::online_cpus());
        let readers = settings.workload.readers as usize;
        let per_reader = reader::buffers_per_reader(&settings);
        let bios_per_reader = reader::bios_per_reader(&settings);
        // Room for every buffer, or every bio, that can be in flight.
        let capacity = readers * per_reader.max(bios_per_reader);
        // The kernel's num_online_cpus(): a run held to fewer CPUs does
        // not change it, nor the max_active it sizes.
        let online = crate::sys::online_count().max(cpus.len());
        let pods = pods_for(&settings, &cpus, online);
        let (first_q, second_q) = queues_for(&settings, &plan, capacity, &cpus, &pods, online);
        let kind = settings.pipeline.cipher;
        // Read on the kernel target's device, the data is the kernel's
        // ciphertext, keyed with its file's nonce; the tree is still the
        // dataset's (encrypted with the dataset file's key).
        let data_nonce = file.map.as_ref().and_then(|m| m.nonce);
        let keyed = |nonce: Option<&[u8; 16]>| -> std::io::Result<Option<Arc<crate::crypto::ContentsCipher>>> {
            if !plan.decrypt {
                return Ok(None);
            }
            let c = match nonce {
                Some(n) => dataset.try_cipher_with_nonce(kind, n),
                None => dataset.try_cipher(kind),
            };
            Ok(Some(Arc::new(c.map_err(std::io::Error::other)?)))
        };
        let cipher = keyed(data_nonce.as_ref())?;
        let tree_cipher = match data_nonce {
            Some(_) => keyed(None)?,
            None => cipher.clone(),
        };
        // `pipeline.hash = "kernel"` or `"generic"`: the same tree, hashed
        // by the kernel or by the port of its generic C.
        let verity_tree = match plan.verify && settings.pipeline.hash != HashKind::Software {
            true => Some(Arc::new(dataset.tree().with_hash(settings.pipeline.hash)?)),
            false => None,
        };
        // The tree in the page cache, as the file stores it (encrypted
        // past EOF when decryption is on), read like the data (O_DIRECT
        // with `cache.device = "disk"`).
        let tree = match (&pcache, plan.verify) {
            (Some(pc), true) => Some(open_tree(
                pc,
                &settings,
                &plan,
                &file,
                &dataset,
                &tree_cipher,
            )?),
            _ => None,
        };
        let returns = (0..readers)
            .map(|_| reader::new_return_queue(&settings, per_reader))
            .collect::<std::io::Result<Vec<_>>>()?;
        // Completions in interrupt context: an irq thread per CPU where
        // completions land or are sent back to.
        let irqs = irqs_for(
            &settings,
            &cpus,
            readers * bios_per_reader,
            pcache.is_some(),
        )?;
        let ctx = Arc::new(Ctx {
            settings,
            plan,
            file,
            cipher,
            dataset,
            verity_tree,
            cache,
            streams,
            first_q,
            second_q,
            returns,
            stop_readers: AtomicBool::new(false),
            stop_workers: AtomicBool::new(false),
            registry,
            notices,
            verity_noticed: AtomicBool::new(false),
            buffers_alive: (0..readers).map(|_| AtomicBool::new(false)).collect(),
            touched_freed: std::sync::atomic::AtomicU64::new(0),
            faults,
            copy_check,
            pcache,
            bios_per_reader,
            irqs,
            tree,
        });
        let served = served_pools(&ctx, &cpus);
        let workers = spawn_workers(&ctx, &served)?;
        let manager = match Manager::start(&ctx, served) {
            Ok(m) => m,
            Err(e) => {
                stop_workers(&ctx, workers);
                return Err(e);
            }
        };
        launch(ctx, workers, manager, readers)
    }

    /// Each queue's name (the kernel queue it models), kind and per-CPU
    /// queues or pods, for the sampler's pool records.
    pub fn pools(&self) -> Vec<QueuePools> {
        let shared = shares_highpri_pools(&self.ctx);
        let first = if shared {
            "highpri"
        } else if self.ctx.plan.decrypt {
            "fscrypt"
        } else {
            "fsverity"
        };
        let second = if shared { &None } else { &self.ctx.second_q };
        [(&self.ctx.first_q, first), (second, "fsverity")]
            .into_iter()
            .filter_map(|(q, name)| {
                let q = q.as_ref()?;
                let kind = match q {
                    Queues::Bound { .. } => "bound",
                    Queues::Unbound { .. } => "unbound",
                };
                Some((name, kind, q.all()))
            })
            .collect()
    }

    /// Items workers found after their reader freed its buffers (0 unless
    /// there is a use after free; counted in debug builds).
    pub fn touched_freed(&self) -> u64 {
        self.ctx.touched_freed.load(Ordering::Relaxed)
    }

    /// Stops issuing, lets every read in flight finish its post-processing,
    /// then joins all threads (their recorders are published on exit).
    pub fn stop(&mut self) {
        self.ctx.stop_readers.store(true, Ordering::SeqCst);
        for r in &self.ctx.returns {
            r.wake_for_shutdown();
        }
        for h in self.readers.drain(..) {
            let _ = h.join();
        }
        // The readers waited for every bio they handed over: the irq
        // threads have nothing in flight (and would finish it if they did).
        if let Some(irqs) = &self.ctx.irqs {
            irqs.stop.store(true, Ordering::SeqCst);
            irqs.wake_all();
        }
        for h in self.irq_threads.drain(..) {
            let _ = h.join();
        }
        // No worker is created once the manager is gone.
        let mut workers: Vec<JoinHandle<()>> = self.workers.drain(..).collect();
        if let Some(m) = self.manager.take() {
            workers.extend(m.stop());
        }
        stop_workers(&self.ctx, workers);
    }
}

/// Stops and joins `workers`, waking their queues until each has exited (a
/// worker the manager created just before may park after a first wake).
fn stop_workers(ctx: &Ctx, workers: Vec<JoinHandle<()>>) {
    ctx.stop_workers.store(true, Ordering::SeqCst);
    let queues: Vec<Arc<WorkQueue>> = [&ctx.first_q, &ctx.second_q]
        .into_iter()
        .flatten()
        .flat_map(Queues::all)
        .collect();
    for h in workers {
        while !h.is_finished() {
            for q in &queues {
                q.wake_all();
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let _ = h.join();
    }
}

/// True when both stages have per-CPU queues with WQ_HIGHPRI: the kernel
/// runs both on the one high-priority pool of each CPU (`cpu_worker_pools[1]`,
/// shared by every WQ_HIGHPRI per-CPU queue, kblockd's too), and so does
/// the model (one queue per CPU for both).
fn shares_highpri_pools(ctx: &Ctx) -> bool {
    ctx.settings.workers.highpri
        && ctx.plan.first == Placement::Bound
        && ctx.plan.second == Some(Placement::Bound)
}

/// The queues whose workers run, each with the name prefix of its
/// workers' threads: the kernel queue it models (the first queue is
/// fscrypt's when decryption is on, otherwise fsverity's), or `kworker-hi`
/// for the per-CPU high-priority pool both share, whose workers start once.
fn worker_queues(ctx: &Ctx) -> impl Iterator<Item = (&Queues, &'static str)> {
    let shared = shares_highpri_pools(ctx);
    let first_name = if shared {
        "kworker-hi"
    } else if ctx.plan.decrypt {
        "fscrypt"
    } else {
        "fsverity"
    };
    let second = if shared { None } else { ctx.second_q.as_ref() };
    [(ctx.first_q.as_ref(), first_name), (second, "fsverity")]
        .into_iter()
        .filter_map(|(q, name)| Some((q?, name)))
}

/// The pools' manager: a thread that creates the workers a pool asks for
/// (`maybe_create_worker`, per-CPU and unbound pools alike) and, on eras
/// with it, ticks every 4 ms (HZ=250) to mark CPU_INTENSIVE items in the
/// per-CPU pools (`wq_worker_tick`).
struct Manager {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
    created: Arc<std::sync::Mutex<Vec<JoinHandle<()>>>>,
}

impl Manager {
    /// Starts the manager of `pools` (None without any).
    fn start(ctx: &Arc<Ctx>, pools: Vec<Served>) -> std::io::Result<Option<Manager>> {
        if pools.is_empty() {
            return Ok(None);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let created = Arc::new(std::sync::Mutex::new(Vec::new()));
        let intensive = Era::of(ctx.settings.workers.kernel_era).detects_cpu_intensive();
        let thread = {
            let (ctx, stop, created) = (ctx.clone(), stop.clone(), created.clone());
            let pools = pools.clone();
            std::thread::Builder::new()
                .name("wq-manager".into())
                .spawn(move || manage(&ctx, &pools, &stop, &created, intensive))?
        };
        for p in &pools {
            p.q.set_manager(thread.thread().clone(), intensive && p.q.is_managed());
        }
        Ok(Some(Manager {
            stop,
            thread,
            created,
        }))
    }

    /// Stops the manager; returns the workers it created.
    fn stop(self) -> Vec<JoinHandle<()>> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.thread().unpark();
        let _ = self.thread.join();
        std::mem::take(&mut *self.created.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The manager's loop: creates the workers pools ask for, ticks for
/// CPU_INTENSIVE items when `intensive`.
fn manage(
    ctx: &Arc<Ctx>,
    pools: &[Served],
    stop: &AtomicBool,
    created: &std::sync::Mutex<Vec<JoinHandle<()>>>,
    intensive: bool,
) {
    let period = std::time::Duration::from_millis(if intensive { 4 } else { 50 });
    while !stop.load(Ordering::SeqCst) {
        for p in pools {
            if intensive {
                p.q.tick_cpu_intensive(CPU_INTENSIVE_THRESH_NS);
            }
            while let Some(i) = p.q.needs_worker() {
                match p.spawn(ctx, i) {
                    Ok(h) => created.lock().unwrap_or_else(|e| e.into_inner()).push(h),
                    Err(e) => {
                        p.q.worker_failed();
                        ctx.notices
                            .push(format!("workqueue manager: could not create a worker: {e}"));
                        break;
                    }
                }
            }
        }
        std::thread::park_timeout(period);
    }
}

/// The unbound queues' pods over the run's `cpus`: each pod's CPUs and its
/// workers (see [`pod_workers`]), `max_active = 0` being the machine's
/// `online` CPUs.
fn pods_for(settings: &Settings, cpus: &[usize], online: usize) -> Vec<(Vec<usize>, usize)> {
    let max_active = settings.effective_max_active(online);
    let pod_cpus = unbound_pods(settings, cpus);
    pod_cpus
        .iter()
        .cloned()
        .zip(pod_workers(&pod_cpus, max_active))
        .collect()
}

/// The first and second queue for `plan` on the run's `cpus`, on a machine
/// with `online` CPUs (the kernel's `num_online_cpus()`, which sizes the
/// default `max_active`s). Both per-CPU with WQ_HIGHPRI: the second is the
/// first's pools (one high-priority pool per CPU).
pub fn queues_for(
    settings: &Settings,
    plan: &Plan,
    capacity: usize,
    cpus: &[usize],
    pods: &[(Vec<usize>, usize)],
    online: usize,
) -> (Option<Queues>, Option<Queues>) {
    let pool = pool_workers(settings).max(capacity + 2);
    let node_max = settings.effective_max_active(online);
    let first_max = bound_max_active(plan.decrypt, online);
    let second_max = bound_max_active(false, online);
    let first_q = build_queues(
        plan.first, capacity, cpus, pods, pool, node_max, 0, first_max,
    );
    let second_q = match (&first_q, plan.second) {
        (Some(Queues::Bound { by_cpu, first, .. }), Some(Placement::Bound))
            if settings.workers.highpri =>
        {
            // fsverity's own share of each CPU's pool.
            for q in by_cpu.iter().flatten() {
                q.set_pwq(1, second_max, capacity);
            }
            Some(Queues::Bound {
                by_cpu: by_cpu.clone(),
                first: first.clone(),
                pwq: 1,
            })
        }
        _ => plan
            .second
            .and_then(|p| build_queues(p, capacity, cpus, pods, pool, node_max, 1, second_max)),
    };
    (first_q, second_q)
}

/// Starts the irq threads and the readers around the spawned `workers`; on an error, stops what started.
fn launch(
    ctx: Arc<Ctx>,
    workers: Vec<JoinHandle<()>>,
    manager: Option<Manager>,
    readers: usize,
) -> std::io::Result<Pipeline> {
    let mut pipeline = Pipeline {
        ctx: ctx.clone(),
        readers: Vec::new(),
        irq_threads: Vec::new(),
        workers,
        manager,
    };
    match super::irq_thread::spawn(&ctx) {
        Ok(t) => pipeline.irq_threads = t,
        Err(e) => {
            pipeline.stop();
            return Err(e);
        }
    }
    for i in 0..readers {
        match spawn_reader(ctx.clone(), i) {
            Ok(h) => pipeline.readers.push(h),
            Err(e) => {
                pipeline.stop();
                return Err(e);
            }
        }
    }
    Ok(pipeline)
}

/// Opens the fs-verity tree file for the page cache, read like the data (O_DIRECT when the data is).
fn open_tree(
    pc: &Arc<super::pagecache::PageCache>,
    settings: &Settings,
    plan: &Plan,
    file: &OpenFile,
    dataset: &Dataset,
    cipher: &Option<Arc<crate::crypto::ContentsCipher>>,
) -> std::io::Result<TreePages> {
    let variant = Variant::for_pipeline(plan.decrypt, settings.pipeline.cipher);
    let path = dataset.tree_path(variant);
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    if file.direct {
        o.custom_flags(crate::sys::oflag::O_DIRECT);
    }
    let f = o
        .open(&path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    Ok(TreePages::new(
        pc.clone(),
        OpenFile {
            file: Arc::new(f),
            path,
            direct: file.direct,
            map: None,
            mem: None,
        },
        cipher.clone(),
        tree_first_unit(dataset.file_size()),
        dataset.tree().leaf_level_start(),
    ))
}

/// Completions in interrupt context: an irq thread per CPU where completions land (`workload.irq_cpus`, else each submitting CPU: the readers' CPUs, else every CPU) or are sent back to (`kernel.rq_affinity`, 1 in the model when unset); None unless `completion = irq` on the page-cache path.
fn irqs_for(
    settings: &Settings,
    cpus: &[usize],
    slots: usize,
    pcache: bool,
) -> std::io::Result<Option<Irqs>> {
    if settings.workload.completion != Completion::Irq || !pcache {
        return Ok(None);
    }
    let submitters = if settings.workload.reader_cpus.is_empty() {
        cpus.to_vec()
    } else {
        settings.workload.reader_cpus.to_vec()
    };
    // The 6.11 capacity rule of rq_affinity = 1, as the era has it.
    let capacity_rule = super::era::Era::of(settings.workers.kernel_era).capacity_rule();
    let plan = super::irq::IrqPlan::new(
        &settings.workload.irq_cpus,
        &submitters,
        settings.kernel.rq_affinity.unwrap_or(MODEL_RQ_AFFINITY),
        &crate::sys::cpu_topology(cpus),
        &crate::sys::cpu_capacities(cpus),
        capacity_rule,
    );
    Ok(Some(Irqs::new(&plan, slots)?))
}

/// `kernel.rq_affinity` in the model when unset: the kernel's default.
pub const MODEL_RQ_AFFINITY: u8 = 1;

/// A pool whose workers the pipeline starts and its manager adds to: its
/// queue, its workers' names and where they run.
#[derive(Clone)]
struct Served {
    q: Arc<WorkQueue>,
    /// The first worker's name; worker `i > 0` is `base` then `i`.
    first: String,
    base: String,
    /// Pinned to these CPUs at start, when given.
    pin: Option<Vec<usize>>,
    /// Then allowed these, when given.
    widen: Option<Vec<usize>>,
}

impl Served {
    fn name(&self, i: usize) -> String {
        if i == 0 {
            self.first.clone()
        } else {
            format!("{}{i}", self.base)
        }
    }

    fn spawn(&self, ctx: &Arc<Ctx>, i: usize) -> std::io::Result<JoinHandle<()>> {
        spawn_worker(
            ctx.clone(),
            self.q.clone(),
            i,
            self.pin.clone(),
            self.widen.clone(),
            self.name(i),
        )
    }
}

/// Every pool of `ctx`'s queues, named after the kernel queue it models
/// (fscrypt's first when decryption is on, otherwise fsverity's).
fn served_pools(ctx: &Ctx, cpus: &[usize]) -> Vec<Served> {
    let mut out = Vec::new();
    for (qs, prefix) in worker_queues(ctx) {
        match qs {
            Queues::Bound { by_cpu, .. } => {
                for (cpu, q) in by_cpu.iter().enumerate() {
                    let Some(q) = q else { continue };
                    out.push(Served {
                        q: q.clone(),
                        first: format!("{prefix}-cpu{cpu}"),
                        base: format!("{prefix}-cpu{cpu}."),
                        pin: Some(vec![cpu]),
                        widen: None,
                    });
                }
            }
            Queues::Unbound { pods, .. } => {
                // One pod of every CPU: unpinned, as before pods (unless
                // `workload.cpus` keeps the run to some of them).
                let single = pods.len() == 1
                    && pods[0].cpus.len() == cpus.len()
                    && !ctx.settings.cpus_restricted();
                for (k, pod) in pods.iter().enumerate() {
                    let base = if pods.len() == 1 {
                        format!("{prefix}-u")
                    } else {
                        format!("{prefix}-u{k}.")
                    };
                    // A pod's worker starts on the pod; unless strict
                    // (`workers.affinity_strict`), it may then run on
                    // any of the queue's CPUs, as the kernel's
                    // non-strict pods let the scheduler move it, and is
                    // pointed back at the pod when woken (6.6+'s
                    // `kick_pool`: pods exist only in eras that have it).
                    let widen =
                        (!single && !ctx.settings.workers.affinity_strict).then(|| cpus.to_vec());
                    if let Some(w) = &widen {
                        pod.q.set_home(pod.cpus.clone(), w.clone());
                    }
                    out.push(Served {
                        q: pod.q.clone(),
                        first: format!("{base}0"),
                        base,
                        pin: (!single).then(|| pod.cpus.clone()),
                        widen,
                    });
                }
            }
        }
    }
    out
}

/// Starts the workers each pool starts with (one; the manager creates more).
fn spawn_workers(ctx: &Arc<Ctx>, pools: &[Served]) -> std::io::Result<Vec<JoinHandle<()>>> {
    let mut workers = Vec::new();
    for p in pools {
        for i in 0..p.q.worker_count() {
            workers.push(p.spawn(ctx, i)?);
        }
    }
    Ok(workers)
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts worker `index` of `q`, pinned to `cpus` when given, then (once
/// it runs there) allowed `widen` when given.
fn spawn_worker(
    ctx: Arc<Ctx>,
    q: Arc<WorkQueue>,
    index: usize,
    cpus: Option<Vec<usize>>,
    widen: Option<Vec<usize>>,
    name: String,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            if let Some(cpus) = cpus
                && let Err(e) = crate::sys::pin_current_thread(&cpus)
            {
                ctx.notices.push(format!(
                    "{name}: could not pin to CPUs {}: {e}",
                    format_cpu_list(&cpus)
                ));
            }
            if let Some(all) = widen
                && let Err(e) = crate::sys::pin_current_thread(&all)
            {
                ctx.notices.push(format!(
                    "{name}: could not allow CPUs {}: {e}",
                    format_cpu_list(&all)
                ));
            }
            let nice = if ctx.settings.workers.highpri { -20 } else { 0 };
            let set = if ctx.faults.deny_highpri && nice < 0 {
                Err(crate::sys::NiceError::Denied {
                    wanted: nice,
                    reason: "refused by Faults::deny_highpri".into(),
                })
            } else {
                crate::sys::set_current_thread_nice(nice)
            };
            if let Err(e) = set {
                ctx.notices
                    .refused(super::resolve::Refused::Highpri(e.to_string()));
            }
            q.register_worker(index);
            let mut h = ctx.registry.register(Role::Worker);
            q.serve(
                index,
                &ctx.stop_workers,
                &mut h,
                |h| h.tick(),
                |h, parking| if parking { h.idle() } else { h.awake() },
                |h, item| ctx.work(&mut h.rec, item, Some(&q)),
            );
            if let Ok(c) =
                crate::sys::ThreadStatReader::open(crate::sys::gettid()).and_then(|mut r| r.read())
            {
                h.slot().set_final_sched(c);
            }
        })
}

/// Spawns reader `index` of a pipeline: through the page cache
/// (`cached`), or straight to the file with io_uring or blocking reads
/// (`reader`). Here, not in `reader`, so that `cached` (which builds on the
/// reader's buffers and rings) and `reader` do not import each other.
fn spawn_reader(ctx: Arc<Ctx>, index: usize) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("reader-{index}"))
        .spawn(move || {
            let cpus = &ctx.settings.workload.reader_cpus;
            if !cpus.is_empty() {
                let cpu = cpus[index % cpus.len()];
                if let Err(e) = crate::sys::pin_current_thread(&[cpu]) {
                    ctx.notices
                        .push(format!("reader-{index}: could not pin to CPU {cpu}: {e}"));
                }
            } else if ctx.settings.cpus_restricted() {
                let run = ctx.settings.run_cpus(&crate::sys::online_cpus());
                if let Err(e) = crate::sys::pin_current_thread(&run) {
                    ctx.notices.push(format!(
                        "reader-{index}: could not keep to CPUs {}: {e}",
                        format_cpu_list(&run)
                    ));
                }
            }
            let _ = crate::sys::set_current_thread_nice(0);
            let h = ctx.registry.register(Role::Reader);
            let r = if ctx.pcache.is_some() {
                super::cached::run(&ctx, index, h)
            } else {
                reader::run(&ctx, index, h)
            };
            if let Err(e) = r {
                ctx.notices.push(format!("reader-{index} stopped: {e}"));
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two LLCs of two SMT pairs each, on two nodes.
    fn two_llcs() -> Vec<CpuTopo> {
        (0..8)
            .map(|cpu| {
                let core = cpu % 4;
                CpuTopo {
                    cpu,
                    smt: vec![core, core + 4],
                    llc: if core < 2 {
                        vec![0, 1, 4, 5]
                    } else {
                        vec![2, 3, 6, 7]
                    },
                    node: usize::from(core >= 2),
                }
            })
            .collect()
    }

    #[test]
    fn each_scope_groups_cpus_as_the_kernel() {
        let t = two_llcs();
        let p = |s| pods_of_scope(s, &t);
        assert_eq!(p(AffinityScope::Cpu).len(), 8);
        assert_eq!(
            p(AffinityScope::Smt),
            vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
        );
        let llcs = vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]];
        assert_eq!(p(AffinityScope::Cache), llcs);
        assert_eq!(p(AffinityScope::Numa), llcs);
        assert_eq!(p(AffinityScope::System), vec![(0..8).collect::<Vec<_>>()]);
    }

    #[test]
    fn each_node_runs_its_share_of_max_active_at_least_min_active() {
        // One node: all of it.
        assert_eq!(node_max_active(2, 2, 2), 2);
        assert_eq!(node_max_active(16, 16, 16), 16);
        // Two nodes of 16 CPUs each, max_active 32: 16 each.
        assert_eq!(node_max_active(32, 16, 32), 16);
        // A small node still gets min_active (8, or max_active below it).
        assert_eq!(node_max_active(32, 2, 32), 8);
        assert_eq!(node_max_active(4, 1, 32), 4);
        assert_eq!(node_max_active(0, 1, 1), 1);
    }

    #[test]
    fn max_active_is_the_nodes_and_any_pod_may_use_it_all() {
        let llcs = vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]];
        // Each pod may run up to max_active items (the node limit holds
        // them together).
        assert_eq!(pod_workers(&llcs, 8), vec![8, 8]);
        assert_eq!(pod_workers(&llcs, 2), vec![2, 2]);
        assert_eq!(pod_workers(&llcs, 0), vec![1, 1]);
        let single: Vec<Vec<usize>> = (0..4).map(|c| vec![c]).collect();
        assert_eq!(pod_workers(&single, 4), vec![4; 4]);
        assert_eq!(pod_workers(&[vec![0, 1]], 16), vec![16]);
        // At most MAX_UNBOUND_WORKERS threads in all.
        let many: Vec<Vec<usize>> = (0..64).map(|c| vec![c]).collect();
        assert_eq!(pod_workers(&many, 64), vec![4; 64]);
    }

    /// An empty work item (its queue sets its CPU and workqueue).
    fn test_item() -> super::super::queue::WorkItem {
        super::super::queue::WorkItem {
            buf: std::ptr::null_mut(),
            len: 0,
            reader: 0,
            slot: 0,
            offset: 0,
            issue_ns: 0,
            enqueue_ns: 0,
            queued_cpu: 0,
            pwq: super::super::queue::NO_PWQ,
            needs_decrypt: false,
            bio: super::super::queue::NO_BIO,
            unfilled: false,
        }
    }

    #[test]
    fn work_goes_to_the_queueing_cpus_pod() {
        let pods: Vec<Pod> = [vec![0, 1], vec![2, 3]]
            .into_iter()
            .map(|cpus| Pod {
                q: Arc::new(WorkQueue::new(4, 1)),
                cpus,
            })
            .collect();
        let q = Queues::unbound(pods);
        let item = test_item();
        q.push(item, 3);
        q.push(item, 1);
        q.push(item, 2);
        // A CPU outside every pod goes to the first.
        q.push(item, 99);
        let lens: Vec<usize> = q.all().iter().map(|q| q.len()).collect();
        assert_eq!(lens, vec![2, 2]);
    }
    #[test]
    fn each_per_cpu_workqueue_runs_its_kernels_max_active_on_each_cpu() {
        use crate::settings::{Settings, VerifyMode, WorkerMode};
        let item = test_item();
        // Three items queued on CPU 0 of 2: the count each queue set aside.
        let aside = |qs: &Queues| {
            for _ in 0..3 {
                qs.push(item, 0);
            }
            let Queues::Bound { by_cpu, pwq, .. } = qs else {
                panic!("a per-CPU queue")
            };
            by_cpu[0].as_ref().unwrap().inactive(*pwq).0
        };
        let mut s = Settings::default();
        s.workers.mode = WorkerMode::Bound;
        s.workers.verify_mode = VerifyMode::Bound;
        s.workers.highpri = true;
        // fscrypt's bound queue (256) and fsverity's (num_online_cpus(),
        // 2), sharing each CPU's high-priority pool.
        s.pipeline.decrypt = true;
        s.pipeline.verity = true;
        let (first, second) = queues_for(&s, &Plan::of(&s), 64, &[0, 1], &[], 2);
        assert_eq!(aside(first.as_ref().unwrap()), 0);
        assert_eq!(aside(second.as_ref().unwrap()), 1);
        // fs-verity alone: its queue is the first, still 2 a CPU, whatever
        // workers.max_active (the unbound queue's) says.
        s.pipeline.decrypt = false;
        s.workers.max_active = 8;
        let (first, second) = queues_for(&s, &Plan::of(&s), 64, &[0, 1], &[], 2);
        assert!(second.is_none());
        assert_eq!(aside(first.as_ref().unwrap()), 1);
        // A run held to CPU 0 of a 2-CPU machine: still 2 on that CPU
        // (num_online_cpus() is the machine's).
        let (first, _) = queues_for(&s, &Plan::of(&s), 64, &[0], &[], 2);
        assert_eq!(aside(first.as_ref().unwrap()), 1);
        let (first, _) = queues_for(&s, &Plan::of(&s), 64, &[0], &[], 1);
        assert_eq!(aside(first.as_ref().unwrap()), 2);
    }
}
