//! Workqueues: how a completed read reaches a worker, and how workers sleep
//! and are woken.
//!
//! A [`WorkQueue`] is a bounded lock-free queue (sized for every buffer that
//! can be in flight, so a push never fails and never allocates) plus the
//! sleep state of the workers serving it. `bound` mode has one queue per CPU
//! served by one pinned worker, like a per-CPU kernel workqueue; `unbound`
//! has one queue per pod of `workers.affinity_scope` (the CPUs sharing a
//! last-level cache by default), served by workers that run on the pod's
//! CPUs. A producer
//! wakes a sleeping worker only when one sleeps: the common busy case costs
//! one atomic load, the idle case one futex wake, which is the wakeup whose
//! latency the 2023 fsverity patch measured.
//!
//! A per-CPU queue's workers form a concurrency-managed pool, as the
//! kernel's per-CPU worker pools are: a work item wakes a worker only when
//! none of the pool is running; a worker that blocks (a verify worker
//! reading a missing hash page, see `tree.rs`) leaves the running count,
//! and if items wait the pool wakes another of its workers
//! (`wq_worker_sleeping` -> `kick_pool`); once two run again, the one that
//! finishes first goes idle (`keep_working`). An unbound pool is not
//! concurrency-managed (its workers are WORKER_UNBOUND, never in
//! `nr_running`): every item queued wakes the first idle worker, and a
//! worker that takes an item while more wait wakes it too
//! (`process_one_work`'s `need_more_worker` -> `wake_up_worker`, `kick_pool`
//! since 6.6), where that worker, woken and not yet on a CPU, is still the
//! first idle one, so a second wake wakes nobody new. `max_active` holds
//! items, not workers: a worker takes an item only while the pool runs
//! fewer than `max_active` ([`NodeLimit`]), else it goes back to sleep and
//! the running ones take the item after theirs. A blocked worker holds its
//! item's room. Every queue counts its running and blocked workers for the
//! sampler.
//!
//! A pool made with [`WorkQueue::per_cpu_on_demand`] or
//! [`WorkQueue::unbound_on_demand`] starts with one worker and grows as
//! the kernel's does: when a worker leaves the idle
//! list leaving none, or when work waits with no worker running and none
//! idle (every one blocked), the pool asks its manager
//! ([`WorkQueue::set_manager`]; `need_to_create_worker` ->
//! `maybe_create_worker`), a thread of the pipeline that creates the worker
//! ([`WorkQueue::needs_worker`]), so no reader or worker creates a thread.
//! Workers are not retired (the kernel's idle timeout is 300 s). The
//! manager's tick ([`WorkQueue::tick_cpu_intensive`]) marks an item that
//! has run over 10 ms of its thread's CPU time CPU_INTENSIVE (since 6.5):
//! its worker leaves the running count until the item ends, so the pool
//! wakes or creates another.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
use std::thread::Thread;

use crossbeam_queue::ArrayQueue;

/// One completed read on its way through the post-processing stages. Plain
/// data: the buffer belongs to the reader, which does not touch it until the
/// item comes back through its [`ReturnQueue`].
#[derive(Debug, Clone, Copy)]
pub struct WorkItem {
    /// Start of the read buffer (owned by the reader, stable while in flight).
    pub buf: *mut u8,
    /// Bytes read.
    pub len: u32,
    /// Index of the reader that owns the buffer.
    pub reader: u32,
    /// Buffer slot within that reader.
    pub slot: u32,
    /// File offset of the read.
    pub offset: u64,
    /// Issue time (intended issue time when rate limited), ns.
    pub issue_ns: u64,
    /// When the item was put on its current queue, ns.
    pub enqueue_ns: u64,
    /// Decryption still to do.
    pub needs_decrypt: bool,
    /// The page-cache bio this item is (its global slot), or [`NO_BIO`]
    /// for a read whose buffer is `buf` (direct reads).
    pub bio: u32,
    /// A memory-device bio whose pages are not yet filled: its first
    /// stage fills them from the mapping (decrypting into them).
    pub unfilled: bool,
    /// The CPU that queued it last (set by [`Queues::push`]).
    pub queued_cpu: u32,
    /// The per-CPU workqueue it was queued on ([`Queues::push`] sets it):
    /// its [`Pwq`] in its CPU's pool, or [`NO_PWQ`] (unbound).
    pub pwq: u8,
}

/// [`WorkItem::pwq`] of an item on an unbound queue.
pub const NO_PWQ: u8 = u8::MAX;

/// [`WorkItem::bio`] of an item that is not a page-cache bio.
pub const NO_BIO: u32 = u32::MAX;
/// [`WorkItem::bio`] of a read of tree pages to decrypt (`buf` points at
/// its `tree::TreeJob`, owned by the verify worker waiting for it).
pub const TREE_JOB: u32 = u32::MAX - 1;

// SAFETY: the buffer pointer is handed from the reader to exactly one worker
// at a time (ownership travels with the item) and back; the reader keeps the
// allocation alive until every item has returned.
unsafe impl Send for WorkItem {}

/// Counts one more in `active` if it is under `max` (a `max_active`'s room).
fn take_room(active: &AtomicUsize, max: usize) -> bool {
    let mut a = active.load(Ordering::SeqCst);
    while a < max {
        match active.compare_exchange(a, a + 1, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return true,
            Err(now) => a = now,
        }
    }
    false
}

/// The kernel's per-node `max_active` of an unbound workqueue
/// (`wq_node_nr_active`, v6.9+): the items its pods run at once, together.
/// A worker holding an item waits here for room, as the kernel keeps an
/// item inactive on its pod's pwq until the node has room
/// (`node_activate_pending_pwq`); the wait counts as the item's queue
/// wait. One atomic add each way per item; a waiter parks and the next
/// release wakes it.
#[derive(Debug)]
pub struct NodeLimit {
    active: AtomicUsize,
    max: usize,
    /// Shared by a node's pods: a worker whose pod has items waits here
    /// for room (the node activates a pending pod's items when room
    /// frees). A pod's own limit does not park: its workers running items
    /// take the waiting ones after theirs.
    parks: bool,
    /// Workers waiting for room, each with its thread's waiting flag (an
    /// entry whose flag is down is stale: that worker got room itself).
    waiters: ArrayQueue<(Thread, Arc<AtomicBool>)>,
}

thread_local! {
    /// This thread's "waiting for room" flag (made once per thread).
    static WAITING: Arc<AtomicBool> = Arc::new(AtomicBool::new(false));
}

impl NodeLimit {
    /// A node's limit of `max` items at once, shared by its pods, for at
    /// most `workers` waiting.
    pub fn new(max: usize, workers: usize) -> NodeLimit {
        NodeLimit {
            active: AtomicUsize::new(0),
            max: max.max(1),
            parks: true,
            // Room for every worker plus the stale entries each may leave.
            waiters: ArrayQueue::new(2 * workers.max(1)),
        }
    }

    /// One pod's own `max_active` (a pool with one pod, or an era whose
    /// limit is per pool): nobody waits on it.
    pub fn pod(max: usize) -> NodeLimit {
        NodeLimit {
            parks: false,
            ..NodeLimit::new(max, 1)
        }
    }

    /// The items it lets run at once.
    pub fn max(&self) -> usize {
        self.max
    }

    fn try_acquire(&self) -> bool {
        take_room(&self.active, self.max)
    }

    /// Takes room for one item, parking until there is.
    pub fn acquire(&self) {
        if self.try_acquire() {
            return;
        }
        let flag = WAITING.with(Arc::clone);
        loop {
            // Announce, then look again: a release between the two finds
            // this thread and unparks it (the token makes park return).
            if !flag.swap(true, Ordering::SeqCst) {
                let _ = self.waiters.push((std::thread::current(), flag.clone()));
            }
            if self.try_acquire() {
                flag.store(false, Ordering::SeqCst);
                return;
            }
            // Woken by a release; the timeout only guards an entry the
            // full list could not take (never expected).
            std::thread::park_timeout(std::time::Duration::from_millis(10));
        }
    }

    /// Gives room back and wakes one waiter.
    pub fn release(&self) {
        self.active.fetch_sub(1, Ordering::SeqCst);
        while let Some((t, waiting)) = self.waiters.pop() {
            if waiting.swap(false, Ordering::SeqCst) {
                t.unpark();
                return;
            }
        }
    }

    /// Items running now.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }
}

/// One per-CPU workqueue's share of its CPU's pool: the kernel's
/// `pool_workqueue` of a per-CPU queue, whose `max_active` holds the
/// items of that workqueue active on that CPU at once (`alloc_workqueue`'s
/// `max_active`: fsverity's `num_online_cpus()`, fscrypt's bound queue
/// `WQ_DFL_ACTIVE` = 256). An item queued beyond it is set aside
/// (`pwq->inactive_works`), off the pool's worklist, so it wakes nobody
/// and no worker sees it, whatever blocks; an active item's end moves the
/// first one onto the worklist (`pwq_dec_nr_in_flight` ->
/// `pwq_activate_first_inactive`). Two per-CPU workqueues that share a
/// pool (both WQ_HIGHPRI) each have their own.
#[derive(Debug)]
pub struct Pwq {
    active: AtomicUsize,
    max: usize,
    inactive: ArrayQueue<WorkItem>,
    /// Items that waited here before they were activated.
    deferred: AtomicU64,
}

impl Pwq {
    /// `max` items at once, room for `capacity` set aside.
    pub fn new(max: usize, capacity: usize) -> Pwq {
        Pwq {
            active: AtomicUsize::new(0),
            max: max.max(1),
            inactive: ArrayQueue::new(capacity.max(1)),
            deferred: AtomicU64::new(0),
        }
    }

    fn try_acquire(&self) -> bool {
        take_room(&self.active, self.max)
    }
}

/// [`WorkerWake::state`]: awake.
const AWAKE: u8 = 0;
/// Asleep (or about to park).
const ASLEEP: u8 = 1;
/// Claimed by a waker; in a managed pool already counted as running.
const WOKEN: u8 = 2;

/// [`WorkerWake::item`]: between items.
const NO_ITEM: u8 = 0;
/// In an item, counted as running.
const IN_ITEM: u8 = 1;
/// In an item marked CPU_INTENSIVE (not counted as running).
const INTENSIVE: u8 = 2;
/// In an item, blocked (left the running count).
const BLOCKED: u8 = 3;
/// In a CPU_INTENSIVE item, blocked (was not counted already).
const INTENSIVE_BLOCKED: u8 = 4;

/// Sleep state of one worker.
#[derive(Default)]
pub struct WorkerWake {
    state: AtomicU8,
    thread: OnceLock<Thread>,
    /// The worker thread's CPU-time clock (read by the manager's tick).
    clock: OnceLock<i32>,
    /// What the worker is doing (`NO_ITEM`...).
    item: AtomicU8,
    /// Items it started.
    items: AtomicU64,
    /// The manager's: `items` when it last looked, and the thread's CPU
    /// time when it first saw that item.
    seen_items: AtomicU64,
    seen_cpu: AtomicU64,
    /// Created by the manager, not yet on the idle list.
    fresh: AtomicBool,
    /// The worker thread's id (0 until it registers).
    tid: AtomicI32,
    /// The CPU it last went idle on, in a pool with a [`Home`] (stored
    /// before it is marked asleep, so a waker that claims it reads it).
    cpu: AtomicUsize,
    /// Its waker pointed it at its pod; it widens itself again on waking.
    repatriated: AtomicBool,
}

thread_local! {
    /// The queue (its address) and slot of the worker this thread is.
    static CURRENT: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// A bounded queue and the workers that serve it.
pub struct WorkQueue {
    /// The node's limit on items run at once, shared with the other pods
    /// of an unbound queue (none for one pod or a per-CPU pool).
    limit: OnceLock<Arc<NodeLimit>>,
    /// A per-CPU pool's workqueues' shares of it ([`WorkItem::pwq`]
    /// indexes them): the first queue's and the second's.
    pwqs: [OnceLock<Pwq>; 2],
    q: ArrayQueue<WorkItem>,
    idle: AtomicUsize,
    workers: Vec<WorkerWake>,
    /// A per-CPU pool (concurrency-managed).
    managed: bool,
    /// Workers running (awake, not blocked), `nr_running`.
    running: AtomicUsize,
    /// Workers blocked in an item (reading the tree).
    blocked: AtomicUsize,
    /// Most workers blocked at once since the sampler last looked.
    blocked_peak: AtomicUsize,
    /// The worker that went idle last (woken first).
    last_idle: AtomicUsize,
    /// Workers created (or being created): slots `0..nr_workers` of `workers`.
    nr_workers: AtomicUsize,
    /// Created by the manager and not yet on the idle list.
    starting: AtomicUsize,
    /// A worker left the idle list leaving none (the manager makes one).
    want_worker: AtomicBool,
    /// The thread that creates this pool's workers (on-demand pools).
    manager: OnceLock<Thread>,
    /// Items marked CPU_INTENSIVE.
    cpu_intensive: AtomicU64,
    /// Its manager marks CPU_INTENSIVE items (6.5+).
    detects_intensive: AtomicBool,
    /// Unbound: a worker it woke is not running yet. That worker is still
    /// the first idle one, so a wake finds it and wakes nobody new.
    woken: AtomicBool,
    /// Wakeups of its workers (claims of a sleeping worker).
    wakes: AtomicU64,
    /// A non-strict pod's CPUs, where a waking worker is pointed back
    /// (6.6+; see [`Self::set_home`]).
    home: OnceLock<Home>,
    /// Wakes that pointed a worker back at its pod.
    repatriated: AtomicU64,
}

/// A non-strict unbound pod's home: its CPUs, where the kernel's
/// `kick_pool` points a worker it wakes that is outside them (v6.6+:
/// `p->wake_cpu`, the pwq's `PWQ_STAT_REPATRIATED`), and the CPUs its
/// workers may otherwise run on.
#[derive(Debug)]
struct Home {
    pod: Vec<usize>,
    widen: Vec<usize>,
}

/// What a queue's workers are doing, as the sampler sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolState {
    /// Worker threads.
    pub workers: usize,
    /// Running (awake, not blocked).
    pub running: usize,
    /// Blocked in an item.
    pub blocked: usize,
    /// Most blocked at once since the last look.
    pub blocked_peak: usize,
    /// Items waiting.
    pub pending: usize,
    /// Workers the pool created since it started (the first included).
    pub created: usize,
    /// Items marked CPU_INTENSIVE since it started.
    pub cpu_intensive: u64,
    /// Items set aside for their workqueue's per-CPU `max_active` since it
    /// started (see [`Pwq`]).
    pub deferred: u64,
    /// Wakes that pointed a worker outside its pod back at it since it
    /// started (see [`WorkQueue::set_home`]).
    pub repatriated: u64,
}

impl WorkQueue {
    /// A queue for at most `capacity` items served by `workers` workers
    /// (an unbound pool's).
    pub fn new(capacity: usize, workers: usize) -> Self {
        WorkQueue {
            limit: OnceLock::new(),
            pwqs: [OnceLock::new(), OnceLock::new()],
            q: ArrayQueue::new(capacity.max(1)),
            idle: AtomicUsize::new(0),
            workers: (0..workers).map(|_| WorkerWake::default()).collect(),
            managed: false,
            running: AtomicUsize::new(0),
            blocked: AtomicUsize::new(0),
            blocked_peak: AtomicUsize::new(0),
            last_idle: AtomicUsize::new(0),
            nr_workers: AtomicUsize::new(workers),
            starting: AtomicUsize::new(0),
            want_worker: AtomicBool::new(false),
            manager: OnceLock::new(),
            cpu_intensive: AtomicU64::new(0),
            detects_intensive: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            wakes: AtomicU64::new(0),
            home: OnceLock::new(),
            repatriated: AtomicU64::new(0),
        }
    }

    /// An unbound pool's queue (not a per-CPU, concurrency-managed one).
    pub fn unbound(&self) -> bool {
        !self.managed
    }

    /// A per-CPU queue: a concurrency-managed pool of `workers` workers.
    pub fn per_cpu(capacity: usize, workers: usize) -> Self {
        WorkQueue {
            managed: true,
            ..Self::new(capacity, workers)
        }
    }

    /// A per-CPU pool that starts with one worker (slot 0, which the
    /// pipeline starts) and whose manager creates more, up to `max_workers`.
    pub fn per_cpu_on_demand(capacity: usize, max_workers: usize) -> Self {
        let q = Self::per_cpu(capacity, max_workers.max(2));
        q.nr_workers.store(1, Ordering::Relaxed);
        q
    }

    /// An unbound pool that starts with one worker (slot 0, which the
    /// pipeline starts) and whose manager creates more, up to
    /// `max_workers`: one when a worker leaves the idle list leaving none
    /// (6.1's `may_start_working` -> `manage_workers`; the pool keeps an
    /// idle one in reserve). Its `max_active` is the limit set with
    /// [`Self::set_node_limit`].
    pub fn unbound_on_demand(capacity: usize, max_workers: usize) -> Self {
        let q = Self::new(capacity, max_workers.max(2));
        q.nr_workers.store(1, Ordering::Relaxed);
        q
    }

    /// Times one of its workers was woken (tests; each a futex wake).
    pub fn wakes(&self) -> u64 {
        self.wakes.load(Ordering::Relaxed)
    }

    /// The thread that creates this pool's workers: woken when the pool
    /// needs one; `cpu_intensive`: it also marks CPU_INTENSIVE items.
    pub fn set_manager(&self, t: Thread, cpu_intensive: bool) {
        self.detects_intensive
            .store(cpu_intensive, Ordering::Relaxed);
        let _ = self.manager.set(t);
    }

    /// True when a manager creates this pool's workers on demand.
    pub fn on_demand(&self) -> bool {
        self.manager.get().is_some()
    }

    /// True when its manager marks CPU_INTENSIVE items.
    pub fn detects_cpu_intensive(&self) -> bool {
        self.detects_intensive.load(Ordering::Relaxed)
    }

    /// True for a concurrency-managed (per-CPU) pool.
    pub fn is_managed(&self) -> bool {
        self.managed
    }

    /// Worker threads serving the queue (created so far).
    pub fn worker_count(&self) -> usize {
        self.nr_workers.load(Ordering::SeqCst)
    }

    /// Manager side: whether the pool needs another worker now (the
    /// kernel's `need_to_create_worker`: work waits with none running, or a
    /// worker left idle leaving none, and none is idle or starting); if so,
    /// the new worker's slot, counted as starting. None when every slot is
    /// taken.
    pub fn needs_worker(&self) -> Option<usize> {
        // Only a pool with a manager grows.
        self.manager.get()?;
        let want = self.want_worker.swap(false, Ordering::SeqCst);
        let none_idle =
            self.idle.load(Ordering::SeqCst) == 0 && self.starting.load(Ordering::SeqCst) == 0;
        let waits = !self.q.is_empty() && self.running.load(Ordering::SeqCst) == 0;
        if !(none_idle && (want || waits)) {
            return None;
        }
        let n = self.nr_workers.load(Ordering::SeqCst);
        if n >= self.workers.len() {
            return None;
        }
        self.starting.fetch_add(1, Ordering::SeqCst);
        self.workers[n].fresh.store(true, Ordering::SeqCst);
        self.nr_workers.store(n + 1, Ordering::SeqCst);
        Some(n)
    }

    /// The worker the manager announced with [`Self::needs_worker`] could
    /// not be started.
    pub fn worker_failed(&self) {
        let n = self.nr_workers.fetch_sub(1, Ordering::SeqCst) - 1;
        self.workers[n].fresh.store(false, Ordering::SeqCst);
        self.starting.fetch_sub(1, Ordering::SeqCst);
    }

    /// Asks the manager for a worker (cold: a pool out of idle workers).
    #[cold]
    fn request_worker(&self) {
        if let Some(m) = self.manager.get()
            && self.nr_workers.load(Ordering::Relaxed) < self.workers.len()
        {
            self.want_worker.store(true, Ordering::SeqCst);
            m.unpark();
        }
    }

    /// The calling thread's slot when it is a worker of this queue.
    fn me(&self) -> Option<&WorkerWake> {
        let (q, i) = CURRENT.with(Cell::get);
        (q == self as *const _ as usize).then(|| &self.workers[i])
    }

    /// Manager side, on its tick: marks CPU_INTENSIVE each item that has
    /// run over `thresh_ns` of its worker's CPU time since the manager
    /// first saw it (`wq_worker_tick`); the worker leaves the running count
    /// until the item ends, and waiting work gets another worker.
    pub fn tick_cpu_intensive(&self, thresh_ns: u64) {
        if !self.managed {
            return;
        }
        let n = self
            .nr_workers
            .load(Ordering::SeqCst)
            .min(self.workers.len());
        for w in &self.workers[..n] {
            if w.item.load(Ordering::SeqCst) != IN_ITEM {
                continue;
            }
            let Some(cpu) = w.clock.get().and_then(|&c| crate::sys::cpu_clock_ns(c)) else {
                continue;
            };
            let items = w.items.load(Ordering::SeqCst);
            if w.seen_items.swap(items, Ordering::Relaxed) != items {
                w.seen_cpu.store(cpu, Ordering::Relaxed);
                continue;
            }
            if cpu.saturating_sub(w.seen_cpu.load(Ordering::Relaxed)) > thresh_ns
                && w.item
                    .compare_exchange(IN_ITEM, INTENSIVE, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                self.cpu_intensive.fetch_add(1, Ordering::Relaxed);
                self.run_end();
                self.kick();
            }
        }
    }

    /// Work waits and none of the pool runs: wake an idle worker, or ask
    /// the manager for one when none is idle.
    fn kick(&self) {
        if self.managed && self.running.load(Ordering::SeqCst) == 0 && !self.q.is_empty() {
            if self.idle.load(Ordering::SeqCst) > 0 {
                self.wake_one();
            } else {
                self.request_worker();
            }
        }
    }

    /// Worker `i` starts an item.
    #[inline]
    fn item_start(&self, i: usize) {
        let w = &self.workers[i];
        w.item.store(IN_ITEM, Ordering::SeqCst);
        w.items.fetch_add(1, Ordering::Relaxed);
    }

    /// Worker `i` ended its item: a CPU_INTENSIVE one runs again.
    #[inline]
    fn item_end(&self, i: usize) {
        if self.workers[i].item.swap(NO_ITEM, Ordering::SeqCst) == INTENSIVE {
            self.run_start();
        }
    }

    /// A worker starts running (woke, or started).
    #[inline]
    pub fn run_start(&self) {
        self.running.fetch_add(1, Ordering::SeqCst);
    }

    /// A worker stops running (goes idle, or exits).
    #[inline]
    pub fn run_end(&self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
    }

    /// After an item: true when this worker keeps working. In a managed
    /// pool with another worker running, it goes idle instead (false: it
    /// left the running count), unless that one stopped meanwhile.
    #[inline]
    pub fn keep_working(&self) -> bool {
        if !self.managed || self.running.load(Ordering::SeqCst) <= 1 {
            return true;
        }
        if self.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            // The other went idle between the two loads: this one stays.
            self.running.fetch_add(1, Ordering::SeqCst);
            return true;
        }
        false
    }

    /// A worker of this queue blocks in its item: it leaves the running
    /// count, and a managed pool with items waiting and nobody running
    /// wakes another worker.
    pub fn block(&self) {
        // A CPU_INTENSIVE item's worker is out of the running count
        // already (`wq_worker_sleeping` skips WORKER_NOT_RUNNING).
        let counted = match self.me() {
            Some(w) => {
                match w
                    .item
                    .compare_exchange(IN_ITEM, BLOCKED, Ordering::SeqCst, Ordering::SeqCst)
                {
                    Err(INTENSIVE) => {
                        w.item.store(INTENSIVE_BLOCKED, Ordering::SeqCst);
                        false
                    }
                    _ => true,
                }
            }
            None => true,
        };
        if counted {
            self.running.fetch_sub(1, Ordering::SeqCst);
        }
        let b = self.blocked.fetch_add(1, Ordering::SeqCst) + 1;
        self.blocked_peak.fetch_max(b, Ordering::Relaxed);
        self.kick();
    }

    /// The blocked worker runs again.
    pub fn unblock(&self) {
        self.blocked.fetch_sub(1, Ordering::SeqCst);
        let counted = match self.me() {
            Some(w) => {
                let was = w.item.load(Ordering::SeqCst);
                w.item.store(
                    if was == INTENSIVE_BLOCKED {
                        INTENSIVE
                    } else {
                        IN_ITEM
                    },
                    Ordering::SeqCst,
                );
                was != INTENSIVE_BLOCKED
            }
            None => true,
        };
        if counted {
            self.running.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Worker `index`'s loop: takes items and runs `work` on each until
    /// `stop` is set and the queue is empty, sleeping when there is nothing
    /// to do; `tick` runs before each look (the sampler's handoff). In the
    /// running count while awake: a pool's workers after the first start
    /// idle (as the kernel's `create_worker` puts a new worker on the idle
    /// list), and in a managed pool one goes idle after an item when
    /// another runs.
    pub fn serve<S>(
        &self,
        index: usize,
        stop: &AtomicBool,
        state: &mut S,
        tick: impl Fn(&mut S),
        idle: impl Fn(&mut S, bool),
        mut work: impl FnMut(&mut S, WorkItem),
    ) {
        CURRENT.with(|c| c.set((self as *const _ as usize, index)));
        if let Some(clock) = crate::sys::current_thread_cpu_clock() {
            let _ = self.workers[index].clock.set(clock);
        }
        let mut running = index == 0;
        if running {
            self.run_start();
        }
        loop {
            tick(state);
            if running && let Some(item) = self.take(true) {
                self.chain();
                self.item_start(index);
                self.run_limited(state, item, &mut work);
                self.item_end(index);
                running = self.keep_working();
                continue;
            }
            if stop.load(Ordering::SeqCst) {
                break;
            }
            // Published before it may park, so the sampler need not wake
            // it; marked awake again before it records anything.
            idle(state, true);
            let item = self.sleep_from(index, running);
            idle(state, false);
            running = true;
            if let Some(item) = item {
                self.item_start(index);
                self.run_limited(state, item, &mut work);
                self.item_end(index);
                running = self.keep_working();
            }
        }
        if running {
            self.run_end();
        }
    }

    /// The unbound pool's `max_active`: its own ([`NodeLimit::pod`]) or
    /// its node's, shared with the other pods of its queue.
    pub fn set_node_limit(&self, limit: Arc<NodeLimit>) {
        let _ = self.limit.set(limit);
    }

    /// Runs `item`, taken with [`Self::take`], and gives its room back.
    #[inline]
    fn run_limited<S>(
        &self,
        state: &mut S,
        item: WorkItem,
        work: &mut impl FnMut(&mut S, WorkItem),
    ) {
        let pwq = item.pwq;
        work(state, item);
        if let Some(l) = self.limit.get() {
            l.release();
        }
        self.pwq_done(pwq);
    }

    /// A worker takes the next item: in a limited (unbound) pool only with
    /// room for it, which it then holds. Without room it takes nothing and
    /// goes back to sleep (the running workers take the item after
    /// theirs), unless the room is its node's (`park`): then it waits for
    /// room as the node's pending pods do. The worker, off the idle list,
    /// then calls [`Self::chain`].
    #[inline]
    fn take(&self, park: bool) -> Option<WorkItem> {
        let Some(l) = self.limit.get() else {
            return self.q.pop();
        };
        if self.q.is_empty() {
            return None;
        }
        if !l.try_acquire() {
            if !(park && l.parks) {
                return None;
            }
            l.acquire();
        }
        let item = self.q.pop();
        if item.is_none() {
            l.release();
        }
        item
    }

    /// An unbound worker, awake, took an item: more wait and there is room
    /// for them, so it wakes the first idle worker (`process_one_work`:
    /// `need_more_worker` -> `wake_up_worker`). With none idle (nor one
    /// being made), it asks the manager for one: the pool keeps one in
    /// reserve (the kernel's first worker, woken, makes the second).
    #[inline]
    fn chain(&self) {
        if self.managed {
            return;
        }
        let limit = self.limit.get();
        if self.idle.load(Ordering::SeqCst) == 0 {
            if self.starting.load(Ordering::SeqCst) == 0 {
                self.request_worker();
            }
        } else if !self.q.is_empty() && limit.is_none_or(|l| l.active() < l.max) {
            self.wake_one();
        }
    }

    /// The pool's state now (the blocked peak is reset).
    pub fn state(&self) -> PoolState {
        PoolState {
            workers: self.worker_count(),
            created: self.worker_count(),
            cpu_intensive: self.cpu_intensive.load(Ordering::Relaxed),
            deferred: self
                .pwqs()
                .map(|p| p.deferred.load(Ordering::Relaxed))
                .sum(),
            repatriated: self.repatriated.load(Ordering::Relaxed),
            running: self.running.load(Ordering::Relaxed),
            blocked: self.blocked.load(Ordering::Relaxed),
            blocked_peak: self
                .blocked_peak
                .swap(self.blocked.load(Ordering::Relaxed), Ordering::Relaxed),
            pending: self.q.len() + self.pwqs().map(|p| p.inactive.len()).sum::<usize>(),
        }
    }

    /// Called by worker `i` when it starts, so producers can wake it.
    pub fn register_worker(&self, i: usize) {
        self.workers[i]
            .tid
            .store(crate::sys::gettid(), Ordering::Relaxed);
        let _ = self.workers[i].thread.set(std::thread::current());
    }

    /// An unbound pod that is not strict (6.6+): its workers may run on
    /// `widen`, and a worker woken while outside `pod` is pointed back at
    /// it first, as the kernel's `kick_pool` sets the woken worker's
    /// `wake_cpu` to a CPU of its pod. The kernel's is a hint to the
    /// scheduler's choice of CPU; here the sleeping thread is pinned to the
    /// pod before its wake and widens itself again once it runs.
    pub fn set_home(&self, pod: Vec<usize>, widen: Vec<usize>) {
        let _ = self.home.set(Home { pod, widen });
    }

    /// `kick_pool`'s repatriation of worker `w`, about to be woken: if it
    /// went idle outside the pod, pin it to the pod (its thread widens
    /// itself again on waking). `w`'s thread id is a live thread of this
    /// process: a claimed worker is asleep in its loop, and a pipeline's
    /// producers stop before its workers exit.
    #[cold]
    fn repatriate(&self, w: &WorkerWake, home: &Home) {
        let cpu = w.cpu.load(Ordering::Relaxed);
        let tid = w.tid.load(Ordering::Relaxed);
        if tid == 0 || home.pod.contains(&cpu) {
            return;
        }
        if crate::sys::pin_thread(tid, &home.pod).is_ok() {
            w.repatriated.store(true, Ordering::Relaxed);
            self.repatriated.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A per-CPU pool: workqueue `i` (0 the first queue, 1 the second)
    /// runs at most `max` items at once here; `capacity` bounds the items
    /// it may set aside.
    pub fn set_pwq(&self, i: u8, max: usize, capacity: usize) {
        if let Some(slot) = self.pwqs.get(i as usize) {
            let _ = slot.set(Pwq::new(max, capacity));
        }
    }

    /// The workqueues' shares of this pool that are set.
    fn pwqs(&self) -> impl Iterator<Item = &Pwq> {
        self.pwqs.iter().filter_map(OnceLock::get)
    }

    /// Workqueue `i`'s share of this pool, if it has one.
    #[inline]
    fn pwq_of(&self, i: u8) -> Option<&Pwq> {
        self.pwqs.get(i as usize)?.get()
    }

    /// Workqueue `i`'s items set aside now, and set aside since the start.
    pub fn inactive(&self, i: u8) -> (usize, u64) {
        self.pwq_of(i).map_or((0, 0), |p| {
            (p.inactive.len(), p.deferred.load(Ordering::Relaxed))
        })
    }

    /// Queues an item and wakes a sleeping worker if there is one; on a
    /// per-CPU pool whose workqueue runs `max_active` items already, sets
    /// it aside instead (see [`Pwq`]).
    #[inline]
    pub fn push(&self, item: WorkItem) {
        if let Some(p) = self.pwq_of(item.pwq)
            && !p.try_acquire()
        {
            self.set_aside(p, item);
            return;
        }
        self.push_active(item);
    }

    /// Sets `item` aside on its workqueue `p` (at `max_active`), then
    /// activates what room freed meanwhile.
    #[cold]
    fn set_aside(&self, p: &Pwq, item: WorkItem) {
        if p.inactive.push(item).is_err() {
            unreachable!("inactive list sized below the number of buffers in flight");
        }
        p.deferred.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        self.activate(p);
    }

    /// Moves items set aside on `p` onto the worklist while it has room.
    /// Whoever last changed either (a push setting an item aside, an
    /// item's end giving room back) looks after its change, so no item
    /// stays aside with room free.
    fn activate(&self, p: &Pwq) {
        while !p.inactive.is_empty() && p.try_acquire() {
            match p.inactive.pop() {
                Some(item) => self.push_active(item),
                None => {
                    p.active.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
    }

    /// An item of workqueue `i` ended: its room goes to the first item set
    /// aside, if any.
    #[inline]
    fn pwq_done(&self, i: u8) {
        if let Some(p) = self.pwq_of(i) {
            p.active.fetch_sub(1, Ordering::SeqCst);
            if !p.inactive.is_empty() {
                self.activate(p);
            }
        }
    }

    /// Puts an active item on the worklist and wakes a sleeping worker if
    /// the pool needs one.
    #[inline]
    fn push_active(&self, item: WorkItem) {
        if self.q.push(item).is_err() {
            // Capacity covers every buffer of every reader: unreachable by construction.
            unreachable!("work queue sized below the number of buffers in flight");
        }
        fence(Ordering::SeqCst);
        // A managed pool wakes a worker only when none runs (a running one
        // takes the item when it finishes its own).
        if !self.managed || self.running.load(Ordering::SeqCst) == 0 {
            if self.idle.load(Ordering::SeqCst) > 0 {
                self.wake_one();
            } else if self.managed {
                // Every worker is blocked or CPU_INTENSIVE: the manager
                // makes one (rare: not the busy case).
                self.request_worker();
            }
        }
    }

    #[cold]
    fn wake_one(&self) {
        // A managed pool wakes one worker only while none runs, and counts
        // it as running at once (the kernel's `nr_running` test under the
        // pool lock): a second item queued before it is on a CPU finds it
        // counted and wakes nobody else.
        if self.managed
            && (self.q.is_empty()
                || self
                    .running
                    .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err())
        {
            return;
        }
        // An unbound pool wakes its first idle worker: one woken and not
        // yet running is still that one, and is woken already.
        if !self.managed
            && self
                .woken
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
        {
            return;
        }
        // The most recently idle worker first (the kernel's idle list is
        // LIFO): its cache is warm, and in a pool it is the one that just
        // ran, so the others stay asleep.
        let last = self.last_idle.load(Ordering::Relaxed);
        let first = self.workers.get(last).into_iter();
        let n = self.worker_count().min(self.workers.len());
        for w in first.chain(self.workers[..n].iter()) {
            if w.state
                .compare_exchange(ASLEEP, WOKEN, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                self.wakes.fetch_add(1, Ordering::Relaxed);
                if let Some(home) = self.home.get() {
                    self.repatriate(w, home);
                }
                if let Some(t) = w.thread.get() {
                    t.unpark();
                }
                return;
            }
        }
        // Nobody asleep after all: give the count back.
        if self.managed {
            self.running.fetch_sub(1, Ordering::SeqCst);
        } else {
            self.woken.store(false, Ordering::SeqCst);
        }
    }

    /// Takes the next item, if any (a test's worker, outside [`Self::serve`]).
    #[cfg(test)]
    pub fn pop(&self) -> Option<WorkItem> {
        self.q.pop()
    }

    /// Worker `i` sleeps until woken, unless an item arrived meanwhile.
    /// Returns an item if one was found instead of sleeping (a test's
    /// worker, outside [`Self::serve`]).
    #[cfg(test)]
    pub fn sleep(&self, i: usize) -> Option<WorkItem> {
        let item = self.sleep_from(i, false);
        self.run_end();
        item
    }

    /// [`Self::sleep`] for a worker of [`Self::serve`], which is in the
    /// running count again when this returns; `running`: it leaves the
    /// running count too, after it is marked asleep, so a producer that
    /// sees nobody running finds this worker to wake rather than another.
    fn sleep_from(&self, i: usize, running: bool) -> Option<WorkItem> {
        let me = &self.workers[i];
        let home = self.home.get();
        if home.is_some() {
            me.cpu.store(crate::sys::current_cpu(), Ordering::Relaxed);
        }
        me.state.store(ASLEEP, Ordering::SeqCst);
        self.last_idle.store(i, Ordering::Relaxed);
        self.idle.fetch_add(1, Ordering::SeqCst);
        if me.fresh.swap(false, Ordering::SeqCst) {
            // A worker the manager created is on the idle list now.
            self.starting.fetch_sub(1, Ordering::SeqCst);
        }
        if running {
            self.run_end();
        }
        // In a managed pool a worker going idle takes a waiting item only
        // when none of the pool runs (the running one takes it otherwise:
        // `need_more_worker`).
        let item = if self.managed && self.running.load(Ordering::SeqCst) > 0 {
            None
        } else {
            self.take(false)
        };
        if item.is_none() {
            std::thread::park();
        }
        let was = me.state.swap(AWAKE, Ordering::SeqCst);
        if let Some(h) = home
            && me.repatriated.swap(false, Ordering::Relaxed)
        {
            // Woken on its pod: it may run anywhere again, as a
            // non-strict pod's kworker may.
            let _ = crate::sys::pin_current_thread(&h.widen);
        }
        if was == WOKEN && !self.managed {
            // On a CPU now: no longer the woken first idle worker.
            self.woken.store(false, Ordering::SeqCst);
        }
        // A waker of a managed pool counted this worker running already.
        if !(self.managed && was == WOKEN) {
            self.run_start();
        }
        // The last idle worker leaves: the pool keeps one in reserve
        // (`may_start_working`), so the manager makes another.
        if self.idle.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.request_worker();
        }
        if item.is_some() {
            self.chain();
        }
        item
    }

    /// Wakes every worker (shutdown, or the sampler's interval handoff).
    pub fn wake_all(&self) {
        for w in &self.workers[..self.worker_count().min(self.workers.len())] {
            if let Some(t) = w.thread.get() {
                t.unpark();
            }
        }
    }

    /// Items waiting.
    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// True when no item waits.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}

/// How the reader that owns a buffer is told it is free again.
pub enum ReaderWaker {
    /// An eventfd the io_uring reader keeps a read armed on.
    EventFd(crate::sys::EventFd),
    /// The sync reader parks its thread.
    Park(OnceLock<Thread>),
}

/// Buffers coming back to their reader after post-processing.
pub struct ReturnQueue {
    q: ArrayQueue<u32>,
    sleeping: AtomicBool,
    /// A bio this reader waits for ended (set by [`Self::poke`]).
    poked: AtomicBool,
    waker: ReaderWaker,
}

impl ReturnQueue {
    /// A return path for `capacity` buffers.
    pub fn new(capacity: usize, waker: ReaderWaker) -> Self {
        ReturnQueue {
            q: ArrayQueue::new(capacity.max(1)),
            sleeping: AtomicBool::new(false),
            poked: AtomicBool::new(false),
            waker,
        }
    }

    /// The waker (the reader registers its thread or eventfd).
    pub fn waker(&self) -> &ReaderWaker {
        &self.waker
    }

    /// Gives buffer `slot` back and wakes the reader if it sleeps.
    #[inline]
    pub fn give_back(&self, slot: u32) {
        if self.q.push(slot).is_err() {
            unreachable!("return queue sized below the reader's buffers");
        }
        fence(Ordering::SeqCst);
        self.wake_if_sleeping();
    }

    /// Wakes the reader if it announced a sleep (one atomic load when not).
    #[inline]
    fn wake_if_sleeping(&self) {
        if self.sleeping.load(Ordering::SeqCst)
            && self
                .sleeping
                .compare_exchange(true, false, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            self.wake();
        }
    }

    #[cold]
    fn wake(&self) {
        match &self.waker {
            ReaderWaker::EventFd(fd) => fd.signal(),
            ReaderWaker::Park(t) => {
                if let Some(t) = t.get() {
                    t.unpark();
                }
            }
        }
    }

    /// Tells the reader a bio it waits for ended (a page it wants may be
    /// uptodate now), waking it if it sleeps. One atomic store when awake.
    #[inline]
    pub fn poke(&self) {
        self.poked.store(true, Ordering::SeqCst);
        self.wake_if_sleeping();
    }

    /// Reader side: true (once) when a bio it waits for ended since the last call.
    #[inline]
    pub fn take_poke(&self) -> bool {
        self.poked.load(Ordering::Relaxed) && self.poked.swap(false, Ordering::SeqCst)
    }

    /// Wakes the reader unconditionally (the pipeline is stopping).
    pub fn wake_for_shutdown(&self) {
        self.wake();
    }

    /// True when a buffer came back and was not taken yet.
    #[inline]
    pub fn has_returns(&self) -> bool {
        !self.q.is_empty()
    }

    /// Takes a returned buffer.
    #[inline]
    pub fn pop(&self) -> Option<u32> {
        self.q.pop()
    }

    /// Reader side: announce the intent to sleep. Returns false (and does
    /// not sleep) when a buffer already came back.
    pub fn prepare_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        if !self.q.is_empty() || self.poked.load(Ordering::SeqCst) {
            self.sleeping.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Reader side: awake again.
    pub fn end_sleep(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
    }
}

/// One pod of an unbound queue: its queue and the CPUs its workers run on.
pub struct Pod {
    /// The pod's queue.
    pub q: Arc<WorkQueue>,
    /// Its CPUs (sorted).
    pub cpus: Vec<usize>,
}

/// A set of queues for one stage placement.
pub enum Queues {
    /// Per-CPU queues; index = CPU number (None for CPUs we may not use).
    Bound {
        /// Queue of each CPU.
        by_cpu: Vec<Option<Arc<WorkQueue>>>,
        /// Fallback for an unexpected CPU number.
        first: Arc<WorkQueue>,
        /// This workqueue's share of each CPU's pool ([`WorkItem::pwq`]):
        /// two workqueues may share the pools.
        pwq: u8,
    },
    /// An unbound queue: one pool per pod (`workers.affinity_scope`), a
    /// work item going to the pod of the CPU that queues it, as the kernel's
    /// unbound workqueues do since v6.5 (one pod of every CPU with
    /// `system`).
    Unbound {
        /// The pods, in the order of their first CPU.
        pods: Vec<Pod>,
        /// Index into `pods` of each CPU (0 for a CPU outside every pod).
        pod_of: Vec<usize>,
    },
}

impl Queues {
    /// An unbound queue over `pods` (at least one, none empty).
    pub fn unbound(pods: Vec<Pod>) -> Queues {
        let max_cpu = pods
            .iter()
            .flat_map(|p| p.cpus.iter().copied())
            .max()
            .unwrap_or(0);
        let mut pod_of = vec![0; max_cpu + 1];
        for (i, p) in pods.iter().enumerate() {
            for &c in &p.cpus {
                pod_of[c] = i;
            }
        }
        Queues::Unbound { pods, pod_of }
    }

    #[inline]
    pub fn push(&self, mut item: WorkItem, cpu: usize) {
        item.queued_cpu = cpu as u32;
        match self {
            Queues::Bound { by_cpu, first, pwq } => {
                item.pwq = *pwq;
                by_cpu
                    .get(cpu)
                    .and_then(|q| q.as_ref())
                    .unwrap_or(first)
                    .push(item)
            }
            Queues::Unbound { pods, pod_of } => {
                item.pwq = NO_PWQ;
                pods[pod_of.get(cpu).copied().unwrap_or(0)].q.push(item)
            }
        }
    }

    pub fn all(&self) -> Vec<Arc<WorkQueue>> {
        match self {
            Queues::Bound { by_cpu, .. } => by_cpu.iter().flatten().cloned().collect(),
            Queues::Unbound { pods, .. } => pods.iter().map(|p| p.q.clone()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_limit_holds_the_pods_to_max_active_and_loses_no_waiter() {
        let l = Arc::new(NodeLimit::new(2, 8));
        let now = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let (l, now, peak, done) = (l.clone(), now.clone(), peak.clone(), done.clone());
                std::thread::spawn(move || {
                    for _ in 0..2000 {
                        l.acquire();
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(n, Ordering::SeqCst);
                        std::hint::spin_loop();
                        now.fetch_sub(1, Ordering::SeqCst);
                        l.release();
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(done.load(Ordering::SeqCst), 16_000);
        assert!(peak.load(Ordering::SeqCst) <= 2, "{peak:?}");
        assert_eq!(l.active(), 0);
    }
    use std::sync::Arc;

    fn item(slot: u32) -> WorkItem {
        WorkItem {
            buf: std::ptr::null_mut(),
            len: 0,
            reader: 0,
            slot,
            offset: 0,
            issue_ns: 0,
            enqueue_ns: 0,
            queued_cpu: 0,
            pwq: NO_PWQ,
            needs_decrypt: false,
            bio: NO_BIO,
            unfilled: false,
        }
    }

    #[test]
    fn sleeping_worker_is_woken_by_push() {
        let q = Arc::new(WorkQueue::new(8, 1));
        let q2 = q.clone();
        let t = std::thread::spawn(move || {
            q2.register_worker(0);
            let mut got = 0;
            while got < 100 {
                match q2.pop().or_else(|| q2.sleep(0)) {
                    Some(_) => got += 1,
                    None => continue,
                }
            }
            got
        });
        for i in 0..100 {
            while q.len() >= 8 {
                std::thread::yield_now();
            }
            q.push(item(i));
            if i % 10 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        assert_eq!(t.join().unwrap(), 100);
    }

    /// Workers 0 and 1 of `q`, serving it with `work(worker, item)` until
    /// `stop`.
    fn two_workers(
        q: &Arc<WorkQueue>,
        stop: &Arc<std::sync::atomic::AtomicBool>,
        work: impl Fn(usize, WorkItem) + Send + Sync + 'static,
    ) -> Vec<std::thread::JoinHandle<()>> {
        let work = Arc::new(work);
        (0..2)
            .map(|i| {
                let (q, stop, work) = (q.clone(), stop.clone(), work.clone());
                std::thread::spawn(move || {
                    q.register_worker(i);
                    q.serve(i, &stop, &mut (), |_| {}, |_, _| {}, |_, it| work(i, it))
                })
            })
            .collect()
    }

    /// Two workers serving `q` until `stop`, the one that takes slot 0
    /// blocked in it (out of the running count) until `release`; each
    /// item's slot goes to `done` as it ends.
    struct BlockingPool {
        stop: Arc<std::sync::atomic::AtomicBool>,
        release: Arc<std::sync::atomic::AtomicBool>,
        done: Arc<std::sync::Mutex<Vec<u32>>>,
        threads: Vec<std::thread::JoinHandle<()>>,
    }

    impl BlockingPool {
        /// Starts the workers and pushes `first` (slot 0), returning once
        /// its worker blocks.
        fn start(q: &Arc<WorkQueue>, first: WorkItem) -> BlockingPool {
            use std::sync::atomic::AtomicBool;
            let stop = Arc::new(AtomicBool::new(false));
            let release = Arc::new(AtomicBool::new(false));
            let done = Arc::new(std::sync::Mutex::new(Vec::new()));
            let threads = {
                let (q2, release, done) = (q.clone(), release.clone(), done.clone());
                two_workers(q, &stop, move |_, it| {
                    if it.slot == 0 {
                        q2.block();
                        while !release.load(Ordering::SeqCst) {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                        q2.unblock();
                    }
                    done.lock().unwrap().push(it.slot);
                })
            };
            q.push(first);
            let t0 = std::time::Instant::now();
            while q.state().blocked == 0 && t0.elapsed().as_secs() < 10 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            assert_eq!(q.state().blocked, 1);
            BlockingPool {
                stop,
                release,
                done,
                threads,
            }
        }

        /// Slots done so far.
        fn done(&self) -> Vec<u32> {
            self.done.lock().unwrap().clone()
        }

        /// Waits (at most `secs`) until `n` items are done.
        fn wait_done(&self, n: usize, secs: u64) {
            let t0 = std::time::Instant::now();
            while self.done.lock().unwrap().len() < n && t0.elapsed().as_secs() < secs {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }

        /// Releases slot 0, waits for `n` items in all, stops the workers.
        fn finish(self, q: &WorkQueue, n: usize) -> Vec<u32> {
            self.release.store(true, Ordering::SeqCst);
            self.wait_done(n, 10);
            self.stop.store(true, Ordering::SeqCst);
            q.wake_all();
            for t in self.threads {
                t.join().unwrap();
            }
            self.done.lock().unwrap().clone()
        }
    }

    /// Two workers of one queue serve it until `stop`; item 0 blocks
    /// (leaving the running count) until `release` is set. Returns the
    /// slots done while item 0 was still blocked.
    fn pool_with_one_blocked_item(q: Arc<WorkQueue>) -> Vec<u32> {
        // Item 0 is taken and blocks: its worker leaves the running count.
        let pool = BlockingPool::start(&q, item(0));
        for i in 1..5 {
            q.push(item(i));
        }
        pool.wait_done(4, 10);
        let while_blocked = pool.done();
        assert_eq!(pool.finish(&q, 5).len(), 5);
        let st = q.state();
        assert_eq!((st.running, st.blocked, st.pending), (0, 0, 0), "{st:?}");
        while_blocked
    }

    #[test]
    fn a_per_cpu_pool_wakes_another_worker_when_one_blocks() {
        // The second worker sleeps until the first blocks, then runs the
        // items queued behind the blocked one (concurrency management).
        let q = Arc::new(WorkQueue::per_cpu(16, 2));
        assert_eq!(pool_with_one_blocked_item(q), vec![1, 2, 3, 4]);
    }

    /// Item `slot` of per-CPU workqueue `pwq`.
    fn pwq_item(slot: u32, pwq: u8) -> WorkItem {
        WorkItem { pwq, ..item(slot) }
    }

    #[test]
    fn a_per_cpu_queue_sets_aside_items_beyond_its_max_active_and_activates_them_in_order() {
        // Two workqueues share a CPU's pool; the second runs at most 2
        // items at once there (fsverity's num_online_cpus() on 2 CPUs),
        // the first has no share set (fscrypt's 256 is never reached).
        let q = WorkQueue::per_cpu(16, 2);
        q.set_pwq(1, 2, 16);
        for slot in 0..4 {
            q.push(pwq_item(slot, 1));
        }
        q.push(pwq_item(10, 0));
        // Items 2 and 3 wait off the worklist; item 10 is not held behind them.
        assert_eq!(q.len(), 3);
        assert_eq!(q.inactive(1), (2, 2));
        assert_eq!(q.state().pending, 5);
        let mut order = Vec::new();
        while let Some(it) = q.take(false) {
            q.run_limited(&mut order, it, &mut |o: &mut Vec<u32>, it: WorkItem| {
                o.push(it.slot)
            });
        }
        // Each end of an item of workqueue 1 activated the first set aside,
        // at the worklist's tail (`pwq_activate_first_inactive`).
        assert_eq!(order, vec![0, 1, 10, 2, 3]);
        assert_eq!(q.inactive(1), (0, 2));
        assert_eq!(q.state().deferred, 2);
        // All room given back: two more go straight to the worklist.
        q.push(pwq_item(4, 1));
        q.push(pwq_item(5, 1));
        assert_eq!((q.len(), q.inactive(1)), (2, (0, 2)));
    }

    #[test]
    fn a_per_cpu_queue_at_max_active_wakes_no_worker_while_its_item_blocks() {
        // max_active 1 (fsverity's on 1 CPU): with item 0 blocked on a
        // tree read, the kernel's pool would run a second worker, but the
        // items queued behind it are inactive; they run after it, in order.
        let q = Arc::new(WorkQueue::per_cpu(16, 2));
        q.set_pwq(0, 1, 16);
        let pool = BlockingPool::start(&q, pwq_item(0, 0));
        let wakes = q.wakes();
        for i in 1..5 {
            q.push(pwq_item(i, 0));
        }
        // Set aside as they were pushed: nothing on the worklist, nobody woken.
        assert_eq!((q.len(), q.inactive(0)), (0, (4, 4)));
        assert_eq!(q.wakes(), wakes);
        assert!(pool.done().is_empty());
        assert_eq!(pool.finish(&q, 5), vec![0, 1, 2, 3, 4]);
        assert_eq!(q.inactive(0), (0, 4));
    }

    /// Items 0..=10 are pushed at once to two sleeping workers; item 0
    /// takes 30 ms (not blocking). Returns how many each worker ran.
    fn busy_first_worker(q: Arc<WorkQueue>) -> [usize; 2] {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ran = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let threads = {
            let ran = ran.clone();
            two_workers(&q, &stop, move |i, it| {
                if it.slot == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(30));
                }
                ran[i].fetch_add(1, Ordering::SeqCst);
            })
        };
        // Both asleep (worker 1 of a managed pool starts asleep).
        while q.idle.load(Ordering::SeqCst) < 2 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // All at once: the woken worker is not on a CPU yet when the next
        // items arrive, and must still be the only one woken.
        for i in 0..=10 {
            q.push(item(i));
        }
        let total =
            |r: &[AtomicUsize; 2]| r[0].load(Ordering::SeqCst) + r[1].load(Ordering::SeqCst);
        while total(&ran) < 11 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        stop.store(true, Ordering::SeqCst);
        q.wake_all();
        for t in threads {
            t.join().unwrap();
        }
        [ran[0].load(Ordering::SeqCst), ran[1].load(Ordering::SeqCst)]
    }

    #[test]
    fn a_per_cpu_pool_runs_one_worker_while_none_blocks() {
        // While the running worker is busy (not blocked), pushes wake no
        // other worker of a managed pool: the running one takes them all.
        let r = busy_first_worker(Arc::new(WorkQueue::per_cpu(64, 2)));
        assert_eq!(r.iter().sum::<usize>(), 11);
        assert_eq!(r[0].min(r[1]), 0, "one worker ran everything: {r:?}");
        // An unbound pool is not managed: the idle worker is woken.
        let r = busy_first_worker(Arc::new(WorkQueue::new(64, 2)));
        assert!(r[0] > 0 && r[1] > 0, "both ran: {r:?}");
    }

    /// An on-demand per-CPU pool served by worker 0 and a manager thread
    /// that creates the workers it asks for (as the pipeline's does) and
    /// ticks for CPU_INTENSIVE items every 4 ms when `intensive`; items run
    /// `work`. Pushes `items` items, waits for all, returns the pool's
    /// state and the order the items finished in.
    fn on_demand_run(
        intensive: bool,
        items: u32,
        work: impl Fn(&WorkQueue, WorkItem) + Send + Sync + 'static,
    ) -> (PoolState, Vec<u32>) {
        on_demand_pool_run(WorkQueue::per_cpu_on_demand(64, 16), intensive, items, work)
    }

    /// [`on_demand_run`] on pool `q`.
    fn on_demand_pool_run(
        q: WorkQueue,
        intensive: bool,
        items: u32,
        work: impl Fn(&WorkQueue, WorkItem) + Send + Sync + 'static,
    ) -> (PoolState, Vec<u32>) {
        use std::sync::Mutex;
        use std::sync::atomic::AtomicBool;
        let q = Arc::new(q);
        let stop = Arc::new(AtomicBool::new(false));
        let stop_manager = Arc::new(AtomicBool::new(false));
        let done = Arc::new(Mutex::new(Vec::new()));
        let work = Arc::new(work);
        let threads = Arc::new(Mutex::new(Vec::new()));
        let spawn = {
            let (q, stop, done, work) = (q.clone(), stop.clone(), done.clone(), work.clone());
            move |i: usize| {
                let (q, stop, done, work) = (q.clone(), stop.clone(), done.clone(), work.clone());
                std::thread::spawn(move || {
                    q.register_worker(i);
                    q.serve(
                        i,
                        &stop,
                        &mut (),
                        |_| {},
                        |_, _| {},
                        |_, it| {
                            work(&q, it);
                            done.lock().unwrap().push(it.slot);
                        },
                    )
                })
            }
        };
        threads.lock().unwrap().push(spawn(0));
        let manager = {
            let (q, stop_manager, threads) = (q.clone(), stop_manager.clone(), threads.clone());
            std::thread::spawn(move || {
                while !stop_manager.load(Ordering::SeqCst) {
                    if intensive {
                        q.tick_cpu_intensive(crate::engine::era::CPU_INTENSIVE_THRESH_NS);
                    }
                    while let Some(i) = q.needs_worker() {
                        threads.lock().unwrap().push(spawn(i));
                    }
                    std::thread::park_timeout(std::time::Duration::from_millis(4));
                }
            })
        };
        q.set_manager(manager.thread().clone(), intensive);
        assert_eq!(q.worker_count(), 1, "a pool starts with one worker");
        for i in 0..items {
            q.push(item(i));
        }
        let t0 = std::time::Instant::now();
        while done.lock().unwrap().len() < items as usize && t0.elapsed().as_secs() < 20 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        stop_manager.store(true, Ordering::SeqCst);
        manager.thread().unpark();
        manager.join().unwrap();
        stop.store(true, Ordering::SeqCst);
        let handles: Vec<_> = threads.lock().unwrap().drain(..).collect();
        for h in handles {
            while !h.is_finished() {
                q.wake_all();
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            h.join().unwrap();
        }
        let order = done.lock().unwrap().clone();
        (q.state(), order)
    }

    #[test]
    fn a_per_cpu_pool_creates_a_worker_when_its_only_one_blocks() {
        // Item 0 blocks until every other item is done: only a worker the
        // manager creates can run them (the pool started with one).
        let released = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let r2 = released.clone();
        let (st, order) = on_demand_run(false, 5, move |q, it| {
            if it.slot == 0 {
                q.block();
                let t0 = std::time::Instant::now();
                while r2.load(Ordering::SeqCst) < 4 && t0.elapsed().as_secs() < 10 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                q.unblock();
            } else {
                r2.fetch_add(1, Ordering::SeqCst);
            }
        });
        assert_eq!(order.len(), 5, "{order:?}");
        assert_eq!(
            *order.last().unwrap(),
            0,
            "the blocked item ended last: {order:?}"
        );
        assert!(st.created >= 2, "the manager created a worker: {st:?}");
        assert_eq!(st.cpu_intensive, 0);
        assert_eq!((st.running, st.blocked, st.pending), (0, 0, 0), "{st:?}");
    }

    #[test]
    fn an_item_over_10ms_of_cpu_becomes_cpu_intensive_and_others_run() {
        // Item 0 spins on the CPU until the others are done (at most 3 s):
        // marked CPU_INTENSIVE, its worker stops counting as running, and
        // the pool runs items 1..4 on another worker meanwhile.
        let others = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let o2 = others.clone();
        let (st, order) = on_demand_run(true, 5, move |_, it| {
            if it.slot == 0 {
                let t0 = crate::sys::thread_cpu_time_ns();
                while o2.load(Ordering::SeqCst) < 4
                    && crate::sys::thread_cpu_time_ns() - t0 < 3_000_000_000
                {
                    std::hint::spin_loop();
                }
            } else {
                o2.fetch_add(1, Ordering::SeqCst);
            }
        });
        assert_eq!(others.load(Ordering::SeqCst), 4, "{order:?}");
        assert_eq!(*order.last().unwrap(), 0, "item 0 ended last: {order:?}");
        assert_eq!(st.cpu_intensive, 1, "{st:?}");
        assert_eq!((st.running, st.pending), (0, 0), "{st:?}");
    }

    /// Worker `i` of `q` is on a CPU (as `sleep_from` leaves it), `idle`
    /// others still idle.
    fn runs(q: &WorkQueue, i: usize, idle: usize) {
        q.workers[i].state.store(AWAKE, Ordering::SeqCst);
        q.woken.store(false, Ordering::SeqCst);
        q.idle.store(idle, Ordering::SeqCst);
    }

    /// Workers of `q` in the woken state (claimed by a waker, not running).
    fn woken(q: &WorkQueue) -> usize {
        q.workers
            .iter()
            .filter(|w| w.state.load(Ordering::SeqCst) == WOKEN)
            .count()
    }

    /// Two online CPUs of this machine, or None (said) with fewer.
    fn two_cpus() -> Option<(usize, usize, Vec<usize>)> {
        let cpus = crate::sys::online_cpus();
        if cpus.len() < 2 {
            eprintln!("skipped: a pod needs a second CPU to be outside of ({cpus:?})");
            return None;
        }
        Some((cpus[0], cpus[1], cpus))
    }

    #[test]
    fn a_non_strict_pod_points_a_worker_woken_outside_it_back_at_it() {
        // 6.6+'s kick_pool: an idle worker about to be woken that went idle
        // outside its pod gets a wake_cpu in the pod. Two idle workers, no
        // worker threads: a wake is the claim. The one that went idle
        // away from the pod is a parked helper thread, whose affinity the
        // waker sets.
        let Some((home, away, cpus)) = two_cpus() else {
            return;
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let helper = std::thread::spawn(move || {
            tx.send(crate::sys::gettid()).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let q = WorkQueue::new(8, 2);
        q.set_home(vec![home], cpus.clone());
        // Both are the helper (never a thread outside this test): the
        // second's wake must leave its affinity as the first's set it.
        for (w, cpu) in q.workers.iter().zip([away, home]) {
            w.state.store(ASLEEP, Ordering::SeqCst);
            w.cpu.store(cpu, Ordering::SeqCst);
            w.tid.store(tid, Ordering::SeqCst);
        }
        q.idle.store(2, Ordering::SeqCst);
        q.last_idle.store(0, Ordering::SeqCst);
        q.push(item(0));
        assert_eq!(woken(&q), 1);
        assert_eq!(q.state().repatriated, 1);
        assert_eq!(crate::sys::thread_affinity(tid).unwrap(), vec![home]);
        assert!(q.workers[0].repatriated.load(Ordering::SeqCst));
        // The other went idle on the pod: woken where it is.
        q.woken.store(false, Ordering::SeqCst);
        q.workers[0].state.store(AWAKE, Ordering::SeqCst);
        q.push(item(1));
        assert_eq!(q.workers[1].state.load(Ordering::SeqCst), WOKEN);
        assert_eq!(q.state().repatriated, 1, "on its pod: left alone");
        assert!(!q.workers[1].repatriated.load(Ordering::SeqCst));
        done_tx.send(()).unwrap();
        helper.join().unwrap();
        // A pool without a home (strict, or one pod) never repatriates.
        let q = WorkQueue::new(8, 1);
        q.workers[0].state.store(ASLEEP, Ordering::SeqCst);
        q.workers[0].cpu.store(away, Ordering::SeqCst);
        q.idle.store(1, Ordering::SeqCst);
        q.push(item(0));
        assert_eq!((woken(&q), q.state().repatriated), (1, 0));
    }

    #[test]
    fn a_repatriated_worker_may_run_anywhere_again_once_woken() {
        // The pin is only for the wake: a non-strict pod's worker, woken on
        // its pod, widens itself back to every CPU it may run on.
        let Some((home, away, cpus)) = two_cpus() else {
            return;
        };
        let q = Arc::new(WorkQueue::new(8, 1));
        q.set_home(vec![home], cpus.clone());
        let q2 = q.clone();
        let t = std::thread::spawn(move || {
            crate::sys::pin_current_thread(&[away]).unwrap();
            q2.register_worker(0);
            let got = loop {
                if let Some(it) = q2.sleep(0) {
                    break it;
                }
            };
            (got.slot, crate::sys::current_thread_affinity().unwrap())
        });
        // Wait (at most 10 s) until it is idle, then queue.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while q.idle.load(Ordering::SeqCst) == 0 {
            assert!(
                std::time::Instant::now() < until,
                "the worker never went idle"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        q.push(item(7));
        let (slot, affinity) = t.join().unwrap();
        assert_eq!(slot, 7);
        assert_eq!(q.state().repatriated, 1, "it went idle away from its pod");
        assert_eq!(affinity, cpus, "widened again after the wake");
    }

    #[test]
    fn an_unbound_pool_wakes_its_first_idle_worker_and_chains_as_the_kernel_does() {
        // Three idle workers (no threads: a wake is the claim), pod
        // max_active 2.
        let q = WorkQueue::new(8, 3);
        for w in &q.workers {
            w.state.store(ASLEEP, Ordering::SeqCst);
        }
        q.idle.store(3, Ordering::SeqCst);
        q.set_node_limit(Arc::new(NodeLimit::pod(2)));
        // Each item queued wakes the first idle worker (insert_work, none
        // in nr_running); woken and not yet on a CPU, it is still the
        // first idle one, so three items wake one worker, not three.
        for i in 0..3 {
            q.push(item(i));
        }
        assert_eq!((woken(&q), q.wakes()), (1, 1));
        // It runs (off the idle list) and takes an item while two wait,
        // with room for one more: it wakes the next idle worker
        // (process_one_work's need_more_worker -> wake_up_worker).
        runs(&q, 0, 2);
        assert!(q.take(true).is_some());
        q.chain();
        assert_eq!((woken(&q), q.wakes()), (1, 2));
        // The second takes the next; at max_active nobody takes the
        // third, and taking it woke nobody: max_active holds items, not
        // workers.
        runs(&q, 1, 1);
        assert!(q.take(true).is_some());
        q.chain();
        assert_eq!(q.wakes(), 2, "no room for the waiting item: no wake");
        assert!(q.take(true).is_none());
        assert_eq!(q.len(), 1);
        // An item ends: its worker takes the waiting one.
        q.run_limited(&mut (), item(9), &mut |_, _| {});
        assert!(q.take(true).is_some());
        assert_eq!(q.limit.get().map(|l| l.active()), Some(2));
    }

    #[test]
    fn an_unbound_pool_creates_workers_on_demand_and_runs_max_active_items() {
        // max_active 2: the pool starts with one worker; taking work it
        // leaves no idle one, so the manager creates a reserve, which the
        // chain wakes. Each item waits (at most 5 s) until two run at
        // once, so a slow thread start cannot hide the second; never more
        // than 2 items at once.
        let now = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let q = WorkQueue::unbound_on_demand(64, 4);
        q.set_node_limit(Arc::new(NodeLimit::pod(2)));
        let (n, p) = (now.clone(), peak.clone());
        let (st, order) = on_demand_pool_run(q, false, 8, move |_, _| {
            p.fetch_max(n.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            let t0 = std::time::Instant::now();
            while p.load(Ordering::SeqCst) < 2 && t0.elapsed().as_secs() < 5 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            n.fetch_sub(1, Ordering::SeqCst);
        });
        assert_eq!(order.len(), 8, "{order:?}");
        assert_eq!(peak.load(Ordering::SeqCst), 2, "{st:?}");
        assert!(st.created >= 3, "two running and one in reserve: {st:?}");
        assert_eq!((st.running, st.pending), (0, 0), "{st:?}");
    }

    #[test]
    fn return_queue_refuses_to_sleep_with_a_buffer_back() {
        let r = ReturnQueue::new(2, ReaderWaker::Park(OnceLock::new()));
        r.give_back(1);
        assert!(!r.prepare_sleep());
        assert_eq!(r.pop(), Some(1));
        assert!(r.prepare_sleep());
        r.end_sleep();
    }
}
