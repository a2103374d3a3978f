//! The irq threads' body (`workload.completion = "irq"`): each submits and
//! completes the bios of its CPU's line (see [`super::irq`] for what they
//! stand for), and queues the work items other CPUs' interrupts sent back
//! to its CPU (`kernel.rq_affinity`). Apart from the lines themselves, which the pipeline's
//! context holds, so that `stages` (the context) and the threads that use
//! it do not import each other.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use crate::metrics::{Role, Stage, ThreadHandle, stamp};

use super::backend::{Backend, MAX_WAIT_NS, Op, Uring, failure};
use super::pagecache::PAGE;
use super::queue::{NO_PWQ, WorkItem};
use super::resolve::Ring;
use super::source::Corruptor;
use super::stages::Ctx;

use super::irq::{BioReq, Ipi, IrqLine};

/// Starts one irq thread per line of `ctx.irqs` (none without).
pub fn spawn(ctx: &Arc<Ctx>) -> std::io::Result<Vec<JoinHandle<()>>> {
    let Some(irqs) = &ctx.irqs else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for line in &irqs.lines {
        let ctx = ctx.clone();
        let line = line.clone();
        out.push(
            std::thread::Builder::new()
                .name(format!("irq-cpu{}", line.cpu))
                .spawn(move || {
                    let h = ctx.registry.register(Role::Irq);
                    if let Err(e) = run(&ctx, &line, h) {
                        ctx.notices.push(format!("irq-cpu{}: {e}", line.cpu));
                    }
                })?,
        );
    }
    Ok(out)
}

/// One irq thread: pinned to its CPU, SCHED_FIFO where permitted (a notice
/// once per pipeline says what is missing where not; it then runs at the
/// workers' priority), submitting and completing the bios handed to it.
fn run(ctx: &Arc<Ctx>, line: &IrqLine, mut h: ThreadHandle) -> std::io::Result<()> {
    if let Err(e) = crate::sys::pin_current_thread(&[line.cpu]) {
        ctx.notices.push(format!(
            "irq-cpu{}: could not pin to CPU {}: {e}",
            line.cpu, line.cpu
        ));
    }
    if let Err(why) = crate::sys::set_current_thread_fifo(crate::sys::IRQ_FIFO_PRIORITY) {
        let nice = if ctx.settings.workers.highpri { -20 } else { 0 };
        let _ = crate::sys::set_current_thread_nice(nice);
        ctx.notices.refused(super::resolve::Refused::IrqFifo {
            nice: crate::sys::current_thread_nice().unwrap_or(0),
            why: why.to_string(),
        });
    }
    let cap = line.q.capacity();
    let entries = (cap as u32 + 2).next_power_of_two();
    // A plain ring (interrupts are not a task that waits), woken through
    // the line's eventfd; from here on every exit goes through the drain
    // below, or the ring's drop.
    let plain = Ring {
        tuned: false,
        enter_no_iowait: false,
    };
    let mut ring = Uring::new(ctx.file.file.as_raw_fd(), entries, plain, &line.efd)?;
    let pc = ctx
        .pcache
        .clone()
        .expect("irq completions are for page-cache pipelines");
    // Each request slot's bio and the CPU that submitted it.
    let mut reqs: Vec<Option<(BioReq, u32)>> = vec![None; cap];
    let mut free: Vec<u32> = (0..cap as u32).rev().collect();
    let mut in_flight = 0usize;
    let mut corrupt = Corruptor::new(ctx.settings.pipeline.corrupt_every);
    let mut io_error_noticed = false;
    let irqs = ctx.irqs.as_ref().expect("irq threads run with irq lines");
    let result = loop {
        h.tick();
        // Items completed by another CPU's interrupt and sent here (the
        // IPI): queued from this, their submitting, CPU.
        while let Some(i) = line.ipi.pop() {
            queue_item(ctx, &mut h, i.item, i.submitter, i.irq_cpu);
        }
        while let Some(q) = line.q.pop() {
            let r = q.req;
            let i = free.pop().expect("a request slot per bio slot");
            let op = Op::Readv {
                iov: r.iov,
                n: r.npages,
                offset: ctx.file.device_offset(r.offset),
            };
            // SAFETY: the iovecs and frames are this bio's until its slot
            // goes back to the reader, which happens only after its
            // completion is reaped (or drained) below.
            unsafe { ring.queue(u64::from(i), op) };
            reqs[i as usize] = Some((r, q.cpu));
            in_flight += 1;
        }
        if ctx
            .irqs
            .as_ref()
            .is_some_and(|i| i.stop.load(Ordering::SeqCst))
            && in_flight == 0
            && line.q.is_empty()
            && line.ipi.is_empty()
        {
            break Ok(());
        }
        ring.rearm();
        line.sleeping.store(true, Ordering::SeqCst);
        let res = if line.q.is_empty() && line.ipi.is_empty() {
            ring.wait(MAX_WAIT_NS)
        } else {
            ring.submit()
        };
        line.sleeping.store(false, Ordering::SeqCst);
        if let Err(e) = res {
            break Err(e);
        }
        let t = stamp();
        while let Some((ud, res)) = ring.reap() {
            let Some((r, submitter)) = reqs[ud as usize].take() else {
                continue;
            };
            free.push(ud as u32);
            in_flight -= 1;
            h.rec.record(Stage::Device, t.saturating_sub(r.submit_ns));
            let len = r.npages as usize * PAGE;
            let ret = &ctx.returns[r.reader as usize];
            if res != len as i64 {
                if !io_error_noticed {
                    io_error_noticed = true;
                    ctx.notices.push(format!(
                        "irq-cpu{}: bio at offset {} failed: {}",
                        line.cpu,
                        r.offset,
                        failure(res)
                    ));
                }
                pc.end_bio(r.bio, false, true, |rd| ctx.returns[rd].poke());
                ret.give_back(r.slot);
                continue;
            }
            let bio = pc.bio(r.bio);
            h.rec.counters.bios += 1;
            h.rec.counters.bio_bytes += len as u64;
            if bio.readahead_async.load(Ordering::Relaxed) {
                h.rec.counters.readahead_async += 1;
            }
            if ctx.settings.pipeline.corrupt_every > 0 {
                let f = bio.frames[0].load(Ordering::Relaxed);
                // SAFETY: the frame is this bio's, its read complete, not
                // yet handed to a worker.
                corrupt.apply(unsafe { pc.frame_mut(f) }, &mut h);
            }
            let item = WorkItem {
                buf: std::ptr::null_mut(),
                len: len as u32,
                reader: r.reader,
                slot: r.slot,
                offset: r.offset,
                issue_ns: r.submit_ns,
                enqueue_ns: 0,
                queued_cpu: 0,
                pwq: NO_PWQ,
                needs_decrypt: ctx.plan.decrypt,
                bio: r.bio,
                unfilled: false,
            };
            match irqs.ipi_line(submitter) {
                // rq_affinity: the kernel's IPI to the submitting CPU,
                // which queues the work from there.
                Some(to) => {
                    h.rec.counters.irq_ipis += 1;
                    to.send_ipi(Ipi {
                        item,
                        submitter,
                        irq_cpu: line.cpu as u32,
                    });
                }
                None => queue_item(ctx, &mut h, item, submitter, line.cpu as u32),
            }
        }
    };
    // Drain: every read still in the kernel completes before its bio is
    // failed and its slot goes back (never while the device may still
    // write its frames), and the eventfd read is woken and reaped (where
    // the ring itself failed, its drop leaks what the kernel may write).
    ring.drain(|ud, _| {
        if let Some((r, _)) = reqs[ud as usize].take() {
            pc.end_bio(r.bio, false, true, |rd| ctx.returns[rd].poke());
            ctx.returns[r.reader as usize].give_back(r.slot);
        }
    });
    // Bios handed over after the loop ended fail at once (nothing read them).
    while let Some(q) = line.q.pop() {
        pc.end_bio(q.req.bio, false, true, |rd| ctx.returns[rd].poke());
        ctx.returns[q.req.reader as usize].give_back(q.req.slot);
    }
    while let Some(i) = line.ipi.pop() {
        pc.end_bio(i.item.bio, false, true, |rd| ctx.returns[rd].poke());
        ctx.returns[i.item.reader as usize].give_back(i.item.slot);
    }
    result
}

/// Queues a completed bio's work item from this thread's CPU, counting
/// whether that CPU (`sched_getcpu` now) is the one that submitted the bio
/// and the one whose interrupt completed it (how the tests see per item
/// where the work was queued from; a local add, no shared write).
#[inline]
fn queue_item(ctx: &Ctx, h: &mut ThreadHandle, item: WorkItem, submitter: u32, irq_cpu: u32) {
    let cpu = crate::sys::current_cpu() as u32;
    let c = &mut h.rec.counters;
    c.queued_on_submitter += u64::from(cpu == submitter);
    c.queued_on_irq_cpu += u64::from(cpu == irq_cpu);
    let slot = item.slot;
    let reader = item.reader as usize;
    if ctx.dispatch(&mut h.rec, item) {
        ctx.returns[reader].give_back(slot);
    }
}
