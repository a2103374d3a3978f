//! The live A/B (`A`): a verdict you can act on while exploring.
//!
//! Two stretches of one run, one after the other, differ in everything that
//! drifts with time (the page cache filling, another tenant, thermal state),
//! so the passive baseline panel can only say how far apart they look.
//! `compare` answers properly by interleaving rounds of the two settings;
//! this does the same inside the explorer: it alternates the workload
//! between the baseline's settings and the current ones every
//! [`TURN_S`] seconds, drops the first [`SETTLE_S`] seconds after each
//! switch (the pipeline settling), and takes one value per metric from the
//! rest of each turn. A round is one turn of each side; the verdict per
//! metric is [`crate::output::verdict::judge`] over the rounds, the very
//! rule `compare` uses (the two sides' min-max over rounds apart at a
//! chance by noise under 5%, which takes 4 rounds; apart in fewer, a hint;
//! overlapping, noise), so it firms up as rounds accumulate.

use crate::metrics::{IntervalRecord, METRICS, Metric, Spread, WindowStats};
use crate::output::verdict::{Verdict, judge_values};
use crate::settings::Settings;

/// Seconds each side runs per turn.
pub const TURN_S: f64 = 5.0;
/// Seconds dropped after each switch before a turn counts.
pub const SETTLE_S: f64 = 1.5;
/// Seconds a turn must hold after its settle time to give a value (a
/// turn cut short by a stop or a pause gives none).
pub const MIN_SAMPLE_S: f64 = 2.0;

/// Side 0 runs the baseline's settings, side 1 the ones set when `A` was
/// pressed.
pub const SIDES: [&str; 2] = ["baseline", "now"];

/// `1 round`, `3 rounds`.
pub fn rounds_text(n: usize) -> String {
    format!("{n} round{}", if n == 1 { "" } else { "s" })
}

/// The events panel's line for the round just completed: its number and
/// each side's value of the first explorer metric in it
/// (`A/B round 3: MiB/s baseline 77.4 · now 85.0`).
pub fn round_line(ab: &AbRun) -> String {
    let n = ab.rounds();
    let Some(m) = METRICS.iter().find(|m| m.explorer) else {
        return format!("A/B round {n}");
    };
    let side = |s: usize| {
        ab.turns[s]
            .get(n.wrapping_sub(1))
            .map_or("-".to_string(), |w| {
                m.cell((m.window)(w)).trim().to_string()
            })
    };
    format!(
        "A/B round {n}: {} {} {} · {} {}",
        m.label,
        SIDES[0],
        side(0),
        SIDES[1],
        side(1)
    )
}

/// The prefix of the event that carries an ended A/B's result (into the
/// recording, the events panel and the summary): logged, not a marker.
pub const RESULT_PREFIX: &str = crate::output::report::AB_RESULT;

/// An ended A/B's result in one line, every explorer metric with its
/// medians, change and verdict (the panel's marks: `~` within noise, `?` a
/// hint, the chance by noise of a finding): `A/B result: 8 rounds,
/// baseline -> now: MiB/s 77.4 -> 85.0 +10% (chance by noise 0.031%) ·
/// p50 ...`. None before a whole round.
pub fn result_line(ab: &AbRun) -> Option<String> {
    let rounds = ab.rounds();
    if rounds == 0 {
        return None;
    }
    let parts: Vec<String> = ab
        .rows()
        .iter()
        .filter_map(|r| {
            let v = r.verdict.as_ref()?;
            let m = r.metric;
            let cell = |x: f64| m.cell(x).trim().to_string();
            let change = match (v.change_pct, v.kind) {
                (None, _) => "-".to_string(),
                (Some(c), k) if k.is_significant() => format!(
                    "{c:+.0}% (chance by noise {})",
                    v.chance
                        .map_or("-".into(), crate::output::verdict::chance_text)
                ),
                (Some(c), crate::output::verdict::Kind::Hint) => format!("?{c:+.0}% (a hint)"),
                (Some(c), _) => format!("~{c:+.0}% (within noise)"),
            };
            Some(format!(
                "{} {} -> {} {change}",
                m.short,
                cell(r.spreads[0].median),
                cell(r.spreads[1].median)
            ))
        })
        .collect();
    Some(format!(
        "{RESULT_PREFIX}{}, {} -> {}: {}",
        rounds_text(rounds),
        SIDES[0],
        SIDES[1],
        parts.join(" · ")
    ))
}

impl AbRun {
    /// What the headline numbers show while it runs: the side on now,
    /// over its current turn after the settle time (from `history`, up to
    /// `t_s`), or its last whole turn while the current one settles; so a
    /// number is never a mix of the two sides. None before either.
    pub fn side_now<'a>(
        &self,
        t_s: f64,
        history: impl Iterator<Item = &'a IntervalRecord> + Clone,
    ) -> Option<(WindowStats, &'static str)> {
        let from = self.since_s + SETTLE_S;
        let current = history
            .filter(|r| r.t_s - r.interval_s >= from - 1e-9 && r.t_s <= t_s + 1e-9 && !r.paused);
        WindowStats::of(current)
            .or_else(|| self.turns[self.on].last().copied())
            .map(|w| (w, SIDES[self.on]))
    }
}

/// A live A/B in progress.
#[derive(Debug, Clone, PartialEq)]
pub struct AbRun {
    /// The settings of each side (0: the baseline's, 1: the current ones).
    pub sides: [Settings; 2],
    /// The side running now.
    pub on: usize,
    /// When the side running now was switched to (seconds of the run).
    pub since_s: f64,
    /// Each side's turns so far, one window of measurements each.
    pub turns: [Vec<WindowStats>; 2],
    /// When each turn began and its side, oldest first (the latest
    /// [`MAX_SPANS`]): drawn above the latency chart.
    pub spans: Vec<(f64, usize)>,
}

/// Turns an A/B keeps for the charts: 200 turns of [`TURN_S`] are over 16
/// minutes, more than the widest time window (10 minutes).
pub const MAX_SPANS: usize = 200;

/// One turn on the charts: from, to (seconds of the run) and its side.
pub type TurnSpan = (f64, f64, usize);

/// One metric's A/B so far.
#[derive(Debug, Clone)]
pub struct AbRow {
    /// The metric.
    pub metric: &'static Metric,
    /// Its value over each side's turns.
    pub spreads: [Spread; 2],
    /// The verdict, once each side has a turn.
    pub verdict: Option<Verdict>,
}

impl AbRun {
    /// An A/B between `baseline` and `current`, starting on the current
    /// settings at `t_s` (the baseline's run next).
    pub fn new(baseline: Settings, current: Settings, t_s: f64) -> AbRun {
        AbRun {
            sides: [baseline, current],
            on: 1,
            since_s: t_s,
            turns: [Vec::new(), Vec::new()],
            spans: vec![(t_s, 1)],
        }
    }

    /// Its turns until `now_s` (the current one ends there).
    pub fn turn_spans(&self, now_s: f64) -> Vec<TurnSpan> {
        let ends = self.spans.iter().skip(1).map(|s| s.0).chain([now_s]);
        self.spans
            .iter()
            .zip(ends)
            .map(|(&(from, side), to)| (from, to, side))
            .collect()
    }

    /// Complete rounds (one turn of each side).
    pub fn rounds(&self) -> usize {
        self.turns[0].len().min(self.turns[1].len())
    }

    /// Seconds into the current turn at `t_s`.
    pub fn secs_into_turn(&self, t_s: f64) -> f64 {
        (t_s - self.since_s).max(0.0)
    }

    /// At `t_s`, with the run's `history`: when the turn is over, takes its
    /// value (the intervals after its settle time) and returns the settings
    /// of the other side to switch to, the caller applying them and calling
    /// [`Self::switched`]. None: the turn goes on.
    pub fn due<'a>(
        &mut self,
        t_s: f64,
        history: impl Iterator<Item = &'a IntervalRecord> + Clone,
    ) -> Option<Settings> {
        if self.secs_into_turn(t_s) < TURN_S {
            return None;
        }
        if let Some(w) = turn_window(history, self.since_s + SETTLE_S, t_s) {
            self.turns[self.on].push(w);
        }
        Some(self.sides[1 - self.on].clone())
    }

    /// The switch asked for by [`Self::due`] was made at `t_s`.
    pub fn switched(&mut self, t_s: f64) {
        self.on = 1 - self.on;
        self.since_s = t_s;
        if self.spans.len() >= MAX_SPANS {
            self.spans.drain(..MAX_SPANS / 2);
        }
        self.spans.push((t_s, self.on));
    }

    /// Every explorer metric's A/B so far.
    pub fn rows(&self) -> Vec<AbRow> {
        let rounds = self.rounds();
        METRICS
            .iter()
            .filter(|m| m.explorer)
            .map(|m| {
                let values = [0, 1].map(|s| self.turns[s].iter().map(m.window).collect::<Vec<_>>());
                let spreads = [0, 1].map(|s| Spread::of(values[s].iter().copied()));
                // By the turns' ranks: one turn out of line lowers the
                // certainty, it does not flip the verdict.
                let verdict = (rounds > 0).then(|| judge_values(&values[0], &values[1], None));
                AbRow {
                    metric: m,
                    spreads,
                    verdict,
                }
            })
            .collect()
    }
}

/// The measurements of the intervals of `history` that lie within
/// `from_s..to_s` (paused intervals and intervals without reads left
/// out); None when they hold under [`MIN_SAMPLE_S`].
fn turn_window<'a>(
    history: impl Iterator<Item = &'a IntervalRecord> + Clone,
    from_s: f64,
    to_s: f64,
) -> Option<WindowStats> {
    let inside = || {
        history.clone().filter(move |r| {
            r.t_s - r.interval_s >= from_s - 1e-9 && r.t_s <= to_s + 1e-9 && !r.paused
        })
    };
    let secs: f64 = inside().map(|r| r.interval_s).sum();
    if secs < MIN_SAMPLE_S - 1e-9 {
        return None;
    }
    WindowStats::of(inside())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::verdict::Kind;

    /// An ended A/B's result in one line: every explorer metric, its
    /// medians, change and verdict mark; none before a whole round.
    #[test]
    fn an_ab_result_is_one_line_with_every_metric() {
        let mut ab = AbRun::new(Settings::default(), Settings::default(), 0.0);
        assert_eq!(result_line(&ab), None);
        let w = |mib: f64| {
            let recs = records(0.0, 3.0, mib);
            WindowStats::of(recs.iter()).unwrap()
        };
        ab.turns = [
            vec![w(70.0), w(71.0), w(69.0), w(70.5)],
            vec![w(80.0), w(81.0), w(79.0), w(80.5)],
        ];
        let line = result_line(&ab).unwrap();
        assert!(line.starts_with("A/B result: 4 rounds, baseline -> now: MiB/s 70.2 -> 80.2 +14% (chance by noise 2.9%)"), "{line}");
        for m in METRICS.iter().filter(|m| m.explorer) {
            assert!(
                line.contains(&format!(" {} ", m.short))
                    || line.contains(&format!(": {} ", m.short)),
                "{}: {line}",
                m.short
            );
        }
    }

    /// Intervals of 250 ms from `from_s` to `to_s` reading `mib` MiB/s.
    fn records(from_s: f64, to_s: f64, mib: f64) -> Vec<IntervalRecord> {
        let mut out = Vec::new();
        let mut t = from_s;
        while t + 0.25 <= to_s + 1e-9 {
            t += 0.25;
            out.push(IntervalRecord {
                t_s: t,
                interval_s: 0.25,
                reads: (mib * 0.25 * 256.0) as u64,
                bytes: (mib * 0.25 * 1048576.0) as u64,
                throughput_mib_s: mib,
                ..IntervalRecord::default()
            });
        }
        out
    }

    fn settings(mode: &str) -> Settings {
        let mut s = Settings::default();
        s.set("workers.mode", mode).unwrap();
        s
    }

    /// Turns alternate every TURN_S; each gives one value from the
    /// intervals after its settle time (the switch's own dip is left out);
    /// the verdict is compare's rule over the rounds: a hint at 3, a
    /// finding at 4.
    #[test]
    fn turns_alternate_drop_the_settle_time_and_judge_rounds_as_compare_does() {
        let mut ab = AbRun::new(settings("unbound"), settings("bound"), 10.0);
        let mut history = Vec::new();
        let mut t = 10.0;
        // The current side (1) reads 100 MiB/s, the baseline 70, each with
        // a settle-time dip to 5 MiB/s that must not count.
        let throughput = |ab: &AbRun| {
            ab.rows()
                .into_iter()
                .find(|r| r.metric.name == "throughput_mib_s")
                .unwrap()
        };
        for turn in 0..8 {
            if turn == 6 {
                // Three rounds: apart, but noise gives that 10% of the
                // time: a hint.
                assert_eq!(ab.rounds(), 3);
                let v = throughput(&ab).verdict.unwrap();
                assert_eq!(v.kind, Kind::Hint);
                assert_eq!(
                    v.text,
                    "a hint, not a finding: +52%, ranges apart; 3 v 3 rounds, chance by noise 10% (4 rounds or more a side needed)"
                );
            }
            let side = ab.on;
            let mib = if side == 1 {
                100.0 + turn as f64
            } else {
                70.0 - turn as f64
            };
            history.extend(records(t, t + 1.0, 5.0));
            history.extend(records(t + 1.0, t + TURN_S, mib));
            assert!(
                ab.due(t + TURN_S - 0.5, history.iter()).is_none(),
                "mid-turn"
            );
            let next = ab
                .due(t + TURN_S, history.iter())
                .expect("the turn is over");
            assert_eq!(next, ab.sides[1 - side]);
            t += TURN_S;
            ab.switched(t);
            assert_eq!(ab.on, 1 - side);
        }
        assert_eq!(ab.rounds(), 4);
        assert_eq!(ab.turns[1].len(), 4);
        let row = throughput(&ab);
        // Settle time dropped: the dip at 5 MiB/s is in no turn's value
        // (1.5 s dropped, the 1 s dip inside it).
        assert_eq!(row.spreads[1].min, 100.0);
        assert_eq!(row.spreads[1].max, 106.0);
        assert_eq!(row.spreads[0].max, 69.0);
        let v = row.verdict.unwrap();
        assert_eq!(v.kind, Kind::Apart);
        assert_eq!(
            v.text,
            "+56%, ranges apart; 4 v 4 rounds, chance by noise 2.9%"
        );
    }

    /// Overlapping sides are noise; no verdict before a round.
    #[test]
    fn overlapping_turns_are_noise_and_no_turn_no_verdict() {
        let mut ab = AbRun::new(settings("unbound"), settings("bound"), 0.0);
        assert!(ab.rows().iter().all(|r| r.verdict.is_none()));
        let mut history = Vec::new();
        let mut t = 0.0;
        for (turn, mib) in [100.0, 98.0, 97.0, 101.0].into_iter().enumerate() {
            history.extend(records(t, t + TURN_S, mib));
            assert!(ab.due(t + TURN_S, history.iter()).is_some(), "turn {turn}");
            t += TURN_S;
            ab.switched(t);
        }
        let row = ab
            .rows()
            .into_iter()
            .find(|r| r.metric.name == "throughput_mib_s")
            .unwrap();
        assert_eq!(row.verdict.unwrap().kind, Kind::Noise);
    }

    /// A turn cut short (paused most of it) gives no value: the round
    /// waits for a full one.
    #[test]
    fn a_turn_without_enough_measured_time_gives_no_value() {
        let mut ab = AbRun::new(settings("unbound"), settings("bound"), 0.0);
        let mut history = records(0.0, TURN_S, 50.0);
        for r in history.iter_mut().skip(8) {
            r.paused = true;
        }
        assert!(ab.due(TURN_S, history.iter()).is_some());
        assert!(ab.turns[1].is_empty());
    }
}
