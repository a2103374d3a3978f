//! The kernel's crypto API from user space (AF_ALG sockets), so that the
//! model can pay the very cost the kernel's fscrypt and fs-verity pay.
//!
//! The kernel decrypts with the highest-priority `xts(aes)` driver in
//! `/proc/crypto` and hashes with its `sha256`; readpath's own ciphers are
//! user-space code. An [`AlgTfm`] is a bound (and, for a cipher, keyed)
//! transform socket, shared by every thread; each thread that uses it gets
//! an operation socket of its own (`accept()` on first use, kept in a
//! thread-local list: no sharing, no lock, no allocation per call). Per
//! data unit an [`AlgOp`] sends one `sendmsg` (the operation and IV as
//! control messages, prebuilt once) and reads the result back into the
//! caller's buffer; per hashed block it sends the pieces as one iovec and
//! reads the 32-byte digest. Kernels built without
//! `CONFIG_CRYPTO_USER_API_SKCIPHER`/`_HASH` refuse the socket: [`probe`]
//! says why, for the resolver's fallback.

#[allow(unused_imports)]
use super::*;

use std::cell::RefCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Most iovec entries one [`AlgOp::digest`] sends.
pub const MAX_DIGEST_PARTS: usize = 24;

/// The size of the IV an [`AlgOp`] sends (XTS's 16-byte tweak).
pub const ALG_IV_SIZE: usize = 16;

static NEXT_TFM_ID: AtomicU64 = AtomicU64::new(1);

/// A transform socket bound to one algorithm (`skcipher` `xts(aes)`,
/// `hash` `sha256`), shared by every thread that uses it.
#[derive(Debug)]
pub struct AlgTfm {
    fd: OwnedFd,
    id: u64,
    /// Cleared on drop: threads then close their operation socket for it
    /// the next time they accept another.
    live: Arc<AtomicBool>,
    what: String,
}

impl Drop for AlgTfm {
    fn drop(&mut self) {
        self.live.store(false, Ordering::Release);
    }
}

/// Why AF_ALG cannot give `kind` `name` here (the step and the OS
/// error), or `Ok` when it can.
pub fn probe(kind: &str, name: &str) -> io::Result<()> {
    AlgTfm::bind(kind, name).map(drop)
}

fn os_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl AlgTfm {
    /// `socket(AF_ALG, SOCK_SEQPACKET)` bound to `{kind, name}`; errors
    /// name the step and the algorithm.
    pub fn bind(kind: &str, name: &str) -> io::Result<AlgTfm> {
        let what = format!("AF_ALG {kind} {name}");
        // SAFETY: zeroed sockaddr_alg is a valid value (plain integers and
        // byte arrays).
        let mut sa: libc::sockaddr_alg = unsafe { std::mem::zeroed() };
        sa.salg_family = libc::AF_ALG as u16;
        if kind.len() >= sa.salg_type.len() || name.len() >= sa.salg_name.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{what}: name too long"),
            ));
        }
        sa.salg_type[..kind.len()].copy_from_slice(kind.as_bytes());
        sa.salg_name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: plain socket call.
        let raw =
            unsafe { libc::socket(libc::AF_ALG, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(os_err(&format!(
                "{what}: socket(AF_ALG) (kernel without CONFIG_CRYPTO_USER_API)"
            )));
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: `sa` is a valid sockaddr_alg of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_alg).cast(),
                std::mem::size_of::<libc::sockaddr_alg>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(os_err(&format!("{what}: bind")));
        }
        Ok(AlgTfm {
            fd,
            id: NEXT_TFM_ID.fetch_add(1, Ordering::Relaxed),
            live: Arc::new(AtomicBool::new(true)),
            what,
        })
    }

    /// `ALG_SET_KEY`: keys the transform (before any operation socket is
    /// accepted).
    pub fn set_key(&self, key: &[u8]) -> io::Result<()> {
        // SAFETY: `key` is valid for `key.len()` bytes.
        let r = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_ALG,
                libc::ALG_SET_KEY,
                key.as_ptr().cast(),
                key.len() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(os_err(&format!("{}: ALG_SET_KEY", self.what)));
        }
        Ok(())
    }

    /// A new operation socket of this transform (one per thread: see
    /// [`AlgTfm::with_op`]).
    pub fn accept(&self) -> io::Result<AlgOp> {
        // SAFETY: no address is asked for.
        let raw = unsafe {
            libc::accept4(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(os_err(&format!("{}: accept", self.what)));
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(AlgOp::new(fd))
    }

    /// Runs `f` with this thread's operation socket of this transform,
    /// accepting it on the thread's first call (the only allocation).
    pub fn with_op<R>(&self, f: impl FnOnce(&mut AlgOp) -> io::Result<R>) -> io::Result<R> {
        OPS.with(|ops| {
            let Ok(mut ops) = ops.try_borrow_mut() else {
                // Called from inside `f` on this thread: an op of its own.
                return f(&mut self.accept()?);
            };
            if let Some(c) = ops.iter_mut().find(|c| c.id == self.id) {
                return f(&mut c.op);
            }
            ops.retain(|c| c.live.load(Ordering::Acquire));
            let op = self.accept()?;
            ops.push(ThreadOp {
                id: self.id,
                live: self.live.clone(),
                op,
            });
            let c = ops.last_mut().expect("just pushed");
            f(&mut c.op)
        })
    }
}

struct ThreadOp {
    id: u64,
    live: Arc<AtomicBool>,
    op: AlgOp,
}

thread_local! {
    static OPS: RefCell<Vec<ThreadOp>> = const { RefCell::new(Vec::new()) };
}

/// Control-message space: room for `ALG_SET_OP` (u32) and `ALG_SET_IV`
/// (`af_alg_iv` with a 16-byte IV), 8-byte aligned as `cmsghdr` needs.
type Cmsgs = [u64; 16];

/// One thread's operation socket, with its control messages prebuilt.
pub struct AlgOp {
    fd: OwnedFd,
    cmsg: Box<Cmsgs>,
    cmsg_len: usize,
    /// Byte offset of the `ALG_SET_OP` value in `cmsg`.
    op_at: usize,
    /// Byte offset of the IV bytes in `cmsg`.
    iv_at: usize,
}

impl std::fmt::Debug for AlgOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlgOp").field("fd", &self.fd).finish()
    }
}

impl AlgOp {
    fn new(fd: OwnedFd) -> AlgOp {
        let mut cmsg: Box<Cmsgs> = Box::new([0; 16]);
        // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic.
        let (op_space, iv_space, op_len, iv_len) = unsafe {
            let ivs = (std::mem::size_of::<libc::af_alg_iv>() + ALG_IV_SIZE) as u32;
            (
                libc::CMSG_SPACE(4) as usize,
                libc::CMSG_SPACE(ivs) as usize,
                libc::CMSG_LEN(4) as usize,
                libc::CMSG_LEN(ivs) as usize,
            )
        };
        let total = op_space + iv_space;
        assert!(total <= std::mem::size_of::<Cmsgs>(), "cmsg space");
        let base = cmsg.as_mut_ptr().cast::<u8>();
        // SAFETY: a msghdr over our buffer, walked with the CMSG macros
        // within `total` bytes (checked above); every header written is
        // inside the buffer and 8-byte aligned.
        let (op_at, iv_at) = unsafe {
            let mut mh: libc::msghdr = std::mem::zeroed();
            mh.msg_control = base.cast();
            mh.msg_controllen = total as _;
            let c1 = libc::CMSG_FIRSTHDR(&mh);
            assert!(!c1.is_null(), "cmsg space");
            (*c1).cmsg_level = libc::SOL_ALG;
            (*c1).cmsg_type = libc::ALG_SET_OP;
            (*c1).cmsg_len = op_len as _;
            let op_at = libc::CMSG_DATA(c1).offset_from(base) as usize;
            let c2 = libc::CMSG_NXTHDR(&mh, c1);
            assert!(!c2.is_null(), "cmsg space");
            (*c2).cmsg_level = libc::SOL_ALG;
            (*c2).cmsg_type = libc::ALG_SET_IV;
            (*c2).cmsg_len = iv_len as _;
            let d = libc::CMSG_DATA(c2);
            let ivlen_at = d.offset_from(base) as usize;
            let bytes = std::slice::from_raw_parts_mut(base, total);
            bytes[ivlen_at..ivlen_at + 4].copy_from_slice(&(ALG_IV_SIZE as u32).to_ne_bytes());
            (op_at, ivlen_at + 4)
        };
        AlgOp {
            fd,
            cmsg,
            cmsg_len: total,
            op_at,
            iv_at,
        }
    }

    fn cmsg_bytes(&mut self) -> &mut [u8] {
        // SAFETY: the u64 array viewed as its bytes.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.cmsg.as_mut_ptr().cast::<u8>(),
                std::mem::size_of::<Cmsgs>(),
            )
        }
    }

    /// Decrypts `buf` in place with IV `iv` (one `sendmsg`, one read).
    pub fn decrypt(&mut self, iv: &[u8; ALG_IV_SIZE], buf: &mut [u8]) -> io::Result<()> {
        self.cipher(libc::ALG_OP_DECRYPT, iv, buf)
    }

    /// Encrypts `buf` in place with IV `iv` (one `sendmsg`, one read).
    pub fn encrypt(&mut self, iv: &[u8; ALG_IV_SIZE], buf: &mut [u8]) -> io::Result<()> {
        self.cipher(libc::ALG_OP_ENCRYPT, iv, buf)
    }

    fn cipher(
        &mut self,
        op: libc::c_int,
        iv: &[u8; ALG_IV_SIZE],
        buf: &mut [u8],
    ) -> io::Result<()> {
        let (op_at, iv_at) = (self.op_at, self.iv_at);
        let c = self.cmsg_bytes();
        c[op_at..op_at + 4].copy_from_slice(&(op as u32).to_ne_bytes());
        c[iv_at..iv_at + ALG_IV_SIZE].copy_from_slice(iv);
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: zeroed msghdr is valid; every pointer set below stays
        // valid for the call (the iovec, `buf`, our control buffer).
        let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        mh.msg_control = self.cmsg.as_mut_ptr().cast();
        mh.msg_controllen = self.cmsg_len as _;
        let sent = self.sendmsg(&mh, "AF_ALG sendmsg")?;
        if sent != buf.len() {
            return Err(io::Error::other(format!(
                "AF_ALG sendmsg took {sent} of {} bytes",
                buf.len()
            )));
        }
        self.read_exact(buf)
    }

    /// `sendmsg(mh)`, again when a signal interrupted it before it took
    /// anything; the bytes taken.
    fn sendmsg(&self, mh: &libc::msghdr, what: &str) -> io::Result<usize> {
        loop {
            // SAFETY: the caller built `mh` over memory alive for the call.
            let r = unsafe { libc::sendmsg(self.fd.as_raw_fd(), mh, 0) };
            if r >= 0 {
                return Ok(r as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
            }
        }
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let mut got = 0;
        while got < buf.len() {
            // SAFETY: the rest of `buf` is valid for writes.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    buf[got..].as_mut_ptr().cast(),
                    buf.len() - got,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(io::Error::new(e.kind(), format!("AF_ALG read: {e}")));
            }
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("AF_ALG read: {got} of {} bytes", buf.len()),
                ));
            }
            got += n as usize;
        }
        Ok(())
    }

    /// Hashes the concatenation of `parts` (at most [`MAX_DIGEST_PARTS`],
    /// one `sendmsg`) and reads the digest into `out` (its length: the
    /// digest size).
    pub fn digest(&mut self, parts: &[&[u8]], out: &mut [u8]) -> io::Result<()> {
        assert!(parts.len() <= MAX_DIGEST_PARTS, "too many digest parts");
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; MAX_DIGEST_PARTS];
        let mut total = 0;
        for (v, p) in iov.iter_mut().zip(parts) {
            // The kernel only reads through these.
            v.iov_base = p.as_ptr() as *mut libc::c_void;
            v.iov_len = p.len();
            total += p.len();
        }
        // SAFETY: zeroed msghdr is valid; the iovecs point at the
        // caller's slices, alive for the call.
        let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
        mh.msg_iov = iov.as_mut_ptr();
        mh.msg_iovlen = parts.len() as _;
        let sent = self.sendmsg(&mh, "AF_ALG hash sendmsg")?;
        if sent != total {
            return Err(io::Error::other(format!(
                "AF_ALG hash sendmsg took {sent} of {total} bytes"
            )));
        }
        self.read_exact(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected `AF_UNIX` `SOCK_SEQPACKET` pair standing in for the
    /// kernel's op socket: the kernel checks every control message with
    /// `CMSG_OK` there too (then ignores non-`SOL_SOCKET` ones), and one
    /// `sendmsg` arrives as one packet, so the framing is what AF_ALG gets.
    fn pair() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        // SAFETY: two fresh descriptors we own.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    fn recv(fd: &OwnedFd, buf: &mut [u8]) -> usize {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        assert!(n >= 0, "{}", io::Error::last_os_error());
        n as usize
    }

    fn send(fd: &OwnedFd, buf: &[u8]) {
        // SAFETY: `buf` is valid for reads of its length.
        let n = unsafe { libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), 0) };
        assert_eq!(n as usize, buf.len());
    }

    /// The control messages as the kernel's `af_alg_cmsg_send` reads
    /// them: (level, type, len, data) of each, walked with the CMSG macros.
    fn cmsgs(op: &mut AlgOp) -> Vec<(i32, i32, usize, Vec<u8>)> {
        let len = op.cmsg_len;
        let base = op.cmsg.as_mut_ptr().cast::<u8>();
        let mut out = Vec::new();
        // SAFETY: a msghdr over the op's own control buffer of `len` bytes.
        unsafe {
            let mut mh: libc::msghdr = std::mem::zeroed();
            mh.msg_control = base.cast();
            mh.msg_controllen = len as _;
            let mut c = libc::CMSG_FIRSTHDR(&mh);
            while !c.is_null() {
                let l = (*c).cmsg_len as usize;
                let data = libc::CMSG_DATA(c);
                let n = l - (data.offset_from(c.cast::<u8>()) as usize);
                let bytes = std::slice::from_raw_parts(data, n).to_vec();
                out.push(((*c).cmsg_level, (*c).cmsg_type, l, bytes));
                c = libc::CMSG_NXTHDR(&mh, c);
            }
        }
        out
    }

    #[test]
    fn control_messages_are_what_af_alg_cmsg_send_accepts() {
        let (a, b) = pair();
        let mut op = AlgOp::new(a);
        let iv: [u8; 16] = std::array::from_fn(|i| 0xa0 + i as u8);
        // The "kernel" answers each unit with its bytes reversed.
        let kernel = std::thread::spawn(move || {
            for _ in 0..2 {
                let mut buf = [0u8; 8192];
                let n = recv(&b, &mut buf);
                buf[..n].reverse();
                send(&b, &buf[..n]);
            }
        });
        let plain: Vec<u8> = (0..4096).map(|i| (i * 7) as u8).collect();
        let mut buf = plain.clone();
        op.decrypt(&iv, &mut buf).unwrap();
        let mut want = plain.clone();
        want.reverse();
        assert_eq!(
            buf, want,
            "one sendmsg of the unit, its answer read back in place"
        );
        // SAFETY: CMSG_LEN is arithmetic.
        let (op_len, iv_len) = unsafe { (libc::CMSG_LEN(4) as usize, libc::CMSG_LEN(20) as usize) };
        let c = cmsgs(&mut op);
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(
            (c[0].0, c[0].1, c[0].2),
            (libc::SOL_ALG, libc::ALG_SET_OP, op_len)
        );
        assert_eq!(c[0].3[..4], (libc::ALG_OP_DECRYPT as u32).to_ne_bytes());
        assert_eq!(
            (c[1].0, c[1].1, c[1].2),
            (libc::SOL_ALG, libc::ALG_SET_IV, iv_len)
        );
        assert_eq!(c[1].3[..4], 16u32.to_ne_bytes(), "af_alg_iv.ivlen");
        assert_eq!(c[1].3[4..20], iv, "af_alg_iv.iv");
        // Encrypt flips only the op; the IV follows each call.
        let iv2 = [7u8; 16];
        let mut buf = plain.clone();
        op.encrypt(&iv2, &mut buf).unwrap();
        let c = cmsgs(&mut op);
        assert_eq!(c[0].3[..4], (libc::ALG_OP_ENCRYPT as u32).to_ne_bytes());
        assert_eq!(c[1].3[4..20], iv2);
        kernel.join().unwrap();
    }

    #[test]
    fn a_digest_is_one_packet_of_every_part_then_a_read() {
        use sha2::Digest;
        let (a, b) = pair();
        let mut op = AlgOp::new(a);
        let kernel = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 17];
            let n = recv(&b, &mut buf);
            send(&b, &sha2::Sha256::digest(&buf[..n]));
            n
        });
        let salt = [9u8; 64];
        let data = [1u8; 1000];
        let zeros = [0u8; 3096];
        let mut out = [0u8; 32];
        op.digest(&[&salt, &data, &zeros], &mut out).unwrap();
        assert_eq!(kernel.join().unwrap(), 64 + 4096);
        let mut h = sha2::Sha256::new();
        h.update(salt);
        h.update(data);
        h.update(zeros);
        assert_eq!(out[..], h.finalize()[..]);
    }

    #[test]
    fn a_short_answer_is_an_error_not_a_partial_unit() {
        let (a, b) = pair();
        let mut op = AlgOp::new(a);
        let kernel = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            recv(&b, &mut buf);
            send(&b, &buf[..100]);
            // Closing ends the read with 0 bytes.
        });
        let mut buf = [0u8; 4096];
        let e = op.decrypt(&[0; 16], &mut buf).unwrap_err();
        kernel.join().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        assert!(e.to_string().contains("100 of 4096"), "{e}");
    }

    #[test]
    fn without_af_alg_the_probe_says_which_step_failed() {
        match probe("skcipher", "xts(aes)") {
            Ok(()) => eprintln!("AF_ALG available here: nothing refused"),
            Err(why) => {
                let why = why.to_string();
                assert!(why.starts_with("AF_ALG skcipher xts(aes): "), "{why}");
                assert!(
                    why.contains("socket(AF_ALG)") || why.contains("bind"),
                    "{why}"
                );
            }
        }
        assert!(probe("no-such-type-at-all", "x").is_err());
        let long = "x".repeat(64);
        let e = AlgTfm::bind("hash", &long).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
