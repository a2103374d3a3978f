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

pub mod build;
pub mod initramfs;
pub(crate) mod kernels;
pub(crate) mod process;
pub(crate) mod slowdown;
pub(crate) mod store;
pub mod vm;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use slowdown::Slowdown;
use vm::Accel;

/// `--remote vm:KERNEL[:cpus=N][:mem=MIB][:cache=MODE][:accel=kvm|tcg][:aes=on|off][:queues=N]`:
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
    /// Where KERNEL was a path to a bzImage (it holds a `/`): that path;
    /// the image is imported into the lab as kernel `img-HASH` (HASH from
    /// the path) on each start, so a rebuilt image boots as it is now.
    pub image: Option<PathBuf>,
    /// Whether the guest's CPU has the AES instructions (default yes;
    /// `aes=off`: the kernel's `xts(aes)` falls back to its generic,
    /// table-based AES, as on the CPUs of the 2018 fscrypt measurement).
    pub aes: bool,
    /// The disk's virtio-blk queues: `None` (default), one per vCPU;
    /// `queues=1`: every completion on one vCPU, as on a phone's single
    /// UFS interrupt.
    pub queues: Option<u32>,
}

/// What `vm:` allows, for messages.
pub const VM_SPEC_RULE: &str = "vm:KERNEL[:cpus=1..64][:mem=256..65536 (MiB, at most the host's memory)][:cache=none|writeback|writethrough|directsync|unsafe][:accel=kvm|tcg][:aes=on|off][:queues=1..64 (the disk's virtio-blk queues; default one per vCPU)], KERNEL a lab kernel (`readpath lab kernels`) or a path to a bzImage (holding a /)";

/// Why what follows `vm:` was refused ([`VmRemote::parse_spec`]): the
/// field as given and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VmSpecError {
    /// A kernel name that breaks the lab's name rule.
    #[error(transparent)]
    Name(#[from] kernels::BadName),
    /// A field without `=`.
    #[error(
        "{:?}: expected KEY=VALUE; allowed {VM_SPEC_RULE}",
        crate::sys::printable(field, false)
    )]
    NoValue {
        /// The field as given.
        field: String,
    },
    /// A field given twice.
    #[error(
        "{:?}: {} given twice; each field is given at most once",
        crate::sys::printable(field, false),
        crate::sys::printable(key, false)
    )]
    Twice {
        /// The field as given the second time.
        field: String,
        /// Its key.
        key: String,
    },
    /// A number that is not plain digits in range.
    #[error(
        "{key}={:?}: allowed {lo}..={hi}{unit}",
        crate::sys::printable(value, false)
    )]
    Number {
        /// The key (`cpus`, `mem`, `queues`).
        key: String,
        /// The value as given.
        value: String,
        /// The least allowed.
        lo: u32,
        /// The most allowed.
        hi: u32,
        /// What follows the range (`mem`'s unit and the host's memory).
        unit: String,
    },
    /// A key that is none of the fields, or a value the field does not take.
    #[error(
        "{}={:?}: allowed {VM_SPEC_RULE}",
        crate::sys::printable(key, false),
        crate::sys::printable(value, false)
    )]
    Field {
        /// The key as given.
        key: String,
        /// The value as given.
        value: String,
    },
    /// No `mem=`, and the default is more than the host has.
    #[error(
        "the default mem={default_mib} MiB is more than this machine's memory ({host_mib} MiB): give mem=256..={host_mib}"
    )]
    DefaultMemory {
        /// The default, MiB.
        default_mib: u32,
        /// The most allowed here, MiB.
        host_mib: u32,
    },
}

/// Why the kernel a `vm:` spec names cannot be booted from here
/// ([`VmRemote::check_kernel`]), each in its own words.
#[derive(Debug, thiserror::Error)]
pub enum KernelCheckError {
    /// The data dir fails the trust rule.
    #[error(transparent)]
    DataDir(#[from] crate::dataset::DatasetError),
    /// The bzImage path is no image readpath may read.
    #[error(transparent)]
    Image(#[from] crate::files::InputError),
    /// The lab kernel is missing, or does not open.
    #[error(transparent)]
    Open(#[from] std::io::Error),
}

impl VmRemote {
    /// Reads what follows `vm:`, each field once, numbers as plain decimal
    /// digits in range; `mem=` (and the default, 2048) at most `host_mib`,
    /// the host's memory in MiB, where known: QEMU cannot allocate more.
    /// Nothing is read from the lab.
    pub fn parse_spec(rest: &str, host_mib: Option<u64>) -> Result<VmRemote, VmSpecError> {
        let mut parts = rest.split(':');
        let kernel = parts.next().unwrap_or_default();
        let (kernel, image) = if kernel.contains('/') {
            (image_name(kernel), Some(PathBuf::from(kernel)))
        } else {
            kernels::check_name(kernel)?;
            (kernel.to_string(), None)
        };
        let mut v = VmRemote {
            kernel,
            image,
            cpus: 2,
            memory_mib: 2048,
            disk_cache: "none".into(),
            accel: None,
            aes: true,
            queues: None,
        };
        let mem_hi = host_mib.map_or(65536, |h| h.min(65536) as u32);
        let mut seen: Vec<&str> = Vec::new();
        for p in parts {
            let (k, val) = p.split_once('=').ok_or_else(|| VmSpecError::NoValue {
                field: p.to_string(),
            })?;
            if seen.contains(&k) {
                return Err(VmSpecError::Twice {
                    field: p.to_string(),
                    key: k.to_string(),
                });
            }
            seen.push(k);
            let num = |lo: u32, hi: u32, unit: &str| -> Result<u32, VmSpecError> {
                // Plain digits: no sign, no space, no leading `+`.
                let n = Some(val)
                    .filter(|v| {
                        (1..=10).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_digit())
                    })
                    .and_then(|v| v.parse::<u32>().ok());
                n.filter(|n| (lo..=hi).contains(n))
                    .ok_or_else(|| VmSpecError::Number {
                        key: k.to_string(),
                        value: val.to_string(),
                        lo,
                        hi,
                        unit: unit.to_string(),
                    })
            };
            let host = |m: Option<u64>| {
                m.filter(|&h| h < 65536).map_or(String::new(), |h| {
                    format!(" MiB, at most this machine's memory ({h} MiB)")
                })
            };
            match k {
                "cpus" => v.cpus = num(1, 64, "")?,
                "mem" => v.memory_mib = num(256, mem_hi, &host(host_mib))?,
                "cache" if vm::DISK_CACHE_MODES.contains(&val) => v.disk_cache = val.to_string(),
                "accel" if val == "kvm" => v.accel = Some(Accel::Kvm),
                "accel" if val == "tcg" => v.accel = Some(Accel::Tcg),
                "aes" if val == "on" || val == "off" => v.aes = val == "on",
                "queues" => v.queues = Some(num(1, 64, "")?),
                _ => {
                    return Err(VmSpecError::Field {
                        key: k.to_string(),
                        value: val.to_string(),
                    });
                }
            }
        }
        if v.memory_mib > mem_hi {
            return Err(VmSpecError::DefaultMemory {
                default_mib: v.memory_mib,
                host_mib: mem_hi,
            });
        }
        Ok(v)
    }

    /// Checks that the kernel this spec names is there in data dir `data`,
    /// which must pass the trust rule first (nothing in a refused one is
    /// opened): a lab kernel that opens (its directory trusted, every
    /// field of its `kernel.toml` checked, its image the user's file), or,
    /// for a path, a bzImage readpath may read ([`kernels::check_image`]:
    /// a regular file on a real filesystem, at most
    /// [`kernels::IMAGE_CAP`] bytes, with a bzImage's header).
    pub fn check_kernel(&self, data: &Path) -> Result<(), KernelCheckError> {
        // Nothing in a data dir that fails the trust rule is opened.
        crate::dataset::check_data_dir(data)?;
        match &self.image {
            Some(p) => Ok(kernels::check_image(p)?),
            None => Ok(kernels::open(data, &self.kernel).map(|_| ())?),
        }
    }

    /// The spec back, as the header shows it: the kernel, and each
    /// choice that is not the default (two guests of one kernel told
    /// apart: `vm:6.1:cpus=4`).
    pub fn label(&self) -> String {
        let mut l = match &self.image {
            Some(p) => format!("vm:{}", p.display()),
            None => format!("vm:{}", self.kernel),
        };
        if self.cpus != 2 {
            l.push_str(&format!(":cpus={}", self.cpus));
        }
        if self.memory_mib != 2048 {
            l.push_str(&format!(":mem={}", self.memory_mib));
        }
        if self.disk_cache != "none" {
            l.push_str(&format!(":cache={}", self.disk_cache));
        }
        if !self.aes {
            l.push_str(":aes=off");
        }
        l
    }

    /// The accelerator the guest gets: `kvm` where asked for, else `tcg`.
    pub fn accel_name(&self) -> &'static str {
        self.accel.unwrap_or(Accel::Tcg).name()
    }
}

static DATA_DIR: OnceLock<PathBuf> = OnceLock::new();

/// The lab's name for the bzImage at `path`: `img-` and 12 hex digits of
/// the SHA-256 of the path as given.
pub fn image_name(path: &str) -> String {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(path.as_bytes());
    format!(
        "img-{}",
        h[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

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
/// (`accel=` where given, else [`probe_accel`]). `say` hears a probe.
pub fn spec_for(remote: &VmRemote, say: &mut dyn FnMut(&str)) -> std::io::Result<vm::VmSpec> {
    let data = data_dir();
    let kernel = match &remote.image {
        Some(path) => kernels::import_image(&data, &remote.kernel, path)?,
        None => kernels::open(&data, &remote.kernel)?,
    };
    let accel = match remote.accel {
        Some(a) => a,
        None => probe_accel(&data, &kernel, say),
    };
    Ok(vm::VmSpec {
        kernel,
        cpus: remote.cpus,
        memory_mib: remote.memory_mib,
        disk_cache: remote.disk_cache.clone(),
        accel,
        aes: remote.aes,
        queues: remote.queues,
    })
}

/// How long a KVM probe boot may take to reach `/init`'s line: a guest
/// under KVM gets there in about a second; one that hangs (nested
/// virtualisation that does not work) never does.
pub const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// KVM or TCG for `kernel` here: TCG where `/dev/kvm` does not open; else
/// the answer of a probe boot under KVM (one vCPU, a line that prints a
/// word and ends), made once and kept in `lab/accel-NAME` (keyed by the
/// kernel's release), because `/dev/kvm` can open while guests hang (a
/// nested guest stops right after the kernel's decompressor on this
/// project's machines).
pub fn probe_accel(data: &Path, kernel: &kernels::Kernel, say: &mut dyn FnMut(&str)) -> Accel {
    if !kvm_openable() {
        return Accel::Tcg;
    }
    let lab = kernels::lab_dir(data);
    let file = lab.join(format!("accel-{}", kernel.info.name));
    let key = format!("{} ", kernel.info.release);
    if let Ok(Some(t)) = crate::sys::trust::read_state_text(&file, 256)
        && let Some(a) = t.trim().strip_prefix(&key)
    {
        match a {
            "kvm" => return Accel::Kvm,
            "tcg" => return Accel::Tcg,
            _ => {}
        }
    }
    say(&format!(
        "vm:{}: /dev/kvm opens; a probe boot under KVM says whether guests run there (up to {} s, once)",
        kernel.info.name,
        PROBE_TIMEOUT.as_secs()
    ));
    let works = probe_boot(data, kernel).unwrap_or(false);
    let accel = if works { Accel::Kvm } else { Accel::Tcg };
    let _ = crate::sys::trust::write_state(&file, format!("{key}{}\n", accel.name()).as_bytes());
    say(&format!(
        "vm:{}: KVM {}: {}",
        kernel.info.name,
        if works { "works" } else { "guests do not boot" },
        accel.name()
    ));
    accel
}

/// Boots `kernel` under KVM to print one word; whether it came in time.
fn probe_boot(data: &Path, kernel: &kernels::Kernel) -> std::io::Result<bool> {
    use std::io::BufRead;
    const WORD: &str = "readpath-lab-kvm-probe";
    let spec = vm::VmSpec {
        kernel: kernel.clone(),
        cpus: 1,
        memory_mib: 512,
        disk_cache: "none".into(),
        accel: Accel::Kvm,
        aes: true,
        queues: None,
    };
    let mut cmd = vm::prepare(data, &spec, Some(&format!("echo {WORD}")), &mut |_| {})?;
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    // What lets `kernel restore` prove it readpath's, should it outlive us.
    let _ = vm::record_guest(data, child.id());
    let out = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let seen = std::io::BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.contains(WORD));
        let _ = tx.send(seen);
    });
    let seen = rx.recv_timeout(PROBE_TIMEOUT).unwrap_or(false);
    let _ = child.kill();
    let _ = child.wait();
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_specs_parse_and_bad_ones_name_what_is_allowed() {
        let v = VmRemote::parse_spec("debian-6.1", None).unwrap();
        assert_eq!(
            (v.cpus, v.memory_mib, v.disk_cache.as_str(), v.accel),
            (2, 2048, "none", None)
        );
        let v = VmRemote::parse_spec("k:cpus=4:mem=4096:cache=writeback:accel=tcg", None).unwrap();
        assert_eq!((v.cpus, v.memory_mib, v.accel), (4, 4096, Some(Accel::Tcg)));
        assert_eq!(v.label(), "vm:k:cpus=4:mem=4096:cache=writeback");
        assert!(v.aes);
        let v = VmRemote::parse_spec("k:aes=off:accel=tcg", None).unwrap();
        assert!(!v.aes);
        assert_eq!(v.label(), "vm:k:aes=off");
        assert_eq!(
            VmRemote::parse_spec("k:accel=tcg", None).unwrap().label(),
            "vm:k"
        );
        let v = VmRemote::parse_spec("/boot/vmlinuz-6.9:cpus=4", None).unwrap();
        assert_eq!(v.image.as_deref(), Some(Path::new("/boot/vmlinuz-6.9")));
        assert!(
            v.kernel.starts_with("img-") && v.kernel.len() == 16,
            "{}",
            v.kernel
        );
        assert!(kernels::check_name(&v.kernel).is_ok());
        assert_eq!(v.label(), "vm:/boot/vmlinuz-6.9:cpus=4");
        for bad in [
            "k:aes=no",
            "",
            "k:cpus=x",
            "k:cpus=0",
            "k:cpus=65",
            "k:mem=1",
            "k:cache=evil",
            "k:accel=xen",
            "k:x",
        ] {
            assert!(VmRemote::parse_spec(bad, None).is_err(), "{bad}");
        }
        assert!(
            VmRemote::parse_spec("k:cpus=99", None)
                .unwrap_err()
                .to_string()
                .contains("1..=64")
        );
        // A field given twice, a signed or padded number: refused.
        for (bad, says) in [
            ("k:cpus=2:cpus=4", "cpus given twice"),
            ("k:aes=on:aes=off", "aes given twice"),
            ("k:mem=+512", "allowed 256..=65536"),
            ("k:mem=-1", "allowed 256..=65536"),
            ("k:cpus= 4", "allowed 1..=64"),
            ("k:cpus=4 ", "allowed 1..=64"),
        ] {
            let e = VmRemote::parse_spec(bad, None).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // mem= held to the host's memory (QEMU could not allocate more),
        // the default too.
        let e = VmRemote::parse_spec("k:mem=65536", Some(4096))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("allowed 256..=4096 MiB, at most this machine's memory (4096 MiB)"),
            "{e}"
        );
        assert_eq!(
            VmRemote::parse_spec("k:mem=4096", Some(4096))
                .unwrap()
                .memory_mib,
            4096
        );
        assert_eq!(
            VmRemote::parse_spec("k:mem=65536", Some(1 << 20))
                .unwrap()
                .memory_mib,
            65536
        );
        let e = VmRemote::parse_spec("k", Some(1024))
            .unwrap_err()
            .to_string();
        assert!(e.contains("default mem=2048"), "{e}");
        // The kernel must be in the lab, or the path a regular file.
        let d = tempfile::tempdir().unwrap();
        let v = VmRemote::parse_spec("no-such-kernel", None).unwrap();
        let e = v.check_kernel(d.path()).unwrap_err().to_string();
        assert!(e.contains("no lab kernel \"no-such-kernel\""), "{e}");
        let v = VmRemote::parse_spec(&format!("{}/", d.path().display()), None).unwrap();
        let e = v.check_kernel(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("is a directory; a kernel image (bzImage) is read only from a regular file"),
            "{e}"
        );
    }
}
