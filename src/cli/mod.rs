//! The command line's shape: every flag, subcommand and value parser
//! readpath accepts, as clap definitions, and nothing that acts on them.
//! [`Cli`] is what `main` parses; `commands::main_with_args`
//! dispatches it to one function per command. The argument groups several
//! commands share (settings, display, `--remote`) and the parsers of
//! bounded values are in `args.rs`.
//!
//! It sits below `commands`, which reads these types: nothing here imports
//! a command, so the definitions can be read (and `--help` checked) apart
//! from what runs.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

mod args;

pub use crate::settings::parse_duration;
pub use args::{ArgError, ExperimentArgs, Format, RemoteArgs, SettingsArgs, TraceArgs, TuiArgs};
use args::{
    at_duration, bench_duration, compare_duration, interval_duration, lanes_window, parse_fps,
    parse_size_px, parse_speed, run_duration, target_pair, tolerance_pct,
};

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
        /// A Perfetto trace.
        #[command(flatten)]
        trace: TraceArgs,
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
        /// Rounds, their length, warm-up and interval.
        #[command(flatten)]
        experiment: ExperimentArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Record every interval (all variants, switches marked) for `readpath replay`.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        /// A Perfetto trace (every variant in one file).
        #[command(flatten)]
        trace: TraceArgs,
        /// The same experiment on several machines at once, one column
        /// group each: `local` and --remote specs, comma-separated
        /// (e.g. local,ssh:server,adb:R58M); at most 8.
        #[arg(long, value_name = "local,ssh:HOST,adb:SERIAL")]
        hosts: Option<String>,
    },
    /// A preset's A/B at every point of a grid of one or two other
    /// settings (interleaved rounds, as compare): the change of one metric
    /// per point, its significance and the published sign, as a grid.
    Sweep {
        /// Settings (the preset's [compare] is the default --vary).
        #[command(flatten)]
        settings: SettingsArgs,
        /// The A/B at each point, e.g. workers.mode=unbound,bound.
        #[arg(long, value_name = "KEY=A,B")]
        vary: Option<String>,
        /// An axis of the grid, e.g. workload.cpus=1,2,4 (once or twice;
        /// values holding a comma are separated by `;`).
        #[arg(long, value_name = "KEY=V1,V2,...", required = true)]
        across: Vec<String>,
        /// The metric each cell shows (a name of `readpath compare
        /// --format json`'s metrics); default: the preset's published
        /// metric, else run_delay_ms_per_s.
        #[arg(long)]
        metric: Option<String>,
        /// Rounds, their length, warm-up and interval.
        #[command(flatten)]
        experiment: ExperimentArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Also write the report as JSON to FILE (for `readpath plot` and
        /// the explorer: `readpath replay FILE`).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Hold the model against the running kernel: both run the same
    /// workload, interleaved, on like-for-like conditions; per metric the
    /// two medians, the ratio model/kernel and a verdict (root).
    Validate {
        /// Settings (made like for like: the model reads the kernel's
        /// device; verity off where the kernel lacks it).
        #[command(flatten)]
        settings: SettingsArgs,
        /// Rounds (each runs the model and the kernel once), their length,
        /// warm-up and interval.
        #[command(flatten)]
        experiment: ExperimentArgs,
        /// A ratio model/kernel within 1 +- this/100 is "within" (1..=100).
        #[arg(long, default_value_t = crate::output::validate::DEFAULT_TOLERANCE_PCT, value_parser = tolerance_pct)]
        tolerance: f64,
        /// The two targets held against each other: `kernel,kernel` runs
        /// the kernel against itself (an A/A run, on the same adjusted
        /// settings), which says how far this machine's own noise moves
        /// each figure, so what a verdict at --tolerance can resolve here.
        #[arg(long, default_value = "model,kernel", value_parser = target_pair, value_name = "A,B")]
        pair: [String; 2],
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
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
        /// Where to write: an .svg or .png file, or (with --format csv or hlog) a .csv or .hlog file ("-": stdout).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// svg (charts), csv (the series) or hlog (the latency histograms as an HdrHistogram interval log).
        #[arg(long, value_enum, default_value_t = PlotFormat::Svg)]
        format: PlotFormat,
        /// Image size in pixels, WIDTHxHEIGHT (default 1200x900; 1920x1080
        /// with --slide).
        #[arg(long, value_parser = parse_size_px)]
        size: Option<(u32, u32)>,
        /// For a slide: text and lines twice a document's size (tick
        /// labels about 2% of the image's height, read from the back of a
        /// room), more than two charts in two columns, 1920x1080 unless
        /// --size says otherwise.
        #[arg(long)]
        slide: bool,
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
        /// Draw where each work item ran instead of the charts: the
        /// timeline's lanes (a lane per CPU and per reader) of one window,
        /// or two side by side, from a recording that carries spans
        /// (`run --record FILE --timeline`).
        #[arg(long, conflicts_with = "metric")]
        timeline: bool,
        /// With --timeline: where each window starts in the run, one time
        /// or two (e.g. 2.4s,7.4s). Default: the middle of the first
        /// settings phase and of the next under other settings.
        #[arg(long, value_delimiter = ',', value_parser = at_duration, requires = "timeline")]
        at: Vec<Duration>,
        /// With --timeline: each window's length, 1ms..=10s.
        #[arg(long, default_value = "200ms", value_parser = lanes_window, requires = "timeline")]
        window: Duration,
    },
    /// Measure what this machine can do.
    Bench {
        /// What to measure.
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// The kernel lab: real kernels under QEMU, reached with `--remote
    /// vm:KERNEL` (list them, fetch one).
    Lab {
        /// What to do.
        #[command(subcommand)]
        action: LabAction,
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
    /// The latency histograms as an HdrHistogram interval log (`.hlog`),
    /// for HistogramLogAnalyzer and the HdrHistogram libraries.
    Hlog,
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
    /// The running kernel's readpath lab switches (a kernel from `lab build
    /// --switches`): each one's value now, its value in 6.1 and what it
    /// does (exit 2 on a kernel without them). The kernel target's
    /// workers.* and workload.sleep settings flip them.
    Switches,
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

/// `readpath lab ...`.
#[derive(Debug, Subcommand)]
pub enum LabAction {
    /// The lab's kernels (in the data dir), what each holds on disk and
    /// when it last booted, and those `lab fetch` can get.
    Kernels,
    /// Remove lab kernels and everything the lab keeps for them (guest
    /// disk, initramfs, console log, measurements); never one a running
    /// guest boots.
    Remove {
        /// The kernels' names (`readpath lab kernels` lists them).
        #[arg(required_unless_present = "imports")]
        names: Vec<String>,
        /// Every kernel imported from a `vm:/path` bzImage (`img-HASH`).
        #[arg(long)]
        imports: bool,
    },
    /// Get a kernel into the lab: `debian-6.1` is Debian 12's cloud
    /// kernel package (the newest on the configured mirror), downloaded
    /// with apt-get and unpacked, not installed.
    Fetch {
        /// The kernel's name (`debian-6.1`).
        name: String,
    },
    /// Build a lab kernel from source (default: Debian's linux-source-6.1,
    /// downloaded with apt-get and unpacked in the data dir) with the lab's
    /// configuration (assets/lab/lab.config over tinyconfig, everything
    /// built in) and, with --revert, a seed patch reverted: the kernel
    /// before the seed; with --switches, readpath's lab patch
    /// (assets/lab/readpath-switches.patch): every seed a switch under
    /// /sys/module/readpath/parameters/, flipped while the kernel runs.
    /// Cached by source, patch, profile, configuration and compiler: a
    /// second build of the same kernel is instant.
    Build {
        /// The seed to revert: fsverity-2023, fscrypt-2018 or io_uring-2023.
        #[arg(long, value_name = "SEED", conflicts_with = "switches")]
        revert: Option<String>,
        /// Build the switchable kernel (`6.1-switches`): fs-verity's and
        /// fscrypt's read queues bound or unbound and WQ_HIGHPRI or not,
        /// fscrypt's max_active and io_uring's CQ-wait iowait, each read
        /// by the kernel at each queueing (defaults: what 6.1 does).
        #[arg(long)]
        switches: bool,
        /// The choices that decide placement, as on the machines the seeds
        /// came from: desktop (Debian's 6.1: voluntary preemption) or phone
        /// (Android GKI: full preemption). SCHED_MC and SCHED_SMT are on in
        /// both. A profile other than desktop is in the kernel's name
        /// (6.1-switches-phone).
        #[arg(long, value_name = "PROFILE", default_value = "desktop", value_parser = ["desktop", "phone"])]
        profile: String,
        /// A clean kernel tree to build instead of Debian's 6.1.
        #[arg(long, value_name = "DIR")]
        source: Option<PathBuf>,
        /// The kernel's name in the lab (default: 6.1, 6.1-revert-SEED or
        /// 6.1-switches, with -PROFILE for a profile other than desktop).
        #[arg(long)]
        name: Option<String>,
        /// make's jobs (default: one per CPU; 1-1024).
        #[arg(long, short = 'j', value_parser = clap::value_parser!(u16).range(1..=1024))]
        jobs: Option<u16>,
    },
    /// How much slower a lab guest is than this machine: `bench crypto` and
    /// a cold 4 KiB O_DIRECT read (the io_uring-qd1-iowait preset's p50)
    /// here and in the guest, side by side; the ratios are kept in the lab
    /// and shown wherever the guest's times are (under TCG every guest
    /// time is emulated).
    Bench {
        /// The guest: vm:KERNEL[:cpus=N][:mem=MIB][:cache=MODE][:accel=kvm|tcg][:aes=on|off][:queues=N].
        guest: String,
        /// CPU seconds per crypto measurement (10ms..=1h).
        #[arg(long, default_value = "500ms", value_parser = bench_duration)]
        seconds: Duration,
        /// Crypto rounds (median taken), 1-50.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
        rounds: u32,
        /// How long each cold read runs (e.g. 3s; 10ms..=1h).
        #[arg(long, default_value = "3s", value_parser = bench_duration)]
        read: Duration,
    },
    /// Boot a lab guest, run `readpath ARGS...` in it (its data dir on the
    /// lab disk), print what it printed and exit with its status; the
    /// guest's console (kernel messages, stderr) is in the lab dir.
    Run {
        /// The guest: vm:KERNEL[:cpus=N][:mem=MIB][:cache=MODE][:accel=kvm|tcg][:aes=on|off][:queues=N].
        guest: String,
        /// readpath's arguments there (after `--`), e.g. `-- kernel check`.
        #[arg(last = true, required = true)]
        args: Vec<String>,
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
