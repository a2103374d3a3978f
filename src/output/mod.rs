//! Everything readpath writes for people and other tools, all read from the
//! same per-interval records: the headless summary (`report`), recordings
//! for replay (`recording`), slide charts and CSV (`plot`), A/B experiment
//! tables (`experiment`) and their verdicts against the published figure
//! (`verdict`), sweeps over a grid of load and CPUs (`sweep`, drawn by
//! `heatmap`), Perfetto traces of where each work item ran (`perfetto`) and
//! its lanes as a picture (`lanes`),
//! the model-against-kernel table (`validate`) and the shared
//! number formatting (`format`). Every file is written the one way
//! [`crate::files`] allows: never onto a device or an input, atomically for
//! regular files.

pub mod agreement;
pub mod experiment;
pub(crate) mod format;
pub(crate) mod heatmap;
pub(crate) mod lanes;
pub mod perfetto;
pub(crate) mod plot;
pub mod recording;
pub mod report;
pub mod sweep;
pub(crate) mod validate;
pub mod verdict;
