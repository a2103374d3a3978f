//! Where a block device's completion interrupts land.
//!
//! The kernel queues a bio's post-read work (fscrypt decryption, fs-verity
//! verification) from the CPU that runs its completion: the CPU the
//! device's interrupt lands on, unless `rq_affinity` sends it to the
//! submitter. A phone's UFS has one interrupt, so every work item of a
//! bound queue starts on one CPU; a multi-queue NVMe has one per CPU or
//! group. readpath models that (`workload.irq_cpus`), so it shows where the
//! real device's interrupts are: the disk under the file (`st_dev` ->
//! `/sys/dev/block/MAJ:MIN`), the interrupts of its bus device (its
//! `msi_irqs`, else its `irq`, else the `/proc/interrupts` lines named
//! after the driver's device, e.g. `virtio1-req.0`, `nvme0q1`), and each
//! one's `/proc/irq/N/effective_affinity_list`. A loop device has no
//! interrupt: its reads complete in the submitting task's context (or its
//! worker), which is what the report then says.

#[allow(unused_imports)]
use super::*;

/// One interrupt of a block device.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceIrq {
    /// The interrupt number (`/proc/irq/N`).
    pub irq: u32,
    /// Its name in `/proc/interrupts` (`virtio1-req.0`, `nvme0q3`).
    pub name: String,
    /// The CPUs it is delivered to (`effective_affinity_list`; the
    /// configured `smp_affinity_list` where that file is missing); empty
    /// when unreadable.
    pub cpus: Vec<usize>,
}

/// Where the completions of the block device under a file run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeviceIrqs {
    /// A device whose queue interrupts were found.
    Irqs {
        /// The disk (`vda`, `nvme0n1`).
        disk: String,
        /// Its queue interrupts (config/admin interrupts left out when
        /// queue ones are named).
        irqs: Vec<DeviceIrq>,
    },
    /// A device without interrupts of its own (loop, device-mapper, ...).
    NoIrq {
        disk: String,
        /// Where its completions run instead.
        why: String,
    },
    /// The interrupts could not be read.
    Unknown { disk: String, why: String },
}

impl DeviceIrqs {
    /// One line: `vda: irq 36 virtio1-req.0 -> CPU 1`.
    pub fn describe(&self) -> String {
        match self {
            DeviceIrqs::Irqs { disk, irqs } => {
                let parts: Vec<String> = irqs
                    .iter()
                    .map(|i| {
                        let cpus = if i.cpus.is_empty() {
                            "?".to_string()
                        } else {
                            format_cpu_list(&i.cpus)
                        };
                        format!("irq {} {} -> CPU {cpus}", i.irq, i.name)
                    })
                    .collect();
                format!("{disk}: {}", parts.join(", "))
            }
            DeviceIrqs::NoIrq { disk, why } => format!("{disk}: {why}"),
            DeviceIrqs::Unknown { disk, why } => format!("{disk}: interrupts unknown ({why})"),
        }
    }
}

/// `(irq, name)` of every numbered line of `/proc/interrupts` text (the
/// name is the last column: the action's name).
pub fn parse_interrupts(text: &str) -> Vec<(u32, String)> {
    text.lines()
        .filter_map(|l| {
            let (num, rest) = l.trim_start().split_once(':')?;
            let irq = num.trim().parse().ok()?;
            let name = rest.split_whitespace().last()?.to_string();
            Some((irq, name))
        })
        .collect()
}

/// Whether an interrupt name is a queue's (not a config or admin one).
fn is_queue_irq(name: &str) -> bool {
    if name.ends_with("-config") || name.ends_with("q0") {
        return false;
    }
    name.contains("-req") || name.contains("-requests") || {
        // nvme0q1, nvme1q12
        name.rsplit_once('q').is_some_and(|(dev, q)| {
            dev.starts_with("nvme") && !q.is_empty() && q.bytes().all(|b| b.is_ascii_digit())
        })
    }
}

/// The queue interrupts among `candidates` (numbers of the device's
/// interrupts; empty: unknown) named in `interrupts` (parsed
/// `/proc/interrupts`), for a bus device called `dev_name` (`virtio1`,
/// `nvme0`): the candidates whose name is a queue's, all the candidates
/// when none is, or (no candidates) the lines named `dev_name-...` /
/// `dev_nameqN`.
pub fn queue_irqs(
    candidates: &[u32],
    interrupts: &[(u32, String)],
    dev_name: &str,
) -> Vec<(u32, String)> {
    let mine: Vec<(u32, String)> = if candidates.is_empty() {
        interrupts
            .iter()
            .filter(|(_, n)| {
                !dev_name.is_empty()
                    && n.strip_prefix(dev_name)
                        .is_some_and(|r| r.starts_with('-') || r.starts_with('q'))
            })
            .cloned()
            .collect()
    } else {
        candidates
            .iter()
            .map(|&irq| {
                let name = interrupts
                    .iter()
                    .find(|(n, _)| *n == irq)
                    .map_or_else(|| "?".to_string(), |(_, s)| s.clone());
                (irq, name)
            })
            .collect()
    };
    let queues: Vec<(u32, String)> = mine
        .iter()
        .filter(|(_, n)| is_queue_irq(n))
        .cloned()
        .collect();
    if queues.is_empty() { mine } else { queues }
}

/// The interrupts of the block device holding `path`, read live.
pub fn device_irqs(path: &Path) -> DeviceIrqs {
    use std::os::unix::fs::MetadataExt;
    let dev = match std::fs::metadata(path) {
        Ok(m) => m.dev(),
        Err(e) => {
            return DeviceIrqs::Unknown {
                disk: "?".into(),
                why: format!("{}: {e}", path.display()),
            };
        }
    };
    let (major, minor) = dev_numbers(dev);
    let interrupts = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    device_irqs_in(Path::new("/"), major, minor, &parse_interrupts(&interrupts))
}

/// [`device_irqs`] of block device `major:minor`, read live.
pub fn device_irqs_of(major: u32, minor: u32) -> DeviceIrqs {
    let interrupts = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    device_irqs_in(Path::new("/"), major, minor, &parse_interrupts(&interrupts))
}

/// [`device_irqs`] for device `major:minor` under the tree `root` (`/`
/// live; a fixture in tests) with `/proc/interrupts` already parsed.
pub fn device_irqs_in(
    root: &Path,
    major: u32,
    minor: u32,
    interrupts: &[(u32, String)],
) -> DeviceIrqs {
    let unknown = |disk: &str, why: String| DeviceIrqs::Unknown {
        disk: disk.to_string(),
        why,
    };
    if major == 0 {
        return unknown(
            &format!("{major}:{minor}"),
            "an anonymous device (tmpfs, overlayfs, btrfs): no single disk".into(),
        );
    }
    let link = root.join(format!("sys/dev/block/{major}:{minor}"));
    let Ok(mut dir) = std::fs::canonicalize(&link) else {
        return unknown(
            &format!("{major}:{minor}"),
            format!("{} is not readable", link.display()),
        );
    };
    if dir.join("partition").exists()
        && let Some(p) = dir.parent()
    {
        dir = p.to_path_buf();
    }
    let disk = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if disk.starts_with("loop") {
        return DeviceIrqs::NoIrq {
            disk,
            why: "loop: completes in the submitting task's context".into(),
        };
    }
    let Ok(mut bus) = std::fs::canonicalize(dir.join("device")) else {
        return DeviceIrqs::NoIrq {
            why: format!(
                "{}: a virtual device with no interrupt (completes where the device under it does)",
                disk
            ),
            disk,
        };
    };
    let dev_name = bus
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The first ancestor with interrupts: virtio1's PCI function, or
    // the NVMe controller itself.
    let mut candidates = Vec::new();
    let sys_devices = root.join("sys/devices");
    loop {
        if let Ok(entries) = std::fs::read_dir(bus.join("msi_irqs")) {
            candidates = entries
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect();
            candidates.sort_unstable();
        }
        if candidates.is_empty()
            && let Some(irq) = std::fs::read_to_string(bus.join("irq"))
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
                .filter(|&i| i > 0)
        {
            candidates.push(irq);
        }
        if !candidates.is_empty() || !bus.pop() || !bus.starts_with(&sys_devices) {
            break;
        }
    }
    let found = queue_irqs(&candidates, interrupts, &dev_name);
    if found.is_empty() {
        return unknown(
            &disk,
            format!("no interrupt of {dev_name} found (no msi_irqs, irq or /proc/interrupts line)"),
        );
    }
    let irqs = found
        .into_iter()
        .map(|(irq, name)| {
            let read = |f: &str| {
                std::fs::read_to_string(root.join(format!("proc/irq/{irq}/{f}")))
                    .ok()
                    .and_then(|s| parse_cpu_list(s.trim()).ok())
            };
            let cpus = read("effective_affinity_list")
                .or_else(|| read("smp_affinity_list"))
                .unwrap_or_default();
            DeviceIrq { irq, name, cpus }
        })
        .collect();
    DeviceIrqs::Irqs { disk, irqs }
}

#[cfg(test)]
mod irq_tests {
    use super::*;

    const INTERRUPTS: &str = "           CPU0       CPU1
 26:          0          1  IO-APIC   4-edge      ttyS0
 35:          0          1 PCI-MSIX-0000:00:02.0   0-edge      virtio1-config
 36:          0   20064403 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 40:          0          0 PCI-MSIX-0000:00:04.0   0-edge      virtio3-config
 50:          1          0  PCI-MSI 1048576-edge      nvme0q0
 51:         10          0  PCI-MSI 1048577-edge      nvme0q1
 52:          0         12  PCI-MSI 1048578-edge      nvme0q2
NMI:          0          0   Non-maskable interrupts
";

    #[test]
    fn interrupts_text_gives_numbers_and_names() {
        let p = parse_interrupts(INTERRUPTS);
        assert_eq!(p.len(), 7);
        assert_eq!(p[0], (26, "ttyS0".to_string()));
        assert_eq!(p[2], (36, "virtio1-req.0".to_string()));
        assert!(!p.iter().any(|(_, n)| n == "interrupts"));
    }

    #[test]
    fn queue_interrupts_leave_config_and_admin_out() {
        let p = parse_interrupts(INTERRUPTS);
        assert_eq!(
            queue_irqs(&[35, 36], &p, "virtio1"),
            vec![(36, "virtio1-req.0".to_string())]
        );
        let nvme: Vec<u32> = queue_irqs(&[], &p, "nvme0").iter().map(|x| x.0).collect();
        assert_eq!(nvme, vec![51, 52]);
        // Nothing looks like a queue: every candidate is shown.
        assert_eq!(queue_irqs(&[26], &p, "x").len(), 1);
        assert!(queue_irqs(&[], &p, "virtio9").is_empty());
    }

    #[test]
    fn a_fixture_tree_gives_the_disks_queue_irq_and_its_cpus() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let pci = root.join("sys/devices/pci0000:00/0000:00:02.0");
        let disk = pci.join("virtio1/block/vda");
        std::fs::create_dir_all(disk.join("vda1")).unwrap();
        std::fs::write(disk.join("vda1/partition"), "1\n").unwrap();
        std::fs::create_dir_all(pci.join("msi_irqs")).unwrap();
        for i in ["35", "36"] {
            std::fs::write(pci.join("msi_irqs").join(i), "msix\n").unwrap();
        }
        std::os::unix::fs::symlink(pci.join("virtio1"), disk.join("device")).unwrap();
        std::fs::create_dir_all(root.join("sys/dev/block")).unwrap();
        std::os::unix::fs::symlink(disk.join("vda1"), root.join("sys/dev/block/254:1")).unwrap();
        std::fs::create_dir_all(root.join("proc/irq/36")).unwrap();
        std::fs::write(root.join("proc/irq/36/effective_affinity_list"), "1\n").unwrap();
        let got = device_irqs_in(root, 254, 1, &parse_interrupts(INTERRUPTS));
        assert_eq!(
            got,
            DeviceIrqs::Irqs {
                disk: "vda".into(),
                irqs: vec![DeviceIrq {
                    irq: 36,
                    name: "virtio1-req.0".into(),
                    cpus: vec![1]
                }]
            }
        );
        assert_eq!(got.describe(), "vda: irq 36 virtio1-req.0 -> CPU 1");
        // A loop device says where its completions run.
        let lp = root.join("sys/devices/virtual/block/loop3");
        std::fs::create_dir_all(&lp).unwrap();
        std::os::unix::fs::symlink(&lp, root.join("sys/dev/block/7:3")).unwrap();
        assert_eq!(
            device_irqs_in(root, 7, 3, &[]).describe(),
            "loop3: loop: completes in the submitting task's context"
        );
        assert!(matches!(
            device_irqs_in(root, 0, 40, &[]),
            DeviceIrqs::Unknown { .. }
        ));
    }

    #[test]
    fn capacities_read_sysfs_and_default_to_equal() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("cpu0")).unwrap();
        std::fs::write(t.path().join("cpu0/cpu_capacity"), "512\n").unwrap();
        assert_eq!(read_capacities(t.path(), &[0, 1]), vec![512, 1024]);
    }

    /// Live: the disk under the current directory (the build's) has its
    /// interrupts found and their CPUs read, where /proc/irq is readable.
    #[test]
    fn the_live_disk_shows_its_interrupts_where_proc_irq_is_readable() {
        if std::fs::read_dir("/proc/irq").is_err() {
            eprintln!("skip: /proc/irq is not readable here");
            return;
        }
        let got = device_irqs(Path::new("."));
        eprintln!("{}", got.describe());
        match got {
            DeviceIrqs::Irqs { irqs, .. } => {
                assert!(!irqs.is_empty());
                let online = online_cpus();
                for i in &irqs {
                    assert!(i.cpus.iter().all(|c| online.contains(c)), "{i:?}");
                }
            }
            DeviceIrqs::NoIrq { .. } => {}
            DeviceIrqs::Unknown { why, .. } => {
                eprintln!("skip: the build directory's device has no readable interrupts: {why}");
            }
        }
    }
}
