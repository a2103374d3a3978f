//! Recordings: a run's interval records (and the events and baselines they
//! carry) in a versioned JSON-lines file, so a run can be replayed in the
//! explorer with no workload running: a talk survives a machine that
//! misbehaves on stage.
//!
//! Line 1 is a [`Header`] (format name and version, what ran, on what
//! machine); every further line is `{"interval": IntervalRecord}`, its
//! latency histograms in HdrHistogram's compressed encoding (format
//! version 2; version 1 wrote them as value/count pairs and still reads).
//! The lines are gzip-compressed unless the file name ends in `.jsonl` or
//! the recording goes to standard output ([`compressed`]); reading looks at
//! the bytes, not the name. The file is written under a temporary name and
//! renamed into place when the run ends, so a recording is never seen
//! half-written ([`crate::files`]). Reading one trusts nothing: lines and
//! record counts are capped and every number is range-checked, so a
//! damaged or hostile file is refused by line.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::metrics::IntervalRecord;
use crate::settings::Settings;
use crate::sys::{Features, MachineInfo};

/// The `format` field of every recording.
pub const FORMAT: &str = "readpath-recording";
/// The recording format this readpath writes (it reads every version up
/// to it): 2 writes histograms in HdrHistogram's compressed encoding.
pub const VERSION: u32 = 2;

/// The first line of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`VERSION`] when written by this readpath.
    pub version: u32,
    /// Which command recorded (`tui`, `run`).
    pub command: String,
    /// Seconds since the Unix epoch when the recording started.
    pub started_unix_s: u64,
    /// The preset the run started from, if any.
    pub preset: Option<String>,
    /// Settings at the start.
    pub settings: Settings,
    /// Settings as they ran at the start (after fallbacks).
    pub effective_settings: Settings,
    /// Kernel and CPU features.
    pub features: Features,
    /// The machine.
    pub machine: MachineInfo,
    /// The demo played, when `readpath demo` recorded: a replay shows its
    /// headline numbers in presentation mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demo: Option<DemoHeader>,
}

/// What a recording keeps of the demo it recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DemoHeader {
    /// The demo's name.
    pub name: String,
    /// Its headline metrics, by their script names (`run_delay`).
    #[serde(default)]
    pub headline: Vec<String>,
}

impl DemoHeader {
    /// What a recording keeps of `demo`.
    pub fn of(demo: &crate::scenario::demo::Demo) -> DemoHeader {
        DemoHeader {
            name: demo.name.clone(),
            headline: demo.headline.iter().map(|h| h.name().to_string()).collect(),
        }
    }

    /// The headline metrics (checked by [`Header::check`]).
    pub fn headline(&self) -> Vec<crate::scenario::demo::Headline> {
        self.headline
            .iter()
            .filter_map(|n| crate::scenario::demo::Headline::parse(n))
            .collect()
    }
}

#[derive(Serialize, Deserialize)]
struct Line {
    interval: IntervalRecord,
}

/// Why a recording could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The input could not be opened or read (missing, unreadable, a
    /// directory): the user's input, exit status 2.
    #[error("{path}: {message}")]
    Input {
        /// The file.
        path: PathBuf,
        /// Why, in words.
        message: String,
    },
    /// A stop signal ended the wait for the input's data (a FIFO's
    /// writer): exit status 1.
    #[error("{path}: {message}")]
    Stopped {
        /// The file.
        path: PathBuf,
        /// Which signal, while waiting for what.
        message: String,
    },
    /// The output was refused or could not be written.
    #[error(transparent)]
    Output(#[from] crate::files::OutputError),
    /// Not a readpath recording, or a damaged line.
    #[error("{path}:{line}: {message}")]
    Bad {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Written by a newer readpath.
    #[error(
        "{path}: version {}",
        crate::files::newer_version("recording format", found, VERSION)
    )]
    Newer {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u64,
    },
}

impl RecordingError {
    /// True when the file is the user's mistake (exit status 2): everything
    /// but a failure to write the output and a stop signal.
    pub fn is_bad_input(&self) -> bool {
        match self {
            RecordingError::Output(e) => e.is_bad_input(),
            RecordingError::Stopped { .. } => false,
            _ => true,
        }
    }
}

/// Writes a recording; [`Writer::finish`] moves it into place (see
/// [`crate::files`]). Dropped unfinished (an error on the way), it leaves
/// what was at the path before.
pub struct Writer {
    out: Sink,
}

/// Where a recording's lines go: straight to the output, or through gzip.
enum Sink {
    Plain(crate::files::OutputFile),
    Gzip(flate2::write::GzEncoder<crate::files::OutputFile>),
}

impl Sink {
    fn file(&self) -> &crate::files::OutputFile {
        match self {
            Sink::Plain(f) => f,
            Sink::Gzip(g) => g.get_ref(),
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::Plain(f) => f,
            Sink::Gzip(g) => g,
        }
    }
}

/// Whether a recording written to `given` is gzip-compressed: always, but
/// for standard output and a name ending in `.jsonl` (plain JSON lines,
/// for `jq` and `grep`).
pub fn compressed(given: &Path) -> bool {
    given != Path::new("-") && !given.to_string_lossy().ends_with(".jsonl")
}

impl Writer {
    /// Opens the checked output `path` and writes the header.
    pub fn create(
        path: &crate::files::OutputPath,
        header: &Header,
    ) -> Result<Writer, RecordingError> {
        Writer::start(path.create()?, header)
    }

    /// Writes the header to `out`, an output opened before the workload
    /// started (the header says what runs, so it comes once it does).
    pub fn start(out: crate::files::OutputFile, header: &Header) -> Result<Writer, RecordingError> {
        let out = if compressed(out.given()) {
            Sink::Gzip(flate2::write::GzEncoder::new(
                out,
                flate2::Compression::default(),
            ))
        } else {
            Sink::Plain(out)
        };
        let mut w = Writer { out };
        w.line(header)?;
        Ok(w)
    }

    fn line<T: Serialize>(&mut self, v: &T) -> Result<(), RecordingError> {
        let out = self.out.writer();
        let r = serde_json::to_writer(&mut *out, v)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"));
        r.map_err(|e| self.out.file().error(e))?;
        // A plain recording streamed to a pipe or terminal (`--record -`
        // into `jq`) is read as it comes: one flush per line (per
        // interval, never per I/O).
        if let Sink::Plain(f) = &mut self.out
            && f.is_stream()
        {
            f.flush().map_err(|e| f.error(e))?;
        }
        Ok(())
    }

    /// Appends one interval.
    pub fn record(&mut self, rec: &IntervalRecord) -> Result<(), RecordingError> {
        #[derive(Serialize)]
        struct L<'a> {
            interval: &'a IntervalRecord,
        }
        self.line(&L { interval: rec })
    }

    /// Flushes, syncs and renames the file into place.
    pub fn finish(self) -> Result<PathBuf, RecordingError> {
        let file = match self.out {
            Sink::Plain(f) => f,
            Sink::Gzip(g) => {
                // finish() writes gzip's trailer; on an error the output is
                // dropped unfinished (its temporary file removed).
                let mut g = g;
                if let Err(e) = g.try_finish() {
                    return Err(g.get_ref().error(e).into());
                }
                g.finish().expect("finished above")
            }
        };
        Ok(file.finish()?)
    }
}

/// A recording read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// Its header.
    pub header: Header,
    /// Its intervals, in order.
    pub records: Vec<IntervalRecord>,
}

/// Longest line a recording may have: an interval record is a few KiB,
/// tens of KiB with its histograms, and up to ~10 MB with a timeline's
/// spans ([`crate::metrics::SPANS_PER_INTERVAL`] rows of at most ~75
/// bytes; ~35 bytes each and ~10,000 an interval at the default preset).
pub const MAX_LINE_BYTES: usize = 16 << 20;
/// Most intervals a recording may hold: 30 days at the shortest interval
/// is far beyond any replay; this bounds what reading one can allocate.
pub const MAX_RECORDS: usize = 2_000_000;

/// Reads one line of at most [`MAX_LINE_BYTES`] into `buf` (cleared);
/// false at end of file.
pub(crate) fn read_line_capped(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
) -> Result<bool, Result<std::io::Error, ()>> {
    buf.clear();
    loop {
        let chunk = r.fill_buf().map_err(Ok)?;
        if chunk.is_empty() {
            return Ok(!buf.is_empty());
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if buf.len() + take > MAX_LINE_BYTES + 1 {
            return Err(Err(()));
        }
        buf.extend_from_slice(&chunk[..take]);
        r.consume(take);
        if done {
            return Ok(true);
        }
    }
}

/// Reads a recording; a newer format is refused by name, and every number
/// in it is range-checked (see [`IntervalRecord::check`]), so a damaged or
/// hostile file is an error naming the line, never a panic or a hang.
pub fn read(path: &Path) -> Result<Recording, RecordingError> {
    let input = |e: &std::io::Error| {
        let (path, message) = (path.to_path_buf(), crate::files::plain(e));
        if crate::files::is_stopped(e) {
            RecordingError::Stopped { path, message }
        } else {
            RecordingError::Input { path, message }
        }
    };
    // Not a regular file (a FIFO, `<(command)`): read through poll, so a
    // writer that never comes or never ends leaves readpath interruptible.
    let f = crate::files::open_input(path).map_err(|e| input(&e))?;
    if f.is_dir() {
        return Err(RecordingError::Input {
            path: path.to_path_buf(),
            message: "is a directory, not a recording".into(),
        });
    }
    let bad = |line: usize, message: String| RecordingError::Bad {
        path: path.to_path_buf(),
        line,
        message,
    };
    // gzip or plain, by the first two bytes (gzip's magic number).
    let mut raw = std::io::BufReader::with_capacity(64 * 1024, f);
    let gzip = raw
        .fill_buf()
        .map_err(|e| input(&e))?
        .starts_with(&[0x1f, 0x8b]);
    let mut r: Box<dyn BufRead> = if gzip {
        Box::new(std::io::BufReader::with_capacity(
            64 * 1024,
            flate2::bufread::MultiGzDecoder::new(raw),
        ))
    } else {
        Box::new(raw)
    };
    let mut buf = Vec::new();
    let mut n = 0usize;
    // The next non-empty line as text, or None at the end.
    let mut next = |buf: &mut Vec<u8>| -> Result<Option<usize>, RecordingError> {
        loop {
            n += 1;
            match read_line_capped(&mut r, buf) {
                Ok(false) => return Ok(None),
                Ok(true) => {}
                Err(Ok(e)) if gzip && !crate::files::is_stopped(&e) => {
                    return Err(bad(n, format!("a damaged gzip stream ({e})")));
                }
                Err(Ok(e)) => return Err(input(&e)),
                Err(Err(())) => {
                    return Err(bad(
                        n,
                        format!(
                            "line longer than {} KiB: not a readpath recording",
                            MAX_LINE_BYTES / 1024
                        ),
                    ));
                }
            }
            if buf.iter().any(|b| !b.is_ascii_whitespace()) {
                return Ok(Some(n));
            }
            if n == 1 {
                return Err(bad(1, "empty first line: not a readpath recording".into()));
            }
        }
    };
    let Some(first) = next(&mut buf)? else {
        return Err(bad(1, "empty file: not a readpath recording".into()));
    };
    // Look at format and version before the rest, which a newer one may change.
    let probe: serde_json::Value = serde_json::from_slice(&buf)
        .map_err(|e| bad(first, format!("not a readpath recording ({e})")))?;
    if probe.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(bad(
            first,
            format!("not a readpath recording (no \"format\": \"{FORMAT}\")"),
        ));
    }
    let version = probe.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
    if version > VERSION as u64 {
        return Err(RecordingError::Newer {
            path: path.to_path_buf(),
            found: version,
        });
    }
    let header: Header =
        serde_json::from_value(probe).map_err(|e| bad(first, format!("bad header: {e}")))?;
    header.check().map_err(|e| bad(first, e.to_string()))?;
    let mut records = Vec::new();
    while let Some(at) = next(&mut buf)? {
        if records.len() >= MAX_RECORDS {
            return Err(bad(
                at,
                format!("more than {MAX_RECORDS} intervals: not a recording readpath wrote"),
            ));
        }
        let line: Line = serde_json::from_slice(&buf).map_err(|e| bad(at, e.to_string()))?;
        line.interval.check().map_err(|e| bad(at, e.to_string()))?;
        records.push(line.interval);
    }
    Ok(Recording { header, records })
}

/// Why a recording header was refused: the field, its value and what is
/// allowed.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// No `"format": "readpath-recording"`.
    #[error("not a readpath recording header (no \"format\": \"{FORMAT}\")")]
    NotAHeader,
    /// Written by a newer readpath.
    #[error(
        "recording format version {found} is newer than this readpath's ({VERSION}): upgrade readpath here"
    )]
    Newer {
        /// The version found.
        found: u64,
    },
    /// Not a header's JSON.
    #[error("bad header: {0}")]
    Json(#[source] serde_json::Error),
    /// Its settings or effective settings are invalid.
    #[error("header {field}: {source}")]
    Settings {
        /// `settings` or `effective_settings`.
        field: &'static str,
        /// Why.
        source: crate::settings::SettingsError,
    },
    /// A text longer than 4096 bytes.
    #[error("header {field}: longer than 4096 bytes")]
    TooLong {
        /// The field (`machine.hostname`).
        field: &'static str,
    },
    /// More demo headline metrics than a demo has.
    #[error(
        "header demo.headline: {count} metrics; at most {}",
        crate::scenario::demo::Headline::MAX
    )]
    Headlines {
        /// How many.
        count: usize,
    },
    /// A demo headline metric that is none.
    #[error(
        "header demo.headline: {:?} is not a metric; allowed: {}",
        crate::output::format::printable(name, false),
        crate::scenario::demo::Headline::ALL.map(|h| h.name()).join(", ")
    )]
    NotAMetric {
        /// The name as written.
        name: String,
    },
    /// More CPUs than Linux numbers.
    #[error(
        "header machine.cpus = {cpus} is out of range: allowed 0..={}",
        crate::settings::MAX_CPU_NUMBER + 1
    )]
    Cpus {
        /// The count.
        cpus: usize,
    },
}

/// A header line already parsed as JSON (from a file or a remote agent):
/// the format and version checked first, then every field range-checked.
pub fn header_from(v: serde_json::Value) -> Result<Header, HeaderError> {
    if v.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(HeaderError::NotAHeader);
    }
    let version = v.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
    if version > VERSION as u64 {
        return Err(HeaderError::Newer { found: version });
    }
    let header: Header = serde_json::from_value(v).map_err(HeaderError::Json)?;
    header.check()?;
    Ok(header)
}

/// Range-checks one interval record (from a file or a remote agent).
pub fn check_record(r: &IntervalRecord) -> Result<(), crate::metrics::check::RecordError> {
    r.check()
}

impl Header {
    /// The header of a recording of `w` (the local engine or a target's)
    /// made by `command`, starting now.
    pub fn of(
        command: &str,
        w: &dyn crate::engine::workload::Workload,
        preset: Option<String>,
    ) -> Header {
        Header {
            format: FORMAT.into(),
            version: VERSION,
            command: command.into(),
            started_unix_s: unix_now(),
            preset,
            settings: w.settings().clone(),
            effective_settings: w.effective(),
            features: w.features().clone(),
            machine: w.machine(),
            demo: None,
        }
    }

    /// Range-checks what replay and plot use from the header.
    pub fn check(&self) -> Result<(), HeaderError> {
        for (field, s) in [
            ("settings", &self.settings),
            ("effective_settings", &self.effective_settings),
        ] {
            s.validate(crate::settings::MAX_CPU_NUMBER + 1)
                .map_err(|source| HeaderError::Settings { field, source })?;
        }
        for (name, text) in [
            ("command", &self.command),
            ("machine.hostname", &self.machine.hostname),
            ("machine.kernel", &self.machine.kernel),
            ("machine.cpu_model", &self.machine.cpu_model),
        ] {
            if text.len() > 4096 {
                return Err(HeaderError::TooLong { field: name });
            }
        }
        if let Some(p) = &self.preset
            && p.len() > 4096
        {
            return Err(HeaderError::TooLong { field: "preset" });
        }
        if let Some(d) = &self.demo {
            if d.name.len() > 4096 {
                return Err(HeaderError::TooLong { field: "demo.name" });
            }
            use crate::scenario::demo::Headline;
            if d.headline.len() > Headline::MAX {
                return Err(HeaderError::Headlines {
                    count: d.headline.len(),
                });
            }
            for n in &d.headline {
                if Headline::parse(n).is_none() {
                    return Err(HeaderError::NotAMetric { name: n.clone() });
                }
            }
        }
        if self.machine.cpus > crate::settings::MAX_CPU_NUMBER + 1 {
            return Err(HeaderError::Cpus {
                cpus: self.machine.cpus,
            });
        }
        Ok(())
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The recording's latency histograms as an HdrHistogram interval log
/// (`.hlog`, log format 1.3: what HistogramLogAnalyzer, HistogramLogProcessor
/// and every HdrHistogram library read): per interval, the end-to-end
/// latency untagged and the queue wait tagged `queue_wait`, in ns, the
/// maximum column in ms. Timestamps are seconds since the recording
/// started (its `StartTime`).
pub fn interval_log(rec: &Recording) -> String {
    use hdrhistogram::serialization::V2DeflateSerializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
    let start = std::time::UNIX_EPOCH + std::time::Duration::from_secs(rec.header.started_unix_s);
    let mut head = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    IntervalLogWriterBuilder::new()
        .add_comment(&format!(
            "Written by readpath {} from a recording of `{}`{}: end-to-end read latency \
             (untagged) and queue wait (Tag=queue_wait), ns",
            env!("CARGO_PKG_VERSION"),
            crate::output::format::printable(&rec.header.command, false),
            rec.header
                .preset
                .as_deref()
                .map(|p| format!(", preset {}", crate::output::format::printable(p, false)))
                .unwrap_or_default(),
        ))
        .add_comment("[Histogram log format version 1.3]")
        .with_start_time(start)
        .with_max_value_divisor(1e6)
        .begin_log_with(&mut head, &mut ser)
        .expect("writing into memory cannot fail");
    head.extend_from_slice(
        b"\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
    );
    let mut body = Vec::new();
    {
        let mut w = IntervalLogWriterBuilder::new()
            .with_max_value_divisor(1e6)
            .begin_log_with(&mut body, &mut ser)
            .expect("writing into memory cannot fail");
        let secs = |s: f64| std::time::Duration::from_secs_f64(s.max(0.0));
        for r in &rec.records {
            let from = secs(r.t_s - r.interval_s);
            for (hist, tag) in [
                (&r.latency_hist, None),
                (&r.queue_hist, Tag::new("queue_wait")),
            ] {
                let mut h = crate::metrics::empty_hist();
                hist.add_to(&mut h);
                w.write_histogram(&h, from, secs(r.interval_s), tag)
                    .expect("writing into memory cannot fail");
            }
        }
    }
    // The lines the library wrote after our own are this file's: the
    // MaxValueDivisor comment is repeated by the second writer.
    let mut out = String::from_utf8(head).expect("ASCII");
    let body = String::from_utf8(body).expect("ASCII");
    out.extend(
        body.lines()
            .filter(|l| !l.starts_with("#[MaxValueDivisor"))
            .map(|l| format!("{l}\n")),
    );
    out
}
