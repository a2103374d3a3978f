//! Mounts, unmounts and loop devices: what the kernel target and
//! `kernel check` need to put an ext4 image on a loop device and mount it
//! (and tracefs), each call wrapped once with its `SAFETY:` argument.

use std::ffi::CString;
use std::io;
use std::path::Path;

/// Mounts `source` on `target` as `fstype`. `restricted` adds
/// `MS_NODEV | MS_NOSUID | MS_NOEXEC` (an image a user could have made).
pub fn mount(source: &Path, target: &Path, fstype: &str, restricted: bool) -> io::Result<()> {
    let (src, tgt) = (super::c_path(source)?, super::c_path(target)?);
    let ty = CString::new(fstype).map_err(io::Error::other)?;
    let flags = if restricted {
        libc::MS_NODEV | libc::MS_NOSUID | libc::MS_NOEXEC
    } else {
        0
    };
    // SAFETY: every pointer is a valid NUL-terminated string that outlives
    // the call; no data argument.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            tgt.as_ptr(),
            ty.as_ptr(),
            flags,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Unmounts `mnt` (`UMOUNT_NOFOLLOW`: never following a link there);
/// `lazy` detaches it now (`MNT_DETACH`) and lets the kernel finish when
/// its last file closes.
pub fn unmount(mnt: &Path, lazy: bool) -> io::Result<()> {
    let c = super::c_path(mnt)?;
    let flags = libc::UMOUNT_NOFOLLOW | if lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: `c` is a valid NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Loop devices, attached to an open file (no path is followed).
pub mod loopdev {
    use std::fs::{File, OpenOptions};
    use std::io;
    use std::os::fd::AsRawFd;
    use std::path::PathBuf;

    const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
    const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
    const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;
    const LO_FLAGS_AUTOCLEAR: u32 = 4;

    /// `struct loop_info64` (linux/loop.h).
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct LoopInfo64 {
        lo_device: u64,
        lo_inode: u64,
        lo_rdevice: u64,
        lo_offset: u64,
        lo_sizelimit: u64,
        lo_number: u32,
        lo_encrypt_type: u32,
        lo_encrypt_key_size: u32,
        lo_flags: u32,
        lo_file_name: [u8; 64],
        lo_crypt_name: [u8; 64],
        lo_encrypt_key: [u8; 32],
        lo_init: [u64; 2],
    }

    /// `struct loop_config` (linux/loop.h).
    #[repr(C)]
    struct LoopConfig {
        fd: u32,
        block_size: u32,
        info: LoopInfo64,
        reserved: [u64; 8],
    }

    fn zero_info() -> LoopInfo64 {
        // SAFETY: an all-zero loop_info64 is valid (plain integers).
        unsafe { std::mem::zeroed() }
    }

    /// Attaches a free loop device to `image` (open read-write) with
    /// autoclear; returns the device, open (the attachment lasts while it
    /// is open or mounted), and its path.
    pub fn attach(image: &File, name: &[u8]) -> io::Result<(File, PathBuf)> {
        let ctl = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/loop-control")?;
        for _ in 0..16 {
            // SAFETY: LOOP_CTL_GET_FREE takes no argument.
            let n = unsafe { libc::ioctl(ctl.as_raw_fd(), LOOP_CTL_GET_FREE as _) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let path = PathBuf::from(format!("/dev/loop{n}"));
            let dev = OpenOptions::new().read(true).write(true).open(&path)?;
            let mut info = zero_info();
            info.lo_flags = LO_FLAGS_AUTOCLEAR;
            let k = name.len().min(63);
            info.lo_file_name[..k].copy_from_slice(&name[..k]);
            let cfg = LoopConfig {
                fd: image.as_raw_fd() as u32,
                block_size: 0,
                info,
                reserved: [0; 8],
            };
            // SAFETY: LOOP_CONFIGURE reads a loop_config we own.
            if unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_CONFIGURE as _, &cfg) } == 0 {
                return Ok((dev, path));
            }
            let e = io::Error::last_os_error();
            // Taken by another process between the two calls: the next.
            if e.raw_os_error() != Some(libc::EBUSY) {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "attaching {} (LOOP_CONFIGURE, Linux 5.8+): {e}",
                        path.display()
                    ),
                ));
            }
        }
        Err(io::Error::other("no free loop device after 16 tries"))
    }

    /// The (st_dev, st_ino) of the file loop device `dev` is backed by.
    pub fn backing(dev: &str) -> Option<(u64, u64)> {
        let f = File::open(dev).ok()?;
        let mut info = zero_info();
        // SAFETY: LOOP_GET_STATUS64 fills a loop_info64 we own.
        if unsafe { libc::ioctl(f.as_raw_fd(), LOOP_GET_STATUS64 as _, &mut info) } != 0 {
            return None;
        }
        Some((info.lo_device, info.lo_inode))
    }
}
