//! fs-verity Merkle tree: build it, compute the file digest, verify reads.
//!
//! This module exists so that readpath can model the verify half of the kernel's read
//! post-processing path byte for byte. It builds the fs-verity Merkle tree of a file
//! (SHA-256, block sizes 1024..=65536, optional salt) with a streaming builder; its file
//! digest, the SHA-256 of the 256-byte `fsverity_descriptor`, is identical to what
//! `fsverity digest` prints. It verifies single data blocks against the tree the way
//! `fs/verity/verify.c` does: walk up from the leaf-level hash block until a hash block
//! already marked verified in a per-file bitmap (or the root), then hash back down,
//! marking each block verified, and finally check the data block. The verify path is
//! pure code over byte slices: no I/O, no allocation and no locks (the bitmap is
//! `AtomicU64`s), so one [`MerkleTree`] and one [`VerifiedCache`] can be shared through
//! an `Arc` by any number of worker threads.
//!
//! Layout, as in the kernel: level 0 holds the hashes of the data blocks (the last data
//! block zero-padded), packed into blocks of `block_size` (the last one zero-padded);
//! each next level holds the hashes of the blocks of the level below, until a level is a
//! single block, whose hash is the root hash. A file of one block has no tree blocks and
//! its root hash is the hash of that block; an empty file has an all-zero root hash.
//! The stored order ([`MerkleTree::tree_bytes`]) is the top level first, leaves last, as
//! `FS_IOC_READ_VERITY_METADATA` returns it. With a salt, the salt zero-padded to 64
//! bytes is hashed before every data block and every tree block.
//!
//! The hashing is readpath's own SHA-256 ([`HashKind::Software`]), or the running
//! kernel's `sha256` through AF_ALG ([`HashKind::Kernel`], `sys::AlgTfm`: one
//! operation socket per thread, the padded salt and the block sent as one iovec),
//! or a port of the kernel's generic C SHA-256 ([`HashKind::Generic`],
//! [`crate::verity::sha256_generic`]), so that the model can pay what the kernel's
//! fs-verity pays; all give the same bytes.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::verity::sha256_generic::Sha256Generic;
use crate::verity::sha256x2::{Prefix, Sha256x2};
use sha2::{Digest, Sha256};

/// Size of a SHA-256 digest in bytes.
pub const SHA256_SIZE: usize = 32;
/// Largest salt fs-verity accepts, in bytes.
pub const MAX_SALT_SIZE: usize = 32;
/// Smallest Merkle tree block size accepted.
pub const MIN_BLOCK_SIZE: usize = 1024;
/// Largest Merkle tree block size accepted.
pub const MAX_BLOCK_SIZE: usize = 65536;
/// Size of the `fsverity_descriptor` whose SHA-256 is the file digest.
pub const DESCRIPTOR_SIZE: usize = 256;
/// `FS_VERITY_HASH_ALG_SHA256`.
pub const HASH_ALG_SHA256: u8 = 1;

/// SHA-256's internal block size: the salt is zero-padded to this.
const SHA256_BLOCK_SIZE: usize = 64;

/// Zeros used to hash the zero tail of a short block without a buffer.
static ZEROS: [u8; 4096] = [0; 4096];

crate::named_enum! {
    /// Who computes fs-verity's SHA-256.
    HashKind {
        /// readpath's own SHA-256 (the `sha2` crate, SHA-NI where the CPU
        /// has it, two blocks interleaved as Linux 6.18 does).
        Software => "software",
        /// The running kernel's `sha256` (the driver its fs-verity uses),
        /// through AF_ALG: one `sendmsg` and one 32-byte read per block.
        Kernel => "kernel",
        /// A port of the kernel's generic C SHA-256 (`lib/crypto/sha256.c`,
        /// the driver `sha256-generic`), one block a call from the salted
        /// state: what a kernel without SHA instructions' drivers pays,
        /// without AF_ALG's system calls.
        Generic => "generic",
    }
}

/// The crypto API name [`HashKind::Kernel`] binds.
pub const KERNEL_SHA256: &str = "sha256";

/// The kernel's `sha256` with the padded salt it is fed before each block.
struct KernelSha256 {
    tfm: crate::sys::AlgTfm,
    salt: [u8; SHA256_BLOCK_SIZE],
    /// 0 (no salt) or [`SHA256_BLOCK_SIZE`].
    salt_len: usize,
}

impl KernelSha256 {
    fn new(params: &MerkleParams) -> std::io::Result<Self> {
        let tfm = crate::sys::AlgTfm::bind("hash", KERNEL_SHA256)?;
        // The first op socket now: a refusal is an error here, not later.
        tfm.with_op(|_| Ok(()))?;
        let mut salt = [0u8; SHA256_BLOCK_SIZE];
        salt[..params.salt.len()].copy_from_slice(&params.salt);
        Ok(KernelSha256 {
            tfm,
            salt,
            salt_len: if params.salt.is_empty() {
                0
            } else {
                SHA256_BLOCK_SIZE
            },
        })
    }

    /// What one block's hash is sent as: the padded salt (when there is
    /// a salt), `data`, and zeros up to `block_size`; the number of parts.
    fn parts<'a>(
        salt: &'a [u8],
        data: &'a [u8],
        block_size: usize,
        parts: &mut [&'a [u8]; crate::sys::MAX_DIGEST_PARTS],
    ) -> usize {
        let mut n = 0;
        if !salt.is_empty() {
            parts[n] = salt;
            n += 1;
        }
        parts[n] = data;
        n += 1;
        let mut pad = block_size - data.len();
        while pad > 0 {
            let k = pad.min(ZEROS.len());
            parts[n] = &ZEROS[..k];
            n += 1;
            pad -= k;
        }
        n
    }

    /// SHA-256 of the padded salt, `data`, and zeros up to `block_size`,
    /// in one `sendmsg`. No allocation.
    fn hash(&self, data: &[u8], block_size: usize, out: &mut [u8; SHA256_SIZE]) {
        let mut parts: [&[u8]; crate::sys::MAX_DIGEST_PARTS] = [&[]; crate::sys::MAX_DIGEST_PARTS];
        let n = Self::parts(&self.salt[..self.salt_len], data, block_size, &mut parts);
        if let Err(e) = self.tfm.with_op(|op| op.digest(&parts[..n], out)) {
            // Bound and accepted a moment ago: a block cannot be left
            // unhashed silently.
            panic!("hash = \"kernel\": {e}");
        }
    }
}

/// Errors from building parameters or loading a stored tree.
#[derive(Debug, thiserror::Error)]
pub enum MerkleError {
    /// Block size not a power of two in 1024..=65536.
    #[error(
        "invalid Merkle tree block size {0}: must be a power of two from {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE}"
    )]
    BlockSize(usize),
    /// Salt longer than [`MAX_SALT_SIZE`].
    #[error("salt is {0} bytes long: fs-verity allows at most {MAX_SALT_SIZE} bytes")]
    SaltTooLong(usize),
    /// The stored tree's length does not match the level layout for the data size.
    #[error(
        "stored Merkle tree is {actual} bytes but a file of {data_size} bytes with {block_size}-byte blocks needs {expected} bytes"
    )]
    TreeSize {
        /// Bytes of tree that were given.
        actual: usize,
        /// Bytes the layout needs.
        expected: u64,
        /// Data size the layout was computed for.
        data_size: u64,
        /// Tree block size.
        block_size: usize,
    },
    /// The root hash recomputed from the stored tree differs from the root hash given.
    #[error("root hash of the stored Merkle tree is {actual}, expected {expected}")]
    RootMismatch {
        /// Root hash recomputed from the tree (hex).
        actual: String,
        /// Root hash that was given (hex).
        expected: String,
    },
    /// The file digest recomputed from the stored tree differs from the digest given.
    #[error(
        "file digest of the stored Merkle tree is sha256:{actual}, expected sha256:{expected} (corrupted or mismatched tree, data size or parameters)"
    )]
    DigestMismatch {
        /// Digest recomputed from the tree (hex).
        actual: String,
        /// Digest that was given (hex).
        expected: String,
    },
    /// A one-block file has no tree blocks, so the tree cannot supply its root hash.
    #[error(
        "a file of {data_size} bytes is one block: it has no tree blocks and its root hash is the hash of the data block itself; load it with MerkleTree::from_stored_with_root"
    )]
    RootNotInTree {
        /// The data size (1..=block_size).
        data_size: u64,
    },
}

/// Errors from [`MerkleTree::verify_block`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// A hash did not match: the data block (`level == -1`) or a hash block of tree level
    /// `level` (0 = leaf level) on the path of data block `block_index`.
    #[error("fs-verity hash mismatch verifying data block {block_index} at level {level}")]
    Mismatch {
        /// Data block being verified.
        block_index: u64,
        /// -1 for the data block, else the tree level of the hash block that mismatched.
        level: i32,
    },
    /// The data block index is past the end of the file.
    #[error("data block {block_index} is out of range: the file has {num_blocks} blocks")]
    OutOfRange {
        /// Requested data block.
        block_index: u64,
        /// Number of data blocks in the file.
        num_blocks: u64,
    },
    /// The data slice has the wrong length for this block.
    #[error("data block {block_index} is {len} bytes: expected {min}..={max} bytes")]
    BadLength {
        /// Data block being verified.
        block_index: u64,
        /// Length given.
        len: usize,
        /// Shortest allowed.
        min: usize,
        /// Longest allowed.
        max: usize,
    },
    /// The cache was made by a different tree.
    #[error("verified-block cache belongs to a different Merkle tree")]
    WrongCache,
    /// A hash block on the path of data block `block_index` could not be read (an I/O
    /// error reading the tree from its file), as `read_merkle_tree_page` failing.
    #[error(
        "hash block {hash_block} (tree level {level}) of data block {block_index} could not be read"
    )]
    Unreadable {
        /// Data block being verified.
        block_index: u64,
        /// The hash block (stored order).
        hash_block: u64,
        /// Its tree level (0 = leaf level).
        level: i32,
    },
    /// Data block `block_index` was not verified: it came second in a pair whose first
    /// block failed, and verification stops at the first failure, as the kernel's does
    /// ([`MerkleTree::verify_block_pair`]).
    #[error("data block {block_index} was not verified: an earlier block failed")]
    Skipped {
        /// The block left unverified.
        block_index: u64,
    },
}

/// Where the hash blocks come from while a data block is verified, and where their
/// "verified" marks live: the tree in memory with a [`VerifiedCache`] bitmap
/// ([`MerkleTree::verify_block`]), or, in readpath's model of the kernel, the tree's
/// pages in the file's page cache with a `PG_checked`-like mark per page, which is lost
/// when the page is evicted (`engine::tree`).
pub trait HashBlocks {
    /// Calls `f(block, verified)` with hash block `index` (stored order) and whether it
    /// is marked verified; when `f` returns true, the block is marked verified. An error
    /// means the block could not be read (`f` was not called).
    fn with_block(
        &self,
        index: u64,
        f: &mut dyn FnMut(&[u8], bool) -> bool,
    ) -> Result<(), BlockUnreadable>;
}

/// A hash block could not be read (see [`HashBlocks::with_block`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockUnreadable;

/// The tree in memory and a bitmap of verified blocks, as a [`HashBlocks`]
/// (made by [`MerkleTree::resident`]).
pub struct Resident<'a> {
    tree: &'a MerkleTree,
    cache: &'a VerifiedCache,
}

impl HashBlocks for Resident<'_> {
    #[inline]
    fn with_block(
        &self,
        index: u64,
        f: &mut dyn FnMut(&[u8], bool) -> bool,
    ) -> Result<(), BlockUnreadable> {
        if f(self.tree.tree_block(index), self.cache.is_set(index)) {
            self.cache.set(index);
        }
        Ok(())
    }
}

/// Merkle tree parameters: block size and salt (hash is always SHA-256).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MerkleParams {
    /// Tree (and data) block size: a power of two in 1024..=65536.
    pub block_size: usize,
    /// Salt, 0..=32 bytes.
    pub salt: Vec<u8>,
}

impl MerkleParams {
    /// Checked constructor.
    pub fn new(block_size: usize, salt: &[u8]) -> Result<Self, MerkleError> {
        let p = MerkleParams {
            block_size,
            salt: salt.to_vec(),
        };
        p.validate()?;
        Ok(p)
    }

    /// Check the parameters (the fields are public, so they can be set to anything).
    pub fn validate(&self) -> Result<(), MerkleError> {
        if !self.block_size.is_power_of_two()
            || !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&self.block_size)
        {
            return Err(MerkleError::BlockSize(self.block_size));
        }
        if self.salt.len() > MAX_SALT_SIZE {
            return Err(MerkleError::SaltTooLong(self.salt.len()));
        }
        Ok(())
    }

    /// log2 of the block size.
    pub fn log_block_size(&self) -> u32 {
        self.block_size.trailing_zeros()
    }

    /// Hashes per tree block.
    pub fn hashes_per_block(&self) -> usize {
        self.block_size / SHA256_SIZE
    }
}

impl Default for MerkleParams {
    /// 4096-byte blocks, no salt (the `fsverity` defaults).
    fn default() -> Self {
        MerkleParams {
            block_size: 4096,
            salt: Vec::new(),
        }
    }
}

/// A SHA-256 state with the padded salt already absorbed, plus the block size,
/// and the same state for hashing two blocks at once where the CPU can.
#[derive(Clone)]
struct BlockHasher {
    base: Sha256,
    block_size: usize,
    x2: Option<(Sha256x2, Prefix)>,
    /// [`HashKind::Kernel`]: the kernel hashes instead.
    kernel: Option<Arc<KernelSha256>>,
    /// [`HashKind::Generic`]: the port of the kernel's generic C hashes
    /// instead, from this state (the padded salt absorbed).
    generic: Option<Sha256Generic>,
}

impl BlockHasher {
    fn new(params: &MerkleParams) -> Self {
        let mut base = Sha256::new();
        let mut padded = [0u8; SHA256_BLOCK_SIZE];
        let prefix = if params.salt.is_empty() {
            &padded[..0]
        } else {
            padded[..params.salt.len()].copy_from_slice(&params.salt);
            base.update(padded);
            &padded[..]
        };
        BlockHasher {
            base,
            block_size: params.block_size,
            x2: Sha256x2::detect().map(|x| (x, Prefix::new(prefix))),
            kernel: None,
            generic: None,
        }
    }

    fn of_kind(params: &MerkleParams, kind: HashKind) -> std::io::Result<Self> {
        let mut h = Self::new(params);
        match kind {
            HashKind::Kernel => h.kernel = Some(Arc::new(KernelSha256::new(params)?)),
            HashKind::Generic => {
                // fs-verity's `hashstate`: the padded salt hashed once,
                // imported before every block.
                let mut g = Sha256Generic::new();
                if !params.salt.is_empty() {
                    let mut padded = [0u8; SHA256_BLOCK_SIZE];
                    padded[..params.salt.len()].copy_from_slice(&params.salt);
                    g.update(&padded);
                }
                h.generic = Some(g);
            }
            HashKind::Software => {}
        }
        Ok(h)
    }

    fn kind(&self) -> HashKind {
        if self.kernel.is_some() {
            HashKind::Kernel
        } else if self.generic.is_some() {
            HashKind::Generic
        } else {
            HashKind::Software
        }
    }

    /// Hash two full blocks (salted), interleaved where the CPU has the SHA
    /// extensions. No allocation.
    #[inline]
    fn hash2(
        &self,
        a: &[u8],
        b: &[u8],
        out_a: &mut [u8; SHA256_SIZE],
        out_b: &mut [u8; SHA256_SIZE],
    ) {
        debug_assert!(a.len() == self.block_size && b.len() == self.block_size);
        if self.kernel.is_some() || self.generic.is_some() {
            self.hash(a, out_a);
            self.hash(b, out_b);
            return;
        }
        match &self.x2 {
            Some((x, prefix)) => x.finup2(prefix, a, b, out_a, out_b),
            None => {
                self.hash(a, out_a);
                self.hash(b, out_b);
            }
        }
    }

    /// Hash `data` zero-padded to the block size (salted). No allocation.
    #[inline]
    fn hash(&self, data: &[u8], out: &mut [u8; SHA256_SIZE]) {
        debug_assert!(data.len() <= self.block_size);
        if let Some(k) = &self.kernel {
            k.hash(data, self.block_size, out);
            return;
        }
        if let Some(g) = &self.generic {
            let mut h = g.clone();
            h.update(data);
            zero_pad(self.block_size - data.len(), |z| h.update(z));
            h.finalize_into(out);
            return;
        }
        let mut h = self.base.clone();
        h.update(data);
        zero_pad(self.block_size - data.len(), |z| h.update(z));
        h.finalize_into(out.into());
    }
}

/// Feeds `len` zero bytes to `update`, a [`ZEROS`] at a time: a short
/// block's padding, without a buffer.
fn zero_pad(mut len: usize, mut update: impl FnMut(&[u8])) {
    while len > 0 {
        let n = len.min(ZEROS.len());
        update(&ZEROS[..n]);
        len -= n;
    }
}

/// Build the 256-byte `fsverity_descriptor`.
fn build_descriptor(
    params: &MerkleParams,
    data_size: u64,
    root: &[u8; SHA256_SIZE],
) -> [u8; DESCRIPTOR_SIZE] {
    let mut d = [0u8; DESCRIPTOR_SIZE];
    d[0] = 1; // version
    d[1] = HASH_ALG_SHA256;
    d[2] = params.log_block_size() as u8;
    d[3] = params.salt.len() as u8;
    // d[4..8]: reserved, zero
    d[8..16].copy_from_slice(&data_size.to_le_bytes());
    d[16..16 + SHA256_SIZE].copy_from_slice(root); // root_hash[64], zero-padded
    d[80..80 + params.salt.len()].copy_from_slice(&params.salt); // salt[32]
    // d[112..256]: reserved, zero
    d
}

fn sha256(data: &[u8]) -> [u8; SHA256_SIZE] {
    let mut out = [0u8; SHA256_SIZE];
    Sha256::new()
        .chain_update(data)
        .finalize_into((&mut out).into());
    out
}

/// Blocks per level for a file of `data_size` bytes, level 0 (leaves) first.
/// Empty for files of zero or one block.
fn level_block_counts(data_size: u64, block_size: usize) -> Vec<u64> {
    let bs = block_size as u64;
    let hpb = (block_size / SHA256_SIZE) as u64;
    let mut blocks = data_size.div_ceil(bs);
    let mut levels = Vec::new();
    while blocks > 1 {
        blocks = blocks.div_ceil(hpb);
        levels.push(blocks);
    }
    levels
}

/// One tree level under construction.
struct BuildLevel {
    /// The current, partly filled block of hashes.
    cur: Vec<u8>,
    /// Completed blocks of this level (only when the tree is kept).
    done: Vec<u8>,
    /// Number of completed blocks.
    count: u64,
}

/// Streaming builder: feed the data in any chunk sizes, get the tree.
pub struct MerkleBuilder {
    params: MerkleParams,
    hasher: BlockHasher,
    keep_tree: bool,
    /// Partial data block.
    pending: Vec<u8>,
    data_size: u64,
    data_blocks: u64,
    levels: Vec<BuildLevel>,
}

impl MerkleBuilder {
    /// New builder.
    ///
    /// # Panics
    /// If `params` is invalid (only possible when its public fields were set by hand;
    /// [`MerkleParams::new`] checks them).
    pub fn new(params: MerkleParams) -> Self {
        Self::with_mode(params, true)
    }

    /// A builder whose hashing is `kind`'s; the kernel's fails here when
    /// AF_ALG cannot give `sha256`.
    ///
    /// # Panics
    /// As [`MerkleBuilder::new`].
    pub fn with_hash(params: MerkleParams, kind: HashKind) -> std::io::Result<Self> {
        let mut b = Self::with_mode(params, true);
        b.hasher = BlockHasher::of_kind(&b.params, kind)?;
        Ok(b)
    }

    fn with_mode(params: MerkleParams, keep_tree: bool) -> Self {
        if let Err(e) = params.validate() {
            panic!("MerkleBuilder::new: {e}");
        }
        let hasher = BlockHasher::new(&params);
        let bs = params.block_size;
        MerkleBuilder {
            params,
            hasher,
            keep_tree,
            pending: Vec::with_capacity(bs),
            data_size: 0,
            data_blocks: 0,
            levels: Vec::new(),
        }
    }

    /// Feed more data.
    pub fn update(&mut self, mut data: &[u8]) {
        let bs = self.params.block_size;
        self.data_size += data.len() as u64;
        if !self.pending.is_empty() {
            let n = (bs - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.pending.len() < bs {
                return;
            }
            let mut h = [0u8; SHA256_SIZE];
            self.hasher.hash(&self.pending, &mut h);
            self.pending.clear();
            self.push_data_hash(h);
        }
        // Whole blocks two at a time (interleaved where the CPU can).
        let full = data.len() / bs;
        let mut i = 0;
        while i + 2 <= full {
            let (mut ha, mut hb) = ([0u8; SHA256_SIZE], [0u8; SHA256_SIZE]);
            self.hasher.hash2(
                &data[i * bs..(i + 1) * bs],
                &data[(i + 1) * bs..(i + 2) * bs],
                &mut ha,
                &mut hb,
            );
            self.push_data_hash(ha);
            self.push_data_hash(hb);
            i += 2;
        }
        if i < full {
            let mut h = [0u8; SHA256_SIZE];
            self.hasher.hash(&data[i * bs..(i + 1) * bs], &mut h);
            self.push_data_hash(h);
        }
        self.pending.extend_from_slice(&data[full * bs..]);
    }

    fn push_data_hash(&mut self, h: [u8; SHA256_SIZE]) {
        self.data_blocks += 1;
        self.push_hash(0, h);
    }

    /// Append a hash to `level`, hashing and propagating full blocks upwards.
    fn push_hash(&mut self, mut level: usize, mut h: [u8; SHA256_SIZE]) {
        let bs = self.params.block_size;
        loop {
            if level == self.levels.len() {
                self.levels.push(BuildLevel {
                    cur: Vec::with_capacity(bs),
                    done: Vec::new(),
                    count: 0,
                });
            }
            let l = &mut self.levels[level];
            l.cur.extend_from_slice(&h);
            if l.cur.len() < bs {
                return;
            }
            self.hasher.hash(&l.cur, &mut h);
            l.count += 1;
            if self.keep_tree {
                l.done.extend_from_slice(&l.cur);
            }
            l.cur.clear();
            level += 1;
        }
    }

    /// Finish: pad the partial blocks and produce the root hash and levels.
    /// Returns (root, levels with completed blocks, level 0 first).
    fn finish_levels(mut self) -> (MerkleParams, u64, [u8; SHA256_SIZE], Vec<Vec<u8>>) {
        let bs = self.params.block_size;
        if !self.pending.is_empty() {
            let mut h = [0u8; SHA256_SIZE];
            self.hasher.hash(&self.pending, &mut h);
            self.pending.clear();
            self.push_data_hash(h);
        }
        let mut root = [0u8; SHA256_SIZE];
        let mut out = Vec::new();
        if self.data_blocks == 1 {
            root.copy_from_slice(&self.levels[0].cur[..SHA256_SIZE]);
        } else if self.data_blocks > 1 {
            let mut i = 0;
            loop {
                if !self.levels[i].cur.is_empty() {
                    let l = &mut self.levels[i];
                    l.cur.resize(bs, 0);
                    let mut h = [0u8; SHA256_SIZE];
                    self.hasher.hash(&l.cur, &mut h);
                    l.count += 1;
                    if self.keep_tree {
                        l.done.extend_from_slice(&l.cur);
                    }
                    l.cur.clear();
                    self.push_hash(i + 1, h);
                }
                let count = self.levels[i].count;
                out.push(std::mem::take(&mut self.levels[i].done));
                if count == 1 {
                    // The one hash this level produced is the first entry of the next.
                    root.copy_from_slice(&self.levels[i + 1].cur[..SHA256_SIZE]);
                    break;
                }
                i += 1;
            }
        }
        (self.params, self.data_size, root, out)
    }

    /// Finish and return the tree.
    pub fn finish(self) -> MerkleTree {
        let (params, data_size, root, levels) = self.finish_levels();
        let total: usize = levels.iter().map(Vec::len).sum();
        let mut tree = Vec::with_capacity(total);
        for l in levels.iter().rev() {
            tree.extend_from_slice(l);
        }
        MerkleTree::assemble(params, data_size, tree, root)
    }

    /// Finish without keeping the tree (see [`digest_reader`]): returns the file digest.
    fn finish_digest(self) -> [u8; SHA256_SIZE] {
        let (params, data_size, root, _) = self.finish_levels();
        sha256(&build_descriptor(&params, data_size, &root))
    }
}

static NEXT_TREE_ID: AtomicU64 = AtomicU64::new(1);

/// A complete fs-verity Merkle tree for one file.
pub struct MerkleTree {
    params: MerkleParams,
    hasher: BlockHasher,
    data_size: u64,
    data_blocks: u64,
    root: [u8; SHA256_SIZE],
    /// Shared by the copies [`MerkleTree::with_hash`] makes.
    tree: Arc<[u8]>,
    /// First tree block of each level in `tree`, level 0 (leaves) first.
    level_start: Vec<u64>,
    /// log2(hashes per block).
    log_hpb: u32,
    /// Identifies the caches made for this tree.
    id: u64,
}

impl std::fmt::Debug for MerkleTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MerkleTree")
            .field("params", &self.params)
            .field("data_size", &self.data_size)
            .field("root_hash", &hex::encode(self.root))
            .field("num_levels", &self.num_levels())
            .field("hash_blocks", &self.hash_blocks())
            .finish()
    }
}

impl MerkleTree {
    /// Put the pieces together; `tree` must already have the right layout.
    fn assemble(params: MerkleParams, data_size: u64, tree: Vec<u8>, root: [u8; 32]) -> Self {
        let counts = level_block_counts(data_size, params.block_size);
        // Stored top first: level i starts after all the levels above it.
        let mut level_start = vec![0u64; counts.len()];
        let mut off = 0u64;
        for i in (0..counts.len()).rev() {
            level_start[i] = off;
            off += counts[i];
        }
        debug_assert_eq!(off * params.block_size as u64, tree.len() as u64);
        MerkleTree {
            hasher: BlockHasher::new(&params),
            data_blocks: data_size.div_ceil(params.block_size as u64),
            log_hpb: params.hashes_per_block().trailing_zeros(),
            params,
            data_size,
            root,
            tree: tree.into(),
            level_start,
            id: NEXT_TREE_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Build the tree of a whole byte slice.
    pub fn build(params: MerkleParams, data: &[u8]) -> Self {
        let mut b = MerkleBuilder::new(params);
        b.update(data);
        b.finish()
    }

    /// The same tree (same blocks, same caches: [`MerkleTree::new_cache`]'s
    /// of either serves both) hashing with `kind`; the kernel's fails when
    /// AF_ALG cannot give `sha256`.
    pub fn with_hash(&self, kind: HashKind) -> std::io::Result<MerkleTree> {
        Ok(MerkleTree {
            params: self.params.clone(),
            hasher: BlockHasher::of_kind(&self.params, kind)?,
            data_size: self.data_size,
            data_blocks: self.data_blocks,
            root: self.root,
            tree: self.tree.clone(),
            level_start: self.level_start.clone(),
            log_hpb: self.log_hpb,
            id: self.id,
        })
    }

    /// Who hashes for this tree.
    pub fn hash_kind(&self) -> HashKind {
        self.hasher.kind()
    }

    /// The hash of one data block as verification computes it: the padded
    /// salt, `data`, zeros up to the block size (`data` at most a block).
    pub fn hash_data_block(&self, data: &[u8], out: &mut [u8; SHA256_SIZE]) {
        assert!(data.len() <= self.params.block_size, "longer than a block");
        self.hasher.hash(data, out);
    }

    /// The parameters.
    pub fn params(&self) -> &MerkleParams {
        &self.params
    }

    /// Size of the data the tree covers, in bytes.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Number of data blocks (`ceil(data_size / block_size)`).
    pub fn data_blocks(&self) -> u64 {
        self.data_blocks
    }

    /// Root hash; all zeros for an empty file.
    pub fn root_hash(&self) -> [u8; SHA256_SIZE] {
        self.root
    }

    /// The 256-byte `fsverity_descriptor`.
    pub fn descriptor(&self) -> [u8; DESCRIPTOR_SIZE] {
        build_descriptor(&self.params, self.data_size, &self.root)
    }

    /// File digest: SHA-256 of the descriptor, what `fsverity digest` prints.
    pub fn file_digest(&self) -> [u8; SHA256_SIZE] {
        sha256(&self.descriptor())
    }

    /// Tree blocks in stored order: top level first, leaves last.
    pub fn tree_bytes(&self) -> &[u8] {
        &self.tree
    }

    /// Number of tree levels (0 for files of zero or one block).
    pub fn num_levels(&self) -> usize {
        self.level_start.len()
    }

    /// The first leaf-level block in stored order (the blocks of every level
    /// above come first); 0 for a tree without blocks.
    pub fn leaf_level_start(&self) -> u64 {
        self.level_start.first().copied().unwrap_or(0)
    }

    /// Total number of tree blocks.
    pub fn hash_blocks(&self) -> usize {
        self.tree.len() / self.params.block_size
    }

    /// Rebuild from stored tree bytes (e.g. a sidecar file) and check them against the
    /// file digest kept elsewhere (e.g. in the sidecar's header): the length must match
    /// the level layout for `data_size`, and the digest of the descriptor built from the
    /// recomputed root hash (the hash of the top tree block) must equal
    /// `expected_digest`. A corrupted top block, a truncated or padded tree, or a tree for
    /// other data, size or parameters is thus rejected here; a corrupted lower block is
    /// caught by [`MerkleTree::verify_block`] for the data blocks under it, as in the
    /// kernel (the lower levels are verified lazily, on use).
    ///
    /// A one-block file has no tree blocks, so its root hash cannot be recovered from the
    /// tree: that case returns [`MerkleError::RootNotInTree`]; use
    /// [`MerkleTree::from_stored_with_root`].
    pub fn from_stored(
        params: MerkleParams,
        data_size: u64,
        tree: Vec<u8>,
        expected_digest: &[u8; SHA256_SIZE],
    ) -> Result<Self, MerkleError> {
        params.validate()?;
        let blocks = data_size.div_ceil(params.block_size as u64);
        if blocks == 1 {
            Self::check_layout(&params, data_size, &tree)?;
            return Err(MerkleError::RootNotInTree { data_size });
        }
        Self::load(params, data_size, tree, None, expected_digest)
    }

    /// Like [`MerkleTree::from_stored`], with the root hash given as well (needed for
    /// one-block files, accepted for all). For files of two or more blocks the root hash
    /// recomputed from the top block must equal `root_hash`; in all cases the file digest
    /// must equal `expected_digest`.
    pub fn from_stored_with_root(
        params: MerkleParams,
        data_size: u64,
        tree: Vec<u8>,
        root_hash: &[u8; SHA256_SIZE],
        expected_digest: &[u8; SHA256_SIZE],
    ) -> Result<Self, MerkleError> {
        params.validate()?;
        Self::load(params, data_size, tree, Some(root_hash), expected_digest)
    }

    fn check_layout(params: &MerkleParams, data_size: u64, tree: &[u8]) -> Result<(), MerkleError> {
        let counts = level_block_counts(data_size, params.block_size);
        let expected = counts
            .iter()
            .sum::<u64>()
            .saturating_mul(params.block_size as u64);
        if tree.len() as u64 != expected {
            return Err(MerkleError::TreeSize {
                actual: tree.len(),
                expected,
                data_size,
                block_size: params.block_size,
            });
        }
        Ok(())
    }

    fn load(
        params: MerkleParams,
        data_size: u64,
        tree: Vec<u8>,
        root_hash: Option<&[u8; SHA256_SIZE]>,
        expected_digest: &[u8; SHA256_SIZE],
    ) -> Result<Self, MerkleError> {
        Self::check_layout(&params, data_size, &tree)?;
        let blocks = data_size.div_ceil(params.block_size as u64);
        let root = if blocks == 0 {
            [0u8; SHA256_SIZE]
        } else if blocks == 1 {
            *root_hash.expect("checked by caller")
        } else {
            let mut r = [0u8; SHA256_SIZE];
            BlockHasher::new(&params).hash(&tree[..params.block_size], &mut r);
            r
        };
        if let Some(given) = root_hash
            && *given != root
        {
            return Err(MerkleError::RootMismatch {
                actual: hex::encode(root),
                expected: hex::encode(given),
            });
        }
        let digest = sha256(&build_descriptor(&params, data_size, &root));
        if digest != *expected_digest {
            return Err(MerkleError::DigestMismatch {
                actual: hex::encode(digest),
                expected: hex::encode(expected_digest),
            });
        }
        Ok(Self::assemble(params, data_size, tree, root))
    }

    /// A cache of verified hash blocks sized for this tree (one bit per tree block in
    /// `AtomicU64` words, like the kernel's per-file bitmap). All bits start clear.
    pub fn new_cache(&self) -> VerifiedCache {
        let words = self.hash_blocks().div_ceil(64);
        VerifiedCache {
            bits: (0..words).map(|_| AtomicU64::new(0)).collect(),
            nbits: self.hash_blocks(),
            tree_id: self.id,
        }
    }

    /// Tree block `index` (in stored order).
    #[inline]
    fn tree_block(&self, index: u64) -> &[u8] {
        let bs = self.params.block_size;
        let start = index as usize * bs;
        &self.tree[start..start + bs]
    }

    /// Index within level `level` of the hash block holding the hash of data block
    /// `block_index`'s ancestor at level `level - 1` (the data block itself for level 0).
    #[inline]
    fn block_at_level(&self, block_index: u64, level: usize) -> u64 {
        let shift = self.log_hpb * (level as u32 + 1);
        block_index.checked_shr(shift).unwrap_or(0)
    }

    /// The hash entry, within its level-`level` hash block, of data block `block_index`'s
    /// ancestor at level `level - 1`.
    #[inline]
    fn entry_in(&self, block: &[u8], block_index: u64, level: usize) -> [u8; SHA256_SIZE] {
        let child = block_index
            .checked_shr(self.log_hpb * level as u32)
            .unwrap_or(0);
        let slot = (child & ((1u64 << self.log_hpb) - 1)) as usize;
        let mut e = [0u8; SHA256_SIZE];
        e.copy_from_slice(&block[slot * SHA256_SIZE..(slot + 1) * SHA256_SIZE]);
        e
    }

    /// Verify one data block.
    ///
    /// `block_index` is in units of `block_size`; `data` is the block: `block_size`
    /// bytes, except that the file's last block may be given short, from its real length
    /// up to `block_size` (it is hashed zero-padded). The walk goes up from the leaf-level
    /// hash block to the first hash block already marked verified in `cache` (or past the
    /// top, to the root hash), then hashes back down, checking each hash block against
    /// its parent's entry and marking it verified, and finally checks the data block's
    /// hash. Bad data is never reported `Ok`. No allocation, no locks.
    ///
    /// Stats: `hashes` counts SHA-256 computations including the data block's;
    /// `levels_walked` counts the hash blocks looked at on the way up (the cached one
    /// where the walk stopped included); `cache_hit` says whether the walk stopped at a
    /// cached block (false: it went to the root).
    pub fn verify_block(
        &self,
        cache: &VerifiedCache,
        block_index: u64,
        data: &[u8],
    ) -> Result<VerifyStats, VerifyError> {
        self.verify_block_in(&self.resident(cache)?, block_index, data)
    }

    /// The tree held in memory with `cache`'s verified marks, as a
    /// [`HashBlocks`]; [`VerifyError::WrongCache`] when another tree made
    /// `cache`.
    pub fn resident<'a>(&'a self, cache: &'a VerifiedCache) -> Result<Resident<'a>, VerifyError> {
        if cache.tree_id != self.id {
            return Err(VerifyError::WrongCache);
        }
        Ok(Resident { tree: self, cache })
    }

    /// [`MerkleTree::verify_block`] with the hash blocks and their verified marks from
    /// `blocks` (this tree's blocks, e.g. read from the tree's pages in a page cache):
    /// the tree held in memory is not read.
    pub fn verify_block_in(
        &self,
        blocks: &dyn HashBlocks,
        block_index: u64,
        data: &[u8],
    ) -> Result<VerifyStats, VerifyError> {
        let (want, stats) = self.walk(blocks, block_index, data.len())?;
        let mut got = [0u8; SHA256_SIZE];
        self.hasher.hash(data, &mut got);
        Self::check_data(block_index, &got, &want, stats)
    }

    /// Verify two data blocks in the order fs-verity does since Linux 6.18
    /// (`fsverity_verify_pending_blocks`): both data blocks are hashed first, together
    /// (2-way interleaved SHA-256 where the CPU has the SHA extensions, else one after
    /// the other), then each block's tree path is walked and its hash checked, first
    /// block first, stopping at the first failure. A block that verifies gets exactly
    /// what [`MerkleTree::verify_block`] would give it (same stats, same cache updates);
    /// when the first block fails, its error is what `verify_block` would report and the
    /// second block is not walked at all: [`VerifyError::Skipped`] (the kernel fails the
    /// whole bio at the first bad block).
    pub fn verify_block_pair(
        &self,
        cache: &VerifiedCache,
        index: [u64; 2],
        data: [&[u8]; 2],
    ) -> [Result<VerifyStats, VerifyError>; 2] {
        match self.resident(cache) {
            Ok(r) => self.verify_block_pair_in(&r, index, data),
            Err(e) => [
                Err(e),
                Err(VerifyError::Skipped {
                    block_index: index[1],
                }),
            ],
        }
    }

    /// [`MerkleTree::verify_block_pair`] with the hash blocks from `blocks` (see
    /// [`MerkleTree::verify_block_in`]).
    pub fn verify_block_pair_in(
        &self,
        blocks: &dyn HashBlocks,
        index: [u64; 2],
        data: [&[u8]; 2],
    ) -> [Result<VerifyStats, VerifyError>; 2] {
        let bs = self.params.block_size;
        let skipped = || {
            Err(VerifyError::Skipped {
                block_index: index[1],
            })
        };
        // Hash first. A block longer than a block is not hashed (the walk reports it).
        let (mut got0, mut got1) = ([0u8; SHA256_SIZE], [0u8; SHA256_SIZE]);
        if data[0].len() == bs && data[1].len() == bs {
            self.hasher.hash2(data[0], data[1], &mut got0, &mut got1);
        } else {
            for (d, got) in [(data[0], &mut got0), (data[1], &mut got1)] {
                if d.len() <= bs {
                    self.hasher.hash(d, got);
                }
            }
        }
        // Then walk, one block after the other, stopping at the first failure.
        let r0 = self
            .walk(blocks, index[0], data[0].len())
            .and_then(|(want, st)| Self::check_data(index[0], &got0, &want, st));
        if r0.is_err() {
            return [r0, skipped()];
        }
        let r1 = self
            .walk(blocks, index[1], data[1].len())
            .and_then(|(want, st)| Self::check_data(index[1], &got1, &want, st));
        [r0, r1]
    }

    /// The last step of a verification: the data block's hash against the expected one.
    #[inline]
    fn check_data(
        block_index: u64,
        got: &[u8; SHA256_SIZE],
        want: &[u8; SHA256_SIZE],
        mut stats: VerifyStats,
    ) -> Result<VerifyStats, VerifyError> {
        stats.hashes += 1;
        if got != want {
            return Err(VerifyError::Mismatch {
                block_index,
                level: -1,
            });
        }
        Ok(stats)
    }

    /// Everything of [`MerkleTree::verify_block`] but hashing the data block: the
    /// argument checks and the tree walk. Returns the expected hash of the data block.
    fn walk(
        &self,
        blocks: &dyn HashBlocks,
        block_index: u64,
        data_len: usize,
    ) -> Result<([u8; SHA256_SIZE], VerifyStats), VerifyError> {
        if block_index >= self.data_blocks {
            return Err(VerifyError::OutOfRange {
                block_index,
                num_blocks: self.data_blocks,
            });
        }
        let bs = self.params.block_size;
        let min = if block_index == self.data_blocks - 1 {
            (self.data_size - block_index * bs as u64) as usize
        } else {
            bs
        };
        if data_len < min || data_len > bs {
            return Err(VerifyError::BadLength {
                block_index,
                len: data_len,
                min,
                max: bs,
            });
        }
        let mut stats = VerifyStats::default();
        let nlevels = self.num_levels();
        let unreadable = |g: u64, level: usize| VerifyError::Unreadable {
            block_index,
            hash_block: g,
            level: level as i32,
        };

        // Walk up to the first verified hash block, or past the top level. `want` is
        // the expected hash of the level-`(level - 1)` block (or of the data block when
        // `level == 0`): from the root, or from the verified block at `level`.
        let mut want = self.root;
        let mut level = 0;
        while level < nlevels {
            stats.levels_walked += 1;
            let g = self.level_start[level] + self.block_at_level(block_index, level);
            let mut hit = false;
            blocks
                .with_block(g, &mut |blk, verified| {
                    if verified {
                        hit = true;
                        want = self.entry_in(blk, block_index, level);
                    }
                    false
                })
                .map_err(|_| unreadable(g, level))?;
            if hit {
                stats.cache_hit = true;
                break;
            }
            level += 1;
        }

        let mut got = [0u8; SHA256_SIZE];
        while level > 0 {
            level -= 1;
            let g = self.level_start[level] + self.block_at_level(block_index, level);
            let mut ok = false;
            blocks
                .with_block(g, &mut |blk, _| {
                    self.hasher.hash(blk, &mut got);
                    ok = got == want;
                    if ok {
                        want = self.entry_in(blk, block_index, level);
                    }
                    ok
                })
                .map_err(|_| unreadable(g, level))?;
            stats.hashes += 1;
            if !ok {
                return Err(VerifyError::Mismatch {
                    block_index,
                    level: level as i32,
                });
            }
        }

        Ok((want, stats))
    }
}

/// Which tree blocks have been verified: one bit per tree block, lock-free.
///
/// Made by [`MerkleTree::new_cache`] and usable only with the tree that made it: any
/// other tree's [`MerkleTree::verify_block`] returns [`VerifyError::WrongCache`]. A set
/// bit means the tree block matched its verified parent's entry (or the root hash);
/// tree bytes are immutable, so a bit stays true until [`VerifiedCache::clear`].
pub struct VerifiedCache {
    bits: Box<[AtomicU64]>,
    nbits: usize,
    tree_id: u64,
}

impl std::fmt::Debug for VerifiedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifiedCache")
            .field("hash_blocks", &self.nbits)
            .field("verified", &self.verified_count())
            .finish()
    }
}

impl VerifiedCache {
    #[inline]
    fn is_set(&self, i: u64) -> bool {
        let w = self.bits[(i / 64) as usize].load(Ordering::Acquire);
        w & (1u64 << (i % 64)) != 0
    }

    #[inline]
    fn set(&self, i: u64) {
        let word = &self.bits[(i / 64) as usize];
        let mask = 1u64 << (i % 64);
        // Skip the read-modify-write when another thread already set it.
        if word.load(Ordering::Relaxed) & mask == 0 {
            word.fetch_or(mask, Ordering::Release);
        }
    }

    /// Forget every verified block (as if the hash pages were evicted).
    pub fn clear(&self) {
        for w in self.bits.iter() {
            w.store(0, Ordering::Release);
        }
    }

    /// Number of tree blocks currently marked verified.
    pub fn verified_count(&self) -> usize {
        self.bits
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones() as usize)
            .sum()
    }

    /// Number of tree blocks the cache covers.
    pub fn capacity(&self) -> usize {
        self.nbits
    }
}

/// What one [`MerkleTree::verify_block`] call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyStats {
    /// SHA-256 computations, including the data block's.
    pub hashes: u32,
    /// The walk stopped at a cached (already verified) hash block; false: it went to the
    /// root.
    pub cache_hit: bool,
    /// Hash blocks looked at on the way up, the cached one included.
    pub levels_walked: u32,
}

/// Digest of everything `reader` yields, in constant memory (one block per tree level;
/// the tree itself is not kept).
pub fn digest_reader<R: Read>(mut reader: R, params: &MerkleParams) -> std::io::Result<[u8; 32]> {
    params
        .validate()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut b = MerkleBuilder::with_mode(params.clone(), false);
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => b.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(b.finish_digest())
}

// `MerkleTree` and `VerifiedCache` are shared through `Arc` by worker threads.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<MerkleTree>();
    send_sync::<VerifiedCache>();
};

/// `sha256:<hex>`, as `fsverity digest` prints it.
pub fn format_digest(d: &[u8; 32]) -> String {
    format!("sha256:{}", hex::encode(d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::sync::Arc;

    /// fsverity-utils test_compute_digest.c: `(uint8_t)((i % 11) + (i % 439) + (i % 1103))`.
    fn vector_data(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| ((i % 11) + (i % 439) + (i % 1103)) as u8)
            .collect()
    }

    /// Deterministic pseudo-random bytes (xorshift64*).
    fn random_data(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            v.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
        }
        v.truncate(len);
        v
    }

    fn params(bs: usize, salt: &[u8]) -> MerkleParams {
        MerkleParams::new(bs, salt).unwrap()
    }

    /// Straightforward, non-streaming reference: (root, tree bytes in stored order).
    fn reference_tree(p: &MerkleParams, data: &[u8]) -> ([u8; 32], Vec<u8>) {
        let bs = p.block_size;
        let h = |b: &[u8]| {
            let mut padded_salt = p.salt.clone();
            if !padded_salt.is_empty() {
                padded_salt.resize(64, 0);
            }
            let mut blk = b.to_vec();
            blk.resize(bs, 0);
            let mut s = Sha256::new();
            s.update(&padded_salt);
            s.update(&blk);
            let out: [u8; 32] = s.finalize().into();
            out
        };
        if data.is_empty() {
            return ([0; 32], Vec::new());
        }
        let mut cur: Vec<[u8; 32]> = data.chunks(bs).map(h).collect();
        let mut levels: Vec<Vec<u8>> = Vec::new();
        while cur.len() > 1 {
            let mut lvl: Vec<u8> = cur.concat();
            lvl.resize(lvl.len().div_ceil(bs) * bs, 0);
            cur = lvl.chunks(bs).map(h).collect();
            levels.push(lvl);
        }
        let tree = levels.iter().rev().flatten().copied().collect();
        (cur[0], tree)
    }

    #[test]
    fn kernel_md_test_vectors() {
        let abcd = b"abcd";
        let cases: [(usize, usize, &[u8], bool, &str); 8] = [
            (
                0,
                4096,
                b"",
                false,
                "3d248ca542a24fc62d1c43b916eae5016878e2533c88238480b26128a1f1af95",
            ),
            (
                1,
                4096,
                b"",
                false,
                "b803429503d95915829b29fdbc8bbad142f3abfd11b1cadf5526582e685c0551",
            ),
            (
                4096,
                4096,
                b"",
                false,
                "6ac39979016e3ddf3d39fff6cb984f7c118acdf1852919f5c100c4b142c1818e",
            ),
            (
                100000,
                4096,
                b"",
                false,
                "f2096a36c5cdca4fa33ee8852833150bb324992e5417a9d571f1bffff73b9efc",
            ),
            (
                1000000,
                4096,
                b"",
                false,
                "48df0c462329cd879661bd05b39aa81b05cc16afd27a7196a559da83531d39d9",
            ),
            (
                1000000,
                4096,
                abcd,
                false,
                "917900b0d299454aa304d5debc6f39e4af7b5abe33bdbc568d5d8f1e5c4d8652",
            ),
            (
                1000000,
                1024,
                b"",
                false,
                "e9df927c14fcb961d5f51c666d8ae4c14fe4ff98a374c733e898d00c9e74a8e3",
            ),
            (
                100000,
                1024,
                b"",
                true,
                "09cbbaeed2a04c2da242c10e1568d96f358a16aa1ebe8cf0286120c13c9366d1",
            ),
        ];
        for (len, bs, salt, zeros, want) in cases {
            let data = if zeros {
                vec![0u8; len]
            } else {
                vector_data(len)
            };
            let p = params(bs, salt);
            let t = MerkleTree::build(p.clone(), &data);
            assert_eq!(
                hex::encode(t.file_digest()),
                want,
                "len {len} bs {bs} salt {salt:?}"
            );
            assert_eq!(hex::encode(digest_reader(&data[..], &p).unwrap()), want);
            assert_eq!(sha256(&t.descriptor()), t.file_digest());
        }
    }

    #[test]
    fn descriptor_layout() {
        let p = params(2048, b"\x01\x02\x03");
        let t = MerkleTree::build(p, &vector_data(5000));
        let d = t.descriptor();
        assert_eq!(&d[..4], &[1, 1, 11, 3]);
        assert_eq!(&d[4..8], &[0; 4]);
        assert_eq!(u64::from_le_bytes(d[8..16].try_into().unwrap()), 5000);
        assert_eq!(&d[16..48], &t.root_hash());
        assert_eq!(&d[48..80], &[0; 32]);
        assert_eq!(&d[80..83], &[1, 2, 3]);
        assert!(d[83..].iter().all(|&b| b == 0));
    }

    #[test]
    fn tree_layout_matches_reference_and_chunking() {
        for bs in [1024usize, 4096] {
            let hpb = bs / 32;
            for salt in [&b""[..], b"s", &[7u8; 32]] {
                let p = params(bs, salt);
                for len in [
                    0,
                    1,
                    bs - 1,
                    bs,
                    bs + 1,
                    2 * bs,
                    hpb * bs,
                    hpb * bs + 1,
                    hpb * hpb * bs / 4 + 17,
                ] {
                    let data = random_data(len, len as u64 + bs as u64);
                    let (root, tree) = reference_tree(&p, &data);
                    let t = MerkleTree::build(p.clone(), &data);
                    assert_eq!(t.root_hash(), root, "bs {bs} len {len}");
                    assert_eq!(t.tree_bytes(), &tree[..], "bs {bs} len {len}");
                    assert_eq!(t.hash_blocks() * bs, tree.len());
                    assert_eq!(
                        t.num_levels(),
                        level_block_counts(len as u64, bs).len(),
                        "bs {bs} len {len}"
                    );
                    for chunk in [1usize, 7, bs - 1, bs + 3, 3 * bs] {
                        if len > 100_000 && chunk < 100 {
                            continue;
                        }
                        let mut b = MerkleBuilder::new(p.clone());
                        for c in data.chunks(chunk) {
                            b.update(c);
                        }
                        let t2 = b.finish();
                        assert_eq!(t2.root_hash(), root, "chunk {chunk}");
                        assert_eq!(t2.tree_bytes(), &tree[..], "chunk {chunk}");
                        assert_eq!(t2.data_size(), len as u64);
                    }
                }
            }
        }
    }

    #[test]
    fn small_file_kernel_cases() {
        let p = params(4096, b"");
        let empty = MerkleTree::build(p.clone(), b"");
        assert_eq!(empty.root_hash(), [0; 32]);
        assert_eq!(empty.num_levels(), 0);
        assert!(empty.tree_bytes().is_empty());
        let one = MerkleTree::build(p.clone(), b"x");
        let mut blk = vec![0u8; 4096];
        blk[0] = b'x';
        assert_eq!(one.root_hash(), sha256(&blk));
        assert_eq!(one.num_levels(), 0);
        assert_eq!(one.hash_blocks(), 0);
        let two = MerkleTree::build(p, &[1u8; 4097]);
        assert_eq!(two.num_levels(), 1);
        assert_eq!(two.hash_blocks(), 1);
        assert_eq!(two.root_hash(), sha256(two.tree_bytes()));
    }

    fn fsverity_digest(path: &std::path::Path, bs: usize, salt: &[u8]) -> String {
        let mut cmd = Command::new("fsverity");
        cmd.arg("digest").arg(format!("--block-size={bs}"));
        if !salt.is_empty() {
            cmd.arg(format!("--salt={}", hex::encode(salt)));
        }
        cmd.arg(path);
        let out = match cmd.output() {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "the `fsverity` tool is not on PATH: install the Debian package `fsverity` \
                 (apt-get install fsverity); this oracle test needs it"
            ),
            Err(e) => panic!("running fsverity: {e}"),
        };
        assert!(
            out.status.success(),
            "fsverity digest failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = String::from_utf8(out.stdout).unwrap();
        s.split_whitespace().next().unwrap().to_string()
    }

    #[test]
    fn oracle_fsverity_digest() {
        if !crate::sys::testing::require_tool("oracle_fsverity_digest", "fsverity", "fsverity") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let salts: [&[u8]; 4] = [b"", b"\xa5", b"salt", &[0x5au8; 32]];
        let mut checked = 0;
        for bs in [1024usize, 2048, 4096] {
            let hpb = bs / 32;
            let mut sizes = vec![
                0,
                1,
                bs - 1,
                bs,
                bs + 1,
                hpb * bs,
                hpb * bs + 1,
                128 * 4096 + 1,
                hpb * hpb * bs,
                hpb * hpb * bs + 1,
            ];
            if bs == 1024 {
                sizes.push(3 * 1024 * 1024 + 555);
            }
            for (k, &len) in sizes.iter().enumerate() {
                let data = random_data(len, (bs * 100 + k) as u64);
                let path = dir.path().join(format!("f-{bs}-{len}"));
                std::fs::write(&path, &data).unwrap();
                // Every salt on the small files; the 3-level ones (up to 64
                // MiB, hashed unoptimised in a test build) with the longest
                // salt only: the salt's padding is covered by the others.
                let big = len > 4 << 20;
                for salt in salts.iter().copied().filter(|s| !big || s.len() == 32) {
                    let p = params(bs, salt);
                    let t = MerkleTree::build(p.clone(), &data);
                    let want = fsverity_digest(&path, bs, salt);
                    assert_eq!(
                        format_digest(&t.file_digest()),
                        want,
                        "bs {bs} len {len} salt {salt:?}"
                    );
                    let f = std::fs::File::open(&path).unwrap();
                    assert_eq!(format_digest(&digest_reader(f, &p).unwrap()), want);
                    if len == hpb * hpb * bs + 1 {
                        assert_eq!(t.num_levels(), 3);
                    }
                    checked += 1;
                }
            }
        }
        // 3 block sizes x 10 sizes x 4 salts, plus 1024's extra size, less
        // the 3 salts left out at each size over 4 MiB (the two 3-level
        // sizes of 2048 and of 4096).
        assert_eq!(checked, 3 * 10 * 4 + 4 - 4 * 3);
    }

    /// 3-level tree with 1024-byte blocks: 32*32 + 5 full blocks and a short one.
    fn three_level() -> (Vec<u8>, MerkleTree) {
        let data = random_data(1024 * (32 * 32 + 5) + 100, 42);
        let t = MerkleTree::build(params(1024, b"pepper"), &data);
        assert_eq!(t.num_levels(), 3);
        (data, t)
    }

    fn block(data: &[u8], bs: usize, i: u64) -> &[u8] {
        let s = i as usize * bs;
        &data[s..(s + bs).min(data.len())]
    }

    #[test]
    fn verify_all_blocks_and_cache() {
        let (data, t) = three_level();
        let bs = 1024;
        let cache = t.new_cache();
        assert_eq!(cache.verified_count(), 0);
        let mut total = 0u64;
        for i in 0..t.data_blocks() {
            let s = t.verify_block(&cache, i, block(&data, bs, i)).unwrap();
            total += s.hashes as u64;
            if i == 0 {
                assert_eq!(
                    s,
                    VerifyStats {
                        hashes: 4,
                        cache_hit: false,
                        levels_walked: 3
                    }
                );
            }
            if i == 1 {
                assert_eq!(
                    s,
                    VerifyStats {
                        hashes: 1,
                        cache_hit: true,
                        levels_walked: 1
                    }
                );
            }
            if i == 32 {
                // new leaf hash block, its parent is verified
                assert_eq!(
                    s,
                    VerifyStats {
                        hashes: 2,
                        cache_hit: true,
                        levels_walked: 2
                    }
                );
            }
        }
        // Every hash block hashed exactly once, every data block once.
        assert_eq!(total, t.data_blocks() + t.hash_blocks() as u64);
        assert!(total < t.data_blocks() * t.num_levels() as u64 / 2);
        assert_eq!(cache.verified_count(), t.hash_blocks());
        // Warm: one hash per block.
        for i in (0..t.data_blocks()).rev() {
            let s = t.verify_block(&cache, i, block(&data, bs, i)).unwrap();
            assert_eq!(s.hashes, 1);
            assert!(s.cache_hit);
        }
        cache.clear();
        assert_eq!(cache.verified_count(), 0);
        let s = t.verify_block(&cache, 500, block(&data, bs, 500)).unwrap();
        assert!(!s.cache_hit);
        assert_eq!(s.hashes, 4);
    }

    #[test]
    fn verify_last_block_short_or_padded() {
        let (data, t) = three_level();
        let bs = 1024;
        let cache = t.new_cache();
        let last = t.data_blocks() - 1;
        let short = block(&data, bs, last);
        assert_eq!(short.len(), 100);
        t.verify_block(&cache, last, short).unwrap();
        let mut padded = short.to_vec();
        padded.resize(bs, 0);
        t.verify_block(&cache, last, &padded).unwrap();
        padded[bs - 1] = 1; // garbage past EOF
        assert_eq!(
            t.verify_block(&cache, last, &padded),
            Err(VerifyError::Mismatch {
                block_index: last,
                level: -1
            })
        );
        assert!(matches!(
            t.verify_block(&cache, last, &short[..99]),
            Err(VerifyError::BadLength { min: 100, .. })
        ));
        assert!(matches!(
            t.verify_block(&cache, 0, &data[..bs - 1]),
            Err(VerifyError::BadLength { .. })
        ));
        assert!(matches!(
            t.verify_block(&cache, 0, &data[..bs + 1]),
            Err(VerifyError::BadLength { .. })
        ));
        assert_eq!(
            t.verify_block(&cache, last + 1, &padded),
            Err(VerifyError::OutOfRange {
                block_index: last + 1,
                num_blocks: last + 1
            })
        );
        let other = MerkleTree::build(t.params().clone(), &data);
        assert_eq!(
            other.verify_block(&cache, 0, block(&data, bs, 0)),
            Err(VerifyError::WrongCache)
        );
        let empty = MerkleTree::build(params(4096, b""), b"");
        assert!(matches!(
            empty.verify_block(&empty.new_cache(), 0, b""),
            Err(VerifyError::OutOfRange { num_blocks: 0, .. })
        ));
    }

    #[test]
    fn flipped_data_byte_is_level_minus_one() {
        let (data, t) = three_level();
        let bs = 1024;
        let cache = t.new_cache();
        for (n, i) in [0u64, 1, 31, 32, 600, 1024, t.data_blocks() - 1]
            .into_iter()
            .enumerate()
        {
            let mut b = block(&data, bs, i).to_vec();
            let pos = (n * 131) % b.len();
            b[pos] ^= 0x10;
            // cold path (first ones) and warm path (after the good block is verified)
            for _ in 0..2 {
                assert_eq!(
                    t.verify_block(&cache, i, &b),
                    Err(VerifyError::Mismatch {
                        block_index: i,
                        level: -1
                    })
                );
                t.verify_block(&cache, i, block(&data, bs, i)).unwrap();
            }
        }
    }

    #[test]
    fn single_block_file() {
        let p = params(4096, b"");
        let data = random_data(3000, 9);
        let t = MerkleTree::build(p.clone(), &data);
        let cache = t.new_cache();
        let s = t.verify_block(&cache, 0, &data).unwrap();
        assert_eq!(
            s,
            VerifyStats {
                hashes: 1,
                cache_hit: false,
                levels_walked: 0
            }
        );
        let mut bad = data.clone();
        bad[0] ^= 1;
        assert_eq!(
            t.verify_block(&cache, 0, &bad),
            Err(VerifyError::Mismatch {
                block_index: 0,
                level: -1
            })
        );
        let d = t.file_digest();
        assert!(matches!(
            MerkleTree::from_stored(p.clone(), 3000, Vec::new(), &d),
            Err(MerkleError::RootNotInTree { data_size: 3000 })
        ));
        let t2 = MerkleTree::from_stored_with_root(p.clone(), 3000, Vec::new(), &t.root_hash(), &d)
            .unwrap();
        t2.verify_block(&t2.new_cache(), 0, &data).unwrap();
        let mut wrong_root = t.root_hash();
        wrong_root[3] ^= 1;
        assert!(matches!(
            MerkleTree::from_stored_with_root(p, 3000, Vec::new(), &wrong_root, &d),
            Err(MerkleError::DigestMismatch { .. })
        ));
    }

    #[test]
    fn from_stored_roundtrip_and_rejections() {
        let (data, t) = three_level();
        let p = t.params().clone();
        let n = t.data_size();
        let d = t.file_digest();
        let tree = t.tree_bytes().to_vec();
        let t2 = MerkleTree::from_stored(p.clone(), n, tree.clone(), &d).unwrap();
        assert_eq!(t2.root_hash(), t.root_hash());
        assert_eq!(t2.num_levels(), 3);
        let c = t2.new_cache();
        for i in 0..t2.data_blocks() {
            t2.verify_block(&c, i, block(&data, 1024, i)).unwrap();
        }
        let t3 = MerkleTree::from_stored_with_root(p.clone(), n, tree.clone(), &t.root_hash(), &d)
            .unwrap();
        assert_eq!(t3.file_digest(), d);

        // Wrong sizes.
        let mut longer = tree.clone();
        longer.extend_from_slice(&[0u8; 1024]);
        for bad in [
            Vec::new(),
            tree[..tree.len() - 1].to_vec(),
            tree[..tree.len() - 1024].to_vec(),
            longer,
        ] {
            assert!(matches!(
                MerkleTree::from_stored(p.clone(), n, bad, &d),
                Err(MerkleError::TreeSize { .. })
            ));
        }
        // Layout for a different size.
        assert!(matches!(
            MerkleTree::from_stored(p.clone(), n * 2, tree.clone(), &d),
            Err(MerkleError::TreeSize { .. })
        ));
        // Wrong digest; same layout but other data size; other salt; other root.
        let mut wd = d;
        wd[31] ^= 0x80;
        let e = MerkleTree::from_stored(p.clone(), n, tree.clone(), &wd).unwrap_err();
        assert!(matches!(e, MerkleError::DigestMismatch { .. }));
        assert!(e.to_string().contains(&hex::encode(wd)), "{e}");
        assert!(matches!(
            MerkleTree::from_stored(p.clone(), n - 1, tree.clone(), &d),
            Err(MerkleError::DigestMismatch { .. })
        ));
        assert!(matches!(
            MerkleTree::from_stored(params(1024, b"salt"), n, tree.clone(), &d),
            Err(MerkleError::DigestMismatch { .. })
        ));
        let mut wr = t.root_hash();
        wr[0] ^= 1;
        assert!(matches!(
            MerkleTree::from_stored_with_root(p.clone(), n, tree.clone(), &wr, &d),
            Err(MerkleError::RootMismatch { .. })
        ));
        // Empty file.
        let e0 = MerkleTree::build(p.clone(), b"");
        let e1 = MerkleTree::from_stored(p.clone(), 0, Vec::new(), &e0.file_digest()).unwrap();
        assert_eq!(e1.root_hash(), [0; 32]);
        assert!(MerkleTree::from_stored(p.clone(), 0, Vec::new(), &d).is_err());
        // Invalid params.
        let bad = MerkleParams {
            block_size: 1000,
            salt: Vec::new(),
        };
        assert!(matches!(
            MerkleTree::from_stored(bad, n, tree, &d),
            Err(MerkleError::BlockSize(1000))
        ));
    }

    /// `verify_block_pair` must be exactly two `verify_block` calls: same
    /// results, same stats, same cache bits, on clean data, corrupted data in
    /// either block, a corrupted tree block, and the short last block; except
    /// that a pair whose first block fails stops there, its second block
    /// [`VerifyError::Skipped`] (the kernel's order: the cache bits still
    /// match here, the second block's path adding no mark after a failure).
    #[test]
    fn pairs_verify_exactly_like_single_blocks() {
        let (data, t) = three_level();
        let bs = 1024u64;
        let mut bad_data = data.clone();
        bad_data[5 * 1024 + 17] ^= 0x40; // block 5 (second of pair 4/5)
        bad_data[10 * 1024] ^= 0x01; // block 10 (first of pair 10/11)
        let mut tree = t.tree_bytes().to_vec();
        let g = t.level_start[0] + 1; // leaf block covering data blocks 32..
        tree[(g * bs) as usize + 3] ^= 0x01;
        let bad_tree =
            MerkleTree::from_stored(t.params().clone(), t.data_size(), tree, &t.file_digest())
                .unwrap();
        for (tree, data) in [(&t, &data), (&t, &bad_data), (&bad_tree, &data)] {
            let (single, paired) = (tree.new_cache(), tree.new_cache());
            let n = tree.data_blocks();
            let mut i = 0;
            while i < n {
                if i + 1 < n {
                    let want = [
                        tree.verify_block(&single, i, block(data, 1024, i)),
                        tree.verify_block(&single, i + 1, block(data, 1024, i + 1)),
                    ];
                    let got = tree.verify_block_pair(
                        &paired,
                        [i, i + 1],
                        [block(data, 1024, i), block(data, 1024, i + 1)],
                    );
                    assert_eq!(got, stop_at_first(want, i + 1), "blocks {i}, {}", i + 1);
                } else {
                    // The last block is short: a pair with it takes the
                    // single path; check it against a full block too.
                    let want = [
                        tree.verify_block(&single, i - 1, block(data, 1024, i - 1)),
                        tree.verify_block(&single, i, block(data, 1024, i)),
                    ];
                    let got = tree.verify_block_pair(
                        &paired,
                        [i - 1, i],
                        [block(data, 1024, i - 1), block(data, 1024, i)],
                    );
                    assert_eq!(got, stop_at_first(want, i), "last blocks");
                }
                i += 2;
            }
            assert_eq!(paired.verified_count(), single.verified_count());
        }
        // The corrupted blocks are reported where they are.
        let c = t.new_cache();
        let r = t.verify_block_pair(
            &c,
            [4, 5],
            [block(&bad_data, 1024, 4), block(&bad_data, 1024, 5)],
        );
        assert!(r[0].is_ok());
        assert_eq!(
            r[1],
            Err(VerifyError::Mismatch {
                block_index: 5,
                level: -1
            })
        );
        let r = t.verify_block_pair(
            &c,
            [10, 11],
            [block(&bad_data, 1024, 10), block(&bad_data, 1024, 11)],
        );
        assert_eq!(
            r[0],
            Err(VerifyError::Mismatch {
                block_index: 10,
                level: -1
            })
        );
        assert_eq!(r[1], Err(VerifyError::Skipped { block_index: 11 }));
    }

    /// Two single results as a pair reports them: the second
    /// [`VerifyError::Skipped`] when the first failed.
    fn stop_at_first(
        want: [Result<VerifyStats, VerifyError>; 2],
        second: u64,
    ) -> [Result<VerifyStats, VerifyError>; 2] {
        match want {
            [Err(e), _] => [
                Err(e),
                Err(VerifyError::Skipped {
                    block_index: second,
                }),
            ],
            w => w,
        }
    }

    /// A [`HashBlocks`] that records which hash blocks were looked at.
    struct Watched<'a> {
        inner: Resident<'a>,
        seen: std::cell::RefCell<Vec<u64>>,
    }

    impl HashBlocks for Watched<'_> {
        fn with_block(
            &self,
            index: u64,
            f: &mut dyn FnMut(&[u8], bool) -> bool,
        ) -> Result<(), BlockUnreadable> {
            self.seen.borrow_mut().push(index);
            self.inner.with_block(index, f)
        }
    }

    /// The kernel's order (6.18 `fsverity_verify_pending_blocks`): both data
    /// blocks hashed, then the paths walked first block first, stopping at the
    /// first failure: a bad first block leaves the second block's tree path
    /// unread and unmarked. (Before, both paths were walked first: block 40's
    /// leaf hash block was read and marked verified.)
    #[test]
    fn a_failing_first_block_stops_before_the_second_blocks_walk() {
        let (data, t) = three_level();
        let mut bad = data.clone();
        bad[17] ^= 0x01; // block 0
        // Blocks 0 and 40: different leaf hash blocks (32 hashes per block).
        let leaf = |b: u64| t.level_start[0] + t.block_at_level(b, 0);
        assert_ne!(leaf(0), leaf(40));
        let cache = t.new_cache();
        let w = Watched {
            inner: t.resident(&cache).unwrap(),
            seen: Default::default(),
        };
        let r = t.verify_block_pair_in(&w, [0, 40], [block(&bad, 1024, 0), block(&bad, 1024, 40)]);
        assert_eq!(
            r,
            [
                Err(VerifyError::Mismatch {
                    block_index: 0,
                    level: -1
                }),
                Err(VerifyError::Skipped { block_index: 40 }),
            ]
        );
        let seen = w.seen.borrow().clone();
        assert!(
            !seen.contains(&leaf(40)),
            "block 40's path was walked: {seen:?}"
        );
        // Only block 0's path is marked: as one single call on block 0.
        let single = t.new_cache();
        let _ = t.verify_block(&single, 0, block(&bad, 1024, 0));
        assert_eq!(cache.verified_count(), single.verified_count());
        // A good first block goes on to the second.
        let r = t.verify_block_pair(
            &cache,
            [0, 40],
            [block(&data, 1024, 0), block(&data, 1024, 40)],
        );
        assert!(r[0].is_ok() && r[1].is_ok(), "{r:?}");
    }

    #[test]
    fn corrupted_tree_never_verifies() {
        let (data, t) = three_level();
        let bs = 1024u64;
        let hpb = 32u64;
        let d = t.file_digest();
        let counts = level_block_counts(t.data_size(), 1024); // [33, 2, 1]
        assert_eq!(counts, vec![33, 2, 1]);
        // (level, block within level, byte offset within block)
        let spots: [(usize, u64, usize); 7] = [
            (2, 0, 0),     // top block: caught by from_stored
            (2, 0, 1000),  // top block padding
            (1, 0, 5),     // middle level
            (1, 1, 40),    // middle level, second (partial) block, used entry
            (1, 1, 1023),  // middle level, padding
            (0, 7, 300),   // leaf
            (0, 32, 1023), // last leaf block, padding
        ];
        for (level, k, off) in spots {
            let g = t.level_start[level] + k;
            let mut tree = t.tree_bytes().to_vec();
            tree[(g * bs) as usize + off] ^= 0x01;
            let r = MerkleTree::from_stored(t.params().clone(), t.data_size(), tree, &d);
            if level == 2 {
                assert!(matches!(r, Err(MerkleError::DigestMismatch { .. })));
                continue;
            }
            let bad = r.unwrap();
            let cache = bad.new_cache();
            let span = hpb.pow(level as u32 + 1);
            let covered = k * span..(k + 1) * span;
            let mut failures = 0;
            for i in 0..bad.data_blocks() {
                let r = bad.verify_block(&cache, i, block(&data, 1024, i));
                if covered.contains(&i) {
                    assert_eq!(
                        r,
                        Err(VerifyError::Mismatch {
                            block_index: i,
                            level: level as i32
                        }),
                        "spot {level}/{k}/{off} block {i}"
                    );
                    failures += 1;
                } else {
                    r.unwrap();
                }
            }
            assert!(failures > 0);
            // The corrupted block was never marked verified.
            assert!(!cache.is_set(g));
        }
    }

    #[test]
    fn concurrent_verification_shared_cache() {
        let (data, t) = three_level();
        let data = Arc::new(data);
        let t = Arc::new(t);
        let cache = Arc::new(t.new_cache());
        for round in 0..3 {
            cache.clear();
            let handles: Vec<_> = (0..2)
                .map(|th| {
                    let (data, t, cache) = (data.clone(), t.clone(), cache.clone());
                    std::thread::spawn(move || {
                        let n = t.data_blocks();
                        let mut hashes = 0u64;
                        for j in 0..n {
                            let i = if (th + round) % 2 == 0 { j } else { n - 1 - j };
                            hashes += t
                                .verify_block(&cache, i, block(&data, 1024, i))
                                .unwrap()
                                .hashes as u64;
                        }
                        hashes
                    })
                })
                .collect();
            let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(cache.verified_count(), t.hash_blocks());
            // Duplicated work is possible in races, but bounded by the cold cost.
            assert!(total >= 2 * t.data_blocks() + t.hash_blocks() as u64);
            assert!(total <= 2 * (t.data_blocks() + t.hash_blocks() as u64));
        }
    }

    #[test]
    fn parameter_validation() {
        for bs in [0usize, 512, 1000, 131072, 3072] {
            let e = MerkleParams::new(bs, b"").unwrap_err();
            assert!(matches!(e, MerkleError::BlockSize(b) if b == bs));
            let msg = e.to_string();
            assert!(msg.contains(&bs.to_string()) && msg.contains("1024") && msg.contains("65536"));
        }
        let e = MerkleParams::new(4096, &[0u8; 33]).unwrap_err();
        assert!(matches!(e, MerkleError::SaltTooLong(33)));
        assert!(e.to_string().contains("33") && e.to_string().contains("32"));
        for bs in [1024usize, 2048, 4096, 8192, 16384, 32768, 65536] {
            MerkleParams::new(bs, &[1u8; 32]).unwrap();
        }
        let bad = MerkleParams {
            block_size: 4096,
            salt: vec![0; 40],
        };
        let e = digest_reader(&b""[..], &bad).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(MerkleParams::default(), params(4096, b""));
    }

    #[test]
    #[should_panic(expected = "invalid Merkle tree block size 512")]
    fn builder_rejects_invalid_params() {
        let _ = MerkleBuilder::new(MerkleParams {
            block_size: 512,
            salt: Vec::new(),
        });
    }

    #[test]
    fn large_block_size_and_format() {
        let data = random_data(65536 * 3 + 1, 5);
        let p = params(65536, b"x");
        let t = MerkleTree::build(p.clone(), &data);
        let (root, tree) = reference_tree(&p, &data);
        assert_eq!(t.root_hash(), root);
        assert_eq!(t.tree_bytes(), &tree[..]);
        let c = t.new_cache();
        for i in 0..t.data_blocks() {
            t.verify_block(&c, i, block(&data, 65536, i)).unwrap();
        }
        let f = format_digest(&[0xab; 32]);
        assert_eq!(f, format!("sha256:{}", "ab".repeat(32)));
    }

    /// Whether this kernel gives `sha256` through AF_ALG.
    fn kernel_sha256() -> Result<(), String> {
        crate::sys::afalg_probe("hash", KERNEL_SHA256).map_err(|e| e.to_string())
    }

    #[test]
    fn software_block_hash_exact_values() {
        let t = MerkleTree::build(params(4096, b""), &[0u8; 8192]);
        let mut h = [0u8; 32];
        t.hash_data_block(&[0u8; 4096], &mut h);
        // python3: hashlib.sha256(b'\0' * 4096)
        assert_eq!(
            hex::encode(h),
            "ad7facb2586fc6e966c004d7d1d16b024f5805ff7cb47c7a85dabd8b48892ca7"
        );
        let t = MerkleTree::build(params(4096, b"abcd"), &[0u8; 8192]);
        let data: Vec<u8> = (0..1024).map(|i| i as u8).collect();
        t.hash_data_block(&data, &mut h);
        // python3: sha256(b'abcd' + b'\0' * 60 + bytes(range(256)) * 4 + b'\0' * 3072)
        assert_eq!(
            hex::encode(h),
            "1cf018dcb03dd1e10fc687e9f303277eee00a8ca91afd1a4547f11f3ba0e0987"
        );
        assert_eq!(t.hash_kind(), HashKind::Software);
    }

    /// What the kernel is sent for one block hashes, with the sha2
    /// crate, to what readpath's own hasher gives: salt padding and zero
    /// padding of short blocks, every block size, at most the parts AF_ALG
    /// takes in one call.
    #[test]
    fn the_parts_sent_to_the_kernel_are_the_salted_padded_block() {
        for bs in [1024, 4096, 65536] {
            for salt in [&b""[..], b"\xa5", b"abcd", &[0x5a; 32]] {
                let p = params(bs, salt);
                let t = MerkleTree::build(p.clone(), &[0u8; 2048]);
                let mut padded = [0u8; SHA256_BLOCK_SIZE];
                padded[..salt.len()].copy_from_slice(salt);
                let salt_sent = if salt.is_empty() {
                    &padded[..0]
                } else {
                    &padded[..]
                };
                for len in [0, 1, 100, bs / 2, bs - 1, bs] {
                    let data = random_data(len, len as u64);
                    let mut parts = [&[][..]; crate::sys::MAX_DIGEST_PARTS];
                    let n = KernelSha256::parts(salt_sent, &data, bs, &mut parts);
                    assert!(n <= crate::sys::MAX_DIGEST_PARTS);
                    let mut sent = Sha256::new();
                    let mut total = 0;
                    for part in &parts[..n] {
                        sent.update(part);
                        total += part.len();
                    }
                    assert_eq!(total, salt_sent.len() + bs, "bs {bs} len {len}");
                    let mut want = [0u8; 32];
                    t.hash_data_block(&data, &mut want);
                    assert_eq!(
                        sent.finalize()[..],
                        want[..],
                        "bs {bs} salt {salt:?} len {len}"
                    );
                }
            }
        }
    }

    #[test]
    fn kernel_hash_without_af_alg_is_an_error_naming_why() {
        let Err(why) = kernel_sha256() else {
            eprintln!("AF_ALG sha256 is available here: the refusal is not testable");
            return;
        };
        let t = MerkleTree::build(params(4096, b""), &[1u8; 8192]);
        let e = t.with_hash(HashKind::Kernel).unwrap_err();
        assert!(e.to_string().contains("AF_ALG hash sha256"), "{e}");
        assert_eq!(e.to_string(), why);
        assert!(MerkleBuilder::with_hash(params(4096, b""), HashKind::Kernel).is_err());
        // Software needs nothing.
        assert!(t.with_hash(HashKind::Software).is_ok());
    }

    /// The kernel's sha256 gives readpath's hashes bit for bit: exact block
    /// hashes (salted and not, short blocks zero-padded), exact file digests
    /// of whole trees, and verification through a tree that hashes with it.
    #[test]
    fn kernel_hash_equals_software_bit_for_bit() {
        if let Err(why) = kernel_sha256() {
            eprintln!("SKIPPED kernel_hash_equals_software_bit_for_bit: {why}");
            return;
        }
        equals_software_bit_for_bit(HashKind::Kernel);
    }

    /// The port of the kernel's generic C gives the same bytes.
    #[test]
    fn generic_hash_equals_software_bit_for_bit() {
        equals_software_bit_for_bit(HashKind::Generic);
    }

    /// Hashing by `kind` gives the software's bytes: exact block hashes
    /// (salted and not, short blocks zero-padded), whole-tree digests (those
    /// of `file_digests_match_reference`), and verification through a tree
    /// that hashes with it, sharing the software tree's cache.
    fn equals_software_bit_for_bit(kind: HashKind) {
        let soft = MerkleTree::build(params(4096, b""), &[0u8; 8192]);
        let k = soft.with_hash(kind).unwrap();
        assert_eq!(k.hash_kind(), kind);
        let mut h = [0u8; 32];
        k.hash_data_block(&[0u8; 4096], &mut h);
        assert_eq!(
            hex::encode(h),
            "ad7facb2586fc6e966c004d7d1d16b024f5805ff7cb47c7a85dabd8b48892ca7"
        );
        let salted = MerkleTree::build(params(4096, b"abcd"), &[0u8; 8192])
            .with_hash(kind)
            .unwrap();
        let data: Vec<u8> = (0..1024).map(|i| i as u8).collect();
        salted.hash_data_block(&data, &mut h);
        assert_eq!(
            hex::encode(h),
            "1cf018dcb03dd1e10fc687e9f303277eee00a8ca91afd1a4547f11f3ba0e0987"
        );
        for (len, bs, salt, want) in [
            (
                100000,
                4096,
                &b""[..],
                "f2096a36c5cdca4fa33ee8852833150bb324992e5417a9d571f1bffff73b9efc",
            ),
            (
                1000000,
                4096,
                b"abcd",
                "917900b0d299454aa304d5debc6f39e4af7b5abe33bdbc568d5d8f1e5c4d8652",
            ),
            (
                1000000,
                1024,
                b"",
                "e9df927c14fcb961d5f51c666d8ae4c14fe4ff98a374c733e898d00c9e74a8e3",
            ),
        ] {
            let data = vector_data(len);
            let mut b = MerkleBuilder::with_hash(params(bs, salt), kind).unwrap();
            b.update(&data);
            let kt = b.finish();
            assert_eq!(hex::encode(kt.file_digest()), want, "len {len} bs {bs}");
            let st = MerkleTree::build(params(bs, salt), &data);
            assert_eq!(kt.tree_bytes(), st.tree_bytes());
            let kv = st.with_hash(kind).unwrap();
            let c = st.new_cache();
            for i in 0..st.data_blocks() {
                kv.verify_block(&c, i, block(&data, bs, i)).unwrap();
            }
            let mut bad = block(&data, bs, 3).to_vec();
            bad[7] ^= 1;
            assert!(kv.verify_block(&c, 3, &bad).is_err());
        }
    }
}
