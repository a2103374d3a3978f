//! Labels and text as readpath shows them everywhere (the explorer, the
//! slide charts, the summaries): a setting change's short label, and text
//! from files made safe to print (text and JSON: no control character
//! reaches a terminal raw). Numbers are written by
//! [`crate::metrics::format`], one module below both `tui` and `output`.

/// `workers.mode: unbound -> bound` -> `mode: unbound -> bound`; other
/// labels unchanged.
pub fn short_label(label: &str) -> String {
    match label.split_once(": ") {
        Some((key, rest)) if key.contains('.') => {
            let name = key.split_once('.').map_or(key, |(_, n)| n);
            format!("{name}: {rest}")
        }
        _ => label.to_string(),
    }
}

// Defined in `sys`, which also sanitises the paths it names in messages.
pub use crate::sys::printable;

/// JSON made as safe for a terminal as [`printable`] text, losing
/// nothing: serde_json escapes U+0000..=U+001F itself; DEL and the C1
/// controls (U+007F..=U+009F: U+009B is CSI to some terminals), which it
/// leaves raw and which can only stand inside a string, are escaped here
/// (`\u009b`).
pub fn json_controls_escaped(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_control() && c > '\u{7e}' {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_labels_drop_the_section() {
        assert_eq!(
            short_label("workers.mode: unbound -> bound"),
            "mode: unbound -> bound"
        );
        assert_eq!(short_label("baseline"), "baseline");
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(printable("a\x1b[31mred\n", true), "a\u{fffd}[31mred\n");
        assert_eq!(printable("two\nlines", false), "two\u{fffd}lines");
        // JSON keeps every character, escaped where a terminal would act.
        let json = serde_json::to_string(&"a\x1b[2J\u{9b}31m\u{7f}é").unwrap();
        let safe = json_controls_escaped(&json);
        assert_eq!(safe, r#""a\u001b[2J\u009b31m\u007fé""#);
        assert_eq!(
            serde_json::from_str::<String>(&safe).unwrap(),
            "a\x1b[2J\u{9b}31m\u{7f}é"
        );
    }
}

/// Seconds as a person reads a wait: `45s`, `2m`, `1m30s`, `1h5m`.
pub fn human_secs(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

/// How far a run of `total` like steps is after `done` of them in
/// `elapsed`: `1m12s elapsed, about 9m left` (the steps so far as the
/// pace; with none done yet, `estimate` where one is known).
pub fn eta_text(
    elapsed: std::time::Duration,
    done: usize,
    total: usize,
    estimate: Option<std::time::Duration>,
) -> String {
    let e = elapsed.as_secs_f64();
    let left = if done > 0 {
        Some(e / done as f64 * total.saturating_sub(done) as f64)
    } else {
        estimate.map(|t| (t.as_secs_f64() - e).max(0.0))
    };
    match left {
        Some(l) if done < total => {
            format!("{} elapsed, about {} left", human_secs(e), human_secs(l))
        }
        _ => format!("{} elapsed", human_secs(e)),
    }
}

/// The time now in UTC, RFC 3339 to the second (`2026-12-05T06:40:00Z`):
/// for results kept and read back later.
pub fn utc_now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_rfc3339(secs)
}

/// `secs` since the epoch as RFC 3339 UTC (the civil-from-days
/// algorithm: proleptic Gregorian calendar).
pub fn utc_rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod utc_tests {
    #[test]
    fn epoch_seconds_are_civil_utc_dates() {
        assert_eq!(super::utc_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::utc_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::utc_rfc3339(1_796_452_800), "2026-12-05T06:40:00Z");
    }
}

/// `workload.cpus` -> `cpus`: the name without its section, unless two
/// sections share it.
pub fn short_key(key: &str) -> &str {
    let name = key.split_once('.').map_or(key, |(_, n)| n);
    let shared = crate::settings::KEYS
        .iter()
        .filter(|k| k.key.split_once('.').is_some_and(|(_, n)| n == name))
        .count()
        > 1;
    if shared { key } else { name }
}

#[cfg(test)]
mod wait_tests {
    use super::*;

    #[test]
    fn a_wait_reads_as_elapsed_and_left() {
        use std::time::Duration;
        assert_eq!(human_secs(45.2), "45s");
        assert_eq!(human_secs(120.0), "2m");
        assert_eq!(human_secs(90.0), "1m30s");
        assert_eq!(human_secs(3900.0), "1h5m");
        let s = Duration::from_secs;
        assert_eq!(eta_text(s(60), 2, 8, None), "1m elapsed, about 3m left");
        assert_eq!(
            eta_text(s(10), 0, 8, Some(s(100))),
            "10s elapsed, about 1m30s left"
        );
        assert_eq!(eta_text(s(10), 0, 8, None), "10s elapsed");
        assert_eq!(eta_text(s(80), 8, 8, None), "1m20s elapsed");
    }
}
