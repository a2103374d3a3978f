//! fs-verity: the Merkle tree the kernel keeps per file (its layout, the
//! file digest `fsverity digest` prints, per-block verification with the
//! "verified" marks of hash blocks), the two-at-a-time SHA-256 that
//! fs-verity uses since Linux 6.18, and a port of the kernel's generic C
//! SHA-256. Pure code over bytes: no I/O.

pub mod merkle;
pub mod sha256_generic;
pub mod sha256x2;
