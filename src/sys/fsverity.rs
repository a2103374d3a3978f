//! The kernel's own fs-verity, through its ioctls: a file's Merkle tree
//! built by the kernel (`FS_IOC_ENABLE_VERITY`) and its digest
//! (`FS_IOC_MEASURE_VERITY`), held against readpath's `digest`.
//!
//! `uapi/linux/fsverity.h`: enabling takes the hash algorithm, the Merkle
//! block size and the salt (the file must be open read-only with no
//! writer); measuring returns the fs-verity file digest, SHA-256 of the
//! `fsverity_descriptor`, which is what `fsverity digest` prints and what
//! [`crate::verity::merkle`] computes for the dataset. Only where the
//! kernel has `CONFIG_FS_VERITY` (ext4 lists `verity` in
//! `/sys/fs/ext4/features/`); elsewhere callers grey the setting.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use super::fscrypt::{IOC_READ, IOC_WRITE, ioc};

/// `FS_VERITY_HASH_ALG_SHA256`.
pub const HASH_ALG_SHA256: u32 = 1;

/// `struct fsverity_enable_arg`.
#[repr(C)]
struct EnableArg {
    version: u32,
    hash_algorithm: u32,
    block_size: u32,
    salt_size: u32,
    salt_ptr: u64,
    sig_size: u32,
    reserved1: u32,
    sig_ptr: u64,
    reserved2: [u64; 11],
}

/// `struct fsverity_digest` followed by room for the largest digest.
#[repr(C)]
struct DigestArg {
    digest_algorithm: u16,
    digest_size: u16,
    digest: [u8; 64],
}

const ENABLE_VERITY: u32 = ioc(IOC_WRITE, 133, std::mem::size_of::<EnableArg>());
const MEASURE_VERITY: u32 = ioc(IOC_READ | IOC_WRITE, 134, 4);

/// Enables fs-verity on `file` (opened read-only, no writer) with SHA-256,
/// `block_size` and `salt`: the kernel reads the file and builds its tree.
pub fn enable(file: &File, block_size: u32, salt: &[u8]) -> io::Result<()> {
    let arg = EnableArg {
        version: 1,
        hash_algorithm: HASH_ALG_SHA256,
        block_size,
        salt_size: salt.len() as u32,
        salt_ptr: if salt.is_empty() {
            0
        } else {
            salt.as_ptr() as u64
        },
        sig_size: 0,
        reserved1: 0,
        sig_ptr: 0,
        reserved2: [0; 11],
    };
    // SAFETY: `arg` is a valid fsverity_enable_arg; the salt it points to
    // outlives the call.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), ENABLE_VERITY as _, &arg) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The fs-verity file digest of `file` (SHA-256: 32 bytes).
pub fn measure(file: &File) -> io::Result<Vec<u8>> {
    let mut arg = DigestArg {
        digest_algorithm: 0,
        digest_size: 64,
        digest: [0; 64],
    };
    // SAFETY: `arg` has room for digest_size bytes after its header.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), MEASURE_VERITY as _, &mut arg) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = usize::from(arg.digest_size).min(64);
    if arg.digest_algorithm != HASH_ALG_SHA256 as u16 {
        return Err(io::Error::other(format!(
            "the kernel measured the file with hash algorithm {}, not SHA-256",
            arg.digest_algorithm
        )));
    }
    Ok(arg.digest[..n].to_vec())
}

#[cfg(test)]
mod tests {
    /// The request numbers of `uapi/linux/fsverity.h` (as strace prints them).
    #[test]
    fn ioctl_numbers_are_the_kernels() {
        assert_eq!(std::mem::size_of::<super::EnableArg>(), 128);
        assert_eq!(super::ENABLE_VERITY, 0x4080_6685);
        assert_eq!(super::MEASURE_VERITY, 0xc004_6686);
    }
}
