//! The named values the settings take (`bound`, `unbound`, `iowait`...),
//! each enum written once with [`crate::named_enum!`]: its names, cycle
//! order, parsing and serde come from that one list, and the settings table
//! ([`super::table`]) reads a key's allowed values from it.

crate::named_enum! {
    /// What runs the post-read work (`workload.target`).
    Target {
        /// readpath's model: its own page cache, queues and workers.
        Model => "model",
        /// The running kernel: a file on an ext4 with `encrypt`, read through
        /// the kernel's own fscrypt (and fs-verity where it has it).
        Kernel => "kernel",
    }
}

crate::named_enum! {
    /// How reads are issued.
    EngineKind {
        /// io_uring, `queue_depth` reads in flight per reader.
        Uring => "uring",
        /// Blocking `pread`, one read at a time per reader.
        Sync => "sync",
    }
}

crate::named_enum! {
    /// How a reader waits for a read to complete.
    SleepMode {
        /// Sleep counted as iowait (`io_schedule`), as the page cache does.
        Iowait => "iowait",
        /// Plain interruptible sleep, not counted as iowait.
        Plain => "plain",
        /// Busy-poll for the completion.
        Poll => "poll",
    }
}

crate::named_enum! {
    /// Where a device completion queues the post-read work
    /// (`workload.completion`).
    Completion {
        /// In a context standing for the interrupt: a SCHED_FIFO thread on
        /// the CPU where the completion lands, as the kernel's bio end_io.
        Irq => "irq",
        /// In the reader that submitted it, a nice-0 thread (threaded IRQs).
        Thread => "thread",
    }
}

crate::named_enum! {
    /// Which offsets are read.
    Pattern {
        /// Uniformly random block-aligned offsets.
        Random => "random",
        /// Consecutive blocks, wrapping at the end of the file.
        Sequential => "sequential",
        /// Runs of `workload.burst` consecutive bytes, each from a random
        /// block: an app start reading its APK, dex and .so files.
        Bursts => "bursts",
    }
}

crate::named_enum! {
    /// Where the decrypt stage (or the only stage, when one is on) runs.
    WorkerMode {
        /// In the reader's own context, right after the read completes.
        Inline => "inline",
        /// On a per-CPU (bound) worker queue, on the CPU that completed the read.
        Bound => "bound",
        /// On an unbound worker pool that may run on any CPU.
        Unbound => "unbound",
    }
}

crate::named_enum! {
    /// Where the verify stage runs when decrypt is also on.
    VerifyMode {
        /// On the same queue as decrypt, in the same work item.
        Same => "same",
        /// In the context that finished decrypting.
        Inline => "inline",
        /// On its own per-CPU (bound) worker queue.
        Bound => "bound",
        /// On its own unbound worker pool.
        Unbound => "unbound",
    }
}

crate::named_enum! {
    /// Which CPUs an unbound queue runs a work item on (`workers.affinity_scope`,
    /// the kernel's `workqueue.default_affinity_scope`, v6.5+): those of the
    /// queueing CPU's pod.
    AffinityScope {
        /// Each CPU is its own pod.
        Cpu => "cpu",
        /// A pod per core: the CPU's SMT siblings.
        Smt => "smt",
        /// A pod per last-level cache (the kernel's default).
        Cache => "cache",
        /// A pod per NUMA node.
        Numa => "numa",
        /// One pod of every CPU (the kernel before v6.5).
        System => "system",
    }
}

crate::named_enum! {
    /// Which kernel's workqueues and fs-verity the model follows
    /// (`workers.kernel_era`); see [`crate::engine::era`] for what each sets.
    KernelEra {
        /// Linux 4.19 (fscrypt's queue unbound since 4.18; fs-verity as
        /// first merged in 5.4, which Android's 4.19 carried).
        V4_19 => "4.19",
        /// Android's 5.15 as the 2023 fs-verity measurement ran it: both
        /// queues unbound, one unbound pool per NUMA node.
        V5_15Android => "5.15-android",
        /// Linux 6.1 as Debian ships it (6.1.172): fs-verity's queue bound
        /// (the 2023 change, backported), no affinity scopes yet.
        V6_1 => "6.1",
        /// Linux 6.18: affinity scopes, CPU_INTENSIVE detection, tree
        /// readahead sized from the completed bio's `bi_size`.
        V6_18 => "6.18",
    }
}

crate::named_enum! {
    /// What a page-cache miss reads from (`cache.device`).
    CacheDevice {
        /// The real device: every bio is an O_DIRECT read of the ciphertext file.
        Disk => "disk",
        /// A device with almost no latency and, like a device's DMA, no
        /// CPU cost: a bio reads nothing; its post-read work decrypts its
        /// pages straight from a mapping of the ciphertext file (held in
        /// the kernel's own cache of it), or copies them where nothing
        /// decrypts.
        Memory => "memory",
        /// The kernel target's device: every bio is an O_DIRECT read of the
        /// blocks the kernel target's file occupies (FIEMAP) on its block
        /// device (readpath's loop device, or the disk under `kernel.dir`),
        /// decrypted with that file's key: the device the kernel reads.
        Target => "target",
    }
}
