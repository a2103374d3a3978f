//! The machine description recorded with every result (kernel, CPU, memory,
//! cpuidle and cpufreq, the data dir's filesystem).

#[allow(unused_imports)]
use super::*;

/// Machine description recorded with results.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MachineInfo {
    /// `gethostname(2)`.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPU brand string, e.g. "AMD EPYC 7763 64-Core Processor".
    pub cpu_model: String,
    /// CPUs this process may use ([`online_cpus`]), which is what bounds the
    /// run; less than the machine's total under taskset or a cpuset.
    pub cpus: usize,
    /// Total RAM in bytes.
    pub memory_bytes: u64,
    /// AES instructions available.
    pub aes_instructions: bool,
    /// SHA-256 instructions available.
    pub sha_instructions: bool,
    /// Filesystem type of the data directory ([`fs_type_name`]).
    pub data_dir_fs: String,
    /// `/sys/devices/system/cpu/cpuidle/current_driver` ("none" when the
    /// kernel has no idle driver), `None` if absent.
    pub cpuidle_driver: Option<String>,
    /// cpufreq governor of the first usable CPU (cpu0 as fallback), `None` if
    /// there is no cpufreq (common in VMs).
    pub cpufreq_governor: Option<String>,
    /// `/sys/devices/system/cpu/cpuidle/current_governor` (or `_ro`).
    #[serde(default)]
    pub cpuidle_governor: Option<String>,
    /// cpufreq driver of that CPU (`scaling_driver`, e.g. "intel_pstate").
    #[serde(default)]
    pub cpufreq_driver: Option<String>,
    /// `intel_pstate/hwp_dynamic_boost` ("0" or "1"), where present.
    #[serde(default)]
    pub hwp_dynamic_boost: Option<String>,
    /// The kernel's `workqueue.default_affinity_scope` (v6.5+).
    #[serde(default)]
    pub default_affinity_scope: Option<String>,
}

impl MachineInfo {
    /// "cpuidle haltpoll (governor haltpoll), cpufreq none": what could
    /// read iowait here.
    pub fn idle_and_freq(&self) -> String {
        let idle = match (&self.cpuidle_driver, &self.cpuidle_governor) {
            (Some(d), Some(g)) => format!("cpuidle {d} (governor {g})"),
            (Some(d), None) => format!("cpuidle {d}"),
            (None, _) => "no cpuidle".to_string(),
        };
        let freq = match (&self.cpufreq_driver, &self.cpufreq_governor) {
            (Some(d), Some(g)) => format!("cpufreq {d} (governor {g})"),
            (None, Some(g)) => format!("cpufreq governor {g}"),
            (Some(d), None) => format!("cpufreq {d}"),
            (None, None) => "no cpufreq".to_string(),
        };
        format!("{idle}, {freq}")
    }

    /// The machine in one line, for summaries and `compare --hosts`:
    /// `pixel: Linux 6.1.75, 8 CPUs (...), AES instructions yes, SHA yes,
    /// idle haltpoll, no cpufreq`.
    pub fn line(&self) -> String {
        let yn = |b: bool| if b { "yes" } else { "no" };
        format!(
            "{}: Linux {}, {} CPUs ({}), AES instructions {}, SHA {}, {}",
            if self.hostname.is_empty() {
                "?"
            } else {
                &self.hostname
            },
            self.kernel,
            self.cpus,
            self.cpu_model,
            yn(self.aes_instructions),
            yn(self.sha_instructions),
            self.idle_and_freq_short()
        )
    }

    /// The header's short form: "idle haltpoll, no cpufreq" (a driver and
    /// a governor of the same name written once: "idle intel_idle/menu").
    pub fn idle_and_freq_short(&self) -> String {
        let two = |a: &Option<String>, b: &Option<String>, what: &str, none: &str| match (a, b) {
            (Some(a), Some(b)) if a == b => format!("{what} {a}"),
            (Some(a), Some(b)) => format!("{what} {a}/{b}"),
            (Some(a), None) | (None, Some(a)) => format!("{what} {a}"),
            (None, None) => none.to_string(),
        };
        format!(
            "{}, {}",
            two(
                &self.cpuidle_driver,
                &self.cpuidle_governor,
                "idle",
                "no cpuidle"
            ),
            two(
                &self.cpufreq_driver,
                &self.cpufreq_governor,
                "freq",
                "no cpufreq"
            )
        )
    }

    /// What on this machine changes speed because a task sleeps as iowait
    /// (Linux 6.18): schedutil's iowait boost; intel_pstate's (without HWP,
    /// or with `hwp_dynamic_boost`); the menu idle governor before 6.13.
    /// `/proc/stat` iowait and PSI only account for it.
    pub fn iowait_consumers(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.cpufreq_governor.as_deref() == Some("schedutil") {
            out.push("schedutil's iowait boost".to_string());
        }
        if self.cpufreq_driver.as_deref() == Some("intel_pstate")
            && self.cpufreq_governor.as_deref() != Some("schedutil")
            && self.hwp_dynamic_boost.as_deref() != Some("0")
        {
            out.push("intel_pstate's iowait boost".to_string());
        }
        if self.cpuidle_governor.as_deref() == Some("menu")
            && kernel_version(&self.kernel).is_some_and(|v| v < (6, 13))
        {
            out.push("the menu idle governor (before 6.13)".to_string());
        }
        out
    }

    /// A notice when nothing here consumes iowait, so `sleep = iowait` vs
    /// `plain` can change its accounting but not speed.
    pub fn iowait_notice(&self) -> Option<String> {
        self.iowait_consumers().is_empty().then(|| {
            format!(
                "iowait: nothing on this machine reads it ({}): sleep = iowait vs plain changes its accounting (/proc/stat, PSI), not the CPU's speed or idle states",
                self.idle_and_freq()
            )
        })
    }
}

/// (major, minor) of a kernel release such as "6.18.44-fc".
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

pub(super) fn read_sysfs_string(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// "model name" (x86) or "Hardware"/"CPU part"-less fallback from /proc/cpuinfo.
pub(super) fn cpuinfo_model_name() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        let key = key.trim();
        (key == "model name" || key == "Model" || key == "Hardware")
            .then(|| value.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

/// Describes the machine, for recording with results. `data_dir` need not
/// exist yet (its nearest existing ancestor is used for the filesystem type).
pub fn machine_info(data_dir: &Path) -> MachineInfo {
    use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

    let sys = System::new_with_specifics(
        RefreshKind::nothing()
            .with_cpu(CpuRefreshKind::nothing())
            .with_memory(MemoryRefreshKind::nothing().with_ram()),
    )
    .ok();
    let cpu_model = sys
        .as_ref()
        .and_then(|s| s.cpus().first())
        .map(|c| c.brand().trim().to_string())
        .filter(|b| !b.is_empty())
        .or_else(cpuinfo_model_name)
        .unwrap_or_else(|| "unknown".to_string());
    let memory_bytes = sys.as_ref().map_or(0, System::total_memory);
    let hostname = System::host_name()
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    let kernel = System::kernel_version()
        .ok()
        .filter(|k| !k.is_empty())
        .or_else(|| read_sysfs_string("/proc/sys/kernel/osrelease"))
        .unwrap_or_else(|| "unknown".to_string());
    let cpus = online_cpus();
    let (aes_instructions, sha_instructions, _) = cpu_crypto_features();
    let governor_path =
        |cpu: usize| format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor");
    let cpufreq_governor = cpus
        .first()
        .and_then(|&c| read_sysfs_string(&governor_path(c)))
        .or_else(|| read_sysfs_string(&governor_path(0)));
    let driver_path =
        |cpu: usize| format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_driver");
    let cpufreq_driver = cpus
        .first()
        .and_then(|&c| read_sysfs_string(&driver_path(c)))
        .or_else(|| read_sysfs_string(&driver_path(0)));
    let idle = "/sys/devices/system/cpu/cpuidle";
    MachineInfo {
        hostname,
        kernel,
        cpu_model,
        cpus: cpus.len(),
        memory_bytes,
        aes_instructions,
        sha_instructions,
        data_dir_fs: fs_type_name(data_dir),
        cpuidle_driver: read_sysfs_string(&format!("{idle}/current_driver")),
        cpufreq_governor,
        cpuidle_governor: read_sysfs_string(&format!("{idle}/current_governor"))
            .or_else(|| read_sysfs_string(&format!("{idle}/current_governor_ro"))),
        cpufreq_driver,
        hwp_dynamic_boost: read_sysfs_string(
            "/sys/devices/system/cpu/intel_pstate/hwp_dynamic_boost",
        ),
        default_affinity_scope: default_affinity_scope(),
    }
}

/// The name of a filesystem magic number (`statfs.f_type`).
pub(super) fn fs_magic_name(magic: u32) -> Option<&'static str> {
    Some(match magic {
        0xEF53 => "ext4", // ext2/ext3/ext4 share the magic
        0x0102_1994 => "tmpfs",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0xF2F5_2010 => "f2fs",
        0x794C_7630 => "overlayfs",
        0x6969 => "nfs",
        0x6573_5546 => "fuse",
        0x2FC1_2FC1 => "zfs",
        0xCA45_1A4E => "bcachefs",
        0x0102_1997 => "9p",
        0x8584_58F6 => "ramfs",
        0x9584_58F6 => "hugetlbfs",
        0x7371_7368 => "squashfs",
        0x2011_BAB0 => "exfat",
        0x4D44 => "vfat",
        0x5346_544E => "ntfs",
        0xFF53_4D42 => "cifs",
        0xFE53_4D42 => "smb2",
        0x00C3_6400 => "ceph",
        0x3434 => "nilfs2",
        0x9FA0 => "proc",
        0x6265_6572 => "sysfs",
        0x6367_7270 => "cgroup2",
        0x1CD1 => "devpts",
        _ => return None,
    })
}

/// `path` made absolute, then its nearest ancestor (itself included) that exists.
pub fn nearest_existing_ancestor(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    abs.ancestors()
        .find(|a| !a.as_os_str().is_empty() && std::fs::metadata(a).is_ok())
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}

/// `statfs(2)` magic of `path`.
pub(super) fn fs_magic(path: &Path) -> io::Result<u32> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c_path` is a NUL-terminated string that outlives the call and
    // `st` points to writable memory the size of `struct statfs`.
    let rc = unsafe { libc::statfs(c_path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statfs returned 0, so the kernel filled in the whole struct.
    let st = unsafe { st.assume_init() };
    // f_type's C type varies by architecture; magics are 32-bit values.
    Ok(st.f_type as u32)
}

/// Filesystem type of `path` by `statfs(2)` magic ("ext4", "tmpfs", "xfs",
/// "btrfs", "f2fs", "overlayfs", "nfs", "fuse", "zfs", ...; unknown magics as
/// hex, e.g. "0x12345678"; "unknown" if statfs fails). If `path` does not exist
/// yet, its nearest existing ancestor is asked.
pub fn fs_type_name(path: &Path) -> String {
    match fs_magic(&nearest_existing_ancestor(path)) {
        Ok(magic) => fs_magic_name(magic).map_or_else(|| format!("0x{magic:x}"), str::to_string),
        Err(_) => "unknown".to_string(),
    }
}

/// The running kernel's release (`uname -r`), or `unknown kernel`.
pub fn machine_kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown kernel".into())
}
