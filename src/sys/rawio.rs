//! Raw reads, writes and waits on descriptors, and the libc constants the
//! rest of the crate names (errno values, open flags), so that no file
//! outside `sys/` spells `libc::`.
//!
//! The engine's hot-path reads (`pread`, `preadv` into page-cache frames
//! and reader slots) go through [`pread_raw`] and [`preadv_raw`]: inline
//! wrappers that cost nothing over the libc call. They stay `unsafe`
//! because the buffers are raw pointers into memory shared with io_uring
//! and the page-cache model, which no safe signature here could check;
//! the caller's `SAFETY:` comment says why its pointers are valid.

#[allow(unused_imports)]
use super::*;

use std::os::fd::RawFd;

/// `struct iovec`: one buffer of a vectored read (what io_uring and
/// `preadv` take).
pub type IoVec = libc::iovec;

/// An empty [`IoVec`] (null base, length 0), to fill in later.
pub const EMPTY_IOVEC: IoVec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};

/// errno values the crate matches on.
pub mod errno {
    pub use libc::{EAGAIN, EBUSY, EINTR, EIO, ELOOP, ENOPKG, ENXIO, ETIME};
}

/// `open(2)` flags for `OpenOptionsExt::custom_flags` and
/// [`super::trust::open_own_file`].
pub mod oflag {
    pub use libc::{
        O_DIRECT, O_DIRECTORY, O_NOCTTY, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_RDWR, O_WRONLY,
    };
}

/// `pread(2)` of `len` bytes at `offset` into `buf`; returns what the
/// call returned (bytes read, or -1 with errno set).
///
/// # Safety
///
/// `buf` must point to `len` bytes that are valid to write and that
/// nothing else reads or writes during the call.
#[inline]
pub unsafe fn pread_raw(fd: RawFd, buf: *mut u8, len: usize, offset: u64) -> isize {
    // SAFETY: the caller guarantees `buf` is `len` writable bytes.
    unsafe { libc::pread(fd, buf.cast(), len, offset as libc::off_t) }
}

/// `preadv(2)` into the `n` iovecs at `iov`, starting at `offset`;
/// returns what the call returned (bytes read, or -1 with errno set).
///
/// # Safety
///
/// `iov` must point to `n` initialised iovecs, each of whose buffers is
/// valid to write for its length and not touched by anything else during
/// the call.
#[inline]
pub unsafe fn preadv_raw(fd: RawFd, iov: *const IoVec, n: usize, offset: u64) -> isize {
    // SAFETY: the caller guarantees the iovecs and their buffers.
    unsafe { libc::preadv(fd, iov, n as libc::c_int, offset as libc::off_t) }
}

/// What [`wait_ready`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// Data to read (`POLLIN`).
    Read,
    /// Room to write (`POLLOUT`).
    Write,
}

/// Waits until `fd` is ready for `what` (an error or hang-up counts as
/// ready: the read or write says which). Returns false when `limit_ms`
/// passed first; EINTR is a wake-up, not an error.
pub fn wait_ready(fd: RawFd, what: Ready, limit_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: match what {
            Ready::Read => libc::POLLIN,
            Ready::Write => libc::POLLOUT,
        },
        revents: 0,
    };
    // SAFETY: one valid pollfd, its count 1.
    let r = unsafe { libc::poll(&mut p, 1, limit_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EINTR) {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0)
}

/// The descriptor of standard output.
pub const STDOUT_FD: RawFd = libc::STDOUT_FILENO;

/// `PIPE_BUF`: a write to a pipe of at most this many bytes is atomic and,
/// when the pipe has room, does not block.
pub const PIPE_BUF: usize = libc::PIPE_BUF;

/// `write(2)` of `buf` to `fd` (one call: it may write less).
pub fn write_fd(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf.len()` bytes of `buf` are valid to read; a descriptor
    // that is not open only makes the call fail with EBADF.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// True when `fd` is open on a regular file (`fstat`).
pub fn is_regular_fd(fd: RawFd) -> bool {
    // SAFETY: fstat on a descriptor into a zeroed struct we own.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFREG
    }
}

/// The (major, minor) numbers of a device number (`st_dev`, `st_rdev`).
pub fn dev_numbers(dev: u64) -> (u32, u32) {
    (libc::major(dev), libc::minor(dev))
}

/// The largest request the block device holding `path` takes, in KiB
/// (`queue/max_sectors_kb`): the file's `st_dev` read through
/// `/sys/dev/block/MAJ:MIN`, whose `queue/` is the disk's, or for a
/// partition its parent's (`..`). None where the file is on no block device
/// (tmpfs, overlay of one, a network filesystem): the caller says so.
pub fn max_sectors_kb_of(path: &std::path::Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = dev_numbers(dev);
    let base = std::path::PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    [
        base.join("queue/max_sectors_kb"),
        base.join("../queue/max_sectors_kb"),
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse().ok())
}
