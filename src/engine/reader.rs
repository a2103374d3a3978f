//! The direct read loop (no page-cache model): issue reads, reap
//! completions, hand them to post-processing. One loop, generic over the
//! I/O backend (`backend.rs`: io_uring, or blocking `pread`), as the page
//! cache's loop in `cached.rs` and the irq threads' in `irq_thread.rs`
//! are; the buffers a reader hands the kernel are owned here ([`Owner`],
//! [`Io`]) so that none is freed while a read or a worker may still write
//! it.
//!
//! A reader stands for the CPU where storage completions land: it reaps each
//! completion, notes the CPU it ran on, and dispatches the block to the
//! workqueue of that CPU (bound), to the shared queue (unbound), or processes
//! it itself (inline). It owns `queue_depth` aligned buffers; a buffer is
//! reused only after post-processing gives it back, so the depth is the number
//! of reads in flight end to end, as for an application whose io_uring
//! completion arrives only once the data is decrypted and verified.
//!
//! Reads are handed to the kernel `workload.submit_batch` at a time (1, the
//! default, as fio does: each as soon as its buffer is free), and whatever is
//! left goes with the wait. Completions are reaped one at a time, and a
//! buffer freed by inline processing gets its next read before the next
//! completion is reaped (fio's `iodepth_batch_complete_max=1`), so a
//! completion waiting to be reaped counts in the device stage and every
//! buffer is either in the device or being processed: the end-to-end mean
//! equals queue_depth / IOPS (Little's law), as fio's lat does. The ring is
//! set up with `IORING_SETUP_TASKRUN_FLAG`, so a submission also runs the
//! deferred completions when some are pending.
//!
//! How the reader sleeps is the `workload.sleep` setting: `iowait` (the
//! kernel's default io_uring wait, and always for pread), `plain` (an
//! io_uring wait with `IORING_ENTER_NO_IOWAIT`) or `poll` (spin on the
//! completion queue, never sleep). While it waits only for workers, an
//! eventfd read armed on the ring wakes it, so the wait is the same io_uring
//! wait in every case.

use std::alloc::Layout;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use crate::metrics::{Span, SpanKind, Stage, ThreadHandle, now_ns, stamp};
use crate::settings::{EngineKind, Settings, SleepMode};

use super::backend::{Backend, MAX_WAIT_NS, Op, Queued, Sync, Uring, failure};
use super::queue::{NO_PWQ, ReaderWaker, ReturnQueue, WorkItem};
use super::source::Source;
use super::stages::Ctx;

/// Buffers (reads in flight, end to end) of each reader.
pub fn buffers_per_reader(s: &Settings) -> usize {
    super::resolve::in_flight(s) as usize
}

/// Bio slots of each reader when reads go through the page cache: one per
/// read in flight, plus two for async readahead and a window split by a
/// page already present.
pub fn bios_per_reader(s: &Settings) -> usize {
    buffers_per_reader(s) + 2
}

/// The return path of one reader, with the waker its engine needs.
pub fn new_return_queue(s: &Settings, n: usize) -> std::io::Result<Arc<ReturnQueue>> {
    let n = n.max(bios_per_reader(s));
    let waker = match s.workload.engine {
        EngineKind::Uring => ReaderWaker::EventFd(crate::sys::EventFd::new()?),
        EngineKind::Sync => ReaderWaker::Park(OnceLock::new()),
    };
    Ok(Arc::new(ReturnQueue::new(n, waker)))
}

/// Page-aligned read buffers (O_DIRECT needs alignment). Owned by one
/// reader; only ever freed through an [`Owner`], which first makes sure no
/// read is in the kernel and no item is at a worker.
struct Buffers {
    ptr: *mut u8,
    layout: Layout,
    block: usize,
}

impl Buffers {
    fn new(n: usize, block: usize) -> Buffers {
        let layout = Layout::from_size_align(n * block, 4096).expect("valid buffer layout");
        // SAFETY: layout has non-zero size (n >= 1, block >= 4096).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Buffers { ptr, layout, block }
    }

    fn slot(&self, i: usize) -> *mut u8 {
        // SAFETY: callers pass i < n, so the offset stays inside the allocation.
        unsafe { self.ptr.add(i * self.block) }
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout. A `Buffers` is only
        // dropped by its `Owner`, after the kernel and the workers are done
        // with every slot (or it is leaked instead: see `Owner::drop`).
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// Longest a stopping reader waits for the workers to give its buffers
/// back before it leaks them rather than free memory a worker may still
/// write (a worker that died would otherwise hang the reader for ever).
const RETURN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The owner of a reader's buffers and of the counts that say who uses
/// them. However the reader's loop ends (done, an error returned early, a
/// panic), dropping the owner first completes every read still in the
/// kernel (through [`Io`], which drains its backend) and waits until every
/// item came back from the workers; only then are the buffers freed. When
/// that cannot be established they are leaked, never freed under a user.
pub(super) struct Owner<'a> {
    bufs: Option<Buffers>,
    /// Reads pushed to the ring whose completion was not reaped.
    pub(super) in_device: usize,
    /// Items handed to a workqueue and not given back.
    pub(super) at_workers: usize,
    ret: &'a ReturnQueue,
    ctx: &'a Ctx,
    index: usize,
    /// Set by the loop when it ends with an error: the drain reports it.
    pub(super) failed: bool,
    /// (in the kernel, at the workers) when the loop ended, before draining.
    stopped_with: Option<(usize, usize)>,
}

impl<'a> Owner<'a> {
    pub(super) fn new(ctx: &'a Ctx, index: usize, n: usize, block: usize) -> Owner<'a> {
        ctx.buffers_alive[index].store(true, Ordering::Release);
        Owner {
            bufs: Some(Buffers::new(n, block)),
            in_device: 0,
            at_workers: 0,
            ret: &ctx.returns[index],
            ctx,
            index,
            failed: false,
            stopped_with: None,
        }
    }

    pub(super) fn slot(&self, i: usize) -> *mut u8 {
        self.bufs.as_ref().expect("buffers live until drop").slot(i)
    }

    /// Takes back the buffers the workers returned; the slots, to `free`.
    pub(super) fn take_returns(&mut self, mut free: impl FnMut(u32)) {
        while let Some(slot) = self.ret.pop() {
            self.at_workers -= 1;
            free(slot);
        }
    }
}

impl Drop for Owner<'_> {
    fn drop(&mut self) {
        let (device, workers) = *self
            .stopped_with
            .get_or_insert((self.in_device, self.at_workers));
        // Reads in the kernel were completed by `Io` (dropped
        // before this); if it could not, `in_device` is still > 0.
        let start = std::time::Instant::now();
        while self.at_workers > 0 && start.elapsed() < RETURN_TIMEOUT {
            self.take_returns(|_| {});
            if self.at_workers > 0 {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        let clean = self.in_device == 0 && self.at_workers == 0;
        if clean {
            self.ctx.buffers_alive[self.index].store(false, Ordering::Release);
            drop(self.bufs.take());
        } else {
            // Someone may still write into them: never free, leak.
            std::mem::forget(self.bufs.take());
        }
        if self.failed || !clean {
            self.ctx.notices.push(format!(
                "reader-{}: stopped with {device} reads in the kernel and {workers} items at the workers; {}",
                self.index,
                if clean {
                    "all came back before its buffers were freed".to_string()
                } else {
                    format!(
                        "{} reads and {} items never came back: its buffers were leaked, not freed",
                        self.in_device, self.at_workers
                    )
                }
            ));
        }
    }
}

/// A reader's backend and the buffers its reads land in. Dropped (on any
/// exit from the loop, an early error or a panic included), it first
/// drains the backend (every read still in the kernel completes, and the
/// armed eventfd read); then its [`Owner`] waits for the workers.
pub(super) struct Io<'a, B: Backend> {
    pub(super) b: B,
    pub(super) owner: Owner<'a>,
    /// Submissions so far (for the injected failure).
    submits: u64,
}

impl<'a, B: Backend> Io<'a, B> {
    pub(super) fn new(b: B, owner: Owner<'a>) -> Io<'a, B> {
        Io {
            b,
            owner,
            submits: 0,
        }
    }

    /// Queues `op` (see [`Backend::queue`]), counting it in the device
    /// until it is reaped.
    ///
    /// # Safety
    /// As [`Backend::queue`]: the memory `op` names is the reader's until
    /// the read is reaped or drained.
    #[inline]
    pub(super) unsafe fn queue(&mut self, tag: u64, op: Op) -> Queued {
        // SAFETY: the caller's promise, passed on.
        let q = unsafe { self.b.queue(tag, op) };
        if q == Queued::InKernel {
            self.owner.in_device += 1;
        }
        q
    }

    /// The next completion, as (tag, result).
    #[inline]
    pub(super) fn reap(&mut self) -> Option<(u64, i64)> {
        let c = self.b.reap();
        if c.is_some() {
            self.owner.in_device -= 1;
        }
        c
    }

    /// Hands what is queued to the kernel. Tests inject a failure with
    /// reads in the device and items at the workers
    /// (`Faults::fail_submit_when_busy`). An error marks the loop failed
    /// (the drain reports it).
    pub(super) fn submit(&mut self) -> std::io::Result<()> {
        self.submits += 1;
        let o = &self.owner;
        let r = if o.ctx.faults.fail_submit_when_busy
            && self.submits > 64
            && o.in_device > 1
            && o.at_workers > 0
        {
            Err(std::io::Error::other("injected submission failure"))
        } else {
            self.b.submit()
        };
        if r.is_err() {
            self.owner.failed = true;
        }
        r
    }

    /// Submits, then spins (`workload.sleep = "poll"`: never sleeps) until
    /// a completion is ready, `woken` says the workers gave something
    /// back, or `wait_ns` passed.
    pub(super) fn poll(
        &mut self,
        wait_ns: u64,
        mut woken: impl FnMut() -> bool,
    ) -> std::io::Result<()> {
        self.submit()?;
        let until = now_ns() + wait_ns;
        let mut spins = 0u32;
        while !self.b.ready() && !woken() {
            spins += 1;
            if spins.is_multiple_of(256) && now_ns() >= until {
                break;
            }
            std::hint::spin_loop();
        }
        Ok(())
    }

    /// Submits and sleeps (see [`Backend::wait`]); an error marks the loop
    /// failed.
    pub(super) fn wait(&mut self, wait_ns: u64) -> std::io::Result<()> {
        let r = self.b.wait(wait_ns);
        if r.is_err() {
            self.owner.failed = true;
        }
        r
    }
}

impl<B: Backend> Drop for Io<'_, B> {
    fn drop(&mut self) {
        let o = &mut self.owner;
        o.stopped_with = Some((o.in_device, o.at_workers));
        // When the backend itself failed, what is in the kernel cannot be
        // accounted for: `in_device` stays above 0 and the owner leaks the
        // buffers.
        self.b.drain(|_, _| o.in_device -= 1);
    }
}

/// Runs reader `index` of a pipeline that reads the file directly (no
/// page-cache model) with the backend of its engine (the return queue's
/// waker is the engine's, see [`new_return_queue`]).
pub(super) fn run(ctx: &Arc<Ctx>, index: usize, h: ThreadHandle) -> std::io::Result<()> {
    let s = &ctx.settings;
    let n = buffers_per_reader(s);
    let block = s.workload.block_size as usize;
    let fd = ctx.file.file.as_raw_fd();
    // From the moment `Io` is built, every exit (`?`, a panic) goes
    // through its drop.
    match ctx.returns[index].waker() {
        ReaderWaker::EventFd(efd) => {
            let entries = (n as u32 + 1).next_power_of_two();
            let b = Uring::new(fd, entries, s.ring(), efd)?;
            direct(ctx, index, Io::new(b, Owner::new(ctx, index, n, block)), h)
        }
        ReaderWaker::Park(t) => {
            let b = Sync::new(fd, t);
            direct(ctx, index, Io::new(b, Owner::new(ctx, index, n, block)), h)
        }
    }
}

/// A direct read in flight.
#[derive(Clone, Copy, Default)]
struct SlotInfo {
    /// When the read was issued (or was due, when rate limited): where its
    /// end-to-end latency starts.
    issue_ns: u64,
    /// When the kernel had it: after the submitting `io_uring_enter`
    /// returned, or when the enter that also waits began; for a blocking
    /// read, when it was issued. The device stage starts here, as fio's
    /// clat does.
    submit_ns: u64,
    offset: u64,
}

/// A direct reader's reads: its buffers' slots, which are free, and what
/// each read in flight is.
struct Direct<'c> {
    ctx: &'c Ctx,
    index: usize,
    block: usize,
    slots: Vec<SlotInfo>,
    free: Vec<u32>,
    src: Source,
    submit_batch: usize,
    /// Slots of the reads queued but not yet submitted; the wait submits
    /// whatever is left. Sized once: no allocation per read.
    unsubmitted: Vec<u32>,
}

impl Direct<'_> {
    /// The reads queued so far were handed to the kernel at `t`.
    fn mark_submitted(&mut self, t: u64) {
        for &p in &self.unsubmitted {
            self.slots[p as usize].submit_ns = t;
        }
        self.unsubmitted.clear();
    }

    /// Issues a read into every free buffer (as far as the schedule
    /// allows), each free buffer once a call: a read a blocking backend
    /// makes at once and that is processed inline frees its buffer again,
    /// and gets its next read on the next turn, after the recorder
    /// handoff. Returns when the next read is due when the schedule said
    /// wait.
    fn issue_free<B: Backend>(
        &mut self,
        io: &mut Io<'_, B>,
        h: &mut ThreadHandle,
    ) -> std::io::Result<Option<u64>> {
        let mut due = None;
        if self.ctx.stop_readers.load(Ordering::Relaxed) {
            return Ok(due);
        }
        for _ in 0..self.free.len() {
            let Some(&slot) = self.free.last() else {
                break;
            };
            let issue_ns = match &mut self.src.schedule {
                None => stamp(),
                Some(sch) => match sch.due(now_ns()) {
                    Some(t) => t,
                    None => {
                        due = Some(sch.next_ns);
                        break;
                    }
                },
            };
            self.free.pop();
            let offset = self.src.offsets.next();
            self.slots[slot as usize] = SlotInfo {
                issue_ns,
                submit_ns: issue_ns,
                offset,
            };
            let op = Op::Read {
                buf: io.owner.slot(slot as usize),
                len: self.block as u32,
                offset,
            };
            // SAFETY: the buffer slot is owned by this reader and not
            // reused until its completion is reaped and post-processing
            // gives it back; the buffers are freed only by `io.owner`,
            // after `io` drained every read counted in `in_device`.
            match unsafe { io.queue(u64::from(slot), op) } {
                Queued::InKernel => {
                    self.unsubmitted.push(slot);
                    if self.unsubmitted.len() >= self.submit_batch {
                        // Hand the batch to the kernel now: the device
                        // starts on it while the next reads are prepared
                        // (on a virtio disk this alone is worth 20% IOPS
                        // at QD32 over submitting everything free in one
                        // call before the wait).
                        io.submit()?;
                        self.mark_submitted(stamp());
                    }
                }
                Queued::Done(res) => {
                    if self.completed(io, h, slot, res, stamp()) {
                        self.free.push(slot);
                    }
                }
            }
        }
        Ok(due)
    }

    /// The read in `slot` completed at `t` with `res`: its device time,
    /// then its item to the workers (or processed here). True when its
    /// buffer is free again (processed inline, or the read failed).
    #[inline]
    fn completed<B: Backend>(
        &mut self,
        io: &mut Io<'_, B>,
        h: &mut ThreadHandle,
        slot: u32,
        res: i64,
        t: u64,
    ) -> bool {
        let info = self.slots[slot as usize];
        h.rec
            .record(Stage::Device, t.saturating_sub(info.submit_ns));
        if res != self.block as i64 {
            h.rec.counters.io_errors += 1;
            if !self.src.io_error_noticed {
                self.src.io_error_noticed = true;
                self.ctx.notices.push(format!(
                    "reader-{}: read at offset {} failed: {}",
                    self.index,
                    info.offset,
                    failure(res)
                ));
            }
            return true;
        }
        let ptr = io.owner.slot(slot as usize);
        // SAFETY: the read into this buffer completed and the reader owns
        // it until it is dispatched.
        let buf = unsafe { std::slice::from_raw_parts_mut(ptr, self.block) };
        self.src.corrupt.apply(buf, h);
        let item = WorkItem {
            buf: ptr,
            len: self.block as u32,
            reader: self.index as u32,
            slot,
            offset: info.offset,
            issue_ns: info.issue_ns,
            enqueue_ns: 0,
            queued_cpu: 0,
            pwq: NO_PWQ,
            needs_decrypt: self.ctx.plan.decrypt,
            bio: super::queue::NO_BIO,
            unfilled: false,
        };
        if self.ctx.dispatch(&mut h.rec, item) {
            true
        } else {
            io.owner.at_workers += 1;
            false
        }
    }
}

/// The loop of a direct reader, on either backend.
fn direct<B: Backend>(
    ctx: &Ctx,
    index: usize,
    mut io: Io<'_, B>,
    mut h: ThreadHandle,
) -> std::io::Result<()> {
    let s = &ctx.settings;
    let n = buffers_per_reader(s);
    let poll = s.workload.sleep == SleepMode::Poll;
    let ret = &ctx.returns[index];
    let mut d = Direct {
        ctx,
        index,
        block: s.workload.block_size as usize,
        slots: vec![SlotInfo::default(); n],
        free: (0..n as u32).rev().collect(),
        src: Source::new(s, index, &ctx.streams),
        submit_batch: s.workload.submit_batch.max(1) as usize,
        unsubmitted: Vec::with_capacity(n),
    };
    loop {
        h.tick();
        io.owner.take_returns(|slot| d.free.push(slot));
        let stopping = ctx.stop_readers.load(Ordering::Relaxed);
        if stopping && io.owner.in_device == 0 && io.owner.at_workers == 0 {
            break;
        }
        let next_due = d.issue_free(&mut io, &mut h)?;
        // Every enter below submits what is still queued.
        d.mark_submitted(stamp());
        // Wait for a completion (device or eventfd) or the next due issue.
        let wait_ns = match next_due {
            Some(t) => t.saturating_sub(now_ns()).min(MAX_WAIT_NS),
            None => MAX_WAIT_NS,
        };
        if poll {
            io.poll(wait_ns, || ret.has_returns())?;
        } else {
            // Announce the sleep to the workers first (they wake only a
            // sleeping reader); a buffer already back means no wait.
            let at_workers = io.owner.at_workers;
            let announced = at_workers > 0 && ret.prepare_sleep();
            let returns_pending = at_workers > 0 && !announced;
            if !returns_pending && (io.owner.in_device > 0 || announced || next_due.is_some()) {
                let slept = stamp();
                let r = io.wait(wait_ns);
                if announced {
                    ret.end_sleep();
                }
                h.rec
                    .span(|| Span::here(SpanKind::Sleep, slept).ended(stamp()));
                r?;
            } else {
                io.submit()?;
            }
        }
        // Reap one completion at a time and reuse its buffer at once, as fio
        // does (`iodepth_batch_complete_max=1`): completions not reaped yet
        // wait in the CQ, inside the device stage, rather than reaped and
        // stamped, then waiting for the rest of the batch to be resubmitted.
        // At most one CQ's worth per pass: a read served from the page cache
        // completes inside its own submission, so an unbounded loop would
        // never return to the top (the recorder handoff, buffer returns).
        for _ in 0..=n {
            let Some((ud, res)) = io.reap() else {
                break;
            };
            let slot = ud as u32;
            if d.completed(&mut io, &mut h, slot, res, stamp()) {
                d.free.push(slot);
                d.issue_free(&mut io, &mut h)?;
            }
        }
        io.b.rearm();
    }
    // `io`'s drop completes the armed eventfd read before the ring goes.
    Ok(())
}
