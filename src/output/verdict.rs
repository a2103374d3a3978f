//! The one verdict readpath gives on a change against a published result:
//! "reproduced: -94% (published -96%); 5 v 5 rounds, chance by noise
//! 0.79%", "not reproduced: +39%, ranges apart (published -96%); 5 v 5
//! rounds, chance by noise 0.79%", "within noise: +3%, the ranges overlap
//! (published -96%); 5 v 5 rounds". Every place that states a result
//! against a seed (`compare`, `sweep`, the lab's seed verdict, the
//! explorer's demo line and live A/B, the slides) calls [`judge_values`]
//! (or [`judge`] where only the spreads are left), so the rule that decides
//! what counts as a change is written once: a change is a finding where
//! noise alone (an unchanged setting, every ordering of the rounds' values
//! alike likely) would put the two sides this far apart less than 5% of
//! the time. Ranges (min-max over rounds) apart are 2 in C(n+m, n) of the
//! orderings ([`chance_apart`]: 10% for 3 v 3, 2.9% for 4 v 4); ranges
//! that overlap by a pair or two are counted by their ranks
//! ([`chance_ranks`], the exact Mann-Whitney test: 8 v 8 rounds with one
//! pair the other way 0.031%), so one round out of line lowers a finding's
//! certainty instead of overturning it. Then the sign of the change
//! against the published sign decides. Apart at a larger chance is a hint
//! ([`Kind::Hint`]), not a finding; overlapping further, noise.

use serde::{Deserialize, Serialize};

use crate::metrics::Spread;
use crate::scenario::preset::Published;

/// What a change says of a published result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The published direction, ranges apart at a chance by noise under
    /// [`FINDING`] (or, published as no change, ranges that overlap).
    Reproduced,
    /// Ranges apart the other way (or a change where none was published),
    /// at a chance by noise under [`FINDING`].
    NotReproduced,
    /// Ranges apart at a chance by noise under [`FINDING`], with no
    /// published result to judge it against.
    Apart,
    /// Ranges apart, but too few rounds for that to be a finding: noise
    /// alone puts them so at least [`FINDING`] of the time (3 v 3 rounds:
    /// 10%).
    Hint,
    /// The ranges overlap: no direction can be claimed.
    Noise,
    /// One round on a side: no range to judge by.
    NoSpread,
    /// One side has no value.
    NotMeasured,
}

impl Kind {
    /// Whether the change is a finding: its ranges apart, at a chance by
    /// noise under [`FINDING`] (a direction is shown).
    pub fn is_significant(self) -> bool {
        matches!(self, Kind::Reproduced | Kind::NotReproduced | Kind::Apart)
    }
}

/// The chance by noise under which ranges apart are a finding: 5%.
pub const FINDING: f64 = 0.05;

/// The fewest rounds a side that make ranges apart a finding when both
/// sides have as many: [`chance_apart`]`(4, 4)` is 2.9%, under
/// [`FINDING`]; 3 v 3 is 10%.
pub const ROUNDS_FOR_FINDING: u32 = 4;

/// A computed verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Its kind.
    pub kind: Kind,
    /// After against before, % (None where not measured).
    pub change_pct: Option<f64>,
    /// True when the two ranges overlap.
    pub overlap: bool,
    /// The values each side's range is over, (before, after): interleaved
    /// rounds, or windows of one run where `windows` is true. Each side's
    /// own count: a round that measured nothing on one side leaves it
    /// fewer.
    #[serde(default)]
    pub rounds: [u32; 2],
    /// True when `rounds` counts windows of one run (a before and an after
    /// one after the other, [`of_windows`]), not interleaved rounds.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub windows: bool,
    /// The chance, 0..1, that noise alone puts ranges of these counts
    /// apart ([`chance_apart`]): set where the ranges are apart and each
    /// side has two values or more; absent where they overlap (there is
    /// no apartness to give a chance of), with one value on a side, or not
    /// measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chance: Option<f64>,
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

/// The chance that noise alone puts the range of `n` values wholly above
/// or wholly below the range of `m` values. With an unchanged setting and
/// interleaved rounds every ordering of the n + m values is as likely as
/// any other; one side wholly above the other is 2 of the C(n+m, n)
/// orderings (either side on top), so the chance is 2 / C(n+m, n): 3 v 3
/// 10%, 4 v 4 2.9%, 5 v 5 0.79%, 6 v 6 0.22%, 3 v 4 5.7%. 1 where a side
/// has no value. The binomial is exact in a u128 while it fits one (to 65
/// v 65: C(130, 65) is 9.5e37), then carried on in f64 (a chance under
/// 1e-38).
pub fn chance_apart(n: u32, m: u32) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    let (k, total) = (n.min(m) as u128, n as u128 + m as u128);
    // C(total, i + 1) = C(total, i) * (total - i) / (i + 1), whole at each
    // step; with g = gcd(C(total, i), i + 1), (i + 1) / g divides
    // total - i, so no step overflows before its result does.
    let gcd = |mut a: u128, mut b: u128| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut exact: u128 = 1;
    let mut i: u128 = 0;
    while i < k {
        let g = gcd(exact, i + 1);
        match (exact / g).checked_mul((total - i) / ((i + 1) / g)) {
            Some(c) => exact = c,
            None => break,
        }
        i += 1;
    }
    let mut c = exact as f64;
    while i < k {
        c = c * (total - i) as f64 / (i + 1) as f64;
        i += 1;
    }
    (2.0 / c).min(1.0)
}

/// A chance as a percent, two significant digits (`10%`, `2.9%`, `0.79%`,
/// `0.22%`), `under 0.001%` below that.
pub fn chance_text(p: f64) -> String {
    let pct = p * 100.0;
    if pct < 0.001 {
        return "under 0.001%".into();
    }
    let decimals = (1 - pct.log10().floor() as i32).max(0) as usize;
    let mut t = format!("{pct:.decimals$}");
    if t.contains('.') {
        t = t.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    format!("{t}%")
}

/// The verdict on `before` -> `after`, spreads over `rounds` interleaved
/// rounds (before's, after's), against `published` when given (its
/// `sign`: -1 lower, +1 higher, 0 no change; `figure` as quoted).
pub fn judge(
    before: &Spread,
    after: &Spread,
    rounds: [u32; 2],
    published: Option<(&str, i8)>,
) -> Verdict {
    judged(before, after, rounds, false, published, None)
}

/// [`judge`] over the values themselves (each round's, NaN for a round
/// that measured nothing): by their ranks, so that one round out of line
/// lowers the finding's certainty instead of overturning it. Where the
/// ranges are apart this is [`judge`]'s verdict exactly.
pub fn judge_values(before: &[f64], after: &[f64], published: Option<(&str, i8)>) -> Verdict {
    let (b, a) = (finite(before), finite(after));
    let counts = [b.len() as u32, a.len() as u32];
    judged(
        &Spread::of(b.iter().copied()),
        &Spread::of(a.iter().copied()),
        counts,
        false,
        published,
        Some(u_statistic(&b, &a)),
    )
}

fn finite(v: &[f64]) -> Vec<f64> {
    v.iter().copied().filter(|x| x.is_finite()).collect()
}

/// The Mann-Whitney U of `after` against `before`: the pairs (one value
/// of each side) in which `after`'s is the higher, a tie counting half.
/// 0 or `n·m` where the ranges lie apart.
pub fn u_statistic(before: &[f64], after: &[f64]) -> f64 {
    let mut u = 0.0;
    for b in before {
        for a in after {
            u += if a > b {
                1.0
            } else if a == b {
                0.5
            } else {
                0.0
            };
        }
    }
    u
}

/// Sides up to which [`chance_ranks`] counts orderings exactly (n + m);
/// beyond, the normal approximation of U, which is within a few percent
/// of the exact count there at the chances that decide (5% and under).
const EXACT_RANKS_UP_TO: u32 = 60;

/// The chance that noise alone (an unchanged setting, every ordering of
/// the n + m values as likely as any other) puts the two sides at least as
/// far apart as a U of `u` does, either way: twice the share of orderings
/// with as few pairs the other way or fewer (the exact two-sided
/// Mann-Whitney test, with ties counted against the change). With no pair
/// the other way it is [`chance_apart`]; with one, 4 in C(n+m, n) (8 v 8
/// rounds: 0.031%).
pub fn chance_ranks(u: f64, n: u32, m: u32) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    let nm = f64::from(n) * f64::from(m);
    // Pairs the other way, ties counted whole (against the change).
    let other = u.min(nm - u).max(0.0).ceil();
    if other == 0.0 {
        return chance_apart(n, m);
    }
    if n + m > EXACT_RANKS_UP_TO {
        let mu = nm / 2.0;
        let sigma = (nm * f64::from(n + m + 1) / 12.0).sqrt();
        let z = (other + 0.5 - mu) / sigma;
        return libm::erfc(-z / std::f64::consts::SQRT_2).min(1.0);
    }
    let k = other as usize;
    let (n, m) = (n as usize, m as usize);
    // c[i][u]: orderings of i values of one side and j of the other with
    // U = u (u <= k), built up over j: the highest value is the other
    // side's (above all i: U + i) or this side's.
    let mut prev = vec![vec![0.0f64; k + 1]; n + 1];
    for row in prev.iter_mut() {
        row[0] = 1.0;
    }
    for _j in 1..=m {
        let mut cur = vec![vec![0.0f64; k + 1]; n + 1];
        for i in 0..=n {
            for u in 0..=k {
                let mut v = if u >= i { prev[i][u - i] } else { 0.0 };
                if i > 0 {
                    v += cur[i - 1][u];
                }
                cur[i][u] = v;
            }
        }
        prev = cur;
    }
    let tail: f64 = prev[n].iter().sum();
    let total = (0..n.min(m)).fold(1.0f64, |c, i| c * (n + m - i) as f64 / (i + 1) as f64);
    (2.0 * tail / total).min(1.0)
}

/// [`judge`] over `counts` of the values each spread is over, rounds or
/// (`windows`) windows of one run, which the text names; by the values'
/// ranks where their U is given ([`judge_values`]), else by the ranges.
fn judged(
    before: &Spread,
    after: &Spread,
    counts: [u32; 2],
    windows: bool,
    published: Option<(&str, i8)>,
    u: Option<f64>,
) -> Verdict {
    let change = pct_change(before.median, after.median);
    let pub_note = published.map_or(String::new(), |(f, _)| format!(" (published {f})"));
    let c = |v: f64| format!("{v:+.0}%");
    let base = Verdict {
        kind: Kind::NotMeasured,
        change_pct: change,
        overlap: false,
        rounds: counts,
        windows,
        chance: None,
        published: published.map(|(f, _)| f.to_string()),
        text: String::new(),
    };
    let Some(ch) = change else {
        return Verdict {
            text: format!("not measured{pub_note}"),
            ..base
        };
    };
    let (one, unit) = if windows {
        ("window", "windows")
    } else {
        ("round", "rounds")
    };
    let [n, m] = counts;
    let sides = format!("{n} v {m} {unit}");
    let more = format!("({ROUNDS_FOR_FINDING} {unit} or more a side needed)");
    let overlap = before.overlaps(after);
    if n.min(m) < 2 {
        return Verdict {
            kind: Kind::NoSpread,
            overlap,
            text: format!(
                "{}, one {one}: no spread to judge by{pub_note}; {sides} {more}",
                c(ch)
            ),
            ..base
        };
    }
    // The chance by noise: of ranges this far apart, or (by the ranks,
    // where the values are known) of as few pairs the other way, where
    // that makes a finding. None: no direction can be claimed.
    let chance = match u {
        _ if !overlap => Some(chance_apart(n, m)),
        Some(u) => Some(chance_ranks(u, n, m)).filter(|&p| p < FINDING),
        None => None,
    };
    // How the two sides lie: apart, or apart but for some pairs.
    let lie = match u {
        Some(u) if overlap => {
            let nm = f64::from(n) * f64::from(m);
            let other = u.min(nm - u);
            format!(
                "all but {} of {} pairs apart",
                if other.fract() == 0.0 {
                    format!("{other:.0}")
                } else {
                    format!("{other:.1}")
                },
                nm
            )
        }
        _ => "ranges apart".to_string(),
    };
    let odds = |p: f64| format!("; {sides}, chance by noise {}", chance_text(p));
    let (kind, text) = match (chance, published.map(|(_, s)| s)) {
        (None, Some(0)) => (
            Kind::Reproduced,
            format!("reproduced: no clear change, {}{pub_note}; {sides}", c(ch)),
        ),
        (None, _) => (
            Kind::Noise,
            format!(
                "within noise: {}, the ranges overlap{pub_note}; {sides}",
                c(ch)
            ),
        ),
        (Some(p), _) if p >= FINDING => (
            Kind::Hint,
            format!(
                "a hint, not a finding: {}, {lie}{pub_note}{} {more}",
                c(ch),
                odds(p)
            ),
        ),
        (Some(p), None) => (Kind::Apart, format!("{}, {lie}{}", c(ch), odds(p))),
        (Some(p), Some(sign)) => {
            let went: i8 = if ch > 0.0 { 1 } else { -1 };
            if sign != 0 && went == sign {
                let how = if overlap {
                    format!(", {lie}")
                } else {
                    String::new()
                };
                (
                    Kind::Reproduced,
                    format!("reproduced: {}{how}{pub_note}{}", c(ch), odds(p)),
                )
            } else {
                (
                    Kind::NotReproduced,
                    format!("not reproduced: {}, {lie}{pub_note}{}", c(ch), odds(p)),
                )
            }
        }
    };
    Verdict {
        kind,
        overlap,
        chance,
        text,
        ..base
    }
}

/// [`judge`] against a preset's [`Published`] result, `before` and `after`
/// being the first and second values of its `[compare]`.
pub fn against(
    before: &Spread,
    after: &Spread,
    rounds: [u32; 2],
    published: &Published,
) -> Verdict {
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
    /// The verdict (its `rounds` are each side's windows, `windows` set).
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
/// Seconds dropped after the start of a run before the explorer's windows
/// (a baseline's among them) count: the workers and the page cache ramp
/// up for longer than a change takes to settle (measured in BENCHMARKS.md,
/// "the explorer's start-up ramp"). A longer ramp shows as a baseline
/// whose first half and second half lie apart, which the panel says.
pub const START_SETTLE_S: f64 = 5.0;

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
/// until each side has two windows. The rule is [`judge`]'s with the
/// windows counted as rounds; its chance by noise holds as far as the
/// windows are alike but for the change (a drift of the machine between
/// the two stretches counts as a change here, which interleaved rounds
/// would spread over both sides).
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
    let counts = [b.len() as u32, a.len() as u32];
    let (sb, sa) = (Spread::of(b.iter().copied()), Spread::of(a.iter().copied()));
    let published = published.filter(|p| p.metric == metric.name);
    let figure = published.map(|p| (p.figure(), p.sign()));
    let u = u_statistic(&b, &a);
    let verdict = judged(
        &sb,
        &sa,
        counts,
        true,
        figure.as_ref().map(|(f, s)| (f.as_str(), *s)),
        Some(u),
    );
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

    /// 2 / C(n+m, n), exact: the chance noise puts one side's range
    /// wholly above or below the other's.
    #[test]
    fn the_chance_by_noise_of_ranges_apart_is_exact() {
        assert_eq!(chance_apart(3, 3), 0.1);
        assert_eq!(chance_apart(4, 4), 2.0 / 70.0);
        assert_eq!(chance_apart(5, 5), 2.0 / 252.0);
        assert_eq!(chance_apart(6, 6), 2.0 / 924.0);
        assert_eq!(chance_apart(3, 4), 2.0 / 35.0);
        assert_eq!(chance_apart(4, 3), 2.0 / 35.0);
        assert_eq!(chance_apart(2, 2), 2.0 / 6.0);
        assert_eq!(chance_apart(1, 1), 1.0);
        assert_eq!(chance_apart(0, 5), 1.0);
        // C(128, 64) in whole numbers.
        assert_eq!(
            chance_apart(64, 64),
            2.0 / 23_951_146_041_928_082_866_135_587_776_380_551_750u128 as f64
        );
        // C(200, 100), about 9.05e58, is past a u128: carried on in f64.
        let huge = chance_apart(100, 100);
        assert!(huge > 2.0 / 9.06e58 && huge < 2.0 / 9.04e58, "{huge}");
        for (p, t) in [
            (0.1, "10%"),
            (2.0 / 70.0, "2.9%"),
            (2.0 / 252.0, "0.79%"),
            (2.0 / 924.0, "0.22%"),
            (2.0 / 35.0, "5.7%"),
            (1.0 / 3.0, "33%"),
            (1.0, "100%"),
            (0.0999, "10%"),
            (1e-9, "under 0.001%"),
        ] {
            assert_eq!(chance_text(p), t, "{p}");
        }
    }

    /// The exact Mann-Whitney tail: counted by hand for small sides, equal
    /// to the ranges' chance with no pair the other way, symmetric, and
    /// the normal approximation beyond 60 values near the exact count.
    #[test]
    fn the_chance_by_noise_of_ranks_is_counted_exactly() {
        // 4 v 4: U = 0 and U = 1 are one ordering each of 70.
        assert_eq!(chance_ranks(0.0, 4, 4), chance_apart(4, 4));
        assert!((chance_ranks(1.0, 4, 4) - 4.0 / 70.0).abs() < 1e-15);
        // U = 2: two orderings more (two values swapped at the edge, or
        // one value two places in).
        assert!((chance_ranks(2.0, 4, 4) - 8.0 / 70.0).abs() < 1e-15);
        // Either way round, and a tie counts as a pair the other way.
        assert_eq!(chance_ranks(15.0, 4, 4), chance_ranks(1.0, 4, 4));
        assert_eq!(chance_ranks(0.5, 4, 4), chance_ranks(1.0, 4, 4));
        // 8 v 8 with one pair the other way: 4 of C(16, 8) = 12870.
        assert!((chance_ranks(1.0, 8, 8) - 4.0 / 12870.0).abs() < 1e-15);
        // 3 v 5, U = 1: 2 of C(8, 3) = 56, twice.
        assert!((chance_ranks(1.0, 3, 5) - 4.0 / 56.0).abs() < 1e-15);
        // Half the pairs each way: no change at all.
        assert_eq!(chance_ranks(8.0, 4, 4), 1.0);
        // At 30 v 30 (exact) and 31 v 31 (normal) the chance at the same
        // standardised distance agrees within a few percent.
        let at = |n: u32, z: f64| {
            let nm = f64::from(n * n);
            let sd = (nm * f64::from(2 * n + 1) / 12.0).sqrt();
            chance_ranks((nm / 2.0 - z * sd).round(), n, n)
        };
        for z in [2.0, 2.5, 3.0] {
            let (exact, normal) = (at(30, z), at(31, z));
            assert!(
                (normal / exact - 1.0).abs() < 0.25,
                "z {z}: {exact} {normal}"
            );
        }
        assert_eq!(u_statistic(&[1.0, 2.0], &[3.0, 4.0]), 4.0);
        assert_eq!(u_statistic(&[1.0, 3.0], &[3.0, 4.0]), 3.5);
    }

    /// The live A/B the issue saw: apart at -80% over 7 rounds, then one
    /// noisy turn. By the ranges it flipped to noise; by the ranks it
    /// stays a finding, at a larger chance, and says how the sides lie.
    #[test]
    fn one_round_out_of_line_does_not_overturn_a_finding() {
        let before = [100.0, 104.0, 98.0, 101.0, 103.0, 99.0, 102.0, 100.5];
        let mut after = vec![20.0, 21.0, 19.0, 22.0, 20.5, 19.5, 21.5];
        let v = judge_values(&before[..7], &after, None);
        assert_eq!(v.kind, Kind::Apart);
        after.push(98.5); // one turn out of line: above one of the before turns
        let ranges = judge(
            &Spread::of(before.iter().copied()),
            &Spread::of(after.iter().copied()),
            [8, 8],
            None,
        );
        assert_eq!(ranges.kind, Kind::Noise, "the ranges alone overlap");
        let v = judge_values(&before, &after, None);
        assert_eq!(v.kind, Kind::Apart, "{}", v.text);
        assert!(v.overlap);
        assert_eq!(v.chance, Some(chance_ranks(1.0, 8, 8)));
        assert!(v.text.contains("all but 1 of 64 pairs apart"), "{}", v.text);
        assert!(
            v.text.contains("8 v 8 rounds, chance by noise 0.031%"),
            "{}",
            v.text
        );
        // Against a published fall it reproduces, saying how.
        let v = judge_values(&before, &after, Some(("-96%", -1)));
        assert_eq!(v.kind, Kind::Reproduced, "{}", v.text);
        // Sides mixed through each other stay noise; a NaN round is left out.
        let v = judge_values(&[1.0, 3.0, 5.0, f64::NAN], &[2.0, 4.0, 6.0], None);
        assert_eq!((v.kind, v.rounds), (Kind::Noise, [3, 3]));
    }

    /// Ranges apart are a finding only under a 5% chance by noise: 3 v 3
    /// is a hint, 4 v 4 reproduces; the counts and the chance are in the
    /// text and the JSON.
    #[test]
    fn ranges_apart_in_three_rounds_are_a_hint_in_four_a_finding() {
        let fall = published(-96.0, -96.0);
        let (b, a) = (s(100.0, 90.0, 110.0), s(32.0, 30.0, 35.0));
        let v = against(&b, &a, [3, 3], &fall);
        assert_eq!(v.kind, Kind::Hint);
        assert!(!v.kind.is_significant());
        assert_eq!(v.chance, Some(0.1));
        assert_eq!(
            v.text,
            "a hint, not a finding: -68%, ranges apart (published -96%); 3 v 3 rounds, chance by noise 10% (4 rounds or more a side needed)"
        );
        let v = against(&b, &a, [4, 4], &fall);
        assert_eq!(v.kind, Kind::Reproduced);
        assert!(v.kind.is_significant());
        assert_eq!(
            v.text,
            "reproduced: -68% (published -96%); 4 v 4 rounds, chance by noise 2.9%"
        );
        let j = serde_json::to_value(&v).unwrap();
        assert_eq!(j["kind"], "reproduced");
        assert_eq!(j["rounds"], serde_json::json!([4, 4]));
        assert_eq!(j["chance"].as_f64(), Some(2.0 / 70.0));
        assert!(j.get("windows").is_none(), "{j}");
        assert_eq!(serde_json::from_value::<Verdict>(j).unwrap(), v);
        // Unequal sides: 3 v 4 is 5.7%, still a hint; 5 v 5 0.79%.
        assert_eq!(against(&b, &a, [3, 4], &fall).kind, Kind::Hint);
        let v = against(&b, &a, [5, 5], &fall);
        assert_eq!(
            v.text,
            "reproduced: -68% (published -96%); 5 v 5 rounds, chance by noise 0.79%"
        );
        // A verdict of an older report, without the counts, reads back.
        let old: Verdict = serde_json::from_str(
            r#"{"kind":"reproduced","change_pct":-68.0,"overlap":false,"text":"reproduced: -68%"}"#,
        )
        .unwrap();
        assert_eq!((old.rounds, old.chance, old.windows), ([0, 0], None, false));
        // Overlapping ranges: noise, no chance stated.
        let v = against(&b, &s(103.0, 95.0, 112.0), [3, 3], &fall);
        assert_eq!((v.kind, v.chance), (Kind::Noise, None));
        let j = serde_json::to_value(&v).unwrap();
        assert!(j.get("chance").is_none(), "{j}");
    }

    /// Windows of one run are judged by the same rule, named windows.
    #[test]
    fn windows_of_one_run_are_judged_by_the_same_rule_and_say_so() {
        use crate::metrics::WindowStats;
        let w = |mib: f64| WindowStats {
            secs: 2.0,
            reads: 100,
            throughput_mib_s: mib,
            ..WindowStats::default()
        };
        let m = crate::metrics::table::metric("throughput_mib_s").unwrap();
        let before: Vec<WindowStats> = [100.0, 101.0, 102.0].map(w).to_vec();
        let after: Vec<WindowStats> = [120.0, 121.0, 122.0].map(w).to_vec();
        let v = judge_windows(&before, &after, m, None).unwrap();
        assert_eq!(v.verdict.kind, Kind::Hint);
        assert!(v.verdict.windows);
        assert_eq!(
            v.verdict.text,
            "a hint, not a finding: +20%, ranges apart; 3 v 3 windows, chance by noise 10% (4 windows or more a side needed)"
        );
        let more: Vec<WindowStats> = [120.0, 121.0, 122.0, 123.0, 124.0].map(w).to_vec();
        let v = judge_windows(&before, &more, m, None).unwrap();
        assert_eq!(v.verdict.kind, Kind::Apart);
        assert_eq!(v.verdict.rounds, [3, 5]);
        assert_eq!(
            v.verdict.text,
            "+21%, ranges apart; 3 v 5 windows, chance by noise 3.6%"
        );
        assert!(judge_windows(&before[..1], &more, m, None).is_none());
    }

    #[test]
    fn each_verdict_in_words() {
        let fall = published(-96.0, -96.0);
        let v = against(&s(100.0, 90.0, 110.0), &s(32.0, 30.0, 35.0), [4, 4], &fall);
        assert_eq!(v.kind, Kind::Reproduced);
        assert_eq!(
            v.text,
            "reproduced: -68% (published -96%); 4 v 4 rounds, chance by noise 2.9%"
        );
        let v = against(
            &s(100.0, 90.0, 110.0),
            &s(139.0, 130.0, 150.0),
            [4, 4],
            &fall,
        );
        assert_eq!(v.kind, Kind::NotReproduced);
        assert_eq!(
            v.text,
            "not reproduced: +39%, ranges apart (published -96%); 4 v 4 rounds, chance by noise 2.9%"
        );
        let v = against(
            &s(100.0, 90.0, 110.0),
            &s(103.0, 95.0, 112.0),
            [4, 4],
            &fall,
        );
        assert_eq!(v.kind, Kind::Noise);
        assert_eq!(
            v.text,
            "within noise: +3%, the ranges overlap (published -96%); 4 v 4 rounds"
        );
        let v = against(&s(100.0, 100.0, 100.0), &s(50.0, 50.0, 50.0), [1, 1], &fall);
        assert_eq!(v.kind, Kind::NoSpread);
        assert_eq!(
            v.text,
            "-50%, one round: no spread to judge by (published -96%); 1 v 1 rounds (4 rounds or more a side needed)"
        );
        // One side with a single round (the other's round measured
        // nothing): no spread either.
        let v = against(&s(100.0, 90.0, 110.0), &s(50.0, 50.0, 50.0), [4, 1], &fall);
        assert_eq!((v.kind, v.chance), (Kind::NoSpread, None));
        let flat = published(-2.0, 2.0);
        assert_eq!(flat.figure(), "~0% (-2..+2%)");
        let v = against(
            &s(100.0, 90.0, 110.0),
            &s(101.0, 95.0, 112.0),
            [4, 4],
            &flat,
        );
        assert_eq!(v.kind, Kind::Reproduced);
        assert_eq!(
            v.text,
            "reproduced: no clear change, +1% (published ~0% (-2..+2%)); 4 v 4 rounds"
        );
        let v = against(
            &s(100.0, 90.0, 110.0),
            &s(150.0, 140.0, 160.0),
            [4, 4],
            &flat,
        );
        assert_eq!(v.kind, Kind::NotReproduced);
        // Published as no change, apart in 3 v 3: a hint of a change.
        let v = against(
            &s(100.0, 90.0, 110.0),
            &s(150.0, 140.0, 160.0),
            [3, 3],
            &flat,
        );
        assert_eq!(v.kind, Kind::Hint);
        let up = published(25.0, 35.0);
        assert_eq!(up.figure(), "+25..+35%");
        assert_eq!(published(-40.0, -20.0).figure(), "-20..-40%");
        let v = against(&s(100.0, 95.0, 105.0), &s(130.0, 125.0, 140.0), [6, 6], &up);
        assert_eq!(
            v.text,
            "reproduced: +30% (published +25..+35%); 6 v 6 rounds, chance by noise 0.22%"
        );
        let v = against(
            &s(f64::NAN, f64::NAN, f64::NAN),
            &s(1.0, 1.0, 1.0),
            [4, 4],
            &up,
        );
        assert_eq!(v.kind, Kind::NotMeasured);
        assert_eq!(v.text, "not measured (published +25..+35%)");
        // No published figure: only the change and its significance.
        let v = judge(
            &s(100.0, 90.0, 110.0),
            &s(139.0, 130.0, 150.0),
            [4, 4],
            None,
        );
        assert_eq!(v.kind, Kind::Apart);
        assert_eq!(
            v.text,
            "+39%, ranges apart; 4 v 4 rounds, chance by noise 2.9%"
        );
    }
}
