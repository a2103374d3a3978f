//! The kernel target's files: the dataset's plaintext written through the
//! running kernel's own fscrypt (and fs-verity where it has it), one file
//! per combination of decryption and verity, for `workload.target =
//! "kernel"` to read with the same readers the model uses.
//!
//! With `kernel.dir` empty the files live on an ext4 image (`-O encrypt`,
//! and `verity` where the kernel's ext4 has it) under the data dir, kept
//! between runs and loop-mounted only while a run uses it ([`ScratchFs`]:
//! recorded before the mount, unmounted on drop or by the next start after
//! a crash). With `kernel.dir` set they live in `readpath/` under that
//! directory. Either way the dataset's master key is added to the
//! filesystem for the run (`FS_IOC_ADD_ENCRYPTION_KEY`) and removed after
//! it, and each encrypted file sits in a directory with a v2 policy of its
//! contents mode. A file is written once per dataset (named by the
//! dataset's fs-verity digest, written under a temporary name and renamed
//! when whole), so a later run reads it at once.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::{ScratchFs, TARGET_IMAGE, fscrypt, fsverity};
use crate::crypto::CipherKind;
use crate::dataset::{Dataset, Variant};
use crate::sys::trust;

/// Which of the kernel target's files a run reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileKind {
    /// Encrypted (fscrypt contents in `mode`).
    pub decrypt: bool,
    /// fs-verity enabled.
    pub verity: bool,
    /// The fscrypt contents mode (`fscrypt::MODE_*`).
    pub mode: u8,
}

impl FileKind {
    /// The file of settings' `decrypt`, `verity` and `cipher` (software
    /// AES is the same AES-256-XTS contents mode: the kernel picks its own
    /// driver).
    pub fn of(decrypt: bool, verity: bool, cipher: CipherKind) -> FileKind {
        FileKind {
            decrypt,
            verity,
            mode: match cipher {
                CipherKind::Adiantum => fscrypt::MODE_ADIANTUM,
                _ => fscrypt::MODE_AES_256_XTS,
            },
        }
    }

    fn mode_name(self) -> &'static str {
        if self.mode == fscrypt::MODE_ADIANTUM {
            "adiantum"
        } else {
            "aes-256-xts"
        }
    }
}

/// The kernel target's filesystem for one run: mounted (or the user's
/// directory), the dataset's key added; undone on drop.
pub struct KernelTarget {
    /// The image, when readpath made it (`kernel.dir` empty).
    fs: Option<ScratchFs>,
    /// Where the files live.
    base: PathBuf,
    /// The filesystem's root (or `kernel.dir`), for the key ioctls.
    key_dir: Option<File>,
    /// The identifier of the key added for the run.
    key_id: Option<[u8; 16]>,
    /// The data dir (free space is checked there for the image).
    data_dir: PathBuf,
    /// The block device holding the files (major, minor).
    pub device: (u32, u32),
    /// How the target is described: "ext4 image DATA_DIR/kernel/target.img
    /// (loop7)" or the user's directory.
    pub describe: String,
}

/// Bytes of image for a dataset of `file_size`: room for each file kind
/// (plain, two ciphers, each with and without verity: six copies, the
/// trees a 128th more) and the filesystem's own metadata.
pub fn image_bytes(file_size: u64) -> u64 {
    (file_size * 6 + file_size / 128 * 4 + (128 << 20)).max(256 << 20)
}

fn other(msg: String) -> io::Error {
    io::Error::other(msg)
}

impl KernelTarget {
    /// Opens the target for a dataset of `file_size`: `dir` (an absolute
    /// path, `kernel.dir`) or, when empty, the image under `data_dir`,
    /// mounted now. Adds the dataset's master key. Errors name what is
    /// missing (root, a loop device, mkfs.ext4, the `encrypt` feature).
    pub fn open(data_dir: &Path, dir: &str, ds: &Dataset) -> io::Result<KernelTarget> {
        let (fs, root) = if dir.is_empty() {
            let fs = ScratchFs::mount_spec(data_dir, &TARGET_IMAGE, image_bytes(ds.file_size()))?;
            let root = fs.mnt.clone();
            (Some(fs), root)
        } else {
            let root = PathBuf::from(dir);
            let m = std::fs::metadata(&root)
                .map_err(|e| io::Error::new(e.kind(), format!("kernel.dir {dir}: {e}")))?;
            if !m.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("kernel.dir {dir}: not a directory"),
                ));
            }
            // readpath writes there as root: the same trust rule as the
            // data dir's.
            trust::check_dir(&root).map_err(|u| {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("kernel.dir {dir}: not trusted: {u}"),
                )
            })?;
            (None, root)
        };
        // `readpath/` is made here or must be readpath's (a link there is
        // refused, never followed), before anything is written or added.
        let base = root.join("readpath");
        trust::ensure_dir(&base).map_err(|e| {
            io::Error::new(e.kind(), format!("kernel target {}: {e}", base.display()))
        })?;
        let key_dir = File::open(&root)?;
        let key_id = fscrypt::add_key(&key_dir, ds.master_key()).map_err(|e| {
            let why = match e.kind() {
                io::ErrorKind::Unsupported => {
                    " (the filesystem has no encrypt feature: tune2fs -O encrypt, or leave kernel.dir empty)"
                }
                io::ErrorKind::PermissionDenied => " (needs root)",
                _ => "",
            };
            io::Error::new(
                e.kind(),
                format!("adding the dataset's key to {}: {e}{why}", root.display()),
            )
        })?;
        // From here on an error drops `t`, which removes the key again.
        let mut t = KernelTarget {
            fs,
            base,
            key_dir: Some(key_dir),
            key_id: Some(key_id),
            data_dir: data_dir.to_path_buf(),
            device: (0, 0),
            describe: String::new(),
        };
        // The device described is the one the files are on.
        t.device = super::device_of(&t.base)?;
        t.describe = match &t.fs {
            Some(f) => format!(
                "ext4 image {} ({}, {}:{}) at {}",
                f.image.display(),
                f.loop_device.display(),
                t.device.0,
                t.device.1,
                f.mnt.display()
            ),
            None => format!(
                "{} (device {}:{})",
                t.base.display(),
                t.device.0,
                t.device.1
            ),
        };
        Ok(t)
    }

    /// The path of the file of `kind` for `ds`, written through the kernel
    /// first when it is missing (`progress` gets bytes written and the
    /// total). Errors: the kernel lacks the cipher (ENOPKG) or fs-verity
    /// (EOPNOTSUPP), or the disk is full.
    pub fn file(
        &mut self,
        ds: &Dataset,
        kind: FileKind,
        progress: crate::dataset::Progress<'_>,
    ) -> io::Result<PathBuf> {
        let id = hex::encode(&ds.tree().file_digest()[..8]);
        let name = format!(
            "data-{}-{id}{}",
            ds.file_size(),
            if kind.verity { "-verity" } else { "" }
        );
        let dir = self.file_dir(kind)?;
        let path = dir.join(&name);
        // An existing file must be readpath's own regular file (a link, a
        // FIFO or another user's file there is refused, not read).
        match trust::open_own_file(&path, crate::sys::oflag::O_RDONLY) {
            Ok(f) if f.metadata().is_ok_and(|m| m.len() == ds.file_size()) => return Ok(path),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let need = ds.file_size() + (64 << 20);
        if self.fs.is_some()
            && let Some(free) = crate::sys::free_bytes(&self.data_dir)
            && free < need
        {
            return Err(other(format!(
                "writing the kernel target's {} file needs {} free in {}; {} are",
                crate::settings::format_size(ds.file_size()),
                crate::settings::format_size(need),
                self.data_dir.display(),
                crate::settings::format_size(free)
            )));
        }
        let salt = hex::decode(&ds.header().salt)
            .map_err(|e| other(format!("the dataset's salt: {e}")))?;
        let tmp = dir.join(format!(".tmp-{name}"));
        let _ = std::fs::remove_file(&tmp);
        let written = write_file(ds, kind, &tmp, &path, &salt, progress);
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(path)
    }

    /// The directory a file of `kind` goes in: the base, or (decryption on) its encrypted directory for the mode and key, made and given its policy.
    fn file_dir(&self, kind: FileKind) -> io::Result<PathBuf> {
        Ok(if kind.decrypt {
            let key_id = self.key_id.unwrap_or_default();
            let d = self.base.join(format!(
                "enc-{}-{}",
                kind.mode_name(),
                hex::encode(&key_id[..4])
            ));
            trust::ensure_dir(&d)?;
            // Setting the same policy again is allowed; another is EEXIST.
            fscrypt::set_policy(&File::open(&d)?, &fscrypt::PolicyV2::new(kind.mode, key_id))
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!(
                            "setting a v2 {} policy on {}: {e}",
                            kind.mode_name(),
                            d.display()
                        ),
                    )
                })?;
            d
        } else {
            self.base.clone()
        })
    }

    /// Where the files live.
    pub fn base(&self) -> &Path {
        &self.base
    }
}

/// Copies the dataset's plaintext into `tmp` (encrypted by the kernel where its directory is), enables fs-verity when asked, and renames it to `path`.
fn write_file(
    ds: &Dataset,
    kind: FileKind,
    tmp: &Path,
    path: &Path,
    salt: &[u8],
    progress: crate::dataset::Progress<'_>,
) -> io::Result<()> {
    let mut f = trust::create_new(tmp, 0o600)?;
    let mut src = File::open(ds.path(Variant::Plain))?;
    let total = ds.file_size();
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0u64;
    while done < total {
        let n = src.read(&mut buf)?;
        if n == 0 {
            return Err(other(format!(
                "{}: shorter than the dataset ({done} of {total} bytes)",
                ds.path(Variant::Plain).display()
            )));
        }
        f.write_all(&buf[..n])?;
        done += n as u64;
        progress(done, total);
        if crate::sys::stop_requested() {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "stopped while writing the kernel target's file",
            ));
        }
    }
    f.sync_all()?;
    drop(f);
    if kind.verity {
        let ro = File::open(tmp)?;
        fsverity::enable(&ro, crate::dataset::VERITY_BLOCK_SIZE as u32, salt)
            .map_err(|e| io::Error::new(e.kind(), format!("FS_IOC_ENABLE_VERITY: {e}")))?;
    }
    std::fs::rename(tmp, path)?;
    Ok(())
}

impl Drop for KernelTarget {
    fn drop(&mut self) {
        let dir = self.key_dir.take();
        if let (Some(id), Some(d)) = (self.key_id.take(), &dir) {
            let _ = fscrypt::remove_key(d, id);
        }
        // Closed before the unmount: an open directory on the image keeps
        // the mount busy (it would be detached lazily, 2 s later).
        drop(dir);
        // The image is unmounted (and its loop device detached) by its
        // ScratchFs.
        let _ = self.fs.take();
    }
}
