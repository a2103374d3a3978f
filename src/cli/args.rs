//! The argument groups several commands share (the settings, the
//! explorer's display, where the workload runs, the output format) and the
//! parsers of bounded values (durations, rates, sizes), each with the range
//! its error message states.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;

use crate::settings::{DurationError, parse_duration_in};

/// Why a value of one of the command line's own bounded flags was refused
/// (a duration's error is the settings' [`DurationError`]): the value as
/// written and what is allowed. clap prints it after the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// `validate --tolerance`.
    #[error("{value:?}: allowed a percentage from 1 to 100 (e.g. 15)")]
    Tolerance {
        /// The value as written.
        value: String,
    },
    /// `validate --pair`.
    #[error(
        "{value:?}: allowed two targets, each model or kernel: model,kernel (the default), kernel,kernel (the kernel against itself) or model,model"
    )]
    TargetPair {
        /// The value as written.
        value: String,
    },
    /// `replay --speed`.
    #[error("\"{value}\" is out of range: allowed 0.1..=100 (times real time)")]
    Speed {
        /// The value as written.
        value: String,
    },
    /// `--fps`.
    #[error("\"{value}\" is out of range: allowed 0.5..=30 refreshes per second")]
    Fps {
        /// The value as written.
        value: String,
    },
    /// `--trace-max`.
    #[error("\"{value}\": allowed a size from 64K to 16G (e.g. 256M)")]
    TraceMax {
        /// The value as written.
        value: String,
    },
    /// `plot --size`.
    #[error("\"{value}\": expected WIDTHxHEIGHT in pixels, each 200..=8000 (e.g. 1200x900)")]
    SizePx {
        /// The value as written.
        value: String,
    },
}

/// `--duration` of `run` and the explorer: 1 ms to 30 days.
pub(super) fn run_duration(s: &str) -> std::result::Result<Duration, DurationError> {
    parse_duration_in(s, Duration::from_millis(1), crate::settings::MAX_DURATION)
}

/// `--interval`: one chart point, 10 ms to 1 minute.
pub(super) fn interval_duration(s: &str) -> std::result::Result<Duration, DurationError> {
    parse_duration_in(s, Duration::from_millis(10), Duration::from_secs(60))
}

/// `plot --at`: a time in the run, 0 to 30 days.
pub(super) fn at_duration(s: &str) -> std::result::Result<Duration, DurationError> {
    parse_duration_in(s, Duration::ZERO, crate::settings::MAX_DURATION)
}

/// `plot --window`: 1 ms to 10 s of the run in one picture.
pub(super) fn lanes_window(s: &str) -> std::result::Result<Duration, DurationError> {
    parse_duration_in(
        s,
        Duration::from_nanos(crate::output::lanes::MIN_WINDOW_NS),
        Duration::from_nanos(crate::output::lanes::MAX_WINDOW_NS),
    )
}

/// `compare --duration`: 100 ms to 1 day per variant per round.
pub(super) fn compare_duration(s: &str) -> std::result::Result<Duration, DurationError> {
    parse_duration_in(s, Duration::from_millis(100), Duration::from_secs(86_400))
}

/// `compare --warmup`: none to 1 hour.
pub(super) fn warmup_duration(s: &str) -> std::result::Result<Duration, DurationError> {
    parse_duration_in(s, Duration::ZERO, Duration::from_secs(3600))
}

/// `validate --tolerance`: 1 to 100 (%).
pub(super) fn tolerance_pct(s: &str) -> std::result::Result<f64, ArgError> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if (1.0..=100.0).contains(&v) => Ok(v),
        _ => Err(ArgError::Tolerance {
            value: s.to_string(),
        }),
    }
}

/// `validate --pair`: two targets, each `model` or `kernel` (`model,kernel`,
/// `kernel,kernel` for the kernel against itself, `model,model`).
pub(super) fn target_pair(s: &str) -> std::result::Result<[String; 2], ArgError> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    match parts.as_slice() {
        [a, b] if [a, b].iter().all(|t| matches!(**t, "model" | "kernel")) => {
            Ok([a.to_string(), b.to_string()])
        }
        _ => Err(ArgError::TargetPair {
            value: s.to_string(),
        }),
    }
}

/// `bench crypto --seconds`: 10 ms to 1 hour per measurement.
pub(super) fn bench_duration(s: &str) -> std::result::Result<Duration, DurationError> {
    parse_duration_in(s, Duration::from_millis(10), Duration::from_secs(3600))
}

/// Running the workload on another machine, through the user's ssh or adb.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RemoteArgs {
    /// Run the workload on another machine: ssh:[user@]host[:port] (the
    /// system's ssh, its config and keys) or adb:[serial]; the explorer and
    /// `run` show it here.
    #[arg(long, global = true, value_name = "ssh:HOST|adb:SERIAL")]
    pub remote: Option<String>,
    /// Directory of readpath's binary on the target [default:
    /// .cache/readpath-agent (ssh, under the login's home),
    /// /data/local/tmp/readpath (adb)]. On ssh a relative path or ~/PATH is
    /// under the login's home; on adb it must be absolute.
    #[arg(long, global = true, value_name = "DIR", value_parser = RemotePath)]
    pub remote_dir: Option<String>,
    /// The data dir on the target [default: its own default; adb: under
    /// --remote-dir].
    #[arg(long, global = true, value_name = "DIR", value_parser = RemotePath)]
    pub remote_data_dir: Option<String>,
    /// Copy this readpath to the target even when it has the same version.
    #[arg(long, global = true)]
    pub remote_refresh: bool,
}

/// A path on the target (`--remote-dir`, `--remote-data-dir`): data for the
/// target's commands, never an option or shell (the rules of
/// [`crate::remote::transport::check_path`]; the transport's own, such as
/// adb's absolute paths, are checked when the target is known). Its error
/// names the flag and shows the value printable (clap's own would print
/// it raw, control characters included).
#[derive(Clone)]
struct RemotePath;

impl clap::builder::TypedValueParser for RemotePath {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<String, clap::Error> {
        let flag = arg
            .and_then(clap::Arg::get_long)
            .map_or_else(|| "DIR".to_string(), |l| format!("--{l}"));
        let refuse = |why: String| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("{flag} {why}\n"),
            )
            .with_cmd(cmd)
        };
        let s = value.to_str().ok_or_else(|| {
            refuse(format!(
                "{:?} is not UTF-8; {}",
                crate::output::format::printable(&value.to_string_lossy(), false),
                crate::remote::transport::PATH_RULE
            ))
        })?;
        crate::remote::transport::check_path(s).map_err(|e| refuse(e.to_string()))?;
        Ok(s.to_string())
    }
}

/// How the explorer looks and refreshes.
#[derive(Debug, Clone, clap::Args)]
pub struct TuiArgs {
    /// Screen refreshes per second (0.5..=30).
    #[arg(long, default_value_t = crate::tui::DEFAULT_FPS, value_parser = parse_fps)]
    pub fps: f64,
    /// Draw with ASCII only (for terminals without Braille or box drawing).
    #[arg(long)]
    pub ascii: bool,
    /// Colours for a dark or a light terminal.
    #[arg(long, value_enum, default_value_t = crate::tui::theme::ThemeName::Dark)]
    pub theme: crate::tui::theme::ThemeName,
    /// Quit by itself after this long (e.g. 30s), then print the summary.
    #[arg(long, value_parser = run_duration)]
    pub duration: Option<Duration>,
    /// Length of a metrics interval (one chart point), 10ms..=60s.
    #[arg(long, default_value = "250ms", value_parser = interval_duration)]
    pub interval: Duration,
    /// Do not print the run's summary on quit.
    #[arg(long)]
    pub no_summary: bool,
    /// Record every interval to this file, for `readpath replay`.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Start in presentation mode (big numbers, high contrast; `m` toggles).
    #[arg(long)]
    pub present: bool,
    /// Leave the mouse to the terminal (its own text selection): no clicks
    /// on settings rows or charts, no wheel.
    #[arg(long)]
    pub no_mouse: bool,
    /// A Perfetto trace of where each work item ran, for the whole run.
    #[command(flatten)]
    pub trace: TraceArgs,
}

pub(super) fn parse_speed(s: &str) -> std::result::Result<f64, ArgError> {
    match s.trim().trim_end_matches('x').parse::<f64>() {
        Ok(v) if (0.1..=100.0).contains(&v) => Ok(v),
        _ => Err(ArgError::Speed {
            value: s.to_string(),
        }),
    }
}

pub(super) fn parse_fps(s: &str) -> std::result::Result<f64, ArgError> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.5..=crate::tui::MAX_FPS).contains(&v) => Ok(v),
        _ => Err(ArgError::Fps {
            value: s.to_string(),
        }),
    }
}

/// Output formats.
/// Largest `--trace-max`.
pub const MAX_TRACE_BYTES: u64 = 16 << 30;

/// `--trace-max`: 64 KiB to 16 GiB.
pub(super) fn trace_max(s: &str) -> std::result::Result<u64, ArgError> {
    match crate::settings::parse_size(s) {
        Ok(v) if (crate::output::perfetto::MIN_TRACE_BYTES..=MAX_TRACE_BYTES).contains(&v) => Ok(v),
        _ => Err(ArgError::TraceMax {
            value: s.to_string(),
        }),
    }
}

/// A Perfetto trace of where each work item ran (`run`, `compare`).
#[derive(Debug, Clone, clap::Args)]
pub struct TraceArgs {
    /// Write a Perfetto trace (protobuf) of where each work item ran: a
    /// track per CPU and thread, a slice per item with a flow from its
    /// queueing, counters per interval, the markers. Opens in
    /// ui.perfetto.dev.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// The trace's largest size (64K..=16G); past it, spans are dropped
    /// and the trace and the terminal say how many.
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = trace_max)]
    pub trace_max: u64,
    /// Keep where each work item ran (the timeline's spans) in the
    /// recording, for the whole run: `plot --timeline` draws them and
    /// `replay` shows them (t). Needs --record.
    #[arg(long, requires = "record")]
    pub timeline: bool,
}

impl TraceArgs {
    /// Whether the workload traces its spans for the whole run: a trace
    /// file or `--timeline`.
    pub fn traces(&self) -> bool {
        self.trace.is_some() || self.timeline
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Human-readable, in the spirit of fio.
    Text,
    /// One JSON object (schema in docs/metrics.md).
    Json,
}

/// How an interleaved experiment runs (`compare`, `validate`).
#[derive(Debug, Clone, clap::Args)]
pub struct ExperimentArgs {
    /// Measured time per variant per round (100ms..=1d).
    #[arg(long, default_value = "10s", value_parser = compare_duration)]
    pub duration: Duration,
    /// Rounds (each runs every variant once). A verdict needs ranges apart
    /// that noise gives under 5% of the time: 4 rounds or more (3 v 3
    /// rounds give them by noise 10% of the time: a hint, not a finding).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Time dropped after each switch (0s..=1h).
    #[arg(long, default_value = "1s", value_parser = warmup_duration)]
    pub warmup: Duration,
    /// Length of a metrics interval, 10ms..=60s.
    #[arg(long, default_value = "250ms", value_parser = interval_duration)]
    pub interval: Duration,
}

/// Settings arguments shared by the commands that run a workload.
#[derive(Debug, Clone, clap::Args)]
pub struct SettingsArgs {
    /// A preset: a shipped or saved name (see `readpath presets list`), or a
    /// TOML file with [workload], [pipeline], [workers], [cache], [load], [kernel] sections.
    #[arg(long, value_name = "NAME|FILE")]
    pub preset: Option<String>,
    /// Override one setting, e.g. --set workers.mode=bound (repeatable).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    pub set: Vec<String>,
}

pub(super) fn parse_size_px(s: &str) -> std::result::Result<(u32, u32), ArgError> {
    let bad = || ArgError::SizePx {
        value: s.to_string(),
    };
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let (w, h): (u32, u32) = (
        w.trim().parse().map_err(|_| bad())?,
        h.trim().parse().map_err(|_| bad())?,
    );
    if (200..=8000).contains(&w) && (200..=8000).contains(&h) {
        Ok((w, h))
    } else {
        Err(bad())
    }
}
