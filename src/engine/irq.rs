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
//! device completes it.
//!
//! Which CPUs take the interrupts is `workload.irq_cpus`: unset, one per
//! submitting CPU (a multi-queue NVMe: the interrupt lands where the bio
//! was submitted); a list, the CPUs the device's interrupts land on, each
//! submitting CPU mapped to one of them as blk-mq maps CPUs to hardware
//! queues; one CPU, a phone's single UFS interrupt. Where the interrupt
//! lands on another CPU than the submitter, `kernel.rq_affinity` decides as
//! `blk_mq_complete_need_ipi()` does ([`completes_on_submitter`]): the
//! work is queued where the interrupt landed, or sent back (an IPI) to the
//! submitting CPU's thread, which queues it from there. Everything a bio's end does that the reader did
//! before (device time, bio counters, the deliberate corruption, failing a
//! bio that did not read in full) moves here; the bio's local slot always
//! goes back to its reader through the reader's return queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering, fence};

use crossbeam_queue::ArrayQueue;

use super::queue::WorkItem;
use crate::sys::CpuTopo;

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

/// A bio in a line's inbox, with the CPU it was submitted on.
#[derive(Clone, Copy)]
pub struct Queued {
    pub req: BioReq,
    /// The submitting CPU (`sched_getcpu` in the reader).
    pub cpu: u32,
}

/// A completed bio's work item sent to its submitting CPU (the kernel's
/// IPI under `rq_affinity`), to be queued from there.
#[derive(Clone, Copy)]
pub struct Ipi {
    pub item: WorkItem,
    /// The CPU that submitted the bio (where the item is to be queued).
    pub submitter: u32,
    /// The CPU whose interrupt completed it.
    pub irq_cpu: u32,
}

/// One irq thread's inbox.
pub struct IrqLine {
    /// The bios handed over, not submitted yet.
    pub(super) q: ArrayQueue<Queued>,
    /// Work items other CPUs' interrupts completed and sent here.
    pub(super) ipi: ArrayQueue<Ipi>,
    /// Set while its thread sleeps in the ring (a submit then signals).
    pub(super) sleeping: AtomicBool,
    /// Wakes the sleeping thread.
    pub(super) efd: crate::sys::EventFd,
    /// The CPU it stands for.
    pub cpu: usize,
}

impl IrqLine {
    /// Wakes the thread if it sleeps (after something was pushed).
    #[inline]
    fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            self.efd.signal();
        }
    }

    /// Sends a completed item to this line's CPU to be queued from there
    /// (never fails: sized for every bio slot).
    #[inline]
    pub fn send_ipi(&self, i: Ipi) {
        if self.ipi.push(i).is_err() {
            unreachable!("ipi queue sized below the number of bio slots");
        }
        self.wake();
    }
}

/// The line a reader hands a bio to, and the CPU it submits from.
pub struct LineFor<'a> {
    line: &'a IrqLine,
    cpu: u32,
}

impl LineFor<'_> {
    /// Hands a bio over (never fails: sized for every bio slot), waking the
    /// thread if it sleeps.
    #[inline]
    pub fn submit(self, r: BioReq) {
        if self
            .line
            .q
            .push(Queued {
                req: r,
                cpu: self.cpu,
            })
            .is_err()
        {
            unreachable!("irq queue sized below the number of bio slots");
        }
        self.line.wake();
    }
}

/// Whether blk-mq completes a request whose interrupt landed on CPU `irq`
/// on the CPU that submitted it (`submitter`) instead, by an IPI: v6.18
/// `blk_mq_complete_need_ipi()` (block/blk-mq.c). `rq_affinity` 0 clears
/// QUEUE_FLAG_SAME_COMP: never; 2 sets QUEUE_FLAG_SAME_FORCE: whenever the
/// CPUs differ; 1: when they do not share a last-level cache
/// (`cpus_share_cache`) or, with `capacity_rule` (kernels >= 6.11,
/// `cpus_equal_capacity`), their `cpu_capacity` differs. (A kernel booted
/// with `threadirqs` never redirects; not modelled.)
pub fn completes_on_submitter(
    rq_affinity: u8,
    irq: usize,
    submitter: usize,
    share_llc: bool,
    equal_capacity: bool,
    capacity_rule: bool,
) -> bool {
    if rq_affinity == 0 || irq == submitter {
        return false;
    }
    if rq_affinity >= 2 {
        return true;
    }
    !(share_llc && (equal_capacity || !capacity_rule))
}

/// Where each submitting CPU's completions are queued from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqPlan {
    /// The CPUs with an irq thread: the interrupt CPUs, and submitting
    /// CPUs that completions are sent back to (sorted).
    pub cpus: Vec<usize>,
    /// Per submitting CPU: (the CPU its interrupt lands on, whether the
    /// work is sent back to it).
    pub of_submitter: Vec<(usize, usize, bool)>,
}

impl IrqPlan {
    /// The plan for `irq_cpus` (empty: each submitting CPU takes its own
    /// interrupt), the `submitters`' CPUs, `rq_affinity` and the machine's
    /// topology and capacities (`topo` and `capacity` in the same order;
    /// a CPU missing from them shares no cache, capacity equal).
    /// Submitter `s` is mapped to `irq_cpus[s % len]` (sorted), as
    /// blk-mq spreads CPUs over hardware queues in order.
    pub fn new(
        irq_cpus: &[usize],
        submitters: &[usize],
        rq_affinity: u8,
        topo: &[CpuTopo],
        capacity: &[u32],
        capacity_rule: bool,
    ) -> IrqPlan {
        let mut subs = submitters.to_vec();
        subs.sort_unstable();
        subs.dedup();
        let mut irqs = irq_cpus.to_vec();
        irqs.sort_unstable();
        irqs.dedup();
        let facts = |cpu: usize| {
            let i = topo.iter().position(|t| t.cpu == cpu);
            let llc = i.map(|i| topo[i].llc.clone()).unwrap_or_else(|| vec![cpu]);
            let cap = i.and_then(|i| capacity.get(i).copied()).unwrap_or(1024);
            (llc, cap)
        };
        let mut cpus = irqs.clone();
        let of_submitter: Vec<(usize, usize, bool)> = subs
            .iter()
            .map(|&s| {
                let irq = if irqs.is_empty() {
                    s
                } else {
                    irqs[s % irqs.len()]
                };
                let ((llc_i, cap_i), (_, cap_s)) = (facts(irq), facts(s));
                let back = completes_on_submitter(
                    rq_affinity,
                    irq,
                    s,
                    llc_i.contains(&s),
                    cap_i == cap_s,
                    capacity_rule,
                );
                cpus.push(if back { s } else { irq });
                (s, irq, back)
            })
            .collect();
        cpus.sort_unstable();
        cpus.dedup();
        IrqPlan { cpus, of_submitter }
    }
}

/// "No line" in [`Irqs`]' per-CPU tables.
const NO_LINE: u32 = u32::MAX;

/// The irq threads of a pipeline, one per CPU where completions land or
/// are sent back to.
pub struct Irqs {
    pub(super) lines: Vec<Arc<IrqLine>>,
    /// Per submitting CPU: the index into `lines` of its interrupt's CPU
    /// (line 0 for a CPU the plan does not know).
    irq_line: Vec<u32>,
    /// Per submitting CPU: the index of its own line when completions are
    /// sent back to it, else [`NO_LINE`].
    ipi_line: Vec<u32>,
    /// Set when the readers are done: the threads finish what is in
    /// flight and exit.
    pub stop: AtomicBool,
}

impl Irqs {
    /// Lines for `plan`'s CPUs (not empty), each for `capacity` bios.
    pub fn new(plan: &IrqPlan, capacity: usize) -> std::io::Result<Irqs> {
        let index = |cpu: usize| plan.cpus.iter().position(|&c| c == cpu);
        let n = plan.of_submitter.iter().map(|x| x.0 + 1).max().unwrap_or(1);
        let mut irq_line = vec![0u32; n];
        let mut ipi_line = vec![NO_LINE; n];
        for &(s, irq, back) in &plan.of_submitter {
            irq_line[s] = index(irq).unwrap_or(0) as u32;
            if back {
                ipi_line[s] = index(s).map_or(NO_LINE, |i| i as u32);
            }
        }
        let mut lines = Vec::new();
        for &cpu in &plan.cpus {
            lines.push(Arc::new(IrqLine {
                q: ArrayQueue::new(capacity.max(1)),
                ipi: ArrayQueue::new(capacity.max(1)),
                sleeping: AtomicBool::new(false),
                efd: crate::sys::EventFd::new()?,
                cpu,
            }));
        }
        Ok(Irqs {
            lines,
            irq_line,
            ipi_line,
            stop: AtomicBool::new(false),
        })
    }

    /// The line whose CPU takes the interrupt of a bio submitted on `cpu`.
    #[inline]
    pub fn line_for(&self, cpu: usize) -> LineFor<'_> {
        let i = self.irq_line.get(cpu).copied().unwrap_or(0);
        LineFor {
            line: &self.lines[i as usize],
            cpu: cpu as u32,
        }
    }

    /// The line of submitting CPU `cpu` when its completions are sent back
    /// to it (`rq_affinity`), else None.
    #[inline]
    pub fn ipi_line(&self, cpu: u32) -> Option<&IrqLine> {
        let i = *self.ipi_line.get(cpu as usize)?;
        (i != NO_LINE).then(|| &*self.lines[i as usize])
    }

    /// Wakes every thread (to see `stop`).
    pub fn wake_all(&self) {
        for l in &self.lines {
            l.efd.signal();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(cpu: usize, llc: &[usize]) -> CpuTopo {
        CpuTopo {
            cpu,
            smt: vec![cpu],
            llc: llc.to_vec(),
            node: 0,
        }
    }

    #[test]
    fn rq_affinity_decides_as_blk_mq_complete_need_ipi() {
        // (rq, share_llc, equal_capacity, capacity_rule) -> sent back
        let cases = [
            (0, false, false, true, false),
            (0, true, true, true, false),
            (1, true, true, true, false),
            (1, false, true, true, true),
            (1, true, false, true, true),
            (1, true, false, false, false),
            (1, false, false, false, true),
            (2, true, true, true, true),
            (2, true, true, false, true),
        ];
        for (rq, llc, cap, rule, want) in cases {
            assert_eq!(
                completes_on_submitter(rq, 0, 1, llc, cap, rule),
                want,
                "rq_affinity {rq}, share_llc {llc}, equal_capacity {cap}, capacity_rule {rule}"
            );
        }
        // The same CPU never needs an IPI.
        for rq in 0..=2 {
            assert!(!completes_on_submitter(rq, 3, 3, false, false, true));
        }
    }

    #[test]
    fn one_interrupt_cpu_serves_every_submitter_and_rq_affinity_sends_back() {
        // Two LLCs: 0-1 and 2-3; CPU 3 is a big core.
        let t = [
            topo(0, &[0, 1]),
            topo(1, &[0, 1]),
            topo(2, &[2, 3]),
            topo(3, &[2, 3]),
        ];
        let cap = [512, 512, 512, 1024];
        let plan = |rq, rule| IrqPlan::new(&[0], &[0, 1, 2, 3], rq, &t, &cap, rule);
        let p0 = plan(0, true);
        assert_eq!(p0.cpus, vec![0]);
        assert!(
            p0.of_submitter
                .iter()
                .all(|&(_, irq, back)| irq == 0 && !back)
        );
        let p1 = plan(1, true);
        let back: Vec<bool> = p1.of_submitter.iter().map(|x| x.2).collect();
        assert_eq!(back, vec![false, false, true, true]);
        assert_eq!(p1.cpus, vec![0, 2, 3]);
        // One LLC: only the capacity differs, which counts since 6.11.
        let t1 = [
            topo(0, &[0, 1, 2, 3]),
            topo(1, &[0, 1, 2, 3]),
            topo(2, &[0, 1, 2, 3]),
            topo(3, &[0, 1, 2, 3]),
        ];
        let p = IrqPlan::new(&[0], &[1, 3], 1, &t1, &cap, true);
        assert_eq!(p.of_submitter, vec![(1, 0, false), (3, 0, true)]);
        let p = IrqPlan::new(&[0], &[1, 3], 1, &t1, &cap, false);
        assert_eq!(p.of_submitter, vec![(1, 0, false), (3, 0, false)]);
        let p2 = plan(2, true);
        assert_eq!(p2.cpus, vec![0, 1, 2, 3]);
        assert_eq!(
            p2.of_submitter.iter().map(|x| x.2).collect::<Vec<_>>(),
            vec![false, true, true, true]
        );
    }

    #[test]
    fn unset_irq_cpus_give_each_submitter_its_own_interrupt() {
        let t = [topo(0, &[0]), topo(1, &[1])];
        let p = IrqPlan::new(&[], &[1, 0], 2, &t, &[], true);
        assert_eq!(p.cpus, vec![0, 1]);
        assert_eq!(p.of_submitter, vec![(0, 0, false), (1, 1, false)]);
        // A list spreads the submitters over it in order.
        let p = IrqPlan::new(&[4, 5], &[0, 1, 2, 3], 0, &t, &[], true);
        let irq: Vec<usize> = p.of_submitter.iter().map(|x| x.1).collect();
        assert_eq!(irq, vec![4, 5, 4, 5]);
        let irqs = Irqs::new(&p, 4).unwrap();
        assert_eq!(irqs.line_for(3).line.cpu, 5);
        assert_eq!(irqs.line_for(3).cpu, 3);
        assert!(irqs.ipi_line(3).is_none());
        // An unknown CPU goes to the first line.
        assert_eq!(irqs.line_for(99).line.cpu, 4);
    }
}
