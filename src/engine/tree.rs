//! The cold fs-verity tree: the Merkle tree as the kernel holds it, in the
//! file's page cache, read by the verify worker that needs it.
//!
//! ext4 stores an fs-verity file's tree past EOF at `round_up(i_size, 64K)`
//! and reads it through the file's own page cache (`ext4_read_merkle_tree_page`),
//! encrypted with the file's contents key when the file is encrypted (each
//! data unit's IV its position there). A verify work item walks up from the
//! leaf hash page of each data block until a page marked verified
//! (`PG_checked`); a hash page that is not cached is read then and there:
//! the worker issues the read and sleeps until it is done (readahead of up
//! to a quarter of the bio's pages at the leaf level, as
//! `fsverity_verify_bio` asks), so a per-CPU pool wakes another worker
//! meanwhile (see `queue.rs`). A hash page is evicted like any other page,
//! and its verified mark goes with it: read again, it is verified again.
//!
//! [`TreePages`] is that tree for one pipeline: its pages are pages
//! `file_pages()..` of the model's [`PageCache`], its file is the dataset's
//! tree file (ciphertext when decryption is on), and [`TreeReader`] is the
//! [`HashBlocks`] a worker verifies through. When verification has a queue
//! of its own (ext4: fsverity's queue after fscrypt's), the tree pages a
//! verify worker read are decrypted as ext4 decrypts them, in a work item
//! on the decrypt queue (`fscrypt_read_queue`) of the CPU that read them,
//! while the verify worker sleeps; that is why ext4 has two queues. Where
//! one item decrypts and verifies (`verify_mode = same` or `inline`), which
//! ext4 never does for this reason (the item would wait behind itself), the
//! verify worker decrypts them itself.

use std::cell::Cell;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::crypto::{ContentsCipher, DATA_UNIT_SIZE};
use crate::metrics::{Counters, stamp};
use crate::verity::merkle::{BlockUnreadable, HashBlocks};

use super::OpenFile;
use super::pagecache::{PAGE, Page, PageCache};
use super::queue::{NO_PWQ, Queues, TREE_JOB, WorkItem, WorkQueue};

/// Tree pages read by a verify worker, to be decrypted on the decrypt
/// queue: lives on the waiting worker's stack until `done`.
pub struct TreeJob {
    frames: [u32; MAX_TREE_RA],
    n: usize,
    /// Data unit (IV) of the first page.
    first_unit: u64,
    done: std::sync::atomic::AtomicBool,
    waiter: std::thread::Thread,
}

/// Most tree pages one read of a hash page reads (the kernel's bound is a
/// quarter of the bio, at most `BIO_MAX_VECS / 4`).
pub const MAX_TREE_RA: usize = 64;

/// Bio number in the state of a tree page in flight: tree reads have no
/// bio slot (no reader ever waits on a tree page).
const TREE_BIO: u32 = 0;

/// The tree of the file one pipeline reads.
pub struct TreePages {
    pc: Arc<PageCache>,
    /// Page of the cache holding tree page 0.
    base: u64,
    /// Tree pages.
    pages: u64,
    /// The tree file (plaintext, or as the encrypted file stores it).
    file: OpenFile,
    /// Decrypts tree pages (the file is encrypted).
    cipher: Option<Arc<ContentsCipher>>,
    /// Data unit index (IV) of the tree's first byte.
    first_unit: u64,
    /// First leaf-level tree block (stored order: leaves last).
    leaf_start: u64,
    /// Workers waiting for a tree page another worker reads.
    lock: Mutex<()>,
    cv: Condvar,
}

impl TreePages {
    /// The tree of `pc`'s file (its tree pages), read from `file`,
    /// decrypted with `cipher` from data unit `first_unit`, whose leaf level
    /// starts at tree block `leaf_start`.
    pub fn new(
        pc: Arc<PageCache>,
        file: OpenFile,
        cipher: Option<Arc<ContentsCipher>>,
        first_unit: u64,
        leaf_start: u64,
    ) -> TreePages {
        debug_assert!(leaf_start < pc.tree_pages() as u64 || pc.tree_pages() == 0);
        TreePages {
            base: pc.file_pages() as u64,
            pages: pc.tree_pages() as u64,
            pc,
            file,
            cipher,
            first_unit,
            leaf_start,
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// A reader for one work item, run by a worker of `q` (None: a reader
    /// or irq thread verifying inline), reading ahead up to `ra` pages at
    /// the leaf level.
    pub fn reader<'a>(
        &'a self,
        q: Option<&'a WorkQueue>,
        ra: usize,
        decrypt_q: Option<&'a Queues>,
    ) -> TreeReader<'a> {
        TreeReader {
            t: self,
            q,
            decrypt_q,
            ra: ra.clamp(1, MAX_TREE_RA),
            stats: Cell::new(TreeStats::default()),
        }
    }

    /// The cipher of the tree file (None: not encrypted).
    pub fn cipher(&self) -> Option<&ContentsCipher> {
        self.cipher.as_deref()
    }

    /// Decrypt-queue side: decrypts the pages of the [`TreeJob`] `item`
    /// carries with `cipher` and wakes the verify worker waiting for them.
    pub fn decrypt_job(&self, item: &WorkItem, cipher: &ContentsCipher) {
        // SAFETY: the job lives on the stack of the verify worker that
        // queued it, which waits (parked) until `done` is set below.
        let job = unsafe { &*(item.buf as *const TreeJob) };
        let per_page = (PAGE / DATA_UNIT_SIZE) as u64;
        for (i, &f) in job.frames[..job.n].iter().enumerate() {
            // SAFETY: the frames are in flight in the job's read: only
            // this item touches them until `done`.
            let buf = unsafe { self.pc.frame_mut(f) };
            cipher.decrypt_units(job.first_unit + i as u64 * per_page, DATA_UNIT_SIZE, buf);
        }
        let waiter = job.waiter.clone();
        job.done.store(true, std::sync::atomic::Ordering::Release);
        // `job` may be gone from here on.
        waiter.unpark();
    }

    fn wake_waiters(&self) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.cv.notify_all();
    }
}

/// What a [`TreeReader`] did, added to its worker's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// Tree pages read from the file.
    pub pages_read: u64,
    /// Reads of tree pages (each one `preadv`).
    pub reads: u64,
    /// Waits for a tree page another worker was reading.
    pub waits: u64,
    /// Nanoseconds blocked (reading or waiting).
    pub blocked_ns: u64,
    /// Tree pages that could not be read.
    pub errors: u64,
    /// Reads whose pages were decrypted on the decrypt queue.
    pub queued_decrypts: u64,
}

impl TreeStats {
    /// Adds these into a worker's counters.
    pub fn add_to(&self, c: &mut Counters) {
        c.tree_pages_read += self.pages_read;
        c.tree_reads += self.reads;
        c.tree_waits += self.waits;
        c.tree_blocked_ns += self.blocked_ns;
        c.tree_queued_decrypts += self.queued_decrypts;
    }
}

/// The [`HashBlocks`] of one work item: hash pages from the page cache,
/// read (blocking) when missing.
pub struct TreeReader<'a> {
    t: &'a TreePages,
    q: Option<&'a WorkQueue>,
    decrypt_q: Option<&'a Queues>,
    ra: usize,
    stats: Cell<TreeStats>,
}

impl TreeReader<'_> {
    /// What this reader did so far.
    pub fn stats(&self) -> TreeStats {
        self.stats.get()
    }

    fn bump(&self, f: impl FnOnce(&mut TreeStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    /// Tells the pool this worker sleeps (and wakes another if work waits).
    fn block(&self) -> u64 {
        if let Some(q) = self.q {
            q.block();
        }
        stamp()
    }

    fn unblock(&self, since: u64) {
        if let Some(q) = self.q {
            q.unblock();
        }
        let ns = stamp().saturating_sub(since);
        self.bump(|s| s.blocked_ns += ns);
    }

    /// Sleeps until tree page `p` (a cache page) is no longer in flight.
    fn wait_for(&self, p: u64) {
        let t = self.t;
        let since = self.block();
        let mut g = t.lock.lock().unwrap_or_else(|e| e.into_inner());
        while matches!(t.pc.page(p).0, Page::InFlight { .. }) {
            // The reader notifies under the lock after the state changes;
            // the timeout only bounds a wakeup lost to a race.
            g =
                t.cv.wait_timeout(g, Duration::from_millis(1))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
        }
        drop(g);
        self.unblock(since);
        self.bump(|s| s.waits += 1);
    }

    /// Reads tree block `g` (absent or failed) and the absent pages after
    /// it up to the readahead size at the leaf level: claims them, reads
    /// them with one `preadv` into fresh frames (blocking), decrypts them.
    /// Ok(Some(frame)): `g`'s frame, uptodate and pinned for the caller
    /// (released with `release_frames`); Ok(None): someone else claimed it
    /// first, or no frame was free; look again.
    fn read(&self, g: u64) -> Result<Option<u32>, BlockUnreadable> {
        let t = self.t;
        let pc = &t.pc;
        let p = t.base + g;
        let seq = pc.next_seq();
        if !pc.claim(p, TREE_BIO, seq, false) {
            return Ok(None);
        }
        let want = if g >= t.leaf_start {
            self.ra.min((t.pages - g) as usize)
        } else {
            1
        };
        let mut n = 1;
        while n < want && pc.claim(p + n as u64, TREE_BIO, seq, false) {
            n += 1;
        }
        let mut frames = [0u32; MAX_TREE_RA];
        let got = pc.take_frames(&mut frames[..n]);
        for i in got..n {
            pc.unclaim(p + i as u64);
        }
        if got == 0 {
            // Every frame is pinned by reads in flight: let them finish.
            pc.unclaim(p);
            t.wake_waiters();
            std::thread::sleep(Duration::from_micros(50));
            return Ok(None);
        }
        let frames = &frames[..got];
        let mut iov = [crate::sys::EMPTY_IOVEC; MAX_TREE_RA];
        for (i, &f) in frames.iter().enumerate() {
            // SAFETY: the frame was just taken for this read: nothing else
            // reads or writes it until the pages are filled.
            let buf = unsafe { pc.frame_mut(f) };
            iov[i] = crate::sys::IoVec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: PAGE,
            };
        }
        let since = self.block();
        // SAFETY: every iovec points at a whole frame this read holds.
        let res = unsafe {
            crate::sys::preadv_raw(t.file.file.as_raw_fd(), iov.as_ptr(), got, g * PAGE as u64)
        };
        let ok = res == (got * PAGE) as isize;
        let per_page = (PAGE / DATA_UNIT_SIZE) as u64;
        let first_unit = t.first_unit + g * per_page;
        match (&t.cipher, self.decrypt_q) {
            (Some(_), Some(dq)) if ok => {
                // As ext4: the read's completion queues the decryption on
                // fscrypt's queue; this worker sleeps until it is done.
                let mut job = TreeJob {
                    frames: [0; MAX_TREE_RA],
                    n: got,
                    first_unit,
                    done: std::sync::atomic::AtomicBool::new(false),
                    waiter: std::thread::current(),
                };
                job.frames[..got].copy_from_slice(frames);
                let now = stamp();
                dq.push(
                    WorkItem {
                        buf: (&job as *const TreeJob).cast_mut().cast(),
                        len: (got * PAGE) as u32,
                        reader: 0,
                        slot: 0,
                        offset: g * PAGE as u64,
                        issue_ns: now,
                        enqueue_ns: now,
                        queued_cpu: 0,
                        pwq: NO_PWQ,
                        needs_decrypt: true,
                        bio: TREE_JOB,
                        unfilled: false,
                    },
                    crate::sys::current_cpu(),
                );
                while !job.done.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::park_timeout(Duration::from_millis(10));
                }
                self.unblock(since);
                self.bump(|s| s.queued_decrypts += 1);
            }
            (Some(c), _) => {
                self.unblock(since);
                if ok {
                    for (i, &f) in frames.iter().enumerate() {
                        // SAFETY: as above.
                        let buf = unsafe { pc.frame_mut(f) };
                        c.decrypt_units(first_unit + i as u64 * per_page, DATA_UNIT_SIZE, buf);
                    }
                }
            }
            (None, _) => self.unblock(since),
        }
        pc.fill_pages(p, frames, ok, seq);
        // The other pages' pins go now; `g`'s stays for the caller.
        pc.release_frames(&frames[1..]);
        t.wake_waiters();
        self.bump(|s| {
            s.reads += 1;
            s.pages_read += got as u64;
            if !ok {
                s.errors += 1;
            }
        });
        if ok {
            Ok(Some(frames[0]))
        } else {
            pc.release_frames(&frames[..1]);
            Err(BlockUnreadable)
        }
    }
}

impl HashBlocks for TreeReader<'_> {
    fn with_block(
        &self,
        index: u64,
        f: &mut dyn FnMut(&[u8], bool) -> bool,
    ) -> Result<(), BlockUnreadable> {
        let t = self.t;
        let pc = &t.pc;
        let p = t.base + index;
        let use_frame = |fr: u32, f: &mut dyn FnMut(&[u8], bool) -> bool| {
            // SAFETY: the frame is pinned and holds tree page `index`
            // uptodate: no read writes it, eviction skips it.
            let data: &[u8] = unsafe { pc.frame(fr) };
            if f(data, pc.checked(fr)) {
                pc.set_checked(fr);
            }
        };
        loop {
            if let Some(fr) = pc.pin_uptodate(p) {
                use_frame(fr, f);
                pc.unpin(fr);
                return Ok(());
            }
            match pc.page(p).0 {
                Page::InFlight { .. } => self.wait_for(p),
                Page::Absent | Page::Error { .. } => {
                    if let Some(fr) = self.read(index)? {
                        use_frame(fr, f);
                        pc.release_frames(&[fr]);
                        return Ok(());
                    }
                }
                Page::Uptodate { .. } | Page::Evicting => std::hint::spin_loop(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::CipherKind;
    use crate::dataset::{
        DEFAULT_SEED, Dataset, VERITY_BLOCK_SIZE, Variant, fill_plaintext, tree_first_unit,
    };
    use crate::verity::merkle::VerifyError;

    /// 4 MiB: 1024 data blocks, a tree of one top page and 8 leaf pages
    /// (128 hashes each).
    const SIZE: u64 = 4 << 20;

    struct Setup {
        _dir: tempfile::TempDir,
        ds: Dataset,
    }

    fn dataset() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let ds = Dataset::prepare(dir.path(), SIZE, b"", DEFAULT_SEED, &mut |_, _| {}).unwrap();
        assert_eq!(ds.tree().hash_blocks(), 9);
        assert_eq!(ds.tree().leaf_level_start(), 1);
        Setup { _dir: dir, ds }
    }

    fn tree(s: &Setup, variant: Variant, capacity: usize) -> TreePages {
        let pc = Arc::new(PageCache::with_tree(1024, 9, capacity, 8, 1, 1).expect("a memfd"));
        let path = s.ds.tree_path(variant);
        let cipher = match variant {
            Variant::Cipher(k) => Some(Arc::new(s.ds.cipher(k))),
            Variant::Plain => None,
        };
        TreePages::new(
            pc,
            OpenFile {
                file: Arc::new(std::fs::File::open(&path).unwrap()),
                path,
                direct: false,
                map: None,
                mem: None,
            },
            cipher,
            tree_first_unit(SIZE),
            s.ds.tree().leaf_level_start(),
        )
    }

    fn block(b: u64) -> Vec<u8> {
        let mut v = vec![0u8; VERITY_BLOCK_SIZE];
        fill_plaintext(DEFAULT_SEED, b * VERITY_BLOCK_SIZE as u64, &mut v);
        v
    }

    /// Verifies data block `b` through a fresh reader: (hashes, what it read).
    fn verify(s: &Setup, t: &TreePages, b: u64, ra: usize) -> (u32, TreeStats) {
        let r = t.reader(None, ra, None);
        let st = s.ds.tree().verify_block_in(&r, b, &block(b)).unwrap();
        (st.hashes, r.stats())
    }

    #[test]
    fn cold_verify_reads_exactly_the_missing_tree_pages() {
        let s = dataset();
        for variant in [Variant::Cipher(CipherKind::Aes256Xts), Variant::Plain] {
            let t = tree(&s, variant, 64);
            // Cold: the leaf page and the top page are read, both hashed.
            let (h, st) = verify(&s, &t, 0, 1);
            assert_eq!((h, st.pages_read, st.reads), (3, 2, 2), "{variant:?}");
            // Its leaf page is cached and checked: only the data is hashed.
            let (h, st) = verify(&s, &t, 1, 1);
            assert_eq!((h, st.pages_read), (1, 0));
            // Another leaf page: read and hashed; the top page is checked.
            let (h, st) = verify(&s, &t, 128, 1);
            assert_eq!((h, st.pages_read), (2, 1));
            assert_eq!(t.pc.resident(), 3);
            // Dropped (`x`): the marks go with the pages; read, verified again.
            t.pc.drop_all();
            let (h, st) = verify(&s, &t, 1, 1);
            assert_eq!((h, st.pages_read), (3, 2));
        }
    }

    #[test]
    fn leaf_pages_are_read_ahead_and_each_is_verified_on_first_use() {
        let s = dataset();
        let t = tree(&s, Variant::Cipher(CipherKind::Aes256Xts), 64);
        // Readahead of 4 at the leaf level: leaf pages 1..=4 in one read,
        // the top page in another (no readahead above the leaves).
        let (h, st) = verify(&s, &t, 0, 4);
        assert_eq!((h, st.pages_read, st.reads), (3, 5, 2));
        // Leaf page 4 (blocks 384..512) is cached but not checked yet: no
        // read, its hash is checked against the (checked) top page.
        let (h, st) = verify(&s, &t, 3 * 128, 4);
        assert_eq!((h, st.pages_read), (2, 0));
        // Readahead stops at the first page already in the cache, and at
        // the end of the tree: block 5*128 reads leaf pages 6..=8 only.
        let (h, st) = verify(&s, &t, 5 * 128, 8);
        assert_eq!((h, st.pages_read, st.reads), (2, 3, 1));
    }

    #[test]
    fn an_evicted_hash_page_is_read_and_verified_again() {
        let s = dataset();
        // Tree pages are not held to the capacity (see
        // `PageCache::data_resident`): they go when frames run short, or
        // when the cache is dropped, as here.
        let t = tree(&s, Variant::Cipher(CipherKind::Aes256Xts), 2);
        verify(&s, &t, 0, 1);
        verify(&s, &t, 128, 1);
        assert_eq!(t.pc.resident(), 3, "the top page and two leaves");
        assert_eq!(t.pc.data_resident(), 0);
        assert_eq!(t.pc.drop_all(), 3);
        let mut reread = 0;
        for b in [0, 128, 256] {
            let (h, st) = verify(&s, &t, b, 1);
            reread += st.pages_read;
            // Whatever was read again was hashed again (never trusted).
            assert!(u64::from(h) > st.pages_read, "{b}: {h} hashes, {st:?}");
        }
        assert!(reread >= 2, "{reread}");
    }

    #[test]
    fn a_corrupted_tree_block_fails_exactly_the_reads_it_covers() {
        let s = dataset();
        let v = Variant::Cipher(CipherKind::Aes256Xts);
        // One byte of leaf page 3 (tree block 3: data blocks 256..384).
        let path = s.ds.tree_path(v);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[3 * 4096 + 100] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let t = tree(&s, v, 64);
        for b in 0..1024u64 {
            let r = t.reader(None, 1, None);
            let res = s.ds.tree().verify_block_in(&r, b, &block(b));
            if (256..384).contains(&b) {
                assert_eq!(
                    res,
                    Err(VerifyError::Mismatch {
                        block_index: b,
                        level: 0
                    }),
                    "{b}"
                );
            } else {
                assert!(res.is_ok(), "{b}: {res:?}");
            }
        }
        // The bad page stays unchecked, so every use re-hashes it.
        assert_eq!(t.pc.resident(), 9);
    }

    #[test]
    fn an_unreadable_tree_page_fails_the_read_and_is_read_again_next_time() {
        let s = dataset();
        let v = Variant::Cipher(CipherKind::Aes256Xts);
        let path = s.ds.tree_path(v);
        let full = std::fs::read(&path).unwrap();
        // Cut after leaf page 4: pages 5.. cannot be read.
        std::fs::write(&path, &full[..5 * 4096]).unwrap();
        let t = tree(&s, v, 64);
        let r = t.reader(None, 1, None);
        let res = s.ds.tree().verify_block_in(&r, 4 * 128, &block(4 * 128));
        assert!(
            matches!(
                res,
                Err(VerifyError::Unreadable {
                    hash_block: 5,
                    level: 0,
                    ..
                })
            ),
            "{res:?}"
        );
        assert_eq!(r.stats().errors, 1);
        // Repaired: the failed page is read again (and the top page, which
        // the walk up never reached).
        std::fs::write(&path, &full).unwrap();
        let (h, st) = verify(&s, &t, 4 * 128, 1);
        assert_eq!((h, st.pages_read), (3, 2));
    }
}
