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
//! QEMU runs as a child that dies with readpath (`PR_SET_PDEATHSIG`),
//! whatever ends readpath, and the guest powers itself off when the agent
//! ends. The guest's serial console (the kernel's messages and the
//! agent's stderr) goes to `lab/console-KERNEL.log`, kept under
//! [`CONSOLE_CAP`] while the guest writes, and read back only as its last
//! [`CONSOLE_TAIL`] bytes, only where this run made it
//! ([`console_tail`]). KVM is used where `/dev/kvm`
//! opens and `lab.accel` allows it; elsewhere, and on this project's
//! machines (a nested guest stops after the kernel's decompressor), TCG.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

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
pub fn agent_binary_override() -> Option<Result<PathBuf, String>> {
    let p = PathBuf::from(std::env::var_os("READPATH_AGENT_BINARY")?);
    Some(if p.is_file() {
        Ok(p)
    } else {
        Err(format!("READPATH_AGENT_BINARY={}: not a file", p.display()))
    })
}

/// The readpath a lab guest runs (this machine's architecture):
/// `READPATH_AGENT_BINARY`, else the static musl build beside this one's
/// target dir (`target/x86_64-unknown-linux-musl/release/readpath`: no
/// libraries to carry), else this binary (its libraries go with it).
fn local_binary_for_guest() -> Result<PathBuf, String> {
    if let Some(chosen) = agent_binary_override() {
        return chosen;
    }
    let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
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

/// Builds (or reuses) the initramfs for `kernel`: returns its path and
/// whether it was built now. Keyed by the SHA-256 of everything in it.
pub fn initramfs(
    lab: &Path,
    kernel: &Kernel,
    say: &mut dyn FnMut(&str),
) -> io::Result<(PathBuf, bool)> {
    // One archive a kernel per process: a start prepares the guest and
    // then boots it (and a lost connection boots it again), and each would
    // otherwise strip and hash the binary anew.
    static MADE: std::sync::Mutex<Vec<(PathBuf, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let made = |m: &Vec<(PathBuf, PathBuf)>| {
        m.iter()
            .find(|(k, a)| *k == kernel.dir && trust::open_own_file(a, 0).is_ok())
            .map(|(_, a)| a.clone())
    };
    if let Some(a) = made(&MADE.lock().unwrap_or_else(|e| e.into_inner())) {
        return Ok((a, false));
    }
    let tmp = lab.join(format!(".initramfs-{}", std::process::id()));
    trust::ensure_dir(&tmp)?;
    let result = build_initramfs(lab, kernel, &tmp, say);
    let _ = std::fs::remove_dir_all(&tmp);
    if let Ok((a, _)) = &result {
        MADE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((kernel.dir.clone(), a.clone()));
    }
    result
}

fn build_initramfs(
    lab: &Path,
    kernel: &Kernel,
    tmp: &Path,
    say: &mut dyn FnMut(&str),
) -> io::Result<(PathBuf, bool)> {
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
    let key = hex::encode(&Sha256::digest(&archive)[..8]);
    let path = lab.join(format!("initramfs-{}-{key}.cpio", kernel.info.name));
    if trust::open_own_file(&path, 0).is_ok() {
        return Ok((path, false));
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
    Ok((path, true))
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

/// The QEMU command that boots `spec` with `initrd` and `disk` to run
/// shell line `line` (the agent where None) with its stdin and stdout on a
/// virtio serial port on QEMU's stdin and stdout, the serial console into
/// `console`, no display, no network, no reboot.
pub fn qemu_command(
    spec: &VmSpec,
    initrd: &Path,
    disk: &Path,
    console: &Path,
    line: Option<&str>,
) -> Command {
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
    c.arg("-smp")
        .arg(spec.cpus.to_string())
        .arg("-m")
        .arg(spec.memory_mib.to_string())
        .arg("-kernel")
        .arg(spec.kernel.image())
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        .arg(match line {
            Some(l) => format!(
                "console=ttyS0 panic=-1 loglevel=4 {}",
                super::initramfs::cmdline_arg(l)
            ),
            None => "console=ttyS0 panic=-1 loglevel=4".to_string(),
        })
        // The console log is appended to (`append=on`: O_APPEND), so that
        // readpath can cut its head off while the guest writes
        // ([`CONSOLE_CAP`]).
        .arg("-chardev")
        .arg(format!(
            "file,id=console,path={},append=on",
            console.display().to_string().replace(',', ",,")
        ))
        .args(["-serial", "chardev:console"])
        .arg("-drive")
        .arg(format!(
            "file={},format=raw,if=virtio,cache={}",
            disk.display(),
            spec.disk_cache
        ))
        .args(["-device", "virtio-serial-pci"])
        .args(["-chardev", "stdio,id=agent,signal=off"])
        .args([
            "-device",
            "virtserialport,chardev=agent,name=readpath.agent",
        ]);
    crate::sys::die_with_parent(&mut c);
    c
}

/// Where guest `name`'s serial console goes: the kernel's messages, what
/// `/init` says, and the stderr of what it runs.
pub fn console_log(data: &Path, name: &str) -> PathBuf {
    lab_dir(data).join(format!("console-{name}.log"))
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
    let path = console_log(data, name);
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
/// `line` there ([`qemu_command`]): `say` hears what is made.
pub fn prepare(
    data: &Path,
    spec: &VmSpec,
    line: Option<&str>,
    say: &mut dyn FnMut(&str),
) -> io::Result<Command> {
    let lab = lab_dir(data);
    // QEMU splits `-drive` and `-serial` values at commas: a path holding
    // one would be read as more options.
    if lab.to_string_lossy().contains(',') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: the lab's path holds a ',', which QEMU's options would split; choose a data dir (--data-dir) without one",
                crate::sys::printable(&lab.display().to_string(), false)
            ),
        ));
    }
    trust::ensure_dir(&lab)?;
    let (initrd, _) = initramfs(&lab, &spec.kernel, say)?;
    let disk = disk(&lab, &spec.kernel.info.name)?;
    let console = console_log(data, &spec.kernel.info.name);
    let _ = trust::remove_state(&console);
    watch_console(&console, trust::create_new(&console, 0o600)?)?;
    Ok(qemu_command(spec, &initrd, &disk, &console, line))
}

/// Lab guests left running with no readpath to answer to: QEMU
/// processes of this user whose parent is gone (`PR_SET_PDEATHSIG` kills
/// them with readpath; this is for where it could not, e.g. a guest
/// started on a thread that ended first) and whose command line proves
/// this lab made them (`-kernel` under `LAB/kernels/`, the agent's port
/// `name=readpath.agent`). Returns (PID, its kernel image).
pub fn orphans(data: &Path) -> Vec<(u32, String)> {
    let Ok(kernels) = lab_dir(data).join("kernels").canonicalize() else {
        return Vec::new();
    };
    let me = crate::sys::trust::euid();
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in procs.filter_map(Result::ok) {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let dir = e.path();
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if let Some(image) = lab_guest_image(&args, &kernels) {
            let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
            let field = |k: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(k))
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse::<u32>().ok())
            };
            if field("Uid:") == Some(me) && field("PPid:") == Some(1) {
                out.push((pid, image));
            }
        }
    }
    out
}

/// The kernel image of a lab guest's QEMU command line `args`, when it is
/// one: a `qemu-system-*` program, `-kernel` under `kernels`, and the
/// agent's port.
pub fn lab_guest_image(args: &[String], kernels: &Path) -> Option<String> {
    let prog = Path::new(args.first()?).file_name()?.to_str()?;
    if !prog.starts_with("qemu-system-") {
        return None;
    }
    let i = args.iter().position(|a| a == "-kernel")?;
    let image = args.get(i + 1)?;
    let under = Path::new(image).starts_with(kernels);
    let port = args.iter().any(|a| a.contains("name=readpath.agent"));
    (under && port).then(|| image.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lab_path_with_a_comma_is_refused_before_anything_is_made() {
        let d = tempfile::tempdir().unwrap();
        let data = d.path().join("a,format=qcow2");
        let spec = VmSpec {
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
        };
        let e = prepare(&data, &spec, None, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("holds a ','"), "{e}");
        assert!(!data.exists(), "nothing made");
    }

    #[test]
    fn only_a_qemu_this_lab_started_is_a_lab_guest() {
        let k = Path::new("/d/lab/kernels");
        let args = |prog: &str, image: &str, port: &str| -> Vec<String> {
            [prog, "-kernel", image, "-device", port]
                .iter()
                .map(|s| s.to_string())
                .collect()
        };
        let ours = args(
            "/usr/bin/qemu-system-x86_64",
            "/d/lab/kernels/6.1/vmlinuz",
            "virtserialport,chardev=agent,name=readpath.agent",
        );
        assert_eq!(
            lab_guest_image(&ours, k).as_deref(),
            Some("/d/lab/kernels/6.1/vmlinuz")
        );
        for other in [
            args(
                "/usr/bin/bash",
                "/d/lab/kernels/6.1/vmlinuz",
                "name=readpath.agent",
            ),
            args("qemu-system-x86_64", "/boot/vmlinuz", "name=readpath.agent"),
            args(
                "qemu-system-x86_64",
                "/d/lab/kernels/6.1/vmlinuz",
                "virtserialport",
            ),
        ] {
            assert_eq!(lab_guest_image(&other, k), None, "{other:?}");
        }
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
        );
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
        while size() > CONSOLE_CAP {
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
