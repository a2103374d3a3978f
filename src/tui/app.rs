//! The explorer's state and its key handling, with no terminal in sight: what
//! the screen shows is a pure function of an [`App`], and what a key does is a
//! pure function of the key and the current settings. That keeps the
//! rendering snapshot-testable from fixed records and the key bindings
//! testable as key -> action -> settings.

use std::collections::VecDeque;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::keys::{self, Does};
pub use crate::metrics::WindowStats;
use crate::metrics::{Event, IntervalRecord, Notice, WindowSpread};
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

pub use super::keys::Action;

/// Maps a key to an action, given the settings as requested: what the key
/// does comes from [`keys::bindings`]. Pure: the tests drive every binding
/// through it. Ctrl-Z is [`Action::None`] here: the terminal loop suspends
/// before a key gets this far.
pub fn action_for_key(key: KeyEvent, settings: &Settings, cpus: usize) -> Action {
    let Some(does) = keys::does(key) else {
        return Action::None;
    };
    match does {
        Does::Act(Action::Suspend) => Action::None,
        Does::Act(a) => a.clone(),
        Does::Change(f) => match change(f, settings, cpus) {
            Ok(s) => Action::Apply(Box::new(s)),
            Err(why) => Action::Refuse(why),
        },
    }
}

/// The settings a change leads to, or why it cannot be made (a step past
/// a limit). Not validated here: [`crate::engine::Engine::apply`] validates
/// once, and a refusal there leaves the running workload as it was.
fn change(f: &keys::Change, s: &Settings, _cpus: usize) -> Result<Settings, String> {
    f.apply(s)
}

/// The settings a settings key leads to: `None` for a key that is not a
/// settings key, `Err` with a reason when the change cannot be made.
pub fn adjust(key: char, s: &Settings, cpus: usize) -> Option<Result<Settings, String>> {
    match keys::lookup(keys::Key::Char(key))? {
        Does::Change(f) => Some(change(f, s, cpus)),
        _ => None,
    }
}

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

pub use crate::metrics::window::WindowAcc;

/// The longest flash message an 80-column footer shows whole (beside its
/// `? help  q quit`).
const FLASH_WHOLE: usize = 62;

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
    /// Each metric's spread over the window's intervals (its noise).
    pub spread: WindowSpread,
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
        items: Vec<super::choose::Choice>,
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

/// What a key in an overlay asks for, beyond changing the overlay.
#[derive(Debug, Clone, PartialEq)]
pub enum OverlayAction {
    /// Nothing more.
    None,
    /// Apply a preset: its name, description and settings.
    ApplyPreset(String, String, Box<Settings>),
    /// Save the current settings under this name (`true`: replace the file).
    Save(String, bool),
    /// Run the workload with these settings (the chooser, the prompt): one
    /// change, as a key's.
    Apply(Box<Settings>),
    /// Quit.
    Quit,
}

impl Overlay {
    /// The help, from its top, not searched.
    pub fn help() -> Overlay {
        Overlay::Help {
            scroll: 0,
            find: String::new(),
            typing: false,
        }
    }
}

/// Handles a key while an overlay is open: moves in the picker, edits the
/// name, answers the overwrite question. Pure: the caller applies or saves.
/// `exists` tells whether a user preset of that name is already saved.
pub fn overlay_key(
    overlay: &mut Overlay,
    key: KeyEvent,
    exists: &dyn Fn(&str) -> bool,
) -> OverlayAction {
    let ctrl_c = key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');
    if ctrl_c {
        *overlay = Overlay::None;
        return OverlayAction::Quit;
    }
    match overlay {
        Overlay::Picker { items, selected } => match key.code {
            KeyCode::Up | KeyCode::Char('k') => {
                *selected = selected.saturating_sub(1);
                OverlayAction::None
            }
            KeyCode::Down | KeyCode::Char('j') => {
                *selected = (*selected + 1).min(items.len().saturating_sub(1));
                OverlayAction::None
            }
            KeyCode::Enter => {
                let item = items.get(*selected).cloned();
                match item {
                    Some(PickItem {
                        name,
                        description,
                        settings: Some(s),
                        ..
                    }) => {
                        *overlay = Overlay::None;
                        OverlayAction::ApplyPreset(name, description, Box::new(s))
                    }
                    Some(PickItem { description, .. }) => {
                        *overlay = Overlay::Error(description);
                        OverlayAction::None
                    }
                    None => OverlayAction::None,
                }
            }
            _ => {
                *overlay = Overlay::None;
                OverlayAction::None
            }
        },
        Overlay::SaveName {
            name,
            selected,
            refused,
        } => {
            let plain = !key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
            *refused = None;
            match key.code {
                KeyCode::Enter if !name.is_empty() => {
                    let name = name.clone();
                    if let Err(e) = crate::scenario::preset::check_name(&name) {
                        *overlay = Overlay::Error(e.to_string());
                        OverlayAction::None
                    } else if exists(&name) {
                        *overlay = Overlay::ConfirmOverwrite(name);
                        OverlayAction::None
                    } else {
                        *overlay = Overlay::None;
                        OverlayAction::Save(name, false)
                    }
                }
                KeyCode::Backspace => {
                    if std::mem::take(selected) {
                        name.clear();
                    } else {
                        name.pop();
                    }
                    OverlayAction::None
                }
                KeyCode::Right | KeyCode::End => {
                    *selected = false;
                    OverlayAction::None
                }
                KeyCode::Char(c)
                    if plain && (c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
                {
                    if std::mem::take(selected) {
                        name.clear();
                    }
                    if name.len() < 64 {
                        name.push(c);
                    } else {
                        *refused = Some("a preset name has at most 64 characters".into());
                    }
                    OverlayAction::None
                }
                KeyCode::Char(c) if plain => {
                    *refused = Some(format!(
                        "{:?} cannot be in a preset name: letters, digits, - _ . only",
                        c
                    ));
                    OverlayAction::None
                }
                KeyCode::Esc => {
                    *overlay = Overlay::None;
                    OverlayAction::None
                }
                _ => OverlayAction::None,
            }
        }
        Overlay::ConfirmOverwrite(name) => {
            let name = name.clone();
            *overlay = Overlay::None;
            if matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                OverlayAction::Save(name, true)
            } else {
                OverlayAction::None
            }
        }
        Overlay::Help {
            scroll,
            find,
            typing,
        } => {
            if *typing {
                match key.code {
                    KeyCode::Enter => *typing = false,
                    KeyCode::Esc => {
                        find.clear();
                        *typing = false;
                    }
                    KeyCode::Backspace => {
                        find.pop();
                    }
                    KeyCode::Char(c)
                        if find.len() < 40
                            && !key
                                .modifiers
                                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
                    {
                        find.push(c);
                        *scroll = 0;
                    }
                    _ => {}
                }
                return OverlayAction::None;
            }
            // At most the whole help at 80 columns: Up always comes back.
            let most = super::help::line_count(false, find, 76);
            match key.code {
                KeyCode::Up | KeyCode::Char('k') => *scroll = scroll.saturating_sub(1),
                KeyCode::Down | KeyCode::Char('j') => *scroll = (*scroll + 1).min(most),
                KeyCode::PageUp => *scroll = scroll.saturating_sub(10),
                KeyCode::PageDown | KeyCode::Char(' ') => *scroll = (*scroll + 10).min(most),
                KeyCode::Home => *scroll = 0,
                KeyCode::End => *scroll = most,
                KeyCode::Char('/') => {
                    *typing = true;
                    find.clear();
                    *scroll = 0;
                }
                KeyCode::Esc if !find.is_empty() => {
                    find.clear();
                    *scroll = 0;
                }
                // q still quits from the help; Esc, ? and other keys close it.
                KeyCode::Char('q') => {
                    *overlay = Overlay::None;
                    return OverlayAction::Quit;
                }
                _ => *overlay = Overlay::None,
            }
            OverlayAction::None
        }
        Overlay::Error(_) | Overlay::None => {
            *overlay = Overlay::None;
            OverlayAction::None
        }
        // They need the settings: see [`popup_key`].
        Overlay::Chooser { .. } | Overlay::Prompt { .. } => OverlayAction::None,
    }
}

/// Handles a key while any overlay is open: the chooser and the prompt
/// (which read the settings) here, the others in [`overlay_key`].
pub fn popup_key(app: &mut App, key: KeyEvent, exists: &dyn Fn(&str) -> bool) -> OverlayAction {
    match app.overlay {
        Overlay::Chooser { .. } => super::choose::chooser_key(app, key),
        Overlay::Prompt { .. } => super::choose::prompt_key(app, key),
        _ => overlay_key(&mut app.overlay, key, exists),
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
    /// Running sums of the "now" window: the records of `history` from
    /// sequence number `acc_from_seq` on.
    acc: WindowAcc,
    acc_from_seq: u64,
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
            quit_armed: false,
            ab_other: None,
            demo_step: None,
            now: None,
            now_buckets: Vec::new(),
            acc: WindowAcc::default(),
            acc_from_seq: 0,
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
    }

    fn add_events(&mut self, events: &[Event]) {
        for e in events {
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

    /// The "now" window: since the latest marker after the baseline (so it
    /// holds only the current settings), within the visible window. Skips
    /// the interval the change fell in.
    pub fn now_records(&self) -> impl Iterator<Item = &IntervalRecord> {
        let t0 = self.now_t0();
        self.history
            .iter()
            .filter(move |r| r.t_s - r.interval_s >= t0)
    }

    /// Where the "now" window starts.
    fn now_t0(&self) -> f64 {
        let t0 = self.window_start();
        match self.markers.iter().rev().find(|m| m.label != "baseline") {
            Some(m) => t0.max(m.t_s),
            None => t0,
        }
    }

    /// Whether a key's action quits now: Ctrl-C at once; `q` at once with
    /// no baseline to lose, else the first `q` arms (and says so) and a
    /// second quits. Any other key disarms.
    pub fn quit_key(&mut self, action: &Action) -> bool {
        let armed = std::mem::take(&mut self.quit_armed);
        match action {
            Action::QuitNow => true,
            Action::Quit if self.baseline.is_some() && !armed => {
                self.quit_armed = true;
                self.flash("q again quits; the baseline goes with it");
                false
            }
            Action::Quit => true,
            _ => false,
        }
    }

    /// Freezes the "now" window as the baseline. Returns false when there is
    /// nothing measured yet.
    pub fn mark_baseline(&mut self) -> bool {
        let Some(stats) = self.now else {
            return false;
        };
        let buckets = self.now_buckets.clone();
        let spread = WindowSpread::of(self.now_records());
        self.baseline = Some(Baseline {
            stats,
            buckets,
            label: self.plan.clone(),
            settings: self.settings.clone(),
            spread,
        });
        self.ab_other = None;
        true
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

    /// Clears the charts; the baseline stays.
    pub fn reset_charts(&mut self) {
        self.demo_span = None;
        self.history.clear();
        self.markers.clear();
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

    /// Whether a setting does nothing in the configuration running (the
    /// footer leaves its key out; pressing it says why).
    pub fn inert(&self, key: &str) -> bool {
        self.resolution
            .as_ref()
            .is_some_and(|r| r.inert.contains(&key))
    }

    /// Why `n` (the settings with `key` changed) cannot run here, as the
    /// engine would refuse it ([`Settings::validate`], then
    /// [`crate::engine::resolve`] on this machine and filesystem), or would
    /// run `key` as something else (the reason the settings panel greys a
    /// setting with). None: it can.
    pub fn refusal(&self, n: &Settings, key: &str) -> Option<String> {
        if let Err(e) = n.validate(self.cpus.max(1)) {
            return Some(e.to_string());
        }
        let fs = crate::engine::DataFs::inferred(&self.settings, &self.effective);
        let new = match crate::engine::resolve(n, &self.features, &fs) {
            Err(e) => return Some(e.to_string()),
            Ok(r) => r,
        };
        if let Some(why) = new.limit(key)
            && new.effective.get(key) != n.get(key)
        {
            return Some(why.to_string());
        }
        // A value that runs exactly as the current one changes nothing here.
        let now = crate::engine::resolve(&self.settings, &self.features, &fs).ok()?;
        (n != &self.settings && new.runs_like(&now)).then(|| {
            new.limit(key)
                .unwrap_or("it runs the same as the current value here")
                .to_string()
        })
    }

    /// What a key does here: a settings key's change, with the keys that
    /// conflict with it following it ([`crate::engine::reconcile`]), or
    /// refused with why when it cannot run or changes nothing (no marker).
    pub fn key_action(&self, key: KeyEvent) -> Action {
        let action = action_for_key(key, &self.settings, self.cpus);
        let Action::Apply(mut n) = action else {
            return action;
        };
        let Some(changed) = self.settings.diff(&n).first().map(|c| c.key.clone()) else {
            return Action::None;
        };
        crate::engine::reconcile(&mut n, &changed);
        match self.refusal(&n, &changed) {
            Some(why) => Action::Refuse(format!("{changed}: {why}")),
            None => Action::Apply(n),
        }
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
    use crate::settings::{EngineKind, SleepMode, VerifyMode, WorkerMode};

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    fn apply(c: char, s: &Settings) -> Settings {
        match action_for_key(key(c), s, 2) {
            Action::Apply(n) => *n,
            other => panic!("key {c:?}: expected Apply, got {other:?}"),
        }
    }

    #[test]
    fn every_settings_key_changes_exactly_its_setting() {
        let base = Settings::default();
        let table: &[(char, &str, &str)] = &[
            ('w', "workers.mode", "inline"),
            ('W', "workers.verify_mode", "unbound"),
            ('h', "workers.highpri", "false"),
            ('i', "workload.sleep", "plain"),
            ('e', "workload.engine", "sync"),
            ('v', "pipeline.verity", "false"),
            ('d', "pipeline.decrypt", "false"),
            ('c', "pipeline.cipher", "aes-256-xts-soft"),
            ('o', "workload.direct", "true"),
            ('+', "workload.queue_depth", "2"),
            (']', "workload.readers", "2"),
            ('>', "workload.block_size", "8K"),
            ('g', "load.hogs", "1"),
        ];
        for &(c, k, v) in table {
            let n = apply(c, &base);
            let changes = base.diff(&n);
            assert_eq!(changes.len(), 1, "key {c:?}: {changes:?}");
            assert_eq!(changes[0].key, k, "key {c:?}");
            assert_eq!(changes[0].to, v, "key {c:?}");
        }
    }

    /// The values a setting takes pressing `key` `n` times from the default.
    fn cycle<T>(key: char, n: usize, get: fn(&Settings) -> T) -> Vec<T> {
        let mut s = Settings::default();
        let mut seen = vec![get(&s)];
        for _ in 0..n {
            s = apply(key, &s);
            seen.push(get(&s));
        }
        seen
    }

    #[test]
    fn cycles_wrap_around() {
        use VerifyMode as V;
        use WorkerMode as W;
        let modes = cycle('w', 3, |s| s.workers.mode);
        assert_eq!(modes, [W::Unbound, W::Inline, W::Bound, W::Unbound]);
        let verify = cycle('W', 4, |s| s.workers.verify_mode);
        assert_eq!(verify, [V::Bound, V::Unbound, V::Same, V::Inline, V::Bound]);
    }

    #[test]
    fn limits_are_refused_with_a_reason() {
        let mut s = Settings::default();
        assert!(
            matches!(action_for_key(key('-'), &s, 2), Action::Refuse(r) if r.contains("minimum"))
        );
        assert!(matches!(action_for_key(key('['), &s, 2), Action::Refuse(_)));
        assert!(matches!(action_for_key(key('<'), &s, 2), Action::Refuse(_)));
        assert!(matches!(action_for_key(key('G'), &s, 2), Action::Refuse(_)));
        s.workload.queue_depth = 1024;
        assert!(matches!(action_for_key(key('+'), &s, 2), Action::Refuse(r) if r.contains("1024")));
        s.workload.block_size = 1 << 20;
        assert!(matches!(action_for_key(key('>'), &s, 2), Action::Refuse(_)));
    }

    #[test]
    fn sync_engine_takes_sleep_along_and_refuses_i() {
        let mut app = crate::tui::fixture::app(false);
        let s = Settings::default();
        app.set_running(s.clone(), s.clone());
        let Action::Apply(sync) = app.key_action(key('e')) else {
            panic!("e refused")
        };
        assert_eq!(sync.workload.engine, EngineKind::Sync);
        let mut plain = s.clone();
        plain.workload.sleep = SleepMode::Plain;
        app.set_running(plain.clone(), plain);
        let Action::Apply(s2) = app.key_action(key('e')) else {
            panic!("e refused")
        };
        assert_eq!(s2.workload.engine, EngineKind::Sync);
        assert_eq!(s2.workload.sleep, SleepMode::Iowait, "sleep follows engine");
        app.set_running((*sync).clone(), (*sync).clone());
        let i = app.key_action(key('i'));
        assert!(
            matches!(&i, Action::Refuse(r) if r.starts_with("workload.sleep") && r.contains("always sleep as iowait")),
            "{i:?}"
        );
        assert!(
            matches!(app.key_action(key('e')), Action::Apply(n) if n.workload.engine == EngineKind::Uring)
        );
    }

    /// A key whose setting does nothing in the current configuration says
    /// why and changes nothing (no marker): W with decryption off, w and h
    /// on the kernel target, h where priority cannot be raised.
    #[test]
    fn a_key_that_changes_nothing_here_is_refused_with_why() {
        let mut app = crate::tui::fixture::app(false);
        let mut verity_only = Settings::default();
        verity_only.pipeline.decrypt = false;
        app.set_running(verity_only.clone(), verity_only);
        let w = app.key_action(key('W'));
        assert_eq!(
            w,
            Action::Refuse(
                "workers.verify_mode: used only when decrypt and verity are both on".into()
            )
        );
        assert!(matches!(app.key_action(key('w')), Action::Apply(_)));

        let mut kernel = Settings::default();
        kernel.workload.target = crate::settings::Target::Kernel;
        app.set_running(kernel.clone(), kernel);
        for c in ['w', 'h', 'W', 'a'] {
            let why = app.key_action(key(c));
            assert!(
                matches!(&why, Action::Refuse(r) if r.contains("the kernel")),
                "{c}: {why:?}"
            );
        }
        assert!(matches!(app.key_action(key('K')), Action::Apply(_)));

        let mut app = crate::tui::fixture::app(false);
        app.features.highpri = false;
        app.features.highpri_reason = Some("no CAP_SYS_NICE".into());
        let mut low = Settings::default();
        low.workers.highpri = false;
        app.set_running(low.clone(), low);
        assert_eq!(
            app.key_action(key('h')),
            Action::Refuse("workers.highpri: no CAP_SYS_NICE".into())
        );
    }

    #[test]
    fn a_demo_says_its_step_and_the_time_to_the_next() {
        let mut a = crate::tui::fixture::app(false);
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

    /// B flips to the baseline's settings and back; without a baseline,
    /// or with nothing changed since, it says why.
    #[test]
    fn b_flips_between_the_baseline_and_the_current_settings() {
        let mut a = crate::tui::fixture::app(false);
        assert!(a.flip_baseline().unwrap_err().contains("no baseline"));
        let mut a = crate::tui::fixture::app(true);
        let base = a.baseline.as_ref().unwrap().settings.clone();
        assert_ne!(a.settings, base, "the fixture changed workers.mode after b");
        let current = a.settings.clone();
        let to = a.flip_baseline().unwrap();
        assert_eq!(to, base);
        a.set_running(to.clone(), to);
        let back = a.flip_baseline().unwrap();
        assert_eq!(back, current);
        a.set_running(back.clone(), back);
        assert_eq!(a.flip_baseline().unwrap(), base);
        // Marked with nothing changed: nothing to flip to.
        let mut a = crate::tui::fixture::app(false);
        assert!(a.mark_baseline());
        assert!(a.flip_baseline().unwrap_err().contains("baseline's"));
    }

    /// q quits at once without a baseline; with one, the first q only
    /// asks, any other key cancels, a second q quits; Ctrl-C never asks.
    #[test]
    fn quitting_asks_once_when_a_baseline_would_be_lost() {
        let mut a = crate::tui::fixture::app(false);
        assert!(a.quit_key(&Action::Quit));
        let mut a = crate::tui::fixture::app(true);
        assert!(a.baseline.is_some());
        assert!(!a.quit_key(&Action::Quit));
        assert!(a.quit_armed);
        assert!(!a.quit_key(&Action::ZoomIn), "another key cancels");
        assert!(!a.quit_key(&Action::Quit), "asks again");
        assert!(a.quit_key(&Action::Quit), "the second q quits");
        let mut a = crate::tui::fixture::app(true);
        assert!(a.quit_key(&Action::QuitNow));
        assert!(!a.quit_key(&Action::Escape));
    }

    #[test]
    fn control_keys() {
        let s = Settings::default();
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(action_for_key(ctrl_c, &s, 2), Action::QuitNow);
        assert_eq!(action_for_key(key('q'), &s, 2), Action::Quit);
        assert_eq!(
            action_for_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE), &s, 2),
            Action::Escape
        );
        assert_eq!(action_for_key(key(' '), &s, 2), Action::TogglePause);
        assert_eq!(action_for_key(key('b'), &s, 2), Action::MarkBaseline);
        assert_eq!(action_for_key(key('r'), &s, 2), Action::ResetCharts);
        assert_eq!(action_for_key(key('z'), &s, 2), Action::ZoomIn);
        assert_eq!(action_for_key(key('Z'), &s, 2), Action::ZoomOut);
        assert_eq!(action_for_key(key('?'), &s, 2), Action::ToggleHelp);
        assert_eq!(action_for_key(key('x'), &s, 2), Action::DropCache);
        assert_eq!(action_for_key(key('X'), &s, 2), Action::None);
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
            let fresh = WindowStats::of(app.now_records());
            assert_eq!(app.now, fresh, "after record {seq}");
            let mut fresh_buckets = crate::metrics::LatencyBuckets::default();
            for r in app.now_records() {
                fresh_buckets.add(&r.latency_buckets);
            }
            assert_eq!(app.now_buckets, fresh_buckets.counts, "{seq}");
        }
    }

    #[test]
    fn picker_moves_and_applies_the_chosen_preset() {
        let item = |name: &str, ok: bool| PickItem {
            name: name.into(),
            origin: "shipped",
            description: format!("about {name}"),
            settings: ok.then(Settings::default),
        };
        let mut o = Overlay::Picker {
            items: vec![item("a", true), item("b", true), item("broken", false)],
            selected: 0,
        };
        let k = |c: KeyCode| KeyEvent::new(c, KeyModifiers::NONE);
        let never = |_: &str| false;
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Down), &never),
            OverlayAction::None
        );
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Up), &never),
            OverlayAction::None
        );
        overlay_key(&mut o, k(KeyCode::Down), &never);
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Enter), &never),
            OverlayAction::ApplyPreset("b".into(), "about b".into(), Box::default())
        );
        assert_eq!(o, Overlay::None);
        // An invalid preset shows its error instead of applying.
        let mut o = Overlay::Picker {
            items: vec![item("broken", false)],
            selected: 0,
        };
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Enter), &never),
            OverlayAction::None
        );
        assert!(matches!(o, Overlay::Error(_)));
    }

    #[test]
    fn saving_asks_for_a_name_and_before_replacing() {
        let k = |c: KeyCode| KeyEvent::new(c, KeyModifiers::NONE);
        let exists = |n: &str| n == "taken";
        let typed = |name: &str| Overlay::SaveName {
            name: name.into(),
            selected: false,
            refused: None,
        };
        let mut o = typed("");
        for c in "myrun1".chars() {
            overlay_key(&mut o, k(KeyCode::Char(c)), &exists);
        }
        assert_eq!(o, typed("myrun1"));
        // A character a name cannot have is refused with a message.
        overlay_key(&mut o, k(KeyCode::Char(' ')), &exists);
        assert!(
            matches!(&o, Overlay::SaveName { name, refused: Some(r), .. } if name == "myrun1" && r.contains("' '")),
            "{o:?}"
        );
        overlay_key(&mut o, k(KeyCode::Backspace), &exists);
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Enter), &exists),
            OverlayAction::Save("myrun".into(), false)
        );
        // The prefilled name is selected: typing replaces it; Right keeps
        // it for appending; Backspace clears it.
        let prefilled = || Overlay::SaveName {
            name: "default".into(),
            selected: true,
            refused: None,
        };
        let mut o = prefilled();
        overlay_key(&mut o, k(KeyCode::Char('x')), &exists);
        assert_eq!(o, typed("x"));
        let mut o = prefilled();
        overlay_key(&mut o, k(KeyCode::Right), &exists);
        overlay_key(&mut o, k(KeyCode::Char('2')), &exists);
        assert_eq!(o, typed("default2"));
        let mut o = prefilled();
        overlay_key(&mut o, k(KeyCode::Backspace), &exists);
        assert_eq!(o, typed(""));
        // An existing name asks; only y replaces.
        let mut o = typed("taken");
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Enter), &exists),
            OverlayAction::None
        );
        assert_eq!(o, Overlay::ConfirmOverwrite("taken".into()));
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Char('n')), &exists),
            OverlayAction::None
        );
        assert_eq!(o, Overlay::None);
        let mut o = Overlay::ConfirmOverwrite("taken".into());
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Char('y')), &exists),
            OverlayAction::Save("taken".into(), true)
        );
        // Esc cancels without saving; Enter on an empty name does nothing.
        let mut o = typed("x");
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Esc), &exists),
            OverlayAction::None
        );
        assert_eq!(o, Overlay::None);
        let mut o = typed("");
        assert_eq!(
            overlay_key(&mut o, k(KeyCode::Enter), &exists),
            OverlayAction::None
        );
        assert_eq!(o, typed(""));
        assert_eq!(
            action_for_key(key('p'), &Settings::default(), 2),
            Action::OpenPicker
        );
        assert_eq!(
            action_for_key(key('s'), &Settings::default(), 2),
            Action::StartSave
        );
    }
}
