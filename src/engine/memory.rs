//! The memory a workload needs, worked out before anything is allocated.
//!
//! One combination of in-range settings (`workload.readers = 256`,
//! `queue_depth = 1024`, `block_size = 1M`) asks for 256 GiB of read
//! buffers; allocated blindly it drives the machine into swap until the OOM
//! killer ends it. So the engine adds up what a setting will allocate (read
//! buffers, per-thread histograms, the Merkle tree held in memory) and
//! refuses, with the figure and the keys to lower, what does not fit in the
//! memory the machine (and the process's cgroup) has available. The running
//! workload is untouched by a refusal.

use crate::metrics::format::human_bytes;
use crate::settings::Settings;

/// Share of the available memory a workload may take: the rest is left to
/// the page cache the workload reads through and to everything else.
pub const MAX_SHARE: f64 = 0.8;

/// Bytes of one latency histogram (counts array), measured once.
fn hist_bytes() -> u64 {
    static BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        let h = crate::metrics::empty_hist();
        h.distinct_values() as u64 * 8
    })
}

/// Histograms per thread: five stages, in the thread's recorder and in its
/// mailbox.
const HISTS_PER_THREAD: u64 = 5 * 2;

/// Bytes of a Merkle tree (4 KiB blocks, SHA-256) for `file_size` bytes:
/// every level down to the one holding a single hash block.
pub fn tree_bytes(file_size: u64) -> u64 {
    const BLOCK: u64 = crate::dataset::VERITY_BLOCK_SIZE as u64;
    let mut n = file_size.div_ceil(BLOCK);
    let mut total = 0u64;
    while n > 1 {
        let blocks = (n * 32).div_ceil(BLOCK);
        total += blocks * BLOCK;
        n = blocks;
    }
    total.max(BLOCK)
}

/// Pages of the fs-verity tree of a `file_size` file (0 for a file of one
/// block or none: its root hash is the block's hash).
pub fn tree_pages(file_size: u64) -> u64 {
    if file_size <= crate::dataset::VERITY_BLOCK_SIZE as u64 {
        0
    } else {
        tree_bytes(file_size) / crate::dataset::VERITY_BLOCK_SIZE as u64
    }
}

/// What a workload will allocate, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryNeed {
    /// Read buffers: readers x queue depth x block size.
    pub buffers: u64,
    /// Per-thread latency histograms (readers and workers).
    pub histograms: u64,
    /// The Merkle tree and its verified bitmap.
    pub tree: u64,
    /// The model's page cache (its `cache.size` of frames and the page
    /// states); 0 when reads do not go through it.
    pub page_cache: u64,
    /// Frames for the pages of bios in flight (every bio slot of every
    /// reader at its largest) and the bio slots: they grow with the reads in
    /// flight, as the read buffers do.
    pub in_flight: u64,
}

/// The shape of the page cache a configuration reads through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheGeometry {
    /// Pages of the file.
    pub file_pages: usize,
    /// Pages of its fs-verity tree (cached after the data's).
    pub tree_pages: usize,
    /// Uptodate pages it may hold (`cache.size`).
    pub capacity: usize,
    /// Frames for pages in flight (every bio slot at its largest) and for
    /// the fs-verity tree's pages.
    pub reserve: usize,
    /// Bio slots (readers x per reader).
    pub bios: usize,
    /// Readers.
    pub readers: usize,
}

/// Most fs-verity tree pages held apart from `cache.size` (64 MiB: the
/// whole tree of an 8 GiB file).
pub const MAX_TREE_HOLD: usize = 16 * 1024;

impl CacheGeometry {
    /// The geometry for settings `s`.
    pub fn of(s: &Settings) -> CacheGeometry {
        use crate::engine::pagecache::{MAX_BIO_PAGES, PAGE};
        let page = PAGE as u64;
        let readers = s.workload.readers as usize;
        let bios = readers * super::reader::bios_per_reader(s);
        let largest = (s.workload.block_size / page)
            .max(s.cache.read_ahead / page)
            .clamp(1, MAX_BIO_PAGES as u64) as usize;
        let tree = tree_pages(s.workload.file_size);
        CacheGeometry {
            file_pages: (s.workload.file_size / page) as usize,
            tree_pages: tree as usize,
            capacity: (s
                .cache_bytes()
                .min(s.workload.file_size.saturating_add(tree * page))
                / page) as usize,
            // Every bio slot at its largest, room for tree reads, and the
            // tree's pages themselves (up to 64 MiB of them): hash pages are
            // read by every verification, so the kernel's LRU keeps them
            // active while a stream's data pages pass through once; here
            // they are held apart from `cache.size`, which bounds the data
            // (so with `cache.size = 0` a stream does not evict its own
            // tree and read it again and again).
            reserve: bios
                .saturating_mul(largest)
                .saturating_add(crate::engine::tree::MAX_TREE_RA * 4)
                .saturating_add((tree as usize).min(MAX_TREE_HOLD)),
            bios,
            readers,
        }
    }

    /// Bytes it allocates: (cache frames and page states, in-flight
    /// frames and bio slots).
    pub fn bytes(&self) -> (u64, u64) {
        let all = crate::engine::pagecache::bytes_for(
            (self.file_pages + self.tree_pages) as u64,
            self.capacity as u64,
            self.reserve as u64,
            self.bios as u64,
        );
        let cache = crate::engine::pagecache::bytes_for(
            (self.file_pages + self.tree_pages) as u64,
            self.capacity as u64,
            0,
            0,
        );
        (cache, all.saturating_sub(cache))
    }
}

impl MemoryNeed {
    /// What the effective settings `s` allocate on a machine with `cpus`
    /// online CPUs (worker counts are bounded from above).
    pub fn of(s: &Settings, cpus: usize) -> MemoryNeed {
        let w = &s.workload;
        let readers = u64::from(w.readers);
        let depth = u64::from(super::resolve::in_flight(s));
        let buffers = readers.saturating_mul(depth).saturating_mul(w.block_size);
        // At most one worker per CPU per queue (bound) or max_active per
        // queue (unbound; split over pods by their CPUs, each share rounded
        // up: exact when max_active is a multiple of the CPUs, else at most
        // one more per pod, a pod having at least one CPU), two queues.
        // max_active = 0 is the machine's online CPUs, not the run's.
        let ma = s.effective_max_active(crate::sys::online_count().max(cpus));
        let unbound = if ma.is_multiple_of(cpus.max(1)) {
            ma
        } else {
            ma + cpus - 1
        };
        // The per-CPU pools create workers on demand (see
        // pipeline::pool_workers), one per item blocked at once plus one
        // running and one idle: counted as at most 16 a CPU (a pool grows
        // past that only while that many of its items block at once).
        let pools = cpus * crate::engine::pipeline::pool_workers(s).min(16);
        let workers = (pools.max(unbound) + cpus.max(unbound)) as u64;
        let histograms = (readers + workers) * HISTS_PER_THREAD * hist_bytes();
        let tree = tree_bytes(w.file_size);
        let (page_cache, in_flight) = match crate::engine::ReadPath::of(s) {
            crate::engine::ReadPath::PageCache => CacheGeometry::of(s).bytes(),
            _ => (0, 0),
        };
        MemoryNeed {
            buffers,
            histograms,
            tree: tree + tree / crate::dataset::VERITY_BLOCK_SIZE as u64 / 8,
            page_cache,
            in_flight,
        }
    }

    /// The total, in bytes.
    pub fn total(&self) -> u64 {
        self.buffers
            .saturating_add(self.histograms)
            .saturating_add(self.tree)
            .saturating_add(self.page_cache)
            .saturating_add(self.in_flight)
    }

    /// Refuses the need when it exceeds [`MAX_SHARE`] of `available` bytes;
    /// the error gives the figures and the keys to lower.
    pub fn check(&self, s: &Settings, available: u64) -> Result<(), TooMuchMemory> {
        let limit = (available as f64 * MAX_SHARE) as u64;
        if self.total() <= limit {
            return Ok(());
        }
        let w = &s.workload;
        let buffers = self.buffers.saturating_add(self.in_flight);
        let lower = if self.page_cache >= buffers
            && self.page_cache >= self.tree
            && self.page_cache >= self.histograms
        {
            if s.cache.size.is_none() {
                format!(
                    "cache.size or workload.file_size (cache.size \"auto\" is a quarter of workload.file_size {})",
                    crate::settings::format_size(s.workload.file_size)
                )
            } else {
                crate::key!(cache.size).name().to_string()
            }
        } else if buffers >= self.tree && buffers >= self.histograms {
            "workload.readers, workload.queue_depth or workload.block_size".to_string()
        } else if self.tree >= self.histograms {
            crate::key!(workload.file_size).name().to_string()
        } else {
            "workload.readers or workers.max_active".to_string()
        };
        Err(TooMuchMemory {
            need: *self,
            readers: w.readers,
            queue_depth: w.queue_depth,
            block_size: w.block_size,
            limit,
            available,
            lower,
        })
    }
}

/// Settings that need more memory than may be used here ([`MAX_SHARE`] of
/// what is available): the need by part, the settings behind the read
/// buffers, and the keys to lower.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "these settings need {} of memory (read buffers {} = workload.readers {readers} x workload.queue_depth {queue_depth} x workload.block_size {}; histograms {}; Merkle tree {}; page cache {}; pages in flight {}), and {} may be used ({:.0}% of the {} available); lower {lower}",
    human_bytes(need.total()),
    human_bytes(need.buffers),
    human_bytes(*block_size),
    human_bytes(need.histograms),
    human_bytes(need.tree),
    human_bytes(need.page_cache),
    human_bytes(need.in_flight),
    human_bytes(*limit),
    MAX_SHARE * 100.0,
    human_bytes(*available)
)]
pub struct TooMuchMemory {
    /// What the settings need, by part.
    pub need: MemoryNeed,
    /// `workload.readers`.
    pub readers: u32,
    /// `workload.queue_depth`.
    pub queue_depth: u32,
    /// `workload.block_size`, bytes.
    pub block_size: u64,
    /// The most that may be used, bytes.
    pub limit: u64,
    /// What is available, bytes.
    pub available: u64,
    /// The keys to lower (the largest part's).
    pub lower: String,
}

/// Checks that settings fit in the memory this machine has available now
/// (for validating presets, demo steps and compare variants before anything
/// runs); true when the available memory cannot be read.
pub fn check_fits(s: &Settings) -> Result<(), TooMuchMemory> {
    match crate::sys::memory_available_bytes() {
        Some(available) => {
            MemoryNeed::of(s, s.run_cpus(&crate::sys::online_cpus()).len()).check(s, available)
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_killing_combination_is_refused_with_its_figure() {
        let mut s = Settings::default();
        s.set("workload.readers", "256").unwrap();
        s.set("workload.queue_depth", "1024").unwrap();
        s.set("workload.block_size", "1M").unwrap();
        let need = MemoryNeed::of(&s, 2);
        assert_eq!(need.buffers, 256 << 30);
        let e = need.check(&s, 24 << 30).unwrap_err().to_string();
        assert!(e.contains("read buffers 256 GiB"), "{e}");
        assert!(
            e.contains("lower workload.readers, workload.queue_depth or workload.block_size"),
            "{e}"
        );
        assert!(e.contains("19.2 GiB may be used"), "{e}");
    }

    #[test]
    fn the_default_fits_a_small_machine() {
        let s = Settings::default();
        let need = MemoryNeed::of(&s, 8);
        // The page cache: a quarter of the 256 MiB file, plus page states.
        assert!(
            need.page_cache >= 64 << 20 && need.page_cache < 66 << 20,
            "{need:?}"
        );
        // Histograms of every worker a per-CPU pool may have (four per CPU
        // on the verifying queue) are most of the rest.
        assert!(need.total() < 192 << 20, "{need:?}");
        need.check(&s, 512 << 20).unwrap();
    }

    #[test]
    fn the_tree_has_frames_of_its_own_beside_cache_size() {
        // cache.size = 0: the frames still hold every bio at its largest,
        // the tree reads' readahead and the whole 517-page tree of a
        // 256 MiB file; a 1 TiB file's tree is held up to 64 MiB.
        let mut s = Settings::default();
        s.set("cache.size", "0").unwrap();
        let g = CacheGeometry::of(&s);
        assert_eq!(g.capacity, 0);
        let inflight = g.bios * 32 + crate::engine::tree::MAX_TREE_RA * 4;
        assert_eq!(g.reserve, inflight + 517);
        s.set("workload.file_size", "1T").unwrap();
        assert_eq!(CacheGeometry::of(&s).reserve, inflight + MAX_TREE_HOLD);
    }

    #[test]
    fn tree_size_matches_the_kernel_layout() {
        // 256 MiB: 65536 leaves -> 512 level-0 blocks -> 4 -> 1.
        assert_eq!(tree_bytes(256 << 20), (512 + 4 + 1) * 4096);
        assert_eq!(tree_bytes(4096), 4096);
        // A 1 TiB file's tree is about 8 GiB, and is named as the cause.
        let mut s = Settings::default();
        s.set("workload.file_size", "1T").unwrap();
        // No page cache frames: the tree is then the largest part.
        s.set("cache.size", "0").unwrap();
        let e = MemoryNeed::of(&s, 2)
            .check(&s, 4 << 30)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("lower workload.file_size"), "{e}");
    }
}
