//! The reader of a file read through the page cache, as ext4 and f2fs read
//! an encrypted or fs-verity file (`filemap_read`).
//!
//! Each application read looks its pages up in the model's
//! [`PageCache`]: an uptodate page is a hit (no post-read work); an
//! absent one starts readahead (`page_cache_sync_ra`), which builds bios
//! for the missing pages of the window; a page in flight is waited for (a
//! second reader of it causes no second bio); reaching the page marked
//! `PG_readahead` starts the next window asynchronously. A bio is one real
//! read of the ciphertext (an O_DIRECT `readv` into the cache's frames), or
//! with `cache.device = "memory"` no read at all (a no-op completion; its
//! first stage decrypts the pages from the mapped file into the frames, as
//! a device's DMA costs no CPU); when it completes the reader
//! hands it, as one work item, to the decrypt queue, which hands it on to
//! the verify queue (or verifies it in the same item), and the worker that
//! finishes it makes its pages uptodate and wakes every reader waiting on
//! one (`folio_end_read`). Once all of a read's pages are uptodate, the
//! copy to the application's buffer is the kernel's copy out of the frames
//! the model decrypted and verified (a `pread` of the cache's memfd), so
//! it costs what the kernel's copy costs and the application gets the
//! model's bytes (see [`Reader::copy`]). The reader's wait is an io_uring wait with the
//! eventfd read pending, so it sleeps as iowait (or not, with
//! `sleep = "plain"`), as `folio_wait_locked` does. Synchronous readers
//! read each bio with a blocking `preadv` and then wait (parked) for its
//! post-read work.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::metrics::{Span, SpanKind, Stage, ThreadHandle, now_ns, stamp};
use crate::settings::SleepMode;
use crate::sys::{EMPTY_IOVEC, IoVec};

use super::backend::{Backend, MAX_WAIT_NS, Op, Queued, Sync, Uring, failure};
use super::pagecache::{Lookup, MAX_BIO_PAGES, PAGE, Page, PageCache, Readahead, Window, seq_key};
use super::queue::{NO_PWQ, ReaderWaker, WorkItem};
use super::reader::{Io, Owner};
use super::source::Source;
use super::stages::Ctx;

/// Most reads one pass finishes (hits finish without waiting).
const PASS_BUDGET: u32 = 256;

/// Readahead windows (or the unbuilt rest of one) a reader keeps while no
/// bio slot or frame is free: a stream has at most one or two waiting (the
/// next mark is in the window not yet built), so this is ample.
const PENDING_RA: usize = 16;

/// user_data bit of a bio read (the rest: the reader's bio slot).
const BIO_TAG: u64 = 1 << 62;

/// One application read in flight.
#[derive(Clone, Copy, Default)]
struct AppRead {
    active: bool,
    offset: u64,
    issue_ns: u64,
    /// Pages copied so far.
    done: u32,
    /// The bio (sequence, cut as pages store it) this read waits for; 0: none.
    wait_seq: u64,
    /// Failed: 1 verification, 2 I/O.
    failed: u8,
}

/// The runs of consecutive frames in `frames` (a read's pages in order):
/// (index of the run's first page, its first frame, pages), one `pread`
/// of the frames' memfd each.
fn frame_runs(frames: &[u32]) -> impl Iterator<Item = (usize, u32, usize)> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let &f = frames.get(at)?;
        let start = at;
        at += 1;
        while frames
            .get(at)
            .is_some_and(|&g| u64::from(g) == u64::from(f) + (at - start) as u64)
        {
            at += 1;
        }
        Some((start, f, at - start))
    })
}

/// What progressing a read came to.
#[derive(PartialEq, Eq)]
enum Step {
    Done,
    Waiting,
    /// No bio slot or frame free: tried again on the next pass.
    Blocked,
}

/// One of this reader's bios.
#[derive(Clone, Copy, Default)]
struct LocalBio {
    in_use: bool,
    submit_ns: u64,
    npages: u32,
}

/// The reader's bios, as a guard: however the reader's loop ends, once the
/// ring and the owner have drained (they drop first), a bio whose pages are
/// still in flight (its completion was reaped by the drain, not processed)
/// is failed, so no page stays in flight in a cache that outlives the
/// pipeline, and its frames go back.
struct Bios {
    pc: Arc<PageCache>,
    base: u32,
    slots: Vec<LocalBio>,
    free: Vec<u32>,
    /// iovecs of every slot (MAX_BIO_PAGES each), stable for the kernel.
    iov: Box<[IoVec]>,
}

impl Drop for Bios {
    fn drop(&mut self) {
        for (k, b) in self.slots.iter().enumerate() {
            if !b.in_use {
                continue;
            }
            let g = self.base + k as u32;
            let bio = self.pc.bio(g);
            let first = bio.first_page.load(Ordering::Relaxed);
            let seq = seq_key(bio.seq.load(Ordering::Relaxed));
            let n = bio.npages.load(Ordering::Relaxed) as u64;
            let still = (first..first + n).any(|p| {
                matches!(self.pc.page(p).0, Page::InFlight { bio, seq: s } if bio == g && s == seq)
            });
            if still {
                self.pc.end_bio(g, false, true, |_| {});
            }
            self.pc.release(g);
        }
    }
}

struct Reader<'c> {
    ctx: &'c Ctx,
    pc: &'c PageCache,
    index: usize,
    block: usize,
    pages_per_read: u32,
    reads: Vec<AppRead>,
    bios: Bios,
    ra: Readahead,
    src: Source,
    /// Bios built and not yet handed to the device.
    to_submit: Vec<u32>,
    /// The cache's frames as a file (a memfd): the application's copy is
    /// a read of it, see [`Reader::copy`].
    frames_fd: i32,
    /// The frames a read's copy pins (`pages_per_read`), only while
    /// [`Reader::copy`] runs.
    pins: Vec<u32>,
    frames_tmp: Vec<u32>,
    /// Local bios whose post-read work ended, not yet released (see
    /// [`Reader::settle`]).
    ended: Vec<u32>,
    /// Something changed this pass (a read finished or advanced).
    progressed: bool,
    /// Readahead windows decided (`Readahead::on_mark` or `sync` already
    /// advanced the window) but not yet built for want of a bio slot or a
    /// frame, oldest first, with whether they are async readahead: built
    /// before any new synchronous work, as soon as slots and frames free
    /// up. The kernel submits every window whole (`read_pages`).
    pending: [(Window, bool); PENDING_RA],
    npending: usize,
    /// Counts for `Counters::ra_deferred` / `ra_dropped`, added to the
    /// recorder each pass.
    ra_deferred: u64,
    ra_dropped: u64,
}

impl Reader<'_> {
    /// Builds the bios of `w` (async: started by readahead, no reader waits
    /// yet): runs of consecutive pages absent or failed, one bio each, up
    /// to BIO_MAX_VECS pages. Returns the page it stopped at for want of a
    /// bio slot or a frame (the window's end: all of it is built or held).
    fn build_bios(&mut self, w: Window, is_async: bool) -> u64 {
        let end = self.window_end(w);
        let mut p = w.start;
        while p < end {
            let claimable = |p: u64| matches!(self.pc.page(p).0, Page::Absent | Page::Error { .. });
            if !claimable(p) {
                p += 1;
                continue;
            }
            // A bio stops where the blocks stop being contiguous on the
            // device (as ext4_mpage_readpages submits one there).
            let most = self
                .ctx
                .file
                .contiguous_pages(p, MAX_BIO_PAGES as u64)
                .max(1);
            let mut run = 1u64;
            while p + run < end && run < most && claimable(p + run) {
                run += 1;
            }
            let Some(k) = self.bios.free.pop() else {
                return p; // no bio slot: the rest waits
            };
            let g = self.bios.base + k;
            self.frames_tmp.clear();
            self.frames_tmp.resize(run as usize, 0);
            let got = self.pc.take_frames(&mut self.frames_tmp);
            let seq = self.pc.next_seq();
            let mut n = 0usize;
            while n < got
                && self
                    .pc
                    .claim(p + n as u64, g, seq, w.mark == Some(p + n as u64))
            {
                n += 1;
            }
            self.pc.return_frames(&self.frames_tmp[n..got]);
            if n == 0 {
                self.bios.free.push(k);
                if got == 0 {
                    return p; // no frame: the rest waits
                }
                p += 1;
                continue;
            }
            let bio = self.pc.bio(g);
            bio.first_page.store(p, Ordering::Relaxed);
            bio.npages.store(n as u32, Ordering::Relaxed);
            bio.seq.store(seq, Ordering::Relaxed);
            bio.readahead_async.store(is_async, Ordering::Relaxed);
            let mark = w.mark.filter(|&m| m >= p && m < p + n as u64);
            bio.mark_page
                .store(mark.unwrap_or(u64::MAX), Ordering::Relaxed);
            let iov = &mut self.bios.iov[k as usize * MAX_BIO_PAGES..][..n];
            for (i, f) in self.frames_tmp[..n].iter().enumerate() {
                bio.frames[i].store(*f, Ordering::Relaxed);
                // SAFETY: the frame is this bio's, in flight: only the
                // kernel's read and then the bio's work item touch it.
                let base = unsafe { self.pc.frame_mut(*f) }.as_mut_ptr();
                iov[i] = IoVec {
                    iov_base: base.cast(),
                    iov_len: PAGE,
                };
            }
            self.bios.slots[k as usize] = LocalBio {
                in_use: true,
                submit_ns: 0,
                npages: n as u32,
            };
            self.to_submit.push(k);
            p += n as u64;
        }
        end
    }

    /// The page after window `w`, within the file.
    fn window_end(&self, w: Window) -> u64 {
        let file_pages = self.pc.file_pages() as u64;
        (w.start + w.size)
            .min(file_pages)
            .max(w.start.min(file_pages))
    }

    /// `w` from page `from` on (its mark only if not already placed).
    fn rest(&self, w: Window, from: u64) -> Window {
        Window {
            start: from,
            size: self.window_end(w) - from,
            mark: w.mark.filter(|&m| m >= from),
        }
    }

    /// Reads window `w` (readahead's decision, already taken): builds its
    /// bios now, and what finds no bio slot or frame waits in the pending
    /// list, never dropped.
    fn read_window(&mut self, w: Window, is_async: bool) {
        if self.npending > 0 {
            // Older windows first: they are nearer the stream's reads.
            self.build_pending();
        }
        let stop = if self.npending > 0 {
            w.start.min(self.window_end(w))
        } else {
            self.build_bios(w, is_async)
        };
        if stop < self.window_end(w) {
            self.ra_deferred += 1;
            if self.npending == PENDING_RA {
                self.ra_dropped += 1;
                return;
            }
            self.pending[self.npending] = (self.rest(w, stop), is_async);
            self.npending += 1;
        }
    }

    /// Builds the pending windows, oldest first, as far as bio slots and
    /// frames allow.
    fn build_pending(&mut self) {
        while self.npending > 0 {
            let (w, is_async) = self.pending[0];
            let stop = self.build_bios(w, is_async);
            if stop < self.window_end(w) {
                self.pending[0].0 = self.rest(w, stop);
                return;
            }
            self.pending.copy_within(1..self.npending, 0);
            self.npending -= 1;
        }
    }

    /// Page `p` is in a pending window.
    fn pending_has(&self, p: u64) -> bool {
        self.pending[..self.npending]
            .iter()
            .any(|(w, _)| p >= w.start && p < w.start + w.size)
    }

    fn async_ra(&mut self, index: u64, req: u64) {
        let pc = self.pc;
        if let Some(w) = self
            .ra
            .on_mark(index, req, |p| p >= pc.file_pages() as u64 || pc.present(p))
        {
            self.read_window(w, true);
        }
    }

    /// Moves read `i` on as far as the cache allows.
    fn step(&mut self, i: usize) -> Step {
        let first = self.reads[i].offset / PAGE as u64;
        let n = self.pages_per_read;
        let mut blocked_at = u32::MAX;
        while self.reads[i].done < n {
            let r = self.reads[i];
            let p = first + r.done as u64;
            let req = u64::from(n - r.done);
            match self.pc.lookup(p) {
                Lookup::Hit { marked } => {
                    if marked {
                        self.async_ra(p, req);
                    }
                    self.reads[i].done += 1;
                    self.progressed = true;
                }
                Lookup::Miss(page, flag) => match page {
                    Page::InFlight { bio, seq } => {
                        if flag && self.pc.take_mark(p) {
                            self.async_ra(p, req);
                        }
                        self.pc.add_waiter(bio, self.index);
                        if self.pc.page(p).0 == page {
                            self.reads[i].wait_seq = seq;
                            return Step::Waiting;
                        }
                    }
                    Page::Error { seq } if seq == r.wait_seq && r.wait_seq != 0 => {
                        self.reads[i].failed = if flag { 2 } else { 1 };
                        return Step::Done;
                    }
                    Page::Absent | Page::Error { .. } => {
                        if blocked_at == r.done {
                            return Step::Blocked;
                        }
                        blocked_at = r.done;
                        if self.pending_has(p) {
                            // Readahead already decided this page: build
                            // that window (or wait for a slot), no new one.
                            self.build_pending();
                            continue;
                        }
                        let pc = self.pc;
                        let w = self.ra.sync(p, req, |q| pc.present(q));
                        self.read_window(w, false);
                    }
                    Page::Uptodate { .. } | Page::Evicting => {}
                },
            }
        }
        Step::Done
    }

    /// Starts a new read in free slot `i`; false when the rate schedule
    /// says not yet (the time it is due goes to `due`).
    fn start(&mut self, i: usize, due: &mut Option<u64>) -> bool {
        let issue_ns = match &mut self.src.schedule {
            None => stamp(),
            Some(sch) => match sch.due(now_ns()) {
                Some(t) => t,
                None => {
                    *due = Some(sch.next_ns);
                    return false;
                }
            },
        };
        self.reads[i] = AppRead {
            active: true,
            offset: self.src.offsets.next(),
            issue_ns,
            ..AppRead::default()
        };
        true
    }

    /// The copy of read `i`'s pages into the application's buffer, which
    /// the kernel makes on a buffered read once its pages are uptodate
    /// (`filemap_read` -> `copy_folio_to_iter`): from the frames the model
    /// just decrypted and verified, by the kernel, as a read of the frames'
    /// memfd (one per run of consecutive frames), so it costs what the
    /// kernel's copy costs (the syscall, the lookup of the memfd's pages,
    /// `copy_to_user`) and the application gets the bytes the model
    /// produced. The frames are pinned for the copy (as `filemap_get_pages`
    /// holds its folios' references), so no bio takes them meanwhile, and
    /// unpinned before it returns. False: a page was evicted since its
    /// lookup, and the read goes back to look it up again (nothing copied,
    /// nothing left pinned). Both engines copy with `pread`: io_uring would
    /// hand a read of a memfd to its io-wq threads (shmem reads do not
    /// take `IOCB_NOWAIT`), a thread hop per copy that the kernel's
    /// buffered read of a cached page does not take.
    fn copy(&mut self, owner: &Owner<'_>, i: usize) -> bool {
        let first = self.reads[i].offset / PAGE as u64;
        for k in 0..self.pins.len() {
            match self.pc.pin_looked_up(first + k as u64) {
                Some(f) => self.pins[k] = f,
                None => {
                    for &f in &self.pins[..k] {
                        self.pc.unpin(f);
                    }
                    self.reads[i].done = k as u32;
                    return false;
                }
            }
        }
        let buf = owner.slot(i);
        let mut ok = true;
        for (at, f, len) in frame_runs(&self.pins) {
            // SAFETY: `buf` is slot i's `block` bytes, this reader's own,
            // and `at + len` pages lie inside it.
            let got = unsafe {
                crate::sys::pread_raw(
                    self.frames_fd,
                    buf.add(at * PAGE),
                    len * PAGE,
                    u64::from(f) * PAGE as u64,
                )
            };
            ok &= got == (len * PAGE) as isize;
        }
        for &f in &self.pins {
            self.pc.unpin(f);
        }
        if !ok {
            self.reads[i].failed = 2;
        } else if let Some((c, plain)) = &self.ctx.copy_check {
            let at = self.reads[i].offset as usize;
            // SAFETY: slot i's `block` bytes, just written by the copy.
            let got = unsafe { std::slice::from_raw_parts(buf, self.block) };
            c.reads.fetch_add(1, Ordering::Relaxed);
            if plain.bytes().get(at..at + self.block) != Some(got) {
                c.wrong.fetch_add(1, Ordering::Relaxed);
            }
        }
        true
    }

    fn finish(&mut self, h: &mut ThreadHandle, i: usize) {
        let r = self.reads[i];
        self.reads[i].active = false;
        self.progressed = true;
        match r.failed {
            0 => {
                h.rec.counters.reads += 1;
                h.rec.counters.bytes += self.block as u64;
                h.rec
                    .record(Stage::EndToEnd, stamp().saturating_sub(r.issue_ns));
            }
            1 => h.rec.counters.verity_failures += 1,
            _ => h.rec.counters.io_errors += 1,
        }
        self.ra.read_done(r.offset + self.block as u64);
    }

    /// One pass over the reads: finish what can finish, start new reads in
    /// the free slots (unless stopping). Returns when the next is due.
    fn pass(&mut self, owner: &Owner<'_>, h: &mut ThreadHandle, stopping: bool) -> Option<u64> {
        let mut due = None;
        h.rec.counters.ra_deferred += std::mem::take(&mut self.ra_deferred);
        h.rec.counters.ra_dropped += std::mem::take(&mut self.ra_dropped);
        // Readahead that waited for a bio slot or frame goes before any new
        // synchronous work (not at a stop: nothing new is submitted then).
        if !stopping && self.npending > 0 {
            self.build_pending();
        }
        // Reads served from the cache finish at once: a bounded number per
        // pass, so the loop gets back to its handoff and stop checks.
        let mut budget = PASS_BUDGET;
        for i in 0..self.reads.len() {
            loop {
                if budget == 0 {
                    self.progressed = true;
                    return due;
                }
                if !self.reads[i].active && (stopping || due.is_some() || !self.start(i, &mut due))
                {
                    break;
                }
                match self.step(i) {
                    Step::Done => {
                        budget -= 1;
                        if self.reads[i].failed == 0 && !self.copy(owner, i) {
                            continue; // a page went: looked up again
                        }
                        self.finish(h, i);
                    }
                    Step::Waiting | Step::Blocked => break,
                }
            }
        }
        due
    }

    /// The device read of local bio `k` completed with `res`: hand it to
    /// post-read work. True when it was processed here (inline).
    fn bio_read(&mut self, h: &mut ThreadHandle, k: u32, res: i64, t: u64) -> bool {
        let lb = self.bios.slots[k as usize];
        let g = self.bios.base + k;
        let bio = self.pc.bio(g);
        let first = bio.first_page.load(Ordering::Relaxed);
        let len = lb.npages as usize * PAGE;
        h.rec.record(Stage::Device, t.saturating_sub(lb.submit_ns));
        let memory = self.ctx.file.mem.is_some();
        let res = if memory && res >= 0 { len as i64 } else { res };
        if res != len as i64 {
            if !self.src.io_error_noticed {
                self.src.io_error_noticed = true;
                self.ctx.notices.push(format!(
                    "reader-{}: bio at offset {} failed: {}",
                    self.index,
                    first * PAGE as u64,
                    failure(res)
                ));
            }
            self.pc
                .end_bio(g, false, true, |r| self.ctx.returns[r].poke());
            return true;
        }
        h.rec.counters.bios += 1;
        h.rec.counters.bio_bytes += len as u64;
        if bio.readahead_async.load(Ordering::Relaxed) {
            h.rec.counters.readahead_async += 1;
        }
        let mut unfilled = memory;
        if self.ctx.settings.pipeline.corrupt_every > 0 {
            if unfilled {
                self.ctx.fill_bio(g);
                unfilled = false;
            }
            let f = bio.frames[0].load(Ordering::Relaxed);
            // SAFETY: the frame is this bio's, its read complete, not yet
            // handed to a worker.
            self.src.corrupt.apply(unsafe { self.pc.frame_mut(f) }, h);
        }
        let item = WorkItem {
            buf: std::ptr::null_mut(),
            len: len as u32,
            reader: self.index as u32,
            slot: k,
            offset: first * PAGE as u64,
            issue_ns: lb.submit_ns,
            enqueue_ns: 0,
            queued_cpu: 0,
            pwq: NO_PWQ,
            needs_decrypt: self.ctx.plan.decrypt,
            bio: g,
            unfilled,
        };
        self.ctx.dispatch(&mut h.rec, item)
    }

    /// The top of a reader's loop: hands over the recorder when asked,
    /// takes back the bios the workers finished (their reads copy first),
    /// and says whether the pipeline is stopping.
    fn turn(&mut self, owner: &mut Owner<'_>, h: &mut ThreadHandle) -> bool {
        h.tick();
        self.progressed = false;
        let stopping = self.ctx.stop_readers.load(Ordering::Relaxed);
        let ret = &self.ctx.returns[self.index];
        let _ = ret.take_poke();
        while let Some(k) = ret.pop() {
            owner.at_workers -= 1;
            self.bio_done(k);
        }
        self.settle(owner, h, stopping);
        stopping
    }

    /// Local bio `k`'s post-read work ended (at a worker or inline): its
    /// pages are uptodate or failed; [`Self::settle`] releases it.
    fn bio_done(&mut self, k: u32) {
        self.ended.push(k);
        self.progressed = true;
    }

    /// Once for every batch of ended bios: the reads waiting on them move
    /// on first (one pass, while the bios still pin their pages, so a
    /// cache too small to keep them cannot evict them under their own
    /// readers), then the bios' pins go and their slots are free.
    fn settle(&mut self, owner: &Owner<'_>, h: &mut ThreadHandle, stopping: bool) {
        if self.ended.is_empty() {
            return;
        }
        self.pass(owner, h, stopping);
        while let Some(k) = self.ended.pop() {
            self.pc.release(self.bios.base + k);
            self.bios.slots[k as usize].in_use = false;
            self.bios.free.push(k);
        }
    }
}

/// Runs reader `index` of a page-cache pipeline.
pub fn run(ctx: &Arc<Ctx>, index: usize, mut h: ThreadHandle) -> std::io::Result<()> {
    let s = &ctx.settings;
    let pc = ctx.pcache.clone().expect("a page-cache pipeline");
    let depth = super::reader::buffers_per_reader(s);
    let nbios = ctx.bios_per_reader;
    let block = s.workload.block_size as usize;
    let bios = Bios {
        pc: pc.clone(),
        base: (index * nbios) as u32,
        slots: vec![LocalBio::default(); nbios],
        free: (0..nbios as u32).rev().collect(),
        iov: vec![EMPTY_IOVEC; nbios * MAX_BIO_PAGES].into_boxed_slice(),
    };
    let mut r = Reader {
        ctx,
        pc: &pc,
        index,
        block,
        pages_per_read: (block / PAGE) as u32,
        reads: vec![AppRead::default(); depth],
        bios,
        ra: Readahead::new(s.cache.read_ahead),
        src: Source::new(s, index, &ctx.streams),
        to_submit: Vec::with_capacity(nbios),
        frames_fd: pc.frames_fd(),
        pins: vec![0; block / PAGE],
        frames_tmp: Vec::with_capacity(MAX_BIO_PAGES),
        ended: Vec::with_capacity(nbios),
        progressed: false,
        pending: [(
            Window {
                start: 0,
                size: 0,
                mark: None,
            },
            false,
        ); PENDING_RA],
        npending: 0,
        ra_deferred: 0,
        ra_dropped: 0,
    };
    let fd = ctx.file.file.as_raw_fd();
    let entries = ((nbios + 1) as u32).next_power_of_two();
    // `io` is dropped before `r.bios` (declared above): every read in the
    // kernel completes and every item comes back before the bios are
    // failed and released. The return queue's waker is the engine's.
    match ctx.returns[index].waker() {
        ReaderWaker::EventFd(efd) => {
            let b = Uring::new(fd, entries, s.ring(), efd)?;
            let io = Io::new(b, Owner::new(ctx, index, depth, block));
            cached(ctx, &mut r, io, &mut h, entries)
        }
        ReaderWaker::Park(t) => {
            let io = Io::new(Sync::new(fd, t), Owner::new(ctx, index, depth, block));
            cached(ctx, &mut r, io, &mut h, entries)
        }
    }
}

/// The loop of a page-cache reader, on either backend.
fn cached<B: Backend>(
    ctx: &Ctx,
    r: &mut Reader<'_>,
    mut io: Io<'_, B>,
    h: &mut ThreadHandle,
    entries: u32,
) -> std::io::Result<()> {
    let s = &ctx.settings;
    let poll = s.workload.sleep == SleepMode::Poll;
    let ret = &ctx.returns[r.index];
    loop {
        let stopping = r.turn(&mut io.owner, h);
        if stopping && io.owner.in_device == 0 && io.owner.at_workers == 0 {
            break;
        }
        let due = r.pass(&io.owner, h, stopping);
        // Hand the bios built so far to the device. A blocking backend
        // reads each now, and the reads they finish start new reads whose
        // bios wait for the next turn, so the loop gets back to its
        // handoff and stop checks.
        let cpu = ctx.irqs.as_ref().map(|_| crate::sys::current_cpu());
        let queued = r.to_submit.len();
        for j in 0..queued {
            let k = r.to_submit[j];
            let n = r.bios.slots[k as usize].npages;
            let t = stamp();
            r.bios.slots[k as usize].submit_ns = t;
            let g = r.bios.base + k;
            let first = r.pc.bio(g).first_page.load(Ordering::Relaxed);
            let iov = r.bios.iov[k as usize * MAX_BIO_PAGES..].as_ptr();
            if let (Some(irqs), Some(cpu)) = (&ctx.irqs, cpu) {
                // Submitted and completed by the CPU's irq thread; the slot
                // comes back through the return queue, like a worker's.
                irqs.line_for(cpu).submit(super::irq::BioReq {
                    bio: g,
                    reader: r.index as u32,
                    slot: k,
                    iov,
                    npages: n,
                    offset: first * PAGE as u64,
                    submit_ns: t,
                });
                io.owner.at_workers += 1;
                continue;
            }
            // The memory device: no read (the post-read work fills the
            // pages from the mapping); it completes at once, with 0.
            let op = if ctx.file.mem.is_some() {
                Op::Nop
            } else {
                Op::Readv {
                    iov,
                    n,
                    offset: ctx.file.device_offset(first * PAGE as u64),
                }
            };
            // SAFETY: the iovecs and the frames they point to belong to this
            // bio until its completion is reaped (the iovecs live in
            // `r.bios`, which outlives `io`; the frames in the cache).
            if let Queued::Done(res) = unsafe { io.queue(BIO_TAG | u64::from(k), op) } {
                if r.bio_read(h, k, res, stamp()) {
                    r.bio_done(k);
                } else {
                    io.owner.at_workers += 1;
                }
            }
        }
        r.to_submit.drain(..queued);
        // Bios a blocking backend read and processed here move their
        // readers on now.
        r.settle(&io.owner, h, stopping);
        if r.progressed && io.owner.in_device == 0 {
            io.submit()?;
            continue;
        }
        let wait_ns = match due {
            Some(t) => t.saturating_sub(now_ns()).min(MAX_WAIT_NS),
            None => MAX_WAIT_NS,
        };
        if poll {
            io.poll(wait_ns, || ret.has_returns() || ret.take_poke())?;
        } else if r.progressed {
            io.submit()?;
        } else {
            // The page wait: an io_uring wait with the eventfd read pending
            // (iowait, as folio_wait_locked's io_schedule), woken by a worker
            // that ends a bio this reader waits for; a blocking reader parks.
            if ret.prepare_sleep() {
                let slept = stamp();
                let res = io.wait(wait_ns);
                ret.end_sleep();
                h.rec
                    .span(|| Span::here(SpanKind::Sleep, slept).ended(stamp()));
                res?;
            } else {
                io.submit()?;
            }
        }
        for _ in 0..entries {
            let Some((ud, res)) = io.reap() else {
                break;
            };
            let k = (ud & !BIO_TAG) as u32;
            if r.bio_read(h, k, res, stamp()) {
                r.bio_done(k);
            } else {
                io.owner.at_workers += 1;
            }
        }
        r.settle(&io.owner, h, stopping);
        io.b.rearm();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::frame_runs;

    #[test]
    fn a_reads_frames_split_into_runs_of_consecutive_frames() {
        let runs = |f: &[u32]| frame_runs(f).collect::<Vec<_>>();
        assert_eq!(runs(&[]), vec![]);
        assert_eq!(runs(&[7]), vec![(0, 7, 1)]);
        assert_eq!(runs(&[4, 5, 6, 7]), vec![(0, 4, 4)]);
        assert_eq!(
            runs(&[4, 5, 9, 10, 11, 3, 2, 2]),
            vec![(0, 4, 2), (2, 9, 3), (5, 3, 1), (6, 2, 1), (7, 2, 1)]
        );
        assert_eq!(runs(&[u32::MAX - 1, u32::MAX]), vec![(0, u32::MAX - 1, 2)]);
    }
}
