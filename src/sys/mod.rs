//! Everything readpath asks the kernel about itself.
//!
//! readpath measures scheduler latency the way kernel engineers do, so it needs
//! the kernel's own bookkeeping rather than guesses from wall clocks: per-thread
//! CPU time, run-queue delay and timeslices (`/proc/self/task/TID/schedstat`),
//! voluntary and involuntary context switches (`.../status`, or `.../sched`
//! when present), migrations (`.../sched`), per-CPU busy/iowait time (`/proc/stat`), and process CPU time
//! and RSS. It also decides where threads run and at what priority
//! (`sched_setaffinity`, `setpriority`), probes once at startup what the machine
//! and kernel offer (io_uring and its `NO_IOWAIT` feature, AES/SHA
//! instructions, schedstat, the right to raise priority, O_DIRECT), and records
//! a description of the machine with every result. It also holds the kernel
//! interfaces readpath drives directly: the fscrypt and fs-verity ioctls,
//! mounts and loop devices, raw reads and polls. This module is the only
//! place in readpath that calls libc (`tests/layers.rs` checks it), so every
//! raw syscall lives here, each `unsafe` block with its own `SAFETY:`
//! argument. The engine's io_uring submissions go through the `io_uring`
//! crate, and its hot-path reads through [`pread_raw`] and [`preadv_raw`],
//! inline and `unsafe` because their buffers are raw pointers only the
//! engine can vouch for.
//!
//! Readers meant to run every sampling interval ([`ThreadStatReader`],
//! [`ProcStatReader`]) keep their files open and `pread` them at offset 0 into
//! a buffer they own. procfs seq files regenerate their contents on a read at
//! offset 0, so after the first call a sample costs one syscall per file and no
//! allocation. The parsers are pure functions over text, tested against fixed
//! samples independently of the live files.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
mod afalg;
mod calls;
pub mod cgroup;
mod cpu;
mod features;
mod fs;
pub mod fscrypt;
pub mod fsverity;
mod irqs;
mod machine;
mod mount;
mod priority;
mod process;
mod procfs;
mod rawio;
mod signals;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod text;
mod topology;
pub mod trust;

// Inside `sys` every file sees its siblings' items (`use super::*` in each,
// and in the tests) through these private globs; what the rest of the
// crate may name is the explicit list below.
#[allow(unused_imports)]
use {
    afalg::*, calls::*, cpu::*, features::*, fs::*, irqs::*, machine::*, mount::*, priority::*,
    process::*, procfs::*, rawio::*, signals::*, text::*, topology::*,
};

/// Clocks: monotonic and CPU time, for stamps and sampling.
pub use calls::{cpu_clock_ns, current_thread_cpu_clock, monotonic_ns, thread_cpu_time_ns};
pub use process::{process_cpu_time_ns, process_rss_bytes};

/// Small descriptor calls: eventfds, the terminal's bytes, FIFOs,
/// non-blocking mode, free space.
pub use calls::{
    EventFd, StdinRead, c_path, free_bytes, fs_block_size, lacks_algorithm, make_fifo,
    opened_direct, read_stdin, set_nonblocking,
};

/// Raw reads, writes and waits, and the libc constants the crate names
/// (the engine's hot-path reads are `pread_raw` and `preadv_raw`).
pub use rawio::{
    EMPTY_IOVEC, IoVec, PIPE_BUF, Ready, STDOUT_FD, dev_numbers, errno, is_regular_fd,
    max_sectors_kb_of, oflag, pread_raw, preadv_raw, wait_ready, write_fd,
};

/// CPUs: which one runs, affinity, CPU lists as Linux writes them, and the
/// topology the workqueue groups CPUs by.
pub use cpu::{
    CpuListError, CpuMaskError, MAX_CPU_NUMBER, MAX_CPUS, cpu_mask_hex, cpu_number_error,
    current_cpu, current_thread_affinity, format_cpu_list, gettid, online_count, online_cpus,
    parse_cpu_list, parse_cpu_mask_hex, pin_current_thread, pin_thread, thread_affinity,
    unpin_current_thread,
};
pub use topology::{
    CpuTopo, cpu_capacities, cpu_topology, default_affinity_scope, pods_by, read_capacities,
    read_topology,
};

/// Where a block device's completion interrupts land.
pub use irqs::{
    DeviceIrq, DeviceIrqs, device_irqs, device_irqs_in, device_irqs_of, parse_interrupts,
    queue_irqs,
};

/// Priority and scheduling policy of threads.
pub use priority::{
    FifoError, IRQ_FIFO_PRIORITY, NiceError, RaiseError, can_raise_priority, current_thread_nice,
    set_current_thread_fifo, set_current_thread_nice, thread_policy,
};

/// The kernel's per-thread and per-CPU bookkeeping (`/proc`).
pub use procfs::{
    CpuTimes, CpuUsage, ProcStatReader, ThreadCounters, ThreadStatReader, clock_ticks_per_sec,
    cpu_usage, delayacct_on, schedstat_available, stat_field, thread_comm,
};

/// What `/proc` proves of another process, and the machine's memory.
pub use process::{ProcessInfo, memory_total_bytes, process_info, terminate_started};
/// Processes and memory: liveness, tools, write access, stale files, what
/// memory is left.
pub use process::{
    can_write, die_with_parent, memory_available_bytes, process_alive, remove_stale_temps,
    tool_on_path,
};

/// Signals: stop, resize, suspend and continue, as flags to poll.
pub use signals::{
    SIGHUP, STOP_SIGNALS, install_stop_handlers, install_terminal_handlers, kill_group,
    signal_name, stop_requested, stop_self, stop_signal, take_continued, take_resized,
    take_suspend, terminate,
};

/// The page cache: O_DIRECT, dropping, warming and residency of a file.
pub use fs::{
    Mapping, Residency, SharedMem, fadvise_dontneed, page_cache_residency, page_size,
    supports_o_direct, warm_page_cache,
};

/// Files from outside: which kernel pseudo-filesystem one is on (refused
/// as input), and a log's head cut off in place.
pub use fs::{collapse_head, pseudo_fs_of};

/// What the machine and kernel offer, probed once, and the description
/// recorded with every result.
pub use features::{
    AUTOGROUP_SYSCTL, Features, LAB_SWITCHES_DIR, WQ_AFFINITY_SCOPE, crypto_driver,
    ext4_has_verity, parse_crypto_driver, probe_features,
};
pub use machine::{
    MachineInfo, fs_type_name, kernel_version, machine_info, machine_kernel,
    nearest_existing_ancestor,
};

/// The kernel's crypto API from user space (AF_ALG): its `xts(aes)` and
/// `sha256`, one operation socket per thread.
pub use afalg::{ALG_IV_SIZE, AlgOp, AlgTfm, MAX_DIGEST_PARTS, probe as afalg_probe};

/// Mounts, unmounts and loop devices (the kernel target's image).
pub use mount::{loopdev, mount, unmount};

/// Text safe for a terminal.
pub use text::{printable, stderr_columns};

#[cfg(test)]
mod tests;
