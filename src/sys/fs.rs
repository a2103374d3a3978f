//! Files and the page cache: filesystem types, O_DIRECT support, dropping and
//! warming a file's pages, page-cache residency; the kernel pseudo-filesystem
//! a file from outside is on, and a log's head cut off in place.

#[allow(unused_imports)]
use super::*;

/// The system page size in bytes.
pub fn page_size() -> usize {
    // SAFETY: sysconf only reads its integer argument.
    let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(ps).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// O_DIRECT support of a filesystem: opens `path` (an existing file) with
/// O_DIRECT and, since some filesystems accept the flag at open and refuse the
/// I/O, reads its first block into a page-aligned buffer. `Ok(false)` when
/// either answers EINVAL; other errors (missing file, permission) are returned.
pub fn supports_o_direct(path: &Path) -> io::Result<bool> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(false),
        Err(e) => return Err(e),
    };
    let align = page_size().max(4096);
    let mut storage = vec![0u8; 2 * align];
    let skip = (align - storage.as_ptr().addr() % align) % align;
    let buf = &mut storage[skip..skip + align];
    match file.read_at(buf, 0) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Drops a file's pages from the page cache: writes dirty pages back
/// (`fdatasync`, as dirty pages cannot be dropped) and then
/// `posix_fadvise(POSIX_FADV_DONTNEED)` over the whole file. Pages mapped or
/// locked by anyone stay; tmpfs/shmem pages cannot be dropped at all.
pub fn fadvise_dontneed(file: &File) -> io::Result<()> {
    match file.sync_data() {
        Ok(()) => {}
        // Files that cannot be synced (special files, read-only media) have
        // nothing dirty to write back.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EROFS)) => {}
        Err(e) => return Err(e),
    }
    // SAFETY: posix_fadvise only reads its integer arguments; the fd is owned
    // by `file`, which is borrowed for the duration of the call.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Warms the page cache with a file by reading it through (after a
/// `POSIX_FADV_WILLNEED` hint). Returns the bytes read. Has no effect on the
/// cache for a file opened with O_DIRECT.
pub fn warm_page_cache(file: &File) -> io::Result<u64> {
    // SAFETY: posix_fadvise only reads its integer arguments; the fd is owned
    // by `file`, which is borrowed for the duration of the call.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED) };
    let mut buf = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    loop {
        match file.read_at(&mut buf, offset) {
            Ok(0) => return Ok(offset),
            Ok(n) => offset += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// A read-only shared mapping of a whole file (the memory device's
/// ciphertext: a bio "reads" its pages where the kernel's page cache holds
/// them, with no copy). Unmapped when dropped.
pub struct Mapping {
    addr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and lives until drop; sharing `&[u8]`
// views of it between threads is as safe as sharing any immutable bytes.
unsafe impl Send for Mapping {}
// SAFETY: as above: no interior mutability through a `&Mapping`.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `file` (open for reading) whole, read-only, shared, with every
    /// page faulted in now (`MAP_POPULATE`: no page fault while it is read).
    pub fn read_only(file: &File) -> io::Result<Mapping> {
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large to map"))?;
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty file"));
        }
        // SAFETY: a fresh read-only shared mapping of an open fd at a
        // kernel-chosen address; it aliases no Rust memory.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { addr, len })
    }

    /// The file's bytes. A file truncated under the mapping makes a read
    /// past its new end fault (SIGBUS): readpath maps only the dataset
    /// files it made, which nothing else writes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `addr..addr+len` is mapped readable until drop.
        unsafe { std::slice::from_raw_parts(self.addr.cast(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `read_only`; the
        // borrow checker ends every `bytes()` view before this.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

/// Memory backed by a file of its own (`memfd_create`), mapped read-write
/// and shared: the model's page-cache frames. Because the frames are a
/// file, the application's copy out of them can be the kernel's own copy
/// (`pread` of the memfd at the frame's offset, `copy_page_to_iter` from
/// the page the model just decrypted and verified), as the kernel copies
/// a buffered read's folio, rather than a user-space memcpy.
///
/// Under Miri (which has neither `memfd_create` nor shared mappings) the
/// bytes are a plain heap allocation with no file behind them, so that the
/// page cache's frame handoff can run under its data-race checker
/// (`pagecache`'s `frames_are_handed_off_between_threads_without_a_race`).
pub struct SharedMem {
    #[cfg(not(miri))]
    fd: std::os::fd::OwnedFd,
    addr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the bytes are plain memory owned by this value until drop; who
// may touch which part is the owner's protocol (the page cache's pins).
unsafe impl Send for SharedMem {}
// SAFETY: as for Send.
unsafe impl Sync for SharedMem {}

impl SharedMem {
    /// `len` bytes (rounded up to pages) of zeroes on the heap (Miri).
    #[cfg(miri)]
    pub fn new(_name: &str, len: usize) -> io::Result<SharedMem> {
        let len = len.max(1).div_ceil(page_size()) * page_size();
        let layout = std::alloc::Layout::from_size_align(len, page_size())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too large"))?;
        // SAFETY: the layout's size is at least a page, never zero.
        let addr = unsafe { std::alloc::alloc_zeroed(layout) };
        if addr.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        Ok(SharedMem {
            addr: addr.cast(),
            len,
        })
    }

    /// `len` bytes (rounded up to pages) of zeroes, named `name` in
    /// /proc/PID/fd (close-on-exec; the kernel allocates a page when it is
    /// first written, as for anonymous memory).
    #[cfg(not(miri))]
    pub fn new(name: &str, len: usize) -> io::Result<SharedMem> {
        let len = len.max(1).div_ceil(page_size()) * page_size();
        let cname = std::ffi::CString::new(name)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the name"))?;
        // SAFETY: a valid C string; the flags ask for a new fd only.
        let raw = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd this call owns.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
        let size = libc::off_t::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too large"))?;
        // SAFETY: an fd this value owns.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), size) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh shared mapping of the memfd at a kernel-chosen
        // address; it aliases no Rust memory.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedMem { fd, addr, len })
    }

    /// The first byte (`len()` bytes mapped read-write until drop).
    pub fn ptr(&self) -> *mut u8 {
        self.addr.cast()
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (at least a page is mapped).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The memfd: byte `n` of the file is byte `n` of the mapping.
    #[cfg(not(miri))]
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// No file under Miri: -1, which every read refuses (`EBADF`).
    #[cfg(miri)]
    pub fn fd(&self) -> std::os::fd::RawFd {
        -1
    }
}

impl Drop for SharedMem {
    #[cfg(not(miri))]
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; the owner ends
        // every use of `ptr()` before dropping.
        unsafe { libc::munmap(self.addr, self.len) };
    }

    #[cfg(miri)]
    fn drop(&mut self) {
        // SAFETY: the allocation made in `new`, with the same layout (its
        // size and alignment were valid then); the owner ends every use of
        // `ptr()` before dropping.
        unsafe {
            std::alloc::dealloc(
                self.addr.cast(),
                std::alloc::Layout::from_size_align_unchecked(self.len, page_size()),
            )
        };
    }
}

/// How much of a file is in the page cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Residency {
    /// Pages of the file now in the page cache.
    pub resident_pages: u64,
    /// Pages the file spans.
    pub total_pages: u64,
}

/// How much of `file` is in the page cache (`mmap` + `mincore(2)`; the mapping
/// is never touched, so this does not change the answer). `file` must be open
/// for reading.
pub fn page_cache_residency(file: &File) -> io::Result<Residency> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Residency::default());
    }
    let len = usize::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large to map"))?;
    let pages = len.div_ceil(page_size());
    // SAFETY: a fresh read-only shared mapping of an open fd at a kernel-chosen
    // address; it aliases no Rust memory and is unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vec = vec![0u8; pages];
    // SAFETY: `addr..addr+len` is the mapping made above (page-aligned start);
    // `vec` has one writable byte per page of it, as mincore requires.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr().cast()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmaps exactly the mapping made above; nothing refers to it.
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return Err(err);
    }
    Ok(Residency {
        resident_pages: vec.iter().filter(|&&b| b & 1 != 0).count() as u64,
        total_pages: pages as u64,
    })
}

/// The kernel pseudo-filesystem open file `file` lives on (`proc`,
/// `sysfs`, `debugfs`, `tracefs`, ...), by `fstatfs(2)` magic; None for
/// any other filesystem (or where `fstatfs` fails). Their "regular
/// files" are kernel interfaces of size 0 whose reads may be endless
/// (`/proc/self/pagemap`), destructive and blocking (`/proc/kmsg`): no
/// file readpath reads from outside is one.
pub fn pseudo_fs_of(file: &File) -> Option<&'static str> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: the descriptor is open (owned by `file`) and `st` points to
    // writable memory the size of `struct statfs`.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: fstatfs returned 0, so the kernel filled in the whole struct.
    let magic = unsafe { st.assume_init() }.f_type as u32;
    Some(match magic {
        0x9FA0 => "procfs",
        0x6265_6572 => "sysfs",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x7363_6673 => "securityfs",
        0x6265_6570 => "configfs",
        0x0027_E0EB => "cgroup",
        0x6367_7270 => "cgroup2",
        0xCAFE_4A11 => "bpf",
        0xDE5E_81E4 => "efivarfs",
        0x6165_676C => "pstore",
        0x4249_4E4D => "binfmt_misc",
        0xF97C_FF8C => "selinuxfs",
        0x1CD1 => "devpts",
        _ => return None,
    })
}

/// Removes the first `len` bytes of `file` in place
/// (`fallocate(FALLOC_FL_COLLAPSE_RANGE)`): what follows moves to the
/// front, atomically against writers appending (`O_APPEND`) at the same
/// time. `len` must be a multiple of the filesystem's block size and end
/// before the end of the file; filesystems without it (tmpfs) answer
/// `EOPNOTSUPP`.
pub fn collapse_head(file: &File, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: fallocate on a descriptor `file` owns; no memory is passed.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_COLLAPSE_RANGE, 0, len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
