//! Numbers and labels as readpath shows them everywhere (the explorer,
//! the slide charts, the summaries): latencies with their unit (`850us`,
//! `1.2ms`), counts and rates with a suffix (`12.5K`), a setting change's
//! short label, and text from files made safe to print (text and JSON:
//! no control character reaches a terminal raw). One place, so a chart and
//! the screen it came from agree.

/// Microseconds as `850us`, `1.2ms`, `35ms`, `1.5s`.
pub fn fmt_us(us: f64) -> String {
    if us == 0.0 {
        "0".into()
    } else if us < 1.0 {
        format!("{us:.1}us")
    } else if us < 1_000.0 {
        format!("{us:.0}us")
    } else if us < 10_000.0 {
        format!("{:.1}ms", us / 1e3)
    } else if us < 1_000_000.0 {
        format!("{:.0}ms", us / 1e3)
    } else {
        format!("{:.1}s", us / 1e6)
    }
}

/// Counts as `950`, `12.5K`, `1.2M`.
pub fn fmt_count(v: f64) -> String {
    if v < 1_000.0 {
        format!("{v:.0}")
    } else if v < 1_000_000.0 {
        let k = v / 1e3;
        if k < 100.0 {
            format!("{k:.1}K")
        } else {
            format!("{k:.0}K")
        }
    } else {
        format!("{:.1}M", v / 1e6)
    }
}

/// A rate with up to one decimal: `0.5`, `35.2`, `512`.
pub fn fmt_rate(v: f64) -> String {
    if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

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
    fn numbers_carry_their_unit() {
        assert_eq!(fmt_us(63.4), "63us");
        assert_eq!(fmt_us(1_234.0), "1.2ms");
        assert_eq!(fmt_us(553_800.0), "554ms");
        assert_eq!(fmt_us(1_500_000.0), "1.5s");
        assert_eq!(fmt_count(13_325.0), "13.3K");
    }

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
