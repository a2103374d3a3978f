//! Completions in interrupt context (`workload.completion = "irq"`).
//!
//! In the kernel a bio's completion runs in interrupt or softirq context on
//! the CPU its interrupt lands on: `mpage_end_io` queues the post-read work
//! from there, and neither CPU hogs nor nice -20 workers can delay it. A
//! userspace reader that reaps its own completions is an ordinary nice-0
//! thread that hogs do delay, so every completion it queues late inflates
//! the figures the fsverity patch is about. Here each CPU where completions
//! land (`workload.reader_cpus`, or every CPU) has an "irq" thread standing
//! for that interrupt: SCHED_FIFO 50 (the kernel's threaded IRQs' priority)
//! where permitted, pinned to its CPU. Since io_uring completes a read in
//! the task that submitted it, that thread submits the page cache's bios on
//! its own ring as well as reaping them: a reader hands it each bio it
//! builds (a lock-free queue and, when the thread sleeps, an eventfd), and
//! the thread queues the bio's work item on the CPU's queue the moment the
//! device completes it. Everything a bio's end does that the reader did
//! before (device time, bio counters, the deliberate corruption, failing a
//! bio that did not read in full) moves here; the bio's local slot always
//! goes back to its reader through the reader's return queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering, fence};

use crossbeam_queue::ArrayQueue;

/// One bio a reader hands to an irq thread to submit and complete.
#[derive(Clone, Copy)]
pub struct BioReq {
    /// The bio's global slot in the page cache.
    pub bio: u32,
    /// The reader that built it, and its local slot there.
    pub reader: u32,
    pub slot: u32,
    /// The bio's iovecs (one per page, stable until its slot comes back).
    pub iov: *const crate::sys::IoVec,
    pub npages: u32,
    /// File offset of its first page.
    pub offset: u64,
    /// When the reader submitted it (the device stage starts here).
    pub submit_ns: u64,
}

// SAFETY: the iovec pointer (and the frames it names) is handed from the
// reader to exactly one irq thread with the bio, and back with the slot;
// the reader keeps the iovecs alive until every slot came back.
unsafe impl Send for BioReq {}

/// One irq thread's inbox.
pub struct IrqLine {
    /// The bios handed over, not submitted yet.
    pub(super) q: ArrayQueue<BioReq>,
    /// Set while its thread sleeps in the ring (a submit then signals).
    pub(super) sleeping: AtomicBool,
    /// Wakes the sleeping thread.
    pub(super) efd: crate::sys::EventFd,
    /// The CPU it stands for.
    pub cpu: usize,
}

impl IrqLine {
    /// Hands a bio over (never fails: sized for every bio slot), waking the
    /// thread if it sleeps.
    #[inline]
    pub fn submit(&self, r: BioReq) {
        if self.q.push(r).is_err() {
            unreachable!("irq queue sized below the number of bio slots");
        }
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            self.efd.signal();
        }
    }
}

/// The irq threads of a pipeline, one per CPU where completions land.
pub struct Irqs {
    pub(super) lines: Vec<Arc<IrqLine>>,
    /// Index into `lines` of each CPU (0 for a CPU without its own).
    of_cpu: Vec<usize>,
    /// Set when the readers are done: the threads finish what is in
    /// flight and exit.
    pub stop: AtomicBool,
}

impl Irqs {
    /// Lines for `cpus` (deduplicated, not empty), each for `capacity` bios.
    pub fn new(cpus: &[usize], capacity: usize) -> std::io::Result<Irqs> {
        let mut cpus = cpus.to_vec();
        cpus.sort_unstable();
        cpus.dedup();
        let mut of_cpu = vec![0; cpus.iter().max().map_or(1, |m| m + 1)];
        let mut lines = Vec::new();
        for (i, &cpu) in cpus.iter().enumerate() {
            of_cpu[cpu] = i;
            lines.push(Arc::new(IrqLine {
                q: ArrayQueue::new(capacity.max(1)),
                sleeping: AtomicBool::new(false),
                efd: crate::sys::EventFd::new()?,
                cpu,
            }));
        }
        Ok(Irqs {
            lines,
            of_cpu,
            stop: AtomicBool::new(false),
        })
    }

    /// The line of the CPU a bio is submitted on (where, with
    /// `rq_affinity = 2`, its completion lands).
    #[inline]
    pub fn line_for(&self, cpu: usize) -> &IrqLine {
        &self.lines[self.of_cpu.get(cpu).copied().unwrap_or(0)]
    }

    /// Wakes every thread (to see `stop`).
    pub fn wake_all(&self) {
        for l in &self.lines {
            l.efd.signal();
        }
    }
}
