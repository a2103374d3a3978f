//! The lab guest's initramfs, made here from files this machine already
//! has: a `newc` cpio archive (the format the kernel unpacks into its
//! rootfs, `Documentation/driver-api/early-userspace/buffer-format.rst`)
//! holding busybox-static, the kernel modules the guest needs in the order
//! their dependencies ask, readpath itself and an `/init` that mounts what
//! readpath needs and runs `readpath agent` on the virtio console.
//!
//! Nothing here runs a program or touches the system: the archive is bytes
//! and the module order comes from the modules' own `.modinfo` sections
//! (`depends=`), so a kernel package unpacked without `depmod` is enough.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::files::{Expect, Named};

/// A `newc` cpio archive being written.
#[derive(Debug, Default)]
pub struct Cpio {
    out: Vec<u8>,
    ino: u32,
}

/// `S_IFDIR`, `S_IFREG`, `S_IFLNK`, `S_IFCHR`.
const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

impl Cpio {
    /// An empty archive.
    pub fn new() -> Cpio {
        Cpio::default()
    }

    fn pad(&mut self) {
        while !self.out.len().is_multiple_of(4) {
            self.out.push(0);
        }
    }

    /// One entry: the 110-byte header (magic `070701` and thirteen
    /// 8-digit hex fields), the name with its NUL, padding to 4, the data,
    /// padding to 4.
    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        self.ino += 1;
        let fields = [
            self.ino,
            mode,
            0, // uid
            0, // gid
            if mode & 0o170000 == S_IFDIR { 2 } else { 1 },
            0, // mtime: reproducible archives
            data.len() as u32,
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0, // check
        ];
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }

    /// A directory (`path` without a leading `/`).
    pub fn dir(&mut self, path: &str) {
        self.entry(path, S_IFDIR | 0o755, (0, 0), &[]);
    }

    /// A regular file with permission bits `perm`.
    pub fn file(&mut self, path: &str, perm: u32, data: &[u8]) {
        self.entry(path, S_IFREG | (perm & 0o7777), (0, 0), data);
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, path: &str, target: &str) {
        self.entry(path, S_IFLNK | 0o777, (0, 0), target.as_bytes());
    }

    /// A character device node (`/dev/console` must exist before the
    /// kernel runs `/init`, or init has no stdout).
    pub fn char_dev(&mut self, path: &str, perm: u32, major: u32, minor: u32) {
        self.entry(path, S_IFCHR | (perm & 0o7777), (major, minor), &[]);
    }

    /// The archive, ended by its `TRAILER!!!` entry.
    pub fn finish(mut self) -> Vec<u8> {
        self.ino = 0;
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.out
    }
}

/// A module's name as the kernel and `depends=` spell it: file stem, `-`
/// as `_`.
fn module_name(file_stem: &str) -> String {
    file_stem.replace('-', "_")
}

/// The `depends=` list of a module's `.modinfo` (`key=value\0` strings):
/// empty where it has none.
pub fn module_depends(ko: &[u8]) -> Vec<String> {
    const KEY: &[u8] = b"\0depends=";
    let Some(at) = ko.windows(KEY.len()).position(|w| w == KEY) else {
        return Vec::new();
    };
    let rest = &ko[at + KEY.len()..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end])
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(module_name)
        .collect()
}

/// The most bytes a kernel's `modules.builtin` may hold (Debian 12's
/// cloud kernel's is 4.5 KiB: one line per built-in module).
pub const LIST_CAP: u64 = 4 << 20;

/// The most bytes one kernel module may hold (the largest of Debian 12's
/// cloud kernel, xfs.ko, is 4.0 MiB).
pub const MODULE_CAP: u64 = 64 << 20;

const MODULE_LIST: Expect = Expect {
    what: "a kernel's modules.builtin list",
    cap: LIST_CAP,
};

const MODULE: Expect = Expect {
    what: "a kernel module (.ko)",
    cap: MODULE_CAP,
};

/// A module's bytes (`path` found in a kernel's tree): a regular file of
/// at most [`MODULE_CAP`], never read through a link, a stop signal ending
/// the read.
pub fn read_module(path: &Path) -> std::io::Result<Vec<u8>> {
    crate::files::read_file(path, Named::Found, MODULE, &path.display().to_string())
        .map_err(Into::into)
}

/// The modules of one kernel (`lib/modules/VERSION`): where each is and
/// which are built in.
#[derive(Debug, Clone)]
pub struct Modules {
    by_name: HashMap<String, PathBuf>,
    builtin: HashSet<String>,
}

impl Modules {
    /// Reads the tree under `dir` (`.../lib/modules/VERSION`): every
    /// `*.ko` below `kernel/`, and `modules.builtin` (a regular file of at
    /// most [`LIST_CAP`], never read through a link; none: nothing is
    /// built in). Links in the tree are not followed: a module is a
    /// regular file in it.
    pub fn read(dir: &Path) -> std::io::Result<Modules> {
        let mut by_name = HashMap::new();
        let top = dir.join("kernel");
        let mut stack = Vec::new();
        if std::fs::symlink_metadata(&top).is_ok_and(|m| m.is_dir()) {
            stack.push(top);
        }
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d)? {
                let e = e?;
                let t = e.file_type()?;
                let p = e.path();
                if t.is_dir() {
                    stack.push(p);
                } else if t.is_file()
                    && let Some(stem) = p
                        .file_name()
                        .and_then(|n| n.to_str())
                        .and_then(|n| n.strip_suffix(".ko"))
                {
                    by_name.insert(module_name(stem), p);
                }
            }
        }
        let list = dir.join("modules.builtin");
        let builtin = match crate::files::read_file(
            &list,
            Named::Found,
            MODULE_LIST,
            &list.display().to_string(),
        ) {
            Ok(bytes) => String::from_utf8_lossy(&bytes)
                .lines()
                .filter_map(|l| l.rsplit('/').next())
                .filter_map(|f| f.strip_suffix(".ko"))
                .map(module_name)
                .collect(),
            Err(e) if e.is_not_found() => HashSet::new(),
            Err(e) => return Err(e.into()),
        };
        Ok(Modules { by_name, builtin })
    }

    /// Whether `name` is built into the kernel.
    pub fn is_builtin(&self, name: &str) -> bool {
        self.builtin.contains(&module_name(name))
    }

    /// The modules to load for `wanted`, dependencies first, each once;
    /// built-in ones left out. `read` gives a module's bytes (the file, in
    /// practice). A wanted module that is neither a file nor built in is
    /// an error naming it; so is a dependency.
    pub fn load_order(
        &self,
        wanted: &[&str],
        read: &mut dyn FnMut(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Result<Vec<(String, PathBuf)>, ModuleError> {
        fn visit(
            m: &Modules,
            name: &str,
            read: &mut dyn FnMut(&Path) -> std::io::Result<Vec<u8>>,
            seen: &mut HashSet<String>,
            out: &mut Vec<(String, PathBuf)>,
            needed_by: Option<&str>,
        ) -> Result<(), ModuleError> {
            let name = module_name(name);
            if m.builtin.contains(&name) || !seen.insert(name.clone()) {
                return Ok(());
            }
            let Some(path) = m.by_name.get(&name) else {
                return Err(ModuleError::Missing {
                    name,
                    needed_by: needed_by.map(str::to_string),
                });
            };
            let bytes = read(path).map_err(|source| ModuleError::Read {
                path: path.clone(),
                source,
            })?;
            for dep in module_depends(&bytes) {
                visit(m, &dep, read, seen, out, Some(&name))?;
            }
            out.push((name, path.clone()));
            Ok(())
        }
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for w in wanted {
            visit(self, w, read, &mut seen, &mut out, None)?;
        }
        Ok(out)
    }
}

/// Why a module cannot be loaded in a guest ([`Modules::load_order`]).
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// Neither a module file nor built in.
    #[error(
        "module {name}{}: neither a file under lib/modules nor built in",
        needed_by.as_ref().map_or(String::new(), |n| format!(" (needed by {n})"))
    )]
    Missing {
        /// The module.
        name: String,
        /// The module that needs it, if it is a dependency.
        needed_by: Option<String>,
    },
    /// Its file could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The modules a lab guest loads where the kernel has them as modules:
/// the virtio PCI bus, disk and console; the ciphers and hashes fscrypt
/// asks for (sha512 for its HKDF: without it adding a key fails with
/// "Error allocating hmac(sha512): -2"); AES instructions; AF_ALG (the
/// model's `pipeline.cipher = kernel`); the loop device.
pub const GUEST_MODULES: &[&str] = &[
    "virtio_pci",
    "virtio_blk",
    "virtio_console",
    "sha512_generic",
    "ecb",
    "cts",
    "xts",
    "aesni_intel",
    "af_alg",
    "algif_skcipher",
    "algif_hash",
    "loop",
];

/// Modules of [`GUEST_MODULES`] a guest can do without (the kernel may
/// lack them, or the CPU the instructions): missing, they are left out
/// with a note rather than failing the boot.
pub const OPTIONAL_MODULES: &[&str] = &["aesni_intel", "algif_skcipher", "algif_hash", "af_alg"];

/// The guest's `/init`: busybox's applets, the pseudo-filesystems readpath
/// reads (proc, sysfs, devtmpfs, tracefs, cgroup v2, a tmpfs /tmp and
/// /run), the modules in order, the lab disk mounted at `/lab`, then one
/// shell command line with its stdin and stdout on the virtio serial port
/// `readpath.agent` and its stderr on the serial console: the line the
/// kernel's command line carries as `readpath.cmd=BASE64` ([`cmdline_arg`]),
/// else `default_line` (the agent). When it ends, the guest powers off.
/// `modules` are paths inside the archive.
pub fn init_script(modules: &[String], default_line: &str) -> String {
    let mut s = String::from(
        "#!/bin/busybox sh\n\
         /bin/busybox --install -s /bin\n\
         export PATH=/bin:/sbin\n\
         mount -t proc proc /proc\n\
         hostname readpath-lab\n\
         mount -t sysfs sysfs /sys\n\
         mount -t devtmpfs devtmpfs /dev\n\
         mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null\n\
         mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null\n\
         mount -t tmpfs tmpfs /tmp\n\
         mount -t tmpfs tmpfs /run\n",
    );
    for m in modules {
        s.push_str(&format!(
            "insmod {m} || echo \"readpath-lab: insmod {m} failed\"\n"
        ));
    }
    // readpath's stderr reaches the console through a pipe (`| cat`): on
    // the console itself, a terminal, it would draw progress bars into the
    // console log.
    // The port is the virtio serial port QEMU names `readpath.agent` (a
    // character device, no tty: no echo, no line discipline), found by its
    // name in sysfs. A port opens once: stdin read-write, stdout its copy.
    s.push_str(
        "port=\n\
         for i in $(seq 100); do\n\
         \x20 for p in /sys/class/virtio-ports/*; do\n\
         \x20   [ \"$(cat $p/name 2>/dev/null)\" = readpath.agent ] && port=/dev/${p##*/}\n\
         \x20 done\n\
         \x20 [ -b /dev/vda ] && [ -n \"$port\" ] && [ -c \"$port\" ] && break\n\
         \x20 sleep 0.1\n\
         done\n\
         mkdir -p /lab\n\
         mount -t ext4 /dev/vda /lab || echo 'readpath-lab: no lab disk'\n\
         mkdir -p -m 0700 /lab/data /lab/kernel\n\
         cd /lab\n\
         cmd=$(sed -n 's/.*readpath[.]cmd=\\([A-Za-z0-9+/=]*\\).*/\\1/p' /proc/cmdline)\n",
    );
    s.push_str(&format!(
        "if [ -n \"$cmd\" ]; then line=$(echo \"$cmd\" | base64 -d); else line={}; fi\n",
        sh_word(default_line)
    ));
    s.push_str(
        "echo \"readpath-lab: ready, port $port: $line\"\n\
         { sh -c \"$line\" <>\"$port\" >&0 2>&3 3>&-; echo $? >/readpath-status; } 3>&1 | cat\n\
         status=$(cat /readpath-status 2>/dev/null || echo 255)\n\
         echo\n\
         echo \"readpath-lab: ended ($status)\"\n\
         cd /\n\
         sync\n\
         umount /lab 2>/dev/null\n\
         poweroff -f\n",
    );
    s
}

/// The kernel command line's `readpath.cmd=` for shell line `line`:
/// base64, so that no character of it means anything to the kernel's
/// parser or to init's.
pub fn cmdline_arg(line: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = line.as_bytes();
    let mut out = String::from("readpath.cmd=");
    for chunk in b.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `s` as one word for the guest's shell.
fn sh_word(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact bytes of a two-entry archive, as the kernel's
    /// `init/initramfs.c` parses them.
    #[test]
    fn a_newc_archive_is_byte_exact() {
        let mut c = Cpio::new();
        c.dir("bin");
        c.file("bin/x", 0o755, b"hi");
        let a = c.finish();
        let want_dir = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}bin\0",
            1, 0o040755, 0, 0, 2, 0, 0, 0, 0, 0, 0, 4, 0
        );
        assert_eq!(&a[..want_dir.len()], want_dir.as_bytes());
        // 110 + 4 = 114 bytes, padded to 116.
        assert_eq!(&a[114..116], b"\0\0");
        let file = &a[116..];
        assert!(file.starts_with(b"070701"));
        let field = |i: usize| {
            u32::from_str_radix(
                std::str::from_utf8(&file[6 + 8 * i..14 + 8 * i]).unwrap(),
                16,
            )
            .unwrap()
        };
        assert_eq!(field(1), 0o100755);
        assert_eq!(field(6), 2, "file size");
        assert_eq!(field(11), 6, "name size with its NUL");
        // Header 110 + name 6 = 116, a multiple of 4: data follows at once.
        assert_eq!(&file[110..116], b"bin/x\0");
        assert_eq!(&file[116..118], b"hi");
        assert_eq!(&file[118..120], b"\0\0");
        let trailer = &file[120..];
        assert!(trailer.starts_with(b"070701"));
        assert_eq!(&trailer[110..121], b"TRAILER!!!\0");
        assert_eq!(a.len() % 4, 0);
    }

    #[test]
    fn depends_are_read_from_modinfo() {
        let ko = b"\x7fELF junk\0license=GPL\0depends=virtio_ring,virtio\0retpoline=Y\0";
        assert_eq!(module_depends(ko), ["virtio_ring", "virtio"]);
        assert!(module_depends(b"\0depends=\0name=x\0").is_empty());
        assert!(module_depends(b"no modinfo").is_empty());
    }

    #[test]
    fn modules_load_after_their_dependencies_and_builtins_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("kernel/drivers");
        std::fs::create_dir_all(&k).unwrap();
        let files = [
            ("virtio_blk.ko", "depends=virtio,virtio_ring"),
            ("virtio_ring.ko", "depends="),
            ("virtio.ko", "depends=virtio_ring"),
            ("algif-skcipher.ko", "depends=af_alg"),
            ("af_alg.ko", "depends="),
        ];
        for (f, d) in files {
            std::fs::write(k.join(f), format!("x\0{d}\0")).unwrap();
        }
        std::fs::write(dir.path().join("modules.builtin"), "kernel/crypto/xts.ko\n").unwrap();
        let m = Modules::read(dir.path()).unwrap();
        let mut read = |p: &Path| std::fs::read(p);
        let order: Vec<String> = m
            .load_order(&["virtio_blk", "xts", "algif_skcipher"], &mut read)
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            order,
            [
                "virtio_ring",
                "virtio",
                "virtio_blk",
                "af_alg",
                "algif_skcipher"
            ]
        );
        assert!(m.is_builtin("xts"));
        let e = m.load_order(&["nope"], &mut read).unwrap_err().to_string();
        assert!(e.contains("module nope"), "{e}");
    }

    #[test]
    fn a_module_list_or_module_that_is_no_regular_file_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("kernel");
        std::fs::create_dir_all(&k).unwrap();
        std::fs::write(k.join("virtio.ko"), "x\0depends=\0").unwrap();
        let list = dir.path().join("modules.builtin");
        // None: nothing is built in.
        assert!(!Modules::read(dir.path()).unwrap().is_builtin("xts"));
        // A link to /dev/zero was read to 2.1 GB; to a FIFO it hung.
        std::os::unix::fs::symlink("/dev/zero", &list).unwrap();
        let e = Modules::read(dir.path()).unwrap_err();
        assert!(e.to_string().contains("is a symbolic link"), "{e}");
        std::fs::remove_file(&list).unwrap();
        crate::sys::make_fifo(&list, 0o600).unwrap();
        let e = Modules::read(dir.path()).unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        std::fs::remove_file(&list).unwrap();
        std::fs::File::create(&list)
            .unwrap()
            .set_len(LIST_CAP + 1)
            .unwrap();
        let e = Modules::read(dir.path()).unwrap_err();
        assert!(e.to_string().contains("at most 4 MiB"), "{e}");
        // A module is read the same way; a linked one is not one.
        let fifo = k.join("fifo.ko");
        crate::sys::make_fifo(&fifo, 0o600).unwrap();
        let e = read_module(&fifo).unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        std::os::unix::fs::symlink("/dev/zero", k.join("zero.ko")).unwrap();
        let e = read_module(&k.join("zero.ko")).unwrap_err();
        assert!(e.to_string().contains("is a symbolic link"), "{e}");
        std::fs::remove_file(&list).unwrap();
        let m = Modules::read(dir.path()).unwrap();
        let mut read = |p: &Path| read_module(p);
        assert!(m.load_order(&["virtio"], &mut read).is_ok());
        let e = m.load_order(&["zero"], &mut read).unwrap_err().to_string();
        assert!(e.contains("neither a file"), "{e}");
    }

    #[test]
    fn the_init_script_runs_the_line_it_is_given_or_the_agent() {
        let s = init_script(&["/lib/modules/virtio.ko".into()], "exec agent --x='it's'");
        assert!(s.contains("insmod /lib/modules/virtio.ko"));
        assert!(
            s.contains(r#"else line='exec agent --x='\''it'\''s'\'''; fi"#),
            "{s}"
        );
        assert!(s.contains(r#"sh -c "$line" <>"$port" >&0"#));
        assert!(s.ends_with("poweroff -f\n"));
        // RFC 4648's vectors.
        for (plain, b64) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
        ] {
            assert_eq!(cmdline_arg(plain), format!("readpath.cmd={b64}"));
        }
    }
}
