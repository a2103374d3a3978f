//! The live explorer (`readpath`, `readpath tui`): a workload started here
//! or on a target, shown by [`crate::tui`] until the user quits, then the
//! recording finished and the run's summary printed. `demo` plays its
//! scripts through the same two functions.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::cli::{SettingsArgs, TuiArgs};
use crate::engine::{Engine, EngineOptions};
use crate::invocation::{BadInput, load_settings, say, stop_and_drain};
use crate::output::report::RunSummary;
use crate::scenario::preset::{self, Preset};
use crate::settings::Settings;

use super::outputs::{
    TraceSink, check_output, open_output, output_error, preset_input, print_text, recording_error,
    start_recording,
};
use super::prepare::{prepare_dataset, progress_reporter};
use super::target::{remote_spec, start_remote};
use super::{RemoteChoice, RemoteLost, engine_error};

/// `readpath tui` (and `readpath` alone): the explorer, on this machine or
/// on `--remote`'s target.
pub(super) fn tui(
    data_dir: &Path,
    args: &SettingsArgs,
    t: &TuiArgs,
    remote: RemoteChoice,
) -> Result<()> {
    if let Some((r, ra)) = remote {
        let spec = remote_spec(args, "tui", t.interval, &ra)?;
        return explore_remote(t, r, spec, None);
    }
    let (settings, preset) = load_settings(args.preset.as_deref(), &args.set)?;
    let inputs: Vec<PathBuf> = preset_input(args).into_iter().collect();
    explore(data_dir, settings, preset, t, None, &inputs)
}

/// What opens the trace the explorer's `T` starts: a new file in the
/// current directory named by the time
/// (`readpath-2026-12-08T01-15-59Z.pftrace`; a name already taken gets a
/// number, never replaced), made as every output is (a temporary file
/// renamed into place when finished), capped at `cap` bytes, its run named
/// by the label.
fn trace_here(cap: u64) -> crate::tui::NewTrace {
    Box::new(move |label: &str| {
        let stamp = crate::output::format::utc_now_rfc3339().replace(':', "-");
        let mut path = PathBuf::from(format!("readpath-{stamp}.pftrace"));
        let mut n = 1;
        while std::fs::symlink_metadata(&path).is_ok() {
            n += 1;
            if n > 99 {
                return Err("every name for it here is taken".into());
            }
            path = PathBuf::from(format!("readpath-{stamp}-{n}.pftrace"));
        }
        let out =
            crate::files::OutputPath::check("T (trace)", &path, &[]).map_err(|e| e.to_string())?;
        let f = out.create().map_err(|e| e.to_string())?;
        let mut w = crate::output::perfetto::TraceWriter::new(f, cap);
        w.begin_run(label).map_err(|e| e.to_string())?;
        Ok((path, w))
    })
}

/// After the explorer: the recording finished with the records left
/// (however the explorer ended, the terminal going away included), said
/// where it went; false when the terminal is gone and nothing more can be
/// shown.
fn end_explorer(
    out: crate::tui::Outputs,
    rest: &[crate::metrics::IntervalRecord],
    ending: crate::tui::Ending,
) -> Result<bool> {
    let gone = ending == crate::tui::Ending::TerminalGone;
    if let Some(mut w) = out.recording {
        for r in rest {
            w.record(r).map_err(recording_error)?;
        }
        let path = w.finish().map_err(recording_error)?;
        if !gone {
            say(&format!("readpath: recorded {}", path.display()));
        }
    }
    if let Some(mut t) = out.trace {
        for r in rest {
            t.interval(r)?;
        }
        TraceSink::of(t).finish()?;
    }
    Ok(!gone)
}

/// Checks `--record` and `--trace` (not an input, not a dataset's file,
/// not each other) and opens them, before the workload starts.
fn open_outputs(
    t: &TuiArgs,
    inputs: &[PathBuf],
    data_dir: Option<&Path>,
) -> Result<(Option<crate::files::OutputFile>, Option<TraceSink>)> {
    let check = |flag: &str, p: &Option<PathBuf>| {
        p.as_ref()
            .map(|p| check_output(flag, p, inputs, data_dir))
            .transpose()
    };
    let record = check("--record", &t.record)?;
    let trace = check("--trace", &t.trace.trace)?;
    if let (Some(a), Some(b)) = (&record, &trace) {
        a.check_distinct(b).map_err(output_error)?;
    }
    crate::sys::install_stop_handlers();
    // Opened before the workload starts (a FIFO waits for its reader here).
    let record = open_output(record.as_ref())?;
    let trace = TraceSink::open(trace.as_ref(), t.trace.trace_max)?;
    Ok((record, trace))
}

/// The explorer on a workload running on another machine.
pub(super) fn explore_remote(
    t: &TuiArgs,
    r: crate::remote::transport::Remote,
    spec: crate::remote::client::StartSpec,
    demo: Option<crate::scenario::demo::Demo>,
) -> Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(BadInput(
            "the explorer needs a terminal (stdin and stdout are not both one); \
             for a headless run use `readpath run --remote ...`"
                .into(),
        )
        .into());
    }
    let (record, trace) = open_outputs(t, &[], None)?;
    let mut w = start_remote(r, spec)?;
    if let Some(d) = &demo {
        w.header.demo = Some(crate::output::recording::DemoHeader::of(d));
    }
    let preset = w.header.preset.clone().map(|name| {
        let description = preset::resolve(&name)
            .map(|p| p.0.description)
            .unwrap_or_default();
        (name, description)
    });
    let opts = crate::tui::TuiOptions {
        fps: t.fps,
        ascii: t.ascii,
        theme: t.theme,
        duration: t.duration,
        preset,
        present: t.present,
        mouse: !t.no_mouse,
    };
    let writer = match record {
        Some(out) => {
            Some(crate::output::recording::Writer::start(out, &w.header).map_err(recording_error)?)
        }
        None => None,
    };
    let out = crate::tui::Outputs {
        recording: writer,
        trace: trace.map(TraceSink::into_writer),
        timeline: t.trace.timeline,
        new_trace: Some(trace_here(t.trace.trace_max)),
        keyed: None,
    };
    let shown = crate::tui::run(&mut w, &opts, out, demo);
    let crate::remote::client::Finished { summary, rest, .. } = w.finish();
    let (writer, ending) = shown.context("drawing the explorer")?;
    if !end_explorer(writer, &rest, ending)? {
        return Ok(());
    }
    match summary {
        Ok(s) => {
            if !t.no_summary {
                print_text(&s.to_text())?;
            }
            Ok(())
        }
        Err(why) => Err(RemoteLost(why.to_string()).into()),
    }
}

/// The explorer on a live engine, optionally playing a demo.
pub(super) fn explore(
    data_dir: &Path,
    settings: Settings,
    preset: Option<Preset>,
    t: &TuiArgs,
    demo: Option<crate::scenario::demo::Demo>,
    inputs: &[PathBuf],
) -> Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(BadInput(
            "the explorer needs a terminal (stdin and stdout are not both one); \
             for a headless run use `readpath run` (e.g. `readpath run --duration 10s --format json`)"
                .into(),
        )
        .into());
    }
    let (record, trace) = open_outputs(t, inputs, Some(data_dir))?;
    prepare_dataset(data_dir, &settings)?;
    let mut progress = progress_reporter();
    let mut engine = Engine::start(
        settings.clone(),
        EngineOptions::new(t.interval, data_dir.to_path_buf()),
        &mut progress,
    )
    .map_err(engine_error)?;
    let opts = crate::tui::TuiOptions {
        fps: t.fps,
        ascii: t.ascii,
        theme: t.theme,
        duration: t.duration,
        preset: preset
            .as_ref()
            .map(|p| (p.name.clone(), p.description.clone())),
        present: t.present,
        mouse: !t.no_mouse,
    };
    let writer = match record {
        Some(out) => Some(start_recording(
            out,
            if demo.is_some() { "demo" } else { "tui" },
            &engine,
            preset.as_ref(),
            demo.as_ref(),
        )?),
        None => None,
    };
    let mut trace = trace.map(TraceSink::into_writer);
    if let Some(t) = trace.as_mut() {
        t.begin_run(&format!(
            "readpath: {}",
            preset.as_ref().map_or("explorer", |p| p.name.as_str())
        ))?;
    }
    let out = crate::tui::Outputs {
        recording: writer,
        trace,
        timeline: t.trace.timeline,
        new_trace: Some(trace_here(t.trace.trace_max)),
        keyed: None,
    };
    let shown = crate::tui::run(&mut engine, &opts, out, demo);
    let effective = engine.effective();
    let requested = engine.settings().clone();
    let features = engine.features().clone();
    let dataset_dir = engine.dataset().dir().to_path_buf();
    let (totals, rest) = stop_and_drain(engine);
    let (writer, ending) = shown.context("drawing the explorer")?;
    if !end_explorer(writer, &rest, ending)? {
        return Ok(()); // nothing can be shown: a normal way to end
    }
    if !t.no_summary {
        let machine = crate::sys::machine_info(&dataset_dir);
        let summary = RunSummary::new(&requested, &effective, &totals, machine, features);
        print_text(&summary.to_text())?;
    }
    Ok(())
}
