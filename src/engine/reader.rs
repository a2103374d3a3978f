//! Reader threads: issue reads (io_uring or pread), reap completions, hand
//! them to post-processing. Its io_uring rings (and those of the page
//! cache's readers in `cached.rs` and the irq threads in `irq_thread.rs`)
//! hand buffers to the kernel in `unsafe` blocks, each with its argument.
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

use io_uring::{IoUring, opcode, types};

use crate::metrics::{Stage, ThreadHandle, now_ns, stamp};
use crate::settings::{EngineKind, Settings, SleepMode};
use crate::sys::errno;

use super::queue::{ReaderWaker, ReturnQueue, WorkItem};
use super::source::{Corruptor, Source};
use super::stages::Ctx;

/// user_data of the eventfd read armed on every ring.
const EVENTFD_TAG: u64 = u64::MAX;
/// Longest a reader sleeps before it checks for shutdown and hands over its
/// recorder (a slow device must not hold the interval handoff forever).
pub(super) const MAX_WAIT_NS: u64 = 20_000_000;

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
/// kernel (the io_uring case, through [`UringOwner`]) and waits until every
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
        // Reads in the kernel were completed by `UringOwner` (dropped
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

/// The work item of a read that completed in full, after the optional
/// deliberate corruption. `buf` = (reader, slot, pointer, length).
#[inline]
fn completed(
    ctx: &Ctx,
    h: &mut ThreadHandle,
    corrupt: &mut Corruptor,
    buf: (usize, u32, *mut u8, usize),
    offset: u64,
    issue_ns: u64,
) -> WorkItem {
    let (reader, slot, ptr, len) = buf;
    // SAFETY: the read into this buffer completed and the reader owns it
    // until it is dispatched.
    corrupt.apply(unsafe { std::slice::from_raw_parts_mut(ptr, len) }, h);
    WorkItem {
        buf: ptr,
        len: len as u32,
        reader: reader as u32,
        slot,
        offset,
        issue_ns,
        enqueue_ns: 0,
        queued_ns: 0,
        queued_cpu: 0,
        needs_decrypt: ctx.plan.decrypt,
        bio: super::queue::NO_BIO,
        unfilled: false,
    }
}

struct SlotInfo {
    /// When the read was issued (or was due, when rate limited): where its
    /// end-to-end latency starts.
    issue_ns: u64,
    /// When the kernel had it: after the submitting `io_uring_enter`
    /// returned, or when the enter that also waits began. The device stage
    /// starts here, as fio's clat does.
    submit_ns: u64,
    offset: u64,
}

/// A uring reader's ring and the buffers its reads land in. Dropped (on
/// any exit from the loop, an early error or a panic included), it first
/// completes every read still in the kernel and the armed eventfd read,
/// reaping until none is left; then its [`Owner`] waits for the workers.
pub(super) struct UringOwner<'a> {
    pub(super) ring: IoUring,
    /// The eventfd read's 8 bytes: boxed, so the kernel's pointer stays
    /// valid however the owner moves.
    pub(super) efd_buf: Box<u64>,
    pub(super) efd: i32,
    /// An eventfd read is pushed and its completion not reaped.
    pub(super) efd_armed: bool,
    pub(super) owner: Owner<'a>,
}

impl<'a> UringOwner<'a> {
    /// Reader `index`'s ring of `entries` entries and its `n` buffers of
    /// `block` bytes, the eventfd read armed; with whether its waits use
    /// `IORING_ENTER_NO_IOWAIT`.
    pub(super) fn start(
        ctx: &'a Ctx,
        index: usize,
        entries: u32,
        n: usize,
        block: usize,
    ) -> std::io::Result<(UringOwner<'a>, bool)> {
        let (ring, no_iowait, efd) = new_ring(ctx, index, entries)?;
        let mut u = UringOwner {
            ring,
            efd_buf: Box::new(0),
            efd,
            efd_armed: false,
            owner: Owner::new(ctx, index, n, block),
        };
        u.arm_eventfd();
        Ok((u, no_iowait))
    }

    /// The next completion of a read, as (user_data, result); the eventfd
    /// read's completion is taken here, and [`Self::rearm`] arms it again.
    pub(super) fn next_read(&mut self) -> Option<(u64, i32)> {
        loop {
            let cqe = self.ring.completion().next()?;
            if cqe.user_data() == EVENTFD_TAG {
                self.efd_armed = false;
                continue;
            }
            return Some((cqe.user_data(), cqe.result()));
        }
    }

    /// Arms the eventfd read again if its completion was taken.
    pub(super) fn rearm(&mut self) {
        if !self.efd_armed {
            self.arm_eventfd();
        }
    }

    pub(super) fn arm_eventfd(&mut self) {
        let sqe = opcode::Read::new(
            types::Fd(self.efd),
            (&mut *self.efd_buf as *mut u64).cast(),
            8,
        )
        .build()
        .user_data(EVENTFD_TAG);
        // SAFETY: the 8 bytes are the boxed `efd_buf`, which lives until this
        // read's completion is reaped (`drop` reaps it, or leaks the box).
        unsafe { self.ring.submission().push(&sqe) }.expect("SQ has room for the eventfd read");
        self.efd_armed = true;
    }
}

impl Drop for UringOwner<'_> {
    fn drop(&mut self) {
        self.owner.stopped_with = Some((self.owner.in_device, self.owner.at_workers));
        // Wake the armed eventfd read so it completes.
        if let ReaderWaker::EventFd(fd) = self.owner.ret.waker() {
            fd.signal();
        }
        while self.owner.in_device > 0 || self.efd_armed {
            // The ring itself failed: what is in the kernel cannot be
            // accounted for. The owner leaks the buffers.
            if !drain_wait(&self.ring) {
                break;
            }
            for cqe in self.ring.completion() {
                if cqe.user_data() == EVENTFD_TAG {
                    self.efd_armed = false;
                } else {
                    self.owner.in_device -= 1;
                }
            }
        }
        if self.efd_armed {
            // Never free what the kernel may still write.
            std::mem::forget(std::mem::replace(&mut self.efd_buf, Box::new(0)));
        }
    }
}

/// One blocking wait for a completion while a ring drains: false when the
/// ring itself failed (an interrupted or timed-out wait is not a failure).
pub(super) fn drain_wait(ring: &IoUring) -> bool {
    match ring.submit_and_wait(1) {
        Ok(_) => true,
        Err(e) => matches!(
            e.raw_os_error(),
            Some(errno::EINTR | errno::EBUSY | errno::ETIME)
        ),
    }
}

/// Reader `index`'s ring of `entries` entries, whether its waits may use
/// `IORING_ENTER_NO_IOWAIT` (`sleep = plain` where the kernel has it), and
/// the eventfd workers signal it through. Sleeping readers set the ring up
/// as fio does (no IPIs, task work run when the reader waits); a polling
/// reader never enters the kernel to wait, so it keeps the default,
/// IPI-driven completion posting.
pub(super) fn new_ring(
    ctx: &Ctx,
    index: usize,
    entries: u32,
) -> std::io::Result<(IoUring, bool, i32)> {
    // As the resolver decided from the machine's features.
    let how = ctx.settings.ring();
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
    let no_iowait = how.enter_no_iowait;
    let efd = match ctx.returns[index].waker() {
        ReaderWaker::EventFd(fd) => fd.raw(),
        ReaderWaker::Park(_) => unreachable!("uring reader has an eventfd"),
    };
    Ok((ring, no_iowait, efd))
}

/// Submits what is in the SQ and waits for one completion or `wait_ns`,
/// as iowait unless `no_iowait` (`IORING_ENTER_NO_IOWAIT`). A timeout, a
/// signal or a full CQ is not an error.
pub(super) fn wait_ring(ring: &IoUring, wait_ns: u64, no_iowait: bool) -> std::io::Result<()> {
    let ts = types::Timespec::new()
        .sec(wait_ns / 1_000_000_000)
        .nsec((wait_ns % 1_000_000_000) as u32);
    let args = types::SubmitArgs::new().timespec(&ts);
    let flags = if no_iowait {
        io_uring::EnterFlags::NO_IOWAIT
    } else {
        io_uring::EnterFlags::empty()
    };
    match ring.submitter().submit_with_args_and_flags(1, &args, flags) {
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

pub(super) fn run_uring(ctx: &Arc<Ctx>, index: usize, mut h: ThreadHandle) -> std::io::Result<()> {
    let s = &ctx.settings;
    let qd = s.workload.queue_depth as usize;
    let block = s.workload.block_size as usize;
    let poll = s.workload.sleep == SleepMode::Poll;
    let entries = (qd as u32 + 1).next_power_of_two();
    // From here on every exit (`?`, a panic) goes through `u`'s drop.
    let (mut u, no_iowait) = UringOwner::start(ctx, index, entries, qd, block)?;
    let fd = types::Fd(ctx.file.file.as_raw_fd());
    let ret = &ctx.returns[index];
    let mut slots: Vec<SlotInfo> = (0..qd)
        .map(|_| SlotInfo {
            issue_ns: 0,
            submit_ns: 0,
            offset: 0,
        })
        .collect();
    let mut free: Vec<u32> = (0..qd as u32).rev().collect();
    let mut src = Source::new(s, index, &ctx.streams);
    let submit_batch = s.workload.submit_batch.max(1) as usize;
    // Slots of the reads pushed to the SQ but not yet submitted; the wait
    // below submits whatever is left. Sized once: no allocation per read.
    let mut unsubmitted: Vec<u32> = Vec::with_capacity(qd);
    let mark_submitted = |slots: &mut [SlotInfo], pending: &mut Vec<u32>, t: u64| {
        for &p in pending.iter() {
            slots[p as usize].submit_ns = t;
        }
        pending.clear();
    };
    let mut submits = 0u64;

    // Hands the SQ to the kernel. An error return leaves `u` to drain.
    macro_rules! submit {
        () => {{
            submits += 1;
            let inject = ctx.faults.fail_submit_when_busy
                && submits > 64
                && u.owner.in_device > 1
                && u.owner.at_workers > 0;
            let r = if inject {
                Err(std::io::Error::other("injected submission failure"))
            } else {
                u.ring.submit()
            };
            if r.is_err() {
                u.owner.failed = true;
            }
            r?
        }};
    }

    // Issue as many reads as there are free buffers (and the schedule
    // allows); the time the next one is due when the schedule said wait.
    macro_rules! issue_free {
        () => {{
            let mut due: Option<u64> = None;
            if !ctx.stop_readers.load(Ordering::Relaxed) {
                while let Some(&slot) = free.last() {
                    let issue_ns = match &mut src.schedule {
                        None => stamp(),
                        Some(sch) => match sch.due(now_ns()) {
                            Some(t) => t,
                            None => {
                                due = Some(sch.next_ns);
                                break;
                            }
                        },
                    };
                    free.pop();
                    let offset = src.offsets.next();
                    slots[slot as usize] = SlotInfo {
                        issue_ns,
                        submit_ns: issue_ns,
                        offset,
                    };
                    let sqe = opcode::Read::new(fd, u.owner.slot(slot as usize), block as u32)
                        .offset(offset)
                        .build()
                        .user_data(slot as u64);
                    // SAFETY: the buffer slot is owned by this reader and not
                    // reused until its completion is reaped and post-processing
                    // gives it back; the buffers are freed only by `u.owner`,
                    // after `u` reaped every read counted in `in_device`.
                    unsafe { u.ring.submission().push(&sqe) }
                        .expect("SQ sized for queue_depth + 1");
                    u.owner.in_device += 1;
                    unsubmitted.push(slot);
                    if unsubmitted.len() >= submit_batch {
                        // Hand the batch to the kernel now: the device starts on
                        // it while the next reads are prepared (on a virtio disk
                        // this alone is worth 20% IOPS at QD32 over submitting
                        // everything free in one call before the wait).
                        submit!();
                        mark_submitted(&mut slots, &mut unsubmitted, stamp());
                    }
                }
            }
            due
        }};
    }

    loop {
        h.tick();
        u.owner.take_returns(|slot| free.push(slot));
        let stopping = ctx.stop_readers.load(Ordering::Relaxed);
        if stopping && u.owner.in_device == 0 && u.owner.at_workers == 0 {
            break;
        }
        let next_due_wait = issue_free!();
        // Every enter below submits what is still in the SQ.
        mark_submitted(&mut slots, &mut unsubmitted, stamp());
        // Wait for a completion (device or eventfd) or the next due issue.
        let wait_ns = match next_due_wait {
            Some(t) => t.saturating_sub(now_ns()).min(MAX_WAIT_NS),
            None => MAX_WAIT_NS,
        };
        if poll {
            submit!();
            let until = now_ns() + wait_ns;
            let mut spins = 0u32;
            loop {
                if !u.ring.completion().is_empty() || ret.has_returns() {
                    break;
                }
                spins += 1;
                if spins.is_multiple_of(256) && now_ns() >= until {
                    break;
                }
                std::hint::spin_loop();
            }
        } else {
            // Announce the sleep to the workers first (they write the eventfd
            // only for a sleeping reader); a buffer already back means no wait.
            let at_workers = u.owner.at_workers;
            let announced = at_workers > 0 && ret.prepare_sleep();
            let returns_pending = at_workers > 0 && !announced;
            if !returns_pending && (u.owner.in_device > 0 || announced || next_due_wait.is_some()) {
                let r = wait_ring(&u.ring, wait_ns, no_iowait);
                if announced {
                    ret.end_sleep();
                }
                if let Err(e) = r {
                    u.owner.failed = true;
                    return Err(e);
                }
            } else {
                submit!();
            }
        }
        // Reap one completion at a time and reuse its buffer at once, as fio
        // does (`iodepth_batch_complete_max=1`): completions not reaped yet
        // wait in the CQ, inside the device stage, rather than reaped and
        // stamped, then waiting for the rest of the batch to be resubmitted.
        // At most one CQ's worth per pass: a read served from the page cache
        // completes inside its own submission, so an unbounded loop would
        // never return to the top (the recorder handoff, buffer returns).
        for _ in 0..=qd {
            let Some((ud, res)) = u.next_read() else {
                break;
            };
            let t = stamp();
            let slot = ud as u32;
            let info = &slots[slot as usize];
            u.owner.in_device -= 1;
            h.rec
                .record(Stage::Device, t.saturating_sub(info.submit_ns));
            if res != block as i32 {
                h.rec.counters.io_errors += 1;
                if !src.io_error_noticed {
                    src.io_error_noticed = true;
                    let why = if res < 0 {
                        std::io::Error::from_raw_os_error(-res).to_string()
                    } else {
                        format!("short read of {} bytes", res)
                    };
                    ctx.notices.push(format!(
                        "reader-{index}: read at offset {} failed: {why}",
                        info.offset
                    ));
                }
                free.push(slot);
                continue;
            }
            let item = completed(
                ctx,
                &mut h,
                &mut src.corrupt,
                (index, slot, u.owner.slot(slot as usize), block),
                info.offset,
                info.issue_ns,
            );
            if ctx.dispatch(&mut h.rec, item) {
                free.push(slot);
                issue_free!();
            } else {
                u.owner.at_workers += 1;
            }
        }
        u.rearm();
    }
    // `u`'s drop completes the armed eventfd read before the ring goes.
    Ok(())
}

pub(super) fn run_sync(ctx: &Arc<Ctx>, index: usize, mut h: ThreadHandle) -> std::io::Result<()> {
    let s = &ctx.settings;
    let block = s.workload.block_size as usize;
    let fd = ctx.file.file.as_raw_fd();
    let ret = &ctx.returns[index];
    if let ReaderWaker::Park(t) = ret.waker() {
        let _ = t.set(std::thread::current());
    }
    // From here on every exit goes through `o`'s drop: the one buffer is
    // freed only once no worker holds it.
    let mut o = Owner::new(ctx, index, 1, block);
    let mut src = Source::new(s, index, &ctx.streams);
    loop {
        h.tick();
        o.take_returns(|_| {});
        let busy = o.at_workers > 0; // the one buffer is at the workers
        let stopping = ctx.stop_readers.load(Ordering::Relaxed);
        if stopping && !busy {
            break;
        }
        if busy {
            if ret.prepare_sleep() {
                std::thread::park_timeout(std::time::Duration::from_nanos(MAX_WAIT_NS));
                ret.end_sleep();
            }
            continue;
        }
        if stopping {
            continue;
        }
        let issue_ns = match &mut src.schedule {
            None => stamp(),
            Some(sch) => match sch.due(now_ns()) {
                Some(t) => t,
                None => {
                    let wait = sch.next_ns.saturating_sub(now_ns()).min(MAX_WAIT_NS);
                    std::thread::sleep(std::time::Duration::from_nanos(wait));
                    continue;
                }
            },
        };
        let offset = src.offsets.next();
        let ptr = o.slot(0);
        // SAFETY: `ptr` points to `block` writable bytes owned by this reader.
        let n = unsafe { crate::sys::pread_raw(fd, ptr.cast(), block, offset) };
        let t = stamp();
        h.rec.record(Stage::Device, t.saturating_sub(issue_ns));
        if n != block as isize {
            h.rec.counters.io_errors += 1;
            if !src.io_error_noticed {
                src.io_error_noticed = true;
                let why = if n < 0 {
                    std::io::Error::last_os_error().to_string()
                } else {
                    format!("short read of {n} bytes")
                };
                ctx.notices.push(format!(
                    "reader-{index}: read at offset {offset} failed: {why}"
                ));
            }
            continue;
        }
        let item = completed(
            ctx,
            &mut h,
            &mut src.corrupt,
            (index, 0, ptr, block),
            offset,
            issue_ns,
        );
        if !ctx.dispatch(&mut h.rec, item) {
            o.at_workers += 1;
        }
    }
    Ok(())
}
