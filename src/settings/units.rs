//! Values as people write them: durations (`250ms`, `2m`, `30d`), sizes
//! (`4K`, `256M`, `1T`) and Linux CPU lists (`0-3,6`), parsed with their
//! range checked and written back the same way. Shared by the settings,
//! the command line and demo scripts, so `10s` means the same everywhere.

use std::time::Duration;

/// Why a duration could not be read: the value as written and the range
/// allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// A number with a unit, outside the range.
    #[error(
        "duration \"{value}\" is out of range: allowed {}..={}",
        format_duration(*lo),
        format_duration(*hi)
    )]
    OutOfRange {
        /// The value as written.
        value: String,
        /// The shortest allowed.
        lo: Duration,
        /// The longest allowed.
        hi: Duration,
    },
    /// Not a finite number with a known unit.
    #[error(
        "invalid duration \"{value}\": expected a positive number with a unit (e.g. 10s, 250ms, 2m), allowed {}..={}",
        format_duration(*lo),
        format_duration(*hi)
    )]
    Invalid {
        /// The value as written.
        value: String,
        /// The shortest allowed.
        lo: Duration,
        /// The longest allowed.
        hi: Duration,
    },
}

/// Why a size could not be read: the value as written, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// It does not start with digits.
    #[error("{value:?} is not a size: expected bytes or a number with K, M, G or T, like \"4K\"")]
    NotASize {
        /// The value as written.
        value: String,
    },
    /// A unit that is none of K, M, G or T (lowercased as it was read).
    #[error("{value:?} is not a size: unknown unit {unit:?} (use K, M, G or T)")]
    UnknownUnit {
        /// The value as written.
        value: String,
        /// The unit, trimmed and lowercased.
        unit: String,
    },
    /// More bytes than a u64 holds.
    #[error("{value:?} is too large for a size")]
    TooLarge {
        /// The value as written.
        value: String,
    },
}

/// Parses "10s", "250ms", "2m", "1h" or plain seconds.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, DurationError> {
    parse_duration_in(s, MIN_DURATION, MAX_DURATION)
}

/// Shortest duration [`parse_duration`] accepts.
pub const MIN_DURATION: std::time::Duration = std::time::Duration::from_micros(1);
/// Longest duration [`parse_duration`] accepts: 30 days.
pub const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(30 * 86_400);

/// Largest `workload.file_size`: 1 TiB.
pub const MAX_FILE_SIZE: u64 = 1 << 40;

/// A duration as words: `30d`, `1h`, `250ms`.
pub fn format_duration(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    let units: [(f64, &str); 6] = [
        (86_400.0, "d"),
        (3600.0, "h"),
        (60.0, "m"),
        (1.0, "s"),
        (1e-3, "ms"),
        (1e-6, "us"),
    ];
    for (size, unit) in units {
        let n = s / size;
        if s >= size && (n - n.round()).abs() < 1e-9 {
            return format!("{}{unit}", n.round());
        }
    }
    format!("{s}s")
}

/// [`parse_duration`] within `lo..=hi`; the error names the value and the
/// range. Parsed in f64 and checked before any `Duration` is made, so no
/// input can overflow one (`1e30s`, `inf`).
pub fn parse_duration_in(
    s: &str,
    lo: std::time::Duration,
    hi: std::time::Duration,
) -> Result<std::time::Duration, DurationError> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else if let Some(n) = t.strip_suffix('d') {
        (n, 86_400.0)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => {
            let secs = v * mult;
            // Compared in f64 first: Duration::from_secs_f64 panics beyond u64 seconds.
            if secs >= lo.as_secs_f64() * (1.0 - 1e-12) && secs <= hi.as_secs_f64() {
                Ok(std::time::Duration::from_secs_f64(secs).clamp(lo, hi))
            } else {
                Err(DurationError::OutOfRange {
                    value: s.to_string(),
                    lo,
                    hi,
                })
            }
        }
        _ => Err(DurationError::Invalid {
            value: s.to_string(),
            lo,
            hi,
        }),
    }
}

/// Parse a size: plain bytes (`4096`) or a number with a binary unit
/// (`4K`, `4k`, `4KiB`, `4KB`, `256M`, `1G`, `1T`; K = 1024).
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits_end);
    if num.is_empty() {
        return Err(SizeError::NotASize {
            value: s.to_string(),
        });
    }
    let unit = unit.trim().to_ascii_lowercase();
    let shift = match unit.as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(SizeError::UnknownUnit {
                value: s.to_string(),
                unit,
            });
        }
    };
    let too_large = || SizeError::TooLarge {
        value: s.to_string(),
    };
    let n: u64 = num.parse().map_err(|_| too_large())?;
    n.checked_mul(1u64 << shift).ok_or_else(too_large)
}

/// Format a size the way users write it: `4K`, `256M`, `1G`, `1T`, or plain
/// bytes when it is not a whole number of any unit.
pub fn format_size(bytes: u64) -> String {
    if bytes == 0 {
        return "0".to_string();
    }
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

// CPU lists are parsed in `sys` (it reads them from sysfs too); the
// settings and the command line name them here as before.
pub use crate::sys::{CpuListError, format_cpu_list, parse_cpu_list};
