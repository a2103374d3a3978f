//! `readpath validate`: the model and the running kernel side by side on
//! like-for-like conditions, each metric's ratio and verdict computed
//! (see [`crate::output::validate`]).

use anyhow::Result;

use crate::cli::{Format, SettingsArgs};
use crate::invocation::{bad_input, load_settings_for, say};
use crate::output::experiment::CompareOptions;
use crate::output::validate::{ValidateReport, like_for_like};
use crate::scenario::preset::Compare;

use super::compare::check_variants;
use super::engine_error;
use super::outputs::{emit, round_progress, say_raw};
use super::prepare::{prepare_dataset, progress_reporter};

/// `readpath validate`: `tolerance_pct` is the verdicts' bound.
pub(super) fn validate(
    args: &SettingsArgs,
    opts: CompareOptions,
    tolerance_pct: f64,
    pair: &[String; 2],
    format: Format,
) -> Result<()> {
    let cpus = crate::sys::online_cpus().len();
    let (mut settings, preset) = load_settings_for(args.preset.as_deref(), &args.set, cpus)?;
    let features = crate::sys::probe_features();
    if let Some(why) = &features.kernel_target_reason
        && pair.iter().any(|t| t == "kernel")
    {
        anyhow::bail!("validate runs the kernel target, which cannot run here: {why}");
    }
    let adjustments = like_for_like(&mut settings, &features);
    let cmp = Compare::parse_vary(
        &format!("workload.target={},{}", pair[0], pair[1]),
        &settings,
    )
    .map_err(bad_input)?;
    check_variants(&settings, &cmp, cpus, true)?;
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut progress = round_progress("validate", opts.rounds, |_, i| cmp.values[i].to_string());
    crate::sys::install_stop_handlers();
    prepare_dataset(&opts.engine.data_dir, &settings)?;
    if tty && !adjustments.is_empty() {
        say(&format!(
            "readpath: validate: made like for like: {}",
            adjustments.join("; ")
        ));
    }
    let mut ds_progress = progress_reporter();
    let report = crate::output::experiment::run(
        &settings,
        &cmp,
        preset.map(|p| p.name),
        &opts,
        &mut progress,
        &mut ds_progress,
        None,
    )
    .map_err(engine_error)?;
    if tty {
        say_raw("\r\x1b[K");
    }
    let v = ValidateReport::of(report, adjustments, tolerance_pct);
    emit(format, &v, || v.to_text())
}
