//! readpath beyond one machine: the explorer, `run` and friends on a
//! laptop, the workload on a phone or a test server. No protocol server of
//! our own: the user's ssh or adb starts `readpath agent` on the target
//! ([`transport`]), which speaks JSON lines ([`protocol`]) on its stdin and
//! stdout ([`agent`]); [`client`] makes it a [`crate::engine::workload::Workload`]
//! the explorer drives like the local engine.

pub(crate) mod agent;
pub(crate) mod client;
pub mod pace;
pub mod protocol;
pub(crate) mod transport;
