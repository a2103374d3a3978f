//! Everything readpath writes for people and other tools, all read from the
//! same per-interval records: the headless summary (`report`), recordings
//! for replay (`recording`), slide charts and CSV (`plot`), A/B experiment
//! tables (`experiment`), the shared number formatting (`format`), and the
//! one way an output file is written (`file`: never onto a device or an
//! input, atomically for regular files).

pub mod experiment;
pub(crate) mod format;
pub(crate) mod heatmap;
pub(crate) mod plot;
pub mod recording;
pub mod report;
pub mod sweep;
pub(crate) mod validate;
pub mod verdict;
