//! The explorer's state, with no terminal in sight: the records and the
//! "now" window slid over them, the markers and the log, the baseline, the
//! view (zoom, cursor, readout) and which overlay is open. What the screen
//! shows is a pure function of an [`App`] (`render/`), which keeps the
//! rendering snapshot-testable from fixed records. What a key may do is
//! decided in `policy.rs` (pure: key and settings in, action or reason
//! out) and what a key does in an overlay in `overlay/`; both read this
//! state, and nothing here reads them.

use std::collections::VecDeque;

use crate::metrics::window::WindowAcc;
use crate::metrics::{Event, IntervalRecord, Notice, WindowStats};
use crate::output::verdict::{SETTLE_S, WINDOW_S};
use crate::settings::Settings;
use crate::sys::Features;

/// The time windows `z`/`Z` step through, in seconds.
pub const ZOOM_STEPS_S: [f64; 6] = [10.0, 30.0, 60.0, 120.0, 300.0, 600.0];
/// The window the charts open with.
pub const DEFAULT_WINDOW_S: f64 = 60.0;
/// History kept for the widest zoom.
pub const HISTORY_S: f64 = 600.0;
/// Lines of the event and notice log kept.
const LOG_LINES: usize = 200;

/// A labelled vertical line on the time charts.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Its number, from 1 in the order changes happened (the charts show
    /// it; the events panel lists it with what changed).
    pub n: usize,
    /// Seconds since the engine started.
    pub t_s: f64,
    /// What changed, short (`mode: unbound -> bound`).
    pub label: String,
}

/// The longest flash message an 80-column footer shows whole (beside its
/// `? help  q quit`).
const FLASH_WHOLE: usize = 62;

/// Seconds within which a live A/B switch's events are expected (they
/// come with the next record); one not seen by then is forgotten, so a
/// later change of the same key is marked as any change is.
const AB_QUIET_S: f64 = 3.0;

/// The first-contact hint (a live explorer without a demo): three keys.
pub const FIRST_HINT: &str = "try w: move the workers · b: baseline · ?: help (a key hides)";

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
    /// Its measurements per [`WINDOW_S`] window after
    /// [`SETTLE_S`] (what the panel's and the demo's verdicts
    /// compare), measured once when it is marked.
    pub windows: Vec<WindowStats>,
}

/// The explorer's own cost, shown in the header.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UiCost {
    /// CPU time of the UI thread, % of one core, over the last second.
    pub cpu_pct: f64,
    /// Mean time to build and draw a frame, ms.
    pub frame_ms: f64,
    /// Most frames per second (`--fps`).
    pub fps: f64,
}

/// What is drawn over the main screen.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    /// Nothing.
    None,
    /// Every key and what the knobs mean.
    Help {
        /// The first line shown.
        scroll: usize,
        /// What the help is narrowed to (`/`), empty for all of it.
        find: String,
        /// The search is being typed.
        typing: bool,
    },
    /// An error the user must dismiss.
    Error(String),
    /// `p`: choose a preset to apply.
    Picker {
        /// The presets: (name, where from, description, settings).
        items: Vec<PickItem>,
        /// The highlighted one.
        selected: usize,
    },
    /// `s`: the name to save the current settings under.
    SaveName {
        /// The name typed (prefilled with the current preset's).
        name: String,
        /// The prefilled name is selected: typing replaces it, Backspace
        /// clears it, Right or End keeps it for appending.
        selected: bool,
        /// Why the last key was not taken (a character a name cannot have).
        refused: Option<String>,
    },
    /// Saving would replace an existing file: ask first.
    ConfirmOverwrite(String),
    /// Enter on a settings row (or a click): the setting's values to pick
    /// one from, applied as one change.
    Chooser {
        /// The setting.
        key: &'static str,
        /// Its values, the current one marked, greyed ones with why.
        items: Vec<Choice>,
        /// The highlighted one.
        selected: usize,
        /// Why the last Enter did nothing (a greyed value), or a hint.
        note: Option<String>,
    },
    /// `:`: a command (`set section.key=value`) being typed.
    Prompt {
        /// What was typed.
        text: String,
        /// The parser's error for the last Enter, shown until the next key.
        error: Option<String>,
        /// Tab's candidates when more than one fit.
        hint: Option<String>,
        /// Which remembered command Up/Down shows (None: the typed one).
        recall: Option<usize>,
    },
}

/// Which time chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartKind {
    /// Latency p50 / p99 / p99.9 (log axis).
    Latency,
    /// MiB/s and IOPS.
    Throughput,
    /// Queue p99 and run_delay.
    Sched,
}

/// A click on a chart: the exact values at that time, shown until Esc or
/// another click, with a cursor line on the charts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Readout {
    /// The chart clicked (whose series the readout lists).
    pub chart: ChartKind,
    /// The time clicked, seconds since the start.
    pub t_s: f64,
}

/// One value in the chooser.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The value as [`Settings::get`] writes it (and [`Settings::set`] reads).
    pub value: String,
    /// It is the value set now.
    pub current: bool,
    /// Why it cannot be used right now (greyed), if it cannot.
    pub why: Option<String>,
}

/// One preset in the picker.
#[derive(Debug, Clone, PartialEq)]
pub struct PickItem {
    /// Its name.
    pub name: String,
    /// "shipped" or "user".
    pub origin: &'static str,
    /// Its description, or why it is invalid.
    pub description: String,
    /// Its settings (None when the file is invalid).
    pub settings: Option<Settings>,
}

impl Overlay {
    /// The help, from its top, not searched.
    pub fn help() -> Overlay {
        Overlay::help_on(None)
    }

    /// The help narrowed to `topic` (what `?` explains: the focused
    /// panel, the cursor's setting), or all of it.
    pub fn help_on(topic: Option<String>) -> Overlay {
        Overlay::Help {
            scroll: 0,
            find: topic.unwrap_or_default(),
            typing: false,
        }
    }
}

/// Everything the screen shows.
#[derive(Debug, Clone)]
pub struct App {
    /// Settings as requested.
    pub settings: Settings,
    /// Settings as running (after fallbacks).
    pub effective: Settings,
    /// [`crate::engine::resolve`]'s answer for the settings running: why
    /// each limited setting is limited here and which do nothing (read by
    /// the settings panel, the footer, the chooser and the keys).
    resolution: Option<crate::engine::Resolution>,
    /// Where each stage runs, e.g. "decrypt: unbound -> verify: bound".
    pub plan: String,
    /// The pods of the unbound queues running, "pods cache 0-3|4-7"
    /// (None: no unbound queue, or not known, as in a replay).
    pub pods: Option<String>,
    /// The idle and frequency drivers, and whether anything reads iowait:
    /// ("idle haltpoll, no cpufreq", false). None in replays.
    pub idle: Option<(String, bool)>,
    /// Kernel and CPU features.
    pub features: Features,
    /// Online CPUs.
    pub cpus: usize,
    /// Records, oldest first, at most [`HISTORY_S`] of them.
    pub history: VecDeque<IntervalRecord>,
    /// Change markers, oldest first.
    pub markers: Vec<Marker>,
    /// The number of the latest marker (numbers go on after a reset).
    pub marker_seq: usize,
    /// Events and notices, newest last, with their time.
    pub log: VecDeque<(f64, String, bool)>,
    /// The baseline, once marked.
    pub baseline: Option<Baseline>,
    /// Stats of the "now" window ([`Self::now_records`]), kept current by
    /// [`Self::refresh`] so frames do not re-merge histograms.
    pub now: Option<WindowStats>,
    /// Latency distribution of the "now" window.
    pub now_buckets: Vec<u64>,
    /// The "now" window's measurements per [`WINDOW_S`] window
    /// after [`SETTLE_S`], kept current with [`Self::now`].
    pub now_windows: Vec<WindowStats>,
    /// Running sums of the "now" window: the records of `history` from
    /// sequence number `acc_from_seq` on.
    acc: WindowAcc,
    acc_from_seq: u64,
    /// The verdict windows since the last marker (every one, "now"'s being
    /// those inside the time window), each measured once, as it closes:
    /// the records are cut from the marker on by `cut`, the window being
    /// filled starting at sequence number `cut_from`, records up to
    /// `cut_seq` taken in. `cut_anchor` is the marker's time (-inf with
    /// none; NaN: cut again from scratch).
    cut_windows: Vec<WindowStats>,
    cut: crate::output::verdict::Windows,
    cut_anchor: f64,
    cut_from: Option<u64>,
    cut_seq: Option<u64>,
    /// The time window, seconds.
    pub window_s: f64,
    /// True while the workload is paused.
    pub paused: bool,
    /// Seconds since the engine started (the latest record's end).
    pub elapsed_s: f64,
    /// Drawn over the screen.
    pub overlay: Overlay,
    /// A one-line message and until when (elapsed seconds) it shows.
    pub flash: Option<(String, f64)>,
    /// The UI's own cost.
    pub ui: UiCost,
    /// Set when quitting.
    pub quit: bool,
    /// `q` was pressed once with a baseline marked: the next `q` quits,
    /// any other key cancels.
    pub quit_armed: bool,
    /// The settings `B` flips back to from the baseline's.
    pub ab_other: Option<Settings>,
    /// The live A/B (`A`), while it runs.
    pub ab: Option<super::ab::AbRun>,
    /// The turns of live A/Bs that ended, for the charts (the latest
    /// [`super::ab::MAX_SPANS`]).
    pub ab_past: Vec<super::ab::TurnSpan>,
    /// The events the live A/B's own switches will bring (each changed
    /// key's label) and when each switch was made: they are neither
    /// markers nor log lines (a 5-minute A/B would add 60 of each); the
    /// A/B logs a line per round instead.
    pub ab_quiet: Vec<(String, f64)>,
    /// A demo's progress: the step shown (1-based), the steps in all, and
    /// when the next step is due (app time, s; None: on `n`).
    pub demo_step: Option<(usize, usize, Option<f64>)>,
    /// The preset applied last: name and description.
    pub preset: Option<(String, String)>,
    /// Set when replaying a recording: what the header says ("replay 2x").
    pub replay: Option<String>,
    /// Presentation mode: big numbers, high contrast, less chrome.
    pub present: bool,
    /// A demo's current caption.
    pub caption: Option<String>,
    /// Where the workload runs when not here (`ssh:phone`), for the header.
    pub place: Option<String>,
    /// Why a remote workload's records stopped (the connection was lost):
    /// the charts stay, the header says so.
    pub lost: Option<String>,
    /// The preset's comparison and the published result it reproduces
    /// (set with the preset): what a demo's verdict line is judged by.
    pub published: Option<(
        crate::scenario::preset::Compare,
        crate::scenario::preset::Published,
    )>,
    /// Presentation mode's big numbers (a demo's; empty: the defaults).
    pub headline: Vec<crate::scenario::demo::Headline>,
    /// While a demo runs within its length (s), the charts span the whole
    /// demo, from its start to its end, filling left to right; after it
    /// (or on a zoom) they scroll as usual.
    pub demo_span: Option<f64>,
    /// Reads that failed verification, since the start.
    pub verity_failures: u64,
    /// Reads that failed at the device, since the start.
    pub io_errors: u64,
    /// The settings panel's cursor: the setting selected (Up/Down, a click);
    /// None until one is.
    pub cursor: Option<&'static str>,
    /// The panel last clicked, by its help topic (`header`, `stages`,
    /// `axes`...): `?` opens the help at it; Esc clears it.
    pub focus: Option<&'static str>,
    /// A chart clicked: its values at that time.
    pub readout: Option<Readout>,
    /// The events panel scrolled back: the number (counted from the first
    /// line ever logged) of the newest line shown; None follows the newest.
    pub events_anchor: Option<u64>,
    /// Lines dropped from the front of `log` (its first line's number).
    pub log_dropped: u64,
    /// Commands entered at the `:` prompt, oldest first.
    pub prompt_history: Vec<String>,
    /// The terminal's size at the last frame (what the mouse and the
    /// cursor's rows are laid out on); empty before the first.
    pub screen: ratatui::layout::Rect,
}

impl App {
    /// A fresh explorer for a running workload.
    pub fn new(settings: Settings, effective: Settings, features: Features, cpus: usize) -> App {
        let plan = crate::engine::stages::Plan::label(&effective);
        let resolution = resolution_of(&settings, &effective, &features);
        App {
            settings,
            effective,
            resolution,
            plan,
            pods: None,
            idle: None,
            features,
            cpus,
            history: VecDeque::new(),
            markers: Vec::new(),
            marker_seq: 0,
            log: VecDeque::new(),
            baseline: None,
            ab: None,
            ab_quiet: Vec::new(),
            ab_past: Vec::new(),
            focus: None,
            quit_armed: false,
            ab_other: None,
            demo_step: None,
            now: None,
            now_buckets: Vec::new(),
            now_windows: Vec::new(),
            acc: WindowAcc::default(),
            acc_from_seq: 0,
            cut_windows: Vec::new(),
            cut: crate::output::verdict::Windows::new(WINDOW_S, SETTLE_S),
            cut_anchor: f64::NAN,
            cut_from: None,
            cut_seq: None,
            window_s: DEFAULT_WINDOW_S,
            paused: false,
            elapsed_s: 0.0,
            overlay: Overlay::None,
            flash: None,
            ui: UiCost::default(),
            quit: false,
            preset: None,
            replay: None,
            present: false,
            caption: None,
            published: None,
            place: None,
            lost: None,
            headline: Vec::new(),
            demo_span: None,
            verity_failures: 0,
            io_errors: 0,
            cursor: None,
            readout: None,
            events_anchor: None,
            log_dropped: 0,
            prompt_history: Vec::new(),
            screen: ratatui::layout::Rect::default(),
        }
    }

    /// Takes in one interval record.
    pub fn push(&mut self, rec: IntervalRecord) {
        self.elapsed_s = rec.t_s;
        self.add_events(&rec.events);
        for Notice { t_s, text } in &rec.notices {
            self.log_line(*t_s, text.clone(), true);
        }
        self.verity_failures += rec.counters.verity_failures;
        self.io_errors += rec.counters.io_errors;
        self.acc.add(&rec);
        self.history.push_back(rec);
        // Slide the "now" window: drop from its front what starts before t0;
        // when that is most of it (a change was just made), rebuild instead.
        let t0 = self.now_t0();
        let first = self.history.front().map_or(0, |r| r.seq);
        let from = self.acc_from_seq.saturating_sub(first) as usize;
        let held = self.history.len().saturating_sub(from);
        let stale = self
            .history
            .iter()
            .skip(from)
            .take_while(|r| r.t_s - r.interval_s < t0)
            .count();
        if stale * 2 > held || self.acc.broken {
            self.history_trim();
            self.refresh();
            return;
        }
        for i in from..from + stale {
            self.acc.remove(&self.history[i]);
        }
        self.acc_from_seq += stale as u64;
        self.history_trim();
        self.derive_now();
    }

    fn history_trim(&mut self) {
        while let (Some(f), Some(b)) = (self.history.front(), self.history.back())
            && b.t_s - f.t_s > HISTORY_S
        {
            self.history.pop_front();
        }
        let oldest = self.history.front().map_or(0.0, |r| r.t_s - r.interval_s);
        self.markers.retain(|m| m.t_s >= oldest);
        self.cut_windows.retain(|w| w.from_s >= oldest - 1e-9);
    }

    /// Recomputes the "now" window's sums from scratch (after a zoom, a
    /// reset or a change).
    pub fn refresh(&mut self) {
        let t0 = self.now_t0();
        self.acc = WindowAcc::default();
        let mut from = None;
        for r in self.history.iter().filter(|r| r.t_s - r.interval_s >= t0) {
            from.get_or_insert(r.seq);
            self.acc.add(r);
        }
        self.acc_from_seq = from.unwrap_or_else(|| self.history.back().map_or(0, |r| r.seq + 1));
        self.derive_now();
    }

    fn derive_now(&mut self) {
        let from = self
            .now_records()
            .find(|r| !r.paused)
            .map(|r| r.t_s - r.interval_s);
        let to = self.history.iter().rev().find(|r| !r.paused).map(|r| r.t_s);
        self.now = from.zip(to).and_then(|(from, to)| self.acc.stats(from, to));
        self.now_buckets = self.acc.buckets.clone();
        self.cut_in();
        let t0 = self.now_t0();
        self.now_windows = self
            .cut_windows
            .iter()
            .filter(|w| w.from_s >= t0 - 1e-9)
            .cloned()
            .collect();
    }

    /// Takes the records not yet cut into verdict windows: from the last
    /// marker on (the rule of [`crate::output::verdict::window_stats`]),
    /// anew when the marker changed. Each record is taken in once and each
    /// window measured once, so a 10-minute "now" costs no more per record
    /// than a short one.
    fn cut_in(&mut self) {
        let anchor = self.markers.last().map_or(f64::NEG_INFINITY, |m| m.t_s);
        if anchor != self.cut_anchor {
            self.cut_anchor = anchor;
            self.cut = crate::output::verdict::Windows::new(WINDOW_S, SETTLE_S);
            self.cut_windows.clear();
            self.cut_from = None;
            self.cut_seq = None;
        }
        let start = match self.cut_seq {
            Some(seq) => self.history.partition_point(|r| r.seq <= seq),
            None => self
                .history
                .partition_point(|r| r.t_s - r.interval_s < anchor),
        };
        for i in start..self.history.len() {
            use crate::output::verdict::Fed;
            let r = &self.history[i];
            self.cut_seq = Some(r.seq);
            match self.cut.feed(r) {
                Fed::Dropped => {}
                Fed::Kept => {
                    self.cut_from.get_or_insert(r.seq);
                }
                Fed::Closed => {
                    let from = self.cut_from.take().unwrap_or(r.seq);
                    let first = self.history.partition_point(|x| x.seq < from);
                    let kept = self
                        .history
                        .range(first..=i)
                        .filter(|x| !x.paused && x.reads > 0);
                    self.cut_windows.extend(WindowStats::of(kept));
                }
            }
        }
    }

    fn add_events(&mut self, events: &[Event]) {
        // An A/B switch's events come with the next record or two.
        let now = self.elapsed_s;
        self.ab_quiet.retain(|(_, t)| now - t <= AB_QUIET_S);
        for e in events {
            if let Some(i) = self.ab_quiet.iter().position(|(l, _)| *l == e.label) {
                self.ab_quiet.remove(i);
                continue;
            }
            // A demo's caption: shown, logged, not a chart marker.
            if let Some(c) = e.label.strip_prefix("caption: ") {
                self.caption = Some(c.to_string());
                self.log_line(e.t_s, e.label.clone(), false);
                continue;
            }
            let short = crate::output::format::short_label(&e.label);
            // Changes applied together share one marker (and its number).
            let n = match self.markers.last_mut() {
                Some(m) if (m.t_s - e.t_s).abs() < 1e-6 => {
                    m.label.push_str(", ");
                    m.label.push_str(&short);
                    m.n
                }
                _ => {
                    self.marker_seq += 1;
                    self.markers.push(Marker {
                        n: self.marker_seq,
                        t_s: e.t_s,
                        label: short,
                    });
                    self.marker_seq
                }
            };
            self.log_line(e.t_s, format!("[{n}] {}", e.label), false);
        }
    }

    /// Adds a line to the events log.
    pub fn log_line(&mut self, t_s: f64, text: String, notice: bool) {
        self.log.push_back((t_s, text, notice));
        while self.log.len() > LOG_LINES {
            self.log.pop_front();
            self.log_dropped += 1;
        }
        // Scrolled back past what is kept: show the oldest line kept.
        if let Some(a) = self.events_anchor.as_mut() {
            *a = (*a).max(self.log_dropped);
        }
    }

    /// The number of the newest line of the log (0 when empty).
    pub fn log_newest(&self) -> u64 {
        (self.log_dropped + self.log.len() as u64).saturating_sub(1)
    }

    /// The log lines the events panel shows at its bottom: up to the
    /// anchor when scrolled back, else all. (number, line)
    pub fn log_shown(&self) -> impl Iterator<Item = (u64, &(f64, String, bool))> {
        let upto = self.events_anchor.unwrap_or(u64::MAX);
        let first = self.log_dropped;
        self.log
            .iter()
            .enumerate()
            .map(move |(i, l)| (first + i as u64, l))
            .take_while(move |(n, _)| *n <= upto)
    }

    /// Scrolls the events panel back (`up`) or forward by `lines` log
    /// lines, never back past `oldest` (the line above which the panel
    /// would not be full: see [`super::layout`]); forward to the newest
    /// follows new lines again.
    pub fn scroll_events(&mut self, up: bool, lines: u64, oldest: u64) {
        let newest = self.log_newest();
        let at = self.events_anchor.unwrap_or(newest);
        let to = if up {
            at.saturating_sub(lines).max(oldest.min(at))
        } else {
            at + lines
        };
        self.events_anchor = (to < newest).then_some(to);
    }

    /// A demo's progress for the footer: `step 2/4 · next in 12 s`,
    /// `step 3/4 · n: next`, `end of the demo (4 steps)`.
    pub fn demo_progress(&self) -> Option<String> {
        let (step, total, due) = self.demo_step?;
        Some(if step > total {
            format!("end of the demo ({total} steps)")
        } else if step == total && due.is_none() {
            format!("step {step}/{total}, the last · n ends the demo")
        } else {
            match due {
                Some(t) => format!(
                    "step {step}/{total} · next in {:.0} s",
                    (t - self.elapsed_s).max(0.0).ceil()
                ),
                None => format!("step {step}/{total} · n: next"),
            }
        })
    }

    /// Shows a one-line message for a few seconds. One longer than an
    /// 80-column footer can show whole also goes to the event log, so the
    /// whole text is always on screen somewhere.
    pub fn flash(&mut self, text: impl Into<String>) {
        let text = text.into();
        if text.chars().count() > FLASH_WHOLE {
            self.log_line(self.elapsed_s, text.clone(), false);
        }
        self.flash = Some((text, self.elapsed_s + 4.0));
    }

    /// Shows a message and logs it whatever its length: an event worth
    /// finding later (an A/B's stop).
    pub fn announce(&mut self, text: impl Into<String>) {
        let text = text.into();
        self.log_line(self.elapsed_s, text.clone(), false);
        self.flash_logged(text);
    }

    /// Shows a message whose content the events panel already holds (a
    /// change of settings: each changed key is a marker's line there), so
    /// it is not logged a second time however long it is.
    pub fn flash_logged(&mut self, text: impl Into<String>) {
        self.flash = Some((text.into(), self.elapsed_s + 4.0));
    }

    /// The first-contact hint: three keys to try, in the footer until the
    /// first key (see [`Self::end_hint`]).
    pub fn show_hint(&mut self) {
        self.flash = Some((FIRST_HINT.to_string(), f64::INFINITY));
    }

    /// A key was pressed: the first-contact hint, if shown, goes.
    pub fn end_hint(&mut self) {
        if self.flash.as_ref().is_some_and(|(t, _)| t == FIRST_HINT) {
            self.flash = None;
        }
    }

    /// The current flash message, if still due.
    pub fn flash_text(&self) -> Option<&str> {
        self.flash
            .as_ref()
            .filter(|(_, until)| *until >= self.elapsed_s)
            .map(|(t, _)| t.as_str())
    }

    /// The time charts' span (t0, t1) and whether it is the demo's whole
    /// length (its right end is then ahead of now, labelled in seconds
    /// from the start) rather than a window ending now.
    pub fn chart_span(&self) -> (f64, f64, bool) {
        match self.demo_span {
            Some(len) if self.elapsed_s < len => (0.0, len, true),
            _ => (self.elapsed_s - self.window_s, self.elapsed_s, false),
        }
    }

    /// Fits the charts to a demo of `len_s` seconds (see [`Self::demo_span`]).
    pub fn fit_demo(&mut self, len_s: f64) {
        let len = len_s.clamp(ZOOM_STEPS_S[0], ZOOM_STEPS_S[ZOOM_STEPS_S.len() - 1]);
        self.window_s = len;
        self.demo_span = Some(len);
    }

    /// The start of the visible window.
    pub fn window_start(&self) -> f64 {
        (self.elapsed_s - self.window_s).max(0.0)
    }

    /// Records in the visible window.
    pub fn visible(&self) -> impl Iterator<Item = &IntervalRecord> {
        let t0 = self.window_start();
        self.history.iter().filter(move |r| r.t_s > t0)
    }

    /// The "now" window: since the latest marker (a change, or the
    /// baseline's mark: right after `b` "now" starts empty rather than
    /// holding the baseline's own intervals), within the visible window.
    /// Skips the interval the marker fell in.
    pub fn now_records(&self) -> impl Iterator<Item = &IntervalRecord> {
        let t0 = self.now_t0();
        self.history
            .iter()
            .filter(move |r| r.t_s - r.interval_s >= t0)
    }

    /// Where the "now" window starts.
    fn now_t0(&self) -> f64 {
        let t0 = self.window_start();
        match self.markers.last() {
            Some(m) => t0.max(m.t_s),
            None => t0,
        }
    }

    /// Freezes the "now" window as the baseline. Returns false when there is
    /// nothing measured yet.
    pub fn mark_baseline(&mut self) -> bool {
        let Some(stats) = self.now else {
            return false;
        };
        let buckets = self.now_buckets.clone();
        let windows = self.now_windows.clone();
        self.baseline = Some(Baseline {
            stats,
            buckets,
            label: self.plan.clone(),
            settings: self.settings.clone(),
            windows,
        });
        self.ab_other = None;
        true
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
        if self.ab.is_some() {
            return None;
        }
        let (cmp, pb) = self.published.as_ref()?;
        let b = self.baseline.as_ref()?;
        let (from, to) = (b.settings.get(&cmp.key)?, self.settings.get(&cmp.key)?);
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
        let Some(v) = self.verdict_on(metric, published.as_ref()) else {
            let secs: f64 = self.now_records().map(|r| r.interval_s).sum();
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

    /// The change of `m` from the baseline to "now", %, and the verdict's
    /// kind: once each side has two windows, the verdict's own change (its
    /// medians of 2 s windows, the figure the demo's verdict line states),
    /// so the panel, the presentation boxes and the verdict line agree;
    /// before that the two windows' whole figures, with no kind. None
    /// without a baseline, a "now", or a baseline value.
    pub fn change_vs_baseline(
        &self,
        m: &crate::metrics::Metric,
    ) -> Option<(f64, Option<crate::output::verdict::Kind>)> {
        let b = self.baseline.as_ref()?;
        if let Some(v) = self.verdict_on(m, None)
            && let Some(c) = v.verdict.change_pct
        {
            return Some((c, Some(v.verdict.kind)));
        }
        let (a, n) = ((m.window)(&b.stats), (m.window)(&self.now?));
        (a.is_finite() && n.is_finite() && a != 0.0).then(|| ((n - a) / a * 100.0, None))
    }

    /// `metric` since the baseline, over this run's own windows (the
    /// baseline's, and those since the last change), judged against
    /// `published` when given; None without a baseline or until each
    /// side holds two windows.
    pub fn verdict_on(
        &self,
        metric: &crate::metrics::Metric,
        published: Option<&crate::scenario::preset::Published>,
    ) -> Option<crate::output::verdict::WindowVerdict> {
        let b = self.baseline.as_ref()?;
        crate::output::verdict::judge_windows(&b.windows, &self.now_windows, metric, published)
    }

    /// A/B (`B`): the settings to run next, flipping between the
    /// baseline's and the ones run before the last flip; or why not.
    pub fn flip_baseline(&mut self) -> Result<Settings, String> {
        let Some(b) = &self.baseline else {
            return Err("no baseline yet: mark one with b, change settings, then B flips".into());
        };
        if self.settings != b.settings {
            self.ab_other = Some(self.settings.clone());
            Ok(b.settings.clone())
        } else {
            self.ab_other.clone().ok_or_else(|| {
                "the settings are the baseline's: change one, then B flips between the two".into()
            })
        }
    }

    /// What `?` explains: the setting under the cursor (its whole name:
    /// the help's row for it), else the panel last clicked (a chart: its
    /// axes); None: the whole help.
    pub fn help_topic(&self) -> Option<String> {
        self.cursor.or(self.focus).map(str::to_string)
    }

    /// Where the explorer runs, for which keys work here.
    pub fn mode(&self) -> super::keys::Mode {
        super::keys::Mode {
            replay: self.replay.is_some(),
            remote: self.place.is_some(),
        }
    }

    /// Starts the live A/B (`A`) between the baseline's settings and the
    /// current ones, on the current ones; or why not.
    pub fn start_ab(&mut self) -> Result<(), String> {
        let Some(b) = &self.baseline else {
            return Err(
                "no baseline yet: mark one with b, change a setting, then A runs the A/B".into(),
            );
        };
        if self.settings == b.settings {
            return Err("the settings are the baseline's: change one, then A runs the A/B".into());
        }
        self.ab = Some(super::ab::AbRun::new(
            b.settings.clone(),
            self.settings.clone(),
            self.elapsed_s,
        ));
        Ok(())
    }

    /// Ends the live A/B (whatever stops it), keeping its turns for the
    /// charts; returns it.
    pub fn end_ab(&mut self) -> Option<super::ab::AbRun> {
        let ab = self.ab.take()?;
        self.ab_past.extend(ab.turn_spans(self.elapsed_s));
        let n = self.ab_past.len();
        if n > super::ab::MAX_SPANS {
            self.ab_past.drain(..n - super::ab::MAX_SPANS);
        }
        Some(ab)
    }

    /// Every live A/B turn to draw: the ended A/Bs' and the running one's
    /// until now.
    pub fn ab_spans(&self) -> Vec<super::ab::TurnSpan> {
        let mut out = self.ab_past.clone();
        if let Some(ab) = &self.ab {
            out.extend(ab.turn_spans(self.elapsed_s));
        }
        out
    }

    /// Clears the charts; the baseline stays.
    pub fn reset_charts(&mut self) {
        self.demo_span = None;
        self.history.clear();
        self.markers.clear();
        self.ab_past.clear();
        self.cut_anchor = f64::NAN;
        self.refresh();
    }

    /// Steps the window through [`ZOOM_STEPS_S`].
    pub fn zoom(&mut self, wider: bool) {
        let i = ZOOM_STEPS_S
            .iter()
            .position(|&w| w >= self.window_s)
            .unwrap_or(ZOOM_STEPS_S.len() - 1);
        let j = if wider {
            (i + 1).min(ZOOM_STEPS_S.len() - 1)
        } else {
            i.saturating_sub(1)
        };
        self.window_s = ZOOM_STEPS_S[j];
        self.demo_span = None;
        self.refresh();
    }

    /// Records the settings now running.
    pub fn set_running(&mut self, requested: Settings, effective: Settings) {
        self.plan = crate::engine::stages::Plan::label(&effective);
        self.resolution = resolution_of(&requested, &effective, &self.features);
        self.settings = requested;
        self.effective = effective;
    }

    /// Why a setting is not (fully) available here, if it is not: greyed in
    /// the settings panel with this reason.
    pub fn unavailable(&self, key: &str) -> Option<String> {
        self.resolution.as_ref()?.limit(key).map(str::to_string)
    }

    /// [`crate::engine::resolve`]'s answer for the settings running, if
    /// they resolve.
    pub fn resolution(&self) -> Option<&crate::engine::Resolution> {
        self.resolution.as_ref()
    }

    /// Whether a setting does nothing in the configuration running (the
    /// footer leaves its key out; pressing it says why).
    pub fn inert(&self, key: &str) -> bool {
        self.resolution
            .as_ref()
            .is_some_and(|r| r.inert.contains(&key))
    }
}

/// What [`crate::engine::resolve`] answers for `requested` on a machine
/// with `features`, the filesystem as the settings that ran tell it
/// ([`crate::engine::DataFs::inferred`]).
fn resolution_of(
    requested: &Settings,
    effective: &Settings,
    features: &Features,
) -> Option<crate::engine::Resolution> {
    let fs = crate::engine::DataFs::inferred(requested, effective);
    crate::engine::resolve(requested, features, &fs).ok()
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::WorkerMode;

    #[test]
    fn a_demo_says_its_step_and_the_time_to_the_next() {
        let mut a = measured(false);
        assert_eq!(a.demo_progress(), None);
        a.demo_step = Some((2, 4, Some(a.elapsed_s + 11.2)));
        assert_eq!(a.demo_progress().unwrap(), "step 2/4 · next in 12 s");
        a.demo_step = Some((3, 4, None));
        assert_eq!(a.demo_progress().unwrap(), "step 3/4 · n: next");
        a.demo_step = Some((4, 4, None));
        assert!(a.demo_progress().unwrap().contains("the last"));
        a.demo_step = Some((5, 4, None));
        assert_eq!(a.demo_progress().unwrap(), "end of the demo (4 steps)");
    }

    /// The explorer after 8 s of records; with `baseline`, `b` pressed at
    /// the end; then workers.mode changed to bound either way.
    fn measured(baseline: bool) -> App {
        let s = Settings::default();
        let mut a = App::new(s.clone(), s, Features::default(), 2);
        for seq in 0..32 {
            a.push(rec(seq, &[], false));
        }
        if baseline {
            assert!(a.mark_baseline());
        }
        let mut bound = a.settings.clone();
        bound.workers.mode = WorkerMode::Bound;
        a.set_running(bound.clone(), bound);
        a
    }

    /// B flips to the baseline's settings and back; without a baseline,
    /// or with nothing changed since, it says why.
    #[test]
    fn b_flips_between_the_baseline_and_the_current_settings() {
        let mut a = measured(false);
        assert!(a.flip_baseline().unwrap_err().contains("no baseline"));
        let mut a = measured(true);
        let base = a.baseline.as_ref().unwrap().settings.clone();
        assert_ne!(a.settings, base, "workers.mode changed after b");
        let current = a.settings.clone();
        let to = a.flip_baseline().unwrap();
        assert_eq!(to, base);
        a.set_running(to.clone(), to);
        let back = a.flip_baseline().unwrap();
        assert_eq!(back, current);
        a.set_running(back.clone(), back);
        assert_eq!(a.flip_baseline().unwrap(), base);
        // Marked with nothing changed: nothing to flip to.
        let mut a = measured(false);
        assert!(a.mark_baseline());
        assert!(a.flip_baseline().unwrap_err().contains("baseline's"));
    }

    #[test]
    fn zoom_steps_and_clamps() {
        let mut app = App::new(
            Settings::default(),
            Settings::default(),
            Features::default(),
            2,
        );
        assert_eq!(app.window_s, 60.0);
        app.zoom(false);
        app.zoom(false);
        app.zoom(false);
        assert_eq!(app.window_s, 10.0);
        for _ in 0..10 {
            app.zoom(true);
        }
        assert_eq!(app.window_s, 600.0);
    }

    fn rec(seq: u64, events: &[&str], paused: bool) -> IntervalRecord {
        let mut r = crate::metrics::Recorder::new();
        if !paused {
            for i in 0..50u64 {
                let ns = 10_000 + (seq * 7_919 + i * 104_729) % 900_000;
                r.record(crate::metrics::Stage::EndToEnd, ns);
                r.record(crate::metrics::Stage::Queue, ns / 10);
            }
            r.counters.reads = 50;
            r.counters.bytes = 50 * 4096;
        }
        let t_s = (seq + 1) as f64 * 0.25;
        let mut rec = IntervalRecord {
            seq,
            t_s,
            paused,
            ..Default::default()
        };
        rec.fill_from(&r, 0.25);
        rec.workers.run_delay_us = (seq % 13) as f64 * 100.0;
        rec.events = events
            .iter()
            .map(|l| Event {
                t_s: t_s - 0.1,
                label: l.to_string(),
            })
            .collect();
        rec
    }

    #[test]
    fn the_sliding_now_window_equals_a_fresh_merge() {
        let mut app = App::new(
            Settings::default(),
            Settings::default(),
            Features::default(),
            2,
        );
        app.window_s = 10.0;
        for seq in 0..400u64 {
            let events: &[&str] = match seq {
                90 => &["workers.mode: unbound -> bound"],
                150 => &["baseline"],
                300 => &["paused"],
                _ => &[],
            };
            app.push(rec(seq, events, (300..320).contains(&seq)));
            if seq == 200 {
                app.zoom(true);
            }
            // The sliding window keeps no execution median (not shown).
            let fresh = WindowStats::of(app.now_records()).map(|mut w| {
                w.exec_p50_us = None;
                w
            });
            assert_eq!(app.now, fresh, "after record {seq}");
            let mut fresh_buckets = crate::metrics::LatencyBuckets::default();
            for r in app.now_records() {
                fresh_buckets.add(&r.latency_buckets);
            }
            assert_eq!(app.now_buckets, fresh_buckets.counts, "{seq}");
        }
    }
}
