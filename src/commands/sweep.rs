//! `readpath sweep`: the preset's A/B at every point of a grid, every
//! point checked before anything runs, the grid printed (text or JSON) and
//! optionally kept as JSON for `readpath plot` (a heat map) and the
//! explorer (`readpath replay FILE`).

use std::io::IsTerminal;
use std::path::Path;

use anyhow::Result;

use crate::cli::{Format, SettingsArgs};
use crate::invocation::{BadInput, bad_input, load_settings_for, say};
use crate::output::experiment::CompareOptions;
use crate::output::sweep::{self, Axis, MAX_POINTS, SweepPlan};
use crate::settings::Settings;

use super::compare::{check_variants, published_for, what_varies};
use super::engine_error;
use super::outputs::{check_output, emit, output_error, preset_input, say_raw};
use super::prepare::{prepare_dataset, progress_reporter};

/// `readpath sweep`.
pub(super) fn sweep(
    args: &SettingsArgs,
    vary: Option<&str>,
    across: &[String],
    metric: Option<&str>,
    opts: CompareOptions,
    (format, out): (Format, Option<&Path>),
    remote: super::RemoteChoice,
) -> Result<()> {
    // On a remote target its CPUs are checked there (as `compare` does).
    let cpus = if remote.is_some() {
        crate::settings::MAX_CPU_NUMBER + 1
    } else {
        crate::sys::online_cpus().len()
    };
    let (mut settings, preset) = load_settings_for(args.preset.as_deref(), &args.set, cpus)?;
    let cmp = what_varies(vary, preset.as_ref(), &settings)?;
    if cmp.values.len() != 2 {
        return Err(BadInput(format!(
            "sweep: {} has {} values; a sweep's cells are the change from A to B: give exactly two (--vary {}=A,B)",
            cmp.key,
            cmp.values.len(),
            cmp.key
        ))
        .into());
    }
    if across.len() > 2 {
        return Err(BadInput(format!(
            "sweep: {} --across; a grid has one or two axes",
            across.len()
        ))
        .into());
    }
    let axes: Vec<Axis> = across
        .iter()
        .map(|a| Axis::parse(a).map_err(bad_input))
        .collect::<Result<_, _>>()?;
    for (i, a) in axes.iter().enumerate() {
        if a.key == cmp.key {
            return Err(BadInput(format!(
                "--across {}: that is the setting the sweep compares (A/B); sweep across another",
                a.key
            ))
            .into());
        }
        if axes[..i].iter().any(|b| b.key == a.key) {
            return Err(BadInput(format!("--across {}: named twice", a.key)).into());
        }
    }
    // Model against kernel on one axis: on like-for-like conditions, as
    // `validate` and `compare` make them (here from this machine; on a
    // target from its own features and release, once it answers).
    let both = sweep::model_and_kernel(&axes);
    let mut like = if both && remote.is_none() {
        crate::output::validate::like_for_like(&mut settings, &crate::sys::probe_features())
    } else {
        Vec::new()
    };
    let grid = sweep::points(&axes);
    if grid.len() > MAX_POINTS {
        return Err(BadInput(format!(
            "sweep: {} points; at most {MAX_POINTS} (each runs A and B every round)",
            grid.len()
        ))
        .into());
    }
    let published = preset.as_ref().and_then(|p| published_for(p, &cmp));
    let metric = match metric {
        Some(m) => sweep::metric_named(m).map_err(bad_input)?,
        None => published
            .as_ref()
            .and_then(|p| crate::metrics::table::metric(&p.metric))
            .unwrap_or(&crate::metrics::table::RUN_DELAY),
    };
    // Every point, A and B, checked on this machine before anything runs.
    for at in &grid {
        let s: Settings = sweep::at_point(&settings, at).map_err(bad_input)?;
        check_variants(&s, &cmp, cpus, remote.is_none()).map_err(|e| {
            let at: Vec<String> = at.iter().map(|(k, v)| format!("{k}={v}")).collect();
            BadInput(format!(
                "at {}: {}",
                at.join(" "),
                crate::invocation::error_message(&e)
            ))
        })?;
    }
    let out = match out {
        Some(p) => {
            let inputs: Vec<_> = preset_input(args).into_iter().collect();
            Some(check_output(
                "--out",
                p,
                &inputs,
                Some(&opts.engine.data_dir),
            )?)
        }
        None => None,
    };
    crate::sys::install_stop_handlers();
    if remote.is_none() {
        prepare_dataset(&opts.engine.data_dir, &settings)?;
    }
    let tty = std::io::stderr().is_terminal();
    let eta = sweep::estimate(grid.len(), cmp.values.len(), &opts);
    say(&format!(
        "readpath sweep: {} points x {} values x {} rounds, about {:.0} s",
        grid.len(),
        cmp.values.len(),
        opts.rounds,
        eta.as_secs_f64()
    ));
    let total = opts.rounds as usize * grid.len() * cmp.values.len();
    let started = std::time::Instant::now();
    let mut progress = |round: u32, p: usize, i: usize| {
        if tty {
            let at: Vec<String> = grid[p].iter().map(|(k, v)| format!("{k}={v}")).collect();
            let run = (round as usize * grid.len() + p) * cmp.values.len() + i + 1;
            say_raw(&format!(
                "\r\x1b[Ksweep: round {}/{}, {}, {} = {} (run {run} of {total}; {})",
                round + 1,
                opts.rounds,
                at.join(" "),
                cmp.key,
                cmp.values[i],
                crate::output::format::eta_text(started.elapsed(), run - 1, total, Some(eta)),
            ));
        }
    };
    let plan = SweepPlan {
        base: &settings,
        compare: &cmp,
        across: &axes,
        metric,
        preset: preset.map(|p| p.name),
        published,
    };
    let mut report = match remote {
        // One target, one session (a lab guest: one boot) for every point.
        Some((r, ra)) => {
            let label = r.label();
            let mut spec = super::target::remote_spec(
                &SettingsArgs {
                    preset: None,
                    set: Vec::new(),
                },
                "sweep",
                opts.engine.interval,
                &ra,
            )?;
            let (_, runs) = sweep::grid_runs(&plan).map_err(|e| BadInput(e.to_string()))?;
            spec.settings = Some(runs[0][0].clone());
            let mut w = super::target::start_remote(r, spec)?;
            let mut settings = settings.clone();
            if both {
                let features = crate::engine::workload::Workload::features(&w).clone();
                let release = crate::engine::workload::Workload::machine(&w).kernel;
                like =
                    crate::output::validate::like_for_like_with(&mut settings, &features, &release);
            }
            let plan = SweepPlan {
                base: &settings,
                ..plan
            };
            if tty && !like.is_empty() {
                say(&format!(
                    "readpath: sweep: made like for like on {label}: {}",
                    like.join("; ")
                ));
            }
            let r = sweep::run_with(&mut w, &plan, &opts, &mut progress);
            let summary = w.finish().summary;
            say(&format!("readpath: {label}: done"));
            let report = r.map_err(engine_error)?;
            if let Err(e) = summary {
                say(&format!("readpath: {label}: connection: {e}"));
            }
            report
        }
        None => {
            let mut ds_progress = progress_reporter();
            sweep::run(&plan, &opts, &mut progress, &mut ds_progress).map_err(engine_error)?
        }
    };
    if tty {
        say_raw("\r\x1b[K");
    }
    // What was made like for like is said with the sweep's notices.
    let mut made: Vec<String> = like
        .iter()
        .map(|l| format!("made like for like (model against kernel): {l}"))
        .collect();
    made.append(&mut report.ran.notices);
    report.ran.notices = made;
    if let Some(o) = out {
        let json = serde_json::to_string_pretty(&report)?;
        o.write_all(json.as_bytes()).map_err(output_error)?;
        say(&format!("readpath sweep: wrote {}", o.path().display()));
    }
    emit(format, &report, || report.to_text())
}
