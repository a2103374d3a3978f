//! Recordings: a run's interval records (and the events and baselines they
//! carry) in a versioned JSON-lines file, so a run can be replayed in the
//! explorer with no workload running: a talk survives a machine that
//! misbehaves on stage.
//!
//! Line 1 is a [`Header`] (format name and version, what ran, on what
//! machine); every further line is `{"interval": IntervalRecord}`. The file
//! is written under a temporary name and renamed into place when the run
//! ends, so a recording is never seen half-written.

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::metrics::IntervalRecord;
use crate::settings::Settings;
use crate::sys::{Features, MachineInfo};

/// The `format` field of every recording.
pub const FORMAT: &str = "readpath-recording";
/// The recording format this readpath writes and reads.
pub const VERSION: u32 = 1;

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
}

#[derive(Serialize, Deserialize)]
struct Line {
    interval: IntervalRecord,
}

/// Why a recording could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
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
        "{path}: recording format version {found} is newer than this readpath reads (version {VERSION}); upgrade readpath to replay it"
    )]
    Newer {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u32,
    },
}

impl RecordingError {
    /// True when the file is the user's mistake (exit status 2).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, RecordingError::Io { .. })
    }
}

/// Writes a recording; [`Writer::finish`] moves it into place. Dropped
/// unfinished (an error on the way), it removes its temporary file.
pub struct Writer {
    out: BufWriter<std::fs::File>,
    tmp: PathBuf,
    path: PathBuf,
    finished: bool,
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl Writer {
    /// Creates `path`'s temporary file and writes the header.
    pub fn create(path: &Path, header: &Header) -> Result<Writer, RecordingError> {
        let io = |source| RecordingError::Io {
            path: path.to_path_buf(),
            source,
        };
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .map_or("recording".into(), |n| n.to_string_lossy().into_owned());
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let f = std::fs::File::create(&tmp).map_err(io)?;
        let mut w = Writer {
            out: BufWriter::new(f),
            tmp,
            path: path.to_path_buf(),
            finished: false,
        };
        w.line(header)?;
        Ok(w)
    }

    fn line<T: Serialize>(&mut self, v: &T) -> Result<(), RecordingError> {
        let io = |source| RecordingError::Io {
            path: self.path.clone(),
            source,
        };
        serde_json::to_writer(&mut self.out, v).map_err(|e| io(e.into()))?;
        self.out.write_all(b"\n").map_err(io)
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
    pub fn finish(mut self) -> Result<PathBuf, RecordingError> {
        let io = |source| RecordingError::Io {
            path: self.path.clone(),
            source,
        };
        self.out.flush().map_err(io)?;
        self.out.get_ref().sync_all().map_err(io)?;
        std::fs::rename(&self.tmp, &self.path).map_err(io)?;
        self.finished = true;
        Ok(self.path.clone())
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

/// Reads a recording; a newer format is refused by name.
pub fn read(path: &Path) -> Result<Recording, RecordingError> {
    let f = std::fs::File::open(path).map_err(|source| RecordingError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |line: usize, message: String| RecordingError::Bad {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut lines = std::io::BufReader::new(f).lines();
    let first = lines
        .next()
        .transpose()
        .map_err(|source| RecordingError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .ok_or_else(|| bad(1, "empty file: not a readpath recording".into()))?;
    // Look at format and version before the rest, which a newer one may change.
    let probe: serde_json::Value = serde_json::from_str(&first)
        .map_err(|e| bad(1, format!("not a readpath recording ({e})")))?;
    if probe.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(bad(
            1,
            format!("not a readpath recording (no \"format\": \"{FORMAT}\")"),
        ));
    }
    let version = probe.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
    if version > VERSION as u64 {
        return Err(RecordingError::Newer {
            path: path.to_path_buf(),
            found: version as u32,
        });
    }
    let header: Header =
        serde_json::from_value(probe).map_err(|e| bad(1, format!("bad header: {e}")))?;
    let mut records = Vec::new();
    for (i, l) in lines.enumerate() {
        let l = l.map_err(|source| RecordingError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if l.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(&l).map_err(|e| bad(i + 2, e.to_string()))?;
        records.push(line.interval);
    }
    Ok(Recording { header, records })
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
