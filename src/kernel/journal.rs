//! The crash-safe journal of the system knobs' originals: before readpath
//! first writes a knob it saves the knob's value in a state file
//! (`knobs-PID.json`, written to a temporary, synced and renamed, read back
//! under the trust rule), and after a crash the next readpath puts back
//! what a gone process left. Apart from `knobs.rs` (what the knobs are and
//! how they are set) because this is the part whose every line guards
//! against a crash or a forged file; it knows no knob by name (the caller
//! passes `known_knob`) except the one path outside `/sys/` it may write,
//! [`AUTOGROUP_SYSCTL`].

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::sys::{AUTOGROUP_SYSCTL, trust};

/// The longest value saved or restored (a sysfs file holds one page).
pub(super) const MAX_VALUE: usize = 4096;

/// One saved original, as the state file holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Saved {
    pub(super) key: String,
    pub(super) path: String,
    pub(super) value: String,
    /// The value readpath wrote last (recorded before it writes it): a
    /// knob is put back only while it still holds this, so neither a
    /// forged entry nor one whose knob someone else changed since turns
    /// the knob to another value. An entry without it proves nothing and
    /// is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) written: Option<String>,
}

/// A state file: the originals one process saved, in order of first change.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct StateFile {
    pub(super) pid: u32,
    pub(super) knobs: Vec<Saved>,
}

/// Whether an entry (sysfs root, key, path, value) is a knob readpath
/// knows with a value it takes; the reason when not.
pub(super) type KnownKnob = dyn Fn(&Path, &str, &str, &str) -> Result<(), KnobRefused>;

/// Why a state file's entry is not put back: it is no knob readpath
/// knows, or not with that value (`knobs::known_knob`). Each names what is
/// wrong with the entry; the caller adds the file, the value and the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KnobRefused {
    /// The path is outside `/sys/` (and not the autogroup sysctl).
    #[error("not a file under /sys/ (nor {AUTOGROUP_SYSCTL})")]
    NotUnderSys,
    /// The key or the value has control characters or is too long.
    #[error("control characters or over {MAX_VALUE} bytes")]
    BadText,
    /// A file under `/sys/` that is none of readpath's knobs.
    #[error("not a knob readpath changes")]
    NotAKnob,
    /// A device knob of no block device present now.
    #[error(
        "not in the queue directory of a block device present now (a device gone since, or not readpath's)"
    )]
    NoDevice,
    /// The entry's key is not the knob's at its path.
    #[error("its key is {found:?}, not {key}")]
    WrongKey {
        /// The key in the entry, clipped.
        found: String,
        /// The knob's key.
        key: &'static str,
    },
    /// A value the knob does not take.
    #[error("{key} does not take {value:?}")]
    BadValue {
        /// The knob's key.
        key: &'static str,
        /// The value in the entry, clipped.
        value: String,
    },
}

/// Whether two values of the knob at a path (as saved) are the same
/// setting (a CPU mask read back may be written another way).
pub(super) type SameValue = dyn Fn(&str, &str, &str) -> bool;

/// Serialises every read-modify-write of a state file in this process, and
/// holds the knobs (full paths) changed by the live `SystemKnobs` here,
/// so two of them never take each other's value for an original.
pub(super) static HELD: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

pub(super) fn held() -> MutexGuard<'static, Vec<PathBuf>> {
    HELD.lock().unwrap_or_else(|p| p.into_inner())
}

/// Puts back the originals in the state files under `state_dir` whose
/// process is gone (the directory checked and locked by the caller; see
/// `knobs::restore_left_with_root`), with every knob path taken relative to
/// `root`; `known` says whether an entry is a knob readpath knows with a
/// value it takes (`knobs::known_knob`).
pub(super) fn restore_gone(
    state_dir: &Path,
    root: &Path,
    known: &KnownKnob,
    same: &SameValue,
) -> io::Result<Restored> {
    let rd = match fs::read_dir(state_dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(described(&e, &format!("reading {}", state_dir.display()))),
    };
    let mut files: Vec<(u32, PathBuf)> = rd
        .flatten()
        .filter_map(|e| Some((state_pid(&e.file_name().to_string_lossy())?, e.path())))
        .filter(|(pid, _)| trust::live_owner(state_dir, *pid).is_none())
        .collect();
    files.sort();
    let mut done = Vec::new();
    let mut problems: Vec<(io::ErrorKind, String)> = Vec::new();
    for (_, file) in files {
        restore_file(&file, root, known, same, &mut done, &mut problems);
    }
    match problems.first() {
        None => Ok(done),
        Some(&(kind, _)) => Err(problems_error(kind, &done, &problems)),
    }
}

/// What was put back, as (key, path, value).
type Restored = Vec<(String, PathBuf, String)>;

/// Puts back the originals of one gone process's state `file` (see
/// [`restore_gone`]): what was written goes to `done`, what went wrong to
/// `problems`.
fn restore_file(
    file: &Path,
    root: &Path,
    known: &KnownKnob,
    same: &SameValue,
    done: &mut Restored,
    problems: &mut Vec<(io::ErrorKind, String)>,
) {
    let saved = match read_state(file) {
        Ok(s) => s,
        Err(e) => {
            // Unreadable, not the user's regular file, or no state
            // file at all: set aside, and the rest goes on.
            let aside = match trust::set_aside(file) {
                Ok(to) => format!("; kept as {} to be looked at", to.display()),
                Err(r) => format!("; could not be set aside: {r}"),
            };
            problems.push((io::ErrorKind::InvalidData, format!("{e}{aside}")));
            return;
        }
    };
    let mut keep = Vec::new();
    let mut refused = false;
    for s in saved.iter().rev() {
        let path = PathBuf::from(&s.path);
        if let Err(why) = known(root, &s.key, &s.path, &s.value) {
            refused = true;
            problems.push((
                io::ErrorKind::InvalidData,
                format!(
                    "{}: refused to write {:?} to {}: {why}",
                    file.display(),
                    clip(&s.value),
                    crate::sys::printable(&clip(&s.path), false)
                ),
            ));
            continue;
        }
        let full = match full_path(root, &path) {
            Ok(f) => f,
            Err(e) => {
                refused = true;
                problems.push((e.kind(), format!("{}: {e}", file.display())));
                continue;
            }
        };
        // Only a knob that still holds what readpath wrote is readpath's
        // to put back.
        let Some(written) = &s.written else {
            refused = true;
            problems.push((
                io::ErrorKind::InvalidData,
                format!(
                    "{}: refused to write {:?} to {}: no value readpath wrote is recorded, so nothing proves readpath changed it",
                    file.display(),
                    clip(&s.value),
                    crate::sys::printable(&clip(&s.path), false)
                ),
            ));
            continue;
        };
        match read_sysfs(&full) {
            Ok(now) if !same(&s.path, &now, written) => {
                problems.push((
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: left as it is: it holds {:?}, not the {:?} the record says readpath wrote (changed since, or never readpath's), so {:?} is not put back",
                        crate::sys::printable(&clip(&s.path), false),
                        clip(&now),
                        clip(written),
                        clip(&s.value)
                    ),
                ));
                continue;
            }
            Ok(_) => {}
            // Gone with its device: nothing left to put back.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                let e = described(&e, &format!("reading {}", full.display()));
                problems.push((e.kind(), e.to_string()));
                keep.push(s.clone());
                continue;
            }
        }
        match write_sysfs(&full, &s.value) {
            Ok(()) => done.push((s.key.clone(), path, s.value.clone())),
            // Gone with its device: nothing left to put back.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                let e = described(
                    &e,
                    &format!("putting back {:?} to {}", s.value, full.display()),
                );
                problems.push((e.kind(), e.to_string()));
                keep.push(s.clone());
            }
        }
    }
    keep.reverse();
    if refused {
        let kept = match trust::set_aside(file) {
            Ok(k) => k,
            Err(e) => {
                problems.push((e.kind(), format!("setting {} aside: {e}", file.display())));
                return;
            }
        };
        problems.push((
            io::ErrorKind::InvalidData,
            format!(
                "{} kept as {} to be looked at",
                file.display(),
                kept.display()
            ),
        ));
    }
    if let Err(e) = write_state(file, &keep) {
        problems.push((e.kind(), format!("updating {}: {e}", file.display())));
    }
}

/// The error of [`restore_gone`]: every problem, and what was put back.
fn problems_error(
    kind: io::ErrorKind,
    done: &Restored,
    problems: &[(io::ErrorKind, String)],
) -> io::Error {
    let back = if done.is_empty() {
        String::new()
    } else {
        format!(
            " (put back: {})",
            done.iter()
                .map(|(k, p, v)| format!("{k} {} = {v:?}", p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    io::Error::new(
        kind,
        format!(
            "putting back the knobs a gone readpath left: {}{back}",
            problems
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        ),
    )
}

/// The PID of a state file's name `knobs-PID.json`.
pub(super) fn state_pid(name: &str) -> Option<u32> {
    name.strip_prefix("knobs-")?
        .strip_suffix(".json")?
        .parse::<u32>()
        .ok()
        .filter(|&p| p > 0)
}

/// True when `path` is `/sys/` followed by plain names only (no `..`), or
/// is exactly [`AUTOGROUP_SYSCTL`], the one knob readpath turns outside
/// `/sys/` (`kernel.autogroup`).
pub(super) fn sys_path_ok(path: &Path) -> bool {
    if path == Path::new(AUTOGROUP_SYSCTL) {
        return true;
    }
    let mut c = path.components();
    c.next() == Some(Component::RootDir) && c.next() == Some(Component::Normal("sys".as_ref())) && {
        let rest: Vec<Component> = c.collect();
        !rest.is_empty() && rest.iter().all(|x| matches!(x, Component::Normal(_)))
    }
}

/// True when `v` may be saved and written back: no control characters
/// (newline included), at most [`MAX_VALUE`] bytes.
pub(super) fn value_ok(v: &str) -> bool {
    v.len() <= MAX_VALUE && !v.chars().any(char::is_control)
}

/// `path` (a `/sys/...` path, or [`AUTOGROUP_SYSCTL`]) under `root`; refuses any
/// other path.
pub(super) fn full_path(root: &Path, path: &Path) -> io::Result<PathBuf> {
    if !sys_path_ok(path) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "refusing knob {}: not a file under /sys/ (nor {AUTOGROUP_SYSCTL})",
                path.display()
            ),
        ));
    }
    Ok(root.join(path.strip_prefix("/").unwrap_or(path)))
}

/// A sysfs file's value, trimmed (at most a page and a bit is read).
pub(super) fn read_sysfs(path: &Path) -> io::Result<String> {
    let mut buf = Vec::new();
    File::open(path)?
        .take(2 * MAX_VALUE as u64)
        .read_to_end(&mut buf)?;
    let text = String::from_utf8(buf)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8"))?;
    Ok(text.trim().to_string())
}

/// Writes `value` (no newline) to an existing sysfs file, in one write
/// (never creating it; truncating, which sysfs ignores, keeps a test's
/// fake tree holding just the value).
pub(super) fn write_sysfs(path: &Path, value: &str) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?
        .write_all(value.as_bytes())
}

/// The originals saved in state file `file` (none when it is missing),
/// read under the trust rule ([`trust::read_state_text`]).
pub(super) fn read_state(file: &Path) -> io::Result<Vec<Saved>> {
    let text = match trust::read_state_text(file, trust::STATE_CAP) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(Vec::new()),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => return Err(e),
        Err(e) => return Err(described(&e, &format!("reading {}", file.display()))),
    };
    serde_json::from_str::<StateFile>(&text)
        .map(|s| s.knobs)
        .map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is no readpath knobs state file: {e}", file.display()),
            )
        })
}

/// Replaces state file `file` with `saved` ([`trust::write_state`]: a
/// create-new temporary with a random name, synced and renamed), or
/// removes it when `saved` is empty.
pub(super) fn write_state(file: &Path, saved: &[Saved]) -> io::Result<()> {
    if saved.is_empty() {
        return trust::remove_state(file);
    }
    let mut text = serde_json::to_string_pretty(&StateFile {
        pid: std::process::id(),
        knobs: saved.to_vec(),
    })
    .map_err(io::Error::other)?;
    text.push('\n');
    trust::write_state(file, text.as_bytes())
}

/// An OS error's text without its `(os error N)`.
pub(super) fn os_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// `e` with `what` in front and a hint of why it failed.
pub(super) fn described(e: &io::Error, what: &str) -> io::Error {
    let hint = match e.kind() {
        io::ErrorKind::PermissionDenied if !is_root() => {
            " (readpath must run as root to change it)"
        }
        io::ErrorKind::PermissionDenied => {
            " (not even root may change it here: a container, or kernel lockdown)"
        }
        io::ErrorKind::NotFound => " (this kernel has no such file)",
        io::ErrorKind::InvalidInput => " (the kernel refused the value)",
        _ => "",
    };
    io::Error::new(e.kind(), format!("{what}: {}{hint}", os_text(e)))
}

pub(super) fn is_root() -> bool {
    crate::sys::trust::euid() == 0
}

/// `s` cut to 80 characters for a message.
pub(super) fn clip(s: &str) -> String {
    if s.chars().count() <= 80 {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(80).collect::<String>())
    }
}
