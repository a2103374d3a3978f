//! The kernel target's page cache held to `cache.size`: the whole readpath
//! process runs, while it reads the kernel target, in a memory cgroup of
//! its own whose limit leaves the target file `cache.size` of page cache,
//! so the kernel and the model are compared on the same cache size.
//!
//! Memory is a domain controller: the threads of one process cannot sit in
//! different memory cgroups, so the process itself moves, and moves back.
//! On cgroup v2 the cgroup is `readpath-PID` at the root of the cgroup2
//! mount (the only cgroup that may both hold processes and give its
//! children the memory controller; `+memory` is written to its
//! `cgroup.subtree_control` when missing, recorded, and taken back after);
//! on a machine whose memory controller is on cgroup v1 it is
//! `readpath-PID` under the memory cgroup the process is in.
//!
//! What the cgroup charges from the move on: the page cache the readers
//! fault in (the target file: what is limited), the process's new anonymous
//! memory (read buffers, histograms, thread stacks) and the kernel memory
//! its tasks allocate (slab, page tables), and the page cache of any other
//! file it writes (a recording). Charges made before the move stay where
//! they were (so the target's cache is dropped after the move, to be read
//! again under the limit). The limit is therefore set, and set again every
//! interval, to `cache.size + (charged - the target's resident bytes) +
//! SLACK`: everything else the cgroup holds is measured, not guessed.
//!
//! Trust: the directory is made with `mkdir` (an existing one is refused:
//! it is not ours), every file under it is opened with `O_NOFOLLOW` as
//! root's regular file, nothing is written into a cgroup readpath did not
//! make except the one move of its own PID back to the cgroup it came
//! from (and the `subtree_control` change it recorded). The state
//! (`STATE_DIR/cgroup-PID.json`) is written before anything is changed, so
//! after a crash the next readpath removes the cgroup (empty: its process
//! is gone) and takes back the controller it enabled.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sys::cgroup::{Hierarchy, Placement, plain_abs};
use crate::sys::{oflag, trust};

/// The least room the cgroup leaves the file's cache beyond the readahead
/// windows, and room for whatever the process newly charges within one
/// interval before the limit is set again (a histogram, a thread's stack,
/// slab): a `cache.size` below [`floor`] still leaves that much, so a
/// growth of anonymous memory or a window of pages being read reclaims
/// the file's cache instead of meeting the OOM killer. Between two
/// settings of the limit, memory the process frees (a file it wrote,
/// written back and reclaimed) goes to the file's cache, by at most about
/// this much in practice. Measured: see docs/kernel.md.
pub const MARGIN: u64 = 4 << 20;

/// Room a cgroup that exists already is given before readpath makes a
/// tracefs instance inside it (the instance's dentries and inodes are
/// charged to it under cgroup v2; about 4 MiB measured on Linux 6.1).
pub const TRACE_ROOM: u64 = 16 << 20;

/// The room beyond `cache.size` and the measured other charge for
/// `readers` readers with `in_flight` reads of `block` bytes each: the
/// pages being copied to the readers (locked while their read is in
/// flight).
pub fn slack(readers: u64, in_flight: u64, block: u64) -> u64 {
    readers.saturating_mul(in_flight.saturating_mul(block))
}

/// The least the file's cache is given whatever `cache.size`: every
/// reader's readahead window of `readahead` bytes (pages being read,
/// locked, not reclaimable) and [`MARGIN`].
pub fn floor(readers: u64, readahead: u64) -> u64 {
    readers.saturating_mul(readahead).saturating_add(MARGIN)
}

/// The journal entry of one cgroup, written before anything changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct State {
    pid: u32,
    hierarchy: Hierarchy,
    mount: PathBuf,
    dir: PathBuf,
    origin: PathBuf,
    /// `cgroup.subtree_control` readpath wrote `+memory` to.
    enabled_memory: Option<PathBuf>,
}

fn state_name(pid: u32) -> String {
    format!("cgroup-{pid}.json")
}

fn pid_of_state(name: &str) -> Option<u32> {
    name.strip_prefix("cgroup-")?
        .strip_suffix(".json")?
        .parse()
        .ok()
        .filter(|&p| p > 0)
}

/// Opens `path` (a file under a cgroup directory) for writing:
/// `O_NOFOLLOW`, root's regular file with one link.
fn open_write(path: &Path) -> io::Result<File> {
    trust::open_own_file(path, oflag::O_WRONLY)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn open_read(path: &Path) -> io::Result<File> {
    trust::open_own_file(path, oflag::O_RDONLY)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn write_value(path: &Path, v: &str) -> io::Result<()> {
    open_write(path)?
        .write_at(v.as_bytes(), 0)
        .map(|_| ())
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("writing {v:?} to {}: {e}", path.display()),
            )
        })
}

/// Reads a number from an open cgroup file (`max` reads as u64::MAX).
fn read_number(f: &File) -> io::Result<u64> {
    let mut b = [0u8; 32];
    let n = f.read_at(&mut b, 0)?;
    let s = std::str::from_utf8(&b[..n]).unwrap_or("").trim();
    if s == "max" {
        return Ok(u64::MAX);
    }
    s.parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("not a number: {s:?}")))
}

/// The limit a cgroup charged `charged` bytes, `resident` of them the
/// target's cache, gets for a cache of `cache` bytes with `room`
/// ([`slack`], [`floor`]): the cache (at least the floor), everything else
/// charged, and the slack.
pub fn limit_for(cache: u64, charged: u64, resident: u64, room: Room) -> u64 {
    cache
        .max(room.floor)
        .saturating_add(charged.saturating_sub(resident))
        .saturating_add(room.slack)
}

/// The room a cgroup gives beyond `cache.size` ([`slack`]) and the least
/// it gives the cache ([`floor`]), bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Beyond the cache: reads in flight.
    pub slack: u64,
    /// The least cache: readahead windows and [`MARGIN`].
    pub floor: u64,
}

/// The process's memory cgroup while it reads the kernel target: made and
/// entered by [`CacheCgroup::enter`], left and removed on drop.
#[derive(Debug)]
pub struct CacheCgroup {
    state_file: PathBuf,
    state: State,
    /// The cgroup's limit file, open for the per-interval writes.
    limit: File,
    /// The cgroup's usage file.
    usage: File,
    /// The page cache bytes the target file may hold.
    cache: std::sync::atomic::AtomicU64,
    /// The room beyond it ([`slack`]).
    slack: std::sync::atomic::AtomicU64,
    /// The least it is given ([`floor`]).
    floor: std::sync::atomic::AtomicU64,
    /// What the cgroup was charged right after the move (bytes).
    pub charged_at_start: u64,
    /// The last limit written (bytes).
    last_limit: std::sync::atomic::AtomicU64,
}

impl CacheCgroup {
    /// Makes `readpath-PID` where `place` says, journalled first in the
    /// state dir of `data_dir` ([`super::state_dir`]), limits it to `cache` bytes + [`SLACK`] and moves this whole
    /// process into it. On an error everything done is undone.
    pub fn enter(
        data_dir: &Path,
        place: &Placement,
        cache: u64,
        room: Room,
    ) -> io::Result<CacheCgroup> {
        let pid = std::process::id();
        let state_dir = super::state_dir(data_dir);
        let state_dir = state_dir.as_path();
        trust::ensure_dir(state_dir)?;
        trust::hold_live(state_dir, &format!("data dir {}", data_dir.display()))?;
        let dir = place.parent.join(format!("readpath-{pid}"));
        let mut state = State {
            pid,
            hierarchy: place.hierarchy,
            mount: place.mount.clone(),
            dir: dir.clone(),
            origin: place.origin.clone(),
            enabled_memory: None,
        };
        let state_file = state_dir.join(state_name(pid));
        write_state(&state_file, &state)?;
        let undo = |state: &State| {
            let _ = remove(state, false);
            let _ = trust::remove_state(&state_file);
        };
        if place.enable_memory {
            let sub = place.parent.join("cgroup.subtree_control");
            state.enabled_memory = Some(sub.clone());
            write_state(&state_file, &state)?;
            if let Err(e) = write_value(&sub, "+memory") {
                state.enabled_memory = None;
                undo(&state);
                return Err(e);
            }
        }
        if let Err(e) = fs::create_dir(&dir) {
            let why = if e.kind() == io::ErrorKind::AlreadyExists {
                " (it exists and is not this readpath's: left alone; `readpath kernel restore` removes one a gone readpath left)"
            } else {
                ""
            };
            // Not ours: never removed.
            let mut st = state.clone();
            st.dir = PathBuf::new();
            undo(&st);
            return Err(io::Error::new(
                e.kind(),
                format!("making cgroup {}: {e}{why}", dir.display()),
            ));
        }
        let made = (|| {
            let limit = open_write(&dir.join(place.hierarchy.limit_file()))?;
            let usage = open_read(&dir.join(place.hierarchy.usage_file()))?;
            let first = limit_for(cache, 0, 0, room);
            limit.write_at(first.to_string().as_bytes(), 0)?;
            write_value(&dir.join("cgroup.procs"), &pid.to_string())?;
            Ok::<_, io::Error>((limit, usage, first))
        })();
        match made {
            Ok((limit, usage, first)) => Ok(CacheCgroup {
                charged_at_start: read_number(&usage).unwrap_or(0),
                state_file,
                state,
                limit,
                usage,
                cache: cache.into(),
                slack: room.slack.into(),
                floor: room.floor.into(),
                last_limit: first.into(),
            }),
            Err(e) => {
                undo(&state);
                Err(e)
            }
        }
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.state.dir
    }

    /// The cache the target may hold, bytes.
    pub fn cache(&self) -> u64 {
        self.cache.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The room beyond the cache and the least cache, bytes.
    pub fn room(&self) -> Room {
        Room {
            slack: self.slack.load(std::sync::atomic::Ordering::Relaxed),
            floor: self.floor.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// A new `cache.size` and room (a live change): taken at the next
    /// [`Self::adjust`].
    pub fn set_cache(&self, cache: u64, room: Room) {
        use std::sync::atomic::Ordering::Relaxed;
        self.cache.store(cache, Relaxed);
        self.slack.store(room.slack, Relaxed);
        self.floor.store(room.floor, Relaxed);
    }

    /// What the cgroup is charged now, bytes.
    pub fn charged(&self) -> io::Result<u64> {
        read_number(&self.usage)
    }

    /// Sets the limit again for the target holding `resident` bytes:
    /// [`limit_for`] the cache and what else is charged now. Returns
    /// (limit, charged). One read and at most one write of an open file.
    pub fn adjust(&self, resident: u64) -> io::Result<(u64, u64)> {
        let charged = self.charged()?;
        let limit = limit_for(self.cache(), charged, resident, self.room());
        let last = self.last_limit.load(std::sync::atomic::Ordering::Relaxed);
        // Page-granular noise is not worth a write (and a reclaim).
        if limit.abs_diff(last) >= 256 << 10 {
            self.limit.write_at(limit.to_string().as_bytes(), 0)?;
            self.last_limit
                .store(limit, std::sync::atomic::Ordering::Relaxed);
        }
        Ok((
            self.last_limit.load(std::sync::atomic::Ordering::Relaxed),
            charged,
        ))
    }

    /// Raises the limit by `bytes` now, before readpath charges the
    /// cgroup with kernel memory of its own (a tracefs instance); the next
    /// [`Self::adjust`] sets it from what is charged then.
    pub fn make_room(&self, bytes: u64) -> io::Result<()> {
        let limit = self
            .last_limit
            .load(std::sync::atomic::Ordering::Relaxed)
            .saturating_add(bytes);
        self.limit.write_at(limit.to_string().as_bytes(), 0)?;
        self.last_limit
            .store(limit, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// What a crash leaves, for tests: the cgroup and its state stay, the
    /// process stays in it.
    #[doc(hidden)]
    pub fn crash(self) {
        std::mem::forget(self);
    }
}

impl Drop for CacheCgroup {
    fn drop(&mut self) {
        // The one write into a cgroup readpath did not make: its own PID
        // back where it came from.
        let back = write_value(
            &self.state.origin.join("cgroup.procs"),
            &self.state.pid.to_string(),
        );
        if back.is_ok() && remove(&self.state, true).is_ok() {
            let _ = trust::remove_state(&self.state_file);
        }
    }
}

fn write_state(file: &Path, s: &State) -> io::Result<()> {
    let mut t = serde_json::to_string_pretty(s).map_err(io::Error::other)?;
    t.push('\n');
    trust::write_state(file, t.as_bytes())
}

/// Removes cgroup `s.dir` (empty: rmdir, tried for a second while its
/// last task leaves) and takes back the `+memory` readpath wrote, unless
/// another readpath's cgroup still needs it. `wait` retries a busy rmdir.
fn remove(s: &State, wait: bool) -> io::Result<()> {
    if !s.dir.as_os_str().is_empty() {
        let mut tries = 0;
        loop {
            match fs::remove_dir(&s.dir) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) if wait && tries < 50 => {
                    let _ = e;
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("removing cgroup {}: {e}", s.dir.display()),
                    ));
                }
            }
        }
    }
    if let Some(sub) = &s.enabled_memory {
        let parent = sub.parent().unwrap_or(Path::new("/"));
        let others = fs::read_dir(parent).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("readpath-"))
        });
        if !others {
            write_value(sub, "-memory")?;
        }
    }
    Ok(())
}

/// Why a journalled cgroup is not one readpath may act on, if it is not:
/// its directory must be `readpath-PID` of the entry's PID, right under
/// the origin (v1) or the mount (v2), and every path plain and under a
/// mounted cgroup hierarchy of the kind named.
fn refuse(s: &State, file_pid: u32) -> Option<String> {
    if s.pid != file_pid {
        return Some(format!("names PID {}, not {file_pid}", s.pid));
    }
    let fstype = match s.hierarchy {
        Hierarchy::V2 => "cgroup2",
        Hierarchy::V1 => "cgroup",
    };
    if !trust::mounts()
        .iter()
        .any(|m| m.point == s.mount && m.fstype == fstype)
    {
        return Some(format!(
            "{} is not a {fstype} mount",
            crate::sys::printable(&s.mount.display().to_string(), false)
        ));
    }
    let parent = match s.hierarchy {
        Hierarchy::V2 => &s.mount,
        Hierarchy::V1 => &s.origin,
    };
    let paths_ok = [&s.dir, &s.origin]
        .iter()
        .all(|p| plain_abs(p) && p.starts_with(&s.mount));
    if !paths_ok
        || s.dir.parent() != Some(parent.as_path())
        || s.dir.file_name() != Some(format!("readpath-{file_pid}").as_ref())
    {
        return Some(format!(
            "names cgroup {}, not readpath's readpath-{file_pid}",
            crate::sys::printable(&s.dir.display().to_string(), false)
        ));
    }
    if let Some(sub) = &s.enabled_memory
        && *sub != s.mount.join("cgroup.subtree_control")
    {
        return Some(format!(
            "names {}, not the root's cgroup.subtree_control",
            crate::sys::printable(&sub.display().to_string(), false)
        ));
    }
    None
}

/// Removes the cgroups of readpaths now gone (their state in `dir`), and
/// takes back the controller they enabled; returns what was removed, and
/// notes what was refused (set aside) or could not be done.
pub(super) fn restore_gone(dir: &Path, problems: &mut Vec<String>) -> Vec<PathBuf> {
    let mut done = Vec::new();
    let named = |name: &str| pid_of_state(name).map(|pid| (pid, ()));
    for (path, (pid, ()), text) in super::gone_states(dir, named, problems) {
        let s = match serde_json::from_str::<State>(&text) {
            Ok(s) => s,
            Err(err) => {
                problems.push(super::refused(&path, &format!("{}: {err}", path.display())));
                continue;
            }
        };
        if let Some(why) = refuse(&s, pid) {
            problems.push(super::refused(&path, &format!("{}: {why}", path.display())));
            continue;
        }
        // Its process is gone: the cgroup is empty unless a child of it
        // lives on (then it is left, and said).
        let existed = s.dir.exists();
        match remove(&s, false) {
            Ok(()) => {
                if existed {
                    done.push(s.dir.clone());
                }
                let _ = trust::remove_state(&path);
            }
            Err(err) => problems.push(err.to_string()),
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_the_cache_what_else_is_charged_and_the_slack() {
        let room = Room {
            slack: 1 << 20,
            floor: 6 << 20,
        };
        assert_eq!(limit_for(64 << 20, 0, 0, room), (65 << 20));
        // 70 MiB charged, 60 of them the target's cache: 10 MiB other.
        assert_eq!(limit_for(64 << 20, 70 << 20, 60 << 20, room), 75 << 20);
        // No cache still leaves the floor.
        assert_eq!(limit_for(0, 1, 5, room), 7 << 20);
        // 2 readers, 4 reads of 64K in flight each; 128K windows.
        assert_eq!(slack(2, 4, 64 << 10), 512 << 10);
        assert_eq!(floor(2, 128 << 10), (256 << 10) + MARGIN);
    }

    #[test]
    fn a_forged_journal_entry_is_refused() {
        let s = State {
            pid: 42,
            hierarchy: Hierarchy::V2,
            mount: PathBuf::from("/nonexistent-cgroup-mount"),
            dir: PathBuf::from("/nonexistent-cgroup-mount/readpath-42"),
            origin: PathBuf::from("/nonexistent-cgroup-mount/a"),
            enabled_memory: None,
        };
        assert!(refuse(&s, 43).unwrap().contains("PID"));
        assert!(refuse(&s, 42).unwrap().contains("not a cgroup2 mount"));
        if let Some(m) = trust::mounts().into_iter().find(|m| m.fstype == "cgroup2") {
            let mut s = s.clone();
            s.mount = m.point.clone();
            s.origin = m.point.join("a");
            s.dir = m.point.join("readpath-42");
            assert_eq!(refuse(&s, 42), None);
            for bad in [
                m.point.join("a/readpath-42"),
                m.point.join("x"),
                m.point.join("../readpath-42"),
                PathBuf::from("/tmp/readpath-42"),
            ] {
                let mut t = s.clone();
                t.dir = bad.clone();
                assert!(refuse(&t, 42).is_some(), "{}", bad.display());
            }
            let mut t = s.clone();
            t.enabled_memory = Some(PathBuf::from("/etc/passwd"));
            assert!(refuse(&t, 42).is_some());
        }
    }
}
