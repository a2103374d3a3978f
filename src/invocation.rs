//! What every command invocation needs, local or on a target's agent:
//! settings loaded from `--preset` and `--set`s ([`load_settings`]), the
//! error that means "the input was bad" ([`BadInput`], exit status 2), an
//! error's message said once ([`error_message`]), and a workload stopped
//! with its last records drained ([`stop_and_drain`]).
//!
//! It exists below both `commands` (the command line's commands) and
//! `remote` (whose agent runs a workload for another machine's readpath):
//! both need these, and neither may import the other, so they live here,
//! where nothing of the command line's argument definitions is known.

use std::io::Write;

use anyhow::Result;

use crate::engine::Engine;
use crate::scenario::preset::{self, Preset, PresetError};
use crate::settings::Settings;

/// An error caused by the user's input: exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// A typed error of the user's input as a [`BadInput`], in its own words
/// (`.map_err(bad_input)`).
pub fn bad_input(e: impl std::fmt::Display) -> BadInput {
    BadInput(e.to_string())
}

/// Builds settings from a preset (`--preset`: a name or a file) then
/// overrides (`--set SECTION.KEY=VALUE`), validated for this machine;
/// returns the preset too.
pub fn load_settings(preset: Option<&str>, set: &[String]) -> Result<(Settings, Option<Preset>)> {
    load_settings_for(preset, set, crate::sys::online_cpus().len())
}

/// [`load_settings`] validated for a machine of `cpus` CPUs (a target's,
/// or any machine's: `MAX_CPU_NUMBER + 1`, when only the targets know).
pub fn load_settings_for(
    preset: Option<&str>,
    set: &[String],
    cpus: usize,
) -> Result<(Settings, Option<Preset>)> {
    let preset = match preset {
        Some(spec) => Some(preset::resolve(spec).map_err(preset_error)?.0),
        None => None,
    };
    let mut s = preset
        .as_ref()
        .map_or_else(Settings::default, |p| p.settings.clone());
    for spec in set {
        s.apply_override(spec)
            .map_err(|e| BadInput(e.to_string()))?;
    }
    s.validate(cpus).map_err(|e| BadInput(e.to_string()))?;
    Ok((s, preset))
}

/// A preset that cannot be used: bad input when it is the user's (a
/// missing name, a bad file), any other failure as itself.
pub fn preset_error(e: PresetError) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        e.into()
    }
}

/// Writes a line to stderr. A closed or hung-up stderr (the terminal went
/// away) is not an error: `eprintln!` would panic there.
pub fn say(msg: &str) {
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// The message of an error and its causes, each once: a cause whose text
/// the message already holds (an OS error quoted by its wrapper) is not
/// repeated.
pub fn error_message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    crate::output::format::printable(&out, true)
}

/// Stops the engine and returns its totals plus the records not consumed yet.
pub fn stop_and_drain(
    engine: Engine,
) -> (
    crate::engine::RunTotals,
    Vec<crate::metrics::IntervalRecord>,
) {
    let (totals, rx) = engine.stop_with_records();
    (totals, rx.try_iter().collect())
}
