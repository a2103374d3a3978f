//! One test of a binary at a time where tests would disturb each other:
//! a workload's SCHED_FIFO irq threads or hogs pinned to a CPU starve
//! another test's workers on that CPU (a sweep round on CI once counted no
//! read in 500 ms while `workload.cpus = 1`'s irq thread held CPU 0), and
//! a test reading machine-wide counters or this process's threads must
//! see only its own engine. Cargo runs test binaries one after another,
//! so a lock per binary is a lock for the whole suite.

use std::sync::{Mutex, MutexGuard};

/// Held for the whole of a test that runs a workload (or looks at this
/// process's threads); a test that panicked does not poison it.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
