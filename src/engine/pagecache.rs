//! The model's page cache: where the kernel decides whether a read costs
//! post-read work at all.
//!
//! A read of an encrypted or fs-verity file goes through the page cache
//! (ext4's `ext4_mpage_readpages`, mm/filemap.c `filemap_read`). A hit is
//! only a copy: no decryption, no verification. A miss builds a bio for
//! the missing pages, as readahead decides (see [`Readahead`]); when the bio
//! completes, one work item decrypts all of it and one verifies all of it,
//! and only then do its pages become uptodate and its waiters wake. This
//! module holds the pages (4 KiB frames of plaintext, order-0 folios as ext4
//! uses for encrypted and verity files), their per-page state, a CLOCK
//! eviction that approximates the kernel's LRU (a hit sets a referenced bit,
//! as `folio_mark_accessed` does), and the bios in flight.
//!
//! The file's fs-verity Merkle tree lives in the same cache, as ext4 keeps
//! it in the file's page cache past EOF: pages `file_pages()..` are tree
//! pages ([`PageCache::with_tree`]), read by the verify workers themselves
//! when a hash page is missing (`engine::tree`), evicted with the rest. A
//! frame's `checked` flag is `PG_checked`, fs-verity's mark that the hash
//! page it holds was verified; a frame that gets a new page starts
//! unchecked, so an evicted hash page is verified again when read again.
//!
//! Concurrency: a lookup takes no lock: one load of the page's state word
//! (and its referenced bit and readahead mark). The frames are a memfd,
//! and a read's copy is the kernel's `pread` of it (see `cached.rs`). A
//! frame is pinned (a reference count) by the bio that reads into it until
//! the bio's owner releases it, and by a read for its copy; eviction marks
//! the state `Evicting` first and checks the
//! pin count after, so a pinned frame is never taken (both sequentially
//! consistent; the tests' `lookup_copy` pins the same way). Only the miss
//! path (taking frames, evicting) takes the allocator's lock, as the
//! kernel's LRU lock is taken there and not on a hit.

use crossbeam_utils::CachePadded;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Bytes of a page (and of a cache frame).
pub const PAGE: usize = 4096;
/// Most pages in one bio (`BIO_MAX_VECS`).
pub const MAX_BIO_PAGES: usize = 256;

const TAG_SHIFT: u32 = 61;
const TAG_ABSENT: u64 = 0;
const TAG_INFLIGHT: u64 = 1;
const TAG_UPTODATE: u64 = 2;
const TAG_ERROR: u64 = 3;
const TAG_EVICTING: u64 = 4;
/// `PG_readahead`: reaching this page starts async readahead.
const MARK: u64 = 1 << 60;
const PAYLOAD: u64 = MARK - 1;
const BIO_BITS: u32 = 20;
/// Largest bio slot index (20 bits).
pub const MAX_BIOS: usize = 1 << BIO_BITS;
const NO_PAGE: u64 = u64::MAX;

/// The state of one file page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// Not in the cache.
    Absent,
    /// Being read by bio `bio` (its sequence number `seq`).
    InFlight {
        /// Global bio slot.
        bio: u32,
        /// The bio's sequence number.
        seq: u64,
    },
    /// Plaintext in frame `frame`.
    Uptodate {
        /// The frame holding it.
        frame: u32,
    },
    /// The bio `seq` that read it failed (I/O or verification): never a
    /// hit; the next read of it issues a new bio.
    Error {
        /// The failed bio's sequence number.
        seq: u64,
    },
    /// Being evicted (a hit backs off and reads it again).
    Evicting,
}

fn encode(p: Page, mark: bool) -> u64 {
    let w = match p {
        Page::Absent => TAG_ABSENT << TAG_SHIFT,
        Page::InFlight { bio, seq } => {
            (TAG_INFLIGHT << TAG_SHIFT) | ((seq << BIO_BITS) & PAYLOAD) | u64::from(bio)
        }
        Page::Uptodate { frame } => (TAG_UPTODATE << TAG_SHIFT) | u64::from(frame),
        Page::Error { seq } => (TAG_ERROR << TAG_SHIFT) | seq_key(seq),
        Page::Evicting => TAG_EVICTING << TAG_SHIFT,
    };
    if mark { w | MARK } else { w }
}

/// The page and its readahead mark.
pub fn decode(w: u64) -> (Page, bool) {
    let payload = w & PAYLOAD;
    let p = match w >> TAG_SHIFT {
        TAG_INFLIGHT => Page::InFlight {
            bio: (payload & (MAX_BIOS as u64 - 1)) as u32,
            seq: payload >> BIO_BITS,
        },
        TAG_UPTODATE => Page::Uptodate {
            frame: payload as u32,
        },
        TAG_ERROR => Page::Error { seq: payload },
        TAG_EVICTING => Page::Evicting,
        _ => Page::Absent,
    };
    (p, w & MARK != 0)
}

/// Sequence numbers as a page state stores them (40 bits for an in-flight
/// page): comparing a stored one with a remembered one needs both cut.
pub fn seq_key(seq: u64) -> u64 {
    seq & (PAYLOAD >> BIO_BITS)
}

/// One bio's slot: which pages it reads into which frames, and who waits.
pub struct Bio {
    /// First file page.
    pub first_page: AtomicU64,
    /// Pages in the bio.
    pub npages: AtomicU32,
    /// Sequence number (set when the bio is built).
    pub seq: AtomicU64,
    /// Started by async readahead (nobody waited for it when it was built).
    pub readahead_async: AtomicBool,
    /// The page carrying `PG_readahead`, if the bio has it (u64::MAX: none).
    pub mark_page: AtomicU64,
    /// The frame of each page.
    pub frames: Box<[AtomicU32]>,
    /// Readers (one bit each) waiting for a page of this bio.
    waiters: Box<[AtomicU64]>,
}

struct Alloc {
    free: Vec<u32>,
    hand: usize,
}

/// What a lookup of one page found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Uptodate (copied by the caller); `marked`: the page carried
    /// `PG_readahead` (cleared now). Whether it is a hit is counted apart,
    /// as on the kernel (pages added to the cache are the misses).
    Hit {
        /// The readahead mark was on it.
        marked: bool,
    },
    /// Not readable now.
    Miss(Page, bool),
}

/// The cache of one file's plaintext pages.
pub struct PageCache {
    /// The frames: page-aligned, never moved while the cache lives, a
    /// memfd so that a read's copy can be the kernel's.
    mem: crate::sys::SharedMem,
    pages: Box<[AtomicU64]>,
    frame_page: Box<[AtomicU64]>,
    refs: Box<[AtomicU32]>,
    referenced: Box<[AtomicBool]>,
    /// `PG_checked` of each frame (a verified hash page).
    checked: Box<[AtomicBool]>,
    /// On the "active list" (accessed twice, see `touch`).
    active: Box<[AtomicBool]>,
    /// Used since its page was read in (a lookup, a verification): until
    /// then the page is readahead the stream has not reached, and
    /// shrinking to the capacity leaves it (see [`Self::shrink`]).
    used: Box<[AtomicBool]>,
    // The counts, the allocator and the bio sequence are shared by every
    // reader and worker: each on a cache line of its own, so that moving
    // one does not take the others' lines from the CPUs reading them.
    active_count: CachePadded<AtomicUsize>,
    /// Pages of the file's data; the tree's pages follow.
    data_pages: usize,
    capacity: usize,
    resident: CachePadded<AtomicUsize>,
    /// Of those, tree pages.
    tree_resident: CachePadded<AtomicUsize>,
    /// Of those, data pages not used since they were read in (readahead
    /// the stream has not reached yet).
    unused_resident: CachePadded<AtomicUsize>,
    alloc: CachePadded<Mutex<Alloc>>,
    seq: CachePadded<AtomicU64>,
    bios: Box<[Bio]>,
    readers: usize,
}

/// Frames of a cache holding `capacity` uptodate pages plus `reserve` in
/// flight (at least one).
pub fn frames_for(capacity: usize, reserve: usize) -> usize {
    capacity + reserve.max(1)
}

/// Bytes [`PageCache::new`] allocates for these numbers.
pub fn bytes_for(file_pages: u64, capacity: u64, reserve: u64, bios: u64) -> u64 {
    let frames = capacity.saturating_add(reserve);
    frames
        .saturating_mul(PAGE as u64 + 8 + 4 + 1 + 4)
        .saturating_add(file_pages.saturating_mul(8))
        .saturating_add(bios.saturating_mul((MAX_BIO_PAGES * 4 + 64) as u64))
}

impl PageCache {
    /// A cache for a file of `file_pages` pages holding at most `capacity`
    /// uptodate pages, plus `reserve` frames for pages in flight, and
    /// `bios` bio slots for `readers` readers.
    #[cfg(test)]
    pub fn new(
        file_pages: usize,
        capacity: usize,
        reserve: usize,
        bios: usize,
        readers: usize,
    ) -> std::io::Result<PageCache> {
        Self::with_tree(file_pages, 0, capacity, reserve, bios, readers)
    }

    /// [`Self::new`] for a file whose fs-verity tree has `tree_pages`
    /// pages, cached after the data's as pages `file_pages..`.
    pub fn with_tree(
        file_pages: usize,
        tree_pages: usize,
        capacity: usize,
        reserve: usize,
        bios: usize,
        readers: usize,
    ) -> std::io::Result<PageCache> {
        let nframes = frames_for(capacity, reserve);
        assert!(nframes < u32::MAX as usize && bios <= MAX_BIOS);
        let mem = crate::sys::SharedMem::new("readpath-page-cache", nframes * PAGE)?;
        let atomics64 = |n: usize, v: u64| (0..n).map(|_| AtomicU64::new(v)).collect::<Box<[_]>>();
        let words = readers.div_ceil(64).max(1);
        Ok(PageCache {
            mem,
            pages: atomics64(file_pages + tree_pages, encode(Page::Absent, false)),
            frame_page: atomics64(nframes, NO_PAGE),
            refs: (0..nframes).map(|_| AtomicU32::new(0)).collect(),
            referenced: (0..nframes).map(|_| AtomicBool::new(false)).collect(),
            checked: (0..nframes).map(|_| AtomicBool::new(false)).collect(),
            active: (0..nframes).map(|_| AtomicBool::new(false)).collect(),
            used: (0..nframes).map(|_| AtomicBool::new(false)).collect(),
            active_count: CachePadded::new(AtomicUsize::new(0)),
            data_pages: file_pages,
            capacity,
            resident: CachePadded::new(AtomicUsize::new(0)),
            tree_resident: CachePadded::new(AtomicUsize::new(0)),
            unused_resident: CachePadded::new(AtomicUsize::new(0)),
            alloc: CachePadded::new(Mutex::new(Alloc {
                free: (0..nframes as u32).rev().collect(),
                hand: 0,
            })),
            seq: CachePadded::new(AtomicU64::new(1)),
            bios: (0..bios)
                .map(|_| Bio {
                    first_page: AtomicU64::new(0),
                    npages: AtomicU32::new(0),
                    seq: AtomicU64::new(0),
                    readahead_async: AtomicBool::new(false),
                    mark_page: AtomicU64::new(NO_PAGE),
                    frames: (0..MAX_BIO_PAGES).map(|_| AtomicU32::new(0)).collect(),
                    waiters: atomics64(words, 0),
                })
                .collect(),
            readers,
        })
    }

    /// Pages of the file's data.
    pub fn file_pages(&self) -> usize {
        self.data_pages
    }

    /// Pages of the file's fs-verity tree (cached as pages
    /// `file_pages()..file_pages() + tree_pages()`).
    pub fn tree_pages(&self) -> usize {
        self.pages.len() - self.data_pages
    }

    /// Uptodate pages the cache may hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Frames in all (capacity + in-flight reserve).
    pub fn frames(&self) -> usize {
        self.refs.len()
    }

    /// Bio slots.
    pub fn bio_slots(&self) -> usize {
        self.bios.len()
    }

    /// Readers the waiter sets have room for.
    pub fn readers(&self) -> usize {
        self.readers
    }

    /// Uptodate pages held now (bytes = this x [`PAGE`]).
    pub fn resident(&self) -> usize {
        self.resident.load(Ordering::Relaxed)
    }

    /// Uptodate data pages held now: what `cache.size` bounds. The tree's
    /// pages (at most 1/128 of the data's with SHA-256 and 4 KiB blocks)
    /// are not counted: they go only when a bio needs their frame (the
    /// CLOCK, where a hash page used by every verification under it stays
    /// active), as the kernel keeps hot hash pages on its active list, so
    /// a small cache does not read the tree again for every bio.
    pub fn data_resident(&self) -> usize {
        self.resident()
            .saturating_sub(self.tree_resident.load(Ordering::Relaxed))
    }

    /// Pages in flight now (a scan; 0 whenever no pipeline runs).
    pub fn pages_in_flight(&self) -> usize {
        self.pages
            .iter()
            .filter(|w| matches!(decode(w.load(Ordering::Relaxed)).0, Page::InFlight { .. }))
            .count()
    }

    /// The state of page `p`.
    #[inline]
    pub fn page(&self, p: u64) -> (Page, bool) {
        decode(self.pages[p as usize].load(Ordering::SeqCst))
    }

    /// A bio slot.
    pub fn bio(&self, i: u32) -> &Bio {
        &self.bios[i as usize]
    }

    /// A new bio sequence number (never 0).
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    /// `folio_mark_accessed`: a frame's first access sets its referenced
    /// bit; an access while it is set activates it (the kernel moves the
    /// folio to the active LRU list), which protects it from the CLOCK
    /// hand while the active frames are at most half of the cache
    /// (`inactive_is_low`). Tree pages, used by every verification under
    /// them, stay cached through a stream of data pages read once. A data
    /// page's first use since it was read in leaves the unused readahead.
    #[inline]
    fn touch(&self, f: usize) {
        let first =
            !self.used[f].load(Ordering::Relaxed) && !self.used[f].swap(true, Ordering::Relaxed);
        if first && (self.frame_page[f].load(Ordering::Relaxed) as usize) < self.data_pages {
            self.unused_resident.fetch_sub(1, Ordering::Relaxed);
        }
        if !self.referenced[f].load(Ordering::Relaxed) {
            self.referenced[f].store(true, Ordering::Relaxed);
        } else if !self.active[f].load(Ordering::Relaxed)
            && !self.active[f].swap(true, Ordering::Relaxed)
        {
            self.active_count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Clears frame `f`'s active mark (evicted, reused, or demoted).
    fn deactivate(&self, f: usize) {
        if self.active[f].swap(false, Ordering::Relaxed) {
            self.active_count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Frames marked active now.
    #[cfg(test)]
    pub fn active(&self) -> usize {
        self.active_count.load(Ordering::Relaxed)
    }

    /// Frame `f`'s bytes, to read.
    ///
    /// # Safety
    /// Nothing writes the frame while the slice lives: it holds an uptodate
    /// page the caller has pinned (no bio writes it, eviction skips it while
    /// pinned; other readers may read it at the same time), or it is in
    /// flight in the caller's own bio.
    pub unsafe fn frame(&self, f: u32) -> &[u8] {
        debug_assert!((f as usize) < self.frames());
        // SAFETY: f < frames, so the range is inside the allocation; the
        // caller's contract keeps writers away while it is read.
        unsafe { std::slice::from_raw_parts(self.mem.ptr().add(f as usize * PAGE), PAGE) }
    }

    /// Frame `f`'s bytes, to write.
    ///
    /// # Safety
    /// The caller alone touches the frame while the slice lives: it is in
    /// flight in the caller's bio (the one context that fills, decrypts or
    /// corrupts it until the bio ends), or taken for a read not yet
    /// published. Never a pinned uptodate page: others may be reading it
    /// ([`Self::frame`]); two live `&mut` to one frame, or a `&mut` beside a
    /// `&`, is undefined behaviour even when no byte is written.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn frame_mut(&self, f: u32) -> &mut [u8] {
        debug_assert!((f as usize) < self.frames());
        // SAFETY: f < frames, so the range is inside the allocation; the
        // caller's contract makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.mem.ptr().add(f as usize * PAGE), PAGE) }
    }

    /// The file the frames are (a memfd): frame `f` is its bytes
    /// `f * PAGE..`, so a read of it at that offset is the kernel's copy out
    /// of the frame (the caller pins the frame for the read).
    pub fn frames_fd(&self) -> std::os::fd::RawFd {
        self.mem.fd()
    }

    /// Looks page `p` up without a lock: an uptodate page is a hit (its
    /// referenced bit set, its readahead mark taken); any other state is
    /// returned as it is (an `Evicting` one is read again).
    #[inline]
    pub fn lookup(&self, p: u64) -> Lookup {
        loop {
            let w = self.pages[p as usize].load(Ordering::SeqCst);
            let (page, marked) = decode(w);
            match page {
                Page::Uptodate { frame } => {
                    let f = frame as usize;
                    self.touch(f);
                    let had_mark = marked
                        && self.pages[p as usize]
                            .compare_exchange(w, w & !MARK, Ordering::SeqCst, Ordering::Relaxed)
                            .is_ok();
                    return Lookup::Hit { marked: had_mark };
                }
                Page::Evicting => std::hint::spin_loop(),
                _ => return Lookup::Miss(page, marked),
            }
        }
    }

    /// A hit copies page `p` into `dst` (one page) without a lock; any
    /// other state is returned as it is. A page found `Evicting` or
    /// changing under the pin is read again. (The readers copy with the
    /// kernel instead, see `cached.rs`; this is the model's own copy, which
    /// the tests use to check what a frame holds.)
    #[cfg(test)]
    pub fn lookup_copy(&self, p: u64, dst: &mut [u8]) -> Lookup {
        loop {
            let w = self.pages[p as usize].load(Ordering::SeqCst);
            let (page, marked) = decode(w);
            let Page::Uptodate { frame } = page else {
                if page == Page::Evicting {
                    std::hint::spin_loop();
                    continue;
                }
                return Lookup::Miss(page, marked);
            };
            let f = frame as usize;
            self.refs[f].fetch_add(1, Ordering::SeqCst);
            let now = self.pages[p as usize].load(Ordering::SeqCst);
            if decode(now).0 != page {
                self.refs[f].fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            // SAFETY: the frame is pinned and holds page p uptodate: no bio
            // writes it and eviction skips it while refs > 0.
            dst.copy_from_slice(unsafe { self.frame(frame) });
            self.touch(f);
            self.refs[f].fetch_sub(1, Ordering::SeqCst);
            let had_mark = now & MARK != 0
                && self.pages[p as usize]
                    .compare_exchange(now, now & !MARK, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok();
            return Lookup::Hit { marked: had_mark };
        }
    }

    /// Clears page `p`'s readahead mark if it carries it (true: it did).
    pub fn take_mark(&self, p: u64) -> bool {
        let w = self.pages[p as usize].load(Ordering::SeqCst);
        w & MARK != 0
            && self.pages[p as usize]
                .compare_exchange(w, w & !MARK, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
    }

    /// True when page `p` is in the cache in any state a sequential stream
    /// leaves behind (uptodate, in flight, failed): readahead's "present".
    pub fn present(&self, p: u64) -> bool {
        !matches!(self.page(p).0, Page::Absent | Page::Evicting)
    }

    /// Claims page `p` for bio `bio`/`seq` when it is absent or failed;
    /// `mark` sets `PG_readahead` on it. False: someone else has it.
    pub fn claim(&self, p: u64, bio: u32, seq: u64, mark: bool) -> bool {
        let slot = &self.pages[p as usize];
        let w = slot.load(Ordering::SeqCst);
        if !matches!(decode(w).0, Page::Absent | Page::Error { .. }) {
            return false;
        }
        slot.compare_exchange(
            w,
            encode(Page::InFlight { bio, seq }, mark),
            Ordering::SeqCst,
            Ordering::Relaxed,
        )
        .is_ok()
    }

    /// Gives up a claim made by [`Self::claim`] before any I/O (page absent again).
    pub fn unclaim(&self, p: u64) {
        self.pages[p as usize].store(encode(Page::Absent, false), Ordering::SeqCst);
    }

    /// Takes up to `out.len()` free frames for a bio, evicting (CLOCK) when
    /// none is free, a data page before a tree page (hash pages are what
    /// every verification reads: the kernel's LRU keeps them active); each
    /// comes pinned once (the bio's pin, released by [`Self::release`]).
    /// Returns how many it took.
    pub fn take_frames(&self, out: &mut [u32]) -> usize {
        let mut a = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        while n < out.len() {
            let f = match a.free.pop() {
                Some(f) => f,
                None => match self
                    .evict_one(&mut a, true, true, false)
                    .or_else(|| self.evict_one(&mut a, false, true, false))
                {
                    Some(f) => f,
                    None => break,
                },
            };
            // An add, not a store of 1: a hit that read the frame's old
            // page just before it went may hold a pin for a moment (it
            // finds the page changed and drops it); a store would erase
            // that pin, its drop would then take the bio's, and the frame,
            // unpinned while its bio still owns it, could be evicted and
            // handed to a second bio.
            self.refs[f as usize].fetch_add(1, Ordering::SeqCst);
            self.referenced[f as usize].store(false, Ordering::Relaxed);
            self.checked[f as usize].store(false, Ordering::Relaxed);
            self.used[f as usize].store(false, Ordering::Relaxed);
            self.deactivate(f as usize);
            out[n] = f;
            n += 1;
        }
        n
    }

    /// CLOCK: the first frame after the hand holding an unpinned uptodate
    /// page not referenced since the hand last passed. With `data`, only a
    /// data page (tree pages are left, see [`Self::data_resident`]), and
    /// only one used since it was read in unless `unused` (readahead the
    /// stream has not reached yet is left). Active pages are passed over
    /// while they are at most half of what is held, unless `demote`.
    /// None: every frame is pinned, in flight (or left).
    fn evict_one(&self, a: &mut Alloc, data: bool, unused: bool, demote: bool) -> Option<u32> {
        let n = self.frames();
        for _ in 0..2 * n {
            let f = a.hand;
            a.hand += 1;
            if a.hand == n {
                a.hand = 0;
            }
            let p = self.frame_page[f].load(Ordering::Relaxed);
            if p == NO_PAGE
                || self.refs[f].load(Ordering::SeqCst) != 0
                || (data
                    && (p as usize >= self.data_pages
                        || (!unused && !self.used[f].load(Ordering::Relaxed))))
            {
                continue;
            }
            if self.active[f].load(Ordering::Relaxed) {
                // Active frames are passed over while they are at most half
                // of what is resident; beyond that the hand demotes them.
                if demote || self.active_count.load(Ordering::Relaxed) * 2 > self.resident() {
                    self.deactivate(f);
                    self.referenced[f].store(false, Ordering::Relaxed);
                }
                continue;
            }
            if self.referenced[f].swap(false, Ordering::Relaxed) {
                continue;
            }
            if self.try_evict(f) {
                return Some(f as u32);
            }
        }
        None
    }

    /// Evicts frame `f`'s page if it is an unpinned uptodate page: marks
    /// it `Evicting`, then checks the pin count (a hit that pinned it
    /// meanwhile keeps it), then makes it absent. The caller holds the
    /// allocator's lock and gets the frame.
    fn try_evict(&self, f: usize) -> bool {
        let p = self.frame_page[f].load(Ordering::Relaxed);
        if p == NO_PAGE {
            return false;
        }
        let slot = &self.pages[p as usize];
        let w = slot.load(Ordering::SeqCst);
        if decode(w).0 != (Page::Uptodate { frame: f as u32 })
            || slot
                .compare_exchange(
                    w,
                    encode(Page::Evicting, false),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_err()
        {
            return false;
        }
        if self.refs[f].load(Ordering::SeqCst) != 0 {
            // A hit pinned it between the checks: it stays.
            slot.store(w, Ordering::SeqCst);
            return false;
        }
        slot.store(encode(Page::Absent, false), Ordering::SeqCst);
        self.frame_page[f].store(NO_PAGE, Ordering::Relaxed);
        self.resident.fetch_sub(1, Ordering::Relaxed);
        if p as usize >= self.data_pages {
            self.tree_resident.fetch_sub(1, Ordering::Relaxed);
        } else if !self.used[f].load(Ordering::Relaxed) {
            self.unused_resident.fetch_sub(1, Ordering::Relaxed);
        }
        self.deactivate(f);
        true
    }

    /// Data pages not used since they were read in (readahead the stream
    /// has not reached yet).
    pub fn unused_resident(&self) -> usize {
        // A wrapped count (a race between eviction and a first use) reads
        // as "all of them" for the moment, never as more.
        self.unused_resident
            .load(Ordering::Relaxed)
            .min(self.data_resident())
    }

    /// Evicts data pages until at most `capacity` are held (what is
    /// pinned stays). Used pages go first; readahead the stream has not
    /// reached yet waits for it (the kernel's readahead pages wait on the
    /// LRU for the stream that asked for them) as far as the reserve frames,
    /// sized for the reads in flight, hold it: beyond that it goes like any
    /// page, in the hand's order, as unreferenced readahead folios leave
    /// the kernel's inactive list (random reads leave readahead no stream
    /// reaches). Called when a bio's pages are released. With `cache.size
    /// = 0` a page goes at the first release after its first use, so a
    /// stream still reads at the speed of its bios and nothing is ever a
    /// hit twice.
    pub fn shrink(&self) {
        if self.data_resident() <= self.capacity {
            return;
        }
        let reserve = self.frames().saturating_sub(self.capacity);
        let mut a = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let mut demote = false;
        while self.data_resident() > self.capacity {
            let unused = self.unused_resident();
            let any = unused > reserve;
            if !any && self.data_resident() == unused {
                // Only readahead not reached yet, within the reserve.
                break;
            }
            match self.evict_one(&mut a, true, any, demote) {
                Some(f) => a.free.push(f),
                // Every used page active: demote (the kernel deactivates
                // when the inactive list runs low), once.
                None if !demote => demote = true,
                None => break,
            }
        }
    }

    /// Worker side, after post-processing bio `bio`: its pages become
    /// uptodate (`ok`) or failed (`io_error`: at the device, else in
    /// verification; a failed page's flag says which), then every waiting
    /// reader is returned (the caller wakes them). The frames stay pinned
    /// by the bio.
    pub fn end_bio(&self, bio: u32, ok: bool, io_error: bool, mut wake: impl FnMut(usize)) {
        let b = &self.bios[bio as usize];
        let first = b.first_page.load(Ordering::Relaxed);
        let n = b.npages.load(Ordering::Relaxed) as usize;
        let seq = b.seq.load(Ordering::Relaxed);
        let mark = b.mark_page.load(Ordering::Relaxed);
        // The shared counts move once per bio, not per page: every worker
        // of every CPU ends bios, and these are two cache lines they share.
        if ok {
            let data = (self.data_pages as u64).saturating_sub(first).min(n as u64) as usize;
            self.resident.fetch_add(n, Ordering::Relaxed);
            self.unused_resident.fetch_add(data, Ordering::Relaxed);
        }
        for i in 0..n {
            let p = first + i as u64;
            let f = b.frames[i].load(Ordering::Relaxed);
            let slot = &self.pages[p as usize];
            // Keep a mark that was cleared meanwhile cleared.
            let marked = p == mark && slot.load(Ordering::SeqCst) & MARK != 0;
            if ok {
                self.frame_page[f as usize].store(p, Ordering::Relaxed);
                slot.store(
                    encode(Page::Uptodate { frame: f }, marked),
                    Ordering::SeqCst,
                );
            } else {
                slot.store(encode(Page::Error { seq }, io_error), Ordering::SeqCst);
            }
        }
        for (w, word) in b.waiters.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::SeqCst);
            while bits != 0 {
                let r = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                wake(w * 64 + r);
            }
        }
    }

    /// Reader side: wait for bio `bio` (reader `reader` is woken when it
    /// ends). The caller checks the page again afterwards.
    pub fn add_waiter(&self, bio: u32, reader: usize) {
        self.bios[bio as usize].waiters[reader / 64].fetch_or(1 << (reader % 64), Ordering::SeqCst);
    }

    /// Owner side, once the bio came back: drops the bio's pins, frees the
    /// frames of pages that failed, and shrinks the cache to its capacity.
    pub fn release(&self, bio: u32) {
        let b = &self.bios[bio as usize];
        let n = b.npages.load(Ordering::Relaxed) as usize;
        let mut failed = Vec::new();
        for i in 0..n {
            let f = b.frames[i].load(Ordering::Relaxed);
            if self.frame_page[f as usize].load(Ordering::Relaxed) == NO_PAGE {
                failed.push(f);
            }
            self.refs[f as usize].fetch_sub(1, Ordering::SeqCst);
        }
        if !failed.is_empty() {
            let mut a = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
            a.free.extend(failed);
        }
        self.shrink();
    }

    /// Pins the frame of page `p` when it is uptodate (marking it
    /// referenced, as a lookup does) and returns it; the caller reads it and
    /// calls [`Self::unpin`]. None: not uptodate now.
    pub fn pin_uptodate(&self, p: u64) -> Option<u32> {
        let f = self.pin(p)?;
        self.touch(f as usize);
        Some(f)
    }

    /// [`Self::pin_uptodate`] of a page its caller has already looked up
    /// (the lookup marked it referenced; a second mark would count as a
    /// second use): the application's copy after its lookups.
    pub fn pin_looked_up(&self, p: u64) -> Option<u32> {
        self.pin(p)
    }

    fn pin(&self, p: u64) -> Option<u32> {
        loop {
            let w = self.pages[p as usize].load(Ordering::SeqCst);
            let page = decode(w).0;
            let Page::Uptodate { frame } = page else {
                if page == Page::Evicting {
                    std::hint::spin_loop();
                    continue;
                }
                return None;
            };
            let f = frame as usize;
            self.refs[f].fetch_add(1, Ordering::SeqCst);
            if decode(self.pages[p as usize].load(Ordering::SeqCst)).0 != page {
                self.refs[f].fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            return Some(frame);
        }
    }

    /// Drops a pin taken by [`Self::pin_uptodate`].
    pub fn unpin(&self, f: u32) {
        self.refs[f as usize].fetch_sub(1, Ordering::SeqCst);
    }

    /// `PG_checked` of frame `f` (the hash page it holds was verified).
    #[inline]
    pub fn checked(&self, f: u32) -> bool {
        self.checked[f as usize].load(Ordering::Acquire)
    }

    /// Sets `PG_checked` on frame `f` (the caller pins it).
    #[inline]
    pub fn set_checked(&self, f: u32) {
        if !self.checked(f) {
            self.checked[f as usize].store(true, Ordering::Release);
        }
    }

    /// Ends a read of pages `first..` into `frames` done without a bio slot
    /// (a worker's read of tree pages it claimed): they become uptodate
    /// (`ok`) or failed. The frames stay pinned until [`Self::release_frames`].
    pub fn fill_pages(&self, first: u64, frames: &[u32], ok: bool, seq: u64) {
        for (i, &f) in frames.iter().enumerate() {
            let p = first + i as u64;
            let slot = &self.pages[p as usize];
            if ok {
                self.frame_page[f as usize].store(p, Ordering::Relaxed);
                self.resident.fetch_add(1, Ordering::Relaxed);
                if p as usize >= self.data_pages {
                    self.tree_resident.fetch_add(1, Ordering::Relaxed);
                } else {
                    self.unused_resident.fetch_add(1, Ordering::Relaxed);
                }
                slot.store(encode(Page::Uptodate { frame: f }, false), Ordering::SeqCst);
            } else {
                slot.store(encode(Page::Error { seq }, true), Ordering::SeqCst);
            }
        }
    }

    /// Drops the read's pins of `frames` (see [`Self::fill_pages`]), frees
    /// those whose page failed, and shrinks the cache to its capacity.
    pub fn release_frames(&self, frames: &[u32]) {
        let mut a = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        for &f in frames {
            if self.frame_page[f as usize].load(Ordering::Relaxed) == NO_PAGE {
                a.free.push(f);
            }
            self.refs[f as usize].fetch_sub(1, Ordering::SeqCst);
        }
        drop(a);
        self.shrink();
    }

    /// Frames taken by [`Self::take_frames`] and not used by a bio.
    pub fn return_frames(&self, frames: &[u32]) {
        if frames.is_empty() {
            return;
        }
        let mut a = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        for &f in frames {
            // The take's pin only (see take_frames).
            self.refs[f as usize].fetch_sub(1, Ordering::SeqCst);
            a.free.push(f);
        }
    }

    /// Drops every unpinned uptodate page (the `x` key; `echo 1 >
    /// drop_caches` for this file). Returns how many were dropped.
    pub fn drop_all(&self) -> usize {
        let mut a = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        for f in 0..self.frames() {
            self.referenced[f].store(false, Ordering::Relaxed);
            if self.try_evict(f) {
                a.free.push(f as u32);
                n += 1;
            }
        }
        // Failed pages are forgotten too.
        for slot in self.pages.iter() {
            let w = slot.load(Ordering::SeqCst);
            if matches!(decode(w).0, Page::Error { .. }) {
                let _ = slot.compare_exchange(
                    w,
                    encode(Page::Absent, false),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                );
            }
        }
        n
    }

    /// Copies the uptodate pages of `old` into this cache, up to its
    /// capacity (a live change that resizes the cache keeps what it can,
    /// as the kernel keeps its cache across any workqueue change). Neither
    /// cache may have a bio in flight.
    pub fn migrate_from(&self, old: &PageCache) {
        if old.pages.len() != self.pages.len() || old.data_pages != self.data_pages {
            return;
        }
        let mut a = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        for p in 0..old.pages.len() {
            if self.resident() >= self.capacity {
                break;
            }
            let (Page::Uptodate { frame }, _) = old.page(p as u64) else {
                continue;
            };
            let Some(f) = a.free.pop() else { break };
            // SAFETY: no bio is in flight in either cache (the caller's
            // contract) and this thread is the only one using them.
            unsafe { self.frame_mut(f).copy_from_slice(old.frame(frame)) };
            self.frame_page[f as usize].store(p as u64, Ordering::Relaxed);
            self.checked[f as usize].store(old.checked(frame), Ordering::Relaxed);
            self.used[f as usize].store(true, Ordering::Relaxed);
            self.resident.fetch_add(1, Ordering::Relaxed);
            if p >= self.data_pages {
                self.tree_resident.fetch_add(1, Ordering::Relaxed);
            }
            self.pages[p].store(encode(Page::Uptodate { frame: f }, false), Ordering::SeqCst);
        }
    }
}

/// One stream's readahead state (`struct file_ra_state`), and the window
/// arithmetic of mm/readahead.c (v6.18): `page_cache_sync_ra` on a miss,
/// `page_cache_async_ra` on reaching the page marked `PG_readahead`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readahead {
    /// First page of the current window.
    pub start: u64,
    /// Pages in it.
    pub size: u64,
    /// Pages before its end where the mark is.
    pub async_size: u64,
    /// Byte position just after the previous read (`prev_pos`; -1 at open).
    pub prev_pos: i64,
    /// Largest window in pages (`ra_pages`, from `read_ahead_kb`).
    pub ra_pages: u64,
    /// The device's largest request in pages (`bdi->io_pages`).
    pub io_pages: u64,
}

/// A window to read: pages `[start, start + size)`, `mark` the page to
/// carry `PG_readahead` (None: no mark).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First page.
    pub start: u64,
    /// Pages.
    pub size: u64,
    /// The page to mark.
    pub mark: Option<u64>,
}

/// Largest request the device takes, in pages (`bdi->io_pages`:
/// `max_sectors_kb / 4`), for streams opened from now on; the engine sets
/// it from the data file's device ([`super::io_pages_of`]).
static IO_PAGES: AtomicU64 = AtomicU64::new(super::DEFAULT_IO_PAGES);

/// Sets [`Readahead::io_pages`] of the streams opened from now on.
pub fn set_io_pages(pages: u64) {
    IO_PAGES.store(pages.max(1), Ordering::Relaxed);
}

fn init_ra_size(size: u64, max: u64) -> u64 {
    let newsize = size.next_power_of_two();
    if newsize <= max / 32 {
        newsize * 4
    } else if newsize <= max / 4 {
        newsize * 2
    } else {
        max
    }
}

fn next_ra_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

impl Readahead {
    /// A stream just opened, with windows up to `read_ahead` bytes.
    pub fn new(read_ahead: u64) -> Readahead {
        Readahead {
            start: 0,
            size: 0,
            async_size: 0,
            prev_pos: -1,
            ra_pages: read_ahead / PAGE as u64,
            io_pages: IO_PAGES.load(Ordering::Relaxed),
        }
    }

    fn max_pages(&self, req: u64) -> u64 {
        if req > self.ra_pages && self.io_pages > self.ra_pages {
            req.min(self.io_pages)
        } else {
            self.ra_pages
        }
    }

    fn window(&self) -> Window {
        let mark = (self.async_size > 0 && self.async_size <= self.size)
            .then(|| self.start + self.size - self.async_size);
        Window {
            start: self.start,
            size: self.size,
            mark,
        }
    }

    /// A miss at page `index` of a read of `req` pages: the window to read.
    /// `present(p)`: page p is in the cache (the history a sequential
    /// stream leaves behind). Mirrors `page_cache_sync_ra`.
    pub fn sync(&mut self, index: u64, req: u64, present: impl Fn(u64) -> bool) -> Window {
        if self.ra_pages == 0 {
            // Readahead off: forced, one page at a time.
            return Window {
                start: index,
                size: 1,
                mark: None,
            };
        }
        let max = self.max_pages(req);
        let prev_index = if self.prev_pos < 0 {
            u64::MAX >> 12
        } else {
            self.prev_pos as u64 >> 12
        };
        if index == 0 || req > max || index.wrapping_sub(prev_index) <= 1 {
            self.start = index;
            self.size = init_ra_size(req, max);
            self.async_size = if self.size > req {
                self.size - req
            } else {
                self.size >> 1
            };
            return self.window();
        }
        // page_cache_prev_miss: the first hole going back from index - 1.
        let mut miss = None;
        for i in 0..max {
            let Some(p) = (index - 1).checked_sub(i) else {
                break;
            };
            if !present(p) {
                miss = Some(p);
                break;
            }
        }
        let (contig, from_start) = match miss {
            Some(m) => (index - m - 1, false),
            None if index <= max => (index, true),
            None => (max, false),
        };
        if contig <= req {
            // Standalone small random read: read as is, state untouched.
            return Window {
                start: index,
                size: req,
                mark: None,
            };
        }
        let contig = if from_start { contig * 2 } else { contig };
        self.start = index;
        self.size = (contig + req).min(max);
        self.async_size = 1;
        self.window()
    }

    /// The marked page `index` was reached by a read of `req` pages: the
    /// next window, read ahead asynchronously (None: nothing to read).
    /// Mirrors `page_cache_async_ra`.
    pub fn on_mark(
        &mut self,
        index: u64,
        req: u64,
        present: impl Fn(u64) -> bool,
    ) -> Option<Window> {
        if self.ra_pages == 0 {
            return None;
        }
        let max = self.max_pages(req);
        let expected = self.start + self.size - self.async_size;
        if index == expected && self.size > 0 {
            self.start += self.size;
            self.size = self.size.max(next_ra_size(self.size, max));
            self.async_size = self.size;
            return Some(self.window());
        }
        // A mark without valid state (interleaved streams): query the cache.
        let mut start = None;
        for i in 1..=max {
            if !present(index + i) {
                start = Some(index + i);
                break;
            }
        }
        let start = start?;
        self.start = start;
        self.size = next_ra_size(start - index + req, max);
        self.async_size = self.size;
        Some(self.window())
    }

    /// The read ended at byte `end` (`ra->prev_pos = last_pos`).
    pub fn read_done(&mut self, end: u64) {
        self.prev_pos = end as i64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        for (p, m) in [
            (Page::Absent, false),
            (
                Page::InFlight {
                    bio: 77,
                    seq: 123_456,
                },
                true,
            ),
            (Page::Uptodate { frame: 9 }, true),
            (
                Page::Uptodate {
                    frame: u32::MAX - 1,
                },
                false,
            ),
            (Page::Error { seq: 5 }, false),
            (Page::Evicting, false),
        ] {
            assert_eq!(decode(encode(p, m)), (p, m));
        }
    }

    /// The windows a sequential stream of 4 KiB reads gets with the default
    /// 128 KiB: 4, 8, 16, then 32 pages, each read ahead when the marked
    /// page is reached (the numbers `page_cache_sync_ra` and
    /// `page_cache_async_ra` give).
    #[test]
    fn sequential_windows_grow_to_read_ahead_kb() {
        let mut ra = Readahead::new(128 << 10);
        let w = ra.sync(0, 1, |_| false);
        assert_eq!(
            w,
            Window {
                start: 0,
                size: 4,
                mark: Some(1)
            }
        );
        let w = ra.on_mark(1, 1, |_| true).unwrap();
        assert_eq!(
            w,
            Window {
                start: 4,
                size: 8,
                mark: Some(4)
            }
        );
        let w = ra.on_mark(4, 1, |_| true).unwrap();
        assert_eq!(
            w,
            Window {
                start: 12,
                size: 16,
                mark: Some(12)
            }
        );
        let w = ra.on_mark(12, 1, |_| true).unwrap();
        assert_eq!(
            w,
            Window {
                start: 28,
                size: 32,
                mark: Some(28)
            }
        );
        let w = ra.on_mark(28, 1, |_| true).unwrap();
        assert_eq!(
            w,
            Window {
                start: 60,
                size: 32,
                mark: Some(60)
            }
        );
    }

    #[test]
    fn a_random_read_reads_its_own_pages() {
        let mut ra = Readahead::new(128 << 10);
        ra.read_done(50 << 12);
        // Far from the last read, no history behind it: as is.
        let w = ra.sync(1000, 2, |_| false);
        assert_eq!(
            w,
            Window {
                start: 1000,
                size: 2,
                mark: None
            }
        );
        // The next page after the previous read is sequential.
        ra.read_done(1002 << 12);
        let w = ra.sync(1002, 1, |_| false);
        assert_eq!(w.start, 1002);
        assert_eq!(w.size, 4);
        // A large read: its own size, up to one bio.
        let mut ra = Readahead::new(128 << 10);
        let w = ra.sync(0, 64, |_| false);
        assert_eq!((w.start, w.size), (0, 64));
        // Readahead off: one page.
        let mut ra = Readahead::new(0);
        assert_eq!(
            ra.sync(7, 8, |_| false),
            Window {
                start: 7,
                size: 1,
                mark: None
            }
        );
        assert_eq!(ra.on_mark(7, 1, |_| true), None);
    }

    fn cache(file_pages: usize, cap: usize) -> PageCache {
        PageCache::new(file_pages, cap, 8, 4, 2).expect("a memfd")
    }

    /// Fills page p through a bio of one page, as a reader and a worker do.
    fn fill(c: &PageCache, p: u64, byte: u8) {
        let mut f = [0u32; 1];
        assert_eq!(c.take_frames(&mut f), 1);
        let seq = c.next_seq();
        assert!(c.claim(p, 0, seq, false));
        let b = c.bio(0);
        b.first_page.store(p, Ordering::Relaxed);
        b.npages.store(1, Ordering::Relaxed);
        b.seq.store(seq, Ordering::Relaxed);
        b.frames[0].store(f[0], Ordering::Relaxed);
        // SAFETY: the frame is this test's bio's.
        unsafe { c.frame_mut(f[0]).fill(byte) };
        c.end_bio(0, true, false, |_| {});
        c.release(0);
    }

    /// The frame handoff under threads: a bio owner fills frames it took
    /// (evicting what is unpinned), a reader copies hits and reads pinned
    /// frames, and a third thread drops the cache. A reader must only ever
    /// see its page's bytes, and no frame is written while someone reads
    /// it. Under Miri (`cargo +nightly miri test --lib frames_are_handed`,
    /// see ARCHITECTURE.md) the data-race and aliasing checkers watch every
    /// byte of the frames, so a hole in the pin protocol (a pin not
    /// checked again, an eviction that does not look at the pins after
    /// marking the page `Evicting`) is reported as undefined behaviour
    /// even when no byte comes out wrong.
    #[test]
    fn frames_are_handed_off_between_threads_without_a_race() {
        use std::sync::atomic::AtomicBool;
        let rounds = if cfg!(miri) { 24 } else { 20_000 };
        let pages = 4u64;
        let c = PageCache::new(pages as usize, 1, 1, 2, 2).expect("frames");
        let byte = |p: u64| p as u8 + 1;
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..rounds {
                    let p = i % pages;
                    let mut f = [0u32; 1];
                    if c.take_frames(&mut f) == 0 {
                        std::thread::yield_now();
                        continue;
                    }
                    let seq = c.next_seq();
                    if !c.claim(p, 0, seq, false) {
                        c.return_frames(&f);
                        continue;
                    }
                    let b = c.bio(0);
                    b.first_page.store(p, Ordering::Relaxed);
                    b.npages.store(1, Ordering::Relaxed);
                    b.seq.store(seq, Ordering::Relaxed);
                    b.frames[0].store(f[0], Ordering::Relaxed);
                    // SAFETY: the frame is in flight in this thread's bio.
                    unsafe { c.frame_mut(f[0]).fill(byte(p)) };
                    c.end_bio(0, true, false, |_| {});
                    c.release(0);
                }
                done.store(true, Ordering::SeqCst);
            });
            s.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    c.drop_all();
                    std::thread::yield_now();
                }
            });
            s.spawn(|| {
                let mut buf = vec![0u8; PAGE];
                while !done.load(Ordering::SeqCst) {
                    for p in 0..pages {
                        if let Lookup::Hit { .. } = c.lookup_copy(p, &mut buf) {
                            assert!(buf.iter().all(|&b| b == byte(p)), "copy of page {p}");
                        }
                        if let Some(f) = c.pin_uptodate(p) {
                            // SAFETY: pinned and uptodate.
                            let frame = unsafe { c.frame(f) };
                            assert!(frame.iter().all(|&b| b == byte(p)), "frame of page {p}");
                            c.unpin(f);
                        }
                    }
                }
            });
        });
        // What is left holds its own page's bytes, within the frames.
        for p in 0..pages {
            if let Page::Uptodate { frame } = c.page(p).0 {
                // SAFETY: no thread runs any more.
                assert!(unsafe { c.frame(frame) }.iter().all(|&b| b == byte(p)));
            }
        }
        assert!(c.resident() <= c.frames());
    }

    /// The interleaving the thread test found: a hit loads page 1's word
    /// (frame f), page 1 goes and f is taken for a bio, the hit pins f,
    /// finds the page changed and unpins. The bio's pin must survive it.
    #[test]
    fn a_hits_passing_pin_on_a_frame_being_taken_leaves_the_bios_pin() {
        let c = cache(4, 1);
        fill(&c, 1, 0x11);
        let Page::Uptodate { frame } = c.page(1).0 else {
            panic!("page 1 is cached")
        };
        assert_eq!(c.drop_all(), 1);
        let f = frame as usize;
        // The hit's pin, on its stale word, lands before the take.
        c.refs[f].fetch_add(1, Ordering::SeqCst);
        let mut taken = [u32::MAX; 8];
        let n = c.take_frames(&mut taken);
        assert!(taken[..n].contains(&frame));
        // The hit finds page 1 changed and drops its pin.
        c.refs[f].fetch_sub(1, Ordering::SeqCst);
        assert_eq!(c.refs[f].load(Ordering::SeqCst), 1, "the bio's pin");
        c.return_frames(&taken[..n]);
        assert!(
            taken[..n]
                .iter()
                .all(|&t| c.refs[t as usize].load(Ordering::SeqCst) == 0)
        );
    }

    #[test]
    fn hits_copy_and_eviction_keeps_the_capacity() {
        let c = cache(16, 2);
        let mut buf = vec![0u8; PAGE];
        assert_eq!(
            c.lookup_copy(3, &mut buf),
            Lookup::Miss(Page::Absent, false)
        );
        fill(&c, 3, 0xaa);
        let hit = Lookup::Hit { marked: false };
        assert_eq!(c.unused_resident(), 1, "read in, not used yet");
        assert_eq!(c.lookup_copy(3, &mut buf), hit);
        assert_eq!(c.unused_resident(), 0, "its first use");
        assert!(buf.iter().all(|&b| b == 0xaa));
        fill(&c, 4, 0xbb);
        assert_eq!(c.lookup_copy(4, &mut buf), hit);
        assert_eq!(c.lookup_copy(3, &mut buf), hit);
        assert_eq!(c.unused_resident(), 0, "a second use is no first");
        fill(&c, 5, 0xcc);
        assert_eq!(c.resident(), 2, "capacity 2");
        // Page 3 was hit again after page 4 came in: CLOCK keeps it over
        // one used once; page 5, not used yet, is readahead the stream has
        // not reached and stays.
        let kept: Vec<u64> = (3..6)
            .filter(|&p| matches!(c.page(p).0, Page::Uptodate { .. }))
            .collect();
        assert_eq!(kept.len(), 2);
        assert!(kept.contains(&5), "the newest page stays: {kept:?}");
        assert_eq!(c.drop_all(), 2);
        assert_eq!(c.resident(), 0);
        assert!((0..16).all(|p| c.page(p).0 == Page::Absent));
    }

    #[test]
    fn readahead_no_stream_reaches_goes_once_it_outgrows_the_reserve() {
        // Capacity 4, reserve 8: random reads leave readahead behind that
        // no stream reaches; it may wait in the reserve, not beyond.
        let c = cache(64, 4);
        let mut buf = vec![0u8; PAGE];
        for p in 0..20 {
            fill(&c, p, 1);
        }
        assert_eq!(c.unused_resident(), 8);
        assert_eq!(c.data_resident(), 8);
        // Used pages go first while the readahead fits the reserve.
        for p in 20..30 {
            fill(&c, p, 2);
            c.lookup_copy(p, &mut buf);
        }
        assert!(c.data_resident() <= 8 + 1, "{}", c.data_resident());
        assert!(c.unused_resident() <= 8);
        // A used page read again stays held within the capacity.
        fill(&c, 40, 3);
        c.lookup_copy(40, &mut buf);
        assert!(matches!(c.lookup_copy(40, &mut buf), Lookup::Hit { .. }));
    }

    #[test]
    fn a_page_used_twice_outlives_a_stream_of_pages_used_once() {
        // Capacity 4: page 0 is hit twice (activated), then a stream of 40
        // pages each hit once passes through; page 0 stays, as a hash page
        // under every verification stays on the kernel's active list.
        let c = cache(64, 4);
        let mut buf = vec![0u8; PAGE];
        fill(&c, 0, 1);
        c.lookup_copy(0, &mut buf);
        c.lookup_copy(0, &mut buf);
        assert_eq!(c.active(), 1);
        for p in 1..41 {
            fill(&c, p, 2);
            c.lookup_copy(p, &mut buf);
        }
        assert!(matches!(c.page(0).0, Page::Uptodate { .. }));
        assert_eq!(c.resident(), 4);
        // Active frames beyond half the cache are demoted and can go.
        for p in 41..45 {
            fill(&c, p, 3);
            c.lookup_copy(p, &mut buf);
            c.lookup_copy(p, &mut buf);
        }
        for p in 45..60 {
            fill(&c, p, 4);
            c.lookup_copy(p, &mut buf);
        }
        assert!(c.active() <= 2, "{}", c.active());
        assert_eq!(c.resident(), 4);
    }

    #[test]
    fn capacity_zero_keeps_a_page_until_the_release_after_its_first_use() {
        let c = cache(16, 0);
        let mut buf = vec![0u8; PAGE];
        fill(&c, 1, 1);
        assert_eq!(c.resident(), 1, "readahead waits for its stream");
        assert_eq!(c.unused_resident(), 1);
        assert!(matches!(c.lookup_copy(1, &mut buf), Lookup::Hit { .. }));
        assert_eq!(c.unused_resident(), 0, "its first use");
        fill(&c, 2, 2);
        assert_eq!(c.page(1).0, Page::Absent, "used, then gone");
        assert_eq!(c.resident(), 1);
        assert!(matches!(c.page(2).0, Page::Uptodate { .. }));
    }

    #[test]
    fn a_frame_for_a_bio_comes_from_a_data_page_before_a_tree_page() {
        // 16 data pages, 4 tree pages (16..20), capacity 0, 8 frames: the
        // tree's 4 pages and 4 pages of readahead fill them; the next bio
        // takes a data page's frame, not a hash page's (which every
        // verification reads). A hand that took the first frame it met
        // would take a tree page, and a stream would read its tree again
        // and again.
        let c = PageCache::with_tree(16, 4, 0, 8, 4, 2).expect("a memfd");
        for p in 16..20 {
            fill(&c, p, 9);
        }
        for p in 0..4 {
            fill(&c, p, 1);
        }
        fill(&c, 4, 2);
        for p in 16..20 {
            assert!(
                matches!(c.page(p).0, Page::Uptodate { .. }),
                "tree page {p} went"
            );
        }
        assert!(matches!(c.page(4).0, Page::Uptodate { .. }));
        assert_eq!((0..4).filter(|&p| c.page(p).0 == Page::Absent).count(), 1);
    }

    #[test]
    fn a_failed_bio_fails_its_pages_and_wakes_its_waiters() {
        let c = cache(16, 4);
        let mut f = [0u32; 2];
        assert_eq!(c.take_frames(&mut f), 2);
        let seq = c.next_seq();
        assert!(c.claim(8, 1, seq, false) && c.claim(9, 1, seq, true));
        assert!(
            !c.claim(9, 2, seq + 1, false),
            "an in-flight page is not claimed twice"
        );
        let b = c.bio(1);
        b.first_page.store(8, Ordering::Relaxed);
        b.npages.store(2, Ordering::Relaxed);
        b.seq.store(seq, Ordering::Relaxed);
        b.frames[0].store(f[0], Ordering::Relaxed);
        b.frames[1].store(f[1], Ordering::Relaxed);
        c.add_waiter(1, 0);
        c.add_waiter(1, 1);
        let mut woken = Vec::new();
        c.end_bio(1, false, false, |r| woken.push(r));
        assert_eq!(woken, vec![0, 1]);
        assert_eq!(c.page(8).0, Page::Error { seq: seq_key(seq) });
        c.release(1);
        let mut buf = vec![0u8; PAGE];
        assert!(matches!(
            c.lookup_copy(9, &mut buf),
            Lookup::Miss(Page::Error { .. }, _)
        ));
        // A failed page may be claimed by a new bio.
        assert!(c.claim(9, 2, seq + 1, false));
    }
}
