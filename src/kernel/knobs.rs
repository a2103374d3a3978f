//! The system knobs readpath turns while a kernel workload runs, and how
//! every one of them is put back.
//!
//! To see what the kernel's read post-processing does under other settings,
//! readpath (as root) changes real, system-wide sysfs files: the unbound
//! workqueues' default affinity scope and CPU mask, and the read-ahead and
//! completion affinity (`rq_affinity`) of the block device under the file it
//! reads. Those settings outlive the process, so each one's original value
//! is saved in `DATA_DIR/kernel/knobs-PID.json` (written to a temporary
//! file, synced and renamed) *before* the knob is first written: whatever
//! happens after that, the state file knows what to put back. [`SystemKnobs`]
//! puts every knob back when it is dropped (an orderly exit, an error, a
//! signal that unwinds); a process killed outright (SIGKILL, a crash) leaves
//! its state file behind, and the next start, or `readpath kernel restore`,
//! calls [`restore_left`] to write those originals back once that process is
//! gone.
//!
//! The knobs are global, so their state is too: as root it lives in
//! [`crate::sys::trust::GLOBAL_STATE_DIR`] (`/run/readpath`), whatever the
//! data dir, and every readpath sees every other's. A live readpath proves
//! itself with a lock it holds (`live-PID.lock`), not with a PID that may be
//! reused or forged; one that has a knob changed makes any other readpath
//! that would change the same knob fail with its PID and data dir, so the
//! original is always the one put back. Recovery acts only on what readpath
//! can prove it wrote: a state file under the trust rule
//! ([`crate::sys::trust`]), whose every entry is one of the knobs readpath
//! knows ([`known_knob`]: the affinity scope, the unbound cpumask, the
//! autogroups, the `read_ahead_kb` and `rq_affinity` of a block device
//! present now, the lab kernel's switches under
//! `/sys/module/readpath/parameters/`) with
//! a value that knob takes. Anything else is set aside as `.refused`, named
//! in the output, and recovery goes on with the rest.
//!
//! The state files themselves (writing, reading and recovering them) are in
//! `kernel/journal.rs`; the CPU-mask text of `UNBOUND_CPUMASK` is parsed in
//! `sys::cpu`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::sys::trust;

pub use super::journal::KnobRefused;
use super::journal::{
    MAX_VALUE, Saved, clip, described, full_path, held, os_text, read_state, read_sysfs,
    restore_gone, state_pid, sys_path_ok, value_ok, write_state, write_sysfs,
};
use crate::sys::AUTOGROUP_SYSCTL;
/// CPU masks as sysfs writes them are parsed in `sys` (pure text, next to
/// the CPU lists); named here as before.
pub use crate::sys::{cpu_mask_hex, parse_cpu_mask_hex};

/// The workqueue module's default affinity scope for unbound workqueues
/// (`cpu`, `smt`, `cache`, `numa` or `system`).
pub const AFFINITY_SCOPE: &str = crate::sys::WQ_AFFINITY_SCOPE;

/// The CPUs unbound workqueues may run on (a hex mask).
pub const UNBOUND_CPUMASK: &str = "/sys/devices/virtual/workqueue/cpumask";

/// The setting key of [`AFFINITY_SCOPE`].
pub const KEY_AFFINITY_SCOPE: &str = crate::key!(kernel.affinity_scope).name();

/// The setting key of [`UNBOUND_CPUMASK`].
pub const KEY_UNBOUND_CPUS: &str = crate::key!(kernel.unbound_cpus).name();

/// The setting key of [`AUTOGROUP_SYSCTL`].
pub const KEY_AUTOGROUP: &str = crate::key!(kernel.autogroup).name();

/// The setting key of a block device's `queue/read_ahead_kb`.
pub const KEY_READ_AHEAD_KB: &str = crate::key!(kernel.read_ahead_kb).name();

/// The setting key of a block device's `queue/rq_affinity`.
pub const KEY_RQ_AFFINITY: &str = crate::key!(kernel.rq_affinity).name();

/// The values [`AFFINITY_SCOPE`] takes: the settings' scope names.
pub const AFFINITY_SCOPES: [&str; 5] = crate::settings::AffinityScope::NAMES;

/// The largest `read_ahead_kb` a state file may put back (the kernel's own
/// limit is far above any device's; 1 GiB is more than any sets).
const MAX_READ_AHEAD_KB: u64 = 1 << 20;

/// How long a readpath waits for another to finish checking and saving
/// its knobs (a few file operations) before it gives up.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// One knob: its setting key and sysfs file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob {
    /// The setting key (`kernel.affinity_scope`, ...).
    pub key: &'static str,
    /// The sysfs file, absolute (`/sys/...`).
    pub path: PathBuf,
}

impl Knob {
    /// `kernel.affinity_scope`: [`AFFINITY_SCOPE`].
    pub fn affinity_scope() -> Knob {
        Knob {
            key: KEY_AFFINITY_SCOPE,
            path: PathBuf::from(AFFINITY_SCOPE),
        }
    }

    /// `kernel.unbound_cpus`: [`UNBOUND_CPUMASK`].
    pub fn unbound_cpus() -> Knob {
        Knob {
            key: KEY_UNBOUND_CPUS,
            path: PathBuf::from(UNBOUND_CPUMASK),
        }
    }

    /// `kernel.autogroup`: [`AUTOGROUP_SYSCTL`].
    pub fn autogroup() -> Knob {
        Knob {
            key: KEY_AUTOGROUP,
            path: PathBuf::from(AUTOGROUP_SYSCTL),
        }
    }

    /// A switch of readpath's lab kernel (`kernel::switches`): its file
    /// under `/sys/module/readpath/parameters/`, keyed by its parameter
    /// name (`readpath.fsverity_unbound`).
    pub fn switch(s: &crate::kernel::switches::Switch) -> Knob {
        Knob {
            key: s.key,
            path: s.path(),
        }
    }

    /// `kernel.read_ahead_kb`: `queue/read_ahead_kb` of the block device
    /// holding `file` (see [`queue_dir_of`]).
    pub fn read_ahead_kb(file: &Path) -> io::Result<Knob> {
        Ok(Knob {
            key: KEY_READ_AHEAD_KB,
            path: queue_dir_of(file)?.join("read_ahead_kb"),
        })
    }

    /// `kernel.rq_affinity`: `queue/rq_affinity` of the block device
    /// holding `file` (see [`queue_dir_of`]).
    pub fn rq_affinity(file: &Path) -> io::Result<Knob> {
        Ok(Knob {
            key: KEY_RQ_AFFINITY,
            path: queue_dir_of(file)?.join("rq_affinity"),
        })
    }
}

/// The queue directory (`/sys/.../queue`) of the block device holding
/// `path` (its `st_dev`; for a partition, the queue of the disk it is on),
/// or an error naming why there is none (tmpfs, overlayfs, NFS, btrfs: an
/// anonymous device; no such block device in sysfs).
pub fn queue_dir_of(path: &Path) -> io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dev = fs::metadata(path)
        .map_err(|e| described(&e, &path.display().to_string()))?
        .dev();
    let (major, minor) = crate::sys::dev_numbers(dev);
    queue_dir_in(Path::new("/"), major, minor).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("no block queue for {}: {e}", path.display()),
        )
    })
}

/// [`queue_dir_of`] for device `major:minor` in the sysfs tree under
/// `root`; the answer is the production path (`/sys/...`).
fn queue_dir_in(root: &Path, major: u32, minor: u32) -> io::Result<PathBuf> {
    if major == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "it is on device {major}:{minor}, an anonymous device with no block queue \
                 (tmpfs, overlayfs, NFS, or btrfs, whose st_dev is not its disk)"
            ),
        ));
    }
    let link = root.join(format!("sys/dev/block/{major}:{minor}"));
    let dev_dir = fs::canonicalize(&link).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "device {major}:{minor} is not a block device ({}: {})",
                link.display(),
                os_text(&e)
            ),
        )
    })?;
    let own = dev_dir.join("queue");
    let queue = if own.is_dir() {
        own
    } else {
        // A partition: its queue is its disk's.
        match dev_dir.parent().map(|p| p.join("queue")) {
            Some(q) if q.is_dir() => q,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "device {major}:{minor} has no queue directory in {} or its parent",
                        dev_dir.display()
                    ),
                ));
            }
        }
    };
    let root = fs::canonicalize(root)?;
    let rel = queue.strip_prefix(&root).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} lies outside {}", queue.display(), root.display()),
        )
    })?;
    let prod = Path::new("/").join(rel);
    if !sys_path_ok(&prod) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not under /sys/", prod.display()),
        ));
    }
    Ok(prod)
}

/// Knobs changed by this process, saved before they are first written,
/// restored on drop.
#[derive(Debug)]
pub struct SystemKnobs {
    root: PathBuf,
    state_dir: PathBuf,
    state_file: PathBuf,
    /// Who this is, for another readpath's refusal (the data dir).
    note: String,
    /// What this one changed, in order of first change.
    changed: Vec<Saved>,
}

impl SystemKnobs {
    /// Knobs of the running system (`root` `/`) changed by a readpath
    /// whose data dir is `data_dir`, saved under
    /// [`crate::kernel::state_dir`] (`/run/readpath` as root).
    pub fn new(data_dir: &Path) -> SystemKnobs {
        let mut k = SystemKnobs::with_root(&crate::kernel::state_dir(data_dir), Path::new("/"));
        k.note = format!("data dir {}", data_dir.display());
        k
    }

    /// Knobs whose paths are taken relative to `root` (a test's fake sysfs
    /// tree; `/` in production), saved in `state_dir/knobs-PID.json`
    /// (`state_dir` is made if missing; a failure shows at the first
    /// [`SystemKnobs::set`]).
    pub fn with_root(state_dir: &Path, root: &Path) -> SystemKnobs {
        SystemKnobs {
            root: root.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            state_file: state_dir.join(format!("knobs-{}.json", std::process::id())),
            note: format!("state in {}", state_dir.display()),
            changed: Vec::new(),
        }
    }

    /// The knobs changed and not yet put back, as (key, path, original),
    /// in order of first change.
    #[cfg(test)]
    pub fn changed(&self) -> impl Iterator<Item = (&str, &Path, &str)> {
        self.changed
            .iter()
            .map(|s| (s.key.as_str(), Path::new(&s.path), s.value.as_str()))
    }

    /// Sets `knob` to `value`. The first time this knob is changed, its
    /// current value is read and saved in the state file (with every
    /// original saved before it; written to a temporary file, synced and
    /// renamed) before anything is written. Refuses a knob outside `/sys/`,
    /// a value with control characters or over 4096 bytes, and a knob
    /// another live readpath has changed (or a gone one left changed).
    /// Errors name the file, the value and the OS error.
    pub fn set(&mut self, knob: &Knob, value: &str) -> io::Result<()> {
        let full = full_path(&self.root, &knob.path)?;
        if !value_ok(value) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "refusing to write {:?} to {}: a sysfs value has no control characters and at most {MAX_VALUE} bytes",
                    clip(value),
                    full.display()
                ),
            ));
        }
        let newly = !self.changed.iter().any(|s| Path::new(&s.path) == knob.path);
        if newly {
            self.record(knob, &full, value)?;
        } else {
            self.note_written(knob, value)?;
        }
        if let Err(e) = write_sysfs(&full, value) {
            if newly
                && let Some(s) = self
                    .changed
                    .iter()
                    .find(|s| Path::new(&s.path) == knob.path)
                    .cloned()
            {
                // Nothing was changed: forget the original again (a
                // failure to do so leaves a harmless entry behind).
                let _ = self.forget(std::slice::from_ref(&s));
            }
            return Err(described(
                &e,
                &format!("writing {value:?} to {}", full.display()),
            ));
        }
        Ok(())
    }

    /// Records in the state file that `value` is what readpath writes to
    /// `knob` now (it changed it before), before it is written.
    fn note_written(&mut self, knob: &Knob, value: &str) -> io::Result<()> {
        let Some(i) = self
            .changed
            .iter()
            .position(|s| Path::new(&s.path) == knob.path)
        else {
            return Ok(());
        };
        if self.changed[i].written.as_deref() == Some(value) {
            return Ok(());
        }
        let _lock = trust::lock_exclusive(&self.state_dir.join("knobs.lock"), LOCK_WAIT)?;
        let old = self.changed[i].clone();
        let mut new = old.clone();
        new.written = Some(value.to_string());
        let mut saved = read_state(&self.state_file)?;
        if let Some(j) = saved.iter().rposition(|c| *c == old) {
            saved[j] = new.clone();
        }
        write_state(&self.state_file, &saved).map_err(|e| {
            described(
                &e,
                &format!(
                    "noting {value:?} for {} in {} (nothing was changed)",
                    knob.path.display(),
                    self.state_file.display()
                ),
            )
        })?;
        self.changed[i] = new;
        Ok(())
    }

    /// Reads `knob`'s current value and saves it in the state file, with
    /// `value`, what readpath is about to write.
    fn record(&mut self, knob: &Knob, full: &Path, value: &str) -> io::Result<()> {
        let path = knob.path.to_str().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not UTF-8", knob.path.display()),
            )
        })?;
        trust::ensure_dir(&self.state_dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "the knobs' state directory {}: {e} (nothing was changed)",
                    self.state_dir.display()
                ),
            )
        })?;
        // One readpath at a time checks and saves (other processes).
        let _lock = trust::lock_exclusive(&self.state_dir.join("knobs.lock"), LOCK_WAIT)?;
        trust::hold_live(&self.state_dir, &self.note)?;
        let mut held = held();
        if held.iter().any(|h| h == full) {
            return Err(io::Error::new(
                io::ErrorKind::ResourceBusy,
                format!(
                    "{} is already changed by another part of this readpath and not put back yet",
                    full.display()
                ),
            ));
        }
        // What gone ones left goes back first: the value read below is
        // then the real original.
        let _ = restore_gone(&self.state_dir, &self.root, &known_knob, &same_value);
        self.check_others(&knob.path)?;
        let original =
            read_sysfs(full).map_err(|e| described(&e, &format!("reading {}", full.display())))?;
        if !value_ok(&original) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} holds {:?}, which cannot be saved to be put back (control characters or over {MAX_VALUE} bytes)",
                    full.display(),
                    clip(&original)
                ),
            ));
        }
        let mut saved = read_state(&self.state_file)?;
        let entry = Saved {
            key: knob.key.to_string(),
            path: path.to_string(),
            value: original,
            written: Some(value.to_string()),
        };
        saved.push(entry.clone());
        write_state(&self.state_file, &saved).map_err(|e| {
            described(
                &e,
                &format!(
                    "saving the original of {} in {} (nothing was changed)",
                    full.display(),
                    self.state_file.display()
                ),
            )
        })?;
        held.push(full.to_path_buf());
        self.changed.push(entry);
        Ok(())
    }

    /// Refuses `path` when another process's state file lists it: a live
    /// readpath changed it (its value is no original), or a gone one left
    /// it changed and it could not be put back (its original is in that
    /// file).
    fn check_others(&self, path: &Path) -> io::Result<()> {
        let Ok(rd) = fs::read_dir(&self.state_dir) else {
            return Ok(());
        };
        let me = std::process::id();
        for e in rd.flatten() {
            let Some(pid) = state_pid(&e.file_name().to_string_lossy()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(saved) = read_state(&e.path()) else {
                continue;
            };
            if !saved.iter().any(|s| Path::new(&s.path) == path) {
                continue;
            }
            let msg = if let Some(who) = trust::live_owner(&self.state_dir, pid) {
                format!(
                    "another readpath (PID {pid}, {}) has changed {} and not put it back yet; wait for it to end (the original is put back by the one that changed it first)",
                    crate::sys::printable(&who, false),
                    path.display()
                )
            } else {
                format!(
                    "a readpath that is gone (PID {pid}) left {} changed (its original is in {}); run `readpath kernel restore` first",
                    path.display(),
                    e.path().display()
                )
            };
            return Err(io::Error::new(io::ErrorKind::ResourceBusy, msg));
        }
        Ok(())
    }

    /// Drops `done` from this one's knobs, the held list and the state
    /// file (removed when it is left empty).
    fn forget(&mut self, done: &[Saved]) -> io::Result<()> {
        let mut held = held();
        for s in done {
            if let Ok(full) = full_path(&self.root, Path::new(&s.path)) {
                held.retain(|h| *h != full);
            }
            if let Some(i) = self.changed.iter().position(|c| c == s) {
                self.changed.remove(i);
            }
        }
        let mut saved = read_state(&self.state_file)?;
        for s in done {
            // The last entry is ours: an earlier one with the same path
            // was left by a gone process with this PID.
            if let Some(i) = saved.iter().rposition(|c| c == s) {
                saved.remove(i);
            }
        }
        write_state(&self.state_file, &saved)
    }

    /// The original value of `path`, if this one changed it.
    pub fn original(&self, path: &Path) -> Option<&str> {
        self.changed
            .iter()
            .find(|s| Path::new(&s.path) == path)
            .map(|s| s.value.as_str())
    }

    /// Puts back the knob at `path` (if this one changed it) and drops it
    /// from the state file (removed once empty). A knob whose file is gone
    /// (its device removed) is dropped with nothing to write.
    pub fn restore(&mut self, path: &Path) -> io::Result<()> {
        let Some(s) = self
            .changed
            .iter()
            .find(|s| Path::new(&s.path) == path)
            .cloned()
        else {
            return Ok(());
        };
        let full = full_path(&self.root, path)?;
        match write_sysfs(&full, &s.value) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(described(
                    &e,
                    &format!("putting back {:?} to {}", s.value, full.display()),
                ));
            }
        }
        // The knob is back: a stale entry left by a failed state write is
        // harmless (writing the original again changes nothing).
        let _ = self.forget(std::slice::from_ref(&s));
        Ok(())
    }

    /// Puts back every knob this one changed, in reverse order of first
    /// change, and removes the state file once all are back. Returns what
    /// was written as (key, path, value); on an error, the knobs that
    /// could not be put back stay in the state file for [`restore_left`]
    /// after this process ends.
    pub fn restore_all(&mut self) -> io::Result<Vec<(String, PathBuf, String)>> {
        let mut done = Vec::new();
        let mut back = Vec::new();
        let mut failed: Vec<io::Error> = Vec::new();
        for s in self.changed.iter().rev() {
            let full = match full_path(&self.root, Path::new(&s.path)) {
                Ok(f) => f,
                Err(e) => {
                    failed.push(e);
                    continue;
                }
            };
            match write_sysfs(&full, &s.value) {
                Ok(()) => {
                    done.push((s.key.clone(), PathBuf::from(&s.path), s.value.clone()));
                    back.push(s.clone());
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => back.push(s.clone()),
                Err(e) => failed.push(described(
                    &e,
                    &format!("putting back {:?} to {}", s.value, full.display()),
                )),
            }
        }
        let _ = self.forget(&back);
        match failed.first() {
            None => Ok(done),
            Some(first) => Err(io::Error::new(
                first.kind(),
                format!(
                    "{} (saved in {}: `readpath kernel restore` puts them back once this readpath has ended)",
                    failed
                        .iter()
                        .map(|e| e.to_string())
                        .collect::<Vec<_>>()
                        .join("; "),
                    self.state_file.display()
                ),
            )),
        }
    }
}

impl Drop for SystemKnobs {
    /// Puts back every knob ([`SystemKnobs::restore_all`]); errors are
    /// ignored (what could not be put back stays in the state file).
    fn drop(&mut self) {
        let _ = self.restore_all();
        let mut held = held();
        for s in &self.changed {
            if let Ok(full) = full_path(&self.root, Path::new(&s.path)) {
                held.retain(|h| *h != full);
            }
        }
    }
}

/// After a crash: puts back every knob listed in the state files
/// (`knobs-PID.json`) under `state_dir` left by processes that are gone
/// (a live PID's file, this process's included, is left alone). Returns
/// what was written as (key, path, value). See [`restore_left_with_root`].
pub fn restore_left(state_dir: &Path) -> io::Result<Vec<(String, PathBuf, String)>> {
    restore_left_with_root(state_dir, Path::new("/"))
}

/// Whether `a` and `b` are the same value of the knob at `path`: the same
/// text, or for the unbound cpumask the same CPUs (the kernel prints a
/// mask its own way, `3` for `0003`).
pub fn same_value(path: &str, a: &str, b: &str) -> bool {
    a.trim() == b.trim()
        || (path == UNBOUND_CPUMASK
            && matches!((parse_cpu_mask_hex(a), parse_cpu_mask_hex(b)), (Ok(x), Ok(y)) if x == y))
}

/// Whether `s` is a knob readpath knows, with a value that knob takes, on
/// the machine whose sysfs is under `root`: the affinity scope (one of
/// [`AFFINITY_SCOPES`]), the scheduler's autogroups (0 or 1), the unbound
/// cpumask (a CPU mask naming at least one CPU), a lab kernel's switch
/// (`Y`/`N`, or a count in its range: `kernel::switches`), or the
/// `read_ahead_kb` (0..=2^20) or `rq_affinity` (0, 1, 2) of the queue
/// directory of a block device present now. The reason when not.
pub fn known_knob(root: &Path, key: &str, path: &str, value: &str) -> Result<(), KnobRefused> {
    let s = Saved {
        key: key.to_string(),
        path: path.to_string(),
        value: value.to_string(),
        written: None,
    };
    let path = Path::new(&s.path);
    if !sys_path_ok(path) {
        return Err(KnobRefused::NotUnderSys);
    }
    if !value_ok(&s.value) || !value_ok(&s.key) {
        return Err(KnobRefused::BadText);
    }
    let (key, ok) = if s.path == AFFINITY_SCOPE {
        (
            KEY_AFFINITY_SCOPE,
            AFFINITY_SCOPES.contains(&s.value.as_str()),
        )
    } else if s.path == AUTOGROUP_SYSCTL {
        (KEY_AUTOGROUP, matches!(s.value.as_str(), "0" | "1"))
    } else if s.path == UNBOUND_CPUMASK {
        (
            KEY_UNBOUND_CPUS,
            parse_cpu_mask_hex(&s.value).is_ok_and(|c| !c.is_empty()),
        )
    } else if let Some(sw) = crate::kernel::switches::at(path) {
        (sw.key, sw.takes(&s.value))
    } else {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let (key, ok) = match name {
            "read_ahead_kb" => (
                KEY_READ_AHEAD_KB,
                s.value.parse::<u64>().is_ok_and(|v| v <= MAX_READ_AHEAD_KB),
            ),
            "rq_affinity" => (KEY_RQ_AFFINITY, matches!(s.value.as_str(), "0" | "1" | "2")),
            _ => return Err(KnobRefused::NotAKnob),
        };
        let queue = path.parent().unwrap_or(Path::new("/"));
        if !block_queue_dirs(root).iter().any(|q| q == queue) {
            return Err(KnobRefused::NoDevice);
        }
        (key, ok)
    };
    if s.key != key {
        return Err(KnobRefused::WrongKey {
            found: clip(&s.key),
            key,
        });
    }
    if !ok {
        return Err(KnobRefused::BadValue {
            key,
            value: clip(&s.value),
        });
    }
    Ok(())
}

/// The queue directories (`/sys/...`) of every block device under `root`.
fn block_queue_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(root.join("sys/dev/block")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let (maj, min) = name.to_str()?.split_once(':')?;
            queue_dir_in(root, maj.parse().ok()?, min.parse().ok()?).ok()
        })
        .collect()
}

/// [`restore_left`] with every knob path taken relative to `root`. Only
/// files under `/sys/` are written, and only values without control
/// characters of at most 4096 bytes: a state file naming anything else is
/// refused (its other entries are still put back; the file is kept as
/// `knobs-PID.json.refused`) and reported in the error. A knob whose file
/// is gone (its device removed) is dropped; one that cannot be written
/// stays in its state file for the next try. A state file whose knobs are
/// all back is removed. On any problem the error lists each, and what was
/// put back.
pub fn restore_left_with_root(
    state_dir: &Path,
    root: &Path,
) -> io::Result<Vec<(String, PathBuf, String)>> {
    if fs::symlink_metadata(state_dir).is_err() {
        return Ok(Vec::new());
    }
    trust::check_dir(state_dir)?;
    let _lock = trust::lock_exclusive(&state_dir.join("knobs.lock"), LOCK_WAIT)?;
    restore_gone(state_dir, root, &known_knob, &same_value)
}

#[cfg(test)]
mod tests {
    use super::super::journal::StateFile;
    use super::*;
    use std::fs::File;

    /// A fake sysfs tree under a temp dir, with the state dir beside it.
    struct Fake {
        dir: tempfile::TempDir,
    }

    impl Fake {
        fn new() -> Fake {
            let f = Fake {
                dir: tempfile::tempdir().unwrap(),
            };
            f.put(AFFINITY_SCOPE, "cache\n");
            f.put(UNBOUND_CPUMASK, "ff,ffffffff\n");
            f
        }
        fn root(&self) -> PathBuf {
            self.dir.path().join("root")
        }
        fn state(&self) -> PathBuf {
            self.dir.path().join("data/kernel")
        }
        fn file(&self, p: &str) -> PathBuf {
            self.root().join(p.trim_start_matches('/'))
        }
        fn put(&self, p: &str, v: &str) {
            let f = self.file(p);
            fs::create_dir_all(f.parent().unwrap()).unwrap();
            fs::write(f, v).unwrap();
        }
        fn get(&self, p: &str) -> String {
            fs::read_to_string(self.file(p)).unwrap()
        }
        fn knobs(&self) -> SystemKnobs {
            SystemKnobs::with_root(&self.state(), &self.root())
        }
        fn own_state(&self) -> PathBuf {
            self.state()
                .join(format!("knobs-{}.json", std::process::id()))
        }
        /// Writes a state file of a process that is gone, which wrote
        /// each knob's value now (what a crashed readpath leaves).
        fn gone_state(&self, pid: u32, knobs: &[(&str, &str, &str)]) -> PathBuf {
            let saved: Vec<Saved> = knobs
                .iter()
                .map(|(k, p, v)| Saved {
                    key: k.to_string(),
                    path: p.to_string(),
                    value: v.to_string(),
                    written: fs::read_to_string(self.file(p)).ok(),
                })
                .collect();
            self.gone_state_of(pid, saved)
        }
        /// Writes a state file of a gone process holding `saved` as is.
        fn gone_state_of(&self, pid: u32, saved: Vec<Saved>) -> PathBuf {
            let sp = self.state().join(format!("knobs-{pid}.json"));
            fs::create_dir_all(self.state()).unwrap();
            fs::write(
                &sp,
                serde_json::to_string(&StateFile { pid, knobs: saved }).unwrap(),
            )
            .unwrap();
            sp
        }
    }

    #[test]
    fn a_gone_one_s_knob_is_put_back_only_while_it_holds_what_readpath_wrote() {
        let f = Fake::new();
        f.put(AFFINITY_SCOPE, "cache");
        f.put(UNBOUND_CPUMASK, "3");
        let entry = |path: &str, value: &str, written: Option<&str>| Saved {
            key: if path == AFFINITY_SCOPE {
                KEY_AFFINITY_SCOPE
            } else {
                KEY_UNBOUND_CPUS
            }
            .into(),
            path: path.into(),
            value: value.into(),
            written: written.map(str::to_string),
        };
        // A forged entry: the scope holds "cache", it claims readpath
        // wrote "system" and asks for "numa" back: left as it is.
        f.gone_state_of(999_991, vec![entry(AFFINITY_SCOPE, "numa", Some("system"))]);
        let e = restore_left_with_root(&f.state(), &f.root()).unwrap_err();
        assert!(e.to_string().contains("left as it is"), "{e}");
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
        // No value written recorded: nothing proves it, refused.
        f.gone_state_of(999_992, vec![entry(AFFINITY_SCOPE, "numa", None)]);
        let e = restore_left_with_root(&f.state(), &f.root()).unwrap_err();
        assert!(e.to_string().contains("no value readpath wrote"), "{e}");
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
        // What readpath wrote, read back another way (a mask): put back.
        f.gone_state_of(999_993, vec![entry(UNBOUND_CPUMASK, "1", Some("00000003"))]);
        let done = restore_left_with_root(&f.state(), &f.root()).unwrap();
        assert_eq!(done.len(), 1, "{done:?}");
        assert_eq!(f.get(UNBOUND_CPUMASK), "1");
    }

    #[test]
    fn a_second_write_is_recorded_before_it_is_made() {
        let f = Fake::new();
        f.put(AFFINITY_SCOPE, "cache");
        let mut k = f.knobs();
        k.set(&Knob::affinity_scope(), "system").unwrap();
        k.set(&Knob::affinity_scope(), "cpu").unwrap();
        let saved = read_state(&f.own_state()).unwrap();
        assert_eq!(saved.len(), 1);
        assert_eq!(saved[0].value, "cache");
        assert_eq!(saved[0].written.as_deref(), Some("cpu"));
        k.restore_all().unwrap();
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
    }

    #[test]
    fn set_then_drop_puts_the_original_back() {
        let f = Fake::new();
        {
            let mut k = f.knobs();
            k.set(&Knob::affinity_scope(), "system").unwrap();
            k.set(&Knob::unbound_cpus(), "3").unwrap();
            assert_eq!(f.get(AFFINITY_SCOPE), "system");
            assert_eq!(f.get(UNBOUND_CPUMASK), "3");
            assert_eq!(k.original(Path::new(AFFINITY_SCOPE)), Some("cache"));
            assert_eq!(k.original(Path::new(UNBOUND_CPUMASK)), Some("ff,ffffffff"));
            assert!(f.own_state().exists());
        }
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
        assert_eq!(f.get(UNBOUND_CPUMASK), "ff,ffffffff");
        assert!(!f.own_state().exists());
    }

    #[test]
    fn a_second_set_keeps_the_first_original() {
        let f = Fake::new();
        let mut k = f.knobs();
        k.set(&Knob::affinity_scope(), "system").unwrap();
        k.set(&Knob::affinity_scope(), "numa").unwrap();
        assert_eq!(f.get(AFFINITY_SCOPE), "numa");
        assert_eq!(k.original(Path::new(AFFINITY_SCOPE)), Some("cache"));
        let saved = read_state(&f.own_state()).unwrap();
        assert_eq!(saved.len(), 1);
        drop(k);
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
    }

    #[test]
    fn setting_the_current_value_still_restores_cleanly() {
        let f = Fake::new();
        let mut k = f.knobs();
        k.set(&Knob::affinity_scope(), "cache").unwrap();
        assert_eq!(k.original(Path::new(AFFINITY_SCOPE)), Some("cache"));
        let back = k.restore_all().unwrap();
        assert_eq!(
            back,
            vec![(
                KEY_AFFINITY_SCOPE.to_string(),
                PathBuf::from(AFFINITY_SCOPE),
                "cache".to_string()
            )]
        );
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
        assert!(!f.own_state().exists());
    }

    #[test]
    fn restore_one_then_all_in_reverse_order() {
        let f = Fake::new();
        let q = "/sys/devices/virtual/block/loop0/queue";
        f.put(&format!("{q}/read_ahead_kb"), "128\n");
        f.put(&format!("{q}/rq_affinity"), "1\n");
        let ra = Knob {
            key: KEY_READ_AHEAD_KB,
            path: PathBuf::from(format!("{q}/read_ahead_kb")),
        };
        let rq = Knob {
            key: KEY_RQ_AFFINITY,
            path: PathBuf::from(format!("{q}/rq_affinity")),
        };
        let mut k = f.knobs();
        k.set(&Knob::affinity_scope(), "smt").unwrap();
        k.set(&ra, "4096").unwrap();
        k.set(&rq, "2").unwrap();
        k.restore(&ra.path).unwrap();
        assert_eq!(f.get(&format!("{q}/read_ahead_kb")), "128");
        assert_eq!(k.original(&ra.path), None);
        // Restoring what is not changed (any more) is a no-op.
        k.restore(&ra.path).unwrap();
        let saved = read_state(&f.own_state()).unwrap();
        assert_eq!(saved.len(), 2);
        let back = k.restore_all().unwrap();
        let keys: Vec<&str> = back.iter().map(|(k, _, _)| k.as_str()).collect();
        assert_eq!(keys, [KEY_RQ_AFFINITY, KEY_AFFINITY_SCOPE]);
        assert_eq!(f.get(&format!("{q}/rq_affinity")), "1");
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
        assert!(!f.own_state().exists());
        assert_eq!(k.changed().count(), 0);
    }

    #[test]
    fn a_lab_switch_is_put_back_after_a_sigkill_and_a_forged_one_is_refused() {
        use crate::kernel::switches::{FSCRYPT_MAX_ACTIVE, FSVERITY_UNBOUND, switch};
        let f = Fake::new();
        let sw = switch(FSVERITY_UNBOUND).unwrap();
        let path = sw.path();
        let p = path.to_str().unwrap();
        f.put(p, "N");
        let mut k = f.knobs();
        k.set(&Knob::switch(sw), "Y").unwrap();
        assert_eq!(f.get(p), "Y");
        // SIGKILL: nothing runs, nothing is put back; the next start (a
        // process whose PID is gone) puts the original back.
        std::mem::forget(k);
        let gone = f.state().join("knobs-999999998.json");
        fs::rename(f.own_state(), &gone).unwrap();
        let back = restore_left_with_root(&f.state(), &f.root()).unwrap();
        assert_eq!(
            back,
            vec![(
                "readpath.fsverity_unbound".to_string(),
                path.clone(),
                "N".to_string()
            )]
        );
        assert_eq!(f.get(p), "N");
        // What a state file may say of a switch: its own key and a value
        // it takes, nothing else.
        let root = f.root();
        assert_eq!(known_knob(&root, sw.key, p, "Y"), Ok(()));
        assert!(known_knob(&root, sw.key, p, "1").is_err());
        assert!(known_knob(&root, "kernel.affinity_scope", p, "Y").is_err());
        let max = switch(FSCRYPT_MAX_ACTIVE).unwrap();
        let mp = max.path();
        assert_eq!(
            known_knob(&root, max.key, mp.to_str().unwrap(), "512"),
            Ok(())
        );
        assert!(known_knob(&root, max.key, mp.to_str().unwrap(), "513").is_err());
        assert!(
            known_knob(
                &root,
                "readpath.x",
                "/sys/module/readpath/parameters/x",
                "Y"
            )
            .is_err()
        );
    }

    #[test]
    fn a_crash_is_undone_by_the_next_start() {
        let f = Fake::new();
        let mut k = f.knobs();
        k.set(&Knob::affinity_scope(), "system").unwrap();
        k.set(&Knob::unbound_cpus(), "3").unwrap();
        // The original was saved before the write.
        let saved = read_state(&f.own_state()).unwrap();
        assert_eq!(
            saved
                .iter()
                .map(|s| (s.path.as_str(), s.value.as_str()))
                .collect::<Vec<_>>(),
            [(AFFINITY_SCOPE, "cache"), (UNBOUND_CPUMASK, "ff,ffffffff")]
        );
        // A crash: nothing is put back.
        std::mem::forget(k);
        assert_eq!(f.get(AFFINITY_SCOPE), "system");
        // Our own (live) state file is left alone.
        assert_eq!(restore_left_with_root(&f.state(), &f.root()).unwrap(), []);
        assert!(f.own_state().exists());
        // As seen by the next process: the PID is gone.
        let gone = f.state().join("knobs-999999999.json");
        fs::rename(f.own_state(), &gone).unwrap();
        let back = restore_left_with_root(&f.state(), &f.root()).unwrap();
        assert_eq!(
            back,
            vec![
                (
                    KEY_UNBOUND_CPUS.to_string(),
                    PathBuf::from(UNBOUND_CPUMASK),
                    "ff,ffffffff".to_string()
                ),
                (
                    KEY_AFFINITY_SCOPE.to_string(),
                    PathBuf::from(AFFINITY_SCOPE),
                    "cache".to_string()
                ),
            ]
        );
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
        assert_eq!(f.get(UNBOUND_CPUMASK), "ff,ffffffff");
        assert!(!gone.exists());
        assert_eq!(restore_left_with_root(&f.state(), &f.root()).unwrap(), []);
    }

    #[test]
    fn autogroup_is_the_one_knob_outside_sys_and_a_crash_puts_it_back() {
        let f = Fake::new();
        f.put(AUTOGROUP_SYSCTL, "1\n");
        f.put("/proc/sys/kernel/sched_child_runs_first", "0\n");
        let mut k = f.knobs();
        k.set(&Knob::autogroup(), "0").unwrap();
        assert_eq!(f.get(AUTOGROUP_SYSCTL), "0");
        // A neighbour in /proc/sys is still refused.
        let near = Knob {
            key: KEY_AUTOGROUP,
            path: PathBuf::from("/proc/sys/kernel/sched_child_runs_first"),
        };
        assert_eq!(
            k.set(&near, "1").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(f.get("/proc/sys/kernel/sched_child_runs_first"), "0\n");
        std::mem::forget(k);
        let gone = f.state().join("knobs-999999997.json");
        fs::rename(f.own_state(), &gone).unwrap();
        let back = restore_left_with_root(&f.state(), &f.root()).unwrap();
        assert_eq!(
            back,
            vec![(
                KEY_AUTOGROUP.to_string(),
                PathBuf::from(AUTOGROUP_SYSCTL),
                "1".to_string()
            )]
        );
        assert_eq!(f.get(AUTOGROUP_SYSCTL), "1");
        // A forged state file with another value, key or neighbour is
        // refused and writes nothing.
        f.put(AUTOGROUP_SYSCTL, "0");
        f.gone_state(
            999999996,
            &[
                (KEY_AUTOGROUP, AUTOGROUP_SYSCTL, "2"),
                ("kernel.affinity_scope", AUTOGROUP_SYSCTL, "1"),
                (
                    KEY_AUTOGROUP,
                    "/proc/sys/kernel/sched_child_runs_first",
                    "1",
                ),
                (
                    KEY_AUTOGROUP,
                    "/proc/sys/kernel/../kernel/sched_autogroup_enabled",
                    "1",
                ),
            ],
        );
        let msg = restore_left_with_root(&f.state(), &f.root())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("does not take"), "{msg}");
        assert!(msg.contains("its key is"), "{msg}");
        assert!(msg.contains("not a file under /sys/"), "{msg}");
        assert_eq!(f.get(AUTOGROUP_SYSCTL), "0");
        assert_eq!(f.get("/proc/sys/kernel/sched_child_runs_first"), "0\n");
    }

    #[test]
    fn a_state_file_pointing_outside_sys_is_refused() {
        let f = Fake::new();
        f.put("/etc/passwd", "root:x:0:0\n");
        f.put(AFFINITY_SCOPE, "system");
        let sp = f.gone_state(
            999999998,
            &[
                (KEY_AFFINITY_SCOPE, AFFINITY_SCOPE, "cache"),
                ("x", "/etc/passwd", "owned"),
                ("x", "/sys/../etc/passwd", "owned"),
                (
                    "x",
                    "sys/module/workqueue/parameters/default_affinity_scope",
                    "x",
                ),
                ("x", UNBOUND_CPUMASK, "1\nowned"),
            ],
        );
        let e = restore_left_with_root(&f.state(), &f.root()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("/etc/passwd"), "{msg}");
        assert!(msg.contains("not a file under /sys/"), "{msg}");
        assert!(msg.contains("control characters"), "{msg}");
        assert_eq!(f.get("/etc/passwd"), "root:x:0:0\n");
        assert_eq!(f.get(UNBOUND_CPUMASK), "ff,ffffffff\n");
        // The valid entry is still put back; the file is kept aside.
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
        assert!(!sp.exists());
        assert!(sp.with_extension("json.refused").exists());
        assert_eq!(restore_left_with_root(&f.state(), &f.root()).unwrap(), []);
    }

    #[test]
    fn a_knob_outside_sys_or_a_bad_value_is_never_set() {
        let f = Fake::new();
        f.put("/etc/x", "1");
        let mut k = f.knobs();
        let bad = Knob {
            key: "x",
            path: PathBuf::from("/etc/x"),
        };
        assert_eq!(
            k.set(&bad, "2").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        let sneaky = Knob {
            key: "x",
            path: PathBuf::from("/sys/../etc/x"),
        };
        assert!(k.set(&sneaky, "2").is_err());
        assert_eq!(f.get("/etc/x"), "1");
        assert!(k.set(&Knob::affinity_scope(), "cache\nnuma").is_err());
        assert!(k.set(&Knob::affinity_scope(), &"a".repeat(5000)).is_err());
        assert_eq!(f.get(AFFINITY_SCOPE), "cache\n");
        assert!(!f.own_state().exists());
    }

    #[test]
    fn a_missing_knob_errors_naming_it_and_records_nothing() {
        let f = Fake::new();
        let mut k = f.knobs();
        let knob = Knob {
            key: KEY_RQ_AFFINITY,
            path: PathBuf::from("/sys/block/nope/queue/rq_affinity"),
        };
        let e = k.set(&knob, "2").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("nope/queue/rq_affinity"), "{e}");
        assert!(!e.to_string().contains("os error"), "{e}");
        assert_eq!(k.original(&knob.path), None);
        assert!(!f.own_state().exists());
    }

    #[test]
    fn two_in_one_process_share_the_state_file() {
        let f = Fake::new();
        let mut a = f.knobs();
        let mut b = f.knobs();
        a.set(&Knob::affinity_scope(), "system").unwrap();
        b.set(&Knob::unbound_cpus(), "3").unwrap();
        assert_eq!(read_state(&f.own_state()).unwrap().len(), 2);
        drop(a);
        let saved = read_state(&f.own_state()).unwrap();
        assert_eq!(saved.len(), 1);
        assert_eq!(saved[0].path, UNBOUND_CPUMASK);
        drop(b);
        assert!(!f.own_state().exists());
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
        assert_eq!(f.get(UNBOUND_CPUMASK), "ff,ffffffff");
    }

    #[test]
    fn a_knob_a_live_readpath_changed_is_refused_naming_it() {
        let f = Fake::new();
        fs::create_dir_all(f.state()).unwrap();
        // Another process, alive: it holds its lock (a second open file
        // description locks against this process too).
        let lock = f.state().join("live-4242.lock");
        fs::write(&lock, "data dir /srv/other").unwrap();
        let held = File::open(&lock).unwrap();
        // std's `File::lock` is `flock(LOCK_EX)` on Linux.
        held.lock().unwrap();
        f.put(AFFINITY_SCOPE, "system");
        f.gone_state(4242, &[(KEY_AFFINITY_SCOPE, AFFINITY_SCOPE, "cache")]);
        let mut k = f.knobs();
        let e = k.set(&Knob::affinity_scope(), "cpu").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("PID 4242"), "{msg}");
        assert!(msg.contains("data dir /srv/other"), "{msg}");
        assert_eq!(f.get(AFFINITY_SCOPE), "system");
        // Its file is left alone while it lives ...
        assert_eq!(restore_left_with_root(&f.state(), &f.root()).unwrap(), []);
        assert_eq!(f.get(AFFINITY_SCOPE), "system");
        // ... and once it is gone (its lock released), its original goes back
        // before anyone reads the knob's value as an original.
        drop(held);
        k.set(&Knob::affinity_scope(), "cpu").unwrap();
        assert_eq!(k.original(Path::new(AFFINITY_SCOPE)), Some("cache"));
        drop(k);
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
        // And two in one process do not share a knob.
        let mut a = f.knobs();
        let mut b = f.knobs();
        a.set(&Knob::unbound_cpus(), "3").unwrap();
        assert!(b.set(&Knob::unbound_cpus(), "1").is_err());
        drop(a);
        b.set(&Knob::unbound_cpus(), "1").unwrap();
        assert_eq!(b.original(Path::new(UNBOUND_CPUMASK)), Some("ff,ffffffff"));
        drop(b);
        assert_eq!(f.get(UNBOUND_CPUMASK), "ff,ffffffff");
    }

    #[test]
    fn a_live_pid_without_the_lock_proves_nothing() {
        // PID 1 is always alive, but no readpath: its forged file neither
        // blocks the knob nor is trusted beyond the known knobs.
        let f = Fake::new();
        f.put(AFFINITY_SCOPE, "system");
        let sp = f.gone_state(1, &[(KEY_AFFINITY_SCOPE, AFFINITY_SCOPE, "numa")]);
        let mut k = f.knobs();
        k.set(&Knob::affinity_scope(), "cpu").unwrap();
        assert!(!sp.exists());
        assert_eq!(k.original(Path::new(AFFINITY_SCOPE)), Some("numa"));
    }

    #[test]
    fn a_knob_of_no_present_device_is_set_aside() {
        let f = Fake::new();
        let sp = f.gone_state(
            999999997,
            &[(
                KEY_READ_AHEAD_KB,
                "/sys/block/gone/queue/read_ahead_kb",
                "128",
            )],
        );
        let e = restore_left_with_root(&f.state(), &f.root()).unwrap_err();
        assert!(e.to_string().contains("block device present now"), "{e}");
        assert!(!sp.exists());
        assert!(sp.with_extension("json.refused").exists());
        assert!(!f.file("/sys/block/gone/queue/read_ahead_kb").exists());
    }

    /// A fake block device 7:0 with its queue directory, as sysfs links it.
    fn fake_loop0(f: &Fake) -> String {
        let q = "/sys/devices/virtual/block/loop0/queue";
        f.put(&format!("{q}/read_ahead_kb"), "128\n");
        f.put(&format!("{q}/rq_affinity"), "1\n");
        fs::create_dir_all(f.file("/sys/dev/block")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/virtual/block/loop0",
            f.file("/sys/dev/block/7:0"),
        )
        .unwrap();
        q.to_string()
    }

    #[test]
    fn only_known_knobs_with_values_they_take_are_put_back() {
        let f = Fake::new();
        let q = fake_loop0(&f);
        let (ra, rq) = (format!("{q}/read_ahead_kb"), format!("{q}/rq_affinity"));
        let root = f.root();
        let ok = |k: &str, p: &str, v: &str| known_knob(&root, k, p, v);
        assert_eq!(ok(KEY_AFFINITY_SCOPE, AFFINITY_SCOPE, "cache"), Ok(()));
        assert_eq!(ok(KEY_UNBOUND_CPUS, UNBOUND_CPUMASK, "ff,ffffffff"), Ok(()));
        assert_eq!(ok(KEY_READ_AHEAD_KB, &ra, "4096"), Ok(()));
        assert_eq!(ok(KEY_RQ_AFFINITY, &rq, "2"), Ok(()));
        for (k, p, v) in [
            (KEY_AFFINITY_SCOPE, AFFINITY_SCOPE, "default"),
            (KEY_AFFINITY_SCOPE, AFFINITY_SCOPE, "cache numa"),
            (KEY_UNBOUND_CPUS, AFFINITY_SCOPE, "cache"),
            (KEY_UNBOUND_CPUS, UNBOUND_CPUMASK, "0"),
            (KEY_UNBOUND_CPUS, UNBOUND_CPUMASK, "zz"),
            (KEY_READ_AHEAD_KB, &ra, "99999999999"),
            (KEY_READ_AHEAD_KB, &ra, "-1"),
            (KEY_RQ_AFFINITY, &rq, "3"),
            (KEY_RQ_AFFINITY, &ra, "1"),
            ("k", "/sys/kernel/readpath-canary3", "v"),
            ("k", "/sys/fs/cgroup/release_agent", "/tmp/x"),
            ("k", "/sys/bus/pci/devices/0000:00:01.0/remove", "1"),
            (
                KEY_RQ_AFFINITY,
                "/sys/devices/virtual/block/loop9/queue/rq_affinity",
                "1",
            ),
        ] {
            assert!(ok(k, p, v).is_err(), "{k} {p} {v} was accepted");
        }
    }

    #[test]
    fn forged_entries_are_set_aside_and_the_rest_put_back() {
        let f = Fake::new();
        let q = fake_loop0(&f);
        f.put("/sys/kernel/readpath-canary3", "canary");
        f.put(AFFINITY_SCOPE, "system");
        f.put(&format!("{q}/read_ahead_kb"), "4096");
        let sp = f.gone_state(
            999997,
            &[
                (KEY_AFFINITY_SCOPE, AFFINITY_SCOPE, "cache"),
                ("k", "/sys/kernel/readpath-canary3", "v"),
                (KEY_READ_AHEAD_KB, &format!("{q}/read_ahead_kb"), "128"),
            ],
        );
        let e = restore_left_with_root(&f.state(), &f.root()).unwrap_err();
        assert!(e.to_string().contains("readpath-canary3"), "{e}");
        assert!(e.to_string().contains("not a knob readpath changes"), "{e}");
        assert_eq!(f.get("/sys/kernel/readpath-canary3"), "canary");
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
        assert_eq!(f.get(&format!("{q}/read_ahead_kb")), "128");
        assert!(sp.with_extension("json.refused").exists());
    }

    #[test]
    fn hostile_state_files_are_refused_without_hanging_and_the_rest_goes_on() {
        let f = Fake::new();
        f.put("/sys/kernel/readpath-canary3", "canary");
        f.put(AFFINITY_SCOPE, "system");
        let st = f.state();
        fs::create_dir_all(&st).unwrap();
        let canary = f.dir.path().join("canary");
        fs::write(&canary, "canary").unwrap();
        // A link to a file, a FIFO, a truncated file, an endless file.
        std::os::unix::fs::symlink(&canary, st.join("knobs-999990.json")).unwrap();
        crate::sys::make_fifo(&st.join("knobs-999991.json"), 0o600).unwrap();
        fs::write(st.join("knobs-999992.json"), "{\"pid\":999992,\"knobs\":[").unwrap();
        fs::write(st.join("knobs-999993.json"), vec![b' '; 1 << 20]).unwrap();
        // And one good file of a gone process.
        f.gone_state(999994, &[(KEY_AFFINITY_SCOPE, AFFINITY_SCOPE, "cache")]);
        let e = restore_left_with_root(&st, &f.root()).unwrap_err();
        let msg = e.to_string();
        for (pid, why) in [
            (999990, "symbolic link"),
            (999991, "FIFO"),
            (999992, "no readpath knobs state file"),
            (999993, "over 65536 bytes"),
        ] {
            assert!(msg.contains(&format!("knobs-{pid}.json")), "{msg}");
            assert!(msg.contains(why), "{why}: {msg}");
            assert!(
                fs::symlink_metadata(st.join(format!("knobs-{pid}.json.refused"))).is_ok(),
                "{pid} set aside"
            );
        }
        assert_eq!(fs::read_to_string(&canary).unwrap(), "canary");
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
        // Nothing left to do the second time.
        assert_eq!(restore_left_with_root(&st, &f.root()).unwrap(), []);
    }

    #[test]
    fn temporaries_never_follow_a_planted_link() {
        let f = Fake::new();
        fs::create_dir_all(f.state()).unwrap();
        let canary = f.dir.path().join("canary");
        fs::write(&canary, "canary").unwrap();
        // The fixed names an older readpath used for its temporaries.
        let pid = std::process::id();
        for name in [
            format!("knobs-{pid}.json.tmp"),
            format!(".knobs-{pid}.json.tmp"),
        ] {
            std::os::unix::fs::symlink(&canary, f.state().join(name)).unwrap();
        }
        let mut k = f.knobs();
        k.set(&Knob::affinity_scope(), "system").unwrap();
        k.set(&Knob::unbound_cpus(), "3").unwrap();
        drop(k);
        assert_eq!(fs::read_to_string(&canary).unwrap(), "canary");
        assert_eq!(f.get(AFFINITY_SCOPE), "cache");
        // The temporaries had random names and are gone.
        let left: Vec<String> = fs::read_dir(f.state())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| {
                n.ends_with(".tmp") && !n.starts_with("knobs-") && !n.starts_with(".knobs-")
            })
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_state_dir_others_may_write_is_not_acted_on() {
        use std::os::unix::fs::PermissionsExt;
        let f = Fake::new();
        f.put(AFFINITY_SCOPE, "system");
        f.gone_state(999989, &[(KEY_AFFINITY_SCOPE, AFFINITY_SCOPE, "cache")]);
        fs::set_permissions(f.state(), fs::Permissions::from_mode(0o777)).unwrap();
        let e = restore_left_with_root(&f.state(), &f.root()).unwrap_err();
        assert!(e.to_string().contains("writable by every user"), "{e}");
        assert_eq!(f.get(AFFINITY_SCOPE), "system");
        let mut k = f.knobs();
        assert!(k.set(&Knob::affinity_scope(), "cpu").is_err());
        assert_eq!(f.get(AFFINITY_SCOPE), "system");
    }

    #[test]
    fn a_missing_state_dir_has_nothing_to_restore() {
        let f = Fake::new();
        let none = f.dir.path().join("none");
        assert_eq!(restore_left_with_root(&none, &f.root()).unwrap(), []);
    }

    #[test]
    fn the_queue_of_a_disk_or_partition_is_found() {
        let f = Fake::new();
        let root = f.root();
        let disk = "sys/devices/pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1";
        fs::create_dir_all(root.join(disk).join("queue")).unwrap();
        fs::create_dir_all(root.join(disk).join("nvme0n1p1")).unwrap();
        fs::create_dir_all(root.join("sys/dev/block")).unwrap();
        let up = "../../devices/pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1";
        std::os::unix::fs::symlink(up, root.join("sys/dev/block/259:0")).unwrap();
        std::os::unix::fs::symlink(format!("{up}/nvme0n1p1"), root.join("sys/dev/block/259:1"))
            .unwrap();
        let want = Path::new("/").join(disk).join("queue");
        assert_eq!(queue_dir_in(&root, 259, 0).unwrap(), want);
        assert_eq!(queue_dir_in(&root, 259, 1).unwrap(), want);
        let e = queue_dir_in(&root, 0, 42).unwrap_err();
        assert!(e.to_string().contains("tmpfs"), "{e}");
        let e = queue_dir_in(&root, 8, 9).unwrap_err();
        assert!(e.to_string().contains("8:9"), "{e}");
    }

    #[test]
    fn queue_dir_of_a_real_file_is_under_sys_or_says_why_not() {
        let dir = tempfile::tempdir().unwrap();
        match queue_dir_of(dir.path()) {
            Ok(q) => {
                assert!(q.starts_with("/sys/") && q.ends_with("queue"), "{q:?}");
            }
            Err(e) => assert!(
                e.to_string().contains(&dir.path().display().to_string()),
                "{e}"
            ),
        }
        assert!(queue_dir_of(Path::new("/nonexistent/readpath")).is_err());
    }
}
