//! The threads of a running process as /proc shows them: each one's name
//! and the CPUs it may run on, for tests that hold a run's threads to
//! its CPUs (`workload.cpus`).

/// (name, `Cpus_allowed_list`) of every thread of process `pid` now.
pub fn affinities(pid: u32) -> Vec<(String, String)> {
    let tasks = std::path::PathBuf::from(format!("/proc/{pid}/task"));
    let mut out = Vec::new();
    for t in std::fs::read_dir(&tasks).into_iter().flatten().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or("")
            .trim()
            .to_string();
        out.push((comm.trim().to_string(), allowed));
    }
    out
}
