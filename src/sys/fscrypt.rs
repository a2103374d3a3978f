//! The kernel's own fscrypt and the file's layout, through their ioctls:
//! what `readpath kernel check` holds the model against bit for bit.
//!
//! fscrypt v2 (`Documentation/filesystems/fscrypt.rst`, `uapi/linux/fscrypt.h`):
//! a master key is added to a filesystem (`FS_IOC_ADD_ENCRYPTION_KEY`,
//! which returns its identifier), a directory gets a v2 policy naming that
//! identifier and the contents and filenames modes
//! (`FS_IOC_SET_ENCRYPTION_POLICY`), and each regular file created in it
//! gets a random 16-byte nonce (`FS_IOC_GET_ENCRYPTION_NONCE`) from which
//! its contents key is derived with HKDF-SHA512, exactly as
//! [`crate::crypto::derive_file_key`] does. `FS_IOC_FIEMAP` says where the
//! file's blocks are on the device, so the ciphertext the kernel wrote can
//! be read back from the image and compared with readpath's own
//! encryption of the same plaintext.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// `FSCRYPT_MODE_AES_256_XTS`.
pub const MODE_AES_256_XTS: u8 = 1;
/// `FSCRYPT_MODE_AES_256_CTS` (filenames).
pub const MODE_AES_256_CTS: u8 = 4;
/// `FSCRYPT_MODE_ADIANTUM`.
pub const MODE_ADIANTUM: u8 = 9;
/// `FSCRYPT_POLICY_FLAGS_PAD_32`.
pub const POLICY_FLAGS_PAD_32: u8 = 0x03;

/// An ioctl request number (`_IOC(dir, 'f', nr, size)`); passed `as _`,
/// since glibc and musl type the request differently.
pub(crate) const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | ((b'f' as u32) << 8) | nr
}
pub(crate) const IOC_WRITE: u32 = 1;
pub(crate) const IOC_READ: u32 = 2;

/// `struct fscrypt_key_specifier`.
#[repr(C)]
#[derive(Clone, Copy)]
struct KeySpecifier {
    kind: u32,
    reserved: u32,
    identifier: [u8; 32],
}
const KEY_SPEC_TYPE_IDENTIFIER: u32 = 2;

impl KeySpecifier {
    /// A v2 key by its identifier (all zeros: the kernel fills it in).
    fn identifier(id: [u8; 16]) -> KeySpecifier {
        let mut identifier = [0u8; 32];
        identifier[..16].copy_from_slice(&id);
        KeySpecifier {
            kind: KEY_SPEC_TYPE_IDENTIFIER,
            reserved: 0,
            identifier,
        }
    }
}

/// `struct fscrypt_add_key_arg` with room for a 64-byte raw key.
#[repr(C)]
struct AddKeyArg {
    key_spec: KeySpecifier,
    raw_size: u32,
    key_id: u32,
    reserved: [u32; 8],
    raw: [u8; 64],
}

/// `struct fscrypt_remove_key_arg`.
#[repr(C)]
struct RemoveKeyArg {
    key_spec: KeySpecifier,
    removal_status_flags: u32,
    reserved: [u32; 5],
}

/// `struct fscrypt_policy_v2`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyV2 {
    /// 2.
    pub version: u8,
    /// Contents mode ([`MODE_AES_256_XTS`], [`MODE_ADIANTUM`]).
    pub contents_encryption_mode: u8,
    /// Filenames mode.
    pub filenames_encryption_mode: u8,
    /// `FSCRYPT_POLICY_FLAG_*`.
    pub flags: u8,
    reserved: [u8; 4],
    /// The master key's identifier.
    pub master_key_identifier: [u8; 16],
}

impl PolicyV2 {
    /// A v2 policy for the key `identifier` with `contents` mode, and the
    /// filenames mode the kernel pairs with it (Adiantum with Adiantum,
    /// AES-256-XTS with AES-256-CTS).
    pub fn new(contents: u8, identifier: [u8; 16]) -> PolicyV2 {
        PolicyV2 {
            version: 2,
            contents_encryption_mode: contents,
            filenames_encryption_mode: if contents == MODE_ADIANTUM {
                MODE_ADIANTUM
            } else {
                MODE_AES_256_CTS
            },
            flags: POLICY_FLAGS_PAD_32,
            reserved: [0; 4],
            master_key_identifier: identifier,
        }
    }
}

// The ioctl numbers as `uapi/linux/fscrypt.h` and `uapi/linux/fiemap.h`
// define them (the policy ioctl is declared with the v1 struct's size).
const FS_IOC_SET_ENCRYPTION_POLICY: u32 = ioc(IOC_READ, 19, 12);
const FS_IOC_ADD_ENCRYPTION_KEY: u32 = ioc(
    IOC_READ | IOC_WRITE,
    23,
    std::mem::size_of::<AddKeyArg>() - 64,
);
const FS_IOC_REMOVE_ENCRYPTION_KEY: u32 = ioc(
    IOC_READ | IOC_WRITE,
    24,
    std::mem::size_of::<RemoveKeyArg>(),
);
const FS_IOC_GET_ENCRYPTION_NONCE: u32 = ioc(IOC_READ, 27, 16);
const FS_IOC_FIEMAP: u32 = ioc(IOC_READ | IOC_WRITE, 11, 32);

fn check(r: libc::c_int, what: &str) -> io::Result<()> {
    if r < 0 {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(())
    }
}

/// Adds a v2 master key (at most 64 bytes) to the filesystem of `dir`;
/// returns its identifier (`FS_IOC_ADD_ENCRYPTION_KEY`; needs root or, for
/// a user's own key, CAP_SYS_ADMIN is not needed but quotas apply).
pub fn add_key(dir: &File, key: &[u8]) -> io::Result<[u8; 16]> {
    if key.is_empty() || key.len() > 64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a master key of {} bytes: allowed 1..=64", key.len()),
        ));
    }
    let mut arg = AddKeyArg {
        key_spec: KeySpecifier::identifier([0; 16]),
        raw_size: key.len() as u32,
        key_id: 0,
        reserved: [0; 8],
        raw: [0; 64],
    };
    arg.raw[..key.len()].copy_from_slice(key);
    // SAFETY: `arg` is a valid fscrypt_add_key_arg followed by raw_size
    // bytes of key; the kernel writes the identifier into key_spec.
    let r = unsafe { libc::ioctl(dir.as_raw_fd(), FS_IOC_ADD_ENCRYPTION_KEY as _, &mut arg) };
    arg.raw.fill(0);
    check(r, "FS_IOC_ADD_ENCRYPTION_KEY")?;
    let mut id = [0u8; 16];
    id.copy_from_slice(&arg.key_spec.identifier[..16]);
    Ok(id)
}

/// Removes the master key `identifier` from the filesystem of `dir`
/// (`FS_IOC_REMOVE_ENCRYPTION_KEY`): its files' keys are wiped.
pub fn remove_key(dir: &File, identifier: [u8; 16]) -> io::Result<()> {
    let mut arg = RemoveKeyArg {
        key_spec: KeySpecifier::identifier(identifier),
        removal_status_flags: 0,
        reserved: [0; 5],
    };
    // SAFETY: `arg` is a valid fscrypt_remove_key_arg.
    let r = unsafe { libc::ioctl(dir.as_raw_fd(), FS_IOC_REMOVE_ENCRYPTION_KEY as _, &mut arg) };
    check(r, "FS_IOC_REMOVE_ENCRYPTION_KEY")
}

/// Sets a v2 policy on the empty directory `dir`.
pub fn set_policy(dir: &File, policy: &PolicyV2) -> io::Result<()> {
    // SAFETY: `policy` is a valid fscrypt_policy_v2 (its version byte says
    // which struct it is); the kernel only reads it.
    let r = unsafe { libc::ioctl(dir.as_raw_fd(), FS_IOC_SET_ENCRYPTION_POLICY as _, policy) };
    check(r, "FS_IOC_SET_ENCRYPTION_POLICY")
}

/// The per-file nonce of an encrypted file (`FS_IOC_GET_ENCRYPTION_NONCE`).
pub fn nonce(file: &File) -> io::Result<[u8; 16]> {
    let mut n = [0u8; 16];
    // SAFETY: the kernel writes 16 bytes into `n`.
    let r = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            FS_IOC_GET_ENCRYPTION_NONCE as _,
            n.as_mut_ptr(),
        )
    };
    check(r, "FS_IOC_GET_ENCRYPTION_NONCE")?;
    Ok(n)
}

/// One extent of a file (`struct fiemap_extent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Offset in the file.
    pub logical: u64,
    /// Offset on the device.
    pub physical: u64,
    /// Bytes.
    pub length: u64,
    /// `FIEMAP_EXTENT_*`.
    pub flags: u32,
}

/// `FIEMAP_EXTENT_LAST`.
pub const EXTENT_LAST: u32 = 0x1;
/// `FIEMAP_EXTENT_DATA_ENCRYPTED`.
pub const EXTENT_DATA_ENCRYPTED: u32 = 0x80;
/// `FIEMAP_EXTENT_UNWRITTEN`.
pub const EXTENT_UNWRITTEN: u32 = 0x800;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawExtent {
    logical: u64,
    physical: u64,
    length: u64,
    reserved64: [u64; 2],
    flags: u32,
    reserved: [u32; 3],
}

const EXTENTS_PER_CALL: usize = 64;

#[repr(C)]
struct Fiemap {
    start: u64,
    length: u64,
    flags: u32,
    mapped_extents: u32,
    extent_count: u32,
    reserved: u32,
    extents: [RawExtent; EXTENTS_PER_CALL],
}

/// Every extent of `file`, synced first (`FS_IOC_FIEMAP`,
/// `FIEMAP_FLAG_SYNC`).
pub fn extents(file: &File) -> io::Result<Vec<Extent>> {
    let mut out = Vec::new();
    let mut start = 0u64;
    loop {
        let mut m = Fiemap {
            start,
            length: u64::MAX - start,
            flags: 1, // FIEMAP_FLAG_SYNC
            mapped_extents: 0,
            extent_count: EXTENTS_PER_CALL as u32,
            reserved: 0,
            extents: [RawExtent::default(); EXTENTS_PER_CALL],
        };
        // SAFETY: `m` is a struct fiemap with room for extent_count
        // extents after its header, as the kernel expects.
        let r = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP as _, &mut m) };
        check(r, "FS_IOC_FIEMAP")?;
        let n = (m.mapped_extents as usize).min(EXTENTS_PER_CALL);
        for e in &m.extents[..n] {
            out.push(Extent {
                logical: e.logical,
                physical: e.physical,
                length: e.length,
                flags: e.flags,
            });
        }
        match m.extents[..n].last() {
            Some(e) if e.flags & EXTENT_LAST == 0 => start = e.logical + e.length,
            _ => return Ok(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ioctl_numbers_are_the_kernels() {
        // From uapi/linux/fscrypt.h and fiemap.h, as `strace` prints them.
        assert_eq!(FS_IOC_SET_ENCRYPTION_POLICY, 0x800c_6613);
        assert_eq!(FS_IOC_ADD_ENCRYPTION_KEY, 0xc050_6617);
        assert_eq!(FS_IOC_REMOVE_ENCRYPTION_KEY, 0xc040_6618);
        assert_eq!(FS_IOC_GET_ENCRYPTION_NONCE, 0x8010_661b);
        assert_eq!(FS_IOC_FIEMAP, 0xc020_660b);
        assert_eq!(std::mem::size_of::<PolicyV2>(), 24);
        assert_eq!(std::mem::size_of::<RawExtent>(), 56);
    }
}
