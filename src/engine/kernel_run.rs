//! The kernel target's runtime inside a running engine
//! (`workload.target = "kernel"`): opening the target, tracing its queues,
//! turning the system knobs it asks for, and leaving it all as it was.
//! Apart from the engine's lifecycle because it owns system state (a
//! mounted image, a key, tracefs, knobs) that must be put back in order.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::dataset::Progress;

use super::{Engine, EngineError, KernelError};

/// The kernel target of a running engine: its file system, the tracer on
/// its queues, and the system knobs turned for it. Dropped in field order:
/// the knobs are put back, the tracer's instance removed, then the key
/// removed and the image unmounted.
pub(super) struct KernelRun {
    /// The file the pipeline reads (closed first: the image unmounts).
    pub(super) file: Option<Arc<File>>,
    /// The memory cgroup the process runs in, holding the file's cache to
    /// `cache.size` (`kernel.limit_cache`); the process moves back and the
    /// cgroup goes when the last holder (this, the sampler) lets go.
    pub(super) cgroup: Option<Arc<crate::kernel::cgroup::CacheCgroup>>,
    pub(super) knobs: crate::kernel::knobs::SystemKnobs,
    /// The tracer, with `kernel.trace` (the default).
    pub(super) traced: Option<Traced>,
    pub(super) target: crate::kernel::target::KernelTarget,
    /// `kernel.dir` it was opened with.
    pub(super) dir: String,
    /// The largest dataset its image has room for.
    pub(super) file_size: u64,
}

/// The kernel target's tracer and, when readpath mounted it, tracefs
/// (dropped in that order: the instance goes before the mount).
pub(super) struct Traced {
    pub(super) tracer: Arc<crate::kernel::trace::Tracer>,
    pub(super) _tracefs: Option<crate::kernel::TracefsMount>,
}

impl Traced {
    /// Starts following the post-read queues and `device`'s requests.
    fn start(data_dir: &Path, device: (u32, u32)) -> Result<Traced, EngineError> {
        let kerr = |step: &'static str, source: std::io::Error| {
            EngineError::from(KernelError::Step { step, source })
        };
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

impl Engine {
    /// Notes the kernel's workqueue affinity scope while the kernel target
    /// runs (before its knobs are put back), for the run summary.
    pub(super) fn note_kernel_scope(&self) {
        // Only while the kernel target itself is read (its file open), not
        // when only its device is (`cache.device = "target"`).
        if self.kernel.as_ref().is_none_or(|k| k.file.is_none()) {
            return;
        }
        // A kernel before 6.5 has no affinity scopes: said in the
        // resolver's words (its rule on `kernel.affinity_scope`), from the
        // machine's features, not taken from a failed read.
        let scope = Some(if self.features.kernel_affinity_scopes {
            std::fs::read_to_string(crate::kernel::knobs::AFFINITY_SCOPE)
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|e| format!("unread ({e})"))
        } else {
            format!("none ({})", super::resolve::NO_SCOPES)
        });
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
    pub(super) fn kernel_file(
        &mut self,
        eff: &super::Effective,
        progress: Progress<'_>,
    ) -> Result<PathBuf, EngineError> {
        let kerr = |step: &'static str, source: std::io::Error| {
            EngineError::from(KernelError::Step { step, source })
        };
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
            .map_err(KernelError::Open)?;
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
                cgroup: None,
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
        let path =
            k.target
                .file(&self.dataset, kind, progress)
                .map_err(|e| match e.raw_os_error() {
                    Some(crate::sys::errno::ENOPKG) => KernelError::MissingCipher {
                        cipher: eff.pipeline.cipher.name(),
                        source: e,
                    }
                    .into(),
                    _ => kerr("writing its file through the kernel", e),
                })?;
        // Knobs last: nothing is changed until the file is there.
        let flipped = apply_knobs(k, eff)?;
        for f in flipped {
            self.sink().push(f);
        }
        self.limit_kernel_cache(eff, &path)?;
        Ok(path)
    }

    /// Holds the kernel's page cache of the file at `path` to `eff`'s
    /// `cache.size` (`kernel.limit_cache`, as resolved: off where no memory
    /// cgroup can be made, with a notice): the process enters a cgroup of
    /// its own (once per kernel target), its limit follows `cache.size`,
    /// and the file's cache is dropped when the process has just moved
    /// (pages cached before were charged to the cgroup it came from). The
    /// tracer counts the pages added to this file's cache (its misses).
    fn limit_kernel_cache(
        &mut self,
        eff: &super::Effective,
        path: &Path,
    ) -> Result<(), EngineError> {
        let kerr = |step: &'static str, source: std::io::Error| {
            EngineError::from(KernelError::Step { step, source })
        };
        let cache = eff.cache_bytes();
        let data_dir = self.opts.data_dir.clone();
        let k = self.kernel.as_mut().expect("opened above");
        // The pages being copied to the readers (locked) are room beyond
        // the cache; the readahead windows being read (locked) and a
        // margin the least cache whatever cache.size.
        let readahead = eff.kernel.read_ahead_kb.map_or_else(
            || {
                crate::kernel::knobs::queue_dir_of(path)
                    .ok()
                    .and_then(|q| std::fs::read_to_string(q.join("read_ahead_kb")).ok())
                    .and_then(|t| t.trim().parse::<u64>().ok())
                    .unwrap_or(128)
                    << 10
            },
            |kb| u64::from(kb) << 10,
        );
        let readers = u64::from(eff.workload.readers);
        let room = crate::kernel::cgroup::Room {
            slack: crate::kernel::cgroup::slack(
                readers,
                u64::from(super::resolve::in_flight(eff)),
                eff.workload.block_size,
            ),
            floor: crate::kernel::cgroup::floor(readers, readahead),
        };
        // The tracefs instance that counts the file's misses is made
        // first: made inside the cgroup, its files' dentries and inodes
        // (about 4 MiB of slab) are charged to it, and under cgroup v2,
        // which charges kernel memory, a limit of a few MiB then has the
        // kernel's OOM killer end readpath (seen on Debian's 6.1 in the
        // lab). Where the cgroup exists already, it gets room for that
        // first, and its limit is set again once the instance is made.
        let f = File::open(path).map_err(|e| kerr("opening the kernel target's file", e))?;
        if let Some(cg) = &k.cgroup
            && eff.kernel.limit_cache
        {
            let _ = cg.make_room(crate::kernel::cgroup::TRACE_ROOM);
        }
        let mut miss_note = None;
        if let Some(t) = &k.traced {
            use std::os::unix::fs::MetadataExt;
            let m = f
                .metadata()
                .map_err(|e| kerr("the kernel target's file", e))?;
            let pages = m.len().div_ceil(crate::sys::page_size() as u64);
            if let Err(e) =
                t.tracer
                    .follow_file(&data_dir, crate::sys::dev_numbers(m.dev()), m.ino(), pages)
            {
                miss_note = Some(format!(
                    "page hit %: the kernel's misses are not counted: {e}"
                ));
            }
        }
        let mut entered = false;
        if !eff.kernel.limit_cache {
            if k.cgroup.take().is_some() {
                *self.shared.kernel.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
        } else if let Some(cg) = &k.cgroup {
            cg.set_cache(cache, room);
            let _ = cg.adjust(0);
        } else {
            let place = crate::sys::cgroup::probe().map_err(KernelError::NoCgroup)?;
            let cg = crate::kernel::cgroup::CacheCgroup::enter(&data_dir, &place, cache, room)
                .map_err(|e| kerr("kernel.limit_cache: a memory cgroup for the page cache", e))?;
            k.cgroup = Some(Arc::new(cg));
            entered = true;
        }
        if let Some(n) = miss_note {
            self.sink().push(n);
        }
        let k = self.kernel.as_ref().expect("opened above");
        if let Some(cg) = &k.cgroup
            && entered
        {
            let _ = crate::sys::fadvise_dontneed(&f);
            self.sink().push(format!(
                    "kernel target: readpath runs in memory cgroup {}; the file's page cache is held to cache.size = {} (limit = cache.size (at least {}: the readahead windows and a margin) + what else the cgroup is charged, {} right after the move, + {} for the reads in flight, set every interval)",
                    cg.dir().display(),
                    crate::settings::format_size(cache),
                    crate::settings::format_size(cg.room().floor),
                    crate::settings::format_size(cg.charged_at_start),
                    crate::settings::format_size(cg.room().slack)
                ));
        }
        Ok(())
    }

    /// Leaves the kernel target, if it runs: the sampler stops taking its
    /// trace, the knobs are put back, the tracefs instance removed, the
    /// key removed and the image unmounted.
    pub(super) fn leave_kernel(&mut self) {
        *self.shared.kernel.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.note_kernel_scope();
        if let Some(mut k) = self.kernel.take() {
            if let Some(t) = k.traced.take() {
                t.release();
            }
            drop(k);
        }
    }
}

/// Turns the kernel knobs of `eff` on the target's system (a knob left at
/// `default` is put back to what it was). Returns a line for each lab
/// switch it flipped.
fn apply_knobs(k: &mut KernelRun, eff: &super::Effective) -> Result<Vec<String>, EngineError> {
    use crate::kernel::knobs::{Knob, cpu_mask_hex};
    let kn = &eff.kernel;
    let mut want: Vec<(Knob, Option<String>)> = vec![
        (
            Knob::affinity_scope(),
            kn.affinity_scope.map(|scope| scope.name().to_string()),
        ),
        (
            Knob::unbound_cpus(),
            // `workload.cpus` keeps the kernel's unbound workqueues (its
            // loop worker, fscrypt's queue, unbound fs-verity) to the run's
            // CPUs too, unless the knob is set itself.
            if !kn.unbound_cpus.is_empty() {
                Some(cpu_mask_hex(&kn.unbound_cpus))
            } else if eff.cpus_restricted() {
                Some(cpu_mask_hex(&eff.run_cpus(&crate::sys::online_cpus())))
            } else {
                None
            },
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
        Err(source) if kn.read_ahead_kb.is_some() || kn.rq_affinity.is_some() => {
            return Err(KernelError::DeviceQueue {
                base: base.to_path_buf(),
                source,
            }
            .into());
        }
        Err(_) => {}
    }
    for (knob, value) in want {
        let r = match value {
            Some(v) => k.knobs.set(&knob, &v),
            None => k.knobs.restore(&knob.path),
        };
        r.map_err(|source| KernelError::Knob {
            key: knob.key,
            source,
        })?;
    }
    apply_switches(k, eff)
}

/// On a kernel with readpath's lab switches (`kernel::switches`), flips
/// them to what `eff`'s queue and wait settings ask for, through the knob
/// journal: a switch already at the value asked is left alone (and left
/// out of the journal), one asked back to its original is put back.
/// Returns a line for each switch flipped (`kernel switch
/// readpath.fsverity_unbound = Y: ...`).
fn apply_switches(k: &mut KernelRun, eff: &super::Effective) -> Result<Vec<String>, EngineError> {
    use crate::kernel::{knobs::Knob, switches};
    let mut flipped = Vec::new();
    if !switches::probe() {
        return Ok(flipped);
    }
    let want = switches::wanted(eff).map_err(KernelError::Switch)?;
    for (name, value) in want {
        let Some(sw) = switches::switch(name) else {
            continue;
        };
        let knob = Knob::switch(sw);
        let before = switches::read_value(&knob.path);
        let r = match k.knobs.original(&knob.path) {
            Some(orig) if orig == value => k.knobs.restore(&knob.path),
            Some(_) => k.knobs.set(&knob, &value),
            None => {
                if switches::read_value(&knob.path).as_deref() == Some(value.as_str()) {
                    Ok(())
                } else {
                    k.knobs.set(&knob, &value)
                }
            }
        };
        r.map_err(|source| KernelError::Knob {
            key: knob.key,
            source,
        })?;
        if before.as_deref() != Some(value.as_str()) {
            flipped.push(format!(
                "kernel switch {} = {value} ({})",
                knob.key, sw.what
            ));
        }
    }
    Ok(flipped)
}
