//! The dataset readpath reads: a deterministic plaintext, its fscrypt-style
//! ciphertexts and its fs-verity Merkle tree, on disk, with a header.
//!
//! One directory per file size under the data dir holds:
//! - `header.json`: format version, size, seed, key material, salt, root hash
//!   and file digest (the key is stored in the clear: this is a benchmark
//!   dataset, not a secret);
//! - `plain.bin`: the plaintext (read when decryption is off, as an
//!   unencrypted fs-verity file would be);
//! - `aes-256-xts.bin` and `adiantum.bin`: the plaintext encrypted per
//!   4096-byte data unit the way fscrypt v2 encrypts file contents;
//! - `merkle.bin`: the fs-verity tree over the plaintext, in the kernel's
//!   stored order (what an unencrypted fs-verity file stores past EOF);
//! - `aes-256-xts.tree` and `adiantum.tree`: that tree as an encrypted
//!   file stores it: ext4 keeps it past EOF at `round_up(i_size, 64K)`,
//!   encrypted with the file's contents key, each data unit's IV its
//!   position there ([`tree_first_unit`]); the model's workers read it
//!   through the page cache when a hash page is not cached.
//!
//! The plaintext is a pure function of the seed, so a dataset can be rebuilt
//! bit for bit. A dataset is built in a temporary directory and renamed into
//! place: a failed prepare leaves nothing behind and never touches a good
//! dataset; a missing, truncated, outdated or mismatched one is detected on
//! open and rebuilt.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::crypto::{CipherKind, ContentsCipher, DATA_UNIT_SIZE};
use crate::verity::merkle::{MerkleBuilder, MerkleParams, MerkleTree};

/// Bumped whenever the on-disk layout or content generation changes.
pub const FORMAT_VERSION: u32 = 2;
/// Seed of the default dataset.
pub const DEFAULT_SEED: u64 = 0x7265_6164_7061_7468; // "readpath"
/// fs-verity block size of the dataset's tree.
pub const VERITY_BLOCK_SIZE: usize = 4096;
const CHUNK: usize = 1 << 20;

/// Errors opening or preparing a dataset.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The data dir cannot be created or written.
    #[error("data dir {path}: {source}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Not enough free space.
    #[error(
        "data dir {path}: preparing a {size} dataset needs {needed} bytes, only {free} are free"
    )]
    NoSpace {
        /// The directory.
        path: PathBuf,
        /// Human size of the dataset.
        size: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes free.
        free: u64,
    },
    /// Writing failed (the partial dataset was removed).
    #[error("preparing dataset in {path} failed (nothing was left behind): {source}")]
    Write {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The dataset on disk is unusable (reason given); it will be rebuilt.
    #[error("dataset {path}: {reason}")]
    Invalid {
        /// The directory.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl DatasetError {
    /// True when the user can fix it by choosing another data dir or size
    /// (exit status 2), as opposed to a failure while writing.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            DatasetError::DataDir { .. } | DatasetError::NoSpace { .. }
        )
    }
}

/// The JSON header of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT_VERSION`] at creation.
    pub format_version: u32,
    /// Plaintext size in bytes.
    pub file_size: u64,
    /// Seed of the plaintext generator.
    pub seed: u64,
    /// fscrypt master key (hex, 64 bytes).
    pub master_key: String,
    /// fscrypt per-file nonce (hex, 16 bytes).
    pub nonce: String,
    /// fs-verity salt (hex, may be empty).
    pub salt: String,
    /// fs-verity block size.
    pub verity_block_size: usize,
    /// Merkle root hash (hex).
    pub root_hash: String,
    /// fs-verity file digest (hex), as `fsverity digest` prints it.
    pub file_digest: String,
}

/// Which file of the dataset a read goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The plaintext (decryption off).
    Plain,
    /// Ciphertext of a contents cipher.
    Cipher(CipherKind),
}

impl Variant {
    /// File name inside the dataset directory.
    pub fn file_name(self) -> &'static str {
        match self {
            Variant::Plain => "plain.bin",
            Variant::Cipher(CipherKind::Adiantum) => "adiantum.bin",
            Variant::Cipher(_) => "aes-256-xts.bin",
        }
    }

    /// The variant read by a pipeline that decrypts with `cipher` (or not).
    pub fn for_pipeline(decrypt: bool, cipher: CipherKind) -> Variant {
        if decrypt {
            Variant::Cipher(cipher)
        } else {
            Variant::Plain
        }
    }
}

/// Where ext4 stores the Merkle tree of a file of `file_size` bytes:
/// `ext4_verity_metadata_pos()`, past EOF rounded up to 64 KiB.
pub fn tree_pos(file_size: u64) -> u64 {
    file_size.div_ceil(1 << 16) << 16
}

/// The fscrypt data unit index of the tree's first byte: the IV of its
/// first data unit (each next unit's is one more), as ext4 encrypts its
/// pages past EOF like any other page of the file.
pub fn tree_first_unit(file_size: u64) -> u64 {
    tree_pos(file_size) / DATA_UNIT_SIZE as u64
}

/// The file holding the Merkle tree as a file read with `v` stores it.
pub fn tree_file_name(v: Variant) -> &'static str {
    match v {
        Variant::Plain => "merkle.bin",
        Variant::Cipher(CipherKind::Adiantum) => "adiantum.tree",
        Variant::Cipher(_) => "aes-256-xts.tree",
    }
}

/// An opened, validated dataset.
pub struct Dataset {
    dir: PathBuf,
    header: Header,
    master_key: Vec<u8>,
    nonce: [u8; 16],
    tree: MerkleTree,
}

/// What `prepare` reports as it goes: (bytes done, bytes total).
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

/// How an open went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenOutcome {
    /// A valid dataset was already there.
    Existing,
    /// None was there: built.
    Created,
    /// One was there but unusable: rebuilt (the reason).
    Rebuilt(String),
}

/// The default data dir: `$XDG_CACHE_HOME/readpath`, else `~/.cache/readpath`.
pub fn default_data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("readpath");
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".cache").join("readpath")
}

/// Directory of the dataset of `file_size` bytes under `data_dir`.
pub fn dataset_dir(data_dir: &Path, file_size: u64) -> PathBuf {
    data_dir.join(format!("dataset-{file_size}"))
}

/// Deterministic plaintext: block `b` of the file is a pure function of (seed, b).
pub fn fill_plaintext(seed: u64, offset: u64, buf: &mut [u8]) {
    debug_assert_eq!(offset % 8, 0);
    for (word, chunk) in (offset / 8..).zip(buf.chunks_mut(8)) {
        let v = splitmix64(seed ^ word.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn derive(seed: u64, what: &str, out: &mut [u8]) {
    for (counter, chunk) in (0u32..).zip(out.chunks_mut(32)) {
        let mut h = Sha256::new();
        h.update(b"readpath dataset ");
        h.update(what.as_bytes());
        h.update(seed.to_le_bytes());
        h.update(counter.to_le_bytes());
        let d = h.finalize();
        chunk.copy_from_slice(&d[..chunk.len()]);
    }
}

/// Refuses a data dir that cannot hold a dataset or that readpath may not
/// trust, with the reason: a path through a regular file, a kernel
/// pseudo-filesystem (procfs, sysfs), where nothing can be created and
/// "free space" means nothing, or a directory (or one above it) owned by
/// another user or writable by others ([`crate::sys::trust::check_dir`]:
/// whoever can write there could make readpath, as root, act for them).
pub fn check_data_dir(data_dir: &Path) -> Result<(), DatasetError> {
    let refuse = |why: String| DatasetError::DataDir {
        path: data_dir.to_path_buf(),
        source: io::Error::other(why),
    };
    let anc = crate::sys::nearest_existing_ancestor(data_dir);
    if !anc.is_dir() {
        return Err(refuse(format!(
            "{} is a file, not a directory: give a directory (it is created if missing)",
            anc.display()
        )));
    }
    if let Err(u) = crate::sys::trust::check_dir(data_dir) {
        return Err(refuse(format!("not trusted: {u}")));
    }
    let fs = crate::sys::fs_type_name(&anc);
    if matches!(
        fs.as_str(),
        "proc" | "sysfs" | "cgroup2" | "devpts" | "debugfs" | "tracefs" | "securityfs"
    ) {
        return Err(refuse(format!(
            "{} is on {fs}, a kernel pseudo-filesystem where no dataset can be written: give a directory on a disk filesystem",
            anc.display()
        )));
    }
    Ok(())
}

/// Bytes a dataset of `file_size` occupies (three data files plus the
/// tree, in plaintext and in both ciphers).
pub fn footprint(file_size: u64) -> u64 {
    let blocks = file_size.div_ceil(VERITY_BLOCK_SIZE as u64);
    3 * file_size + 3 * blocks * 33 + (1 << 20)
}

impl Dataset {
    /// Opens the dataset for `file_size`/`salt` under `data_dir`, building or
    /// rebuilding it when needed.
    pub fn open_or_prepare(
        data_dir: &Path,
        file_size: u64,
        salt: &[u8],
        progress: Progress<'_>,
    ) -> Result<(Dataset, OpenOutcome), DatasetError> {
        check_data_dir(data_dir)?;
        // What a killed prepare left (a rebuild's temporary directory beside
        // a valid dataset) goes now, not only at the next prepare.
        remove_stale(data_dir);
        let dir = dataset_dir(data_dir, file_size);
        match Dataset::open(data_dir, file_size, salt) {
            Ok(ds) => Ok((ds, OpenOutcome::Existing)),
            Err(DatasetError::Invalid { reason, .. }) => {
                let outcome = if dir.exists() {
                    OpenOutcome::Rebuilt(reason)
                } else {
                    OpenOutcome::Created
                };
                let ds = Dataset::prepare(data_dir, file_size, salt, DEFAULT_SEED, progress)?;
                Ok((ds, outcome))
            }
            Err(e) => Err(e),
        }
    }

    /// Opens and validates an existing dataset (size, salt, version, file
    /// lengths, the tree against the header's digest).
    pub fn open(data_dir: &Path, file_size: u64, salt: &[u8]) -> Result<Dataset, DatasetError> {
        let dir = dataset_dir(data_dir, file_size);
        let invalid = |reason: String| DatasetError::Invalid {
            path: dir.clone(),
            reason,
        };
        let text = fs::read_to_string(dir.join("header.json"))
            .map_err(|e| invalid(format!("header.json: {e}")))?;
        let header: Header = serde_json::from_str(&text)
            .map_err(|e| invalid(format!("header.json is not a readpath header ({e})")))?;
        if header.format_version != FORMAT_VERSION {
            return Err(invalid(format!(
                "format version {} (this readpath uses {FORMAT_VERSION})",
                header.format_version
            )));
        }
        if header.file_size != file_size {
            return Err(invalid(format!(
                "size {} does not match file_size {file_size}",
                header.file_size
            )));
        }
        if header.salt != hex::encode(salt) {
            return Err(invalid(format!(
                "salt \"{}\" does not match pipeline.salt \"{}\"",
                header.salt,
                hex::encode(salt)
            )));
        }
        for v in [
            Variant::Plain,
            Variant::Cipher(CipherKind::Aes256Xts),
            Variant::Cipher(CipherKind::Adiantum),
        ] {
            let p = dir.join(v.file_name());
            let len = fs::metadata(&p)
                .map_err(|e| invalid(format!("{}: {e}", v.file_name())))?
                .len();
            if len != file_size {
                return Err(invalid(format!(
                    "{} is {len} bytes, expected {file_size} (truncated?)",
                    v.file_name()
                )));
            }
        }
        let master_key =
            hex::decode(&header.master_key).map_err(|e| invalid(format!("master_key: {e}")))?;
        let nonce: [u8; 16] = hex::decode(&header.nonce)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or_else(|| invalid("nonce is not 16 hex bytes".into()))?;
        let digest: [u8; 32] = hex::decode(&header.file_digest)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or_else(|| invalid("file_digest is not 32 hex bytes".into()))?;
        let tree_bytes =
            fs::read(dir.join("merkle.bin")).map_err(|e| invalid(format!("merkle.bin: {e}")))?;
        let params = MerkleParams::new(header.verity_block_size, salt)
            .map_err(|e| invalid(format!("verity parameters: {e}")))?;
        let root: [u8; 32] = hex::decode(&header.root_hash)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or_else(|| invalid("root_hash is not 32 hex bytes".into()))?;
        let tree_len = tree_bytes.len() as u64;
        let tree = MerkleTree::from_stored_with_root(params, file_size, tree_bytes, &root, &digest)
            .map_err(|e| invalid(format!("merkle.bin: {e}")))?;
        for v in [
            Variant::Cipher(CipherKind::Aes256Xts),
            Variant::Cipher(CipherKind::Adiantum),
        ] {
            let name = tree_file_name(v);
            let len = fs::metadata(dir.join(name))
                .map_err(|e| invalid(format!("{name}: {e}")))?
                .len();
            if len != tree_len {
                return Err(invalid(format!(
                    "{name} is {len} bytes, expected {tree_len} (truncated?)"
                )));
            }
        }
        Ok(Dataset {
            dir,
            header,
            master_key,
            nonce,
            tree,
        })
    }

    /// Builds a dataset from scratch in a temporary directory and renames it
    /// into place (replacing an invalid one). On any failure nothing is left.
    pub fn prepare(
        data_dir: &Path,
        file_size: u64,
        salt: &[u8],
        seed: u64,
        progress: Progress<'_>,
    ) -> Result<Dataset, DatasetError> {
        // Refuse before creating anything.
        check_data_dir(data_dir)?;
        let needed = footprint(file_size);
        if let Some(free) = crate::sys::free_bytes(&crate::sys::nearest_existing_ancestor(data_dir))
            && free < needed
        {
            return Err(DatasetError::NoSpace {
                path: data_dir.to_path_buf(),
                size: crate::settings::format_size(file_size),
                needed,
                free,
            });
        }
        fs::create_dir_all(data_dir).map_err(|source| DatasetError::DataDir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        remove_stale(data_dir);
        let final_dir = dataset_dir(data_dir, file_size);
        let tmp = data_dir.join(format!(".dataset-{file_size}.tmp-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        if let Err(source) = build_into(&tmp, file_size, salt, seed, progress) {
            let _ = fs::remove_dir_all(&tmp);
            return Err(match source.kind() {
                io::ErrorKind::PermissionDenied => DatasetError::DataDir {
                    path: data_dir.to_path_buf(),
                    source,
                },
                _ => DatasetError::Write { path: tmp, source },
            });
        }
        // Swap into place: the old (invalid) dataset is moved aside first,
        // then removed once the new one is in.
        let old = data_dir.join(format!(".dataset-{file_size}.old-{}", std::process::id()));
        let had_old = final_dir.exists();
        let swap = (|| {
            if had_old {
                fs::rename(&final_dir, &old)?;
            }
            fs::rename(&tmp, &final_dir)
        })();
        if let Err(source) = swap {
            let _ = fs::remove_dir_all(&tmp);
            if had_old && !final_dir.exists() {
                let _ = fs::rename(&old, &final_dir);
            }
            return Err(DatasetError::Write {
                path: final_dir,
                source,
            });
        }
        if had_old {
            let _ = fs::remove_dir_all(&old);
        }
        Dataset::open(data_dir, file_size, salt)
    }

    /// The dataset directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Plaintext size.
    pub fn file_size(&self) -> u64 {
        self.header.file_size
    }

    /// Path of the file a pipeline reads.
    pub fn path(&self, v: Variant) -> PathBuf {
        self.dir.join(v.file_name())
    }

    /// Path of the Merkle tree as a file read with `v` stores it.
    pub fn tree_path(&self, v: Variant) -> PathBuf {
        self.dir.join(tree_file_name(v))
    }

    /// The Merkle tree (shared by the verify workers).
    pub fn tree(&self) -> &MerkleTree {
        &self.tree
    }

    /// The fscrypt master key (64 bytes; stored in the clear in the header).
    pub fn master_key(&self) -> &[u8] {
        &self.master_key
    }

    /// A contents cipher keyed with this file's per-file key.
    ///
    /// # Panics
    /// Where [`Dataset::try_cipher`] fails (`kernel` without AF_ALG).
    pub fn cipher(&self, kind: CipherKind) -> ContentsCipher {
        self.try_cipher(kind)
            .unwrap_or_else(|e| panic!("keying {kind}: {e}"))
    }

    /// A contents cipher keyed with this file's per-file key; the kernel's
    /// fails where AF_ALG cannot give `xts(aes)`.
    pub fn try_cipher(
        &self,
        kind: CipherKind,
    ) -> Result<ContentsCipher, crate::crypto::CryptoError> {
        self.try_cipher_with_nonce(kind, &self.nonce)
    }

    /// A contents cipher keyed with the per-file key of another file that
    /// has this dataset's master key and nonce `nonce` (the kernel target's
    /// file of the same plaintext, whose nonce the kernel chose).
    pub fn try_cipher_with_nonce(
        &self,
        kind: CipherKind,
        nonce: &[u8; 16],
    ) -> Result<ContentsCipher, crate::crypto::CryptoError> {
        let mut key = vec![0u8; kind.key_size()];
        crate::crypto::derive_file_key(&self.master_key, nonce, &mut key);
        let c = ContentsCipher::new(kind, &key);
        key.fill(0);
        c
    }
}

/// Removes what an interrupted prepare (killed, power loss) left behind:
/// `.dataset-SIZE.tmp-PID` and `.dataset-SIZE.old-PID` directories whose
/// process is gone. Directories of a live process are left alone.
fn remove_stale(data_dir: &Path) {
    let Ok(rd) = fs::read_dir(data_dir) else {
        return;
    };
    let mut prefixes = std::collections::BTreeSet::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(".dataset-") {
            continue;
        }
        for sep in [".tmp-", ".old-"] {
            if let Some((head, _)) = name.rsplit_once(sep) {
                prefixes.insert(format!("{head}{sep}"));
            }
        }
    }
    for p in prefixes {
        crate::sys::remove_stale_temps(data_dir, &p);
    }
}

/// Writes every file of a dataset into `dir` (which must not exist).
fn build_into(
    dir: &Path,
    file_size: u64,
    salt: &[u8],
    seed: u64,
    progress: Progress<'_>,
) -> io::Result<()> {
    fs::create_dir(dir)?;
    let mut master_key = [0u8; 64];
    derive(seed, "master key", &mut master_key);
    let mut nonce = [0u8; 16];
    derive(seed, "nonce", &mut nonce);
    let mut fkey_xts = [0u8; 64];
    crate::crypto::derive_file_key(&master_key, &nonce, &mut fkey_xts);
    let mut fkey_adi = [0u8; 32];
    crate::crypto::derive_file_key(&master_key, &nonce, &mut fkey_adi);
    let xts = ContentsCipher::new(CipherKind::Aes256Xts, &fkey_xts).map_err(io::Error::other)?;
    let adi = ContentsCipher::new(CipherKind::Adiantum, &fkey_adi).map_err(io::Error::other)?;

    let create = |name: &str| -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(name))
    };
    let mut plain_f = create(Variant::Plain.file_name())?;
    let mut xts_f = create(Variant::Cipher(CipherKind::Aes256Xts).file_name())?;
    let mut adi_f = create(Variant::Cipher(CipherKind::Adiantum).file_name())?;
    let params = MerkleParams::new(VERITY_BLOCK_SIZE, salt).map_err(io::Error::other)?;
    let mut builder = MerkleBuilder::new(params);

    let mut plain = vec![0u8; CHUNK];
    let mut ct = vec![0u8; CHUNK];
    let mut off = 0u64;
    progress(0, file_size);
    while off < file_size {
        let n = CHUNK.min((file_size - off) as usize);
        fill_plaintext(seed, off, &mut plain[..n]);
        builder.update(&plain[..n]);
        plain_f.write_all(&plain[..n])?;
        let first_unit = off / DATA_UNIT_SIZE as u64;
        ct[..n].copy_from_slice(&plain[..n]);
        xts.encrypt_units(first_unit, DATA_UNIT_SIZE, &mut ct[..n]);
        xts_f.write_all(&ct[..n])?;
        ct[..n].copy_from_slice(&plain[..n]);
        adi.encrypt_units(first_unit, DATA_UNIT_SIZE, &mut ct[..n]);
        adi_f.write_all(&ct[..n])?;
        off += n as u64;
        progress(off, file_size);
    }
    let tree = builder.finish();
    let mut tree_f = create(tree_file_name(Variant::Plain))?;
    tree_f.write_all(tree.tree_bytes())?;
    // The tree as an encrypted file stores it past EOF (see tree_first_unit).
    let mut trees = Vec::new();
    for (kind, c) in [(CipherKind::Aes256Xts, &xts), (CipherKind::Adiantum, &adi)] {
        let mut f = create(tree_file_name(Variant::Cipher(kind)))?;
        let mut bytes = tree.tree_bytes().to_vec();
        c.encrypt_units(tree_first_unit(file_size), DATA_UNIT_SIZE, &mut bytes);
        f.write_all(&bytes)?;
        trees.push(f);
    }
    for f in [&plain_f, &xts_f, &adi_f, &tree_f]
        .into_iter()
        .chain(&trees)
    {
        f.sync_all()?;
    }
    let header = Header {
        format_version: FORMAT_VERSION,
        file_size,
        seed,
        master_key: hex::encode(master_key),
        nonce: hex::encode(nonce),
        salt: hex::encode(salt),
        verity_block_size: VERITY_BLOCK_SIZE,
        root_hash: hex::encode(tree.root_hash()),
        file_digest: hex::encode(tree.file_digest()),
    };
    let mut hf = create("header.json")?;
    hf.write_all(serde_json::to_string_pretty(&header)?.as_bytes())?;
    hf.write_all(b"\n")?;
    hf.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet() -> impl FnMut(u64, u64) {
        |_, _| {}
    }

    #[test]
    fn plaintext_is_deterministic_and_position_independent() {
        let mut a = vec![0u8; 8192];
        fill_plaintext(1, 0, &mut a);
        let mut b = vec![0u8; 4096];
        fill_plaintext(1, 4096, &mut b);
        assert_eq!(&a[4096..], &b[..]);
        let mut c = vec![0u8; 4096];
        fill_plaintext(2, 0, &mut c);
        assert_ne!(&a[..4096], &c[..]);
    }

    #[test]
    fn prepare_open_and_rebuild() {
        let tmp = tempfile::tempdir().unwrap();
        let size = 64 * 4096 + 4096;
        let mut p = quiet();
        let (ds, out) = Dataset::open_or_prepare(tmp.path(), size, b"", &mut p).unwrap();
        assert_eq!(out, OpenOutcome::Created);
        let digest = ds.header().file_digest.clone();
        // The plaintext file is what the tree covers; the ciphertext decrypts to it.
        let plain = fs::read(ds.path(Variant::Plain)).unwrap();
        let mut want = vec![0u8; size as usize];
        fill_plaintext(DEFAULT_SEED, 0, &mut want);
        assert_eq!(plain, want);
        let mut ct = fs::read(ds.path(Variant::Cipher(CipherKind::Aes256Xts))).unwrap();
        assert_ne!(ct, plain);
        ds.cipher(CipherKind::Aes256Xts)
            .decrypt_units(0, DATA_UNIT_SIZE, &mut ct);
        assert_eq!(ct, plain);
        let mut ad = fs::read(ds.path(Variant::Cipher(CipherKind::Adiantum))).unwrap();
        ds.cipher(CipherKind::Adiantum)
            .decrypt_units(0, DATA_UNIT_SIZE, &mut ad);
        assert_eq!(ad, plain);
        // The tree as an encrypted file stores it: past EOF at 64 KiB, each
        // data unit's IV its position there (file 260 KiB: tree at 320 KiB).
        assert_eq!(tree_pos(size), 320 * 1024);
        assert_eq!(tree_first_unit(size), 80);
        assert_eq!(tree_pos(64 * 1024), 64 * 1024);
        let tree = fs::read(ds.tree_path(Variant::Plain)).unwrap();
        assert_eq!(tree, ds.tree().tree_bytes());
        for kind in [CipherKind::Aes256Xts, CipherKind::Adiantum] {
            let mut t = fs::read(ds.tree_path(Variant::Cipher(kind))).unwrap();
            assert_eq!(t.len(), tree.len());
            assert_ne!(t, tree);
            let c = ds.cipher(kind);
            let mut wrong = t.clone();
            c.decrypt_units(0, DATA_UNIT_SIZE, &mut wrong);
            assert_ne!(
                wrong, tree,
                "{kind:?}: IVs must be the tree's position, not 0"
            );
            c.decrypt_units(80, DATA_UNIT_SIZE, &mut t);
            assert_eq!(t, tree, "{kind:?}");
        }
        drop(ds);

        let (_, out) = Dataset::open_or_prepare(tmp.path(), size, b"", &mut p).unwrap();
        assert_eq!(out, OpenOutcome::Existing);

        // Truncation is detected and rebuilt bit for bit.
        let dir = dataset_dir(tmp.path(), size);
        let f = OpenOptions::new()
            .write(true)
            .open(dir.join("aes-256-xts.bin"))
            .unwrap();
        f.set_len(4096).unwrap();
        let (ds, out) = Dataset::open_or_prepare(tmp.path(), size, b"", &mut p).unwrap();
        assert!(
            matches!(out, OpenOutcome::Rebuilt(ref r) if r.contains("truncated")),
            "{out:?}"
        );
        assert_eq!(ds.header().file_digest, digest);

        // A dataset of another format version is rebuilt.
        let hp = dir.join("header.json");
        let h = fs::read_to_string(&hp).unwrap();
        fs::write(
            &hp,
            h.replace(
                &format!("\"format_version\": {FORMAT_VERSION}"),
                "\"format_version\": 0",
            ),
        )
        .unwrap();
        let (_, out) = Dataset::open_or_prepare(tmp.path(), size, b"", &mut p).unwrap();
        assert!(
            matches!(out, OpenOutcome::Rebuilt(ref r) if r.contains("format version 0")),
            "{out:?}"
        );

        // A different salt is a mismatch.
        let (ds2, out) = Dataset::open_or_prepare(tmp.path(), size, b"\xab\xcd", &mut p).unwrap();
        assert!(
            matches!(out, OpenOutcome::Rebuilt(ref r) if r.contains("salt")),
            "{out:?}"
        );
        assert_ne!(ds2.header().file_digest, digest);

        // A corrupted tree sidecar is detected.
        fs::write(dir.join("merkle.bin"), b"junk").unwrap();
        assert!(matches!(
            Dataset::open(tmp.path(), size, b"\xab\xcd"),
            Err(DatasetError::Invalid { .. })
        ));
        // Nothing temporary is left behind.
        let names: Vec<_> = fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![format!("dataset-{size}")]);
    }

    #[test]
    fn failed_prepare_leaves_nothing_and_keeps_a_good_dataset() {
        let tmp = tempfile::tempdir().unwrap();
        let mut p = quiet();
        let size = 16 * 4096;
        let ds = Dataset::prepare(tmp.path(), size, b"", DEFAULT_SEED, &mut p).unwrap();
        let digest = ds.header().file_digest.clone();
        // A data dir that cannot be created (a regular file is in the way).
        let blocker = tmp.path().join("not-a-dir");
        fs::write(&blocker, b"x").unwrap();
        let r = Dataset::prepare(&blocker.join("sub"), size, b"", DEFAULT_SEED, &mut p);
        assert!(
            matches!(r, Err(DatasetError::DataDir { .. })),
            "{:?}",
            r.err()
        );
        assert_eq!(fs::read(&blocker).unwrap(), b"x");
        let ds = Dataset::open(tmp.path(), size, b"").unwrap();
        assert_eq!(ds.header().file_digest, digest);
    }

    #[test]
    fn leftovers_of_a_killed_prepare_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        // pid 0x7fffffff cannot be a live process.
        let stale = tmp.path().join(".dataset-65536.tmp-2147483647");
        fs::create_dir(&stale).unwrap();
        fs::write(stale.join("plain.bin"), b"half").unwrap();
        let mut p = quiet();
        Dataset::prepare(tmp.path(), 65536, b"", DEFAULT_SEED, &mut p).unwrap();
        assert!(!stale.exists());
    }

    #[test]
    fn stale_temporaries_beside_a_valid_dataset_are_removed_on_open() {
        let tmp = tempfile::tempdir().unwrap();
        let mut p = quiet();
        Dataset::open_or_prepare(tmp.path(), 65536, b"", &mut p).unwrap();
        // A rebuild killed half-way, by a process that is gone.
        let stale = tmp.path().join(".dataset-65536.tmp-2147483647");
        fs::create_dir(&stale).unwrap();
        fs::write(stale.join("plain.bin"), b"half").unwrap();
        let (_, outcome) = Dataset::open_or_prepare(tmp.path(), 65536, b"", &mut p).unwrap();
        assert_eq!(outcome, OpenOutcome::Existing);
        assert!(!stale.exists());
    }

    #[test]
    fn no_space_is_refused_before_writing() {
        // /dev/shm is small compared to a 1 TiB dataset on any CI machine.
        let tmp = tempfile::tempdir().unwrap();
        let mut p = quiet();
        let r = Dataset::prepare(tmp.path(), 1 << 40, b"", DEFAULT_SEED, &mut p);
        assert!(
            matches!(r, Err(DatasetError::NoSpace { .. })),
            "{:?}",
            r.err()
        );
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}
