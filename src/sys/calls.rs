//! Clocks, eventfds, the terminal's bytes and free space: the small syscalls
//! the engine, the explorer and the dataset need, each wrapped once.

#[allow(unused_imports)]
use super::*;

#[inline]
pub(super) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clocks asked for
    // (monotonic, thread and process CPU time) always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Monotonic clock in ns (CLOCK_MONOTONIC, a vDSO call: ~20 ns).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time of the calling thread, ns (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_time_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The CPU-time clock of the calling thread (`pthread_getcpuclockid`),
/// which any thread of the process can read with [`cpu_clock_ns`] while
/// this one lives (the workqueue manager's tick reads its workers').
pub fn current_thread_cpu_clock() -> Option<libc::clockid_t> {
    let mut id: libc::clockid_t = 0;
    // SAFETY: asks for the clock of the calling thread into a local.
    let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
    (rc == 0).then_some(id)
}

/// The time of a CPU-time clock, ns; None once its thread has exited.
pub fn cpu_clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; a stale clock id only
    // makes the call fail with EINVAL.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| {
        (ts.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec as u64)
    })
}

/// A non-blocking eventfd: a counter another thread adds to, whose read
/// a reader arms on its io_uring to be woken. Closed on drop.
#[derive(Debug)]
pub struct EventFd(i32);

impl EventFd {
    /// `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain syscall with no pointers; the fd is owned by the
        // returned value and closed once, on drop.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(EventFd(fd))
    }

    /// Adds 1 (wakes a read armed on it). Never blocks.
    #[inline]
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a valid u64 to an eventfd we own.
        unsafe { libc::write(self.0, (&one as *const u64).cast(), 8) };
    }

    /// The file descriptor (for an io_uring read).
    pub fn raw(&self) -> i32 {
        self.0
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        // SAFETY: the fd was created by `new` for this value and is closed once.
        unsafe { libc::close(self.0) };
    }
}

/// What waiting for bytes on standard input found.
#[derive(Debug, PartialEq, Eq)]
pub enum StdinRead {
    /// Nothing before the timeout, or a signal interrupted the wait.
    Idle,
    /// This many bytes were read into the buffer.
    Bytes(usize),
    /// The terminal was hung up or closed.
    Gone,
}

/// Waits up to `timeout_ms` for standard input to be readable and reads
/// what is there into `buf` (`poll(2)`, then one `read(2)`).
pub fn read_stdin(timeout_ms: i32, buf: &mut [u8]) -> StdinRead {
    let mut fds = [libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: `fds` is a valid array of one pollfd for the duration of the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, timeout_ms) };
    if n <= 0 {
        return StdinRead::Idle;
    }
    if fds[0].revents & libc::POLLIN == 0 {
        // POLLHUP / POLLERR / POLLNVAL without data.
        return StdinRead::Gone;
    }
    // SAFETY: reading at most `buf.len()` bytes into a valid, writable buffer.
    let r = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
    match r {
        0 => StdinRead::Gone,
        r if r < 0 => match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR | libc::EAGAIN) => StdinRead::Idle,
            _ => StdinRead::Gone,
        },
        r => StdinRead::Bytes(r as usize),
    }
}

/// Bytes free for an unprivileged user on the filesystem of `path`
/// (`statvfs(2)`: f_bavail x f_frsize).
pub fn free_bytes(path: &Path) -> Option<u64> {
    let st = statvfs(path).ok()?;
    // The field types vary by target (32-bit on some); widen them all.
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// The block size of the filesystem of `path` (`statvfs(2)`: f_bsize).
pub fn fs_block_size(path: &Path) -> std::io::Result<u64> {
    #[allow(clippy::unnecessary_cast)]
    Ok(statvfs(path)?.f_bsize as u64)
}

/// `path` as the NUL-terminated string a syscall takes; a path with a NUL
/// byte is `InvalidInput`, naming it.
pub fn c_path(path: &Path) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: a path with a NUL byte", path.display()),
        )
    })
}

/// True when `fd` was opened with `O_DIRECT` (its reads bypass the page
/// cache); false when it was not or cannot be asked.
pub fn opened_direct(fd: std::os::fd::RawFd) -> bool {
    // SAFETY: fcntl on an open descriptor with no pointer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_DIRECT != 0
}

/// Sets or clears `O_NONBLOCK` on `fd`.
pub fn set_nonblocking(fd: std::os::fd::RawFd, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on an open descriptor with integer arguments.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let want = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        if want != flags && libc::fcntl(fd, libc::F_SETFL, want) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `statvfs(2)` of `path`.
fn statvfs(path: &Path) -> std::io::Result<libc::statvfs> {
    let c = c_path(path)?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid NUL-terminated path and `st` points to writable
    // memory the size of a statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so the kernel filled in the whole struct.
    Ok(unsafe { st.assume_init() })
}

/// Makes a FIFO at `path` (`mkfifo(3)`), mode `mode`.
pub fn make_fifo(path: &Path, mode: u32) -> io::Result<()> {
    let c = c_path(path)?;
    // SAFETY: `c` is a valid NUL-terminated path for the call.
    if unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

// ---- errno values named outside sys ----

/// Whether `e` is `ENOPKG`: the kernel was built without an algorithm it
/// was asked for (a cipher for fscrypt or the crypto API).
pub fn lacks_algorithm(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOPKG)
}
