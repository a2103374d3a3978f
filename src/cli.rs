//! The command line: argument parsing and the entry point of every command
//! (the explorer, `run`, `compare`, `demo`, `replay`, `plot`, `bench`,
//! `presets`, `prepare`, `digest`): each checks its input and outputs before
//! anything runs, then calls into the engine, `output`, `scenario` or
//! `tui`. `main` only calls [`main_with_args`] and turns the outcome into an
//! exit status: 0 success, 2 bad input, 1 anything else (a stop signal that
//! ended a command before its work was done included: [`Interrupted`]).
//!
//! Every command that may wait (for a FIFO's reader, for input, for the
//! dataset, for the workload) installs the stop handlers first, and every
//! output is opened before the workload starts, so SIGINT, SIGTERM, SIGHUP
//! and SIGQUIT end readpath promptly whatever it is doing.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use crate::crypto::CipherKind;
use crate::dataset::{DEFAULT_SEED, Dataset, OpenOutcome, default_data_dir};
use crate::engine::{Engine, EngineError, EngineOptions};
use crate::output::report::RunSummary;
use crate::scenario::preset::{self, Compare, Preset, PresetError};
pub use crate::settings::parse_duration;
use crate::settings::{Settings, parse_duration_in, parse_size};
use crate::verity::merkle::{MerkleParams, digest_reader, format_digest};

/// `--duration` of `run` and the explorer: 1 ms to 30 days.
fn run_duration(s: &str) -> std::result::Result<Duration, String> {
    parse_duration_in(s, Duration::from_millis(1), crate::settings::MAX_DURATION)
}

/// `--interval`: one chart point, 10 ms to 1 minute.
fn interval_duration(s: &str) -> std::result::Result<Duration, String> {
    parse_duration_in(s, Duration::from_millis(10), Duration::from_secs(60))
}

/// `compare --duration`: 100 ms to 1 day per variant per round.
fn compare_duration(s: &str) -> std::result::Result<Duration, String> {
    parse_duration_in(s, Duration::from_millis(100), Duration::from_secs(86_400))
}

/// `compare --warmup`: none to 1 hour.
fn warmup_duration(s: &str) -> std::result::Result<Duration, String> {
    parse_duration_in(s, Duration::ZERO, Duration::from_secs(3600))
}

/// `bench crypto --seconds`: 10 ms to 1 hour per measurement.
fn bench_duration(s: &str) -> std::result::Result<Duration, String> {
    parse_duration_in(s, Duration::from_millis(10), Duration::from_secs(3600))
}

/// readpath: explore the Linux read post-processing path (fscrypt decrypt +
/// fs-verity verify on workqueues) live, on a real file.
#[derive(Debug, Parser)]
#[command(name = "readpath", version, about, long_about = None)]
pub struct Cli {
    /// Where datasets live [default: $XDG_CACHE_HOME/readpath or ~/.cache/readpath]
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Settings of the explorer when no command is given.
    #[command(flatten)]
    pub settings: SettingsArgs,
    /// Display of the explorer when no command is given.
    #[command(flatten)]
    pub tui: TuiArgs,
    /// Where the workload runs (the explorer and `run`).
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// What to do (default: the live explorer, `tui`).
    #[command(subcommand)]
    pub command: Option<Command>,
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
        crate::remote::transport::check_path(s).map_err(refuse)?;
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
}

fn parse_speed(s: &str) -> std::result::Result<f64, String> {
    match s.trim().trim_end_matches('x').parse::<f64>() {
        Ok(v) if (0.1..=100.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "\"{s}\" is out of range: allowed 0.1..=100 (times real time)"
        )),
    }
}

fn parse_fps(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.5..=crate::tui::MAX_FPS).contains(&v) => Ok(v),
        _ => Err(format!(
            "\"{s}\" is out of range: allowed 0.5..=30 refreshes per second"
        )),
    }
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Human-readable, in the spirit of fio.
    Text,
    /// One JSON object (schema in the README).
    Json,
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

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The far end of --remote: reads commands as JSON lines on stdin and
    /// writes the recording format on stdout; stops when stdin closes.
    Agent,
    /// The live explorer (the default): charts that move while you flip settings.
    Tui {
        /// Settings.
        #[command(flatten)]
        settings: SettingsArgs,
        /// Display.
        #[command(flatten)]
        tui: TuiArgs,
    },
    /// Run a workload headless and print a summary.
    Run {
        /// Settings.
        #[command(flatten)]
        settings: SettingsArgs,
        /// How long to run (e.g. 10s, 500ms, 2m; up to 30d).
        #[arg(long, default_value = "10s", value_parser = run_duration)]
        duration: Duration,
        /// Length of a metrics interval, 10ms..=60s.
        #[arg(long, default_value = "250ms", value_parser = interval_duration)]
        interval: Duration,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Write one JSON line per interval to this file.
        #[arg(long, value_name = "FILE")]
        interval_log: Option<PathBuf>,
        /// Record every interval to this file, for `readpath replay`.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        /// Benchmark switch: take no timestamps and record no latencies
        /// (throughput and counters only), to measure what recording costs.
        #[arg(long)]
        no_latency: bool,
    },
    /// Run variants of one setting interleaved (A B A B ...) and print one table.
    Compare {
        /// Settings (the preset's [compare] is the default --vary).
        #[command(flatten)]
        settings: SettingsArgs,
        /// The setting to vary and its values, e.g. workers.mode=unbound,bound.
        #[arg(long, value_name = "KEY=V1,V2[,V3...]")]
        vary: Option<String>,
        /// Measured time per variant per round (100ms..=1d).
        #[arg(long, default_value = "10s", value_parser = compare_duration)]
        duration: Duration,
        /// Rounds (each runs every variant once).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
        /// Time dropped after each switch (0s..=1h).
        #[arg(long, default_value = "1s", value_parser = warmup_duration)]
        warmup: Duration,
        /// Length of a metrics interval, 10ms..=60s.
        #[arg(long, default_value = "250ms", value_parser = interval_duration)]
        interval: Duration,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Record every interval (all variants, switches marked) for `readpath replay`.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        /// The same experiment on several machines at once, one column
        /// group each: `local` and --remote specs, comma-separated
        /// (e.g. local,ssh:server,adb:R58M); at most 8.
        #[arg(long, value_name = "local,ssh:HOST,adb:SERIAL")]
        hosts: Option<String>,
    },
    /// Play a scripted demo in the explorer (a shipped name or a TOML file).
    Demo {
        /// Demo name (fsverity-bound-vs-unbound, fscrypt-slow-cipher,
        /// fscrypt-aes-instructions, io_uring-qd1-iowait, app-cold-start) or a
        /// script file; none lists the shipped demos.
        script: Option<String>,
        /// Settings overrides on top of the demo's start.
        #[command(flatten)]
        settings: SettingsArgs,
        /// Display.
        #[command(flatten)]
        tui: TuiArgs,
    },
    /// Replay a recording in the explorer, with no workload running.
    Replay {
        /// A file written with --record.
        file: PathBuf,
        /// Recording seconds per second (0.1..=100).
        #[arg(long, default_value_t = 1.0, value_parser = parse_speed)]
        speed: f64,
        /// Screen refreshes per second (0.5..=30).
        #[arg(long, default_value_t = crate::tui::DEFAULT_FPS, value_parser = parse_fps)]
        fps: f64,
        /// Draw with ASCII only.
        #[arg(long)]
        ascii: bool,
        /// Colours for a dark or a light terminal.
        #[arg(long, value_enum, default_value_t = crate::tui::theme::ThemeName::Dark)]
        theme: crate::tui::theme::ThemeName,
        /// Start in presentation mode (`m` toggles).
        #[arg(long)]
        present: bool,
        /// Leave the mouse to the terminal (its own text selection).
        #[arg(long)]
        no_mouse: bool,
    },
    /// Chart a recording for slides (SVG), or export its series (CSV).
    Plot {
        /// A file written with --record.
        file: PathBuf,
        /// Where to write: an .svg or .png file, or (with --format csv) a .csv file ("-": stdout).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// svg (charts) or csv (the series).
        #[arg(long, value_enum, default_value_t = PlotFormat::Svg)]
        format: PlotFormat,
        /// Image size in pixels, WIDTHxHEIGHT.
        #[arg(long, default_value = "1200x900", value_parser = parse_size_px)]
        size: (u32, u32),
        /// Which charts, comma-separated: latency (us/ms/s, log axis),
        /// throughput (MiB/s), queue (the queue wait p99, us/ms/s),
        /// run_delay (the workers', ms per s), sched (queue and run_delay).
        /// Default: all; a chart with nothing measured (no workers) is left
        /// out.
        #[arg(
            long,
            alias = "metrics",
            value_delimiter = ',',
            value_parser = crate::output::plot::METRIC_NAMES
        )]
        metric: Vec<String>,
        /// Leave a demo's captions off the charts (no numbers, no list).
        #[arg(long)]
        no_captions: bool,
    },
    /// Measure what this machine can do.
    Bench {
        /// What to measure.
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// List, show or check presets.
    Presets {
        /// What to do.
        #[command(subcommand)]
        action: PresetsAction,
    },
    /// Prepare (or check and keep) the dataset for a file size.
    Prepare {
        /// Plaintext size, e.g. 256M.
        #[arg(long, default_value = "256M")]
        size: String,
        /// fs-verity salt, hex.
        #[arg(long, default_value = "")]
        salt: String,
        /// Rebuild even if a valid dataset exists.
        #[arg(long)]
        force: bool,
    },
    /// Hold readpath against the real kernel (root: a loop-mounted ext4 image).
    Kernel {
        /// What to do.
        #[command(subcommand)]
        action: KernelAction,
    },
    /// Print the fs-verity digest of files, like `fsverity digest`.
    Digest {
        /// Merkle tree block size (1024..=65536, power of two).
        #[arg(long, default_value_t = 4096)]
        block_size: usize,
        /// Salt, hex (up to 32 bytes).
        #[arg(long, default_value = "")]
        salt: String,
        /// Files to digest.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// What `plot` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlotFormat {
    /// Latency, throughput, queue wait and run_delay charts, markers numbered.
    Svg,
    /// One row per interval.
    Csv,
}

fn parse_size_px(s: &str) -> std::result::Result<(u32, u32), String> {
    let bad =
        || format!("\"{s}\": expected WIDTHxHEIGHT in pixels, each 200..=8000 (e.g. 1200x900)");
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

/// `readpath kernel ...`.
#[derive(Debug, Subcommand)]
pub enum KernelAction {
    /// Write the dataset's plaintext through the kernel's own fscrypt on a
    /// scratch ext4 image and compare the ciphertext it wrote with
    /// readpath's, bit for bit (exit 0: every check run matched; 1: a
    /// mismatch; 2: it cannot run here).
    Check {
        /// Plaintext written, a multiple of 4K from 4K to 256M.
        #[arg(long, default_value = "4M")]
        size: String,
        /// Check on this directory's filesystem (ext4 or f2fs with
        /// `encrypt`, 4 KiB blocks) instead of a scratch image: the
        /// ciphertext is read from its block device (root).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Follow the kernel's post-read workqueues (fscrypt_read_queue,
    /// fsverity_read_queue, blk_crypto_wq, f2fs_post_read_wq) through their
    /// tracepoints, in a tracefs instance of readpath's own, and print each
    /// queue's items, queue latency, execution time and CPU moves.
    Trace {
        /// How long to trace (100ms..=1d); Ctrl-C stops early.
        #[arg(long, default_value = "10s", value_parser = compare_duration)]
        duration: Duration,
    },
    /// Put back what an interrupted check or trace left (its mount, its
    /// loop device, its tracefs instance).
    Restore,
}

/// `readpath bench ...`.
#[derive(Debug, Subcommand)]
pub enum BenchWhat {
    /// Per-core throughput of each cipher and of SHA-256 on 4096-byte units,
    /// next to `openssl speed` when openssl is installed.
    Crypto {
        /// CPU seconds per measurement (10ms..=1h).
        #[arg(long, default_value = "1s", value_parser = bench_duration)]
        seconds: Duration,
        /// Rounds, alternating readpath and openssl (the median is reported).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
        rounds: u32,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

/// `readpath presets ...`.
#[derive(Debug, Subcommand)]
pub enum PresetsAction {
    /// Every preset: the user's, then the shipped ones, with descriptions.
    List,
    /// A preset as TOML, every default filled in.
    Show {
        /// Name or file.
        name: String,
    },
    /// Validate preset files: exit 0 if all are valid, else 2 with every error.
    Check {
        /// Files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// An error caused by the user's input: exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

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

/// Builds settings from `--preset` then `--set`s, validated for this
/// machine; returns the preset too.
pub fn load_settings(args: &SettingsArgs) -> Result<(Settings, Option<Preset>)> {
    load_settings_for(args, crate::sys::online_cpus().len())
}

/// [`load_settings`] validated for a machine of `cpus` CPUs (a target's,
/// or any machine's: `MAX_CPU_NUMBER + 1`, when only the targets know).
pub fn load_settings_for(args: &SettingsArgs, cpus: usize) -> Result<(Settings, Option<Preset>)> {
    let preset = match &args.preset {
        Some(spec) => Some(preset::resolve(spec).map_err(preset_error)?.0),
        None => None,
    };
    let mut s = preset
        .as_ref()
        .map_or_else(Settings::default, |p| p.settings.clone());
    for spec in &args.set {
        s.apply_override(spec)
            .map_err(|e| BadInput(e.to_string()))?;
    }
    s.validate(cpus).map_err(|e| BadInput(e.to_string()))?;
    Ok((s, preset))
}

fn preset_error(e: PresetError) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        e.into()
    }
}

fn engine_error(e: EngineError) -> anyhow::Error {
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

fn say_raw(msg: &str) {
    let _ = write!(std::io::stderr(), "{msg}");
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

/// A progress reporter for dataset preparation: a bar on a terminal, silence otherwise.
pub fn progress_reporter() -> impl FnMut(u64, u64) {
    let bar: Option<indicatif::ProgressBar> = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "preparing dataset [{bar:40}] {bytes}/{total_bytes} ({eta})",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        b
    });
    move |done, total| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
            if done >= total {
                b.finish_and_clear();
            }
        }
    }
}

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

/// The command chosen, run.
fn dispatch(cli: Cli) -> Result<()> {
    let data_dir = cli.data_dir.clone().unwrap_or_else(default_data_dir);
    // The explorer's options before a command would be silently ignored.
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
    let remote = match &cli.remote.remote {
        Some(spec) => {
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
            );
            if !ok {
                return Err(BadInput(
                    "--remote works with the explorer (readpath, tui), `run`, `demo NAME`, \
                     `compare` (or `compare --hosts local,ssh:HOST`, not both) and `bench crypto`"
                        .into(),
                )
                .into());
            }
            Some(crate::remote::transport::Remote::parse(spec).map_err(BadInput)?)
        }
        None => None,
    };
    let remote = remote.map(|r| (r, cli.remote.clone()));
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
        None => tui(&data_dir, &cli.settings, &cli.tui, remote),
        Some(Command::Tui { settings, tui: t }) => tui(&data_dir, &settings, &t, remote),
        Some(Command::Agent) => {
            let status = crate::remote::agent::run(&data_dir);
            std::process::exit(status);
        }
        Some(Command::Demo {
            script,
            settings,
            tui: t,
        }) => match script {
            Some(script) => demo(&data_dir, &script, &settings, &t, remote),
            None => list_demos(),
        },
        Some(Command::Run {
            settings,
            duration,
            interval,
            format,
            interval_log,
            record,
            no_latency,
        }) => {
            crate::metrics::set_recording(!no_latency);
            run(
                &data_dir,
                &settings,
                RunPlan {
                    duration,
                    interval,
                    format,
                    interval_log: interval_log.as_deref(),
                    record: record.as_deref(),
                },
                remote,
            )
        }
        Some(Command::Compare {
            settings,
            vary,
            duration,
            rounds,
            warmup,
            interval,
            format,
            record,
            hosts,
        }) => compare(
            &settings,
            vary.as_deref(),
            record.as_deref(),
            // `compare --remote X` is `compare --hosts X`.
            hosts
                .as_deref()
                .or(cli.remote.remote.as_deref())
                .map(|h| (h, cli.remote.clone())),
            crate::output::experiment::CompareOptions {
                rounds,
                duration,
                warmup,
                engine: EngineOptions::new(interval, data_dir.clone()),
                stop: crate::sys::stop_requested,
            },
            format,
        ),
        Some(Command::Presets { action }) => presets(action),
        Some(Command::Plot {
            file,
            out,
            format,
            size,
            metric,
            no_captions,
        }) => {
            let metrics = crate::output::plot::metric_panels(&metric).map_err(BadInput)?;
            plot(&file, &out, format, size, &metrics, !no_captions)
        }
        Some(Command::Replay {
            file,
            speed,
            fps,
            ascii,
            theme,
            present,
            no_mouse,
        }) => replay(&file, speed, fps, ascii, theme, present, !no_mouse),
        Some(Command::Bench {
            what:
                BenchWhat::Crypto {
                    seconds,
                    rounds,
                    format,
                },
        }) => {
            if let Some((r, ra)) = remote {
                return bench_remote(r, &ra, seconds, rounds, format);
            }
            let tty = std::io::stderr().is_terminal();
            let mut progress = |name: &str| {
                if tty {
                    say_raw(&format!("\rmeasuring {name}...          "));
                }
            };
            let r = crate::bench::crypto(seconds.as_secs_f64(), rounds, &mut progress);
            if tty {
                say_raw("\r\x1b[K");
            }
            emit(format, &r, || r.to_text())
        }
        Some(Command::Prepare { size, salt, force }) => prepare(&data_dir, &size, &salt, force),
        Some(Command::Kernel { action }) => kernel(&data_dir, action),
        Some(Command::Digest {
            block_size,
            salt,
            files,
        }) => digest(block_size, &salt, &files),
    }
}

/// After the explorer: the recording finished with the records left
/// (however the explorer ended, the terminal going away included), said
/// where it went; false when the terminal is gone and nothing more can be
/// shown.
fn end_explorer(
    writer: Option<crate::output::recording::Writer>,
    rest: &[crate::metrics::IntervalRecord],
    ending: crate::tui::Ending,
) -> Result<bool> {
    let gone = ending == crate::tui::Ending::TerminalGone;
    if let Some(mut w) = writer {
        for r in rest {
            w.record(r).map_err(recording_error)?;
        }
        let path = w.finish().map_err(recording_error)?;
        if !gone {
            say(&format!("readpath: recorded {}", path.display()));
        }
    }
    Ok(!gone)
}

/// A target and how to reach it (`--remote` and its options).
type RemoteChoice = Option<(crate::remote::transport::Remote, RemoteArgs)>;

fn tui(data_dir: &Path, args: &SettingsArgs, t: &TuiArgs, remote: RemoteChoice) -> Result<()> {
    if let Some((r, ra)) = remote {
        let spec = remote_spec(args, "tui", t.interval, &ra)?;
        return explore_remote(t, r, spec, None);
    }
    let (settings, preset) = load_settings(args)?;
    let inputs: Vec<PathBuf> = preset_input(args).into_iter().collect();
    explore(data_dir, settings, preset, t, None, &inputs)
}

/// What a remote start sends: a preset file is read here (its settings go
/// whole), a preset name is resolved on the target, `--set` applies there.
fn remote_spec(
    args: &SettingsArgs,
    command: &str,
    interval: Duration,
    ra: &RemoteArgs,
) -> Result<crate::remote::client::StartSpec> {
    let (preset, settings) = match &args.preset {
        Some(p) if p.contains('/') || p.ends_with(".toml") => (
            None,
            Some(preset::resolve(p).map_err(preset_error)?.0.settings),
        ),
        other => (other.clone(), None),
    };
    Ok(crate::remote::client::StartSpec {
        preset,
        settings,
        set: args.set.clone(),
        interval,
        command: command.into(),
        dir: ra.remote_dir.clone(),
        data_dir: ra.remote_data_dir.clone(),
        refresh: ra.remote_refresh,
    })
}

/// Starts the agent on the target, saying on stderr what it does.
fn start_remote(
    r: crate::remote::transport::Remote,
    spec: crate::remote::client::StartSpec,
) -> Result<crate::remote::client::RemoteWorkload> {
    crate::sys::install_stop_handlers();
    let mut tell = |m: &str| say(&format!("readpath: {m}"));
    crate::remote::client::RemoteWorkload::start(r, spec, &mut tell).map_err(engine_error)
}

/// The explorer on a workload running on another machine.
fn explore_remote(
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
    let record = match &t.record {
        Some(p) => Some(check_output("--record", p, &[], None)?),
        None => None,
    };
    // Opened before the workload starts (a FIFO waits for its reader here).
    crate::sys::install_stop_handlers();
    let record = open_output(record.as_ref())?;
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
    let shown = crate::tui::run(&mut w, &opts, writer, demo);
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
        Err(why) => Err(RemoteLost(why).into()),
    }
}

/// The file a `--preset` reads, when it is a file (a path, or a saved user
/// preset): an input no output may replace.
fn preset_input(args: &SettingsArgs) -> Option<PathBuf> {
    let spec = args.preset.as_deref()?;
    if spec.contains('/') || spec.ends_with(".toml") {
        return Some(PathBuf::from(spec));
    }
    preset::user_path(spec).ok().filter(|p| p.is_file())
}

/// Checks an output path before anything runs: not one of `inputs`, not a
/// file of a dataset under `data_dir`, and something readpath may write
/// (see [`crate::output::file`]). Refusals are bad input (exit status 2).
fn check_output(
    flag: &str,
    path: &Path,
    inputs: &[PathBuf],
    data_dir: Option<&Path>,
) -> Result<crate::output::file::OutputPath> {
    let ins: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let out = crate::output::file::OutputPath::check(flag, path, &ins).map_err(output_error)?;
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

fn output_error(e: crate::output::file::OutputError) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        e.into()
    }
}

/// Opens a checked output (before the workload starts): a FIFO no process
/// reads yet is waited for, said on stderr, until a reader comes or a stop
/// signal ends the wait ([`Interrupted`]).
fn open_output(
    out: Option<&crate::output::file::OutputPath>,
) -> Result<Option<crate::output::file::OutputFile>> {
    out.map(|o| o.create().map_err(output_error)).transpose()
}

/// Prints text for people on stdout, control characters replaced (text
/// from files and targets cannot drive the terminal), through the writer a
/// stop signal can end.
fn print_text(text: &str) -> Result<()> {
    let mut out = crate::output::file::stdout();
    out.write_all(crate::output::format::printable(text, true).as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Builds the dataset `settings` read, when it is missing or invalid, on a
/// thread of its own while this one watches for a stop signal: the
/// dataset's writer does not look at signals, and a large dataset takes
/// minutes. On a stop signal the partial dataset is removed and the
/// command ends ([`Interrupted`], exit status 1). Settings that
/// [`Engine::start`] refuses before touching the dataset are left to it,
/// so a refusal still comes before anything is written; so is a dataset
/// that cannot be made (Engine::start says why).
fn prepare_dataset(data_dir: &Path, settings: &Settings) -> Result<()> {
    let (size, salt) = (settings.workload.file_size, settings.pipeline.salt.clone());
    if Dataset::open(data_dir, size, &salt).is_ok() {
        return Ok(());
    }
    let early = crate::engine::resolve(
        settings,
        &crate::sys::probe_features(),
        &crate::engine::DataFs::capable(),
    );
    if !early.is_ok_and(|r| crate::engine::memory::check_fits(&r.effective).is_ok()) {
        return Ok(());
    }
    let dir = data_dir.to_path_buf();
    let made = interruptibly(data_dir, move || {
        let mut progress = progress_reporter();
        Dataset::open_or_prepare(&dir, size, &salt, &mut progress)
    })?;
    match made {
        Ok((ds, OpenOutcome::Created)) => {
            say(&format!(
                "readpath: dataset prepared in {}",
                ds.dir().display()
            ));
        }
        Ok((_, OpenOutcome::Rebuilt(why))) => say(&format!("readpath: dataset rebuilt ({why})")),
        _ => {}
    }
    Ok(())
}

/// Runs `work` (writing a dataset under `data_dir`) on a thread while this
/// one polls for a stop signal; on one, removes the dataset directories
/// this process was writing (`.dataset-SIZE.tmp-PID`: the thread ends with
/// the process) and returns [`Interrupted`].
fn interruptibly<T: Send + 'static>(
    data_dir: &Path,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("dataset".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .context("starting the dataset's thread")?;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(v) => return Ok(v),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                anyhow::bail!("preparing the dataset: its thread ended without a result")
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if crate::sys::stop_requested() {
            let own = format!(".tmp-{}", std::process::id());
            for e in std::fs::read_dir(data_dir).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(".dataset-") && name.ends_with(&own) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
            if std::io::stderr().is_terminal() {
                say_raw("\r\x1b[K");
            }
            return Err(Interrupted(format!(
                "stopped by {} while preparing the dataset in {}: the partial dataset was removed",
                crate::sys::signal_name(crate::sys::stop_signal()),
                data_dir.display()
            ))
            .into());
        }
    }
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
        let d = resolve(name, cpus).map_err(BadInput)?;
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

/// `bench crypto --remote`: the target's own figures (its CPU, its AES and
/// SHA instructions), measured there by its readpath, printed here.
fn bench_remote(
    r: crate::remote::transport::Remote,
    ra: &RemoteArgs,
    seconds: Duration,
    rounds: u32,
    format: Format,
) -> Result<()> {
    let dir = ra
        .remote_dir
        .clone()
        .unwrap_or_else(|| r.default_dir().to_string());
    say(&format!("readpath: {}: checking the target", r.label()));
    let (bin, done) =
        crate::remote::transport::prepare(&r, &dir, ra.remote_refresh).map_err(|e| {
            if e.is_bad_input() {
                anyhow::Error::from(BadInput(e.message))
            } else {
                e.into()
            }
        })?;
    say(&format!("readpath: {done}"));
    say(&format!(
        "readpath: {}: measuring (about {} s)",
        r.label(),
        (seconds.as_secs_f64() * rounds as f64 * 6.0).ceil()
    ));
    let out = r
        .run(&format!(
            "{} bench crypto --seconds {}ms --rounds {rounds} --format json",
            crate::remote::transport::sh_quote(&bin),
            seconds.as_millis()
        ))
        .map_err(|e| anyhow::anyhow!(e))?;
    let report: crate::bench::CryptoReport = serde_json::from_str(&out).map_err(|e| {
        anyhow::anyhow!(
            "{}: the target's bench output is not a readpath report: {e}",
            r.label()
        )
    })?;
    emit(format, &report, || report.to_text())
}

fn demo(
    data_dir: &Path,
    spec: &str,
    args: &SettingsArgs,
    t: &TuiArgs,
    remote: RemoteChoice,
) -> Result<()> {
    let cpus = crate::sys::online_cpus().len();
    let d = crate::scenario::demo::resolve(spec, cpus).map_err(BadInput)?;
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

/// The explorer on a live engine, optionally playing a demo.
fn explore(
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
    let record = match &t.record {
        Some(p) => Some(check_output("--record", p, inputs, Some(data_dir))?),
        None => None,
    };
    crate::sys::install_stop_handlers();
    // Opened before the workload starts (a FIFO waits for its reader here).
    let record = open_output(record.as_ref())?;
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
    let shown = crate::tui::run(&mut engine, &opts, writer, demo);
    let effective = engine.effective().clone();
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

/// What a headless run measures for how long, and where it writes.
struct RunPlan<'a> {
    duration: Duration,
    interval: Duration,
    format: Format,
    interval_log: Option<&'a Path>,
    record: Option<&'a Path>,
}

/// Where a headless run writes its intervals: the recording and the
/// interval log, checked and opened before anything runs (a FIFO waits for
/// its reader then), the recording's header written once the workload's
/// settings are known.
struct RunSink {
    /// The recording's output, until its header is written.
    pending: Option<crate::output::file::OutputFile>,
    recording: Option<crate::output::recording::Writer>,
    log: Option<crate::output::file::OutputFile>,
    /// Intervals written.
    received: usize,
}

/// The run's outputs, checked: (recording, interval log).
type RunOutputs = (
    Option<crate::output::file::OutputPath>,
    Option<crate::output::file::OutputPath>,
);

impl RunSink {
    /// Checks `--record` and `--interval-log` (not an input, not a
    /// dataset file under `data_dir`, not each other).
    fn check(args: &SettingsArgs, plan: &RunPlan, data_dir: Option<&Path>) -> Result<RunOutputs> {
        let inputs: Vec<PathBuf> = preset_input(args).into_iter().collect();
        let log = match plan.interval_log {
            Some(p) => Some(check_output("--interval-log", p, &inputs, data_dir)?),
            None => None,
        };
        let record = match plan.record {
            Some(p) => Some(check_output("--record", p, &inputs, data_dir)?),
            None => None,
        };
        if let (Some(a), Some(b)) = (&record, &log) {
            a.check_distinct(b).map_err(output_error)?;
        }
        Ok((record, log))
    }

    /// Opens both outputs, before the workload starts; the stop handlers
    /// are installed (a FIFO's wait for its reader ends on a stop signal).
    fn open(outs: &RunOutputs) -> Result<RunSink> {
        let pending = open_output(outs.0.as_ref())?;
        let log = open_output(outs.1.as_ref())?;
        Ok(RunSink {
            pending,
            recording: None,
            log,
            received: 0,
        })
    }

    /// Writes the recording's header, once the workload runs.
    fn begin(&mut self, header: &crate::output::recording::Header) -> Result<()> {
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
        if let Some(l) = self.log.as_mut() {
            let r = serde_json::to_writer(&mut *l, rec)
                .map_err(std::io::Error::from)
                .and_then(|()| l.write_all(b"\n"));
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

fn run(data_dir: &Path, args: &SettingsArgs, plan: RunPlan, remote: RemoteChoice) -> Result<()> {
    if let Some((r, ra)) = remote {
        return run_remote(args, plan, r, &ra);
    }
    let (settings, preset) = load_settings(args)?;
    let outs = RunSink::check(args, &plan, Some(data_dir))?;
    // Before the engine starts: a stop signal while it prepares (writing
    // the kernel target's file, with knobs turned) ends the run cleanly.
    crate::sys::install_stop_handlers();
    // The outputs are opened before the workload starts, then the dataset
    // made (both end on a stop signal).
    let mut sink = RunSink::open(&outs)?;
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
    sink.collect(&engine, plan.duration)?;
    let effective = engine.effective().clone();
    let features = engine.features().clone();
    let dataset_dir = engine.dataset().dir().to_path_buf();
    // Stop first, then drain the records still queued (the final one included).
    let (totals, rest) = stop_and_drain(engine);
    sink.finish(&rest)?;
    let machine = crate::sys::machine_info(&dataset_dir);
    let summary = RunSummary::new(&settings, &effective, &totals, machine, features);
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
    let w = start_remote(r, spec)?;
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

/// Prints a report on stdout as text or as one JSON object, neither able
/// to drive a terminal (control characters replaced in text, escaped in
/// JSON).
fn emit<T: serde::Serialize>(
    format: Format,
    value: &T,
    text: impl FnOnce() -> String,
) -> Result<()> {
    match format {
        Format::Text => print_text(&text()),
        Format::Json => {
            let json = serde_json::to_string_pretty(value)?;
            let mut out = crate::output::file::stdout();
            out.write_all(crate::output::format::json_controls_escaped(&json).as_bytes())?;
            out.write_all(b"\n")?;
            out.flush()?;
            Ok(())
        }
    }
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

fn recording_error(e: crate::output::recording::RecordingError) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        e.into()
    }
}

/// Starts a recording for a running engine (its header written) in the
/// output the caller checked and opened before starting the engine.
fn start_recording(
    out: crate::output::file::OutputFile,
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

fn plot(
    file: &Path,
    out: &Path,
    format: PlotFormat,
    size: (u32, u32),
    metrics: &[usize],
    captions: bool,
) -> Result<()> {
    // The output is checked (not the input, not a device) before the input
    // is read, so a refusal costs nothing.
    let target = check_output("--out", out, &[file.to_path_buf()], None)?;
    if format == PlotFormat::Svg && target.mode() != crate::output::file::Mode::Stdout {
        let ext = out.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !matches!(ext, "svg" | "png") && target.mode() == crate::output::file::Mode::Atomic {
            return Err(BadInput(format!(
                "--out {}: give a file name ending in .svg or .png (or --format csv)",
                out.display()
            ))
            .into());
        }
    }
    let rec = crate::output::recording::read(file).map_err(recording_error)?;
    let bytes = match format {
        PlotFormat::Csv => crate::output::plot::csv(&rec).into_bytes(),
        PlotFormat::Svg => {
            let svg = crate::output::plot::svg(&rec, size.0, size.1, metrics, captions)
                .map_err(|e| BadInput(format!("{}: {e}", file.display())))?;
            let png = out.extension().is_some_and(|e| e == "png");
            if png {
                // Drawn as SVG, rasterised by librsvg (text stays sharp).
                crate::output::plot::rasterize(svg.as_bytes(), size.0, size.1)
                    .with_context(|| format!("--out {}", out.display()))?
            } else {
                svg.into_bytes()
            }
        }
    };
    // A FIFO waits for its reader here (said on stderr; a stop signal ends
    // the wait); stdout and a FIFO are written through poll.
    target.write_all(&bytes).map_err(output_error)?;
    // Says what it wrote (nothing when the output is stdout).
    if out != Path::new("-") {
        print_text(&format!(
            "readpath plot: wrote {} ({}, {} bytes{})\n",
            out.display(),
            match format {
                PlotFormat::Csv => "CSV".to_string(),
                PlotFormat::Svg if out.extension().is_some_and(|e| e == "png") => {
                    format!("PNG {}x{}", size.0, size.1)
                }
                PlotFormat::Svg => format!("SVG {}x{}", size.0, size.1),
            },
            bytes.len(),
            if format == PlotFormat::Svg {
                format!(", from {} intervals", rec.records.len())
            } else {
                String::new()
            }
        ))?;
    }
    Ok(())
}

fn replay(
    file: &Path,
    speed: f64,
    fps: f64,
    ascii: bool,
    theme: crate::tui::theme::ThemeName,
    present: bool,
    mouse: bool,
) -> Result<()> {
    let rec = crate::output::recording::read(file).map_err(recording_error)?;
    if rec.records.is_empty() {
        return Err(BadInput(format!(
            "{}: the recording holds no interval: nothing to replay",
            file.display()
        ))
        .into());
    }
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(
            BadInput("replay needs a terminal (stdin and stdout are not both one)".into()).into(),
        );
    }
    let mut driver = crate::tui::replay::ReplayDriver::new(rec, speed);
    let mut app = driver.fresh_app();
    let opts = crate::tui::TuiOptions {
        fps,
        ascii,
        theme,
        duration: None,
        preset: None,
        present,
        mouse,
    };
    crate::tui::run_with(&mut driver, &mut app, &opts).context("drawing the replay")?;
    Ok(())
}

fn compare(
    args: &SettingsArgs,
    vary: Option<&str>,
    record: Option<&Path>,
    hosts: Option<(&str, RemoteArgs)>,
    opts: crate::output::experiment::CompareOptions,
    format: Format,
) -> Result<()> {
    // The hosts are checked before anything runs.
    let hosts = match hosts {
        Some((list, ra)) => {
            if record.is_some() {
                return Err(BadInput(
                    "compare --hosts: --record is for one machine; record each with `run --remote`"
                        .into(),
                )
                .into());
            }
            let mut out: Vec<Option<crate::remote::transport::Remote>> = Vec::new();
            for h in list.split(',').map(str::trim) {
                let host = if h == "local" {
                    None
                } else {
                    Some(
                        crate::remote::transport::Remote::parse(h)
                            .map_err(|e| BadInput(format!("--hosts: {e}; or local")))?,
                    )
                };
                if out.contains(&host) {
                    return Err(BadInput(format!("--hosts: {h} is named twice")).into());
                }
                out.push(host);
            }
            if !(1..=8).contains(&out.len()) {
                return Err(
                    BadInput(format!("--hosts: {} hosts; allowed 1..=8", out.len())).into(),
                );
            }
            Some((out, ra))
        }
        None => None,
    };
    // With targets only, they validate the settings (their CPUs, their
    // kernel); here only the ranges are checked.
    let here = hosts
        .as_ref()
        .is_none_or(|(h, _)| h.iter().any(Option::is_none));
    let cpus = if here {
        crate::sys::online_cpus().len()
    } else {
        crate::settings::MAX_CPU_NUMBER + 1
    };
    let (settings, preset) = load_settings_for(args, cpus)?;
    let cmp = match (vary, preset.as_ref().and_then(|p| p.compare.clone())) {
        (Some(v), _) => Compare::parse_vary(v, &settings).map_err(BadInput)?,
        (None, Some(c)) => c,
        (None, None) => {
            return Err(BadInput(
                "compare: nothing to vary: give --vary KEY=V1,V2 (e.g. --vary workers.mode=unbound,bound) or a --preset with a [compare] table".into(),
            )
            .into());
        }
    };
    // Every variant must be valid before anything runs.
    let features = crate::sys::probe_features();
    for v in cmp
        .variants(&settings)
        .map_err(|e| BadInput(e.to_string()))?
    {
        v.validate(cpus).map_err(|e| BadInput(e.to_string()))?;
        if !here {
            continue;
        }
        let r = crate::engine::resolve(&v, &features, &crate::engine::DataFs::capable())
            .map_err(engine_error)?;
        crate::engine::memory::check_fits(&r.effective).map_err(|e| {
            BadInput(format!(
                "{} = {}: {e}",
                cmp.key,
                v.get(&cmp.key).unwrap_or_default()
            ))
        })?;
    }
    let total = cmp.values.len() as u32 * opts.rounds;
    let tty = std::io::stderr().is_terminal();
    let mut progress = |round: u32, i: usize| {
        if tty {
            say_raw(&format!(
                "\rcompare: round {}/{}, {} = {} ({} of {})   ",
                round + 1,
                opts.rounds,
                cmp.key,
                cmp.values[i],
                round * cmp.values.len() as u32 + i as u32 + 1,
                total
            ));
        }
    };
    let inputs: Vec<PathBuf> = preset_input(args).into_iter().collect();
    let record = match record {
        Some(p) => Some(check_output(
            "--record",
            p,
            &inputs,
            Some(&opts.engine.data_dir),
        )?),
        None => None,
    };
    crate::sys::install_stop_handlers();
    // Opened before the workload starts (a FIFO waits for its reader here),
    // then the dataset made: both end on a stop signal.
    let record = open_output(record.as_ref())?;
    if here {
        prepare_dataset(&opts.engine.data_dir, &settings)?;
    }
    if let Some((hosts, ra)) = hosts {
        if tty {
            say(
                "readpath: compare --hosts: the hosts run at the same time; each says when it is done",
            );
        }
        let report = compare_hosts(&settings, &cmp, preset.map(|p| p.name), &hosts, &ra, &opts)?;
        emit(format, &report, || report.to_text())?;
        let failed = report.hosts.iter().any(|h| h.error.is_some());
        return if failed {
            Err(RemoteLost("one or more hosts have no complete result (see above)".into()).into())
        } else {
            Ok(())
        };
    }
    let mut ds_progress = progress_reporter();
    let report = crate::output::experiment::run(
        &settings,
        &cmp,
        preset.map(|p| p.name),
        &opts,
        &mut progress,
        &mut ds_progress,
        record,
    )
    .map_err(engine_error)?;
    if tty {
        say_raw("\r\x1b[K");
    }
    emit(format, &report, || report.to_text())
}

/// `compare --hosts`: every target started first (checked, its binary
/// copied), then the experiment on all hosts at once, each interleaving
/// its variants; a host that fails or loses its connection is reported
/// with why, beside the others' results.
fn compare_hosts(
    settings: &Settings,
    cmp: &Compare,
    preset: Option<String>,
    hosts: &[Option<crate::remote::transport::Remote>],
    ra: &RemoteArgs,
    opts: &crate::output::experiment::CompareOptions,
) -> Result<crate::output::experiment::HostsReport> {
    use crate::output::experiment::{HostResult, HostsReport, run_on};
    let first = cmp
        .variants(settings)
        .map_err(|e| BadInput(e.to_string()))?
        .remove(0);
    // Start the remote ones (each checks its target and copies readpath).
    let mut started = Vec::new();
    for h in hosts.iter().flatten() {
        let mut spec = remote_spec(
            &SettingsArgs {
                preset: None,
                set: Vec::new(),
            },
            "compare",
            opts.engine.interval,
            ra,
        )?;
        spec.settings = Some(first.clone());
        let label = h.label();
        started.push((label, start_remote(h.clone(), spec)?));
    }
    let mut results: Vec<HostResult> = Vec::new();
    std::thread::scope(|sc| -> Result<()> {
        let mut threads = Vec::new();
        for (label, mut w) in started {
            let preset = preset.clone();
            threads.push(sc.spawn(move || {
                let mut none = |_: u32, _: usize| {};
                let mut rec = None;
                let r = run_on(&mut w, settings, cmp, preset, opts, &mut none, &mut rec);
                let summary = w.finish().summary;
                say(&format!("readpath: {label}: done"));
                let (report, error) = match r {
                    Ok(rep) => (Some(rep), summary.err().map(|e| format!("connection: {e}"))),
                    Err(e) => (None, Some(e.to_string())),
                };
                HostResult {
                    host: label,
                    report,
                    error,
                }
            }));
        }
        if hosts.iter().any(Option::is_none) {
            let mut quiet = |_: u32, _: usize| {};
            let mut ds = progress_reporter();
            let r = crate::output::experiment::run(
                settings,
                cmp,
                preset.clone(),
                opts,
                &mut quiet,
                &mut ds,
                None,
            );
            say("readpath: local: done");
            results.push(match r {
                Ok(rep) => HostResult {
                    host: "local".into(),
                    report: Some(rep),
                    error: None,
                },
                Err(e) => HostResult {
                    host: "local".into(),
                    report: None,
                    error: Some(e.to_string()),
                },
            });
        }
        for t in threads {
            if let Ok(r) = t.join() {
                results.push(r);
            }
        }
        Ok(())
    })?;
    // In the order given.
    let order = |h: &HostResult| {
        hosts
            .iter()
            .position(|x| x.as_ref().map_or("local".to_string(), |r| r.label()) == h.host)
            .unwrap_or(usize::MAX)
    };
    results.sort_by_key(order);
    Ok(HostsReport {
        version: crate::output::experiment::REPORT_VERSION,
        hosts: results,
    })
}

/// `readpath presets ...`: what it says is printed whole at the end, its
/// descriptions and errors (text from preset files) with control
/// characters replaced.
fn presets(action: PresetsAction) -> Result<()> {
    let mut out = Vec::new();
    let r = presets_into(action, &mut out);
    print_text(&String::from_utf8_lossy(&out))?;
    r
}

fn presets_into(action: PresetsAction, out: &mut Vec<u8>) -> Result<()> {
    match action {
        PresetsAction::List => {
            for (name, origin, p) in preset::list() {
                let (desc, path) = match &p {
                    Ok(p) => (
                        p.description.clone(),
                        crate::engine::ReadPath::of(&p.settings).short_name(),
                    ),
                    Err(e) => (format!("INVALID: {e}"), ""),
                };
                // The first sentence, wrapped at spaces under its column
                // (`presets show NAME` has the whole description).
                let first = desc.split(". ").next().unwrap_or("").trim_end_matches('.');
                // At most three lines; the third ends in an ellipsis if cut.
                let mut lines = crate::tui::look::wrap_words(first, 70, 70);
                if lines.len() > 3 {
                    let rest = lines[2..].join(" ");
                    lines.truncate(2);
                    lines.push(crate::tui::look::ellipsize(&rest, 70));
                }
                writeln!(
                    out,
                    "{name:<28} {:<9} {path:<10} {}",
                    match origin {
                        preset::Origin::Shipped => "shipped",
                        _ => "user",
                    },
                    lines[0]
                )?;
                for l in &lines[1..] {
                    writeln!(out, "{:50}{l}", "")?;
                }
            }
            if let Some(d) = preset::user_dir() {
                writeln!(
                    out,
                    "\nuser presets: {} (saved with `s` in the explorer)",
                    d.display()
                )?;
            }
        }
        PresetsAction::Show { name } => {
            let (p, origin) = preset::resolve(&name).map_err(preset_error)?;
            writeln!(out, "# {name}: {origin}")?;
            writeln!(
                out,
                "# models: {}",
                crate::engine::ReadPath::of(&p.settings).describe()
            )?;
            out.write_all(p.to_toml_string().as_bytes())?;
        }
        PresetsAction::Check { files } => {
            let mut errors = Vec::new();
            for f in &files {
                match preset::load_file(f) {
                    Ok(p) => match p
                        .settings
                        .validate(crate::sys::online_cpus().len())
                        .map_err(|e| e.to_string())
                        .and_then(|()| crate::engine::memory::check_fits(&p.settings))
                    {
                        Ok(()) => writeln!(out, "{}: ok ({})", f.display(), p.name)?,
                        Err(e) => errors.push(format!("{}: {e}", f.display())),
                    },
                    Err(e) => errors.push(e.to_string()),
                }
            }
            if !errors.is_empty() {
                return Err(BadInput(errors.join("\n")).into());
            }
        }
    }
    Ok(())
}

fn prepare(data_dir: &Path, size: &str, salt: &str, force: bool) -> Result<()> {
    let file_size = parse_size(size).map_err(|e| BadInput(format!("--size: {e}")))?;
    let mut s = Settings::default();
    s.set("workload.file_size", size)
        .map_err(|e| BadInput(format!("--size: {e}")))?;
    s.set("pipeline.salt", salt)
        .map_err(|e| BadInput(format!("--salt: {e}")))?;
    let salt = s.pipeline.salt.clone();
    let as_cli_error = |e: crate::dataset::DatasetError| -> anyhow::Error {
        if e.is_bad_input() {
            BadInput(e.to_string()).into()
        } else {
            e.into()
        }
    };
    // On a thread of its own: a stop signal ends the command at once.
    let dir = data_dir.to_path_buf();
    let made = interruptibly(data_dir, move || {
        let mut progress = progress_reporter();
        if force {
            Dataset::prepare(&dir, file_size, &salt, DEFAULT_SEED, &mut progress)
                .map(|ds| (ds, OpenOutcome::Created))
        } else {
            Dataset::open_or_prepare(&dir, file_size, &salt, &mut progress)
        }
    })?;
    let (ds, outcome) = made.map_err(as_cli_error)?;
    let what = match outcome {
        OpenOutcome::Existing => "valid dataset kept".to_string(),
        OpenOutcome::Created => "dataset prepared".to_string(),
        OpenOutcome::Rebuilt(why) => format!("dataset rebuilt ({why})"),
    };
    writeln!(
        std::io::stdout(),
        "{what}: {} ({} bytes, fs-verity digest sha256:{})",
        ds.dir().display(),
        ds.file_size(),
        ds.header().file_digest
    )?;
    Ok(())
}

/// A check's outcome was a mismatch (exit status 1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Mismatch(pub String);

fn kernel(data_dir: &Path, action: KernelAction) -> Result<()> {
    crate::sys::install_stop_handlers();
    // Nothing under the data dir is acted on unless it may be trusted.
    crate::dataset::check_data_dir(data_dir).map_err(|e| BadInput(e.to_string()))?;
    match action {
        KernelAction::Restore => {
            let r = crate::kernel::restore_all(data_dir);
            if r.done.is_empty() && r.problems.is_empty() {
                println!("readpath kernel restore: nothing to put back");
            }
            for d in &r.done {
                println!("readpath kernel restore: put back {d}");
            }
            for p in &r.problems {
                eprintln!(
                    "readpath kernel restore: not put back: {}",
                    crate::output::format::printable(p, false)
                );
            }
            if !r.problems.is_empty() {
                anyhow::bail!(
                    "{} thing(s) not put back (listed above); the rest was",
                    r.problems.len()
                );
            }
            Ok(())
        }
        KernelAction::Trace { duration } => {
            // tracefs mounted first where it is not (unmounted at the end,
            // after the tracer's instance is gone).
            let _tracefs = crate::kernel::ensure_tracefs(data_dir)
                .map_err(|e| BadInput(format!("readpath kernel trace: {e}")))?;
            let t = crate::kernel::trace::Tracer::start(data_dir)
                .map_err(|e| BadInput(format!("readpath kernel trace: {e}")))?;
            let end = std::time::Instant::now() + duration;
            while std::time::Instant::now() < end && !crate::sys::stop_requested() {
                std::thread::sleep(Duration::from_millis(50));
            }
            let queues = t.finish();
            println!(
                "readpath kernel trace: the kernel's post-read workqueues over {:.1}s (workqueue tracepoints, tracefs instance of its own)",
                duration.as_secs_f64()
            );
            if queues.is_empty() {
                println!(
                    "  no item on {}: nothing read an encrypted or verity file cold meanwhile",
                    crate::kernel::trace::POST_READ_QUEUES.join(", ")
                );
            }
            let mut names: Vec<_> = queues.keys().cloned().collect();
            names.sort();
            for n in names {
                let q = &queues[&n];
                let us = |h: &hdrhistogram::Histogram<u64>, p: f64| {
                    crate::output::report::fio_us(h.value_at_quantile(p) as f64 / 1e3)
                };
                println!(
                    "  {n}: {} items; queue (usec) p50={} p99={} max={}; exec (usec) p50={} p99={}; ran on another CPU than queued: {:.0}%",
                    q.items,
                    us(&q.queue_ns, 0.5),
                    us(&q.queue_ns, 0.99),
                    crate::output::report::fio_us(q.queue_ns.max() as f64 / 1e3),
                    us(&q.exec_ns, 0.5),
                    us(&q.exec_ns, 0.99),
                    if q.items > 0 {
                        q.moved as f64 * 100.0 / q.items as f64
                    } else {
                        0.0
                    }
                );
            }
            Ok(())
        }
        KernelAction::Check { size, dir } => {
            let bytes = parse_size(&size)
                .ok()
                .filter(|&n| (4096..=256 << 20).contains(&n) && n % 4096 == 0)
                .ok_or_else(|| {
                    BadInput(format!(
                        "--size \"{size}\": allowed a multiple of 4K from 4K to 256M"
                    ))
                })?;
            // The filesystem checked: a scratch image, or the user's
            // directory and the block device under it.
            let (fs, mnt, device) = match &dir {
                None => {
                    let fs = crate::kernel::ScratchFs::create(data_dir, (bytes * 2).max(64 << 20))
                        .map_err(|e| BadInput(format!("readpath kernel check: {e}")))?;
                    let (mnt, image) = (fs.mnt.clone(), fs.image.clone());
                    (Some(fs), mnt, image)
                }
                Some(d) => {
                    if !d.is_dir() {
                        return Err(BadInput(format!(
                            "readpath kernel check: --dir {}: not a directory",
                            d.display()
                        ))
                        .into());
                    }
                    // readpath writes there as root: the data dir's trust rule.
                    crate::sys::trust::check_dir(d).map_err(|u| {
                        BadInput(format!("readpath kernel check: --dir: not trusted: {u}"))
                    })?;
                    let dev = crate::kernel::block_device_path(d).map_err(|e| {
                        BadInput(format!("readpath kernel check: --dir {}: {e}", d.display()))
                    })?;
                    (None, d.clone(), dev)
                }
            };
            let mut quiet = |_: u64, _: u64| {};
            let (ds, _) = Dataset::open_or_prepare(data_dir, bytes, b"", &mut quiet)?;
            let plain = std::fs::read(ds.path(crate::dataset::Variant::Plain))?;
            match &fs {
                Some(fs) => println!(
                    "readpath kernel check: {} of the dataset's plaintext through the kernel's fscrypt on an ext4 image (encrypt, 4K blocks) loop-mounted at {}",
                    crate::settings::format_size(bytes),
                    fs.mnt.display()
                ),
                None => println!(
                    "readpath kernel check: {} of the dataset's plaintext through the kernel's fscrypt in {}, the ciphertext read from {}",
                    crate::settings::format_size(bytes),
                    mnt.display(),
                    device.display()
                ),
            }
            let mut mismatch = Vec::new();
            for kind in [CipherKind::Aes256Xts, CipherKind::Adiantum] {
                match crate::kernel::check_contents(&mnt, &device, ds.master_key(), &plain, kind) {
                    Ok(c) => {
                        let units = c.bytes / 4096;
                        let verdict = if c.matched() { "MATCH" } else { "MISMATCH" };
                        println!(
                            "  fscrypt contents, {} (v2 policy, nonce {}, {} extent(s)): {} of {units} data units equal to readpath's; read back cold through the kernel: {}: {verdict}",
                            kind.name(),
                            c.nonce,
                            c.extents,
                            c.units_equal,
                            if c.read_back { "equal" } else { "DIFFERENT" }
                        );
                        let alg = match kind {
                            CipherKind::Adiantum => "adiantum(xchacha12,aes)",
                            _ => "xts(aes)",
                        };
                        let driver = crate::kernel::crypto_driver(alg).map_or_else(
                            || format!("{alg}: driver unknown (/proc/crypto)"),
                            |(d, p)| format!("the kernel's {alg} is {d} (priority {p})"),
                        );
                        println!(
                            "    read back cold: {} in {:.1} ms ({:.0} MiB/s); {driver}",
                            crate::settings::format_size(c.bytes),
                            c.read_back_s * 1e3,
                            c.bytes as f64 / (1 << 20) as f64 / c.read_back_s.max(1e-9)
                        );
                        if !c.matched() {
                            mismatch.push(format!(
                                "{}: first differing data unit {:?}, read back {}",
                                kind.name(),
                                c.first_mismatch,
                                if c.read_back { "equal" } else { "different" }
                            ));
                        }
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ENOPKG) => println!(
                        "  fscrypt contents, {}: not checked: this kernel lacks the cipher ({e})",
                        kind.name()
                    ),
                    Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                        return Err(BadInput(format!(
                            "readpath kernel check: {}: {e} (the filesystem has no encrypt feature: tune2fs -O encrypt, or leave --dir out for a scratch image)",
                            mnt.display()
                        ))
                        .into());
                    }
                    Err(e) => return Err(anyhow::anyhow!("{}: {e}", kind.name())),
                }
            }
            if crate::kernel::ext4_has_verity() {
                let want = ds.tree().file_digest();
                let got = crate::kernel::measure_verity(&mnt, &plain, b"")
                    .context("fs-verity digest through the kernel")?;
                let verdict = if got[..] == want[..] {
                    "MATCH"
                } else {
                    "MISMATCH"
                };
                println!(
                    "  fs-verity digest (FS_IOC_MEASURE_VERITY, sha256, 4K blocks, no salt): kernel {} readpath {}: {verdict}",
                    hex::encode(&got),
                    hex::encode(want)
                );
                if got[..] != want[..] {
                    mismatch.push("fs-verity digest differs".to_string());
                }
            } else {
                println!(
                    "  fs-verity digest: not checked: this kernel's ext4 has no fs-verity (/sys/fs/ext4/features/verity is missing: CONFIG_FS_VERITY is not set)"
                );
            }
            if let Some(fs) = fs {
                fs.remove().context("unmounting the scratch image")?;
            }
            if mismatch.is_empty() {
                Ok(())
            } else {
                Err(Mismatch(mismatch.join("; ")).into())
            }
        }
    }
}

fn digest(block_size: usize, salt: &str, files: &[PathBuf]) -> Result<()> {
    let salt =
        hex::decode(salt).map_err(|e| BadInput(format!("--salt \"{salt}\": not hex ({e})")))?;
    let params = MerkleParams::new(block_size, &salt).map_err(|e| BadInput(e.to_string()))?;
    let mut out = crate::output::file::stdout();
    for f in files {
        // A FIFO or `<(command)` is read through poll: a stop signal ends
        // the wait for its writer, as it ends the digest of a large file.
        let file = crate::output::file::open_input(f).map_err(|e| {
            BadInput(format!(
                "{}: {}",
                f.display(),
                crate::output::file::plain(&e)
            ))
        })?;
        if file.is_dir() {
            return Err(BadInput(format!("{}: is a directory, not a file", f.display())).into());
        }
        let d = digest_reader(std::io::BufReader::with_capacity(1 << 20, file), &params)
            .with_context(|| format!("{}", f.display()))?;
        // A file name is text from anywhere (`digest *`): printable.
        let name = crate::output::format::printable(&f.display().to_string(), false);
        writeln!(out, "{} {name}", format_digest(&d))?;
    }
    out.flush()?;
    Ok(())
}
