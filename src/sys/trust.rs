//! The one trust rule for every path readpath acts on, written once.
//!
//! readpath runs as root to turn kernel knobs, mount images and trace
//! workqueues, and it keeps the state that lets it undo those after a
//! crash in files. Whoever can write those files, or any directory above
//! them, could make root act on their behalf, so every path readpath acts
//! on passes the rule here, and nothing else in the crate opens state:
//!
//! - a directory readpath uses (the data dir, `kernel/`, `kernel.dir`,
//!   `/run/readpath`) and every directory above it must be owned by the
//!   invoking user (the effective UID) or root, and writable by no one else
//!   (group write only by the user's own group; a sticky, root-owned
//!   directory such as `/tmp` may sit above it, never be it). A symbolic
//!   link is never followed into one: the chain is checked component by
//!   component with `lstat` after the path is made canonical. Otherwise
//!   [`Untrusted`] says which directory, who owns it and how to fix it;
//! - a state file is opened with `O_NOFOLLOW | O_NONBLOCK` (a FIFO cannot
//!   block the open, a link is refused), must be a regular file owned by
//!   the user with one link, and is read up to a cap ([`read_state`]);
//! - a state file is written to a create-new temporary with a random name
//!   in the same directory (`O_EXCL | O_NOFOLLOW`, mode 0600), synced, then
//!   renamed over the old one ([`write_state`]); a refused one is set aside
//!   as `NAME.refused` ([`set_aside`]), never deleted or acted on;
//! - whether the process that wrote a state file is alive is proved by a
//!   lock it holds (`live-PID.lock`, `flock`), not by a PID that may have
//!   been reused or forged ([`hold_live`], [`live_owner`]).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where root keeps the state of what it changed for the whole system
/// (kernel knobs, the tracefs mount, tracefs instances): outside any data
/// dir, so that every readpath sees every other's, whatever its data dir;
/// on a tmpfs, so it lives exactly as long as the changes it describes.
pub const GLOBAL_STATE_DIR: &str = "/run/readpath";

/// The most bytes a state file may hold.
pub const STATE_CAP: u64 = 64 << 10;

/// A directory that fails the trust rule: which one and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    /// The directory (or file) refused.
    pub path: PathBuf,
    /// Why, in words ("owned by uid 65534 (nobody)").
    pub why: String,
}

impl std::fmt::Display for Untrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let me = user_name(euid());
        let owners = if euid() == 0 {
            "root".to_string()
        } else {
            format!("{me} or root")
        };
        write!(
            f,
            "{}: {}; readpath, running as {me}, acts only on directories owned by {owners} and writable by no one else (fix: `chown {me} {}` and `chmod go-w {}`, or choose a directory of your own)",
            super::printable(&self.path.display().to_string(), false),
            self.why,
            shell_word(&self.path),
            shell_word(&self.path),
        )
    }
}

impl std::error::Error for Untrusted {}

impl From<Untrusted> for io::Error {
    fn from(u: Untrusted) -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, u.to_string())
    }
}

/// The effective user ID.
pub fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

fn egid() -> u32 {
    // SAFETY: getegid takes no arguments and cannot fail.
    unsafe { libc::getegid() }
}

/// `uid`'s login name from /etc/passwd, or `uid N`.
pub fn user_name(uid: u32) -> String {
    let found = fs::read_to_string("/etc/passwd").ok().and_then(|t| {
        t.lines().find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            f.next()?;
            (f.next()?.parse::<u32>().ok()? == uid).then(|| name.to_string())
        })
    });
    found.unwrap_or_else(|| format!("uid {uid}"))
}

fn shell_word(p: &Path) -> String {
    let s = p.display().to_string();
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
    {
        s
    } else {
        format!("'{}'", super::printable(&s, false).replace('\'', "'\\''"))
    }
}

/// Checks one existing directory's `lstat` answer; `above` when it is an
/// ancestor of the directory readpath uses (a sticky, root-owned one may
/// be writable by all).
fn dir_ok(path: &Path, m: &fs::Metadata, above: bool) -> Result<(), Untrusted> {
    let refuse = |why: String| {
        Err(Untrusted {
            path: path.to_path_buf(),
            why,
        })
    };
    let ft = m.file_type();
    if ft.is_symlink() {
        return refuse("is a symbolic link (changed while it was checked)".into());
    }
    if !ft.is_dir() {
        return refuse("is not a directory".into());
    }
    let (uid, mode) = (m.uid(), m.mode());
    if uid != euid() && uid != 0 {
        return refuse(format!("is owned by {} (uid {uid})", user_name(uid)));
    }
    let sticky_root = mode & libc::S_ISVTX != 0 && uid == 0;
    if mode & 0o002 != 0 && !(above && sticky_root) {
        return refuse(format!(
            "is writable by every user (mode {:o})",
            mode & 0o7777
        ));
    }
    if mode & 0o020 != 0 && m.gid() != egid() && !(above && sticky_root) {
        return refuse(format!(
            "is writable by group {} (mode {:o})",
            m.gid(),
            mode & 0o7777
        ));
    }
    Ok(())
}

/// The deepest existing directory at or above `path` (`path` itself when
/// it exists), and whether it is `path`.
fn existing_part(path: &Path) -> (PathBuf, bool) {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let mut p = abs.as_path();
    let mut is_path = true;
    loop {
        if fs::symlink_metadata(p).is_ok() {
            return (p.to_path_buf(), is_path);
        }
        match p.parent() {
            Some(q) => p = q,
            None => return (PathBuf::from("/"), false),
        }
        is_path = false;
    }
}

/// Checks the trust rule for directory `path` (which need not exist yet:
/// then its nearest existing ancestor and everything above it): every
/// directory from `/` down is owned by the user or root and writable by no
/// one else. Links above it are resolved first (`/var/run` -> `/run`),
/// then every component of the real path is checked without following one.
pub fn check_dir(path: &Path) -> Result<(), Untrusted> {
    let (existing, is_path) = existing_part(path);
    check_chain(&existing, is_path)
}

/// Checks every directory of existing `dir`'s real path; `last_is_target`
/// when `dir` is the one readpath uses (not just above it).
fn check_chain(dir: &Path, last_is_target: bool) -> Result<(), Untrusted> {
    let real = fs::canonicalize(dir).map_err(|e| Untrusted {
        path: dir.to_path_buf(),
        why: format!("cannot be resolved: {e}"),
    })?;
    let mut cur = PathBuf::new();
    let comps: Vec<Component> = real.components().collect();
    for (i, c) in comps.iter().enumerate() {
        cur.push(c.as_os_str());
        let m = fs::symlink_metadata(&cur).map_err(|e| Untrusted {
            path: cur.clone(),
            why: format!("cannot be checked: {e}"),
        })?;
        let last = i + 1 == comps.len();
        dir_ok(&cur, &m, !(last && last_is_target))?;
    }
    Ok(())
}

/// Makes directory `path` (mode 0700, and any missing parents the same
/// way) or checks the one there: everything above it must pass
/// [`check_dir`], and `path` itself is never followed (a link there is
/// refused, not resolved). On success the whole chain is the user's (or
/// root's) and writable by no one else.
pub fn ensure_dir(path: &Path) -> io::Result<()> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if path.parent().is_some() {
        if fs::symlink_metadata(parent).is_err() {
            ensure_dir(parent)?;
        } else {
            check_chain(parent, false)?;
        }
    }
    match fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("making {}: {e}", path.display()),
            ));
        }
    }
    let m = fs::symlink_metadata(path)?;
    dir_ok(path, &m, false)?;
    Ok(())
}

/// Opens directory `path` itself (`O_PATH | O_NOFOLLOW | O_DIRECTORY`): a
/// link there fails. Its `/proc/self/fd/N` names exactly that directory.
pub fn open_dir_nofollow(path: &Path) -> io::Result<File> {
    let c = super::c_path(path)?;
    // SAFETY: `c` is a valid NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "{}: {e} (a directory, not a link, is needed)",
                path.display()
            ),
        ));
    }
    // SAFETY: `fd` is a new descriptor we own.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Opens `path` with `flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
/// O_NOCTTY` and checks it is a regular file owned by the user with one
/// link; the descriptor is blocking again when it is returned. A link, a
/// FIFO, a device, a directory or another user's file is refused with
/// `InvalidData`, naming what it is.
pub fn open_own_file(path: &Path, flags: libc::c_int) -> io::Result<File> {
    let c = super::c_path(path)?;
    // SAFETY: `c` is a valid NUL-terminated path; open returns a new
    // descriptor or -1.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ELOOP) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: is a symbolic link, refused", path.display()),
            ));
        }
        return Err(e);
    }
    // SAFETY: `fd` is a descriptor we own from here on.
    let f = unsafe { File::from_raw_fd(fd) };
    let m = f.metadata()?;
    let what = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {why}, refused", path.display()),
        )
    };
    if !m.file_type().is_file() {
        return Err(what(format!(
            "is not a regular file ({})",
            kind_of(&m.file_type())
        )));
    }
    if m.uid() != euid() {
        return Err(what(format!(
            "is owned by {} (uid {}), not by {}",
            user_name(m.uid()),
            m.uid(),
            user_name(euid())
        )));
    }
    if m.nlink() != 1 {
        return Err(what(format!("has {} hard links", m.nlink())));
    }
    super::set_nonblocking(fd, false)?;
    Ok(f)
}

fn kind_of(t: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a plain file"
    }
}

/// Reads state file `path` (at most `cap` bytes) under the rule: None when
/// it does not exist; an `InvalidData` error when it is not the user's
/// regular file (a file of a kernel pseudo-filesystem is not one) or is
/// larger than `cap`.
pub fn read_state(path: &Path, cap: u64) -> io::Result<Option<Vec<u8>>> {
    let f = match open_own_file(path, libc::O_RDONLY) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if let Some(fs) = super::pseudo_fs_of(&f) {
        // One mounted over it: a kernel interface, whose read may block
        // where no stop signal ends it (`/proc/kmsg`), is no state.
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: is a file of {fs}, a kernel interface, refused",
                path.display()
            ),
        ));
    }
    let mut buf = Vec::new();
    f.take(cap + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: over {cap} bytes, no readpath state file, refused",
                path.display()
            ),
        ));
    }
    Ok(Some(buf))
}

/// [`read_state`] as UTF-8 text.
pub fn read_state_text(path: &Path, cap: u64) -> io::Result<Option<String>> {
    match read_state(path, cap)? {
        None => Ok(None),
        Some(b) => String::from_utf8(b).map(Some).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not UTF-8 text, refused", path.display()),
            )
        }),
    }
}

/// 16 random hex digits (getrandom; the clock and PID if it fails).
fn random_hex() -> String {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most b.len() bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        b = (t ^ u64::from(std::process::id()).rotate_left(40)).to_le_bytes();
    }
    hex::encode(b)
}

/// Creates `path` new (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode `mode`):
/// whatever was there, a link included, makes it fail with AlreadyExists.
pub fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .read(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Replaces state file `path` with `bytes`: written to a create-new
/// temporary with a random name beside it (mode 0600), synced, renamed over
/// `path` (a link there is replaced, never followed), the directory synced.
pub fn write_state(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", random_hex()));
    let written = (|| {
        let mut f = create_new(&tmp, 0o600)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io::Error::new(
            e.kind(),
            format!("writing {}: {e}", path.display()),
        ));
    }
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Removes state file `path` (the name itself: a link is removed, not
/// followed); a missing one is fine.
pub fn remove_state(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Sets a refused state file aside as `NAME.refused` (replacing an older
/// one) and returns the new name: kept to be looked at, never acted on.
pub fn set_aside(path: &Path) -> io::Result<PathBuf> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".refused");
    let to = path.with_file_name(name);
    fs::rename(path, &to)?;
    Ok(to)
}

/// The lock files this process holds, by directory (kept open, so locked,
/// until the process ends).
static LIVE: Mutex<Option<HashMap<PathBuf, File>>> = Mutex::new(None);

fn live_name(pid: u32) -> String {
    format!("live-{pid}.lock")
}

/// Proves this process alive to every other readpath that reads state in
/// `dir`: `dir/live-PID.lock`, holding `note` (the data dir, for their
/// messages), locked with `flock` until this process ends, whatever way it
/// ends. Idempotent. `dir` must already have passed [`ensure_dir`].
pub fn hold_live(dir: &Path, note: &str) -> io::Result<()> {
    let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    let map = live.get_or_insert_with(HashMap::new);
    if map.contains_key(dir) {
        return Ok(());
    }
    let path = dir.join(live_name(std::process::id()));
    // One left by a gone process with this PID is ours to replace.
    let _ = fs::remove_file(&path);
    let mut f = create_new(&path, 0o600)
        .map_err(|e| io::Error::new(e.kind(), format!("making {}: {e}", path.display())))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let note: String = note
        .chars()
        .filter(|c| !c.is_control())
        .take(1024)
        .collect();
    f.write_all(note.as_bytes())?;
    map.insert(dir.to_path_buf(), f);
    Ok(())
}

/// Whether the readpath that wrote state as `pid` in `dir` is alive: this
/// process, or one holding the lock of `dir/live-PID.lock` (what it noted,
/// its data dir, is returned). A PID with no such lock held is gone,
/// however alive the PID is (reused, or named in a forged file).
pub fn live_owner(dir: &Path, pid: u32) -> Option<String> {
    if pid == std::process::id() {
        return Some(String::new());
    }
    let path = dir.join(live_name(pid));
    let f = open_own_file(&path, libc::O_RDONLY).ok()?;
    // SAFETY: flock on a descriptor we own.
    let free = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0;
    if free {
        // Gone: its lock file is stale.
        let _ = fs::remove_file(&path);
        return None;
    }
    let mut note = String::new();
    let _ = (&f).take(1024).read_to_string(&mut note);
    Some(note)
}

/// Removes the lock files in `dir` of readpaths that are gone (what a
/// process leaves when it ends: its lock is released, the file stays).
pub fn sweep_live(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        if let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("live-")?.strip_suffix(".lock"))
            .and_then(|p| p.parse::<u32>().ok())
        {
            // Gone ones' files are removed by the asking.
            let _ = live_owner(dir, pid);
        }
    }
}

/// An exclusive `flock` on `path` (created if missing, the user's regular
/// file), waited for at most `limit`, and given up at once on a stop
/// signal; released when the returned file is dropped. For short critical
/// sections between readpath processes.
pub fn lock_exclusive(path: &Path, limit: Duration) -> io::Result<File> {
    match create_new(path, 0o600) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let f = open_own_file(path, libc::O_RDWR)?;
    let start = Instant::now();
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(f);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(e);
        }
        if start.elapsed() >= limit || super::stop_requested() {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "{} stayed locked by another readpath for {:.1} s",
                    path.display(),
                    limit.as_secs_f64()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Decodes the octal escapes the kernel writes in `/proc/self/mountinfo`
/// fields (`\040` space, `\011` tab, `\012` newline, `\134` backslash, and
/// any other `\ooo`) into the path's bytes.
pub fn decode_mountinfo(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            if v <= 255 {
                out.push(v as u8);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// One line of `/proc/self/mountinfo`: the mount's ID, where it is mounted
/// and what (every escape decoded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// The mount ID (field 1).
    pub id: u64,
    /// The mount point (field 5), decoded.
    pub point: PathBuf,
    /// The filesystem type.
    pub fstype: String,
    /// The source (`/dev/loop3`), decoded.
    pub source: PathBuf,
}

/// Parses the text of `/proc/self/mountinfo`.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    use std::os::unix::ffi::OsStringExt;
    let path = |f: &str| PathBuf::from(std::ffi::OsString::from_vec(decode_mountinfo(f)));
    text.lines()
        .filter_map(|l| {
            let (head, tail) = l.split_once(" - ")?;
            let mut h = head.split(' ');
            let id = h.next()?.parse().ok()?;
            let point = path(h.nth(3)?);
            let mut t = tail.split(' ');
            let fstype = t.next()?.to_string();
            let source = path(t.next()?);
            Some(MountEntry {
                id,
                point,
                fstype,
                source,
            })
        })
        .collect()
}

/// The mounts of this process's mount namespace (read with a cap).
pub fn mounts() -> Vec<MountEntry> {
    let mut text = String::new();
    if let Ok(f) = File::open("/proc/self/mountinfo") {
        let _ = f.take(16 << 20).read_to_string(&mut text);
    }
    parse_mountinfo(&text)
}

/// The topmost mount at `point` (exact path), if any.
pub fn mount_at(point: &Path) -> Option<MountEntry> {
    mounts().into_iter().rev().find(|m| m.point == point)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn mountinfo_escapes_are_decoded_every_one() {
        assert_eq!(
            decode_mountinfo(r"/a\040b\011c\012d\134e"),
            b"/a b\tc\nd\\e"
        );
        // Not an escape: left as written.
        assert_eq!(decode_mountinfo(r"/x\09"), br"/x\09");
        assert_eq!(decode_mountinfo(r"/x\"), br"/x\");
        let text = "36 25 7:3 / /tmp/d\\011x\\012y/kernel/target rw,nosuid - ext4 /dev/loop3 rw\n\
                    40 22 0:12 / /sys/kernel/tracing rw - tracefs nodev rw\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].id, 36);
        assert_eq!(m[0].point, Path::new("/tmp/d\tx\ny/kernel/target"));
        assert_eq!(m[0].fstype, "ext4");
        assert_eq!(m[0].source, Path::new("/dev/loop3"));
        assert_eq!(m[1].fstype, "tracefs");
    }

    #[test]
    fn directories_others_may_write_are_refused_and_sticky_tmp_above_is_not() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("d");
        // Missing: its parents are checked (/tmp is sticky, root's).
        assert_eq!(check_dir(&d), Ok(()));
        ensure_dir(&d.join("kernel")).unwrap();
        assert_eq!(
            fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
        chmod(&d, 0o777);
        let e = check_dir(&d.join("kernel")).unwrap_err();
        assert_eq!(e.path, d);
        assert!(e.why.contains("writable by every user"), "{e}");
        assert!(ensure_dir(&d.join("kernel")).is_err());
        // Sticky and world-writable: fine above, never as the directory.
        chmod(&d, 0o1777);
        let e = check_dir(&d).unwrap_err();
        assert!(e.why.contains("writable by every user"), "{e}");
        if euid() == 0 {
            assert_eq!(check_dir(&d.join("kernel")), Ok(()));
        }
        chmod(&d, 0o700);
        if euid() == 0 {
            std::os::unix::fs::chown(&d, Some(65534), None).unwrap();
            let e = check_dir(&d.join("kernel")).unwrap_err();
            assert!(e.why.contains("owned by") && e.why.contains("65534"), "{e}");
            assert!(e.to_string().contains("chown root"), "{e}");
        }
    }

    #[test]
    fn a_link_where_a_directory_goes_is_refused_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let elsewhere = t.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, t.path().join("kernel")).unwrap();
        let e = ensure_dir(&t.path().join("kernel")).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
        // A directory the user names (a data dir) may be reached through a
        // link: it is resolved, and the real one checked.
        std::os::unix::fs::symlink(&elsewhere, t.path().join("data")).unwrap();
        ensure_dir(&t.path().join("data/kernel")).unwrap();
        assert!(elsewhere.join("kernel").is_dir());
        assert!(open_dir_nofollow(&t.path().join("kernel")).is_err());
        assert!(open_dir_nofollow(&elsewhere).is_ok());
    }

    #[test]
    fn state_files_are_the_users_regular_files_read_with_a_cap() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("s.json");
        assert_eq!(read_state(&p, 10).unwrap(), None);
        write_state(&p, b"hello").unwrap();
        assert_eq!(read_state(&p, 10).unwrap().unwrap(), b"hello");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let e = read_state(&p, 4).unwrap_err();
        assert!(e.to_string().contains("over 4 bytes"), "{e}");
        // A link (to /dev/zero), a FIFO, a directory: refused at once.
        let z = t.path().join("z");
        std::os::unix::fs::symlink("/dev/zero", &z).unwrap();
        assert!(
            read_state(&z, 10)
                .unwrap_err()
                .to_string()
                .contains("symbolic link")
        );
        let f = t.path().join("f");
        crate::sys::make_fifo(&f, 0o600).unwrap();
        assert!(read_state(&f, 10).unwrap_err().to_string().contains("FIFO"));
        assert!(
            read_state(t.path(), 10)
                .unwrap_err()
                .to_string()
                .contains("directory")
        );
        // A hard link is not the user's own single file.
        fs::hard_link(&p, t.path().join("h")).unwrap();
        assert!(
            read_state(&p, 10)
                .unwrap_err()
                .to_string()
                .contains("hard links")
        );
        // Writing replaces a link, never follows it.
        let canary = t.path().join("canary");
        fs::write(&canary, "canary").unwrap();
        let l = t.path().join("l.json");
        std::os::unix::fs::symlink(&canary, &l).unwrap();
        write_state(&l, b"new").unwrap();
        assert_eq!(fs::read_to_string(&canary).unwrap(), "canary");
        assert!(!fs::symlink_metadata(&l).unwrap().file_type().is_symlink());
        let aside = set_aside(&l).unwrap();
        assert!(aside.ends_with("l.json.refused"));
        assert!(create_new(&aside, 0o600).is_err());
    }

    #[test]
    fn only_a_held_lock_proves_a_process_alive() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        // PID 1 is alive, but holds no readpath lock.
        assert_eq!(live_owner(d, 1), None);
        fs::write(d.join("live-77.lock"), "data dir /x").unwrap();
        assert_eq!(live_owner(d, 77), None);
        assert!(!d.join("live-77.lock").exists(), "a stale lock file goes");
        fs::write(d.join("live-78.lock"), "data dir /y").unwrap();
        let f = File::open(d.join("live-78.lock")).unwrap();
        // SAFETY: flock on a descriptor we own.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0);
        assert_eq!(live_owner(d, 78).as_deref(), Some("data dir /y"));
        drop(f);
        assert_eq!(live_owner(d, 78), None);
        hold_live(d, "data dir /me").unwrap();
        assert!(live_owner(d, std::process::id()).is_some());
        fs::write(d.join("live-79.lock"), "").unwrap();
        sweep_live(d);
        assert!(!d.join("live-79.lock").exists());
        assert!(d.join(format!("live-{}.lock", std::process::id())).exists());
        // A short lock is exclusive and bounded.
        let a = lock_exclusive(&d.join("k.lock"), Duration::ZERO).unwrap();
        let e = lock_exclusive(&d.join("k.lock"), Duration::from_millis(30)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        drop(a);
        lock_exclusive(&d.join("k.lock"), Duration::ZERO).unwrap();
    }

    #[test]
    fn a_kernel_interface_is_no_state_file() {
        // Root's, one link, regular: a state file but for where it is.
        if euid() != 0 {
            return;
        }
        let e = read_state(Path::new("/proc/self/status"), STATE_CAP).unwrap_err();
        assert!(e.to_string().contains("is a file of procfs"), "{e}");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}
