//! Every command readpath runs, one file each: the explorer (`tui`, the
//! default), `run`, `compare`, `demo`, `replay`, `plot`, `bench`,
//! `presets`, `prepare`, `kernel`, `digest` and `agent`. Each checks its
//! input and outputs before anything runs, then calls into the engine,
//! `output`, `scenario`, `kernel` or `tui`; what several share (outputs
//! checked and opened, a workload started on a target, the dataset made)
//! is in `outputs.rs`, `target.rs` and `prepare.rs`. `main` parses a
//! [`crate::cli::Cli`], calls [`main_with_args`] and turns the outcome into
//! an exit status: 0 success, 2 bad input ([`BadInput`]), 1 anything else
//! (a stop signal that ended a command before its work was done included:
//! [`Interrupted`]).
//!
//! Every command that may wait (for a FIFO's reader, for input, for the
//! dataset, for the workload) installs the stop handlers first, and every
//! output is opened before the workload starts, so SIGINT, SIGTERM, SIGHUP
//! and SIGQUIT end readpath promptly whatever it is doing.
//!
//! The dispatch is here rather than in `cli` because the commands read the
//! argument types: `cli` stays below `commands`, with no circle between
//! them.

use std::path::Path;

use anyhow::Result;

use crate::cli::{Cli, Command, RemoteArgs};
use crate::dataset::default_data_dir;
use crate::engine::{EngineError, EngineOptions};
use crate::invocation::{BadInput, error_message};

mod agent;
mod bench;
mod compare;
mod demo;
mod digest;
mod explore;
mod kernel;
mod lab;
mod outputs;
mod plot;
mod prepare;
mod presets;
mod replay;
mod run;
mod sweep;
mod target;
mod validate;

pub use kernel::Mismatch;

/// A remote workload's connection was lost before its end: what arrived
/// was kept (printed, recorded); exit status 1.
#[derive(Debug, thiserror::Error)]
#[error("the connection to the target was lost: {0}")]
pub struct RemoteLost(pub String);

/// A stop signal ended the command before its work was done (waiting for
/// a FIFO's reader or for input, preparing the dataset): exit status 1,
/// neither success nor the input's fault.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Interrupted(pub String);

/// An engine's refusal: bad input when the settings or the machine's
/// limits are the cause, any other failure as itself.
fn engine_error(e: EngineError) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        e.into()
    }
}

/// The options of an interleaved experiment from its flags.
fn experiment_options(
    e: &crate::cli::ExperimentArgs,
    data_dir: &Path,
) -> crate::output::experiment::CompareOptions {
    crate::output::experiment::CompareOptions {
        rounds: e.rounds,
        duration: e.duration,
        warmup: e.warmup,
        engine: EngineOptions::new(e.interval, data_dir.to_path_buf()),
        stop: crate::sys::stop_requested,
    }
}

/// A target and how to reach it (`--remote` and its options).
type RemoteChoice = Option<(crate::remote::transport::Remote, RemoteArgs)>;

/// Runs the command line; errors of the user's input are [`BadInput`].
/// An error after a stop signal is [`Interrupted`] (exit status 1): a
/// read the signal cut short is not a bad input.
pub fn main_with_args(cli: Cli) -> Result<()> {
    let r = dispatch(cli);
    match r {
        Err(e) if crate::sys::stop_requested() && e.downcast_ref::<BadInput>().is_some() => {
            Err(Interrupted(error_message(&e)).into())
        }
        r => r,
    }
}

/// The command chosen, checked (the explorer's options where they would
/// be ignored, `--remote` where it does not apply), then run.
fn dispatch(cli: Cli) -> Result<()> {
    let data_dir = cli.data_dir.clone().unwrap_or_else(default_data_dir);
    crate::lab::set_data_dir(&data_dir);
    check_placement(&cli)?;
    let remote = remote_choice(&cli)?;
    // From here a stop signal sets a flag every wait of readpath polls (a
    // FIFO's reader or writer, input, the dataset, the workload), so it
    // ends the command cleanly: outputs finished or removed, the terminal
    // and the kernel's knobs restored. Not for `agent`, which installs its
    // own, nor `bench`, whose measurements do not poll: the signal's
    // default action ends it.
    if !matches!(
        cli.command,
        Some(Command::Agent) | Some(Command::Bench { .. })
    ) {
        crate::sys::install_stop_handlers();
    }
    match cli.command {
        None => explore::tui(&data_dir, &cli.settings, &cli.tui, remote),
        Some(command) => run_command(command, &data_dir, remote, &cli.remote),
    }
}

/// The explorer's options before a command would be silently ignored:
/// refused (bad input), naming the command they belong after.
fn check_placement(cli: &Cli) -> Result<()> {
    let t = &cli.tui;
    let top_level_used = cli.settings.preset.is_some()
        || !cli.settings.set.is_empty()
        || t.ascii
        || t.no_summary
        || t.duration.is_some()
        || t.record.is_some()
        || t.present
        || t.no_mouse
        || t.fps != crate::tui::DEFAULT_FPS;
    if let (Some(cmd), true) = (&cli.command, top_level_used) {
        let name = format!("{cmd:?}")
            .split([' ', '{'])
            .next()
            .unwrap_or("")
            .to_lowercase();
        return Err(BadInput(format!(
            "options such as --preset, --set and --fps go after the command: `readpath {name} --preset ...`"
        ))
        .into());
    }
    Ok(())
}

/// `--remote`, parsed, for the commands it applies to (refused for the
/// others), with the options that say how to reach the target.
fn remote_choice(cli: &Cli) -> Result<RemoteChoice> {
    let Some(spec) = &cli.remote.remote else {
        return Ok(None);
    };
    let ok = matches!(
        cli.command,
        None | Some(Command::Tui { .. })
            | Some(Command::Run { .. })
            | Some(Command::Demo {
                script: Some(_),
                ..
            })
            | Some(Command::Bench { .. })
            | Some(Command::Compare { hosts: None, .. })
            | Some(Command::Sweep { .. })
            | Some(Command::Validate { .. })
    );
    if !ok {
        return Err(BadInput(
            "--remote works with the explorer (readpath, tui), `run`, `demo NAME`, \
             `compare` (or `compare --hosts local,ssh:HOST`, not both), `sweep`, `validate` and `bench crypto`"
                .into(),
        )
        .into());
    }
    // A vm: target's data dir and kernel are checked here too (bad input).
    let r = crate::remote::transport::Remote::parse(spec).map_err(crate::invocation::bad_input)?;
    Ok(Some((r, cli.remote.clone())))
}

/// One function per command.
fn run_command(
    command: Command,
    data_dir: &Path,
    remote: RemoteChoice,
    remote_args: &RemoteArgs,
) -> Result<()> {
    match command {
        Command::Tui { settings, tui } => explore::tui(data_dir, &settings, &tui, remote),
        Command::Agent => agent::agent(data_dir),
        Command::Demo {
            script,
            settings,
            tui,
        } => demo::demo(data_dir, script.as_deref(), &settings, &tui, remote),
        Command::Run {
            settings,
            duration,
            interval,
            format,
            interval_log,
            record,
            trace,
            no_latency,
        } => run::run(
            data_dir,
            &settings,
            run::RunPlan {
                duration,
                interval,
                format,
                interval_log: interval_log.as_deref(),
                record: record.as_deref(),
                trace: (trace.trace.as_deref(), trace.trace_max),
                timeline: trace.timeline,
                no_latency,
            },
            remote,
        ),
        Command::Compare {
            settings,
            vary,
            experiment,
            format,
            record,
            trace,
            hosts,
        } => compare::compare(
            &settings,
            vary.as_deref(),
            (record.as_deref(), &trace),
            // `compare --remote X` is `compare --hosts X`.
            hosts
                .as_deref()
                .or(remote_args.remote.as_deref())
                .map(|h| (h, remote_args.clone())),
            experiment_options(&experiment, data_dir),
            format,
        ),
        Command::Sweep {
            settings,
            vary,
            across,
            metric,
            experiment,
            format,
            out,
        } => sweep::sweep(
            &settings,
            vary.as_deref(),
            &across,
            metric.as_deref(),
            experiment_options(&experiment, data_dir),
            (format, out.as_deref()),
            remote,
        ),
        Command::Validate {
            settings,
            experiment,
            tolerance,
            pair,
            format,
        } => validate::validate(
            &settings,
            experiment_options(&experiment, data_dir),
            tolerance,
            &pair,
            format,
            remote,
        ),
        Command::Presets { action } => presets::presets(action),
        Command::Lab { action } => lab::lab(data_dir, action),
        Command::Plot {
            file,
            out,
            format,
            size,
            slide,
            metric,
            no_captions,
            timeline,
            at,
            window,
        } => {
            let look = crate::output::plot::Look {
                captions: !no_captions,
                slide,
            };
            let size = size.unwrap_or(if slide { (1920, 1080) } else { (1200, 900) });
            let lanes = timeline.then(|| crate::output::lanes::Ask {
                at_ns: at
                    .iter()
                    .map(|d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
                    .collect(),
                window_ns: window.as_nanos() as u64,
            });
            plot::plot(&file, &out, (format, size), &metric, look, lanes)
        }
        Command::Replay {
            file,
            speed,
            fps,
            ascii,
            theme,
            present,
            no_mouse,
        } => replay::replay(&file, speed, fps, ascii, theme, present, !no_mouse),
        Command::Bench { what } => bench::bench(what, remote),
        Command::Prepare { size, salt, force } => prepare::prepare(data_dir, &size, &salt, force),
        Command::Kernel { action } => kernel::kernel(data_dir, action),
        Command::Digest {
            block_size,
            salt,
            files,
        } => digest::digest(block_size, &salt, &files),
    }
}
