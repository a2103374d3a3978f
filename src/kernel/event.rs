//! The trace events readpath reads from the kernel (the post-read
//! queues' workqueue events, a device's block requests, lost events), as
//! one type that both readers give: `trace_pipe`'s text parser (in
//! `trace.rs`) and the ring buffer's page decoder (`rawtrace.rs`). Kept
//! apart from both so that neither reader depends on the other.

/// One trace event, from a `trace_pipe` line or a ring-buffer record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<'a> {
    /// `workqueue_queue_work` on `cpu` at `t_ns`.
    Queue {
        /// Logged on this CPU.
        cpu: u32,
        /// Timestamp, ns.
        t_ns: u64,
        /// The work pointer (as hashed by `%p`).
        work: u64,
        /// The workqueue's name.
        queue: &'a str,
        /// Queued to an unbound pool (`cpu=4294967295`, the pool's CPU
        /// being -1); false for a per-CPU pool or a line without `cpu=`.
        unbound: bool,
    },
    /// `workqueue_execute_start`.
    Start {
        /// Logged on this CPU.
        cpu: u32,
        /// Timestamp, ns.
        t_ns: u64,
        /// The work pointer.
        work: u64,
        /// The thread id of the kworker that started it.
        pid: i32,
    },
    /// `workqueue_execute_end`.
    End {
        /// Timestamp, ns.
        t_ns: u64,
        /// The work pointer.
        work: u64,
    },
    /// `block_rq_issue`: a request handed to the device driver.
    RqIssue {
        /// Timestamp, ns.
        t_ns: u64,
        /// The device (major, minor).
        dev: (u32, u32),
        /// Its first sector.
        sector: u64,
        /// A read (its rwbs has an `R`).
        read: bool,
    },
    /// `block_rq_complete`: the device finished a request.
    RqComplete {
        /// Timestamp, ns.
        t_ns: u64,
        /// The device (major, minor).
        dev: (u32, u32),
        /// Its first sector.
        sector: u64,
        /// A read (its rwbs has an `R`).
        read: bool,
    },
    /// `CPU:N [LOST n EVENTS]`: the ring buffer overwrote `events` lines
    /// of `cpu` before they were read (`[LOST EVENTS]`, count unknown,
    /// reads as 1).
    Lost {
        /// The CPU whose buffer lost them.
        cpu: u32,
        /// How many.
        events: u64,
    },
}

impl Event<'_> {
    /// A block request's issue (`issue`) or completion.
    pub fn rq(issue: bool, t_ns: u64, dev: (u32, u32), sector: u64, read: bool) -> Event<'static> {
        if issue {
            Event::RqIssue {
                t_ns,
                dev,
                sector,
                read,
            }
        } else {
            Event::RqComplete {
                t_ns,
                dev,
                sector,
                read,
            }
        }
    }

    /// Its timestamp, ns (none for a lost-events line).
    pub fn t_ns(&self) -> Option<u64> {
        match *self {
            Event::Queue { t_ns, .. }
            | Event::Start { t_ns, .. }
            | Event::End { t_ns, .. }
            | Event::RqIssue { t_ns, .. }
            | Event::RqComplete { t_ns, .. } => Some(t_ns),
            Event::Lost { .. } => None,
        }
    }
}
