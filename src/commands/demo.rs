//! `readpath demo`: a scripted demo played in the explorer (a shipped name
//! or a TOML script), here or on a target; with no name, the list of the
//! shipped demos.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use crate::cli::{SettingsArgs, TuiArgs};
use crate::invocation::{BadInput, bad_input, preset_error};
use crate::scenario::preset;

use super::RemoteChoice;
use super::explore::{explore, explore_remote};
use super::target::remote_spec;

/// `readpath demo [NAME]`: plays the demo `script` names, or lists the
/// shipped demos when there is none.
pub(super) fn demo(
    data_dir: &Path,
    script: Option<&str>,
    args: &SettingsArgs,
    t: &TuiArgs,
    remote: RemoteChoice,
) -> Result<()> {
    match script {
        Some(script) => play(data_dir, script, args, t, remote),
        None => list_demos(),
    }
}

/// Plays one demo: its start settings (with `--set`s on top) in the
/// explorer, its steps applied as it goes.
fn play(
    data_dir: &Path,
    spec: &str,
    args: &SettingsArgs,
    t: &TuiArgs,
    remote: RemoteChoice,
) -> Result<()> {
    let cpus = crate::sys::online_cpus().len();
    let d = crate::scenario::demo::resolve(spec, cpus).map_err(bad_input)?;
    if let Some((r, ra)) = remote {
        // The demo's settings go whole; the target validates them.
        let mut spec = remote_spec(
            &SettingsArgs {
                preset: None,
                set: args.set.clone(),
            },
            "demo",
            t.interval,
            &ra,
        )?;
        spec.settings = Some(d.start.clone());
        return explore_remote(t, r, spec, Some(d));
    }
    let mut settings = d.start.clone();
    for spec in &args.set {
        settings
            .apply_override(spec)
            .map_err(|e| BadInput(e.to_string()))?;
    }
    settings
        .validate(cpus)
        .map_err(|e| BadInput(e.to_string()))?;
    let preset = match &d.preset {
        Some(p) => Some(preset::resolve(p).map_err(preset_error)?.0),
        None => None,
    };
    let inputs: Vec<PathBuf> = (spec.contains('/') || spec.ends_with(".toml"))
        .then(|| PathBuf::from(spec))
        .into_iter()
        .collect();
    explore(data_dir, settings, preset, t, Some(d), &inputs)
}

/// `readpath demo` with no name: each shipped demo, its steps and length,
/// and what it shows.
fn list_demos() -> Result<()> {
    use crate::scenario::demo::{SHIPPED, Wait, resolve};
    let cpus = crate::sys::online_cpus().len();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "readpath demo NAME (or a script file); the shipped demos:"
    )?;
    for (name, _) in SHIPPED {
        let d = resolve(name, cpus).map_err(bad_input)?;
        let timed: Duration = d
            .steps
            .iter()
            .filter_map(|s| match s.wait {
                Wait::For(t) => Some(t),
                Wait::Key => None,
            })
            .sum();
        let keys = d.steps.iter().filter(|s| s.wait == Wait::Key).count();
        let length = match keys {
            0 => format!("{:.0} s", timed.as_secs_f64()),
            1 => format!("{:.0} s + 1 key press", timed.as_secs_f64()),
            n => format!("{:.0} s + {n} key presses", timed.as_secs_f64()),
        };
        writeln!(out, "\n  {name}  ({} steps, {length})", d.steps.len())?;
        let words: Vec<&str> = d.description.split_whitespace().collect();
        let mut line = String::from("   ");
        for w in words {
            if line.len() + w.len() + 1 > 78 {
                writeln!(out, "{line}")?;
                line = String::from("   ");
            }
            line.push(' ');
            line.push_str(w);
        }
        if !line.trim().is_empty() {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}
