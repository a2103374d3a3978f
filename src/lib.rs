//! readpath: a userspace model of the Linux read post-processing path.
//!
//! A real read workload (io_uring or pread, on a real file) feeds completed
//! blocks to worker threads that decrypt them (fscrypt-style AES-256-XTS or
//! Adiantum) and verify them (an fs-verity Merkle tree), the way ext4 and f2fs
//! do it in the kernel. The engine knows nothing about terminals: the headless
//! runner, the TUI, experiments and recordings all read the same per-interval
//! [`metrics::IntervalRecord`]s.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

pub(crate) mod bench;
pub(crate) mod choice;
pub mod cli;
pub mod commands;
pub mod crypto;
pub mod dataset;
pub mod engine;
pub mod files;
pub mod invocation;
pub mod kernel;
pub mod lab;
pub mod metrics;
pub mod output;
pub mod remote;
pub mod scenario;
pub mod settings;
pub mod sys;
pub mod tui;
pub mod verity;
