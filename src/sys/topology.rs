//! The CPU topology the kernel's workqueue code groups CPUs by, read from
//! sysfs, and the pods built from it.
//!
//! Since v6.5 an unbound workqueue runs a work item on the CPUs of the
//! queueing CPU's *pod*: the CPUs that share its last-level cache by default
//! (`workqueue.default_affinity_scope`: cpu, smt, cache, numa, system). The
//! kernel builds pods in `init_pod_type()` by grouping CPUs that share the
//! scope's resource; this module does the same from what sysfs shows
//! (`topology/thread_siblings_list`, the highest-level cache's
//! `shared_cpu_list`, the `nodeN` link), under a root that tests point at a
//! fake tree.

#[allow(unused_imports)]
use super::*;

/// What sysfs says about one CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuTopo {
    /// The CPU's index.
    pub cpu: usize,
    /// Its SMT siblings, itself included (`topology/thread_siblings_list`).
    pub smt: Vec<usize>,
    /// The CPUs sharing its last-level cache, itself included (the highest
    /// `cache/indexN/level`'s `shared_cpu_list`).
    pub llc: Vec<usize>,
    /// Its NUMA node (the `nodeN` entry of its directory; 0 without NUMA).
    pub node: usize,
}

/// Reads the topology of `cpus` from a sysfs CPU directory (`root`, normally
/// `/sys/devices/system/cpu`). A CPU whose files are missing counts as its
/// own SMT group and LLC, on node 0 (what the kernel assumes without the
/// information), so the answer is always usable.
pub fn read_topology(root: &Path, cpus: &[usize]) -> Vec<CpuTopo> {
    cpus.iter()
        .map(|&cpu| {
            let dir = root.join(format!("cpu{cpu}"));
            let list = |p: PathBuf| {
                std::fs::read_to_string(p)
                    .ok()
                    .and_then(|s| parse_cpu_list(&s).ok())
                    .map(|mut l| {
                        l.sort_unstable();
                        l.dedup();
                        l
                    })
                    .filter(|l| l.contains(&cpu))
            };
            let smt = list(dir.join("topology/thread_siblings_list")).unwrap_or_else(|| vec![cpu]);
            let llc = last_level_cache(&dir)
                .and_then(|d| list(d.join("shared_cpu_list")))
                .unwrap_or_else(|| vec![cpu]);
            let node = std::fs::read_dir(&dir)
                .ok()
                .and_then(|entries| {
                    entries.flatten().find_map(|e| {
                        e.file_name()
                            .to_str()?
                            .strip_prefix("node")?
                            .parse::<usize>()
                            .ok()
                    })
                })
                .unwrap_or(0);
            CpuTopo {
                cpu,
                smt,
                llc,
                node,
            }
        })
        .collect()
}

/// The `cache/indexN` directory of the highest cache level (data or
/// unified, not instruction-only).
fn last_level_cache(cpu_dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(cpu_dir.join("cache")).ok()?;
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("index"))
        })
        .filter_map(|e| {
            let p = e.path();
            let level: u32 = std::fs::read_to_string(p.join("level"))
                .ok()?
                .trim()
                .parse()
                .ok()?;
            let kind = std::fs::read_to_string(p.join("type")).unwrap_or_default();
            (kind.trim() != "Instruction").then_some((level, p))
        })
        .max_by_key(|(level, _)| *level)
        .map(|(_, p)| p)
}

/// The machine's topology for `cpus`, from `/sys/devices/system/cpu`.
pub fn cpu_topology(cpus: &[usize]) -> Vec<CpuTopo> {
    read_topology(Path::new("/sys/devices/system/cpu"), cpus)
}

/// Each CPU of `cpus`'s `cpu_capacity` under a sysfs CPU directory
/// (`root`), in order: the scheduler's capacity (1024 for the biggest
/// CPUs). Where the file is missing (a symmetric machine, or an older
/// kernel) every CPU reads 1024, as `cpus_equal_capacity()` then treats
/// them: equal.
pub fn read_capacities(root: &Path, cpus: &[usize]) -> Vec<u32> {
    cpus.iter()
        .map(|&cpu| {
            std::fs::read_to_string(root.join(format!("cpu{cpu}/cpu_capacity")))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(1024)
        })
        .collect()
}

/// [`read_capacities`] of the machine (`/sys/devices/system/cpu`).
pub fn cpu_capacities(cpus: &[usize]) -> Vec<u32> {
    read_capacities(Path::new("/sys/devices/system/cpu"), cpus)
}

/// Pods as `init_pod_type()` builds them: each CPU joins the first pod
/// whose first CPU has the same `key`, else starts a new one. Each pod is
/// sorted; pods are in the order of their first CPU.
pub fn pods_by<K: PartialEq>(topo: &[CpuTopo], key: impl Fn(&CpuTopo) -> K) -> Vec<Vec<usize>> {
    let mut sorted: Vec<&CpuTopo> = topo.iter().collect();
    sorted.sort_by_key(|t| t.cpu);
    let mut pods: Vec<(K, Vec<usize>)> = Vec::new();
    for t in sorted {
        let k = key(t);
        match pods.iter_mut().find(|(pk, _)| *pk == k) {
            Some((_, cpus)) => cpus.push(t.cpu),
            None => pods.push((k, vec![t.cpu])),
        }
    }
    pods.into_iter().map(|(_, cpus)| cpus).collect()
}

/// The kernel's `workqueue.default_affinity_scope` (e.g. "cache"), if this
/// kernel has affinity scopes (v6.5+).
pub fn default_affinity_scope() -> Option<String> {
    read_sysfs_string("/sys/module/workqueue/parameters/default_affinity_scope")
}
