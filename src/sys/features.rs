//! Feature probes: what the kernel and CPU offer (io_uring and NO_IOWAIT, AES
//! and SHA instructions, schedstat, the right to raise priority, the kernel's
//! `xts(aes)` and `sha256` through AF_ALG), asked once at start.

#[allow(unused_imports)]
use super::*;

/// What the machine and kernel offer; probed once at startup.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Features {
    /// An io_uring could be set up.
    pub io_uring: bool,
    /// Why not, when `io_uring` is false.
    pub io_uring_reason: Option<String>,
    /// The kernel offers IORING_FEAT_NO_IOWAIT (waiting in io_uring_enter
    /// need not count as iowait; Linux 6.15+).
    pub no_iowait: bool,
    /// The kernel's io_uring takes `IORING_SETUP_DEFER_TASKRUN` with
    /// `SINGLE_ISSUER` (Linux 6.1+): a reader's ring posts its completions
    /// when the reader waits, as fio sets a ring up.
    #[serde(default)]
    pub uring_defer_taskrun: bool,
    /// AES instructions (x86 AES-NI, or the ARMv8 AES extension).
    pub aes_instructions: bool,
    /// SHA-256 instructions (x86 SHA-NI, or ARMv8 SHA2).
    pub sha_instructions: bool,
    /// Vector AES (x86 VAES; false elsewhere).
    pub vaes: bool,
    /// Per-task schedstat is available ([`schedstat_available`]).
    pub schedstat: bool,
    /// Threads may run at nice -20 ([`can_raise_priority`]).
    pub highpri: bool,
    /// Why not, when `highpri` is false.
    pub highpri_reason: Option<String>,
    /// This kernel's ext4 has fs-verity (`/sys/fs/ext4/features/verity`:
    /// `CONFIG_FS_VERITY`), for `workload.target = "kernel"`.
    #[serde(default)]
    pub kernel_verity: bool,
    /// Why `workload.target = "kernel"` cannot run here (not root), if it
    /// cannot.
    #[serde(default)]
    pub kernel_target_reason: Option<String>,
    /// Why the kernel's `xts(aes)` cannot be had through AF_ALG
    /// (`pipeline.cipher = "kernel"`), if it cannot.
    #[serde(default)]
    pub kernel_cipher_reason: Option<String>,
    /// Why the kernel's `sha256` cannot be had through AF_ALG
    /// (`pipeline.hash = "kernel"`), if it cannot.
    #[serde(default)]
    pub kernel_hash_reason: Option<String>,
    /// The driver the kernel's crypto API picks for `xts(aes)` (fscrypt's
    /// contents cipher: `xts-aes-aesni`, `xts(ecb(aes-fixed-time))`), if
    /// `/proc/crypto` lists one: what `validate` makes the model's cipher
    /// like, on this machine or a target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_xts_driver: Option<String>,
    /// The driver it picks for `sha256` (fs-verity's hash: `sha256-ni`,
    /// `sha256-generic`), if listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_sha256_driver: Option<String>,
    /// Why the kernel target's page cache cannot be held to `cache.size`
    /// here (no memory cgroup, not root), if it cannot
    /// ([`super::cgroup::probe`]).
    #[serde(default)]
    pub kernel_cache_limit_reason: Option<String>,
    /// Why the scheduler's autogroups cannot be turned here
    /// (`kernel.autogroup`: not root, or no `CONFIG_SCHED_AUTOGROUP`), if
    /// they cannot.
    #[serde(default)]
    pub autogroup_reason: Option<String>,
    /// The running kernel has readpath's lab switches
    /// (`/sys/module/readpath/parameters/`: a `lab build --switches`
    /// kernel), so the kernel target's `workers.*` and `workload.sleep`
    /// flip its own queues and wait ([`crate::kernel::switches`]).
    #[serde(default)]
    pub kernel_switches: bool,
    /// The running kernel's workqueues have affinity scopes (Linux 6.5+:
    /// [`WQ_AFFINITY_SCOPE`] exists), so `kernel.affinity_scope` can be
    /// turned; before, an unbound workqueue has one pool per NUMA node.
    /// A recording or an agent without the field is taken to have them
    /// the knob is then tried, and a kernel without it fails at the knob).
    #[serde(default = "assumed")]
    pub kernel_affinity_scopes: bool,
}

fn assumed() -> bool {
    true
}

/// The kernel's default affinity scope of its unbound workqueues (Linux
/// 6.5+), the knob `kernel.affinity_scope` turns.
pub const WQ_AFFINITY_SCOPE: &str = "/sys/module/workqueue/parameters/default_affinity_scope";

/// Where a lab kernel built by `readpath lab build --switches` exposes its
/// seed switches (`kernel::switches` knows them; the probe here looks for
/// the first).
pub const LAB_SWITCHES_DIR: &str = "/sys/module/readpath/parameters";

/// `kernel.io_uring_disabled`, or `None` if the sysctl does not exist (kernels
/// before 6.6) or cannot be read.
pub(super) fn io_uring_disabled_sysctl() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()?
        .trim()
        .parse()
        .ok()
}

pub(super) fn describe_io_uring_sysctl(value: Option<u32>) -> String {
    match value {
        Some(0) => "kernel.io_uring_disabled = 0 (enabled for all)".to_string(),
        Some(1) => "kernel.io_uring_disabled = 1 (only for CAP_SYS_ADMIN or members of \
                    kernel.io_uring_group)"
            .to_string(),
        Some(2) => "kernel.io_uring_disabled = 2 (disabled for everyone)".to_string(),
        Some(v) => format!("kernel.io_uring_disabled = {v}"),
        None => "kernel.io_uring_disabled is not present (kernel before 6.6 or /proc/sys \
                 unreadable)"
            .to_string(),
    }
}

/// The reason an io_uring could not be set up, for [`Features::io_uring_reason`].
pub(super) fn io_uring_failure_reason(err: &io::Error, sysctl: Option<u32>) -> String {
    match err.raw_os_error() {
        Some(libc::EPERM) => format!(
            "io_uring_setup: permission denied (EPERM); {}; a seccomp filter (containers) \
             can also refuse it",
            describe_io_uring_sysctl(sysctl)
        ),
        Some(libc::ENOSYS) => format!(
            "io_uring_setup is not implemented (ENOSYS): kernel without CONFIG_IO_URING, or \
             blocked by a seccomp filter; {}",
            describe_io_uring_sysctl(sysctl)
        ),
        Some(libc::ENOMEM) => format!(
            "io_uring_setup: out of memory (ENOMEM); kernels before 5.12 charge rings to \
             RLIMIT_MEMLOCK, which may be too low ({err})"
        ),
        _ => format!("io_uring_setup failed: {err}"),
    }
}

pub(super) fn cpu_crypto_features() -> (bool, bool, bool) {
    #[cfg(target_arch = "x86_64")]
    {
        (
            std::arch::is_x86_feature_detected!("aes"),
            std::arch::is_x86_feature_detected!("sha"),
            std::arch::is_x86_feature_detected!("vaes"),
        )
    }
    #[cfg(target_arch = "aarch64")]
    {
        (
            std::arch::is_aarch64_feature_detected!("aes"),
            std::arch::is_aarch64_feature_detected!("sha2"),
            false,
        )
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        (false, false, false)
    }
}

/// Probes what the machine and kernel offer. Meant to run once at startup: it
/// sets up (and drops) a two-entry io_uring and may start a short-lived thread
/// (see [`can_raise_priority`]).
pub fn probe_features() -> Features {
    let (io_uring, io_uring_reason, no_iowait) = match io_uring::IoUring::new(2) {
        Ok(ring) => (true, None, ring.params().is_feature_no_iowait()),
        Err(e) => (
            false,
            Some(io_uring_failure_reason(&e, io_uring_disabled_sysctl())),
            false,
        ),
    };
    let uring_defer_taskrun = io_uring
        && io_uring::IoUring::<io_uring::squeue::Entry>::builder()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(2)
            .is_ok();
    let (aes_instructions, sha_instructions, vaes) = cpu_crypto_features();
    let highpri = can_raise_priority(-20);
    Features {
        io_uring,
        io_uring_reason,
        no_iowait,
        uring_defer_taskrun,
        aes_instructions,
        sha_instructions,
        vaes,
        schedstat: schedstat_available(),
        highpri: highpri.is_ok(),
        highpri_reason: highpri.err().map(|e| e.to_string()),
        kernel_verity: ext4_has_verity(),
        kernel_target_reason: kernel_target_reason(),
        kernel_cipher_reason: probe("skcipher", "xts(aes)").err().map(|e| e.to_string()),
        kernel_hash_reason: probe("hash", "sha256").err().map(|e| e.to_string()),
        kernel_xts_driver: crypto_driver("xts(aes)").map(|(d, _)| d),
        kernel_sha256_driver: crypto_driver("sha256").map(|(d, _)| d),
        kernel_cache_limit_reason: super::cgroup::probe().err().map(|e| e.to_string()),
        autogroup_reason: autogroup_reason(),
        kernel_switches: Path::new(LAB_SWITCHES_DIR)
            .join("fsverity_unbound")
            .is_file(),
        kernel_affinity_scopes: Path::new(WQ_AFFINITY_SCOPE).is_file(),
    }
}

/// The driver the kernel's crypto API picks for algorithm `name` (e.g.
/// `xts(aes)`, what fscrypt's AES-256-XTS contents use): the entry of
/// highest priority in `/proc/crypto` (`xts-aes-aesni` with AES-NI,
/// `xts(ecb(aes-fixed-time))` for the generic software AES).
pub fn crypto_driver(name: &str) -> Option<(String, i64)> {
    parse_crypto_driver(&std::fs::read_to_string("/proc/crypto").ok()?, name)
}

/// [`crypto_driver`] over the text of `/proc/crypto`.
pub fn parse_crypto_driver(text: &str, name: &str) -> Option<(String, i64)> {
    let mut best: Option<(String, i64)> = None;
    for entry in text.split("\n\n") {
        let field = |k: &str| {
            entry.lines().find_map(|l| {
                let (key, v) = l.split_once(':')?;
                (key.trim() == k).then(|| v.trim().to_string())
            })
        };
        if field("name").as_deref() != Some(name) {
            continue;
        }
        let (Some(driver), Some(prio)) = (field("driver"), field("priority")) else {
            continue;
        };
        let Ok(prio) = prio.parse::<i64>() else {
            continue;
        };
        if best.as_ref().is_none_or(|(_, p)| prio > *p) {
            best = Some((driver, prio));
        }
    }
    best
}

/// Whether the running kernel's ext4 has fs-verity (`/sys/fs/ext4/features/verity`).
pub fn ext4_has_verity() -> bool {
    Path::new("/sys/fs/ext4/features/verity").exists()
}

/// The scheduler's autogroups switch (`kernel.autogroup`).
pub const AUTOGROUP_SYSCTL: &str = "/proc/sys/kernel/sched_autogroup_enabled";

/// Why `kernel.autogroup` cannot be turned here: the sysctl needs root and
/// a kernel built with `CONFIG_SCHED_AUTOGROUP`.
fn autogroup_reason() -> Option<String> {
    if !Path::new(AUTOGROUP_SYSCTL).exists() {
        Some(format!(
            "this kernel has no autogroups ({} is missing: CONFIG_SCHED_AUTOGROUP is not set)",
            AUTOGROUP_SYSCTL
        ))
    } else if super::trust::euid() != 0 {
        Some("turning the scheduler's autogroups needs root".to_string())
    } else {
        None
    }
}

/// Why the kernel target cannot run here: its key ioctls, tracefs and loop
/// mounts need root.
fn kernel_target_reason() -> Option<String> {
    (super::trust::euid() != 0).then(|| {
        "workload.target = \"kernel\" needs root: the workqueue tracepoints (tracefs), the fscrypt key ioctls and the loop-mounted image".to_string()
    })
}
