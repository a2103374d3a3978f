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
//! a description of the machine with every result. This module and the
//! io_uring reader are the only places in readpath that make raw syscalls, so
//! every `unsafe` block the rest of the crate depends on for talking to the
//! kernel lives here, each with its own `SAFETY:` argument.
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
mod calls;
mod cpu;
mod features;
mod fs;
mod machine;
mod priority;
mod process;
mod procfs;
mod signals;
mod topology;
pub mod trust;

pub use calls::*;
pub use cpu::*;
pub use features::*;
pub use fs::*;
pub use machine::*;
pub use priority::*;
pub use process::*;
pub use procfs::*;
pub use signals::*;
pub use topology::*;

#[cfg(test)]
mod tests;
