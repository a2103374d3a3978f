//! `readpath run`: a workload run headless for a while, here or on
//! `--remote`'s target, its intervals written to a recording and an
//! interval log as they come, then a summary printed as text or JSON.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use crate::cli::{Format, RemoteArgs, SettingsArgs};
use crate::engine::{Engine, EngineOptions};
use crate::invocation::{load_settings, say, stop_and_drain};
use crate::output::report::RunSummary;

use super::outputs::{
    TraceSink, check_output, emit, open_output, output_error, preset_input, recording_error,
};
use super::prepare::{prepare_dataset, progress_reporter};
use super::target::{remote_spec, start_remote};
use super::{RemoteChoice, RemoteLost, engine_error};

/// What a headless run measures for how long, and where it writes.
pub(super) struct RunPlan<'a> {
    pub(super) duration: Duration,
    pub(super) interval: Duration,
    pub(super) format: Format,
    pub(super) interval_log: Option<&'a Path>,
    pub(super) record: Option<&'a Path>,
    /// `--trace` and `--trace-max`.
    pub(super) trace: (Option<&'a Path>, u64),
    /// `--timeline`: the spans kept in the recording.
    pub(super) timeline: bool,
    /// Benchmark switch (`--no-latency`): no timestamps, no latencies.
    pub(super) no_latency: bool,
}

/// Where a headless run writes its intervals: the recording and the
/// interval log, checked and opened before anything runs (a FIFO waits for
/// its reader then), the recording's header written once the workload's
/// settings are known.
struct RunSink {
    /// The recording's output, until its header is written.
    pending: Option<crate::files::OutputFile>,
    recording: Option<crate::output::recording::Writer>,
    log: Option<crate::files::OutputFile>,
    trace: Option<TraceSink>,
    /// Intervals written.
    received: usize,
}

/// The run's outputs, checked.
struct RunOutputs {
    record: Option<crate::files::OutputPath>,
    log: Option<crate::files::OutputPath>,
    trace: Option<crate::files::OutputPath>,
    trace_max: u64,
}

impl RunSink {
    /// Checks `--record`, `--interval-log` and `--trace` (not an input,
    /// not a dataset file under `data_dir`, not each other).
    fn check(args: &SettingsArgs, plan: &RunPlan, data_dir: Option<&Path>) -> Result<RunOutputs> {
        let inputs: Vec<PathBuf> = preset_input(args).into_iter().collect();
        let check = |flag: &str, p: Option<&Path>| {
            p.map(|p| check_output(flag, p, &inputs, data_dir))
                .transpose()
        };
        let outs = RunOutputs {
            log: check("--interval-log", plan.interval_log)?,
            record: check("--record", plan.record)?,
            trace: check("--trace", plan.trace.0)?,
            trace_max: plan.trace.1,
        };
        let all: Vec<_> = [&outs.record, &outs.log, &outs.trace]
            .into_iter()
            .flatten()
            .collect();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                a.check_distinct(b).map_err(output_error)?;
            }
        }
        Ok(outs)
    }

    /// Opens the outputs, before the workload starts; the stop handlers
    /// are installed (a FIFO's wait for its reader ends on a stop signal).
    fn open(outs: &RunOutputs) -> Result<RunSink> {
        let pending = open_output(outs.record.as_ref())?;
        let log = open_output(outs.log.as_ref())?;
        let trace = TraceSink::open(outs.trace.as_ref(), outs.trace_max)?;
        Ok(RunSink {
            pending,
            recording: None,
            log,
            trace,
            received: 0,
        })
    }

    /// Writes the recording's header, once the workload runs.
    fn begin(&mut self, header: &crate::output::recording::Header) -> Result<()> {
        if let Some(t) = self.trace.as_mut() {
            t.begin_run(&format!(
                "readpath: {}",
                header.preset.as_deref().unwrap_or("run")
            ))?;
        }
        if let Some(out) = self.pending.take() {
            self.recording = Some(
                crate::output::recording::Writer::start(out, header).map_err(recording_error)?,
            );
        }
        Ok(())
    }

    fn write(&mut self, rec: &crate::metrics::IntervalRecord) -> Result<()> {
        self.received += 1;
        if let Some(w) = self.recording.as_mut() {
            w.record(rec).map_err(recording_error)?;
        }
        if let Some(t) = self.trace.as_mut() {
            t.write(rec)?;
        }
        if let Some(l) = self.log.as_mut() {
            // Streamed (a FIFO, a pipe, `tail -f` on a terminal): each
            // interval is flushed as it comes.
            let stream = l.is_stream();
            let r = serde_json::to_writer(&mut *l, rec)
                .map_err(std::io::Error::from)
                .and_then(|()| l.write_all(b"\n"))
                .and_then(|()| if stream { l.flush() } else { Ok(()) });
            r.map_err(|e| output_error(l.error(e)))?;
        }
        Ok(())
    }

    /// Takes the workload's records for `duration` (less on a stop signal
    /// or a lost connection).
    fn collect(
        &mut self,
        w: &dyn crate::engine::workload::Workload,
        duration: Duration,
    ) -> Result<std::time::Instant> {
        let started = std::time::Instant::now();
        while started.elapsed() < duration && !crate::sys::stop_requested() && w.lost().is_none() {
            let left = duration.saturating_sub(started.elapsed());
            if let Ok(rec) = w
                .records()
                .recv_timeout(left.min(Duration::from_millis(100)))
            {
                self.write(&rec)?;
            }
        }
        Ok(started)
    }

    /// Writes the records left and closes both files; the recording's path.
    fn finish(mut self, rest: &[crate::metrics::IntervalRecord]) -> Result<Option<PathBuf>> {
        for rec in rest {
            self.write(rec)?;
        }
        if let Some(l) = self.log {
            l.finish().map_err(output_error)?;
        }
        if let Some(t) = self.trace {
            t.finish()?;
        }
        match self.recording {
            Some(w) => {
                let path = w.finish().map_err(recording_error)?;
                say(&format!("readpath: recorded {}", path.display()));
                Ok(Some(path))
            }
            None => Ok(None),
        }
    }
}

/// `readpath run`: on `--remote`'s target when given, else here.
pub(super) fn run(
    data_dir: &Path,
    args: &SettingsArgs,
    plan: RunPlan,
    remote: RemoteChoice,
) -> Result<()> {
    crate::metrics::set_recording(!plan.no_latency);
    if let Some((r, ra)) = remote {
        return run_remote(args, plan, r, &ra);
    }
    let (settings, preset) = load_settings(args.preset.as_deref(), &args.set)?;
    let outs = RunSink::check(args, &plan, Some(data_dir))?;
    // Before the engine starts: a stop signal while it prepares (writing
    // the kernel target's file, with knobs turned) ends the run cleanly.
    crate::sys::install_stop_handlers();
    // The outputs are opened before the workload starts, then the dataset
    // made (both end on a stop signal).
    let mut sink = RunSink::open(&outs)?;
    if plan.timeline {
        // The workload's spans go to the recording.
        crate::metrics::set_tracing(true);
    }
    prepare_dataset(data_dir, &settings)?;
    let mut progress = progress_reporter();
    let engine = Engine::start(
        settings.clone(),
        EngineOptions::new(plan.interval, data_dir.to_path_buf()),
        &mut progress,
    )
    .map_err(engine_error)?;
    let header = crate::output::recording::Header::of(
        "run",
        &engine,
        preset.as_ref().map(|p| p.name.clone()),
    );
    sink.begin(&header)?;
    // Read while the kernel target's device is still there.
    let device_irqs = engine.device_irqs();
    sink.collect(&engine, plan.duration)?;
    let effective = engine.effective();
    let features = engine.features().clone();
    let dataset_dir = engine.dataset().dir().to_path_buf();
    // Stop first, then drain the records still queued (the final one included).
    let (totals, rest) = stop_and_drain(engine);
    sink.finish(&rest)?;
    let machine = crate::sys::machine_info(&dataset_dir);
    let mut summary = RunSummary::new(&settings, &effective, &totals, machine, features);
    summary.device_irqs = Some(device_irqs);
    emit(plan.format, &summary, || summary.to_text())
}

/// `run --remote`: the same run on a target; the summary is the target's,
/// the interval log and the recording are written here. A lost connection
/// ends the run with what arrived (written out) and exit status 1.
fn run_remote(
    args: &SettingsArgs,
    plan: RunPlan,
    r: crate::remote::transport::Remote,
    ra: &RemoteArgs,
) -> Result<()> {
    let outs = RunSink::check(args, &plan, None)?;
    let spec = remote_spec(args, "run", plan.interval, ra)?;
    crate::sys::install_stop_handlers();
    let mut sink = RunSink::open(&outs)?;
    let mut w = start_remote(r, spec)?;
    if sink.trace.is_some() || plan.timeline {
        // The target's threads record their spans from now on.
        crate::engine::workload::Workload::trace(&mut w, true)
            .map_err(|why| anyhow::anyhow!("{}: the trace: {why}", w.place_name()))?;
    }
    sink.begin(&w.header)?;
    let started = sink.collect(&w, plan.duration)?;
    let place = w.place_name();
    let finished = w.finish();
    if let Some(note) = finished.refused_note() {
        say(&format!("readpath: {place}: {note}"));
    }
    let crate::remote::client::Finished {
        summary,
        rest,
        max_lag_s: max_lag,
        missing,
        ..
    } = finished;
    if max_lag >= 1.0 {
        say(&format!(
            "readpath: {place}: records arrived up to {max_lag:.1} s late (a slow link); they queue on the target and none is dropped"
        ));
    }
    if missing > 0 {
        say(&format!(
            "readpath: {place}: {missing} interval records never arrived"
        ));
    }
    let received = sink.received + rest.len();
    let recorded = sink.finish(&rest)?;
    match summary {
        Ok(s) => emit(plan.format, &s, || s.to_text()),
        Err(why) => Err(RemoteLost(format!(
            "{why} (after {:.1} s, {received} intervals received{})",
            started.elapsed().as_secs_f64(),
            match recorded {
                Some(p) => format!(", recorded in {}", p.display()),
                None => String::new(),
            }
        ))
        .into()),
    }
}
