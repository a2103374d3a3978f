//! The I/O backends the read loops drive, as fio's engines fill one
//! `ioengine_ops` that one loop drives: [`Backend::queue`] hands a read to
//! the kernel (io_uring: an SQE, done later; sync: a blocking `pread` or
//! `preadv`, done now), [`Backend::submit`] hands over what is queued,
//! [`Backend::reap`] takes one completion, [`Backend::wait`] sleeps until a
//! completion, a worker's wake-up or a deadline, and [`Backend::drain`]
//! completes whatever is still in the kernel when a loop ends. A loop is
//! written once per read path (`reader.rs`: direct reads, `cached.rs`:
//! through the page cache, `irq_thread.rs`: the irq lines) and is generic
//! over the backend, so the choice costs no call through a pointer.
//!
//! The io_uring backend's memory handed to the kernel (its eventfd read's 8
//! bytes, the reads' buffers) is handed over in `unsafe` blocks, each with
//! its argument; the caller of [`Backend::queue`] promises the buffers.

use std::io;
use std::sync::OnceLock;
use std::thread::Thread;

use io_uring::{IoUring, opcode, types};

use crate::sys::{EventFd, IoVec, errno};

use super::resolve::Ring;

/// Longest a loop sleeps before it checks for shutdown and hands over its
/// recorder (a slow device must not hold the interval handoff forever).
pub const MAX_WAIT_NS: u64 = 20_000_000;

/// user_data of the eventfd read armed on every ring (no read's tag).
const EVENTFD_TAG: u64 = u64::MAX;

/// What a read's result says went wrong, when it is not `want` bytes:
/// the OS error for `-errno`, or a short read.
pub fn failure(res: i64) -> String {
    if res < 0 {
        io::Error::from_raw_os_error(-res as i32).to_string()
    } else {
        format!("short read of {res} bytes")
    }
}

/// One read handed to a backend, of the file the backend was made for.
#[derive(Clone, Copy)]
pub enum Op {
    /// `len` bytes at `offset` into `buf`.
    Read { buf: *mut u8, len: u32, offset: u64 },
    /// A vectored read of `n` iovecs at `offset`.
    Readv {
        iov: *const IoVec,
        n: u32,
        offset: u64,
    },
    /// No read at all (the memory device): completes with 0.
    Nop,
}

/// What [`Backend::queue`] did with a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queued {
    /// In the kernel (or about to be, at the next submit or wait): its
    /// completion comes from [`Backend::reap`].
    InKernel,
    /// Done now, with this result (bytes read, or -errno): nothing to reap.
    Done(i64),
}

/// One way to read: io_uring or blocking system calls.
pub trait Backend {
    /// Hands `op` to the kernel under `tag` (never `u64::MAX`).
    ///
    /// # Safety
    /// The memory `op` names (the buffer, or the iovecs and theirs) must
    /// stay valid and untouched by anyone else until the read's completion
    /// is reaped or drained (for [`Queued::InKernel`]), or until this
    /// returns (for [`Queued::Done`]).
    unsafe fn queue(&mut self, tag: u64, op: Op) -> Queued;

    /// Hands what is queued to the kernel, without waiting.
    fn submit(&mut self) -> io::Result<()>;

    /// The next completion of a read, as (tag, result).
    fn reap(&mut self) -> Option<(u64, i64)>;

    /// A completion is waiting to be reaped (for a polling loop).
    fn ready(&mut self) -> bool;

    /// Submits what is queued and sleeps until a completion, a wake-up
    /// from the workers or `wait_ns`. A timeout, a signal or a full
    /// completion queue is not an error.
    fn wait(&mut self, wait_ns: u64) -> io::Result<()>;

    /// Makes the workers' wake-up able to end the next wait again (after
    /// the reaps of a turn).
    fn rearm(&mut self);

    /// Completes every read still in the kernel, handing each to `done`;
    /// false when that could not be established (the ring itself failed:
    /// then the memory of what is left must never be freed).
    fn drain(&mut self, done: impl FnMut(u64, i64)) -> bool;
}

/// An io_uring of one thread, reading one file, with a read of the
/// thread's eventfd armed on it so that a worker's signal ends a wait.
pub struct Uring<'a> {
    ring: IoUring,
    fd: types::Fd,
    no_iowait: bool,
    efd: &'a EventFd,
    /// The eventfd read's 8 bytes: boxed, so the kernel's pointer stays
    /// valid however the backend moves.
    efd_buf: Box<u64>,
    /// The eventfd read is pushed and its completion not reaped.
    armed: bool,
    /// Reads queued and not reaped.
    in_flight: usize,
}

impl<'a> Uring<'a> {
    /// A ring of `entries` entries reading `fd`, set up as the resolver
    /// decided (`Effective::ring`), woken through `efd` (armed at once).
    pub fn new(fd: i32, entries: u32, how: Ring, efd: &'a EventFd) -> io::Result<Uring<'a>> {
        let ring = if how.tuned {
            IoUring::builder()
                .setup_coop_taskrun()
                .setup_taskrun_flag()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .build(entries)?
        } else {
            IoUring::new(entries)?
        };
        let mut u = Uring {
            ring,
            fd: types::Fd(fd),
            no_iowait: how.enter_no_iowait,
            efd,
            efd_buf: Box::new(0),
            armed: false,
            in_flight: 0,
        };
        u.rearm();
        Ok(u)
    }

    /// One blocking wait for a completion while the ring drains: false
    /// when the ring itself failed (an interrupted or timed-out wait is
    /// not a failure).
    fn drain_wait(&self) -> bool {
        match self.ring.submit_and_wait(1) {
            Ok(_) => true,
            Err(e) => matches!(
                e.raw_os_error(),
                Some(errno::EINTR | errno::EBUSY | errno::ETIME)
            ),
        }
    }
}

impl Backend for Uring<'_> {
    #[inline]
    unsafe fn queue(&mut self, tag: u64, op: Op) -> Queued {
        let sqe = match op {
            Op::Read { buf, len, offset } => {
                opcode::Read::new(self.fd, buf, len).offset(offset).build()
            }
            Op::Readv { iov, n, offset } => {
                opcode::Readv::new(self.fd, iov, n).offset(offset).build()
            }
            Op::Nop => opcode::Nop::new().build(),
        }
        .user_data(tag);
        // SAFETY: the caller promises the memory until the completion is
        // reaped or drained; the ring is sized for every read a loop keeps
        // in flight plus the eventfd read.
        unsafe { self.ring.submission().push(&sqe) }.expect("SQ sized for every read in flight");
        self.in_flight += 1;
        Queued::InKernel
    }

    #[inline]
    fn submit(&mut self) -> io::Result<()> {
        self.ring.submit().map(|_| ())
    }

    #[inline]
    fn reap(&mut self) -> Option<(u64, i64)> {
        loop {
            let cqe = self.ring.completion().next()?;
            if cqe.user_data() == EVENTFD_TAG {
                self.armed = false;
                continue;
            }
            self.in_flight -= 1;
            return Some((cqe.user_data(), i64::from(cqe.result())));
        }
    }

    #[inline]
    fn ready(&mut self) -> bool {
        !self.ring.completion().is_empty()
    }

    fn wait(&mut self, wait_ns: u64) -> io::Result<()> {
        let ts = types::Timespec::new()
            .sec(wait_ns / 1_000_000_000)
            .nsec((wait_ns % 1_000_000_000) as u32);
        let args = types::SubmitArgs::new().timespec(&ts);
        let flags = if self.no_iowait {
            io_uring::EnterFlags::NO_IOWAIT
        } else {
            io_uring::EnterFlags::empty()
        };
        match self
            .ring
            .submitter()
            .submit_with_args_and_flags(1, &args, flags)
        {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(errno::ETIME | errno::EINTR | errno::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    #[inline]
    fn rearm(&mut self) {
        if self.armed {
            return;
        }
        let sqe = opcode::Read::new(
            types::Fd(self.efd.raw()),
            (&mut *self.efd_buf as *mut u64).cast(),
            8,
        )
        .build()
        .user_data(EVENTFD_TAG);
        // SAFETY: the 8 bytes are the boxed `efd_buf`, which lives until
        // this read's completion is reaped (`drain` reaps it; `drop` leaks
        // the box when it could not).
        unsafe { self.ring.submission().push(&sqe) }.expect("SQ has room for the eventfd read");
        self.armed = true;
    }

    fn drain(&mut self, mut done: impl FnMut(u64, i64)) -> bool {
        // Wake the armed eventfd read so that it completes too.
        self.efd.signal();
        while self.in_flight > 0 || self.armed {
            if !self.drain_wait() {
                return false;
            }
            while let Some((tag, res)) = self.reap() {
                done(tag, res);
            }
        }
        true
    }
}

impl Drop for Uring<'_> {
    fn drop(&mut self) {
        if self.armed {
            // Never free what the kernel may still write.
            std::mem::forget(std::mem::replace(&mut self.efd_buf, Box::new(0)));
        }
    }
}

/// Blocking reads (`pread`, `preadv`) of one file by one thread, which
/// parks to wait for its workers.
pub struct Sync {
    fd: i32,
}

impl Sync {
    /// Reads of `fd` by the calling thread, which `waker` (the reader's
    /// return queue's) unparks.
    pub fn new(fd: i32, waker: &OnceLock<Thread>) -> Sync {
        let _ = waker.set(std::thread::current());
        Sync { fd }
    }
}

impl Backend for Sync {
    #[inline]
    unsafe fn queue(&mut self, _tag: u64, op: Op) -> Queued {
        let n = match op {
            // SAFETY: the caller promises `len` writable bytes at `buf`.
            Op::Read { buf, len, offset } => unsafe {
                crate::sys::pread_raw(self.fd, buf, len as usize, offset)
            },
            // SAFETY: the caller promises the iovecs and their buffers.
            Op::Readv { iov, n, offset } => unsafe {
                crate::sys::preadv_raw(self.fd, iov, n as usize, offset)
            },
            Op::Nop => 0,
        };
        Queued::Done(if n < 0 {
            -i64::from(
                io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(errno::EIO),
            )
        } else {
            n as i64
        })
    }

    fn submit(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn reap(&mut self) -> Option<(u64, i64)> {
        None
    }

    fn ready(&mut self) -> bool {
        false
    }

    fn wait(&mut self, wait_ns: u64) -> io::Result<()> {
        std::thread::park_timeout(std::time::Duration::from_nanos(wait_ns));
        Ok(())
    }

    fn rearm(&mut self) {}

    fn drain(&mut self, _done: impl FnMut(u64, i64)) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    /// A file of 4 blocks of 4 KiB, each byte its offset's block number
    /// times 7 plus its place (mod 251): every read checks its bytes.
    fn file() -> (tempfile::NamedTempFile, Vec<u8>) {
        let bytes: Vec<u8> = (0..4 * 4096usize)
            .map(|i| ((i / 4096) * 7 + i % 251) as u8)
            .collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, &bytes).unwrap();
        (f, bytes)
    }

    /// Reads blocks 2 then 0 (a plain read, then a vectored read of two
    /// halves) and a no-op through `b`, and checks each result and byte.
    fn reads_back<B: Backend>(b: &mut B, bytes: &[u8]) {
        let mut one = vec![0u8; 4096];
        let mut halves = [vec![0u8; 2048], vec![0u8; 2048]];
        let iov = [
            IoVec {
                iov_base: halves[0].as_mut_ptr().cast(),
                iov_len: 2048,
            },
            IoVec {
                iov_base: halves[1].as_mut_ptr().cast(),
                iov_len: 2048,
            },
        ];
        let ops = [
            (
                1,
                Op::Read {
                    buf: one.as_mut_ptr(),
                    len: 4096,
                    offset: 2 * 4096,
                },
            ),
            (
                2,
                Op::Readv {
                    iov: iov.as_ptr(),
                    n: 2,
                    offset: 0,
                },
            ),
            (3, Op::Nop),
        ];
        let mut got = Vec::new();
        for (tag, op) in ops {
            // SAFETY: the buffers and iovecs live until the end of this
            // function, after every read was reaped.
            match unsafe { b.queue(tag, op) } {
                Queued::Done(res) => got.push((tag, res)),
                Queued::InKernel => {}
            }
        }
        b.submit().unwrap();
        while got.len() < 3 {
            b.wait(1_000_000_000).unwrap();
            while let Some(c) = b.reap() {
                got.push(c);
            }
        }
        got.sort();
        assert_eq!(got, vec![(1, 4096), (2, 4096), (3, 0)]);
        assert_eq!(one, &bytes[2 * 4096..3 * 4096]);
        assert_eq!(halves.concat(), &bytes[..4096]);
        assert!(b.reap().is_none());
    }

    #[test]
    fn a_failed_read_says_the_os_error_or_how_short_it_was() {
        assert_eq!(failure(-9), io::Error::from_raw_os_error(9).to_string());
        assert_eq!(failure(100), "short read of 100 bytes");
    }

    #[test]
    fn a_blocking_backend_reads_at_once_and_has_nothing_to_reap() {
        let (f, bytes) = file();
        let waker = OnceLock::new();
        let mut b = Sync::new(f.as_file().as_raw_fd(), &waker);
        assert_eq!(
            waker.get().map(Thread::id),
            Some(std::thread::current().id())
        );
        reads_back(&mut b, &bytes);
        // A read past the end is short, not an error; a bad fd is -EBADF.
        let mut buf = vec![0u8; 4096];
        let past = Op::Read {
            buf: buf.as_mut_ptr(),
            len: 4096,
            offset: 3 * 4096 + 100,
        };
        // SAFETY: `buf` outlives the (blocking) read.
        assert_eq!(unsafe { b.queue(9, past) }, Queued::Done(4096 - 100));
        let mut bad = Sync { fd: -1 };
        // SAFETY: as above.
        assert_eq!(unsafe { bad.queue(9, past) }, Queued::Done(-9)); // -EBADF
        assert!(b.drain(|_, _| panic!("nothing in the kernel")));
    }

    #[test]
    fn an_io_uring_backend_reads_the_same_bytes_and_drains_what_is_in_flight() {
        let efd = EventFd::new().unwrap();
        let (f, bytes) = file();
        let plain = Ring {
            tuned: false,
            enter_no_iowait: false,
        };
        let mut b = match Uring::new(f.as_file().as_raw_fd(), 8, plain, &efd) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("skipped: io_uring unavailable here ({e})");
                return;
            }
        };
        reads_back(&mut b, &bytes);
        // A worker's signal ends the wait: the eventfd read completed (a
        // wait that ended at its deadline leaves it armed), and its
        // completion is never taken for a read's.
        efd.signal();
        b.wait(60_000_000_000).unwrap();
        assert!(b.reap().is_none());
        assert!(!b.armed, "the wait ended without the eventfd read");
        b.rearm();
        // Reads queued and never reaped are completed by the drain, each
        // handed over once, and the eventfd read with them.
        let mut buf = vec![0u8; 3 * 4096];
        for k in 0..3u64 {
            let op = Op::Read {
                buf: buf[k as usize * 4096..].as_mut_ptr(),
                len: 4096,
                offset: k * 4096,
            };
            // SAFETY: `buf` outlives the drain below.
            assert_eq!(unsafe { b.queue(10 + k, op) }, Queued::InKernel);
        }
        let mut drained = Vec::new();
        assert!(b.drain(|tag, res| drained.push((tag, res))));
        drained.sort();
        assert_eq!(drained, vec![(10, 4096), (11, 4096), (12, 4096)]);
        assert_eq!(buf, &bytes[..3 * 4096]);
        assert!(!b.armed);
        assert_eq!(b.in_flight, 0);
    }
}
