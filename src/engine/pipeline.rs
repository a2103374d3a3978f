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

use crate::dataset::Dataset;
use crate::metrics::{Registry, Role};
use crate::settings::Settings;
use crate::verity::merkle::VerifiedCache;

use super::queue::{Queues, WorkQueue};
use super::reader;
use super::stages::{Ctx, Placement, Plan};
use super::{NoticeSink, OpenFile};

/// A running pipeline: its context and threads.
pub struct Pipeline {
    ctx: Arc<Ctx>,
    readers: Vec<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
}

fn build_queues(
    p: Placement,
    capacity: usize,
    cpus: &[usize],
    max_active: usize,
) -> Option<Queues> {
    match p {
        Placement::Inline => None,
        Placement::Bound => {
            let max_cpu = cpus.iter().copied().max().unwrap_or(0);
            let mut by_cpu: Vec<Option<Arc<WorkQueue>>> = vec![None; max_cpu + 1];
            for &c in cpus {
                by_cpu[c] = Some(Arc::new(WorkQueue::new(capacity, 1)));
            }
            let first = by_cpu[cpus[0]].clone().expect("queue for first CPU");
            Some(Queues::Bound { by_cpu, first })
        }
        Placement::Unbound => Some(Queues::Unbound(Arc::new(WorkQueue::new(
            capacity, max_active,
        )))),
    }
}

impl Pipeline {
    /// Builds the queues, spawns the workers, then the readers.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        settings: Settings,
        file: OpenFile,
        dataset: Arc<Dataset>,
        cache: Arc<VerifiedCache>,
        registry: Arc<Registry>,
        notices: NoticeSink,
        faults: super::Faults,
        pcache: Option<(Arc<super::pagecache::PageCache>, Arc<std::fs::File>)>,
    ) -> std::io::Result<Pipeline> {
        let (pcache, plain) = pcache.unzip();
        let plan = Plan::of(&settings);
        let cpus = crate::sys::online_cpus();
        let readers = settings.workload.readers as usize;
        let per_reader = reader::buffers_per_reader(&settings);
        let bios_per_reader = reader::bios_per_reader(&settings);
        // Room for every buffer, or every bio, that can be in flight.
        let capacity = readers * per_reader.max(bios_per_reader);
        let max_active = settings.effective_max_active(cpus.len());
        let first_q = build_queues(plan.first, capacity, &cpus, max_active);
        let second_q = plan
            .second
            .and_then(|p| build_queues(p, capacity, &cpus, max_active));
        let cipher = plan
            .decrypt
            .then(|| Arc::new(dataset.cipher(settings.pipeline.cipher)));
        let returns = (0..readers)
            .map(|_| reader::new_return_queue(&settings, per_reader))
            .collect::<std::io::Result<Vec<_>>>()?;
        let ctx = Arc::new(Ctx {
            settings,
            plan,
            file,
            cipher,
            dataset,
            cache,
            first_q,
            second_q,
            returns,
            stop_readers: AtomicBool::new(false),
            stop_workers: AtomicBool::new(false),
            registry,
            notices,
            highpri_noticed: AtomicBool::new(false),
            verity_noticed: AtomicBool::new(false),
            buffers_alive: (0..readers).map(|_| AtomicBool::new(false)).collect(),
            touched_freed: std::sync::atomic::AtomicU64::new(0),
            faults,
            pcache,
            bios_per_reader,
            plain,
        });
        let mut workers = Vec::new();
        // Named after the kernel queue they model: the first queue is
        // fscrypt's when decryption is on, otherwise fsverity's.
        let first_name = if ctx.plan.decrypt {
            "fscrypt"
        } else {
            "fsverity"
        };
        for (qs, prefix) in [(&ctx.first_q, first_name), (&ctx.second_q, "fsverity")] {
            let Some(qs) = qs else { continue };
            match qs {
                Queues::Bound { by_cpu, .. } => {
                    for (cpu, q) in by_cpu.iter().enumerate() {
                        if let Some(q) = q {
                            workers.push(spawn_worker(
                                ctx.clone(),
                                q.clone(),
                                0,
                                Some(cpu),
                                format!("{prefix}-cpu{cpu}"),
                            )?);
                        }
                    }
                }
                Queues::Unbound(q) => {
                    for i in 0..max_active {
                        workers.push(spawn_worker(
                            ctx.clone(),
                            q.clone(),
                            i,
                            None,
                            format!("{prefix}-u{i}"),
                        )?);
                    }
                }
            }
        }
        let mut pipeline = Pipeline {
            ctx: ctx.clone(),
            readers: Vec::new(),
            workers,
        };
        for i in 0..readers {
            match reader::spawn(ctx.clone(), i) {
                Ok(h) => pipeline.readers.push(h),
                Err(e) => {
                    pipeline.stop();
                    return Err(e);
                }
            }
        }
        Ok(pipeline)
    }

    /// The shared context.
    pub fn ctx(&self) -> &Arc<Ctx> {
        &self.ctx
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
        self.ctx.stop_workers.store(true, Ordering::SeqCst);
        for qs in [&self.ctx.first_q, &self.ctx.second_q]
            .into_iter()
            .flatten()
        {
            for q in qs.all() {
                q.wake_all();
            }
        }
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn_worker(
    ctx: Arc<Ctx>,
    q: Arc<WorkQueue>,
    index: usize,
    cpu: Option<usize>,
    name: String,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            if let Some(cpu) = cpu
                && let Err(e) = crate::sys::pin_current_thread(&[cpu])
            {
                ctx.notices
                    .push(format!("{name}: could not pin to CPU {cpu}: {e}"));
            }
            let nice = if ctx.settings.workers.highpri { -20 } else { 0 };
            if let Err(e) = crate::sys::set_current_thread_nice(nice)
                && !ctx.highpri_noticed.swap(true, Ordering::SeqCst)
            {
                ctx.notices.push(format!(
                    "workers.highpri: running at nice 0 instead of -20: {e}"
                ));
            }
            q.register_worker(index);
            let mut h = ctx.registry.register(Role::Worker);
            loop {
                h.tick();
                if let Some(item) = q.pop() {
                    ctx.work(&mut h.rec, item);
                    continue;
                }
                if ctx.stop_workers.load(Ordering::SeqCst) {
                    break;
                }
                if let Some(item) = q.sleep(index) {
                    ctx.work(&mut h.rec, item);
                }
            }
            if let Ok(c) =
                crate::sys::ThreadStatReader::open(crate::sys::gettid()).and_then(|mut r| r.read())
            {
                h.slot().set_final_sched(c);
            }
        })
}
