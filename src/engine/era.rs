//! Kernel eras: what `workers.kernel_era` changes in the model, in one
//! place, so that the pipeline, the stages and the header agree on which
//! kernel they follow.
//!
//! The post-read path changed between the kernels the seed experiments ran
//! on and 6.18: the queue flags fscrypt and fs-verity allocate their queues
//! with (fs/crypto/crypto.c `fscrypt_init`, fs/verity/verify.c
//! `fsverity_init_workqueue`), the unbound pool layout (one pool per NUMA
//! node before 6.5, pods of an affinity scope since), CPU_INTENSIVE
//! detection (`wq_worker_tick`, 6.5) and how much of the Merkle tree a
//! verifying item reads ahead (`fsverity_verify_bio`). docs/model.md has a
//! section per era with the source lines each rule follows.

use crate::settings::KernelEra;
#[cfg(test)]
use crate::settings::{VerifyMode, WorkerMode};

/// CPU time after which a per-CPU work item is CPU_INTENSIVE
/// (`wq_cpu_intensive_thresh_us`, 10 ms by default, since 6.5).
pub const CPU_INTENSIVE_THRESH_NS: u64 = 10_000_000;

/// The model's rules for one kernel era.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Era(pub KernelEra);

/// Where the era's fscrypt and fs-verity queues run their work, as the
/// settings name it.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFlags {
    /// fscrypt_read_queue (the decrypt stage).
    pub mode: WorkerMode,
    /// fsverity_read_queue (the verify stage, its own queue in ext4).
    pub verify_mode: VerifyMode,
    /// WQ_HIGHPRI on both.
    pub highpri: bool,
}

impl Era {
    /// The rules of `k`.
    pub fn of(k: KernelEra) -> Era {
        Era(k)
    }

    /// The flags its fscrypt and fs-verity queues were allocated with
    /// ([`KernelEra::queue_flags`]).
    #[cfg(test)]
    pub fn flags(self) -> QueueFlags {
        let (mode, verify_mode, highpri) = self.0.queue_flags();
        QueueFlags {
            mode,
            verify_mode,
            highpri,
        }
    }

    /// The flags as the kernel source writes them: (fscrypt's, fs-verity's).
    pub fn flag_text(self) -> (&'static str, &'static str) {
        let verity = match self.0 {
            KernelEra::V4_19 | KernelEra::V5_15Android => "WQ_UNBOUND|WQ_HIGHPRI",
            KernelEra::V6_1 => "WQ_HIGHPRI",
            KernelEra::V6_18 => "WQ_HIGHPRI|WQ_PERCPU",
        };
        ("WQ_UNBOUND|WQ_HIGHPRI", verity)
    }

    /// Unbound workqueues have affinity scopes (pods), v6.5+; before, one
    /// pool per NUMA node (`wq_numa_init`, `numa_pwq_tbl`).
    pub fn has_affinity_scopes(self) -> bool {
        self == Era(KernelEra::V6_18)
    }

    /// blk-mq's rq_affinity = 1 also sends a completion back to a
    /// submitter of different CPU capacity (v6.11, `cpus_equal_capacity`
    /// in `blk_mq_complete_need_ipi`).
    pub fn capacity_rule(self) -> bool {
        matches!(self.0, KernelEra::V6_18)
    }

    /// The data blocks of one bio are hashed two at a time: 6.18's
    /// `fsverity_verify_pending_blocks()` calls `sha256_finup_2x()` for
    /// each pair (interleaved where the CPU has an optimized SHA-256).
    /// Before, each block had a hash call of its own (6.1's `verify_page()`
    /// -> `fsverity_hash_page()`, one page per call), so a verify item
    /// costs about twice the hashing.
    pub fn hashes_pairs(self) -> bool {
        self == Era(KernelEra::V6_18)
    }

    /// A per-CPU work item running over [`CPU_INTENSIVE_THRESH_NS`] of CPU
    /// is marked CPU_INTENSIVE and leaves concurrency management (6.5+).
    pub fn detects_cpu_intensive(self) -> bool {
        self == Era(KernelEra::V6_18)
    }

    /// Tree pages a verifying item reads ahead at the leaf level for a bio
    /// of `bio_pages` pages; `readahead_bio`: it was submitted for
    /// readahead (`REQ_RAHEAD`; every data bio of the model's page cache
    /// is, as every bio of `read_pages()` is). Before 6.3
    /// `fsverity_verify_bio` counted the bio's segments and read ahead a
    /// quarter of them; since, it shifts `bio->bi_iter.bi_size` right by
    /// `PAGE_SHIFT + 2`, and `blk_update_request()` has advanced `bi_size`
    /// to 0 before `bio_endio()` on a completion that is not batched (loop,
    /// SCSI, UFS), as the model's are: no readahead.
    pub fn tree_readahead(self, bio_pages: usize, readahead_bio: bool) -> usize {
        if !readahead_bio {
            return 0;
        }
        match self.0 {
            KernelEra::V4_19 | KernelEra::V5_15Android | KernelEra::V6_1 => bio_pages / 4,
            KernelEra::V6_18 => {
                let bi_size_at_endio = 0usize;
                bi_size_at_endio >> (12 + 2)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_era_has_its_kernels_rules() {
        let e = |k| Era::of(k);
        assert_eq!(
            e(KernelEra::V5_15Android).flags().verify_mode,
            VerifyMode::Unbound
        );
        assert_eq!(e(KernelEra::V6_1).flags().verify_mode, VerifyMode::Bound);
        assert_eq!(e(KernelEra::V6_1).tree_readahead(32, true), 8);
        assert_eq!(e(KernelEra::V6_1).tree_readahead(32, false), 0);
        assert_eq!(e(KernelEra::V6_18).tree_readahead(32, true), 0);
        assert!(!e(KernelEra::V6_1).has_affinity_scopes());
        assert!(e(KernelEra::V6_18).detects_cpu_intensive());
        assert!(e(KernelEra::V6_18).hashes_pairs());
        for k in [KernelEra::V4_19, KernelEra::V5_15Android, KernelEra::V6_1] {
            assert!(!e(k).hashes_pairs(), "{k:?} hashes one block per call");
        }
    }
}
