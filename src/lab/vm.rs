//! A lab guest: one of the lab's kernels booted under QEMU with readpath
//! inside, reached through the agent protocol on a virtio serial port (the
//! QEMU process's stdin and stdout), as ssh reaches a server.
//!
//! What a boot needs is made here and kept in the lab directory, keyed by
//! what it is made of, so the second boot reuses it:
//! - the initramfs ([`super::initramfs`]): busybox-static, the kernel's
//!   modules in dependency order, a stripped readpath (the static musl
//!   build where there is one, else this binary with its shared libraries
//!   beside it) and `/init`;
//! - the lab disk (`disk.img`, sparse, 4 GiB): ext4 made with `-O
//!   encrypt,verity -b 4096`, owned by root inside, mounted at `/lab` in
//!   the guest, where readpath keeps its data dir (`/lab/data`) and the
//!   kernel target its image.
//!
//! The initramfs is never trusted by its name: its SHA-256 is checked
//! before each boot. Nothing from outside reaches QEMU's option parser:
//! paths are absolute and canonical, commas doubled, names checked
//! ([`qemu_command`]).
//!
//! QEMU runs as a child that dies with readpath (`PR_SET_PDEATHSIG`),
//! whatever ends readpath, and the guest powers itself off when the agent
//! ends. Each guest is recorded when it starts (`lab/guests/`: its PID,
//! start time, program and kernel), so that `kernel restore` ends only a
//! guest it can prove readpath's ([`orphans`]). The guest's serial
//! console (the kernel's messages and the agent's stderr) goes to
//! `lab/console-KERNEL.log`, kept under [`CONSOLE_CAP`] while the guest
//! writes, and read back only as its last [`CONSOLE_TAIL`] bytes, only
//! where this run made it ([`console_tail`]). KVM is used where
//! `/dev/kvm` opens and `lab.accel` allows it; elsewhere, and on this
//! project's machines (a nested guest stops after the kernel's
//! decompressor), TCG.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::initramfs::{Cpio, GUEST_MODULES, Modules, OPTIONAL_MODULES, init_script, read_module};
use super::kernels::{Kernel, lab_dir};
use crate::sys::trust;

/// How a guest is accelerated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// KVM: near-native speed, where nested virtualisation works.
    Kvm,
    /// QEMU's TCG: emulated; every absolute time is slower by the factor
    /// `bench crypto` measures inside and out.
    Tcg,
}

impl Accel {
    /// `kvm` or `tcg`.
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// A guest to boot.
#[derive(Debug, Clone)]
pub struct VmSpec {
    /// The kernel.
    pub kernel: Kernel,
    /// Virtual CPUs (1..=64).
    pub cpus: u32,
    /// Memory, MiB (256..=65536).
    pub memory_mib: u32,
    /// The lab disk's host cache mode (`none`, `writeback`, ...).
    pub disk_cache: String,
    /// The accelerator.
    pub accel: Accel,
    /// The AES instructions (`aes=off`: without).
    pub aes: bool,
    /// The disk's virtio-blk queues: `None`, one per vCPU (each vCPU
    /// completes its own reads, as on a multi-queue NVMe); `Some(1)`: every
    /// completion on one CPU, as on a phone's single UFS interrupt.
    pub queues: Option<u32>,
}

/// The lab disk's size (sparse: it takes what is written): room for the
/// default 256 MiB dataset (a dataset needs about three times its size:
/// the data, its ciphertext and its Merkle tree), smaller ones a demo or
/// a seed compare made, and the kernel target's copy.
pub const DISK_BYTES: u64 = 4 << 30;

/// Where the guest's readpath keeps its data (on the lab disk).
pub const GUEST_DATA_DIR: &str = "/lab/data";

/// The kernel target's directory in the guest (`kernel.dir`): on the lab
/// disk itself, so the kernel reads through ext4 on virtio-blk, not a loop
/// device.
pub const GUEST_KERNEL_DIR: &str = "/lab/kernel";

/// Whether ELF file `bytes` asks for a program interpreter (`PT_INTERP`):
/// a dynamically linked program. None where it is no 64-bit ELF.
pub fn elf_interp(bytes: &[u8]) -> Option<Option<String>> {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 {
        return None;
    }
    let u64_at = |o: usize| u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?).into();
    let u16_at = |o: usize| -> Option<u16> {
        Some(u16::from_le_bytes(bytes.get(o..o + 2)?.try_into().ok()?))
    };
    let phoff: Option<u64> = u64_at(0x20);
    let phoff = phoff? as usize;
    let phentsize = u16_at(0x36)? as usize;
    let phnum = u16_at(0x38)? as usize;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let p_type = u32::from_le_bytes(bytes.get(ph..ph + 4)?.try_into().ok()?);
        if p_type == 3 {
            let off: u64 = u64_at(ph + 8)?;
            let size: u64 = u64_at(ph + 32)?;
            let s = bytes.get(off as usize..(off + size) as usize)?;
            let s = s.split(|&b| b == 0).next().unwrap_or_default();
            return Some(Some(String::from_utf8_lossy(s).into_owned()));
        }
    }
    Some(None)
}

/// The shared libraries `ldd` says `bin` loads: absolute paths.
fn shared_libraries(bin: &Path) -> io::Result<Vec<PathBuf>> {
    let o = Command::new("ldd").arg(bin).output()?;
    if !o.status.success() {
        return Err(io::Error::other(format!(
            "ldd {}: {}",
            bin.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
            // "/lib64/ld-linux-x86-64.so.2 (0x...)".
            let l = l.trim();
            let path = l
                .split("=>")
                .nth(1)
                .unwrap_or(l)
                .split_whitespace()
                .next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect())
}

/// The binary `READPATH_AGENT_BINARY` names for a target or a guest,
/// where it is set: the file, or why it cannot be used.
pub fn agent_binary_override() -> Option<Result<PathBuf, AgentBinaryError>> {
    let p = PathBuf::from(std::env::var_os("READPATH_AGENT_BINARY")?);
    Some(if p.is_file() {
        Ok(p)
    } else {
        Err(AgentBinaryError::NotAFile { path: p })
    })
}

/// Why no readpath binary can be given to a target or a guest.
#[derive(Debug, thiserror::Error)]
pub enum AgentBinaryError {
    /// `READPATH_AGENT_BINARY` names something that is not a file.
    #[error("READPATH_AGENT_BINARY={}: not a file", path.display())]
    NotAFile {
        /// What it names.
        path: PathBuf,
    },
    /// This binary's own path could not be found.
    #[error("finding this binary: {0}")]
    CurrentExe(#[source] io::Error),
}

/// The readpath a lab guest runs (this machine's architecture):
/// `READPATH_AGENT_BINARY`, else the static musl build beside this one's
/// target dir (`target/x86_64-unknown-linux-musl/release/readpath`: no
/// libraries to carry), else this binary (its libraries go with it).
fn local_binary_for_guest() -> Result<PathBuf, AgentBinaryError> {
    if let Some(chosen) = agent_binary_override() {
        return chosen;
    }
    let exe = std::env::current_exe().map_err(AgentBinaryError::CurrentExe)?;
    let triple = format!("{}-unknown-linux-musl", std::env::consts::ARCH);
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    // target/{release,debug}/readpath, or target/debug/deps/TEST for a
    // test; a musl build older than this binary is another version of the
    // code, not this one's static twin.
    for up in exe.ancestors().skip(1).take(3) {
        let musl = up.join(&triple).join("release").join("readpath");
        if musl.is_file() && mtime(&musl) >= mtime(&exe) {
            return Ok(musl);
        }
    }
    Ok(exe)
}

fn guest_binary() -> io::Result<PathBuf> {
    local_binary_for_guest().map_err(io::Error::other)
}

/// `bin`'s bytes without debug information (`strip -o`), or as they are
/// where strip is missing.
fn stripped(bin: &Path, tmp: &Path) -> io::Result<Vec<u8>> {
    let out = tmp.join("readpath.stripped");
    let ok = Command::new("strip")
        .arg("-o")
        .arg(&out)
        .arg(bin)
        .status()
        .is_ok_and(|s| s.success());
    let bytes = std::fs::read(if ok { &out } else { bin })?;
    let _ = std::fs::remove_file(&out);
    Ok(bytes)
}

/// The busybox-static binary: `/bin/busybox` or `/usr/bin/busybox` when it
/// is statically linked (Debian's busybox-static package), else an error
/// saying what to install.
fn busybox() -> io::Result<Vec<u8>> {
    for p in ["/bin/busybox", "/usr/bin/busybox"] {
        if let Ok(b) = std::fs::read(p)
            && elf_interp(&b) == Some(None)
        {
            return Ok(b);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        "no statically linked busybox (/bin/busybox): install Debian's busybox-static",
    ))
}

/// The SHA-256 of file `path` (the user's regular file, opened without
/// following a link) when it holds at most `cap` bytes; None where it
/// holds more.
fn file_sha256(path: &Path, cap: u64) -> io::Result<Option<[u8; 32]>> {
    use std::io::Read;
    let f = trust::open_own_file(path, 0)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut seen = 0u64;
    let mut r = f.take(cap + 1);
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        seen += n as u64;
        if seen > cap {
            return Ok(None);
        }
        h.update(&buf[..n]);
    }
    Ok(Some(h.finalize().into()))
}

/// Whether the archive at `path` is, byte for byte, the one whose SHA-256
/// is `digest` and length `len`.
fn archive_intact(path: &Path, digest: &[u8; 32], len: u64) -> bool {
    matches!(file_sha256(path, len), Ok(Some(d)) if &d == digest)
}

/// Builds (or reuses) the initramfs for `kernel`: returns its path and
/// whether it was built now. Named by the SHA-256 of everything in it
/// (`initramfs-NAME-KEY.cpio`, KEY its first 16 hex digits), and never
/// trusted by its name: one already there boots only when its whole
/// SHA-256 is the archive's that would be made now, checked right before
/// each boot; another (replaced or damaged under its own name) is made
/// anew, and `say` hears it.
pub fn initramfs(
    lab: &Path,
    kernel: &Kernel,
    say: &mut dyn FnMut(&str),
) -> io::Result<(PathBuf, bool)> {
    // One archive a kernel per process: a start prepares the guest and
    // then boots it (and a lost connection boots it again), and each would
    // otherwise strip and hash the binary anew. What is kept is the
    // archive's digest, checked against the file at each boot.
    type Made = Vec<(PathBuf, PathBuf, [u8; 32], u64)>;
    static MADE: std::sync::Mutex<Made> = std::sync::Mutex::new(Vec::new());
    let kept = MADE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(k, ..)| *k == kernel.dir)
        .cloned();
    if let Some((_, a, digest, len)) = kept {
        if archive_intact(&a, &digest, len) {
            return Ok((a, false));
        }
        say(&format!(
            "initramfs {}: not the archive made for this boot (replaced or damaged: its SHA-256 differs): made anew",
            a.display()
        ));
        MADE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(k, ..)| *k != kernel.dir);
    }
    let tmp = lab.join(format!(".initramfs-{}", std::process::id()));
    trust::ensure_dir(&tmp)?;
    let result = build_initramfs(lab, kernel, &tmp, say);
    let _ = std::fs::remove_dir_all(&tmp);
    result.map(|(a, digest, len, built)| {
        MADE.lock().unwrap_or_else(|e| e.into_inner()).push((
            kernel.dir.clone(),
            a.clone(),
            digest,
            len,
        ));
        (a, built)
    })
}

/// The archive made for `kernel`, written to the lab unless the one
/// there under its key is intact: (path, SHA-256, length, written now).
fn build_initramfs(
    lab: &Path,
    kernel: &Kernel,
    tmp: &Path,
    say: &mut dyn FnMut(&str),
) -> io::Result<(PathBuf, [u8; 32], u64, bool)> {
    let bin = guest_binary()?;
    let bin_bytes = stripped(&bin, tmp)?;
    let mut c = Cpio::new();
    for d in [
        "bin", "sbin", "dev", "proc", "sys", "tmp", "run", "lab", "lib", "lib64", "usr", "etc",
        "mnt",
    ] {
        c.dir(d);
    }
    c.char_dev("dev/console", 0o600, 5, 1);
    c.char_dev("dev/null", 0o666, 1, 3);
    c.file("bin/busybox", 0o755, &busybox()?);
    c.file("bin/readpath", 0o755, &bin_bytes);
    // A dynamically linked readpath takes its libraries along, at the
    // paths its loader and it name.
    if elf_interp(&bin_bytes).flatten().is_some() {
        let mut made = std::collections::HashSet::new();
        for lib in shared_libraries(&bin)? {
            let rel = lib.to_string_lossy().trim_start_matches('/').to_string();
            let mut parent = PathBuf::new();
            for comp in Path::new(&rel)
                .parent()
                .into_iter()
                .flat_map(|p| p.components())
            {
                parent.push(comp);
                let p = parent.to_string_lossy().to_string();
                if made.insert(p.clone()) && !["lib", "lib64", "usr"].contains(&p.as_str()) {
                    c.dir(&p);
                }
            }
            c.file(&rel, 0o755, &std::fs::read(&lib)?);
        }
    }
    let mut loaded = Vec::new();
    if let Some(mods) = kernel.modules() {
        let tree = Modules::read(&mods)?;
        let mut read = |p: &Path| read_module(p);
        let mut wanted = Vec::new();
        for m in GUEST_MODULES {
            let one = tree.load_order(&[m], &mut read);
            match one {
                Ok(_) => wanted.push(*m),
                Err(e) if OPTIONAL_MODULES.contains(m) => say(&format!("left out: {e}")),
                Err(e) => return Err(io::Error::other(format!("{}: {e}", kernel.info.name))),
            }
        }
        let order = tree
            .load_order(&wanted, &mut read)
            .map_err(io::Error::other)?;
        c.dir("lib/modules");
        for (name, path) in order {
            let inside = format!("lib/modules/{name}.ko");
            c.file(&inside, 0o644, &read_module(&path)?);
            loaded.push(format!("/{inside}"));
        }
    }
    let init = init_script(
        &loaded,
        &format!("exec /bin/readpath agent --data-dir={GUEST_DATA_DIR}"),
    );
    c.file("init", 0o755, init.as_bytes());
    let archive = c.finish();
    let digest: [u8; 32] = Sha256::digest(&archive).into();
    let len = archive.len() as u64;
    let key = hex::encode(&digest[..8]);
    let path = lab.join(format!("initramfs-{}-{key}.cpio", kernel.info.name));
    match trust::open_own_file(&path, 0) {
        Ok(_) if archive_intact(&path, &digest, len) => return Ok((path, digest, len, false)),
        Ok(_) => say(&format!(
            "initramfs {}: not the archive of its key (replaced or damaged: its SHA-256 differs): made anew",
            path.display()
        )),
        // Not the user's regular file (a link, a FIFO): set aside, never
        // booted or written through.
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            let aside = trust::set_aside(&path)?;
            say(&format!("{e}: set aside as {}; made anew", aside.display()));
        }
        Err(_) => {}
    }
    say(&format!(
        "initramfs for {}: {} MiB ({} modules, readpath from {})",
        kernel.info.name,
        archive.len() >> 20,
        loaded.len(),
        bin.display()
    ));
    let part = tmp.join("initramfs.cpio");
    let mut f = trust::create_new(&part, 0o600)?;
    io::Write::write_all(&mut f, &archive)?;
    f.sync_all()?;
    std::fs::rename(&part, &path)?;
    // Older archives of this kernel (another readpath build, other
    // modules) are not booted again: removed, so the lab does not grow
    // by one with every build.
    let prefix = format!("initramfs-{}-", kernel.info.name);
    if let Ok(entries) = std::fs::read_dir(lab) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix)
                && name.ends_with(".cpio")
                && e.path() != path
                && e.file_type().is_ok_and(|t| t.is_file())
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok((path, digest, len, true))
}

/// Makes (or reuses) kernel `name`'s lab disk: `lab/disk-NAME.img`,
/// sparse, ext4 with encryption and verity, its root directory owned by
/// root (the guest's readpath runs as root and trusts only root's
/// directories). One per kernel, so that guests of two kernels run at
/// once; QEMU's own image lock refuses a second guest of the same one.
pub fn disk(lab: &Path, name: &str) -> io::Result<PathBuf> {
    let path = lab.join(format!("disk-{name}.img"));
    if let Ok(f) = trust::open_own_file(&path, 0) {
        // A disk an older readpath made smaller holds only datasets it can
        // make again: it is made anew at the size this one needs.
        if f.metadata()?.len() >= DISK_BYTES {
            return Ok(path);
        }
        trust::remove_state(&path)?;
    }
    let part = lab.join(format!(".disk-{}.img", std::process::id()));
    let _ = std::fs::remove_file(&part);
    let f = trust::create_new(&part, 0o600)?;
    f.set_len(DISK_BYTES)?;
    drop(f);
    let made = crate::kernel::run_tool(
        Command::new("mkfs.ext4")
            .args(["-q", "-F", "-b", "4096", "-O", "encrypt,verity"])
            .args(["-E", "root_owner=0:0", "-L", "readpath-lab"])
            .arg(&part),
    );
    if let Err(e) = made {
        let _ = std::fs::remove_file(&part);
        return Err(io::Error::new(
            e.kind(),
            format!("{e} (mkfs.ext4 is in Debian's e2fsprogs)"),
        ));
    }
    std::fs::rename(&part, &path)?;
    Ok(path)
}

/// The host cache modes of the lab disk QEMU takes (`cache=`).
pub const DISK_CACHE_MODES: &[&str] =
    &["none", "writeback", "writethrough", "directsync", "unsafe"];

/// The kernel's command line holds this many bytes, its NUL included
/// (x86's `COMMAND_LINE_SIZE`): what is longer is cut, and a guest whose
/// `readpath.cmd=` was cut runs half a line.
pub const KERNEL_CMDLINE_SIZE: usize = 2048;

/// What every guest's kernel command line starts with: the console on the
/// serial port, a panic ends QEMU, and the kernel's delay accounting on
/// from boot (the readers' time asleep in iowait, `iowait ms/s`, is
/// counted only while it is; the lab's kernels and Debian's have
/// CONFIG_TASK_DELAY_ACCT).
const APPEND_BASE: &str = "console=ttyS0 panic=-1 loglevel=4 delayacct";

/// The longest shell line a guest can be given to run: its base64 and
/// [`APPEND_BASE`] fill the kernel's [`KERNEL_CMDLINE_SIZE`] bytes.
pub fn max_line_bytes() -> usize {
    // APPEND_BASE, a space, "readpath.cmd=", 4 base64 bytes per 3.
    let room = KERNEL_CMDLINE_SIZE - 1 - APPEND_BASE.len() - 1 - "readpath.cmd=".len();
    room / 4 * 3
}

/// The kernel command line (`-append`) of a guest that runs shell line
/// `line` (the agent where None); an error where it would not fit the
/// kernel's [`KERNEL_CMDLINE_SIZE`] bytes, naming the limit.
pub fn kernel_append(line: Option<&str>) -> Result<String, LineTooLong> {
    let Some(l) = line else {
        return Ok(APPEND_BASE.to_string());
    };
    let append = format!("{APPEND_BASE} {}", super::initramfs::cmdline_arg(l));
    if append.len() >= KERNEL_CMDLINE_SIZE {
        return Err(LineTooLong {
            line: l.len(),
            encoded: append.len() + 1,
        });
    }
    Ok(append)
}

/// A command line for a guest that does not fit the kernel's command line
/// ([`kernel_append`]): its size, encoded and as given, and the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the command line for the guest is {line} bytes, {encoded} on the kernel's command line (base64), which holds {KERNEL_CMDLINE_SIZE} bytes: at most {} bytes of command line fit; shorten it",
    max_line_bytes()
)]
pub struct LineTooLong {
    /// The line's bytes.
    pub line: usize,
    /// The bytes it takes on the kernel's command line (with its NUL).
    pub encoded: usize,
}

/// Why QEMU's command line for a guest was refused ([`qemu_command`]):
/// what would reach QEMU's option parser as more than a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QemuArgError {
    /// A kernel name outside the lab's name rule.
    #[error(transparent)]
    Name(#[from] super::kernels::BadName),
    /// A relative path, or one with `.` or `..`.
    #[error(
        "{what} {:?}: QEMU is given only absolute, canonical paths",
        crate::sys::printable(&path.display().to_string(), false)
    )]
    NotCanonical {
        /// Which file (`the initramfs`).
        what: &'static str,
        /// Its path.
        path: PathBuf,
    },
    /// A comma in `-kernel` or `-initrd`.
    #[error(
        "{what} {:?}: holds a ',', which QEMU would split",
        crate::sys::printable(&path.display().to_string(), false)
    )]
    Comma {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
    },
    /// A disk cache mode QEMU does not have.
    #[error(
        "cache={:?}: allowed {}",
        crate::sys::printable(mode, false),
        DISK_CACHE_MODES.join(", ")
    )]
    Cache {
        /// The mode.
        mode: String,
    },
    /// The guest's command line does not fit the kernel's.
    #[error(transparent)]
    Line(#[from] LineTooLong),
}

/// `path` as a value inside one of QEMU's `key=value,...` options: its
/// commas doubled (QEMU's escape), so no part of it is read as another
/// option.
pub fn qemu_opt_value(path: &Path) -> String {
    path.to_string_lossy().replace(',', ",,")
}

/// Checks a path for QEMU's command line: absolute, without `.` or `..`
/// (what the caller made canonical), so QEMU reads no protocol prefix
/// (`nbd:`) and no directory but the one meant.
fn qemu_path<'a>(what: &'static str, p: &'a Path) -> Result<&'a Path, QemuArgError> {
    use std::path::Component;
    if p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
    {
        Ok(p)
    } else {
        Err(QemuArgError::NotCanonical {
            what,
            path: p.to_path_buf(),
        })
    }
}

/// The agent's port, as QEMU is told it: a virtio serial port named
/// `readpath.agent` on the character device `agent` (QEMU's stdio).
pub const AGENT_PORT: &str = "virtserialport,chardev=agent,name=readpath.agent";

/// The character device behind [`AGENT_PORT`].
pub const AGENT_CHARDEV: &str = "stdio,id=agent,signal=off";

/// The QEMU command that boots `spec` with `initrd` and `disk` to run
/// shell line `line` (the agent where None) with its stdin and stdout on a
/// virtio serial port on QEMU's stdin and stdout, the serial console into
/// `console`, no display, no network, no reboot.
///
/// Nothing from outside reaches QEMU's argument parser as options: every
/// path must be absolute and canonical (no protocol prefix such as `nbd:`,
/// no `..`), the disk is opened with the `file` protocol named
/// (`file.driver=file,file.filename=PATH`) and the disk's and console's
/// paths have their commas doubled; `-kernel` and `-initrd` paths may hold
/// no comma (a multiboot image reads `-initrd` as a comma-separated list);
/// the kernel's name passes the lab's name rule, the cache mode is one of
/// [`DISK_CACHE_MODES`] and the kernel's command line fits
/// ([`kernel_append`]). Otherwise an error says which.
pub fn qemu_command(
    spec: &VmSpec,
    initrd: &Path,
    disk: &Path,
    console: &Path,
    line: Option<&str>,
) -> Result<Command, QemuArgError> {
    super::kernels::check_name(&spec.kernel.info.name)?;
    let image = spec.kernel.image();
    let kernel = qemu_path("the kernel image", &image)?;
    let initrd = qemu_path("the initramfs", initrd)?;
    for (what, p) in [("the kernel image", kernel), ("the initramfs", initrd)] {
        if p.to_string_lossy().contains(',') {
            return Err(QemuArgError::Comma {
                what,
                path: p.to_path_buf(),
            });
        }
    }
    let disk = qemu_path("the lab disk", disk)?;
    let console = qemu_path("the console log", console)?;
    if !DISK_CACHE_MODES.contains(&spec.disk_cache.as_str()) {
        return Err(QemuArgError::Cache {
            mode: spec.disk_cache.clone(),
        });
    }
    let append = kernel_append(line)?;
    let mut c = Command::new("qemu-system-x86_64");
    c.args([
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
    ])
    .args(["-monitor", "none"]);
    match spec.accel {
        Accel::Kvm => c.args([
            "-accel",
            "kvm",
            "-cpu",
            if spec.aes { "host" } else { "host,-aes" },
        ]),
        Accel::Tcg => c.args([
            "-accel",
            "tcg,thread=multi",
            "-cpu",
            if spec.aes { "max" } else { "max,-aes" },
        ]),
    };
    // One socket of cores sharing a last-level cache (the kernel's SCHED_MC
    // domain, where a waking task looks for an idle CPU), as on a phone's
    // cluster or a desktop's CPU; no SMT siblings.
    c.arg("-smp")
        .arg(format!(
            "{},sockets=1,cores={},threads=1",
            spec.cpus, spec.cpus
        ))
        .arg("-m")
        .arg(spec.memory_mib.to_string())
        .arg("-kernel")
        .arg(kernel)
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        .arg(append)
        // The console log is appended to (`append=on`: O_APPEND), so that
        // readpath can cut its head off while the guest writes
        // ([`CONSOLE_CAP`]).
        .arg("-chardev")
        .arg(format!(
            "file,id=console,path={},append=on",
            qemu_opt_value(console)
        ))
        .args(["-serial", "chardev:console"])
        .arg("-drive")
        .arg(format!(
            "format=raw,file.driver=file,file.filename={},if=none,id=labdisk,cache={}",
            qemu_opt_value(disk),
            spec.disk_cache
        ))
        .arg("-device")
        .arg(format!(
            "virtio-blk-pci,drive=labdisk,num-queues={}",
            spec.queues.unwrap_or(spec.cpus)
        ))
        .args(["-device", "virtio-serial-pci"])
        .args(["-chardev", AGENT_CHARDEV])
        .args(["-device", AGENT_PORT]);
    crate::sys::die_with_parent(&mut c);
    Ok(c)
}

/// The file name of guest `name`'s console log in the lab.
fn console_name(name: &str) -> String {
    format!("console-{name}.log")
}

/// Where guest `name`'s serial console goes: the kernel's messages, what
/// `/init` says, and the stderr of what it runs.
pub fn console_log(data: &Path, name: &str) -> PathBuf {
    lab_dir(data).join(console_name(name))
}

/// The most bytes a console log holds on disk: past it, its head is cut
/// off in place, keeping its last [`CONSOLE_TAIL`] bytes, while the guest
/// writes (a guest that writes 30 MB to its console leaves 1 MiB at most).
pub const CONSOLE_CAP: u64 = 1 << 20;

/// The most bytes of a console log ever read back: its end, for the exit
/// status of the guest's line and for the last lines a failure quotes.
pub const CONSOLE_TAIL: u64 = 64 << 10;

/// How often a console log's size is looked at.
const CONSOLE_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// The console logs this process made in this run ([`prepare`]): path,
/// device and inode. Only these are read back, so a console log left by
/// an earlier run, or put in the lab by anyone else (a FIFO, a link to
/// another file, `/dev/zero`), is never opened.
static CONSOLES: std::sync::Mutex<Vec<(PathBuf, u64, u64)>> = std::sync::Mutex::new(Vec::new());

/// Records `file`, just made new at `path`, as this run's console log and
/// keeps it under [`CONSOLE_CAP`] on a thread, for as long as it is the
/// file at `path` (the next boot's replaces it).
fn watch_console(path: &Path, file: std::fs::File) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = file.metadata()?;
    {
        let mut made = CONSOLES.lock().unwrap_or_else(|e| e.into_inner());
        made.retain(|(p, _, _)| p != path);
        made.push((path.to_path_buf(), m.dev(), m.ino()));
    }
    std::thread::Builder::new()
        .name("console-cap".into())
        .spawn(move || {
            loop {
                std::thread::sleep(CONSOLE_CHECK);
                let Ok(m) = file.metadata() else { return };
                if m.nlink() == 0 {
                    return;
                }
                if m.len() > CONSOLE_CAP {
                    let _ = trim_console(&file, m.len(), m.blksize());
                }
            }
        })?;
    Ok(())
}

/// Cuts console log `file` (`len` bytes, blocks of `block` bytes) down to
/// about its last [`CONSOLE_TAIL`] bytes: its head collapsed in place
/// (QEMU appends, so it goes on writing at the new end), or where the
/// filesystem cannot (tmpfs) the tail copied to the front and the rest
/// truncated (what QEMU writes during that copy may be lost).
fn trim_console(file: &std::fs::File, len: u64, block: u64) -> io::Result<()> {
    let block = block.max(1);
    let cut = len.saturating_sub(CONSOLE_TAIL) / block * block;
    if cut == 0 {
        return Ok(());
    }
    if crate::sys::collapse_head(file, cut).is_ok() {
        return Ok(());
    }
    trim_by_copy(file, len, cut)
}

/// [`trim_console`] where the head cannot be collapsed: the bytes after
/// `cut` (of `len`) copied to the front, the file cut to them.
fn trim_by_copy(file: &std::fs::File, len: u64, cut: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut tail = vec![0u8; len.saturating_sub(cut) as usize];
    let n = read_fully_at(file, &mut tail, cut)?;
    tail.truncate(n);
    file.set_len(0)?;
    file.write_all_at(&tail, 0)
}

/// Reads into `buf` from `offset` until it is full or the file ends;
/// how many bytes were read.
fn read_fully_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The end of guest `name`'s console log (at most [`CONSOLE_TAIL`]
/// bytes, from the start of a line), as text; None where this process
/// made no console log for it in this run (the guest never started: a
/// refused data dir, a bad kernel), so nothing there is opened. The lab
/// directory must still pass the trust rule, and the file must be the
/// very one made (opened without following a link, the user's regular
/// file with one link, the same inode); anything else is an error, never
/// read.
pub fn console_tail(data: &Path, name: &str) -> io::Result<Option<String>> {
    use std::os::unix::fs::MetadataExt;
    // Where `prepare` made it: under the lab's canonical path (a relative
    // data dir names the same file by another path).
    let lab = lab_dir(data);
    let path = lab
        .canonicalize()
        .unwrap_or_else(|_| lab.clone())
        .join(console_name(name));
    let made = CONSOLES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|(_, dev, ino)| (*dev, *ino));
    let Some(made) = made else {
        return Ok(None);
    };
    trust::check_dir(&lab_dir(data))?;
    let f = trust::open_own_file(&path, 0)?;
    let m = f.metadata()?;
    if (m.dev(), m.ino()) != made {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: not the console log readpath made for this guest (replaced), refused",
                path.display()
            ),
        ));
    }
    let from = m.len().saturating_sub(CONSOLE_TAIL);
    let mut buf = vec![0u8; (m.len() - from) as usize];
    let n = read_fully_at(&f, &mut buf, from)?;
    buf.truncate(n);
    if from > 0 {
        // Cut in the middle of a line: from the next one.
        let start = buf.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
        buf.drain(..start);
    }
    Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
}

/// The exit status of the line the last guest of kernel `name` ran, as
/// its `/init` wrote it on the console (`readpath-lab: ended (N)`); None
/// where it never got there (killed, or it did not boot) or where this
/// run made no console log for it ([`console_tail`]).
pub fn guest_status(data: &Path, name: &str) -> Option<i32> {
    let text = console_tail(data, name).ok()??;
    // What the line wrote on stderr may have left its line open (a
    // progress meter): the mark is looked for anywhere in a line.
    const MARK: &str = "readpath-lab: ended (";
    text.lines()
        .rev()
        .find_map(|l| l.rfind(MARK).map(|i| &l[i + MARK.len()..]))
        .and_then(|r| r.split(')').next())
        .and_then(|n| n.trim().parse().ok())
}

/// Everything a boot needs, made or reused, and the command that runs
/// `line` there ([`qemu_command`]): `say` hears what is made. The lab's
/// path is made absolute and canonical first (a relative `--data-dir
/// nbd:127.0.0.1:9` is a directory here, never a protocol to QEMU), and
/// one holding a ',' is refused before anything is made.
pub fn prepare(
    data: &Path,
    spec: &VmSpec,
    line: Option<&str>,
    say: &mut dyn FnMut(&str),
) -> io::Result<Command> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    let comma = |lab: &Path| {
        invalid(format!(
            "{}: the lab's path holds a ',', which QEMU's options would split; choose a data dir (--data-dir) without one",
            crate::sys::printable(&lab.display().to_string(), false)
        ))
    };
    let lab = lab_dir(data);
    // QEMU splits `-kernel`'s and `-initrd`'s values at commas for a
    // multiboot image: a path holding one would be read as more modules.
    if lab.to_string_lossy().contains(',') {
        return Err(comma(&lab));
    }
    // Before anything is made: a line that cannot reach the guest whole.
    kernel_append(line).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    trust::ensure_dir(&lab)?;
    let lab = lab.canonicalize()?;
    if lab.to_string_lossy().contains(',') {
        return Err(comma(&lab));
    }
    let mut spec = spec.clone();
    spec.kernel.dir = spec.kernel.dir.canonicalize()?;
    let (initrd, _) = initramfs(&lab, &spec.kernel, say)?;
    let disk = disk(&lab, &spec.kernel.info.name)?;
    let console = lab.join(console_name(&spec.kernel.info.name));
    let _ = trust::remove_state(&console);
    watch_console(&console, trust::create_new(&console, 0o600)?)?;
    qemu_command(&spec, &initrd, &disk, &console, line)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// A lab guest readpath started, as recorded in the lab
/// (`lab/guests/guest-PID.json`, a state file under the trust rule) the
/// moment QEMU runs ([`record_guest`]): what proves a process one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestRecord {
    /// QEMU's PID.
    pub pid: u32,
    /// Its start time (`/proc/PID/stat` field 22, clock ticks after
    /// boot): a PID reused by another process has another.
    pub start_ticks: u64,
    /// Its program, as `/proc/PID/exe` named it.
    pub exe: PathBuf,
    /// The `-kernel` it was given (absolute and canonical).
    pub kernel: PathBuf,
    /// The readpath that started it (its parent).
    pub readpath: u32,
}

/// The lab's directory of guest records.
fn guests_dir(data: &Path) -> PathBuf {
    lab_dir(data).join("guests")
}

/// The PID a guest record's file name holds (`guest-PID.json`).
fn record_pid(file_name: &str) -> Option<u32> {
    file_name
        .strip_prefix("guest-")?
        .strip_suffix(".json")?
        .parse()
        .ok()
}

/// What a record says of `/proc` now ([`judge_guest`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guest {
    /// readpath's guest, its readpath gone: its kernel image.
    Orphan(String),
    /// Its readpath is alive (the guest is still its child): left alone.
    Owned,
    /// The process is gone, or its PID is another process's now: the
    /// record is stale.
    Gone,
    /// The process the record names is not the guest it says: why. Never
    /// acted on.
    Refused(String),
}

/// Whether the process `now` (what `/proc/PID` says, None where there is
/// none) is the guest record `rec` says readpath started, left with no
/// readpath. Pure: what it proves is what was read. A guest is an orphan
/// only when all of these hold: the same process (PID and start time),
/// of user `uid`; its program (`/proc/PID/exe`, not argv[0]) is the QEMU
/// recorded, a `qemu-system-*`; exactly one `-kernel`, absolute and
/// canonical (`canonical` resolves a path) and under `kernels` (the lab's
/// `kernels/`, canonical), the one recorded; the agent's port and its
/// character device as whole arguments of `-device` and `-chardev` (not
/// `name=readpath.agent` anywhere, such as inside `-append`); and its
/// parent no longer the readpath that started it.
pub fn judge_guest(
    rec: &GuestRecord,
    now: Option<&crate::sys::ProcessInfo>,
    uid: u32,
    kernels: &Path,
    canonical: &dyn Fn(&Path) -> Option<PathBuf>,
) -> Guest {
    let Some(p) = now.filter(|p| p.start_ticks == rec.start_ticks) else {
        return Guest::Gone;
    };
    if p.uid != uid {
        return Guest::Refused(format!("runs as uid {}, not {uid}", p.uid));
    }
    let exe = p.exe.as_ref().map(|e| {
        let s = e.to_string_lossy();
        PathBuf::from(s.strip_suffix(" (deleted)").unwrap_or(&s))
    });
    let is_qemu = |e: &Path| {
        e.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("qemu-system-"))
    };
    match &exe {
        Some(e) if *e == rec.exe && is_qemu(e) => {}
        other => {
            return Guest::Refused(format!(
                "its program (/proc/{}/exe) is {}, not the QEMU recorded ({})",
                rec.pid,
                other
                    .as_ref()
                    .map_or("unreadable".into(), |e| e.display().to_string()),
                rec.exe.display()
            ));
        }
    }
    let kernels_at: Vec<usize> = (0..p.args.len())
        .filter(|&i| p.args[i] == "-kernel")
        .collect();
    let image = match kernels_at.as_slice() {
        [i] => p.args.get(i + 1).map(PathBuf::from),
        _ => None,
    };
    let Some(image) = image else {
        return Guest::Refused("its command line has no single -kernel".into());
    };
    let proven = image.is_absolute()
        && canonical(&image).as_deref() == Some(image.as_path())
        && image.starts_with(kernels)
        && image != kernels
        && image == rec.kernel;
    if !proven {
        return Guest::Refused(format!(
            "its -kernel {} is not the recorded image of this lab's {} (compared canonical)",
            crate::sys::printable(&image.display().to_string(), false),
            kernels.display()
        ));
    }
    let pair = |opt: &str, value: &str| p.args.windows(2).any(|w| w[0] == opt && w[1] == value);
    if !(pair("-device", AGENT_PORT) && pair("-chardev", AGENT_CHARDEV)) {
        return Guest::Refused(
            "it has no readpath agent port (-device ".to_string() + AGENT_PORT + ")",
        );
    }
    if p.ppid == rec.readpath {
        return Guest::Owned;
    }
    Guest::Orphan(image.display().to_string())
}

/// Records the lab guest QEMU process `pid` this readpath has just
/// started (its child, its program run) in `lab/guests/guest-PID.json`:
/// what lets `kernel restore` prove it readpath's guest later
/// ([`orphans`]). Records whose process is gone are removed first. A guest
/// that could not be recorded still dies with readpath
/// (`PR_SET_PDEATHSIG`); it is only not one `kernel restore` may end.
pub fn record_guest(data: &Path, pid: u32) -> io::Result<()> {
    let me = std::process::id();
    let p = crate::sys::process_info(pid)
        .filter(|p| p.ppid == me)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("QEMU {pid}: gone")))?;
    let (Some(exe), Some(kernel)) = (
        p.exe.clone(),
        p.args
            .iter()
            .position(|a| a == "-kernel")
            .and_then(|i| p.args.get(i + 1)),
    ) else {
        return Err(io::Error::other(format!("{pid}: not a lab guest's QEMU")));
    };
    let dir = guests_dir(data);
    trust::ensure_dir(&dir)?;
    sweep_guests(&dir);
    let rec = GuestRecord {
        pid,
        start_ticks: p.start_ticks,
        exe,
        kernel: PathBuf::from(kernel),
        readpath: me,
    };
    trust::write_state(
        &dir.join(format!("guest-{pid}.json")),
        &serde_json::to_vec(&rec).map_err(io::Error::other)?,
    )
}

/// Removes the records in `dir` whose process is gone (or whose PID is
/// another process's now); every other file is left alone.
fn sweep_guests(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Some(pid) = record_pid(&e.file_name().to_string_lossy()) else {
            continue;
        };
        if let Ok(rec) = read_record(&e.path(), pid) {
            let now = crate::sys::process_info(pid);
            if now.is_none_or(|p| p.start_ticks != rec.start_ticks) {
                let _ = trust::remove_state(&e.path());
            }
        }
    }
}

/// The guests recorded in this lab whose process is still the one
/// recorded (its PID and start time): running, whoever's child they are
/// now. Records that do not read are left to [`orphans`].
pub fn running_guests(data: &Path) -> Vec<GuestRecord> {
    let Ok(rd) = std::fs::read_dir(guests_dir(data)) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let pid = record_pid(&e.file_name().to_string_lossy())?;
            let rec = read_record(&e.path(), pid).ok()?;
            crate::sys::process_info(pid)
                .is_some_and(|p| p.start_ticks == rec.start_ticks)
                .then_some(rec)
        })
        .collect()
}

/// Reads guest record `path` (under the trust rule: the user's regular
/// file, at most 4 KiB of JSON) for PID `pid`, as its name says.
fn read_record(path: &Path, pid: u32) -> io::Result<GuestRecord> {
    let bad = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {why}", path.display()),
        )
    };
    let bytes = trust::read_state(path, 4096)?.ok_or_else(|| bad("gone".into()))?;
    let rec: GuestRecord =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("no guest record: {e}")))?;
    if rec.pid != pid {
        return Err(bad(format!("names PID {}, not {pid}", rec.pid)));
    }
    Ok(rec)
}

/// What [`orphans`] found.
#[derive(Debug, Default)]
pub struct Orphans {
    /// readpath's guests left with no readpath, proven: (PID, its start
    /// time, its kernel image).
    pub guests: Vec<(u32, u64, String)>,
    /// Records refused (forged, damaged, or naming a process that is not
    /// the guest they say), each set aside as `NAME.refused`: why.
    pub refused: Vec<String>,
}

/// Lab guests left running with no readpath to answer to
/// (`PR_SET_PDEATHSIG` kills them with readpath; this is for where it
/// could not, e.g. a guest started on a thread that ended first): only
/// those recorded in this lab when they started ([`record_guest`]) whose
/// process `/proc` proves to be that guest ([`judge_guest`]). Stale
/// records are removed; a record that is not the user's regular file,
/// does not parse, or names a process that is not its guest is set aside
/// and named in [`Orphans::refused`], never acted on.
pub fn orphans(data: &Path) -> Orphans {
    let dir = guests_dir(data);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Orphans::default();
    };
    if let Err(e) = trust::check_dir(&dir) {
        return Orphans {
            guests: Vec::new(),
            refused: vec![e.to_string()],
        };
    }
    let (mut guests, mut refused) = (Vec::new(), Vec::new());
    let kernels = lab_dir(data).join("kernels").canonicalize().ok();
    let uid = trust::euid();
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let mut refuse = |path: &Path, why: String| {
        let aside = match trust::set_aside(path) {
            Ok(to) => format!("; kept as {} to be looked at", to.display()),
            Err(e) => format!("; could not be set aside: {e}"),
        };
        refused.push(format!("{why}{aside}"));
    };
    let mut files: Vec<(u32, PathBuf)> = rd
        .flatten()
        .filter_map(|e| Some((record_pid(&e.file_name().to_string_lossy())?, e.path())))
        .collect();
    files.sort();
    for (pid, path) in files {
        let rec = match read_record(&path, pid) {
            Ok(r) => r,
            Err(e) => {
                refuse(&path, e.to_string());
                continue;
            }
        };
        let now = crate::sys::process_info(pid);
        let judged = match &kernels {
            Some(k) => judge_guest(&rec, now.as_ref(), uid, k, &canonical),
            None => judge_guest(&rec, now.as_ref(), uid, Path::new("/nonexistent"), &|_| {
                None
            }),
        };
        match judged {
            Guest::Gone => {
                let _ = trust::remove_state(&path);
            }
            Guest::Owned => {}
            Guest::Refused(why) => refuse(&path, format!("{}: QEMU {pid}: {why}", path.display())),
            Guest::Orphan(image) => guests.push((pid, rec.start_ticks, image)),
        }
    }
    Orphans { guests, refused }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lab_path_with_a_comma_is_refused_before_anything_is_made() {
        let d = tempfile::tempdir().unwrap();
        let data = d.path().join("a,format=qcow2");
        let spec = spec_named("k", &data.join("lab/kernels/k"));
        let e = prepare(&data, &spec, None, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("holds a ','"), "{e}");
        assert!(!data.exists(), "nothing made");
    }

    fn spec_named(name: &str, dir: &Path) -> VmSpec {
        VmSpec {
            kernel: Kernel {
                info: super::super::kernels::KernelInfo {
                    name: name.into(),
                    release: "6.1.0-1".into(),
                    source: "test".into(),
                    ..Default::default()
                },
                dir: dir.to_path_buf(),
            },
            cpus: 1,
            memory_mib: 256,
            disk_cache: "none".into(),
            accel: Accel::Tcg,
            aes: true,
            queues: None,
        }
    }

    fn argv(c: &Command) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The value after option `opt` (its only occurrence).
    fn value_of<'a>(args: &'a [String], opt: &str) -> &'a str {
        let at: Vec<usize> = (0..args.len()).filter(|&i| args[i] == opt).collect();
        assert_eq!(at.len(), 1, "{opt} once: {args:?}");
        &args[at[0] + 1]
    }

    #[test]
    fn nothing_from_outside_reaches_qemu_as_an_option_or_a_protocol() {
        let d = Path::new("/d/lab");
        let ok = spec_named("k", &d.join("kernels/k"));
        // A lab whose path holds commas and a protocol's colon: each path
        // is one value, its commas doubled, the file protocol named.
        let lab = Path::new("/t/nbd:127.0.0.1:9/x,file=victim/lab");
        let c = qemu_command(
            &ok,
            Path::new("/d/lab/initramfs-k-00.cpio"),
            &lab.join("disk-k.img"),
            &lab.join("console-k.log"),
            Some("exec readpath --version"),
        )
        .unwrap();
        let args = argv(&c);
        assert_eq!(
            value_of(&args, "-drive"),
            "format=raw,file.driver=file,file.filename=/t/nbd:127.0.0.1:9/x,,file=victim/lab/disk-k.img,if=none,id=labdisk,cache=none"
        );
        assert!(
            args.windows(2)
                .any(|w| w[0] == "-device" && w[1] == "virtio-blk-pci,drive=labdisk,num-queues=1"),
            "{args:?}"
        );
        assert_eq!(value_of(&args, "-smp"), "1,sockets=1,cores=1,threads=1");
        assert_eq!(
            args.iter().filter(|a| a.as_str() == "-chardev").count(),
            2,
            "{args:?}"
        );
        assert!(
            args.contains(
                &"file,id=console,path=/t/nbd:127.0.0.1:9/x,,file=victim/lab/console-k.log,append=on".into()
            ),
            "{args:?}"
        );
        assert_eq!(value_of(&args, "-kernel"), "/d/lab/kernels/k/vmlinuz");
        assert_eq!(value_of(&args, "-serial"), "chardev:console");
        // No argument anywhere holds a single comma of the hostile path.
        assert!(
            !args.iter().any(|a| a.contains("x,file=victim")),
            "{args:?}"
        );
        // A name that is not the lab's, a relative or `..` path, a
        // comma in -kernel or -initrd, a cache mode QEMU would read as
        // more: refused.
        let e = qemu_command(
            &spec_named("k,file=victim", &d.join("kernels/k")),
            Path::new("/d/lab/i.cpio"),
            Path::new("/d/lab/disk.img"),
            Path::new("/d/lab/c.log"),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("allowed"), "{e}");
        for (initrd, disk, console) in [
            ("nbd:127.0.0.1:9/lab/i.cpio", "/d/disk.img", "/d/c.log"),
            (
                "/d/lab/i.cpio",
                "nbd:127.0.0.1:9/lab/disk-k.img",
                "/d/c.log",
            ),
            ("/d/lab/i.cpio", "/d/disk.img", "console.log"),
            ("/d/lab/../../etc/i.cpio", "/d/disk.img", "/d/c.log"),
            ("/d/a,b/i.cpio", "/d/disk.img", "/d/c.log"),
        ] {
            let r = qemu_command(
                &ok,
                Path::new(initrd),
                Path::new(disk),
                Path::new(console),
                None,
            );
            assert!(r.is_err(), "{initrd} {disk} {console}");
        }
        let relative = spec_named("k", Path::new("nbd:127.0.0.1:9/lab/kernels/k"));
        let e = qemu_command(
            &relative,
            Path::new("/d/i.cpio"),
            Path::new("/d/disk.img"),
            Path::new("/d/c.log"),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("absolute"), "{e}");
        let mut cache = ok.clone();
        cache.disk_cache = "none,file.filename=/etc/shadow".into();
        let e = qemu_command(
            &cache,
            Path::new("/d/i.cpio"),
            Path::new("/d/disk.img"),
            Path::new("/d/c.log"),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("allowed none, writeback"), "{e}");
    }

    #[test]
    fn a_line_too_long_for_the_kernels_command_line_is_refused_naming_the_limit() {
        let max = max_line_bytes();
        assert_eq!(max, 1491);
        let fits = "x".repeat(max);
        let append = kernel_append(Some(&fits)).unwrap();
        assert!(append.len() < KERNEL_CMDLINE_SIZE, "{}", append.len());
        let e = kernel_append(Some(&"x".repeat(max + 1)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("2048") && e.contains("1491"), "{e}");
        // Refused before anything is made.
        let d = tempfile::tempdir().unwrap();
        let data = d.path().join("data");
        let spec = spec_named("k", &data.join("lab/kernels/k"));
        let e = prepare(&data, &spec, Some(&"y".repeat(4000)), &mut |_| {}).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert!(!data.exists(), "nothing made");
    }

    fn record(kernels: &Path) -> GuestRecord {
        GuestRecord {
            pid: 4242,
            start_ticks: 987_654,
            exe: PathBuf::from("/usr/bin/qemu-system-x86_64"),
            kernel: kernels.join("k/vmlinuz"),
            readpath: 4000,
        }
    }

    fn qemu_now(kernels: &Path) -> crate::sys::ProcessInfo {
        crate::sys::ProcessInfo {
            exe: Some(PathBuf::from("/usr/bin/qemu-system-x86_64")),
            args: [
                "qemu-system-x86_64",
                "-kernel",
                &kernels.join("k/vmlinuz").display().to_string(),
                "-append",
                "console=ttyS0",
                "-chardev",
                AGENT_CHARDEV,
                "-device",
                AGENT_PORT,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            uid: 0,
            ppid: 1,
            start_ticks: 987_654,
        }
    }

    #[test]
    fn only_a_guest_proven_readpaths_and_left_alone_is_an_orphan() {
        let k = Path::new("/d/lab/kernels");
        // Canonical form of the paths the tests name, as the filesystem
        // would resolve them.
        let canonical = |p: &Path| -> Option<PathBuf> {
            let mut out = PathBuf::new();
            for c in p.components() {
                match c {
                    std::path::Component::ParentDir => {
                        out.pop();
                    }
                    std::path::Component::CurDir => {}
                    c => out.push(c),
                }
            }
            Some(out)
        };
        let rec = record(k);
        let judge = |now: &crate::sys::ProcessInfo| judge_guest(&rec, Some(now), 0, k, &canonical);
        assert_eq!(
            judge(&qemu_now(k)),
            Guest::Orphan("/d/lab/kernels/k/vmlinuz".into())
        );
        // Gone, or a PID reused by another process.
        assert_eq!(judge_guest(&rec, None, 0, k, &canonical), Guest::Gone);
        let mut reused = qemu_now(k);
        reused.start_ticks += 1;
        assert_eq!(judge(&reused), Guest::Gone);
        // Its parent, the readpath that started it, is alive.
        let mut owned = qemu_now(k);
        owned.ppid = rec.readpath;
        assert_eq!(judge(&owned), Guest::Owned);
        let refused = |now: crate::sys::ProcessInfo, what: &str| match judge(&now) {
            Guest::Refused(why) => assert!(why.contains(what), "{why}"),
            other => panic!("{other:?} for {now:?}"),
        };
        // -kernel D/lab/kernels/../../../../boot/vmlinuz: under the lab
        // as text, not canonical.
        let mut escape = qemu_now(k);
        escape.args[2] = "/d/lab/kernels/../../../../boot/vmlinuz".into();
        refused(escape, "-kernel");
        // argv[0] says QEMU; /proc/PID/exe says otherwise.
        let mut liar = qemu_now(k);
        liar.exe = Some(PathBuf::from("/usr/sbin/sshd"));
        refused(liar, "/usr/sbin/sshd");
        let mut unreadable = qemu_now(k);
        unreadable.exe = None;
        refused(unreadable, "unreadable");
        // name=readpath.agent inside -append, no port of its own.
        let mut append = qemu_now(k);
        append.args.truncate(5);
        append.args[4] = format!("console=ttyS0 {AGENT_PORT}");
        refused(append, "agent port");
        // Another user's process, a second -kernel, another image.
        let mut other = qemu_now(k);
        other.uid = 1000;
        refused(other, "uid 1000");
        let mut two = qemu_now(k);
        two.args.extend(["-kernel".into(), "/boot/vmlinuz".into()]);
        refused(two, "-kernel");
        let mut other_image = qemu_now(k);
        other_image.args[2] = "/d/lab/kernels/j/vmlinuz".into();
        refused(other_image, "-kernel");
    }

    #[test]
    fn guest_records_are_proven_swept_and_forged_ones_set_aside() {
        let d = tempfile::tempdir().unwrap();
        let data = d.path();
        trust::ensure_dir(&data.join("lab/kernels")).unwrap();
        let dir = guests_dir(data);
        trust::ensure_dir(&dir).unwrap();
        // This test's own process, recorded as a guest: not QEMU.
        let me = crate::sys::process_info(std::process::id()).unwrap();
        let mine = GuestRecord {
            pid: std::process::id(),
            start_ticks: me.start_ticks,
            exe: me.exe.clone().unwrap(),
            kernel: data.join("lab/kernels/k/vmlinuz"),
            readpath: 1,
        };
        let write = |name: &str, bytes: &[u8]| trust::write_state(&dir.join(name), bytes).unwrap();
        write(
            &format!("guest-{}.json", std::process::id()),
            &serde_json::to_vec(&mine).unwrap(),
        );
        // A stale record (its start time is not the process's).
        let stale = GuestRecord {
            start_ticks: me.start_ticks + 1,
            ..mine.clone()
        };
        let stale_pid = std::os::unix::process::parent_id();
        write(
            &format!("guest-{stale_pid}.json"),
            &serde_json::to_vec(&GuestRecord {
                pid: stale_pid,
                ..stale
            })
            .unwrap(),
        );
        // Forged: not JSON; and a record naming another PID than its name.
        write("guest-1.json", b"pid = 1");
        write(
            "guest-2.json",
            &serde_json::to_vec(&GuestRecord {
                pid: 3,
                ..mine.clone()
            })
            .unwrap(),
        );
        let o = orphans(data);
        assert!(o.guests.is_empty(), "{:?}", o.guests);
        assert_eq!(o.refused.len(), 3, "{:?}", o.refused);
        assert!(
            o.refused
                .iter()
                .any(|r| r.contains("not the QEMU recorded")),
            "{:?}",
            o.refused
        );
        assert!(dir.join("guest-1.json.refused").exists());
        assert!(dir.join("guest-2.json.refused").exists());
        assert!(
            !dir.join(format!("guest-{stale_pid}.json")).exists(),
            "stale removed"
        );
    }

    fn spec(data: &Path) -> VmSpec {
        VmSpec {
            kernel: Kernel {
                info: super::super::kernels::KernelInfo {
                    name: "k".into(),
                    release: "6.1.0-1".into(),
                    source: "test".into(),
                    ..Default::default()
                },
                dir: data.join("lab/kernels/k"),
            },
            cpus: 1,
            memory_mib: 256,
            disk_cache: "none".into(),
            accel: Accel::Tcg,
            aes: true,
            queues: None,
        }
    }

    #[test]
    fn qemu_appends_to_the_console_log() {
        let d = Path::new("/d");
        let c = qemu_command(
            &spec(d),
            &d.join("i.cpio"),
            &d.join("disk.img"),
            &d.join("lab/console-k.log"),
            None,
        )
        .unwrap();
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let at = |w: &str| args.iter().position(|a| a == w).unwrap();
        // O_APPEND: cutting the log's head leaves no hole for QEMU to fill.
        assert_eq!(
            args[at("-chardev") + 1],
            "file,id=console,path=/d/lab/console-k.log,append=on"
        );
        assert_eq!(args[at("-serial") + 1], "chardev:console");
    }

    /// `len` bytes counting up (each byte its offset mod 251).
    fn pattern(from: usize, len: usize) -> Vec<u8> {
        (from..from + len).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn a_console_log_is_cut_to_its_tail_while_its_writer_appends() {
        use std::io::Write;
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("console.log");
        let made = trust::create_new(&p, 0o600).unwrap();
        let mut qemu = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        let written = 3 << 20;
        qemu.write_all(&pattern(0, written)).unwrap();
        let m = made.metadata().unwrap();
        trim_console(&made, m.len(), m.blksize()).unwrap();
        let kept = std::fs::read(&p).unwrap();
        assert!(kept.len() as u64 >= CONSOLE_TAIL, "{}", kept.len());
        assert!(kept.len() as u64 <= CONSOLE_TAIL + m.blksize());
        assert_eq!(
            kept,
            pattern(written - kept.len(), kept.len()),
            "the tail, in place"
        );
        // The writer goes on at the new end: no hole, nothing lost.
        qemu.write_all(b"after").unwrap();
        let now = std::fs::read(&p).unwrap();
        assert_eq!(now.len(), kept.len() + 5);
        assert!(now.ends_with(b"after"));
        // Where the head cannot be collapsed (tmpfs): copied to the front.
        let len = now.len() as u64;
        trim_by_copy(&made, len, len - 100).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), now[now.len() - 100..]);
    }

    #[test]
    fn a_flooded_console_log_stays_under_its_cap() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let data = d.path();
        let p = console_log(data, "flood");
        trust::ensure_dir(&lab_dir(data)).unwrap();
        watch_console(&p, trust::create_new(&p, 0o600).unwrap()).unwrap();
        // A guest writing 30 MB to its console.
        let mut qemu = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        let total = 30 << 20;
        for at in (0..total).step_by(1 << 20) {
            qemu.write_all(&pattern(at, 1 << 20)).unwrap();
        }
        qemu.write_all(b"\nreadpath-lab: ended (3)\n").unwrap();
        // Waits for the watcher to have cut it (a known state, no timing).
        let size = || std::fs::metadata(&p).unwrap().len();
        let t = std::time::Instant::now();
        while size() > CONSOLE_CAP {
            // A bound that fails, not a hang, if the watcher never cuts.
            assert!(
                t.elapsed() < std::time::Duration::from_secs(120),
                "the console log is still {} bytes after 120 s",
                size()
            );
            std::thread::sleep(CONSOLE_CHECK);
        }
        let text = console_tail(data, "flood").unwrap().unwrap();
        // At most its last 64 KiB (a byte that is no UTF-8 one character).
        assert!(text.chars().count() as u64 <= CONSOLE_TAIL);
        assert!(text.ends_with("readpath-lab: ended (3)\n"));
        assert_eq!(guest_status(data, "flood"), Some(3));
        // The watcher ends with the file (the next boot's replaces it).
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn only_the_console_log_this_run_made_is_read() {
        let d = tempfile::tempdir().unwrap();
        let data = d.path();
        trust::ensure_dir(&lab_dir(data)).unwrap();
        // One left in the lab (by an earlier run, or planted): never opened,
        // whatever it is.
        let old = console_log(data, "old");
        crate::sys::make_fifo(&old, 0o600).unwrap();
        assert!(console_tail(data, "old").unwrap().is_none());
        assert_eq!(guest_status(data, "old"), None);
        // This run's: its tail; replaced by a FIFO or a link: refused.
        let p = console_log(data, "k");
        let f = trust::create_new(&p, 0o600).unwrap();
        watch_console(&p, f).unwrap();
        std::fs::write(&p, "boot\nreadpath-lab: ended (0)\n").unwrap();
        assert_eq!(guest_status(data, "k"), Some(0));
        std::fs::remove_file(&p).unwrap();
        crate::sys::make_fifo(&p, 0o600).unwrap();
        let e = console_tail(data, "k").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        std::fs::remove_file(&p).unwrap();
        let canary = d.path().join("canary");
        std::fs::write(&canary, "secret\n").unwrap();
        std::os::unix::fs::symlink(&canary, &p).unwrap();
        let e = console_tail(data, "k").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "another file\n").unwrap();
        let e = console_tail(data, "k").unwrap_err();
        assert!(e.to_string().contains("replaced"), "{e}");
    }

    #[test]
    fn the_console_log_is_found_by_another_path_to_the_data_dir() {
        // `prepare` makes it under the lab's canonical path; a data dir
        // given another way (relative, or through a link: `--data-dir
        // nbd:127.0.0.1:9` from its parent) names the same file.
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        trust::ensure_dir(&lab_dir(&real)).unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let p = lab_dir(&real)
            .canonicalize()
            .unwrap()
            .join(console_name("k"));
        watch_console(&p, trust::create_new(&p, 0o600).unwrap()).unwrap();
        std::fs::write(&p, "readpath-lab: ended (3)\n").unwrap();
        assert_eq!(guest_status(&link, "k"), Some(3));
    }

    #[test]
    fn a_static_and_a_dynamic_program_are_told_apart() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        // The test binary is linked as this project links: dynamically,
        // with glibc's loader.
        let interp = elf_interp(&me)
            .expect("an ELF file")
            .expect("an interpreter");
        assert!(interp.contains("ld-linux"), "{interp}");
        assert_eq!(elf_interp(b"#!/bin/sh\n"), None);
    }
}
