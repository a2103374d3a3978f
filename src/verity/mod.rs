//! fs-verity: the Merkle tree the kernel keeps per file (its layout, the
//! file digest `fsverity digest` prints, per-block verification with the
//! "verified" marks of hash blocks), and the two-at-a-time SHA-256 that
//! fs-verity uses since Linux 6.18. Pure code over bytes: no I/O.

pub mod merkle;
pub mod sha256x2;
