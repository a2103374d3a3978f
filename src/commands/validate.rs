//! `readpath validate`: the model and the running kernel side by side on
//! like-for-like conditions, each metric's ratio and verdict computed
//! (see [`crate::output::validate`]), here or on `--remote`'s target (a
//! lab guest: the model and the guest's kernel on the same emulated CPUs,
//! made like for like by the target's own features).

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
    remote: super::RemoteChoice,
) -> Result<()> {
    if let Some((r, ra)) = remote {
        return on_target(args, opts, tolerance_pct, pair, format, r, &ra);
    }
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
    let (cmp, adjustments) = untraced(cmp, &settings, adjustments);
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut progress = round_progress("validate", opts.rounds, |_, i| cmp.label(i));
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
        &mut None,
    )
    .map_err(engine_error)?;
    if tty {
        say_raw("\r\x1b[K");
    }
    let v = ValidateReport::of(report, adjustments, tolerance_pct);
    emit(format, &v, || v.to_text())
}

/// `validate --remote`: the agent starts on the target with the settings
/// as given (their ranges checked here, its CPUs there), the adjustments
/// are made from the target's features (its kernel's fs-verity, AF_ALG,
/// autogroups: what its header says), and every round runs in that one
/// session, model and kernel interleaved.
fn on_target(
    args: &SettingsArgs,
    opts: CompareOptions,
    tolerance_pct: f64,
    pair: &[String; 2],
    format: Format,
    r: crate::remote::transport::Remote,
    ra: &crate::cli::RemoteArgs,
) -> Result<()> {
    let cpus = crate::settings::MAX_CPU_NUMBER + 1;
    let (mut settings, preset) = load_settings_for(args.preset.as_deref(), &args.set, cpus)?;
    let label = r.label();
    // The settings go whole, as loaded here (the preset and overrides are
    // not resolved a second time there).
    let none = SettingsArgs {
        preset: None,
        set: Vec::new(),
    };
    let mut spec = super::target::remote_spec(&none, "validate", opts.engine.interval, ra)?;
    spec.settings = Some(settings.clone());
    let mut w = super::target::start_remote(r, spec)?;
    let features = crate::engine::workload::Workload::features(&w).clone();
    if let Some(why) = &features.kernel_target_reason
        && pair.iter().any(|t| t == "kernel")
    {
        let _ = w.finish();
        anyhow::bail!("validate runs the kernel target, which cannot run on {label}: {why}");
    }
    // The target's kernel: its release (the era) and features (its cipher
    // driver among them), as its header reports them.
    let release = crate::engine::workload::Workload::machine(&w).kernel;
    let adjustments =
        crate::output::validate::like_for_like_with(&mut settings, &features, &release);
    let cmp = Compare::parse_vary(
        &format!("workload.target={},{}", pair[0], pair[1]),
        &settings,
    )
    .map_err(bad_input)?;
    check_variants(&settings, &cmp, cpus, false)?;
    let (cmp, adjustments) = untraced(cmp, &settings, adjustments);
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    if tty && !adjustments.is_empty() {
        say(&format!(
            "readpath: validate: made like for like on {label}: {}",
            adjustments.join("; ")
        ));
    }
    let mut progress = round_progress("validate", opts.rounds, |_, i| cmp.label(i));
    let mut rec = crate::output::experiment::Outputs::default();
    let run = crate::output::experiment::run_on(
        &mut w,
        &settings,
        &cmp,
        preset.map(|p| p.name),
        &opts,
        &mut progress,
        &mut rec,
    );
    let finished = w.finish();
    if tty {
        say_raw("\r\x1b[K");
    }
    let mut report = run.map_err(engine_error)?;
    if let Err(e) = finished.summary
        && report.ran.interrupted.is_none()
    {
        report.ran.interrupted = Some(format!("{label}: the session ended badly: {e}"));
    }
    let v = ValidateReport::of(report, adjustments, tolerance_pct);
    emit(format, &v, || v.to_text())
}

/// `cmp` with the kernel's rounds without tracing
/// ([`crate::output::validate::with_untraced_kernel`]), and a sentence
/// saying so among the adjustments where it added any.
fn untraced(
    cmp: Compare,
    settings: &crate::settings::Settings,
    mut said: Vec<String>,
) -> (Compare, Vec<String>) {
    let n = cmp.values.len();
    let cmp = crate::output::validate::with_untraced_kernel(cmp, settings);
    if cmp.values.len() > n {
        said.push(format!(
            "{} = false in rounds of their own: the kernel's MiB/s, IOPS, latency and iowait come from those (its tracepoints slow it: by about a sixth in a lab guest), its queue figures from the traced rounds, and its bios/s from them carried to the untraced throughput (bios per byte read, which tracing leaves alone)",
            crate::key!(kernel.trace).name()
        ));
    }
    (cmp, said)
}
