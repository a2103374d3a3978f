//! Where a memory cgroup can be made for this process, read from
//! `/proc/self/cgroup`, the mount table and the cgroup files: the probe
//! behind `kernel.limit_cache` (see `kernel::cgroup`, which makes it). In
//! `sys` because it reads /proc and /sys, and the feature probe needs it.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::trust;

/// Which cgroup hierarchy holds the memory controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hierarchy {
    /// cgroup v2 (`memory.high`, `memory.current`). The limit is
    /// `memory.high`, not `memory.max`: above it the kernel reclaims (the
    /// page cache, as nothing else can go without swap) and throttles,
    /// where above `memory.max` its OOM killer ends readpath. v2 charges
    /// readpath's own memory allocated after the move (anonymous memory,
    /// kernel memory such as a tracefs instance's inodes) to the same
    /// cgroup, and a burst of it within one interval, before the limit is
    /// set again, got readpath killed under `memory.max` (4.7 MB of anon
    /// against a limit of 4740 kB, Linux 6.1 in the lab).
    V2,
    /// cgroup v1's memory hierarchy (`memory.limit_in_bytes`,
    /// `memory.usage_in_bytes`).
    V1,
}

impl Hierarchy {
    /// The file of the cgroup's limit.
    pub fn limit_file(self) -> &'static str {
        match self {
            Hierarchy::V2 => "memory.high",
            Hierarchy::V1 => "memory.limit_in_bytes",
        }
    }

    /// The file of what the cgroup is charged.
    pub fn usage_file(self) -> &'static str {
        match self {
            Hierarchy::V2 => "memory.current",
            Hierarchy::V1 => "memory.usage_in_bytes",
        }
    }
}

/// Where the cgroup goes, as [`probe`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The hierarchy.
    pub hierarchy: Hierarchy,
    /// The hierarchy's mount point.
    pub mount: PathBuf,
    /// The directory the cgroup is made in.
    pub parent: PathBuf,
    /// The cgroup the process is in now (moved back there after).
    pub origin: PathBuf,
    /// cgroup v2 whose root does not yet give its children `memory`.
    pub enable_memory: bool,
}

/// The text of `path` (small cgroup and proc files), trimmed.
fn read_small(path: &Path) -> io::Result<String> {
    let mut s = String::new();
    File::open(path)?.take(1 << 16).read_to_string(&mut s)?;
    Ok(s.trim().to_string())
}

/// True when `p` is absolute and has only plain names.
pub fn plain_abs(p: &Path) -> bool {
    let mut c = p.components();
    c.next() == Some(Component::RootDir) && c.all(|x| matches!(x, Component::Normal(_)))
}

/// Where the process's cgroup (v2) and memory cgroup (v1) are, from the
/// text of `/proc/self/cgroup`.
fn self_paths(text: &str) -> (Option<PathBuf>, Option<PathBuf>) {
    let (mut v2, mut v1) = (None, None);
    for l in text.lines() {
        let mut f = l.splitn(3, ':');
        let (Some(id), Some(ctl), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let p = PathBuf::from(path);
        if !plain_abs(&p) && p != Path::new("/") {
            continue;
        }
        if id == "0" && ctl.is_empty() {
            v2 = Some(p);
        } else if ctl.split(',').any(|c| c == "memory") {
            v1 = Some(p);
        }
    }
    (v2, v1)
}

/// `mount` joined with a cgroup path (`/a/b`).
fn under(mount: &Path, path: &Path) -> PathBuf {
    mount.join(path.strip_prefix("/").unwrap_or(path))
}

/// Why no memory cgroup can be made for this process ([`probe`]).
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// Not root.
    #[error("moving readpath into a memory cgroup needs root")]
    NotRoot,
    /// `/proc/self/cgroup` could not be read.
    #[error("/proc/self/cgroup: {0}")]
    ProcSelf(#[source] io::Error),
    /// The process is in a v1 memory cgroup whose hierarchy is not mounted.
    #[error("the memory cgroup hierarchy this process is in is not mounted")]
    V1NotMounted,
    /// cgroup v2 without its memory controller, and no v1 memory hierarchy.
    #[error(
        "the memory controller is not available on cgroup v2 here (its root's cgroup.controllers has no memory) and no cgroup v1 memory hierarchy is mounted"
    )]
    NoV2Memory,
    /// No memory cgroup at all.
    #[error(
        "this kernel has no memory cgroup (neither cgroup v2 nor v1 memory in /proc/self/cgroup)"
    )]
    NoMemoryCgroup,
}

/// Where a memory cgroup can be made for this process, or why none can:
/// not root, no memory controller on cgroup v2 nor v1.
pub fn probe() -> Result<Placement, CgroupError> {
    if trust::euid() != 0 {
        return Err(CgroupError::NotRoot);
    }
    let text = read_small(Path::new("/proc/self/cgroup")).map_err(CgroupError::ProcSelf)?;
    let (v2, v1) = self_paths(&text);
    let mounts = trust::mounts();
    if let Some(path) = &v2
        && let Some(m) = mounts.iter().find(|m| m.fstype == "cgroup2")
    {
        let ctl = read_small(&m.point.join("cgroup.controllers")).unwrap_or_default();
        if ctl.split_whitespace().any(|c| c == "memory") {
            let sub = read_small(&m.point.join("cgroup.subtree_control")).unwrap_or_default();
            return Ok(Placement {
                hierarchy: Hierarchy::V2,
                mount: m.point.clone(),
                parent: m.point.clone(),
                origin: under(&m.point, path),
                enable_memory: !sub.split_whitespace().any(|c| c == "memory"),
            });
        }
    }
    if let Some(path) = &v1
        && let Some(m) = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.point.join("memory.limit_in_bytes").exists())
    {
        let origin = under(&m.point, path);
        if origin.join("cgroup.procs").exists() {
            return Ok(Placement {
                hierarchy: Hierarchy::V1,
                mount: m.point.clone(),
                parent: origin.clone(),
                origin,
                enable_memory: false,
            });
        }
    }
    Err(match (v2.is_some(), v1.is_some()) {
        (_, true) => CgroupError::V1NotMounted,
        (true, false) => CgroupError::NoV2Memory,
        (false, false) => CgroupError::NoMemoryCgroup,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_self_cgroup_gives_the_v2_path_and_the_v1_memory_path() {
        let (v2, v1) = self_paths(
            "9:name=systemd:/\n4:memory:/process_api/ab12\n3:cpu,cpuacct:/x\n0::/user.slice/s\n",
        );
        assert_eq!(v2.as_deref(), Some(Path::new("/user.slice/s")));
        assert_eq!(v1.as_deref(), Some(Path::new("/process_api/ab12")));
        let (v2, v1) = self_paths("0::/\n");
        assert_eq!(v2.as_deref(), Some(Path::new("/")));
        assert_eq!(v1, None);
        // A path with `..` is no cgroup path.
        assert_eq!(self_paths("0::/a/../b\n").0, None);
    }
}
