//! The work itself, and where it runs: the [`Plan`] of which stage runs
//! where (inline, on bound per-CPU queues, or on an unbound queue), and the
//! [`Ctx`] every thread of a pipeline shares, whose methods decrypt, then
//! verify, in that order, exactly like ext4 and f2fs. Readers hand each
//! completed read to [`Ctx::dispatch`]; workers call [`Ctx::work`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::crypto::{ContentsCipher, DATA_UNIT_SIZE};
use crate::dataset::{Dataset, VERITY_BLOCK_SIZE};
use crate::metrics::{Recorder, Registry, Span, SpanKind, Stage, stamp};
use crate::settings::{Settings, VerifyMode, WorkerMode};
use crate::verity::merkle::{HashBlocks, MerkleTree, VerifiedCache, VerifyError};

use super::pagecache::{PAGE, PageCache};
use super::queue::{NO_BIO, Queues, ReturnQueue, WorkItem, WorkQueue};
use super::tree::TreePages;
use super::{NoticeSink, OpenFile};

/// Where a stage runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// On the thread that reaped the completion.
    Inline,
    /// On the pinned worker of the CPU that queued it.
    Bound,
    /// On any of `max_active` unpinned workers.
    Unbound,
}

impl From<WorkerMode> for Placement {
    fn from(m: WorkerMode) -> Self {
        match m {
            WorkerMode::Inline => Placement::Inline,
            WorkerMode::Bound => Placement::Bound,
            WorkerMode::Unbound => Placement::Unbound,
        }
    }
}

/// Which stage runs where, derived from the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Decrypt stage on.
    pub decrypt: bool,
    /// Verify stage on.
    pub verify: bool,
    /// Where the first stage (decrypt, or the only stage) runs.
    pub first: Placement,
    /// Where verification runs when it has its own queue (both stages on and
    /// `verify_mode` bound/unbound); None: in the same work item.
    pub second: Option<Placement>,
}

impl Plan {
    /// The plan of a settings value.
    pub fn of(s: &Settings) -> Plan {
        // The kernel target: the kernel does the post-read work; the
        // readers only read.
        let model = s.workload.target == crate::settings::Target::Model;
        let decrypt = s.pipeline.decrypt && model;
        let verify = s.pipeline.verity && model;
        let first = if decrypt || verify {
            Placement::from(s.workers.mode)
        } else {
            Placement::Inline
        };
        let second = if decrypt && verify {
            match s.workers.verify_mode {
                VerifyMode::Same | VerifyMode::Inline => None,
                VerifyMode::Bound => Some(Placement::Bound),
                VerifyMode::Unbound => Some(Placement::Unbound),
            }
        } else {
            None
        };
        Plan {
            decrypt,
            verify,
            first,
            second,
        }
    }

    /// The plan of effective settings with the kernel path it runs on where
    /// that is not the page cache: "blk-crypto (inlinecrypt): decrypt:
    /// unbound", "raw direct: no post-processing".
    pub fn label(s: &Settings) -> String {
        // The model's queues follow `workers.kernel_era`: the plan names an
        // era other than the default, short (the explorer's header is
        // crowded): "decrypt: unbound -> verify: unbound [5.15-android]".
        let mut d = Plan::of(s).describe();
        if s.workers.kernel_era != crate::settings::Workers::default().kernel_era {
            d = format!("{d} [{}]", s.workers.kernel_era);
        }
        match super::ReadPath::of(s) {
            super::ReadPath::PageCache => d,
            super::ReadPath::BlkCrypto => format!("blk-crypto (inlinecrypt): {d}"),
            super::ReadPath::RawDirect => format!("raw direct: {d}"),
            super::ReadPath::Kernel => {
                let p = &s.pipeline;
                // The fscrypt contents mode: -soft is the same AES-256-XTS
                // file, decrypted by the driver the kernel picked.
                let mode = match p.cipher {
                    crate::crypto::CipherKind::Adiantum => "adiantum",
                    _ => "aes-256-xts",
                };
                let what = match (p.decrypt, p.verity) {
                    (true, true) => format!("fscrypt {mode} + fs-verity"),
                    (true, false) => format!("fscrypt {mode}"),
                    (false, true) => "fs-verity".to_string(),
                    (false, false) => "a plain file".to_string(),
                };
                format!("kernel: {what} (the kernel's own queues)")
            }
        }
    }

    /// [`Plan::label`] in fewer columns, for a narrow header: the short
    /// description, the kernel path said in a word ("kernel's queues").
    pub fn short_label(s: &Settings) -> String {
        let d = Plan::of(s).short();
        match super::ReadPath::of(s) {
            super::ReadPath::PageCache => d,
            super::ReadPath::BlkCrypto => format!("inlinecrypt: {d}"),
            super::ReadPath::RawDirect => format!("raw: {d}"),
            super::ReadPath::Kernel => "kernel's queues".into(),
        }
    }

    /// A one-line description, e.g. "decrypt: unbound -> verify: bound".
    pub fn describe(&self) -> String {
        self.say(false)
    }

    /// The description in fewer columns, for a narrow header: "dec
    /// unbound -> ver bound", "dec+ver inline", "no post-read work".
    pub fn short(&self) -> String {
        self.say(true)
    }

    /// The description, in words or `short`.
    fn say(&self, short: bool) -> String {
        let p = |p: Placement| match p {
            Placement::Inline => "inline",
            Placement::Bound => "bound",
            Placement::Unbound => "unbound",
        };
        let (dec, ver, both, none) = if short {
            ("dec ", "ver ", "dec+ver ", "no post-read work")
        } else {
            (
                "decrypt: ",
                "verify: ",
                "decrypt+verify: ",
                "no post-processing",
            )
        };
        match (self.decrypt, self.verify, self.second) {
            (false, false, _) => none.into(),
            (true, false, _) => format!("{dec}{}", p(self.first)),
            (false, true, _) => format!("{ver}{}", p(self.first)),
            (true, true, None) => format!("{both}{}", p(self.first)),
            (true, true, Some(s)) => format!("{dec}{} -> {ver}{}", p(self.first), p(s)),
        }
    }
}

/// Everything the threads of one pipeline share (immutable while it runs).
pub struct Ctx {
    /// Effective settings (after fallbacks): only the resolver makes them.
    pub settings: super::Effective,
    /// Stage placement.
    pub plan: Plan,
    /// The file being read.
    pub file: OpenFile,
    /// Contents cipher (decrypt on).
    pub cipher: Option<Arc<ContentsCipher>>,
    /// Dataset (for the Merkle tree).
    pub dataset: Arc<Dataset>,
    /// The dataset's tree hashing with the kernel's sha256
    /// (`pipeline.hash = "kernel"`); None: the dataset's own.
    pub verity_tree: Option<Arc<MerkleTree>>,
    /// Verified hash blocks, shared for the engine's lifetime.
    pub cache: Arc<VerifiedCache>,
    /// Where each reader's offsets stood when it last stopped (the
    /// engine's, kept across restarts).
    pub streams: Arc<super::source::Streams>,
    /// Queues of the first stage (None when it runs inline).
    pub first_q: Option<Queues>,
    /// Queues of the verify stage when it has its own.
    pub second_q: Option<Queues>,
    /// Return path of each reader.
    pub returns: Vec<Arc<ReturnQueue>>,
    /// Readers stop issuing and drain.
    pub stop_readers: AtomicBool,
    /// Workers exit once their queue is empty.
    pub stop_workers: AtomicBool,
    /// The sampler's registry.
    pub registry: Arc<Registry>,
    /// Where notices go.
    pub notices: NoticeSink,
    /// Set once the first verity failure was reported.
    pub verity_noticed: AtomicBool,
    /// Per reader: true while its buffers are allocated. Workers check it
    /// (debug builds) before touching an item's buffer.
    pub buffers_alive: Vec<AtomicBool>,
    /// Items a worker found whose reader's buffers were already freed
    /// (debug builds count them; must stay 0: a use after free).
    pub touched_freed: std::sync::atomic::AtomicU64,
    /// Failures injected by tests.
    pub faults: super::Faults,
    /// Page-cache readers check each read's bytes against this plaintext
    /// (`EngineOptions::check_copies`, tests).
    pub copy_check: Option<(Arc<super::CopyCheck>, Arc<crate::sys::Mapping>)>,
    /// The page cache reads go through (None: direct reads, each its own
    /// bio: raw O_DIRECT or blk-crypto).
    pub pcache: Option<Arc<PageCache>>,
    /// Bio slots of each reader in [`Self::pcache`].
    pub bios_per_reader: usize,
    /// The irq threads' inboxes (`workload.completion = irq`).
    pub irqs: Option<super::irq::Irqs>,
    /// The fs-verity tree in the page cache, read by the verifying worker
    /// when a hash page is missing (page-cache reads with verity on).
    pub tree: Option<TreePages>,
}

impl Ctx {
    /// Hands a freshly reaped read to the first stage: processes it inline
    /// (returns true: the buffer is free again) or queues it (false).
    #[inline]
    pub fn dispatch(&self, rec: &mut Recorder, mut item: WorkItem) -> bool {
        match &self.first_q {
            None => {
                let start = stamp();
                let decrypts = self.decrypts(&item);
                let step = self.process(rec, &mut item, start, None);
                let end = match step {
                    Step::Queued => None,
                    Step::Ended(charge) => Self::charge(rec, charge),
                };
                // Run inline: on this CPU, without a wait.
                if let Some(kind) = step.kind(decrypts) {
                    rec.span(|| {
                        let cpu = crate::sys::current_cpu();
                        Span::item(kind, cpu, start, start, cpu).ended(end.unwrap_or_else(stamp))
                    });
                }
                step != Step::Queued
            }
            Some(q) => {
                item.enqueue_ns = stamp();
                q.push(item, crate::sys::current_cpu());
                false
            }
        }
    }

    /// Records the execution `charge` names (its stage, and when it
    /// began) as ending now: the item's end, after whatever ended it.
    /// Returns now, if it recorded one.
    #[inline]
    fn charge(rec: &mut Recorder, charge: Option<(Stage, u64)>) -> Option<u64> {
        let (stage, since) = charge?;
        let now = stamp();
        rec.record(stage, now.saturating_sub(since));
        Some(now)
    }

    /// Where verification follows in the item that began at `start_ns`:
    /// a decryption in the same item (`charge`) has its share end now;
    /// returns when verification's began.
    #[inline]
    fn verification_starts(rec: &mut Recorder, charge: Option<(Stage, u64)>, start_ns: u64) -> u64 {
        Self::charge(rec, charge).unwrap_or(start_ns)
    }

    /// Runs the stages an item still needs in this context. `start_ns`: when
    /// this context picked it up. Returns [`Step::Queued`] when it was
    /// queued for verification (its execution here already recorded), else
    /// [`Step::Ended`]: it is finished (its buffer may be reused), and the
    /// caller records the execution it names once it has ended the item.
    fn process(
        &self,
        rec: &mut Recorder,
        item: &mut WorkItem,
        start_ns: u64,
        q: Option<&WorkQueue>,
    ) -> Step {
        if item.bio != NO_BIO {
            return self.process_bio(rec, item, start_ns, q);
        }
        if cfg!(debug_assertions)
            && !self.buffers_alive[item.reader as usize].load(Ordering::Acquire)
        {
            self.touched_freed.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the reader handed this buffer to us with the item and does
        // not touch it until it comes back (see WorkItem).
        let buf = unsafe { std::slice::from_raw_parts_mut(item.buf, item.len as usize) };
        let mut charge = None;
        if item.needs_decrypt {
            if let Some(c) = &self.cipher {
                let first_unit = item.offset / DATA_UNIT_SIZE as u64;
                c.decrypt_units(first_unit, DATA_UNIT_SIZE, buf);
                rec.counters.decrypted_units += (buf.len() / DATA_UNIT_SIZE) as u64;
                charge = Some((Stage::Decrypt, start_ns));
            }
            if let Some(step) = self.hand_to_verify(rec, item, charge) {
                return step;
            }
        }
        let mut ok = true;
        if self.plan.verify {
            let since = Self::verification_starts(rec, charge, start_ns);
            let first_block = item.offset / VERITY_BLOCK_SIZE as u64;
            let nblocks = buf.len().div_ceil(VERITY_BLOCK_SIZE);
            let block = |i: usize| {
                &buf[i * VERITY_BLOCK_SIZE..((i + 1) * VERITY_BLOCK_SIZE).min(buf.len())]
            };
            ok = self.verify_blocks(
                rec,
                None,
                first_block,
                nblocks,
                block,
                || format!("read at offset {}", item.offset),
                "counted as a failure, not as data",
            );
            charge = Some((Stage::Verify, since));
        }
        if ok {
            rec.counters.reads += 1;
            rec.counters.bytes += item.len as u64;
            rec.record(Stage::EndToEnd, stamp().saturating_sub(item.issue_ns));
        } else {
            rec.counters.verity_failures += 1;
        }
        // The read's end (the buffer back to its reader) is the caller's
        // next act.
        self.hand_on_fault();
        Step::Ended(charge)
    }

    /// Page `p` of the file as the memory device holds it (its mapping).
    fn device_page(&self, p: u64) -> &[u8] {
        self.file
            .device_bytes(p * PAGE as u64, PAGE)
            .expect("a memory-device bio within the file")
    }

    /// Fills the pages of memory-device bio `bio` (global slot) from the
    /// mapping, as its read would have: where nothing decrypts them into
    /// place, or where a bio must be changed before its post-read work (an
    /// injected corruption). Its holder only (in flight, not yet ended).
    pub fn fill_bio(&self, bio: u32) {
        let pc = self.pcache.as_ref().expect("a page-cache pipeline");
        let b = pc.bio(bio);
        let first = b.first_page.load(Ordering::Relaxed);
        for i in 0..b.npages.load(Ordering::Relaxed) as usize {
            // SAFETY: the bio is in flight and held by the caller: nothing
            // else reads or writes its frames.
            unsafe { pc.frame_mut(b.frames[i].load(Ordering::Relaxed)) }
                .copy_from_slice(self.device_page(first + i as u64));
        }
    }

    /// The post-read work of one page-cache bio, as `bio_post_read_processing`
    /// does it: decrypt every page of the bio (one work item), then verify
    /// every block of it (the same item, or one more on the verify queue),
    /// then end the read: its pages become uptodate (or fail, all of them,
    /// when one block fails) and every reader waiting on one is woken.
    fn process_bio(
        &self,
        rec: &mut Recorder,
        item: &mut WorkItem,
        start_ns: u64,
        q: Option<&WorkQueue>,
    ) -> Step {
        let Some(pc) = &self.pcache else {
            unreachable!("a bio item without a page cache");
        };
        let b = pc.bio(item.bio);
        let first = b.first_page.load(Ordering::Relaxed);
        let n = b.npages.load(Ordering::Relaxed) as usize;
        // SAFETY: the bio's frames are in flight in this bio, whose item this
        // context holds: nothing else reads or writes them until end_bio.
        let frame = |i: usize| unsafe { pc.frame_mut(b.frames[i].load(Ordering::Relaxed)) };
        let mut charge = None;
        // A memory-device bio's pages are filled here, by its first stage:
        // decrypted straight from the mapping, or copied when nothing
        // decrypts (the DMA of a real device costs no CPU; this costs the
        // copy only where there is no decryption to do it in).
        if item.unfilled && !(item.needs_decrypt && self.cipher.is_some()) {
            self.fill_bio(item.bio);
            item.unfilled = false;
        }
        if item.needs_decrypt {
            if let Some(c) = &self.cipher {
                for i in 0..n {
                    let unit = (first + i as u64) * (VERITY_BLOCK_SIZE / DATA_UNIT_SIZE) as u64;
                    if item.unfilled {
                        let src = self.device_page(first + i as u64);
                        c.decrypt_units_from(unit, DATA_UNIT_SIZE, src, frame(i));
                    } else {
                        c.decrypt_units(unit, DATA_UNIT_SIZE, frame(i));
                    }
                }
                item.unfilled = false;
                rec.counters.decrypted_units += (n * VERITY_BLOCK_SIZE / DATA_UNIT_SIZE) as u64;
                charge = Some((Stage::Decrypt, start_ns));
            }
            if let Some(step) = self.hand_to_verify(rec, item, charge) {
                return step;
            }
        }
        let mut ok = true;
        if self.plan.verify {
            // Decrypted in this item: decryption's share ends here, and
            // the item's remainder (the tree walk, then the read's end) is
            // verification's.
            let since = Self::verification_starts(rec, charge, start_ns);
            // Tree pages missing from the cache are read ahead as the
            // era's `fsverity_verify_bio` does (every data bio here is a
            // readahead bio): a quarter of the bio before 6.3, nothing
            // in 6.18 (see `era::Era::tree_readahead`).
            // With a verify queue of its own, a tree page read is decrypted
            // on the decrypt queue, as ext4 does (fscrypt_read_queue).
            let decrypt_q = match (self.plan.decrypt, &self.second_q) {
                (true, Some(_)) => self.first_q.as_ref(),
                _ => None,
            };
            let ra = super::era::Era::of(self.settings.workers.kernel_era).tree_readahead(n, true);
            let reader = self.tree.as_ref().map(|t| t.reader(q, ra, decrypt_q));
            ok = self.verify_blocks(
                rec,
                reader.as_ref(),
                first,
                n,
                // SAFETY: as `frame`; read only, and no `&mut` of the
                // bio's frames lives past the decryption above.
                |i| unsafe { pc.frame(b.frames[i].load(Ordering::Relaxed)) },
                || format!("bio at offset {} ({n} pages)", item.offset),
                "every read of its pages fails",
            );
            if let Some(r) = &reader {
                r.stats().add_to(&mut rec.counters);
            }
            charge = Some((Stage::Verify, since));
        }
        // The read's end is the item's: its pages become uptodate and the
        // readers waiting on them are woken from here, as the kernel's
        // `__read_end_io` at the end of `decrypt_work` / `verity_work`.
        self.hand_on_fault();
        pc.end_bio(item.bio, ok, false, |r| self.returns[r].poke());
        Step::Ended(charge)
    }

    /// `Faults::slow_hand_on`: spins before an item's hand-on (tests).
    #[inline]
    fn hand_on_fault(&self) {
        if let Some(d) = self.faults.slow_hand_on {
            cold_spin(d);
        }
    }

    /// After decryption: queues `item` for the verify stage's own queue
    /// when it has one, as ext4 re-queues the bio on fsverity's queue from
    /// the decrypting worker (`fsverity_enqueue_verify_work`), and records
    /// this item's execution, `charge`, up to after that queueing, as the
    /// kernel's `workqueue_execute_end` comes after it: [`Step::Queued`].
    /// None: the item goes on here.
    fn hand_to_verify(
        &self,
        rec: &mut Recorder,
        item: &mut WorkItem,
        charge: Option<(Stage, u64)>,
    ) -> Option<Step> {
        item.needs_decrypt = false;
        match &self.second_q {
            Some(q) if self.plan.verify => {
                self.hand_on_fault();
                item.enqueue_ns = stamp();
                q.push(*item, crate::sys::current_cpu());
                Self::charge(rec, charge);
                Some(Step::Queued)
            }
            _ => None,
        }
    }

    /// Verifies `n` consecutive data blocks from `first_block` in order,
    /// two at a time where the era did so (interleaved SHA-256 where the
    /// CPU has it, as fs-verity since Linux 6.18: `era::Era::hashes_pairs`),
    /// else one per hash call; the first failure ends it (false) and is
    /// noticed once per pipeline, naming `what` and `then`.
    #[allow(clippy::too_many_arguments)]
    fn verify_blocks<'b>(
        &self,
        rec: &mut Recorder,
        cold: Option<&super::tree::TreeReader<'_>>,
        first_block: u64,
        n: usize,
        block: impl Fn(usize) -> &'b [u8],
        what: impl Fn() -> String,
        then: &str,
    ) -> bool {
        let tree = self
            .verity_tree
            .as_deref()
            .unwrap_or_else(|| self.dataset.tree());
        // The hash blocks: the tree's pages in the page cache (cold), else
        // the tree held in memory with the engine's verified bitmap.
        let resident;
        let blocks: &dyn HashBlocks = match cold {
            Some(r) => r,
            None => match tree.resident(&self.cache) {
                Ok(r) => {
                    resident = r;
                    &resident
                }
                Err(e) => {
                    self.verity_failed(&e, &what, then);
                    return false;
                }
            },
        };
        let pairs = super::era::Era::of(self.settings.workers.kernel_era).hashes_pairs();
        let mut i = 0;
        while i < n {
            let pair = pairs && i + 1 < n;
            if pair {
                rec.counters.paired_blocks += 2;
            }
            let blk = first_block + i as u64;
            let results = if pair {
                tree.verify_block_pair_in(blocks, [blk, blk + 1], [block(i), block(i + 1)])
            } else {
                [
                    tree.verify_block_in(blocks, blk, block(i)),
                    Ok(Default::default()),
                ]
            };
            for r in &results[..if pair { 2 } else { 1 }] {
                rec.counters.verified_blocks += 1;
                match r {
                    Ok(st) => {
                        rec.counters.hashes += st.hashes as u64;
                        // A hit: the block's leaf hash block was already
                        // verified, so only the data block was hashed.
                        if st.hashes <= 1 {
                            rec.counters.cache_hits += 1;
                        } else {
                            rec.counters.cache_misses += 1;
                        }
                    }
                    Err(e) => {
                        self.verity_failed(e, &what, then);
                        return false;
                    }
                }
            }
            i += if pair { 2 } else { 1 };
        }
        true
    }

    /// The first verity failure of the pipeline becomes a notice naming
    /// `what` failed and what `then` happens.
    fn verity_failed(&self, e: &VerifyError, what: &impl Fn() -> String, then: &str) {
        if !self.verity_noticed.swap(true, Ordering::Relaxed) {
            self.notices.push(format!(
                "verity: {} failed verification ({e}); {then}{}",
                what(),
                if self.settings.pipeline.corrupt_every > 0 {
                    " (pipeline.corrupt_every is on)"
                } else {
                    ""
                }
            ));
        }
    }

    /// Worker side: take an item off a queue and finish what it needs.
    pub fn work(&self, rec: &mut Recorder, mut item: WorkItem, q: Option<&WorkQueue>) {
        let start = stamp();
        // One queue wait per item and queue, from queueing to execution, as
        // the kernel's workqueue tracepoints give it (workqueue_queue_work
        // -> workqueue_execute_start): a read decrypted on one queue and
        // verified on another waits twice and counts twice.
        rec.record(Stage::Queue, start.saturating_sub(item.enqueue_ns));
        rec.counters.items_run += 1;
        let cpu = crate::sys::current_cpu();
        rec.counters.items_moved += u64::from(cpu as u32 != item.queued_cpu);
        let queued = (item.queued_cpu as usize, item.enqueue_ns);
        let span = |kind: SpanKind, end: Option<u64>| {
            move || {
                Span::item(kind, queued.0, queued.1, start, cpu).ended(end.unwrap_or_else(stamp))
            }
        };
        rec.counters.items_unbound += u64::from(q.is_some_and(|q| q.unbound()));
        rec.counters.items_highpri += u64::from(worker_highpri());
        if item.bio == super::queue::TREE_JOB {
            // Tree pages a verify worker read, decrypted here on fscrypt's
            // queue while it sleeps (see tree.rs).
            // With the tree's own key: the data's may be another file's
            // (`cache.device = "target"`).
            // Its execution is a decrypt item's, as the kernel traces the
            // tree page's bio on fscrypt's queue.
            if let Some(t) = &self.tree
                && let Some(c) = t.cipher()
            {
                t.decrypt_job(&item, c);
                let end = Self::charge(rec, Some((Stage::Decrypt, start)));
                rec.span(span(SpanKind::Decrypt, end));
            }
            return;
        }
        let decrypts = self.decrypts(&item);
        let step = self.process(rec, &mut item, start, q);
        let end = match step {
            Step::Ended(charge) => {
                self.returns[item.reader as usize].give_back(item.slot);
                // The execution ends after the item's last act, as the
                // kernel's `workqueue_execute_end` follows the read's end.
                Self::charge(rec, charge)
            }
            Step::Queued => None,
        };
        if let Some(kind) = step.kind(decrypts) {
            rec.span(span(kind, end));
        }
    }

    /// Whether `item` is still to be decrypted here (a cipher is set).
    #[inline]
    fn decrypts(&self, item: &WorkItem) -> bool {
        item.needs_decrypt && self.cipher.is_some()
    }
}

/// Spins for `d` (a test's `Faults::slow_hand_on`).
#[cold]
fn cold_spin(d: std::time::Duration) {
    let until = std::time::Instant::now() + d;
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// What became of an item in one context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Queued on the verify stage's queue; its execution here is recorded.
    Queued,
    /// Finished: the execution still to record once the caller has ended
    /// it (its stage, and when that began; None: no post-read stage ran).
    Ended(Option<(Stage, u64)>),
}

impl Step {
    /// The span of the execution that came to this step, which decrypted
    /// first when `decrypted`; None where no post-read stage ran.
    fn kind(self, decrypted: bool) -> Option<SpanKind> {
        match self {
            Step::Ended(Some((Stage::Verify, _))) if decrypted => Some(SpanKind::DecryptVerify),
            Step::Ended(Some((Stage::Verify, _))) => Some(SpanKind::Verify),
            Step::Queued | Step::Ended(Some(_)) => Some(SpanKind::Decrypt),
            Step::Ended(None) => None,
        }
    }
}

/// Whether the calling worker thread runs at a negative nice (asked of
/// the kernel once per thread: a worker's nice is set when it starts and
/// kept for its life).
fn worker_highpri() -> bool {
    thread_local! {
        static HIGHPRI: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
    }
    HIGHPRI.with(|h| {
        h.get().unwrap_or_else(|| {
            let v = crate::sys::current_thread_nice().is_ok_and(|n| n < 0);
            h.set(Some(v));
            v
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(decrypt: bool, verity: bool, mode: &str, verify_mode: &str) -> Plan {
        let mut s = Settings::default();
        s.set("pipeline.decrypt", &decrypt.to_string()).unwrap();
        s.set("pipeline.verity", &verity.to_string()).unwrap();
        s.set("workers.mode", mode).unwrap();
        s.set("workers.verify_mode", verify_mode).unwrap();
        Plan::of(&s)
    }

    #[test]
    fn the_worker_plan_follows_the_kernel_queues() {
        // ext4: decrypt on fscrypt's queue, then verify on fsverity's own.
        let p = plan(true, true, "unbound", "bound");
        assert_eq!(p.first, Placement::Unbound);
        assert_eq!(p.second, Some(Placement::Bound));
        assert_eq!(p.describe(), "decrypt: unbound -> verify: bound");
        // Verification in the same work item, or inline after decryption.
        for vm in ["same", "inline"] {
            let p = plan(true, true, "bound", vm);
            assert_eq!(p.second, None, "{vm}");
            assert_eq!(p.describe(), "decrypt+verify: bound");
        }
        // One stage: the mode is its queue's; verify_mode does not apply.
        let p = plan(false, true, "bound", "unbound");
        assert_eq!((p.first, p.second), (Placement::Bound, None));
        assert_eq!(p.describe(), "verify: bound");
        let p = plan(true, false, "inline", "unbound");
        assert_eq!((p.first, p.second), (Placement::Inline, None));
        assert_eq!(p.describe(), "decrypt: inline");
        // No post-processing: the reader only reads, whatever the mode.
        let p = plan(false, false, "unbound", "bound");
        assert_eq!((p.first, p.second), (Placement::Inline, None));
        assert_eq!(p.describe(), "no post-processing");
    }
}
