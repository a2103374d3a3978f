//! The kernel lab: real kernels, with and without a seed patch, booted
//! under QEMU with readpath inside, so that the kernel's own fscrypt and
//! fs-verity answer beside the model. This machine's kernel has no
//! fs-verity and runs only one kernel; the lab runs any, each in a guest
//! reached through the same agent protocol as a phone or a server
//! (`--remote vm:KERNEL`).
//!
//! [`kernels`] keeps the lab's kernels in the data dir and fetches them;
//! [`initramfs`] makes the guest's first and only filesystem; [`vm`]
//! boots a guest.

pub mod initramfs;
pub mod kernels;
pub mod vm;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use vm::Accel;

/// `--remote vm:KERNEL[:cpus=N][:mem=MIB][:cache=MODE][:accel=kvm|tcg]`:
/// which lab kernel to boot and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmRemote {
    /// A lab kernel's name (`readpath lab kernels`).
    pub kernel: String,
    /// Virtual CPUs, 1..=64 (default 2).
    pub cpus: u32,
    /// Memory, MiB, 256..=65536 (default 2048).
    pub memory_mib: u32,
    /// The lab disk's host cache mode: none, writeback, writethrough,
    /// directsync, unsafe (default none: the guest's reads reach the
    /// host's disk, not its page cache).
    pub disk_cache: String,
    /// The accelerator; None: KVM where `/dev/kvm` opens and a probe boot
    /// works, else TCG.
    pub accel: Option<Accel>,
}

/// What `vm:` allows, for messages.
pub const VM_SPEC_RULE: &str = "vm:KERNEL[:cpus=1..64][:mem=256..65536 (MiB)][:cache=none|writeback|writethrough|directsync|unsafe][:accel=kvm|tcg], KERNEL a lab kernel (`readpath lab kernels`)";

impl VmRemote {
    /// Reads what follows `vm:`.
    pub fn parse(rest: &str) -> Result<VmRemote, String> {
        let mut parts = rest.split(':');
        let kernel = parts.next().unwrap_or_default();
        kernels::check_name(kernel)?;
        let mut v = VmRemote {
            kernel: kernel.to_string(),
            cpus: 2,
            memory_mib: 2048,
            disk_cache: "none".into(),
            accel: None,
        };
        for p in parts {
            let (k, val) = p
                .split_once('=')
                .ok_or_else(|| format!("{p:?}: expected KEY=VALUE; allowed {VM_SPEC_RULE}"))?;
            let num = |lo: u32, hi: u32| -> Result<u32, String> {
                val.parse::<u32>()
                    .ok()
                    .filter(|n| (lo..=hi).contains(n))
                    .ok_or_else(|| format!("{k}={val:?}: allowed {lo}..={hi}"))
            };
            match k {
                "cpus" => v.cpus = num(1, 64)?,
                "mem" => v.memory_mib = num(256, 65536)?,
                "cache"
                    if ["none", "writeback", "writethrough", "directsync", "unsafe"]
                        .contains(&val) =>
                {
                    v.disk_cache = val.to_string()
                }
                "accel" if val == "kvm" => v.accel = Some(Accel::Kvm),
                "accel" if val == "tcg" => v.accel = Some(Accel::Tcg),
                _ => return Err(format!("{k}={val:?}: allowed {VM_SPEC_RULE}")),
            }
        }
        Ok(v)
    }

    /// The spec back, as the header shows it.
    pub fn label(&self) -> String {
        format!("vm:{}", self.kernel)
    }

    /// The accelerator the guest gets: `kvm` where asked for, else `tcg`.
    pub fn accel_name(&self) -> &'static str {
        self.accel.unwrap_or(Accel::Tcg).name()
    }
}

static DATA_DIR: OnceLock<PathBuf> = OnceLock::new();

/// The data dir the lab keeps its kernels, initramfs and disk in: the one
/// this run was given (set once at start), else the default.
pub fn data_dir() -> PathBuf {
    DATA_DIR
        .get()
        .cloned()
        .unwrap_or_else(crate::dataset::default_data_dir)
}

/// Sets [`data_dir`] for this process (the first call wins).
pub fn set_data_dir(dir: &Path) {
    let _ = DATA_DIR.set(dir.to_path_buf());
}

/// Whether KVM can be tried: `/dev/kvm` opens for reading and writing.
pub fn kvm_openable() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}

/// The guest `remote` asks for: its kernel opened, its accelerator chosen
/// (`accel=` where given; else TCG: a KVM probe is not made yet, so KVM
/// is used only when asked for).
pub fn spec_for(remote: &VmRemote) -> std::io::Result<vm::VmSpec> {
    let kernel = kernels::open(&data_dir(), &remote.kernel)?;
    Ok(vm::VmSpec {
        kernel,
        cpus: remote.cpus,
        memory_mib: remote.memory_mib,
        disk_cache: remote.disk_cache.clone(),
        accel: remote.accel.unwrap_or(Accel::Tcg),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_specs_parse_and_bad_ones_name_what_is_allowed() {
        let v = VmRemote::parse("debian-6.1").unwrap();
        assert_eq!(
            (v.cpus, v.memory_mib, v.disk_cache.as_str(), v.accel),
            (2, 2048, "none", None)
        );
        let v = VmRemote::parse("k:cpus=4:mem=4096:cache=writeback:accel=tcg").unwrap();
        assert_eq!((v.cpus, v.memory_mib, v.accel), (4, 4096, Some(Accel::Tcg)));
        assert_eq!(v.label(), "vm:k");
        for bad in [
            "",
            "../k",
            "k:cpus=0",
            "k:cpus=65",
            "k:mem=1",
            "k:cache=evil",
            "k:accel=xen",
            "k:x",
        ] {
            assert!(VmRemote::parse(bad).is_err(), "{bad}");
        }
        assert!(VmRemote::parse("k:cpus=99").unwrap_err().contains("1..=64"));
    }
}
