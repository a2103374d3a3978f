//! How readpath writes numbers, everywhere: the explorer, the slides, the
//! charts, `compare`'s table and the run summary. One module, below both
//! `tui` and `output`, so a figure reads the same on every screen and in
//! every report (`12.5K`, never `12.5k` in one place and `12.5K` in
//! another). Text safety (control characters) stays in `output::format`.

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

/// Milliseconds, always in ms (a run_delay rate in ms/s under a title
/// that says `/s`): `36ms`, `1.2ms`, `0.35ms`, `0`.
pub fn fmt_ms(ms: f64) -> String {
    if ms == 0.0 {
        "0".into()
    } else if ms < 1.0 {
        format!("{ms:.2}ms")
    } else if ms < 10.0 {
        format!("{ms:.1}ms")
    } else {
        format!("{ms:.0}ms")
    }
}

/// A figure whose unit is said beside it (`(usec)`, `ms/s`): `0.35`,
/// `12.5`, `512` (fio's precision: two decimals below 10, one below 100).
pub fn fmt_fig(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Bytes in binary units with one decimal where not whole: `512 bytes`,
/// `4 KiB`, `1.5 GiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} bytes")
    } else if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[i])
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

/// Bytes as KiB with one decimal where it is not whole (`128K`, `5.3K`):
/// a mean bio size.
pub fn kib_approx(b: f64) -> String {
    let k = b / 1024.0;
    if k.fract().abs() < 0.05 {
        format!("{k:.0}K")
    } else {
        format!("{k:.1}K")
    }
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
        assert_eq!(fmt_count(12_500.0), "12.5K");
        assert_eq!(fmt_count(950.0), "950");
        assert_eq!(fmt_count(1_234_567.0), "1.2M");
        assert_eq!(fmt_rate(35.24), "35.2");
        assert_eq!(fmt_rate(512.4), "512");
        assert_eq!(fmt_ms(36.0), "36ms");
        assert_eq!(fmt_ms(1.2), "1.2ms");
        assert_eq!(fmt_ms(0.345), "0.34ms");
        assert_eq!(fmt_fig(553_800.0), "553800");
        assert_eq!(fmt_fig(12.34), "12.3");
        assert_eq!(fmt_fig(1.234), "1.23");
        assert_eq!(kib_approx(131_072.0), "128K");
        assert_eq!(kib_approx(5_427.0), "5.3K");
    }

    #[test]
    fn bytes_in_binary_units() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(4096), "4 KiB");
        assert_eq!(human_bytes(256 << 30), "256 GiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }
}
