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

/// The fscrypt and fs-verity ioctls live in `sys` (raw system calls only
/// there); their old paths under `kernel` stay for callers.
pub use crate::sys::{fscrypt, fsverity};
pub mod cgroup;
mod event;
mod journal;
pub(crate) mod knobs;
pub mod rawtrace;
pub(crate) mod switches;
pub(crate) mod target;
pub mod trace;

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sys::oflag;
use crate::sys::trust;

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
    let block_size = check_input(dir, plaintext)?;
    let root = File::open(dir)?;
    let id = fscrypt::add_key(&root, master_key)?;
    let sub = dir.join(format!("readpath-check-{}", std::process::id()));
    let result = (|| {
        std::fs::create_dir(&sub)?;
        {
            use std::os::unix::fs::OpenOptionsExt;
            // The directory just made, never a link put in its place.
            let d = OpenOptions::new()
                .read(true)
                .custom_flags(oflag::O_NOFOLLOW | oflag::O_DIRECTORY)
                .open(&sub)?;
            fscrypt::set_policy(&d, &fscrypt::PolicyV2::new(mode_of(kind), id))?;
        }
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
        let (units_equal, first_mismatch) = compare_units(device, &extents, plaintext, &cipher)?;
        // Read back cold: the kernel decrypts what it wrote (on its
        // fscrypt_read_queue) into the plaintext again.
        let _ = crate::sys::fadvise_dontneed(&f);
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

/// Refuses plaintext that is not whole data units, and a filesystem whose block is not one; returns the block size.
fn check_input(dir: &Path, plaintext: &[u8]) -> io::Result<u64> {
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
    Ok(block_size)
}

/// Reads each data unit of `extents` from the device and compares it with the plaintext encrypted in userspace: the units equal, and the first that is not.
fn compare_units(
    device: &Path,
    extents: &[fscrypt::Extent],
    plaintext: &[u8],
    cipher: &ContentsCipher,
) -> io::Result<(u64, Option<u64>)> {
    let mut dev = File::open(device)?;
    // A block device's own cache may hold what was there before the
    // filesystem wrote (its bios bypass it): dropped first. An image
    // file is fine either way.
    let _ = crate::sys::fadvise_dontneed(&dev);
    let mut units_equal = 0u64;
    let mut first_mismatch = None;
    let mut want = vec![0u8; DATA_UNIT_SIZE];
    let mut got = vec![0u8; DATA_UNIT_SIZE];
    for e in extents {
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
    Ok((units_equal, first_mismatch))
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

/// Where the state of what readpath changes for the whole system (knobs,
/// the tracefs mount, tracefs instances) is kept: as root
/// [`trust::GLOBAL_STATE_DIR`] (`/run/readpath`), the same for every data
/// dir, so that every readpath sees every other's; otherwise (nothing
/// global can be changed then) `DATA_DIR/kernel`.
pub fn state_dir(data_dir: &Path) -> PathBuf {
    if trust::euid() == 0 {
        PathBuf::from(trust::GLOBAL_STATE_DIR)
    } else {
        data_dir.join("kernel")
    }
}

/// A scratch ext4 image with `encrypt`, loop-mounted under the data dir
/// for a check or a kernel-target run, and everything it changes outside
/// the data dir (the mount, the loop device) put back: on drop, and, after
/// a crash, by the next [`restore`].
///
/// Everything is made where readpath proved it may act
/// ([`trust::ensure_dir`] on `DATA_DIR/kernel`): the mount point is a
/// directory made in this run (a link or anything else in its place is
/// refused), the image is created new or reopened with `O_NOFOLLOW` as the
/// user's regular file, the loop device is attached to that open file
/// (`LOOP_CONFIGURE`, autoclear: it detaches itself when the mount goes or
/// the process dies before mounting), and the mount is made on the
/// directory's own descriptor. While it is mounted the process holds a lock
/// (`kernel/target.lock`), which proves to every other readpath that it is
/// in use; recovery unmounts only readpath's own image (the loop device's
/// backing inode) at readpath's own mount point (in `/proc/self/mountinfo`,
/// every escape decoded).
pub struct ScratchFs {
    dir: PathBuf,
    spec: &'static ScratchSpec,
    /// The image file.
    pub image: PathBuf,
    /// Where it is mounted (the real path, as mountinfo has it).
    pub mnt: PathBuf,
    /// The loop device (`/dev/loopN`).
    pub loop_device: PathBuf,
    mounted: bool,
    /// Held while this exists: the image is in use.
    lock: Option<File>,
}

/// Where a kind of scratch image lives under `DATA_DIR/kernel/`.
#[derive(Debug)]
pub struct ScratchSpec {
    /// The image file's name.
    image: &'static str,
    /// The mount point's name.
    mnt: &'static str,
    /// The state file's name (who has it mounted, for messages).
    state: &'static str,
    /// The lock held while it is mounted.
    lock: &'static str,
    /// Kept after unmounting (its files are reused by the next run).
    keep: bool,
}

/// `kernel check`'s image: made for the check, removed after it.
pub const CHECK_IMAGE: ScratchSpec = ScratchSpec {
    image: "fs.img",
    mnt: "mnt",
    state: "state.json",
    lock: "fs.lock",
    keep: false,
};

/// The kernel target's image: kept between runs (its files are written
/// once per dataset), mounted only while a run uses it.
pub const TARGET_IMAGE: ScratchSpec = ScratchSpec {
    image: "target.img",
    mnt: "target",
    state: "target-state.json",
    lock: "target.lock",
    keep: true,
};

const SCRATCH_SPECS: [&ScratchSpec; 2] = [&CHECK_IMAGE, &TARGET_IMAGE];

/// What a scratch mount's state file says (for messages only: recovery
/// proves what it unmounts from the kernel's own tables).
#[derive(Debug, Serialize, Deserialize)]
struct MountState {
    pid: u32,
}

/// True when `path` is a mount point (its real path in
/// `/proc/self/mountinfo`, every escape decoded).
pub fn is_mount_point(path: &Path) -> bool {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    trust::mount_at(&real).is_some()
}

/// Unmounts `mnt` (never following a link there); `lazy` detaches it now
/// and lets the kernel finish when its last file closes.
fn unmount(mnt: &Path, lazy: bool) -> io::Result<()> {
    crate::sys::unmount(mnt, lazy)
        .map_err(|e| io::Error::new(e.kind(), format!("unmounting {}: {e}", mnt.display())))
}

/// Runs a tool to its end: its stdout, or an error naming the program
/// (it could not start) or the command and its stderr (it failed).
pub fn run_tool(cmd: &mut std::process::Command) -> io::Result<String> {
    let o = cmd.output().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("{:?}: {e}", cmd.get_program().to_string_lossy()),
        )
    })?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "{:?} failed: {}",
            cmd,
            String::from_utf8_lossy(&o.stderr).trim()
        )))
    }
}

/// Records a tracefs instance `path` about to be made by this process, in
/// `STATE_DIR/trace-PID.state` ([`state_dir`]; written under the trust
/// rule, this process proved alive by its lock), for [`restore`] after a
/// crash; returns the state file.
pub(crate) fn record_state(data_dir: &Path, path: &Path) -> io::Result<PathBuf> {
    record_state_as(data_dir, path, "trace")
}

/// [`record_state`] in `STATE_DIR/KIND-PID.state`: `trace` for a
/// [`trace::Tracer`]'s instance `readpath-PID`, `tracecache` for its
/// page-cache counter's `readpath-PID-cache`.
pub(crate) fn record_state_as(data_dir: &Path, path: &Path, kind: &str) -> io::Result<PathBuf> {
    let dir = state_dir(data_dir);
    trust::ensure_dir(&dir)?;
    trust::hold_live(&dir, &format!("data dir {}", data_dir.display()))?;
    let sp = dir.join(format!("{kind}-{}.state", std::process::id()));
    trust::write_state(&sp, format!("{}\n", path.display()).as_bytes())?;
    Ok(sp)
}

/// Removes the tracefs instances that processes now gone left (their
/// state files in `dir`); returns them, and what was refused.
fn restore_traces(dir: &Path, problems: &mut Vec<String>) -> Vec<PathBuf> {
    let mut done = Vec::new();
    // A tracer's instance, or its page-cache counter's.
    let named = |name: &str| {
        [("trace-", ""), ("tracecache-", "-cache")]
            .iter()
            .find_map(|(prefix, suffix)| {
                let pid = name
                    .strip_prefix(prefix)?
                    .strip_suffix(".state")?
                    .parse::<u32>()
                    .ok()?;
                Some((pid, *suffix))
            })
    };
    for (path, (pid, suffix), text) in gone_states(dir, named, problems) {
        let inst = PathBuf::from(text.trim_end_matches('\n'));
        // Only what readpath made: the instance named readpath-PID.
        let want = Path::new(trace::TRACEFS)
            .join("instances")
            .join(format!("readpath-{pid}{suffix}"));
        if inst != want {
            problems.push(refused(
                &path,
                &format!(
                    "names {}, not readpath's instance {}",
                    crate::sys::printable(&inst.display().to_string(), false),
                    want.display()
                ),
            ));
            continue;
        }
        if inst.exists() {
            for ev in trace::EVENTS {
                let _ = std::fs::write(inst.join("events/workqueue").join(ev).join("enable"), "0");
            }
            for ev in trace::BLOCK_EVENTS {
                let _ = std::fs::write(inst.join("events/block").join(ev).join("enable"), "0");
            }
            let _ = std::fs::write(
                inst.join("events/filemap")
                    .join(trace::CACHE_ADD_EVENT)
                    .join("enable"),
                "0",
            );
            match std::fs::remove_dir(&inst) {
                Ok(()) => done.push(inst.clone()),
                Err(err) => {
                    problems.push(format!("removing {}: {err}", inst.display()));
                    continue;
                }
            }
        }
        let _ = trust::remove_state(&path);
    }
    done
}

/// The state files in `dir` of processes now gone: each one whose name
/// `named` recognises (giving its PID and what else the name says), whose
/// PID no live readpath holds (this one included), with its text read
/// under the trust rule. A file that fails the rule is set aside and said
/// in `problems`.
fn gone_states<T>(
    dir: &Path,
    named: impl Fn(&str) -> Option<(u32, T)>,
    problems: &mut Vec<String>,
) -> Vec<(PathBuf, (u32, T), String)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let Some((pid, what)) = named(&e.file_name().to_string_lossy()) else {
            continue;
        };
        if trust::live_owner(dir, pid).is_some() {
            continue;
        }
        match trust::read_state_text(&e.path(), 4096) {
            Ok(Some(t)) => out.push((e.path(), (pid, what), t)),
            Ok(None) => {}
            Err(err) => problems.push(refused(&e.path(), &err.to_string())),
        }
    }
    out
}

/// A refused state file set aside, in words.
fn refused(path: &Path, why: &str) -> String {
    match trust::set_aside(path) {
        Ok(to) => format!("{why}; kept as {} and not acted on", to.display()),
        Err(e) => format!("{why}; not acted on (setting it aside failed: {e})"),
    }
}

/// What a recovery put back, and what it refused or could not do.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Restored {
    /// One line per thing put back.
    pub done: Vec<String>,
    /// One line per thing refused (set aside) or left, with why.
    pub problems: Vec<String>,
}

/// Puts back everything readpath processes now gone left (a crash, a kill
/// -9), whatever goes wrong on the way: the knobs ([`knobs::restore_left`],
/// in [`state_dir`] and, from older readpaths, in `DATA_DIR/kernel`), the
/// tracefs instances, the scratch mounts and the tracefs mount. Each
/// problem is reported and the rest goes on; a refused state file is set
/// aside as `.refused`.
pub fn restore_all(data_dir: &Path) -> Restored {
    let mut r = Restored::default();
    let (sd, kdir) = trusted_dirs(data_dir, &mut r.problems);
    // Knob state lives in the state dir; older readpaths left it in
    // `DATA_DIR/kernel`.
    let legacy = kdir.as_ref().filter(|k| sd.as_ref() != Some(*k));
    for d in sd.iter().chain(legacy) {
        match knobs::restore_left(d) {
            Ok(done) => r.done.extend(
                done.into_iter()
                    .map(|(key, path, v)| format!("{key} = {v} ({})", path.display())),
            ),
            Err(e) => r.problems.push(e.to_string()),
        }
    }
    let done = restore_in(sd.as_deref(), kdir.as_deref(), &mut r.problems);
    r.done
        .extend(done.into_iter().map(|p| p.display().to_string()));
    r
}

/// Puts back what an earlier [`ScratchFs`] or [`trace::Tracer`] left (a
/// crash, a kill -9): readpath's own images at its own mount points
/// unmounted, the tracefs instances of processes now gone removed, tracefs
/// unmounted where a gone readpath mounted it and nothing uses it. Returns
/// what it put back; an error lists what it refused or could not do (after
/// doing all the rest).
pub fn restore(data_dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut problems = Vec::new();
    let (sd, kdir) = trusted_dirs(data_dir, &mut problems);
    let done = restore_in(sd.as_deref(), kdir.as_deref(), &mut problems);
    if problems.is_empty() {
        Ok(done)
    } else {
        Err(io::Error::other(problems.join("; ")))
    }
}

/// The state dir ([`state_dir`]) and `DATA_DIR/kernel`, each when it
/// exists and passes the trust rule (a problem noted, once, when one does
/// not).
fn trusted_dirs(data_dir: &Path, problems: &mut Vec<String>) -> (Option<PathBuf>, Option<PathBuf>) {
    let mut trusted = |dir: PathBuf| {
        std::fs::symlink_metadata(&dir).ok()?;
        match trust::check_dir(&dir) {
            Ok(()) => Some(dir),
            Err(e) => {
                problems.push(e.to_string());
                None
            }
        }
    };
    let (sd, kdir) = (state_dir(data_dir), data_dir.join("kernel"));
    if sd == kdir {
        let t = trusted(sd);
        (t.clone(), t)
    } else {
        (trusted(sd), trusted(kdir))
    }
}

/// Recovery in the trusted state dir `sd` (stale liveness locks, tracefs
/// instances, the tracefs mount) and `kdir` (the scratch mounts).
fn restore_in(sd: Option<&Path>, kdir: Option<&Path>, problems: &mut Vec<String>) -> Vec<PathBuf> {
    let mut done = Vec::new();
    if let Some(sd) = sd {
        trust::sweep_live(sd);
        done.extend(restore_traces(sd, problems));
        done.extend(cgroup::restore_gone(sd, problems));
    }
    if let Some(kdir) = kdir {
        for spec in SCRATCH_SPECS {
            // Held by a live readpath (this one included): in use.
            let Ok(_lock) = trust::lock_exclusive(&kdir.join(spec.lock), Duration::ZERO) else {
                continue;
            };
            match restore_mount(kdir, spec) {
                Ok(Some(m)) => done.push(m),
                Ok(None) => {}
                Err(e) => problems.push(e.to_string()),
            }
        }
    }
    if let Some(sd) = sd {
        done.extend(restore_tracefs(sd, problems));
    }
    done
}

/// With `spec`'s lock held: unmounts `spec`'s image if it is mounted at
/// its mount point (proved: the mount at that exact path is ext4 on a loop
/// device whose backing file is this image's inode), removes the image
/// unless kept, the state, and the empty mount point. Anything else
/// mounted there is left alone and reported.
fn restore_mount(kdir: &Path, spec: &ScratchSpec) -> io::Result<Option<PathBuf>> {
    let real = std::fs::canonicalize(kdir)?;
    let mnt = real.join(spec.mnt);
    let image = real.join(spec.image);
    let mut done = None;
    if let Some(m) = trust::mount_at(&mnt) {
        if !mount_is_image(&m, &image) {
            return Err(io::Error::other(format!(
                "{} is mounted at {} (ext4? {}), which is not readpath's image {}: left alone",
                crate::sys::printable(&m.source.display().to_string(), false),
                mnt.display(),
                m.fstype,
                image.display()
            )));
        }
        unmount(&mnt, false)?;
        done = Some(mnt.clone());
    }
    if !spec.keep {
        let _ = std::fs::remove_file(&image);
    }
    let _ = trust::remove_state(&real.join(spec.state));
    // Only an empty directory goes (rmdir never follows a link).
    let _ = std::fs::remove_dir(&mnt);
    Ok(done)
}

/// Whether mount `m` is ext4 on a loop device backed by the inode of
/// `image` (the user's regular file).
fn mount_is_image(m: &trust::MountEntry, image: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if m.fstype != "ext4" {
        return false;
    }
    let Some(n) = m
        .source
        .to_str()
        .and_then(|s| s.strip_prefix("/dev/loop"))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    else {
        return false;
    };
    let Ok(img) = trust::open_own_file(image, oflag::O_RDONLY).and_then(|f| f.metadata()) else {
        return false;
    };
    crate::sys::loopdev::backing(&format!("/dev/loop{n}"))
        .is_some_and(|(dev, ino)| dev == img.dev() && ino == img.ino())
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
        if trust::euid() != 0 {
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
        let kdir = data_dir.join("kernel");
        trust::ensure_dir(&kdir)?;
        let dir = std::fs::canonicalize(&kdir)?;
        let sp = dir.join(spec.state);
        let lock = match trust::lock_exclusive(&dir.join(spec.lock), Duration::ZERO) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let who = trust::read_state_text(&sp, 4096)
                    .ok()
                    .flatten()
                    .and_then(|t| serde_json::from_str::<MountState>(&t).ok())
                    .map_or(String::new(), |s| format!(" (PID {})", s.pid));
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "another readpath{who} has {} mounted; wait for it, or set kernel.dir to a directory of your own",
                        dir.join(spec.mnt).display()
                    ),
                ));
            }
            Err(e) => return Err(e),
        };
        // What a crash left of this image goes first.
        restore_mount(&dir, spec)?;
        let image = dir.join(spec.image);
        let mnt = dir.join(spec.mnt);
        fresh_mount_point(&mnt)?;
        let reuse = spec.keep
            && trust::open_own_file(&image, oflag::O_RDONLY)
                .and_then(|f| f.metadata())
                .is_ok_and(|m| m.len() >= bytes);
        if !reuse {
            ScratchFs::make_image(&image, bytes)?;
        }
        trust::write_state(
            &sp,
            serde_json::to_string(&MountState {
                pid: std::process::id(),
            })
            .map_err(io::Error::other)?
            .as_bytes(),
        )?;
        let mut s = ScratchFs {
            dir,
            spec,
            image,
            mnt,
            loop_device: PathBuf::new(),
            mounted: false,
            lock: Some(lock),
        };
        match s.mount() {
            Ok(()) => {}
            Err(e) if !reuse => return Err(e),
            Err(_) => {
                // A kept image that no longer mounts (a crash while it was
                // made): made anew.
                ScratchFs::make_image(&s.image, bytes)?;
                s.mount()?;
            }
        }
        Ok(s)
    }

    /// Attaches the image (opened with `O_NOFOLLOW`, the user's regular
    /// file) to a loop device and mounts it on the mount point's own
    /// descriptor; checks the kernel's table shows it there.
    fn mount(&mut self) -> io::Result<()> {
        let img = trust::open_own_file(&self.image, oflag::O_RDWR)?;
        let (dev, path) = crate::sys::loopdev::attach(&img, self.image.as_os_str().as_bytes())?;
        drop(img);
        let at = trust::open_dir_nofollow(&self.mnt)?;
        let target = format!("/proc/self/fd/{}", at.as_raw_fd());
        let rc = crate::sys::mount(&path, Path::new(&target), "ext4", true);
        if let Err(e) = rc {
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "mounting {} ({}) at {}: {e}",
                    self.image.display(),
                    path.display(),
                    self.mnt.display()
                ),
            ));
        }
        self.mounted = true;
        self.loop_device = path;
        // The mount holds the loop device now; closing ours lets autoclear
        // detach it when the mount goes.
        drop(dev);
        drop(at);
        match trust::mount_at(&self.mnt) {
            Some(m) if m.source == self.loop_device => Ok(()),
            _ => Err(io::Error::other(format!(
                "{} is not in /proc/self/mountinfo at {} after mounting it",
                self.loop_device.display(),
                self.mnt.display()
            ))),
        }
    }

    fn make_image(image: &Path, bytes: u64) -> io::Result<()> {
        // The name itself goes (a link is removed, not followed); the new
        // file is created new, the user's, mode 0600.
        match std::fs::remove_file(image) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("removing the old {}: {e}", image.display()),
                ));
            }
            _ => {}
        }
        let f = trust::create_new(image, 0o600)?;
        f.set_len(bytes)?;
        drop(f);
        let features = if ext4_has_verity() {
            "encrypt,verity"
        } else {
            "encrypt"
        };
        run_tool(
            std::process::Command::new("mkfs.ext4")
                .args(["-q", "-F", "-b", "4096", "-O", features])
                .arg(image),
        )
        .map(|_| ())
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

    /// What a crash leaves, for tests: the mount stays and the lock goes
    /// (as when the process dies).
    #[doc(hidden)]
    pub fn crash(mut self) {
        self.lock = None;
        self.mounted = false;
        std::mem::forget(self);
    }

    fn cleanup(&mut self) -> io::Result<()> {
        if self.mounted {
            // A file still closing (a reader's last reference) makes the
            // mount busy for a moment: tried for 2 s, then detached lazily
            // (the kernel unmounts it when the last file closes).
            let mut tries = 0;
            while let Err(e) = unmount(&self.mnt, false) {
                tries += 1;
                if tries == 40 {
                    unmount(&self.mnt, true)
                        .map_err(|l| io::Error::other(format!("{e}; lazily: {l}")))?;
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            self.mounted = false;
        }
        if !self.spec.keep {
            let _ = std::fs::remove_file(&self.image);
        }
        let _ = std::fs::remove_dir(&self.mnt);
        let _ = trust::remove_state(&self.dir.join(self.spec.state));
        self.lock = None;
        Ok(())
    }
}

/// Makes `mnt` a directory made in this run: an empty directory left
/// there (by an earlier run) is removed first; a link, a file, a non-empty
/// directory or a mount is refused, naming it.
fn fresh_mount_point(mnt: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::symlink_metadata(mnt) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
        Ok(m) if m.file_type().is_dir() => {
            if trust::mount_at(mnt).is_some() {
                return Err(io::Error::other(format!(
                    "{}: something readpath did not mount is mounted there; unmount it first",
                    mnt.display()
                )));
            }
            std::fs::remove_dir(mnt).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "{}: readpath leaves it empty and it is not ({e}); look at it and remove it",
                        mnt.display()
                    ),
                )
            })?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: is not a directory readpath made (a symbolic link or a file); remove it",
                    mnt.display()
                ),
            ));
        }
    }
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(mnt)
        .map_err(|e| io::Error::new(e.kind(), format!("making {}: {e}", mnt.display())))
}

/// tracefs, mounted by readpath because it was not: unmounted on drop, or
/// after a crash by the next [`restore`] (recorded in
/// `STATE_DIR/tracefs.json` with the PID before the mount and the mount's
/// ID after it).
pub struct TracefsMount {
    state: PathBuf,
    id: u64,
}

const TRACEFS_STATE: &str = "tracefs.json";

#[derive(Debug, Serialize, Deserialize)]
struct TracefsState {
    pid: u32,
    /// The mount's ID in /proc/self/mountinfo (0 before it is made).
    mount_id: u64,
}

/// Mounts tracefs at [`trace::TRACEFS`] when it is not mounted (as root),
/// returning the guard that unmounts it; None when it already was.
pub fn ensure_tracefs(data_dir: &Path) -> io::Result<Option<TracefsMount>> {
    let tracefs = Path::new(trace::TRACEFS);
    if tracefs.join("events").exists() {
        return Ok(None);
    }
    if trust::euid() != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "tracefs is not mounted at {} and mounting it needs root (mount -t tracefs nodev {})",
                trace::TRACEFS,
                trace::TRACEFS
            ),
        ));
    }
    let dir = state_dir(data_dir);
    trust::ensure_dir(&dir)?;
    trust::hold_live(&dir, &format!("data dir {}", data_dir.display()))?;
    let state = dir.join(TRACEFS_STATE);
    let write = |id: u64| {
        trust::write_state(
            &state,
            serde_json::to_string(&TracefsState {
                pid: std::process::id(),
                mount_id: id,
            })
            .map_err(io::Error::other)?
            .as_bytes(),
        )
    };
    write(0)?;
    if let Err(e) = crate::sys::mount(Path::new("nodev"), tracefs, "tracefs", false) {
        let _ = trust::remove_state(&state);
        return Err(io::Error::new(
            e.kind(),
            format!("mounting tracefs at {}: {e}", trace::TRACEFS),
        ));
    }
    let id = trust::mount_at(tracefs).map_or(0, |m| m.id);
    write(id)?;
    Ok(Some(TracefsMount { state, id }))
}

impl Drop for TracefsMount {
    fn drop(&mut self) {
        let tracefs = Path::new(trace::TRACEFS);
        let ours = trust::mount_at(tracefs).is_some_and(|m| m.id == self.id);
        // Another readpath's (or tool's) instance in it: left mounted, and
        // the state kept, for whoever ends last ([`restore_tracefs`]).
        if ours && tracefs_in_use(tracefs) {
            return;
        }
        if !ours || unmount(tracefs, false).is_ok() {
            let _ = trust::remove_state(&self.state);
        }
    }
}

/// Whether a tracefs instance is left in the tracefs at `tracefs`
/// (another readpath's, or another tool's): then it is in use.
fn tracefs_in_use(tracefs: &Path) -> bool {
    std::fs::read_dir(tracefs.join("instances")).is_ok_and(|rd| rd.count() > 0)
}

/// Unmounts tracefs where a readpath now gone mounted it: only the very
/// mount it recorded (its ID), only when no tracefs instance is left in it
/// (nothing else uses it) and it unmounts without force.
fn restore_tracefs(dir: &Path, problems: &mut Vec<String>) -> Vec<PathBuf> {
    let state = dir.join(TRACEFS_STATE);
    let st = match trust::read_state_text(&state, 4096) {
        Ok(None) => return Vec::new(),
        Ok(Some(t)) => match serde_json::from_str::<TracefsState>(&t) {
            Ok(s) => s,
            Err(e) => {
                problems.push(refused(&state, &format!("{}: {e}", state.display())));
                return Vec::new();
            }
        },
        Err(e) => {
            problems.push(refused(&state, &e.to_string()));
            return Vec::new();
        }
    };
    if trust::live_owner(dir, st.pid).is_some() {
        return Vec::new();
    }
    let tracefs = Path::new(trace::TRACEFS);
    let mut done = Vec::new();
    match trust::mount_at(tracefs) {
        Some(m) if m.id == st.mount_id && m.fstype == "tracefs" => {
            if tracefs_in_use(tracefs) {
                // Instances of another tool: left mounted, state kept.
                return done;
            }
            if unmount(tracefs, false).is_err() {
                // In use by someone else now: left mounted, state kept.
                return done;
            }
            done.push(tracefs.to_path_buf());
        }
        // Gone, or another mount now: not readpath's to unmount.
        _ => {}
    }
    let _ = trust::remove_state(&state);
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
    Ok(crate::sys::dev_numbers(dev))
}

impl Drop for ScratchFs {
    fn drop(&mut self) {
        let _ = self.cleanup();
    }
}

/// The drivers live in `sys` (the feature probe reads them at startup).
pub use crate::sys::{crypto_driver, parse_crypto_driver};

/// The probe lives in `sys` (the feature probe reads it at startup).
pub use crate::sys::ext4_has_verity;

#[cfg(test)]
mod tests {
    /// `kernel` (the kernel's xts(aes) through AF_ALG) is AES-256-XTS
    /// everywhere a cipher picks a file: the fscrypt policy, the kernel
    /// target's file, the dataset's file and tree.
    #[test]
    fn the_kernel_cipher_is_the_aes_256_xts_contents_mode_everywhere() {
        use super::target::FileKind;
        use crate::crypto::CipherKind::{Aes256Xts, Kernel};
        use crate::dataset::{Variant, tree_file_name};
        assert_eq!(super::mode_of(Kernel), super::fscrypt::MODE_AES_256_XTS);
        for (d, v) in [(true, true), (true, false), (false, true)] {
            assert_eq!(FileKind::of(d, v, Kernel), FileKind::of(d, v, Aes256Xts));
        }
        assert_eq!(Variant::Cipher(Kernel).file_name(), "aes-256-xts.bin");
        assert_eq!(tree_file_name(Variant::Cipher(Kernel)), "aes-256-xts.tree");
        assert_eq!(Kernel.contents_mode(), Aes256Xts.contents_mode());
    }

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
