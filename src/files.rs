//! Output files that never damage what they are pointed at, and inputs
//! read with a cap that a stop signal always ends.
//!
//! readpath's users run it as root (to pin threads and raise priorities), so
//! an output path is trusted with nothing: `--record /dev/null` must not
//! replace the machine's /dev/null, a symlink is written through (not
//! replaced), and an output that is one of the run's inputs is refused
//! before anything is written. Every output of every command (recordings,
//! interval logs, plots, CSV, saved presets) goes through [`OutputPath`]:
//!
//! - a new file, or an existing regular file: written under a temporary
//!   name in the same directory, synced and renamed into place, so a
//!   reader never sees half a file and a failure keeps the old one;
//! - a FIFO (or pipe), a terminal, `/dev/null`: written in place, streamed;
//! - anything else (a directory, a block or other character device, a
//!   socket): refused with a message saying why, exit status 2.
//!
//! Symlinks in the last component are followed to the file they name
//! (so the link stays a link); the temporary files a killed process left
//! beside an output are removed the next time that output is written.
//!
//! Nothing here blocks where a stop signal (SIGINT, SIGTERM, SIGHUP,
//! SIGQUIT: [`crate::sys::stop_requested`]) cannot end it: a FIFO output is
//! opened non-blocking, and while no process reads it readpath says so
//! ("waiting for a reader on FIFO ...; Ctrl-C to stop") and polls; writes
//! to a FIFO, a pipe or a terminal (stdout included) wait in `poll(2)`, and
//! a reader that stops reading is given up [`STOP_GRACE`] after a stop
//! signal. Inputs that are not regular files (a FIFO, a terminal,
//! `<(command)`) are read the same way ([`open_input`]): readpath waits for
//! their data, says so after a second, and a stop signal ends the wait.
//!
//! Inputs are read with caps, and every read of a file from outside goes
//! through here: presets, demos, recordings, sweep reports and `digest`'s
//! files through [`open_input`] (streams allowed) and [`read_capped`];
//! kernel images and a kernel's modules through [`read_file`] (a regular
//! file only, a cap per kind, no link followed where readpath found the
//! file). No input is read blocking: descriptors stay non-blocking and
//! wait in `poll(2)`, so a stop signal ends any read (the handlers restart
//! system calls, `SA_RESTART`: a blocking read would never see it), and a
//! file of a kernel pseudo-filesystem (`/proc/kmsg`, `/proc/self/pagemap`)
//! is refused before its first byte is read.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::sys::{Ready, errno, oflag, wait_ready};

/// How long a stream output (a FIFO, a pipe, a terminal) whose reader is
/// not reading is still waited for once a stop signal arrived: the records
/// left are written if the reader takes them, and readpath ends anyway.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// How often a wait (for a FIFO's reader, for room in a pipe, for input)
/// looks at the stop flag, in milliseconds.
const POLL_MS: i32 = 100;

/// A stop signal ended a wait (for a FIFO's reader, for input, for a
/// reader that stopped reading): not the user's input, exit status 1.
#[derive(Debug, thiserror::Error)]
#[error("stopped by {signal} {during}")]
pub struct Stopped {
    /// The signal's name (`SIGTERM`).
    pub signal: &'static str,
    /// What was being done ("while waiting for a reader on the FIFO").
    pub during: String,
}

impl Stopped {
    /// Stopped by the stop signal received, `during` what.
    pub fn now(during: String) -> Stopped {
        Stopped {
            signal: crate::sys::signal_name(crate::sys::stop_signal()),
            during,
        }
    }

    /// As an I/O error (its message is this one's). Not of kind
    /// `Interrupted`, which `write_all`, `read_to_end` and `BufWriter`
    /// retry forever.
    pub fn into_io(self) -> std::io::Error {
        std::io::Error::other(self)
    }
}

/// Writes one line to stderr, ignoring a closed stderr.
fn tell(msg: &str) {
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// A stream output (stdout, a FIFO, a terminal, `/dev/null`) written so
/// that a stop signal always ends a write: a non-blocking descriptor (a
/// FIFO readpath opened) waits for room in `poll(2)` on EAGAIN; a
/// blocking one (stdout, shared with the shell: its flags are not
/// changed) is polled for room before each write of at most `PIPE_BUF`
/// bytes, which a pipe with room takes without blocking. Once a stop
/// signal arrived, a reader that does not make room within
/// [`STOP_GRACE`] is given up (an error naming the output).
struct Stream {
    /// Keeps the descriptor open; `None` for stdout (fd 1, not closed here).
    _file: Option<File>,
    fd: RawFd,
    nonblocking: bool,
    /// A regular file (stdout redirected to one): written plainly.
    regular: bool,
    /// When a stop signal was first seen while waiting for room.
    stop_seen: Option<Instant>,
}

impl Stream {
    fn new(file: Option<File>, nonblocking: bool) -> Stream {
        let fd = file
            .as_ref()
            .map_or(crate::sys::STDOUT_FD, |f| f.as_raw_fd());
        let regular = crate::sys::is_regular_fd(fd);
        Stream {
            _file: file,
            fd,
            nonblocking,
            regular,
            stop_seen: None,
        }
    }

    /// Waits for room to write, ending with an error [`STOP_GRACE`] after
    /// a stop signal.
    fn wait_room(&mut self) -> std::io::Result<()> {
        loop {
            if wait_ready(self.fd, Ready::Write, POLL_MS)? {
                return Ok(());
            }
            if crate::sys::stop_requested() {
                let since = *self.stop_seen.get_or_insert_with(Instant::now);
                if since.elapsed() >= STOP_GRACE {
                    return Err(Stopped::now(format!(
                        "while its reader was not reading (given up after {} s)",
                        STOP_GRACE.as_secs()
                    ))
                    .into_io());
                }
            }
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let len = if self.regular || self.nonblocking {
                buf.len()
            } else {
                self.wait_room()?;
                buf.len().min(crate::sys::PIPE_BUF)
            };
            // `fd` is open: owned by `file`, or stdout.
            let e = match crate::sys::write_fd(self.fd, &buf[..len]) {
                Ok(n) => return Ok(n),
                Err(e) => e,
            };
            match e.raw_os_error() {
                Some(errno::EINTR) => {}
                Some(errno::EAGAIN) => self.wait_room()?,
                _ => return Err(e),
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Standard output as readpath writes it: a stop signal ends a write that
/// waits for a reader (a full pipe, a stopped terminal) instead of hanging.
/// Text for people goes through [`crate::sys::printable`] first
/// (the caller's job).
pub fn stdout() -> impl Write {
    let _ = std::io::stdout().flush();
    BufWriter::with_capacity(64 * 1024, Stream::new(None, false))
}

/// Why an output was refused or could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The path is not something readpath may write to (exit status 2).
    #[error("{what} {path}: {why}")]
    Refused {
        /// The flag or setting that named it (`--record`).
        what: String,
        /// The path as given.
        path: PathBuf,
        /// Why, and what to do.
        why: String,
    },
    /// Writing failed (disk full, I/O error).
    #[error("{what} {path}: {err}")]
    Io {
        /// The flag that named it.
        what: String,
        /// The path as given.
        path: PathBuf,
        /// The error, printed in this message (not as a separate cause).
        err: std::io::Error,
    },
    /// A stop signal ended the wait for a FIFO's reader (exit status 1).
    #[error("{what} {path}: {stopped}")]
    Stopped {
        /// The flag that named it.
        what: String,
        /// The path as given.
        path: PathBuf,
        /// Which signal, while doing what.
        stopped: Stopped,
    },
}

impl OutputError {
    /// True when the output was refused (the user's input: exit status 2).
    pub fn is_bad_input(&self) -> bool {
        matches!(self, OutputError::Refused { .. })
    }
}

/// How an output is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A new or regular file: temporary file, then rename.
    Atomic,
    /// A FIFO, terminal or the null device: opened and written in place.
    InPlace,
    /// `-`: the process's standard output.
    Stdout,
}

/// A checked output: where it goes and how it is written.
#[derive(Debug, Clone)]
pub struct OutputPath {
    what: String,
    given: PathBuf,
    target: PathBuf,
    mode: Mode,
    /// The permissions of the file being replaced, kept on the new one.
    keep_mode: Option<u32>,
}

/// Most symlinks followed before giving up (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// Follows symlinks in the last component of `p` (not in its directories,
/// which the kernel resolves as usual) to the path a write would create or
/// open. A dangling link resolves to the path it names. A link the kernel
/// follows but whose text names no path (`/dev/stdout` on a pipe is
/// `/proc/self/fd/1` -> `pipe:[N]`) resolves to itself: opening it opens
/// what it stands for.
fn follow_links(p: &Path) -> std::io::Result<PathBuf> {
    let mut cur = p.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&cur)?;
                let next = if to.is_absolute() {
                    to
                } else {
                    cur.parent().unwrap_or(Path::new(".")).join(to)
                };
                if std::fs::symlink_metadata(&next).is_err() && std::fs::metadata(&cur).is_ok() {
                    return Ok(cur);
                }
                cur = next;
            }
            Ok(_) => return Ok(cur),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(cur),
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::from_raw_os_error(errno::ELOOP))
}

/// The device (major, minor) of a character device.
fn dev_numbers(m: &Metadata) -> (u32, u32) {
    let r = m.rdev();
    crate::sys::dev_numbers(r)
}

/// Character devices an output may stream to: the null device and
/// terminals (so `--record /dev/null` and `--out /dev/tty` do what a shell
/// redirect would).
fn writable_char_device(m: &Metadata) -> bool {
    match dev_numbers(m) {
        (1, 3) => true,              // /dev/null
        (4, _) | (5, 0..=1) => true, // ttyN, /dev/tty, /dev/console
        (136..=143, _) => true,      // pseudo-terminals
        _ => false,
    }
}

/// The identity of an existing file (device, inode).
fn identity(p: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// True when `a` and `b` are the same existing file, however they are named
/// (symlinks, hard links, `..`).
pub fn same_file(a: &Path, b: &Path) -> bool {
    matches!((identity(a), identity(b)), (Some(x), Some(y)) if x == y)
}

impl OutputPath {
    /// Checks an output before anything runs. `what` names it in messages
    /// (`--record`); `inputs` are the files the command reads, which the
    /// output must not be.
    pub fn check(what: &str, path: &Path, inputs: &[&Path]) -> Result<OutputPath, OutputError> {
        let refuse = |why: String| OutputError::Refused {
            what: what.to_string(),
            path: path.to_path_buf(),
            why,
        };
        if path.as_os_str() == "-" {
            return Ok(OutputPath {
                what: what.into(),
                given: path.into(),
                target: path.into(),
                mode: Mode::Stdout,
                keep_mode: None,
            });
        }
        if path.as_os_str().is_empty() {
            return Err(refuse("an empty path: give a file name".into()));
        }
        let target = follow_links(path).map_err(|e| refuse(format!("cannot follow it: {e}")))?;
        for input in inputs {
            if same_file(&target, input) {
                return Err(refuse(format!(
                    "is the same file as the input {}: writing it would destroy what is being read; choose another name",
                    input.display()
                )));
            }
        }
        let writable_dir = |dir: &Path| {
            if crate::sys::can_write(dir, true) {
                Ok(())
            } else {
                Err(refuse(format!(
                    "directory {} is not writable by this user",
                    dir.display()
                )))
            }
        };
        let (mode, keep_mode) = match std::fs::metadata(&target) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let dir = parent_of(&target);
                match std::fs::metadata(dir) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => {
                        return Err(refuse(format!("{} is not a directory", dir.display())));
                    }
                    Err(_) => {
                        return Err(refuse(format!(
                            "directory {} does not exist",
                            dir.display()
                        )));
                    }
                }
                writable_dir(dir)?;
                (Mode::Atomic, None)
            }
            Err(e) => return Err(refuse(plain(&e))),
            Ok(m) => {
                let ft = m.file_type();
                if ft.is_file() {
                    if !crate::sys::can_write(&target, false) {
                        return Err(refuse("is not writable by this user".into()));
                    }
                    writable_dir(parent_of(&target))?;
                    (Mode::Atomic, Some(m.permissions().mode() & 0o7777))
                } else if ft.is_dir() {
                    return Err(refuse("is a directory: give a file name".into()));
                } else if ft.is_fifo() || (ft.is_char_device() && writable_char_device(&m)) {
                    if !crate::sys::can_write(&target, false) {
                        return Err(refuse("is not writable by this user".into()));
                    }
                    (Mode::InPlace, None)
                } else {
                    let kind = if ft.is_block_device() {
                        "a block device".to_string()
                    } else if ft.is_char_device() {
                        let (a, b) = dev_numbers(&m);
                        format!("a character device ({a}:{b})")
                    } else if ft.is_socket() {
                        "a socket".to_string()
                    } else {
                        "not a regular file".to_string()
                    };
                    return Err(refuse(format!(
                        "is {kind}: readpath writes only to regular files (or new ones), FIFOs, terminals and /dev/null, and never replaces anything else"
                    )));
                }
            }
        };
        Ok(OutputPath {
            what: what.into(),
            given: path.into(),
            target,
            mode,
            keep_mode,
        })
    }

    /// How this output is written.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The path as the user gave it.
    pub fn path(&self) -> &Path {
        &self.given
    }

    /// Refuses `other` when it is the same output as this one (two flags of
    /// one command naming one file: the second would replace the first).
    pub fn check_distinct(&self, other: &OutputPath) -> Result<(), OutputError> {
        let same = match (self.mode, other.mode) {
            (Mode::Stdout, Mode::Stdout) => true,
            (Mode::Stdout, _) | (_, Mode::Stdout) => false,
            _ => {
                same_file(&self.target, &other.target)
                    || canonical_new(&self.target)
                        .is_some_and(|a| Some(a) == canonical_new(&other.target))
            }
        };
        if same && !matches!(other.mode, Mode::InPlace) {
            return Err(OutputError::Refused {
                what: other.what.clone(),
                path: other.given.clone(),
                why: format!(
                    "is the same file as {} {}: one would replace the other; choose two names",
                    self.what,
                    self.given.display()
                ),
            });
        }
        Ok(())
    }

    /// Opens the output for writing: the temporary file of an atomic
    /// output (stale ones of dead processes removed first), the FIFO or
    /// device itself, or stdout. A FIFO no process reads yet is waited
    /// for, said on stderr, until a reader opens it or a stop signal ends
    /// the wait ([`OutputError::Stopped`]); commands open their outputs
    /// before their workload starts, so the wait costs nothing.
    pub fn create(&self) -> Result<OutputFile, OutputError> {
        let io = |err| OutputError::Io {
            what: self.what.clone(),
            path: self.given.clone(),
            err,
        };
        let (file, tmp): (Box<dyn Write + Send>, Option<PathBuf>) = match self.mode {
            Mode::Stdout => {
                let _ = std::io::stdout().flush();
                (Box::new(Stream::new(None, false)), None)
            }
            Mode::InPlace => {
                let (f, fifo) = self.open_in_place()?;
                if !fifo {
                    // A terminal or /dev/null: blocking writes, polled first.
                    crate::sys::set_nonblocking(f.as_raw_fd(), false).map_err(io)?;
                }
                (Box::new(Stream::new(Some(f), fifo)), None)
            }
            Mode::Atomic => {
                let dir = parent_of(&self.target);
                let name = self
                    .target
                    .file_name()
                    .map_or("output".into(), |n| n.to_string_lossy().into_owned());
                crate::sys::remove_stale_temps(dir, &format!(".{name}.tmp-"));
                let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
                let _ = std::fs::remove_file(&tmp);
                let f = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(self.keep_mode.unwrap_or(0o644))
                    .open(&tmp)
                    .map_err(io)?;
                (Box::new(f), Some(tmp))
            }
        };
        Ok(OutputFile {
            out: BufWriter::with_capacity(64 * 1024, file),
            tmp,
            target: self.target.clone(),
            given: self.given.clone(),
            what: self.what.clone(),
            finished: false,
        })
    }

    /// Opens a FIFO, terminal or device output without blocking (a FIFO
    /// with no reader, a serial line without carrier): true when it is a
    /// FIFO, which stays non-blocking. A FIFO no process reads is waited
    /// for (ENXIO), said once on stderr, polled every 50 ms until a reader
    /// comes or a stop signal arrives.
    fn open_in_place(&self) -> Result<(File, bool), OutputError> {
        let fifo = std::fs::metadata(&self.target).is_ok_and(|m| m.file_type().is_fifo());
        let mut said = false;
        loop {
            let opened = OpenOptions::new()
                .write(true)
                .custom_flags(oflag::O_NOCTTY | oflag::O_NONBLOCK)
                .open(&self.target);
            match opened {
                Ok(f) => return Ok((f, fifo)),
                Err(e) if fifo && e.raw_os_error() == Some(errno::ENXIO) => {
                    let waiting = format!(
                        "waiting for a reader on FIFO {}",
                        crate::sys::printable(&self.given.display().to_string(), false)
                    );
                    if crate::sys::stop_requested() {
                        return Err(OutputError::Stopped {
                            what: self.what.clone(),
                            path: self.given.clone(),
                            stopped: Stopped::now(
                                "while waiting for a reader on the FIFO: nothing was written"
                                    .into(),
                            ),
                        });
                    }
                    if !said {
                        tell(&format!(
                            "readpath: {waiting} ({}); Ctrl-C to stop",
                            self.what
                        ));
                        said = true;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) if e.raw_os_error() == Some(errno::EINTR) => {}
                Err(err) => {
                    return Err(OutputError::Io {
                        what: self.what.clone(),
                        path: self.given.clone(),
                        err,
                    });
                }
            }
        }
    }

    /// Writes `bytes` as the whole output.
    pub fn write_all(&self, bytes: &[u8]) -> Result<(), OutputError> {
        let mut f = self.create()?;
        f.write_all(bytes).map_err(|e| f.error(e))?;
        f.finish().map(|_| ())
    }
}

/// The canonical path a new file would have (its directory resolved).
fn canonical_new(p: &Path) -> Option<PathBuf> {
    let dir = std::fs::canonicalize(parent_of(p)).ok()?;
    Some(dir.join(p.file_name()?))
}

fn parent_of(p: &Path) -> &Path {
    p.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// An output being written. [`OutputFile::finish`] puts it in place;
/// dropped unfinished (an error, a panic), it removes its temporary file and
/// leaves what was there before.
pub struct OutputFile {
    out: BufWriter<Box<dyn Write + Send>>,
    tmp: Option<PathBuf>,
    target: PathBuf,
    given: PathBuf,
    what: String,
    finished: bool,
}

impl OutputFile {
    /// An I/O error while writing this output, named by its flag and path.
    pub fn error(&self, err: std::io::Error) -> OutputError {
        OutputError::Io {
            what: self.what.clone(),
            path: self.given.clone(),
            err,
        }
    }

    /// Flushes; for an atomic output, syncs and renames it into place.
    /// Returns the path as the user gave it.
    pub fn finish(mut self) -> Result<PathBuf, OutputError> {
        if let Err(e) = self.out.flush() {
            return Err(self.error(e));
        }
        if let Some(tmp) = &self.tmp {
            let synced = File::open(tmp).and_then(|f| f.sync_all());
            if let Err(e) = synced.and_then(|()| std::fs::rename(tmp, &self.target)) {
                return Err(self.error(e));
            }
            // The rename is durable once the directory is synced.
            if let Ok(d) = File::open(parent_of(&self.target)) {
                let _ = d.sync_all();
            }
        }
        self.finished = true;
        Ok(self.given.clone())
    }
}

impl OutputFile {
    /// The path as the user gave it (`-` for standard output).
    pub fn given(&self) -> &Path {
        &self.given
    }

    /// Whether this output is a stream written in place (a FIFO, a pipe,
    /// a terminal, stdout): its reader sees each record as it is flushed,
    /// so writers of per-interval lines flush after each one.
    pub fn is_stream(&self) -> bool {
        self.tmp.is_none()
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.out.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if !self.finished
            && let Some(tmp) = &self.tmp
        {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Most bytes [`read_capped`] reads from an input.
pub const MAX_TEXT_INPUT: u64 = 1 << 20;

/// Reads a small text input (a preset, a demo, a sweep report) whole,
/// refusing one larger than `limit` bytes (so `/dev/zero` is an error, not
/// an endless read), a directory and a file of a kernel pseudo-filesystem
/// (`/proc/kmsg`). A regular file larger than `limit` is refused before
/// anything is read. The error says which file and why.
pub fn read_capped(path: &Path, limit: u64) -> Result<String, ReadError> {
    let io = |error| ReadError::Io {
        path: path.to_path_buf(),
        error,
    };
    let f = open_input(path).map_err(io)?;
    if f.is_dir() {
        return Err(ReadError::Directory {
            path: path.to_path_buf(),
        });
    }
    let too_large = || ReadError::TooLarge {
        path: path.to_path_buf(),
        limit,
    };
    if f.size.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut buf = Vec::new();
    f.take(limit + 1).read_to_end(&mut buf).map_err(io)?;
    if buf.len() as u64 > limit {
        return Err(too_large());
    }
    String::from_utf8(buf).map_err(|e| ReadError::NotUtf8 {
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })
}

/// Why a small text input could not be read ([`read_capped`]): the file
/// (shown printable) and why. The OS's error is said without its `(os
/// error N)`, and so is not given as a `source` (a chain of causes would
/// say it again, with the number).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It could not be opened or read (missing, unreadable, a kernel
    /// interface, a stop signal).
    #[error("{}: {}", shown(path), plain(error))]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A directory.
    #[error("{}: is a directory, not a file", shown(path))]
    Directory {
        /// The directory.
        path: PathBuf,
    },
    /// Larger than the limit.
    #[error(
        "{}: larger than {} KiB: not a readpath file (is it a device or a data file?)",
        shown(path),
        limit / 1024
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit, bytes.
        limit: u64,
    },
    /// Not UTF-8.
    #[error(
        "{}: not UTF-8 text (invalid byte at offset {offset}): not a readpath file",
        shown(path)
    )]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Where the first invalid byte is.
        offset: usize,
    },
}

/// A path as text safe for a terminal.
fn shown(path: &Path) -> String {
    crate::sys::printable(&path.display().to_string(), false)
}

/// Who named a file readpath reads, which says whether a link is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// The user, on the command line (`vm:PATH`, a recording): opened as
    /// named, links followed, as a shell would.
    ByUser,
    /// readpath, inside a directory it uses (a kernel's `modules/` in the
    /// lab): a link there is refused (`O_NOFOLLOW`), never followed.
    Found,
}

/// What a file read with [`read_file`] must be: its kind in words, for
/// messages ("a kernel module (.ko)"), and the most bytes it may hold.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// The kind, with its article: "a kernel image (bzImage)".
    pub what: &'static str,
    /// The most bytes read; a larger file is refused.
    pub cap: u64,
}

/// Why a file from outside was not read ([`read_file`]).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Not what it must be (a FIFO, a device, a link readpath did not
    /// make, a file of /proc, too large): the input's fault, exit status 2.
    #[error("{name}: {why}")]
    Refused {
        /// The file as the message names it (`vm:/dev/zero`).
        name: String,
        /// Why, and what is allowed.
        why: String,
    },
    /// It could not be opened or read (missing, unreadable, an I/O error).
    #[error("{name}: {err}")]
    Io {
        /// The file as the message names it.
        name: String,
        /// The error, printed in this message.
        err: std::io::Error,
    },
    /// A stop signal ended the read (exit status 1).
    #[error("{name}: {stopped}")]
    Stopped {
        /// The file as the message names it.
        name: String,
        /// Which signal.
        stopped: Stopped,
    },
}

impl InputError {
    /// True when the file is refused for what it is (exit status 2).
    pub fn is_bad_input(&self) -> bool {
        matches!(self, InputError::Refused { .. })
    }

    /// True when the file is not there.
    pub fn is_not_found(&self) -> bool {
        matches!(self, InputError::Io { err, .. } if err.kind() == std::io::ErrorKind::NotFound)
    }
}

impl From<InputError> for std::io::Error {
    /// As an I/O error: `InvalidInput` for a refusal, the error's own kind
    /// for an I/O error, and a [`Stopped`] inside for a stop signal (so
    /// [`is_stopped`] still sees it).
    fn from(e: InputError) -> std::io::Error {
        match e {
            InputError::Refused { .. } => {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
            }
            InputError::Io { ref err, .. } => std::io::Error::new(err.kind(), e.to_string()),
            InputError::Stopped { name, stopped } => std::io::Error::other(Stopped {
                signal: stopped.signal,
                during: format!("{} ({name})", stopped.during),
            }),
        }
    }
}

/// What a file's type is, in words (`a FIFO`, `a character device (1:5)`).
fn kind_of(m: &Metadata) -> String {
    let ft = m.file_type();
    if ft.is_dir() {
        "a directory".into()
    } else if ft.is_fifo() {
        "a FIFO".into()
    } else if ft.is_char_device() {
        let (a, b) = dev_numbers(m);
        format!("a character device ({a}:{b})")
    } else if ft.is_block_device() {
        "a block device".into()
    } else if ft.is_socket() {
        "a socket".into()
    } else if ft.is_symlink() {
        "a symbolic link".into()
    } else {
        "not a regular file".into()
    }
}

/// Size in words: `256 MiB`, `64 KiB`, `12 bytes`.
fn size_words(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// Reads a file readpath takes from outside whole: a kernel image, a
/// kernel's module or module list. It is opened non-blocking (a FIFO never
/// holds the open), without following a link where readpath found it
/// ([`Named::Found`]), and must be a regular file on a real filesystem
/// (not a FIFO, a device, a directory, nor a kernel interface such as
/// `/proc/self/pagemap` or `/proc/kmsg`) of at most `expect.cap` bytes,
/// checked before the first byte is read and again while reading (a file
/// that grows). The read waits in `poll(2)` where the file says it has no
/// data yet, and a stop signal ends it ([`InputError::Stopped`]). `name`
/// is how messages name the file (`vm:/boot/vmlinuz`).
pub fn read_file(
    path: &Path,
    named: Named,
    expect: Expect,
    name: &str,
) -> Result<Vec<u8>, InputError> {
    let name = crate::sys::printable(name, false);
    let refuse = |why: String| InputError::Refused {
        name: name.clone(),
        why,
    };
    let mut flags = oflag::O_NONBLOCK | oflag::O_NOCTTY;
    if named == Named::Found {
        flags |= oflag::O_NOFOLLOW;
    }
    let file = match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(f) => f,
        Err(e) if named == Named::Found && e.raw_os_error() == Some(errno::ELOOP) => {
            return Err(refuse(format!(
                "is a symbolic link; {} is read only from a regular file readpath put there, never through a link",
                expect.what
            )));
        }
        Err(err) => {
            return Err(InputError::Io {
                name: name.clone(),
                err: std::io::Error::new(err.kind(), plain(&err)),
            });
        }
    };
    let io = |err: std::io::Error| InputError::Io {
        name: name.clone(),
        err: std::io::Error::new(err.kind(), plain(&err)),
    };
    let m = file.metadata().map_err(io)?;
    if !m.is_file() {
        return Err(refuse(format!(
            "is {}; {} is read only from a regular file",
            kind_of(&m),
            expect.what
        )));
    }
    if let Some(fs) = crate::sys::pseudo_fs_of(&file) {
        return Err(refuse(format!(
            "is a file of {fs}, a kernel interface, not {}",
            expect.what
        )));
    }
    let too_large = |n: String| {
        refuse(format!(
            "{n}; {} is at most {}",
            expect.what,
            size_words(expect.cap)
        ))
    };
    if m.len() > expect.cap {
        return Err(too_large(format!("is {} bytes", m.len())));
    }
    let input = Input {
        file,
        stream: false,
        dir: false,
        size: Some(m.len()),
        given: path.to_path_buf(),
        waiting: None,
    };
    let mut buf = Vec::with_capacity(m.len() as usize);
    match input.take(expect.cap + 1).read_to_end(&mut buf) {
        Ok(_) => {}
        Err(e) if is_stopped(&e) => {
            let stopped = e
                .into_inner()
                .and_then(|i| i.downcast::<Stopped>().ok())
                .map_or_else(|| Stopped::now("while reading it".into()), |b| *b);
            return Err(InputError::Stopped { name, stopped });
        }
        Err(e) => return Err(io(e)),
    }
    if buf.len() as u64 > expect.cap {
        return Err(too_large(format!(
            "holds more than {} bytes (it grew while read)",
            expect.cap
        )));
    }
    Ok(buf)
}

/// An input file opened by [`open_input`] (or [`read_file`]): read
/// non-blocking, so that neither a FIFO, `<(command)` or a terminal nor a
/// regular file that blocks (a kernel log) holds readpath: where there is
/// no data yet, readpath waits in `poll(2)` (saying so on stderr after a
/// second), and a stop signal ends the wait with a [`Stopped`] error
/// instead of a read that never returns. A stop signal also ends a long
/// read of a regular file at the next buffer.
pub struct Input {
    file: File,
    /// Not a regular file (nor a directory): polled before each read (a
    /// FIFO with no writer yet reads as its end).
    stream: bool,
    dir: bool,
    /// A regular file's size when opened.
    size: Option<u64>,
    given: PathBuf,
    /// When the current wait for data began, and whether it was said.
    waiting: Option<(Instant, bool)>,
}

/// How long an input waits for data before readpath says it is waiting.
const SAY_WAITING_AFTER: Duration = Duration::from_secs(1);

/// Opens an input without blocking: a FIFO with no writer yet, a serial
/// line without carrier or a terminal never hold `open(2)`, and the
/// descriptor stays non-blocking, so reading one waits interruptibly (see
/// [`Input`]). A regular file of a kernel pseudo-filesystem (`/proc/kmsg`,
/// `/proc/self/pagemap`, anything in `/sys`) is refused (`InvalidInput`):
/// a kernel interface, never a readpath file, whose reads may block,
/// never end, or take the kernel's log from whoever reads it.
pub fn open_input(path: &Path) -> std::io::Result<Input> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(oflag::O_NONBLOCK | oflag::O_NOCTTY)
        .open(path)?;
    let m = file.metadata()?;
    if m.is_file()
        && let Some(fs) = crate::sys::pseudo_fs_of(&file)
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("is a file of {fs}, a kernel interface, not a readpath file"),
        ));
    }
    Ok(Input {
        file,
        stream: !m.is_file() && !m.is_dir(),
        dir: m.is_dir(),
        size: m.is_file().then_some(m.len()),
        given: path.to_path_buf(),
        waiting: None,
    })
}

impl Input {
    /// True when the input is a directory (the caller refuses it).
    pub fn is_dir(&self) -> bool {
        self.dir
    }

    /// Waits up to [`POLL_MS`] for data: true when the descriptor is
    /// ready; a stop signal ends the wait with a [`Stopped`] error, and a
    /// wait longer than [`SAY_WAITING_AFTER`] is said once on stderr.
    fn wait_data(&mut self) -> std::io::Result<bool> {
        if wait_ready(self.file.as_raw_fd(), Ready::Read, POLL_MS)? {
            return Ok(true);
        }
        if crate::sys::stop_requested() {
            return Err(Stopped::now("while waiting for its data".into()).into_io());
        }
        let (since, said) = self.waiting.get_or_insert((Instant::now(), false));
        if !*said && since.elapsed() >= SAY_WAITING_AFTER {
            let fifo = std::fs::metadata(&self.given).is_ok_and(|m| m.file_type().is_fifo());
            tell(&format!(
                "readpath: waiting for data on {}{}; Ctrl-C to stop",
                if fifo { "FIFO " } else { "" },
                shown(&self.given)
            ));
            *said = true;
        }
        Ok(false)
    }
}

impl Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // A stop signal ends a long read (a large file being digested or
        // parsed) at the next buffer, not at its end.
        if crate::sys::stop_requested() {
            return Err(Stopped::now("while reading it".into()).into_io());
        }
        let mut empty = 0u32;
        loop {
            // A stream is polled first: a FIFO no writer opened yet reads
            // as its end. A regular file is read at once, and polled only
            // where it says it has nothing yet (EAGAIN).
            if self.stream && !self.wait_data()? {
                continue;
            }
            match self.file.read(buf) {
                Ok(n) => {
                    self.waiting = None;
                    return Ok(n);
                }
                Err(e) if e.raw_os_error() == Some(errno::EINTR) => {}
                Err(e) if e.raw_os_error() == Some(errno::EAGAIN) => {
                    // A descriptor that polls ready and still has nothing
                    // is asked again after a pause, not in a busy loop.
                    empty += 1;
                    if empty > 1 {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    if !self.stream {
                        while !self.wait_data()? {}
                    }
                }
                Err(e) => return Err(e),
            }
            if crate::sys::stop_requested() {
                return Err(Stopped::now("while waiting for its data".into()).into_io());
            }
        }
    }
}

/// True when `e` is (or wraps) a [`Stopped`]: a stop signal, not the input.
pub fn is_stopped(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Stopped>())
}

/// The one message for a file written by a newer readpath (a recording, a
/// preset, a demo script): `"{found} is from a newer readpath: this one
/// reads {what} version {supported}; upgrade readpath"`.
pub fn newer_version(what: &str, found: impl std::fmt::Display, supported: u32) -> String {
    format!(
        "{found} is from a newer readpath: this one reads {what} version {supported}; upgrade readpath"
    )
}

/// An I/O error as words, without Rust's "(os error N)" suffix.
pub fn plain(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) if s.ends_with(')') => s[..i].to_string(),
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file `name` in `d` holding `bytes`.
    fn file_with(d: &tempfile::TempDir, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = d.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// What `p` itself is (a symlink is not followed).
    fn kind(p: &Path) -> std::fs::FileType {
        std::fs::symlink_metadata(p).unwrap().file_type()
    }

    /// Writes `bytes` as the output `p` (checked, no inputs).
    fn put(p: &Path, bytes: &[u8]) {
        OutputPath::check("--out", p, &[])
            .unwrap()
            .write_all(bytes)
            .unwrap();
    }

    #[test]
    fn new_and_regular_files_are_replaced_atomically() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.txt");
        let o = OutputPath::check("--out", &p, &[]).unwrap();
        assert_eq!(o.mode(), Mode::Atomic);
        o.write_all(b"one").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let o = OutputPath::check("--out", &p, &[]).unwrap();
        let mut f = o.create().unwrap();
        f.write_all(b"two").unwrap();
        // Not in place until finished.
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        f.finish().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the replaced file's permissions are kept");
        // Dropped unfinished: the old content stays, no temporary is left.
        let f = OutputPath::check("--out", &p, &[])
            .unwrap()
            .create()
            .unwrap();
        drop(f);
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn symlinks_are_written_through() {
        let d = tempfile::tempdir().unwrap();
        let target = file_with(&d, "real", b"old");
        let link = d.path().join("link");
        std::os::unix::fs::symlink("real", &link).unwrap();
        put(&link, b"new");
        assert!(kind(&link).is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        // A dangling link creates the file it names.
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink("made", &dangling).unwrap();
        put(&dangling, b"x");
        assert_eq!(std::fs::read(d.path().join("made")).unwrap(), b"x");
    }

    #[test]
    fn the_null_device_is_written_in_place_and_others_refused() {
        let null = Path::new("/dev/null");
        let o = OutputPath::check("--record", null, &[]).unwrap();
        assert_eq!(o.mode(), Mode::InPlace);
        o.write_all(b"discarded").unwrap();
        assert!(
            std::fs::metadata(null)
                .unwrap()
                .file_type()
                .is_char_device()
        );
        // /dev/zero, /dev/full, /dev/mem and friends are refused.
        let e = OutputPath::check("--record", Path::new("/dev/zero"), &[]).unwrap_err();
        assert!(e.is_bad_input());
        assert!(e.to_string().contains("character device (1:5)"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let e = OutputPath::check("--out", d.path(), &[]).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        let e = OutputPath::check("--out", &d.path().join("no/such"), &[]).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
    }

    #[test]
    fn fifos_are_streamed_not_replaced() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("f");
        crate::sys::make_fifo(&fifo, 0o600).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        let o = OutputPath::check("--record", &fifo, &[]).unwrap();
        assert_eq!(o.mode(), Mode::InPlace);
        o.write_all(b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(kind(&fifo).is_fifo());
    }

    #[test]
    fn a_fifo_output_waits_for_its_reader_and_survives_a_slow_one() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("f");
        crate::sys::make_fifo(&fifo, 0o600).unwrap();
        // More than a pipe holds, so the non-blocking writes meet EAGAIN.
        let bytes: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                // Comes late: the writer waits (ENXIO) meanwhile.
                std::thread::sleep(Duration::from_millis(300));
                let mut f = File::open(fifo).unwrap();
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    match f.read(&mut buf).unwrap() {
                        0 => return got,
                        n => got.extend_from_slice(&buf[..n]),
                    }
                    if got.len() < 200_000 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            })
        };
        let o = OutputPath::check("--record", &fifo, &[]).unwrap();
        let mut f = o.create().unwrap();
        f.write_all(&bytes).unwrap();
        f.finish().unwrap();
        assert!(reader.join().unwrap() == bytes, "every byte, in order");
        assert!(kind(&fifo).is_fifo());
    }

    #[test]
    fn dev_stdout_on_a_pipe_is_the_pipe() {
        let (mut r, w) = std::io::pipe().unwrap();
        let w_fd = w.as_raw_fd();
        // What `/dev/stdout` is when stdout is a pipe: a link to `pipe:[N]`.
        let link = PathBuf::from(format!("/proc/self/fd/{w_fd}"));
        let o = OutputPath::check("--record", &link, &[]).unwrap();
        assert_eq!(o.mode(), Mode::InPlace);
        o.write_all(b"through /proc").unwrap();
        drop(w);
        let mut buf = [0u8; 64];
        let n = std::io::Read::read(&mut r, &mut buf).unwrap();
        let got = buf[..n].to_vec();
        assert_eq!(got, b"through /proc");
    }

    #[test]
    fn a_fifo_input_waits_for_its_writer_and_ends_with_it() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("in");
        crate::sys::make_fifo(&fifo, 0o600).unwrap();
        // Opening does not wait for a writer.
        let mut input = open_input(&fifo).unwrap();
        assert!(!input.is_dir());
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                let mut w = OpenOptions::new().write(true).open(fifo).unwrap();
                w.write_all(b"line one\n").unwrap();
                std::thread::sleep(Duration::from_millis(100));
                w.write_all(b"line two\n").unwrap();
            })
        };
        let mut got = String::new();
        input.read_to_string(&mut got).unwrap();
        writer.join().unwrap();
        assert_eq!(got, "line one\nline two\n");
        // A regular file reads as usual.
        let p = file_with(&d, "plain", b"abc");
        let mut got = String::new();
        open_input(&p).unwrap().read_to_string(&mut got).unwrap();
        assert_eq!(got, "abc");
        assert!(open_input(d.path()).unwrap().is_dir());
    }

    #[test]
    fn an_input_is_never_an_output() {
        let d = tempfile::tempdir().unwrap();
        let input = file_with(&d, "r.jsonl", b"data");
        let hard = d.path().join("hard");
        std::fs::hard_link(&input, &hard).unwrap();
        let soft = d.path().join("soft");
        std::os::unix::fs::symlink(&input, &soft).unwrap();
        for out in [&input, &hard, &soft] {
            let e = OutputPath::check("--out", out, &[&input]).unwrap_err();
            assert!(e.is_bad_input());
            assert!(e.to_string().contains("same file as the input"), "{e}");
        }
        assert_eq!(std::fs::read(&input).unwrap(), b"data");
        // Two outputs naming one file are refused too.
        let a = OutputPath::check("--record", &d.path().join("x"), &[]).unwrap();
        let b = OutputPath::check("--interval-log", &d.path().join("./x"), &[]).unwrap();
        assert!(a.check_distinct(&b).is_err());
    }

    #[test]
    fn stale_temporaries_of_dead_processes_are_removed() {
        let d = tempfile::tempdir().unwrap();
        // pid 0x7fffffff cannot be a live process.
        let stale = file_with(&d, ".out.txt.tmp-2147483647", b"half");
        let p = d.path().join("out.txt");
        put(&p, b"x");
        assert!(!stale.exists());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn capped_reads_refuse_endless_and_binary_inputs() {
        let e = read_capped(Path::new("/dev/zero"), 4096)
            .unwrap_err()
            .to_string();
        assert!(e.contains("larger than 4 KiB"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let e = read_capped(d.path(), 4096).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let bin = d.path().join("bin");
        std::fs::write(&bin, [0x80u8, 0xff, 0]).unwrap();
        let e = read_capped(&bin, 4096).unwrap_err().to_string();
        assert!(e.contains("not UTF-8"), "{e}");
        let e = read_capped(&d.path().join("missing"), 4096)
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("No such file or directory"), "{e}");
    }

    const SMALL: Expect = Expect {
        what: "a test file",
        cap: 4096,
    };

    #[test]
    fn a_file_from_outside_is_a_regular_file_within_its_cap() {
        let d = tempfile::tempdir().unwrap();
        let p = file_with(&d, "ok", b"bytes");
        assert_eq!(read_file(&p, Named::Found, SMALL, "ok").unwrap(), b"bytes");
        let refused = |p: &Path, named: Named| {
            let e = read_file(p, named, SMALL, &p.display().to_string()).unwrap_err();
            assert!(e.is_bad_input(), "{e}");
            e.to_string()
        };
        // Devices, FIFOs (never waited for) and directories.
        let e = refused(Path::new("/dev/zero"), Named::ByUser);
        assert!(e.contains("is a character device (1:5)"), "{e}");
        assert!(
            e.contains("a test file is read only from a regular file"),
            "{e}"
        );
        let fifo = d.path().join("fifo");
        crate::sys::make_fifo(&fifo, 0o600).unwrap();
        assert!(refused(&fifo, Named::ByUser).contains("is a FIFO"));
        assert!(refused(d.path(), Named::ByUser).contains("is a directory"));
        // Kernel interfaces: "regular files" of size 0, endless or blocking.
        let e = refused(Path::new("/proc/self/pagemap"), Named::ByUser);
        assert!(e.contains("is a file of procfs, a kernel interface"), "{e}");
        let e = refused(Path::new("/sys/devices/system/cpu/online"), Named::ByUser);
        assert!(e.contains("sysfs"), "{e}");
        // Larger than the cap: refused by its size, before a byte is read.
        let big = d.path().join("big");
        File::create(&big).unwrap().set_len(1 << 40).unwrap();
        let e = refused(&big, Named::ByUser);
        assert!(
            e.contains("is 1099511627776 bytes; a test file is at most 4 KiB"),
            "{e}"
        );
        // A link is followed where the user named the file, refused where
        // readpath found it.
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert_eq!(
            read_file(&link, Named::ByUser, SMALL, "l").unwrap(),
            b"bytes"
        );
        assert!(refused(&link, Named::Found).contains("is a symbolic link"));
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(refused(&link, Named::Found).contains("is a symbolic link"));
        // Missing: an I/O error of kind NotFound (the caller decides).
        let e = read_file(&d.path().join("none"), Named::Found, SMALL, "none").unwrap_err();
        assert!(e.is_not_found() && !e.is_bad_input(), "{e}");
        let io: std::io::Error = refused_io(&fifo);
        assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    }

    fn refused_io(p: &Path) -> std::io::Error {
        read_file(p, Named::ByUser, SMALL, "x").unwrap_err().into()
    }

    #[test]
    fn inputs_on_kernel_pseudo_filesystems_are_refused_unread() {
        // /proc/kmsg blocks in read (and takes the kernel's log from
        // whoever reads it): refused at open, as /proc/self/pagemap is.
        for p in ["/proc/self/pagemap", "/proc/kmsg", "/proc/self/status"] {
            match open_input(Path::new(p)) {
                Ok(_) => panic!("{p} opened as an input"),
                Err(e) => assert!(
                    e.kind() == std::io::ErrorKind::PermissionDenied
                        || e.to_string()
                            .contains("is a file of procfs, a kernel interface"),
                    "{p}: {e}"
                ),
            }
        }
        let e = read_capped(Path::new("/proc/self/pagemap"), 4096)
            .unwrap_err()
            .to_string();
        assert!(e.contains("kernel interface"), "{e}");
        // A regular file larger than the cap is refused by its size.
        let d = tempfile::tempdir().unwrap();
        let big = d.path().join("big.toml");
        File::create(&big).unwrap().set_len(8192).unwrap();
        let e = read_capped(&big, 4096).unwrap_err().to_string();
        assert!(e.contains("larger than 4 KiB"), "{e}");
    }
}
