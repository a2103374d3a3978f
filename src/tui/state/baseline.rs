//! The baseline and the A/B: the window frozen by `b`, the settings `B`
//! flips back to, the live A/B (`A`) while it runs, the turns of the ones
//! that ended (for the charts) and the events an A/B's own switches will
//! bring (which are not changes to mark). Marking a baseline forgets
//! where `B` flipped from; ending an A/B keeps its turns, at most
//! [`MAX_SPANS`](super::super::ab::MAX_SPANS); those rules live here, in
//! the methods, with the verdicts over the baseline's windows and "now"'s.

use super::running::Running;
use super::window::Window;
use crate::metrics::{METRICS, WindowStats};
use crate::output::verdict::{SETTLE_S, START_SETTLE_S, WINDOW_S};
use crate::settings::Settings;
use crate::tui::ab::{self, AbRun, TurnSpan};

/// Why `B` (flip to the baseline) or `A` (the live A/B) cannot start yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotYet {
    /// `B` before `b`.
    #[error("no baseline yet: mark one with b, change settings, then B flips")]
    FlipBeforeB,
    /// `B` on the baseline's settings, with nothing to flip back to.
    #[error("the settings are the baseline's: change one, then B flips between the two")]
    FlipSame,
    /// `A` before `b`.
    #[error("no baseline yet: mark one with b, change a setting, then A runs the A/B")]
    AbBeforeB,
    /// `A` on the baseline's settings: nothing to compare.
    #[error("the settings are the baseline's: change one, then A runs the A/B")]
    AbSame,
    /// `b` before the "now" window holds the windows a figure needs.
    #[error(
        "too soon for a baseline: it needs {MIN_WINDOWS} windows of {WINDOW_S:.0} s measured since the last change (after {SETTLE_S:.0} s settling, {START_SETTLE_S:.0} s after the start); {have} so far: b again in a few seconds"
    )]
    TooSoon {
        /// Windows measured so far.
        have: usize,
    },
}

/// Windows of [`WINDOW_S`] each side needs before the panel states a
/// figure: the fewest the verdict rule takes a spread from.
pub const MIN_WINDOWS: usize = 2;

/// Seconds within which a live A/B switch's events are expected (they
/// come with the next record); one not seen by then is forgotten, so a
/// later change of the same key is marked as any change is.
const AB_QUIET_S: f64 = 3.0;

/// The baseline: a window's stats, frozen when `b` was pressed.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    /// The window's measurements.
    pub stats: WindowStats,
    /// The window's latency distribution (for the histogram overlay).
    pub buckets: Vec<u64>,
    /// The settings label of the window ("workers.mode = unbound" style).
    pub label: String,
    /// The settings (as requested) when it was marked: what `B` flips to.
    pub settings: Settings,
    /// Its measurements per [`crate::output::verdict::WINDOW_S`] window
    /// after [`crate::output::verdict::SETTLE_S`] (what the panel's and
    /// the demo's verdicts compare), measured once when it is marked.
    pub windows: Vec<WindowStats>,
    /// Where the baseline was still moving when marked: a headline
    /// metric whose first half of windows and second half lie apart by
    /// the verdict rule (`MiB/s +35% across it`); None where it held.
    pub drift: Option<String>,
}

impl Baseline {
    /// Whether the baseline's own windows drift: the first headline
    /// metric (by [`METRICS`] order) whose first half and second half of
    /// windows lie apart at a chance by noise under 5% (it takes 8
    /// windows, 16 s, to see one).
    fn drift_of(windows: &[WindowStats]) -> Option<String> {
        let half = windows.len() / 2;
        METRICS.iter().filter(|m| m.explorer).find_map(|m| {
            let first: Vec<f64> = windows[..half].iter().map(m.window).collect();
            let last: Vec<f64> = windows[windows.len() - half..]
                .iter()
                .map(m.window)
                .collect();
            let v = crate::output::verdict::judge_values(&first, &last, None);
            (v.kind.is_significant()).then(|| {
                format!(
                    "{} {:+.0}% across it (its first {half} windows against its last)",
                    m.short,
                    v.change_pct.unwrap_or(0.0)
                )
            })
        })
    }
}

/// The baseline, `B`'s other side and the live A/B.
#[derive(Debug, Clone, Default)]
pub struct Comparison {
    /// The baseline, once marked.
    baseline: Option<Baseline>,
    /// The settings `B` flips back to from the baseline's.
    ab_other: Option<Settings>,
    /// The live A/B (`A`), while it runs.
    ab: Option<AbRun>,
    /// The turns of live A/Bs that ended, for the charts (the latest
    /// [`ab::MAX_SPANS`]).
    ab_past: Vec<TurnSpan>,
    /// The last live A/B that ended and when: its result stays.
    ab_last: Option<(AbRun, f64)>,
    /// The events the live A/B's own switches will bring (each changed
    /// key's label) and when each switch was made: they are neither
    /// markers nor log lines (a 5-minute A/B would add 60 of each); the
    /// A/B logs a line per round instead.
    ab_quiet: Vec<(String, f64)>,
}

impl Comparison {
    /// The baseline, once marked.
    pub fn get(&self) -> Option<&Baseline> {
        self.baseline.as_ref()
    }

    /// Freezes `window`'s "now" as the baseline, labelled with what runs,
    /// and starts "now" afresh after it (what follows is compared with
    /// it, not its own stretch); or why not: fewer than [`MIN_WINDOWS`]
    /// windows measured (the baseline would never give a figure). A new
    /// baseline ends the last A/B's result.
    pub fn mark(&mut self, window: &mut Window, running: &Running) -> Result<(), NotYet> {
        let have = window.now_windows().len();
        let Some(stats) = window.now().filter(|_| have >= MIN_WINDOWS) else {
            return Err(NotYet::TooSoon { have });
        };
        let windows = window.now_windows().to_vec();
        self.baseline = Some(Baseline {
            stats,
            buckets: window.now_buckets().to_vec(),
            label: running.plan().to_string(),
            settings: running.settings().clone(),
            drift: Baseline::drift_of(&windows),
            windows,
        });
        self.ab_other = None;
        self.ab_last = None;
        window.restart_now();
        Ok(())
    }

    /// A/B (`B`): the settings to run next, given the `current` ones,
    /// flipping between the baseline's and the ones run before the last
    /// flip; or why not.
    pub fn flip(&mut self, current: &Settings) -> Result<Settings, NotYet> {
        let Some(b) = &self.baseline else {
            return Err(NotYet::FlipBeforeB);
        };
        if *current != b.settings {
            self.ab_other = Some(current.clone());
            Ok(b.settings.clone())
        } else {
            self.ab_other.clone().ok_or(NotYet::FlipSame)
        }
    }

    /// `metric` since the baseline, over this run's own windows (the
    /// baseline's, and those of `window`'s "now"), judged against
    /// `published` when given; None without a baseline or until each
    /// side holds two windows.
    pub fn verdict_on(
        &self,
        window: &Window,
        metric: &crate::metrics::Metric,
        published: Option<&crate::scenario::preset::Published>,
    ) -> Option<crate::output::verdict::WindowVerdict> {
        let b = self.baseline.as_ref()?;
        crate::output::verdict::judge_windows(&b.windows, window.now_windows(), metric, published)
    }

    /// The change of `m` from the baseline to `window`'s "now", %, and the
    /// verdict's kind: the verdict's own change (the medians of the two
    /// sides' 2 s windows, the figures the panel's row shows and the demo's
    /// verdict line states), so every row is arithmetic and the panel, the
    /// presentation boxes and the verdict line agree. None until each side
    /// holds [`MIN_WINDOWS`] windows.
    pub fn change(
        &self,
        window: &Window,
        m: &crate::metrics::Metric,
    ) -> Option<(f64, Option<crate::output::verdict::Kind>)> {
        let v = self.verdict_on(window, m, None)?;
        Some((v.verdict.change_pct?, Some(v.verdict.kind)))
    }

    /// The last live A/B that ended and when, kept (its table on the
    /// panel, its verdicts in the summary) until the next `b` or `A`.
    pub fn ab_last(&self) -> Option<&(AbRun, f64)> {
        self.ab_last.as_ref()
    }

    /// The live A/B, while it runs.
    pub fn ab(&self) -> Option<&AbRun> {
        self.ab.as_ref()
    }

    /// The live A/B, while it runs, to take its turns in.
    pub fn ab_mut(&mut self) -> Option<&mut AbRun> {
        self.ab.as_mut()
    }

    /// Starts the live A/B (`A`) at `t_s` between the baseline's settings
    /// and the `current` ones, on the current ones; or why not.
    pub fn start_ab(&mut self, current: &Settings, t_s: f64) -> Result<(), NotYet> {
        let Some(b) = &self.baseline else {
            return Err(NotYet::AbBeforeB);
        };
        if *current == b.settings {
            return Err(NotYet::AbSame);
        }
        self.ab = Some(AbRun::new(b.settings.clone(), current.clone(), t_s));
        self.ab_last = None;
        Ok(())
    }

    /// Ends the live A/B at `t_s` (whatever stops it), keeping its turns
    /// for the charts; returns it.
    pub fn end_ab(&mut self, t_s: f64) -> Option<AbRun> {
        let ab = self.ab.take()?;
        self.ab_past.extend(ab.turn_spans(t_s));
        let n = self.ab_past.len();
        if n > ab::MAX_SPANS {
            self.ab_past.drain(..n - ab::MAX_SPANS);
        }
        if ab.rounds() > 0 {
            self.ab_last = Some((ab.clone(), t_s));
        }
        Some(ab)
    }

    /// Every live A/B turn to draw at `t_s`: the ended A/Bs' and the
    /// running one's until then.
    pub fn spans(&self, t_s: f64) -> Vec<TurnSpan> {
        let mut out = self.ab_past.clone();
        if let Some(ab) = &self.ab {
            out.extend(ab.turn_spans(t_s));
        }
        out
    }

    /// Forgets the ended A/Bs' turns (the charts were reset).
    pub fn forget_past(&mut self) {
        self.ab_past.clear();
    }

    /// The A/B switched at `t_s`, changing the keys `labels` name: their
    /// events, when they come, are not changes to mark.
    pub fn expect_quiet(&mut self, labels: impl IntoIterator<Item = String>, t_s: f64) {
        self.ab_quiet.extend(labels.into_iter().map(|l| (l, t_s)));
    }

    /// At `now`, forgets the switches' events not seen in time.
    pub fn quiet_until(&mut self, now: f64) {
        self.ab_quiet.retain(|(_, t)| now - t <= AB_QUIET_S);
    }

    /// Whether an event labelled `label` is one an A/B switch brought
    /// (each expected event is taken once).
    pub fn is_quiet(&mut self, label: &str) -> bool {
        match self.ab_quiet.iter().position(|(l, _)| l == label) {
            Some(i) => {
                self.ab_quiet.remove(i);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::IntervalRecord;
    use crate::settings::WorkerMode;

    fn rec(seq: u64) -> IntervalRecord {
        rec_of(seq, 50)
    }

    /// The interval `seq` of 250 ms with `n` reads of 4 KiB.
    fn rec_of(seq: u64, n: u64) -> IntervalRecord {
        let mut r = crate::metrics::Recorder::new();
        for i in 0..n {
            let ns = 10_000 + (seq * 7_919 + i * 104_729) % 900_000;
            r.record(crate::metrics::Stage::EndToEnd, ns);
        }
        r.counters.reads = n;
        r.counters.bytes = n * 4096;
        let mut rec = IntervalRecord {
            seq,
            t_s: (seq + 1) as f64 * 0.25,
            ..Default::default()
        };
        rec.fill_from(&r, 0.25);
        rec
    }

    /// The default settings running on 2 CPUs.
    fn running() -> Running {
        let s = Settings::default();
        Running::new(s.clone(), s, crate::sys::Features::default(), 2)
    }

    /// A window holding the records `seqs` of `n(seq)` reads each.
    fn window_of(seqs: std::ops::Range<u64>, n: impl Fn(u64) -> u64) -> Window {
        let mut w = Window::new();
        for seq in seqs {
            w.push(rec_of(seq, n(seq)));
        }
        w
    }

    /// 16 s of records; with `baseline`, `b` pressed at the end; then
    /// workers.mode changed to bound either way.
    fn measured(baseline: bool) -> (Comparison, Running) {
        let s = Settings::default();
        let mut run = Running::new(s.clone(), s, crate::sys::Features::default(), 2);
        let mut w = Window::new();
        for seq in 0..64 {
            w.push(rec(seq));
        }
        let mut c = Comparison::default();
        if baseline {
            assert_eq!(c.mark(&mut w, &run), Ok(()));
        }
        let mut bound = run.settings().clone();
        bound.workers.mode = WorkerMode::Bound;
        run.set(bound.clone(), bound);
        (c, run)
    }

    /// B flips to the baseline's settings and back; without a baseline,
    /// or with nothing changed since, it says why.
    #[test]
    fn b_flips_between_the_baseline_and_the_current_settings() {
        let (mut c, run) = measured(false);
        assert_eq!(c.flip(run.settings()), Err(NotYet::FlipBeforeB));
        let (mut c, mut run) = measured(true);
        let base = c.get().unwrap().settings.clone();
        assert_ne!(*run.settings(), base, "workers.mode changed after b");
        let current = run.settings().clone();
        let to = c.flip(run.settings()).unwrap();
        assert_eq!(to, base);
        run.set(to.clone(), to);
        let back = c.flip(run.settings()).unwrap();
        assert_eq!(back, current);
        run.set(back.clone(), back);
        assert_eq!(c.flip(run.settings()).unwrap(), base);
        // Marked with nothing changed: nothing to flip to.
        let run = running();
        let mut w = window_of(0..64, |_| 50);
        let mut c = Comparison::default();
        assert_eq!(c.mark(&mut w, &run), Ok(()));
        assert_eq!(c.flip(run.settings()), Err(NotYet::FlipSame));
    }

    /// `b` takes a baseline only once "now" holds two 2 s windows after
    /// the start's settle time (one that could never give a figure is
    /// refused, saying why), and "now" starts afresh after it.
    #[test]
    fn a_baseline_needs_two_windows_and_now_starts_after_it() {
        let run = running();
        // 7 s: 5 s of start-up dropped, one 2 s window.
        let mut w = window_of(0..28, |_| 50);
        let mut c = Comparison::default();
        let refused = c.mark(&mut w, &run);
        assert_eq!(refused, Err(NotYet::TooSoon { have: 1 }));
        assert!(refused.unwrap_err().to_string().contains("1 so far"));
        assert!(c.get().is_none());
        for seq in 28..36 {
            w.push(rec(seq));
        }
        assert_eq!(c.mark(&mut w, &run), Ok(()));
        assert_eq!(c.get().unwrap().windows.len(), 2);
        assert_eq!(c.get().unwrap().drift, None, "a steady run");
        assert!(w.now_windows().is_empty(), "now restarts at b");
        // Until "now" holds two windows, no change is stated.
        let m = &crate::metrics::table::THROUGHPUT;
        assert_eq!(c.change(&w, m), None);
        for seq in 36..56 {
            w.push(rec(seq));
        }
        let (pct, kind) = c.change(&w, m).unwrap();
        let v = c.verdict_on(&w, m, None).unwrap();
        // The row is arithmetic: the change is that of the two medians.
        assert!((pct - (v.after / v.before - 1.0) * 100.0).abs() < 1e-9);
        assert_eq!(kind, Some(v.verdict.kind));
    }

    /// A baseline taken while the run still ramps up says so: its first
    /// half of windows and its last lie apart.
    #[test]
    fn a_baseline_that_still_moves_says_so() {
        let run = running();
        let mut w = window_of(0..100, |seq| 50 + seq);
        let mut c = Comparison::default();
        assert_eq!(c.mark(&mut w, &run), Ok(()));
        let drift = c.get().unwrap().drift.clone().expect("a ramp");
        assert!(drift.starts_with("MiB/s +"), "{drift}");
        assert!(
            drift.contains("its first 5 windows against its last"),
            "{drift}"
        );
    }

    /// A switch's events are taken once each, and forgotten when late.
    #[test]
    fn an_ab_switch_s_events_are_taken_once_and_forgotten_when_late() {
        let mut c = Comparison::default();
        c.expect_quiet(["workers.mode: unbound -> bound".to_string()], 10.0);
        c.quiet_until(11.0);
        assert!(c.is_quiet("workers.mode: unbound -> bound"));
        assert!(!c.is_quiet("workers.mode: unbound -> bound"));
        c.expect_quiet(["x".to_string()], 10.0);
        c.quiet_until(13.5);
        assert!(!c.is_quiet("x"));
    }
}
