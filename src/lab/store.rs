//! What the lab keeps on disk for each kernel, and taking it away: every
//! boot of a kernel leaves its guest disk (`disk-NAME.img`, sparse, tens of
//! MiB once used), its initramfs (`initramfs-NAME-KEY.cpio`, one per
//! readpath binary) and its console log beside the kernel itself, and every
//! distinct `vm:/path` booted is imported as a kernel of its own
//! (`img-HASH`). Without a way to see and remove them they pile up:
//! `readpath lab kernels` shows each kernel's share with when it was last
//! booted, and `readpath lab remove NAME...` (or `--imports`) takes a
//! kernel away with everything keyed by its name, never one a running
//! guest boots.
//!
//! Only names the lab itself makes are matched, exactly (`6.1` never takes
//! `6.1-revert-fsverity-2023`'s files), in the lab directory that passed
//! the trust rule; a file is unlinked by its name (a link is removed, not
//! followed), and the kernel's directory is first renamed out of the
//! kernels (so a half-removed kernel is never there under its name).

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::kernels::{self, lab_dir};
use crate::sys::trust;

/// The prefix of the kernels `vm:/path` imports (`img-` and 12 hex digits).
pub const IMPORT_PREFIX: &str = "img-";

/// What one lab kernel holds on disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// Its directory (`kernels/NAME/`: the image, modules, kernel.toml),
    /// bytes allocated.
    pub kernel_bytes: u64,
    /// Its guest disk, bytes allocated (the image is sparse).
    pub disk_bytes: u64,
    /// Its initramfs archives, bytes.
    pub initramfs_bytes: u64,
    /// Console log, accelerator probe, slowdown measurements.
    pub other_bytes: u64,
    /// When a guest of it last booted (its console log or disk written).
    pub last_used: Option<SystemTime>,
}

impl Usage {
    /// Everything, bytes.
    pub fn total(&self) -> u64 {
        self.kernel_bytes + self.disk_bytes + self.initramfs_bytes + self.other_bytes
    }
}

/// Whether `file` (a name in the lab directory) is one the lab keeps for
/// kernel `name`, and whether it is what records a boot (a disk or a
/// console log, whose time is the last boot's). Exact forms only: a
/// kernel's name may be the start of another's.
fn belongs(file: &str, name: &str) -> Option<(Part, bool)> {
    if file == format!("disk-{name}.img") {
        return Some((Part::Disk, true));
    }
    if let Some(rest) = file.strip_prefix(&format!("console-{name}.log")) {
        // The log, and any older copy of it (`.1`, `.old`).
        if rest.is_empty() || (rest.starts_with('.') && !rest[1..].contains(['.', '-'])) {
            return Some((Part::Other, true));
        }
    }
    if file == format!("accel-{name}") {
        return Some((Part::Other, false));
    }
    if let Some(accel) = file
        .strip_prefix(&format!("slowdown-{name}-"))
        .and_then(|r| r.strip_suffix(".toml"))
        && matches!(accel, "kvm" | "tcg")
    {
        return Some((Part::Other, false));
    }
    if let Some(key) = file
        .strip_prefix(&format!("initramfs-{name}-"))
        .and_then(|r| r.strip_suffix(".cpio"))
        && key.len() == 16
        && key.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Some((Part::Initramfs, false));
    }
    None
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Disk,
    Initramfs,
    Other,
}

/// Bytes a file takes on disk (blocks allocated; a sparse disk is what it
/// holds, not its size).
fn allocated(m: &std::fs::Metadata) -> u64 {
    m.blocks().saturating_mul(512)
}

/// Bytes allocated under `dir`, links not followed.
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(m) = std::fs::symlink_metadata(dir) else {
        return 0;
    };
    if !m.is_dir() {
        return allocated(&m);
    }
    let mut n = allocated(&m);
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            n = n.saturating_add(tree_bytes(&e.path()));
        }
    }
    n
}

/// The lab's files for kernel `name` (beside its directory), each with
/// its part.
fn files_of(data: &Path, name: &str) -> Vec<(PathBuf, Part, bool)> {
    let Ok(rd) = std::fs::read_dir(lab_dir(data)) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, Part, bool)> = rd
        .flatten()
        .filter_map(|e| {
            let f = e.file_name();
            let (part, boot) = belongs(f.to_str()?, name)?;
            Some((e.path(), part, boot))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// What kernel `name` holds on disk in data dir `data`.
pub fn usage(data: &Path, name: &str) -> Usage {
    let mut u = Usage {
        kernel_bytes: tree_bytes(&lab_dir(data).join("kernels").join(name)),
        ..Usage::default()
    };
    for (path, part, boot) in files_of(data, name) {
        let Ok(m) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let b = allocated(&m);
        match part {
            Part::Disk => u.disk_bytes += b,
            Part::Initramfs => u.initramfs_bytes += b,
            Part::Other => u.other_bytes += b,
        }
        if boot && let Ok(t) = m.modified() {
            u.last_used = Some(u.last_used.map_or(t, |l| l.max(t)));
        }
    }
    u
}

/// Why kernel `name` cannot be removed now: a guest readpath started
/// boots it (its PIDs).
fn in_use(data: &Path, name: &str) -> Vec<u32> {
    let dir = lab_dir(data).join("kernels").join(name);
    let dir = dir.canonicalize().unwrap_or(dir);
    super::vm::running_guests(data)
        .into_iter()
        .filter(|g| g.kernel.starts_with(&dir))
        .map(|g| g.pid)
        .collect()
}

/// Removes lab kernel `name` and every file the lab keeps for it; the
/// bytes freed. Refused (nothing removed) for a name that is not a lab
/// kernel's, a kernel not in the lab, or one a running guest boots.
pub fn remove(data: &Path, name: &str) -> io::Result<u64> {
    kernels::check_name(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let lab = lab_dir(data);
    trust::check_dir(&lab)?;
    let dir = lab.join("kernels").join(name);
    let m = match std::fs::symlink_metadata(&dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no lab kernel {name:?} in {} (`readpath lab kernels` lists them)",
                    lab.display()
                ),
            ));
        }
        Err(e) => return Err(e),
    };
    if !m.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a directory, left alone", dir.display()),
        ));
    }
    let pids = in_use(data, name);
    if !pids.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!(
                "lab kernel {name:?} boots a running guest (QEMU {}): end it first",
                pids.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let u = usage(data, name);
    // Out of the kernels first, under a name no kernel can have: a
    // kernel is there whole or not at all.
    let gone = lab
        .join("kernels")
        .join(format!(".removing-{name}-{}", std::process::id()));
    std::fs::rename(&dir, &gone)?;
    // std's remove_dir_all never follows a link out of the tree.
    std::fs::remove_dir_all(&gone)?;
    for (path, _, _) in files_of(data, name) {
        trust::remove_state(&path)?;
    }
    Ok(u.total())
}

/// How long ago `t` was, in the largest whole unit (`3 d`, `5 h`,
/// `12 min`, `now`).
pub fn ago(t: SystemTime) -> String {
    let s = SystemTime::now()
        .duration_since(t)
        .map_or(0, |d| d.as_secs());
    match s {
        0..60 => "now".into(),
        60..3600 => format!("{} min ago", s / 60),
        3600..86400 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_lab_s_own_names_of_a_kernel_belong_to_it() {
        let yes = [
            ("disk-6.1.img", Part::Disk),
            ("console-6.1.log", Part::Other),
            ("console-6.1.log.1", Part::Other),
            ("accel-6.1", Part::Other),
            ("slowdown-6.1-tcg.toml", Part::Other),
            ("initramfs-6.1-0123456789abcdef.cpio", Part::Initramfs),
        ];
        for (f, part) in yes {
            assert_eq!(belongs(f, "6.1").map(|b| b.0), Some(part), "{f}");
        }
        // Another kernel's whose name starts with this one's.
        for f in [
            "disk-6.1-revert-fsverity-2023.img",
            "console-6.1-revert-fsverity-2023.log",
            "console-6.1-revert.log",
            "accel-6.1-revert-fsverity-2023",
            "slowdown-6.1-revert-fsverity-2023-tcg.toml",
            "initramfs-6.1-revert-fsverity-2023-0123456789abcdef.cpio",
            "initramfs-6.1-0123456789abcdeg.cpio",
            "kernels",
            "guests",
        ] {
            assert_eq!(belongs(f, "6.1"), None, "{f}");
        }
    }

    #[test]
    fn remove_takes_the_kernel_and_its_files_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let data = d.path();
        let lab = lab_dir(data);
        for k in ["6.1", "6.1-revert-fsverity-2023"] {
            trust::ensure_dir(&lab.join("kernels").join(k)).unwrap();
            std::fs::write(lab.join("kernels").join(k).join("vmlinuz"), [1u8; 5000]).unwrap();
            std::fs::write(lab.join(format!("disk-{k}.img")), [2u8; 9000]).unwrap();
            std::fs::write(lab.join(format!("console-{k}.log")), b"boot").unwrap();
            std::fs::write(
                lab.join(format!("initramfs-{k}-0123456789abcdef.cpio")),
                [3u8; 100],
            )
            .unwrap();
        }
        // A link where a file of it goes: removed, its target kept.
        let outside = d.path().join("outside.txt");
        std::fs::write(&outside, b"keep").unwrap();
        std::os::unix::fs::symlink(&outside, lab.join("accel-6.1")).unwrap();
        let u = usage(data, "6.1");
        assert!(u.kernel_bytes >= 5000 && u.disk_bytes >= 9000, "{u:?}");
        assert!(u.last_used.is_some());
        let freed = remove(data, "6.1").unwrap();
        assert_eq!(freed, u.total());
        assert!(!lab.join("kernels/6.1").exists());
        for f in ["disk-6.1.img", "console-6.1.log", "accel-6.1"] {
            assert!(std::fs::symlink_metadata(lab.join(f)).is_err(), "{f}");
        }
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        let other = "6.1-revert-fsverity-2023";
        assert!(lab.join("kernels").join(other).join("vmlinuz").exists());
        assert!(lab.join(format!("disk-{other}.img")).exists());
        assert!(
            lab.join(format!("initramfs-{other}-0123456789abcdef.cpio"))
                .exists()
        );
        // Not there, not a name: refused, nothing touched.
        assert_eq!(
            remove(data, "6.1").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(remove(data, "../kernels").is_err());
        assert!(lab.join("kernels").join(other).exists());
    }
}
