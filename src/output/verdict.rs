//! The one verdict readpath gives on a change against a published result:
//! "reproduced: -68% (published -96%)", "not reproduced: +39%, ranges
//! apart (published -96%)", "within noise: +3% (published -96%)". Every
//! place that states a result against a seed (`compare`, `sweep`, the lab's
//! seed verdict, the explorer's demo line, the slides) calls [`judge`], so
//! the rule that decides what counts as a change is written once: two
//! spreads (min-max over rounds) that overlap are noise; apart, the sign
//! of the change against the published sign decides.

use serde::{Deserialize, Serialize};

use crate::metrics::Spread;
use crate::scenario::preset::Published;

/// What a change says of a published result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The published direction (or, published as no change, no clear
    /// change).
    Reproduced,
    /// Ranges apart, the other way (or a change where none was published).
    NotReproduced,
    /// Ranges apart, with no published result to judge it against.
    Apart,
    /// The ranges overlap: no direction can be claimed.
    Noise,
    /// One round: no range to judge by.
    NoSpread,
    /// One side has no value.
    NotMeasured,
}

impl Kind {
    /// Whether the change's ranges are apart (a direction is shown).
    pub fn is_significant(self) -> bool {
        matches!(self, Kind::Reproduced | Kind::NotReproduced | Kind::Apart)
    }
}

/// A computed verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Its kind.
    pub kind: Kind,
    /// After against before, % (None where not measured).
    pub change_pct: Option<f64>,
    /// True when the two ranges overlap.
    pub overlap: bool,
    /// The published figure it was judged against (`-96%`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
    /// The verdict in words.
    pub text: String,
}

/// After against before, %.
pub fn pct_change(before: f64, after: f64) -> Option<f64> {
    (before.is_finite() && after.is_finite() && before != 0.0)
        .then(|| (after / before - 1.0) * 100.0)
}

/// The verdict on `before` -> `after` (spreads over `rounds` rounds each),
/// against `published` when given (its `sign`: -1 lower, +1 higher, 0 no
/// change; `figure` as quoted).
pub fn judge(
    before: &Spread,
    after: &Spread,
    rounds: u32,
    published: Option<(&str, i8)>,
) -> Verdict {
    let change = pct_change(before.median, after.median);
    let pub_note = published.map_or(String::new(), |(f, _)| format!(" (published {f})"));
    let c = |v: f64| format!("{v:+.0}%");
    let Some(ch) = change else {
        return Verdict {
            kind: Kind::NotMeasured,
            change_pct: None,
            overlap: false,
            published: published.map(|(f, _)| f.to_string()),
            text: format!("not measured{pub_note}"),
        };
    };
    let overlap = before.overlaps(after);
    let (kind, text) = if rounds < 2 {
        (
            Kind::NoSpread,
            format!(
                "{}, one round: no spread to judge by (use --rounds 3 or more){pub_note}",
                c(ch)
            ),
        )
    } else {
        match (overlap, published.map(|(_, s)| s)) {
            (true, Some(0)) => (
                Kind::Reproduced,
                format!("reproduced: no clear change, {}{pub_note}", c(ch)),
            ),
            (true, _) => (
                Kind::Noise,
                format!("within noise: {}, the ranges overlap{pub_note}", c(ch)),
            ),
            (false, None) => (Kind::Apart, format!("{}, ranges apart", c(ch))),
            (false, Some(sign)) => {
                let went: i8 = if ch > 0.0 { 1 } else { -1 };
                if sign != 0 && went == sign {
                    (Kind::Reproduced, format!("reproduced: {}{pub_note}", c(ch)))
                } else {
                    (
                        Kind::NotReproduced,
                        format!("not reproduced: {}, ranges apart{pub_note}", c(ch)),
                    )
                }
            }
        }
    };
    Verdict {
        kind,
        change_pct: Some(ch),
        overlap,
        published: published.map(|(f, _)| f.to_string()),
        text,
    }
}

/// [`judge`] against a preset's [`Published`] result, `before` and `after`
/// being the first and second values of its `[compare]`.
pub fn against(before: &Spread, after: &Spread, rounds: u32, published: &Published) -> Verdict {
    judge(
        before,
        after,
        rounds,
        Some((&published.figure(), published.sign())),
    )
}

/// A before/after within one run (a demo's baseline and what followed):
/// the metric's value per window of `chunk_s` seconds after `settle_s`
/// seconds of each side, its medians and the verdict over those windows.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowVerdict {
    /// The verdict (its `rounds` are the windows of the shorter side).
    pub verdict: Verdict,
    /// Median of the windows before.
    pub before: f64,
    /// Median of the windows after.
    pub after: f64,
    /// Windows on the shorter side.
    pub windows: usize,
}

/// Seconds of each window a verdict within one run takes one sample from
/// (the explorer's baseline panel, a demo's verdict, the slides).
pub const WINDOW_S: f64 = 2.0;
/// Seconds dropped after a change before a verdict within one run counts.
pub const SETTLE_S: f64 = 1.0;

/// The measurements of each whole window of `chunk_s` seconds of
/// `records`, after the first `settle_s` seconds are dropped (a pipeline
/// settling after a switch); paused intervals and intervals without reads
/// are left out. The rule is [`Windows`]'s, fed one record at a time.
pub fn window_stats(
    records: &[&crate::metrics::IntervalRecord],
    chunk_s: f64,
    settle_s: f64,
) -> Vec<crate::metrics::WindowStats> {
    let mut out = Vec::new();
    let mut w = Windows::new(chunk_s, settle_s);
    let mut chunk: Vec<&crate::metrics::IntervalRecord> = Vec::new();
    for r in records {
        match w.feed(r) {
            Fed::Dropped => {}
            Fed::Kept => chunk.push(r),
            Fed::Closed => {
                chunk.push(r);
                out.extend(crate::metrics::WindowStats::of(chunk.iter().copied()));
                chunk.clear();
            }
        }
    }
    out
}

/// Where [`Windows::feed`] put a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fed {
    /// In the settle time, paused, or without reads: in no window.
    Dropped,
    /// In the window being filled.
    Kept,
    /// In the window being filled, which it completes.
    Closed,
}

/// [`window_stats`]'s cutting of records into windows, one record at a
/// time, for a caller that holds the records and measures each window
/// once, as it closes (the explorer's "now", each record taken in once).
#[derive(Debug, Clone, PartialEq)]
pub struct Windows {
    chunk_s: f64,
    settle_s: f64,
    skipped: f64,
    secs: f64,
}

impl Windows {
    /// Windows of `chunk_s` seconds after `settle_s` seconds dropped.
    pub fn new(chunk_s: f64, settle_s: f64) -> Windows {
        Windows {
            chunk_s,
            settle_s,
            skipped: 0.0,
            secs: 0.0,
        }
    }

    /// Takes the next record in time order.
    pub fn feed(&mut self, r: &crate::metrics::IntervalRecord) -> Fed {
        if self.skipped < self.settle_s - 1e-9 {
            self.skipped += r.interval_s;
            return Fed::Dropped;
        }
        if r.paused || r.reads == 0 {
            return Fed::Dropped;
        }
        self.secs += r.interval_s;
        if self.secs >= self.chunk_s - 1e-9 {
            self.secs = 0.0;
            return Fed::Closed;
        }
        Fed::Kept
    }
}

/// The metric's value in each window of [`window_stats`] (where it has one).
pub fn window_values(
    records: &[&crate::metrics::IntervalRecord],
    metric: &crate::metrics::Metric,
    chunk_s: f64,
    settle_s: f64,
) -> Vec<f64> {
    values(&window_stats(records, chunk_s, settle_s), metric)
}

fn values(windows: &[crate::metrics::WindowStats], metric: &crate::metrics::Metric) -> Vec<f64> {
    windows
        .iter()
        .map(metric.window)
        .filter(|v| v.is_finite())
        .collect()
}

/// The verdict on `before` -> `after` (two stretches of one run, one after
/// the other: not interleaved) over windows of `chunk_s` seconds; None
/// until each side has two windows.
pub fn of_windows(
    before: &[&crate::metrics::IntervalRecord],
    after: &[&crate::metrics::IntervalRecord],
    metric: &crate::metrics::Metric,
    published: Option<&Published>,
    chunk_s: f64,
    settle_s: f64,
) -> Option<WindowVerdict> {
    judge_windows(
        &window_stats(before, chunk_s, settle_s),
        &window_stats(after, chunk_s, settle_s),
        metric,
        published,
    )
}

/// [`of_windows`] over windows already measured ([`window_stats`]).
pub fn judge_windows(
    before: &[crate::metrics::WindowStats],
    after: &[crate::metrics::WindowStats],
    metric: &crate::metrics::Metric,
    published: Option<&Published>,
) -> Option<WindowVerdict> {
    let b = values(before, metric);
    let a = values(after, metric);
    let windows = b.len().min(a.len());
    if windows < 2 {
        return None;
    }
    let (sb, sa) = (Spread::of(b), Spread::of(a));
    let published = published.filter(|p| p.metric == metric.name);
    let verdict = match published {
        Some(p) => against(&sb, &sa, windows as u32, p),
        None => judge(&sb, &sa, windows as u32, None),
    };
    Some(WindowVerdict {
        verdict,
        before: sb.median,
        after: sa.median,
        windows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(median: f64, min: f64, max: f64) -> Spread {
        Spread {
            median,
            min,
            max,
            change_pct: None,
        }
    }

    fn published(lo: f64, hi: f64) -> Published {
        Published {
            source: "x".into(),
            metric: "iops".into(),
            change: (lo, hi),
            result: "y".into(),
        }
    }

    #[test]
    fn each_verdict_in_words() {
        let fall = published(-96.0, -96.0);
        let v = against(&s(100.0, 90.0, 110.0), &s(32.0, 30.0, 35.0), 3, &fall);
        assert_eq!(v.kind, Kind::Reproduced);
        assert_eq!(v.text, "reproduced: -68% (published -96%)");
        let v = against(&s(100.0, 90.0, 110.0), &s(139.0, 130.0, 150.0), 3, &fall);
        assert_eq!(v.kind, Kind::NotReproduced);
        assert_eq!(
            v.text,
            "not reproduced: +39%, ranges apart (published -96%)"
        );
        let v = against(&s(100.0, 90.0, 110.0), &s(103.0, 95.0, 112.0), 3, &fall);
        assert_eq!(v.kind, Kind::Noise);
        assert_eq!(
            v.text,
            "within noise: +3%, the ranges overlap (published -96%)"
        );
        let v = against(&s(100.0, 100.0, 100.0), &s(50.0, 50.0, 50.0), 1, &fall);
        assert_eq!(v.kind, Kind::NoSpread);
        assert!(v.text.starts_with("-50%, one round"), "{}", v.text);
        let flat = published(-2.0, 2.0);
        assert_eq!(flat.figure(), "~0% (-2..+2%)");
        let v = against(&s(100.0, 90.0, 110.0), &s(101.0, 95.0, 112.0), 3, &flat);
        assert_eq!(v.kind, Kind::Reproduced);
        assert_eq!(
            v.text,
            "reproduced: no clear change, +1% (published ~0% (-2..+2%))"
        );
        let v = against(&s(100.0, 90.0, 110.0), &s(150.0, 140.0, 160.0), 3, &flat);
        assert_eq!(v.kind, Kind::NotReproduced);
        let up = published(25.0, 35.0);
        assert_eq!(up.figure(), "+25..+35%");
        assert_eq!(published(-40.0, -20.0).figure(), "-20..-40%");
        let v = against(&s(100.0, 95.0, 105.0), &s(130.0, 125.0, 140.0), 3, &up);
        assert_eq!(v.text, "reproduced: +30% (published +25..+35%)");
        let v = against(&s(f64::NAN, f64::NAN, f64::NAN), &s(1.0, 1.0, 1.0), 3, &up);
        assert_eq!(v.kind, Kind::NotMeasured);
        // No published figure: only the change and its significance.
        let v = judge(&s(100.0, 90.0, 110.0), &s(139.0, 130.0, 150.0), 3, None);
        assert_eq!(v.text, "+39%, ranges apart");
    }
}
