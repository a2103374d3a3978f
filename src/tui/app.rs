//! The explorer's state, with no terminal in sight: one of each part of
//! it (`state/`: the records and windows, the baseline and A/B, what runs,
//! the view, the overlays, the log, a preset's or demo's additions), and
//! the few things that take more than one part: a record's events become
//! markers, log lines, a caption or an A/B switch's expected events; a
//! flash is timed by the run's clock; the baseline freezes "now"; a
//! demo's verdict reads the preset, the baseline and "now". What the
//! screen shows is a pure function of an [`App`] (`render/`), which keeps
//! the rendering snapshot-testable from fixed records. What a key may do
//! is decided in `policy.rs` (pure: key and state in, action or reason
//! out) and what a key does in an overlay in `overlay/`; both read this
//! state, and nothing here reads them but the quit rule.

use crate::metrics::{IntervalRecord, Notice};
use crate::output::verdict::WINDOW_S;
use crate::settings::Settings;
use crate::sys::Features;

use super::keys::Action;
use super::policy::{self, Quit};
use super::state::{Comparison, Lanes, Log, Overlays, Running, Show, View, Window};

/// Everything the screen shows, in parts; each part's fields are its own
/// (private, changed through its methods).
#[derive(Debug, Clone)]
pub struct App {
    /// The settings running, what the resolver says of them, and where.
    pub running: Running,
    /// The records, the markers, the time window and "now".
    pub window: Window,
    /// The baseline, `B`'s other side and the live A/B.
    pub baseline: Comparison,
    /// The events panel's lines and the footer's flash.
    pub log: Log,
    /// The cursor, the focus, a readout, and how the screen is shown.
    pub view: View,
    /// The overlay open, and the prompt's memory.
    pub overlays: Overlays,
    /// A preset's name and published result; a demo's caption and step.
    pub show: Show,
    /// The timeline view (`t`): its spans, window and chosen item.
    pub lanes: Lanes,
    /// Set when quitting.
    quit: bool,
    /// `q` was pressed once with a baseline marked: the next `q` quits,
    /// any other key cancels.
    quit_armed: bool,
}

impl App {
    /// A fresh explorer for a running workload.
    pub fn new(settings: Settings, effective: Settings, features: Features, cpus: usize) -> App {
        App {
            running: Running::new(settings, effective, features, cpus),
            window: Window::new(),
            baseline: Comparison::default(),
            log: Log::default(),
            view: View::default(),
            overlays: Overlays::default(),
            show: Show::default(),
            lanes: Lanes::default(),
            quit: false,
            quit_armed: false,
        }
    }

    /// What a key does to the open timeline: `z` / `Z` zoom it, space
    /// freezes it, ← → choose an item. Returns false (the key does what it
    /// does elsewhere) while it is closed or for other keys.
    pub fn timeline_key(&mut self, action: &Action) -> bool {
        if !self.lanes.is_open() {
            return false;
        }
        match action {
            Action::ZoomIn | Action::ZoomOut => {
                self.lanes.zoom(matches!(action, Action::ZoomOut));
                self.flash(format!("timeline: the last {} ms", self.lanes.window_ms()));
            }
            Action::TogglePause => {
                let frozen = self.lanes.toggle_freeze();
                self.flash(if frozen {
                    "timeline frozen: ← → choose an item; space follows again (the workload runs on)"
                } else {
                    "timeline follows the workload again"
                });
            }
            Action::ChooseItem(later) => {
                if self.lanes.choose(*later).is_none() {
                    self.flash("no work item in the timeline's window");
                }
            }
            _ => return false,
        }
        true
    }

    /// Takes in one interval record: its events become markers (changes
    /// made at one time sharing one) with their lines in the log, a
    /// demo's caption, or nothing (the ones a live A/B's own switch
    /// brings); its notices are logged; the window slides.
    pub fn push(&mut self, mut rec: IntervalRecord) {
        // The spans go to the timeline (kept while it is open), not into
        // the charts' history.
        if let Some(t) = rec.timeline.take() {
            self.lanes.take(t);
        }
        // An A/B switch's events come with the next record or two.
        self.baseline.quiet_until(rec.t_s);
        for e in &rec.events {
            if self.baseline.is_quiet(&e.label) {
                continue;
            }
            // An ended A/B's result: logged, not a chart marker.
            if e.label.starts_with(super::ab::RESULT_PREFIX) {
                self.log.line(e.t_s, e.label.clone(), true);
                continue;
            }
            // A demo's caption: shown, logged, not a chart marker.
            if let Some(c) = e.label.strip_prefix("caption: ") {
                self.show.set_caption(c.to_string());
                self.log.line(e.t_s, e.label.clone(), false);
                continue;
            }
            let short = crate::output::format::short_label(&e.label);
            let n = self.window.mark(e.t_s, short);
            self.log.line(e.t_s, format!("[{n}] {}", e.label), false);
        }
        for Notice { t_s, text } in &rec.notices {
            self.log.line(*t_s, text.clone(), true);
        }
        self.window.push(rec);
    }

    /// Shows a one-line message for a few seconds (see [`Log::flash`]).
    pub fn flash(&mut self, text: impl Into<String>) {
        let now = self.window.elapsed_s();
        self.log.flash(text.into(), now);
    }

    /// Shows a message and logs it whatever its length (see
    /// [`Log::announce`]).
    pub fn announce(&mut self, text: impl Into<String>) {
        let now = self.window.elapsed_s();
        self.log.announce(text.into(), now);
    }

    /// Shows a message the events panel already holds, not logging it
    /// again (see [`Log::flash_logged`]).
    pub fn flash_logged(&mut self, text: impl Into<String>) {
        let now = self.window.elapsed_s();
        self.log.flash_logged(text.into(), now);
    }

    /// The current flash message, if still due.
    pub fn flash_text(&self) -> Option<&str> {
        self.log.flash_text(self.window.elapsed_s())
    }

    /// Freezes the "now" window as the baseline (and starts "now" after
    /// it); or why not yet.
    pub fn mark_baseline(&mut self) -> Result<(), super::state::NotYet> {
        self.baseline.mark(&mut self.window, &self.running)
    }

    /// Clears the charts (the records, the markers, the ended A/Bs'
    /// turns); the baseline stays.
    pub fn reset_charts(&mut self) {
        self.window.reset();
        self.baseline.forget_past();
    }

    /// Whether the explorer is to end (a quit key, `--duration`).
    pub fn quitting(&self) -> bool {
        self.quit
    }

    /// Ends the explorer (a quit from an overlay, a replay's `q`).
    pub fn quit(&mut self) {
        self.quit = true;
    }

    /// A key's action's part in quitting ([`policy::quit_answer`]): Ctrl-C
    /// quits at once; `q` at once with no baseline to lose, else the first
    /// `q` arms (and says so) and a second quits. Any other key disarms.
    /// True when it quits.
    pub fn quit_key(&mut self, action: &Action) -> bool {
        let armed = std::mem::take(&mut self.quit_armed);
        match policy::quit_answer(action, self.baseline.get().is_some(), armed) {
            Quit::Now => {
                self.quit = true;
                true
            }
            Quit::Ask(why) => {
                self.quit_armed = true;
                self.flash(why);
                false
            }
            Quit::Stay => false,
        }
    }

    /// The verdict of the change since the baseline on the preset's
    /// published metric, computed over this run's own windows (the
    /// baseline's, and the current settings' since they were set): the
    /// verdict's kind, its line and how it was taken (the windows), or a
    /// line saying it is measuring. None without a baseline, a published
    /// result, or a change of its setting.
    pub fn demo_verdict(&self) -> Option<(crate::output::verdict::Kind, String, String)> {
        // During the live A/B "now" restarts every turn: its rounds (the
        // baseline panel, the change box) are the verdict then.
        if self.baseline.ab().is_some() {
            return None;
        }
        let (cmp, pb) = self.show.published()?;
        let b = self.baseline.get()?;
        let settings = self.running.settings();
        let (from, to) = (b.settings.get(&cmp.key)?, settings.get(&cmp.key)?);
        if from == to {
            return None;
        }
        let published = if [&from, &to] == [&cmp.values[0], &cmp.values[1]] {
            Some(pb.clone())
        } else if [&to, &from] == [&cmp.values[0], &cmp.values[1]] {
            Some(pb.inverted())
        } else {
            None
        };
        let metric = crate::metrics::table::metric(&pb.metric)?;
        let Some(v) = self
            .baseline
            .verdict_on(&self.window, metric, published.as_ref())
        else {
            // A fold from +0 (an empty f64 sum is -0: "-0 s so far").
            let secs = self.window.now_records().fold(0.0, |a, r| a + r.interval_s);
            return Some((
                crate::output::verdict::Kind::NotMeasured,
                format!(
                    "this run: measuring {} {from} -> {to}, {secs:.0} s so far",
                    metric.label
                ),
                format!("(a verdict needs two {WINDOW_S:.0} s windows each side)"),
            ));
        };
        let cell = |x: f64| metric.cell(x).trim().to_string();
        Some((
            v.verdict.kind,
            format!(
                "this run, {} {from} -> {to}: {} -> {}, {}",
                metric.label,
                cell(v.before),
                cell(v.after),
                v.verdict.text,
            ),
            format!("[{WINDOW_S:.0} s windows, one after the other]"),
        ))
    }
}
