//! readpath held against the real kernel: the same plaintext through the
//! kernel's own fscrypt, and the bytes it wrote compared with readpath's.
//!
//! The model's decryption is only worth its figures if it is the kernel's:
//! [`check_contents`] adds the dataset's master key to a filesystem with the
//! `encrypt` feature, sets a v2 policy on a fresh directory, writes the
//! plaintext through the kernel, asks for the file's nonce and its extents,
//! reads the ciphertext the kernel put on the device, and compares it bit
//! for bit with readpath's encryption of the same plaintext under the key
//! derived from that nonce. It touches nothing but the directory it makes
//! (removed with its file, and the key removed, before it returns).

pub mod fscrypt;
pub mod fsverity;
pub mod knobs;
pub mod target;
pub mod trace;

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::crypto::{CipherKind, ContentsCipher, DATA_UNIT_SIZE};

/// What [`check_contents`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct ContentsCheck {
    /// Plaintext bytes written.
    pub bytes: u64,
    /// The file's extents.
    pub extents: usize,
    /// Its nonce (hex).
    pub nonce: String,
    /// Data units compared and equal.
    pub units_equal: u64,
    /// The first data unit that differed, if any.
    pub first_mismatch: Option<u64>,
    /// The filesystem's block size (the data unit size).
    pub block_size: u64,
    /// The file read back cold through the kernel (its page cache dropped:
    /// every page read from the image and decrypted by the kernel's
    /// fscrypt_read_queue) equals the plaintext.
    pub read_back: bool,
    /// Seconds the cold read-back took.
    pub read_back_s: f64,
}

impl ContentsCheck {
    /// True when every data unit matched.
    pub fn matched(&self) -> bool {
        self.first_mismatch.is_none()
            && self.units_equal * DATA_UNIT_SIZE as u64 == self.bytes
            && self.read_back
    }
}

/// The fscrypt mode of a contents cipher (software AES is AES-256-XTS).
fn mode_of(kind: CipherKind) -> u8 {
    match kind {
        CipherKind::Adiantum => fscrypt::MODE_ADIANTUM,
        _ => fscrypt::MODE_AES_256_XTS,
    }
}

/// Writes `plaintext` (a whole number of 4 KiB data units) into a new
/// encrypted file under `dir` (on a filesystem with `encrypt`, block size
/// 4096, whose device or image is `device`) with `master_key` and `kind`,
/// and compares what the kernel wrote on `device` with readpath's own
/// encryption. Needs the permissions the ioctls need (root here).
pub fn check_contents(
    dir: &Path,
    device: &Path,
    master_key: &[u8],
    plaintext: &[u8],
    kind: CipherKind,
) -> io::Result<ContentsCheck> {
    if plaintext.is_empty() || !plaintext.len().is_multiple_of(DATA_UNIT_SIZE) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} bytes of plaintext: allowed a non-zero multiple of {DATA_UNIT_SIZE}",
                plaintext.len()
            ),
        ));
    }
    let block_size = crate::sys::fs_block_size(dir)?;
    if block_size != DATA_UNIT_SIZE as u64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: block size {block_size}: readpath's data unit is {DATA_UNIT_SIZE} (mkfs.ext4 -b 4096)",
                dir.display()
            ),
        ));
    }
    let root = File::open(dir)?;
    let id = fscrypt::add_key(&root, master_key)?;
    let sub = dir.join(format!("readpath-check-{}", std::process::id()));
    let result = (|| {
        std::fs::create_dir(&sub)?;
        fscrypt::set_policy(
            &File::open(&sub)?,
            &fscrypt::PolicyV2::new(mode_of(kind), id),
        )?;
        let path = sub.join("data");
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        f.write_all(plaintext)?;
        f.sync_all()?;
        let nonce = fscrypt::nonce(&f)?;
        let extents = fscrypt::extents(&f)?;
        let mut key = vec![0u8; kind.key_size()];
        crate::crypto::derive_file_key(master_key, &nonce, &mut key);
        let cipher = ContentsCipher::new(kind, &key).map_err(io::Error::other)?;
        key.fill(0);
        let mut dev = File::open(device)?;
        // A block device's own cache may hold what was there before the
        // filesystem wrote (its bios bypass it): dropped first. An image
        // file is fine either way.
        // SAFETY: posix_fadvise on an open fd has no memory effects.
        unsafe { libc::posix_fadvise(dev.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let mut units_equal = 0u64;
        let mut first_mismatch = None;
        let mut want = vec![0u8; DATA_UNIT_SIZE];
        let mut got = vec![0u8; DATA_UNIT_SIZE];
        for e in &extents {
            for off in (0..e.length).step_by(DATA_UNIT_SIZE) {
                let logical = e.logical + off;
                if logical >= plaintext.len() as u64 {
                    break;
                }
                let unit = logical / DATA_UNIT_SIZE as u64;
                let l = logical as usize;
                want.copy_from_slice(&plaintext[l..l + DATA_UNIT_SIZE]);
                cipher.encrypt_units(unit, DATA_UNIT_SIZE, &mut want);
                dev.seek(SeekFrom::Start(e.physical + off))?;
                dev.read_exact(&mut got)?;
                if got == want {
                    units_equal += 1;
                } else if first_mismatch.is_none() {
                    first_mismatch = Some(unit);
                }
            }
        }
        // Read back cold: the kernel decrypts what it wrote (on its
        // fscrypt_read_queue) into the plaintext again.
        // SAFETY: posix_fadvise on an open fd has no memory effects.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let mut back = Vec::with_capacity(plaintext.len());
        let t0 = std::time::Instant::now();
        File::open(&path)?.read_to_end(&mut back)?;
        let read_back_s = t0.elapsed().as_secs_f64();
        let read_back = back == plaintext;
        drop(f);
        std::fs::remove_file(&path)?;
        Ok(ContentsCheck {
            read_back,
            read_back_s,
            bytes: plaintext.len() as u64,
            extents: extents.len(),
            nonce: hex::encode(nonce),
            units_equal,
            first_mismatch,
            block_size,
        })
    })();
    let _ = std::fs::remove_dir(&sub);
    let _ = fscrypt::remove_key(&root, id);
    result
}

/// Writes `plaintext` into a new file under `dir` (ext4 with `verity`),
/// enables fs-verity on it with SHA-256, 4 KiB blocks and `salt`, and
/// returns the digest the kernel measured (`FS_IOC_MEASURE_VERITY`): to be
/// held against readpath's `digest` of the same bytes. The file is
/// removed before it returns.
pub fn measure_verity(dir: &Path, plaintext: &[u8], salt: &[u8]) -> io::Result<Vec<u8>> {
    let path = dir.join(format!("readpath-verity-{}", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        f.write_all(plaintext)?;
        f.sync_all()?;
        drop(f);
        let ro = File::open(&path)?;
        fsverity::enable(&ro, DATA_UNIT_SIZE as u32, salt)?;
        fsverity::measure(&ro)
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// A scratch ext4 image with `encrypt`, loop-mounted under the data dir
/// for a check or a kernel-target run, and everything it changes outside
/// the data dir (the mount, the loop device) put back: on drop, and, after
/// a crash, by the next [`restore`] (the mount is recorded, with the PID
/// that made it, in a state file under `DATA_DIR/kernel/` before it is
/// made).
pub struct ScratchFs {
    dir: std::path::PathBuf,
    spec: &'static ScratchSpec,
    /// The image file.
    pub image: std::path::PathBuf,
    /// Where it is mounted.
    pub mnt: std::path::PathBuf,
    mounted: bool,
}

/// Where a kind of scratch image lives under `DATA_DIR/kernel/`.
#[derive(Debug)]
pub struct ScratchSpec {
    /// The image file's name.
    image: &'static str,
    /// The mount point's name.
    mnt: &'static str,
    /// The state file's name.
    state: &'static str,
    /// Kept after unmounting (its files are reused by the next run).
    keep: bool,
}

/// `kernel check`'s image: made for the check, removed after it.
pub const CHECK_IMAGE: ScratchSpec = ScratchSpec {
    image: "fs.img",
    mnt: "mnt",
    state: "state.json",
    keep: false,
};

/// The kernel target's image: kept between runs (its files are written
/// once per dataset), mounted only while a run uses it.
pub const TARGET_IMAGE: ScratchSpec = ScratchSpec {
    image: "target.img",
    mnt: "target",
    state: "target-state.json",
    keep: true,
};

const SCRATCH_SPECS: [&ScratchSpec; 2] = [&CHECK_IMAGE, &TARGET_IMAGE];

/// True when process `pid` is alive (and not this one).
fn other_live_pid(pid: i32) -> bool {
    pid != std::process::id() as i32 && Path::new(&format!("/proc/{pid}")).exists()
}

/// True when `path` is a mount point (in `/proc/self/mountinfo`).
pub fn is_mount_point(path: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = path.to_string_lossy();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|m| m.replace("\\040", " ") == want)
}

fn run(cmd: &mut std::process::Command) -> io::Result<()> {
    let o = cmd.output().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("{:?}: {e}", cmd.get_program().to_string_lossy()),
        )
    })?;
    if o.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{:?} failed: {}",
            cmd,
            String::from_utf8_lossy(&o.stderr).trim()
        )))
    }
}

/// Records a tracefs instance `path` about to be made by this process, in
/// `DATA_DIR/kernel/trace-PID.state` (synced), for [`restore`] after a
/// crash; returns the state file.
pub(crate) fn record_state(data_dir: &Path, path: &Path) -> io::Result<std::path::PathBuf> {
    let dir = data_dir.join("kernel");
    std::fs::create_dir_all(&dir)?;
    let sp = dir.join(format!("trace-{}.state", std::process::id()));
    let tmp = sp.with_extension("tmp");
    std::fs::write(&tmp, format!("{}\n", path.display()))?;
    File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, &sp)?;
    Ok(sp)
}

/// Removes the tracefs instances that processes now gone left (their
/// state files under `DATA_DIR/kernel/`); returns them.
fn restore_traces(data_dir: &Path) -> Vec<std::path::PathBuf> {
    let mut done = Vec::new();
    let Ok(rd) = std::fs::read_dir(data_dir.join("kernel")) else {
        return done;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("trace-")
            .and_then(|r| r.strip_suffix(".state"))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // A live process (this one included) still owns its instance.
        if pid == std::process::id() as i32 || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        let inst = std::path::PathBuf::from(text.trim());
        // Only what readpath made: an instance named readpath-PID.
        let ours = inst.parent() == Some(&Path::new(trace::TRACEFS).join("instances"))
            && inst
                .file_name()
                .is_some_and(|n| n.to_string_lossy() == format!("readpath-{pid}"));
        if ours && inst.exists() {
            for ev in trace::EVENTS {
                let _ = std::fs::write(inst.join("events/workqueue").join(ev).join("enable"), "0");
            }
            for ev in trace::BLOCK_EVENTS {
                let _ = std::fs::write(inst.join("events/block").join(ev).join("enable"), "0");
            }
            if std::fs::remove_dir(&inst).is_ok() {
                done.push(inst);
            }
        }
        if !ours || !Path::new(text.trim()).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
    done
}

/// Puts back what an earlier [`ScratchFs`] or [`trace::Tracer`] left (a
/// crash, a kill -9): unmounts each mount its state file lists that is
/// still mounted and removes the state and the image, and removes the
/// tracefs instances of processes now gone. Returns what it put back.
pub fn restore(data_dir: &Path) -> io::Result<Vec<std::path::PathBuf>> {
    let mut done = restore_traces(data_dir);
    done.extend(restore_mounts(data_dir)?);
    done.extend(restore_tracefs(data_dir));
    Ok(done)
}

fn restore_mounts(data_dir: &Path) -> io::Result<Vec<std::path::PathBuf>> {
    let mut done = Vec::new();
    let kdir = data_dir.join("kernel");
    for spec in SCRATCH_SPECS {
        let sp = kdir.join(spec.state);
        let Ok(text) = std::fs::read_to_string(&sp) else {
            continue;
        };
        let mut live = false;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            // "PID<TAB>mount point"; a bare mount point is from an older
            // readpath, whose process is gone.
            let (pid, path) = match line.split_once('\t') {
                Some((p, m)) => (p.trim().parse::<i32>().ok(), m),
                None => (None, line),
            };
            if pid.is_some_and(other_live_pid) {
                live = true;
                continue;
            }
            let mnt = std::path::PathBuf::from(path.trim());
            // Only what readpath made: a mount point inside its data dir.
            if !mnt.starts_with(&kdir) {
                continue;
            }
            if is_mount_point(&mnt) {
                run(std::process::Command::new("umount").arg(&mnt))?;
                done.push(mnt);
            }
        }
        if live {
            continue;
        }
        if !spec.keep {
            let _ = std::fs::remove_file(kdir.join(spec.image));
        }
        std::fs::remove_file(&sp)?;
    }
    Ok(done)
}

impl ScratchFs {
    /// Makes a `bytes` ext4 image with `encrypt` (block size 4096) under
    /// `DATA_DIR/kernel/` and loop-mounts it there (`kernel check`'s
    /// image). Needs root, a loop device and mkfs.ext4; the error says
    /// which is missing.
    pub fn create(data_dir: &Path, bytes: u64) -> io::Result<ScratchFs> {
        ScratchFs::mount_spec(data_dir, &CHECK_IMAGE, bytes)
    }

    /// Mounts the image of `spec` (at least `bytes`, with `encrypt`, and
    /// `verity` where this kernel's ext4 has it): a kept image is reused
    /// when it is big enough and mounts; otherwise it is made anew.
    pub fn mount_spec(
        data_dir: &Path,
        spec: &'static ScratchSpec,
        bytes: u64,
    ) -> io::Result<ScratchFs> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "making and loop-mounting an ext4 image needs root",
            ));
        }
        if !Path::new("/dev/loop-control").exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no loop devices (/dev/loop-control is missing; modprobe loop)",
            ));
        }
        restore(data_dir)?;
        let dir = data_dir.join("kernel");
        std::fs::create_dir_all(&dir)?;
        let sp = dir.join(spec.state);
        if let Ok(text) = std::fs::read_to_string(&sp)
            && let Some(pid) = text
                .lines()
                .find_map(|l| l.split_once('\t')?.0.trim().parse::<i32>().ok())
            && other_live_pid(pid)
        {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "another readpath (PID {pid}) has {} mounted; wait for it, or set kernel.dir to a directory of your own",
                    dir.join(spec.mnt).display()
                ),
            ));
        }
        let image = dir.join(spec.image);
        let mnt = dir.join(spec.mnt);
        std::fs::create_dir_all(&mnt)?;
        let reuse = spec.keep && std::fs::metadata(&image).is_ok_and(|m| m.len() >= bytes);
        if !reuse {
            ScratchFs::make_image(&image, bytes)?;
        }
        // Recorded before it is made: a crash leaves it for `restore`.
        let tmp = sp.with_extension("tmp");
        std::fs::write(&tmp, format!("{}\t{}\n", std::process::id(), mnt.display()))?;
        File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, &sp)?;
        let mut s = ScratchFs {
            dir,
            spec,
            image,
            mnt,
            mounted: false,
        };
        // `-o loop` attaches with autoclear: unmounting detaches it.
        let mount = |s: &ScratchFs| {
            run(std::process::Command::new("mount")
                .args(["-o", "loop,nodev,nosuid,noexec"])
                .arg(&s.image)
                .arg(&s.mnt))
        };
        if let Err(e) = mount(&s) {
            if !reuse {
                return Err(e);
            }
            // A kept image that no longer mounts (a crash while it was
            // made): made anew.
            ScratchFs::make_image(&s.image, bytes)?;
            mount(&s)?;
        }
        s.mounted = true;
        Ok(s)
    }

    fn make_image(image: &Path, bytes: u64) -> io::Result<()> {
        let _ = std::fs::remove_file(image);
        let f = File::create(image)?;
        f.set_len(bytes)?;
        drop(f);
        let features = if ext4_has_verity() {
            "encrypt,verity"
        } else {
            "encrypt"
        };
        run(std::process::Command::new("mkfs.ext4")
            .args(["-q", "-F", "-b", "4096", "-O", features])
            .arg(image))
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{e} (mkfs.ext4 is in Debian's e2fsprogs)"),
            )
        })
    }

    /// Unmounts and removes the image (unless kept) and the state.
    pub fn remove(mut self) -> io::Result<()> {
        self.cleanup()
    }

    fn cleanup(&mut self) -> io::Result<()> {
        if self.mounted {
            // A file still closing (a reader's last reference) makes the
            // mount busy for a moment: tried for 2 s, then detached lazily
            // (the kernel unmounts it when the last file closes).
            let mut tries = 0;
            while let Err(e) = run(std::process::Command::new("umount").arg(&self.mnt)) {
                tries += 1;
                if tries == 40 {
                    run(std::process::Command::new("umount")
                        .arg("-l")
                        .arg(&self.mnt))
                    .map_err(|l| io::Error::other(format!("{e}; lazily: {l}")))?;
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            self.mounted = false;
        }
        if !self.spec.keep {
            let _ = std::fs::remove_file(&self.image);
        }
        let _ = std::fs::remove_dir(&self.mnt);
        let _ = std::fs::remove_file(self.dir.join(self.spec.state));
        Ok(())
    }
}

/// tracefs, mounted by readpath because it was not: unmounted on drop, or
/// after a crash by the next [`restore`] (recorded in
/// `DATA_DIR/kernel/tracefs-state.json`, with the PID, before the mount).
pub struct TracefsMount {
    state: std::path::PathBuf,
}

const TRACEFS_STATE: &str = "tracefs-state.json";

/// Mounts tracefs at [`trace::TRACEFS`] when it is not mounted (as root),
/// returning the guard that unmounts it; None when it already was.
pub fn ensure_tracefs(data_dir: &Path) -> io::Result<Option<TracefsMount>> {
    let tracefs = Path::new(trace::TRACEFS);
    if tracefs.join("events").exists() {
        return Ok(None);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "tracefs is not mounted at {} and mounting it needs root (mount -t tracefs nodev {})",
                trace::TRACEFS,
                trace::TRACEFS
            ),
        ));
    }
    let dir = data_dir.join("kernel");
    std::fs::create_dir_all(&dir)?;
    let state = dir.join(TRACEFS_STATE);
    let tmp = state.with_extension("tmp");
    std::fs::write(
        &tmp,
        format!("{}\t{}\n", std::process::id(), trace::TRACEFS),
    )?;
    File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, &state)?;
    if let Err(e) = run(std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev"])
        .arg(tracefs))
    {
        let _ = std::fs::remove_file(&state);
        return Err(e);
    }
    Ok(Some(TracefsMount { state }))
}

impl Drop for TracefsMount {
    fn drop(&mut self) {
        let tracefs = Path::new(trace::TRACEFS);
        if !is_mount_point(tracefs)
            || run(std::process::Command::new("umount").arg(tracefs)).is_ok()
        {
            let _ = std::fs::remove_file(&self.state);
        }
    }
}

/// Unmounts tracefs where a readpath now gone mounted it.
fn restore_tracefs(data_dir: &Path) -> Vec<std::path::PathBuf> {
    let state = data_dir.join("kernel").join(TRACEFS_STATE);
    let Ok(text) = std::fs::read_to_string(&state) else {
        return Vec::new();
    };
    let pid = text
        .split('\t')
        .next()
        .and_then(|p| p.trim().parse::<i32>().ok());
    if pid.is_some_and(other_live_pid) || pid == Some(std::process::id() as i32) {
        return Vec::new();
    }
    let tracefs = Path::new(trace::TRACEFS);
    let mut done = Vec::new();
    if is_mount_point(tracefs) {
        if run(std::process::Command::new("umount").arg(tracefs)).is_err() {
            // In use by someone else now: left mounted, and the state kept.
            return done;
        }
        done.push(tracefs.to_path_buf());
    }
    let _ = std::fs::remove_file(&state);
    done
}

/// The device node of the block device holding `path`: `/dev/NAME` from
/// `/sys/dev/block/MAJ:MIN/uevent` (a partition's own node, whose offsets
/// are the filesystem's). Errors for a filesystem without one (tmpfs).
pub fn block_device_path(path: &Path) -> io::Result<std::path::PathBuf> {
    let (major, minor) = device_of(path)?;
    let uevent = format!("/sys/dev/block/{major}:{minor}/uevent");
    let text = std::fs::read_to_string(&uevent).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("no block device under it (device {major}:{minor}, {uevent}: {e})"),
        )
    })?;
    let name = text
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .filter(|n| !n.is_empty() && !n.contains(".."))
        .ok_or_else(|| io::Error::other(format!("{uevent} names no DEVNAME")))?;
    Ok(Path::new("/dev").join(name))
}

/// The block device (major, minor) of the filesystem holding `path`.
pub fn device_of(path: &Path) -> io::Result<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path)?.dev();
    Ok((libc::major(dev), libc::minor(dev)))
}

impl Drop for ScratchFs {
    fn drop(&mut self) {
        let _ = self.cleanup();
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_highest_priority_driver_is_the_one_fscrypt_gets() {
        let text = "name         : xts(aes)\ndriver       : xts(ecb(aes-fixed-time))\nmodule       : kernel\npriority     : 101\n\nname         : xts(aes)\ndriver       : xts-aes-aesni\nmodule       : aesni_intel\npriority     : 401\n\nname         : sha256\ndriver       : sha256-ni\npriority     : 250\n";
        assert_eq!(
            super::parse_crypto_driver(text, "xts(aes)"),
            Some(("xts-aes-aesni".to_string(), 401))
        );
        assert_eq!(
            super::parse_crypto_driver(text, "adiantum(xchacha12,aes)"),
            None
        );
    }
}
