//! Where a command writes: every output path checked before anything runs
//! (not an input, not a dataset's file, something readpath may write) and
//! opened before the workload starts, reports printed as text or JSON that
//! cannot drive a terminal, recordings started, and progress said on
//! stderr.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cli::{Format, SettingsArgs};
use crate::engine::Engine;
use crate::invocation::BadInput;
use crate::scenario::preset::{self, Preset};

/// Writes to stderr with no newline (a progress line rewritten in place);
/// a closed stderr is not an error.
pub(super) fn say_raw(msg: &str) {
    let _ = write!(std::io::stderr(), "{msg}");
}

/// The line an experiment rewrites in place on a terminal as its runs go
/// by (nothing where stderr is no terminal): `{command}: round R/N, ` and
/// what `run` says of variant `i`.
pub(super) fn round_progress(
    command: &'static str,
    rounds: u32,
    run: impl Fn(u32, usize) -> String,
) -> impl FnMut(u32, usize) {
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    move |round, i| {
        if tty {
            say_raw(&format!(
                "\r{command}: round {}/{rounds}, {}   ",
                round + 1,
                run(round, i)
            ));
        }
    }
}

/// The file a `--preset` reads, when it is a file (a path, or a saved user
/// preset): an input no output may replace.
pub(super) fn preset_input(args: &SettingsArgs) -> Option<PathBuf> {
    let spec = args.preset.as_deref()?;
    if spec.contains('/') || spec.ends_with(".toml") {
        return Some(PathBuf::from(spec));
    }
    preset::user_path(spec).ok().filter(|p| p.is_file())
}

/// Checks an output path before anything runs: not one of `inputs`, not a
/// file of a dataset under `data_dir`, and something readpath may write
/// (see [`crate::files`]). Refusals are bad input (exit status 2).
pub(super) fn check_output(
    flag: &str,
    path: &Path,
    inputs: &[PathBuf],
    data_dir: Option<&Path>,
) -> Result<crate::files::OutputPath> {
    let ins: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let out = crate::files::OutputPath::check(flag, path, &ins).map_err(output_error)?;
    if let Some(dd) = data_dir
        && let (Ok(dd), Some(dir)) = (
            std::fs::canonicalize(dd),
            path.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .or(Some(Path::new(".")))
                .and_then(|d| std::fs::canonicalize(d).ok()),
        )
        && dir.parent() == Some(dd.as_path())
        && dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("dataset-"))
    {
        return Err(BadInput(format!(
            "{flag} {}: is inside the dataset {}, which the run reads; choose another directory",
            path.display(),
            dir.display()
        ))
        .into());
    }
    Ok(out)
}

pub(super) fn output_error(e: crate::files::OutputError) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        e.into()
    }
}

/// Opens a checked output (before the workload starts): a FIFO no process
/// reads yet is waited for, said on stderr, until a reader comes or a stop
/// signal ends the wait ([`Interrupted`]).
pub(super) fn open_output(
    out: Option<&crate::files::OutputPath>,
) -> Result<Option<crate::files::OutputFile>> {
    out.map(|o| o.create().map_err(output_error)).transpose()
}

/// Prints text for people on stdout, control characters replaced (text
/// from files and targets cannot drive the terminal), through the writer a
/// stop signal can end.
pub(super) fn print_text(text: &str) -> Result<()> {
    let mut out = crate::files::stdout();
    out.write_all(crate::output::format::printable(text, true).as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Prints a report on stdout as text or as one JSON object, neither able
/// to drive a terminal (control characters replaced in text, escaped in
/// JSON).
pub(super) fn emit<T: serde::Serialize>(
    format: Format,
    value: &T,
    text: impl FnOnce() -> String,
) -> Result<()> {
    match format {
        Format::Text => print_text(&text()),
        Format::Json => {
            let json = serde_json::to_string_pretty(value)?;
            let mut out = crate::files::stdout();
            out.write_all(crate::output::format::json_controls_escaped(&json).as_bytes())?;
            out.write_all(b"\n")?;
            out.flush()?;
            Ok(())
        }
    }
}

pub(super) fn recording_error(e: crate::output::recording::RecordingError) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        e.into()
    }
}

/// Starts a recording for a running engine (its header written) in the
/// output the caller checked and opened before starting the engine.
pub(super) fn start_recording(
    out: crate::files::OutputFile,
    command: &str,
    engine: &Engine,
    preset: Option<&Preset>,
    demo: Option<&crate::scenario::demo::Demo>,
) -> Result<crate::output::recording::Writer> {
    let mut header =
        crate::output::recording::Header::of(command, engine, preset.map(|p| p.name.clone()));
    header.demo = demo.map(crate::output::recording::DemoHeader::of);
    crate::output::recording::Writer::start(out, &header).map_err(recording_error)
}

/// A Perfetto trace being written by a command (`--trace`), the
/// intervals' spans written as they come. Opening one turns span
/// recording on for the process.
pub(super) struct TraceSink {
    w: crate::output::perfetto::TraceWriter<crate::files::OutputFile>,
}

impl TraceSink {
    /// Opens the checked trace output (before the workload starts) and
    /// turns tracing on.
    pub(super) fn open(
        out: Option<&crate::files::OutputPath>,
        cap: u64,
    ) -> Result<Option<TraceSink>> {
        let Some(f) = open_output(out)? else {
            return Ok(None);
        };
        crate::metrics::set_tracing(true);
        Ok(Some(TraceSink {
            w: crate::output::perfetto::TraceWriter::new(f, cap),
        }))
    }

    /// The writer, for an experiment to write into.
    pub(super) fn into_writer(self) -> crate::output::experiment::TraceFile {
        self.w
    }

    /// The trace an experiment wrote into.
    pub(super) fn of(w: crate::output::experiment::TraceFile) -> TraceSink {
        TraceSink { w }
    }

    /// The intervals that follow are `variant`'s (a process in the trace).
    pub(super) fn begin_run(&mut self, variant: &str) -> Result<()> {
        self.w.begin_run(variant).map_err(|e| self.error(e))
    }

    /// Writes one interval.
    pub(super) fn write(&mut self, rec: &crate::metrics::IntervalRecord) -> Result<()> {
        self.w.interval(rec).map_err(|e| self.error(e))
    }

    fn error(&self, e: std::io::Error) -> anyhow::Error {
        output_error(self.w.out().error(e))
    }

    /// Closes the trace and says what it holds, and what it dropped.
    pub(super) fn finish(self) -> Result<()> {
        crate::metrics::set_tracing(false);
        let (f, stats) = self.w.finish().map_err(anyhow::Error::from)?;
        let path = f.finish().map_err(output_error)?;
        crate::invocation::say(&format!(
            "readpath: trace {}: {} work items, {} other spans, {} ({} bytes an item); open it in ui.perfetto.dev",
            crate::sys::printable(&path.display().to_string(), false),
            stats.items,
            stats.spans,
            crate::metrics::format::human_bytes(stats.bytes),
            stats.bytes / stats.items.max(1),
        ));
        if let Some(note) = stats.dropped_note() {
            crate::invocation::say(&format!("readpath: {note}"));
        }
        Ok(())
    }
}
