//! What a user brings to a run besides flags: presets (a named set of
//! settings, shipped or saved) and demo scripts (timed or keyed steps for a
//! talk). Both are small TOML files, read with limits and validated before
//! anything runs.

pub mod demo;
pub mod preset;
